/* Portal strings as iSCSI writes them: "host", "host:port", "[v6addr]", "[v6addr]:port", a bare
 * IPv6 literal (two or more colons, no port), each optionally followed by ",TPGT" (the form
 * SendTargets returns in TargetAddress). Pure code. */
#ifndef IX_UTIL_ADDR_H
#define IX_UTIL_ADDR_H

#include <stddef.h>
#include <stdint.h>

#define ADDR_HOST_MAX 256

/* Split s into host (brackets removed) and port (default_port when absent) and, if tpgt is
 * not NULL, the portal group tag (-1 when absent). Returns 0, or -EINVAL (empty host,
 * unbalanced brackets, port not 1..65535, TPGT not 0..65535, junk) or -ENAMETOOLONG. */
int addr_parse_portal(const char *s, uint16_t default_port, char *host, size_t host_cap,
		      uint16_t *port, int *tpgt);

#endif
