/* Configuration: test-only features (docs/configuration.md, "testing"): the "testing" section
 * and the error rules of LUNs with backend "error". */
#include "target/config_int.h"

#include <errno.h>

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

/* transport_faults.opcodes: a bit per opcode in *(uint64_t *)arg */
static int one_opcode(struct cfg_ctx *c, json_t *o, size_t i, void *arg)
{
	(void)i;
	if (!json_is_integer(o) || json_integer_value(o) < 0 || json_integer_value(o) > 63)
		return cfg_fail(c, NULL, false, "must be an opcode number from 0 to 63");
	*(uint64_t *)arg |= 1ull << json_integer_value(o);
	return 0;
}

static int fault_opcodes(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec opcodes = {k->name, NULL, 0, one_opcode};

	return cfg_parse_list(c, obj, &opcodes, NULL, NULL, cfg_key_at(k, base));
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

static int transport_faults(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_testing *t = base;
	json_t *f = cfg_member(obj, k->name);
	int rc;

	if (!f)
		return 0;
	t->transport_faults = true;
	cfg_key_defaults(fault_keys, &t->faults);
	if ((rc = cfg_want_object(c, k->name, f)))
		return rc;
	cfg_push_key(c, k->name);
	rc = cfg_parse_table(c, f, fault_keys, &t->faults);
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
