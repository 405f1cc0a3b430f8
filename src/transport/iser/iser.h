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
#include "dm/conn.h"

extern const struct dm_ops iser_dm_ops;

#define ISER_HDR_LEN 28
#define ISER_RECV_DATA 8192 /* TargetRecvDataSegmentLength we offer */

/* Listening (listen, with -ENODEV / -EADDRNOTAVAIL when no RDMA device serves the address),
 * accepting and connecting are iser_dm_ops's connection set-up (dm/dm.h). */

#endif
