/* Runtime management: the configuration document and the JSON-RPC methods on it (mgmt.h). */
#include "mgmt/mgmt.h"
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

struct ix_mgmt {
	struct ix_target *tgt; /* NULL: offline */
	json_t *doc;           /* the running configuration */
	char *config_path;
	bool testing;
	bool no_save;
};

/* ---- loading ------------------------------------------------------------------------------ */

#define DEFAULT_PORTAL "{\"name\": \"default\", \"address\": \"127.0.0.1\", \"port\": 3260}"

/* A document without portals serves the default one: say so, so that get, save and a later
 * portal change all see the portal that is actually served. */
static int normalize(json_t *doc)
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
	if (!*doc || normalize(*doc) < 0) {
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
	    normalize(doc) < 0) {
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
	*out = m;
	return 0;
}

void ix_mgmt_free(struct ix_mgmt *m)
{
	if (!m)
		return;
	json_decref(m->doc);
	free(m->config_path);
	free(m);
}

/* ---- changes ------------------------------------------------------------------------------ */

/* An error to answer: code, message, optional data (owned). */
struct merr {
	int code;
	char msg[1024];
	json_t *data;
};

static int merr_set(struct merr *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int merr_set(struct merr *e, int code, const char *fmt, ...)
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
static const char *strip_position(const char *msg, const char *name)
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
			return msg + n + 1;
		p++;
	}
	return *p == ' ' ? p + 1 : p;
}

static const char *obj_str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* Index of the element of array a whose key equals v (strings or integers), or -1. */
static long find_by(json_t *a, const char *key, json_t *v)
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
		    !json_equal(v, json_object_get(o, key) ? json_object_get(o, key) : json_null()))
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
		long j = find_by(olda, key, json_object_get(e, key));
		if (j < 0)
			change(out, "add", type, target, json_object_get(e, key));
		else if (strcmp(type, "target") == 0)
			diff_target(out, json_array_get(olda, (size_t)j), e);
		else if (!json_equal(e, json_array_get(olda, (size_t)j)))
			change(out, "change", type, target, json_object_get(e, key));
	}
	json_array_foreach(olda, i, e)
	{
		if (find_by(newa, key, json_object_get(e, key)) < 0)
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
		    !json_equal(v, json_object_get(o, key) ? json_object_get(o, key) : json_null()))
			change(out, "change", key, NULL, NULL);
	}
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "portals") && strcmp(key, "targets") && !json_object_get(n, key))
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
					   "login_timeout_ms",
					   "discovery_idle_timeout_ms",
					   "max_connection_memory",
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
static int apply_doc(struct ix_mgmt *m, json_t *newdoc, bool dry_run, bool strict_global,
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
		return merr_set(e, -32603, "out of memory");
	}
	r = cfg_load_string(text, name, &cfg, err, sizeof(err));
	free(text);
	if (r < 0) {
		json_decref(newdoc);
		return merr_set(e, MGMT_ERR_INVALID_CONFIG, "%s", strip_position(err, name));
	}
	if (cfg->test_features && !m->testing) {
		cfg_free(cfg);
		json_decref(newdoc);
		return merr_set(e, MGMT_ERR_INVALID_CONFIG,
				"test-only features (a \"testing\" section or an \"error\" LUN) "
				"need ix-target --testing");
	}
	if (strict_global && (g = restart_only_change(m->doc, newdoc))) {
		merr_set(e, MGMT_ERR_INVALID_CONFIG, "global.%s: only a restart applies it", g);
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
		return merr_set(e, -32603, "out of memory");
	}
	if (dry_run || json_array_size(changes) == 0) {
		cfg_free(cfg);
		json_decref(newdoc);
	} else {
		if (m->tgt && (r = ix_target_reload(m->tgt, cfg, err, sizeof(err))) < 0) {
			cfg_free(cfg);
			json_decref(newdoc);
			json_decref(changes);
			return merr_set(e, MGMT_ERR_APPLY, "%s", err[0] ? err : strerror(-r));
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
	return *result ? 0 : merr_set(e, -32603, "out of memory");
}

int ix_mgmt_reload_file(struct ix_mgmt *m, char *err, size_t errlen)
{
	struct ix_config *cfg;
	json_t *doc, *res = NULL;
	struct merr e = {0};
	int r;

	if (!m->config_path) {
		snprintf(err, errlen, "no configuration file to reload");
		return -ENOENT;
	}
	r = ix_mgmt_load(m->config_path, &cfg, &doc, err, errlen);
	if (r < 0)
		return r;
	cfg_free(cfg); /* apply_doc validates the document again: one path for every change */
	if (apply_doc(m, doc, false, false, &res, &e) < 0) {
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

/* The document to path, atomically: PATH.tmp written and fsynced, renamed over path, the
 * directory fsynced. Mode 0600: it holds CHAP secrets. */
static int save_doc(json_t *doc, const char *path, char *err, size_t errlen)
{
	char tmp[4200], dir[4200], *slash;
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
		r = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(-r));
		free(text);
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
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
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

/* ---- methods ------------------------------------------------------------------------------ */

struct call {
	struct ix_mgmt *m;
	json_t *params; /* an object (empty when absent) */
	json_t *result;
	struct merr *e;
	/* asynchronous answers (NULL done: not possible here) */
	ix_mgmt_done_fn done;
	void *done_arg;
	json_t *id;               /* NULL: a notification */
	struct ix_mgmt_op *op;    /* set by a method that answers later */
};

struct ix_mgmt_op {
	ix_mgmt_done_fn done;
	void *arg;
	json_t *id;               /* NULL: a notification */
	json_t *params;
	bool cancelled;
	bool stats;               /* iscsi_get_stats rather than iscsi_get_sessions */
};

void ix_mgmt_op_cancel(struct ix_mgmt_op *op)
{
	if (op)
		op->cancelled = true;
}

/* Parameter access: a missing required parameter or a wrong type is -32602. */
static int p_str(struct call *c, const char *key, bool required, const char **out)
{
	json_t *v = json_object_get(c->params, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return required ? merr_set(c->e, -32602, "params.%s: required but missing", key)
				: 0;
	if (!json_is_string(v))
		return merr_set(c->e, -32602, "params.%s: must be a string", key);
	*out = json_string_value(v);
	return 0;
}

static int p_obj(struct call *c, const char *key, json_t **out)
{
	json_t *v = json_object_get(c->params, key);

	if (!v || json_is_null(v))
		return merr_set(c->e, -32602, "params.%s: required but missing", key);
	if (!json_is_object(v))
		return merr_set(c->e, -32602, "params.%s: must be an object", key);
	*out = v;
	return 0;
}

static int p_bool(struct call *c, const char *key, bool *out)
{
	json_t *v = json_object_get(c->params, key);

	*out = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return merr_set(c->e, -32602, "params.%s: must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

/* Only these keys in params. */
static int p_keys(struct call *c, const char *const *keys)
{
	const char *key;
	json_t *v;

	json_object_foreach(c->params, key, v)
	{
		bool ok = false;
		for (int i = 0; keys[i] && !ok; i++)
			ok = strcmp(keys[i], key) == 0;
		if (!ok)
			return merr_set(c->e, -32602, "params: unknown key \"%s\"", key);
	}
	return 0;
}

/* The array doc[key] (created when absent). */
static json_t *doc_array(json_t *doc, const char *key)
{
	json_t *a = json_object_get(doc, key);

	if (!json_is_array(a)) {
		a = json_array();
		if (!a || json_object_set_new(doc, key, a) < 0)
			return NULL;
	}
	return a;
}

static json_t *find_target(json_t *doc, const char *name)
{
	json_t *t = json_object_get(doc, "targets");
	json_t *n = json_string(name);
	long i = find_by(t, "name", n);

	json_decref(n);
	return i < 0 ? NULL : json_array_get(t, (size_t)i);
}

static int commit(struct call *c, json_t *newdoc)
{
	bool dry_run;

	if (p_bool(c, "dry_run", &dry_run) < 0) {
		json_decref(newdoc);
		return -1;
	}
	return apply_doc(c->m, newdoc, dry_run, true, &c->result, c->e);
}

static json_t *unchanged(void)
{
	return json_pack("{s:b, s:[]}", "changed", 0, "changes");
}

/* Create obj in the array at doc[akey] (of the target named target, when set), keyed by key:
 * the same object again is success without change; another one under the same key is an
 * error. */
static int create_in(struct call *c, const char *target, const char *akey, const char *key,
		     const char *type, json_t *obj)
{
	json_t *newdoc = json_deep_copy(c->m->doc), *parent = newdoc, *a;
	long i;

	if (!newdoc)
		return merr_set(c->e, -32603, "out of memory");
	if (target && !(parent = find_target(newdoc, target))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	if (!(a = doc_array(parent, akey))) {
		json_decref(newdoc);
		return merr_set(c->e, -32603, "out of memory");
	}
	i = find_by(a, key, json_object_get(obj, key));
	if (i >= 0) {
		bool same = json_equal(json_array_get(a, (size_t)i), obj);
		char *k = json_dumps(json_object_get(obj, key), JSON_ENCODE_ANY);
		json_decref(newdoc);
		if (same) {
			free(k);
			c->result = unchanged();
			return c->result ? 0 : merr_set(c->e, -32603, "out of memory");
		}
		merr_set(c->e, MGMT_ERR_EXISTS, "%s %s%s%s already exists with other settings", type,
			 k ? k : "?", target ? " of target " : "", target ? target : "");
		free(k);
		return -1;
	}
	if (json_array_append(a, obj) < 0) {
		json_decref(newdoc);
		return merr_set(c->e, -32603, "out of memory");
	}
	return commit(c, newdoc);
}

static int delete_in(struct call *c, const char *target, const char *akey, const char *key,
		     const char *type, json_t *v)
{
	json_t *newdoc = json_deep_copy(c->m->doc), *parent = newdoc, *a;
	char *k;
	long i;

	if (!newdoc)
		return merr_set(c->e, -32603, "out of memory");
	if (target && !(parent = find_target(newdoc, target))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	a = json_object_get(parent, akey);
	i = find_by(a, key, v);
	if (i < 0) {
		json_decref(newdoc);
		k = json_dumps(v, JSON_ENCODE_ANY);
		merr_set(c->e, MGMT_ERR_NOT_FOUND, "no %s %s%s%s", type, k ? k : "?",
			 target ? " in target " : "", target ? target : "");
		free(k);
		return -1;
	}
	json_array_remove(a, (size_t)i);
	return commit(c, newdoc);
}

static int m_get_config(struct call *c)
{
	static const char *const keys[] = {NULL};

	if (p_keys(c, keys) < 0)
		return -1;
	c->result = json_deep_copy(c->m->doc);
	return 0;
}

/* get_portals / get_targets: the array, or the one element named params.name. */
static int get_named(struct call *c, json_t *a, const char *type)
{
	static const char *const keys[] = {"name", NULL};
	const char *name;
	json_t *v;
	long i;

	if (p_keys(c, keys) < 0 || p_str(c, "name", false, &name) < 0)
		return -1;
	if (!name) {
		c->result = a ? json_deep_copy(a) : json_array();
		return 0;
	}
	v = json_string(name);
	i = find_by(a, "name", v);
	json_decref(v);
	if (i < 0)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no %s named \"%s\"", type, name);
	c->result = json_pack("[O]", json_array_get(a, (size_t)i));
	return 0;
}

static int m_get_portals(struct call *c)
{
	return get_named(c, json_object_get(c->m->doc, "portals"), "portal");
}

static int m_get_targets(struct call *c)
{
	return get_named(c, json_object_get(c->m->doc, "targets"), "target");
}

/* iscsi_create_portal / iscsi_create_target: params.<what> is an object of the top-level list
 * akey, named by its "name". */
static int create_top(struct call *c, const char *akey, const char *what)
{
	const char *const keys[] = {what, "dry_run", NULL};
	json_t *o = NULL;

	if (p_keys(c, keys) < 0 || p_obj(c, what, &o) < 0)
		return -1;
	if (!json_is_string(json_object_get(o, "name")))
		return merr_set(c->e, -32602, "params.%s.name: required (a string)", what);
	return create_in(c, NULL, akey, "name", what, o);
}

/* iscsi_delete_portal / iscsi_delete_target: params.name of the top-level list akey. */
static int delete_top(struct call *c, const char *akey, const char *what)
{
	static const char *const keys[] = {"name", "dry_run", NULL};
	const char *name;

	if (p_keys(c, keys) < 0 || p_str(c, "name", true, &name) < 0)
		return -1;
	return delete_in(c, NULL, akey, "name", what, json_object_get(c->params, "name"));
}

static int m_create_portal(struct call *c)
{
	return create_top(c, "portals", "portal");
}

static int m_delete_portal(struct call *c)
{
	return delete_top(c, "portals", "portal");
}

static int m_create_target(struct call *c)
{
	return create_top(c, "targets", "target");
}

static int m_delete_target(struct call *c)
{
	return delete_top(c, "targets", "target");
}

/* get_luns / get_acls of params.target. */
static int get_of_target(struct call *c, const char *akey)
{
	static const char *const keys[] = {"target", NULL};
	const char *name;
	json_t *t, *a;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &name) < 0)
		return -1;
	if (!(t = find_target(c->m->doc, name)))
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", name);
	a = json_object_get(t, akey);
	c->result = json_is_array(a) ? json_deep_copy(a) : json_array();
	return 0;
}

/* A running LUN's state (ix_target_lun_status) as its "status" object. */
static json_t *lun_status(struct ix_target *tgt, const char *target, json_t *lun)
{
	struct ix_lun_status st;
	json_t *o;

	if (!json_is_integer(lun) || json_integer_value(lun) < 0 ||
	    ix_target_lun_status(tgt, target, (uint32_t)json_integer_value(lun), &st) < 0)
		return NULL;
	o = json_pack("{s:s, s:s}", "state", st.state, "reason", st.reason);
	if (o && st.attempts)
		json_object_set_new(o, "attempts", json_integer(st.attempts));
	if (o && st.next_s)
		json_object_set_new(o, "next_attempt_s", json_integer(st.next_s));
	if (o && st.lock[0])
		json_object_set_new(o, "lock", json_pack("{s:s, s:s}", "state", st.lock, "reason",
							 st.lock_reason));
	if (o && st.conn[0]) {
		json_t *rj = json_pack("{s:s, s:s, s:I}", "state", st.conn, "reason",
				       st.conn_reason, "count", (json_int_t)st.rejoins);

		if (rj && st.rejoin_attempts)
			json_object_set_new(rj, "attempts", json_integer(st.rejoin_attempts));
		if (rj && st.rejoin_next_s)
			json_object_set_new(rj, "next_attempt_s", json_integer(st.rejoin_next_s));
		json_object_set_new(o, "rejoin", rj);
	}
	return o;
}

/* The configured LUNs, each with its "status" when the target runs. */
static int m_get_luns(struct call *c)
{
	const char *target = json_string_value(json_object_get(c->params, "target"));
	json_t *l, *st;
	size_t i;

	if (get_of_target(c, "luns") < 0)
		return -1;
	json_array_foreach(c->result, i, l)
	{
		if (c->m->tgt && (st = lun_status(c->m->tgt, target, json_object_get(l, "lun"))))
			json_object_set_new(l, "status", st);
	}
	return 0;
}

static int m_get_acls(struct call *c)
{
	return get_of_target(c, "acls");
}

static int m_create_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "dry_run", NULL};
	const char *target;
	json_t *l = NULL;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0 ||
	    p_obj(c, "lun", &l) < 0)
		return -1;
	if (!json_is_integer(json_object_get(l, "lun")))
		return merr_set(c->e, -32602, "params.lun.lun: required (an integer)");
	return create_in(c, target, "luns", "lun", "LUN", l);
}

static int m_delete_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "dry_run", NULL};
	const char *target;
	json_t *l = json_object_get(c->params, "lun");

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(l))
		return merr_set(c->e, -32602, "params.lun: required (an integer)");
	return delete_in(c, target, "luns", "lun", "LUN", l);
}

static int m_create_acl(struct call *c)
{
	static const char *const keys[] = {"target", "acl", "dry_run", NULL};
	const char *target;
	json_t *a = NULL;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0 ||
	    p_obj(c, "acl", &a) < 0)
		return -1;
	if (!json_is_string(json_object_get(a, "initiator")))
		return merr_set(c->e, -32602, "params.acl.initiator: required (a string)");
	return create_in(c, target, "acls", "initiator", "ACL", a);
}

static int m_delete_acl(struct call *c)
{
	static const char *const keys[] = {"target", "initiator", "dry_run", NULL};
	const char *target, *ini;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0 ||
	    p_str(c, "initiator", true, &ini) < 0)
		return -1;
	return delete_in(c, target, "acls", "initiator", "ACL",
			 json_object_get(c->params, "initiator"));
}

/* An ACL's LUN masking: params.luns (a list as in the file's acls[].luns) replaces it, null
 * removes it (the initiator sees every LUN). Live sessions of the initiator get the new view
 * with 3F/0E (target/tgt_acl.c). */
static int m_set_acl_luns(struct call *c)
{
	static const char *const keys[] = {"target", "initiator", "luns", "dry_run", NULL};
	json_t *newdoc, *t, *l = json_object_get(c->params, "luns"), *acls;
	const char *target, *ini;
	long i;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0 ||
	    p_str(c, "initiator", true, &ini) < 0)
		return -1;
	if (!json_is_array(l) && !json_is_null(l))
		return merr_set(c->e, -32602,
				"params.luns: required (a list, or null for all LUNs)");
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	t = find_target(newdoc, target);
	acls = t ? json_object_get(t, "acls") : NULL;
	i = find_by(acls, "initiator", json_object_get(c->params, "initiator"));
	if (i < 0) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no %s \"%s\"%s%s", t ? "ACL" : "target",
				t ? ini : target, t ? " in target " : "", t ? target : "");
	}
	if (json_is_null(l))
		json_object_del(json_array_get(acls, (size_t)i), "luns");
	else if (json_object_set(json_array_get(acls, (size_t)i), "luns", l) < 0) {
		json_decref(newdoc);
		return merr_set(c->e, -32603, "out of memory");
	}
	return commit(c, newdoc);
}

/* The authentication keys of a target or of global.discovery: each one given replaces the old
 * value; null removes it (back to the default). */
/* The keys names[] of obj (in newdoc) that params give: each one given replaces the value, null
 * removes it (back to the default); then commit. Takes newdoc. */
static int set_keys(struct call *c, json_t *obj, json_t *newdoc, const char *const *names,
		    const char *list)
{
	bool any = false;

	for (int i = 0; names[i]; i++) {
		json_t *v = json_object_get(c->params, names[i]);
		if (!v)
			continue;
		any = true;
		if (json_is_null(v))
			json_object_del(obj, names[i]);
		else if (json_object_set(obj, names[i], v) < 0) {
			json_decref(newdoc);
			return merr_set(c->e, -32603, "out of memory");
		}
	}
	if (!any) {
		json_decref(newdoc);
		return merr_set(c->e, -32602, "params: nothing to set (%s)", list);
	}
	return commit(c, newdoc);
}

static int set_auth(struct call *c, json_t *obj, json_t *newdoc)
{
	static const char *const auth[] = {"chap", "mutual_chap", "chap_required",
					   "chap_algorithms", NULL};

	return set_keys(c, obj, newdoc, auth, "chap, mutual_chap, chap_required, chap_algorithms");
}

/* Target settings that apply online (to logins from then on). */
static int m_set_target_options(struct call *c)
{
	static const char *const keys[] = {"target",	    "alias",   "max_sessions",
					   "chap_required", "dry_run", NULL};
	static const char *const opts[] = {"alias", "max_sessions", "chap_required", NULL};
	const char *target;
	json_t *newdoc, *t;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	if (!(t = find_target(newdoc, target))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	return set_keys(c, t, newdoc, opts, "alias, max_sessions, chap_required");
}

/* The object of LUN params.lun of target in doc, or NULL with the error set. */
static json_t *lun_obj(struct call *c, json_t *doc, const char *target)
{
	json_t *lunv = json_object_get(c->params, "lun"), *t, *num;
	long i;

	if (!json_is_integer(lunv)) {
		merr_set(c->e, -32602, "params.lun: required (an integer)");
		return NULL;
	}
	if (!(t = find_target(doc, target))) {
		merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
		return NULL;
	}
	num = json_integer(json_integer_value(lunv));
	i = find_by(json_object_get(t, "luns"), "lun", num);
	json_decref(num);
	if (i < 0)
		merr_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
			 (long long)json_integer_value(lunv), target);
	return i < 0 ? NULL : json_array_get(json_object_get(t, "luns"), (size_t)i);
}

/* A LUN started read-only has its backend opened read-only: only a restart makes it writable. */
static int check_writable(struct call *c, const char *target)
{
	json_t *ro = json_object_get(c->params, "readonly");
	uint32_t lun = (uint32_t)json_integer_value(json_object_get(c->params, "lun"));

	if (!c->m->tgt || !ro || json_is_true(ro) || ix_target_lun_writable(c->m->tgt, target, lun))
		return 0;
	return merr_set(c->e, MGMT_ERR_APPLY,
			"LUN %u of target %s was started read-only (its backend is opened "
			"read-only): only a restart makes it writable",
			lun, target);
}

/* LUN settings that apply online: write_cache and readonly (initiators get 6/2A/01). */
static int m_set_lun_options(struct call *c)
{
	static const char *const keys[] = {"target",   "lun",	  "write_cache",
					   "readonly", "dry_run", NULL};
	static const char *const opts[] = {"write_cache", "readonly", NULL};
	const char *target;
	json_t *newdoc, *l;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	if (!(l = lun_obj(c, newdoc, target)) || check_writable(c, target) < 0) {
		json_decref(newdoc);
		return -1;
	}
	return set_keys(c, l, newdoc, opts, "write_cache, readonly");
}

static int m_set_target_auth(struct call *c)
{
	static const char *const keys[] = {"target",	  "chap",	     "mutual_chap",
					   "chap_required", "chap_algorithms", "dry_run",
					   NULL};
	const char *target;
	json_t *newdoc, *t;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	if (!(t = find_target(newdoc, target))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	return set_auth(c, t, newdoc);
}

static int m_set_discovery_auth(struct call *c)
{
	static const char *const keys[] = {"chap", "mutual_chap", "chap_required",
					   "chap_algorithms", "dry_run", NULL};
	json_t *newdoc, *g, *d;

	if (p_keys(c, keys) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	g = json_object_get(newdoc, "global");
	if (!json_is_object(g)) {
		g = json_object();
		json_object_set_new(newdoc, "global", g);
	}
	d = json_object_get(g, "discovery");
	if (!json_is_object(d)) {
		d = json_object();
		json_object_set_new(g, "discovery", d);
	}
	if (!g || !d) {
		json_decref(newdoc);
		return merr_set(c->e, -32603, "out of memory");
	}
	return set_auth(c, d, newdoc);
}

static int m_get_discovery_auth(struct call *c)
{
	static const char *const keys[] = {NULL};
	json_t *d = json_object_get(json_object_get(c->m->doc, "global"), "discovery");

	if (p_keys(c, keys) < 0)
		return -1;
	c->result = json_is_object(d) ? json_deep_copy(d) : json_object();
	return 0;
}

/* The whole configuration at once ("switch to this"): applied as the difference. */
static int m_apply_config(struct call *c)
{
	static const char *const keys[] = {"config", "dry_run", NULL};
	json_t *cfg = NULL, *newdoc;

	if (p_keys(c, keys) < 0 || p_obj(c, "config", &cfg) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(cfg)) || normalize(newdoc) < 0) {
		json_decref(newdoc);
		return merr_set(c->e, -32603, "out of memory");
	}
	return commit(c, newdoc);
}

static int m_save_config(struct call *c)
{
	static const char *const keys[] = {"path", NULL};
	const char *path;
	char err[8600];
	int r;

	if (p_keys(c, keys) < 0 || p_str(c, "path", false, &path) < 0)
		return -1;
	if (!path)
		path = c->m->config_path;
	if (!path)
		return merr_set(c->e, -32602,
				"params.path: required (the daemon was started without a "
				"configuration file)");
	if (path[0] != '/')
		return merr_set(c->e, -32602, "params.path: must be an absolute path");
	if (c->m->no_save)
		return merr_set(c->e, MGMT_ERR_IO, "saving is disabled");
	r = save_doc(c->m->doc, path, err, sizeof(err));
	if (r < 0)
		return merr_set(c->e, MGMT_ERR_IO, "%s", err);
	c->result = json_pack("{s:s}", "path", path);
	return 0;
}

static const char *yes_no(bool b)
{
	return b ? "Yes" : "No";
}

static json_t *session_json(const struct ix_session_info *i)
{
	char isid[13];
	json_t *keys, *o;

	snprintf(isid, sizeof(isid), "%02x%02x%02x%02x%02x%02x", i->isid[0], i->isid[1],
		 i->isid[2], i->isid[3], i->isid[4], i->isid[5]);
	keys = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s, "
			 "s:I}",
			 "HeaderDigest", i->conn.header_digest ? "CRC32C" : "None", "DataDigest",
			 i->conn.data_digest ? "CRC32C" : "None", "MaxRecvDataSegmentLength",
			 (json_int_t)i->conn.max_recv_dsl, "MaxXmitDataSegmentLength",
			 (json_int_t)i->conn.max_xmit_dsl, "MaxBurstLength",
			 (json_int_t)i->sess.max_burst_length, "FirstBurstLength",
			 (json_int_t)i->sess.first_burst_length, "InitialR2T",
			 yes_no(i->sess.initial_r2t), "ImmediateData", yes_no(i->sess.immediate_data),
			 "MaxOutstandingR2T", (json_int_t)i->sess.max_outstanding_r2t,
			 "MaxConnections", (json_int_t)i->sess.max_connections, "DefaultTime2Wait",
			 (json_int_t)i->sess.default_time2wait, "DefaultTime2Retain",
			 (json_int_t)i->sess.default_time2retain, "DataPDUInOrder",
			 yes_no(i->sess.data_pdu_in_order), "DataSequenceInOrder",
			 yes_no(i->sess.data_sequence_in_order), "ErrorRecoveryLevel",
			 (json_int_t)i->sess.error_recovery_level);
	if (keys && i->conn.rdma) {
		json_object_set_new(keys, "RDMAExtensions", json_string("Yes"));
		json_object_set_new(keys, "TargetRecvDataSegmentLength",
				    json_integer(i->conn.target_rdsl));
		json_object_set_new(keys, "InitiatorRecvDataSegmentLength",
				    json_integer(i->conn.initiator_rdsl));
	}
	o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:i, s:o, "
		      "s:{s:I, s:I, s:I}, s:I, s:I, s:b}",
		      "tsih", i->tsih, "isid", isid, "initiator", i->initiator, "target",
		      i->target, "type", i->discovery ? "discovery" : "normal", "portal", i->portal,
		      "tpgt", i->tpgt, "cid", i->cid, "peer", i->peer, "local", i->local,
		      "transport", i->transport, "worker", i->worker, "keys", keys ? keys : json_null(),
		      "cmdsn", "exp_cmdsn", (json_int_t)i->exp_cmdsn, "max_cmdsn",
		      (json_int_t)i->max_cmdsn, "window", (json_int_t)i->cmdsn_window,
		      "commands_in_flight", (json_int_t)i->tasks_active, "commands_queued",
		      (json_int_t)i->commands_pending, "logout_requested", i->logout_requested);
	return o;
}

/* The answer of iscsi_get_sessions, filtered by params.target / params.initiator. */
static json_t *sessions_result(json_t *params, const struct ix_session_info *list, size_t n)
{
	const char *target = json_string_value(json_object_get(params, "target"));
	const char *ini = json_string_value(json_object_get(params, "initiator"));
	json_t *a = json_array();

	for (size_t k = 0; a && k < n; k++) {
		if ((target && strcmp(target, list[k].target) != 0) ||
		    (ini && strcasecmp(ini, list[k].initiator) != 0))
			continue;
		json_array_append_new(a, session_json(&list[k]));
	}
	return a;
}

static json_t *result_response(json_t *id, json_t *result);
static json_t *error_response(json_t *id, int code, const char *msg, json_t *data);

/* An asynchronous method's result res (NULL: out of memory) is ready: answer unless the
 * caller went away, and end the operation. */
static void op_finish(struct ix_mgmt_op *op, json_t *res)
{
	json_t *resp = NULL;

	if (!op->cancelled && op->id)
		resp = res ? result_response(op->id, res)
			   : error_response(op->id, -32603, "out of memory", NULL);
	else
		json_decref(res);
	if (!op->cancelled)
		op->done(op->arg, resp);
	json_decref(resp);
	json_decref(op->id);
	json_decref(op->params);
	free(op);
}

static void sessions_done(void *arg, const struct ix_session_info *list, size_t n,
			  const struct ix_login_stats *logins)
{
	struct ix_mgmt_op *op = arg;

	(void)logins;
	op_finish(op, op->cancelled ? NULL : sessions_result(op->params, list, n));
}

static void stats_done(void *arg, const struct ix_stats *st)
{
	struct ix_mgmt_op *op = arg;

	op_finish(op, op->cancelled ? NULL : metrics_json(st));
}

/* iscsi_get_sessions and iscsi_get_stats: ask the workers. */
static int ask_workers(struct call *c, bool stats)
{
	struct ix_mgmt_op *op;
	int r;

	if (!c->m->tgt) {
		static const struct ix_stats none;
		c->result = stats ? metrics_json(&none) : json_array();
		return 0;
	}
	if (!c->done)
		return merr_set(c->e, -32600, "%s cannot be part of a batch (send it alone)",
				stats ? "iscsi_get_stats" : "iscsi_get_sessions");
	op = calloc(1, sizeof(*op));
	if (!op)
		return merr_set(c->e, -32603, "out of memory");
	op->done = c->done;
	op->arg = c->done_arg;
	op->id = c->id ? json_incref(c->id) : NULL;
	op->params = json_incref(c->params);
	op->stats = stats;
	r = stats ? ix_target_stats(c->m->tgt, stats_done, op)
		  : ix_target_sessions(c->m->tgt, sessions_done, op);
	if (r < 0) {
		json_decref(op->id);
		json_decref(op->params);
		free(op);
		return merr_set(c->e, -32603, "out of memory");
	}
	c->op = op;
	return 0;
}

static int m_get_sessions(struct call *c)
{
	static const char *const keys[] = {"target", "initiator", NULL};
	const char *target, *ini;

	if (p_keys(c, keys) < 0 || p_str(c, "target", false, &target) < 0 ||
	    p_str(c, "initiator", false, &ini) < 0)
		return -1;
	return ask_workers(c, false);
}

static int m_get_stats(struct call *c)
{
	static const char *const keys[] = {NULL};

	if (p_keys(c, keys) < 0)
		return -1;
	return ask_workers(c, true);
}

static int m_logout_session(struct call *c)
{
	static const char *const keys[] = {"tsih", "drop", "timeout_ms", NULL};
	json_t *tsih = json_object_get(c->params, "tsih");
	json_t *tmo = json_object_get(c->params, "timeout_ms");
	json_t *g = json_object_get(json_object_get(c->m->doc, "global"), "logout_timeout_ms");
	json_int_t ms = json_is_integer(g) ? json_integer_value(g) : 5000;
	bool drop;
	int r;

	if (p_keys(c, keys) < 0 || p_bool(c, "drop", &drop) < 0)
		return -1;
	if (!json_is_integer(tsih) || json_integer_value(tsih) < 1 ||
	    json_integer_value(tsih) > 65535)
		return merr_set(c->e, -32602, "params.tsih: required (an integer 1-65535)");
	if (tmo && !json_is_null(tmo)) {
		if (!json_is_integer(tmo) || json_integer_value(tmo) < 1000 ||
		    json_integer_value(tmo) > 3600000)
			return merr_set(c->e, -32602,
					"params.timeout_ms: an integer from 1000 to 3600000");
		ms = json_integer_value(tmo);
	}
	if (!c->m->tgt)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no session with tsih %lld",
				(long long)json_integer_value(tsih));
	r = ix_target_session_end(c->m->tgt, (uint16_t)json_integer_value(tsih), drop,
				  (uint32_t)ms);
	if (r == -ENOENT)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no session with tsih %lld",
				(long long)json_integer_value(tsih));
	if (r < 0)
		return merr_set(c->e, -32603, "%s", strerror(-r));
	c->result = json_pack("{s:s}", "requested", drop ? "drop" : "logout");
	return 0;
}

/* A size value as the configuration writes it (bytes, or digits and K/M/G/T/P[iB]); false
 * when it is not one (the loader then says why). */
static bool parse_size(json_t *v, uint64_t *out)
{
	const char *s = json_string_value(v), *p;
	uint64_t n = 0;
	int shift = 0;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return true;
	}
	if (!s || !*s)
		return false;
	for (p = s; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - 9) / 10)
			return false;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return false;
	switch (*p | 0x20) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	case 'p': shift = 50; break;
	default:
		if (*p)
			return false;
	}
	if (shift && n > (UINT64_MAX >> shift))
		return false;
	*out = n << shift;
	return true;
}

static int m_resize_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "size", "dry_run", NULL};
	json_t *lunv = json_object_get(c->params, "lun"), *size = json_object_get(c->params, "size");
	json_t *newdoc, *t, *l, *luns, *num;
	const char *target, *backend;
	uint64_t want, have;
	long i;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(lunv))
		return merr_set(c->e, -32602, "params.lun: required (an integer)");
	if (!json_is_integer(size) && !json_is_string(size))
		return merr_set(c->e, -32602, "params.size: required (bytes, or a string like \"20G\")");
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	if (!(t = find_target(newdoc, target))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	luns = json_object_get(t, "luns");
	num = json_integer(json_integer_value(lunv));
	i = find_by(luns, "lun", num);
	json_decref(num);
	if (i < 0) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
				(long long)json_integer_value(lunv), target);
	}
	l = json_array_get(luns, (size_t)i);
	backend = json_string_value(json_object_get(l, "backend"));
	if (!backend ||
	    (strcmp(backend, "file") && strcmp(backend, "block") && strcmp(backend, "ram"))) {
		merr_set(c->e, MGMT_ERR_INVALID_CONFIG,
			 "LUN %lld of %s: only file, block and RAM LUNs grow online (this one is "
			 "%s)",
			 (long long)json_integer_value(lunv), target, backend ? backend : "?");
		json_decref(newdoc); /* backend pointed into it */
		return -1;
	}
	if (json_is_true(json_object_get(l, "readonly"))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_INVALID_CONFIG, "LUN %lld of %s is read-only",
				(long long)json_integer_value(lunv), target);
	}
	if (c->m->tgt && parse_size(size, &want) &&
	    ix_target_lun_bytes(c->m->tgt, target, (uint32_t)json_integer_value(lunv), &have) ==
		0 &&
	    want < have) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_INVALID_CONFIG,
				"LUN %lld of %s: %llu bytes is smaller than its %llu: LUNs only grow "
				"online", (long long)json_integer_value(lunv), target,
				(unsigned long long)want, (unsigned long long)have);
	}
	json_object_set(l, "size", size);
	return commit(c, newdoc);
}

static int m_set_lun_offline(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "offline", "dry_run", NULL};
	json_t *lunv = json_object_get(c->params, "lun"), *newdoc, *t, *num;
	const char *target;
	bool offline;
	long i;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(lunv))
		return merr_set(c->e, -32602, "params.lun: required (an integer)");
	if (!json_is_boolean(json_object_get(c->params, "offline")))
		return merr_set(c->e, -32602, "params.offline: required (true or false)");
	if (p_bool(c, "offline", &offline) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return merr_set(c->e, -32603, "out of memory");
	if (!(t = find_target(newdoc, target))) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	num = json_integer(json_integer_value(lunv));
	i = find_by(json_object_get(t, "luns"), "lun", num);
	json_decref(num);
	if (i < 0) {
		json_decref(newdoc);
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
				(long long)json_integer_value(lunv), target);
	}
	if (offline)
		json_object_set_new(json_array_get(json_object_get(t, "luns"), (size_t)i), "offline",
				    json_true());
	else /* online is the default: the key goes */
		json_object_del(json_array_get(json_object_get(t, "luns"), (size_t)i), "offline");
	if (commit(c, newdoc) < 0)
		return -1;
	/* online: a backend that is not open yet (RBD started offline) tries again now */
	if (!offline && c->m->tgt && !json_is_true(json_object_get(c->params, "dry_run")))
		ix_target_lun_retry(c->m->tgt, target, (uint32_t)json_integer_value(lunv));
	return 0;
}

/* A fenced RBD LUN rejoins the cluster now (a new client; docs/ha.md). The answer is the LUN's
 * "status" right after the rejoin started (it runs on the backend's opener thread). */
static int m_rejoin_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", NULL};
	json_t *lunv = json_object_get(c->params, "lun");
	const char *target;
	uint32_t lun;
	int rc;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(lunv) || json_integer_value(lunv) < 0)
		return merr_set(c->e, -32602, "params.lun: required (an integer)");
	if (!c->m->tgt)
		return merr_set(c->e, MGMT_ERR_APPLY, "no running target");
	lun = (uint32_t)json_integer_value(lunv);
	rc = ix_target_lun_rejoin(c->m->tgt, target, lun);
	if (rc == -ENOENT)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "%s LUN %u: no such LUN", target, lun);
	if (rc == -EINVAL || rc == -EOPNOTSUPP)
		return merr_set(c->e, MGMT_ERR_INVALID_CONFIG, "%s LUN %u: not an RBD LUN%s",
				target, lun, rc == -EOPNOTSUPP ? " (built without RBD)" : "");
	if (rc == -EALREADY)
		return merr_set(c->e, MGMT_ERR_APPLY,
				"%s LUN %u: not fenced: its cluster connection serves", target,
				lun);
	if (rc == -EAGAIN)
		return merr_set(c->e, MGMT_ERR_APPLY,
				"%s LUN %u: the image is not open yet (ix-ctl lun online)", target,
				lun);
	if (rc < 0)
		return merr_set(c->e, MGMT_ERR_APPLY, "%s LUN %u: %s", target, lun, strerror(-rc));
	c->result = lun_status(c->m->tgt, target, lunv);
	return c->result ? 0 : merr_set(c->e, -32603, "out of memory");
}

/* The managed exclusive lock of an RBD LUN (rbd.exclusive_lock): break it and take it, for a
 * failover; dry_run only reports who holds it and this gateway's state. */
static int m_break_rbd_lock(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "dry_run", NULL};
	json_t *lunv = json_object_get(c->params, "lun");
	char state[32] = "", reason[256];
	const char *target;
	bool dry;
	int rc;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0 ||
	    p_bool(c, "dry_run", &dry) < 0)
		return -1;
	if (!json_is_integer(lunv) || json_integer_value(lunv) < 0)
		return merr_set(c->e, -32602, "params.lun: required (an integer)");
	if (!c->m->tgt)
		return merr_set(c->e, MGMT_ERR_APPLY, "no running target");
	rc = ix_target_lun_rbd_lock(c->m->tgt, target, (uint32_t)json_integer_value(lunv), !dry,
				    state, sizeof(state), reason, sizeof(reason));
	if (rc == -ENOENT)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "%s LUN %lld: %s", target,
				(long long)json_integer_value(lunv), reason);
	if (rc < 0)
		return merr_set(c->e, rc == -EINVAL || rc == -EOPNOTSUPP ? MGMT_ERR_INVALID_CONFIG
									 : MGMT_ERR_APPLY,
				"%s LUN %lld: %s", target, (long long)json_integer_value(lunv),
				reason);
	c->result = json_pack("{s:s, s:s, s:b}", "state", state, "reason", reason, "dry_run", dry);
	return c->result ? 0 : merr_set(c->e, -32603, "out of memory");
}

/* ---- ALUA: the running states (not the document: SET TARGET PORT GROUPS and failover change
 * them; the document holds the states a group starts in) ---- */

static json_t *alua_json(const struct scsi_alua_cfg *a)
{
	static const char *const status[] = {"none", "explicit", "implicit"};
	json_t *groups = json_array();

	for (unsigned i = 0; groups && i < a->ngroups; i++) {
		const struct scsi_alua_group_cfg *g = &a->groups[i];
		json_t *ports = json_array();

		for (unsigned j = 0; ports && j < g->nports; j++)
			json_array_append_new(ports, json_integer(g->ports[j]));
		json_array_append_new(
		    groups, json_pack("{s:i, s:s, s:s, s:b, s:o*}", "id", g->id, "state",
				      scsi_alua_state_name(g->state), "status",
				      g->status < 3 ? status[g->status] : "?", "preferred",
				      g->preferred, "relative_ports", ports));
	}
	return json_pack("{s:b, s:i, s:o*}", "explicit", a->explicit_ok, "transition_time",
			 a->transition_s, "groups", groups);
}

static int m_get_alua(struct call *c)
{
	static const char *const keys[] = {"target", NULL};
	struct scsi_alua_cfg a;
	const char *target;
	int r;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0)
		return -1;
	r = c->m->tgt ? ix_target_alua_get(c->m->tgt, target, &a) : -ENOENT;
	if (r < 0)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND, "target \"%s\" is not served with ALUA",
				target);
	c->result = alua_json(&a);
	return c->result ? 0 : merr_set(c->e, -32603, "out of memory");
}

static int m_set_alua_state(struct call *c)
{
	static const char *const keys[] = {"target", "group", "state", NULL};
	json_t *g = json_object_get(c->params, "group");
	const char *target, *name;
	uint8_t state;
	int r;

	if (p_keys(c, keys) < 0 || p_str(c, "target", true, &target) < 0 ||
	    p_str(c, "state", true, &name) < 0)
		return -1;
	if (!json_is_integer(g) || json_integer_value(g) < 1 || json_integer_value(g) > 65535)
		return merr_set(c->e, -32602, "params.group: required (an integer 1-65535)");
	if (scsi_alua_state_parse(name, &state) < 0)
		return merr_set(c->e, -32602,
				"params.state: active/optimized, active/non-optimized, standby, "
				"unavailable, offline or transitioning");
	r = c->m->tgt ? ix_target_alua_set(c->m->tgt, target, (uint16_t)json_integer_value(g),
					   state)
		      : -ENOENT;
	if (r < 0)
		return merr_set(c->e, MGMT_ERR_NOT_FOUND,
				"target \"%s\" has no ALUA group %lld", target,
				(long long)json_integer_value(g));
	c->result = json_true();
	return 0;
}

static int m_get_methods(struct call *c);

static const struct method {
	const char *name;
	int (*fn)(struct call *c);
	bool changes; /* logged */
} methods[] = {
    {"rpc_get_methods", m_get_methods, false},
    {"iscsi_get_config", m_get_config, false},
    {"iscsi_apply_config", m_apply_config, true},
    {"iscsi_get_portals", m_get_portals, false},
    {"iscsi_create_portal", m_create_portal, true},
    {"iscsi_delete_portal", m_delete_portal, true},
    {"iscsi_get_targets", m_get_targets, false},
    {"iscsi_create_target", m_create_target, true},
    {"iscsi_delete_target", m_delete_target, true},
    {"iscsi_get_luns", m_get_luns, false},
    {"iscsi_create_lun", m_create_lun, true},
    {"iscsi_delete_lun", m_delete_lun, true},
    {"iscsi_resize_lun", m_resize_lun, true},
    {"iscsi_set_lun_offline", m_set_lun_offline, true},
    {"iscsi_set_lun_options", m_set_lun_options, true},
    {"iscsi_break_rbd_lock", m_break_rbd_lock, true},
    {"iscsi_rejoin_lun", m_rejoin_lun, true},
    {"iscsi_get_alua", m_get_alua, false},
    {"iscsi_set_alua_state", m_set_alua_state, true},
    {"iscsi_get_acls", m_get_acls, false},
    {"iscsi_create_acl", m_create_acl, true},
    {"iscsi_delete_acl", m_delete_acl, true},
    {"iscsi_set_acl_luns", m_set_acl_luns, true},
    {"iscsi_set_target_auth", m_set_target_auth, true},
    {"iscsi_set_target_options", m_set_target_options, true},
    {"iscsi_get_discovery_auth", m_get_discovery_auth, false},
    {"iscsi_set_discovery_auth", m_set_discovery_auth, true},
    {"save_config", m_save_config, true},
    {"iscsi_get_sessions", m_get_sessions, false},
    {"iscsi_get_stats", m_get_stats, false},
    {"iscsi_logout_session", m_logout_session, true},
};

static int m_get_methods(struct call *c)
{
	static const char *const keys[] = {NULL};

	if (p_keys(c, keys) < 0)
		return -1;
	c->result = json_array();
	for (size_t i = 0; c->result && i < sizeof(methods) / sizeof(methods[0]); i++)
		json_array_append_new(c->result, json_string(methods[i].name));
	return 0;
}

/* ---- JSON-RPC 2.0 ------------------------------------------------------------------------- */

static json_t *error_response(json_t *id, int code, const char *msg, json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", msg);

	if (!err) /* a message that is not UTF-8 (cut in a sequence): still an answer */
		err = json_pack("{s:i, s:s}", "code", code, "message",
				"(the error message could not be encoded)");

	if (err && data)
		json_object_set_new(err, "data", data);
	else
		json_decref(data);
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
			 err);
}

static json_t *result_response(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *call_one(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *who,
			ix_mgmt_done_fn done, void *done_arg, struct ix_mgmt_op **op)
{
	static const char *const keys[] = {"jsonrpc", "method", "params", "id", NULL};
	json_t *id = json_object_get(req, "id"), *params, *resp;
	const char *method, *key;
	const struct method *mt = NULL;
	struct merr e = {0};
	struct call c = {.m = m, .e = &e};
	bool notification;
	json_t *v;
	int r;

	if (!json_is_object(req))
		return error_response(NULL, -32600, "invalid request: not an object", NULL);
	if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id))
		return error_response(NULL, -32600, "invalid request: id must be a string or an "
						    "integer", NULL);
	notification = id == NULL;
	json_object_foreach(req, key, v)
	{
		bool ok = false;
		for (int i = 0; keys[i] && !ok; i++)
			ok = strcmp(keys[i], key) == 0;
		if (!ok) {
			snprintf(e.msg, sizeof(e.msg), "invalid request: unknown member \"%s\"", key);
			return error_response(id, -32600, e.msg, NULL);
		}
	}
	if (!json_is_string(json_object_get(req, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(req, "jsonrpc")), "2.0") != 0)
		return error_response(id, -32600, "invalid request: jsonrpc must be \"2.0\"", NULL);
	method = json_string_value(json_object_get(req, "method"));
	if (!method)
		return error_response(id, -32600, "invalid request: method must be a string", NULL);
	params = json_object_get(req, "params");
	if (params && !json_is_object(params) && !json_is_null(params))
		return error_response(id, -32602, "invalid params: params must be an object (by "
						  "name)", NULL);
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].name, method) == 0)
			mt = &methods[i];
	if (!mt) {
		char esc[256];
		snprintf(e.msg, sizeof(e.msg), "method not found: %s",
			 log_escape(method, strlen(method), esc, sizeof(esc)));
		return notification ? NULL : error_response(id, -32601, e.msg, NULL);
	}
	c.params = json_is_object(params) ? json_incref(params) : json_object();
	if (!c.params)
		return error_response(id, -32603, "out of memory", NULL);
	c.done = done;
	c.done_arg = done_arg;
	c.id = id;
	r = mt->fn(&c);
	json_decref(c.params);
	if (r == 0 && c.op) {
		*op = c.op;
		return NULL;
	}
	if (mt->changes) {
		if (r < 0)
			log_info("mgmt", "rpc %s (uid %u pid %d): refused: %s", mt->name,
				 (unsigned)who->uid, (int)who->pid, e.msg);
		else
			log_info("mgmt", "rpc %s (uid %u pid %d): done", mt->name,
				 (unsigned)who->uid, (int)who->pid);
	}
	if (r == 0 && !c.result) {
		e.code = -32603;
		snprintf(e.msg, sizeof(e.msg), "out of memory");
		r = -1;
	}
	if (r < 0) {
		json_decref(c.result);
		return notification ? NULL : error_response(id, e.code, e.msg, e.data);
	}
	if (notification) {
		json_decref(c.result);
		return NULL;
	}
	resp = result_response(id, c.result);
	return resp ? resp : error_response(id, -32603, "out of memory", NULL);
}

json_t *ix_mgmt_call(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *who)
{
	return ix_mgmt_call_async(m, req, who, NULL, NULL, NULL);
}

json_t *ix_mgmt_call_async(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *who,
			   ix_mgmt_done_fn done, void *arg, struct ix_mgmt_op **op)
{
	json_t *out, *e;
	size_t i;

	if (op)
		*op = NULL;
	if (!json_is_array(req))
		return call_one(m, req, who, op ? done : NULL, arg, op);
	if (json_array_size(req) == 0)
		return error_response(NULL, -32600, "invalid request: empty batch", NULL);
	if (json_array_size(req) > MGMT_MAX_BATCH)
		return error_response(NULL, MGMT_ERR_LIMIT, "batch too large (at most 128 requests)",
				      NULL);
	out = json_array();
	if (!out)
		return error_response(NULL, -32603, "out of memory", NULL);
	json_array_foreach(req, i, e)
	{
		json_t *r = call_one(m, e, who, NULL, NULL, NULL);
		if (r)
			json_array_append_new(out, r);
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}
