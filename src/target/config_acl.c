/* Configuration: a target's "acls" (initiators allowed, their CHAP credentials and LUN
 * masking). */
#include "target/config_int.h"

#include <string.h>

/* One entry of an ACL's "luns": {"lun": M, "target_lun": N} shows the target's LUN N to this
 * initiator as LUN M (default M = N). */
static int parse_acl_lun(struct cfg_ctx *c, json_t *v, size_t i, void *arg)
{
	static const char *const keys[] = {"lun", "target_lun", NULL};
	struct cfg_target *t = ((void **)arg)[0];
	struct cfg_acl *a = ((void **)arg)[1];
	struct cfg_acl_lun *l = &a->luns[i];
	bool found = false;
	int rc;

	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_check_keys(c, v, keys)) ||
	    (rc = cfg_get_u32(c, v, "target_lun", 0, SCSI_MAX_LUNS - 1, &l->target_lun)))
		return rc;
	if (!cfg_member(v, "target_lun"))
		return cfg_fail(c, "target_lun", false, "required but missing");
	l->lun = l->target_lun;
	if ((rc = cfg_get_u32(c, v, "lun", 0, SCSI_MAX_LUNS - 1, &l->lun)))
		return rc;
	for (size_t k = 0; k < t->nluns; k++)
		found = found || t->luns[k].lun == l->target_lun;
	if (!found)
		return cfg_fail(c, "target_lun", false, "the target has no LUN %u", l->target_lun);
	for (size_t k = 0; k < i; k++) {
		if (a->luns[k].lun == l->lun)
			return cfg_fail(c, "lun", false, "LUN %u is already mapped by luns[%zu]",
				    l->lun, k);
		if (a->luns[k].target_lun == l->target_lun)
			return cfg_fail(c, "target_lun", false,
					"LUN %u is already shown by luns[%zu]", l->target_lun, k);
	}
	return 0;
}

static int parse_acl_luns(struct cfg_ctx *c, json_t *v, struct cfg_target *t, struct cfg_acl *a)
{
	void *arg[2] = {t, a};

	const struct list_spec luns = {"luns", NULL, sizeof(*a->luns), parse_acl_lun};

	a->masked = cfg_member(v, "luns") != NULL;
	return cfg_parse_list(c, v, &luns, (void **)&a->luns, &a->nluns, arg);
}

static int iscsi_name_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	return cfg_get_iscsi_name(c, obj, k->name, cfg_key_at(k, base));
}

/* Parsed by parse_acl itself (it needs the target): only named here, so the key is allowed. */
static int acl_luns_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	(void)c, (void)obj, (void)k, (void)base;
	return 0;
}

static const struct key acl_keys[] = {
    KEY_FN("initiator", (struct cfg_acl, initiator), iscsi_name_key),
    KEY_FN("chap", (struct cfg_acl, chap), cfg_chap_key),
    KEY_FN("mutual_chap", (struct cfg_acl, mutual_chap), cfg_mutual_chap_key),
    KEY_FN("luns", (struct cfg_acl, luns), acl_luns_key),
    KEY_FN("qos", (struct cfg_acl, qos), cfg_qos_key), KEY_END};

int cfg_parse_acl(struct cfg_ctx *c, json_t *v, struct cfg_target *t, size_t idx)
{
	struct cfg_acl *a = &t->acls[idx];
	int rc;

	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_parse_table(c, v, acl_keys, a)) ||
	    (rc = parse_acl_luns(c, v, t, a)))
		return rc;
	for (size_t i = 0; i < idx; i++)
		if (strcmp(t->acls[i].initiator, a->initiator) == 0)
			return cfg_fail(c, "initiator", false, "already listed in acls[%zu]", i);
	return 0;
}
