/* Text Request handling in full feature phase: SendTargets discovery (RFC 7143 13.3 and
 * appendix C) with continuation in both directions (C bit, TTT). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "session/keys.h"
#include "target/tgt_int.h"
#include "util/log.h"

#define TEXT_REQ_MAX (64 * 1024)
#define TEXT_RSP_MAX (1024 * 1024)

static bool is_wildcard(const char *a)
{
	return strcmp(a, "0.0.0.0") == 0 || strcmp(a, "::") == 0;
}

/* Append the TargetName record and its TargetAddress lines. */
static int add_target(struct tgt_conn *tc, const struct ix_config *cfg, const struct cfg_target *ct,
		      struct text_out *o)
{
	int r = text_out_add(o, "TargetName", ct->name);
	int xport = dm_transport_id(tc->conn->dm);

	if (xport < 0)
		xport = DM_ID_DEFAULT;

	for (size_t i = 0; r == 0 && i < cfg->nportals; i++) {
		const struct cfg_portal *p = &cfg->portals[i];
		char addr[128];
		/* portals that serve the transport this discovery session runs on: an
		   initiator discovering over TCP is not sent to an iSER-only portal, one
		   discovering over iSER learns the iSER portals (on iWARP, where iSER and TCP
		   cannot share a port, those are other ports than TCP's) */
		if (!cfg_target_on_portal(ct, p) || !(p->transports & (1u << xport)))
			continue;
		if (is_wildcard(p->address)) {
			/* the address the initiator reached us on: c->local is "[v6]:port" or
			   "v4:port"; replace the port with the portal's */
			char host[80];
			snprintf(host, sizeof(host), "%s", tc->conn->local);
			char *colon = strrchr(host, ':');
			if (colon)
				*colon = '\0';
			snprintf(addr, sizeof(addr), "%s:%u,%u", host, p->port, p->tpgt);
		} else if (strchr(p->address, ':')) {
			snprintf(addr, sizeof(addr), "[%s]:%u,%u", p->address, p->port, p->tpgt);
		} else {
			snprintf(addr, sizeof(addr), "%s:%u,%u", p->address, p->port, p->tpgt);
		}
		r = text_out_add(o, "TargetAddress", addr);
	}
	return r;
}

static bool visible(const struct tgt_conn *tc, const struct cfg_target *ct)
{
	return cfg_target_on_portal(ct, tc->portal) &&
	       cfg_find_acl(ct, tc->sess->initiator) != NULL;
}

static int send_targets(struct tgt_conn *tc, const char *value, struct text_out *o)
{
	const struct ix_config *cfg = tc->gen->cfg;
	struct tgt_session *s = tc->sess;

	if (strcmp(value, "All") == 0) {
		if (s->type != ISCSI_SESSION_DISCOVERY)
			return text_out_add(o, "SendTargets", "Irrelevant");
		for (size_t i = 0; i < cfg->ntargets; i++)
			if (visible(tc, &cfg->targets[i])) {
				int r = add_target(tc, cfg, &cfg->targets[i], o);
				if (r < 0)
					return r;
			}
		return 0;
	}
	const char *name = value;
	if (!*value) {
		if (s->type == ISCSI_SESSION_DISCOVERY)
			return text_out_add(o, "SendTargets", "Reject");
		name = s->target;
	}
	if (strncmp(name, "iqn.", 4) != 0 && strncmp(name, "eui.", 4) != 0 &&
	    strncmp(name, "naa.", 4) != 0)
		return text_out_add(o, "SendTargets", "Reject");
	const struct cfg_target *ct = cfg_find_target(cfg, name);
	if (ct && visible(tc, ct))
		return add_target(tc, cfg, ct, o);
	return 0; /* unknown or invisible target: an empty answer */
}

static void send_chunk(struct tgt_conn *tc, uint32_t itt, uint64_t lun)
{
	struct iscsi_hdr r = {.opcode = ISCSI_OP_TEXT_RSP, .itt = itt};
	uint32_t left = tc->text_rsp_len - tc->text_rsp_off;
	uint32_t n = left;
	uint32_t max = tc->conn->params.max_xmit_dsl;

	if (n > max)
		n = max;
	r.text_rsp.lun = lun;
	if (n < left) {
		r.text_rsp.cont = true;
		r.final = false;
		do {
			tc->text_ttt = ++tc->next_ttt;
		} while (tc->text_ttt == ISCSI_RSVD_TAG);
		r.text_rsp.ttt = tc->text_ttt;
	} else {
		r.final = true;
		r.text_rsp.ttt = ISCSI_RSVD_TAG;
	}
	tgt_stamp(tc, &r, true);
	tgt_send(tc, &r, tc->text_rsp + tc->text_rsp_off, n);
	tc->text_rsp_off += n;
	if (tc->text_rsp_off == tc->text_rsp_len) {
		free(tc->text_rsp);
		tc->text_rsp = NULL;
		tc->text_rsp_len = tc->text_rsp_off = 0;
	}
}

void tgt_text(struct tgt_conn *tc, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen)
{
	const struct iscsi_text_req *q = &h->text_req;
	struct text_kv kv[64];
	struct text_out o;
	size_t n = 0;

	if (q->ttt != ISCSI_RSVD_TAG) {
		if (tc->text_rsp && q->ttt == tc->text_ttt && h->itt == tc->text_itt) {
			send_chunk(tc, h->itt, q->lun);
			return;
		}
		if (!(tc->text_req && q->ttt == tc->text_ttt)) {
			tgt_send_reject(tc, ISCSI_REJECT_INVALID_PDU_FIELD, tc->conn->rx_bhs);
			return;
		}
	} else {
		/* a new exchange resets any pending one */
		free(tc->text_rsp);
		tc->text_rsp = NULL;
		if (!q->cont || tc->text_req == NULL) {
			free(tc->text_req);
			tc->text_req = NULL;
			tc->text_req_len = 0;
		}
	}
	if (tc->text_req_len + dlen > TEXT_REQ_MAX) {
		iscsi_conn_close(tc->conn, "Text Request longer than 64 KiB");
		return;
	}
	char *nb = realloc(tc->text_req, tc->text_req_len + dlen + 1);
	if (!nb) {
		iscsi_conn_close(tc->conn, "out of memory for a Text Request");
		return;
	}
	tc->text_req = nb;
	memcpy(tc->text_req + tc->text_req_len, data, dlen);
	tc->text_req_len += dlen;
	if (q->cont) {
		/* RFC 7143 11.10.2: acknowledge with an empty response, F=0, and a TTT */
		struct iscsi_hdr r = {.opcode = ISCSI_OP_TEXT_RSP, .itt = h->itt};
		do {
			tc->text_ttt = ++tc->next_ttt;
		} while (tc->text_ttt == ISCSI_RSVD_TAG);
		r.text_rsp.ttt = tc->text_ttt;
		tgt_stamp(tc, &r, true);
		tgt_send(tc, &r, NULL, 0);
		return;
	}
	char *req = tc->text_req;
	uint32_t req_len = tc->text_req_len;
	tc->text_req = NULL;
	tc->text_req_len = 0;
	tc->text_rsp = malloc(TEXT_RSP_MAX);
	if (!tc->text_rsp) {
		free(req);
		iscsi_conn_close(tc->conn, "out of memory for a Text Response");
		return;
	}
	text_out_init(&o, tc->text_rsp, TEXT_RSP_MAX);
	if (text_parse(req, req_len, kv, 64, &n) < 0) {
		free(req);
		free(tc->text_rsp);
		tc->text_rsp = NULL;
		tgt_send_reject(tc, ISCSI_REJECT_PROTOCOL_ERROR, tc->conn->rx_bhs);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int r;
		if (strcmp(kv[i].key, "SendTargets") == 0)
			r = send_targets(tc, kv[i].value, &o);
		else if (neg_handles_key(kv[i].key) && strncmp(kv[i].key, "X-", 2) != 0 &&
			 strncmp(kv[i].key, "X#", 2) != 0)
			r = text_out_add(&o, kv[i].key, "Irrelevant");
		else
			r = text_out_add(&o, kv[i].key, "NotUnderstood");
		if (r < 0)
			break;
	}
	free(req);
	tc->text_rsp_len = (uint32_t)o.len;
	tc->text_rsp_off = 0;
	tc->text_itt = h->itt;
	if (tc->text_rsp_len == 0) {
		struct iscsi_hdr r = {.opcode = ISCSI_OP_TEXT_RSP, .final = true, .itt = h->itt};
		r.text_rsp.ttt = ISCSI_RSVD_TAG;
		free(tc->text_rsp);
		tc->text_rsp = NULL;
		tgt_stamp(tc, &r, true);
		tgt_send(tc, &r, NULL, 0);
		return;
	}
	send_chunk(tc, h->itt, q->lun);
}
