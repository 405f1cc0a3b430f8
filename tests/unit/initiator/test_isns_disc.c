/* iSNS discovery's pure parts (initiator/ini_isns.c): the DevAttrQry an initiator sends, and
 * how an answer becomes the targets and portal addresses ixadm stores.
 *
 * The answers are built with the codec's own builder (proto/isns.c, tested on its own
 * against hand-assembled bytes): a list of attributes as an iSNS server returns them, the
 * echoed key, the Delimiter, then the nodes and portal groups in the order open-isns 0.101
 * gives them (all nodes' attributes, then each portal group's four).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "initiator/ini_isns.h"
#include "ix/sync.h"
#include "tap.h"

struct ans {
	uint8_t buf[8192];
	struct isns_msg m;
};

static void ans_init(struct ans *a, bool key)
{
	isns_msg_init(&a->m, a->buf, sizeof(a->buf), ISNS_DEV_ATTR_QRY | ISNS_RESPONSE, 0, 1);
	if (key)
		isns_put_u32(&a->m, ISNS_TAG_ISCSI_NODE_TYPE, ISNS_NODE_TARGET);
	isns_put_delim(&a->m);
}

static void node(struct ans *a, const char *name, uint32_t type)
{
	isns_put_str(&a->m, ISNS_TAG_ISCSI_NAME, name);
	isns_put_u32(&a->m, ISNS_TAG_ISCSI_NODE_TYPE, type);
}

/* tag < 0: the PGT empty (no access) */
static void pg(struct ans *a, const char *name, const char *ip, uint32_t port, long tag)
{
	uint8_t addr[16];

	isns_put_str(&a->m, ISNS_TAG_PG_ISCSI_NAME, name);
	if (isns_addr_parse(ip, addr) != 0)
		memset(addr, 0, sizeof(addr));
	isns_put(&a->m, ISNS_TAG_PG_PORTAL_IP, addr, 16);
	isns_put_u32(&a->m, ISNS_TAG_PG_PORTAL_PORT, port);
	if (tag < 0)
		isns_put_empty(&a->m, ISNS_TAG_PG_TAG);
	else
		isns_put_u32(&a->m, ISNS_TAG_PG_TAG, (uint32_t)tag);
}

static int parse(struct ans *a, struct ix_discovery **d)
{
	struct isns_resp r = {0};

	CHECK_EQ(a->m.err, 0);
	r.attrs = a->buf + ISNS_HDR_LEN;
	r.attrs_len = a->m.len - ISNS_HDR_LEN;
	return ini_isns_parse_targets(&r, d);
}

static const struct ix_discovered_target *find(const struct ix_discovery *d, const char *name)
{
	for (int i = 0; d && i < d->ntargets; i++)
		if (strcmp(d->targets[i].name, name) == 0)
			return &d->targets[i];
	return NULL;
}

static void test_query(void)
{
	static const uint8_t want[] = {
	    0x00, 0x01, 0x00, 0x02, /* version 1, DevAttrQry */
	    0x00, 0x54, 0x8c, 0x00, /* length 84, CLIENT | LAST | FIRST */
	    0x00, 0x07, 0x00, 0x00, /* xid 7 */
	    0x00, 0x00, 0x00, 0x20, /* Source: iSCSI Name "iqn.i" */
	    0x00, 0x00, 0x00, 0x08, 'i',  'q',	'n',  '.',  'i',  0,	0,    0,
	    0x00, 0x00, 0x00, 0x21, /* Message Key: iSCSI Node Type = Target */
	    0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01,
	    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* Delimiter */
	    0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, /* iSCSI Name? */
	    0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, /* iSCSI Node Type? */
	    0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, /* PG iSCSI Name? */
	    0x00, 0x00, 0x00, 0x31, 0x00, 0x00, 0x00, 0x00, /* PG Portal IP Address? */
	    0x00, 0x00, 0x00, 0x32, 0x00, 0x00, 0x00, 0x00, /* PG Portal TCP/UDP Port? */
	    0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00, 0x00, /* PGT? */
	};
	uint8_t buf[256];
	int n = ini_isns_build_query(buf, sizeof(buf), "iqn.i", NULL, 7);

	CHECK_EQ(n, (int)sizeof(want));
	CHECK(n == (int)sizeof(want) && memcmp(buf, want, sizeof(want)) == 0);
	/* one node by name: its name is the key instead of the type */
	n = ini_isns_build_query(buf, sizeof(buf), "iqn.i", "iqn.t", 8);
	CHECK_EQ(n, (int)sizeof(want) + 4);
	CHECK(buf[31] == 0x20 && buf[35] == 8 && memcmp(buf + 36, "iqn.t", 6) == 0);
	/* too small a buffer, no name */
	CHECK_EQ(ini_isns_build_query(buf, 40, "iqn.i", NULL, 1), -ENOSPC);
	CHECK_EQ(ini_isns_build_query(buf, sizeof(buf), NULL, NULL, 1), -EINVAL);
}

static void test_answer(void)
{
	struct ix_discovery *d = NULL;
	const struct ix_discovered_target *t;
	struct ans a;

	ans_init(&a, true);
	node(&a, "iqn.t1", ISNS_NODE_TARGET);
	node(&a, "iqn.t2", ISNS_NODE_TARGET | 4 /* control too */);
	node(&a, "iqn.noportal", ISNS_NODE_TARGET);
	pg(&a, "iqn.t1", "192.0.2.1", 3260, 1);
	pg(&a, "iqn.t2", "2001:db8::7", 3261, 2);
	pg(&a, "iqn.t1", "192.0.2.2", 3260, -1);	      /* no access: left out */
	pg(&a, "iqn.t1", "192.0.2.1", 3260, 1);	      /* the same again: once */
	pg(&a, "iqn.t1", "192.0.2.3", 3262 | 0x10000, 1); /* UDP: not iSCSI's */
	pg(&a, "iqn.unknown", "192.0.2.9", 3260, 1);      /* no such node: nothing */
	CHECK_EQ(parse(&a, &d), 0);
	CHECK(d != NULL);
	if (!d)
		return;
	CHECK_EQ(d->ntargets, 2);
	t = find(d, "iqn.t1");
	CHECK(t && t->naddrs == 1 && strcmp(t->addrs[0], "192.0.2.1:3260,1") == 0);
	t = find(d, "iqn.t2");
	CHECK(t && t->naddrs == 1 && strcmp(t->addrs[0], "[2001:db8::7]:3261,2") == 0);
	CHECK(find(d, "iqn.noportal") == NULL);
	ix_discovery_free(d);
}

static void test_filters(void)
{
	struct ix_discovery *d = NULL;
	const struct ix_discovered_target *t;
	char longname[300];
	struct ans a;

	/* an initiator (type 2) among them, a name in the key part, a name too long to store,
	   more portal groups than a record holds */
	isns_msg_init(&a.m, a.buf, sizeof(a.buf), ISNS_DEV_ATTR_QRY | ISNS_RESPONSE, 0, 1);
	isns_put_str(&a.m, ISNS_TAG_ISCSI_NAME, "iqn.key");
	isns_put_delim(&a.m);
	node(&a, "iqn.ini", 2);
	node(&a, "iqn.many", ISNS_NODE_TARGET);
	memset(longname, 'x', sizeof(longname) - 1);
	memcpy(longname, "iqn.", 4);
	longname[sizeof(longname) - 1] = 0;
	node(&a, longname, ISNS_NODE_TARGET);
	pg(&a, "iqn.ini", "192.0.2.1", 3260, 1);
	pg(&a, "iqn.key", "192.0.2.1", 3260, 1);
	pg(&a, longname, "192.0.2.1", 3260, 1);
	for (int i = 0; i < IX_MAX_ADDRS + 3; i++)
		pg(&a, "iqn.many", "192.0.2.50", 4000 + (uint32_t)i, i);
	CHECK_EQ(parse(&a, &d), 0);
	CHECK(d && d->ntargets == 1);
	t = d ? find(d, "iqn.many") : NULL;
	CHECK(t && t->naddrs == IX_MAX_ADDRS && strcmp(t->addrs[0], "192.0.2.50:4000,0") == 0 &&
	      strcmp(t->addrs[IX_MAX_ADDRS - 1], "192.0.2.50:4007,7") == 0);
	ix_discovery_free(d);

	/* nothing at all: no targets, not an error */
	ans_init(&a, true);
	d = NULL;
	CHECK_EQ(parse(&a, &d), 0);
	CHECK(d && d->ntargets == 0);
	ix_discovery_free(d);
}

static void test_malformed(void)
{
	struct ix_discovery *d = (void *)1;
	struct isns_resp r = {0};
	static const uint8_t cut[] = {0, 0, 0, 0, 0, 0, 0, 0, /* Delimiter */
				      0, 0, 0, 0x20, 0, 0, 0, 0x40, 'i', 'q', 'n', '.'};
	static const uint8_t badpg[] = {
	    0, 0, 0, 0,	   0, 0, 0, 0,	  /* Delimiter */
	    0, 0, 0, 0x20, 0, 0, 0, 4,	  'i', 'q', 'n', 0, /* node "iqn" */
	    0, 0, 0, 0x30, 0, 0, 0, 4,	  'i', 'q', 'n', 0, /* its portal group */
	    0, 0, 0, 0x31, 0, 0, 0, 4,	  192, 0,   2,	 1,  /* an address of 4 bytes */
	    0, 0, 0, 0x32, 0, 0, 0, 4,	  0,   0,   0xc, 0xbc, 0, 0, 0, 0x33, 0, 0, 0, 4,
	    0, 0, 0, 1,
	};

	r.attrs = cut;
	r.attrs_len = sizeof(cut);
	CHECK_EQ(ini_isns_parse_targets(&r, &d), -EBADMSG);
	CHECK(d == NULL);
	r.attrs = badpg;
	r.attrs_len = sizeof(badpg);
	CHECK_EQ(ini_isns_parse_targets(&r, &d), 0);
	CHECK(d && d->ntargets == 0); /* the group's address is not one: no portal, no target */
	ix_discovery_free(d);
}

int main(void)
{
	test_query();
	test_answer();
	test_filters();
	test_malformed();
	return tap_done();
}
