/* Fault injection for tests: a datamover (struct dm_ops) that wraps a real transport and
 * mistreats the PDUs this side sends: drops, delays, duplicates, corrupts or truncates them, and
 * resets the connection after a number of bytes. It sits at the datamover interface and wraps
 * any transport: ix-target wraps each of its transports with one (truncation and resets use the
 * inner transport's tx_abort_at op: TCP resets part-way through a PDU; iSER, whose messages
 * are atomic, aborts the connection before the PDU that would cross the point).
 *
 * Faults hit the PDUs of the side that uses the wrapper: in a target, what initiators receive;
 * in an initiator, what targets receive. Each connection draws from its own pseudo-random
 * sequence (seed + the order in which connections were created), so a run is repeatable.
 *
 *   drop       the PDU is reported sent but never leaves
 *   delay      the PDU, and every later one of that connection, waits delay_ms (order is kept)
 *   duplicate  the PDU goes out twice
 *   corrupt    one bit of the BHS flips (bytes 1-3 and 8-47: never the opcode, and never the
 *              lengths, which the transport rewrites anyway)
 *   truncate   the connection is reset part-way through the PDU
 *   reset      the connection is reset once reset_after_bytes bytes have gone out
 *
 * Never active by accident: only a configuration section named "testing" creates a wrapper, and
 * ix-target refuses such a configuration unless started with --testing (docs/configuration.md).
 *
 * Threading: the wrapper object is shared by all connections and threads (read-only after
 * creation, statistics are atomics); per-connection state lives in the connection's private
 * area behind the inner transport's, on the connection's thread.
 */
#ifndef IX_TRANSPORT_FAULT_H
#define IX_TRANSPORT_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "dm/dm.h"

#define FAULT_PPM 1000000u /* probabilities are in parts per million */

struct fault_cfg {
	uint64_t seed;
	uint32_t drop_ppm, delay_ppm, duplicate_ppm, corrupt_ppm, truncate_ppm;
	uint32_t delay_ms;              /* how long a delayed PDU waits (default 100) */
	uint64_t reset_after_bytes;     /* 0 = never */
	uint64_t opcodes;               /* bit per opcode (0-63) that faults may hit; 0 = all */
	bool during_login;              /* also before the login completes (default: not) */
};

struct fault_stats {
	uint64_t pdus, dropped, delayed, duplicated, corrupted, truncated;
};

struct fault_dm;

/* A wrapper around inner (which must outlive it). NULL on allocation failure. */
struct fault_dm *fault_dm_new(const struct dm_ops *inner, const struct fault_cfg *cfg);
/* Connections using the wrapper must be gone first. */
void fault_dm_free(struct fault_dm *f);
/* The ops to create connections with: dm_conn_setup.as for dm_accept() or dm_connect() of the
 * inner transport. They cannot listen, accept or connect themselves. */
const struct dm_ops *fault_dm_ops(const struct fault_dm *f);
void fault_dm_stats(const struct fault_dm *f, struct fault_stats *out);

/* The registry's entry (dm.h, dm_wrap.c): "fault", its options (struct fault_cfg) described by
 * a table of struct dm_opt, the functions above, and its log lines. */
extern const struct dm_wrapper fault_dm_wrapper;

#endif
