/* The fault-injecting datamover (transport/fault) over a fake inner transport that records
 * what reaches it: each fault at probability 1 (and 0), the opcode filter, faults starting
 * only after login, delays keeping order, the truncation point inside the PDU's wire length,
 * reset_after_bytes handed to the inner transport, and the op a PDU goes through. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "event/loop.h"
#include "dm/conn.h"
#include "transport/fault/fault.h"
#include "util/bytes.h"
#include "tap.h"

#define MAXREC 64

struct rec {
	int n;
	uint8_t op[MAXREC];
	uint32_t itt[MAXREC];
	char via[MAXREC]; /* 'c' send_control, 'p' put_data, 'g' get_data */
	uint64_t abort_at;
	int terminated;
};

static struct rec R;

static int record(struct iscsi_conn *c, struct dm_txpdu *p, char via)
{
	if (R.n < MAXREC) {
		R.op[R.n] = p->bhs[0] & 0x3f;
		R.itt[R.n] = get_be32(p->bhs + 16);
		R.via[R.n] = via;
		R.n++;
	}
	p->sent(p, 0);
	(void)c;
	return 0;
}

static int fake_control(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return record(c, p, 'c');
}

static int fake_put(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return record(c, p, 'p');
}

static int fake_get(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return record(c, p, 'g');
}

static void fake_enable(struct iscsi_conn *c, const struct iscsi_conn_params *cp)
{
	(void)c;
	(void)cp;
}

static void fake_terminate(struct iscsi_conn *c)
{
	R.terminated++;
	iscsi_conn_put(c); /* the transport's reference */
}

static bool fake_busy(struct iscsi_conn *c)
{
	(void)c;
	return false;
}

static void fake_abort_at(struct iscsi_conn *c, uint64_t total)
{
	(void)c;
	R.abort_at = total;
}

static const struct dm_ops fake_ops = {
    .name = "fake",
    .conn_priv_size = 40, /* not a multiple of 16: the wrapper must align its own area */
    .send_control = fake_control,
    .put_data = fake_put,
    .get_data = fake_get,
    .enable = fake_enable,
    .terminate = fake_terminate,
    .tx_busy = fake_busy,
    .tx_abort_at = fake_abort_at,
};

static int rx_header(struct iscsi_conn *c, const struct iscsi_hdr *h, const uint8_t *ahs,
		     uint32_t ahs_len, struct dm_rx_place *place)
{
	return 0;
}

static void rx_pdu(struct iscsi_conn *c, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen,
		   bool ok)
{
}

static const struct iscsi_role_ops role = {.rx_header = rx_header, .rx_pdu = rx_pdu};

static struct iscsi_conn *conn(struct ev_loop *loop, struct fault_dm *f, bool login_done)
{
	struct iscsi_conn *c = iscsi_conn_new(fault_dm_ops(f), loop, ISCSI_ROLE_TARGET, &role, NULL);
	struct iscsi_conn_params cp = {.max_recv_dsl = 8192, .max_xmit_dsl = 8192};

	memset(&R, 0, sizeof(R));
	if (c && login_done)
		c->dm->enable(c, &cp);
	return c;
}

/* Send one PDU with this opcode and ITT (and dlen bytes of data). */
static void send(struct iscsi_conn *c, uint8_t op, uint32_t itt, uint32_t dlen)
{
	static uint8_t data[1024];
	struct dm_txpdu *p = iscsi_txpdu_get(c);
	struct iscsi_hdr h = {.opcode = op, .final = true, .itt = itt};

	if (op == ISCSI_OP_NOP_IN)
		h.nop_in.ttt = ISCSI_RSVD_TAG;
	if (dlen) {
		p->data[0].iov_base = data;
		p->data[0].iov_len = dlen;
		p->data_cnt = 1;
		p->data_len = dlen;
		h.dlength = dlen;
	}
	if (op == ISCSI_OP_DATA_IN)
		iscsi_put_data(c, p, &h);
	else if (op == ISCSI_OP_R2T)
		iscsi_get_data(c, p, &h);
	else
		iscsi_send_pdu(c, p, &h);
}

static void close_conn(struct ev_loop *loop, struct iscsi_conn *c)
{
	iscsi_conn_close(c, NULL);
	ev_loop_run_once(loop, 0); /* deferred free */
}

static void test_pass_through(struct ev_loop *loop)
{
	struct fault_cfg cfg = {0};
	struct fault_dm *f = fault_dm_new(&fake_ops, &cfg);
	struct iscsi_conn *c = conn(loop, f, true);
	struct fault_stats st;

	send(c, ISCSI_OP_NOP_IN, 1, 0);
	send(c, ISCSI_OP_DATA_IN, 2, 100);
	send(c, ISCSI_OP_R2T, 3, 0);
	CHECK_EQ(R.n, 3);
	CHECK(R.via[0] == 'c' && R.via[1] == 'p' && R.via[2] == 'g');
	CHECK_EQ(R.abort_at, 0);
	fault_dm_stats(f, &st);
	CHECK(st.pdus == 3 && st.dropped == 0 && st.duplicated == 0);
	CHECK_EQ(fault_dm_ops(f)->conn_priv_size > fake_ops.conn_priv_size, 1);
	close_conn(loop, c);
	CHECK_EQ(R.terminated, 1);
	fault_dm_free(f);
}

static void test_drop_dup_filter(struct ev_loop *loop)
{
	struct fault_cfg cfg = {.drop_ppm = FAULT_PPM, .opcodes = 1ull << ISCSI_OP_NOP_IN};
	struct fault_dm *f = fault_dm_new(&fake_ops, &cfg);
	struct iscsi_conn *c = conn(loop, f, true);

	send(c, ISCSI_OP_NOP_IN, 1, 0);  /* dropped */
	send(c, ISCSI_OP_SCSI_RSP, 2, 0); /* not selected */
	CHECK_EQ(R.n, 1);
	CHECK(R.op[0] == ISCSI_OP_SCSI_RSP && R.itt[0] == 2);
	close_conn(loop, c);
	fault_dm_free(f);

	cfg = (struct fault_cfg){.duplicate_ppm = FAULT_PPM};
	f = fault_dm_new(&fake_ops, &cfg);
	c = conn(loop, f, true);
	send(c, ISCSI_OP_SCSI_RSP, 7, 48);
	CHECK_EQ(R.n, 2);
	CHECK(R.itt[0] == 7 && R.itt[1] == 7 && R.op[1] == ISCSI_OP_SCSI_RSP);
	close_conn(loop, c);
	fault_dm_free(f);
}

static void test_only_after_login(struct ev_loop *loop)
{
	struct fault_cfg cfg = {.drop_ppm = FAULT_PPM};
	struct fault_dm *f = fault_dm_new(&fake_ops, &cfg);
	struct iscsi_conn *c = conn(loop, f, false);

	send(c, ISCSI_OP_LOGIN_RSP, 1, 0);
	CHECK_EQ(R.n, 1); /* login responses pass */
	close_conn(loop, c);
	fault_dm_free(f);

	cfg.during_login = true;
	f = fault_dm_new(&fake_ops, &cfg);
	c = conn(loop, f, false);
	send(c, ISCSI_OP_LOGIN_RSP, 1, 0);
	CHECK_EQ(R.n, 0);
	close_conn(loop, c);
	fault_dm_free(f);
}

static void test_corrupt(struct ev_loop *loop)
{
	struct fault_cfg cfg = {.corrupt_ppm = FAULT_PPM, .seed = 3};
	struct fault_dm *f = fault_dm_new(&fake_ops, &cfg);
	struct iscsi_conn *c = conn(loop, f, true);
	int itt_changed = 0;

	for (uint32_t i = 0; i < 40; i++)
		send(c, ISCSI_OP_NOP_IN, 0x1000 + i, 0);
	CHECK_EQ(R.n, 40);
	for (int i = 0; i < R.n; i++) {
		CHECK_EQ(R.op[i], ISCSI_OP_NOP_IN); /* the opcode byte is never touched */
		itt_changed += R.itt[i] != 0x1000u + (uint32_t)i;
	}
	CHECK(itt_changed > 0 && itt_changed < 40); /* bytes 16-19 are 4 of the 43 candidates */
	close_conn(loop, c);
	fault_dm_free(f);
}

static void test_delay_keeps_order(struct ev_loop *loop)
{
	struct fault_cfg cfg = {.delay_ppm = FAULT_PPM, .delay_ms = 20,
				.opcodes = 1ull << ISCSI_OP_SCSI_RSP};
	struct fault_dm *f = fault_dm_new(&fake_ops, &cfg);
	struct iscsi_conn *c = conn(loop, f, true);

	send(c, ISCSI_OP_SCSI_RSP, 1, 0); /* delayed */
	send(c, ISCSI_OP_NOP_IN, 2, 0);	  /* not selected, but waits behind it */
	send(c, ISCSI_OP_DATA_IN, 3, 64);
	CHECK_EQ(R.n, 0);
	CHECK(c->dm->tx_busy(c));
	for (int i = 0; i < 100 && R.n < 3; i++)
		ev_loop_run_once(loop, 10);
	CHECK_EQ(R.n, 3);
	CHECK(R.itt[0] == 1 && R.itt[1] == 2 && R.itt[2] == 3 && R.via[2] == 'p');
	CHECK(!c->dm->tx_busy(c));
	/* a PDU held back when the connection ends never reaches the inner transport */
	send(c, ISCSI_OP_SCSI_RSP, 4, 0);
	close_conn(loop, c);
	CHECK_EQ(R.n, 3);
	fault_dm_free(f);
}

static void test_truncate_and_reset(struct ev_loop *loop)
{
	struct fault_cfg cfg = {.truncate_ppm = FAULT_PPM, .opcodes = 1ull << ISCSI_OP_DATA_IN};
	struct fault_dm *f = fault_dm_new(&fake_ops, &cfg);
	struct iscsi_conn *c = conn(loop, f, true);

	send(c, ISCSI_OP_NOP_IN, 1, 0);	    /* 48 bytes on the wire */
	send(c, ISCSI_OP_DATA_IN, 2, 1001); /* 48 + 1004 bytes: cut inside it */
	CHECK_EQ(R.n, 2);
	CHECK(R.abort_at > 48 && R.abort_at < 48 + 48 + 1004);
	close_conn(loop, c);
	fault_dm_free(f);

	cfg = (struct fault_cfg){.reset_after_bytes = 12345};
	f = fault_dm_new(&fake_ops, &cfg);
	c = conn(loop, f, false);
	send(c, ISCSI_OP_LOGIN_RSP, 1, 0);
	CHECK_EQ(R.abort_at, 12345);
	close_conn(loop, c);
	fault_dm_free(f);
}

/* The registry (dm.h): transports by id and name, a wrapper through dm_wrapper, its options
 * described by its dm_opt table so configuration reads them without fault.h. */
static void test_registry(void)
{
	const struct dm_wrapper *w = dm_find_wrapper("fault");
	struct fault_cfg cfg = {.seed = 7, .delay_ms = 100};
	char buf[256];
	size_t n = 0;

	for (size_t i = 0; dm_transport(i); i++, n++) {
		CHECK_EQ(dm_find_id(dm_transport(i)->name), (int)i);
		CHECK_EQ(dm_transport_id(dm_transport(i)), (int)i);
	}
	CHECK(n >= 2 && n <= DM_MAX_TRANSPORTS);
	CHECK_EQ(dm_find_id("no-such"), -ENOENT);
	CHECK_STR(dm_names("", " or ", buf, sizeof(buf)), "tcp or iser");
	CHECK_STR(dm_names("\"", ", ", buf, sizeof(buf)), "\"tcp\", \"iser\"");
	CHECK(dm_find_wrapper("nope") == NULL);
	CHECK(w != NULL);
	if (!w)
		return;
	CHECK_STR(w->opts[0].name, "seed");
	for (const struct dm_opt *o = w->opts; o->name; o++)
		CHECK(o->off < sizeof(struct fault_cfg));
	void *f = w->wrap_new(dm_transport(0), &cfg);
	CHECK(f != NULL);
	/* a wrapper carries its transport's name: counted as that transport */
	CHECK_EQ(dm_transport_id(w->wrap_ops(f)), 0);
	w->describe(&cfg, buf, sizeof(buf));
	CHECK(strncmp(buf, "seed 7; ppm: drop 0 delay 0 (100 ms)", 36) == 0);
	w->report(&f, 1, buf, sizeof(buf));
	CHECK(strncmp(buf, "0 PDUs eligible, 0 dropped", 26) == 0);
	w->wrap_free(f);
}

int main(void)
{
	struct ev_loop *loop = ev_loop_new();

	CHECK(loop != NULL);
	if (!loop)
		return tap_done();
	test_pass_through(loop);
	test_drop_dup_filter(loop);
	test_only_after_login(loop);
	test_corrupt(loop);
	test_delay_keeps_order(loop);
	test_truncate_and_reset(loop);
	test_registry();
	ev_loop_free(loop);
	return tap_done();
}
