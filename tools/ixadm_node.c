/* The node database: <db>/<target name>/<host>,<port>,<tpgt>, one small "key = value" text file
 * per record with open-iscsi's setting names, written atomically (temporary file, fsync,
 * rename). Every setting goes through one table that knows its type, range and default, so
 * reading a file, `-o update -n KEY -v VALUE` and printing share the same checks. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ixadm.h"

enum nk_type { NK_STR, NK_UINT, NK_INT, NK_ENUM };

struct node_key {
	const char *name;
	enum nk_type type;
	size_t off;
	size_t size;                  /* NK_STR / NK_ENUM: buffer size */
	int64_t min, max;             /* NK_UINT / NK_INT */
	const char *const *choices;   /* NK_ENUM, NULL-terminated */
	const char *def;
	bool internal;                /* names the record: not changed by -o update */
	bool secret;
};

static const char *const startup_ch[] = {"manual", "automatic", NULL};
static const char *const transport_ch[] = {"tcp", "iser", "auto", NULL};
static const char *const disc_ch[] = {"static", "send_targets", "isns", NULL};
static const char *const auth_ch[] = {"None", "CHAP", NULL};
static const char *const digest_ch[] = {"None", "CRC32C", "CRC32C,None", "None,CRC32C", NULL};
static const char *const yesno_ch[] = {"Yes", "No", NULL};

#define F(field) offsetof(struct node_rec, field), sizeof(((struct node_rec *)0)->field)
#define STR(n, field, d) {n, NK_STR, F(field), 0, 0, NULL, d, false, false}
#define UINT(n, field, lo, hi, d) {n, NK_UINT, F(field), lo, hi, NULL, d, false, false}
#define ENUM(n, field, ch, d) {n, NK_ENUM, F(field), 0, 0, ch, d, false, false}

static const struct node_key keys[] = {
	{"node.name", NK_STR, F(name), 0, 0, NULL, "", true, false},
	{"node.tpgt", NK_INT, F(tpgt), -1, 65535, NULL, "-1", true, false},
	ENUM("node.startup", startup, startup_ch, "manual"),
	ENUM("iface.transport_name", transport, transport_ch, "tcp"),
	STR("iface.initiatorname", initiatorname, ""),
	{"node.discovery_address", NK_STR, F(disc_address), 0, 0, NULL, "", true, false},
	{"node.discovery_port", NK_UINT, F(disc_port), 0, 65535, NULL, "0", true, false},
	{"node.discovery_type", NK_ENUM, F(disc_type), 0, 0, disc_ch, "static", true, false},
	ENUM("node.session.auth.authmethod", authmethod, auth_ch, "None"),
	STR("node.session.auth.username", username, ""),
	{"node.session.auth.password", NK_STR, F(password), 0, 0, NULL, "", false, true},
	STR("node.session.auth.username_in", username_in, ""),
	{"node.session.auth.password_in", NK_STR, F(password_in), 0, 0, NULL, "", false, true},
	STR("node.session.auth.chap_algs", chap_algs, "MD5,SHA1,SHA256,SHA3-256"),
	UINT("node.session.timeo.replacement_timeout", replacement_timeout, 0, 86400, "15"),
	UINT("node.session.initial_login_retry_max", login_retry_max, 0, 1000, "2"),
	UINT("node.session.cmds_max", cmds_max, 1, 4096, "128"),
	UINT("node.session.cmd_timeout", cmd_timeout, 1, 3600, "30"),
	UINT("node.session.err_timeo.abort_timeout", abort_timeout, 1, 3600, "15"),
	ENUM("node.session.iscsi.ImmediateData", immediate_data, yesno_ch, "Yes"),
	ENUM("node.session.iscsi.InitialR2T", initial_r2t, yesno_ch, "No"),
	UINT("node.session.iscsi.FirstBurstLength", first_burst, 512, 16777215, "262144"),
	UINT("node.session.iscsi.MaxBurstLength", max_burst, 512, 16777215, "1048576"),
	{"node.conn[0].address", NK_STR, F(address), 0, 0, NULL, "", true, false},
	{"node.conn[0].port", NK_UINT, F(port), 1, 65535, NULL, "3260", true, false},
	UINT("node.conn[0].timeo.login_timeout", login_timeout, 1, 3600, "5"),
	UINT("node.conn[0].timeo.noop_out_interval", noop_interval, 0, 3600, "5"),
	UINT("node.conn[0].timeo.noop_out_timeout", noop_timeout, 0, 3600, "5"),
	ENUM("node.conn[0].iscsi.HeaderDigest", header_digest, digest_ch, "None"),
	ENUM("node.conn[0].iscsi.DataDigest", data_digest, digest_ch, "None"),
	UINT("node.conn[0].iscsi.MaxRecvDataSegmentLength", max_recv_dsl, 512, 16777215,
	     "262144"),
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const struct node_key *key_find(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static void seterr(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int chap_algs_check(const char *v)
{
	static const char *const names[] = {"MD5", "SHA1", "SHA256", "SHA3-256"};
	char buf[64], *save = NULL, *tok;
	int n = 0;

	if (strlen(v) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool ok = false;
		for (size_t i = 0; i < 4; i++)
			ok |= strcmp(tok, names[i]) == 0;
		if (!ok || ++n > 4)
			return -EINVAL;
	}
	return n ? 0 : -EINVAL;
}

static int key_set(struct node_rec *r, const struct node_key *k, const char *v, char *err,
		   size_t errlen)
{
	char *field = (char *)r + k->off;
	char *end;

	if (!printable(v)) {
		seterr(err, errlen, "%s: control characters in the value", k->name);
		return -EINVAL;
	}
	switch (k->type) {
	case NK_STR:
		if (strlen(v) >= k->size) {
			seterr(err, errlen, "%s: value longer than %zu bytes", k->name, k->size - 1);
			return -EINVAL;
		}
		if (k->off == offsetof(struct node_rec, chap_algs) && chap_algs_check(v) < 0) {
			seterr(err, errlen, "%s: \"%s\" is not a list of MD5, SHA1, SHA256, SHA3-256",
			       k->name, v);
			return -EINVAL;
		}
		if ((k->off == offsetof(struct node_rec, name) && *v && !ax_iscsi_name_ok(v)) ||
		    ((k->off == offsetof(struct node_rec, address) ||
		      k->off == offsetof(struct node_rec, disc_address)) && *v && !ax_host_ok(v))) {
			seterr(err, errlen, "%s: \"%s\" is not valid", k->name, v);
			return -EINVAL;
		}
		strcpy(field, v);
		return 0;
	case NK_UINT:
	case NK_INT: {
		long long n;

		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || end == v || *end || n < k->min || n > k->max) {
			seterr(err, errlen, "%s: \"%s\" is not a number in %lld..%lld", k->name, v,
			       (long long)k->min, (long long)k->max);
			return -EINVAL;
		}
		if (k->type == NK_UINT)
			*(uint32_t *)(void *)field = (uint32_t)n;
		else
			*(int32_t *)(void *)field = (int32_t)n;
		return 0;
	}
	case NK_ENUM:
		for (const char *const *c = k->choices; *c; c++)
			if (strcasecmp(*c, v) == 0) {
				strcpy(field, *c);
				return 0;
			}
		seterr(err, errlen, "%s: \"%s\" is not one of the accepted values", k->name, v);
		return -EINVAL;
	}
	return -EINVAL;
}

static void key_get(const struct node_rec *r, const struct node_key *k, char *buf, size_t len)
{
	const char *field = (const char *)r + k->off;

	switch (k->type) {
	case NK_STR:
	case NK_ENUM:
		snprintf(buf, len, "%s", field);
		break;
	case NK_UINT:
		snprintf(buf, len, "%u", *(const uint32_t *)(const void *)field);
		break;
	case NK_INT:
		snprintf(buf, len, "%d", *(const int32_t *)(const void *)field);
		break;
	}
}

void node_defaults(struct node_rec *r)
{
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < NKEYS; i++)
		key_set(r, &keys[i], keys[i].def, NULL, 0);
}

int node_set(struct node_rec *r, const char *key, const char *value, bool internal_ok,
	     char *err, size_t errlen)
{
	const struct node_key *k = key_find(key);

	if (!k) {
		seterr(err, errlen, "unknown setting \"%s\" (ixadm -m node -T IQN -p IP -o show "
			"lists them)", key);
		return -EINVAL;
	}
	if (k->internal && !internal_ok) {
		seterr(err, errlen, "%s names the record and cannot be changed (create a new "
			"record with -o new)", key);
		return -EINVAL;
	}
	return key_set(r, k, value, err, errlen);
}

void node_print(FILE *f, const struct node_rec *r, bool show_secrets)
{
	char v[AX_SECRET_MAX + 16];

	for (size_t i = 0; i < NKEYS; i++) {
		key_get(r, &keys[i], v, sizeof(v));
		if (keys[i].secret && *v && !show_secrets)
			snprintf(v, sizeof(v), "********");
		fprintf(f, "%s = %s\n", keys[i].name, *v ? v : "<empty>");
	}
}

void node_portal(const struct node_rec *r, struct ax_portal *p)
{
	snprintf(p->host, sizeof(p->host), "%s", r->address);
	p->port = (uint16_t)r->port;
	p->tpgt = r->tpgt;
}

void node_line(const struct node_rec *r, char *buf, size_t len)
{
	struct ax_portal p;
	char ps[AX_HOST_MAX + 16];

	node_portal(r, &p);
	ax_portal_str(&p, ps, sizeof(ps));
	snprintf(buf, len, "%s,%d %s", ps, r->tpgt, r->name);
}

bool node_match(const struct node_rec *r, const char *target, const struct ax_portal *p)
{
	if (target && strcmp(target, r->name) != 0)
		return false;
	if (p && (strcmp(p->host, r->address) != 0 || p->port != r->port))
		return false;
	if (p && p->tpgt >= 0 && r->tpgt >= 0 && p->tpgt != r->tpgt)
		return false;
	return true;
}

/* ---------------------------------------------------------------- files */

static int rec_path(const char *db, const struct node_rec *r, int32_t tpgt, char *buf,
		    size_t len)
{
	int n = snprintf(buf, len, "%s/%s/%s,%u,%d", db, r->name, r->address, r->port, tpgt);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int node_load_file(const char *path, struct node_rec *r, char *err, size_t errlen)
{
	char line[1024], kerr[256];
	FILE *f = fopen(path, "re");
	int lineno = 0, r_ = 0;

	if (!f) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	node_defaults(r);
	while (fgets(line, sizeof(line), f)) {
		char *key = line, *eq, *val, *end;
		size_t n = strlen(line);

		lineno++;
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			seterr(err, errlen, "%s:%d: line too long", path, lineno);
			r_ = -EINVAL;
			break;
		}
		while (isspace((unsigned char)*key))
			key++;
		if (*key == '#' || *key == 0)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			seterr(err, errlen, "%s:%d: no '=' in the line", path, lineno);
			r_ = -EINVAL;
			break;
		}
		for (end = eq; end > key && isspace((unsigned char)end[-1]); end--)
			;
		*end = 0;
		val = eq + 1;
		while (isspace((unsigned char)*val))
			val++;
		for (end = val + strlen(val); end > val && isspace((unsigned char)end[-1]); end--)
			;
		*end = 0;
		if (strcmp(val, "<empty>") == 0)
			*val = 0;
		if (!key_find(key)) {
			fprintf(stderr, "ixadm: %s:%d: unknown setting \"%s\" ignored\n", path, lineno,
				key);
			continue;
		}
		if (node_set(r, key, val, true, kerr, sizeof(kerr)) < 0) {
			seterr(err, errlen, "%s:%d: %s", path, lineno, kerr);
			r_ = -EINVAL;
			break;
		}
	}
	if (r_ == 0 && ferror(f)) {
		seterr(err, errlen, "%s: read error", path);
		r_ = -EIO;
	}
	fclose(f);
	if (r_ == 0 && (!r->name[0] || !r->address[0])) {
		seterr(err, errlen, "%s: node.name or node.conn[0].address missing", path);
		r_ = -EINVAL;
	}
	return r_;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Write tmp, fsync, rename over path, fsync the folder. */
static int write_atomic(const char *dir, const char *path, const char *data, size_t len)
{
	char tmp[PATH_MAX];
	int fd, r = 0, dfd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		off += (size_t)w;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

static int scan_target_dir(const char *db, const char *name, struct node_list *l, size_t *cap);

int node_save(const char *db, const struct node_rec *r, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX], v[AX_SECRET_MAX + 16];
	char *buf = NULL;
	size_t blen = 0;
	FILE *m;
	struct node_list same = {0};
	size_t cap = 0;
	int rc;

	if (!ax_iscsi_name_ok(r->name) || !ax_host_ok(r->address)) {
		seterr(err, errlen, "record with an invalid name or address");
		return -EINVAL;
	}
	if (snprintf(dir, sizeof(dir), "%s/%s", db, r->name) >= (int)sizeof(dir) ||
	    rec_path(db, r, r->tpgt, path, sizeof(path)) < 0) {
		seterr(err, errlen, "path of the record too long");
		return -ENAMETOOLONG;
	}
	rc = mkdir_p(dir, 0700);
	if (rc < 0) {
		seterr(err, errlen, "cannot create %s: %s", dir, strerror(-rc));
		return rc;
	}
	m = open_memstream(&buf, &blen);
	if (!m)
		return -ENOMEM;
	fprintf(m, "# BEGIN RECORD ix\n");
	for (size_t i = 0; i < NKEYS; i++) {
		key_get(r, &keys[i], v, sizeof(v));
		fprintf(m, "%s = %s\n", keys[i].name, *v ? v : "<empty>");
	}
	fprintf(m, "# END RECORD\n");
	if (fclose(m) != 0) {
		free(buf);
		return -ENOMEM;
	}
	rc = write_atomic(dir, path, buf, blen);
	free(buf);
	if (rc < 0) {
		seterr(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		return rc;
	}
	/* one record per (name, address, port): drop the file of an older TPGT */
	if (scan_target_dir(db, r->name, &same, &cap) == 0) {
		for (int i = 0; i < same.n; i++)
			if (strcmp(same.recs[i].address, r->address) == 0 &&
			    same.recs[i].port == r->port && same.recs[i].tpgt != r->tpgt)
				node_delete(db, &same.recs[i]);
	}
	node_list_free(&same);
	return 0;
}

int node_delete(const char *db, const struct node_rec *r)
{
	char path[PATH_MAX], dir[PATH_MAX];

	if (rec_path(db, r, r->tpgt, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (unlink(path) < 0)
		return -errno;
	if (snprintf(dir, sizeof(dir), "%s/%s", db, r->name) < (int)sizeof(dir))
		rmdir(dir); /* fails while other portals of the target remain: fine */
	return 0;
}

static int list_add(struct node_list *l, size_t *cap, const struct node_rec *r)
{
	if ((size_t)l->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct node_rec *n = realloc(l->recs, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		l->recs = n;
		*cap = nc;
	}
	l->recs[l->n++] = *r;
	return 0;
}

static int scan_target_dir(const char *db, const char *name, struct node_list *l, size_t *cap)
{
	char dir[PATH_MAX], path[PATH_MAX], err[512];
	struct dirent *e;
	struct node_rec r;
	DIR *d;
	int rc = 0;

	if (snprintf(dir, sizeof(dir), "%s/%s", db, name) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp."))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (node_load_file(path, &r, err, sizeof(err)) < 0) {
			fprintf(stderr, "ixadm: skipping record: %s\n", err);
			continue;
		}
		if (strcmp(r.name, name) != 0) {
			fprintf(stderr, "ixadm: skipping %s: node.name %s does not match its folder\n",
				path, r.name);
			continue;
		}
		rc = list_add(l, cap, &r);
		if (rc < 0)
			break;
	}
	closedir(d);
	return rc;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct node_rec *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	c = strcmp(x->address, y->address);
	if (c)
		return c;
	return (int)x->port - (int)y->port;
}

int node_list_load(const char *db, struct node_list *out)
{
	struct dirent *e;
	size_t cap = 0;
	DIR *d;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	d = opendir(db);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !ax_iscsi_name_ok(e->d_name))
			continue;
		rc = scan_target_dir(db, e->d_name, out, &cap);
		if (rc == -ENOTDIR || rc == -ENOENT)
			rc = 0;
		if (rc < 0)
			break;
	}
	closedir(d);
	if (out->n > 1)
		qsort(out->recs, (size_t)out->n, sizeof(out->recs[0]), rec_cmp);
	return rc;
}

void node_list_free(struct node_list *l)
{
	if (l->recs)
		explicit_bzero(l->recs, (size_t)l->n * sizeof(*l->recs));
	free(l->recs);
	l->recs = NULL;
	l->n = 0;
}

/* ---------------------------------------------------------------- session options */

static enum ix_digest digest_of(const char *v)
{
	if (strcmp(v, "CRC32C") == 0)
		return IX_DIGEST_CRC32C;
	if (strcmp(v, "CRC32C,None") == 0)
		return IX_DIGEST_PREFER_CRC32C;
	if (strcmp(v, "None,CRC32C") == 0)
		return IX_DIGEST_PREFER_NONE;
	return IX_DIGEST_NONE;
}

static void chap_algs_fill(const char *v, struct ix_chap *c)
{
	static const struct {
		const char *name;
		uint8_t alg;
	} map[] = {{"MD5", 5}, {"SHA1", 6}, {"SHA256", 7}, {"SHA3-256", 8}};
	char buf[64], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", v);
	c->nalgs = 0;
	for (tok = strtok_r(buf, ",", &save); tok && c->nalgs < 4;
	     tok = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < 4; i++)
			if (strcmp(tok, map[i].name) == 0)
				c->algs[c->nalgs++] = map[i].alg;
}

int node_to_cfg(const struct node_rec *r, const char *initiator, struct ax_sess_cfg *c,
		char *err, size_t errlen)
{
	struct ix_session_opts *o = &c->o;
	struct ax_portal p;

	ix_session_opts_default(o);
	snprintf(c->initiator, sizeof(c->initiator), "%s", initiator);
	node_portal(r, &p);
	ax_portal_str(&p, c->portal, sizeof(c->portal));
	c->cmd_timeout_ms = r->cmd_timeout * 1000;
	c->abort_timeout_ms = r->abort_timeout * 1000;
	o->initiator_name = c->initiator;
	o->portal = c->portal;
	o->target_name = r->name[0] ? r->name : NULL;
	o->transport = r->transport;
	if (strcmp(r->authmethod, "CHAP") == 0) {
		if (!r->username[0] || !r->password[0]) {
			seterr(err, errlen, "authmethod CHAP needs node.session.auth.username and "
				"node.session.auth.password");
			return -EINVAL;
		}
		o->chap.user = r->username;
		o->chap.secret = r->password;
		if (r->username_in[0] || r->password_in[0]) {
			if (!r->username_in[0] || !r->password_in[0]) {
				seterr(err, errlen, "mutual CHAP needs both username_in and "
					"password_in");
				return -EINVAL;
			}
			o->chap.mutual_user = r->username_in;
			o->chap.mutual_secret = r->password_in;
		}
		chap_algs_fill(r->chap_algs, &o->chap);
		o->chap.required = true;
	}
	o->header_digest = digest_of(r->header_digest);
	o->data_digest = digest_of(r->data_digest);
	o->max_recv_data_segment_length = r->max_recv_dsl;
	o->first_burst_length = r->first_burst;
	o->max_burst_length = r->max_burst;
	o->immediate_data = strcmp(r->immediate_data, "Yes") == 0;
	o->initial_r2t = strcmp(r->initial_r2t, "Yes") == 0;
	o->queue_depth = r->cmds_max;
	o->login_timeout_ms = r->login_timeout * 1000;
	o->login_retries = r->login_retry_max;
	o->replacement_timeout_ms = r->replacement_timeout * 1000;
	o->noop_interval_ms = r->noop_interval * 1000;
	o->noop_timeout_ms = r->noop_timeout * 1000;
	return 0;
}

/* ---------------------------------------------------------------- initiator name */

static int read_name_file(const char *path, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(path, "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *v;
		line[strcspn(line, "\r\n")] = 0;
		if (strncmp(line, "InitiatorName=", 14) != 0)
			continue;
		v = line + 14;
		if (!ax_iscsi_name_ok(v) || strlen(v) >= len) {
			r = -EINVAL;
			break;
		}
		snprintf(out, len, "%s", v);
		r = 0;
		break;
	}
	fclose(f);
	return r;
}

int ax_initiator_name(const char *db, bool create, char *out, size_t len)
{
	const char *env = getenv("IX_INITIATOR_NAME");
	char path[PATH_MAX], host[64] = "host", data[320];
	uint8_t rnd[4];
	int r;

	if (env && *env) {
		if (!ax_iscsi_name_ok(env) || strlen(env) >= len)
			return -EINVAL;
		snprintf(out, len, "%s", env);
		return 0;
	}
	if (snprintf(path, sizeof(path), "%s/initiatorname.iscsi", db) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	r = read_name_file(path, out, len);
	if (r != -ENOENT || !create)
		return r;
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = 0;
	for (char *p = host; *p; p++) {
		*p = (char)tolower((unsigned char)*p);
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
			*p = '-';
	}
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	snprintf(out, len, "iqn.2024-01.org.ix:%.40s.%02x%02x%02x%02x", host, rnd[0], rnd[1],
		 rnd[2], rnd[3]);
	snprintf(data, sizeof(data), "## generated by ixadm on first use\nInitiatorName=%s\n", out);
	r = mkdir_p(db, 0700);
	if (r == 0)
		r = write_atomic(db, path, data, strlen(data));
	return r;
}
