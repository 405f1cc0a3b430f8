/* The gateway group's document (docs/ha.md "The gateway group"): one JSON object in RADOS that
 * holds the targets of every gateway of a group, and the pure functions around it: the
 * reference to it in a gateway's local file ("group"), the document's own checks, the
 * derivation of one member's effective configuration (the configuration file's schema, to go
 * through the ordinary loader and reload), and the way back (an edit of that effective
 * configuration into a new document). No I/O here: ha_group.c reads and writes the object.
 *
 * Every function returns 0 or -errno (-EINVAL: err says what is wrong, with the JSON path in
 * the document or the local file) and never logs: the document holds CHAP secrets, and no
 * message here quotes a value (only names: members, targets, keys).
 */
#ifndef IX_HA_HA_GROUP_DOC_H
#define IX_HA_HA_GROUP_DOC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define HA_GROUP_KIND       "ix-group"
#define HA_GROUP_MAX_DOC    (4u << 20)  /* bytes of the object read at most */
#define HA_GROUP_NAME_MAX   64          /* a member's name, with its NUL */
#define HA_GROUP_POLL_MS    2000        /* default "poll_ms": how often the object is checked
					   besides the watch */

/* The local file's "group" object. */
struct ha_group_ref {
	char pool[128];           /* default "rbd" */
	char ns[128];             /* RADOS namespace, default "" */
	char object[128];         /* default "ix.group" */
	char member[HA_GROUP_NAME_MAX]; /* required: this gateway's name in members[] */
	char conf[1024];          /* ceph.conf, "" = librados' default search */
	char client[128];         /* default "admin" */
	char keyring[1024];       /* "" = ceph.conf's */
	uint32_t poll_ms;         /* 100..600000, default HA_GROUP_POLL_MS */
};

/* local: the local file's whole JSON; ref filled from its "group". -ENOENT when the file has
 * no "group" (an ordinary configuration). */
int ha_group_ref_parse(json_t *local, struct ha_group_ref *ref, char *err, size_t errlen);

/* The document's own rules (kind, version, generation, members, targets' members, the keys a
 * group's targets and global may have). Not the targets' contents: those the configuration
 * loader checks, on each member's derived configuration. */
int ha_group_doc_check(json_t *doc, char *err, size_t errlen);

/* "generation", 0 when absent or not an integer >= 1. */
uint64_t ha_group_generation(json_t *doc);

/* The member named member: its "id", 0 when none. */
unsigned ha_group_member_id(json_t *doc, const char *member);

/* Member's effective configuration: the local file (without "group") plus the targets of the
 * document that member exports, with ALUA groups derived from the membership (one per member,
 * group id = member id = tpgt = relative port id; the local one with the local portals, the
 * others with relative_ports [their id]); portals: the local file's, else the member's own
 * from the document named "<member>-<k>" (k from 1), tpgt = member id. local may be NULL (a
 * member checked from elsewhere: the document's portals, no local global). *out is a new
 * reference. The document must have passed ha_group_doc_check. */
int ha_group_derive(json_t *local, json_t *doc, const char *member, json_t **out, char *err,
		    size_t errlen);

/* The way back: an edit that turned member's effective configuration olde into newe, made to
 * the document doc: targets added, changed (their "members" kept) or removed, group-wide
 * global keys changed; ALUA groups (derived) are not taken back. *out: the new document
 * (generation + 1), a new reference. -EPERM with err for what a group edit cannot change
 * (portals, per-gateway global keys: the local file's). */
int ha_group_lift(json_t *doc, json_t *olde, json_t *newe, const char *member, json_t **out,
		  char *err, size_t errlen);

/* An edit olde -> newe was made on the document base; the object now holds fresh. 0 when the
 * edit still applies to fresh (what it touched, each target by name and the global settings,
 * is the same in both: ha_group_lift onto fresh then loses nothing of the other edit), else
 * -ECANCELED with err naming what was changed concurrently. */
int ha_group_conflict(json_t *base, json_t *fresh, json_t *olde, json_t *newe, char *err,
		      size_t errlen);

/* Is key of "global" per gateway (only in the local file)? */
int ha_group_global_local(const char *key);

#endif
