/* What gateways sharing an RBD image with the managed exclusive lock tell each other through
 * RADOS (ha_own.c): the owner record and the hand-over messages. Pure codecs, no
 * librados: unit-tested and fuzzed (tests/fuzz/fuzz_own_rec.c).
 *
 * The owner record is the content of the object "ix.own.<image>" next to the image, written
 * only by the holder of the image's lock, right after it took it:
 *
 *     ix-own 1
 *     gen 7                       one more than the record it replaced (1 for the first)
 *     holder 10.1.2.3:0/123456    the lock's holder as librbd names it (rbd_lock_get_owners)
 *     gid 4117                    its RADOS client id (rados_get_instance_id)
 *     groups 1,3                  its local ALUA target port groups ("-": none)
 *     ports 1,5                   its relative target ports ("-": none)
 *     sum 1f2e3d4c5b6a7988        FNV-1a 64 of every byte before this line, in hex
 *
 * A reader believes a record only when its holder is the one the lock names now: the holder
 * writes it after taking the lock, so for a moment the record still names the previous one.
 *
 * Messages are notify payloads on that object, one line each:
 *     ix-own-ask 1 explicit|implicit|heal <window_ms> <gid>   a gateway asks the holder to
 *                                                         hand over (see ha_own.c)
 *     ix-own-free 1 <group> <gid>                         the holder released the lock; the
 *                                                         gateway of <group> (0: none) takes it
 *     ix-own-snap 1 <timeout_ms> <gid> <lun> <target> <name>
 *                                                         a standby asks the holder to take a
 *                                                         snapshot of LUN <lun> of <target>
 *                                                         (docs/snapshots.md)
 *     ix-own-rollback 1 <timeout_ms> <gid> <lun> <force> <target> <name>
 *                                                         a standby asks the holder to roll
 *                                                         LUN <lun> back to snapshot <name>
 *                                                         (<force> 0 or 1; answered as a
 *                                                         snapshot request is)
 *     ix-own-offline 1 <bound_ms> <gid> <lun> <target>     the holder is about to roll LUN
 *                                                         <lun> of <target> back: every
 *                                                         gateway takes it offline (NOT READY
 *                                                         04/07) for at most <bound_ms>
 *     ix-own-online 1 <changed> <gid> <lun> <target>       the rollback ended (<changed> 1) or
 *                                                         was refused (0): back online
 * and the watchers' acknowledgements of an ask carry one word: "released" (I held it and let
 * it go), "refused" plus a reason (I hold it and keep it), anything else (I do not hold it).
 * The holder acknowledges a snapshot request with "snap-done <held_ms>" or
 * "snap-failed <errno> <message>" (ha_own_snap_reply_decode); anything else: not the holder.
 * A gateway answers "offline" with "offline <nexuses> <who>" (the I_T nexuses that use the LU
 * there, and the gateway's name: its first portal) or "offline-failed <errno> <message>"
 * (ha_own_offline_reply_decode); an "online" gets an empty answer. */
#ifndef IX_HA_OWN_REC_H
#define IX_HA_OWN_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HA_OWN_MAX_IDS	  16   /* groups, ports */
#define HA_OWN_HOLDER_MAX 128  /* with its NUL */
#define HA_OWN_REC_MAX	  1024 /* an encoded record fits */
#define HA_OWN_MSG_MAX	  512  /* an encoded message fits */
#define HA_OWN_TARGET_MAX 224  /* a snapshot request's target name, with its NUL */
#define HA_OWN_SNAP_MAX	  128  /* a snapshot's name, with its NUL */
#define HA_OWN_WHO_MAX	  128  /* a gateway's name in an "offline" answer, with its NUL */

struct ha_own_rec {
	uint64_t gen;
	uint64_t gid;
	char holder[HA_OWN_HOLDER_MAX]; /* printable, no spaces, not empty */
	uint8_t ngroups, nports;
	uint16_t groups[HA_OWN_MAX_IDS]; /* 1..65535 each */
	uint16_t ports[HA_OWN_MAX_IDS];	 /* 1..65535 each */
};

/* Encode into buf (len bytes): the length written, or -ENOSPC / -EINVAL (a field out of
 * range). */
int ha_own_rec_encode(const struct ha_own_rec *r, char *buf, size_t len);
/* Decode len bytes: 0; -ENOENT for an empty object (no record yet); -EINVAL with a message
 * in err (the line at fault) for anything else that is not a record this encoder writes.
 * On failure *r is zeroed. */
int ha_own_rec_decode(const void *buf, size_t len, struct ha_own_rec *r, char *err, size_t errlen);

enum ha_own_msg_kind {
	HA_OWN_ASK = 1,
	HA_OWN_FREE = 2,
	HA_OWN_SNAP = 3,
	HA_OWN_OFFLINE = 4,
	HA_OWN_ONLINE = 5,
	HA_OWN_ROLLBACK = 6
};
/* Why a gateway asks: SET TARGET PORT GROUPS on its path; I/O on its standby path; or to end
 * a split of a target's locks between gateways (only a holder that does not answer gives it
 * up: it is broken). */
enum ha_own_ask { HA_OWN_EXPLICIT = 0, HA_OWN_IMPLICIT = 1, HA_OWN_HEAL = 2 };
struct ha_own_msg {
	enum ha_own_msg_kind kind;
	uint8_t ask;	    /* ASK: enum ha_own_ask */
	uint32_t window_ms; /* ASK: for that long (implicit_failover_ms); SNAP, ROLLBACK: timeout_ms;
			       OFFLINE: the bound after which the LU comes back by itself */
	bool changed;	    /* ONLINE: the medium changed (6/28/00 to every nexus);
			       ROLLBACK: forced (nexuses or not) */
	uint16_t group;	    /* FREE: the group whose gateway is to take the lock, 0 none */
	uint64_t gid;	    /* the sender's RADOS client id */
	uint32_t lun;	    /* SNAP, OFFLINE, ONLINE: the LUN of target */
	char target[HA_OWN_TARGET_MAX]; /* SNAP, OFFLINE, ONLINE: printable, no spaces, not empty */
	char name[HA_OWN_SNAP_MAX]; /* SNAP, ROLLBACK: letters, digits, '.', '_', '-'; not first '.', '-' */
};

/* The length written, or -ENOSPC / -EINVAL. */
int ha_own_msg_encode(const struct ha_own_msg *m, char *buf, size_t len);
/* 0 or -EINVAL (not a message of this protocol: it is acknowledged and ignored). */
int ha_own_msg_decode(const void *buf, size_t len, struct ha_own_msg *m);

/* A watcher's answer to an ask. */
enum ha_own_reply { HA_OWN_NOT_HOLDER = 0, HA_OWN_RELEASED, HA_OWN_REFUSED };
enum ha_own_reply ha_own_reply_kind(const void *buf, size_t len);

/* The holder's answer to a snapshot request: 0 with *rc 0 and *held_ms ("snap-done"), or
 * with *rc -errno and the holder's message in msg ("snap-failed"); -EINVAL: not such an
 * answer (not the holder, or not one of ours). The encoder: the length written or -ENOSPC. */
int ha_own_snap_reply_encode(int rc, unsigned held_ms, const char *msg, char *buf, size_t len);
int ha_own_snap_reply_decode(const void *buf, size_t len, int *rc, unsigned *held_ms, char *msg,
			     size_t msglen);

/* A gateway's answer to "offline": 0 with *rc 0, *users and its name in who ("offline"), or
 * *rc -errno and its message in who ("offline-failed"); -EINVAL: neither. The encoder: who is
 * the name (rc 0: printable, no spaces, shorter than HA_OWN_WHO_MAX) or the message; the
 * length written, -ENOSPC or -EINVAL. */
int ha_own_offline_reply_encode(int rc, unsigned users, const char *who, char *buf, size_t len);
int ha_own_offline_reply_decode(const void *buf, size_t len, int *rc, unsigned *users, char *who,
				size_t wholen);

/* Whether the holder may hand the lock over: ha_policy_may_hand_over (ha_policy.h). */

#endif
