/* Holding an LU's writes for a snapshot, and refusing its medium commands for a rollback
 * (scsi_lu_quiesce in scsi.h; docs/snapshots.md).
 *
 * Nothing here is on the data path while no quiesce runs: the state is two bits of
 * lu->mstate, which every command loads once anyway (precheck; SCSI_MS_LOADED alone is the
 * common case and skips every other test). A write that meets SCSI_MS_HOLD waits on its own
 * thread (hold_waits, like a START STOP UNIT waiting in spc.c) and runs from its checks again
 * once the bit is gone; one that meets SCSI_MS_BUSY gets NOT READY (04/07).
 *
 * The drain: each write command is counted in its I_T_L nexus (itl->wr_inflight) from its
 * checks to its completion, by the nexus's thread alone (a plain load and store). A command
 * that passed its checks before the bit was set may not have counted itself yet when the main
 * thread looks, so the count is read only after every worker thread has run one job posted
 * after the bit was set (scsi_abort_start with no nexus to abort: a barrier through each
 * thread's loop, whose queue orders the job after the command's whole turn). From then on the
 * sum over the LU's nexuses only falls; it is polled every SCSI_HOLD_POLL_MS on the main
 * loop. */
#include <errno.h>
#include <stdlib.h>

#include "event/loop.h"
#include "scsi/scsi_int.h"
#include "util/log.h"

#define SCSI_HOLD_POLL_MS 1 /* a held write looks again, a drain counts again */

/* ---- a write waiting for the hold to end (its thread) ---- */

struct hold_wait {
	struct ev_timer timer;
	struct scsi_cmd *cmd;
	const struct scsi_op *op;
	struct list_head link; /* on cmd->thread->hold_waits */
};

static void hold_wait_end(struct hold_wait *w)
{
	ev_timer_stop(w->cmd->thread->loop, &w->timer);
	list_del(&w->link);
	free(w);
}

static void hold_wait_timer(struct ev_timer *t)
{
	struct hold_wait *w = t->arg;
	struct scsi_cmd *cmd = w->cmd;
	const struct scsi_op *op = w->op;

	if (atomic_load_explicit(&scsi_priv(cmd)->lu->mstate, memory_order_acquire) &
	    SCSI_MS_HOLD) {
		ev_timer_start(cmd->thread->loop, &w->timer, SCSI_HOLD_POLL_MS);
		return;
	}
	hold_wait_end(w);
	scsi_cmd_rerun(cmd, op);
}

void scsi_hold_park(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	struct hold_wait *w = calloc(1, sizeof(*w));

	if (!w) { /* no memory to wait with: the initiator tries again */
		cmd->status = SCSI_STATUS_BUSY;
		scsi_cmd_finish(cmd);
		return;
	}
	w->cmd = cmd;
	w->op = op;
	ev_timer_init(&w->timer, hold_wait_timer, w);
	list_add_tail(&w->link, &cmd->thread->hold_waits);
	ev_timer_start(cmd->thread->loop, &w->timer, SCSI_HOLD_POLL_MS);
}

static struct hold_wait *hold_find(struct scsi_cmd *cmd)
{
	struct list_head *pos;

	if (!cmd->thread)
		return NULL;
	list_for_each(pos, &cmd->thread->hold_waits)
	{
		struct hold_wait *w = list_entry(pos, struct hold_wait, link);

		if (w->cmd == cmd)
			return w;
	}
	return NULL;
}

bool scsi_hold_abort(struct scsi_cmd *cmd)
{
	struct hold_wait *w = hold_find(cmd);

	if (!w)
		return false;
	hold_wait_end(w);
	cmd->status = SCSI_STATUS_TASK_ABORTED;
	scsi_cmd_finish(cmd);
	return true;
}

void scsi_hold_thread_stop(struct scsi_thread *t)
{
	while (!list_empty(&t->hold_waits)) {
		struct hold_wait *w = list_first_entry(&t->hold_waits, struct hold_wait, link);
		struct scsi_cmd *cmd = w->cmd;

		hold_wait_end(w);
		cmd->status = SCSI_STATUS_TASK_ABORTED;
		scsi_cmd_finish(cmd);
	}
}

/* ---- the quiesce (main thread) ---- */

struct quiesce {
	struct scsi_lu *lu; /* referenced */
	struct ev_loop *loop;
	struct ev_timer poll, deadline;
	scsi_quiesce_cb cb;
	void *arg;
	bool barrier; /* every worker thread has seen the bit */
	bool ended;   /* cb has run */
};

static void q_free(struct quiesce *q)
{
	scsi_lu_put(q->lu);
	free(q);
}

/* The bits go, and with them the hold. */
static void lu_release(struct scsi_lu *lu)
{
	pthread_mutex_lock(&lu->lock);
	atomic_fetch_and_explicit(&lu->mstate, (uint8_t) ~(SCSI_MS_HOLD | SCSI_MS_BUSY),
				  memory_order_acq_rel);
	lu->quiescing = false;
	pthread_mutex_unlock(&lu->lock);
}

static unsigned wr_inflight(struct scsi_lu *lu)
{
	struct list_head *pos;
	unsigned n = 0;

	pthread_mutex_lock(&lu->lock);
	list_for_each(pos, &lu->itls) n += atomic_load_explicit(
	    &list_entry(pos, struct scsi_itl, lu_link)->wr_inflight, memory_order_acquire);
	pthread_mutex_unlock(&lu->lock);
	return n;
}

static void q_end(struct quiesce *q, int rc)
{
	q->ended = true;
	ev_timer_stop(q->loop, &q->poll);
	ev_timer_stop(q->loop, &q->deadline);
	if (rc < 0)
		lu_release(q->lu);
	q->cb(q->arg, rc);
	if (q->barrier)
		q_free(q);
}

static void q_poll(struct ev_timer *t)
{
	struct quiesce *q = t->arg;

	if (wr_inflight(q->lu) == 0)
		q_end(q, 0);
	else
		ev_timer_start(q->loop, &q->poll, SCSI_HOLD_POLL_MS);
}

static void q_deadline(struct ev_timer *t)
{
	struct quiesce *q = t->arg;

	log_warn("scsi", "LU %s/%u: its writes did not drain in time: the hold ends",
		 q->lu->target_name, q->lu->lun);
	q_end(q, -ETIMEDOUT);
}

/* Every worker thread has run its job (scsi_abort_start): the count can be read. */
static void q_barrier(void *arg, bool all)
{
	struct quiesce *q = arg;

	(void)all; /* a thread whose job could not be posted: the deadline still bounds it */
	q->barrier = true;
	if (q->ended) {
		q_free(q);
		return;
	}
	q_poll(&q->poll);
}

int scsi_lu_quiesce(struct scsi_lu *lu, struct ev_loop *loop, unsigned timeout_ms, bool busy,
		    scsi_quiesce_cb cb, void *arg)
{
	struct quiesce *q;
	int rc;

	if (!lu->dev)
		return -ENOMEDIUM;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	pthread_mutex_lock(&lu->lock);
	if (lu->quiescing || (atomic_load(&lu->mstate) & SCSI_MS_SANITIZE)) {
		/* a SANITIZE writes in the background, with no command in flight */
		rc = lu->quiescing ? -EBUSY : -EINPROGRESS;
		pthread_mutex_unlock(&lu->lock);
		free(q);
		return rc;
	}
	lu->quiescing = true;
	atomic_fetch_or_explicit(&lu->mstate, busy ? SCSI_MS_BUSY : SCSI_MS_HOLD,
				 memory_order_seq_cst);
	pthread_mutex_unlock(&lu->lock);
	scsi_lu_get(lu);
	q->lu = lu;
	q->loop = loop;
	q->cb = cb;
	q->arg = arg;
	ev_timer_init(&q->poll, q_poll, q);
	ev_timer_init(&q->deadline, q_deadline, q);
	rc = scsi_abort_start(lu, NULL, 0, loop, q_barrier, q);
	if (rc < 0) {
		lu_release(lu);
		q_free(q);
		return rc;
	}
	ev_timer_start(loop, &q->deadline, timeout_ms);
	return 0;
}

void scsi_lu_resume(struct scsi_lu *lu, bool changed)
{
	lu_release(lu);
	if (changed) /* NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED */
		scsi_ua_post_others(lu, NULL, 0x28, 0x00);
}

unsigned scsi_lu_nexus_count(struct scsi_lu *lu)
{
	struct list_head *pos;
	unsigned n = 0;

	pthread_mutex_lock(&lu->lock);
	list_for_each(pos, &lu->itls) n++;
	pthread_mutex_unlock(&lu->lock);
	return n;
}
