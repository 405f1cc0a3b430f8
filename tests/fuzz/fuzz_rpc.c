/* libFuzzer harness for the management API's JSON-RPC parser and methods (mgmt/rpc.c framing,
 * mgmt/mgmt.c dispatch, parameters and configuration changes), without a socket or a daemon:
 * an offline ix_mgmt (changes are validated and kept, nothing is served; save is disabled).
 *
 * Input: the bytes a client sends, in chunks separated by FUZZ_SEP (0xff, which never occurs
 * in UTF-8 JSON), fed one chunk at a time so that requests are split at every place. Inputs over
 * 64 KiB are skipped. Properties beyond "no crash":
 *  - every answer is one line of JSON: an object (or, for a batch, an array of objects) with
 *    "jsonrpc": "2.0", an "id", and exactly one of "result" and "error"; an error has an integer
 *    code and a string message;
 *  - a stream error (-EPROTO, -EMSGSIZE) is answered (the last answer is an error with id null)
 *    before it is returned, and nothing is fed after it;
 *  - whatever the requests changed, the configuration held at the end still loads
 *    (cfg_load_string): no sequence of calls leaves an invalid configuration behind.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "mgmt/mgmt.h"
#include "mgmt/rpc.h"
#include "target/config.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char base_doc[] =
    "{\"global\": {\"discovery\": {\"chap\": {\"user\": \"disc\", \"secret\": "
    "\"discovery-secret\"}}},"
    " \"portals\": [{\"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260}],"
    " \"targets\": [{\"name\": \"iqn.2026-11.io.ix:t0\", \"luns\": [{\"lun\": 0, \"backend\": "
    "\"ram\", \"size\": \"1M\"}], \"acls\": [{\"initiator\": \"iqn.2026-11.io.ix:i0\", "
    "\"chap\": {\"user\": \"u\", \"secret\": \"target-secret-1\"}}]}]}";

struct out {
	int answers;
	bool last_error; /* the last answer was a single error with id null */
};

static void check_response(json_t *r)
{
	json_t *res, *err;

	if (!json_is_object(r))
		abort();
	if (!json_is_string(json_object_get(r, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(r, "jsonrpc")), "2.0") != 0)
		abort();
	if (!json_object_get(r, "id"))
		abort();
	res = json_object_get(r, "result");
	err = json_object_get(r, "error");
	if (!res == !err)
		abort();
	if (err && (!json_is_integer(json_object_get(err, "code")) ||
		    !json_is_string(json_object_get(err, "message"))))
		abort();
}

static void emit(void *arg, const char *resp, size_t len)
{
	struct out *o = arg;
	json_error_t je;
	json_t *v;

	if (len == 0 || resp[len - 1] != '\n' || memchr(resp, '\n', len) != resp + len - 1)
		abort();
	v = json_loadb(resp, len, 0, &je);
	if (!v)
		abort();
	if (json_is_array(v)) {
		size_t i;
		json_t *e;
		if (json_array_size(v) == 0)
			abort();
		json_array_foreach(v, i, e) check_response(e);
		o->last_error = false;
	} else {
		check_response(v);
		o->last_error = json_object_get(v, "error") && json_is_null(json_object_get(v, "id"));
	}
	json_decref(v);
	o->answers++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ix_mgmt_opts mo = {.no_save = true};
	struct ix_mgmt_caller who = {.pid = 1, .uid = 0};
	struct fuzz_seg seg = {.p = data, .left = size};
	struct ix_mgmt *m;
	struct rpc_stream *st;
	struct out o = {0};
	const uint8_t *p;
	size_t n;
	json_t *doc, *req, *resp;
	struct ix_config *cfg;
	char err[1024], *text;

	if (size > 64 * 1024)
		return 0;
	ix_log_set_level(LOG_ERR); /* every change is logged at info */
	doc = json_loads(base_doc, 0, NULL);
	if (!doc || ix_mgmt_new(NULL, doc, &mo, &m) < 0)
		abort();
	st = rpc_stream_new(m, &who, emit, &o);
	if (!st)
		abort();
	while (fuzz_seg_next(&seg, &p, &n)) {
		int before = o.answers;
		int r = rpc_stream_feed(st, (const char *)p, n);
		if (r < 0) {
			if ((r != -EPROTO && r != -EMSGSIZE && r != -ENOMEM) || o.answers <= before ||
			    !o.last_error)
				abort();
			break;
		}
	}
	rpc_stream_free(st);

	/* the configuration held at the end is valid */
	req = json_loads("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"iscsi_get_config\"}", 0,
			 NULL);
	resp = ix_mgmt_call(m, req, &who);
	if (!resp || !json_is_object(json_object_get(resp, "result")))
		abort();
	text = json_dumps(json_object_get(resp, "result"), JSON_COMPACT);
	if (!text || cfg_load_string(text, "held", &cfg, err, sizeof(err)) != 0)
		abort();
	cfg_free(cfg);
	free(text);
	json_decref(resp);
	json_decref(req);
	ix_mgmt_free(m);
	return 0;
}
