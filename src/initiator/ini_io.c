/* Initiator full feature phase: SCSI commands within the CmdSN window, immediate and
 * unsolicited data, R2T-solicited Data-Out, Data-In placed straight into the caller's buffer
 * (the header phase names the destination), responses and sense data, NOP keepalive, task
 * management, Text (for SendTargets), Async Messages and Rejects. Everything the target sends
 * is checked; a violation drops the connection (ERL 0), which the session recovers from. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/ini_int.h"
#include "session/keepalive.h"
#include "util/bytes.h"
#include "util/log.h"

#define IDX_MASK ((1u << INI_ITT_IDX_BITS) - 1)

/* ---------------------------------------------------------------- tasks */

int ini_tasks_alloc(struct ix_session *s)
{
	s->ntasks = s->opts.queue_depth;
	s->tasks = calloc(s->ntasks, sizeof(*s->tasks));
	if (!s->tasks)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->ntasks; i++) {
		s->tasks[i].gen = (uint16_t)(i & 0x7) + 1;
		list_add_tail(&s->tasks[i].link, &s->free_tasks);
	}
	return 0;
}

void ini_tasks_free(struct ix_session *s)
{
	free(s->tasks);
	s->tasks = NULL;
	s->ntasks = 0;
}

static struct ini_task *task_find(struct ix_session *s, uint32_t itt)
{
	uint32_t idx = itt & IDX_MASK;
	struct ini_task *t;

	if (itt & INI_ITT_CTRL || idx >= s->ntasks)
		return NULL;
	t = &s->tasks[idx];
	return t->cmd && t->itt == itt ? t : NULL;
}

static struct ini_task *task_bind(struct ix_session *s, struct ix_scsi_cmd *cmd)
{
	struct ini_task *t = list_first_entry(&s->free_tasks, struct ini_task, link);
	uint32_t idx = (uint32_t)(t - s->tasks);

	list_del(&t->link);
	/* gen < 2^16 keeps the ITT below INI_ITT_CTRL; 0 is skipped so no ITT is 0 */
	if (++t->gen == 0)
		t->gen = 1;
	t->itt = ((uint32_t)t->gen << INI_ITT_IDX_BITS) | idx;
	t->cmd = cmd;
	t->exp_datasn = 0;
	t->data_in = 0;
	t->r2tsn = 0;
	cmd->_itt = t->itt;
	list_add_tail(&t->link, &s->active);
	s->outstanding++;
	return t;
}

static void task_unbind(struct ix_session *s, struct ini_task *t)
{
	list_del(&t->link);
	t->cmd->_itt = 0;
	t->cmd = NULL;
	list_add(&t->link, &s->free_tasks);
	s->outstanding--;
}

static void q_push_tail(struct ix_session *s, struct ix_scsi_cmd *c)
{
	c->_next = NULL;
	if (s->q_tail)
		((struct ix_scsi_cmd *)s->q_tail)->_next = c;
	else
		s->q_head = c;
	s->q_tail = c;
}

static void q_push_head(struct ix_session *s, struct ix_scsi_cmd *c)
{
	c->_next = s->q_head;
	s->q_head = c;
	if (!s->q_tail)
		s->q_tail = c;
}

static struct ix_scsi_cmd *q_pop(struct ix_session *s)
{
	struct ix_scsi_cmd *c = s->q_head;

	if (!c)
		return NULL;
	s->q_head = c->_next;
	if (!s->q_head)
		s->q_tail = NULL;
	c->_next = NULL;
	return c;
}

static bool q_remove(struct ix_session *s, struct ix_scsi_cmd *c)
{
	struct ix_scsi_cmd *prev = NULL;

	for (struct ix_scsi_cmd *x = s->q_head; x; prev = x, x = x->_next) {
		if (x != c)
			continue;
		if (prev)
			prev->_next = x->_next;
		else
			s->q_head = x->_next;
		if (s->q_tail == x)
			s->q_tail = prev;
		x->_next = NULL;
		return true;
	}
	return false;
}

/* Complete a bound task: results first, then the caller's callback (which may submit more or
 * free the session: the caller of this function holds the session). */
static void task_complete(struct ix_session *s, struct ini_task *t, int err)
{
	struct ix_scsi_cmd *cmd = t->cmd;

	cmd->err = err;
	task_unbind(s, t);
	cmd->done(cmd);
	if (!s->freeing) {
		ini_kick(s);
		ini_logout_maybe(s);
	}
}

/* ---------------------------------------------------------------- sending */

static uint64_t lun_field(uint32_t lun)
{
	/* SAM: peripheral device addressing below 256, flat space addressing above */
	if (lun < 256)
		return (uint64_t)lun << 48;
	return ((uint64_t)(0x4000 | (lun & 0x3fff))) << 48;
}

static int send_data_out(struct ix_session *s, struct ini_task *t, uint32_t ttt, uint32_t off,
			 uint32_t len)
{
	struct ix_scsi_cmd *cmd = t->cmd;
	uint32_t mx = s->conn->params.max_xmit_dsl, datasn = 0;

	while (len > 0) {
		uint32_t n = len < mx ? len : mx;
		struct iscsi_hdr h = {0};
		int r;

		h.opcode = ISCSI_OP_DATA_OUT;
		h.final = n == len;
		h.itt = t->itt;
		h.data_out.lun = lun_field(cmd->lun);
		h.data_out.ttt = ttt;
		h.data_out.expstatsn = s->exp_statsn;
		h.data_out.datasn = datasn++;
		h.data_out.offset = off;
		r = ini_send(s, &h, (uint8_t *)cmd->buf + off, n);
		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

/* The SCSI Command PDU. Its txpdu also names the whole buffer and the solicited part of a
 * write, which an RDMA datamover advertises to the target (TCP ignores both). */
static int send_cmd_pdu(struct ix_session *s, struct iscsi_hdr *h, struct ix_scsi_cmd *cmd,
			uint32_t imm, uint32_t unsol)
{
	struct dm_txpdu *p;

	if (!s->conn)
		return -ENOTCONN;
	p = iscsi_txpdu_get(s->conn);
	if (!p)
		return -ENOMEM;
	h->dlength = imm;
	if (imm) {
		p->data[0].iov_base = cmd->buf;
		p->data[0].iov_len = imm;
		p->data_cnt = 1;
		p->data_len = imm;
	}
	if (cmd->dir != IX_DIR_NONE && cmd->len) {
		p->buf_base = cmd->buf;
		p->buf_size = cmd->len;
		if (cmd->dir == IX_DIR_WRITE && unsol < cmd->len) {
			p->dest.iov_base = (uint8_t *)cmd->buf + unsol;
			p->dest.iov_len = cmd->len - unsol;
		}
	}
	return iscsi_send_pdu(s->conn, p, h);
}

static int send_cmd(struct ix_session *s, struct ini_task *t)
{
	struct ix_scsi_cmd *cmd = t->cmd;
	uint32_t imm = 0, unsol = 0, mx = s->conn->params.max_xmit_dsl;
	struct iscsi_hdr h = {0};
	int r;

	if (cmd->dir == IX_DIR_WRITE) {
		uint32_t fb = s->sp.first_burst_length;
		uint32_t cap = cmd->len < fb ? cmd->len : fb;

		if (s->sp.immediate_data)
			imm = cap < mx ? cap : mx;
		unsol = s->sp.initial_r2t ? imm : cap;
	}
	h.opcode = ISCSI_OP_SCSI_CMD;
	h.final = unsol == imm;
	h.itt = t->itt;
	h.cmd.read = cmd->dir == IX_DIR_READ;
	h.cmd.write = cmd->dir == IX_DIR_WRITE;
	h.cmd.attr = cmd->attr;
	h.cmd.lun = lun_field(cmd->lun);
	h.cmd.edtl = cmd->dir == IX_DIR_NONE ? 0 : cmd->len;
	h.cmd.cmdsn = t->cmdsn = s->cmdsn++;
	h.cmd.expstatsn = s->exp_statsn;
	memcpy(h.cmd.cdb, cmd->cdb, cmd->cdb_len);
	r = send_cmd_pdu(s, &h, cmd, imm, unsol);
	if (r == 0 && unsol > imm)
		r = send_data_out(s, t, ISCSI_RSVD_TAG, imm, unsol - imm);
	return r;
}

void ini_kick(struct ix_session *s)
{
	while (s->state == INI_FFP || (s->state == INI_LOGOUT && !s->logout_sent)) {
		struct ix_scsi_cmd *cmd;
		struct ini_task *t;
		int r;

		if (!s->q_head || list_empty(&s->free_tasks) || !sn_le(s->cmdsn, s->max_cmdsn))
			return;
		cmd = q_pop(s);
		t = task_bind(s, cmd);
		r = send_cmd(s, t);
		if (r < 0) {
			ini_conn_lost(s, r, "cannot send a command");
			return;
		}
	}
}

int ix_scsi_submit(struct ix_session *s, struct ix_scsi_cmd *cmd)
{
	if (!cmd || !cmd->done || cmd->cdb_len < 6 || cmd->cdb_len > 16 || cmd->lun > 16383 ||
	    cmd->dir > IX_DIR_WRITE || (cmd->dir != IX_DIR_NONE && cmd->len && !cmd->buf) ||
	    (cmd->dir == IX_DIR_NONE && cmd->len) || cmd->attr > ISCSI_ATTR_ACA)
		return -EINVAL;
	if (s->freeing)
		return -ENOTCONN;
	if (s->state == INI_LOGOUT)
		return -ESHUTDOWN;
	if (s->state != INI_FFP && !s->recovering)
		return -ENOTCONN;
	cmd->err = 0;
	cmd->status = 0;
	cmd->sense_len = 0;
	cmd->overflow = cmd->underflow = false;
	cmd->residual = 0;
	cmd->_itt = 0;
	q_push_tail(s, cmd);
	ini_hold(s);
	ini_kick(s);
	ini_release(s);
	return 0;
}

void ini_requeue_all(struct ix_session *s, int err)
{
	/* back to the head of the queue, oldest CmdSN first */
	while (!list_empty(&s->active)) {
		struct ini_task *t = list_last_entry(&s->active, struct ini_task, link);
		struct ix_scsi_cmd *cmd = t->cmd;

		task_unbind(s, t);
		q_push_head(s, cmd);
	}
	s->nop_itt = 0;
	for (int i = 0; i < INI_MAX_TMF; i++) {
		struct ini_tmf *m = &s->tmf[i];

		if (!m->used)
			continue;
		m->used = false;
		if (m->cb)
			m->cb(s, err, m->arg);
		if (s->freeing)
			return;
	}
	if (s->text_done) {
		void (*done)(struct ix_session *, int, char *, uint32_t) = s->text_done;

		s->text_done = NULL;
		done(s, err, NULL, 0);
	}
}

void ini_fail_all(struct ix_session *s, int err)
{
	struct ix_scsi_cmd *cmd;

	ini_requeue_all(s, err);
	while (s->cancel_head) {
		cmd = s->cancel_head;
		s->cancel_head = cmd->_next;
		cmd->_next = NULL;
		cmd->err = -ECANCELED;
		cmd->done(cmd);
	}
	while ((cmd = q_pop(s))) {
		cmd->err = err;
		cmd->done(cmd);
	}
}

/* ---------------------------------------------------------------- sequence numbers */

/* Does the StatSN of h stand for a status (RFC 7143 4.2.2.2)? */
static bool carries_status(const struct iscsi_hdr *h)
{
	switch (h->opcode) {
	case ISCSI_OP_NOP_IN:
		return h->itt != ISCSI_RSVD_TAG;
	case ISCSI_OP_DATA_IN:
		return h->data_in.status_present;
	case ISCSI_OP_R2T:
		return false;
	default:
		return true;
	}
}

static void update_sn(struct ix_session *s, const struct iscsi_hdr *h)
{
	struct iscsi_sn_fields f;
	uint32_t exp, max;

	/* (read only: the fields are not written through f) */
	if (iscsi_hdr_sn_fields((struct iscsi_hdr *)h, &f) < 0)
		return;
	exp = *f.expcmdsn;
	max = *f.maxcmdsn;
	/* RFC 7143 4.2.2.1: MaxCmdSN - ExpCmdSN < -1 (serial) means "ignore both" */
	if ((int32_t)(max - exp) >= -1) {
		if (sn_lt(s->max_cmdsn, max))
			s->max_cmdsn = max;
		if (sn_lt(s->exp_cmdsn, exp))
			s->exp_cmdsn = exp;
	}
	if (carries_status(h) && sn_le(s->exp_statsn, *f.statsn))
		s->exp_statsn = *f.statsn + 1;
}

/* ---------------------------------------------------------------- receive: header phase */

static int proto_error(struct ix_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int proto_error(struct ix_session *s, const char *fmt, ...)
{
	char why[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	ini_set_error(s, "target protocol error: %s", why);
	log_warn("initiator", "%s:%u: %s", s->host, s->port, s->error);
	return -EPROTO;
}

static int data_in_header(struct ix_session *s, const struct iscsi_hdr *h,
			  struct dm_rx_place *place)
{
	struct ini_task *t = task_find(s, h->itt);
	const struct iscsi_data_in *d = &h->data_in;

	if (!t)
		return proto_error(s, "Data-In for unknown ITT 0x%08x", h->itt);
	if (t->cmd->dir != IX_DIR_READ && h->dlength)
		return proto_error(s, "Data-In with data for a non-read command (ITT 0x%08x)", h->itt);
	if (d->datasn != t->exp_datasn)
		return proto_error(s, "Data-In DataSN %u, expected %u", d->datasn, t->exp_datasn);
	if (d->offset > t->cmd->len || h->dlength > t->cmd->len - d->offset)
		return proto_error(s, "Data-In beyond the buffer (offset %u, length %u, EDTL %u)",
				   d->offset, h->dlength, t->cmd->len);
	if (d->status_present && !h->final)
		return proto_error(s, "Data-In with S but not F (DataSN %u)", d->datasn);
	if (h->dlength) {
		place->buf = (uint8_t *)t->cmd->buf + d->offset;
		place->len = h->dlength;
	}
	return 0;
}

static int rx_header(struct iscsi_conn *c, const struct iscsi_hdr *h, const uint8_t *ahs,
		     uint32_t ahs_len, struct dm_rx_place *place)
{
	struct ix_session *s = c->role_priv;
	int r = 0;

	if (!s)
		return 0;
	ini_hold(s);
	s->last_rx_ms = ev_now_ms(c->loop);
	if (c->state != ISCSI_CONN_LOGGED_IN) {
		if (h->opcode != ISCSI_OP_LOGIN_RSP || ahs_len)
			r = proto_error(s, "opcode 0x%02x during login", h->opcode);
		else if (h->dlength > c->ctrl_cap)
			r = proto_error(s, "Login Response of %u bytes (limit %u)", h->dlength,
					c->ctrl_cap);
	} else if (h->dlength > c->params.max_recv_dsl) {
		r = proto_error(s, "PDU of %u bytes exceeds our MaxRecvDataSegmentLength %u",
				h->dlength, c->params.max_recv_dsl);
	} else if (h->opcode == ISCSI_OP_DATA_IN) {
		r = data_in_header(s, h, place);
	}
	if (r < 0)
		/* the transport drops the connection; closed() starts the recovery */
		s->lost_err = r;
	ini_release(s);
	return r;
}

/* ---------------------------------------------------------------- receive: PDUs */

static void complete_with_status(struct ix_session *s, struct ini_task *t, uint8_t status,
				 uint8_t flags, uint32_t residual)
{
	struct ix_scsi_cmd *cmd = t->cmd;

	cmd->status = status;
	cmd->overflow = flags & ISCSI_FLAG_OVERFLOW;
	cmd->underflow = flags & ISCSI_FLAG_UNDERFLOW;
	cmd->residual = residual;
	if (cmd->dir == IX_DIR_READ && status == 0 &&
	    !(s->conn && (s->conn->dm->caps & DM_CAP_DIRECT_PLACEMENT))) {
		/* every byte the target claims to have sent must have arrived */
		uint32_t want = cmd->len;

		if (cmd->underflow)
			want = residual <= cmd->len ? cmd->len - residual : 0;
		if (t->data_in != want) {
			ini_set_error(s, "target returned %u bytes of Data-In for ITT 0x%08x, status "
					 "GOOD says %u", t->data_in, t->itt, want);
			log_warn("initiator", "%s:%u: %s", s->host, s->port, s->error);
			task_complete(s, t, -EPROTO);
			return;
		}
	}
	task_complete(s, t, 0);
}

static void on_data_in(struct ix_session *s, const struct iscsi_hdr *h, uint32_t dlen)
{
	struct ini_task *t = task_find(s, h->itt);

	if (!t)
		return; /* checked in the header phase; a TMF may have ended it since */
	t->exp_datasn++;
	t->data_in += dlen;
	if (h->data_in.status_present)
		complete_with_status(s, t, h->data_in.status, h->data_in.flags,
				     h->data_in.residual);
}

static void on_scsi_rsp(struct ix_session *s, const struct iscsi_hdr *h, uint8_t *data,
			uint32_t dlen)
{
	struct ini_task *t = task_find(s, h->itt);
	struct ix_scsi_cmd *cmd;

	if (!t) {
		log_info("initiator", "%s:%u: SCSI Response for unknown ITT 0x%08x ignored", s->host,
			 s->port, h->itt);
		return;
	}
	cmd = t->cmd;
	if (h->rsp.response != 0) {
		ini_set_error(s, "target failure (iSCSI response 0x%02x) for ITT 0x%08x",
			      h->rsp.response, h->itt);
		task_complete(s, t, -EIO);
		return;
	}
	if (dlen >= 2) {
		uint32_t sl = get_be16(data);

		if (sl > dlen - 2)
			sl = dlen - 2;
		if (sl > sizeof(cmd->sense))
			sl = sizeof(cmd->sense);
		memcpy(cmd->sense, data + 2, sl);
		cmd->sense_len = (uint8_t)sl;
	}
	complete_with_status(s, t, h->rsp.status, h->rsp.flags, h->rsp.residual);
}

static void on_r2t(struct ix_session *s, const struct iscsi_hdr *h)
{
	struct ini_task *t = task_find(s, h->itt);
	const struct iscsi_r2t *r2 = &h->r2t;
	int r;

	if (!t) {
		proto_error(s, "R2T for unknown ITT 0x%08x", h->itt);
		ini_conn_lost(s, -EPROTO, NULL);
		return;
	}
	if (t->cmd->dir != IX_DIR_WRITE || r2->ttt == ISCSI_RSVD_TAG) {
		proto_error(s, "R2T for a non-write command or with TTT 0xffffffff (ITT 0x%08x)",
			    h->itt);
		ini_conn_lost(s, -EPROTO, NULL);
		return;
	}
	if (r2->r2tsn != t->r2tsn) {
		proto_error(s, "R2T R2TSN %u, expected %u", r2->r2tsn, t->r2tsn);
		ini_conn_lost(s, -EPROTO, NULL);
		return;
	}
	if (r2->ddtl == 0 || r2->offset > t->cmd->len || r2->ddtl > t->cmd->len - r2->offset ||
	    r2->ddtl > s->sp.max_burst_length) {
		proto_error(s, "R2T asks for bytes %u+%u outside the command or the burst",
			    r2->offset, r2->ddtl);
		ini_conn_lost(s, -EPROTO, NULL);
		return;
	}
	t->r2tsn++;
	r = send_data_out(s, t, r2->ttt, r2->offset, r2->ddtl);
	if (r < 0)
		ini_conn_lost(s, r, "cannot send Data-Out");
}

static void send_ping(struct ix_session *s, uint32_t ttt, uint64_t lun)
{
	struct iscsi_hdr h = {0};

	h.opcode = ISCSI_OP_NOP_OUT;
	h.immediate = true;
	h.final = true;
	h.itt = ttt == ISCSI_RSVD_TAG ? ini_next_ctrl_itt(s) : ISCSI_RSVD_TAG;
	h.nop_out.lun = lun;
	h.nop_out.ttt = ttt;
	h.nop_out.cmdsn = s->cmdsn;
	h.nop_out.expstatsn = s->exp_statsn;
	if (ttt == ISCSI_RSVD_TAG)
		s->nop_itt = h.itt;
	if (ini_send(s, &h, NULL, 0) < 0)
		ini_conn_lost(s, -EIO, "cannot send NOP-Out");
}

static void on_nop_in(struct ix_session *s, const struct iscsi_hdr *h)
{
	if (h->itt != ISCSI_RSVD_TAG) {
		if (h->itt == s->nop_itt) {
			s->nop_itt = 0;
			if (s->opts.noop_interval_ms)
				ev_timer_start(s->ctx->loop, &s->nop_timer, s->opts.noop_interval_ms);
		}
		return;
	}
	if (h->nop_in.ttt != ISCSI_RSVD_TAG)
		send_ping(s, h->nop_in.ttt, h->nop_in.lun); /* the target pings us */
}

static struct ini_tmf *tmf_find(struct ix_session *s, uint32_t itt)
{
	for (int i = 0; i < INI_MAX_TMF; i++)
		if (s->tmf[i].used && s->tmf[i].itt == itt)
			return &s->tmf[i];
	return NULL;
}

static void on_tmf_rsp(struct ix_session *s, const struct iscsi_hdr *h)
{
	struct ini_tmf *m = tmf_find(s, h->itt);
	struct ini_tmf done;

	if (!m) {
		log_info("initiator", "%s:%u: TMF response for unknown ITT 0x%08x ignored", s->host,
			 s->port, h->itt);
		return;
	}
	done = *m;
	m->used = false;
	/* RFC 7143 4.2.3.3/4: once the TMF response is here, the affected tasks get no
	   response of their own */
	if (h->tmf_rsp.response == ISCSI_TMF_RSP_COMPLETE ||
	    h->tmf_rsp.response == ISCSI_TMF_RSP_NO_TASK) {
		if (done.function == ISCSI_TMF_ABORT_TASK) {
			struct ini_task *t = task_find(s, done.ref_itt);
			if (t)
				task_complete(s, t, -ECANCELED);
		} else if (h->tmf_rsp.response == ISCSI_TMF_RSP_COMPLETE) {
			/* collect first: callbacks may submit new commands, which the reset
			   did not touch */
			struct list_head victims, *pos, *n;

			list_init(&victims);
			list_for_each_safe(pos, n, &s->active) {
				struct ini_task *t = list_entry(pos, struct ini_task, link);
				if (done.function != ISCSI_TMF_LUN_RESET || t->cmd->lun == done.lun) {
					list_del(&t->link);
					list_add_tail(&t->link, &victims);
				}
			}
			while (!list_empty(&victims) && !s->freeing)
				task_complete(s, list_first_entry(&victims, struct ini_task, link),
					      -ECANCELED);
		}
	}
	if (!s->freeing && done.cb)
		done.cb(s, h->tmf_rsp.response, done.arg);
}

static void on_text_rsp(struct ix_session *s, const struct iscsi_hdr *h, uint8_t *data,
			uint32_t dlen)
{
	void (*done)(struct ix_session *, int, char *, uint32_t) = s->text_done;
	struct iscsi_hdr rq = {0};

	if (!done || h->itt != s->text_itt) {
		ini_conn_lost(s, -EPROTO, "unexpected Text Response");
		return;
	}
	if (text_accum_append(&s->text, data, dlen) < 0) {
		s->text_done = NULL;
		ini_set_error(s, "Text Response longer than %zu bytes", s->text.cap - 1);
		done(s, -EMSGSIZE, NULL, 0);
		return;
	}
	if (h->final && !h->text_rsp.cont) {
		s->text_done = NULL;
		done(s, 0, s->text.buf, (uint32_t)s->text.len);
		return;
	}
	/* more to come: an empty Text Request with the target's TTT asks for it */
	rq.opcode = ISCSI_OP_TEXT_REQ;
	rq.final = true;
	rq.itt = s->text_itt;
	rq.text_req.lun = 0;
	rq.text_req.ttt = h->text_rsp.ttt;
	rq.text_req.cmdsn = s->cmdsn++;
	rq.text_req.expstatsn = s->exp_statsn;
	if (ini_send(s, &rq, NULL, 0) < 0)
		ini_conn_lost(s, -EIO, "cannot send Text Request");
}

int ini_send_text(struct ix_session *s, const char *text, uint32_t len,
		  void (*done)(struct ix_session *s, int err, char *text, uint32_t len))
{
	struct iscsi_hdr h = {0};

	if (s->state != INI_FFP)
		return -ENOTCONN;
	if (s->text_done)
		return -EBUSY;
	if (!s->text_buf) {
		s->text_buf = malloc(LOGIN_MAX_TEXT + 1);
		if (!s->text_buf)
			return -ENOMEM;
	}
	text_accum_init(&s->text, s->text_buf, LOGIN_MAX_TEXT + 1);
	s->text_itt = ini_next_ctrl_itt(s);
	s->text_done = done;
	h.opcode = ISCSI_OP_TEXT_REQ;
	h.final = true;
	h.itt = s->text_itt;
	h.text_req.ttt = ISCSI_RSVD_TAG;
	h.text_req.cmdsn = s->cmdsn++;
	h.text_req.expstatsn = s->exp_statsn;
	return ini_send(s, &h, text, len);
}

static void on_async(struct ix_session *s, const struct iscsi_hdr *h)
{
	switch (h->async.event) {
	case 0:
		log_info("initiator", "%s:%u: SCSI asynchronous event on LUN field 0x%016llx",
			 s->host, s->port, (unsigned long long)h->async.lun);
		return;
	case 1:
		/* the target wants a logout: reconnecting reinstates the session and reissues
		   whatever was in flight, which is what a logout + login would do */
		log_info("initiator", "%s:%u: target requests logout; reconnecting", s->host,
			 s->port);
		if (s->event_cb)
			s->event_cb(s, IX_EVENT_TARGET_LOGOUT_REQUEST, 0, s->event_arg);
		if (!s->freeing && s->state == INI_FFP)
			ini_conn_lost(s, -ECONNRESET, "target requested logout");
		return;
	case 2:
	case 3:
		log_info("initiator", "%s:%u: target will drop the connection (event %u)", s->host,
			 s->port, h->async.event);
		ini_conn_lost(s, -ECONNRESET, "target announced a connection drop");
		return;
	case 4:
		log_info("initiator", "%s:%u: target asks for renegotiation: not supported, ignored",
			 s->host, s->port);
		return;
	default:
		log_info("initiator", "%s:%u: Async Message event %u ignored", s->host, s->port,
			 h->async.event);
		return;
	}
}

static void on_reject(struct ix_session *s, const struct iscsi_hdr *h, uint8_t *data,
		      uint32_t dlen)
{
	struct iscsi_hdr bad;
	struct ini_task *t;

	if (dlen < ISCSI_BHS_LEN) {
		ini_conn_lost(s, -EPROTO, "Reject without the rejected header");
		return;
	}
	(void)iscsi_hdr_unpack(data, &bad);
	ini_set_error(s, "target rejected %s (ITT 0x%08x): reason 0x%02x",
		      iscsi_opcode_name(bad.opcode), bad.itt, h->reject.reason);
	log_warn("initiator", "%s:%u: %s", s->host, s->port, s->error);
	if (bad.opcode == ISCSI_OP_SCSI_CMD && (t = task_find(s, bad.itt))) {
		task_complete(s, t, -EPROTO);
		return;
	}
	if (bad.opcode == ISCSI_OP_NOP_OUT && bad.itt == s->nop_itt) {
		s->nop_itt = 0;
		return;
	}
	/* a rejected Data-Out, TMF, Text...: at ERL 0 the command cannot finish; start over */
	ini_conn_lost(s, -EPROTO, NULL);
}

static void rx_pdu(struct iscsi_conn *c, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen,
		   bool ddigest_ok)
{
	struct ix_session *s = c->role_priv;

	if (!s)
		return;
	ini_hold(s);
	if (c->state != ISCSI_CONN_LOGGED_IN) {
		ini_login_rx(s, h, data, dlen);
		goto out;
	}
	if (!ddigest_ok) {
		/* ERL 0: a data digest error ends the connection; recovery reissues */
		ini_conn_lost(s, -EIO, "data digest error");
		goto out;
	}
	update_sn(s, h);
	switch (h->opcode) {
	case ISCSI_OP_DATA_IN:
		on_data_in(s, h, dlen);
		break;
	case ISCSI_OP_SCSI_RSP:
		on_scsi_rsp(s, h, data, dlen);
		break;
	case ISCSI_OP_R2T:
		on_r2t(s, h);
		break;
	case ISCSI_OP_NOP_IN:
		on_nop_in(s, h);
		break;
	case ISCSI_OP_TMF_RSP:
		on_tmf_rsp(s, h);
		break;
	case ISCSI_OP_TEXT_RSP:
		on_text_rsp(s, h, data, dlen);
		break;
	case ISCSI_OP_LOGOUT_RSP:
		ini_logout_rx(s, h);
		break;
	case ISCSI_OP_ASYNC_MSG:
		on_async(s, h);
		break;
	case ISCSI_OP_REJECT:
		on_reject(s, h, data, dlen);
		break;
	default:
		ini_set_error(s, "target sent opcode 0x%02x", h->opcode);
		ini_conn_lost(s, -EPROTO, NULL);
		goto out;
	}
	if (!s->freeing)
		ini_kick(s);
out:
	ini_release(s);
}

static void closed(struct iscsi_conn *c)
{
	struct ix_session *s = c->role_priv;
	int err;

	if (!s)
		return;
	ini_hold(s);
	err = s->lost_err ? s->lost_err : -ECONNRESET;
	s->lost_err = 0;
	if (err == -ECONNRESET)
		ini_set_error(s, "connection closed by %s", c->peer);
	ini_conn_lost(s, err, NULL);
	ini_release(s);
}

const struct iscsi_role_ops ini_role_ops = {
	.rx_header = rx_header,
	.rx_pdu = rx_pdu,
	.closed = closed,
};

/* ---------------------------------------------------------------- keepalive */

void ini_ffp_started(struct ix_session *s)
{
	s->nop_itt = 0;
	s->last_rx_ms = ev_now_ms(s->ctx->loop);
	if (s->opts.noop_interval_ms)
		ev_timer_start(s->ctx->loop, &s->nop_timer, s->opts.noop_interval_ms);
	ini_kick(s);
}

void ini_nop_timer_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;
	char why[96];
	uint32_t next;

	if (s->state != INI_FFP)
		return;
	ini_hold(s);
	switch (keepalive_due(s->nop_itt != 0, s->last_rx_ms, ev_now_ms(s->ctx->loop),
			      s->opts.noop_interval_ms, s->opts.noop_timeout_ms, &next)) {
	case KEEPALIVE_DEAD:
		snprintf(why, sizeof(why), "no answer to NOP-Out within %u ms",
			 s->opts.noop_timeout_ms);
		ini_conn_lost(s, -ETIMEDOUT, why);
		break;
	case KEEPALIVE_WAIT:
		ev_timer_start(s->ctx->loop, &s->nop_timer, next);
		break;
	case KEEPALIVE_PING:
		send_ping(s, ISCSI_RSVD_TAG, 0);
		if (s->state == INI_FFP)
			ev_timer_start(s->ctx->loop, &s->nop_timer, next);
		break;
	}
	ini_release(s);
}

/* ---------------------------------------------------------------- task management */

static void local_cancel_cb(struct ev_timer *t)
{
	struct ix_session *s = t->arg;

	ini_hold(s);
	while (!s->freeing && s->cancel_head) {
		struct ix_scsi_cmd *cmd = s->cancel_head;
		s->cancel_head = cmd->_next;
		cmd->_next = NULL;
		cmd->err = -ECANCELED;
		cmd->done(cmd);
	}
	for (int i = 0; i < INI_MAX_TMF && !s->freeing; i++) {
		struct ini_tmf *m = &s->tmf[i];
		if (m->used && m->local) {
			m->used = false;
			if (m->cb)
				m->cb(s, ISCSI_TMF_RSP_COMPLETE, m->arg);
		}
	}
	ini_release(s);
}

static struct ini_tmf *tmf_slot(struct ix_session *s)
{
	for (int i = 0; i < INI_MAX_TMF; i++)
		if (!s->tmf[i].used) {
			memset(&s->tmf[i], 0, sizeof(s->tmf[i]));
			s->tmf[i].used = true;
			return &s->tmf[i];
		}
	return NULL;
}

static int send_tmf(struct ix_session *s, struct ini_tmf *m, uint32_t refcmdsn)
{
	struct iscsi_hdr h = {0};

	m->itt = ini_next_ctrl_itt(s);
	h.opcode = ISCSI_OP_TMF_REQ;
	h.immediate = true;
	h.final = true;
	h.itt = m->itt;
	h.tmf_req.function = m->function;
	h.tmf_req.lun = lun_field(m->lun);
	h.tmf_req.rtt = m->function == ISCSI_TMF_ABORT_TASK ? m->ref_itt : ISCSI_RSVD_TAG;
	h.tmf_req.cmdsn = s->cmdsn;
	h.tmf_req.expstatsn = s->exp_statsn;
	h.tmf_req.refcmdsn = refcmdsn;
	return ini_send(s, &h, NULL, 0);
}

int ix_task_abort(struct ix_session *s, struct ix_scsi_cmd *cmd, ix_tmf_cb cb, void *arg)
{
	struct ini_task *t;
	struct ini_tmf *m;
	int r;

	if (s->freeing)
		return -ENOTCONN;
	if (q_remove(s, cmd)) {
		/* never sent: cancel locally, report through the loop */
		m = tmf_slot(s);
		if (!m) {
			q_push_head(s, cmd);
			return -EBUSY;
		}
		m->local = true;
		m->cb = cb;
		m->arg = arg;
		cmd->_next = s->cancel_head;
		s->cancel_head = cmd;
		ev_timer_start(s->ctx->loop, &s->cancel_timer, 0);
		return 0;
	}
	t = cmd->_itt ? task_find(s, cmd->_itt) : NULL;
	if (!t || t->cmd != cmd)
		return -ENOENT;
	if (s->state != INI_FFP && s->state != INI_LOGOUT)
		return -ENOTCONN;
	m = tmf_slot(s);
	if (!m)
		return -EBUSY;
	m->function = ISCSI_TMF_ABORT_TASK;
	m->lun = cmd->lun;
	m->ref_itt = t->itt;
	m->victim = cmd;
	m->cb = cb;
	m->arg = arg;
	r = send_tmf(s, m, t->cmdsn);
	if (r < 0)
		m->used = false;
	return r;
}

int ix_lun_reset(struct ix_session *s, uint32_t lun, ix_tmf_cb cb, void *arg)
{
	struct ini_tmf *m;
	int r;

	if (lun > 16383)
		return -EINVAL;
	if (s->freeing || (s->state != INI_FFP && s->state != INI_LOGOUT))
		return -ENOTCONN;
	m = tmf_slot(s);
	if (!m)
		return -EBUSY;
	m->function = ISCSI_TMF_LUN_RESET;
	m->lun = lun;
	m->ref_itt = ISCSI_RSVD_TAG;
	m->cb = cb;
	m->arg = arg;
	r = send_tmf(s, m, 0);
	if (r < 0)
		m->used = false;
	return r;
}

void ini_io_init(struct ix_session *s)
{
	ev_timer_init(&s->cancel_timer, local_cancel_cb, s);
}
