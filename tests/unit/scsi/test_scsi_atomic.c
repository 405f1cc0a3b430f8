/* The commands that hold a block range exclusively (COMPARE AND WRITE, ORWRITE, WRITE ATOMIC)
 * and the LU range guard under them; EXTENDED COPY and RECEIVE COPY RESULTS between LUs of one
 * index; WRITE SAME to the last block. Commands run concurrently here: each has its own
 * buffer, is started without waiting, and the loop runs until all have completed. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

const uint8_t zblk[4096];

#define BIG (4u << 20) /* per-command buffer: a whole 4 MiB LU fits */

enum { A_RAM = 0, A_FILE = 1, A_DST = 2, A_RO = 3, A_4K = 4, A_P512 = 5 };

struct ccmd {
	struct scsi_cmd c;
	int ndone;
	uint8_t cdb[16];
	uint8_t *buf;
};

static void c_done(struct scsi_cmd *c)
{
	((struct ccmd *)c->priv)->ndone++;
}

/* Start a command on e's thread; it may complete later. */
static void c_start(struct env *e, uint32_t lun, const uint8_t *cdb, size_t cdb_size,
		    uint32_t din, const uint8_t *dout, uint32_t dout_len, struct ccmd *t)
{
	uint8_t *buf = t->buf;

	memset(t, 0, sizeof(*t));
	t->buf = buf ? buf : aligned_alloc(4096, BIG);
	memcpy(t->cdb, cdb, cdb_size < 16 ? cdb_size : 16);
	memset(t->buf, 0xee, BIG);
	if (dout_len)
		memcpy(t->buf, dout, dout_len);
	t->c.thread = e->thr;
	t->c.map = e->map;
	t->c.nexus = e->nx;
	t->c.lun_field = scsi_lun_encode(lun);
	t->c.cdb = t->cdb;
	t->c.cdb_len = 16;
	t->c.buf = t->buf;
	t->c.buf_len = BIG;
	t->c.data_out_len = dout_len;
	t->c.data_in_max = din;
	t->c.done = c_done;
	t->c.priv = t;
	scsi_cmd_exec(&t->c);
}

#define C_START(e, lun, cdb, ...) c_start(e, lun, cdb, sizeof(cdb), __VA_ARGS__)

/* Run e's loop until every command completed; returns how many did not complete exactly once.
 * No CHECK here: worker threads use it too, and TAP numbering is the main thread's. */
static int c_wait_n(struct env *e, struct ccmd **ts, int n)
{
	int bad = 0;

	for (int spin = 0; spin < 2000; spin++) {
		int left = 0;

		for (int i = 0; i < n; i++)
			left += ts[i]->ndone == 0;
		if (!left)
			break;
		ev_loop_run_once(e->loop, 10);
	}
	for (int i = 0; i < n; i++)
		bad += ts[i]->ndone != 1;
	return bad;
}

static void c_wait(struct env *e, struct ccmd **ts, int n)
{
	CHECK_EQ(c_wait_n(e, ts, n), 0);
}

static void c_run(struct env *e, uint32_t lun, const uint8_t *cdb, size_t cdb_size, uint32_t din,
		  const uint8_t *dout, uint32_t dout_len, struct ccmd *t)
{
	struct ccmd *one = t;

	c_start(e, lun, cdb, cdb_size, din, dout, dout_len, t);
	c_wait(e, &one, 1);
}

#define C_RUN(e, lun, cdb, ...) c_run(e, lun, cdb, sizeof(cdb), __VA_ARGS__)
/* For CDBs built by a helper into a 16-byte buffer (a pointer has no useful sizeof). */
#define C_RUNP(e, lun, cdb, ...) c_run(e, lun, cdb, 16, __VA_ARGS__)

static void c_sense(const struct ccmd *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
	CHECK_EQ(t->c.status, 0x02);
	CHECK_EQ(t->c.sense[2] & 0x0f, key);
	CHECK_EQ(t->c.sense[12], asc);
	CHECK_EQ(t->c.sense[13], ascq);
}

static char file_path[64];
static struct scsi_lu_index *idx;
static struct scsi_lun_map *map2; /* a second target: A_DST lives only here */

static struct scsi_lu *add_lu(struct scsi_lun_map *map, uint32_t lun, struct scsi_lu_cfg cfg)
{
	struct scsi_lu *lu = NULL;
	char err[128] = "";
	int rc;

	cfg.lun = lun;
	cfg.target_name = map == map2 ? "iqn.2024-01.org.example:t2" : "iqn.2024-01.org.example:t1";
	cfg.index = idx;
	rc = scsi_lu_new(&cfg, &lu, err, sizeof(err));
	if (rc < 0)
		printf("# scsi_lu_new(%u): %s\n", lun, err);
	CHECK_EQ(rc, 0);
	if (rc == 0) {
		CHECK_EQ(scsi_lun_map_add(map, lun, lu), 0);
		scsi_lu_put(lu);
	}
	return lu;
}

static void setup(struct env *e)
{
	int fd;

	e->loop = ev_loop_new();
	e->thr = scsi_thread_new(e->loop, NULL);
	CHECK(e->loop && e->thr);
	e->map = scsi_lun_map_new();
	map2 = scsi_lun_map_new();
	idx = scsi_lu_index_new();
	e->buf = aligned_alloc(4096, TBUF);
	strcpy(file_path, "/tmp/ix-atomic-XXXXXX");
	fd = mkstemp(file_path);
	close(fd);
	add_lu(e->map, A_RAM,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 4 << 20, .thin = true});
	add_lu(e->map, A_FILE,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_FILE, .path = file_path, .size_bytes = 4 << 20});
	add_lu(map2, A_DST, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 4 << 20});
	add_lu(e->map, A_RO,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .readonly = true});
	add_lu(e->map, A_4K,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .block_size = 4096});
	add_lu(e->map, A_P512,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .phys_block_size = 512});
	e->nx = scsi_nexus_new(e->map, "iqn.i1,i,0x000000000001", "iqn.2024-01.org.example:t1,t,0x1");
}

/* ---- the physical block: the backend's, or configured ---- */

static void test_phys_block(struct env *e)
{
	struct ccmd t = {0};
	static const uint8_t rc16[16] = {0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0};
	static const uint8_t bl[6] = {0x12, 1, 0xb0, 0, 64, 0};

	printf("# physical block: a RAM page by default, 512 bytes when configured so\n");
	C_RUN(e, A_RAM, rc16, 32, NULL, 0, &t);
	CHECK_EQ(t.buf[13] & 0x0f, 3);
	C_RUN(e, A_P512, rc16, 32, NULL, 0, &t);
	CHECK_EQ(t.buf[13] & 0x0f, 0);
	C_RUN(e, A_P512, bl, 64, NULL, 0, &t);
	CHECK_EQ(get_be16(t.buf + 6), 1);  /* OPTIMAL TRANSFER LENGTH GRANULARITY */
	CHECK_EQ(get_be32(t.buf + 48), 1); /* ATOMIC ALIGNMENT */
	CHECK_EQ(get_be32(t.buf + 44), 0xffff); /* MAXIMUM ATOMIC TRANSFER LENGTH */
	free(t.buf);
}

/* ---- the guard itself ---- */

static int resumed;
static void on_resume(struct scsi_cmd *cmd)
{
	(void)cmd;
	resumed++;
}

static void fake_cmd(struct env *e, struct scsi_cmd *c)
{
	memset(c, 0, sizeof(*c));
	c->thread = e->thr;
}

static void test_guard(struct env *e)
{
	struct scsi_guard *g = scsi_guard_new();
	struct scsi_cmd fast, ex, sh_in, sh_out, ex2;

	printf("# range guard: fast path, exclusive waits for the drain, overlap, FIFO\n");
	fake_cmd(e, &fast);
	fake_cmd(e, &ex);
	fake_cmd(e, &sh_in);
	fake_cmd(e, &sh_out);
	fake_cmd(e, &ex2);
	CHECK_EQ(scsi_guard_enter(g, &fast, 0, 8, false, on_resume), 1);
	CHECK_EQ(scsi_guard_fast_count(g), 1);
	CHECK(scsi_priv(&fast)->slow == NULL); /* no lock, no context on the common path */
	/* An exclusive range must wait for the fast-path I/O in flight, wherever it is. */
	resumed = 0;
	CHECK_EQ(scsi_guard_enter(g, &ex, 100, 8, true, on_resume), 0);
	CHECK_EQ(scsi_guard_excl_count(g), 1);
	/* While it waits, I/O takes the slow path: overlapping waits, disjoint goes. */
	CHECK_EQ(scsi_guard_enter(g, &sh_in, 104, 1, false, on_resume), 0);
	CHECK_EQ(scsi_guard_enter(g, &sh_out, 200, 1, false, on_resume), 1);
	CHECK_EQ(scsi_guard_fast_count(g), 1);
	scsi_guard_leave(g, &fast); /* the drain grants the exclusive range, posted to its loop */
	CHECK_EQ(resumed, 0);
	for (int i = 0; i < 10 && resumed == 0; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(resumed, 1);
	/* A second exclusive range on the same blocks queues behind the first. */
	CHECK_EQ(scsi_guard_enter(g, &ex2, 96, 16, true, on_resume), 0);
	scsi_guard_leave(g, &sh_out);
	ev_loop_run_once(e->loop, 0);
	CHECK_EQ(resumed, 1);
	scsi_guard_leave(g, &ex); /* the shared one that waited goes first (FIFO), not ex2 */
	for (int i = 0; i < 10 && resumed < 2; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(resumed, 2);
	scsi_guard_leave(g, &sh_in);
	for (int i = 0; i < 10 && resumed < 3; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(resumed, 3);
	scsi_guard_leave(g, &ex2);
	CHECK_EQ(scsi_guard_excl_count(g), 0);
	/* Back to the fast path. */
	CHECK_EQ(scsi_guard_enter(g, &fast, 0, 8, false, on_resume), 1);
	CHECK(scsi_priv(&fast)->gmode != 0);
	scsi_guard_leave(g, &fast);
	CHECK_EQ(scsi_guard_fast_count(g), 0);
	scsi_slow_put(&ex);
	scsi_slow_put(&sh_in);
	scsi_slow_put(&sh_out);
	scsi_slow_put(&ex2);
	scsi_guard_free(g);
}

/* ---- COMPARE AND WRITE against plain I/O in flight ---- */

static uint8_t blk[4][512], two[1024];

static void fill(uint8_t *b, uint8_t v, size_t n)
{
	memset(b, v, n);
}

static const uint8_t *w10(uint32_t lba, uint8_t nb)
{
	static _Thread_local uint8_t cdb[16];

	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x2a;
	put_be32(cdb + 2, lba);
	cdb[8] = nb;
	return cdb;
}

static void test_caw_ordering(struct env *e, uint32_t lun)
{
	static const uint8_t caw[16] = {0x89, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0};
	static const uint8_t rd[10] = {0x28, 0, 0, 0, 0, 10, 0, 0, 1, 0};
	struct ccmd a = {0}, b = {0};
	struct ccmd *both[2] = {&a, &b};
	uint8_t w[16];
	bool same = true;

	printf("# COMPARE AND WRITE ordered against a WRITE in flight (LUN %u)\n", lun);
	memcpy(w, w10(10, 1), sizeof(w));
	fill(blk[0], 0x22, 512);
	C_START(e, lun, w, 0, blk[0], 512, &a); /* in flight (file: on the ring) */
	fill(two, 0x22, 512);
	fill(two + 512, 0x33, 512);
	C_START(e, lun, caw, 0, two, 1024, &b); /* must compare against the WRITE's data */
	c_wait(e, both, 2);
	CHECK_EQ(a.c.status, 0);
	CHECK_EQ(b.c.status, 0);

	printf("# a WRITE sent during a COMPARE AND WRITE lands after it\n");
	fill(two, 0x33, 512);
	fill(two + 512, 0x44, 512);
	C_START(e, lun, caw, 0, two, 1024, &a);
	fill(blk[0], 0x55, 512);
	C_START(e, lun, w, 0, blk[0], 512, &b);
	c_wait(e, both, 2);
	CHECK_EQ(a.c.status, 0);
	CHECK_EQ(b.c.status, 0);
	C_RUN(e, lun, rd, 512, NULL, 0, &a);
	fill(blk[1], 0x55, 512);
	CHECK_MEM(a.buf, blk[1], 512);

	printf("# a READ during a COMPARE AND WRITE sees all old or all new data\n");
	fill(two, 0x55, 512);
	fill(two + 512, 0x66, 512);
	C_START(e, lun, caw, 0, two, 1024, &a);
	C_START(e, lun, rd, 512, NULL, 0, &b);
	c_wait(e, both, 2);
	CHECK_EQ(a.c.status, 0);
	for (int i = 1; i < 512; i++)
		same &= b.buf[i] == b.buf[0];
	CHECK(same && (b.buf[0] == 0x55 || b.buf[0] == 0x66));
	free(a.buf);
	free(b.buf);
}

/* ---- COMPARE AND WRITE edge cases libiscsi checks ---- */

static void test_caw_fields(struct env *e)
{
	struct ccmd t = {0};

	printf("# COMPARE AND WRITE: 0 blocks with data, too many blocks, wrong data-out size\n");
	/* NUMBER OF LOGICAL BLOCKS 0 with a data-out: 256 sent in an 8-bit field */
	C_RUN(e, A_RAM, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, zblk, 1024, &t);
	c_sense(&t, 5, 0x24, 0);
	C_RUN(e, A_RAM, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, A_RAM, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0), 0, zblk, 4096, &t);
	c_sense(&t, 5, 0x24, 0);
	/* data-out of 4 blocks for a 1-block (then 3-block) compare and write */
	C_RUN(e, A_RAM, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 0, zblk, 2048, &t);
	c_sense(&t, 5, 0x24, 0);
	C_RUN(e, A_RAM, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0), 0, zblk, 2048, &t);
	c_sense(&t, 5, 0x24, 0);
	free(t.buf);
}

/* ---- ORWRITE ---- */

static void test_orwrite(struct env *e, uint32_t lun)
{
	static uint8_t data[3 << 20];
	struct ccmd t = {0};
	uint32_t nb = sizeof(data) / 512;
	uint8_t orw[16] = {0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	uint8_t w16[16] = {0x8a};
	uint8_t r16[16] = {0x88};
	bool ok = true;

	printf("# ORWRITE of 3 MiB (three bounce chunks) on LUN %u\n", lun);
	put_be32(w16 + 10, nb);
	put_be32(r16 + 10, nb);
	put_be32(orw + 10, nb);
	fill(data, 0x01, sizeof(data));
	C_RUN(e, lun, w16, 0, data, sizeof(data), &t);
	CHECK_EQ(t.c.status, 0);
	fill(data, 0x82, sizeof(data));
	C_RUN(e, lun, orw, 0, data, sizeof(data), &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, sizeof(data));
	C_RUN(e, lun, r16, sizeof(data), NULL, 0, &t);
	for (uint32_t i = 0; i < sizeof(data); i++)
		ok &= t.buf[i] == 0x83;
	CHECK(ok);
	printf("# ORWRITE: beyond the end, zero blocks, read-only LU, DPO/FUA\n");
	C_RUN(e, lun, B(0x8b, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 1, 0, 0), 0, zblk, 512, &t);
	c_sense(&t, 5, 0x21, 0);
	C_RUN(e, lun, B(0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, A_RO, B(0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 0, zblk, 512, &t);
	c_sense(&t, 7, 0x27, 0);
	C_RUN(e, lun, B(0x8b, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, lun, B(0x8b, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 0, zblk, 512, &t);
	c_sense(&t, 5, 0x24, 0); /* ORPROTECT */
	free(t.buf);
}

/* ---- WRITE ATOMIC (16) ---- */

static void test_write_atomic(struct env *e)
{
	struct ccmd t = {0};
	static uint8_t data[8 * 512];

	printf("# WRITE ATOMIC(16): granules of a physical block, aligned, whole data-out\n");
	fill(data, 0x5a, sizeof(data));
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0), 0, data, 4096, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0), 0, data, 4096, &t);
	c_sense(&t, 5, 0x24, 0); /* misaligned: the field pointer names byte 2, the LBA */
	CHECK_EQ(get_be16(t.c.sense + 16), 2);
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 0, data, 512, &t);
	c_sense(&t, 5, 0x24, 0); /* not a granule: byte 12, the TRANSFER LENGTH */
	CHECK_EQ(get_be16(t.c.sense + 16), 12);
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0), 0, data, 2048, &t);
	c_sense(&t, 5, 0x24, 0); /* short data-out */
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0), 0, data, 4096, &t);
	c_sense(&t, 5, 0x24, 0); /* ATOMIC BOUNDARY: none supported */
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, A_RAM, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0x20, 0x08, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	c_sense(&t, 5, 0x21, 0);
	C_RUN(e, A_4K, B(0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0), 0, data, 4096, &t);
	CHECK_EQ(t.c.status, 0); /* 4 KiB blocks: every block is a granule */
	C_RUN(e, A_RAM, B(0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0), 4096, NULL, 0, &t);
	CHECK_MEM(t.buf, data, 4096);
	free(t.buf);
}

/* ---- WRITE SAME to the last block ---- */

static void test_write_same(struct env *e)
{
	struct ccmd t = {0};
	uint32_t nb = (4u << 20) / 512;
	uint8_t ws16[16] = {0x93, 0x01};
	static uint8_t ones[1024]; /* one block, or two for the wrong data-out size */

	printf("# WRITE SAME: 0 blocks means to the last block, one block of data exactly\n");
	fill(ones, 0xff, sizeof(ones));
	C_RUNP(e, A_RAM, w10(nb - 4, 4), 0, (uint8_t[2048]){0}, 2048, &t);
	put_be64(ws16 + 2, nb - 2); /* NDOB, 0 blocks: zero the last two */
	memcpy(t.buf, ones, 512);
	C_RUN(e, A_RAM, B(0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, ones, 512, &t);
	CHECK_EQ(t.c.status, 0); /* the whole 8192-block LU: within MAXIMUM WRITE SAME LENGTH */
	C_RUN(e, A_RAM, ws16, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, A_RAM, B(0x28, 0, 0, 0, 0x1f, 0xfc, 0, 0, 4, 0), 2048, NULL, 0, &t);
	CHECK_MEM(t.buf, ones, 512);
	CHECK_MEM(t.buf + 512, ones, 512);
	CHECK_MEM(t.buf + 1024, zblk, 1024);
	C_RUN(e, A_RAM, B(0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0), 0, ones, 1024, &t);
	c_sense(&t, 5, 0x24, 0);
	C_RUN(e, A_RAM, B(0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0), 0, ones, 256, &t);
	c_sense(&t, 5, 0x24, 0);
	C_RUN(e, A_RAM, B(0x41, 0x10, 0, 0, 0, 0, 0, 0, 1, 0), 0, ones, 512, &t);
	c_sense(&t, 5, 0x24, 0); /* ANCHOR: ANC_SUP is 0 */
	/* UNMAP on a thin LBPRZ LU deallocates whatever the pattern: the blocks read zeros */
	C_RUN(e, A_RAM, B(0x41, 0x08, 0, 0, 0x1f, 0xfc, 0, 0, 2, 0), 0, ones, 512, &t);
	CHECK_EQ(t.c.status, 0);
	C_RUN(e, A_RAM, B(0x28, 0, 0, 0, 0x1f, 0xfc, 0, 0, 2, 0), 1024, NULL, 0, &t);
	CHECK_MEM(t.buf, zblk, 1024);
	/* ... and is refused on a fully provisioned LU (LBPWS 0), pointing at the UNMAP bit */
	C_RUN(e, A_4K, B(0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0), 0, zblk, 4096, &t);
	c_sense(&t, 5, 0x24, 0);
	CHECK_MEM(t.c.sense + 15, B(0xcb, 0, 1), 3); /* SKSV, C/D, BPV, bit 3; byte 1 */
	free(t.buf);
}

/* ---- EXTENDED COPY ---- */

/* Parameter list: header, n CSCDs naming LUs by NAA, one block-to-block segment. */
static uint32_t xc_list(uint8_t *d, uint8_t list_id, struct scsi_lu **lus, int n, uint16_t src,
			uint16_t dst, uint16_t blocks, uint64_t src_lba, uint64_t dst_lba)
{
	uint32_t off = 16;

	memset(d, 0, 16 + 32 * (size_t)n + 28);
	d[0] = list_id;
	put_be16(d + 2, (uint16_t)(32 * n));
	put_be32(d + 8, 28);
	for (int i = 0; i < n; i++, off += 32) {
		d[off] = 0xe4;
		d[off + 4] = 0x01; /* binary */
		d[off + 5] = 0x03; /* LU association, NAA */
		d[off + 7] = 16;
		memcpy(d + off + 8, lus[i]->naa, 16);
		put_be24(d + off + 29, lus[i]->block_size);
	}
	d[off] = 0x02;
	put_be16(d + off + 2, 24);
	put_be16(d + off + 4, src);
	put_be16(d + off + 6, dst);
	put_be16(d + off + 10, blocks);
	put_be64(d + off + 12, src_lba);
	put_be64(d + off + 20, dst_lba);
	return off + 28;
}

static const uint8_t *xc_cdb(uint32_t len)
{
	static uint8_t cdb[16];

	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x83;
	put_be32(cdb + 10, len);
	return cdb;
}

static void test_xcopy(struct env *e)
{
	struct scsi_lu *src = scsi_lun_map_get(e->map, A_RAM);
	struct scsi_lu *dst = scsi_lun_map_get(map2, A_DST);
	struct scsi_lu *ro = scsi_lun_map_get(e->map, A_RO);
	struct scsi_lu *k4 = scsi_lun_map_get(e->map, A_4K);
	struct scsi_lu *lus[17];
	static uint8_t data[3000 * 512], list[1024];
	struct ccmd t = {0};
	uint8_t w16[16] = {0x8a}, r16[16] = {0x88};
	uint32_t len;

	printf("# EXTENDED COPY of 3000 blocks to an LU of another target, by NAA\n");
	for (uint32_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + i / 512);
	put_be32(w16 + 10, 3000);
	C_RUN(e, A_RAM, w16, 0, data, sizeof(data), &t);
	CHECK_EQ(t.c.status, 0);
	lus[0] = src;
	lus[1] = dst;
	len = xc_list(list, 7, lus, 2, 0, 1, 3000, 0, 100);
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	CHECK_EQ(t.c.status, 0);
	{
		struct scsi_nexus *nx2 = scsi_nexus_new(map2, "iqn.i1,i,0x1", "t2,t,0x1");
		struct scsi_cmd *c = &t.c;
		uint8_t cdb[16] = {0x88};

		/* read the destination through its own target */
		put_be64(cdb + 2, 100);
		put_be32(cdb + 10, 3000);
		memset(&t.c, 0, sizeof(t.c));
		c->thread = e->thr;
		c->map = map2;
		c->nexus = nx2;
		c->lun_field = scsi_lun_encode(A_DST);
		c->cdb = cdb;
		c->cdb_len = 16;
		c->buf = t.buf;
		c->buf_len = BIG;
		c->data_in_max = sizeof(data);
		c->done = c_done;
		c->priv = &t;
		for (int pass = 0; pass < 2; pass++) { /* the first answer is the power-on UA */
			t.ndone = 0;
			scsi_cmd_exec(c);
			CHECK_EQ(t.ndone, 1);
		}
		CHECK_EQ(c->status, 0);
		CHECK_MEM(t.buf, data, sizeof(data));
		scsi_nexus_free(nx2);
	}
	printf("# RECEIVE COPY RESULTS: status of list 7, no list 8, operating parameters\n");
	C_RUN(e, A_RAM, B(0x84, 0x00, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), 64, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 12);
	CHECK_MEM(t.buf, B(0, 0, 0, 8, 0x01, 0, 1, 0x00, 0, 0x17, 0x70, 0), 12);
	C_RUN(e, A_RAM, B(0x84, 0x00, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), 64, NULL, 0, &t);
	c_sense(&t, 5, 0x24, 0);
	C_RUN(e, A_RAM, B(0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), 64, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(get_be16(t.buf + 8), 16);
	CHECK_EQ(get_be16(t.buf + 10), 16);
	CHECK_EQ(get_be32(t.buf + 12), 16 * 32 + 16 * 28);
	CHECK_EQ(t.buf[43], 2);

	printf("# EXTENDED COPY overlapping itself forwards within one LU\n");
	len = xc_list(list, 1, lus, 1, 0, 0, 2500, 0, 1000);
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	CHECK_EQ(t.c.status, 0);
	put_be64(r16 + 2, 1000);
	put_be32(r16 + 10, 2500);
	C_RUN(e, A_RAM, r16, 2500 * 512, NULL, 0, &t);
	CHECK_MEM(t.buf, data, 2500 * 512);

	printf("# EXTENDED COPY errors: parameter list, descriptors, targets, ranges\n");
	C_RUNP(e, A_RAM, xc_cdb(0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 0);
	C_RUNP(e, A_RAM, xc_cdb(len - 1), 0, list, len - 1, &t);
	c_sense(&t, 5, 0x1a, 0); /* PARAMETER LIST LENGTH ERROR */
	for (int i = 0; i < 17; i++)
		lus[i] = src;
	len = xc_list(list, 1, lus, 17, 0, 1, 8, 0, 0);
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 5, 0x26, 0x06); /* TOO MANY TARGET DESCRIPTORS */
	lus[1] = dst;
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 0);
	list[16] = 0xe0; /* Fibre Channel N_Port_Name CSCD */
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 5, 0x26, 0x07);
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 0);
	list[16 + 64] = 0x03; /* stream-to-stream segment */
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 5, 0x26, 0x09);
	len = xc_list(list, 1, lus, 2, 0, 2, 8, 0, 0); /* no CSCD 2 */
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 0x0a, 0x0d, 0x02);
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 8192 - 4); /* past the destination's end */
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 0x0a, 0x00, 0x00);
	CHECK_MEM(t.c.sense + 8, B(0, 0, 0, 0), 4); /* COMMAND-SPECIFIC INFORMATION: segment 0 */
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 0);
	list[16 + 32 + 8] ^= 0xff; /* an NAA no LU has */
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 0x0a, 0x0d, 0x02);
	lus[1] = ro;
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 0);
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 7, 0x27, 0);
	lus[1] = k4;
	len = xc_list(list, 1, lus, 2, 0, 1, 8, 0, 0);
	put_be24(list + 16 + 32 + 29, 512); /* a block length the LU does not have */
	C_RUNP(e, A_RAM, xc_cdb(len), 0, list, len, &t);
	c_sense(&t, 5, 0x26, 0);
	C_RUN(e, A_RAM, B(0x84, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), 64, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.buf[4], 0x02); /* list 1 ended with an error */
	free(t.buf);
}

/* ---- COMPARE AND WRITE increments from two threads, with plain writes beside them ---- */

struct worker {
	struct env e;
	int iters;
	int miscompares;
	int bad; /* commands that did not complete exactly once, or failed */
	int id;
};

/* c_run without CHECKs, for the worker threads. */
static void w_run(struct worker *w, const uint8_t *cdb, size_t cdb_size, uint32_t din,
		  const uint8_t *dout, uint32_t dout_len, struct ccmd *t)
{
	struct ccmd *one = t;

	c_start(&w->e, A_FILE, cdb, cdb_size, din, dout, dout_len, t);
	w->bad += c_wait_n(&w->e, &one, 1);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ccmd t = {0};
	uint8_t cmp[1024], side[512];
	uint8_t rd[10] = {0x28, 0, 0, 0, 0x01, 0xf4, 0, 0, 1, 0};

	w->e.loop = ev_loop_new();
	w->e.thr = scsi_thread_new(w->e.loop, NULL);
	fill(side, (uint8_t)w->id, 512);
	for (int done = 0; done < w->iters;) {
		uint32_t v;

		w_run(w, rd, sizeof(rd), 512, NULL, 0, &t);
		w->bad += t.c.status != 0;
		v = get_be32(t.buf);
		memcpy(cmp, t.buf, 512);
		memcpy(cmp + 512, t.buf, 512);
		put_be32(cmp + 512, v + 1);
		w_run(w, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xf4, 0, 0, 0, 1, 0, 0), 16, 0, cmp, 1024,
		      &t);
		if (t.c.status == 0)
			done++;
		else
			w->miscompares++;
		w_run(w, w10(0x1f5 + (uint32_t)w->id, 1), 16, 0, side, 512, &t);
		w->bad += t.c.status != 0;
	}
	free(t.buf);
	scsi_thread_free(w->e.thr);
	ev_loop_free(w->e.loop);
	return NULL;
}

static void test_threads(struct env *e)
{
	struct worker w[2];
	pthread_t th[2];
	struct ccmd t = {0};

	printf("# COMPARE AND WRITE from two threads through io_uring, writes beside\n");
	C_RUNP(e, A_FILE, w10(0x1f4, 1), 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){.e = *e, .iters = 500, .id = i};
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(w[0].bad + w[1].bad, 0);
	C_RUN(e, A_FILE, B(0x28, 0, 0, 0, 0x01, 0xf4, 0, 0, 1, 0), 512, NULL, 0, &t);
	CHECK_EQ(get_be32(t.buf), 1000);
	CHECK_EQ(scsi_guard_fast_count(((struct scsi_lu *)scsi_lun_map_get(e->map, A_FILE))->guard),
		 0);
	printf("# %d + %d miscompares retried\n", w[0].miscompares, w[1].miscompares);
	free(t.buf);
}

int main(void)
{
	struct env e;
	struct ccmd t = {0};

	setup(&e);
	for (uint32_t lun = 0; lun <= A_P512; lun++) { /* take the power-on unit attentions */
		if (lun == A_DST)
			continue;
		C_RUN(&e, lun, B(0x00, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	}
	free(t.buf);
	test_phys_block(&e);
	test_guard(&e);
	test_caw_ordering(&e, A_RAM);
	test_caw_ordering(&e, A_FILE);
	test_caw_fields(&e);
	test_orwrite(&e, A_RAM);
	test_orwrite(&e, A_FILE);
	test_write_atomic(&e);
	test_write_same(&e);
	test_xcopy(&e);
	test_threads(&e);
	scsi_nexus_free(e.nx);
	scsi_lun_map_free(e.map);
	scsi_lun_map_free(map2);
	scsi_lu_index_put(idx);
	scsi_thread_free(e.thr);
	ev_loop_free(e.loop);
	free(e.buf);
	unlink(file_path);
	return tap_done();
}
