/* Operational key negotiation (session/keys): acceptor answers for every key, proposer-side
 * checks of answers, context rules (security stage, discovery, non-leading connection, Text in
 * full feature phase), and initiator/target states negotiating with each other through the
 * real text builder and parser. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/pdu.h"
#include "session/keys.h"
#include "tap.h"

#define OP ISCSI_STAGE_OPERATIONAL

/* Value of key in a text_out buffer, or NULL. Also counts occurrences in *count if given. */
static const char *out_get(const struct text_out *o, const char *key, int *count)
{
	const char *found = NULL;
	size_t klen = strlen(key), pos = 0;
	int c = 0;

	while (pos < o->len) {
		const char *pair = o->buf + pos;

		if (strncmp(pair, key, klen) == 0 && pair[klen] == '=') {
			if (!found)
				found = pair + klen + 1;
			c++;
		}
		pos += strlen(pair) + 1;
	}
	if (count)
		*count = c;
	return found;
}

static int out_pairs(const struct text_out *o)
{
	int n = 0;

	for (size_t pos = 0; pos < o->len; pos += strlen(o->buf + pos) + 1)
		n++;
	return n;
}

/* A target whose preferences differ from the RFC defaults, so Min/Max/AND/OR show. */
static void target_prefs(struct neg_prefs *p)
{
	neg_prefs_default(p);
	p->sess.max_connections = 8;
	p->sess.initial_r2t = false;
	p->sess.immediate_data = true;
	p->sess.max_burst_length = 1048576;
	p->sess.first_burst_length = 262144;
	p->sess.default_time2wait = 2;
	p->sess.default_time2retain = 20;
	p->sess.max_outstanding_r2t = 4;
	p->sess.error_recovery_level = 0;
	p->header_digest = NEG_DIGEST_PREFER_CRC;
	p->data_digest = NEG_DIGEST_PREFER_NONE;
	p->max_recv_dsl = 65536;
}

struct acc_case {
	const char *key, *value, *answer; /* answer NULL: no reply expected */
};

static const struct acc_case acceptor_cases[] = {
    /* lists: first of the proposer's list we support */
    {"HeaderDigest", "CRC32C,None", "CRC32C"},
    {"HeaderDigest", "None,CRC32C", "None"},
    {"HeaderDigest", "None", "None"},
    {"HeaderDigest", "CRC32C", "CRC32C"},
    {"HeaderDigest", "MD5,CRC32C", "CRC32C"},
    {"HeaderDigest", "MD5", "Reject"},
    {"HeaderDigest", "", "Reject"},
    {"HeaderDigest", "CRC32C,,None", "Reject"},
    {"HeaderDigest", "crc32c", "Reject"},
    {"DataDigest", "CRC32C,None", "CRC32C"},
    {"DataDigest", "None", "None"},
    {"DataDigest", "X", "Reject"},
    /* Min */
    {"MaxConnections", "4", "4"},
    {"MaxConnections", "16", "8"},
    {"MaxConnections", "0x10", "8"},
    {"MaxConnections", "0", "Reject"},
    {"MaxConnections", "65536", "Reject"},
    {"MaxConnections", "four", "Reject"},
    {"MaxConnections", "", "Reject"},
    {"MaxConnections", "-1", "Reject"},
    {"MaxBurstLength", "262144", "262144"},
    {"MaxBurstLength", "16776192", "1048576"},
    {"MaxBurstLength", "512", "512"},
    {"MaxBurstLength", "511", "Reject"},
    {"MaxBurstLength", "16777216", "Reject"},
    {"MaxBurstLength", "1e6", "Reject"},
    {"FirstBurstLength", "65536", "65536"},
    {"FirstBurstLength", "16777215", "262144"},
    {"FirstBurstLength", "100", "Reject"},
    {"FirstBurstLength", "65536 ", "Reject"},
    {"DefaultTime2Retain", "0", "0"},
    {"DefaultTime2Retain", "60", "20"},
    {"DefaultTime2Retain", "3601", "Reject"},
    {"MaxOutstandingR2T", "1", "1"},
    {"MaxOutstandingR2T", "16", "4"},
    {"MaxOutstandingR2T", "0", "Reject"},
    {"MaxOutstandingR2T", "65536", "Reject"},
    {"ErrorRecoveryLevel", "2", "0"},
    {"ErrorRecoveryLevel", "0", "0"},
    {"ErrorRecoveryLevel", "3", "Reject"},
    {"iSCSIProtocolLevel", "1", "1"},
    {"iSCSIProtocolLevel", "2", "1"},
    {"iSCSIProtocolLevel", "0", "0"},
    {"iSCSIProtocolLevel", "32", "Reject"},
    /* Max */
    {"DefaultTime2Wait", "0", "2"},
    {"DefaultTime2Wait", "10", "10"},
    {"DefaultTime2Wait", "3600", "3600"},
    {"DefaultTime2Wait", "3601", "Reject"},
    {"DefaultTime2Wait", "x", "Reject"},
    /* Boolean OR (our InitialR2T is No, data ordering Yes) */
    {"InitialR2T", "Yes", "Yes"},
    {"InitialR2T", "No", "No"},
    {"InitialR2T", "yes", "Reject"},
    {"InitialR2T", "", "Reject"},
    {"DataPDUInOrder", "No", "Yes"},
    {"DataPDUInOrder", "Yes", "Yes"},
    {"DataPDUInOrder", "1", "Reject"},
    {"DataSequenceInOrder", "No", "Yes"},
    {"DataSequenceInOrder", "Y", "Reject"},
    /* Boolean AND (our ImmediateData is Yes) */
    {"ImmediateData", "Yes", "Yes"},
    {"ImmediateData", "No", "No"},
    {"ImmediateData", "Maybe", "Reject"},
    /* TaskReporting: RFC3720 only */
    {"TaskReporting", "ResponseFence,RFC3720", "RFC3720"},
    {"TaskReporting", "RFC3720", "RFC3720"},
    {"TaskReporting", "FastAbort", "Reject"},
    {"TaskReporting", "", "Reject"},
    /* obsolete markers: never NotUnderstood */
    {"IFMarker", "No", "No"},
    {"IFMarker", "Yes", "No"},
    {"IFMarker", "x", "Reject"},
    {"OFMarker", "No", "No"},
    {"OFMarker", "Yes", "No"},
    {"IFMarkInt", "2048", "Reject"},
    {"IFMarkInt", "1~65535", "Reject"},
    {"OFMarkInt", "2048", "Reject"},
    {"OFMarkInt", "", "Reject"},
    /* iSER keys: not supported yet */
    {"RDMAExtensions", "Yes", "No"},
    {"RDMAExtensions", "No", "No"},
    {"RDMAExtensions", "x", "Reject"},
    {"TargetRecvDataSegmentLength", "8192", "Irrelevant"},
    {"InitiatorRecvDataSegmentLength", "262144", "Irrelevant"},
    {"MaxOutstandingUnexpectedPDUs", "0", "Irrelevant"},
    {"iSERHelloRequired", "Yes", "Irrelevant"},
    {"MaxAHSLength", "256", "Irrelevant"},
    {"TaggedBufferForSolicitedDataOnly", "No", "Irrelevant"},
    /* declarative: answered with our own declaration */
    {"MaxRecvDataSegmentLength", "262144", "65536"},
    {"MaxRecvDataSegmentLength", "512", "65536"},
    {"MaxRecvDataSegmentLength", "511", "Reject"},
    {"MaxRecvDataSegmentLength", "16777216", "Reject"},
    {"MaxRecvDataSegmentLength", "lots", "Reject"},
    /* unknown keys */
    {"X-com.example.Feature", "Yes", "NotUnderstood"},
    {"X#vendor", "1", "NotUnderstood"},
    {"NoSuchKey", "1", "NotUnderstood"},
    {"X-com.example.Feature", "NotUnderstood", NULL},
};

static void test_acceptor_table(void)
{
	struct neg_prefs p;

	target_prefs(&p);
	for (size_t i = 0; i < sizeof(acceptor_cases) / sizeof(acceptor_cases[0]); i++) {
		const struct acc_case *c = &acceptor_cases[i];
		struct neg_state st;
		struct text_out o;
		char buf[512];
		int count = 0, r;
		const char *a;

		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		text_out_init(&o, buf, sizeof(buf));
		r = neg_recv(&st, OP, c->key, c->value, &o);
		a = out_get(&o, c->key, &count);
		if (r != 0 || (c->answer ? !a || strcmp(a, c->answer) != 0 : o.len != 0))
			printf("# %s=%s -> r=%d answer %s (want %s)\n", c->key, c->value, r,
			       a ? a : "(none)", c->answer ? c->answer : "(none)");
		CHECK_EQ(r, 0);
		if (c->answer) {
			CHECK_STR(a, c->answer);
			CHECK_EQ(count, 1);
		} else {
			CHECK_EQ(o.len, 0);
		}
	}
}

/* Results recorded by the acceptor. */
static void test_acceptor_results(void)
{
	struct neg_prefs p;
	struct neg_state st;
	struct text_out o;
	char buf[2048];
	static const char *const kv[][2] = {
	    {"HeaderDigest", "CRC32C,None"}, {"DataDigest", "CRC32C,None"},
	    {"MaxConnections", "2"},	     {"InitialR2T", "Yes"},
	    {"ImmediateData", "No"},	     {"MaxRecvDataSegmentLength", "131072"},
	    {"MaxBurstLength", "16776192"},  {"FirstBurstLength", "262144"},
	    {"DefaultTime2Wait", "5"},	     {"DefaultTime2Retain", "0"},
	    {"MaxOutstandingR2T", "2"},	     {"DataPDUInOrder", "No"},
	    {"DataSequenceInOrder", "Yes"},  {"ErrorRecoveryLevel", "1"},
	    {"iSCSIProtocolLevel", "1"},
	};

	target_prefs(&p);
	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		CHECK_EQ(neg_recv(&st, OP, kv[i][0], kv[i][1], &o), 0);
	CHECK_EQ(out_pairs(&o), (int)(sizeof(kv) / sizeof(kv[0])));
	CHECK(st.conn.header_digest);
	CHECK(st.conn.data_digest); /* the proposer's order decides, not ours */
	CHECK_EQ(st.sess.max_connections, 2);
	CHECK(st.sess.initial_r2t);
	CHECK(!st.sess.immediate_data);
	CHECK_EQ(st.conn.max_xmit_dsl, 131072);
	CHECK_EQ(st.conn.max_recv_dsl, 65536);
	CHECK_EQ(st.sess.max_burst_length, 1048576);
	CHECK_EQ(st.sess.first_burst_length, 262144);
	CHECK_EQ(st.sess.default_time2wait, 5);
	CHECK_EQ(st.sess.default_time2retain, 0);
	CHECK_EQ(st.sess.max_outstanding_r2t, 2);
	CHECK(st.sess.data_pdu_in_order);
	CHECK(st.sess.data_sequence_in_order);
	CHECK_EQ(st.sess.error_recovery_level, 0);
	CHECK(neg_settled(&st));
	CHECK_EQ(neg_finish(&st), 0);
	/* Everything was proposed by the peer: nothing left to propose but nothing to declare
	   either (MaxRecvDataSegmentLength went out with the answer). */
	o.len = 0;
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_EQ(o.len, 0);
}

/* Discovery sessions: session keys open-iscsi treats as irrelevant are answered Irrelevant;
 * the rest is negotiated, ERL capped at 0. */
static void test_discovery(void)
{
	static const struct acc_case cases[] = {
	    {"MaxConnections", "1", "Irrelevant"},
	    {"InitialR2T", "Yes", "Irrelevant"},
	    {"ImmediateData", "Yes", "Irrelevant"},
	    {"MaxBurstLength", "262144", "Irrelevant"},
	    {"FirstBurstLength", "65536", "Irrelevant"},
	    {"MaxOutstandingR2T", "1", "Irrelevant"},
	    {"DataPDUInOrder", "Yes", "Irrelevant"},
	    {"DataSequenceInOrder", "Yes", "Irrelevant"},
	    {"RDMAExtensions", "Yes", "Irrelevant"},
	    {"MaxBurstLength", "bogus", "Irrelevant"},
	    {"ErrorRecoveryLevel", "2", "0"},
	    {"DefaultTime2Wait", "0", "2"},
	    {"DefaultTime2Retain", "0", "0"},
	    {"HeaderDigest", "None", "None"},
	    {"DataDigest", "CRC32C,None", "CRC32C"},
	    {"IFMarker", "No", "No"},
	    {"MaxRecvDataSegmentLength", "32768", "65536"},
	};
	struct neg_prefs p;

	target_prefs(&p);
	p.sess.error_recovery_level = 2;
	p.data_digest = NEG_DIGEST_PREFER_CRC;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct neg_state st;
		struct text_out o;
		char buf[256];

		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		neg_set_session_type(&st, ISCSI_SESSION_DISCOVERY);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_recv(&st, OP, cases[i].key, cases[i].value, &o), 0);
		CHECK_STR(out_get(&o, cases[i].key, NULL), cases[i].answer);
	}

	/* A discovery target proposes nothing session-wide, declares MaxRecvDataSegmentLength. */
	{
		struct neg_state st;
		struct text_out o;
		char buf[512];

		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		neg_set_session_type(&st, ISCSI_SESSION_DISCOVERY);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_propose(&st, &o), 0);
		CHECK_STR(out_get(&o, "MaxRecvDataSegmentLength", NULL), "65536");
		CHECK(out_get(&o, "InitialR2T", NULL) == NULL);
		CHECK(out_get(&o, "MaxConnections", NULL) == NULL);
		CHECK(out_get(&o, "ErrorRecoveryLevel", NULL) == NULL);
		CHECK_STR(out_get(&o, "HeaderDigest", NULL), "CRC32C,None");
		CHECK_EQ(neg_finish(&st), 0);
		CHECK_EQ(st.sess.max_connections, 1);
		CHECK_EQ(st.sess.error_recovery_level, 0);
	}
}

/* LO keys on a connection added to an existing session are Irrelevant. */
static void test_non_leading(void)
{
	static const struct acc_case cases[] = {
	    {"MaxConnections", "4", "Irrelevant"},
	    {"InitialR2T", "No", "Irrelevant"},
	    {"ImmediateData", "Yes", "Irrelevant"},
	    {"MaxBurstLength", "65536", "Irrelevant"},
	    {"FirstBurstLength", "65536", "Irrelevant"},
	    {"DefaultTime2Wait", "2", "Irrelevant"},
	    {"DefaultTime2Retain", "20", "Irrelevant"},
	    {"MaxOutstandingR2T", "1", "Irrelevant"},
	    {"DataPDUInOrder", "Yes", "Irrelevant"},
	    {"DataSequenceInOrder", "Yes", "Irrelevant"},
	    {"ErrorRecoveryLevel", "0", "Irrelevant"},
	    {"iSCSIProtocolLevel", "1", "Irrelevant"},
	    {"TaskReporting", "RFC3720", "Irrelevant"},
	    {"RDMAExtensions", "No", "Irrelevant"},
	    {"HeaderDigest", "CRC32C", "CRC32C"},
	    {"DataDigest", "None", "None"},
	    {"MaxRecvDataSegmentLength", "8192", "65536"},
	    {"IFMarker", "No", "No"},
	};
	struct neg_prefs p;
	struct neg_state st;
	struct text_out o;
	char buf[512];

	target_prefs(&p);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		neg_init(&st, ISCSI_ROLE_TARGET, &p, false);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_recv(&st, OP, cases[i].key, cases[i].value, &o), 0);
		CHECK_STR(out_get(&o, cases[i].key, NULL), cases[i].answer);
	}
	/* ... and never proposed there. */
	neg_init(&st, ISCSI_ROLE_TARGET, &p, false);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK(out_get(&o, "InitialR2T", NULL) == NULL);
	CHECK(out_get(&o, "MaxBurstLength", NULL) == NULL);
	CHECK_STR(out_get(&o, "HeaderDigest", NULL), "CRC32C,None");
	CHECK_STR(out_get(&o, "MaxRecvDataSegmentLength", NULL), "65536");
}

/* Stages: operational keys must not appear in the security stage (RFC 7143 section 12); only
 * Use=ALL keys may be renegotiated by Text in full feature phase. */
static void test_stages(void)
{
	struct neg_prefs p;
	struct neg_state st;
	struct text_out o;
	char buf[256];

	target_prefs(&p);
	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_SECURITY, "MaxBurstLength", "65536", &o), -EPROTO);
	CHECK(strstr(st.error, "MaxBurstLength") != NULL);
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_SECURITY, "HeaderDigest", "None", &o), -EPROTO);
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_SECURITY, "IFMarker", "No", &o), -EPROTO);
	CHECK_EQ(o.len, 0);
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_SECURITY, "X-com.example.k", "1", &o), 0);
	CHECK_STR(out_get(&o, "X-com.example.k", NULL), "NotUnderstood");
	CHECK_EQ(neg_recv(&st, 2, "MaxBurstLength", "65536", &o), -EINVAL);

	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_FULL_FEATURE, "HeaderDigest", "CRC32C", &o), 0);
	CHECK_STR(out_get(&o, "HeaderDigest", NULL), "Reject");
	CHECK(!st.conn.header_digest);
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_FULL_FEATURE, "MaxBurstLength", "4096", &o), 0);
	CHECK_STR(out_get(&o, "MaxBurstLength", NULL), "Reject");
	CHECK_EQ(st.sess.max_burst_length, 262144);
	CHECK_EQ(neg_recv(&st, ISCSI_STAGE_FULL_FEATURE, "MaxRecvDataSegmentLength", "16384", &o),
		 0);
	CHECK_EQ(st.conn.max_xmit_dsl, 16384);

	/* Keys that belong to the login code or to auth are refused, not answered. */
	CHECK_EQ(neg_recv(&st, OP, "InitiatorName", "iqn.x", &o), -EINVAL);
	CHECK_EQ(neg_recv(&st, OP, "CHAP_A", "5", &o), -EINVAL);
}

static void test_handles_key(void)
{
	CHECK(neg_handles_key("MaxBurstLength"));
	CHECK(neg_handles_key("HeaderDigest"));
	CHECK(neg_handles_key("IFMarkInt"));
	CHECK(neg_handles_key("RDMAExtensions"));
	CHECK(neg_handles_key("X-com.example.k"));
	CHECK(neg_handles_key("X#k"));
	CHECK(neg_handles_key("SomethingNew"));
	CHECK(!neg_handles_key("AuthMethod"));
	CHECK(!neg_handles_key("CHAP_A"));
	CHECK(!neg_handles_key("CHAP_R"));
	CHECK(!neg_handles_key("InitiatorName"));
	CHECK(!neg_handles_key("TargetName"));
	CHECK(!neg_handles_key("SessionType"));
	CHECK(!neg_handles_key("InitiatorAlias"));
	CHECK(!neg_handles_key("TargetAlias"));
	CHECK(!neg_handles_key("TargetPortalGroupTag"));
	CHECK(!neg_handles_key("TargetAddress"));
	CHECK(!neg_handles_key("SendTargets"));
	CHECK(!neg_handles_key(""));
}

/* Protocol errors the acceptor must catch. */
static void test_acceptor_errors(void)
{
	struct neg_prefs p;
	struct neg_state st;
	struct text_out o;
	char buf[256], tiny[8], longv[300];

	target_prefs(&p);
	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), -EPROTO);
	CHECK(strstr(st.error, "twice") != NULL);
	/* twice even when the first was rejected */
	CHECK_EQ(neg_recv(&st, OP, "ImmediateData", "Perhaps", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "ImmediateData", "Yes", &o), -EPROTO);
	CHECK_EQ(neg_recv(&st, OP, "MaxRecvDataSegmentLength", "8192", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "MaxRecvDataSegmentLength", "8192", &o), -EPROTO);

	/* An "answer" to something we never proposed. */
	CHECK_EQ(neg_recv(&st, OP, "MaxConnections", "Reject", &o), -EPROTO);
	CHECK_EQ(neg_recv(&st, OP, "DataDigest", "NotUnderstood", &o), -EPROTO);
	CHECK_EQ(neg_recv(&st, OP, "InitialR2T", "Irrelevant", &o), -EPROTO);

	/* Over-long list value: Reject, not a crash or a truncated pick. */
	memset(longv, 'A', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	memcpy(longv + sizeof(longv) - 8, ",CRC32C", 7);
	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	o.len = 0;
	CHECK_EQ(neg_recv(&st, OP, "HeaderDigest", longv, &o), 0);
	CHECK_STR(out_get(&o, "HeaderDigest", NULL), "Reject");

	/* Full output: -ENOSPC and nothing recorded, so the key can be fed again. */
	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	text_out_init(&o, tiny, sizeof(tiny));
	CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), -ENOSPC);
	CHECK_EQ(st.sess.max_burst_length, 262144);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), 0);
	CHECK_EQ(st.sess.max_burst_length, 65536);
}

/* An initiator that wants things: offer_all plus non-default values. */
static void initiator_prefs(struct neg_prefs *p)
{
	neg_prefs_default(p);
	p->offer_all = true;
	p->sess.max_connections = 1;
	p->sess.initial_r2t = false;
	p->sess.immediate_data = true;
	p->sess.max_burst_length = 16776192;
	p->sess.first_burst_length = 262144;
	p->sess.default_time2wait = 2;
	p->sess.default_time2retain = 0;
	p->sess.max_outstanding_r2t = 1;
	p->header_digest = NEG_DIGEST_PREFER_CRC;
	p->data_digest = NEG_DIGEST_NONE_ONLY;
	p->max_recv_dsl = 262144;
}

static void test_propose(void)
{
	struct neg_prefs p;
	struct neg_state st;
	struct text_out o;
	char buf[1024];

	initiator_prefs(&p);
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_STR(out_get(&o, "HeaderDigest", NULL), "CRC32C,None");
	CHECK_STR(out_get(&o, "DataDigest", NULL), "None");
	CHECK_STR(out_get(&o, "MaxConnections", NULL), "1");
	CHECK_STR(out_get(&o, "InitialR2T", NULL), "No");
	CHECK_STR(out_get(&o, "ImmediateData", NULL), "Yes");
	CHECK_STR(out_get(&o, "MaxRecvDataSegmentLength", NULL), "262144");
	CHECK_STR(out_get(&o, "MaxBurstLength", NULL), "16776192");
	CHECK_STR(out_get(&o, "FirstBurstLength", NULL), "262144");
	CHECK_STR(out_get(&o, "DefaultTime2Wait", NULL), "2");
	CHECK_STR(out_get(&o, "DefaultTime2Retain", NULL), "0");
	CHECK_STR(out_get(&o, "MaxOutstandingR2T", NULL), "1");
	CHECK_STR(out_get(&o, "DataPDUInOrder", NULL), "Yes");
	CHECK_STR(out_get(&o, "DataSequenceInOrder", NULL), "Yes");
	CHECK_STR(out_get(&o, "ErrorRecoveryLevel", NULL), "0");
	/* never offered: newer keys at their defaults, obsolete and unsupported keys */
	CHECK(out_get(&o, "iSCSIProtocolLevel", NULL) == NULL);
	CHECK(out_get(&o, "TaskReporting", NULL) == NULL);
	CHECK(out_get(&o, "IFMarker", NULL) == NULL);
	CHECK(out_get(&o, "IFMarkInt", NULL) == NULL);
	CHECK(out_get(&o, "RDMAExtensions", NULL) == NULL);
	CHECK(out_get(&o, "TargetRecvDataSegmentLength", NULL) == NULL);
	CHECK_EQ(out_pairs(&o), 14);
	CHECK_EQ(st.conn.max_recv_dsl, 262144);
	/* OR offered Yes: reply optional, result fixed; the others await answers */
	CHECK(st.sess.data_pdu_in_order);
	CHECK(!neg_settled(&st));
	/* Proposing again adds nothing. */
	o.len = 0;
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_EQ(o.len, 0);

	/* Without offer_all only values that differ from the defaults go out. */
	p.offer_all = false;
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_STR(out_get(&o, "HeaderDigest", NULL), "CRC32C,None");
	CHECK(out_get(&o, "DataDigest", NULL) == NULL);
	CHECK(out_get(&o, "MaxConnections", NULL) == NULL);
	CHECK_STR(out_get(&o, "InitialR2T", NULL), "No");
	CHECK(out_get(&o, "ImmediateData", NULL) == NULL);
	CHECK_STR(out_get(&o, "MaxBurstLength", NULL), "16776192");
	CHECK_STR(out_get(&o, "FirstBurstLength", NULL), "262144");
	CHECK_STR(out_get(&o, "DefaultTime2Retain", NULL), "0");
	CHECK(out_get(&o, "DefaultTime2Wait", NULL) == NULL);
	CHECK_STR(out_get(&o, "MaxRecvDataSegmentLength", NULL), "262144");
	CHECK_EQ(out_pairs(&o), 6);

	/* Keys the peer already proposed are answered, not proposed again. */
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_recv(&st, OP, "InitialR2T", "Yes", &o), 0);
	CHECK_STR(out_get(&o, "InitialR2T", NULL), "Yes");
	o.len = 0;
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK(out_get(&o, "InitialR2T", NULL) == NULL);
	CHECK(out_get(&o, "MaxBurstLength", NULL) != NULL);

	/* A FirstBurstLength preference above MaxBurstLength is offered clamped. */
	neg_prefs_default(&p);
	p.sess.max_burst_length = 65536;
	p.sess.first_burst_length = 131072;
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_STR(out_get(&o, "MaxBurstLength", NULL), "65536");
	CHECK(out_get(&o, "FirstBurstLength", NULL) == NULL); /* clamped to the default */
}

struct ans_case {
	const char *key, *answer;
	int ret;
};

/* Answers to the initiator_prefs proposal, one at a time. */
static const struct ans_case answer_cases[] = {
    {"HeaderDigest", "CRC32C", 0},
    {"HeaderDigest", "None", 0},
    {"HeaderDigest", "CRC32C,None", -EPROTO},
    {"HeaderDigest", "MD5", -EPROTO},
    {"HeaderDigest", "", -EPROTO},
    {"HeaderDigest", "Reject", 0},
    {"HeaderDigest", "Irrelevant", 0},
    {"HeaderDigest", "NotUnderstood", -EPROTO},
    {"DataDigest", "None", 0},
    {"DataDigest", "CRC32C", -EPROTO}, /* we offered None only */
    {"MaxConnections", "1", 0},
    {"MaxConnections", "2", -EPROTO},
    {"MaxConnections", "0", -EPROTO},
    {"InitialR2T", "No", 0},
    {"InitialR2T", "Yes", 0},
    {"InitialR2T", "yes", -EPROTO},
    {"ImmediateData", "No", 0},
    {"ImmediateData", "Yes", 0},
    {"MaxBurstLength", "262144", 0},
    {"MaxBurstLength", "16776192", 0},
    {"MaxBurstLength", "16776193", -EPROTO},
    {"MaxBurstLength", "100", -EPROTO},
    {"MaxBurstLength", "abc", -EPROTO},
    {"MaxBurstLength", "NotUnderstood", -EPROTO},
    {"FirstBurstLength", "65536", 0},
    {"FirstBurstLength", "262145", -EPROTO},
    {"DefaultTime2Wait", "2", 0},
    {"DefaultTime2Wait", "20", 0},
    {"DefaultTime2Wait", "1", -EPROTO}, /* Maximum: never below our offer */
    {"DefaultTime2Wait", "3601", -EPROTO},
    {"DefaultTime2Retain", "0", 0},
    {"DefaultTime2Retain", "20", -EPROTO},
    {"MaxOutstandingR2T", "1", 0},
    {"MaxOutstandingR2T", "2", -EPROTO},
    {"DataPDUInOrder", "Yes", 0},
    {"DataPDUInOrder", "No", -EPROTO}, /* OR offered Yes cannot become No */
    {"DataSequenceInOrder", "Yes", 0},
    {"ErrorRecoveryLevel", "0", 0},
    {"ErrorRecoveryLevel", "1", -EPROTO},
    {"ErrorRecoveryLevel", "Reject", 0},
};

static void test_proposer_answers(void)
{
	struct neg_prefs p;

	initiator_prefs(&p);
	for (size_t i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++) {
		const struct ans_case *c = &answer_cases[i];
		struct neg_state st;
		struct text_out o;
		char buf[1024];
		int r;

		neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_propose(&st, &o), 0);
		o.len = 0;
		r = neg_recv(&st, OP, c->key, c->answer, &o);
		if (r != c->ret)
			printf("# %s=%s -> %d (want %d): %s\n", c->key, c->answer, r, c->ret,
			       st.error);
		CHECK_EQ(r, c->ret);
		CHECK_EQ(o.len, 0); /* an answer is never answered */
	}
}

static void test_proposer_results(void)
{
	struct neg_prefs p;
	struct neg_state st;
	struct text_out o;
	char buf[1024];

	initiator_prefs(&p);
	p.sess.immediate_data = false; /* AND offered No: reply optional */
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_STR(out_get(&o, "ImmediateData", NULL), "No");
	CHECK(!st.sess.immediate_data);
	o.len = 0;
	CHECK_EQ(neg_recv(&st, OP, "HeaderDigest", "CRC32C", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "DataDigest", "None", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "MaxConnections", "1", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "InitialR2T", "Yes", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "MaxRecvDataSegmentLength", "8192", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "262144", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "FirstBurstLength", "65536", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "DefaultTime2Wait", "3", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "DefaultTime2Retain", "Reject", &o), 0);
	CHECK(!neg_settled(&st));
	CHECK_EQ(neg_recv(&st, OP, "MaxOutstandingR2T", "Irrelevant", &o), 0);
	CHECK(!neg_settled(&st));
	CHECK_EQ(neg_recv(&st, OP, "ErrorRecoveryLevel", "0", &o), 0);
	/* DataPDUInOrder/DataSequenceInOrder (OR offered Yes) and ImmediateData (AND offered
	   No) need no answer. */
	CHECK(neg_settled(&st));
	CHECK_EQ(o.len, 0);
	CHECK_EQ(neg_finish(&st), 0);
	CHECK(st.conn.header_digest);
	CHECK(!st.conn.data_digest);
	CHECK(st.sess.initial_r2t);
	CHECK(!st.sess.immediate_data);
	CHECK_EQ(st.conn.max_xmit_dsl, 8192);
	CHECK_EQ(st.conn.max_recv_dsl, 262144);
	CHECK_EQ(st.sess.max_burst_length, 262144);
	CHECK_EQ(st.sess.first_burst_length, 65536);
	CHECK_EQ(st.sess.default_time2wait, 3);
	CHECK_EQ(st.sess.default_time2retain, 20); /* Reject: default kept */
	CHECK_EQ(st.sess.max_outstanding_r2t, 1);
	/* A late optional reply is still checked. */
	CHECK_EQ(neg_recv(&st, OP, "ImmediateData", "Yes", &o), -EPROTO);

	/* An optional reply that agrees is accepted and recorded once. */
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "ImmediateData", "No", &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "ImmediateData", "No", &o), -EPROTO);

	/* A peer that refuses our MaxRecvDataSegmentLength declaration keeps assuming 8192. */
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_EQ(neg_recv(&st, OP, "MaxRecvDataSegmentLength", "Reject", &o), 0);
	CHECK_EQ(st.conn.max_recv_dsl, 8192);
	CHECK_EQ(st.conn.max_xmit_dsl, 8192);

	/* iSCSIProtocolLevel is newer than RFC 3720: NotUnderstood keeps the default. */
	neg_prefs_default(&p);
	p.sess.protocol_level = 2;
	neg_init(&st, ISCSI_ROLE_INITIATOR, &p, true);
	text_out_init(&o, buf, sizeof(buf));
	CHECK_EQ(neg_propose(&st, &o), 0);
	CHECK_STR(out_get(&o, "iSCSIProtocolLevel", NULL), "2");
	CHECK_EQ(neg_recv(&st, OP, "iSCSIProtocolLevel", "NotUnderstood", &o), 0);
	CHECK_EQ(st.sess.protocol_level, 1);
	CHECK(neg_settled(&st));
}

static void test_finish(void)
{
	struct neg_prefs p;
	struct neg_state st;

	neg_prefs_default(&p);
	neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
	CHECK_EQ(neg_finish(&st), 0);

	/* A proposer whose own offers are inconsistent: FirstBurstLength > MaxBurstLength. */
	{
		struct text_out o;
		char buf[256];

		p.sess.max_burst_length = 16777215;
		p.sess.first_burst_length = 16777215;
		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_recv(&st, OP, "FirstBurstLength", "131072", &o), 0);
		CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), 0);
		CHECK_EQ(neg_finish(&st), -EPROTO);
		CHECK(strstr(st.error, "FirstBurstLength") != NULL);

		/* ...unless no unsolicited data is possible: then it is clamped. */
		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_recv(&st, OP, "FirstBurstLength", "131072", &o), 0);
		CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), 0);
		CHECK_EQ(neg_recv(&st, OP, "ImmediateData", "No", &o), 0);
		CHECK_EQ(neg_finish(&st), 0);
		CHECK_EQ(st.sess.first_burst_length, 65536);

		/* With MaxBurstLength settled first, the acceptor keeps FirstBurstLength in it. */
		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_recv(&st, OP, "MaxBurstLength", "65536", &o), 0);
		CHECK_EQ(neg_recv(&st, OP, "FirstBurstLength", "131072", &o), 0);
		CHECK_STR(out_get(&o, "FirstBurstLength", NULL), "65536");
		CHECK_EQ(neg_finish(&st), 0);
	}

	/* Required CRC32C that the peer refused. */
	{
		struct text_out o;
		char buf[256];

		neg_prefs_default(&p);
		p.header_digest = NEG_DIGEST_CRC_ONLY;
		neg_init(&st, ISCSI_ROLE_TARGET, &p, true);
		text_out_init(&o, buf, sizeof(buf));
		CHECK_EQ(neg_recv(&st, OP, "HeaderDigest", "None", &o), 0);
		CHECK_STR(out_get(&o, "HeaderDigest", NULL), "Reject");
		CHECK_EQ(neg_finish(&st), -EPROTO);
		CHECK(strstr(st.error, "HeaderDigest") != NULL);
	}
}

/* Carry the text from one side to the other through the real parser. Returns the number of
 * pairs delivered, or a negative errno from the receiver. */
static int deliver(struct text_out *from, struct neg_state *to, struct text_out *reply)
{
	struct text_kv kv[64];
	char copy[4096];
	size_t n = 0;
	int r;

	if (from->len == 0)
		return 0;
	memcpy(copy, from->buf, from->len);
	r = text_parse(copy, from->len, kv, 64, &n);
	if (r)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = neg_recv(to, OP, kv[i].key, kv[i].value, reply);
		if (r) {
			printf("# %s=%s: %s\n", kv[i].key, kv[i].value, to->error);
			return r;
		}
	}
	return (int)n;
}

/* Negotiate like a login: the initiator proposes, the target answers and proposes, the
 * initiator answers and proposes what is left, until both are settled. */
static int negotiate(struct neg_state *ini, struct neg_state *tgt)
{
	char b1[4096], b2[4096];
	struct text_out req, rsp;
	int rounds = 0, r;

	text_out_init(&req, b1, sizeof(b1));
	if (neg_propose(ini, &req))
		return -ENOSPC;
	do {
		text_out_init(&rsp, b2, sizeof(b2));
		r = deliver(&req, tgt, &rsp);
		if (r < 0)
			return r;
		if (neg_propose(tgt, &rsp))
			return -ENOSPC;
		text_out_init(&req, b1, sizeof(b1));
		r = deliver(&rsp, ini, &req);
		if (r < 0)
			return r;
		if (neg_propose(ini, &req))
			return -ENOSPC;
		if (++rounds > 5)
			return -ELOOP;
	} while (req.len > 0 || !neg_settled(ini) || !neg_settled(tgt));
	r = neg_finish(ini);
	if (r)
		return r;
	return neg_finish(tgt);
}

static bool same_results(const struct neg_state *a, const struct neg_state *b)
{
	const struct iscsi_sess_params *x = &a->sess, *y = &b->sess;

	return x->max_connections == y->max_connections && x->initial_r2t == y->initial_r2t &&
	       x->immediate_data == y->immediate_data &&
	       x->max_burst_length == y->max_burst_length &&
	       x->first_burst_length == y->first_burst_length &&
	       x->default_time2wait == y->default_time2wait &&
	       x->default_time2retain == y->default_time2retain &&
	       x->max_outstanding_r2t == y->max_outstanding_r2t &&
	       x->data_pdu_in_order == y->data_pdu_in_order &&
	       x->data_sequence_in_order == y->data_sequence_in_order &&
	       x->error_recovery_level == y->error_recovery_level &&
	       x->protocol_level == y->protocol_level &&
	       a->conn.header_digest == b->conn.header_digest &&
	       a->conn.data_digest == b->conn.data_digest &&
	       a->conn.max_recv_dsl == b->conn.max_xmit_dsl &&
	       a->conn.max_xmit_dsl == b->conn.max_recv_dsl;
}

enum prefs_kind { PK_DEFAULT, PK_OPEN_ISCSI, PK_LIO, PK_TARGET_WANTS, PK_CRC_ONLY };

static void make_prefs(struct neg_prefs *p, enum prefs_kind k)
{
	neg_prefs_default(p);
	switch (k) {
	case PK_DEFAULT:
		break;
	case PK_OPEN_ISCSI: /* open-iscsi defaults (protocol.md 3.6) */
		p->offer_all = true;
		p->sess.initial_r2t = false;
		p->sess.immediate_data = true;
		p->sess.first_burst_length = 262144;
		p->sess.max_burst_length = 16776192;
		p->sess.default_time2wait = 2;
		p->sess.default_time2retain = 0;
		p->header_digest = NEG_DIGEST_PREFER_NONE;
		p->max_recv_dsl = 262144;
		break;
	case PK_LIO: /* LIO-like target */
		p->header_digest = NEG_DIGEST_PREFER_CRC;
		p->data_digest = NEG_DIGEST_PREFER_CRC;
		p->max_recv_dsl = 262144;
		break;
	case PK_TARGET_WANTS: /* a target that proposes on its own */
		p->sess.initial_r2t = false;
		p->sess.immediate_data = false;
		p->sess.max_burst_length = 131072;
		p->sess.first_burst_length = 131072;
		p->sess.default_time2wait = 5;
		p->sess.max_outstanding_r2t = 8;
		p->sess.error_recovery_level = 1;
		p->header_digest = NEG_DIGEST_PREFER_NONE;
		p->data_digest = NEG_DIGEST_PREFER_CRC;
		p->max_recv_dsl = 32768;
		break;
	case PK_CRC_ONLY:
		p->offer_all = true;
		p->header_digest = NEG_DIGEST_CRC_ONLY;
		p->data_digest = NEG_DIGEST_CRC_ONLY;
		p->sess.max_outstanding_r2t = 4;
		p->sess.error_recovery_level = 2;
		p->max_recv_dsl = 16384;
		break;
	}
}

struct e2e_case {
	enum prefs_kind ini, tgt;
	enum iscsi_session_type type;
	bool header_digest, data_digest;
	uint32_t max_burst, first_burst;
	bool initial_r2t, immediate_data;
	uint8_t erl;
};

static const struct e2e_case e2e_cases[] = {
    {PK_DEFAULT, PK_DEFAULT, ISCSI_SESSION_NORMAL, false, false, 262144, 65536, true, true, 0},
    {PK_OPEN_ISCSI, PK_LIO, ISCSI_SESSION_NORMAL, false, false, 262144, 65536, true, true, 0},
    {PK_LIO, PK_OPEN_ISCSI, ISCSI_SESSION_NORMAL, true, false, 262144, 65536, true, true, 0},
    {PK_OPEN_ISCSI, PK_TARGET_WANTS, ISCSI_SESSION_NORMAL, false, false, 131072, 131072, false,
     false, 0},
    {PK_DEFAULT, PK_TARGET_WANTS, ISCSI_SESSION_NORMAL, false, false, 131072, 65536, true, false,
     0},
    {PK_CRC_ONLY, PK_LIO, ISCSI_SESSION_NORMAL, true, true, 262144, 65536, true, true, 0},
    {PK_CRC_ONLY, PK_TARGET_WANTS, ISCSI_SESSION_NORMAL, true, true, 131072, 65536, true, false, 1},
    {PK_OPEN_ISCSI, PK_LIO, ISCSI_SESSION_DISCOVERY, false, false, 262144, 65536, true, true, 0},
    {PK_CRC_ONLY, PK_TARGET_WANTS, ISCSI_SESSION_DISCOVERY, true, true, 262144, 65536, true, true,
     0},
};

static void test_end_to_end(void)
{
	for (size_t i = 0; i < sizeof(e2e_cases) / sizeof(e2e_cases[0]); i++) {
		const struct e2e_case *c = &e2e_cases[i];
		struct neg_prefs ip, tp;
		struct neg_state ini, tgt;
		int r;

		make_prefs(&ip, c->ini);
		make_prefs(&tp, c->tgt);
		neg_init(&ini, ISCSI_ROLE_INITIATOR, &ip, true);
		neg_init(&tgt, ISCSI_ROLE_TARGET, &tp, true);
		neg_set_session_type(&ini, c->type);
		neg_set_session_type(&tgt, c->type);
		r = negotiate(&ini, &tgt);
		if (r)
			printf("# case %zu: %d (%s / %s)\n", i, r, ini.error, tgt.error);
		CHECK_EQ(r, 0);
		CHECK(same_results(&ini, &tgt));
		CHECK_EQ(ini.conn.header_digest, c->header_digest);
		CHECK_EQ(ini.conn.data_digest, c->data_digest);
		CHECK_EQ(ini.sess.max_burst_length, c->max_burst);
		CHECK_EQ(ini.sess.first_burst_length, c->first_burst);
		CHECK_EQ(ini.sess.initial_r2t, c->initial_r2t);
		CHECK_EQ(ini.sess.immediate_data, c->immediate_data);
		CHECK_EQ(ini.sess.error_recovery_level, c->erl);
		CHECK_EQ(ini.conn.max_recv_dsl, ip.max_recv_dsl);
		CHECK_EQ(tgt.conn.max_recv_dsl, tp.max_recv_dsl);
		CHECK(ini.sess.first_burst_length <= ini.sess.max_burst_length);
	}

	/* An initiator that requires CRC32C against a target that will not do it. */
	{
		struct neg_prefs ip, tp;
		struct neg_state ini, tgt;

		make_prefs(&ip, PK_CRC_ONLY);
		make_prefs(&tp, PK_DEFAULT);
		neg_init(&ini, ISCSI_ROLE_INITIATOR, &ip, true);
		neg_init(&tgt, ISCSI_ROLE_TARGET, &tp, true);
		CHECK_EQ(negotiate(&ini, &tgt), -EPROTO);
		CHECK(strstr(ini.error, "Digest") != NULL);
	}
}

int main(void)
{
	test_acceptor_table();
	test_acceptor_results();
	test_discovery();
	test_non_leading();
	test_stages();
	test_handles_key();
	test_acceptor_errors();
	test_propose();
	test_proposer_answers();
	test_proposer_results();
	test_finish();
	test_end_to_end();
	return tap_done();
}
