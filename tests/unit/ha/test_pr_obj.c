/* The RADOS persistent reservation object (src/scsi/ha_pr_obj.c): encode/decode round trips with
 * and without unit attentions, a hand-written object (the format is a contract between
 * gateways of different builds), and damaged objects, each refused with a message and an
 * empty state. Also the client address taken from rados_getaddrs() output. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_pr_obj.h"
#include "tap.h"
#include "util/bytes.h"

#define IA "iqn.2024-01.org.example:a,i,0x00023d000001"
#define IB "iqn.2024-01.org.example:b,i,0x00023d000002"
#define TA "iqn.2024-01.org.example:t,t,0x0001"
#define TB "iqn.2024-01.org.example:t,t,0x0002"

static void build(struct pr_state *st)
{
	struct pr_nexus_id a = {IA, TA}, b = {IB, TB};

	pr_state_init(st);
	CHECK_EQ(pr_state_add_reg(st, 0x1111, &a), 0);
	CHECK_EQ(pr_state_add_reg(st, 0x2222, &b), 0);
	st->regs[1].holder = true;
	st->type = PR_WE;
	st->generation = 7;
	st->aptpl = true;
}

static void test_round_trip(void)
{
	struct pr_state st, back;
	struct pr_effects fx = {0}, fback;
	struct pr_ua ua = {(char *)IA, (char *)TA, 0x2a, 0x05};
	char *buf, err[256];
	size_t len;
	struct ha_pr_obj_ver seq;

	build(&st);
	pr_state_init(&back);
	CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){0xe1e1e1e1e1e1e1e1ULL, 42}, NULL,
				  &buf, &len),
		 0);
	CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, NULL, err, sizeof(err)), 0);
	CHECK_EQ(seq.seq, 42);
	CHECK_EQ(seq.epoch, 0xe1e1e1e1e1e1e1e1ULL);
	CHECK_EQ(back.generation, 7);
	CHECK(back.aptpl);
	CHECK_EQ(back.type, PR_WE);
	CHECK_EQ(back.nregs, 2);
	CHECK_EQ(back.regs[0].key, 0x1111);
	CHECK(!back.regs[0].holder);
	CHECK(back.regs[1].holder);
	CHECK_STR(back.regs[1].iport, IB);
	CHECK_STR(back.regs[1].tport, TB);
	free(buf);

	/* a notify payload: the same plus the unit attentions */
	fx.ua = &ua;
	fx.nua = 1;
	CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){1, 43}, &fx, &buf, &len), 0);
	CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, &fback, err, sizeof(err)), 0);
	CHECK_EQ(seq.seq, 43);
	CHECK_EQ(seq.epoch, 1);
	CHECK_EQ(fback.nua, 1);
	CHECK_STR(fback.ua[0].iport, IA);
	CHECK_STR(fback.ua[0].tport, TA);
	CHECK_EQ(fback.ua[0].asc, 0x2a);
	CHECK_EQ(fback.ua[0].ascq, 0x05);
	pr_effects_clear(&fback);
	/* ... which the stored object must not hold */
	CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, NULL, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "unit attention") != NULL);
	CHECK_EQ(back.nregs, 0);
	free(buf);

	/* PREEMPT AND ABORT: the nexuses whose tasks every gateway aborts */
	{
		struct pr_ua ab[2] = {{(char *)IA, (char *)TA, 0, 0},
				      {(char *)IB, (char *)TB, 0, 0}};

		fx.abort = ab;
		fx.nabort = 2;
		CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){1, 44}, &fx, &buf, &len), 0);
		CHECK(strstr(buf, "\nabort " IA " " TA "\nabort " IB " " TB "\n") != NULL);
		CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, &fback, err, sizeof(err)), 0);
		CHECK_EQ(fback.nua, 1);
		CHECK_EQ(fback.nabort, 2);
		CHECK_STR(fback.abort[0].iport, IA);
		CHECK_STR(fback.abort[0].tport, TA);
		CHECK_STR(fback.abort[1].iport, IB);
		CHECK_STR(fback.abort[1].tport, TB);
		CHECK_EQ(back.nregs, 2);
		pr_effects_clear(&fback);
		CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, NULL, err, sizeof(err)), -EINVAL);
		free(buf);
		/* aborts without unit attentions */
		fx.nua = 0;
		CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){1, 45}, &fx, &buf, &len), 0);
		CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, NULL, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "an abort line in the stored object") != NULL);
		CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, &fback, err, sizeof(err)), 0);
		CHECK(fback.nua == 0 && fback.nabort == 2);
		pr_effects_clear(&fback);
		free(buf);
	}
	pr_state_clear(&st);
	pr_state_clear(&back);
}

/* Version 2: the SPC-2 reservation travels with the state; without one the object is
 * version 1, as before. */
static void test_spc2(void)
{
	struct pr_state st, back;
	struct ha_pr_obj_ver seq;
	char *buf, err[256], text[1024];
	size_t len;
	int n;

	build(&st);
	pr_state_init(&back);
	CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){3, 9}, NULL, &buf, &len), 0);
	CHECK(strncmp(buf, "ix-pr-rados 1\n", 14) == 0);
	CHECK(strstr(buf, "spc2") == NULL);
	free(buf);
	CHECK_EQ(pr_state_set_spc2(&st, IB, TB, 0x4242), 0);
	CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){3, 10}, NULL, &buf, &len), 0);
	CHECK(strncmp(buf, "ix-pr-rados 2\n", 14) == 0);
	CHECK(strstr(buf, "\ntype 1\nspc2 0000000000004242 " IB " " TB "\nreg ") != NULL);
	CHECK_EQ(ha_pr_obj_decode(buf, len, &back, &seq, NULL, err, sizeof(err)), 0);
	CHECK_STR(back.spc2_iport, IB);
	CHECK_STR(back.spc2_tport, TB);
	CHECK_EQ(back.spc2_gid, 0x4242);
	CHECK(pr_spc2_is(&back, &(struct pr_nexus_id){IB, TB}));
	CHECK(!pr_spc2_is(&back, &(struct pr_nexus_id){IA, TA}));
	CHECK_EQ(back.nregs, 2);
	CHECK_EQ(seq.seq, 10);
	free(buf);
	/* a copy keeps it, clearing drops it */
	pr_state_clear(&back);
	CHECK_EQ(pr_state_copy(&back, &st), 0);
	CHECK_STR(back.spc2_iport, IB);
	CHECK_EQ(pr_state_set_spc2(&back, NULL, NULL, 0), 0);
	CHECK(back.spc2_iport == NULL && back.spc2_tport == NULL && back.spc2_gid == 0);
	/* by hand: a version 2 object with no registrations */
	n = snprintf(text, sizeof(text),
		     "ix-pr-rados 2\nepoch 00000000000000ab\nseq 5\ngeneration 3\naptpl 0\n"
		     "type 0\nspc2 00000000000000cd " IA " " TA "\n");
	snprintf(text + n, sizeof(text) - (size_t)n, "sum %016" PRIx64 "\n",
		 fnv1a64(FNV1A64_INIT, text, (size_t)n));
	CHECK_EQ(ha_pr_obj_decode(text, strlen(text), &back, &seq, NULL, err, sizeof(err)), 0);
	CHECK_EQ(back.spc2_gid, 0xcd);
	CHECK_STR(back.spc2_iport, IA);
	CHECK_EQ(back.nregs, 0);
	pr_state_clear(&st);
	pr_state_clear(&back);
}

/* Written by hand from the format in ha_pr_obj.c, checksum computed here. */
static void test_hand_written(void)
{
	char text[1024], err[256];
	struct pr_state st;
	struct ha_pr_obj_ver seq;
	int n;

	n = snprintf(text, sizeof(text),
		     "ix-pr-rados 1\nepoch 00000000000000ab\nseq 5\ngeneration 3\naptpl 0\n"
		     "type 7\n"
		     "reg 00000000000000aa 0 " IA " " TA "\n");
	snprintf(text + n, sizeof(text) - (size_t)n, "sum %016" PRIx64 "\n",
		 fnv1a64(FNV1A64_INIT, text, (size_t)n));
	pr_state_init(&st);
	CHECK_EQ(ha_pr_obj_decode(text, strlen(text), &st, &seq, NULL, err, sizeof(err)), 0);
	CHECK_EQ(seq.seq, 5);
	CHECK_EQ(seq.epoch, 0xab);
	CHECK_EQ(st.generation, 3);
	CHECK_EQ(st.type, PR_WE_AR);
	CHECK_EQ(st.nregs, 1);
	CHECK_EQ(st.regs[0].key, 0xaa);
	pr_state_clear(&st);
}

/* Re-sum text (without its sum line) and decode; returns the decoder's result. */
static int decode_resummed(const char *body, char *err, size_t errlen)
{
	char text[2048];
	struct pr_state st;
	struct ha_pr_obj_ver seq;
	int n = snprintf(text, sizeof(text), "%s", body), rc;

	snprintf(text + n, sizeof(text) - (size_t)n, "sum %016" PRIx64 "\n",
		 fnv1a64(FNV1A64_INIT, text, (size_t)n));
	pr_state_init(&st);
	rc = ha_pr_obj_decode(text, strlen(text), &st, &seq, NULL, err, errlen);
	CHECK_EQ(st.nregs, 0); /* never a partial state */
	if (rc)
		CHECK(seq.seq == 0 && seq.epoch == 0);
	pr_state_clear(&st);
	return rc;
}

static void test_damaged(void)
{
	static const struct {
		const char *body, *why;
	} cases[] = {
	    {"ix-pr-rados 3\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n",
	     "unknown version"},
	    /* version 2: the SPC-2 reservation line after the type, always */
	    {"ix-pr-rados 2\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n",
	     "truncated before the SPC-2 reservation"},
	    {"ix-pr-rados 2\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "reg 00000000000000aa 0 " IA " " TA "\n",
	     "expected \"spc2"},
	    {"ix-pr-rados 2\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "spc2 0000000000000000 " IA " " TA "\n",
	     "client id"},
	    {"ix-pr-rados 2\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "spc2 12 " IA " " TA "\n",
	     "client id"},
	    {"ix-pr-rados 2\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "spc2 0000000000001234 " TA " " TA "\n",
	     "initiator port"},
	    {"ix-pr-rados 2\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "spc2 0000000000001234 " IA "\n",
	     "expected \"spc2"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "spc2 0000000000001234 " IA " " TA "\n",
	     "expected \"reg"},
	    {"ix-pr-rados 1\nepoch 1\nseq 1\ngeneration 0\naptpl 0\ntype 0\n", "epoch"},
	    {"ix-pr-rados 1\nseq 1\ngeneration 0\naptpl 0\ntype 0\n", "epoch"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq x\ngeneration 0\naptpl 0\ntype 0\n",
	     "seq"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 2\ntype 0\n",
	     "aptpl"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 2\n",
	     "unknown reservation type"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\n", "truncated"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 1\n"
	     "reg 00000000000000aa 0 " IA " " TA "\n",
	     "exactly one holder"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "reg 0000000000000000 0 " IA " " TA "\n",
	     "not zero"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "reg 00000000000000aa 0 " IA " " TA "\nreg 00000000000000bb 0 " IA " " TA "\n",
	     "twice"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "reg 00000000000000aa 0 iqn.x,t,0x1 " TA "\n",
	     "initiator port"},
	    {"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"
	     "reg 00000000000000aa 0 " IA "\n",
	     "expected \"reg"},
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = 0;
		CHECK_EQ(decode_resummed(cases[i].body, err, sizeof(err)), -EINVAL);
		if (!strstr(err, cases[i].why))
			printf("# case %zu: \"%s\" does not say \"%s\"\n", i, err, cases[i].why);
		CHECK(strstr(err, cases[i].why) != NULL);
	}
}

/* Notify payload lines that are wrong (decoded with unit attentions and aborts accepted). */
static void test_payload_damaged(void)
{
#define HEAD                                                                                       \
	"ix-pr-rados 1\nepoch 0000000000000001\nseq 1\ngeneration 0\naptpl 0\ntype 0\n"            \
	"reg 00000000000000aa 0 " IA " " TA "\n"
	static const struct {
		const char *body, *why;
	} cases[] = {
	    {HEAD "abort " IA "\n", "expected \"abort <initiator port> <target port>\""},
	    {HEAD "abort " IA " " TA " x\n", "expected \"abort"},
	    {HEAD "abort " TA " " TA "\n", "initiator port"},
	    {HEAD "abort " IA " " IA "\n", "target port"},
	    {HEAD "aborts " IA " " TA "\n", "expected \"reg"},
	    {HEAD "abort " IA " " TA "\nreg 00000000000000bb 0 " IB " " TB "\n",
	     "a registration after the unit attentions or aborts"},
	    {HEAD "ua 2a 05 " IA " " TA "\nabort " IA " " TA "\nreg 00000000000000bb 0 " IB " " TB
		  "\n",
	     "a registration after"},
	};
#undef HEAD
	char text[2048], err[256];
	struct pr_state st;
	struct pr_effects fx;
	struct ha_pr_obj_ver seq;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = snprintf(text, sizeof(text), "%s", cases[i].body);

		snprintf(text + n, sizeof(text) - (size_t)n, "sum %016" PRIx64 "\n",
			 fnv1a64(FNV1A64_INIT, text, (size_t)n));
		pr_state_init(&st);
		err[0] = 0;
		CHECK_EQ(ha_pr_obj_decode(text, strlen(text), &st, &seq, &fx, err, sizeof(err)),
			 -EINVAL);
		CHECK(st.nregs == 0 && fx.nua == 0 && fx.nabort == 0);
		if (!strstr(err, cases[i].why))
			printf("# case %zu: \"%s\" does not say \"%s\"\n", i, err, cases[i].why);
		CHECK(strstr(err, cases[i].why) != NULL);
		pr_state_clear(&st);
	}
}

static void test_bytes(void)
{
	struct pr_state st;
	char *buf, err[256];
	size_t len;
	struct ha_pr_obj_ver seq;

	build(&st);
	CHECK_EQ(ha_pr_obj_encode(&st, &(struct ha_pr_obj_ver){2, 1}, NULL, &buf, &len), 0);
	pr_state_clear(&st);
	buf[len / 2] ^= 0x01; /* one bit anywhere */
	CHECK_EQ(ha_pr_obj_decode(buf, len, &st, &seq, NULL, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "checksum") != NULL);
	buf[len / 2] ^= 0x01;
	CHECK_EQ(ha_pr_obj_decode(buf, len - 1, &st, &seq, NULL, err, sizeof(err)), -EINVAL);
	CHECK_EQ(ha_pr_obj_decode(buf, 0, &st, &seq, NULL, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "empty") != NULL);
	buf[3] = 0;
	CHECK_EQ(ha_pr_obj_decode(buf, len, &st, &seq, NULL, err, sizeof(err)), -EINVAL);
	CHECK_EQ(ha_pr_obj_decode("garbage\n", 8, &st, &seq, NULL, err, sizeof(err)), -EINVAL);
	CHECK_EQ(st.nregs, 0);
	free(buf);
}

static void test_client_addr(void)
{
	char a[64];

	CHECK_EQ(ha_pr_client_addr("[v2:127.0.0.1:0/123,v1:127.0.0.1:0/123]", a, sizeof(a)), 0);
	CHECK_STR(a, "127.0.0.1:0/123");
	CHECK_EQ(ha_pr_client_addr("[any:10.1.2.3:0/4567]", a, sizeof(a)), 0);
	CHECK_STR(a, "10.1.2.3:0/4567");
	CHECK_EQ(ha_pr_client_addr("v1:10.1.2.3:6800/99", a, sizeof(a)), 0);
	CHECK_STR(a, "10.1.2.3:6800/99");
	CHECK_EQ(ha_pr_client_addr("10.1.2.3:0/7", a, sizeof(a)), 0);
	CHECK_STR(a, "10.1.2.3:0/7");
	CHECK_EQ(ha_pr_client_addr("[]", a, sizeof(a)), -EINVAL);
	CHECK_EQ(ha_pr_client_addr("nonsense", a, sizeof(a)), -EINVAL);
	CHECK_EQ(ha_pr_client_addr("10.1.2.3:0/7", a, 5), -EINVAL);
}

int main(void)
{
	test_round_trip();
	test_spc2();
	test_hand_written();
	test_damaged();
	test_payload_damaged();
	test_bytes();
	test_client_addr();
	return tap_done();
}
