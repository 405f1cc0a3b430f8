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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/chap.h"
#include "target/config_json.h"
#include "util/addr.h"
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
};

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

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

/* Reject members not in `allowed` (NULL-terminated), so a typo cannot pass silently. */
static int check_keys(struct ctx *c, json_t *obj, const char *const *allowed)
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

		for (const char *const *a = allowed; *a; a++) {
			size_t d = cfg_json_key_distance(key, *a);
			if (strcmp(key, *a) == 0)
				ok = true;
			if (d < best_d) {
				best_d = d;
				best = *a;
			}
		}
		if (ok)
			continue;
		if (best)
			return fail(c, key, true, "unknown key \"%s\" (did you mean \"%s\"?)",
				    esc(key, k, sizeof(k)), best);
		for (const char *const *a = allowed; *a && o < sizeof(list); a++) {
			int w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", *a);
			o += w > 0 ? (size_t)w : 0;
		}
		return fail(c, key, true, "unknown key \"%s\" (allowed here: %s)",
			    esc(key, k, sizeof(k)), list);
	}
	return 0;
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
static int parse_chap(struct ctx *c, json_t *parent, const char *key, bool mutual,
		      struct cfg_chap *out)
{
	static const char *const keys[] = {"user", "secret", NULL};
	json_t *v = member(parent, key);
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, key, v)))
		return rc;
	push_key(c, key);
	rc = check_keys(c, v, keys);
	if (!rc && !member(v, "user") && !member(v, "secret"))
		rc = fail(c, NULL, false, "a CHAP credential needs \"user\" and \"secret\"");
	if (!rc && member(v, "user") && !member(v, "secret"))
		rc = fail(c, "secret", false,
			  "required when \"user\" is set (CHAP user without "
			  "secret)");
	if (!rc)
		rc = get_strdup(c, v, "user", 255, STR_REQUIRED | STR_PRINTABLE, &out->user);
	if (!rc)
		rc = get_strdup(c, v, "secret", CHAP_MAX_SECRET_LEN, STR_REQUIRED, &out->secret);
	if (!rc) {
		push_key(c, "secret");
		rc = remember_secret(c, out->secret, mutual);
		pop(c);
	}
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

static int parse_chap_algs(struct ctx *c, json_t *parent, const char *key, uint8_t *algs, int *n)
{
	json_t *v = member(parent, key), *e;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	if ((rc = want_array(c, key, v)))
		return rc;
	if (json_array_size(v) == 0)
		return fail(c, key, false, "must not be empty (omit it for the default)");
	push_key(c, key);
	*n = 0;
	json_array_foreach(v, i, e)
	{
		const char *s = json_string_value(e);
		char buf[64];
		/* names only: chap_alg_parse() also takes the decimal CHAP_A codes, which the
		   file format does not */
		int a = s && !isdigit((unsigned char)s[0]) ? chap_alg_parse(s) : -EINVAL;
		push_idx(c, i);
		if (!s)
			rc = fail(c, NULL, false, "must be a string, not %s", type_name(e));
		else if (a < 0)
			rc = fail(c, NULL, false,
				  "unknown CHAP algorithm \"%s\" (md5, sha1, sha256, sha3-256)",
				  esc(s, buf, sizeof(buf)));
		else if (memchr(algs, a, (size_t)*n))
			rc = fail(c, NULL, false, "\"%s\" is listed twice", s);
		else
			algs[(*n)++] = (uint8_t)a;
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
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

static int parse_digest(struct ctx *c, json_t *obj, const char *key, enum neg_digest_pref *out)
{
	static const enum neg_digest_pref map[] = {NEG_DIGEST_NONE_ONLY, NEG_DIGEST_PREFER_NONE,
						   NEG_DIGEST_PREFER_CRC, NEG_DIGEST_CRC_ONLY};
	int i = -1;
	int rc = get_enum(c, obj, key, digest_names, "digest setting", &i);

	if (!rc && i >= 0)
		*out = map[i];
	return rc;
}

static int parse_negotiation(struct ctx *c, json_t *g, struct neg_prefs *p)
{
	static const char *const keys[] = {"max_recv_data_segment_length",
					   "max_burst_length",
					   "first_burst_length",
					   "immediate_data",
					   "initial_r2t",
					   "max_outstanding_r2t",
					   "header_digest",
					   "data_digest",
					   "max_connections",
					   "default_time2wait",
					   "default_time2retain",
					   NULL};
	struct iscsi_sess_params *s = &p->sess;
	json_t *v = member(g, "negotiation");
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, "negotiation", v)))
		return rc;
	push_key(c, "negotiation");
	if ((rc = check_keys(c, v, keys)) ||
	    (rc = get_u32(c, v, "max_recv_data_segment_length", NEG_LEN_MIN, NEG_LEN_MAX,
			  &p->max_recv_dsl)) ||
	    (rc = get_u32(c, v, "max_burst_length", NEG_LEN_MIN, NEG_LEN_MAX,
			  &s->max_burst_length)) ||
	    (rc = get_u32(c, v, "first_burst_length", NEG_LEN_MIN, NEG_LEN_MAX,
			  &s->first_burst_length)) ||
	    (rc = get_bool(c, v, "immediate_data", &s->immediate_data)) ||
	    (rc = get_bool(c, v, "initial_r2t", &s->initial_r2t)) ||
	    (rc = get_u16(c, v, "max_outstanding_r2t", 1, 65535, &s->max_outstanding_r2t)) ||
	    (rc = parse_digest(c, v, "header_digest", &p->header_digest)) ||
	    (rc = parse_digest(c, v, "data_digest", &p->data_digest)) ||
	    (rc = get_u16(c, v, "max_connections", 1, 65535, &s->max_connections)) ||
	    (rc = get_u16(c, v, "default_time2wait", 0, 3600, &s->default_time2wait)) ||
	    (rc = get_u16(c, v, "default_time2retain", 0, 3600, &s->default_time2retain)))
		goto out;
	if (s->first_burst_length > s->max_burst_length)
		rc =
		    fail(c, "first_burst_length", false, "%u must not exceed max_burst_length (%u)",
			 s->first_burst_length, s->max_burst_length);
out:
	pop(c);
	return rc;
}

static int parse_discovery(struct ctx *c, json_t *g, struct cfg_global *out)
{
	static const char *const keys[] = {"chap", "mutual_chap", "chap_required",
					   "chap_algorithms", NULL};
	json_t *v = member(g, "discovery");
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, "discovery", v)))
		return rc;
	push_key(c, "discovery");
	out->discovery_chap_required = member(v, "chap") != NULL;
	if ((rc = check_keys(c, v, keys)) ||
	    (rc = parse_chap(c, v, "chap", false, &out->discovery_chap)) ||
	    (rc = parse_chap(c, v, "mutual_chap", true, &out->discovery_mutual_chap)) ||
	    (rc = get_bool(c, v, "chap_required", &out->discovery_chap_required)) ||
	    (rc = parse_chap_algs(c, v, "chap_algorithms", out->discovery_chap_algs,
				  &out->ndiscovery_chap_algs)))
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

static void global_defaults(struct cfg_global *g)
{
	g->threads = 0;
	g->poll_us = 0; /* off: polling pays only on uncontended CPUs (docs/perf.md) */
	g->log_level = LOG_INFO;
	g->login_timeout_ms = 15000;
	g->nop_interval_ms = 15000;
	g->nop_timeout_ms = 30000;
	g->logout_timeout_ms = 5000;
	g->cmdsn_depth = 128;
	g->max_sessions = 1024;
	g->max_sessions_per_initiator = 64;
	g->max_connections = 2048;
	g->max_pending_logins = 128;
	g->discovery_idle_timeout_ms = 30000;
	g->max_connection_memory = 128ull << 20;
	neg_prefs_default(&g->neg);
	g->neg.max_recv_dsl = 262144;
	g->neg.sess.max_burst_length = 1048576;
	g->neg.sess.first_burst_length = 262144;
	g->neg.sess.immediate_data = true;
	g->neg.sess.initial_r2t = false;
	g->neg.sess.max_outstanding_r2t = 8;
	g->neg.sess.max_connections = 1;
	g->neg.sess.default_time2wait = 2;
	g->neg.sess.default_time2retain = 20;
	g->neg.header_digest = NEG_DIGEST_PREFER_NONE;
	g->neg.data_digest = NEG_DIGEST_PREFER_NONE;
	g->neg.offer_all = false;
	chap_algs_default(g->discovery_chap_algs, &g->ndiscovery_chap_algs);
}

static int parse_log_level(struct ctx *c, json_t *g, int *out)
{
	const char *s;
	char buf[64];
	int rc = get_str(c, g, "log_level", 64, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	*out = ix_log_level_parse(s);
	if (*out < 0)
		return fail(c, "log_level", false,
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

/* "ADDR:PORT" or "[V6ADDR]:PORT" with a numeric address (the metrics endpoint). */
static int get_metrics_listen(struct ctx *c, json_t *obj, char **out)
{
	char host[ADDR_HOST_MAX];
	unsigned char bin[16];
	uint16_t port = 0;
	const char *s;
	int rc = get_str(c, obj, "metrics_listen", 80, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	if (addr_parse_portal(s, 0, host, sizeof(host), &port, NULL) < 0 || port == 0 ||
	    (inet_pton(AF_INET, host, bin) != 1 && inet_pton(AF_INET6, host, bin) != 1))
		return fail(c, "metrics_listen", false,
			    "\"%s\" is not ADDRESS:PORT with a numeric address (\"[::1]:9117\")",
			    s);
	return dup_str(c, s, out);
}

static int parse_global(struct ctx *c, json_t *root, struct cfg_global *g)
{
	static const char *const keys[] = {"threads",
					   "log_level",
					   "login_timeout_ms",
					   "nop_interval_ms",
					   "nop_timeout_ms",
					   "logout_timeout_ms",
					   "cmdsn_depth",
					   "max_sessions",
					   "max_sessions_per_initiator",
					   "max_connections",
					   "max_pending_logins",
					   "discovery_idle_timeout_ms",
					   "max_connection_memory",
					   "negotiation",
					   "discovery",
					   "mgmt_socket",
					   "mgmt_group",
					   "metrics_listen",
					   "state_dir",
					   "poll_us",
					   NULL};
	json_t *v = member(root, "global");
	uint32_t threads = 0;
	int rc;

	if (!v)
		return 0;
	if ((rc = want_object(c, "global", v)))
		return rc;
	push_key(c, "global");
	if ((rc = check_keys(c, v, keys)) || (rc = get_u32(c, v, "threads", 0, 256, &threads)) ||
	    (rc = get_u32(c, v, "poll_us", 0, 10000, &g->poll_us)) ||
	    (rc = parse_log_level(c, v, &g->log_level)) ||
	    (rc = get_u32(c, v, "login_timeout_ms", 1, MAX_TIMEOUT_MS, &g->login_timeout_ms)) ||
	    (rc = get_u32(c, v, "nop_interval_ms", 0, MAX_TIMEOUT_MS, &g->nop_interval_ms)) ||
	    (rc = get_u32(c, v, "nop_timeout_ms", 1, MAX_TIMEOUT_MS, &g->nop_timeout_ms)) ||
	    /* sent as Parameter3 of an Async Message, in whole seconds */
	    (rc =
		 get_u32(c, v, "logout_timeout_ms", 1000, MAX_TIMEOUT_MS, &g->logout_timeout_ms)) ||
	    (rc = get_u32(c, v, "cmdsn_depth", 1, 65536, &g->cmdsn_depth)) ||
	    /* a session needs a TSIH, a non-zero 16-bit number */
	    (rc = get_u32(c, v, "max_sessions", 0, 65535, &g->max_sessions)) ||
	    (rc = get_u32(c, v, "max_sessions_per_initiator", 0, 65535,
			  &g->max_sessions_per_initiator)) ||
	    (rc = get_u32(c, v, "max_connections", 1, 1u << 20, &g->max_connections)) ||
	    (rc = get_u32(c, v, "max_pending_logins", 1, 65535, &g->max_pending_logins)) ||
	    (rc = get_u32(c, v, "discovery_idle_timeout_ms", 0, MAX_TIMEOUT_MS,
			  &g->discovery_idle_timeout_ms)) ||
	    (rc = get_size(c, v, "max_connection_memory", &g->max_connection_memory)) ||
	    (rc = parse_negotiation(c, v, &g->neg)) || (rc = parse_discovery(c, v, g)) ||
	    (rc = get_strdup(c, v, "mgmt_socket", sizeof(((struct sockaddr_un *)0)->sun_path) - 1,
			     STR_PRINTABLE, &g->mgmt_socket)) ||
	    (rc = get_strdup(c, v, "mgmt_group", 32, STR_PRINTABLE, &g->mgmt_group)) ||
	    (rc = get_metrics_listen(c, v, &g->metrics_listen)) ||
	    (rc = get_state_dir(c, v, &g->state_dir)))
		goto out;
	g->threads = (int)threads;
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

static int parse_transports(struct ctx *c, json_t *obj, struct cfg_portal *p)
{
	json_t *v = member(obj, "transports"), *e;
	size_t i;
	int rc = 0;

	p->tcp = true;
	p->iser = false;
	if (!v)
		return 0;
	if ((rc = want_array(c, "transports", v)))
		return rc;
	if (json_array_size(v) == 0)
		return fail(c, "transports", false, "must list \"tcp\", \"iser\" or both");
	p->tcp = false;
	push_key(c, "transports");
	json_array_foreach(v, i, e)
	{
		const char *s = json_string_value(e);
		bool *flag = NULL;
		char buf[64];
		push_idx(c, i);
		if (s && strcmp(s, "tcp") == 0)
			flag = &p->tcp;
		else if (s && strcmp(s, "iser") == 0)
			flag = &p->iser;
		if (!s)
			rc = fail(c, NULL, false, "must be a string, not %s", type_name(e));
		else if (!flag)
			rc = fail(c, NULL, false, "unknown transport \"%s\" (tcp or iser)",
				  esc(s, buf, sizeof(buf)));
		else if (*flag)
			rc = fail(c, NULL, false, "\"%s\" is listed twice", s);
		else
			*flag = true;
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
}

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
	static const char *const keys[] = {"name", "address", "port", "tpgt", "transports", NULL};
	struct cfg_portal *p = &cfg->portals[idx];
	const char *addr;
	struct addr a;
	char buf[128];
	int rc;

	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_strdup(c, v, "name", 64, STR_PRINTABLE, &p->name)) ||
	    (rc = get_str(c, v, "address", 64, STR_REQUIRED | STR_PRINTABLE, &addr)))
		return rc;
	if (!p->name && (rc = dup_str(c, "default", &p->name)))
		return rc;
	if (!parse_addr(addr, &a))
		return fail(c, "address", false,
			    "\"%s\" is not an IPv4 or IPv6 address (no brackets or host names; "
			    "\"0.0.0.0\" or \"::\" listen on every address)",
			    esc(addr, buf, sizeof(buf)));
	if ((rc = dup_str(c, addr, &p->address)))
		return rc;
	p->port = 3260;
	p->tpgt = 1;
	if ((rc = get_u16(c, v, "port", 1, 65535, &p->port)) ||
	    (rc = get_u16(c, v, "tpgt", 0, 65535, &p->tpgt)) || (rc = parse_transports(c, v, p)))
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

static int parse_portals(struct ctx *c, json_t *root, struct ix_config *cfg)
{
	json_t *v = member(root, "portals"), *e;
	size_t i;
	int rc = 0;

	if (!v) {
		cfg->portals = alloc_array(c, 1, sizeof(*cfg->portals));
		if (!cfg->portals)
			return -ENOMEM;
		cfg->nportals = 1;
		cfg->portals[0] = (struct cfg_portal){.port = 3260, .tpgt = 1, .tcp = true};
		if ((rc = dup_str(c, "default", &cfg->portals[0].name)))
			return rc;
		return dup_str(c, "127.0.0.1", &cfg->portals[0].address);
	}
	if ((rc = want_array(c, "portals", v)))
		return rc;
	if (json_array_size(v) == 0)
		return fail(c, "portals", false,
			    "must list at least one portal (omit it for 127.0.0.1:3260)");
	cfg->portals = alloc_array(c, json_array_size(v), sizeof(*cfg->portals));
	if (!cfg->portals)
		return -ENOMEM;
	cfg->nportals = json_array_size(v);
	push_key(c, "portals");
	json_array_foreach(v, i, e)
	{
		push_idx(c, i);
		rc = parse_portal(c, e, cfg, i);
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
}

/* ---- LUNs ------------------------------------------------------------------------------ */

static const char *const backend_names[] = {"ram", "file", "block", "error", "rbd", NULL};

/* "rbd": {"pool", "image", "namespace", "conf", "client", "keyring", "osd_op_timeout_s",
 * "connect_timeout_s"} of a LUN with backend "rbd". */
static int parse_rbd(struct ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	static const char *const keys[] = {"pool",    "image",		  "namespace",
					   "conf",    "client",		  "keyring",
					   "osd_op_timeout_s", "connect_timeout_s",
					   "exclusive_lock", NULL};
	struct scsi_rbd_cfg *r = &lu->rbd;
	json_t *o = member(v, "rbd");
	int rc;

	if (!o) {
		if (lu->backend == SCSI_BACKEND_RBD)
			return fail(c, "rbd", false,
				    "required for an rbd LUN: {\"pool\": ..., \"image\": ...}");
		return 0;
	}
	if (lu->backend != SCSI_BACKEND_RBD)
		return fail(c, "rbd", true, "only for backend \"rbd\"");
	if ((rc = want_object(c, "rbd", o)))
		return rc;
	push_key(c, "rbd");
	if ((rc = check_keys(c, o, keys)))
		goto out;
	if (!member(o, "pool")) {
		rc = missing(c, "pool");
		goto out;
	}
	if (!member(o, "image")) {
		rc = missing(c, "image");
		goto out;
	}
	/* RADOS pool and namespace names, RBD image names: printable, no '/' or '@' */
	if ((rc = get_strdup(c, o, "pool", 255, STR_PRINTABLE, (char **)&r->pool)) ||
	    (rc = get_strdup(c, o, "image", 255, STR_PRINTABLE, (char **)&r->image)) ||
	    (rc = get_strdup(c, o, "namespace", 255, STR_PRINTABLE, (char **)&r->ns)) ||
	    (rc = get_strdup(c, o, "conf", 4095, STR_PRINTABLE, (char **)&r->conf)) ||
	    (rc = get_strdup(c, o, "client", 255, STR_PRINTABLE, (char **)&r->client)) ||
	    (rc = get_strdup(c, o, "keyring", 4095, STR_PRINTABLE, (char **)&r->keyring)) ||
	    (rc = get_u32(c, o, "osd_op_timeout_s", 1, 3600, &r->osd_op_timeout_s)) ||
	    (rc = get_u32(c, o, "connect_timeout_s", 1, 3600, &r->connect_timeout_s)) ||
	    (rc = get_bool(c, o, "exclusive_lock", &r->exclusive_lock)))
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
			if (l->lu.backend == SCSI_BACKEND_RBD && x->backend == SCSI_BACKEND_RBD &&
			    strcmp(l->lu.rbd.pool, x->rbd.pool) == 0 &&
			    strcmp(l->lu.rbd.image, x->rbd.image) == 0 &&
			    str_eq0(l->lu.rbd.ns, x->rbd.ns) && str_eq0(l->lu.rbd.conf, x->rbd.conf) &&
			    !(l->lu.readonly && x->readonly))
				return fail(c, "rbd", false,
					    "image %s/%s is also used by targets[%zu].luns[%zu]; "
					    "sharing an image needs readonly on both",
					    l->lu.rbd.pool, l->lu.rbd.image, a, b);
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
	if (member(v, "errors") && lu->backend != SCSI_BACKEND_ERROR)
		return fail(c, "errors", true, "only for backend \"error\"");
	if ((rc = parse_rbd(c, v, lu)))
		return rc;
	if (lu->backend == SCSI_BACKEND_RBD) {
#ifndef IX_HAVE_RBD
		return fail(c, "backend", false, "this ix-target was built without the rbd backend "
						"(meson -Drbd=disabled)");
#endif
		if (path)
			return fail(c, "path", false, "an rbd LUN has no path (see \"rbd\")");
		/* size: taken from the image; when given, it must match */
	} else if (lu->backend == SCSI_BACKEND_RAM || lu->backend == SCSI_BACKEND_ERROR) {
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

/* Parse the array `key` of an object, one element at a time. */
static int parse_list(struct ctx *c, json_t *tv, const char *key, void **arr, size_t elem_size,
		      size_t *n, int (*one)(struct ctx *, json_t *, size_t, void *), void *arg)
{
	json_t *v = member(tv, key), *e;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	if ((rc = want_array(c, key, v)))
		return rc;
	*arr = alloc_array(c, json_array_size(v), elem_size);
	if (!*arr)
		return -ENOMEM;
	*n = json_array_size(v);
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

/* ---- test-only features (docs/configuration.md, "testing") ---------------------------- */

#define MAX_ERR_RULES 16

static int parse_err_rule(struct ctx *c, json_t *v, size_t i, void *arg)
{
	static const char *const keys[] = {"op",    "error",    "lba", "blocks",
					   "every", "delay_ms", NULL};
	static const char *const ops[] = {"read", "write", "flush", "any", NULL};
	static const char *const errs[] = {"none", "eio", "enospc", NULL};
	static const int err_values[] = {0, -EIO, -ENOSPC};
	struct scsi_err_rule *r = *(struct scsi_err_rule **)arg + i;
	int op = 3, e = 1, rc;

	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_enum(c, v, "op", ops, "operation", &op)) ||
	    (rc = get_enum(c, v, "error", errs, "error", &e)) ||
	    (rc = get_uint(c, v, "lba", 0, UINT64_MAX >> 16, &r->lba)) ||
	    (rc = get_uint(c, v, "blocks", 0, UINT64_MAX >> 16, &r->blocks)) ||
	    (rc = get_u32(c, v, "every", 0, UINT32_MAX, &r->every)) ||
	    (rc = get_u32(c, v, "delay_ms", 0, MAX_TIMEOUT_MS, &r->delay_ms)))
		return rc;
	r->ops = op == 3 ? SCSI_ERR_OP_READ | SCSI_ERR_OP_WRITE | SCSI_ERR_OP_FLUSH
			 : (uint8_t)(1u << op);
	r->error = err_values[e];
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
	rc = parse_list(c, v, "errors", &rules, sizeof(struct scsi_err_rule), &n, parse_err_rule,
			&rules);
	lu->err_rules = rules; /* also on failure: cfg_free() frees it */
	lu->n_err_rules = (uint32_t)n;
	return rc;
}

static int parse_testing(struct ctx *c, json_t *root, struct ix_config *cfg)
{
	static const char *const keys[] = {"transport_faults", NULL};
	static const char *const fkeys[] = {"seed",	     "drop_ppm",    "delay_ppm",
					    "delay_ms",	     "duplicate_ppm", "corrupt_ppm",
					    "truncate_ppm", "reset_after_bytes", "opcodes",
					    "during_login", NULL};
	json_t *v = member(root, "testing"), *f, *e;
	struct fault_cfg *fc = &cfg->testing.faults;
	size_t i;
	int rc;

	if (!v)
		return 0;
	cfg->test_features = true;
	if ((rc = want_object(c, "testing", v)))
		return rc;
	push_key(c, "testing");
	if ((rc = check_keys(c, v, keys)))
		goto out;
	f = member(v, "transport_faults");
	if (!f)
		goto out;
	cfg->testing.transport_faults = true;
	fc->delay_ms = 100;
	if ((rc = want_object(c, "transport_faults", f)))
		goto out;
	push_key(c, "transport_faults");
	if ((rc = check_keys(c, f, fkeys)) || (rc = get_uint(c, f, "seed", 0, UINT64_MAX >> 1,
							      &fc->seed)) ||
	    (rc = get_u32(c, f, "drop_ppm", 0, FAULT_PPM, &fc->drop_ppm)) ||
	    (rc = get_u32(c, f, "delay_ppm", 0, FAULT_PPM, &fc->delay_ppm)) ||
	    (rc = get_u32(c, f, "delay_ms", 1, MAX_TIMEOUT_MS, &fc->delay_ms)) ||
	    (rc = get_u32(c, f, "duplicate_ppm", 0, FAULT_PPM, &fc->duplicate_ppm)) ||
	    (rc = get_u32(c, f, "corrupt_ppm", 0, FAULT_PPM, &fc->corrupt_ppm)) ||
	    (rc = get_u32(c, f, "truncate_ppm", 0, FAULT_PPM, &fc->truncate_ppm)) ||
	    (rc = get_uint(c, f, "reset_after_bytes", 0, UINT64_MAX >> 1,
			   &fc->reset_after_bytes)) ||
	    (rc = get_bool(c, f, "during_login", &fc->during_login)))
		goto out_f;
	if ((e = member(f, "opcodes"))) {
		json_t *o;

		if ((rc = want_array(c, "opcodes", e)))
			goto out_f;
		push_key(c, "opcodes");
		json_array_foreach(e, i, o)
		{
			uint64_t op = 0;

			push_idx(c, i);
			if (!json_is_integer(o) || json_integer_value(o) < 0 ||
			    json_integer_value(o) > 63)
				rc = fail(c, NULL, false, "must be an opcode number from 0 to 63");
			else
				op = (uint64_t)json_integer_value(o);
			pop(c);
			if (rc)
				break;
			fc->opcodes |= 1ull << op;
		}
		pop(c);
	}
out_f:
	pop(c);
out:
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
	if (lu->pr_store == SCSI_PR_STORE_RADOS && lu->backend != SCSI_BACKEND_RBD)
		return fail(c, "pr_store", false, "\"rados\" is for LUNs with backend \"rbd\"");
	if (lu->pr_store == SCSI_PR_STORE_RADOS && lu->no_medium)
		return fail(c, "pr_store", false, "\"rados\" needs the image: not with no_medium");
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
	lu->backend = (enum scsi_backend_type)backend;
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
	if (lu->backend == SCSI_BACKEND_ERROR)
		cfg->test_features = true;
	return check_lun_conflicts(c, cfg, ti, t, li);
}

/* ---- targets --------------------------------------------------------------------------- */

static int parse_target_portals(struct ctx *c, json_t *tv, const struct ix_config *cfg,
				struct cfg_target *t)
{
	json_t *v = member(tv, "portals"), *e;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	if ((rc = want_array(c, "portals", v)))
		return rc;
	if (json_array_size(v) == 0)
		return fail(c, "portals", false, "must not be empty (omit it to use every portal)");
	t->portals = alloc_array(c, json_array_size(v), sizeof(*t->portals));
	if (!t->portals)
		return -ENOMEM;
	push_key(c, "portals");
	json_array_foreach(v, i, e)
	{
		const char *s = json_string_value(e);
		char buf[128];
		push_idx(c, i);
		if (!s)
			rc = fail(c, NULL, false, "must be a portal name, not %s", type_name(e));
		else if (!cfg_find_portal(cfg, s))
			rc = fail(c, NULL, false, "no portal is named \"%s\"",
				  esc(s, buf, sizeof(buf)));
		for (size_t j = 0; !rc && j < i; j++)
			if (strcmp(t->portals[j], s) == 0)
				rc = fail(c, NULL, false, "\"%s\" is listed twice", s);
		if (!rc && !(rc = dup_str(c, s, &t->portals[i])))
			t->nportals = i + 1;
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
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

	a->masked = member(v, "luns") != NULL;
	return parse_list(c, v, "luns", (void **)&a->luns, sizeof(*a->luns), &a->nluns,
			  parse_acl_lun, arg);
}

static int parse_acl(struct ctx *c, json_t *v, struct cfg_target *t, size_t idx)
{
	static const char *const keys[] = {"initiator", "chap", "luns", NULL};
	struct cfg_acl *a = &t->acls[idx];
	int rc;

	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_iscsi_name(c, v, "initiator", &a->initiator)) ||
	    (rc = parse_chap(c, v, "chap", false, &a->chap)) || (rc = parse_acl_luns(c, v, t, a)))
		return rc;
	for (size_t i = 0; i < idx; i++)
		if (strcmp(t->acls[i].initiator, a->initiator) == 0)
			return fail(c, "initiator", false, "already listed in acls[%zu]", i);
	return 0;
}

struct lun_arg {
	struct ix_config *cfg;
	size_t ti;
};

static int one_lun(struct ctx *c, json_t *v, size_t i, void *arg)
{
	struct lun_arg *la = arg;
	return parse_lun(c, v, la->cfg, la->ti, i);
}

static int one_acl(struct ctx *c, json_t *v, size_t i, void *arg)
{
	return parse_acl(c, v, arg, i);
}

/* Cross-field CHAP rules of one target. */
static int check_target_chap(struct ctx *c, json_t *tv, struct cfg_target *t)
{
	bool any = t->chap.secret != NULL;
	char buf[300];

	for (size_t i = 0; i < t->nacls; i++)
		any = any || t->acls[i].chap.secret;
	t->chap_required = any;
	if (get_bool(c, tv, "chap_required", &t->chap_required))
		return -EINVAL;
	if (t->mutual_chap.secret && !any)
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

/* A group's local portals: the target port of each is its TPGT. */
static int alua_portals(struct ctx *c, json_t *gv, const struct ix_config *cfg,
			const struct cfg_target *t, struct scsi_alua_cfg *a,
			struct scsi_alua_group_cfg *g)
{
	json_t *v = member(gv, "portals"), *e;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	if ((rc = want_array(c, "portals", v)))
		return rc;
	push_key(c, "portals");
	json_array_foreach(v, i, e)
	{
		const char *s = json_string_value(e);
		const struct cfg_portal *p = s ? cfg_find_portal(cfg, s) : NULL;
		char buf[128];

		push_idx(c, i);
		if (!s)
			rc = fail(c, NULL, false, "must be a portal name, not %s", type_name(e));
		else if (!p || !cfg_target_on_portal(t, p))
			rc = fail(c, NULL, false, "the target has no portal named \"%s\"",
				  esc(s, buf, sizeof(buf)));
		else if (p->tpgt == 0)
			rc = fail(c, NULL, false,
				  "portal \"%s\" has tpgt 0, which cannot be a relative target "
				  "port: give it a tpgt of 1 or more",
				  esc(s, buf, sizeof(buf)));
		else
			rc = alua_add_port(c, a, g, p->tpgt);
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
}

/* Target ports of other gateways that export the same LUs, by relative target port id. */
static int alua_remote_ports(struct ctx *c, json_t *gv, struct scsi_alua_cfg *a,
			     struct scsi_alua_group_cfg *g)
{
	json_t *v = member(gv, "relative_ports"), *e;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	if ((rc = want_array(c, "relative_ports", v)))
		return rc;
	push_key(c, "relative_ports");
	json_array_foreach(v, i, e)
	{
		json_int_t n = json_is_integer(e) ? json_integer_value(e) : -1;

		push_idx(c, i);
		if (n < 1 || n > 65535)
			rc = fail(c, NULL, false, "must be a relative target port id (1 to 65535)");
		else
			rc = alua_add_port(c, a, g, (uint16_t)n);
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
}

static int alua_group(struct ctx *c, json_t *gv, const struct ix_config *cfg,
		      const struct cfg_target *t, struct scsi_alua_cfg *a)
{
	static const char *const keys[] = {"id",	"state", "preferred", "portals",
					   "relative_ports", NULL};
	struct scsi_alua_group_cfg *g = &a->groups[a->ngroups++];
	const char *st;
	int rc;

	if ((rc = want_object(c, NULL, gv)) || (rc = check_keys(c, gv, keys)))
		return rc;
	if (!member(gv, "id"))
		return missing(c, "id");
	if ((rc = get_u16(c, gv, "id", 1, 65535, &g->id)) ||
	    (rc = get_str(c, gv, "state", 32, STR_REQUIRED | STR_PRINTABLE, &st)) ||
	    (rc = get_bool(c, gv, "preferred", &g->preferred)))
		return rc;
	for (unsigned i = 0; i + 1 < a->ngroups; i++)
		if (a->groups[i].id == g->id)
			return fail(c, "id", false, "group %u is already defined by groups[%u]",
				    g->id, i);
	if (scsi_alua_state_parse(st, &g->state) < 0)
		return fail(c, "state", false,
			    "unknown state (use active/optimized, active/non-optimized, standby, "
			    "unavailable, offline or transitioning)");
	if ((rc = alua_portals(c, gv, cfg, t, a, g)) || (rc = alua_remote_ports(c, gv, a, g)))
		return rc;
	if (g->nports == 0)
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
	static const char *const keys[] = {"groups", "explicit", "transition_time", NULL};
	json_t *v = member(tv, "alua"), *groups, *e;
	struct scsi_alua_cfg *a = &t->alua;
	uint16_t trans = 0;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	a->explicit_ok = true;
	push_key(c, "alua");
	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_bool(c, v, "explicit", &a->explicit_ok)) ||
	    (rc = get_u16(c, v, "transition_time", 0, 255, &trans)))
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
	push_key(c, "groups");
	json_array_foreach(groups, i, e)
	{
		push_idx(c, i);
		rc = alua_group(c, e, cfg, t, a);
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	if (!rc)
		rc = alua_coverage(c, cfg, t);
out:
	pop(c);
	return rc;
}

static int parse_target(struct ctx *c, json_t *v, struct ix_config *cfg, size_t ti)
{
	static const char *const keys[] = {
	    "name",	   "alias",	    "portals",	       "luns",	       "acls", "chap",
	    "mutual_chap", "chap_required", "chap_algorithms", "max_sessions", "alua", NULL};
	struct cfg_target *t = &cfg->targets[ti];
	struct lun_arg la = {cfg, ti};
	char buf[300];
	int rc;

	chap_algs_default(t->chap_algs, &t->nchap_algs);
	if ((rc = want_object(c, NULL, v)) || (rc = check_keys(c, v, keys)) ||
	    (rc = get_iscsi_name(c, v, "name", &t->name)))
		return rc;
	for (size_t i = 0; i < ti; i++)
		if (strcmp(cfg->targets[i].name, t->name) == 0)
			return fail(c, "name", false,
				    "target \"%s\" is already defined by "
				    "targets[%zu]",
				    esc(t->name, buf, sizeof(buf)), i);
	if ((rc = get_strdup(c, v, "alias", 255, STR_PRINTABLE, &t->alias)) ||
	    (rc = parse_target_portals(c, v, cfg, t)) ||
	    (rc = parse_list(c, v, "luns", (void **)&t->luns, sizeof(*t->luns), &t->nluns, one_lun,
			     &la)) ||
	    (rc = parse_list(c, v, "acls", (void **)&t->acls, sizeof(*t->acls), &t->nacls, one_acl,
			     t)) ||
	    (rc = parse_chap(c, v, "chap", false, &t->chap)) ||
	    (rc = parse_chap(c, v, "mutual_chap", true, &t->mutual_chap)) ||
	    (rc = parse_chap_algs(c, v, "chap_algorithms", t->chap_algs, &t->nchap_algs)) ||
	    (rc = get_u32(c, v, "max_sessions", 0, 65535, &t->max_sessions)) ||
	    (rc = parse_alua(c, v, cfg, t)))
		return rc;
	return check_target_chap(c, v, t);
}

static int parse_targets(struct ctx *c, json_t *root, struct ix_config *cfg)
{
	json_t *v = member(root, "targets"), *e;
	size_t i;
	int rc = 0;

	if (!v)
		return 0;
	if ((rc = want_array(c, "targets", v)))
		return rc;
	cfg->targets = alloc_array(c, json_array_size(v), sizeof(*cfg->targets));
	if (!cfg->targets)
		return -ENOMEM;
	cfg->ntargets = json_array_size(v);
	push_key(c, "targets");
	json_array_foreach(v, i, e)
	{
		push_idx(c, i);
		rc = parse_target(c, e, cfg, i);
		pop(c);
		if (rc)
			break;
	}
	pop(c);
	return rc;
}

/* ---- entry points ---------------------------------------------------------------------- */

static int parse_root(struct ctx *c, json_t *root, struct ix_config *cfg)
{
	static const char *const keys[] = {"version", "global", "portals", "targets", "testing",
					   NULL};
	uint64_t version = 1;
	int rc;

	global_defaults(&cfg->global);
	if (!json_is_object(root))
		return fail(c, NULL, false, "the configuration must be a JSON object, not %s",
			    type_name(root));
	if ((rc = check_keys(c, root, keys)) ||
	    (rc = get_uint(c, root, "version", 1, 1, &version)) ||
	    (rc = parse_global(c, root, &cfg->global)) || (rc = parse_portals(c, root, cfg)) ||
	    (rc = parse_targets(c, root, cfg)) || (rc = parse_testing(c, root, cfg)))
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
