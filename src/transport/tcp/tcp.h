/* Plain iSCSI over TCP (RFC 7143): framing (BHS, AHS, padding, CRC32C digests) on a
 * non-blocking socket, batched transmission with writev, and payloads received straight into
 * the place the iSCSI layer chose. */
#ifndef IX_TRANSPORT_TCP_H
#define IX_TRANSPORT_TCP_H

#include <stdint.h>

#include "dm/dm.h"
#include "session/conn.h"

extern const struct dm_ops tcp_dm_ops;

/* Wrap a connected socket (takes ownership of fd; closes it on failure). */
struct iscsi_conn *tcp_conn_new(int fd, struct ev_loop *loop, enum iscsi_role role,
				const struct iscsi_role_ops *ops, void *role_priv);
/* Start receiving (call once the role has set itself up). 0 or -errno. */
int tcp_conn_start(struct iscsi_conn *c);

struct tcp_listener;
typedef void (*tcp_accept_cb)(int fd, void *arg);
/* Listen on addr:port (IPv4 or IPv6 literal). Accepted sockets are non-blocking, with
 * TCP_NODELAY, and handed to cb on the listener's loop. 0 or -errno. */
int tcp_listen(struct ev_loop *loop, const char *addr, uint16_t port, tcp_accept_cb cb, void *arg,
	       struct tcp_listener **out);
void tcp_listener_free(struct tcp_listener *l);

/* Format a socket address as "a.b.c.d:port" or "[v6]:port". */
void tcp_format_sockaddr(const void *sa, char *out, size_t cap);

#endif
