/* Configuration: the "portals" section (addresses, ports, TPGTs and the transports each
 * serves). */
#include "target/config_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dm/dm.h"

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

/* "transports": the registered names (dm/dm.h), each a bit of cfg_portal.transports. */
static int one_transport(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	uint32_t *seen = arg;
	const char *s = json_string_value(e);
	int id = s ? dm_find_id(s) : -ENOENT;
	char buf[64], names[128];

	(void)i;
	if (!s)
		return cfg_fail(c, NULL, false, "must be a string, not %s", cfg_type_name(e));
	if (id < 0)
		return cfg_fail(c, NULL, false, "unknown transport \"%s\" (%s)",
				cfg_esc(s, buf, sizeof(buf)),
				dm_names("", " or ", names, sizeof(names)));
	if (*seen & (1u << id))
		return cfg_fail(c, NULL, false, "\"%s\" is listed twice", s);
	*seen |= 1u << id;
	return 0;
}

static int parse_transports(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	char empty[160], names[128];
	const struct list_spec transports = {k->name, empty, 0, one_transport};
	struct cfg_portal *p = base;
	uint32_t seen = 0;
	int rc;

	dm_names("\"", ", ", names, sizeof(names));
	snprintf(empty, sizeof(empty), "must list %s%s", names,
		 dm_transport(2) ? " or several" : dm_transport(1) ? " or both" : "");
	p->transports = 1u << DM_ID_DEFAULT;
	if ((rc = cfg_parse_list(c, obj, &transports, NULL, NULL, &seen)) ||
	    !cfg_member(obj, k->name))
		return rc;
	p->transports = seen;
	return 0;
}

static int portal_address(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_portal *p = base;
	const char *addr;
	struct addr a;
	char buf[128];
	int rc;

	if ((rc = cfg_get_str(c, obj, k->name, 64, STR_REQUIRED | STR_PRINTABLE, &addr)))
		return rc;
	if (!p->name && (rc = cfg_dup_str(c, "default", &p->name)))
		return rc;
	if (!parse_addr(addr, &a))
		return cfg_fail(c, k->name, false,
			    "\"%s\" is not an IPv4 or IPv6 address (no brackets or host names; "
			    "\"0.0.0.0\" or \"::\" listen on every address)",
			    cfg_esc(addr, buf, sizeof(buf)));
	return cfg_dup_str(c, addr, &p->address);
}

#define PORTAL(f) (struct cfg_portal, f)
static const struct key portal_keys[] = {
    KEY_STR("name", PORTAL(name), 64, STR_PRINTABLE), /* default "default" */
    KEY_FN("address", PORTAL(address), portal_address),
    KEY_NUM("port", K_U16, PORTAL(port), 1, 65535, 3260),
    KEY_NUM("tpgt", K_U16, PORTAL(tpgt), 0, 65535, 1),
    KEY_FN("transports", PORTAL(transports), parse_transports), /* default: DM_ID_DEFAULT */
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

static int parse_portal(struct cfg_ctx *c, json_t *v, struct ix_config *cfg, size_t idx)
{
	struct cfg_portal *p = &cfg->portals[idx];
	char buf[128];
	int rc;

	cfg_key_defaults(portal_keys, p);
	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_parse_table(c, v, portal_keys, p)))
		return rc;
	for (size_t i = 0; i < idx; i++) {
		const struct cfg_portal *q = &cfg->portals[i];
		if (strcmp(q->name, p->name) == 0)
			return cfg_fail(c, "name", false,
				    "portal name \"%s\" is already used by "
				    "portals[%zu]",
				    cfg_esc(p->name, buf, sizeof(buf)), i);
		if (portals_clash(p, q))
			return cfg_fail(c, "address", false,
				    "%s port %u overlaps portals[%zu] (%s port %u): both cannot "
				    "listen",
				    p->address, p->port, i, q->address, q->port);
	}
	return 0;
}

static int one_portal(struct cfg_ctx *c, json_t *v, size_t i, void *cfg)
{
	return parse_portal(c, v, cfg, i);
}

static int default_portal(struct cfg_ctx *c, struct ix_config *cfg)
{
	int rc;

	cfg->portals = cfg_alloc_array(c, 1, sizeof(*cfg->portals));
	if (!cfg->portals)
		return -ENOMEM;
	cfg->nportals = 1;
	cfg->portals[0] =
	    (struct cfg_portal){.port = 3260, .tpgt = 1, .transports = 1u << DM_ID_DEFAULT};
	if ((rc = cfg_dup_str(c, "default", &cfg->portals[0].name)))
		return rc;
	return cfg_dup_str(c, "127.0.0.1", &cfg->portals[0].address);
}

int cfg_parse_portals(struct cfg_ctx *c, json_t *root, const struct key *k, void *base)
{
	const struct list_spec portals = {
	    k->name, "must list at least one portal (omit it for 127.0.0.1:3260)",
	    sizeof(struct cfg_portal), one_portal};
	struct ix_config *cfg = base;

	if (!cfg_member(root, k->name))
		return default_portal(c, cfg);
	return cfg_parse_list(c, root, &portals, (void **)&cfg->portals, &cfg->nportals, cfg);
}
