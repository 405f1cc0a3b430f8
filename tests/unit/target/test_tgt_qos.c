/* The QoS queue of a worker (src/target/tgt_qos.c) through the target harness (tgt_harness.h):
 * a limited LUN's READs wait and are released in order by the worker's timer while other
 * commands pass; a waiting READ ends on ABORT TASK, on an abort by another nexus (answered
 * TASK ABORTED, then gone from the queue) and on LUN RESET; a raised limit releases waiting
 * READs at once. Real time: the limits are chosen so that the waits are 100 ms or more. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tgt_harness.h"
#include "util/log.h"

#define H_SETUP(h, extra, prefs)                                                                   \
	do {                                                                                       \
		int _r = h_setup((h), (extra), (prefs));                                           \
		CHECK_EQ(_r, 0);                                                                   \
		if (_r) {                                                                          \
			h_teardown(h);                                                             \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* LUN 0's read limit (0: none), as a reload would set it. */
static void set_read_iops(struct harness *h, uint64_t iops)
{
	struct tgt_node *n = h->tc->sess->node;
	struct cfg_target *ct = n->cfg;

	for (size_t i = 0; i < ct->nluns; i++)
		if (ct->luns[i].lun == 0)
			ct->luns[i].qos = (struct cfg_qos){.limit = {[CFG_QOS_READ_IOPS] = iops}};
	CHECK_EQ(tgt_qos_apply(h->tgt, n, ct), 0);
}

static uint32_t want_itt;

static bool has_status(struct harness *h)
{
	return h_status_of(h, want_itt) != NULL;
}

static int index_of(struct harness *h, uint32_t itt)
{
	for (int k = 0; k < h->nrec; k++)
		if (h->rec[k].h.itt == itt &&
		    (h->rec[k].h.opcode == ISCSI_OP_SCSI_RSP ||
		     (h->rec[k].h.opcode == ISCSI_OP_DATA_IN && h->rec[k].h.data_in.status_present)))
			return k;
	return -1;
}

static void test_wait_and_release(void)
{
	struct harness h;
	struct iscsi_hdr r[3];

	printf("# READs over the limit wait, in order; other commands pass\n");
	H_SETUP(&h, "", NULL);
	set_read_iops(&h, 10); /* 100 ms apart */
	CHECK(atomic_load(&h.tc->sess->node->qos_on));
	uint64_t t0 = h_mono_ms();
	for (int i = 0; i < 3; i++) {
		r[i] = h_cmd(&h, 0, false, (uint32_t)i, 1, 512, h.cmdsn++);
		h_rx(&h, &r[i], NULL, 0);
	}
	CHECK(h_status_of(&h, r[0].itt) != NULL);
	CHECK(h_status_of(&h, r[1].itt) == NULL && h_status_of(&h, r[2].itt) == NULL);
	/* an unlimited LUN and a command that is not I/O go at once */
	struct iscsi_hdr o = h_cmd(&h, 1, false, 0, 1, 512, h.cmdsn++);
	h_rx(&h, &o, NULL, 0);
	CHECK(h_status_of(&h, o.itt) != NULL);
	struct iscsi_hdr tur = {.opcode = ISCSI_OP_SCSI_CMD, .final = true, .itt = h.itt++};
	tur.cmd.attr = ISCSI_ATTR_SIMPLE;
	tur.cmd.lun = scsi_lun_encode(0);
	tur.cmd.cmdsn = h.cmdsn++;
	h_rx(&h, &tur, NULL, 0);
	CHECK(h_status_of(&h, tur.itt) != NULL);
	want_itt = r[2].itt;
	CHECK(h_run_until(&h, has_status, 2000));
	uint64_t took = h_mono_ms() - t0;
	printf("# the third READ after %llu ms\n", (unsigned long long)took);
	CHECK(took >= 190 && took < 1500);
	CHECK(index_of(&h, r[1].itt) >= 0 && index_of(&h, r[1].itt) < index_of(&h, r[2].itt));
	CHECK(list_empty(&h.w->qos.queue));
	h_teardown(&h);
}

static void test_aborts(void)
{
	struct harness h;
	struct iscsi_hdr r[4];

	printf("# waiting READs end on ABORT TASK, an abort by another nexus, LUN RESET\n");
	H_SETUP(&h, "", NULL);
	set_read_iops(&h, 2); /* 500 ms apart */
	for (int i = 0; i < 4; i++) {
		r[i] = h_cmd(&h, 0, false, (uint32_t)i, 1, 512, h.cmdsn++);
		h_rx(&h, &r[i], NULL, 0);
	}
	CHECK(h_status_of(&h, r[0].itt) != NULL);
	struct tgt_task *t = tgt_task_find(h.tc, r[1].itt);
	CHECK(t && t->state == TASK_QOS_WAIT && t->qos_queued);
	/* ABORT TASK of r[3] */
	struct iscsi_hdr tmf = {.opcode = ISCSI_OP_TMF_REQ, .final = true, .immediate = true,
				.itt = h.itt++};
	tmf.tmf_req.function = ISCSI_TMF_ABORT_TASK;
	tmf.tmf_req.lun = scsi_lun_encode(0);
	tmf.tmf_req.rtt = r[3].itt;
	tmf.tmf_req.cmdsn = h.cmdsn;
	tmf.tmf_req.refcmdsn = r[3].cmd.cmdsn;
	h_rx(&h, &tmf, NULL, 0);
	struct h_rec *rsp = h_find(&h, ISCSI_OP_TMF_RSP, 0);
	CHECK(rsp && rsp->h.tmf_rsp.response == ISCSI_TMF_RSP_COMPLETE);
	CHECK(tgt_task_find(h.tc, r[3].itt) == NULL);
	/* r[1] aborted by another nexus (as PREEMPT AND ABORT does): TASK ABORTED at once */
	if (t)
		tgt_task_abort_now(t);
	struct h_rec *st = h_status_of(&h, r[1].itt);
	CHECK(st && st->h.rsp.status == SCSI_STATUS_TASK_ABORTED);
	CHECK(tgt_task_find(h.tc, r[1].itt) == NULL);
	/* LUN RESET: r[2], still waiting, ends unanswered; the queue is empty */
	h_clear(&h);
	tmf.itt = h.itt++;
	tmf.tmf_req.function = ISCSI_TMF_LUN_RESET;
	tmf.tmf_req.rtt = ISCSI_RSVD_TAG;
	h_rx(&h, &tmf, NULL, 0);
	rsp = h_find(&h, ISCSI_OP_TMF_RSP, 0);
	CHECK(rsp && rsp->h.tmf_rsp.response == ISCSI_TMF_RSP_COMPLETE);
	CHECK(list_empty(&h.w->qos.queue));
	want_itt = r[2].itt;
	CHECK(!h_run_until(&h, has_status, 700));
	/* a READ waiting when the connection ends: freed with it (the teardown) */
	struct iscsi_hdr last = h_cmd(&h, 0, false, 9, 1, 512, h.cmdsn++);
	h_rx(&h, &last, NULL, 0);
	CHECK(h_status_of(&h, last.itt) == NULL);
	h_teardown(&h);
}

static void test_raise(void)
{
	struct harness h;
	struct iscsi_hdr r[2];

	printf("# a raised limit releases the waiting READs at once\n");
	H_SETUP(&h, "", NULL);
	set_read_iops(&h, 1); /* 1 s apart */
	for (int i = 0; i < 2; i++) {
		r[i] = h_cmd(&h, 0, false, (uint32_t)i, 1, 512, h.cmdsn++);
		h_rx(&h, &r[i], NULL, 0);
	}
	CHECK(h_status_of(&h, r[1].itt) == NULL);
	uint64_t t0 = h_mono_ms();
	set_read_iops(&h, 0); /* no limit: the replan message releases it */
	want_itt = r[1].itt;
	CHECK(h_run_until(&h, has_status, 2000));
	printf("# released %llu ms after the change\n", (unsigned long long)(h_mono_ms() - t0));
	CHECK(h_mono_ms() - t0 < 500);
	CHECK(!atomic_load(&h.tc->sess->node->qos_on));
	h_teardown(&h);
}

/* (harness helpers this file does not need) */
__attribute__((unused)) static void harness_unused(void)
{
	(void)h_sense_asc, (void)h_sense_key, (void)h_status, (void)h_data_out, (void)h_count;
}

int main(void)
{
	ix_log_set_level(getenv("IX_TEST_VERBOSE") ? 4 : 0);
	test_wait_and_release();
	test_aborts();
	test_raise();
	return tap_done();
}
