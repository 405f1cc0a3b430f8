/* iSCSI text format: key=value\0 pairs (RFC 7143 section 6.1) and value encodings (section
 * 6.1 / 5.1 of RFC 3720: decimal, 0x hex, 0b base64, Yes/No, comma lists). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/text.h"
#include "util/hex.h"

/* --- accumulation across PDUs --- */

void text_accum_init(struct text_accum *a, char *storage, size_t cap)
{
	a->buf = storage;
	a->cap = cap;
	text_accum_reset(a);
}

void text_accum_reset(struct text_accum *a)
{
	a->len = 0;
	if (a->cap)
		a->buf[0] = '\0';
}

int text_accum_append(struct text_accum *a, const void *data, size_t len)
{
	if (len == 0)
		return 0;
	/* Keep one byte spare behind the text: text_parse() may need it to terminate a final
	 * pair that arrived without its NUL. */
	if (a->cap == 0 || len > a->cap - 1 - a->len)
		return -ENOSPC;
	memcpy(a->buf + a->len, data, len);
	a->len += len;
	a->buf[a->len] = '\0';
	return 0;
}

/* --- parsing --- */

static bool key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '+' || c == '@' || c == '_';
}

/* RFC 7143 6.1 key alphabet; '#' is allowed as the second character after a capital letter
 * for IANA-registered public extension keys ("X#name", see "Private or Public Extension Keys",
 * RFC 3720 12.22). */
static bool key_valid(const char *k, size_t klen)
{
	if (klen == 0 || klen > TEXT_MAX_KEY_LEN)
		return false;
	for (size_t i = 0; i < klen; i++) {
		if (key_char(k[i]))
			continue;
		if (i == 1 && k[i] == '#' && k[0] >= 'A' && k[0] <= 'Z')
			continue;
		return false;
	}
	return true;
}

int text_parse(char *buf, size_t len, struct text_kv *kvs, size_t max, size_t *n)
{
	size_t end = len, pos = 0, count = 0;

	*n = 0;
	while (end > 0 && buf[end - 1] == '\0')
		end--;

	while (pos < end) {
		char *s = buf + pos, *nul, *eq;
		size_t slen, klen;

		nul = memchr(s, '\0', end - pos);
		slen = nul ? (size_t)(nul - s) : end - pos;
		if (slen == 0)
			return -EBADMSG; /* an empty item between two pairs */
		eq = memchr(s, '=', slen);
		if (!eq)
			return -EBADMSG;
		klen = (size_t)(eq - s);
		if (!key_valid(s, klen) || slen - klen - 1 > TEXT_MAX_LONG_VALUE)
			return -EBADMSG;
		if (count == max)
			return -E2BIG;

		*eq = '\0';
		/* Already NUL unless this is a final pair sent without one: then s[slen] is
		 * buf[len], the spare byte the caller provides (see text.h). */
		s[slen] = '\0';
		kvs[count].key = s;
		kvs[count].value = eq + 1;
		count++;
		pos += slen + 1;
	}
	*n = count;
	return 0;
}

/* --- building --- */

void text_out_init(struct text_out *o, char *storage, size_t cap)
{
	o->buf = storage;
	o->cap = cap;
	o->len = 0;
}

int text_out_add(struct text_out *o, const char *key, const char *value)
{
	size_t klen = strlen(key), vlen = strlen(value);

	if (!key_valid(key, klen) || vlen > TEXT_MAX_LONG_VALUE)
		return -EINVAL;
	if (klen + vlen + 2 > o->cap - o->len)
		return -ENOSPC;
	memcpy(o->buf + o->len, key, klen);
	o->buf[o->len + klen] = '=';
	memcpy(o->buf + o->len + klen + 1, value, vlen + 1);
	o->len += klen + vlen + 2;
	return 0;
}

int text_out_addf(struct text_out *o, const char *key, const char *fmt, ...)
{
	size_t klen = strlen(key), room;
	char *v;
	va_list ap;
	int ret;

	if (!key_valid(key, klen))
		return -EINVAL;
	if (klen + 2 > o->cap - o->len)
		return -ENOSPC;
	v = o->buf + o->len + klen + 1;
	room = o->cap - o->len - klen - 1; /* value plus its NUL */

	va_start(ap, fmt);
	ret = vsnprintf(v, room, fmt, ap);
	va_end(ap);
	if (ret < 0)
		return -EINVAL;
	if ((size_t)ret >= room)
		return -ENOSPC;
	/* A %c of NUL would split the pair. */
	if ((size_t)ret > TEXT_MAX_LONG_VALUE || strlen(v) != (size_t)ret)
		return -EINVAL;

	memcpy(o->buf + o->len, key, klen);
	o->buf[o->len + klen] = '=';
	o->len += klen + 1 + (size_t)ret + 1;
	return 0;
}

/* --- values --- */

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static bool has_prefix(const char *v, char lower)
{
	return v[0] == '0' && (v[1] == lower || v[1] == lower - 'a' + 'A');
}

int text_parse_u64(const char *v, uint64_t *out)
{
	uint64_t val = 0;
	const char *p;

	if (!v || !*v)
		return -EINVAL;
	if (has_prefix(v, 'x')) {
		if (!v[2])
			return -EINVAL;
		for (p = v + 2; *p; p++) {
			int d = hex_digit(*p);

			if (d < 0 || val > (UINT64_MAX >> 4))
				return -EINVAL;
			val = (val << 4) | (uint64_t)d;
		}
	} else {
		for (p = v; *p; p++) {
			uint64_t d = (uint64_t)(*p - '0');

			if (*p < '0' || *p > '9' || val > (UINT64_MAX - d) / 10)
				return -EINVAL;
			val = val * 10 + d;
		}
	}
	*out = val;
	return 0;
}

int text_parse_num(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t val;
	int ret = text_parse_u64(v, &val);

	if (ret)
		return ret;
	if (val < min || val > max)
		return -ERANGE;
	*out = val;
	return 0;
}

int text_parse_bool(const char *v, bool *out)
{
	if (!v)
		return -EINVAL;
	if (strcmp(v, "Yes") == 0)
		*out = true;
	else if (strcmp(v, "No") == 0)
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* n hex digits hold (n + 1) / 2 bytes; an odd count has an implied leading zero nibble. */
static int decode_hex(const char *p, uint8_t *out, size_t cap, size_t *len)
{
	size_t n = strlen(p), olen = (n + 1) / 2, i = 0, o = 0;

	if (n == 0)
		return -EINVAL;
	for (size_t k = 0; k < n; k++) {
		if (hex_digit(p[k]) < 0)
			return -EINVAL;
	}
	if (olen > cap)
		return -ENOSPC;
	if (n % 2)
		out[o++] = (uint8_t)hex_digit(p[i++]);
	for (; i < n; i += 2)
		out[o++] = (uint8_t)(hex_digit(p[i]) << 4 | hex_digit(p[i + 1]));
	*len = olen;
	return 0;
}

/* Base64 (RFC 4648 alphabet). Padding is optional, but if present it makes the length a
 * multiple of 4; n digits hold n * 3 / 4 bytes (RFC 3720 5.1), so n % 4 == 1 is malformed. */
static int decode_b64(const char *p, uint8_t *out, size_t cap, size_t *len)
{
	size_t n = strlen(p), npad = 0, digits, olen, o = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (npad < n && p[n - 1 - npad] == '=')
		npad++;
	digits = n - npad;
	if (digits == 0 || npad > 2 || (npad && n % 4) || digits % 4 == 1)
		return -EINVAL;
	for (size_t k = 0; k < digits; k++) {
		if (b64_val(p[k]) < 0)
			return -EINVAL;
	}
	olen = digits * 3 / 4;
	if (olen > cap)
		return -ENOSPC;
	for (size_t k = 0; k < digits; k++) {
		acc = (acc << 6) | (uint32_t)b64_val(p[k]);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	*len = olen;
	return 0;
}

int text_decode_binary(const char *v, uint8_t *out, size_t cap, size_t *len)
{
	if (!v)
		return -EINVAL;
	if (has_prefix(v, 'x'))
		return decode_hex(v + 2, out, cap, len);
	if (has_prefix(v, 'b'))
		return decode_b64(v + 2, out, cap, len);
	return -EINVAL;
}

int text_encode_hex(const uint8_t *in, size_t len, char *out, size_t cap)
{
	static const char digits[] = "0123456789abcdef";

	if (len == 0)
		return -EINVAL;
	if (cap < 3 || len > (cap - 3) / 2)
		return -ENOSPC;
	out[0] = '0';
	out[1] = 'x';
	for (size_t i = 0; i < len; i++) {
		out[2 + 2 * i] = digits[in[i] >> 4];
		out[3 + 2 * i] = digits[in[i] & 0x0f];
	}
	out[2 + 2 * len] = '\0';
	return 0;
}

bool text_list_contains(const char *list, const char *item)
{
	size_t ilen;
	const char *p;

	if (!list || !item)
		return false;
	ilen = strlen(item);
	if (ilen == 0)
		return false;
	for (p = list;;) {
		const char *comma = strchr(p, ',');
		size_t seg = comma ? (size_t)(comma - p) : strlen(p);

		if (seg == ilen && memcmp(p, item, ilen) == 0)
			return true;
		if (!comma)
			return false;
		p = comma + 1;
	}
}
