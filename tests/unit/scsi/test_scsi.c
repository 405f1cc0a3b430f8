/* SCSI core: table-driven SPC-4/SBC-3 checks over RAM and file LUs (expected bytes written out
 * from the standards), plus unit attentions, reservations, data round trips, thin
 * provisioning, COMPARE AND WRITE, async completion through io_uring and error injection. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

static char file_path[64], err_path[64];
const uint8_t zblk[4096];

static void add_lu(struct env *e, uint32_t lun, struct scsi_lu_cfg cfg)
{
	struct scsi_lu *lu;
	char err[128] = "";
	int rc;

	cfg.lun = lun;
	cfg.target_name = "iqn.2024-01.org.example:t1";
	rc = scsi_lu_new(&cfg, &lu, err, sizeof(err));
	if (rc < 0)
		printf("# scsi_lu_new(%u): %s\n", lun, err);
	CHECK_EQ(rc, 0);
	if (rc == 0) {
		CHECK_EQ(scsi_lun_map_add(e->map, lun, lu), 0);
		scsi_lu_put(lu);
	}
}

static void setup(struct env *e)
{
	int fd;

	memset(e, 0, sizeof(*e));
	e->loop = ev_loop_new();
	CHECK(e->loop != NULL);
	e->thr = scsi_thread_new(e->loop, NULL);
	CHECK(e->thr != NULL);
	e->map = scsi_lun_map_new();
	e->buf = aligned_alloc(4096, TBUF);
	strcpy(file_path, "/tmp/ix-scsi-XXXXXX");
	fd = mkstemp(file_path);
	close(fd);
	strcpy(err_path, "/tmp/ix-scsi-err-XXXXXX");
	fd = mkstemp(err_path);
	close(fd);
	add_lu(e, L_RAM,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_RAM,
				    .size_bytes = 1 << 20,
				    .thin = true,
				    .write_cache = true,
				    .serial = "SER0"});
	add_lu(e, L_RO,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_RAM, .size_bytes = 64 << 10, .readonly = true});
	add_lu(e, L_NOMED, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .no_medium = true});
	add_lu(e, L_FILE,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_FILE,
				    .path = file_path,
				    .size_bytes = 1 << 20,
				    .thin = true,
				    .write_cache = true});
	add_lu(e, L_4K,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .block_size = 4096});
	add_lu(e, L_ERR,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_FILE, .path = err_path, .size_bytes = 64 << 10});
	e->nx =
	    scsi_nexus_new(e->map, "iqn.i1,i,0x000000000001", "iqn.2024-01.org.example:t1,t,0x1");
}

/* ---- unit attention: once per nexus per LU ---- */

static void test_unit_attention(struct env *e)
{
	struct scsi_nexus *nx2 = scsi_nexus_new(e->map, "iqn.i2,i,0x2", "t,t,0x1");
	static const uint8_t tur[16] = {0x00};
	static const uint8_t inq[16] = {0x12, 0, 0, 0, 36, 0};
	static const uint8_t rs[16] = {0x03, 0, 0, 0, 18, 0};
	struct tcmd t;

	printf("# unit attention\n");
	t_run(e, e->nx, L_RAM, inq, 36, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0); /* INQUIRY neither reports nor clears it */
	t_run(e, e->nx, L_RAM, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x00);
	t_run(e, e->nx, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* Other nexus: its own power-on UA, through REQUEST SENSE (GOOD with the sense data). */
	t_run(e, nx2, L_RAM, rs, 18, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 18);
	CHECK_MEM(t.c.buf, B(0x70, 0, 0x06, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x29, 0x00, 0, 0, 0, 0),
		  18);
	t_run(e, nx2, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* LU reset by nx2: 29/03 for every nexus, nx2's too (SAM-5 6.3.3). */
	CHECK_EQ(scsi_lu_reset(scsi_lun_map_get(e->map, L_RAM), nx2), 0);
	t_run(e, nx2, L_RAM, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x03);
	t_run(e, nx2, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, L_RAM, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x03);
	t_run(e, e->nx, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* UA reported before an unknown opcode. */
	t_run(e, nx2, L_4K, B(0xc0), 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x00);
	t_run(e, nx2, L_4K, B(0xc0), 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x20, 0x00);
	scsi_nexus_free(nx2);
	/* Clear the power-on UA on every LU for the table tests. */
	for (uint32_t l = 0; l <= L_ERR; l++)
		t_run(e, e->nx, l, rs, 18, NULL, 0, &t);
}

/* ---- LUN inventory changes (what a configuration reload does to a kept target) ---- */

static void test_lun_inventory(struct env *e)
{
	struct scsi_nexus *nx2 = scsi_nexus_new(e->map, "iqn.i2,i,0x2", "t,t,0x1");
	static const uint8_t tur[16] = {0x00};
	static const uint8_t rs[16] = {0x03, 0, 0, 0, 18, 0};
	static const uint8_t rc10[16] = {0x25};
	static const uint8_t reserve6[16] = {0x16};
	const uint32_t lun = 20;
	struct scsi_lu *old, *lu;
	struct tcmd t;

	printf("# LUN inventory changes\n");
	add_lu(e, lun, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 64 << 10});
	t_run(e, e->nx, lun, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x00);
	t_run(e, e->nx, lun, reserve6, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, nx2, L_RAM, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x00);

	old = scsi_lun_map_remove(e->map, lun);
	CHECK(old != NULL);
	CHECK(scsi_lun_map_remove(e->map, lun) == NULL);
	CHECK(scsi_lun_map_remove(e->map, SCSI_MAX_LUNS) == NULL);
	scsi_lun_map_changed(e->map);
	t_run(e, e->nx, lun, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x25, 0x00); /* LOGICAL UNIT NOT SUPPORTED */
	/* every nexus that used an LU of the map: REPORTED LUNS DATA HAS CHANGED, once */
	t_run(e, e->nx, L_RAM, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x3f, 0x0e);
	t_run(e, e->nx, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, nx2, L_RAM, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x3f, 0x0e);
	t_run(e, nx2, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* e->nx still holds old (it used the LUN) and its RESERVE(6); keep a reference to see
	   both go */
	CHECK(atomic_load(&old->resv_holder) == e->nx);
	CHECK_EQ(atomic_load(&old->refs), 2);

	/* Another LU under the same number: the nexus lets go of the old one (and of the
	   reservation it held there) and meets the new one as a fresh LU. */
	add_lu(e, lun, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 128 << 10});
	t_run(e, e->nx, lun, rc10, 8, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x00);
	t_run(e, e->nx, lun, rc10, 8, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_MEM(t.c.buf, B(0, 0, 0, 255, 0, 0, 2, 0), 8);
	CHECK(atomic_load(&old->resv_holder) == NULL);
	CHECK_EQ(atomic_load(&old->refs), 1);
	scsi_lu_put(old);
	t_run(e, nx2, lun, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x00);
	lu = scsi_lun_map_remove(e->map, lun);
	CHECK(lu != NULL);
	scsi_lu_put(lu);
	scsi_nexus_free(nx2);
	/* the 3F/0E unit attentions of e->nx's other LUs, for the table tests */
	for (uint32_t l = 0; l <= L_ERR; l++)
		t_run(e, e->nx, l, rs, 18, NULL, 0, &t);
}

/* ---- data round trips ---- */

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void test_write_read(struct env *e, uint32_t lun, uint32_t bs)
{
	static uint8_t data[16 * 4096], other[16 * 4096];
	struct tcmd t;

	printf("# write/read round trip on LUN %u\n", lun);
	fill(data, sizeof(data), (uint8_t)(0x30 + lun));
	/* WRITE(10) FUA, 16 blocks at LBA 64 */
	t_run(e, e->nx, lun, B(0x2a, 0x08, 0, 0, 0, 64, 0, 0, 16, 0), 0, data, 16 * bs, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, 16 * bs);
	t_run(e, e->nx, lun, B(0x88, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 16, 0, 0), 16 * bs, NULL,
	      0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 16 * bs);
	CHECK_MEM(t.c.buf, data, 16 * bs);
	/* READ(12) of a subrange */
	t_run(e, e->nx, lun, B(0xa8, 0, 0, 0, 0, 65, 0, 0, 0, 2, 0, 0), 2 * bs, NULL, 0, &t);
	CHECK_MEM(t.c.buf, data + bs, 2 * bs);
	/* WRITE(6) then READ(6) */
	t_run(e, e->nx, lun, B(0x0a, 0, 0, 100, 1, 0), 0, data + 2 * bs, bs, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, lun, B(0x08, 0, 0, 100, 1, 0), bs, NULL, 0, &t);
	CHECK_MEM(t.c.buf, data + 2 * bs, bs);
	/* WRITE AND VERIFY(16) + VERIFY(10) BYTCHK=1 match and mismatch */
	t_run(e, e->nx, lun, B(0x8e, 0x02, 0, 0, 0, 0, 0, 0, 0, 120, 0, 0, 0, 2, 0, 0), 0, data,
	      2 * bs, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, lun, B(0x2f, 0x02, 0, 0, 0, 120, 0, 0, 2, 0), 0, data, 2 * bs, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, 2 * bs);
	memcpy(other, data, 2 * bs);
	other[700] ^= 1;
	t_run(e, e->nx, lun, B(0x2f, 0x02, 0, 0, 0, 120, 0, 0, 2, 0), 0, other, 2 * bs, &t);
	t_check_sense(&t, 0xe, 0x1d, 0x00);
	CHECK_EQ(t.c.sense[0], 0xf0); /* VALID */
	CHECK_MEM(t.c.sense + 3, B(0, 0, 0x02, 0xbc), 4);
	/* VERIFY(16) BYTCHK=3: one block compared with each block */
	t_run(e, e->nx, lun, B(0x2a, 0, 0, 0, 0, 130, 0, 0, 3, 0), 0, zblk,
	      3 * bs > 4096 ? 0 : 3 * bs, &t);
	if (bs == 512) {
		t_run(e, e->nx, lun, B(0x8f, 0x06, 0, 0, 0, 0, 0, 0, 0, 130, 0, 0, 0, 3, 0, 0), 0,
		      zblk, bs, &t);
		CHECK_EQ(t.c.status, 0);
		CHECK_EQ(t.c.xfer_wanted, bs);
		t_run(e, e->nx, lun, B(0x8f, 0x06, 0, 0, 0, 0, 0, 0, 0, 79, 0, 0, 0, 3, 0, 0), 0,
		      zblk, bs, &t);
		CHECK_EQ(t.c.status, 2);
		CHECK_EQ(t.c.sense[2], 0x0e);
	}
	/* short data-out: only the complete blocks are written, the rest is untouched */
	memset(other, 0x5a, sizeof(other));
	t_run(e, e->nx, lun, B(0x2a, 0, 0, 0, 0, 64, 0, 0, 2, 0), 0, other, 2 * bs - 24, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, 2 * bs);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0, 64, 0, 0, 2, 0), 2 * bs, NULL, 0, &t);
	CHECK_MEM(t.c.buf, other, bs);
	CHECK_MEM(t.c.buf + bs, data + bs, bs);
}

/* READ with data_in_map_ok: a RAM LU answers from its own memory (no copy into buf), other
 * backends and other commands still fill buf; scsi_cdb_is_read() names the READs. */
static void test_read_map(struct env *e)
{
	static uint8_t data[8 * 512];
	static const uint8_t r10[] = {0x28, 0, 0, 0, 0, 200, 0, 0, 8, 0};
	struct tcmd t;

	printf("# READ answered from LU memory\n");
	fill(data, sizeof(data), 0x5a);
	t_run(e, e->nx, L_RAM, B(0x2a, 0, 0, 0, 0, 200, 0, 0, 8, 0), 0, data, sizeof(data), &t);
	CHECK_EQ(t.c.status, 0);
	e->map_ok = true;
	CHECK_EQ(t_run(e, e->nx, L_RAM, r10, 4096, NULL, 0, &t), 1);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 4096);
	CHECK(t.c.data_in != t.c.buf);
	CHECK_MEM(t.c.data_in, data, 4096);
	CHECK_EQ(t.c.buf[0], 0xee); /* buf untouched */
	/* a shorter data_in_max still limits what is mapped */
	t_run(e, e->nx, L_RAM, r10, 1024, NULL, 0, &t);
	CHECK_EQ(t.c.data_in_len, 1024);
	CHECK_MEM(t.c.data_in, data, 1024);
	/* out of range: the usual CHECK CONDITION, nothing mapped */
	t_run(e, e->nx, L_RAM, B(0x28, 0, 0, 0x10, 0, 0, 0, 0, 8, 0), 4096, NULL, 0, &t);
	CHECK_EQ(t.c.status, SCSI_STATUS_CHECK_CONDITION);
	CHECK_EQ(t.c.data_in_len, 0);
	/* the file backend cannot map: it copies into buf as before */
	t_run(e, e->nx, L_FILE, B(0x2a, 0, 0, 0, 0, 200, 0, 0, 8, 0), 0, data, sizeof(data), &t);
	t_run(e, e->nx, L_FILE, r10, 4096, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK(t.c.data_in == t.c.buf);
	CHECK_MEM(t.c.buf, data, 4096);
	/* other data-in commands fill buf even when mapping is allowed */
	t_run(e, e->nx, L_RAM, B(0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), 8, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK(t.c.data_in == t.c.buf);
	/* without permission the RAM LU copies */
	e->map_ok = false;
	t_run(e, e->nx, L_RAM, r10, 4096, NULL, 0, &t);
	CHECK(t.c.data_in == t.c.buf);
	CHECK_MEM(t.c.buf, data, 4096);
	CHECK(scsi_cdb_is_read(B(0x08, 0, 0, 0, 1, 0), 6));
	CHECK(scsi_cdb_is_read(r10, 10));
	CHECK(scsi_cdb_is_read(B(0xa8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 12));
	CHECK(scsi_cdb_is_read(B(0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 16));
	CHECK(!scsi_cdb_is_read(B(0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0), 10));
	CHECK(!scsi_cdb_is_read(B(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), 10));
	CHECK(!scsi_cdb_is_read(B(0x12, 0, 0, 0, 36, 0), 6));
	CHECK(!scsi_cdb_is_read(r10, 0));
}

static void test_thin(struct env *e, uint32_t lun)
{
	static uint8_t data[8192], zeros[8192], pat[512];
	uint8_t unmap[24] = {0, 22, 0, 16, 0, 0, 0, 0,	0, 0, 0, 0,
			     0, 0,  0, 64, 0, 0, 0, 16, 0, 0, 0, 0};
	struct tcmd t;

	printf("# thin provisioning on LUN %u\n", lun);
	fill(data, sizeof(data), 0x77);
	memset(zeros, 0, sizeof(zeros));
	t_run(e, e->nx, lun, B(0x2a, 0, 0, 0, 0, 64, 0, 0, 16, 0), 0, data, 8192, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, lun, B(0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 24, 0, 0), 24, NULL, 0,
	      &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 24);
	CHECK_MEM(t.c.buf, B(0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64), 16);
	CHECK_EQ(t.c.buf[20], 0x00); /* mapped */
	t_run(e, e->nx, lun, B(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), 0, unmap, 24, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0, 64, 0, 0, 16, 0), 8192, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_MEM(t.c.buf, zeros, 8192);
	t_run(e, e->nx, lun, B(0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 24, 0, 0), 24, NULL, 0,
	      &t);
	CHECK_MEM(t.c.buf, B(0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64), 16);
	CHECK(get_be32(t.c.buf + 16) >= 16);
	CHECK_EQ(t.c.buf[20], 0x01); /* deallocated */
	/* WRITE SAME(10) with a pattern over 200 blocks, then read some back */
	memset(pat, 0xab, sizeof(pat));
	t_run(e, e->nx, lun, B(0x41, 0, 0, 0, 0x01, 0x00, 0, 0, 200, 0), 0, pat, 512, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, 512);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0x01, 0xc0, 0, 0, 8, 0), 4096, NULL, 0, &t);
	memset(data, 0xab, 4096);
	CHECK_MEM(t.c.buf, data, 4096);
	/* WRITE SAME(16) UNMAP with a zero block: deallocated, reads zeros */
	t_run(e, e->nx, lun, B(0x93, 0x08, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 0, 0, 0, 200, 0, 0), 0,
	      zeros, 512, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0x01, 0xc0, 0, 0, 8, 0), 4096, NULL, 0, &t);
	CHECK_MEM(t.c.buf, zeros, 4096);
	/* WRITE SAME(16) NDOB: no data-out, zeros */
	t_run(e, e->nx, lun, B(0x2a, 0, 0, 0, 0x01, 0x00, 0, 0, 2, 0), 0, data, 1024, &t);
	t_run(e, e->nx, lun, B(0x93, 0x01, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 0, 0, 0, 2, 0, 0), 0, NULL,
	      0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, 0);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0x01, 0x00, 0, 0, 2, 0), 1024, NULL, 0, &t);
	CHECK_MEM(t.c.buf, zeros, 1024);
}

static void test_caw(struct env *e, uint32_t lun)
{
	static uint8_t two[2048], blk[1024];
	struct tcmd t;

	printf("# COMPARE AND WRITE on LUN %u\n", lun);
	memset(blk, 0x11, 1024);
	t_run(e, e->nx, lun, B(0x2a, 0, 0, 0, 0x01, 0x2c, 0, 0, 2, 0), 0, blk, 1024, &t);
	CHECK_EQ(t.c.status, 0);
	memset(two, 0x11, 1024);
	memset(two + 1024, 0x22, 1024);
	t_run(e, e->nx, lun, B(0x89, 0x08, 0, 0, 0, 0, 0, 0, 0x01, 0x2c, 0, 0, 0, 2, 0, 0), 0, two,
	      2048, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.xfer_wanted, 2048);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0x01, 0x2c, 0, 0, 2, 0), 1024, NULL, 0, &t);
	CHECK_MEM(t.c.buf, two + 1024, 1024);
	/* Miscompare at byte 517: MISCOMPARE 1D/00, INFORMATION 517, nothing written. */
	memset(two, 0x22, 1024);
	two[517] = 0;
	memset(two + 1024, 0x33, 1024);
	t_run(e, e->nx, lun, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x2c, 0, 0, 0, 2, 0, 0), 0, two,
	      2048, &t);
	t_check_sense(&t, 0xe, 0x1d, 0x00);
	CHECK_EQ(t.c.sense[0], 0xf0);
	CHECK_MEM(t.c.sense + 3, B(0, 0, 0x02, 0x05), 4);
	t_run(e, e->nx, lun, B(0x28, 0, 0, 0, 0x01, 0x2c, 0, 0, 2, 0), 1024, NULL, 0, &t);
	memset(blk, 0x22, 1024);
	CHECK_MEM(t.c.buf, blk, 1024);
}

/* ---- reservations ---- */

static void test_reservations(struct env *e)
{
	struct scsi_nexus *a = scsi_nexus_new(e->map, "ia,i,0x1", "t,t,0x1");
	struct scsi_nexus *b = scsi_nexus_new(e->map, "ib,i,0x1", "t,t,0x1");
	static const uint8_t tur[16] = {0}, rs[16] = {0x03, 0, 0, 0, 18, 0};
	static const uint8_t res6[16] = {0x16}, rel6[16] = {0x17}, res10[16] = {0x56};
	struct tcmd t;

	printf("# RESERVE/RELEASE\n");
	t_run(e, a, L_4K, rs, 18, NULL, 0, &t);
	t_run(e, b, L_4K, rs, 18, NULL, 0, &t);
	t_run(e, a, L_4K, res6, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	CHECK_EQ(t.c.sense_len, 0);
	t_run(e, b, L_4K, B(0x12, 0, 0, 0, 36, 0), 36, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_4K, res10, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, b, L_4K, rel6, 0, NULL, 0, &t); /* not the holder: GOOD, no effect */
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, a, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_4K, res6, 0, NULL, 0, &t); /* holder may reserve again */
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_4K, rel6, 0, NULL, 0, &t);
	t_run(e, b, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* Nexus loss releases. */
	t_run(e, a, L_4K, res6, 0, NULL, 0, &t);
	scsi_nexus_free(a);
	t_run(e, b, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* LU reset releases; the resetting nexus gets the UA too. */
	t_run(e, b, L_4K, res6, 0, NULL, 0, &t);
	scsi_lu_reset(scsi_lun_map_get(e->map, L_4K), b);
	t_run(e, e->nx, L_4K, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x03);
	t_run(e, e->nx, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_4K, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x29, 0x03);
	t_run(e, b, L_4K, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	scsi_nexus_free(b);
}

/* ---- mode select side effects: WCE, D_SENSE, 2A/01 for others ---- */

static void test_mode_select_effects(struct env *e)
{
	struct scsi_nexus *b = scsi_nexus_new(e->map, "ib,i,0x1", "t,t,0x1");
	static const uint8_t rs[16] = {0x03, 0, 0, 0, 18, 0}, tur[16] = {0};
	struct tcmd t;

	printf("# MODE SELECT side effects\n");
	t_run(e, b, L_RAM, rs, 18, NULL, 0, &t);
	t_run(e, e->nx, L_RAM, B(0x15, 0x10, 0, 0, 16, 0), 0,
	      B(0, 0, 0, 0, 0x0a, 0x0a, 0x06, 0x10, 0, 0x40, 0, 0, 0xff, 0xff, 0, 0), 16, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_RAM, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 2); /* already in descriptor format: D_SENSE is on */
	CHECK_MEM(t.c.sense, B(0x72, 0x06, 0x2a, 0x01, 0, 0, 0, 0), 8);
	CHECK_EQ(t.c.sense_len, 8);
	/* D_SENSE now on: descriptor-format sense, field pointer in a SKS descriptor */
	t_run(e, e->nx, L_RAM, B(0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0), 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 2);
	CHECK_EQ(t.c.sense_len, 16);
	CHECK_MEM(t.c.sense, B(0x72, 0x05, 0x24, 0x00, 0, 0, 0, 8, 0x02, 0x06, 0, 0, 0xcd, 0, 1, 0),
		  16);
	t_run(e, e->nx, L_RAM, B(0x1a, 0x08, 0x0a, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_EQ(t.c.buf[6], 0x06);
	/* Miscompare in descriptor format carries an information descriptor. */
	/* Back to fixed format, WCE off then on. */
	t_run(e, e->nx, L_RAM, B(0x55, 0x10, 0, 0, 0, 0, 0, 0, 20, 0), 0,
	      B(0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0x0a, 0x02, 0x10, 0, 0x40, 0, 0, 0xff, 0xff, 0, 0),
	      20, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, L_RAM, B(0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0), 512, NULL, 0, &t);
	CHECK_EQ(t.c.sense_len, 18);
	CHECK_MEM(t.c.sense, B(0x70, 0, 0x05, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x24, 0, 0, 0xcd, 0, 1),
		  18);
	t_run(e, e->nx, L_RAM, B(0x15, 0x10, 0, 0, 24, 0), 0,
	      B(0, 0, 0, 0, 0x08, 0x12, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
	      24, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, L_RAM, B(0x1a, 0x08, 0x08, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_EQ(t.c.buf[6], 0x00);
	/* write-through now: a write still works (made durable) */
	t_run(e, e->nx, L_RAM, B(0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0), 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, e->nx, L_RAM, B(0x15, 0x10, 0, 0, 24, 0), 0, B(0, 0, 0, 0, PG_CACHING_WCE), 24,
	      &t);
	CHECK_EQ(t.c.status, 0);
	scsi_nexus_free(b);
}

/* ---- async completion and error injection on the file backend ---- */

static void test_async(struct env *e)
{
	struct tcmd t;
	static const uint8_t cdb[16] = {0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0};

	printf("# async completion through io_uring\n");
	memset(&t, 0, sizeof(t));
	t.c.thread = e->thr;
	t.c.map = e->map;
	t.c.nexus = e->nx;
	t.c.lun_field = scsi_lun_encode(L_FILE);
	t.c.cdb = cdb;
	t.c.cdb_len = 16;
	t.c.buf = e->buf;
	t.c.buf_len = TBUF;
	t.c.data_in_max = 4096;
	t.c.done = t_done;
	t.c.priv = &t;
	scsi_cmd_exec(&t.c);
	CHECK_EQ(t.ndone, 0); /* not before the loop reaps the completion */
	for (int i = 0; i < 1000 && !t.ndone; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(t.ndone, 1);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 4096);
}

static void test_errors(struct env *e)
{
	struct scsi_lu *lu = scsi_lun_map_get(e->map, L_ERR);
	static uint8_t blk[512];
	struct tcmd t;
	int fd;

	printf("# error injection\n");
	memset(blk, 0x42, sizeof(blk));
	t_run(e, e->nx, L_ERR, B(0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0), 0, blk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	/* A write-only fd: reads fail -> MEDIUM ERROR / UNRECOVERED READ ERROR. */
	fd = open(err_path, O_WRONLY);
	CHECK_EQ(bs_file_debug_set_fd(lu->dev, fd), 0);
	close(fd);
	t_run(e, e->nx, L_ERR, B(0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0), 512, NULL, 0, &t);
	t_check_sense(&t, 0x3, 0x11, 0x00);
	CHECK_EQ(t.c.data_in_len, 0);
	/* A read-only fd: writes fail -> MEDIUM ERROR / WRITE ERROR. */
	fd = open(err_path, O_RDONLY);
	CHECK_EQ(bs_file_debug_set_fd(lu->dev, fd), 0);
	close(fd);
	t_run(e, e->nx, L_ERR, B(0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0), 0, blk, 512, &t);
	t_check_sense(&t, 0x3, 0x0c, 0x00);
	/* A full device: ENOSPC -> DATA PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT. */
	fd = open("/dev/full", O_RDWR);
	if (fd >= 0) {
		CHECK_EQ(bs_file_debug_set_fd(lu->dev, fd), 0);
		close(fd);
		t_run(e, e->nx, L_ERR, B(0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0), 0, blk, 512, &t);
		t_check_sense(&t, 0x7, 0x27, 0x07);
	}
	/* COMPARE AND WRITE reads synchronously: the read error surfaces too. */
	fd = open(err_path, O_WRONLY);
	CHECK_EQ(bs_file_debug_set_fd(lu->dev, fd), 0);
	close(fd);
	t_run(e, e->nx, L_ERR, B(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0), 0, zblk, 1024,
	      &t);
	t_check_sense(&t, 0x3, 0x11, 0x00);
}

static void test_misc(void)
{
	printf("# LUN encoding, data-out sizes\n");
	CHECK_EQ(scsi_lun_encode(0), 0);
	CHECK_EQ(scsi_lun_encode(5), 0x0005000000000000ULL);
	CHECK_EQ(scsi_lun_encode(300), 0x412c000000000000ULL);
	CHECK_EQ(scsi_lun_decode(0x0005000000000000ULL), 5);
	CHECK_EQ(scsi_lun_decode(0x412c000000000000ULL), 300);
	CHECK_EQ(scsi_lun_decode(0x0005000100000000ULL), UINT32_MAX);
	CHECK_EQ(scsi_lun_decode(0x0105000000000000ULL), UINT32_MAX);
	CHECK_EQ(scsi_lun_decode(0xc000000000000000ULL), UINT32_MAX);
}

static void test_dout_len(struct env *e)
{
	const struct scsi_lu *lu = scsi_lun_map_get(e->map, L_RAM);
	const struct scsi_lu *lu4k = scsi_lun_map_get(e->map, L_4K);

	CHECK_EQ(scsi_lu_num_blocks(lu), 2048);
	CHECK_EQ(scsi_lu_block_size(lu4k), 4096);
}

static void test_rsoc_all(struct env *e)
{
	struct tcmd t;
	uint32_t len, n, found = 0;

	printf("# RSOC all commands\n");
	t_run(e, e->nx, L_RAM, B(0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0), 4096, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	len = get_be32(t.c.buf);
	CHECK_EQ(len % 8, 0);
	CHECK_EQ(t.c.data_in_len, len + 4);
	for (n = 4; n < len + 4; n += 8) {
		const uint8_t *d = t.c.buf + n;

		if (d[0] == 0x28)
			found += d[5] == 0 && get_be16(d + 6) == 10;
		if (d[0] == 0x9e && get_be16(d + 2) == 0x10)
			found += d[5] == 0x01 && get_be16(d + 6) == 16;
	}
	CHECK_EQ(found, 2);
	/* With RCTD each descriptor carries a 12-byte timeouts descriptor. */
	t_run(e, e->nx, L_RAM, B(0xa3, 0x0c, 0x80, 0, 0, 0, 0, 0, 0x10, 0, 0, 0), 4096, NULL, 0,
	      &t);
	CHECK_EQ(get_be32(t.c.buf), len / 8 * 20);
	CHECK_EQ(t.c.buf[4 + 5], 0x02);
	CHECK_MEM(t.c.buf + 12, B(0x00, 0x0a), 2);
}

static void test_vpd83(struct env *e)
{
	static const char tport[] = "iqn.2024-01.org.example:t1,t,0x1";
	static const char tname[] = "iqn.2024-01.org.example:t1";
	struct tcmd t;
	const uint8_t *d;
	uint32_t len, off, n_naa = 0, n_t10 = 0, n_rel = 0, n_port = 0, n_dev = 0;

	printf("# VPD 0x83 device identification\n");
	t_run(e, e->nx, L_RAM, B(0x12, 1, 0x83, 0x01, 0x00, 0), 256, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	d = t.c.buf;
	CHECK_MEM(d, B(0x00, 0x83), 2);
	len = get_be16(d + 2);
	CHECK_EQ(t.c.data_in_len, len + 4);
	for (off = 4; off + 4 <= len + 4; off += 4u + d[off + 3]) {
		const uint8_t *x = d + off;

		if (x[1] == 0x03) { /* LU, NAA: binary, 16 bytes, NAA 6 */
			n_naa++;
			CHECK_EQ(x[0], 0x01);
			CHECK_EQ(x[3], 16);
			CHECK_EQ(x[4] >> 4, 6);
		} else if (x[1] == 0x01) { /* LU, T10 vendor id: ASCII vendor + serial */
			n_t10++;
			CHECK_EQ(x[0], 0x02);
			CHECK_EQ(x[3], 12);
			CHECK_MEM(x + 4, "IX      SER0", 12);
		} else if (x[1] == 0x94) { /* PIV, port, relative target port 1 */
			n_rel++;
			CHECK_MEM(x, B(0x51, 0x94, 0x00, 0x04, 0, 0, 0, 1), 8);
		} else if (x[1] == 0x98) { /* PIV, port, SCSI name string */
			n_port++;
			CHECK_EQ(x[0], 0x53);
			CHECK_EQ(x[3] % 4, 0);
			CHECK(x[3] > sizeof(tport) - 1);
			CHECK_MEM(x + 4, tport, sizeof(tport));
		} else if (x[1] == 0xa8) { /* PIV, target device, SCSI name string */
			n_dev++;
			CHECK_EQ(x[3] % 4, 0);
			CHECK_MEM(x + 4, tname, sizeof(tname));
		}
	}
	CHECK_EQ(off, len + 4);
	CHECK_EQ(n_naa, 1);
	CHECK_EQ(n_t10, 1);
	CHECK_EQ(n_rel, 1);
	CHECK_EQ(n_port, 1);
	CHECK_EQ(n_dev, 1);
	/* Two LUs never share an NAA identifier; the default serial is derived from it. */
	{
		uint8_t naa0[16];

		memcpy(naa0, d + 8, 16);
		t_run(e, e->nx, L_4K, B(0x12, 1, 0x83, 0x01, 0x00, 0), 256, NULL, 0, &t);
		CHECK(memcmp(naa0, t.c.buf + 8, 16) != 0);
		t_run(e, e->nx, L_4K, B(0x12, 1, 0x80, 0x01, 0x00, 0), 256, NULL, 0, &t);
		CHECK_EQ(get_be16(t.c.buf + 2), 24);
	}
}

/* COMPARE AND WRITE as a lock: two threads increment a counter block with read + CAW,
 * retrying on miscompare. With atomic CAW no increment is lost. */
struct caw_worker {
	struct env *e;
	struct scsi_nexus *nx;
	int iters;
	int miscompares;
};

static void *caw_thread(void *arg)
{
	struct caw_worker *w = arg;
	struct env local = *w->e;
	uint8_t *buf = aligned_alloc(4096, TBUF);
	uint8_t two[1024];
	struct tcmd t;

	local.buf = buf;
	local.thr = NULL; /* RAM LU: synchronous */
	for (int done = 0; done < w->iters;) {
		uint32_t v;

		t_run(&local, w->nx, L_RAM, B(0x28, 0, 0, 0, 0x01, 0xf4, 0, 0, 1, 0), 512, NULL, 0,
		      &t);
		v = get_be32(t.c.buf);
		memcpy(two, t.c.buf, 512);
		memcpy(two + 512, t.c.buf, 512);
		put_be32(two + 512, v + 1);
		t_run(&local, w->nx, L_RAM,
		      B(0x89, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xf4, 0, 0, 0, 1, 0, 0), 0, two, 1024, &t);
		if (t.c.status == 0)
			done++;
		else
			w->miscompares++;
	}
	free(buf);
	return NULL;
}

static void test_caw_threads(struct env *e)
{
	struct caw_worker w[2];
	pthread_t th[2];
	struct tcmd t;

	printf("# COMPARE AND WRITE from two threads\n");
	t_run(e, e->nx, L_RAM, B(0x2a, 0, 0, 0, 0x01, 0xf4, 0, 0, 1, 0), 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct caw_worker){.e = e, .nx = e->nx, .iters = 2000};
		pthread_create(&th[i], NULL, caw_thread, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	t_run(e, e->nx, L_RAM, B(0x28, 0, 0, 0, 0x01, 0xf4, 0, 0, 1, 0), 512, NULL, 0, &t);
	CHECK_EQ(get_be32(t.c.buf), 4000);
	printf("# %d + %d miscompares retried\n", w[0].miscompares, w[1].miscompares);
}

int main(void)
{
	struct env e;

	setup(&e);
	test_misc();
	test_unit_attention(&e);
	test_lun_inventory(&e);
	for (const struct tc_table *tt = scsi_case_tables; tt->name; tt++) {
		printf("# table: %s\n", tt->name);
		for (size_t i = 0; i < tt->n; i++)
			t_check(&e, &tt->rows[i]);
	}
	test_dout_len(&e);
	test_rsoc_all(&e);
	test_vpd83(&e);
	test_write_read(&e, L_RAM, 512);
	test_write_read(&e, L_FILE, 512);
	test_write_read(&e, L_4K, 4096);
	test_read_map(&e);
	test_thin(&e, L_RAM);
	test_thin(&e, L_FILE);
	test_caw(&e, L_RAM);
	test_caw(&e, L_FILE);
	test_reservations(&e);
	test_mode_select_effects(&e);
	test_async(&e);
	test_caw_threads(&e);
	test_errors(&e);
	scsi_nexus_free(e.nx);
	scsi_lun_map_free(e.map);
	scsi_thread_free(e.thr);
	ev_loop_free(e.loop);
	free(e.buf);
	unlink(file_path);
	unlink(err_path);
	return tap_done();
}
