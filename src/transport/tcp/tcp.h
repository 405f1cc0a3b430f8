/* Plain iSCSI over TCP (RFC 7143): framing (BHS, AHS, padding, CRC32C digests) on a
 * non-blocking socket, batched transmission with writev, and payloads received straight into
 * the place the iSCSI layer chose. */
#ifndef IX_TRANSPORT_TCP_H
#define IX_TRANSPORT_TCP_H

#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"

struct addrinfo;

#include "dm/dm.h"
#include "session/conn.h"

extern const struct dm_ops tcp_dm_ops;

/* Wrap a connected socket (takes ownership of fd; closes it on failure). */
struct iscsi_conn *tcp_conn_new(int fd, struct ev_loop *loop, enum iscsi_role role,
				const struct iscsi_role_ops *ops, void *role_priv);
/* The same through a wrapper of tcp_dm_ops whose private area starts with TCP's (the fault
 * injector of transport/fault/fault.h). */
struct iscsi_conn *tcp_conn_new_dm(int fd, struct ev_loop *loop, const struct dm_ops *dm,
				   enum iscsi_role role, const struct iscsi_role_ops *ops,
				   void *role_priv);
/* Start receiving (call once the role has set itself up). 0 or -errno. */
int tcp_conn_start(struct iscsi_conn *c);

struct tcp_listener;
typedef void (*tcp_accept_cb)(int fd, void *arg);
/* Listen on addr:port (IPv4 or IPv6 literal). Accepted sockets are non-blocking, with
 * TCP_NODELAY, and handed to cb on the listener's loop. 0 or -errno. */
int tcp_listen(struct ev_loop *loop, const char *addr, uint16_t port, tcp_accept_cb cb, void *arg,
	       struct tcp_listener **out);
void tcp_listener_free(struct tcp_listener *l);
/* Stop accepting for ms milliseconds (connections wait in the kernel's backlog); may be called
 * from the accept callback. */
void tcp_listener_pause(struct tcp_listener *l, unsigned ms);

/* Active open (the initiator side): a non-blocking connect whose completion is reported on
 * the loop. The struct is embedded in the caller's object and must stay alive until the
 * callback ran or tcp_connect_cancel() returned. Host names are resolved with a blocking
 * getaddrinfo() (literal addresses never block); every address is tried in turn. */
struct tcp_connector;
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
/* Start. The callback gets a connected non-blocking socket with TCP_NODELAY (fd >= 0, owned
 * by the callee from then on) or fd -1 and -errno (the last address's error). Returns 0, or
 * -errno when nothing could be started (no callback then). */
int tcp_connect_start(struct tcp_connector *tc, struct ev_loop *loop, const char *host,
		      uint16_t port, tcp_connect_cb cb, void *arg);
/* Abandon a connect in progress (no callback). Idempotent; safe on a zeroed struct. */
void tcp_connect_cancel(struct tcp_connector *tc);

/* Format a socket address as "a.b.c.d:port" or "[v6]:port". */
void tcp_format_sockaddr(const void *sa, char *out, size_t cap);

#endif
