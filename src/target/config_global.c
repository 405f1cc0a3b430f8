/* Configuration: the "global" section (threads, timeouts, limits, negotiation preferences,
 * discovery authentication, management endpoints). */
#include "target/config_int.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/un.h>
#include "util/addr.h"
#include "util/log.h"

#define NEG_LEN_MIN 512u
#define NEG_LEN_MAX 16777215u /* 2^24 - 1, RFC 7143 */

/* ---- global ---------------------------------------------------------------------------- */

static const char *const digest_names[] = {"none", "prefer-none", "prefer-crc32c", "crc32c", NULL};

static int parse_digest(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	static const enum neg_digest_pref map[] = {NEG_DIGEST_NONE_ONLY, NEG_DIGEST_PREFER_NONE,
						   NEG_DIGEST_PREFER_CRC, NEG_DIGEST_CRC_ONLY};
	int i = -1;
	int rc = cfg_get_enum(c, obj, k->name, digest_names, "digest setting", &i);

	if (!rc && i >= 0)
		*(enum neg_digest_pref *)cfg_key_at(k, base) = map[i];
	return rc;
}

#define NEG(f) (struct neg_prefs, f)
static const struct key negotiation_keys[] = {
    KEY_NUM("max_recv_data_segment_length", K_U32, NEG(max_recv_dsl), NEG_LEN_MIN, NEG_LEN_MAX,
	    262144),
    KEY_NUM("max_burst_length", K_U32, NEG(sess.max_burst_length), NEG_LEN_MIN, NEG_LEN_MAX,
	    1048576),
    KEY_NUM("first_burst_length", K_U32, NEG(sess.first_burst_length), NEG_LEN_MIN, NEG_LEN_MAX,
	    262144),
    KEY_BOOL("immediate_data", NEG(sess.immediate_data), true),
    KEY_BOOL("initial_r2t", NEG(sess.initial_r2t), false),
    KEY_NUM("max_outstanding_r2t", K_U16, NEG(sess.max_outstanding_r2t), 1, 65535, 8),
    KEY_FN("header_digest", NEG(header_digest), parse_digest),
    KEY_FN("data_digest", NEG(data_digest), parse_digest),
    KEY_NUM("max_connections", K_U16, NEG(sess.max_connections), 1, 65535, 1),
    KEY_NUM("default_time2wait", K_U16, NEG(sess.default_time2wait), 0, 3600, 2),
    KEY_NUM("default_time2retain", K_U16, NEG(sess.default_time2retain), 0, 3600, 20),
    KEY_END};
#undef NEG

#define GLOBAL(f) (struct cfg_global, f)

static int parse_negotiation(struct cfg_ctx *c, json_t *g, const struct key *k, void *base)
{
	struct neg_prefs *p = cfg_key_at(k, base);
	struct iscsi_sess_params *s = &p->sess;
	json_t *v;
	int rc = cfg_enter_object(c, g, k->name, &v);

	if (rc <= 0)
		return rc;
	if ((rc = cfg_parse_table(c, v, negotiation_keys, p)))
		goto out;
	if (s->first_burst_length > s->max_burst_length)
		rc = cfg_fail(c, "first_burst_length", false,
			      "%u must not exceed max_burst_length (%u)", s->first_burst_length,
			      s->max_burst_length);
out:
	cfg_pop(c);
	return rc;
}

static int discovery_algs_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	struct cfg_global *g = base;

	return cfg_parse_chap_algs(c, obj, k->name, g->discovery_chap_algs,
				   &g->ndiscovery_chap_algs);
}

static const struct key discovery_keys[] = {
    KEY_FN("chap", GLOBAL(discovery_chap), cfg_chap_key),
    KEY_FN("mutual_chap", GLOBAL(discovery_mutual_chap), cfg_mutual_chap_key),
    /* default: true when "chap" is set */
    KEY_BOOL("chap_required", GLOBAL(discovery_chap_required), false),
    KEY_FN("chap_algorithms", GLOBAL(discovery_chap_algs), discovery_algs_key), KEY_END};

static int parse_discovery(struct cfg_ctx *c, json_t *g, const struct key *k, void *base)
{
	struct cfg_global *out = base;
	json_t *v;
	int rc = cfg_enter_object(c, g, k->name, &v);

	if (rc <= 0)
		return rc;
	out->discovery_chap_required = cfg_member(v, "chap") != NULL;
	if ((rc = cfg_parse_table(c, v, discovery_keys, out)))
		goto out;
	if (out->discovery_mutual_chap.secret && !out->discovery_chap.secret)
		rc = cfg_fail(c, "mutual_chap", false,
			  "mutual CHAP needs one-way \"chap\" as well (the initiator "
			  "authenticates first)");
	else if (out->discovery_chap_required && !out->discovery_chap.secret)
		rc = cfg_fail(c, "chap_required", false,
			  "is true but no discovery \"chap\" credential is configured");
out:
	cfg_pop(c);
	return rc;
}

static int parse_log_level(struct cfg_ctx *c, json_t *g, const struct key *k, void *base)
{
	int *out = cfg_key_at(k, base);
	const char *s;
	char buf[64];
	int rc = cfg_get_str(c, g, k->name, 64, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	*out = ix_log_level_parse(s);
	if (*out < 0)
		return cfg_fail(c, k->name, false,
			    "unknown log level \"%s\" (use error, warn, info or debug)",
			    cfg_esc(s, buf, sizeof(buf)));
	return 0;
}


static int state_dir_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	return cfg_get_state_dir(c, obj, cfg_key_at(k, base));
}

/* "ADDR:PORT" or "[V6ADDR]:PORT" with a numeric address (the metrics endpoint). */
static int get_metrics_listen(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base)
{
	char host[ADDR_HOST_MAX];
	unsigned char bin[16];
	uint16_t port = 0;
	const char *s;
	int rc = cfg_get_str(c, obj, k->name, 80, STR_PRINTABLE, &s);

	if (rc || !s)
		return rc;
	if (addr_parse_portal(s, 0, host, sizeof(host), &port, NULL) < 0 || port == 0 ||
	    (inet_pton(AF_INET, host, bin) != 1 && inet_pton(AF_INET6, host, bin) != 1))
		return cfg_fail(c, k->name, false,
			    "\"%s\" is not ADDRESS:PORT with a numeric address (\"[::1]:9117\")",
			    s);
	return cfg_dup_str(c, s, cfg_key_at(k, base));
}

static const struct key global_keys[] = {
    KEY_NUM("threads", K_INT, GLOBAL(threads), 0, 256, 0),
    KEY_FN("log_level", GLOBAL(log_level), parse_log_level),
    KEY_NUM("login_timeout_ms", K_U32, GLOBAL(login_timeout_ms), 1, MAX_TIMEOUT_MS, 15000),
    KEY_NUM("nop_interval_ms", K_U32, GLOBAL(nop_interval_ms), 0, MAX_TIMEOUT_MS, 15000),
    KEY_NUM("nop_timeout_ms", K_U32, GLOBAL(nop_timeout_ms), 1, MAX_TIMEOUT_MS, 30000),
    /* sent as Parameter3 of an Async Message, in whole seconds */
    KEY_NUM("logout_timeout_ms", K_U32, GLOBAL(logout_timeout_ms), 1000, MAX_TIMEOUT_MS, 5000),
    KEY_NUM("cmdsn_depth", K_U32, GLOBAL(cmdsn_depth), 1, 65536, 128),
    /* a session needs a TSIH, a non-zero 16-bit number */
    KEY_NUM("max_sessions", K_U32, GLOBAL(max_sessions), 0, 65535, 1024),
    KEY_NUM("max_sessions_per_initiator", K_U32, GLOBAL(max_sessions_per_initiator), 0, 65535, 64),
    KEY_NUM("max_connections", K_U32, GLOBAL(max_connections), 1, 1u << 20, 2048),
    KEY_NUM("max_pending_logins", K_U32, GLOBAL(max_pending_logins), 1, 65535, 128),
    KEY_NUM("login_grace_ms", K_U32, GLOBAL(login_grace_ms), 10, MAX_TIMEOUT_MS, 1000),
    KEY_NUM("discovery_idle_timeout_ms", K_U32, GLOBAL(discovery_idle_timeout_ms), 0,
	    MAX_TIMEOUT_MS, 30000),
    /* range checked after the section: 64M to 1T */
    KEY_SIZE("max_connection_memory", GLOBAL(max_connection_memory), 128ull << 20),
    KEY_NUM("idle_release_ms", K_U32, GLOBAL(idle_release_ms), 0, MAX_TIMEOUT_MS, 60000),
    KEY_FN("negotiation", GLOBAL(neg), parse_negotiation),
    KEY_FN("discovery", GLOBAL(discovery_chap), parse_discovery),
    KEY_STR("mgmt_socket", GLOBAL(mgmt_socket), sizeof(((struct sockaddr_un *)0)->sun_path) - 1,
	    STR_PRINTABLE),
    KEY_STR("mgmt_group", GLOBAL(mgmt_group), 32, STR_PRINTABLE),
    KEY_FN("metrics_listen", GLOBAL(metrics_listen), get_metrics_listen),
    KEY_FN("state_dir", GLOBAL(state_dir), state_dir_key),
    KEY_FN("isns", GLOBAL(isns), cfg_parse_isns),
    /* off: polling pays only on uncontended CPUs (docs/perf.md) */
    KEY_NUM("poll_us", K_U32, GLOBAL(poll_us), 0, 10000, 50), KEY_END};
#undef GLOBAL

void cfg_global_defaults(struct cfg_global *g)
{
	g->log_level = LOG_INFO;
	cfg_key_defaults(global_keys, g);
	neg_prefs_default(&g->neg);
	cfg_key_defaults(negotiation_keys, &g->neg);
	g->neg.header_digest = NEG_DIGEST_PREFER_NONE;
	g->neg.data_digest = NEG_DIGEST_PREFER_NONE;
	g->neg.offer_all = false;
	cfg_chap_algs_default(g->discovery_chap_algs, &g->ndiscovery_chap_algs);
}

int cfg_parse_global(struct cfg_ctx *c, json_t *root, const struct key *k, void *base)
{
	struct cfg_global *g = cfg_key_at(k, base);
	json_t *v;
	int rc = cfg_enter_object(c, root, k->name, &v);

	if (rc <= 0)
		return rc;
	if ((rc = cfg_parse_table(c, v, global_keys, g)))
		goto out;
	/* one command of the largest size the target serves must fit */
	if (g->max_connection_memory < (64ull << 20) || g->max_connection_memory > (1ull << 40))
		rc = cfg_fail(c, "max_connection_memory", false,
			  "%llu bytes is out of range (64M to 1T)",
			  (unsigned long long)g->max_connection_memory);
out:
	cfg_pop(c);
	return rc;
}
