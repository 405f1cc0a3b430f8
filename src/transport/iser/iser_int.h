/* Inside the iSER transport: the connection's state and the functions its three files share.
 *   iser.c       connection management: CM events, accept, listen, active open, terminate and
 *                release, the dm_ops table
 *   iser_mem.c   the ITT table (STags the initiator advertised per task) and the memory
 *                registration cache (task buffers registered once, LRU, pools registered for
 *                the connection's lifetime)
 *   iser_data.c  the data path: receives, Sends, RDMA Writes and Reads, the backlogs, the
 *                completion queue
 * Everything runs on the connection's thread.
 */
#ifndef IX_TRANSPORT_ISER_INT_H
#define IX_TRANSPORT_ISER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "dm/conn.h"
#include "event/loop.h"
#include "proto/pdu.h"
#include "transport/iser/iser.h"

#define ISER_CTRL 0x10
#define ISER_WSV 0x08
#define ISER_RSV 0x04
#define ISER_HELLO 0x20

#define ISER_CM_ZBVA_NOT_USED 0x80
#define ISER_CM_SEND_W_INV_NOT_USED 0x40

#define RX_AHS_ROOM 272
#define RX_SIZE (ISER_HDR_LEN + ISCSI_BHS_LEN + RX_AHS_ROOM + ISER_RECV_DATA)
#define NRX 512
#define TX_DATA 8192
#define TX_SIZE (ISER_HDR_LEN + ISCSI_BHS_LEN + RX_AHS_ROOM + TX_DATA)
#define NTX 256
#define CQ_BUDGET 64 /* completions handled per callback: one busy connection must not hold
			 the worker's loop (its other connections' NOP-Outs) for seconds */
#define CQ_DEPTH (NRX + NTX + MAX_RDMA + 16)
#define MAX_RDMA 512 /* RDMA Write/Read work requests in flight */
#define ITT_SLOTS 2048
#define MR_SLOTS 256
#define POOL_SLOTS 256 /* regions registered for the connection's lifetime (mem_register) */
#define MAX_PLACED (8u << 20) /* largest Data-Out reported upward for one RDMA Read burst (the
				 BHS's DataSegmentLength has 24 bits) */

enum wr_kind { WR_RECV = 1, WR_SEND = 2, WR_WRITE = 3, WR_READ = 4 };

static inline uint64_t wr_id(enum wr_kind k, uintptr_t v)
{
	return ((uint64_t)k << 56) | (uint64_t)v;
}

struct itt_ent {
	uint32_t itt;
	bool used;
	bool wsol_set;
	struct ibv_mr *mr;      /* initiator: the command's buffer, registered for this command */
	uint32_t rstag, wstag;
	uint64_t rva, wva;
	uint32_t wsol;          /* buffer offset of the first solicited byte */
};

struct mr_ent {
	void *base;
	size_t size;
	struct ibv_mr *mr;
	uint32_t refs;          /* work requests in flight using it */
	uint64_t used;          /* LRU stamp */
};

/* Memory the role registered for the connection's lifetime (the initiator's buffer pool). */
struct pool_ent {
	void *base;
	size_t size;
	struct ibv_mr *mr;
};

struct tx_slot {
	struct dm_txpdu *p;
	int next_free;
};

/* A connection request, moved from the listener to a worker. */
struct iser_request {
	struct dm_incoming base;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
	uint8_t peer_flags;     /* the initiator's iser_cm_hdr byte 0 */
	uint8_t responder_resources, initiator_depth;
};

struct iser_conn {
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ev_io cm_io, cq_io;
	struct ev_poller cq_poller; /* the CQ looked at by the loop's poll window (global.poll_us) */
	struct ev_timer cq_more; /* the CQ held more than one callback's budget: go on soon */
	bool established;
	bool terminated;
	bool dead;              /* resources gone (release) */
	uint32_t ord;           /* RDMA Reads we may have outstanding */
	uint32_t reads_out;
	uint32_t max_msg;       /* largest RDMA message the port carries (split reads at it) */
	int local_access;       /* access flags of the target's task buffers (iser_mr_get): on
				   iWARP an RDMA Read's sink must allow remote writes, since the
				   Read Response is placed as a tagged write (RFC 5040 4.4) */
	bool iwarp;             /* the device's transport is iWARP */

	uint8_t *rx_area;
	struct ibv_mr *rx_mr;
	int early[NRX];         /* receives completed before ESTABLISHED */
	uint32_t early_len[NRX];
	int nearly;

	uint8_t *tx_area;
	struct ibv_mr *tx_mr;
	struct tx_slot tx[NTX];
	int tx_free;
	uint32_t sends_out, rdma_out;
	struct list_head backlog; /* txpdus waiting for a send slot or an RDMA credit, in order */
	struct list_head rd_backlog; /* Get_Data waiting for read credits: apart, so that
					Sends (responses, NOP-Ins) never wait behind RDMA Reads */

	struct itt_ent itts[ITT_SLOTS];
	struct mr_ent mrs[MR_SLOTS];
	struct pool_ent pools[POOL_SLOTS];
	uint64_t mr_clock;
	struct iscsi_conn *c;

	/* test knob (IX_ISER_TEST_LOGOUT_HOLD_MS, initiator): after posting a Logout Request,
	   leave the CQ unpolled until this time (ms, the loop's clock), as a slow host would */
	uint64_t hold_until;

	/* initiator: the active open */
	bool connecting;
	/* test hook (dm_ops.tx_abort_at): bytes handed to the wire so far, and the point at
	   which the connection is aborted instead (0 = never) */
	uint64_t tx_total, tx_abort_at;
	/* a post failed inside a role's call: the connection fails from the loop (fail_err,
	   fail_why), never inside that call, and nothing more is posted meanwhile */
	int fail_err;
	const char *fail_why;
	struct ev_defer fail_defer;
	void (*on_up)(struct iscsi_conn *c, int err);
};

struct iser_listener {
	struct dm_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ev_io io;
	struct ev_loop *loop;
	dm_incoming_cb cb;
	void *arg;
};

/* A PDU's scratch (dm_txpdu.xport) while the transport holds it, set in iser_queue. */
struct iser_tx {
	struct mr_ent *mr;              /* the registration its RDMA operations use */
	uint32_t off;                   /* Get_Data: bytes of the R2T already asked for */
	uint32_t pending;               /* RDMA work requests still in flight */
	bool failed;                    /* one of them failed */
};
_Static_assert(sizeof(struct iser_tx) <= DM_TXPDU_XPORT_SIZE, "iser_tx");
#define TX(p) DM_TXPDU_XPORT(struct iser_tx, p)

static inline struct iser_conn *iser_of(struct iscsi_conn *c)
{
	return iscsi_conn_priv(c);
}

/* iser.c */
/* The connection failed (err, why for the log): tell the role, once. */
void iser_fail(struct iscsi_conn *c, int err, const char *why);

/* iser_mem.c */
struct itt_ent *iser_itt_find(struct iser_conn *ic, uint32_t itt, bool create);
void iser_itt_del(struct iser_conn *ic, uint32_t itt);
struct mr_ent *iser_mr_get(struct iser_conn *ic, void *base, size_t size);
struct pool_ent *iser_pool_find(struct iser_conn *ic, const void *base, size_t size);
void iser_buf_free(struct iscsi_conn *c, void *base);
int iser_mem_register(struct iscsi_conn *c, void *base, size_t size);

/* iser_data.c */
int iser_post_recv(struct iser_conn *ic, int idx);
void iser_tx_give(struct iser_conn *ic, int i);
int iser_queue(struct iscsi_conn *c, struct dm_txpdu *p);
void iser_tx_abort_at(struct iscsi_conn *c, uint64_t total);
int iser_cq_poll(struct iscsi_conn *c);
int iser_cq_poller(struct ev_poller *p);
int iser_cq_take_rest(struct iscsi_conn *c);
void iser_cq_more_cb(struct ev_timer *t);
void iser_cq_cb(struct ev_io *w, uint32_t revents);
void iser_drain_backlog(struct iscsi_conn *c);
/* A receive completed (idx: the buffer, len: bytes): hand the PDU up. */
void iser_handle_recv(struct iscsi_conn *c, int idx, uint32_t len);
/* One RDMA Read of Get_Data p completed (ok: successfully). */
void iser_read_piece_done(struct iscsi_conn *c, struct dm_txpdu *p, bool ok);

#endif
