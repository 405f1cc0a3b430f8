/* Target configuration loader: JSON text -> struct ix_config, validated whole.
 *
 * jansson parses the text (syntax errors carry its line and column). Everything after that is
 * semantic checking on the json_t tree; jansson keeps no positions per value, so an error
 * message finds its position by walking the original text along the JSON path of the value
 * (config_json.c). Every string in the result is a private malloc'd copy; cfg_free releases
 * them (secrets are wiped first). docs/configuration.md is the user-facing description of
 * every field; keep the two in step.
 */
#include "target/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ha/ha.h"
#include "proto/chap.h"
#include "target/config_json.h"
#include "util/addr.h"
#include "util/hex.h"
#include "util/log.h"

#define MAX_DEPTH	 CFG_JSON_MAX_DEPTH
#define MAX_FILE_SIZE	 (16u << 20)
#define MAX_TIMEOUT_MS	 3600000u
#define NEG_LEN_MIN	 512u
#define NEG_LEN_MAX	 16777215u /* 2^24 - 1, RFC 7143 */
#define DEFAULT_RAM_SIZE (1ull << 30)

/* A CHAP secret seen while parsing, remembered with its path for the cross-direction check. */
struct secret_ref {
	const char *secret;
	bool mutual;
	struct cfg_pcomp path[MAX_DEPTH];
	int depth;
};

struct ctx {
	const char *name; /* file name for messages */
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	struct cfg_pcomp path[MAX_DEPTH]; /* keys: literals of this file or of the json_t tree */
	int depth;
	struct secret_ref *secrets;
	size_t nsecrets, secrets_cap;
	struct ix_config *cfg; /* being filled in */
};

/* ---- error reporting ------------------------------------------------------------------- */

static const char *esc(const char *s, char *buf, size_t cap)
{
	return log_escape(s, strlen(s), buf, cap);
}

static void push_key(struct ctx *c, const char *key)
{
	if (c->depth < MAX_DEPTH)
		c->path[c->depth] = (struct cfg_pcomp){.key = key};
	c->depth++;
}

static void push_idx(struct ctx *c, size_t idx)
{
	if (c->depth < MAX_DEPTH)
		c->path[c->depth] = (struct cfg_pcomp){.idx = idx};
	c->depth++;
}

static void pop(struct ctx *c)
{
	c->depth--;
}

/* Report a problem with member `key` of the current value (key NULL: the current value), or
 * with the key token itself (at_key). Message: "NAME:LINE:COL: json.path: text".
 * Returns -EINVAL so callers can `return fail(...)`. */
__attribute__((format(printf, 4, 5))) static int fail(struct ctx *c, const char *key, bool at_key,
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

static const char *type_name(const json_t *v)
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
static json_t *member(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

static int missing(struct ctx *c, const char *key)
{
	return fail(c, key, false, "required but missing");
}

/* The name at index i of an array of names, or of structs whose member at names is one. */
static const char *name_at(const char *const *names, size_t stride, size_t i)
{
	return *(const char *const *)((const char *)names + i * stride);
}

/* Reject members not among the names (the first NULL ends them), so a typo cannot pass
 * silently. */
static int check_names(struct ctx *c, json_t *obj, const char *const *names, size_t stride)
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
			return fail(c, key, true, "unknown key \"%s\" (did you mean \"%s\"?)",
				    esc(key, k, sizeof(k)), best);
		for (size_t i = 0; name_at(names, stride, i) && o < sizeof(list); i++) {
			int w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "",
					 name_at(names, stride, i));
			o += w > 0 ? (size_t)w : 0;
		}
		return fail(c, key, true, "unknown key \"%s\" (allowed here: %s)",
			    esc(key, k, sizeof(k)), list);
	}
	return 0;
}

static int check_keys(struct ctx *c, json_t *obj, const char *const *allowed)
{
	return check_names(c, obj, allowed, sizeof(*allowed));
}

static int want_object(struct ctx *c, const char *key, json_t *v)
{
	if (!json_is_object(v))
		return fail(c, key, false, "must be an object, not %s", type_name(v));
	return 0;
}

static int want_array(struct ctx *c, const char *key, json_t *v)
{
	if (!json_is_array(v))
		return fail(c, key, false, "must be an array, not %s", type_name(v));
	return 0;
}

static int get_bool(struct ctx *c, json_t *obj, const char *key, bool *out)
{
	json_t *v = member(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return fail(c, key, false, "must be true or false, not %s", type_name(v));
	*out = json_is_true(v);
	return 0;
}

/* Integer in [min, max]; *out untouched when absent. */
static int get_uint(struct ctx *c, json_t *obj, const char *key, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	json_t *v = member(obj, key);
	json_int_t i;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return fail(c, key, false, "must be an integer, not %s", type_name(v));
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return fail(c, key, false, "%lld is out of range (%llu to %llu)", (long long)i,
			    (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)i;
	return 0;
}

static int get_u32(struct ctx *c, json_t *obj, const char *key, uint32_t min, uint32_t max,
		   uint32_t *out)
{
	uint64_t v = *out;
	int rc = get_uint(c, obj, key, min, max, &v);

	*out = (uint32_t)v;
	return rc;
}

static int get_u16(struct ctx *c, json_t *obj, const char *key, uint16_t min, uint16_t max,
		   uint16_t *out)
{
	uint64_t v = *out;
	int rc = get_uint(c, obj, key, min, max, &v);

	*out = (uint16_t)v;
	return rc;
}

enum str_flags {
	STR_REQUIRED = 1,
	STR_PRINTABLE = 2, /* no control characters */
	STR_ASCII = 4,	   /* printable ASCII only (SCSI INQUIRY fields) */
	KEY_PRESENT = 8,   /* in a key table: missing before any member is read */
};

/* String of 1..maxlen bytes. Returns the json_t's own string in *out (not a copy). */
static int get_str(struct ctx *c, json_t *obj, const char *key, size_t maxlen, int flags,
		   const char **out)
{
	json_t *v = member(obj, key);
	const char *s;
	size_t n;

	*out = NULL;
	if (!v)
		return (flags & STR_REQUIRED) ? missing(c, key) : 0;
	if (!json_is_string(v))
		return fail(c, key, false, "must be a string, not %s", type_name(v));
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0)
		return fail(c, key, false, "must not be empty");
	if (n > maxlen)
		return fail(c, key, false, "is %zu bytes long, the limit is %zu", n, maxlen);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((flags & (STR_PRINTABLE | STR_ASCII)) && (ch < 0x20 || ch == 0x7f))
			return fail(c, key, false, "contains a control character");
		if ((flags & STR_ASCII) && ch > 0x7e)
			return fail(c, key, false, "must be printable ASCII");
	}
	*out = s;
	return 0;
}

/* Copy a string into the config; -ENOMEM reported like any other error. */
static int dup_str(struct ctx *c, const char *s, char **out)
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

static int get_strdup(struct ctx *c, json_t *obj, const char *key, size_t maxlen, int flags,
		      char **out)
{
	const char *s;
	int rc = get_str(c, obj, key, maxlen, flags, &s);

	return rc ? rc : dup_str(c, s, out);
}

static void *alloc_array(struct ctx *c, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p && c->err && c->errlen)
		snprintf(c->err, c->errlen, "%s: out of memory", c->name);
	return p;
}

/* ---- lists ----------------------------------------------------------------------------- */

typedef int (*elem_fn)(struct ctx *c, json_t *e, size_t i, void *arg);

/* An array member of an object: its key, what to say when it is empty but must not be (NULL:
 * [] is fine), the size of the element its parser fills in (0: the parser stores it itself)
 * and that parser. */
struct list_spec {
	const char *key;
	const char *empty;
	size_t elem_size;
	elem_fn one;
};

/* Each element of array v (member `key` of the current value), path "key[i]" while parsed. */
static int each_elem(struct ctx *c, const char *key, json_t *v, elem_fn one, void *arg)
{
	json_t *e;
	size_t i;
	int rc = 0;

	push_key(c, key);
	json_array_foreach(v, i, e)
	{
		push_idx(c, i);
		rc = one(c, e, i, arg);
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
}

/* The list l of obj (absent: nothing happens). With l->elem_size, *arr gets a zeroed array of
 * one element per entry and *n its length before the elements are parsed. */
static int parse_list(struct ctx *c, json_t *obj, const struct list_spec *l, void **arr, size_t *n,
		      void *arg)
{
	json_t *v = member(obj, l->key);
	int rc;

	if (!v)
		return 0;
	if ((rc = want_array(c, l->key, v)))
		return rc;
	if (l->empty && json_array_size(v) == 0)
		return fail(c, l->key, false, "%s", l->empty);
	if (l->elem_size) {
		*arr = alloc_array(c, json_array_size(v), l->elem_size);
		if (!*arr)
			return -ENOMEM;
		*n = json_array_size(v);
	}
	return each_elem(c, l->key, v, l->one, arg);
}

/* ---- value syntax ---------------------------------------------------------------------- */

static int get_iscsi_name(struct ctx *c, json_t *obj, const char *key, char **out)
{
	const char *s, *why;
	char buf[300];
	int rc = get_str(c, obj, key, 1024, STR_REQUIRED | STR_PRINTABLE, &s);

	if (rc)
		return rc;
	why = cfg_iscsi_name_error(s);
	if (why)
		return fail(c, key, false, "\"%s\" is not a valid iSCSI name: %s",
			    esc(s, buf, sizeof(buf)), why);
	return dup_str(c, s, out);
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

static int get_size(struct ctx *c, json_t *obj, const char *key, uint64_t *out)
{
	json_t *v = member(obj, key);
	char buf[64];
	int rc;

	if (!v)
		return 0;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return fail(c, key, false, "must not be negative");
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return fail(c, key, false, "must be an integer or a string like \"10G\", not %s",
			    type_name(v));
	rc = parse_size(json_string_value(v), out);
	if (rc == -ERANGE)
		return fail(c, key, false, "\"%s\" is too large",
			    esc(json_string_value(v), buf, sizeof(buf)));
	if (rc)
		return fail(c, key, false,
			    "\"%s\" is not a size (a number of bytes, optionally followed by K, "
			    "M, G, T or P for powers of 1024)",
			    esc(json_string_value(v), buf, sizeof(buf)));
	return 0;
}

/* Pick a string from a fixed list (NULL-terminated); its index goes to *out. */
static int get_enum(struct ctx *c, json_t *obj, const char *key, const char *const *names,
		    const char *what, int *out)
{
	const char *s;
	char buf[64], list[128] = "";
	size_t o = 0;
	int rc = get_str(c, obj, key, 64, STR_PRINTABLE, &s);

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
	return fail(c, key, false, "unknown %s \"%s\" (use %s)", what, esc(s, buf, sizeof(buf)),
		    list);
}

/* ---- key tables ------------------------------------------------------------------------ */

/* Each key of a section is named once, in a table: its JSON name, its type, where its value
 * goes (an offset into the section's struct), its bounds and its default. check_keys() takes
 * the allowed names from the table (in its order: "allowed here" lists them so) and
 * parse_keys() reads the members in the same order. A key with rules of its own (a syntax,
 * an enum, a list, a sub-object) is K_FN: its parser gets the object and the section's base. */
enum key_type { K_BOOL, K_INT, K_U16, K_U32, K_U64, K_SIZE, K_STR, K_FN };

struct key {
	const char *name;
	enum key_type type;
	size_t off;	   /* of the value in the section's struct */
	uint64_t min, max; /* integers: the range; K_STR: max is the length limit */
	int flags;	   /* K_STR: enum str_flags */
	uint64_t def;	   /* integers and booleans: the default (key_defaults) */
	int (*parse)(struct ctx *c, json_t *obj, const struct key *k, void *base); /* K_FN */
};

/* at: (struct type, member) */
#define K_OF(st, f) offsetof(st, f)
#define KEY_BOOL(n, at, d)                                                                         \
	{                                                                                          \
		.name = n, .type = K_BOOL, .off = K_OF at, .def = d                                \
	}
#define KEY_NUM(n, t, at, lo, hi, d)                                                               \
	{                                                                                          \
		.name = n, .type = t, .off = K_OF at, .min = lo, .max = hi, .def = d               \
	}
#define KEY_SIZE(n, at, d)                                                                         \
	{                                                                                          \
		.name = n, .type = K_SIZE, .off = K_OF at, .def = d                                \
	}
#define KEY_STR(n, at, len, fl)                                                                    \
	{                                                                                          \
		.name = n, .type = K_STR, .off = K_OF at, .max = len, .flags = fl                  \
	}
#define KEY_FN(n, at, fn)                                                                          \
	{                                                                                          \
		.name = n, .type = K_FN, .off = K_OF at, .parse = fn                               \
	}
#define KEY_END                                                                                    \
	{                                                                                          \
		.name = NULL                                                                       \
	}

/* Reject members the table does not name. */
static int check_table(struct ctx *c, json_t *obj, const struct key *keys)
{
	return check_names(c, obj, &keys->name, sizeof(*keys));
}

/* Where key k's value is in the section's struct at base. */
static void *key_at(const struct key *k, void *base)
{
	return (char *)base + k->off;
}

/* Every integer and boolean key of the table at its default. */
static void key_defaults(const struct key *keys, void *base)
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

static int parse_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	void *p = (char *)base + k->off;
	uint32_t i;
	int rc;

	switch (k->type) {
	case K_BOOL:
		return get_bool(c, obj, k->name, p);
	case K_INT:
		i = (uint32_t) * (int *)p;
		rc = get_u32(c, obj, k->name, (uint32_t)k->min, (uint32_t)k->max, &i);
		*(int *)p = (int)i;
		return rc;
	case K_U16:
		return get_u16(c, obj, k->name, (uint16_t)k->min, (uint16_t)k->max, p);
	case K_U32:
		return get_u32(c, obj, k->name, (uint32_t)k->min, (uint32_t)k->max, p);
	case K_U64:
		return get_uint(c, obj, k->name, k->min, k->max, p);
	case K_SIZE:
		return get_size(c, obj, k->name, p);
	case K_STR:
		return get_strdup(c, obj, k->name, k->max, k->flags, p);
	case K_FN:
		return k->parse(c, obj, k, base);
	}
	return -EINVAL;
}

/* The members of obj the table names, in its order (absent ones keep their value). */
static int parse_keys(struct ctx *c, json_t *obj, const struct key *keys, void *base)
{
	int rc = 0;

	for (const struct key *k = keys; !rc && k->name; k++)
		rc = parse_key(c, obj, k, base);
	return rc;
}

/* An object: no keys but the table's, every KEY_PRESENT one there, then the members. */
static int parse_table(struct ctx *c, json_t *obj, const struct key *keys, void *base)
{
	int rc = check_table(c, obj, keys);

	for (const struct key *k = keys; !rc && k->name; k++)
		if ((k->flags & KEY_PRESENT) && !member(obj, k->name))
			rc = missing(c, k->name);
	return rc ? rc : parse_keys(c, obj, keys, base);
}

/* ---- CHAP ------------------------------------------------------------------------------ */

static int remember_secret(struct ctx *c, const char *secret, bool mutual)
{
	struct secret_ref *r;

	if (c->nsecrets == c->secrets_cap) {
		size_t cap = c->secrets_cap ? 2 * c->secrets_cap : 8;
		r = realloc(c->secrets, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		c->secrets = r;
		c->secrets_cap = cap;
	}
	r = &c->secrets[c->nsecrets++];
	r->secret = secret;
	r->mutual = mutual;
	r->depth = c->depth < MAX_DEPTH ? c->depth : MAX_DEPTH;
	memcpy(r->path, c->path, (size_t)r->depth * sizeof(r->path[0]));
	return 0;
}

/* {"user": "...", "secret": "..."}: both required. */
struct chap_arg {
	struct cfg_chap *out;
	bool mutual; /* the target's own credential */
};

static int chap_user(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct chap_arg *ca = base;

	return get_strdup(c, obj, k->name, 255, STR_REQUIRED | STR_PRINTABLE, &ca->out->user);
}

static int chap_secret(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct chap_arg *ca = base;
	int rc = get_strdup(c, obj, k->name, CHAP_MAX_SECRET_LEN, STR_REQUIRED, &ca->out->secret);

	if (rc)
		return rc;
	push_key(c, k->name);
	rc = remember_secret(c, ca->out->secret, ca->mutual);
	pop(c);
	return rc;
}

static const struct key chap_keys[] = {{.name = "user", .type = K_FN, .parse = chap_user},
				       {.name = "secret", .type = K_FN, .parse = chap_secret},
				       KEY_END};

static int parse_chap(struct ctx *c, json_t *parent, const char *key, bool mutual,
		      struct cfg_chap *out)
{
	struct chap_arg ca = {out, mutual};
	json_t *v = member(parent, key);
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, key, v)))
		return rc;
	push_key(c, key);
	rc = check_table(c, v, chap_keys);
	if (!rc && !member(v, "user") && !member(v, "secret"))
		rc = fail(c, NULL, false, "a CHAP credential needs \"user\" and \"secret\"");
	if (!rc && member(v, "user") && !member(v, "secret"))
		rc = fail(c, "secret", false,
			  "required when \"user\" is set (CHAP user without "
			  "secret)");
	if (!rc)
		rc = parse_keys(c, v, chap_keys, &ca);
	pop(c);
	return rc;
}

static void chap_algs_default(uint8_t *algs, int *n)
{
	algs[0] = CHAP_ALG_SHA3_256;
	algs[1] = CHAP_ALG_SHA256;
	algs[2] = CHAP_ALG_SHA1;
	algs[3] = CHAP_ALG_MD5;
	*n = 4;
}

struct algs_arg {
	uint8_t *algs;
	int *n;
};

static int one_chap_alg(struct ctx *c, json_t *e, size_t i, void *arg)
{
	struct algs_arg *aa = arg;
	const char *s = json_string_value(e);
	char buf[64];
	/* names only: chap_alg_parse() also takes the decimal CHAP_A codes, which the file
	   format does not */
	int a = s && !isdigit((unsigned char)s[0]) ? chap_alg_parse(s) : -EINVAL;

	if (i == 0)
		*aa->n = 0;
	if (!s)
		return fail(c, NULL, false, "must be a string, not %s", type_name(e));
	if (a < 0)
		return fail(c, NULL, false,
			    "unknown CHAP algorithm \"%s\" (md5, sha1, sha256, sha3-256)",
			    esc(s, buf, sizeof(buf)));
	if (memchr(aa->algs, a, (size_t)*aa->n))
		return fail(c, NULL, false, "\"%s\" is listed twice", s);
	aa->algs[(*aa->n)++] = (uint8_t)a;
	return 0;
}

static int parse_chap_algs(struct ctx *c, json_t *parent, const char *key, uint8_t *algs, int *n)
{
	const struct list_spec l = {key, "must not be empty (omit it for the default)", 0,
				    one_chap_alg};
	struct algs_arg aa = {algs, n};

	return parse_list(c, parent, &l, NULL, NULL, &aa);
}

/* RFC 7143 (12.1.3): a secret used to authenticate initiators must not also be used to
 * authenticate a target. Checked over the whole file once everything is parsed. */
static int check_secret_directions(struct ctx *c)
{
	for (size_t i = 0; i < c->nsecrets; i++) {
		const struct secret_ref *m = &c->secrets[i];
		if (!m->mutual)
			continue;
		for (size_t j = 0; j < c->nsecrets; j++) {
			const struct secret_ref *o = &c->secrets[j];
			char where[256];
			if (o->mutual || strcmp(o->secret, m->secret) != 0)
				continue;
			cfg_json_format_path(o->path, o->depth, where, sizeof(where));
			memcpy(c->path, m->path, (size_t)m->depth * sizeof(m->path[0]));
			c->depth = m->depth;
			return fail(c, NULL, false,
				    "the mutual CHAP secret equals the one-way secret at %s; RFC "
				    "7143 requires a different secret for each direction",
				    where);
		}
	}
	return 0;
}

/* ---- global ---------------------------------------------------------------------------- */

static const char *const digest_names[] = {"none", "prefer-none", "prefer-crc32c", "crc32c", NULL};

static int parse_digest(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	static const enum neg_digest_pref map[] = {NEG_DIGEST_NONE_ONLY, NEG_DIGEST_PREFER_NONE,
						   NEG_DIGEST_PREFER_CRC, NEG_DIGEST_CRC_ONLY};
	int i = -1;
	int rc = get_enum(c, obj, k->name, digest_names, "digest setting", &i);

	if (!rc && i >= 0)
		*(enum neg_digest_pref *)key_at(k, base) = map[i];
	return rc;
}

#define NEG(f) (struct neg_prefs, f)
static const struct key negotiation_keys[] = {
    KEY_NUM("max_recv_data_segment_length", K_U32, NEG(max_recv_dsl), NEG_LEN_MIN, NEG_LEN_MAX,
	    262144),
    KEY_NUM("max_burst_length", K_U32, NEG(sess.max_burst_length), NEG_LEN_MIN, NEG_LEN_MAX,
	    1048576),
    KEY_NUM("first_burst_length", K_U32, NEG(sess.first_burst_length), NEG_LEN_MIN, NEG_LEN_MAX,
	    262144),
    KEY_BOOL("immediate_data", NEG(sess.immediate_data), true),
    KEY_BOOL("initial_r2t", NEG(sess.initial_r2t), false),
    KEY_NUM("max_outstanding_r2t", K_U16, NEG(sess.max_outstanding_r2t), 1, 65535, 8),
    KEY_FN("header_digest", NEG(header_digest), parse_digest),
    KEY_FN("data_digest", NEG(data_digest), parse_digest),
    KEY_NUM("max_connections", K_U16, NEG(sess.max_connections), 1, 65535, 1),
    KEY_NUM("default_time2wait", K_U16, NEG(sess.default_time2wait), 0, 3600, 2),
    KEY_NUM("default_time2retain", K_U16, NEG(sess.default_time2retain), 0, 3600, 20),
    KEY_END};
#undef NEG

#define GLOBAL(f) (struct cfg_global, f)

static int parse_negotiation(struct ctx *c, json_t *g, const struct key *k, void *base)
{
	struct neg_prefs *p = key_at(k, base);
	struct iscsi_sess_params *s = &p->sess;
	json_t *v = member(g, k->name);
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, k->name, v)))
		return rc;
	push_key(c, k->name);
	if ((rc = parse_table(c, v, negotiation_keys, p)))
		goto out;
	if (s->first_burst_length > s->max_burst_length)
		rc =
		    fail(c, "first_burst_length", false, "%u must not exceed max_burst_length (%u)",
			 s->first_burst_length, s->max_burst_length);
out:
	pop(c);
	return rc;
}

static int chap_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	return parse_chap(c, obj, k->name, false, key_at(k, base));
}

static int mutual_chap_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	return parse_chap(c, obj, k->name, true, key_at(k, base));
}

static int discovery_algs_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_global *g = base;

	return parse_chap_algs(c, obj, k->name, g->discovery_chap_algs, &g->ndiscovery_chap_algs);
}

static const struct key discovery_keys[] = {
    KEY_FN("chap", GLOBAL(discovery_chap), chap_key),
    KEY_FN("mutual_chap", GLOBAL(discovery_mutual_chap), mutual_chap_key),
    /* default: true when "chap" is set */
    KEY_BOOL("chap_required", GLOBAL(discovery_chap_required), false),
    KEY_FN("chap_algorithms", GLOBAL(discovery_chap_algs), discovery_algs_key), KEY_END};

static int parse_discovery(struct ctx *c, json_t *g, const struct key *k, void *base)
{
	struct cfg_global *out = base;
	json_t *v = member(g, k->name);
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, k->name, v)))
		return rc;
	push_key(c, k->name);
	out->discovery_chap_required = member(v, "chap") != NULL;
	if ((rc = parse_table(c, v, discovery_keys, out)))
		goto out;
	if (out->discovery_mutual_chap.secret && !out->discovery_chap.secret)
		rc = fail(c, "mutual_chap", false,
			  "mutual CHAP needs one-way \"chap\" as well (the initiator "
			  "authenticates first)");
	else if (out->discovery_chap_required && !out->discovery_chap.secret)
		rc = fail(c, "chap_required", false,
			  "is true but no discovery \"chap\" credential is configured");
out:
	pop(c);
	return rc;
}

static int parse_log_level(struct ctx *c, json_t *g, const struct key *k, void *base)
{
	int *out = key_at(k, base);
	const char *s;
	char buf[64];
	int rc = get_str(c, g, k->name, 64, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	*out = ix_log_level_parse(s);
	if (*out < 0)
		return fail(c, k->name, false,
			    "unknown log level \"%s\" (use error, warn, info or debug)",
			    esc(s, buf, sizeof(buf)));
	return 0;
}

/* A directory for state that outlives the process: an absolute path (it must exist when a LU
 * needs it; scsi_lu_new() checks). */
static int get_state_dir(struct ctx *c, json_t *obj, char **out)
{
	const char *s;
	int rc = get_str(c, obj, "state_dir", 4000, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	if (s[0] != '/')
		return fail(c, "state_dir", false, "must be an absolute path");
	return dup_str(c, s, out);
}

static int state_dir_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	return get_state_dir(c, obj, key_at(k, base));
}

/* "ADDR:PORT" or "[V6ADDR]:PORT" with a numeric address (the metrics endpoint). */
static int get_metrics_listen(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	char host[ADDR_HOST_MAX];
	unsigned char bin[16];
	uint16_t port = 0;
	const char *s;
	int rc = get_str(c, obj, k->name, 80, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	if (addr_parse_portal(s, 0, host, sizeof(host), &port, NULL) < 0 || port == 0 ||
	    (inet_pton(AF_INET, host, bin) != 1 && inet_pton(AF_INET6, host, bin) != 1))
		return fail(c, k->name, false,
			    "\"%s\" is not ADDRESS:PORT with a numeric address (\"[::1]:9117\")",
			    s);
	return dup_str(c, s, key_at(k, base));
}

static const struct key global_keys[] = {
    KEY_NUM("threads", K_INT, GLOBAL(threads), 0, 256, 0),
    KEY_FN("log_level", GLOBAL(log_level), parse_log_level),
    KEY_NUM("login_timeout_ms", K_U32, GLOBAL(login_timeout_ms), 1, MAX_TIMEOUT_MS, 15000),
    KEY_NUM("nop_interval_ms", K_U32, GLOBAL(nop_interval_ms), 0, MAX_TIMEOUT_MS, 15000),
    KEY_NUM("nop_timeout_ms", K_U32, GLOBAL(nop_timeout_ms), 1, MAX_TIMEOUT_MS, 30000),
    /* sent as Parameter3 of an Async Message, in whole seconds */
    KEY_NUM("logout_timeout_ms", K_U32, GLOBAL(logout_timeout_ms), 1000, MAX_TIMEOUT_MS, 5000),
    KEY_NUM("cmdsn_depth", K_U32, GLOBAL(cmdsn_depth), 1, 65536, 128),
    /* a session needs a TSIH, a non-zero 16-bit number */
    KEY_NUM("max_sessions", K_U32, GLOBAL(max_sessions), 0, 65535, 1024),
    KEY_NUM("max_sessions_per_initiator", K_U32, GLOBAL(max_sessions_per_initiator), 0, 65535, 64),
    KEY_NUM("max_connections", K_U32, GLOBAL(max_connections), 1, 1u << 20, 2048),
    KEY_NUM("max_pending_logins", K_U32, GLOBAL(max_pending_logins), 1, 65535, 128),
    KEY_NUM("discovery_idle_timeout_ms", K_U32, GLOBAL(discovery_idle_timeout_ms), 0,
	    MAX_TIMEOUT_MS, 30000),
    /* range checked after the section: 64M to 1T */
    KEY_SIZE("max_connection_memory", GLOBAL(max_connection_memory), 128ull << 20),
    KEY_FN("negotiation", GLOBAL(neg), parse_negotiation),
    KEY_FN("discovery", GLOBAL(discovery_chap), parse_discovery),
    KEY_STR("mgmt_socket", GLOBAL(mgmt_socket), sizeof(((struct sockaddr_un *)0)->sun_path) - 1,
	    STR_PRINTABLE),
    KEY_STR("mgmt_group", GLOBAL(mgmt_group), 32, STR_PRINTABLE),
    KEY_FN("metrics_listen", GLOBAL(metrics_listen), get_metrics_listen),
    KEY_FN("state_dir", GLOBAL(state_dir), state_dir_key),
    /* off: polling pays only on uncontended CPUs (docs/perf.md) */
    KEY_NUM("poll_us", K_U32, GLOBAL(poll_us), 0, 10000, 50), KEY_END};
#undef GLOBAL

static void global_defaults(struct cfg_global *g)
{
	g->log_level = LOG_INFO;
	key_defaults(global_keys, g);
	neg_prefs_default(&g->neg);
	key_defaults(negotiation_keys, &g->neg);
	g->neg.header_digest = NEG_DIGEST_PREFER_NONE;
	g->neg.data_digest = NEG_DIGEST_PREFER_NONE;
	g->neg.offer_all = false;
	chap_algs_default(g->discovery_chap_algs, &g->ndiscovery_chap_algs);
}

static int parse_global(struct ctx *c, json_t *root, const struct key *k, void *base)
{
	struct cfg_global *g = key_at(k, base);
	json_t *v = member(root, k->name);
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, k->name, v)))
		return rc;
	push_key(c, k->name);
	if ((rc = parse_table(c, v, global_keys, g)))
		goto out;
	/* one command of the largest size the target serves must fit */
	if (g->max_connection_memory < (64ull << 20) || g->max_connection_memory > (1ull << 40))
		rc = fail(c, "max_connection_memory", false,
			  "%llu bytes is out of range (64M to 1T)",
			  (unsigned long long)g->max_connection_memory);
out:
	pop(c);
	return rc;
}

/* ---- portals --------------------------------------------------------------------------- */

struct addr {
	int family;
	unsigned char bytes[16];
};

static bool parse_addr(const char *s, struct addr *a)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->bytes) == 1) {
		a->family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, s, a->bytes) == 1) {
		a->family = AF_INET6;
		return true;
	}
	return false;
}

static bool addr_is_any(const struct addr *a)
{
	static const unsigned char zero[16];
	return memcmp(a->bytes, zero, a->family == AF_INET ? 4 : 16) == 0;
}

static int one_transport(struct ctx *c, json_t *e, size_t i, void *arg)
{
	struct cfg_portal *seen = arg;
	const char *s = json_string_value(e);
	bool *flag = NULL;
	char buf[64];

	(void)i;
	if (s && strcmp(s, "tcp") == 0)
		flag = &seen->tcp;
	else if (s && strcmp(s, "iser") == 0)
		flag = &seen->iser;
	if (!s)
		return fail(c, NULL, false, "must be a string, not %s", type_name(e));
	if (!flag)
		return fail(c, NULL, false, "unknown transport \"%s\" (tcp or iser)",
			    esc(s, buf, sizeof(buf)));
	if (*flag)
		return fail(c, NULL, false, "\"%s\" is listed twice", s);
	*flag = true;
	return 0;
}

static int parse_transports(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec transports = {k->name, "must list \"tcp\", \"iser\" or both", 0,
					     one_transport};
	struct cfg_portal *p = base, seen = {.tcp = false};
	int rc;

	p->tcp = true;
	p->iser = false;
	if ((rc = parse_list(c, obj, &transports, NULL, NULL, &seen)) || !member(obj, k->name))
		return rc;
	p->tcp = seen.tcp;
	p->iser = seen.iser;
	return 0;
}

static int portal_address(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_portal *p = base;
	const char *addr;
	struct addr a;
	char buf[128];
	int rc;

	if ((rc = get_str(c, obj, k->name, 64, STR_REQUIRED | STR_PRINTABLE, &addr)))
		return rc;
	if (!p->name && (rc = dup_str(c, "default", &p->name)))
		return rc;
	if (!parse_addr(addr, &a))
		return fail(c, k->name, false,
			    "\"%s\" is not an IPv4 or IPv6 address (no brackets or host names; "
			    "\"0.0.0.0\" or \"::\" listen on every address)",
			    esc(addr, buf, sizeof(buf)));
	return dup_str(c, addr, &p->address);
}

#define PORTAL(f) (struct cfg_portal, f)
static const struct key portal_keys[] = {
    KEY_STR("name", PORTAL(name), 64, STR_PRINTABLE), /* default "default" */
    KEY_FN("address", PORTAL(address), portal_address),
    KEY_NUM("port", K_U16, PORTAL(port), 1, 65535, 3260),
    KEY_NUM("tpgt", K_U16, PORTAL(tpgt), 0, 65535, 1),
    KEY_FN("transports", PORTAL(tcp), parse_transports), /* default ["tcp"] */
    KEY_END};
#undef PORTAL

/* Two listeners that cannot both bind: same port, same family, and the same address or one
 * of them the wildcard. */
static bool portals_clash(const struct cfg_portal *a, const struct cfg_portal *b)
{
	struct addr x, y;

	if (a->port != b->port || !parse_addr(a->address, &x) || !parse_addr(b->address, &y) ||
	    x.family != y.family)
		return false;
	return addr_is_any(&x) || addr_is_any(&y) || memcmp(x.bytes, y.bytes, 16) == 0;
}

static int parse_portal(struct ctx *c, json_t *v, struct ix_config *cfg, size_t idx)
{
	struct cfg_portal *p = &cfg->portals[idx];
	char buf[128];
	int rc;

	key_defaults(portal_keys, p);
	if ((rc = want_object(c, NULL, v)) || (rc = parse_table(c, v, portal_keys, p)))
		return rc;
	for (size_t i = 0; i < idx; i++) {
		const struct cfg_portal *q = &cfg->portals[i];
		if (strcmp(q->name, p->name) == 0)
			return fail(c, "name", false,
				    "portal name \"%s\" is already used by "
				    "portals[%zu]",
				    esc(p->name, buf, sizeof(buf)), i);
		if (portals_clash(p, q))
			return fail(c, "address", false,
				    "%s port %u overlaps portals[%zu] (%s port %u): both cannot "
				    "listen",
				    p->address, p->port, i, q->address, q->port);
	}
	return 0;
}

static int one_portal(struct ctx *c, json_t *v, size_t i, void *cfg)
{
	return parse_portal(c, v, cfg, i);
}

static int default_portal(struct ctx *c, struct ix_config *cfg)
{
	int rc;

	cfg->portals = alloc_array(c, 1, sizeof(*cfg->portals));
	if (!cfg->portals)
		return -ENOMEM;
	cfg->nportals = 1;
	cfg->portals[0] = (struct cfg_portal){.port = 3260, .tpgt = 1, .tcp = true};
	if ((rc = dup_str(c, "default", &cfg->portals[0].name)))
		return rc;
	return dup_str(c, "127.0.0.1", &cfg->portals[0].address);
}

static int parse_portals(struct ctx *c, json_t *root, const struct key *k, void *base)
{
	const struct list_spec portals = {
	    k->name, "must list at least one portal (omit it for 127.0.0.1:3260)",
	    sizeof(struct cfg_portal), one_portal};
	struct ix_config *cfg = base;

	if (!member(root, k->name))
		return default_portal(c, cfg);
	return parse_list(c, root, &portals, (void **)&cfg->portals, &cfg->nportals, cfg);
}

/* ---- LUNs ------------------------------------------------------------------------------ */

static const char *const backend_names[] = {"ram", "file", "block", "error", "rbd", NULL};

/* "rbd.pr": the timeouts of the shared persistent reservation store (pr_store "rados"; checked
 * in parse_pr_store once that is known). Absent keys stay 0: the store's defaults. */
#define PRR(f) (struct bs_rbd_pr_cfg, f)
static const struct key rbd_pr_keys[] = {
    KEY_NUM("notify_timeout_s", K_U32, PRR(notify_timeout_s), 1, 60, 0),
    KEY_NUM("reset_wait_s", K_U32, PRR(reset_wait_s), 1, 10, 0),
    KEY_NUM("retries", K_U32, PRR(retries), 1, 1000, 0),
    KEY_NUM("blocklist_s", K_U32, PRR(blocklist_s), 60, 604800, 0), KEY_END};
#undef PRR

/* The "rbd" section is parsed with the LU's bs_rbd_cfg as its base; "pr" goes next to it. */
static int parse_rbd_pr(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct scsi_lu_cfg *lu =
	    (struct scsi_lu_cfg *)(void *)((char *)base - offsetof(struct scsi_lu_cfg, bs.rbd));
	json_t *o = member(obj, k->name);
	int rc;

	if (!o)
		return 0;
	if ((rc = want_object(c, k->name, o)))
		return rc;
	push_key(c, k->name);
	rc = parse_table(c, o, rbd_pr_keys, &lu->bs.rbd.pr);
	pop(c);
	return rc;
}

/* "rbd" of a LUN with backend "rbd". RADOS pool and namespace names, RBD image names:
 * printable, no '/' or '@' (checked after the table). */
#define RBD(f) (struct bs_rbd_cfg, f)
static const struct key rbd_keys[] = {
    KEY_STR("pool", RBD(pool), 255, STR_PRINTABLE | KEY_PRESENT),
    KEY_STR("image", RBD(image), 255, STR_PRINTABLE | KEY_PRESENT),
    KEY_STR("namespace", RBD(ns), 255, STR_PRINTABLE),
    KEY_STR("conf", RBD(conf), 4095, STR_PRINTABLE),
    KEY_STR("client", RBD(client), 255, STR_PRINTABLE),
    KEY_STR("keyring", RBD(keyring), 4095, STR_PRINTABLE),
    KEY_NUM("osd_op_timeout_s", K_U32, RBD(osd_op_timeout_s), 1, 3600, 0),
    KEY_NUM("connect_timeout_s", K_U32, RBD(connect_timeout_s), 1, 3600, 0),
    KEY_BOOL("exclusive_lock", RBD(exclusive_lock), false),
    KEY_NUM("lock_check_ms", K_U32, RBD(lock_check_ms), 100, 60000, 1000),
    KEY_NUM("handover_timeout_ms", K_U32, RBD(handover_timeout_ms), 500, 60000, 5000),
    KEY_BOOL("start_offline", RBD(start_offline), true),
    KEY_NUM("rejoin_after_ms", K_U32, RBD(rejoin_after_ms), 0, 3600000, 5000),
    KEY_FN("pr", RBD(pool), parse_rbd_pr),
    KEY_END};
#undef RBD

static int parse_rbd(struct ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	struct bs_rbd_cfg *r = &lu->bs.rbd;
	json_t *o = member(v, "rbd");
	int rc;

	if (!o) {
		if (lu->backend == BS_TYPE_RBD)
			return fail(c, "rbd", false,
				    "required for an rbd LUN: {\"pool\": ..., \"image\": ...}");
		return 0;
	}
	if (lu->backend != BS_TYPE_RBD)
		return fail(c, "rbd", true, "only for backend \"rbd\"");
	key_defaults(rbd_keys, r); /* start_offline true, lock_check_ms 1000, handover_timeout_ms
				    5000, rejoin_after_ms 5000: configuration.md */
	if ((rc = want_object(c, "rbd", o)))
		return rc;
	push_key(c, "rbd");
	if ((rc = parse_table(c, o, rbd_keys, r)))
		goto out;
	{
		const char *names[] = {r->pool, r->image, r->ns};
		const char *keys3[] = {"pool", "image", "namespace"};

		for (int i = 0; i < 3; i++)
			if (names[i] && (!names[i][0] || strpbrk(names[i], "/@"))) {
				rc = fail(c, keys3[i], false, "must be non-empty, without '/' or '@'");
				goto out;
			}
	}
	if (r->conf && r->conf[0] != '/')
		rc = fail(c, "conf", false, "must be an absolute path");
	else if (r->keyring && r->keyring[0] != '/')
		rc = fail(c, "keyring", false, "must be an absolute path");
	else if (r->client && strncmp(r->client, "client.", 7) == 0)
		rc = fail(c, "client", false, "the id without \"client.\" (e.g. \"admin\")");
out:
	pop(c);
	return rc;
}

static int parse_naa_id(struct ctx *c, json_t *v, uint64_t *out)
{
	const char *s, *h;
	char buf[64];
	size_t n;
	int rc = get_str(c, v, "naa_id", 18, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	h = strncmp(s, "0x", 2) == 0 ? s + 2 : s;
	n = strlen(h);
	if (n > 16)
		n = 0;
	*out = 0;
	for (size_t i = 0; i < n; i++) {
		int d = hex_digit(h[i]);
		if (d < 0)
			n = 0;
		else
			*out = *out << 4 | (uint64_t)d;
	}
	if (n == 0 || *out == 0)
		return fail(c, "naa_id", false,
			    "\"%s\" is not a non-zero hex number of up to 16 digits",
			    esc(s, buf, sizeof(buf)));
	return 0;
}

static bool str_eq0(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Conflicts with LUNs parsed before this one, anywhere in the file. */
static int check_lun_conflicts(struct ctx *c, const struct ix_config *cfg, size_t ti,
			       const struct cfg_target *t, size_t li)
{
	const struct cfg_lun *l = &t->luns[li];

	for (size_t i = 0; i < li; i++)
		if (t->luns[i].lun == l->lun)
			return fail(c, "lun", false, "LUN %u is already defined by luns[%zu]",
				    l->lun, i);
	for (size_t a = 0; a <= ti; a++) {
		const struct cfg_target *o = &cfg->targets[a];
		for (size_t b = 0; b < (a == ti ? li : o->nluns); b++) {
			const struct scsi_lu_cfg *x = &o->luns[b].lu;
			if (l->lu.path && x->path && strcmp(l->lu.path, x->path) == 0 &&
			    !(l->lu.readonly && x->readonly))
				return fail(c, "path", false,
					    "\"%s\" is also used by targets[%zu].luns[%zu]; "
					    "sharing a backing store needs readonly on both",
					    l->lu.path, a, b);
			if (l->lu.backend == BS_TYPE_RBD && x->backend == BS_TYPE_RBD &&
			    strcmp(l->lu.bs.rbd.pool, x->bs.rbd.pool) == 0 &&
			    strcmp(l->lu.bs.rbd.image, x->bs.rbd.image) == 0 &&
			    str_eq0(l->lu.bs.rbd.ns, x->bs.rbd.ns) &&
			    str_eq0(l->lu.bs.rbd.conf, x->bs.rbd.conf) &&
			    !(l->lu.readonly && x->readonly))
				return fail(c, "rbd", false,
					    "image %s/%s is also used by targets[%zu].luns[%zu]; "
					    "sharing an image needs readonly on both",
					    l->lu.bs.rbd.pool, l->lu.bs.rbd.image, a, b);
			if (l->lu.naa_id && x->naa_id == l->lu.naa_id)
				return fail(c, "naa_id", false,
					    "is also used by targets[%zu].luns[%zu]", a, b);
		}
	}
	return 0;
}

static int parse_lun_backend(struct ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	const char *path;
	int rc;

	if ((rc = get_str(c, v, "path", 4095, STR_PRINTABLE, &path)))
		return rc;
	if (lu->block_size != 512 && lu->block_size != 4096)
		return fail(c, "block_size", false, "%u is not supported: use 512 or 4096",
			    lu->block_size);
	if (member(v, "errors") && lu->backend != BS_TYPE_ERROR)
		return fail(c, "errors", true, "only for backend \"error\"");
	if ((rc = parse_rbd(c, v, lu)))
		return rc;
	if (lu->backend == BS_TYPE_RBD) {
		if (!ha_have_rbd())
			return fail(c, "backend", false,
				    "this ix-target was built without the rbd backend "
				    "(meson -Drbd=disabled)");
		if (path)
			return fail(c, "path", false, "an rbd LUN has no path (see \"rbd\")");
		/* size: taken from the image; when given, it must match */
	} else if (lu->backend == BS_TYPE_RAM || lu->backend == BS_TYPE_ERROR) {
		if (path)
			return fail(c, "path", false, "a RAM LUN has no path");
		if (!member(v, "size"))
			return fail(c, "size", false, "required for a RAM LUN");
		if (lu->size_bytes == 0)
			return fail(c, "size", false, "a RAM LUN needs a size above 0");
	} else {
		if (!path)
			return fail(c, "path", false, "required for a %s LUN",
				    backend_names[lu->backend]);
		if (path[0] != '/')
			return fail(c, "path", false, "must be an absolute path");
		if ((rc = dup_str(c, path, (char **)&lu->path)))
			return rc;
	}
	if (lu->size_bytes % lu->block_size)
		return fail(c, "size", false, "%llu bytes is not a multiple of block_size (%u)",
			    (unsigned long long)lu->size_bytes, lu->block_size);
	return 0;
}

/* physical_block_size: what READ CAPACITY(16) and the Block Limits page advertise instead of
 * what the backend found. A power-of-two multiple of block_size, at most 2^15 of them. */
static int parse_phys_block(struct ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	uint32_t p = 0;
	int rc = get_u32(c, v, "physical_block_size", 0, UINT32_MAX, &p);

	if (rc || !member(v, "physical_block_size"))
		return rc;
	if (p < lu->block_size || (p & (p - 1)) || p / lu->block_size > (1u << 15))
		return fail(c, "physical_block_size", false,
			    "%u is not a power-of-two multiple of block_size (%u), at most %u", p,
			    lu->block_size, lu->block_size << 15);
	lu->phys_block_size = p;
	return 0;
}

/* ---- test-only features (docs/configuration.md, "testing") ---------------------------- */

#define MAX_ERR_RULES 16

#define ERR_OP_ANY (BS_ERR_OP_READ | BS_ERR_OP_WRITE | BS_ERR_OP_FLUSH)

/* "op": read, write, flush or any (the default) */
static int err_rule_op(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	static const char *const ops[] = {"read", "write", "flush", "any", NULL};
	int op = -1;
	int rc = get_enum(c, obj, k->name, ops, "operation", &op);

	if (!rc && op >= 0)
		*(uint8_t *)key_at(k, base) = op == 3 ? ERR_OP_ANY : (uint8_t)(1u << op);
	return rc;
}

/* "error": none, eio (the default) or enospc */
static int err_rule_error(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	static const char *const errs[] = {"none", "eio", "enospc", NULL};
	static const int err_values[] = {0, -EIO, -ENOSPC};
	int e = -1;
	int rc = get_enum(c, obj, k->name, errs, "error", &e);

	if (!rc && e >= 0)
		*(int *)key_at(k, base) = err_values[e];
	return rc;
}

#define RULE(f) (struct bs_err_rule, f)
static const struct key err_rule_keys[] = {
    KEY_FN("op", RULE(ops), err_rule_op),
    KEY_FN("error", RULE(error), err_rule_error),
    KEY_NUM("lba", K_U64, RULE(lba), 0, UINT64_MAX >> 16, 0),
    KEY_NUM("blocks", K_U64, RULE(blocks), 0, UINT64_MAX >> 16, 0),
    KEY_NUM("every", K_U32, RULE(every), 0, UINT32_MAX, 0),
    KEY_NUM("delay_ms", K_U32, RULE(delay_ms), 0, MAX_TIMEOUT_MS, 0),
    KEY_END};
#undef RULE

static int parse_err_rule(struct ctx *c, json_t *v, size_t i, void *arg)
{
	struct bs_err_rule *r = *(struct bs_err_rule **)arg + i;
	int rc;

	r->ops = ERR_OP_ANY;
	r->error = -EIO;
	if ((rc = want_object(c, NULL, v)) || (rc = parse_table(c, v, err_rule_keys, r)))
		return rc;
	if (!r->error && !r->delay_ms)
		return fail(c, "error", false, "\"none\" without delay_ms does nothing");
	return 0;
}

static int parse_err_rules(struct ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	json_t *a = member(v, "errors");
	void *rules = NULL;
	size_t n = 0;
	int rc;

	if (a && json_is_array(a) && json_array_size(a) > MAX_ERR_RULES)
		return fail(c, "errors", false, "at most %d rules", MAX_ERR_RULES);
	static const struct list_spec errors = {"errors", NULL, sizeof(struct bs_err_rule),
						parse_err_rule};

	rc = parse_list(c, v, &errors, &rules, &n, &rules);
	lu->err_rules = rules; /* also on failure: cfg_free() frees it */
	lu->n_err_rules = (uint32_t)n;
	return rc;
}

/* transport_faults.opcodes: a bit per opcode in *(uint64_t *)arg */
static int one_opcode(struct ctx *c, json_t *o, size_t i, void *arg)
{
	(void)i;
	if (!json_is_integer(o) || json_integer_value(o) < 0 || json_integer_value(o) > 63)
		return fail(c, NULL, false, "must be an opcode number from 0 to 63");
	*(uint64_t *)arg |= 1ull << json_integer_value(o);
	return 0;
}

static int fault_opcodes(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec opcodes = {k->name, NULL, 0, one_opcode};

	return parse_list(c, obj, &opcodes, NULL, NULL, key_at(k, base));
}

#define FAULT(f) (struct fault_cfg, f)
static const struct key fault_keys[] = {
    KEY_NUM("seed", K_U64, FAULT(seed), 0, UINT64_MAX >> 1, 0),
    KEY_NUM("drop_ppm", K_U32, FAULT(drop_ppm), 0, FAULT_PPM, 0),
    KEY_NUM("delay_ppm", K_U32, FAULT(delay_ppm), 0, FAULT_PPM, 0),
    KEY_NUM("delay_ms", K_U32, FAULT(delay_ms), 1, MAX_TIMEOUT_MS, 100),
    KEY_NUM("duplicate_ppm", K_U32, FAULT(duplicate_ppm), 0, FAULT_PPM, 0),
    KEY_NUM("corrupt_ppm", K_U32, FAULT(corrupt_ppm), 0, FAULT_PPM, 0),
    KEY_NUM("truncate_ppm", K_U32, FAULT(truncate_ppm), 0, FAULT_PPM, 0),
    KEY_NUM("reset_after_bytes", K_U64, FAULT(reset_after_bytes), 0, UINT64_MAX >> 1, 0),
    KEY_FN("opcodes", FAULT(opcodes), fault_opcodes), /* default: all */
    KEY_BOOL("during_login", FAULT(during_login), false),
    KEY_END};
#undef FAULT

static int transport_faults(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_testing *t = base;
	json_t *f = member(obj, k->name);
	int rc;

	if (!f)
		return 0;
	t->transport_faults = true;
	key_defaults(fault_keys, &t->faults);
	if ((rc = want_object(c, k->name, f)))
		return rc;
	push_key(c, k->name);
	rc = parse_table(c, f, fault_keys, &t->faults);
	pop(c);
	return rc;
}

static const struct key testing_keys[] = {
    KEY_FN("transport_faults", (struct cfg_testing, faults), transport_faults), KEY_END};

static int parse_testing(struct ctx *c, json_t *root, const struct key *k, void *base)
{
	struct ix_config *cfg = base;
	json_t *v = member(root, k->name);
	int rc;

	if (!v)
		return 0;
	cfg->test_features = true;
	if ((rc = want_object(c, k->name, v)))
		return rc;
	push_key(c, k->name);
	rc = parse_table(c, v, testing_keys, &cfg->testing);
	pop(c);
	return rc;
}

/* "pr_store": "file" (default) or "rados" (an RBD LUN exported by several gateways). */
static int parse_pr_store(struct ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	static const char *const names[] = {"file", "rados", NULL};
	int store = SCSI_PR_STORE_FILE, rc;

	if (member(v, "pr_store") && (rc = get_enum(c, v, "pr_store", names, "pr_store", &store)))
		return rc;
	lu->pr_store = (enum scsi_pr_store)store;
	if (lu->pr_store == SCSI_PR_STORE_SHARED && lu->backend != BS_TYPE_RBD)
		return fail(c, "pr_store", false, "\"rados\" is for LUNs with backend \"rbd\"");
	if (lu->pr_store == SCSI_PR_STORE_SHARED && lu->no_medium)
		return fail(c, "pr_store", false, "\"rados\" needs the image: not with no_medium");
	if (lu->pr_store != SCSI_PR_STORE_SHARED && member(member(v, "rbd"), "pr")) {
		push_key(c, "rbd");
		rc = fail(c, "pr", true, "only with \"pr_store\": \"rados\"");
		pop(c);
		return rc;
	}
	return 0;
}

static int parse_lun(struct ctx *c, json_t *v, struct ix_config *cfg, size_t ti, size_t li)
{
	static const char *const keys[] = {
	    "lun",	   "backend",	"path",	  "size",    "block_size", "readonly", "thin",
	    "write_cache", "no_medium", "vendor", "product", "serial",	   "naa_id",   "removable", "offline",
	    "state_dir",   "sanitize_rate", "physical_block_size", "errors", "rbd", "pr_store", NULL};
	struct cfg_target *t = &cfg->targets[ti];
	struct cfg_lun *l = &t->luns[li];
	struct scsi_lu_cfg *lu = &l->lu;
	int backend = -1;
	int rc;

	lu->block_size = 512;
	lu->target_name = t->name;
	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)))
		return rc;
	if (!member(v, "lun"))
		return missing(c, "lun");
	if (!member(v, "backend"))
		return missing(c, "backend");
	if ((rc = get_u32(c, v, "lun", 0, SCSI_MAX_LUNS - 1, &l->lun)) ||
	    (rc = get_enum(c, v, "backend", backend_names, "backend", &backend)))
		return rc;
	lu->lun = l->lun;
	lu->backend = (enum bs_type)backend;
	if ((rc = get_size(c, v, "size", &lu->size_bytes)) ||
	    (rc = get_u32(c, v, "block_size", 0, UINT32_MAX, &lu->block_size)) ||
	    (rc = parse_lun_backend(c, v, lu)) || (rc = parse_phys_block(c, v, lu)) ||
	    (rc = get_bool(c, v, "readonly", &lu->readonly)) ||
	    (rc = get_bool(c, v, "thin", &lu->thin)) ||
	    (rc = get_bool(c, v, "write_cache", &lu->write_cache)) ||
	    (rc = get_bool(c, v, "no_medium", &lu->no_medium)) ||
	    (rc = get_bool(c, v, "removable", &lu->removable)) ||
	    (rc = get_bool(c, v, "offline", &lu->offline)) ||
	    (rc = get_size(c, v, "sanitize_rate", &lu->sanitize_rate)) ||
	    (rc = get_state_dir(c, v, (char **)&lu->state_dir)) ||
	    (!lu->state_dir && (rc = dup_str(c, cfg->global.state_dir, (char **)&lu->state_dir))) ||
	    (rc = get_strdup(c, v, "vendor", 8, STR_ASCII, (char **)&lu->vendor)) ||
	    (rc = get_strdup(c, v, "product", 16, STR_ASCII, (char **)&lu->product)) ||
	    (rc = get_strdup(c, v, "serial", 64, STR_ASCII, (char **)&lu->serial)) ||
	    (rc = parse_naa_id(c, v, &lu->naa_id)) || (rc = parse_err_rules(c, v, lu)) ||
	    (rc = parse_pr_store(c, v, lu)))
		return rc;
	if (lu->backend == BS_TYPE_ERROR)
		cfg->test_features = true;
	return check_lun_conflicts(c, cfg, ti, t, li);
}

/* ---- targets --------------------------------------------------------------------------- */

/* What the parsers of a target's members need: the target is cfg->targets[ti]. */
struct tgt_arg {
	struct ix_config *cfg;
	size_t ti;
};

static int one_target_portal(struct ctx *c, json_t *e, size_t i, void *arg)
{
	struct tgt_arg *ta = arg;
	struct cfg_target *t = &ta->cfg->targets[ta->ti];
	const char *s = json_string_value(e);
	char buf[128];

	if (!s)
		return fail(c, NULL, false, "must be a portal name, not %s", type_name(e));
	if (!cfg_find_portal(ta->cfg, s))
		return fail(c, NULL, false, "no portal is named \"%s\"", esc(s, buf, sizeof(buf)));
	for (size_t j = 0; j < i; j++)
		if (strcmp(t->portals[j], s) == 0)
			return fail(c, NULL, false, "\"%s\" is listed twice", s);
	return dup_str(c, s, &t->portals[i]);
}

/* One entry of an ACL's "luns": {"lun": M, "target_lun": N} shows the target's LUN N to this
 * initiator as LUN M (default M = N). */
static int parse_acl_lun(struct ctx *c, json_t *v, size_t i, void *arg)
{
	static const char *const keys[] = {"lun", "target_lun", NULL};
	struct cfg_target *t = ((void **)arg)[0];
	struct cfg_acl *a = ((void **)arg)[1];
	struct cfg_acl_lun *l = &a->luns[i];
	bool found = false;
	int rc;

	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_u32(c, v, "target_lun", 0, SCSI_MAX_LUNS - 1, &l->target_lun)))
		return rc;
	if (!member(v, "target_lun"))
		return fail(c, "target_lun", false, "required but missing");
	l->lun = l->target_lun;
	if ((rc = get_u32(c, v, "lun", 0, SCSI_MAX_LUNS - 1, &l->lun)))
		return rc;
	for (size_t k = 0; k < t->nluns; k++)
		found = found || t->luns[k].lun == l->target_lun;
	if (!found)
		return fail(c, "target_lun", false, "the target has no LUN %u", l->target_lun);
	for (size_t k = 0; k < i; k++) {
		if (a->luns[k].lun == l->lun)
			return fail(c, "lun", false, "LUN %u is already mapped by luns[%zu]",
				    l->lun, k);
		if (a->luns[k].target_lun == l->target_lun)
			return fail(c, "target_lun", false, "LUN %u is already shown by luns[%zu]",
				    l->target_lun, k);
	}
	return 0;
}

static int parse_acl_luns(struct ctx *c, json_t *v, struct cfg_target *t, struct cfg_acl *a)
{
	void *arg[2] = {t, a};

	const struct list_spec luns = {"luns", NULL, sizeof(*a->luns), parse_acl_lun};

	a->masked = member(v, "luns") != NULL;
	return parse_list(c, v, &luns, (void **)&a->luns, &a->nluns, arg);
}

static int iscsi_name_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	return get_iscsi_name(c, obj, k->name, key_at(k, base));
}

/* Parsed by parse_acl itself (it needs the target): only named here, so the key is allowed. */
static int acl_luns_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	(void)c, (void)obj, (void)k, (void)base;
	return 0;
}

static const struct key acl_keys[] = {
    KEY_FN("initiator", (struct cfg_acl, initiator), iscsi_name_key),
    KEY_FN("chap", (struct cfg_acl, chap), chap_key),
    KEY_FN("luns", (struct cfg_acl, luns), acl_luns_key), KEY_END};

static int parse_acl(struct ctx *c, json_t *v, struct cfg_target *t, size_t idx)
{
	struct cfg_acl *a = &t->acls[idx];
	int rc;

	if ((rc = want_object(c, NULL, v)) || (rc = parse_table(c, v, acl_keys, a)) ||
	    (rc = parse_acl_luns(c, v, t, a)))
		return rc;
	for (size_t i = 0; i < idx; i++)
		if (strcmp(t->acls[i].initiator, a->initiator) == 0)
			return fail(c, "initiator", false, "already listed in acls[%zu]", i);
	return 0;
}

static int one_lun(struct ctx *c, json_t *v, size_t i, void *arg)
{
	struct tgt_arg *la = arg;
	return parse_lun(c, v, la->cfg, la->ti, i);
}

static int one_acl(struct ctx *c, json_t *v, size_t i, void *arg)
{
	return parse_acl(c, v, arg, i);
}

static bool target_has_chap(const struct cfg_target *t)
{
	bool any = t->chap.secret != NULL;

	for (size_t i = 0; i < t->nacls; i++)
		any = any || t->acls[i].chap.secret;
	return any;
}

/* default: true when the target or any ACL has a CHAP secret (parsed before it) */
static int target_chap_required(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;

	t->chap_required = target_has_chap(t);
	return get_bool(c, obj, k->name, &t->chap_required);
}

/* Cross-field CHAP rules of one target. */
static int check_target_chap(struct ctx *c, struct cfg_target *t)
{
	char buf[300];

	if (t->mutual_chap.secret && !target_has_chap(t))
		return fail(c, "mutual_chap", false,
			    "mutual CHAP needs one-way CHAP as well (\"chap\" or an ACL's "
			    "\"chap\"): the initiator authenticates first");
	if (!t->chap_required || t->chap.secret)
		return 0;
	if (t->nacls == 0)
		return fail(c, "chap_required", false,
			    "is true but the target has no CHAP credential (\"chap\" or "
			    "\"acls\" with \"chap\")");
	for (size_t i = 0; i < t->nacls; i++) {
		if (t->acls[i].chap.secret)
			continue;
		push_key(c, "acls");
		push_idx(c, i);
		fail(c, NULL, false,
		     "initiator \"%s\" has no CHAP credential but chap_required is true (give "
		     "it \"chap\", or give the target one)",
		     esc(t->acls[i].initiator, buf, sizeof(buf)));
		pop(c);
		pop(c);
		return -EINVAL;
	}
	return 0;
}

/* ---- ALUA target port groups (docs/configuration.md, "alua") ---------------------------- */

static int alua_add_port(struct ctx *c, struct scsi_alua_cfg *a, struct scsi_alua_group_cfg *g,
			 uint16_t rtpi)
{
	for (unsigned i = 0; i < a->ngroups; i++)
		for (unsigned j = 0; j < a->groups[i].nports; j++)
			if (a->groups[i].ports[j] == rtpi && &a->groups[i] != g)
				return fail(c, NULL, false,
					    "relative target port %u is already in group %u", rtpi,
					    a->groups[i].id);
			else if (a->groups[i].ports[j] == rtpi)
				return 0; /* two portals of one TPGT: one target port */
	if (g->nports >= SCSI_ALUA_MAX_PORTS)
		return fail(c, NULL, false, "more than %d target ports in one group",
			    SCSI_ALUA_MAX_PORTS);
	g->ports[g->nports++] = rtpi;
	return 0;
}

struct group_arg {
	const struct ix_config *cfg;
	const struct cfg_target *t;
	struct scsi_alua_cfg *a;
	struct scsi_alua_group_cfg *g;
};

/* A group's local portals: the target port of each is its TPGT. */
static int one_alua_portal(struct ctx *c, json_t *e, size_t i, void *arg)
{
	struct group_arg *ga = arg;
	const char *s = json_string_value(e);
	const struct cfg_portal *p = s ? cfg_find_portal(ga->cfg, s) : NULL;
	char buf[128];

	(void)i;
	if (!s)
		return fail(c, NULL, false, "must be a portal name, not %s", type_name(e));
	if (!p || !cfg_target_on_portal(ga->t, p))
		return fail(c, NULL, false, "the target has no portal named \"%s\"",
			    esc(s, buf, sizeof(buf)));
	if (p->tpgt == 0)
		return fail(c, NULL, false,
			    "portal \"%s\" has tpgt 0, which cannot be a relative target "
			    "port: give it a tpgt of 1 or more",
			    esc(s, buf, sizeof(buf)));
	ga->g->local = true; /* this gateway's: follows an RBD lock (docs/ha.md) */
	return alua_add_port(c, ga->a, ga->g, p->tpgt);
}

/* Target ports of other gateways that export the same LUs, by relative target port id. */
static int one_remote_port(struct ctx *c, json_t *e, size_t i, void *arg)
{
	struct group_arg *ga = arg;
	json_int_t n = json_is_integer(e) ? json_integer_value(e) : -1;

	(void)i;
	if (n < 1 || n > 65535)
		return fail(c, NULL, false, "must be a relative target port id (1 to 65535)");
	return alua_add_port(c, ga->a, ga->g, (uint16_t)n);
}

/* The keys of one group; base is its struct group_arg. */
static int alua_group_id(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct group_arg *ga = base;
	int rc = get_u16(c, obj, k->name, 1, 65535, &ga->g->id);

	for (unsigned i = 0; !rc && i + 1 < ga->a->ngroups; i++)
		if (ga->a->groups[i].id == ga->g->id)
			return fail(c, k->name, false, "group %u is already defined by groups[%u]",
				    ga->g->id, i);
	return rc;
}

static int alua_group_state(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct group_arg *ga = base;
	const char *st;
	int rc = get_str(c, obj, k->name, 32, STR_REQUIRED | STR_PRINTABLE, &st);

	if (rc)
		return rc;
	if (scsi_alua_state_parse(st, &ga->g->state) < 0)
		return fail(c, k->name, false,
			    "unknown state (use active/optimized, active/non-optimized, standby, "
			    "unavailable, offline or transitioning)");
	return 0;
}

static int alua_group_preferred(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct group_arg *ga = base;

	return get_bool(c, obj, k->name, &ga->g->preferred);
}

static int alua_local_ports(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec ports = {k->name, NULL, 0, one_alua_portal};

	return parse_list(c, obj, &ports, NULL, NULL, base);
}

static int alua_remote_ports(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec ports = {k->name, NULL, 0, one_remote_port};

	return parse_list(c, obj, &ports, NULL, NULL, base);
}

static const struct key alua_group_keys[] = {
    {.name = "id", .type = K_FN, .flags = KEY_PRESENT, .parse = alua_group_id},
    {.name = "state", .type = K_FN, .parse = alua_group_state},
    {.name = "preferred", .type = K_FN, .parse = alua_group_preferred},
    {.name = "portals", .type = K_FN, .parse = alua_local_ports},
    {.name = "relative_ports", .type = K_FN, .parse = alua_remote_ports},
    KEY_END};

static int alua_group(struct ctx *c, json_t *gv, size_t gi, void *arg)
{
	struct group_arg ga = *(struct group_arg *)arg;
	struct scsi_alua_cfg *a = ga.a;
	int rc;

	(void)gi;
	ga.g = &a->groups[a->ngroups++];
	if ((rc = want_object(c, NULL, gv)) || (rc = parse_table(c, gv, alua_group_keys, &ga)))
		return rc;
	if (ga.g->nports == 0)
		return fail(c, NULL, false, "has no target port (\"portals\" or "
					    "\"relative_ports\")");
	return 0;
}

/* Every portal the target is on must be a port of some group. */
static int alua_coverage(struct ctx *c, const struct ix_config *cfg, const struct cfg_target *t)
{
	const struct scsi_alua_cfg *a = &t->alua;

	for (size_t i = 0; i < cfg->nportals; i++) {
		const struct cfg_portal *p = &cfg->portals[i];
		bool found = false;

		if (!cfg_target_on_portal(t, p))
			continue;
		for (unsigned k = 0; k < a->ngroups && !found; k++)
			for (unsigned j = 0; j < a->groups[k].nports; j++)
				found = found || a->groups[k].ports[j] == p->tpgt;
		if (!found)
			return fail(c, "groups", false,
				    "portal \"%s\" (tpgt %u) is in no group", p->name, p->tpgt);
	}
	return 0;
}

static int parse_alua(struct ctx *c, json_t *tv, const struct ix_config *cfg,
		      struct cfg_target *t)
{
	static const char *const keys[] = {"groups", "explicit", "transition_time",
					   "implicit_failover_ms", NULL};
	json_t *v = member(tv, "alua"), *groups;
	struct scsi_alua_cfg *a = &t->alua;
	struct group_arg ga = {cfg, t, a, NULL};
	uint16_t trans = 0;
	int rc = 0;

	if (!v)
		return 0;
	a->explicit_ok = true;
	a->implicit_failover_ms = 5000;
	push_key(c, "alua");
	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_bool(c, v, "explicit", &a->explicit_ok)) ||
	    (rc = get_u16(c, v, "transition_time", 0, 255, &trans)) ||
	    (rc = get_u32(c, v, "implicit_failover_ms", 0, 600000, &a->implicit_failover_ms)))
		goto out;
	a->transition_s = (uint8_t)trans;
	groups = member(v, "groups");
	if (!groups) {
		rc = missing(c, "groups");
		goto out;
	}
	if ((rc = want_array(c, "groups", groups)))
		goto out;
	if (json_array_size(groups) == 0 || json_array_size(groups) > SCSI_ALUA_MAX_GROUPS) {
		rc = fail(c, "groups", false, "must list 1 to %d target port groups",
			  SCSI_ALUA_MAX_GROUPS);
		goto out;
	}
	rc = each_elem(c, "groups", groups, alua_group, &ga);
	if (!rc)
		rc = alua_coverage(c, cfg, t);
out:
	pop(c);
	return rc;
}

static int target_name(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;
	size_t ti = (size_t)(t - c->cfg->targets);
	char buf[300];
	int rc;

	if ((rc = get_iscsi_name(c, obj, k->name, &t->name)))
		return rc;
	for (size_t i = 0; i < ti; i++)
		if (strcmp(c->cfg->targets[i].name, t->name) == 0)
			return fail(c, k->name, false,
				    "target \"%s\" is already defined by "
				    "targets[%zu]",
				    esc(t->name, buf, sizeof(buf)), i);
	return 0;
}

static int target_portals(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec portals = {k->name,
					  "must not be empty (omit it to use every portal)",
					  sizeof(char *), one_target_portal};
	struct cfg_target *t = base;
	struct tgt_arg ta = {c->cfg, (size_t)(t - c->cfg->targets)};

	return parse_list(c, obj, &portals, (void **)&t->portals, &t->nportals, &ta);
}

static int target_luns(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec luns = {k->name, NULL, sizeof(struct cfg_lun), one_lun};
	struct cfg_target *t = base;
	struct tgt_arg ta = {c->cfg, (size_t)(t - c->cfg->targets)};

	return parse_list(c, obj, &luns, (void **)&t->luns, &t->nluns, &ta);
}

static int target_acls(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec acls = {k->name, NULL, sizeof(struct cfg_acl), one_acl};
	struct cfg_target *t = base;

	return parse_list(c, obj, &acls, (void **)&t->acls, &t->nacls, t);
}

static int target_algs(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;

	return parse_chap_algs(c, obj, k->name, t->chap_algs, &t->nchap_algs);
}

static int target_alua(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	(void)k;
	return parse_alua(c, obj, c->cfg, base);
}

#define TARGET(f) (struct cfg_target, f)
static const struct key target_keys[] = {
    KEY_FN("name", TARGET(name), target_name),
    KEY_STR("alias", TARGET(alias), 255, STR_PRINTABLE),
    KEY_FN("portals", TARGET(portals), target_portals),
    KEY_FN("luns", TARGET(luns), target_luns),
    KEY_FN("acls", TARGET(acls), target_acls),
    KEY_FN("chap", TARGET(chap), chap_key),
    KEY_FN("mutual_chap", TARGET(mutual_chap), mutual_chap_key),
    KEY_FN("chap_required", TARGET(chap_required), target_chap_required),
    KEY_FN("chap_algorithms", TARGET(chap_algs), target_algs),
    KEY_NUM("max_sessions", K_U32, TARGET(max_sessions), 0, 65535, 0),
    KEY_FN("alua", TARGET(alua), target_alua),
    KEY_END};
#undef TARGET

static int parse_target(struct ctx *c, json_t *v, struct ix_config *cfg, size_t ti)
{
	struct cfg_target *t = &cfg->targets[ti];
	int rc;

	chap_algs_default(t->chap_algs, &t->nchap_algs);
	if ((rc = want_object(c, NULL, v)) || (rc = parse_table(c, v, target_keys, t)))
		return rc;
	return check_target_chap(c, t);
}

static int one_target(struct ctx *c, json_t *v, size_t i, void *cfg)
{
	return parse_target(c, v, cfg, i);
}

static int parse_targets(struct ctx *c, json_t *root, const struct key *k, void *base)
{
	const struct list_spec targets = {k->name, NULL, sizeof(struct cfg_target), one_target};
	struct ix_config *cfg = base;

	return parse_list(c, root, &targets, (void **)&cfg->targets, &cfg->ntargets, cfg);
}

/* ---- entry points ---------------------------------------------------------------------- */

static int version_key(struct ctx *c, json_t *obj, const struct key *k, void *base)
{
	uint64_t version = 1;

	(void)base;
	return get_uint(c, obj, k->name, 1, 1, &version);
}

#define ROOT(f) (struct ix_config, f)
static const struct key root_keys[] = {
    KEY_FN("version", ROOT(priv), version_key), /* 1, the only one so far */
    KEY_FN("global", ROOT(global), parse_global),
    KEY_FN("portals", ROOT(portals), parse_portals), /* default: "default" on 127.0.0.1 */
    KEY_FN("targets", ROOT(targets), parse_targets),
    KEY_FN("testing", ROOT(testing), parse_testing),
    KEY_END};
#undef ROOT

static int parse_root(struct ctx *c, json_t *root, struct ix_config *cfg)
{
	int rc;

	global_defaults(&cfg->global);
	if (!json_is_object(root))
		return fail(c, NULL, false, "the configuration must be a JSON object, not %s",
			    type_name(root));
	if ((rc = parse_table(c, root, root_keys, cfg)))
		return rc;
	return check_secret_directions(c);
}

static int load(const char *text, size_t len, const char *name, struct ix_config **out, char *err,
		size_t errlen)
{
	struct ctx c = {.name = name ? name : "<string>",
			.text = text,
			.len = len,
			.err = err,
			.errlen = errlen};
	struct ix_config *cfg;
	json_error_t je;
	json_t *root;
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		if (err && errlen)
			snprintf(err, errlen, "%s:%d:%d: %s", c.name, je.line > 0 ? je.line : 1,
				 je.column > 0 ? je.column : 1, je.text);
		return -EINVAL;
	}
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		json_decref(root);
		return -ENOMEM;
	}
	c.cfg = cfg;
	rc = parse_root(&c, root, cfg);
	json_decref(root);
	free(c.secrets);
	if (rc) {
		cfg_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

int cfg_load_string(const char *json, const char *name, struct ix_config **out, char *err,
		    size_t errlen)
{
	return load(json, strlen(json), name, out, err, errlen);
}

int cfg_load_file(const char *path, struct ix_config **out, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	size_t got = 0;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)MAX_FILE_SIZE) {
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EFBIG;
		goto fail;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = -ENOMEM;
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	text[got] = '\0';
	rc = load(text, got, path, out, err, errlen);
	free(text);
	return rc;
fail:
	if (fd >= 0)
		close(fd);
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
	return rc;
}

int cfg_default(struct ix_config **out, uint64_t ram_size_bytes)
{
	char json[512];

	snprintf(json, sizeof(json),
		 "{\"portals\": [{\"name\": \"default\", \"address\": \"127.0.0.1\", "
		 "\"port\": 3260}],"
		 " \"targets\": [{\"name\": \"iqn.2026-11.io.ix:target0\","
		 " \"luns\": [{\"lun\": 0, \"backend\": \"ram\", \"size\": \"%llu\"}]}]}",
		 (unsigned long long)(ram_size_bytes ? ram_size_bytes : DEFAULT_RAM_SIZE));
	return load(json, strlen(json), "<default>", out, NULL, 0);
}
