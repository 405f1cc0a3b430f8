/* Runtime management: iscsi_set_qos, the QoS limits of a LUN or of an initiator (an ACL entry)
 * changed at run time. The limits are part of the configuration document ("qos" of the LUN or
 * ACL entry): the method changes the document and applies it like every configuration method,
 * and the reload changes the running limits in place (target/tgt_qos.c), commands already
 * waiting included. */
#include "mgmt/mgmt_int.h"

#include <string.h>

/* The element of doc's target's array akey whose key equals v, or NULL with the error set. */
static json_t *find_in(struct call *c, json_t *doc, const char *target, const char *akey,
		       const char *key, json_t *v, const char *what)
{
	json_t *t = mgmt_find_target(doc, target);
	long i;

	if (!t) {
		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
		return NULL;
	}
	i = mgmt_find_by(json_object_get(t, akey), key, v);
	if (i < 0) {
		char *s = json_dumps(v, JSON_ENCODE_ANY);

		mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no %s %s in target %s%s", what,
			     s ? s : "?", target,
			     strcmp(akey, "acls") == 0
				 ? " (an initiator's limits belong to its ACL entry: "
				   "iscsi_create_acl first)"
				 : "");
		free(s);
		return NULL;
	}
	return json_array_get(json_object_get(t, akey), (size_t)i);
}

int mgmt_m_set_qos(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "initiator", "qos", "dry_run", NULL};
	json_t *lun = json_object_get(c->params, "lun");
	json_t *ini = json_object_get(c->params, "initiator");
	json_t *qos = json_object_get(c->params, "qos");
	const char *target;
	json_t *newdoc, *obj;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if ((lun && json_is_null(lun)) || (ini && json_is_null(ini)))
		return mgmt_err_set(c->e, -32602, "params: lun and initiator may not be null");
	if (!lun == !ini)
		return mgmt_err_set(c->e, -32602,
				    "params: either lun (a LUN's limits) or initiator (an "
				    "initiator's, on this target) is required, not both");
	if (lun && !json_is_integer(lun))
		return mgmt_err_set(c->e, -32602, "params.lun: must be an integer");
	if (ini && !json_is_string(ini))
		return mgmt_err_set(c->e, -32602, "params.initiator: must be a string");
	if (!qos)
		return mgmt_err_set(c->e, -32602,
				    "params.qos: required but missing (an object as the "
				    "configuration's \"qos\"; {} or null: no limits)");
	if (!json_is_object(qos) && !json_is_null(qos))
		return mgmt_err_set(c->e, -32602, "params.qos: must be an object or null");
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	obj = lun ? find_in(c, newdoc, target, "luns", "lun", lun, "LUN")
		  : find_in(c, newdoc, target, "acls", "initiator", ini, "ACL entry for");
	if (!obj) {
		json_decref(newdoc);
		return -1;
	}
	if (json_is_null(qos) || json_object_size(qos) == 0)
		json_object_del(obj, "qos");
	else if (json_object_set(obj, "qos", qos) < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	return mgmt_commit(c, newdoc); /* validated whole (the loader's messages), then applied */
}
