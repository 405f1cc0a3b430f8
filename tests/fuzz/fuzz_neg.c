/* libFuzzer harness for operational key negotiation (session/keys.c), both roles.
 *
 * Input: two configuration bytes, then segments separated by 0xff (see fuzz_util.h). Each
 * segment is one PDU's worth of text from the peer, preceded by one control byte:
 *   byte 0  bit 0 role (0 initiator, 1 target), bit 1 discovery session, bit 2 non-leading
 *           connection, bit 3 offer_all, bit 4 declare_only, bits 5-7 numeric preferences
 *   byte 1  bits 0-1 HeaderDigest preference, bits 2-3 DataDigest preference, bits 4-7 more
 *           numeric preferences
 *   segment control byte: bits 0-1 stage (0 security, 1 operational, 2 and 3 full feature
 *           phase, i.e. a Text negotiation), bit 2 propose before receiving, bit 3 receive
 *           into a small output buffer (exercises -ENOSPC), bit 4 finish after this segment
 * The keys of a segment go through text_parse() and, as the login code does, a segment with a
 * repeated key ends the run; keys that keys.c does not own are skipped.
 *
 * Properties checked beyond "no crash":
 *  - neg_recv() returns 0, -EPROTO (error text set) or -ENOSPC; after -ENOSPC nothing was
 *    recorded, so the same key fed again with room succeeds or fails for a protocol reason;
 *  - everything we emit parses, with no key twice in one PDU;
 *  - negotiated values stay inside their RFC ranges; a digest our preferences refuse is never
 *    the result, and after a successful neg_finish() a required CRC32C digest is in use.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "proto/pdu.h"
#include "session/auth.h"
#include "session/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_KV	  128
#define OUT_CAP	  8192
#define SMALL_CAP 48

static void set_prefs(struct neg_prefs *p, uint8_t b0, uint8_t b1)
{
	static const uint32_t bursts[] = {512, 8192, 65536, 262144, 1048576, 16777215, 4096, 0};
	static const uint32_t dsls[] = {512, 8192, 65536, 262144, 16777215, 1024, 0, 100000000};

	neg_prefs_default(p);
	p->header_digest = (enum neg_digest_pref)(b1 & 3);
	p->data_digest = (enum neg_digest_pref)((b1 >> 2) & 3);
	p->offer_all = b0 & 0x08;
	p->declare_only = b0 & 0x10;
	/* Out-of-range values on purpose (0, 100000000): keys.c must clamp local settings. */
	p->sess.max_burst_length = bursts[(b0 >> 5) & 7];
	p->sess.first_burst_length = bursts[(b1 >> 4) & 7];
	p->max_recv_dsl = dsls[((b0 >> 5) + (b1 >> 4)) & 7];
	p->sess.initial_r2t = b1 & 0x80;
	p->sess.immediate_data = !(b0 & 0x20);
	p->sess.max_connections = (uint16_t)(1 + (b1 >> 5));
	p->sess.max_outstanding_r2t = (uint16_t)((b0 >> 6) * 3);
	p->sess.error_recovery_level = (uint8_t)((b1 >> 6) & 3);
	p->sess.default_time2wait = (uint16_t)(b0 & 0x40 ? 3601 : 2);
}

static void check_params(const struct neg_state *st)
{
	const struct iscsi_sess_params *s = &st->sess;
	const struct iscsi_conn_params *c = &st->conn;

	if (s->max_burst_length < 512 || s->max_burst_length > 16777215 ||
	    s->first_burst_length < 512 || s->first_burst_length > 16777215 ||
	    s->max_connections < 1 || s->max_outstanding_r2t < 1 || s->error_recovery_level > 2 ||
	    s->default_time2wait > 3600 || s->default_time2retain > 3600 ||
	    s->protocol_level > 31)
		abort();
	if (c->max_recv_dsl < 512 || c->max_recv_dsl > 16777215 || c->max_xmit_dsl < 512 ||
	    c->max_xmit_dsl > 16777215)
		abort();
	/* A digest we only accept as None is never turned on, whatever the peer says. */
	if ((st->prefs->header_digest == NEG_DIGEST_NONE_ONLY && c->header_digest) ||
	    (st->prefs->data_digest == NEG_DIGEST_NONE_ONLY && c->data_digest))
		abort();
	if (st->type == ISCSI_SESSION_DISCOVERY &&
	    (s->max_connections != 1 || s->error_recovery_level != 0))
		abort();
}

static void check_finished(const struct neg_state *st)
{
	const struct iscsi_sess_params *s = &st->sess;

	check_params(st);
	if (st->type == ISCSI_SESSION_DISCOVERY)
		return;
	if (s->first_burst_length > s->max_burst_length)
		abort();
	if ((st->prefs->header_digest == NEG_DIGEST_CRC_ONLY && !st->conn.header_digest) ||
	    (st->prefs->data_digest == NEG_DIGEST_CRC_ONLY && !st->conn.data_digest))
		abort();
}

/* Feed one key; false when the negotiation failed (as the login would). */
static bool feed(struct neg_state *st, int stage, const struct text_kv *kv, bool small)
{
	char buf[OUT_CAP];
	struct text_out out;
	int r;

	text_out_init(&out, buf, small ? SMALL_CAP : sizeof(buf));
	r = neg_recv(st, stage, kv->key, kv->value, &out);
	if (r == -ENOSPC) {
		if (!small)
			abort(); /* one answer always fits in a PDU's worth of room */
		text_out_init(&out, buf, sizeof(buf));
		r = neg_recv(st, stage, kv->key, kv->value, &out);
		if (r == -ENOSPC)
			abort();
	}
	if (r == -EPROTO) {
		if (!st->error[0])
			abort();
		return false;
	}
	if (r != 0)
		abort();
	fuzz_check_our_text(out.buf, out.len);
	check_params(st);
	return true;
}

static bool round_trip(struct neg_state *st, uint8_t ctl, const uint8_t *seg, size_t len)
{
	static const int stages[] = {ISCSI_STAGE_SECURITY, ISCSI_STAGE_OPERATIONAL,
				     ISCSI_STAGE_FULL_FEATURE, ISCSI_STAGE_FULL_FEATURE};
	struct text_kv kv[MAX_KV];
	char *text, pbuf[OUT_CAP];
	struct text_out out;
	size_t n;
	bool ok = true;

	if (ctl & 0x04) {
		text_out_init(&out, pbuf, sizeof(pbuf));
		if (neg_propose(st, &out) != 0)
			abort(); /* all proposals fit in 8 KiB */
		fuzz_check_our_text(out.buf, out.len);
	}
	text = malloc(len + 1);
	if (!text)
		return false;
	memcpy(text, seg, len);
	if (text_parse(text, len, kv, MAX_KV, &n) != 0)
		n = 0;
	for (size_t i = 0; i < n && ok; i++) {
		for (size_t j = 0; j < i; j++)
			if (strcmp(kv[i].key, kv[j].key) == 0)
				ok = false; /* the login code fails such a PDU before negotiation */
		if (ok && neg_handles_key(kv[i].key))
			ok = feed(st, stages[ctl & 3], &kv[i], ctl & 0x08);
	}
	free(text);
	if (ok && (ctl & 0x10)) {
		if (neg_finish(st) == 0)
			check_finished(st);
		else if (!st->error[0])
			abort();
		ok = false;
	}
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_seg fs;
	struct neg_prefs prefs;
	struct neg_state st;
	const uint8_t *seg;
	size_t len;

	if (size < 2)
		return 0;
	set_prefs(&prefs, data[0], data[1]);
	neg_init(&st, data[0] & 1 ? ISCSI_ROLE_TARGET : ISCSI_ROLE_INITIATOR, &prefs,
		 !(data[0] & 0x04));
	if (data[0] & 0x02)
		neg_set_session_type(&st, ISCSI_SESSION_DISCOVERY);
	check_params(&st);
	fs.p = data + 2;
	fs.left = size - 2;
	while (fuzz_seg_next(&fs, &seg, &len)) {
		if (len == 0)
			continue;
		st.error[0] = '\0';
		if (!round_trip(&st, seg[0], seg + 1, len - 1))
			break;
	}
	return 0;
}
