/* Initiator context and session life cycle: connect, login with retries and backoff,
 * redirection, recovery after a lost connection (session reinstatement with the same ISID,
 * commands reissued, bounded by the replacement timeout), logout and teardown. Options are
 * checked in ini_opts.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "initiator/ini_int.h"
#include "util/log.h"

/* ---------------------------------------------------------------- context */

struct ix_ctx *ix_ctx_new(void)
{
	struct ix_ctx *ctx = calloc(1, sizeof(*ctx));

	if (!ctx)
		return NULL;
	ctx->loop = ev_loop_new();
	if (!ctx->loop) {
		free(ctx);
		return NULL;
	}
	ev_loop_set_poll_us(ctx->loop, IX_CTX_POLL_US_DEFAULT);
	list_init(&ctx->sessions);
	return ctx;
}

void ix_ctx_free(struct ix_ctx *ctx)
{
	if (!ctx)
		return;
	while (!list_empty(&ctx->sessions))
		ix_session_free(list_first_entry(&ctx->sessions, struct ix_session, link));
	/* let deferred frees (connections) run */
	ev_loop_run_once(ctx->loop, 0);
	ev_loop_free(ctx->loop);
	free(ctx);
}

int ix_ctx_fd(const struct ix_ctx *ctx)
{
	return ev_loop_fd(ctx->loop);
}

void ix_ctx_set_poll_us(struct ix_ctx *ctx, unsigned poll_us)
{
	ev_loop_set_poll_us(ctx->loop, poll_us);
}

int ix_ctx_timeout_ms(struct ix_ctx *ctx)
{
	return ev_loop_next_timeout_ms(ctx->loop);
}

int ix_ctx_service(struct ix_ctx *ctx, int timeout_ms)
{
	return ev_loop_run_once(ctx->loop, timeout_ms);
}

int ix_ctx_run(struct ix_ctx *ctx)
{
	return ev_loop_run(ctx->loop);
}

void ix_ctx_stop(struct ix_ctx *ctx)
{
	ev_loop_stop(ctx->loop);
}

void ix_set_log_level(int level)
{
	static const int map[] = {LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG};

	if (level < 0)
		level = 0;
	if (level > 3)
		level = 3;
	ix_log_set_level(map[level]);
}

/* ---------------------------------------------------------------- hold / release */

static void session_destroy(struct ix_session *s)
{
	ini_tasks_free(s);
	ini_bufs_free(s);
	free(s->text_buf);
	explicit_bzero(&s->names, sizeof(s->names));
	free(s);
}

static void hold(struct ix_session *s)
{
	s->hold++;
}

static void release(struct ix_session *s)
{
	if (--s->hold == 0 && s->freeing)
		session_destroy(s);
}

/* ---------------------------------------------------------------- connection */

static void drop_conn(struct ix_session *s)
{
	struct iscsi_conn *c = s->conn;

	if (!c)
		return;
	s->conn = NULL;
	c->role_priv = NULL;
	iscsi_conn_close(c, NULL);
	iscsi_conn_put(c);
}

static void free_login(struct ix_session *s)
{
	if (!s->login)
		return;
	login_initiator_clear(s->login);
	free(s->login);
	s->login = NULL;
}

int ini_send(struct ix_session *s, struct iscsi_hdr *h, const void *data, uint32_t len)
{
	struct dm_txpdu *p;

	if (!s->conn)
		return -ENOTCONN;
	p = iscsi_txpdu_get(s->conn);
	if (!p)
		return -ENOMEM;
	h->dlength = len;
	if (len) {
		p->data[0].iov_base = (void *)data;
		p->data[0].iov_len = len;
		p->data_cnt = 1;
		p->data_len = len;
	}
	return iscsi_send_pdu(s->conn, p, h);
}

uint32_t ini_next_ctrl_itt(struct ix_session *s)
{
	s->ctrl_itt = (s->ctrl_itt + 1) & 0x7fffffffu;
	if (s->ctrl_itt == 0x7fffffffu || s->ctrl_itt == 0)
		s->ctrl_itt = 1;
	return INI_ITT_CTRL | s->ctrl_itt;
}

/* ---------------------------------------------------------------- callbacks out */

static void notify_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;

	hold(s);
	if (s->notify_login) {
		ix_session_cb cb = s->login_cb;
		s->notify_login = false;
		s->login_cb = NULL;
		if (cb)
			cb(s, s->pending_login_err, s->login_arg);
	}
	if (!s->freeing && s->notify_logout) {
		ix_session_cb cb = s->logout_cb;
		s->notify_logout = false;
		s->logout_cb = NULL;
		if (cb)
			cb(s, s->pending_logout_err, s->logout_arg);
	}
	release(s);
}

static void finish_login(struct ix_session *s, int err)
{
	s->pending_login_err = err;
	s->notify_login = true;
	ev_timer_start(s->ctx->loop, &s->notify_timer, 0);
}

static void finish_logout(struct ix_session *s, int err)
{
	s->pending_logout_err = err;
	s->notify_logout = true;
	ev_timer_start(s->ctx->loop, &s->notify_timer, 0);
}

static void emit(struct ix_session *s, enum ix_session_event ev, int err)
{
	if (s->event_cb && !s->freeing)
		s->event_cb(s, ev, err, s->event_arg);
}

/* ---------------------------------------------------------------- login attempts */

static void start_attempt(struct ix_session *s);

static bool fatal_login_error(int err)
{
	return err == -EACCES || err == -ENOENT || err == -EINVAL || err == -EPROTONOSUPPORT;
}

static uint32_t backoff_ms(const struct ix_session *s)
{
	uint64_t d = s->opts.retry_delay_ms;

	for (uint32_t i = 1; i < s->attempts && d < s->opts.retry_delay_max_ms; i++)
		d *= 2;
	return d > s->opts.retry_delay_max_ms ? s->opts.retry_delay_max_ms : (uint32_t)d;
}

static void go_down(struct ix_session *s, int err)
{
	s->recovering = false;
	ev_timer_stop(s->ctx->loop, &s->replace_timer);
	ev_timer_stop(s->ctx->loop, &s->nop_timer);
	s->state = INI_DOWN;
	ini_fail_all(s, err);
}

/* One attempt (connect + login) failed. */
static void attempt_failed(struct ix_session *s, int err)
{
	struct ev_loop *loop = s->ctx->loop;

	drop_conn(s);
	free_login(s);
	ev_timer_stop(loop, &s->login_timer);
	s->attempts++;
	log_info("initiator", "%s:%u: login attempt %u failed: %s", s->host, s->port, s->attempts,
		 s->error);
	if (s->recovering) {
		if (fatal_login_error(err)) {
			go_down(s, err);
			emit(s, IX_EVENT_RECOVERY_FAILED, err);
			return;
		}
		s->state = INI_BACKOFF;
		ev_timer_start(loop, &s->retry_timer, backoff_ms(s));
		return;
	}
	if (fatal_login_error(err) || s->attempts > s->opts.login_retries) {
		s->state = INI_DOWN;
		finish_login(s, err);
		return;
	}
	s->state = INI_BACKOFF;
	ev_timer_start(loop, &s->retry_timer, backoff_ms(s));
}

static void send_login_req(struct ix_session *s)
{
	struct login_init_req req;
	int r = login_initiator_next(s->login, &req);

	if (r < 0) {
		ini_set_error(s, "login: %s", s->login->error);
		attempt_failed(s, r);
		return;
	}
	req.hdr.itt = s->login_itt;
	r = ini_send(s, &req.hdr, req.text, req.text_len);
	if (r < 0) {
		ini_set_error(s, "login: cannot send: %s", strerror(-r));
		attempt_failed(s, r);
	}
}

/* The transport is up (s->conn set, our reference taken): start the login. */
static void begin_login(struct ix_session *s)
{
	struct login_init_cfg cfg;
	int r;

	s->login = calloc(1, sizeof(*s->login));
	if (!s->login) {
		ini_set_error(s, "out of memory");
		attempt_failed(s, -ENOMEM);
		return;
	}
	s->prefs.rdma = s->conn->dm->caps & DM_CAP_DIRECT_PLACEMENT;
	if (s->prefs.rdma) {
		s->prefs.target_rdsl = 8192;
		s->prefs.initiator_rdsl = s->conn->dm->max_recv_data;
		s->prefs.header_digest = NEG_DIGEST_NONE_ONLY;
		s->prefs.data_digest = NEG_DIGEST_NONE_ONLY;
	} else {
		s->prefs.header_digest = ini_digest_pref(s->opts.header_digest);
		s->prefs.data_digest = ini_digest_pref(s->opts.data_digest);
	}
	s->conn->state = ISCSI_CONN_IN_LOGIN;
	s->state = INI_LOGIN;
	memset(&cfg, 0, sizeof(cfg));
	cfg.initiator_name = s->opts.initiator_name;
	cfg.initiator_alias = s->opts.initiator_alias;
	cfg.target_name = s->opts.target_name;
	cfg.type = s->type;
	memcpy(cfg.isid, s->isid, 6);
	cfg.tsih = 0; /* a new session, or the reinstatement of ours (same ISID) */
	cfg.cid = 0;
	cfg.cmdsn = s->cmdsn;
	cfg.expstatsn = 0;
	cfg.creds = &s->creds;
	cfg.prefs = &s->prefs;
	r = login_initiator_init(s->login, &cfg);
	if (r < 0) {
		ini_set_error(s, "login: %s", s->login->error);
		attempt_failed(s, r);
		return;
	}
	s->login_itt = ini_next_ctrl_itt(s);
	send_login_req(s);
}

static void try_transport(struct ix_session *s);

/* The transport tried last could not connect: the next one, or the attempt failed. */
static void transport_failed(struct ix_session *s, int err)
{
	const struct dm_ops *dm = s->xports[s->xport_next - 1];

	if (s->xport_next < s->nxports) {
		log_info("initiator", "%s:%u: %s not available (%s): trying %s", s->host, s->port,
			 dm->name, strerror(-err), s->xports[s->xport_next]->name);
		try_transport(s);
		return;
	}
	ini_set_error(s, "%s connect to %s:%u: %s", dm->name, s->host, s->port, strerror(-err));
	attempt_failed(s, err);
}

static void transport_up(struct iscsi_conn *c, int err)
{
	struct ix_session *s = c->role_priv;

	if (!s)
		return;
	hold(s);
	if (err < 0) {
		drop_conn(s);
		transport_failed(s, err);
	} else {
		begin_login(s);
	}
	release(s);
}

static void try_transport(struct ix_session *s)
{
	const struct dm_ops *dm = s->xports[s->xport_next++];
	struct dm_conn_setup cs = {
		.loop = s->ctx->loop,
		.role = ISCSI_ROLE_INITIATOR,
		.ops = &ini_role_ops,
		.role_priv = s,
		.up = transport_up,
	};
	int err;

	s->conn = dm_connect(dm, s->host, s->port, &cs, &err);
	if (s->conn) {
		iscsi_conn_get(s->conn); /* ours, dropped in drop_conn() */
		return;
	}
	transport_failed(s, err);
}

static void start_attempt(struct ix_session *s)
{
	s->state = INI_CONNECTING;
	ev_timer_start(s->ctx->loop, &s->login_timer, s->opts.login_timeout_ms);
	s->xport_next = 0;
	try_transport(s);
}

static void retry_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;

	hold(s);
	if (s->state == INI_BACKOFF)
		start_attempt(s);
	release(s);
}

static void login_timeout_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;

	hold(s);
	if (s->state == INI_CONNECTING || s->state == INI_LOGIN) {
		ini_set_error(s, "%s to %s:%u timed out after %u ms",
			      s->state == INI_CONNECTING ? "connect" : "login", s->host, s->port,
			      s->opts.login_timeout_ms);
		attempt_failed(s, -ETIMEDOUT);
	}
	release(s);
}

static void replace_timeout_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;

	hold(s);
	if (s->recovering) {
		ev_timer_stop(s->ctx->loop, &s->login_timer);
		ev_timer_stop(s->ctx->loop, &s->retry_timer);
		drop_conn(s);
		free_login(s);
		ini_set_error(s, "no connection to %s within the replacement timeout (%u ms) after: %s",
			      s->names.portal, s->opts.replacement_timeout_ms, s->loss_reason);
		log_warn("initiator", "%s", s->error);
		go_down(s, -ETIMEDOUT);
		emit(s, IX_EVENT_RECOVERY_FAILED, -ETIMEDOUT);
	}
	release(s);
}

/* The final login response arrived. */
static void enter_ffp(struct ix_session *s, const struct iscsi_hdr *h)
{
	struct login_initiator *li = s->login;
	struct iscsi_conn *c = s->conn;
	int r;

	ev_timer_stop(s->ctx->loop, &s->login_timer);
	s->tsih = li->tsih;
	s->tpgt = li->tpgt;
	snprintf(s->target_alias, sizeof(s->target_alias), "%s", li->target_alias);
	s->sp = li->neg.sess;
	c->params = li->neg.conn;
	s->exp_statsn = li->expstatsn;
	s->exp_cmdsn = h->login_rsp.expcmdsn;
	s->max_cmdsn = h->login_rsp.maxcmdsn;
	free_login(s);
	r = iscsi_conn_set_ctrl_cap(c, c->params.max_recv_dsl);
	if (r < 0) {
		ini_set_error(s, "out of memory entering full feature phase");
		attempt_failed(s, r);
		return;
	}
	c->dm->enable(c, &c->params);
	c->state = ISCSI_CONN_LOGGED_IN;
	s->state = INI_FFP;
	s->attempts = 0;
	s->redirects = 0;
	ini_bufs_register(s);
	log_info("initiator",
		 "%s: logged in to %s (tsih %u, MaxRecvDSL %u/%u, digests %s/%s, ImmediateData %s, "
		 "InitialR2T %s, FirstBurst %u, MaxBurst %u)",
		 c->peer, s->type == ISCSI_SESSION_DISCOVERY ? "discovery" : s->opts.target_name,
		 s->tsih, c->params.max_recv_dsl, c->params.max_xmit_dsl,
		 c->params.header_digest ? "CRC32C" : "None", c->params.data_digest ? "CRC32C" : "None",
		 s->sp.immediate_data ? "Yes" : "No", s->sp.initial_r2t ? "Yes" : "No",
		 s->sp.first_burst_length, s->sp.max_burst_length);
	ini_ffp_started(s);
	if (s->recovering) {
		s->recovering = false;
		s->recoveries++;
		ev_timer_stop(s->ctx->loop, &s->replace_timer);
		ini_kick(s);
		emit(s, IX_EVENT_RECOVERED, 0);
		return;
	}
	s->ever_logged_in = true;
	finish_login(s, 0);
}

void ini_login_rx(struct ix_session *s, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen)
{
	int r;

	if (h->opcode != ISCSI_OP_LOGIN_RSP || h->itt != s->login_itt || !s->login) {
		ini_set_error(s, "login: unexpected %s (ITT 0x%08x)", iscsi_opcode_name(h->opcode),
			      h->itt);
		attempt_failed(s, -EPROTO);
		return;
	}
	r = login_initiator_recv(s->login, h, data, dlen);
	if (r == LOGIN_INIT_CONTINUE) {
		send_login_req(s);
		return;
	}
	if (r == LOGIN_INIT_DONE) {
		enter_ffp(s, h);
		return;
	}
	ini_set_error(s, "login to %s:%u: %s", s->host, s->port, s->login->error);
	if (r == -EXDEV) {
		char host[ADDR_HOST_MAX];
		uint16_t port;

		if (++s->redirects > INI_MAX_REDIRECTS ||
		    addr_parse_portal(s->login->redirect, INI_DEF_PORT, host, sizeof(host), &port,
				      NULL) < 0) {
			attempt_failed(s, -EPROTO);
			return;
		}
		log_info("initiator", "%s:%u redirects %s to %s", s->host, s->port,
			 s->login->status == ISCSI_LOGIN_TARGET_MOVED_PERM ? "permanently"
									   : "temporarily",
			 s->login->redirect);
		snprintf(s->host, sizeof(s->host), "%s", host);
		s->port = port;
		if (s->login->status == ISCSI_LOGIN_TARGET_MOVED_PERM) {
			/* moved permanently: later logins of this session (recovery) go there */
			snprintf(s->home_host, sizeof(s->home_host), "%s", host);
			s->home_port = port;
		}
		drop_conn(s);
		free_login(s);
		ev_timer_stop(s->ctx->loop, &s->login_timer);
		s->state = INI_BACKOFF;
		ev_timer_start(s->ctx->loop, &s->retry_timer, 0);
		return;
	}
	attempt_failed(s, r);
}

/* ---------------------------------------------------------------- FFP connection loss */

void ini_conn_lost(struct ix_session *s, int err, const char *why)
{
	struct ev_loop *loop = s->ctx->loop;

	if (why)
		ini_set_error(s, "%s", why);
	switch (s->state) {
	case INI_CONNECTING:
	case INI_LOGIN:
		attempt_failed(s, err);
		return;
	case INI_LOGOUT:
		drop_conn(s);
		ev_timer_stop(loop, &s->logout_timer);
		s->state = INI_IDLE;
		ini_fail_all(s, -ECONNABORTED);
		finish_logout(s, err);
		return;
	case INI_FFP:
		break;
	default:
		return;
	}
	log_warn("initiator", "%s:%u: connection lost: %s", s->host, s->port, s->error);
	snprintf(s->loss_reason, sizeof(s->loss_reason), "%s", s->error);
	drop_conn(s);
	ev_timer_stop(loop, &s->nop_timer);
	ini_requeue_all(s, err);
	if (s->freeing)
		return; /* a callback freed the session */
	if (s->opts.replacement_timeout_ms == 0) {
		go_down(s, -ENOTCONN);
		emit(s, IX_EVENT_RECOVERY_FAILED, err);
		return;
	}
	s->recovering = true;
	s->attempts = 0;
	/* a temporary redirection is forgotten: recovery starts at the configured portal, or
	   where a permanent one sent the session */
	snprintf(s->host, sizeof(s->host), "%s", s->home_host);
	s->port = s->home_port;
	ev_timer_start(loop, &s->replace_timer, s->opts.replacement_timeout_ms);
	s->state = INI_BACKOFF;
	ev_timer_start(loop, &s->retry_timer, s->opts.retry_delay_ms);
	emit(s, IX_EVENT_CONNECTION_LOST, err);
}

/* ---------------------------------------------------------------- public session API */

static void logout_timeout_cb(struct ev_timer *t);

struct ix_session *ini_session_new(struct ix_ctx *ctx, const struct ix_session_opts *opts,
				   enum iscsi_session_type type, int *err)
{
	struct ix_session *s = calloc(1, sizeof(*s));
	int r;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	s->ctx = ctx;
	s->type = type;
	list_init(&s->link);
	list_init(&s->free_tasks);
	list_init(&s->active);
	list_init(&s->bufs);
	r = ini_setup_opts(s, opts);
	if (r == 0)
		r = ini_tasks_alloc(s);
	if (r < 0) {
		log_warn("initiator", "session options: %s", s->error);
		*err = r;
		ini_tasks_free(s);
		free(s);
		return NULL;
	}
	ev_timer_init(&s->login_timer, login_timeout_cb, s);
	ev_timer_init(&s->retry_timer, retry_cb, s);
	ev_timer_init(&s->replace_timer, replace_timeout_cb, s);
	ev_timer_init(&s->nop_timer, ini_nop_timer_cb, s);
	ev_timer_init(&s->logout_timer, logout_timeout_cb, s);
	ev_timer_init(&s->notify_timer, notify_cb, s);
	ini_io_init(s);
	s->cmdsn = 1;
	s->state = INI_IDLE;
	list_add_tail(&s->link, &ctx->sessions);
	*err = 0;
	return s;
}

struct ix_session *ix_session_new(struct ix_ctx *ctx, const struct ix_session_opts *opts,
				  int *err)
{
	int dummy;

	return ini_session_new(ctx, opts, ISCSI_SESSION_NORMAL, err ? err : &dummy);
}

void ix_session_set_event_cb(struct ix_session *s, ix_event_cb cb, void *arg)
{
	s->event_cb = cb;
	s->event_arg = arg;
}

int ix_session_login(struct ix_session *s, ix_session_cb cb, void *arg)
{
	if (s->freeing)
		return -EINVAL;
	if (s->state != INI_IDLE && s->state != INI_DOWN)
		return -EALREADY;
	s->login_cb = cb;
	s->login_arg = arg;
	s->attempts = 0;
	s->redirects = 0;
	s->recovering = false;
	s->error[0] = 0;
	if (!s->home_host[0])
		addr_parse_portal(s->opts.portal, INI_DEF_PORT, s->home_host,
				  sizeof(s->home_host), &s->home_port, NULL);
	snprintf(s->host, sizeof(s->host), "%s", s->home_host);
	s->port = s->home_port;
	hold(s);
	start_attempt(s);
	release(s);
	return 0;
}

static void send_logout(struct ix_session *s)
{
	struct iscsi_hdr h = {0};
	int r;

	h.opcode = ISCSI_OP_LOGOUT_REQ;
	h.immediate = true;
	h.final = true;
	h.itt = ini_next_ctrl_itt(s);
	h.logout_req.reason = ISCSI_LOGOUT_CLOSE_SESSION;
	h.logout_req.cmdsn = s->cmdsn;
	h.logout_req.expstatsn = s->exp_statsn;
	r = ini_send(s, &h, NULL, 0);
	if (r < 0)
		ini_conn_lost(s, r, "cannot send Logout");
}

/* Called by the I/O path whenever a command completes during LOGOUT. */
void ini_logout_maybe(struct ix_session *s)
{
	if (s->state == INI_LOGOUT && s->outstanding == 0 && !s->q_head && !s->logout_sent) {
		s->logout_sent = true;
		send_logout(s);
	}
}

void ini_logout_rx(struct ix_session *s, const struct iscsi_hdr *h)
{
	if (s->state != INI_LOGOUT) {
		ini_conn_lost(s, -EPROTO, "Logout Response without a Logout");
		return;
	}
	ev_timer_stop(s->ctx->loop, &s->logout_timer);
	drop_conn(s);
	s->state = INI_IDLE;
	if (h->logout_rsp.response != ISCSI_LOGOUT_RSP_OK) {
		ini_set_error(s, "logout refused (response %u)", h->logout_rsp.response);
		finish_logout(s, -EPROTO);
		return;
	}
	finish_logout(s, 0);
}

static void logout_timeout_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;

	hold(s);
	if (s->state == INI_LOGOUT) {
		ini_set_error(s, "logout timed out after %u ms", s->opts.login_timeout_ms);
		drop_conn(s);
		s->state = INI_IDLE;
		ini_fail_all(s, -ECONNABORTED);
		finish_logout(s, -ETIMEDOUT);
	}
	release(s);
}

int ix_session_logout(struct ix_session *s, ix_session_cb cb, void *arg)
{
	if (s->freeing)
		return -EINVAL;
	if (s->state == INI_LOGOUT)
		return -EALREADY;
	if (s->state != INI_FFP)
		return -ENOTCONN;
	s->logout_cb = cb;
	s->logout_arg = arg;
	s->state = INI_LOGOUT;
	s->logout_sent = false;
	ev_timer_stop(s->ctx->loop, &s->nop_timer);
	ev_timer_start(s->ctx->loop, &s->logout_timer, s->opts.login_timeout_ms);
	hold(s);
	ini_logout_maybe(s);
	release(s);
	return 0;
}

void ix_session_free(struct ix_session *s)
{
	struct ev_loop *loop;

	if (!s || s->freeing)
		return;
	loop = s->ctx->loop;
	hold(s);
	ev_timer_stop(loop, &s->login_timer);
	ev_timer_stop(loop, &s->retry_timer);
	ev_timer_stop(loop, &s->replace_timer);
	ev_timer_stop(loop, &s->nop_timer);
	ev_timer_stop(loop, &s->logout_timer);
	ev_timer_stop(loop, &s->notify_timer);
	ev_timer_stop(loop, &s->cancel_timer);
	drop_conn(s);
	free_login(s);
	ini_fail_all(s, -ECANCELED);
	s->freeing = true;
	list_del(&s->link);
	if (s->login_cb && (s->state == INI_CONNECTING || s->state == INI_LOGIN ||
			    s->state == INI_BACKOFF || s->notify_login)) {
		ix_session_cb cb = s->login_cb;
		s->login_cb = NULL;
		cb(s, -ECANCELED, s->login_arg);
	}
	if (s->logout_cb) {
		ix_session_cb cb = s->logout_cb;
		s->logout_cb = NULL;
		cb(s, -ECANCELED, s->logout_arg);
	}
	s->state = INI_DOWN;
	release(s);
}

int ix_session_get_info(const struct ix_session *s, struct ix_session_info *info)
{
	memset(info, 0, sizeof(*info));
	info->logged_in = s->state == INI_FFP || s->state == INI_LOGOUT;
	info->tsih = s->tsih;
	memcpy(info->isid, s->isid, 6);
	info->tpgt = s->tpgt;
	snprintf(info->target_alias, sizeof(info->target_alias), "%s", s->target_alias);
	snprintf(info->portal, sizeof(info->portal), "%s:%u", s->host, s->port);
	if (s->conn) {
		info->header_digest = s->conn->params.header_digest;
		info->data_digest = s->conn->params.data_digest;
		info->max_recv_dsl = s->conn->params.max_recv_dsl;
		info->max_xmit_dsl = s->conn->params.max_xmit_dsl;
	}
	info->immediate_data = s->sp.immediate_data;
	info->initial_r2t = s->sp.initial_r2t;
	info->first_burst_length = s->sp.first_burst_length;
	info->max_burst_length = s->sp.max_burst_length;
	info->cmdsn_window = s->max_cmdsn - s->cmdsn + 1;
	info->outstanding = s->outstanding;
	info->recoveries = s->recoveries;
	return 0;
}

struct ix_ctx *ini_session_ctx(struct ix_session *s)
{
	return s->ctx;
}

void ini_hold(struct ix_session *s)
{
	hold(s);
}

void ini_release(struct ix_session *s)
{
	release(s);
}
