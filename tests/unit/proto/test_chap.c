/* CHAP arithmetic tests. The expected digests were computed outside this code base:
 *   python3 -c "import hashlib; print(hashlib.new(ALG, bytes([ID]) + SECRET + CHALLENGE)
 *               .hexdigest())"
 * and the MD5 / SHA3-256 / empty-challenge rows re-checked with `openssl dgst -md5` /
 * `openssl dgst -sha3-256` over the same bytes written with printf. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/chap.h"
#include "tap.h"

static int unhex(const char *s, uint8_t *out)
{
	int n = 0;

	for (; s[0] && s[1]; s += 2) {
		unsigned v;

		if (sscanf(s, "%2x", &v) != 1)
			return -1;
		out[n++] = (uint8_t)v;
	}
	return n;
}

struct kat {
	int alg;
	uint8_t id;
	const char *secret;    /* hex */
	const char *challenge; /* hex */
	const char *response;  /* hex */
};

static const struct kat kats[] = {
    /* MD5, id 1, secret "secretsecret", challenge 00..0f */
    {CHAP_ALG_MD5, 0x01, "736563726574736563726574", "000102030405060708090a0b0c0d0e0f",
     "226dc576c33f04ff9c3a200ffe35f442"},
    /* MD5, id 7, secret "abcdefghijkl", empty challenge */
    {CHAP_ALG_MD5, 0x07, "6162636465666768696a6b6c", "", "75581edc9a9e0d1045c4f4345eba427a"},
    /* SHA-1, id 0xa5, secret "ix-test-secret-16", challenge ff fe .. ec (20 bytes) */
    {CHAP_ALG_SHA1, 0xa5, "69782d746573742d7365637265742d3136",
     "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0efeeedec", "33d762c1204a6f09b2877f8be37ae6971bb9c743"},
    /* SHA-256, id 0, secret 01..20, challenge 32 x 5a */
    {CHAP_ALG_SHA256, 0x00, "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",
     "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
     "f7e78cc3f4842d596beab1004082077de9ab1b9f85d4ae9c73c0c09d34425cad"},
    /* SHA3-256, id 0xff, secret "0123456789abcdef", challenge 20..3f */
    {CHAP_ALG_SHA3_256, 0xff, "30313233343536373839616263646566",
     "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
     "adbcbb6ddbc374670ce81198f980a634d76a6374f208de0dbeada2bc326617f5"},
};

static void test_kats(void)
{
	for (size_t i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
		const struct kat *k = &kats[i];
		uint8_t secret[64], chal[64], exp[CHAP_MAX_DIGEST_LEN], out[CHAP_MAX_DIGEST_LEN];
		int slen = unhex(k->secret, secret), clen = unhex(k->challenge, chal);
		int elen = unhex(k->response, exp);

		if (!chap_alg_available(k->alg)) {
			printf("ok %d # SKIP %s not available here\n", ++tap_n,
			       chap_alg_name(k->alg));
			continue;
		}
		CHECK_EQ(chap_digest_len(k->alg), elen);
		memset(out, 0, sizeof(out));
		CHECK_EQ(
		    chap_response(k->alg, k->id, secret, (size_t)slen, chal, (size_t)clen, out),
		    elen);
		CHECK_MEM(out, exp, (size_t)elen);
		CHECK(chap_equal(out, exp, (size_t)elen));
		/* a different id gives a different response */
		CHECK_EQ(chap_response(k->alg, (uint8_t)(k->id + 1), secret, (size_t)slen, chal,
				       (size_t)clen, out),
			 elen);
		CHECK(!chap_equal(out, exp, (size_t)elen));
	}
}

static void test_algs(void)
{
	CHECK_EQ(chap_digest_len(CHAP_ALG_MD5), 16);
	CHECK_EQ(chap_digest_len(CHAP_ALG_SHA1), 20);
	CHECK_EQ(chap_digest_len(CHAP_ALG_SHA256), 32);
	CHECK_EQ(chap_digest_len(CHAP_ALG_SHA3_256), 32);
	CHECK_EQ(chap_digest_len(4), 0);
	CHECK_EQ(chap_digest_len(9), 0);
	CHECK_EQ(chap_digest_len(-1), 0);

	CHECK_STR(chap_alg_name(CHAP_ALG_MD5), "MD5");
	CHECK_STR(chap_alg_name(CHAP_ALG_SHA1), "SHA1");
	CHECK_STR(chap_alg_name(CHAP_ALG_SHA256), "SHA256");
	CHECK_STR(chap_alg_name(CHAP_ALG_SHA3_256), "SHA3-256");
	CHECK(chap_alg_name(0) == NULL);

	CHECK(!chap_alg_available(0));
	CHECK(!chap_alg_available(9));
	/* SHA-256 is in every provider, FIPS included. */
	CHECK(chap_alg_available(CHAP_ALG_SHA256));

	CHECK_EQ(chap_alg_parse("md5"), CHAP_ALG_MD5);
	CHECK_EQ(chap_alg_parse("MD5"), CHAP_ALG_MD5);
	CHECK_EQ(chap_alg_parse("sha1"), CHAP_ALG_SHA1);
	CHECK_EQ(chap_alg_parse("Sha256"), CHAP_ALG_SHA256);
	CHECK_EQ(chap_alg_parse("sha3-256"), CHAP_ALG_SHA3_256);
	CHECK_EQ(chap_alg_parse("SHA3-256"), CHAP_ALG_SHA3_256);
	CHECK_EQ(chap_alg_parse("5"), CHAP_ALG_MD5);
	CHECK_EQ(chap_alg_parse("8"), CHAP_ALG_SHA3_256);
	CHECK_EQ(chap_alg_parse("56"), -EINVAL);
	CHECK_EQ(chap_alg_parse("4"), -EINVAL);
	CHECK_EQ(chap_alg_parse("9"), -EINVAL);
	CHECK_EQ(chap_alg_parse(""), -EINVAL);
	CHECK_EQ(chap_alg_parse("sha3"), -EINVAL);
	CHECK_EQ(chap_alg_parse("5 "), -EINVAL);
	CHECK_EQ(chap_alg_parse("-5"), -EINVAL);
	CHECK_EQ(chap_alg_parse("99999999999999999999"), -EINVAL);
	CHECK_EQ(chap_alg_parse(NULL), -EINVAL);

	uint8_t out[CHAP_MAX_DIGEST_LEN];
	CHECK_EQ(chap_response(4, 1, (const uint8_t *)"s", 1, (const uint8_t *)"c", 1, out),
		 -EINVAL);
	CHECK_EQ(chap_response(0, 1, (const uint8_t *)"s", 1, (const uint8_t *)"c", 1, out),
		 -EINVAL);
}

static void test_equal_random(void)
{
	static const uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
	uint8_t r1[32], r2[32];
	static const uint8_t zero[32];

	CHECK(chap_equal(a, a, 4));
	CHECK(!chap_equal(a, b, 4));
	CHECK(chap_equal(a, b, 3));

	/* 256 random bits twice: equal, or all zero, only if the generator is broken. */
	CHECK_EQ(chap_random(r1, sizeof(r1)), 0);
	CHECK_EQ(chap_random(r2, sizeof(r2)), 0);
	CHECK(memcmp(r1, r2, sizeof(r1)) != 0);
	CHECK(memcmp(r1, zero, sizeof(r1)) != 0);
	CHECK_EQ(chap_random(r1, 0), 0);
}

int main(void)
{
	test_kats();
	test_algs();
	test_equal_random();
	return tap_done();
}
