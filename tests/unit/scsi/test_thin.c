/* Thin provisioning limits: the soft threshold's unit attention (6/38/07 once per I_T nexus,
 * re-armed below the threshold, for nexuses that attach later too, after a threshold change),
 * the Logical Block Provisioning VPD page's threshold fields and LOG SENSE (the supported
 * pages, page 0x0C's resource counts, its CDB checks), bytes written out from SBC-3 6.4.5 /
 * 6.6.4 and SPC-4 6.6; and the file backend's sample of its file system. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

#define TN "iqn.2024-01.org.example:thin"
#define MiB (1ull << 20)

enum { L_THR = 0, L_NOTHR = 1, L_RAMTHIN = 2, L_FULL = 3, L_4KTHR = 4 };

static char paths[5][64];
static const uint8_t tur[16] = {0};

static struct scsi_lu *lu_of(struct env *e, uint32_t lun)
{
	return scsi_lun_map_get(e->map, lun);
}

static void add_lu(struct env *e, uint32_t lun, struct scsi_lu_cfg cfg)
{
	struct scsi_lu *lu;
	char err[128] = "";
	int rc;

	cfg.lun = lun;
	cfg.target_name = TN;
	if (cfg.backend == BS_TYPE_FILE) {
		int fd;

		strcpy(paths[lun], "/tmp/ix-thin-XXXXXX");
		fd = mkstemp(paths[lun]);
		close(fd);
		cfg.path = paths[lun];
	}
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
	memset(e, 0, sizeof(*e));
	e->loop = ev_loop_new();
	e->thr = scsi_thread_new(e->loop, NULL);
	e->map = scsi_lun_map_new();
	e->buf = aligned_alloc(4096, TBUF);
	CHECK(e->loop && e->thr && e->map && e->buf);
	add_lu(e, L_THR,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_FILE,
				    .size_bytes = 1 << 20,
				    .thin = true,
				    .thin_threshold = 80});
	add_lu(e, L_NOTHR,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_FILE, .size_bytes = 1 << 20, .thin = true});
	add_lu(e, L_RAMTHIN,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .thin = true});
	/* a threshold without thin (the configuration refuses it): never reached */
	add_lu(e, L_FULL,
	       (struct scsi_lu_cfg){
		   .backend = BS_TYPE_FILE, .size_bytes = 1 << 20, .thin_threshold = 50});
	add_lu(e, L_4KTHR,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_FILE,
				    .size_bytes = 1 << 20,
				    .block_size = 4096,
				    .thin = true,
				    .thin_threshold = 99});
	e->nx = scsi_nexus_new(e->map, "iqn.i1,i,0x1", TN ",t,0x1");
}

/* used % of a 100 MiB store: avail = 100 - pct MiB */
static void sample(struct env *e, uint32_t lun, unsigned pct, uint64_t used)
{
	scsi_lu_space_update(lu_of(e, lun), 100 * MiB, (100 - pct) * MiB, used);
}

static void expect_ua(struct env *e, struct scsi_nexus *nx, uint32_t lun, uint8_t asc,
		      uint8_t ascq)
{
	struct tcmd t;

	t_run(e, nx, lun, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, asc, ascq);
}

static void expect_good(struct env *e, struct scsi_nexus *nx, uint32_t lun)
{
	struct tcmd t;

	t_run(e, nx, lun, tur, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
}

static void test_vpd(struct env *e)
{
	struct tcmd t;

	printf("# VPD 0xB2: THRESHOLD EXPONENT, THRESHOLD PERCENTAGE\n");
	/* 512-byte blocks: a threshold set of 2^11 blocks (1 MiB); LBPU LBPWS LBPWS10 LBPRZ;
	 * thin; 80 % */
	t_run(e, e->nx, L_THR, B(0x12, 1, 0xb2, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 8);
	CHECK_MEM(t.c.buf, B(0x00, 0xb2, 0x00, 0x04, 11, 0xe4, 0x02, 80), 8);
	t_run(e, e->nx, L_4KTHR, B(0x12, 1, 0xb2, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_MEM(t.c.buf, B(0x00, 0xb2, 0x00, 0x04, 8, 0xe4, 0x02, 99), 8);
	t_run(e, e->nx, L_NOTHR, B(0x12, 1, 0xb2, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_MEM(t.c.buf, B(0x00, 0xb2, 0x00, 0x04, 11, 0xe4, 0x02, 0), 8);
	/* RAM: no log page, so no thresholds (exponent 0) */
	t_run(e, e->nx, L_RAMTHIN, B(0x12, 1, 0xb2, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_MEM(t.c.buf, B(0x00, 0xb2, 0x00, 0x04, 0, 0xe4, 0x02, 0), 8);
	/* fully provisioned: nothing */
	t_run(e, e->nx, L_FULL, B(0x12, 1, 0xb2, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_MEM(t.c.buf, B(0x00, 0xb2, 0x00, 0x04, 0, 0x00, 0x00, 0), 8);
}

#define LOGS(page, sub, ptr, alloc)                                                                \
	B(0x4d, 0, (page), (sub), 0, (uint8_t)((ptr) >> 8), (uint8_t)(ptr), (uint8_t)((alloc) >> 8), \
	  (uint8_t)(alloc), 0)

static void test_log_sense(struct env *e)
{
	struct tcmd t;

	printf("# LOG SENSE\n");
	t_run(e, e->nx, L_THR, LOGS(0x00, 0, 0, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 6);
	CHECK_MEM(t.c.buf, B(0x00, 0x00, 0x00, 0x02, 0x00, 0x0c), 6);
	t_run(e, e->nx, L_THR, LOGS(0x00, 0xff, 0, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.data_in_len, 10);
	CHECK_MEM(t.c.buf, B(0x40, 0xff, 0x00, 0x06, 0x00, 0x00, 0x00, 0xff, 0x0c, 0x00), 10);
	/* PAGE CONTROL 01b (current cumulative) is the same page */
	t_run(e, e->nx, L_THR, LOGS(0x40, 0, 0, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.data_in_len, 6);
	/* RAM thin: only page 0x00; 0x0C is not there */
	t_run(e, e->nx, L_RAMTHIN, LOGS(0x00, 0, 0, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.data_in_len, 5);
	CHECK_MEM(t.c.buf, B(0x00, 0x00, 0x00, 0x01, 0x00), 5);
	t_run(e, e->nx, L_RAMTHIN, LOGS(0x0c, 0, 0, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, e->nx, L_FULL, LOGS(0x0c, 0, 0, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);

	/* Page 0x0C: 100 MiB store, 50 MiB free, the LU holds 10 MiB: in threshold sets of
	 * 1 MiB, 50 available (not dedicated, SCOPE 10b) and 10 used (dedicated, SCOPE 01b). */
	sample(e, L_THR, 50, 10 * MiB);
	t_run(e, e->nx, L_THR, LOGS(0x0c, 0, 0, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 28);
	CHECK_MEM(t.c.buf,
		  B(0x8c, 0x00, 0x00, 0x18,					 /* DS, 24 bytes */
		    0x00, 0x01, 0x23, 0x08, 0x00, 0x00, 0x00, 50, 0x02, 0, 0, 0, /* available */
		    0x00, 0x02, 0x23, 0x08, 0x00, 0x00, 0x00, 10, 0x01, 0, 0, 0), /* used */
		  28);
	/* PARAMETER POINTER 2: from the used count on; 3: past the last one */
	t_run(e, e->nx, L_THR, LOGS(0x4c, 0, 2, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.data_in_len, 16);
	CHECK_MEM(t.c.buf, B(0x8c, 0x00, 0x00, 0x0c, 0x00, 0x02, 0x23, 0x08, 0, 0, 0, 10, 0x01), 13);
	t_run(e, e->nx, L_THR, LOGS(0x0c, 0, 3, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	CHECK_EQ(t.c.sense[15], 0xc0); /* SKSV, C/D: CDB byte 5 */
	CHECK_EQ(t.c.sense[17], 5);
	/* 4096-byte blocks: 2^8 blocks a set, the same MiB */
	sample(e, L_4KTHR, 50, 10 * MiB);
	t_run(e, e->nx, L_4KTHR, LOGS(0x0c, 0, 0, 255), 255, NULL, 0, &t);
	CHECK_EQ(t.c.buf[11], 50);
	CHECK_EQ(t.c.buf[23], 10);
	/* a count past 32 bits saturates: 2^33 MiB free */
	scsi_lu_space_update(lu_of(e, L_4KTHR), 1ull << 53, 1ull << 53, 0);
	t_run(e, e->nx, L_4KTHR, LOGS(0x0c, 0, 0, 255), 255, NULL, 0, &t);
	CHECK_MEM(t.c.buf + 8, B(0xff, 0xff, 0xff, 0xff), 4);
	/* the allocation length cuts the page */
	t_run(e, e->nx, L_THR, LOGS(0x0c, 0, 0, 4), 255, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 4);
	/* subpage of 0x0C, unknown page, SP (no saved pages), PPC: INVALID FIELD IN CDB */
	t_run(e, e->nx, L_THR, LOGS(0x0c, 1, 0, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, e->nx, L_THR, LOGS(0x0d, 0, 0, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, e->nx, L_THR, B(0x4d, 0x01, 0x0c, 0, 0, 0, 0, 0, 255, 0), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, e->nx, L_THR, B(0x4d, 0x02, 0x0c, 0, 0, 0, 0, 0, 255, 0), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, e->nx, L_THR, LOGS(0x00, 0, 1, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	/* an absent LUN */
	t_run(e, e->nx, 9, LOGS(0x00, 0, 0, 255), 255, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x25, 0x00);
}

static void test_threshold(struct env *e)
{
	struct scsi_nexus *nx2;
	struct scsi_lu_space sp;

	printf("# soft threshold: once per nexus, re-armed below it\n");
	sample(e, L_THR, 79, 0);
	expect_good(e, e->nx, L_THR);
	sample(e, L_THR, 80, 0); /* at the threshold: reached */
	scsi_lu_space_get(lu_of(e, L_THR), &sp);
	CHECK(sp.over);
	CHECK_EQ(sp.threshold, 80);
	CHECK_EQ(sp.total, 100 * MiB);
	CHECK_EQ(sp.avail, 20 * MiB);
	expect_ua(e, e->nx, L_THR, 0x38, 0x07);
	expect_good(e, e->nx, L_THR);
	sample(e, L_THR, 95, 0); /* still above: not again */
	sample(e, L_THR, 85, 0);
	expect_good(e, e->nx, L_THR);

	/* a nexus that attaches meanwhile: its power-on UA, then the threshold, once */
	nx2 = scsi_nexus_new(e->map, "iqn.i2,i,0x2", TN ",t,0x1");
	expect_ua(e, nx2, L_THR, 0x29, 0x00);
	expect_ua(e, nx2, L_THR, 0x38, 0x07);
	expect_good(e, nx2, L_THR);
	sample(e, L_THR, 90, 0);
	expect_good(e, nx2, L_THR);

	/* below: re-armed (no UA for going down), then reached again: both told again */
	sample(e, L_THR, 60, 0);
	scsi_lu_space_get(lu_of(e, L_THR), &sp);
	CHECK(!sp.over);
	expect_good(e, e->nx, L_THR);
	expect_good(e, nx2, L_THR);
	sample(e, L_THR, 99, 0);
	expect_ua(e, e->nx, L_THR, 0x38, 0x07);
	expect_ua(e, nx2, L_THR, 0x38, 0x07);
	expect_good(e, nx2, L_THR);

	/* a reload raises the threshold above the use: re-armed; lowers it again: reached */
	sample(e, L_THR, 85, 0);
	CHECK_EQ(scsi_lu_set_thin_threshold(lu_of(e, L_THR), 90), 0);
	expect_good(e, e->nx, L_THR);
	CHECK_EQ(scsi_lu_set_thin_threshold(lu_of(e, L_THR), 85), 0);
	expect_ua(e, e->nx, L_THR, 0x38, 0x07);
	expect_ua(e, nx2, L_THR, 0x38, 0x07);
	CHECK_EQ(scsi_lu_set_thin_threshold(lu_of(e, L_THR), 100), -EINVAL);
	/* turned off: never reached, however full */
	CHECK_EQ(scsi_lu_set_thin_threshold(lu_of(e, L_THR), 0), 0);
	sample(e, L_THR, 100, 0);
	expect_good(e, e->nx, L_THR);
	CHECK_EQ(scsi_lu_set_thin_threshold(lu_of(e, L_THR), 80), 0);
	expect_ua(e, e->nx, L_THR, 0x38, 0x07);
	expect_good(e, e->nx, L_THR);
	scsi_nexus_free(nx2);

	/* without a threshold, or without thin provisioning: nothing */
	expect_ua(e, e->nx, L_NOTHR, 0x29, 0x00);
	sample(e, L_NOTHR, 100, 0);
	expect_good(e, e->nx, L_NOTHR);
	expect_ua(e, e->nx, L_FULL, 0x29, 0x00);
	sample(e, L_FULL, 100, 0);
	expect_good(e, e->nx, L_FULL);
	/* nothing known (total 0): not reached */
	scsi_lu_space_update(lu_of(e, L_4KTHR), 0, 0, 0);
	scsi_lu_space_get(lu_of(e, L_4KTHR), &sp);
	CHECK(!sp.over);
}

/* The file backend's sample: its file system's size and free space, the blocks the file
 * holds. */
static void test_file_sample(struct env *e)
{
	struct scsi_lu *lu = lu_of(e, L_NOTHR);
	struct scsi_lu_space sp;
	struct statvfs sv;
	struct stat st;
	struct tcmd t;
	static uint8_t data[64 << 10];

	printf("# the file backend's sample\n");
	memset(data, 0x5a, sizeof(data));
	t_run(e, e->nx, L_NOTHR, B(0x2a, 0, 0, 0, 0, 0, 0, 0, 128, 0), 0, data, sizeof(data), &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(scsi_lu_space_poll(lu), 0);
	scsi_lu_space_get(lu, &sp);
	CHECK_EQ(stat(paths[L_NOTHR], &st), 0);
	CHECK_EQ(statvfs(paths[L_NOTHR], &sv), 0);
	CHECK_EQ(sp.total, (uint64_t)sv.f_blocks * sv.f_frsize);
	CHECK(sp.avail <= sp.total);
	CHECK_EQ(sp.used, (uint64_t)st.st_blocks * 512);
	CHECK(sp.used >= sizeof(data));
	/* a RAM LU cannot tell */
	CHECK_EQ(scsi_lu_space_poll(lu_of(e, L_RAMTHIN)), -EOPNOTSUPP);
}

int main(void)
{
	struct env e;
	struct tcmd t;

	setup(&e);
	/* the first sample, at creation, found this machine's /tmp: replace it before any
	 * nexus attaches */
	sample(&e, L_THR, 10, 0);
	sample(&e, L_4KTHR, 10, 0);
	for (uint32_t l = 0; l <= L_4KTHR; l++) /* the power-on UAs out of the way */
		t_run(&e, e.nx, l, B(0x03, 0, 0, 0, 18, 0), 18, NULL, 0, &t);
	test_vpd(&e);
	test_log_sense(&e);
	scsi_nexus_free(e.nx);
	e.nx = scsi_nexus_new(e.map, "iqn.i1,i,0x1", TN ",t,0x1");
	t_run(&e, e.nx, L_THR, B(0x03, 0, 0, 0, 18, 0), 18, NULL, 0, &t);
	test_threshold(&e);
	test_file_sample(&e);
	scsi_nexus_free(e.nx);
	scsi_lun_map_free(e.map);
	scsi_thread_free(e.thr);
	ev_loop_free(e.loop);
	free(e.buf);
	for (int i = 0; i < 5; i++)
		if (paths[i][0])
			unlink(paths[i]);
	return tap_done();
}
