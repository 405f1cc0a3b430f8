/* Inside the TCP transport: the non-blocking connector behind tcp_dm_ops.connect (every
 * address a name resolves to, in order, until one answers). */
#ifndef IX_TRANSPORT_TCP_INT_H
#define IX_TRANSPORT_TCP_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"

struct addrinfo;
struct tcp_connector;

/* fd is the connected socket (err 0), or -1 with err = -errno of the last address tried. */
typedef void (*tcp_connect_cb)(struct tcp_connector *tc, int fd, int err);

struct tcp_connector {
	struct ev_loop *loop;
	struct ev_io io;
	int fd;
	tcp_connect_cb cb;
	void *arg;
	struct addrinfo *ai, *cur;
	int last_err;
	bool active;                    /* a connect is in progress */
};

/* 0 (cb runs later, on loop, never inside this call) or -errno (cb never runs). */
int tcp_connect_start(struct tcp_connector *tc, struct ev_loop *loop, const char *host,
		      uint16_t port, tcp_connect_cb cb, void *arg);
/* Stop an active connect; cb does not run. Idempotent. */
void tcp_connect_cancel(struct tcp_connector *tc);

#endif
