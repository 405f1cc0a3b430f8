/* Runtime management: the configuration document: loading, the differences between two
 * documents, applying one, reloading the file and saving (mgmt_int.h). */
#include "mgmt/mgmt_int.h"
#include "mgmt/mgmt_group.h"
#include "mgmt/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

/* ---- loading ------------------------------------------------------------------------------ */

#define DEFAULT_PORTAL "{\"name\": \"default\", \"address\": \"127.0.0.1\", \"port\": 3260}"

/* A document without portals serves the default one: say so, so that get, save and a later
 * portal change all see the portal that is actually served. */
int mgmt_normalize(json_t *doc)
{
	json_t *p = NULL;

	if (json_object_get(doc, "portals") && !json_is_null(json_object_get(doc, "portals")))
		return 0;
	p = json_loads("[" DEFAULT_PORTAL "]", 0, NULL);
	if (!p || json_object_set_new(doc, "portals", p) < 0)
		return -ENOMEM;
	return 0;
}

int ix_mgmt_load(const char *path, struct ix_config **cfg, json_t **doc, char *err, size_t errlen)
{
	json_error_t je;
	int r;

	*doc = NULL;
	if (!path) {
		r = cfg_default(cfg, 0);
		if (r < 0) {
			snprintf(err, errlen, "cannot build the default configuration");
			return r;
		}
		*doc = json_loads("{\"portals\": [" DEFAULT_PORTAL "], \"targets\": [{\"name\": "
				  "\"iqn.2026-11.io.ix:target0\", \"luns\": [{\"lun\": 0, "
				  "\"backend\": \"ram\", \"size\": \"1G\"}]}]}",
				  0, NULL);
	} else {
		r = cfg_load_file(path, cfg, err, errlen);
		if (r < 0)
			return r;
		/* the loader accepted the text: the same text parses here */
		*doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
		if (!*doc)
			snprintf(err, errlen, "%s: %s", path, je.text);
	}
	if (!*doc || mgmt_normalize(*doc) < 0) {
		cfg_free(*cfg);
		*cfg = NULL;
		json_decref(*doc);
		*doc = NULL;
		if (path == NULL)
			snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int ix_mgmt_new(struct ix_target *t, json_t *doc, const struct ix_mgmt_opts *o,
		struct ix_mgmt **out)
{
	struct ix_mgmt *m = calloc(1, sizeof(*m));

	if (!m || (o->config_path && !(m->config_path = strdup(o->config_path))) ||
	    mgmt_normalize(doc) < 0) {
		if (m)
			free(m->config_path);
		free(m);
		json_decref(doc);
		return -ENOMEM;
	}
	m->tgt = t;
	m->doc = doc;
	m->testing = o->testing;
	m->no_save = o->no_save;
	if (o->group) {
		m->group = o->group;
		mgmt_group_start(o->group, m, t ? ix_target_main_loop(t) : NULL);
	}
	*out = m;
	return 0;
}

void ix_mgmt_free(struct ix_mgmt *m)
{
	if (!m)
		return;
	mgmt_group_free(m->group);
	json_decref(m->doc);
	free(m->config_path);
	free(m);
}

/* ---- changes ------------------------------------------------------------------------------ */

int mgmt_err_set(struct merr *e, int code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* The loader's messages start with "NAME:LINE:COL: ": positions in a document the caller never
 * saw mean nothing, the JSON path that follows does. */
const char *mgmt_strip_position(const char *msg, const char *name)
{
	size_t n = strlen(name);
	const char *p = msg;

	if (strncmp(p, name, n) != 0 || p[n] != ':')
		return msg;
	p += n + 1;
	for (int field = 0; field < 2; field++) {
		const char *d = p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p == d || *p != ':')
			return msg + n + 1 + (msg[n + 1] == ' ');
		p++;
	}
	return *p == ' ' ? p + 1 : p;
}

static const char *obj_str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* Index of the element of array a whose key equals v (strings or integers), or -1. */
long mgmt_find_by(json_t *a, const char *key, json_t *v)
{
	size_t i;
	json_t *e;

	if (!v)
		return -1;
	json_array_foreach(a, i, e)
	{
		json_t *k = json_object_get(e, key);
		if (k && json_equal(k, v))
			return (long)i;
	}
	return -1;
}

/* ---- errors at the request's path --------------------------------------------------------- */

bool mgmt_remap_path(char *msg, size_t cap, const char *doc, const char *req)
{
	const char *colon = strstr(msg, ": ");
	size_t dl = strlen(doc), pl;
	char out[1024];

	if (!colon || cap == 0)
		return false;
	pl = (size_t)(colon - msg);
	for (size_t i = 0; i < pl; i++)
		if (msg[i] == ' ')
			return false; /* not a path */
	if (dl) {
		if (pl < dl || strncmp(msg, doc, dl) != 0 ||
		    (msg[dl] != '.' && msg[dl] != '[' && msg[dl] != ':'))
			return false;
		snprintf(out, sizeof(out), "%s%.*s: %s (%.*s in the configuration)", req,
			 (int)(pl - dl), msg + dl, colon + 2, (int)pl, msg);
	} else {
		snprintf(out, sizeof(out), "%s.%.*s: %s", req, (int)pl, msg, colon + 2);
	}
	snprintf(msg, cap, "%s", out);
	return true;
}

/* ---- comparing by value ------------------------------------------------------------------- */

bool mgmt_size_value(json_t *v, uint64_t *out)
{
	static const char units[] = "KMGTP";
	const char *s = json_string_value(v), *p, *u;
	uint64_t n = 0;
	unsigned shift = 0;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return false;
		*out = (uint64_t)json_integer_value(v);
		return true;
	}
	if (!s || *s < '0' || *s > '9')
		return false;
	for (p = s; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - 9) / 10)
			return false;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (*p) {
		char up = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		if (!(u = strchr(units, up)))
			return false;
		shift = 10 * (unsigned)(u - units + 1);
		p++;
		if (p[0] == 'i' && p[1] == 'B')
			p += 2;
		if (*p)
			return false;
	}
	if (shift && n > (UINT64_MAX >> shift))
		return false;
	*out = n << shift;
	return true;
}

/* The configuration's keys whose values are sizes ("64M" and 67108864 are one value). */
static bool size_key(const char *key)
{
	return key && (strcmp(key, "size") == 0 || strcmp(key, "sanitize_rate") == 0 ||
		       strcmp(key, "max_connection_memory") == 0);
}

/* A member; null counts as absent (as the loader reads it). */
static json_t *member(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_null(v) ? NULL : v;
}

bool mgmt_same(json_t *a, json_t *b, const char *key)
{
	const char *k;
	json_t *v;
	uint64_t x, y;
	size_t i;

	if (json_is_null(a))
		a = NULL;
	if (json_is_null(b))
		b = NULL;
	if (!a || !b)
		return a == b;
	if (size_key(key) && mgmt_size_value(a, &x) && mgmt_size_value(b, &y))
		return x == y;
	if (json_is_object(a) && json_is_object(b)) {
		json_object_foreach(a, k, v)
		{
			if (!mgmt_same(v, member(b, k), k))
				return false;
		}
		json_object_foreach(b, k, v)
		{
			if (!member(a, k) && !json_is_null(v))
				return false;
		}
		return true;
	}
	if (json_is_array(a) && json_is_array(b)) {
		if (json_array_size(a) != json_array_size(b))
			return false;
		json_array_foreach(a, i, v)
		{
			if (!mgmt_same(v, json_array_get(b, i), key))
				return false;
		}
		return true;
	}
	return json_equal(a, b);
}

/* The key that names the elements of the list want (the value of key): a target's LUNs by
 * "lun", its ACLs by "initiator"; NULL for any other list (an ACL's LUN map is one setting,
 * compared whole). */
static const char *elem_key(const char *key, json_t *want)
{
	size_t i;
	json_t *e;

	if (!key || !json_is_array(want))
		return NULL;
	if (strcmp(key, "acls") == 0)
		return "initiator";
	if (strcmp(key, "luns") != 0)
		return NULL;
	json_array_foreach(want, i, e)
	{
		/* an ACL's map ({"lun", "target_lun"} or numbers), not LUN objects */
		if (!json_is_object(e) || !json_object_get(e, "lun") ||
		    json_object_get(e, "target_lun"))
			return NULL;
	}
	return "lun";
}

static void path_add(char *path, size_t cap, const char *fmt, const char *s, long n)
{
	size_t len = strlen(path);

	if (len < cap)
		snprintf(path + len, cap - len, fmt, s ? s : "", n);
}

bool mgmt_covers(json_t *have, json_t *want, const char *key, char *path, size_t cap)
{
	size_t len = strlen(path), i;
	const char *k;
	json_t *v;

	if (json_is_object(want) && json_is_object(have)) {
		json_object_foreach(want, k, v)
		{
			path_add(path, cap, ".%s", k, 0);
			if (!mgmt_covers(member(have, k), v, k, path, cap))
				return false;
			path[len] = '\0';
		}
		return true;
	}
	/* a list of named objects: each one named is there and covers what it names */
	if (json_is_array(have) && elem_key(key, want)) {
		const char *ek = elem_key(key, want);

		json_array_foreach(want, i, v)
		{
			long j = mgmt_find_by(have, ek, json_object_get(v, ek));

			path_add(path, cap, "[%s%ld]", NULL, (long)i);
			if (j < 0 || !mgmt_covers(json_array_get(have, (size_t)j), v, key, path, cap))
				return false;
			path[len] = '\0';
		}
		return true;
	}
	return mgmt_same(have, want, key);
}

static void diff_list(json_t *out, json_t *olda, json_t *newa, const char *key, const char *type,
		      const char *target);

static void change(json_t *out, const char *action, const char *type, const char *target,
		   json_t *name)
{
	json_t *c = json_object();

	if (!c)
		return;
	json_object_set_new(c, "action", json_string(action));
	json_object_set_new(c, "type", json_string(type));
	if (target)
		json_object_set_new(c, "target", json_string(target));
	json_object_set(c, "name", name ? name : json_null());
	json_array_append_new(out, c);
}

/* A target in both documents: what changed inside it. */
static void diff_target(json_t *out, json_t *o, json_t *n)
{
	const char *name = obj_str(n, "name");
	const char *key;
	json_t *v;
	bool other = false;

	diff_list(out, json_object_get(o, "luns"), json_object_get(n, "luns"), "lun", "lun", name);
	diff_list(out, json_object_get(o, "acls"), json_object_get(n, "acls"), "initiator", "acl",
		  name);
	json_object_foreach(n, key, v)
	{
		if (strcmp(key, "luns") && strcmp(key, "acls") &&
		    !mgmt_same(v, json_object_get(o, key), key))
			other = true;
	}
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "luns") && strcmp(key, "acls") && !json_object_get(n, key) &&
		    !json_is_null(v))
			other = true;
	}
	if (other)
		change(out, "change", "target", NULL, json_object_get(n, "name"));
}

static void diff_list(json_t *out, json_t *olda, json_t *newa, const char *key, const char *type,
		      const char *target)
{
	size_t i;
	json_t *e;

	json_array_foreach(newa, i, e)
	{
		long j = mgmt_find_by(olda, key, json_object_get(e, key));
		if (j < 0)
			change(out, "add", type, target, json_object_get(e, key));
		else if (strcmp(type, "target") == 0)
			diff_target(out, json_array_get(olda, (size_t)j), e);
		else if (!mgmt_same(e, json_array_get(olda, (size_t)j), NULL))
			change(out, "change", type, target, json_object_get(e, key));
	}
	json_array_foreach(olda, i, e)
	{
		if (mgmt_find_by(newa, key, json_object_get(e, key)) < 0)
			change(out, "remove", type, target, json_object_get(e, key));
	}
}

/* What applying newdoc would change, as a list of {action, type, [target], name}. */
static json_t *diff_docs(json_t *o, json_t *n)
{
	json_t *out = json_array();
	const char *key;
	json_t *v;

	if (!out)
		return NULL;
	diff_list(out, json_object_get(o, "portals"), json_object_get(n, "portals"), "name",
		  "portal", NULL);
	diff_list(out, json_object_get(o, "targets"), json_object_get(n, "targets"), "name",
		  "target", NULL);
	json_object_foreach(n, key, v)
	{
		if (strcmp(key, "portals") && strcmp(key, "targets") &&
		    !mgmt_same(v, json_object_get(o, key), key))
			change(out, "change", key, NULL, NULL);
	}
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "portals") && strcmp(key, "targets") && !json_object_get(n, key) &&
		    !json_is_null(v))
			change(out, "change", key, NULL, NULL);
	}
	return out;
}

/* global keys a running daemon applies (docs/configuration.md, Reloading). */
static bool global_key_live(const char *key)
{
	static const char *const live[] = {"logout_timeout_ms",
					   "max_sessions",
					   "max_sessions_per_initiator",
					   "max_connections",
					   "max_pending_logins",
					   "login_grace_ms",
					   "login_timeout_ms",
					   "discovery_idle_timeout_ms",
					   "max_connection_memory",
					   "idle_release_ms",
					   "discovery",
					   NULL};
	for (int i = 0; live[i]; i++)
		if (strcmp(key, live[i]) == 0)
			return true;
	return false;
}

/* A global setting that only a restart applies, changed between o and n: its name, or NULL. */
static const char *restart_only_change(json_t *o, json_t *n)
{
	json_t *og = json_object_get(o, "global"), *ng = json_object_get(n, "global");
	const char *key;
	json_t *v;

	if (!json_equal(json_object_get(o, "testing") ? json_object_get(o, "testing") : json_null(),
			json_object_get(n, "testing") ? json_object_get(n, "testing") : json_null()))
		return "testing";
	json_object_foreach(ng, key, v)
	{
		json_t *ov = json_object_get(og, key);
		if (!global_key_live(key) && !json_equal(v, ov ? ov : json_null()))
			return key;
	}
	json_object_foreach(og, key, v)
	{
		if (!global_key_live(key) && !json_object_get(ng, key) && !json_is_null(v))
			return key;
	}
	return NULL;
}

/* Validate newdoc whole and (unless dry_run) apply it. Takes newdoc. On success *result is
 * {"changed": bool, "changes": [...], ["dry_run": true]}. */
int mgmt_apply_doc(struct ix_mgmt *m, json_t *newdoc, bool dry_run, bool strict_global,
		     json_t **result, struct merr *e)
{
	static const char name[] = "request";
	struct ix_config *cfg = NULL;
	char err[1024];
	json_t *changes;
	const char *g;
	char *text;
	int r;

	text = json_dumps(newdoc, JSON_COMPACT);
	if (!text) {
		json_decref(newdoc);
		return mgmt_err_set(e, -32603, "out of memory");
	}
	r = cfg_load_string(text, name, &cfg, err, sizeof(err));
	free(text);
	if (r < 0) {
		json_decref(newdoc);
		return mgmt_err_set(e, MGMT_ERR_INVALID_CONFIG, "%s", mgmt_strip_position(err, name));
	}
	if (cfg->test_features && !m->testing) {
		cfg_free(cfg);
		json_decref(newdoc);
		return mgmt_err_set(e, MGMT_ERR_INVALID_CONFIG,
				"test-only features (a \"testing\" section or an \"error\" LUN) "
				"need ix-target --testing");
	}
	if (strict_global && (g = restart_only_change(m->doc, newdoc))) {
		mgmt_err_set(e, MGMT_ERR_INVALID_CONFIG, "global.%s: only a restart applies it", g);
		if (strcmp(g, "testing") == 0)
			snprintf(e->msg, sizeof(e->msg), "testing: only a restart applies it");
		cfg_free(cfg);
		json_decref(newdoc);
		return -1;
	}
	changes = diff_docs(m->doc, newdoc);
	if (!changes) {
		cfg_free(cfg);
		json_decref(newdoc);
		return mgmt_err_set(e, -32603, "out of memory");
	}
	if (dry_run || json_array_size(changes) == 0) {
		cfg_free(cfg);
		json_decref(newdoc);
	} else {
		if (m->tgt && (r = ix_target_reload(m->tgt, cfg, err, sizeof(err))) < 0) {
			cfg_free(cfg);
			json_decref(newdoc);
			json_decref(changes);
			return mgmt_err_set(e, MGMT_ERR_APPLY, "%s", err[0] ? err : strerror(-r));
		}
		if (!m->tgt)
			cfg_free(cfg);
		json_decref(m->doc);
		m->doc = newdoc;
	}
	*result = json_pack("{s:b, s:o}", "changed", json_array_size(changes) > 0, "changes",
			    changes);
	if (*result && dry_run)
		json_object_set_new(*result, "dry_run", json_true());
	return *result ? 0 : mgmt_err_set(e, -32603, "out of memory");
}

int ix_mgmt_reload_file(struct ix_mgmt *m, char *err, size_t errlen)
{
	struct ix_config *cfg;
	json_t *doc, *res = NULL;
	struct merr e = {0};
	int r;

	if (m->group)
		return mgmt_group_reload(m->group, err, errlen);
	if (!m->config_path) {
		snprintf(err, errlen, "no configuration file to reload");
		return -ENOENT;
	}
	r = ix_mgmt_load(m->config_path, &cfg, &doc, err, errlen);
	if (r < 0)
		return r;
	cfg_free(cfg); /* apply_doc validates the document again: one path for every change */
	if (mgmt_apply_doc(m, doc, false, false, &res, &e) < 0) {
		snprintf(err, errlen, "%s", e.msg);
		json_decref(e.data);
		return -EINVAL;
	}
	json_decref(res);
	return 0;
}

/* ---- save --------------------------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The directory path is in. */
static void parent_dir(const char *path, char *dir, size_t cap)
{
	char *slash;

	snprintf(dir, cap, "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, cap, ".");
}

/* The document to path, atomically: PATH.tmp written and fsynced, renamed over path, the
 * directory fsynced. Mode 0600: it holds CHAP secrets. */
int mgmt_save_doc(json_t *doc, const char *path, char *err, size_t errlen)
{
	char tmp[4200], dir[4200];
	char *text = json_dumps(doc, JSON_INDENT(2));
	int fd, r = 0, dfd;

	if (!text)
		return -ENOMEM;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		free(text);
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		struct stat st;

		r = -errno;
		free(text);
		parent_dir(path, dir, sizeof(dir));
		if (r == -ENOENT && stat(dir, &st) < 0)
			snprintf(err, errlen, "%s: the directory %s does not exist", path, dir);
		else if (r == -ENOTDIR || (r == -ENOENT && !S_ISDIR(st.st_mode)))
			snprintf(err, errlen, "%s: %s is not a directory", path, dir);
		else
			snprintf(err, errlen, "%s: cannot create its temporary copy %s: %s", path, tmp,
				 strerror(-r));
		return r;
	}
	if ((r = write_all(fd, text, strlen(text))) == 0 && (r = write_all(fd, "\n", 1)) == 0 &&
	    fsync(fd) < 0)
		r = -errno;
	free(text);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		unlink(tmp);
		return r;
	}
	parent_dir(path, dir, sizeof(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0)
			r = -errno;
		close(dfd);
	}
	if (r < 0)
		snprintf(err, errlen, "%s: fsync of the directory: %s", dir, strerror(-r));
	return r;
}

