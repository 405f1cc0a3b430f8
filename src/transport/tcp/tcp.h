/* The TCP datamover (RFC 7143 over a stream socket): framing, digests, zero-copy sends of
 * large payloads. Everything it offers is in tcp_dm_ops (dm/dm.h), connection set-up
 * included; nothing above dm/ names it except the transport table in dm.c.
 */
#ifndef IX_TRANSPORT_TCP_H
#define IX_TRANSPORT_TCP_H

#include <stddef.h>

#include "dm/dm.h"
#include "dm/conn.h"

extern const struct dm_ops tcp_dm_ops;

/* "addr:port" or "[v6addr]:port" of a struct sockaddr_in or sockaddr_in6. */
void tcp_format_sockaddr(const void *sa, char *out, size_t cap);

#endif
