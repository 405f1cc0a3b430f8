/* libFuzzer harness for the text key=value parser and the value helpers.
 *
 * The input is a login/text data segment. It is fed to a text_accum in three pieces (as if
 * it came in three PDUs with C=1) whose storage is exactly big enough, then parsed. Properties
 * checked beyond "no crash":
 *  - every pair has a 1..63 byte key and a value within limits, both inside the buffer;
 *  - rebuilding the pairs with text_out_add() and parsing the result gives the same pairs;
 *  - a binary value that decodes re-encodes as hex and decodes to the same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_KV	64
#define BIN_CAP 1024

static void check_value(const char *v)
{
	uint8_t bin[BIN_CAP], again[BIN_CAP];
	char hex[2 + 2 * BIN_CAP + 1];
	size_t len, len2;
	uint64_t u;
	bool b;

	if (text_parse_u64(v, &u) == 0 && text_parse_num(v, u, u, &u) != 0)
		abort();
	(void)text_parse_bool(v, &b);
	(void)text_list_contains(v, "None");
	if (text_decode_binary(v, bin, sizeof(bin), &len) != 0)
		return;
	if (len == 0 || len > sizeof(bin))
		abort();
	if (text_encode_hex(bin, len, hex, sizeof(hex)) != 0)
		abort();
	if (text_decode_binary(hex, again, sizeof(again), &len2) != 0 || len2 != len ||
	    memcmp(bin, again, len) != 0)
		abort();
}

static void check_pairs(const char *buf, size_t cap, const struct text_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(kv[i].key), vl = strlen(kv[i].value);

		if (kl == 0 || kl > TEXT_MAX_KEY_LEN || vl > TEXT_MAX_LONG_VALUE)
			abort();
		if (kv[i].key < buf || kv[i].value + vl >= buf + cap)
			abort();
	}
}

static void rebuild(const struct text_kv *kv, size_t n, size_t cap)
{
	char *out = malloc(cap + 1);
	struct text_kv kv2[MAX_KV];
	struct text_out o;
	size_t n2;

	if (!out)
		return;
	text_out_init(&o, out, cap);
	for (size_t i = 0; i < n; i++) {
		if (text_out_add(&o, kv[i].key, kv[i].value) != 0)
			abort(); /* parsed pairs are always valid, and cap covers them */
	}
	if (text_parse(out, o.len, kv2, MAX_KV, &n2) != 0 || n2 != n)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (strcmp(kv[i].key, kv2[i].key) != 0 || strcmp(kv[i].value, kv2[i].value) != 0)
			abort();
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct text_kv kv[MAX_KV];
	struct text_accum a;
	size_t n, cut1 = size / 3, cut2 = 2 * size / 3;
	char *storage;
	int ret;

	if (size > 4 * TEXT_MAX_LONG_VALUE)
		return 0;
	storage = malloc(size + 1);
	if (!storage)
		return 0;
	text_accum_init(&a, storage, size + 1);
	if (text_accum_append(&a, data, cut1) != 0 ||
	    text_accum_append(&a, data + cut1, cut2 - cut1) != 0 ||
	    text_accum_append(&a, data + cut2, size - cut2) != 0 || a.len != size)
		abort();
	/* One byte more than the storage leaves room for must be refused. */
	if (text_accum_append(&a, "x", 1) != -ENOSPC)
		abort();

	ret = text_parse(a.buf, a.len, kv, MAX_KV, &n);
	if (ret == 0) {
		check_pairs(storage, size + 1, kv, n);
		for (size_t i = 0; i < n; i++)
			check_value(kv[i].value);
		/* Output is at most the input plus a NUL for an unterminated last pair. */
		rebuild(kv, n, size + 1);
	} else if (ret != -EBADMSG && ret != -E2BIG) {
		abort();
	}
	free(storage);
	return 0;
}
