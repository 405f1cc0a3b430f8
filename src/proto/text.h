/* iSCSI text format (RFC 7143 section 6.1): key=value pairs, each terminated by NUL, carried in
 * Login and Text PDUs, possibly across several PDUs with the C (continue) bit. Pure code: the
 * caller owns every buffer. */
#ifndef IX_PROTO_TEXT_H
#define IX_PROTO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TEXT_MAX_KEY_LEN 63       /* RFC 7143 6.1 */
#define TEXT_MAX_VALUE_LEN 255    /* default; some keys (CHAP_C, CHAP_R) allow more */
#define TEXT_MAX_LONG_VALUE 8192  /* absolute cap the parser enforces for any value */

/* One pair, pointing into the parsed buffer (NUL-terminated in place). */
struct text_kv {
	const char *key;
	const char *value;
};

/* Accumulates the data segments of a text exchange that spans PDUs (C=1 ... C=0). The caller
 * provides the storage. One byte of it is kept spare (and NUL) behind the text, so
 * text_parse(a->buf, a->len, ...) is always safe: size the storage as the largest text you
 * accept + 1. */
struct text_accum {
	char *buf;
	size_t len, cap;
};

void text_accum_init(struct text_accum *a, char *storage, size_t cap);
void text_accum_reset(struct text_accum *a);
/* Append one PDU's data segment. Returns 0 or -ENOSPC (len + data would exceed cap - 1: the
 * peer sent too much text; the caller fails the login / rejects). */
int text_accum_append(struct text_accum *a, const void *data, size_t len);

/* Parse len bytes of buf in place into pairs. Rules: every pair is "key=value" followed by a
 * NUL, except that a final pair without its NUL is accepted (some initiators omit it) and
 * trailing NUL padding is skipped. Keys are 1..63 bytes of [A-Za-z0-9.-+@_] (RFC 7143 6.1),
 * plus '#' as the second byte after a capital letter (public extension keys, "X#name"),
 * values 0..TEXT_MAX_LONG_VALUE bytes (the value is everything after the first '='; an empty
 * value is returned as "" for the caller to judge). An empty item between pairs ("a=1\0\0b=2")
 * is malformed.
 * Returns 0 with *n pairs; -EBADMSG for a pair without '=' or an invalid key or an over-long
 * value or an empty item; -E2BIG if there are more than max pairs; on error *n is 0 and buf may
 * be partly modified. Parsing writes NULs into buf, including buf[len] when the final pair has
 * no NUL: buf must then have one writable byte past len (text_accum guarantees it). */
int text_parse(char *buf, size_t len, struct text_kv *kvs, size_t max, size_t *n);

/* Builder for outgoing text. */
struct text_out {
	char *buf;
	size_t len, cap;
};

void text_out_init(struct text_out *o, char *storage, size_t cap);
/* Append "key=value\0". Returns 0, -EINVAL (key not 1..63 bytes of the key alphabet, value
 * over TEXT_MAX_LONG_VALUE, or for addf a formatted value containing NUL) or -ENOSPC; nothing
 * is appended on error (o->len unchanged). */
int text_out_add(struct text_out *o, const char *key, const char *value);
int text_out_addf(struct text_out *o, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Value helpers. */
/* Decimal, or hex with 0x/0X prefix; no sign, no trailing junk, no overflow. 0 or -EINVAL. */
int text_parse_u64(const char *v, uint64_t *out);
/* Range-checked form: -EINVAL if not a number, -ERANGE if outside [min, max]. */
int text_parse_num(const char *v, uint64_t min, uint64_t max, uint64_t *out);
/* "Yes"/"No" (case sensitive per RFC). 0 or -EINVAL. */
int text_parse_bool(const char *v, bool *out);
/* Binary value: "0x" hex (even or odd digit count, as RFC 7143 allows: an odd count has an
 * implied leading 0 nibble) or "0b" base64 (RFC 4648 alphabet; '=' padding optional but, if
 * present, at most 2 and making the length a multiple of 4; n digits give n*3/4 bytes).
 * Returns 0 with *len bytes, -EINVAL on bad encoding or empty value, -ENOSPC if > cap. */
int text_decode_binary(const char *v, uint8_t *out, size_t cap, size_t *len);
/* Encode as "0x" + lower-case hex, NUL terminated (needs cap >= 2 * len + 3). Returns 0,
 * -EINVAL for len == 0 (an empty binary value cannot be encoded), or -ENOSPC. */
int text_encode_hex(const uint8_t *in, size_t len, char *out, size_t cap);
/* Does the comma-separated list contain item exactly (case-sensitive, whole item)? False for
 * an empty item. */
bool text_list_contains(const char *list, const char *item);

#endif
