/* The hold and drain of an LU for a snapshot, and its busy state for a rollback (scsi/hold.c,
 * scsi_lu_quiesce in scsi.h), with the error backend as a stub whose writes to some blocks
 * stay in flight for a while: new writes wait (not failed) while reads go on; the drain waits
 * for the writes in flight; a drain that does not end in time lifts the hold by itself and
 * reports -ETIMEDOUT; the busy state answers NOT READY, OPERATION IN PROGRESS (2/04/07) and
 * its end posts 6/28/00; a second quiesce is refused; a held write can be aborted. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

const uint8_t zblk[4096];

#define SLOW_LBA  100 /* writes here stay in flight SLOW_MS */
#define SLOW_MS	  400
#define STUCK_LBA 200 /* writes here stay in flight STUCK_MS */
#define STUCK_MS  3000

struct qres {
	int calls, rc;
	int write_done_at_cb; /* the slow write's completions when the drain answered */
	struct tcmd *watch;
};

static void q_cb(void *arg, int rc)
{
	struct qres *r = arg;

	r->calls++;
	r->rc = rc;
	r->write_done_at_cb = r->watch ? r->watch->ndone : -1;
}

static void noop_hook(void *arg, struct scsi_abort *req)
{
	(void)arg;
	(void)req;
}

/* Turn the loop until *flag is set or ms passed. */
static void turn(struct env *e, const int *flag, int ms)
{
	for (int i = 0; i < ms / 5 && !(flag && *flag); i++)
		ev_loop_run_once(e->loop, 5);
}

static void wr(struct env *e, uint32_t lba, struct tcmd *t)
{
	uint8_t cdb[10] = {0x2a,
			   0,
			   (uint8_t)(lba >> 24),
			   (uint8_t)(lba >> 16),
			   (uint8_t)(lba >> 8),
			   (uint8_t)lba,
			   0,
			   0,
			   1,
			   0};

	t_start(e, e->nx, 0, cdb, 0, zblk, 512, t);
}

static void rd(struct env *e, uint32_t lba, struct tcmd *t)
{
	uint8_t cdb[10] = {0x28,
			   0,
			   (uint8_t)(lba >> 24),
			   (uint8_t)(lba >> 16),
			   (uint8_t)(lba >> 8),
			   (uint8_t)lba,
			   0,
			   0,
			   1,
			   0};

	t_start(e, e->nx, 0, cdb, 512, NULL, 0, t);
}

int main(void)
{
	static const struct bs_err_rule rules[] = {
	    {.ops = BS_ERR_OP_WRITE, .lba = SLOW_LBA, .blocks = 1, .delay_ms = SLOW_MS},
	    {.ops = BS_ERR_OP_WRITE, .lba = STUCK_LBA, .blocks = 1, .delay_ms = STUCK_MS}};
	struct scsi_lu_index *ix = scsi_lu_index_new();
	struct env e;
	struct scsi_lu *lu;
	struct tcmd a, b, c, d;
	struct qres q = {0};
	char err[256] = "";

	memset(&e, 0, sizeof(e));
	e.loop = ev_loop_new();
	e.thr = scsi_thread_new(e.loop, ix);
	scsi_thread_set_abort(e.thr, noop_hook, NULL); /* the drain's barrier visits it */
	e.map = scsi_lun_map_new();
	e.buf = aligned_alloc(4096, TBUF);
	CHECK_EQ(scsi_lu_new(&(struct scsi_lu_cfg){.backend = BS_TYPE_ERROR,
						   .size_bytes = 1 << 20,
						   .err_rules = rules,
						   .n_err_rules = 2,
						   .target_name = "iqn.2024-01.org.example:t1",
						   .index = ix},
			     &lu, err, sizeof(err)),
		 0);
	CHECK_EQ(scsi_lun_map_add(e.map, 0, lu), 0);
	e.nx = scsi_nexus_new(e.map, "iqn.2024-01.org.example:i1,i,0x000000000001",
			      "iqn.2024-01.org.example:t1,t,0x0001");
	t_run(&e, e.nx, 0, B(0x00), 0, NULL, 0, &a); /* the power-on unit attention */
	CHECK_EQ(scsi_lu_nexus_count(lu), 1u);

	printf("# nothing in flight: drained at once; new writes wait, reads go on\n");
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 2000, false, q_cb, &q), 0);
	CHECK_EQ(q.calls, 0); /* never before it returns */
	turn(&e, &q.calls, 1000);
	CHECK_EQ(q.calls, 1);
	CHECK_EQ(q.rc, 0);
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 2000, false, q_cb, &q), -EBUSY);
	wr(&e, 1, &a);
	turn(&e, &a.ndone, 100);
	CHECK_EQ(a.ndone, 0); /* held, not failed */
	rd(&e, 1, &b);
	turn(&e, &b.ndone, 1000);
	CHECK_EQ(b.ndone, 1);
	CHECK_EQ(b.c.status, 0);
	scsi_lu_resume(lu, false);
	turn(&e, &a.ndone, 1000);
	CHECK_EQ(a.ndone, 1);
	CHECK_EQ(a.c.status, 0);

	printf("# a write in flight: the drain answers only after it completed\n");
	memset(&q, 0, sizeof(q));
	wr(&e, SLOW_LBA, &c);
	q.watch = &c;
	CHECK_EQ(c.ndone, 0);
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 5000, false, q_cb, &q), 0);
	turn(&e, &q.calls, SLOW_MS * 5);
	CHECK_EQ(q.calls, 1);
	CHECK_EQ(q.rc, 0);
	CHECK_EQ(q.write_done_at_cb, 1);
	CHECK_EQ(c.c.status, 0);
	scsi_lu_resume(lu, false);

	printf("# a write stuck past the bound: -ETIMEDOUT, the hold ends by itself\n");
	memset(&q, 0, sizeof(q));
	wr(&e, STUCK_LBA, &c);
	q.watch = &c;
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 200, false, q_cb, &q), 0);
	wr(&e, 2, &a); /* held meanwhile */
	turn(&e, &q.calls, 2000);
	CHECK_EQ(q.calls, 1);
	CHECK_EQ(q.rc, -ETIMEDOUT);
	CHECK_EQ(q.write_done_at_cb, 0);
	turn(&e, &a.ndone, 1000); /* the held write runs once the hold is gone */
	CHECK_EQ(a.ndone, 1);
	CHECK_EQ(a.c.status, 0);
	wr(&e, 3, &b); /* and new ones are not held */
	turn(&e, &b.ndone, 1000);
	CHECK_EQ(b.ndone, 1);
	CHECK_EQ(b.c.status, 0);
	turn(&e, &c.ndone, STUCK_MS * 2);
	CHECK_EQ(c.ndone, 1);
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 1000, false, q_cb, &q), 0); /* free again */
	q.calls = 0;
	turn(&e, &q.calls, 1000);
	CHECK_EQ(q.rc, 0);

	printf("# a held write is aborted (TASK ABORTED), once\n");
	wr(&e, 4, &d);
	turn(&e, NULL, 20);
	CHECK_EQ(d.ndone, 0);
	CHECK(scsi_cmd_abort(&d.c));
	CHECK_EQ(d.ndone, 1);
	CHECK_EQ(d.c.status, SCSI_STATUS_TASK_ABORTED);
	scsi_lu_resume(lu, false);
	turn(&e, NULL, 50);
	CHECK_EQ(d.ndone, 1);

	printf("# busy (a rollback): NOT READY 04/07 for reads and writes, then 6/28/00\n");
	memset(&q, 0, sizeof(q));
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 1000, true, q_cb, &q), 0);
	turn(&e, &q.calls, 1000);
	CHECK_EQ(q.rc, 0);
	rd(&e, 1, &a);
	turn(&e, &a.ndone, 1000);
	t_check_sense(&a, SCSI_SENSE_NOT_READY, 0x04, 0x07);
	wr(&e, 1, &b);
	turn(&e, &b.ndone, 1000);
	t_check_sense(&b, SCSI_SENSE_NOT_READY, 0x04, 0x07);
	t_run(&e, e.nx, 0, B(0x12, 0, 0, 0, 36, 0), 36, NULL, 0, &c); /* INQUIRY still answers */
	CHECK_EQ(c.c.status, 0);
	scsi_lu_resume(lu, true);
	t_run(&e, e.nx, 0, B(0x00), 0, NULL, 0, &a);
	t_check_sense(&a, SCSI_SENSE_UNIT_ATTENTION, 0x28, 0x00);
	t_run(&e, e.nx, 0, B(0x00), 0, NULL, 0, &a);
	CHECK_EQ(a.c.status, 0);

	printf("# a SANITIZE in progress: refused (it writes with no command in flight)\n");
	atomic_fetch_or(&lu->mstate, SCSI_MS_SANITIZE);
	CHECK_EQ(scsi_lu_quiesce(lu, e.loop, 1000, false, q_cb, &q), -EINPROGRESS);
	atomic_fetch_and(&lu->mstate, (uint8_t)~SCSI_MS_SANITIZE);

	printf("# no medium: refused\n");
	{
		struct scsi_lu *nm;

		CHECK_EQ(
		    scsi_lu_new(&(struct scsi_lu_cfg){.no_medium = true}, &nm, err, sizeof(err)),
		    0);
		CHECK_EQ(scsi_lu_quiesce(nm, e.loop, 1000, false, q_cb, &q), -ENOMEDIUM);
		scsi_lu_put(nm);
	}

	scsi_nexus_free(e.nx);
	scsi_lu_put(lu);
	scsi_lun_map_free(e.map);
	scsi_thread_free(e.thr);
	scsi_lu_index_put(ix);
	ev_loop_free(e.loop);
	free(e.buf);
	return tap_done();
}
