/* The target's iSNS client (RFC 4171): registers the target's Network Entity, its portals and
 * its targets (iSCSI Storage Nodes, with a Portal Group per target and portal whose tag is the
 * portal's TPGT) with the server that global.isns names, and keeps the registration true:
 *
 *   - at start, and after every new connection to the server, one DevAttrReg with the Replace
 *     flag states the whole entity (a registration larger than ISNS_REQ_MAX registers the rest of
 *     the targets in further messages);
 *   - a reload that adds targets registers them (DevAttrReg), one that removes a target
 *     deregisters its node (DevDereg); other changes (portals, aliases, a target's portals)
 *     state the whole entity again; the last target removed deregisters the entity;
 *   - a DevAttrQry of its own entity every half registration period (the period the server
 *     granted, which open-isns imposes), at most every ISNS_REFRESH_MAX_MS, refreshes the
 *     registration (RFC 4171 6.2.6: any message does) and finds a server that lost it;
 *   - at shutdown, DevDereg of the entity, bounded in time.
 * ESI (Entity Status Inquiry) is not used: no ESI port is registered, so the server relies on
 * the registration period.
 *
 * Failures (no connection, no answer within ISNS_IO_TIMEOUT_MS, a malformed answer, an error
 * status) close the connection; the client connects again after a back-off that starts at
 * ISNS_RETRY_MIN_MS and doubles up to ISNS_RETRY_MAX_MS, and states the whole entity again. A
 * failure is logged when it differs from the one logged last, success once after a failure.
 *
 * Threads: everything runs on the target's main loop (the thread that runs ix_target_run and
 * the reload); the socket is non-blocking and nothing here waits, except tgt_isns_stop().
 */
#ifndef IX_TARGET_TGT_ISNS_H
#define IX_TARGET_TGT_ISNS_H

#include "proto/isns.h"

struct ev_loop;
struct ix_config;
struct tgt_isns;

#define ISNS_IO_TIMEOUT_MS 5000u  /* connecting; each answer */
#define ISNS_RETRY_MIN_MS  1000u  /* first back-off after a failure */
#define ISNS_RETRY_MAX_MS  30000u /* the back-off doubles up to this */
#define ISNS_REFRESH_MAX_MS                                                                        \
	60000u		   /* refresh at least this often (also keeps the connection               \
			      within open-isns's 300 s idle timeout) */
#define ISNS_STOP_MS 3000u /* deregistration at shutdown */
/* Largest request PDU built: open-isns takes messages of at most 8192 bytes, and its answer to
 * a registration repeats what was registered (plus an index per portal), so a registration
 * stays well below that; more targets than fit go in further messages. */
#define ISNS_REQ_MAX (ISNS_HDR_LEN + 6144)

/* A client for cfg's global.isns, or *out = NULL when it is absent or disabled. Nothing is
 * sent before the loop runs. cfg is copied (it may go away). 0 or -ENOMEM. */
int tgt_isns_new(struct ev_loop *loop, const struct ix_config *cfg, struct tgt_isns **out);
/* The configuration changed (a reload was applied): bring the registration in line with cfg
 * (copied). c may be NULL. */
void tgt_isns_update(struct tgt_isns *c, const struct ix_config *cfg);
/* Shutdown, the loop no longer running: deregister the entity, running the loop once at a time
 * for at most ISNS_STOP_MS, then close. c may be NULL. */
void tgt_isns_stop(struct tgt_isns *c);
void tgt_isns_free(struct tgt_isns *c);

#endif
