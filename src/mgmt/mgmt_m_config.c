/* Runtime management: the methods on the configuration document (portals, targets, LUNs,
 * ACLs, authentication, options, apply and save). */
#include "mgmt/mgmt_int.h"
#include "mgmt/metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

/* ---- methods: the configuration ---------------------------------------------------------- */

/* Parameter access: a missing required parameter or a wrong type is -32602. */
int mgmt_p_str(struct call *c, const char *key, bool required, const char **out)
{
	json_t *v = json_object_get(c->params, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return required ? mgmt_err_set(c->e, -32602, "params.%s: required but missing", key)
				: 0;
	if (!json_is_string(v))
		return mgmt_err_set(c->e, -32602, "params.%s: must be a string", key);
	*out = json_string_value(v);
	return 0;
}

int mgmt_p_obj(struct call *c, const char *key, json_t **out)
{
	json_t *v = json_object_get(c->params, key);

	if (!v || json_is_null(v))
		return mgmt_err_set(c->e, -32602, "params.%s: required but missing", key);
	if (!json_is_object(v))
		return mgmt_err_set(c->e, -32602, "params.%s: must be an object", key);
	*out = v;
	return 0;
}

int mgmt_p_bool(struct call *c, const char *key, bool *out)
{
	json_t *v = json_object_get(c->params, key);

	*out = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return mgmt_err_set(c->e, -32602, "params.%s: must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

/* Only these keys in params. */
int mgmt_p_keys(struct call *c, const char *const *keys)
{
	const char *key;
	json_t *v;

	json_object_foreach(c->params, key, v)
	{
		bool ok = false;
		for (int i = 0; keys[i] && !ok; i++)
			ok = strcmp(keys[i], key) == 0;
		if (!ok)
			return mgmt_err_set(c->e, -32602, "params: unknown key \"%s\"", key);
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

json_t *mgmt_find_target(json_t *doc, const char *name)
{
	json_t *t = json_object_get(doc, "targets");
	json_t *n = json_string(name);
	long i = mgmt_find_by(t, "name", n);

	json_decref(n);
	return i < 0 ? NULL : json_array_get(t, (size_t)i);
}

void mgmt_map(struct call *c, const char *req, const char *docfmt, ...)
{
	va_list ap;

	if (c->nmap >= MGMT_MAX_MAP)
		return;
	snprintf(c->map[c->nmap].req, sizeof(c->map[c->nmap].req), "%s", req);
	va_start(ap, docfmt);
	vsnprintf(c->map[c->nmap].doc, sizeof(c->map[c->nmap].doc), docfmt, ap);
	va_end(ap);
	c->nmap++;
}

/* Index of the target named name in doc's targets, or -1. */
static long target_index(json_t *doc, const char *name)
{
	json_t *n = json_string(name);
	long i = mgmt_find_by(json_object_get(doc, "targets"), "name", n);

	json_decref(n);
	return i;
}

int mgmt_commit(struct call *c, json_t *newdoc)
{
	bool dry_run;
	int r;

	if (mgmt_p_bool(c, "dry_run", &dry_run) < 0) {
		json_decref(newdoc);
		return -1;
	}
	r = c->m->group ? mgmt_group_commit(c, newdoc, dry_run)
			: mgmt_apply_doc(c->m, newdoc, dry_run, true, &c->result, c->e);
	/* the whole document's validation names its own paths: name the request's where the
	 * error is in what the request gave */
	for (int i = 0; r < 0 && c->e->code == MGMT_ERR_INVALID_CONFIG && i < c->nmap; i++)
		if (mgmt_remap_path(c->e->msg, sizeof(c->e->msg), c->map[i].doc, c->map[i].req))
			break;
	return r;
}

static json_t *unchanged(void)
{
	return json_pack("{s:b, s:[]}", "changed", 0, "changes");
}

/* Create obj (params.<pname>) in the array at doc[akey] (of the target named target, when set),
 * keyed by key. What exists already under that key is success without change when it has every
 * setting the request names (a provisioning script can be run again); a named setting with
 * another value is an error naming it. */
static int create_in(struct call *c, const char *target, const char *akey, const char *key,
		     const char *type, const char *pname, json_t *obj)
{
	json_t *newdoc = json_deep_copy(c->m->doc), *parent = newdoc, *a;
	char path[256];
	long i, ti = -1;

	if (!newdoc)
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (target && (ti = target_index(newdoc, target)) < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	if (target)
		parent = json_array_get(json_object_get(newdoc, "targets"), (size_t)ti);
	if (!(a = doc_array(parent, akey))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	i = mgmt_find_by(a, key, json_object_get(obj, key));
	if (i >= 0) {
		char *k = json_dumps(json_object_get(obj, key), JSON_ENCODE_ANY);
		bool same;

		snprintf(path, sizeof(path), "params.%s", pname);
		same = mgmt_covers(json_array_get(a, (size_t)i), obj, NULL, path, sizeof(path));
		json_decref(newdoc);
		if (same) {
			free(k);
			c->result = unchanged();
			return c->result ? 0 : mgmt_err_set(c->e, -32603, "out of memory");
		}
		mgmt_err_set(c->e, MGMT_ERR_EXISTS,
			     "%s: %s %s%s%s already exists with another value of this setting", path,
			     type, k ? k : "?", target ? " of target " : "", target ? target : "");
		free(k);
		return -1;
	}
	if (json_array_append(a, obj) < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	snprintf(path, sizeof(path), "params.%s", pname);
	if (target)
		mgmt_map(c, path, "targets[%ld].%s[%zu]", ti, akey, json_array_size(a) - 1);
	else
		mgmt_map(c, path, "%s[%zu]", akey, json_array_size(a) - 1);
	return mgmt_commit(c, newdoc);
}

static int delete_in(struct call *c, const char *target, const char *akey, const char *key,
		     const char *type, json_t *v)
{
	json_t *newdoc = json_deep_copy(c->m->doc), *parent = newdoc, *a;
	char *k;
	long i;

	if (!newdoc)
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (target && !(parent = mgmt_find_target(newdoc, target))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	a = json_object_get(parent, akey);
	i = mgmt_find_by(a, key, v);
	if (i < 0) {
		json_decref(newdoc);
		k = json_dumps(v, JSON_ENCODE_ANY);
		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no %s %s%s%s", type, k ? k : "?",
			 target ? " in target " : "", target ? target : "");
		free(k);
		return -1;
	}
	json_array_remove(a, (size_t)i);
	return mgmt_commit(c, newdoc);
}

int mgmt_m_get_config(struct call *c)
{
	static const char *const keys[] = {NULL};

	if (mgmt_p_keys(c, keys) < 0)
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

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "name", false, &name) < 0)
		return -1;
	if (!name) {
		c->result = a ? json_deep_copy(a) : json_array();
		return 0;
	}
	v = json_string(name);
	i = mgmt_find_by(a, "name", v);
	json_decref(v);
	if (i < 0)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no %s named \"%s\"", type, name);
	c->result = json_pack("[O]", json_array_get(a, (size_t)i));
	return 0;
}

int mgmt_m_get_portals(struct call *c)
{
	return get_named(c, json_object_get(c->m->doc, "portals"), "portal");
}

int mgmt_m_get_targets(struct call *c)
{
	return get_named(c, json_object_get(c->m->doc, "targets"), "target");
}

/* iscsi_create_portal / iscsi_create_target: params.<what> is an object of the top-level list
 * akey, named by its "name". */
static int create_top(struct call *c, const char *akey, const char *what)
{
	const char *const keys[] = {what, "dry_run", NULL};
	json_t *o = NULL;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_obj(c, what, &o) < 0)
		return -1;
	if (!json_is_string(json_object_get(o, "name")))
		return mgmt_err_set(c->e, -32602, "params.%s.name: required (a string)", what);
	return create_in(c, NULL, akey, "name", what, what, o);
}

/* iscsi_delete_portal / iscsi_delete_target: params.name of the top-level list akey. */
static int delete_top(struct call *c, const char *akey, const char *what)
{
	static const char *const keys[] = {"name", "dry_run", NULL};
	const char *name;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "name", true, &name) < 0)
		return -1;
	return delete_in(c, NULL, akey, "name", what, json_object_get(c->params, "name"));
}

int mgmt_m_create_portal(struct call *c)
{
	return create_top(c, "portals", "portal");
}

int mgmt_m_delete_portal(struct call *c)
{
	return delete_top(c, "portals", "portal");
}

int mgmt_m_create_target(struct call *c)
{
	return create_top(c, "targets", "target");
}

int mgmt_m_delete_target(struct call *c)
{
	return delete_top(c, "targets", "target");
}

/* get_luns / get_acls of params.target. */
static int get_of_target(struct call *c, const char *akey)
{
	static const char *const keys[] = {"target", NULL};
	const char *name;
	json_t *t, *a;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &name) < 0)
		return -1;
	if (!(t = mgmt_find_target(c->m->doc, name)))
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", name);
	a = json_object_get(t, akey);
	c->result = json_is_array(a) ? json_deep_copy(a) : json_array();
	return 0;
}

/* A running LUN's state (ix_target_lun_status) as its "status" object. */
json_t *mgmt_lun_status(struct ix_target *tgt, const char *target, json_t *lun)
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
int mgmt_m_get_luns(struct call *c)
{
	const char *target = json_string_value(json_object_get(c->params, "target"));
	json_t *l, *st;
	size_t i;

	if (get_of_target(c, "luns") < 0)
		return -1;
	json_array_foreach(c->result, i, l)
	{
		if (c->m->tgt && (st = mgmt_lun_status(c->m->tgt, target, json_object_get(l, "lun"))))
			json_object_set_new(l, "status", st);
	}
	return 0;
}

int mgmt_m_get_acls(struct call *c)
{
	return get_of_target(c, "acls");
}

int mgmt_m_create_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "dry_run", NULL};
	const char *target;
	json_t *l = NULL;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_obj(c, "lun", &l) < 0)
		return -1;
	if (!json_is_integer(json_object_get(l, "lun")))
		return mgmt_err_set(c->e, -32602, "params.lun.lun: required (an integer)");
	return create_in(c, target, "luns", "lun", "LUN", "lun", l);
}

int mgmt_m_delete_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "dry_run", NULL};
	const char *target;
	json_t *l = json_object_get(c->params, "lun");

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(l))
		return mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
	return delete_in(c, target, "luns", "lun", "LUN", l);
}

int mgmt_m_create_acl(struct call *c)
{
	static const char *const keys[] = {"target", "acl", "dry_run", NULL};
	const char *target;
	json_t *a = NULL;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_obj(c, "acl", &a) < 0)
		return -1;
	if (!json_is_string(json_object_get(a, "initiator")))
		return mgmt_err_set(c->e, -32602, "params.acl.initiator: required (a string)");
	return create_in(c, target, "acls", "initiator", "ACL", "acl", a);
}

int mgmt_m_delete_acl(struct call *c)
{
	static const char *const keys[] = {"target", "initiator", "dry_run", NULL};
	const char *target, *ini;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_str(c, "initiator", true, &ini) < 0)
		return -1;
	return delete_in(c, target, "acls", "initiator", "ACL",
			 json_object_get(c->params, "initiator"));
}

/* An ACL's LUN masking: params.luns (a list as in the file's acls[].luns) replaces it, null
 * removes it (the initiator sees every LUN). Live sessions of the initiator get the new view
 * with 3F/0E (target/tgt_acl.c). */
int mgmt_m_set_acl_luns(struct call *c)
{
	static const char *const keys[] = {"target", "initiator", "luns", "dry_run", NULL};
	json_t *newdoc, *t, *l = json_object_get(c->params, "luns"), *acls;
	const char *target, *ini;
	long i;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_str(c, "initiator", true, &ini) < 0)
		return -1;
	if (!json_is_array(l) && !json_is_null(l))
		return mgmt_err_set(c->e, -32602,
				"params.luns: required (a list, or null for all LUNs)");
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	t = mgmt_find_target(newdoc, target);
	acls = t ? json_object_get(t, "acls") : NULL;
	i = mgmt_find_by(acls, "initiator", json_object_get(c->params, "initiator"));
	if (i < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no %s \"%s\"%s%s", t ? "ACL" : "target",
				t ? ini : target, t ? " in target " : "", t ? target : "");
	}
	mgmt_map(c, "params.luns", "targets[%ld].acls[%ld].luns", target_index(newdoc, target), i);
	if (json_is_null(l))
		json_object_del(json_array_get(acls, (size_t)i), "luns");
	else if (json_object_set(json_array_get(acls, (size_t)i), "luns", l) < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	return mgmt_commit(c, newdoc);
}

/* The authentication keys of a target or of global.discovery: each one given replaces the old
 * value; null removes it (back to the default). */
/* The keys names[] of obj (in newdoc) that params give: each one given replaces the value, null
 * removes it (back to the default); then commit. Takes newdoc. */
static int set_keys(struct call *c, json_t *obj, const char *docpath, json_t *newdoc,
		    const char *const *names, const char *list)
{
	bool any = false;
	char req[64];

	for (int i = 0; names[i]; i++) {
		json_t *v = json_object_get(c->params, names[i]);
		if (!v)
			continue;
		any = true;
		snprintf(req, sizeof(req), "params.%s", names[i]);
		mgmt_map(c, req, "%s.%s", docpath, names[i]);
		if (json_is_null(v))
			json_object_del(obj, names[i]);
		else if (json_object_set(obj, names[i], v) < 0) {
			json_decref(newdoc);
			return mgmt_err_set(c->e, -32603, "out of memory");
		}
	}
	if (!any) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, -32602, "params: nothing to set (%s)", list);
	}
	return mgmt_commit(c, newdoc);
}

static int set_auth(struct call *c, json_t *obj, const char *docpath, json_t *newdoc)
{
	static const char *const auth[] = {"chap", "mutual_chap", "chap_required",
					   "chap_algorithms", NULL};

	return set_keys(c, obj, docpath, newdoc, auth, "chap, mutual_chap, chap_required, chap_algorithms");
}

/* Target settings that apply online (to logins from then on). */
int mgmt_m_set_target_options(struct call *c)
{
	static const char *const keys[] = {"target",	    "alias",   "max_sessions",
					   "chap_required", "dry_run", NULL};
	static const char *const opts[] = {"alias", "max_sessions", "chap_required", NULL};
	const char *target;
	json_t *newdoc, *t;
	char docpath[64];

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (!(t = mgmt_find_target(newdoc, target))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	snprintf(docpath, sizeof(docpath), "targets[%ld]", target_index(newdoc, target));
	return set_keys(c, t, docpath, newdoc, opts, "alias, max_sessions, chap_required");
}

/* The object of LUN params.lun of target in doc (its path in docpath), or NULL with the error
 * set. */
static json_t *lun_obj(struct call *c, json_t *doc, const char *target, char *docpath, size_t cap)
{
	json_t *lunv = json_object_get(c->params, "lun"), *t, *num;
	long i;

	if (!json_is_integer(lunv)) {
		mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
		return NULL;
	}
	if (!(t = mgmt_find_target(doc, target))) {
		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
		return NULL;
	}
	num = json_integer(json_integer_value(lunv));
	i = mgmt_find_by(json_object_get(t, "luns"), "lun", num);
	json_decref(num);
	if (i < 0)
		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
			 (long long)json_integer_value(lunv), target);
	else
		snprintf(docpath, cap, "targets[%ld].luns[%ld]", target_index(doc, target), i);
	return i < 0 ? NULL : json_array_get(json_object_get(t, "luns"), (size_t)i);
}

/* A LUN started read-only has its backend opened read-only: only a restart makes it writable. */
static int check_writable(struct call *c, const char *target)
{
	json_t *ro = json_object_get(c->params, "readonly");
	uint32_t lun = (uint32_t)json_integer_value(json_object_get(c->params, "lun"));

	if (!c->m->tgt || !ro || json_is_true(ro) || ix_target_lun_writable(c->m->tgt, target, lun))
		return 0;
	return mgmt_err_set(c->e, MGMT_ERR_APPLY,
			"LUN %u of target %s was started read-only (its backend is opened "
			"read-only): only a restart makes it writable",
			lun, target);
}

/* LUN settings that apply online: write_cache and readonly (initiators get 6/2A/01). */
int mgmt_m_set_lun_options(struct call *c)
{
	static const char *const keys[] = {"target",   "lun",	  "write_cache",
					   "readonly", "dry_run", NULL};
	static const char *const opts[] = {"write_cache", "readonly", NULL};
	const char *target;
	json_t *newdoc, *l;
	char docpath[96];

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (!(l = lun_obj(c, newdoc, target, docpath, sizeof(docpath))) ||
	    check_writable(c, target) < 0) {
		json_decref(newdoc);
		return -1;
	}
	return set_keys(c, l, docpath, newdoc, opts, "write_cache, readonly");
}

int mgmt_m_set_target_auth(struct call *c)
{
	static const char *const keys[] = {"target",	  "chap",	     "mutual_chap",
					   "chap_required", "chap_algorithms", "dry_run",
					   NULL};
	const char *target;
	json_t *newdoc, *t;
	char docpath[64];

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (!(t = mgmt_find_target(newdoc, target))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	snprintf(docpath, sizeof(docpath), "targets[%ld]", target_index(newdoc, target));
	return set_auth(c, t, docpath, newdoc);
}

int mgmt_m_set_discovery_auth(struct call *c)
{
	static const char *const keys[] = {"chap", "mutual_chap", "chap_required",
					   "chap_algorithms", "dry_run", NULL};
	json_t *newdoc, *g, *d;

	if (mgmt_p_keys(c, keys) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
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
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	return set_auth(c, d, "global.discovery", newdoc);
}

int mgmt_m_get_discovery_auth(struct call *c)
{
	static const char *const keys[] = {NULL};
	json_t *d = json_object_get(json_object_get(c->m->doc, "global"), "discovery");

	if (mgmt_p_keys(c, keys) < 0)
		return -1;
	c->result = json_is_object(d) ? json_deep_copy(d) : json_object();
	return 0;
}

/* The whole configuration at once ("switch to this"): applied as the difference. */
int mgmt_m_apply_config(struct call *c)
{
	static const char *const keys[] = {"config", "dry_run", NULL};
	json_t *cfg = NULL, *newdoc;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_obj(c, "config", &cfg) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(cfg)) || mgmt_normalize(newdoc) < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	mgmt_map(c, "params.config", "%s", "");
	return mgmt_commit(c, newdoc);
}

int mgmt_m_save_config(struct call *c)
{
	static const char *const keys[] = {"path", NULL};
	const char *path;
	char err[8600];
	int r;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "path", false, &path) < 0)
		return -1;
	if (!path)
		path = c->m->config_path;
	if (!path)
		return mgmt_err_set(c->e, -32602,
				"params.path: required (the daemon was started without a "
				"configuration file)");
	if (path[0] != '/')
		return mgmt_err_set(c->e, -32602, "params.path: must be an absolute path");
	if (c->m->no_save)
		return mgmt_err_set(c->e, MGMT_ERR_IO, "saving is disabled");
	if (c->m->group)
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG,
				    "a gateway of a group keeps its configuration in the group's "
				    "document in RADOS: every change is saved there already");
	r = mgmt_save_doc(c->m->doc, path, err, sizeof(err));
	if (r < 0)
		return mgmt_err_set(c->e, MGMT_ERR_IO, "%s", err);
	c->result = json_pack("{s:s}", "path", path);
	return 0;
}
