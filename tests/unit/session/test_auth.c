/* Security stage (session/auth): initiator-role and target-role states talking to each other
 * for every CHAP algorithm, one-way and mutual; the failures the RFC and libiscsi's iSCSICHAP
 * tests require; and a known-answer check of CHAP_R. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/chap.h"
#include "proto/pdu.h"
#include "session/auth.h"
#include "tap.h"

#define SECRET	"ix-secret-0123456789"
#define MSECRET "ix-target-secret-9876"

static const char *out_get(const struct text_out *o, const char *key)
{
	size_t klen = strlen(key);

	for (size_t pos = 0; pos < o->len; pos += strlen(o->buf + pos) + 1) {
		const char *pair = o->buf + pos;

		if (strncmp(pair, key, klen) == 0 && pair[klen] == '=')
			return pair + klen + 1;
	}
	return NULL;
}

static void creds_init(struct auth_creds *c, const char *user, const char *secret)
{
	memset(c, 0, sizeof(*c));
	c->user = user;
	c->secret = (const uint8_t *)secret;
	c->secret_len = secret ? strlen(secret) : 0;
}

static void creds_mutual(struct auth_creds *c, const char *user, const char *secret)
{
	c->mutual_user = user;
	c->mutual_secret = (const uint8_t *)secret;
	c->mutual_secret_len = strlen(secret);
}

/* Parse one side's output and feed it to the other. */
static int feed(struct auth_state *to, const struct text_out *from, struct text_out *reply)
{
	struct text_kv kv[16];
	char copy[4096];
	size_t n = 0;

	memcpy(copy, from->buf, from->len);
	if (text_parse(copy, from->len, kv, 16, &n) != 0)
		return -EBADMSG;
	return auth_recv(to, kv, n, reply);
}

/* A whole security stage: returns 0 when both sides are done, else the first error, with
 * *who set to 'I' or 'T'. */
static int run(const struct auth_creds *ic, const struct auth_creds *tc, struct auth_state *ini,
	       struct auth_state *tgt, char *who)
{
	char b1[4096], b2[4096];
	struct text_out req, rsp;
	int r;

	*who = '-';
	auth_init(ini, ISCSI_ROLE_INITIATOR, ic);
	auth_init(tgt, ISCSI_ROLE_TARGET, tc);
	text_out_init(&req, b1, sizeof(b1));
	r = auth_start(ini, &req);
	if (r < 0) {
		*who = 'I';
		return r;
	}
	for (int round = 0; round < 6; round++) {
		text_out_init(&rsp, b2, sizeof(b2));
		r = feed(tgt, &req, &rsp);
		if (r < 0) {
			*who = 'T';
			return r;
		}
		text_out_init(&req, b1, sizeof(b1));
		r = feed(ini, &rsp, &req);
		if (r < 0) {
			*who = 'I';
			return r;
		}
		if (ini->done && tgt->done && req.len == 0)
			return 0;
	}
	return -ELOOP;
}

/* Feed the target-role (or initiator-role) state one PDU given as key, value, ..., NULL. */
static int step(struct auth_state *st, struct text_out *o, const char *const *pairs)
{
	struct text_kv kv[16];
	size_t n = 0;

	o->len = 0;
	while (pairs[2 * n]) {
		kv[n].key = pairs[2 * n];
		kv[n].value = pairs[2 * n + 1];
		n++;
	}
	return auth_recv(st, kv, n, o);
}

static void test_pairs(void)
{
	static const struct {
		int alg;
		bool mutual;
	} cases[] = {
	    {CHAP_ALG_MD5, false},	{CHAP_ALG_MD5, true},	   {CHAP_ALG_SHA1, false},
	    {CHAP_ALG_SHA1, true},	{CHAP_ALG_SHA256, false},  {CHAP_ALG_SHA256, true},
	    {CHAP_ALG_SHA3_256, false}, {CHAP_ALG_SHA3_256, true},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct auth_creds ic, tc;
		struct auth_state ini, tgt;
		char who;
		int r;

		if (!chap_alg_available(cases[i].alg)) {
			printf("# skip: CHAP_A=%d not available in this libcrypto\n", cases[i].alg);
			continue;
		}
		creds_init(&ic, "iqn.2024-01.org.ix:init", SECRET);
		ic.algs[0] = (uint8_t)cases[i].alg;
		ic.nalgs = 1;
		ic.required = true;
		creds_init(&tc, "iqn.2024-01.org.ix:init", SECRET);
		tc.required = true;
		if (cases[i].mutual) {
			creds_mutual(&ic, "iqn.2024-01.org.ix:tgt", MSECRET);
			creds_mutual(&tc, "iqn.2024-01.org.ix:tgt", MSECRET);
		}
		r = run(&ic, &tc, &ini, &tgt, &who);
		if (r)
			printf("# alg %d mutual %d: %c %d (%s / %s)\n", cases[i].alg,
			       cases[i].mutual, who, r, ini.error, tgt.error);
		CHECK_EQ(r, 0);
		CHECK(ini.done && tgt.done);
		CHECK(ini.method_chap && tgt.method_chap);
		CHECK_EQ(ini.alg, cases[i].alg);
		CHECK_EQ(tgt.alg, cases[i].alg);
		CHECK(auth_may_transit(&ini) && auth_may_transit(&tgt));
		CHECK_EQ(tgt.challenge_len, 0); /* wiped once used */
		auth_clear(&ini);
		auth_clear(&tgt);
	}
}

/* Algorithm choice: the target takes the first entry of the initiator's list it allows. */
static void test_alg_choice(void)
{
	struct auth_creds ic, tc;
	struct auth_state ini, tgt;
	char who;

	creds_init(&ic, "u", SECRET);
	creds_init(&tc, "u", SECRET);
	/* default lists: 5,6,7,8 offered, the first available wins */
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), 0);
	CHECK_EQ(tgt.alg, chap_alg_available(CHAP_ALG_MD5) ? CHAP_ALG_MD5 : CHAP_ALG_SHA1);

	ic.algs[0] = CHAP_ALG_SHA3_256;
	ic.algs[1] = CHAP_ALG_SHA256;
	ic.nalgs = 2;
	tc.algs[0] = CHAP_ALG_SHA256;
	tc.nalgs = 1;
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), 0);
	CHECK_EQ(tgt.alg, CHAP_ALG_SHA256);

	/* no overlap: the target rejects the list */
	ic.algs[0] = CHAP_ALG_SHA1;
	ic.nalgs = 1;
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'T');
	CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
}

static void test_wrong_credentials(void)
{
	struct auth_creds ic, tc;
	struct auth_state ini, tgt;
	char who;

	/* wrong secret */
	creds_init(&ic, "alice", "not-the-secret-0000");
	creds_init(&tc, "alice", SECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'T');
	CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
	CHECK(strstr(tgt.error, "CHAP_R") != NULL);
	CHECK(strstr(tgt.error, SECRET) == NULL && strstr(tgt.error, "not-the-secret") == NULL);
	CHECK(!auth_may_transit(&tgt));
	/* a failed state stays failed */
	{
		char b[64];
		struct text_out o;
		static const char *const none[] = {NULL};

		text_out_init(&o, b, sizeof(b));
		CHECK_EQ(step(&tgt, &o, none), -EPROTO);
		CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
	}

	/* wrong user, right secret */
	creds_init(&ic, "mallory", SECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'T');
	CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
	CHECK(strstr(tgt.error, "CHAP_N") != NULL);

	/* mutual: the target proves itself with the wrong secret */
	creds_init(&ic, "alice", SECRET);
	creds_mutual(&ic, "target", MSECRET);
	creds_mutual(&tc, "target", "some-other-secret-42");
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'I');
	CHECK(strstr(ini.error, "CHAP_R") != NULL);
	CHECK(strstr(ini.error, MSECRET) == NULL);

	/* mutual: the target answers with an unexpected name */
	creds_mutual(&tc, "impostor", MSECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'I');
	CHECK(strstr(ini.error, "CHAP_N") != NULL);

	/* mutual requested by the initiator, not configured on the target */
	creds_init(&tc, "alice", SECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'T');
	CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
	CHECK(strstr(tgt.error, "mutual") != NULL);

	/* the same secret in both directions is refused (RFC 7143 12.1.3) */
	creds_mutual(&tc, "target", SECRET);
	creds_init(&ic, "alice", SECRET);
	creds_mutual(&ic, "target", SECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EINVAL);
	CHECK_EQ(who, 'I');
	ic.mutual_secret = (const uint8_t *)MSECRET; /* initiator fine, target misconfigured */
	ic.mutual_secret_len = strlen(MSECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
	CHECK_EQ(who, 'T');

	/* a user name that looks like hex is still a name */
	creds_init(&ic, "0x1234", SECRET);
	creds_init(&tc, "0x1234", SECRET);
	CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), 0);
}

static void test_auth_method(void)
{
	static const struct {
		bool required, secret;
		const char *offer, *answer;
		int ret;
	} cases[] = {
	    {false, true, "CHAP,None", "CHAP", AUTH_CONTINUE},
	    {false, true, "None,CHAP", "None", AUTH_DONE},
	    {false, true, "None", "None", AUTH_DONE},
	    {false, false, "CHAP,None", "None", AUTH_DONE},
	    {false, false, "CHAP", "Reject", -EACCES},
	    {true, true, "CHAP,None", "CHAP", AUTH_CONTINUE},
	    {true, true, "None", "Reject", -EACCES},
	    {true, true, "KRB5,SRP,CHAP", "CHAP", AUTH_CONTINUE},
	    {true, true, "KRB5,SRP", "Reject", -EACCES},
	    {true, true, "", "Reject", -EACCES},
	    {true, true, "chap", "Reject", -EACCES},
	    {true, false, "CHAP,None", "Reject", -EACCES},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *const pdu[] = {"AuthMethod", cases[i].offer, NULL};
		struct auth_creds tc;
		struct auth_state tgt;
		struct text_out o;
		char b[256];
		int r;

		creds_init(&tc, "u", cases[i].secret ? SECRET : NULL);
		tc.required = cases[i].required;
		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		text_out_init(&o, b, sizeof(b));
		r = step(&tgt, &o, pdu);
		CHECK_EQ(r, cases[i].ret);
		CHECK_STR(out_get(&o, "AuthMethod"), cases[i].answer);
		if (r < 0)
			CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
		CHECK_EQ(auth_may_transit(&tgt), r == AUTH_DONE);
	}

	/* No AuthMethod at all: may transit only when nothing is required. */
	{
		static const char *const none[] = {NULL};
		struct auth_creds tc;
		struct auth_state tgt;
		struct text_out o;
		char b[64];

		creds_init(&tc, "u", SECRET);
		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		text_out_init(&o, b, sizeof(b));
		CHECK_EQ(step(&tgt, &o, none), AUTH_CONTINUE);
		CHECK(auth_may_transit(&tgt));
		tc.required = true;
		CHECK(!auth_may_transit(&tgt));
		auth_init(&tgt, ISCSI_ROLE_TARGET, NULL);
		CHECK(auth_may_transit(&tgt));
	}

	/* End to end: an initiator without CHAP against a target requiring it. */
	{
		struct auth_creds ic, tc;
		struct auth_state ini, tgt;
		char who;

		creds_init(&ic, NULL, NULL);
		creds_init(&tc, "u", SECRET);
		tc.required = true;
		CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), -EACCES);
		CHECK_EQ(who, 'T');
		CHECK(strstr(tgt.error, "None") != NULL);
		/* ... and against a target that does not require it */
		tc.required = false;
		CHECK_EQ(run(&ic, &tc, &ini, &tgt, &who), 0);
		CHECK(!ini.method_chap && !tgt.method_chap);
	}
}

/* Drive a target to the point where it has sent its challenge. */
static void target_challenge(struct auth_state *tgt, const struct auth_creds *tc,
			     struct text_out *o, const char *chap_a, int *alg, uint8_t *id,
			     uint8_t *chal, size_t *clen)
{
	const char *const m[] = {"AuthMethod", "CHAP", NULL};
	const char *const a[] = {"CHAP_A", chap_a, NULL};
	uint64_t v = 0;

	auth_init(tgt, ISCSI_ROLE_TARGET, tc);
	CHECK_EQ(step(tgt, o, m), AUTH_CONTINUE);
	CHECK_EQ(step(tgt, o, a), AUTH_CONTINUE);
	CHECK_EQ(text_parse_num(out_get(o, "CHAP_A"), 0, 255, &v), 0);
	*alg = (int)v;
	CHECK_EQ(text_parse_num(out_get(o, "CHAP_I"), 0, 255, &v), 0);
	*id = (uint8_t)v;
	CHECK_EQ(text_decode_binary(out_get(o, "CHAP_C"), chal, CHAP_MAX_CHALLENGE_LEN, clen), 0);
}

static void b64(const uint8_t *in, size_t len, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	out[o++] = '0';
	out[o++] = 'b';
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		out[o++] = i + 1 < len ? t[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < len ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

static void test_target_checks(void)
{
	struct auth_creds tc;
	struct auth_state tgt;
	struct text_out o;
	char b[4096], rhex[80], rb64[80], chex[80];
	uint8_t chal[CHAP_MAX_CHALLENGE_LEN], r[CHAP_MAX_DIGEST_LEN], id;
	size_t clen = 0;
	int alg = 0;

	creds_init(&tc, "alice", SECRET);
	creds_mutual(&tc, "target", MSECRET);
	text_out_init(&o, b, sizeof(b));

	/* The challenge is as long as the digest, CHAP_I a byte. */
	target_challenge(&tgt, &tc, &o, "7,5", &alg, &id, chal, &clen);
	CHECK_EQ(alg, CHAP_ALG_SHA256);
	CHECK_EQ(clen, 32);
	CHECK_EQ(tgt.challenge_len, 32);
	CHECK(!auth_may_transit(&tgt));
	auth_clear(&tgt);
	CHECK_EQ(tgt.challenge_len, 0);
	{
		static const uint8_t zero[sizeof(tgt.challenge)];
		CHECK_MEM(tgt.challenge, zero, sizeof(zero));
	}

	/* CHAP_R in base64 is accepted. */
	target_challenge(&tgt, &tc, &o, "7", &alg, &id, chal, &clen);
	CHECK_EQ(chap_response(alg, id, (const uint8_t *)SECRET, strlen(SECRET), chal, clen, r),
		 32);
	b64(r, 32, rb64);
	{
		const char *const rsp[] = {"CHAP_N", "alice", "CHAP_R", rb64, NULL};
		CHECK_EQ(step(&tgt, &o, rsp), AUTH_DONE);
		CHECK_EQ(o.len, 0); /* one-way: nothing to say */
		CHECK(auth_may_transit(&tgt));
	}
	/* ... and nothing after completion. */
	{
		const char *const again[] = {"CHAP_A", "7", NULL};
		CHECK_EQ(step(&tgt, &o, again), -EPROTO);
	}

	/* Reflection: the initiator returns our own challenge as its mutual challenge. */
	target_challenge(&tgt, &tc, &o, "5,7", &alg, &id, chal, &clen);
	CHECK(chap_response(alg, id, (const uint8_t *)SECRET, strlen(SECRET), chal, clen, r) > 0);
	CHECK_EQ(text_encode_hex(r, chap_digest_len(alg), rhex, sizeof(rhex)), 0);
	CHECK_EQ(text_encode_hex(chal, clen, chex, sizeof(chex)), 0);
	{
		char idbuf[8];
		snprintf(idbuf, sizeof(idbuf), "%u", (unsigned)id);
		const char *const rsp[] = {"CHAP_N", "alice",  "CHAP_R", rhex, "CHAP_I",
					   idbuf,    "CHAP_C", chex,	 NULL};
		CHECK_EQ(step(&tgt, &o, rsp), -EACCES);
		CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
		CHECK(strstr(tgt.error, "reflect") != NULL);
		CHECK(out_get(&o, "CHAP_R") == NULL);
	}

	/* Malformed responses after a valid challenge. Each row: the keys of the PDU, with
	   "@R" standing for a correct CHAP_R. */
	static const struct {
		const char *pairs[10];
		int ret;
		uint16_t status;
	} bad[] = {
	    {{"CHAP_N", "alice", NULL}, -EPROTO, ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_R", "@R", NULL}, -EPROTO, ISCSI_LOGIN_AUTH_FAILED},
	    {{NULL}, -EPROTO, ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "0x0011", NULL}, -EPROTO, ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "zz", NULL}, -EPROTO, ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "", NULL}, -EPROTO, ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "1", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_C", "0x0102", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "256", "CHAP_C", "0x0102", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "1", "CHAP_C", "", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "1", "CHAP_C", "0x", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "1", "CHAP_C", "@BIG", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"CHAP_N", "alice", "CHAP_N", "alice", "CHAP_R", "@R", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_INIT_ERR},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_X", "1", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_AUTH_FAILED},
	    {{"AuthMethod", "CHAP", "CHAP_N", "alice", "CHAP_R", "@R", NULL},
	     -EPROTO,
	     ISCSI_LOGIN_INIT_ERR},
	    {{"CHAP_N", "Alice", "CHAP_R", "@R", NULL}, -EACCES, ISCSI_LOGIN_AUTH_FAILED},
	    /* the good cases, to show the rows above fail for the reason given */
	    {{"CHAP_N", "alice", "CHAP_R", "@R", NULL}, AUTH_DONE, 0},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "0x10", "CHAP_C", "0x0102", NULL},
	     AUTH_DONE,
	     0},
	    {{"CHAP_N", "alice", "CHAP_R", "@R", "CHAP_I", "255", "CHAP_C", "@1024", NULL},
	     AUTH_DONE,
	     0},
	};
	static char big[2 * 1025 + 3], max[2 * 1024 + 3];

	memset(big, 'a', sizeof(big) - 1);
	big[0] = '0';
	big[1] = 'x';
	big[sizeof(big) - 1] = '\0';
	memset(max, 'b', sizeof(max) - 1);
	max[0] = '0';
	max[1] = 'x';
	max[sizeof(max) - 1] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *pdu[10];
		int ret;

		target_challenge(&tgt, &tc, &o, "5,6,7,8", &alg, &id, chal, &clen);
		CHECK(chap_response(alg, id, (const uint8_t *)SECRET, strlen(SECRET), chal, clen,
				    r) > 0);
		CHECK_EQ(text_encode_hex(r, chap_digest_len(alg), rhex, sizeof(rhex)), 0);
		for (int j = 0; j < 10; j++) {
			const char *v = bad[i].pairs[j];

			pdu[j] = v && strcmp(v, "@R") == 0	? rhex
				 : v && strcmp(v, "@BIG") == 0	? big
				 : v && strcmp(v, "@1024") == 0 ? max
								: v;
		}
		ret = step(&tgt, &o, pdu);
		if (ret != bad[i].ret)
			printf("# row %zu: %d (%s)\n", i, ret, tgt.error);
		CHECK_EQ(ret, bad[i].ret);
		if (ret < 0) {
			CHECK_EQ(tgt.fail_status, bad[i].status);
			CHECK(strstr(tgt.error, SECRET) == NULL);
		} else if (bad[i].pairs[6]) {
			CHECK_STR(out_get(&o, "CHAP_N"), "target");
			CHECK(out_get(&o, "CHAP_R") != NULL);
		}
	}
}

/* libiscsi iSCSICHAP: CHAP_A=56 and CHAP_A= must fail the login; keys out of order fail. */
static void test_chap_a(void)
{
	static const struct {
		const char *value, *answer;
		int ret;
	} cases[] = {
	    {"56", "Reject", -EACCES},	  {"", "Reject", -EACCES},	{"4", "Reject", -EACCES},
	    {"9", "Reject", -EACCES},	  {"MD5", "Reject", -EACCES},	{",", "Reject", -EACCES},
	    {"7", "7", AUTH_CONTINUE},	  {"56,7", "7", AUTH_CONTINUE}, {"x,7", "7", AUTH_CONTINUE},
	    {"7,,6", "7", AUTH_CONTINUE}, {"8,7", "8", AUTH_CONTINUE},
	};
	const char *const m[] = {"AuthMethod", "CHAP", NULL};
	struct auth_creds tc;
	struct auth_state tgt;
	struct text_out o;
	char b[256];

	creds_init(&tc, "u", SECRET);
	text_out_init(&o, b, sizeof(b));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *const a[] = {"CHAP_A", cases[i].value, NULL};

		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, m), AUTH_CONTINUE);
		CHECK_EQ(step(&tgt, &o, a), cases[i].ret);
		CHECK_STR(out_get(&o, "CHAP_A"), cases[i].answer);
		if (cases[i].ret < 0) {
			CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
			CHECK(out_get(&o, "CHAP_C") == NULL);
		} else {
			CHECK(out_get(&o, "CHAP_I") != NULL && out_get(&o, "CHAP_C") != NULL);
		}
	}

	/* MD5 is the only algorithm RFC 7143 requires: CHAP_A=5,6,7,8 picks it if it exists. */
	if (chap_alg_available(CHAP_ALG_MD5)) {
		const char *const a[] = {"CHAP_A", "5,6,7,8", NULL};

		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, m), AUTH_CONTINUE);
		CHECK_EQ(step(&tgt, &o, a), AUTH_CONTINUE);
		CHECK_STR(out_get(&o, "CHAP_A"), "5");
		CHECK_EQ(strlen(out_get(&o, "CHAP_C")), 2 + 2 * 16);
	}

	/* Out of order and duplicated keys. */
	{
		const char *const early[] = {"CHAP_A", "5", NULL};
		const char *const both[] = {"AuthMethod", "CHAP", "CHAP_A", "5", NULL};
		const char *const dup[] = {"CHAP_A", "5", "CHAP_A", "7", NULL};
		const char *const resp[] = {"CHAP_N", "u", "CHAP_R", "0x00", NULL};
		const char *const remeth[] = {"AuthMethod", "CHAP", NULL};

		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, early), -EPROTO);
		CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, both), -EPROTO);
		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, m), AUTH_CONTINUE);
		CHECK_EQ(step(&tgt, &o, dup), -EPROTO);
		CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_INIT_ERR);
		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, m), AUTH_CONTINUE);
		CHECK_EQ(step(&tgt, &o, resp), -EPROTO);
		CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_AUTH_FAILED);
		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, m), AUTH_CONTINUE);
		CHECK_EQ(step(&tgt, &o, remeth), -EPROTO);
		CHECK_EQ(tgt.fail_status, ISCSI_LOGIN_INIT_ERR);
	}

	/* A full output buffer: -ENOSPC, nothing appended, and the same call can be retried. */
	{
		const char *const a[] = {"CHAP_A", "7", NULL};
		char tiny[24];
		struct text_out t;

		auth_init(&tgt, ISCSI_ROLE_TARGET, &tc);
		CHECK_EQ(step(&tgt, &o, m), AUTH_CONTINUE);
		text_out_init(&t, tiny, sizeof(tiny));
		CHECK_EQ(step(&tgt, &t, a), -ENOSPC);
		CHECK_EQ(t.len, 0);
		CHECK_EQ(step(&tgt, &o, a), AUTH_CONTINUE);
		CHECK_STR(out_get(&o, "CHAP_A"), "7");
	}
}

/* Known answer: CHAP_R for a fixed CHAP_I and CHAP_C, computed independently with Python:
 *   hashlib.new(name, bytes([0x2a]) + b"ix-secret-0123456789" + bytes(range(0x10, 0x30)))
 * for md5, sha1, sha256 and sha3_256. The initiator role computes it from the keys it gets. */
static void test_known_answer(void)
{
	static const struct {
		int alg;
		const char *r;
	} kat[] = {
	    {CHAP_ALG_MD5, "0x0e7f85af36302d172e37d0c03d354148"},
	    {CHAP_ALG_SHA1, "0x38c9fecca72c145c9dfbe4e8aa25e720440c10a1"},
	    {CHAP_ALG_SHA256, "0xf6d529a9428dfa64afd0d0545de9349085c4341751b2100b62f200c2e5ae086e"},
	    {CHAP_ALG_SHA3_256,
	     "0x18a4f35c4d7295f25266728ac2c6350838dba46b1dc3949f8d744b355bee4c11"},
	};
	static const char *const challenges[] = {
	    "0x101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f",
	    "0X101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F",
	    "0bEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8=",
	};

	for (size_t i = 0; i < sizeof(kat) / sizeof(kat[0]); i++) {
		for (size_t j = 0; j < sizeof(challenges) / sizeof(challenges[0]); j++) {
			const char *const m[] = {"AuthMethod", "CHAP", NULL};
			char alg[4];
			struct auth_creds ic;
			struct auth_state ini;
			struct text_out o;
			char b[512];

			if (!chap_alg_available(kat[i].alg)) {
				printf("# skip: CHAP_A=%d not available\n", kat[i].alg);
				continue;
			}
			snprintf(alg, sizeof(alg), "%d", kat[i].alg);
			const char *const c[] = {"CHAP_A", alg,		  "CHAP_I", "42",
						 "CHAP_C", challenges[j], NULL};

			creds_init(&ic, "iqn.2024-01.org.ix:init", SECRET);
			ic.algs[0] = (uint8_t)kat[i].alg;
			ic.nalgs = 1;
			auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
			text_out_init(&o, b, sizeof(b));
			CHECK_EQ(auth_start(&ini, &o), 0);
			CHECK_STR(out_get(&o, "AuthMethod"), "CHAP,None");
			CHECK_EQ(step(&ini, &o, m), AUTH_CONTINUE);
			CHECK_STR(out_get(&o, "CHAP_A"), alg);
			CHECK_EQ(step(&ini, &o, c), AUTH_DONE);
			CHECK_STR(out_get(&o, "CHAP_N"), "iqn.2024-01.org.ix:init");
			CHECK_STR(out_get(&o, "CHAP_R"), kat[i].r);
			CHECK(out_get(&o, "CHAP_I") == NULL); /* one-way */
		}
	}
}

static void test_initiator_checks(void)
{
	const char *const chap[] = {"AuthMethod", "CHAP", NULL};
	struct auth_creds ic;
	struct auth_state ini;
	struct text_out o;
	char b[512];

	text_out_init(&o, b, sizeof(b));

	/* Opening offers. */
	creds_init(&ic, "u", SECRET);
	ic.required = true;
	auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
	CHECK(!auth_may_transit(&ini)); /* required: not before the exchange */
	CHECK_EQ(auth_start(&ini, &o), 0);
	CHECK_STR(out_get(&o, "AuthMethod"), "CHAP");
	CHECK(!auth_may_transit(&ini));
	creds_init(&ic, NULL, NULL);
	auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
	CHECK(auth_may_transit(&ini));
	o.len = 0;
	CHECK_EQ(auth_start(&ini, &o), 0);
	CHECK_STR(out_get(&o, "AuthMethod"), "None");
	ic.required = true;
	auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
	CHECK_EQ(auth_start(&ini, &o), -EINVAL); /* required but nothing to prove it with */

	/* The target's choice of method. */
	static const struct {
		bool required, secret;
		const char *answer;
		int ret;
	} meth[] = {
	    {true, true, "None", -EACCES},	  {true, true, "Reject", -EACCES},
	    {false, true, "None", AUTH_DONE},	  {false, false, "CHAP", -EPROTO},
	    {false, true, "CHAP,None", -EPROTO},  {false, true, "SRP", -EPROTO},
	    {false, true, "CHAP", AUTH_CONTINUE},
	};
	for (size_t i = 0; i < sizeof(meth) / sizeof(meth[0]); i++) {
		const char *const pdu[] = {"AuthMethod", meth[i].answer, NULL};

		creds_init(&ic, "u", meth[i].secret ? SECRET : NULL);
		ic.required = meth[i].required;
		auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
		o.len = 0;
		CHECK_EQ(auth_start(&ini, &o), 0);
		CHECK_EQ(step(&ini, &o, pdu), meth[i].ret);
	}

	/* The target's challenge. */
	static const struct {
		const char *pairs[10];
		int ret;
	} chal[] = {
	    {{"CHAP_A", "7", "CHAP_I", "1", "CHAP_C", "0x0102", NULL}, -EPROTO}, /* not offered */
	    {{"CHAP_A", "Reject", NULL}, -EACCES},
	    {{"CHAP_A", "5", "CHAP_I", "1", NULL}, -EPROTO},
	    {{"CHAP_A", "5", "CHAP_I", "300", "CHAP_C", "0x0102", NULL}, -EPROTO},
	    {{"CHAP_A", "5", "CHAP_I", "1", "CHAP_C", "", NULL}, -EPROTO},
	    {{"CHAP_A", "5", "CHAP_I", "1", "CHAP_C", "0x0102", "CHAP_N", "t", NULL}, -EPROTO},
	    {{"CHAP_A", "5,6", "CHAP_I", "1", "CHAP_C", "0x0102", NULL}, -EPROTO},
	    {{"CHAP_A", "5", "CHAP_I", "1", "CHAP_C", "0x0102", NULL}, AUTH_DONE},
	};
	for (size_t i = 0; i < sizeof(chal) / sizeof(chal[0]); i++) {
		if (!chap_alg_available(CHAP_ALG_MD5))
			break;
		creds_init(&ic, "u", SECRET);
		ic.algs[0] = CHAP_ALG_MD5;
		ic.nalgs = 1;
		auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
		o.len = 0;
		CHECK_EQ(auth_start(&ini, &o), 0);
		CHECK_EQ(step(&ini, &o, chap), AUTH_CONTINUE);
		CHECK_EQ(step(&ini, &o, chal[i].pairs), chal[i].ret);
	}

	/* Mutual: the target must answer our challenge. */
	if (chap_alg_available(CHAP_ALG_SHA256)) {
		const char *const c[] = {"CHAP_A", "7", "CHAP_I", "9", "CHAP_C", "0x0102", NULL};
		static const char *const none[] = {NULL};

		creds_init(&ic, "u", SECRET);
		creds_mutual(&ic, "t", MSECRET);
		auth_init(&ini, ISCSI_ROLE_INITIATOR, &ic);
		o.len = 0;
		CHECK_EQ(auth_start(&ini, &o), 0);
		CHECK_EQ(step(&ini, &o, chap), AUTH_CONTINUE);
		CHECK_EQ(step(&ini, &o, c), AUTH_CONTINUE);
		CHECK(out_get(&o, "CHAP_I") != NULL);
		CHECK_EQ(strlen(out_get(&o, "CHAP_C")), 2 + 2 * 32);
		CHECK(!auth_may_transit(&ini));
		CHECK_EQ(step(&ini, &o, none), -EACCES);
		CHECK(strstr(ini.error, "did not answer") != NULL);
	}
}

int main(void)
{
	test_pairs();
	test_alg_choice();
	test_wrong_credentials();
	test_auth_method();
	test_target_checks();
	test_chap_a();
	test_known_answer();
	test_initiator_checks();
	return tap_done();
}
