/* Target-role unit tests: one tgt_conn driven through a recording fake datamover (see
 * tgt_harness.h), deterministic and single-threaded. Each case names the rule it checks
 * (RFC 7143 sections); docs/testing.md lists them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tgt_harness.h"
#include "util/log.h"

/* Set up or end the case (a failed set-up is one failed check, the rest is not run). */
#define H_SETUP(h, extra, prefs)                                                                   \
	do {                                                                                       \
		int _r = h_setup((h), (extra), (prefs));                                           \
		CHECK_EQ(_r, 0);                                                                   \
		if (_r) {                                                                          \
			h_teardown(h);                                                             \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static bool has_tmf_rsp(struct harness *h)
{
	return h_find(h, ISCSI_OP_TMF_RSP, 0) != NULL;
}

static bool has_ping(struct harness *h)
{
	for (int k = 0; k < h->nrec; k++)
		if (h->rec[k].h.opcode == ISCSI_OP_NOP_IN && h->rec[k].h.itt == ISCSI_RSVD_TAG)
			return true;
	return false;
}

static bool is_closed(struct harness *h)
{
	return h->terminated > 0;
}

static void fill(uint8_t *b, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed + i * 7 + (i >> 9));
}

/* READ back len bytes at lba of LUN 0 with a fresh command and compare them to want. */
static bool read_back(struct harness *h, uint32_t lba, const uint8_t *want, uint32_t len)
{
	struct iscsi_hdr c = h_cmd(h, 0, false, lba, (uint16_t)(len / 512), len, h->cmdsn++);
	uint8_t *got = calloc(1, len);
	bool ok = true;
	int before = h->nrec;

	h_rx(h, &c, NULL, 0);
	for (int k = before; k < h->nrec; k++) {
		struct h_rec *r = &h->rec[k];

		if (r->h.opcode == ISCSI_OP_DATA_IN && r->h.itt == c.itt &&
		    r->h.data_in.offset + r->len <= len)
			memcpy(got + r->h.data_in.offset, r->data, r->len);
	}
	ok = memcmp(got, want, len) == 0;
	free(got);
	return ok;
}

/* Login through session/login_init.c: full feature phase, datamover enabled, keys in effect. */
static void test_login(void)
{
	struct harness h;

	printf("# login\n");
	H_SETUP(&h, "", NULL);
	CHECK_EQ(h.enabled, 1);
	CHECK_EQ(h.c->state, ISCSI_CONN_LOGGED_IN);
	CHECK(h.tc->sess != NULL);
	CHECK_EQ(h.tc->sess->params.initial_r2t, 0);
	CHECK_EQ(h.tc->sess->params.first_burst_length, 8192);
	CHECK_EQ(h.tc->sess->params.max_burst_length, 16384);
	CHECK_EQ(h.c->params.max_xmit_dsl, 4096);
	CHECK_EQ(h.tc->sess->exp_cmdsn, h.cmdsn);
	h_teardown(&h);
}

/* RFC 7143 4.2.2.2 / 13.11 / 13.13 / 13.14: InitialR2T=No with ImmediateData: the initiator
 * sends immediate data and unsolicited Data-Out up to FirstBurstLength, the target solicits
 * the rest with R2Ts of at most MaxBurstLength (one at a time: MaxOutstandingR2T=1), R2TSN
 * counting from 0, offsets contiguous after the unsolicited part. */
static void test_write_unsolicited_r2t(void)
{
	struct harness h;
	uint32_t len = 40960; /* 8192 unsolicited + 2 R2Ts of 16384 */
	uint8_t *data;
	struct h_rec *r2t;

	printf("# write: immediate + unsolicited + R2T\n");
	H_SETUP(&h, "", NULL);
	data = malloc(len);
	fill(data, len, 3);
	struct iscsi_hdr c = h_cmd(&h, 0, true, 10, (uint16_t)(len / 512), len, h.cmdsn++);
	c.final = false; /* unsolicited Data-Out follows */
	h_rx(&h, &c, data, 4096);
	CHECK_EQ(h.nrec, 0); /* the unsolicited burst is not over: no R2T yet */
	h_data_out(&h, c.itt, ISCSI_RSVD_TAG, 0, 4096, data + 4096, 4096, true);
	CHECK_EQ(h_count(&h, ISCSI_OP_R2T), 1);
	r2t = h_find(&h, ISCSI_OP_R2T, 0);
	CHECK(r2t && r2t->kind == H_GET_DATA);
	CHECK(r2t && r2t->h.r2t.r2tsn == 0);
	CHECK(r2t && r2t->h.r2t.offset == 8192);
	CHECK(r2t && r2t->h.r2t.ddtl == 16384);
	CHECK(r2t && r2t->h.itt == c.itt && r2t->h.r2t.ttt != ISCSI_RSVD_TAG);
	if (!r2t)
		goto out;
	uint32_t ttt = r2t->h.r2t.ttt;
	/* the burst in two PDUs of 8192 (the target's MaxRecvDataSegmentLength) */
	h_data_out(&h, c.itt, ttt, 0, 8192, data + 8192, 8192, false);
	CHECK_EQ(h_count(&h, ISCSI_OP_R2T), 1);
	h_data_out(&h, c.itt, ttt, 1, 16384, data + 16384, 8192, true);
	CHECK_EQ(h_count(&h, ISCSI_OP_R2T), 2);
	r2t = h_find(&h, ISCSI_OP_R2T, 1);
	CHECK(r2t && r2t->h.r2t.r2tsn == 1);
	CHECK(r2t && r2t->h.r2t.offset == 24576);
	CHECK(r2t && r2t->h.r2t.ddtl == 16384);
	if (!r2t)
		goto out;
	ttt = r2t->h.r2t.ttt;
	h_data_out(&h, c.itt, ttt, 0, 24576, data + 24576, 8192, false);
	CHECK(h_status_of(&h, c.itt) == NULL);
	h_data_out(&h, c.itt, ttt, 1, 32768, data + 32768, 8192, true);
	struct h_rec *st = h_status_of(&h, c.itt);
	CHECK(st && h_status(st) == SCSI_STATUS_GOOD);
	CHECK(st && st->h.rsp.flags == 0 && st->h.rsp.residual == 0);
	CHECK(read_back(&h, 10, data, len));
out:
	h_teardown(&h);
	free(data);
}

/* InitialR2T=Yes, ImmediateData=No: nothing unsolicited; the first R2T asks for offset 0. */
static void test_write_initial_r2t(void)
{
	struct harness h;
	struct neg_prefs p;
	uint8_t data[8192];
	struct h_rec *r2t;

	printf("# write: InitialR2T=Yes\n");
	fill(data, sizeof(data), 9);
	h_prefs_default(&p);
	p.sess.initial_r2t = true;
	p.sess.immediate_data = false;
	H_SETUP(&h, "", &p);
	struct iscsi_hdr c = h_cmd(&h, 0, true, 200, 16, sizeof(data), h.cmdsn++);
	h_rx(&h, &c, NULL, 0);
	r2t = h_find(&h, ISCSI_OP_R2T, 0);
	CHECK(r2t && r2t->h.r2t.offset == 0 && r2t->h.r2t.ddtl == 8192 && r2t->h.r2t.r2tsn == 0);
	if (r2t) {
		h_data_out(&h, c.itt, r2t->h.r2t.ttt, 0, 0, data, 8192, true);
		struct h_rec *st = h_status_of(&h, c.itt);
		CHECK(st && h_status(st) == SCSI_STATUS_GOOD);
	}
	/* immediate data is refused when ImmediateData=No: Reject, task not started */
	h_clear(&h);
	c = h_cmd(&h, 0, true, 200, 16, sizeof(data), h.cmdsn);
	h_rx(&h, &c, data, 512);
	CHECK_EQ(h_count(&h, ISCSI_OP_REJECT), 1);
	CHECK(h_find(&h, ISCSI_OP_REJECT, 0) &&
	      h_find(&h, ISCSI_OP_REJECT, 0)->h.reject.reason == ISCSI_REJECT_PROTOCOL_ERROR);
	CHECK_EQ(h_count(&h, ISCSI_OP_R2T), 0);
	h_teardown(&h);
}

/* RFC 7143 11.7.4/11.7.5: solicited Data-Out at the wrong offset, or with the wrong DataSN,
 * fails the command (CHECK CONDITION, ABORTED COMMAND / DATA PHASE ERROR 4Bh) once the
 * initiator ends the sequence; the session lives on. Same for unsolicited data. */
static void test_write_bad_data_out(void)
{
	struct harness h;
	uint8_t data[16384];
	struct h_rec *r2t, *st;

	printf("# write: Data-Out with a wrong offset / DataSN\n");
	fill(data, sizeof(data), 1);
	H_SETUP(&h, "", NULL);
	/* wrong offset in the R2T's sequence */
	struct iscsi_hdr c = h_cmd(&h, 0, true, 300, 32, sizeof(data), h.cmdsn++);
	c.final = true; /* no unsolicited data: R2T for everything */
	h_rx(&h, &c, NULL, 0);
	r2t = h_find(&h, ISCSI_OP_R2T, 0);
	CHECK(r2t && r2t->h.r2t.offset == 0 && r2t->h.r2t.ddtl == 16384);
	if (!r2t)
		goto out;
	h_data_out(&h, c.itt, r2t->h.r2t.ttt, 0, 512 /* not 0 */, data, 8192, false);
	CHECK(h_status_of(&h, c.itt) == NULL); /* waits for the end of the sequence */
	h_data_out(&h, c.itt, r2t->h.r2t.ttt, 1, 8192, data + 8192, 8192, true);
	st = h_status_of(&h, c.itt);
	CHECK(st && h_status(st) == SCSI_STATUS_CHECK_CONDITION);
	CHECK_EQ(h_sense_key(st), SCSI_SENSE_ABORTED_COMMAND);
	CHECK_EQ(h_sense_asc(st), 0x4b);

	/* wrong DataSN */
	h_clear(&h);
	c = h_cmd(&h, 0, true, 300, 32, sizeof(data), h.cmdsn++);
	h_rx(&h, &c, NULL, 0);
	r2t = h_find(&h, ISCSI_OP_R2T, 0);
	if (!r2t)
		goto out;
	h_data_out(&h, c.itt, r2t->h.r2t.ttt, 0, 0, data, 8192, false);
	h_data_out(&h, c.itt, r2t->h.r2t.ttt, 5 /* not 1 */, 8192, data + 8192, 8192, true);
	st = h_status_of(&h, c.itt);
	CHECK(st && h_status(st) == SCSI_STATUS_CHECK_CONDITION);
	CHECK_EQ(h_sense_asc(st), 0x4b);

	/* unsolicited Data-Out at the wrong offset (immediate data covered 0..4095) */
	h_clear(&h);
	c = h_cmd(&h, 0, true, 300, 32, sizeof(data), h.cmdsn++);
	c.final = false;
	h_rx(&h, &c, data, 4096);
	h_data_out(&h, c.itt, ISCSI_RSVD_TAG, 0, 0 /* not 4096 */, data, 4096, true);
	st = h_status_of(&h, c.itt);
	CHECK(st && h_status(st) == SCSI_STATUS_CHECK_CONDITION);
	CHECK_EQ(h_sense_asc(st), 0x4b);
	CHECK_EQ(h_count(&h, ISCSI_OP_R2T), 0);

	/* the session still works */
	h_clear(&h);
	struct iscsi_hdr rd = h_cmd(&h, 0, false, 0, 1, 512, h.cmdsn++);
	h_rx(&h, &rd, NULL, 0);
	st = h_status_of(&h, rd.itt);
	CHECK(st && h_status(st) == SCSI_STATUS_GOOD);
	CHECK_EQ(h.terminated, 0);
out:
	h_teardown(&h);
}

/* RFC 7143 3.2.2.1 / 4.2.2.1: a command beyond ExpCmdSN waits until the hole is filled, then
 * both run in CmdSN order; ExpCmdSN advances past both. */
static void test_cmdsn_hole(void)
{
	struct harness h;
	struct h_rec *a, *b;

	printf("# CmdSN hole\n");
	H_SETUP(&h, "", NULL);
	uint32_t n = h.cmdsn;
	struct iscsi_hdr second = h_cmd(&h, 0, false, 0, 1, 512, n + 1);
	struct iscsi_hdr first = h_cmd(&h, 0, false, 1, 1, 512, n);
	h_rx(&h, &second, NULL, 0);
	CHECK_EQ(h.nrec, 0); /* waits for CmdSN n */
	CHECK_EQ(h.tc->sess->exp_cmdsn, n);
	h_rx(&h, &first, NULL, 0);
	a = h_status_of(&h, first.itt);
	b = h_status_of(&h, second.itt);
	CHECK(a && b && a < b); /* recorded in CmdSN order */
	CHECK(a && b && a->h.data_in.statsn + 1 == b->h.data_in.statsn);
	CHECK(b && b->h.data_in.expcmdsn == n + 2);
	CHECK_EQ(h.tc->sess->exp_cmdsn, n + 2);
	h_teardown(&h);
}

/* RFC 7143 4.2.2.1: a non-immediate command outside [ExpCmdSN, MaxCmdSN] is dropped silently
 * (no response, no Reject, ExpCmdSN unchanged); so is a non-SCSI request. */
static void test_cmdsn_window(void)
{
	struct harness h;

	printf("# CmdSN window\n");
	H_SETUP(&h, "", NULL);
	uint32_t n = h.cmdsn, max = h.tc->sess->max_cmdsn;
	CHECK_EQ(max, n + 7); /* cmdsn_depth 8 */
	struct iscsi_hdr beyond = h_cmd(&h, 0, false, 0, 1, 512, max + 1);
	h_rx(&h, &beyond, NULL, 0);
	struct iscsi_hdr old = h_cmd(&h, 0, false, 0, 1, 512, n - 1);
	h_rx(&h, &old, NULL, 0);
	struct iscsi_hdr nop = {.opcode = ISCSI_OP_NOP_OUT, .final = true, .itt = h.itt++};
	nop.nop_out.ttt = ISCSI_RSVD_TAG;
	nop.nop_out.cmdsn = max + 1;
	h_rx(&h, &nop, NULL, 0);
	/* TMF, Text and Logout: the same one check */
	struct iscsi_hdr tmf = {.opcode = ISCSI_OP_TMF_REQ, .final = true, .itt = h.itt++};
	tmf.tmf_req.function = ISCSI_TMF_LUN_RESET;
	tmf.tmf_req.rtt = ISCSI_RSVD_TAG;
	tmf.tmf_req.cmdsn = n - 1;
	h_rx(&h, &tmf, NULL, 0);
	struct iscsi_hdr txt = {.opcode = ISCSI_OP_TEXT_REQ, .final = true, .itt = h.itt++};
	txt.text_req.ttt = ISCSI_RSVD_TAG;
	txt.text_req.cmdsn = max + 1;
	h_rx(&h, &txt, "SendTargets=All", 16);
	struct iscsi_hdr lo = {.opcode = ISCSI_OP_LOGOUT_REQ, .final = true, .itt = h.itt++};
	lo.logout_req.reason = ISCSI_LOGOUT_CLOSE_SESSION;
	lo.logout_req.cmdsn = max + 2;
	h_rx(&h, &lo, NULL, 0);
	CHECK_EQ(h.nrec, 0);
	CHECK_EQ(h.terminated, 0);
	CHECK_EQ(h.tc->sess->exp_cmdsn, n);
	CHECK_EQ(h.tc->order_q.next == &h.tc->order_q, 1);
	/* the dropped ones left no trace: CmdSN n runs at once */
	struct iscsi_hdr ok = h_cmd(&h, 0, false, 0, 1, 512, n);
	h_rx(&h, &ok, NULL, 0);
	CHECK(h_status_of(&h, ok.itt) != NULL);
	CHECK_EQ(h.nrec, 1); /* its Data-In (status collapsed), nothing for the dropped ones */
	h_teardown(&h);
}

/* RFC 7143 3.2.2.1: an immediate command is delivered at once, even behind a CmdSN hole, and
 * does not advance ExpCmdSN; a non-immediate NOP-Out at ExpCmdSN advances it and releases the
 * SCSI command queued behind it. */
static void test_cmdsn_immediate(void)
{
	struct harness h;

	printf("# immediate commands and non-SCSI requests in CmdSN order\n");
	H_SETUP(&h, "", NULL);
	uint32_t n = h.cmdsn;
	struct iscsi_hdr queued = h_cmd(&h, 0, false, 0, 1, 512, n + 1);
	h_rx(&h, &queued, NULL, 0);
	CHECK_EQ(h.nrec, 0);
	struct iscsi_hdr imm = h_cmd(&h, 0, false, 0, 1, 512, n);
	imm.immediate = true;
	h_rx(&h, &imm, NULL, 0);
	CHECK(h_status_of(&h, imm.itt) != NULL);
	CHECK(h_status_of(&h, queued.itt) == NULL);
	CHECK_EQ(h.tc->sess->exp_cmdsn, n);
	/* a non-immediate NOP-Out (ping, ITT set) with CmdSN n fills the hole */
	struct iscsi_hdr nop = {.opcode = ISCSI_OP_NOP_OUT, .final = true, .itt = h.itt++};
	nop.nop_out.ttt = ISCSI_RSVD_TAG;
	nop.nop_out.cmdsn = n;
	h_rx(&h, &nop, "ping", 4);
	struct h_rec *in = h_find(&h, ISCSI_OP_NOP_IN, 0);
	CHECK(in && in->h.itt == nop.itt && in->len == 4 && memcmp(in->data, "ping", 4) == 0);
	CHECK(h_status_of(&h, queued.itt) != NULL);
	CHECK_EQ(h.tc->sess->exp_cmdsn, n + 2);
	h_teardown(&h);
}

/* A request that does not wait in the order queue still uses its CmdSN up: a non-immediate
 * NOP-Out behind a hole is answered at once and ExpCmdSN steps over it when the hole is
 * filled; a rejected SCSI command (here: data with a READ) uses its CmdSN too. Either way the
 * commands behind them run and the session does not stall. */
static void test_cmdsn_used_ahead(void)
{
	struct harness h;

	printf("# CmdSNs used up ahead of ExpCmdSN\n");
	H_SETUP(&h, "", NULL);
	uint32_t n = h.cmdsn;
	struct iscsi_hdr last = h_cmd(&h, 0, false, 0, 1, 512, n + 2);
	h_rx(&h, &last, NULL, 0);
	struct iscsi_hdr nop = {.opcode = ISCSI_OP_NOP_OUT, .final = true, .itt = h.itt++};
	nop.nop_out.ttt = ISCSI_RSVD_TAG;
	nop.nop_out.cmdsn = n + 1;
	h_rx(&h, &nop, "ping", 4);
	CHECK(h_find(&h, ISCSI_OP_NOP_IN, 0) != NULL); /* answered at once */
	CHECK_EQ(h.tc->sess->exp_cmdsn, n);
	struct iscsi_hdr first = h_cmd(&h, 0, false, 0, 1, 512, n);
	h_rx(&h, &first, NULL, 0);
	CHECK(h_status_of(&h, first.itt) != NULL);
	CHECK(h_status_of(&h, last.itt) != NULL); /* n, then n + 1 stepped over, then n + 2 */
	CHECK_EQ(h.tc->sess->exp_cmdsn, n + 3);
	/* a rejected command: a READ carrying data */
	h_clear(&h);
	struct iscsi_hdr bad = h_cmd(&h, 0, false, 0, 1, 512, n + 3);
	h_rx(&h, &bad, "data", 4);
	CHECK_EQ(h_count(&h, ISCSI_OP_REJECT), 1);
	struct iscsi_hdr next = h_cmd(&h, 0, false, 0, 1, 512, n + 4);
	h_rx(&h, &next, NULL, 0);
	CHECK(h_status_of(&h, next.itt) != NULL);
	CHECK_EQ(h.tc->sess->exp_cmdsn, n + 5);
	/* rejected behind a hole: used up when ExpCmdSN gets there */
	h_clear(&h);
	struct iscsi_hdr bad2 = h_cmd(&h, 0, false, 0, 1, 512, n + 6);
	h_rx(&h, &bad2, "data", 4);
	struct iscsi_hdr after = h_cmd(&h, 0, false, 0, 1, 512, n + 7);
	h_rx(&h, &after, NULL, 0);
	CHECK(h_status_of(&h, after.itt) == NULL); /* waits for n + 5 */
	struct iscsi_hdr fill = h_cmd(&h, 0, false, 0, 1, 512, n + 5);
	h_rx(&h, &fill, NULL, 0);
	CHECK(h_status_of(&h, fill.itt) != NULL);
	CHECK(h_status_of(&h, after.itt) != NULL);
	CHECK_EQ(h.tc->sess->exp_cmdsn, n + 8);
	h_teardown(&h);
}

/* RFC 7143 4.2.3.3 / 11.5.1: ABORT TASK of a task inside the backend is answered only after
 * the backend has finished it; the aborted task gets no SCSI Response. */
static void test_tmf_abort_task(void)
{
	struct harness h;

	printf("# ABORT TASK waits for the backend\n");
	H_SETUP(&h, "", NULL);
	struct iscsi_hdr rd = h_cmd(&h, 1, false, 100, 8, 4096, h.cmdsn++); /* delayed 60 ms */
	h_rx(&h, &rd, NULL, 0);
	CHECK_EQ(h.nrec, 0);
	struct iscsi_hdr tmf = {.opcode = ISCSI_OP_TMF_REQ, .final = true, .immediate = true,
				.itt = h.itt++};
	tmf.tmf_req.function = ISCSI_TMF_ABORT_TASK;
	tmf.tmf_req.lun = scsi_lun_encode(1);
	tmf.tmf_req.rtt = rd.itt;
	tmf.tmf_req.cmdsn = h.cmdsn;
	tmf.tmf_req.refcmdsn = rd.cmd.cmdsn;
	h_rx(&h, &tmf, NULL, 0);
	CHECK_EQ(h_count(&h, ISCSI_OP_TMF_RSP), 0); /* the READ is still in the backend */
	CHECK(h_run_until(&h, has_tmf_rsp, 5000));
	struct h_rec *r = h_find(&h, ISCSI_OP_TMF_RSP, 0);
	CHECK(r && r->h.itt == tmf.itt && r->h.tmf_rsp.response == ISCSI_TMF_RSP_COMPLETE);
	CHECK(h_status_of(&h, rd.itt) == NULL);
	CHECK_EQ(h_count(&h, ISCSI_OP_DATA_IN), 0);
	/* a task that is not there */
	h_clear(&h);
	tmf.itt = h.itt++;
	tmf.tmf_req.rtt = 0x7777;
	tmf.tmf_req.refcmdsn = 0;
	h_rx(&h, &tmf, NULL, 0);
	r = h_find(&h, ISCSI_OP_TMF_RSP, 0);
	CHECK(r && r->h.tmf_rsp.response == ISCSI_TMF_RSP_NO_TASK);
	h_teardown(&h);
}

/* RFC 7143 11.5.1: LUN RESET aborts every task of the LUN and is answered after the last one
 * has left the backend; other LUNs are untouched. */
static void test_tmf_lun_reset(void)
{
	struct harness h;

	printf("# LUN RESET waits for the backend\n");
	H_SETUP(&h, "", NULL);
	struct iscsi_hdr a = h_cmd(&h, 1, false, 100, 1, 512, h.cmdsn++);
	struct iscsi_hdr b = h_cmd(&h, 1, false, 104, 1, 512, h.cmdsn++);
	h_rx(&h, &a, NULL, 0);
	h_rx(&h, &b, NULL, 0);
	CHECK_EQ(h.nrec, 0);
	struct iscsi_hdr tmf = {.opcode = ISCSI_OP_TMF_REQ, .final = true, .immediate = true,
				.itt = h.itt++};
	tmf.tmf_req.function = ISCSI_TMF_LUN_RESET;
	tmf.tmf_req.lun = scsi_lun_encode(1);
	tmf.tmf_req.rtt = ISCSI_RSVD_TAG;
	tmf.tmf_req.cmdsn = h.cmdsn;
	h_rx(&h, &tmf, NULL, 0);
	CHECK_EQ(h_count(&h, ISCSI_OP_TMF_RSP), 0);
	/* LUN 0 keeps working meanwhile */
	struct iscsi_hdr c = h_cmd(&h, 0, false, 0, 1, 512, h.cmdsn++);
	h_rx(&h, &c, NULL, 0);
	CHECK(h_status_of(&h, c.itt) != NULL);
	CHECK(h_run_until(&h, has_tmf_rsp, 5000));
	struct h_rec *r = h_find(&h, ISCSI_OP_TMF_RSP, 0);
	CHECK(r && r->h.tmf_rsp.response == ISCSI_TMF_RSP_COMPLETE);
	CHECK(h_status_of(&h, a.itt) == NULL && h_status_of(&h, b.itt) == NULL);
	h_teardown(&h);
}

/* RFC 7143 11.7.2 / 11.7.4: Data-In of at most the initiator's MaxRecvDataSegmentLength, F at
 * each MaxBurstLength boundary, DataSN and offsets in order, the status in the last Data-In
 * (phase collapse) with no separate SCSI Response; StatSN advances once. */
static void test_data_in_collapse(void)
{
	struct harness h;
	uint8_t data[32768];

	printf("# Data-In: bursts and status collapse\n");
	fill(data, sizeof(data), 5);
	H_SETUP(&h, "", NULL);
	struct iscsi_hdr w = h_cmd(&h, 0, true, 400, 64, sizeof(data), h.cmdsn++);
	/* immediate 4096 + unsolicited 4096 + one R2T of 16384 + another R2T of 8192 */
	w.final = false;
	h_rx(&h, &w, data, 4096);
	h_data_out(&h, w.itt, ISCSI_RSVD_TAG, 0, 4096, data + 4096, 4096, true);
	for (int i = 0; i < 2; i++) {
		struct h_rec *r2t = h_find(&h, ISCSI_OP_R2T, i);
		if (!r2t)
			break;
		uint32_t off = r2t->h.r2t.offset, n = r2t->h.r2t.ddtl, ttt = r2t->h.r2t.ttt;
		for (uint32_t o = 0, sn = 0; o < n; o += 8192, sn++)
			h_data_out(&h, w.itt, ttt, sn, off + o, data + off + o, 8192, o + 8192 >= n);
	}
	CHECK(h_status_of(&h, w.itt) && h_status(h_status_of(&h, w.itt)) == SCSI_STATUS_GOOD);
	h_clear(&h);
	uint32_t statsn0 = h.tc->statsn;
	struct iscsi_hdr rd = h_cmd(&h, 0, false, 400, 64, sizeof(data), h.cmdsn++);
	h_rx(&h, &rd, NULL, 0);
	CHECK_EQ(h_count(&h, ISCSI_OP_DATA_IN), 8); /* 32768 / 4096 */
	CHECK_EQ(h_count(&h, ISCSI_OP_SCSI_RSP), 0);
	bool order = true, flags = true;
	for (int i = 0; i < 8; i++) {
		struct h_rec *d = h_find(&h, ISCSI_OP_DATA_IN, i);
		if (!d)
			break;
		order &= d->kind == H_PUT_DATA && d->h.data_in.datasn == (uint32_t)i &&
			 d->h.data_in.offset == (uint32_t)i * 4096 && d->len == 4096 &&
			 memcmp(d->data, data + i * 4096, 4096) == 0;
		/* MaxBurstLength 16384: F on the 4th and the 8th */
		flags &= d->h.final == (i == 3 || i == 7);
		flags &= d->h.data_in.status_present == (i == 7);
	}
	CHECK(order);
	CHECK(flags);
	struct h_rec *last = h_find(&h, ISCSI_OP_DATA_IN, 7);
	CHECK(last && last->h.data_in.status == SCSI_STATUS_GOOD && last->h.data_in.flags == 0);
	CHECK(last && last->h.data_in.statsn == statsn0);
	CHECK_EQ(h.tc->statsn, statsn0 + 1);
	h_teardown(&h);
}

/* RFC 7143 11.4.5.1: residual counts. EDTL above the transfer: U with the difference
 * (status collapsed); EDTL below: O with the excess, data cut at EDTL. A write with no data
 * transferred yet answered in a SCSI Response carries its own residual. */
static void test_residuals(void)
{
	struct harness h;

	printf("# residual over/underflow\n");
	H_SETUP(&h, "", NULL);
	struct iscsi_hdr under = h_cmd(&h, 0, false, 0, 1, 2048, h.cmdsn++);
	h_rx(&h, &under, NULL, 0);
	struct h_rec *s = h_status_of(&h, under.itt);
	CHECK(s && s->h.opcode == ISCSI_OP_DATA_IN && s->len == 512);
	CHECK(s && s->h.data_in.flags == ISCSI_FLAG_UNDERFLOW && s->h.data_in.residual == 1536);

	struct iscsi_hdr over = h_cmd(&h, 0, false, 0, 4, 1024, h.cmdsn++);
	h_rx(&h, &over, NULL, 0);
	s = h_status_of(&h, over.itt);
	uint32_t got = 0;
	for (int k = 0; k < h.nrec; k++)
		if (h.rec[k].h.opcode == ISCSI_OP_DATA_IN && h.rec[k].h.itt == over.itt)
			got += h.rec[k].len;
	CHECK_EQ(got, 1024);
	CHECK(s && s->h.data_in.flags == ISCSI_FLAG_OVERFLOW && s->h.data_in.residual == 1024);

	/* a WRITE whose EDTL exceeds the CDB's transfer: underflow in the SCSI Response */
	uint8_t data[1024] = {0};
	struct iscsi_hdr w = h_cmd(&h, 0, true, 0, 1, 1024, h.cmdsn++);
	h_rx(&h, &w, data, 1024);
	s = h_status_of(&h, w.itt);
	CHECK(s && s->h.opcode == ISCSI_OP_SCSI_RSP && s->h.rsp.flags == ISCSI_FLAG_UNDERFLOW &&
	      s->h.rsp.residual == 512);
	h_teardown(&h);
}

/* RFC 7143 11.18/11.19: a NOP-Out ping (ITT set) is echoed with its data in a NOP-In (TTT
 * reserved); with global.nop_interval_ms the target pings an idle initiator (NOP-In with a TTT,
 * ITT reserved), an answer keeps the connection, no answer within nop_timeout_ms ends it. */
static void test_nop(void)
{
	struct harness h;

	printf("# NOP-In / NOP-Out and the keepalive\n");
	H_SETUP(&h, "\"nop_interval_ms\": 30, \"nop_timeout_ms\": 40", NULL);
	struct iscsi_hdr ping = {.opcode = ISCSI_OP_NOP_OUT, .final = true, .immediate = true,
				 .itt = h.itt++};
	ping.nop_out.ttt = ISCSI_RSVD_TAG;
	ping.nop_out.cmdsn = h.cmdsn;
	h_rx(&h, &ping, "hello", 5);
	struct h_rec *r = h_find(&h, ISCSI_OP_NOP_IN, 0);
	CHECK(r && r->h.itt == ping.itt && r->h.nop_in.ttt == ISCSI_RSVD_TAG && r->len == 5 &&
	      memcmp(r->data, "hello", 5) == 0);
	h_clear(&h);
	/* idle: the target pings */
	CHECK(h_run_until(&h, has_ping, 5000));
	r = h_find(&h, ISCSI_OP_NOP_IN, 0);
	CHECK(r && r->h.itt == ISCSI_RSVD_TAG && r->h.nop_in.ttt != ISCSI_RSVD_TAG);
	CHECK_EQ(h.terminated, 0);
	if (r) {
		struct iscsi_hdr ans = {.opcode = ISCSI_OP_NOP_OUT, .final = true,
					.immediate = true, .itt = ISCSI_RSVD_TAG};
		uint32_t ttt = r->h.nop_in.ttt;

		ans.nop_out.ttt = ttt;
		ans.nop_out.cmdsn = h.cmdsn;
		h_clear(&h);
		h_rx(&h, &ans, NULL, 0);
		/* answered: the next thing is another ping after an idle interval, not a close */
		CHECK(h_run_until(&h, has_ping, 5000));
		CHECK_EQ(h.terminated, 0);
		r = h_find(&h, ISCSI_OP_NOP_IN, 0);
		CHECK(r && r->h.nop_in.ttt != ttt);
	}
	/* not answered: closed after nop_timeout_ms */
	CHECK(h_run_until(&h, is_closed, 5000));
	CHECK_EQ(h.terminated, 1);
	h_teardown(&h);
}

/* RFC 7143 11.14/11.15: Logout (close the session) is answered OK, then the connection is
 * closed once the response is out; PDUs after it are ignored. A logout for another CID is
 * answered "CID not found". */
static void test_logout(void)
{
	struct harness h;

	printf("# Logout\n");
	H_SETUP(&h, "", NULL);
	struct iscsi_hdr lo = {.opcode = ISCSI_OP_LOGOUT_REQ, .final = true, .itt = h.itt++};
	lo.logout_req.reason = ISCSI_LOGOUT_CLOSE_CONNECTION;
	lo.logout_req.cid = 7; /* ours is 0 */
	lo.logout_req.cmdsn = h.cmdsn++;
	h_rx(&h, &lo, NULL, 0);
	struct h_rec *r = h_find(&h, ISCSI_OP_LOGOUT_RSP, 0);
	CHECK(r && r->h.logout_rsp.response == ISCSI_LOGOUT_RSP_CID_NOT_FOUND);
	CHECK_EQ(h.terminated, 0);
	CHECK_EQ(h.tc->sess->exp_cmdsn, h.cmdsn);
	h_clear(&h);
	lo.itt = h.itt++;
	lo.logout_req.reason = ISCSI_LOGOUT_CLOSE_SESSION;
	lo.logout_req.cmdsn = h.cmdsn++;
	h_rx(&h, &lo, NULL, 0);
	r = h_find(&h, ISCSI_OP_LOGOUT_RSP, 0);
	CHECK(r && r->h.itt == lo.itt && r->h.logout_rsp.response == ISCSI_LOGOUT_RSP_OK);
	CHECK(r && r->h.logout_rsp.statsn + 1 == h.tc->statsn);
	CHECK_EQ(h.terminated, 1);
	h_teardown(&h);
}

/* RFC 7143 11.13.5 / 6.2: a redirected target answers the first Login Request with status
 * class 1 (0x0101 temporarily, 0x0102 permanently) and TargetAddress in the text, before
 * any authentication (the target below requires CHAP; the initiator offers none), then
 * closes; ix's initiator reads the address from it (-EXDEV). An initiator the ACL refuses
 * gets 0x0202, not the address. */
static void redirect_case(const char *target_extra, const char *ini, uint16_t want_status,
			  const char *want_addr)
{
	struct harness h;
	struct login_init_req req;
	struct login_init_cfg lc = {
		.initiator_name = ini,
		.target_name = H_TARGET,
		.type = ISCSI_SESSION_NORMAL,
		.isid = {0x80, 0, 0, 0, 0, 2},
		.cmdsn = 1,
	};

	memset(&h, 0, sizeof(h));
	h_prefs_default(&h.prefs);
	lc.prefs = &h.prefs;
	h.target_extra = target_extra;
	if (h_target(&h, "") < 0 || h_connect(&h) < 0 ||
	    login_initiator_init(&h.li, &lc) < 0 || login_initiator_next(&h.li, &req) < 0) {
		CHECK(!"set-up");
		h_teardown(&h);
		return;
	}
	req.hdr.itt = 0x1000;
	h_rx(&h, &req.hdr, req.text, req.text_len);
	h_idle(&h);
	struct h_rec *r = h_find(&h, ISCSI_OP_LOGIN_RSP, 0);
	CHECK(r != NULL);
	if (r) {
		char want[300];
		int n = snprintf(want, sizeof(want), "TargetAddress=%s", want_addr ? want_addr : "");

		CHECK_EQ(r->h.login_rsp.status, want_status);
		if (want_status)
			CHECK_EQ(r->h.login_rsp.transit, 0);
		if (want_addr) {
			CHECK(r->len == (uint32_t)n + 1 && memcmp(r->data, want, (size_t)n + 1) == 0);
			CHECK_EQ(login_initiator_recv(&h.li, &r->h, r->data, r->len), -EXDEV);
			CHECK_STR(h.li.redirect, want_addr);
		} else {
			CHECK(r->len == 0 || !memmem(r->data, r->len, "TargetAddress", 13));
		}
	}
	CHECK_EQ(h.terminated, want_status ? 1 : 0);
	CHECK(h.tc == NULL || h.tc->sess == NULL);
	login_initiator_clear(&h.li);
	h_teardown(&h);
}

static void test_redirect(void)
{
	printf("# login redirection\n");
	redirect_case("\"chap\": {\"user\": \"u\", \"secret\": \"0123456789abcdef\"}, "
		      "\"redirect\": {\"address\": \"192.0.2.7:3261,3\"}",
		      "iqn.2026-11.io.ix:unit-ini", ISCSI_LOGIN_TARGET_MOVED_TEMP,
		      "192.0.2.7:3261,3");
	redirect_case("\"redirect\": {\"address\": \"[2001:db8::5]\", \"permanent\": true}",
		      "iqn.2026-11.io.ix:unit-ini", ISCSI_LOGIN_TARGET_MOVED_PERM,
		      "[2001:db8::5]:3260");
	redirect_case("\"acls\": [{\"initiator\": \"iqn.2026-11.io.ix:other\"}], "
		      "\"redirect\": {\"address\": \"gw-b.example:3260\"}",
		      "iqn.2026-11.io.ix:unit-ini", ISCSI_LOGIN_AUTHORIZATION_FAILED, NULL);
	/* only on portal "p" (the one the harness's connection arrives at): redirected */
	redirect_case("\"redirect\": {\"address\": \"192.0.2.7\", \"portals\": [\"p\"]}",
		      "iqn.2026-11.io.ix:unit-ini", ISCSI_LOGIN_TARGET_MOVED_TEMP,
		      "192.0.2.7:3260");
	/* HA (redirect.owners): this gateway's group 1 (portal "p") standby, gateway 2's group
	   active/optimized: sent to group 2's portal; this gateway active: served here */
#define OWNERS(s1, s2)                                                                             \
	"\"alua\": {\"groups\": [{\"id\": 1, \"state\": \"" s1 "\", \"portals\": [\"p\"]}, "              \
	"{\"id\": 2, \"state\": \"" s2 "\", \"relative_ports\": [2]}]}, "                          \
	"\"redirect\": {\"owners\": [{\"group\": 2, \"address\": \"192.0.2.8:3260,2\"}]}"
	redirect_case(OWNERS("standby", "active/optimized"), "iqn.2026-11.io.ix:unit-ini",
		      ISCSI_LOGIN_TARGET_MOVED_TEMP, "192.0.2.8:3260,2");
	redirect_case(OWNERS("unavailable", "active/optimized"), "iqn.2026-11.io.ix:unit-ini",
		      ISCSI_LOGIN_TARGET_MOVED_TEMP, "192.0.2.8:3260,2");
	redirect_case(OWNERS("active/optimized", "standby"), "iqn.2026-11.io.ix:unit-ini", 0,
		      NULL);
	redirect_case(OWNERS("standby", "standby"), "iqn.2026-11.io.ix:unit-ini", 0, NULL);
#undef OWNERS
	/* addresses: in turn, login after login (the counter lives in the target's node) */
	{
		static const char *const want[] = {"192.0.2.21:3260", "192.0.2.22:3260,2",
						   "192.0.2.21:3260"};
		struct harness h;

		memset(&h, 0, sizeof(h));
		h_prefs_default(&h.prefs);
		h.target_extra = "\"redirect\": {\"addresses\": [\"192.0.2.21\", "
				 "\"192.0.2.22:3260,2\"]}";
		if (h_target(&h, "") < 0) {
			CHECK(!"set-up");
			h_teardown(&h);
			return;
		}
		for (int k = 0; k < 3; k++) {
			struct login_init_req req;
			struct login_init_cfg lc = {.initiator_name = "iqn.2026-11.io.ix:unit-ini",
						    .target_name = H_TARGET,
						    .type = ISCSI_SESSION_NORMAL,
						    .isid = {0x80, 0, 0, 0, 0, 3},
						    .cmdsn = 1,
						    .prefs = &h.prefs};
			char exp[64];
			int n;

			if (h.c) {
				iscsi_conn_put(h.c);
				h.c = NULL;
			}
			h_clear(&h);
			if (h_connect(&h) < 0 || login_initiator_init(&h.li, &lc) < 0 ||
			    login_initiator_next(&h.li, &req) < 0) {
				CHECK(!"connect");
				break;
			}
			req.hdr.itt = 0x1000;
			h_rx(&h, &req.hdr, req.text, req.text_len);
			h_idle(&h);
			struct h_rec *r = h_find(&h, ISCSI_OP_LOGIN_RSP, 0);
			n = snprintf(exp, sizeof(exp), "TargetAddress=%s", want[k]);
			CHECK(r && r->h.login_rsp.status == ISCSI_LOGIN_TARGET_MOVED_TEMP &&
			      r->len == (uint32_t)n + 1 && memcmp(r->data, exp, (size_t)n + 1) == 0);
			login_initiator_clear(&h.li);
		}
		h_teardown(&h);
	}
}

/* Mutual CHAP per ACL (acls[].mutual_chap): the target proves the ACL's own credential to
 * that initiator, the target's mutual_chap to the others; the initiator (session/auth.c)
 * refuses a target that proves another secret. */
static int chap_login(const char *target_extra, const char *mutual_user,
		      const char *mutual_secret)
{
	struct harness h;
	struct auth_creds cr = {.required = true,
				.user = "ini",
				.secret = (const uint8_t *)"ini-secret-0123",
				.secret_len = 15,
				.mutual_user = mutual_user,
				.mutual_secret = (const uint8_t *)mutual_secret,
				.mutual_secret_len = strlen(mutual_secret)};
	int r;

	memset(&h, 0, sizeof(h));
	h_prefs_default(&h.prefs);
	h.target_extra = target_extra;
	h.creds = &cr;
	r = h_target(&h, "");
	if (r == 0)
		r = h_connect(&h);
	if (r == 0)
		r = h_login(&h);
	if (r == 0 && (!h.tc || !h.tc->sess))
		r = -EPROTO;
	h_teardown(&h);
	return r;
}

static void test_acl_mutual_chap(void)
{
#define ACL(m)                                                                                   \
	"\"mutual_chap\": {\"user\": \"tgt\", \"secret\": \"target-secret-01\"}, "          \
	"\"acls\": [{\"initiator\": \"iqn.2026-11.io.ix:unit-ini\", "                           \
	"\"chap\": {\"user\": \"ini\", \"secret\": \"ini-secret-0123\"}" m "}]"
	printf("# mutual CHAP per ACL\n");
	CHECK_EQ(chap_login(ACL(", \"mutual_chap\": {\"user\": \"acl-tgt\", "
				 "\"secret\": \"acl-mutual-sec\"}"),
			    "acl-tgt", "acl-mutual-sec"),
		 0);
	/* the ACL's credential replaces the target's: the target's name and secret are not
	   what it proves */
	CHECK(chap_login(ACL(", \"mutual_chap\": {\"user\": \"acl-tgt\", "
			     "\"secret\": \"acl-mutual-sec\"}"),
			 "tgt", "target-secret-01") < 0);
	CHECK(chap_login(ACL(", \"mutual_chap\": {\"user\": \"acl-tgt\", "
			     "\"secret\": \"acl-mutual-sec\"}"),
			 "acl-tgt", "target-secret-01") < 0);
	/* no ACL mutual_chap: the target's */
	CHECK_EQ(chap_login(ACL(""), "tgt", "target-secret-01"), 0);
	CHECK(chap_login(ACL(""), "acl-tgt", "acl-mutual-sec") < 0);
#undef ACL
}

/* Giving back after a quiet period (global.idle_release_ms, tgt_task.c): the wait policy; a
 * busy session's second chunk of task slots, PDU descriptors beyond the first chunk and its
 * data buffers are freed once no command has come for the period, never a slot in use; after
 * that the next commands allocate again and work. */
#define TRIM_QUIET_MS 200
static uint32_t trim_itts[16];
static int trim_n;

static bool trim_answered(struct harness *h)
{
	for (int i = 0; i < trim_n; i++)
		if (!h_status_of(h, trim_itts[i]))
			return false;
	return true;
}

static bool trimmed(struct harness *h)
{
	return !h->tc->trim_due;
}

/* Turn the loop until h_mono_ms() reaches until_ms: false if the connection gave memory back
 * (the worker's count moved from trims) before then, or in a loop turn whose clock was less
 * than the quiet period after the last command. */
static bool kept_until(struct harness *h, uint64_t until_ms, uint64_t trims)
{
	for (;;) {
		uint64_t last = h->tc->last_cmd_ns;

		ev_loop_run_once(h->w->loop, 1);
		bool kept = h->w->trims == trims;
		uint64_t now = h_mono_ms();

		if (!kept)
			return now >= until_ms &&
			       ev_now_ns(h->w->loop) - last >= (uint64_t)TRIM_QUIET_MS * 1000000;
		if (now >= until_ms)
			return true;
	}
}

/* 8 READs in the window and 4 immediate ones of LUN 1's slow blocks: 12 slots in use. */
static void trim_busy(struct harness *h)
{
	trim_n = 0;
	for (int i = 0; i < 12; i++) {
		struct iscsi_hdr c = h_cmd(h, 1, false, 100, 8, 4096, i < 8 ? h->cmdsn++ : h->cmdsn);

		c.immediate = i >= 8;
		trim_itts[trim_n++] = c.itt;
		h_rx(h, &c, NULL, 0);
	}
}

static void test_idle_release(void)
{
	struct harness h;
	uint8_t data[8192];

	printf("# idle_release_ms: pooled memory given back after a quiet period\n");
	CHECK_EQ(tgt_trim_wait_ms(5000000000ull, 5000000000ull, 200), 200);
	CHECK_EQ(tgt_trim_wait_ms(5150000000ull, 5000000000ull, 200), 50);
	CHECK_EQ(tgt_trim_wait_ms(5149999999ull, 5000000000ull, 200), 51); /* rounded up */
	CHECK_EQ(tgt_trim_wait_ms(5200000000ull, 5000000000ull, 200), 0);
	CHECK_EQ(tgt_trim_wait_ms(9000000000ull, 5000000000ull, 200), 0);
	H_SETUP(&h, "\"idle_release_ms\": " "200", NULL);
	CHECK_EQ(h.tc->ntasks, TGT_TASK_CHUNK); /* the TEST UNIT READYs of the set-up */
	CHECK(!h.tc->trim_due);
	CHECK(!ev_timer_pending(&h.w->trim_timer));
	for (int round = 0; round < 2; round++) {
		/* an 8 KiB write (a data buffer) and a 128 KiB read (32 Data-In PDUs queued) */
		fill(data, sizeof(data), (uint8_t)(9 + round));
		struct iscsi_hdr w = h_cmd(&h, 0, true, 20, 16, sizeof(data), h.cmdsn++);
		h_rx(&h, &w, data, sizeof(data));
		CHECK(h_status_of(&h, w.itt) && h_status(h_status_of(&h, w.itt)) == 0);
		struct iscsi_hdr rd = h_cmd(&h, 0, false, 256, 256, 131072, h.cmdsn++);
		h_rx(&h, &rd, NULL, 0);
		CHECK(h_status_of(&h, rd.itt) != NULL);
		CHECK(h.tc->buf_bytes > 0);
		CHECK(h.c->tx_pooled > ISCSI_CONN_TXCHUNK);
		/* the loop's clock at the commands is at least t0 (CLOCK_MONOTONIC both) */
		uint64_t t0 = h_mono_ms();
		ev_loop_run_once(h.w->loop, 0);
		trim_busy(&h);
		CHECK_EQ(h.tc->ntasks, 2 * TGT_TASK_CHUNK);
		CHECK(h.tc->trim_due);
		CHECK(ev_timer_pending(&h.w->trim_timer));
		/* the slow READs are in the backend: nothing of theirs goes, both chunks hold some */
		CHECK(!trim_answered(&h));
		CHECK(!tgt_conn_trim(h.tc));
		CHECK_EQ(h.tc->ntasks, 2 * TGT_TASK_CHUNK);
		uint64_t trims0 = h.w->trims; /* (that call gave back the free slot's buffer) */
		CHECK(h_run_until(&h, trim_answered, 60 * 50));
		bool good = true;
		for (int i = 0; i < trim_n; i++) {
			struct h_rec *r = h_status_of(&h, trim_itts[i]);

			good &= r && h_status(r) == SCSI_STATUS_GOOD;
		}
		CHECK(good);
		h_clear(&h);
		/* halfway through the quiet period one more command (on a free slot) starts it
		   again: nothing goes before a whole period after it */
		CHECK(h.w->trims == trims0 || h_mono_ms() >= t0 + TRIM_QUIET_MS);
		CHECK(kept_until(&h, t0 + TRIM_QUIET_MS / 2, trims0));
		uint64_t t1 = h_mono_ms();
		ev_loop_run_once(h.w->loop, 0);
		struct iscsi_hdr tur = {.opcode = ISCSI_OP_SCSI_CMD, .final = true, .itt = h.itt++};
		tur.cmd.attr = ISCSI_ATTR_SIMPLE;
		tur.cmd.cmdsn = h.cmdsn++;
		h_rx(&h, &tur, NULL, 0);
		CHECK(h_status_of(&h, tur.itt) && h_status(h_status_of(&h, tur.itt)) == 0);
		CHECK(kept_until(&h, t1 + TRIM_QUIET_MS, trims0));
		h_clear(&h);
		uint64_t last = h.tc->last_cmd_ns, trims = trims0;
		/* the timer gives it back (bounded by 50 periods: a loaded machine) */
		CHECK(h_run_until(&h, trimmed, TRIM_QUIET_MS * 50));
		CHECK(ev_now_ns(h.w->loop) - last >= (uint64_t)TRIM_QUIET_MS * 1000000);
		CHECK_EQ(h.tc->ntasks, TGT_TASK_CHUNK);
		CHECK_EQ(h.c->tx_pooled, ISCSI_CONN_TXCHUNK);
		CHECK_EQ(h.tc->buf_bytes, 0);
		CHECK_EQ(h.w->trims, trims + 1);
		CHECK(!ev_timer_pending(&h.w->trim_timer)); /* nothing runs while all is idle */
		/* and the session works as before */
		fill(data, sizeof(data), (uint8_t)(40 + round));
		struct iscsi_hdr w2 = h_cmd(&h, 0, true, 30, 16, sizeof(data), h.cmdsn++);
		h_rx(&h, &w2, data, sizeof(data));
		CHECK(h_status_of(&h, w2.itt) && h_status(h_status_of(&h, w2.itt)) == 0);
		CHECK(read_back(&h, 30, data, sizeof(data)));
		h_clear(&h);
	}
	h_teardown(&h);
}

int main(void)
{
	ix_log_set_level(getenv("IX_TEST_VERBOSE") ? 4 : 0);
	test_login();
	test_write_unsolicited_r2t();
	test_write_initial_r2t();
	test_write_bad_data_out();
	test_cmdsn_hole();
	test_cmdsn_window();
	test_cmdsn_immediate();
	test_cmdsn_used_ahead();
	test_tmf_abort_task();
	test_tmf_lun_reset();
	test_data_in_collapse();
	test_residuals();
	test_nop();
	test_logout();
	test_redirect();
	test_acl_mutual_chap();
	test_idle_release();
	return tap_done();
}
