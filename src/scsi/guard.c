/* The LU range guard (see guard.h for the protocol). */
#include "scsi/guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi_int.h"

struct guard_slot {
	_Alignas(64) atomic_uint n; /* fast-path I/O in flight from the threads of this slot */
};

struct scsi_guard {
	struct guard_slot slots[SCSI_GUARD_SLOTS];
	_Alignas(64) atomic_uint excl; /* exclusive ranges held or waiting */
	pthread_mutex_t lock;
	struct list_head held;	  /* scsi_guard_ent, shared and exclusive */
	struct list_head waiting; /* scsi_guard_ent, in arrival order */
};

/* Modes in scsi_priv.gmode. */
#define GM_NONE 0
#define GM_FAST 1
#define GM_SLOW 2

struct scsi_guard *scsi_guard_new(void)
{
	struct scsi_guard *g = aligned_alloc(64, sizeof(*g));

	if (!g)
		return NULL;
	memset(g, 0, sizeof(*g));
	for (unsigned i = 0; i < SCSI_GUARD_SLOTS; i++)
		atomic_init(&g->slots[i].n, 0);
	atomic_init(&g->excl, 0);
	pthread_mutex_init(&g->lock, NULL);
	list_init(&g->held);
	list_init(&g->waiting);
	return g;
}

void scsi_guard_free(struct scsi_guard *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->lock);
	free(g);
}

unsigned scsi_guard_excl_count(const struct scsi_guard *g)
{
	return atomic_load(&((struct scsi_guard *)g)->excl);
}

unsigned scsi_guard_fast_count(const struct scsi_guard *g)
{
	unsigned sum = 0;

	for (unsigned i = 0; i < SCSI_GUARD_SLOTS; i++)
		sum += atomic_load(&((struct scsi_guard *)g)->slots[i].n);
	return sum;
}

static bool overlap(const struct scsi_guard_ent *a, const struct scsi_guard_ent *b)
{
	return a->lba < b->end && b->lba < a->end;
}

static bool conflict(const struct scsi_guard_ent *a, const struct scsi_guard_ent *b)
{
	return (a->excl || b->excl) && overlap(a, b);
}

/* Under the lock: may e (held or about to be) go now? Waiters ahead of it count, so a stream
 * of shared ranges cannot starve an exclusive one. */
static bool grantable(struct scsi_guard *g, const struct scsi_guard_ent *e)
{
	struct list_head *pos, *n;

	list_for_each_safe(pos, n, &g->held)
	{
		if (conflict(list_entry(pos, struct scsi_guard_ent, link), e))
			return false;
	}
	list_for_each_safe(pos, n, &g->waiting)
	{
		const struct scsi_guard_ent *w = list_entry(pos, struct scsi_guard_ent, link);

		if (w == e)
			break;
		if (conflict(w, e))
			return false;
	}
	return !e->excl || scsi_guard_fast_count(g) == 0;
}

static void resume_posted(void *arg)
{
	struct scsi_guard_ent *e = arg;

	e->resume(e->cmd);
}

/* Under the lock: move every waiter that may go now to the held list; returns them chained
 * through granted_next, to be resumed once the lock is dropped. */
static struct scsi_guard_ent *grant_waiters(struct scsi_guard *g)
{
	struct scsi_guard_ent *first = NULL, **tail = &first;
	struct list_head *pos, *n;

	list_for_each_safe(pos, n, &g->waiting)
	{
		struct scsi_guard_ent *w = list_entry(pos, struct scsi_guard_ent, link);

		if (!grantable(g, w))
			continue;
		list_del(&w->link);
		list_add_tail(&w->link, &g->held);
		w->held = true;
		w->granted_next = NULL;
		*tail = w;
		tail = &w->granted_next;
	}
	return first;
}

static void resume_granted(struct scsi_guard_ent *e)
{
	while (e) {
		struct scsi_guard_ent *next = e->granted_next;
		struct scsi_thread *t = e->cmd->thread;

		if (t && t->loop)
			ev_loop_post_node(t->loop, &e->post, resume_posted, e);
		else
			e->resume(e->cmd); /* no loop: everything is synchronous here */
		e = next;
	}
}

static atomic_uint *slot_of(struct scsi_guard *g, const struct scsi_cmd *cmd)
{
	return &g->slots[cmd->thread ? cmd->thread->gslot % SCSI_GUARD_SLOTS : 0].n;
}

int scsi_guard_enter(struct scsi_guard *g, struct scsi_cmd *cmd, uint64_t lba, uint64_t n,
		     bool excl, void (*resume)(struct scsi_cmd *cmd))
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_guard_ent *e, *granted;
	atomic_uint *slot = slot_of(g, cmd);
	bool now;

	if (!excl) {
		atomic_fetch_add_explicit(slot, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&g->excl, memory_order_seq_cst) == 0) {
			p->gmode = GM_FAST;
			return 1;
		}
		/* An exclusive range is active: undo, and queue below (which also wakes an
		 * exclusive range that saw this increment and waits for it). */
		atomic_fetch_sub_explicit(slot, 1, memory_order_seq_cst);
	}
	if (!p->slow && !scsi_slow_get(cmd)) {
		if (!excl) { /* the undone increment may be what an exclusive range waits for */
			pthread_mutex_lock(&g->lock);
			granted = grant_waiters(g);
			pthread_mutex_unlock(&g->lock);
			resume_granted(granted);
		}
		return -ENOMEM;
	}
	e = &p->slow->ent;
	e->cmd = cmd;
	e->lba = lba;
	e->end = lba + n < lba ? UINT64_MAX : lba + n;
	e->excl = excl;
	e->held = false;
	e->resume = resume;
	p->gmode = GM_SLOW;
	pthread_mutex_lock(&g->lock);
	if (excl)
		atomic_fetch_add_explicit(&g->excl, 1, memory_order_seq_cst);
	list_add_tail(&e->link, &g->waiting);
	now = grantable(g, e);
	if (now) {
		list_del(&e->link);
		list_add_tail(&e->link, &g->held);
		e->held = true;
	}
	granted = excl ? NULL : grant_waiters(g);
	pthread_mutex_unlock(&g->lock);
	resume_granted(granted);
	return now ? 1 : 0;
}

void scsi_guard_leave(struct scsi_guard *g, struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_guard_ent *e, *granted;

	if (p->gmode == GM_FAST) {
		p->gmode = GM_NONE;
		atomic_fetch_sub_explicit(slot_of(g, cmd), 1, memory_order_seq_cst);
		if (atomic_load_explicit(&g->excl, memory_order_seq_cst) == 0)
			return;
		/* an exclusive range may be waiting for this I/O to drain */
		pthread_mutex_lock(&g->lock);
		granted = grant_waiters(g);
		pthread_mutex_unlock(&g->lock);
		resume_granted(granted);
		return;
	}
	if (p->gmode != GM_SLOW)
		return;
	p->gmode = GM_NONE;
	e = &p->slow->ent;
	pthread_mutex_lock(&g->lock);
	list_del(&e->link);
	e->held = false;
	if (e->excl)
		atomic_fetch_sub_explicit(&g->excl, 1, memory_order_seq_cst);
	granted = grant_waiters(g);
	pthread_mutex_unlock(&g->lock);
	resume_granted(granted);
}
