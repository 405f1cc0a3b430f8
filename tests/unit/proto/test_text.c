/* Text key=value codec tests: parsing, accumulation across PDUs, building, value helpers.
 * Expected values are written from RFC 7143 section 6.1 / RFC 3720 section 5.1 and, for base64,
 * the RFC 4648 section 10 test vectors. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/text.h"
#include "tap.h"

#define MAXKV 8

/* Copy len bytes into a buffer with one spare byte (as text_parse() requires) poisoned, parse. */
static int parse(const char *data, size_t len, char *buf, struct text_kv *kvs, size_t max,
		 size_t *n)
{
	memcpy(buf, data, len);
	buf[len] = 'Z';
	return text_parse(buf, len, kvs, max, n);
}

static void test_parse_basic(void)
{
	static const char in[] = "InitiatorName=iqn.1994-05.com.redhat:abc\0"
				 "SessionType=Normal\0"
				 "AuthMethod=CHAP,None\0";
	char buf[sizeof(in) + 1];
	struct text_kv kv[MAXKV];
	size_t n = 99;

	CHECK_EQ(parse(in, sizeof(in) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_STR(kv[0].key, "InitiatorName");
	CHECK_STR(kv[0].value, "iqn.1994-05.com.redhat:abc");
	CHECK_STR(kv[1].key, "SessionType");
	CHECK_STR(kv[1].value, "Normal");
	CHECK_STR(kv[2].key, "AuthMethod");
	CHECK_STR(kv[2].value, "CHAP,None");
	CHECK(kv[0].key >= buf && kv[2].value < buf + sizeof(in)); /* parsed in place */
	CHECK_EQ(buf[sizeof(in) - 1], 'Z');			   /* spare byte untouched */

	/* The value is everything after the first '='. */
	static const char eq[] = "X-a=b=c\0";
	CHECK_EQ(parse(eq, sizeof(eq) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_STR(kv[0].key, "X-a");
	CHECK_STR(kv[0].value, "b=c");

	/* Every character RFC 7143 allows in a key. */
	static const char chars[] = "X-com.example_Key+v2@Zz09=1\0";
	CHECK_EQ(parse(chars, sizeof(chars) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_STR(kv[0].key, "X-com.example_Key+v2@Zz09");

	/* Public extension key (IANA-registered): '#' only as "<Capital>#". */
	static const char pub[] = "X#Example=1\0";
	CHECK_EQ(parse(pub, sizeof(pub) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_STR(kv[0].key, "X#Example");
}

static void test_parse_edges(void)
{
	char buf[64];
	struct text_kv kv[MAXKV];
	size_t n;

	/* Empty value: returned as "" (the caller decides whether that is acceptable). */
	static const char empty[] = "CHAP_A=\0HeaderDigest=None\0";
	CHECK_EQ(parse(empty, sizeof(empty) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(kv[0].key, "CHAP_A");
	CHECK_STR(kv[0].value, "");
	CHECK_STR(kv[1].value, "None");

	/* Trailing NUL padding is skipped. */
	static const char trail[] = "a=1\0\0\0\0";
	CHECK_EQ(parse(trail, sizeof(trail) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_STR(kv[0].value, "1");

	/* Nothing, or only NULs: zero pairs. */
	n = 99;
	CHECK_EQ(parse("", 0, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 0);
	n = 99;
	CHECK_EQ(parse("\0\0\0", 3, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 0);

	/* A final pair without its NUL: accepted, terminated in the spare byte. */
	static const char nonul[] = "a=1\0MaxBurstLength=262144";
	CHECK_EQ(parse(nonul, sizeof(nonul) - 1, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(kv[1].key, "MaxBurstLength");
	CHECK_STR(kv[1].value, "262144");
	CHECK_EQ(buf[sizeof(nonul) - 1], '\0');

	/* Single pair without NUL, empty value. */
	CHECK_EQ(parse("k=", 2, buf, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_STR(kv[0].value, "");
}

static void test_parse_errors(void)
{
	char buf[64];
	struct text_kv kv[MAXKV];
	size_t n;

	struct {
		const char *name;
		const char *in;
		size_t len;
	} bad[] = {
	    {"missing '='", "a=1\0NoEquals\0", 13},
	    {"missing '=' in a final pair without NUL", "a=1\0NoEquals", 12},
	    {"empty key", "=value\0", 7},
	    {"space in key", "Max Burst=1\0", 12},
	    {"'!' in key", "k!=1\0", 5},
	    {"':' in key", "iqn:x=1\0", 8},
	    {"empty item between pairs", "a=1\0\0b=2\0", 9},
	    {"leading NUL", "\0a=1\0", 5},
	    {"'#' not after a capital", "x#a=1\0", 6},
	    {"'#' later in a key", "XY#a=1\0", 7},
	    {"'#' alone", "#=1\0", 4},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret;

		n = 99;
		ret = parse(bad[i].in, bad[i].len, buf, kv, MAXKV, &n);
		tap_n++;
		if (ret == -EBADMSG && n == 0) {
			printf("ok %d - parse rejects %s\n", tap_n, bad[i].name);
		} else {
			tap_failed++;
			printf("not ok %d - parse rejects %s: %d, n=%zu\n", tap_n, bad[i].name, ret,
			       n);
		}
	}

	/* 63-byte key accepted, 64-byte key rejected. */
	char big[2 * TEXT_MAX_LONG_VALUE];
	char key[TEXT_MAX_KEY_LEN + 2];

	memset(key, 'K', sizeof(key));
	key[TEXT_MAX_KEY_LEN] = '\0';
	int len = snprintf(big, sizeof(big), "%s=v", key);
	CHECK_EQ(len, 65);
	CHECK_EQ(text_parse(big, (size_t)len + 1, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(strlen(kv[0].key), 63);
	key[TEXT_MAX_KEY_LEN] = 'K';
	key[TEXT_MAX_KEY_LEN + 1] = '\0';
	len = snprintf(big, sizeof(big), "%s=v", key);
	CHECK_EQ(text_parse(big, (size_t)len + 1, kv, MAXKV, &n), -EBADMSG);

	/* Value of TEXT_MAX_LONG_VALUE bytes accepted, one more rejected. */
	memcpy(big, "k=", 2);
	memset(big + 2, 'v', TEXT_MAX_LONG_VALUE);
	big[2 + TEXT_MAX_LONG_VALUE] = '\0';
	CHECK_EQ(text_parse(big, 3 + TEXT_MAX_LONG_VALUE, kv, MAXKV, &n), 0);
	CHECK_EQ(strlen(kv[0].value), TEXT_MAX_LONG_VALUE);
	memset(big + 2, 'v', TEXT_MAX_LONG_VALUE + 1);
	big[3 + TEXT_MAX_LONG_VALUE] = '\0';
	CHECK_EQ(text_parse(big, 4 + TEXT_MAX_LONG_VALUE, kv, MAXKV, &n), -EBADMSG);

	/* Too many pairs. */
	static const char three[] = "a=1\0b=2\0c=3\0";
	n = 99;
	CHECK_EQ(parse(three, sizeof(three) - 1, buf, kv, 2, &n), -E2BIG);
	CHECK_EQ(n, 0);
	CHECK_EQ(parse(three, sizeof(three) - 1, buf, kv, 3, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(parse(three, sizeof(three) - 1, buf, NULL, 0, &n), -E2BIG);
	CHECK_EQ(parse("\0", 1, buf, NULL, 0, &n), 0);
}

/* A text exchange split over PDUs with C=1, at awkward places. */
static void test_accum(void)
{
	static const char full[] = "TargetName=iqn.2026-01.example:disk1\0"
				   "MaxRecvDataSegmentLength=262144\0"
				   "HeaderDigest=CRC32C,None\0";
	const size_t flen = sizeof(full) - 1;
	/* split points: mid-value, mid-key, right after a NUL, right before '=' */
	static const size_t splits[][2] = {{20, 50}, {37, 38}, {1, 90}, {61, 62}};
	char storage[128];
	struct text_accum a;
	struct text_kv kv[MAXKV];
	size_t n;

	for (size_t s = 0; s < sizeof(splits) / sizeof(splits[0]); s++) {
		size_t p1 = splits[s][0], p2 = splits[s][1];

		text_accum_init(&a, storage, sizeof(storage));
		CHECK_EQ(text_accum_append(&a, full, p1), 0);
		CHECK_EQ(text_accum_append(&a, full + p1, p2 - p1), 0);
		CHECK_EQ(text_accum_append(&a, full + p2, flen - p2), 0);
		CHECK_EQ(a.len, flen);
		CHECK_EQ(text_parse(a.buf, a.len, kv, MAXKV, &n), 0);
		CHECK_EQ(n, 3);
		CHECK_STR(kv[0].value, "iqn.2026-01.example:disk1");
		CHECK_STR(kv[1].key, "MaxRecvDataSegmentLength");
		CHECK_STR(kv[2].value, "CRC32C,None");
	}

	/* The last PDU's final pair has no NUL: the accumulator's spare byte terminates it. */
	text_accum_init(&a, storage, 9);
	CHECK_EQ(text_accum_append(&a, "a=1\0", 4), 0);
	CHECK_EQ(text_accum_append(&a, "bb=22", 4), 0); /* "bb=2" */
	CHECK_EQ(a.len, 8);
	CHECK_EQ(text_parse(a.buf, a.len, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(kv[1].value, "2");

	/* Capacity: cap - 1 bytes of text fit, one more does not; a refused append changes
	 * nothing. */
	text_accum_init(&a, storage, 8);
	CHECK_EQ(text_accum_append(&a, "abcd", 4), 0);
	CHECK_EQ(text_accum_append(&a, "efgh", 4), -ENOSPC);
	CHECK_EQ(a.len, 4);
	CHECK_EQ(text_accum_append(&a, "efg", 3), 0);
	CHECK_EQ(a.len, 7);
	CHECK_EQ(text_accum_append(&a, "h", 1), -ENOSPC);
	CHECK_EQ(text_accum_append(&a, NULL, 0), 0);
	CHECK_MEM(a.buf, "abcdefg", 8);
	text_accum_reset(&a);
	CHECK_EQ(a.len, 0);
	CHECK_EQ(text_accum_append(&a, "x=1", 3), 0);
	CHECK_MEM(a.buf, "x=1", 4);

	text_accum_init(&a, storage, 0);
	CHECK_EQ(text_accum_append(&a, "x", 1), -ENOSPC);
}

static void test_builder(void)
{
	char storage[64];
	struct text_out o;
	struct text_kv kv[MAXKV];
	size_t n;

	text_out_init(&o, storage, sizeof(storage));
	CHECK_EQ(text_out_add(&o, "AuthMethod", "None"), 0);
	CHECK_EQ(text_out_addf(&o, "MaxRecvDataSegmentLength", "%u", 262144u), 0);
	CHECK_EQ(text_out_add(&o, "CHAP_A", ""), 0);
	static const char exp[] = "AuthMethod=None\0MaxRecvDataSegmentLength=262144\0CHAP_A=\0";
	CHECK_EQ(o.len, sizeof(exp) - 1);
	CHECK_MEM(o.buf, exp, sizeof(exp) - 1);

	/* What the builder makes, the parser reads. */
	char copy[sizeof(exp)];
	memcpy(copy, o.buf, o.len);
	CHECK_EQ(text_parse(copy, o.len, kv, MAXKV, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_STR(kv[1].value, "262144");

	/* Exact fit, then one byte short: -ENOSPC and nothing appended. */
	text_out_init(&o, storage, 6); /* "ab=cd\0" */
	CHECK_EQ(text_out_add(&o, "ab", "cde"), -ENOSPC);
	CHECK_EQ(o.len, 0);
	CHECK_EQ(text_out_add(&o, "ab", "cd"), 0);
	CHECK_EQ(o.len, 6);
	CHECK_EQ(text_out_add(&o, "a", ""), -ENOSPC);
	CHECK_EQ(o.len, 6);

	text_out_init(&o, storage, 12);
	CHECK_EQ(text_out_addf(&o, "n", "%d", 1234567890), -ENOSPC); /* needs 13 */
	CHECK_EQ(o.len, 0);
	CHECK_EQ(text_out_addf(&o, "n", "%d", 123456789), 0); /* exactly 12 */
	CHECK_EQ(o.len, 12);
	CHECK_MEM(o.buf, "n=123456789", 12);
	CHECK_EQ(text_out_addf(&o, "n", "%s", ""), -ENOSPC);

	/* Invalid keys and values. */
	text_out_init(&o, storage, sizeof(storage));
	CHECK_EQ(text_out_add(&o, "", "x"), -EINVAL);
	CHECK_EQ(text_out_add(&o, "bad key", "x"), -EINVAL);
	CHECK_EQ(text_out_add(&o, "a=b", "x"), -EINVAL);
	CHECK_EQ(text_out_addf(&o, "k", "%c", 0), -EINVAL);
	CHECK_EQ(o.len, 0);

	static char huge[TEXT_MAX_LONG_VALUE + 2];
	static char hstore[TEXT_MAX_LONG_VALUE + 16];
	memset(huge, 'v', TEXT_MAX_LONG_VALUE + 1);
	text_out_init(&o, hstore, sizeof(hstore));
	CHECK_EQ(text_out_add(&o, "k", huge), -EINVAL);
	huge[TEXT_MAX_LONG_VALUE] = '\0';
	CHECK_EQ(text_out_add(&o, "k", huge), 0);
}

static void test_numbers(void)
{
	struct {
		const char *in;
		int ret;
		uint64_t val;
	} t[] = {
	    {"0", 0, 0},
	    {"262144", 0, 262144},
	    {"007", 0, 7},
	    {"18446744073709551615", 0, UINT64_MAX},
	    {"18446744073709551616", -EINVAL, 0}, /* 2^64 */
	    {"99999999999999999999", -EINVAL, 0},
	    {"0x0", 0, 0},
	    {"0X1a", 0, 26},
	    {"0xDeadBeef", 0, 0xdeadbeef},
	    {"0xffffffffffffffff", 0, UINT64_MAX},
	    {"0x00000000000000001", 0, 1}, /* 17 digits, leading zeros */
	    {"0x10000000000000000", -EINVAL, 0},
	    {"", -EINVAL, 0},
	    {"0x", -EINVAL, 0},
	    {"-1", -EINVAL, 0},
	    {"+1", -EINVAL, 0},
	    {" 1", -EINVAL, 0},
	    {"1 ", -EINVAL, 0},
	    {"12a", -EINVAL, 0},
	    {"1e3", -EINVAL, 0},
	    {"0xg", -EINVAL, 0},
	    {"0x1g", -EINVAL, 0},
	    {"x10", -EINVAL, 0},
	    {"Yes", -EINVAL, 0},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t v = 0x5a5a;
		int ret = text_parse_u64(t[i].in, &v);

		tap_n++;
		if (ret == t[i].ret && (ret ? v == 0x5a5a : v == t[i].val)) {
			printf("ok %d - text_parse_u64(\"%s\")\n", tap_n, t[i].in);
		} else {
			tap_failed++;
			printf("not ok %d - text_parse_u64(\"%s\"): %d %llu\n", tap_n, t[i].in, ret,
			       (unsigned long long)v);
		}
	}
	uint64_t v;
	CHECK_EQ(text_parse_u64(NULL, &v), -EINVAL);

	/* MaxRecvDataSegmentLength range 512..2^24-1 */
	v = 1;
	CHECK_EQ(text_parse_num("512", 512, 16777215, &v), 0);
	CHECK_EQ(v, 512);
	CHECK_EQ(text_parse_num("16777215", 512, 16777215, &v), 0);
	CHECK_EQ(v, 16777215);
	v = 1;
	CHECK_EQ(text_parse_num("511", 512, 16777215, &v), -ERANGE);
	CHECK_EQ(text_parse_num("16777216", 512, 16777215, &v), -ERANGE);
	CHECK_EQ(text_parse_num("0x1000000", 512, 16777215, &v), -ERANGE);
	CHECK_EQ(text_parse_num("lots", 512, 16777215, &v), -EINVAL);
	CHECK_EQ(text_parse_num("", 0, 1, &v), -EINVAL);
	CHECK_EQ(v, 1);

	bool b = false;
	CHECK_EQ(text_parse_bool("Yes", &b), 0);
	CHECK(b);
	CHECK_EQ(text_parse_bool("No", &b), 0);
	CHECK(!b);
	b = true;
	CHECK_EQ(text_parse_bool("yes", &b), -EINVAL);
	CHECK_EQ(text_parse_bool("YES", &b), -EINVAL);
	CHECK_EQ(text_parse_bool("no", &b), -EINVAL);
	CHECK_EQ(text_parse_bool("Yes ", &b), -EINVAL);
	CHECK_EQ(text_parse_bool("", &b), -EINVAL);
	CHECK_EQ(text_parse_bool("1", &b), -EINVAL);
	CHECK(b);
}

static void test_binary(void)
{
	struct {
		const char *in;
		int ret;
		size_t len;
		const char *out;
	} t[] = {
	    {"0x00ff10", 0, 3, "\x00\xff\x10"},
	    {"0XABcd", 0, 2, "\xab\xcd"},
	    {"0xabc", 0, 2, "\x0a\xbc"}, /* odd: implied leading 0 nibble */
	    {"0x1", 0, 1, "\x01"},
	    {"0x0", 0, 1, "\x00"},
	    {"0x", -EINVAL, 0, NULL},
	    {"0xgg", -EINVAL, 0, NULL},
	    {"0x12 ", -EINVAL, 0, NULL},
	    {"0x-1", -EINVAL, 0, NULL},
	    {"", -EINVAL, 0, NULL},
	    {"abc", -EINVAL, 0, NULL},
	    {"1234", -EINVAL, 0, NULL},
	    {"0", -EINVAL, 0, NULL},
	    /* RFC 4648 section 10 */
	    {"0bZg==", 0, 1, "f"},
	    {"0bZm8=", 0, 2, "fo"},
	    {"0bZm9v", 0, 3, "foo"},
	    {"0bZm9vYg==", 0, 4, "foob"},
	    {"0bZm9vYmE=", 0, 5, "fooba"},
	    {"0BZm9vYmFy", 0, 6, "foobar"},
	    /* padding is optional */
	    {"0bZg", 0, 1, "f"},
	    {"0bZm9vYmE", 0, 5, "fooba"},
	    /* the high alphabet: python3 base64.b64encode(bytes(range(0xf8, 0x100))) */
	    {"0b+Pn6+/z9/v8=", 0, 8, "\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff"},
	    {"0b//4=", 0, 2, "\xff\xfe"},
	    {"0b", -EINVAL, 0, NULL},
	    {"0bZ", -EINVAL, 0, NULL},	      /* 6 bits: not a whole byte */
	    {"0bZm9vY", -EINVAL, 0, NULL},    /* 4n + 1 digits */
	    {"0b====", -EINVAL, 0, NULL},     /* padding only */
	    {"0bZ===", -EINVAL, 0, NULL},     /* three pad characters */
	    {"0bZg======", -EINVAL, 0, NULL}, /* multiple of 4, but six pad characters */
	    {"0bZg=", -EINVAL, 0, NULL},      /* padded but not a multiple of 4 */
	    {"0bZm9=v", -EINVAL, 0, NULL},    /* '=' in the middle */
	    {"0bZ=g=", -EINVAL, 0, NULL},     /* '=' in the middle */
	    {"0bZm9v!", -EINVAL, 0, NULL},    /* bad character */
	    {"0bZm9v YmFy", -EINVAL, 0, NULL},
	    {"0bZm-_", -EINVAL, 0, NULL}, /* URL-safe alphabet is not base64 here */
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint8_t out[16];
		size_t len = 99;
		int ret = text_decode_binary(t[i].in, out, sizeof(out), &len);
		bool ok = ret == t[i].ret;

		if (ok && ret == 0)
			ok = len == t[i].len && memcmp(out, t[i].out, len) == 0;
		tap_n++;
		if (ok) {
			printf("ok %d - text_decode_binary(\"%s\")\n", tap_n, t[i].in);
		} else {
			tap_failed++;
			printf("not ok %d - text_decode_binary(\"%s\"): %d len %zu\n", tap_n,
			       t[i].in, ret, len);
		}
	}

	uint8_t out[8];
	size_t len;
	CHECK_EQ(text_decode_binary("0x0102", out, 1, &len), -ENOSPC);
	CHECK_EQ(text_decode_binary("0x0102", out, 2, &len), 0);
	CHECK_EQ(text_decode_binary("0x102", out, 1, &len), -ENOSPC);
	CHECK_EQ(text_decode_binary("0bZm9vYmFy", out, 5, &len), -ENOSPC);
	CHECK_EQ(text_decode_binary("0bZm9vYmFy", out, 6, &len), 0);
	CHECK_EQ(text_decode_binary(NULL, out, 6, &len), -EINVAL);
	/* bad encoding is reported as such even when it would not fit either */
	CHECK_EQ(text_decode_binary("0x01020304050607080910zz", out, 2, &len), -EINVAL);
}

static void test_encode_hex(void)
{
	static const uint8_t in[] = {0x00, 0xab, 0xff, 0x10};
	char out[16];
	uint8_t back[4];
	size_t len;

	CHECK_EQ(text_encode_hex(in, 4, out, sizeof(out)), 0);
	CHECK_STR(out, "0x00abff10");
	CHECK_EQ(text_encode_hex(in, 4, out, 11), 0); /* exact fit */
	CHECK_STR(out, "0x00abff10");
	CHECK_EQ(text_encode_hex(in, 4, out, 10), -ENOSPC);
	CHECK_EQ(text_encode_hex(in, 1, out, 5), 0);
	CHECK_STR(out, "0x00");
	CHECK_EQ(text_encode_hex(in, 1, out, 2), -ENOSPC);
	CHECK_EQ(text_encode_hex(in, 1, out, 0), -ENOSPC);
	CHECK_EQ(text_encode_hex(in, 0, out, sizeof(out)), -EINVAL);

	CHECK_EQ(text_encode_hex(in, 4, out, sizeof(out)), 0);
	CHECK_EQ(text_decode_binary(out, back, sizeof(back), &len), 0);
	CHECK_EQ(len, 4);
	CHECK_MEM(back, in, 4);
}

static void test_list(void)
{
	CHECK(text_list_contains("CHAP,None", "None"));
	CHECK(text_list_contains("CHAP,None", "CHAP"));
	CHECK(!text_list_contains("CHAP,None", "CHA"));
	CHECK(!text_list_contains("CHAP,None", "chap"));
	CHECK(!text_list_contains("CHAP,None", "CHAP,None,"));
	CHECK(text_list_contains("5,6,7,8", "7"));
	CHECK(!text_list_contains("56", "5")); /* libiscsi CHAP_A=56 must not match 5 */
	CHECK(!text_list_contains("", "5"));
	CHECK(!text_list_contains("5", ""));
	CHECK(!text_list_contains("a,,b", ""));
	CHECK(text_list_contains("a,,b", "b"));
	CHECK(text_list_contains("None", "None"));
	CHECK(!text_list_contains(NULL, "None"));
}

int main(void)
{
	test_parse_basic();
	test_parse_edges();
	test_parse_errors();
	test_accum();
	test_builder();
	test_numbers();
	test_binary();
	test_encode_hex();
	test_list();
	return tap_done();
}
