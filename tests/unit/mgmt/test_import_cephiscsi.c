/* ix-ctl import ceph-iscsi (mgmt/import_cephiscsi.c): LIO's NAA designator rule, and
 * gateway.conf documents built from ceph-iscsi's schema (tests/data/ceph-iscsi/) converted
 * field by field; each result passes the group document's own checks and every member's derived
 * configuration goes through the real configuration loader. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_group_doc.h"
#include "mgmt/import_cephiscsi.h"
#include "target/config.h"
#include "tap.h"

#ifndef IX_TEST_DATA
#error "IX_TEST_DATA: the tests/data folder"
#endif

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *b;
	long n;

	snprintf(path, sizeof(path), "%s/ceph-iscsi/%s", IX_TEST_DATA, name);
	f = fopen(path, "r");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    !(b = malloc((size_t)n + 1)) || fread(b, 1, (size_t)n, f) != (size_t)n) {
		printf("# cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	b[n] = 0;
	*len = (size_t)n;
	return b;
}

static json_t *import(const char *name, const struct cephiscsi_opts *o, json_t **notes)
{
	size_t len;
	char *text = slurp(name, &len), err[512] = "";
	json_t *doc = NULL;
	int rc = cephiscsi_import(text, len, o, &doc, notes, err, sizeof(err));

	free(text);
	CHECK_EQ(rc, 0);
	if (rc)
		printf("# %s: %s\n", name, err);
	return doc;
}

/* the document's own checks, and every member's configuration through the loader */
static void loads_everywhere(json_t *doc)
{
	char err[512] = "";
	json_t *m;
	size_t i;

	CHECK_EQ(ha_group_doc_check(doc, err, sizeof(err)), 0);
	if (*err)
		printf("# %s\n", err);
	json_array_foreach(json_object_get(doc, "members"), i, m)
	{
		json_t *eff = NULL;
		struct ix_config *cfg = NULL;
		const char *name = json_string_value(json_object_get(m, "name"));
		int rc = ha_group_derive(NULL, doc, name, &eff, err, sizeof(err));
		char *text = rc == 0 ? json_dumps(eff, 0) : NULL;

		CHECK_EQ(rc, 0);
		if (text) {
			rc = cfg_load_string(text, name, &cfg, err, sizeof(err));
			CHECK_EQ(rc, 0);
			if (rc)
				printf("# %s: %s\n", name, err);
		}
		cfg_free(cfg);
		free(text);
		json_decref(eff);
	}
}

static const char *str(json_t *o, const char *path)
{
	char buf[256], *save = NULL;
	json_t *v = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, strtoul(k, NULL, 10))
				     : json_object_get(v, k);
	return v && json_is_string(v) ? json_string_value(v) : v ? "<not a string>" : "<none>";
}

static long long num(json_t *o, const char *path)
{
	char buf[256], *save = NULL;
	json_t *v = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, strtoul(k, NULL, 10))
				     : json_object_get(v, k);
	return json_is_integer(v) ? json_integer_value(v) : -999;
}

static bool has(json_t *o, const char *path)
{
	return strcmp(str(o, path), "<none>") != 0;
}

static size_t count(json_t *o, const char *path)
{
	char buf[256], *save = NULL;
	json_t *v = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, strtoul(k, NULL, 10))
				     : json_object_get(v, k);
	return json_is_array(v) ? json_array_size(v) : (json_is_object(v) ? json_object_size(v) : 0);
}

static int noted(json_t *notes, const char *a, const char *b)
{
	json_t *n;
	size_t i;
	int k = 0;

	json_array_foreach(notes, i, n) k += strstr(json_string_value(n), a) &&
					 (!b || strstr(json_string_value(n), b));
	return k;
}

/* drivers/target/target_core_spc.c spc_gen_naa_6h_vendor_specific (and tcmu-runner's
 * scsi.c, which answers for user:rbd): 6, company id 001405, 25 hex digits of the serial */
static void test_naa(void)
{
	uint8_t n[16];
	static const uint8_t uuid[16] = {0x60, 0x01, 0x40, 0x53, 0xf2, 0xb9, 0xc1, 0xe5,
					 0xd4, 0x74, 0xa8, 0xeb, 0x6f, 0x09, 0x1c, 0x2d};
	static const uint8_t shrt[16] = {0x60, 0x01, 0x40, 0x5a, 0xbc, 0};
	static const uint8_t empty[16] = {0x60, 0x01, 0x40, 0x50};
	static const uint8_t upper[16] = {0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0};

	printf("# LIO's NAA designator from the unit serial\n");
	lio_naa_from_serial("3f2b9c1e-5d47-4a8e-b6f0-91c2d7e4a853", n);
	CHECK_MEM(n, uuid, 16);
	lio_naa_from_serial("a-b-c", n); /* non-hex characters skipped; the rest zero */
	CHECK_MEM(n, shrt, 16);
	lio_naa_from_serial("", n);
	CHECK_MEM(n, empty, 16);
	lio_naa_from_serial("ABCDEF0xyz", n); /* upper case is hex too; x, y, z are not */
	CHECK_MEM(n, upper, 16);
	/* only 25 digits fit: a 26th changes nothing */
	uint8_t a[16], b[16];
	lio_naa_from_serial("1234567890123456789012345", a);
	lio_naa_from_serial("12345678901234567890123456789", b);
	CHECK_MEM(a, b, 16);
	CHECK_EQ(a[15], 0x45);
}

static void test_single(void)
{
	json_t *notes = NULL, *d;

	printf("# one target, one disk, two gateways, a CHAP client in a host group\n");
	d = import("single.json", NULL, &notes);
	if (!d)
		return;
	CHECK_STR(str(d, "kind"), "ix-group");
	CHECK_EQ(num(d, "version"), 1);
	CHECK_EQ(num(d, "generation"), 1);
	CHECK_EQ(count(d, "members"), 2);
	CHECK_STR(str(d, "members.0.name"), "gw1.example.net");
	CHECK_EQ(num(d, "members.0.id"), 1);
	CHECK_STR(str(d, "members.0.portals.0.address"), "192.0.2.11");
	CHECK_EQ(num(d, "members.0.portals.0.port"), 3260);
	CHECK_STR(str(d, "members.1.name"), "gw2.example.net");
	CHECK_EQ(num(d, "members.1.id"), 2);
	CHECK_STR(str(d, "members.1.portals.0.address"), "192.0.2.12");
	CHECK_EQ(count(d, "targets"), 1);
	CHECK_STR(str(d, "targets.0.name"), "iqn.2003-01.com.redhat.iscsi-gw:iscsi-igw");
	CHECK_EQ(count(d, "targets.0.members"), 2);
	CHECK_EQ(count(d, "targets.0.luns"), 1);
	CHECK_EQ(num(d, "targets.0.luns.0.lun"), 0);
	CHECK_STR(str(d, "targets.0.luns.0.backend"), "rbd");
	CHECK_STR(str(d, "targets.0.luns.0.rbd.pool"), "rbd");
	CHECK_STR(str(d, "targets.0.luns.0.rbd.image"), "vmstore");
	CHECK_STR(str(d, "targets.0.luns.0.serial"), "8d3c40e2-2f6b-4c7e-9a51-0b7d6e3f2a19");
	CHECK_STR(str(d, "targets.0.luns.0.naa_id"), "0x60014058d3c40e22f6b4c7e9a510b7d6");
	CHECK_STR(str(d, "targets.0.luns.0.vendor"), "LIO-ORG");
	CHECK_STR(str(d, "targets.0.luns.0.product"), "TCMU device");
	CHECK(!has(d, "targets.0.luns.0.rbd.conf"));
	CHECK_EQ(count(d, "targets.0.acls"), 1);
	CHECK_STR(str(d, "targets.0.acls.0.initiator"), "iqn.1994-05.com.redhat:esx-host1");
	CHECK_STR(str(d, "targets.0.acls.0.chap.user"), "esxhost1user");
	CHECK_STR(str(d, "targets.0.acls.0.chap.secret"), "esx1Passw0rd12");
	CHECK(!has(d, "targets.0.acls.0.mutual_chap"));
	CHECK_EQ(count(d, "targets.0.acls.0.luns"), 1);
	CHECK_EQ(num(d, "targets.0.acls.0.luns.0.lun"), 0);
	CHECK_EQ(num(d, "targets.0.acls.0.luns.0.target_lun"), 0);
	CHECK(json_is_true(json_object_get(json_array_get(json_object_get(d, "targets"), 0),
					   "chap_required")));
	CHECK(!has(d, "global.discovery"));
	CHECK_EQ(json_array_size(notes), 0);
	loads_everywhere(d);
	json_decref(d);
	json_decref(notes);
}

static void test_two_targets(void)
{
	json_t *notes = NULL, *d;
	struct cephiscsi_opts o = {.rbd_conf = "/etc/ceph/ceph.conf", .rbd_client = "ixgw",
				   .exclusive_lock = 1};

	printf("# two targets, three disks, CHAP and mutual CHAP clients, masking, discovery\n");
	d = import("two-targets.json", &o, &notes);
	if (!d)
		return;
	/* members: the first target's TPG order (ip_list) */
	CHECK_EQ(count(d, "members"), 2);
	CHECK_STR(str(d, "members.0.name"), "ceph-gw-1.lab");
	CHECK_EQ(num(d, "members.0.id"), 1);
	CHECK_STR(str(d, "members.0.portals.0.address"), "192.0.2.21");
	CHECK_STR(str(d, "members.1.name"), "ceph-gw-2.lab");
	CHECK_EQ(num(d, "members.1.id"), 2);
	CHECK_STR(str(d, "members.1.portals.0.address"), "192.0.2.22");
	/* discovery */
	CHECK_STR(str(d, "global.discovery.chap.user"), "discuser01");
	CHECK_STR(str(d, "global.discovery.chap.secret"), "discPass123456");
	CHECK_STR(str(d, "global.discovery.mutual_chap.user"), "discmutual01");
	CHECK_STR(str(d, "global.discovery.mutual_chap.secret"), "discMutual1234");
	/* target 1: two LUNs, two clients */
	CHECK_EQ(count(d, "targets"), 2);
	CHECK_STR(str(d, "targets.0.name"), "iqn.2003-01.com.redhat.iscsi-gw:ceph-igw");
	CHECK_EQ(count(d, "targets.0.luns"), 2);
	CHECK_EQ(num(d, "targets.0.luns.0.lun"), 0);
	CHECK_STR(str(d, "targets.0.luns.0.rbd.image"), "disk_1");
	CHECK_STR(str(d, "targets.0.luns.0.rbd.conf"), "/etc/ceph/ceph.conf");
	CHECK_STR(str(d, "targets.0.luns.0.rbd.client"), "ixgw");
	CHECK(json_is_true(json_object_get(
	    json_object_get(json_array_get(json_object_get(json_array_get(
						   json_object_get(d, "targets"), 0),
						   "luns"),
					   0),
			    "rbd"),
	    "exclusive_lock")));
	CHECK_STR(str(d, "targets.0.luns.0.naa_id"), "0x60014053f2b9c1e5d474a8eb6f091c2d");
	CHECK_STR(str(d, "targets.0.luns.0.serial"), "3f2b9c1e-5d47-4a8e-b6f0-91c2d7e4a853");
	CHECK_EQ(num(d, "targets.0.luns.1.lun"), 1);
	CHECK_STR(str(d, "targets.0.luns.1.rbd.image"), "disk_2");
	CHECK_STR(str(d, "targets.0.luns.1.naa_id"), "0x6001405a07d5e3c94b14f268c3ae5f1b");
	CHECK_STR(str(d, "targets.0.luns.1.serial"), "a07d5e3c-94b1-4f26-8c3a-e5f1b2d06c47");
	CHECK_EQ(count(d, "targets.0.acls"), 2);
	/* sorted by initiator: win1 first; it sees only disk_2, as its LUN 0 */
	CHECK_STR(str(d, "targets.0.acls.0.initiator"), "iqn.1991-05.com.microsoft:win1");
	CHECK_STR(str(d, "targets.0.acls.0.chap.user"), "win1chapuser");
	CHECK_STR(str(d, "targets.0.acls.0.chap.secret"), "win1ChapPass12");
	CHECK(!has(d, "targets.0.acls.0.mutual_chap"));
	CHECK_EQ(count(d, "targets.0.acls.0.luns"), 1);
	CHECK_EQ(num(d, "targets.0.acls.0.luns.0.lun"), 0);
	CHECK_EQ(num(d, "targets.0.acls.0.luns.0.target_lun"), 1);
	CHECK_STR(str(d, "targets.0.acls.1.initiator"), "iqn.1994-05.com.redhat:client1");
	CHECK_STR(str(d, "targets.0.acls.1.chap.user"), "client1user");
	CHECK_STR(str(d, "targets.0.acls.1.chap.secret"), "client1pass1234");
	CHECK_STR(str(d, "targets.0.acls.1.mutual_chap.user"), "tgtmutual1");
	CHECK_STR(str(d, "targets.0.acls.1.mutual_chap.secret"), "mutualPass5678");
	CHECK_EQ(count(d, "targets.0.acls.1.luns"), 2);
	CHECK_EQ(num(d, "targets.0.acls.1.luns.1.lun"), 1);
	CHECK_EQ(num(d, "targets.0.acls.1.luns.1.target_lun"), 1);
	CHECK(!has(d, "targets.0.chap"));
	/* target 2: its own TPG order differs (ip_list B, A): noted for both gateways */
	CHECK_STR(str(d, "targets.1.name"), "iqn.2003-01.com.redhat.iscsi-gw:ceph-igw2");
	CHECK_EQ(count(d, "targets.1.members"), 2);
	CHECK_STR(str(d, "targets.1.luns.0.rbd.image"), "disk_3");
	CHECK_EQ(num(d, "targets.1.luns.0.rbd.osd_op_timeout_s"), 20); /* its control */
	CHECK_STR(str(d, "targets.1.luns.0.naa_id"), "0x6001405c61e8a2f0b3d47c9a5e47d9f3");
	CHECK_STR(str(d, "targets.1.acls.0.initiator"), "iqn.1994-05.com.redhat:client2");
	CHECK_STR(str(d, "targets.1.acls.0.mutual_chap.user"), "tgtmutual2");
	CHECK_STR(str(d, "targets.1.acls.0.mutual_chap.secret"), "mutual2Pass5678");
	CHECK_EQ(noted(notes, "ceph-igw2, gateway ceph-gw-2.lab: TPG tag 1", "member id 2"), 1);
	CHECK_EQ(noted(notes, "ceph-igw2, gateway ceph-gw-1.lab: TPG tag 2", "member id 1"), 1);
	CHECK_EQ(noted(notes, "control cmdsn_depth = 64", NULL), 1);
	CHECK_EQ(noted(notes, "disk rbd/disk_3: control max_data_area_mb = 64", NULL), 1);
	CHECK_EQ(json_array_size(notes), 4);
	/* no note quotes a secret */
	CHECK_EQ(noted(notes, "Pass", NULL), 0);
	loads_everywhere(d);
	json_decref(d);
	json_decref(notes);
}

/* a stand-in for the RSA key: the "ciphertext" is the password reversed; "bad" fails */
static int fake_decrypt(void *arg, const char *b64, char *out, size_t cap)
{
	size_t n = strlen(b64);

	(void)arg;
	if (strcmp(b64, "bad") == 0 || n + 1 > cap)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		out[i] = b64[n - 1 - i];
	out[n] = 0;
	return 0;
}

static void test_edge(void)
{
	json_t *notes = NULL, *d;
	struct cephiscsi_opts o = {.decrypt = fake_decrypt};

	printf("# what cannot be carried over, each with its reason\n");
	d = import("edge.json", NULL, &notes);
	if (!d)
		return;
	CHECK_EQ(count(d, "members"), 2);
	CHECK_EQ(noted(notes, "gateway gw-spare: no portal of it is in any target", NULL), 1);
	/* targets by name: mixed, noclients, open */
	CHECK_STR(str(d, "targets.0.name"), "iqn.2026-09.lab.example:mixed");
	CHECK_EQ(count(d, "targets.0.acls"), 1);
	CHECK_STR(str(d, "targets.0.acls.0.initiator"), "iqn.1994-05.com.redhat:samesecret");
	CHECK(!has(d, "targets.0.acls.0.mutual_chap"));
	CHECK_EQ(noted(notes, "client iqn.1994-05.com.redhat:encrypted: CHAP password is encrypted",
		       NULL),
		 1);
	CHECK_EQ(noted(notes, "client iqn.1994-05.com.redhat:nochap: no CHAP credential", NULL), 1);
	CHECK_EQ(noted(notes, "client iqn.1994-05.com.redhat:samesecret: the mutual CHAP password "
			      "equals",
		       NULL),
		 1);
	/* ACLs on and nobody carried over: no LUN opened to everyone */
	CHECK_STR(str(d, "targets.1.name"), "iqn.2026-09.lab.example:noclients");
	CHECK_EQ(count(d, "targets.1.luns"), 0);
	CHECK_EQ(count(d, "targets.1.acls"), 0);
	CHECK_EQ(noted(notes, "noclients: ACLs are on", "left out"), 1);
	/* ACLs off: target CHAP, no ACLs; the block backstore and the disk without wwn */
	CHECK_STR(str(d, "targets.2.name"), "iqn.2026-09.lab.example:open");
	CHECK_STR(str(d, "targets.2.chap.user"), "tgtchapuser");
	CHECK(!has(d, "targets.2.mutual_chap")); /* equal to the one-way secret */
	CHECK(!has(d, "targets.2.acls"));
	CHECK_EQ(count(d, "targets.2.luns"), 2);
	CHECK_EQ(num(d, "targets.2.luns.1.lun"), 2);
	CHECK(!has(d, "targets.2.luns.1.naa_id") && !has(d, "targets.2.luns.1.serial"));
	CHECK_EQ(noted(notes, "disk iscsi/fileio_disk: backstore \"block\"", NULL), 1);
	CHECK_EQ(noted(notes, "disk ssd/nowwn: no wwn", NULL), 1);
	CHECK_EQ(noted(notes, "open: acl_enabled is false", NULL), 1);
	CHECK(!has(d, "global.discovery"));
	CHECK_EQ(noted(notes, "discovery: CHAP is not carried over", NULL), 1);
	loads_everywhere(d);
	json_decref(d);
	json_decref(notes);

	/* with the key: the encrypted credentials are carried (here "decrypted" by reversal) */
	d = import("edge.json", &o, &notes);
	if (!d)
		return;
	CHECK_STR(str(d, "targets.0.acls.0.initiator"), "iqn.1994-05.com.redhat:encrypted");
	CHECK_STR(str(d, "targets.0.acls.0.chap.secret"), "0VmcjV2c"); /* "c2VjcmV0" reversed */
	CHECK_STR(str(d, "global.discovery.chap.user"), "discuser02");
	CHECK_STR(str(d, "global.discovery.chap.secret"), "kVGdwlncj5WZ"); /* reversed */
	CHECK_EQ(noted(notes, "encrypted", NULL), 0);
	loads_everywhere(d);
	json_decref(d);
	json_decref(notes);
}

static void test_refused(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"", "not JSON"},
	    {"{\"version\": 11,", "not JSON"},
	    {"[1, 2]", "the top level is not an object"},
	    {"{\"disks\": {}}", "no integer \"version\""},
	    {"{\"version\": 10, \"targets\": {}}", "version 10 is older than 11"},
	    {"{\"version\": 11, \"targets\": []}", "\"targets\" is not an object"},
	    {"{\"version\": 11, \"discovery_auth\": \"x\"}", "\"discovery_auth\" is not an object"},
	    {"{\"version\": 11, \"version\": 11}", "duplicate"},
	    {"{\"version\": 11, \"discovery_auth\": {\"password\": \"a\\u0000b\"}}", "not JSON"},
	    /* the parser's "near" text is not quoted: it could be a password */
	    {"{\"version\": 11, \"discovery_auth\": {\"password\": \"pw-123\" x}}", "not JSON"},
	};
	char err[512];

	printf("# refused inputs\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *doc = (json_t *)1, *notes = (json_t *)1;
		int rc = cephiscsi_import(cases[i].in, strlen(cases[i].in), NULL, &doc, &notes, err,
					  sizeof(err));
		CHECK(rc == -EINVAL && doc == NULL && notes == NULL && strstr(err, cases[i].want));
		CHECK(strstr(err, "pw-123") == NULL);
		if (!strstr(err, cases[i].want))
			printf("# %s -> %s\n", cases[i].in, err);
	}
	/* well-formed, but no gateway: no group */
	json_t *doc = NULL, *notes = NULL;
	CHECK_EQ(cephiscsi_import("{\"version\": 11}", 15, NULL, &doc, &notes, err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, "no gateway has a portal in any target") != NULL);
	/* a newer schema: converted, with a note */
	static const char newer[] =
	    "{\"version\": 12, \"targets\": {\"iqn.2026-01.lab:t\": {\"ip_list\": [\"192.0.2.1\"],"
	    " \"portals\": {\"gw\": {\"portal_ip_addresses\": [\"192.0.2.1\"]}}}}}";
	CHECK_EQ(cephiscsi_import(newer, strlen(newer), NULL, &doc, &notes, err, sizeof(err)), 0);
	CHECK_EQ(noted(notes, "version 12 is newer", NULL), 1);
	json_decref(doc);
	json_decref(notes);
}

/* names and credentials ix's loader would refuse are noted and left out, so that the rest of
 * the group still loads */
static void test_bad_names(void)
{
	static const char in[] =
	    "{\"version\": 11, \"targets\": {"
	    " \"iqn.2026-01.lab:t\": {\"ip_list\": [\"192.0.2.1\"],"
	    "  \"portals\": {\"gw\": {\"portal_ip_addresses\": [\"192.0.2.1\"]}},"
	    "  \"disks\": {},"
	    "  \"clients\": {"
	    "   \"not an iqn\": {\"auth\": {\"username\": \"user00001\", \"password\": \"pass-000001\"}},"
	    "   \"iqn.2026-01.lab:ctl\": {\"auth\": {\"username\": \"us\\ter00001\","
	    "      \"password\": \"pass-000002\"}},"
	    "   \"iqn.2026-01.lab:good\": {\"auth\": {\"username\": \"user00004\","
	    "      \"password\": \"pass-000004\"}}}},"
	    " \"bad target name\": {\"ip_list\": [\"192.0.2.1\"],"
	    "  \"portals\": {\"gw\": {\"portal_ip_addresses\": [\"192.0.2.1\"]}}}}}";
	json_t *doc = NULL, *notes = NULL;
	char err[512] = "";

	printf("# names and credentials ix refuses\n");
	CHECK_EQ(cephiscsi_import(in, strlen(in), NULL, &doc, &notes, err, sizeof(err)), 0);
	if (!doc) {
		printf("# %s\n", err);
		return;
	}
	CHECK_EQ(count(doc, "targets"), 1);
	CHECK_EQ(count(doc, "targets.0.acls"), 1);
	CHECK_STR(str(doc, "targets.0.acls.0.initiator"), "iqn.2026-01.lab:good");
	CHECK_EQ(noted(notes, "client not an iqn: not a valid iSCSI name", NULL), 1);
	CHECK_EQ(noted(notes, "client iqn.2026-01.lab:ctl: CHAP user name with a control", NULL), 1);
	CHECK_EQ(noted(notes, "target bad target name: not a valid iSCSI name", NULL), 1);
	CHECK_EQ(noted(notes, "pass-00000", NULL), 0);
	loads_everywhere(doc);
	json_decref(doc);
	json_decref(notes);
}

int main(void)
{
	test_naa();
	test_single();
	test_two_targets();
	test_edge();
	test_refused();
	test_bad_names();
	return tap_done();
}
