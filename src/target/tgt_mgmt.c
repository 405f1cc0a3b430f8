/* Inspection and control of sessions for the management API (target.h): messages to each
 * worker, which alone may read its sessions and connections, and an answer gathered back on
 * the main loop. Nothing here runs on the data path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs.h"
#include "ha/ha.h"
#include "target/target.h"
#include "target/tgt_int.h"
#include "util/log.h"

/* ---- asking every worker ---- */

struct gather;

struct gather_msg {
	struct gather *g;
	struct tgt_worker *w;
	void *part;
};

struct gather {
	struct ix_target *t;
	void (*on_worker)(struct tgt_worker *w, void *part);
	void (*done)(void *arg, void *parts, int n);
	void *arg;
	atomic_int left;
	int n;
	unsigned char *parts;
	struct gather_msg msgs[];
};

static void gather_done(void *arg)
{
	struct gather *g = arg;

	g->done(g->arg, g->parts, g->n);
	free(g->parts);
	free(g);
}

static void gather_turn(struct gather *g)
{
	if (atomic_fetch_sub(&g->left, 1) != 1)
		return;
	if (ev_loop_post(g->t->main_loop, gather_done, g) < 0)
		log_warn("mgmt", "an answer gathered from the workers was lost (out of memory)");
}

static void gather_worker(void *arg)
{
	struct gather_msg *m = arg;

	m->g->on_worker(m->w, m->part);
	gather_turn(m->g);
}

int tgt_gather(struct ix_target *t, size_t part_size,
	       void (*on_worker)(struct tgt_worker *w, void *part),
	       void (*done)(void *arg, void *parts, int n), void *arg)
{
	struct gather *g = calloc(1, sizeof(*g) + (size_t)t->nworkers * sizeof(g->msgs[0]));

	if (!g || !(g->parts = calloc(t->nworkers ? (size_t)t->nworkers : 1, part_size))) {
		free(g);
		return -ENOMEM;
	}
	g->t = t;
	g->on_worker = on_worker;
	g->done = done;
	g->arg = arg;
	g->n = t->nworkers;
	atomic_init(&g->left, t->nworkers + 1); /* + 1: this function's own turn */
	for (int i = 0; i < t->nworkers; i++) {
		g->msgs[i] = (struct gather_msg){g, &t->workers[i], g->parts + (size_t)i * part_size};
		if (ev_loop_post(t->workers[i].loop, gather_worker, &g->msgs[i]) < 0)
			gather_turn(g); /* its part stays empty */
	}
	gather_turn(g);
	return 0;
}

/* ---- sessions ---- */

struct snap_part {
	struct ix_session_info *v;
	size_t n;
	struct ix_login_stats logins;
};

struct snap {
	ix_sessions_cb cb;
	void *arg;
};

int ix_login_reason_index(uint16_t status)
{
	if (status >= 0x0200 && status <= 0x020b)
		return status - 0x0200;
	if (status >= 0x0300 && status <= 0x0302)
		return 12 + (status - 0x0300);
	if (status == 0x0101 || status == 0x0102)
		return 15 + (status - 0x0101);
	return 17;
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
	    "out_of_resources",	       "moved_temporarily",
	    "moved_permanently",       "other",
	};
	return idx >= 0 && idx < IX_LOGIN_REASONS ? names[idx] : "other";
}

void tgt_login_stats_add(struct ix_login_stats *a, const struct ix_login_stats *b)
{
	a->accepted_normal += b->accepted_normal;
	a->accepted_discovery += b->accepted_discovery;
	a->timeouts += b->timeouts;
	for (int j = 0; j < IX_LOGIN_REASONS; j++)
		a->refused[j] += b->refused[j];
}

static void snap_done(void *arg, void *parts_, int nparts)
{
	struct snap *sn = arg;
	struct snap_part *parts = parts_;
	struct ix_session_info *all;
	struct ix_login_stats sum = {0};
	size_t n = 0, k = 0;

	for (int i = 0; i < nparts; i++) {
		n += parts[i].n;
		tgt_login_stats_add(&sum, &parts[i].logins);
	}
	all = calloc(n ? n : 1, sizeof(*all));
	for (int i = 0; all && i < nparts; i++) {
		memcpy(all + k, parts[i].v, parts[i].n * sizeof(*all));
		k += parts[i].n;
	}
	sn->cb(sn->arg, all, all ? n : 0, &sum);
	for (int i = 0; i < nparts; i++)
		free(parts[i].v);
	free(all);
	free(sn);
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
	snprintf(o->transport, sizeof(o->transport), "%s", tc->conn->dm->name);
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
static void snap_worker(struct tgt_worker *w, void *part)
{
	struct snap_part *p = part;
	struct list_head *pos;
	size_t n = 0;

	p->logins = w->logins;
	list_for_each(pos, &w->sessions)
		n++;
	p->v = calloc(n ? n : 1, sizeof(*p->v));
	if (!p->v)
		return;
	list_for_each(pos, &w->sessions)
	{
		struct tgt_session *s = list_entry(pos, struct tgt_session, wlink);
		if (s->conn && s->conn->conn && !s->conn->conn->terminated)
			describe(s, &p->v[p->n++]);
	}
}

int ix_target_sessions(struct ix_target *t, ix_sessions_cb cb, void *arg)
{
	struct snap *sn = calloc(1, sizeof(*sn));
	int r;

	if (!sn)
		return -ENOMEM;
	sn->cb = cb;
	sn->arg = arg;
	r = tgt_gather(t, sizeof(struct snap_part), snap_worker, snap_done, sn);
	if (r < 0)
		free(sn);
	return r;
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
	if (dev)
		rc = ha_dev_lock(dev, brk, state, slen, reason, rlen);
	if (n)
		tgt_node_put(n);
	return rc < 0 ? rc : 0;
}

static struct scsi_lu *lu_of(struct ix_target *t, const char *target, uint32_t lun,
			     struct tgt_node **np)
{
	*np = tgt_node_get(t, target);
	return *np && lun < SCSI_MAX_LUNS ? scsi_lun_map_get((*np)->map, lun) : NULL;
}

static void rbd_status(struct bs_dev *dev, struct ix_lun_status *st)
{
	struct ha_dev_status hs;

	if (ha_dev_status(dev, &hs) < 0)
		return;
	st->attempts = hs.attempts;
	st->next_s = hs.next_s;
	if (hs.offline) {
		snprintf(st->state, sizeof(st->state), "offline");
		snprintf(st->reason, sizeof(st->reason), "%s", hs.reason);
	}
	snprintf(st->lock, sizeof(st->lock), "%s", hs.lock);
	snprintf(st->lock_reason, sizeof(st->lock_reason), "%s", hs.lock_reason);
	snprintf(st->conn, sizeof(st->conn), "%s", hs.conn);
	snprintf(st->conn_reason, sizeof(st->conn_reason), "%s", hs.conn_reason);
	st->rejoins = hs.rejoins;
	st->rejoin_attempts = hs.rejoin_attempts;
	st->rejoin_next_s = hs.rejoin_next_s;
}

int ix_target_lun_status(struct ix_target *t, const char *target, uint32_t lun,
			 struct ix_lun_status *st)
{
	struct tgt_node *n;
	struct scsi_lu *lu = lu_of(t, target, lun, &n);
	struct bs_dev *dev = lu ? scsi_lu_dev(lu) : NULL;

	memset(st, 0, sizeof(*st));
	snprintf(st->state, sizeof(st->state), "%s",
		 lu && scsi_lu_offline(lu) ? "offline" : "online");
	if (lu && scsi_lu_offline(lu))
		snprintf(st->reason, sizeof(st->reason), "taken offline by the administrator");
	else if (dev)
		rbd_status(dev, st);
	if (n)
		tgt_node_put(n);
	return lu ? 0 : -ENOENT;
}

int ix_target_lun_retry(struct ix_target *t, const char *target, uint32_t lun)
{
	struct tgt_node *n;
	struct scsi_lu *lu = lu_of(t, target, lun, &n);
	struct bs_dev *dev = lu ? scsi_lu_dev(lu) : NULL;

	if (dev)
		(void)ha_dev_retry(dev);
	if (n)
		tgt_node_put(n);
	return lu ? 0 : -ENOENT;
}

int ix_target_lun_rejoin(struct ix_target *t, const char *target, uint32_t lun)
{
	struct tgt_node *n;
	struct scsi_lu *lu = lu_of(t, target, lun, &n);
	struct bs_dev *dev = lu ? scsi_lu_dev(lu) : NULL;
	int rc = lu ? -EINVAL : -ENOENT;

	if (dev)
		rc = ha_dev_rejoin(dev);
	if (n)
		tgt_node_put(n);
	return rc;
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

int ix_target_lun_shrink(struct ix_target *t, const char *target, uint32_t lun, uint64_t bytes,
			 char *err, size_t errlen)
{
	struct tgt_node *n = tgt_node_get(t, target);
	struct scsi_lu *lu;
	int r = -ENOENT;

	snprintf(err, errlen, "no such LUN");
	if (!n)
		return -ENOENT;
	lu = lun < SCSI_MAX_LUNS ? scsi_lun_map_get(n->map, lun) : NULL;
	if (lu)
		r = scsi_lu_shrink(lu, bytes, err, errlen);
	tgt_node_put(n);
	return r;
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
