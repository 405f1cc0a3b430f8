/* Logging: per component and level, cheap when off. Peer-supplied strings must pass through
 * log_escape() before they are printed. The log sink is process-wide configuration, set once at
 * start-up (it is not protocol state). */
#ifndef IX_UTIL_LOG_H
#define IX_UTIL_LOG_H

#include <stddef.h>

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int ix_log_level; /* messages above this level are dropped before formatting */

void ix_log_set_level(int level);
int ix_log_level_parse(const char *s); /* "error".."debug"; -1 if unknown */
void ix_log_write(int level, const char *comp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define ix_log(level, comp, ...)                                                                   \
	do {                                                                                       \
		if ((level) <= ix_log_level)                                                       \
			ix_log_write((level), (comp), __VA_ARGS__);                                \
	} while (0)

#define log_err(comp, ...) ix_log(LOG_ERR, comp, __VA_ARGS__)
#define log_warn(comp, ...) ix_log(LOG_WARN, comp, __VA_ARGS__)
#define log_info(comp, ...) ix_log(LOG_INFO, comp, __VA_ARGS__)
#define log_dbg(comp, ...) ix_log(LOG_DEBUG, comp, __VA_ARGS__)

/* Copy at most len bytes of s into out (capacity cap, always NUL-terminated), replacing
 * non-printable bytes with \xNN. Returns out. */
char *log_escape(const char *s, size_t len, char *out, size_t cap);

/* Format a message into buf (capacity cap, always terminated) and return ret: how a parser
 * that keeps its last error in a char array fails. ix_fail(obj, ret, fmt, ...) writes
 * obj->error. */
int ix_failf(char *buf, size_t cap, int ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define ix_fail(obj, ret, ...) ix_failf((obj)->error, sizeof((obj)->error), (ret), __VA_ARGS__)

#endif
