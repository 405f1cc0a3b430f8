/* QoS: I/O limits per LUN and per initiator (tgt_qos.h says how). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "target/tgt_int.h"
#include "util/log.h"

_Static_assert(sizeof(((struct tgt_qos_ini *)0)->name) == ISCSI_NAME_MAX, "initiator name size");

/* ---------------------------------------------------------------- cells (pure) */

uint64_t tgt_qos_cost_ns(uint64_t cost, uint64_t rate)
{
	/* cost <= TGT_MAX_IO (2^26) and 10^9 < 2^30: no overflow below 2^56 */
	if (cost > (1ull << 33))
		cost = 1ull << 33;
	return cost * 1000000000ull / rate;
}

uint64_t tgt_qos_cell_take(_Atomic uint64_t *tat, uint64_t rate, uint64_t burst_ns,
			   uint64_t cost, uint64_t now_ns)
{
	uint64_t inc = tgt_qos_cost_ns(cost, rate);
	uint64_t old = atomic_load_explicit(tat, memory_order_relaxed), base;

	do {
		base = old > now_ns ? old : now_ns;
		if (base > UINT64_MAX - inc) /* absurd limits (bytes a second, 64 MiB commands) */
			base = UINT64_MAX - inc;
	} while (!atomic_compare_exchange_weak_explicit(tat, &old, base + inc,
							memory_order_relaxed,
							memory_order_relaxed));
	return old > now_ns + burst_ns ? old - burst_ns : now_ns;
}

uint64_t tgt_qos_take(struct tgt_qos *q, bool write, uint64_t bytes, uint64_t now_ns)
{
	const int which[4] = {write ? CFG_QOS_WRITE_IOPS : CFG_QOS_READ_IOPS, CFG_QOS_IOPS,
			      write ? CFG_QOS_WRITE_BPS : CFG_QOS_READ_BPS, CFG_QOS_BPS};
	uint64_t burst = atomic_load_explicit(&q->burst_ns, memory_order_relaxed);
	uint64_t start = now_ns;

	for (int i = 0; i < 4; i++) {
		uint64_t rate = atomic_load_explicit(&q->rate[which[i]], memory_order_relaxed);
		uint64_t s;

		if (!rate || (i >= 2 && !bytes))
			continue;
		s = tgt_qos_cell_take(&q->tat[which[i]], rate, burst, i < 2 ? 1 : bytes, now_ns);
		if (s > start)
			start = s;
	}
	return start;
}

bool tgt_qos_set(struct tgt_qos *q, const struct cfg_qos *c)
{
	uint64_t burst = (uint64_t)c->burst_ms * 1000000u;
	bool changed = atomic_load(&q->burst_ns) != burst, on = false;

	for (int i = 0; i < CFG_QOS_NLIMITS; i++) {
		changed = changed || atomic_load(&q->rate[i]) != c->limit[i];
		on = on || c->limit[i];
	}
	if (!changed)
		return false;
	for (int i = 0; i < CFG_QOS_NLIMITS; i++) {
		atomic_store(&q->rate[i], c->limit[i]);
		atomic_store(&q->tat[i], 0); /* afresh: the new rate from now on */
	}
	atomic_store(&q->burst_ns, burst);
	atomic_store(&q->on, on);
	return true;
}

/* ---------------------------------------------------------------- the target */

struct tgt_qos_node *tgt_qos_node_new(void)
{
	return calloc(1, sizeof(struct tgt_qos_node));
}

void tgt_qos_node_free(struct tgt_qos_node *qn)
{
	struct tgt_qos_ini *i, *n;

	if (!qn)
		return;
	for (int l = 0; l < SCSI_MAX_LUNS; l++)
		free(atomic_load(&qn->lun[l]));
	for (i = atomic_load(&qn->inis); i; i = n) {
		n = i->next;
		free(i);
	}
	free(qn);
}

static const struct cfg_qos no_qos;

static bool qos_given(const struct cfg_qos *c)
{
	for (int i = 0; i < CFG_QOS_NLIMITS; i++)
		if (c->limit[i])
			return true;
	return false;
}

static int apply_lun(struct tgt_qos_node *qn, uint32_t lun, const struct cfg_qos *c,
		     bool *changed)
{
	struct tgt_qos *q = atomic_load(&qn->lun[lun]);

	if (!q && !qos_given(c))
		return 0;
	if (!q) {
		if (!(q = calloc(1, sizeof(*q))))
			return -ENOMEM;
		tgt_qos_set(q, c);
		atomic_store(&qn->lun[lun], q); /* seq_cst: published after its rates */
		*changed = true;
		return 0;
	}
	*changed |= tgt_qos_set(q, c);
	return 0;
}

static int apply_ini(struct tgt_qos_node *qn, const char *name, const struct cfg_qos *c,
		     bool *changed)
{
	struct tgt_qos_ini *i;

	for (i = atomic_load(&qn->inis); i; i = i->next)
		if (strcasecmp(i->name, name) == 0) {
			*changed |= tgt_qos_set(&i->q, c);
			return 0;
		}
	if (!qos_given(c))
		return 0;
	if (!(i = calloc(1, sizeof(*i))))
		return -ENOMEM;
	snprintf(i->name, sizeof(i->name), "%s", name);
	tgt_qos_set(&i->q, c);
	i->next = atomic_load(&qn->inis);
	atomic_store(&qn->inis, i);
	atomic_fetch_add(&qn->ini_gen, 1);
	*changed = true;
	return 0;
}

static void replan_msg(void *arg);

int tgt_qos_apply(struct ix_target *t, struct tgt_node *n, const struct cfg_target *ct)
{
	struct tgt_qos_node *qn = n->qos;
	bool changed = false, on = false;
	int r = 0;

	for (uint32_t l = 0; l < SCSI_MAX_LUNS && !r; l++) {
		const struct cfg_qos *c = &no_qos;

		for (size_t i = 0; i < ct->nluns; i++)
			if (ct->luns[i].lun == l)
				c = &ct->luns[i].qos;
		r = apply_lun(qn, l, c, &changed);
	}
	for (struct tgt_qos_ini *i = atomic_load(&qn->inis); i && !r; i = i->next) {
		const struct cfg_acl *a = cfg_find_acl(ct, i->name);

		/* an initiator no longer listed (or listed without limits) has none */
		r = apply_ini(qn, i->name, a && a->initiator ? &a->qos : &no_qos, &changed);
	}
	for (size_t i = 0; i < ct->nacls && !r; i++)
		r = apply_ini(qn, ct->acls[i].initiator, &ct->acls[i].qos, &changed);
	for (int l = 0; l < SCSI_MAX_LUNS; l++) {
		struct tgt_qos *q = atomic_load(&qn->lun[l]);
		on = on || (q && atomic_load(&q->on));
	}
	for (struct tgt_qos_ini *i = atomic_load(&qn->inis); i; i = i->next)
		on = on || atomic_load(&i->q.on);
	atomic_store(&n->qos_on, on);
	if (changed) {
		log_info("target", "target %s: QoS limits %s", ct->name, on ? "set" : "off");
		for (int w = 0; t && w < t->nworkers; w++)
			if (t->workers[w].loop &&
			    ev_loop_post(t->workers[w].loop, replan_msg, &t->workers[w]) < 0)
				log_warn("target", "worker %d: QoS change not applied to commands "
						   "already waiting (out of memory)", w);
	}
	return r;
}

/* ---------------------------------------------------------------- the worker */

static void qos_timer(struct ev_timer *tm);

static struct tgt_qos_worker *worker_q(struct tgt_worker *w)
{
	struct tgt_qos_worker *qw = &w->qos;

	if (!qw->init) {
		list_init(&qw->queue);
		ev_timer_init(&qw->timer, qos_timer, w);
		qw->loop = w->loop;
		qw->init = true;
	}
	return qw;
}

static void arm(struct tgt_qos_worker *qw, uint64_t now_ns)
{
	struct tgt_task *h;
	uint64_t ms;

	if (list_empty(&qw->queue)) {
		ev_timer_stop(qw->loop, &qw->timer);
		return;
	}
	h = list_first_entry(&qw->queue, struct tgt_task, qlink);
	ms = h->qos_start > now_ns ? (h->qos_start - now_ns + 999999u) / 1000000u : 0;
	ev_timer_start(qw->loop, &qw->timer, ms ? ms : 1);
}

/* Run every waiting task whose time has come, in start order. */
static void release(struct tgt_qos_worker *qw, uint64_t now_ns)
{
	while (!list_empty(&qw->queue)) {
		struct tgt_task *t = list_first_entry(&qw->queue, struct tgt_task, qlink);

		if (t->qos_start > now_ns)
			break;
		list_del(&t->qlink);
		t->qos_queued = false;
		t->qos_passed = true;
		tgt_stats_qos_wait(t, now_ns - t->qos_since);
		tgt_task_exec(t); /* may free tasks, but only this one can leave the queue */
	}
}

static void qos_timer(struct ev_timer *tm)
{
	struct tgt_worker *w = tm->arg;
	struct tgt_qos_worker *qw = &w->qos;
	uint64_t now = ev_now_ns(qw->loop);

	release(qw, now);
	arm(qw, now);
}

/* Sorted by start time; a task goes behind those with the same start (FIFO). */
static void enqueue(struct tgt_qos_worker *qw, struct tgt_task *t)
{
	struct list_head *pos = qw->queue.prev;

	while (pos != &qw->queue &&
	       list_entry(pos, struct tgt_task, qlink)->qos_start > t->qos_start)
		pos = pos->prev;
	list_add(&t->qlink, pos);
	t->qos_queued = true;
}

static bool cdb_io(uint8_t op, bool *write)
{
	switch (op) {
	case 0x08: case 0x28: case 0xa8: case 0x88: /* READ (6, 10, 12, 16) */
		*write = false;
		return true;
	case 0x0a: case 0x2a: case 0xaa: case 0x8a: /* WRITE (6, 10, 12, 16) */
	case 0x2e: case 0xae: case 0x8e:             /* WRITE AND VERIFY (10, 12, 16) */
	case 0x89:                                   /* COMPARE AND WRITE */
	case 0x41: case 0x93:                        /* WRITE SAME (10, 16) */
		*write = true;
		return true;
	default:
		return false;
	}
}

/* The session's initiator entry (entries are only ever added: looked up again after one). */
static struct tgt_qos *sess_ini(struct tgt_session *s, struct tgt_qos_node *qn)
{
	unsigned gen = atomic_load_explicit(&qn->ini_gen, memory_order_acquire) + 1;

	if (s->qos_ini_gen != gen) {
		struct tgt_qos_ini *i = atomic_load_explicit(&qn->inis, memory_order_acquire);

		while (i && strcasecmp(i->name, s->initiator) != 0)
			i = i->next;
		s->qos_ini = i;
		s->qos_ini_gen = gen;
	}
	return s->qos_ini ? &s->qos_ini->q : NULL;
}

/* Reserve t in its LUN's and its initiator's cells: its start time. */
static uint64_t task_take(struct tgt_task *t, uint64_t now, bool *limited)
{
	struct tgt_session *s = t->tc->sess;
	struct tgt_qos_node *qn = s->node->qos;
	uint32_t lun = scsi_nexus_map_lun(s->nexus, scsi_lun_decode(t->lun));
	struct tgt_qos *ql = lun < SCSI_MAX_LUNS
				 ? atomic_load_explicit(&qn->lun[lun], memory_order_acquire)
				 : NULL;
	struct tgt_qos *qi = sess_ini(s, qn);
	uint64_t start = now, st;
	bool write;

	*limited = false;
	if (!cdb_io(t->cdb[0], &write))
		return now;
	if (ql && atomic_load_explicit(&ql->on, memory_order_relaxed)) {
		*limited = true;
		start = tgt_qos_take(ql, write, t->edtl, now);
	}
	if (qi && atomic_load_explicit(&qi->on, memory_order_relaxed)) {
		*limited = true;
		st = tgt_qos_take(qi, write, t->edtl, now);
		if (st > start)
			start = st;
	}
	return start;
}

bool tgt_qos_hold(struct tgt_task *t)
{
	struct tgt_qos_worker *qw;
	uint64_t now, start;
	bool limited;

	if (t->qos_passed || !t->tc->sess || !t->tc->sess->node)
		return false;
	t->qos_passed = true;
	now = ev_now_ns(t->tc->worker->loop);
	start = task_take(t, now, &limited);
	if (!limited)
		return false;
	qw = worker_q(t->tc->worker);
	if (start <= now && list_empty(&qw->queue))
		return false;
	/* it waits; or its time has come but others' came before: they go first, in order,
	   and this one with them (it may be freed by then: the caller does not touch it) */
	t->qos_passed = false;
	t->qos_start = start;
	t->qos_since = now;
	t->state = TASK_QOS_WAIT;
	enqueue(qw, t);
	if (start <= now)
		release(qw, now);
	if (start <= now || qw->queue.next == &t->qlink)
		arm(qw, now);
	return true;
}

void tgt_qos_unqueue(struct tgt_task *t)
{
	list_del(&t->qlink);
	t->qos_queued = false;
}

/* The limits changed: the waiting tasks are reserved again, in their order, under the new
 * ones (a raised limit lets them go sooner, one taken away at once). */
static void replan_msg(void *arg)
{
	struct tgt_worker *w = arg;
	struct tgt_qos_worker *qw = worker_q(w);
	uint64_t now = ev_now_ns(w->loop);
	struct list_head old;

	if (list_empty(&qw->queue))
		return;
	list_init(&old);
	while (!list_empty(&qw->queue)) {
		struct tgt_task *t = list_first_entry(&qw->queue, struct tgt_task, qlink);

		list_del(&t->qlink);
		list_add_tail(&t->qlink, &old);
	}
	while (!list_empty(&old)) {
		struct tgt_task *t = list_first_entry(&old, struct tgt_task, qlink);
		bool limited;

		list_del(&t->qlink);
		t->qos_start = task_take(t, now, &limited);
		enqueue(qw, t);
	}
	release(qw, now);
	arm(qw, now);
}
