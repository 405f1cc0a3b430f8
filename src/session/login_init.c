#include "session/login_init.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

const char *login_status_str(uint16_t status)
{
	switch (status) {
	case ISCSI_LOGIN_OK: return "success";
	case ISCSI_LOGIN_TARGET_MOVED_TEMP: return "target moved temporarily";
	case ISCSI_LOGIN_TARGET_MOVED_PERM: return "target moved permanently";
	case ISCSI_LOGIN_INIT_ERR: return "initiator error";
	case ISCSI_LOGIN_AUTH_FAILED: return "authentication failure";
	case ISCSI_LOGIN_AUTHORIZATION_FAILED: return "authorization failure";
	case ISCSI_LOGIN_NOT_FOUND: return "target not found";
	case ISCSI_LOGIN_TARGET_REMOVED: return "target removed";
	case ISCSI_LOGIN_UNSUPPORTED_VERSION: return "unsupported version";
	case ISCSI_LOGIN_TOO_MANY_CONNECTIONS: return "too many connections";
	case ISCSI_LOGIN_MISSING_PARAMETER: return "missing parameter";
	case ISCSI_LOGIN_CANT_INCLUDE_IN_SESSION: return "cannot include in session";
	case ISCSI_LOGIN_UNSUPPORTED_SESSION_TYPE: return "session type not supported";
	case ISCSI_LOGIN_SESSION_DOES_NOT_EXIST: return "session does not exist";
	case ISCSI_LOGIN_INVALID_REQUEST_DURING_LOGIN: return "invalid request during login";
	case ISCSI_LOGIN_TARGET_ERROR: return "target error";
	case ISCSI_LOGIN_SERVICE_UNAVAILABLE: return "service unavailable";
	case ISCSI_LOGIN_OUT_OF_RESOURCES: return "out of resources";
	default: return "unknown status";
	}
}

int login_initiator_init(struct login_initiator *li, const struct login_init_cfg *cfg)
{
	memset(li, 0, sizeof(*li));
	if (!cfg->initiator_name || !*cfg->initiator_name ||
	    strlen(cfg->initiator_name) >= ISCSI_NAME_MAX)
		return ix_fail(li, -EINVAL, "no usable InitiatorName");
	if (cfg->type == ISCSI_SESSION_NORMAL &&
	    (!cfg->target_name || !*cfg->target_name || strlen(cfg->target_name) >= ISCSI_NAME_MAX))
		return ix_fail(li, -EINVAL, "a normal session needs a TargetName");
	if (!cfg->prefs)
		return ix_fail(li, -EINVAL, "no negotiation preferences");
	li->cfg = *cfg;
	li->expstatsn = cfg->expstatsn;
	li->stage = ISCSI_STAGE_SECURITY;
	text_accum_init(&li->accum, li->accum_buf, sizeof(li->accum_buf));
	auth_init(&li->auth, ISCSI_ROLE_INITIATOR, cfg->creds);
	neg_init(&li->neg, ISCSI_ROLE_INITIATOR, cfg->prefs, cfg->tsih == 0);
	neg_set_session_type(&li->neg, cfg->type);
	return 0;
}

void login_initiator_clear(struct login_initiator *li)
{
	auth_clear(&li->auth);
	explicit_bzero(li->out_buf, sizeof(li->out_buf));
}

/* Only AuthMethod=None offered: no exchange to wait for. */
static bool offered_none_only(const struct login_initiator *li)
{
	const struct auth_creds *c = li->cfg.creds;

	return !c || !c->secret || c->secret_len == 0 || !c->user;
}

static bool may_leave_security(const struct login_initiator *li)
{
	if (auth_may_transit(&li->auth))
		return true;
	return offered_none_only(li) && !li->auth.method_chap;
}

static int first_text(struct login_initiator *li, struct text_out *out)
{
	const struct login_init_cfg *c = &li->cfg;
	int r = 0;

	r |= text_out_add(out, "InitiatorName", c->initiator_name);
	if (c->initiator_alias && *c->initiator_alias)
		r |= text_out_add(out, "InitiatorAlias", c->initiator_alias);
	if (c->type == ISCSI_SESSION_DISCOVERY) {
		r |= text_out_add(out, "SessionType", "Discovery");
	} else {
		r |= text_out_add(out, "SessionType", "Normal");
		r |= text_out_add(out, "TargetName", c->target_name);
	}
	if (r)
		return ix_fail(li, -ENOSPC, "login names do not fit");
	r = auth_start(&li->auth, out);
	if (r)
		return ix_fail(li, r, "authentication: %s", li->auth.error);
	li->auth_started = true;
	return 0;
}

int login_initiator_next(struct login_initiator *li, struct login_init_req *req)
{
	struct iscsi_login_req *rq = &req->hdr.login_req;
	uint32_t chunk;
	bool more;

	if (li->done)
		return ix_fail(li, -EINVAL, "login already complete");
	if (!li->started) {
		struct text_out out;
		int r;

		text_out_init(&out, li->out_buf, sizeof(li->out_buf));
		r = first_text(li, &out);
		if (r)
			return r;
		li->out_len = (uint32_t)out.len;
		li->out_off = 0;
		li->started = true;
	}
	memset(req, 0, sizeof(*req));
	req->hdr.opcode = ISCSI_OP_LOGIN_REQ;
	req->hdr.immediate = true;
	memcpy(rq->isid, li->cfg.isid, 6);
	rq->tsih = li->cfg.tsih;
	rq->cid = li->cfg.cid;
	rq->cmdsn = li->cfg.cmdsn;
	rq->expstatsn = li->expstatsn;
	rq->csg = li->stage;
	rq->version_max = 0;
	rq->version_min = 0;
	if (li->await_rest) {
		/* the target has more text for us: an empty request asks for it */
		li->transit_asked = false;
		return 0;
	}
	chunk = li->out_len - li->out_off;
	more = chunk > LOGIN_INIT_PDU_TEXT;
	if (more)
		chunk = LOGIN_INIT_PDU_TEXT;
	req->text = li->out_buf + li->out_off;
	req->text_len = chunk;
	req->hdr.dlength = chunk;
	li->out_off += chunk;
	rq->cont = more;
	if (!more) {
		if (li->stage == ISCSI_STAGE_SECURITY &&
		    (may_leave_security(li) || auth_awaiting_target_proof(&li->auth))) {
			rq->transit = true;
			rq->nsg = ISCSI_STAGE_OPERATIONAL;
		} else if (li->stage == ISCSI_STAGE_OPERATIONAL) {
			rq->transit = true;
			rq->nsg = ISCSI_STAGE_FULL_FEATURE;
		}
	}
	li->transit_asked = rq->transit;
	li->asked_nsg = rq->nsg;
	return 0;
}

static int map_status(struct login_initiator *li, uint16_t st, char *data, uint32_t dlen)
{
	li->status = st;
	if ((st >> 8) == 1) {
		struct text_kv kv[LOGIN_MAX_KEYS];
		size_t n = 0;

		li->redirect[0] = 0;
		/* parsed in the accumulator, which keeps the spare byte text_parse() may write
		   when the last pair has no NUL (data itself may end exactly at its buffer) */
		text_accum_reset(&li->accum);
		if (dlen && text_accum_append(&li->accum, data, dlen) == 0 &&
		    text_parse(li->accum.buf, li->accum.len, kv, LOGIN_MAX_KEYS, &n) == 0)
			for (size_t i = 0; i < n; i++)
				if (strcmp(kv[i].key, "TargetAddress") == 0)
					snprintf(li->redirect, sizeof(li->redirect), "%s",
						 kv[i].value);
		if (!li->redirect[0])
			return ix_fail(li, -EPROTO, "redirection (0x%04x) without TargetAddress",
				       st);
		return ix_fail(li, -EXDEV, "%s to %s", login_status_str(st), li->redirect);
	}
	switch (st) {
	case ISCSI_LOGIN_AUTH_FAILED:
	case ISCSI_LOGIN_AUTHORIZATION_FAILED:
		return ix_fail(li, -EACCES, "login refused: %s (0x%04x)", login_status_str(st), st);
	case ISCSI_LOGIN_NOT_FOUND:
	case ISCSI_LOGIN_TARGET_REMOVED:
		return ix_fail(li, -ENOENT, "login refused: %s (0x%04x)", login_status_str(st), st);
	default:
		break;
	}
	if ((st >> 8) == 3)
		return ix_fail(li, -EAGAIN, "login refused: %s (0x%04x)", login_status_str(st), st);
	return ix_fail(li, -EPROTO, "login refused: %s (0x%04x)", login_status_str(st), st);
}

/* The keys of one complete response. Replies go into out. */
static int handle_keys(struct login_initiator *li, struct text_out *out)
{
	struct text_kv kv[LOGIN_MAX_KEYS], sec[LOGIN_MAX_KEYS];
	size_t n = 0, nsec = 0;
	int r;

	if (text_parse(li->accum.buf, li->accum.len, kv, LOGIN_MAX_KEYS, &n) < 0)
		return ix_fail(li, -EPROTO, "malformed login response text");
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(kv[i].key, kv[j].key) == 0)
				return ix_fail(li, -EPROTO, "target sent key %s twice", kv[i].key);
	for (size_t i = 0; i < n; i++) {
		const char *k = kv[i].key, *v = kv[i].value;

		if (auth_is_security_key(k)) {
			if (li->stage != ISCSI_STAGE_SECURITY)
				return ix_fail(li, -EPROTO,
					       "security key %s outside the security stage", k);
			sec[nsec++] = kv[i];
		} else if (strcmp(k, "TargetAlias") == 0) {
			snprintf(li->target_alias, sizeof(li->target_alias), "%s", v);
		} else if (strcmp(k, "TargetPortalGroupTag") == 0) {
			uint64_t t;

			if (text_parse_num(v, 0, 65535, &t) < 0)
				return ix_fail(li, -EPROTO, "bad TargetPortalGroupTag");
			li->tpgt = (uint16_t)t;
		} else if (strcmp(k, "TargetAddress") == 0) {
			/* only meaningful with a redirection status */
		} else if (strcmp(k, "InitiatorName") == 0 || strcmp(k, "InitiatorAlias") == 0 ||
			   strcmp(k, "TargetName") == 0 || strcmp(k, "SessionType") == 0) {
			return ix_fail(li, -EPROTO, "target sent initiator key %s", k);
		} else {
			r = neg_recv(&li->neg, li->stage, k, v, out);
			if (r == -ENOSPC)
				return ix_fail(li, -ENOSPC, "our answers do not fit");
			if (r < 0)
				return ix_fail(li, -EPROTO, "negotiation: %s", li->neg.error);
		}
	}
	if (li->stage == ISCSI_STAGE_SECURITY && !li->auth.done) {
		r = auth_recv(&li->auth, sec, nsec, out);
		if (r < 0) {
			li->status = li->auth.fail_status;
			return ix_fail(li, r == -EACCES ? -EACCES : -EPROTO, "authentication: %s",
				       li->auth.error);
		}
	}
	return 0;
}

int login_initiator_recv(struct login_initiator *li, const struct iscsi_hdr *h, uint8_t *data,
			 uint32_t dlen)
{
	const struct iscsi_login_rsp *rs = &h->login_rsp;
	struct text_out out;
	int r;

	if (li->done)
		return ix_fail(li, -EPROTO, "login response after login completed");
	if (!li->started)
		return ix_fail(li, -EPROTO, "login response before any request");
	if (h->opcode != ISCSI_OP_LOGIN_RSP)
		return ix_fail(li, -EPROTO, "opcode 0x%02x during login", h->opcode);
	/* a failure status is believed whatever the ISID says: some targets (tgt) zero the
	   header of a failed login response */
	if (rs->status != ISCSI_LOGIN_OK)
		return map_status(li, rs->status, (char *)data, dlen);
	if (memcmp(rs->isid, li->cfg.isid, 6) != 0)
		return ix_fail(li, -EPROTO, "login response for another ISID");
	if (rs->version_active != 0)
		return ix_fail(li, -EPROTO, "unsupported active version %u", rs->version_active);
	li->expstatsn = rs->statsn + 1;
	if (rs->csg != li->stage)
		return ix_fail(li, -EPROTO, "response CSG %u in stage %u", rs->csg, li->stage);
	if (rs->cont && rs->transit)
		return ix_fail(li, -EPROTO, "login response with both C and T set");
	if (text_accum_append(&li->accum, data, dlen) < 0)
		return ix_fail(li, -EPROTO, "login response text too long");
	if (rs->cont) {
		li->await_rest = true;
		return LOGIN_INIT_CONTINUE;
	}
	li->await_rest = false;
	if (li->out_off < li->out_len) {
		/* the target acknowledged one piece of our C=1 text */
		if (li->accum.len || rs->transit)
			return ix_fail(li, -EPROTO, "target answered before our text was complete");
		return LOGIN_INIT_CONTINUE;
	}
	if (rs->transit) {
		if (!li->transit_asked)
			return ix_fail(li, -EPROTO, "target transited without our T bit");
		if (rs->nsg <= li->stage || rs->nsg == 2 || rs->nsg > li->asked_nsg)
			return ix_fail(li, -EPROTO, "invalid NSG %u from stage %u", rs->nsg,
				       li->stage);
	}

	text_out_init(&out, li->out_buf, sizeof(li->out_buf));
	r = handle_keys(li, &out);
	text_accum_reset(&li->accum);
	if (r)
		return r;
	li->out_len = (uint32_t)out.len;
	li->out_off = 0;

	if (rs->transit) {
		if (li->stage == ISCSI_STAGE_SECURITY && !may_leave_security(li))
			return ix_fail(
			    li, -EACCES,
			    "target left the security stage before authentication finished");
		li->stage = rs->nsg;
		if (li->stage == ISCSI_STAGE_FULL_FEATURE) {
			if (neg_finish(&li->neg) < 0)
				return ix_fail(li, -EPROTO, "negotiation: %s", li->neg.error);
			if (out.len)
				return ix_fail(li, -EPROTO,
					       "target proposed keys in its final login response");
			if (rs->tsih == 0)
				return ix_fail(li, -EPROTO, "final login response without a TSIH");
			if (li->cfg.tsih && rs->tsih != li->cfg.tsih)
				return ix_fail(li, -EPROTO, "TSIH changed during login");
			li->tsih = rs->tsih;
			li->done = true;
			return LOGIN_INIT_DONE;
		}
	}
	if (li->stage == ISCSI_STAGE_OPERATIONAL && !li->proposed) {
		struct text_out more;

		text_out_init(&more, li->out_buf + li->out_len, sizeof(li->out_buf) - li->out_len);
		if (neg_propose(&li->neg, &more) < 0)
			return ix_fail(li, -ENOSPC, "our proposals do not fit");
		li->out_len += (uint32_t)more.len;
		li->proposed = true;
	}
	return LOGIN_INIT_CONTINUE;
}
