/* Runtime management: the method table and the JSON-RPC 2.0 layer (mgmt.h). The document
 * engine is mgmt_doc.c, the methods mgmt_m_config.c and mgmt_m_run.c. */
#include "mgmt/mgmt_int.h"
#include "mgmt/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

void ix_mgmt_op_cancel(struct ix_mgmt_op *op)
{
	if (op)
		op->cancelled = true;
}

static int m_get_methods(struct call *c);

/* Parameter schemas: {name, type, required, help}, ending with {NULL}. Written once here, they
 * answer rpc_get_methods {"detail": true} (what ix-ctl call and ix-ctl methods use); each
 * handler still checks its parameters itself (its messages are part of the interface). */
#define PEND {NULL, 0, false, NULL}
#define DRY_RUN {"dry_run", MGMT_T_BOOLEAN, false, "check and report the changes, apply nothing"}
#define TARGET(req) {"target", MGMT_T_STRING, req, "the target's name (IQN)"}
#define LUN(req) {"lun", MGMT_T_INTEGER, req, "the LUN number"}

static const struct mgmt_param p_none[] = {PEND};
static const struct mgmt_param p_methods[] = {
    {"detail", MGMT_T_BOOLEAN, false, "objects {name, help, params} rather than names"}, PEND};
static const struct mgmt_param p_apply[] = {
    {"config", MGMT_T_OBJECT, true, "the whole configuration document"}, DRY_RUN, PEND};
static const struct mgmt_param p_get_named[] = {
    {"name", MGMT_T_STRING, false, "only the one of that name"}, PEND};
static const struct mgmt_param p_create_portal[] = {
    {"portal", MGMT_T_OBJECT, true, "the portal, as in the file's portals[]"}, DRY_RUN, PEND};
static const struct mgmt_param p_delete_named[] = {
    {"name", MGMT_T_STRING, true, "its name"}, DRY_RUN, PEND};
static const struct mgmt_param p_create_target[] = {
    {"target", MGMT_T_OBJECT, true, "the target, as in the file's targets[]"}, DRY_RUN, PEND};
static const struct mgmt_param p_of_target[] = {TARGET(true), PEND};
static const struct mgmt_param p_create_lun[] = {
    TARGET(true), {"lun", MGMT_T_OBJECT, true, "the LUN, as in the file's luns[]"}, DRY_RUN,
    PEND};
static const struct mgmt_param p_delete_lun[] = {TARGET(true), LUN(true), DRY_RUN, PEND};
static const struct mgmt_param p_resize_lun[] = {
    TARGET(true), LUN(true),
    {"size", MGMT_T_STRING, true, "the new size: bytes, or digits and K/M/G/T/P[iB]"},
    {"force", MGMT_T_BOOLEAN, false,
     "RBD: shrink (DANGEROUS: the data past the new end is gone for every gateway)"},
    DRY_RUN, PEND};
static const struct mgmt_param p_lun_offline[] = {
    TARGET(true), LUN(true),
    {"offline", MGMT_T_BOOLEAN, true, "true: take it offline, false: back online"}, DRY_RUN,
    PEND};
static const struct mgmt_param p_lun_options[] = {
    TARGET(true), LUN(true), {"write_cache", MGMT_T_BOOLEAN, false, "the write cache (WCE)"},
    {"readonly", MGMT_T_BOOLEAN, false, "read-only"}, DRY_RUN, PEND};
static const struct mgmt_param p_target_lun_dry[] = {TARGET(true), LUN(true), DRY_RUN, PEND};
static const struct mgmt_param p_target_lun[] = {TARGET(true), LUN(true), PEND};
static const struct mgmt_param p_alua_state[] = {
    TARGET(true), {"group", MGMT_T_INTEGER, true, "the target port group (1-65535)"},
    {"state", MGMT_T_STRING, true, "the ALUA state"}, PEND};
static const struct mgmt_param p_create_acl[] = {
    TARGET(true), {"acl", MGMT_T_OBJECT, true, "the ACL, as in the file's acls[]"}, DRY_RUN,
    PEND};
static const struct mgmt_param p_delete_acl[] = {
    TARGET(true), {"initiator", MGMT_T_STRING, true, "the initiator's name (IQN)"}, DRY_RUN,
    PEND};
static const struct mgmt_param p_acl_luns[] = {
    TARGET(true), {"initiator", MGMT_T_STRING, true, "the initiator's name (IQN)"},
    {"luns", MGMT_T_ARRAY, false, "the LUNs it sees, as in acls[].luns (null: all)"}, DRY_RUN,
    PEND};
#define AUTH_KEYS                                                                              \
	{"chap", MGMT_T_OBJECT, false, "{user, secret} (null: none)"},                         \
	    {"mutual_chap", MGMT_T_OBJECT, false, "{user, secret} (null: none)"},             \
	    {"chap_required", MGMT_T_BOOLEAN, false, "refuse logins without CHAP"},           \
	    {"chap_algorithms", MGMT_T_ARRAY, false, "the CHAP digests, in order of preference"}
static const struct mgmt_param p_target_auth[] = {TARGET(true), AUTH_KEYS, DRY_RUN, PEND};
static const struct mgmt_param p_discovery_auth[] = {AUTH_KEYS, DRY_RUN, PEND};
static const struct mgmt_param p_target_options[] = {
    TARGET(true), {"alias", MGMT_T_STRING, false, "the TargetAlias"},
    {"max_sessions", MGMT_T_INTEGER, false, "sessions at most (0: no bound)"},
    {"chap_required", MGMT_T_BOOLEAN, false, "refuse logins without CHAP"}, DRY_RUN, PEND};
static const struct mgmt_param p_save[] = {
    {"path", MGMT_T_STRING, false, "where (default: the file the daemon was started with)"},
    PEND};
static const struct mgmt_param p_sessions[] = {
    {"target", MGMT_T_STRING, false, "only the sessions to this target"},
    {"initiator", MGMT_T_STRING, false, "only the sessions of this initiator"}, PEND};
static const struct mgmt_param p_logout[] = {
    {"tsih", MGMT_T_INTEGER, true, "the session's TSIH (1-65535)"},
    {"drop", MGMT_T_BOOLEAN, false, "drop the connections rather than ask for a logout"},
    {"timeout_ms", MGMT_T_INTEGER, false, "how long the initiator has to log out"}, PEND};

static const struct mgmt_param p_qos[] = {
    TARGET(true), {"lun", MGMT_T_INTEGER, false, "the LUN whose limits these are"},
    {"initiator", MGMT_T_STRING, false, "or the initiator's (its ACL entry), on this target"},
    {"qos", MGMT_T_OBJECT, true, "the limits, as \"qos\" in the file ({} or null: none)"},
    DRY_RUN, PEND};

static const struct mgmt_param p_group_add[] = {
    {"name", MGMT_T_STRING, true, "the member's name"},
    {"portals", MGMT_T_ARRAY, true, "its portals: [{address, port, transports}]"},
    {"id", MGMT_T_INTEGER, false, "its id (tpgt, ALUA group), default the highest + 1"}, DRY_RUN,
    PEND};

static const struct mgmt_param p_group_init[] = {
    {"group", MGMT_T_OBJECT, true,
     "where and who: {pool, namespace, object, member, conf, client, keyring}"},
    DRY_RUN, PEND};

static const struct method {
	const char *name;
	int (*fn)(struct call *c);
	bool changes; /* logged */
	const struct mgmt_param *params;
	const char *help;
} methods[] = {
    {"rpc_get_methods", m_get_methods, false, p_methods, "the methods this daemon answers"},
    {"iscsi_get_config", mgmt_m_get_config, false, p_none, "the running configuration"},
    {"iscsi_apply_config", mgmt_m_apply_config, true, p_apply,
     "switch to this configuration (applied as the difference)"},
    {"iscsi_get_portals", mgmt_m_get_portals, false, p_get_named, "the portals"},
    {"iscsi_create_portal", mgmt_m_create_portal, true, p_create_portal, "add a portal"},
    {"iscsi_delete_portal", mgmt_m_delete_portal, true, p_delete_named, "remove a portal"},
    {"iscsi_get_targets", mgmt_m_get_targets, false, p_get_named, "the targets"},
    {"iscsi_create_target", mgmt_m_create_target, true, p_create_target, "add a target"},
    {"iscsi_delete_target", mgmt_m_delete_target, true, p_delete_named, "remove a target"},
    {"iscsi_get_luns", mgmt_m_get_luns, false, p_of_target,
     "a target's LUNs, each with its running status"},
    {"iscsi_create_lun", mgmt_m_create_lun, true, p_create_lun, "add a LUN to a target"},
    {"iscsi_delete_lun", mgmt_m_delete_lun, true, p_delete_lun, "remove a LUN"},
    {"iscsi_resize_lun", mgmt_m_resize_lun, true, p_resize_lun, "change a LUN's size"},
    {"iscsi_set_lun_offline", mgmt_m_set_lun_offline, true, p_lun_offline,
     "take a LUN offline or back online"},
    {"iscsi_set_lun_options", mgmt_m_set_lun_options, true, p_lun_options,
     "a LUN's online settings (write_cache, readonly)"},
    {"iscsi_break_rbd_lock", mgmt_m_break_rbd_lock, true, p_target_lun_dry,
     "break an RBD LUN's exclusive lock and take it"},
    {"iscsi_rejoin_lun", mgmt_m_rejoin_lun, true, p_target_lun,
     "a fenced RBD LUN rejoins the cluster"},
    {"iscsi_get_alua", mgmt_m_get_alua, false, p_of_target,
     "a target's ALUA groups and their running states"},
    {"iscsi_set_alua_state", mgmt_m_set_alua_state, true, p_alua_state,
     "set a target port group's ALUA state"},
    {"iscsi_get_acls", mgmt_m_get_acls, false, p_of_target, "a target's ACLs"},
    {"iscsi_create_acl", mgmt_m_create_acl, true, p_create_acl, "add an ACL to a target"},
    {"iscsi_delete_acl", mgmt_m_delete_acl, true, p_delete_acl, "remove an ACL"},
    {"iscsi_set_acl_luns", mgmt_m_set_acl_luns, true, p_acl_luns, "an ACL's LUN masking"},
    {"iscsi_set_target_auth", mgmt_m_set_target_auth, true, p_target_auth,
     "a target's authentication keys (null removes one)"},
    {"iscsi_set_target_options", mgmt_m_set_target_options, true, p_target_options,
     "a target's online settings"},
    {"iscsi_get_discovery_auth", mgmt_m_get_discovery_auth, false, p_none,
     "the discovery sessions' authentication"},
    {"iscsi_set_discovery_auth", mgmt_m_set_discovery_auth, true, p_discovery_auth,
     "the discovery sessions' authentication keys (null removes one)"},
    {"save_config", mgmt_m_save_config, true, p_save, "write the running configuration"},
    {"iscsi_get_sessions", mgmt_m_get_sessions, false, p_sessions, "the sessions"},
    {"iscsi_get_stats", mgmt_m_get_stats, false, p_none, "the target's counters"},
    {"iscsi_logout_session", mgmt_m_logout_session, true, p_logout, "end a session"},
    {"iscsi_set_qos", mgmt_m_set_qos, true, p_qos,
     "a LUN's or an initiator's QoS limits (configuration.md, QoS)"},
    {"group_get_status", mgmt_m_group_status, false, p_none,
     "the gateway group: its members, their applied generation, health and LUN locks"},
    {"group_add_member", mgmt_m_group_member_add, true, p_group_add, "add a gateway to the group"},
    {"group_remove_member", mgmt_m_group_member_remove, true, p_delete_named,
     "remove a gateway from the group"},
    {"group_init", mgmt_m_group_init, true, p_group_init,
     "write a first group document from this gateway's configuration"},
};

static const char *const type_names[] = {
    [MGMT_T_STRING] = "string",   [MGMT_T_INTEGER] = "integer", [MGMT_T_BOOLEAN] = "boolean",
    [MGMT_T_OBJECT] = "object",   [MGMT_T_ARRAY] = "array",
};

static json_t *method_detail(const struct method *mt)
{
	json_t *ps = json_array(), *o;

	for (const struct mgmt_param *p = mt->params; ps && p->name; p++)
		json_array_append_new(ps, json_pack("{s:s, s:s, s:b, s:s}", "name", p->name, "type",
						    type_names[p->type], "required", p->required,
						    "help", p->help));
	o = json_pack("{s:s, s:s, s:o*}", "name", mt->name, "help", mt->help, "params", ps);
	return o;
}

static int m_get_methods(struct call *c)
{
	static const char *const keys[] = {"detail", NULL};
	bool detail = false;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_bool(c, "detail", &detail) < 0)
		return -1;
	c->result = json_array();
	for (size_t i = 0; c->result && i < sizeof(methods) / sizeof(methods[0]); i++)
		json_array_append_new(c->result, detail ? method_detail(&methods[i])
							: json_string(methods[i].name));
	return 0;
}

/* ---- JSON-RPC 2.0 ------------------------------------------------------------------------- */

json_t *mgmt_error_response(json_t *id, int code, const char *msg, json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", msg);

	if (!err) /* a message that is not UTF-8 (cut in a sequence): still an answer */
		err = json_pack("{s:i, s:s}", "code", code, "message",
				"(the error message could not be encoded)");

	if (err && data)
		json_object_set_new(err, "data", data);
	else
		json_decref(data);
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
			 err);
}

json_t *mgmt_result_response(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *call_one(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *who,
			ix_mgmt_done_fn done, void *done_arg, struct ix_mgmt_op **op)
{
	static const char *const keys[] = {"jsonrpc", "method", "params", "id", NULL};
	json_t *id = json_object_get(req, "id"), *params, *resp;
	const char *method, *key;
	const struct method *mt = NULL;
	struct merr e = {0};
	struct call c = {.m = m, .e = &e};
	bool notification;
	json_t *v;
	int r;

	if (!json_is_object(req))
		return mgmt_error_response(NULL, -32600, "invalid request: not an object", NULL);
	/* JSON-RPC 2.0: a string, a number or null (null and fractions are discouraged there,
	 * not forbidden: they are answered, the id echoed) */
	if (id && !json_is_string(id) && !json_is_number(id) && !json_is_null(id))
		return mgmt_error_response(NULL, -32600, "invalid request: id must be a string, a "
						    "number or null", NULL);
	notification = id == NULL;
	json_object_foreach(req, key, v)
	{
		bool ok = false;
		for (int i = 0; keys[i] && !ok; i++)
			ok = strcmp(keys[i], key) == 0;
		if (!ok) {
			snprintf(e.msg, sizeof(e.msg), "invalid request: unknown member \"%s\"", key);
			return mgmt_error_response(id, -32600, e.msg, NULL);
		}
	}
	if (!json_is_string(json_object_get(req, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(req, "jsonrpc")), "2.0") != 0)
		return mgmt_error_response(id, -32600, "invalid request: jsonrpc must be \"2.0\"", NULL);
	method = json_string_value(json_object_get(req, "method"));
	if (!method)
		return mgmt_error_response(id, -32600, "invalid request: method must be a string", NULL);
	params = json_object_get(req, "params");
	if (params && !json_is_object(params) && !json_is_null(params))
		return mgmt_error_response(id, -32602, "invalid params: params must be an object (by "
						  "name)", NULL);
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].name, method) == 0)
			mt = &methods[i];
	if (!mt) {
		char esc[256];
		snprintf(e.msg, sizeof(e.msg), "method not found: %s",
			 log_escape(method, strlen(method), esc, sizeof(esc)));
		return notification ? NULL : mgmt_error_response(id, -32601, e.msg, NULL);
	}
	c.params = json_is_object(params) ? json_incref(params) : json_object();
	if (!c.params)
		return mgmt_error_response(id, -32603, "out of memory", NULL);
	c.done = done;
	c.done_arg = done_arg;
	c.id = id;
	r = mt->fn(&c);
	json_decref(c.params);
	if (r == 0 && c.op) {
		*op = c.op;
		return NULL;
	}
	if (mt->changes) {
		if (r < 0)
			log_info("mgmt", "rpc %s (uid %u pid %d): refused: %s", mt->name,
				 (unsigned)who->uid, (int)who->pid, e.msg);
		else
			log_info("mgmt", "rpc %s (uid %u pid %d): done", mt->name,
				 (unsigned)who->uid, (int)who->pid);
	}
	if (r == 0 && !c.result) {
		e.code = -32603;
		snprintf(e.msg, sizeof(e.msg), "out of memory");
		r = -1;
	}
	if (r < 0) {
		json_decref(c.result);
		return notification ? NULL : mgmt_error_response(id, e.code, e.msg, e.data);
	}
	if (notification) {
		json_decref(c.result);
		return NULL;
	}
	resp = mgmt_result_response(id, c.result);
	return resp ? resp : mgmt_error_response(id, -32603, "out of memory", NULL);
}

json_t *ix_mgmt_call(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *who)
{
	return ix_mgmt_call_async(m, req, who, NULL, NULL, NULL);
}

json_t *ix_mgmt_call_async(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *who,
			   ix_mgmt_done_fn done, void *arg, struct ix_mgmt_op **op)
{
	json_t *out, *e;
	size_t i;

	if (op)
		*op = NULL;
	if (!json_is_array(req))
		return call_one(m, req, who, op ? done : NULL, arg, op);
	if (json_array_size(req) == 0)
		return mgmt_error_response(NULL, -32600, "invalid request: empty batch", NULL);
	if (json_array_size(req) > MGMT_MAX_BATCH)
		return mgmt_error_response(NULL, MGMT_ERR_LIMIT, "batch too large (at most 128 requests)",
				      NULL);
	out = json_array();
	if (!out)
		return mgmt_error_response(NULL, -32603, "out of memory", NULL);
	json_array_foreach(req, i, e)
	{
		json_t *r = call_one(m, e, who, NULL, NULL, NULL);
		if (r)
			json_array_append_new(out, r);
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}
