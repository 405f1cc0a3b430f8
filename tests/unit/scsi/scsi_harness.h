/* Shared by the SCSI unit tests: an environment (LUN map, nexuses, event loop and a
 * scsi_thread), running one command to completion through the loop, and the table format. */
#ifndef IX_TESTS_SCSI_HARNESS_H
#define IX_TESTS_SCSI_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "event/loop.h"
#include "scsi/scsi.h"
#include "tap.h"

#define TBUF (256u * 1024)

struct tcmd {
	struct scsi_cmd c;
	int ndone;
	uint8_t cdb[16]; /* the CDB, zero padded as an iSCSI PDU carries it */
};

static inline void t_done(struct scsi_cmd *c)
{
	((struct tcmd *)c->priv)->ndone++;
}

struct env {
	struct scsi_lun_map *map;
	struct scsi_nexus *nx;
	struct ev_loop *loop;
	struct scsi_thread *thr;
	uint8_t *buf;
	bool map_ok; /* commands may answer READs from LU memory (scsi_cmd.data_in_map_ok) */
};

/* Start one command (it may complete at once or later, from the loop). cdb_size is the size
 * of the caller's CDB array (t_start() and t_run() pass sizeof). */
static inline void t_start_n(struct env *e, struct scsi_nexus *nx, uint32_t lun,
			     const uint8_t *cdb, size_t cdb_size, uint32_t din_max,
			     const uint8_t *dout, uint32_t dout_len, struct tcmd *t)
{
	memset(t, 0, sizeof(*t));
	memcpy(t->cdb, cdb, cdb_size < 16 ? cdb_size : 16);
	t->c.thread = e->thr;
	t->c.map = e->map;
	t->c.nexus = nx;
	t->c.lun_field = scsi_lun_encode(lun);
	t->c.cdb = t->cdb;
	t->c.cdb_len = 16;
	t->c.buf = e->buf;
	t->c.buf_len = TBUF;
	memset(e->buf, 0xee, TBUF);
	if (dout && dout_len)
		memcpy(e->buf, dout, dout_len);
	t->c.data_out_len = dout_len;
	t->c.data_in_max = din_max;
	t->c.data_in_map_ok = e->map_ok;
	t->c.done = t_done;
	t->c.priv = t;
	scsi_cmd_exec(&t->c);
}

/* Turn the loop until t completed or about 20 s passed; returns how often done fired. */
static inline int t_wait(struct env *e, struct tcmd *t)
{
	for (int i = 0; i < 2000 && t->ndone == 0; i++)
		ev_loop_run_once(e->loop, 10);
	return t->ndone;
}

/* Run one command; returns the number of times done fired (must be 1). */
static inline int t_run_n(struct env *e, struct scsi_nexus *nx, uint32_t lun, const uint8_t *cdb,
			  size_t cdb_size, uint32_t din_max, const uint8_t *dout, uint32_t dout_len,
			  struct tcmd *t)
{
	t_start_n(e, nx, lun, cdb, cdb_size, din_max, dout, dout_len, t);
	return t_wait(e, t);
}

#define t_run(e, nx, lun, cdb, ...) t_run_n(e, nx, lun, cdb, sizeof(cdb), __VA_ARGS__)
#define t_start(e, nx, lun, cdb, ...) t_start_n(e, nx, lun, cdb, sizeof(cdb), __VA_ARGS__)

/* One table row: CDB in, expected status/sense/data out. */
struct tc {
	const char *name;
	uint32_t lun;
	uint8_t cdb[16];
	uint32_t din;	     /* data_in_max */
	const uint8_t *dout; /* data-out bytes */
	uint32_t dout_len;
	uint8_t status;
	uint8_t key, asc, ascq;
	uint32_t xfer;	    /* expected xfer_wanted; NOCHK to skip */
	uint32_t nexp;	    /* expected data_in_len */
	uint32_t exp_len;   /* bytes of exp to compare (<= nexp) */
	const uint8_t *exp; /* expected data; NULL to skip */
};

#define NOCHK  0xffffffffu
#define B(...) ((const uint8_t[]){__VA_ARGS__})
/* Table helpers that keep a byte list and its length together. */
#define DOUT(...) B(__VA_ARGS__), sizeof(B(__VA_ARGS__))
#define EXP(...)  sizeof(B(__VA_ARGS__)), B(__VA_ARGS__)

static inline void t_check(struct env *e, const struct tc *c)
{
	struct tcmd t;
	int n = t_run(e, e->nx, c->lun, c->cdb, c->din, c->dout, c->dout_len, &t);

	printf("# %s\n", c->name);
	CHECK_EQ(n, 1);
	CHECK_EQ(t.c.status, c->status);
	if (c->status == 0x02) {
		CHECK_EQ(t.c.sense[0] & 0x7f, 0x70);
		CHECK_EQ(t.c.sense[2] & 0x0f, c->key);
		CHECK_EQ(t.c.sense[12], c->asc);
		CHECK_EQ(t.c.sense[13], c->ascq);
	}
	if (c->xfer != NOCHK)
		CHECK_EQ(t.c.xfer_wanted, c->xfer);
	if (c->status == 0) {
		CHECK_EQ(t.c.data_in_len, c->nexp);
		if (c->exp) {
			CHECK(c->exp_len <= c->nexp);
			CHECK_MEM(t.c.buf, c->exp, c->exp_len);
		}
	}
}

static inline void t_check_sense(const struct tcmd *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
	CHECK_EQ(t->c.status, 0x02);
	CHECK_EQ(t->c.sense[2] & 0x0f, key);
	CHECK_EQ(t->c.sense[12], asc);
	CHECK_EQ(t->c.sense[13], ascq);
}

/* The LUs of the test target (test_scsi.c sets them up). */
enum { L_RAM = 0, L_RO = 1, L_NOMED = 2, L_FILE = 3, L_4K = 4, L_ERR = 5, L_ABSENT = 7 };

extern const uint8_t zblk[4096]; /* a zero block for data-out */

/* Mode pages, in the order and with the lengths SPC-4 gives them. */
#define PG_CACHING_WCE 0x08, 0x12, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
#define PG_CONTROL     0x0a, 0x0a, 0x02, 0x10, 0, 0x40, 0, 0, 0xff, 0xff, 0, 0

/* scsi_cases.c: the tables, terminated by a NULL name. */
struct tc_table {
	const char *name;
	const struct tc *rows;
	size_t n;
};
extern const struct tc_table scsi_case_tables[];

#endif
