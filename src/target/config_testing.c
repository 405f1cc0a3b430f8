/* Configuration: test-only features (docs/configuration.md, "testing"): the "testing" section
 * and the error rules of LUNs with backend "error". */
#include "target/config_int.h"

#include <errno.h>
#include <string.h>

/* ---- test-only features (docs/configuration.md, "testing") ---------------------------- */

#define MAX_ERR_RULES 16

#define ERR_OP_ANY (BS_ERR_OP_READ | BS_ERR_OP_WRITE | BS_ERR_OP_FLUSH)

/* "op": read, write, flush or any (the default) */
static int err_rule_op(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	static const char *const ops[] = {"read", "write", "flush", "any", NULL};
	int op = -1;
	int rc = cfg_get_enum(c, obj, k->name, ops, "operation", &op);

	if (!rc && op >= 0)
		*(uint8_t *)cfg_key_at(k, base) = op == 3 ? ERR_OP_ANY : (uint8_t)(1u << op);
	return rc;
}

/* "error": none, eio (the default) or enospc */
static int err_rule_error(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	static const char *const errs[] = {"none", "eio", "enospc", NULL};
	static const int err_values[] = {0, -EIO, -ENOSPC};
	int e = -1;
	int rc = cfg_get_enum(c, obj, k->name, errs, "error", &e);

	if (!rc && e >= 0)
		*(int *)cfg_key_at(k, base) = err_values[e];
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

static int parse_err_rule(struct cfg_ctx *c, json_t *v, size_t i, void *arg)
{
	struct bs_err_rule *r = *(struct bs_err_rule **)arg + i;
	int rc;

	r->ops = ERR_OP_ANY;
	r->error = -EIO;
	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_parse_table(c, v, err_rule_keys, r)))
		return rc;
	if (!r->error && !r->delay_ms)
		return cfg_fail(c, "error", false, "\"none\" without delay_ms does nothing");
	return 0;
}

int cfg_parse_err_rules(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	json_t *a = cfg_member(v, "errors");
	void *rules = NULL;
	size_t n = 0;
	int rc;

	if (a && json_is_array(a) && json_array_size(a) > MAX_ERR_RULES)
		return cfg_fail(c, "errors", false, "at most %d rules", MAX_ERR_RULES);
	static const struct list_spec errors = {"errors", NULL, sizeof(struct bs_err_rule),
						parse_err_rule};

	rc = cfg_parse_list(c, v, &errors, &rules, &n, &rules);
	lu->err_rules = rules; /* also on failure: cfg_free() frees it */
	lu->n_err_rules = (uint32_t)n;
	return rc;
}

/* "transport_faults": the options of the datamover wrapper "fault" (transport/fault), which
 * the registry describes (dm.h): its struct dm_opt table becomes a key table here. */
#define FAULT_WRAPPER "fault"
#define MAX_WRAP_OPTS 16

static const struct dm_opt *wrap_opt(const char *name)
{
	const struct dm_wrapper *w = dm_find_wrapper(FAULT_WRAPPER);

	for (const struct dm_opt *o = w->opts; o->name; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

/* DM_OPT_BITS: each number sets its bit in *bits */
struct bits_arg {
	const struct dm_opt *o;
	uint64_t *bits;
};

static int one_bit(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct bits_arg *ba = arg;
	json_int_t n = json_is_integer(e) ? json_integer_value(e) : -1;

	(void)i;
	if (n < 0 || (uint64_t)n < ba->o->min || (uint64_t)n > ba->o->max)
		return cfg_fail(c, NULL, false, "must be %s from %llu to %llu", ba->o->what,
				(unsigned long long)ba->o->min, (unsigned long long)ba->o->max);
	*ba->bits |= 1ull << n;
	return 0;
}

static int wrap_bits(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec bits = {k->name, NULL, 0, one_bit};
	struct bits_arg ba = {wrap_opt(k->name), cfg_key_at(k, base)};

	return cfg_parse_list(c, obj, &bits, NULL, NULL, &ba);
}

/* The key table of the wrapper's options (keys holds MAX_WRAP_OPTS + 1). */
static void wrap_keys(const struct dm_wrapper *w, struct key *keys)
{
	static const enum key_type types[] = {[DM_OPT_BOOL] = K_BOOL,
					      [DM_OPT_U32] = K_U32,
					      [DM_OPT_U64] = K_U64,
					      [DM_OPT_BITS] = K_FN};
	size_t n = 0;

	for (const struct dm_opt *o = w->opts; o->name && n < MAX_WRAP_OPTS; o++, n++)
		keys[n] = (struct key){.name = o->name,
				       .type = types[o->type],
				       .off = o->off,
				       .min = o->min,
				       .max = o->max,
				       .def = o->def,
				       .parse = o->type == DM_OPT_BITS ? wrap_bits : NULL};
	keys[n] = (struct key)KEY_END;
}

static int transport_faults(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct dm_wrapper *w = dm_find_wrapper(FAULT_WRAPPER);
	struct key keys[MAX_WRAP_OPTS + 1];
	struct cfg_testing *t = base;
	json_t *f = cfg_member(obj, k->name);
	int rc;

	if (!f)
		return 0;
	t->transport_faults = true;
	wrap_keys(w, keys);
	cfg_key_defaults(keys, t->faults);
	if ((rc = cfg_want_object(c, k->name, f)))
		return rc;
	cfg_push_key(c, k->name);
	rc = cfg_parse_table(c, f, keys, t->faults);
	cfg_pop(c);
	return rc;
}

static const struct key testing_keys[] = {
    KEY_FN("transport_faults", (struct cfg_testing, faults), transport_faults), KEY_END};

int cfg_parse_testing(struct cfg_ctx *c, json_t *root, const struct key *k, void *base)
{
	struct ix_config *cfg = base;
	json_t *v = cfg_member(root, k->name);
	int rc;

	if (!v)
		return 0;
	cfg->test_features = true;
	if ((rc = cfg_want_object(c, k->name, v)))
		return rc;
	cfg_push_key(c, k->name);
	rc = cfg_parse_table(c, v, testing_keys, &cfg->testing);
	cfg_pop(c);
	return rc;
}
