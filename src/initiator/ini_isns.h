/* iSNS discovery for the initiator (RFC 4171): what ix_sync_discover_isns() asks an iSNS
 * server and how its answer becomes a struct ix_discovery. The pure parts are here for the
 * unit tests and the fuzz harness. */
#ifndef IX_INI_ISNS_H
#define IX_INI_ISNS_H

#include <stddef.h>
#include <stdint.h>

#include "ix/initiator.h"
#include "proto/isns.h"

/* The DevAttrQry an initiator named source sends: the storage nodes of type Target (node
 * NULL) or the node named node, with their names, types and the portal groups (name,
 * address, port, tag) that lead to them. Returns the PDU's length, or -ENOSPC/-EINVAL (a
 * name that does not fit). */
int ini_isns_build_query(uint8_t *buf, size_t cap, const char *source, const char *node,
			 uint16_t xid);

/* The targets an answer to that query names, each with the "address:port,tag" of its portal
 * groups (IPv6 in brackets; a portal group without a tag is no access and is left out; at
 * most IX_MAX_ADDRS each, the rest dropped). *out is allocated (ix_discovery_free).
 * Returns 0, -EBADMSG (a malformed attribute list), -ENOMEM. */
int ini_isns_parse_targets(const struct isns_resp *r, struct ix_discovery **out);

#endif
