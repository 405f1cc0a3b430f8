/* RBD backend, ownership: librbd's managed exclusive lock on an image (rbd.exclusive_lock).
 *
 * The lock is taken at open and never handed over on librbd's own request (unlike the default
 * cooperative lock, which moves to whichever client writes). A write refused because another
 * client owns the lock (EROFS) or because this client was blocklisted (ESHUTDOWN) becomes
 * BS_ERR_NOT_OWNER and moves the state to standby or fenced; fenced fails every I/O at once,
 * until the device rejoins with a new client (bs_rbd_conn.c fences the whole connection and
 * rejoins; it calls rbd_own_fenced, and rbd_own_attach on the new image). ha_own_break_lock()
 * breaks the holder's lock (librbd blocklists it) and takes it; ha_own_take_over_async() and
 * ha_own_release_async() move it between gateways, asking the holder first
 * (ha_handover.c; docs/ha.md, "Ownership and failover").
 *
 * Thread: every image with the lock has one thread of its own ("ix-rbd-own"), started when
 * the image opens and stopped before it closes; a rejoin stops it before the fenced image
 * goes and starts a new one on the new image (its ioctx and its watch are the connection's).
 * Every librbd lock call of the image runs there, one at a time: taking the lock at open
 * (after a rejoin only setting the lock policy), take-overs, breaks, and a lock check every
 * rbd.lock_check_ms. The check asks the cluster who holds the lock (rbd_lock_get_owners, one
 * OSD read; librbd's update watch does not fire on lock changes, measured on 16.2), so an
 * idle gateway learns within that interval that it lost the lock (another client holds it:
 * standby) or was fenced (the cluster refuses this client: ESHUTDOWN; the thread then fences
 * its whole connection, bs_rbd_conn_fenced_owner), and a standby learns when the holder
 * changes. Workers never wait on the thread; what it learns is read with atomic loads, and
 * every change bumps one counter (the HA context's own_changes, ha_int.h) that ha_alua.c
 * compares with what its ALUA states were set from. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ha/ha_int.h"
#include "ha/ha_own_int.h"
#include "ha/ha_policy.h"
#include "util/log.h"

static const char *const own_names[] = {
    [RBD_OWN_NONE] = "open",	 [RBD_OWN_ACQUIRING] = "acquiring",
    [RBD_OWN_OWNER] = "owner",	 [RBD_OWN_STANDBY] = "standby",
    [RBD_OWN_FENCED] = "fenced", [RBD_OWN_RELEASING] = "releasing",
};

/* Under o->mu: this image changed; its thread tells the watcher. */
void rbd_own_changed(struct rbd_owner *o)
{
	atomic_fetch_add_explicit(&o->ctx->own_changes, 1, memory_order_release);
	o->seq++;
	pthread_cond_broadcast(&o->cv);
}

uint64_t rbd_own_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A new state and its reason; the change is logged once. Fenced stays (a blocklisted client
 * never writes again: only a new client does, after a rejoin, rbd_own_attach). Any thread. */
void rbd_own_set(struct rbd_owner *o, int own, const char *fmt, ...)
{
	va_list ap;
	int was;

	pthread_mutex_lock(&o->mu);
	was = atomic_load(&o->own);
	if (was == RBD_OWN_FENCED && own != RBD_OWN_FENCED) {
		pthread_mutex_unlock(&o->mu);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(o->why, sizeof(o->why), fmt, ap);
	va_end(ap);
	atomic_store(&o->own, own);
	if (was != own) {
		log_warn("rbd", "%s: %s: %s", o->name, own_names[own], o->why);
		rbd_own_changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

void rbd_own_fenced(struct rbd_owner *o, const char *why)
{
	rbd_own_set(o, RBD_OWN_FENCED, "%s", why);
}

/* This image's client answered ESHUTDOWN (librados' EBLOCKLISTED) to what: its connection is
 * fenced, every device on it (bs_rbd_conn.c, which sets this state through rbd_own_fenced and
 * queues the rejoin). Fenced here as well if the connection was already (a fencing that came
 * while this thread started). Any thread but under no lock of this file. */
void rbd_own_blocklisted(struct rbd_owner *o, const char *what)
{
	bs_rbd_conn_fenced_owner(o->ctx->host.rbd, o, what);
	if (atomic_load(&o->own) != RBD_OWN_FENCED)
		rbd_own_set(o, RBD_OWN_FENCED,
			    "this gateway's Ceph client was blocklisted (%s refused): I/O refused "
			    "until it rejoins",
			    what);
}

#ifdef IX_CHAOS_BREAK_LOST_LOCK
/* The broken build's break: the lock's cls entry on the image header removed for the locker
 * whose address is who, nobody blocklisted (what librbd's rbd_lock_break never does). */
int chaos_break_unfenced(struct rbd_owner *o, const char *who)
{
	char id[64], oid[96], tag[64], clients[256], cookies[256], addrs[256];
	size_t tl = sizeof(tag), cl = sizeof(clients), kl = sizeof(cookies), al = sizeof(addrs);
	const char *c = clients, *k = cookies, *a = addrs;
	int excl, n, rc = rbd_get_id(o->image, id, sizeof(id));

	if (rc < 0)
		return rc;
	snprintf(oid, sizeof(oid), "rbd_header.%s", id);
	n = (int)rados_list_lockers(o->io, oid, "rbd_lock", &excl, tag, &tl, clients, &cl,
				    cookies, &kl, addrs, &al);
	if (n < 0) {
		log_warn("rbd", "%s: CHAOS BREAK lost-lock: listing the lockers: %s", o->name,
			 strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		if (n == 1 || strstr(a, who) || strstr(who, a)) {
			log_warn("rbd", "%s: CHAOS BREAK lost-lock: removing %s's lock without "
					"blocklisting it",
				 o->name, who);
			return rados_break_lock(o->io, oid, "rbd_lock", c, k);
		}
		c += strlen(c) + 1;
		k += strlen(k) + 1;
		a += strlen(a) + 1;
	}
	log_warn("rbd", "%s: CHAOS BREAK lost-lock: %s not among %d locker(s)", o->name, who, n);
	return -ENOENT;
}
#endif

int rbd_own_io_result(struct rbd_owner *o, int r)
{
	if (!o || (r != -EROFS && r != -ESHUTDOWN))
		return r;
	if (r == -ESHUTDOWN && atomic_load(&o->own) != RBD_OWN_FENCED)
		rbd_own_blocklisted(o, "a request"); /* bs_rbd.c fenced the connection already */
#ifndef IX_CHAOS_BREAK_LOST_LOCK /* the broken build never steps down */
	else if (r == -EROFS && atomic_load(&o->own) == RBD_OWN_OWNER)
		rbd_own_set(o, RBD_OWN_STANDBY, "another client holds the image's exclusive lock");
#endif
	return BS_ERR_NOT_OWNER;
}

bool rbd_own_io(struct rbd_owner *o)
{
	unsigned t;

	if (!o)
		return false;
	t = atomic_load_explicit(&o->io_tick, memory_order_relaxed);
	if (atomic_load_explicit(&o->io_seen, memory_order_relaxed) != t) /* once a period */
		atomic_store_explicit(&o->io_seen, t, memory_order_relaxed);
	return atomic_load_explicit(&o->own, memory_order_relaxed) == RBD_OWN_FENCED ||
	       atomic_load_explicit(&o->unmanaged, memory_order_acquire);
}

/* ---- the lock, on the owner's thread ---- */

/* Who holds the lock, comma-separated, into buf ("" nobody); with owners/n (n: room in, count
 * out) the names for rbd_lock_break, freed by the caller. 0 or -errno (-ESHUTDOWN: this
 * client is blocklisted). */
static int lock_owners(struct rbd_owner *o, char *buf, size_t len, char **owners, size_t *n)
{
	rbd_lock_mode_t mode;
	size_t max = *n, at = 0;
	int rc = rbd_lock_get_owners(o->image, &mode, owners, n);

	buf[0] = 0;
	if (rc == -ENOENT) { /* nobody holds it */
		*n = 0;
		return 0;
	}
	if (rc < 0) {
		*n = 0;
		return rc;
	}
	for (size_t i = 0; i < *n && i < max; i++)
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", i ? ", " : "",
				       owners[i]);
	return 0;
}

/* lock_owners without the names. */
int rbd_own_holder(struct rbd_owner *o, char *buf, size_t len)
{
	char *owners[4];
	size_t n = 4;
	int rc = lock_owners(o, buf, len, owners, &n);

	if (n)
		rbd_lock_get_owners_cleanup(owners, n);
	return rc;
}

/* Remember who holds the lock; a change is one a standby reports (and ends a refusal). */
void rbd_own_holder_set(struct rbd_owner *o, const char *who)
{
	pthread_mutex_lock(&o->mu);
	if (strcmp(o->holder, who) != 0) {
		snprintf(o->holder, sizeof(o->holder), "%s", who);
		o->refused = false;
		rbd_own_changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

void rbd_own_refused_set(struct rbd_owner *o, bool refused)
{
	pthread_mutex_lock(&o->mu);
	if (o->refused != refused) {
		o->refused = refused;
		rbd_own_changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

/* The thread: how long since I/O went through this gateway (to within the period), and a new
 * period from now. */
static uint64_t io_idle(struct rbd_owner *o)
{
	uint64_t now = rbd_own_now_ms();
	unsigned t = atomic_load(&o->io_tick);

	if (atomic_load(&o->io_seen) == t)
		atomic_store(&o->last_io_ms, now);
	atomic_store(&o->io_tick, t + 1);
	return now - atomic_load(&o->last_io_ms);
}

/* ---- the images of one target (bs_open_cfg.owner_group) ----
 *
 * The target is the unit of ownership (its ALUA groups are the target's): an implicit request
 * is answered for all its images alike, from the I/O of every image of it this gateway holds,
 * and one answer is kept for OWN_DECIDE_MS so that the asker's requests for each image (sent
 * at once) get the same one. */
#define OWN_DECIDE_MS 1000

struct own_group {
	struct list_head link;	  /* on the context's own_groups */
	struct list_head members; /* rbd_owner.glink */
	unsigned refs;
	uint64_t decided_at; /* the last implicit decision: when, for which window, its idle */
	uint32_t window;
	uint64_t idle;
	char key[];
};

static void group_join(struct rbd_owner *o, const char *key)
{
	struct list_head *pos;
	struct own_group *g = NULL;

	if (!key || !key[0])
		return;
	pthread_mutex_lock(&o->ctx->groups_lock);
	list_for_each(pos, &o->ctx->own_groups)
	{
		struct own_group *x = list_entry(pos, struct own_group, link);

		if (strcmp(x->key, key) == 0)
			g = x;
	}
	if (!g && (g = calloc(1, sizeof(*g) + strlen(key) + 1))) {
		strcpy(g->key, key);
		list_init(&g->members);
		list_add_tail(&g->link, &o->ctx->own_groups);
	}
	if (g) { /* without memory: the image answers for itself alone */
		g->refs++;
		list_add_tail(&o->glink, &g->members);
		o->grp = g;
	}
	pthread_mutex_unlock(&o->ctx->groups_lock);
}

static void group_leave(struct rbd_owner *o)
{
	struct own_group *g = o->grp;

	if (!g)
		return;
	pthread_mutex_lock(&o->ctx->groups_lock);
	list_del(&o->glink);
	if (--g->refs == 0) {
		list_del(&g->link);
		free(g);
	}
	pthread_mutex_unlock(&o->ctx->groups_lock);
}

/* Another image's idle time, from any thread: 0 while it saw I/O in its current period. */
static uint64_t member_idle(struct rbd_owner *m, uint64_t now)
{
	uint64_t last = atomic_load(&m->last_io_ms);

	if (atomic_load(&m->io_seen) == atomic_load(&m->io_tick))
		return 0;
	return now > last ? now - last : 0;
}

/* The holder's thread, answering an implicit request: how long since I/O went through this
 * gateway to any image of the target it holds. */
uint64_t rbd_own_group_idle(struct rbd_owner *o, uint32_t window)
{
	uint64_t idle = io_idle(o), now = rbd_own_now_ms();
	struct own_group *g = o->grp;
	struct list_head *pos;

	if (!g)
		return idle;
	pthread_mutex_lock(&o->ctx->groups_lock);
	if (g->decided_at && now - g->decided_at < OWN_DECIDE_MS && g->window == window) {
		idle = g->idle;
	} else {
		list_for_each(pos, &g->members)
		{
			struct rbd_owner *m = list_entry(pos, struct rbd_owner, glink);
			uint64_t i;

			if (m == o || atomic_load(&m->own) != RBD_OWN_OWNER)
				continue;
			i = member_idle(m, now);
			if (i < idle)
				idle = i;
		}
		g->decided_at = now;
		g->window = window;
		g->idle = idle;
	}
	pthread_mutex_unlock(&o->ctx->groups_lock);
	return idle;
}

/* rbd_lock_acquire succeeded: learn this client's name in the lock, say so in the record,
 * then owner. Taking the lock counts as I/O: a new holder refuses implicit requests for half
 * the asker's window, so two gateways an initiator sends I/O to do not pass it back and
 * forth. */
void rbd_own_took(struct rbd_owner *o, const char *fmt, const char *who)
{
	char me[128];

	atomic_store(&o->last_io_ms, rbd_own_now_ms());
	if (rbd_own_holder(o, me, sizeof(me)) == 0 && me[0]) {
		pthread_mutex_lock(&o->mu);
		snprintf(o->me, sizeof(o->me), "%s", me);
		pthread_mutex_unlock(&o->mu);
		rbd_own_holder_set(o, me);
		rbd_own_rec_write(o);
	}
	rbd_own_set(o, RBD_OWN_OWNER, fmt, who);
}

/* Under o->mu: wait for a change until the CLOCK_MONOTONIC time until (ms). */
static void timedwait(struct rbd_owner *o, uint64_t until)
{
	struct timespec ts = {.tv_sec = (time_t)(until / 1000u),
			      .tv_nsec = (long)(until % 1000u) * 1000000L};

	pthread_cond_timedwait(&o->cv, &o->mu, &ts);
}

/* At open, the lock held by this gateway's own previous instance (a restart: its record names
 * the holder, another client than this one, with this gateway's local groups)? That client is
 * gone or on its way out; it is broken at once rather than asked. The identity comes when the
 * LU is mapped into its target, which may be a moment after the image opened: waited for at
 * most one lock check interval; without it the start asks, as for any holder. */
static bool previous_instance(struct rbd_owner *o, const char *who)
{
	uint64_t until = rbd_own_now_ms() + o->check_ms;
	bool same;

	rbd_own_holder_set(o, who);
	rbd_own_rec_follow(o);
	pthread_mutex_lock(&o->mu);
	while (!o->identified && !o->stop && rbd_own_now_ms() < until)
		timedwait(o, until);
	same = o->ngroups > 0 && strcmp(o->rec.holder, who) == 0 && o->rec.gid != o->gid &&
	       o->rec.ngroups == o->ngroups &&
	       memcmp(o->rec.groups, o->groups, o->ngroups * sizeof(o->groups[0])) == 0;
	pthread_mutex_unlock(&o->mu);
	return same;
}

/* At open, the lock held: a holder that is this gateway's previous instance is broken (librbd
 * blocklists it: it can never write again) and the lock taken; any other holder is asked as a
 * heal asks (a live holder always refuses, one that does not answer within handover_timeout_ms
 * is broken and the lock taken). Without this, rbd_lock_acquire waits for the dead client's
 * watch on the image header to time out (osd_client_watch_timeout, 30 s) before it breaks the
 * lock itself, and the gateway stays acquiring (its groups transitioning) all that time. 0:
 * this gateway holds the lock; else the caller goes on as with a live holder. */
static int acquire_held(struct rbd_owner *o, const char *who)
{
	int rc;

	if (previous_instance(o, who)) {
		rbd_own_set(o, RBD_OWN_ACQUIRING,
			    "the lock is held by this gateway's previous instance %s: breaking it",
			    who);
		rc = rbd_lock_break(o->image, RBD_LOCK_MODE_EXCLUSIVE, who);
		if (rc == 0)
			rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
		if (rc == 0) {
			rbd_own_took(o, "holds the image's exclusive lock (broke its previous "
					"instance %s's)",
				     who);
			log_warn("rbd", "%s: took the lock from this gateway's previous instance %s "
					"(blocklisted)",
				 o->name, who);
			return 0;
		}
		if (rc == -ESHUTDOWN)
			return rc;
		log_warn("rbd", "%s: breaking the previous instance's lock: %s; asking the holder",
			 o->name, strerror(-rc));
	}
	log_warn("rbd", "%s: the lock is held by %s: asking it (a holder that does not answer "
			"within %u ms is broken)",
		 o->name, who, o->notify_ms);
	return rbd_own_run_take(o, HA_TAKE_HEAL, 0);
}

/* At open: take the lock, or learn who holds it. */
static void acquire(struct rbd_owner *o)
{
	char who[128];
	int rc = rbd_own_holder(o, who, sizeof(who));

	if (rc == 0 && who[0]) {
		rc = acquire_held(o, who);
		if (rc == 0 || atomic_load(&o->own) == RBD_OWN_FENCED)
			return;
		if (rc == -ESHUTDOWN) {
			rbd_own_blocklisted(o, "taking the lock");
			return;
		}
	}
	rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (rc == 0) {
		rbd_own_took(o, "holds the image's exclusive lock%s", "");
		return;
	}
	if (rc == -ESHUTDOWN) {
		rbd_own_blocklisted(o, "taking the lock");
		return;
	}
	if (rbd_own_holder(o, who, sizeof(who)) == 0 && who[0]) {
		rbd_own_holder_set(o, who);
		rbd_own_rec_follow(o);
		rbd_own_set(o, RBD_OWN_STANDBY, "the image's exclusive lock is held by %s (%s)",
			    who, strerror(-rc));
	} else {
		rbd_own_set(o, RBD_OWN_STANDBY, "cannot take the image's exclusive lock: %s",
			    strerror(-rc));
	}
}

/* After a rejoin: the new handle goes under the managed lock policy (rbd_lock_acquire sets it
 * before it tries; a handle without it would take a free lock on its first write, behind the
 * standby state), a lock it got so (nobody held it) is released at once, and the state is
 * standby: the lock is taken again only by a take-over (SET TARGET PORT GROUPS, implicit
 * failover, iscsi_break_rbd_lock). */
static void rejoin_policy(struct rbd_owner *o)
{
	char who[128] = "";
	int rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE), rel = 0, next;

	if (rc == 0)
		rel = rbd_lock_release(o->image);
	atomic_store_explicit(&o->unmanaged, false, memory_order_release); /* set, either way */
	next = ha_policy_rejoin(rc, rel);
	if (next == HA_OWN_FENCED) {
		rbd_own_blocklisted(o, "setting the lock policy");
		return;
	}
	if (next == HA_OWN_OWNER) { /* it holds the free lock: say so rather than claim standby */
		log_warn("rbd", "%s: releasing the lock taken to set its policy: %s", o->name,
			 strerror(-rel));
		rbd_own_took(o, "holds the image's exclusive lock (rejoined; it was free%s)",
			     " and releasing it failed");
		return;
	}
	rc = rbd_own_holder(o, who, sizeof(who));
	if (rc == -ESHUTDOWN) {
		rbd_own_blocklisted(o, "the lock check");
		return;
	}
	if (rc == 0) {
		rbd_own_holder_set(o, who);
		rbd_own_rec_follow(o);
	}
	if (who[0])
		rbd_own_set(o, RBD_OWN_STANDBY,
			    "rejoined as client.%llu; the image's exclusive lock is held by %s",
			    (unsigned long long)o->gid, who);
	else
		rbd_own_set(o, RBD_OWN_STANDBY, "rejoined as client.%llu; %s",
			    (unsigned long long)o->gid,
			    rc == 0 ? "nobody holds the image's exclusive lock"
				    : "who holds the image's exclusive lock is not known yet");
}

/* Break the lock of whoever holds it (librbd blocklists that client) and take it. who gets
 * the former holders ("" if none). */
static int break_and_take(struct rbd_owner *o, char *who, size_t wlen)
{
	char *owners[4];
	size_t n = 4;
	int rc = lock_owners(o, who, wlen, owners, &n);

	if (rc == 0 && n > 0) {
		for (size_t i = 0; rc == 0 && i < n; i++)
			rc = rbd_lock_break(o->image, RBD_LOCK_MODE_EXCLUSIVE, owners[i]);
		rbd_lock_get_owners_cleanup(owners, n);
	}
	if (rc == 0)
		rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (rc == 0)
		rbd_own_took(o, "holds the image's exclusive lock (broke %s's)",
			     who[0] ? who : "nobody");
	return rc;
}

/* A take-over that did not happen: standby (or fenced) with the reason. */
void rbd_own_take_failed(struct rbd_owner *o, const char *who, int rc)
{
	if (rc == -ESHUTDOWN) /* librados' EBLOCKLISTED */
		rbd_own_blocklisted(o, "taking the lock over");
	else
		rbd_own_set(o, RBD_OWN_STANDBY,
			    "taking over the image's lock (held by %s) failed: %s",
			    who[0] ? who : "nobody", strerror(-rc));
}

static int run_break(struct rbd_owner *o, char *msg, size_t msglen)
{
	char who[128] = "";
	int rc;

	if (atomic_load(&o->own) == RBD_OWN_FENCED) {
		pthread_mutex_lock(&o->mu);
		snprintf(msg, msglen, "%s: %s", o->name, o->why);
		pthread_mutex_unlock(&o->mu);
		return -EBUSY;
	}
	rc = break_and_take(o, who, sizeof(who));
	if (rc < 0) {
		if (rc == -ESHUTDOWN)
			rbd_own_blocklisted(o, "breaking the lock");
		snprintf(msg, msglen, "%s: breaking the lock of %s: %s", o->name,
			 who[0] ? who : "-", strerror(-rc));
		return rc;
	}
	snprintf(msg, msglen, "%s", who);
	return 0;
}

/* Every check_ms: who holds the lock now? The owner that is no longer named lost it
 * (standby; fenced when the cluster refuses this client); a standby follows the holder. */
static void check(struct rbd_owner *o)
{
	int own = atomic_load(&o->own);
	char who[128], me[128];
	int rc;

	if (own != RBD_OWN_OWNER && own != RBD_OWN_STANDBY)
		return; /* fenced stays; acquiring is a job's */
	rc = rbd_own_holder(o, who, sizeof(who));
	if (rc == -ESHUTDOWN) {
		rbd_own_blocklisted(o, "the lock check");
		return;
	}
	if (rc < 0) {
		log_dbg("rbd", "%s: lock check: %s", o->name, strerror(-rc));
		return;
	}
	rbd_own_holder_set(o, who);
	pthread_mutex_lock(&o->mu);
	snprintf(me, sizeof(me), "%s", o->me);
	pthread_mutex_unlock(&o->mu);
	(void)io_idle(o);
	if (own == RBD_OWN_STANDBY)
		rbd_own_rec_follow(o);
#ifdef IX_CHAOS_BREAK_LOST_LOCK /* the broken build never steps down */
	if (own == RBD_OWN_OWNER && (!me[0] || strcmp(who, me) != 0))
		log_warn("rbd", "%s: CHAOS BREAK lost-lock: lost the lock (held by %s), staying owner",
			 o->name, who[0] ? who : "nobody");
	else
#endif
	if (own == RBD_OWN_OWNER && (!me[0] || strcmp(who, me) != 0))
		rbd_own_set(o, RBD_OWN_STANDBY,
			    "lost the image's exclusive lock (noticed by the lock "
			    "check): %s%s",
			    who[0] ? "held by " : "nobody holds it", who);
	else if (own == RBD_OWN_OWNER)
		rbd_own_rec_verify(o);
}

/* ---- the owner's thread ---- */

/* A job is over: its caller told (closing: -ECANCELED; a request answered as if asked
 * explicitly, releasing the lock first, so that the asker need not break it). */
static void job_end(struct rbd_owner *o, struct own_job *j, int rc)
{
	switch (j->kind) {
	case JOB_TAKE:
	case JOB_RELEASE:
		atomic_store(&o->job, false);
		if (j->done)
			j->done(j->arg, rc);
		free(j);
		return;
	case JOB_ASKED:
		rbd_own_run_asked(o, j, true);
		free(j);
		return;
	case JOB_BREAK:
		pthread_mutex_lock(&o->mu);
		j->rc = rc;
		j->finished = true;
		pthread_cond_broadcast(&o->cv);
		pthread_mutex_unlock(&o->mu);
	}
}

static void run_job(struct rbd_owner *o, struct own_job *j)
{
	switch (j->kind) {
	case JOB_TAKE:
		job_end(o, j, rbd_own_run_take(o, j->mode, j->window_ms));
		return;
	case JOB_RELEASE:
		job_end(o, j, rbd_own_run_release(o, j->group));
		return;
	case JOB_ASKED:
		rbd_own_run_asked(o, j, false);
		free(j);
		return;
	case JOB_BREAK:
		job_end(o, j, run_break(o, j->msg, sizeof(j->msg)));
	}
}

/* Under o->mu, which it drops: tell the watcher of the changes since the last call. */
static void tell(struct rbd_owner *o, unsigned *told)
{
	*told = o->seq;
	pthread_mutex_unlock(&o->mu);
	pthread_mutex_lock(&o->hook_mu);
	if (o->hook)
		o->hook(o->hook_arg);
	pthread_mutex_unlock(&o->hook_mu);
	pthread_mutex_lock(&o->mu);
}

static void *own_main(void *arg)
{
	struct rbd_owner *o = arg;
	unsigned told;
	uint64_t next;

	pthread_mutex_lock(&o->mu);
	told = o->seq - 1; /* attached: a change */
	pthread_mutex_unlock(&o->mu);
	atomic_store(&o->last_io_ms, rbd_own_now_ms());
	rbd_own_watch_start(o);
	if (o->rejoin)
		rejoin_policy(o);
	else
		acquire(o);
	next = rbd_own_now_ms() + o->check_ms;
	pthread_mutex_lock(&o->mu);
	while (!o->stop) {
		if (o->seq != told) {
			tell(o, &told);
		} else if (o->rec_dirty && atomic_load(&o->own) == RBD_OWN_OWNER) {
			pthread_mutex_unlock(&o->mu);
			rbd_own_rec_write(o);
			pthread_mutex_lock(&o->mu);
		} else if (!list_empty(&o->jobs)) {
			struct own_job *j = list_entry(o->jobs.next, struct own_job, link);

			list_del(&j->link);
			pthread_mutex_unlock(&o->mu);
			run_job(o, j);
			if (o->check_soon) { /* the new holder's record, in a moment */
				o->check_soon = false;
				if (next > rbd_own_now_ms() + OWN_SOON_MS)
					next = rbd_own_now_ms() + OWN_SOON_MS;
			}
			pthread_mutex_lock(&o->mu);
		} else if (rbd_own_now_ms() >= next) {
			pthread_mutex_unlock(&o->mu);
			if (atomic_load(&o->rewatch) && atomic_load(&o->own) != RBD_OWN_FENCED)
				rbd_own_watch_start(o);
			check(o);
			next = rbd_own_now_ms() + o->check_ms;
			pthread_mutex_lock(&o->mu);
		} else {
			timedwait(o, next);
		}
	}
	while (!list_empty(&o->jobs)) { /* stopping: nobody is left waiting */
		struct own_job *j = list_entry(o->jobs.next, struct own_job, link);

		list_del(&j->link);
		snprintf(j->msg, sizeof(j->msg), "%s: the image is closing", o->name);
		pthread_mutex_unlock(&o->mu);
		job_end(o, j, -ECANCELED);
		pthread_mutex_lock(&o->mu);
	}
	pthread_mutex_unlock(&o->mu);
	rbd_own_watch_stop(o);
	pthread_mutex_lock(&o->mu);
	o->running = false;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	rbd_own_put(o);
	return NULL;
}

/* A request from another gateway: before the rest (it waits for the answer). The job is
 * answered either way. */
void rbd_own_queue_front(struct rbd_owner *o, struct own_job *j)
{
#ifdef IX_CHAOS_BREAK_LOST_LOCK /* the broken build never hands over: it does not answer */
	if (j->kind == JOB_ASKED) {
		log_warn("rbd", "%s: CHAOS BREAK lost-lock: not answering a hand-over request",
			 o->name);
		free(j);
		return;
	}
#endif
	pthread_mutex_lock(&o->mu);
	if (!o->attached || o->stop) {
		pthread_mutex_unlock(&o->mu);
		rbd_own_ack(o, j->notify_id, j->cookie, "standby");
		free(j);
		return;
	}
	list_add(&j->link, &o->jobs);
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

int rbd_own_queue_job(struct rbd_owner *o, struct own_job *j)
{
	pthread_mutex_lock(&o->mu);
	if (!o->attached || o->stop) {
		pthread_mutex_unlock(&o->mu);
		return -EINVAL;
	}
	list_add_tail(&j->link, &o->jobs);
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	return 0;
}

/* ---- the device's side (bs_rbd.c) ---- */

int rbd_own_new(struct bs_host *host, struct rbd_owner **out, const char *name,
		const struct bs_rbd_cfg *c, const char *group)
{
	struct rbd_owner *o = calloc(1, sizeof(*o));
	pthread_condattr_t ca;

	if (!o)
		return -ENOMEM;
	o->ctx = ha_ctx_of_host(host);
	ha_ctx_get(o->ctx);
	atomic_init(&o->refs, 1);
	atomic_init(&o->own, RBD_OWN_ACQUIRING);
	atomic_init(&o->job, false);
	atomic_init(&o->unmanaged, false);
	o->check_ms = c->lock_check_ms ? c->lock_check_ms : OWN_CHECK_MS_DEFAULT;
	o->notify_ms = c->handover_timeout_ms ? c->handover_timeout_ms : OWN_NOTIFY_MS_DEFAULT;
	snprintf(o->name, sizeof(o->name), "%s", name);
	snprintf(o->oid, sizeof(o->oid), "ix.own.%s", c->image);
	snprintf(o->why, sizeof(o->why), "taking the image's exclusive lock");
	list_init(&o->jobs);
	pthread_mutex_init(&o->mu, NULL);
	pthread_mutex_init(&o->hook_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cv, &ca);
	pthread_condattr_destroy(&ca);
	group_join(o, group);
	*out = o;
	return 0;
}

int rbd_own_attach(struct rbd_owner *o, rbd_image_t image, rados_ioctx_t io, bool rejoin)
{
	sigset_t all, old;
	pthread_attr_t a;
	int rc;

	pthread_mutex_lock(&o->mu);
	if (o->running) { /* the last thread has not left its connection (rbd_own_detach) */
		pthread_mutex_unlock(&o->mu);
		return -EBUSY;
	}
	o->rejoin = rejoin;
	o->image = image;
	o->io = io;
	o->gid = rados_get_instance_id(rados_ioctx_get_cluster(io));
	memset(&o->rec, 0, sizeof(o->rec));
	o->refused = false;
	o->stop = false;
	o->running = true;
	o->attached = true;
	o->holder[0] = o->me[0] = 0;
	o->check_soon = false;
	if (rejoin)
		snprintf(o->why, sizeof(o->why),
			 "rejoined as client.%llu: setting the lock policy, then standby",
			 (unsigned long long)o->gid);
	else
		snprintf(o->why, sizeof(o->why), "taking the image's exclusive lock");
	atomic_store(&o->unmanaged, rejoin);
	if (atomic_exchange(&o->own, RBD_OWN_ACQUIRING) != RBD_OWN_ACQUIRING) {
		log_warn("rbd", "%s: %s: %s", o->name, own_names[RBD_OWN_ACQUIRING], o->why);
		rbd_own_changed(o); /* out of fenced, after a rejoin */
	}
	pthread_mutex_unlock(&o->mu);
	atomic_fetch_add(&o->refs, 1); /* the thread's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&o->thread, &a, own_main, o);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		atomic_fetch_sub(&o->refs, 1);
		pthread_mutex_lock(&o->mu);
		o->running = o->attached = false;
		pthread_mutex_unlock(&o->mu);
		atomic_store(&o->unmanaged, false);
		return rc;
	}
	pthread_setname_np(o->thread, "ix-rbd-own");
	return 0;
}

bool rbd_own_detach(struct rbd_owner *o, unsigned wait_ms)
{
	uint64_t end = rbd_own_now_ms() + wait_ms;
	bool ended;

	pthread_mutex_lock(&o->mu);
	if (o->attached) {
		o->stop = true;
		o->attached = false;
		pthread_cond_broadcast(&o->cv);
	}
	while (o->running && rbd_own_now_ms() < end) /* again after a false: a rejoin retries */
		timedwait(o, end);
	ended = !o->running;
	atomic_fetch_add_explicit(&o->ctx->own_changes, 1, memory_order_release); /* closed */
	pthread_mutex_unlock(&o->mu);
	return ended;
}

void rbd_own_put(struct rbd_owner *o)
{
	if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	group_leave(o);
	ha_ctx_put(o->ctx);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	pthread_mutex_destroy(&o->hook_mu);
	free(o);
}

/* ---- the API (ha_own.h) ---- */

/* The ownership state of dev once its image is open (the device's o: from open to close),
 * else NULL. */
static struct rbd_owner *owner_of(const struct bs_dev *dev)
{
	struct bs_rbd_handle h;

	return bs_rbd_handle(dev, &h) == 0 && h.online ? h.own : NULL;
}

int ha_own_break_lock(struct bs_dev *dev, char *msg, size_t msglen)
{
	struct bs_rbd_handle h;
	bool rbd = bs_rbd_handle(dev, &h) == 0;
	struct rbd_owner *o = owner_of(dev);
	struct own_job j = {.kind = JOB_BREAK};
	int rc;

	if (!o) {
		snprintf(msg, msglen,
			 rbd && !h.online ? "%s: the image is not open (the LUN is offline)"
					  : "not an rbd LUN with exclusive_lock",
			 rbd ? h.name : "");
		return -EINVAL;
	}
	if (atomic_load(&o->own) == RBD_OWN_ACQUIRING || atomic_load(&o->job)) {
		snprintf(msg, msglen, "%s: the lock is being acquired", o->name);
		return -EBUSY;
	}
	rc = rbd_own_queue_job(o, &j);
	if (rc < 0) {
		snprintf(msg, msglen, "%s: the image is closing", o->name);
		return rc;
	}
	pthread_mutex_lock(&o->mu); /* bounded by the cluster's timeouts, as the break itself */
	while (!j.finished)
		pthread_cond_wait(&o->cv, &o->mu);
	pthread_mutex_unlock(&o->mu);
	snprintf(msg, msglen, "%s", j.msg);
	return j.rc;
}

int ha_own_watch(struct bs_dev *dev, void (*fn)(void *arg), void *arg)
{
	struct bs_rbd_handle h;
	struct rbd_owner *o = bs_rbd_handle(dev, &h) == 0 ? h.own : NULL;

	if (!o)
		return -EINVAL;
	pthread_mutex_lock(&o->hook_mu);
	o->hook = fn;
	o->hook_arg = arg;
	pthread_mutex_unlock(&o->hook_mu);
	return 0;
}

int ha_own_set_identity(struct bs_dev *dev, const uint16_t *groups, unsigned ngroups,
			const uint16_t *ports, unsigned nports)
{
	struct bs_rbd_handle h;
	struct rbd_owner *o = bs_rbd_handle(dev, &h) == 0 ? h.own : NULL;

	if (!o)
		return -EINVAL;
	if (ngroups > HA_OWN_MAX_IDS)
		ngroups = HA_OWN_MAX_IDS;
	if (nports > HA_OWN_MAX_IDS)
		nports = HA_OWN_MAX_IDS;
	pthread_mutex_lock(&o->mu);
	if (!o->identified) {
		o->identified = true;
		pthread_cond_broadcast(&o->cv);
	}
	if (o->ngroups != ngroups || o->nports != nports ||
	    memcmp(o->groups, groups, ngroups * sizeof(*groups)) ||
	    memcmp(o->ports, ports, nports * sizeof(*ports))) {
		o->ngroups = (uint8_t)ngroups;
		o->nports = (uint8_t)nports;
		memcpy(o->groups, groups, ngroups * sizeof(*groups));
		memcpy(o->ports, ports, nports * sizeof(*ports));
		o->rec_dirty = true;
		pthread_cond_broadcast(&o->cv);
	}
	pthread_mutex_unlock(&o->mu);
	return 0;
}

int ha_own_owner(const struct bs_dev *dev, struct ha_owner *out)
{
	struct rbd_owner *o = owner_of(dev);

	memset(out, 0, sizeof(*out));
	if (!o)
		return -EINVAL;
	pthread_mutex_lock(&o->mu);
	out->own = atomic_load(&o->own);
	out->free = !o->holder[0];
	out->known = o->holder[0] && strcmp(o->rec.holder, o->holder) == 0;
	out->refused = o->refused;
	if (out->known) {
		out->gen = o->rec.gen;
		out->ngroups = o->rec.ngroups;
		out->nports = o->rec.nports;
		memcpy(out->groups, o->rec.groups, sizeof(out->groups));
		memcpy(out->ports, o->rec.ports, sizeof(out->ports));
	}
	snprintf(out->holder, sizeof(out->holder), "%s", o->holder);
	pthread_mutex_unlock(&o->mu);
	return 0;
}

int ha_own_get(const struct bs_dev *dev)
{
	struct rbd_owner *o = owner_of(dev);

	return o ? atomic_load_explicit(&o->own, memory_order_acquire) : -EINVAL;
}

/* One take-over or release at a time (o->job): a copy of *tmpl goes to the ownership thread.
 * 0, -EBUSY while another runs, -ENOMEM or rbd_own_queue_job's error. */
static int submit_job(struct rbd_owner *o, const struct own_job *tmpl)
{
	struct own_job *j;
	bool idle = false;
	int rc;

	if (!atomic_compare_exchange_strong(&o->job, &idle, true))
		return -EBUSY;
	j = calloc(1, sizeof(*j));
	if (!j) {
		atomic_store(&o->job, false);
		return -ENOMEM;
	}
	*j = *tmpl;
	rc = rbd_own_queue_job(o, j);
	if (rc < 0) {
		atomic_store(&o->job, false);
		free(j);
	}
	return rc;
}

int ha_own_take_over_async(struct bs_dev *dev, int mode, uint32_t window_ms, ha_take_cb done,
			   void *arg)
{
	struct rbd_owner *o = owner_of(dev);

	if (!o)
		return -EINVAL;
	if (atomic_load(&o->own) == RBD_OWN_FENCED)
		return -ESHUTDOWN;
	if (atomic_load(&o->own) == RBD_OWN_OWNER)
		return -EALREADY;
	return submit_job(
	    o,
	    &(struct own_job){
		.kind = JOB_TAKE, .done = done, .arg = arg, .mode = mode, .window_ms = window_ms});
}

int ha_own_release_async(struct bs_dev *dev, uint16_t group, ha_take_cb done, void *arg)
{
	struct rbd_owner *o = owner_of(dev);

	if (!o)
		return -EINVAL;
	if (atomic_load(&o->own) != RBD_OWN_OWNER)
		return atomic_load(&o->own) == RBD_OWN_FENCED ? -ESHUTDOWN : -EALREADY;
	return submit_job(
	    o, &(struct own_job){.kind = JOB_RELEASE, .done = done, .arg = arg, .group = group});
}

int ha_own_state(struct bs_dev *dev, char *reason, size_t len)
{
	struct bs_rbd_handle h;
	struct rbd_owner *o = owner_of(dev);

	if (bs_rbd_handle(dev, &h) < 0)
		return -EINVAL;
	if (!o) {
		snprintf(reason, len, "%s",
			 h.online || !h.exclusive ? "no managed exclusive lock"
						  : "the image is not open (the LUN is offline)");
		return RBD_OWN_NONE;
	}
	pthread_mutex_lock(&o->mu);
	snprintf(reason, len, "%s", o->why);
	pthread_mutex_unlock(&o->mu);
	return atomic_load(&o->own);
}

const char *ha_own_state_name(int state)
{
	return state >= 0 && state <= RBD_OWN_RELEASING ? own_names[state] : "?";
}

const struct bs_own_ops ha_own_ops = {
    .create = rbd_own_new,
    .attach = rbd_own_attach,
    .detach = rbd_own_detach,
    .put = rbd_own_put,
    .io = rbd_own_io,
    .io_result = rbd_own_io_result,
    .fenced = rbd_own_fenced,
};
