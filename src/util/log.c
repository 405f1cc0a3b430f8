#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int ix_log_level = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void ix_log_set_level(int level)
{
	if (level < LOG_ERR)
		level = LOG_ERR;
	if (level > LOG_DEBUG)
		level = LOG_DEBUG;
	ix_log_level = level;
}

int ix_log_level_parse(const char *s)
{
	for (int i = 0; i <= LOG_DEBUG; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

void ix_log_write(int level, const char *comp, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	va_list ap;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line), "%lld.%03ld %-5s %-8s ", (long long)ts.tv_sec,
		     ts.tv_nsec / 1000000, level_names[level], comp);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one write per line so lines from several threads do not interleave */
	fprintf(stderr, "%s\n", line);
}

char *log_escape(const char *s, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	if (cap == 0)
		return out;
	for (size_t i = 0; i < len && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			if (o + 1 >= cap)
				break;
			out[o++] = (char)c;
		} else {
			if (o + 4 >= cap)
				break;
			snprintf(out + o, cap - o, "\\x%02x", c);
			o += 4;
		}
	}
	out[o] = '\0';
	return out;
}

int ix_failf(char *buf, size_t cap, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
	return ret;
}
