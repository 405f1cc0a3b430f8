/* SIGHUP reload: apply a new configuration as the difference from the running one.
 *
 * Targets are matched by name.
 * - A new target gets new LUs.
 * - A removed target leaves the node table at once (discovery no longer lists it, logins get
 *   0x0203), and each of its sessions is asked to log out: Async Message "target requests
 *   Logout" with Parameter3 = global.logout_timeout_ms in seconds (RFC 7143 11.9.1). A session
 *   still there when that time is up gets "target will drop all connections" and is closed.
 *   Its LUs close when its last session has ended.
 * - A kept target reads its ACLs and CHAP settings from the new file (new logins); the LUN
 *   masking of its ACLs ("luns") applies to live sessions too (tgt_acl.c). Its LUN
 *   changes apply at once: a LUN no longer listed leaves the LUN map (later commands to it get
 *   LOGICAL UNIT NOT SUPPORTED; commands already running finish), a newly listed one joins it,
 *   and every I_T nexus that used the target's LUs gets REPORTED LUNS DATA HAS CHANGED. A file,
 *   block or RAM LUN whose size alone grew is grown in place (its nexuses get CAPACITY DATA HAS
 *   CHANGED); write_cache and readonly change in place (MODE PARAMETERS CHANGED, 2A/01; a
 *   LUN configured readonly at start stays read-only), and so does thin_threshold (checked
 *   against the last sample at once); a LUN listed in both files with other settings keeps
 *   running as it was (a restart applies them).
 * - A kept target's ALUA target port groups ("alua") are replaced by the new file's; a group
 *   whose id and configured state are unchanged keeps the state it has now (SET TARGET PORT
 *   GROUPS, iscsi_set_alua_state), and any visible change gives every I_T nexus 2A/06.
 * - QoS limits ("qos" of LUNs and ACL entries) change in place, commands already waiting
 *   included (tgt_qos.c).
 * - Portals are matched by name. A new one listens before anything is applied (a portal that
 *   cannot listen fails the reload); a removed one stops listening (connections accepted
 *   through it go on); one whose address, port or transports changed is both (the new
 *   listener first, so moving a portal to an address in use fails cleanly); a tpgt change
 *   applies to connections accepted from then on.
 * - Global changes need a restart, except logout_timeout_ms, read at each reload, and the
 *   limits read at each accept or login.
 *
 * Everything that can fail (new LUs, memory) is done before anything is applied, so a failed
 * reload changes nothing. Runs on the main thread, the only one that changes the node table and
 * the LUN maps.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/target.h"
#include "target/tgt_int.h"
#include "target/tgt_isns.h"
#include "util/log.h"

/* An LU taken out of a LUN map. Workers look LUs up without taking a reference
 * (scsi_lun_map_get), always inside one event-loop callback, so once every worker loop has run
 * a callback posted after the removal none can still hold the pointer, and the map's reference
 * is dropped. Owned by ix_target, so a loop that stops before its turn leaks nothing. */
struct tgt_lu_retire {
	struct scsi_lu *lu;
	atomic_int left; /* worker loops that have not turned yet */
};

/* One LUN change of a kept target, prepared before anything is applied. */
struct lun_change {
	struct tgt_node *node;
	uint32_t lun;
	struct scsi_lu *add;	      /* the new LU; NULL: remove the LUN */
	struct tgt_lu_retire *retire; /* for a removal */
};

/* A running LU that the new configuration changes in place: larger (file, block, RAM LUNs),
 * offline or online. */
struct lun_grow {
	struct scsi_lu *lu;
	uint64_t bytes;  /* 0: the size stays */
	int offline;     /* -1: stays, else the new state */
	int wce;         /* write_cache: -1 stays, else the new value */
	int readonly;    /* -1 stays, else the new value */
	int thin_thr;    /* thin_threshold: -1 stays, else the new value */
	const char *target;
	uint32_t lun;
};

struct plan {
	struct ix_config *cfg;
	struct lun_grow *grow;
	size_t ngrow;
	struct listener_ctx **lctx; /* for cfg->portals, in order: kept or new */
	bool *lctx_new;
	struct tgt_node **nodes; /* for cfg->targets, in order */
	size_t nnodes;
	struct lun_change *chg;
	size_t nchg;
};

struct logout_msg {
	struct tgt_worker *w;
	struct tgt_session *s; /* compared, never dereferenced unless still live */
	uint16_t tsih;
	uint32_t timeout_ms;
};

static void lu_retire_turn(void *arg)
{
	struct tgt_lu_retire *r = arg;

	if (atomic_fetch_sub(&r->left, 1) == 1)
		scsi_lu_put(r->lu);
}

static void logout_request_msg(void *arg)
{
	struct logout_msg *m = arg;
	struct tgt_session *s = tgt_worker_session(m->w, m->s, m->tsih);

	if (s)
		tgt_conn_request_logout(s->conn, m->timeout_ms, false);
	free(m);
}

static struct tgt_node *running_node(struct ix_target *t, const char *name)
{
	for (size_t j = 0; j < t->nnodes; j++)
		if (strcmp(t->nodes[j]->cfg->name, name) == 0)
			return t->nodes[j];
	return NULL;
}

static bool in_plan(const struct plan *p, const struct tgt_node *n)
{
	for (size_t i = 0; i < p->nnodes; i++)
		if (p->nodes[i] == n)
			return true;
	return false;
}

static const struct cfg_lun *cfg_lun_find(const struct cfg_target *ct, uint32_t lun)
{
	for (size_t i = 0; i < ct->nluns; i++)
		if (ct->luns[i].lun == lun)
			return &ct->luns[i];
	return NULL;
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool lu_cfg_same(const struct scsi_lu_cfg *a, const struct scsi_lu_cfg *b)
{
	return a->backend == b->backend && str_same(a->path, b->path) &&
	       a->size_bytes == b->size_bytes && a->block_size == b->block_size &&
	       a->readonly == b->readonly && a->thin == b->thin &&
	       a->write_cache == b->write_cache && a->no_medium == b->no_medium &&
	       str_same(a->vendor, b->vendor) && str_same(a->product, b->product) &&
	       str_same(a->serial, b->serial) && a->naa_id == b->naa_id &&
	       a->has_naa_ext == b->has_naa_ext && a->naa_ext == b->naa_ext &&
	       a->removable == b->removable && a->sanitize_rate == b->sanitize_rate &&
	       a->offline == b->offline && str_same(a->state_dir, b->state_dir) &&
	       str_same(a->bs.rbd.pool, b->bs.rbd.pool) &&
	       str_same(a->bs.rbd.image, b->bs.rbd.image) && str_same(a->bs.rbd.ns, b->bs.rbd.ns) &&
	       str_same(a->bs.rbd.conf, b->bs.rbd.conf) &&
	       str_same(a->bs.rbd.client, b->bs.rbd.client) &&
	       str_same(a->bs.rbd.keyring, b->bs.rbd.keyring) &&
	       a->bs.rbd.osd_op_timeout_s == b->bs.rbd.osd_op_timeout_s &&
	       a->bs.rbd.start_offline == b->bs.rbd.start_offline &&
	       a->bs.rbd.connect_timeout_s == b->bs.rbd.connect_timeout_s &&
	       a->bs.rbd.rejoin_after_ms == b->bs.rbd.rejoin_after_ms &&
	       a->bs.rbd.exclusive_lock == b->bs.rbd.exclusive_lock &&
	       a->bs.rbd.lock_check_ms == b->bs.rbd.lock_check_ms &&
	       a->bs.rbd.handover_timeout_ms == b->bs.rbd.handover_timeout_ms &&
	       a->pr_store == b->pr_store && a->thin_threshold == b->thin_threshold &&
	       memcmp(&a->bs.rbd.pr, &b->bs.rbd.pr, sizeof(a->bs.rbd.pr)) == 0;
}

static int add_change(struct plan *p, struct tgt_node *node, uint32_t lun, struct scsi_lu *add)
{
	struct lun_change *c = realloc(p->chg, (p->nchg + 1) * sizeof(*c));

	if (!c)
		return -ENOMEM;
	p->chg = c;
	c = &p->chg[p->nchg];
	*c = (struct lun_change){.node = node, .lun = lun, .add = add};
	if (!add) {
		c->retire = calloc(1, sizeof(*c->retire));
		if (!c->retire)
			return -ENOMEM;
	}
	p->nchg++;
	return 0;
}

/* Old to new value of a setting changed online: -1 when it stays. */
static int setting(bool old, bool now)
{
	return old == now ? -1 : now;
}

/* A LUN in both configurations whose size, offline, write_cache or readonly alone changed: 1
 * when it changes in place (or already is that way), 0 when it is some other change (or it
 * would become writable but was opened read-only), -ENOMEM. */
static int plan_grow(struct plan *p, const struct cfg_target *ct, const struct cfg_lun *cl,
		     const struct cfg_lun *old, struct scsi_lu *lu)
{
	struct scsi_lu_cfg same_size = cl->lu;
	uint64_t have = scsi_lu_num_blocks(lu) * scsi_lu_block_size(lu);
	struct lun_grow *g;

	uint64_t bytes = 0;

	same_size.size_bytes = old->lu.size_bytes;
	same_size.offline = old->lu.offline;
	same_size.write_cache = old->lu.write_cache;
	same_size.readonly = old->lu.readonly;
	same_size.thin_threshold = old->lu.thin_threshold;
	if (!lu_cfg_same(&old->lu, &same_size) ||
	    (old->lu.readonly && !cl->lu.readonly && !scsi_lu_writable(lu)))
		return 0;
	if (cl->lu.size_bytes != old->lu.size_bytes && cl->lu.size_bytes != 0 &&
	    cl->lu.size_bytes != have) {
		if ((cl->lu.backend != BS_TYPE_FILE && cl->lu.backend != BS_TYPE_BLOCK &&
		     cl->lu.backend != BS_TYPE_RAM && cl->lu.backend != BS_TYPE_RBD) ||
		    cl->lu.size_bytes < have)
			return 0;
		bytes = cl->lu.size_bytes;
	}
	if (!bytes && cl->lu.offline == scsi_lu_offline(lu) &&
	    old->lu.write_cache == cl->lu.write_cache && old->lu.readonly == cl->lu.readonly &&
	    old->lu.thin_threshold == cl->lu.thin_threshold)
		return 1;
	g = realloc(p->grow, (p->ngrow + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	p->grow = g;
	p->grow[p->ngrow++] = (struct lun_grow){
	    .lu = lu,
	    .bytes = bytes,
	    .offline = cl->lu.offline == scsi_lu_offline(lu) ? -1 : cl->lu.offline,
	    .wce = setting(old->lu.write_cache, cl->lu.write_cache),
	    .readonly = setting(old->lu.readonly, cl->lu.readonly),
	    .thin_thr = old->lu.thin_threshold == cl->lu.thin_threshold ? -1
									: cl->lu.thin_threshold,
	    .target = ct->name,
	    .lun = cl->lun};
	return 1;
}

static void lu_set_options(const struct lun_grow *g)
{
	int r = scsi_lu_set_options(g->lu, g->wce, g->readonly);

	if (r < 0)
		log_warn("target", "target %s LUN %u: options not changed: %s", g->target, g->lun,
			 strerror(-r));
	else
		log_info("target", "target %s LUN %u:%s%s%s%s", g->target, g->lun,
			 g->wce >= 0 ? " write cache " : "",
			 g->wce >= 0 ? (g->wce ? "on" : "off") : "",
			 g->readonly >= 0 ? " readonly " : "",
			 g->readonly >= 0 ? (g->readonly ? "on" : "off") : "");
}

/* Last step of the plan, when nothing else can fail: grow the LUs (a grow cannot be undone,
 * and a failed one refuses the reload). */
static int plan_do_grows(struct plan *p, char *err, size_t errlen)
{
	for (size_t i = 0; i < p->ngrow; i++) {
		struct lun_grow *g = &p->grow[i];
		char e[512];
		uint64_t was = scsi_lu_num_blocks(g->lu) * scsi_lu_block_size(g->lu);
		int r = g->bytes ? scsi_lu_grow(g->lu, g->bytes, e, sizeof(e)) : 0;

		if (r == 0 && g->offline >= 0) {
			scsi_lu_set_offline(g->lu, g->offline);
			log_info("target", "target %s LUN %u: %s", g->target, g->lun,
				 g->offline ? "taken offline" : "back online");
		}
		if (r == 0 && (g->wce >= 0 || g->readonly >= 0))
			lu_set_options(g);
		if (r == 0 && g->thin_thr >= 0 &&
		    scsi_lu_set_thin_threshold(g->lu, (unsigned)g->thin_thr) == 0)
			log_info("target", "target %s LUN %u: thin_threshold %d%%", g->target,
				 g->lun, g->thin_thr);
		if (!g->bytes)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "target %s LUN %u: cannot grow to %llu bytes: %s",
				 g->target, g->lun, (unsigned long long)g->bytes, e);
			return r;
		}
		log_info("target", "target %s LUN %u: grown from %llu to %llu bytes", g->target,
			 g->lun, (unsigned long long)was, (unsigned long long)g->bytes);
	}
	return 0;
}

/* The LUN changes of a kept target: what the running map has against what ct lists. */
static int plan_luns(struct ix_target *t, struct plan *p, struct tgt_node *node,
		     struct cfg_target *ct, char *err, size_t errlen)
{
	int r;

	for (size_t i = 0; i < ct->nluns; i++) {
		struct cfg_lun *cl = &ct->luns[i];
		const struct cfg_lun *old = cfg_lun_find(node->cfg, cl->lun);
		struct scsi_lu *lu;

		if ((lu = scsi_lun_map_get(node->map, cl->lun))) {
			if (old && !lu_cfg_same(&old->lu, &cl->lu) &&
			    (r = plan_grow(p, ct, cl, old, lu)) != 0) {
				if (r < 0)
					return r;
				continue;
			}
			if (old && !lu_cfg_same(&old->lu, &cl->lu))
				log_warn(
				    "target",
				    "reload: target %s LUN %u: changed settings need a restart "
				    "(it keeps running as it was)",
				    ct->name, cl->lun);
			continue;
		}
		r = tgt_lu_new(t, ct, cl, &lu, err, errlen);
		if (r < 0)
			return r;
		r = add_change(p, node, cl->lun, lu);
		if (r < 0) {
			scsi_lu_put(lu);
			return r;
		}
	}
	for (uint32_t l = 0; l < SCSI_MAX_LUNS; l++)
		if (scsi_lun_map_get(node->map, l) && !cfg_lun_find(ct, l) &&
		    (r = add_change(p, node, l, NULL)) < 0)
			return r;
	return 0;
}

static bool portal_same_listen(const struct cfg_portal *a, const struct cfg_portal *b)
{
	return strcmp(a->address, b->address) == 0 && a->port == b->port &&
	       a->transports == b->transports;
}

static struct listener_ctx *running_portal(struct ix_target *t, const char *name)
{
	for (size_t j = 0; j < t->nlctx; j++)
		if (strcmp(tgt_portal_cfg(t->lctx[j])->name, name) == 0)
			return t->lctx[j];
	return NULL;
}

static int plan_portals(struct ix_target *t, struct plan *p, char *err, size_t errlen)
{
	struct ix_config *cfg = p->cfg;
	size_t n = cfg->nportals ? cfg->nportals : 1;

	p->lctx = calloc(n, sizeof(*p->lctx));
	p->lctx_new = calloc(n, sizeof(*p->lctx_new));
	if (!p->lctx || !p->lctx_new)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->nportals; i++) {
		const struct cfg_portal *np = &cfg->portals[i];
		struct listener_ctx *old = running_portal(t, np->name);
		int r;

		if (old && portal_same_listen(tgt_portal_cfg(old), np)) {
			p->lctx[i] = old;
			continue;
		}
		r = tgt_portal_listen(t, np, &p->lctx[i], err, errlen);
		if (r < 0)
			return r;
		p->lctx_new[i] = true;
	}
	return 0;
}

static bool portal_kept(const struct plan *p, const struct listener_ctx *lc)
{
	for (size_t i = 0; i < p->cfg->nportals; i++)
		if (p->lctx[i] == lc)
			return true;
	return false;
}

/* The new portal list takes over; listeners no longer named stop. */
static void apply_portals(struct ix_target *t, struct plan *p)
{
	for (size_t j = 0; j < t->nlctx; j++) {
		if (portal_kept(p, t->lctx[j]))
			continue;
		log_info("target", "reload: portal %s no longer listens",
			 tgt_portal_cfg(t->lctx[j])->name);
		tgt_portal_close(t->lctx[j]);
	}
	for (size_t i = 0; i < p->cfg->nportals; i++)
		tgt_portal_set_cfg(p->lctx[i], &p->cfg->portals[i]);
	free(t->lctx);
	t->lctx = p->lctx;
	t->nlctx = p->cfg->nportals;
	p->lctx = NULL;
	free(p->lctx_new);
	p->lctx_new = NULL;
}

static void plan_undo(struct ix_target *t, struct plan *p)
{
	for (size_t i = 0; p->lctx && p->lctx_new && i < p->cfg->nportals; i++)
		if (p->lctx_new[i])
			tgt_portal_close(p->lctx[i]);
	free(p->lctx);
	free(p->lctx_new);
	free(p->grow);
	for (size_t i = 0; i < p->nchg; i++) {
		scsi_lu_put(p->chg[i].add);
		free(p->chg[i].retire);
	}
	for (size_t i = 0; i < p->nnodes; i++)
		if (!running_node(t, p->nodes[i]->cfg->name))
			tgt_node_put(p->nodes[i]);
	free(p->chg);
	free(p->nodes);
}

static int plan_make(struct ix_target *t, struct plan *p, char *err, size_t errlen)
{
	struct ix_config *cfg = p->cfg;
	struct tgt_cfg_gen **og;
	struct tgt_lu_retire **lr;
	size_t nremove = 0;
	int r = 0;

	p->nodes = calloc(cfg->ntargets ? cfg->ntargets : 1, sizeof(*p->nodes));
	if (!p->nodes)
		return -ENOMEM;
	r = plan_portals(t, p, err, errlen);
	for (size_t i = 0; i < cfg->ntargets && r == 0; i++) {
		struct cfg_target *ct = &cfg->targets[i];
		struct tgt_node *old = running_node(t, ct->name);
		if (old) {
			p->nodes[p->nnodes++] = old;
			r = plan_luns(t, p, old, ct, err, errlen);
		} else if ((r = tgt_node_new(t, ct, &p->nodes[p->nnodes], err, errlen)) == 0) {
			p->nnodes++;
		}
	}
	if (r < 0)
		return r;
	/* room to record what this reload retires */
	for (size_t i = 0; i < p->nchg; i++)
		nremove += !p->chg[i].add;
	og = realloc(t->old_gens, (t->nold_gens + 1) * sizeof(*og));
	if (og)
		t->old_gens = og;
	lr = realloc(t->lu_retires, (t->nlu_retires + nremove + 1) * sizeof(*lr));
	if (lr)
		t->lu_retires = lr;
	if (!og || !lr)
		return -ENOMEM;
	return plan_do_grows(p, err, errlen);
}

/* Under t->lock: ask every registered session of a removed node to log out. */
static void request_logouts(struct ix_target *t, uint32_t timeout_ms)
{
	struct list_head *pos, *n;

	list_for_each_safe(pos, n, &t->sessions)
	{
		struct tgt_session *s = list_entry(pos, struct tgt_session, reg_link);
		struct logout_msg *m;

		if (!s->node || !s->node->removed || s->draining)
			continue;
		m = malloc(sizeof(*m));
		if (m) {
			*m = (struct logout_msg){
			    .w = s->worker, .s = s, .tsih = s->tsih, .timeout_ms = timeout_ms};
			if (ev_loop_post(s->worker->loop, logout_request_msg, m) == 0)
				continue;
			free(m);
		}
		log_warn("target", "reload: cannot ask session tsih %u to log out (out of memory)",
			 s->tsih);
	}
}

static void apply_lun_changes(struct ix_target *t, struct plan *p)
{
	for (size_t i = 0; i < p->nchg; i++) {
		struct lun_change *c = &p->chg[i];
		const char *name = c->node->cfg->name;

		if (c->add) {
			/* the LUN is free: only this thread fills maps */
			if (scsi_lun_map_add(c->node->map, c->lun, c->add) == 0)
				log_info("target", "reload: target %s: added LUN %u", name, c->lun);
			scsi_lu_put(c->add);
		} else {
			struct tgt_lu_retire *r = c->retire;
			r->lu = scsi_lun_map_remove(c->node->map, c->lun);
			atomic_init(&r->left, t->nworkers);
			t->lu_retires[t->nlu_retires++] = r;
			for (int w = 0; w < t->nworkers; w++)
				if (ev_loop_post(t->workers[w].loop, lu_retire_turn, r) < 0)
					log_warn("target",
						 "reload: LUN %u of %s stays open until exit",
						 c->lun, name);
			log_info("target", "reload: target %s: removed LUN %u", name, c->lun);
		}
		if (i + 1 == p->nchg || p->chg[i + 1].node != c->node)
			scsi_lun_map_changed(c->node->map);
	}
}

/* The ALUA groups of every target in the new file (a new target has them already: no change).
 * Groups keep the states changed at run time unless the file changes their configured state. */
static void apply_alua(struct plan *p)
{
	for (size_t i = 0; i < p->nnodes; i++) {
		int r = scsi_alua_configure(p->nodes[i]->map, &p->cfg->targets[i].alua);
		if (r < 0)
			log_warn("target", "reload: target %s: ALUA groups not applied: %s",
				 p->cfg->targets[i].name, strerror(-r));
	}
}

int ix_target_reload(struct ix_target *t, struct ix_config *cfg, char *err, size_t errlen)
{
	struct plan p = {.cfg = cfg};
	struct tgt_cfg_gen *gen = calloc(1, sizeof(*gen));
	struct tgt_node **gone;
	size_t ngone = 0;
	int r;

	gone = calloc(t->nnodes ? t->nnodes : 1, sizeof(*gone));
	r = gen && gone ? plan_make(t, &p, err, errlen) : -ENOMEM;
	if (r < 0) {
		plan_undo(t, &p);
		free(gen);
		free(gone);
		return r;
	}
	gen->cfg = cfg;
	pthread_mutex_lock(&t->lock);
	for (size_t j = 0; j < t->nnodes; j++) {
		if (in_plan(&p, t->nodes[j]))
			continue;
		t->nodes[j]->removed = true;
		gone[ngone++] = t->nodes[j];
		log_info("target", "reload: removed target %s; its sessions are asked to log out",
			 t->nodes[j]->cfg->name);
	}
	if (ngone)
		request_logouts(t, cfg->global.logout_timeout_ms);
	/* kept targets now read their settings (ACLs, CHAP, LUN list) from the new file */
	for (size_t i = 0; i < p.nnodes; i++) {
		if (!running_node(t, cfg->targets[i].name))
			log_info("target", "reload: added target %s", cfg->targets[i].name);
		p.nodes[i]->cfg = &cfg->targets[i];
	}
	t->old_gens[t->nold_gens++] = t->gen;
	t->gen = gen;
	free(t->nodes);
	t->nodes = p.nodes;
	t->nnodes = p.nnodes;
	pthread_mutex_unlock(&t->lock);
	apply_lun_changes(t, &p);
	pthread_mutex_lock(&t->lock);
	tgt_acl_views_reload(t); /* ACL LUN masking of live sessions, once the maps are final */
	pthread_mutex_unlock(&t->lock);
	apply_alua(&p);
	for (size_t i = 0; i < p.nnodes; i++) /* QoS limits change in place */
		if (tgt_qos_apply(t, p.nodes[i], &cfg->targets[i]) < 0)
			log_warn("target", "reload: target %s: QoS limits not all applied (out of "
					   "memory)", cfg->targets[i].name);
	apply_portals(t, &p);
	free(p.chg);
	free(p.grow);
	for (size_t j = 0; j < ngone; j++)
		tgt_node_put(gone[j]); /* the configuration's reference */
	free(gone);
	tgt_isns_update(t->isns, cfg); /* targets added or removed: tell the iSNS server */
	return 0;
}

void tgt_reload_free(struct ix_target *t)
{
	for (size_t i = 0; i < t->nlu_retires; i++) {
		struct tgt_lu_retire *r = t->lu_retires[i];
		/* a loop that stopped before its turn: no worker runs any more */
		if (atomic_load(&r->left) > 0)
			scsi_lu_put(r->lu);
		free(r);
	}
	free(t->lu_retires);
}
