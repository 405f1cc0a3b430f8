#include "target/target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "target/tgt_int.h"
#include "transport/fault/fault.h"
#include "transport/tcp/tcp.h"
#include "util/log.h"

struct listener_ctx {
	struct ix_target *tgt;
	const struct cfg_portal *portal;
	struct tcp_listener *listener;
};

/* Accepted connections handed to workers that have not picked them up yet. Past this many the
 * listeners pause, so that a connection flood waits in the kernel's backlog instead of piling
 * up here, and workers read the sockets they have (real logins among them) between accepts. */
#define TGT_ACCEPT_IN_TRANSIT 16
#define TGT_ACCEPT_PAUSE_MS   2

struct accept_msg {
	struct tgt_worker *w;
	int fd;
	const struct cfg_portal *portal;
};

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

struct tgt_node *tgt_node_find(struct ix_target *t, const char *name)
{
	struct tgt_node *n = NULL;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nnodes; i++)
		if (strcmp(t->nodes[i]->cfg->name, name) == 0) {
			n = t->nodes[i];
			break;
		}
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- session registry: reinstatement and limits ---- */

struct close_msg {
	struct tgt_worker *w;
	struct tgt_session *s; /* compared, never dereferenced unless still live */
	uint16_t tsih;
};

static void close_session_msg(void *arg)
{
	struct close_msg *m = arg;
	struct list_head *pos, *n;

	/* Runs on the owning worker. The session may have ended meanwhile: only act on it if it
	   is still on this worker's live list. */
	list_for_each_safe(pos, n, &m->w->sessions)
	{
		struct tgt_session *s = list_entry(pos, struct tgt_session, wlink);
		if (s == m->s && s->tsih == m->tsih && s->conn) {
			iscsi_conn_close(s->conn->conn, "session reinstated by a new login");
			break;
		}
	}
	free(m);
}

/* Per-initiator and per-target session limits (called with t->lock held, after reinstated
 * sessions left the registry). Logs which limit was hit. */
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

int tgt_session_register(struct ix_target *t, struct tgt_session *s)
{
	struct list_head *pos, *n;
	uint32_t limit = t->gen->cfg->global.max_sessions;

	pthread_mutex_lock(&t->lock);
	list_for_each_safe(pos, n, &t->sessions)
	{
		struct tgt_session *o = list_entry(pos, struct tgt_session, reg_link);
		if (o->type == s->type && memcmp(o->isid, s->isid, 6) == 0 &&
		    strcmp(o->initiator, s->initiator) == 0 && strcmp(o->target, s->target) == 0 &&
		    o->tpgt == s->tpgt) {
			/* RFC 7143 6.3.5: session reinstatement; the old one goes away */
			struct close_msg *m = malloc(sizeof(*m));
			list_del(&o->reg_link);
			o->registered = false;
			t->nsessions--;
			if (m) {
				m->w = o->worker;
				m->s = o;
				m->tsih = o->tsih;
				if (ev_loop_post(o->worker->loop, close_session_msg, m) < 0)
					free(m);
			}
		}
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
	t->nsessions++;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void tgt_session_unregister(struct ix_target *t, struct tgt_session *s)
{
	pthread_mutex_lock(&t->lock);
	if (s->registered) {
		list_del(&s->reg_link);
		s->registered = false;
		t->nsessions--;
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
	tgt_conn_accept(m->w, m->fd, m->portal);
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

static void on_accept(int fd, void *arg)
{
	struct listener_ctx *lc = arg;
	struct ix_target *t = lc->tgt;
	uint32_t limit = t->gen->cfg->global.max_connections;
	struct accept_msg *m;
	uint64_t quiet;

	/* main thread, like reload: t->gen is stable here */
	if (limit && atomic_load(&t->nconns_open) >= limit) {
		if (tgt_ratelimit_ok(&t->accept_rl, ev_now_ms(t->main_loop), &quiet))
			log_warn("target",
				 "connection limit: %u connections open (global.max_connections): "
				 "refusing new ones (%llu more refused in the last second)",
				 limit, (unsigned long long)quiet);
		close(fd);
		return;
	}
	m = malloc(sizeof(*m));
	if (!m) {
		close(fd);
		return;
	}
	atomic_fetch_add(&t->nconns_open, 1);
	if (atomic_fetch_add(&t->accept_in_transit, 1) + 1 >=
	    TGT_ACCEPT_IN_TRANSIT * (unsigned)t->nworkers)
		tcp_listener_pause(lc->listener, TGT_ACCEPT_PAUSE_MS);
	m->w = &t->workers[t->next_worker++ % t->nworkers];
	m->fd = fd;
	m->portal = lc->portal;
	if (ev_loop_post(m->w->loop, accept_on_worker, m) < 0) {
		close(fd);
		free(m);
		tgt_conn_gone(t);
		atomic_fetch_sub(&t->accept_in_transit, 1);
	}
}

static int build_node(struct cfg_target *ct, struct tgt_node **out,
		      char *err, size_t errlen)
{
	struct tgt_node *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->cfg = ct;
	n->map = scsi_lun_map_new();
	if (!n->map) {
		free(n);
		return -ENOMEM;
	}
	for (size_t j = 0; j < ct->nluns; j++) {
		struct cfg_lun *cl = &ct->luns[j];
		struct scsi_lu *lu;
		char e[200] = "";
		int r;

		cl->lu.target_name = ct->name;
		cl->lu.lun = cl->lun;
		r = scsi_lu_new(&cl->lu, &lu, e, sizeof(e));
		if (r == 0) {
			r = scsi_lun_map_add(n->map, cl->lun, lu);
			scsi_lu_put(lu);
			if (r < 0)
				snprintf(e, sizeof(e), "%s", strerror(-r));
		}
		if (r < 0) {
			snprintf(err, errlen, "target %s LUN %u: %s", ct->name, cl->lun,
				 e[0] ? e : strerror(-r));
			scsi_lun_map_free(n->map);
			free(n);
			return r;
		}
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
		int r = build_node(&cfg->targets[i], &t->nodes[t->nnodes], err, errlen);
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
	t->gen = calloc(1, sizeof(*t->gen));
	t->main_loop = ev_loop_new();
	if (!t->gen || !t->main_loop) {
		r = -ENOMEM;
		goto fail;
	}
	t->gen->cfg = cfg;
	t->next_tsih = (uint16_t)(getpid() & 0x3fff);
	r = build_nodes(t, cfg, err, errlen);
	if (r < 0)
		goto fail;
	if (cfg->testing.transport_faults) {
		const struct fault_cfg *f = &cfg->testing.faults;

		t->fault = fault_dm_new(&tcp_dm_ops, f);
		if (!t->fault) {
			r = -ENOMEM;
			goto fail;
		}
		log_warn("target",
			 "TESTING: transport fault injection on every connection (seed %llu; ppm: drop "
			 "%u delay %u (%u ms) duplicate %u corrupt %u truncate %u; reset after %llu "
			 "bytes)",
			 (unsigned long long)f->seed, f->drop_ppm, f->delay_ppm, f->delay_ms,
			 f->duplicate_ppm, f->corrupt_ppm, f->truncate_ppm,
			 (unsigned long long)f->reset_after_bytes);
	}

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
		list_init(&w->login_fresh);
		list_init(&w->login_active);
		w->loop = ev_loop_new();
		if (!w->loop) {
			r = -ENOMEM;
			goto fail;
		}
		w->sthread = scsi_thread_new(w->loop);
		if (!w->sthread) {
			snprintf(err, errlen, "cannot set up the I/O context (io_uring) for worker %d",
				 i);
			r = -ENOMEM;
			goto fail;
		}
	}

	t->listeners = calloc(cfg->nportals ? cfg->nportals : 1, sizeof(*t->listeners));
	t->lctx = calloc(cfg->nportals ? cfg->nportals : 1, sizeof(*t->lctx));
	if (!t->listeners || !t->lctx) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < cfg->nportals; i++) {
		const struct cfg_portal *p = &cfg->portals[i];
		t->lctx[i].tgt = t;
		t->lctx[i].portal = p;
		if (!p->tcp)
			continue;
		r = tcp_listen(t->main_loop, p->address, p->port, on_accept, &t->lctx[i],
			       &t->listeners[t->nlisteners]);
		if (r < 0) {
			snprintf(err, errlen, "portal %s (%s port %u): %s", p->name, p->address,
				 p->port, strerror(-r));
			goto fail;
		}
		t->lctx[i].listener = t->listeners[t->nlisteners];
		t->nlisteners++;
		log_info("target", "listening on %s%s%s:%u (tcp, tpgt %u)",
			 strchr(p->address, ':') ? "[" : "", p->address,
			 strchr(p->address, ':') ? "]" : "", p->port, p->tpgt);
	}
	*out = t;
	return 0;
fail:
	t->nworkers = t->workers ? t->nworkers : 0;
	ix_target_free(t);
	return r;
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
	r = ev_loop_run(t->main_loop);
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

/* Apply a new configuration for new logins. Targets are matched by name: a kept target keeps
 * its LUs (a RAM LUN keeps its data; LUN changes need a restart and are logged), new targets get
 * new LUs, removed targets disappear from discovery and refuse logins. Existing sessions are not
 * touched. Portal and global changes need a restart. */
int ix_target_reload(struct ix_target *t, struct ix_config *cfg, char *err, size_t errlen)
{
	struct tgt_node **nodes = calloc(cfg->ntargets ? cfg->ntargets : 1, sizeof(*nodes));
	struct tgt_cfg_gen *gen = calloc(1, sizeof(*gen));
	struct tgt_cfg_gen **og;
	struct tgt_node **ret;
	size_t n = 0, nret = 0;
	int r = 0;

	if (!nodes || !gen) {
		free(nodes);
		free(gen);
		return -ENOMEM;
	}
	gen->cfg = cfg;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		struct cfg_target *ct = &cfg->targets[i];
		struct tgt_node *old = NULL;
		for (size_t j = 0; j < t->nnodes; j++)
			if (strcmp(t->nodes[j]->cfg->name, ct->name) == 0)
				old = t->nodes[j];
		if (old) {
			nodes[n++] = old;
			continue;
		}
		r = build_node(ct, &nodes[n], err, errlen);
		if (r < 0)
			break;
		log_info("target", "reload: added target %s", ct->name);
		n++;
	}
	og = realloc(t->old_gens, (t->nold_gens + 1) * sizeof(*og));
	ret = realloc(t->retired, (t->nretired + t->nnodes + 1) * sizeof(*ret));
	if (og)
		t->old_gens = og;
	if (ret)
		t->retired = ret;
	if (r < 0 || !og || !ret) {
		for (size_t i = 0; i < n; i++) {
			bool kept = false;
			for (size_t j = 0; j < t->nnodes; j++)
				kept |= nodes[i] == t->nodes[j];
			if (!kept) {
				scsi_lun_map_free(nodes[i]->map);
				free(nodes[i]);
			}
		}
		free(nodes);
		free(gen);
		return r < 0 ? r : -ENOMEM;
	}
	pthread_mutex_lock(&t->lock);
	for (size_t j = 0; j < t->nnodes; j++) {
		bool kept = false;
		for (size_t i = 0; i < n; i++)
			kept |= nodes[i] == t->nodes[j];
		if (!kept) {
			log_info("target", "reload: removed target %s (its sessions stay until they end)",
				 t->nodes[j]->cfg->name);
			t->retired[t->nretired++] = t->nodes[j];
			nret++;
		}
	}
	/* kept targets now read their settings (ACLs, CHAP) from the new file */
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < cfg->ntargets; k++)
			if (strcmp(nodes[i]->cfg->name, cfg->targets[k].name) == 0)
				nodes[i]->cfg = &cfg->targets[k];
	t->old_gens[t->nold_gens++] = t->gen;
	t->gen = gen;
	free(t->nodes);
	t->nodes = nodes;
	t->nnodes = n;
	pthread_mutex_unlock(&t->lock);
	(void)nret;
	return 0;
}

void ix_target_free(struct ix_target *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nlisteners; i++)
		tcp_listener_free(t->listeners[i]);
	free(t->listeners);
	free(t->lctx);
	for (int i = 0; t->workers && i < t->nworkers; i++) {
		/* drain connections' deferred frees */
		if (t->workers[i].loop)
			ev_loop_run_once(t->workers[i].loop, 0);
		scsi_thread_free(t->workers[i].sthread);
		ev_loop_free(t->workers[i].loop);
	}
	free(t->workers);
	for (size_t i = 0; i < t->nnodes; i++) {
		scsi_lun_map_free(t->nodes[i]->map);
		free(t->nodes[i]);
	}
	free(t->nodes);
	for (size_t i = 0; i < t->nretired; i++) {
		scsi_lun_map_free(t->retired[i]->map);
		free(t->retired[i]);
	}
	free(t->retired);
	for (size_t i = 0; i < t->nold_gens; i++) {
		cfg_free(t->old_gens[i]->cfg);
		free(t->old_gens[i]);
	}
	free(t->old_gens);
	if (t->fault) {
		struct fault_stats st;

		fault_dm_stats(t->fault, &st);
		log_info("target",
			 "fault injection: %llu PDUs eligible, %llu dropped, %llu delayed, %llu "
			 "duplicated, %llu corrupted, %llu truncated",
			 (unsigned long long)st.pdus, (unsigned long long)st.dropped,
			 (unsigned long long)st.delayed, (unsigned long long)st.duplicated,
			 (unsigned long long)st.corrupted, (unsigned long long)st.truncated);
		fault_dm_free(t->fault);
	}
	if (t->gen) {
		cfg_free(t->gen->cfg);
		free(t->gen);
	}
	ev_loop_free(t->main_loop);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
