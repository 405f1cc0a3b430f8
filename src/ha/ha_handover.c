/* RBD ownership between gateways (docs/ha.md, "Ownership and failover"), on each image's
 * ownership thread (ha_own.c):
 *
 * The owner record: the holder of the lock writes "ix.own.<image>" (format in ha_own_rec.h)
 * right after taking it and again whenever it no longer names it; a standby reads it while it
 * does not name the lock's current holder, to report the holder's ALUA groups.
 *
 * Requests: every gateway watches that object. One that wants the lock takes it if free, else
 * notifies a request and waits at most rbd.handover_timeout_ms for the holder's answer: it
 * hands over (drains its writes and releases: rbd_lock_release does both), refuses (an
 * implicit request while it still gets I/O; a "heal" request, always), or does not answer:
 * then, if it still holds the lock, its lock is broken (librbd blocklists it). Gateways not
 * holding the lock answer at once from librados' thread; the holder answers from its thread,
 * requests going before anything else it has queued. A planned hand-over releases the lock and
 * notifies which group is to take it. */
#include <errno.h>
#include <rados/librados.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_int.h"
#include "ha/ha_own_int.h"
#include "ha/ha_policy.h"
#include "util/log.h"

/* ---- the owner record ("ix.own.<image>", ha_own_rec.h) ---- */

/* Read the record: 0 (r set, *ver its object version; an absent or empty object is
 * -ENOENT, with *ver 0 for absent), -EINVAL (damaged: logged) or -errno. */
static int rec_read(struct rbd_owner *o, struct ha_own_rec *r, uint64_t *ver)
{
	char buf[HA_OWN_REC_MAX + 1], err[160];
	int n = rados_read(o->io, o->oid, buf, sizeof(buf), 0), rc;

	*ver = 0;
	memset(r, 0, sizeof(*r));
	if (n < 0)
		return n;
	*ver = rados_get_last_version(o->io);
	rc = ha_own_rec_decode(buf, (size_t)n, r, err, sizeof(err));
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
void rbd_own_rec_write(struct rbd_owner *o)
{
	struct ha_own_rec old, r = {.gid = o->gid};
	char buf[HA_OWN_REC_MAX];
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
		n = ha_own_rec_encode(&r, buf, sizeof(buf));
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
	rbd_own_changed(o);
	pthread_mutex_unlock(&o->mu);
}

/* Not holding it: read the record when it does not name the holder yet. */
void rbd_own_rec_follow(struct rbd_owner *o)
{
	struct ha_own_rec r;
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
		rbd_own_changed(o);
	}
	pthread_mutex_unlock(&o->mu);
}

/* Holding the lock: the record must name this gateway (someone may have damaged or removed
 * it); write it again if not. */
void rbd_own_rec_verify(struct rbd_owner *o)
{
	struct ha_own_rec r;
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
	rbd_own_rec_write(o);
}

/* ---- gateway to gateway: watch and notify on the record's object ---- */

void rbd_own_ack(struct rbd_owner *o, uint64_t notify_id, uint64_t cookie, const char *reply)
{
	int rc = rados_notify_ack(o->io, o->oid, notify_id, cookie, reply, (int)strlen(reply));

	if (rc < 0)
		log_warn("rbd", "%s: answering a hand-over request on %s: %s", o->name, o->oid,
			 strerror(-rc));
}

/* The same from another thread than librados' (an answer the main loop made later): only while
 * the image is attached, whose ioctx lives that long. */
static int ack_attached(struct rbd_owner *o, uint64_t notify_id, uint64_t cookie,
			const char *reply, int n, const char *what)
{
	int rc = 0;

	pthread_mutex_lock(&o->mu);
	if (o->attached)
		rc = rados_notify_ack(o->io, o->oid, notify_id, cookie, reply, n);
	pthread_mutex_unlock(&o->mu);
	if (rc < 0)
		log_warn("rbd", "%s: answering %s on %s: %s", o->name, what, o->oid, strerror(-rc));
	return rc;
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

/* ---- snapshot requests (ha.h: ha_dev_snap_forward; docs/snapshots.md) ---- */

struct ha_snap_req {
	struct rbd_owner *o; /* referenced until answered */
	uint64_t notify_id, cookie, gid;
	char name[HA_OWN_SNAP_MAX];
};

void ha_snap_req_answer(struct ha_snap_req *r, int rc, unsigned held_ms, const char *msg)
{
	struct rbd_owner *o = r->o;
	char reply[HA_OWN_MSG_MAX], cut[HA_OWN_MSG_MAX - 32];
	int n;

	snprintf(cut, sizeof(cut), "%s", msg && msg[0] ? msg : strerror(rc < 0 ? -rc : EIO));
	n = ha_own_snap_reply_encode(rc < 0 && rc > -4096 ? rc
				     : rc		  ? -EIO
							  : 0,
				     held_ms, cut, reply, sizeof(reply));
	if (n < 0)
		n = snprintf(reply, sizeof(reply), "snap-failed %d the answer cannot be encoded",
			     EIO);
	if (ack_attached(o, r->notify_id, r->cookie, reply, n, "a snapshot request") == 0)
		log_info("rbd", "%s: snapshot %s for client.%llu: answered %.*s", o->name, r->name,
			 (unsigned long long)r->gid, n, reply);
	rbd_own_put(o);
	free(r);
}

/* librados' thread: a standby asks for a snapshot. The holder hands it to the target (which
 * answers later, from its main loop); anyone else answers at once (not the holder). */
static void snap_asked(struct rbd_owner *o, const struct ha_own_msg *m, uint64_t notify_id,
		       uint64_t cookie, int own)
{
	struct ha_ctx *c = o->ctx;
	struct ha_snap_req *r;

	if (own != RBD_OWN_OWNER || !(r = calloc(1, sizeof(*r)))) {
		rbd_own_ack(o, notify_id, cookie,
			    own == RBD_OWN_OWNER    ? "snap-failed 12 out of memory"
			    : own == RBD_OWN_FENCED ? "fenced"
						    : "standby");
		return;
	}
	atomic_fetch_add(&o->refs, 1);
	*r = (struct ha_snap_req){.o = o, .notify_id = notify_id, .cookie = cookie, .gid = m->gid};
	snprintf(r->name, sizeof(r->name), "%s", m->name);
	log_info("rbd",
		 "%s: client.%llu asks for %s %s of %s LUN %u (this gateway holds the lock)",
		 o->name, (unsigned long long)m->gid,
		 m->kind == HA_OWN_ROLLBACK ? "rollback to snapshot" : "snapshot", m->name,
		 m->target, m->lun);
	pthread_mutex_lock(&c->snap_mu);
	if (c->snap_fn) {
		c->snap_fn(c->snap_arg, r, m->target, m->lun, m->name,
			   m->kind == HA_OWN_ROLLBACK
			       ? (m->changed ? HA_SNAP_ROLLBACK_FORCE : HA_SNAP_ROLLBACK)
			       : HA_SNAP_CREATE,
			   m->window_ms);
		r = NULL;
	}
	pthread_mutex_unlock(&c->snap_mu);
	if (r)
		ha_snap_req_answer(r, -ESHUTDOWN, 0, "the lock's holder is stopping its target");
}

/* An asynchronous notify on the image's owner record object: done(arg) runs on librados'
 * thread when every watcher answered or ms passed (the reply in *reply, *rlen). 0 or -errno
 * (nothing in flight then). */
static int notify_async(struct rbd_owner *o, const char *msg, size_t n, unsigned ms,
			rados_callback_t done, void *arg, rados_completion_t *comp, char **reply,
			size_t *rlen)
{
	int rc = rados_aio_create_completion2(arg, done, comp);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&o->mu); /* the image's ioctx lives while attached */
	rc = o->attached ? rados_aio_notify(o->io, o->oid, *comp, msg, n, ms, reply, rlen)
			 : -ENOTCONN;
	pthread_mutex_unlock(&o->mu);
	if (rc < 0)
		rados_aio_release(*comp);
	return rc;
}

struct snap_fwd {
	struct rbd_owner *o; /* referenced until the answer */
	rados_completion_t comp;
	char *reply;
	size_t rlen;
	unsigned bound_ms;
	ha_snap_answer_cb cb;
	void *arg;
};

/* librados' thread: the notify ended (every watcher answered, or the bound passed). */
static void fwd_done(rados_completion_t comp, void *arg)
{
	struct snap_fwd *f = arg;
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t nacks = 0, ntos = 0;
	char msg[HA_OWN_MSG_MAX] = "", out[HA_OWN_MSG_MAX + 256];
	unsigned held = 0;
	int rc = rados_aio_get_return_value(comp), hrc = 0;
	bool got = false;

	if (f->reply &&
	    rados_decode_notify_response(f->reply, f->rlen, &acks, &nacks, &tos, &ntos) == 0) {
		for (size_t i = 0; i < nacks && !got; i++)
			got = acks[i].payload &&
			      ha_own_snap_reply_decode(acks[i].payload, acks[i].payload_len, &hrc,
						       &held, msg, sizeof(msg)) == 0;
		rados_free_notify_response(acks, nacks, tos);
	}
	if (got) {
		f->cb(f->arg, hrc, held, hrc ? msg : NULL);
	} else if (rc == -ETIMEDOUT || ntos) {
		snprintf(out, sizeof(out),
			 "%s: the lock's holder did not answer within %u ms (it may take the "
			 "snapshot still: rbd snap ls tells)",
			 f->o->name, f->bound_ms);
		f->cb(f->arg, -ETIMEDOUT, 0, out);
	} else if (rc < 0) {
		snprintf(out, sizeof(out), "%s: asking the lock's holder through %s: %s",
			 f->o->name, f->o->oid, strerror(-rc));
		f->cb(f->arg, rc, 0, out);
	} else {
		snprintf(out, sizeof(out),
			 "%s: no gateway holds the image's exclusive lock (%zu answered, none "
			 "the holder): try again once one does",
			 f->o->name, nacks);
		f->cb(f->arg, -EHOSTUNREACH, 0, out);
	}
	if (f->reply)
		rados_buffer_free(f->reply);
	rados_aio_release(comp);
	rbd_own_put(f->o);
	free(f);
}

int ha_dev_snap_forward(struct bs_dev *dev, const char *target, uint32_t lun, const char *name,
			enum ha_snap_what what, unsigned timeout_ms, ha_snap_answer_cb cb,
			void *arg, unsigned *bound_ms, char *err, size_t errlen)
{
	struct bs_rbd_handle h;
	struct rbd_owner *o = bs_rbd_handle(dev, &h) == 0 && h.online ? h.own : NULL;
	struct ha_own_msg m = {.kind = what == HA_SNAP_CREATE ? HA_OWN_SNAP : HA_OWN_ROLLBACK,
			       .window_ms = timeout_ms,
			       .lun = lun,
			       .changed = what == HA_SNAP_ROLLBACK_FORCE};
	char msg[HA_OWN_MSG_MAX];
	struct snap_fwd *f;
	int n, rc;

	if (!o || atomic_load(&o->own) != RBD_OWN_STANDBY) {
		snprintf(err, errlen, "not a standby of an image with exclusive_lock");
		return -EPERM;
	}
	m.gid = o->gid;
	snprintf(m.target, sizeof(m.target), "%s", target);
	snprintf(m.name, sizeof(m.name), "%s", name);
	n = strlen(target) < sizeof(m.target) && strlen(name) < sizeof(m.name)
		? ha_own_msg_encode(&m, msg, sizeof(msg))
		: -EINVAL;
	if (n < 0) {
		snprintf(err, errlen,
			 "%s: the target's or the snapshot's name cannot be sent to the lock's "
			 "holder",
			 o->name);
		return -EINVAL;
	}
	if (!(f = calloc(1, sizeof(*f)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* librados counts a notify's timeout in whole seconds (rounded down): round up */
	*f = (struct snap_fwd){.o = o,
			       .bound_ms = (timeout_ms + o->notify_ms +
					    (what == HA_SNAP_CREATE ? 0 : o->notify_ms + 999) + 999) /
					   1000 * 1000,
			       .cb = cb,
			       .arg = arg};
	*bound_ms = f->bound_ms;
	atomic_fetch_add(&o->refs, 2); /* f's, and this call's own */
	rc = notify_async(o, msg, (size_t)n, f->bound_ms, fwd_done, f, &f->comp, &f->reply,
			  &f->rlen);
	if (rc < 0) {
		snprintf(err, errlen, "%s: asking the lock's holder through %s: %s", o->name,
			 o->oid, strerror(-rc));
		rbd_own_put(o);
		free(f);
	} else {
		log_info("rbd", "%s: snapshot %s: asked the lock's holder (at most %u ms)", o->name,
			 name, *bound_ms);
	}
	rbd_own_put(o);
	return rc;
}

/* ---- a rollback's notices (ha.h: ha_dev_lu_offline; docs/snapshots.md) ---- */

void ha_offline_req_answer(struct ha_snap_req *r, int rc, unsigned users, const char *who)
{
	struct rbd_owner *o = r->o;
	char reply[HA_OWN_MSG_MAX], cut[HA_OWN_MSG_MAX - 32];
	int n;

	snprintf(cut, sizeof(cut), "%s", who && who[0] ? who : rc ? strerror(-rc) : "-");
	n = ha_own_offline_reply_encode(rc < 0 && rc > -4096 ? rc : rc ? -EIO : 0, users, cut,
					reply, sizeof(reply));
	if (n < 0)
		n = snprintf(reply, sizeof(reply), "offline-failed %d the answer cannot be encoded",
			     EIO);
	if (ack_attached(o, r->notify_id, r->cookie, reply, n, "a rollback's offline notice") == 0)
		log_info("rbd", "%s: offline for client.%llu's rollback: answered %.*s", o->name,
			 (unsigned long long)r->gid, n, reply);
	rbd_own_put(o);
	free(r);
}

/* librados' thread: the holder's offline or online notice; the target handles it on its main
 * loop. An online notice is answered at once. */
static void offline_asked(struct rbd_owner *o, const struct ha_own_msg *m, uint64_t notify_id,
			  uint64_t cookie)
{
	struct ha_ctx *c = o->ctx;
	struct ha_snap_req *r = NULL;
	bool online = m->kind == HA_OWN_ONLINE;

	if (online) {
		rbd_own_ack(o, notify_id, cookie, "");
	} else {
		if (!(r = calloc(1, sizeof(*r)))) {
			rbd_own_ack(o, notify_id, cookie, "offline-failed 12 out of memory");
			return;
		}
		atomic_fetch_add(&o->refs, 1);
		*r = (struct ha_snap_req){
		    .o = o, .notify_id = notify_id, .cookie = cookie, .gid = m->gid};
	}
	log_info("rbd", "%s: client.%llu: %s LUN %u %s", o->name, (unsigned long long)m->gid,
		 m->target, m->lun,
		 online ? (m->changed ? "back online after its rollback"
				      : "back online (its rollback did not happen)")
			: "offline for a rollback by the lock's holder");
	pthread_mutex_lock(&c->snap_mu);
	if (c->off_fn) {
		c->off_fn(c->off_arg, r, m->target, m->lun, online, m->changed, m->window_ms);
		r = NULL;
	}
	pthread_mutex_unlock(&c->snap_mu);
	if (r)
		ha_offline_req_answer(r, -ESHUTDOWN, 0, "this gateway is stopping its target");
}

struct off_note {
	struct rbd_owner *o; /* referenced until the notify ends */
	rados_completion_t comp;
	char *reply;
	size_t rlen;
	ha_offline_cb cb; /* NULL: an online notice */
	void *arg;
};

/* librados' thread: every other gateway answered the notice, or the bound passed. */
static void off_done(rados_completion_t comp, void *arg)
{
	struct off_note *f = arg;
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t nacks = 0, ntos = 0, n = 0;
	struct ha_offline_ans *a = NULL;
	char out[HA_OWN_MSG_MAX + 256];
	int rc = rados_aio_get_return_value(comp);

	if (!f->cb) {
		if (rc < 0 && rc != -ETIMEDOUT)
			log_warn("rbd", "%s: the online notice through %s: %s (the gateways come "
					"back by their bound)",
				 f->o->name, f->o->oid, strerror(-rc));
	} else if (f->reply && rados_decode_notify_response(f->reply, f->rlen, &acks, &nacks, &tos,
							    &ntos) == 0) {
		a = calloc(nacks + ntos + 1, sizeof(*a));
		for (size_t i = 0; a && i < nacks; i++) {
			struct ha_offline_ans *x = &a[n];

			if (acks[i].notifier_id == f->o->gid)
				continue; /* this gateway */
			x->gid = acks[i].notifier_id;
			if (!acks[i].payload ||
			    ha_own_offline_reply_decode(acks[i].payload, acks[i].payload_len, &x->rc,
							&x->users, x->who, sizeof(x->who)) < 0) {
				x->rc = -EPROTO;
				snprintf(x->who, sizeof(x->who),
					 "answered without going offline (not this ix version?)");
			}
			n++;
		}
		for (size_t i = 0; a && i < ntos; i++) {
			if (tos[i].notifier_id == f->o->gid)
				continue;
			a[n].gid = tos[i].notifier_id;
			a[n].timed_out = true;
			a[n].rc = -ETIMEDOUT;
			n++;
		}
		rados_free_notify_response(acks, nacks, tos);
		if (a)
			f->cb(f->arg, 0, a, n, NULL);
		else
			f->cb(f->arg, -ENOMEM, NULL, 0, "out of memory");
		free(a);
	} else {
		snprintf(out, sizeof(out), "%s: telling the other gateways through %s: %s",
			 f->o->name, f->o->oid, strerror(rc < 0 ? -rc : EIO));
		f->cb(f->arg, rc < 0 ? rc : -EIO, NULL, 0, out);
	}
	if (f->reply)
		rados_buffer_free(f->reply);
	rados_aio_release(comp);
	rbd_own_put(f->o);
	free(f);
}

/* Send m to every watcher of the owner record (bound: the notify's, whole seconds). */
static int off_send(struct rbd_owner *o, struct ha_own_msg *m, unsigned notify_ms,
		    ha_offline_cb cb, void *arg, char *err, size_t errlen)
{
	char msg[HA_OWN_MSG_MAX];
	struct off_note *f;
	int n, rc;

	m->gid = o->gid;
	n = ha_own_msg_encode(m, msg, sizeof(msg));
	if (n < 0) {
		snprintf(err, errlen, "%s: the target's name cannot be sent to the other gateways",
			 o->name);
		return -EINVAL;
	}
	if (!(f = calloc(1, sizeof(*f)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*f = (struct off_note){.o = o, .cb = cb, .arg = arg};
	atomic_fetch_add(&o->refs, 1);
	rc = notify_async(o, msg, (size_t)n, notify_ms, off_done, f, &f->comp, &f->reply, &f->rlen);
	if (rc < 0) {
		snprintf(err, errlen, "%s: telling the other gateways through %s: %s", o->name,
			 o->oid, strerror(-rc));
		rbd_own_put(o);
		free(f);
	}
	return rc;
}

int ha_dev_lu_offline(struct bs_dev *dev, const char *target, uint32_t lun, unsigned timeout_ms,
		      ha_offline_cb cb, void *arg, unsigned *bound_ms, char *err, size_t errlen)
{
	struct bs_rbd_handle h;
	struct rbd_owner *o = bs_rbd_handle(dev, &h) == 0 && h.online ? h.own : NULL;
	struct ha_own_msg m = {.kind = HA_OWN_OFFLINE, .lun = lun};
	int rc;

	*bound_ms = 0;
	if (!o || atomic_load(&o->own) != RBD_OWN_OWNER) {
		snprintf(err, errlen, "not the holder of an image with exclusive_lock");
		return -EPERM;
	}
	if (strlen(target) >= sizeof(m.target)) {
		snprintf(err, errlen, "%s: the target's name is too long to send", o->name);
		return -EINVAL;
	}
	snprintf(m.target, sizeof(m.target), "%s", target);
	/* each gateway's own bound: the call's, plus the hand-over's (a dead holder) */
	m.window_ms = timeout_ms + o->notify_ms;
	/* librados counts a notify's timeout in whole seconds (rounded down): round up */
	*bound_ms = (o->notify_ms + 999) / 1000 * 1000;
	atomic_fetch_add(&o->refs, 1);
	rc = off_send(o, &m, *bound_ms, cb, arg, err, errlen);
	if (rc == 0)
		log_info("rbd", "%s: %s LUN %u: the other gateways take it offline (at most %u ms)",
			 o->name, target, lun, *bound_ms);
	rbd_own_put(o);
	return rc;
}

int ha_dev_lu_online(struct bs_dev *dev, const char *target, uint32_t lun, bool changed)
{
	struct bs_rbd_handle h;
	struct rbd_owner *o = bs_rbd_handle(dev, &h) == 0 && h.online ? h.own : NULL;
	struct ha_own_msg m = {.kind = HA_OWN_ONLINE, .lun = lun, .changed = changed};
	char err[512];
	int rc;

	if (!o || strlen(target) >= sizeof(m.target))
		return -EINVAL;
	snprintf(m.target, sizeof(m.target), "%s", target);
	atomic_fetch_add(&o->refs, 1);
	rc = off_send(o, &m, (o->notify_ms + 999) / 1000 * 1000, NULL, NULL, err, sizeof(err));
	if (rc < 0)
		log_warn("rbd", "%s (the other gateways come back by their bound)", err);
	rbd_own_put(o);
	return rc;
}

/* librados' thread: a request or notice from a gateway (maybe this one). Never waits on the
 * owner's thread: a request to the holder is queued (its answer comes from the thread once it
 * has released the lock, or not); every other message is answered here at once. */
static void watch_cb(void *arg, uint64_t notify_id, uint64_t cookie, uint64_t notifier_id,
		     void *data, size_t len)
{
	struct rbd_owner *o = arg;
	struct ha_own_msg m;
	struct own_job *j;
	int own = atomic_load(&o->own);

	(void)notifier_id;
	if (ha_own_msg_decode(data, len, &m) < 0 || m.gid == o->gid) {
		rbd_own_ack(o, notify_id, cookie, "");
		return;
	}
	if (m.kind == HA_OWN_FREE) {
		bool idle = false;

		rbd_own_ack(o, notify_id, cookie, "");
		if (own == RBD_OWN_STANDBY && my_group(o, m.group) &&
		    atomic_compare_exchange_strong(&o->job, &idle, true)) {
			if (!(j = calloc(1, sizeof(*j)))) {
				atomic_store(&o->job, false);
				return;
			}
			*j = (struct own_job){.kind = JOB_TAKE, .mode = HA_TAKE_FREE};
			log_warn("rbd",
				 "%s: client.%llu released the lock for group %u (this "
				 "gateway's): taking it",
				 o->name, (unsigned long long)m.gid, m.group);
			if (rbd_own_queue_job(o, j) < 0) {
				atomic_store(&o->job, false);
				free(j);
			}
		}
		return;
	}
	if (m.kind == HA_OWN_SNAP || m.kind == HA_OWN_ROLLBACK) {
		snap_asked(o, &m, notify_id, cookie, own);
		return;
	}
	if (m.kind == HA_OWN_OFFLINE || m.kind == HA_OWN_ONLINE) {
		offline_asked(o, &m, notify_id, cookie);
		return;
	}
	/* holding the lock, or about to hold it or give it up: the thread answers once that is
	 * over (an asker that saw no answer from the holder would break its lock) */
	if (own == RBD_OWN_STANDBY || own == RBD_OWN_FENCED || !(j = calloc(1, sizeof(*j)))) {
		rbd_own_ack(o, notify_id, cookie, own == RBD_OWN_FENCED ? "fenced" : "standby");
		return;
	}
	*j =
	    (struct own_job){.kind = JOB_ASKED, .ask = m, .notify_id = notify_id, .cookie = cookie};
	rbd_own_queue_front(o, j);
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
void rbd_own_watch_start(struct rbd_owner *o)
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
	if (rc == -ESHUTDOWN) { /* the next check would see it too: no retry */
		rbd_own_blocklisted(o, "watching the owner record");
		return;
	}
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

void rbd_own_watch_stop(struct rbd_owner *o)
{
	if (!o->watching)
		return;
	rados_unwatch2(o->io, o->watch);
	rados_watch_flush(rados_ioctx_get_cluster(o->io)); /* no callback of ours after this */
	o->watching = false;
}

/* Ask the holder to hand over; the answer of whichever watcher held the lock. SILENT: none
 * did within notify_ms (dead, stopped, cut off, or not an ix gateway). ALIVE: the holder
 * (holder_gid, from its record; 0 unknown) answered, but neither released nor refused (it
 * let the lock go a moment ago, or speaks another version): never a reason to break it. */
static enum ha_answer ask(struct rbd_owner *o, int mode, uint32_t window_ms, uint64_t holder_gid,
			  char *why, size_t whylen)
{
	struct ha_own_msg m = {.kind = HA_OWN_ASK,
			       .ask = mode == HA_TAKE_IMPLICIT ? HA_OWN_IMPLICIT
				      : mode == HA_TAKE_HEAL   ? HA_OWN_HEAL
							       : HA_OWN_EXPLICIT,
			       .window_ms = window_ms,
			       .gid = o->gid};
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t nacks = 0, ntos = 0, rlen = 0;
	char msg[HA_OWN_MSG_MAX], *reply = NULL;
	enum ha_answer a = HA_ANSWER_SILENT;
	int n = ha_own_msg_encode(&m, msg, sizeof(msg)), rc;

	if (n < 0)
		return HA_ANSWER_SILENT;
	rc = rados_notify2(o->io, o->oid, msg, n, o->notify_ms, &reply, &rlen);
	if (rc < 0 && rc != -ETIMEDOUT)
		log_warn("rbd", "%s: asking the holder through %s: %s", o->name, o->oid,
			 strerror(-rc));
	if (reply && rados_decode_notify_response(reply, rlen, &acks, &nacks, &tos, &ntos) == 0) {
		for (size_t i = 0; i < nacks; i++) {
			enum ha_own_reply k =
			    ha_own_reply_kind(acks[i].payload, acks[i].payload_len);

			if (k == HA_OWN_REFUSED) {
				a = HA_ANSWER_REFUSED;
				snprintf(why, whylen, "client.%llu: %.*s",
					 (unsigned long long)acks[i].notifier_id,
					 (int)acks[i].payload_len, acks[i].payload);
			} else if (k == HA_OWN_RELEASED && a != HA_ANSWER_REFUSED) {
				a = HA_ANSWER_RELEASED;
				snprintf(why, whylen, "client.%llu",
					 (unsigned long long)acks[i].notifier_id);
			} else if (holder_gid && acks[i].notifier_id == holder_gid &&
				   a == HA_ANSWER_SILENT) {
				a = HA_ANSWER_ALIVE;
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

	rbd_own_holder_set(o, who);
	rbd_own_rec_follow(o);
	pthread_mutex_lock(&o->mu);
	gid = strcmp(o->rec.holder, who) == 0 ? o->rec.gid : 0;
	pthread_mutex_unlock(&o->mu);
	return gid;
}

/* Take the lock while it is free; 0, -EROFS (someone was quicker), -errno. */
static int take_free(struct rbd_owner *o, const char *how)
{
	int rc;

	rbd_own_set(o, RBD_OWN_ACQUIRING, "taking the image's exclusive lock (%s)", how);
	rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (rc == 0)
		rbd_own_took(o, "holds the image's exclusive lock (%s)", how);
	return rc;
}

/* A take-over (docs/ha.md): a free lock is taken; a held one is asked for, and the holder
 * hands it over (explicit: always; implicit: when the initiator really left it), refuses
 * (implicit, it still gets I/O: -EAGAIN, nothing changes), or does not answer within
 * notify_ms: then its lock is broken (librbd blocklists it) and taken. */
int rbd_own_run_take(struct rbd_owner *o, int mode, uint32_t window_ms)
{
	char who[128] = "", again[128], why[192] = "";
	enum ha_answer a;
	bool moved;
	int rc = -EBUSY;

	if (atomic_load(&o->own) == RBD_OWN_FENCED)
		return -ESHUTDOWN;
	if (atomic_load(&o->own) == RBD_OWN_OWNER)
		return -EALREADY;
	for (int round = 0; round < OWN_TAKE_ROUNDS; round++) {
		rc = rbd_own_holder(o, who, sizeof(who));
		if (rc < 0)
			break;
		if (!who[0]) {
			rc = take_free(o, "it was free");
			if (rc == -EROFS)
				continue;
			break;
		}
		if (mode == HA_TAKE_FREE) {
			rc = -EBUSY; /* released for this gateway, yet another took it */
			break;
		}
		a = ask(o, mode, window_ms, holder_gid(o, who), why, sizeof(why));
		/* did the lock move meanwhile (asked only when the holder did not decide)? */
		moved = (a == HA_ANSWER_SILENT || a == HA_ANSWER_ALIVE) &&
			rbd_own_holder(o, again, sizeof(again)) == 0 && strcmp(again, who) != 0;
		switch (ha_policy_take_step(mode, a, moved)) {
		case HA_STEP_AGAIN: /* it let it go, or it moved: ask whoever has it now */
			continue;
		case HA_STEP_GIVE_UP:
			if (a == HA_ANSWER_ALIVE)
				log_warn("rbd",
					 "%s: the holder %s is alive but did not hand over (%s)",
					 o->name, who, why);
			return -EAGAIN; /* alive; or asked to heal, it answers: it heals itself */
		case HA_STEP_REFUSED:
			log_warn("rbd", "%s: the holder %s keeps the lock (%s): not taking it",
				 o->name, who, why);
			rbd_own_refused_set(o, true);
			return -EAGAIN;
		case HA_STEP_TAKE:
			rc = take_free(o, "handed over by its holder");
			if (rc == -EROFS)
				continue;
			if (rc == 0)
				log_warn("rbd", "%s: %s handed the lock over", o->name, why);
			return rc < 0 ? (rbd_own_take_failed(o, who, rc), rc) : 0;
		case HA_STEP_BREAK:
			rbd_own_set(o, RBD_OWN_ACQUIRING,
				    "the holder %s did not answer within %u ms: breaking its lock",
				    who, o->notify_ms);
			rc = rbd_lock_break(o->image, RBD_LOCK_MODE_EXCLUSIVE, who);
			if (rc == 0)
				rc = rbd_lock_acquire(o->image, RBD_LOCK_MODE_EXCLUSIVE);
			if (rc == 0) {
				rbd_own_took(o, "holds the image's exclusive lock (broke %s's)",
					     who);
				log_warn("rbd",
					 "%s: took over the image's exclusive lock from %s "
					 "(blocklisted)",
					 o->name, who);
				return 0;
			}
			if (rc == -EBUSY || rc == -ENOENT || rc == -EROFS)
				continue;
			rbd_own_take_failed(o, who, rc);
			return rc;
		}
	}
	if (rc == -ESHUTDOWN || (rc < 0 && atomic_load(&o->own) != RBD_OWN_STANDBY))
		rbd_own_take_failed(o, who, rc);
	return rc;
}

/* The holder, asked to hand over (docs/ha.md): explicitly, always; implicitly only if no I/O
 * went to the target's LUs through it for half the asker's window (group_idle); to heal a
 * split, never. Handing over drains the writes in flight and releases the lock
 * (rbd_lock_release does both); this gateway stays healthy, standby. */
void rbd_own_run_asked(struct rbd_owner *o, struct own_job *j, bool closing)
{
	static const char *const why[] = {"explicit", "implicit", "heal"};
	const struct ha_own_msg *m = &j->ask;
	char reply[160] = "standby";
	uint64_t idle = 0;
	int rc;

	if (atomic_load(&o->own) != RBD_OWN_OWNER) {
		rbd_own_ack(o, j->notify_id, j->cookie, reply);
		return;
	}
	if (m->ask == HA_OWN_IMPLICIT)
		idle = rbd_own_group_idle(o, m->window_ms);
	if (!closing && !ha_policy_may_hand_over(m->ask, idle, m->window_ms)) {
		if (m->ask == HA_OWN_HEAL) {
			snprintf(reply, sizeof(reply), "refused this gateway holds it and answers");
			rbd_own_ack(o, j->notify_id, j->cookie, reply);
			return;
		}
		snprintf(reply, sizeof(reply), "refused I/O through this gateway %llu ms ago",
			 (unsigned long long)idle);
		log_warn("rbd",
			 "%s: client.%llu asks for the lock (I/O on its standby path for %u "
			 "ms); refused: this gateway had I/O %llu ms ago",
			 o->name, (unsigned long long)m->gid, m->window_ms,
			 (unsigned long long)idle);
		rbd_own_ack(o, j->notify_id, j->cookie, reply);
		return;
	}
	rbd_own_set(o, RBD_OWN_RELEASING, "handing the lock over to client.%llu (%s)",
		    (unsigned long long)m->gid,
		    closing			? "closing"
		    : m->ask == HA_OWN_IMPLICIT ? "its standby path has the I/O"
						: "asked");
	rc = rbd_lock_release(o->image);
	if (rc == 0) {
		o->check_soon = true; /* who holds it now: the next check, in a moment */
		rbd_own_set(o, RBD_OWN_STANDBY,
			    "handed the lock over to client.%llu at its request (%s)",
			    (unsigned long long)m->gid, why[m->ask <= HA_OWN_HEAL ? m->ask : 0]);
		snprintf(reply, sizeof(reply), "released");
	} else if (rc == -ESHUTDOWN) {
		rbd_own_blocklisted(o, "handing the lock over");
		snprintf(reply, sizeof(reply), "fenced");
	} else {
		rbd_own_set(o, RBD_OWN_OWNER,
			    "holds the image's exclusive lock (releasing it failed: %s)",
			    strerror(-rc));
		snprintf(reply, sizeof(reply), "refused releasing failed: %s", strerror(-rc));
	}
	rbd_own_ack(o, j->notify_id, j->cookie, reply);
}

/* A planned hand-over (SET TARGET PORT GROUPS on the holder): release, then tell the others
 * which group is to take it (0: none). */
int rbd_own_run_release(struct rbd_owner *o, uint16_t group)
{
	struct ha_own_msg m = {.kind = HA_OWN_FREE, .group = group, .gid = o->gid};
	char msg[HA_OWN_MSG_MAX], *reply = NULL;
	size_t rlen = 0;
	int rc, n;

	if (atomic_load(&o->own) != RBD_OWN_OWNER)
		return atomic_load(&o->own) == RBD_OWN_FENCED ? -ESHUTDOWN : -EALREADY;
	rbd_own_set(o, RBD_OWN_RELEASING, "releasing the lock (SET TARGET PORT GROUPS)");
	rc = rbd_lock_release(o->image);
	if (rc < 0) {
		if (rc == -ESHUTDOWN)
			rbd_own_blocklisted(o, "releasing the lock");
		else
			rbd_own_set(o, RBD_OWN_OWNER,
				    "holds the image's exclusive lock (releasing it failed: %s)",
				    strerror(-rc));
		return rc;
	}
	o->check_soon = true;
	rbd_own_set(o, RBD_OWN_STANDBY, "released the lock (SET TARGET PORT GROUPS): %s%.0u",
		    group ? "for group " : "nobody asked to take it", group);
	n = ha_own_msg_encode(&m, msg, sizeof(msg));
	if (n > 0 && rados_notify2(o->io, o->oid, msg, n, o->notify_ms, &reply, &rlen) < 0)
		log_warn("rbd", "%s: not every gateway heard that the lock is free", o->name);
	if (reply)
		rados_buffer_free(reply);
	return 0;
}
