/* The gateway group's document: checks, derivation of a member's configuration, and the way
 * back from an edit (ha_group_doc.h). Pure functions on jansson trees; no message quotes a
 * value of the document (it holds CHAP secrets), only names and paths. */
#include "ha/ha_group_doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool in_list(const char *key, const char *const *keys)
{
	for (int i = 0; keys[i]; i++)
		if (strcmp(keys[i], key) == 0)
			return true;
	return false;
}

/* The first key of o not in keys, or NULL. */
static const char *unknown_key(json_t *o, const char *const *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
		if (!in_list(k, keys))
			return k;
	return NULL;
}

/* A member's name: 1-63 of [A-Za-z0-9._-] (it names portals and RADOS objects). */
static bool good_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n >= HA_GROUP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

/* A printable string key of o copied into buf (cap bytes); absent: def. */
static int ref_str(json_t *g, const char *key, char *buf, size_t cap, const char *def, char *err,
		   size_t errlen)
{
	json_t *v = json_object_get(g, key);
	const char *s;

	if (!v || json_is_null(v)) {
		snprintf(buf, cap, "%s", def);
		return 0;
	}
	if (!json_is_string(v))
		return fail(err, errlen, "group.%s: must be a string", key);
	s = json_string_value(v);
	if (strlen(s) >= cap)
		return fail(err, errlen, "group.%s: longer than %zu bytes", key, cap - 1);
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return fail(err, errlen, "group.%s: control characters", key);
	snprintf(buf, cap, "%s", s);
	return 0;
}

int ha_group_ref_parse(json_t *local, struct ha_group_ref *ref, char *err, size_t errlen)
{
	static const char *const keys[] = {"pool",   "namespace", "object",  "member", "conf",
					   "client", "keyring",   "poll_ms", NULL};
	json_t *g = json_object_get(local, "group"), *v;
	const char *k;
	int rc;

	memset(ref, 0, sizeof(*ref));
	if (!json_is_object(local) || !g || json_is_null(g))
		return -ENOENT;
	if (!json_is_object(g))
		return fail(err, errlen, "group: must be an object");
	if ((k = unknown_key(g, keys)))
		return fail(err, errlen, "group.%s: unknown key", k);
	if ((rc = ref_str(g, "pool", ref->pool, sizeof(ref->pool), "rbd", err, errlen)) ||
	    (rc = ref_str(g, "namespace", ref->ns, sizeof(ref->ns), "", err, errlen)) ||
	    (rc = ref_str(g, "object", ref->object, sizeof(ref->object), "ix.group", err,
			  errlen)) ||
	    (rc = ref_str(g, "member", ref->member, sizeof(ref->member), "", err, errlen)) ||
	    (rc = ref_str(g, "conf", ref->conf, sizeof(ref->conf), "", err, errlen)) ||
	    (rc = ref_str(g, "client", ref->client, sizeof(ref->client), "admin", err, errlen)) ||
	    (rc = ref_str(g, "keyring", ref->keyring, sizeof(ref->keyring), "", err, errlen)))
		return rc;
	if (!ref->pool[0] || !ref->object[0] || !ref->client[0])
		return fail(err, errlen, "group: pool, object and client must not be empty");
	if (!json_object_get(g, "member"))
		return fail(err, errlen, "group.member: required (this gateway's name in the group)");
	if (!good_name(ref->member))
		return fail(err, errlen,
			    "group.member: 1-63 letters, digits, '.', '_' or '-'");
	ref->poll_ms = HA_GROUP_POLL_MS;
	if ((v = json_object_get(g, "poll_ms")) && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 100 ||
		    json_integer_value(v) > 600000)
			return fail(err, errlen, "group.poll_ms: an integer, 100-600000");
		ref->poll_ms = (uint32_t)json_integer_value(v);
	}
	if (json_object_get(local, "targets"))
		return fail(err, errlen,
			    "targets: a gateway of a group takes its targets from the group "
			    "document, not from its local file (remove one of group and targets)");
	return 0;
}

/* ---- the document's rules ---- */

static const char *const per_gateway_global[] = {"mgmt_socket", "metrics_listen", "mgmt_group",
						 "state_dir",   "threads",        "log_level",
						 "poll_us",     NULL};

int ha_group_global_local(const char *key)
{
	return in_list(key, per_gateway_global);
}

static json_t *find_named(json_t *a, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e)
	{
		const char *n = json_string_value(json_object_get(e, "name"));
		if (n && strcmp(n, name) == 0)
			return e;
	}
	return NULL;
}

static int check_portal(json_t *p, size_t mi, size_t pi, char *err, size_t errlen)
{
	static const char *const keys[] = {"address", "port", "transports", NULL};
	json_t *v;
	const char *k;

	if (!json_is_object(p))
		return fail(err, errlen, "members[%zu].portals[%zu]: must be an object", mi, pi);
	if ((k = unknown_key(p, keys)))
		return fail(err, errlen, "members[%zu].portals[%zu].%s: unknown key", mi, pi, k);
	if (!json_is_string(json_object_get(p, "address")) ||
	    !json_string_length(json_object_get(p, "address")))
		return fail(err, errlen, "members[%zu].portals[%zu].address: required, a string", mi,
			    pi);
	v = json_object_get(p, "port");
	if (v && (!json_is_integer(v) || json_integer_value(v) < 1 ||
		  json_integer_value(v) > 65535))
		return fail(err, errlen, "members[%zu].portals[%zu].port: an integer, 1-65535", mi,
			    pi);
	v = json_object_get(p, "transports");
	if (v && !json_is_array(v))
		return fail(err, errlen, "members[%zu].portals[%zu].transports: an array", mi, pi);
	return 0;
}

static int check_members(json_t *ms, char *err, size_t errlen)
{
	static const char *const keys[] = {"name", "id", "portals", NULL};
	size_t i, j;
	json_t *m, *o;

	if (!json_is_array(ms) || json_array_size(ms) == 0)
		return fail(err, errlen, "members: required, an array of at least one member");
	if (json_array_size(ms) > 64)
		return fail(err, errlen, "members: at most 64");
	json_array_foreach(ms, i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name")), *k;
		json_t *id = json_object_get(m, "id"), *ps = json_object_get(m, "portals"), *p;
		size_t pi;
		int rc;

		if (!json_is_object(m))
			return fail(err, errlen, "members[%zu]: must be an object", i);
		if ((k = unknown_key(m, keys)))
			return fail(err, errlen, "members[%zu].%s: unknown key", i, k);
		if (!good_name(name))
			return fail(err, errlen,
				    "members[%zu].name: required, 1-63 letters, digits, '.', '_' "
				    "or '-'",
				    i);
		if (!json_is_integer(id) || json_integer_value(id) < 1 ||
		    json_integer_value(id) > 65535)
			return fail(err, errlen, "members[%zu].id: required, an integer, 1-65535",
				    i);
		json_array_foreach(ms, j, o)
		{
			if (j >= i)
				break;
			if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0)
				return fail(err, errlen, "members[%zu].name: \"%s\" again", i, name);
			if (json_integer_value(json_object_get(o, "id")) == json_integer_value(id))
				return fail(err, errlen, "members[%zu].id: %lld is members[%zu]'s",
					    i, (long long)json_integer_value(id), j);
		}
		if (!json_is_array(ps) || json_array_size(ps) == 0 || json_array_size(ps) > 16)
			return fail(err, errlen, "members[%zu].portals: required, 1-16 portals", i);
		json_array_foreach(ps, pi, p)
			if ((rc = check_portal(p, i, pi, err, errlen)))
				return rc;
	}
	return 0;
}

static int check_target(json_t *t, size_t i, json_t *members, json_t *targets, char *err,
			size_t errlen)
{
	json_t *tm = json_object_get(t, "members"), *a = json_object_get(t, "alua"), *v, *o;
	const char *name = json_string_value(json_object_get(t, "name")), *k;
	static const char *const alua_keys[] = {"explicit", "transition_time",
						"implicit_failover_ms", NULL};
	size_t j, l;

	if (!json_is_object(t))
		return fail(err, errlen, "targets[%zu]: must be an object", i);
	if (!name)
		return fail(err, errlen, "targets[%zu].name: required, a string", i);
	json_array_foreach(targets, j, o)
	{
		const char *on = json_string_value(json_object_get(o, "name"));
		if (j >= i)
			break;
		if (on && strcasecmp(on, name) == 0)
			return fail(err, errlen, "targets[%zu].name: targets[%zu] has that name", i,
				    j);
	}
	if (json_object_get(t, "portals"))
		return fail(err, errlen,
			    "targets[%zu].portals: a group's target is on every portal of its "
			    "members (list the gateways in \"members\")",
			    i);
	if (json_object_get(t, "redirect"))
		return fail(err, errlen,
			    "targets[%zu].redirect: per gateway, not in a group document", i);
	if (tm && !json_is_null(tm)) {
		if (!json_is_array(tm) || json_array_size(tm) == 0)
			return fail(err, errlen,
				    "targets[%zu].members: an array of member names, at least "
				    "one",
				    i);
		json_array_foreach(tm, j, v)
		{
			if (!json_is_string(v) || !find_named(members, json_string_value(v)))
				return fail(err, errlen,
					    "targets[%zu].members[%zu]: not a member's name", i, j);
			for (l = 0; l < j; l++)
				if (json_equal(json_array_get(tm, l), v))
					return fail(err, errlen,
						    "targets[%zu].members[%zu]: named twice", i, j);
		}
	}
	if (a && !json_is_null(a)) {
		if (!json_is_object(a))
			return fail(err, errlen, "targets[%zu].alua: must be an object", i);
		if ((k = unknown_key(a, alua_keys)))
			return fail(err, errlen,
				    "targets[%zu].alua.%s: not in a group document (groups and "
				    "ports derive from the members)",
				    i, k);
	}
	return 0;
}

int ha_group_doc_check(json_t *doc, char *err, size_t errlen)
{
	static const char *const keys[] = {"kind", "version", "generation", "global",
					   "members", "targets", NULL};
	json_t *v, *ts, *t, *g;
	const char *k;
	size_t i;
	int rc;

	if (!json_is_object(doc))
		return fail(err, errlen, "the group document must be a JSON object");
	v = json_object_get(doc, "kind");
	if (!json_is_string(v) || strcmp(json_string_value(v), HA_GROUP_KIND) != 0)
		return fail(err, errlen, "kind: must be \"" HA_GROUP_KIND "\"");
	v = json_object_get(doc, "version");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		return fail(err, errlen, "version: must be 1 (the only one so far)");
	if (ha_group_generation(doc) == 0)
		return fail(err, errlen, "generation: required, an integer >= 1");
	if ((k = unknown_key(doc, keys)))
		return fail(err, errlen, "%s: unknown key", k);
	g = json_object_get(doc, "global");
	if (g && !json_is_null(g)) {
		if (!json_is_object(g))
			return fail(err, errlen, "global: must be an object");
		json_object_foreach(g, k, v)
			if (ha_group_global_local(k))
				return fail(err, errlen,
					    "global.%s: per gateway, only in a gateway's local file",
					    k);
	}
	if ((rc = check_members(json_object_get(doc, "members"), err, errlen)))
		return rc;
	ts = json_object_get(doc, "targets");
	if (ts && !json_is_null(ts) && !json_is_array(ts))
		return fail(err, errlen, "targets: must be an array");
	json_array_foreach(ts, i, t)
		if ((rc = check_target(t, i, json_object_get(doc, "members"), ts, err, errlen)))
			return rc;
	return 0;
}

uint64_t ha_group_generation(json_t *doc)
{
	json_t *v = json_object_get(doc, "generation");

	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return 0;
	return (uint64_t)json_integer_value(v);
}

unsigned ha_group_member_id(json_t *doc, const char *member)
{
	json_t *m = find_named(json_object_get(doc, "members"), member);

	return m ? (unsigned)json_integer_value(json_object_get(m, "id")) : 0;
}

/* ---- derivation ---- */

static bool exports(json_t *t, const char *member)
{
	json_t *tm = json_object_get(t, "members"), *v;
	size_t i;

	if (!tm || json_is_null(tm))
		return true;
	json_array_foreach(tm, i, v)
		if (strcmp(json_string_value(v), member) == 0)
			return true;
	return false;
}

/* Any LUN an RBD image with exclusive_lock: the HA layer decides the ALUA states. */
static bool lock_follows(json_t *t)
{
	json_t *l;
	size_t i;

	json_array_foreach(json_object_get(t, "luns"), i, l)
	{
		json_t *r = json_object_get(l, "rbd");
		if (json_is_string(json_object_get(l, "backend")) &&
		    strcmp(json_string_value(json_object_get(l, "backend")), "rbd") == 0 &&
		    json_is_true(json_object_get(r, "exclusive_lock")))
			return true;
	}
	return false;
}

/* The portals of the effective configuration: the local file's (tpgt = id), else the
 * member's own. */
static int derive_portals(json_t *local, json_t *m, unsigned id, const char *member,
			  json_t **out, char *err, size_t errlen)
{
	json_t *lp = local ? json_object_get(local, "portals") : NULL, *ps, *p;
	size_t i;

	if (lp && !json_is_null(lp)) {
		if (!json_is_array(lp))
			return fail(err, errlen, "portals: must be an array");
		ps = json_deep_copy(lp);
		if (!ps)
			return -ENOMEM;
		json_array_foreach(ps, i, p)
		{
			json_t *tg = json_object_get(p, "tpgt");
			if (!json_is_object(p)) {
				json_decref(ps);
				return fail(err, errlen, "portals[%zu]: must be an object", i);
			}
			if (!json_object_get(p, "name")) {
				/* named as the member's own would be, so that the ALUA group can
				 * list it (the config's portals are referred to by name) */
				char name[HA_GROUP_NAME_MAX + 16];

				snprintf(name, sizeof(name), "%s-%zu", member, i + 1);
				if (json_object_set_new(p, "name", json_string(name)) < 0) {
					json_decref(ps);
					return -ENOMEM;
				}
			}
			if (!tg || json_is_null(tg)) {
				json_object_set_new(p, "tpgt", json_integer(id));
			} else if (!json_is_integer(tg) || json_integer_value(tg) != (json_int_t)id) {
				json_decref(ps);
				return fail(err, errlen,
					    "portals[%zu].tpgt: a gateway of a group serves with its "
					    "member id as tpgt (%u): leave it out",
					    i, id);
			}
		}
		*out = ps;
		return 0;
	}
	ps = json_array();
	if (!ps)
		return -ENOMEM;
	json_array_foreach(json_object_get(m, "portals"), i, p)
	{
		char name[HA_GROUP_NAME_MAX + 16];
		json_t *np = json_deep_copy(p);

		snprintf(name, sizeof(name), "%s-%zu", member, i + 1);
		if (!np || json_object_set_new(np, "name", json_string(name)) < 0 ||
		    json_object_set_new(np, "tpgt", json_integer(id)) < 0 ||
		    json_array_append_new(ps, np) < 0) {
			json_decref(ps);
			return -ENOMEM;
		}
	}
	*out = ps;
	return 0;
}

/* targets[].alua: its options and one group per member that exports it. */
static json_t *derive_alua(json_t *t, json_t *members, const char *member, json_t *portals)
{
	json_t *a = json_object(), *groups = json_array(), *opts = json_object_get(t, "alua");
	const char *state = lock_follows(t) ? "standby" : "active/optimized";
	json_t *m, *v;
	const char *k;
	size_t i;

	if (!a || !groups)
		goto oom;
	if (json_is_object(opts))
		json_object_foreach(opts, k, v)
			if (json_object_set(a, k, v) < 0)
				goto oom;
	json_array_foreach(members, i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name"));
		json_t *g;

		if (!exports(t, name))
			continue;
		g = json_pack("{s:O, s:s}", "id", json_object_get(m, "id"), "state", state);
		if (!g || json_array_append_new(groups, g) < 0)
			goto oom;
		if (strcmp(name, member) == 0) {
			json_t *names = json_array(), *p;
			size_t j;

			if (!names || json_object_set_new(g, "portals", names) < 0)
				goto oom;
			json_array_foreach(portals, j, p)
				if (json_array_append(names, json_object_get(p, "name")) < 0)
					goto oom;
		} else if (json_object_set_new(g, "relative_ports",
					       json_pack("[O]", json_object_get(m, "id"))) < 0) {
			goto oom;
		}
	}
	if (json_object_set_new(a, "groups", groups) < 0) {
		groups = NULL;
		goto oom;
	}
	return a;
oom:
	json_decref(groups);
	json_decref(a);
	return NULL;
}

int ha_group_derive(json_t *local, json_t *doc, const char *member, json_t **out, char *err,
		    size_t errlen)
{
	static const char *const local_keys[] = {"version", "group", "global", "portals",
						 "testing", NULL};
	json_t *members = json_object_get(doc, "members"), *m = find_named(members, member);
	json_t *e = NULL, *g = NULL, *ps = NULL, *ts = NULL, *t, *v;
	unsigned id;
	const char *k;
	size_t i;
	int rc;

	*out = NULL;
	if (!m)
		return fail(err, errlen,
			    "member \"%s\" is not in the group document's members (add it: "
			    "ix-ctl group member add %s --portal ADDRESS)",
			    member, member);
	id = (unsigned)json_integer_value(json_object_get(m, "id"));
	if (local && (k = unknown_key(local, local_keys)))
		return fail(err, errlen,
			    "%s: not in the local file of a gateway of a group (it has version, "
			    "group, global, portals, testing)",
			    k);
	if ((rc = derive_portals(local, m, id, member, &ps, err, errlen)))
		return rc;
	g = json_deep_copy(json_is_object(json_object_get(doc, "global"))
				   ? json_object_get(doc, "global")
				   : NULL);
	if (!g)
		g = json_object();
	v = local ? json_object_get(local, "global") : NULL;
	if (v && !json_is_null(v) && !json_is_object(v)) {
		rc = fail(err, errlen, "global: must be an object");
		goto out;
	}
	if (!g || (json_is_object(v) && json_object_update(g, v) < 0) || !(ts = json_array()))
		goto oom;
	json_array_foreach(json_object_get(doc, "targets"), i, t)
	{
		json_t *nt, *a;

		if (!exports(t, member))
			continue;
		nt = json_deep_copy(t);
		if (!nt || json_array_append_new(ts, nt) < 0)
			goto oom;
		json_object_del(nt, "members");
		if (!(a = derive_alua(t, members, member, ps)) ||
		    json_object_set_new(nt, "alua", a) < 0)
			goto oom;
	}
	e = json_pack("{s:i, s:O, s:O, s:O}", "version", 1, "global", g, "portals", ps, "targets",
		      ts);
	if (!e)
		goto oom;
	if (local && (v = json_object_get(local, "testing")) &&
	    json_object_set(e, "testing", v) < 0)
		goto oom;
	*out = e;
	e = NULL;
	rc = 0;
	goto out;
oom:
	rc = -ENOMEM;
	fail(err, errlen, "out of memory");
out:
	json_decref(e);
	json_decref(g);
	json_decref(ps);
	json_decref(ts);
	return rc;
}

/* ---- the way back ---- */

/* A target of an effective configuration as the document holds it: without the derived
 * ALUA groups (its options stay; none left: no "alua"). A new reference. */
static json_t *strip_target(json_t *t)
{
	json_t *c = json_deep_copy(t), *a;

	if (!c)
		return NULL;
	a = json_object_get(c, "alua");
	if (json_is_object(a)) {
		json_object_del(a, "groups");
		if (json_object_size(a) == 0)
			json_object_del(c, "alua");
	}
	return c;
}

static long index_named(json_t *a, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e)
	{
		const char *n = json_string_value(json_object_get(e, "name"));
		if (n && strcasecmp(n, name) == 0)
			return (long)i;
	}
	return -1;
}

static int lift_global(json_t *nd, json_t *olde, json_t *newe, char *err, size_t errlen)
{
	json_t *og = json_object_get(olde, "global"), *ng = json_object_get(newe, "global");
	json_t *dg = json_object_get(nd, "global"), *v;
	const char *k;

	if (!json_is_object(og))
		og = NULL;
	if (!json_is_object(ng))
		ng = NULL;
	/* every key that changed, appeared or went */
	json_object_foreach(ng, k, v)
	{
		if (json_equal(v, json_object_get(og, k)))
			continue;
		if (ha_group_global_local(k)) {
			fail(err, errlen,
			     "global.%s: per gateway: change it in this gateway's local file", k);
			return -EPERM;
		}
		if (!json_is_object(dg)) {
			dg = json_object();
			if (!dg || json_object_set_new(nd, "global", dg) < 0)
				return -ENOMEM;
		}
		if (json_object_set(dg, k, v) < 0)
			return -ENOMEM;
	}
	json_object_foreach(og, k, v)
	{
		if (json_object_get(ng, k))
			continue;
		if (ha_group_global_local(k)) {
			fail(err, errlen,
			     "global.%s: per gateway: change it in this gateway's local file", k);
			return -EPERM;
		}
		if (json_is_object(dg))
			json_object_del(dg, k);
	}
	return 0;
}

int ha_group_lift(json_t *doc, json_t *olde, json_t *newe, const char *member, json_t **out,
		  char *err, size_t errlen)
{
	json_t *nd = json_deep_copy(doc), *dts, *t, *ots = json_object_get(olde, "targets");
	json_t *nts = json_object_get(newe, "targets");
	size_t i;
	int rc;

	*out = NULL;
	if (!nd)
		return -ENOMEM;
	if (!json_equal(json_object_get(olde, "portals"), json_object_get(newe, "portals"))) {
		json_decref(nd);
		fail(err, errlen,
		     "portals: a group member's portals are the group document's (ix-ctl group "
		     "member add/remove) or its local file's");
		return -EPERM;
	}
	if ((rc = lift_global(nd, olde, newe, err, errlen))) {
		json_decref(nd);
		return rc;
	}
	dts = json_object_get(nd, "targets");
	if (!json_is_array(dts)) {
		dts = json_array();
		if (!dts || json_object_set_new(nd, "targets", dts) < 0) {
			json_decref(nd);
			return -ENOMEM;
		}
	}
	/* removed here: removed from the group */
	json_array_foreach(ots, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		long d;
		if (!name || index_named(nts, name) >= 0)
			continue;
		if ((d = index_named(dts, name)) >= 0)
			json_array_remove(dts, (size_t)d);
	}
	/* changed or new */
	json_array_foreach(nts, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		long o = name ? index_named(ots, name) : -1, d;
		json_t *st, *ost;
		bool same;

		if (!name)
			continue;
		st = strip_target(t);
		ost = o >= 0 ? strip_target(json_array_get(ots, (size_t)o)) : NULL;
		same = st && ost && json_equal(st, ost);
		json_decref(ost);
		if (!st) {
			json_decref(nd);
			return -ENOMEM;
		}
		if (same) {
			json_decref(st);
			continue;
		}
		d = index_named(dts, name);
		if (d >= 0 && o < 0) {
			json_decref(st);
			json_decref(nd);
			fail(err, errlen,
			     "targets: \"%s\" is a target of the group that gateway %s does not "
			     "export (add %s to its members)",
			     name, member, member);
			return -EEXIST;
		}
		if (d >= 0) {
			json_t *mem = json_object_get(json_array_get(dts, (size_t)d), "members");
			if (mem)
				json_object_set(st, "members", mem);
			json_array_set_new(dts, (size_t)d, st);
		} else {
			json_array_append_new(dts, st);
		}
	}
	json_object_set_new(nd, "generation", json_integer((json_int_t)ha_group_generation(doc) + 1));
	*out = nd;
	return 0;
}

/* ---- concurrent edits ---- */

static json_t *named_or_null(json_t *a, const char *name)
{
	long i = index_named(a, name);

	return i >= 0 ? json_array_get(a, (size_t)i) : NULL;
}

static bool same_opt(json_t *a, json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/* Did the edit olde -> newe touch the target name? */
static bool touched(json_t *olde, json_t *newe, const char *name)
{
	json_t *o = named_or_null(json_object_get(olde, "targets"), name);
	json_t *n = named_or_null(json_object_get(newe, "targets"), name);
	json_t *so, *sn;
	bool t;

	if (!o || !n)
		return o != n;
	so = strip_target(o);
	sn = strip_target(n);
	t = !(so && sn && json_equal(so, sn));
	json_decref(so);
	json_decref(sn);
	return t;
}

static int conflict_in(json_t *ts, json_t *base, json_t *fresh, json_t *olde, json_t *newe,
		       char *err, size_t errlen)
{
	json_t *t;
	size_t i;

	json_array_foreach(ts, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		if (!name || !touched(olde, newe, name))
			continue;
		if (!same_opt(named_or_null(json_object_get(base, "targets"), name),
			      named_or_null(json_object_get(fresh, "targets"), name))) {
			fail(err, errlen,
			     "conflict: target %s was changed through another gateway (group "
			     "generation %llu, this edit was made on %llu): nothing written; read it "
			     "again and retry",
			     name, (unsigned long long)ha_group_generation(fresh),
			     (unsigned long long)ha_group_generation(base));
			return -ECANCELED;
		}
	}
	return 0;
}

int ha_group_conflict(json_t *base, json_t *fresh, json_t *olde, json_t *newe, char *err,
		      size_t errlen)
{
	int rc;

	if (json_equal(base, fresh))
		return 0;
	if ((rc = conflict_in(json_object_get(olde, "targets"), base, fresh, olde, newe, err,
			      errlen)) ||
	    (rc = conflict_in(json_object_get(newe, "targets"), base, fresh, olde, newe, err,
			      errlen)))
		return rc;
	if (!same_opt(json_object_get(olde, "global"), json_object_get(newe, "global")) &&
	    !same_opt(json_object_get(base, "global"), json_object_get(fresh, "global"))) {
		fail(err, errlen,
		     "conflict: the group's global settings were changed through another gateway "
		     "(group generation %llu, this edit was made on %llu): nothing written; read "
		     "them again and retry",
		     (unsigned long long)ha_group_generation(fresh),
		     (unsigned long long)ha_group_generation(base));
		return -ECANCELED;
	}
	return 0;
}
