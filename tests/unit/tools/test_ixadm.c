/* ixadm's pure parts: portal and name parsing (table-driven), the node database on disk
 * (round trip, atomic replacement, validation of what a file or -o update brings), records
 * mapped to session options, and the control protocol's hex and path helpers. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../tools/ixadm.h"
#include "tap.h"

static void test_portals(void)
{
	static const struct {
		const char *in;
		int ok;
		const char *host;
		int port, tpgt;
	} cases[] = {
		{"10.0.0.1", 1, "10.0.0.1", 3260, -1},
		{"10.0.0.1:3261", 1, "10.0.0.1", 3261, -1},
		{"10.0.0.1:3261,5", 1, "10.0.0.1", 3261, 5},
		{"10.0.0.1,1", 1, "10.0.0.1", 3260, 1},
		{"[fe80::1]:3262,1", 1, "fe80::1", 3262, 1},
		{"[::1]", 1, "::1", 3260, -1},
		{"fe80::2", 1, "fe80::2", 3260, -1},
		{"san.example.com:860", 1, "san.example.com", 860, -1},
		{"", 0, NULL, 0, 0},
		{"10.0.0.1:0", 0, NULL, 0, 0},
		{"10.0.0.1:65536", 0, NULL, 0, 0},
		{"10.0.0.1:port", 0, NULL, 0, 0},
		{"10.0.0.1:3260,x", 0, NULL, 0, 0},
		{"10.0.0.1:3260,70000", 0, NULL, 0, 0},
		{"[::1", 0, NULL, 0, 0},
		{"[::1]x", 0, NULL, 0, 0},
		{"../etc", 0, NULL, 0, 0},
		{"a/b:3260", 0, NULL, 0, 0},
		{"-rf", 0, NULL, 0, 0},
		{"host name", 0, NULL, 0, 0},
	};
	char buf[300];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ax_portal p;
		int r = ax_portal_parse(cases[i].in, &p);
		CHECK_EQ(r == 0, cases[i].ok);
		if (r == 0 && cases[i].ok) {
			CHECK_STR(p.host, cases[i].host);
			CHECK_EQ(p.port, cases[i].port);
			CHECK_EQ(p.tpgt, cases[i].tpgt);
		}
	}
	memset(buf, 'a', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = 0;
	{
		struct ax_portal p;
		CHECK(ax_portal_parse(buf, &p) < 0); /* longer than a host may be */
		ax_portal_parse("[fe80::1]:3262", &p);
		ax_portal_str(&p, buf, sizeof(buf));
		CHECK_STR(buf, "[fe80::1]:3262");
		ax_portal_parse("10.1.1.1", &p);
		ax_portal_str(&p, buf, sizeof(buf));
		CHECK_STR(buf, "10.1.1.1:3260");
	}
}

static void test_names(void)
{
	CHECK(ax_iscsi_name_ok("iqn.2024-01.org.ix.test:disk1"));
	CHECK(ax_iscsi_name_ok("eui.0123456789ABCDEF"));
	CHECK(ax_iscsi_name_ok("naa.52004567BA64678D"));
	CHECK(!ax_iscsi_name_ok("iqn."));
	CHECK(!ax_iscsi_name_ok("disk1"));
	CHECK(!ax_iscsi_name_ok("iqn.2024-01.x:../../etc"));
	CHECK(!ax_iscsi_name_ok("iqn.2024-01.x:a b"));
	CHECK(!ax_iscsi_name_ok("iqn.2024-01.x:a\nb"));
	char big[300];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memcpy(big, "iqn.", 4);
	CHECK(!ax_iscsi_name_ok(big));
	CHECK_EQ(ax_errno_exit(-EACCES), AX_ERR_AUTH);
	CHECK_EQ(ax_errno_exit(-ENOENT), AX_ERR_FATAL_LOGIN);
	CHECK_EQ(ax_errno_exit(-ETIMEDOUT), AX_ERR_TIMEOUT);
	CHECK_EQ(ax_errno_exit(-ECONNREFUSED), AX_ERR_TRANS);
}

static void test_settings(void)
{
	struct node_rec r;
	char err[512];

	node_defaults(&r);
	CHECK_STR(r.startup, "manual");
	CHECK_EQ(r.login_timeout, 5);
	CHECK_EQ(r.replacement_timeout, 15);
	CHECK_EQ(r.tpgt, -1);
	CHECK_EQ(node_set(&r, "node.startup", "AUTOMATIC", false, err, sizeof(err)), 0);
	CHECK_STR(r.startup, "automatic"); /* canonical spelling */
	CHECK(node_set(&r, "node.startup", "sometimes", false, err, sizeof(err)) < 0);
	CHECK(node_set(&r, "node.bogus", "1", false, err, sizeof(err)) < 0);
	CHECK(strstr(err, "unknown setting") != NULL);
	CHECK(node_set(&r, "node.name", "iqn.2024-01.x:y", false, err, sizeof(err)) < 0);
	CHECK_EQ(node_set(&r, "node.name", "iqn.2024-01.x:y", true, err, sizeof(err)), 0);
	CHECK(node_set(&r, "node.conn[0].timeo.login_timeout", "0", false, err, sizeof(err)) < 0);
	CHECK(node_set(&r, "node.conn[0].timeo.login_timeout", "5s", false, err, sizeof(err)) < 0);
	CHECK(node_set(&r, "node.conn[0].timeo.login_timeout", "99999", false, err, sizeof(err)) < 0);
	CHECK_EQ(node_set(&r, "node.conn[0].timeo.login_timeout", "2", false, err, sizeof(err)), 0);
	CHECK_EQ(r.login_timeout, 2);
	CHECK_EQ(node_set(&r, "node.session.auth.chap_algs", "SHA3-256,MD5", false, err,
			  sizeof(err)), 0);
	CHECK(node_set(&r, "node.session.auth.chap_algs", "SHA3-256,RC4", false, err,
		       sizeof(err)) < 0);
	CHECK(node_set(&r, "node.session.auth.chap_algs", "", false, err, sizeof(err)) < 0);
	CHECK(node_set(&r, "node.session.auth.username", "a\tb", false, err, sizeof(err)) < 0);
	char big[AX_SECRET_MAX + 8];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	CHECK(node_set(&r, "node.session.auth.password", big, false, err, sizeof(err)) < 0);
	CHECK(node_set(&r, "node.conn[0].address", "a/b", true, err, sizeof(err)) < 0);
}

static void test_opts(void)
{
	struct node_rec r;
	struct ax_sess_cfg c;
	char err[512];

	node_defaults(&r);
	node_set(&r, "node.name", "iqn.2024-01.x:y", true, err, sizeof(err));
	node_set(&r, "node.conn[0].address", "10.0.0.9", true, err, sizeof(err));
	node_set(&r, "node.conn[0].port", "3300", true, err, sizeof(err));
	CHECK_EQ(node_to_cfg(&r, "iqn.2024-01.me:i", &c, err, sizeof(err)), 0);
	CHECK_STR(c.o.portal, "10.0.0.9:3300");
	CHECK_STR(c.o.initiator_name, "iqn.2024-01.me:i");
	CHECK(c.o.chap.user == NULL);
	CHECK_EQ(c.o.login_timeout_ms, 5000);
	CHECK_EQ(c.o.login_retries, 2);
	CHECK_EQ(c.o.replacement_timeout_ms, 15000);
	CHECK_EQ(c.cmd_timeout_ms, 30000);
	node_set(&r, "node.session.auth.authmethod", "CHAP", false, err, sizeof(err));
	CHECK(node_to_cfg(&r, "iqn.2024-01.me:i", &c, err, sizeof(err)) < 0); /* no secret */
	node_set(&r, "node.session.auth.username", "u", false, err, sizeof(err));
	node_set(&r, "node.session.auth.password", "secret-secret", false, err, sizeof(err));
	node_set(&r, "node.session.auth.chap_algs", "SHA3-256,SHA256,MD5", false, err, sizeof(err));
	node_set(&r, "node.conn[0].iscsi.HeaderDigest", "crc32c,none", false, err, sizeof(err));
	CHECK_EQ(node_to_cfg(&r, "iqn.2024-01.me:i", &c, err, sizeof(err)), 0);
	CHECK_STR(c.o.chap.user, "u");
	CHECK(c.o.chap.required);
	CHECK(c.o.chap.mutual_user == NULL);
	CHECK_EQ(c.o.chap.nalgs, 3);
	CHECK_EQ(c.o.chap.algs[0], 8);
	CHECK_EQ(c.o.chap.algs[1], 7);
	CHECK_EQ(c.o.chap.algs[2], 5);
	CHECK_EQ(c.o.header_digest, IX_DIGEST_PREFER_CRC32C);
	node_set(&r, "node.session.auth.username_in", "t", false, err, sizeof(err));
	CHECK(node_to_cfg(&r, "iqn.2024-01.me:i", &c, err, sizeof(err)) < 0); /* half mutual */
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_db(void)
{
	char db[] = "/tmp/ixadm-unit.XXXXXX", path[512], err[512];
	struct node_rec a, b;
	struct node_list l;
	struct stat st;
	FILE *f;

	if (!mkdtemp(db)) {
		tap_skip("no temporary folder");
		return;
	}
	node_defaults(&a);
	node_set(&a, "node.name", "iqn.2024-01.x:t2", true, err, sizeof(err));
	node_set(&a, "node.conn[0].address", "10.0.0.2", true, err, sizeof(err));
	node_set(&a, "node.tpgt", "1", true, err, sizeof(err));
	node_set(&a, "node.session.auth.password", "pass word", false, err, sizeof(err));
	CHECK_EQ(node_save(db, &a, err, sizeof(err)), 0);
	b = a;
	node_set(&b, "node.name", "iqn.2024-01.x:t1", true, err, sizeof(err));
	CHECK_EQ(node_save(db, &b, err, sizeof(err)), 0);

	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t2/10.0.0.2,3260,1", db);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	CHECK_EQ(node_list_load(db, &l), 0);
	CHECK_EQ(l.n, 2);
	if (l.n == 2) {
		CHECK_STR(l.recs[0].name, "iqn.2024-01.x:t1"); /* sorted */
		CHECK_STR(l.recs[1].password, "pass word");    /* inner spaces survive */
		CHECK_EQ(l.recs[1].tpgt, 1);
	}
	node_list_free(&l);

	/* the same target and portal under another TPGT replaces the file */
	node_set(&a, "node.tpgt", "7", true, err, sizeof(err));
	CHECK_EQ(node_save(db, &a, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t2", db);
	CHECK_EQ(count_files(path), 1);

	/* unknown keys are ignored, broken values make the record unreadable (and skipped) */
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t1/10.0.0.2,3260,1", db);
	f = fopen(path, "a");
	if (f) {
		fputs("node.future.setting = 1\n", f);
		fclose(f);
	}
	CHECK_EQ(node_load_file(path, &b, err, sizeof(err)), 0);
	f = fopen(path, "a");
	if (f) {
		fputs("node.conn[0].port = 99999\n", f);
		fclose(f);
	}
	CHECK(node_load_file(path, &b, err, sizeof(err)) < 0);
	CHECK(strstr(err, "node.conn[0].port") != NULL);
	CHECK_EQ(node_list_load(db, &l), 0);
	CHECK_EQ(l.n, 1);
	node_list_free(&l);

	/* a file in a folder of another name is not believed */
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t3", db);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t3/10.0.0.2,3260,7", db);
	{
		char src[512];
		snprintf(src, sizeof(src), "%s/iqn.2024-01.x:t2/10.0.0.2,3260,7", db);
		CHECK_EQ(link(src, path), 0);
	}
	CHECK_EQ(node_list_load(db, &l), 0);
	CHECK_EQ(l.n, 1);
	node_list_free(&l);
	unlink(path);
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t3", db);
	rmdir(path);

	CHECK_EQ(node_delete(db, &a), 0);
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t2", db);
	CHECK(access(path, F_OK) < 0); /* the emptied target folder goes too */
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t1/10.0.0.2,3260,1", db);
	unlink(path);
	snprintf(path, sizeof(path), "%s/iqn.2024-01.x:t1", db);
	rmdir(path);

	/* the initiator name is created once and then kept */
	{
		char n1[AX_NAME_MAX], n2[AX_NAME_MAX];
		unsetenv("IX_INITIATOR_NAME");
		CHECK_EQ(ax_initiator_name(db, false, n1, sizeof(n1)), -ENOENT);
		CHECK_EQ(ax_initiator_name(db, true, n1, sizeof(n1)), 0);
		CHECK(ax_iscsi_name_ok(n1));
		CHECK_EQ(ax_initiator_name(db, false, n2, sizeof(n2)), 0);
		CHECK_STR(n2, n1);
		snprintf(path, sizeof(path), "%s/initiatorname.iscsi", db);
		unlink(path);
	}
	CHECK_EQ(rmdir(db), 0);
}

static void test_ctl(void)
{
	uint8_t in[5] = {0x28, 0, 0xff, 0x10, 0x7f}, out[8];
	char hex[16];
	struct ax_portal p1, p2;
	struct ctl_paths a, b;

	ax_hex(in, sizeof(in), hex);
	CHECK_STR(hex, "2800ff107f");
	CHECK_EQ(ax_unhex(hex, out, sizeof(out)), 5);
	CHECK_MEM(in, out, 5);
	CHECK(ax_unhex("abc", out, sizeof(out)) < 0);
	CHECK(ax_unhex("zz", out, sizeof(out)) < 0);
	CHECK(ax_unhex("000000000000000000", out, sizeof(out)) < 0);
	ax_portal_parse("10.0.0.1:3260", &p1);
	ax_portal_parse("10.0.0.1:3261", &p2);
	CHECK_EQ(ctl_paths("/var/lib/ix/nodes", "iqn.2024-01.x:y", &p1, &a), 0);
	CHECK_EQ(ctl_paths("/var/lib/ix/nodes", "iqn.2024-01.x:y", &p2, &b), 0);
	CHECK(strcmp(a.sock, b.sock) != 0);
	CHECK(strncmp(a.sock, "/var/lib/ix/nodes/.run/", 23) == 0);
	char longdb[200];
	memset(longdb, 'd', sizeof(longdb) - 1);
	longdb[0] = '/';
	longdb[sizeof(longdb) - 1] = 0;
	CHECK_EQ(ctl_paths(longdb, "iqn.2024-01.x:y", &p1, &a), -ENAMETOOLONG);
}

int main(void)
{
	test_portals();
	test_names();
	test_settings();
	test_opts();
	test_db();
	test_ctl();
	return tap_done();
}
