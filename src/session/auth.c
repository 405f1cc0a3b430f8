/* Login security stage: AuthMethod and CHAP for both roles (RFC 7143 12.1.3, RFC 1994).
 *
 * Exchange (all in CSG=0), each line one login PDU (sequence):
 *   I: AuthMethod=CHAP,None          T: AuthMethod=CHAP
 *   I: CHAP_A=<a1,a2,...>            T: CHAP_A=<a> CHAP_I=<id> CHAP_C=<challenge>
 *   I: CHAP_N CHAP_R [CHAP_I CHAP_C] T: [CHAP_N CHAP_R]   (bracketed: mutual CHAP)
 *
 * Each call of auth_recv() gets the security keys of one PDU sequence; the phase says which keys
 * that PDU must carry, and anything else fails the login. Status codes: RFC 7143 12.1.3 answers
 * every CHAP failure with "Authentication failure" (0x0201); a key repeated within a PDU or
 * AuthMethod renegotiated later is an initiator error (0x0200, RFC 7143 6.2); local failures
 * (random source, libcrypto) are a target error (0x0300).
 *
 * Secrets are only ever passed to chap_response(); error strings name keys, never values of
 * secrets, and responses computed on the stack are wiped after use.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/pdu.h"
#include "session/auth.h"

enum auth_phase {
	PH_START = 0,	/* nothing exchanged yet */
	PH_T_CHAP_A,	/* target: AuthMethod=CHAP answered, CHAP_A expected */
	PH_T_RESPONSE,	/* target: challenge sent, CHAP_N + CHAP_R expected */
	PH_I_METHOD,	/* initiator: AuthMethod offered, the target's choice expected */
	PH_I_CHALLENGE, /* initiator: CHAP_A sent, CHAP_A + CHAP_I + CHAP_C expected */
	PH_I_MUTUAL,	/* initiator: response and our challenge sent, CHAP_N + CHAP_R expected */
	PH_DONE,	/* authenticated, or no authentication chosen */
	PH_FAILED,
};

/* The security keys of one PDU. */
struct sec_keys {
	const char *method, *a, *i, *c, *n, *r;
};

static const struct auth_creds no_creds;

static const uint8_t default_algs[] = {CHAP_ALG_MD5, CHAP_ALG_SHA1, CHAP_ALG_SHA256,
				       CHAP_ALG_SHA3_256};

void auth_init(struct auth_state *st, enum iscsi_role role, const struct auth_creds *creds)
{
	memset(st, 0, sizeof(*st));
	st->role = role;
	st->creds = creds ? creds : &no_creds;
	st->phase = PH_START;
}

void auth_clear(struct auth_state *st)
{
	explicit_bzero(st->challenge, sizeof(st->challenge));
	st->challenge_len = 0;
	st->id = 0;
	st->mutual_id = 0;
}

bool auth_is_security_key(const char *key)
{
	return key && (strcmp(key, "AuthMethod") == 0 || strncmp(key, "CHAP_", 5) == 0);
}

__attribute__((format(printf, 4, 5))) static int fail(struct auth_state *st, int err,
						      uint16_t status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->error, sizeof(st->error), fmt, ap);
	va_end(ap);
	st->fail_status = status;
	st->phase = PH_FAILED;
	st->done = false;
	explicit_bzero(st->challenge, sizeof(st->challenge));
	st->challenge_len = 0;
	return err;
}

static bool have_secret(const struct auth_creds *c)
{
	return c->user && c->secret && c->secret_len > 0 && c->secret_len <= CHAP_MAX_SECRET_LEN;
}

static bool have_mutual(const struct auth_creds *c)
{
	return c->mutual_user && c->mutual_secret && c->mutual_secret_len > 0 &&
	       c->mutual_secret_len <= CHAP_MAX_SECRET_LEN;
}

/* RFC 7143 12.1.3: a secret used to authenticate initiators MUST NOT authenticate targets. */
static bool same_secrets(const struct auth_creds *c)
{
	return c->secret_len == c->mutual_secret_len &&
	       chap_equal(c->secret, c->mutual_secret, c->secret_len);
}

/* Is alg allowed by the credentials (and computable here)? */
static bool alg_allowed(const struct auth_creds *c, long alg)
{
	const uint8_t *algs = c->nalgs > 0 ? c->algs : default_algs;
	int n = c->nalgs > 0 ? c->nalgs : 4;

	if (n > 4)
		n = 4;
	for (int i = 0; i < n; i++) {
		if (algs[i] == alg)
			return chap_digest_len((int)alg) > 0 && chap_alg_available((int)alg);
	}
	return false;
}

/* Sort one PDU's keys into slots: a duplicate or an unknown CHAP_ key fails the login. */
static int collect(struct auth_state *st, const struct text_kv *kvs, size_t n, struct sec_keys *k)
{
	static const char *const names[] = {"AuthMethod", "CHAP_A", "CHAP_I",
					    "CHAP_C",	  "CHAP_N", "CHAP_R"};
	const char **slots[] = {&k->method, &k->a, &k->i, &k->c, &k->n, &k->r};

	memset(k, 0, sizeof(*k));
	for (size_t j = 0; j < n; j++) {
		size_t s;

		if (!kvs[j].key || !kvs[j].value)
			return fail(st, -EINVAL, ISCSI_LOGIN_INIT_ERR, "NULL key or value");
		if (!auth_is_security_key(kvs[j].key))
			continue; /* not ours: the login code handles it */
		for (s = 0; s < sizeof(names) / sizeof(names[0]); s++) {
			if (strcmp(kvs[j].key, names[s]) == 0)
				break;
		}
		if (s == sizeof(names) / sizeof(names[0]))
			return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED, "unsupported CHAP key");
		if (*slots[s])
			return fail(st, -EPROTO, ISCSI_LOGIN_INIT_ERR, "%s received twice",
				    names[s]);
		*slots[s] = kvs[j].value;
	}
	return 0;
}

static int count_keys(const struct sec_keys *k)
{
	return !!k->method + !!k->a + !!k->i + !!k->c + !!k->n + !!k->r;
}

/* Append "key=value" pairs as a unit: on -ENOSPC nothing stays appended. */
static int emit(struct text_out *out, size_t mark, int ret)
{
	if (ret)
		out->len = mark;
	return ret;
}

/* Parse CHAP_I: decimal (hex accepted too) 0..255. */
static int parse_id(const char *v, uint8_t *id)
{
	uint64_t x;
	int ret = text_parse_num(v, 0, 255, &x);

	if (ret == 0)
		*id = (uint8_t)x;
	return ret;
}

/* Decode a CHAP_R and check it against H(id || secret || challenge) in constant time.
 * Returns 0 if it matches, -EACCES if not, -EPROTO if malformed, -EIO locally. */
static int check_response(int alg, uint8_t id, const uint8_t *secret, size_t secret_len,
			  const uint8_t *challenge, size_t challenge_len, const char *value)
{
	uint8_t got[CHAP_MAX_DIGEST_LEN], want[CHAP_MAX_DIGEST_LEN];
	size_t dlen = chap_digest_len(alg), len = 0;
	int ret;

	if (text_decode_binary(value, got, sizeof(got), &len) != 0 || len != dlen)
		return -EPROTO;
	ret = chap_response(alg, id, secret, secret_len, challenge, challenge_len, want);
	if (ret < 0 || (size_t)ret != dlen)
		ret = -EIO;
	else
		ret = chap_equal(got, want, dlen) ? 0 : -EACCES;
	explicit_bzero(want, sizeof(want));
	return ret;
}

/* Append CHAP_N=name and CHAP_R=H(id || secret || challenge). */
static int send_response(struct text_out *out, int alg, uint8_t id, const char *name,
			 const uint8_t *secret, size_t secret_len, const uint8_t *challenge,
			 size_t challenge_len)
{
	uint8_t r[CHAP_MAX_DIGEST_LEN];
	char hex[2 * CHAP_MAX_DIGEST_LEN + 3];
	int ret = chap_response(alg, id, secret, secret_len, challenge, challenge_len, r);

	if (ret < 0 || (size_t)ret != chap_digest_len(alg)) {
		explicit_bzero(r, sizeof(r));
		return -EIO;
	}
	ret = text_encode_hex(r, (size_t)ret, hex, sizeof(hex));
	explicit_bzero(r, sizeof(r));
	if (ret)
		return -EIO;
	ret = text_out_add(out, "CHAP_N", name);
	if (ret == 0)
		ret = text_out_add(out, "CHAP_R", hex);
	return ret;
}

/* --- target role --- */

static int target_method(struct auth_state *st, const struct sec_keys *k, struct text_out *out)
{
	const struct auth_creds *c = st->creds;
	bool chap = false, none = false, offered_none = false;
	const char *p = k->method;
	int ret;

	if (count_keys(k) == 0)
		return AUTH_CONTINUE; /* no AuthMethod yet: auth_may_transit() decides */
	if (!k->method || count_keys(k) != 1)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED, "CHAP keys before AuthMethod");

	/* The first method of the initiator's list that policy allows. */
	while (*p && !chap && !none) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == 4 && memcmp(p, "CHAP", 4) == 0 && have_secret(c))
			chap = true;
		else if (len == 4 && memcmp(p, "None", 4) == 0) {
			offered_none = true;
			none = !c->required;
		}
		p = comma ? comma + 1 : p + len;
	}
	if (!chap && !none) {
		ret = text_out_add(out, "AuthMethod", "Reject");
		if (ret == -ENOSPC)
			return ret;
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
			    offered_none ? "AuthMethod=None refused: authentication is required"
					 : "no acceptable AuthMethod offered");
	}
	ret = text_out_add(out, "AuthMethod", chap ? "CHAP" : "None");
	if (ret)
		return ret;
	if (none) {
		st->phase = PH_DONE;
		st->done = true;
		return AUTH_DONE;
	}
	st->method_chap = true;
	st->phase = PH_T_CHAP_A;
	return AUTH_CONTINUE;
}

static int target_chap_a(struct auth_state *st, const struct sec_keys *k, struct text_out *out)
{
	uint8_t challenge[CHAP_MAX_DIGEST_LEN], id;
	char hex[2 * CHAP_MAX_DIGEST_LEN + 3];
	const char *p = k->a;
	size_t mark = out->len, dlen;
	int alg = -1, ret;

	if (!k->a || count_keys(k) != 1)
		return fail(st, -EPROTO, k->method ? ISCSI_LOGIN_INIT_ERR : ISCSI_LOGIN_AUTH_FAILED,
			    "expected CHAP_A alone");

	/* The first entry of the initiator's list that we allow ("CHAP_A=56" is 56, not 5). */
	while (*p && alg < 0) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char item[8];
		uint64_t v;

		if (len > 0 && len < sizeof(item)) {
			memcpy(item, p, len);
			item[len] = '\0';
			if (text_parse_num(item, 0, 255, &v) == 0 &&
			    alg_allowed(st->creds, (long)v))
				alg = (int)v;
		}
		p = comma ? comma + 1 : p + len;
	}
	if (alg < 0) {
		ret = text_out_add(out, "CHAP_A", "Reject");
		if (ret == -ENOSPC)
			return ret;
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED, "no acceptable CHAP_A offered");
	}

	dlen = chap_digest_len(alg);
	if (chap_random(&id, 1) != 0 || chap_random(challenge, dlen) != 0)
		return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "no random bytes for CHAP");
	if (text_encode_hex(challenge, dlen, hex, sizeof(hex)) != 0)
		return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "CHAP_C encoding");
	ret = text_out_addf(out, "CHAP_A", "%d", alg);
	if (ret == 0)
		ret = text_out_addf(out, "CHAP_I", "%u", (unsigned)id);
	if (ret == 0)
		ret = text_out_add(out, "CHAP_C", hex);
	if (emit(out, mark, ret))
		return ret;

	st->alg = alg;
	st->id = id;
	memcpy(st->challenge, challenge, dlen);
	st->challenge_len = dlen;
	explicit_bzero(challenge, sizeof(challenge));
	st->phase = PH_T_RESPONSE;
	return AUTH_CONTINUE;
}

static int target_response(struct auth_state *st, const struct sec_keys *k, struct text_out *out)
{
	const struct auth_creds *c = st->creds;
	uint8_t their[CHAP_MAX_CHALLENGE_LEN], their_id = 0;
	size_t their_len = 0, mark = out->len;
	bool name_ok;
	int ret;

	if (!k->n || !k->r || k->method || k->a)
		return fail(st, -EPROTO, k->method ? ISCSI_LOGIN_INIT_ERR : ISCSI_LOGIN_AUTH_FAILED,
			    "expected CHAP_N and CHAP_R");
	if (!k->i != !k->c)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "CHAP_I and CHAP_C must come together");

	/* Verify the initiator first: names are compared literally (a CHAP_N of "0x..." is a
	   name), and the response is checked even for an unknown name. */
	name_ok = c->user && strcmp(k->n, c->user) == 0;
	ret = check_response(st->alg, st->id, c->secret, c->secret_len, st->challenge,
			     st->challenge_len, k->r);
	if (ret == -EPROTO)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "CHAP_R malformed or not %zu bytes", chap_digest_len(st->alg));
	if (ret == -EIO)
		return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "CHAP digest failed");
	if (!name_ok)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED, "unknown CHAP_N");
	if (ret != 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED, "wrong CHAP_R");

	if (k->i) {
		/* Mutual CHAP: the initiator challenges us. */
		if (!have_mutual(c))
			return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
				    "mutual CHAP requested but not configured");
		if (same_secrets(c))
			return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
				    "mutual secret equals the initiator secret");
		if (parse_id(k->i, &their_id) != 0)
			return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
				    "CHAP_I malformed or above 255");
		if (text_decode_binary(k->c, their, sizeof(their), &their_len) != 0)
			return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
				    "CHAP_C malformed, empty or over %d bytes",
				    CHAP_MAX_CHALLENGE_LEN);
		if (their_len == st->challenge_len && memcmp(their, st->challenge, their_len) == 0)
			return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
				    "initiator reflected our CHAP challenge");
		ret = send_response(out, st->alg, their_id, c->mutual_user, c->mutual_secret,
				    c->mutual_secret_len, their, their_len);
		if (ret == -EIO)
			return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "CHAP digest failed");
		if (emit(out, mark, ret))
			return ret;
		st->mutual_id = their_id;
	}
	explicit_bzero(st->challenge, sizeof(st->challenge));
	st->challenge_len = 0;
	st->phase = PH_DONE;
	st->done = true;
	return AUTH_DONE;
}

/* --- initiator role --- */

/* The AuthMethod list we offer: CHAP when we have a secret, None unless required. */
static const char *initiator_methods(const struct auth_creds *c)
{
	if (!have_secret(c))
		return "None";
	return c->required ? "CHAP" : "CHAP,None";
}

int auth_start(struct auth_state *st, struct text_out *out)
{
	const struct auth_creds *c = st->creds;
	int ret;

	if (st->role != ISCSI_ROLE_INITIATOR || st->phase != PH_START) {
		snprintf(st->error, sizeof(st->error), "auth_start out of place");
		return -EINVAL;
	}
	if (c->required && !have_secret(c)) {
		snprintf(st->error, sizeof(st->error), "CHAP required but no credential set");
		return -EINVAL;
	}
	if (have_secret(c) && have_mutual(c) && same_secrets(c)) {
		snprintf(st->error, sizeof(st->error),
			 "mutual secret must differ from the initiator secret");
		return -EINVAL;
	}
	ret = text_out_add(out, "AuthMethod", initiator_methods(c));
	if (ret)
		return ret;
	st->phase = PH_I_METHOD;
	return 0;
}

static int initiator_method(struct auth_state *st, const struct sec_keys *k, struct text_out *out)
{
	const struct auth_creds *c = st->creds;
	const uint8_t *algs = c->nalgs > 0 ? c->algs : default_algs;
	int n = c->nalgs > 0 ? (c->nalgs > 4 ? 4 : c->nalgs) : 4;
	char list[4 * 4];
	size_t len = 0;
	int ret;

	if (count_keys(k) == 0)
		return AUTH_CONTINUE;
	if (!k->method || count_keys(k) != 1)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "expected AuthMethod alone from the target");
	if (strcmp(k->method, "Reject") == 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED, "target rejected AuthMethod");
	if (c->required && strcmp(k->method, "None") == 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
			    "target chose AuthMethod=None but CHAP is required");
	if (strchr(k->method, ',') || !text_list_contains(initiator_methods(c), k->method))
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "target chose an AuthMethod we did not offer");
	if (strcmp(k->method, "None") == 0) {
		st->phase = PH_DONE;
		st->done = true;
		return AUTH_DONE;
	}

	/* CHAP: offer our algorithms in order, skipping any libcrypto refuses here. */
	for (int i = 0; i < n; i++) {
		if (!alg_allowed(c, algs[i]))
			continue;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", len ? "," : "",
					(unsigned)algs[i]);
	}
	if (len == 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
			    "none of our CHAP algorithms is available");
	ret = text_out_add(out, "CHAP_A", list);
	if (ret)
		return ret;
	st->method_chap = true;
	st->phase = PH_I_CHALLENGE;
	return AUTH_CONTINUE;
}

static int initiator_challenge(struct auth_state *st, const struct sec_keys *k,
			       struct text_out *out)
{
	const struct auth_creds *c = st->creds;
	uint8_t their[CHAP_MAX_CHALLENGE_LEN], id, mid = 0, mine[CHAP_MAX_DIGEST_LEN];
	char hex[2 * CHAP_MAX_DIGEST_LEN + 3];
	size_t their_len = 0, dlen, mark = out->len;
	bool mutual = have_mutual(c);
	uint64_t alg;
	int ret;

	if (k->a && strcmp(k->a, "Reject") == 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
			    "target rejected our CHAP algorithms");
	if (!k->a || !k->i || !k->c || count_keys(k) != 3)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "expected CHAP_A, CHAP_I and CHAP_C from the target");
	if (text_parse_num(k->a, 0, 255, &alg) != 0 || !alg_allowed(c, (long)alg))
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "target chose a CHAP_A we did not offer");
	if (parse_id(k->i, &id) != 0)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED, "CHAP_I malformed or above 255");
	if (text_decode_binary(k->c, their, sizeof(their), &their_len) != 0)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "CHAP_C malformed, empty or over %d bytes", CHAP_MAX_CHALLENGE_LEN);

	dlen = chap_digest_len((int)alg);
	if (mutual) {
		/* Our challenge for the target; never equal to the one it sent us. */
		do {
			if (chap_random(&mid, 1) != 0 || chap_random(mine, dlen) != 0)
				return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR,
					    "no random bytes for CHAP");
		} while (their_len == dlen && memcmp(mine, their, dlen) == 0);
		if (text_encode_hex(mine, dlen, hex, sizeof(hex)) != 0)
			return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "CHAP_C encoding");
	}
	ret = send_response(out, (int)alg, id, c->user, c->secret, c->secret_len, their, their_len);
	if (ret == -EIO)
		return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "CHAP digest failed");
	if (ret == 0 && mutual) {
		ret = text_out_addf(out, "CHAP_I", "%u", (unsigned)mid);
		if (ret == 0)
			ret = text_out_add(out, "CHAP_C", hex);
	}
	if (emit(out, mark, ret)) {
		explicit_bzero(mine, sizeof(mine));
		return ret;
	}
	st->alg = (int)alg;
	st->id = id;
	if (!mutual) {
		st->phase = PH_DONE;
		st->done = true;
		return AUTH_DONE;
	}
	st->mutual_id = mid;
	memcpy(st->challenge, mine, dlen);
	st->challenge_len = dlen;
	explicit_bzero(mine, sizeof(mine));
	st->phase = PH_I_MUTUAL;
	return AUTH_CONTINUE;
}

static int initiator_mutual(struct auth_state *st, const struct sec_keys *k)
{
	const struct auth_creds *c = st->creds;
	int ret;

	if (!k->n || !k->r || count_keys(k) != 2)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED,
			    "target did not answer our CHAP challenge");
	ret = check_response(st->alg, st->mutual_id, c->mutual_secret, c->mutual_secret_len,
			     st->challenge, st->challenge_len, k->r);
	if (ret == -EPROTO)
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "target CHAP_R malformed or not %zu bytes", chap_digest_len(st->alg));
	if (ret == -EIO)
		return fail(st, -EIO, ISCSI_LOGIN_TARGET_ERROR, "CHAP digest failed");
	if (strcmp(k->n, c->mutual_user) != 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED, "target sent the wrong CHAP_N");
	if (ret != 0)
		return fail(st, -EACCES, ISCSI_LOGIN_AUTH_FAILED, "target sent a wrong CHAP_R");
	explicit_bzero(st->challenge, sizeof(st->challenge));
	st->challenge_len = 0;
	st->phase = PH_DONE;
	st->done = true;
	return AUTH_DONE;
}

int auth_recv(struct auth_state *st, const struct text_kv *kvs, size_t n, struct text_out *out)
{
	struct sec_keys k;
	int ret;

	if (st->phase == PH_FAILED)
		return -EPROTO; /* st->error and fail_status still say why */
	if (n > 0 && !kvs)
		return fail(st, -EINVAL, ISCSI_LOGIN_INIT_ERR, "NULL keys");
	ret = collect(st, kvs, n, &k);
	if (ret)
		return ret;

	switch (st->phase) {
	case PH_START:
		if (st->role == ISCSI_ROLE_TARGET)
			return target_method(st, &k, out);
		if (count_keys(&k) == 0)
			return AUTH_CONTINUE;
		return fail(st, -EPROTO, ISCSI_LOGIN_AUTH_FAILED,
			    "security keys from the target before we offered AuthMethod");
	case PH_T_CHAP_A:
		return target_chap_a(st, &k, out);
	case PH_T_RESPONSE:
		return target_response(st, &k, out);
	case PH_I_METHOD:
		return initiator_method(st, &k, out);
	case PH_I_CHALLENGE:
		return initiator_challenge(st, &k, out);
	case PH_I_MUTUAL:
		return initiator_mutual(st, &k);
	case PH_DONE:
		if (count_keys(&k) == 0)
			return AUTH_DONE;
		return fail(st, -EPROTO, k.method ? ISCSI_LOGIN_INIT_ERR : ISCSI_LOGIN_AUTH_FAILED,
			    "security keys after authentication completed");
	default:
		return fail(st, -EINVAL, ISCSI_LOGIN_TARGET_ERROR, "bad auth state");
	}
}

bool auth_awaiting_target_proof(const struct auth_state *st)
{
	return st->role == ISCSI_ROLE_INITIATOR && st->phase == PH_I_MUTUAL;
}

bool auth_may_transit(const struct auth_state *st)
{
	if (st->done)
		return true;
	return st->phase == PH_START && !st->creds->required;
}
