/* RBD backend: cluster connections, the opener thread, fencing and rejoin (bs_rbd.c has the
 * device and its I/O).
 *
 * Connections: one rados_t per distinct (ceph.conf, client, keyring, timeouts) in a context
 * (struct bs_rbd_ctx: one per target context, src/ha/), shared by every LU of it that names
 * the same cluster the same way, reference-counted under its clusters_lock (never held across a
 * call to the cluster: a new connection connects outside it while others of the same key wait).
 * Each connection lists the devices whose image is open on it.
 *
 * Fencing: a connection whose client was blocklisted (another gateway broke the lock, or a
 * reservation change it did not acknowledge) answers ESHUTDOWN (librados' EBLOCKLISTED) to
 * everything, the images and the PR store on it alike; whoever sees it first calls
 * bs_rbd_conn_fenced(), and every device on that connection is fenced at once: its requests
 * are refused before they reach librbd, the lock state is "fenced", and a rejoin is queued on
 * the opener thread rbd.rejoin_after_ms later (0: only when asked, bs_rbd_rejoin). The fenced
 * connection leaves the shared list, so a new LU of that cluster gets a new one.
 *
 * Rejoin (on the opener thread, per device): once every request sent on the fenced connection
 * has ended (failed: the OSDs refuse a blocklisted client) and the image's ownership thread
 * has stopped (its watch and ioctx are the connection's), the connection's user (the PR
 * store) leaves it, the image closes (bounded; a cluster that does not answer gets the image
 * and its connection abandoned, as at a close) and the device leaves the connection, which is
 * shut down with its last image. Then a new connection (a new client id and address, not on
 * the blocklist), the image again, the user on it (watch, address entry, the PR object read
 * again), a new ownership thread on it (its watch; the lock policy set, then standby), and
 * the device serves again: it never takes the lock back by itself. A failed attempt (the
 * cluster does not answer) is tried again with back-off and its reason is in
 * bs_rbd_status().
 *
 * The opener thread also opens the images that start offline (rbd.start_offline) and tries
 * again with back-off. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs_rbd_int.h"
#include "util/log.h"

/* The context of a device, of an entry of the opener's list (NULL p: NULL). */
static struct bs_rbd_ctx *ctx_of(const struct rbd_priv *p)
{
	return p ? p->ctx : NULL;
}

static struct bs_rbd_ctx *ctx_of_r(const struct rbd_retry *r)
{
	return ((const struct rbd_priv *)r->dev->priv)->ctx;
}

/* ---- cluster connections, shared per context ---- */

static int conf_set(rados_t r, const char *opt, const char *val, char *err, size_t errlen)
{
	int rc = rados_conf_set(r, opt, val);

	if (rc < 0)
		snprintf(err, errlen, "rados_conf_set %s=%s: %s", opt, val, strerror(-rc));
	return rc;
}

static int cluster_connect(const struct bs_rbd_cfg *c, rados_t *out, char *err, size_t errlen)
{
	const char *client = c->client ? c->client : "admin";
	unsigned osd_to = c->osd_op_timeout_s ? c->osd_op_timeout_s : RBD_DEFAULT_OSD_TIMEOUT_S;
	unsigned conn_to = c->connect_timeout_s ? c->connect_timeout_s : RBD_DEFAULT_CONNECT_S;
	char v[32];
	rados_t r;
	int rc;

	rc = rados_create(&r, client);
	if (rc < 0) {
		snprintf(err, errlen, "rados_create(client.%s): %s", client, strerror(-rc));
		return rc;
	}
	rc = rados_conf_read_file(r, c->conf);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read ceph configuration %s: %s",
			 c->conf ? c->conf : "(default search path)", strerror(-rc));
		goto fail;
	}
	if (c->keyring && (rc = conf_set(r, "keyring", c->keyring, err, errlen)) < 0)
		goto fail;
	snprintf(v, sizeof(v), "%u", osd_to);
	if ((rc = conf_set(r, "rados_osd_op_timeout", v, err, errlen)) < 0 ||
	    (rc = conf_set(r, "rados_mon_op_timeout", v, err, errlen)) < 0)
		goto fail;
	snprintf(v, sizeof(v), "%u", conn_to);
	if ((rc = conf_set(r, "client_mount_timeout", v, err, errlen)) < 0 ||
	    (rc = conf_set(r, "rbd_cache", "false", err, errlen)) < 0 ||
	    (rc = conf_set(r, "rbd_skip_partial_discard", "false", err, errlen)) < 0)
		goto fail;
	/* Partial discards are zeroed whole (no rounding to 64 KiB): LBPRZ stays true. The
	 * option is newer than some librbd builds; without it the default already zeroes. */
	(void)rados_conf_set(r, "rbd_discard_granularity_bytes", "0");
	/* No write scheduler in librbd (rbd_io_scheduler = none; the default, simple, holds a
	 * write to an object that has one in flight until that one completes or a timer fires,
	 * to merge neighbours): an initiator's block layer already merges sequential writes, and
	 * at 4 KiB random writes QD32 the holding and its timer cost ~12 % of the gateway's CPU
	 * per write (docs/perf.md, "The write row"). Older librbd builds have no scheduler. */
	(void)rados_conf_set(r, "rbd_io_scheduler", "none");
	/* librbd keeps copying each write into a buffer of its own (rbd_disable_zero_copy_writes
	 * stays true): without the copy 1 MiB writes cost 0.87x the CPU, but librbd 16.2.15 then
	 * never completes a write it refuses in its exclusive-lock layer (EROFS on a standby
	 * gateway: rbd_fence.py hung), and the worker waits for it forever
	 * (docs/perf.md, "RBD at librbd's limit"). */
	rc = rados_connect(r);
	if (rc < 0) {
		snprintf(err, errlen,
			 "cluster unreachable: cannot connect to the Ceph cluster of %s as "
			 "client.%s within %u s: %s",
			 c->conf ? c->conf : "the default ceph.conf", client, conn_to,
			 strerror(-rc));
		goto fail;
	}
	*out = r;
	return 0;
fail:
	rados_shutdown(r);
	return rc;
}

/* The new connection's client id and address, for the log lines that name it (an operator
 * matches them with `ceph osd blocklist ls`). */
static void cluster_identify(struct rbd_cluster *cl)
{
	char *addrs = NULL;

	cl->gid = rados_get_instance_id(cl->rados);
	cl->addr[0] = 0;
	if (rados_getaddrs(cl->rados, &addrs) == 0 && addrs) {
		snprintf(cl->addr, sizeof(cl->addr), "%s", addrs);
		free(addrs);
	}
}

/* The connection for c: a shared one, or a new one (NULL with *rcp and a message). */
static struct rbd_cluster *cluster_get(struct bs_rbd_ctx *bx, const struct bs_rbd_cfg *c, char *err,
				       size_t errlen, int *rcp)
{
	struct rbd_cluster *cl;
	struct list_head *pos;
	char *key;
	int rc;

	if (asprintf(&key, "%s\n%s\n%s\n%u\n%u", c->conf ? c->conf : "", c->client ? c->client : "",
		     c->keyring ? c->keyring : "", c->osd_op_timeout_s, c->connect_timeout_s) < 0) {
		snprintf(err, errlen, "out of memory");
		*rcp = -ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&bx->clusters_lock);
again:
	list_for_each(pos, &bx->clusters)
	{
		cl = list_entry(pos, struct rbd_cluster, link);
		if (strcmp(cl->key, key) != 0)
			continue;
		if (cl->connecting) { /* one client per key: wait for that connect */
			pthread_cond_wait(&bx->clusters_cv, &bx->clusters_lock);
			goto again;
		}
		cl->refs++;
		pthread_mutex_unlock(&bx->clusters_lock);
		free(key);
		return cl;
	}
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		pthread_mutex_unlock(&bx->clusters_lock);
		free(key);
		snprintf(err, errlen, "out of memory");
		*rcp = -ENOMEM;
		return NULL;
	}
	cl->ctx = bx;
	cl->key = key;
	cl->refs = 1;
	cl->connecting = true;
	list_init(&cl->devs);
	list_add_tail(&cl->link, &bx->clusters);
	pthread_mutex_unlock(&bx->clusters_lock);
	rc = cluster_connect(c, &cl->rados, err, errlen); /* connect_timeout_s at most */
	pthread_mutex_lock(&bx->clusters_lock);
	cl->connecting = false;
	if (rc < 0)
		list_del(&cl->link);
	else
		cluster_identify(cl);
	pthread_cond_broadcast(&bx->clusters_cv);
	pthread_mutex_unlock(&bx->clusters_lock);
	if (rc < 0) {
		free(key);
		free(cl);
		*rcp = rc;
		return NULL;
	}
	return cl;
}

/* rados_shutdown of a fenced connection on a thread of its own, waited for at most ms: a
 * blocklisted client's shutdown should be quick, but if it hangs the rejoin goes on and the
 * connection is abandoned (the thread and the handle are left to the exit). */
struct reaper {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	rados_t rados;
	int refs; /* the waiter's and the thread's, under mu */
	bool done;
};

static void reaper_put(struct reaper *rp)
{
	bool last;

	pthread_mutex_lock(&rp->mu);
	last = --rp->refs == 0;
	pthread_mutex_unlock(&rp->mu);
	if (!last)
		return;
	pthread_cond_destroy(&rp->cv);
	pthread_mutex_destroy(&rp->mu);
	free(rp);
}

static void *reaper_main(void *arg)
{
	struct reaper *rp = arg;

	rados_shutdown(rp->rados);
	pthread_mutex_lock(&rp->mu);
	rp->done = true;
	pthread_cond_signal(&rp->cv);
	pthread_mutex_unlock(&rp->mu);
	reaper_put(rp);
	return NULL;
}

static bool shutdown_within(rados_t rados, unsigned ms)
{
	struct reaper *rp = calloc(1, sizeof(*rp));
	uint64_t until = bs_rbd_now_ms() + ms;
	pthread_condattr_t ca;
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t th;
	bool done;
	int rc;

	if (!rp) {
		rados_shutdown(rados);
		return true;
	}
	pthread_mutex_init(&rp->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rp->cv, &ca);
	pthread_condattr_destroy(&ca);
	rp->rados = rados;
	rp->refs = 2;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, reaper_main, rp);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		rp->refs = 1;
		reaper_put(rp);
		rados_shutdown(rados);
		return true;
	}
	pthread_mutex_lock(&rp->mu);
	while (!rp->done && bs_rbd_now_ms() < until) {
		struct timespec ts = {.tv_sec = (time_t)(until / 1000u),
				      .tv_nsec = (long)(until % 1000u) * 1000000L};

		pthread_cond_timedwait(&rp->cv, &rp->mu, &ts);
	}
	done = rp->done;
	pthread_mutex_unlock(&rp->mu);
	reaper_put(rp);
	return done;
}

/* ms: how long the shutdown of a fenced connection may take. */
static void cluster_put(struct rbd_cluster *cl, bool abandon, unsigned ms)
{
	struct bs_rbd_ctx *bx = cl->ctx;

	pthread_mutex_lock(&bx->clusters_lock);
	cl->abandoned |= abandon;
	if (--cl->refs > 0) {
		pthread_mutex_unlock(&bx->clusters_lock);
		return;
	}
	list_del(&cl->link); /* a fenced one is off the list already: a no-op */
	pthread_mutex_unlock(&bx->clusters_lock);
	if (cl->abandoned) { /* librbd still holds requests on it: leave it to the exit */
		log_warn("rbd", "client.%llu: abandoned (an image of it did not close)",
			 (unsigned long long)cl->gid);
	} else if (!cl->fenced) {
		rados_shutdown(cl->rados);
	} else if (!shutdown_within(cl->rados, ms)) {
		log_warn("rbd",
			 "client.%llu (fenced): its shutdown did not end within %u s: "
			 "abandoned",
			 (unsigned long long)cl->gid, ms / 1000);
	}
	free(cl->key);
	free(cl);
}

int bs_rbd_conn_join(struct rbd_priv *p, char *err, size_t errlen)
{
	struct bs_rbd_ctx *bx = p->ctx;
	struct rbd_cluster *cl;
	int rc;

	cl = cluster_get(bx, &p->c, err, errlen, &rc);
	if (!cl)
		return rc;
	pthread_mutex_lock(&bx->clusters_lock);
	if (cl->fenced) { /* fenced between the lookup and now */
		pthread_mutex_unlock(&bx->clusters_lock);
		snprintf(err, errlen, "the connection client.%llu was blocklisted while opening",
			 (unsigned long long)cl->gid);
		cluster_put(cl, false, p->close_ms);
		return -ESHUTDOWN;
	}
	list_add_tail(&p->cl_link, &cl->devs);
	p->cl = cl;
	pthread_mutex_unlock(&bx->clusters_lock);
	return 0;
}

void bs_rbd_conn_leave(struct rbd_priv *p, bool abandon)
{
	struct bs_rbd_ctx *bx = p->ctx;
	struct rbd_cluster *cl;

	pthread_mutex_lock(&bx->clusters_lock);
	cl = p->cl;
	list_del(&p->cl_link);
	p->cl = NULL;
	pthread_mutex_unlock(&bx->clusters_lock);
	if (cl)
		cluster_put(cl, abandon, p->close_ms);
}

/* ---- the opener thread: first opens with back-off, and rejoins ---- */

/* rbd.start_offline: an image that cannot be opened at start (the cluster does not answer,
 * the pool or image does not exist) leaves its LU offline (NOT READY 04/03) and is tried
 * again on this thread, RBD_RETRY_MIN_MS after the first failure, doubling to
 * RBD_RETRY_MAX_MS; bs_rbd_retry() (ix-ctl lun online) tries at once. A rejoin after fencing
 * runs here too, with the same back-off after a failure. A thread apart from the helper: a
 * connection attempt blocks for connect_timeout_s, and GET LBA STATUS or a lock must not
 * wait behind it. */
#define RBD_RETRY_MIN_MS  1000u
#define RBD_RETRY_MAX_MS  60000u
#define RBD_START_WAIT_MS 2000u /* how long the open at start waits for the first attempt */
/* How long a rejoin waits for the ownership thread to leave the fenced connection before it
 * tries again later (a blocklisted client's calls end at once; a cluster that does not
 * answer holds them for the OSD timeout, and the opener has other images to serve). */
#define RBD_OWN_STOP_WAIT_MS 1000u

static void timedwait_ms(struct bs_rbd_ctx *bx, pthread_cond_t *cv, uint64_t until)
{
	struct timespec ts = {.tv_sec = (time_t)(until / 1000u),
			      .tv_nsec = (long)(until % 1000u) * 1000000L};

	pthread_cond_timedwait(cv, &bx->opener.lock, &ts);
}

/* Under bx->opener.lock: the entry's next attempt at when (monotonic ms). */
static void queue_at(struct rbd_retry *r, uint64_t when)
{
	struct bs_rbd_ctx *bx = ctx_of_r(r);
	r->next_ms = when;
	if (!r->queued)
		list_add_tail(&r->link, &bx->opener.list);
	r->queued = true;
	pthread_cond_signal(&bx->opener.work);
}

/* Under bx->opener.lock: the device was fenced; its rejoin, rejoin_after_ms from now (0: only
 * when asked). */
static void rejoin_schedule(struct rbd_priv *p)
{
	struct rbd_retry *r = &p->r;

	r->rejoin = true;
	r->rejoin_attempts = 0;
	r->backoff_ms = RBD_RETRY_MIN_MS;
	r->kick = false;
	r->why[0] = 0;
	if (p->c.rejoin_after_ms)
		queue_at(r, bs_rbd_now_ms() + p->c.rejoin_after_ms);
}

/* ---- fencing ---- */

/* Under clusters_lock: p's connection was fenced. */
static void device_fenced(struct rbd_priv *p, unsigned long long gid, const char *what)
{
	struct bs_rbd_ctx *bx = p->ctx;
	struct rbd_retry *r = &p->r;
	char why[256], when[64];

	if (p->c.rejoin_after_ms)
		snprintf(when, sizeof(when), "with a new client, in %u ms", p->c.rejoin_after_ms);
	else
		snprintf(when, sizeof(when), "(rbd.rejoin_after_ms is 0: ix-ctl lun rejoin)");
	snprintf(why, sizeof(why),
		 "this gateway's Ceph client (client.%llu) was blocklisted (%s refused): I/O "
		 "refused until it rejoins %s",
		 gid, what, when);
	atomic_store(&p->fenced, true); /* before anything else: no request gets through */
	if (p->o)
		p->own_ops->fenced(p->o, why); /* logs the change */
	else
		log_warn("rbd", "%s: fenced: %s", p->name, why);
	pthread_mutex_lock(&bx->opener.lock);
	snprintf(r->fenced_why, sizeof(r->fenced_why), "%s", why);
	if (!r->running && !r->queued && !r->rejoin)
		rejoin_schedule(p); /* a running attempt does it when it ends (run_end) */
	pthread_mutex_unlock(&bx->opener.lock);
}

/* Under clusters_lock. */
static void fence_locked(struct rbd_cluster *cl, const char *what)
{
	struct list_head *pos;
	unsigned n = 0;

	if (cl->fenced)
		return;
	cl->fenced = true;
	list_del(&cl->link); /* new LUs of this cluster get a new connection */
	list_for_each(pos, &cl->devs)
	{
		device_fenced(list_entry(pos, struct rbd_priv, cl_link),
			      (unsigned long long)cl->gid, what);
		n++;
	}
	log_warn("rbd", "client.%llu was blocklisted (%s refused): %u image(s) on it fenced",
		 (unsigned long long)cl->gid, what, n);
}

void bs_rbd_conn_fenced(struct rbd_priv *p, const char *what)
{
	struct bs_rbd_ctx *bx = p->ctx;
	pthread_mutex_lock(&bx->clusters_lock);
	if (p->cl)
		fence_locked(p->cl, what);
	pthread_mutex_unlock(&bx->clusters_lock);
}

void bs_rbd_conn_fenced_owner(struct bs_rbd_ctx *bx, const struct rbd_owner *o, const char *what)
{
	struct list_head *pos, *d;

	pthread_mutex_lock(&bx->clusters_lock);
	list_for_each(pos, &bx->clusters)
	{
		struct rbd_cluster *cl = list_entry(pos, struct rbd_cluster, link);

		list_for_each(d, &cl->devs)
		{
			if (list_entry(d, struct rbd_priv, cl_link)->o == o) {
				fence_locked(cl, what); /* takes cl off the list: stop here */
				pthread_mutex_unlock(&bx->clusters_lock);
				return;
			}
		}
	}
	pthread_mutex_unlock(&bx->clusters_lock);
}

void bs_rbd_fenced(struct bs_dev *dev, void *rados, const char *what)
{
	struct rbd_priv *p = dev && dev->ops == &bs_rbd_ops ? dev->priv : NULL;
	struct bs_rbd_ctx *bx = ctx_of(p);

	if (!p)
		return;
	pthread_mutex_lock(&bx->clusters_lock);
	if (p->cl && p->cl->rados == (rados_t)rados) /* not a connection it already left */
		fence_locked(p->cl, what);
	pthread_mutex_unlock(&bx->clusters_lock);
}

/* ---- attempts ---- */

/* The connection's user (the PR store) onto p's connection / off it. On the opener thread
 * with the entry running (the user cannot change meanwhile), or pinned the same way. */
static const struct bs_rbd_user *user_of(struct rbd_priv *p)
{
	struct bs_rbd_ctx *bx = p->ctx;
	const struct bs_rbd_user *u;

	pthread_mutex_lock(&bx->opener.lock);
	u = p->r.user;
	pthread_mutex_unlock(&bx->opener.lock);
	return u;
}

static int user_attach(struct rbd_priv *p, char *err, size_t errlen)
{
	const struct bs_rbd_user *u = user_of(p);

	return u ? u->attach(u->arg, p->cl->rados, err, errlen) : 0;
}

static void user_detach(struct rbd_priv *p)
{
	const struct bs_rbd_user *u = user_of(p);

	if (u)
		u->detach(u->arg);
}

/* The first open: the image and its lock, then the user. */
static int open_attempt(struct bs_dev *dev, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	int rc = bs_rbd_attach(dev, err, errlen);

	if (rc == 0 && (rc = user_attach(p, err, errlen)) < 0)
		bs_rbd_attach_undo(p);
	return rc;
}

/* The fenced incarnation goes (once everything sent on it has ended, the ownership thread
 * too: its watch and ioctx are the old connection's), a new connection and image come, the
 * user moves over, the ownership starts on the new image (its thread watches the record again
 * and sets the lock policy), and the device serves again, standby. */
static int rejoin_attempt(struct rbd_priv *p, char *err, size_t errlen)
{
	struct bs_rbd_ctx *bx = p->ctx;
	unsigned n;
	int rc;

	if (p->cl) { /* still on the fenced connection */
		n = atomic_load(&p->inflight);
		if (n) {
			snprintf(err, errlen,
				 "waiting for %u request(s) sent on the fenced connection to end",
				 n);
			return -EBUSY;
		}
		if (p->o && !p->own_ops->detach(p->o, RBD_OWN_STOP_WAIT_MS)) {
			snprintf(err, errlen,
				 "a lock request sent on the fenced connection is still running");
			return -EBUSY;
		}
		user_detach(p);
		bs_rbd_detach(p);
	}
	rc = bs_rbd_reattach(p->r.dev, err, errlen);
	if (rc < 0)
		return rc;
	rc = user_attach(p, err, errlen);
	if (rc == 0) {
		pthread_mutex_lock(&bx->clusters_lock); /* against a new fencing */
		if (p->cl->fenced) {		    /* blocklisted again meanwhile: still fenced */
			snprintf(err, errlen, "the new connection client.%llu was blocklisted too",
				 (unsigned long long)p->cl->gid);
			rc = -ESHUTDOWN;
		} else if (p->o && (rc = p->own_ops->attach(p->o, p->image, p->ioctx, true)) < 0) {
			snprintf(err, errlen, "cannot start the ownership thread: %s",
				 strerror(-rc));
		} else {
			atomic_store(&p->fenced, false); /* serves again, on the new image */
		}
		pthread_mutex_unlock(&bx->clusters_lock);
	}
	if (rc < 0) {
		user_detach(p);
		bs_rbd_detach(p);
	}
	return rc;
}

/* Under bx->opener.lock: an attempt failed with err; queue the next one. */
static void retry_failed(struct rbd_retry *r, const char *err)
{
	struct rbd_priv *p = r->dev->priv;

	if (strcmp(r->why, err) != 0) {
		if (r->rejoin)
			log_warn("rbd", "%s: rejoin failed: %s (tried %u times, retrying)", p->name,
				 err, r->rejoin_attempts);
		else
			log_warn("rbd",
				 "%s: offline: %s (tried %u times, retrying in the "
				 "background)",
				 p->name, err, r->attempts);
	}
	snprintf(r->why, sizeof(r->why), "%s", err);
	if (r->kick) {
		r->backoff_ms = RBD_RETRY_MIN_MS;
		queue_at(r, bs_rbd_now_ms());
	} else {
		queue_at(r, bs_rbd_now_ms() + r->backoff_ms);
		r->backoff_ms =
		    r->backoff_ms * 2 > RBD_RETRY_MAX_MS ? RBD_RETRY_MAX_MS : r->backoff_ms * 2;
	}
	r->kick = false;
}

/* Under bx->opener.lock: an attempt (or a pin) ends; a device fenced meanwhile gets its rejoin. */
static void run_end(struct rbd_retry *r)
{
	struct bs_rbd_ctx *bx = ctx_of_r(r);
	struct rbd_priv *p = r->dev->priv;

	r->running = false;
	if (!r->queued && !r->rejoin && atomic_load(&p->fenced))
		rejoin_schedule(p);
	if (r->queued)
		pthread_cond_signal(&bx->opener.work);
	pthread_cond_broadcast(&bx->opener.done);
}

/* Under bx->opener.lock, which it drops around the attempt and the ready callback. */
static void opener_run(struct rbd_retry *r)
{
	struct bs_rbd_ctx *bx = ctx_of_r(r);
	struct rbd_priv *p = r->dev->priv;
	bool rejoin = r->rejoin;
	bs_ready_cb cb = NULL;
	char err[256];
	int rc;

	list_del(&r->link);
	r->queued = false;
	r->running = true;
	bx->opener.busy_since = bs_rbd_now_ms();
	pthread_mutex_unlock(&bx->opener.lock);
	rc = rejoin ? rejoin_attempt(p, err, sizeof(err)) : open_attempt(r->dev, err, sizeof(err));
	pthread_mutex_lock(&bx->opener.lock);
	if (rejoin)
		r->rejoin_attempts++;
	else
		r->attempts++;
	if (rc < 0) {
		retry_failed(r, err);
	} else if (rejoin) {
		r->rejoin = false;
		r->rejoins++;
		r->why[0] = 0;
		log_warn("rbd",
			 "%s: rejoined the cluster as client.%llu after %u attempt(s) "
			 "(rejoin %u)",
			 p->name, (unsigned long long)p->cl->gid, r->rejoin_attempts, r->rejoins);
	} else {
		atomic_store_explicit(&p->online, true, memory_order_release);
		r->why[0] = 0;
		cb = r->cb;
		log_info("rbd", "%s: online after %u attempts", p->name, r->attempts);
	}
	if (cb) { /* still running: the device cannot close under it */
		pthread_mutex_unlock(&bx->opener.lock);
		cb(r->dev, r->cb_arg);
		pthread_mutex_lock(&bx->opener.lock);
	}
	bx->opener.busy_since = 0;
	run_end(r);
}

static void *opener_main(void *arg)
{
	struct bs_rbd_ctx *bx = arg;

	pthread_mutex_lock(&bx->opener.lock);
	while (!bx->opener.stop) { /* stop: the context's last device closed (the list is empty) */
		struct rbd_retry *best = NULL;
		struct list_head *pos;

		list_for_each(pos, &bx->opener.list)
		{
			struct rbd_retry *r = list_entry(pos, struct rbd_retry, link);

			if (!r->running && (!best || r->next_ms < best->next_ms))
				best = r; /* a running one is pinned (pin()): run_end wakes us */
		}
		if (!best)
			pthread_cond_wait(&bx->opener.work, &bx->opener.lock);
		else if (best->next_ms > bs_rbd_now_ms())
			timedwait_ms(bx, &bx->opener.work, best->next_ms);
		else
			opener_run(best);
	}
	pthread_mutex_unlock(&bx->opener.lock);
	bs_rbd_ctx_thread_end(bx);
	return NULL;
}

/* Under bx->opener.lock. Detached, every signal blocked; its conditions on the monotonic clock
 * (bs_rbd_ctx_new). */
static int opener_start(struct bs_rbd_ctx *bx)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t th;
	int rc;

	if (bx->opener.started)
		return 0;
	bs_rbd_ctx_thread_start(bx);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, opener_main, bx);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		bs_rbd_ctx_thread_end(bx); /* a device holds bx: never the last */
		return -rc;
	}
	pthread_setname_np(th, "ix-rbd-opener");
	bx->opener.started = true;
	return 0;
}

/* Under bx->opener.lock: wait for the first attempt, at most RBD_START_WAIT_MS, and not at all
 * while another image's attempt has been stuck that long (a cluster that does not answer must
 * not add connect_timeout_s per LU to the start). */
static void start_wait(struct rbd_retry *r)
{
	struct bs_rbd_ctx *bx = ctx_of_r(r);
	uint64_t deadline = bs_rbd_now_ms() + RBD_START_WAIT_MS;

	while (r->attempts == 0 || r->running) {
		uint64_t now = bs_rbd_now_ms(), until = deadline;

		if (now >= deadline)
			return;
		if (!r->running && bx->opener.busy_since) {
			if (now - bx->opener.busy_since >= RBD_START_WAIT_MS)
				return;
			if (bx->opener.busy_since + RBD_START_WAIT_MS < until)
				until = bx->opener.busy_since + RBD_START_WAIT_MS;
		}
		timedwait_ms(bx, &bx->opener.done, until);
	}
}

/* Under bx->opener.lock: keep the opener off the entry while the caller works on the device
 * (the entry is neither queued nor running), and let it go. */
static void pin(struct rbd_retry *r)
{
	struct bs_rbd_ctx *bx = ctx_of_r(r);
	while (r->running)
		pthread_cond_wait(&bx->opener.done, &bx->opener.lock);
	r->running = true;
}

int bs_rbd_open(struct bs_dev *dev, bool background, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	struct bs_rbd_ctx *bx = ctx_of(p);
	struct rbd_retry *r = &p->r;
	bool online;
	int rc;

	r->dev = dev;
	r->backoff_ms = RBD_RETRY_MIN_MS;
	snprintf(r->why, sizeof(r->why), "opening");
	pthread_mutex_lock(&bx->opener.lock);
	rc = opener_start(bx); /* rejoins run there, whichever way the image opens */
	if (rc < 0) {
		pthread_mutex_unlock(&bx->opener.lock);
		snprintf(err, errlen, "rbd %s: cannot start the opener thread: %s", p->name,
			 strerror(-rc));
		return rc;
	}
	if (!background) { /* here, and a failure fails the start */
		pin(r);
		pthread_mutex_unlock(&bx->opener.lock);
		rc = bs_rbd_attach(dev, err, errlen);
		pthread_mutex_lock(&bx->opener.lock);
		r->attempts = 1;
		r->why[0] = 0;
		if (rc == 0)
			atomic_store_explicit(&p->online, true, memory_order_release);
		run_end(r);
		pthread_mutex_unlock(&bx->opener.lock);
		if (rc == 0)
			dev->unmap_granularity =
			    p->obj_size <= UINT32_MAX ? (uint32_t)p->obj_size : 0;
		return rc;
	}
	/* rbd.start_offline: the first attempt on the opener thread; the LU serves from the
	 * start (offline until the image opens) */
	p->background = true;
	queue_at(r, 0);
	start_wait(r);
	online = atomic_load_explicit(&p->online, memory_order_acquire);
	if (!online && !r->attempts)
		snprintf(r->why, sizeof(r->why), "%s",
			 r->running ? "opening: no answer yet from the cluster"
				    : "opening: waiting for another image's attempt");
	if (!online)
		log_warn("rbd", "%s: starts offline: %s", p->name, r->why);
	pthread_mutex_unlock(&bx->opener.lock);
	/* the LU reads it once, at its creation: the real object size, else RBD's default */
	dev->unmap_granularity =
	    online && p->obj_size <= UINT32_MAX ? (uint32_t)p->obj_size : 4u << 20;
	return 0;
}

int bs_rbd_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg)
{
	struct rbd_priv *p = dev->priv;
	struct bs_rbd_ctx *bx = ctx_of(p);
	int rc = 0;

	if (!p->background)
		return 0;
	pthread_mutex_lock(&bx->opener.lock);
	if (!atomic_load(&p->online)) {
		p->r.cb = cb;
		p->r.cb_arg = arg;
		rc = 1;
	}
	pthread_mutex_unlock(&bx->opener.lock);
	return rc;
}

/* Off the opener's list, and out of a running attempt (bounded by connect_timeout_s). */
void bs_rbd_open_stop(struct rbd_priv *p)
{
	struct bs_rbd_ctx *bx = p->ctx;
	pthread_mutex_lock(&bx->opener.lock);
	if (p->r.queued)
		list_del(&p->r.link);
	p->r.queued = false;
	while (p->r.running)
		pthread_cond_wait(&bx->opener.done, &bx->opener.lock);
	pthread_mutex_unlock(&bx->opener.lock);
}

static struct rbd_priv *rbd_of(const struct bs_dev *dev)
{
	return dev && dev->ops == &bs_rbd_ops ? dev->priv : NULL;
}

/* The connection's state, under bx->opener.lock. */
static void conn_status(struct rbd_priv *p, struct bs_rbd_status *st, uint64_t now)
{
	const struct rbd_retry *r = &p->r;
	bool fenced = atomic_load(&p->fenced);

	st->rejoins = r->rejoins;
	st->rejoin_attempts = r->rejoin ? r->rejoin_attempts : 0;
	if (fenced && r->queued && r->next_ms > now)
		st->rejoin_next_s = (unsigned)((r->next_ms - now + 999) / 1000);
	if (!fenced) {
		snprintf(st->conn, sizeof(st->conn), "connected");
	} else if (r->rejoin &&
		   (r->running || r->rejoin_attempts || (r->queued && r->next_ms <= now))) {
		snprintf(st->conn, sizeof(st->conn), "rejoining");
		snprintf(st->conn_reason, sizeof(st->conn_reason), "%s",
			 r->why[0] ? r->why : "reconnecting");
	} else {
		snprintf(st->conn, sizeof(st->conn), "fenced");
		snprintf(st->conn_reason, sizeof(st->conn_reason), "%s", r->fenced_why);
	}
}

int bs_rbd_status(struct bs_dev *dev, struct bs_rbd_status *st)
{
	struct rbd_priv *p = rbd_of(dev);
	struct bs_rbd_ctx *bx = ctx_of(p);
	uint64_t now = bs_rbd_now_ms();

	if (!p)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&bx->opener.lock);
	st->online = atomic_load(&p->online);
	st->attempts = p->r.attempts;
	if (!st->online && p->r.queued && p->r.next_ms > now)
		st->next_s = (unsigned)((p->r.next_ms - now + 999) / 1000);
	if (!st->online)
		snprintf(st->reason, sizeof(st->reason), "%s", p->r.why);
	else
		conn_status(p, st, now);
	pthread_mutex_unlock(&bx->opener.lock);
	return 0;
}

int bs_rbd_retry(struct bs_dev *dev)
{
	struct rbd_priv *p = rbd_of(dev);
	struct bs_rbd_ctx *bx = ctx_of(p);

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&bx->opener.lock);
	if (atomic_load(&p->online) || !p->background) {
		/* open: nothing to do (a fenced one rejoins through bs_rbd_rejoin) */
	} else if (p->r.running) {
		p->r.kick = true;
	} else if (p->r.queued) {
		p->r.backoff_ms = RBD_RETRY_MIN_MS;
		queue_at(&p->r, 0);
	}
	pthread_mutex_unlock(&bx->opener.lock);
	return 0;
}

int bs_rbd_rejoin(struct bs_dev *dev)
{
	struct rbd_priv *p = rbd_of(dev);
	struct bs_rbd_ctx *bx = ctx_of(p);
	struct rbd_retry *r = p ? &p->r : NULL;
	int rc = 0;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&bx->opener.lock);
	if (!atomic_load(&p->online)) {
		rc = -EAGAIN; /* not open yet: bs_rbd_retry */
	} else if (!atomic_load(&p->fenced)) {
		rc = -EALREADY;
	} else if (r->running) {
		r->kick = true; /* a failure goes again at once */
	} else {
		if (!r->rejoin)
			rejoin_schedule(p);
		r->backoff_ms = RBD_RETRY_MIN_MS;
		queue_at(r, 0);
	}
	pthread_mutex_unlock(&bx->opener.lock);
	return rc;
}

/* ---- the connection's other user (the PR store) ---- */

int bs_rbd_attach_user(struct bs_dev *dev, const struct bs_rbd_user *u, char *err, size_t errlen)
{
	struct rbd_priv *p = rbd_of(dev);
	struct bs_rbd_ctx *bx = ctx_of(p);
	bool now;
	int rc = 0;

	if (!p) {
		snprintf(err, errlen, "not an RBD device");
		return -EINVAL;
	}
	pthread_mutex_lock(&bx->opener.lock);
	pin(&p->r);
	p->r.user = u;
	/* open and serving: attach here; else the open or the rejoin does */
	now = atomic_load(&p->online) && !atomic_load(&p->fenced) && p->cl;
	pthread_mutex_unlock(&bx->opener.lock);
	if (now)
		rc = u->attach(u->arg, p->cl->rados, err, errlen);
	pthread_mutex_lock(&bx->opener.lock);
	if (rc < 0)
		p->r.user = NULL;
	run_end(&p->r);
	pthread_mutex_unlock(&bx->opener.lock);
	return rc;
}

void bs_rbd_detach_user(struct bs_dev *dev)
{
	struct rbd_priv *p = rbd_of(dev);
	struct bs_rbd_ctx *bx = ctx_of(p);

	if (!p)
		return;
	pthread_mutex_lock(&bx->opener.lock);
	pin(&p->r); /* an attempt that attaches or detaches it ends first */
	p->r.user = NULL;
	run_end(&p->r);
	pthread_mutex_unlock(&bx->opener.lock);
}

int bs_rbd_handle(const struct bs_dev *dev, struct bs_rbd_handle *h)
{
	struct rbd_priv *p = rbd_of(dev);

	memset(h, 0, sizeof(*h));
	if (!p)
		return -EINVAL;
	h->own = p->o;
	h->online = atomic_load_explicit(&p->online, memory_order_acquire);
	h->exclusive = p->c.exclusive_lock;
	h->name = p->name;
	return 0;
}
