/* CHAP arithmetic for iSCSI (RFC 1994, RFC 7143 section 12.1.3): response = H(id || secret ||
 * challenge) with H chosen by CHAP_A (5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256). Pure functions on
 * caller buffers, backed by OpenSSL libcrypto. The exchange itself (which keys, in which order)
 * lives in session/auth. */
#ifndef IX_PROTO_CHAP_H
#define IX_PROTO_CHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum chap_alg {
	CHAP_ALG_MD5 = 5,
	CHAP_ALG_SHA1 = 6,
	CHAP_ALG_SHA256 = 7,
	CHAP_ALG_SHA3_256 = 8,
};

#define CHAP_MAX_DIGEST_LEN 32
#define CHAP_MAX_CHALLENGE_LEN 1024 /* largest challenge accepted from a peer */
#define CHAP_MAX_SECRET_LEN 255

/* Digest length in bytes for a CHAP_A value, or 0 if the algorithm is unknown. */
size_t chap_digest_len(int alg);

/* True if libcrypto can compute this algorithm here (MD5 may be missing under FIPS). */
bool chap_alg_available(int alg);

/* Name for logs and config ("MD5", "SHA1", "SHA256", "SHA3-256"), or NULL. */
const char *chap_alg_name(int alg);
/* Parse a name as used in config files (case-insensitive: md5, sha1, sha256, sha3-256) or the
 * decimal code; returns the enum value or -EINVAL. */
int chap_alg_parse(const char *s);

/* out (at least chap_digest_len(alg) bytes) = H(id || secret || challenge). Returns the digest
 * length, or -EINVAL (unknown alg) / -EOPNOTSUPP (known, but libcrypto refuses it here, see
 * chap_alg_available) / -EIO (libcrypto failure). */
int chap_response(int alg, uint8_t id, const uint8_t *secret, size_t secret_len,
		  const uint8_t *challenge, size_t challenge_len, uint8_t *out);

/* Constant-time comparison of two responses of equal length. */
bool chap_equal(const uint8_t *a, const uint8_t *b, size_t len);

/* Fill buf with cryptographically random bytes. 0 or -EIO. */
int chap_random(void *buf, size_t len);

#endif
