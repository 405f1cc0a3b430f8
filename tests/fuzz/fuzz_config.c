/* libFuzzer harness for the JSON configuration loader (target/config.c, cfg_load_string).
 *
 * Input: the text of a configuration file (inputs over 64 KiB are skipped; the loader's own
 * limit is 16 MiB and only matters for files). Properties checked beyond "no crash":
 *  - success or -EINVAL; a failure always says why, starting with the file name;
 *  - a loaded configuration is consistent with the lookups the target uses at login: every
 *    target is found by its name (and its upper-case spelling), every portal by its name,
 *    every ACL entry admits its own initiator, and each target names only existing portals.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.json"

static void check_config(const struct ix_config *cfg)
{
	char upper[256];

	if (cfg->nportals == 0)
		abort();
	for (size_t i = 0; i < cfg->nportals; i++)
		if (cfg_find_portal(cfg, cfg->portals[i].name) != &cfg->portals[i])
			abort();
	for (size_t i = 0; i < cfg->ntargets; i++) {
		const struct cfg_target *t = &cfg->targets[i];
		size_t len = strlen(t->name);

		if (cfg_find_target(cfg, t->name) != t || len >= sizeof(upper))
			abort();
		for (size_t k = 0; k <= len; k++)
			upper[k] = (char)toupper((unsigned char)t->name[k]);
		if (cfg_find_target(cfg, upper) != t)
			abort();
		for (size_t j = 0; j < t->nportals; j++)
			if (!cfg_find_portal(cfg, t->portals[j]))
				abort();
		for (size_t j = 0; j < t->nacls; j++)
			if (cfg_find_acl(t, t->acls[j].initiator) != &t->acls[j])
				abort();
		if (t->nacls == 0 && !cfg_find_acl(t, "iqn.2026-11.io.ix:anyone"))
			abort();
		for (size_t j = 0; j < t->nluns; j++)
			if (t->luns[j].lu.block_size != 512 && t->luns[j].lu.block_size != 4096)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ix_config *cfg = NULL;
	char err[512] = "";
	char *text;
	int r;

	if (size > 64 * 1024)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	r = cfg_load_string(text, NAME, &cfg, err, sizeof(err));
	if (r == 0) {
		check_config(cfg);
		cfg_free(cfg);
	} else if ((r != -EINVAL && r != -ENOMEM) || strncmp(err, NAME ":", strlen(NAME ":")) != 0) {
		abort();
	}
	free(text);
	return 0;
}
