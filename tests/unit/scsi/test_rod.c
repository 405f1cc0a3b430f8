/* Token-based copy (ODX): POPULATE TOKEN, WRITE USING TOKEN, RECEIVE ROD TOKEN INFORMATION and
 * the third-party copy VPD page, between LUs of one target context's index and within one LU;
 * the parameter list and token checks (table-driven), and what invalidates a token: a write to
 * its source, a LU reset, DEL_TKN, its inactivity timeout; ABORT TASK of a running copy. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

#define BIG (4u << 20)

/* LUNs: two RAM LUs of the index, a file LU (asynchronous I/O), a 4 KiB-block LU, and a LU of
 * another target context (another index: another copy manager). */
enum { R_A = 0, R_B = 1, R_FILE = 2, R_4K = 3, R_OTHER = 4 };

struct rcmd {
	struct scsi_cmd c;
	int ndone;
	uint8_t cdb[16];
	uint8_t *buf;
};

static void r_done(struct scsi_cmd *c)
{
	((struct rcmd *)c->priv)->ndone++;
}

static struct env E;
static struct scsi_lu_index *idx, *idx_other;
static char file_path[64];
static struct rcmd T;

static void r_start(uint32_t lun, const uint8_t *cdb, uint32_t din, const uint8_t *dout,
		    uint32_t dout_len)
{
	uint8_t *buf = T.buf;

	memset(&T, 0, sizeof(T));
	T.buf = buf;
	memcpy(T.cdb, cdb, 16);
	memset(T.buf, 0xee, 4096);
	if (dout_len)
		memcpy(T.buf, dout, dout_len);
	T.c.thread = E.thr;
	T.c.map = E.map;
	T.c.nexus = E.nx;
	T.c.lun_field = scsi_lun_encode(lun);
	T.c.cdb = T.cdb;
	T.c.cdb_len = 16;
	T.c.buf = T.buf;
	T.c.buf_len = BIG;
	T.c.data_out_len = dout_len;
	T.c.data_in_max = din;
	T.c.done = r_done;
	T.c.priv = &T;
	scsi_cmd_exec(&T.c);
}

static void r_wait(void)
{
	for (int i = 0; i < 2000 && T.ndone == 0; i++)
		ev_loop_run_once(E.loop, 10);
	CHECK_EQ(T.ndone, 1);
}

static void r_run(uint32_t lun, const uint8_t *cdb, uint32_t din, const uint8_t *dout,
		  uint32_t dout_len)
{
	r_start(lun, cdb, din, dout, dout_len);
	r_wait();
}

static void r_sense(uint8_t key, uint8_t asc, uint8_t ascq)
{
	CHECK_EQ(T.c.status, 0x02);
	CHECK_EQ(T.c.sense[2] & 0x0f, key);
	CHECK_EQ(T.c.sense[12], asc);
	CHECK_EQ(T.c.sense[13], ascq);
}

/* ---- command builders ---- */

struct range {
	uint64_t lba;
	uint32_t n;
};

static const uint8_t *tpc_cdb(uint8_t op, uint8_t sa, uint32_t list_id, uint32_t len)
{
	static uint8_t cdb[16];

	memset(cdb, 0, sizeof(cdb));
	cdb[0] = op;
	cdb[1] = sa;
	if (op == 0x83)
		put_be32(cdb + 6, list_id);
	else
		put_be32(cdb + 2, list_id);
	put_be32(cdb + 10, len);
	return cdb;
}

static uint32_t pt_list(uint8_t *d, const struct range *r, int n, uint32_t timeout, uint32_t type)
{
	uint32_t len = 16 + 16 * (uint32_t)n;

	memset(d, 0, len);
	put_be16(d, (uint16_t)(len - 2));
	if (type) {
		d[2] = 0x02; /* RTV */
		put_be32(d + 8, type);
	}
	put_be32(d + 4, timeout);
	put_be16(d + 14, (uint16_t)(16 * n));
	for (int i = 0; i < n; i++) {
		put_be64(d + 16 + 16 * i, r[i].lba);
		put_be32(d + 16 + 16 * i + 8, r[i].n);
	}
	return len;
}

static uint32_t wut_list(uint8_t *d, const uint8_t *tok, uint64_t offset, const struct range *r,
			 int n, bool del)
{
	uint32_t len = 536 + 16 * (uint32_t)n;

	memset(d, 0, len);
	put_be16(d, (uint16_t)(len - 2));
	d[2] = del ? 0x02 : 0;
	put_be64(d + 8, offset);
	memcpy(d + 16, tok, 512);
	put_be16(d + 534, (uint16_t)(16 * n));
	for (int i = 0; i < n; i++) {
		put_be64(d + 536 + 16 * i, r[i].lba);
		put_be32(d + 536 + 16 * i + 8, r[i].n);
	}
	return len;
}

static uint8_t plist[2048];

/* POPULATE TOKEN then RECEIVE ROD TOKEN INFORMATION: the token into tok; the PT's status. */
static uint8_t populate(uint32_t lun, uint32_t list_id, const struct range *r, int n,
			uint32_t timeout, uint8_t *tok)
{
	uint32_t len = pt_list(plist, r, n, timeout, 0);
	uint8_t st;

	r_run(lun, tpc_cdb(0x83, 0x10, list_id, len), 0, plist, len);
	st = T.c.status;
	if (st != 0)
		return st;
	r_run(lun, tpc_cdb(0x84, 0x07, list_id, 1024), 1024, NULL, 0);
	CHECK_EQ(T.c.status, 0);
	CHECK_EQ(T.buf[4], 0x10); /* RESPONSE TO SERVICE ACTION */
	CHECK_EQ(T.buf[5], 0x01); /* done, no errors */
	CHECK_EQ(T.buf[13], 0);	  /* no sense */
	CHECK_EQ(get_be32(T.buf + 32), 514);
	CHECK_EQ(get_be32(T.buf), 32 + 4 + 514 - 4);
	memcpy(tok, T.buf + 38, 512);
	return 0;
}

static void wut(uint32_t lun, uint32_t list_id, const uint8_t *tok, uint64_t offset,
		const struct range *r, int n, bool del)
{
	uint32_t len = wut_list(plist, tok, offset, r, n, del);

	r_run(lun, tpc_cdb(0x83, 0x11, list_id, len), 0, plist, len);
}

static void wr(uint32_t lun, uint64_t lba, uint32_t n, const uint8_t *data)
{
	uint8_t cdb[16] = {0x8a};

	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, n);
	r_run(lun, cdb, 0, data, n * 512);
	CHECK_EQ(T.c.status, 0);
}

/* Read n blocks at lba and compare them with want. */
static void rd_cmp(uint32_t lun, uint64_t lba, uint32_t n, const uint8_t *want)
{
	uint8_t cdb[16] = {0x88};

	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, n);
	r_run(lun, cdb, n * 512, NULL, 0);
	CHECK_EQ(T.c.status, 0);
	CHECK_MEM(T.buf, want, (size_t)n * 512);
}

static uint8_t pattern[2048 * 512], zeros[2048 * 512];

static void fill(uint32_t lun, uint64_t lba, uint32_t n, uint8_t seed)
{
	for (uint32_t i = 0; i < n * 512; i++)
		pattern[i] = (uint8_t)(i * 13 + seed + i / 512);
	wr(lun, lba, n, pattern);
}

/* ---- setup ---- */

static void add_lu(uint32_t lun, struct scsi_lu_cfg cfg, struct scsi_lu_index *ix)
{
	struct scsi_lu *lu = NULL;
	char err[128] = "";
	int rc;

	cfg.lun = lun;
	cfg.target_name = "iqn.2024-01.org.example:rod";
	cfg.index = ix;
	rc = scsi_lu_new(&cfg, &lu, err, sizeof(err));
	if (rc < 0)
		printf("# scsi_lu_new(%u): %s\n", lun, err);
	CHECK_EQ(rc, 0);
	if (rc == 0) {
		CHECK_EQ(scsi_lun_map_add(E.map, lun, lu), 0);
		scsi_lu_put(lu);
	}
}

static void setup(void)
{
	int fd;

	E.loop = ev_loop_new();
	E.thr = scsi_thread_new(E.loop, NULL);
	E.map = scsi_lun_map_new();
	idx = scsi_lu_index_new();
	idx_other = scsi_lu_index_new();
	strcpy(file_path, "/tmp/ix-rod-XXXXXX");
	fd = mkstemp(file_path);
	close(fd);
	add_lu(R_A, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 4 << 20}, idx);
	add_lu(R_B, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 4 << 20}, idx);
	add_lu(R_FILE,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_FILE, .path = file_path, .size_bytes = 8 << 20},
	       idx);
	add_lu(R_4K,
	       (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .block_size = 4096},
	       idx);
	add_lu(R_OTHER, (struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 1 << 20},
	       idx_other);
	E.nx = scsi_nexus_new(E.map, "iqn.i1,i,0x1", "iqn.2024-01.org.example:rod,t,0x1");
	T.buf = aligned_alloc(4096, BIG);
	for (uint32_t lun = R_A; lun <= R_OTHER; lun++) /* the power-on unit attentions */
		r_run(lun, (const uint8_t[16]){0}, 0, NULL, 0);
}

/* ---- tests ---- */

static void test_vpd(void)
{
	const uint8_t *d;
	uint32_t len, off;
	bool limits = false, cmds = false;

	printf("# VPD 0x8F: Block Device ROD Token Limits, Supported Commands; INQUIRY 3PC\n");
	r_run(R_A, (const uint8_t[16]){0x12, 0, 0, 0, 96, 0}, 96, NULL, 0);
	CHECK(T.buf[5] & 0x08);
	r_run(R_A, (const uint8_t[16]){0x12, 1, 0x8f, 0x04, 0, 0}, 1024, NULL, 0);
	CHECK_EQ(T.c.status, 0);
	d = T.buf;
	CHECK_EQ(d[1], 0x8f);
	len = get_be16(d + 2);
	CHECK_EQ(T.c.data_in_len, len + 4);
	for (off = 4; off + 4 <= len + 4; off += 4u + get_be16(d + off + 2)) {
		const uint8_t *b = d + off;

		CHECK_EQ((4u + get_be16(b + 2)) % 4, 0); /* descriptors are multiples of 4 */
		if (get_be16(b) == 0x0000) {
			limits = true;
			CHECK_EQ(get_be16(b + 2), 32);
			CHECK_EQ(get_be16(b + 10), SCSI_ROD_RANGES);
			CHECK(get_be32(b + 12) >= get_be32(b + 16)); /* max >= default timeout */
			CHECK(get_be32(b + 16) > 0);
			CHECK(get_be64(b + 20) >= get_be64(b + 28));
			CHECK(get_be64(b + 28) > 0);
		}
		if (get_be16(b) == 0x0001) {
			cmds = true;
			CHECK_MEM(b + 5, B(0x83, 3, 0x00, 0x10, 0x11, 0x84, 3, 0x00, 0x03, 0x07), 10);
		}
	}
	CHECK_EQ(off, len + 4);
	CHECK(limits);
	CHECK(cmds);
}

static void test_copy(void)
{
	uint8_t tok[512], tok2[512];
	static uint8_t want[1500 * 512];

	printf("# POPULATE TOKEN, RRTI, WRITE USING TOKEN from LU A to LU B (two source ranges)\n");
	fill(R_A, 100, 1000, 1);
	memcpy(want, pattern, 1000 * 512);
	fill(R_A, 3000, 500, 2);
	memcpy(want + 1000 * 512, pattern, 500 * 512);
	CHECK_EQ(populate(R_A, 0x101, (const struct range[]){{100, 1000}, {3000, 500}}, 2, 0, tok),
		 0);
	CHECK_EQ(get_be32(tok), 0x00800001); /* point in time copy - change vulnerable */
	CHECK_EQ(get_be16(tok + 6), 0x1f8);
	CHECK_EQ(get_be64(tok + 56), 1500 * 512); /* NUMBER OF BYTES REPRESENTED */
	CHECK_EQ(tok[16], 0xe4);
	CHECK_MEM(tok + 24, ((struct scsi_lu *)scsi_lun_map_get(E.map, R_A))->naa, 16);
	/* the destination in three ranges, two source chunks crossing */
	wut(R_B, 0x102, tok, 0, (const struct range[]){{0, 700}, {2000, 600}, {5000, 200}}, 3,
	    false);
	CHECK_EQ(T.c.status, 0);
	rd_cmp(R_B, 0, 700, want);
	rd_cmp(R_B, 2000, 600, want + 700 * 512);
	rd_cmp(R_B, 5000, 200, want + 1300 * 512);
	r_run(R_B, tpc_cdb(0x84, 0x07, 0x102, 1024), 1024, NULL, 0);
	CHECK_EQ(T.c.status, 0);
	CHECK_EQ(T.buf[4], 0x11);
	CHECK_EQ(T.buf[5], 0x01);
	CHECK_EQ(T.buf[15], 0xf1);
	CHECK_EQ(get_be64(T.buf + 16), 1500);
	CHECK_EQ(get_be32(T.buf + 32), 0); /* no token for a WRITE USING TOKEN */

	printf("# the same token again, with OFFSET INTO ROD, into LU A itself; truncated to the "
	       "ROD\n");
	wut(R_A, 0x103, tok, 900, (const struct range[]){{6000, 1000}}, 1, false);
	CHECK_EQ(T.c.status, 0);
	rd_cmp(R_A, 6000, 600, want + 900 * 512);
	r_run(R_A, tpc_cdb(0x84, 0x07, 0x103, 1024), 1024, NULL, 0);
	CHECK_EQ(get_be64(T.buf + 16), 600); /* only what the ROD held */

	printf("# a destination over the token's own source is refused before writing\n");
	wut(R_A, 0x104, tok, 0, (const struct range[]){{500, 10}}, 1, false);
	r_sense(5, 0x26, 0x00);
	rd_cmp(R_A, 500, 10, want + 400 * 512);

	printf("# a write beside the source leaves the token valid; one into it cancels it\n");
	wr(R_A, 1100, 8, zeros);
	wr(R_A, 2999, 1, zeros);
	wut(R_B, 0x105, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	CHECK_EQ(T.c.status, 0);
	wr(R_A, 3499, 1, zeros); /* the last block of the second range */
	wut(R_B, 0x106, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	r_sense(5, 0x23, 0x08); /* INVALID TOKEN OPERATION, TOKEN CANCELLED */
	r_run(R_B, tpc_cdb(0x84, 0x07, 0x106, 1024), 1024, NULL, 0);
	CHECK_EQ(T.buf[5], 0x02); /* done with errors, and the sense */
	CHECK_EQ(T.buf[12], 0x02);
	CHECK_EQ(T.buf[13], 18);
	CHECK_EQ(T.buf[32 + 2], 0x05);
	CHECK_EQ(T.buf[32 + 12], 0x23);
	CHECK_EQ(T.buf[32 + 13], 0x08);

	printf("# WRITE SAME and UNMAP cancel too; a LU reset revokes; DEL_TKN deletes\n");
	CHECK_EQ(populate(R_A, 0x110, (const struct range[]){{100, 10}}, 1, 0, tok), 0);
	r_run(R_A, (const uint8_t[16]){0x93, 0, 0, 0, 0, 0, 0, 0, 0, 105, 0, 0, 0, 1, 0, 0}, 0,
	      zeros, 512);
	CHECK_EQ(T.c.status, 0);
	wut(R_B, 0x111, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	r_sense(5, 0x23, 0x08);
	CHECK_EQ(populate(R_A, 0x112, (const struct range[]){{100, 10}}, 1, 0, tok), 0);
	CHECK_EQ(populate(R_B, 0x113, (const struct range[]){{100, 10}}, 1, 0, tok2), 0);
	CHECK_EQ(scsi_lu_reset(scsi_lun_map_get(E.map, R_A), E.nx), 0);
	r_run(R_A, (const uint8_t[16]){0}, 0, NULL, 0); /* the reset's unit attention */
	r_run(R_B, (const uint8_t[16]){0}, 0, NULL, 0);
	wut(R_B, 0x114, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	r_sense(5, 0x23, 0x06); /* TOKEN REVOKED */
	wut(R_A, 0x115, tok2, 0, (const struct range[]){{0, 8}}, 1, true); /* B's: untouched */
	CHECK_EQ(T.c.status, 0);
	wut(R_A, 0x116, tok2, 0, (const struct range[]){{0, 8}}, 1, false);
	r_sense(5, 0x23, 0x09); /* TOKEN DELETED */

	printf("# the block device zero token\n");
	memset(tok, 0, sizeof(tok));
	put_be32(tok, 0xffff0001);
	put_be16(tok + 6, 0x1f8);
	wut(R_B, 0x117, tok, 0, (const struct range[]){{0, 700}, {5000, 100}}, 2, false);
	CHECK_EQ(T.c.status, 0);
	rd_cmp(R_B, 0, 700, zeros);
	rd_cmp(R_B, 5000, 100, zeros);
	rd_cmp(R_B, 5100, 100, want + 1400 * 512);
}

static void test_expiry(void)
{
	uint8_t tok[512];

	printf("# a token unused for its inactivity timeout (1 s) expires\n");
	CHECK_EQ(populate(R_A, 0x120, (const struct range[]){{0, 8}}, 1, 1, tok), 0);
	wut(R_B, 0x121, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	CHECK_EQ(T.c.status, 0);
	usleep(1200 * 1000);
	wut(R_B, 0x122, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	r_sense(5, 0x23, 0x07); /* TOKEN EXPIRED */
}

/* Parameter list and token checks, table-driven: each row edits a valid list. */
struct bad {
	const char *name;
	bool wut;      /* else POPULATE TOKEN */
	uint32_t lun;  /* where it is sent */
	int16_t off;   /* byte of the list to set (-1: none) */
	uint8_t val;
	int32_t len_delta; /* added to the PARAMETER LIST LENGTH and the data */
	uint8_t key, asc, ascq;
};

static const struct bad bads[] = {
    {"PT: list shorter than header and one range", false, R_A, -1, 0, -17, 5, 0x1a, 0x00},
    {"PT: range list length not a multiple of 16", false, R_A, 15, 0x0f, 0, 5, 0x26, 0x00},
    {"PT: no range descriptors", false, R_A, 15, 0x00, 0, 5, 0x26, 0x00},
    {"PT: an LBA past the end", false, R_A, 16, 0x01, 0, 5, 0x21, 0x00},
    {"PT: a range longer than the LU", false, R_A, 24 + 0, 0x7f, 0, 5, 0x21, 0x00},
    {"PT: inactivity timeout past the maximum", false, R_A, 4, 0x10, 0, 5, 0x26, 0x00},
    {"PT: RTV with ROD TYPE 0 (copy manager internal)", false, R_A, 2, 0x02, 0, 5, 0x26, 0x00},
    {"WUT: ROD TOKEN LENGTH not 1F8h", true, R_B, 16 + 7, 0x00, 0, 5, 0x23, 0x0a},
    {"WUT: a ROD type not made here", true, R_B, 16 + 1, 0x01, 0, 5, 0x23, 0x01},
    {"WUT: creator not an identification CSCD", true, R_B, 16 + 16, 0xe0, 0, 5, 0x23, 0x05},
    {"WUT: another copy manager's identity", true, R_B, 16 + 128, 0x5a, 0, 5, 0x23, 0x02},
    {"WUT: a creator LU the index lacks", true, R_B, 16 + 30, 0x5a, 0, 5, 0x23, 0x04},
    {"WUT: a slot out of range", true, R_B, 16 + 8, 0x40, 0, 5, 0x23, 0x04},
    {"WUT: a wrong generation", true, R_B, 16 + 15, 0x77, 0, 5, 0x23, 0x04},
    {"WUT: a wrong nonce", true, R_B, 16 + 150, 0x33, 0, 5, 0x23, 0x04},
    {"WUT: OFFSET INTO ROD past its end", true, R_B, 8 + 5, 0x10, 0, 5, 0x26, 0x00},
    {"WUT: destination range past the end", true, R_B, 536 + 2, 0x01, 0, 5, 0x21, 0x00},
    {"WUT: 17 range descriptors", true, R_B, 534, 0x01, 16 * 16, 5, 0x26, 0x08},
    {"WUT: list cut short", true, R_B, -1, 0, -1, 5, 0x1a, 0x00},
    {"WUT: to a LU of another block size", true, R_4K, -1, 0, 0, 5, 0x26, 0x00},
    {"WUT: to a LU of another copy manager", true, R_OTHER, -1, 0, 0, 5, 0x23, 0x02},
};

static void test_bad(void)
{
	uint8_t tok[512];

	CHECK_EQ(populate(R_A, 0x130, (const struct range[]){{0, 64}}, 1, 0, tok), 0);
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];
		uint32_t len;

		printf("# %s\n", b->name);
		if (b->wut)
			len = wut_list(plist, tok, 0, (const struct range[]){{0, 8}}, 1, false);
		else
			len = pt_list(plist, (const struct range[]){{0, 64}}, 1, 0, 0);
		if (b->off >= 0)
			plist[b->off] = b->val;
		len = (uint32_t)((int32_t)len + b->len_delta);
		r_run(b->lun, tpc_cdb(0x83, b->wut ? 0x11 : 0x10, 0x131, len), 0, plist, len);
		r_sense(b->key, b->asc, b->ascq);
	}
	printf("# the token survives all that\n");
	wut(R_B, 0x132, tok, 0, (const struct range[]){{0, 8}}, 1, false);
	CHECK_EQ(T.c.status, 0);
	printf("# RRTI of a list identifier never used\n");
	r_run(R_A, tpc_cdb(0x84, 0x07, 0x7777, 1024), 1024, NULL, 0);
	r_sense(5, 0x24, 0x00);
	printf("# PT with no parameter list does nothing\n");
	r_run(R_A, tpc_cdb(0x83, 0x10, 0x133, 0), 0, NULL, 0);
	CHECK_EQ(T.c.status, 0);
}

static void test_slots(void)
{
	uint8_t tok[512];
	int made = 0;

	printf("# more tokens than slots: valid ones are kept, then INSUFFICIENT RESOURCES\n");
	for (int i = 0; i < SCSI_ROD_SLOTS + 1; i++) {
		uint8_t st = populate(R_B, 0x200 + (uint32_t)i,
				      (const struct range[]){{(uint64_t)i * 8, 8}}, 1, 0, tok);

		made += st == 0;
		if (st)
			r_sense(5, 0x55, 0x0d);
	}
	CHECK_EQ(made, SCSI_ROD_SLOTS); /* B's earlier token was deleted: its slot is reused */
	printf("# a write over them all frees the slots for new tokens\n");
	wr(R_B, 0, 8 * (SCSI_ROD_SLOTS + 1), zeros);
	CHECK_EQ(atomic_load(&((struct scsi_lu *)scsi_lun_map_get(E.map, R_B))->rod_live), 0);
	CHECK_EQ(populate(R_B, 0x300, (const struct range[]){{0, 8}}, 1, 0, tok), 0);
}

static void test_abort(void)
{
	uint8_t tok[512];
	uint32_t len;

	printf("# ABORT TASK of a WRITE USING TOKEN on a file LU: TASK ABORTED between chunks\n");
	fill(R_FILE, 0, 2048, 3);
	CHECK_EQ(populate(R_FILE, 0x140, (const struct range[]){{0, 8192}}, 1, 0, tok), 0);
	len = wut_list(plist, tok, 0, (const struct range[]){{8192, 8192}}, 1, false);
	r_start(R_FILE, tpc_cdb(0x83, 0x11, 0x141, len), 0, plist, len);
	CHECK_EQ(scsi_cmd_abort(&T.c), false); /* it ends by itself, soon */
	r_wait();
	CHECK_EQ(T.c.status, SCSI_STATUS_TASK_ABORTED);
	printf("# and a whole copy on the file LU compares equal\n");
	wut(R_FILE, 0x142, tok, 0, (const struct range[]){{8192, 8192}}, 1, false);
	CHECK_EQ(T.c.status, 0);
	rd_cmp(R_FILE, 8192, 2048, pattern);
}

int main(void)
{
	setup();
	test_vpd();
	test_copy();
	test_expiry();
	test_bad();
	test_slots();
	test_abort();
	scsi_nexus_free(E.nx);
	scsi_lun_map_free(E.map);
	scsi_lu_index_put(idx);
	scsi_lu_index_put(idx_other);
	scsi_thread_free(E.thr);
	ev_loop_free(E.loop);
	free(T.buf);
	unlink(file_path);
	return tap_done();
}
