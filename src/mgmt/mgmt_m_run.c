/* Runtime management: the methods on the running target (sessions, statistics, logout,
 * resize, offline, rejoin, RBD lock, ALUA). */
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

/* ---- methods: the running target --------------------------------------------------------- */

static const char *yes_no(bool b)
{
	return b ? "Yes" : "No";
}

static json_t *session_json(const struct ix_session_info *i)
{
	char isid[13];
	json_t *keys, *o;

	snprintf(isid, sizeof(isid), "%02x%02x%02x%02x%02x%02x", i->isid[0], i->isid[1],
		 i->isid[2], i->isid[3], i->isid[4], i->isid[5]);
	keys = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s, "
			 "s:I}",
			 "HeaderDigest", i->conn.header_digest ? "CRC32C" : "None", "DataDigest",
			 i->conn.data_digest ? "CRC32C" : "None", "MaxRecvDataSegmentLength",
			 (json_int_t)i->conn.max_recv_dsl, "MaxXmitDataSegmentLength",
			 (json_int_t)i->conn.max_xmit_dsl, "MaxBurstLength",
			 (json_int_t)i->sess.max_burst_length, "FirstBurstLength",
			 (json_int_t)i->sess.first_burst_length, "InitialR2T",
			 yes_no(i->sess.initial_r2t), "ImmediateData", yes_no(i->sess.immediate_data),
			 "MaxOutstandingR2T", (json_int_t)i->sess.max_outstanding_r2t,
			 "MaxConnections", (json_int_t)i->sess.max_connections, "DefaultTime2Wait",
			 (json_int_t)i->sess.default_time2wait, "DefaultTime2Retain",
			 (json_int_t)i->sess.default_time2retain, "DataPDUInOrder",
			 yes_no(i->sess.data_pdu_in_order), "DataSequenceInOrder",
			 yes_no(i->sess.data_sequence_in_order), "ErrorRecoveryLevel",
			 (json_int_t)i->sess.error_recovery_level);
	if (keys && i->conn.rdma) {
		json_object_set_new(keys, "RDMAExtensions", json_string("Yes"));
		json_object_set_new(keys, "TargetRecvDataSegmentLength",
				    json_integer(i->conn.target_rdsl));
		json_object_set_new(keys, "InitiatorRecvDataSegmentLength",
				    json_integer(i->conn.initiator_rdsl));
	}
	o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:i, s:o, "
		      "s:{s:I, s:I, s:I}, s:I, s:I, s:b}",
		      "tsih", i->tsih, "isid", isid, "initiator", i->initiator, "target",
		      i->target, "type", i->discovery ? "discovery" : "normal", "portal", i->portal,
		      "tpgt", i->tpgt, "cid", i->cid, "peer", i->peer, "local", i->local,
		      "transport", i->transport, "worker", i->worker, "keys", keys ? keys : json_null(),
		      "cmdsn", "exp_cmdsn", (json_int_t)i->exp_cmdsn, "max_cmdsn",
		      (json_int_t)i->max_cmdsn, "window", (json_int_t)i->cmdsn_window,
		      "commands_in_flight", (json_int_t)i->tasks_active, "commands_queued",
		      (json_int_t)i->commands_pending, "logout_requested", i->logout_requested);
	return o;
}

/* The answer of iscsi_get_sessions, filtered by params.target / params.initiator. */
static json_t *sessions_result(json_t *params, const struct ix_session_info *list, size_t n)
{
	const char *target = json_string_value(json_object_get(params, "target"));
	const char *ini = json_string_value(json_object_get(params, "initiator"));
	json_t *a = json_array();

	for (size_t k = 0; a && k < n; k++) {
		if ((target && strcmp(target, list[k].target) != 0) ||
		    (ini && strcasecmp(ini, list[k].initiator) != 0))
			continue;
		json_array_append_new(a, session_json(&list[k]));
	}
	return a;
}

/* An asynchronous method's result res (NULL: out of memory) is ready: answer unless the
 * caller went away, and end the operation. */
static void op_finish(struct ix_mgmt_op *op, json_t *res)
{
	json_t *resp = NULL;

	if (!op->cancelled && op->id)
		resp = res ? mgmt_result_response(op->id, res)
			   : mgmt_error_response(op->id, -32603, "out of memory", NULL);
	else
		json_decref(res);
	if (!op->cancelled)
		op->done(op->arg, resp);
	json_decref(resp);
	json_decref(op->id);
	json_decref(op->params);
	free(op);
}

static void sessions_done(void *arg, const struct ix_session_info *list, size_t n,
			  const struct ix_login_stats *logins)
{
	struct ix_mgmt_op *op = arg;

	(void)logins;
	op_finish(op, op->cancelled ? NULL : sessions_result(op->params, list, n));
}

static void stats_done(void *arg, const struct ix_stats *st)
{
	struct ix_mgmt_op *op = arg;

	op_finish(op, op->cancelled ? NULL : metrics_json(st));
}

/* iscsi_get_sessions and iscsi_get_stats: ask the workers. */
static int ask_workers(struct call *c, bool stats)
{
	struct ix_mgmt_op *op;
	int r;

	if (!c->m->tgt) {
		static const struct ix_stats none;
		c->result = stats ? metrics_json(&none) : json_array();
		return 0;
	}
	if (!c->done)
		return mgmt_err_set(c->e, -32600, "%s cannot be part of a batch (send it alone)",
				stats ? "iscsi_get_stats" : "iscsi_get_sessions");
	op = calloc(1, sizeof(*op));
	if (!op)
		return mgmt_err_set(c->e, -32603, "out of memory");
	op->done = c->done;
	op->arg = c->done_arg;
	op->id = c->id ? json_incref(c->id) : NULL;
	op->params = json_incref(c->params);
	op->stats = stats;
	r = stats ? ix_target_stats(c->m->tgt, stats_done, op)
		  : ix_target_sessions(c->m->tgt, sessions_done, op);
	if (r < 0) {
		json_decref(op->id);
		json_decref(op->params);
		free(op);
		return mgmt_err_set(c->e, -32603, "out of memory");
	}
	c->op = op;
	return 0;
}

int mgmt_m_get_sessions(struct call *c)
{
	static const char *const keys[] = {"target", "initiator", NULL};
	const char *target, *ini;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", false, &target) < 0 ||
	    mgmt_p_str(c, "initiator", false, &ini) < 0)
		return -1;
	return ask_workers(c, false);
}

int mgmt_m_get_stats(struct call *c)
{
	static const char *const keys[] = {NULL};

	if (mgmt_p_keys(c, keys) < 0)
		return -1;
	return ask_workers(c, true);
}

int mgmt_m_logout_session(struct call *c)
{
	static const char *const keys[] = {"tsih", "drop", "timeout_ms", NULL};
	json_t *tsih = json_object_get(c->params, "tsih");
	json_t *tmo = json_object_get(c->params, "timeout_ms");
	json_t *g = json_object_get(json_object_get(c->m->doc, "global"), "logout_timeout_ms");
	json_int_t ms = json_is_integer(g) ? json_integer_value(g) : 5000;
	bool drop;
	int r;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_bool(c, "drop", &drop) < 0)
		return -1;
	if (!json_is_integer(tsih) || json_integer_value(tsih) < 1 ||
	    json_integer_value(tsih) > 65535)
		return mgmt_err_set(c->e, -32602, "params.tsih: required (an integer 1-65535)");
	if (tmo && !json_is_null(tmo)) {
		if (!json_is_integer(tmo) || json_integer_value(tmo) < 1000 ||
		    json_integer_value(tmo) > 3600000)
			return mgmt_err_set(c->e, -32602,
					"params.timeout_ms: an integer from 1000 to 3600000");
		ms = json_integer_value(tmo);
	}
	if (!c->m->tgt)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no session with tsih %lld",
				(long long)json_integer_value(tsih));
	r = ix_target_session_end(c->m->tgt, (uint16_t)json_integer_value(tsih), drop,
				  (uint32_t)ms);
	if (r == -ENOENT)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no session with tsih %lld",
				(long long)json_integer_value(tsih));
	if (r < 0)
		return mgmt_err_set(c->e, -32603, "%s", strerror(-r));
	c->result = json_pack("{s:s}", "requested", drop ? "drop" : "logout");
	return 0;
}

/* iscsi_resize_lun with force, smaller, of a running RBD LUN: the new document (size set) is
 * validated first, then the LU and its image shrink (every gateway of the image follows through
 * librbd's update watch), then the document is committed (the reload finds the LU that size
 * already). Takes newdoc. */
static int shrink_lun(struct call *c, json_t *newdoc, const char *target, uint32_t lun,
		      uint64_t want)
{
	json_t *check = json_deep_copy(newdoc), *res = NULL;
	bool dry_run = json_is_true(json_object_get(c->params, "dry_run"));
	char err[512];
	int r;

	if (!check || mgmt_apply_doc(c->m, check, true, true, &res, c->e) < 0) {
		if (!check)
			mgmt_err_set(c->e, -32603, "out of memory");
		for (int i = 0; check && i < c->nmap; i++)
			if (mgmt_remap_path(c->e->msg, sizeof(c->e->msg), c->map[i].doc,
					    c->map[i].req))
				break;
		json_decref(newdoc);
		return -1;
	}
	json_decref(res);
	if (dry_run)
		return mgmt_commit(c, newdoc);
	r = ix_target_lun_shrink(c->m->tgt, target, lun, want, err, sizeof(err));
	if (r < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_APPLY, "LUN %u of %s: cannot shrink: %s", lun,
				    target, err);
	}
	log_warn("mgmt", "target %s LUN %u: shrunk to %llu bytes (force): the data past it is gone",
		 target, lun, (unsigned long long)want);
	return mgmt_commit(c, newdoc);
}

int mgmt_m_resize_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "size", "force", "dry_run", NULL};
	json_t *lunv = json_object_get(c->params, "lun"), *size = json_object_get(c->params, "size");
	json_t *newdoc, *t, *l, *luns, *num;
	const char *target, *backend;
	uint64_t want, have;
	bool force;
	long i;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_bool(c, "force", &force) < 0)
		return -1;
	if (!json_is_integer(lunv))
		return mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
	if (!json_is_integer(size) && !json_is_string(size))
		return mgmt_err_set(c->e, -32602, "params.size: required (bytes, or a string like \"20G\")");
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (!(t = mgmt_find_target(newdoc, target))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	luns = json_object_get(t, "luns");
	num = json_integer(json_integer_value(lunv));
	i = mgmt_find_by(luns, "lun", num);
	json_decref(num);
	if (i < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
				(long long)json_integer_value(lunv), target);
	}
	l = json_array_get(luns, (size_t)i);
	backend = json_string_value(json_object_get(l, "backend"));
	if (!backend || (strcmp(backend, "file") && strcmp(backend, "block") &&
			 strcmp(backend, "ram") && strcmp(backend, "rbd"))) {
		mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG,
			 "LUN %lld of %s: only file, block, RAM and RBD LUNs grow online (this one "
			 "is %s)",
			 (long long)json_integer_value(lunv), target, backend ? backend : "?");
		json_decref(newdoc); /* backend pointed into it */
		return -1;
	}
	if (json_is_true(json_object_get(l, "readonly"))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG, "LUN %lld of %s is read-only",
				(long long)json_integer_value(lunv), target);
	}
	if (c->m->tgt && mgmt_size_value(size, &want) &&
	    ix_target_lun_bytes(c->m->tgt, target, (uint32_t)json_integer_value(lunv), &have) ==
		0 &&
	    want < have) {
		bool rbd = strcmp(backend, "rbd") == 0;

		if (force && rbd) {
			json_object_set(l, "size", size);
			mgmt_map(c, "params.size", "targets[%ld].luns[%ld].size",
				 mgmt_find_by(json_object_get(newdoc, "targets"), "name",
					      json_object_get(t, "name")), i);
			return shrink_lun(c, newdoc, target, (uint32_t)json_integer_value(lunv),
					  want);
		}
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG,
				"LUN %lld of %s: %llu bytes is smaller than its %llu: LUNs only grow "
				"online%s", (long long)json_integer_value(lunv), target,
				(unsigned long long)want, (unsigned long long)have,
				rbd ? " (an RBD LUN shrinks with \"force\": true, losing the data "
				      "past the new end)"
				    : "");
	}
	if (mgmt_size_value(size, &want) &&
	    mgmt_size_value(json_object_get(l, "size"), &have) && want == have) {
		/* the same size, maybe in another notation: no change, nothing rewritten */
		json_decref(newdoc);
		c->result = json_pack("{s:b, s:[]}", "changed", 0, "changes");
		return c->result ? 0 : mgmt_err_set(c->e, -32603, "out of memory");
	}
	json_object_set(l, "size", size);
	mgmt_map(c, "params.size", "targets[%ld].luns[%ld].size",
		 mgmt_find_by(json_object_get(newdoc, "targets"), "name",
			      json_object_get(t, "name")), i);
	return mgmt_commit(c, newdoc);
}

int mgmt_m_set_lun_offline(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "offline", "dry_run", NULL};
	json_t *lunv = json_object_get(c->params, "lun"), *newdoc, *t, *num;
	const char *target;
	bool offline;
	long i;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(lunv))
		return mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
	if (!json_is_boolean(json_object_get(c->params, "offline")))
		return mgmt_err_set(c->e, -32602, "params.offline: required (true or false)");
	if (mgmt_p_bool(c, "offline", &offline) < 0)
		return -1;
	if (!(newdoc = json_deep_copy(c->m->doc)))
		return mgmt_err_set(c->e, -32603, "out of memory");
	if (!(t = mgmt_find_target(newdoc, target))) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no target named \"%s\"", target);
	}
	num = json_integer(json_integer_value(lunv));
	i = mgmt_find_by(json_object_get(t, "luns"), "lun", num);
	json_decref(num);
	if (i < 0) {
		json_decref(newdoc);
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no LUN %lld in target %s",
				(long long)json_integer_value(lunv), target);
	}
	if (offline)
		json_object_set_new(json_array_get(json_object_get(t, "luns"), (size_t)i), "offline",
				    json_true());
	else /* online is the default: the key goes */
		json_object_del(json_array_get(json_object_get(t, "luns"), (size_t)i), "offline");
	if (mgmt_commit(c, newdoc) < 0)
		return -1;
	/* online: a backend that is not open yet (RBD started offline) tries again now */
	if (!offline && c->m->tgt && !json_is_true(json_object_get(c->params, "dry_run")))
		ix_target_lun_retry(c->m->tgt, target, (uint32_t)json_integer_value(lunv));
	return 0;
}

/* A fenced RBD LUN rejoins the cluster now (a new client; docs/ha.md). The answer is the LUN's
 * "status" right after the rejoin started (it runs on the backend's opener thread). */
int mgmt_m_rejoin_lun(struct call *c)
{
	static const char *const keys[] = {"target", "lun", NULL};
	json_t *lunv = json_object_get(c->params, "lun");
	const char *target;
	uint32_t lun;
	int rc;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	if (!json_is_integer(lunv) || json_integer_value(lunv) < 0)
		return mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
	if (!c->m->tgt)
		return mgmt_err_set(c->e, MGMT_ERR_APPLY, "no running target");
	lun = (uint32_t)json_integer_value(lunv);
	rc = ix_target_lun_rejoin(c->m->tgt, target, lun);
	if (rc == -ENOENT)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "%s LUN %u: no such LUN", target, lun);
	if (rc == -EINVAL || rc == -EOPNOTSUPP)
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG, "%s LUN %u: not an RBD LUN%s",
				target, lun, rc == -EOPNOTSUPP ? " (built without RBD)" : "");
	if (rc == -EALREADY)
		return mgmt_err_set(c->e, MGMT_ERR_APPLY,
				"%s LUN %u: not fenced: its cluster connection serves", target,
				lun);
	if (rc == -EAGAIN)
		return mgmt_err_set(c->e, MGMT_ERR_APPLY,
				"%s LUN %u: the image is not open yet (ix-ctl lun online)", target,
				lun);
	if (rc < 0)
		return mgmt_err_set(c->e, MGMT_ERR_APPLY, "%s LUN %u: %s", target, lun, strerror(-rc));
	c->result = mgmt_lun_status(c->m->tgt, target, lunv);
	return c->result ? 0 : mgmt_err_set(c->e, -32603, "out of memory");
}

/* The managed exclusive lock of an RBD LUN (rbd.exclusive_lock): break it and take it, for a
 * failover; dry_run only reports who holds it and this gateway's state. */
int mgmt_m_break_rbd_lock(struct call *c)
{
	static const char *const keys[] = {"target", "lun", "dry_run", NULL};
	json_t *lunv = json_object_get(c->params, "lun");
	char state[32] = "", reason[256];
	const char *target;
	bool dry;
	int rc;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_bool(c, "dry_run", &dry) < 0)
		return -1;
	if (!json_is_integer(lunv) || json_integer_value(lunv) < 0)
		return mgmt_err_set(c->e, -32602, "params.lun: required (an integer)");
	if (!c->m->tgt)
		return mgmt_err_set(c->e, MGMT_ERR_APPLY, "no running target");
	rc = ix_target_lun_rbd_lock(c->m->tgt, target, (uint32_t)json_integer_value(lunv), !dry,
				    state, sizeof(state), reason, sizeof(reason));
	if (rc == -ENOENT)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "%s LUN %lld: %s", target,
				(long long)json_integer_value(lunv), reason);
	if (rc < 0)
		return mgmt_err_set(c->e, rc == -EINVAL || rc == -EOPNOTSUPP ? MGMT_ERR_INVALID_CONFIG
									 : MGMT_ERR_APPLY,
				"%s LUN %lld: %s", target, (long long)json_integer_value(lunv),
				reason);
	c->result = json_pack("{s:s, s:s, s:b}", "state", state, "reason", reason, "dry_run", dry);
	return c->result ? 0 : mgmt_err_set(c->e, -32603, "out of memory");
}

/* ---- ALUA: the running states (not the document: SET TARGET PORT GROUPS and failover change
 * them; the document holds the states a group starts in) ---- */

static json_t *alua_json(const struct scsi_alua_cfg *a)
{
	static const char *const status[] = {"none", "explicit", "implicit"};
	json_t *groups = json_array();

	for (unsigned i = 0; groups && i < a->ngroups; i++) {
		const struct scsi_alua_group_cfg *g = &a->groups[i];
		json_t *ports = json_array();

		for (unsigned j = 0; ports && j < g->nports; j++)
			json_array_append_new(ports, json_integer(g->ports[j]));
		json_array_append_new(
		    groups, json_pack("{s:i, s:s, s:s, s:b, s:o*}", "id", g->id, "state",
				      scsi_alua_state_name(g->state), "status",
				      g->status < 3 ? status[g->status] : "?", "preferred",
				      g->preferred, "relative_ports", ports));
	}
	return json_pack("{s:b, s:i, s:o*}", "explicit", a->explicit_ok, "transition_time",
			 a->transition_s, "groups", groups);
}

int mgmt_m_get_alua(struct call *c)
{
	static const char *const keys[] = {"target", NULL};
	struct scsi_alua_cfg a;
	const char *target;
	int r;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0)
		return -1;
	r = c->m->tgt ? ix_target_alua_get(c->m->tgt, target, &a) : -ENOENT;
	if (r < 0)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "target \"%s\" is not served with ALUA",
				target);
	c->result = alua_json(&a);
	return c->result ? 0 : mgmt_err_set(c->e, -32603, "out of memory");
}

int mgmt_m_set_alua_state(struct call *c)
{
	static const char *const keys[] = {"target", "group", "state", NULL};
	json_t *g = json_object_get(c->params, "group");
	const char *target, *name;
	uint8_t state;
	int r;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_str(c, "target", true, &target) < 0 ||
	    mgmt_p_str(c, "state", true, &name) < 0)
		return -1;
	if (!json_is_integer(g) || json_integer_value(g) < 1 || json_integer_value(g) > 65535)
		return mgmt_err_set(c->e, -32602, "params.group: required (an integer 1-65535)");
	if (scsi_alua_state_parse(name, &state) < 0)
		return mgmt_err_set(c->e, -32602,
				"params.state: active/optimized, active/non-optimized, standby, "
				"unavailable, offline or transitioning");
	r = c->m->tgt ? ix_target_alua_set(c->m->tgt, target, (uint16_t)json_integer_value(g),
					   state)
		      : -ENOENT;
	if (r < 0)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND,
				"target \"%s\" has no ALUA group %lld", target,
				(long long)json_integer_value(g));
	c->result = json_true();
	return 0;
}
