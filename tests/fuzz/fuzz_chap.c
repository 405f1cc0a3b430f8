/* libFuzzer harness for the CHAP security stage (session/auth.c), both roles at once.
 *
 * A genuine initiator and a genuine target (fixed credentials) talk to each other; the input
 * decides, message by message, whether the message passes unchanged, is replaced, or gets keys
 * added, so the fuzzer reaches every phase of both roles with valid random challenges on the
 * other side.
 *
 * Input: one configuration byte, then segments separated by 0xff (fuzz_util.h), one per
 * message in order (initiator -> target first, then alternating). Segment: a control byte,
 * then text. Control bits 0-1: 0 pass the genuine message, 1 replace it with the text, 2 the
 * genuine keys followed by the text's keys, 3 the text followed by the genuine keys; bit 2
 * gives the receiver a small output buffer first (-ENOSPC must leave its state unchanged, so
 * the same keys are then fed again with room). A missing segment means "pass".
 * Configuration byte: bits 0-1 the algorithms the target accepts, bits 2-3 the initiator's,
 * bit 4 mutual CHAP, bit 5 the target requires CHAP, bit 6 the initiator requires CHAP, bit 7
 * the initiator uses a wrong secret.
 *
 * Properties checked beyond "no crash":
 *  - when every message passed unchanged, the outcome is the one the configuration implies
 *    (both sides done, or the expected side fails);
 *  - the target finishes a CHAP exchange only on the CHAP_N it expects and a CHAP_R equal to
 *    H(CHAP_I, secret, the challenge it sent); the initiator finishes mutual CHAP only on the
 *    target's correct response to its own challenge;
 *  - a failure sets an error text and an RFC login status; output text is well-formed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "proto/chap.h"
#include "proto/pdu.h"
#include "session/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define USER	 "fuzz-user"
#define SECRET	 "fuzz-secret-0123"
#define BADSEC	 "fuzz-secret-0124"
#define MUSER	 "fuzz-target"
#define MSECRET	 "fuzz-target-secret"
#define MAX_KV	 64
#define MSG_CAP	 8192
#define MAX_MSGS 10

static const uint8_t alg_sets[4][4] = {{8, 7, 6, 5}, {5, 0, 0, 0}, {7, 8, 0, 0}, {6, 5, 8, 0}};
static const int alg_counts[4] = {4, 1, 2, 3};

struct side {
	struct auth_state st;
	int last;	   /* last auth_recv() result (or auth_start()) */
	bool failed;
};

/* What the receiver needs to verify a response, captured before a message is fed. */
struct snap {
	int alg;
	uint8_t id;
	uint8_t challenge[sizeof(((struct auth_state *)0)->challenge)];
	size_t challenge_len;
	uint8_t mutual_id;
};

static void snapshot(const struct auth_state *st, struct snap *s)
{
	memset(s, 0, sizeof(*s)); /* padding too: snapshots are compared with memcmp */
	s->alg = st->alg;
	s->id = st->id;
	s->mutual_id = st->mutual_id;
	s->challenge_len = st->challenge_len;
	memcpy(s->challenge, st->challenge, sizeof(s->challenge));
}

static const char *kv_get(const struct text_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

/* r (a CHAP_R value) must be H(id || secret || challenge). */
static void check_response(int alg, uint8_t id, const char *secret, const struct snap *s,
			   const char *r)
{
	uint8_t got[CHAP_MAX_CHALLENGE_LEN], want[CHAP_MAX_DIGEST_LEN];
	size_t got_len;
	int n;

	if (!r || text_decode_binary(r, got, sizeof(got), &got_len) != 0)
		abort();
	n = chap_response(alg, id, (const uint8_t *)secret, strlen(secret), s->challenge,
			  s->challenge_len, want);
	if (n <= 0 || got_len != (size_t)n || memcmp(got, want, got_len) != 0)
		abort();
}

/* Build the message actually delivered: genuine text and/or fuzz text per the control bits. */
static size_t compose(uint8_t ctl, const char *gen, size_t gen_len, const uint8_t *fz,
		      size_t fz_len, char *msg)
{
	size_t len = 0;

	switch (ctl & 3) {
	case 0:
		memcpy(msg, gen, gen_len);
		return gen_len;
	case 1:
		memcpy(msg, fz, fz_len);
		return fz_len;
	case 2:
		memcpy(msg, gen, gen_len);
		len = gen_len;
		memcpy(msg + len, fz, fz_len);
		return len + fz_len;
	default:
		memcpy(msg, fz, fz_len);
		len = fz_len;
		memcpy(msg + len, gen, gen_len);
		return len + gen_len;
	}
}

static int append_raw(struct text_out *o, const char *buf, size_t len)
{
	if (o->cap - o->len < len)
		return -ENOSPC;
	memcpy(o->buf + o->len, buf, len);
	o->len += len;
	return 0;
}

/* Deliver msg to side `to`; its reply goes to reply. */
static void deliver(struct side *to, uint8_t ctl, char *msg, size_t len, struct text_out *reply)
{
	struct text_kv kv[MAX_KV];
	size_t n;
	int r;

	if (text_parse(msg, len, kv, MAX_KV, &n) != 0) {
		to->failed = true; /* the login code fails a malformed PDU */
		return;
	}
	if (ctl & 0x04) {
		char small[24];
		struct text_out o;
		struct snap before, after;
		int phase = to->st.phase;
		bool done = to->st.done, chap = to->st.method_chap;

		snapshot(&to->st, &before);
		text_out_init(&o, small, sizeof(small));
		r = auth_recv(&to->st, kv, n, &o);
		if (r == -ENOSPC) {
			/* "nothing appended, state unchanged" */
			snapshot(&to->st, &after);
			if (o.len != 0 || phase != to->st.phase || done != to->st.done ||
			    chap != to->st.method_chap || memcmp(&before, &after, sizeof(before)) != 0)
				abort();
		} else {
			/* it fitted: that is the reply */
			if (r >= 0 && append_raw(reply, small, o.len) != 0)
				abort();
			to->last = r;
			goto judged;
		}
	}
	r = auth_recv(&to->st, kv, n, reply);
	if (r == -ENOSPC)
		abort(); /* a reply always fits in 8 KiB */
	to->last = r;
judged:
	if (to->last < 0) {
		if (!to->st.error[0] || (to->st.fail_status >> 8) < 2)
			abort();
		to->failed = true;
		return;
	}
	fuzz_check_our_text(reply->buf, reply->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct auth_creds ic, tc;
	struct side ini, tgt;
	struct fuzz_seg fs = {0};
	char gen[MSG_CAP], msg[2 * MSG_CAP], out[MSG_CAP];
	struct text_out o;
	size_t gen_len;
	bool tampered = false, to_target = true;
	uint8_t cfg;

	if (size < 1)
		return 0;
	cfg = data[0];
	fs.p = data + 1;
	fs.left = size - 1;

	memset(&tc, 0, sizeof(tc));
	tc.required = cfg & 0x20;
	tc.user = USER;
	tc.secret = (const uint8_t *)SECRET;
	tc.secret_len = strlen(SECRET);
	memcpy(tc.algs, alg_sets[cfg & 3], 4);
	tc.nalgs = alg_counts[cfg & 3];
	ic = tc;
	memcpy(ic.algs, alg_sets[(cfg >> 2) & 3], 4);
	ic.nalgs = alg_counts[(cfg >> 2) & 3];
	ic.required = cfg & 0x40;
	if (cfg & 0x80) {
		ic.secret = (const uint8_t *)BADSEC;
		ic.secret_len = strlen(BADSEC);
	}
	if (cfg & 0x10) {
		tc.mutual_user = ic.mutual_user = MUSER;
		tc.mutual_secret = ic.mutual_secret = (const uint8_t *)MSECRET;
		tc.mutual_secret_len = ic.mutual_secret_len = strlen(MSECRET);
	}

	memset(&ini, 0, sizeof(ini));
	memset(&tgt, 0, sizeof(tgt));
	auth_init(&ini.st, ISCSI_ROLE_INITIATOR, &ic);
	auth_init(&tgt.st, ISCSI_ROLE_TARGET, &tc);
	text_out_init(&o, gen, sizeof(gen));
	ini.last = auth_start(&ini.st, &o);
	if (ini.last < 0)
		abort(); /* the credentials above are always usable */
	gen_len = o.len;

	for (int m = 0; m < MAX_MSGS && !ini.failed && !tgt.failed; m++) {
		struct side *to = to_target ? &tgt : &ini;
		const uint8_t *seg = NULL;
		size_t seg_len = 0, len;
		uint8_t ctl = 0;
		struct snap s;
		const char *r_val = NULL, *n_val = NULL;
		struct text_kv kv[MAX_KV];
		char copy[2 * MSG_CAP + 1];
		size_t n = 0;

		if (fuzz_seg_next(&fs, &seg, &seg_len) && seg_len > 0) {
			ctl = seg[0];
			seg++;
			seg_len--;
		}
		if (seg_len > MSG_CAP)
			seg_len = MSG_CAP;
		if (ctl & 3)
			tampered = true;
		len = compose(ctl, gen, gen_len, seg, seg_len, msg);
		/* Keep a parsed copy to know what CHAP_N / CHAP_R the receiver saw. */
		memcpy(copy, msg, len);
		if (text_parse(copy, len, kv, MAX_KV, &n) == 0) {
			n_val = kv_get(kv, n, "CHAP_N");
			r_val = kv_get(kv, n, "CHAP_R");
		}
		snapshot(&to->st, &s);
		bool was_done = to->st.done;
		text_out_init(&o, out, sizeof(out));
		deliver(to, ctl, msg, len, &o);
		if (!to->failed && to->st.done && !was_done) {
			if (to_target && tc.required && !to->st.method_chap)
				abort(); /* required CHAP skipped */
			if (to_target && to->st.method_chap) {
				if (!n_val || strcmp(n_val, USER) != 0)
					abort();
				check_response(s.alg, s.id, SECRET, &s, r_val);
			} else if (!to_target && to->st.method_chap && ic.mutual_secret) {
				if (!n_val || strcmp(n_val, MUSER) != 0)
					abort();
				check_response(s.alg, s.mutual_id, MSECRET, &s, r_val);
			}
		}
		memcpy(gen, out, o.len);
		gen_len = o.len;
		to_target = !to_target;
		if (ini.st.done && tgt.st.done && gen_len == 0)
			break;
	}

	if (!tampered) {
		bool chap_possible = false;

		for (int i = 0; i < ic.nalgs; i++)
			for (int j = 0; j < tc.nalgs; j++)
				if (ic.algs[i] == tc.algs[j] && chap_alg_available(ic.algs[i]))
					chap_possible = true;
		/* Honest peers with the same secret and a common algorithm always succeed. */
		if (chap_possible && !(cfg & 0x80) && (ini.failed || tgt.failed))
			abort();
		/* A wrong initiator secret never gets past a CHAP exchange. */
		if ((cfg & 0x80) && tgt.st.method_chap && tgt.st.done)
			abort();
	}
	auth_clear(&ini.st);
	auth_clear(&tgt.st);
	return 0;
}
