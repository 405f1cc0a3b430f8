/* iSER datamover (see iser.h). Facts followed here: RFC 7145 sections 5-9 and the behaviour of
 * the Linux initiator / LIO isert / tgt summarised in shared/docs/protocol.md sections 5-6. */
#include "transport/iser/iser.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "event/loop.h"
#include "proto/pdu.h"
#include "util/bytes.h"
#include "util/log.h"

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

static uint64_t wr_id(enum wr_kind k, uintptr_t v)
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
	struct ev_timer cq_more; /* the CQ held more than one callback's budget: go on soon */
	bool established;
	bool terminated;
	bool dead;              /* resources gone (release) */
	uint32_t ord;           /* RDMA Reads we may have outstanding */
	uint32_t reads_out;
	uint32_t max_msg;       /* largest RDMA message the port carries (split reads at it) */

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

static void fail(struct iscsi_conn *c, int err, const char *why)
{
	struct iser_conn *ic = iser_of(c);

	if (ic->terminated)
		return;
	if (c->peer_close_expected && err == -ECONNRESET)
		log_dbg("iser", "%s: %s after our last PDU: the close we waited for", c->peer, why);
	else
		log_warn("iser", "%s: %s", c->peer, why);
	dm_conn_failed(c, err);
}

/* ---------------------------------------------------------------- ITT table */

static struct itt_ent *itt_find(struct iser_conn *ic, uint32_t itt, bool create)
{
	uint32_t h = (itt * 2654435761u) & (ITT_SLOTS - 1);

	for (uint32_t i = 0; i < ITT_SLOTS; i++) {
		struct itt_ent *e = &ic->itts[(h + i) & (ITT_SLOTS - 1)];

		if (e->used && e->itt == itt)
			return e;
		if (!e->used && create) {
			memset(e, 0, sizeof(*e));
			e->used = true;
			e->itt = itt;
			return e;
		}
		if (!e->used && !create)
			return NULL; /* no tombstones: deletion re-inserts the run below */
	}
	return NULL;
}

static void itt_del(struct iser_conn *ic, uint32_t itt)
{
	struct itt_ent *e = itt_find(ic, itt, false);
	uint32_t i;

	if (!e)
		return;
	e->used = false;
	/* re-insert the rest of the probe run (linear probing without tombstones) */
	i = (uint32_t)(e - ic->itts);
	for (uint32_t k = 1; k < ITT_SLOTS; k++) {
		struct itt_ent *n = &ic->itts[(i + k) & (ITT_SLOTS - 1)], tmp;

		if (!n->used)
			break;
		tmp = *n;
		n->used = false;
		*itt_find(ic, tmp.itt, true) = tmp;
	}
}

/* ---------------------------------------------------------------- memory registrations */

static struct mr_ent *mr_get(struct iser_conn *ic, void *base, size_t size)
{
	struct mr_ent *victim = NULL;

	for (int i = 0; i < MR_SLOTS; i++) {
		struct mr_ent *m = &ic->mrs[i];

		if (m->mr && m->base == base && m->size >= size) {
			m->used = ++ic->mr_clock;
			return m;
		}
		if (!m->mr) {
			if (!victim || victim->mr)
				victim = m;
		} else if (m->refs == 0 && (!victim || (victim->mr && m->used < victim->used))) {
			victim = m;
		}
	}
	if (!victim)
		return NULL;
	if (victim->mr) {
		ibv_dereg_mr(victim->mr);
		victim->mr = NULL;
	}
	victim->mr = ibv_reg_mr(ic->pd, base, size, IBV_ACCESS_LOCAL_WRITE);
	if (!victim->mr)
		return NULL;
	victim->base = base;
	victim->size = size;
	victim->refs = 0;
	victim->used = ++ic->mr_clock;
	return victim;
}

static void iser_buf_free(struct iscsi_conn *c, void *base)
{
	struct iser_conn *ic = iser_of(c);

	for (int i = 0; i < MR_SLOTS; i++) {
		struct mr_ent *m = &ic->mrs[i];

		if (m->mr && m->base == base) {
			/* in-flight work on a buffer the role frees would be a role bug; the
			   registration is dropped either way */
			ibv_dereg_mr(m->mr);
			memset(m, 0, sizeof(*m));
		}
	}
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];

		if (pe->mr && pe->base == base) {
			ibv_dereg_mr(pe->mr);
			memset(pe, 0, sizeof(*pe));
		}
	}
}

/* mem_register: one region for the connection's lifetime, open to the peer's RDMA Reads and
 * Writes (the initiator names parts of it as Read/Write STags). */
static int iser_mem_register(struct iscsi_conn *c, void *base, size_t size)
{
	struct iser_conn *ic = iser_of(c);

	if (!ic->pd || ic->terminated)
		return -ENOTCONN;
	if (!base || !size)
		return -EINVAL;
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];

		if (pe->mr && pe->base == base && pe->size >= size)
			return 0; /* already there */
	}
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];

		if (pe->mr)
			continue;
		pe->mr = ibv_reg_mr(ic->pd, base, size,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		if (!pe->mr)
			return errno ? -errno : -ENOMEM;
		pe->base = base;
		pe->size = size;
		return 0;
	}
	return -ENOSPC;
}

/* The registered region that holds all of [base, base + size), or NULL. */
static struct pool_ent *pool_find(struct iser_conn *ic, const void *base, size_t size)
{
	uintptr_t b = (uintptr_t)base;

	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];
		uintptr_t pb = (uintptr_t)pe->base;

		if (pe->mr && b >= pb && size <= pe->size && b - pb <= pe->size - size)
			return pe;
	}
	return NULL;
}

/* ---------------------------------------------------------------- receive */

static int post_recv(struct iser_conn *ic, int idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(ic->rx_area + (size_t)idx * RX_SIZE),
		.length = RX_SIZE,
		.lkey = ic->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = wr_id(WR_RECV, (uintptr_t)idx), .sg_list = &sge,
				 .num_sge = 1}, *bad;

	return ibv_post_recv(ic->qp, &wr, &bad) ? -EIO : 0;
}

static void handle_recv(struct iscsi_conn *c, int idx, uint32_t len)
{
	struct iser_conn *ic = iser_of(c);
	uint8_t *b = ic->rx_area + (size_t)idx * RX_SIZE;
	uint8_t *bhs = b + ISER_HDR_LEN, *ahs, *data;
	struct dm_rx_place place = {0};
	uint32_t ahs_len, dlen;
	int r;

	if (len < ISER_HDR_LEN + ISCSI_BHS_LEN) {
		fail(c, -EPROTO, "iSER message shorter than the iSER header and a BHS");
		return;
	}
	if ((b[0] & 0xf0) == ISER_HELLO) {
		fail(c, -EPROTO, "iSER Hello received: not supported (iSERHelloRequired=No)");
		return;
	}
	if ((b[0] & 0xf0) != ISER_CTRL) {
		fail(c, -EPROTO, "unknown iSER opcode");
		return;
	}
	ahs_len = (uint32_t)bhs[4] * 4;
	dlen = get_be24(bhs + 5);
	if (ahs_len > RX_AHS_ROOM ||
	    (uint64_t)ISER_HDR_LEN + ISCSI_BHS_LEN + ahs_len + dlen > len) {
		fail(c, -EPROTO, "iSCSI PDU longer than its iSER message");
		return;
	}
	ahs = ahs_len ? bhs + ISCSI_BHS_LEN : NULL;
	data = bhs + ISCSI_BHS_LEN + ahs_len;
	if ((bhs[0] & 0x3f) == ISCSI_OP_SCSI_RSP && c->role == ISCSI_ROLE_INITIATOR) {
		/* the target has placed or fetched all data: drop the command's registration
		   (the buffer is the caller's again) */
		struct itt_ent *e = itt_find(ic, get_be32(bhs + 16), false);

		if (e) {
			if (e->mr)
				ibv_dereg_mr(e->mr);
			itt_del(ic, e->itt);
		}
	}
	if ((bhs[0] & 0x3f) == ISCSI_OP_SCSI_CMD && c->role == ISCSI_ROLE_TARGET) {
		struct itt_ent *e = itt_find(ic, get_be32(bhs + 16), true);

		if (!e) {
			fail(c, -ENOSPC, "more commands in flight than the ITT table holds");
			return;
		}
		e->wsol_set = false;
		e->rstag = e->wstag = 0;
		e->rva = e->wva = 0;
		if (b[0] & ISER_WSV) {
			e->wstag = get_be32(b + 4);
			e->wva = get_be64(b + 8);
		}
		if (b[0] & ISER_RSV) {
			e->rstag = get_be32(b + 16);
			e->rva = get_be64(b + 20);
		}
		{
			/* a buffer that would wrap the address space is no buffer (the device
			   checks the rest: an STag's bounds fail the RDMA operation, and that
			   completion error fails the connection) */
			uint64_t edtl = get_be32(bhs + 20);

			if ((e->wstag && e->wva > UINT64_MAX - edtl) ||
			    (e->rstag && e->rva > UINT64_MAX - edtl)) {
				fail(c, -EPROTO, "iSER header names a buffer past the address space");
				return;
			}
		}
	}
	r = dm_rx_header(c, bhs, ahs, ahs_len, &place);
	if (r < 0) {
		fail(c, r, "PDU refused in the header phase");
		return;
	}
	if (dlen && place.buf && place.buf != data)
		memcpy(place.buf, data, dlen);
	dm_rx_pdu(c, true);
}

/* ---------------------------------------------------------------- send side */

static int tx_take(struct iser_conn *ic)
{
	int i = ic->tx_free;

	if (i >= 0)
		ic->tx_free = ic->tx[i].next_free;
	return i;
}

static void tx_give(struct iser_conn *ic, int i)
{
	ic->tx[i].p = NULL;
	ic->tx[i].next_free = ic->tx_free;
	ic->tx_free = i;
}

/* Initiator: name the command's buffer in the iSER header (RFC 7145 9.2): R2T-free reads get
 * the Read STag and the buffer's address; writes with solicited data left get the Write STag
 * and the address of the first solicited byte (p->dest). A buffer inside a region registered
 * at login (the session's buffer pool, mem_register) uses that region's STag: no work per
 * I/O. Any other buffer is registered for this command and deregistered when its SCSI
 * Response arrives: a cache keyed by address would be wrong, since the caller may free the
 * memory after the command and get the same address back for other pages. */
static int advertise(struct iser_conn *ic, struct dm_txpdu *p, uint8_t *hdr)
{
	uint32_t itt = get_be32(p->bhs + 16), rkey;
	bool rd = p->bhs[1] & 0x40, wr = p->bhs[1] & 0x20;
	struct pool_ent *pe;
	struct itt_ent *e;

	if (!rd && !(wr && p->dest.iov_len))
		return 0;
	e = itt_find(ic, itt, true);
	if (!e)
		return -ENOSPC;
	if (e->mr) {
		ibv_dereg_mr(e->mr);
		e->mr = NULL;
	}
	pe = pool_find(ic, p->buf_base, p->buf_size);
	if (pe) {
		rkey = pe->mr->rkey;
	} else {
		e->mr = ibv_reg_mr(ic->pd, p->buf_base, p->buf_size,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ);
		if (!e->mr) {
			itt_del(ic, itt);
			return -ENOMEM;
		}
		rkey = e->mr->rkey;
	}
	if (rd) {
		hdr[0] |= ISER_RSV;
		put_be32(hdr + 16, rkey);
		put_be64(hdr + 20, (uint64_t)(uintptr_t)p->buf_base);
	}
	if (wr && p->dest.iov_len) {
		hdr[0] |= ISER_WSV;
		put_be32(hdr + 4, rkey);
		put_be64(hdr + 8, (uint64_t)(uintptr_t)p->dest.iov_base);
	}
	return 0;
}

/* IX_ISER_TEST_LOGOUT_HOLD_MS (tests only, read once): the initiator leaves its CQ unpolled for
 * that long after posting a Logout Request, so that the target's disconnect is read from the CM
 * channel while the Logout Response still sits in the CQ (the race of cm_cb's
 * cq_take_rest, made certain). 0 (unset): no hold. */
static uint32_t test_logout_hold_ms(void)
{
	static int once;
	static uint32_t ms;

	if (!once) {
		const char *e = getenv("IX_ISER_TEST_LOGOUT_HOLD_MS");
		unsigned long v = e ? strtoul(e, NULL, 10) : 0;

		ms = v > 60000 ? 60000 : (uint32_t)v;
		once = 1;
	}
	return ms;
}

/* 1 posted, 0 no resources (caller backlogs), -errno broken. */
static int post_control(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_sge sge;
	uint8_t *b;
	uint32_t len;
	int i;

	if (ISER_HDR_LEN + ISCSI_BHS_LEN + p->ahs_len + p->data_len > TX_SIZE)
		return -EMSGSIZE;
	i = tx_take(ic);
	if (i < 0)
		return 0;
	b = ic->tx_area + (size_t)i * TX_SIZE;
	memset(b, 0, ISER_HDR_LEN);
	b[0] = ISER_CTRL;
	if (c->role == ISCSI_ROLE_INITIATOR && (p->bhs[0] & 0x3f) == ISCSI_OP_SCSI_CMD &&
	    p->buf_base && p->buf_size) {
		int r = advertise(ic, p, b);

		if (r < 0) {
			tx_give(ic, i);
			return r;
		}
	}
	put_be24(p->bhs + 5, p->data_len);
	p->bhs[4] = (uint8_t)(p->ahs_len / 4);
	memcpy(b + ISER_HDR_LEN, p->bhs, ISCSI_BHS_LEN);
	len = ISER_HDR_LEN + ISCSI_BHS_LEN;
	if (p->ahs_len) {
		memcpy(b + len, p->ahs, p->ahs_len);
		len += p->ahs_len;
	}
	for (int k = 0; k < p->data_cnt; k++) {
		memcpy(b + len, p->data[k].iov_base, p->data[k].iov_len);
		len += (uint32_t)p->data[k].iov_len;
	}
	sge.addr = (uintptr_t)b;
	sge.length = len;
	sge.lkey = ic->tx_mr->lkey;
	wr.wr_id = wr_id(WR_SEND, (uintptr_t)i);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(ic->qp, &wr, &bad)) {
		tx_give(ic, i);
		return -EIO;
	}
	ic->tx[i].p = p;
	ic->sends_out++;
	if ((p->bhs[0] & 0x3f) == ISCSI_OP_LOGOUT_REQ && c->role == ISCSI_ROLE_INITIATOR) {
		uint32_t hold = test_logout_hold_ms();

		if (hold)
			ic->hold_until = ev_now_ms(c->loop) + hold;
	}
	if ((p->bhs[0] & 0x3f) == ISCSI_OP_SCSI_RSP)
		itt_del(ic, get_be32(p->bhs + 16)); /* the task is over for the transport */
	return 1;
}

static int post_write(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	uint32_t itt = get_be32(p->bhs + 16), off = get_be32(p->bhs + 40);
	struct itt_ent *e = itt_find(ic, itt, false);
	struct ibv_sge sge[DM_TX_MAX_DATA_IOV];
	struct ibv_send_wr wr = {0}, *bad;
	struct mr_ent *m;

	if (!e || !e->rstag)
		return -EPROTO;
	if (ic->rdma_out >= MAX_RDMA)
		return 0;
	m = mr_get(ic, p->buf_base, p->buf_size);
	if (!m)
		return -ENOMEM;
	for (int k = 0; k < p->data_cnt; k++) {
		sge[k].addr = (uintptr_t)p->data[k].iov_base;
		sge[k].length = (uint32_t)p->data[k].iov_len;
		sge[k].lkey = m->mr->lkey;
	}
	wr.wr_id = wr_id(WR_WRITE, (uintptr_t)p);
	wr.sg_list = sge;
	wr.num_sge = p->data_cnt;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = e->rva + off;
	wr.wr.rdma.rkey = e->rstag;
	if (ibv_post_send(ic->qp, &wr, &bad))
		return -EIO;
	m->refs++;
	TX(p)->mr = m;
	ic->rdma_out++;
	return 1;
}

/* Get_Data: fetch the R2T's whole DesiredDataTransferLength into p->dest with RDMA Reads,
 * split only where the port's message size ends, at most the accepted ORD in flight. 1 all
 * posted, 0 out of credits (the caller backlogs p; a later call goes on from TX(p)->off),
 * -errno broken. Completion: read_piece_done(). */
static int post_read(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	uint32_t itt = get_be32(p->bhs + 16), off = get_be32(p->bhs + 40);
	uint32_t ddtl = get_be32(p->bhs + 44);
	struct itt_ent *e = itt_find(ic, itt, false);
	struct mr_ent *m;

	if (!e || !e->wstag)
		return -EPROTO;
	if (p->dest.iov_len != ddtl || !p->dest.iov_base || ddtl == 0)
		return -EINVAL;
	if (ic->rdma_out >= MAX_RDMA || ic->reads_out >= ic->ord)
		return 0;
	if (!e->wsol_set) {
		/* the Write Base Offset names the first solicited byte (Linux initiators) */
		e->wsol = off;
		e->wsol_set = true;
	}
	if (off < e->wsol)
		return -EPROTO;
	m = mr_get(ic, p->buf_base, p->buf_size);
	if (!m)
		return -ENOMEM;
	if (TX(p)->pending && TX(p)->mr != m)
		return -EIO; /* cannot happen: an entry with work in flight is never evicted */
	TX(p)->mr = m;
	while (TX(p)->off < ddtl) {
		uint32_t n = ddtl - TX(p)->off;
		struct ibv_send_wr wr = {0}, *bad;
		struct ibv_sge sge;

		if (ic->rdma_out >= MAX_RDMA || ic->reads_out >= ic->ord)
			return 0;
		if (n > ic->max_msg)
			n = ic->max_msg;
		sge.addr = (uintptr_t)p->dest.iov_base + TX(p)->off;
		sge.length = n;
		sge.lkey = m->mr->lkey;
		wr.wr_id = wr_id(WR_READ, (uintptr_t)p);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = e->wva + (off - e->wsol) + TX(p)->off;
		wr.wr.rdma.rkey = e->wstag;
		if (ibv_post_send(ic->qp, &wr, &bad))
			return -EIO;
		m->refs++;
		TX(p)->pending++;
		TX(p)->off += n;
		ic->rdma_out++;
		ic->reads_out++;
	}
	return 1;
}

static int post_any(struct iscsi_conn *c, struct dm_txpdu *p)
{
	switch (p->bhs[0] & 0x3f) {
	case ISCSI_OP_DATA_IN:
		return post_write(c, p);
	case ISCSI_OP_R2T:
		return post_read(c, p);
	default:
		return post_control(c, p);
	}
}

/* The backlog a txpdu waits on: RDMA Reads apart (they need read credits, and nothing sent
 * later depends on their order); everything else in one queue, so a SCSI Response stays
 * behind its Data-In's RDMA Writes. */
static struct list_head *backlog_of(struct iser_conn *ic, const struct dm_txpdu *p)
{
	return (p->bhs[0] & 0x3f) == ISCSI_OP_R2T ? &ic->rd_backlog : &ic->backlog;
}

/* 0, or -errno when the connection failed */
static int drain_one(struct iscsi_conn *c, struct list_head *q)
{
	struct iser_conn *ic = iser_of(c);

	while (!ic->terminated && !list_empty(q)) {
		struct dm_txpdu *p = list_first_entry(q, struct dm_txpdu, link);
		int r = post_any(c, p);

		if (r == 0)
			return 0;
		list_del(&p->link);
		if (r < 0) {
			p->sent(p, r);
			fail(c, r, "cannot post a queued work request");
			return r;
		}
	}
	return 0;
}

static void drain_backlog(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	if (drain_one(c, &ic->backlog) == 0)
		drain_one(c, &ic->rd_backlog);
}

static int iser_queue(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	int r;

	if (c->terminated || ic->terminated) {
		p->sent(p, -ECONNABORTED);
		return -ECONNABORTED;
	}
	/* the transport's scratch (a pooled txpdu keeps the last use's values) */
	TX(p)->off = 0;
	TX(p)->mr = NULL;
	TX(p)->pending = 0;
	TX(p)->failed = false;
	if (!list_empty(backlog_of(ic, p))) {
		list_add_tail(&p->link, backlog_of(ic, p));
		return 0;
	}
	r = post_any(c, p);
	if (r == 0) {
		list_add_tail(&p->link, backlog_of(ic, p));
		return 0;
	}
	if (r < 0) {
		p->sent(p, r);
		fail(c, r, r == -EPROTO ? "data transfer for a task without an STag"
					: "cannot post a work request");
		return r;
	}
	return 0;
}

/* The RDMA Reads of an R2T finished: the data is where the role asked (p->dest, inside the
 * task's buffer). Report it upward as one Data-Out PDU (one per MAX_PLACED bytes) with
 * c->rx_placed set: the role checks it against the R2T as it would a Data-Out over TCP, and
 * names the same place, so nothing is copied. */
static void read_done(struct iscsi_conn *c, struct dm_txpdu *p)
{
	uint32_t itt = get_be32(p->bhs + 16), ttt = get_be32(p->bhs + 20);
	uint32_t off = get_be32(p->bhs + 40), len = get_be32(p->bhs + 44);
	uint8_t *src = p->dest.iov_base;
	uint8_t lun[8];
	uint32_t datasn = 0, done = 0;

	memcpy(lun, p->bhs + 8, 8);
	p->sent(p, 0);
	while (done < len && !c->terminated) {
		uint32_t n = len - done < MAX_PLACED ? len - done : MAX_PLACED;
		struct dm_rx_place place = {0};
		uint8_t bhs[ISCSI_BHS_LEN] = {0};
		int r;

		bhs[0] = ISCSI_OP_DATA_OUT;
		bhs[1] = done + n == len ? 0x80 : 0;
		put_be24(bhs + 5, n);
		memcpy(bhs + 8, lun, 8);
		put_be32(bhs + 16, itt);
		put_be32(bhs + 20, ttt);
		put_be32(bhs + 36, datasn++);
		put_be32(bhs + 40, off + done);
		c->rx_placed = true;
		r = dm_rx_header(c, bhs, NULL, 0, &place);
		c->rx_placed = false;
		if (r < 0) {
			fail(c, -EPROTO, "RDMA Read data refused by the role");
			return;
		}
		if (place.buf && place.buf != src + done) {
			/* the data is where the R2T said; a role that wants it elsewhere (or
			   discarded: NULL) is told nothing else */
			fail(c, -EPROTO, "the role placed RDMA Read data elsewhere");
			return;
		}
		c->rx_placed = true;
		dm_rx_pdu(c, true);
		c->rx_placed = false;
		done += n;
	}
}

/* One RDMA Read of p completed (or flushed). Once none is in flight and all were posted,
 * report the data upward, or end p with an error if any failed. A p still partly on the
 * backlog waits for the rest to be posted (or for terminate() to end it). */
static void read_piece_done(struct iscsi_conn *c, struct dm_txpdu *p, bool ok)
{
	struct iser_conn *ic = iser_of(c);
	struct mr_ent *m = TX(p)->mr;

	if (m && m->refs)
		m->refs--;
	ic->rdma_out--;
	ic->reads_out--;
	TX(p)->pending--;
	if (!ok)
		TX(p)->failed = true;
	if (TX(p)->pending || TX(p)->off < get_be32(p->bhs + 44))
		return;
	if (TX(p)->failed || c->terminated || ic->terminated)
		p->sent(p, TX(p)->failed ? -EIO : -ECONNABORTED);
	else
		read_done(c, p);
}

/* ---------------------------------------------------------------- completions */

static void handle_wc(struct iscsi_conn *c, struct ibv_wc *wc)
{
	struct iser_conn *ic = iser_of(c);
	enum wr_kind kind = (enum wr_kind)(wc->wr_id >> 56);
	uintptr_t v = (uintptr_t)(wc->wr_id & ((1ull << 56) - 1));
	bool ok = wc->status == IBV_WC_SUCCESS;

	switch (kind) {
	case WR_RECV:
		if (!ok)
			break;
		if (!ic->established) {
			/* the first Send can beat RDMA_CM_EVENT_ESTABLISHED (protocol.md 5.2) */
			ic->early[ic->nearly] = (int)v;
			ic->early_len[ic->nearly++] = wc->byte_len;
			return;
		}
		handle_recv(c, (int)v, wc->byte_len);
		if (!c->terminated && !ic->terminated && post_recv(ic, (int)v) < 0)
			fail(c, -EIO, "cannot repost a receive buffer");
		return;
	case WR_SEND: {
		struct dm_txpdu *p = ic->tx[v].p;
		ic->sends_out--;
		tx_give(ic, (int)v);
		if (p)
			p->sent(p, ok ? 0 : -EIO);
		break;
	}
	case WR_READ:
		read_piece_done(c, (struct dm_txpdu *)v, ok);
		break;
	case WR_WRITE: {
		struct dm_txpdu *p = (struct dm_txpdu *)v;
		struct mr_ent *m = TX(p)->mr;
		if (m && m->refs)
			m->refs--;
		ic->rdma_out--;
		p->sent(p, ok ? 0 : -EIO);
		break;
	}
	default:
		break;
	}
	if (!ok) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR) {
			char why[96];
			snprintf(why, sizeof(why), "work completion error: %s",
				 ibv_wc_status_str(wc->status));
			fail(c, -EIO, why);
		}
		return;
	}
	drain_backlog(c);
}

/* Handle at most CQ_BUDGET completions, then give the loop back: a connection whose peer keeps
 * its queue full (hundreds of receive buffers and RDMA operations in flight) would otherwise be
 * served for seconds on a slow host while every other connection of the worker waits. What is
 * left in the CQ is taken up by the cq_more timer (0 ms: after the loop's other ready events). */
static void cq_poll(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);
	struct ibv_wc wc[32];
	int n, done = 0;

	if (ic->hold_until) {
		uint64_t now = ev_now_ms(c->loop);

		if (now < ic->hold_until) {
			ev_timer_start(c->loop, &ic->cq_more, ic->hold_until - now);
			return;
		}
		ic->hold_until = 0;
	}
	iscsi_conn_get(c);
	while (!ic->dead && !ic->terminated && done < CQ_BUDGET &&
	       (n = ibv_poll_cq(ic->cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++)
			handle_wc(c, &wc[i]);
		done += n;
	}
	if (done >= CQ_BUDGET && !ic->dead && !ic->terminated)
		ev_timer_start(c->loop, &ic->cq_more, 0);
	iscsi_conn_put(c);
}

/* The connection ends by a CM event (the peer's disconnect, an error): first handle what the CQ
 * already holds. An RC Send completes on the sender only once this side's device has placed it
 * (its receive completion is in this CQ), so a peer that disconnects right after its last Send
 * completed (a target after its Logout or failed Login Response) can have its DISCONNECTED read
 * here before that receive: the CM channel and the CQ are two fds, and the CQ may also be held
 * back by CQ_BUDGET or a slow loop. Dropping it would turn a Logout Response into "connection
 * reset". As TCP reads the bytes before the FIN, take the completions first; one at a time, so
 * none is held in a local array if one of them ends the connection (iser_terminate's drain
 * must see the rest in the CQ). Bounded by the CQ's depth: the peer is gone, and the receives
 * reposted meanwhile cannot complete. */
static int cq_take_rest(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);
	struct ibv_wc wc;
	int done = 0;

	ev_timer_stop(c->loop, &ic->cq_more);
	ic->hold_until = 0;
	while (done < CQ_DEPTH && !ic->dead && !ic->terminated && ibv_poll_cq(ic->cq, 1, &wc) == 1) {
		handle_wc(c, &wc);
		done++;
	}
	return done;
}

static void cq_more_cb(struct ev_timer *t)
{
	cq_poll(t->arg);
}

static void cq_cb(struct ev_io *w, uint32_t revents)
{
	struct iscsi_conn *c = w->arg;
	struct iser_conn *ic = iser_of(c);
	struct ibv_cq *cq;
	void *ctx;

	(void)revents;
	if (ibv_get_cq_event(ic->cc, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		ibv_req_notify_cq(cq, 0);
	}
	cq_poll(c);
}

/* ---------------------------------------------------------------- CM events */

static void established(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	ic->established = true;
	for (int i = 0; i < ic->nearly && !c->terminated; i++) {
		handle_recv(c, ic->early[i], ic->early_len[i]);
		if (!c->terminated && post_recv(ic, ic->early[i]) < 0)
			fail(c, -EIO, "cannot repost a receive buffer");
	}
	ic->nearly = 0;
}

static void active_event(struct iscsi_conn *c, enum rdma_cm_event_type type);

static void cm_cb(struct ev_io *w, uint32_t revents)
{
	struct iscsi_conn *c = w->arg;
	struct iser_conn *ic = iser_of(c);
	struct rdma_cm_event *ev;

	(void)revents;
	iscsi_conn_get(c);
	while (!ic->dead && rdma_get_cm_event(ic->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;

		rdma_ack_cm_event(ev);
		if (ic->connecting) {
			active_event(c, type);
			continue;
		}
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			established(c);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (ic->established && !ic->terminated) {
				int n = cq_take_rest(c);

				if (n)
					log_info("iser", "%s: %s read with %d completion(s) still "
						 "in the CQ: handled them first", c->peer,
						 rdma_event_str(type), n);
			}
			fail(c, -ECONNRESET, rdma_event_str(type));
			break;
		default:
			break;
		}
	}
	iscsi_conn_put(c);
}

/* ---------------------------------------------------------------- ops */

static void iser_enable(struct iscsi_conn *c, const struct iscsi_conn_params *cp)
{
	(void)c;
	(void)cp; /* no digests, no framing: the negotiated limits live in c->params */
}

/* Wait (bounded) until every posted work request has completed or flushed, so no buffer is
 * touched by the device after the role is told the transfer ended. */
static void drain(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
	struct timespec t0, t;

	if (!ic->qp)
		return;
	ibv_modify_qp(ic->qp, &attr, IBV_QP_STATE);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(ic->cq, 32, wc);

		for (int i = 0; i < n; i++) {
			enum wr_kind kind = (enum wr_kind)(wc[i].wr_id >> 56);
			uintptr_t v = (uintptr_t)(wc[i].wr_id & ((1ull << 56) - 1));

			if (kind == WR_SEND) {
				struct dm_txpdu *p = ic->tx[v].p;
				ic->sends_out--;
				tx_give(ic, (int)v);
				if (p)
					p->sent(p, -ECONNABORTED);
			} else if (kind == WR_READ) {
				read_piece_done(c, (struct dm_txpdu *)v, false);
			} else if (kind == WR_WRITE) {
				struct dm_txpdu *p = (struct dm_txpdu *)v;
				ic->rdma_out--;
				p->sent(p, -ECONNABORTED);
			}
		}
		if (ic->sends_out == 0 && ic->rdma_out == 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 2000) {
			log_err("iser", "%s: %u sends and %u RDMA operations never flushed", c->peer,
				ic->sends_out, ic->rdma_out);
			break;
		}
		if (n == 0)
			usleep(1000);
	}
}

static void iser_terminate(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	if (ic->terminated)
		return;
	ic->terminated = true;
	ev_timer_stop(c->loop, &ic->cq_more);
	ev_io_stop(c->loop, &ic->cq_io);
	ev_io_stop(c->loop, &ic->cm_io);
	if (ic->id)
		rdma_disconnect(ic->id);
	drain(c);
	for (struct list_head *q = &ic->backlog; q; q = q == &ic->backlog ? &ic->rd_backlog : NULL)
		while (!list_empty(q)) {
			struct dm_txpdu *p = list_first_entry(q, struct dm_txpdu, link);
			list_del(&p->link);
			p->sent(p, -ECONNABORTED);
		}
	iscsi_conn_put(c); /* the transport's own reference */
}

static void iser_release(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	ic->dead = true;
	ev_timer_stop(c->loop, &ic->cq_more);
	for (int i = 0; i < MR_SLOTS; i++)
		if (ic->mrs[i].mr)
			ibv_dereg_mr(ic->mrs[i].mr);
	for (int i = 0; i < POOL_SLOTS; i++)
		if (ic->pools[i].mr)
			ibv_dereg_mr(ic->pools[i].mr);
	for (int i = 0; i < ITT_SLOTS; i++)
		if (ic->itts[i].used && ic->itts[i].mr)
			ibv_dereg_mr(ic->itts[i].mr);
	if (ic->qp)
		rdma_destroy_qp(ic->id);
	if (ic->cq)
		ibv_destroy_cq(ic->cq);
	if (ic->cc)
		ibv_destroy_comp_channel(ic->cc);
	if (ic->rx_mr)
		ibv_dereg_mr(ic->rx_mr);
	if (ic->tx_mr)
		ibv_dereg_mr(ic->tx_mr);
	if (ic->pd)
		ibv_dealloc_pd(ic->pd);
	if (ic->id)
		rdma_destroy_id(ic->id);
	if (ic->ch)
		rdma_destroy_event_channel(ic->ch);
	if (ic->rx_area)
		munmap(ic->rx_area, (size_t)NRX * RX_SIZE);
	if (ic->tx_area)
		munmap(ic->tx_area, (size_t)NTX * TX_SIZE);
}

static bool iser_tx_busy(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	return ic->sends_out || ic->rdma_out || !list_empty(&ic->backlog) ||
	       !list_empty(&ic->rd_backlog);
}


/* ---------------------------------------------------------------- accept */

static const struct iscsi_role_ops no_role;

static void iser_reject(struct dm_incoming *in)
{
	struct iser_request *req = (struct iser_request *)in;

	rdma_reject(req->id, NULL, 0);
	rdma_destroy_id(req->id);
	rdma_destroy_event_channel(req->ch);
	free(req);
}

static int setup(struct iser_conn *ic, struct rdma_cm_id *id, uint32_t rd_depth)
{
	struct ibv_qp_init_attr qa = {0};
	struct ibv_context *verbs = id->verbs;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	if (ibv_query_device(verbs, &da) || ibv_query_port(verbs, id->port_num, &pa))
		return -EIO;
	/* one RDMA Read carries at most the port's message size (rxe: 8 MiB); the task buffer is
	   one registration and one SGE, so no other limit applies */
	ic->max_msg = pa.max_msg_sz ? pa.max_msg_sz : 1u << 20;
	ic->pd = ibv_alloc_pd(verbs);
	ic->cc = ic->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!ic->cc)
		return -EIO;
	ic->cq = ibv_create_cq(verbs, CQ_DEPTH, NULL, ic->cc, 0);
	if (!ic->cq || ibv_req_notify_cq(ic->cq, 0))
		return -EIO;
	qa.send_cq = ic->cq;
	qa.recv_cq = ic->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = NTX + MAX_RDMA;
	qa.cap.max_recv_wr = NRX;
	qa.cap.max_send_sge = DM_TX_MAX_DATA_IOV;
	qa.cap.max_recv_sge = 1;
	if ((uint32_t)da.max_qp_wr < qa.cap.max_send_wr)
		qa.cap.max_send_wr = (uint32_t)da.max_qp_wr;
	if (rdma_create_qp(id, ic->pd, &qa))
		return -errno ? -errno : -EIO;
	ic->qp = id->qp;
	/* the rings (several MiB) are mappings of their own, not heap memory: a closed
	   connection gives their pages back at once (freed from the heap, blocks this large stay
	   with the allocator, and a target that sees many short connections grows) */
	{
		void *rx = mmap(NULL, (size_t)NRX * RX_SIZE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		void *tx;

		if (rx == MAP_FAILED)
			return -ENOMEM;
		ic->rx_area = rx; /* unmapped by release() */
		tx = mmap(NULL, (size_t)NTX * TX_SIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (tx == MAP_FAILED)
			return -ENOMEM;
		ic->tx_area = tx;
	}
	ic->rx_mr = ibv_reg_mr(ic->pd, ic->rx_area, (size_t)NRX * RX_SIZE, IBV_ACCESS_LOCAL_WRITE);
	ic->tx_mr = ibv_reg_mr(ic->pd, ic->tx_area, (size_t)NTX * TX_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!ic->rx_mr || !ic->tx_mr)
		return -EIO;
	ic->tx_free = -1;
	for (int i = NTX - 1; i >= 0; i--)
		tx_give(ic, i);
	/* every receive buffer before the initiator may send (login and full feature phase) */
	for (int i = 0; i < NRX; i++)
		if (post_recv(ic, i) < 0)
			return -EIO;
	ic->ord = rd_depth;
	if (ic->ord > (uint32_t)da.max_qp_init_rd_atom)
		ic->ord = (uint32_t)da.max_qp_init_rd_atom;
	if (ic->ord == 0)
		ic->ord = 1;
	return 0;
}

static struct iscsi_conn *iser_accept(struct dm_incoming *in, const struct dm_conn_setup *cs)
{
	struct iser_request *req = (struct iser_request *)in;
	struct ev_loop *loop = cs->loop;
	struct iscsi_conn *c = iscsi_conn_new(cs->as ? cs->as : &iser_dm_ops, loop, cs->role,
					      cs->ops, cs->role_priv);
	struct rdma_conn_param cp = {0};
	uint8_t pd[4] = {ISER_CM_ZBVA_NOT_USED | ISER_CM_SEND_W_INV_NOT_USED, 0, 0, 0};
	struct iser_conn *ic;
	int r;

	if (!c) {
		iser_reject(&req->base);
		return NULL;
	}
	ic = iser_of(c);
	ic->c = c;
	ic->id = req->id;
	ic->ch = req->ch;
	list_init(&ic->backlog);
	ev_timer_init(&ic->cq_more, cq_more_cb, c);
	list_init(&ic->rd_backlog);
	snprintf(c->peer, sizeof(c->peer), "%s", req->base.peer);
	r = setup(ic, req->id, req->responder_resources);
	if (r < 0) {
		log_warn("iser", "%s: cannot set up the connection: %s", c->peer, strerror(-r));
		goto bad;
	}
	cp.initiator_depth = (uint8_t)ic->ord;
	cp.responder_resources = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	cp.private_data = pd;
	cp.private_data_len = sizeof(pd);
	ev_io_init(&ic->cm_io, ic->ch->fd, cm_cb, c);
	ev_io_init(&ic->cq_io, ic->cc->fd, cq_cb, c);
	if (ev_io_start(loop, &ic->cm_io, EPOLLIN) < 0 || ev_io_start(loop, &ic->cq_io, EPOLLIN) < 0)
		goto bad;
	if (rdma_accept(ic->id, &cp)) {
		log_warn("iser", "%s: rdma_accept: %s", c->peer, strerror(errno));
		goto bad;
	}
	free(req);
	return c;
bad:
	rdma_reject(req->id, NULL, 0);
	free(req);
	c->role_ops = &no_role; /* the role never saw this connection */
	ic->terminated = true; /* nothing posted is in flight that the role knows of */
	ev_io_stop(loop, &ic->cq_io);
	ev_io_stop(loop, &ic->cm_io);
	iscsi_conn_put(c);
	return NULL;
}

/* ---------------------------------------------------------------- listener */

/* "addr:port/iser" of the peer of id. */
static void format_peer(struct rdma_cm_id *id, char *out, size_t cap)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[64] = "?", serv[16] = "?";

	getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						  : sizeof(struct sockaddr_in),
		    host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, cap, "%s%s%s:%s/iser", sa->sa_family == AF_INET6 ? "[" : "", host,
		 sa->sa_family == AF_INET6 ? "]" : "", serv);
}

static void listen_cb(struct ev_io *w, uint32_t revents)
{
	struct iser_listener *l = w->arg;
	struct rdma_cm_event *ev;

	(void)revents;
	while (rdma_get_cm_event(l->ch, &ev) == 0) {
		struct iser_request *req;
		struct rdma_cm_id *id = ev->id;

		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		req = calloc(1, sizeof(*req));
		if (req) {
			const uint8_t *p = ev->param.conn.private_data;
			req->base.dm = &iser_dm_ops;
			format_peer(id, req->base.peer, sizeof(req->base.peer));
			req->id = id;
			req->peer_flags = ev->param.conn.private_data_len >= 1 && p ? p[0] : 0;
			req->responder_resources = ev->param.conn.responder_resources;
			req->initiator_depth = ev->param.conn.initiator_depth;
		}
		rdma_ack_cm_event(ev);
		if (!req) {
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			continue;
		}
		/* its own event channel, so the worker that takes it owns all its events */
		req->ch = rdma_create_event_channel();
		if (!req->ch || rdma_migrate_id(id, req->ch)) {
			if (req->ch)
				rdma_destroy_event_channel(req->ch);
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			free(req);
			continue;
		}
		{
			int fl = fcntl(req->ch->fd, F_GETFL);
			fcntl(req->ch->fd, F_SETFL, fl | O_NONBLOCK);
		}
		l->cb(&req->base, l->arg);
	}
}

static int iser_listen(struct ev_loop *loop, const char *addr, uint16_t port, dm_incoming_cb cb,
		       void *arg, struct dm_listener **out)
{
	struct iser_listener *l = calloc(1, sizeof(*l));
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE}, *ai = NULL;
	char serv[8];
	int r, fl;

	if (!l)
		return -ENOMEM;
	l->base.dm = &iser_dm_ops;
	l->loop = loop;
	l->cb = cb;
	l->arg = arg;
	snprintf(serv, sizeof(serv), "%u", port);
	if (getaddrinfo(addr, serv, &hints, &ai) != 0) {
		free(l);
		return -EINVAL;
	}
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		r = errno == ENODEV || errno == ENOENT ? -ENODEV : -errno;
		goto fail;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		r = -errno;
		goto fail;
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		r = -errno;
		goto fail;
	}
	if (rdma_listen(l->id, 64)) {
		r = -errno;
		goto fail;
	}
	fl = fcntl(l->ch->fd, F_GETFL);
	fcntl(l->ch->fd, F_SETFL, fl | O_NONBLOCK);
	ev_io_init(&l->io, l->ch->fd, listen_cb, l);
	r = ev_io_start(loop, &l->io, EPOLLIN);
	if (r < 0)
		goto fail;
	freeaddrinfo(ai);
	*out = &l->base;
	return 0;
fail:
	freeaddrinfo(ai);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
	return r ? r : -EIO;
}

static void iser_listener_free(struct dm_listener *dl)
{
	struct iser_listener *l = (struct iser_listener *)dl;

	ev_io_stop(l->loop, &l->io);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

/* ---------------------------------------------------------------- active open (initiator) */

static void up_failed(struct iscsi_conn *c, int err, const char *why)
{
	struct iser_conn *ic = iser_of(c);
	void (*cb)(struct iscsi_conn *, int) = ic->on_up;

	ic->connecting = false;
	ic->on_up = NULL;
	log_info("iser", "%s: connect failed: %s", c->peer, why);
	if (cb)
		cb(c, err);
}

static void active_event(struct iscsi_conn *c, enum rdma_cm_event_type type)
{
	struct iser_conn *ic = iser_of(c);
	struct rdma_conn_param cp = {0};
	uint8_t pd[4] = {ISER_CM_ZBVA_NOT_USED | ISER_CM_SEND_W_INV_NOT_USED, 0, 0, 0};
	int r;

	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ic->id, 2000))
			up_failed(c, -errno, "rdma_resolve_route");
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		struct ibv_device_attr da;

		if (ibv_query_device(ic->id->verbs, &da)) {
			up_failed(c, -EIO, "ibv_query_device");
			return;
		}
		r = setup(ic, ic->id, 0);
		if (r < 0) {
			up_failed(c, r, "cannot create the queue pair and buffers");
			return;
		}
		ev_io_init(&ic->cq_io, ic->cc->fd, cq_cb, c);
		if (ev_io_start(c->loop, &ic->cq_io, EPOLLIN) < 0) {
			up_failed(c, -EIO, "cannot watch the completion channel");
			return;
		}
		/* we serve the target's RDMA Reads of our write buffers */
		/* the target's RDMA Reads of our write buffers we serve at once (libiscsi uses 4;
		   16 is enough for the target's ORD and stays within every device's limits) */
		cp.responder_resources = da.max_qp_rd_atom > 16 ? 16 : (uint8_t)da.max_qp_rd_atom;
		cp.initiator_depth = 1;
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		cp.private_data = pd;
		cp.private_data_len = sizeof(pd);
		if (rdma_connect(ic->id, &cp))
			up_failed(c, -errno, "rdma_connect");
		return;
	}
	case RDMA_CM_EVENT_ESTABLISHED: {
		void (*cb)(struct iscsi_conn *, int) = ic->on_up;

		ic->connecting = false;
		ic->on_up = NULL;
		established(c);
		if (cb)
			cb(c, 0);
		return;
	}
	case RDMA_CM_EVENT_REJECTED:
		up_failed(c, -ECONNREFUSED, "rejected by the target");
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		up_failed(c, -EHOSTUNREACH, rdma_event_str(type));
		return;
	default:
		return;
	}
}

static struct iscsi_conn *iser_connect(const char *host, uint16_t port,
				       const struct dm_conn_setup *cs, int *err)
{
	struct ev_loop *loop = cs->loop;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	struct iscsi_conn *c;
	struct iser_conn *ic;
	char serv[8];
	int fl, r;

	snprintf(serv, sizeof(serv), "%u", port);
	if (getaddrinfo(host, serv, &hints, &ai) != 0) {
		*err = -EHOSTUNREACH;
		return NULL;
	}
	c = iscsi_conn_new(cs->as ? cs->as : &iser_dm_ops, loop, cs->role, cs->ops, cs->role_priv);
	if (!c) {
		freeaddrinfo(ai);
		*err = -ENOMEM;
		return NULL;
	}
	ic = iser_of(c);
	ic->c = c;
	ic->connecting = true;
	ic->on_up = cs->up;
	list_init(&ic->backlog);
	ev_timer_init(&ic->cq_more, cq_more_cb, c);
	list_init(&ic->rd_backlog);
	snprintf(c->peer, sizeof(c->peer), "%s:%u/iser", host, port);
	ic->ch = rdma_create_event_channel();
	if (!ic->ch) {
		r = -ENODEV;
		goto fail;
	}
	fl = fcntl(ic->ch->fd, F_GETFL);
	fcntl(ic->ch->fd, F_SETFL, fl | O_NONBLOCK);
	if (rdma_create_id(ic->ch, &ic->id, c, RDMA_PS_TCP)) {
		r = -errno;
		goto fail;
	}
	ev_io_init(&ic->cm_io, ic->ch->fd, cm_cb, c);
	if (ev_io_start(loop, &ic->cm_io, EPOLLIN) < 0) {
		r = -EIO;
		goto fail;
	}
	if (rdma_resolve_addr(ic->id, NULL, ai->ai_addr, 2000)) {
		r = errno == ENODEV ? -ENODEV : -EHOSTUNREACH;
		goto fail;
	}
	freeaddrinfo(ai);
	*err = 0;
	return c;
fail:
	freeaddrinfo(ai);
	ic->terminated = true;
	ev_io_stop(loop, &ic->cm_io);
	c->role_ops = &no_role;
	iscsi_conn_put(c);
	*err = r;
	return NULL;
}

const struct dm_ops iser_dm_ops = {
	.name = "iser",
	.caps = DM_CAP_DIRECT_PLACEMENT | DM_CAP_PEER_CLOSES,
	.conn_priv_size = sizeof(struct iser_conn),
	.max_recv_data = ISER_RECV_DATA,
	.recv_credits = NRX,
	.send_control = iser_queue,
	.put_data = iser_queue,
	.get_data = iser_queue,
	.enable = iser_enable,
	.terminate = iser_terminate,
	.release = iser_release,
	.tx_busy = iser_tx_busy,
	.buf_free = iser_buf_free,
	.mem_register = iser_mem_register,
	.listen = iser_listen,
	.listener_free = iser_listener_free,
	.accept = iser_accept,
	.reject = iser_reject,
	.connect = iser_connect,
};
