#include "util/addr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse_u16(const char *s, size_t len, unsigned min, unsigned *out)
{
	unsigned v = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < min || v > 65535)
		return -EINVAL;
	*out = v;
	return 0;
}

int addr_parse_portal(const char *s, uint16_t default_port, char *host, size_t host_cap,
		      uint16_t *port, int *tpgt)
{
	const char *comma, *end, *h, *p = NULL;
	size_t hlen, slen;
	unsigned v;

	if (!s || !*s)
		return -EINVAL;
	slen = strlen(s);
	comma = strrchr(s, ',');
	end = comma ? comma : s + slen;
	if (tpgt)
		*tpgt = -1;
	if (comma) {
		if (parse_u16(comma + 1, strlen(comma + 1), 0, &v) < 0)
			return -EINVAL;
		if (tpgt)
			*tpgt = (int)v;
	}
	if (s[0] == '[') {
		const char *rb = memchr(s, ']', (size_t)(end - s));

		if (!rb || rb == s + 1)
			return -EINVAL;
		h = s + 1;
		hlen = (size_t)(rb - h);
		if (rb + 1 < end) {
			if (rb[1] != ':')
				return -EINVAL;
			p = rb + 2;
		}
	} else {
		const char *c1 = memchr(s, ':', (size_t)(end - s));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;

		h = s;
		if (c1 && !c2) {
			hlen = (size_t)(c1 - s);
			p = c1 + 1;
		} else {
			hlen = (size_t)(end - s); /* no port, or a bare IPv6 literal */
		}
	}
	if (hlen == 0 || memchr(h, ']', hlen) || memchr(h, '[', hlen))
		return -EINVAL;
	if (hlen >= host_cap)
		return -ENAMETOOLONG;
	*port = default_port;
	if (p) {
		if (parse_u16(p, (size_t)(end - p), 1, &v) < 0)
			return -EINVAL;
		*port = (uint16_t)v;
	}
	memcpy(host, h, hlen);
	host[hlen] = 0;
	return 0;
}
