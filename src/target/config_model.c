/* The configuration's data model outside the parser: iSCSI name syntax, freeing, and the
 * lookups login and discovery use. */
#include "target/config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_BYTES 223 /* RFC 7143 4.2.7 */

/* ---- iSCSI names ----------------------------------------------------------------------- */

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0';
}

/* "yyyy-mm.naming.authority[:anything]" after "iqn." */
static const char *iqn_error(const char *s)
{
	const char *auth, *colon;
	int month;

	for (int i = 0; i < 7; i++)
		if (i == 4 ? s[i] != '-' : !(s[i] >= '0' && s[i] <= '9'))
			return "\"iqn.\" must be followed by a date yyyy-mm";
	month = (s[5] - '0') * 10 + (s[6] - '0');
	if (month < 1 || month > 12)
		return "the month in iqn.yyyy-mm must be 01 to 12";
	if (s[7] != '.')
		return "the date in iqn.yyyy-mm must be followed by '.' and a reversed domain name";
	auth = s + 8;
	colon = strchr(auth, ':');
	if (colon == auth || *auth == '\0')
		return "the reversed domain name after iqn.yyyy-mm. is missing";
	for (const char *p = auth; p < (colon ? colon : auth + strlen(auth)); p++) {
		bool edge = p == auth || p[1] == '\0' || p + 1 == colon;
		if (*p == '.' && (edge || p[1] == '.'))
			return "the reversed domain name after iqn.yyyy-mm. has an empty label";
	}
	if (colon && colon[1] == '\0')
		return "nothing follows the ':'";
	return NULL;
}

const char *cfg_iscsi_name_error(const char *s)
{
	size_t n = strlen(s);

	if (n > NAME_MAX_BYTES)
		return "is longer than 223 bytes";
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 'A' && s[i] <= 'Z')
			return "must be lower-case (the normalized form of an iSCSI name)";
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '.' || ch == ':'))
			return "contains a character other than a-z, 0-9, '-', '.' and ':'";
	}
	if (strncmp(s, "iqn.", 4) == 0)
		return iqn_error(s + 4);
	if (strncmp(s, "eui.", 4) == 0)
		return all_hex(s + 4, 16) ? NULL : "\"eui.\" must be followed by 16 hex digits";
	if (strncmp(s, "naa.", 4) == 0)
		return all_hex(s + 4, 16) || all_hex(s + 4, 32)
			   ? NULL
			   : "\"naa.\" must be followed by 16 or 32 hex digits";
	return "must start with \"iqn.\", \"eui.\" or \"naa.\"";
}

/* ---- freeing -------------------------------------------------------------------------- */

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static void free_chap(struct cfg_chap *ch)
{
	free(ch->user);
	free_secret(ch->secret);
}

static void free_target(struct cfg_target *t)
{
	free(t->name);
	free(t->alias);
	for (size_t i = 0; t->portals && i < t->nportals; i++)
		free(t->portals[i]);
	free(t->portals);
	for (size_t i = 0; t->luns && i < t->nluns; i++) {
		struct scsi_lu_cfg *lu = &t->luns[i].lu;
		free((char *)lu->path);
		free((char *)lu->vendor);
		free((char *)lu->product);
		free((char *)lu->serial);
		free((void *)lu->err_rules);
		free((char *)lu->state_dir);
		free((char *)lu->bs.rbd.pool);
		free((char *)lu->bs.rbd.image);
		free((char *)lu->bs.rbd.ns);
		free((char *)lu->bs.rbd.conf);
		free((char *)lu->bs.rbd.client);
		free((char *)lu->bs.rbd.keyring);
	}
	free(t->luns);
	for (size_t i = 0; t->acls && i < t->nacls; i++) {
		free(t->acls[i].initiator);
		free_chap(&t->acls[i].chap);
		free_chap(&t->acls[i].mutual_chap);
		free(t->acls[i].luns);
	}
	free(t->acls);
	free_chap(&t->chap);
	free_chap(&t->mutual_chap);
	free(t->redirect.address);
	for (size_t i = 0; t->redirect.addresses && i < t->redirect.naddresses; i++)
		free(t->redirect.addresses[i]);
	free(t->redirect.addresses);
	for (size_t i = 0; t->redirect.portals && i < t->redirect.nportals; i++)
		free(t->redirect.portals[i]);
	free(t->redirect.portals);
	for (size_t i = 0; t->redirect.owners && i < t->redirect.nowners; i++)
		free(t->redirect.owners[i].address);
	free(t->redirect.owners);
}

void cfg_free(struct ix_config *cfg)
{
	if (!cfg)
		return;
	free_chap(&cfg->global.discovery_chap);
	free_chap(&cfg->global.discovery_mutual_chap);
	free(cfg->global.mgmt_socket);
	free(cfg->global.metrics_listen);
	free(cfg->global.mgmt_group);
	free(cfg->global.state_dir);
	free(cfg->global.isns.server);
	free(cfg->global.isns.entity);
	for (size_t i = 0; cfg->portals && i < cfg->nportals; i++) {
		free(cfg->portals[i].name);
		free(cfg->portals[i].address);
	}
	free(cfg->portals);
	for (size_t i = 0; cfg->targets && i < cfg->ntargets; i++)
		free_target(&cfg->targets[i]);
	free(cfg->targets);
	free(cfg);
}

/* ---- lookups --------------------------------------------------------------------------- */

/* Configured names are lower-case (validated); the peer's may differ only in case. */
const struct cfg_target *cfg_find_target(const struct ix_config *cfg, const char *name)
{
	for (size_t i = 0; name && i < cfg->ntargets; i++)
		if (strcasecmp(cfg->targets[i].name, name) == 0)
			return &cfg->targets[i];
	return NULL;
}

const struct cfg_portal *cfg_find_portal(const struct ix_config *cfg, const char *name)
{
	for (size_t i = 0; name && i < cfg->nportals; i++)
		if (cfg->portals[i].name && strcmp(cfg->portals[i].name, name) == 0)
			return &cfg->portals[i];
	return NULL;
}

const struct cfg_acl *cfg_find_acl(const struct cfg_target *t, const char *initiator)
{
	static const struct cfg_acl open_acl; /* immutable: "anyone, no per-initiator CHAP" */

	if (t->nacls == 0)
		return &open_acl;
	for (size_t i = 0; initiator && i < t->nacls; i++)
		if (strcasecmp(t->acls[i].initiator, initiator) == 0)
			return &t->acls[i];
	return NULL;
}

bool cfg_target_on_portal(const struct cfg_target *t, const struct cfg_portal *p)
{
	if (t->nportals == 0)
		return true;
	for (size_t i = 0; i < t->nportals; i++)
		if (strcmp(t->portals[i], p->name) == 0)
			return true;
	return false;
}

const struct cfg_redirect *cfg_target_redirect(const struct cfg_target *t,
					       const struct cfg_portal *p)
{
	const struct cfg_redirect *r = &t->redirect;

	if (!r->address && !r->naddresses && !r->nowners)
		return NULL;
	if (r->nportals == 0)
		return r;
	for (size_t i = 0; i < r->nportals; i++)
		if (strcmp(r->portals[i], p->name) == 0)
			return r;
	return NULL;
}
