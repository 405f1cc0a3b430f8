/* The snapshot methods' parameter checks (mgmt_m_snap.c): names, LUNs, timeouts, the clone's
 * new LUN checked before any image is made; and which LUNs have snapshots (RBD only). Offline
 * (no running target): every check that needs no cluster. */
#include <stdio.h>
#include <string.h>

#include "mgmt/mgmt_int.h"
#include "tap.h"

#define T "iqn.2026-11.io.ix.test:snap"

static const struct ix_mgmt_caller who = {0, 0};

static json_t *call(struct ix_mgmt *m, const char *method, const char *params)
{
	char text[2048];
	json_t *req, *resp;

	snprintf(text, sizeof(text),
		 "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"%s\", \"params\": %s}", method,
		 params);
	req = json_loads(text, 0, NULL);
	if (!req)
		return NULL;
	resp = ix_mgmt_call(m, req, &who);
	json_decref(req);
	return resp;
}

/* The call is refused with code and a message containing want. */
static void refused(struct ix_mgmt *m, const char *method, const char *params, int code,
		    const char *want)
{
	json_t *r = call(m, method, params), *e = json_object_get(r, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));

	printf("# %s %s -> %s\n", method, params, msg ? msg : "(no error)");
	CHECK_EQ((int)json_integer_value(json_object_get(e, "code")), code);
	CHECK(msg && strstr(msg, want));
	json_decref(r);
}

static void test_names(void)
{
	char why[128], longname[200];

	CHECK(mgmt_rbd_name_ok("s1", why, sizeof(why)));
	CHECK(mgmt_rbd_name_ok("nightly-2026.11.28_01", why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok("", why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok(NULL, why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok(".hidden", why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok("-opt", why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok("a/b", why, sizeof(why)));	/* RBD's pool/image separator */
	CHECK(!mgmt_rbd_name_ok("img@snap", why, sizeof(why))); /* and image@snapshot */
	CHECK(!mgmt_rbd_name_ok("a b", why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok("caf\xc3\xa9", why, sizeof(why)));
	CHECK(!mgmt_rbd_name_ok("a\nb", why, sizeof(why)));
	memset(longname, 'x', 127);
	longname[127] = 0;
	CHECK(mgmt_rbd_name_ok(longname, why, sizeof(why)));
	memset(longname, 'x', 128);
	longname[128] = 0;
	CHECK(!mgmt_rbd_name_ok(longname, why, sizeof(why)));
}

static void test_methods(void)
{
	struct ix_mgmt_opts o = {0};
	struct ix_mgmt *m = NULL;
	json_t *r;

	CHECK(ix_mgmt_new(NULL, json_object(), &o, &m) == 0);
	json_decref(call(m, "iscsi_create_target", "{\"target\": {\"name\": \"" T "\"}}"));
	r = call(m, "iscsi_create_lun",
		 "{\"target\": \"" T "\", \"lun\": {\"lun\": 0, \"backend\": \"ram\", "
		 "\"size\": \"1M\"}}");
	CHECK(json_object_get(r, "result"));
	json_decref(r);
	r = call(m, "iscsi_create_lun",
		 "{\"target\": \"" T "\", \"lun\": {\"lun\": 1, \"backend\": \"rbd\", \"rbd\": "
		 "{\"pool\": \"rbd\", \"image\": \"disk\"}}}");
	CHECK(json_object_get(r, "result"));
	json_decref(r);

	refused(m, "iscsi_create_snapshot", "{\"target\": \"" T "\", \"lun\": 1}", -32602,
		"params.name: required");
	refused(m, "iscsi_create_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"a@b\"}", -32602,
		"params.name: letters, digits");
	refused(m, "iscsi_create_snapshot", "{\"target\": \"" T "\", \"lun\": 1, \"name\": 7}",
		-32602, "params.name: must be a string");
	refused(m, "iscsi_create_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"timeout_ms\": 5}", -32602,
		"params.timeout_ms: an integer from 100 to 600000");
	refused(m, "iscsi_create_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"timeout_ms\": \"1s\"}",
		-32602, "params.timeout_ms");
	refused(m, "iscsi_create_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"wait\": 1}", -32602,
		"wait");
	refused(m, "iscsi_create_snapshot",
		"{\"target\": \"" T "\", \"lun\": \"1\", \"name\": \"s\"}", -32602, "params.lun");
	refused(m, "iscsi_create_snapshot",
		"{\"target\": \"iqn.x:none\", \"lun\": 1, \"name\": \"s\"}", -32002,
		"no target named");
	refused(m, "iscsi_create_snapshot", "{\"target\": \"" T "\", \"lun\": 9, \"name\": \"s\"}",
		-32002, "no LUN 9");
	refused(m, "iscsi_create_snapshot", "{\"target\": \"" T "\", \"lun\": 0, \"name\": \"s\"}",
		-32000, "only RBD LUNs have snapshots (this one is ram)");
	refused(m, "iscsi_get_snapshots", "{\"target\": \"" T "\", \"lun\": 0}", -32000,
		"only RBD LUNs");
	refused(m, "iscsi_delete_snapshot", "{\"target\": \"" T "\", \"lun\": 1, \"name\": \"\"}",
		-32602, "params.name: 1 to 127 characters");
	refused(m, "iscsi_rollback_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"force\": \"yes\"}", -32602,
		"params.force");
	/* everything checked: only the running target is missing */
	refused(m, "iscsi_create_snapshot", "{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\"}",
		-32003, "no running target");
	refused(m, "iscsi_rollback_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"force\": true}", -32003,
		"no running target");
	/* clones: the image's name, the new LUN, checked before anything is made */
	refused(m, "iscsi_clone_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"new_lun\": 2}", -32602,
		"params.image: required");
	refused(m, "iscsi_clone_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"image\": \"rbd/x\", "
		"\"new_lun\": 2}",
		-32602, "params.image: letters");
	refused(m, "iscsi_clone_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"image\": \"c\"}", -32602,
		"params.new_lun: required");
	refused(m, "iscsi_clone_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"image\": \"c\", "
		"\"new_lun\": 0}",
		-32001, "the clone's LUN cannot be created");
	refused(m, "iscsi_clone_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"image\": \"c\", "
		"\"new_lun\": 2, \"new_target\": \"iqn.x:none\"}",
		-32002, "the clone's LUN cannot be created");
	refused(m, "iscsi_clone_snapshot",
		"{\"target\": \"" T "\", \"lun\": 1, \"name\": \"s\", \"image\": \"c\", "
		"\"new_lun\": 2}",
		-32003, "no running target");
	/* nothing was added by the refused clones */
	r = call(m, "iscsi_get_luns", "{\"target\": \"" T "\"}");
	CHECK_EQ(json_array_size(json_object_get(r, "result")), 2u);
	json_decref(r);
	ix_mgmt_free(m);
}

int main(void)
{
	test_names();
	test_methods();
	return tap_done();
}
