/* Runtime management: the running configuration as one JSON document, changed through
 * JSON-RPC 2.0 methods (docs/management.md) and applied through the reload machinery
 * (target/tgt_reload.c).
 *
 * The document is the configuration file's schema, and nothing else: the API's objects are the
 * file's objects, get methods return them as they are held, and save writes the document (so a
 * fresh daemon started on the saved file holds the same document). Every change is made to a
 * copy of the document, validated whole by the file loader (errors name the JSON path), then
 * applied as the difference from the running configuration; a change that fails anywhere
 * changes nothing.
 *
 * Threads: everything runs on the target's main loop (the thread that runs ix_target_run()),
 * which is also the only thread that applies reloads. Nothing here is on the data path.
 */
#ifndef IX_MGMT_MGMT_H
#define IX_MGMT_MGMT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "target/config.h"
#include "target/target.h"

struct ix_mgmt;

struct ix_mgmt_opts {
	const char *config_path; /* the file loaded at start: SIGHUP re-reads it, save's default;
				    NULL = the built-in default */
	bool testing;            /* test-only features allowed (ix-target --testing) */
	bool no_save;            /* save_config refused (fuzzing) */
	struct mgmt_group *group; /* from ix_mgmt_load_any: ix_mgmt_new takes it */
};

/* Load a configuration file: the validated configuration and its document. -errno with a
 * message "FILE:LINE:COL: path: ..." in err. path NULL: the built-in default. */
int ix_mgmt_load(const char *path, struct ix_config **cfg, json_t **doc, char *err, size_t errlen);

/* The same for a local file that may name a gateway group ("group": docs/ha.md): then the
 * configuration derives from the group's document in RADOS and *grp is set (for
 * ix_mgmt_opts.group; mgmt_group_free when not passed on); else *grp is NULL. */
struct mgmt_group;
int ix_mgmt_load_any(const char *path, struct ix_config **cfg, json_t **doc,
		     struct mgmt_group **grp, char *err, size_t errlen);
void mgmt_group_free(struct mgmt_group *g);
/* The last good document's configuration instead (ix_target_new refused the first). */
int mgmt_group_fallback(struct mgmt_group *g, const char *why, struct ix_config **cfg,
			json_t **doc, char *err, size_t errlen);

/* t may be NULL: changes are validated and kept but nothing is served (tests, fuzzing). Takes
 * the document. */
int ix_mgmt_new(struct ix_target *t, json_t *doc, const struct ix_mgmt_opts *o,
		struct ix_mgmt **out);
void ix_mgmt_free(struct ix_mgmt *m);

/* SIGHUP: read the configuration file again and apply it. */
int ix_mgmt_reload_file(struct ix_mgmt *m, char *err, size_t errlen);

/* Who is calling (for the log). */
struct ix_mgmt_caller {
	pid_t pid;
	uid_t uid;
};

/* One JSON-RPC 2.0 request or batch (already parsed): the response to send, or NULL when there
 * is nothing to answer (notifications). Methods that must ask the worker threads
 * (iscsi_get_sessions) are refused here: they need ix_mgmt_call_async. */
json_t *ix_mgmt_call(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *c);

/* The same, for a caller that can wait: a method that asks the workers returns NULL with *op
 * set, and done(arg, response or NULL) runs later on the main loop, unless the operation is
 * cancelled first. Inside a batch such methods are refused. */
struct ix_mgmt_op;
typedef void (*ix_mgmt_done_fn)(void *arg, json_t *resp);
json_t *ix_mgmt_call_async(struct ix_mgmt *m, json_t *req, const struct ix_mgmt_caller *c,
			   ix_mgmt_done_fn done, void *arg, struct ix_mgmt_op **op);
/* done will not be called (the caller went away). */
void ix_mgmt_op_cancel(struct ix_mgmt_op *op);

/* JSON-RPC error codes beyond the standard ones (-32700 .. -32603). */
enum {
	MGMT_ERR_INVALID_CONFIG = -32000, /* the change would make the configuration invalid */
	MGMT_ERR_EXISTS = -32001,         /* another object with that name exists */
	MGMT_ERR_NOT_FOUND = -32002,      /* no object with that name */
	MGMT_ERR_APPLY = -32003,          /* valid, but applying it failed (nothing changed) */
	MGMT_ERR_IO = -32004,             /* save: the file could not be written */
	MGMT_ERR_DENIED = -32005,         /* the caller may not use the socket */
	MGMT_ERR_LIMIT = -32006,          /* a bound was exceeded (size, connections, time) */
	MGMT_ERR_CONFLICT = -32007,       /* group: changed through another gateway meanwhile */
};

/* Limits of the JSON-RPC framing (rpc.c). */
#define MGMT_MAX_REQUEST   (1u << 20) /* bytes of one request (or batch) */
#define MGMT_MAX_BATCH     128        /* requests in one batch */
#define MGMT_MAX_DEPTH     32         /* nesting of a request */

#endif
