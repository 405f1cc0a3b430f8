/* ixadm's small shared helpers: time, messages, exit codes, names and portals. Pure
 * functions apart from ax_err (stderr) and the clock; unit-tested in tests/unit/tools. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ixadm.h"

uint64_t ax_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void ax_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ixadm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int ax_errno_exit(int err)
{
	switch (err) {
	case 0: return AX_OK;
	case -EACCES: return AX_ERR_AUTH;
	case -ENOENT: return AX_ERR_FATAL_LOGIN;
	case -ETIMEDOUT: return AX_ERR_TIMEOUT;
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ECONNRESET:
	case -ENOTCONN:
	case -ECONNABORTED: return AX_ERR_TRANS;
	case -EPROTO: return AX_ERR_LOGIN;
	case -EINVAL: return AX_ERR_INVAL;
	case -ENOMEM: return AX_ERR_NOMEM;
	case -EPROTONOSUPPORT: return AX_ERR_OP_NOT_SUPP;
	default: return AX_ERR;
	}
}

const char *ax_exit_str(int code)
{
	switch (code) {
	case AX_OK: return "success";
	case AX_ERR_SESS_NOT_FOUND: return "session not found";
	case AX_ERR_NOMEM: return "out of memory";
	case AX_ERR_TRANS: return "could not connect to the portal";
	case AX_ERR_LOGIN: return "iSCSI login failed";
	case AX_ERR_IDBM: return "node database error";
	case AX_ERR_INVAL: return "invalid argument";
	case AX_ERR_TIMEOUT: return "timed out";
	case AX_ERR_INTERNAL: return "internal error";
	case AX_ERR_LOGOUT: return "logout failed";
	case AX_ERR_SESS_EXISTS: return "session exists";
	case AX_ERR_FATAL_LOGIN: return "iSCSI login failed due to a non-retryable error";
	case AX_ERR_NO_OBJS: return "no objects found";
	case AX_ERR_AUTH: return "iSCSI login failed due to authorization failure";
	case AX_ERR_OP_NOT_SUPP: return "operation not supported";
	case AX_ERR_BUSY: return "device or resource in use";
	default: return "error";
	}
}

bool ax_iscsi_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 5 || n >= AX_NAME_MAX ||
	    (strncmp(s, "iqn.", 4) && strncmp(s, "eui.", 4) && strncmp(s, "naa.", 4)))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr(".:-_", *s))
			return false;
	return true;
}

bool ax_host_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= AX_HOST_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr(".:-_%", *s))
			return false;
	return true;
}

int ax_parse_num(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int ax_portal_parse(const char *in, struct ax_portal *p)
{
	char buf[AX_HOST_MAX + 32], *comma, *port = NULL, *host = buf;
	long v;

	if (strlen(in) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, in);
	p->port = 3260;
	p->tpgt = -1;
	p->port_given = false;
	comma = strrchr(buf, ',');
	if (comma) {
		*comma = 0;
		if (ax_parse_num(comma + 1, -1, 65535, &v) < 0)
			return -EINVAL;
		p->tpgt = (int)v;
	}
	if (buf[0] == '[') {
		char *rb = strchr(buf, ']');
		if (!rb || (rb[1] && rb[1] != ':'))
			return -EINVAL;
		*rb = 0;
		host = buf + 1;
		if (rb[1] == ':')
			port = rb + 2;
	} else {
		char *c = strchr(buf, ':');
		if (c && !strchr(c + 1, ':')) {
			*c = 0;
			port = c + 1;
		}
	}
	if (port) {
		if (ax_parse_num(port, 1, 65535, &v) < 0)
			return -EINVAL;
		p->port = (uint16_t)v;
		p->port_given = true;
	}
	if (!ax_host_ok(host))
		return -EINVAL;
	memcpy(p->host, host, strlen(host) + 1); /* ax_host_ok checked the length */
	return 0;
}

void ax_portal_str(const struct ax_portal *p, char *buf, size_t len)
{
	if (strchr(p->host, ':'))
		snprintf(buf, len, "[%s]:%u", p->host, p->port);
	else
		snprintf(buf, len, "%s:%u", p->host, p->port);
}

