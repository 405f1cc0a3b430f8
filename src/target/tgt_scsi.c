/* Target data path: SCSI Command PDUs, immediate / unsolicited / solicited (R2T) write data,
 * execution in the SCSI core, Data-In with phase collapse, SCSI Response with residuals
 * (task table and task management: tgt_task.c). RFC 7143 sections 4.2, 11.3-11.8; protocol.md
 * 4.5-4.9. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "target/tgt_int.h"
#include "util/bytes.h"
#include "util/log.h"

enum rx_verdict {
	RX_OK = 0,
	RX_DROP,     /* silently ignore (CmdSN outside the window, data of an aborted task) */
	RX_REJECT,   /* answer with Reject(rx_reject_reason) */
};

static void write_fail(struct tgt_task *t, uint8_t key, uint8_t asc, uint8_t ascq);

/* ---------------------------------------------------------------- buffers */

static int buf_class(uint32_t size)
{
	int c = 0;

	while ((4096u << c) < size)
		c++;
	return c;
}

/* Free a buffer of the live connection (the transport may have it registered). */
void tgt_buf_release(struct tgt_conn *tc, uint8_t *b, uint32_t cap)
{
	if (!b)
		return;
	if (tc->conn->dm->buf_free)
		tc->conn->dm->buf_free(tc->conn, b);
	free(b);
	tc->buf_bytes -= cap;
}

/* Give back every buffer nothing uses (the cache and idle task slots' small buffers). */
void tgt_buf_trim(struct tgt_conn *tc)
{
	struct list_head *pos;

	for (int c = 0; c < 16; c++)
		for (int i = 0; i < TGT_BUF_CACHE; i++) {
			tgt_buf_release(tc, tc->buf_cache[c][i], 4096u << c);
			tc->buf_cache[c][i] = NULL;
		}
	for (pos = tc->free_tasks.next; pos != &tc->free_tasks; pos = pos->next) {
		struct tgt_task *t = list_entry(pos, struct tgt_task, link);

		tgt_buf_release(tc, t->buf, t->buf_cap);
		t->buf = NULL;
		t->buf_cap = 0;
	}
}

/* A buffer of at least size bytes; NULL with *over set when the connection's budget
 * (global.max_connection_memory) would be exceeded even after trimming. */
static uint8_t *buf_get(struct tgt_conn *tc, uint32_t size, uint32_t *cap, bool *over)
{
	uint64_t limit = tc->gen->cfg->global.max_connection_memory;
	int c = buf_class(size);
	uint8_t *b;

	*over = false;
	for (int i = 0; i < TGT_BUF_CACHE; i++)
		if (tc->buf_cache[c][i]) {
			b = tc->buf_cache[c][i];
			tc->buf_cache[c][i] = NULL;
			*cap = 4096u << c;
			return b;
		}
	*cap = 4096u << c;
	if (limit && tc->buf_bytes + *cap > limit) {
		tgt_buf_trim(tc);
		if (tc->buf_bytes + *cap > limit) {
			*over = true;
			return NULL;
		}
	}
	b = malloc(*cap);
	if (b) {
		tc->buf_bytes += *cap;
		if (!tc->trim_due)
			tgt_trim_arm(tc); /* given back when the connection is quiet */
	}
	return b;
}

void tgt_buf_put(struct tgt_conn *tc, uint8_t *b, uint32_t cap)
{
	int c = buf_class(cap);

	if (!b)
		return;
	for (int i = 0; i < TGT_BUF_CACHE && (i < 4 || (uint64_t)(i + 1) * cap <= TGT_BUF_CACHE_BYTES);
	     i++)
		if (!tc->buf_cache[c][i]) {
			tc->buf_cache[c][i] = b;
			return;
		}
	tgt_buf_release(tc, b, cap);
}

/* ---------------------------------------------------------------- responses */

static void task_pdu_sent(struct dm_txpdu *p, int err)
{
	struct tgt_task *t = p->arg;
	struct tgt_conn *tc = t->tc;

	(void)err;
	list_del(&p->owner_link);
	if (list_empty(&t->zc_pdus))
		list_del(&t->zc_link);
	iscsi_txpdu_put(tc->conn, p);
	if (--t->tx_pending == 0 && t->state == TASK_DONE)
		tgt_task_release(t);
}

/* A zero-copy Data-In PDU leaves the LU: its bytes are copied to the same offset in the task's
 * buffer and it is sent from there. pinned: the transport holds its pin (the copy is then of
 * the bytes it summed), given back after the copy. */
static void zc_detach_pdu(struct dm_txpdu *p, bool pinned)
{
	struct tgt_task *t = p->arg;
	const uint8_t *from = p->data[0].iov_base;
	uint8_t *to = t->buf + (from - t->sc.data_in);

	memcpy(to, from, p->data[0].iov_len);
	if (pinned)
		scsi_data_in_unpin(&t->sc, from, (uint32_t)p->data[0].iov_len);
	p->data[0].iov_base = to;
	p->guard = NULL;
	list_del(&p->owner_link);
	if (list_empty(&t->zc_pdus))
		list_del(&t->zc_link);
}

/* A command that may change the medium is about to run: Data-In still queued that points into
 * a RAM LU gets its own copy first (in the task's buffer), so the initiator reads what the LU
 * held when the READ ran, as it would from a copying target. Rare: it takes a command that
 * writes arriving in the same loop iteration as, or while the socket is backed up behind, a
 * zero-copy READ on this connection. Only the PDUs still pointing into the LU are copied: one
 * detached earlier may be half sent, its digest over the bytes already in the task buffer. */
static void zc_detach(struct tgt_conn *tc)
{
	while (!list_empty(&tc->zc_tasks)) {
		struct tgt_task *t = list_first_entry(&tc->zc_tasks, struct tgt_task, zc_link);

		while (!list_empty(&t->zc_pdus))
			zc_detach_pdu(list_first_entry(&t->zc_pdus, struct dm_txpdu, owner_link),
				      false);
		list_del(&t->zc_link); /* already off the list unless it had no PDU left */
	}
}

/* The guard of a zero-copy Data-In (dm.h): with a data digest, the transport sums the LU's
 * bytes and hands them to the kernel while writes to them are held off (scsi_data_in_pin);
 * when that cannot be had, or a PDU goes out only in part, it is sent from a copy. */
static int zc_pin(struct dm_txpdu *p)
{
	const struct tgt_task *t = p->arg;

	return scsi_data_in_pin(&t->sc, p->data[0].iov_base, (uint32_t)p->data[0].iov_len);
}

static void zc_unpin(struct dm_txpdu *p)
{
	const struct tgt_task *t = p->arg;

	scsi_data_in_unpin(&t->sc, p->data[0].iov_base, (uint32_t)p->data[0].iov_len);
}

static const struct dm_tx_guard zc_guard = {
    .pin = zc_pin,
    .unpin = zc_unpin,
    .detach = zc_detach_pdu,
};

static struct dm_txpdu *task_pdu(struct tgt_task *t)
{
	struct dm_txpdu *p = iscsi_txpdu_get(t->tc->conn);

	if (!p)
		return NULL;
	p->sent = task_pdu_sent;
	p->arg = t;
	t->tx_pending++;
	return p;
}

static void residuals(const struct tgt_task *t, uint8_t *flags, uint32_t *residual)
{
	const struct scsi_cmd *sc = &t->sc;

	*flags = 0;
	*residual = 0;
	if (t->read) {
		if (sc->xfer_wanted > t->edtl) {
			*flags = ISCSI_FLAG_OVERFLOW;
			*residual = sc->xfer_wanted - t->edtl;
		} else if (sc->data_in_len < t->edtl) {
			*flags = ISCSI_FLAG_UNDERFLOW;
			*residual = t->edtl - sc->data_in_len;
		}
	} else if (t->write) {
		if (sc->xfer_wanted > t->edtl) {
			*flags = ISCSI_FLAG_OVERFLOW;
			*residual = sc->xfer_wanted - t->edtl;
		} else if (sc->xfer_wanted < t->edtl) {
			*flags = ISCSI_FLAG_UNDERFLOW;
			*residual = t->edtl - sc->xfer_wanted;
		}
	} else if (t->edtl) {
		*flags = ISCSI_FLAG_UNDERFLOW;
		*residual = t->edtl;
	}
}

static void send_scsi_response(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;
	struct iscsi_hdr h = {.opcode = ISCSI_OP_SCSI_RSP, .final = true, .itt = t->itt};
	struct dm_txpdu *p = task_pdu(t);

	if (!p) {
		iscsi_conn_close(tc->conn, "out of memory for a SCSI Response");
		return;
	}
	residuals(t, &h.rsp.flags, &h.rsp.residual);
	h.rsp.response = 0;
	h.rsp.status = t->sc.status;
	h.rsp.expdatasn = t->datasn;
	tgt_task_uncount(t);
	tgt_stamp(tc, &h, true);
	if (t->sc.sense_len) {
		put_be16(t->rsp_data, t->sc.sense_len);
		memcpy(t->rsp_data + 2, t->sc.sense, t->sc.sense_len);
		p->data[0].iov_base = t->rsp_data;
		p->data[0].iov_len = 2u + t->sc.sense_len;
		p->data_cnt = 1;
		p->data_len = 2u + t->sc.sense_len;
	}
	h.dlength = p->data_len;
	iscsi_send_pdu(tc->conn, p, &h);
}

/* Put_Data: Data-In PDUs, each at most the initiator's MaxRecvDataSegmentLength, F at every
 * MaxBurstLength boundary; status collapsed into the last one when there is no sense. With a
 * direct-placement datamover a Data-In is an RDMA Write, not a PDU the initiator receives:
 * InitiatorRecvDataSegmentLength (a limit of Sends) does not apply, so each is as large as
 * the burst allows, at most DM_PLACE_MAX. */
static void send_data_in(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;
	uint32_t len = t->sc.data_in_len, off = 0, burst = 0;
	uint32_t mxdsl = tc->conn->params.max_xmit_dsl;
	uint32_t mbl = tc->sess->params.max_burst_length;
	bool placed = tc->conn->dm->caps & DM_CAP_DIRECT_PLACEMENT;
	/* iSER never collapses status into data: the read data is an RDMA Write, the status a
	   SCSI Response Send (RFC 7145 7.3.5) */
	bool collapse = t->sc.status == SCSI_STATUS_GOOD && t->sc.sense_len == 0 && !placed;
	/* zero copy (TCP only, see task_exec): the data is in the LU, not in t->buf */
	const uint8_t *data = t->sc.data_in;
	bool zc = data != t->buf;

	while (off < len) {
		uint32_t n = len - off;
		struct iscsi_hdr h = {.opcode = ISCSI_OP_DATA_IN, .itt = t->itt};
		struct dm_txpdu *p;
		bool last;

		if (n > (placed ? DM_PLACE_MAX : mxdsl))
			n = placed ? DM_PLACE_MAX : mxdsl;
		if (n > mbl - burst)
			n = mbl - burst;
		last = off + n == len;
		burst += n;
		h.final = last || burst == mbl;
		if (burst == mbl)
			burst = 0;
		h.data_in.ttt = ISCSI_RSVD_TAG;
		h.data_in.datasn = t->datasn++;
		h.data_in.offset = off;
		p = task_pdu(t);
		if (!p) {
			iscsi_conn_close(tc->conn, "out of memory for Data-In");
			return;
		}
		p->data[0].iov_base = (void *)(uintptr_t)(data + off);
		p->data[0].iov_len = n;
		if (zc) { /* before the put: a dead connection completes p at once */
			p->guard = &zc_guard;
			list_add_tail(&p->owner_link, &t->zc_pdus);
			if (list_empty(&t->zc_link))
				list_add_tail(&t->zc_link, &tc->zc_tasks);
		}
		p->data_cnt = 1;
		p->data_len = n;
		p->buf_base = t->buf;
		p->buf_size = t->buf_cap;
		h.dlength = n;
		if (last && collapse) {
			h.final = true;
			h.data_in.status_present = true;
			h.data_in.status = t->sc.status;
			residuals(t, &h.data_in.flags, &h.data_in.residual);
			tgt_task_uncount(t);
			tgt_stamp(tc, &h, true);
		} else {
			tgt_stamp(tc, &h, false);
		}
		iscsi_put_data(tc->conn, p, &h);
		off += n;
	}
	if (len == 0 || !collapse)
		send_scsi_response(t);
}

/* TASK ABORTED status for a task another I_T nexus aborted (the control mode page's TAS is
 * 1): no data, no sense. */
void tgt_respond_aborted(struct tgt_task *t)
{
	memset(&t->sc, 0, sizeof(t->sc));
	t->sc.status = SCSI_STATUS_TASK_ABORTED;
	t->state = TASK_DONE;
	send_scsi_response(t);
}

static void scsi_done(struct scsi_cmd *sc)
{
	struct tgt_task *t = sc->priv;
	struct tgt_conn *tc = t->tc;
	struct iscsi_conn *c = tc->conn;

	if (t->aborted || c->terminated) {
		tgt_stat_count(tc, TGT_ST_TASK_ABORTED, 1);
		if (t->tas && !c->terminated) /* another nexus aborted it: TAS */
			tgt_respond_aborted(t);
		tgt_task_finished(t);
		tgt_task_free(t);
		iscsi_conn_put(c);
		return;
	}
	t->state = TASK_DONE;
	tgt_stats_cmd_done(t);
	if (t->read && sc->data_in_len)
		send_data_in(t);
	else
		send_scsi_response(t);
	tgt_task_finished(t);
	tgt_task_free(t);
	iscsi_conn_put(c);
}

static void task_exec(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;
	struct scsi_cmd *sc = &t->sc;

	/* QoS (tgt_qos.c): without limits on the target, this one test */
	if (__builtin_expect(atomic_load_explicit(&tc->sess->node->qos_on, memory_order_relaxed),
			     0) &&
	    tgt_qos_hold(t))
		return;
	memset(sc, 0, sizeof(*sc));
	sc->thread = tc->worker->sthread;
	sc->map = tc->sess->node->map;
	sc->nexus = tc->sess->nexus;
	sc->lun_field = t->lun;
	sc->cdb = t->cdb;
	sc->cdb_len = t->cdb_len;
	sc->buf = t->buf;
	sc->buf_len = t->buf ? t->edtl : 0;
	sc->data_out_len = t->write ? t->edtl : 0;
	sc->data_in_max = t->read ? t->edtl : 0;
	sc->done = scsi_done;
	sc->priv = t;
	/* READs on RAM LUs are answered from the LU's memory (TCP), also with a data digest when
	   the transport honours zc_guard: it sums the bytes while writes to them are held off */
	sc->data_in_map_ok = !(tc->conn->dm->caps & DM_CAP_DIRECT_PLACEMENT) &&
			     (!tc->conn->params.data_digest ||
			      (tc->conn->dm->caps & DM_CAP_TX_GUARD));
	if (!list_empty(&tc->zc_tasks) && !scsi_cdb_is_read(t->cdb, t->cdb_len))
		zc_detach(tc);
	t->state = TASK_EXEC;
	log_dbg("target", "%s: exec ITT 0x%08x opcode 0x%02x EDTL %u", tc->conn->peer, t->itt,
		t->cdb[0], t->edtl);
	iscsi_conn_get(tc->conn);
	scsi_cmd_exec(sc);
}

void tgt_task_exec(struct tgt_task *t)
{
	task_exec(t);
}

/* Answer a command with CHECK CONDITION without executing it. */
/* CHECK CONDITION with this sense; key 0 (NO SENSE) means TASK SET FULL instead. */
static void task_fail(struct tgt_task *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
	memset(&t->sc, 0, sizeof(t->sc));
	if (key)
		scsi_cmd_set_sense(&t->sc, key, asc, ascq);
	else
		t->sc.status = SCSI_STATUS_TASK_SET_FULL;
	t->state = TASK_DONE;
	tgt_stats_cmd_done(t);
	send_scsi_response(t);
	tgt_task_finished(t);
	tgt_task_free(t);
}

/* ---------------------------------------------------------------- write data */

/* Solicit the rest of a write. Over TCP: R2Ts of at most MaxBurstLength, at most
 * MaxOutstandingR2T at a time. With a direct-placement datamover (iSER) the R2T never goes on
 * the wire: it is the Get_Data request for the whole remainder, which the transport fetches
 * straight into the task's buffer with RDMA Reads and reports back once (RFC 7145 leaves the
 * RDMA Read pattern to the target; LIO's isert also reads the whole remainder at once). */
static void issue_r2ts(struct tgt_task *t)
{
	struct tgt_conn *tc = t->tc;
	const struct iscsi_sess_params *sp = &tc->sess->params;
	int max = sp->max_outstanding_r2t < TGT_MAX_R2T ? sp->max_outstanding_r2t : TGT_MAX_R2T;
	bool placed = tc->conn->dm->caps & DM_CAP_DIRECT_PLACEMENT;

	while (t->r2t_active < max && t->r2t_next < t->edtl) {
		struct tgt_r2t *r = NULL;
		struct iscsi_hdr h = {.opcode = ISCSI_OP_R2T, .final = true, .itt = t->itt};
		struct dm_txpdu *p;

		for (int i = 0; i < TGT_MAX_R2T; i++)
			if (!t->r2t[i].active) {
				r = &t->r2t[i];
				break;
			}
		if (!r)
			return;
		r->active = true;
		r->offset = t->r2t_next;
		r->len = t->edtl - t->r2t_next;
		if (r->len > sp->max_burst_length && !placed)
			r->len = sp->max_burst_length;
		r->got = 0;
		r->exp_datasn = 0;
		do {
			r->ttt = ++tc->next_ttt;
		} while (r->ttt == ISCSI_RSVD_TAG);
		t->r2t_next += r->len;
		t->r2t_active++;
		h.r2t.lun = t->lun;
		h.r2t.ttt = r->ttt;
		h.r2t.r2tsn = t->r2tsn++;
		h.r2t.offset = r->offset;
		h.r2t.ddtl = r->len;
		tgt_stamp(tc, &h, false);
		p = task_pdu(t);
		if (!p) {
			iscsi_conn_close(tc->conn, "out of memory for R2T");
			return;
		}
		/* where an RDMA datamover places the data (TCP: Data-Out PDUs do) */
		p->dest.iov_base = t->buf + r->offset;
		p->dest.iov_len = r->len;
		p->buf_base = t->buf;
		p->buf_size = t->buf_cap;
		iscsi_get_data(tc->conn, p, &h);
	}
}

/* Decide the next step of a write once some data arrived. */
static void write_progress(struct tgt_task *t)
{
	if (t->discard) {
		if (t->unsol_done)
			task_fail(t, t->fail_key, t->fail_asc, t->fail_ascq);
		return;
	}
	if (t->data_got == t->edtl) {
		task_exec(t);
		return;
	}
	if (t->unsol_done)
		issue_r2ts(t);
}

/* The command may proceed (CmdSN order reached). */
static void task_start(struct tgt_task *t)
{
	if (!t->write && t->discard) {
		task_fail(t, t->fail_key, t->fail_asc, t->fail_ascq);
		return;
	}
	if (!t->write) {
		task_exec(t);
		return;
	}
	t->state = TASK_DATA_OUT;
	if (t->unsol_got >= t->unsol_total)
		t->unsol_done = true;
	if (t->r2t_next < t->unsol_total)
		t->r2t_next = t->unsol_total;
	write_progress(t);
}

/* ExpCmdSN reached a CmdSN already used up (tgt_cmdsn_consume): step over it. */
static bool skip_used(struct tgt_session *s)
{
	for (uint32_t i = 0; i < s->nused_ahead; i++) {
		if (s->used_ahead[i] != s->exp_cmdsn)
			continue;
		s->used_ahead[i] = s->used_ahead[--s->nused_ahead];
		s->exp_cmdsn++;
		return true;
	}
	return false;
}

void tgt_cmdsn_consume(struct tgt_conn *tc, uint32_t sn)
{
	struct tgt_session *s = tc->sess;

	if (sn == s->exp_cmdsn) {
		s->exp_cmdsn++;
		tgt_order_release(tc);
		return;
	}
	if (s->nused_ahead == TGT_USED_AHEAD_MAX) {
		/* (more than this many out-of-order requests behind one hole: the initiator is
		   not waiting for the hole; it is filled by what it sends next or the session
		   stalls, as it would have) */
		log_warn("target", "%s: CmdSN %u used up ahead of ExpCmdSN %u: too many to track",
			 tc->conn->peer, sn, s->exp_cmdsn);
		return;
	}
	s->used_ahead[s->nused_ahead++] = sn;
}

void tgt_order_release(struct tgt_conn *tc)
{
	struct tgt_session *s = tc->sess;
	bool again = true;

	while (again) {
		struct list_head *pos, *n;
		again = skip_used(s);
		list_for_each_safe(pos, n, &tc->order_q)
		{
			struct tgt_task *t = list_entry(pos, struct tgt_task, link);
			if (t->cmdsn != s->exp_cmdsn)
				continue;
			list_del(&t->link);
			list_add_tail(&t->link, &tc->active);
			s->exp_cmdsn++;
			s->outstanding++;
			t->counted = true;
			task_start(t);
			again = true;
			break;
		}
	}
}

/* ---------------------------------------------------------------- SCSI Command */

/* The header-phase checks of a SCSI Command before a task exists: 0 to go on, or the verdict
 * (RX_DROP, RX_REJECT with tc->rx_reject_reason) is set. */
static int cmd_header_check(struct tgt_conn *tc, const struct iscsi_hdr *h,
			    const struct iscsi_ahs_info *ai, int ahs_rc)
{
	const struct iscsi_scsi_cmd *cmd = &h->cmd;
	const struct iscsi_sess_params *sp = &tc->sess->params;
	uint8_t reason;

	if (tc->sess->type == ISCSI_SESSION_DISCOVERY)
		reason = ISCSI_REJECT_PROTOCOL_ERROR;
	else if (tc->rx_cmdsn == TGT_CMDSN_DROP) { /* judged in rx_header (tgt_conn.c) */
		tc->rx_verdict = RX_DROP;
		return -1;
	} else if (ahs_rc < 0 || (ai->ext_cdb && 16u + ai->ext_cdb_len > ISCSI_MAX_CDB_LEN))
		reason = ISCSI_REJECT_PROTOCOL_ERROR;
	else if (tgt_task_find(tc, h->itt) || h->itt == ISCSI_RSVD_TAG)
		reason = ISCSI_REJECT_TASK_IN_PROGRESS;
	else if (h->dlength && (!cmd->write || !sp->immediate_data || h->dlength > cmd->edtl ||
				h->dlength > sp->first_burst_length))
		/* immediate data the negotiation does not allow (RFC 7143 13.11, 13.14) */
		reason = ISCSI_REJECT_PROTOCOL_ERROR;
	else
		return 0;
	tc->rx_verdict = RX_REJECT;
	tc->rx_reject_reason = reason;
	return -1;
}

/* A new task from the command: its fields, the ITT hash, the active list. */
static void cmd_task_init(struct tgt_conn *tc, struct tgt_task *t, const struct iscsi_hdr *h,
			  const struct iscsi_ahs_info *ai)
{
	const struct iscsi_scsi_cmd *cmd = &h->cmd;

	t->start_ns = ev_now_ns(tc->conn->loop);
	tc->last_cmd_ns = t->start_ns; /* (the quiet period: tgt_conn_trim) */
	t->itt = h->itt;
	t->cmdsn = cmd->cmdsn;
	t->edtl = cmd->edtl;
	t->lun = cmd->lun;
	t->read = cmd->read;
	t->write = cmd->write;
	memcpy(t->cdb, cmd->cdb, 16);
	t->cdb_len = 16;
	if (ai->ext_cdb) {
		memcpy(t->cdb + 16, ai->ext_cdb, ai->ext_cdb_len);
		t->cdb_len = (uint16_t)(16 + ai->ext_cdb_len);
	}
	tgt_task_hash_add(tc, t);
	list_add_tail(&t->link, &tc->active);
	t->state = TASK_DATA_OUT;
}

/* How much unsolicited data (immediate and Data-Out before any R2T) the write brings. */
static void cmd_unsolicited(struct tgt_task *t, const struct iscsi_hdr *h,
			    const struct iscsi_sess_params *sp)
{
	if (!h->final)
		t->unsol_total = sp->initial_r2t ? h->dlength
						 : (sp->first_burst_length < t->edtl
							    ? sp->first_burst_length
							    : t->edtl);
	else
		t->unsol_total = h->dlength;
	if (t->unsol_total < h->dlength)
		t->unsol_total = h->dlength;
	t->unsol_got = h->dlength;
	t->data_got = h->dlength;
}

/* The task's data buffer (kept from its last use when large enough). */
static void cmd_buffer(struct tgt_conn *tc, struct tgt_task *t)
{
	bool over;

	if (t->buf && t->buf_cap >= t->edtl)
		return;
	tgt_buf_put(tc, t->buf, t->buf_cap);
	t->buf = buf_get(tc, t->edtl, &t->buf_cap, &over);
	if (t->buf)
		return;
	t->buf_cap = 0;
	if (over)
		write_fail(t, 0, 0, 0); /* the connection's memory budget: TASK SET FULL, retry later */
	else
		write_fail(t, SCSI_SENSE_HARDWARE_ERROR, 0x55, 0x03); /* no memory */
}

int tgt_scsi_cmd_header(struct tgt_conn *tc, const struct iscsi_hdr *h, const uint8_t *ahs,
			uint32_t ahs_len, struct dm_rx_place *place)
{
	const struct iscsi_scsi_cmd *cmd = &h->cmd;
	struct iscsi_ahs_info ai;
	struct tgt_task *t;
	int ahs_rc;

	tc->rx_verdict = RX_OK;
	tc->rx_task = NULL;
	ahs_rc = tc->sess->type == ISCSI_SESSION_DISCOVERY ? 0 : iscsi_ahs_parse(ahs, ahs_len, &ai);
	if (cmd_header_check(tc, h, &ai, ahs_rc) < 0)
		return 0;
	t = tgt_task_alloc(tc, h->immediate);
	if (!t) {
		tc->rx_verdict = RX_REJECT;
		tc->rx_reject_reason = h->immediate ? ISCSI_REJECT_IMM_CMD
						    : ISCSI_REJECT_PROTOCOL_ERROR;
		log_warn("target", "%s: no free task slot (CmdSN window not honoured?)",
			 tc->conn->peer);
		return 0;
	}
	cmd_task_init(tc, t, h, &ai);
	if ((cmd->read && cmd->write) || ai.has_bidi_read_len || t->edtl > TGT_MAX_IO) {
		/* bidirectional commands and oversized transfers are refused after the
		   unsolicited data has been swallowed */
		write_fail(t, SCSI_SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
	}
	if (t->write)
		cmd_unsolicited(t, h, &tc->sess->params);
	if (!t->discard && (t->write || t->read) && t->edtl)
		cmd_buffer(tc, t);
	if (h->dlength && !t->discard) {
		place->buf = t->buf;
		place->len = h->dlength;
	}
	tc->rx_task = t;
	return 0;
}

static void cmd_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok);

void tgt_scsi_cmd_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok)
{
	struct tgt_task *t = tc->rx_task;

	cmd_pdu(tc, h, ddigest_ok);
	if (t && t->tas_pending) /* a PREEMPT AND ABORT came while it was being received */
		tgt_task_abort_now(t);
}

static void cmd_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok)
{
	struct tgt_task *t = tc->rx_task;
	struct tgt_session *s = tc->sess;

	if (tc->rx_verdict == RX_DROP)
		return;
	if (tc->rx_verdict == RX_REJECT) {
		tgt_send_reject(tc, tc->rx_reject_reason, tc->conn->rx_bhs);
		/* the rejected command used its CmdSN up (as SPDK counts it in the header phase):
		   the initiator does not send it again with the same CmdSN */
		if (tc->rx_cmdsn == TGT_CMDSN_IN_ORDER || tc->rx_cmdsn == TGT_CMDSN_AHEAD)
			tgt_cmdsn_consume(tc, h->cmd.cmdsn);
		return;
	}
	tc->rx_task = NULL;
	if (!ddigest_ok) {
		tgt_stat_count(tc, TGT_ST_DIGEST_ERROR, 1);
		tgt_task_free(t);
		tgt_send_reject(tc, ISCSI_REJECT_DATA_DIGEST, tc->conn->rx_bhs);
		iscsi_conn_close(tc->conn, "data digest error on a SCSI Command (ERL 0)");
		return;
	}
	if (tc->rx_cmdsn == TGT_CMDSN_IMMEDIATE) {
		task_start(t);
		return;
	}
	if (tc->rx_cmdsn == TGT_CMDSN_AHEAD) {
		/* ahead of a CmdSN hole: wait for order */
		list_del(&t->link);
		list_add_tail(&t->link, &tc->order_q);
		t->state = TASK_WAIT_ORDER;
		return;
	}
	s->exp_cmdsn++;
	s->outstanding++;
	t->counted = true;
	task_start(t);
	tgt_order_release(tc);
}

/* ---------------------------------------------------------------- Data-Out */

/* Fail a write before execution: remaining data of the current sequence is swallowed and the
 * command is answered with CHECK CONDITION once the initiator ends the sequence (F=1). At
 * ErrorRecoveryLevel 0 this keeps the session (and what it negotiated) alive. */
static void write_fail(struct tgt_task *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
	if (t->discard)
		return;
	t->discard = true;
	t->fail_key = key;
	t->fail_asc = asc;
	t->fail_ascq = ascq;
}

int tgt_data_out_header(struct tgt_conn *tc, const struct iscsi_hdr *h, struct dm_rx_place *place)
{
	const struct iscsi_data_out *d = &h->data_out;
	struct tgt_task *t = tgt_task_find(tc, h->itt);
	uint32_t len = h->dlength;

	tc->rx_verdict = RX_OK;
	tc->rx_task = NULL;
	if (!t || !t->write || (t->state != TASK_DATA_OUT && t->state != TASK_WAIT_ORDER)) {
		/* data for a task we no longer have (aborted, failed early): discard */
		log_dbg("target", "%s: Data-Out for unknown ITT 0x%08x discarded", tc->conn->peer,
			h->itt);
		tc->rx_verdict = RX_DROP;
		return 0;
	}
	tc->rx_task = t;
	if (t->discard)
		return 0; /* payload lands in the control buffer and is dropped */
	if (d->ttt == ISCSI_RSVD_TAG) {
		if (t->unsol_done || d->offset != t->unsol_got || d->datasn != t->unsol_exp_datasn ||
		    d->offset + (uint64_t)len > t->unsol_total) {
			log_warn("target",
				 "%s: bad unsolicited Data-Out ITT 0x%08x offset %u len %u DataSN %u "
				 "(expected offset %u DataSN %u): command failed",
				 tc->conn->peer, h->itt, d->offset, len, d->datasn, t->unsol_got,
				 t->unsol_exp_datasn);
			write_fail(t, SCSI_SENSE_ABORTED_COMMAND, 0x4b, 0x00); /* DATA PHASE ERROR */
			return 0;
		}
	} else {
		struct tgt_r2t *r = NULL;
		for (int i = 0; i < TGT_MAX_R2T; i++)
			if (t->r2t[i].active && t->r2t[i].ttt == d->ttt) {
				r = &t->r2t[i];
				break;
			}
		if (!r || d->offset != r->offset + r->got || d->datasn != r->exp_datasn ||
		    len > r->len - r->got) {
			log_warn("target",
				 "%s: bad Data-Out ITT 0x%08x TTT 0x%08x offset %u len %u DataSN %u: "
				 "command failed",
				 tc->conn->peer, h->itt, d->ttt, d->offset, len, d->datasn);
			write_fail(t, SCSI_SENSE_ABORTED_COMMAND, 0x4b, 0x00);
			return 0;
		}
	}
	if (len) {
		place->buf = t->buf + d->offset;
		place->len = len;
	}
	return 0;
}

static void data_out_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok);

void tgt_data_out_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok)
{
	struct tgt_task *t = tc->rx_verdict == RX_DROP ? NULL : tc->rx_task;

	data_out_pdu(tc, h, ddigest_ok);
	if (t && t->tas_pending) /* a PREEMPT AND ABORT came while it was being received */
		tgt_task_abort_now(t);
}

static void data_out_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok)
{
	const struct iscsi_data_out *d = &h->data_out;
	struct tgt_task *t = tc->rx_task;

	tc->rx_task = NULL;
	if (!t || tc->rx_verdict == RX_DROP)
		return;
	if (!ddigest_ok) {
		tgt_stat_count(tc, TGT_ST_DIGEST_ERROR, 1);
		tgt_send_reject(tc, ISCSI_REJECT_DATA_DIGEST, tc->conn->rx_bhs);
		iscsi_conn_close(tc->conn, "data digest error on Data-Out (ERL 0)");
		return;
	}
	if (t->discard) {
		/* answer once the initiator has ended the sequence it is sending */
		if (h->final && t->state == TASK_DATA_OUT)
			task_fail(t, t->fail_key, t->fail_asc, t->fail_ascq);
		else if (h->final)
			t->unsol_done = true;
		return;
	}
	if (d->ttt == ISCSI_RSVD_TAG) {
		t->unsol_got += h->dlength;
		t->unsol_exp_datasn++;
		t->data_got += h->dlength;
		if (h->final || t->unsol_got >= t->unsol_total) {
			t->unsol_done = true;
			if (t->r2t_next < t->unsol_got)
				t->r2t_next = t->unsol_got;
		}
	} else {
		for (int i = 0; i < TGT_MAX_R2T; i++) {
			struct tgt_r2t *r = &t->r2t[i];
			if (!r->active || r->ttt != d->ttt)
				continue;
			r->got += h->dlength;
			r->exp_datasn++;
			t->data_got += h->dlength;
			if (r->got == r->len) {
				r->active = false;
				t->r2t_active--;
			}
			break;
		}
	}
	if (t->state == TASK_DATA_OUT)
		write_progress(t);
}
