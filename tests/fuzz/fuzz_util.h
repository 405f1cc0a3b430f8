/* Shared by the fuzz harnesses: splitting an input into segments, and checks on text we emit.
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
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"

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

#endif
