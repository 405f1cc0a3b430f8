/* Configuration: "global.isns", the iSNS server the target registers with (RFC 4171;
 * target/tgt_isns.c does the registering, docs/isns.md describes it). */
#include "target/config_int.h"

#include "proto/isns.h"

/* A numeric IPv4 or IPv6 address: the client connects without a name lookup, which would
 * block the main loop. */
static int server_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	uint8_t ip[16];
	char buf[128];
	const char *s;
	int rc = cfg_get_str(c, obj, k->name, 64, STR_REQUIRED | STR_PRINTABLE, &s);

	if (rc)
		return rc;
	if (isns_addr_parse(s, ip) < 0)
		return cfg_fail(c, k->name, false,
				"\"%s\" is not a numeric IPv4 or IPv6 address (\"192.0.2.10\", "
				"\"2001:db8::10\"; no host names, no port: use \"port\")",
				cfg_esc(s, buf, sizeof(buf)));
	return cfg_dup_str(c, s, cfg_key_at(k, base));
}

#define ISNS(f) (struct cfg_isns, f)
static const struct key isns_keys[] = {
    KEY_BOOL("enabled", ISNS(enabled), true),
    {.name = "server",
     .type = K_FN,
     .off = offsetof(struct cfg_isns, server),
     .flags = KEY_PRESENT,
     .parse = server_key},
    KEY_NUM("port", K_U16, ISNS(port), 1, 65535, ISNS_PORT),
    /* RFC 4171 6.2.6; the server may grant another, which the client then follows */
    KEY_NUM("registration_period_s", K_U32, ISNS(registration_period_s), 10, 604800, 900),
    /* the Entity Identifier (RFC 4171 6.2.1), unique at the server */
    KEY_STR("entity", ISNS(entity), 255, STR_PRINTABLE),
    KEY_END};
#undef ISNS

int cfg_parse_isns(struct cfg_ctx *c, json_t *g, const struct key *k, void *base)
{
	struct cfg_isns *out = cfg_key_at(k, base);
	json_t *v;
	int rc = cfg_enter_object(c, g, k->name, &v);

	if (rc <= 0)
		return rc;
	cfg_key_defaults(isns_keys, out);
	rc = cfg_parse_table(c, v, isns_keys, out);
	cfg_pop(c);
	return rc;
}
