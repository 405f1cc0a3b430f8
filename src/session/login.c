#include "session/login.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

void login_acceptor_init(struct login_acceptor *la, const struct login_policy *policy)
{
	memset(la, 0, sizeof(*la));
	la->policy = *policy;
	text_accum_init(&la->accum, NULL, 0);
}

void login_acceptor_clear(struct login_acceptor *la)
{
	auth_clear(&la->auth);
	free(la->accum_buf);
	la->accum_buf = NULL;
	text_accum_init(&la->accum, NULL, 0);
}

/* Room for dlen more bytes of request text (and the spare byte text_accum keeps): 0, or
 * -ENOSPC past LOGIN_MAX_TEXT (text_accum_append then refuses it as before), -ENOMEM. */
static int accum_reserve(struct login_acceptor *la, uint32_t dlen)
{
	size_t need = la->accum.len + dlen + 1, cap = 1024;
	char *b;

	if (need <= la->accum.cap)
		return 0;
	if (need > LOGIN_MAX_TEXT)
		return -ENOSPC;
	while (cap < need)
		cap *= 2;
	b = realloc(la->accum_buf, cap);
	if (!b)
		return -ENOMEM;
	la->accum_buf = b;
	la->accum.buf = b;
	la->accum.cap = cap;
	return 0;
}

static bool is_declarative_login_key(const char *k)
{
	static const char *const keys[] = {"InitiatorName", "InitiatorAlias", "TargetName",
					   "TargetAlias",   "SessionType",    "TargetPortalGroupTag",
					   "TargetAddress"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(k, keys[i]) == 0)
			return true;
	return false;
}

static const char *kv_find(const struct text_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

/* First request of the connection: names, session type, admission. */
static uint16_t first_request(struct login_acceptor *la, const struct text_kv *kv, size_t n)
{
	const char *in = kv_find(kv, n, "InitiatorName");
	const char *tn = kv_find(kv, n, "TargetName");
	const char *st = kv_find(kv, n, "SessionType");
	const char *ia = kv_find(kv, n, "InitiatorAlias");
	int r;

	if (!in || !*in)
		return ix_fail(la, ISCSI_LOGIN_MISSING_PARAMETER, "no InitiatorName");
	if (strlen(in) >= ISCSI_NAME_MAX)
		return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "InitiatorName too long");
	snprintf(la->info.initiator_name, sizeof(la->info.initiator_name), "%s", in);
	if (ia)
		snprintf(la->info.initiator_alias, sizeof(la->info.initiator_alias), "%s", ia);
	la->info.type = ISCSI_SESSION_NORMAL;
	if (st) {
		if (strcmp(st, "Discovery") == 0)
			la->info.type = ISCSI_SESSION_DISCOVERY;
		else if (strcmp(st, "Normal") != 0)
			return ix_fail(la, ISCSI_LOGIN_UNSUPPORTED_SESSION_TYPE,
				       "unsupported SessionType");
	}
	if (la->info.type == ISCSI_SESSION_NORMAL) {
		if (!tn || !*tn)
			return ix_fail(la, ISCSI_LOGIN_MISSING_PARAMETER,
				       "normal session without TargetName");
		if (strlen(tn) >= ISCSI_NAME_MAX)
			return ix_fail(la, ISCSI_LOGIN_NOT_FOUND, "TargetName too long");
		snprintf(la->info.target_name, sizeof(la->info.target_name), "%s", tn);
	}
	r = la->policy.admit(la->policy.ctx, &la->info, &la->grant);
	if (r != 0)
		return ix_fail(la, (uint16_t)r, "not admitted");
	la->admitted = true;
	auth_init(&la->auth, ISCSI_ROLE_TARGET, &la->grant.creds);
	neg_init(&la->neg, ISCSI_ROLE_TARGET, la->grant.prefs, la->info.tsih == 0);
	neg_set_session_type(&la->neg, la->info.type);
	return 0;
}

/* Handle the keys of a complete request (all C=1 parts accumulated). */
static uint16_t handle_keys(struct login_acceptor *la, uint8_t csg, struct text_out *out,
			    bool *auth_done)
{
	struct text_kv kv[LOGIN_MAX_KEYS], sec[LOGIN_MAX_KEYS];
	size_t n = 0, nsec = 0;
	int r;

	r = text_parse(la->accum.buf, la->accum.len, kv, LOGIN_MAX_KEYS, &n);
	if (r < 0)
		return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "malformed login text");
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(kv[i].key, kv[j].key) == 0)
				return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "key %s sent twice",
					       kv[i].key);
	if (!la->first_seen) {
		uint16_t st = first_request(la, kv, n);
		la->first_seen = true;
		if ((st >> 8) == 1) {
			/* redirection: the new address goes in the response's text */
			if (!la->grant.redirect ||
			    text_out_add(out, "TargetAddress", la->grant.redirect) < 0)
				return ix_fail(la, ISCSI_LOGIN_TARGET_ERROR,
					       "redirection without a usable TargetAddress");
			snprintf(la->error, sizeof(la->error), "target moved %s to %s",
				 st == ISCSI_LOGIN_TARGET_MOVED_PERM ? "permanently" : "temporarily",
				 la->grant.redirect);
		}
		if (st)
			return st;
		if (la->info.type == ISCSI_SESSION_NORMAL)
			text_out_addf(out, "TargetPortalGroupTag", "%u", la->grant.tpgt);
		if (la->info.type == ISCSI_SESSION_NORMAL && la->grant.target_alias)
			text_out_add(out, "TargetAlias", la->grant.target_alias);
	} else {
		for (size_t i = 0; i < n; i++)
			if (strcmp(kv[i].key, "InitiatorName") == 0 ||
			    strcmp(kv[i].key, "TargetName") == 0 ||
			    strcmp(kv[i].key, "SessionType") == 0) {
				/* may be repeated only with the same value */
				const char *cur = kv[i].key[0] == 'I'	 ? la->info.initiator_name
						  : kv[i].key[0] == 'T' ? la->info.target_name
						  : (la->info.type == ISCSI_SESSION_DISCOVERY
							     ? "Discovery"
							     : "Normal");
				if (strcmp(cur, kv[i].value) != 0)
					return ix_fail(la, ISCSI_LOGIN_INIT_ERR,
						       "%s changed during login", kv[i].key);
			}
	}
	/* RFC 7143 6.3: with authentication required, the operational stage may only be reached
	   through the security stage. */
	if (csg != ISCSI_STAGE_SECURITY && !auth_may_transit(&la->auth))
		return ix_fail(
		    la, ISCSI_LOGIN_AUTH_FAILED,
		    "authentication required but the initiator skipped the security stage");
	for (size_t i = 0; i < n; i++) {
		const char *k = kv[i].key;
		if (auth_is_security_key(k)) {
			if (csg != ISCSI_STAGE_SECURITY)
				return ix_fail(la, ISCSI_LOGIN_INIT_ERR,
					       "security key %s outside the security stage", k);
			sec[nsec++] = kv[i];
		} else if (is_declarative_login_key(k)) {
			if (strcmp(k, "TargetPortalGroupTag") == 0 ||
			    strcmp(k, "TargetAddress") == 0 || strcmp(k, "TargetAlias") == 0)
				return ix_fail(la, ISCSI_LOGIN_INIT_ERR,
					       "initiator sent target-only key %s", k);
		} else {
			r = neg_recv(&la->neg, csg, k, kv[i].value, out);
			if (r == -ENOSPC)
				return ix_fail(la, ISCSI_LOGIN_TARGET_ERROR, "response too long");
			if (r < 0)
				return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "negotiation: %s",
					       la->neg.error);
		}
	}
	*auth_done = auth_may_transit(&la->auth);
	if (csg == ISCSI_STAGE_SECURITY && (nsec > 0 || !*auth_done)) {
		r = auth_recv(&la->auth, sec, nsec, out);
		if (r < 0) {
			snprintf(la->error, sizeof(la->error), "authentication: %s",
				 la->auth.error);
			return la->auth.fail_status ? la->auth.fail_status
						    : ISCSI_LOGIN_AUTH_FAILED;
		}
		*auth_done = auth_may_transit(&la->auth);
	}
	return 0;
}

/* The request's version, stage fields and, after the first PDU, the fields that must not
 * change during a login. 0, or a login status (la->error says why). */
static uint16_t step_check(struct login_acceptor *la, const struct iscsi_login_req *rq)
{
	if (la->complete)
		return ix_fail(la, ISCSI_LOGIN_INVALID_REQUEST_DURING_LOGIN,
			    "login request after login completed");
	if (rq->version_min > 0 || rq->version_max < rq->version_min)
		return ix_fail(la, ISCSI_LOGIN_UNSUPPORTED_VERSION, "unsupported version range");
	if (rq->csg == 2 || rq->csg == 3 || (rq->transit && (rq->nsg == 2 || rq->nsg <= rq->csg)) ||
	    (rq->transit && rq->cont))
		return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "invalid stage transition");
	if (!la->first_seen && la->accum.len == 0) {
		memcpy(la->info.isid, rq->isid, 6);
		la->info.tsih = rq->tsih;
		la->info.cid = rq->cid;
		la->info.cmdsn = rq->cmdsn;
		la->stage = rq->csg;
		return 0;
	}
	if (memcmp(la->info.isid, rq->isid, 6) != 0 || la->info.tsih != rq->tsih ||
	    la->info.cid != rq->cid || la->info.cmdsn != rq->cmdsn)
		return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "ISID/TSIH/CID/CmdSN changed during login");
	if (rq->csg != la->stage)
		return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "CSG does not match the current stage");
	return 0;
}

/* T=1 asked: may the login move to rq->nsg now? Sets *ok; 0 or a login status. */
static uint16_t step_transit(struct login_acceptor *la, const struct iscsi_login_req *rq,
			     bool auth_done, struct text_out *out, bool *ok)
{
	*ok = true;
	if (rq->csg == ISCSI_STAGE_SECURITY && !auth_done) {
		if (!la->auth.method_chap)
			return ix_fail(la, ISCSI_LOGIN_AUTH_FAILED, "authentication required");
		*ok = false; /* initiator wants to leave mid-exchange: hold it in stage 0 */
	}
	if (*ok && rq->nsg == ISCSI_STAGE_FULL_FEATURE && la->proposed && !neg_settled(&la->neg))
		*ok = false; /* our proposals need answers first */
	if (*ok && rq->nsg == ISCSI_STAGE_FULL_FEATURE && !la->proposed) {
		/* jumping straight to FFP: declare our keys now; the initiator needs no answer for
		   declarations, but our other proposals would need one */
		if (neg_propose(&la->neg, out) < 0)
			return ix_fail(la, ISCSI_LOGIN_TARGET_ERROR, "response too long");
		la->proposed = true;
		if (!neg_settled(&la->neg))
			*ok = false;
	}
	return 0;
}

/* Move to the next stage (T=1 granted); entering full feature phase ends the login. */
static uint16_t step_advance(struct login_acceptor *la, const struct iscsi_login_req *rq,
			     struct login_step *step)
{
	step->transit = true;
	step->nsg = rq->nsg;
	la->stage = rq->nsg;
	if (rq->nsg != ISCSI_STAGE_FULL_FEATURE)
		return 0;
	if (neg_finish(&la->neg) < 0)
		return ix_fail(la, ISCSI_LOGIN_INIT_ERR, "negotiation: %s", la->neg.error);
	step->final = true;
	la->complete = true;
	return 0;
}

void login_acceptor_step(struct login_acceptor *la, const struct iscsi_hdr *h, uint8_t *data,
			 uint32_t dlen, struct login_step *step)
{
	const struct iscsi_login_req *rq = &h->login_req;
	struct text_out out;
	bool auth_done = false, ok;

	memset(step, 0, sizeof(*step));
	step->csg = rq->csg;
	step->nsg = rq->nsg;
	if ((step->status = step_check(la, rq)) != 0)
		return;
	if (accum_reserve(la, dlen) == -ENOMEM) {
		step->status = ix_fail(la, ISCSI_LOGIN_OUT_OF_RESOURCES, "out of memory");
		return;
	}
	if (text_accum_append(&la->accum, data, dlen) < 0) {
		step->status = ix_fail(la, ISCSI_LOGIN_OUT_OF_RESOURCES, "login text too long");
		return;
	}
	if (rq->cont) {
		/* more text follows: acknowledge with an empty response, same stage, T=0 */
		step->csg = la->stage;
		step->nsg = 0;
		return;
	}
	text_out_init(&out, la->out_buf, sizeof(la->out_buf));
	step->status = handle_keys(la, rq->csg, &out, &auth_done);
	text_accum_reset(&la->accum);
	if ((step->status >> 8) == 1) {
		step->text = la->out_buf;
		step->text_len = (uint32_t)out.len;
	}
	if (step->status)
		return;
	step->csg = rq->csg;
	/* The target declares/proposes its operational keys once, in the first response that
	   belongs to the operational stage. */
	if (rq->csg == ISCSI_STAGE_OPERATIONAL && !la->proposed) {
		if (neg_propose(&la->neg, &out) < 0) {
			step->status = ix_fail(la, ISCSI_LOGIN_TARGET_ERROR, "response too long");
			return;
		}
		la->proposed = true;
	}
	if (rq->transit) {
		if ((step->status = step_transit(la, rq, auth_done, &out, &ok)) != 0)
			return;
		if (!ok)
			step->nsg = 0;
		else if ((step->status = step_advance(la, rq, step)) != 0)
			return;
	}
	step->text = la->out_buf;
	step->text_len = (uint32_t)out.len;
}
