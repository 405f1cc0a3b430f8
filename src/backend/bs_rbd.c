/* RBD backend: a Ceph RBD image through librbd's asynchronous API.
 *
 * Cluster handles (shared per context, struct bs_rbd_ctx) and the opener thread:
 * bs_rbd_conn.c. Each LU opens its image once; librbd's image handle is thread-safe, so every
 * worker submits on it directly.
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
 * Fencing (rbd.exclusive_lock): librbd's managed exclusive lock, in ha_own.c (its state,
 * the image's ownership thread) and ha_handover.c (hand-over between gateways). This file
 * creates the ownership at open (rbd_own_new), starts it on each image it opens
 * (rbd_own_attach: at the first open, and on the new image of a rejoin), stops it before the
 * image closes (rbd_own_detach), asks it before each I/O (rbd_own_io: refused while fenced)
 * and about each result (rbd_own_io_result: EROFS or ESHUTDOWN become BS_ERR_NOT_OWNER).
 *
 * Fenced without the lock too: a blocklisted connection (ESHUTDOWN from any image on it or
 * from the PR store) fences every device on it (bs_rbd_conn.c). Requests pass a gate (io_enter,
 * io_leave) so that a rejoin replaces the image only once nothing is in flight on it.
 *
 * Timeouts: rados_osd_op_timeout and rados_mon_op_timeout (osd_op_timeout_s) make a cluster
 * that stops answering fail each request with -ETIMEDOUT instead of holding it forever;
 * client_mount_timeout (connect_timeout_s) bounds each connection attempt.
 *
 * Starting offline (rbd.start_offline, the default): the open runs on the opener thread
 * (bs_rbd_conn.c); the start waits for it at most RBD_START_WAIT_MS. An image that cannot be opened
 * (the cluster does not answer, the pool or the image does not exist) leaves its LU serving
 * NOT READY, MANUAL INTERVENTION REQUIRED (04/03) with the reason in the management API, and
 * is tried again with back-off; once open, the LU learns its size (bs_ops.on_ready) and posts
 * its unit attentions. With start_offline false the open runs on the caller and a failure
 * fails the start, within connect_timeout_s. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "backend/bs.h"
#include "backend/bs_rbd.h"
#include "backend/bs_rbd_int.h"
#include "event/loop.h"
#include "util/list.h"
#include "util/log.h"

#define RBD_LBAS_SPAN		  (256ull << 20) /* bytes one lba_status probe looks at */

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

/* rbd_diff_iterate2 (GET LBA STATUS) has no asynchronous form: it runs on one helper thread
 * per context (struct bs_rbd_ctx), started the first time it is needed and stopped with the
 * context's last device, from a bounded queue (a full queue fails
 * the request with -EBUSY rather than waiting), bounded by the OSD timeout of its cluster. The
 * answer goes back to the submitting worker's loop through the worker's eventfd like
 * librbd's completions. (Lock calls run on each image's ownership thread, ha_own.c.) */

static void *helper_main(void *arg)
{
	struct bs_rbd_ctx *bx = arg;

	pthread_mutex_lock(&bx->helper.lock);
	for (;;) {
		struct rbd_job j;

		while (bx->helper.n == 0 && !bx->helper.stop)
			pthread_cond_wait(&bx->helper.cond, &bx->helper.lock);
		if (bx->helper.n == 0) /* stop: the context's last device closed */
			break;
		j = bx->helper.q[bx->helper.head];
		bx->helper.head = (bx->helper.head + 1) % RBD_HELPER_QUEUE;
		bx->helper.n--;
		pthread_mutex_unlock(&bx->helper.lock);
		j.fn(j.arg);
		pthread_mutex_lock(&bx->helper.lock);
	}
	pthread_mutex_unlock(&bx->helper.lock);
	bs_rbd_ctx_thread_end(bx);
	return NULL;
}

/* Under bx->helper.lock. Detached, every signal blocked (the daemon's loops take them). */
static int helper_start(struct bs_rbd_ctx *bx)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t th;
	int rc;

	if (bx->helper.started)
		return 0;
	bs_rbd_ctx_thread_start(bx);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, helper_main, bx);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		bs_rbd_ctx_thread_end(bx); /* a device holds bx: never the last */
		return -rc;
	}
	pthread_setname_np(th, "ix-rbd-helper");
	bx->helper.started = true;
	return 0;
}

/* Queue a job; -EBUSY when more than room jobs are queued (background work leaves half of
 * the queue to the commands). */
static int helper_post_room(struct bs_rbd_ctx *bx, void (*fn)(void *arg), void *arg,
			    unsigned room)
{
	int rc;

	pthread_mutex_lock(&bx->helper.lock);
	rc = helper_start(bx);
	if (rc == 0 && bx->helper.n >= room)
		rc = -EBUSY;
	if (rc == 0) {
		bx->helper.q[(bx->helper.head + bx->helper.n) % RBD_HELPER_QUEUE] =
		    (struct rbd_job){fn, arg};
		bx->helper.n++;
		pthread_cond_signal(&bx->helper.cond);
	}
	pthread_mutex_unlock(&bx->helper.lock);
	return rc;
}

static int helper_post(struct bs_rbd_ctx *bx, void (*fn)(void *arg), void *arg)
{
	return helper_post_room(bx, fn, arg, RBD_HELPER_QUEUE);
}

int bs_rbd_helper_post(struct bs_rbd_ctx *bx, void (*fn)(void *arg), void *arg)
{
	return helper_post_room(bx, fn, arg, RBD_HELPER_QUEUE / 2); /* leave room to commands */
}

/* ---- the image's size: grown through the API, or by anyone (librbd's update watch) ----
 *
 * Every gateway of an image keeps an update watch on it: librbd calls rbd_watch_cb on one of
 * its threads after the image's header changed (a resize through any client: `rbd resize`,
 * another gateway, this one). The size is asked there (Ceph's own rbd-nbd does the same from
 * its watch callback), published in dev->size with one atomic store, and the LU, told through
 * resize_cb, moves its capacity (one atomic store, read by the data path with a plain load)
 * and posts CAPACITY DATA HAS CHANGED. A shrink by someone else is followed too (the blocks
 * past the new end are gone whatever the LU says), with a warning. */

static bool io_enter(struct rbd_priv *p);
static void io_leave(struct rbd_priv *p);

static void rbd_size_check(struct bs_dev *dev)
{
	struct rbd_priv *p = dev->priv;
	uint64_t size, was;
	bs_ready_cb cb;
	int rc = rbd_get_size(p->image, &size);

	if (rc < 0) {
		if (rc != -ESHUTDOWN) /* blocklisted: the fencing says so */
			log_warn("rbd", "%s: the image changed, and its size cannot be read: %s",
				 p->name, strerror(-rc));
		return;
	}
	size -= size % p->cfg_block;
	if (size < p->cfg_block) {
		log_warn("rbd", "%s: the image shrank below one block: the LU keeps its capacity",
			 p->name);
		return;
	}
	was = atomic_exchange(&dev->size, size);
	if (size == was)
		return;
	if (size < was)
		log_warn("rbd", "%s: the image shrank from %llu to %llu bytes (by another client): "
			 "the LU's capacity follows, the blocks past the new end are gone",
			 p->name, (unsigned long long)was, (unsigned long long)size);
	else
		log_info("rbd", "%s: the image grew from %llu to %llu bytes", p->name,
			 (unsigned long long)was, (unsigned long long)size);
	cb = atomic_load_explicit(&p->resize_cb, memory_order_acquire);
	if (cb)
		cb(dev, atomic_load_explicit(&p->resize_arg, memory_order_acquire));
}

static void rbd_watch_cb(void *arg)
{
	rbd_size_check(arg);
}

/* The open image gets its update watch (a failure only loses the notices, said in the log). */
static void rbd_watch_start(struct bs_dev *dev)
{
	struct rbd_priv *p = dev->priv;
	int rc = rbd_update_watch(p->image, &p->watch_handle, rbd_watch_cb, dev);

	p->watching = rc == 0;
	if (rc < 0)
		log_warn("rbd", "%s: rbd_update_watch: %s: a resize by another client will not be "
			 "noticed", p->name, strerror(-rc));
}

/* Before the image closes: no callback runs after this returns (librbd waits for them). */
static void rbd_watch_stop(struct rbd_priv *p)
{
	int rc;

	if (!p->watching)
		return;
	p->watching = false;
	if ((rc = rbd_update_unwatch(p->image, p->watch_handle)) < 0)
		log_warn("rbd", "%s: rbd_update_unwatch: %s", p->name, strerror(-rc));
}

static int no_progress(uint64_t offset, uint64_t total, void *arg)
{
	(void)offset;
	(void)total;
	(void)arg;
	return 0;
}

/* bs_ops.on_resize. */
static void rbd_on_resize(struct bs_dev *dev, bs_ready_cb cb, void *arg)
{
	struct rbd_priv *p = dev->priv;

	atomic_store_explicit(&p->resize_arg, arg, memory_order_release);
	atomic_store_explicit(&p->resize_cb, cb, memory_order_release);
}

/* bs_ops.grow (iscsi_resize_lun, a reload with a larger size): rbd_resize, bounded by the OSD
 * timeout; an image another gateway has grown that far already is left alone. A smaller size
 * (bs_dev_shrink: iscsi_resize_lun with force) shrinks the image. Main thread. */
static int rbd_grow(struct bs_dev *dev, uint64_t size, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	uint64_t have = 0;
	int rc;

	if (!atomic_load_explicit(&p->online, memory_order_acquire) || !io_enter(p)) {
		snprintf(err, errlen, "rbd %s: the image is not open here (%s)", p->name,
			 atomic_load(&p->fenced) ? "fenced" : "not connected yet");
		return -ENOTCONN;
	}
	rc = rbd_get_size(p->image, &have);
	if (rc == 0 && (have < size || size < atomic_load(&dev->size)))
		rc = rbd_resize2(p->image, size, size < have, no_progress, NULL);
	io_leave(p);
	if (rc < 0) {
		snprintf(err, errlen, "rbd %s: rbd_resize to %llu bytes: %s", p->name,
			 (unsigned long long)size, strerror(-rc));
		return rc;
	}
	log_info("rbd", "%s: resized to %llu bytes", p->name, (unsigned long long)size);
	return 0;
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

/* The connection, the image and its size: p->cl, ioctx, image, obj_size, and dev->size at
 * the first open (a reopen wants an image at least as large, and keeps the size). Blocking
 * (bounded by connect_timeout_s and the OSD timeout). -errno + message. */
/* Without the managed lock, librbd's own exclusive lock moves to this client at its first
 * write: it asks the holder, and a holder that is gone (a gateway killed with kill -9) counts
 * as alive until the OSDs drop its watch (osd_client_watch_timeout, 30 s by default), so that
 * write waits as long. Say so at open, the one moment it can be seen without asking on the
 * data path (docs/configuration.md, RBD LUNs). */
static void lock_held_note(struct rbd_priv *p)
{
	char *owners[4];
	size_t n = 4;
	rbd_lock_mode_t mode;

	if (rbd_lock_get_owners(p->image, &mode, owners, &n) < 0 || n == 0)
		return; /* free, or no exclusive-lock feature */
	log_info("rbd",
		 "%s: librbd's exclusive lock is held by %s: this gateway's first write asks it "
		 "for the lock and, if that client is gone (a gateway stopped without a clean "
		 "stop), waits until the OSDs expire its watch (osd_client_watch_timeout, 30 s "
		 "by default)",
		 p->name, owners[0]);
	rbd_lock_get_owners_cleanup(owners, n);
}

static int image_open(struct bs_dev *dev, bool reopen, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	const struct bs_rbd_cfg *c = &p->c;
	rbd_image_info_t info;
	int rc;

	rc = bs_rbd_conn_join(p, err, errlen);
	if (rc < 0)
		return rc;
	rc = rados_ioctx_create(p->cl->rados, c->pool, &p->ioctx);
	if (rc < 0) {
		snprintf(err, errlen, rc == -ENOENT ? "pool %s not found (%s)" : "rbd pool %s: %s",
			 c->pool, strerror(-rc));
		goto fail_cluster;
	}
	if (c->ns)
		rados_ioctx_set_namespace(p->ioctx, c->ns);
	/* A full pool (its quota, or a full cluster) answers a write at once with -EDQUOT or
	 * -ENOSPC (07/27/07) instead of librados holding it until there is space: FULL_TRY on
	 * every op of this context, which librbd's image handle inherits. */
	if (!p->readonly)
		rados_set_pool_full_try(p->ioctx);
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
	/* a configured size is the least the image has: it may have grown since (rbd resize,
	 * another gateway) */
	if (reopen ? info.size < dev->size : p->cfg_size > info.size) {
		snprintf(err, errlen, "rbd %s: the image has %llu bytes, %s %llu", p->name,
			 (unsigned long long)info.size,
			 reopen ? "the LU serves" : "the configuration says",
			 (unsigned long long)(reopen ? dev->size : p->cfg_size));
		rc = -EINVAL;
		goto fail_image;
	}
	if (info.size < p->cfg_block) {
		snprintf(err, errlen, "rbd %s: the image is smaller than one block", p->name);
		rc = -EINVAL;
		goto fail_image;
	}
	p->obj_size = info.obj_size;
	if (!reopen)
		dev->size = info.size - info.size % p->cfg_block;
	rbd_watch_start(dev);
	if (!c->exclusive_lock && !p->readonly)
		lock_held_note(p);
	if (reopen) /* grown while this gateway was fenced */
		rbd_size_check(dev);
	log_info("rbd", "%s: %llu bytes, %llu-byte objects%s, client.%llu at %s", p->name,
		 (unsigned long long)info.size, (unsigned long long)info.obj_size,
		 c->exclusive_lock && !p->readonly ? ", managed exclusive lock" : "",
		 (unsigned long long)p->cl->gid, p->cl->addr[0] ? p->cl->addr : "(address unknown)");
	return 0;
fail_image:
	rbd_close(p->image);
fail_ioctx:
	rados_ioctx_destroy(p->ioctx);
fail_cluster:
	bs_rbd_conn_leave(p, false);
	return rc;
}

int bs_rbd_attach(struct bs_dev *dev, char *err, size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	int rc = image_open(dev, false, err, errlen);

	if (rc < 0)
		return rc;
	if (p->o && (rc = p->own_ops->attach(p->o, p->image, p->ioctx, false)) < 0) {
		snprintf(err, errlen, "rbd %s: cannot start the ownership thread: %s", p->name,
			 strerror(-rc));
		bs_rbd_detach(p);
	}
	return rc;
}

int bs_rbd_reattach(struct bs_dev *dev, char *err, size_t errlen)
{
	return image_open(dev, true, err, errlen);
}

static int rbd_dev_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err,
			size_t errlen)
{
	struct rbd_priv *p = dev->priv;
	const struct bs_backend_cfg *bc = cfg->backend_cfg;
	const struct bs_rbd_cfg *c = bc ? &bc->rbd : NULL;
	int rc;

	if (!c || !c->pool || !c->image) {
		snprintf(err, errlen, "rbd backend needs a pool and an image");
		return -EINVAL;
	}
	if (!cfg->host || !cfg->host->rbd) {
		snprintf(err, errlen,
			 "rbd backend needs its context (the high-availability layer)");
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
	if (p->exclusive && !(cfg->host && cfg->host->own_ops)) {
		snprintf(err, errlen, "rbd %s: exclusive_lock needs the high-availability layer",
			 p->name);
		cfg_free(&p->c);
		return -EINVAL;
	}
	p->own_ops = cfg->host ? cfg->host->own_ops : NULL;
	if (p->exclusive &&
	    (rc = p->own_ops->create(cfg->host, &p->o, p->name, c, cfg->owner_group)) < 0) {
		snprintf(err, errlen, "out of memory");
		cfg_free(&p->c);
		return rc;
	}
	p->close_ms = ((c->osd_op_timeout_s ? c->osd_op_timeout_s : RBD_DEFAULT_OSD_TIMEOUT_S) + 5) *
		      1000u;
	p->ctx = cfg->host->rbd;
	bs_rbd_ctx_get(p->ctx);
	list_init(&p->cl_link);
	atomic_init(&p->online, false);
	atomic_init(&p->fenced, false);
	atomic_init(&p->inflight, 0);
	rc = bs_rbd_open(dev, c->start_offline, err, errlen);
	if (rc < 0) {
		if (p->o)
			p->own_ops->put(p->o);
		p->o = NULL;
		cfg_free(&p->c);
		bs_rbd_ctx_put(p->ctx);
		p->ctx = NULL;
	}
	return rc;
}

/* Closing releases the image's exclusive lock and its watch: requests to the cluster, and a
 * watch has no OSD timeout. A cluster that does not answer must not hang ix-target's exit, a
 * reload or a rejoin, so the close is asynchronous and waited for at most close_ms; after that
 * the image and its cluster connection are abandoned (left to the process's exit: librados may
 * still call into them) with a warning. */
void bs_rbd_detach(struct rbd_priv *p)
{
	uint64_t end = bs_rbd_now_ms() + p->close_ms; /* the clock, not a count of sleeps: a
							 loaded machine oversleeps */
	rbd_completion_t c;
	int rc;

	if (!p->cl)
		return;
	rbd_watch_stop(p);
	if (rbd_aio_create_completion(NULL, NULL, &c) < 0) {
		rc = rbd_close(p->image);
	} else if ((rc = rbd_aio_close(p->image, c)) < 0) {
		rbd_aio_release(c);
	} else {
		while (!rbd_aio_is_complete(c) && bs_rbd_now_ms() < end)
			usleep(10000);
		if (!rbd_aio_is_complete(c)) {
			log_warn("rbd", "%s: the image did not close within %u s (the cluster does not "
				 "answer): its connection is abandoned", p->name, p->close_ms / 1000);
			bs_rbd_conn_leave(p, true);
			return;
		}
		rc = (int)rbd_aio_get_return_value(c);
		rbd_aio_release(c);
	}
	if (rc < 0 && rc != -ESHUTDOWN) /* a fenced connection's close: expected */
		log_warn("rbd", "%s: rbd_close: %s", p->name, strerror(-rc));
	rados_ioctx_destroy(p->ioctx);
	bs_rbd_conn_leave(p, false);
}

void bs_rbd_attach_undo(struct rbd_priv *p)
{
	if (p->o && !p->own_ops->detach(p->o, p->close_ms)) { /* a lock call: bounded by the
							      cluster's timeouts */
		log_warn("rbd",
			 "%s: a lock call did not end within %u s: the image is "
			 "abandoned",
			 p->name, p->close_ms / 1000);
		bs_rbd_conn_leave(p, true); /* the thread keeps its own reference to o */
	} else {
		bs_rbd_detach(p);
	}
}

/* ---- how full the pool is (bs_ops.space) ---- */

/* The pool's quota in bytes (0: none) from the monitor; 0 when it cannot be asked. */
static uint64_t pool_quota(struct rbd_priv *p)
{
	char cmd[400], *out = NULL, *outs = NULL;
	const char *argv[1] = {cmd};
	size_t outlen = 0, outslen = 0;
	uint64_t q = 0;
	const char *at;

	if (strpbrk(p->c.pool, "\"\\") || /* names are printable; these would need escaping */
	    snprintf(cmd, sizeof(cmd),
		     "{\"prefix\": \"osd pool get-quota\", \"pool\": \"%s\", \"format\": \"json\"}",
		     p->c.pool) >= (int)sizeof(cmd))
		return 0;
	if (rados_mon_command(p->cl->rados, argv, 1, "", 0, &out, &outlen, &outs, &outslen) == 0 &&
	    out && (at = strstr(out, "\"quota_max_bytes\":")))
		q = strtoull(at + strlen("\"quota_max_bytes\":"), NULL, 10);
	rados_buffer_free(out);
	rados_buffer_free(outs);
	return q;
}

/* The helper thread: the pool's usage and quota, the cluster's size. Without a manager the
 * cluster reports no statistics (size 0): nothing is known then. */
static void space_job(void *arg)
{
	struct rbd_priv *p = arg;
	struct rados_pool_stat_t ps;
	struct rados_cluster_stat_t cs;

	if (io_enter(p)) {
		if (rados_cluster_stat(p->cl->rados, &cs) == 0 && cs.kb &&
		    rados_ioctx_pool_stat(p->ioctx, &ps) == 0) {
			uint64_t quota = pool_quota(p), total = cs.kb * 1024,
				 avail = cs.kb_avail * 1024;

			if (quota) { /* the quota counts the bytes stored in the pool */
				uint64_t left = quota > ps.num_bytes ? quota - ps.num_bytes : 0;

				total = quota;
				avail = left < avail ? left : avail;
			}
			atomic_store(&p->sp_avail, avail < total ? avail : total);
			atomic_store(&p->sp_total, total);
		}
		io_leave(p);
	}
	atomic_store(&p->sp_when_ms, bs_rbd_now_ms());
	atomic_store(&p->sp_busy, false);
}

/* The last sample; a new one queued on the helper thread when it is older than
 * RBD_SPACE_MS. Never waits. */
static int rbd_space(struct bs_dev *dev, struct bs_space *out)
{
	struct rbd_priv *p = dev->priv;
	bool idle = false;

	if (!atomic_load_explicit(&p->online, memory_order_acquire))
		return -EAGAIN;
	if (bs_rbd_now_ms() - atomic_load(&p->sp_when_ms) >= RBD_SPACE_MS &&
	    atomic_compare_exchange_strong(&p->sp_busy, &idle, true) &&
	    helper_post_room(p->ctx, space_job, p, RBD_HELPER_QUEUE / 2) < 0)
		atomic_store(&p->sp_busy, false);
	out->total = atomic_load(&p->sp_total);
	out->avail = atomic_load(&p->sp_avail);
	out->used = UINT64_MAX; /* what the image holds: a query per object, not asked */
	return out->total ? 0 : -EAGAIN;
}

static void rbd_dev_close(struct bs_dev *dev)
{
	struct rbd_priv *p = dev->priv;
	uint64_t end = bs_rbd_now_ms() + p->close_ms;

	/* a space sample queued or running holds p (bounded by the cluster's timeouts) */
	while (atomic_load(&p->sp_busy) && bs_rbd_now_ms() < end)
		usleep(10000);
	bs_rbd_open_stop(p);
	if (atomic_load_explicit(&p->online, memory_order_acquire))
		bs_rbd_attach_undo(p); /* without an image (a rejoin failed half-way): o only */
	if (p->o)
		p->own_ops->put(p->o);
	p->o = NULL;
	cfg_free(&p->c);
	bs_rbd_ctx_put(p->ctx); /* last: the opener and helper were done with p */
	p->ctx = NULL;
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

/* The gate between requests and a rejoin (bs_rbd_conn.c), which replaces p->image while
 * p->fenced, once p->inflight is 0. A request enters before it touches the image and leaves
 * when librbd is done with it. Both sides are sequentially consistent (fenced is set before
 * inflight is read; inflight is raised before fenced is read), so either the request sees
 * fenced or the rejoin sees it in flight: nothing sent on a fenced connection is still open
 * when the device serves again. */
static bool io_enter(struct rbd_priv *p)
{
	atomic_fetch_add(&p->inflight, 1);
	if (!atomic_load(&p->fenced))
		return true;
	atomic_fetch_sub(&p->inflight, 1);
	return false;
}

static void io_leave(struct rbd_priv *p)
{
	atomic_fetch_sub(&p->inflight, 1);
}

/* librbd's answer r to a request: a blocklisted connection fences every device on it (while
 * the request is still in the gate, so the connection is p's), then the ownership's view. */
static int io_result(struct rbd_priv *p, int r)
{
	if (r == -ESHUTDOWN)
		bs_rbd_conn_fenced(p, "a request");
	r = bs_rbd_own_io_result(p, r);
	io_leave(p);
	return r;
}

/* A fenced device refuses without asking the cluster: as not the owner with the managed lock
 * (2/04/0B), else as the blocklisted connection would (ESHUTDOWN: 4/08/00). */
static void refuse_fenced(struct rbd_priv *p, struct bs_io *io)
{
	io->result = p->exclusive ? BS_ERR_NOT_OWNER : -ESHUTDOWN;
	io->cb(io);
}

/* librbd's thread: the request's result, then back to its submitter's loop. */
static void rbd_done(rbd_completion_t c, void *arg)
{
	struct bs_io *io = arg;
	ssize_t r = rbd_aio_get_return_value(c);

	rbd_aio_release(c);
	io->result = io_result(io->dev->priv, r < 0 ? (int)r : 0);
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

	io->result = io_result(io->dev->priv, lbas_run(io));
	rt_push(io->bpriv, io);
}

static void lbas_submit(struct bs_io *io, struct rbd_thread *rt)
{
	struct rbd_priv *p = io->dev->priv;
	int rc;

	if (!io_enter(p)) {
		refuse_fenced(p, io);
		return;
	}
	if (!rt) { /* a synchronous caller: it waits anyway */
		io->result = io_result(p, lbas_run(io));
		io->cb(io);
		return;
	}
	io->bpriv = rt;
	rt->inflight++;
	rc = helper_post(p->ctx, lbas_job, io);
	if (rc < 0) {
		io_leave(p);
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

#ifdef IX_CHAOS_BREAK_EARLY_ACK
/* A DELIBERATELY BROKEN build (meson -Dchaos_break=early-ack, tests/chaos/breaks.sh): a write
 * is answered GOOD as soon as it is handed to librbd (a copy of its data), before librbd
 * completes it; its result is never looked at. Never in a real build. */
static void chaos_late_done(rbd_completion_t c, void *arg)
{
	rbd_aio_release(c);
	free(arg);
}

static int chaos_early_ack(struct rbd_priv *p, struct bs_io *io, struct rbd_thread *rt,
			   rbd_completion_t c)
{
	rbd_completion_t late;
	char *copy = malloc(io->len);
	int rc = copy ? rbd_aio_create_completion(copy, chaos_late_done, &late) : -ENOMEM;

	if (rc < 0) {
		free(copy);
		return rc;
	}
	memcpy(copy, io->buf, io->len);
	rc = rbd_aio_write(p->image, io->offset, (size_t)io->len, copy, late);
	if (rc < 0) {
		rbd_aio_release(late);
		free(copy);
		return rc;
	}
	rbd_aio_release(c);
	io->result = io_result(p, 0);
	rt_push(rt, io);
	return 0;
}
#endif

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
	if (bs_rbd_own_io(p) || atomic_load_explicit(&p->fenced, memory_order_relaxed)) {
		refuse_fenced(p, io); /* blocklisted: librbd would refuse it anyway */
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
	if (!io_enter(p)) { /* fenced since the check above */
		rbd_aio_release(c);
		refuse_fenced(p, io);
		return;
	}
	if (rt)
		rt->inflight++;
#ifdef IX_CHAOS_BREAK_EARLY_ACK
	if (rt && io->op == BS_OP_WRITE)
		rc = chaos_early_ack(p, io, rt, c);
	else
#endif
	rc = rbd_start(p, io, c);
	if (rc < 0) { /* not started: no callback will come */
		rbd_aio_release(c);
		io_leave(p);
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
	io->result = io_result(p, rc < 0 ? rc : 0);
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
    .on_ready = bs_rbd_on_ready,
    .space = rbd_space,
    .grow = rbd_grow,
    .on_resize = rbd_on_resize,
    .snap = bs_rbd_snap,
};
