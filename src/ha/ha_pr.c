/* Persistent reservations shared by every gateway of an RBD image: the RADOS store.
 *
 * The state of the LU lives in one object next to the image (same pool and namespace, named
 * "ix.pr.<image>", format in ha_pr_obj.c). Each gateway keeps a copy in lu->pr, which the data
 * path checks as for a single gateway (no RADOS round trip per command), and watches the
 * object.
 *
 * PERSISTENT RESERVE OUT is slow path and runs on one helper thread per LU (librados' calls
 * are blocking; a worker never waits on the cluster): the worker queues the request and returns
 * SCSI_ASYNC; the helper reads the object with its version, applies the service action to the
 * decoded state (pr_out_apply, the same state machine as a single gateway), writes it back
 * with assert_version (or exclusive create) + write_full, and on a conflict (ERANGE, EOVERFLOW,
 * ECANCELED, EEXIST: another gateway wrote first) reads again, at most rbd.pr.retries times.
 * Once written, it adopts the state locally with its unit attentions, then notifies the
 * watchers with the object plus the unit attentions; every gateway's watch callback decodes
 * the payload, adopts the state if its version (epoch, sequence) is newer, queues the unit
 * attentions of its own nexuses, and acknowledges. A watcher that does not acknowledge within
 * the notify timeout (rbd.pr.notify_timeout_s) is blocklisted (its address from the xattrs of
 * "<oid>.gw"), so a gateway that might still hold the old state can no longer reach the
 * cluster, before the command completes. The result goes back to the command's worker loop as
 * an allocation-free post.
 *
 * The cluster connection is the RBD device's own: blocklisting a gateway's watch fences its
 * image I/O as well. The store is the connection's user (struct bs_rbd_user): the backend
 * puts it on the connection when the image opens (conn_attach: the address entry, the watch,
 * the object read) and, once a fenced connection's I/O has ended, takes it off (conn_detach)
 * and puts it on the new one of the rejoin, which reads the object again before the LU
 * serves. An ESHUTDOWN (blocklisted) seen here fences the whole connection (bs_rbd_fenced).
 * While off a connection a PERSISTENT RESERVE OUT fails (4/44/00). A watch error (a lost
 * connection, an OSD change) makes the helper re-watch and re-read the object. An object that
 * cannot be read or decoded is an error (HARDWARE ERROR, INTERNAL TARGET FAILURE, and a log line
 * naming the object and the problem), never an empty state; at start it stops the LU, as a damaged
 * APTPL file does. */
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

/* ---- the helper thread ---- */

/* run_out's own PREEMPT AND ABORT on this gateway: done (under r->mu) when its tasks are gone. */
struct local_abort {
	struct pr_rados *r;
	bool done, all;
};

static void local_aborted(void *arg, bool all)
{
	struct local_abort *la = arg;

	pthread_mutex_lock(&la->r->mu);
	la->done = true;
	la->all = all;
	pthread_cond_broadcast(&la->r->done_cv);
	pthread_mutex_unlock(&la->r->mu);
}

/* Wait (helper thread) until the aborts started are over: tasks in the backend end within the
 * LU's osd_op_timeout_s. Returns whether every thread was asked. */
static bool wait_local_abort(struct local_abort *la)
{
	bool all;

	pthread_mutex_lock(&la->r->mu);
	while (!la->done)
		pthread_cond_wait(&la->r->done_cv, &la->r->mu);
	all = la->all;
	pthread_mutex_unlock(&la->r->mu);
	return all;
}

static enum pr_result run_out(struct pr_rados *r, struct pr_job *j)
{
	struct pr_nexus_id who = {j->iport, j->tport};
	struct pr_state st;
	struct pr_effects fx = {0};
	enum pr_result res = PR_NOMEM;
	struct ha_pr_obj_ver v, next = {0, 0};
	uint64_t ver;
	char err[1024] = "";
	int rc = -EAGAIN;

	pr_state_init(&st);
	for (uint32_t i = 0; i < r->retries && rc == -EAGAIN; i++) {
		if (i)
			log_info("pr", "%s: another gateway wrote first: reading again (%u)",
				 r->name, i);
		pr_effects_clear(&fx);
		rc = ha_pr_obj_read(r, &st, &v, &ver, err, sizeof(err));
		if (rc < 0)
			break;
		res = pr_out_apply(&st, &who, &j->req, &fx);
		if (res != PR_OK || !fx.changed)
			break;
		next = (struct ha_pr_obj_ver){v.epoch ? v.epoch : ha_pr_new_epoch(), v.seq + 1};
		rc = ha_pr_obj_write(r, &st, &next, ver);
	}
	if (rc == 0 && res == PR_OK && fx.changed) {
		struct pr_state mine;
		struct local_abort la = {.r = r, .done = true, .all = true};

		pr_state_init(&mine);
		if (pr_state_copy(&mine, &st) == 0)
			ha_pr_adopt(r, &mine, &next, &fx);
		pr_state_clear(&mine);
		/* PREEMPT AND ABORT: this gateway's preempted tasks while the others abort theirs
		 * before they acknowledge the notify */
		if (fx.nabort) {
			la.done = false;
			if (scsi_abort_start(r->lu, fx.abort, fx.nabort, NULL, local_aborted, &la))
				la.done = la.all = false;
		}
		rc = ha_pr_notify(r, &st, &next, &fx);
		if (rc < 0)
			snprintf(err, sizeof(err),
				 "%s: the change is stored, but a gateway that "
				 "did not acknowledge it could not be fenced: %s",
				 r->name, strerror(-rc));
		if (fx.nabort && !wait_local_abort(&la) && rc == 0) {
			rc = -ENOMEM;
			snprintf(
			    err, sizeof(err),
			    "%s: the change is stored, but the tasks of the preempted nexuses on "
			    "this gateway could not all be aborted (out of memory)",
			    r->name);
		}
	} else if (rc < 0 && !err[0]) {
		snprintf(err, sizeof(err), "%s: write: %s%s", r->name, strerror(-rc),
			 rc == -EAGAIN ? " (other gateways kept writing first)" : "");
	}
	if (rc < 0) {
		log_err("pr", "LUN %u: persistent reservation change failed: %s", r->lu->lun, err);
		ha_pr_check_fenced(r, rc, "a persistent reservation change");
		res = PR_NOMEM;
	}
	pr_state_clear(&st);
	pr_effects_clear(&fx);
	return res;
}

/* ---- SPC-2 reservations (RESERVE(6)/(10)) ----
 *
 * One holder for every gateway of the LU, in the object (version 2, ha_pr_obj.c): the holder's
 * I_T nexus and the RADOS client id (gid) of the gateway it came through. Each gateway checks
 * it from memory (lu->resv_holder: its own holder nexus, or SCSI_RESV_REMOTE when the holder
 * came through another gateway, which every nexus here conflicts with). RESERVE and RELEASE
 * change the object like a PERSISTENT RESERVE OUT (versioned write, notify, every gateway
 * adopts). The holder's I_T nexus loss, on its gateway, releases it (spc2_lost); a LOGICAL
 * UNIT RESET through any gateway releases it. A gateway that dies cannot tell: a RESERVE that
 * meets a reservation held through another gateway asks that gateway with a notify, and if it
 * does not acknowledge (dead, silent, or no longer watching) fences it and takes the
 * reservation, since the holder's nexus is gone with it. A gateway that rejoins after fencing
 * has a new client id: one held through its fenced client moves to the new id or goes when it
 * reads the object again (spc2_rejoin), before the LU serves. */

/* Is the SPC-2 reservation of st held by a nexus that no longer exists? Through this gateway:
 * when no nexus of the LU has its names. Through another: when that gateway does not answer a
 * notify, and then it is fenced first (a gateway that cannot be fenced keeps it). */
static bool spc2_stale(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v)
{
	struct scsi_lu *lu = r->lu;
	struct list_head *pos;
	bool here = false;
	int probe = 0, rc;

	if (st->spc2_gid == r->gid) {
		pthread_mutex_lock(&lu->lock);
		list_for_each(pos, &lu->itls)
		{
			struct scsi_itl *itl = list_entry(pos, struct scsi_itl, lu_link);
			struct pr_nexus_id who = {itl->nx->initiator_port, itl->nx->target_port};

			here |= pr_spc2_is(st, &who);
		}
		pthread_mutex_unlock(&lu->lock);
		return !here;
	}
	rc = ha_pr_notify_probe(r, st, v, NULL, st->spc2_gid, &probe);
	if (rc == 0 && probe == -1) /* not watching the object: gone, or cut off */
		rc = ha_pr_fence(r, st->spc2_gid);
	if (probe == 1)
		return false;
	if (rc < 0) {
		log_err(
		    "pr",
		    "%s: the SPC-2 reservation of %s is held through gateway client.%llu, which "
		    "does not answer and cannot be fenced: it stays",
		    r->name, st->spc2_iport, (unsigned long long)st->spc2_gid);
		return false;
	}
	log_warn("pr",
		 "%s: the SPC-2 reservation of %s was held through gateway client.%llu, which did "
		 "not answer and is now fenced: released",
		 r->name, st->spc2_iport, (unsigned long long)st->spc2_gid);
	return true;
}

static bool spc2_held_here(struct pr_rados *r, const struct pr_state *st);

/* The object's SPC-2 reservation after op from nexus who (NULL: a LUN RESET drops it);
 * *res the command's result, *write whether st changed. 0 or -ENOMEM. */
static int spc2_apply(struct pr_rados *r, enum spc2_op op, const struct pr_nexus_id *who,
		      struct pr_state *st, const struct ha_pr_obj_ver *v, enum pr_result *res,
		      bool *write)
{
	bool gone_here;

	*res = PR_OK;
	*write = false;
	if (!who) { /* LOGICAL UNIT RESET */
		*write = st->spc2_iport != NULL;
		return pr_state_set_spc2(st, NULL, NULL, 0);
	}
	if (op != SPC2_RESERVE) { /* RELEASE, nexus loss: the holder's own, through here */
		if (!pr_spc2_is(st, who) || st->spc2_gid != r->gid)
			return 0;
		*write = true;
		return pr_state_set_spc2(st, NULL, NULL, 0);
	}
	if (st->nregs || st->type != PR_TYPE_NONE) { /* persistent reservations decide */
		*res = pr_is_holder(st, who) ? PR_OK : PR_CONFLICT;
		return 0;
	}
	if (pr_spc2_is(st, who) && st->spc2_gid == r->gid)
		return 0; /* held already */
	/* held through this gateway by a nexus that holds it here no more: its loss (or
	 * release) happened after this job was queued, and its own job, behind this one, would
	 * release it in the object: it is released */
	gone_here = st->spc2_iport && st->spc2_gid == r->gid && !spc2_held_here(r, st);
	if (st->spc2_iport && !gone_here && !spc2_stale(r, st, v)) {
		*res = PR_CONFLICT;
		return 0;
	}
	*write = true;
	return pr_state_set_spc2(st, who->iport, who->tport, r->gid);
}

/* A JOB_SPC2 (j) or, with j NULL, a LUN RESET's release: read, decide, write (versioned,
 * again if another gateway wrote first), adopt, notify. */
static enum pr_result run_spc2(struct pr_rados *r, struct pr_job *j)
{
	struct pr_nexus_id who = {j ? j->iport : NULL, j ? j->tport : NULL};
	struct pr_state st;
	struct ha_pr_obj_ver v, next = {0, 0};
	enum pr_result res = PR_OK;
	bool write = false;
	uint64_t ver;
	char err[1024] = "";
	int rc = -EAGAIN;

	pr_state_init(&st);
	for (uint32_t i = 0; i < r->retries && rc == -EAGAIN; i++) {
		rc = ha_pr_obj_read(r, &st, &v, &ver, err, sizeof(err));
		if (rc == 0)
			rc = spc2_apply(r, j ? j->spc2 : SPC2_RELEASE, j ? &who : NULL, &st, &v,
					&res, &write);
		if (rc < 0 || !write)
			break;
		next = (struct ha_pr_obj_ver){v.epoch ? v.epoch : ha_pr_new_epoch(), v.seq + 1};
		rc = ha_pr_obj_write(r, &st, &next, ver);
	}
	if (rc == 0 && write) {
		struct pr_state mine;

		pr_state_init(&mine);
		if (pr_state_copy(&mine, &st) == 0)
			ha_pr_adopt(r, &mine, &next, NULL);
		pr_state_clear(&mine);
		rc = ha_pr_notify(r, &st, &next, NULL);
		if (rc < 0)
			snprintf(
			    err, sizeof(err),
			    "%s: the SPC-2 reservation change is stored, but a gateway that did "
			    "not acknowledge it could not be fenced: %s",
			    r->name, strerror(-rc));
	} else if (rc < 0 && !err[0]) {
		snprintf(err, sizeof(err), "%s: write: %s", r->name, strerror(-rc));
	}
	if (rc < 0) {
		log_err("pr", "LUN %u: SPC-2 reservation change failed: %s", r->lu->lun, err);
		res = PR_NOMEM;
	}
	pr_state_clear(&st);
	return res;
}

static void run_reload(struct pr_rados *r)
{
	struct pr_state st;
	struct ha_pr_obj_ver v;
	uint64_t ver;
	char err[1024];
	int rc;

	pthread_mutex_lock(&r->mu);
	r->reload_queued = false;
	pthread_mutex_unlock(&r->mu);
	pr_state_init(&st);
	rc = ha_pr_watch_start(r, err, sizeof(err));
	if (rc == 0)
		rc = ha_pr_obj_read(r, &st, &v, &ver, err, sizeof(err));
	if (rc == 0) {
		ha_pr_adopt(r, &st, &v, NULL);
		log_info("pr", "%s: watching again, object at epoch %016llx sequence %llu", r->name,
			 (unsigned long long)v.epoch, (unsigned long long)v.seq);
	} else if (rc == -ESHUTDOWN) {
		log_warn("pr", "LUN %u: %s (blocklisted: read again when the gateway rejoins)",
			 r->lu->lun, err);
		ha_pr_check_fenced(r, rc, "reading the reservation object");
	} else {
		log_err("pr", "LUN %u: %s (the last known state stays in force)", r->lu->lun, err);
	}
	pr_state_clear(&st);
}

static void run_reset(struct pr_rados *r)
{
	char payload[64], *reply = NULL;
	size_t rlen = 0;
	int rc;

	run_spc2(r, NULL); /* a LUN RESET releases the SPC-2 reservation, on every gateway */
	snprintf(payload, sizeof(payload), RESET_MAGIC "%016llx", (unsigned long long)r->origin);
	rc = rados_notify2(r->io, r->oid, payload, (int)strlen(payload), r->reset_wait_ms, &reply,
			   &rlen);
	if (reply)
		rados_buffer_free(reply);
	if (rc < 0) {
		log_warn("pr", "%s: telling the other gateways of a LUN RESET: %s", r->name,
			 strerror(-rc));
		ha_pr_check_fenced(r, rc, "a LUN RESET notify");
	}
}

/* A PERSISTENT RESERVE OUT, RESERVE or RELEASE while the store is off any connection: the
 * device was fenced (and rejoins) or its image is not open yet. */
static enum pr_result not_connected(struct pr_rados *r)
{
	log_err("pr",
		"LUN %u: reservation change refused: %s is out of reach (this gateway's "
		"connection was fenced and rejoins, or the image is not open yet)",
		r->lu->lun, r->name);
	return PR_NOMEM;
}

/* On the command's worker loop. */
static void job_done(void *arg)
{
	struct pr_job *j = arg;
	struct scsi_cmd *cmd = j->cmd;

	scsi_pr_set_result(cmd, j->res);
	free(j);
	scsi_cmd_finish(cmd);
}

/* On the loop of the nexus whose loss queued j: its release is stored (or failed, logged). */
static void lost_done(void *arg)
{
	struct pr_job *j = arg;
	struct scsi_lost_wait w = j->wait;

	free(j);
	w.done(w.arg);
}

static void *helper(void *arg)
{
	struct pr_rados *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct pr_job *j;

		while (!r->stop && list_empty(&r->jobs))
			pthread_cond_wait(&r->cv, &r->mu);
		if (list_empty(&r->jobs))
			break; /* stop, and nothing left */
		j = list_entry(r->jobs.next, struct pr_job, link);
		list_del(&j->link);
		pthread_mutex_unlock(&r->mu);
		pthread_mutex_lock(&r->conn_mu); /* off a connection: nothing to do, or refused */
		if (j->kind == JOB_RELOAD) {
			free(j);
			if (!r->stop && r->connected)
				run_reload(r);
			pthread_mutex_unlock(&r->conn_mu);
		} else if (j->kind == JOB_RESET) {
			if (r->connected)
				run_reset(r);
			pthread_mutex_unlock(&r->conn_mu);
			pthread_mutex_lock(&r->mu);
			j->finished = true;
			pthread_cond_broadcast(&r->done_cv);
			if (--j->refs == 0)
				free(j);
			pthread_mutex_unlock(&r->mu);
		} else if (j->kind == JOB_SPC2 && !j->cmd) { /* a nexus loss: no command */
			if (r->connected)
				run_spc2(r, j);
			else /* conn_attach releases it (the nexus is gone then) */
				log_warn(
				    "pr",
				    "LUN %u: %s is out of reach: the SPC-2 reservation of %s, "
				    "whose nexus is gone, is released when this gateway rejoins",
				    r->lu->lun, r->name, j->iport);
			pthread_mutex_unlock(&r->conn_mu);
			if (j->wait.loop) /* a Logout's response waits for this */
				ev_loop_post_node(j->wait.loop, &j->post, lost_done, j);
			else
				free(j);
		} else {
			if (!r->connected)
				j->res = not_connected(r);
			else
				j->res = j->kind == JOB_SPC2 ? run_spc2(r, j) : run_out(r, j);
			pthread_mutex_unlock(&r->conn_mu);
			ev_loop_post_node(j->cmd->thread->loop, &j->post, job_done, j);
		}
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Acknowledges the notifies whose aborts finished after their callback returned, on the
 * connection they came on: one of a connection the store has left (conn_drop) is dropped (its
 * notifier fences that connection, fenced already). Never takes conn_mu: the helper holds it
 * through a whole PERSISTENT RESERVE OUT, notify wait included, and an ack waiting behind it
 * would get this gateway fenced when two gateways each wait for the other's ack. */
static void *acker(void *arg)
{
	struct pr_rados *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct pr_job *j;
		rados_ioctx_t io;
		int rc;

		while (!r->stop && list_empty(&r->acks))
			pthread_cond_wait(&r->ack_cv, &r->mu);
		if (list_empty(&r->acks))
			break;
		j = list_entry(r->acks.next, struct pr_job, link);
		list_del(&j->link);
		if (j->gen != r->conn_gen) {
			pthread_mutex_unlock(&r->mu);
			log_warn("pr",
				 "%s: not acknowledging a notify of a connection this gateway "
				 "has left",
				 r->name);
			free(j);
			pthread_mutex_lock(&r->mu);
			continue;
		}
		io = r->io;
		r->acking = true; /* conn_drop destroys io only once this is over */
		pthread_mutex_unlock(&r->mu);
		rc = rados_notify_ack(io, r->oid, j->notify_id, j->handle, NULL, 0);
		if (rc < 0)
			log_warn("pr", "%s: notify ack: %s", r->name, strerror(-rc));
		free(j);
		pthread_mutex_lock(&r->mu);
		r->acking = false;
		pthread_cond_broadcast(&r->ack_cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static void queue_job(struct pr_rados *r, struct pr_job *j)
{
	pthread_mutex_lock(&r->mu);
	list_add_tail(&j->link, &r->jobs);
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void ha_pr_queue_reload(struct pr_rados *r)
{
	struct pr_job *j;

	pthread_mutex_lock(&r->mu);
	if (r->reload_queued || r->stop) {
		pthread_mutex_unlock(&r->mu);
		return;
	}
	r->reload_queued = true;
	pthread_mutex_unlock(&r->mu);
	j = calloc(1, sizeof(*j));
	if (!j) {
		log_err("pr", "%s: out of memory: cannot re-read the object", r->name);
		return;
	}
	j->kind = JOB_RELOAD;
	queue_job(r, j);
}

/* ---- the store ---- */

static void copy_port(char *dst, const char *src)
{
	snprintf(dst, PR_MAX_PORT_LEN, "%s", src ? src : "");
}

/* A job for cmd, with its nexus's ports; NULL (cmd answered PR_NOMEM) when there is no loop
 * to come back to (never from the target) or no memory. */
static struct pr_job *cmd_job(struct scsi_lu *lu, struct scsi_cmd *cmd, enum pr_job_kind kind)
{
	struct pr_job *j = cmd->thread ? calloc(1, sizeof(*j)) : NULL;

	if (!j) {
		scsi_pr_set_result(cmd, PR_NOMEM);
		return NULL;
	}
	j->kind = kind;
	j->cmd = cmd;
	j->lu = lu;
	copy_port(j->iport, cmd->nexus->initiator_port);
	copy_port(j->tport, cmd->nexus->target_port);
	return j;
}

static int rados_out(struct scsi_lu *lu, struct scsi_cmd *cmd, const struct pr_out *req)
{
	struct pr_job *j = cmd_job(lu, cmd, JOB_OUT);

	if (!j)
		return SCSI_DONE;
	j->req = *req;
	if (req->move.iport) {
		copy_port(j->move, req->move.iport);
		copy_port(j->move_t, req->move.tport);
		j->req.move.iport = j->move;
		j->req.move.tport = j->move_t;
	}
	queue_job(lu->pr_store, j);
	return SCSI_ASYNC;
}

/* RESERVE or RELEASE(6)/(10) that spc.c leaves to the store. */
static int rados_spc2(struct scsi_lu *lu, struct scsi_cmd *cmd, bool reserve)
{
	struct pr_job *j = cmd_job(lu, cmd, JOB_SPC2);

	if (!j)
		return SCSI_DONE;
	j->spc2 = reserve ? SPC2_RESERVE : SPC2_RELEASE;
	queue_job(lu->pr_store, j);
	return SCSI_ASYNC;
}

/* The SPC-2 holder's I_T nexus is gone here: release it in the object too (until then the
 * other gateways keep refusing their nexuses, which errs on the safe side). */
static int rados_spc2_lost(struct scsi_lu *lu, const struct scsi_nexus *nx,
			   const struct scsi_lost_wait *w)
{
	struct pr_rados *r = lu->pr_store;
	struct pr_job *j = calloc(1, sizeof(*j));
	bool told = w && w->loop && w->done;

	if (!j) {
		log_err(
		    "pr",
		    "%s: out of memory: the SPC-2 reservation of %s, whose nexus is gone, stays "
		    "held for the other gateways until a LUN RESET",
		    r->name, nx->initiator_port);
		return 0;
	}
	j->kind = JOB_SPC2;
	j->spc2 = SPC2_LOST;
	j->lu = lu;
	copy_port(j->iport, nx->initiator_port);
	copy_port(j->tport, nx->target_port);
	if (told)
		j->wait = *w;
	queue_job(r, j); /* the helper may free j at once */
	return told;
}

/* The one wait on a worker: a LUN RESET answers only once the other gateways have queued
 * their unit attentions (an initiator checks its other paths right after the response), at
 * most rbd.pr.reset_wait_s (notify round trip: ~2 ms). TMFs are rare, never data path. */
static void rados_reset(struct scsi_lu *lu)
{
	struct pr_rados *r = lu->pr_store;
	struct pr_job *j = calloc(1, sizeof(*j));
	struct timespec until;

	if (!j)
		return;
	j->kind = JOB_RESET;
	j->refs = 2;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += r->reset_wait_ms / 1000 + 1;
	queue_job(r, j);
	pthread_mutex_lock(&r->mu);
	while (!j->finished && pthread_cond_timedwait(&r->done_cv, &r->mu, &until) != ETIMEDOUT)
		;
	if (--j->refs == 0)
		free(j);
	pthread_mutex_unlock(&r->mu);
}

/* Off the connection (under conn_mu): the watch, its callbacks, a late ack in progress, the
 * I/O context. */
static void conn_drop(struct pr_rados *r)
{
	if (r->watching)
		rados_unwatch2(r->io, r->watch);
	r->watching = false;
	rados_watch_flush(r->cluster); /* no callback of ours runs after this */
	pthread_mutex_lock(&r->mu);
	r->conn_gen++; /* the acks still queued for this connection are dropped */
	while (r->acking)
		pthread_cond_wait(&r->ack_cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	rados_ioctx_destroy(r->io);
	r->connected = false;
}

/* The helper and the acker stop (the acker sends the acks queued for the current connection
 * first); the jobs the helper did not take go. An abort still in progress holds the store
 * and drops its ack (ha_pr_remote_aborted: stop). */
static void threads_stop(struct pr_rados *r)
{
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_signal(&r->cv);
	pthread_cond_broadcast(&r->ack_cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	if (r->acker_started)
		pthread_join(r->acker, NULL);
	while (!list_empty(&r->jobs)) { /* a reload a watch error queued */
		struct pr_job *j = list_entry(r->jobs.next, struct pr_job, link);

		list_del(&j->link);
		free(j);
	}
}

static void rados_free(struct scsi_lu *lu)
{
	struct pr_rados *r = lu->pr_store;

	if (!r)
		return;
	bs_rbd_detach_user(lu->dev); /* no attach or detach after this */
	threads_stop(r);
	if (r->connected) {
		ha_pr_forget_address(r, r->gid);
		conn_drop(r);
	}
	lu->pr_store = NULL;
	ha_pr_put(r); /* the LU's: freed now, or when the last abort in progress ends */
}

static const struct scsi_pr_store_ops rados_ops = {
    .name = "rados",
    .out = rados_out,
    .reset = rados_reset,
    .spc2 = rados_spc2,
    .spc2_lost = rados_spc2_lost,
    .free = rados_free,
};

/* Does this gateway still give st's SPC-2 reservation to its holder: lu->resv_holder is a
 * nexus here with the holder's names (not lost, released or reset while the store was off the
 * connection)? */
static bool spc2_held_here(struct pr_rados *r, const struct pr_state *st)
{
	struct scsi_lu *lu = r->lu;
	struct scsi_nexus *h;
	bool held = false;

	pthread_mutex_lock(&lu->lock); /* a nexus in resv_holder stays while it is held */
	h = atomic_load(&lu->resv_holder);
	if (h && h != SCSI_RESV_REMOTE)
		held = pr_spc2_is(st, &(struct pr_nexus_id){h->initiator_port, h->target_port});
	pthread_mutex_unlock(&lu->lock);
	return held;
}

/* A rejoin (under conn_mu, on the new connection, watching): the SPC-2 reservation that st
 * (read at version *v, *ver) holds through this gateway's fenced connection (stale_gid) moves
 * to the new client id if this gateway still gives it to its holder, else goes (its nexus is
 * gone, a RELEASE or a LUN RESET came meanwhile); the other gateways learn it. Without that no
 * gateway could release or check it: the old id watches nothing and has no address entry to
 * fence. One that another gateway took meanwhile (its probe fenced the old connection) is in
 * the object already and stays as it is. 0 (st, v the object's state now) or -errno + err. */
static int spc2_rejoin(struct pr_rados *r, struct pr_state *st, struct ha_pr_obj_ver *v,
		       uint64_t *ver, char *err, size_t errlen)
{
	struct ha_pr_obj_ver next = {0, 0};
	struct pr_state mine;
	bool keep = false;
	int rc = -EAGAIN;

	for (uint32_t i = 0; i < r->retries && rc == -EAGAIN; i++) {
		if (i && (rc = ha_pr_obj_read(r, st, v, ver, err, errlen)) < 0)
			return rc;
		if (!st->spc2_iport || st->spc2_gid != r->stale_gid)
			return 0; /* none, or not held through this gateway */
		keep = spc2_held_here(r, st);
		if (keep)
			st->spc2_gid = r->gid;
		else
			pr_state_set_spc2(st, NULL, NULL, 0);
		next = (struct ha_pr_obj_ver){v->epoch ? v->epoch : ha_pr_new_epoch(), v->seq + 1};
		rc = ha_pr_obj_write(r, st, &next, *ver);
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: SPC-2 reservation held through client.%llu: write: %s",
			 r->name, (unsigned long long)r->stale_gid,
			 rc == -EAGAIN ? "other gateways kept writing first" : strerror(-rc));
		return rc;
	}
	*v = next;
	log_info("pr", "LUN %u: %s: the SPC-2 reservation held through client.%llu %s", r->lu->lun,
		 r->name, (unsigned long long)r->stale_gid,
		 keep ? "is held through this client now"
		      : "is released (its holder has it no more)");
	pr_state_init(&mine);
	if (pr_state_copy(&mine, st) == 0)
		ha_pr_adopt(r, &mine, &next, NULL);
	pr_state_clear(&mine);
	rc = ha_pr_notify(r, st, &next, NULL);
	if (rc < 0) /* stored: the LU serves with it */
		log_err(
		    "pr",
		    "LUN %u: %s: the SPC-2 reservation change is stored, but a gateway that did "
		    "not acknowledge it could not be fenced: %s",
		    r->lu->lun, r->name, strerror(-rc));
	return 0;
}

/* The RBD device's opener thread (or the LU's creation): onto the connection rados, the
 * device's, with the address entry, the watch and the object read (the LU serves only after
 * this). On failure nothing is kept. */
static int conn_attach(void *arg, void *rados, char *err, size_t errlen)
{
	struct pr_rados *r = arg;
	struct pr_state st;
	struct ha_pr_obj_ver v;
	rados_ioctx_t io;
	uint64_t ver;
	int rc;

	pthread_mutex_lock(&r->conn_mu);
	rc = rados_ioctx_create((rados_t)rados, r->pool, &io);
	if (rc < 0) {
		snprintf(err, errlen, "%s: pool %s: %s", r->name, r->pool, strerror(-rc));
		pthread_mutex_unlock(&r->conn_mu);
		return rc;
	}
	if (r->ns)
		rados_ioctx_set_namespace(io, r->ns);
	r->cluster = rados;
	r->gid = rados_get_instance_id(r->cluster); /* before the watch: its callbacks use it */
	pthread_mutex_lock(&r->mu);
	r->io = io; /* as the acker reads it */
	pthread_mutex_unlock(&r->mu);
	pr_state_init(&st);
	rc = ha_pr_advertise(r, err, errlen);
	if (rc == 0)
		rc = ha_pr_watch_start(r, err, errlen);
	if (rc == 0)
		rc = ha_pr_obj_read(r, &st, &v, &ver, err, errlen);
	if (rc == 0 && r->stale_gid)
		rc = spc2_rejoin(r, &st, &v, &ver, err, errlen);
	if (rc == 0) {
		size_t nregs = st.nregs; /* st holds the old state once adopted */

		ha_pr_adopt(r, &st, &v, NULL);
		pthread_mutex_lock(&r->lu->lock);
		ha_pr_spc2_publish_locked(r); /* against this client id, adopted or not */
		pthread_mutex_unlock(&r->lu->lock);
		r->connected = true;
		if (r->stale_gid) /* the fenced client's address entry */
			ha_pr_forget_address(r, r->stale_gid);
		r->stale_gid = 0;
		log_info("pr",
			 "LUN %u: %s on client.%llu: %zu registration(s), epoch %016llx "
			 "sequence %llu",
			 r->lu->lun, r->name, (unsigned long long)r->gid, nregs,
			 (unsigned long long)v.epoch, (unsigned long long)v.seq);
	} else {
		conn_drop(r);
	}
	pthread_mutex_unlock(&r->conn_mu);
	pr_state_clear(&st);
	return rc;
}

/* The opener thread, once the fenced connection's I/O has ended: off it. Its address entry
 * cannot be removed through it (blocklisted): the next connection does it. */
static void conn_detach(void *arg)
{
	struct pr_rados *r = arg;

	pthread_mutex_lock(&r->conn_mu);
	if (r->connected) {
		conn_drop(r);
		r->stale_gid = r->gid;
		log_info("pr", "LUN %u: %s: off the fenced connection client.%llu", r->lu->lun,
			 r->name, (unsigned long long)r->gid);
	}
	pthread_mutex_unlock(&r->conn_mu);
}

int ha_pr_open(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen)
{
	const struct bs_rbd_cfg *c = &cfg->bs.rbd;
	struct pr_rados *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->lu = lu;
	r->user = (struct bs_rbd_user){conn_attach, conn_detach, r};
	/* RADOS counts a notify's timeout in whole seconds (librados divides the milliseconds
	 * rados_notify2 takes by 1000; 0 is the OSD's default): the settings are seconds */
	r->notify_ms = c->pr.notify_timeout_s ? c->pr.notify_timeout_s * 1000u : PR_RADOS_NOTIFY_MS;
	r->reset_wait_ms = c->pr.reset_wait_s ? c->pr.reset_wait_s * 1000u : PR_RADOS_RESET_WAIT_MS;
	r->retries = c->pr.retries ? c->pr.retries : PR_RADOS_RETRIES;
	r->blocklist_s = c->pr.blocklist_s ? c->pr.blocklist_s : PR_RADOS_BLOCKLIST_S;
	snprintf(r->oid, sizeof(r->oid), "ix.pr.%s", c->image);
	snprintf(r->gwoid, sizeof(r->gwoid), "%s.gw", r->oid);
	r->origin = fnv1a64(FNV1A64_INIT, &r, sizeof(r)) ^ (uint64_t)time(NULL) ^
		    ((uint64_t)getpid() << 32);
	snprintf(r->name, sizeof(r->name), "persistent reservation object %s/%s%s%s", c->pool,
		 c->ns ? c->ns : "", c->ns ? "/" : "", r->oid);
	list_init(&r->jobs);
	list_init(&r->acks);
	atomic_init(&r->refs, 1);
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->conn_mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	pthread_cond_init(&r->done_cv, NULL);
	pthread_cond_init(&r->ack_cv, NULL);
	r->pool = strdup(c->pool);
	r->ns = c->ns ? strdup(c->ns) : NULL;
	if (!r->pool || (c->ns && !r->ns)) {
		snprintf(err, errlen, "out of memory");
		ha_pr_put(r);
		return -ENOMEM;
	}
	rc = -pthread_create(&r->thread, NULL, helper, r);
	if (rc) {
		snprintf(err, errlen, "%s: helper thread: %s", r->name, strerror(-rc));
		ha_pr_put(r);
		return rc;
	}
	rc = -pthread_create(&r->acker, NULL, acker, r);
	r->acker_started = rc == 0;
	if (rc)
		snprintf(err, errlen, "%s: acknowledging thread: %s", r->name, strerror(-rc));
	/* now when the image is open (a damaged object stops the LU), else when it opens */
	if (rc == 0)
		rc = bs_rbd_attach_user(lu->dev, &r->user, err, errlen);
	if (rc) {
		threads_stop(r);
		ha_pr_put(r); /* an abort a notify started meanwhile holds it until it ends */
		return rc;
	}
	lu->pr_store = r;
	lu->pr_ops = &rados_ops;
	lu->pr_persistent = true;
	log_info("pr",
		 "LUN %u: %s: notify timeout %u ms, LUN RESET wait %u ms, %u retries, blocklist "
		 "%u s",
		 lu->lun, r->name, r->notify_ms, r->reset_wait_ms, r->retries, r->blocklist_s);
	return 0;
}
