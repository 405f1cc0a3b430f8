/* High availability: the gateways of one LU (docs/ha.md). The layer between the target role
 * and storage: the ownership of RBD images with the managed exclusive lock (which gateway
 * holds each image's lock, the hand-over between gateways, the owner record), its policy
 * (pure functions), ALUA states that follow the owner, and the persistent reservation store
 * shared by the gateways (RADOS). The target hands the SCSI core its hooks (ha_scsi) and
 * asks it for the management API's answers; ha/ reaches the SCSI core through that hook table
 * (scsi/scsi_int.h, struct scsi_ha_ops) and the RBD backend through the backend interface and
 * the narrow handle of backend/bs_rbd.h. Layering: target, mgmt -> ha -> scsi, backend.
 *
 * Files:
 *   ha.c          this API, the HA context, the hook table, the answers of a build
 *                 without librbd (ha_int.h: the context's insides)
 *   ha_policy.c   the decisions, as pure functions (ha_policy.h; tests/unit/ha/test_policy.c)
 *   ha_own.c      an image's ownership: its state, the lock, its thread, the images of a target
 *   ha_handover.c the owner record and the gateway-to-gateway requests over RADOS
 *   ha_own_rec.c  the owner record's and the messages' codecs (pure)
 *   ha_alua.c     ALUA states that follow the owner; SET TARGET PORT GROUPS moving the locks
 *   ha_pr.c       the shared persistent reservation store: its threads, jobs, ops, life
 *   ha_pr_store.c its object: read, write, adopt, watch, notify, fence (ha_pr_int.h)
 *   ha_pr_obj.c   its object's codec (pure)
 *
 * Who owns what (threads, locks, condition variables). HA's threads, mutexes and condition
 * variables live in ha/ and in backend/bs_rbd*; the SCSI core and the target take none of
 * HA's (the data path takes none at all: it reads atomics).
 *   The HA context (struct ha_ctx, ha_int.h), one per target context (the target's, plus one
 *   reference per LU, map and image ownership made with it; freed with the last):
 *     groups_lock  the images of each target that change owner together (struct own_group,
 *                  ha_own.c): the group list, each group's members, refs and last decision.
 *     own_changes  (atomic) counts every ownership change, for ALUA (ha_alua.c).
 *     host.rbd     the RBD backend's context (struct bs_rbd_ctx, backend/bs_rbd_int.h),
 *                  which it owns; see below.
 *   Per image with rbd.exclusive_lock (struct rbd_owner, ha_own_int.h), created at the
 *   device's open, freed with its last reference (the device's, and its thread's while it
 *   runs: a thread stuck in the cluster outlives the device):
 *     thread "ix-rbd-own" (ha_own.c, ha_handover.c): lock checks, take-overs, releases,
 *                  breaks, answers to other gateways, the owner record;
 *     o->mu        the job list and everything marked "under mu": the thread's life (running,
 *                  stop, attached, rejoin), why, holder, me, seq, refused, the record and
 *                  this gateway's identity;
 *     o->cv        (with mu) the thread waits for work or stop; callers for a finished job
 *                  (a lock break) or the thread's end;
 *     o->hook_mu   the watcher hook (ha_own_watch), held while the hook runs;
 *     librados' watch callbacks (ha_handover.c) queue jobs under o->mu.
 *   Per LU with pr_store "rados" (struct pr_rados, ha_pr_int.h), from the LU's open to its
 *   free:
 *     thread helper() (ha_pr.c): PERSISTENT RESERVE OUT, RESERVE/RELEASE, reloads of the
 *                  object, LUN RESET notices;
 *     thread acker() (ha_pr.c): acknowledges other gateways' notifies once the aborts they
 *                  asked for ended;
 *     r->mu        the job and ack lists, stop, reload_queued, conn_gen, acking, the local
 *                  abort's end; r->cv (helper work), r->done_cv (a LUN RESET's job or the
 *                  local aborts ended), r->ack_cv (acker work, or acking cleared);
 *     r->conn_mu   the cluster connection the store is on (held by the helper around each
 *                  job; attach, detach and fencing take it);
 *     lu->lock     (the SCSI core's) the adopted state, its epoch and the unit attentions
 *                  already queued;
 *     librados' watch callbacks (ha_pr_store.c) decode notifies and queue work under r->mu.
 *   Per target's ALUA layout (struct scsi_alua, scsi/alua_int.h): ha_alua.c sets the states
 *     under the map's alua_lock (the SCSI core's), everything else with atomics; a SET
 *     TARGET PORT GROUPS that moves the locks is answered from the ownership threads through
 *     a post to the command's loop.
 *   The RBD backend's context (struct bs_rbd_ctx), held by the HA context and each open
 *   device (backend/bs_rbd.c, bs_rbd_conn.c):
 *     clusters_lock/clusters_cv  the cluster connections shared by its devices;
 *     thread "ix-rbd-opener" with opener.lock/work/done: offline starts and rejoins;
 *     thread "ix-rbd-helper" with helper.lock/cond: GET LBA STATUS;
 *     both started when first needed, stopped with the context's last reference;
 *     life_lock    its references and running threads;
 *     a short-lived reaper thread per fenced connection's shutdown (bs_rbd_conn.c).
 */
#ifndef IX_HA_HA_H
#define IX_HA_HA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bs_dev;
struct ha_ctx;
struct scsi_ha;

/* The high availability of one target context (the target holds it; every LU, map and image
 * ownership made with it holds a reference too): the ownership registry of its targets and
 * the hooks the SCSI core calls. NULL on -ENOMEM. */
struct ha_ctx *ha_ctx_new(void);
void ha_ctx_put(struct ha_ctx *c);
/* Its hooks, for each LU's configuration (scsi_lu_cfg.ha) and each map (scsi_lun_map_set_ha). */
struct scsi_ha *ha_scsi(struct ha_ctx *c);

/* Was this build made with librbd (the rbd backend, ownership, the shared PR store)? */
bool ha_have_rbd(void);

/* A LUN's managed exclusive lock (rbd.exclusive_lock): its state name into state and why into
 * reason; with brk, break whoever holds it and take it (main thread, bounded by the cluster's
 * timeouts). 0, or -errno with reason set: -EINVAL not an rbd LUN (reason "not an rbd LUN"),
 * -EOPNOTSUPP built without RBD, or what breaking it returned. */
int ha_dev_lock(struct bs_dev *dev, bool brk, char *state, size_t slen, char *reason, size_t rlen);

/* An RBD LUN's open and cluster state, for the management API; returns -EINVAL (nothing set)
 * for another backend or a build without RBD. */
struct ha_dev_status {
	bool offline;	  /* the image is not open yet */
	char reason[256]; /* offline: why */
	unsigned attempts, next_s;
	char lock[16]; /* the lock state's name, "" when offline */
	char lock_reason[256];
	char conn[16]; /* "connected", "fenced", "rejoining" */
	char conn_reason[256];
	unsigned rejoins, rejoin_attempts, rejoin_next_s;
};
int ha_dev_status(struct bs_dev *dev, struct ha_dev_status *st);
/* Offline: try to open now (ix-ctl lun online); 0, -EINVAL another backend or no RBD. */
int ha_dev_retry(struct bs_dev *dev);
/* Fenced: rejoin now (ix-ctl lun rejoin): 0 started; -EALREADY not fenced; -EAGAIN not open
 * yet; -EINVAL another backend; -EOPNOTSUPP built without RBD. */
int ha_dev_rejoin(struct bs_dev *dev);

/* Snapshots between the gateways of one image with rbd.exclusive_lock (docs/snapshots.md,
 * "Several gateways of one image"), over the owner record's object (ha_handover.c).
 *
 * A standby asks the lock's holder to take a snapshot of LUN lun of target (the same names on
 * every gateway of the group) within timeout_ms: 0 sent, and cb is called exactly once, on
 * any thread, with the holder's answer (rc 0 and held_ms, or -errno and its message), or
 * -ETIMEDOUT (no answer within timeout_ms plus rbd.handover_timeout_ms), -EHOSTUNREACH (no
 * gateway holds the lock); *bound_ms: that bound. -EPERM (err set): this gateway is not a standby
 * of a managed lock; -EOPNOTSUPP built without RBD. */
typedef void (*ha_snap_answer_cb)(void *arg, int rc, unsigned held_ms, const char *msg);
/* what a forwarded request asks for: a snapshot, or a rollback to one (the holder tells every
 * gateway: ha_dev_lu_offline), forced or not; a rollback's bound has one more
 * rbd.handover_timeout_ms (the holder's own notice to the gateways) */
enum ha_snap_what { HA_SNAP_CREATE = 0, HA_SNAP_ROLLBACK = 1, HA_SNAP_ROLLBACK_FORCE = 2 };
int ha_dev_snap_forward(struct bs_dev *dev, const char *target, uint32_t lun, const char *name,
			enum ha_snap_what what, unsigned timeout_ms, ha_snap_answer_cb cb,
			void *arg, unsigned *bound_ms, char *err, size_t errlen);
/* The holder's side: a request from a standby, to be answered exactly once
 * (ha_snap_req_answer, any thread). The handler runs on librados' thread and must not wait:
 * it queues the request for the target's main loop. Set by the target after ha_ctx_new, and
 * cleared (fn NULL) before the target goes: no call of fn is running or starts after that. */
struct ha_snap_req;
typedef void (*ha_snap_handler)(void *arg, struct ha_snap_req *r, const char *target, uint32_t lun,
				const char *name, enum ha_snap_what what, unsigned timeout_ms);
void ha_set_snap_handler(struct ha_ctx *c, ha_snap_handler fn, void *arg);
void ha_snap_req_answer(struct ha_snap_req *r, int rc, unsigned held_ms, const char *msg);

/* A rollback by the lock's holder (docs/snapshots.md, "Several gateways of one image"): before
 * it, every other gateway of the image takes LUN lun of target offline (NOT READY 04/07) for
 * at most timeout_ms plus rbd.handover_timeout_ms and answers with the I_T nexuses that use it
 * there; after it (or when it is refused) they go back online, with 6/28/00 when changed.
 *
 * offline: 0 sent, and cb runs exactly once, on any thread, with rc 0 and each other gateway's
 * answer (n of them, gid, rc 0 with users and its name in who, or -errno with a message in
 * who; timed_out: none within the notify's bound), or rc < 0 and msg (the notify failed);
 * *bound_ms: the notify's bound. -EPERM (err set): this gateway does not hold a managed lock,
 * or was built without RBD (nothing to tell: the rollback is local).
 * online: sent without waiting for answers (0, or -errno: the gateways come back by their
 * bound). */
struct ha_offline_ans {
	uint64_t gid;
	int rc;
	unsigned users;
	bool timed_out;
	char who[128];
};
typedef void (*ha_offline_cb)(void *arg, int rc, const struct ha_offline_ans *a, size_t n,
			      const char *msg);
int ha_dev_lu_offline(struct bs_dev *dev, const char *target, uint32_t lun, unsigned timeout_ms,
		      ha_offline_cb cb, void *arg, unsigned *bound_ms, char *err, size_t errlen);
int ha_dev_lu_online(struct bs_dev *dev, const char *target, uint32_t lun, bool changed);
/* Another gateway's side: fn gets an "offline" (online false; answered once with
 * ha_offline_req_answer, any thread) or an "online" (r NULL: answered already). Like
 * ha_set_snap_handler: librados' thread, must not wait; cleared before the target goes. */
typedef void (*ha_offline_handler)(void *arg, struct ha_snap_req *r, const char *target,
				   uint32_t lun, bool online, bool changed, unsigned bound_ms);
void ha_set_offline_handler(struct ha_ctx *c, ha_offline_handler fn, void *arg);
/* rc 0: users and this gateway's name who; else -errno and a message in who. */
void ha_offline_req_answer(struct ha_snap_req *r, int rc, unsigned users, const char *who);

#endif
