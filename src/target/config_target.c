/* Configuration: the "targets" section (names, portals, CHAP rules; LUNs, ACLs and ALUA are
 * parsed by their own files). */
#include "target/config_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/addr.h"

/* ---- targets --------------------------------------------------------------------------- */

/* What the parsers of a target's members need: the target is cfg->targets[ti]. */
struct tgt_arg {
	struct ix_config *cfg;
	size_t ti;
};

static int one_target_portal(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct tgt_arg *ta = arg;
	struct cfg_target *t = &ta->cfg->targets[ta->ti];
	const char *s = json_string_value(e);
	char buf[128];

	if (!s)
		return cfg_fail(c, NULL, false, "must be a portal name, not %s", cfg_type_name(e));
	if (!cfg_find_portal(ta->cfg, s))
		return cfg_fail(c, NULL, false, "no portal is named \"%s\"",
				cfg_esc(s, buf, sizeof(buf)));
	for (size_t j = 0; j < i; j++)
		if (strcmp(t->portals[j], s) == 0)
			return cfg_fail(c, NULL, false, "\"%s\" is listed twice", s);
	return cfg_dup_str(c, s, &t->portals[i]);
}

static int one_lun(struct cfg_ctx *c, json_t *v, size_t i, void *arg)
{
	struct tgt_arg *la = arg;
	return cfg_parse_lun(c, v, la->cfg, la->ti, i);
}

static int one_acl(struct cfg_ctx *c, json_t *v, size_t i, void *arg)
{
	return cfg_parse_acl(c, v, arg, i);
}

static bool target_has_chap(const struct cfg_target *t)
{
	bool any = t->chap.secret != NULL;

	for (size_t i = 0; i < t->nacls; i++)
		any = any || t->acls[i].chap.secret;
	return any;
}

/* default: true when the target or any ACL has a CHAP secret (parsed before it) */
static int target_chap_required(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;

	t->chap_required = target_has_chap(t);
	return cfg_get_bool(c, obj, k->name, &t->chap_required);
}

/* Cross-field CHAP rules of one target. */
static int check_target_chap(struct cfg_ctx *c, struct cfg_target *t)
{
	char buf[300];

	if (t->mutual_chap.secret && !target_has_chap(t))
		return cfg_fail(c, "mutual_chap", false,
			    "mutual CHAP needs one-way CHAP as well (\"chap\" or an ACL's "
			    "\"chap\"): the initiator authenticates first");
	for (size_t i = 0; i < t->nacls; i++) {
		if (!t->acls[i].mutual_chap.secret || t->acls[i].chap.secret || t->chap.secret)
			continue;
		cfg_push_key(c, "acls");
		cfg_push_idx(c, i);
		cfg_fail(c, "mutual_chap", false,
			 "mutual CHAP needs one-way CHAP as well (this ACL's \"chap\" or the "
			 "target's): the initiator authenticates first");
		cfg_pop(c);
		cfg_pop(c);
		return -EINVAL;
	}
	if (!t->chap_required || t->chap.secret)
		return 0;
	if (t->nacls == 0)
		return cfg_fail(c, "chap_required", false,
			    "is true but the target has no CHAP credential (\"chap\" or "
			    "\"acls\" with \"chap\")");
	for (size_t i = 0; i < t->nacls; i++) {
		if (t->acls[i].chap.secret)
			continue;
		cfg_push_key(c, "acls");
		cfg_push_idx(c, i);
		cfg_fail(c, NULL, false,
		     "initiator \"%s\" has no CHAP credential but chap_required is true (give "
		     "it \"chap\", or give the target one)",
		     cfg_esc(t->acls[i].initiator, buf, sizeof(buf)));
		cfg_pop(c);
		cfg_pop(c);
		return -EINVAL;
	}
	return 0;
}

static int target_name(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;
	size_t ti = (size_t)(t - c->cfg->targets);
	char buf[300];
	int rc;

	if ((rc = cfg_get_iscsi_name(c, obj, k->name, &t->name)))
		return rc;
	for (size_t i = 0; i < ti; i++)
		if (strcmp(c->cfg->targets[i].name, t->name) == 0)
			return cfg_fail(c, k->name, false,
				    "target \"%s\" is already defined by "
				    "targets[%zu]",
				    cfg_esc(t->name, buf, sizeof(buf)), i);
	return 0;
}

static int target_portals(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec portals = {k->name,
					  "must not be empty (omit it to use every portal)",
					  sizeof(char *), one_target_portal};
	struct cfg_target *t = base;
	struct tgt_arg ta = {c->cfg, (size_t)(t - c->cfg->targets)};

	return cfg_parse_list(c, obj, &portals, (void **)&t->portals, &t->nportals, &ta);
}

static int target_luns(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec luns = {k->name, NULL, sizeof(struct cfg_lun), one_lun};
	struct cfg_target *t = base;
	struct tgt_arg ta = {c->cfg, (size_t)(t - c->cfg->targets)};

	return cfg_parse_list(c, obj, &luns, (void **)&t->luns, &t->nluns, &ta);
}

static int target_acls(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec acls = {k->name, NULL, sizeof(struct cfg_acl), one_acl};
	struct cfg_target *t = base;

	return cfg_parse_list(c, obj, &acls, (void **)&t->acls, &t->nacls, t);
}

static int target_algs(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;

	return cfg_parse_chap_algs(c, obj, k->name, t->chap_algs, &t->nchap_algs);
}

static int target_alua(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	(void)k;
	return cfg_parse_alua(c, obj, c->cfg, base);
}

/* ---- redirect ------------------------------------------------------------------------- */

/* A host of a TargetAddress: an IPv4 or IPv6 literal, or a DNS name (RFC 7143 13.8:
 * "domainname"; letters, digits, '-' and '.', labels of 1..63). */
static bool redirect_host_ok(const char *h, bool *v6)
{
	unsigned char b[16];
	size_t label = 0;

	*v6 = inet_pton(AF_INET6, h, b) == 1;
	if (*v6 || inet_pton(AF_INET, h, b) == 1)
		return true;
	if (!*h || *h == '.' || *h == '-')
		return false;
	for (const char *p = h; *p; p++) {
		if (*p == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-') ||
		    ++label > 63)
			return false;
	}
	return true;
}

/* A portal address s (member key of the current value, or the value itself with key NULL),
 * normalized into *out. */
static int normalize_portal(struct cfg_ctx *c, const char *key, const char *s, char **out)
{
	char host[ADDR_HOST_MAX], buf[300], norm[ADDR_HOST_MAX + 16];
	uint16_t port;
	int tpgt;
	bool v6;

	if (addr_parse_portal(s, 3260, host, sizeof(host), &port, &tpgt) < 0 ||
	    !redirect_host_ok(host, &v6))
		return cfg_fail(c, key, false,
				"\"%s\" is not a portal address \"HOST[:PORT][,TPGT]\" (HOST an "
				"IPv4 address, a bracketed IPv6 address or a DNS name; PORT 1-65535, "
				"default 3260; TPGT 0-65535)",
				cfg_esc(s, buf, sizeof(buf)));
	if (tpgt >= 0)
		snprintf(norm, sizeof(norm), v6 ? "[%s]:%u,%d" : "%s:%u,%d", host, port, tpgt);
	else
		snprintf(norm, sizeof(norm), v6 ? "[%s]:%u" : "%s:%u", host, port);
	return cfg_dup_str(c, norm, out);
}

/* A portal address member (redirect.address, owners[].address), normalized into *out. */
static int portal_address(struct cfg_ctx *c, json_t *obj, const char *key, char **out)
{
	const char *s;
	int rc;

	if ((rc = cfg_get_str(c, obj, key, 255, STR_REQUIRED | STR_PRINTABLE, &s)))
		return rc;
	return normalize_portal(c, key, s, out);
}

static int redirect_address(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_redirect *r = base;

	return cfg_member(obj, k->name) ? portal_address(c, obj, k->name, &r->address) : 0;
}

static int one_redirect_address(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct cfg_redirect *r = arg;
	const char *s = json_string_value(e);
	size_t n = s ? json_string_length(e) : 0;
	int rc;

	if (!s)
		return cfg_fail(c, NULL, false, "must be a portal address (a string), not %s",
				cfg_type_name(e));
	if (n == 0 || n > 255 || strlen(s) != n)
		return cfg_fail(c, NULL, false, "must be 1 to 255 bytes without NUL");
	rc = normalize_portal(c, NULL, s, &r->addresses[i]);
	for (size_t j = 0; !rc && j < i; j++)
		if (strcmp(r->addresses[j], r->addresses[i]) == 0)
			rc = cfg_fail(c, NULL, false, "\"%s\" is listed twice", r->addresses[i]);
	return rc;
}

static int redirect_addresses(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec addresses = {
	    k->name, "must not be empty (omit it, or give \"address\")", sizeof(char *),
	    one_redirect_address};
	struct cfg_redirect *r = base;

	return cfg_parse_list(c, obj, &addresses, (void **)&r->addresses, &r->naddresses, r);
}

/* The target being parsed, from its redirect member. */
static const struct cfg_target *redirect_target(const struct cfg_redirect *r)
{
	return (const struct cfg_target *)((const char *)r - offsetof(struct cfg_target, redirect));
}

struct owner_arg {
	struct cfg_redirect *r;
	const struct scsi_alua_cfg *alua;
};

static int owner_group(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct owner_arg *oa = base;
	struct cfg_redirect_owner *o = &oa->r->owners[oa->r->nowners];
	const struct scsi_alua_group_cfg *g = NULL;
	int rc;

	if ((rc = cfg_get_u16(c, obj, k->name, 1, 65535, &o->group)))
		return rc;
	for (unsigned i = 0; i < oa->alua->ngroups; i++)
		if (oa->alua->groups[i].id == o->group)
			g = &oa->alua->groups[i];
	if (!g)
		return cfg_fail(c, k->name, false, "the target has no ALUA group %u (alua.groups)",
				o->group);
	if (g->local)
		return cfg_fail(c, k->name, false,
				"group %u is this gateway's own (it has \"portals\"): list the other "
				"gateways' groups",
				o->group);
	for (size_t i = 0; i < oa->r->nowners; i++)
		if (oa->r->owners[i].group == o->group)
			return cfg_fail(c, k->name, false, "group %u is listed twice", o->group);
	return 0;
}

static int owner_address(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct owner_arg *oa = base;

	return portal_address(c, obj, k->name, &oa->r->owners[oa->r->nowners].address);
}

static const struct key owner_keys[] = {
    {.name = "group", .type = K_FN, .flags = KEY_PRESENT, .parse = owner_group},
    {.name = "address", .type = K_FN, .flags = KEY_PRESENT, .parse = owner_address},
    KEY_END};

static int one_owner(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct owner_arg *oa = arg;
	int rc;

	oa->r->nowners = i; /* the ones before are parsed; this one is filled in */
	if ((rc = cfg_want_object(c, NULL, e)) || (rc = cfg_parse_table(c, e, owner_keys, oa)))
		return rc;
	oa->r->nowners = i + 1;
	return 0;
}

static int redirect_owners(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec owners = {k->name,
					 "must not be empty (omit it: no redirection to the owner)",
					 0, one_owner};
	struct cfg_redirect *r = base;
	const struct cfg_target *t = redirect_target(r);
	struct owner_arg oa = {r, &t->alua};
	json_t *v = cfg_member(obj, k->name);

	if (!v)
		return 0;
	if (t->alua.ngroups == 0)
		return cfg_fail(c, k->name, false,
				"needs ALUA groups (the target's \"alua\"): the owner is the gateway "
				"whose group is active/optimized");
	if (json_is_array(v) && json_array_size(v) > 0) {
		r->owners = cfg_alloc_array(c, json_array_size(v), sizeof(*r->owners));
		if (!r->owners)
			return -ENOMEM;
	}
	return cfg_parse_list(c, obj, &owners, NULL, NULL, &oa);
}

struct redirect_portal_arg {
	struct cfg_redirect *r;
	const struct cfg_target *t;
};

static int one_redirect_portal(struct cfg_ctx *c, json_t *e, size_t i, void *arg)
{
	struct redirect_portal_arg *ra = arg;
	const char *s = json_string_value(e);
	const struct cfg_portal *p;
	char buf[128];

	if (!s)
		return cfg_fail(c, NULL, false, "must be a portal name, not %s", cfg_type_name(e));
	p = cfg_find_portal(c->cfg, s);
	if (!p || !cfg_target_on_portal(ra->t, p))
		return cfg_fail(c, NULL, false, "the target has no portal named \"%s\"",
				cfg_esc(s, buf, sizeof(buf)));
	for (size_t j = 0; j < i; j++)
		if (strcmp(ra->r->portals[j], s) == 0)
			return cfg_fail(c, NULL, false, "\"%s\" is listed twice", s);
	return cfg_dup_str(c, s, &ra->r->portals[i]);
}

static int redirect_portals(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	const struct list_spec portals = {k->name,
					  "must not be empty (omit it to redirect on every portal)",
					  sizeof(char *), one_redirect_portal};
	struct cfg_redirect *r = base;
	struct redirect_portal_arg ra = {r, redirect_target(r)};

	return cfg_parse_list(c, obj, &portals, (void **)&r->portals, &r->nportals, &ra);
}

#define REDIRECT(f) (struct cfg_redirect, f)
static const struct key redirect_keys[] = {
    KEY_FN("address", REDIRECT(address), redirect_address),
    KEY_FN("addresses", REDIRECT(addresses), redirect_addresses),
    KEY_BOOL("permanent", REDIRECT(permanent), false),
    KEY_FN("owners", REDIRECT(owners), redirect_owners),
    KEY_FN("portals", REDIRECT(portals), redirect_portals),
    KEY_END};
#undef REDIRECT

/* A redirection to one of the very portals it applies to would send initiators round in a
 * loop: refused when the address is that portal's literal address and port. */
static int check_redirect_loop(struct cfg_ctx *c, const struct cfg_target *t, const char *addr,
			       const char *key)
{
	const struct cfg_redirect *r = &t->redirect;
	char host[ADDR_HOST_MAX];
	unsigned char a[16], b[16];
	uint16_t port;
	int fam;

	if (addr_parse_portal(addr, 3260, host, sizeof(host), &port, NULL) < 0)
		return 0;
	fam = strchr(host, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(fam, host, a) != 1)
		return 0; /* a DNS name: cannot tell here */
	for (size_t i = 0; i < c->cfg->nportals; i++) {
		const struct cfg_portal *p = &c->cfg->portals[i];

		if (!cfg_target_on_portal(t, p) || cfg_target_redirect(t, p) != r ||
		    p->port != port || inet_pton(fam, p->address, b) != 1 ||
		    memcmp(a, b, fam == AF_INET ? 4 : 16) != 0)
			continue;
		return cfg_fail(c, key, false,
				"redirects logins arriving at portal \"%s\" (%s port %u) to that "
				"same portal: they would loop",
				p->name, p->address, p->port);
	}
	return 0;
}

static int target_redirect(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_target *t = base;
	json_t *v;
	int rc = cfg_enter_object(c, obj, k->name, &v);

	if (rc <= 0)
		return rc;
	cfg_key_defaults(redirect_keys, &t->redirect);
	rc = cfg_parse_table(c, v, redirect_keys, &t->redirect);
	if (!rc && !t->redirect.address && !t->redirect.naddresses && !t->redirect.nowners)
		rc = cfg_fail(c, NULL, false,
			      "needs \"address\" (send logins there), \"addresses\" (in turn) or "
			      "\"owners\" (send them to the gateway that owns the LUs)");
	if (!rc && t->redirect.address && t->redirect.naddresses)
		rc = cfg_fail(c, "addresses", false, "and \"address\" exclude each other");
	if (!rc && (t->redirect.address || t->redirect.naddresses) && t->redirect.nowners)
		rc = cfg_fail(c, "owners", false,
			      "and \"address\" / \"addresses\" exclude each other: a fixed address "
			      "sends every login away");
	if (!rc && t->redirect.nowners && t->redirect.permanent)
		rc = cfg_fail(c, "permanent", false,
			      "is for \"address\": a redirection to the owner is always temporary "
			      "(the owner changes)");
	if (!rc && t->redirect.address)
		rc = check_redirect_loop(c, t, t->redirect.address, "address");
	for (size_t i = 0; !rc && i < t->redirect.naddresses; i++) {
		cfg_push_key(c, "addresses"); /* the message names the element: addresses[i] */
		cfg_push_idx(c, i);
		rc = check_redirect_loop(c, t, t->redirect.addresses[i], NULL);
		cfg_pop(c);
		cfg_pop(c);
	}
	cfg_pop(c);
	return rc;
}

#define TARGET(f) (struct cfg_target, f)
static const struct key target_keys[] = {
    KEY_FN("name", TARGET(name), target_name),
    KEY_STR("alias", TARGET(alias), 255, STR_PRINTABLE),
    KEY_FN("portals", TARGET(portals), target_portals),
    KEY_FN("luns", TARGET(luns), target_luns),
    KEY_FN("acls", TARGET(acls), target_acls),
    KEY_FN("chap", TARGET(chap), cfg_chap_key),
    KEY_FN("mutual_chap", TARGET(mutual_chap), cfg_mutual_chap_key),
    KEY_FN("chap_required", TARGET(chap_required), target_chap_required),
    KEY_FN("chap_algorithms", TARGET(chap_algs), target_algs),
    KEY_NUM("max_sessions", K_U32, TARGET(max_sessions), 0, 65535, 0),
    KEY_FN("alua", TARGET(alua), target_alua),
    KEY_FN("redirect", TARGET(redirect), target_redirect),
    KEY_END};
#undef TARGET

static int parse_target(struct cfg_ctx *c, json_t *v, struct ix_config *cfg, size_t ti)
{
	struct cfg_target *t = &cfg->targets[ti];
	int rc;

	cfg_chap_algs_default(t->chap_algs, &t->nchap_algs);
	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_parse_table(c, v, target_keys, t)))
		return rc;
	return check_target_chap(c, t);
}

static int one_target(struct cfg_ctx *c, json_t *v, size_t i, void *cfg)
{
	return parse_target(c, v, cfg, i);
}

int cfg_parse_targets(struct cfg_ctx *c, json_t *root, const struct key *k, void *base)
{
	const struct list_spec targets = {k->name, NULL, sizeof(struct cfg_target), one_target};
	struct ix_config *cfg = base;

	return cfg_parse_list(c, root, &targets, (void **)&cfg->targets, &cfg->ntargets, cfg);
}
