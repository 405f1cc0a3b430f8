/* ix initiator: blocking wrappers over the asynchronous API (include/ix/initiator.h). Each runs
 * the context's event loop until its own operation completes, so other sessions of the same
 * context keep making progress meanwhile. Same threading rules: call from the context's
 * thread, never from inside a callback. Return values as in the async API. */
#ifndef IX_SYNC_H
#define IX_SYNC_H

#include "ix/initiator.h"

#ifdef __cplusplus
extern "C" {
#endif

int ix_sync_login(struct ix_session *s);
int ix_sync_logout(struct ix_session *s);

/* Submit and wait; returns cmd->err (0 means the target answered: check cmd->status). */
int ix_sync_scsi(struct ix_session *s, struct ix_scsi_cmd *cmd);

/* Returns the TMF response (>= 0) or -errno. */
int ix_sync_lun_reset(struct ix_session *s, uint32_t lun);

/* Discovery: *out is allocated (free with ix_discovery_free); errmsg (may be NULL) gets the
 * reason of a failure. */
int ix_sync_discover(struct ix_ctx *ctx, const struct ix_session_opts *opts,
		     struct ix_discovery **out, char *errmsg, size_t errlen);
void ix_discovery_free(struct ix_discovery *d);

/* iSNS discovery (RFC 4171): ask the iSNS server at server ("HOST", "HOST:PORT", "[IPv6]:PORT";
 * port 3205 by default) which targets the initiator initiator_name may see, and the
 * "address:port,tag" of each one's portal groups. The server's discovery domains decide what
 * an initiator sees; an initiator the server does not know is registered for the query and
 * deregistered after it. Blocks at most timeout_ms (no context: its own connection); *out as
 * for ix_sync_discover. 0 or -errno (-EACCES: the server refused the source). */
int ix_sync_discover_isns(const char *server, const char *initiator_name, int timeout_ms,
			  struct ix_discovery **out, char *errmsg, size_t errlen);

/* The context a session belongs to. */
struct ix_ctx *ix_session_ctx(struct ix_session *s);

#ifdef __cplusplus
}
#endif

#endif
