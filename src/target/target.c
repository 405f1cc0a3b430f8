#include "target/target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ha/ha.h"
#include "target/tgt_int.h"
#include "target/tgt_isns.h"
#include "util/log.h"

/* One portal's listeners. portal points into the newest configuration that names it (changed
 * only on the main thread, which also runs the accept callbacks). */
struct listener_ctx {
	struct ix_target *tgt;
	const struct cfg_portal *portal;
	struct dm_listener *l[DM_MAX_TRANSPORTS]; /* one per transport the portal serves */
	size_t nl;
};

/* Accepted connections handed to workers that have not picked them up yet. Past this many the
 * listeners pause, so that a connection flood waits in the kernel's backlog instead of piling
 * up here, and workers read the sockets they have (real logins among them) between accepts. */
#define TGT_ACCEPT_IN_TRANSIT 16
#define TGT_ACCEPT_PAUSE_MS   2

struct accept_msg {
	struct tgt_worker *w;
	struct dm_incoming *in;
	const struct cfg_portal *portal;
};

/* ---- fault injection (test configurations): one wrapper per transport ---- */

/* The datamover wrapper "fault" (dm.h) around each transport, with the options the
 * configuration's testing.transport_faults gave. */
static int faults_new(struct ix_target *t, const void *opts)
{
	const struct dm_ops *dm;
	char what[256];

	if (!(t->wrap = dm_find_wrapper("fault")))
		return -ENOENT;
	for (size_t i = 0; (dm = dm_transport(i)) != NULL; i++)
		if (!(t->fault[i] = t->wrap->wrap_new(dm, opts)))
			return -ENOMEM;
	t->wrap->describe(opts, what, sizeof(what));
	log_warn("target", "TESTING: transport fault injection on every connection (%s)", what);
	return 0;
}

/* Frees the wrappers, after logging what they did. */
static void faults_free(struct ix_target *t)
{
	char what[256];
	size_t n = 0;

	while (n < DM_MAX_TRANSPORTS && t->fault[n])
		n++;
	if (n) {
		t->wrap->report(t->fault, n, what, sizeof(what));
		log_info("target", "fault injection: %s", what);
	}
	for (size_t i = 0; i < n; i++) {
		t->wrap->wrap_free(t->fault[i]);
		t->fault[i] = NULL;
	}
}

const struct dm_ops *tgt_conn_ops(const struct ix_target *t, const struct dm_ops *dm)
{
	for (size_t i = 0; i < DM_MAX_TRANSPORTS && t->fault[i]; i++)
		if (dm_transport(i) == dm)
			return t->wrap->wrap_ops(t->fault[i]);
	return NULL;
}

uint32_t tgt_cfg_depth(const struct ix_config *cfg)
{
	uint32_t d = cfg->global.cmdsn_depth;

	return d ? d : 128;
}

struct tgt_cfg_gen *tgt_gen_current(struct ix_target *t)
{
	struct tgt_cfg_gen *g;

	pthread_mutex_lock(&t->lock);
	g = t->gen;
	pthread_mutex_unlock(&t->lock);
	return g;
}

struct tgt_node *tgt_node_get(struct ix_target *t, const char *name)
{
	struct tgt_node *n = NULL;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nnodes; i++)
		if (strcmp(t->nodes[i]->cfg->name, name) == 0) {
			n = t->nodes[i];
			atomic_fetch_add(&n->refs, 1);
			break;
		}
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tgt_node_put(struct tgt_node *n)
{
	if (!n || atomic_fetch_sub(&n->refs, 1) != 1)
		return;
	scsi_lun_map_free(n->map);
	tgt_qos_node_free(n->qos);
	free(n);
}

/* ---- session registry: reinstatement and limits ---- */

struct close_msg {
	struct tgt_worker *w;
	struct tgt_session *s; /* compared, never dereferenced unless still live */
	uint16_t tsih;
};

struct tgt_session *tgt_worker_session(struct tgt_worker *w, const struct tgt_session *s,
				       uint16_t tsih)
{
	struct list_head *pos, *n;

	list_for_each_safe(pos, n, &w->sessions)
	{
		struct tgt_session *o = list_entry(pos, struct tgt_session, wlink);
		if (o == s && o->tsih == tsih && o->conn)
			return o;
	}
	return NULL;
}

static void close_session_msg(void *arg)
{
	struct close_msg *m = arg;
	struct tgt_session *s = tgt_worker_session(m->w, m->s, m->tsih);

	if (s)
		iscsi_conn_close(s->conn->conn, "session reinstated by a new login");
	free(m);
}

/* Per-initiator and per-target session limits (called with t->lock held; draining sessions
 * do not count). Logs which limit was hit. */
static bool session_limit_reached(struct ix_target *t, const struct tgt_session *s)
{
	const struct cfg_global *g = &t->gen->cfg->global;
	uint32_t per_target = s->node ? s->node->cfg->max_sessions : 0;
	uint32_t by_initiator = 0, by_target = 0;
	struct list_head *pos, *n;
	char esc[ISCSI_NAME_MAX * 4];

	if (!g->max_sessions_per_initiator && !per_target)
		return false;
	list_for_each_safe(pos, n, &t->sessions)
	{
		const struct tgt_session *o = list_entry(pos, struct tgt_session, reg_link);

		if (o->draining)
			continue;
		by_initiator += strcasecmp(o->initiator, s->initiator) == 0;
		by_target += s->node && o->node == s->node;
	}
	if (g->max_sessions_per_initiator && by_initiator >= g->max_sessions_per_initiator) {
		log_warn("target",
			 "session limit: initiator %s already has %u sessions "
			 "(global.max_sessions_per_initiator)",
			 log_escape(s->initiator, sizeof(s->initiator), esc, sizeof(esc)),
			 by_initiator);
		return true;
	}
	if (per_target && by_target >= per_target) {
		log_warn("target", "session limit: target %s already has %u sessions (max_sessions)",
			 s->target, by_target);
		return true;
	}
	return false;
}

static bool same_nexus(const struct tgt_session *o, const struct tgt_session *s)
{
	return o->type == s->type && memcmp(o->isid, s->isid, 6) == 0 &&
	       strcmp(o->initiator, s->initiator) == 0 && strcmp(o->target, s->target) == 0 &&
	       o->tpgt == s->tpgt;
}

/* Under t->lock: o's connection is to close (reinstatement); it drains from then on. */
static void reinstate_close(struct ix_target *t, struct tgt_session *o)
{
	struct close_msg *m = malloc(sizeof(*m));

	o->draining = true;
	t->nsessions--;
	if (!m) {
		log_warn("target", "cannot ask session tsih %u to close (out of memory)", o->tsih);
		return;
	}
	m->w = o->worker;
	m->s = o;
	m->tsih = o->tsih;
	if (ev_loop_post(o->worker->loop, close_session_msg, m) < 0)
		free(m);
}

int tgt_session_register(struct ix_target *t, struct tgt_session *s)
{
	struct list_head *pos, *n;
	uint32_t limit = t->gen->cfg->global.max_sessions;

	pthread_mutex_lock(&t->lock);
	if (s->node && s->node->removed) {
		/* a reload removed the target after this login found it */
		pthread_mutex_unlock(&t->lock);
		return -ENOENT;
	}
	list_for_each_safe(pos, n, &t->sessions)
	{
		struct tgt_session *o = list_entry(pos, struct tgt_session, reg_link);

		if (!same_nexus(o, s))
			continue;
		/* RFC 7143 6.3.5: session reinstatement. The old session's tasks are terminated,
		   but those already in the backend finish there: the new session starts only once
		   the old one has been released, so that none of its writes lands after the new
		   session's. */
		if (!o->draining)
			reinstate_close(t, o);
		s->wait_for = o;
		s->wait_tsih = o->tsih;
		list_add_tail(&s->wait_link, &t->held_logins);
		pthread_mutex_unlock(&t->lock);
		return -EINPROGRESS;
	}
	if (limit && t->nsessions >= limit) {
		pthread_mutex_unlock(&t->lock);
		log_warn("target", "session limit: %u sessions open (global.max_sessions)", limit);
		return -EBUSY;
	}
	if (session_limit_reached(t, s)) {
		pthread_mutex_unlock(&t->lock);
		return -EBUSY;
	}
	do {
		s->tsih = ++t->next_tsih;
	} while (s->tsih == 0);
	list_add_tail(&s->reg_link, &t->sessions);
	s->registered = true;
	s->draining = false;
	t->nsessions++;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void tgt_session_drain(struct ix_target *t, struct tgt_session *s)
{
	pthread_mutex_lock(&t->lock);
	if (s->registered && !s->draining) {
		s->draining = true;
		t->nsessions--;
	}
	pthread_mutex_unlock(&t->lock);
}

struct resume_msg {
	struct tgt_worker *w;
	struct tgt_session *s; /* checked by the receiver before use */
	uint64_t hold_id;
};

static void resume_msg(void *arg)
{
	struct resume_msg *m = arg;

	tgt_conn_login_resume(m->w, m->s, m->hold_id);
	free(m);
}

void tgt_session_unregister(struct ix_target *t, struct tgt_session *s)
{
	struct list_head *pos, *n;

	pthread_mutex_lock(&t->lock);
	if (s->registered) {
		list_del(&s->reg_link);
		s->registered = false;
		if (!s->draining)
			t->nsessions--;
	}
	list_for_each_safe(pos, n, &t->held_logins)
	{
		struct tgt_session *h = list_entry(pos, struct tgt_session, wait_link);
		struct resume_msg *m;

		if (h->wait_for != s)
			continue;
		list_del(&h->wait_link);
		h->wait_for = NULL;
		m = malloc(sizeof(*m));
		if (m) {
			*m = (struct resume_msg){.w = h->worker, .s = h, .hold_id = h->hold_id};
			if (ev_loop_post(h->worker->loop, resume_msg, m) == 0)
				continue;
			free(m);
		}
		/* the held login's timer ends it */
		log_warn("target", "cannot resume a login held for session tsih %u (out of memory)",
			 s->tsih);
	}
	pthread_mutex_unlock(&t->lock);
}

void tgt_session_unhold(struct ix_target *t, struct tgt_session *s)
{
	pthread_mutex_lock(&t->lock);
	if (s->wait_for) {
		list_del(&s->wait_link);
		s->wait_for = NULL;
	}
	pthread_mutex_unlock(&t->lock);
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
	struct tgt_worker *w = arg;

	ev_loop_run(w->loop);
	return NULL;
}

static void accept_on_worker(void *arg)
{
	struct accept_msg *m = arg;

	atomic_fetch_sub(&m->w->tgt->accept_in_transit, 1);
	tgt_conn_accept(m->w, m->in, m->portal);
	free(m);
}

bool tgt_ratelimit_ok(struct tgt_ratelimit *rl, uint64_t now_ms, uint64_t *suppressed)
{
	if (rl->last_ms && now_ms - rl->last_ms < 1000) {
		rl->suppressed++;
		return false;
	}
	rl->last_ms = now_ms;
	*suppressed = rl->suppressed;
	rl->suppressed = 0;
	return true;
}

void tgt_conn_gone(struct ix_target *t)
{
	atomic_fetch_sub(&t->nconns_open, 1);
}

/* Main thread, like reload (t->gen is stable here): may one more connection be accepted
 * (global.max_connections)? If so it is counted, and handed to the returned worker. */
static struct tgt_worker *accept_admit(struct ix_target *t)
{
	uint32_t limit = t->gen->cfg->global.max_connections;
	uint64_t quiet;

	if (limit && atomic_load(&t->nconns_open) >= limit) {
		if (tgt_ratelimit_ok(&t->accept_rl, ev_now_ms(t->main_loop), &quiet))
			log_warn("target",
				 "connection limit: %u connections open (global.max_connections): "
				 "refusing new ones (%llu more refused in the last second)",
				 limit, (unsigned long long)quiet);
		return NULL;
	}
	atomic_fetch_add(&t->nconns_open, 1);
	atomic_fetch_add(&t->accept_in_transit, 1);
	atomic_fetch_add(&t->npending_logins, 1);
	return &t->workers[t->next_worker++ % t->nworkers];
}

/* The connection admitted last never reached a worker. */
static void accept_undo(struct ix_target *t)
{
	tgt_conn_gone(t);
	atomic_fetch_sub(&t->accept_in_transit, 1);
	tgt_login_slot_free(t);
}

static void listeners_pause(struct listener_ctx *lc, unsigned ms)
{
	for (size_t i = 0; i < lc->nl; i++)
		dm_listener_pause(lc->l[i], ms);
}

/* ---- the login gate (global.max_pending_logins) ---- */

/* How often the main thread looks whether there is room again while the gate is closed. */
#define TGT_LOGIN_GATE_TICK_MS 5

/* Hold (or release) every listener that can be held until released. */
static void listeners_hold(struct ix_target *t, bool hold)
{
	for (size_t i = 0; i < t->nlctx; i++)
		for (size_t j = 0; t->lctx[i] && j < t->lctx[i]->nl; j++) {
			struct dm_listener *l = t->lctx[i]->l[j];

			if (!dm_listener_can_hold(l))
				continue;
			if (hold)
				dm_listener_pause(l, 0);
			else
				dm_listener_resume(l);
		}
}

static void evict_on_worker(void *arg)
{
	tgt_login_evict_stale(arg);
}

/* While the gate is closed: open it once a login has finished (or gone); every quarter of
 * global.login_grace_ms, ask the workers to close logins idle for longer than it. */
static void login_gate_tick(struct ev_timer *tm)
{
	struct ix_target *t = tm->arg;
	const struct cfg_global *g = &t->gen->cfg->global;
	uint32_t every = g->login_grace_ms / 4 / TGT_LOGIN_GATE_TICK_MS;

	if (atomic_load(&t->npending_logins) < g->max_pending_logins) {
		t->login_gate = false;
		listeners_hold(t, false);
		return;
	}
	if (++t->login_gate_ticks % (every ? every : 1) == 0)
		for (int i = 0; i < t->nworkers; i++)
			(void)ev_loop_post(t->workers[i].loop, evict_on_worker, &t->workers[i]);
	ev_timer_start(t->main_loop, tm, TGT_LOGIN_GATE_TICK_MS);
}

void tgt_login_gate_check(struct ix_target *t)
{
	uint32_t limit = t->gen->cfg->global.max_pending_logins;
	uint64_t quiet;

	if (t->login_gate || !limit || atomic_load(&t->npending_logins) < limit)
		return;
	t->login_gate = true;
	t->login_gate_ticks = 0;
	listeners_hold(t, true);
	if (tgt_ratelimit_ok(&t->login_gate_rl, ev_now_ms(t->main_loop), &quiet))
		log_info("target",
			 "login limit: %u connections logging in (global.max_pending_logins): "
			 "accepting more as they finish; the others wait in the listen backlog "
			 "(%llu more times in the last second)",
			 limit, (unsigned long long)quiet);
	ev_timer_start(t->main_loop, &t->login_gate_timer, TGT_LOGIN_GATE_TICK_MS);
}

/* A connection request on one of a portal's listeners (main thread). */
static void on_incoming(struct dm_incoming *in, void *arg)
{
	struct listener_ctx *lc = arg;
	struct ix_target *t = lc->tgt;
	struct accept_msg *m = calloc(1, sizeof(*m));

	if (!m || !(m->w = accept_admit(t))) {
		dm_reject(in);
		free(m);
		return;
	}
	if (atomic_load(&t->accept_in_transit) >= TGT_ACCEPT_IN_TRANSIT * (unsigned)t->nworkers)
		listeners_pause(lc, TGT_ACCEPT_PAUSE_MS);
	m->in = in;
	m->portal = lc->portal;
	if (ev_loop_post(m->w->loop, accept_on_worker, m) < 0) {
		dm_reject(in);
		free(m);
		accept_undo(t);
	}
	tgt_login_gate_check(t);
}

static void log_portal(const struct cfg_portal *p, const char *what, const char *transport)
{
	bool v6 = strchr(p->address, ':') != NULL;

	log_info("target", "%s %s%s%s:%u (%s, tpgt %u, portal %s)", what, v6 ? "[" : "",
		 p->address, v6 ? "]" : "", p->port, transport, p->tpgt, p->name);
}

/* The transports a portal serves, in the order they are set up: those that need a device
 * (direct placement: RDMA) first, so a portal whose address has none fails before a socket is
 * bound, then the others, each group in registry order. */
static size_t portal_transports(const struct cfg_portal *p, const struct dm_ops **out)
{
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; dm_transport(i); i++) {
			const struct dm_ops *dm = dm_transport(i);
			bool device = dm->caps & DM_CAP_DIRECT_PLACEMENT;

			if ((p->transports & (1u << i)) && device == (pass == 0))
				out[n++] = dm;
		}
	return n;
}

int tgt_portal_listen(struct ix_target *t, const struct cfg_portal *p, struct listener_ctx **out,
		      char *err, size_t errlen)
{
	struct listener_ctx *lc = calloc(1, sizeof(*lc));
	const struct dm_ops *dms[DM_MAX_TRANSPORTS];
	size_t n = portal_transports(p, dms);
	int r;

	if (!lc)
		return -ENOMEM;
	lc->tgt = t;
	lc->portal = p;
	for (size_t i = 0; i < n; i++) {
		r = dm_listen(dms[i], t->main_loop, p->address, p->port, on_incoming, lc,
			      &lc->l[lc->nl]);
		if (r < 0) {
			snprintf(err, errlen, "portal %s (%s port %u, %s): %s%s", p->name,
				 p->address, p->port, dms[i]->name, strerror(-r),
				 dms[i]->caps & DM_CAP_DIRECT_PLACEMENT &&
						 (r == -ENODEV || r == -EADDRNOTAVAIL || r == -ENOENT)
					 ? " (no RDMA device serves this address)"
					 : "");
			tgt_portal_close(lc);
			return r;
		}
		lc->nl++;
		log_portal(p, "listening on", dms[i]->name);
	}
	*out = lc;
	return 0;
}

void tgt_portal_close(struct listener_ctx *lc)
{
	if (!lc)
		return;
	for (size_t i = 0; i < lc->nl; i++)
		dm_listener_free(lc->l[i]);
	free(lc);
}

const struct cfg_portal *tgt_portal_cfg(const struct listener_ctx *lc)
{
	return lc->portal;
}

void tgt_portal_set_cfg(struct listener_ctx *lc, const struct cfg_portal *p)
{
	lc->portal = p;
}

int tgt_lu_new(struct ix_target *t, struct cfg_target *ct, struct cfg_lun *cl,
	       struct scsi_lu **out, char *err, size_t errlen)
{
	char e[512] = "";
	int r;

	cl->lu.target_name = ct->name;
	cl->lu.lun = cl->lun;
	cl->lu.index = t->luidx; /* EXTENDED COPY reaches every LU of this target context */
	cl->lu.ha = ha_scsi(t->ha); /* ownership, ALUA following it, the shared PR store */
	r = scsi_lu_new(&cl->lu, out, e, sizeof(e));
	if (r < 0)
		snprintf(err, errlen, "target %s LUN %u: %s", ct->name, cl->lun,
			 e[0] ? e : strerror(-r));
	return r;
}

int tgt_node_new(struct ix_target *t, struct cfg_target *ct, struct tgt_node **out, char *err,
		 size_t errlen)
{
	struct tgt_node *n = calloc(1, sizeof(*n));
	int r;

	if (!n)
		return -ENOMEM;
	atomic_init(&n->refs, 1);
	atomic_init(&n->redirect_next, 0);
	n->cfg = ct;
	n->map = scsi_lun_map_new();
	if (!n->map) {
		free(n);
		return -ENOMEM;
	}
	scsi_lun_map_set_ha(n->map, ha_scsi(t->ha));
	for (size_t j = 0; j < ct->nluns; j++) {
		struct scsi_lu *lu;

		r = tgt_lu_new(t, ct, &ct->luns[j], &lu, err, errlen);
		if (r == 0) {
			r = scsi_lun_map_add(n->map, ct->luns[j].lun, lu);
			scsi_lu_put(lu);
			if (r < 0)
				snprintf(err, errlen, "target %s LUN %u: %s", ct->name,
					 ct->luns[j].lun, strerror(-r));
		}
		if (r < 0) {
			scsi_lun_map_free(n->map);
			free(n);
			return r;
		}
	}
	r = scsi_alua_configure(n->map, &ct->alua);
	if (r < 0) {
		snprintf(err, errlen, "target %s: ALUA groups: %s", ct->name, strerror(-r));
		scsi_lun_map_free(n->map);
		free(n);
		return r;
	}
	n->qos = tgt_qos_node_new();
	if (!n->qos || tgt_qos_apply(t, n, ct) < 0) {
		snprintf(err, errlen, "target %s: QoS limits: out of memory", ct->name);
		scsi_lun_map_free(n->map);
		tgt_qos_node_free(n->qos);
		free(n);
		return -ENOMEM;
	}
	*out = n;
	return 0;
}

static int build_nodes(struct ix_target *t, struct ix_config *cfg, char *err, size_t errlen)
{
	t->nodes = calloc(cfg->ntargets ? cfg->ntargets : 1, sizeof(*t->nodes));
	if (!t->nodes)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		int r = tgt_node_new(t, &cfg->targets[i], &t->nodes[t->nnodes], err, errlen);
		if (r < 0)
			return r;
		t->nnodes++;
	}
	return 0;
}

/* Every connection is a descriptor: make RLIMIT_NOFILE cover global.max_connections plus the
 * daemon's own (listeners, epoll, eventfds, rings, LUN files), raising the soft limit when the
 * hard one allows, else saying which setting to change. */
static void check_fd_limit(const struct ix_config *cfg, int nworkers)
{
	rlim_t need = (rlim_t)cfg->global.max_connections + 64 + 8 * (rlim_t)nworkers;
	struct rlimit rl;

	for (size_t i = 0; i < cfg->ntargets; i++)
		need += cfg->targets[i].nluns;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
		return;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need)
		rl.rlim_cur = need;
	else
		rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= need) {
		log_info("target", "raised the open file limit to %llu for %u connections",
			 (unsigned long long)rl.rlim_cur, cfg->global.max_connections);
		return;
	}
	log_warn("target",
		 "open file limit %llu is below the %llu that global.max_connections %u needs: "
		 "raise it (ulimit -n) or lower max_connections",
		 (unsigned long long)rl.rlim_cur, (unsigned long long)need,
		 cfg->global.max_connections);
}

int ix_target_new(struct ix_config *cfg, struct ix_target **out, char *err, size_t errlen)
{
	struct ix_target *t = calloc(1, sizeof(*t));
	long ncpu;
	int r;

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	list_init(&t->sessions);
	list_init(&t->snap_offline);
	list_init(&t->held_logins);
	t->gen = calloc(1, sizeof(*t->gen));
	t->main_loop = ev_loop_new();
	t->luidx = scsi_lu_index_new();
	t->ha = ha_ctx_new();
	if (!t->gen || !t->main_loop || !t->luidx || !t->ha) {
		r = -ENOMEM;
		goto fail;
	}
	ha_set_snap_handler(t->ha, tgt_snap_asked, t);
	ha_set_offline_handler(t->ha, tgt_snap_offline_asked, t);
	t->gen->cfg = cfg;
	t->next_tsih = (uint16_t)(getpid() & 0x3fff);
	r = build_nodes(t, cfg, err, errlen);
	if (r < 0)
		goto fail;
	if (cfg->testing.transport_faults && (r = faults_new(t, cfg->testing.faults)) < 0)
		goto fail;

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	t->nworkers = cfg->global.threads > 0 ? cfg->global.threads : (int)(ncpu > 0 ? ncpu : 1);
	check_fd_limit(cfg, t->nworkers);
	t->workers = calloc((size_t)t->nworkers, sizeof(*t->workers));
	if (!t->workers) {
		r = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < t->nworkers; i++) {
		struct tgt_worker *w = &t->workers[i];
		w->tgt = t;
		w->id = i;
		list_init(&w->sessions);
		list_init(&w->conns);
		list_init(&w->login_fresh);
		list_init(&w->login_active);
		tgt_stats_worker_init(w);
		tgt_trim_worker_init(w);
		w->loop = ev_loop_new();
		if (!w->loop) {
			r = -ENOMEM;
			goto fail;
		}
		ev_loop_set_poll_us(w->loop, cfg->global.poll_us);
		w->stage.buf = malloc(DM_RX_STAGE_SIZE);
		if (!w->stage.buf) {
			r = -ENOMEM;
			goto fail;
		}
		w->stage.size = DM_RX_STAGE_SIZE;
		w->sthread = scsi_thread_new(w->loop, t->luidx);
		if (!w->sthread) {
			snprintf(err, errlen,
				 "cannot set up the I/O context (io_uring) for worker %d", i);
			r = -ENOMEM;
			goto fail;
		}
		scsi_thread_set_abort(w->sthread, tgt_abort_hook, w);
	}

	t->lctx = calloc(cfg->nportals ? cfg->nportals : 1, sizeof(*t->lctx));
	if (!t->lctx) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < cfg->nportals; i++) {
		r = tgt_portal_listen(t, &cfg->portals[i], &t->lctx[t->nlctx], err, errlen);
		if (r < 0)
			goto fail;
		t->nlctx++;
	}
	if ((r = tgt_isns_new(t->main_loop, cfg, &t->isns)) < 0) {
		snprintf(err, errlen, "global.isns: %s", strerror(-r));
		goto fail;
	}
	*out = t;
	return 0;
fail:
	t->nworkers = t->workers ? t->nworkers : 0;
	ix_target_free(t);
	return r;
}

static void space_poll(struct ev_timer *tm)
{
	struct ix_target *t = tm->arg;

	scsi_lu_index_space_poll(t->luidx);
	ev_timer_start(t->main_loop, tm, TGT_SPACE_POLL_MS);
}

int ix_target_run(struct ix_target *t)
{
	int r;

	for (int i = 0; i < t->nworkers; i++) {
		r = pthread_create(&t->workers[i].thread, NULL, worker_main, &t->workers[i]);
		if (r) {
			for (int j = 0; j < i; j++) {
				ev_loop_stop(t->workers[j].loop);
				pthread_join(t->workers[j].thread, NULL);
				t->workers[j].thread = 0;
			}
			return -r;
		}
	}
	ev_timer_init(&t->space_timer, space_poll, t);
	ev_timer_start(t->main_loop, &t->space_timer, TGT_SPACE_POLL_MS);
	ev_timer_init(&t->login_gate_timer, login_gate_tick, t);
	r = ev_loop_run(t->main_loop);
	ev_timer_stop(t->main_loop, &t->space_timer);
	ev_timer_stop(t->main_loop, &t->login_gate_timer);
	tgt_isns_stop(t->isns); /* deregister while the target still serves */
	for (int i = 0; i < t->nworkers; i++) {
		ev_loop_stop(t->workers[i].loop);
		pthread_join(t->workers[i].thread, NULL);
		t->workers[i].thread = 0;
	}
	return r;
}

void ix_target_stop(struct ix_target *t)
{
	ev_loop_stop(t->main_loop);
}

struct ev_loop *ix_target_main_loop(struct ix_target *t)
{
	return t->main_loop;
}

static void close_all(struct tgt_worker *w)
{
	while (w->loop && w->conns.next && !list_empty(&w->conns)) {
		struct tgt_conn *tc = list_first_entry(&w->conns, struct tgt_conn, wlink);
		iscsi_conn_close(tc->conn, "target shutting down");
	}
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Shutdown, workers stopped and connections closed: run their loops until every connection
 * has been released (its tasks finished in the backend; a slow device may take a while), at
 * most TGT_SHUTDOWN_DRAIN_MS. */
#define TGT_SHUTDOWN_DRAIN_MS 5000
static void drain_backend(struct ix_target *t)
{
	uint64_t start = mono_ms();
	unsigned left;

	while ((left = atomic_load(&t->nconns_open)) > 0) {
		if (mono_ms() - start >= TGT_SHUTDOWN_DRAIN_MS) {
			log_warn("target",
				 "shutdown: %u connections still have tasks in the backend after %u ms; "
				 "not waiting longer",
				 left, TGT_SHUTDOWN_DRAIN_MS);
			return;
		}
		for (int i = 0; i < t->nworkers; i++) {
			if (!t->workers[i].loop)
				continue;
			ev_loop_run_once(t->workers[i].loop, 2);
			close_all(&t->workers[i]); /* accepted connections still being handed over */
		}
	}
}

void ix_target_free(struct ix_target *t)
{
	if (!t)
		return;
	ha_set_snap_handler(t->ha, NULL, NULL); /* no request of another gateway after this */
	ha_set_offline_handler(t->ha, NULL, NULL);
	tgt_snap_offline_stop(t);
	for (size_t i = 0; i < t->nlctx; i++)
		tgt_portal_close(t->lctx[i]);
	free(t->lctx);
	/* the worker threads have stopped: close the connections still open (sessions logged in
	   at shutdown), wait (bounded) for their tasks still in the backend, so that the
	   connections are released, then let the deferred frees run */
	for (int i = 0; t->workers && i < t->nworkers; i++)
		close_all(&t->workers[i]);
	drain_backend(t);
	for (int i = 0; t->workers && i < t->nworkers; i++) {
		struct tgt_worker *w = &t->workers[i];

		for (int k = 0, idle = 0; w->loop && k < 200 && idle < 3; k++)
			idle = ev_loop_run_once(w->loop, 5) == 0 ? idle + 1 : 0;
		if (w->loop)
			ev_timer_stop(w->loop, &w->trim_timer);
		scsi_thread_free(t->workers[i].sthread);
		ev_loop_free(t->workers[i].loop);
		free(w->stage.buf);
		tgt_stats_worker_free(w);
	}
	free(t->workers);
	/* sessions are gone (their connections were released above): these are the last
	   references */
	for (size_t i = 0; i < t->nnodes; i++)
		tgt_node_put(t->nodes[i]);
	free(t->nodes);
	tgt_reload_free(t);
	for (size_t i = 0; i < t->nold_gens; i++) {
		cfg_free(t->old_gens[i]->cfg);
		free(t->old_gens[i]);
	}
	free(t->old_gens);
	faults_free(t);
	tgt_isns_free(t->isns);
	if (t->gen) {
		cfg_free(t->gen->cfg);
		free(t->gen);
	}
	ev_loop_free(t->main_loop);
	scsi_lu_index_put(t->luidx); /* freed with the last LU that still holds it */
	ha_ctx_put(t->ha);	     /* the same */
	pthread_mutex_destroy(&t->lock);
	free(t);
}
