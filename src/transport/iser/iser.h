/* iSER (RFC 7145): the RDMA datamover, over librdmacm + libibverbs (InfiniBand, RoCE, iWARP).
 *
 * Control-type PDUs travel in RDMA Send messages behind the 28-byte iSER header; Put_Data is an
 * RDMA Write into the initiator's advertised buffer (Read STag); Get_Data is an RDMA Read from
 * it (Write STag), and its completion is reported upward as the Data-Out PDUs it replaces, so
 * the role's write path is the same as over TCP. The login runs in iSER-assisted mode from the
 * first PDU (as Linux, LIO, tgt and libiscsi do: no Hello exchange).
 *
 * Buffers: every receive buffer of the connection is posted before rdma_accept(), so the
 * initiator can never send into an empty queue (login or full feature phase). Task buffers
 * the role names in Put_Data/Get_Data are registered once and the registration is reused
 * (struct dm_txpdu buf_base/buf_size; dm_ops.buf_free drops it).
 *
 * Threading: a listener lives on one loop; a connection request is handed to another loop
 * (a worker) with its own CM event channel, and the connection lives there for good.
 */
#ifndef IX_TRANSPORT_ISER_H
#define IX_TRANSPORT_ISER_H

#include <stdint.h>

#include "dm/dm.h"
#include "session/conn.h"

extern const struct dm_ops iser_dm_ops;

#define ISER_HDR_LEN 28
#define ISER_RECV_DATA 8192 /* TargetRecvDataSegmentLength we offer */

struct iser_listener;
struct iser_request; /* a connection request, moved from the listener to a worker */

typedef void (*iser_accept_cb)(struct iser_request *req, void *arg);

/* Listen for RDMA CM connection requests on addr:port (an address of an RDMA-capable
 * netdev). 0 or -errno (-ENODEV / -EADDRNOTAVAIL when no RDMA device serves the address). */
int iser_listen(struct ev_loop *loop, const char *addr, uint16_t port, iser_accept_cb cb,
		void *arg, struct iser_listener **out);
void iser_listener_free(struct iser_listener *l);

/* On the worker's loop: build the connection (QP, buffers) and accept. NULL on failure (the
 * request is rejected and freed). Call tcp-like: then iser_conn_start(). */
struct iscsi_conn *iser_conn_accept(struct iser_request *req, struct ev_loop *loop,
				    enum iscsi_role role, const struct iscsi_role_ops *ops,
				    void *role_priv);
/* Active open: resolve host:port through RDMA CM and connect. Returns the connection at once
 * (no PDU may be sent before on_up(c, 0)); on_up runs once on the loop: 0 when established,
 * or -errno (the caller then closes and drops the connection). NULL and *err when nothing could
 * be started (-ENODEV: no RDMA device; -EHOSTUNREACH). */
struct iscsi_conn *iser_conn_connect(struct ev_loop *loop, const char *host, uint16_t port,
				     enum iscsi_role role, const struct iscsi_role_ops *ops,
				     void *role_priv, void (*on_up)(struct iscsi_conn *c, int err),
				     int *err);

/* Reject and free a request that will not be accepted. */
void iser_request_reject(struct iser_request *req);

#endif
