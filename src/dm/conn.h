/* The generic iSCSI connection, shared by both roles: life cycle, reference counting, the
 * receive dispatch between the transport and the role, and a pool of outgoing PDUs.
 *
 * Ownership: a connection belongs to one event loop thread for its whole life. The transport
 * holds one reference while the connection is up; anyone running a callback that may close the
 * connection holds another (iscsi_conn_get/put) so the object outlives the handler. The memory
 * is released through ev_defer() after the last put, never inside a callback.
 */
#ifndef IX_DM_CONN_H
#define IX_DM_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "dm/dm.h"
#include "event/loop.h"
#include "proto/pdu.h"

enum iscsi_conn_state {
	ISCSI_CONN_XPT_UP = 0,   /* S3: transport up, no login yet */
	ISCSI_CONN_IN_LOGIN,     /* S4 */
	ISCSI_CONN_LOGGED_IN,    /* S5: full feature phase */
	ISCSI_CONN_IN_LOGOUT,    /* S6 */
	ISCSI_CONN_CLEANUP,      /* terminated, waiting for the last reference */
};

struct iscsi_conn;

/* What a role (target, initiator) does with received PDUs. */
struct iscsi_role_ops {
	/* Header phase: decide where the payload goes (place->buf NULL with dlength > 0 means
	   "into the connection's control buffer"). Return 0 or -errno to drop the connection. */
	int (*rx_header)(struct iscsi_conn *c, const struct iscsi_hdr *h, const uint8_t *ahs,
			 uint32_t ahs_len, struct dm_rx_place *place);
	/* Payload in place. data/dlen are the payload (in the control buffer or where the header
	   phase put it). */
	void (*rx_pdu)(struct iscsi_conn *c, const struct iscsi_hdr *h, uint8_t *data,
		       uint32_t dlen, bool ddigest_ok);
	/* The connection was terminated (by either side): abandon work, drop references. */
	void (*closed)(struct iscsi_conn *c);
	/* The memory is about to be freed. */
	void (*release)(struct iscsi_conn *c);
	/* Optional: the transmit pool took a chunk beyond its first (the role may give it back
	   later with iscsi_conn_tx_trim). */
	void (*tx_grown)(struct iscsi_conn *c);
};

/* The transmit PDU pool: grown on demand by ISCSI_CONN_TXCHUNK descriptors up to
 * ISCSI_CONN_TXPOOL (an idle connection holds one chunk), then single allocations. */
#define ISCSI_CONN_TXPOOL 256
#define ISCSI_CONN_TXCHUNK 16
struct dm_txchunk;

struct iscsi_conn {
	const struct dm_ops *dm;
	const struct iscsi_role_ops *role_ops;
	void *role_priv;
	enum iscsi_role role;
	enum iscsi_conn_state state;
	struct ev_loop *loop;
	int refcnt;
	bool terminated;
	/* the role sent its last PDU and waits for the peer to close (DM_CAP_PEER_CLOSES): the
	   peer's close is the normal end, reported without a warning */
	bool peer_close_expected;
	uint32_t digest_errors;         /* header digest errors the datamover saw (it closes) */
	char peer[72];                  /* "[addr]:port" for logs */
	char local[72];
	struct iscsi_conn_params params;

	/* receive: the PDU in flight */
	struct iscsi_hdr rx_hdr;
	uint8_t rx_bhs[ISCSI_BHS_LEN];  /* raw header, for Reject */
	/* control payloads (login, text, NOP, ...): allocated on first use and grown to the
	   largest received so far (ctrl_alloc bytes), up to ctrl_cap */
	uint8_t *ctrl_buf;
	uint32_t ctrl_cap;
	uint32_t ctrl_alloc;
	uint8_t *rx_data;
	uint32_t rx_dlen;
	uint8_t rx_ahs[ISCSI_MAX_CDB_LEN + 16];
	/* The PDU being reported is a Data-Out that stands for data a direct-placement
	   datamover has already fetched into the place the role named (iSER's RDMA Read of a
	   whole R2T): MaxRecvDataSegmentLength, a limit of received PDUs, does not apply to
	   it; the role's own bounds (the R2T's length) do. */
	bool rx_placed;

	/* transmit PDU pool */
	struct list_head tx_free;
	struct dm_txchunk *tx_chunks;
	uint32_t tx_pooled;             /* descriptors in tx_chunks */
	uint32_t tx_outstanding;

	struct ev_defer free_defer;
	/* transport private area follows */
	_Alignas(16) unsigned char priv[];
};

static inline void *iscsi_conn_priv(struct iscsi_conn *c)
{
	return c->priv;
}

/* Allocate a connection for transport dm on loop. ctrl_cap, the largest control payload
 * received, is 8192 during login; the buffer itself is allocated on first use. */
struct iscsi_conn *iscsi_conn_new(const struct dm_ops *dm, struct ev_loop *loop,
				  enum iscsi_role role, const struct iscsi_role_ops *ops,
				  void *role_priv);
void iscsi_conn_get(struct iscsi_conn *c);
void iscsi_conn_put(struct iscsi_conn *c);

/* Raise the control payload limit (at the switch to full feature phase); the buffer grows to
 * it only when a PDU needs it. 0. */
int iscsi_conn_set_ctrl_cap(struct iscsi_conn *c, uint32_t cap);
/* Free the control buffer (nothing received points into it any more): the next control
 * payload allocates it again. An idle session's NOP pings carry none. */
void iscsi_conn_ctrl_release(struct iscsi_conn *c);

/* Terminate (idempotent): the transport stops, role_ops->closed runs once. */
void iscsi_conn_close(struct iscsi_conn *c, const char *why);

/* Take a tx PDU (zeroed header, no data) from the pool, or malloc one if the pool is empty. */
struct dm_txpdu *iscsi_txpdu_get(struct iscsi_conn *c);
/* Give back the transmit pool's chunks whose descriptors are all free, keeping one chunk
 * (and every chunk with a descriptor in use): the number of descriptors freed. */
uint32_t iscsi_conn_tx_trim(struct iscsi_conn *c);
/* Return it (the default sent callback does this). */
void iscsi_txpdu_put(struct iscsi_conn *c, struct dm_txpdu *p);
void iscsi_txpdu_sent_default(struct dm_txpdu *p, int err);

/* Pack h into p and send it as a control PDU (Send_Control) with data (may be NULL/0). The
 * data must stay valid until p->sent runs. Returns 0 or -errno. */
int iscsi_send_pdu(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h);
/* Same for Put_Data (a Data-In) and Get_Data (an R2T): the transport decides how the data
 * moves (TCP sends the PDU, iSER turns it into an RDMA Write / Read). */
int iscsi_put_data(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h);
int iscsi_get_data(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h);

#endif
