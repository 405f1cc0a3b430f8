/* The high-availability policy as pure functions (ha_policy.c): what a gateway decides about
 * an image's lock from what it knows, without a cluster. The code that acts on the decisions
 * (ha_handover.c, ha_own.c, ha_alua.c) calls these; tests/unit/ha/test_policy.c checks them
 * table by table (docs/ha.md, "Ownership and failover"). No clock, no locks, no I/O here: the
 * callers pass times in milliseconds of one monotonic clock. */
#ifndef IX_HA_POLICY_H
#define IX_HA_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* The locks of a target split between gateways for this long: heal (ha_policy_heal). */
#define HA_HEAL_MS 2000

/* May the holder hand the lock over when asked (ask: enum ha_own_ask, ha_own_rec.h)?
 * Explicitly (SET TARGET PORT GROUPS on the asker's path): yes. Implicitly (I/O on the asker's
 * standby path for window_ms): only if none of the target's LUs it holds had I/O through it
 * for at least half that window (idle_ms, known to within the lock check interval), i.e. the
 * initiator really moved; a multipath initiator that uses every path keeps its I/O flowing
 * here too, and is refused. To heal a split: never (a holder that answers keeps it). */
bool ha_policy_may_hand_over(int ask, uint64_t idle_ms, uint32_t window_ms);

/* A take-over asked the holder (ha_handover.c): what the watchers answered, and what the
 * taker does next. */
enum ha_answer {
	HA_ANSWER_SILENT,   /* nobody that held the lock answered within the timeout */
	HA_ANSWER_RELEASED, /* the holder let it go */
	HA_ANSWER_REFUSED,  /* the holder keeps it */
	HA_ANSWER_ALIVE,    /* the holder answered, but neither released nor refused */
};
enum ha_take_step {
	HA_STEP_TAKE,	 /* take the lock, now free */
	HA_STEP_BREAK,	 /* break the silent holder's lock (librbd blocklists it), take it */
	HA_STEP_AGAIN,	 /* the lock moved meanwhile: ask whoever holds it now */
	HA_STEP_REFUSED, /* give up (-EAGAIN); the holder refused: remember it */
	HA_STEP_GIVE_UP, /* give up (-EAGAIN) without remembering a refusal */
};
/* mode: enum ha_take (ha_own.h); moved: the lock's holder is no longer the one asked. A live
 * holder's lock is never broken; a heal gives up on a holder that answers (it heals the split
 * itself). */
enum ha_take_step ha_policy_take_step(int mode, enum ha_answer a, bool moved);

/* Implicit failover (ha_alua.c): reads and writes refused on a standby local group. */
enum ha_implicit {
	HA_IMPLICIT_OFF,   /* not standby, or implicit failover off: plain 04/0B */
	HA_IMPLICIT_START, /* the first of a new run: it starts now */
	HA_IMPLICIT_WAIT,  /* the run goes on, not yet implicit_ms long */
	HA_IMPLICIT_ASK,   /* implicit_ms of I/O without a gap as long: ask the holder */
};
/* implicit_ms: alua.implicit_failover_ms (0 off); standby: the target's locks are all held
 * elsewhere (or free) and this gateway is healthy; now; last: the previous refused I/O of the
 * run (0: none); first: the run's first. */
enum ha_implicit ha_policy_implicit(uint32_t implicit_ms, bool standby, uint64_t now, uint64_t last,
				    uint64_t first);

/* The target's locks split between gateways: since (0: not split) and now. due: heal now
 * (split for HA_HEAL_MS; the caller restarts since when it acts, so at most once per
 * HA_HEAL_MS). */
bool ha_policy_heal_due(uint64_t since, uint64_t now);
enum ha_heal {
	HA_HEAL_TAKE_OTHERS, /* this gateway holds the lowest LU's lock: take the others (asking) */
	HA_HEAL_ASK_FIRST,   /* it does not: ask for the lowest LU's lock, heal mode (taken only
				if free or its holder is silent) */
};
/* first_own: the state (enum ha_own_state) of the lowest-numbered LU's lock here. */
enum ha_heal ha_policy_heal(int first_own);

/* After a rejoin the new handle took the lock to set the managed lock policy (acquire_rc, 0 or
 * -errno) and released it at once if it got it (release_rc; 0 when it did not get it): the
 * state it goes to (enum ha_own_state). Blocklisted again (-ESHUTDOWN from either): fenced.
 * The release failed: it holds the lock and says so (owner). Otherwise standby: a rejoined
 * gateway never takes the lock back by itself, only a take-over does. */
int ha_policy_rejoin(int acquire_rc, int release_rc);

struct scsi_alua_cfg;
/* Login redirection to the owner (targets[].redirect.owners, docs/ha.md "Redirecting logins
 * to the owner"): a normal session's login arriving at relative target port `port` of this
 * gateway, with the target's running ALUA groups a (scsi_alua_get: on an RBD image with the
 * lock, the states follow the lock's owner). The id of the group to send it to: the first
 * active/optimized group that is not this gateway's; 0 (serve it here) when the port's own
 * group is active (optimized or not), when the port is in no local group, or when no other
 * gateway's group is active/optimized (nobody owns it: a login here may be what takes it). */
uint16_t ha_policy_owner_group(const struct scsi_alua_cfg *a, uint16_t port);

#endif
