/* Configuration: "qos", the I/O limits of a LUN or of an initiator (an ACL entry). Rates are
 * per second, 0 or absent = no limit; the byte rates take sizes ("100M": powers of 1024). */
#include "target/config_int.h"

#define QOS_MAX_IOPS 100000000u              /* 10^8 commands a second */
#define QOS_MAX_BPS  (1ull << 40)             /* 1 TiB a second */

#define Q(f) (struct cfg_qos, f)
static const struct key qos_keys[] = {
    KEY_NUM("read_iops", K_U64, Q(limit[CFG_QOS_READ_IOPS]), 0, QOS_MAX_IOPS, 0),
    KEY_NUM("write_iops", K_U64, Q(limit[CFG_QOS_WRITE_IOPS]), 0, QOS_MAX_IOPS, 0),
    KEY_NUM("iops", K_U64, Q(limit[CFG_QOS_IOPS]), 0, QOS_MAX_IOPS, 0),
    KEY_SIZE("read_bps", Q(limit[CFG_QOS_READ_BPS]), 0),
    KEY_SIZE("write_bps", Q(limit[CFG_QOS_WRITE_BPS]), 0),
    KEY_SIZE("bps", Q(limit[CFG_QOS_BPS]), 0),
    KEY_NUM("burst_ms", K_U32, Q(burst_ms), 0, 60000, 0),
    KEY_END};
#undef Q

int cfg_parse_qos(struct cfg_ctx *c, json_t *obj, struct cfg_qos *out)
{
	static const char *const bps[] = {"read_bps", "write_bps", "bps"};
	json_t *o = cfg_member(obj, "qos");
	int rc;

	*out = (struct cfg_qos){0};
	if (!o)
		return 0;
	if ((rc = cfg_want_object(c, "qos", o)))
		return rc;
	cfg_push_key(c, "qos");
	rc = cfg_parse_table(c, o, qos_keys, out);
	for (int i = 0; !rc && i < 3; i++)
		if (out->limit[CFG_QOS_READ_BPS + i] > QOS_MAX_BPS)
			rc = cfg_fail(c, bps[i], false, "is above the largest limit, 1T a second");
	cfg_pop(c);
	return rc;
}

/* As a key table's K_FN: base is the section's struct, k->off where its cfg_qos is. */
int cfg_qos_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	return cfg_parse_qos(c, obj, cfg_key_at(k, base));
}
