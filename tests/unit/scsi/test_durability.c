/* Durability requests on the data path, checked where they leave ix: the io_uring submission
 * queue entry each SCSI command produces on a file LU. A write with FUA, any write while the
 * write cache is off (WCE=0) and WRITE AND VERIFY must be submitted with RWF_DSYNC; SYNCHRONIZE
 * CACHE must become IORING_OP_FSYNC with IORING_FSYNC_DATASYNC; a plain write with the write
 * cache on must not be synchronous. tests/interop/durability.py checks the same from the
 * kernel's side (ext4 sync tracepoints) with a real session and kill -9.
 *
 * The ring is private to bs_uring.c, so this test includes that file (its functions then come
 * from here instead of libixcore) to read the submission queue. */
#include "backend/bs_uring.c"

#include <unistd.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

const uint8_t zblk[4096];

enum { L_WCE = 0, L_WT = 1 }; /* write cache on; write-through */

static char paths[2][32];

static void add_file_lu(struct env *e, uint32_t lun, bool wce)
{
	struct scsi_lu_cfg cfg = {.backend = BS_TYPE_FILE,
				  .path = paths[lun],
				  .size_bytes = 1 << 20,
				  .write_cache = wce,
				  .target_name = "iqn.2024-01.org.example:dur",
				  .lun = lun};
	struct scsi_lu *lu;
	char err[128] = "";
	int fd;

	snprintf(paths[lun], sizeof(paths[lun]), "/tmp/ix-dur-XXXXXX");
	fd = mkstemp(paths[lun]);
	if (fd >= 0)
		close(fd);
	CHECK_EQ(scsi_lu_new(&cfg, &lu, err, sizeof(err)), 0);
	if (err[0])
		printf("# %s\n", err);
	CHECK_EQ(scsi_lun_map_add(e->map, lun, lu), 0);
	scsi_lu_put(lu);
}

/* Run one command and return the last SQE it produced (NULL unless exactly one). */
static const struct io_uring_sqe *run_sqe(struct env *e, uint32_t lun, const uint8_t *cdb,
					  size_t cdb_size, const uint8_t *dout, uint32_t dlen)
{
	struct io_uring_sq *sq = &e->thr->bs->ring.sq;
	unsigned before = sq->sqe_tail;
	struct tcmd t;

	CHECK_EQ(t_run_n(e, e->nx, lun, cdb, cdb_size, 0, dout, dlen, &t), 1);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(sq->sqe_tail - before, 1);
	if (sq->sqe_tail - before != 1)
		return NULL;
	return &sq->sqes[(sq->sqe_tail - 1) & *sq->kring_mask];
}

#define RUN(e, lun, cdb, dout, dlen) run_sqe(e, lun, cdb, sizeof(cdb), dout, dlen)

static void expect_write(const struct io_uring_sqe *s, bool dsync, const char *what)
{
	printf("# %s: %s\n", what, dsync ? "RWF_DSYNC" : "no sync");
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK(s->opcode == IORING_OP_WRITE || s->opcode == IORING_OP_WRITEV);
	CHECK_EQ(s->rw_flags, dsync ? RWF_DSYNC : 0);
}

static void expect_flush(const struct io_uring_sqe *s, const char *what)
{
	printf("# %s: fdatasync\n", what);
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ(s->opcode, IORING_OP_FSYNC);
	CHECK_EQ(s->fsync_flags, IORING_FSYNC_DATASYNC);
}

int main(void)
{
	static const uint8_t w10[16] = {0x2a, 0, 0, 0, 0, 8, 0, 0, 8, 0};
	static const uint8_t w10_fua[16] = {0x2a, 0x08, 0, 0, 0, 8, 0, 0, 8, 0};
	static const uint8_t w12_fua[16] = {0xaa, 0x08, 0, 0, 0, 16, 0, 0, 0, 8, 0, 0};
	static const uint8_t w16_fua[16] = {0x8a, 0x08, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0, 8, 0, 0};
	static const uint8_t wv10[16] = {0x2e, 0, 0, 0, 0, 32, 0, 0, 8, 0};
	static const uint8_t w6[6] = {0x0a, 0, 0, 40, 8, 0};
	static const uint8_t sync10[16] = {0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	static const uint8_t sync16[16] = {0x91};
	static const uint8_t rs[16] = {0x03, 0, 0, 0, 18, 0};
	static uint8_t data[4096];
	struct tcmd t;
	struct env e;

	memset(&e, 0, sizeof(e)); /* map_ok and anything the harness grows start false */
	e.loop = ev_loop_new();
	e.thr = scsi_thread_new(e.loop, NULL);
	e.map = scsi_lun_map_new();
	e.buf = aligned_alloc(4096, TBUF);
	CHECK(e.loop && e.thr && e.map && e.buf);
	if (!e.loop || !e.thr || !e.map || !e.buf)
		return tap_done();
	add_file_lu(&e, L_WCE, true);
	add_file_lu(&e, L_WT, false);
	e.nx = scsi_nexus_new(e.map, "iqn.i1,i,0x1", "iqn.2024-01.org.example:dur,t,0x1");
	for (uint32_t l = L_WCE; l <= L_WT; l++) /* the power-on unit attentions */
		t_run(&e, e.nx, l, rs, 18, NULL, 0, &t);
	memset(data, 0x5c, sizeof(data));

	expect_write(RUN(&e, L_WCE, w10, data, 4096), false, "WRITE(10), write cache on");
	expect_write(RUN(&e, L_WCE, w10_fua, data, 4096), true, "WRITE(10) FUA");
	expect_write(RUN(&e, L_WCE, w12_fua, data, 4096), true, "WRITE(12) FUA");
	expect_write(RUN(&e, L_WCE, w16_fua, data, 4096), true, "WRITE(16) FUA");
	expect_write(RUN(&e, L_WCE, wv10, data, 4096), true, "WRITE AND VERIFY(10)");
	expect_write(RUN(&e, L_WT, w10, data, 4096), true, "WRITE(10), write cache off");
	expect_write(RUN(&e, L_WT, w6, data, 4096), true, "WRITE(6), write cache off");
	expect_flush(RUN(&e, L_WCE, sync10, NULL, 0), "SYNCHRONIZE CACHE(10)");
	expect_flush(RUN(&e, L_WCE, sync16, NULL, 0), "SYNCHRONIZE CACHE(16)");

	scsi_nexus_free(e.nx);
	scsi_lun_map_free(e.map);
	scsi_thread_free(e.thr);
	ev_loop_free(e.loop);
	free(e.buf);
	unlink(paths[0]);
	unlink(paths[1]);
	return tap_done();
}
