/* iSER: the data path (iser_int.h). Facts followed: RFC 7145 sections 5-9, protocol.md 5-6. */
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

#include "transport/iser/iser_int.h"
#include "util/bytes.h"
#include "util/log.h"

/* ---------------------------------------------------------------- receive */

int iser_post_recv(struct iser_conn *ic, int idx)
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

void iser_handle_recv(struct iscsi_conn *c, int idx, uint32_t len)
{
	struct iser_conn *ic = iser_of(c);
	uint8_t *b = ic->rx_area + (size_t)idx * RX_SIZE;
	uint8_t *bhs = b + ISER_HDR_LEN, *ahs, *data;
	struct dm_rx_place place = {0};
	uint32_t ahs_len, dlen;
	int r;

	if (len < ISER_HDR_LEN + ISCSI_BHS_LEN) {
		iser_fail(c, -EPROTO, "iSER message shorter than the iSER header and a BHS");
		return;
	}
	if ((b[0] & 0xf0) == ISER_HELLO) {
		iser_fail(c, -EPROTO, "iSER Hello received: not supported (iSERHelloRequired=No)");
		return;
	}
	if ((b[0] & 0xf0) != ISER_CTRL) {
		iser_fail(c, -EPROTO, "unknown iSER opcode");
		return;
	}
	ahs_len = (uint32_t)bhs[4] * 4;
	dlen = get_be24(bhs + 5);
	if (ahs_len > RX_AHS_ROOM ||
	    (uint64_t)ISER_HDR_LEN + ISCSI_BHS_LEN + ahs_len + dlen > len) {
		iser_fail(c, -EPROTO, "iSCSI PDU longer than its iSER message");
		return;
	}
	ahs = ahs_len ? bhs + ISCSI_BHS_LEN : NULL;
	data = bhs + ISCSI_BHS_LEN + ahs_len;
	if ((bhs[0] & 0x3f) == ISCSI_OP_SCSI_RSP && c->role == ISCSI_ROLE_INITIATOR) {
		/* the target has placed or fetched all data: drop the command's registration
		   (the buffer is the caller's again) */
		struct itt_ent *e = iser_itt_find(ic, get_be32(bhs + 16), false);

		if (e) {
			if (e->mr)
				ibv_dereg_mr(e->mr);
			iser_itt_del(ic, e->itt);
		}
	}
	if ((bhs[0] & 0x3f) == ISCSI_OP_SCSI_CMD && c->role == ISCSI_ROLE_TARGET) {
		struct itt_ent *e = iser_itt_find(ic, get_be32(bhs + 16), true);

		if (!e) {
			iser_fail(c, -ENOSPC, "more commands in flight than the ITT table holds");
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
			   checks the rest: an STag's bounds iser_fail the RDMA operation, and that
			   completion error fails the connection) */
			uint64_t edtl = get_be32(bhs + 20);

			if ((e->wstag && e->wva > UINT64_MAX - edtl) ||
			    (e->rstag && e->rva > UINT64_MAX - edtl)) {
				iser_fail(c, -EPROTO, "iSER header names a buffer past the address space");
				return;
			}
		}
	}
	r = dm_rx_header(c, bhs, ahs, ahs_len, &place);
	if (r < 0) {
		iser_fail(c, r, "PDU refused in the header phase");
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

void iser_tx_give(struct iser_conn *ic, int i)
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
	e = iser_itt_find(ic, itt, true);
	if (!e)
		return -ENOSPC;
	if (e->mr) {
		ibv_dereg_mr(e->mr);
		e->mr = NULL;
	}
	pe = iser_pool_find(ic, p->buf_base, p->buf_size);
	if (pe) {
		rkey = pe->mr->rkey;
	} else {
		e->mr = ibv_reg_mr(ic->pd, p->buf_base, p->buf_size,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ);
		if (!e->mr) {
			iser_itt_del(ic, itt);
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

/* IX_ISER_TEST_LOGOUT_HOLD_MS (tests only, read at each Logout Request: no state kept): the
 * initiator leaves its CQ unpolled for that long after posting a Logout Request, so that the
 * target's disconnect is read from the CM channel while the Logout Response still sits in the
 * CQ (the race of cm_cb's iser_cq_take_rest, made certain). 0 (unset): no hold. */
static uint32_t test_logout_hold_ms(void)
{
	const char *e = getenv("IX_ISER_TEST_LOGOUT_HOLD_MS");
	unsigned long v = e ? strtoul(e, NULL, 10) : 0;

	return v > 60000 ? 60000 : (uint32_t)v;
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
			iser_tx_give(ic, i);
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
		iser_tx_give(ic, i);
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
		iser_itt_del(ic, get_be32(p->bhs + 16)); /* the task is over for the transport */
	return 1;
}

static int post_write(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	uint32_t itt = get_be32(p->bhs + 16), off = get_be32(p->bhs + 40);
	struct itt_ent *e = iser_itt_find(ic, itt, false);
	struct ibv_sge sge[DM_TX_MAX_DATA_IOV];
	struct ibv_send_wr wr = {0}, *bad;
	struct mr_ent *m;

	if (!e || !e->rstag)
		return -EPROTO;
	if (ic->rdma_out >= MAX_RDMA)
		return 0;
	m = iser_mr_get(ic, p->buf_base, p->buf_size);
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
 * -errno broken. Completion: iser_read_piece_done(). */
static int post_read(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	uint32_t itt = get_be32(p->bhs + 16), off = get_be32(p->bhs + 40);
	uint32_t ddtl = get_be32(p->bhs + 44);
	struct itt_ent *e = iser_itt_find(ic, itt, false);
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
	m = iser_mr_get(ic, p->buf_base, p->buf_size);
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

/* Bytes a PDU puts on the wire as this side sends it: a Send carries the iSER header, the
 * BHS, the AHS and the data; Put_Data is an RDMA Write of the data; Get_Data (an RDMA Read)
 * sends nothing of ours. */
static uint64_t wire_len(const struct dm_txpdu *p)
{
	switch (p->bhs[0] & 0x3f) {
	case ISCSI_OP_DATA_IN:
		return p->data_len;
	case ISCSI_OP_R2T:
		return 0;
	default:
		return ISER_HDR_LEN + ISCSI_BHS_LEN + p->ahs_len + p->data_len;
	}
}

void iser_tx_abort_at(struct iscsi_conn *c, uint64_t total)
{
	iser_of(c)->tx_abort_at = total;
}

/* Post p: 1 posted, 0 out of credits (backlog it), -errno. The fault-injection hook
 * (tx_abort_at) aborts the connection before the PDU that would carry byte tx_abort_at + 1:
 * messages are atomic in RDMA, so there is no part-way cut as over TCP. */
static int post_any(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct iser_conn *ic = iser_of(c);
	uint64_t n = wire_len(p);
	int r;

	if (ic->fail_err)
		return 0; /* failing: everything waits on the backlogs for terminate */
	if (ic->tx_abort_at && n && ic->tx_total + n > ic->tx_abort_at) {
		log_info("iser", "%s: fault injection: aborting the connection after %llu bytes",
			 c->peer, (unsigned long long)ic->tx_total);
		return -ECONNABORTED;
	}
	switch (p->bhs[0] & 0x3f) {
	case ISCSI_OP_DATA_IN:
		r = post_write(c, p);
		break;
	case ISCSI_OP_R2T:
		r = post_read(c, p);
		break;
	default:
		r = post_control(c, p);
		break;
	}
	if (r == 1)
		ic->tx_total += n;
	return r;
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
			iser_fail(c, r, r == -ECONNABORTED ? "aborted (fault injection)"
						      : "cannot post a queued work request");
			return r;
		}
	}
	return 0;
}

void iser_drain_backlog(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	if (drain_one(c, &ic->backlog) == 0)
		drain_one(c, &ic->rd_backlog);
}

static void fail_deferred(void *arg)
{
	struct iscsi_conn *c = arg;
	struct iser_conn *ic = iser_of(c);

	iser_fail(c, ic->fail_err, ic->fail_why);
	iscsi_conn_put(c);
}

/* A post failed inside the role's send call: p waits on its backlog (terminate completes it
 * with -ECONNABORTED) and the connection fails from the loop, as a role expects of a transport
 * (its closed() must not run inside its own send). */
static void fail_later(struct iscsi_conn *c, struct dm_txpdu *p, int err, const char *why)
{
	struct iser_conn *ic = iser_of(c);

	list_add_tail(&p->link, backlog_of(ic, p));
	if (ic->fail_err)
		return;
	ic->fail_err = err;
	ic->fail_why = why;
	iscsi_conn_get(c);
	ev_defer(c->loop, &ic->fail_defer, fail_deferred, c);
}

int iser_queue(struct iscsi_conn *c, struct dm_txpdu *p)
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
	if (r < 0)
		fail_later(c, p, r,
			   r == -EPROTO		? "data transfer for a task without an STag"
			   : r == -ECONNABORTED ? "aborted (fault injection)"
						: "cannot post a work request");
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
			iser_fail(c, -EPROTO, "RDMA Read data refused by the role");
			return;
		}
		if (place.buf && place.buf != src + done) {
			/* the data is where the R2T said; a role that wants it elsewhere (or
			   discarded: NULL) is told nothing else */
			iser_fail(c, -EPROTO, "the role placed RDMA Read data elsewhere");
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
void iser_read_piece_done(struct iscsi_conn *c, struct dm_txpdu *p, bool ok)
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
		iser_handle_recv(c, (int)v, wc->byte_len);
		if (!c->terminated && !ic->terminated && iser_post_recv(ic, (int)v) < 0)
			iser_fail(c, -EIO, "cannot repost a receive buffer");
		return;
	case WR_SEND: {
		struct dm_txpdu *p = ic->tx[v].p;
		ic->sends_out--;
		iser_tx_give(ic, (int)v);
		if (p)
			p->sent(p, ok ? 0 : -EIO);
		break;
	}
	case WR_READ:
		iser_read_piece_done(c, (struct dm_txpdu *)v, ok);
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
			iser_fail(c, -EIO, why);
		}
		return;
	}
	iser_drain_backlog(c);
}

/* Handle at most CQ_BUDGET completions, then give the loop back: a connection whose peer keeps
 * its queue full (hundreds of receive buffers and RDMA operations in flight) would otherwise be
 * served for seconds on a slow host while every other connection of the worker waits. What is
 * left in the CQ is taken up by the cq_more timer (0 ms: after the loop's other ready events). */
int iser_cq_poll(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);
	struct ibv_wc wc[32];
	int n, done = 0;

	if (ic->hold_until) {
		uint64_t now = ev_now_ms(c->loop);

		if (now < ic->hold_until) {
			ev_timer_start(c->loop, &ic->cq_more, ic->hold_until - now);
			return 0;
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
	return done;
}

/* The poll window asks the CQ directly (ibv_poll_cq reads the queue in user memory, no system
 * call): a completion is handled as soon as it is written, without waiting for the completion
 * channel's event, its read, ack and re-arm. The channel stays armed and still wakes a loop
 * that sleeps. Nothing while a test hold or the budget timer is pending: they decide when the
 * CQ is read next. */
int iser_cq_poller(struct ev_poller *p)
{
	struct iscsi_conn *c = p->arg;
	struct iser_conn *ic = iser_of(c);

	if (ic->dead || ic->terminated || ic->hold_until || ev_timer_pending(&ic->cq_more))
		return 0;
	return iser_cq_poll(c);
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
int iser_cq_take_rest(struct iscsi_conn *c)
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

void iser_cq_more_cb(struct ev_timer *t)
{
	iser_cq_poll(t->arg);
}

void iser_cq_cb(struct ev_io *w, uint32_t revents)
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
	iser_cq_poll(c);
}
