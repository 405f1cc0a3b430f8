/* RBD backend, ownership: librbd's managed exclusive lock on an image (rbd.exclusive_lock).
 *
 * The lock is taken at open and never handed over on librbd's own request (unlike the default
 * cooperative lock, which moves to whichever client writes). A write refused because another
 * client owns the lock (EROFS) or because this client was blocklisted (ESHUTDOWN) becomes
 * BS_ERR_NOT_OWNER and moves the state to standby or fenced; fenced fails every I/O at once.
 * bs_rbd_break_lock() and bs_rbd_take_over_async() break the holder's lock (librbd blocklists
 * it) and take it: the failover primitive (docs/ha.md, "Ownership and failover").
 *
 * Thread: every image with the lock has one thread of its own ("ix-rbd-own"), started when
 * the image opens and stopped before it closes. Every librbd lock call of the image runs
 * there, one at a time: taking the lock at open, take-overs, breaks, and a lock check every
 * rbd.lock_check_ms. The check asks the cluster who holds the lock (rbd_lock_get_owners, one
 * OSD read; librbd's update watch does not fire on lock changes, measured on 16.2), so an
 * idle gateway learns within that interval that it lost the lock (another client holds it:
 * standby) or was fenced (the cluster refuses this client: ESHUTDOWN), and a standby learns
 * when the holder changes. Workers never wait on the thread; what it learns is read with
 * atomic loads, and every change bumps one counter (bs_rbd_own_changes) that the SCSI layer
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

#include "backend/bs_own_rec.h"
#include "backend/bs_rbd_int.h"
#include "util/list.h"
#include "util/log.h"

#define OWN_CHECK_MS_DEFAULT  1000
#define OWN_REC_RETRIES	      4 /* versioned writes of the record lost to a stale writer */
#define OWN_NOTIFY_MS_DEFAULT 5000
#define OWN_SOON_MS	      200 /* after handing the lock over: the next check */
#define OWN_TAKE_ROUNDS	      3	  /* a take-over asks, and reads the holder, at most this often */

/* The same values as bs.h's enum bs_rbd_own. */
enum rbd_own {
	RBD_OWN_NONE = BS_RBD_OWN_NONE, /* no managed lock (librbd's cooperative one) */
	RBD_OWN_ACQUIRING,		/* taking the lock: at open, or a take-over */
	RBD_OWN_OWNER,			/* this gateway holds the lock */
	RBD_OWN_STANDBY,		/* another client holds it (or nobody): writes fail with
					   BS_ERR_NOT_OWNER */
	RBD_OWN_FENCED,			/* this client was blocklisted: every I/O fails, until
					   a restart */
	RBD_OWN_RELEASING,		/* handing the lock over: draining writes, releasing */
};

static const char *const own_names[] = {
    [RBD_OWN_NONE] = "open",	 [RBD_OWN_ACQUIRING] = "acquiring",
    [RBD_OWN_OWNER] = "owner",	 [RBD_OWN_STANDBY] = "standby",
    [RBD_OWN_FENCED] = "fenced", [RBD_OWN_RELEASING] = "releasing",
};

enum job_kind {
	JOB_TAKE,    /* bs_rbd_take_over_async, or a planned release naming this gateway */
	JOB_RELEASE, /* bs_rbd_release_async */
	JOB_BREAK,   /* bs_rbd_break_lock: its caller waits */
	JOB_ASKED,   /* another gateway asks the holder to hand over (from the watch) */
};

struct own_job {
	struct list_head link;
	enum job_kind kind;
	bs_rbd_take_cb done; /* JOB_TAKE, JOB_RELEASE (may be NULL) */
	void *arg;
	int mode;	       /* JOB_TAKE: enum bs_rbd_take */
	uint32_t window_ms;    /* JOB_TAKE implicit */
	uint16_t group;	       /* JOB_RELEASE: the group to take it, 0 none */
	struct bs_own_msg ask; /* JOB_ASKED */
	uint64_t notify_id, cookie;
	bool finished; /* JOB_BREAK, under mu */
	int rc;
	char msg[512];
};

/* One image's ownership. The device holds a reference from open to close, the thread one
 * while it runs (a thread stuck in the cluster when the device closes keeps it). */
struct rbd_owner {
	atomic_int refs;
	atomic_int own;	 /* enum rbd_own */
	atomic_bool job; /* a take-over or release is queued or running (one at a time) */
	unsigned check_ms;
	unsigned notify_ms; /* rbd.handover_timeout_ms */
	/* I/O seen through this gateway (rbd_own_io): the thread starts a new period (io_tick)
	 * at each check and at a hand-over decision; the data path marks the period it saw */
	atomic_uint io_tick, io_seen;
	_Atomic uint64_t last_io_ms; /* the end of the last period with I/O (the thread writes) */
	struct own_group *grp;	     /* the images of the same target, or NULL */
	struct list_head glink;	     /* on grp->members, under groups_lock */
	uint64_t watch;	     /* the thread's: the watch on oid */
	bool watching;
	atomic_bool rewatch; /* the watch broke: watch again */
	char name[160];	     /* pool/[ns/]image, for messages */
	char oid[300];	     /* "ix.own.<image>": the owner record, next to the image */
	rbd_image_t image;   /* set by attach; the thread's only while it runs */
	rados_ioctx_t io;    /* the image's pool and namespace (the device's) */
	uint64_t gid;	     /* this client's id (rados_get_instance_id) */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* the thread: work or stop; callers: a job finished, the thread ended */
	/* under mu */
	struct list_head jobs;
	bool running; /* the thread has not ended */
	bool stop;
	bool attached;
	char why[192];	  /* why the state is what it is (for the management API) */
	char holder[128]; /* who holds the lock, as librbd names it ("" nobody), last check */
	char me[128];	  /* this client, as the lock names it (learnt when it took it) */
	unsigned seq;	  /* changes of this image's state or holder */
	bool refused;	  /* the holder refused the last implicit hand-over (until it changes) */
	bool check_soon;  /* the lock just went to another gateway: look at it again soon */
	struct bs_own_rec rec;	 /* the last owner record read or written ("" holder: none) */
	bool rec_dirty;		 /* the identity changed while holding: write the record again */
	char rec_err[160];	 /* why the record could not be read last time (logged once) */
	uint8_t ngroups, nports; /* this gateway's identity (bs_rbd_set_identity) */
	uint16_t groups[BS_OWN_MAX_IDS], ports[BS_OWN_MAX_IDS];
	/* bs_rbd_own_watch: called by the thread, under hook_mu, when seq moved */
	pthread_mutex_t hook_mu;
	void (*hook)(void *arg);
	void *hook_arg;
};

/* Every change of any image's state or holder: the SCSI layer compares it with the value its
 * ALUA states were set from (bs_rbd_own_changes). */
static atomic_uint own_changes;

unsigned bs_rbd_own_changes(void)
{
	return atomic_load_explicit(&own_changes, memory_order_acquire);
}

/* Under o->mu: this image changed; its thread tells the watcher. */
static void changed(struct rbd_owner *o)
{
	atomic_fetch_add_explicit(&own_changes, 1, memory_order_release);
	o->seq++;
	pthread_cond_broadcast(&o->cv);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void own_set(struct rbd_owner *o, int own, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A new state and its reason; the change is logged once. Fenced stays (a blocklisted client
 * never writes again: only a new client, at restart, does). Any thread. */
static void own_set(struct rbd_owner *o, int own, const char *fmt, ...)
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
		changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

static void fenced(struct rbd_owner *o, const char *how)
{
	own_set(o, RBD_OWN_FENCED,
		"this gateway's Ceph client was blocklisted (%s): I/O refused until ix-target "
		"restarts",
		how);
}

int rbd_own_io_result(struct rbd_owner *o, int r)
{
	if (!o || (r != -EROFS && r != -ESHUTDOWN))
		return r;
	if (r == -ESHUTDOWN && atomic_load(&o->own) != RBD_OWN_FENCED)
		fenced(o, "another gateway broke the image's lock");
	else if (r == -EROFS && atomic_load(&o->own) == RBD_OWN_OWNER)
		own_set(o, RBD_OWN_STANDBY, "another client holds the image's exclusive lock");
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
	return atomic_load_explicit(&o->own, memory_order_relaxed) == RBD_OWN_FENCED;
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
static int lock_holder(struct rbd_owner *o, char *buf, size_t len)
{
	char *owners[4];
	size_t n = 4;
	int rc = lock_owners(o, buf, len, owners, &n);

	if (n)
		rbd_lock_get_owners_cleanup(owners, n);
	return rc;
}

/* Remember who holds the lock; a change is one a standby reports (and ends a refusal). */
static void holder_set(struct rbd_owner *o, const char *who)
{
	pthread_mutex_lock(&o->mu);
	if (strcmp(o->holder, who) != 0) {
		snprintf(o->holder, sizeof(o->holder), "%s", who);
		o->refused = false;
		changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

static void refused_set(struct rbd_owner *o, bool refused)
{
	pthread_mutex_lock(&o->mu);
	if (o->refused != refused) {
		o->refused = refused;
		changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

/* The thread: how long since I/O went through this gateway (to within the period), and a new
 * period from now. */
static uint64_t io_idle(struct rbd_owner *o)
{
	uint64_t now = now_ms();
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
	struct list_head link;	  /* on own_groups */
	struct list_head members; /* rbd_owner.glink */
	unsigned refs;
	uint64_t decided_at; /* the last implicit decision: when, for which window, its idle */
	uint32_t window;
	uint64_t idle;
	char key[];
};

static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static struct list_head own_groups = LIST_HEAD_INIT(own_groups);

static void group_join(struct rbd_owner *o, const char *key)
{
	struct list_head *pos;
	struct own_group *g = NULL;

	if (!key || !key[0])
		return;
	pthread_mutex_lock(&groups_lock);
	list_for_each(pos, &own_groups)
	{
		struct own_group *x = list_entry(pos, struct own_group, link);

		if (strcmp(x->key, key) == 0)
			g = x;
	}
	if (!g && (g = calloc(1, sizeof(*g) + strlen(key) + 1))) {
		strcpy(g->key, key);
		list_init(&g->members);
		list_add_tail(&g->link, &own_groups);
	}
	if (g) { /* without memory: the image answers for itself alone */
		g->refs++;
		list_add_tail(&o->glink, &g->members);
		o->grp = g;
	}
	pthread_mutex_unlock(&groups_lock);
}

static void group_leave(struct rbd_owner *o)
{
	struct own_group *g = o->grp;

	if (!g)
		return;
	pthread_mutex_lock(&groups_lock);
	list_del(&o->glink);
	if (--g->refs == 0) {
		list_del(&g->link);
		free(g);
	}
	pthread_mutex_unlock(&groups_lock);
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
static uint64_t group_idle(struct rbd_owner *o, uint32_t window)
{
	uint64_t idle = io_idle(o), now = now_ms();
	struct own_group *g = o->grp;
	struct list_head *pos;

	if (!g)
		return idle;
	pthread_mutex_lock(&groups_lock);
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
	pthread_mutex_unlock(&groups_lock);
	return idle;
}

/* ---- the owner record ("ix.own.<image>", bs_own_rec.h) ---- */

/* Read the record: 0 (r set, *ver its object version; an absent or empty object is
 * -ENOENT, with *ver 0 for absent), -EINVAL (damaged: logged) or -errno. */
static int rec_read(struct rbd_owner *o, struct bs_own_rec *r, uint64_t *ver)
{
	char buf[BS_OWN_REC_MAX + 1], err[160];
	int n = rados_read(o->io, o->oid, buf, sizeof(buf), 0), rc;

	*ver = 0;
	memset(r, 0, sizeof(*r));
	if (n < 0)
		return n;
	*ver = rados_get_last_version(o->io);
	rc = bs_own_rec_decode(buf, (size_t)n, r, err, sizeof(err));
	if (rc != -EINVAL) {
		o->rec_err[0] = 0;
	} else if (strcmp(err, o->rec_err) != 0) { /* the thread's own: no lock */
		log_warn("rbd",
			 "%s: the owner record %s is damaged (%s): ignored until the lock's "
			 "holder writes it again",
			 o->name, o->oid, err);
		snprintf(o->rec_err, sizeof(o->rec_err), "%s", err);
	}
	return rc;
}

/* Holding the lock: write this gateway's record, one generation on from the last. */
static void rec_write(struct rbd_owner *o)
{
	struct bs_own_rec old, r = {.gid = o->gid};
	char buf[BS_OWN_REC_MAX];
	uint64_t ver;
	int rc = -EAGAIN, n;

	pthread_mutex_lock(&o->mu);
	o->rec_dirty = false;
	snprintf(r.holder, sizeof(r.holder), "%s", o->me);
	r.ngroups = o->ngroups;
	r.nports = o->nports;
	memcpy(r.groups, o->groups, sizeof(r.groups));
	memcpy(r.ports, o->ports, sizeof(r.ports));
	pthread_mutex_unlock(&o->mu);
	for (int i = 0; i < OWN_REC_RETRIES && rc == -EAGAIN; i++) {
		rados_write_op_t op;

		rc = rec_read(o, &old, &ver);
		if (rc < 0 && rc != -ENOENT && rc != -EINVAL)
			break;
		r.gen = old.gen + 1;
		n = bs_own_rec_encode(&r, buf, sizeof(buf));
		if (n < 0 || !(op = rados_create_write_op())) {
			rc = n < 0 ? n : -ENOMEM;
			break;
		}
		if (ver)
			rados_write_op_assert_version(op, ver);
		else
			rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
		rados_write_op_write_full(op, buf, (size_t)n);
		rc = rados_write_op_operate(op, o->io, o->oid, NULL, 0);
		rados_release_write_op(op);
		if (rc == -ERANGE || rc == -EOVERFLOW || rc == -ECANCELED || rc == -EEXIST)
			rc = -EAGAIN;
	}
	if (rc < 0) {
		log_warn("rbd",
			 "%s: cannot write the owner record %s: %s (the other gateways do "
			 "not learn which group owns the image)",
			 o->name, o->oid, strerror(-rc));
		return;
	}
	pthread_mutex_lock(&o->mu);
	o->rec = r;
	changed(o);
	pthread_mutex_unlock(&o->mu);
}

/* Not holding it: read the record when it does not name the holder yet. */
static void rec_follow(struct rbd_owner *o)
{
	struct bs_own_rec r;
	uint64_t ver;
	bool stale;

	pthread_mutex_lock(&o->mu);
	stale = o->holder[0] && strcmp(o->rec.holder, o->holder) != 0;
	pthread_mutex_unlock(&o->mu);
	if (!stale || rec_read(o, &r, &ver) < 0)
		return;
	pthread_mutex_lock(&o->mu);
	if (memcmp(&r, &o->rec, sizeof(r)) != 0) {
		o->rec = r;
		changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

/* Holding the lock: the record must name this gateway (someone may have damaged or removed
 * it); write it again if not. */
static void rec_verify(struct rbd_owner *o)
{
	struct bs_own_rec r;
	uint64_t ver;
	bool ok;
	int rc = rec_read(o, &r, &ver);

	if (rc < 0 && rc != -EINVAL && rc != -ENOENT)
		return; /* the cluster: the next check */
	pthread_mutex_lock(&o->mu);
	ok = rc == 0 && strcmp(r.holder, o->me) == 0 && r.ngroups == o->ngroups &&
	     r.nports == o->nports &&
	     !memcmp(r.groups, o->groups, sizeof(r.groups[0]) * r.ngroups) &&
	     !memcmp(r.ports, o->ports, sizeof(r.ports[0]) * r.nports);
	pthread_mutex_unlock(&o->mu);
	if (ok)
		return;
	log_warn("rbd", "%s: the owner record %s does not name this gateway (%s): writing it again",
		 o->name, o->oid,
		 rc == -ENOENT ? "empty or absent"
		 : rc	       ? "damaged"
			       : r.holder);
	rec_write(o);
}

/* rbd_lock_acquire succeeded: learn this client's name in the lock, say so in the record,
 * then owner. Taking the lock counts as I/O: a new holder refuses implicit requests for half
 * the asker's window, so two gateways an initiator sends I/O to do not pass it back and
 * forth. */
static void took(struct rbd_owner *o, const char *fmt, const char *who)
{
	char me[128];

	atomic_store(&o->last_io_ms, now_ms());
	if (lock_holder(o, me, sizeof(me)) == 0 && me[0]) {
		pthread_mutex_lock(&o->mu);
		snprintf(o->me, sizeof(o->me), "%s", me);
		pthread_mutex_unlock(&o->mu);
		holder_set(o, me);
		rec_write(o);
	}
	own_set(o, RBD_OWN_OWNER, fmt, who);
}

/* At open: take the lock, or learn who holds it. */
static void acquire(struct rbd_owner *o)
{
	char who[128];
	int rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);

	if (rc == 0) {
		took(o, "holds the image's exclusive lock%s", "");
		return;
	}
	if (rc == -ESHUTDOWN) {
		fenced(o, "noticed when taking the lock");
		return;
	}
	if (lock_holder(o, who, sizeof(who)) == 0 && who[0]) {
		holder_set(o, who);
		rec_follow(o);
		own_set(o, RBD_OWN_STANDBY, "the image's exclusive lock is held by %s (%s)", who,
			strerror(-rc));
	} else {
		own_set(o, RBD_OWN_STANDBY, "cannot take the image's exclusive lock: %s",
			strerror(-rc));
	}
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
		took(o, "holds the image's exclusive lock (broke %s's)", who[0] ? who : "nobody");
	return rc;
}

/* A take-over that did not happen: standby (or fenced) with the reason. */
static void take_failed(struct rbd_owner *o, const char *who, int rc)
{
	if (rc == -ESHUTDOWN) /* librados' EBLOCKLISTED */
		fenced(o, "noticed when taking the lock over");
	else
		own_set(o, RBD_OWN_STANDBY, "taking over the image's lock (held by %s) failed: %s",
			who[0] ? who : "nobody", strerror(-rc));
}

/* ---- gateway to gateway: watch and notify on the record's object ---- */

static void queue_front(struct rbd_owner *o, struct own_job *j);
static int queue_job(struct rbd_owner *o, struct own_job *j);

static void ack(struct rbd_owner *o, uint64_t notify_id, uint64_t cookie, const char *reply)
{
	int rc = rados_notify_ack(o->io, o->oid, notify_id, cookie, reply, (int)strlen(reply));

	if (rc < 0)
		log_warn("rbd", "%s: answering a hand-over request on %s: %s", o->name, o->oid,
			 strerror(-rc));
}

/* Does this gateway's identity include group? */
static bool my_group(struct rbd_owner *o, uint16_t group)
{
	bool mine = false;

	pthread_mutex_lock(&o->mu);
	for (unsigned i = 0; i < o->ngroups && group; i++)
		mine |= o->groups[i] == group;
	pthread_mutex_unlock(&o->mu);
	return mine;
}

/* librados' thread: a request or notice from a gateway (maybe this one). Never waits on the
 * owner's thread: a request to the holder is queued (its answer comes from the thread once it
 * has released the lock, or not); every other message is answered here at once. */
static void watch_cb(void *arg, uint64_t notify_id, uint64_t cookie, uint64_t notifier_id,
		     void *data, size_t len)
{
	struct rbd_owner *o = arg;
	struct bs_own_msg m;
	struct own_job *j;
	int own = atomic_load(&o->own);

	(void)notifier_id;
	if (bs_own_msg_decode(data, len, &m) < 0 || m.gid == o->gid) {
		ack(o, notify_id, cookie, "");
		return;
	}
	if (m.kind == BS_OWN_FREE) {
		ack(o, notify_id, cookie, "");
		if (own == RBD_OWN_STANDBY && my_group(o, m.group) && !atomic_load(&o->job) &&
		    (j = calloc(1, sizeof(*j)))) {
			*j = (struct own_job){.kind = JOB_TAKE, .mode = BS_RBD_TAKE_FREE};
			atomic_store(&o->job, true);
			log_warn("rbd",
				 "%s: client.%llu released the lock for group %u (this "
				 "gateway's): taking it",
				 o->name, (unsigned long long)m.gid, m.group);
			if (queue_job(o, j) < 0) {
				atomic_store(&o->job, false);
				free(j);
			}
		}
		return;
	}
	/* holding the lock, or about to hold it or give it up: the thread answers once that is
	 * over (an asker that saw no answer from the holder would break its lock) */
	if (own == RBD_OWN_STANDBY || own == RBD_OWN_FENCED || !(j = calloc(1, sizeof(*j)))) {
		ack(o, notify_id, cookie, own == RBD_OWN_FENCED ? "fenced" : "standby");
		return;
	}
	*j =
	    (struct own_job){.kind = JOB_ASKED, .ask = m, .notify_id = notify_id, .cookie = cookie};
	queue_front(o, j);
}

static void watch_err_cb(void *arg, uint64_t cookie, int err)
{
	struct rbd_owner *o = arg;

	(void)cookie;
	log_warn("rbd", "%s: the watch on %s broke (%s): watching it again", o->name, o->oid,
		 strerror(-err));
	atomic_store(&o->rewatch, true);
}

/* The thread: watch the record's object (created empty when absent), so that other gateways
 * can ask this one to hand over. */
static void watch_start(struct rbd_owner *o)
{
	rados_write_op_t op;
	int rc;

	if (o->watching) {
		rados_unwatch2(o->io, o->watch);
		o->watching = false;
	}
	atomic_store(&o->rewatch, false);
	op = rados_create_write_op();
	if (op) {
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
		rc = rados_write_op_operate(op, o->io, o->oid, NULL, 0);
		rados_release_write_op(op);
		if (rc < 0 && rc != -EEXIST)
			log_warn("rbd", "%s: creating %s: %s", o->name, o->oid, strerror(-rc));
	}
	rc = rados_watch2(o->io, o->oid, &o->watch, watch_cb, watch_err_cb, o);
	if (rc < 0) {
		log_warn("rbd",
			 "%s: cannot watch %s (%s): other gateways cannot ask this one to "
			 "hand the lock over (they break it instead); trying again",
			 o->name, o->oid, strerror(-rc));
		atomic_store(&o->rewatch, true);
		return;
	}
	o->watching = true;
}

static void watch_stop(struct rbd_owner *o)
{
	if (!o->watching)
		return;
	rados_unwatch2(o->io, o->watch);
	rados_watch_flush(rados_ioctx_get_cluster(o->io)); /* no callback of ours after this */
	o->watching = false;
}

enum answer { SILENT, RELEASED, REFUSED, ALIVE };

/* Ask the holder to hand over; the answer of whichever watcher held the lock. SILENT: none
 * did within notify_ms (dead, stopped, cut off, or not an ix gateway). ALIVE: the holder
 * (holder_gid, from its record; 0 unknown) answered, but neither released nor refused (it
 * let the lock go a moment ago, or speaks another version): never a reason to break it. */
static enum answer ask(struct rbd_owner *o, int mode, uint32_t window_ms, uint64_t holder_gid,
		       char *why, size_t whylen)
{
	struct bs_own_msg m = {.kind = BS_OWN_ASK,
			       .ask = mode == BS_RBD_TAKE_IMPLICIT ? BS_OWN_IMPLICIT
				      : mode == BS_RBD_TAKE_HEAL   ? BS_OWN_HEAL
								   : BS_OWN_EXPLICIT,
			       .window_ms = window_ms,
			       .gid = o->gid};
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t nacks = 0, ntos = 0, rlen = 0;
	char msg[BS_OWN_MSG_MAX], *reply = NULL;
	enum answer a = SILENT;
	int n = bs_own_msg_encode(&m, msg, sizeof(msg)), rc;

	if (n < 0)
		return SILENT;
	rc = rados_notify2(o->io, o->oid, msg, n, o->notify_ms, &reply, &rlen);
	if (rc < 0 && rc != -ETIMEDOUT)
		log_warn("rbd", "%s: asking the holder through %s: %s", o->name, o->oid,
			 strerror(-rc));
	if (reply && rados_decode_notify_response(reply, rlen, &acks, &nacks, &tos, &ntos) == 0) {
		for (size_t i = 0; i < nacks; i++) {
			enum bs_own_reply k =
			    bs_own_reply_kind(acks[i].payload, acks[i].payload_len);

			if (k == BS_OWN_REFUSED) {
				a = REFUSED;
				snprintf(why, whylen, "client.%llu: %.*s",
					 (unsigned long long)acks[i].notifier_id,
					 (int)acks[i].payload_len, acks[i].payload);
			} else if (k == BS_OWN_RELEASED && a != REFUSED) {
				a = RELEASED;
				snprintf(why, whylen, "client.%llu",
					 (unsigned long long)acks[i].notifier_id);
			} else if (holder_gid && acks[i].notifier_id == holder_gid && a == SILENT) {
				a = ALIVE;
				snprintf(why, whylen, "client.%llu answered \"%.*s\"",
					 (unsigned long long)holder_gid,
					 (int)(acks[i].payload_len > 60 ? 60 : acks[i].payload_len),
					 acks[i].payload);
			}
		}
		rados_free_notify_response(acks, nacks, tos);
	}
	if (reply)
		rados_buffer_free(reply);
	return a;
}

/* The RADOS client id of the lock's holder who, from its owner record (0: not known). */
static uint64_t holder_gid(struct rbd_owner *o, const char *who)
{
	uint64_t gid;

	holder_set(o, who);
	rec_follow(o);
	pthread_mutex_lock(&o->mu);
	gid = strcmp(o->rec.holder, who) == 0 ? o->rec.gid : 0;
	pthread_mutex_unlock(&o->mu);
	return gid;
}

/* Take the lock while it is free; 0, -EROFS (someone was quicker), -errno. */
static int take_free(struct rbd_owner *o, const char *how)
{
	int rc;

	own_set(o, RBD_OWN_ACQUIRING, "taking the image's exclusive lock (%s)", how);
	rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (rc == 0)
		took(o, "holds the image's exclusive lock (%s)", how);
	return rc;
}

/* A take-over (docs/ha.md): a free lock is taken; a held one is asked for, and the holder
 * hands it over (explicit: always; implicit: when the initiator really left it), refuses
 * (implicit, it still gets I/O: -EAGAIN, nothing changes), or does not answer within
 * notify_ms: then its lock is broken (librbd blocklists it) and taken. */
static int run_take(struct rbd_owner *o, int mode, uint32_t window_ms)
{
	char who[128] = "", again[128], why[192] = "";
	int rc = -EBUSY;

	if (atomic_load(&o->own) == RBD_OWN_FENCED)
		return -ESHUTDOWN;
	if (atomic_load(&o->own) == RBD_OWN_OWNER)
		return -EALREADY;
	for (int round = 0; round < OWN_TAKE_ROUNDS; round++) {
		rc = lock_holder(o, who, sizeof(who));
		if (rc < 0)
			break;
		if (!who[0]) {
			rc = take_free(o, "it was free");
			if (rc == -EROFS)
				continue;
			break;
		}
		if (mode == BS_RBD_TAKE_FREE) {
			rc = -EBUSY; /* released for this gateway, yet another took it */
			break;
		}
		switch (ask(o, mode, window_ms, holder_gid(o, who), why, sizeof(why))) {
		case ALIVE:
			if (lock_holder(o, again, sizeof(again)) == 0 && strcmp(again, who) != 0)
				continue; /* it did let it go: ask whoever has it now */
			log_warn("rbd", "%s: the holder %s is alive but did not hand over (%s)",
				 o->name, who, why);
			return -EAGAIN;
		case REFUSED:
			if (mode == BS_RBD_TAKE_HEAL) /* it answers: it heals the split itself */
				return -EAGAIN;
			log_warn("rbd", "%s: the holder %s keeps the lock (%s): not taking it",
				 o->name, who, why);
			refused_set(o, true);
			return -EAGAIN;
		case RELEASED:
			rc = take_free(o, "handed over by its holder");
			if (rc == -EROFS)
				continue;
			if (rc == 0)
				log_warn("rbd", "%s: %s handed the lock over", o->name, why);
			return rc < 0 ? (take_failed(o, who, rc), rc) : 0;
		case SILENT:
			if (lock_holder(o, again, sizeof(again)) == 0 && strcmp(again, who) != 0)
				continue; /* it moved meanwhile: ask again */
			own_set(o, RBD_OWN_ACQUIRING,
				"the holder %s did not answer within %u ms: breaking its lock", who,
				o->notify_ms);
			rc = rbd_lock_break(o->image, RBD_LOCK_MODE_EXCLUSIVE, who);
			if (rc == 0)
				rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
			if (rc == 0) {
				took(o, "holds the image's exclusive lock (broke %s's)", who);
				log_warn("rbd",
					 "%s: took over the image's exclusive lock from %s "
					 "(blocklisted)",
					 o->name, who);
				return 0;
			}
			if (rc == -EBUSY || rc == -ENOENT || rc == -EROFS)
				continue;
			take_failed(o, who, rc);
			return rc;
		}
	}
	if (rc < 0 && atomic_load(&o->own) != RBD_OWN_STANDBY)
		take_failed(o, who, rc);
	return rc;
}

/* The holder, asked to hand over (docs/ha.md): explicitly, always; implicitly only if no I/O
 * went to the target's LUs through it for half the asker's window (group_idle); to heal a
 * split, never. Handing over drains the writes in flight and releases the lock
 * (rbd_lock_release does both); this gateway stays healthy, standby. */
static void run_asked(struct rbd_owner *o, struct own_job *j, bool closing)
{
	static const char *const why[] = {"explicit", "implicit", "heal"};
	const struct bs_own_msg *m = &j->ask;
	char reply[160] = "standby";
	uint64_t idle = 0;
	int rc;

	if (atomic_load(&o->own) != RBD_OWN_OWNER) {
		ack(o, j->notify_id, j->cookie, reply);
		return;
	}
	if (m->ask == BS_OWN_IMPLICIT)
		idle = group_idle(o, m->window_ms);
	if (!closing && !bs_own_may_hand_over(m->ask, idle, m->window_ms)) {
		if (m->ask == BS_OWN_HEAL) {
			snprintf(reply, sizeof(reply), "refused this gateway holds it and answers");
			ack(o, j->notify_id, j->cookie, reply);
			return;
		}
		snprintf(reply, sizeof(reply), "refused I/O through this gateway %llu ms ago",
			 (unsigned long long)idle);
		log_warn("rbd",
			 "%s: client.%llu asks for the lock (I/O on its standby path for %u "
			 "ms); refused: this gateway had I/O %llu ms ago",
			 o->name, (unsigned long long)m->gid, m->window_ms,
			 (unsigned long long)idle);
		ack(o, j->notify_id, j->cookie, reply);
		return;
	}
	own_set(o, RBD_OWN_RELEASING, "handing the lock over to client.%llu (%s)",
		(unsigned long long)m->gid,
		closing			    ? "closing"
		: m->ask == BS_OWN_IMPLICIT ? "its standby path has the I/O"
					    : "asked");
	rc = rbd_lock_release(o->image);
	if (rc == 0) {
		o->check_soon = true; /* who holds it now: the next check, in a moment */
		own_set(o, RBD_OWN_STANDBY,
			"handed the lock over to client.%llu at its request (%s)",
			(unsigned long long)m->gid, why[m->ask <= BS_OWN_HEAL ? m->ask : 0]);
		snprintf(reply, sizeof(reply), "released");
	} else if (rc == -ESHUTDOWN) {
		fenced(o, "noticed when releasing the lock");
		snprintf(reply, sizeof(reply), "fenced");
	} else {
		own_set(o, RBD_OWN_OWNER,
			"holds the image's exclusive lock (releasing it failed: %s)",
			strerror(-rc));
		snprintf(reply, sizeof(reply), "refused releasing failed: %s", strerror(-rc));
	}
	ack(o, j->notify_id, j->cookie, reply);
}

/* A planned hand-over (SET TARGET PORT GROUPS on the holder): release, then tell the others
 * which group is to take it (0: none). */
static int run_release(struct rbd_owner *o, uint16_t group)
{
	struct bs_own_msg m = {.kind = BS_OWN_FREE, .group = group, .gid = o->gid};
	char msg[BS_OWN_MSG_MAX], *reply = NULL;
	size_t rlen = 0;
	int rc, n;

	if (atomic_load(&o->own) != RBD_OWN_OWNER)
		return atomic_load(&o->own) == RBD_OWN_FENCED ? -ESHUTDOWN : -EALREADY;
	own_set(o, RBD_OWN_RELEASING, "releasing the lock (SET TARGET PORT GROUPS)");
	rc = rbd_lock_release(o->image);
	if (rc < 0) {
		if (rc == -ESHUTDOWN)
			fenced(o, "noticed when releasing the lock");
		else
			own_set(o, RBD_OWN_OWNER,
				"holds the image's exclusive lock (releasing it failed: %s)",
				strerror(-rc));
		return rc;
	}
	o->check_soon = true;
	own_set(o, RBD_OWN_STANDBY, "released the lock (SET TARGET PORT GROUPS): %s%.0u",
		group ? "for group " : "nobody asked to take it", group);
	n = bs_own_msg_encode(&m, msg, sizeof(msg));
	if (n > 0 && rados_notify2(o->io, o->oid, msg, n, o->notify_ms, &reply, &rlen) < 0)
		log_warn("rbd", "%s: not every gateway heard that the lock is free", o->name);
	if (reply)
		rados_buffer_free(reply);
	return 0;
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
			fenced(o, "noticed when breaking the lock");
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
	rc = lock_holder(o, who, sizeof(who));
	if (rc == -ESHUTDOWN) {
		fenced(o, "noticed by the lock check");
		return;
	}
	if (rc < 0) {
		log_dbg("rbd", "%s: lock check: %s", o->name, strerror(-rc));
		return;
	}
	holder_set(o, who);
	pthread_mutex_lock(&o->mu);
	snprintf(me, sizeof(me), "%s", o->me);
	pthread_mutex_unlock(&o->mu);
	(void)io_idle(o);
	if (own == RBD_OWN_STANDBY)
		rec_follow(o);
	if (own == RBD_OWN_OWNER && (!me[0] || strcmp(who, me) != 0))
		own_set(o, RBD_OWN_STANDBY,
			"lost the image's exclusive lock (noticed by the lock "
			"check): %s%s",
			who[0] ? "held by " : "nobody holds it", who);
	else if (own == RBD_OWN_OWNER)
		rec_verify(o);
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
		run_asked(o, j, true);
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
		job_end(o, j, run_take(o, j->mode, j->window_ms));
		return;
	case JOB_RELEASE:
		job_end(o, j, run_release(o, j->group));
		return;
	case JOB_ASKED:
		run_asked(o, j, false);
		free(j);
		return;
	case JOB_BREAK:
		job_end(o, j, run_break(o, j->msg, sizeof(j->msg)));
	}
}

static void timedwait(struct rbd_owner *o, uint64_t until)
{
	struct timespec ts = {.tv_sec = (time_t)(until / 1000u),
			      .tv_nsec = (long)(until % 1000u) * 1000000L};

	pthread_cond_timedwait(&o->cv, &o->mu, &ts);
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
	atomic_store(&o->last_io_ms, now_ms());
	watch_start(o);
	acquire(o);
	next = now_ms() + o->check_ms;
	pthread_mutex_lock(&o->mu);
	while (!o->stop) {
		if (o->seq != told) {
			tell(o, &told);
		} else if (o->rec_dirty && atomic_load(&o->own) == RBD_OWN_OWNER) {
			pthread_mutex_unlock(&o->mu);
			rec_write(o);
			pthread_mutex_lock(&o->mu);
		} else if (!list_empty(&o->jobs)) {
			struct own_job *j = list_entry(o->jobs.next, struct own_job, link);

			list_del(&j->link);
			pthread_mutex_unlock(&o->mu);
			run_job(o, j);
			if (o->check_soon) { /* the new holder's record, in a moment */
				o->check_soon = false;
				if (next > now_ms() + OWN_SOON_MS)
					next = now_ms() + OWN_SOON_MS;
			}
			pthread_mutex_lock(&o->mu);
		} else if (now_ms() >= next) {
			pthread_mutex_unlock(&o->mu);
			if (atomic_load(&o->rewatch) && atomic_load(&o->own) != RBD_OWN_FENCED)
				watch_start(o);
			check(o);
			next = now_ms() + o->check_ms;
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
	watch_stop(o);
	pthread_mutex_lock(&o->mu);
	o->running = false;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	rbd_own_put(o);
	return NULL;
}

/* A request from another gateway: before the rest (it waits for the answer). The job is
 * answered either way. */
static void queue_front(struct rbd_owner *o, struct own_job *j)
{
	pthread_mutex_lock(&o->mu);
	if (!o->attached || o->stop) {
		pthread_mutex_unlock(&o->mu);
		ack(o, j->notify_id, j->cookie, "standby");
		free(j);
		return;
	}
	list_add(&j->link, &o->jobs);
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

static int queue_job(struct rbd_owner *o, struct own_job *j)
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

int rbd_own_new(struct rbd_owner **out, const char *name, const struct bs_rbd_cfg *c,
		const char *group)
{
	struct rbd_owner *o = calloc(1, sizeof(*o));
	pthread_condattr_t ca;

	if (!o)
		return -ENOMEM;
	atomic_init(&o->refs, 1);
	atomic_init(&o->own, RBD_OWN_ACQUIRING);
	atomic_init(&o->job, false);
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

int rbd_own_attach(struct rbd_owner *o, rbd_image_t image, rados_ioctx_t io)
{
	sigset_t all, old;
	pthread_attr_t a;
	int rc;

	pthread_mutex_lock(&o->mu);
	o->image = image;
	o->io = io;
	o->gid = rados_get_instance_id(rados_ioctx_get_cluster(io));
	memset(&o->rec, 0, sizeof(o->rec));
	o->refused = false;
	o->stop = false;
	o->running = true;
	o->attached = true;
	o->holder[0] = o->me[0] = 0;
	snprintf(o->why, sizeof(o->why), "taking the image's exclusive lock");
	atomic_store(&o->own, RBD_OWN_ACQUIRING);
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
		return rc;
	}
	pthread_setname_np(o->thread, "ix-rbd-own");
	return 0;
}

bool rbd_own_detach(struct rbd_owner *o, unsigned wait_ms)
{
	uint64_t end = now_ms() + wait_ms;
	bool ended;

	pthread_mutex_lock(&o->mu);
	if (!o->attached) {
		pthread_mutex_unlock(&o->mu);
		return true;
	}
	o->stop = true;
	o->attached = false;
	pthread_cond_broadcast(&o->cv);
	while (o->running && now_ms() < end)
		timedwait(o, end);
	ended = !o->running;
	atomic_fetch_add_explicit(&own_changes, 1, memory_order_release); /* closed: not followed */
	pthread_mutex_unlock(&o->mu);
	return ended;
}

void rbd_own_put(struct rbd_owner *o)
{
	if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	group_leave(o);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	pthread_mutex_destroy(&o->hook_mu);
	free(o);
}

/* ---- the API (bs.h) ---- */

/* The ownership state of dev once its image is open, else NULL with d filled in for messages
 * (d->name NULL: not an RBD device). */
static struct rbd_owner *owner_of(const struct bs_dev *dev, struct rbd_dev_own *d)
{
	if (!rbd_dev_own(dev, d)) {
		*d = (struct rbd_dev_own){.name = NULL};
		return NULL;
	}
	return d->online ? d->o : NULL;
}

int bs_rbd_break_lock(struct bs_dev *dev, char *msg, size_t msglen)
{
	struct rbd_dev_own d;
	struct rbd_owner *o = owner_of(dev, &d);
	struct own_job j = {.kind = JOB_BREAK};
	int rc;

	if (!o) {
		snprintf(msg, msglen,
			 d.name && !d.online ? "%s: the image is not open (the LUN is offline)"
					     : "not an rbd LUN with exclusive_lock",
			 d.name ? d.name : "");
		return -EINVAL;
	}
	if (atomic_load(&o->own) == RBD_OWN_ACQUIRING || atomic_load(&o->job)) {
		snprintf(msg, msglen, "%s: the lock is being acquired", o->name);
		return -EBUSY;
	}
	rc = queue_job(o, &j);
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

int bs_rbd_own_watch(struct bs_dev *dev, void (*fn)(void *arg), void *arg)
{
	struct rbd_dev_own d;

	if (!rbd_dev_own(dev, &d) || !d.o)
		return -EINVAL;
	pthread_mutex_lock(&d.o->hook_mu);
	d.o->hook = fn;
	d.o->hook_arg = arg;
	pthread_mutex_unlock(&d.o->hook_mu);
	return 0;
}

int bs_rbd_set_identity(struct bs_dev *dev, const uint16_t *groups, unsigned ngroups,
			const uint16_t *ports, unsigned nports)
{
	struct rbd_dev_own d;
	struct rbd_owner *o;

	if (!rbd_dev_own(dev, &d) || !(o = d.o))
		return -EINVAL;
	if (ngroups > BS_OWN_MAX_IDS)
		ngroups = BS_OWN_MAX_IDS;
	if (nports > BS_OWN_MAX_IDS)
		nports = BS_OWN_MAX_IDS;
	pthread_mutex_lock(&o->mu);
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

int bs_rbd_owner(const struct bs_dev *dev, struct bs_rbd_owner *out)
{
	struct rbd_dev_own d;
	struct rbd_owner *o = owner_of(dev, &d);

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

int bs_rbd_own(const struct bs_dev *dev)
{
	struct rbd_dev_own d;
	struct rbd_owner *o = owner_of(dev, &d);

	return o ? atomic_load_explicit(&o->own, memory_order_acquire) : -EINVAL;
}

int bs_rbd_take_over_async(struct bs_dev *dev, int mode, uint32_t window_ms, bs_rbd_take_cb done,
			   void *arg)
{
	struct rbd_dev_own d;
	struct rbd_owner *o = owner_of(dev, &d);
	struct own_job *j;
	bool idle = false;
	int rc;

	if (!o)
		return -EINVAL;
	if (atomic_load(&o->own) == RBD_OWN_FENCED)
		return -ESHUTDOWN;
	if (atomic_load(&o->own) == RBD_OWN_OWNER)
		return -EALREADY;
	if (!atomic_compare_exchange_strong(&o->job, &idle, true))
		return -EBUSY;
	j = calloc(1, sizeof(*j));
	if (!j) {
		atomic_store(&o->job, false);
		return -ENOMEM;
	}
	*j = (struct own_job){
	    .kind = JOB_TAKE, .done = done, .arg = arg, .mode = mode, .window_ms = window_ms};
	rc = queue_job(o, j);
	if (rc < 0) {
		atomic_store(&o->job, false);
		free(j);
	}
	return rc;
}

int bs_rbd_release_async(struct bs_dev *dev, uint16_t group, bs_rbd_take_cb done, void *arg)
{
	struct rbd_dev_own d;
	struct rbd_owner *o = owner_of(dev, &d);
	struct own_job *j;
	bool idle = false;
	int rc;

	if (!o)
		return -EINVAL;
	if (atomic_load(&o->own) != RBD_OWN_OWNER)
		return atomic_load(&o->own) == RBD_OWN_FENCED ? -ESHUTDOWN : -EALREADY;
	if (!atomic_compare_exchange_strong(&o->job, &idle, true))
		return -EBUSY;
	j = calloc(1, sizeof(*j));
	if (!j) {
		atomic_store(&o->job, false);
		return -ENOMEM;
	}
	*j = (struct own_job){.kind = JOB_RELEASE, .done = done, .arg = arg, .group = group};
	rc = queue_job(o, j);
	if (rc < 0) {
		atomic_store(&o->job, false);
		free(j);
	}
	return rc;
}

int bs_rbd_state(struct bs_dev *dev, char *reason, size_t len)
{
	struct rbd_dev_own d;
	struct rbd_owner *o = owner_of(dev, &d);

	if (!d.name)
		return -EINVAL;
	if (!o) {
		snprintf(reason, len, "%s",
			 d.online || !d.exclusive_cfg
			     ? "no managed exclusive lock"
			     : "the image is not open (the LUN is offline)");
		return RBD_OWN_NONE;
	}
	pthread_mutex_lock(&o->mu);
	snprintf(reason, len, "%s", o->why);
	pthread_mutex_unlock(&o->mu);
	return atomic_load(&o->own);
}

const char *bs_rbd_state_name(int state)
{
	return state >= 0 && state <= RBD_OWN_RELEASING ? own_names[state] : "?";
}
