/* iSNSP codec tests (proto/isns.c).
 *
 * The expected bytes were assembled by hand from RFC 4171 5.1 (header) and 5.5 (attributes),
 * one 4-byte word per line; the response rows are what open-isns's isnsd 0.101 answered to the
 * same requests (captured once, byte for byte), then cut, bent and corrupted row by row.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/isns.h"
#include "tap.h"

/* ---- building ---- */

static void test_build(void)
{
	static const uint8_t want[] = {
	    0x00, 0x01, 0x00, 0x01, /* version 1, DevAttrReg */
	    0x00, 0x3c, 0x9c, 0x00, /* length 60, CLIENT | REPLACE | LAST | FIRST */
	    0x12, 0x34, 0x00, 0x00, /* xid 0x1234, seq 0 */
	    0x00, 0x00, 0x00, 0x20, /* Source: iSCSI Name */
	    0x00, 0x00, 0x00, 0x08, /* "iqn.x" + NUL, padded to 8 */
	    'i',  'q',	'n',  '.',  /* */
	    'x',  0,	0,    0,    /* */
	    0x00, 0x00, 0x00, 0x01, /* Message Key: Entity Identifier */
	    0x00, 0x00, 0x00, 0x04, /* "ent" + NUL: exactly 4 */
	    'e',  'n',	't',  0,    /* */
	    0x00, 0x00, 0x00, 0x00, /* Delimiter */
	    0x00, 0x00, 0x00, 0x00, /* */
	    0x00, 0x00, 0x00, 0x02, /* Entity Protocol */
	    0x00, 0x00, 0x00, 0x04, /* */
	    0x00, 0x00, 0x00, 0x02, /* iSCSI */
	    0x00, 0x00, 0x00, 0x11, /* Portal TCP/UDP Port */
	    0x00, 0x00, 0x00, 0x04, /* */
	    0x00, 0x00, 0x0c, 0xbc, /* 3260/tcp */
	};
	uint8_t buf[256];
	struct isns_msg m;
	size_t len = 0;

	isns_msg_init(&m, buf, sizeof(buf), ISNS_DEV_ATTR_REG, ISNS_F_REPLACE, 0x1234);
	isns_put_str(&m, ISNS_TAG_ISCSI_NAME, "iqn.x");
	isns_put_str(&m, ISNS_TAG_ENTITY_ID, "ent");
	isns_put_delim(&m);
	isns_put_u32(&m, ISNS_TAG_ENTITY_PROTOCOL, ISNS_ENTITY_PROTOCOL_ISCSI);
	isns_put_u32(&m, ISNS_TAG_PORTAL_PORT, 3260);
	CHECK_EQ(isns_msg_finish(&m, &len), 0);
	CHECK_EQ(len, sizeof(want));
	CHECK(len == sizeof(want) && memcmp(buf, want, len) == 0);
}

/* A string's value is its bytes, a NUL and zero padding to a multiple of 4. */
static void test_string_padding(void)
{
	static const struct {
		const char *s;
		uint32_t len;
	} rows[] = {{"", 4}, {"a", 4}, {"abc", 4}, {"abcd", 8}, {"abcdefg", 8}, {"abcdefgh", 12}};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint8_t buf[64];
		struct isns_msg m;
		size_t len;

		memset(buf, 0xee, sizeof(buf));
		isns_msg_init(&m, buf, sizeof(buf), ISNS_DEV_ATTR_QRY, 0, 1);
		isns_put_str(&m, 34, rows[i].s);
		CHECK_EQ(isns_msg_finish(&m, &len), 0);
		CHECK_EQ(len, ISNS_HDR_LEN + 8 + rows[i].len);
		CHECK_EQ(buf[ISNS_HDR_LEN + 7], rows[i].len);
		CHECK_MEM(buf + ISNS_HDR_LEN + 8, rows[i].s, strlen(rows[i].s));
		for (size_t j = strlen(rows[i].s); j < rows[i].len; j++)
			CHECK_EQ(buf[ISNS_HDR_LEN + 8 + j], 0);
	}
}

/* Running out of room: the failed attribute is not written, the error sticks until a
 * rewind, and a rewind takes back a whole group. */
static void test_no_room(void)
{
	uint8_t buf[ISNS_HDR_LEN + 24];
	struct isns_msg m;
	size_t len = 0, mark;

	isns_msg_init(&m, buf, sizeof(buf), ISNS_DEV_ATTR_REG, 0, 7);
	CHECK_EQ(isns_put_u32(&m, 6, 900), 0); /* 12 bytes */
	mark = isns_msg_mark(&m);
	CHECK_EQ(isns_put_str(&m, 32, "too-long"), -ENOSPC); /* 8 + 12 > 12 left */
	CHECK_EQ(m.len, mark);
	CHECK_EQ(isns_put_u32(&m, 17, 1), -ENOSPC); /* sticky, though it would fit */
	CHECK_EQ(isns_msg_finish(&m, &len), -ENOSPC);
	isns_msg_rewind(&m, mark);
	CHECK_EQ(isns_put_u32(&m, 17, 1), 0);
	CHECK_EQ(isns_msg_finish(&m, &len), 0);
	CHECK_EQ(len, sizeof(buf));
	CHECK_EQ(buf[5], 24);

	isns_msg_init(&m, buf, 4, ISNS_DEV_ATTR_REG, 0, 7); /* not even a header */
	CHECK_EQ(isns_msg_finish(&m, &len), -ENOSPC);
	isns_msg_init(&m, buf, sizeof(buf), ISNS_DEV_ATTR_REG, 0, 7);
	CHECK_EQ(isns_put_str(&m, 32, NULL), -EINVAL);
	CHECK_EQ(isns_put(&m, 32, NULL, 3), -EINVAL);
}

/* One PDU's payload is at most 65535 bytes, whatever the buffer. */
static void test_pdu_limit(void)
{
	static uint8_t big[ISNS_MAX_PDU + 64], val[65000];
	struct isns_msg m;
	size_t len = 0;

	isns_msg_init(&m, big, sizeof(big), ISNS_DEV_ATTR_REG, 0, 1);
	CHECK_EQ(isns_put(&m, 34, val, sizeof(val)), 0);
	CHECK_EQ(isns_put(&m, 34, val, 600), -ENOSPC);
	isns_msg_rewind(&m, isns_msg_mark(&m));
	CHECK_EQ(isns_put(&m, 34, val, 500), 0);
	CHECK_EQ(isns_msg_finish(&m, &len), 0);
	CHECK(len <= ISNS_MAX_PDU);
	CHECK_EQ(isns_pdu_size(big), len);
}

static void test_addr(void)
{
	static const struct {
		const char *s;
		int rc;
		uint8_t ip[16];
		const char *back;
	} rows[] = {
	    {"127.0.0.1", 0, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1}, "127.0.0.1"},
	    {"192.0.2.200",
	     0,
	     {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 200},
	     "192.0.2.200"},
	    {"::1", 0, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "::1"},
	    {"2001:db8::7",
	     0,
	     {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7},
	     "2001:db8::7"},
	    {"localhost", -EINVAL, {0}, NULL},
	    {"1.2.3", -EINVAL, {0}, NULL},
	    {"", -EINVAL, {0}, NULL},
	    {"[::1]", -EINVAL, {0}, NULL},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint8_t ip[16];
		char s[64];

		CHECK_EQ(isns_addr_parse(rows[i].s, ip), rows[i].rc);
		if (rows[i].rc)
			continue;
		CHECK_MEM(ip, rows[i].ip, 16);
		CHECK_STR(isns_addr_str(ip, s, sizeof(s)), rows[i].back);
	}
	CHECK_EQ(isns_addr_parse(NULL, (uint8_t[16]){0}), -EINVAL);
}

/* ---- parsing ---- */

/* isnsd's answer to a DevAttrQry for entity "probe-ent" asking Entity ID and Registration
 * Period (xid 2). */
static const uint8_t qry_rsp[] = {
    0x00, 0x01, 0x80, 0x02, /* version 1, DevAttrQryRsp */
    0x00, 0x40, 0x4c, 0x00, /* length 64, SERVER | LAST | FIRST */
    0x00, 0x02, 0x00, 0x00, /* xid 2, seq 0 */
    0x00, 0x00, 0x00, 0x00, /* status: Successful */
    0x00, 0x00, 0x00, 0x01, /* Entity Identifier (the message key) */
    0x00, 0x00, 0x00, 0x0c, /* */
    'p',  'r',	'o',  'b',  /* */
    'e',  '-',	'e',  'n',  /* */
    't',  0,	0,    0,    /* */
    0x00, 0x00, 0x00, 0x00, /* Delimiter */
    0x00, 0x00, 0x00, 0x00, /* */
    0x00, 0x00, 0x00, 0x01, /* Entity Identifier */
    0x00, 0x00, 0x00, 0x0c, /* */
    'p',  'r',	'o',  'b',  /* */
    'e',  '-',	'e',  'n',  /* */
    't',  0,	0,    0,    /* */
    0x00, 0x00, 0x00, 0x06, /* Registration Period */
    0x00, 0x00, 0x00, 0x04, /* */
    0x00, 0x00, 0x00, 0x14, /* 20 s */
};

/* The same query for an entity the server does not have: the key, the Delimiter, nothing
 * after it (xid 3). */
static const uint8_t qry_rsp_none[] = {
    0x00, 0x01, 0x80, 0x02, /* */
    0x00, 0x1c, 0x4c, 0x00, /* length 28 */
    0x00, 0x03, 0x00, 0x00, /* */
    0x00, 0x00, 0x00, 0x00, /* */
    0x00, 0x00, 0x00, 0x01, /* */
    0x00, 0x00, 0x00, 0x08, /* */
    'n',  'o',	'n',  'e',  /* */
    0,	  0,	0,    0,    /* */
    0x00, 0x00, 0x00, 0x00, /* */
    0x00, 0x00, 0x00, 0x00, /* */
};

static void test_query_response(void)
{
	struct isns_resp r;
	uint32_t v = 0;

	CHECK_EQ(isns_resp_parse(qry_rsp, sizeof(qry_rsp), ISNS_DEV_ATTR_QRY, 2, &r), 0);
	CHECK_EQ(r.status, ISNS_OK);
	CHECK_EQ(r.attrs_len, sizeof(qry_rsp) - 16);
	CHECK_EQ(isns_resp_has_str(&r, ISNS_TAG_ENTITY_ID, "probe-ent"), 1);
	CHECK_EQ(isns_resp_has_str(&r, ISNS_TAG_ENTITY_ID, "probe"), 0); /* a prefix */
	CHECK_EQ(isns_resp_has_str(&r, ISNS_TAG_ENTITY_ID, "probe-ent2"), 0);
	CHECK_EQ(isns_resp_u32(&r, ISNS_TAG_REG_PERIOD, &v), 1);
	CHECK_EQ(v, 20);
	CHECK_EQ(isns_resp_u32(&r, ISNS_TAG_ESI_INTERVAL, &v), 0);

	CHECK_EQ(isns_resp_parse(qry_rsp_none, sizeof(qry_rsp_none), ISNS_DEV_ATTR_QRY, 3, &r), 0);
	/* the key names it, but only what follows the Delimiter counts */
	CHECK_EQ(isns_resp_has_str(&r, ISNS_TAG_ENTITY_ID, "none"), 0);
}

/* Rows: what a byte changed at offset `at` (or the length cut to `cut`) does to the parse. */
static void test_response_errors(void)
{
	static const struct {
		const char *what;
		size_t at;
		uint8_t val;
		size_t cut; /* 0: the whole PDU */
		uint16_t func, xid;
		int rc;
	} rows[] = {
	    {"as captured", 0, 0x00, 0, ISNS_DEV_ATTR_QRY, 2, 0},
	    {"version 2", 1, 0x02, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"another function", 3, 0x01, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"not a response", 2, 0x00, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"another transaction", 9, 0x03, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"not the first PDU", 6, 0x48, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"not the last PDU", 6, 0x44, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"sequence 1", 11, 0x01, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"an auth block", 6, 0x6c, 0, ISNS_DEV_ATTR_QRY, 2, -EPROTO},
	    {"length one more", 5, 0x41, 0, ISNS_DEV_ATTR_QRY, 2, -EBADMSG},
	    {"length one less", 5, 0x3f, 0, ISNS_DEV_ATTR_QRY, 2, -EBADMSG},
	    {"cut in the header", 0, 0x00, 11, ISNS_DEV_ATTR_QRY, 2, -EBADMSG},
	    {"no status code", 5, 0x02, 14, ISNS_DEV_ATTR_QRY, 2, -EBADMSG},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint8_t pdu[sizeof(qry_rsp)];
		size_t len = rows[i].cut ? rows[i].cut : sizeof(pdu);
		struct isns_resp r;
		int rc;

		memcpy(pdu, qry_rsp, sizeof(pdu));
		if (rows[i].at || rows[i].val)
			pdu[rows[i].at] = rows[i].val;
		rc = isns_resp_parse(pdu, len, rows[i].func, rows[i].xid, &r);
		printf("# %s\n", rows[i].what);
		CHECK_EQ(rc, rows[i].rc);
	}
	CHECK_EQ(isns_resp_parse(NULL, 0, ISNS_DEV_ATTR_QRY, 2, &(struct isns_resp){0}), -EBADMSG);
}

/* Attribute lists: how many attributes come out before the end or an error. */
static void test_iter(void)
{
	static const struct {
		const char *what;
		uint8_t bytes[32];
		size_t len;
		int n;	 /* attributes returned */
		int end; /* 0 or -EBADMSG */
	} rows[] = {
	    {"empty", {0}, 0, 0, 0},
	    {"one u32", {0, 0, 0, 6, 0, 0, 0, 4, 0, 0, 0, 9}, 12, 1, 0},
	    {"empty value", {0, 0, 0, 0, 0, 0, 0, 0}, 8, 1, 0},
	    {"two", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 4, 0, 0, 0, 9}, 20, 2, 0},
	    {"header cut", {0, 0, 0, 6, 0, 0, 0}, 7, 0, -EBADMSG},
	    {"value cut", {0, 0, 0, 6, 0, 0, 0, 4, 0, 0, 0}, 11, 0, -EBADMSG},
	    {"length not padded", {0, 0, 0, 34, 0, 0, 0, 3, 'a', 'b', 0, 0}, 12, 0, -EBADMSG},
	    {"huge length", {0, 0, 0, 34, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0}, 12, 0, -EBADMSG},
	    {"good then junk", {0, 0, 0, 6, 0, 0, 0, 4, 0, 0, 0, 9, 1, 2}, 14, 1, -EBADMSG},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct isns_iter it;
		struct isns_attr a;
		int n = 0, rc;

		isns_iter_init(&it, rows[i].bytes, rows[i].len);
		while ((rc = isns_iter_next(&it, &a)) == 1)
			n++;
		printf("# %s\n", rows[i].what);
		CHECK_EQ(n, rows[i].n);
		CHECK_EQ(rc, rows[i].end);
		CHECK_EQ(isns_iter_next(&it, &a), 0); /* stays at the end */
	}
}

static void test_attr_values(void)
{
	static const uint8_t good[] = {'a', 'b', 0, 0}, unterminated[] = {'a', 'b', 'c', 'd'},
			     control[] = {'a', '\n', 0, 0}, four[] = {0, 0, 0x0c, 0xbc};
	struct isns_attr a = {34, 4, good};
	uint32_t v = 0;
	char s[8];

	CHECK_EQ(isns_attr_str(&a, s, sizeof(s)), 0);
	CHECK_STR(s, "ab");
	CHECK_EQ(isns_attr_str(&a, s, 2), -ENOSPC);
	CHECK_EQ(isns_attr_str(&a, s, 3), 0);
	a.val = unterminated;
	CHECK_EQ(isns_attr_str(&a, s, sizeof(s)), -EBADMSG);
	a.val = control;
	CHECK_EQ(isns_attr_str(&a, s, sizeof(s)), -EBADMSG);
	a.len = 0;
	CHECK_EQ(isns_attr_str(&a, s, sizeof(s)), -EBADMSG);
	a = (struct isns_attr){17, 4, four};
	CHECK_EQ(isns_attr_u32(&a, &v), 0);
	CHECK_EQ(v, 3260);
	a.len = 8;
	CHECK_EQ(isns_attr_u32(&a, &v), -EBADMSG);
}

static void test_status_names(void)
{
	char buf[24];

	CHECK_STR(isns_status_name(ISNS_OK, buf, sizeof(buf)), "Successful");
	CHECK_STR(isns_status_name(ISNS_SOURCE_UNAUTHORIZED, buf, sizeof(buf)),
		  "Source Unauthorized");
	CHECK_STR(isns_status_name(4, buf, sizeof(buf)), "status 4"); /* reserved */
	CHECK_STR(isns_status_name(4000000000u, buf, sizeof(buf)), "status 4000000000");
}

int main(void)
{
	test_build();
	test_string_padding();
	test_no_room();
	test_pdu_limit();
	test_addr();
	test_query_response();
	test_response_errors();
	test_iter();
	test_attr_values();
	test_status_names();
	return tap_done();
}
