/* Target side of a connection before full feature phase: admission (the configuration's
 * targets, ACLs and credentials), the login limits (global.max_pending_logins), the Login
 * PDU exchange, the session's creation and the hold of a login that reinstates a session
 * still draining (RFC 7143 6.3.5). The connection itself is in tgt_conn.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_policy.h"
#include "target/tgt_int.h"
#include "util/log.h"

/* ---------------------------------------------------------------- login */

static void set_creds(struct auth_creds *cr, bool required, const struct cfg_chap *chap,
		      const struct cfg_chap *mutual, const uint8_t *algs, int nalgs)
{
	cr->required = required;
	if (chap->secret) {
		cr->user = chap->user;
		cr->secret = (const uint8_t *)chap->secret;
		cr->secret_len = strlen(chap->secret);
	}
	if (mutual->secret) {
		cr->mutual_user = mutual->user;
		cr->mutual_secret = (const uint8_t *)mutual->secret;
		cr->mutual_secret_len = strlen(mutual->secret);
	}
	for (int i = 0; i < nalgs && i < 4; i++)
		cr->algs[i] = algs[i];
	cr->nalgs = nalgs < 4 ? nalgs : 4;
}

/* redirect.owners: the portal of the gateway that owns the target's LUs when this one does
 * not (ha_policy_owner_group on the running ALUA states), or NULL: serve the login here. */
static const char *owner_address(struct tgt_conn *tc, const struct cfg_target *ct)
{
	const struct cfg_redirect *r = &ct->redirect;
	struct tgt_node *n = tgt_node_get(tc->tgt, ct->name);
	struct scsi_alua_cfg a;
	uint16_t group = 0;

	if (!n)
		return NULL;
	if (scsi_alua_get(n->map, &a) == 0)
		group = ha_policy_owner_group(&a, tc->portal->tpgt ? tc->portal->tpgt : 1);
	tgt_node_put(n);
	for (size_t i = 0; group && i < r->nowners; i++)
		if (r->owners[i].group == group)
			return r->owners[i].address;
	return NULL;
}

/* redirect.addresses: the next one, in turn over every worker's logins to the target. */
static const char *next_address(struct tgt_conn *tc, const struct cfg_target *ct)
{
	const struct cfg_redirect *r = &ct->redirect;
	struct tgt_node *n = tgt_node_get(tc->tgt, ct->name);
	unsigned i = 0;

	if (n) {
		i = atomic_fetch_add_explicit(&n->redirect_next, 1, memory_order_relaxed);
		tgt_node_put(n);
	}
	return r->addresses[i % r->naddresses];
}

int tgt_login_admit(void *ctx, const struct login_info *li, struct login_grant *g)
{
	struct tgt_conn *tc = ctx;
	const struct ix_config *cfg = tc->gen->cfg;
	char esc[ISCSI_NAME_MAX * 4];

	memset(g, 0, sizeof(*g));
	g->tpgt = tc->portal->tpgt;
	tc->prefs = cfg->global.neg;
	tc->prefs.declare_only = true;
	tc->prefs.offer_all = false;
	if (tc->conn->dm->caps & DM_CAP_DIRECT_PLACEMENT) {
		/* iSER: RDMAExtensions=Yes; control PDUs land in our receive buffers */
		tc->prefs.rdma = true;
		tc->prefs.target_rdsl = tc->conn->dm->max_recv_data;
		tc->prefs.initiator_rdsl = 262144;
		tc->prefs.header_digest = NEG_DIGEST_NONE_ONLY;
		tc->prefs.data_digest = NEG_DIGEST_NONE_ONLY;
		tgt_recv_budget(tc->conn->dm, tgt_cfg_depth(cfg), &tc->prefs.sess.first_burst_length);
	}
	g->prefs = &tc->prefs;
	if (li->type == ISCSI_SESSION_DISCOVERY) {
		const struct cfg_global *gl = &cfg->global;
		set_creds(&g->creds, gl->discovery_chap_required, &gl->discovery_chap,
			  &gl->discovery_mutual_chap, gl->discovery_chap_algs,
			  gl->ndiscovery_chap_algs);
		return 0;
	}
	const struct cfg_target *ct = cfg_find_target(cfg, li->target_name);
	if (!ct || !cfg_target_on_portal(ct, tc->portal)) {
		log_info("target", "%s: login to unknown target %s", tc->conn->peer,
			 log_escape(li->target_name, sizeof(li->target_name), esc, sizeof(esc)));
		return ISCSI_LOGIN_NOT_FOUND;
	}
	const struct cfg_acl *acl = cfg_find_acl(ct, li->initiator_name);
	if (!acl) {
		log_info("target", "%s: initiator %s is not in the ACL of %s", tc->conn->peer,
			 log_escape(li->initiator_name, sizeof(li->initiator_name), esc, sizeof(esc)),
			 ct->name);
		return ISCSI_LOGIN_AUTHORIZATION_FAILED;
	}
	/* Redirection (RFC 7143 11.13.5) answers this first request, before authentication: the
	   portal it names authenticates the initiator. Only initiators the ACL admits learn it. */
	const struct cfg_redirect *rd = cfg_target_redirect(ct, tc->portal);
	if (rd && (rd->address || rd->naddresses)) {
		g->redirect = rd->naddresses ? next_address(tc, ct) : rd->address;
		return rd->permanent ? ISCSI_LOGIN_TARGET_MOVED_PERM : ISCSI_LOGIN_TARGET_MOVED_TEMP;
	}
	/* HA: the LUs' owner is another gateway (its group active/optimized, ours not active) */
	if (rd && (g->redirect = owner_address(tc, ct)) != NULL)
		return ISCSI_LOGIN_TARGET_MOVED_TEMP;
	g->target_alias = ct->alias;
	/* an ACL entry's own credentials (one-way, mutual) override the target's */
	set_creds(&g->creds, ct->chap_required, acl->chap.secret ? &acl->chap : &ct->chap,
		  acl->mutual_chap.secret ? &acl->mutual_chap : &ct->mutual_chap, ct->chap_algs,
		  ct->nchap_algs);
	return 0;
}

static void login_hold_expired(struct tgt_conn *tc);

void tgt_login_timeout(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;
	char why[96];

	if (tc->held) {
		login_hold_expired(tc);
		return;
	}
	snprintf(why, sizeof(why), "login not completed within %u ms (global.login_timeout_ms)",
		 tc->gen->cfg->global.login_timeout_ms);
	tc->worker->logins.timeouts++;
	tgt_stat_count(tc, TGT_ST_LOGIN_TIMEOUT, 1);
	iscsi_conn_close(tc->conn, why);
}

/* ---------------------------------------------------------------- login limits */

/* This worker's share of global.max_pending_logins (connections are spread round-robin). */
static uint32_t pending_share(const struct tgt_worker *w, const struct ix_config *cfg)
{
	uint32_t n = cfg->global.max_pending_logins, k = (uint32_t)w->tgt->nworkers;

	return n ? (n + k - 1) / k : 0;
}

void tgt_login_slot_free(struct ix_target *t)
{
	atomic_fetch_sub(&t->npending_logins, 1);
}

void tgt_login_pending_del(struct tgt_conn *tc)
{
	if (!tc->pending)
		return;
	list_del(&tc->plink);
	tc->pending = false;
	tc->worker->npending--;
	tgt_login_slot_free(tc->tgt);
}

/* A whole Login PDU arrived: the connection becomes the most recently active one. */
static void pending_touch(struct tgt_conn *tc)
{
	if (!tc->pending)
		return;
	list_del(&tc->plink);
	list_add_tail(&tc->plink, &tc->worker->login_active);
	tc->login_pdu_seen = true;
	tc->login_since_ms = ev_now_ms(tc->conn->loop);
}

/* Close old, a login that makes room for others (why: for the log). */
static void evict(struct tgt_worker *w, struct tgt_conn *old, const struct ix_config *cfg,
		  const char *why)
{
	uint64_t quiet;

	tgt_login_pending_del(old);
	if (tgt_ratelimit_ok(&w->evict_rl, ev_now_ms(w->loop), &quiet))
		log_warn("target",
			 "%s: login limit: %u connections logging in on this worker "
			 "(global.max_pending_logins %u): %s (%llu more closed in the last second)",
			 old->conn->peer, pending_share(w, cfg), cfg->global.max_pending_logins, why,
			 (unsigned long long)quiet);
	iscsi_conn_close(old->conn, NULL);
}

/* Close the logins of l (least recently active first) that have been idle for
 * global.login_grace_ms: no whole Login PDU since they were accepted, or since their last one
 * (whose answer went out at once). Each is read first (a worker busy accepting may not have
 * read its socket yet); a login held for an old session waits for the target, not idle. */
static void evict_stale_list(struct tgt_worker *w, struct list_head *l,
			     const struct ix_config *cfg, uint64_t now)
{
	uint32_t grace = cfg->global.login_grace_ms;
	struct list_head *pos = l->next;
	char why[160];

	while (pos != l) {
		struct tgt_conn *tc = list_entry(pos, struct tgt_conn, plink);
		struct iscsi_conn *c = tc->conn;
		bool stale;

		if (tc->held) {
			pos = pos->next;
			continue;
		}
		if (now - tc->login_since_ms < grace)
			break; /* the rest are younger */
		iscsi_conn_get(c);
		if (c->dm->rx_poll)
			c->dm->rx_poll(c);
		/* (a Login PDU it had sent moved it on with a new time; a bad one closed it) */
		stale = tc->pending && !c->terminated && !tc->held &&
			now - tc->login_since_ms >= grace;
		if (stale) {
			snprintf(why, sizeof(why),
				 "closing a login idle for %llu ms%s (global.login_grace_ms %u)",
				 (unsigned long long)(now - tc->login_since_ms),
				 tc->login_pdu_seen ? "" : ", which never sent a whole Login PDU",
				 grace);
			evict(w, tc, cfg, why);
		}
		iscsi_conn_put(c);
		pos = l->next; /* the list may have changed: from its head again */
	}
}

void tgt_login_evict_stale(struct tgt_worker *w)
{
	const struct ix_config *cfg = tgt_gen_current(w->tgt)->cfg;
	uint64_t now = ev_now_ms(w->loop);

	evict_stale_list(w, &w->login_fresh, cfg, now);
	evict_stale_list(w, &w->login_active, cfg, now);
}

/* Before accepting another connection: if the worker's share of connections that have not
 * logged in is used up, drop the least active one, preferring those that have not sent a
 * whole Login PDU yet (half-open logins), so that a flood cannot lock out initiators that
 * are actually logging in. */
/* Same peer address ("a.b.c.d:port" / "[v6]:port", port ignored)? */
static bool same_source(const struct iscsi_conn *a, const char *peer)
{
	const char *ca = strrchr(a->peer, ':'), *cb = strrchr(peer, ':');
	size_t la = ca ? (size_t)(ca - a->peer) : strlen(a->peer);
	size_t lb = cb ? (size_t)(cb - peer) : strlen(peer);

	return la == lb && memcmp(a->peer, peer, la) == 0;
}

/* When one address already holds half of the worker's login slots, its own least active
 * connection makes room for its next one: a single flooding host cannot push out the logins
 * of others. (Only for shares up to 1024, which keeps the scan cheap.) */
static struct tgt_conn *source_victim(struct tgt_worker *w, uint32_t share, const char *peer)
{
	struct list_head *lists[2] = {&w->login_fresh, &w->login_active}, *pos;
	struct tgt_conn *first = NULL;
	uint32_t n = 0;

	if (share > 1024 || share < 2)
		return NULL;
	for (int i = 0; i < 2; i++)
		for (pos = lists[i]->next; pos != lists[i]; pos = pos->next) {
			struct tgt_conn *tc = list_entry(pos, struct tgt_conn, plink);

			if (same_source(tc->conn, peer)) {
				n++;
				if (!first)
					first = tc;
			}
		}
	return n >= share / 2 ? first : NULL;
}

static struct tgt_conn *pending_victim(struct tgt_worker *w)
{
	/* A "fresh" connection may only look idle because this worker has not read its socket
	   yet (it was busy accepting): read it first; one that turns out to have sent a whole
	   Login PDU moves to the active list and is spared. Bounded, so a flood costs little. */
	for (int probes = 0; probes < 8 && !list_empty(&w->login_fresh); probes++) {
		struct tgt_conn *tc = list_first_entry(&w->login_fresh, struct tgt_conn, plink);
		struct iscsi_conn *c = tc->conn;

		if (!c->dm->rx_poll)
			return tc;
		iscsi_conn_get(c);
		c->dm->rx_poll(c);
		if (tc->pending && !tc->login_pdu_seen) {
			iscsi_conn_put(c);
			return tc;
		}
		iscsi_conn_put(c);
	}
	if (!list_empty(&w->login_fresh))
		return list_first_entry(&w->login_fresh, struct tgt_conn, plink);
	if (!list_empty(&w->login_active))
		return list_first_entry(&w->login_active, struct tgt_conn, plink);
	return NULL;
}

/* Before a new connection starts its login on w. The main thread holds the listeners while
 * global.max_pending_logins connections are logging in (tgt_login_gate_check), so a worker
 * normally stays within its share: at the share, logins idle past global.login_grace_ms make
 * room. Past twice the share (connections of a transport whose listener cannot be held, which
 * are then not held back), the least active login gives way at once, as before the gate. */
void tgt_login_make_room(struct tgt_worker *w, const struct ix_config *cfg, const char *peer)
{
	uint32_t share = pending_share(w, cfg);

	if (!share || w->npending < share)
		return;
	tgt_login_evict_stale(w);
	while (w->npending >= 2 * share) {
		struct tgt_conn *old = source_victim(w, share, peer);

		if (!old)
			old = pending_victim(w);
		if (!old)
			break;
		evict(w, old, cfg,
		      old->login_pdu_seen ? "dropping the least active one"
					  : "dropping the least active one, which never sent a whole "
					    "Login PDU");
	}
}

void tgt_session_free(struct tgt_session *s)
{
	scsi_nexus_free(s->nexus);
	tgt_node_put(s->node); /* after the nexus: it holds LUs of the node's map */
	free(s);
}

/* The login status for a tgt_session_register() failure. */
static uint16_t register_status(struct tgt_conn *tc, int r)
{
	if (r == -ENOENT)
		return ISCSI_LOGIN_TARGET_REMOVED;
	log_warn("target", "%s: login refused by a session limit", tc->conn->peer);
	return ISCSI_LOGIN_OUT_OF_RESOURCES;
}

/* Register s for tc. 0 (tc->sess set), -EINPROGRESS (held: tc->held set) or a login status
 * (s freed). */
static int session_start(struct tgt_conn *tc, struct tgt_session *s)
{
	int r;

	s->hold_id = ++tc->worker->next_hold_id;
	r = tgt_session_register(tc->tgt, s);
	if (r == -EINPROGRESS) {
		tc->held = s;
		return r;
	}
	if (r < 0) {
		tgt_session_free(s);
		return register_status(tc, r);
	}
	list_add_tail(&s->wlink, &tc->worker->sessions);
	tc->sess = s;
	return 0;
}

/* 0, -EINPROGRESS (the login waits for an old session with its ISID to drain) or a login
 * failure status. */
static int enter_ffp(struct tgt_conn *tc)
{
	struct login_acceptor *la = tc->login;
	struct tgt_session *s = calloc(1, sizeof(*s));
	const struct ix_config *cfg = tc->gen->cfg;
	char iport[ISCSI_NAME_MAX + 32], tport[ISCSI_NAME_MAX + 32];

	if (la->info.tsih != 0) {
		/* adding a connection to an existing session: MaxConnections is 1 here */
		free(s);
		return ISCSI_LOGIN_SESSION_DOES_NOT_EXIST;
	}
	if (!s)
		return ISCSI_LOGIN_OUT_OF_RESOURCES;
	s->tgt = tc->tgt;
	s->worker = tc->worker;
	s->type = la->info.type;
	memcpy(s->isid, la->info.isid, 6);
	snprintf(s->initiator, sizeof(s->initiator), "%s", la->info.initiator_name);
	snprintf(s->target, sizeof(s->target), "%s", la->info.target_name);
	s->tpgt = la->grant.tpgt;
	s->params = la->neg.sess;
	s->exp_cmdsn = la->info.cmdsn;
	s->depth = tgt_cfg_depth(cfg);
	if (tc->conn->dm->recv_credits)
		s->depth = tgt_recv_budget(tc->conn->dm, s->depth, NULL);
	s->max_cmdsn = s->exp_cmdsn - 1;
	tgt_session_update_window(s);
	s->conn = tc;
	list_init(&s->reg_link);
	list_init(&s->wlink);
	list_init(&s->wait_link);
	if (s->type == ISCSI_SESSION_NORMAL) {
		s->node = tgt_node_get(tc->tgt, s->target);
		if (!s->node) {
			free(s);
			return ISCSI_LOGIN_TARGET_REMOVED;
		}
		snprintf(iport, sizeof(iport), "%s,i,0x%02x%02x%02x%02x%02x%02x", s->initiator,
			 s->isid[0], s->isid[1], s->isid[2], s->isid[3], s->isid[4], s->isid[5]);
		snprintf(tport, sizeof(tport), "%s,t,0x%04x", s->target, s->tpgt);
		s->nexus = scsi_nexus_new(s->node->map, iport, tport);
		if (s->nexus && tgt_session_set_view(s, cfg_find_target(cfg, s->target)) < 0) {
			scsi_nexus_free(s->nexus);
			s->nexus = NULL;
		}
		if (!s->nexus) {
			tgt_node_put(s->node);
			free(s);
			return ISCSI_LOGIN_OUT_OF_RESOURCES;
		}
	}
	return session_start(tc, s);
}

/* The task slots come on demand (tgt_task_alloc): an idle session holds none. */
static int alloc_tasks(struct tgt_conn *tc)
{
	tc->task_cap = tc->sess->depth + TGT_IMMEDIATE_EXTRA;
	return 0;
}

/* Answer the login with a failure status (la->error says why; text: a redirection's
 * TargetAddress, or NULL) and close once it is out. */
static void login_fail_text(struct tgt_conn *tc, struct iscsi_hdr *r, uint16_t status,
			    const char *text, uint32_t text_len)
{
	struct login_acceptor *la = tc->login;
	char esc[sizeof(la->info.initiator_name) * 4];

	r->login_rsp.status = status;
	r->login_rsp.transit = false;
	r->login_rsp.csg = r->login_rsp.nsg = 0;
	tc->worker->logins.refused[ix_login_reason_index(status)]++;
	tgt_stat_login_refused(tc, ix_login_reason_index(status));
	log_info("target", "%s: login from %s %s (status 0x%04x): %s", tc->conn->peer,
		 log_escape(la->info.initiator_name, sizeof(la->info.initiator_name), esc,
			    sizeof(esc)),
		 (status >> 8) == 1 ? "redirected" : "failed", status, la->error);
	ev_timer_stop(tc->conn->loop, &tc->login_timer);
	tgt_send_then_close(tc, r, text, text_len);
	/* no more input: the connection closes once the response is out */
	tc->logged_out = true;
}

static void login_fail(struct tgt_conn *tc, struct iscsi_hdr *r, uint16_t status)
{
	login_fail_text(tc, r, status, NULL, 0);
}

/* The final Login Response: the session enters full feature phase. */
static void login_complete(struct tgt_conn *tc, struct iscsi_hdr *r, const char *text,
			   uint32_t text_len)
{
	struct tgt_session *s = tc->sess;
	struct login_acceptor *la = tc->login;

	r->login_rsp.tsih = s->tsih;
	r->login_rsp.maxcmdsn = s->max_cmdsn;
	tc->conn->params = la->neg.conn;
	if (tgt_send(tc, r, text, text_len) < 0 || alloc_tasks(tc) < 0 ||
	    iscsi_conn_set_ctrl_cap(tc->conn, tc->conn->params.max_recv_dsl) < 0) {
		iscsi_conn_close(tc->conn, "out of memory entering full feature phase");
		return;
	}
	/* digests apply from the next PDU in each direction */
	tc->conn->dm->enable(tc->conn, &tc->conn->params);
	tc->conn->state = ISCSI_CONN_LOGGED_IN;
	ev_timer_stop(tc->conn->loop, &tc->login_timer);
	tgt_login_pending_del(tc);
	tgt_stat_count(tc, TGT_ST_LOGIN_ACCEPTED, 1);
	if (s->type == ISCSI_SESSION_DISCOVERY)
		tc->worker->logins.accepted_discovery++;
	else
		tc->worker->logins.accepted_normal++;
	if (s->type == ISCSI_SESSION_DISCOVERY &&
	    tc->gen->cfg->global.discovery_idle_timeout_ms)
		ev_timer_start(tc->conn->loop, &tc->idle_timer,
			       tc->gen->cfg->global.discovery_idle_timeout_ms);
	{
		char esc[ISCSI_NAME_MAX * 4];
		log_info("target",
			 "%s: %s session tsih %u: %s -> %s (MaxRecvDSL %u/%u, digests %s/%s, "
			 "ImmediateData %s, InitialR2T %s, FirstBurst %u, MaxBurst %u)",
			 tc->conn->peer, s->type == ISCSI_SESSION_DISCOVERY ? "discovery" : "normal",
			 s->tsih, log_escape(s->initiator, sizeof(s->initiator), esc, sizeof(esc)),
			 s->type == ISCSI_SESSION_DISCOVERY ? "-" : s->target,
			 tc->conn->params.max_recv_dsl, tc->conn->params.max_xmit_dsl,
			 tc->conn->params.header_digest ? "CRC32C" : "None",
			 tc->conn->params.data_digest ? "CRC32C" : "None",
			 s->params.immediate_data ? "Yes" : "No",
			 s->params.initial_r2t ? "Yes" : "No", s->params.first_burst_length,
			 s->params.max_burst_length);
	}
	login_acceptor_clear(la);
	free(la);
	tc->login = NULL;
	/* the login's payloads are parsed: most sessions never receive another (8 KiB each) */
	iscsi_conn_ctrl_release(tc->conn);
	if (tc->gen->cfg->global.nop_interval_ms)
		ev_timer_start(tc->conn->loop, &tc->nop_timer,
			       tc->gen->cfg->global.nop_interval_ms);
}

/* The login reinstates (or repeats the ISID of) a session whose tasks may still be in the
 * backend: its final response waits until that session has been released, bounded by a new
 * global.login_timeout_ms (then 0x0301, login_hold_expired()). */
static void login_hold(struct tgt_conn *tc, const struct iscsi_hdr *r, const struct login_step *st)
{
	const struct tgt_session *s = tc->held;
	uint32_t ms = tc->gen->cfg->global.login_timeout_ms;
	char esc[ISCSI_NAME_MAX * 4];

	tc->held_rsp = *r;
	tc->held_text = st->text;
	tc->held_text_len = st->text_len;
	tc->held_since_ms = ev_now_ms(tc->conn->loop);
	log_info("target",
		 "%s: login of %s ISID 0x%02x%02x%02x%02x%02x%02x held until session tsih %u with "
		 "that ISID has finished its tasks (session reinstatement)",
		 tc->conn->peer, log_escape(s->initiator, sizeof(s->initiator), esc, sizeof(esc)),
		 s->isid[0], s->isid[1], s->isid[2], s->isid[3], s->isid[4], s->isid[5],
		 s->wait_tsih);
	ev_timer_start(tc->conn->loop, &tc->login_timer, ms ? ms : 15000);
}

static void login_hold_expired(struct tgt_conn *tc)
{
	struct tgt_session *s = tc->held;
	uint64_t waited = ev_now_ms(tc->conn->loop) - tc->held_since_ms;

	tgt_session_unhold(tc->tgt, s);
	log_warn("target",
		 "%s: session tsih %u still has tasks in the backend after %llu ms: refusing the "
		 "login that reinstates it (0x0301 service unavailable; the initiator may retry)",
		 tc->conn->peer, s->wait_tsih, (unsigned long long)waited);
	snprintf(tc->login->error, sizeof(tc->login->error),
		 "the session it reinstates (tsih %u) did not finish its tasks in time",
		 s->wait_tsih);
	tc->held = NULL;
	tgt_session_free(s);
	login_fail(tc, &tc->held_rsp, ISCSI_LOGIN_SERVICE_UNAVAILABLE);
}

void tgt_conn_login_resume(struct tgt_worker *w, struct tgt_session *s, uint64_t hold_id)
{
	struct tgt_conn *tc = NULL;
	struct list_head *pos;
	int r;

	list_for_each(pos, &w->conns)
	{
		struct tgt_conn *c = list_entry(pos, struct tgt_conn, wlink);

		/* s is dereferenced only once a live connection is known to hold it */
		if (c->held == s && s->hold_id == hold_id) {
			tc = c;
			break;
		}
	}
	if (!tc || tc->conn->terminated)
		return;
	tc->held = NULL;
	log_info("target", "%s: session tsih %u released after %llu ms: resuming the login",
		 tc->conn->peer, s->wait_tsih,
		 (unsigned long long)(ev_now_ms(w->loop) - tc->held_since_ms));
	r = session_start(tc, s);
	if (r == -EINPROGRESS)
		return; /* yet another session with this ISID: wait on (same deadline) */
	if (r != 0) {
		snprintf(tc->login->error, sizeof(tc->login->error), "cannot create the session");
		login_fail(tc, &tc->held_rsp, (uint16_t)r);
		return;
	}
	login_complete(tc, &tc->held_rsp, tc->held_text, tc->held_text_len);
}

void tgt_login_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, uint8_t *data,
			 uint32_t dlen)
{
	struct login_acceptor *la = tc->login;
	struct login_step st;
	struct iscsi_hdr r = {.opcode = ISCSI_OP_LOGIN_RSP, .itt = h->itt};
	bool first = !la->first_seen && la->accum.len == 0;

	pending_touch(tc);
	if (first) {
		tc->statsn = h->login_req.expstatsn;
		tc->cid = h->login_req.cid;
		tc->conn->state = ISCSI_CONN_IN_LOGIN;
	}
	login_acceptor_step(la, h, data, dlen, &st);
	r.login_rsp.isid[0] = 0;
	memcpy(r.login_rsp.isid, h->login_req.isid, 6);
	r.login_rsp.version_max = 0;
	r.login_rsp.version_active = 0;
	r.login_rsp.statsn = tc->statsn++;
	r.login_rsp.expcmdsn = h->login_req.cmdsn;
	r.login_rsp.maxcmdsn = h->login_req.cmdsn;
	r.login_rsp.csg = st.csg;
	r.login_rsp.nsg = st.nsg;
	r.login_rsp.transit = st.transit;
	r.login_rsp.cont = st.cont;
	if (st.status == 0 && st.final) {
		int s = enter_ffp(tc);
		if (s == -EINPROGRESS) {
			login_hold(tc, &r, &st);
			return;
		}
		if (s != 0) {
			st.status = (uint16_t)s;
			snprintf(la->error, sizeof(la->error), "cannot create the session");
		}
	}
	if (st.status != 0) {
		bool redirect = (st.status >> 8) == 1;

		login_fail_text(tc, &r, st.status, redirect ? st.text : NULL,
				redirect ? st.text_len : 0);
		return;
	}
	if (st.final) {
		login_complete(tc, &r, st.text, st.text_len);
		return;
	}
	tgt_send(tc, &r, st.text, st.text_len);
}
