/* Inspection and control of sessions for the management API (target.h): messages to each
 * worker, which alone may read its sessions and connections, and an answer gathered back on
 * the main loop. Nothing here runs on the data path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs.h"
#include "target/target.h"
#include "target/tgt_int.h"
#include "util/log.h"

struct snap;

struct snap_part {
	struct snap *snap;
	struct tgt_worker *w;
	struct ix_session_info *v;
	size_t n;
	struct ix_login_stats logins;
};

int ix_login_reason_index(uint16_t status)
{
	if (status >= 0x0200 && status <= 0x020b)
		return status - 0x0200;
	if (status >= 0x0300 && status <= 0x0302)
		return 12 + (status - 0x0300);
	return 15;
}

const char *ix_login_reason_name(int idx)
{
	static const char *const names[IX_LOGIN_REASONS] = {
	    "initiator_error",	       "authentication_failed",
	    "authorization_failed",     "not_found",
	    "target_removed",	       "unsupported_version",
	    "too_many_connections",     "missing_parameter",
	    "cant_include_in_session",  "session_type_not_supported",
	    "session_does_not_exist",   "invalid_during_login",
	    "target_error",	       "service_unavailable",
	    "out_of_resources",	       "other",
	};
	return idx >= 0 && idx < IX_LOGIN_REASONS ? names[idx] : "other";
}

struct snap {
	struct ix_target *t;
	ix_sessions_cb cb;
	void *arg;
	atomic_int left;
	int nparts;
	struct snap_part parts[];
};

static void snap_done(void *arg)
{
	struct snap *sn = arg;
	struct ix_session_info *all;
	struct ix_login_stats sum = {0};
	size_t n = 0, k = 0;

	for (int i = 0; i < sn->nparts; i++) {
		const struct ix_login_stats *l = &sn->parts[i].logins;
		n += sn->parts[i].n;
		sum.accepted_normal += l->accepted_normal;
		sum.accepted_discovery += l->accepted_discovery;
		sum.timeouts += l->timeouts;
		for (int j = 0; j < IX_LOGIN_REASONS; j++)
			sum.refused[j] += l->refused[j];
	}
	all = calloc(n ? n : 1, sizeof(*all));
	for (int i = 0; all && i < sn->nparts; i++) {
		memcpy(all + k, sn->parts[i].v, sn->parts[i].n * sizeof(*all));
		k += sn->parts[i].n;
	}
	sn->cb(sn->arg, all, all ? n : 0, &sum);
	for (int i = 0; i < sn->nparts; i++)
		free(sn->parts[i].v);
	free(all);
	free(sn);
}

static void part_finished(struct snap *sn)
{
	if (atomic_fetch_sub(&sn->left, 1) != 1)
		return;
	if (ev_loop_post(sn->t->main_loop, snap_done, sn) < 0)
		log_warn("mgmt", "session listing lost (out of memory)");
}

static void describe(const struct tgt_session *s, struct ix_session_info *o)
{
	const struct tgt_conn *tc = s->conn;
	const struct list_head *pos;

	snprintf(o->initiator, sizeof(o->initiator), "%s", s->initiator);
	snprintf(o->target, sizeof(o->target), "%s", s->node ? s->target : "");
	o->discovery = s->type == ISCSI_SESSION_DISCOVERY;
	memcpy(o->isid, s->isid, 6);
	o->tsih = s->tsih;
	o->tpgt = s->tpgt;
	o->cid = tc->cid;
	o->worker = s->worker->id;
	snprintf(o->portal, sizeof(o->portal), "%s", tc->portal ? tc->portal->name : "");
	snprintf(o->peer, sizeof(o->peer), "%s", tc->conn->peer);
	snprintf(o->local, sizeof(o->local), "%s", tc->conn->local);
	snprintf(o->transport, sizeof(o->transport), "%s",
		 tc->conn->params.rdma ? "iser" : "tcp");
	o->sess = s->params;
	o->conn = tc->conn->params;
	o->exp_cmdsn = s->exp_cmdsn;
	o->max_cmdsn = s->max_cmdsn;
	o->cmdsn_window = s->max_cmdsn - s->exp_cmdsn + 1;
	list_for_each(pos, &tc->active)
		o->tasks_active++;
	o->commands_pending = s->outstanding;
	o->logout_requested = ev_timer_active(&tc->logout_timer);
}

/* On the worker's thread. */
static void snap_worker(void *arg)
{
	struct snap_part *p = arg;
	struct list_head *pos;
	size_t n = 0;

	p->logins = p->w->logins;
	list_for_each(pos, &p->w->sessions)
		n++;
	p->v = calloc(n ? n : 1, sizeof(*p->v));
	if (p->v) {
		list_for_each(pos, &p->w->sessions)
		{
			struct tgt_session *s = list_entry(pos, struct tgt_session, wlink);
			if (s->conn && s->conn->conn && !s->conn->conn->terminated)
				describe(s, &p->v[p->n++]);
		}
	}
	part_finished(p->snap);
}

int ix_target_sessions(struct ix_target *t, ix_sessions_cb cb, void *arg)
{
	struct snap *sn = calloc(1, sizeof(*sn) + (size_t)t->nworkers * sizeof(sn->parts[0]));

	if (!sn)
		return -ENOMEM;
	sn->t = t;
	sn->cb = cb;
	sn->arg = arg;
	sn->nparts = t->nworkers;
	atomic_init(&sn->left, t->nworkers + 1); /* + 1: this function's own turn */
	for (int i = 0; i < t->nworkers; i++) {
		sn->parts[i] = (struct snap_part){.snap = sn, .w = &t->workers[i]};
		if (ev_loop_post(t->workers[i].loop, snap_worker, &sn->parts[i]) < 0)
			part_finished(sn); /* counted as empty */
	}
	part_finished(sn);
	return 0;
}

struct end_msg {
	struct tgt_worker *w;
	struct tgt_session *s; /* compared, never dereferenced unless still live */
	uint16_t tsih;
	bool drop;
	uint32_t timeout_ms;
};

static void end_msg(void *arg)
{
	struct end_msg *m = arg;
	struct tgt_session *s = tgt_worker_session(m->w, m->s, m->tsih);

	if (s && m->drop)
		iscsi_conn_close(s->conn->conn, "dropped through the management API");
	else if (s)
		tgt_conn_request_logout(s->conn, m->timeout_ms, true);
	free(m);
}

int ix_target_session_end(struct ix_target *t, uint16_t tsih, bool drop, uint32_t timeout_ms)
{
	struct list_head *pos;
	struct end_msg *m = malloc(sizeof(*m));
	int r = -ENOENT;

	if (!m)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	list_for_each(pos, &t->sessions)
	{
		struct tgt_session *s = list_entry(pos, struct tgt_session, reg_link);

		if (s->tsih != tsih || s->draining)
			continue;
		*m = (struct end_msg){.w = s->worker, .s = s, .tsih = tsih, .drop = drop,
				      .timeout_ms = timeout_ms};
		r = ev_loop_post(s->worker->loop, end_msg, m);
		break;
	}
	pthread_mutex_unlock(&t->lock);
	if (r < 0)
		free(m);
	return r;
}

int ix_target_lun_rbd_lock(struct ix_target *t, const char *target, uint32_t lun, bool brk,
			   char *state, size_t slen, char *reason, size_t rlen)
{
	struct tgt_node *n = tgt_node_get(t, target);
	struct scsi_lu *lu = n && lun < SCSI_MAX_LUNS ? scsi_lun_map_get(n->map, lun) : NULL;
	struct bs_dev *dev = lu ? scsi_lu_dev(lu) : NULL;
	int rc = dev ? 0 : -ENOENT;

	snprintf(reason, rlen, "%s", dev ? "" : "no such LUN, or it has no medium");
#ifdef IX_HAVE_RBD
	if (dev && (rc = bs_rbd_state(dev, reason, rlen)) < 0)
		snprintf(reason, rlen, "not an rbd LUN");
	if (rc >= 0 && dev && brk)
		rc = bs_rbd_break_lock(dev, reason, rlen);
	if (rc >= 0 && dev)
		snprintf(state, slen, "%s", bs_rbd_state_name(bs_rbd_state(dev, reason, rlen)));
#else
	if (dev) {
		snprintf(reason, rlen, "built without RBD");
		rc = -EOPNOTSUPP;
	}
#endif
	if (n)
		tgt_node_put(n);
	return rc < 0 ? rc : 0;
}

int ix_target_lun_bytes(struct ix_target *t, const char *target, uint32_t lun, uint64_t *bytes)
{
	struct tgt_node *n = tgt_node_get(t, target);
	struct scsi_lu *lu;

	if (!n)
		return -ENOENT;
	/* main thread: the only one that takes LUs out of maps */
	lu = lun < SCSI_MAX_LUNS ? scsi_lun_map_get(n->map, lun) : NULL;
	*bytes = lu ? scsi_lu_num_blocks(lu) * scsi_lu_block_size(lu) : 0;
	tgt_node_put(n);
	return lu && *bytes ? 0 : -ENOENT;
}

bool ix_target_lun_writable(struct ix_target *t, const char *target, uint32_t lun)
{
	struct tgt_node *n = tgt_node_get(t, target);
	struct scsi_lu *lu;
	bool w;

	if (!n)
		return false;
	lu = lun < SCSI_MAX_LUNS ? scsi_lun_map_get(n->map, lun) : NULL;
	w = lu && scsi_lu_writable(lu);
	tgt_node_put(n);
	return w;
}

int ix_target_alua_get(struct ix_target *t, const char *target, struct scsi_alua_cfg *out)
{
	struct tgt_node *n = tgt_node_get(t, target);
	int r;

	if (!n)
		return -ENOENT;
	r = scsi_alua_get(n->map, out);
	tgt_node_put(n);
	return r;
}

int ix_target_alua_set(struct ix_target *t, const char *target, uint16_t group, uint8_t state)
{
	struct tgt_node *n = tgt_node_get(t, target);
	int r;

	if (!n)
		return -ENOENT;
	r = scsi_alua_set_state(n->map, group, state);
	tgt_node_put(n);
	if (r == 0)
		log_info("target", "target %s: ALUA group %u set to %s", target, group,
			 scsi_alua_state_name(state));
	return r;
}
