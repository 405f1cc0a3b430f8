/* Operational key negotiation (RFC 7143 sections 6.2, 13), written once for both roles.
 *
 * A struct neg_state lives for one login (or one Text negotiation) on one connection. The login
 * state machine feeds it every received key that neg_handles_key() claims, asks it for
 * proposals, and reads the results from ->sess and ->conn when the login completes. Security
 * keys (AuthMethod, CHAP_*) belong to session/auth; the declarative login keys (InitiatorName,
 * TargetName, SessionType, aliases, TargetPortalGroupTag, TargetAddress) to the login code.
 *
 * Threading: owned by the connection's thread; no shared state.
 */
#ifndef IX_SESSION_KEYS_H
#define IX_SESSION_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "dm/dm.h"
#include "proto/pdu.h"
#include "proto/text.h"

enum iscsi_session_type {
	ISCSI_SESSION_NORMAL = 0,
	ISCSI_SESSION_DISCOVERY = 1,
};

/* Session-wide operational parameters: RFC defaults until negotiated. */
struct iscsi_sess_params {
	uint16_t max_connections;       /* 1 */
	bool initial_r2t;               /* Yes */
	bool immediate_data;            /* Yes */
	uint32_t max_burst_length;      /* 262144 */
	uint32_t first_burst_length;    /* 65536 */
	uint16_t default_time2wait;     /* 2 */
	uint16_t default_time2retain;   /* 20 */
	uint16_t max_outstanding_r2t;   /* 1 */
	bool data_pdu_in_order;         /* Yes */
	bool data_sequence_in_order;    /* Yes */
	uint8_t error_recovery_level;   /* 0 */
	uint8_t protocol_level;         /* iSCSIProtocolLevel, 1 */
};

/* Connection-wide parameters: struct iscsi_conn_params (dm/dm.h). */

enum neg_digest_pref {
	NEG_DIGEST_NONE_ONLY = 0,       /* offer/accept None only */
	NEG_DIGEST_PREFER_NONE,         /* "None,CRC32C" */
	NEG_DIGEST_PREFER_CRC,          /* "CRC32C,None" */
	NEG_DIGEST_CRC_ONLY,            /* "CRC32C" */
};

/* What this side wants. As proposer these are the values offered; as acceptor they bound the
 * answer (Min keys answer min(offer, pref), Max keys max(...), Boolean AND/OR per RFC). */
struct neg_prefs {
	struct iscsi_sess_params sess;
	enum neg_digest_pref header_digest, data_digest;
	uint32_t max_recv_dsl;          /* declared for this side */
	/* Keys the proposer offers even when equal to the RFC default (initiators usually offer
	   every key; targets usually only answer and declare). */
	bool offer_all;
	/* Propose nothing but declarations (MaxRecvDataSegmentLength): the acceptor style of a
	   target, which answers what the initiator offers and leaves the rest at the RFC
	   defaults, so that an initiator asking to enter full feature phase is never held back
	   by proposals of ours that it would have to answer. */
	bool declare_only;
	/* The connection runs over an RDMA datamover (iSER): offer/accept RDMAExtensions=Yes and
	   negotiate TargetRecvDataSegmentLength / InitiatorRecvDataSegmentLength (RFC 7145
	   section 6) instead of MaxRecvDataSegmentLength; digests are None. */
	bool rdma;
	uint32_t target_rdsl;           /* our value (target: what we can receive) */
	uint32_t initiator_rdsl;        /* our value (initiator: what we can receive) */
};

/* Fill with RFC 7143 defaults (digests None only, max_recv_dsl 8192, offer_all false). */
void neg_prefs_default(struct neg_prefs *p);
void neg_sess_params_default(struct iscsi_sess_params *s);

struct neg_state {
	enum iscsi_role role;
	enum iscsi_session_type type;
	bool leading;                   /* leading connection of the session: LO keys allowed */
	const struct neg_prefs *prefs;
	struct iscsi_sess_params sess;  /* current values: defaults, then results */
	struct iscsi_conn_params conn;
	uint64_t received;              /* per key bit: received from the peer in this login */
	uint64_t proposed;              /* we sent it as proposer, answer pending */
	uint64_t settled;               /* result known (answered either way) */
	uint64_t declared;              /* declarative key already sent */
	uint64_t reply_optional;        /* proposed, but the peer need not answer (Boolean AND
					   offered No, OR offered Yes): result already applied */
	char error[160];                /* why the last call failed (for logs) */
};

void neg_init(struct neg_state *st, enum iscsi_role role, const struct neg_prefs *prefs,
	      bool leading);
/* Session keys are Irrelevant in discovery sessions; the login code calls this as soon as
 * SessionType is known (before feeding the other keys of the same PDU). */
void neg_set_session_type(struct neg_state *st, enum iscsi_session_type type);

/* Does this module own the key (operational keys, obsolete marker keys, X- / X# keys and any
 * other key that is not security or declarative)? */
bool neg_handles_key(const char *key);

/* Feed one key received from the peer in login stage `stage` (enum iscsi_stage; FULL_FEATURE
 * for a Text negotiation). If the peer proposes, the answer is appended to out; if the peer
 * answers our proposal, the result is recorded. Unknown keys (X-, X# and any other) are
 * answered NotUnderstood; out-of-range or malformed values Reject (the key keeps its default);
 * keys that do not apply (session keys in discovery, LO keys on a non-leading connection)
 * Irrelevant; obsolete IFMarker/OFMarker No, IFMarkInt/OFMarkInt Reject; iSER keys
 * RDMAExtensions=No and the others Irrelevant (iSER not negotiated yet); login-only keys in
 * a Text negotiation Reject. MaxRecvDataSegmentLength is answered with our own declaration.
 * A Reject or Irrelevant answer to our proposal keeps the default.
 * Returns 0; -EPROTO for a protocol error that must fail the login (an operational key in the
 * security stage, which RFC 7143 section 12 forbids; key received twice; an answer that our
 * offer does not allow or to a key we did not propose; NotUnderstood for a standard key),
 * with st->error set; -EINVAL for a key this module does not own (see neg_handles_key) or a
 * bad stage; -ENOSPC if out is full (nothing recorded: the key may be fed again). */
int neg_recv(struct neg_state *st, int stage, const char *key, const char *value,
	     struct text_out *out);

/* Append proposals and declarations not yet sent (MaxRecvDataSegmentLength always declared;
 * conn.max_recv_dsl is 8192 until then; other keys per prefs: differing from the default, or
 * every key with offer_all). Keys the peer already proposed are not proposed again, nor are
 * keys irrelevant here (LO keys on a non-leading connection, session keys in discovery),
 * obsolete or iSER keys, or iSCSIProtocolLevel/TaskReporting at their defaults (RFC 3720 peers
 * do not know them). Returns 0 or -ENOSPC (what fitted stays appended and recorded; call again
 * with a new buffer for the rest). */
int neg_propose(struct neg_state *st, struct text_out *out);

/* True when every proposal we made has been answered (proposals whose reply is optional,
 * Boolean AND offered No and OR offered Yes, do not wait: their result is applied at once). */
bool neg_settled(const struct neg_state *st);

/* Apply cross-key rules at the end of negotiation: FirstBurstLength <= MaxBurstLength (clamped
 * when irrelevant, i.e. InitialR2T=Yes and ImmediateData=No, else -EPROTO), a CRC32C digest
 * our prefs require (NEG_DIGEST_CRC_ONLY) must have been negotiated (normal sessions only),
 * discovery forces MaxConnections=1 and ERL 0. Proposals still unanswered keep their defaults.
 * Returns 0 or -EPROTO with st->error set. */
int neg_finish(struct neg_state *st);

#endif
