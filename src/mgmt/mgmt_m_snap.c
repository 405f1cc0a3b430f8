/* Snapshots and clones of RBD LUNs (docs/snapshots.md, docs/management.md): the methods
 * iscsi_create_snapshot, iscsi_get_snapshots, iscsi_delete_snapshot, iscsi_rollback_snapshot
 * and iscsi_clone_snapshot. Each answers later: the target runs the request
 * (ix_target_lun_snap: the LU's hold, the backend's helper thread) and calls back on the main
 * loop. A clone then becomes a new LUN through iscsi_create_lun's own path. */
#include "mgmt/mgmt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs.h"
#include "target/target.h"
#include "util/log.h"

#define SNAP_TIMEOUT_MS_DEFAULT 10000
#define SNAP_TIMEOUT_MS_MIN	100
#define SNAP_TIMEOUT_MS_MAX	600000

bool mgmt_rbd_name_ok(const char *s, char *why, size_t cap)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n >= BS_SNAP_NAME_MAX) {
		snprintf(why, cap, "1 to %d characters", BS_SNAP_NAME_MAX - 1);
		return false;
	}
	if (s[0] == '.' || s[0] == '-') {
		snprintf(why, cap, "must not begin with '%c'", s[0]);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) {
			snprintf(why, cap,
				 "letters, digits, '.', '_' and '-' only (character %zu is "
				 "not)",
				 i + 1);
			return false;
		}
	}
	return true;
}

struct snap_call {
	struct ix_mgmt_op op; /* first: what the caller may cancel */
	struct ix_mgmt *m;
	int kind; /* enum bs_snap_op */
	char name[BS_SNAP_NAME_MAX];
	json_t *clone_params; /* CLONE: iscsi_create_lun's params for the new LUN */
};

static void sc_finish(struct snap_call *s, json_t *result, int code, const char *msg)
{
	json_t *resp = NULL;

	if (!s->op.cancelled && s->op.id) {
		resp = result ? mgmt_result_response(s->op.id, result) /* takes result */
			      : mgmt_error_response(s->op.id, code, msg, NULL);
		result = NULL;
	}
	if (!s->op.cancelled)
		s->op.done(s->op.arg, resp);
	json_decref(resp);
	json_decref(result);
	json_decref(s->op.id);
	json_decref(s->op.params);
	json_decref(s->clone_params);
	free(s);
}

static json_t *list_json(const struct ix_snap_result *r)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < r->n; i++)
		json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:b, s:i}", "name",
						   r->list[i].name, "id", (json_int_t)r->list[i].id,
						   "size", (json_int_t)r->list[i].size, "protected",
						   r->list[i].protect, "clones",
						   (int)r->list[i].children));
	return a;
}

/* The clone exists: it becomes a LUN through iscsi_create_lun. */
static void clone_lun(struct snap_call *s, const struct ix_snap_result *r)
{
	struct merr e = {0};
	struct call c = {.m = s->m, .e = &e, .params = s->clone_params};
	json_t *lun = json_object_get(s->clone_params, "lun");

	if (mgmt_m_create_lun(&c) < 0) {
		char msg[1200];

		snprintf(
		    msg, sizeof(msg),
		    "the clone %s/%s was made, but its LUN could not be created: %s (the image "
		    "stays: delete it with rbd rm, or add it with iscsi_create_lun)",
		    json_string_value(json_object_get(json_object_get(lun, "rbd"), "pool")),
		    json_string_value(json_object_get(json_object_get(lun, "rbd"), "image")),
		    e.msg);
		json_decref(e.data);
		json_decref(c.result);
		sc_finish(s, NULL, MGMT_ERR_APPLY, msg);
		return;
	}
	sc_finish(s,
		  json_pack("{s:s, s:O, s:O, s:O, s:b, s:o}", "snapshot", s->name, "target",
			    json_object_get(s->clone_params, "target"), "lun",
			    json_object_get(lun, "lun"), "image",
			    json_object_get(json_object_get(lun, "rbd"), "image"), "protected",
			    r->protected_now, "changes", c.result ? c.result : json_null()),
		  0, NULL);
}

static void snap_done(void *arg, const struct ix_snap_result *r)
{
	struct snap_call *s = arg;

	if (r->rc < 0) {
		sc_finish(s, NULL,
			  r->rc == -ENOENT	? MGMT_ERR_NOT_FOUND
			  : r->rc == -EEXIST	? MGMT_ERR_EXISTS
			  : r->rc == -ETIMEDOUT ? MGMT_ERR_LIMIT
						: MGMT_ERR_APPLY,
			  r->err ? r->err : strerror(-r->rc));
		return;
	}
	switch (s->kind) {
	case BS_SNAP_CREATE:
		if (r->parts)
			sc_finish(s,
				  json_pack("{s:s, s:i, s:i, s:i}", "snapshot", s->name, "held_ms",
					    (int)r->held_ms, "drain_ms", (int)r->drain_ms,
					    "create_ms", (int)r->create_ms),
				  0, NULL);
		else /* forwarded: the holder's answer has held_ms only */
			sc_finish(s,
				  json_pack("{s:s, s:i}", "snapshot", s->name, "held_ms",
					    (int)r->held_ms),
				  0, NULL);
		return;
	case BS_SNAP_LIST:
		sc_finish(s, list_json(r), 0, NULL);
		return;
	case BS_SNAP_REMOVE:
		sc_finish(s, json_pack("{s:s, s:b}", "snapshot", s->name, "deleted", 1), 0, NULL);
		return;
	case BS_SNAP_ROLLBACK:
		sc_finish(
		    s, json_pack("{s:s, s:i}", "snapshot", s->name, "offline_ms", (int)r->held_ms),
		    0, NULL);
		return;
	case BS_SNAP_CLONE:
		clone_lun(s, r);
		return;
	}
}

/* The LUN's document object (for its backend), or NULL with e set. */
static json_t *doc_lun(struct call *c, const char *target, json_t *lunv)
{
	json_t *t = mgmt_find_target(c->m->doc, target), *l;
	long i;

	if (!t) {
		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
		return NULL;
	}
	i = mgmt_find_by(json_object_get(t, "luns"), "lun", lunv);
	if (i < 0) {
		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
			     (long long)json_integer_value(lunv), target);
		return NULL;
	}
	l = json_array_get(json_object_get(t, "luns"), (size_t)i);
	if (!json_is_string(json_object_get(l, "backend")) ||
	    strcmp(json_string_value(json_object_get(l, "backend")), "rbd") != 0) {
		mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG,
			     "LUN %lld of %s: only RBD LUNs have snapshots (this one is %s)",
			     (long long)json_integer_value(lunv), target,
			     json_is_string(json_object_get(l, "backend"))
				 ? json_string_value(json_object_get(l, "backend"))
				 : "?");
		return NULL;
	}
	return l;
}

static int p_name(struct call *c, const char *key, bool required, const char **out)
{
	char why[128];

	if (mgmt_p_str(c, key, required, out) < 0)
		return -1;
	if (*out && !mgmt_rbd_name_ok(*out, why, sizeof(why)))
		return mgmt_err_set(c->e, -32602, "params.%s: %s", key, why);
	return 0;
}

static int p_timeout(struct call *c, unsigned *ms)
{
	json_t *v = json_object_get(c->params, "timeout_ms");

	*ms = SNAP_TIMEOUT_MS_DEFAULT;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < SNAP_TIMEOUT_MS_MIN ||
	    json_integer_value(v) > SNAP_TIMEOUT_MS_MAX)
		return mgmt_err_set(c->e, -32602, "params.timeout_ms: an integer from %d to %d",
				    SNAP_TIMEOUT_MS_MIN, SNAP_TIMEOUT_MS_MAX);
	*ms = (unsigned)json_integer_value(v);
	return 0;
}

/* What every method shares: target, LUN (an RBD one), the start, the answer later. */
static int start(struct call *c, int kind, const char *target, const char *name,
		 const struct ix_snap_args *a0, json_t *clone_params)
{
	json_t *lunv = json_object_get(c->params, "lun");
	struct ix_snap_args a = *a0;
	struct snap_call *s;
	char err[1024];
	int rc;

	if (!c->m->tgt) {
		json_decref(clone_params);
		return mgmt_err_set(c->e, MGMT_ERR_APPLY, "no running target");
	}
	if (!c->done) {
		json_decref(clone_params);
		return mgmt_err_set(c->e, -32600,
				    "snapshot methods cannot be part of a batch "
				    "(send each alone)");
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		json_decref(clone_params);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	s->op.done = c->done;
	s->op.arg = c->done_arg;
	s->op.id = c->id ? json_incref(c->id) : NULL;
	s->op.params = json_incref(c->params);
	s->m = c->m;
	s->kind = kind;
	s->clone_params = clone_params;
	snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
	a.op = kind;
	a.name = name;
	rc = ix_target_lun_snap(c->m->tgt, target, (uint32_t)json_integer_value(lunv), &a,
				snap_done, s, err, sizeof(err));
	if (rc < 0) {
		json_decref(s->op.id);
		json_decref(s->op.params);
		json_decref(s->clone_params);
		free(s);
		return mgmt_err_set(c->e,
				    rc == -ENOENT	? MGMT_ERR_NOT_FOUND
				    : rc == -EOPNOTSUPP ? MGMT_ERR_INVALID_CONFIG
							: MGMT_ERR_APPLY,
				    "%s", err);
	}
	c->op = &s->op;
	return 0;
}

/* target, lun (an RBD LUN of the document), and the snapshot's name when named. */
static int common(struct call *c, const char *const *keys, bool named, const char **target,
		  const char **name)
{
	json_t *lunv = json_object_get(c->params, "lun");

	*name = NULL;
	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, target) < 0)
		return -1;
	if (!json_is_integer(lunv) || json_integer_value(lunv) < 0)
		return mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
	if (named && p_name(c, "name", true, name) < 0)
		return -1;
	return doc_lun(c, *target, lunv) ? 0 : -1;
}

int mgmt_m_create_snapshot(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "name", "timeout_ms", NULL};
	struct ix_snap_args a = {0};
	const char *target, *name;

	if (common(c, keys, true, &target, &name) < 0 || p_timeout(c, &a.timeout_ms) < 0)
		return -1;
	return start(c, BS_SNAP_CREATE, target, name, &a, NULL);
}

int mgmt_m_get_snapshots(struct call *c)
{
	static const char *const keys[] = {"target", "lun", NULL};
	struct ix_snap_args a = {0};
	const char *target, *name;

	if (common(c, keys, false, &target, &name) < 0)
		return -1;
	return start(c, BS_SNAP_LIST, target, NULL, &a, NULL);
}

int mgmt_m_delete_snapshot(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "name", NULL};
	struct ix_snap_args a = {0};
	const char *target, *name;

	if (common(c, keys, true, &target, &name) < 0)
		return -1;
	return start(c, BS_SNAP_REMOVE, target, name, &a, NULL);
}

int mgmt_m_rollback_snapshot(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "name", "force", "timeout_ms", NULL};
	struct ix_snap_args a = {0};
	const char *target, *name;

	if (common(c, keys, true, &target, &name) < 0 || mgmt_p_bool(c, "force", &a.force) < 0 ||
	    p_timeout(c, &a.timeout_ms) < 0)
		return -1;
	return start(c, BS_SNAP_ROLLBACK, target, name, &a, NULL);
}

int mgmt_m_clone_snapshot(struct call *c)
{
	static const char *const keys[] = {"target", "lun",	   "name",    "image",
					   "pool",   "new_target", "new_lun", NULL};
	json_t *newlun = json_object_get(c->params, "new_lun"), *src, *l, *params;
	const char *target, *name, *image, *pool, *nt;
	struct ix_snap_args a = {0};
	struct merr e = {0};
	struct call dry;

	if (common(c, keys, true, &target, &name) < 0 || p_name(c, "image", true, &image) < 0 ||
	    p_name(c, "pool", false, &pool) < 0 || mgmt_p_str(c, "new_target", false, &nt) < 0)
		return -1;
	if (!json_is_integer(newlun) || json_integer_value(newlun) < 0)
		return mgmt_err_set(c->e, -32602, "params.new_lun: required (an integer)");
	src = doc_lun(c, target, json_object_get(c->params, "lun"));
	/* the new LUN: the source's settings, the clone's image, its own identity */
	if (!(l = json_deep_copy(src)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	json_object_set(l, "lun", newlun);
	json_object_del(l, "size");
	json_object_del(l, "naa_id");
	json_object_del(l, "serial");
	json_object_del(l, "offline");
	json_object_set_new(json_object_get(l, "rbd"), "image", json_string(image));
	if (pool)
		json_object_set_new(json_object_get(l, "rbd"), "pool", json_string(pool));
	params = json_pack("{s:s, s:o}", "target", nt ? nt : target, "lun", l);
	if (!params)
		return mgmt_err_set(c->e, -32603, "out of memory");
	/* the LUN must be possible before the image is made */
	json_object_set_new(params, "dry_run", json_true());
	dry = (struct call){.m = c->m, .e = &e, .params = params};
	if (mgmt_m_create_lun(&dry) < 0) {
		json_decref(dry.result);
		json_decref(params);
		mgmt_err_set(c->e, e.code, "the clone's LUN cannot be created: %s", e.msg);
		c->e->data = e.data;
		return -1;
	}
	json_decref(dry.result);
	json_object_del(params, "dry_run");
	a.clone_pool = pool;
	a.clone_image = image;
	return start(c, BS_SNAP_CLONE, target, name, &a, params);
}
