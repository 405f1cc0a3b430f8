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

static const struct method {
	const char *name;
	int (*fn)(struct call *c);
	bool changes; /* logged */
} methods[] = {
    {"rpc_get_methods", m_get_methods, false},
    {"iscsi_get_config", mgmt_m_get_config, false},
    {"iscsi_apply_config", mgmt_m_apply_config, true},
    {"iscsi_get_portals", mgmt_m_get_portals, false},
    {"iscsi_create_portal", mgmt_m_create_portal, true},
    {"iscsi_delete_portal", mgmt_m_delete_portal, true},
    {"iscsi_get_targets", mgmt_m_get_targets, false},
    {"iscsi_create_target", mgmt_m_create_target, true},
    {"iscsi_delete_target", mgmt_m_delete_target, true},
    {"iscsi_get_luns", mgmt_m_get_luns, false},
    {"iscsi_create_lun", mgmt_m_create_lun, true},
    {"iscsi_delete_lun", mgmt_m_delete_lun, true},
    {"iscsi_resize_lun", mgmt_m_resize_lun, true},
    {"iscsi_set_lun_offline", mgmt_m_set_lun_offline, true},
    {"iscsi_set_lun_options", mgmt_m_set_lun_options, true},
    {"iscsi_break_rbd_lock", mgmt_m_break_rbd_lock, true},
    {"iscsi_rejoin_lun", mgmt_m_rejoin_lun, true},
    {"iscsi_get_alua", mgmt_m_get_alua, false},
    {"iscsi_set_alua_state", mgmt_m_set_alua_state, true},
    {"iscsi_get_acls", mgmt_m_get_acls, false},
    {"iscsi_create_acl", mgmt_m_create_acl, true},
    {"iscsi_delete_acl", mgmt_m_delete_acl, true},
    {"iscsi_set_acl_luns", mgmt_m_set_acl_luns, true},
    {"iscsi_set_target_auth", mgmt_m_set_target_auth, true},
    {"iscsi_set_target_options", mgmt_m_set_target_options, true},
    {"iscsi_get_discovery_auth", mgmt_m_get_discovery_auth, false},
    {"iscsi_set_discovery_auth", mgmt_m_set_discovery_auth, true},
    {"save_config", mgmt_m_save_config, true},
    {"iscsi_get_sessions", mgmt_m_get_sessions, false},
    {"iscsi_get_stats", mgmt_m_get_stats, false},
    {"iscsi_logout_session", mgmt_m_logout_session, true},
};

static int m_get_methods(struct call *c)
{
	static const char *const keys[] = {NULL};

	if (mgmt_p_keys(c, keys) < 0)
		return -1;
	c->result = json_array();
	for (size_t i = 0; c->result && i < sizeof(methods) / sizeof(methods[0]); i++)
		json_array_append_new(c->result, json_string(methods[i].name));
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
	if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id))
		return mgmt_error_response(NULL, -32600, "invalid request: id must be a string or an "
						    "integer", NULL);
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
