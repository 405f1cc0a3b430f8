/* Configuration: a target's "luns" (backends, geometry, INQUIRY data, RBD images and the
 * persistent reservation store). */
#include "target/config_int.h"

#include <string.h>

#include "ha/ha.h"
#include "util/hex.h"

/* ---- LUNs ------------------------------------------------------------------------------ */

static const char *const backend_names[] = {"ram", "file", "block", "error", "rbd", NULL};

/* "rbd.pr": the timeouts of the shared persistent reservation store (pr_store "rados"; checked
 * in parse_pr_store once that is known). Absent keys stay 0: the store's defaults. */
#define PRR(f) (struct bs_rbd_pr_cfg, f)
static const struct key rbd_pr_keys[] = {
    KEY_NUM("notify_timeout_s", K_U32, PRR(notify_timeout_s), 1, 60, 0),
    KEY_NUM("reset_wait_s", K_U32, PRR(reset_wait_s), 1, 10, 0),
    KEY_NUM("retries", K_U32, PRR(retries), 1, 1000, 0),
    KEY_NUM("blocklist_s", K_U32, PRR(blocklist_s), 60, 604800, 0), KEY_END};
#undef PRR

/* The "rbd" section is parsed with the LU's bs_rbd_cfg as its base; "pr" goes next to it. */
static int parse_rbd_pr(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct scsi_lu_cfg *lu =
	    (struct scsi_lu_cfg *)(void *)((char *)base - offsetof(struct scsi_lu_cfg, bs.rbd));
	json_t *o = cfg_member(obj, k->name);
	int rc;

	if (!o)
		return 0;
	if ((rc = cfg_want_object(c, k->name, o)))
		return rc;
	cfg_push_key(c, k->name);
	rc = cfg_parse_table(c, o, rbd_pr_keys, &lu->bs.rbd.pr);
	cfg_pop(c);
	return rc;
}

/* "rbd" of a LUN with backend "rbd". RADOS pool and namespace names, RBD image names:
 * printable, no '/' or '@' (checked after the table). */
#define RBD(f) (struct bs_rbd_cfg, f)
static const struct key rbd_keys[] = {
    KEY_STR("pool", RBD(pool), 255, STR_PRINTABLE | KEY_PRESENT),
    KEY_STR("image", RBD(image), 255, STR_PRINTABLE | KEY_PRESENT),
    KEY_STR("namespace", RBD(ns), 255, STR_PRINTABLE),
    KEY_STR("conf", RBD(conf), 4095, STR_PRINTABLE),
    KEY_STR("client", RBD(client), 255, STR_PRINTABLE),
    KEY_STR("keyring", RBD(keyring), 4095, STR_PRINTABLE),
    KEY_NUM("osd_op_timeout_s", K_U32, RBD(osd_op_timeout_s), 1, 3600, 0),
    KEY_NUM("connect_timeout_s", K_U32, RBD(connect_timeout_s), 1, 3600, 0),
    KEY_BOOL("exclusive_lock", RBD(exclusive_lock), false),
    KEY_NUM("lock_check_ms", K_U32, RBD(lock_check_ms), 100, 60000, 1000),
    KEY_NUM("handover_timeout_ms", K_U32, RBD(handover_timeout_ms), 500, 60000, 5000),
    KEY_BOOL("start_offline", RBD(start_offline), true),
    KEY_NUM("rejoin_after_ms", K_U32, RBD(rejoin_after_ms), 0, 3600000, 5000),
    KEY_FN("pr", RBD(pool), parse_rbd_pr),
    KEY_END};
#undef RBD

static int parse_rbd(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	struct bs_rbd_cfg *r = &lu->bs.rbd;
	json_t *o = cfg_member(v, "rbd");
	int rc;

	if (!o) {
		if (lu->backend == BS_TYPE_RBD)
			return cfg_fail(c, "rbd", false,
				    "required for an rbd LUN: {\"pool\": ..., \"image\": ...}");
		return 0;
	}
	if (lu->backend != BS_TYPE_RBD)
		return cfg_fail(c, "rbd", true, "only for backend \"rbd\"");
	cfg_key_defaults(rbd_keys,
			 r); /* start_offline true, lock_check_ms 1000, handover_timeout_ms
			  5000, rejoin_after_ms 5000: configuration.md */
	if ((rc = cfg_want_object(c, "rbd", o)))
		return rc;
	cfg_push_key(c, "rbd");
	if ((rc = cfg_parse_table(c, o, rbd_keys, r)))
		goto out;
	{
		const char *names[] = {r->pool, r->image, r->ns};
		const char *keys3[] = {"pool", "image", "namespace"};

		for (int i = 0; i < 3; i++)
			if (names[i] && (!names[i][0] || strpbrk(names[i], "/@"))) {
				rc = cfg_fail(c, keys3[i], false,
					      "must be non-empty, without '/' or '@'");
				goto out;
			}
	}
	if (r->conf && r->conf[0] != '/')
		rc = cfg_fail(c, "conf", false, "must be an absolute path");
	else if (r->keyring && r->keyring[0] != '/')
		rc = cfg_fail(c, "keyring", false, "must be an absolute path");
	else if (r->client && strncmp(r->client, "client.", 7) == 0)
		rc = cfg_fail(c, "client", false, "the id without \"client.\" (e.g. \"admin\")");
out:
	cfg_pop(c);
	return rc;
}

/* "naa_id": up to 16 hex digits (the designator's first 64 bits; the rest derived), or
 * exactly 32 (the whole 16-byte NAA 6 designator, e.g. the one LIO showed for a disk). */
static int parse_naa_id(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	const char *s, *h;
	char buf[64];
	size_t n;
	uint64_t w[2] = {0, 0};
	int rc = cfg_get_str(c, v, "naa_id", 34, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	h = strncmp(s, "0x", 2) == 0 ? s + 2 : s;
	n = strlen(h);
	if (n > 16 && n != 32)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		int d = hex_digit(h[i]);
		if (d < 0)
			n = 0;
		else
			w[n == 32 && i >= 16] = w[n == 32 && i >= 16] << 4 | (uint64_t)d;
	}
	if (n == 0 || w[0] == 0)
		return cfg_fail(c, "naa_id", false,
			    "\"%s\" is not a non-zero hex number of up to 16 digits, or of 32",
			    cfg_esc(s, buf, sizeof(buf)));
	if (n == 32 && w[0] >> 60 != 6)
		return cfg_fail(c, "naa_id", false,
			    "\"%s\": a 32-digit designator is NAA 6 (its first digit is 6)",
			    cfg_esc(s, buf, sizeof(buf)));
	lu->naa_id = w[0];
	lu->naa_ext = w[1];
	lu->has_naa_ext = n == 32;
	return 0;
}

static bool str_eq0(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Conflicts with LUNs parsed before this one, anywhere in the file. */
static int check_lun_conflicts(struct cfg_ctx *c, const struct ix_config *cfg, size_t ti,
			       const struct cfg_target *t, size_t li)
{
	const struct cfg_lun *l = &t->luns[li];

	for (size_t i = 0; i < li; i++)
		if (t->luns[i].lun == l->lun)
			return cfg_fail(c, "lun", false, "LUN %u is already defined by luns[%zu]",
				    l->lun, i);
	for (size_t a = 0; a <= ti; a++) {
		const struct cfg_target *o = &cfg->targets[a];
		for (size_t b = 0; b < (a == ti ? li : o->nluns); b++) {
			const struct scsi_lu_cfg *x = &o->luns[b].lu;
			if (l->lu.path && x->path && strcmp(l->lu.path, x->path) == 0 &&
			    !(l->lu.readonly && x->readonly))
				return cfg_fail(c, "path", false,
					    "\"%s\" is also used by targets[%zu].luns[%zu]; "
					    "sharing a backing store needs readonly on both",
					    l->lu.path, a, b);
			if (l->lu.backend == BS_TYPE_RBD && x->backend == BS_TYPE_RBD &&
			    strcmp(l->lu.bs.rbd.pool, x->bs.rbd.pool) == 0 &&
			    strcmp(l->lu.bs.rbd.image, x->bs.rbd.image) == 0 &&
			    str_eq0(l->lu.bs.rbd.ns, x->bs.rbd.ns) &&
			    str_eq0(l->lu.bs.rbd.conf, x->bs.rbd.conf) &&
			    !(l->lu.readonly && x->readonly))
				return cfg_fail(c, "rbd", false,
					    "image %s/%s is also used by targets[%zu].luns[%zu]; "
					    "sharing an image needs readonly on both",
					    l->lu.bs.rbd.pool, l->lu.bs.rbd.image, a, b);
			if (l->lu.naa_id && x->naa_id == l->lu.naa_id &&
			    x->has_naa_ext == l->lu.has_naa_ext && x->naa_ext == l->lu.naa_ext)
				return cfg_fail(c, "naa_id", false,
					    "is also used by targets[%zu].luns[%zu]", a, b);
		}
	}
	return 0;
}

static int parse_lun_backend(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	const char *path;
	int rc;

	if ((rc = cfg_get_str(c, v, "path", 4095, STR_PRINTABLE, &path)))
		return rc;
	if (lu->block_size != 512 && lu->block_size != 4096)
		return cfg_fail(c, "block_size", false, "%u is not supported: use 512 or 4096",
			    lu->block_size);
	if (cfg_member(v, "errors") && lu->backend != BS_TYPE_ERROR)
		return cfg_fail(c, "errors", true, "only for backend \"error\"");
	if ((rc = parse_rbd(c, v, lu)))
		return rc;
	if (lu->backend == BS_TYPE_RBD) {
		if (!ha_have_rbd())
			return cfg_fail(c, "backend", false,
					"this ix-target was built without the rbd backend "
					"(meson -Drbd=disabled)");
		if (path)
			return cfg_fail(c, "path", false, "an rbd LUN has no path (see \"rbd\")");
		/* size: taken from the image; when given, it must match */
	} else if (lu->backend == BS_TYPE_RAM || lu->backend == BS_TYPE_ERROR) {
		if (path)
			return cfg_fail(c, "path", false, "a RAM LUN has no path");
		if (!cfg_member(v, "size"))
			return cfg_fail(c, "size", false, "required for a RAM LUN");
		if (lu->size_bytes == 0)
			return cfg_fail(c, "size", false, "a RAM LUN needs a size above 0");
	} else {
		if (!path)
			return cfg_fail(c, "path", false, "required for a %s LUN",
				    backend_names[lu->backend]);
		if (path[0] != '/')
			return cfg_fail(c, "path", false, "must be an absolute path");
		if ((rc = cfg_dup_str(c, path, (char **)&lu->path)))
			return rc;
	}
	if (lu->size_bytes % lu->block_size)
		return cfg_fail(c, "size", false, "%llu bytes is not a multiple of block_size (%u)",
			    (unsigned long long)lu->size_bytes, lu->block_size);
	return 0;
}

/* physical_block_size: what READ CAPACITY(16) and the Block Limits page advertise instead of
 * what the backend found. A power-of-two multiple of block_size, at most 2^15 of them. */
static int parse_phys_block(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	uint32_t p = 0;
	int rc = cfg_get_u32(c, v, "physical_block_size", 0, UINT32_MAX, &p);

	if (rc || !cfg_member(v, "physical_block_size"))
		return rc;
	if (p < lu->block_size || (p & (p - 1)) || p / lu->block_size > (1u << 15))
		return cfg_fail(c, "physical_block_size", false,
			    "%u is not a power-of-two multiple of block_size (%u), at most %u", p,
			    lu->block_size, lu->block_size << 15);
	lu->phys_block_size = p;
	return 0;
}

/* "pr_store": "file" (default) or "rados" (an RBD LUN exported by several gateways). */
static int parse_pr_store(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	static const char *const names[] = {"file", "rados", NULL};
	int store = SCSI_PR_STORE_FILE, rc;

	if (cfg_member(v, "pr_store") &&
	    (rc = cfg_get_enum(c, v, "pr_store", names, "pr_store", &store)))
		return rc;
	lu->pr_store = (enum scsi_pr_store)store;
	if (lu->pr_store == SCSI_PR_STORE_SHARED && lu->backend != BS_TYPE_RBD)
		return cfg_fail(c, "pr_store", false, "\"rados\" is for LUNs with backend \"rbd\"");
	if (lu->pr_store == SCSI_PR_STORE_SHARED && lu->no_medium)
		return cfg_fail(c, "pr_store", false,
				"\"rados\" needs the image: not with no_medium");
	if (lu->pr_store != SCSI_PR_STORE_SHARED && cfg_member(cfg_member(v, "rbd"), "pr")) {
		cfg_push_key(c, "rbd");
		rc = cfg_fail(c, "pr", true, "only with \"pr_store\": \"rados\"");
		cfg_pop(c);
		return rc;
	}
	return 0;
}

/* "thin_threshold": the soft threshold of a thin LUN, a percentage (1..99) of its backing
 * store in use (docs/configuration.md). */
static int parse_thin_threshold(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu)
{
	uint32_t pct = 0;
	int rc;

	if (!cfg_member(v, "thin_threshold"))
		return 0;
	if ((rc = cfg_get_u32(c, v, "thin_threshold", 1, 99, &pct)))
		return rc;
	if (!lu->thin)
		return cfg_fail(c, "thin_threshold", true, "only for a thin LUN (\"thin\": true)");
	lu->thin_threshold = (uint8_t)pct;
	return 0;
}

int cfg_parse_lun(struct cfg_ctx *c, json_t *v, struct ix_config *cfg, size_t ti, size_t li)
{
	static const char *const keys[] = {"lun",	"backend",	 "path",
					   "size",	"block_size",	 "readonly",
					   "thin",	"write_cache",	 "no_medium",
					   "vendor",	"product",	 "serial",
					   "naa_id",	"removable",	 "offline",
					   "state_dir", "sanitize_rate", "physical_block_size",
					   "errors",	"rbd",		 "pr_store",
					   "qos",	"thin_threshold", NULL};
	struct cfg_target *t = &cfg->targets[ti];
	struct cfg_lun *l = &t->luns[li];
	struct scsi_lu_cfg *lu = &l->lu;
	int backend = -1;
	int rc;

	lu->block_size = 512;
	lu->target_name = t->name;
	if ((rc = cfg_want_object(c, NULL, v)) || (rc = cfg_check_keys(c, v, keys)))
		return rc;
	if (!cfg_member(v, "lun"))
		return cfg_missing(c, "lun");
	if (!cfg_member(v, "backend"))
		return cfg_missing(c, "backend");
	if ((rc = cfg_get_u32(c, v, "lun", 0, SCSI_MAX_LUNS - 1, &l->lun)) ||
	    (rc = cfg_get_enum(c, v, "backend", backend_names, "backend", &backend)))
		return rc;
	lu->lun = l->lun;
	lu->backend = (enum bs_type)backend;
	if ((rc = cfg_get_size(c, v, "size", &lu->size_bytes)) ||
	    (rc = cfg_get_u32(c, v, "block_size", 0, UINT32_MAX, &lu->block_size)) ||
	    (rc = parse_lun_backend(c, v, lu)) || (rc = parse_phys_block(c, v, lu)) ||
	    (rc = cfg_get_bool(c, v, "readonly", &lu->readonly)) ||
	    (rc = cfg_get_bool(c, v, "thin", &lu->thin)) ||
	    (rc = cfg_get_bool(c, v, "write_cache", &lu->write_cache)) ||
	    (rc = cfg_get_bool(c, v, "no_medium", &lu->no_medium)) ||
	    (rc = cfg_get_bool(c, v, "removable", &lu->removable)) ||
	    (rc = cfg_get_bool(c, v, "offline", &lu->offline)) ||
	    (rc = cfg_get_size(c, v, "sanitize_rate", &lu->sanitize_rate)) ||
	    (rc = cfg_get_state_dir(c, v, (char **)&lu->state_dir)) ||
	    (!lu->state_dir &&
	     (rc = cfg_dup_str(c, cfg->global.state_dir, (char **)&lu->state_dir))) ||
	    (rc = cfg_get_strdup(c, v, "vendor", 8, STR_ASCII, (char **)&lu->vendor)) ||
	    (rc = cfg_get_strdup(c, v, "product", 16, STR_ASCII, (char **)&lu->product)) ||
	    (rc = cfg_get_strdup(c, v, "serial", 64, STR_ASCII, (char **)&lu->serial)) ||
	    (rc = parse_naa_id(c, v, lu)) || (rc = cfg_parse_err_rules(c, v, lu)) ||
	    (rc = parse_pr_store(c, v, lu)) || (rc = cfg_parse_qos(c, v, &l->qos)))
		return rc;
	if ((rc = parse_thin_threshold(c, v, lu)))
		return rc;
	if (lu->backend == BS_TYPE_ERROR)
		cfg->test_features = true;
	return check_lun_conflicts(c, cfg, ti, t, li);
}
