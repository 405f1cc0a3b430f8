/* The login phase, initiator side (RFC 7143 sections 6.3, 11.12, 11.13): the mirror of
 * session/login.h. It builds each Login Request (stage, T/C bits, text), feeds every Login
 * Response to the same shared negotiation (session/keys) and authentication (session/auth)
 * code the target uses, and says when the connection may enter full feature phase.
 *
 * Exchange it drives:
 *   security stage (CSG=0): names, SessionType, AuthMethod; the CHAP exchange if chosen;
 *     T=1 NSG=1 once auth_may_transit();
 *   operational stage (CSG=1): our proposals (prefs->offer_all), answers to the target's,
 *     T=1 NSG=3 once everything we proposed is answered;
 *   text longer than one PDU goes out in 8192-byte pieces with C=1 (the target answers each
 *   with an empty response), and a response with C=1 is completed by empty requests.
 *
 * No I/O here: the caller sends what login_initiator_next() fills in and passes back every
 * response. Threading: owned by the connection's thread.
 */
#ifndef IX_SESSION_LOGIN_INIT_H
#define IX_SESSION_LOGIN_INIT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/pdu.h"
#include "proto/text.h"
#include "session/auth.h"
#include "session/keys.h"
#include "session/login.h"

#define LOGIN_INIT_PDU_TEXT 8192 /* most text per Login Request before the target declares */

struct login_init_cfg {
	const char *initiator_name;
	const char *initiator_alias;    /* NULL = none */
	const char *target_name;        /* required for a normal session */
	enum iscsi_session_type type;
	uint8_t isid[6];
	uint16_t tsih;                  /* 0 = new session (or reinstatement of the same ISID) */
	uint16_t cid;
	uint32_t cmdsn;                 /* CmdSN carried by every request of this login */
	uint32_t expstatsn;             /* ExpStatSN of the first request (0 for a new
					   session) */
	const struct auth_creds *creds; /* NULL = AuthMethod=None */
	const struct neg_prefs *prefs;  /* what we propose; borrowed for the login */
};

/* One Login Request to send. */
struct login_init_req {
	struct iscsi_hdr hdr;           /* opcode, I, T, C, CSG, NSG, ISID, TSIH, CID, CmdSN,
					   ExpStatSN filled; ITT is the caller's */
	const char *text;               /* data segment (points into the state) */
	uint32_t text_len;
};

enum login_init_result {
	LOGIN_INIT_CONTINUE = 0,        /* send the next request */
	LOGIN_INIT_DONE = 1,            /* full feature phase: read the results */
};

struct login_initiator {
	struct login_init_cfg cfg;
	struct neg_state neg;
	struct auth_state auth;
	uint8_t stage;                  /* current CSG */
	bool started;                   /* first request built */
	bool auth_started;
	bool proposed;                  /* operational proposals sent */
	bool transit_asked;             /* last request had T=1 */
	uint8_t asked_nsg;              /* and this NSG */
	bool await_rest;                /* the target's response had C=1: send empty requests */
	bool done;
	uint32_t expstatsn;
	uint16_t tsih;                  /* from the final response */
	uint16_t status;                /* login status of a failed login (0 otherwise) */
	char redirect[256];             /* TargetAddress of a redirection (status 0x01xx) */
	char target_alias[256];
	uint16_t tpgt;
	struct text_accum accum;        /* the target's text across C=1 responses */
	char accum_buf[LOGIN_MAX_TEXT];
	char out_buf[2 * LOGIN_INIT_PDU_TEXT]; /* our pending text */
	uint32_t out_len, out_off;      /* bytes built, bytes already sent */
	char error[200];
};

/* Prepare a login. The cfg strings and prefs/creds are borrowed until login_initiator_clear().
 * Returns 0 or -EINVAL (no initiator name, or no target name for a normal session). */
int login_initiator_init(struct login_initiator *li, const struct login_init_cfg *cfg);
void login_initiator_clear(struct login_initiator *li);

/* Build the next request into req. 0, or -errno with li->error set (-EINVAL: unusable
 * credentials; -ENOSPC: our text does not fit). */
int login_initiator_next(struct login_initiator *li, struct login_init_req *req);

/* Feed one Login Response (header and its data segment; data is modified in place). Returns
 * LOGIN_INIT_CONTINUE (call login_initiator_next() and send), LOGIN_INIT_DONE (negotiated
 * values in li->neg.sess / li->neg.conn, TSIH in li->tsih), or a negative errno with li->error
 * and li->status set:
 *   -EXDEV      redirection (status 0x0101/0x0102): the new address is in li->redirect
 *   -EACCES     authentication or authorization failure (0x0201, 0x0202), or the target
 *               failed our mutual CHAP check
 *   -ENOENT     target not found or removed (0x0203, 0x0204)
 *   -EAGAIN     target-side error that may clear (class 3: 0x0300-0x0302)
 *   -EPROTO     any other failure status, or a response that breaks the login rules
 *               (wrong ISID, stage, version; malformed text; negotiation errors). */
int login_initiator_recv(struct login_initiator *li, const struct iscsi_hdr *h, uint8_t *data,
			 uint32_t dlen);

/* Text for a login status ("authentication failure", ...). */
const char *login_status_str(uint16_t status);

#endif
