/* CHAP digests over OpenSSL 3 EVP.
 *
 * Digests are fetched by name from the default library context on each call, so an algorithm
 * the active providers refuse (MD5 under the FIPS provider) reports as unavailable instead of
 * failing later. Logins are rare enough that the fetch cost does not matter.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "proto/chap.h"

struct chap_alg_desc {
	int alg;
	const char *name; /* for logs and config */
	const char *evp;  /* OpenSSL fetch name */
	size_t digest_len;
};

static const struct chap_alg_desc chap_algs[] = {
    {CHAP_ALG_MD5, "MD5", "MD5", 16},
    {CHAP_ALG_SHA1, "SHA1", "SHA1", 20},
    {CHAP_ALG_SHA256, "SHA256", "SHA256", 32},
    {CHAP_ALG_SHA3_256, "SHA3-256", "SHA3-256", 32},
};

#define N_ALGS (sizeof(chap_algs) / sizeof(chap_algs[0]))

static const struct chap_alg_desc *alg_desc(int alg)
{
	for (size_t i = 0; i < N_ALGS; i++) {
		if (chap_algs[i].alg == alg)
			return &chap_algs[i];
	}
	return NULL;
}

static EVP_MD *fetch_md(const struct chap_alg_desc *d)
{
	EVP_MD *md = EVP_MD_fetch(NULL, d->evp, NULL);

	/* A refused fetch leaves entries on this thread's error queue; nobody will read them. */
	if (!md)
		ERR_clear_error();
	return md;
}

size_t chap_digest_len(int alg)
{
	const struct chap_alg_desc *d = alg_desc(alg);

	return d ? d->digest_len : 0;
}

bool chap_alg_available(int alg)
{
	const struct chap_alg_desc *d = alg_desc(alg);
	EVP_MD *md;

	if (!d)
		return false;
	md = fetch_md(d);
	EVP_MD_free(md);
	return md != NULL;
}

const char *chap_alg_name(int alg)
{
	const struct chap_alg_desc *d = alg_desc(alg);

	return d ? d->name : NULL;
}

int chap_alg_parse(const char *s)
{
	unsigned long v = 0;
	const char *p;

	if (!s || !*s)
		return -EINVAL;
	for (size_t i = 0; i < N_ALGS; i++) {
		if (strcasecmp(s, chap_algs[i].name) == 0)
			return chap_algs[i].alg;
	}
	/* Decimal code: digits only (leading zeros allowed), bounded so it cannot overflow. */
	for (p = s; *p; p++) {
		if (!isdigit((unsigned char)*p) || p - s >= 8)
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	return alg_desc((int)v) ? (int)v : -EINVAL;
}

int chap_response(int alg, uint8_t id, const uint8_t *secret, size_t secret_len,
		  const uint8_t *challenge, size_t challenge_len, uint8_t *out)
{
	const struct chap_alg_desc *d = alg_desc(alg);
	unsigned int olen = 0;
	EVP_MD_CTX *ctx;
	EVP_MD *md;
	int ret = -EIO;

	if (!d)
		return -EINVAL;
	md = fetch_md(d);
	if (!md)
		return -EOPNOTSUPP;
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		goto out_md;

	if (EVP_DigestInit_ex(ctx, md, NULL) != 1 || EVP_DigestUpdate(ctx, &id, 1) != 1 ||
	    EVP_DigestUpdate(ctx, secret, secret_len) != 1 ||
	    EVP_DigestUpdate(ctx, challenge, challenge_len) != 1 ||
	    EVP_DigestFinal_ex(ctx, out, &olen) != 1 || olen != d->digest_len)
		goto out_ctx;
	ret = (int)olen;

out_ctx:
	EVP_MD_CTX_free(ctx);
out_md:
	EVP_MD_free(md);
	if (ret < 0)
		ERR_clear_error();
	return ret;
}

bool chap_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

int chap_random(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len > 0) {
		int n = len > INT_MAX ? INT_MAX : (int)len;

		if (RAND_bytes(p, n) != 1) {
			ERR_clear_error();
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
