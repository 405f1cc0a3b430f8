/* RBD backend: snapshots and clones of the device's image (bs_ops.snap; docs/snapshots.md).
 *
 * librbd's snapshot calls are synchronous (they talk to the OSDs and the monitors): each
 * request runs as one job on the context's helper thread (bs_rbd.c), never on a worker or the
 * main loop, bounded by the cluster's timeouts (osd_op_timeout_s). The job passes the same
 * gate as the I/O (inflight, fenced), so a rejoin does not replace the image under it and a
 * fenced device refuses at once. Holding the LU's writes around a snapshot, and taking it
 * offline around a rollback, is the SCSI layer's (scsi/hold.c), driven by the target. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/bs.h"
#include "backend/bs_rbd_int.h"
#include "util/log.h"

struct snap_job {
	struct bs_dev *dev;
	struct bs_snap_req *req;
};

static bool gate_enter(struct rbd_priv *p)
{
	atomic_fetch_add(&p->inflight, 1);
	if (!atomic_load(&p->fenced))
		return true;
	atomic_fetch_sub(&p->inflight, 1);
	return false;
}

static void gate_leave(struct rbd_priv *p)
{
	atomic_fetch_sub(&p->inflight, 1);
}

static int fail(struct bs_snap_req *req, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct bs_snap_req *req, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(req->err, sizeof(req->err), fmt, ap);
	va_end(ap);
	return rc;
}

/* How many clones the snapshot has (a read-only handle opened at it); < 0: -errno. */
static int children_of(struct rbd_priv *p, const char *snap, unsigned *n)
{
	rbd_linked_image_spec_t one[1];
	rbd_image_t h;
	size_t max = 0;
	int rc = rbd_open_read_only(p->ioctx, p->c.image, &h, snap);

	if (rc < 0)
		return rc;
	rc = rbd_list_children3(h, one, &max);
	if (rc >= 0 || rc == -ERANGE) {
		*n = (unsigned)max;
		if (rc > 0 && max > 0)
			rbd_linked_image_spec_list_cleanup(one, max);
		rc = 0;
	}
	rbd_close(h);
	return rc;
}

static int no_progress(uint64_t offset, uint64_t total, void *arg)
{
	(void)offset;
	(void)total;
	(void)arg;
	return 0;
}

static int snap_exists(struct rbd_priv *p, struct bs_snap_req *req)
{
	bool e = false;
	int rc = rbd_snap_exists(p->image, req->name, &e);

	if (rc < 0)
		return fail(req, rc, "rbd %s: cannot look for snapshot %s: %s", p->name, req->name,
			    strerror(-rc));
	if (!e)
		return fail(req, -ENOENT, "rbd %s: no snapshot named %s", p->name, req->name);
	return 0;
}

static int do_list(struct rbd_priv *p, struct bs_snap_req *req)
{
	rbd_snap_info_t *s = NULL;
	int max = 16, rc;

	for (;;) {
		free(s);
		s = calloc((size_t)max, sizeof(*s));
		if (!s)
			return fail(req, -ENOMEM, "out of memory");
		rc = rbd_snap_list(p->image, s, &max);
		if (rc != -ERANGE)
			break;
	}
	if (rc < 0) {
		free(s);
		return fail(req, rc, "rbd %s: rbd_snap_list: %s", p->name, strerror(-rc));
	}
	req->list = calloc((size_t)rc + 1, sizeof(*req->list));
	if (!req->list) {
		rbd_snap_list_end(s);
		free(s);
		return fail(req, -ENOMEM, "out of memory");
	}
	for (int i = 0; i < rc; i++) {
		struct bs_snap_info *o = &req->list[req->n];
		int prot = 0;

		snprintf(o->name, sizeof(o->name), "%s", s[i].name);
		o->id = s[i].id;
		o->size = s[i].size;
		if (rbd_snap_is_protected(p->image, s[i].name, &prot) == 0)
			o->protect = prot != 0;
		(void)children_of(p, s[i].name, &o->children);
		req->n++;
	}
	rbd_snap_list_end(s);
	free(s);
	return 0;
}

static int do_remove(struct rbd_priv *p, struct bs_snap_req *req)
{
	unsigned kids = 0;
	int prot = 0, rc = snap_exists(p, req);

	if (rc < 0)
		return rc;
	if (rbd_snap_is_protected(p->image, req->name, &prot) == 0 && prot)
		return fail(req, -EBUSY,
			    "rbd %s: snapshot %s is protected (clones may depend on it): delete or "
			    "flatten its clones and unprotect it (rbd snap unprotect) first",
			    p->name, req->name);
	if (children_of(p, req->name, &kids) == 0 && kids > 0)
		return fail(req, -EBUSY,
			    "rbd %s: snapshot %s has %u clone(s): delete or flatten them (rbd "
			    "flatten) first",
			    p->name, req->name, kids);
	rc = rbd_snap_remove(p->image, req->name);
	if (rc < 0)
		return fail(req, rc, "rbd %s: rbd_snap_remove %s: %s", p->name, req->name,
			    strerror(-rc));
	return 0;
}

static int clone_with(struct rbd_priv *p, struct bs_snap_req *req, rados_ioctx_t dst,
		      uint64_t format)
{
	rbd_image_options_t o;
	int rc;

	rbd_image_options_create(&o);
	if (format)
		rbd_image_options_set_uint64(o, RBD_IMAGE_OPTION_CLONE_FORMAT, format);
	rc = rbd_clone3(p->ioctx, p->c.image, req->name, dst, req->clone_image, o);
	rbd_image_options_destroy(o);
	return rc;
}

static int do_clone(struct rbd_priv *p, struct bs_snap_req *req)
{
	rados_ioctx_t dst = p->ioctx;
	bool own_ioctx = false;
	int prot = 0, rc = snap_exists(p, req);

	if (rc < 0)
		return rc;
	if (req->clone_pool[0] && strcmp(req->clone_pool, p->c.pool) != 0) {
		rc = rados_ioctx_create(p->cl->rados, req->clone_pool, &dst);
		if (rc < 0)
			return fail(req, rc, "pool %s: %s", req->clone_pool,
				    rc == -ENOENT ? "no such pool" : strerror(-rc));
		if (p->c.ns)
			rados_ioctx_set_namespace(dst, p->c.ns);
		own_ioctx = true;
	}
	(void)rbd_snap_is_protected(p->image, req->name, &prot);
	/* clone v2 (Mimic and later) needs no protection; a cluster that allows only v1 refuses
	 * it, and then the snapshot is protected and cloned v1 */
	rc = prot ? clone_with(p, req, dst, 0) : clone_with(p, req, dst, 2);
	if (!prot && (rc == -EOPNOTSUPP || rc == -ENOSYS || rc == -EINVAL)) {
		log_info("rbd", "%s: clone v2 of %s refused (%s): protecting it for a v1 clone",
			 p->name, req->name, strerror(-rc));
		rc = rbd_snap_protect(p->image, req->name);
		if (rc < 0 && rc != -EBUSY) {
			rc = fail(req, rc, "rbd %s: rbd_snap_protect %s: %s", p->name, req->name,
				  strerror(-rc));
			goto out;
		}
		req->protected_now = rc == 0;
		rc = clone_with(p, req, dst, 1);
	}
	if (rc == -EEXIST)
		rc = fail(req, rc, "rbd: image %s/%s exists already",
			  req->clone_pool[0] ? req->clone_pool : p->c.pool, req->clone_image);
	else if (rc < 0)
		rc = fail(req, rc, "rbd %s: rbd_clone3 of %s to %s: %s", p->name, req->name,
			  req->clone_image, strerror(-rc));
out:
	if (own_ioctx)
		rados_ioctx_destroy(dst);
	return rc;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int run(struct rbd_priv *p, struct bs_snap_req *req)
{
	uint64_t t0;
	int rc;

	switch (req->op) {
	case BS_SNAP_CREATE:
		/* the LU's writes are held and drained by the target already: librbd's own
		 * quiesce round (a notification to every watcher of the image) would only wait.
		 * Most of a snapshot's pause is this call: librbd blocks the image's writes in it
		 * while the monitor allocates the snapshot's id (docs/snapshots.md) */
		t0 = mono_ms();
		rc = rbd_snap_create2(p->image, req->name, RBD_SNAP_CREATE_SKIP_QUIESCE,
				      no_progress, NULL);
		req->call_ms = (uint32_t)(mono_ms() - t0);
		if (rc == -EEXIST)
			return fail(req, rc, "rbd %s: a snapshot named %s exists already", p->name,
				    req->name);
		if (rc < 0)
			return fail(req, rc, "rbd %s: rbd_snap_create %s: %s", p->name, req->name,
				    strerror(-rc));
		return 0;
	case BS_SNAP_LIST:
		return do_list(p, req);
	case BS_SNAP_REMOVE:
		return do_remove(p, req);
	case BS_SNAP_ROLLBACK:
		if ((rc = snap_exists(p, req)) < 0)
			return rc;
		rc = rbd_snap_rollback(p->image, req->name);
		if (rc < 0)
			return fail(req, rc, "rbd %s: rbd_snap_rollback %s: %s", p->name, req->name,
				    strerror(-rc));
		return 0;
	case BS_SNAP_CLONE:
		return do_clone(p, req);
	}
	return fail(req, -EINVAL, "unknown snapshot request");
}

/* The helper thread. */
static void snap_job(void *arg)
{
	struct snap_job *j = arg;
	struct rbd_priv *p = j->dev->priv;
	struct bs_snap_req *req = j->req;

	free(j);
	if (!gate_enter(p)) {
		req->result =
		    fail(req, -ENOTCONN, "rbd %s: fenced (blocklisted): rejoin first", p->name);
	} else {
		req->result = run(p, req);
		if (req->result == -ESHUTDOWN)
			bs_rbd_conn_fenced(p, "a snapshot request");
		gate_leave(p);
	}
	if (req->result == 0 && req->op != BS_SNAP_LIST)
		log_info("rbd", "%s: snapshot %s: %s%s%s", p->name, req->name,
			 req->op == BS_SNAP_CREATE     ? "created"
			 : req->op == BS_SNAP_REMOVE   ? "deleted"
			 : req->op == BS_SNAP_ROLLBACK ? "rolled back to"
						       : "cloned to ",
			 req->op == BS_SNAP_CLONE ? req->clone_image : "",
			 req->protected_now ? " (protected for a v1 clone)" : "");
	req->done(req);
}

int bs_rbd_snap(struct bs_dev *dev, struct bs_snap_req *req)
{
	struct rbd_priv *p = dev->priv;
	struct snap_job *j;
	int rc;

	snprintf(req->image, sizeof(req->image), "%s", p->name);
	if (!atomic_load_explicit(&p->online, memory_order_acquire))
		return fail(req, -ENOTCONN,
			    "rbd %s: the image is not open here (ix-ctl lun status)", p->name);
	if ((req->op != BS_SNAP_LIST && req->op != BS_SNAP_CLONE) && p->readonly)
		return fail(req, -EROFS, "rbd %s: the LUN is read-only", p->name);
	j = malloc(sizeof(*j));
	if (!j)
		return fail(req, -ENOMEM, "out of memory");
	j->dev = dev;
	j->req = req;
	rc = bs_rbd_helper_post(p->ctx, snap_job, j);
	if (rc < 0) {
		free(j);
		return fail(req, rc, "rbd %s: the backend's helper thread is busy: try again",
			    p->name);
	}
	return 0;
}
