/* The gateway group's object in RADOS (docs/ha.md "The gateway group"): reading it with its
 * object version, the compare-and-swap write, the watch that tells this gateway of a change,
 * the notify that tells the others, and the members' apply status objects
 * ("<object>.status.<member>"). ha_group_doc.h has the document's pure functions; mgmt/
 * (mgmt_group.c) applies what this reads.
 *
 * Threads: every call but the watch's callbacks runs on the caller's thread (the target's main
 * loop) and blocks for at most the configured RADOS timeouts; the watch's callbacks run on
 * librados' threads and only make the event fd (ha_group_event_fd) readable. Built with the rbd
 * backend only (IX_HAVE_RBD); without it ha_group_open fails with -ENOTSUP.
 */
#ifndef IX_HA_HA_GROUP_H
#define IX_HA_HA_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/ha_group_doc.h"

struct ha_group;

/* Connect to the cluster as ref->client and open the pool (and namespace). */
int ha_group_open(const struct ha_group_ref *ref, struct ha_group **out, char *err,
		  size_t errlen);
void ha_group_close(struct ha_group *g);

/* The whole object: *text malloc'd and NUL-terminated, *ver its RADOS object version. -ENOENT:
 * no object; -EFBIG: larger than HA_GROUP_MAX_DOC. */
int ha_group_read(struct ha_group *g, char **text, size_t *len, uint64_t *ver, char *err,
		  size_t errlen);

/* Replace the object if its version is still ver (ver 0: create it, only if absent).
 * -ECANCELED: someone else wrote it since (or it exists already): nothing written. */
int ha_group_write(struct ha_group *g, const char *text, size_t len, uint64_t ver, char *err,
		   size_t errlen);

/* Tell the other gateways' watches (bounded by the notify timeout; errors only logged). */
void ha_group_notify(struct ha_group *g);

/* Watch the object (it must exist); again after an error. true while a watch is up. */
int ha_group_watch(struct ha_group *g, char *err, size_t errlen);
bool ha_group_watching(const struct ha_group *g);

/* Readable when a notify came or the watch broke; drain returns what happened: bit 0 a
 * notify, bit 1 the watch broke (ha_group_watch again). */
int ha_group_event_fd(const struct ha_group *g);
unsigned ha_group_event_drain(struct ha_group *g);

/* A member's status object "<object>.status.<member>": written whole (text), read whole
 * (*text malloc'd; -ENOENT: none yet). */
int ha_group_status_write(struct ha_group *g, const char *member, const char *text);
int ha_group_status_read(struct ha_group *g, const char *member, char **text);

/* "pool[/namespace]/object", for messages. */
const char *ha_group_name(const struct ha_group *g);

#endif
