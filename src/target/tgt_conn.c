/* Target side of one connection: accept, login, full-feature-phase dispatch, NOP keepalive,
 * logout, Reject. SCSI commands and data live in tgt_scsi.c, Text in tgt_text.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/crc32c.h"
#include "target/tgt_int.h"
#include "transport/fault/fault.h"
#include "transport/iser/iser.h"
#include "transport/tcp/tcp.h"
#include "util/bytes.h"
#include "util/log.h"

static const struct iscsi_role_ops tgt_role_ops;

/* ---------------------------------------------------------------- sending */

/* A transport with a fixed number of receive buffers (iSER, protocol.md 5.9): every command
 * the CmdSN window admits (plus the immediate ones) may arrive with its immediate data and
 * its unsolicited Data-Out PDUs, each in a Send of its own, and a few unexpected PDUs (NOP-Out,
 * TMF, Text, Logout) come on top. Returns the window that fits (at least 1) and lowers *fbl
 * (FirstBurstLength we offer; NULL = leave) so that the unsolicited PDUs of a full window fit
 * too. Solicited data costs no receive buffer (RDMA Read), so a small FirstBurstLength costs
 * nothing but Sends the initiator would otherwise make. */
uint32_t tgt_recv_budget(const struct dm_ops *dm, uint32_t depth, uint32_t *fbl)
{
	uint32_t spare = 32, cmds, per;

	if (!dm->recv_credits || !dm->max_recv_data)
		return depth;
	if (dm->recv_credits <= spare + 2 * (1 + TGT_IMMEDIATE_EXTRA))
		return 1;
	/* at least two Sends per command: the command, one Data-Out */
	if (depth > (dm->recv_credits - spare) / 2 - TGT_IMMEDIATE_EXTRA)
		depth = (dm->recv_credits - spare) / 2 - TGT_IMMEDIATE_EXTRA;
	cmds = depth + TGT_IMMEDIATE_EXTRA;
	per = (dm->recv_credits - spare) / cmds; /* >= 2 */
	if (fbl && *fbl > (per - 1) * dm->max_recv_data)
		*fbl = (per - 1) * dm->max_recv_data;
	return depth;
}

void tgt_session_update_window(struct tgt_session *s)
{
	uint32_t room = s->depth > s->outstanding ? s->depth - s->outstanding : 0;
	uint32_t max = s->exp_cmdsn + room - 1;

	/* MaxCmdSN never moves backwards (RFC 7143 4.2.2.1) */
	if (sn_lt(s->max_cmdsn, max))
		s->max_cmdsn = max;
}

void tgt_stamp(struct tgt_conn *tc, struct iscsi_hdr *h, bool advance_statsn)
{
	uint32_t statsn = advance_statsn ? tc->statsn++ : tc->statsn;
	uint32_t exp = 0, max = 0;

	if (tc->sess) {
		tgt_session_update_window(tc->sess);
		exp = tc->sess->exp_cmdsn;
		max = tc->sess->max_cmdsn;
	}
	switch (h->opcode) {
	case ISCSI_OP_NOP_IN:
		h->nop_in.statsn = statsn, h->nop_in.expcmdsn = exp, h->nop_in.maxcmdsn = max;
		break;
	case ISCSI_OP_SCSI_RSP:
		h->rsp.statsn = statsn, h->rsp.expcmdsn = exp, h->rsp.maxcmdsn = max;
		break;
	case ISCSI_OP_TMF_RSP:
		h->tmf_rsp.statsn = statsn, h->tmf_rsp.expcmdsn = exp, h->tmf_rsp.maxcmdsn = max;
		break;
	case ISCSI_OP_TEXT_RSP:
		h->text_rsp.statsn = statsn, h->text_rsp.expcmdsn = exp;
		h->text_rsp.maxcmdsn = max;
		break;
	case ISCSI_OP_DATA_IN:
		h->data_in.statsn = statsn, h->data_in.expcmdsn = exp, h->data_in.maxcmdsn = max;
		break;
	case ISCSI_OP_LOGOUT_RSP:
		h->logout_rsp.statsn = statsn, h->logout_rsp.expcmdsn = exp;
		h->logout_rsp.maxcmdsn = max;
		break;
	case ISCSI_OP_R2T:
		h->r2t.statsn = statsn, h->r2t.expcmdsn = exp, h->r2t.maxcmdsn = max;
		break;
	case ISCSI_OP_ASYNC_MSG:
		h->async.statsn = statsn, h->async.expcmdsn = exp, h->async.maxcmdsn = max;
		break;
	case ISCSI_OP_REJECT:
		h->reject.statsn = statsn, h->reject.expcmdsn = exp, h->reject.maxcmdsn = max;
		break;
	default:
		break;
	}
}

/* Control responses (NOP-In echoes, Text, Reject, ...) queued for a peer that does not read
 * them: past these the connection is closed. Without a bound, a peer sending immediate NOP-Out
 * pings with data (or PDUs we reject) and never reading would make the target queue copies
 * without end: nothing else limits immediate PDUs. */
#define TGT_UNREAD_BYTES_MAX (16u << 20)
#define TGT_UNREAD_PDUS_MAX  4096u

static void copy_done(struct dm_txpdu *p)
{
	struct iscsi_conn *c = p->arg;
	struct tgt_conn *tc = c->role_priv;

	tc->unread_bytes -= p->data_len;
	tc->unread_pdus--;
	free(p->data[0].iov_base);
	iscsi_txpdu_put(c, p);
}

static void sent_free_copy(struct dm_txpdu *p, int err)
{
	(void)err;
	copy_done(p);
}

/* How long the target waits, after its final response (Logout Response, failed Login
 * Response) went out on a transport without half-close, for the initiator to close. RFC 7143
 * (TCP) has the target half-close after the Logout Response and the initiator close fully once
 * it has read it; RDMA has no half-close, and a disconnect can reach the initiator before the
 * receive completion of the response that the Send's completion here vouches for. RFC 7145 5.2
 * makes the initiator's Connection_Terminate the normal end. So the initiator closes first; a
 * peer that does not is closed after this long. */
#define TGT_PEER_CLOSE_MS 5000

static void close_timer_cb(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;

	log_info("target", "%s: the initiator did not close the connection within %u ms of the "
		 "final response: closing it", tc->conn->peer, TGT_PEER_CLOSE_MS);
	iscsi_conn_close(tc->conn, NULL);
}

static void sent_then_close(struct dm_txpdu *p, int err)
{
	struct iscsi_conn *c = p->arg;
	struct tgt_conn *tc = c->role_priv;

	copy_done(p);
	if (err || c->terminated)
		return;
	if ((c->dm->caps & DM_CAP_PEER_CLOSES) && !tc->logout_dropping) {
		/* the response is in the initiator's receive queue: its turn to close */
		c->peer_close_expected = true;
		ev_timer_stop(c->loop, &tc->nop_timer);
		ev_timer_stop(c->loop, &tc->idle_timer);
		ev_timer_start(c->loop, &tc->close_timer, TGT_PEER_CLOSE_MS);
		return;
	}
	iscsi_conn_close(c, NULL);
}

static int send_copy(struct tgt_conn *tc, struct iscsi_hdr *h, const void *data, uint32_t len,
		     bool close_after)
{
	struct dm_txpdu *p;
	void *copy = NULL;

	if (tc->unread_bytes + len > TGT_UNREAD_BYTES_MAX || tc->unread_pdus >= TGT_UNREAD_PDUS_MAX) {
		log_warn("target",
			 "%s: the initiator does not read its responses (%u PDUs, %llu bytes "
			 "queued): closing the connection",
			 tc->conn->peer, tc->unread_pdus, (unsigned long long)tc->unread_bytes);
		iscsi_conn_close(tc->conn, "responses not read");
		return -ENOBUFS;
	}
	p = iscsi_txpdu_get(tc->conn);
	if (!p)
		return -ENOMEM;
	if (len) {
		copy = malloc(len);
		if (!copy) {
			iscsi_txpdu_put(tc->conn, p);
			return -ENOMEM;
		}
		memcpy(copy, data, len);
	}
	p->data[0].iov_base = copy;
	p->data[0].iov_len = len;
	p->data_cnt = len ? 1 : 0;
	p->data_len = len;
	h->dlength = len;
	p->sent = close_after ? sent_then_close : sent_free_copy;
	tc->unread_bytes += len;
	tc->unread_pdus++;
	return iscsi_send_pdu(tc->conn, p, h);
}

/* Send a control PDU whose data is copied (control path only). */
int tgt_send(struct tgt_conn *tc, struct iscsi_hdr *h, const void *data, uint32_t len)
{
	return send_copy(tc, h, data, len, false);
}

int tgt_send_then_close(struct tgt_conn *tc, struct iscsi_hdr *h)
{
	return send_copy(tc, h, NULL, 0, true);
}

void tgt_send_reject(struct tgt_conn *tc, uint8_t reason, const uint8_t *bhs)
{
	struct iscsi_hdr h = {.opcode = ISCSI_OP_REJECT, .final = true, .itt = ISCSI_RSVD_TAG};

	h.reject.reason = reason;
	tgt_stat_count(tc, TGT_ST_PDU_REJECTED, 1);
	tgt_stamp(tc, &h, true);
	log_info("target", "%s: Reject reason 0x%02x for opcode 0x%02x", tc->conn->peer, reason,
		 bhs[0] & 0x3f);
	tgt_send(tc, &h, bhs, ISCSI_BHS_LEN);
}

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

static int admit(void *ctx, const struct login_info *li, struct login_grant *g)
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
	g->target_alias = ct->alias;
	/* an ACL entry's own credential overrides the target's */
	set_creds(&g->creds, ct->chap_required, acl->chap.secret ? &acl->chap : &ct->chap,
		  &ct->mutual_chap, ct->chap_algs, ct->nchap_algs);
	return 0;
}

static void login_hold_expired(struct tgt_conn *tc);

static void login_timeout(struct ev_timer *t)
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

static void idle_timeout(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;
	char why[112];

	snprintf(why, sizeof(why),
		 "discovery session idle for %u ms (global.discovery_idle_timeout_ms)",
		 tc->gen->cfg->global.discovery_idle_timeout_ms);
	iscsi_conn_close(tc->conn, why);
}

/* ---------------------------------------------------------------- login limits */

/* This worker's share of global.max_pending_logins (connections are spread round-robin). */
static uint32_t pending_share(const struct tgt_worker *w, const struct ix_config *cfg)
{
	uint32_t n = cfg->global.max_pending_logins, k = (uint32_t)w->tgt->nworkers;

	return n ? (n + k - 1) / k : 0;
}

static void pending_del(struct tgt_conn *tc)
{
	if (!tc->pending)
		return;
	list_del(&tc->plink);
	tc->pending = false;
	tc->worker->npending--;
}

/* A whole Login PDU arrived: the connection becomes the most recently active one. */
static void pending_touch(struct tgt_conn *tc)
{
	if (!tc->pending)
		return;
	list_del(&tc->plink);
	list_add_tail(&tc->plink, &tc->worker->login_active);
	tc->login_pdu_seen = true;
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

static void pending_make_room(struct tgt_worker *w, const struct ix_config *cfg, const char *peer)
{
	uint32_t share = pending_share(w, cfg);

	while (share && w->npending >= share) {
		struct tgt_conn *old = source_victim(w, share, peer);
		uint64_t quiet;

		if (!old)
			old = pending_victim(w);
		if (!old)
			break;

		pending_del(old);
		if (tgt_ratelimit_ok(&w->evict_rl, ev_now_ms(w->loop), &quiet))
			log_warn("target",
				 "%s: login limit: %u connections logging in on this worker "
				 "(global.max_pending_logins %u): dropping the least active one%s "
				 "(%llu more dropped in the last second)",
				 old->conn->peer, share, cfg->global.max_pending_logins,
				 old->login_pdu_seen ? "" : ", which never sent a whole Login PDU",
				 (unsigned long long)quiet);
		iscsi_conn_close(old->conn, NULL);
	}
}

static void nop_timer_cb(struct ev_timer *t);

static void session_free(struct tgt_session *s)
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
		session_free(s);
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
		if (!s->nexus) {
			tgt_node_put(s->node);
			free(s);
			return ISCSI_LOGIN_OUT_OF_RESOURCES;
		}
	}
	return session_start(tc, s);
}

static int alloc_tasks(struct tgt_conn *tc)
{
	tc->ntasks = tc->sess->depth + TGT_IMMEDIATE_EXTRA;
	tc->tasks = calloc(tc->ntasks, sizeof(*tc->tasks));
	if (!tc->tasks)
		return -ENOMEM;
	for (uint32_t i = 0; i < tc->ntasks; i++) {
		tc->tasks[i].tc = tc;
		list_add_tail(&tc->tasks[i].link, &tc->free_tasks);
	}
	return 0;
}

/* Answer the login with a failure status (la->error says why) and close once it is out. */
static void login_fail(struct tgt_conn *tc, struct iscsi_hdr *r, uint16_t status)
{
	struct login_acceptor *la = tc->login;
	char esc[sizeof(la->info.initiator_name) * 4];

	r->login_rsp.status = status;
	r->login_rsp.transit = false;
	r->login_rsp.csg = r->login_rsp.nsg = 0;
	tc->worker->logins.refused[ix_login_reason_index(status)]++;
	tgt_stat_login_refused(tc, ix_login_reason_index(status));
	log_info("target", "%s: login from %s failed (status 0x%04x): %s", tc->conn->peer,
		 log_escape(la->info.initiator_name, sizeof(la->info.initiator_name), esc,
			    sizeof(esc)),
		 status, la->error);
	ev_timer_stop(tc->conn->loop, &tc->login_timer);
	send_copy(tc, r, NULL, 0, true);
	/* no more input: the connection closes once the response is out */
	tc->logged_out = true;
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
	pending_del(tc);
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
	session_free(s);
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

static void handle_login(struct tgt_conn *tc, const struct iscsi_hdr *h, uint8_t *data,
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
		login_fail(tc, &r, st.status);
		return;
	}
	if (st.final) {
		login_complete(tc, &r, st.text, st.text_len);
		return;
	}
	tgt_send(tc, &r, st.text, st.text_len);
}

/* ---------------------------------------------------------------- NOP */

static void nop_timer_cb(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;
	const struct cfg_global *g = &tc->gen->cfg->global;
	uint64_t now = ev_now_ms(tc->conn->loop);

	if (tc->nop_outstanding) {
		tgt_stat_count(tc, TGT_ST_CONN_TIMEOUT, 1);
		iscsi_conn_close(tc->conn, "no NOP-Out answer to our NOP-In ping");
		return;
	}
	if (now - tc->last_rx_ms < g->nop_interval_ms) {
		ev_timer_start(tc->conn->loop, &tc->nop_timer,
			       g->nop_interval_ms - (now - tc->last_rx_ms));
		return;
	}
	struct iscsi_hdr h = {.opcode = ISCSI_OP_NOP_IN, .final = true, .itt = ISCSI_RSVD_TAG};
	h.nop_in.ttt = ++tc->nop_ttt == ISCSI_RSVD_TAG ? ++tc->nop_ttt : tc->nop_ttt;
	tgt_stamp(tc, &h, false);
	tc->nop_outstanding = true;
	tgt_send(tc, &h, NULL, 0);
	ev_timer_start(tc->conn->loop, &tc->nop_timer, g->nop_timeout_ms ? g->nop_timeout_ms : 30000);
}

static void handle_nop_out(struct tgt_conn *tc, const struct iscsi_hdr *h, uint8_t *data,
			   uint32_t dlen)
{
	if (h->itt == ISCSI_RSVD_TAG) {
		/* answer to our ping (TTT set) or a bare ExpStatSN update: no reply */
		if (h->nop_out.ttt != ISCSI_RSVD_TAG && h->nop_out.ttt == tc->nop_ttt &&
		    tc->nop_outstanding) {
			tc->nop_outstanding = false;
			ev_timer_start(tc->conn->loop, &tc->nop_timer,
				       tc->gen->cfg->global.nop_interval_ms);
		}
		return;
	}
	struct iscsi_hdr r = {.opcode = ISCSI_OP_NOP_IN, .final = true, .itt = h->itt};
	r.nop_in.ttt = ISCSI_RSVD_TAG;
	r.nop_in.lun = h->nop_out.lun;
	tgt_stamp(tc, &r, true);
	tgt_send(tc, &r, data, dlen);
}

/* ---------------------------------------------------------------- logout */

static void handle_logout(struct tgt_conn *tc, const struct iscsi_hdr *h)
{
	struct iscsi_hdr r = {.opcode = ISCSI_OP_LOGOUT_RSP, .final = true, .itt = h->itt};
	uint8_t reason = h->logout_req.reason;

	if (reason == ISCSI_LOGOUT_REMOVE_FOR_RECOVERY) {
		r.logout_rsp.response = ISCSI_LOGOUT_RSP_RECOVERY_UNSUPPORTED;
	} else if (reason == ISCSI_LOGOUT_CLOSE_CONNECTION &&
		   h->logout_req.cid != tc->cid) {
		r.logout_rsp.response = ISCSI_LOGOUT_RSP_CID_NOT_FOUND;
	} else if (reason > ISCSI_LOGOUT_REMOVE_FOR_RECOVERY) {
		tgt_send_reject(tc, ISCSI_REJECT_INVALID_PDU_FIELD, tc->conn->rx_bhs);
		return;
	} else {
		r.logout_rsp.response = ISCSI_LOGOUT_RSP_OK;
	}
	tgt_stamp(tc, &r, true);
	if (r.logout_rsp.response == ISCSI_LOGOUT_RSP_OK) {
		if (ev_timer_active(&tc->logout_timer) && !tc->logout_dropping) {
			char esc[ISCSI_NAME_MAX * 4];
			if (tc->logout_admin)
				log_info("target",
					 "%s: %s logged out as asked (requested through the "
					 "management API)",
					 tc->conn->peer,
					 log_escape(tc->sess->initiator, sizeof(tc->sess->initiator),
						    esc, sizeof(esc)));
			else
				log_info("target", "%s: %s logged out as asked (target %s removed)",
					 tc->conn->peer,
					 log_escape(tc->sess->initiator, sizeof(tc->sess->initiator),
						    esc, sizeof(esc)),
					 tc->sess->target);
		}
		ev_timer_stop(tc->conn->loop, &tc->logout_timer);
		tc->logged_out = true;
		tc->conn->state = ISCSI_CONN_IN_LOGOUT;
		send_copy(tc, &r, NULL, 0, true);
	} else {
		tgt_send(tc, &r, NULL, 0);
	}
}

/* Target removed by a reload (RFC 7143 11.9.1): AsyncEvent 1 asks the initiator to log out
 * within Parameter3 seconds; commands keep being served meanwhile (the LUs stay until the
 * session ends). No Logout in time: AsyncEvent 3 (the target drops all connections of the
 * session; Time2Retain 0, nothing is kept at ERL 0), then close, at the latest a second later
 * if that PDU cannot leave. */
static void logout_timer_cb(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;
	struct iscsi_hdr h = {.opcode = ISCSI_OP_ASYNC_MSG, .final = true, .itt = ISCSI_RSVD_TAG};

	if (tc->logout_dropping) {
		iscsi_conn_close(tc->conn, "the drop announcement could not be sent");
		return;
	}
	tgt_stat_count(tc, TGT_ST_CONN_TIMEOUT, 1);
	log_info("target", "%s: no Logout after %s: dropping the session", tc->conn->peer,
		 tc->logout_admin ? "it was requested" : "the target was removed");
	h.async.event = ISCSI_ASYNC_DROP_ALL_CONNECTIONS;
	h.async.param2 = tc->sess->params.default_time2wait;
	h.async.param3 = 0;
	tgt_stamp(tc, &h, true);
	tc->logout_dropping = true;
	tc->logged_out = true; /* no more input */
	send_copy(tc, &h, NULL, 0, true);
	ev_timer_start(tc->conn->loop, &tc->logout_timer, 1000);
}

void tgt_conn_request_logout(struct tgt_conn *tc, uint32_t timeout_ms, bool admin)
{
	struct iscsi_hdr h = {.opcode = ISCSI_OP_ASYNC_MSG, .final = true, .itt = ISCSI_RSVD_TAG};
	uint32_t secs = (timeout_ms + 999) / 1000;

	if (tc->logged_out || tc->conn->terminated || ev_timer_active(&tc->logout_timer))
		return;
	h.async.event = ISCSI_ASYNC_LOGOUT_REQUEST;
	h.async.param3 = (uint16_t)(secs > 0xffff ? 0xffff : secs);
	tgt_stamp(tc, &h, true);
	tc->logout_admin = admin;
	if (admin)
		log_info("target", "%s: asking tsih %u to log out within %u s (management API)",
			 tc->conn->peer, tc->sess->tsih, secs);
	else
		log_info("target", "%s: target %s removed: asking tsih %u to log out within %u s",
			 tc->conn->peer, tc->sess->target, tc->sess->tsih, secs);
	if (tgt_send(tc, &h, NULL, 0) < 0) {
		iscsi_conn_close(tc->conn, "out of memory for an Async Message");
		return;
	}
	ev_timer_start(tc->conn->loop, &tc->logout_timer, timeout_ms);
}

/* ---------------------------------------------------------------- dispatch */

/* CmdSN rules for non-SCSI requests (RFC 7143 4.2.2.1). Returns false to drop silently. */
static bool cmdsn_accept(struct tgt_conn *tc, bool immediate, uint32_t cmdsn)
{
	struct tgt_session *s = tc->sess;

	if (immediate)
		return true;
	if (sn_lt(cmdsn, s->exp_cmdsn) || sn_lt(s->max_cmdsn, cmdsn)) {
		log_dbg("target", "%s: CmdSN %u outside [%u, %u]: dropped", tc->conn->peer, cmdsn,
			s->exp_cmdsn, s->max_cmdsn);
		return false;
	}
	if (cmdsn == s->exp_cmdsn) {
		s->exp_cmdsn++;
		tgt_order_release(tc);
	}
	return true;
}

static int rx_header(struct iscsi_conn *c, const struct iscsi_hdr *h, const uint8_t *ahs,
		     uint32_t ahs_len, struct dm_rx_place *place)
{
	struct tgt_conn *tc = c->role_priv;

	tc->last_rx_ms = ev_now_ms(c->loop);
	if (tc->logged_out)
		return 0; /* swallow whatever still arrives */
	if (tc->held) {
		log_info("target", "%s: opcode 0x%02x while its final Login Response is held",
			 c->peer, h->opcode);
		return -EPROTO;
	}
	if (c->state != ISCSI_CONN_LOGGED_IN) {
		if (h->opcode != ISCSI_OP_LOGIN_REQ) {
			log_info("target", "%s: opcode 0x%02x before login completed", c->peer,
				 h->opcode);
			return -EPROTO;
		}
		if (h->dlength > 8192 || ahs_len)
			return -EMSGSIZE;
		return 0;
	}
	if (h->dlength > c->params.max_recv_dsl &&
	    !(c->rx_placed && h->opcode == ISCSI_OP_DATA_OUT)) {
		/* (data an RDMA datamover fetched for an R2T is bounded by the R2T instead) */
		log_warn("target", "%s: DataSegmentLength %u exceeds our MaxRecvDataSegmentLength %u",
			 c->peer, h->dlength, c->params.max_recv_dsl);
		return -EMSGSIZE;
	}
	if (h->opcode == ISCSI_OP_SCSI_CMD)
		return tgt_scsi_cmd_header(tc, h, ahs, ahs_len, place);
	if (h->opcode == ISCSI_OP_DATA_OUT)
		return tgt_data_out_header(tc, h, place);
	return 0;
}

static void rx_pdu(struct iscsi_conn *c, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen,
		   bool ddigest_ok)
{
	struct tgt_conn *tc = c->role_priv;
	struct tgt_session *s = tc->sess;

	if (tc->logged_out || c->terminated)
		return;
	log_dbg("target", "%s: rx %s ITT 0x%08x dlen %u", c->peer, iscsi_opcode_name(h->opcode),
		h->itt, dlen);
	if (c->state != ISCSI_CONN_LOGGED_IN) {
		handle_login(tc, h, data, dlen);
		return;
	}
	if (ev_timer_active(&tc->idle_timer) &&
	    !(h->opcode == ISCSI_OP_NOP_OUT && h->itt == ISCSI_RSVD_TAG))
		/* a discovery session is idle when only our pings get answers */
		ev_timer_start(c->loop, &tc->idle_timer,
			       tc->gen->cfg->global.discovery_idle_timeout_ms);
	if (!iscsi_opcode_is_initiator(h->opcode)) {
		tgt_send_reject(tc, ISCSI_REJECT_PROTOCOL_ERROR, c->rx_bhs);
		return;
	}
	if (h->opcode == ISCSI_OP_SCSI_CMD) {
		tgt_scsi_cmd_pdu(tc, h, ddigest_ok);
		return;
	}
	if (h->opcode == ISCSI_OP_DATA_OUT) {
		tgt_data_out_pdu(tc, h, ddigest_ok);
		return;
	}
	if (!ddigest_ok) {
		/* RFC 7143 7.8: discard and Reject; the initiator may retry */
		tgt_stat_count(tc, TGT_ST_DIGEST_ERROR, 1);
		tgt_send_reject(tc, ISCSI_REJECT_DATA_DIGEST, c->rx_bhs);
		return;
	}
	switch (h->opcode) {
	case ISCSI_OP_NOP_OUT:
		if (h->itt == ISCSI_RSVD_TAG && !h->immediate) {
			tgt_send_reject(tc, ISCSI_REJECT_PROTOCOL_ERROR, c->rx_bhs);
			return;
		}
		if (!cmdsn_accept(tc, h->immediate, h->nop_out.cmdsn))
			return;
		handle_nop_out(tc, h, data, dlen);
		break;
	case ISCSI_OP_TEXT_REQ:
		if (!cmdsn_accept(tc, h->immediate, h->text_req.cmdsn))
			return;
		tgt_text(tc, h, data, dlen);
		break;
	case ISCSI_OP_LOGOUT_REQ:
		if (!cmdsn_accept(tc, h->immediate, h->logout_req.cmdsn))
			return;
		handle_logout(tc, h);
		break;
	case ISCSI_OP_TMF_REQ:
		if (s->type == ISCSI_SESSION_DISCOVERY) {
			tgt_send_reject(tc, ISCSI_REJECT_PROTOCOL_ERROR, c->rx_bhs);
			return;
		}
		if (!cmdsn_accept(tc, h->immediate, h->tmf_req.cmdsn))
			return;
		tgt_tmf(tc, h);
		break;
	case ISCSI_OP_LOGIN_REQ:
		tgt_send_reject(tc, ISCSI_REJECT_PROTOCOL_ERROR, c->rx_bhs);
		break;
	case ISCSI_OP_SNACK_REQ:
		/* ErrorRecoveryLevel 0: SNACK is not supported (RFC 7143 11.16) */
		tgt_send_reject(tc, ISCSI_REJECT_SNACK, c->rx_bhs);
		break;
	default:
		tgt_send_reject(tc, ISCSI_REJECT_CMD_NOT_SUPPORTED, c->rx_bhs);
		break;
	}
}

static void conn_closed(struct iscsi_conn *c)
{
	struct tgt_conn *tc = c->role_priv;

	ev_timer_stop(c->loop, &tc->login_timer);
	ev_timer_stop(c->loop, &tc->nop_timer);
	ev_timer_stop(c->loop, &tc->logout_timer);
	ev_timer_stop(c->loop, &tc->idle_timer);
	ev_timer_stop(c->loop, &tc->close_timer);
	pending_del(tc);
	if (c->digest_errors)
		tgt_stat_count(tc, TGT_ST_DIGEST_ERROR, c->digest_errors);
	if (tc->held)
		tgt_session_unhold(tc->tgt, tc->held); /* freed with the connection */
	/* the session stays registered (draining) until the tasks still in the backend have
	   finished and the connection is released: a login with its ISID waits for that */
	if (tc->sess)
		tgt_session_drain(tc->tgt, tc->sess);
	/* abort every task; those inside the SCSI layer stay listed until they finish (they hold a
	   reference), so walk the lists rather than drain them */
	struct list_head *lists[2] = {&tc->active, &tc->order_q}, *pos, *n;
	for (int l = 0; l < 2; l++)
		list_for_each_safe(pos, n, lists[l])
			tgt_task_abort(list_entry(pos, struct tgt_task, link));
	tc->worker->nconns--;
	list_del(&tc->wlink);
}

static void conn_release(struct iscsi_conn *c)
{
	struct tgt_conn *tc = c->role_priv;

	if (tc->held)
		session_free(tc->held);
	if (tc->sess) {
		tgt_session_unregister(tc->tgt, tc->sess); /* resumes logins held for it */
		list_del(&tc->sess->wlink);
		session_free(tc->sess);
	}
	if (tc->login) {
		login_acceptor_clear(tc->login);
		free(tc->login);
	}
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < TGT_BUF_CACHE; j++)
			free(tc->buf_cache[i][j]);
	for (uint32_t i = 0; tc->tasks && i < tc->ntasks; i++)
		free(tc->tasks[i].buf);
	free(tc->tasks);
	free(tc->text_rsp);
	free(tc->text_req);
	tgt_conn_gone(tc->tgt);
	free(tc);
}

static const struct iscsi_role_ops tgt_role_ops = {
	.rx_header = rx_header,
	.rx_pdu = rx_pdu,
	.closed = conn_closed,
	.release = conn_release,
};

/* peer: "addr:port" of the new connection for the login limit ("" if unknown). */
static struct tgt_conn *tc_new(struct tgt_worker *w, const struct cfg_portal *portal,
			       const char *peer)
{
	struct tgt_cfg_gen *gen = tgt_gen_current(w->tgt);
	struct tgt_conn *tc;
	struct login_policy pol;

	pending_make_room(w, gen->cfg, peer);
	tc = calloc(1, sizeof(*tc));
	if (!tc)
		return NULL;
	tc->worker = w;
	tc->tgt = w->tgt;
	tc->portal = portal;
	tc->gen = gen;
	list_init(&tc->free_tasks);
	list_init(&tc->active);
	list_init(&tc->order_q);
	list_init(&tc->zc_tasks);
	tc->login = malloc(sizeof(*tc->login));
	if (!tc->login) {
		free(tc);
		return NULL;
	}
	pol.admit = admit;
	pol.ctx = tc;
	login_acceptor_init(tc->login, &pol);
	return tc;
}

static void tc_started(struct tgt_conn *tc, struct iscsi_conn *c)
{
	struct tgt_worker *w = tc->worker;

	tc->conn = c;
	w->nconns++;
	list_add_tail(&tc->wlink, &w->conns);
	list_add_tail(&tc->plink, &w->login_fresh);
	tc->pending = true;
	w->npending++;
	ev_timer_init(&tc->login_timer, login_timeout, tc);
	ev_timer_init(&tc->nop_timer, nop_timer_cb, tc);
	ev_timer_init(&tc->logout_timer, logout_timer_cb, tc);
	ev_timer_init(&tc->idle_timer, idle_timeout, tc);
	ev_timer_init(&tc->close_timer, close_timer_cb, tc);
	ev_timer_start(w->loop, &tc->login_timer,
		       tc->gen->cfg->global.login_timeout_ms ? tc->gen->cfg->global.login_timeout_ms
							      : 15000);
	log_dbg("target", "%s: connected to %s", c->peer, c->local);
}

void tgt_conn_accept_iser(struct tgt_worker *w, struct iser_request *req,
			  const struct cfg_portal *portal)
{
	struct tgt_conn *tc = tc_new(w, portal, "");
	struct iscsi_conn *c;

	if (!tc) {
		iser_request_reject(req);
		tgt_conn_gone(w->tgt);
		return;
	}
	c = iser_conn_accept(req, w->loop, ISCSI_ROLE_TARGET, &tgt_role_ops, tc);
	if (!c) {
		free(tc->login);
		free(tc);
		tgt_conn_gone(w->tgt);
		return;
	}
	tc_started(tc, c);
}

void tgt_conn_accept(struct tgt_worker *w, int fd, const struct cfg_portal *portal)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char peer[72] = "";
	struct tgt_conn *tc;
	struct iscsi_conn *c;

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_sockaddr(&ss, peer, sizeof(peer));
	tc = tc_new(w, portal, peer);
	if (!tc) {
		close(fd);
		tgt_conn_gone(w->tgt);
		return;
	}
	c = w->tgt->fault ? tcp_conn_new_dm(fd, w->loop, fault_dm_ops(w->tgt->fault),
					    ISCSI_ROLE_TARGET, &tgt_role_ops, tc)
			  : tcp_conn_new(fd, w->loop, ISCSI_ROLE_TARGET, &tgt_role_ops, tc);
	if (!c) {
		free(tc->login);
		free(tc);
		tgt_conn_gone(w->tgt);
		return;
	}
	tc_started(tc, c);
	if (tcp_conn_start(c) < 0)
		iscsi_conn_close(c, "cannot watch the socket");
}
