/* Target tasks: the per-connection task table (ITT hash, allocation, release) and task
 * management: TMF requests (ABORT TASK, ABORT TASK SET, CLEAR TASK SET, LUN RESET, TARGET
 * WARM/COLD RESET) and aborts asked by other I_T nexuses (PREEMPT AND ABORT). RFC 7143
 * sections 11.5-11.6. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "target/tgt_int.h"
#include "util/bytes.h"
#include "util/log.h"

/* ---------------------------------------------------------------- task table */

static void tmf_respond(struct tgt_conn *tc, struct tgt_tmf *m);

static unsigned itt_slot(uint32_t itt)
{
	return (itt ^ (itt >> 8) ^ (itt >> 16)) % TGT_ITT_HASH;
}

void tgt_task_hash_add(struct tgt_conn *tc, struct tgt_task *t)
{
	t->hnext = tc->itt_hash[itt_slot(t->itt)];
	tc->itt_hash[itt_slot(t->itt)] = t;
}

struct tgt_task *tgt_task_find(struct tgt_conn *tc, uint32_t itt)
{
	for (struct tgt_task *t = tc->itt_hash[itt_slot(itt)]; t; t = t->hnext)
		if (t->itt == itt)
			return t;
	return NULL;
}

static void hash_del(struct tgt_conn *tc, struct tgt_task *task)
{
	struct tgt_task **pp = &tc->itt_hash[itt_slot(task->itt)];

	for (; *pp; pp = &(*pp)->hnext)
		if (*pp == task) {
			*pp = task->hnext;
			return;
		}
}

__attribute__((noinline, cold)) int tgt_task_grow(struct tgt_conn *tc)
{
	struct tgt_task_chunk *k;

	if (tc->ntasks >= tc->task_cap)
		return -ENOSPC;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->next = tc->task_chunks;
	tc->task_chunks = k;
	for (int i = 0; i < TGT_TASK_CHUNK && tc->ntasks < tc->task_cap; i++, tc->ntasks++) {
		k->t[i].tc = tc;
		list_add_tail(&k->t[i].link, &tc->free_tasks);
		k->n++;
	}
	if (k->next && !tc->trim_due) /* more than the first chunk: given back when quiet */
		tgt_trim_arm(tc);
	return 0;
}

/* The chunk holding slot t (NULL if none: not a pooled slot). */
static struct tgt_task_chunk *task_chunk_of(struct tgt_conn *tc, const struct tgt_task *t)
{
	uintptr_t a = (uintptr_t)t;

	for (struct tgt_task_chunk *k = tc->task_chunks; k; k = k->next)
		if (a >= (uintptr_t)k->t && a < (uintptr_t)(k->t + TGT_TASK_CHUNK))
			return k;
	return NULL;
}

uint32_t tgt_task_trim(struct tgt_conn *tc, uint32_t keep)
{
	struct tgt_task_chunk *k, **pp;
	struct list_head *pos;
	uint32_t left = 0, freed = 0;

	/* a slot is free when it is on free_tasks (one in use, or done with PDUs still
	   referring to its buffer, is not) */
	for (k = tc->task_chunks; k; k = k->next)
		k->nfree = 0;
	list_for_each(pos, &tc->free_tasks)
	{
		k = task_chunk_of(tc, list_entry(pos, struct tgt_task, link));
		if (k)
			k->nfree++;
	}
	for (k = tc->task_chunks; k; k = k->next)
		left += k->nfree < k->n;
	for (pp = &tc->task_chunks; (k = *pp);) {
		if (k->nfree < k->n || left < keep) {
			left += k->nfree == k->n; /* kept */
			pp = &k->next;
			continue;
		}
		for (uint32_t i = 0; i < k->n; i++) {
			tgt_buf_release(tc, k->t[i].buf, k->t[i].buf_cap); /* (none after
									      tgt_buf_trim) */
			list_del(&k->t[i].link);
		}
		tc->ntasks -= k->n;
		freed += k->n;
		*pp = k->next;
		free(k);
	}
	return freed;
}

/* ---------------------------------------------------------------- quiet connections */

uint64_t tgt_trim_wait_ms(uint64_t now_ns, uint64_t last_ns, uint32_t quiet_ms)
{
	uint64_t quiet_ns = (uint64_t)quiet_ms * 1000000u;

	if (now_ns < last_ns) /* (the same clock: does not happen) */
		return quiet_ms;
	if (now_ns - last_ns >= quiet_ns)
		return 0;
	return (quiet_ns - (now_ns - last_ns) + 999999u) / 1000000u;
}

bool tgt_conn_trim(struct tgt_conn *tc)
{
	struct iscsi_conn *c = tc->conn;
	uint64_t had = tc->buf_bytes;
	uint32_t slots, descs;

	tgt_buf_trim(tc);
	slots = tgt_task_trim(tc, 1);
	descs = iscsi_conn_tx_trim(c);
	if (slots || descs || had != tc->buf_bytes) {
		tc->worker->trims++;
		log_dbg("target",
			"%s: quiet for %u ms: gave back %u task slots, %u PDU descriptors, %llu "
			"bytes of data buffers",
			c->peer, tc->gen->cfg->global.idle_release_ms, slots, descs,
			(unsigned long long)(had - tc->buf_bytes));
	}
	return tc->buf_bytes == 0 && (!tc->task_chunks || !tc->task_chunks->next) &&
	       c->tx_pooled <= ISCSI_CONN_TXCHUNK;
}

/* The worker's trim timer: give back what quiet connections pooled. Runs while some
 * connection is marked (trim_due), at most about eight times per quiet period: a connection
 * is trimmed between idle_release_ms and 9/8 of it after its last command. */
static void trim_tick(struct ev_timer *tm)
{
	struct tgt_worker *w = tm->arg;
	uint64_t now = ev_now_ns(w->loop), next = UINT64_MAX, trims = w->trims;
	struct list_head *pos;

	list_for_each(pos, &w->conns)
	{
		struct tgt_conn *tc = list_entry(pos, struct tgt_conn, wlink);
		uint32_t quiet;
		uint64_t wait;

		if (!tc->trim_due)
			continue;
		quiet = tc->gen->cfg->global.idle_release_ms;
		if (!quiet || tc->conn->terminated) { /* kept / released soon */
			tc->trim_due = false;
			continue;
		}
		wait = tgt_trim_wait_ms(now, tc->last_cmd_ns, quiet);
		if (wait == 0) {
			if (tgt_conn_trim(tc)) {
				tc->trim_due = false;
				continue;
			}
			wait = quiet; /* a slot or descriptor still in use: look again later */
		}
		if (wait < quiet / 8)
			wait = quiet / 8;
		if (wait < next)
			next = wait;
	}
#ifdef __GLIBC__
	/* the chunks and buffers are small enough to live inside the C library's heaps, which
	   keep freed memory; give its whole free pages back to the system (the quiet moment
	   after a trim; at most once a tick) */
	if (w->trims != trims)
		malloc_trim(0);
#endif
	if (next != UINT64_MAX)
		ev_timer_start(w->loop, tm, next ? next : 1);
}

__attribute__((noinline, cold)) void tgt_trim_arm(struct tgt_conn *tc)
{
	struct tgt_worker *w = tc->worker;
	uint32_t quiet = tc->gen->cfg->global.idle_release_ms;

	if (!quiet)
		return;
	tc->trim_due = true;
	if (!ev_timer_pending(&w->trim_timer))
		ev_timer_start(w->loop, &w->trim_timer, quiet);
}

void tgt_trim_worker_init(struct tgt_worker *w)
{
	ev_timer_init(&w->trim_timer, trim_tick, w);
}

struct tgt_task *tgt_task_alloc(struct tgt_conn *tc, bool immediate)
{
	struct tgt_task *t;

	if (list_empty(&tc->free_tasks) && tgt_task_grow(tc) < 0)
		return NULL;
	if (immediate && tc->imm_in_use >= TGT_IMMEDIATE_EXTRA)
		return NULL;
	t = list_first_entry(&tc->free_tasks, struct tgt_task, link);
	list_del(&t->link);
	uint8_t *buf = t->buf;
	uint32_t cap = t->buf_cap;
	memset(t, 0, offsetof(struct tgt_task, link));
	t->buf = buf;
	t->buf_cap = cap;
	t->tc = tc;
	t->immediate = immediate;
	list_init(&t->zc_pdus);
	list_init(&t->zc_link);
	if (immediate)
		tc->imm_in_use++;
	return t;
}

void tgt_task_release(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;

	if (t->buf && t->buf_cap > 256 * 1024) {
		/* big buffers go back to the cache; small ones stay with the task slot */
		tgt_buf_put(tc, t->buf, t->buf_cap);
		t->buf = NULL;
		t->buf_cap = 0;
	}
	t->state = TASK_FREE;
	list_add(&t->link, &tc->free_tasks);
}

/* The task no longer holds a place in the CmdSN window (its status is on its way, or it is
 * gone): the window reopens by one on the next stamped PDU. */
void tgt_task_uncount(struct tgt_task *t)
{
	if (t->counted && t->tc->sess) {
		t->tc->sess->outstanding--;
		t->counted = false;
	}
}

/* Unlink a task from the ITT table and lists; the memory is recycled once no PDU references its
 * buffer. */
void tgt_task_free(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;

	if (t->state == TASK_FREE)
		return;
	t->tas_pending = false;
	for (int i = 0; i < 2; i++) { /* PREEMPT AND ABORTs waiting for it: it is gone */
		struct scsi_abort *req = t->abort_req[i];

		t->abort_req[i] = NULL;
		if (req)
			scsi_abort_release(req);
	}
	if (t->qos_queued) /* (its state may already say TASK_DONE: tgt_respond_aborted) */
		tgt_qos_unqueue(t);
	hash_del(tc, t);
	list_del(&t->link);
	if (t->immediate)
		tc->imm_in_use--;
	tgt_task_uncount(t);
	t->state = TASK_DONE;
	if (t->tx_pending == 0)
		tgt_task_release(t);
}

/* The LU that LUN field lun of the session names (its ACL's LUN masking), or NULL. */
static struct scsi_lu *sess_lu(const struct tgt_session *s, uint64_t lun)
{
	return scsi_lun_map_get(s->node->map, scsi_nexus_map_lun(s->nexus, scsi_lun_decode(lun)));
}

void tgt_task_finished(struct tgt_task *t)
{
	struct tgt_tmf *m = t->tmf_wait;

	t->tmf_wait = NULL;
	if (m && --m->waiting == 0)
		tmf_respond(t->tc, m);
}

void tgt_task_abort(struct tgt_task *t)
{
	if (t->state == TASK_EXEC) {
		t->aborted = true; /* freed when the SCSI layer completes it ... */
		scsi_cmd_abort(&t->sc); /* ... which may be now */
		return;
	}
	tgt_stat_count(t->tc, TGT_ST_TASK_ABORTED, 1);
	tgt_task_finished(t);
	tgt_task_free(t);
}

/* ---------------------------------------------------------------- task management */

static void tmf_respond(struct tgt_conn *tc, struct tgt_tmf *m)
{
	struct iscsi_hdr r = {.opcode = ISCSI_OP_TMF_RSP, .final = true, .itt = m->itt};

	r.tmf_rsp.response = m->response;
	if (!tc->conn->terminated) {
		tgt_stamp(tc, &r, true);
		/* A cold reset drops the connection (RFC 7143 11.5.1), after the response. */
		if (m->cold_reset) {
			log_info("target", "%s: TARGET COLD RESET", tc->conn->peer);
			tgt_send_then_close(tc, &r, NULL, 0);
		} else {
			tgt_send(tc, &r, NULL, 0);
		}
	}
	free(m);
}

/* Abort the tasks matching (lun or all); returns the number that must still finish. */
static int abort_tasks(struct tgt_conn *tc, struct tgt_tmf *m, bool all_luns, uint64_t lun,
		       uint32_t before_cmdsn, bool check_cmdsn)
{
	struct list_head *lists[2] = {&tc->active, &tc->order_q};
	int waiting = 0;

	for (int l = 0; l < 2; l++) {
		struct list_head *pos, *n;
		list_for_each_safe(pos, n, lists[l])
		{
			struct tgt_task *t = list_entry(pos, struct tgt_task, link);
			if (!all_luns && t->lun != lun)
				continue;
			if (check_cmdsn && !t->immediate && !sn_lt(t->cmdsn, before_cmdsn))
				continue;
			if (t->state == TASK_EXEC) {
				bool first = !t->aborted && !t->tmf_wait;

				t->aborted = true;
				/* A command the SCSI layer only waits on ends at once (then it
				 * is gone); others finish soon and the TMF waits for them. */
				if (scsi_cmd_abort(&t->sc))
					continue;
				if (first) {
					t->tmf_wait = m;
					waiting++;
				}
			} else {
				tgt_task_abort(t);
			}
		}
	}
	return waiting;
}

/* ---------------------------------------------------------------- aborts by other nexuses */

/* End a task another I_T nexus aborted (PREEMPT AND ABORT). One in the SCSI layer ends when
 * the layer lets go of it (at once if it only waits there, else when its backend I/O
 * completes), answered TASK ABORTED; one collecting its data or waiting for CmdSN order is
 * answered TASK ABORTED now (data still coming for it is dropped; a CmdSN it held in the order
 * queue counts as used, so ExpCmdSN steps over it). */
void tgt_task_abort_now(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;
	bool ordered = t->state == TASK_WAIT_ORDER;
	uint32_t sn = t->cmdsn;

	t->tas_pending = false;
	if (t->state == TASK_EXEC) {
		if (!t->aborted) { /* not already aborted by its own initiator's TMF */
			t->aborted = true;
			t->tas = true;
		}
		scsi_cmd_abort(&t->sc); /* may complete it now (scsi_done) */
		return;
	}
	if (t->state != TASK_DATA_OUT && t->state != TASK_QOS_WAIT && !ordered)
		return;
	tgt_stat_count(tc, TGT_ST_TASK_ABORTED, 1);
	if (!tc->conn->terminated)
		tgt_respond_aborted(t);
	tgt_task_finished(t);
	tgt_task_free(t);
	if (ordered && tc->sess) /* ahead of ExpCmdSN (else it would not wait): no task starts */
		tgt_cmdsn_consume(tc, sn);
}

void tgt_abort_hook(void *arg, struct scsi_abort *req)
{
	struct tgt_worker *w = arg;
	struct scsi_lu *lu = scsi_abort_lu(req);
	struct list_head *pos;
	unsigned n = 0;

	list_for_each(pos, &w->conns)
	{
		struct tgt_conn *tc = list_entry(pos, struct tgt_conn, wlink);
		struct tgt_session *s = tc->sess;
		struct list_head *lists[2] = {&tc->active, &tc->order_q};

		if (!s || !s->nexus || s->type != ISCSI_SESSION_NORMAL ||
		    !scsi_abort_wants(req, s->nexus))
			continue;
		for (int l = 0; l < 2; l++) {
			struct list_head *tp, *tn;

			list_for_each_safe(tp, tn, lists[l])
			{
				struct tgt_task *t = list_entry(tp, struct tgt_task, link);

				if (sess_lu(s, t->lun) != lu || t->state == TASK_DONE)
					continue;
				for (int i = 0; i < 2; i++)
					if (!t->abort_req[i] && t->abort_req[i ^ 1] != req) {
						t->abort_req[i] = req;
						scsi_abort_hold(req);
						break;
					}
				n++;
				if (tc->rx_task == t) /* a PDU of it is coming in: after that */
					t->tas_pending = true;
				else
					tgt_task_abort_now(t);
			}
		}
	}
	if (n)
		log_info("target",
			 "worker %d: %u task(s) of I_T nexuses preempted by a PREEMPT AND "
			 "ABORT aborted",
			 w->id, n);
}

void tgt_tmf(struct tgt_conn *tc, const struct iscsi_hdr *h)
{
	const struct iscsi_tmf_req *q = &h->tmf_req;
	struct tgt_session *s = tc->sess;
	struct tgt_tmf *m = calloc(1, sizeof(*m));
	struct scsi_lu *lu;

	if (!m) {
		iscsi_conn_close(tc->conn, "out of memory for a TMF");
		return;
	}
	m->itt = h->itt;
	m->response = ISCSI_TMF_RSP_COMPLETE;
	switch (q->function) {
	case ISCSI_TMF_ABORT_TASK: {
		struct tgt_task *t = tgt_task_find(tc, q->rtt);
		if (t && t->lun == q->lun) {
			if (t->state == TASK_EXEC) {
				t->aborted = true;
				if (!scsi_cmd_abort(&t->sc) && !t->tmf_wait) {
					t->tmf_wait = m;
					m->waiting++;
				}
			} else {
				tgt_task_abort(t);
			}
		} else if (!(sn_le(s->exp_cmdsn, q->refcmdsn) && sn_lt(q->refcmdsn, q->cmdsn) &&
			     !h->immediate)) {
			/* RFC 7143 11.6.1: a task that is not (or no longer) there */
			m->response = ISCSI_TMF_RSP_NO_TASK;
		}
		break;
	}
	case ISCSI_TMF_ABORT_TASK_SET:
	case ISCSI_TMF_CLEAR_TASK_SET:
		if (!sess_lu(s, q->lun)) {
			m->response = ISCSI_TMF_RSP_NO_LUN;
			break;
		}
		m->waiting += abort_tasks(tc, m, false, q->lun, q->cmdsn, !h->immediate);
		break;
	case ISCSI_TMF_LUN_RESET:
		lu = sess_lu(s, q->lun);
		if (!lu) {
			m->response = ISCSI_TMF_RSP_NO_LUN;
			break;
		}
		m->waiting += abort_tasks(tc, m, false, q->lun, 0, false);
		scsi_lu_reset(lu, s->nexus);
		break;
	case ISCSI_TMF_TARGET_WARM_RESET:
	case ISCSI_TMF_TARGET_COLD_RESET:
		m->waiting += abort_tasks(tc, m, true, 0, 0, false);
		for (uint32_t l = 0; l < SCSI_MAX_LUNS; l++) {
			lu = sess_lu(s, scsi_lun_encode(l));
			if (lu)
				scsi_lu_reset(lu, s->nexus);
		}
		m->cold_reset = q->function == ISCSI_TMF_TARGET_COLD_RESET;
		break;
	case ISCSI_TMF_TASK_REASSIGN:
		m->response = ISCSI_TMF_RSP_NO_REASSIGN; /* ErrorRecoveryLevel 0 */
		break;
	default:
		m->response = ISCSI_TMF_RSP_NOT_SUPPORTED;
		break;
	}
	if (m->waiting == 0)
		tmf_respond(tc, m);
}
