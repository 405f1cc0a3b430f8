/* libFuzzer harness for the login acceptor (session/login.c) fed whole Login Request sequences,
 * with a fake target policy.
 *
 * Input: one policy byte, then Login Request PDUs exactly as on the wire during login (BHS,
 * data segment, padding to 4 bytes; no digests exist before full feature phase), e.g. the
 * initiator side of a captured login. The harness does what tgt_conn.c does before calling
 * the acceptor: a PDU that is not a Login Request, carries an AHS or more than 8192 data bytes
 * ends the connection; a login failure status or the final response ends the run.
 *
 * Policy byte: bits 0-1 authentication of every normal target (0 none, 1 CHAP required,
 * 2 mutual CHAP required, 3 CHAP configured but optional), bit 2 CHAP required for discovery,
 * bits 3-4 HeaderDigest preference, bits 5-6 DataDigest preference, bit 7 the target also
 * proposes keys (not declare-only). TargetNames containing "unknown" are not found (0x0203),
 * InitiatorNames containing "denied" are not authorized (0x0202), TargetNames containing "moved"
 * are redirected (0x0101, or 0x0102 with "movedperm"; RFC 7143 11.13.5).
 *
 * Properties checked beyond "no crash":
 *  - a completed login with authentication required has authenticated (CHAP responses to the
 *    acceptor's random challenge cannot come from the input, so a completion there is a bypass);
 *  - a completed normal login has a TargetName, and a full feature phase transition only
 *    follows a T=1 request naming NSG 3;
 *  - response text is well-formed; T and C are never both set; failures carry a reason.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "proto/pdu.h"
#include "session/login.h"
#include "util/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define USER	"fuzz-user"
#define SECRET	"fuzz-secret-0123"
#define MUSER	"fuzz-target"
#define MSECRET "fuzz-target-secret"

struct policy {
	uint8_t mode;
	struct neg_prefs prefs;
};

static void creds(struct auth_creds *c, bool required, bool mutual)
{
	c->required = required;
	c->user = USER;
	c->secret = (const uint8_t *)SECRET;
	c->secret_len = strlen(SECRET);
	if (mutual) {
		c->mutual_user = MUSER;
		c->mutual_secret = (const uint8_t *)MSECRET;
		c->mutual_secret_len = strlen(MSECRET);
	}
}

static int admit(void *ctx, const struct login_info *li, struct login_grant *g)
{
	struct policy *p = ctx;
	unsigned auth = p->mode & 3;

	memset(g, 0, sizeof(*g));
	g->tpgt = 1;
	g->prefs = &p->prefs;
	if (strstr(li->initiator_name, "denied"))
		return ISCSI_LOGIN_AUTHORIZATION_FAILED;
	if (li->type == ISCSI_SESSION_DISCOVERY) {
		if (p->mode & 0x04)
			creds(&g->creds, true, false);
		return 0;
	}
	if (strstr(li->target_name, "unknown"))
		return ISCSI_LOGIN_NOT_FOUND;
	if (strstr(li->target_name, "moved")) {
		g->redirect = "192.0.2.1:3260,1";
		return strstr(li->target_name, "movedperm") ? ISCSI_LOGIN_TARGET_MOVED_PERM
							    : ISCSI_LOGIN_TARGET_MOVED_TEMP;
	}
	g->target_alias = "fuzz";
	if (auth)
		creds(&g->creds, auth != 3, auth == 2);
	return 0;
}

static void check_step(const struct login_acceptor *la, const struct iscsi_hdr *h,
		       const struct login_step *st)
{
	if (st->transit && st->cont)
		abort();
	if (st->status) {
		if (!la->error[0])
			abort();
		/* a redirection carries exactly its TargetAddress; other failures no text */
		if ((st->status >> 8) == 1) {
			static const char want[] = "TargetAddress=192.0.2.1:3260,1";
			if (st->text_len != sizeof(want) || memcmp(st->text, want, sizeof(want)))
				abort();
		} else if (st->text_len) {
			abort();
		}
		return;
	}
	fuzz_check_our_text(st->text, st->text_len);
	if (st->final) {
		if (!h->login_req.transit || h->login_req.nsg != ISCSI_STAGE_FULL_FEATURE)
			abort();
		if (la->grant.creds.required && !la->auth.done)
			abort();
		if (la->info.type == ISCSI_SESSION_NORMAL && !la->info.target_name[0])
			abort();
		if (la->neg.sess.first_burst_length > la->neg.sess.max_burst_length &&
		    la->info.type == ISCSI_SESSION_NORMAL)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct login_acceptor *la;
	struct login_policy pol;
	struct policy p;
	size_t off = 1;

	if (size < 1)
		return 0;
	memset(&p, 0, sizeof(p));
	p.mode = data[0];
	neg_prefs_default(&p.prefs);
	p.prefs.header_digest = (enum neg_digest_pref)((data[0] >> 3) & 3);
	p.prefs.data_digest = (enum neg_digest_pref)((data[0] >> 5) & 3);
	p.prefs.max_recv_dsl = 262144;
	p.prefs.sess.max_burst_length = 1048576;
	p.prefs.sess.first_burst_length = 262144;
	p.prefs.sess.initial_r2t = false;
	p.prefs.declare_only = !(data[0] & 0x80);
	la = malloc(sizeof(*la));
	if (!la)
		return 0;
	pol.admit = admit;
	pol.ctx = &p;
	login_acceptor_init(la, &pol);

	while (size - off >= ISCSI_BHS_LEN) {
		struct iscsi_hdr h;
		struct login_step st;
		uint32_t dlen, wire;
		uint8_t *seg;

		if (iscsi_hdr_unpack(data + off, &h) != 0 || h.opcode != ISCSI_OP_LOGIN_REQ)
			break;
		dlen = get_be24(data + off + 5);
		if (data[off + 4] || dlen > 8192)
			break; /* tgt_conn.c drops the connection */
		wire = iscsi_pad4(dlen);
		if (size - off - ISCSI_BHS_LEN < wire)
			break; /* the peer stalls: the login timer ends it */
		/* An exactly sized copy, so that any over-read is caught. */
		seg = malloc(dlen ? dlen : 1);
		if (!seg)
			break;
		memcpy(seg, data + off + ISCSI_BHS_LEN, dlen);
		login_acceptor_step(la, &h, seg, dlen, &st);
		check_step(la, &h, &st);
		free(seg);
		off += ISCSI_BHS_LEN + wire;
		if (st.status || st.final)
			break;
	}
	login_acceptor_clear(la);
	free(la);
	return 0;
}
