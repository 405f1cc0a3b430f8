/* Minimal TAP producer for unit tests: each CHECK is one numbered test line, failures print
 * the expression and location; the binary exits 1 if anything failed. */
#ifndef IX_TESTS_TAP_H
#define IX_TESTS_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

#define CHECK(expr)                                                                                \
	do {                                                                                       \
		tap_n++;                                                                           \
		if (expr) {                                                                        \
			printf("ok %d - %s\n", tap_n, #expr);                                      \
		} else {                                                                           \
			tap_failed++;                                                              \
			printf("not ok %d - %s (%s:%d)\n", tap_n, #expr, __FILE__, __LINE__);      \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		tap_n++;                                                                           \
		if (_a == _b) {                                                                    \
			printf("ok %d - %s == %s\n", tap_n, #a, #b);                               \
		} else {                                                                           \
			tap_failed++;                                                              \
			printf("not ok %d - %s == %s: %lld != %lld (%s:%d)\n", tap_n, #a, #b, _a,  \
			       _b, __FILE__, __LINE__);                                            \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *_a = (a), *_b = (b);                                                   \
		tap_n++;                                                                           \
		if (_a && _b && strcmp(_a, _b) == 0) {                                             \
			printf("ok %d - %s == \"%s\"\n", tap_n, #a, _b);                           \
		} else {                                                                           \
			tap_failed++;                                                              \
			printf("not ok %d - %s: \"%s\" != \"%s\" (%s:%d)\n", tap_n, #a,            \
			       _a ? _a : "(null)", _b ? _b : "(null)", __FILE__, __LINE__);        \
		}                                                                                  \
	} while (0)

#define CHECK_MEM(a, b, n) CHECK(memcmp((a), (b), (n)) == 0)

/* A check that cannot run here: counted as a skip (TAP "# SKIP"), never as a pass. */
static inline void tap_skip(const char *why)
{
	printf("ok %d # SKIP %s\n", ++tap_n, why);
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
