/* Configuration: CHAP credentials and algorithm lists (targets, ACLs, discovery), and the
 * file-wide rule that one secret never serves both directions. */
#include "target/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "proto/chap.h"

/* ---- CHAP ------------------------------------------------------------------------------ */

static int remember_secret(struct cfg_ctx *c, const char *secret, bool mutual)
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

static int chap_user(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct chap_arg *ca = base;

	return cfg_get_strdup(c, obj, k->name, 255, STR_REQUIRED | STR_PRINTABLE, &ca->out->user);
}

static int chap_secret(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct chap_arg *ca = base;
	int rc =
	    cfg_get_strdup(c, obj, k->name, CHAP_MAX_SECRET_LEN, STR_REQUIRED, &ca->out->secret);

	if (rc)
		return rc;
	cfg_push_key(c, k->name);
	rc = remember_secret(c, ca->out->secret, ca->mutual);
	cfg_pop(c);
	return rc;
}

static const struct key chap_keys[] = {{.name = "user", .type = K_FN, .parse = chap_user},
				       {.name = "secret", .type = K_FN, .parse = chap_secret},
				       KEY_END};

int cfg_parse_chap(struct cfg_ctx *c, json_t *parent, const char *key, bool mutual,
		      struct cfg_chap *out)
{
	struct chap_arg ca = {out, mutual};
	json_t *v = cfg_member(parent, key);
	int rc;

	if (!v)
		return 0;
	if ((rc = cfg_want_object(c, key, v)))
		return rc;
	cfg_push_key(c, key);
	rc = cfg_check_table(c, v, chap_keys);
	if (!rc && !cfg_member(v, "user") && !cfg_member(v, "secret"))
		rc = cfg_fail(c, NULL, false, "a CHAP credential needs \"user\" and \"secret\"");
	if (!rc && cfg_member(v, "user") && !cfg_member(v, "secret"))
		rc = cfg_fail(c, "secret", false,
			  "required when \"user\" is set (CHAP user without "
			  "secret)");
	if (!rc)
		rc = cfg_parse_keys(c, v, chap_keys, &ca);
	cfg_pop(c);
	return rc;
}

void cfg_chap_algs_default(uint8_t *algs, int *n)
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

static int one_chap_alg(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
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
		return cfg_fail(c, NULL, false, "must be a string, not %s", cfg_type_name(e));
	if (a < 0)
		return cfg_fail(c, NULL, false,
			    "unknown CHAP algorithm \"%s\" (md5, sha1, sha256, sha3-256)",
			    cfg_esc(s, buf, sizeof(buf)));
	if (memchr(aa->algs, a, (size_t)*aa->n))
		return cfg_fail(c, NULL, false, "\"%s\" is listed twice", s);
	aa->algs[(*aa->n)++] = (uint8_t)a;
	return 0;
}

int cfg_parse_chap_algs(struct cfg_ctx *c, json_t *parent, const char *key, uint8_t *algs, int *n)
{
	const struct list_spec l = {key, "must not be empty (omit it for the default)", 0,
				    one_chap_alg};
	struct algs_arg aa = {algs, n};

	return cfg_parse_list(c, parent, &l, NULL, NULL, &aa);
}

/* RFC 7143 (12.1.3): a secret used to authenticate initiators must not also be used to
 * authenticate a target. Checked over the whole file once everything is parsed. */
int cfg_check_secret_directions(struct cfg_ctx *c)
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
			return cfg_fail(c, NULL, false,
				    "the mutual CHAP secret equals the one-way secret at %s; RFC "
				    "7143 requires a different secret for each direction",
				    where);
		}
	}
	return 0;
}

int cfg_chap_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	return cfg_parse_chap(c, obj, k->name, false, cfg_key_at(k, base));
}

int cfg_mutual_chap_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	return cfg_parse_chap(c, obj, k->name, true, cfg_key_at(k, base));
}
