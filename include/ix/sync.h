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

/* The context a session belongs to. */
struct ix_ctx *ix_session_ctx(struct ix_session *s);

#ifdef __cplusplus
}
#endif

#endif
