/* Configuration loader, the shared machinery: error messages at the value's position, typed
 * accessors, lists, value syntax and the key tables every section is described with
 * (config_int.h). */
#include "target/config_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/log.h"

/* ---- error reporting ------------------------------------------------------------------- */

const char *cfg_esc(const char *s, char *buf, size_t cap)
{
	return log_escape(s, strlen(s), buf, cap);
}

void cfg_push_key(struct cfg_ctx *c, const char *key)
{
	if (c->depth < MAX_DEPTH)
		c->path[c->depth] = (struct cfg_pcomp){.key = key};
	c->depth++;
}

void cfg_push_idx(struct cfg_ctx *c, size_t idx)
{
	if (c->depth < MAX_DEPTH)
		c->path[c->depth] = (struct cfg_pcomp){.idx = idx};
	c->depth++;
}

void cfg_pop(struct cfg_ctx *c)
{
	c->depth--;
}

/* Report a problem with member `key` of the current value (key NULL: the current value), or
 * with the key token itself (at_key). Message: "NAME:LINE:COL: json.path: text".
 * Returns -EINVAL so callers can `return cfg_fail(...)`. */
int cfg_fail(struct cfg_ctx *c, const char *key, bool at_key,
						      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cfg_json_verror(c->err, c->errlen, c->name, c->text, c->len, c->path,
			c->depth < MAX_DEPTH ? c->depth : MAX_DEPTH, key, at_key, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* ---- typed accessors ------------------------------------------------------------------- */

const char *cfg_type_name(const json_t *v)
{
	static const char *const names[] = {
	    [JSON_OBJECT] = "an object",
	    [JSON_ARRAY] = "an array",
	    [JSON_STRING] = "a string",
	    [JSON_INTEGER] = "an integer",
	    [JSON_REAL] = "a number with a fraction or exponent",
	    [JSON_TRUE] = "a boolean",
	    [JSON_FALSE] = "a boolean",
	    [JSON_NULL] = "null",
	};
	return names[json_typeof(v)];
}

/* A member; null counts as absent everywhere. */
json_t *cfg_member(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

int cfg_missing(struct cfg_ctx *c, const char *key)
{
	return cfg_fail(c, key, false, "required but missing");
}

/* The name at index i of an array of names, or of structs whose member at names is one. */
static const char *name_at(const char *const *names, size_t stride, size_t i)
{
	return *(const char *const *)((const char *)names + i * stride);
}

/* Reject members not among the names (the first NULL ends them), so a typo cannot pass
 * silently. */
static int check_names(struct cfg_ctx *c, json_t *obj, const char *const *names, size_t stride)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		const char *best = NULL;
		size_t best_d = 3; /* suggest only close matches */
		char list[256] = "", k[128];
		size_t o = 0;
		bool ok = false;

		for (size_t i = 0; name_at(names, stride, i); i++) {
			const char *a = name_at(names, stride, i);
			size_t d = cfg_json_key_distance(key, a);
			if (strcmp(key, a) == 0)
				ok = true;
			if (d < best_d) {
				best_d = d;
				best = a;
			}
		}
		if (ok)
			continue;
		if (best)
			return cfg_fail(c, key, true, "unknown key \"%s\" (did you mean \"%s\"?)",
				    cfg_esc(key, k, sizeof(k)), best);
		for (size_t i = 0; name_at(names, stride, i) && o < sizeof(list); i++) {
			int w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "",
					 name_at(names, stride, i));
			o += w > 0 ? (size_t)w : 0;
		}
		return cfg_fail(c, key, true, "unknown key \"%s\" (allowed here: %s)",
			    cfg_esc(key, k, sizeof(k)), list);
	}
	return 0;
}

int cfg_check_keys(struct cfg_ctx *c, json_t *obj, const char *const *allowed)
{
	return check_names(c, obj, allowed, sizeof(*allowed));
}

int cfg_want_object(struct cfg_ctx *c, const char *key, json_t *v)
{
	if (!json_is_object(v))
		return cfg_fail(c, key, false, "must be an object, not %s", cfg_type_name(v));
	return 0;
}

int cfg_enter_object(struct cfg_ctx *c, json_t *obj, const char *key, json_t **v)
{
	int rc;

	*v = cfg_member(obj, key);
	if (!*v)
		return 0;
	if ((rc = cfg_want_object(c, key, *v)))
		return rc;
	cfg_push_key(c, key);
	return 1;
}

int cfg_want_array(struct cfg_ctx *c, const char *key, json_t *v)
{
	if (!json_is_array(v))
		return cfg_fail(c, key, false, "must be an array, not %s", cfg_type_name(v));
	return 0;
}

int cfg_get_bool(struct cfg_ctx *c, json_t *obj, const char *key, bool *out)
{
	json_t *v = cfg_member(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return cfg_fail(c, key, false, "must be true or false, not %s", cfg_type_name(v));
	*out = json_is_true(v);
	return 0;
}

/* Integer in [min, max]; *out untouched when absent. */
int cfg_get_uint(struct cfg_ctx *c, json_t *obj, const char *key, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	json_t *v = cfg_member(obj, key);
	json_int_t i;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return cfg_fail(c, key, false, "must be an integer, not %s", cfg_type_name(v));
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return cfg_fail(c, key, false, "%lld is out of range (%llu to %llu)", (long long)i,
			    (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)i;
	return 0;
}

int cfg_get_u32(struct cfg_ctx *c, json_t *obj, const char *key, uint32_t min, uint32_t max,
		   uint32_t *out)
{
	uint64_t v = *out;
	int rc = cfg_get_uint(c, obj, key, min, max, &v);

	*out = (uint32_t)v;
	return rc;
}

int cfg_get_u16(struct cfg_ctx *c, json_t *obj, const char *key, uint16_t min, uint16_t max,
		   uint16_t *out)
{
	uint64_t v = *out;
	int rc = cfg_get_uint(c, obj, key, min, max, &v);

	*out = (uint16_t)v;
	return rc;
}

/* String of 1..maxlen bytes. Returns the json_t's own string in *out (not a copy). */
int cfg_get_str(struct cfg_ctx *c, json_t *obj, const char *key, size_t maxlen, int flags,
		   const char **out)
{
	json_t *v = cfg_member(obj, key);
	const char *s;
	size_t n;

	*out = NULL;
	if (!v)
		return (flags & STR_REQUIRED) ? cfg_missing(c, key) : 0;
	if (!json_is_string(v))
		return cfg_fail(c, key, false, "must be a string, not %s", cfg_type_name(v));
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0)
		return cfg_fail(c, key, false, "must not be empty");
	if (n > maxlen)
		return cfg_fail(c, key, false, "is %zu bytes long, the limit is %zu", n, maxlen);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((flags & (STR_PRINTABLE | STR_ASCII)) && (ch < 0x20 || ch == 0x7f))
			return cfg_fail(c, key, false, "contains a control character");
		if ((flags & STR_ASCII) && ch > 0x7e)
			return cfg_fail(c, key, false, "must be printable ASCII");
	}
	*out = s;
	return 0;
}

/* Copy a string into the config; -ENOMEM reported like any other error. */
int cfg_dup_str(struct cfg_ctx *c, const char *s, char **out)
{
	if (!s)
		return 0;
	*out = strdup(s);
	if (!*out) {
		if (c->err && c->errlen)
			snprintf(c->err, c->errlen, "%s: out of memory", c->name);
		return -ENOMEM;
	}
	return 0;
}

int cfg_get_strdup(struct cfg_ctx *c, json_t *obj, const char *key, size_t maxlen, int flags,
		      char **out)
{
	const char *s;
	int rc = cfg_get_str(c, obj, key, maxlen, flags, &s);

	return rc ? rc : cfg_dup_str(c, s, out);
}

void *cfg_alloc_array(struct cfg_ctx *c, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p && c->err && c->errlen)
		snprintf(c->err, c->errlen, "%s: out of memory", c->name);
	return p;
}

/* ---- lists ----------------------------------------------------------------------------- */

/* Each element of array v (member `key` of the current value), path "key[i]" while parsed. */
int cfg_each_elem(struct cfg_ctx *c, const char *key, json_t *v, elem_fn one, void *arg)
{
	json_t *e;
	size_t i;
	int rc = 0;

	cfg_push_key(c, key);
	json_array_foreach(v, i, e)
	{
		cfg_push_idx(c, i);
		rc = one(c, e, i, arg);
		cfg_pop(c);
		if (rc)
			break;
	}
	cfg_pop(c);
	return rc;
}

/* The list l of obj (absent: nothing happens). With l->elem_size, *arr gets a zeroed array of
 * one element per entry and *n its length before the elements are parsed. */
int cfg_parse_list(struct cfg_ctx *c, json_t *obj, const struct list_spec *l, void **arr, size_t *n,
		      void *arg)
{
	json_t *v = cfg_member(obj, l->key);
	int rc;

	if (!v)
		return 0;
	if ((rc = cfg_want_array(c, l->key, v)))
		return rc;
	if (l->empty && json_array_size(v) == 0)
		return cfg_fail(c, l->key, false, "%s", l->empty);
	if (l->elem_size) {
		*arr = cfg_alloc_array(c, json_array_size(v), l->elem_size);
		if (!*arr)
			return -ENOMEM;
		*n = json_array_size(v);
	}
	return cfg_each_elem(c, l->key, v, l->one, arg);
}

/* ---- value syntax ---------------------------------------------------------------------- */

int cfg_get_iscsi_name(struct cfg_ctx *c, json_t *obj, const char *key, char **out)
{
	const char *s, *why;
	char buf[300];
	int rc = cfg_get_str(c, obj, key, 1024, STR_REQUIRED | STR_PRINTABLE, &s);

	if (rc)
		return rc;
	why = cfg_iscsi_name_error(s);
	if (why)
		return cfg_fail(c, key, false, "\"%s\" is not a valid iSCSI name: %s",
			    cfg_esc(s, buf, sizeof(buf)), why);
	return cfg_dup_str(c, s, out);
}

/* "4096", "512K", "1G", "2TiB": powers of 1024. */
static int parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTP";
	uint64_t v = 0;
	const char *p = s, *u;
	unsigned shift = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p) {
		char up = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		u = strchr(units, up);
		if (!u || !up)
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
		p++;
		if (p[0] == 'i' && p[1] == 'B')
			p += 2;
		if (*p)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int cfg_get_size(struct cfg_ctx *c, json_t *obj, const char *key, uint64_t *out)
{
	json_t *v = cfg_member(obj, key);
	char buf[64];
	int rc;

	if (!v)
		return 0;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return cfg_fail(c, key, false, "must not be negative");
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return cfg_fail(c, key, false,
				"must be an integer or a string like \"10G\", not %s",
				cfg_type_name(v));
	rc = parse_size(json_string_value(v), out);
	if (rc == -ERANGE)
		return cfg_fail(c, key, false, "\"%s\" is too large",
			    cfg_esc(json_string_value(v), buf, sizeof(buf)));
	if (rc)
		return cfg_fail(c, key, false,
			    "\"%s\" is not a size (a number of bytes, optionally followed by K, "
			    "M, G, T or P for powers of 1024)",
			    cfg_esc(json_string_value(v), buf, sizeof(buf)));
	return 0;
}

/* Pick a string from a fixed list (NULL-terminated); its index goes to *out. */
int cfg_get_enum(struct cfg_ctx *c, json_t *obj, const char *key, const char *const *names,
		    const char *what, int *out)
{
	const char *s;
	char buf[64], list[128] = "";
	size_t o = 0;
	int rc = cfg_get_str(c, obj, key, 64, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	for (int i = 0; names[i]; i++) {
		int w;
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
		w = snprintf(list + o, sizeof(list) - o, "%s%s",
			     i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
		if (w > 0 && (size_t)w < sizeof(list) - o)
			o += (size_t)w;
	}
	return cfg_fail(c, key, false, "unknown %s \"%s\" (use %s)", what,
			cfg_esc(s, buf, sizeof(buf)), list);
}

/* ---- key tables ------------------------------------------------------------------------ */

/* Reject members the table does not name. */
int cfg_check_table(struct cfg_ctx *c, json_t *obj, const struct key *keys)
{
	return check_names(c, obj, &keys->name, sizeof(*keys));
}

/* Where key k's value is in the section's struct at base. */
void *cfg_key_at(const struct key *k, void *base)
{
	return (char *)base + k->off;
}

/* Every integer and boolean key of the table at its default. */
void cfg_key_defaults(const struct key *keys, void *base)
{
	for (const struct key *k = keys; k->name; k++) {
		void *p = (char *)base + k->off;

		switch (k->type) {
		case K_BOOL:
			*(bool *)p = k->def != 0;
			break;
		case K_INT:
			*(int *)p = (int)k->def;
			break;
		case K_U16:
			*(uint16_t *)p = (uint16_t)k->def;
			break;
		case K_U32:
			*(uint32_t *)p = (uint32_t)k->def;
			break;
		case K_U64:
		case K_SIZE:
			*(uint64_t *)p = k->def;
			break;
		case K_STR:
		case K_FN:
			break;
		}
	}
}

static int parse_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	void *p = (char *)base + k->off;
	uint32_t i;
	int rc;

	switch (k->type) {
	case K_BOOL:
		return cfg_get_bool(c, obj, k->name, p);
	case K_INT:
		i = (uint32_t) * (int *)p;
		rc = cfg_get_u32(c, obj, k->name, (uint32_t)k->min, (uint32_t)k->max, &i);
		*(int *)p = (int)i;
		return rc;
	case K_U16:
		return cfg_get_u16(c, obj, k->name, (uint16_t)k->min, (uint16_t)k->max, p);
	case K_U32:
		return cfg_get_u32(c, obj, k->name, (uint32_t)k->min, (uint32_t)k->max, p);
	case K_U64:
		return cfg_get_uint(c, obj, k->name, k->min, k->max, p);
	case K_SIZE:
		return cfg_get_size(c, obj, k->name, p);
	case K_STR:
		return cfg_get_strdup(c, obj, k->name, k->max, k->flags, p);
	case K_FN:
		return k->parse(c, obj, k, base);
	}
	return -EINVAL;
}

/* The members of obj the table names, in its order (absent ones keep their value). */
int cfg_parse_keys(struct cfg_ctx *c, json_t *obj, const struct key *keys, void *base)
{
	int rc = 0;

	for (const struct key *k = keys; !rc && k->name; k++)
		rc = parse_key(c, obj, k, base);
	return rc;
}

/* An object: no keys but the table's, every KEY_PRESENT one there, then the members. */
int cfg_parse_table(struct cfg_ctx *c, json_t *obj, const struct key *keys, void *base)
{
	int rc = cfg_check_table(c, obj, keys);

	for (const struct key *k = keys; !rc && k->name; k++)
		if ((k->flags & KEY_PRESENT) && !cfg_member(obj, k->name))
			rc = cfg_missing(c, k->name);
	return rc ? rc : cfg_parse_keys(c, obj, keys, base);
}

/* A directory for state that outlives the process: an absolute path (it must exist when a LU
 * needs it; scsi_lu_new() checks). */
int cfg_get_state_dir(struct cfg_ctx *c, json_t *obj, char **out)
{
	const char *s;
	int rc = cfg_get_str(c, obj, "state_dir", 4000, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	if (s[0] != '/')
		return cfg_fail(c, "state_dir", false, "must be an absolute path");
	return cfg_dup_str(c, s, out);
}
