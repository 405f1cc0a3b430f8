/* RBD backend, ownership: librbd's managed exclusive lock on an image (rbd.exclusive_lock).
 *
 * The lock is taken at open on the helper thread and never handed over on request (unlike the
 * default cooperative lock, which moves to whichever client writes). A write refused because
 * another client owns the lock (EROFS) or because this client was blocklisted (ESHUTDOWN)
 * becomes BS_ERR_NOT_OWNER and moves the state to standby or fenced; fenced fails every I/O at
 * once. bs_rbd_break_lock() and bs_rbd_take_over_async() break the holder's lock (librbd
 * blocklists it) and take it: the failover primitive (docs/ha.md, "Ownership and failover"). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs_rbd_int.h"
#include "util/log.h"

/* Ownership of an image opened with the managed exclusive lock (rbd.exclusive_lock). */
/* The same values as bs.h's enum bs_rbd_own. */
enum rbd_own {
	RBD_OWN_NONE = BS_RBD_OWN_NONE, /* no managed lock: librbd's cooperative lock, every
					   client writes */
	RBD_OWN_ACQUIRING, /* rbd_lock_acquire queued or running on the helper thread */
	RBD_OWN_OWNER,	   /* this gateway holds the lock */
	RBD_OWN_STANDBY,   /* another client holds it: writes fail with BS_ERR_NOT_OWNER */
	RBD_OWN_FENCED,	   /* this client was blocklisted: every I/O fails, until a restart */
};

/* The ownership state, apart from the device: a lock job still on the helper thread when the
 * device closes (a cluster that does not answer) keeps it, and the last of the two frees it. */
struct rbd_owner {
	atomic_int refs;
	rbd_image_t image;
	atomic_int own;	      /* enum rbd_own */
	atomic_bool lock_job; /* a lock job on the helper thread: close waits for it */
	pthread_mutex_t why_lock;
	char why[192];	/* why the state is what it is (for the management API), under why_lock */
	char name[160]; /* pool/[ns/]image, for messages */
};

void rbd_own_put(struct rbd_owner *o)
{
	if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&o->why_lock);
	free(o);
}

/* ---- ownership: the managed exclusive lock ---- */

static const char *const own_names[] = {"open", "acquiring", "owner", "standby", "fenced"};

static void own_set(struct rbd_owner *p, int own, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A new state and its reason; the change is logged once. */
static void own_set(struct rbd_owner *p, int own, const char *fmt, ...)
{
	va_list ap;
	int was;

	pthread_mutex_lock(&p->why_lock);
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	was = atomic_exchange(&p->own, own);
	if (was != own)
		log_warn("rbd", "%s: %s: %s", p->name, own_names[own], p->why);
	pthread_mutex_unlock(&p->why_lock);
}

/* Any thread, on an I/O result: with the managed lock, a refusal because another client owns
 * the image (EROFS) or because this client was fenced (ESHUTDOWN, librados' EBLOCKLISTED)
 * moves the state and becomes BS_ERR_NOT_OWNER. */
int rbd_own_io_result(struct rbd_owner *p, int r)
{
	if (!p || (r != -EROFS && r != -ESHUTDOWN))
		return r;
	if (r == -ESHUTDOWN && atomic_load(&p->own) != RBD_OWN_FENCED)
		own_set(p, RBD_OWN_FENCED,
			"this gateway's Ceph client was blocklisted (another "
			"gateway broke the image's lock): I/O refused until ix-target restarts");
	else if (r == -EROFS && atomic_load(&p->own) == RBD_OWN_OWNER)
		own_set(p, RBD_OWN_STANDBY, "another client holds the image's exclusive lock");
	return BS_ERR_NOT_OWNER;
}

/* The owners of the image's lock, comma-separated, into buf ("" when none). */
static int lock_owners(struct rbd_owner *p, char *buf, size_t len, char **owners, size_t *n)
{
	rbd_lock_mode_t mode;
	size_t max = *n, at = 0;
	int rc = rbd_lock_get_owners(p->image, &mode, owners, n);

	buf[0] = 0;
	if (rc == -ENOENT) { /* nobody holds it */
		*n = 0;
		return 0;
	}
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < *n && i < max; i++)
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", i ? ", " : "",
				       owners[i]);
	return 0;
}

static void acquire_job(void *arg)
{
	struct rbd_owner *p = arg;
	char who[128];
	char *owners[4];
	size_t n = 4;
	int rc = rbd_lock_acquire(p->image, RBD_LOCK_MODE_EXCLUSIVE);

	if (rc == 0) {
		own_set(p, RBD_OWN_OWNER, "holds the image's exclusive lock");
	} else if (lock_owners(p, who, sizeof(who), owners, &n) == 0 && n > 0) {
		own_set(p, RBD_OWN_STANDBY, "the image's exclusive lock is held by %s (%s)", who,
			strerror(-rc));
		rbd_lock_get_owners_cleanup(owners, n);
	} else {
		own_set(p, RBD_OWN_STANDBY, "cannot take the image's exclusive lock: %s",
			strerror(-rc));
	}
	atomic_store(&p->lock_job, false);
	rbd_own_put(p);
}

/* Take the lock on the helper thread; the LU serves meanwhile (writes wait in librbd). */
int rbd_own_start(struct rbd_owner **out, rbd_image_t image, const char *name)
{
	struct rbd_owner *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	atomic_init(&p->refs, 2); /* the device's and the job's */
	p->image = image;
	atomic_init(&p->own, RBD_OWN_ACQUIRING);
	atomic_init(&p->lock_job, true);
	pthread_mutex_init(&p->why_lock, NULL);
	snprintf(p->why, sizeof(p->why), "taking the image's exclusive lock");
	snprintf(p->name, sizeof(p->name), "%s", name);
	rc = rbd_helper_post(acquire_job, p);
	if (rc < 0) {
		pthread_mutex_destroy(&p->why_lock);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

bool rbd_own_busy(const struct rbd_owner *o)
{
	return atomic_load((atomic_bool *)&o->lock_job);
}

bool rbd_own_fenced(const struct rbd_owner *o)
{
	return o &&
	       atomic_load_explicit((atomic_int *)&o->own, memory_order_relaxed) == RBD_OWN_FENCED;
}

/* The ownership state of dev once its image is open (the opener thread sets o before online),
 * else NULL with d filled in for messages (d->name NULL: not an RBD device). */
static struct rbd_owner *owner_of(const struct bs_dev *dev, struct rbd_dev_own *d)
{
	if (!rbd_dev_own(dev, d)) {
		*d = (struct rbd_dev_own){.name = NULL};
		return NULL;
	}
	return d->online ? d->o : NULL;
}

/* Break the lock of whoever holds it (librbd blocklists that client) and take it. Blocking:
 * the main thread (bs_rbd_break_lock) or the helper thread (take_over_job). who gets the
 * former owners ("" if none). */
static int break_and_take(struct rbd_owner *p, char *who, size_t wlen)
{
	char *owners[4];
	size_t n = 4;
	int rc = lock_owners(p, who, wlen, owners, &n);

	if (rc == 0 && n > 0) {
		for (size_t i = 0; rc == 0 && i < n; i++)
			rc = rbd_lock_break(p->image, RBD_LOCK_MODE_EXCLUSIVE, owners[i]);
		rbd_lock_get_owners_cleanup(owners, n);
	}
	if (rc == 0)
		rc = rbd_lock_acquire(p->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (rc == 0)
		own_set(p, RBD_OWN_OWNER, "holds the image's exclusive lock (broke %s's)",
			who[0] ? who : "nobody");
	return rc;
}

int bs_rbd_break_lock(struct bs_dev *dev, char *msg, size_t msglen)
{
	struct rbd_dev_own d;
	struct rbd_owner *p = owner_of(dev, &d);
	char who[128] = "";
	int rc;

	if (!p) {
		snprintf(msg, msglen,
			 d.name && !d.online ? "%s: the image is not open (the LUN is offline)"
					     : "not an rbd LUN with exclusive_lock",
			 d.name ? d.name : "");
		return -EINVAL;
	}
	if (atomic_load(&p->lock_job) || atomic_load(&p->own) == RBD_OWN_FENCED) {
		snprintf(msg, msglen, "%s: %s", p->name,
			 atomic_load(&p->lock_job) ? "the lock is being acquired" : p->why);
		return -EBUSY;
	}
	rc = break_and_take(p, who, sizeof(who));
	if (rc < 0) {
		snprintf(msg, msglen, "%s: breaking the lock of %s: %s", p->name,
			 who[0] ? who : "-", strerror(-rc));
		return rc;
	}
	snprintf(msg, msglen, "%s", who);
	return 0;
}

int bs_rbd_own(const struct bs_dev *dev)
{
	struct rbd_dev_own d;
	struct rbd_owner *p = owner_of(dev, &d);

	return p ? atomic_load_explicit(&p->own, memory_order_acquire) : -EINVAL;
}

struct take_over {
	struct rbd_owner *p;
	bs_rbd_take_cb done;
	void *arg;
};

/* The helper thread: break and take, then tell the caller (on this thread). */
static void take_over_job(void *arg)
{
	struct take_over *t = arg;
	struct rbd_owner *p = t->p;
	char who[128] = "";
	int rc = break_and_take(p, who, sizeof(who));

	if (rc == -ESHUTDOWN /* librados' EBLOCKLISTED */)
		own_set(p, RBD_OWN_FENCED,
			"this gateway's Ceph client was blocklisted: it cannot "
			"take the lock until ix-target restarts");
	else if (rc < 0)
		own_set(p, RBD_OWN_STANDBY, "taking over the image's lock (held by %s) failed: %s",
			who[0] ? who : "nobody", strerror(-rc));
	else
		log_warn("rbd", "%s: took over the image's exclusive lock from %s", p->name,
			 who[0] ? who : "nobody");
	atomic_store(&p->lock_job, false);
	if (t->done)
		t->done(t->arg, rc);
	rbd_own_put(p);
	free(t);
}

int bs_rbd_take_over_async(struct bs_dev *dev, bs_rbd_take_cb done, void *arg)
{
	struct rbd_dev_own d;
	struct rbd_owner *p = owner_of(dev, &d);
	struct take_over *t;
	bool idle = false;
	int rc;

	if (!p)
		return -EINVAL;
	if (atomic_load(&p->own) == RBD_OWN_FENCED)
		return -ESHUTDOWN;
	if (atomic_load(&p->own) == RBD_OWN_OWNER)
		return -EALREADY;
	if (!atomic_compare_exchange_strong(&p->lock_job, &idle, true))
		return -EBUSY;
	t = calloc(1, sizeof(*t));
	if (!t) {
		atomic_store(&p->lock_job, false);
		return -ENOMEM;
	}
	*t = (struct take_over){p, done, arg};
	atomic_fetch_add(&p->refs, 1);
	own_set(p, RBD_OWN_ACQUIRING, "taking over the image's exclusive lock");
	rc = rbd_helper_post(take_over_job, t);
	if (rc < 0) {
		own_set(p, RBD_OWN_STANDBY, "cannot take over the lock: %s", strerror(-rc));
		atomic_store(&p->lock_job, false);
		atomic_fetch_sub(&p->refs, 1);
		free(t);
	}
	return rc;
}

int bs_rbd_state(struct bs_dev *dev, char *reason, size_t len)
{
	struct rbd_dev_own d;
	struct rbd_owner *p = owner_of(dev, &d);

	if (!d.name)
		return -EINVAL;
	if (!p) {
		snprintf(reason, len, "%s",
			 d.online || !d.exclusive_cfg
			     ? "no managed exclusive lock"
			     : "the image is not open (the LUN is offline)");
		return RBD_OWN_NONE;
	}
	pthread_mutex_lock(&p->why_lock);
	snprintf(reason, len, "%s", p->why);
	pthread_mutex_unlock(&p->why_lock);
	return atomic_load(&p->own);
}

const char *bs_rbd_state_name(int state)
{
	return state >= 0 && state <= RBD_OWN_FENCED ? own_names[state] : "?";
}
