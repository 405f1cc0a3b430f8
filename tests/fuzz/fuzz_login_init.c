/* libFuzzer harness for the initiator's login driver (session/login_init.c) fed whole Login
 * Response sequences, as a target would send them.
 *
 * Input: one configuration byte, then Login Response PDUs exactly as on the wire (BHS, data
 * segment, padding). Before each response the driver builds its next request (which goes
 * nowhere); the run ends at an error, at full feature phase, or when the input runs out. The
 * driver checks the ISID of every response, so captured seeds carry the harness's ISID
 * (FUZZ_ISID below; seeds.py rewrites it).
 * Configuration byte: bits 0-1 credentials (0 none, 1 CHAP, 2 CHAP required, 3 mutual CHAP
 * required), bit 2 discovery session, bit 3 offer every key, bits 4-5 HeaderDigest and bits 6-7
 * DataDigest preference.
 *
 * Properties checked beyond "no crash":
 *  - a login that reaches full feature phase with mutual CHAP has verified the target (its
 *    CHAP_R answers our random challenge, which no input can know), and with CHAP required it
 *    did authenticate;
 *  - requests are well-formed: our text parses, T and C are never both set, the stages are legal;
 *  - failures carry an error text; a status is set exactly when the target sent one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "proto/pdu.h"
#include "session/login_init.h"
#include "util/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t FUZZ_ISID[6] = {0x80, 0x00, 0x1f, 0x2e, 0x3d, 0x4c};

static void check_req(const struct login_init_req *rq)
{
	const struct iscsi_login_req *l = &rq->hdr.login_req;

	if (l->transit && l->cont)
		abort();
	if (l->csg == 2 || l->csg == 3 || (l->transit && (l->nsg == 2 || l->nsg <= l->csg)))
		abort();
	if (memcmp(l->isid, FUZZ_ISID, 6) != 0)
		abort();
	fuzz_check_our_text(rq->text, rq->text_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct login_initiator *li;
	struct login_init_cfg cfg;
	struct auth_creds creds;
	struct neg_prefs prefs;
	size_t off = 1;
	uint8_t mode;
	int r = LOGIN_INIT_CONTINUE;

	if (size < 1)
		return 0;
	mode = data[0];
	memset(&cfg, 0, sizeof(cfg));
	memset(&creds, 0, sizeof(creds));
	neg_prefs_default(&prefs);
	prefs.offer_all = mode & 0x08;
	prefs.header_digest = (enum neg_digest_pref)((mode >> 4) & 3);
	prefs.data_digest = (enum neg_digest_pref)((mode >> 6) & 3);
	prefs.max_recv_dsl = 262144;
	if (mode & 3) {
		creds.required = (mode & 3) >= 2;
		creds.user = "fuzz-user";
		creds.secret = (const uint8_t *)"fuzz-secret-0123";
		creds.secret_len = 16;
		if ((mode & 3) == 3) {
			creds.mutual_user = "fuzz-target";
			creds.mutual_secret = (const uint8_t *)"fuzz-target-secret";
			creds.mutual_secret_len = 18;
		}
		cfg.creds = &creds;
	}
	cfg.initiator_name = "iqn.2026-11.io.ix:fuzz-initiator";
	cfg.target_name = "iqn.2026-11.io.ix:fuzz-target";
	cfg.type = mode & 0x04 ? ISCSI_SESSION_DISCOVERY : ISCSI_SESSION_NORMAL;
	memcpy(cfg.isid, FUZZ_ISID, 6);
	cfg.cmdsn = 1;
	cfg.prefs = &prefs;
	li = malloc(sizeof(*li));
	if (!li)
		return 0;
	if (login_initiator_init(li, &cfg) != 0)
		abort();

	while (r == LOGIN_INIT_CONTINUE) {
		struct login_init_req rq;
		struct iscsi_hdr h;
		uint32_t dlen, wire;
		uint8_t *seg;

		memset(&rq, 0, sizeof(rq));
		if (login_initiator_next(li, &rq) != 0) {
			if (!li->error[0])
				abort();
			break;
		}
		check_req(&rq);
		if (size - off < ISCSI_BHS_LEN)
			break;
		(void)iscsi_hdr_unpack(data + off, &h);
		dlen = get_be24(data + off + 5);
		wire = iscsi_pad4(dlen);
		if (data[off + 4] || size - off - ISCSI_BHS_LEN < wire)
			break; /* the initiator's transport would drop or wait: nothing to decide */
		seg = malloc(dlen ? dlen : 1);
		if (!seg)
			break;
		memcpy(seg, data + off + ISCSI_BHS_LEN, dlen);
		r = login_initiator_recv(li, &h, seg, dlen);
		free(seg);
		off += ISCSI_BHS_LEN + wire;
		if (r < 0) {
			if (!li->error[0])
				abort();
		} else if (r == LOGIN_INIT_DONE) {
			if (creds.mutual_secret && !(li->auth.done && li->auth.method_chap))
				abort(); /* entered FFP without verifying the target */
			if (creds.required && !li->auth.done)
				abort();
		} else if (r != LOGIN_INIT_CONTINUE) {
			abort();
		}
	}
	login_initiator_clear(li);
	free(li);
	return 0;
}
