/* The login phase, acceptor side (RFC 7143 sections 6.3, 11.12, 11.13): stage rules (T, C,
 * CSG, NSG), constant ISID/TSIH/CID/CmdSN across the login, text accumulation over C=1,
 * declarative keys, and dispatch of security keys to session/auth and operational keys to
 * session/keys. What a name means (which target, which ACL, which credentials) is role policy,
 * asked through struct login_policy.
 *
 * Threading: owned by the connection's thread.
 */
#ifndef IX_SESSION_LOGIN_H
#define IX_SESSION_LOGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/pdu.h"
#include "proto/text.h"
#include "session/auth.h"
#include "session/keys.h"

#define LOGIN_MAX_TEXT (64 * 1024) /* accumulated login text across C=1 PDUs */
#define LOGIN_MAX_KEYS 128
#define ISCSI_NAME_MAX 224

struct login_info {
	char initiator_name[ISCSI_NAME_MAX];
	char initiator_alias[256];
	char target_name[ISCSI_NAME_MAX];
	enum iscsi_session_type type;
	uint8_t isid[6];
	uint16_t tsih;
	uint16_t cid;
	uint32_t cmdsn;
};

/* Answers from the role (the target) once the first request's names are known. */
struct login_grant {
	uint16_t tpgt;
	const char *target_alias;       /* NULL = none */
	const char *redirect;           /* with admit's 0x0101/0x0102: the TargetAddress */
	struct auth_creds creds;
	const struct neg_prefs *prefs;
};

struct login_policy {
	/* Resolve names: return 0 and fill grant, or a login status (0x0203 unknown target,
	   0x0202 not authorized, ...); a redirection (0x0101, 0x0102) sets grant->redirect,
	   which the response carries as TargetAddress (RFC 7143 11.13.5). */
	int (*admit)(void *ctx, const struct login_info *li, struct login_grant *grant);
	void *ctx;
};

struct login_acceptor {
	struct login_policy policy;
	struct login_info info;
	struct login_grant grant;
	struct neg_state neg;
	struct auth_state auth;
	bool first_seen;
	bool admitted;
	uint8_t stage;                  /* current stage (CSG expected) */
	bool complete;                  /* final response sent with NSG=3 */
	bool proposed;                  /* operational proposals sent */
	/* the request's text across C=1 PDUs: allocated at the size the PDUs received so far
	   need (a power of two from 1 KiB, at most LOGIN_MAX_TEXT), freed by
	   login_acceptor_clear */
	struct text_accum accum;
	char *accum_buf;
	char out_buf[8192];             /* response text (one PDU) */
	uint32_t out_len;
	char error[200];
};

void login_acceptor_init(struct login_acceptor *la, const struct login_policy *policy);
/* Free what the acceptor holds (its text buffer, the authentication state). */
void login_acceptor_clear(struct login_acceptor *la);

/* Result of one Login Request. */
struct login_step {
	uint16_t status;                /* 0 or a login failure status: send it (with text, for
					   a redirection) and close */
	bool transit;                   /* response T bit */
	bool cont;                      /* response C bit */
	uint8_t csg, nsg;
	bool final;                     /* transit to full feature phase */
	const char *text;               /* response data segment */
	uint32_t text_len;
};

/* Process one Login Request (h, data). Fills step; never fails silently: a protocol error
 * becomes step->status != 0 with la->error explaining it. */
void login_acceptor_step(struct login_acceptor *la, const struct iscsi_hdr *h, uint8_t *data,
			 uint32_t dlen, struct login_step *step);

#endif
