/* The shared persistent reservation store's object (ha_pr.c has the design): reading and
 * writing it with its version, adopting the state it holds, the watch and its callbacks, the
 * notifies to the other gateways and the fencing of those that do not acknowledge. Runs on the
 * store's helper thread, but for the watch callbacks (librados' threads). */
#include <errno.h>
#include <pthread.h>
#include <rados/librados.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "backend/bs_rbd.h"
#include "ha/ha_pr_int.h"
#include "util/bytes.h"
#include "util/list.h"
#include "util/log.h"

/* ---- the object ---- */

/* A new object's epoch: random, never 0 (0 stands for "no object"). */
uint64_t ha_pr_new_epoch(void)
{
	uint64_t e = 0;

	while (e == 0)
		if (getrandom(&e, sizeof(e), 0) != (ssize_t)sizeof(e))
			e = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
	return e;
}

/* Read and decode the object: 0 (st, v, *ver set; an absent object is the empty state with
 * version 0), -EINVAL (damaged: err says how) or -errno. */
int ha_pr_obj_read(struct pr_rados *r, struct pr_state *st, struct ha_pr_obj_ver *v, uint64_t *ver,
		   char *err, size_t errlen)
{
	char *buf = malloc(HA_PR_OBJ_MAX + 1);
	int n, rc;

	if (!buf)
		return -ENOMEM;
	n = rados_read(r->io, r->oid, buf, HA_PR_OBJ_MAX + 1, 0);
	if (n == -ENOENT) {
		free(buf);
		pr_state_clear(st);
		*v = (struct ha_pr_obj_ver){0, 0}; /* epoch 0: no object */
		*ver = 0;
		return 0;
	}
	if (n < 0) {
		snprintf(err, errlen, "%s: read: %s", r->name, strerror(-n));
		free(buf);
		return n;
	}
	*ver = rados_get_last_version(r->io);
	rc = ha_pr_obj_decode(buf, (size_t)n, st, v, NULL, err, errlen);
	free(buf);
	if (rc == -EINVAL) {
		char what[400];

		snprintf(what, sizeof(what), "%s", err);
		snprintf(err, errlen,
			 "%s: %s (remove it with `rados rm` to drop every "
			 "reservation of the LU)",
			 r->name, what);
	}
	return rc;
}

/* Versioned write: 0, -EAGAIN (another gateway wrote since ver: read again) or -errno. */
int ha_pr_obj_write(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v,
		    uint64_t ver)
{
	rados_write_op_t op = rados_create_write_op();
	char *buf;
	size_t len;
	int rc;

	if (!op)
		return -ENOMEM;
	rc = ha_pr_obj_encode(st, v, NULL, &buf, &len);
	if (rc) {
		rados_release_write_op(op);
		return rc;
	}
	if (ver)
		rados_write_op_assert_version(op, ver);
	else
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	rados_write_op_write_full(op, buf, len);
	rc = rados_write_op_operate(op, r->io, r->oid, NULL, 0);
	rados_release_write_op(op);
	free(buf);
	if (rc == -ERANGE || rc == -EOVERFLOW || rc == -ECANCELED || rc == -EEXIST)
		return -EAGAIN;
	return rc;
}

/* ---- adopting a state ---- */

static bool ua_seen_locked(struct pr_rados *r, const struct ha_pr_obj_ver *v)
{
	uint64_t seq = v->epoch ^ (v->seq * 0x9e3779b97f4a7c15ull);

	for (unsigned i = 0; i < PR_RADOS_UA_RING; i++)
		if (r->ua_seen[i] == seq)
			return true;
	r->ua_seen[r->ua_next++ % PR_RADOS_UA_RING] = seq;
	return false;
}

/* lu->resv_holder from the state's SPC-2 reservation: the nexus of this gateway that holds it,
 * SCSI_RESV_REMOTE when it was made through another gateway (every nexus here conflicts), or
 * NULL. One made through this gateway whose nexus is gone here is NULL too (its loss is on its
 * way to the object: spc2_lost). lu->lock held. */
void ha_pr_spc2_publish_locked(struct pr_rados *r)
{
	struct scsi_lu *lu = r->lu;
	struct pr_nexus_id who;
	struct scsi_nexus *h = NULL;
	struct list_head *pos;

	if (lu->pr.spc2_iport && lu->pr.spc2_gid != r->gid)
		h = SCSI_RESV_REMOTE;
	else if (lu->pr.spc2_iport)
		list_for_each(pos, &lu->itls)
		{
			struct scsi_itl *itl = list_entry(pos, struct scsi_itl, lu_link);

			who = (struct pr_nexus_id){itl->nx->initiator_port, itl->nx->target_port};
			if (pr_spc2_is(&lu->pr, &who)) {
				h = itl->nx;
				break;
			}
		}
	atomic_store(&lu->resv_holder, h);
}

/* Take st (version v) as the LU's state if it is newer (a later write, or another epoch: the
 * object was removed and created again), and queue the unit attentions of fx unless this
 * version's were queued already. A newer state that does not follow the one held (read
 * again after a watch error, a rejoin, a notify that skipped a version) or comes without
 * effects brings changes this gateway was not told of: the unit attentions they established
 * for its registrants are derived from the two states (pr_missed_effects), so that a
 * registrant preempted while this gateway was cut off or fenced is told all the same. */
void ha_pr_adopt(struct pr_rados *r, struct pr_state *st, const struct ha_pr_obj_ver *v,
		 const struct pr_effects *fx)
{
	struct scsi_lu *lu = r->lu;
	struct pr_effects none = {0}, missed = {0};
	const struct pr_effects *use;
	bool newer, uas, gap;

	pthread_mutex_lock(&lu->lock);
	newer = v->epoch != r->epoch || v->seq > lu->pr_seq || lu->pr_unread;
	uas = fx && fx->nua && !ua_seen_locked(r, v);
	gap = newer && (!fx || v->epoch != r->epoch || v->seq != lu->pr_seq + 1);
	if (gap) {
		int rc = pr_missed_effects(&lu->pr, st, &missed);

		for (size_t i = 0; rc == 0 && uas && i < fx->nua; i++)
			rc = pr_effects_add_ua(&missed, fx->ua[i].iport, fx->ua[i].tport,
					       fx->ua[i].asc, fx->ua[i].ascq);
		if (rc < 0)
			log_err("pr", "%s: the unit attentions of changes made while this gateway "
				      "was not told: out of memory",
				r->name);
		if (missed.nua)
			log_info("pr",
				 "%s: %zu unit attention(s) for registrants, from changes this "
				 "gateway was not told of (sequence %llu to %llu)",
				 r->name, missed.nua, (unsigned long long)lu->pr_seq,
				 (unsigned long long)v->seq);
	}
	use = gap && missed.nua ? &missed : uas ? fx : &none;
	if (newer || uas) {
		if (newer) {
			scsi_pr_adopt_locked(lu, st, use);
			lu->pr_seq = v->seq;
			r->epoch = v->epoch;
			ha_pr_spc2_publish_locked(r);
		} else {
			struct pr_state same;

			/* UAs only: publish with the state we have (a copy to swap with). */
			pr_state_init(&same);
			if (pr_state_copy(&same, &lu->pr) == 0)
				scsi_pr_adopt_locked(lu, &same, fx);
			pr_state_clear(&same);
		}
	}
	pthread_mutex_unlock(&lu->lock);
	pr_effects_clear(&missed);
}

/* ---- watch and notify ---- */

/* A LOGICAL UNIT RESET notify ("ix-lu-reset 1 <origin>")? Queues 29/03 here unless it came
 * from this store. */
static bool reset_payload(struct pr_rados *r, const void *data, size_t len)
{
	size_t m = strlen(RESET_MAGIC);
	char origin[24];

	if (len <= m || memcmp(data, RESET_MAGIC, m) != 0)
		return false;
	snprintf(origin, sizeof(origin), "%016llx", (unsigned long long)r->origin);
	if (len != m + 16 || memcmp((const char *)data + m, origin, 16) != 0)
		scsi_ua_post_others(r->lu, NULL, 0x29, 0x03); /* another gateway's reset */
	return true;
}

/* The store's memory, once nothing uses it: off any connection, no thread, no abort. */
static void store_free(struct pr_rados *r)
{
	pthread_cond_destroy(&r->cv);
	pthread_cond_destroy(&r->done_cv);
	pthread_cond_destroy(&r->ack_cv);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->conn_mu);
	free(r->pool);
	free(r->ns);
	free(r);
}

/* A reference goes: the LU's (rados_free, or a failed open) or an abort's (ha_pr_remote_aborted).
 * The last one frees the store. */
void ha_pr_put(struct pr_rados *r)
{
	if (atomic_fetch_sub(&r->refs, 1) == 1)
		store_free(r);
}

/* A PREEMPT AND ABORT through another gateway: this gateway's tasks of the preempted nexuses
 * are gone (or could not all be asked to go). Any thread. */
void ha_pr_remote_aborted(void *arg, bool all)
{
	struct pr_job *j = arg;
	struct pr_rados *r = j->r;

	if (!all) /* the notifier fences this gateway instead: its tasks then cannot write */
		log_err(
		    "pr",
		    "%s: the tasks of nexuses preempted through another gateway could not all "
		    "be aborted (out of memory): not acknowledging, so that gateway fences this "
		    "one",
		    r->name);
	pthread_mutex_lock(&r->mu);
	if (all && !r->stop) {
		list_add_tail(&j->link, &r->acks);
		pthread_cond_broadcast(&r->ack_cv);
		j = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	free(j); /* not acknowledged: failed, or the LU is going away */
	ha_pr_put(r);
}

/* The payload's PREEMPT AND ABORT, from another gateway: abort this gateway's tasks of the
 * preempted nexuses and acknowledge only then (the acker thread does). false: acknowledge
 * now. */
static bool abort_before_ack(struct pr_rados *r, const struct pr_effects *fx, uint64_t notify_id,
			     uint64_t handle, uint64_t notifier_id)
{
	struct pr_job *j;

	if (!fx->nabort || notifier_id == r->gid) /* its own: run_out aborts those */
		return false;
	j = calloc(1, sizeof(*j));
	if (j) {
		j->kind = JOB_ACK;
		j->r = r;
		j->notify_id = notify_id;
		j->handle = handle;
		pthread_mutex_lock(&r->mu);
		j->gen = r->conn_gen; /* this connection's: dropped if it is left meanwhile */
		pthread_mutex_unlock(&r->mu);
		atomic_fetch_add(&r->refs, 1); /* ha_pr_remote_aborted's */
		if (scsi_abort_start(r->lu, fx->abort, fx->nabort, NULL, ha_pr_remote_aborted, j) ==
		    0)
			return true;
		atomic_fetch_sub(&r->refs, 1); /* rados_free waits for this callback: not 0 */
		free(j);
	}
	log_err("pr",
		"%s: cannot abort the tasks of nexuses preempted through another gateway (out of "
		"memory): not acknowledging, so that gateway fences this one",
		r->name);
	return true;
}

/* librados' thread: a gateway (maybe this one) changed the state, or reset the LU. */
static void watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id,
		     void *data, size_t len)
{
	struct pr_rados *r = arg;
	struct pr_state st;
	struct pr_effects fx;
	struct ha_pr_obj_ver v;
	char err[256] = "out of memory";
	bool later = false;
	int rc;

	pr_state_init(&st);
	if (!reset_payload(r, data, len)) {
		rc = ha_pr_obj_decode(data, len, &st, &v, &fx, err, sizeof(err));
		if (rc == 0) {
			ha_pr_adopt(r, &st, &v, &fx);
			later = abort_before_ack(r, &fx, notify_id, handle, notifier_id);
			pr_effects_clear(&fx);
		} else {
			log_err("pr", "%s: unreadable notify payload (%s): reading the object",
				r->name, err);
			ha_pr_queue_reload(r);
		}
	}
	pr_state_clear(&st);
	if (later)
		return;
	rc = rados_notify_ack(r->io, r->oid, notify_id, handle, NULL, 0);
	if (rc < 0)
		log_warn("pr", "%s: notify ack: %s", r->name, strerror(-rc));
}

/* A blocklisted connection (ESHUTDOWN, librados' EBLOCKLISTED) answered what: the LU's
 * device and every other on that connection are fenced and rejoin. */
void ha_pr_check_fenced(struct pr_rados *r, int rc, const char *what)
{
	if (rc == -ESHUTDOWN)
		bs_rbd_fenced(r->lu->dev, r->cluster, what);
}

static void watch_err_cb(void *arg, uint64_t cookie, int err)
{
	struct pr_rados *r = arg;

	(void)cookie;
	log_warn("pr", "%s: watch lost (%s)%s", r->name, strerror(-err),
		 err == -ESHUTDOWN ? ": this gateway was blocklisted by another one"
				   : ": watching and reading it again");
	ha_pr_check_fenced(r, err, "the reservation object's watch");
	ha_pr_queue_reload(r);
}

/* A watch needs the object: create it holding the empty state unless it exists. */
static int ensure_obj(struct pr_rados *r, char *err, size_t errlen)
{
	struct pr_state empty;
	struct ha_pr_obj_ver v = {ha_pr_new_epoch(), 0};
	int rc;

	pr_state_init(&empty);
	rc = ha_pr_obj_write(r, &empty, &v, 0);
	if (rc == -EAGAIN)
		return 0; /* there already */
	if (rc < 0)
		snprintf(err, errlen, "%s: create: %s", r->name, strerror(-rc));
	return rc;
}

int ha_pr_watch_start(struct pr_rados *r, char *err, size_t errlen)
{
	int rc = ensure_obj(r, err, errlen);

	if (rc < 0)
		return rc;
	if (r->watching) {
		rados_unwatch2(r->io, r->watch);
		r->watching = false;
	}
	rc = rados_watch2(r->io, r->oid, &r->watch, watch_cb, watch_err_cb, r);
	if (rc < 0) {
		snprintf(err, errlen, "%s: watch: %s", r->name, strerror(-rc));
		return rc;
	}
	r->watching = true;
	return 0;
}

/* Every gateway records its client address under its client id as an xattr of "<oid>.gw"
 * (librados has no C call that lists an object's watchers with their addresses), so that a
 * gateway whose watch stays silent can be fenced by the others. */
int ha_pr_advertise(struct pr_rados *r, char *err, size_t errlen)
{
	char key[32], *addrs = NULL, addr[256];
	int rc = rados_getaddrs(r->cluster, &addrs);

	if (rc < 0) {
		snprintf(err, errlen, "%s: rados_getaddrs: %s", r->name, strerror(-rc));
		return rc;
	}
	rc = ha_pr_client_addr(addrs, addr, sizeof(addr));
	if (rc < 0)
		snprintf(err, errlen, "%s: cannot parse this client's address \"%.200s\"", r->name,
			 addrs);
	free(addrs);
	if (rc < 0)
		return rc;
	snprintf(key, sizeof(key), "gw.%llu", (unsigned long long)r->gid);
	rc = rados_setxattr(r->io, r->gwoid, key, addr, strlen(addr));
	if (rc < 0)
		snprintf(err, errlen, "%s: setxattr %s on %s: %s", r->name, key, r->gwoid,
			 strerror(-rc));
	return rc;
}

/* At a clean stop, and for a fenced connection once on the next: that client's address
 * entry goes (a failure only leaves a stale entry). */
void ha_pr_forget_address(struct pr_rados *r, uint64_t gid)
{
	char key[32];

	snprintf(key, sizeof(key), "gw.%llu", (unsigned long long)gid);
	(void)rados_rmxattr(r->io, r->gwoid, key);
}

/* Blocklist the watcher gid that did not acknowledge: 0 or -errno. */
int ha_pr_fence(struct pr_rados *r, uint64_t gid)
{
	char key[32], addr[256];
	int n, rc;

#ifdef IX_CHAOS_BREAK_LOST_LOCK /* a DELIBERATELY BROKEN build: no fence (ha_own_int.h) */
	log_warn("pr", "%s: CHAOS BREAK lost-lock: client.%llu not fenced", r->name,
		 (unsigned long long)gid);
	return 0;
#endif
	snprintf(key, sizeof(key), "gw.%llu", (unsigned long long)gid);
	n = rados_getxattr(r->io, r->gwoid, key, addr, sizeof(addr) - 1);
	if (n < 0) {
		log_err("pr",
			"%s: client.%llu did not acknowledge a reservation change and its "
			"address is unknown (%s): it cannot be fenced",
			r->name, (unsigned long long)gid, strerror(-n));
		return n;
	}
	addr[n] = 0;
	rc = rados_blocklist_add(r->cluster, addr, r->blocklist_s);
	if (rc == 0)
		log_warn("pr",
			 "%s: gateway client.%llu at %s did not acknowledge a reservation "
			 "change within %u ms: blocklisted for %u s",
			 r->name, (unsigned long long)gid, addr, r->notify_ms, r->blocklist_s);
	else
		log_err("pr", "%s: blocklisting client.%llu at %s: %s", r->name,
			(unsigned long long)gid, addr, strerror(-rc));
	return rc;
}

/* Tell every gateway; fence those that stay silent. 0 or -errno (someone not fenced). With
 * probe not NULL: *probe says whether gateway probe_gid acknowledged (1), did not and was in
 * the notify's timeouts (0: fenced, or rc < 0), or does not watch the object at all (-1). */
int ha_pr_notify_probe(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v,
		       const struct pr_effects *fx, uint64_t probe_gid, int *probe)
{
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t nacks = 0, ntos = 0, rlen = 0, plen;
	char *reply = NULL, *payload;
	int rc, nrc;

	if (probe)
		*probe = 0;
	rc = ha_pr_obj_encode(st, v, fx, &payload, &plen);
	if (rc)
		return rc;
	nrc = rados_notify2(r->io, r->oid, payload, (int)plen, r->notify_ms, &reply, &rlen);
	free(payload);
	if (nrc < 0 && nrc != -ETIMEDOUT) {
		if (reply)
			rados_buffer_free(reply);
		return nrc;
	}
	rc = reply ? rados_decode_notify_response(reply, rlen, &acks, &nacks, &tos, &ntos) : 0;
	if (probe) {
		*probe = -1;
		for (size_t i = 0; rc == 0 && i < nacks; i++)
			if (acks[i].notifier_id == probe_gid)
				*probe = 1;
		for (size_t i = 0; rc == 0 && i < ntos; i++)
			if (tos[i].notifier_id == probe_gid)
				*probe = 0;
	}
	for (size_t i = 0; rc == 0 && i < ntos; i++)
		rc = ha_pr_fence(r, tos[i].notifier_id);
	if (reply) {
		rados_free_notify_response(acks, nacks, tos);
		rados_buffer_free(reply);
	}
	if (rc == 0 && nrc == -ETIMEDOUT && ntos == 0)
		rc = -ETIMEDOUT; /* timed out, yet nobody to fence named */
	return rc;
}

int ha_pr_notify(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v,
		 const struct pr_effects *fx)
{
#ifdef IX_CHAOS_BREAK_PR_NO_NOTIFY /* a DELIBERATELY BROKEN build (tests/chaos/breaks.sh) */
	(void)st;
	(void)v;
	(void)fx;
	log_warn("pr", "%s: CHAOS BREAK pr-no-notify: the other gateways are not told", r->name);
	return 0;
#endif
	return ha_pr_notify_probe(r, st, v, fx, 0, NULL);
}
