/* Target side of one connection: accept, full-feature-phase dispatch, NOP keepalive, logout,
 * Reject. Login and admission live in tgt_login.c, SCSI commands and data in tgt_scsi.c, Text
 * in tgt_text.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/crc32c.h"
#include "session/keepalive.h"
#include "target/tgt_int.h"
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
	struct iscsi_sn_fields f;

	if (tc->sess) {
		tgt_session_update_window(tc->sess);
		exp = tc->sess->exp_cmdsn;
		max = tc->sess->max_cmdsn;
	}
	if (iscsi_hdr_sn_fields(h, &f) < 0)
		return;
	*f.statsn = statsn;
	*f.expcmdsn = exp;
	*f.maxcmdsn = max;
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

int tgt_send_then_close(struct tgt_conn *tc, struct iscsi_hdr *h, const void *data,
			uint32_t len)
{
	return send_copy(tc, h, data, len, true);
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

static void idle_timeout(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;
	char why[112];

	snprintf(why, sizeof(why),
		 "discovery session idle for %u ms (global.discovery_idle_timeout_ms)",
		 tc->gen->cfg->global.discovery_idle_timeout_ms);
	iscsi_conn_close(tc->conn, why);
}

static void nop_timer_cb(struct ev_timer *t);

/* ---------------------------------------------------------------- NOP */

static void nop_timer_cb(struct ev_timer *t)
{
	struct tgt_conn *tc = t->arg;
	const struct cfg_global *g = &tc->gen->cfg->global;
	struct iscsi_hdr h = {.opcode = ISCSI_OP_NOP_IN, .final = true, .itt = ISCSI_RSVD_TAG};
	uint32_t next;

	switch (keepalive_due(tc->nop_outstanding, tc->last_rx_ms, ev_now_ms(tc->conn->loop),
			      g->nop_interval_ms, g->nop_timeout_ms ? g->nop_timeout_ms : 30000,
			      &next)) {
	case KEEPALIVE_DEAD:
		tgt_stat_count(tc, TGT_ST_CONN_TIMEOUT, 1);
		iscsi_conn_close(tc->conn, "no NOP-Out answer to our NOP-In ping");
		return;
	case KEEPALIVE_WAIT:
		ev_timer_start(tc->conn->loop, &tc->nop_timer, next);
		return;
	case KEEPALIVE_PING:
		break;
	}
	h.nop_in.ttt = ++tc->nop_ttt == ISCSI_RSVD_TAG ? ++tc->nop_ttt : tc->nop_ttt;
	tgt_stamp(tc, &h, false);
	tc->nop_outstanding = true;
	tgt_send(tc, &h, NULL, 0);
	ev_timer_start(tc->conn->loop, &tc->nop_timer, next);
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

/* One of the shared stores has stored what the logout released: the response goes once all
 * have (unless the connection closed meanwhile). */
static void logout_stored(void *arg)
{
	struct tgt_conn *tc = arg;
	struct iscsi_conn *c = tc->conn;

	if (--tc->logout_waits > 0)
		return;
	if (!c->terminated)
		send_copy(tc, &tc->logout_rsp, NULL, 0, true);
	iscsi_conn_put(c);
}

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
		/* MaxConnections is 1: the logout ends the session, an I_T nexus loss, and that
		   must be done before the response lets the initiator log in again (the session
		   is freed only once the connection has closed, on this or another worker); an
		   SPC-2 reservation it held through a shared store must be released there too,
		   since the initiator may reserve through another gateway next */
		if (tc->sess) { /* a discovery session's nexus is NULL: nothing to release */
			struct scsi_lost_wait w = {tc->conn->loop, logout_stored, tc};

			tc->logout_waits = scsi_nexus_lost_wait(tc->sess->nexus, &w);
		}
		tc->logged_out = true;
		tc->conn->state = ISCSI_CONN_IN_LOGOUT;
		if (tc->logout_waits) {
			tc->logout_rsp = r;
			ev_timer_stop(tc->conn->loop, &tc->nop_timer);
			iscsi_conn_get(tc->conn);
			return;
		}
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

/* The CmdSN a request carries (bytes 24-27 of the initiator opcodes that have one). */
static bool pdu_cmdsn(const struct iscsi_hdr *h, uint32_t *cmdsn)
{
	switch (h->opcode) {
	case ISCSI_OP_SCSI_CMD:
		*cmdsn = h->cmd.cmdsn;
		return true;
	case ISCSI_OP_NOP_OUT:
		*cmdsn = h->nop_out.cmdsn;
		return true;
	case ISCSI_OP_TMF_REQ:
		*cmdsn = h->tmf_req.cmdsn;
		return true;
	case ISCSI_OP_TEXT_REQ:
		*cmdsn = h->text_req.cmdsn;
		return true;
	case ISCSI_OP_LOGOUT_REQ:
		*cmdsn = h->logout_req.cmdsn;
		return true;
	default:
		return false;
	}
}

/* The one CmdSN check (RFC 7143 4.2.2.1), in the header phase of every initiator PDU: an
 * immediate request is delivered at once; a non-immediate one outside [ExpCmdSN, MaxCmdSN]
 * is dropped silently. */
static enum tgt_cmdsn cmdsn_check(const struct tgt_conn *tc, const struct iscsi_hdr *h)
{
	const struct tgt_session *s = tc->sess;
	uint32_t cmdsn;

	if (!pdu_cmdsn(h, &cmdsn))
		return TGT_CMDSN_NONE;
	if (h->immediate)
		return TGT_CMDSN_IMMEDIATE;
	if (sn_lt(cmdsn, s->exp_cmdsn) || sn_lt(s->max_cmdsn, cmdsn)) {
		log_dbg("target", "%s: %s CmdSN %u outside [%u, %u]: dropped", tc->conn->peer,
			iscsi_opcode_name(h->opcode), cmdsn, s->exp_cmdsn, s->max_cmdsn);
		return TGT_CMDSN_DROP;
	}
	return cmdsn == s->exp_cmdsn ? TGT_CMDSN_IN_ORDER : TGT_CMDSN_AHEAD;
}

/* A non-SCSI request whose header passed cmdsn_check(): false to drop it silently; the
 * expected one advances ExpCmdSN (and may release SCSI commands queued behind it). */
static bool cmdsn_deliver(struct tgt_conn *tc, const struct iscsi_hdr *h)
{
	uint32_t sn;

	if (tc->rx_cmdsn == TGT_CMDSN_DROP)
		return false;
	/* in order: ExpCmdSN advances; ahead of a hole: handled now (only SCSI commands wait
	   for order here), and its CmdSN is used up when ExpCmdSN gets there */
	if ((tc->rx_cmdsn == TGT_CMDSN_IN_ORDER || tc->rx_cmdsn == TGT_CMDSN_AHEAD) &&
	    pdu_cmdsn(h, &sn))
		tgt_cmdsn_consume(tc, sn);
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
	tc->rx_cmdsn = cmdsn_check(tc, h);
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
		tgt_login_pdu(tc, h, data, dlen);
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
		if (!cmdsn_deliver(tc, h))
			return;
		handle_nop_out(tc, h, data, dlen);
		break;
	case ISCSI_OP_TEXT_REQ:
		if (!cmdsn_deliver(tc, h))
			return;
		tgt_text(tc, h, data, dlen);
		break;
	case ISCSI_OP_LOGOUT_REQ:
		if (!cmdsn_deliver(tc, h))
			return;
		handle_logout(tc, h);
		break;
	case ISCSI_OP_TMF_REQ:
		if (s->type == ISCSI_SESSION_DISCOVERY) {
			tgt_send_reject(tc, ISCSI_REJECT_PROTOCOL_ERROR, c->rx_bhs);
			return;
		}
		if (!cmdsn_deliver(tc, h))
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
	tgt_login_pending_del(tc);
	if (c->digest_errors)
		tgt_stat_count(tc, TGT_ST_DIGEST_ERROR, c->digest_errors);
	if (tc->held)
		tgt_session_unhold(tc->tgt, tc->held); /* freed with the connection */
	/* the session stays registered (draining) until the tasks still in the backend have
	   finished and the connection is released: a login with its ISID waits for that */
	if (tc->sess) {
		tgt_session_drain(tc->tgt, tc->sess);
		/* MaxConnections is 1: the connection's end is the I_T nexus's loss (PREVENT MEDIUM
		   REMOVAL, a RESERVE(6)/(10) end now), not only once its tasks have drained and
		   the session is freed: an initiator that logs in again at once must not meet them */
		scsi_nexus_lost(tc->sess->nexus);
	}
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
		tgt_session_free(tc->held);
	if (tc->sess) {
		tgt_session_unregister(tc->tgt, tc->sess); /* resumes logins held for it */
		list_del(&tc->sess->wlink);
		tgt_session_free(tc->sess);
	}
	if (tc->login) {
		login_acceptor_clear(tc->login);
		free(tc->login);
	}
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < TGT_BUF_CACHE; j++)
			free(tc->buf_cache[i][j]);
	while (tc->task_chunks) {
		struct tgt_task_chunk *k = tc->task_chunks;

		tc->task_chunks = k->next;
		for (int i = 0; i < TGT_TASK_CHUNK; i++)
			free(k->t[i].buf);
		free(k);
	}
	free(tc->text_rsp);
	free(tc->text_req);
	tgt_conn_gone(tc->tgt);
	free(tc);
}

/* The transmit pool grew past its first chunk: given back when the connection is quiet. */
static void conn_tx_grown(struct iscsi_conn *c)
{
	struct tgt_conn *tc = c->role_priv;

	if (!tc->trim_due)
		tgt_trim_arm(tc);
}

static const struct iscsi_role_ops tgt_role_ops = {
	.rx_header = rx_header,
	.rx_pdu = rx_pdu,
	.closed = conn_closed,
	.release = conn_release,
	.tx_grown = conn_tx_grown,
};

/* peer: "addr:port" of the new connection for the login limit ("" if unknown). */
static struct tgt_conn *tc_new(struct tgt_worker *w, const struct cfg_portal *portal,
			       const char *peer)
{
	struct tgt_cfg_gen *gen = tgt_gen_current(w->tgt);
	struct tgt_conn *tc;
	struct login_policy pol;

	tgt_login_make_room(w, gen->cfg, peer);
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
	pol.admit = tgt_login_admit;
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
	tc->login_since_ms = ev_now_ms(w->loop);
	tc->pending = true;
	w->npending++;
	ev_timer_init(&tc->login_timer, tgt_login_timeout, tc);
	ev_timer_init(&tc->nop_timer, nop_timer_cb, tc);
	ev_timer_init(&tc->logout_timer, logout_timer_cb, tc);
	ev_timer_init(&tc->idle_timer, idle_timeout, tc);
	ev_timer_init(&tc->close_timer, close_timer_cb, tc);
	ev_timer_start(w->loop, &tc->login_timer,
		       tc->gen->cfg->global.login_timeout_ms ? tc->gen->cfg->global.login_timeout_ms
							      : 15000);
	log_dbg("target", "%s: connected to %s", c->peer, c->local);
}

void tgt_conn_accept(struct tgt_worker *w, struct dm_incoming *in, const struct cfg_portal *portal)
{
	struct tgt_conn *tc = tc_new(w, portal, in->peer);
	struct dm_conn_setup cs = {
		.loop = w->loop,
		.role = ISCSI_ROLE_TARGET,
		.ops = &tgt_role_ops,
		.role_priv = tc,
		.as = tgt_conn_ops(w->tgt, in->dm),
		.stage = &w->stage,
	};
	struct iscsi_conn *c;

	if (!tc) {
		dm_reject(in);
		tgt_login_slot_free(w->tgt);
		tgt_conn_gone(w->tgt);
		return;
	}
	c = dm_accept(in, &cs);
	if (!c) {
		free(tc->login);
		free(tc);
		tgt_login_slot_free(w->tgt);
		tgt_conn_gone(w->tgt);
		return;
	}
	tc_started(tc, c);
}
