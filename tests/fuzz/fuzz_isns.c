/* libFuzzer harness for the iSNSP codec (proto/isns.c): what an iSNS server, or anything
 * that answers on its port, sends back to the target's iSNS client (target/tgt_isns.c).
 *
 * The input is one PDU as it arrives. It is parsed as the response to the function and
 * transaction its own header names (so the fuzzer reaches the attribute walk), then as the
 * answer to a DevAttrReg with transaction 1 (what the client checks most often). Properties
 * checked beyond "no crash":
 *  - a parsed response's attributes lie inside the PDU, and the PDU's size is the header's;
 *  - every attribute the iterator returns lies inside the list, and writing the attributes
 *    again with isns_put() gives back the same bytes up to where the iterator stopped;
 *  - a string value that isns_attr_str() accepts is as long as strlen() says and has no
 *    control characters; isns_resp_has_str() finds it when it follows the Delimiter;
 *  - isns_put_str() of the input's first bytes pads to a multiple of 4 with a NUL after them;
 *  - the same attributes read as the answer to an initiator's discovery query
 *    (initiator/ini_isns.c) give targets with a non-empty name, 1 to IX_MAX_ADDRS addresses
 *    each, every address NUL-terminated within its field, or -EBADMSG with no result.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/ini_isns.h"
#include "ix/sync.h"
#include "proto/isns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[ISNS_MAX_PDU];

/* Walk the attribute list, re-encode what was walked, compare. */
static void walk(const struct isns_resp *r, const uint8_t *pdu, size_t len)
{
	struct isns_iter it;
	struct isns_attr a;
	struct isns_msg m;
	bool operating = false;
	size_t used = 0, olen = 0;
	int rc;

	if (r->attrs < pdu || r->attrs + r->attrs_len != pdu + len)
		abort();
	isns_msg_init(&m, out, sizeof(out), ISNS_DEV_ATTR_REG, 0, 0);
	isns_iter_init(&it, r->attrs, r->attrs_len);
	while ((rc = isns_iter_next(&it, &a)) == 1) {
		char s[1024];

		if (a.val < r->attrs || a.val + a.len > r->attrs + r->attrs_len || (a.len & 3))
			abort();
		used += 8 + a.len;
		if (isns_put(&m, a.tag, a.val, a.len) != 0)
			abort(); /* it came in one PDU, so it fits in one */
		if (a.tag == ISNS_TAG_DELIMITER)
			operating = true;
		if (isns_attr_str(&a, s, sizeof(s)) == 0) {
			size_t n = strlen(s);

			if (n >= a.len)
				abort();
			for (size_t i = 0; i < n; i++)
				if ((uint8_t)s[i] < 0x20 || s[i] == 0x7f)
					abort();
			if (operating && a.tag != ISNS_TAG_DELIMITER &&
			    isns_resp_has_str(r, a.tag, s) != 1)
				abort();
		}
		(void)isns_attr_u32(&a, &(uint32_t){0});
	}
	if (rc != 0 && rc != -EBADMSG)
		abort();
	if (isns_msg_finish(&m, &olen) != 0 || olen != ISNS_HDR_LEN + used ||
	    memcmp(out + ISNS_HDR_LEN, r->attrs, used) != 0)
		abort();
	(void)isns_resp_u32(r, ISNS_TAG_REG_PERIOD, &(uint32_t){0});
	(void)isns_resp_has_str(r, ISNS_TAG_ENTITY_ID, "ix:fuzz");
}

static void discovery(const struct isns_resp *r)
{
	struct ix_discovery *d = NULL;
	int rc = ini_isns_parse_targets(r, &d);

	if (rc == -EBADMSG && d == NULL)
		return;
	if (rc != 0 || !d)
		abort();
	for (int i = 0; i < d->ntargets; i++) {
		const struct ix_discovered_target *t = &d->targets[i];

		if (!t->name[0] || !memchr(t->name, 0, sizeof(t->name)) || t->naddrs < 1 ||
		    t->naddrs > IX_MAX_ADDRS)
			abort();
		for (int k = 0; k < t->naddrs; k++)
			if (!memchr(t->addrs[k], 0, sizeof(t->addrs[k])) || !strchr(t->addrs[k], ','))
				abort();
	}
	ix_discovery_free(d);
}

static void try_parse(const uint8_t *pdu, size_t len, uint16_t func, uint16_t xid)
{
	struct isns_resp r;
	int rc = isns_resp_parse(pdu, len, func, xid, &r);
	char name[24];

	if (rc == 0) {
		if (isns_pdu_size(pdu) != len || r.h.xid != xid ||
		    r.h.func != (func | ISNS_RESPONSE))
			abort();
		(void)isns_status_name(r.status, name, sizeof(name));
		walk(&r, pdu, len);
		discovery(&r);
	} else if (rc != -EBADMSG && rc != -EPROTO) {
		abort();
	}
}

static void check_put_str(const uint8_t *data, size_t size)
{
	char s[64];
	size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1, len;
	struct isns_msg m;
	const char *nul;

	memcpy(s, data, n);
	s[n] = '\0';
	nul = memchr(s, 0, n + 1);
	n = (size_t)(nul - s);
	isns_msg_init(&m, out, sizeof(out), ISNS_DEV_ATTR_QRY, 0, 9);
	if (isns_put_str(&m, ISNS_TAG_ISCSI_NAME, s) != 0 || isns_msg_finish(&m, &len) != 0)
		abort();
	if (len != ISNS_HDR_LEN + 8 + ((n + 4) & ~(size_t)3) || out[ISNS_HDR_LEN + 8 + n] != 0 ||
	    memcmp(out + ISNS_HDR_LEN + 8, s, n) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct isns_hdr h;

	if (size > ISNS_MAX_PDU + 16)
		return 0;
	if (size >= ISNS_HDR_LEN) {
		isns_hdr_unpack(data, &h);
		try_parse(data, size, (uint16_t)(h.func & ~ISNS_RESPONSE), h.xid);
	}
	try_parse(data, size, ISNS_DEV_ATTR_REG, 1);
	check_put_str(data, size);
	return 0;
}
