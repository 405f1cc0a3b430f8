/* Shared by the fuzz harnesses: splitting an input into segments, checks on text we emit, and
 * the checksum line of the RADOS objects' text formats.
 *
 * Segmented inputs (negotiation, CHAP) are a few header bytes followed by segments separated
 * by the byte FUZZ_SEP (0xff). 0xff never appears in well-formed iSCSI text (keys are ASCII,
 * values UTF-8, which has no 0xff byte), so a captured login text is a valid segment as is.
 */
#ifndef IX_TESTS_FUZZ_UTIL_H
#define IX_TESTS_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "util/bytes.h"

#define FUZZ_SEP 0xff

struct fuzz_seg {
	const uint8_t *p;
	size_t left;
};

/* Next segment: *seg and *len describe it (not NUL-terminated). False when none is left. */
static inline bool fuzz_seg_next(struct fuzz_seg *s, const uint8_t **seg, size_t *len)
{
	const uint8_t *sep;

	if (!s->p)
		return false;
	sep = memchr(s->p, FUZZ_SEP, s->left);
	*seg = s->p;
	if (sep) {
		*len = (size_t)(sep - s->p);
		s->left -= *len + 1;
		s->p = sep + 1;
	} else {
		*len = s->left;
		s->p = NULL;
		s->left = 0;
	}
	return true;
}

/* Our own output must always be well-formed text: it parses, and no key appears twice. */
static inline void fuzz_check_our_text(const char *buf, size_t len)
{
	struct text_kv kv[256];
	char *copy;
	size_t n;

	if (len == 0)
		return;
	copy = malloc(len + 1);
	if (!copy)
		return;
	memcpy(copy, buf, len);
	if (text_parse(copy, len, kv, 256, &n) != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(kv[i].key, kv[j].key) == 0)
				abort();
	free(copy);
}

/* The text formats with a last line "sum <fnv1a64 of what comes before>\n" (PR objects, owner
 * records): data without its last line, plus the right sum line, so that the parser gets past
 * the checksum. A malloc'd copy (NULL when out of memory) and its length in *len. */
static inline char *fuzz_resum(const uint8_t *data, size_t size, size_t *len)
{
	size_t body = size;
	char *buf;

	while (body > 0 && data[body - 1] != '\n')
		body--;
	if (size > 0 && data[size - 1] == '\n' && body == size) { /* drop the last whole line */
		body--;
		while (body > 0 && data[body - 1] != '\n')
			body--;
	}
	buf = malloc(body + 32);
	if (!buf)
		return NULL;
	memcpy(buf, data, body);
	snprintf(buf + body, 32, "sum %016llx\n",
		 (unsigned long long)fnv1a64(FNV1A64_INIT, buf, body));
	*len = body + strlen(buf + body);
	return buf;
}

#endif
