/* Ownership of the RBD images with the managed exclusive lock (rbd.exclusive_lock): which
 * gateway holds each image's lock, the owner record, and the hand-over between gateways
 * (ha_own.c, ha_handover.c; docs/ha.md, "Ownership and failover"). The RBD backend leaves
 * the ownership of an image to this code through struct bs_own_ops (backend/bs_rbd.h,
 * ha_own_ops); everything else (ALUA, the management API) asks here, with the device.
 *
 * Declared in every build; without librbd the functions that take a device are not built and
 * the callers (ha.c, ha_alua.c) answer for them. */
#ifndef IX_HA_OWN_H
#define IX_HA_OWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bs_dev;

/* The lock states as numbers, for code that follows them (ha_alua.c): one atomic load. */
enum ha_own_state {
	HA_OWN_NONE = 0, /* no managed lock */
	HA_OWN_ACQUIRING,
	HA_OWN_OWNER,
	HA_OWN_STANDBY,
	HA_OWN_FENCED,
	HA_OWN_RELEASING, /* handing the lock over (draining writes, releasing) */
};
/* How a take-over goes (ha_own_take_over_async, below). */
enum ha_take {
	HA_TAKE_EXPLICIT = 0,
	HA_TAKE_IMPLICIT,
	HA_TAKE_FREE, /* only a free lock */
	HA_TAKE_HEAL, /* only a free lock or one whose holder does not answer */
};
typedef void (*ha_take_cb)(void *arg, int rc);
/* RBD ownership as this gateway knows it (ha_own_owner), for the ALUA states: the lock state
 * and who holds the lock, with what the holder's owner record says of it. */
struct ha_owner {
	int own;      /* enum ha_own_state */
	bool free;    /* nobody held the lock at the last check */
	bool known;   /* the owner record names the holder: gen, groups and ports are its */
	bool refused; /* the holder refused this gateway's last implicit request (until the
			 holder changes) */
	uint8_t ngroups, nports;
	uint16_t groups[16]; /* the holder's ALUA target port groups ... */
	uint16_t ports[16];  /* ... and relative target ports */
	uint64_t gen;	     /* the record's generation */
	char holder[128];    /* the lock's holder as librbd names it ("" nobody) */
};

/* Managed exclusive lock (rbd.exclusive_lock), for failover between gateways: break the lock
 * of whoever holds the image's lock (librbd blocklists that client, so it never writes again:
 * its gateway rejoins with a new client, standby) and take it. Synchronous, bounded by the
 * cluster's timeouts: the main thread only. 0 with the former owners in msg ("" if none), or
 * -errno with the reason in msg. */
int ha_own_break_lock(struct bs_dev *dev, char *msg, size_t msglen);
/* The ownership state (an index for ha_own_state_name) and its reason; -EINVAL for another
 * backend. */
int ha_own_state(struct bs_dev *dev, char *reason, size_t len);
const char *ha_own_state_name(int state);
/* The state of a device with the managed lock; -EINVAL for any other device (and for one whose
 * image is not open yet). Any thread. */
int ha_own_get(const struct bs_dev *dev);
/* fn(arg) runs on the image's ownership thread after each change of this device's ownership
 * (its state, who holds its lock), whether or not the image is open yet; NULL clears it,
 * waiting for a call in progress. Never called after the device closes. -EINVAL for another
 * device or one without the managed lock. Control path. */
int ha_own_watch(struct bs_dev *dev, void (*fn)(void *arg), void *arg);
/* Who owns the lock, as the last lock check saw it, and what the owner record says of the
 * holder. 0, or -EINVAL (another device, no managed lock, or the image is not open). Any
 * thread. */
int ha_own_owner(const struct bs_dev *dev, struct ha_owner *out);
/* What this gateway writes into the owner record when it holds the lock: its local ALUA
 * target port groups and relative target ports (at most 16 each). Written again at once when
 * it changes while holding. 0 or -EINVAL (not a device with the managed lock). Any thread. */
int ha_own_set_identity(struct bs_dev *dev, const uint16_t *groups, unsigned ngroups,
			const uint16_t *ports, unsigned nports);
/* Failover, on the image's ownership thread (docs/ha.md, "Ownership and failover"): a free
 * lock is taken; a held one is asked for over RADOS (the object of the owner record), and
 * the holder hands it over (explicit: always; implicit: only if no I/O went through it for
 * half of window_ms) or refuses; a holder that does not answer within
 * rbd.handover_timeout_ms has its lock broken (librbd blocklists it). HA_TAKE_FREE takes
 * the lock only if it is free. The state is ACQUIRING while taking, then OWNER (or STANDBY /
 * FENCED). done(arg, rc) runs on that thread when it is over (done may be NULL): 0 taken,
 * -EAGAIN refused by a live holder (ha_own_owner's refused says so until the holder changes),
 * -ECANCELED (the image closed), -errno. Returns 0 when started; -EALREADY (already the
 * owner), -EBUSY (a take-over or release is queued), -ESHUTDOWN (fenced), -EINVAL (no managed
 * lock or not open), -ENOMEM. Never blocks. */
int ha_own_take_over_async(struct bs_dev *dev, int mode, uint32_t window_ms, ha_take_cb done,
			   void *arg);
/* A planned hand-over (SET TARGET PORT GROUPS on the holder): on that thread, release the
 * lock (draining the writes in flight; this gateway stays healthy, standby) and tell the other
 * gateways that group (0: none) is to take it. done as above (0 released). Returns 0 when
 * started; -EALREADY (not the holder), -EBUSY, -ESHUTDOWN, -EINVAL, -ENOMEM. */
int ha_own_release_async(struct bs_dev *dev, uint16_t group, ha_take_cb done, void *arg);

#endif
