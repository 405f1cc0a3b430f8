/* RBD backend: cluster connections and the opener thread (bs_rbd.c has the device).
 *
 * Cluster handles: one rados_t per distinct (ceph.conf, client, keyring, timeouts) in the
 * process, shared by every LU that names the same cluster the same way, reference-counted
 * under a mutex (taken at open and close only).
 *
 * The opener thread opens the images that start offline (rbd.start_offline) and tries again
 * with back-off. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs_rbd_int.h"
#include "util/log.h"

/* ---- cluster handles, shared per process ---- */

static pthread_mutex_t clusters_lock = PTHREAD_MUTEX_INITIALIZER;
static struct list_head clusters = LIST_HEAD_INIT(clusters);

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

struct rbd_cluster *bs_rbd_cluster_get(const struct bs_rbd_cfg *c, char *err, size_t errlen,
				       int *rcp)
{
	struct rbd_cluster *cl;
	struct list_head *pos;
	char *key;
	int n;

	n = asprintf(&key, "%s\n%s\n%s\n%u\n%u", c->conf ? c->conf : "", c->client ? c->client : "",
		     c->keyring ? c->keyring : "", c->osd_op_timeout_s, c->connect_timeout_s);
	if (n < 0) {
		snprintf(err, errlen, "out of memory");
		*rcp = -ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&clusters_lock);
	list_for_each(pos, &clusters)
	{
		cl = list_entry(pos, struct rbd_cluster, link);
		if (strcmp(cl->key, key) == 0) {
			cl->refs++;
			pthread_mutex_unlock(&clusters_lock);
			free(key);
			return cl;
		}
	}
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		pthread_mutex_unlock(&clusters_lock);
		free(key);
		snprintf(err, errlen, "out of memory");
		*rcp = -ENOMEM;
		return NULL;
	}
	/* Connecting under the lock: opens happen at start and reload, one at a time anyway,
	 * and two LUs of one cluster must not make two handles. */
	*rcp = cluster_connect(c, &cl->rados, err, errlen);
	if (*rcp < 0) {
		pthread_mutex_unlock(&clusters_lock);
		free(key);
		free(cl);
		return NULL;
	}
	cl->key = key;
	cl->refs = 1;
	list_add_tail(&cl->link, &clusters);
	pthread_mutex_unlock(&clusters_lock);
	return cl;
}

void bs_rbd_cluster_put(struct rbd_cluster *cl)
{
	pthread_mutex_lock(&clusters_lock);
	if (--cl->refs > 0) {
		pthread_mutex_unlock(&clusters_lock);
		return;
	}
	list_del(&cl->link);
	pthread_mutex_unlock(&clusters_lock);
	if (cl->abandoned) { /* librbd still holds requests on it: leave it to the exit */
		free(cl->key);
		free(cl);
		return;
	}
	rados_shutdown(cl->rados);
	free(cl->key);
	free(cl);
}

void bs_rbd_cluster_abandon(struct rbd_cluster *cl)
{
	pthread_mutex_lock(&clusters_lock);
	cl->abandoned = true;
	pthread_mutex_unlock(&clusters_lock);
	bs_rbd_cluster_put(cl);
}

/* ---- the opener thread: images that start offline, opened again with back-off ---- */

/* rbd.start_offline: an image that cannot be opened at start (the cluster does not answer,
 * the pool or image does not exist) leaves its LU offline (NOT READY 04/03) and is tried
 * again on this thread, RBD_RETRY_MIN_MS after the first failure, doubling to
 * RBD_RETRY_MAX_MS; bs_rbd_retry() (ix-ctl lun online) tries at once. A thread apart from the
 * helper: a connection attempt blocks for connect_timeout_s, and GET LBA STATUS or a lock
 * must not wait behind it. */
#define RBD_RETRY_MIN_MS  1000u
#define RBD_RETRY_MAX_MS  60000u
#define RBD_START_WAIT_MS 2000u /* how long the open at start waits for the first attempt */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work; /* the thread: something queued or due */
	pthread_cond_t done; /* an attempt ended */
	bool started;
	uint64_t busy_since; /* when the running attempt began; 0 = none */
	struct list_head list;
} opener = {.lock = PTHREAD_MUTEX_INITIALIZER, .list = LIST_HEAD_INIT(opener.list)};

static void timedwait_ms(pthread_cond_t *cv, uint64_t until)
{
	struct timespec ts = {.tv_sec = (time_t)(until / 1000u),
			      .tv_nsec = (long)(until % 1000u) * 1000000L};

	pthread_cond_timedwait(cv, &opener.lock, &ts);
}

/* Under opener.lock: the queued entry due first. */
static struct rbd_retry *opener_first(void)
{
	struct rbd_retry *best = NULL;
	struct list_head *pos;

	list_for_each(pos, &opener.list)
	{
		struct rbd_retry *r = list_entry(pos, struct rbd_retry, link);

		if (!best || r->next_ms < best->next_ms)
			best = r;
	}
	return best;
}

/* Under opener.lock: an attempt failed with err; queue the next one. */
static void retry_failed(struct rbd_retry *r, const char *err)
{
	struct rbd_priv *p = r->dev->priv;

	if (strcmp(r->why, err) != 0)
		log_warn("rbd", "%s: offline: %s (tried %u times, retrying in the background)",
			 p->name, err, r->attempts);
	snprintf(r->why, sizeof(r->why), "%s", err);
	if (r->kick) {
		r->backoff_ms = RBD_RETRY_MIN_MS;
		r->next_ms = bs_rbd_now_ms();
	} else {
		r->next_ms = bs_rbd_now_ms() + r->backoff_ms;
		r->backoff_ms = r->backoff_ms * 2 > RBD_RETRY_MAX_MS ? RBD_RETRY_MAX_MS
								     : r->backoff_ms * 2;
	}
	r->kick = false;
	list_add_tail(&r->link, &opener.list);
	r->queued = true;
}

/* Under opener.lock, which it drops around the attempt and the ready callback. */
static void opener_run(struct rbd_retry *r)
{
	struct rbd_priv *p = r->dev->priv;
	char err[256];
	bs_ready_cb cb;
	int rc;

	list_del(&r->link);
	r->queued = false;
	r->running = true;
	opener.busy_since = bs_rbd_now_ms();
	pthread_mutex_unlock(&opener.lock);
	rc = bs_rbd_attach(r->dev, err, sizeof(err));
	pthread_mutex_lock(&opener.lock);
	r->attempts++;
	if (rc < 0) {
		retry_failed(r, err);
	} else {
		atomic_store_explicit(&p->online, true, memory_order_release);
		r->why[0] = 0;
		cb = r->cb;
		pthread_mutex_unlock(&opener.lock);
		log_info("rbd", "%s: online after %u attempts", p->name, r->attempts);
		if (cb) /* still running: the device cannot close under it */
			cb(r->dev, r->cb_arg);
		pthread_mutex_lock(&opener.lock);
	}
	r->running = false;
	opener.busy_since = 0;
	pthread_cond_broadcast(&opener.done);
}

static void *opener_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&opener.lock);
	for (;;) {
		struct rbd_retry *r = opener_first();

		if (!r)
			pthread_cond_wait(&opener.work, &opener.lock);
		else if (r->next_ms > bs_rbd_now_ms())
			timedwait_ms(&opener.work, r->next_ms);
		else
			opener_run(r);
	}
	return NULL;
}

/* Under opener.lock. Detached, every signal blocked; its conditions on the monotonic clock. */
static int opener_start(void)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t th;
	int rc;

	if (opener.started)
		return 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&opener.work, &ca);
	pthread_cond_init(&opener.done, &ca);
	pthread_condattr_destroy(&ca);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, opener_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_cond_destroy(&opener.work);
		pthread_cond_destroy(&opener.done);
		return -rc;
	}
	pthread_setname_np(th, "ix-rbd-opener");
	opener.started = true;
	return 0;
}

/* Under opener.lock: wait for the first attempt, at most RBD_START_WAIT_MS, and not at all
 * while another image's attempt has been stuck that long (a cluster that does not answer must
 * not add connect_timeout_s per LU to the start). */
static void start_wait(struct rbd_retry *r)
{
	uint64_t deadline = bs_rbd_now_ms() + RBD_START_WAIT_MS;

	while (r->attempts == 0 || r->running) {
		uint64_t now = bs_rbd_now_ms(), until = deadline;

		if (now >= deadline)
			return;
		if (!r->running && opener.busy_since) {
			if (now - opener.busy_since >= RBD_START_WAIT_MS)
				return;
			if (opener.busy_since + RBD_START_WAIT_MS < until)
				until = opener.busy_since + RBD_START_WAIT_MS;
		}
		timedwait_ms(&opener.done, until);
	}
}

/* rbd.start_offline: the first attempt on the opener thread; the LU serves from the start
 * (offline until the image opens). */
int bs_rbd_open_background(struct bs_dev *dev, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	struct rbd_retry *r = &p->r;
	bool online;
	int rc;

	r->dev = dev;
	r->backoff_ms = RBD_RETRY_MIN_MS;
	snprintf(r->why, sizeof(r->why), "opening");
	pthread_mutex_lock(&opener.lock);
	rc = opener_start();
	if (rc < 0) {
		pthread_mutex_unlock(&opener.lock);
		snprintf(err, errlen, "rbd %s: cannot start the opener thread: %s", p->name,
			 strerror(-rc));
		return rc;
	}
	p->background = true;
	list_add_tail(&r->link, &opener.list);
	r->queued = true;
	pthread_cond_signal(&opener.work);
	start_wait(r);
	online = atomic_load_explicit(&p->online, memory_order_acquire);
	if (!online && !r->attempts)
		snprintf(r->why, sizeof(r->why), "%s",
			 r->running ? "opening: no answer yet from the cluster"
				    : "opening: waiting for another image's attempt");
	if (!online)
		log_warn("rbd", "%s: starts offline: %s", p->name, r->why);
	pthread_mutex_unlock(&opener.lock);
	/* the LU reads it once, at its creation: the real object size, else RBD's default */
	dev->unmap_granularity = online && p->obj_size <= UINT32_MAX ? (uint32_t)p->obj_size
								    : 4u << 20;
	return 0;
}

int bs_rbd_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg)
{
	struct rbd_priv *p = dev->priv;
	int rc = 0;

	if (!p->background)
		return 0;
	pthread_mutex_lock(&opener.lock);
	if (!atomic_load(&p->online)) {
		p->r.cb = cb;
		p->r.cb_arg = arg;
		rc = 1;
	}
	pthread_mutex_unlock(&opener.lock);
	return rc;
}

int bs_rbd_status(struct bs_dev *dev, struct bs_rbd_status *st)
{
	struct rbd_priv *p = dev->ops == &bs_rbd_ops ? dev->priv : NULL;
	uint64_t now = bs_rbd_now_ms();

	if (!p)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->online = atomic_load(&p->online);
	if (!p->background) {
		st->attempts = 1;
		return 0;
	}
	pthread_mutex_lock(&opener.lock);
	st->online = atomic_load(&p->online);
	st->attempts = p->r.attempts;
	if (!st->online && p->r.queued && p->r.next_ms > now)
		st->next_s = (unsigned)((p->r.next_ms - now + 999) / 1000);
	if (!st->online)
		snprintf(st->reason, sizeof(st->reason), "%s", p->r.why);
	pthread_mutex_unlock(&opener.lock);
	return 0;
}

int bs_rbd_retry(struct bs_dev *dev)
{
	struct rbd_priv *p = dev->ops == &bs_rbd_ops ? dev->priv : NULL;

	if (!p)
		return -EINVAL;
	if (!p->background)
		return 0;
	pthread_mutex_lock(&opener.lock);
	if (p->r.running) {
		p->r.kick = true;
	} else if (p->r.queued) {
		p->r.next_ms = 0;
		p->r.backoff_ms = RBD_RETRY_MIN_MS;
		pthread_cond_signal(&opener.work);
	}
	pthread_mutex_unlock(&opener.lock);
	return 0;
}

/* Off the opener's list, and out of a running attempt (bounded by connect_timeout_s). */
void bs_rbd_open_stop(struct rbd_priv *p)
{
	if (!p->background)
		return;
	pthread_mutex_lock(&opener.lock);
	if (p->r.queued)
		list_del(&p->r.link);
	p->r.queued = false;
	while (p->r.running)
		pthread_cond_wait(&opener.done, &opener.lock);
	pthread_mutex_unlock(&opener.lock);
}
