/* High availability: the gateways of one LU (docs/ha.md). The layer between the target role
 * and storage: the ownership of RBD images with the managed exclusive lock (which gateway
 * holds each image's lock, the hand-over between gateways, the owner record), its policy
 * (pure functions), ALUA states that follow the owner, and the persistent reservation store
 * shared by the gateways (RADOS). The target hands the SCSI core its hooks (ha_scsi_ops) and
 * asks it for the management API's answers; ha/ reaches the SCSI core through that hook table
 * (scsi/scsi_int.h, struct scsi_ha_ops) and the RBD backend through the backend interface and
 * the narrow handle of backend/bs_rbd.h. Layering: target, mgmt -> ha -> scsi, backend.
 *
 * Files:
 *   ha.c          this API, the hook table, the answers of a build without librbd
 *   ha_own.c      an image's ownership: its state, the lock, its thread, the images of a target
 *   ha_handover.c the owner record and the gateway-to-gateway requests over RADOS
 *   ha_own_rec.c  the owner record's and the messages' codecs (pure)
 *   ha_alua.c     ALUA states that follow the owner; SET TARGET PORT GROUPS moving the locks
 *   ha_pr.c, ha_pr_store.c  the shared persistent reservation store (helper threads, RADOS)
 *   ha_pr_obj.c   its object's codec (pure)
 *
 * Who owns what (threads, locks, condition variables). HA's threads, mutexes and condition
 * variables live in ha/ and in backend/bs_rbd*; nothing else of HA blocks or locks.
 *   - Per image with rbd.exclusive_lock (struct rbd_owner, ha_own_int.h), created at the
 *     device's open, freed with its last reference:
 *       thread "ownership": the lock checks, take-overs, releases, answers to other gateways;
 *       o->mu guards the job list, the holder/record/identity fields and the thread's life;
 *       o->cv: work or stop for the thread; a finished job or the thread's end for callers;
 *       o->hook_mu guards the watcher hook (ha_own_watch) and is held while it runs.
 *   - Per target (struct own_group, ha_own.c): the images that change owner together;
 *     its member list and I/O bookkeeping under the group registry's lock.
 *   - Per LU with pr_store "rados" (struct pr_rados, ha_pr_int.h):
 *       thread "helper": PERSISTENT RESERVE OUT, RESERVE/RELEASE, reloads, LUN RESET notices;
 *       thread "acker": acknowledges other gateways' notifies once their aborts ended;
 *       r->mu guards the job and ack lists, the adopted state's bookkeeping; r->cv (helper
 *       work), r->done_cv (a waited-for job finished), r->ack_cv (acker work);
 *       r->conn_mu guards the cluster connection the store is on (attach/detach/fenced).
 *   - Per target's ALUA layout (scsi_alua, scsi/alua_int.h): no lock of HA's; ha_alua.c takes
 *     the map's alua_lock (the SCSI core's) to set the states, and otherwise atomics.
 *   - The RBD backend (backend/bs_rbd*.c) keeps its own: the cluster connections and the
 *     opener thread (rejoin, start offline) under their locks, the helper thread of each
 *     image; see the head of bs_rbd.c and bs_rbd_conn.c.
 */
#ifndef IX_HA_HA_H
#define IX_HA_HA_H

#include <stdbool.h>
#include <stddef.h>

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
int ha_dev_lock(struct bs_dev *dev, bool brk, char *state, size_t slen, char *reason,
		size_t rlen);

/* An RBD LUN's open and cluster state, for the management API; returns -EINVAL (nothing set)
 * for another backend or a build without RBD. */
struct ha_dev_status {
	bool offline;	   /* the image is not open yet */
	char reason[256];  /* offline: why */
	unsigned attempts, next_s;
	char lock[16];	   /* the lock state's name, "" when offline */
	char lock_reason[256];
	char conn[16];	   /* "connected", "fenced", "rejoining" */
	char conn_reason[256];
	unsigned rejoins, rejoin_attempts, rejoin_next_s;
};
int ha_dev_status(struct bs_dev *dev, struct ha_dev_status *st);
/* Offline: try to open now (ix-ctl lun online); 0, -EINVAL another backend or no RBD. */
int ha_dev_retry(struct bs_dev *dev);
/* Fenced: rejoin now (ix-ctl lun rejoin): 0 started; -EALREADY not fenced; -EAGAIN not open
 * yet; -EINVAL another backend; -EOPNOTSUPP built without RBD. */
int ha_dev_rejoin(struct bs_dev *dev);

#endif
