/* Configuration: a target's ALUA target port groups (docs/configuration.md, "alua"). */
#include "target/config_int.h"

#include <string.h>

/* ---- ALUA target port groups (docs/configuration.md, "alua") ---------------------------- */

static int alua_add_port(struct cfg_ctx *c, struct scsi_alua_cfg *a, struct scsi_alua_group_cfg *g,
			 uint16_t rtpi)
{
	for (unsigned i = 0; i < a->ngroups; i++)
		for (unsigned j = 0; j < a->groups[i].nports; j++)
			if (a->groups[i].ports[j] == rtpi && &a->groups[i] != g)
				return cfg_fail(c, NULL, false,
					    "relative target port %u is already in group %u", rtpi,
					    a->groups[i].id);
			else if (a->groups[i].ports[j] == rtpi)
				return 0; /* two portals of one TPGT: one target port */
	if (g->nports >= SCSI_ALUA_MAX_PORTS)
		return cfg_fail(c, NULL, false, "more than %d target ports in one group",
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
static int one_alua_portal(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct group_arg *ga = arg;
	const char *s = json_string_value(e);
	const struct cfg_portal *p = s ? cfg_find_portal(ga->cfg, s) : NULL;
	char buf[128];

	(void)i;
	if (!s)
		return cfg_fail(c, NULL, false, "must be a portal name, not %s", cfg_type_name(e));
	if (!p || !cfg_target_on_portal(ga->t, p))
		return cfg_fail(c, NULL, false, "the target has no portal named \"%s\"",
			    cfg_esc(s, buf, sizeof(buf)));
	if (p->tpgt == 0)
		return cfg_fail(c, NULL, false,
			    "portal \"%s\" has tpgt 0, which cannot be a relative target "
			    "port: give it a tpgt of 1 or more",
			    cfg_esc(s, buf, sizeof(buf)));
	ga->g->local = true; /* this gateway's: follows an RBD lock (docs/ha.md) */
	return alua_add_port(c, ga->a, ga->g, p->tpgt);
}

/* Target ports of other gateways that export the same LUs, by relative target port id. */
static int one_remote_port(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct group_arg *ga = arg;
	json_int_t n = json_is_integer(e) ? json_integer_value(e) : -1;

	(void)i;
	if (n < 1 || n > 65535)
		return cfg_fail(c, NULL, false, "must be a relative target port id (1 to 65535)");
	return alua_add_port(c, ga->a, ga->g, (uint16_t)n);
}

/* The keys of one group; base is its struct group_arg. */
static int alua_group_id(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct group_arg *ga = base;
	int rc = cfg_get_u16(c, obj, k->name, 1, 65535, &ga->g->id);

	for (unsigned i = 0; !rc && i + 1 < ga->a->ngroups; i++)
		if (ga->a->groups[i].id == ga->g->id)
			return cfg_fail(c, k->name, false,
					"group %u is already defined by groups[%u]", ga->g->id, i);
	return rc;
}

static int alua_group_state(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct group_arg *ga = base;
	const char *st;
	int rc = cfg_get_str(c, obj, k->name, 32, STR_REQUIRED | STR_PRINTABLE, &st);

	if (rc)
		return rc;
	if (scsi_alua_state_parse(st, &ga->g->state) < 0)
		return cfg_fail(c, k->name, false,
			    "unknown state (use active/optimized, active/non-optimized, standby, "
			    "unavailable, offline or transitioning)");
	return 0;
}

static int alua_group_preferred(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct group_arg *ga = base;

	return cfg_get_bool(c, obj, k->name, &ga->g->preferred);
}

static int alua_local_ports(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec ports = {k->name, NULL, 0, one_alua_portal};

	return cfg_parse_list(c, obj, &ports, NULL, NULL, base);
}

static int alua_remote_ports(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec ports = {k->name, NULL, 0, one_remote_port};

	return cfg_parse_list(c, obj, &ports, NULL, NULL, base);
}

static const struct key alua_group_keys[] = {
    {.name = "id", .type = K_FN, .flags = KEY_PRESENT, .parse = alua_group_id},
    {.name = "state", .type = K_FN, .parse = alua_group_state},
    {.name = "preferred", .type = K_FN, .parse = alua_group_preferred},
    {.name = "portals", .type = K_FN, .parse = alua_local_ports},
    {.name = "relative_ports", .type = K_FN, .parse = alua_remote_ports},
    KEY_END};

static int alua_group(struct cfg_ctx *c, json_t *gv, size_t gi, void *arg)
{
	struct group_arg ga = *(struct group_arg *)arg;
	struct scsi_alua_cfg *a = ga.a;
	int rc;

	(void)gi;
	ga.g = &a->groups[a->ngroups++];
	if ((rc = cfg_want_object(c, NULL, gv)) ||
	    (rc = cfg_parse_table(c, gv, alua_group_keys, &ga)))
		return rc;
	if (ga.g->nports == 0)
		return cfg_fail(c, NULL, false, "has no target port (\"portals\" or "
					    "\"relative_ports\")");
	return 0;
}

/* Every portal the target is on must be a port of some group. */
static int alua_coverage(struct cfg_ctx *c, const struct ix_config *cfg, const struct cfg_target *t)
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
			return cfg_fail(c, "groups", false,
				    "portal \"%s\" (tpgt %u) is in no group", p->name, p->tpgt);
	}
	return 0;
}

int cfg_parse_alua(struct cfg_ctx *c, json_t *tv, const struct ix_config *cfg,
		      struct cfg_target *t)
{
	static const char *const keys[] = {"groups", "explicit", "transition_time",
					   "implicit_failover_ms", NULL};
	json_t *v = cfg_member(tv, "alua"), *groups;
	struct scsi_alua_cfg *a = &t->alua;
	struct group_arg ga = {cfg, t, a, NULL};
	uint16_t trans = 0;
	int rc = 0;

	if (!v)
		return 0;
	a->explicit_ok = true;
	a->implicit_failover_ms = 5000;
	cfg_push_key(c, "alua");
	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_check_keys(c, v, keys)) ||
	    (rc = cfg_get_bool(c, v, "explicit", &a->explicit_ok)) ||
	    (rc = cfg_get_u16(c, v, "transition_time", 0, 255, &trans)) ||
	    (rc = cfg_get_u32(c, v, "implicit_failover_ms", 0, 600000, &a->implicit_failover_ms)))
		goto out;
	a->transition_s = (uint8_t)trans;
	groups = cfg_member(v, "groups");
	if (!groups) {
		rc = cfg_missing(c, "groups");
		goto out;
	}
	if ((rc = cfg_want_array(c, "groups", groups)))
		goto out;
	if (json_array_size(groups) == 0 || json_array_size(groups) > SCSI_ALUA_MAX_GROUPS) {
		rc = cfg_fail(c, "groups", false, "must list 1 to %d target port groups",
			  SCSI_ALUA_MAX_GROUPS);
		goto out;
	}
	rc = cfg_each_elem(c, "groups", groups, alua_group, &ga);
	if (!rc)
		rc = alua_coverage(c, cfg, t);
out:
	cfg_pop(c);
	return rc;
}
