/* Target configuration loader: JSON text -> struct ix_config, validated whole.
 *
 * jansson parses the text (syntax errors carry its line and column). Everything after that is
 * semantic checking on the json_t tree; jansson keeps no positions per value, so an error
 * message finds its position by walking the original text along the JSON path of the value
 * (config_json.c). Every string in the result is a private malloc'd copy; cfg_free releases
 * them (secrets are wiped first). docs/configuration.md is the user-facing description of
 * every field; keep the two in step.
 */
#include "target/config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE_SIZE	 (16u << 20)
#define DEFAULT_RAM_SIZE (1ull << 30)

/* ---- entry points ---------------------------------------------------------------------- */

static int version_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	uint64_t version = 1;

	(void)base;
	return cfg_get_uint(c, obj, k->name, 1, 1, &version);
}

#define ROOT(f) (struct ix_config, f)
static const struct key root_keys[] = {
    KEY_FN("version", ROOT(priv), version_key), /* 1, the only one so far */
    KEY_FN("global", ROOT(global), cfg_parse_global),
    KEY_FN("portals", ROOT(portals), cfg_parse_portals), /* default: "default" on 127.0.0.1 */
    KEY_FN("targets", ROOT(targets), cfg_parse_targets),
    KEY_FN("testing", ROOT(testing), cfg_parse_testing),
    KEY_END};
#undef ROOT

static int parse_root(struct cfg_ctx *c, json_t *root, struct ix_config *cfg)
{
	int rc;

	cfg_global_defaults(&cfg->global);
	if (!json_is_object(root))
		return cfg_fail(c, NULL, false, "the configuration must be a JSON object, not %s",
			    cfg_type_name(root));
	if ((rc = cfg_parse_table(c, root, root_keys, cfg)))
		return rc;
	return cfg_check_secret_directions(c);
}

static int load(const char *text, size_t len, const char *name, struct ix_config **out, char *err,
		size_t errlen)
{
	struct cfg_ctx c = {.name = name ? name : "<string>",
			.text = text,
			.len = len,
			.err = err,
			.errlen = errlen};
	struct ix_config *cfg;
	json_error_t je;
	json_t *root;
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		if (err && errlen)
			snprintf(err, errlen, "%s:%d:%d: %s", c.name, je.line > 0 ? je.line : 1,
				 je.column > 0 ? je.column : 1, je.text);
		return -EINVAL;
	}
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		json_decref(root);
		return -ENOMEM;
	}
	c.cfg = cfg;
	rc = parse_root(&c, root, cfg);
	json_decref(root);
	free(c.secrets);
	if (rc) {
		cfg_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

int cfg_load_string(const char *json, const char *name, struct ix_config **out, char *err,
		    size_t errlen)
{
	return load(json, strlen(json), name, out, err, errlen);
}

int cfg_load_file(const char *path, struct ix_config **out, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	size_t got = 0;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)MAX_FILE_SIZE) {
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EFBIG;
		goto fail;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = -ENOMEM;
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	text[got] = '\0';
	rc = load(text, got, path, out, err, errlen);
	free(text);
	return rc;
fail:
	if (fd >= 0)
		close(fd);
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
	return rc;
}

int cfg_default(struct ix_config **out, uint64_t ram_size_bytes)
{
	char json[512];

	snprintf(json, sizeof(json),
		 "{\"portals\": [{\"name\": \"default\", \"address\": \"127.0.0.1\", "
		 "\"port\": 3260}],"
		 " \"targets\": [{\"name\": \"iqn.2026-11.io.ix:target0\","
		 " \"luns\": [{\"lun\": 0, \"backend\": \"ram\", \"size\": \"%llu\"}]}]}",
		 (unsigned long long)(ram_size_bytes ? ram_size_bytes : DEFAULT_RAM_SIZE));
	return load(json, strlen(json), "<default>", out, NULL, 0);
}
