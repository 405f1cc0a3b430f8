/* Snapshots and clones of a running RBD LUN (target.h: ix_target_lun_snap;
 * docs/snapshots.md). The main loop drives each request: the LU's quiesce (scsi/hold.c), the
 * backend's request on its helper thread (bs_ops.snap, backend/bs_rbd_snap.c), whose end is
 * posted back here, then the LU's resume and the caller's callback.
 *
 * A snapshot (CREATE) is bounded by timeout_ms from the moment the hold starts: the drain of
 * the writes in flight, then rbd_snap_create. If the drain does not end in time the hold ends
 * and nothing is created; if the cluster has not answered rbd_snap_create in time the writes
 * resume at once, the caller gets the error, and a snapshot that is made after all is deleted
 * (it may hold writes acknowledged after the hold ended: not the crash-consistent point). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/bs.h"
#include "event/loop.h"
#include "ha/ha.h"
#include "scsi/scsi.h"
#include "target/target.h"
#include "target/tgt_int.h"
#include "util/log.h"

struct snap_op {
	struct ix_target *t;
	struct ev_loop *loop;
	struct scsi_lu *lu; /* referenced until the op ends */
	struct bs_dev *dev;
	struct bs_snap_req req;
	struct ev_post post;	  /* the backend's answer, to the main loop */
	struct ev_timer deadline; /* CREATE: the hold's bound */
	uint64_t start_ms;	  /* the hold began (the loop's time: the deadline's) */
	/* what the answer reports, read from the clock itself (the loop's time is that of its
	   iteration's start): the hold began, the writes in flight drained (0: not yet) */
	uint64_t t_start, t_drained;
	unsigned create_ms;	  /* CREATE: the backend's call took (read in on_result only: the
				     helper thread writes req.call_ms until it posts) */
	bool created;		  /* create_ms is known */
	unsigned timeout_ms;
	bool held;     /* the LU is quiesced */
	bool answered; /* cb has run (the deadline answered first) */
	bool cleanup;  /* the request running is the removal of an abandoned snapshot */
	bool fwd;      /* CREATE sent to the lock's holder (ha_dev_snap_forward) */
	int fwd_rc;    /* its answer */
	unsigned fwd_held_ms;
	char fwd_err[600];
	/* ROLLBACK with the managed lock: the other gateways were told to go offline (they are
	   told to come back when it ends, whatever happens) */
	bool remote;
	bool force;
	int off_rc; /* their answers: 0 go on, or why not */
	unsigned off_bound;
	char off_err[1024];
	char target[256];
	uint32_t lun;
	char lu_name[300];
	ix_snap_cb cb;
	void *arg;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void op_free(struct snap_op *o)
{
	ev_timer_stop(o->loop, &o->deadline);
	scsi_lu_put(o->lu);
	free(o->req.list);
	free(o);
}

static void answer(struct snap_op *o, int rc, const char *err)
{
	struct ix_snap_result r = {.rc = rc,
				   .err = err,
				   .list = o->req.list,
				   .n = o->req.n,
				   .protected_now = o->req.protected_now,
				   .held_ms = o->fwd	    ? o->fwd_held_ms
					      : o->t_start ? (unsigned)(mono_ms() - o->t_start)
							   : 0,
				   .parts = !o->fwd && o->req.op == BS_SNAP_CREATE && o->created,
				   .drain_ms = o->t_drained ? (unsigned)(o->t_drained - o->t_start) : 0,
				   .create_ms = o->create_ms};

	if (r.parts && rc == 0)
		log_info("target",
			 "%s: snapshot %s: writes held %u ms (drain %u ms, rbd_snap_create2 %u ms, "
			 "the rest %d ms)",
			 o->lu_name, o->req.name, r.held_ms, r.drain_ms, r.create_ms,
			 (int)r.held_ms - (int)r.drain_ms - (int)r.create_ms);
	o->answered = true;
	o->cb(o->arg, &r);
}

/* The other gateways come back online (changed: 6/28/00 on each of their nexuses). */
static void remote_online(struct snap_op *o, bool changed)
{
	if (!o->remote)
		return;
	o->remote = false;
	ha_dev_lu_online(o->dev, o->target, o->lun, changed);
}

static void resume(struct snap_op *o, bool changed)
{
	if (!o->held)
		return;
	o->held = false;
	scsi_lu_resume(o->lu, changed);
}

/* Main loop: the backend's answer. */
static void on_result(void *arg)
{
	struct snap_op *o = arg;

	if (o->cleanup) {
		if (o->req.result < 0)
			log_warn("target", "%s: the abandoned snapshot %s could not be deleted: %s",
				 o->lu_name, o->req.name, o->req.err);
		op_free(o);
		return;
	}
	ev_timer_stop(o->loop, &o->deadline);
	if (o->answered) { /* the deadline ended the hold: the snapshot is not the consistent
			      point, it goes */
		if (o->req.result == 0 && o->req.op == BS_SNAP_CREATE) {
			log_warn("target", "%s: snapshot %s was made after its deadline: deleted",
				 o->lu_name, o->req.name);
			o->cleanup = true;
			o->req.op = BS_SNAP_REMOVE;
			if (bs_dev_snap(o->dev, &o->req) == 0)
				return;
			log_warn("target", "%s: cannot delete snapshot %s: %s", o->lu_name,
				 o->req.name, o->req.err);
		}
		op_free(o);
		return;
	}
	o->create_ms = o->req.call_ms;
	o->created = o->t_drained != 0;
	/* a rollback changed the medium, also when it failed half-way */
	resume(o, o->req.op == BS_SNAP_ROLLBACK);
	remote_online(o, o->req.op == BS_SNAP_ROLLBACK);
	answer(o, o->req.result, o->req.result < 0 ? o->req.err : NULL);
	op_free(o);
}

/* The backend's helper thread. */
static void on_done(struct bs_snap_req *req)
{
	struct snap_op *o = req->arg;

	ev_loop_post_node(o->loop, &o->post, on_result, o);
}

static void on_deadline(struct ev_timer *tm)
{
	struct snap_op *o = tm->arg;
	char err[1024];

	/* only while rbd_snap_create runs (the drain has its own bound) */
	snprintf(err, sizeof(err),
		 "%s: the cluster did not create snapshot %s within %u ms: aborted, writes "
		 "resumed (a snapshot made later is deleted)",
		 o->lu_name, o->req.name, o->timeout_ms);
	log_warn("target", "%s", err);
	resume(o, false);
	answer(o, -ETIMEDOUT, err);
	/* o lives on until the backend answers (on_result) */
}

/* Main loop: the LU's writes drained (rc 0), or not within the bound. */
static void on_quiesced(void *arg, int rc)
{
	struct snap_op *o = arg;
	uint64_t spent;
	char err[1024];

	if (rc < 0) {
		o->held = false; /* the quiesce ended it itself */
		snprintf(err, sizeof(err),
			 "%s: the writes in flight did not complete within %u ms: %s aborted, "
			 "I/O resumed",
			 o->lu_name, o->timeout_ms,
			 o->req.op == BS_SNAP_CREATE ? "snapshot" : "rollback");
		remote_online(o, false);
		answer(o, rc, err);
		op_free(o);
		return;
	}
	if (o->req.op == BS_SNAP_CREATE)
		o->t_drained = mono_ms();
	if (bs_dev_snap(o->dev, &o->req) < 0) {
		resume(o, false);
		remote_online(o, false);
		answer(o, -EIO, o->req.err);
		op_free(o);
		return;
	}
	/* a rollback is not bounded: the LU stays NOT READY until the image is rolled back */
	if (o->req.op == BS_SNAP_CREATE) {
		spent = ev_now_ms(o->loop) - o->start_ms;
		ev_timer_start(o->loop, &o->deadline,
			       spent < o->timeout_ms ? o->timeout_ms - spent : 0);
	}
}

/* With the managed exclusive lock only its owner has writes in flight (and may create
 * snapshots): this gateway must be it. */
static int owner_check(struct snap_op *o, char *err, size_t errlen)
{
	struct ha_dev_status hs;

	if (ha_dev_status(o->dev, &hs) < 0)
		return 0;
	if (hs.offline) {
		snprintf(err, errlen, "%s: the image is not open here: %s", o->lu_name, hs.reason);
		return -ENOTCONN;
	}
	/* "open": no managed lock (every gateway writes: only this one's writes are held) */
	if (hs.lock[0] && strcmp(hs.lock, "owner") != 0 && strcmp(hs.lock, "open") != 0) {
		snprintf(err, errlen,
			 "%s: this gateway does not hold the image's exclusive lock (%s): take the "
			 "snapshot through the gateway that owns it",
			 o->lu_name, hs.lock);
		return -EPERM;
	}
	return 0;
}

/* ---- a snapshot on a standby: the lock's holder takes it ---- */

/* Main loop: the holder's answer (or why none came). */
static void on_fwd_result(void *arg)
{
	struct snap_op *o = arg;

	ev_timer_stop(o->loop, &o->deadline);
	if (!o->answered)
		answer(o, o->fwd_rc, o->fwd_rc < 0 ? o->fwd_err : NULL);
	op_free(o);
}

/* Any thread (librados'): the holder answered, or the notify's bound passed. */
static void on_fwd_answer(void *arg, int rc, unsigned held_ms, const char *msg)
{
	struct snap_op *o = arg;

	o->fwd_rc = rc;
	o->fwd_held_ms = held_ms;
	snprintf(o->fwd_err, sizeof(o->fwd_err), "%s", msg ? msg : "");
	ev_loop_post_node(o->loop, &o->post, on_fwd_result, o);
}

/* librados did not end the notify within its bound (the cluster unreachable): answer; o lives
 * on until librados does. */
static void on_fwd_deadline(struct ev_timer *tm)
{
	struct snap_op *o = tm->arg;
	char err[700];

	snprintf(err, sizeof(err),
		 "%s: the request to the lock's holder did not end within %u ms (it may take the "
		 "snapshot still: rbd snap ls tells)",
		 o->lu_name, o->timeout_ms);
	log_warn("target", "%s", err);
	answer(o, -ETIMEDOUT, err);
}

static int forward(struct snap_op *o, const char *target, uint32_t lun, char *err, size_t errlen)
{
	unsigned bound = 0;
	int rc;

	o->fwd = true;
	ev_timer_init(&o->deadline, on_fwd_deadline, o);
	rc = ha_dev_snap_forward(o->dev, target, lun, o->req.name,
				 o->req.op == BS_SNAP_CREATE ? HA_SNAP_CREATE
				 : o->force		     ? HA_SNAP_ROLLBACK_FORCE
							     : HA_SNAP_ROLLBACK,
				 o->timeout_ms, on_fwd_answer, o, &bound, err, errlen);
	if (rc < 0)
		return rc;
	/* librados' own bound plus a second for its answer to arrive */
	o->timeout_ms = bound + 1000;
	ev_timer_start(o->loop, &o->deadline, o->timeout_ms);
	log_info("target", "%s: %s: this gateway is a standby: the lock's holder takes it",
		 o->lu_name, o->req.name);
	return 0;
}

/* ---- a request from another gateway (this one holds the lock) ---- */

struct snap_in {
	struct ev_post post;
	struct ix_target *t;
	struct ha_snap_req *r;
	char target[256], name[BS_SNAP_NAME_MAX];
	uint32_t lun;
	unsigned timeout_ms;
	int op;
	bool force;
};

static void snap_in_done(void *arg, const struct ix_snap_result *res)
{
	struct snap_in *in = arg;

	ha_snap_req_answer(in->r, res->rc, res->held_ms, res->err);
	free(in);
}

/* Main loop: run it as if asked through this gateway's API (not forwarded again). */
static void snap_in_run(void *arg)
{
	struct snap_in *in = arg;
	struct ix_snap_args a = {.op = in->op,
				 .force = in->force,
				 .name = in->name,
				 .timeout_ms = in->timeout_ms,
				 .no_forward = true};
	char err[1024];
	int rc;

	if (a.timeout_ms < 100 || a.timeout_ms > 600000) {
		ha_snap_req_answer(in->r, -EINVAL, 0, "timeout_ms out of range (100 to 600000)");
		free(in);
		return;
	}
	rc = ix_target_lun_snap(in->t, in->target, in->lun, &a, snap_in_done, in, err, sizeof(err));
	if (rc < 0) {
		ha_snap_req_answer(in->r, rc, 0, err);
		free(in);
	}
}

void tgt_snap_asked(void *arg, struct ha_snap_req *r, const char *target, uint32_t lun,
		    const char *name, enum ha_snap_what what, unsigned timeout_ms)
{
	struct ix_target *t = arg;
	struct snap_in *in = calloc(1, sizeof(*in));

	if (!in) {
		ha_snap_req_answer(r, -ENOMEM, 0, "out of memory");
		return;
	}
	*in = (struct snap_in){.t = t,
			       .r = r,
			       .lun = lun,
			       .timeout_ms = timeout_ms,
			       .op = what == HA_SNAP_CREATE ? BS_SNAP_CREATE : BS_SNAP_ROLLBACK,
			       .force = what == HA_SNAP_ROLLBACK_FORCE};
	snprintf(in->target, sizeof(in->target), "%s", target);
	snprintf(in->name, sizeof(in->name), "%s", name);
	ev_loop_post_node(ix_target_main_loop(t), &in->post, snap_in_run, in);
}

/* Hold the LU (CREATE) or take it offline (ROLLBACK) here; on_quiesced goes on. */
static int start_quiesce(struct snap_op *o, char *err, size_t errlen)
{
	bool rb = o->req.op == BS_SNAP_ROLLBACK;
	int rc;

	ev_timer_init(&o->deadline, on_deadline, o);
	o->start_ms = ev_now_ms(o->loop);
	o->t_start = mono_ms();
	rc = scsi_lu_quiesce(o->lu, o->loop, o->timeout_ms, rb, on_quiesced, o);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", o->lu_name,
			 rc == -EBUSY	      ? "a snapshot or a rollback of it is under way"
			 : rc == -EINPROGRESS ? "a SANITIZE of it is in progress"
					      : strerror(-rc));
		return rc;
	}
	o->held = true;
	log_info("target", "%s: %s: %s (at most %u ms)", o->lu_name, o->req.name,
		 rb ? "not ready for a rollback" : "writes held for a snapshot", o->timeout_ms);
	return 0;
}

/* ---- a rollback with the managed lock: the other gateways go offline first ---- */

/* Main loop: every other gateway answered (or the notify's bound passed). */
static void on_off_result(void *arg)
{
	struct snap_op *o = arg;
	char err[1024];

	ev_timer_stop(o->loop, &o->deadline);
	if (o->answered) { /* on_off_deadline answered the caller */
		remote_online(o, false);
		op_free(o);
		return;
	}
	if (o->off_rc < 0) {
		log_warn("target", "%s", o->off_err);
		remote_online(o, false);
		answer(o, o->off_rc, o->off_err);
		op_free(o);
		return;
	}
	if (o->off_err[0])
		log_warn("target", "%s", o->off_err); /* forced past them */
	if (start_quiesce(o, err, sizeof(err)) < 0) {
		remote_online(o, false);
		answer(o, -EBUSY, err);
		op_free(o);
	}
}

/* Any thread (librados'): the other gateways' answers. Refused when any has users, failed,
 * or did not answer, unless forced. */
static void on_off_answer(void *arg, int rc, const struct ha_offline_ans *a, size_t n,
			  const char *msg)
{
	struct snap_op *o = arg;
	char list[512] = "";
	size_t at = 0, len = sizeof(list);
	unsigned users = 0, failed = 0;

	o->off_err[0] = 0;
	if (rc < 0) {
		o->off_rc = o->force ? 0 : rc;
		snprintf(o->off_err, sizeof(o->off_err), "%.300s: %.500s%s", o->lu_name,
			 msg ? msg : strerror(-rc),
			 o->force ? " (forced: rolled back anyway)" : ": rollback refused");
		ev_loop_post_node(o->loop, &o->post, on_off_result, o);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int w = 0;

		if (a[i].timed_out) {
			w = snprintf(list + at, len - at,
				     "%sgateway client.%llu did not answer within %u ms",
				     at ? "; " : "", (unsigned long long)a[i].gid, o->off_bound);
		} else if (a[i].rc < 0) {
			failed++;
			w = snprintf(list + at, len - at,
				     "%sgateway client.%llu could not take it offline: %s",
				     at ? "; " : "", (unsigned long long)a[i].gid, a[i].who);
		} else if (a[i].users) {
			users += a[i].users;
			w = snprintf(list + at, len - at,
				     "%sgateway %s (client.%llu): %u I_T nexus(es) use the LU",
				     at ? "; " : "", a[i].who, (unsigned long long)a[i].gid,
				     a[i].users);
		}
		if (w > 0)
			at = at + (size_t)w < len ? at + (size_t)w : len - 1;
	}
	if (at)
		snprintf(o->off_err, sizeof(o->off_err), "%.300s: %.511s%s", o->lu_name, list,
			 o->force ? " (forced: rolled back anyway)"
			 : users || failed
			     ? ": a rollback changes the data under them (log them out first, or "
			       "force)"
			     : ": its I_T nexuses are unknown (force to roll back anyway)");
	o->off_rc = o->force || !at ? 0 : users || failed ? -EBUSY : -ETIMEDOUT;
	ev_loop_post_node(o->loop, &o->post, on_off_result, o);
}

/* librados did not end the notify within its bound: answer; o lives on until it does. */
static void on_off_deadline(struct ev_timer *tm)
{
	struct snap_op *o = tm->arg;
	char err[700];

	snprintf(err, sizeof(err),
		 "%s: the other gateways of the image were not told within %u ms: rollback "
		 "refused",
		 o->lu_name, o->timeout_ms);
	log_warn("target", "%s", err);
	answer(o, -ETIMEDOUT, err);
}

/* 0: the other gateways are being told (on_off_result goes on); -EPERM: this gateway holds
 * no managed lock (nobody to tell); else -errno with err. */
static int tell_offline(struct snap_op *o, char *err, size_t errlen)
{
	unsigned bound = 0;
	int rc;

	ev_timer_init(&o->deadline, on_off_deadline, o);
	rc = ha_dev_lu_offline(o->dev, o->target, o->lun, o->timeout_ms, on_off_answer, o, &bound,
			       err, errlen);
	if (rc < 0)
		return rc;
	o->remote = true;
	o->off_bound = bound;
	/* librados' own bound plus a second for its answer to arrive */
	ev_timer_start(o->loop, &o->deadline, bound + 1000);
	return 0;
}

int ix_target_lun_snap(struct ix_target *t, const char *target, uint32_t lun,
		       const struct ix_snap_args *a, ix_snap_cb cb, void *arg, char *err,
		       size_t errlen)
{
	struct tgt_node *n = tgt_node_get(t, target);
	struct scsi_lu *lu = n && lun < SCSI_MAX_LUNS ? scsi_lun_map_get(n->map, lun) : NULL;
	struct snap_op *o;
	bool quiesce = a->op == BS_SNAP_CREATE || a->op == BS_SNAP_ROLLBACK;
	unsigned users;
	int rc;

	if (!lu) {
		if (n)
			tgt_node_put(n);
		snprintf(err, errlen, "%s: no LUN %u", target, lun);
		return -ENOENT;
	}
	if (!scsi_lu_dev(lu)) {
		tgt_node_put(n);
		snprintf(err, errlen, "%s LUN %u: no medium", target, lun);
		return -ENOMEDIUM;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		tgt_node_put(n);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	scsi_lu_get(lu);
	tgt_node_put(n);
	o->t = t;
	o->loop = ix_target_main_loop(t);
	o->lu = lu;
	o->dev = scsi_lu_dev(lu);
	o->cb = cb;
	o->arg = arg;
	o->timeout_ms = a->timeout_ms;
	snprintf(o->lu_name, sizeof(o->lu_name), "%s LUN %u", target, lun);
	snprintf(o->target, sizeof(o->target), "%s", target);
	o->lun = lun;
	o->force = a->force;
	ev_timer_init(&o->deadline, on_deadline, o);
	o->req.op = (enum bs_snap_op)a->op;
	o->req.done = on_done;
	o->req.arg = o;
	snprintf(o->req.name, sizeof(o->req.name), "%s", a->name ? a->name : "");
	snprintf(o->req.clone_pool, sizeof(o->req.clone_pool), "%s",
		 a->clone_pool ? a->clone_pool : "");
	snprintf(o->req.clone_image, sizeof(o->req.clone_image), "%s",
		 a->clone_image ? a->clone_image : "");
	if (!o->dev->ops->snap) {
		snprintf(err, errlen, "%s: a %s LUN has no snapshots (only RBD LUNs)", o->lu_name,
			 o->dev->ops->name);
		op_free(o);
		return -EOPNOTSUPP;
	}
	if (quiesce && (rc = owner_check(o, err, errlen)) < 0) {
		char ferr[512];

		if (rc == -EPERM && !a->no_forward) { /* CREATE or ROLLBACK: the holder does it */
			rc = forward(o, target, lun, ferr, sizeof(ferr));
			if (rc == 0)
				return 0;
			if (rc != -EPERM) /* else: not a standby (acquiring, fenced): as it was */
				snprintf(err, errlen, "%s", ferr);
		}
		op_free(o);
		return rc;
	}
	if (a->op == BS_SNAP_ROLLBACK && !a->force && (users = scsi_lu_nexus_count(lu)) > 0) {
		snprintf(err, errlen,
			 "%s: %u I_T nexus(es) use the LU: a rollback changes the data under them "
			 "(log them out first, or force)",
			 o->lu_name, users);
		op_free(o);
		return -EBUSY;
	}
	if (!quiesce) {
		rc = bs_dev_snap(o->dev, &o->req);
		if (rc < 0) {
			snprintf(err, errlen, "%s", o->req.err);
			op_free(o);
		}
		return rc;
	}
	if (a->op == BS_SNAP_ROLLBACK) {
		rc = tell_offline(o, err, errlen);
		if (rc == 0)
			return 0; /* on_off_result goes on */
		if (rc != -EPERM) {
			op_free(o);
			return rc;
		}
		/* no managed lock held here: a rollback of this gateway alone */
	}
	rc = start_quiesce(o, err, errlen);
	if (rc < 0)
		op_free(o);
	return rc;
}

/* ---- another gateway rolls an LU of this one back (it holds the image's lock) ---- */

/* An LU offline here for the holder's rollback, on t->snap_offline (main thread). */
struct lu_off {
	struct list_head link;
	struct ix_target *t;
	struct scsi_lu *lu; /* referenced */
	struct ha_snap_req *r; /* the offline notice, until answered */
	struct ev_timer bound; /* back online by itself then */
	unsigned bound_ms;
	bool draining;	       /* scsi_lu_quiesce's cb has not run yet */
	bool online_early;     /* the online notice came while draining */
	bool changed;	       /* with it: the medium changed */
	char target[256];
	uint32_t lun;
};

/* A notice queued for the main loop. */
struct off_in {
	struct ev_post post;
	struct ix_target *t;
	struct ha_snap_req *r;
	char target[256];
	uint32_t lun;
	bool online, changed;
	unsigned bound_ms;
};

/* This gateway's name in its answer: its first portal (address:port). */
static void gateway_name(struct ix_target *t, char *out, size_t len)
{
	const struct cfg_portal *p = t->nlctx ? tgt_portal_cfg(t->lctx[0]) : NULL;

	if (p && p->address && p->address[0])
		snprintf(out, len, "%s:%u", p->address, p->port);
	else
		snprintf(out, len, "pid-%ld", (long)getpid());
}

static void lu_off_free(struct lu_off *e)
{
	ev_timer_stop(ix_target_main_loop(e->t), &e->bound);
	list_del(&e->link);
	scsi_lu_put(e->lu);
	free(e);
}

static void lu_off_online(struct lu_off *e, bool changed, const char *why)
{
	log_info("target", "%s LUN %u: back online (%s)%s", e->target, e->lun, why,
		 changed ? ": MEDIUM MAY HAVE CHANGED to every I_T nexus" : "");
	scsi_lu_resume(e->lu, changed);
	lu_off_free(e);
}

/* Main loop: the holder never said "online" within the bound (dead, or cut off). */
static void on_lu_off_bound(struct ev_timer *tm)
{
	struct lu_off *e = tm->arg;

	log_warn("target",
		 "%s LUN %u: no word from the lock's holder within %u ms of its rollback: back "
		 "online by itself",
		 e->target, e->lun, e->bound_ms);
	lu_off_online(e, true, "the rollback's bound passed");
}

/* Main loop: the LU's writes drained here (rc 0: it is offline), or not. */
static void on_lu_off_quiesced(void *arg, int rc)
{
	struct lu_off *e = arg;
	char who[400];

	e->draining = false;
	if (rc < 0) { /* the quiesce ended itself */
		snprintf(who, sizeof(who), "%s LUN %u: its writes did not drain in %u ms",
			 e->target, e->lun, e->bound_ms);
		ha_offline_req_answer(e->r, rc, 0, who);
		lu_off_free(e);
		return;
	}
	gateway_name(e->t, who, sizeof(who));
	ha_offline_req_answer(e->r, 0, scsi_lu_nexus_count(e->lu), who);
	e->r = NULL;
	if (e->online_early) {
		lu_off_online(e, e->changed, "the holder's online notice");
		return;
	}
	ev_timer_start(ix_target_main_loop(e->t), &e->bound, e->bound_ms);
}

static struct lu_off *lu_off_find(struct ix_target *t, const char *target, uint32_t lun)
{
	struct list_head *pos;

	list_for_each(pos, &t->snap_offline)
	{
		struct lu_off *e = list_entry(pos, struct lu_off, link);

		if (e->lun == lun && strcmp(e->target, target) == 0)
			return e;
	}
	return NULL;
}

static void off_in_run(void *arg)
{
	struct off_in *in = arg;
	struct ix_target *t = in->t;
	struct lu_off *e = lu_off_find(t, in->target, in->lun);
	struct tgt_node *n;
	struct scsi_lu *lu;
	char who[400];
	int rc;

	if (in->online) {
		if (e && e->draining) {
			e->online_early = true;
			e->changed = in->changed;
		} else if (e) {
			lu_off_online(e, in->changed, "the holder's online notice");
		}
		free(in);
		return;
	}
	if (e) {
		snprintf(who, sizeof(who), "%s LUN %u: offline for a rollback already", in->target,
			 in->lun);
		ha_offline_req_answer(in->r, -EBUSY, 0, who);
		free(in);
		return;
	}
	n = tgt_node_get(t, in->target);
	lu = n && in->lun < SCSI_MAX_LUNS ? scsi_lun_map_get(n->map, in->lun) : NULL;
	if (!lu || !scsi_lu_dev(lu) || !(e = calloc(1, sizeof(*e)))) {
		if (n)
			tgt_node_put(n);
		gateway_name(t, who, sizeof(who)); /* not served here: nobody uses it here */
		ha_offline_req_answer(in->r, 0, 0, who);
		free(in);
		return;
	}
	scsi_lu_get(lu);
	tgt_node_put(n);
	*e = (struct lu_off){.t = t, .lu = lu, .r = in->r, .bound_ms = in->bound_ms, .lun = in->lun};
	snprintf(e->target, sizeof(e->target), "%s", in->target);
	ev_timer_init(&e->bound, on_lu_off_bound, e);
	list_add_tail(&e->link, &t->snap_offline);
	e->draining = true;
	rc = scsi_lu_quiesce(lu, ix_target_main_loop(t), in->bound_ms, true, on_lu_off_quiesced, e);
	if (rc < 0) {
		e->draining = false;
		snprintf(who, sizeof(who), "%s LUN %u: %s", in->target, in->lun,
			 rc == -EBUSY	      ? "a snapshot or a rollback of it is under way here"
			 : rc == -EINPROGRESS ? "a SANITIZE of it is in progress here"
					      : strerror(-rc));
		ha_offline_req_answer(in->r, rc, 0, who);
		lu_off_free(e);
	} else {
		log_info("target", "%s LUN %u: offline for a rollback by the lock's holder (at most "
				   "%u ms)",
			 in->target, in->lun, in->bound_ms);
	}
	free(in);
}

void tgt_snap_offline_asked(void *arg, struct ha_snap_req *r, const char *target, uint32_t lun,
			    bool online, bool changed, unsigned bound_ms)
{
	struct ix_target *t = arg;
	struct off_in *in = calloc(1, sizeof(*in));

	if (!in) {
		if (r)
			ha_offline_req_answer(r, -ENOMEM, 0, "out of memory");
		return;
	}
	*in = (struct off_in){.t = t,
			      .r = r,
			      .lun = lun,
			      .online = online,
			      .changed = changed,
			      .bound_ms = bound_ms};
	snprintf(in->target, sizeof(in->target), "%s", target);
	ev_loop_post_node(ix_target_main_loop(t), &in->post, off_in_run, in);
}

void tgt_snap_offline_stop(struct ix_target *t)
{
	struct list_head *pos, *nx;

	for (pos = t->snap_offline.next; pos != &t->snap_offline; pos = nx) {
		struct lu_off *e = list_entry(pos, struct lu_off, link);

		nx = pos->next;
		if (!e->draining) /* else its quiesce still points at it: left */
			lu_off_online(e, true, "the target stops");
	}
}
