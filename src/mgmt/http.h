/* The Prometheus metrics endpoint (global.metrics_listen): a minimal HTTP/1.1 server on the
 * target's main loop that answers GET /metrics with the statistics in the text exposition
 * format (metrics.h) and closes each connection after one answer.
 *
 * Bounds: a request head of at most HTTP_MAX_REQUEST bytes (else 431), at most
 * HTTP_MAX_CLIENTS connections at once (more are closed at accept), and every connection is
 * closed HTTP_TIMEOUT_MS after it was accepted, answered or not (a client that stalls).
 * Anything but GET (or HEAD) gets 405, any other path 404, a malformed head 400. Never blocks:
 * the statistics are gathered from the workers by messages (ix_target_stats).
 */
#ifndef IX_MGMT_HTTP_H
#define IX_MGMT_HTTP_H

#include <stddef.h>

#include "event/loop.h"
#include "target/target.h"

#define HTTP_MAX_REQUEST 8192
#define HTTP_MAX_CLIENTS 16
#define HTTP_TIMEOUT_MS  5000

/* The request line of a request head (pure; fuzzed by tests/fuzz/fuzz_http.c). */
struct http_req {
	char method[16];
	char path[256]; /* without the query string */
};
/* buf holds the first len bytes received. Returns the length of the complete head (through the
 * empty line), 0 when more bytes are needed, -EMSGSIZE when the head cannot fit in
 * HTTP_MAX_REQUEST, -EBADMSG when it is not an HTTP/1.x request head. */
int http_parse_request(const char *buf, size_t len, struct http_req *out);

/* Listen on "ADDR:PORT" or "[V6ADDR]:PORT" (a numeric address). -errno with a message in err. */
struct metrics_server;
int metrics_server_new(struct ix_target *t, struct ev_loop *loop, const char *listen,
		       struct metrics_server **out, char *err, size_t errlen);
void metrics_server_free(struct metrics_server *s);

#endif
