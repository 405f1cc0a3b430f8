/* RBD backend: a Ceph RBD image through librbd's asynchronous API.
 *
 * Cluster handles: one rados_t per distinct (ceph.conf, client, keyring, timeouts) in the
 * process, shared by every LU that names the same cluster the same way, reference-counted
 * under a mutex (taken at open and close only). Each LU opens its image once; librbd's image
 * handle is thread-safe, so every worker submits on it directly.
 *
 * I/O: rbd_aio_read/write/writesame/write_zeroes/discard/flush with a completion whose
 * callback runs on one of librbd's threads. The callback stores the result in the bs_io and
 * pushes it on a lock-free list of the thread that submitted it (each worker's bs_thread
 * carries one, created the first time this backend sees the thread); a push onto an empty list
 * writes that thread's eventfd, which its event loop watches, and the loop completes the I/O
 * there. No blocking call on a worker on this path, no thread of our own, no lock. Without a
 * bs_thread (synchronous callers) the submitter waits for the completion itself.
 *
 * Durability: librbd's cache is turned off for our handles (rbd_cache = false), so librbd
 * completes a write only once the OSDs have committed it; FUA needs nothing more, and
 * SYNCHRONIZE CACHE is an rbd_aio_flush (cheap without a cache, kept for its ordering).
 *
 * Thin provisioning: RBD images are sparse (an object exists once written). A discard frees
 * whole objects and zeroes partial ones (rbd_skip_partial_discard = false), so deallocated
 * blocks always read back as zeros (LBPRZ); the object size is the optimal unmap granularity.
 * GET LBA STATUS (BS_OP_LBA_STATUS) asks rbd_diff_iterate2 which extents exist over
 * RBD_LBAS_SPAN bytes; librbd has no asynchronous form of it, so it runs on the helper thread
 * (below) and the answer comes back through the worker's eventfd like any completion.
 *
 * Fencing (rbd.exclusive_lock): librbd's managed exclusive lock, in bs_rbd_own.c; this file
 * asks it about each I/O result (rbd_own_io_result) and refuses I/O once fenced.
 *
 * Timeouts: rados_osd_op_timeout and rados_mon_op_timeout (osd_op_timeout_s) make a cluster
 * that stops answering fail each request with -ETIMEDOUT instead of holding it forever;
 * client_mount_timeout (connect_timeout_s) bounds each connection attempt.
 *
 * Starting offline (rbd.start_offline, the default): the open runs on the opener thread
 * (below); the start waits for it at most RBD_START_WAIT_MS. An image that cannot be opened
 * (the cluster does not answer, the pool or the image does not exist) leaves its LU serving
 * NOT READY, MANUAL INTERVENTION REQUIRED (04/03) with the reason in the management API, and
 * is tried again with back-off; once open, the LU learns its size (bs_ops.on_ready) and posts
 * its unit attentions. With start_offline false the open runs on the caller and a failure
 * fails the start, within connect_timeout_s. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "backend/bs_rbd_int.h"
#include "event/loop.h"
#include "util/list.h"
#include "util/log.h"

#define RBD_DEFAULT_OSD_TIMEOUT_S 30
#define RBD_DEFAULT_CONNECT_S	  10
#define RBD_LBAS_SPAN		  (256ull << 20) /* bytes one lba_status probe looks at */

/* ---- cluster handles, shared per process ---- */

struct rbd_cluster {
	struct list_head link;
	char *key; /* conf \n client \n keyring \n timeouts */
	rados_t rados;
	unsigned refs;
	bool abandoned; /* an image of it did not close: never rados_shutdown (it could hang) */
};

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

static struct rbd_cluster *cluster_get(const struct bs_rbd_cfg *c, char *err, size_t errlen,
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

static void cluster_put(struct rbd_cluster *cl)
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

/* ---- per-thread completion queue ---- */

static void log_io_error(struct bs_io *io);

struct rbd_thread {
	struct bs_thread_ext ext;
	struct ev_loop *loop;
	struct ev_io watch;
	int efd;
	unsigned inflight; /* submitted on this thread, not yet completed (loop thread only) */
	_Atomic(struct bs_io *) done; /* completed by librbd, not yet handed back (LIFO) */
	atomic_uint in_cb;	      /* librbd threads inside rbd_done() for this thread: rt must
					 outlive them, not only the I/O they hand back */
};

static void rt_complete(struct rbd_thread *rt)
{
	struct bs_io *list = atomic_exchange_explicit(&rt->done, NULL, memory_order_acquire);
	struct bs_io *fifo = NULL;

	while (list) { /* reverse: complete in the order librbd finished them */
		struct bs_io *next = list->bnext;

		list->bnext = fifo;
		fifo = list;
		list = next;
	}
	while (fifo) {
		struct bs_io *io = fifo;

		fifo = io->bnext;
		io->bnext = NULL;
		rt->inflight--;
		if (io->result < 0 && io->result != -EILSEQ && io->result != BS_ERR_NOT_OWNER)
			log_io_error(io); /* a miscompare is the command's answer, not an error;
					     a lost lock is logged once, when it is lost */
		io->cb(io);
	}
}

static void rt_efd_cb(struct ev_io *w, uint32_t revents)
{
	struct rbd_thread *rt = w->arg;
	uint64_t v;

	(void)revents;
	if (read(rt->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("rbd", "eventfd read: %s", strerror(errno));
	rt_complete(rt);
}

static unsigned rt_busy(const struct bs_thread_ext *ext)
{
	const struct rbd_thread *rt = (const struct rbd_thread *)ext;

	return rt->inflight;
}

/* On the owning thread, at its end: wait for this thread's I/O (librbd completes every
 * request, with -ETIMEDOUT at worst) and complete it, then go. */
static void rt_free(struct bs_thread_ext *ext)
{
	struct rbd_thread *rt = (struct rbd_thread *)ext;

	ev_io_stop(rt->loop, &rt->watch);
	while (rt->inflight > 0 || atomic_load_explicit(&rt->in_cb, memory_order_acquire)) {
		uint64_t v;

		if (!atomic_load_explicit(&rt->done, memory_order_acquire))
			usleep(1000);
		if (read(rt->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		rt_complete(rt);
	}
	close(rt->efd);
	free(rt);
}

static struct rbd_thread *rt_of(struct bs_thread *t)
{
	struct bs_thread_ext **slot = bs_thread_rbd_ext(t);
	struct rbd_thread *rt;

	if (*slot)
		return (struct rbd_thread *)*slot;
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return NULL;
	rt->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rt->efd < 0) {
		free(rt);
		return NULL;
	}
	rt->loop = bs_thread_loop(t);
	rt->ext.free = rt_free;
	rt->ext.busy = rt_busy;
	atomic_init(&rt->done, NULL);
	atomic_init(&rt->in_cb, 0);
	ev_io_init(&rt->watch, rt->efd, rt_efd_cb, rt);
	if (ev_io_start(rt->loop, &rt->watch, EPOLLIN) < 0) {
		close(rt->efd);
		free(rt);
		return NULL;
	}
	*slot = &rt->ext;
	return rt;
}

/* ---- the device ---- */

/* An image not open yet (rbd.start_offline): its place on the opener thread's list. Every
 * field under opener.lock. */
struct rbd_retry {
	struct list_head link; /* on opener.list while queued */
	struct bs_dev *dev;
	uint64_t next_ms; /* monotonic: the next attempt */
	unsigned backoff_ms;
	unsigned attempts;
	bool queued;  /* on the list */
	bool running; /* an attempt is running: close waits for it */
	bool kick;    /* a retry was asked for while one ran: go again at once if it fails */
	bs_ready_cb cb;
	void *cb_arg;
	char why[256]; /* why it is not open */
};

struct rbd_priv {
	struct rbd_cluster *cl;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	uint64_t obj_size;
	bool exclusive;	      /* rbd.exclusive_lock */
	struct rbd_owner *o;  /* with exclusive */
	unsigned close_ms; /* how long closing may take: the OSD timeout and some */
	_Atomic uint64_t last_err_s; /* when the last I/O error was logged (monotonic seconds) */
	atomic_uint quiet_errs;	     /* errors not logged since */
	char name[160];		     /* pool/[ns/]image, for messages */
	/* the open (rbd_attach), and with rbd.start_offline its retries in the background */
	struct bs_rbd_cfg c;	     /* copied at open (strings owned) */
	uint64_t cfg_size;	     /* the configured size, 0 = the image's */
	uint32_t cfg_block;
	bool readonly;
	bool background;	     /* started with start_offline: r is on the opener */
	atomic_bool online;	     /* the image is open: image, ioctx, cl, o are set */
	struct rbd_retry r;
};

static const char *const op_names[] = {"read",    "write", "write same",	   "write zeroes",
				       "discard", "flush", "compare and write", "lba status"};

/* One line per second at most per image: a cluster that stops answering fails every request,
 * and each would otherwise log. */
static void log_io_error(struct bs_io *io)
{
	struct rbd_priv *p = io->dev->priv;
	struct timespec ts;
	uint64_t now, last;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec;
	last = atomic_load_explicit(&p->last_err_s, memory_order_relaxed);
	if (last == now || !atomic_compare_exchange_strong(&p->last_err_s, &last, now)) {
		atomic_fetch_add_explicit(&p->quiet_errs, 1, memory_order_relaxed);
		return;
	}
	log_warn("rbd", "%s: %s of %llu bytes at %llu failed: %s%s (%u more errors not logged)",
		 p->name, io->op < 8 ? op_names[io->op] : "?", (unsigned long long)io->len,
		 (unsigned long long)io->offset, strerror(-io->result),
		 io->result == -ETIMEDOUT ? " (no answer from the cluster within osd_op_timeout_s)"
					  : "",
		 atomic_exchange_explicit(&p->quiet_errs, 0, memory_order_relaxed));
}

/* ---- the helper thread: librbd calls without an asynchronous form ---- */

/* rbd_diff_iterate2 (GET LBA STATUS), rbd_lock_acquire have no asynchronous form: they run on
 * one helper thread per process, started the first time it is needed, from a bounded queue
 * (a full queue fails the request with -EBUSY rather than waiting). Each is bounded by the
 * OSD/monitor timeouts of its cluster. A job that answers an I/O hands it back to the
 * submitting worker's loop through the worker's eventfd like librbd's completions. */
#define RBD_HELPER_QUEUE 64

struct rbd_job {
	void (*fn)(void *arg);
	void *arg;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started;
	unsigned head, n;
	struct rbd_job q[RBD_HELPER_QUEUE];
} helper = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *helper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&helper.lock);
	for (;;) {
		struct rbd_job j;

		while (helper.n == 0)
			pthread_cond_wait(&helper.cond, &helper.lock);
		j = helper.q[helper.head];
		helper.head = (helper.head + 1) % RBD_HELPER_QUEUE;
		helper.n--;
		pthread_mutex_unlock(&helper.lock);
		j.fn(j.arg);
		pthread_mutex_lock(&helper.lock);
	}
	return NULL;
}

/* Under helper.lock. Detached, every signal blocked (the daemon's loops take them). */
static int helper_start(void)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t th;
	int rc;

	if (helper.started)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, helper_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	pthread_setname_np(th, "ix-rbd-helper");
	helper.started = true;
	return 0;
}

int rbd_helper_post(void (*fn)(void *arg), void *arg)
{
	int rc;

	pthread_mutex_lock(&helper.lock);
	rc = helper_start();
	if (rc == 0 && helper.n == RBD_HELPER_QUEUE)
		rc = -EBUSY;
	if (rc == 0) {
		helper.q[(helper.head + helper.n) % RBD_HELPER_QUEUE] = (struct rbd_job){fn, arg};
		helper.n++;
		pthread_cond_signal(&helper.cond);
	}
	pthread_mutex_unlock(&helper.lock);
	return rc;
}

/* ---- opening the image ---- */

static void cfg_free(struct bs_rbd_cfg *c)
{
	free((char *)c->pool);
	free((char *)c->image);
	free((char *)c->ns);
	free((char *)c->conf);
	free((char *)c->client);
	free((char *)c->keyring);
}

static int cfg_dup(struct bs_rbd_cfg *d, const struct bs_rbd_cfg *s)
{
	const char *const src[] = {s->pool, s->image, s->ns, s->conf, s->client, s->keyring};
	const char **dst[] = {&d->pool, &d->image, &d->ns, &d->conf, &d->client, &d->keyring};

	*d = *s;
	for (size_t i = 0; i < 6; i++)
		*dst[i] = NULL;
	for (size_t i = 0; i < 6; i++)
		if (src[i] && !(*dst[i] = strdup(src[i]))) {
			cfg_free(d);
			return -ENOMEM;
		}
	return 0;
}

/* The image, its size and its lock: p->cl, ioctx, image, obj_size, o and dev->size. Blocking
 * (bounded by connect_timeout_s and the OSD timeout): at start with start_offline false, else
 * on the opener thread. -errno + message. */
static int rbd_attach(struct bs_dev *dev, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	const struct bs_rbd_cfg *c = &p->c;
	rbd_image_info_t info;
	int rc;

	p->cl = cluster_get(c, err, errlen, &rc);
	if (!p->cl)
		return rc;
	rc = rados_ioctx_create(p->cl->rados, c->pool, &p->ioctx);
	if (rc < 0) {
		snprintf(err, errlen, rc == -ENOENT ? "pool %s not found (%s)" : "rbd pool %s: %s",
			 c->pool, strerror(-rc));
		goto fail_cluster;
	}
	if (c->ns)
		rados_ioctx_set_namespace(p->ioctx, c->ns);
	rc = p->readonly ? rbd_open_read_only(p->ioctx, c->image, &p->image, NULL)
			 : rbd_open(p->ioctx, c->image, &p->image, NULL);
	if (rc < 0) {
		snprintf(err, errlen, rc == -ENOENT ? "image %s not found (%s)"
						    : "rbd %s: cannot open the image: %s",
			 p->name, strerror(-rc));
		goto fail_ioctx;
	}
	rc = rbd_stat(p->image, &info, sizeof(info));
	if (rc < 0) {
		snprintf(err, errlen, "rbd %s: rbd_stat: %s", p->name, strerror(-rc));
		goto fail_image;
	}
	if (p->cfg_size && p->cfg_size != info.size) {
		snprintf(err, errlen, "rbd %s: the image has %llu bytes, the configuration says %llu",
			 p->name, (unsigned long long)info.size, (unsigned long long)p->cfg_size);
		rc = -EINVAL;
		goto fail_image;
	}
	if (info.size < p->cfg_block) {
		snprintf(err, errlen, "rbd %s: the image is smaller than one block", p->name);
		rc = -EINVAL;
		goto fail_image;
	}
	p->obj_size = info.obj_size;
	if (p->o && (rc = rbd_own_attach(p->o, p->image, p->ioctx)) < 0) {
		snprintf(err, errlen, "rbd %s: cannot start the lock helper: %s", p->name,
			 strerror(-rc));
		goto fail_image;
	}
	dev->size = info.size - info.size % p->cfg_block;
	log_info("rbd", "%s: %llu bytes, %llu-byte objects%s", p->name,
		 (unsigned long long)info.size, (unsigned long long)info.obj_size,
		 p->exclusive ? ", managed exclusive lock" : "");
	return 0;
fail_image:
	rbd_close(p->image);
fail_ioctx:
	rados_ioctx_destroy(p->ioctx);
fail_cluster:
	cluster_put(p->cl);
	p->cl = NULL;
	return rc;
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

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

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
		r->next_ms = now_ms();
	} else {
		r->next_ms = now_ms() + r->backoff_ms;
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
	opener.busy_since = now_ms();
	pthread_mutex_unlock(&opener.lock);
	rc = rbd_attach(r->dev, err, sizeof(err));
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
		else if (r->next_ms > now_ms())
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
	uint64_t deadline = now_ms() + RBD_START_WAIT_MS;

	while (r->attempts == 0 || r->running) {
		uint64_t now = now_ms(), until = deadline;

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
static int open_background(struct bs_dev *dev, char *err, size_t errlen)
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

static int rbd_dev_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err,
			size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	const struct bs_rbd_cfg *c = cfg->rbd;
	int rc;

	if (!c || !c->pool || !c->image) {
		snprintf(err, errlen, "rbd backend needs a pool and an image");
		return -EINVAL;
	}
	snprintf(p->name, sizeof(p->name), "%s/%s%s%s", c->pool, c->ns ? c->ns : "",
		 c->ns ? "/" : "", c->image);
	if (cfg_dup(&p->c, c) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->cfg_size = cfg->size_bytes;
	p->cfg_block = cfg->block_size;
	p->readonly = cfg->readonly;
	p->exclusive = c->exclusive_lock && !cfg->readonly;
	if (p->exclusive && (rc = rbd_own_new(&p->o, p->name, c, cfg->owner_group)) < 0) {
		snprintf(err, errlen, "out of memory");
		cfg_free(&p->c);
		return rc;
	}
	p->close_ms = ((c->osd_op_timeout_s ? c->osd_op_timeout_s : RBD_DEFAULT_OSD_TIMEOUT_S) + 5) *
		      1000u;
	atomic_init(&p->online, false);
	rc = c->start_offline ? open_background(dev, err, errlen) : rbd_attach(dev, err, errlen);
	if (rc < 0) {
		rbd_own_put(p->o);
		cfg_free(&p->c);
		return rc;
	}
	if (!c->start_offline) {
		atomic_store(&p->online, true);
		dev->unmap_granularity = p->obj_size <= UINT32_MAX ? (uint32_t)p->obj_size : 0;
	}
	return 0;
}

static int rbd_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg)
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
	uint64_t now = now_ms();

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
static void background_stop(struct rbd_priv *p)
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

/* Closing releases the image's exclusive lock and its watch: requests to the cluster, and a
 * watch has no OSD timeout. A cluster that does not answer must not hang ix-target's exit or
 * a reload, so the close is asynchronous and waited for at most close_ms; after that the image
 * and its cluster connection are abandoned (left to the process's exit) with a warning. */
/* The cluster does not answer while closing: leave its connection (and the image) to
 * librados, which may still call into it, rather than wait for ever. */
static void abandon(struct rbd_priv *p)
{
	pthread_mutex_lock(&clusters_lock);
	p->cl->abandoned = true;
	pthread_mutex_unlock(&clusters_lock);
	cluster_put(p->cl);
}

static void image_close(struct rbd_priv *p)
{
	uint64_t end = now_ms() + p->close_ms; /* the clock, not a count of sleeps: a loaded
						  machine oversleeps */
	rbd_completion_t c;
	int rc;

	if (p->o && !rbd_own_detach(p->o, p->close_ms)) { /* a lock call: bounded by the
							      cluster's timeouts */
		log_warn("rbd",
			 "%s: a lock call did not end within %u s: the image is "
			 "abandoned",
			 p->name, p->close_ms / 1000);
		abandon(p);
		return;
	}
	end = now_ms() + p->close_ms;
	if (rbd_aio_create_completion(NULL, NULL, &c) < 0) {
		rc = rbd_close(p->image);
	} else if ((rc = rbd_aio_close(p->image, c)) < 0) {
		rbd_aio_release(c);
	} else {
		while (!rbd_aio_is_complete(c) && now_ms() < end)
			usleep(10000);
		if (!rbd_aio_is_complete(c)) {
			log_warn("rbd", "%s: the image did not close within %u s (the cluster does not "
				 "answer): its connection is abandoned", p->name, p->close_ms / 1000);
			abandon(p);
			return;
		}
		rc = (int)rbd_aio_get_return_value(c);
		rbd_aio_release(c);
	}
	if (rc < 0)
		log_warn("rbd", "%s: rbd_close: %s", p->name, strerror(-rc));
	rados_ioctx_destroy(p->ioctx);
	cluster_put(p->cl);
}

static void rbd_dev_close(struct bs_dev *dev)
{
	struct rbd_priv *p = dev->priv;

	background_stop(p);
	if (atomic_load_explicit(&p->online, memory_order_acquire))
		image_close(p);
	rbd_own_put(p->o);
	cfg_free(&p->c);
}

/* Any thread: hand a finished I/O to its submitter's loop. */
static void rt_push(struct rbd_thread *rt, struct bs_io *io)
{
	struct bs_io *head;

	/* Counted before the push: once the I/O is on the list its thread may complete it and,
	 * at shutdown, free rt (rt_free waits for in_cb to drop as well). */
	atomic_fetch_add_explicit(&rt->in_cb, 1, memory_order_relaxed);
	head = atomic_load_explicit(&rt->done, memory_order_relaxed);
	do
		io->bnext = head;
	while (!atomic_compare_exchange_weak_explicit(&rt->done, &head, io, memory_order_release,
						      memory_order_relaxed));
	if (!head) {
		uint64_t one = 1;

		if (write(rt->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("rbd", "eventfd write: %s", strerror(errno));
	}
	atomic_fetch_sub_explicit(&rt->in_cb, 1, memory_order_release);
}

/* librbd's thread: the request's result, then back to its submitter's loop. */
static void rbd_done(rbd_completion_t c, void *arg)
{
	struct bs_io *io = arg;
	ssize_t r = rbd_aio_get_return_value(c);

	rbd_aio_release(c);
	io->result = rbd_own_io_result(((struct rbd_priv *)io->dev->priv)->o, r < 0 ? (int)r : 0);
	rt_push(io->bpriv, io);
}

/* BS_OP_LBA_STATUS: rbd_diff_iterate2 (whole objects) over RBD_LBAS_SPAN bytes from
 * io->offset; the extents it reports as existing are mapped, the gaps deallocated. */
struct lbas_walk {
	struct bs_extent *e;
	size_t n, max;
	uint64_t at, end; /* where the list has reached; the window's end */
};

static bool lbas_add(struct lbas_walk *w, uint64_t len, bool mapped)
{
	if (w->n > 0 && !w->e[w->n - 1].mapped == !mapped) {
		w->e[w->n - 1].len += len;
	} else if (w->n < w->max) {
		w->e[w->n].len = len;
		w->e[w->n++].mapped = mapped;
	} else {
		return false;
	}
	w->at += len;
	return true;
}

static int lbas_cb(uint64_t off, size_t len, int exists, void *arg)
{
	struct lbas_walk *w = arg;
	uint64_t e = off + len > w->end ? w->end : off + len;

	if (!exists || e <= w->at)
		return 0;
	if (off < w->at)
		off = w->at;
	if (off > w->at && !lbas_add(w, off - w->at, false))
		return -ECANCELED;
	return lbas_add(w, e - off, true) ? 0 : -ECANCELED;
}

static int lbas_run(struct bs_io *io)
{
	struct rbd_priv *p = io->dev->priv;
	uint64_t size = io->dev->size, len;
	struct lbas_walk w = {.e = (struct bs_extent *)(void *)io->buf,
			      .max = io->len / sizeof(struct bs_extent),
			      .at = io->offset};
	int rc;

	if (io->offset >= size || w.max == 0)
		return -EINVAL;
	len = size - io->offset > RBD_LBAS_SPAN ? RBD_LBAS_SPAN : size - io->offset;
	w.end = io->offset + len;
	memset(io->buf, 0, w.max * sizeof(struct bs_extent));
	rc = rbd_diff_iterate2(p->image, NULL, io->offset, len, 1, 1, lbas_cb, &w);
	if (rc < 0 && rc != -ECANCELED)
		return rc;
	if (w.at < w.end)
		lbas_add(&w, w.end - w.at, false);
	return 0;
}

/* The helper thread: the query, then the I/O back to its worker (or, without one, done). */
static void lbas_job(void *arg)
{
	struct bs_io *io = arg;

	io->result = rbd_own_io_result(((struct rbd_priv *)io->dev->priv)->o, lbas_run(io));
	rt_push(io->bpriv, io);
}

static void lbas_submit(struct bs_io *io, struct rbd_thread *rt)
{
	int rc;

	if (!rt) { /* a synchronous caller: it waits anyway */
		io->result = lbas_run(io);
		io->cb(io);
		return;
	}
	io->bpriv = rt;
	rt->inflight++;
	rc = rbd_helper_post(lbas_job, io);
	if (rc < 0) {
		rt->inflight--;
		io->result = rc;
		io->cb(io);
	}
}

static int rbd_start(struct rbd_priv *p, struct bs_io *io, rbd_completion_t c)
{
	switch (io->op) {
	case BS_OP_READ:
		return rbd_aio_read(p->image, io->offset, (size_t)io->len, (char *)io->buf, c);
	case BS_OP_WRITE:
		return rbd_aio_write(p->image, io->offset, (size_t)io->len, (const char *)io->buf,
				     c);
	case BS_OP_WRITE_SAME:
		if (io->pattern_len == 0 || io->len % io->pattern_len)
			return -EINVAL;
		return rbd_aio_writesame(p->image, io->offset, (size_t)io->len,
					 (const char *)io->buf, io->pattern_len, c, 0);
	case BS_OP_WRITE_ZEROES:
		/* allocating zeros (a fully provisioned LU's WRITE SAME of zeros) */
		return rbd_aio_write_zeroes(p->image, io->offset, (size_t)io->len, c,
					    RBD_WRITE_ZEROES_FLAG_THICK_PROVISION, 0);
	case BS_OP_DISCARD:
		return rbd_aio_discard(p->image, io->offset, io->len, c);
	case BS_OP_FLUSH:
		return rbd_aio_flush(p->image, c);
	case BS_OP_COMPARE_WRITE: {
		/* librbd compares and writes on the OSD in one object operation (cmpext +
		 * write); a mismatch completes with -EILSEQ and the offset in io->mismatch */
		ssize_t r = rbd_aio_compare_and_write(p->image, io->offset, (size_t)io->len,
						      (const char *)io->buf,
						      (const char *)io->buf + io->len, c,
						      &io->mismatch, 0);
		return r < 0 ? (int)r : 0;
	}
	}
	return -EINVAL;
}

static void rbd_submit(struct bs_dev *dev, struct bs_thread *t, struct bs_io *io)
{
	struct rbd_priv *p = dev->priv;
	struct rbd_thread *rt = NULL;
	rbd_completion_t c;
	int rc;

	if (!atomic_load_explicit(&p->online, memory_order_acquire)) {
		io->result = BS_ERR_NOT_READY; /* started offline, not open yet */
		io->cb(io);
		return;
	}
	if (rbd_own_io(p->o)) {
		io->result = BS_ERR_NOT_OWNER; /* blocklisted: librbd would refuse it anyway */
		io->cb(io);
		return;
	}
	if (io->op == BS_OP_LBA_STATUS) {
		lbas_submit(io, t ? rt_of(t) : NULL);
		return;
	}
	if (io->op != BS_OP_FLUSH &&
	    (io->offset > dev->size || io->len > dev->size - io->offset)) {
		io->result = -EINVAL;
		io->cb(io);
		return;
	}
	if (io->op != BS_OP_FLUSH && io->len == 0) {
		io->result = 0;
		io->cb(io);
		return;
	}
	if (t)
		rt = rt_of(t); /* NULL only without memory: then wait here */
	if (rt) {
		io->bpriv = rt;
		rc = rbd_aio_create_completion(io, rbd_done, &c);
	} else {
		rc = rbd_aio_create_completion(NULL, NULL, &c);
	}
	if (rc < 0) {
		io->result = rc;
		io->cb(io);
		return;
	}
	if (rt)
		rt->inflight++;
	rc = rbd_start(p, io, c);
	if (rc < 0) { /* not started: no callback will come */
		rbd_aio_release(c);
		if (rt)
			rt->inflight--;
		io->result = rc;
		io->cb(io);
		return;
	}
	if (rt)
		return;
	rbd_aio_wait_for_complete(c);
	rc = (int)rbd_aio_get_return_value(c);
	rbd_aio_release(c);
	io->result = rbd_own_io_result(p->o, rc < 0 ? rc : 0);
	if (io->result < 0 && io->result != -EILSEQ && io->result != BS_ERR_NOT_OWNER)
		log_io_error(io);
	io->cb(io);
}

/* librbd 16 compares and writes one 512-byte sector at most (ImageCompareAndWriteRequest
 * refuses anything crossing a sector, an object or a stripe unit with -EINVAL): a one-block
 * COMPARE AND WRITE on a 512-byte LU, which is what VMware's ATS sends. Larger ones are read,
 * compared and written under the target's range guard instead. */
static bool rbd_compare_write_ok(struct bs_dev *dev, uint64_t offset, uint64_t len)
{
	(void)dev;
	return len > 0 && offset % 512 + len <= 512;
}

bool rbd_dev_own(const struct bs_dev *dev, struct rbd_dev_own *out)
{
	const struct rbd_priv *p = dev && dev->ops == &bs_rbd_ops ? dev->priv : NULL;

	if (!p)
		return false;
	out->online = atomic_load_explicit(&p->online, memory_order_acquire);
	out->o = p->o;
	out->name = p->name;
	out->exclusive_cfg = p->c.exclusive_lock;
	return true;
}

void *bs_rbd_rados(const struct bs_dev *dev)
{
	const struct rbd_priv *p = dev->priv;

	return dev->ops == &bs_rbd_ops ? p->cl->rados : NULL;
}

const struct bs_ops bs_rbd_ops = {
    .name = "rbd",
    .type = BS_TYPE_RBD,
    .priv_size = sizeof(struct rbd_priv),
    .caps = BS_CAP_DISCARD | BS_CAP_DISCARD_ZEROES | BS_CAP_ASYNC | BS_CAP_LBA_STATUS |
	    BS_CAP_LBA_ASYNC | BS_CAP_COMPARE_WRITE,
    .open = rbd_dev_open,
    .close = rbd_dev_close,
    .submit = rbd_submit,
    .compare_write_ok = rbd_compare_write_ok,
    .on_ready = rbd_on_ready,
};
