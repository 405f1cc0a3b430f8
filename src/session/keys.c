/* Operational key negotiation (RFC 7143 sections 6.2 and 13; iSER keys RFC 7145 section 6).
 *
 * One table describes every key: its RFC type and result function, range, default, scope, and
 * how this implementation answers it. The same code serves the initiator and the target, as
 * proposer and as acceptor: a key we sent as proposer (bit in ->proposed) makes the peer's value
 * an answer to check; any other key from the peer is a proposal we answer at once.
 *
 * Deliberate choices (see also keys.h):
 *  - Operational keys in the security stage fail the login: RFC 7143 section 12 lists the keys
 *    allowed in SecurityNegotiation and says other keys MUST NOT be used there (LIO also fails
 *    the login). Unknown and X- keys are answered NotUnderstood in any stage.
 *  - In a discovery session the keys open-iscsi treats as irrelevant there (MaxConnections,
 *    InitialR2T, ImmediateData, MaxBurstLength, FirstBurstLength, MaxOutstandingR2T,
 *    DataPDUInOrder, DataSequenceInOrder) and RDMAExtensions are answered Irrelevant; the
 *    others are negotiated normally, ErrorRecoveryLevel capped at 0 (RFC 7143 13.21).
 *  - Obsolete markers (RFC 7143 13.25): IFMarker/OFMarker answered No, IFMarkInt/OFMarkInt
 *    Reject; never NotUnderstood.
 *  - iSER (RFC 7145 section 6): on an RDMA connection (prefs->rdma) RDMAExtensions (AND),
 *    TargetRecvDataSegmentLength and InitiatorRecvDataSegmentLength (Minimum) are negotiated
 *    and MaxRecvDataSegmentLength is not declared; the other iSER keys (Hello, MaxAHSLength,
 *    TaggedBufferForSolicitedDataOnly, MaxOutstandingUnexpectedPDUs) are answered Irrelevant.
 *    On a TCP connection RDMAExtensions is answered No and the other iSER keys Irrelevant.
 *  - iSCSIProtocolLevel and TaskReporting are newer than RFC 3720: never offered at their
 *    defaults, and a NotUnderstood answer from an older peer keeps the default.
 *  - A Reject or Irrelevant answer to our proposal keeps the RFC default; policy that cannot
 *    live with that (a required CRC32C digest) is checked in neg_finish().
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/pdu.h"
#include "session/auth.h"
#include "session/keys.h"

enum key_id {
	K_HEADER_DIGEST,
	K_DATA_DIGEST,
	K_MAX_CONNECTIONS,
	K_INITIAL_R2T,
	K_IMMEDIATE_DATA,
	K_MAX_RECV_DSL,
	K_MAX_BURST,
	K_FIRST_BURST,
	K_TIME2WAIT,
	K_TIME2RETAIN,
	K_MAX_R2T,
	K_DATA_PDU_IN_ORDER,
	K_DATA_SEQ_IN_ORDER,
	K_ERL,
	K_PROTOCOL_LEVEL,
	K_TASK_REPORTING,
	K_IFMARKER,
	K_OFMARKER,
	K_IFMARKINT,
	K_OFMARKINT,
	K_RDMA_EXTENSIONS,
	K_TARGET_RDSL,
	K_INITIATOR_RDSL,
	K_MAX_UNEXPECTED_PDUS,
	K_ISER_HELLO_REQUIRED,
	K_MAX_AHS_LENGTH,
	K_TAGGED_BUFFER_SOLICITED,
	K_COUNT
};

_Static_assert(K_COUNT <= 64, "the neg_state key bitmaps hold 64 keys");

/* The RFC type, which fixes the result function. */
enum key_type {
	KT_LIST, /* acceptor answers the first value of the proposer's list it supports */
	KT_MIN,	 /* numeric, result Minimum: acceptor answers <= the offer */
	KT_MAX,	 /* numeric, result Maximum: acceptor answers >= the offer */
	KT_AND,	 /* Boolean AND: reply optional when offered No */
	KT_OR,	 /* Boolean OR: reply optional when offered Yes */
	KT_DECL, /* declarative number: each side states its own value */
};

/* How this implementation answers a proposal of the key. */
enum key_support {
	KS_NEGOTIATE,  /* per type and prefs */
	KS_ANSWER_NO,  /* Boolean never enabled here: a well-formed offer is answered No */
	KS_REJECT,     /* obsolete: always Reject */
	KS_IRRELEVANT, /* iSER key that only applies with RDMAExtensions=Yes */
};

#define KF_LO	    0x01u /* Use LO: leading connection only (Irrelevant elsewhere) */
#define KF_IO	    0x02u /* Use IO or LO: login only; without it Use ALL (Text too) */
#define KF_SW	    0x04u /* session-wide scope; without it connection scope */
#define KF_DISC_IRR 0x08u /* answered Irrelevant in a discovery session */
#define KF_NEW	    0x10u /* newer than RFC 3720: tolerate NotUnderstood, offer only if set */

struct key_def {
	const char *name;
	uint8_t type;	    /* enum key_type: the result function */
	uint8_t support;    /* enum key_support */
	uint8_t flags;	    /* KF_* use and scope */
	uint32_t min, max;  /* numeric range (inclusive) */
	uint32_t def;	    /* RFC default: number, Boolean 0/1, or index into values */
	const char *values; /* list keys: the values the RFC defines, default first */
};

#define LO_SW	(KF_LO | KF_IO | KF_SW)
#define DSL_MAX 16777215u /* 2^24 - 1 */

static const struct key_def keys[K_COUNT] = {
    /* RFC 7143 section 13 */
    [K_HEADER_DIGEST] = {"HeaderDigest", KT_LIST, KS_NEGOTIATE, KF_IO, 0, 0, 0, "None,CRC32C"},
    [K_DATA_DIGEST] = {"DataDigest", KT_LIST, KS_NEGOTIATE, KF_IO, 0, 0, 0, "None,CRC32C"},
    [K_MAX_CONNECTIONS] = {"MaxConnections", KT_MIN, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 1, 65535, 1,
			   NULL},
    [K_INITIAL_R2T] = {"InitialR2T", KT_OR, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 0, 1, 1, NULL},
    [K_IMMEDIATE_DATA] = {"ImmediateData", KT_AND, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 0, 1, 1,
			  NULL},
    [K_MAX_RECV_DSL] = {"MaxRecvDataSegmentLength", KT_DECL, KS_NEGOTIATE, 0, 512, DSL_MAX, 8192,
			NULL},
    [K_MAX_BURST] = {"MaxBurstLength", KT_MIN, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 512, DSL_MAX,
		     262144, NULL},
    [K_FIRST_BURST] = {"FirstBurstLength", KT_MIN, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 512, DSL_MAX,
		       65536, NULL},
    [K_TIME2WAIT] = {"DefaultTime2Wait", KT_MAX, KS_NEGOTIATE, LO_SW, 0, 3600, 2, NULL},
    [K_TIME2RETAIN] = {"DefaultTime2Retain", KT_MIN, KS_NEGOTIATE, LO_SW, 0, 3600, 20, NULL},
    [K_MAX_R2T] = {"MaxOutstandingR2T", KT_MIN, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 1, 65535, 1,
		   NULL},
    [K_DATA_PDU_IN_ORDER] = {"DataPDUInOrder", KT_OR, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 0, 1, 1,
			     NULL},
    [K_DATA_SEQ_IN_ORDER] = {"DataSequenceInOrder", KT_OR, KS_NEGOTIATE, LO_SW | KF_DISC_IRR, 0, 1,
			     1, NULL},
    [K_ERL] = {"ErrorRecoveryLevel", KT_MIN, KS_NEGOTIATE, LO_SW, 0, 2, 0, NULL},
    [K_PROTOCOL_LEVEL] = {"iSCSIProtocolLevel", KT_MIN, KS_NEGOTIATE, LO_SW | KF_NEW, 0, 31, 1,
			  NULL},
    [K_TASK_REPORTING] = {"TaskReporting", KT_LIST, KS_NEGOTIATE, LO_SW | KF_NEW, 0, 0, 0,
			  "RFC3720,ResponseFence,FastAbort"},
    /* Obsolete markers (RFC 7143 13.25; RFC 3720 A.3.1-A.3.2) */
    [K_IFMARKER] = {"IFMarker", KT_AND, KS_ANSWER_NO, KF_IO, 0, 1, 0, NULL},
    [K_OFMARKER] = {"OFMarker", KT_AND, KS_ANSWER_NO, KF_IO, 0, 1, 0, NULL},
    [K_IFMARKINT] = {"IFMarkInt", KT_MIN, KS_REJECT, KF_IO, 1, 65535, 2048, NULL},
    [K_OFMARKINT] = {"OFMarkInt", KT_MIN, KS_REJECT, KF_IO, 1, 65535, 2048, NULL},
    /* iSER (RFC 7145 section 6): not negotiated yet, see the file comment */
    [K_RDMA_EXTENSIONS] = {"RDMAExtensions", KT_AND, KS_ANSWER_NO, LO_SW | KF_DISC_IRR, 0, 1, 0,
			   NULL},
    [K_TARGET_RDSL] = {"TargetRecvDataSegmentLength", KT_MIN, KS_IRRELEVANT, KF_IO, 512, DSL_MAX,
		       8192, NULL},
    [K_INITIATOR_RDSL] = {"InitiatorRecvDataSegmentLength", KT_MIN, KS_IRRELEVANT, KF_IO, 512,
			  DSL_MAX, 8192, NULL},
    [K_MAX_UNEXPECTED_PDUS] = {"MaxOutstandingUnexpectedPDUs", KT_MIN, KS_IRRELEVANT, LO_SW, 0,
			       UINT32_MAX, 0, NULL},
    [K_ISER_HELLO_REQUIRED] = {"iSERHelloRequired", KT_OR, KS_IRRELEVANT, LO_SW, 0, 1, 0, NULL},
    [K_MAX_AHS_LENGTH] = {"MaxAHSLength", KT_MIN, KS_IRRELEVANT, LO_SW, 2, 65535, 256, NULL},
    [K_TAGGED_BUFFER_SOLICITED] = {"TaggedBufferForSolicitedDataOnly", KT_OR, KS_IRRELEVANT, LO_SW,
				   0, 1, 0, NULL},
};

/* How this connection answers key id: the iSER keys depend on the transport. */
static uint8_t key_support(const struct neg_state *st, int id)
{
	if (st->prefs->rdma &&
	    (id == K_RDMA_EXTENSIONS || id == K_TARGET_RDSL || id == K_INITIATOR_RDSL))
		return KS_NEGOTIATE;
	return keys[id].support;
}

/* Keys owned by the login code (declarative login keys, SendTargets); security keys belong to
 * session/auth. Everything else, known or not, is negotiated (or refused) here. */
static const char *const login_keys[] = {
    "InitiatorName", "TargetName",	     "SessionType",   "InitiatorAlias",
    "TargetAlias",   "TargetPortalGroupTag", "TargetAddress", "SendTargets",
};

static const struct neg_prefs default_prefs = {
    .sess =
	{
	    .max_connections = 1,
	    .initial_r2t = true,
	    .immediate_data = true,
	    .max_burst_length = 262144,
	    .first_burst_length = 65536,
	    .default_time2wait = 2,
	    .default_time2retain = 20,
	    .max_outstanding_r2t = 1,
	    .data_pdu_in_order = true,
	    .data_sequence_in_order = true,
	    .error_recovery_level = 0,
	    .protocol_level = 1,
	},
    .header_digest = NEG_DIGEST_NONE_ONLY,
    .data_digest = NEG_DIGEST_NONE_ONLY,
    .max_recv_dsl = 8192,
    .offer_all = false,
};

void neg_sess_params_default(struct iscsi_sess_params *s)
{
	*s = default_prefs.sess;
}

void neg_prefs_default(struct neg_prefs *p)
{
	*p = default_prefs;
}

void neg_init(struct neg_state *st, enum iscsi_role role, const struct neg_prefs *prefs,
	      bool leading)
{
	memset(st, 0, sizeof(*st));
	st->role = role;
	st->type = ISCSI_SESSION_NORMAL;
	st->leading = leading;
	st->prefs = prefs ? prefs : &default_prefs;
	neg_sess_params_default(&st->sess);
	st->conn.header_digest = false;
	st->conn.data_digest = false;
	st->conn.max_recv_dsl = keys[K_MAX_RECV_DSL].def;
	st->conn.max_xmit_dsl = keys[K_MAX_RECV_DSL].def;
	st->conn.target_rdsl = keys[K_TARGET_RDSL].def;
	st->conn.initiator_rdsl = keys[K_INITIATOR_RDSL].def;
}

void neg_set_session_type(struct neg_state *st, enum iscsi_session_type type)
{
	st->type = type;
	if (type == ISCSI_SESSION_DISCOVERY) {
		/* RFC 7143 13.21: Discovery implies MaxConnections=1 and requires ERL 0. */
		st->sess.max_connections = 1;
		st->sess.error_recovery_level = 0;
	}
}

static int key_lookup(const char *key)
{
	for (int i = 0; i < K_COUNT; i++) {
		if (strcmp(keys[i].name, key) == 0)
			return i;
	}
	return -1;
}

bool neg_handles_key(const char *key)
{
	if (!key || !*key || auth_is_security_key(key))
		return false;
	for (size_t i = 0; i < sizeof(login_keys) / sizeof(login_keys[0]); i++) {
		if (strcmp(key, login_keys[i]) == 0)
			return false;
	}
	return true;
}

__attribute__((format(printf, 2, 3))) static int fail(struct neg_state *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->error, sizeof(st->error), fmt, ap);
	va_end(ap);
	return -EPROTO;
}

static bool is_special(const char *v)
{
	return strcmp(v, "Reject") == 0 || strcmp(v, "Irrelevant") == 0 ||
	       strcmp(v, "NotUnderstood") == 0;
}

static uint32_t clamp(uint64_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

static const char *digest_list(enum neg_digest_pref p)
{
	switch (p) {
	case NEG_DIGEST_PREFER_NONE:
		return "None,CRC32C";
	case NEG_DIGEST_PREFER_CRC:
		return "CRC32C,None";
	case NEG_DIGEST_CRC_ONLY:
		return "CRC32C";
	case NEG_DIGEST_NONE_ONLY:
	default:
		return "None";
	}
}

/* List keys: what we offer as proposer, and the set we accept as acceptor. */
static const char *our_list(const struct neg_state *st, int id)
{
	switch (id) {
	case K_HEADER_DIGEST:
		return digest_list(st->prefs->header_digest);
	case K_DATA_DIGEST:
		return digest_list(st->prefs->data_digest);
	default:
		return "RFC3720"; /* TaskReporting: no ResponseFence or FastAbort yet */
	}
}

/* Index of item in a comma-separated list, or -1. */
static int list_index(const char *list, const char *item)
{
	size_t ilen = strlen(item);
	int idx = 0;

	for (const char *p = list;; idx++) {
		const char *comma = strchr(p, ',');
		size_t seg = comma ? (size_t)(comma - p) : strlen(p);

		if (seg == ilen && memcmp(p, item, ilen) == 0)
			return idx;
		if (!comma)
			return -1;
		p = comma + 1;
	}
}

/* Our value for a non-list key (what we offer, or the bound of our answer), clamped into the
 * key's range so local configuration can never put an illegal value on the wire. */
static uint32_t pref_get(const struct neg_state *st, int id)
{
	const struct iscsi_sess_params *s = &st->prefs->sess;
	const struct key_def *k = &keys[id];
	uint64_t v;

	switch (id) {
	case K_MAX_CONNECTIONS:
		v = s->max_connections;
		break;
	case K_INITIAL_R2T:
		v = s->initial_r2t;
		break;
	case K_IMMEDIATE_DATA:
		v = s->immediate_data;
		break;
	case K_MAX_RECV_DSL:
		v = st->prefs->max_recv_dsl;
		break;
	case K_MAX_BURST:
		v = s->max_burst_length;
		break;
	case K_FIRST_BURST:
		/* Never want more unsolicited data than a burst (RFC 7143 13.14). */
		v = s->first_burst_length;
		if (v > s->max_burst_length)
			v = s->max_burst_length;
		break;
	case K_TIME2WAIT:
		v = s->default_time2wait;
		break;
	case K_TIME2RETAIN:
		v = s->default_time2retain;
		break;
	case K_MAX_R2T:
		v = s->max_outstanding_r2t;
		break;
	case K_DATA_PDU_IN_ORDER:
		v = s->data_pdu_in_order;
		break;
	case K_DATA_SEQ_IN_ORDER:
		v = s->data_sequence_in_order;
		break;
	case K_ERL:
		v = st->type == ISCSI_SESSION_DISCOVERY ? 0 : s->error_recovery_level;
		break;
	case K_PROTOCOL_LEVEL:
		v = s->protocol_level;
		break;
	case K_RDMA_EXTENSIONS:
		v = st->prefs->rdma;
		break;
	case K_TARGET_RDSL:
		v = st->prefs->target_rdsl ? st->prefs->target_rdsl : k->def;
		break;
	case K_INITIATOR_RDSL:
		v = st->prefs->initiator_rdsl ? st->prefs->initiator_rdsl : k->def;
		break;
	default:
		v = k->def;
		break;
	}
	return clamp(v, k->min, k->max);
}

static void cur_set(struct neg_state *st, int id, uint32_t v)
{
	struct iscsi_sess_params *s = &st->sess;

	switch (id) {
	case K_HEADER_DIGEST:
		st->conn.header_digest = v != 0; /* index 1 in "None,CRC32C" */
		break;
	case K_DATA_DIGEST:
		st->conn.data_digest = v != 0;
		break;
	case K_MAX_CONNECTIONS:
		s->max_connections = (uint16_t)v;
		break;
	case K_INITIAL_R2T:
		s->initial_r2t = v != 0;
		break;
	case K_IMMEDIATE_DATA:
		s->immediate_data = v != 0;
		break;
	case K_MAX_BURST:
		s->max_burst_length = v;
		break;
	case K_FIRST_BURST:
		s->first_burst_length = v;
		break;
	case K_TIME2WAIT:
		s->default_time2wait = (uint16_t)v;
		break;
	case K_TIME2RETAIN:
		s->default_time2retain = (uint16_t)v;
		break;
	case K_MAX_R2T:
		s->max_outstanding_r2t = (uint16_t)v;
		break;
	case K_DATA_PDU_IN_ORDER:
		s->data_pdu_in_order = v != 0;
		break;
	case K_DATA_SEQ_IN_ORDER:
		s->data_sequence_in_order = v != 0;
		break;
	case K_ERL:
		s->error_recovery_level = (uint8_t)v;
		break;
	case K_PROTOCOL_LEVEL:
		s->protocol_level = (uint8_t)v;
		break;
	case K_RDMA_EXTENSIONS:
		st->conn.rdma = v != 0;
		break;
	case K_TARGET_RDSL:
		st->conn.target_rdsl = v;
		break;
	case K_INITIATOR_RDSL:
		st->conn.initiator_rdsl = v;
		break;
	default:
		break; /* TaskReporting (only RFC3720), markers, other iSER keys: nothing to keep */
	}
}

/* First item of the proposer's list that is in ours, copied to pick. -EINVAL for a malformed
 * list (empty, or an empty item), -ENOENT when nothing is acceptable. */
static int list_pick(const char *proposal, const char *ours, char *pick, size_t cap)
{
	const char *p = proposal;
	int found = -ENOENT;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t seg = comma ? (size_t)(comma - p) : strlen(p);

		if (seg == 0)
			return -EINVAL;
		if (found != 0 && seg < cap) {
			memcpy(pick, p, seg);
			pick[seg] = '\0';
			if (list_index(ours, pick) >= 0)
				found = 0;
		}
		if (!comma)
			return found;
		p = comma + 1;
	}
}

/* Acceptor side of a negotiated key: the answer to send and the resulting value, or an error
 * for a malformed, out-of-range or unacceptable offer (answered Reject). */
static int accept_value(const struct neg_state *st, int id, const char *value, char *ans,
			size_t cap, uint32_t *result)
{
	const struct key_def *k = &keys[id];
	uint32_t ours = pref_get(st, id), r;
	uint64_t v;
	bool b;
	int ret;

	if (strlen(value) > TEXT_MAX_VALUE_LEN)
		return -EINVAL;
	switch (k->type) {
	case KT_LIST:
		ret = list_pick(value, our_list(st, id), ans, cap);
		if (ret)
			return ret;
		*result = (uint32_t)list_index(k->values, ans);
		return 0;
	case KT_MIN:
	case KT_MAX:
		ret = text_parse_num(value, k->min, k->max, &v);
		if (ret)
			return ret;
		if (k->type == KT_MIN)
			r = v < ours ? (uint32_t)v : ours;
		else
			r = v > ours ? (uint32_t)v : ours;
		/* Keep FirstBurstLength within a MaxBurstLength settled earlier. */
		if (id == K_FIRST_BURST && (st->settled & (1ull << K_MAX_BURST)) &&
		    r > st->sess.max_burst_length)
			r = clamp(st->sess.max_burst_length, k->min, k->max);
		break;
	case KT_AND:
	case KT_OR:
		ret = text_parse_bool(value, &b);
		if (ret)
			return ret;
		r = k->type == KT_AND ? (b && ours) : (b || ours);
		snprintf(ans, cap, "%s", r ? "Yes" : "No");
		*result = r;
		return 0;
	default:
		return -EINVAL;
	}
	snprintf(ans, cap, "%u", r);
	*result = r;
	return 0;
}

static int declare_mrdsl(struct neg_state *st, struct text_out *out)
{
	uint32_t v = pref_get(st, K_MAX_RECV_DSL);
	int ret = text_out_addf(out, keys[K_MAX_RECV_DSL].name, "%u", v);

	if (ret)
		return ret;
	st->conn.max_recv_dsl = v;
	st->declared |= 1ull << K_MAX_RECV_DSL;
	return 0;
}

/* MaxRecvDataSegmentLength from the peer: its own receive limit, our send limit. Answered with
 * our declaration unless already sent; an illegal value is answered Reject (8192 stays). */
static int recv_declaration(struct neg_state *st, int id, const char *value, struct text_out *out)
{
	const struct key_def *k = &keys[id];
	uint64_t v;
	int ret;

	if (text_parse_num(value, k->min, k->max, &v) != 0) {
		ret = text_out_add(out, k->name, "Reject");
	} else {
		ret = 0;
		if (!(st->declared & (1ull << id)))
			ret = declare_mrdsl(st, out);
		if (ret == 0)
			st->conn.max_xmit_dsl = (uint32_t)v;
	}
	if (ret)
		return ret;
	st->received |= 1ull << id;
	st->settled |= 1ull << id;
	return 0;
}

/* The peer proposes: answer it. */
static int recv_proposal(struct neg_state *st, int stage, int id, const char *value,
			 struct text_out *out)
{
	const struct key_def *k = &keys[id];
	char ans[TEXT_MAX_VALUE_LEN + 1];
	const char *a = ans;
	uint32_t result = 0;
	bool apply = false, b;
	int ret;

	if (stage == ISCSI_STAGE_FULL_FEATURE && (k->flags & KF_IO))
		a = "Reject"; /* a login-only key in a Text negotiation */
	else if (st->type == ISCSI_SESSION_DISCOVERY && (k->flags & KF_DISC_IRR))
		a = "Irrelevant";
	else if (!st->leading && (k->flags & KF_LO))
		a = "Irrelevant";
	else if (key_support(st, id) == KS_REJECT)
		a = "Reject";
	else if (key_support(st, id) == KS_IRRELEVANT)
		a = "Irrelevant";
	else if (key_support(st, id) == KS_ANSWER_NO)
		a = text_parse_bool(value, &b) == 0 ? "No" : "Reject";
	else if (k->type == KT_DECL)
		return recv_declaration(st, id, value, out);
	else if (accept_value(st, id, value, ans, sizeof(ans), &result) != 0)
		a = "Reject";
	else
		apply = true;

	ret = text_out_add(out, k->name, a);
	if (ret)
		return ret;
	if (apply)
		cur_set(st, id, result);
	st->received |= 1ull << id;
	st->settled |= 1ull << id;
	return 0;
}

/* The peer answers our proposal: check the answer is one our offer allows. */
static int recv_answer(struct neg_state *st, int id, const char *value)
{
	const struct key_def *k = &keys[id];
	uint32_t ours = pref_get(st, id), result;
	uint64_t v;
	bool b;

	if (strcmp(value, "NotUnderstood") == 0) {
		if (!(k->flags & KF_NEW))
			return fail(st, "peer answered %s=NotUnderstood for a standard key",
				    k->name);
		result = k->def; /* an RFC 3720 peer: the key does not exist there */
	} else if (strcmp(value, "Reject") == 0 || strcmp(value, "Irrelevant") == 0) {
		result = k->def;
	} else {
		switch (k->type) {
		case KT_LIST:
			if (strchr(value, ',') || list_index(our_list(st, id), value) < 0)
				return fail(st, "%s answer is not a value we offered", k->name);
			result = (uint32_t)list_index(k->values, value);
			break;
		case KT_MIN:
		case KT_MAX:
			if (text_parse_num(value, k->min, k->max, &v) != 0)
				return fail(st, "%s answer is malformed or out of range", k->name);
			if (k->type == KT_MIN ? v > ours : v < ours)
				return fail(st,
					    "%s answer %llu violates the %s function (offered %u)",
					    k->name, (unsigned long long)v,
					    k->type == KT_MIN ? "Minimum" : "Maximum", ours);
			result = (uint32_t)v;
			break;
		case KT_AND:
		case KT_OR:
			if (text_parse_bool(value, &b) != 0)
				return fail(st, "%s answer is not Yes or No", k->name);
			if (k->type == KT_AND ? (b && !ours) : (!b && ours))
				return fail(st, "%s answer %s violates the %s function", k->name,
					    b ? "Yes" : "No", k->type == KT_AND ? "AND" : "OR");
			result = b;
			break;
		default:
			return fail(st, "%s: unexpected answer", k->name);
		}
	}
	cur_set(st, id, result);
	st->proposed &= ~(1ull << id);
	st->reply_optional &= ~(1ull << id);
	st->received |= 1ull << id;
	st->settled |= 1ull << id;
	return 0;
}

int neg_recv(struct neg_state *st, int stage, const char *key, const char *value,
	     struct text_out *out)
{
	uint64_t bit;
	int id;

	if (!st || !key || !value || !out)
		return -EINVAL;
	if (stage != ISCSI_STAGE_SECURITY && stage != ISCSI_STAGE_OPERATIONAL &&
	    stage != ISCSI_STAGE_FULL_FEATURE)
		return -EINVAL;
	id = key_lookup(key);
	if (id < 0) {
		if (!neg_handles_key(key)) {
			snprintf(st->error, sizeof(st->error), "not an operational key");
			return -EINVAL;
		}
		/* Unknown, X- and X# keys. A reserved value would answer a proposal of ours;
		   we never propose unknown keys, so there is nothing to record. */
		if (is_special(value))
			return 0;
		return text_out_add(out, key, "NotUnderstood");
	}
	bit = 1ull << id;
	if (stage == ISCSI_STAGE_SECURITY)
		return fail(st,
			    "%s in the security stage (only security and declarative keys "
			    "may be used there)",
			    keys[id].name);
	if (st->received & bit)
		return fail(st, "%s received twice", keys[id].name);
	if (st->proposed & bit)
		return recv_answer(st, id, value);
	if (is_special(value)) {
		/* Not an answer to a proposal of ours: only our declaration can be refused. */
		if (keys[id].type == KT_DECL && (st->declared & bit) &&
		    strcmp(value, "NotUnderstood") != 0) {
			/* The peer keeps assuming the default for us. */
			st->conn.max_recv_dsl = keys[id].def;
			st->received |= bit;
			st->settled |= bit;
			return 0;
		}
		return fail(st, "%s=%s answers nothing we proposed", keys[id].name, value);
	}
	return recv_proposal(st, stage, id, value, out);
}

/* Our offer for key id, or NULL when there is nothing to offer (value equal to the default
 * and !offer_all, or a newer key at its default). */
static const char *offer_value(const struct neg_state *st, int id, char *buf, size_t cap)
{
	const struct key_def *k = &keys[id];
	bool is_default;
	uint32_t v = 0;

	if (k->type == KT_LIST) {
		const char *l = our_list(st, id);

		is_default = list_index(k->values, l) == (int)k->def;
		if (is_default && ((k->flags & KF_NEW) || !st->prefs->offer_all))
			return NULL;
		return l;
	}
	v = pref_get(st, id);
	is_default = v == k->def;
	if (is_default && ((k->flags & KF_NEW) || !st->prefs->offer_all))
		return NULL;
	if (k->type == KT_AND || k->type == KT_OR)
		return v ? "Yes" : "No";
	snprintf(buf, cap, "%u", v);
	return buf;
}

int neg_propose(struct neg_state *st, struct text_out *out)
{
	for (int id = 0; id < K_COUNT; id++) {
		const struct key_def *k = &keys[id];
		uint64_t bit = 1ull << id;
		const char *val;
		char buf[16];
		int ret;

		if ((st->received | st->proposed | st->settled | st->declared) & bit)
			continue;
		if (key_support(st, id) != KS_NEGOTIATE)
			continue;
		if (st->type == ISCSI_SESSION_DISCOVERY && (k->flags & KF_DISC_IRR))
			continue;
		if (!st->leading && (k->flags & KF_LO))
			continue;
		if (k->type != KT_DECL && st->prefs->declare_only)
			continue;
		if (k->type == KT_DECL) {
			/* iSER: MaxRecvDataSegmentLength is Irrelevant (RFC 7145 6.8) */
			if (st->prefs->rdma && st->type == ISCSI_SESSION_NORMAL)
				continue;
			ret = declare_mrdsl(st, out);
			if (ret)
				return ret;
			continue;
		}
		val = offer_value(st, id, buf, sizeof(buf));
		if (!val)
			continue;
		ret = text_out_add(out, k->name, val);
		if (ret)
			return ret;
		st->proposed |= bit;
		if ((k->type == KT_AND && strcmp(val, "No") == 0) ||
		    (k->type == KT_OR && strcmp(val, "Yes") == 0)) {
			/* RFC 7143 6.2.1: the result is fixed whatever the peer says, and it
			   need not answer. */
			st->reply_optional |= bit;
			cur_set(st, id, k->type == KT_OR);
		}
	}
	return 0;
}

bool neg_settled(const struct neg_state *st)
{
	return (st->proposed & ~st->reply_optional) == 0;
}

static bool digest_required(enum neg_digest_pref p)
{
	return p == NEG_DIGEST_CRC_ONLY;
}

int neg_finish(struct neg_state *st)
{
	struct iscsi_sess_params *s = &st->sess;

	if (st->type == ISCSI_SESSION_DISCOVERY) {
		s->max_connections = 1;
		s->error_recovery_level = 0;
		return 0;
	}
	if (s->first_burst_length > s->max_burst_length) {
		/* FirstBurstLength is irrelevant when no unsolicited data can be sent. */
		if (!(s->initial_r2t && !s->immediate_data))
			return fail(st, "FirstBurstLength %u exceeds MaxBurstLength %u",
				    s->first_burst_length, s->max_burst_length);
		s->first_burst_length = s->max_burst_length;
	}
	if (st->role == ISCSI_ROLE_INITIATOR && st->prefs->rdma && !st->conn.rdma)
		return fail(st, "the target did not accept RDMAExtensions=Yes on an RDMA connection");
	if (st->conn.rdma) {
		/* RFC 7145 6.3: no digests on an iSER connection; the data segment limits are the
		   iSER keys, seen from our side */
		if (st->conn.header_digest || st->conn.data_digest)
			return fail(st, "digests negotiated together with RDMAExtensions=Yes");
		if (digest_required(st->prefs->header_digest) ||
		    digest_required(st->prefs->data_digest))
			return fail(st, "CRC32C digests required but iSER has none");
		if (st->role == ISCSI_ROLE_TARGET) {
			st->conn.max_recv_dsl = st->conn.target_rdsl;
			st->conn.max_xmit_dsl = st->conn.initiator_rdsl;
		} else {
			st->conn.max_recv_dsl = st->conn.initiator_rdsl;
			st->conn.max_xmit_dsl = st->conn.target_rdsl;
		}
		return 0;
	}
	if (digest_required(st->prefs->header_digest) && !st->conn.header_digest)
		return fail(st, "HeaderDigest CRC32C required but not negotiated");
	if (digest_required(st->prefs->data_digest) && !st->conn.data_digest)
		return fail(st, "DataDigest CRC32C required but not negotiated");
	return 0;
}
