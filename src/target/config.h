/* Target configuration: one JSON file, parsed and validated whole before anything is applied
 * (docs/configuration.md documents every field). The result is plain data owned by the
 * struct ix_config; nothing here opens files other than the config itself or touches the
 * network.
 *
 * Ownership: every string reachable from a struct ix_config (including the const char *
 * fields of each cfg_lun's scsi_lu_cfg: path, vendor, product, serial, state_dir) is a separate malloc'd
 * copy freed by cfg_free(), except scsi_lu_cfg.target_name, which points at the owning
 * target's name. Secrets are wiped before they are freed. A loaded config is immutable data:
 * any thread may read it; nothing in it changes after cfg_load_*() returns.
 */
#ifndef IX_TARGET_CONFIG_H
#define IX_TARGET_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scsi/scsi.h"
#include "session/keys.h"
#include "dm/dm.h"

struct cfg_chap {
	char *user;       /* NULL when not set */
	char *secret;     /* NULL when not set; 1..255 bytes */
};

struct cfg_portal {
	char *name;       /* referenced by targets; default "default" */
	char *address;    /* IPv4 or IPv6 literal, or "0.0.0.0" / "::" */
	uint16_t port;    /* default 3260 */
	uint16_t tpgt;    /* TargetPortalGroupTag, default 1 */
	uint32_t transports; /* bit i: serve the transport with registry id i (dm/dm.h) on
				this address; default: the default transport (DM_ID_DEFAULT) */
};

/* I/O limits ("qos" of a LUN or an ACL entry; target/tgt_qos.c, docs/configuration.md "QoS"):
 * per second, 0 = no limit; burst_ms: how much unused allowance (in milliseconds of each rate)
 * may be spent at once. */
enum cfg_qos_limit {
	CFG_QOS_READ_IOPS,
	CFG_QOS_WRITE_IOPS,
	CFG_QOS_IOPS,      /* reads and writes together */
	CFG_QOS_READ_BPS,
	CFG_QOS_WRITE_BPS,
	CFG_QOS_BPS,
	CFG_QOS_NLIMITS
};
struct cfg_qos {
	uint64_t limit[CFG_QOS_NLIMITS];
	uint32_t burst_ms;
};

struct cfg_lun {
	uint32_t lun;
	struct scsi_lu_cfg lu; /* strings and err_rules point into this config */
	struct cfg_qos qos;    /* "qos": the LUN's limits (all its initiators together) */
};

struct cfg_acl_lun {
	uint32_t lun;                 /* the LUN number the initiator sees */
	uint32_t target_lun;          /* the target's LUN (luns[].lun) it shows */
};

struct cfg_acl {
	char *initiator;              /* initiator IQN allowed to log in */
	struct cfg_chap chap;         /* its CHAP credential (overrides the target's) */
	struct cfg_chap mutual_chap;  /* the target's credential toward this initiator for
					 mutual CHAP (overrides the target's mutual_chap) */
	bool masked;                  /* "luns" given: the initiator sees only these LUNs */
	struct cfg_acl_lun *luns;     /* LUN masking and mapping (when masked) */
	size_t nluns;
	struct cfg_qos qos;           /* "qos": this initiator's limits on the target */
};

/* Login redirection (RFC 7143 11.13.5; docs/configuration.md "Login redirection"): a
 * normal session's first Login Request is answered 0x0101 (moved temporarily) or 0x0102
 * (moved permanently) with TargetAddress=address, before authentication. */
struct cfg_redirect_owner {
	uint16_t group;               /* another gateway's ALUA group (targets[].alua) */
	char *address;                /* its portal, normalized as cfg_redirect.address */
};

struct cfg_redirect {
	char *address;                /* normalized "host:port" or "host:port,tpgt" ("[v6]:port"
					 for IPv6); NULL = none (or only owners) */
	char **addresses;             /* "addresses": several, taken in turn (round-robin),
					 normalized as address; none = address alone */
	size_t naddresses;
	bool permanent;               /* 0x0102 rather than 0x0101; default false */
	struct cfg_redirect_owner *owners; /* HA: while this gateway's group is not active, to
					 the active/optimized group's portal (0x0101;
					 ha_policy_owner_group, docs/ha.md) */
	size_t nowners;
	char **portals;               /* only logins arriving at these portals; none = every
					 portal of the target */
	size_t nportals;
};

struct cfg_target {
	char *name;                   /* IQN */
	char *alias;                  /* TargetAlias, optional */
	char **portals;               /* portal names; empty = all portals */
	size_t nportals;
	struct cfg_lun *luns;
	size_t nluns;
	struct cfg_acl *acls;         /* empty = any initiator may log in */
	size_t nacls;
	struct cfg_chap chap;         /* credential initiators must prove (one-way CHAP) */
	struct cfg_chap mutual_chap;  /* the target's own credential for mutual CHAP */
	bool chap_required;           /* default: true when chap.secret or any ACL secret set */
	uint8_t chap_algs[4];         /* accepted CHAP_A (enum chap_alg), default {8, 7, 6, 5};
					 the initiator's order of preference decides */
	int nchap_algs;
	uint32_t max_sessions;        /* sessions with this target at once, 0 = only the global
					 limits; default 0 */
	struct cfg_redirect redirect; /* "redirect": send logins elsewhere */
	struct scsi_alua_cfg alua;    /* ALUA target port groups ("alua"); ngroups 0 = none.
					 Local portals are resolved to their TPGTs (the relative
					 target port ids) */
};

/* Registration with an iSNS server (RFC 4171; target/tgt_isns.c, docs/isns.md). */
struct cfg_isns {
	bool enabled;                 /* "isns" is present and its "enabled" is not false */
	char *server;                 /* the server's numeric IPv4 or IPv6 address */
	uint16_t port;                /* default 3205 */
	uint32_t registration_period_s; /* asked for; the server may grant another; 900 */
	char *entity;                 /* Entity Identifier; NULL: "ix:" and the host name */
};

struct cfg_global {
	int threads;                  /* worker event loops; 0 = one per CPU */
	uint32_t poll_us;             /* workers' adaptive poll window (ev_loop_set_poll_us) */
	int log_level;                /* enum log_level, default LOG_INFO */
	uint32_t login_timeout_ms;    /* default 15000 */
	uint32_t nop_interval_ms;     /* target NOP-In ping interval, 0 = off; default 15000 */
	uint32_t nop_timeout_ms;      /* drop the connection after this without reply; 30000 */
	uint32_t logout_timeout_ms;   /* a session of a target removed by a reload is asked to
					 log out within this (Async Message, Parameter3 in
					 seconds, rounded up), then dropped; 5000, >= 1000 */
	uint32_t cmdsn_depth;         /* MaxCmdSN - ExpCmdSN + 1, default 128 */
	uint32_t max_sessions;        /* 0 = unlimited; default 1024 */
	uint32_t max_sessions_per_initiator; /* per InitiatorName, 0 = unlimited; default 64 */
	uint32_t max_connections;     /* TCP connections open at once; default 2048 */
	uint32_t max_pending_logins;  /* connections not yet in full feature phase; 128 */
	uint32_t login_grace_ms;      /* while those are full: a login idle this long (no
					 Login PDU) makes room; default 1000 */
	uint32_t discovery_idle_timeout_ms; /* close discovery sessions idle this long, 0 = never;
					      default 30000 */
	uint64_t max_connection_memory; /* data buffers one connection may hold; 128 MiB */
	uint32_t idle_release_ms;     /* a session with no command this long gives back its
					 pooled task slots, PDU descriptors and data buffers
					 but the first chunk; 0 = never; default 60000 */
	struct neg_prefs neg;         /* negotiation preferences (see session/keys.h) */
	/* Discovery sessions. */
	struct cfg_chap discovery_chap;
	struct cfg_chap discovery_mutual_chap;
	bool discovery_chap_required; /* default: true when discovery_chap is set */
	uint8_t discovery_chap_algs[4]; /* accepted CHAP_A for discovery, as chap_algs */
	int ndiscovery_chap_algs;
	char *mgmt_socket;            /* JSON-RPC Unix socket path, NULL = none */
	char *metrics_listen;         /* Prometheus endpoint "ADDR:PORT", NULL = none */
	char *mgmt_group;             /* group (name) whose members may use it besides root */
	char *state_dir;              /* default luns[].state_dir (APTPL reservations), NULL = none */
	struct cfg_isns isns;         /* iSNS registration, off unless configured */
};

/* Test-only features: the "testing" section and LUNs with backend "error". A configuration
 * that uses any of them has test_features set; ix-target refuses it unless started with
 * --testing, so a test configuration copied to production cannot quietly inject faults. */
struct cfg_testing {
	bool transport_faults;        /* wrap every connection's transport with the datamover
					 wrapper "fault" (dm.h's dm_find_wrapper) */
	_Alignas(8) unsigned char faults[DM_WRAP_OPTS_SIZE]; /* its options, laid out as its
								table of struct dm_opt says */
};

struct ix_config {
	struct cfg_global global;
	struct cfg_testing testing;
	bool test_features;           /* "testing" present or an "error" LUN */
	struct cfg_portal *portals;
	size_t nportals;
	struct cfg_target *targets;
	size_t ntargets;
	void *priv;                   /* reserved; NULL (all storage is owned per field) */
};

/* Parse and validate. On failure returns -EINVAL (or -errno for I/O) and writes a message
 * "PATH:LINE:COLUMN: what is wrong" (or "PATH: ..." when no position applies) into err. */
int cfg_load_file(const char *path, struct ix_config **out, char *err, size_t errlen);
int cfg_load_string(const char *json, const char *name, struct ix_config **out, char *err,
		    size_t errlen);
void cfg_free(struct ix_config *cfg);

/* The built-in default: one RAM LUN of 1 GiB (or size_bytes if nonzero) on 127.0.0.1:3260,
 * target iqn.2026-11.io.ix:target0, no authentication. */
int cfg_default(struct ix_config **out, uint64_t ram_size_bytes);

/* NULL if s is a valid iSCSI name in normalized form (RFC 7143 4.2.7, RFC 3722), else what
 * is wrong with it. */
const char *cfg_iscsi_name_error(const char *s);

/* Lookups used by login. Target and initiator names compare case-insensitively (configured
 * names are validated to be lower-case, the normalized form). */
const struct cfg_target *cfg_find_target(const struct ix_config *cfg, const char *name);
const struct cfg_portal *cfg_find_portal(const struct ix_config *cfg, const char *name);
/* NULL when the target has ACLs and the initiator is not among them. When the target has no
 * ACLs, returns a pointer to a static empty ACL. */
const struct cfg_acl *cfg_find_acl(const struct cfg_target *t, const char *initiator);
/* Is the target reachable through this portal? */
bool cfg_target_on_portal(const struct cfg_target *t, const struct cfg_portal *p);
/* The redirection a login to t arriving at portal p may get (a fixed address, or owners to
 * look at), or NULL (none configured, or not on that portal). */
const struct cfg_redirect *cfg_target_redirect(const struct cfg_target *t,
					       const struct cfg_portal *p);

#endif
