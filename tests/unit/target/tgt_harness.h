/* A target connection without the daemon: a struct ix_target built from a configuration whose
 * portal list the harness empties (so ix_target_new listens nowhere), one worker whose event
 * loop the test turns itself (single-threaded, ev_loop_run_once until idle), and a recording
 * fake datamover. The fake is accepted through dm_accept() like a transport's connection
 * request; every PDU the target hands it (Send_Control, Put_Data, Get_Data) is decoded with
 * iscsi_hdr_unpack and appended to h->rec[] with a copy of its data, and completes (sent())
 * from a deferred call on the loop, as TCP's flush does. Input goes in through the
 * dm_rx_header / dm_rx_pdu upcalls exactly as a transport makes them.
 *
 * Login is real: session/login_init.c plays the initiator, with the keys the test chooses. */
#ifndef IX_TESTS_TGT_HARNESS_H
#define IX_TESTS_TGT_HARNESS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session/login_init.h"
#include "target/tgt_int.h"

#define H_MAX_REC 512

enum h_kind { H_CONTROL, H_PUT_DATA, H_GET_DATA };

struct h_rec {
	enum h_kind kind;
	struct iscsi_hdr h;
	uint8_t *data;
	uint32_t len;
};

struct h_fake_conn {
	struct ev_defer flush;
	bool flush_pending;
	struct list_head txq; /* recorded, sent() not yet called */
};

struct harness {
	struct ix_target *tgt;
	struct tgt_worker *w;
	struct cfg_portal portal;
	struct iscsi_conn *c; /* with the harness's own reference */
	struct tgt_conn *tc;
	struct h_rec rec[H_MAX_REC];
	int nrec;
	int enabled, terminated; /* enable() / terminate() calls */
	int rx_err;              /* last dm_rx_header failure */
	uint32_t cmdsn, expstatsn, itt;
	struct login_initiator li;
	struct neg_prefs prefs;  /* the initiator's */
	const char *target_extra; /* more members of the target (JSON, no leading comma) */
	const struct auth_creds *creds; /* the initiator's CHAP credentials (NULL: none) */
};

static struct harness *h_cur; /* the fake datamover's recorder (single-threaded) */

static struct h_fake_conn *h_fc(struct iscsi_conn *c)
{
	return iscsi_conn_priv(c);
}

static void h_flush(void *arg)
{
	struct iscsi_conn *c = arg;
	struct h_fake_conn *fc = h_fc(c);

	fc->flush_pending = false;
	while (!list_empty(&fc->txq)) {
		struct dm_txpdu *p = list_first_entry(&fc->txq, struct dm_txpdu, link);

		list_del(&p->link);
		p->sent(p, 0);
	}
	iscsi_conn_put(c);
}

static int h_queue(struct iscsi_conn *c, struct dm_txpdu *p, enum h_kind kind)
{
	struct h_fake_conn *fc = h_fc(c);
	struct h_rec *r;
	uint32_t off = 0;

	if (c->terminated) {
		p->sent(p, -ECONNABORTED);
		return -ECONNABORTED;
	}
	if (h_cur->nrec < H_MAX_REC) {
		r = &h_cur->rec[h_cur->nrec++];
		r->kind = kind;
		iscsi_hdr_unpack(p->bhs, &r->h);
		r->len = p->data_len;
		r->data = malloc(p->data_len + 1);
		for (int i = 0; i < p->data_cnt; i++) {
			memcpy(r->data + off, p->data[i].iov_base, p->data[i].iov_len);
			off += (uint32_t)p->data[i].iov_len;
		}
	}
	list_add_tail(&p->link, &fc->txq);
	if (!fc->flush_pending) {
		fc->flush_pending = true;
		iscsi_conn_get(c);
		ev_defer(c->loop, &fc->flush, h_flush, c);
	}
	return 0;
}

static int h_send_control(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return h_queue(c, p, H_CONTROL);
}

static int h_put_data(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return h_queue(c, p, H_PUT_DATA);
}

static int h_get_data(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return h_queue(c, p, H_GET_DATA);
}

static void h_enable(struct iscsi_conn *c, const struct iscsi_conn_params *cp)
{
	(void)c;
	(void)cp;
	h_cur->enabled++;
}

static void h_terminate(struct iscsi_conn *c)
{
	struct h_fake_conn *fc = h_fc(c);

	h_cur->terminated++;
	while (!list_empty(&fc->txq)) {
		struct dm_txpdu *p = list_first_entry(&fc->txq, struct dm_txpdu, link);

		list_del(&p->link);
		p->sent(p, -ECONNABORTED);
	}
	iscsi_conn_put(c); /* the transport's own reference */
}

static bool h_tx_busy(struct iscsi_conn *c)
{
	return !list_empty(&h_fc(c)->txq);
}

static struct iscsi_conn *h_accept(struct dm_incoming *in, const struct dm_conn_setup *cs)
{
	struct iscsi_conn *c = iscsi_conn_new(cs->as ? cs->as : in->dm, cs->loop, cs->role,
					      cs->ops, cs->role_priv);

	if (!c)
		return NULL;
	snprintf(c->peer, sizeof(c->peer), "%s", in->peer);
	snprintf(c->local, sizeof(c->local), "fake:3260");
	list_init(&h_fc(c)->txq);
	return c;
}

static void h_reject(struct dm_incoming *in)
{
	(void)in;
}

static const struct dm_ops h_dm_ops = {
	.name = "fake",
	.caps = DM_CAP_DIGESTS,
	.conn_priv_size = sizeof(struct h_fake_conn),
	.send_control = h_send_control,
	.put_data = h_put_data,
	.get_data = h_get_data,
	.enable = h_enable,
	.terminate = h_terminate,
	.tx_busy = h_tx_busy,
	.accept = h_accept,
	.reject = h_reject,
};

/* Turn the worker's loop until nothing is left to do now (timers in the future stay). */
static void h_idle(struct harness *h)
{
	for (int quiet = 0, k = 0; quiet < 2 && k < 10000; k++)
		quiet = ev_loop_run_once(h->w->loop, 0) == 0 ? quiet + 1 : 0;
}

static uint64_t h_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Turn the loop (real time: timers, delayed backend I/O) until done(h) holds, at most max_ms.
 * True if it came to hold. */
static bool h_run_until(struct harness *h, bool (*done)(struct harness *h), unsigned max_ms)
{
	uint64_t end = h_mono_ms() + max_ms;

	while (!done(h) && h_mono_ms() < end)
		ev_loop_run_once(h->w->loop, 2);
	h_idle(h);
	return done(h);
}

/* Feed one PDU from the initiator, as a transport does. Returns dm_rx_header's result (the
 * connection is failed on an error, as a transport would). */
static int h_rx(struct harness *h, struct iscsi_hdr *hdr, const void *data, uint32_t len)
{
	uint8_t bhs[ISCSI_BHS_LEN];
	struct dm_rx_place place;
	int r;

	hdr->dlength = len;
	if (iscsi_hdr_pack(hdr, bhs) < 0)
		return -EINVAL;
	if (h->c->terminated)
		return -ECONNABORTED;
	r = dm_rx_header(h->c, bhs, NULL, 0, &place);
	if (r < 0) {
		h->rx_err = r;
		dm_conn_failed(h->c, r);
		return r;
	}
	if (place.buf && len)
		memcpy(place.buf, data, len);
	dm_rx_pdu(h->c, true);
	h_idle(h);
	return 0;
}

static void h_clear(struct harness *h)
{
	for (int i = 0; i < h->nrec; i++)
		free(h->rec[i].data);
	h->nrec = 0;
}

/* The i-th recorded PDU of opcode op (NULL if fewer). */
static struct h_rec *h_find(struct harness *h, uint8_t op, int i)
{
	for (int k = 0; k < h->nrec; k++)
		if (h->rec[k].h.opcode == op && i-- == 0)
			return &h->rec[k];
	return NULL;
}

static int h_count(struct harness *h, uint8_t op)
{
	int n = 0;

	for (int k = 0; k < h->nrec; k++)
		n += h->rec[k].h.opcode == op;
	return n;
}

#define H_TARGET "iqn.2026-11.io.ix:unit"

/* A target with LUN 0 (RAM, 1 MiB, 512-byte blocks) and LUN 1 (the error backend: RAM whose
 * I/O to LBAs 100..107 completes 60 ms late). global_extra: more "global" members (JSON,
 * may be empty, no leading comma). */
static int h_target(struct harness *h, const char *global_extra)
{
	char json[2048], err[256];
	struct ix_config *cfg;
	int r;

	snprintf(json, sizeof(json),
		 "{\"version\": 1, \"global\": {\"threads\": 1, \"cmdsn_depth\": 8, "
		 "\"negotiation\": {\"initial_r2t\": false, \"immediate_data\": true, "
		 "\"first_burst_length\": 65536, \"max_burst_length\": 262144, "
		 "\"max_recv_data_segment_length\": 8192}%s%s},"
		 "\"portals\": [{\"name\": \"p\", \"address\": \"127.0.0.1\", \"port\": 3260}],"
		 "\"targets\": [{\"name\": \"" H_TARGET "\", \"luns\": ["
		 "{\"lun\": 0, \"backend\": \"ram\", \"size\": \"1M\", \"block_size\": 512},"
		 "{\"lun\": 1, \"backend\": \"error\", \"size\": \"1M\", \"block_size\": 512,"
		 " \"errors\": [{\"op\": \"any\", \"error\": \"none\", \"delay_ms\": 60, "
		 "\"lba\": 100, \"blocks\": 8}]}]%s%s}]}",
		 *global_extra ? ", " : "", global_extra, h->target_extra ? ", " : "",
		 h->target_extra ? h->target_extra : "");
	r = cfg_load_string(json, "unit", &cfg, err, sizeof(err));
	if (r < 0) {
		printf("# config: %s\n", err);
		return r;
	}
	/* listen nowhere: the harness hands the worker its connection itself */
	for (size_t i = 0; i < cfg->nportals; i++) {
		free(cfg->portals[i].name);
		free(cfg->portals[i].address);
	}
	free(cfg->portals);
	cfg->portals = NULL;
	cfg->nportals = 0;
	r = ix_target_new(cfg, &h->tgt, err, sizeof(err));
	if (r < 0) {
		printf("# ix_target_new: %s\n", err);
		return r;
	}
	h->w = &h->tgt->workers[0];
	h->portal = (struct cfg_portal){.name = "p", .address = "127.0.0.1", .port = 3260,
					.tpgt = 1, .transports = 1u << DM_ID_DEFAULT};
	return 0;
}

/* Accept one connection on the worker (as target.c's accept path does). */
static int h_connect(struct harness *h)
{
	static struct dm_incoming in = {.dm = &h_dm_ops, .peer = "fake:1"};
	struct list_head *last;

	h_cur = h;
	atomic_fetch_add(&h->tgt->nconns_open, 1); /* accept_admit's count */
	tgt_conn_accept(h->w, &in, &h->portal);
	if (list_empty(&h->w->conns))
		return -ENOTCONN;
	last = h->w->conns.prev;
	h->tc = list_entry(last, struct tgt_conn, wlink);
	h->c = h->tc->conn;
	iscsi_conn_get(h->c);
	return 0;
}

/* Default initiator keys: InitialR2T=No, ImmediateData=Yes, FirstBurstLength 8192,
 * MaxBurstLength 16384, MaxRecvDataSegmentLength 4096 (the target declares 8192). */
static void h_prefs_default(struct neg_prefs *p)
{
	neg_prefs_default(p);
	p->offer_all = true;
	p->max_recv_dsl = 4096;
	p->sess.max_burst_length = 16384;
	p->sess.first_burst_length = 8192;
	p->sess.initial_r2t = false;
	p->sess.immediate_data = true;
}

/* A real login to full feature phase with h->prefs. 0 or -errno. */
static int h_login(struct harness *h)
{
	struct login_init_cfg lc = {
		.initiator_name = "iqn.2026-11.io.ix:unit-ini",
		.target_name = H_TARGET,
		.type = ISCSI_SESSION_NORMAL,
		.isid = {0x80, 0, 0, 0, 0, 1},
		.cmdsn = 1,
		.creds = h->creds,
		.prefs = &h->prefs,
	};
	struct login_init_req req;
	int r = login_initiator_init(&h->li, &lc);

	h->cmdsn = 1;
	for (int step = 0; r == 0 && step < 8; step++) {
		int before = h->nrec;
		struct h_rec *rsp = NULL;

		r = login_initiator_next(&h->li, &req);
		if (r < 0)
			break;
		req.hdr.itt = 0x1000;
		h_rx(h, &req.hdr, req.text, req.text_len);
		for (int k = before; k < h->nrec; k++)
			if (h->rec[k].h.opcode == ISCSI_OP_LOGIN_RSP)
				rsp = &h->rec[k];
		if (!rsp) {
			r = -EPROTO;
			break;
		}
		h->expstatsn = rsp->h.login_rsp.statsn + 1;
		r = login_initiator_recv(&h->li, &rsp->h, rsp->data, rsp->len);
		if (r == LOGIN_INIT_DONE) {
			login_initiator_clear(&h->li);
			h->itt = 1;
			return 0;
		}
	}
	printf("# login failed (%d): %s\n", r, h->li.error);
	login_initiator_clear(&h->li);
	return r < 0 ? r : -EPROTO;
}

static struct h_rec *h_status_of(struct harness *h, uint32_t itt);

/* Target, connection and login with the given initiator keys (NULL: h_prefs_default). */
static int h_setup(struct harness *h, const char *global_extra, const struct neg_prefs *p)
{
	memset(h, 0, sizeof(*h));
	if (p)
		h->prefs = *p;
	else
		h_prefs_default(&h->prefs);
	if (h_target(h, global_extra) < 0 || h_connect(h) < 0 || h_login(h) < 0)
		return -1;
	/* a new nexus starts with a unit attention (power on / reset) on each LU: collect it
	   with a TEST UNIT READY, as an initiator's scan does */
	for (uint32_t lun = 0; lun < 2; lun++)
		for (int i = 0; i < 2; i++) {
			struct iscsi_hdr t = {.opcode = ISCSI_OP_SCSI_CMD, .final = true,
					      .itt = h->itt++};

			t.cmd.attr = ISCSI_ATTR_SIMPLE;
			t.cmd.lun = scsi_lun_encode(lun);
			t.cmd.cmdsn = h->cmdsn++;
			h_rx(h, &t, NULL, 0);
			if (!h_status_of(h, t.itt)) {
				printf("# TEST UNIT READY CmdSN %u after login not answered\n",
				       t.cmd.cmdsn);
				return -1;
			}
		}
	h_clear(h);
	return 0;
}

static void h_teardown(struct harness *h)
{
	if (h->c) {
		iscsi_conn_close(h->c, NULL);
		h_idle(h);
		iscsi_conn_put(h->c);
	}
	if (h->tgt)
		ix_target_free(h->tgt); /* turns the loop until the connection is released */
	h_clear(h);
	h_cur = NULL;
}

/* ---- initiator PDUs ---- */

static void h_cdb_rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	cdb[2] = (uint8_t)(lba >> 24);
	cdb[3] = (uint8_t)(lba >> 16);
	cdb[4] = (uint8_t)(lba >> 8);
	cdb[5] = (uint8_t)lba;
	cdb[7] = (uint8_t)(blocks >> 8);
	cdb[8] = (uint8_t)blocks;
}

/* A SCSI Command header (not sent): READ(10) / WRITE(10) of blocks at lba, EDTL edtl. */
static struct iscsi_hdr h_cmd(struct harness *h, uint32_t lun, bool write, uint32_t lba,
			      uint16_t blocks, uint32_t edtl, uint32_t cmdsn)
{
	struct iscsi_hdr c = {.opcode = ISCSI_OP_SCSI_CMD, .final = true, .itt = h->itt++};

	c.cmd.read = !write;
	c.cmd.write = write;
	c.cmd.attr = ISCSI_ATTR_SIMPLE;
	c.cmd.lun = scsi_lun_encode(lun);
	c.cmd.edtl = edtl;
	c.cmd.cmdsn = cmdsn;
	c.cmd.expstatsn = h->expstatsn;
	h_cdb_rw10(c.cmd.cdb, write ? 0x2a : 0x28, lba, blocks);
	return c;
}

static int h_data_out(struct harness *h, uint32_t itt, uint32_t ttt, uint32_t datasn,
		      uint32_t offset, const uint8_t *data, uint32_t len, bool final)
{
	struct iscsi_hdr d = {.opcode = ISCSI_OP_DATA_OUT, .final = final, .itt = itt};

	d.data_out.ttt = ttt;
	d.data_out.datasn = datasn;
	d.data_out.offset = offset;
	d.data_out.expstatsn = h->expstatsn;
	return h_rx(h, &d, data, len);
}

/* The SCSI Response (or Data-In with S) recorded for itt, NULL if none. */
static struct h_rec *h_status_of(struct harness *h, uint32_t itt)
{
	for (int k = 0; k < h->nrec; k++) {
		struct h_rec *r = &h->rec[k];

		if (r->h.itt != itt)
			continue;
		if (r->h.opcode == ISCSI_OP_SCSI_RSP ||
		    (r->h.opcode == ISCSI_OP_DATA_IN && r->h.data_in.status_present))
			return r;
	}
	return NULL;
}

static uint8_t h_status(const struct h_rec *r)
{
	return r->h.opcode == ISCSI_OP_SCSI_RSP ? r->h.rsp.status : r->h.data_in.status;
}

/* Sense key of a SCSI Response carrying sense data (fixed format), -1 if none. */
static int h_sense_key(const struct h_rec *r)
{
	if (!r || r->h.opcode != ISCSI_OP_SCSI_RSP || r->len < 2 + 14)
		return -1;
	return r->data[2 + 2] & 0x0f;
}

static int h_sense_asc(const struct h_rec *r)
{
	if (!r || r->h.opcode != ISCSI_OP_SCSI_RSP || r->len < 2 + 14)
		return -1;
	return r->data[2 + 12];
}

#endif
