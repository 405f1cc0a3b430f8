/* The management document engine offline (no target): comparing by value (sizes), "create" of
 * what exists comparing only what the request names, errors at the request's path, JSON-RPC
 * ids, save into a missing directory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/mgmt_int.h"
#include "tap.h"

#define T "iqn.2026-11.io.ix.test:t"

static const struct ix_mgmt_caller who = {0, 0};

static void test_sizes(void)
{
	uint64_t v = 0;
	json_t *a = json_string("64M"), *b = json_integer(67108864), *c = json_string("64MiB");
	json_t *d = json_string("65536K"), *e = json_string("64MB"), *f = json_string("");

	CHECK(mgmt_size_value(a, &v) && v == 67108864);
	CHECK(mgmt_size_value(c, &v) && v == 67108864);
	CHECK(!mgmt_size_value(e, &v));
	CHECK(!mgmt_size_value(f, &v));
	CHECK(mgmt_same(a, b, "size"));
	CHECK(mgmt_same(c, d, "size"));
	CHECK(!mgmt_same(a, b, "alias")); /* only sizes compare by value */
	CHECK(mgmt_same(NULL, json_null(), "alias"));
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(d);
	json_decref(e);
	json_decref(f);
}

static void test_covers(void)
{
	json_t *have = json_loads("{\"name\": \"t\", \"alias\": \"A\", \"luns\": [{\"lun\": 0, "
				  "\"backend\": \"ram\", \"size\": \"64M\"}, {\"lun\": 1, "
				  "\"backend\": \"ram\", \"size\": 1024}], \"acls\": [{\"initiator\": "
				  "\"iqn.x:a\"}]}",
				  0, NULL);
	json_t *w1 = json_loads("{\"name\": \"t\", \"alias\": \"A\"}", 0, NULL);
	json_t *w2 = json_loads("{\"name\": \"t\", \"alias\": \"B\"}", 0, NULL);
	json_t *w3 = json_loads("{\"name\": \"t\", \"luns\": [{\"lun\": 0, \"backend\": \"ram\", "
				"\"size\": 67108864}]}",
				0, NULL);
	json_t *w4 = json_loads("{\"name\": \"t\", \"luns\": [{\"lun\": 1, \"size\": \"2K\"}]}", 0,
				NULL);
	json_t *w5 = json_loads("{\"name\": \"t\", \"max_sessions\": 2}", 0, NULL);
	char path[128];

	snprintf(path, sizeof(path), "params.target");
	CHECK(mgmt_covers(have, w1, NULL, path, sizeof(path)));
	CHECK_STR(path, "params.target");
	CHECK(!mgmt_covers(have, w2, NULL, path, sizeof(path)));
	CHECK_STR(path, "params.target.alias");
	snprintf(path, sizeof(path), "params.target");
	CHECK(mgmt_covers(have, w3, NULL, path, sizeof(path)));
	CHECK(!mgmt_covers(have, w4, NULL, path, sizeof(path)));
	CHECK_STR(path, "params.target.luns[0].size");
	snprintf(path, sizeof(path), "params.target");
	CHECK(!mgmt_covers(have, w5, NULL, path, sizeof(path)));
	CHECK_STR(path, "params.target.max_sessions");
	{ /* an ACL's LUN map is one setting: compared whole */
		json_t *acl = json_loads("{\"initiator\": \"iqn.x:a\", \"luns\": [{\"lun\": 0, "
					 "\"target_lun\": 2}, {\"target_lun\": 1}]}",
					 0, NULL);
		json_t *wa = json_loads("{\"initiator\": \"iqn.x:a\", \"luns\": [{\"lun\": 0, "
					"\"target_lun\": 2}]}",
					0, NULL);
		json_t *wb = json_loads("{\"initiator\": \"iqn.x:a\"}", 0, NULL);

		snprintf(path, sizeof(path), "params.acl");
		CHECK(!mgmt_covers(acl, wa, NULL, path, sizeof(path)));
		CHECK_STR(path, "params.acl.luns");
		snprintf(path, sizeof(path), "params.acl");
		CHECK(mgmt_covers(acl, wb, NULL, path, sizeof(path)));
		json_decref(acl);
		json_decref(wa);
		json_decref(wb);
	}
	json_decref(have);
	json_decref(w1);
	json_decref(w2);
	json_decref(w3);
	json_decref(w4);
	json_decref(w5);
}

static void test_remap(void)
{
	char m[1024];

	snprintf(m, sizeof(m), "targets[1].luns[2].size: \"x\" is not a size");
	CHECK(mgmt_remap_path(m, sizeof(m), "targets[1].luns[2]", "params.lun"));
	CHECK_STR(m, "params.lun.size: \"x\" is not a size (targets[1].luns[2].size in the "
		     "configuration)");
	snprintf(m, sizeof(m), "targets[1].luns[20].size: bad");
	CHECK(!mgmt_remap_path(m, sizeof(m), "targets[1].luns[2]", "params.lun"));
	snprintf(m, sizeof(m), "targets[0].alias: too long");
	CHECK(mgmt_remap_path(m, sizeof(m), "", "params.config"));
	CHECK_STR(m, "params.config.targets[0].alias: too long");
	snprintf(m, sizeof(m), "test-only features need: --testing");
	CHECK(!mgmt_remap_path(m, sizeof(m), "", "params.config"));
}

/* One call's answer. */
static json_t *call(struct ix_mgmt *m, const char *text)
{
	json_t *req = json_loads(text, 0, NULL), *resp;

	if (!req)
		return NULL;
	resp = ix_mgmt_call(m, req, &who);
	json_decref(req);
	return resp;
}

static int err_code(json_t *r)
{
	return (int)json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static const char *err_msg(json_t *r)
{
	const char *s = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
	return s ? s : "";
}

static bool changed(json_t *r)
{
	return json_is_true(json_object_get(json_object_get(r, "result"), "changed"));
}

static bool unchanged(json_t *r)
{
	return json_is_false(json_object_get(json_object_get(r, "result"), "changed"));
}

static void test_methods(void)
{
	struct ix_mgmt_opts o = {0};
	struct ix_mgmt *m = NULL;
	json_t *r, *doc = json_object();
	const char *ms;

	CHECK(ix_mgmt_new(NULL, doc, &o, &m) == 0);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"iscsi_create_target\", "
		    "\"params\": {\"target\": {\"name\": \"" T "\", \"alias\": \"A\"}}}");
	CHECK(changed(r));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"iscsi_create_lun\", \"params\": "
		    "{\"target\": \"" T "\", \"lun\": {\"lun\": 0, \"backend\": \"ram\", \"size\": "
		    "\"64M\"}}}");
	CHECK(changed(r));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"iscsi_create_acl\", \"params\": "
		    "{\"target\": \"" T "\", \"acl\": {\"initiator\": \"iqn.2026-11.io.ix.test:a\"}}}");
	CHECK(changed(r));
	json_decref(r);
	/* the provisioning script again: no change */
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"iscsi_create_target\", "
		    "\"params\": {\"target\": {\"name\": \"" T "\", \"alias\": \"A\"}}}");
	CHECK(unchanged(r));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"iscsi_create_lun\", \"params\": "
		    "{\"target\": \"" T "\", \"lun\": {\"lun\": 0, \"backend\": \"ram\", \"size\": "
		    "67108864}}}");
	CHECK(unchanged(r));
	json_decref(r);
	/* a conflicting named setting */
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": \"iscsi_create_target\", "
		    "\"params\": {\"target\": {\"name\": \"" T "\", \"alias\": \"B\"}}}");
	CHECK_EQ(err_code(r), MGMT_ERR_EXISTS);
	CHECK(strncmp(err_msg(r), "params.target.alias: ", 21) == 0);
	json_decref(r);
	/* resize to the same size in another notation: no change, the stored text kept */
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"iscsi_resize_lun\", \"params\": "
		    "{\"target\": \"" T "\", \"lun\": 0, \"size\": 67108864}}");
	CHECK(unchanged(r));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 8, \"method\": \"iscsi_get_luns\", \"params\": "
		    "{\"target\": \"" T "\"}}");
	CHECK_STR(json_string_value(json_object_get(
			  json_array_get(json_object_get(r, "result"), 0), "size")),
		  "64M");
	json_decref(r);
	/* errors at the request's path */
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"iscsi_resize_lun\", \"params\": "
		    "{\"target\": \"" T "\", \"lun\": 0, \"size\": \"12Q\"}}");
	ms = err_msg(r);
	CHECK_EQ(err_code(r), MGMT_ERR_INVALID_CONFIG);
	CHECK(strncmp(ms, "params.size: ", 13) == 0 && strstr(ms, "targets[0].luns[0].size"));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 10, \"method\": \"iscsi_create_lun\", "
		    "\"params\": {\"target\": \"" T "\", \"lun\": {\"lun\": 1, \"backend\": \"ram\", "
		    "\"size\": \"1X\"}}}");
	CHECK(strncmp(err_msg(r), "params.lun.size: ", 17) == 0);
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 11, \"method\": \"iscsi_set_target_options\", "
		    "\"params\": {\"target\": \"" T "\", \"max_sessions\": \"x\"}}");
	CHECK(strncmp(err_msg(r), "params.max_sessions: ", 21) == 0);
	json_decref(r);
	/* ids: null and a number with a fraction are answered (JSON-RPC 2.0), true is not */
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": null, \"method\": \"rpc_get_methods\"}");
	CHECK(r && json_is_null(json_object_get(r, "id")) && json_object_get(r, "result"));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 1.5, \"method\": \"rpc_get_methods\"}");
	CHECK(r && json_real_value(json_object_get(r, "id")) == 1.5 &&
	      json_object_get(r, "result"));
	json_decref(r);
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": true, \"method\": \"rpc_get_methods\"}");
	CHECK_EQ(err_code(r), -32600);
	json_decref(r);
	/* save into a missing directory: the file given, and why */
	r = call(m, "{\"jsonrpc\": \"2.0\", \"id\": 12, \"method\": \"save_config\", "
		    "\"params\": {\"path\": \"/nonexistent-ix-dir/x.json\"}}");
	ms = err_msg(r);
	CHECK_EQ(err_code(r), MGMT_ERR_IO);
	CHECK(strstr(ms, "/nonexistent-ix-dir/x.json:") == ms && !strstr(ms, ".tmp") &&
	      strstr(ms, "directory /nonexistent-ix-dir does not exist"));
	json_decref(r);
	ix_mgmt_free(m);
}

int main(void)
{
	test_sizes();
	test_covers();
	test_remap();
	test_methods();
	return tap_done();
}
