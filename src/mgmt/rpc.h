/* The JSON-RPC 2.0 socket of the management API (mgmt.h): a Unix stream socket served on the
 * target's main loop, and the framing of requests on it.
 *
 * A client sends JSON-RPC requests (objects) or batches (arrays), one after another, optionally
 * separated by white space; each gets its response (compact JSON and a newline) in order.
 * Bounds: a request of at most MGMT_MAX_REQUEST bytes and MGMT_MAX_DEPTH levels; a request
 * that has begun must be complete within RPC_REQUEST_TIMEOUT_MS; at most RPC_MAX_CLIENTS
 * connections; at most RPC_MAX_OUTPUT bytes of responses the client has not read. Past any of
 * them the client gets an error response and the connection is closed. Anything that is not
 * JSON gets a parse error (-32700) and the connection is closed (the stream cannot be resumed).
 *
 * Access: the socket file is mode 0600 (0660 with global.mgmt_group, group set to it); each
 * connection's peer credentials (SO_PEERCRED, SO_PEERGROUPS) must be root, the daemon's own
 * user, or a member of that group.
 */
#ifndef IX_MGMT_RPC_H
#define IX_MGMT_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "event/loop.h"
#include "mgmt/mgmt.h"

#define RPC_MAX_CLIENTS        16
#define RPC_MAX_OUTPUT         (16u << 20)
#define RPC_REQUEST_TIMEOUT_MS 5000
#define RPC_IDLE_TIMEOUT_MS    300000

struct rpc_server;

/* Listen on path (the parent directory is created, mode 0755, when missing; a stale socket
 * file is replaced, a live one is an error). group: allowed besides root and the daemon's
 * user, or (gid_t)-1. -errno with a message in err. */
int rpc_server_new(struct ix_mgmt *m, struct ev_loop *loop, const char *path, gid_t group,
		   struct rpc_server **out, char *err, size_t errlen);
/* Closes every connection and removes the socket file. */
void rpc_server_free(struct rpc_server *s);

/* The framing alone (no socket): bytes in, responses out through emit. */
struct rpc_stream;
typedef void (*rpc_emit_fn)(void *arg, const char *resp, size_t len);
struct rpc_stream *rpc_stream_new(struct ix_mgmt *m, const struct ix_mgmt_caller *who,
				  rpc_emit_fn emit, void *arg);
void rpc_stream_free(struct rpc_stream *st);
/* Feed bytes: every complete request is answered. 0: go on; -EPROTO (not JSON),
 * -EMSGSIZE (too large or too deep): an error was emitted, close the stream. */
int rpc_stream_feed(struct rpc_stream *st, const char *data, size_t len);
/* Bytes of a request begun and not yet complete (0 while waiting for a late answer). */
size_t rpc_stream_pending(const struct rpc_stream *st);
/* A request's answer comes later (iscsi_get_sessions asks the workers): the requests behind it
 * wait in the buffer; once it is emitted they are answered and resumed(arg) runs. */
bool rpc_stream_waiting(const struct rpc_stream *st);
void rpc_stream_set_resumed(struct rpc_stream *st, void (*fn)(void *arg));
/* Requests taken from the stream so far. */
uint64_t rpc_stream_completed(const struct rpc_stream *st);
/* A request answered after a late answer was not JSON: close the stream. */
bool rpc_stream_failed(const struct rpc_stream *st);
/* Emit an error response with id null (limits, access). */
void rpc_emit_error(rpc_emit_fn emit, void *arg, int code, const char *msg);

#endif
