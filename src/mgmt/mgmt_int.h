/* Runtime management, inside: what the document engine (mgmt_doc.c), the methods
 * (mgmt_m_config.c, mgmt_m_run.c) and the JSON-RPC layer (mgmt.c) share. Not for other
 * modules: they use mgmt.h. */
#ifndef IX_MGMT_MGMT_INT_H
#define IX_MGMT_MGMT_INT_H

#include "mgmt/mgmt.h"

struct ix_mgmt {
	struct ix_target *tgt; /* NULL: offline */
	json_t *doc;           /* the running configuration */
	char *config_path;
	bool testing;
	bool no_save;
	struct mgmt_group *group; /* in a gateway group: the document is in RADOS (mgmt_group.c) */
};

/* An error to answer: code, message, optional data (owned). */
struct merr {
	int code;
	char msg[1024];
	json_t *data;
};

/* Where a part of the request lands in the document: an error the whole document's validation
 * finds at doc (a JSON path prefix) is reported at req, the request's own path. */
#define MGMT_MAX_MAP 8
struct mgmt_pmap {
	char doc[128];
	char req[64];
};

struct call {
	struct ix_mgmt *m;
	struct mgmt_pmap map[MGMT_MAX_MAP];
	int nmap;
	json_t *params; /* an object (empty when absent) */
	json_t *result;
	struct merr *e;
	/* asynchronous answers (NULL done: not possible here) */
	ix_mgmt_done_fn done;
	void *done_arg;
	json_t *id;               /* NULL: a notification */
	struct ix_mgmt_op *op;    /* set by a method that answers later */
};

struct ix_mgmt_op {
	ix_mgmt_done_fn done;
	void *arg;
	json_t *id;               /* NULL: a notification */
	json_t *params;
	bool cancelled;
	bool stats;               /* iscsi_get_stats rather than iscsi_get_sessions */
};

/* A method's parameter, declared at its row of the method table (mgmt.c). */
enum mgmt_ptype { MGMT_T_STRING, MGMT_T_INTEGER, MGMT_T_BOOLEAN, MGMT_T_OBJECT, MGMT_T_ARRAY };
struct mgmt_param {
	const char *name; /* NULL: the end of the list */
	enum mgmt_ptype type;
	bool required;
	const char *help;
};

/* Sets e (code and message) and returns -1. */
int mgmt_err_set(struct merr *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The document engine (mgmt_doc.c). */
int mgmt_normalize(json_t *doc);
long mgmt_find_by(json_t *a, const char *key, json_t *v);
int mgmt_apply_doc(struct ix_mgmt *m, json_t *newdoc, bool dry_run, bool strict_global, json_t **result, struct merr *e);
int mgmt_save_doc(json_t *doc, const char *path, char *err, size_t errlen);
/* A size as the configuration writes it (bytes, or digits and K/M/G/T/P[iB], powers of 1024). */
bool mgmt_size_value(json_t *v, uint64_t *out);
/* a and b (the values of key, NULL at the top) are the same setting: sizes by value, null as
 * absent, objects and lists member by member. */
bool mgmt_same(json_t *a, json_t *b, const char *key);
/* The configuration loader's message without its "NAME:LINE:COL: " prefix (positions in a
 * document the caller never saw mean nothing; the JSON path that follows does). */
const char *mgmt_strip_position(const char *msg, const char *name);
/* Everything want names is so in have (lists of named objects: each element named is there and
 * covered). False with path (a JSON path appended to what it holds) at the first difference. */
bool mgmt_covers(json_t *have, json_t *want, const char *key, char *path, size_t cap);

/* Parameters and changes to the document (mgmt_m_config.c). A missing required parameter or a
 * wrong type is -32602. */
int mgmt_p_str(struct call *c, const char *key, bool required, const char **out);
int mgmt_p_obj(struct call *c, const char *key, json_t **out);
int mgmt_p_bool(struct call *c, const char *key, bool *out);
int mgmt_p_keys(struct call *c, const char *const *keys);
json_t *mgmt_find_target(json_t *doc, const char *name);
int mgmt_commit(struct call *c, json_t *newdoc);
/* Record that params' req lands at the document path docfmt (printf). */
void mgmt_map(struct call *c, const char *req, const char *docfmt, ...)
	__attribute__((format(printf, 3, 4)));
/* msg ("PATH: why") about the document path doc..., rewritten to name req... instead (and the
 * document's path after it); false when msg is not about doc. doc "" matches every path. */
bool mgmt_remap_path(char *msg, size_t cap, const char *doc, const char *req);
json_t *mgmt_lun_status(struct ix_target *tgt, const char *target, json_t *lun);

/* JSON-RPC answers (mgmt.c). */
json_t *mgmt_error_response(json_t *id, int code, const char *msg, json_t *data);
json_t *mgmt_result_response(json_t *id, json_t *result);

/* The methods (a row each in mgmt.c's table). */
int mgmt_m_get_config(struct call *c);
int mgmt_m_get_portals(struct call *c);
int mgmt_m_get_targets(struct call *c);
int mgmt_m_create_portal(struct call *c);
int mgmt_m_delete_portal(struct call *c);
int mgmt_m_create_target(struct call *c);
int mgmt_m_delete_target(struct call *c);
int mgmt_m_get_luns(struct call *c);
int mgmt_m_get_acls(struct call *c);
int mgmt_m_create_lun(struct call *c);
int mgmt_m_delete_lun(struct call *c);
int mgmt_m_create_acl(struct call *c);
int mgmt_m_delete_acl(struct call *c);
int mgmt_m_set_acl_luns(struct call *c);
int mgmt_m_set_target_options(struct call *c);
int mgmt_m_set_lun_options(struct call *c);
int mgmt_m_set_target_auth(struct call *c);
int mgmt_m_set_discovery_auth(struct call *c);
int mgmt_m_get_discovery_auth(struct call *c);
int mgmt_m_apply_config(struct call *c);
int mgmt_m_save_config(struct call *c);
int mgmt_m_get_sessions(struct call *c);
int mgmt_m_get_stats(struct call *c);
int mgmt_m_logout_session(struct call *c);
int mgmt_m_set_qos(struct call *c); /* mgmt_m_qos.c */
int mgmt_m_resize_lun(struct call *c);
int mgmt_m_set_lun_offline(struct call *c);
int mgmt_m_rejoin_lun(struct call *c);
int mgmt_m_break_rbd_lock(struct call *c);
int mgmt_m_get_alua(struct call *c);
/* mgmt_m_snap.c */
int mgmt_m_create_snapshot(struct call *c);
int mgmt_m_get_snapshots(struct call *c);
int mgmt_m_delete_snapshot(struct call *c);
int mgmt_m_rollback_snapshot(struct call *c);
int mgmt_m_clone_snapshot(struct call *c);
/* A snapshot, image or pool name the snapshot methods accept: false with why. */
bool mgmt_rbd_name_ok(const char *s, char *why, size_t cap);
int mgmt_m_set_alua_state(struct call *c);
/* The gateway group (mgmt_group.c): an edit of a member goes to the group's document. */
int mgmt_group_commit(struct call *c, json_t *newdoc, bool dry_run);
int mgmt_m_group_status(struct call *c);
int mgmt_m_group_member_add(struct call *c);
int mgmt_m_group_member_remove(struct call *c);
int mgmt_m_group_init(struct call *c);

#endif
