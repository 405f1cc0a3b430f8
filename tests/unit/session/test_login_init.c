/* The initiator's login driver (session/login_init) talking to the target's login acceptor
 * (session/login) in one process: both roles of the shared login code, through the real PDU
 * codec, for plain, CHAP (every algorithm, one-way and mutual) and discovery logins, the
 * failures each side must report, and responses a target must not send. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/chap.h"
#include "proto/pdu.h"
#include "session/login.h"
#include "session/login_init.h"
#include "tap.h"

#define INAME "iqn.2026-11.io.ix:unit-initiator"
#define TNAME "iqn.2026-11.io.ix:unit-target"

struct fake_target {
	struct auth_creds creds;
	struct neg_prefs prefs;
	uint16_t refuse;        /* admit() answer, 0 = admit */
	struct login_info seen;
};

static int admit(void *ctx, const struct login_info *info, struct login_grant *g)
{
	struct fake_target *ft = ctx;

	ft->seen = *info;
	if (ft->refuse)
		return ft->refuse;
	g->tpgt = 7;
	g->target_alias = "unit-alias";
	g->creds = ft->creds;
	g->prefs = &ft->prefs;
	return 0;
}

static void fake_target_init(struct fake_target *ft)
{
	memset(ft, 0, sizeof(*ft));
	neg_prefs_default(&ft->prefs);
	ft->prefs.declare_only = true;
	ft->prefs.max_recv_dsl = 262144;
	ft->prefs.sess.max_burst_length = 1048576;
	ft->prefs.sess.first_burst_length = 262144;
	ft->prefs.sess.initial_r2t = false; /* InitialR2T is OR: both must say No */
	ft->prefs.header_digest = NEG_DIGEST_PREFER_NONE;
	ft->prefs.data_digest = NEG_DIGEST_PREFER_NONE;
}

static void ini_prefs(struct neg_prefs *p)
{
	neg_prefs_default(p);
	p->offer_all = true;
	p->max_recv_dsl = 131072;
	p->sess.max_burst_length = 524288;
	p->sess.first_burst_length = 65536;
	p->sess.initial_r2t = false;
	p->sess.immediate_data = true;
}

static void creds_set(struct auth_creds *c, const char *user, const char *secret)
{
	c->user = user;
	c->secret = (const uint8_t *)secret;
	c->secret_len = strlen(secret);
}

static void creds_mutual(struct auth_creds *c, const char *user, const char *secret)
{
	c->mutual_user = user;
	c->mutual_secret = (const uint8_t *)secret;
	c->mutual_secret_len = strlen(secret);
}

/* Outcome of one login. */
struct outcome {
	int ini;                /* initiator's last return */
	uint16_t tgt_status;    /* acceptor's failure status (0 if none) */
	int pdus;               /* requests sent */
	bool tgt_final;
};

/* Run a whole login: every request packed and unpacked through the PDU codec. */
static struct outcome run_login(struct login_initiator *li, struct fake_target *ft,
				struct login_acceptor *la)
{
	struct login_policy pol = {.admit = admit, .ctx = ft};
	struct outcome o = {0};
	uint32_t statsn = 100;

	login_acceptor_init(la, &pol);
	for (o.pdus = 0; o.pdus < 32; o.pdus++) {
		struct login_init_req req;
		struct login_step st;
		struct iscsi_hdr h, rh;
		uint8_t bhs[ISCSI_BHS_LEN];
		uint8_t data[LOGIN_INIT_PDU_TEXT + 1], rdata[8192];

		o.ini = login_initiator_next(li, &req);
		if (o.ini < 0)
			break;
		iscsi_hdr_pack(&req.hdr, bhs);
		iscsi_hdr_unpack(bhs, &h);
		memcpy(data, req.text, req.text_len);
		login_acceptor_step(la, &h, data, req.text_len, &st);

		memset(&rh, 0, sizeof(rh));
		rh.opcode = ISCSI_OP_LOGIN_RSP;
		memcpy(rh.login_rsp.isid, h.login_req.isid, 6);
		rh.login_rsp.statsn = statsn++;
		rh.login_rsp.status = st.status;
		rh.login_rsp.csg = st.csg;
		rh.login_rsp.nsg = st.nsg;
		rh.login_rsp.transit = st.transit;
		rh.login_rsp.cont = st.cont;
		if (st.final) {
			rh.login_rsp.tsih = 0x1234;
			o.tgt_final = true;
		}
		rh.dlength = st.status ? 0 : st.text_len;
		if (rh.dlength)
			memcpy(rdata, st.text, st.text_len);
		if (st.status)
			o.tgt_status = st.status;
		iscsi_hdr_pack(&rh, bhs);
		iscsi_hdr_unpack(bhs, &rh);
		o.ini = login_initiator_recv(li, &rh, rdata, rh.dlength);
		if (o.ini != LOGIN_INIT_CONTINUE)
			break;
	}
	return o;
}

static void cfg_init(struct login_init_cfg *c, const struct neg_prefs *p,
		     const struct auth_creds *creds)
{
	static const uint8_t isid[6] = {0x80, 0x12, 0x34, 0x56, 0x00, 0x01};

	memset(c, 0, sizeof(*c));
	c->initiator_name = INAME;
	c->target_name = TNAME;
	c->type = ISCSI_SESSION_NORMAL;
	memcpy(c->isid, isid, 6);
	c->cmdsn = 1;
	c->prefs = p;
	c->creds = creds;
}

static void test_plain(void)
{
	struct login_initiator li;
	struct login_acceptor la;
	struct login_init_cfg cfg;
	struct fake_target ft;
	struct neg_prefs p;
	struct outcome o;

	fake_target_init(&ft);
	ini_prefs(&p);
	cfg_init(&cfg, &p, NULL);
	CHECK_EQ(login_initiator_init(&li, &cfg), 0);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, LOGIN_INIT_DONE);
	CHECK(o.tgt_final);
	CHECK_EQ(o.pdus, 1); /* security T=1 -> operational, operational T=1 -> FFP */
	CHECK_EQ(li.tsih, 0x1234);
	CHECK_EQ(li.tpgt, 7);
	CHECK_STR(li.target_alias, "unit-alias");
	CHECK_STR(ft.seen.initiator_name, INAME);
	CHECK_STR(ft.seen.target_name, TNAME);
	/* both sides agree on the results */
	CHECK_EQ(li.neg.sess.max_burst_length, 524288);
	CHECK_EQ(la.neg.sess.max_burst_length, 524288);
	CHECK_EQ(li.neg.sess.first_burst_length, 65536);
	CHECK_EQ(la.neg.sess.first_burst_length, 65536);
	CHECK_EQ(li.neg.sess.initial_r2t, false);
	CHECK_EQ(la.neg.sess.initial_r2t, false);
	CHECK_EQ(li.neg.sess.immediate_data, true);
	CHECK_EQ(la.neg.sess.immediate_data, true);
	CHECK_EQ(li.neg.conn.max_xmit_dsl, 262144); /* the target's declaration */
	CHECK_EQ(la.neg.conn.max_xmit_dsl, 131072); /* ours */
	CHECK_EQ(li.neg.conn.header_digest, false);
	CHECK_EQ(li.expstatsn, 102);
	login_acceptor_clear(&la);
	login_initiator_clear(&li);
	/* calling next() after the end is refused */
	{
		struct login_init_req req;
		CHECK_EQ(login_initiator_next(&li, &req), -EINVAL);
	}
}

static void test_digests(void)
{
	struct login_initiator li;
	struct login_acceptor la;
	struct login_init_cfg cfg;
	struct fake_target ft;
	struct neg_prefs p;
	struct outcome o;

	fake_target_init(&ft);
	ini_prefs(&p);
	p.header_digest = NEG_DIGEST_CRC_ONLY;
	p.data_digest = NEG_DIGEST_PREFER_CRC;
	cfg_init(&cfg, &p, NULL);
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, LOGIN_INIT_DONE);
	CHECK_EQ(li.neg.conn.header_digest, true);
	CHECK_EQ(la.neg.conn.header_digest, true);
	CHECK_EQ(li.neg.conn.data_digest, true);
	CHECK_EQ(la.neg.conn.data_digest, true);
	login_acceptor_clear(&la);

	/* the target allows None only, we require CRC32C: the initiator refuses */
	ft.prefs.header_digest = NEG_DIGEST_NONE_ONLY;
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -EPROTO);
	CHECK(strstr(li.error, "negotiation") != NULL);
	login_acceptor_clear(&la);
}

static void test_chap(void)
{
	static const uint8_t algs[] = {CHAP_ALG_MD5, CHAP_ALG_SHA1, CHAP_ALG_SHA256,
				       CHAP_ALG_SHA3_256};

	for (size_t a = 0; a < sizeof(algs); a++) {
		for (int mutual = 0; mutual < 2; mutual++) {
			struct login_initiator li;
			struct login_acceptor la;
			struct login_init_cfg cfg;
			struct fake_target ft;
			struct auth_creds ic = {0};
			struct neg_prefs p;
			struct outcome o;

			if (!chap_alg_available(algs[a])) {
				printf("ok %d - # SKIP CHAP_A=%u not available in this libcrypto\n",
				       ++tap_n, algs[a]);
				continue;
			}
			fake_target_init(&ft);
			ft.creds.required = true;
			creds_set(&ft.creds, "alice", "initiator-secret-01");
			ft.creds.algs[0] = algs[a];
			ft.creds.nalgs = 1;
			creds_set(&ic, "alice", "initiator-secret-01");
			if (mutual) {
				creds_mutual(&ft.creds, "tgt", "target-secret-0002");
				creds_mutual(&ic, "tgt", "target-secret-0002");
			}
			ini_prefs(&p);
			cfg_init(&cfg, &p, &ic);
			login_initiator_init(&li, &cfg);
			o = run_login(&li, &ft, &la);
			printf("# CHAP_A=%u mutual=%d: %s\n", algs[a], mutual, li.error);
			CHECK_EQ(o.ini, LOGIN_INIT_DONE);
			CHECK_EQ(li.auth.alg, algs[a]);
			CHECK_EQ(o.tgt_status, 0);
			login_acceptor_clear(&la);
			login_initiator_clear(&li);
		}
	}
}

static void test_chap_failures(void)
{
	struct login_initiator li;
	struct login_acceptor la;
	struct login_init_cfg cfg;
	struct fake_target ft;
	struct auth_creds ic = {0};
	struct neg_prefs p;
	struct outcome o;

	ini_prefs(&p);
	/* wrong secret: the target refuses with 0x0201, the initiator reports -EACCES */
	fake_target_init(&ft);
	ft.creds.required = true;
	creds_set(&ft.creds, "alice", "initiator-secret-01");
	creds_set(&ic, "alice", "wrong-secret-000001");
	cfg_init(&cfg, &p, &ic);
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.tgt_status, ISCSI_LOGIN_AUTH_FAILED);
	CHECK_EQ(o.ini, -EACCES);
	CHECK_EQ(li.status, ISCSI_LOGIN_AUTH_FAILED);
	login_acceptor_clear(&la);

	/* CHAP required by the target, no credential on the initiator */
	cfg_init(&cfg, &p, NULL);
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -EACCES);
	CHECK_EQ(o.tgt_status, ISCSI_LOGIN_AUTH_FAILED);
	login_acceptor_clear(&la);

	/* mutual CHAP: the target proves the wrong secret; the initiator catches it */
	creds_set(&ic, "alice", "initiator-secret-01");
	creds_mutual(&ic, "tgt", "target-secret-0002");
	creds_mutual(&ft.creds, "tgt", "not-the-secret-0003");
	cfg_init(&cfg, &p, &ic);
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -EACCES);
	CHECK_EQ(o.tgt_status, 0);
	CHECK(!o.tgt_final);
	login_acceptor_clear(&la);

	/* the initiator requires CHAP, the target has none configured: it answers
	   AuthMethod=None... or Reject; either way the initiator must not go on */
	fake_target_init(&ft);
	memset(&ic, 0, sizeof(ic));
	creds_set(&ic, "alice", "initiator-secret-01");
	ic.required = true;
	cfg_init(&cfg, &p, &ic);
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK(o.ini == -EACCES || o.tgt_status == ISCSI_LOGIN_AUTH_FAILED);
	CHECK(!o.tgt_final);
	login_acceptor_clear(&la);
}

static void test_discovery_and_refusals(void)
{
	struct login_initiator li;
	struct login_acceptor la;
	struct login_init_cfg cfg;
	struct fake_target ft;
	struct neg_prefs p;
	struct outcome o;

	fake_target_init(&ft);
	ini_prefs(&p);
	cfg_init(&cfg, &p, NULL);
	cfg.type = ISCSI_SESSION_DISCOVERY;
	cfg.target_name = NULL;
	CHECK_EQ(login_initiator_init(&li, &cfg), 0);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, LOGIN_INIT_DONE);
	CHECK_EQ(ft.seen.type, ISCSI_SESSION_DISCOVERY);
	login_acceptor_clear(&la);

	/* a normal session needs a target name */
	cfg.type = ISCSI_SESSION_NORMAL;
	CHECK_EQ(login_initiator_init(&li, &cfg), -EINVAL);

	/* unknown target */
	cfg.target_name = TNAME;
	ft.refuse = ISCSI_LOGIN_NOT_FOUND;
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -ENOENT);
	CHECK_EQ(li.status, ISCSI_LOGIN_NOT_FOUND);
	login_acceptor_clear(&la);

	/* initiator not allowed */
	ft.refuse = ISCSI_LOGIN_AUTHORIZATION_FAILED;
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -EACCES);
	login_acceptor_clear(&la);

	/* target busy: retryable */
	ft.refuse = ISCSI_LOGIN_SERVICE_UNAVAILABLE;
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -EAGAIN);
	login_acceptor_clear(&la);
}

/* Responses built by hand: what a broken or redirecting target may send. */
static void test_bad_responses(void)
{
	struct login_initiator li;
	struct login_init_cfg cfg;
	struct login_init_req req;
	struct neg_prefs p;
	struct iscsi_hdr h;
	char text[128];
	uint32_t len;

	ini_prefs(&p);
	cfg_init(&cfg, &p, NULL);

	/* redirection carries the new address */
	login_initiator_init(&li, &cfg);
	CHECK_EQ(login_initiator_next(&li, &req), 0);
	CHECK(req.hdr.login_req.transit);
	CHECK_EQ(req.hdr.login_req.nsg, ISCSI_STAGE_OPERATIONAL);
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_RSP;
	memcpy(h.login_rsp.isid, cfg.isid, 6);
	h.login_rsp.status = ISCSI_LOGIN_TARGET_MOVED_TEMP;
	len = (uint32_t)snprintf(text, sizeof(text), "TargetAddress=192.0.2.9:3261,1") + 1;
	CHECK_EQ(login_initiator_recv(&li, &h, (uint8_t *)text, len), -EXDEV);
	CHECK_STR(li.redirect, "192.0.2.9:3261,1");

	/* redirection without an address */
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	CHECK_EQ(login_initiator_recv(&li, &h, NULL, 0), -EPROTO);

	/* another ISID */
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_RSP;
	CHECK_EQ(login_initiator_recv(&li, &h, NULL, 0), -EPROTO);

	/* jumping to full feature phase from the security stage when we asked for stage 1 */
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	memcpy(h.login_rsp.isid, cfg.isid, 6);
	h.login_rsp.transit = true;
	h.login_rsp.csg = 0;
	h.login_rsp.nsg = 3;
	h.login_rsp.tsih = 1;
	CHECK_EQ(login_initiator_recv(&li, &h, NULL, 0), -EPROTO);

	/* C and T together */
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	h.login_rsp.nsg = 1;
	h.login_rsp.cont = true;
	CHECK_EQ(login_initiator_recv(&li, &h, NULL, 0), -EPROTO);

	/* the final response must carry a TSIH */
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	h.login_rsp.cont = false;
	h.login_rsp.nsg = 1;
	CHECK_EQ(login_initiator_recv(&li, &h, NULL, 0), LOGIN_INIT_CONTINUE);
	CHECK_EQ(login_initiator_next(&li, &req), 0);
	CHECK_EQ(req.hdr.login_req.csg, ISCSI_STAGE_OPERATIONAL);
	CHECK(req.text_len > 0); /* our proposals */
	h.login_rsp.csg = 1;
	h.login_rsp.nsg = 3;
	h.login_rsp.tsih = 0;
	CHECK_EQ(login_initiator_recv(&li, &h, NULL, 0), -EPROTO);

	/* a response in C=1 pieces is asked for with empty requests and then parsed whole */
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_RSP;
	memcpy(h.login_rsp.isid, cfg.isid, 6);
	h.login_rsp.cont = true;
	len = (uint32_t)snprintf(text, sizeof(text), "AuthMethod=No");
	CHECK_EQ(login_initiator_recv(&li, &h, (uint8_t *)text, len), LOGIN_INIT_CONTINUE);
	CHECK_EQ(login_initiator_next(&li, &req), 0);
	CHECK_EQ(req.text_len, 0);
	CHECK(!req.hdr.login_req.transit);
	h.login_rsp.cont = false;
	h.login_rsp.transit = true;
	h.login_rsp.nsg = 1;
	len = (uint32_t)snprintf(text, sizeof(text), "ne") + 1;
	/* we asked with T=0 for the rest: the target may not transit now */
	CHECK_EQ(login_initiator_recv(&li, &h, (uint8_t *)text, len), -EPROTO);
	login_initiator_init(&li, &cfg);
	login_initiator_next(&li, &req);
	h.login_rsp.cont = true;
	h.login_rsp.transit = false;
	len = (uint32_t)snprintf(text, sizeof(text), "AuthMethod=No");
	login_initiator_recv(&li, &h, (uint8_t *)text, len);
	login_initiator_next(&li, &req);
	h.login_rsp.cont = false;
	len = (uint32_t)snprintf(text, sizeof(text), "ne") + 1;
	CHECK_EQ(login_initiator_recv(&li, &h, (uint8_t *)text, len), LOGIN_INIT_CONTINUE);
	CHECK(li.auth.done);
}

/* iSER keys (RFC 7145 section 6) through the shared negotiation: RDMAExtensions=Yes,
 * TargetRecvDataSegmentLength / InitiatorRecvDataSegmentLength as Minimum, digests None, and
 * the data segment limits each side uses afterwards. */
static void test_iser_keys(void)
{
	struct login_initiator li;
	struct login_acceptor la;
	struct login_init_cfg cfg;
	struct fake_target ft;
	struct neg_prefs p;
	struct outcome o;

	fake_target_init(&ft);
	ft.prefs.rdma = true;
	ft.prefs.target_rdsl = 8192;
	ft.prefs.initiator_rdsl = 262144;
	ini_prefs(&p);
	p.rdma = true;
	p.target_rdsl = 65536;        /* we would send up to this in a control PDU */
	p.initiator_rdsl = 131072;    /* and can receive this */
	cfg_init(&cfg, &p, NULL);
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, LOGIN_INIT_DONE);
	CHECK(li.neg.conn.rdma);
	CHECK(la.neg.conn.rdma);
	CHECK_EQ(la.neg.conn.target_rdsl, 8192);      /* min(65536, 8192) */
	CHECK_EQ(li.neg.conn.target_rdsl, 8192);
	CHECK_EQ(la.neg.conn.initiator_rdsl, 131072); /* min(131072, 262144) */
	CHECK_EQ(la.neg.conn.max_recv_dsl, 8192);
	CHECK_EQ(la.neg.conn.max_xmit_dsl, 131072);
	CHECK_EQ(li.neg.conn.max_recv_dsl, 131072);
	CHECK_EQ(li.neg.conn.max_xmit_dsl, 8192);
	CHECK(!li.neg.conn.header_digest && !li.neg.conn.data_digest);
	/* MaxRecvDataSegmentLength is Irrelevant with iSER: neither side declared it */
	CHECK(!(la.neg.received & la.neg.declared));
	login_acceptor_clear(&la);

	/* a target answering RDMAExtensions=No on an RDMA connection: the initiator refuses
	   (as open-iscsi does: "Target must support RDMAExtensions") */
	ft.prefs.rdma = false;
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK_EQ(o.ini, -EPROTO);
	CHECK(strstr(li.error, "RDMAExtensions") != NULL);
	CHECK(!la.neg.conn.rdma);
	login_acceptor_clear(&la);

	/* iSER with a CRC32C requirement cannot work */
	ft.prefs.rdma = true;
	p.header_digest = NEG_DIGEST_CRC_ONLY;
	login_initiator_init(&li, &cfg);
	o = run_login(&li, &ft, &la);
	CHECK(o.ini < 0 || o.tgt_status != 0);
	login_acceptor_clear(&la);
}

/* The request text across C=1 PDUs is kept in a buffer sized by what arrived (from 1 KiB, at
 * most LOGIN_MAX_TEXT): 60 KiB of keys in eight PDUs log in (the first PDU's keys survive the
 * growth), a 64 KiB one is refused as before: Out of resources, "login text too long". */
static int long_login(size_t total, uint16_t *status, char *why, size_t whylen)
{
	struct fake_target ft;
	struct login_acceptor la;
	struct login_policy pol = {.admit = admit, .ctx = &ft};
	struct login_step st = {0};
	char *text = malloc(total + 2048);
	size_t len = 0;
	int pdus = 0;

	fake_target_init(&ft);
	len += (size_t)sprintf(text + len, "InitiatorName=%s", INAME) + 1;
	len += (size_t)sprintf(text + len, "TargetName=%s", TNAME) + 1;
	len += (size_t)sprintf(text + len, "SessionType=Normal") + 1;
	len += (size_t)sprintf(text + len, "AuthMethod=None") + 1;
	for (int k = 0; len < total; k++) {
		len += (size_t)sprintf(text + len, "X-io.ix.fill%03d=", k);
		memset(text + len, 'a', 1000);
		len += 1000;
		text[len++] = '\0';
	}
	login_acceptor_init(&la, &pol);
	for (size_t off = 0; off < len; off += 8192, pdus++) {
		struct iscsi_hdr h = {.opcode = ISCSI_OP_LOGIN_REQ, .immediate = true};
		uint32_t n = (uint32_t)(len - off < 8192 ? len - off : 8192);

		h.login_req.isid[0] = 0x80;
		h.login_req.cid = 1;
		h.login_req.cont = off + n < len;
		h.login_req.transit = !h.login_req.cont;
		h.login_req.csg = ISCSI_STAGE_SECURITY;
		h.login_req.nsg = ISCSI_STAGE_OPERATIONAL;
		login_acceptor_step(&la, &h, (uint8_t *)text + off, n, &st);
		if (st.status || !h.login_req.cont)
			break;
	}
	*status = st.status;
	snprintf(why, whylen, "%s", la.error);
	login_acceptor_clear(&la);
	free(text);
	return pdus;
}

static void test_long_text(void)
{
	uint16_t status;
	char why[200];

	CHECK_EQ(long_login(60 * 1024, &status, why, sizeof(why)), 7); /* 8 PDUs: 7 with C=1 */
	CHECK_EQ(status, 0);
	long_login(64 * 1024, &status, why, sizeof(why));
	CHECK_EQ(status, ISCSI_LOGIN_OUT_OF_RESOURCES);
	CHECK_STR(why, "login text too long");
}

int main(void)
{
	test_iser_keys();
	test_plain();
	test_digests();
	test_chap();
	test_chap_failures();
	test_discovery_and_refusals();
	test_bad_responses();
	test_long_text();
	return tap_done();
}
