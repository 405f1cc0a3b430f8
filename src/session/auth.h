/* Login security stage: AuthMethod and CHAP (one-way and mutual, CHAP_A 5/6/7/8), written once
 * for both roles (RFC 7143 section 12.1.3, RFC 1994).
 *
 * The login state machine passes every received security key (auth_is_security_key()) of one
 * login PDU sequence to auth_recv() and appends what it returns. Credentials are resolved by the
 * role before the exchange starts (the target knows InitiatorName and TargetName from the first
 * Login Request).
 *
 * Threading: owned by the connection's thread. Secrets are borrowed, never copied out, and the
 * state wipes its challenges in auth_clear().
 */
#ifndef IX_SESSION_AUTH_H
#define IX_SESSION_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/chap.h"
#include "proto/text.h"
#include "session/keys.h"

struct auth_creds {
	/* Target: refuse AuthMethod=None. Initiator: refuse a target that answers None. */
	bool required;
	/* The credential the initiator proves to the target. On the target: the expected CHAP_N
	   and secret (NULL secret = no CHAP configured). On the initiator: what it sends. */
	const char *user;
	const uint8_t *secret;
	size_t secret_len;
	/* Mutual CHAP: the credential the target proves to the initiator (NULL = one-way). */
	const char *mutual_user;
	const uint8_t *mutual_secret;
	size_t mutual_secret_len;
	/* Allowed CHAP_A values. Initiator: sent in this order. Target: accepted set; the first
	   entry of the initiator's list that is in it wins. nalgs == 0 means {5, 6, 7, 8}. */
	uint8_t algs[4];
	int nalgs;
};

enum auth_result {
	AUTH_CONTINUE = 0, /* more security PDUs needed */
	AUTH_DONE = 1,     /* authenticated (or no authentication chosen): may leave stage 0 */
};

struct auth_state {
	enum iscsi_role role;
	const struct auth_creds *creds;
	int phase;                  /* internal progress enum */
	bool method_chap;           /* CHAP selected */
	bool done;
	int alg;                    /* selected CHAP_A */
	uint8_t id;                 /* CHAP_I of the challenge we sent (target) / received */
	uint8_t challenge[CHAP_MAX_DIGEST_LEN * 2];
	size_t challenge_len;       /* challenge we sent (target: to the initiator; initiator:
				       mutual challenge to the target) */
	uint8_t mutual_id;
	uint16_t fail_status;       /* login status when a call fails: 0x0201 (any CHAP
				       failure, RFC 7143 12.1.3), 0x0200 (a key repeated in one
				       PDU, AuthMethod renegotiated), 0x0300 (-EIO: no random
				       bytes or libcrypto failed here) */
	char error[160];            /* why, for logs (never contains secrets) */
};

void auth_init(struct auth_state *st, enum iscsi_role role, const struct auth_creds *creds);
void auth_clear(struct auth_state *st);

bool auth_is_security_key(const char *key);

/* Initiator: append the opening keys (AuthMethod=CHAP,None / CHAP / None). 0, -ENOSPC, or
 * -EINVAL for unusable credentials (CHAP required but no user/secret; mutual secret equal to
 * the initiator secret, which RFC 7143 12.1.3 forbids) or a call out of place. */
int auth_start(struct auth_state *st, struct text_out *out);

/* Feed the security keys received in one login PDU (sequence). Appends reply keys to out.
 * Returns AUTH_CONTINUE or AUTH_DONE; or a negative errno with st->fail_status and st->error
 * set: -EACCES authentication failed (0x0201: wrong response, unknown user, reflected
 * challenge, method refused), -EPROTO malformed or out-of-order keys (0x0200 or 0x0201 as the
 * RFC requires), -EIO local failure (0x0300), -ENOSPC out full (nothing appended by this call,
 * state unchanged: retry with more room). */
int auth_recv(struct auth_state *st, const struct text_kv *kvs, size_t n, struct text_out *out);

/* May the peer (target role) / we (initiator role) leave the security stage now? True once
 * AUTH_DONE was returned, or when no authentication is required and none was started.
 * Initiator with mutual CHAP: AUTH_DONE comes only after the target's CHAP_N/CHAP_R verified
 * (see auth_awaiting_target_proof for the T bit of the PDU carrying our CHAP_R). Once a call has
 * failed, later calls return -EPROTO and leave error and fail_status as they were. */
bool auth_may_transit(const struct auth_state *st);

/* Initiator with mutual CHAP: our CHAP_R and challenge are out, the target's CHAP_N/CHAP_R
 * not yet in. Initiators send that PDU with T=1 (open-iscsi, libiscsi do; tgt only answers
 * the mutual challenge in a transit response) and check the target's proof in the
 * response before entering the next stage. */
bool auth_awaiting_target_proof(const struct auth_state *st);

#endif
