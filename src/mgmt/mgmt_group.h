/* Management of a gateway in a group (docs/ha.md "The gateway group"): the running
 * configuration derives from the group's document in RADOS (ha/ha_group*.h); a change there
 * (the watch, or the poll) is applied through the ordinary reload; an edit through this
 * gateway's API is lifted into a new document written with a compare-and-swap. Main loop
 * only. */
#ifndef IX_MGMT_MGMT_GROUP_H
#define IX_MGMT_MGMT_GROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/ha_group_doc.h"

struct mgmt_group;
struct ix_mgmt;
struct ev_loop;
struct ix_config;

/* The object's I/O, as a table so that a unit test can put a stub in its place. */
struct mgmt_group_io {
	int (*read)(void *arg, char **text, size_t *len, uint64_t *ver, char *err, size_t errlen);
	int (*write)(void *arg, const char *text, size_t len, uint64_t ver, char *err,
		     size_t errlen);
	void *arg;
};

/* Every member's derived configuration passes the loader (self with local, the others with
 * the document's portals): 0, or -EINVAL with "member NAME: ..." in err. */
int mgmt_group_validate(json_t *doc, json_t *local, const char *member, char *err,
			size_t errlen);

/* The edit olde -> newe of member's effective configuration, made on the document base, into
 * the object: read it, ha_group_conflict, lift, validate, write if the version is unchanged;
 * a write that lost a race is tried again (at most a few times) while the edit still
 * applies. 0 with *written (the new document, a new reference) and *gen; -ECANCELED (a
 * conflict: err says which), -EINVAL, -EPERM (not a group edit) or -errno. dry_run: every
 * check, nothing written (*written is the document it would write). */
int mgmt_group_edit(const struct mgmt_group_io *io, json_t *base, json_t *olde, json_t *newe,
		    json_t *local, const char *member, bool dry_run, json_t **written, char *err,
		    size_t errlen);

/* Start: the local file at path (already parsed: local) has a "group". Connects, reads the
 * document, derives this member's configuration: *doc (the effective document) and *cfg
 * validated. */
int mgmt_group_load(const char *path, json_t *local, struct ix_config **cfg, json_t **doc,
		    struct mgmt_group **out, char *err, size_t errlen);
/* The configuration of the last good document this gateway kept (global.state_dir of its
 * local file), in place of one that cannot be served (why: the reason, recorded in the
 * status). 0 with *cfg and *doc, or -errno with err. */
int mgmt_group_fallback(struct mgmt_group *g, const char *why, struct ix_config **cfg,
			json_t **doc, char *err, size_t errlen);
/* m serves it: the watch, the poll, the status object. loop NULL: no watching (tests). */
int mgmt_group_start(struct mgmt_group *g, struct ix_mgmt *m, struct ev_loop *loop);
void mgmt_group_free(struct mgmt_group *g);
/* SIGHUP: the local file again, and the document. */
int mgmt_group_reload(struct mgmt_group *g, char *err, size_t errlen);

#endif
