/* Internal to src/ha/: the HA context (one per target context, ha.h's struct ha_ctx), what
 * it holds and how the SCSI core's and the backend's faces of it lead back to it. */
#ifndef IX_HA_INT_H
#define IX_HA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "backend/bs_rbd.h"
#include "ha/ha.h"
#include "scsi/scsi_int.h"
#include "util/list.h"

#ifndef IX_HAVE_RBD
struct bs_host {
	const void *unused; /* no backend needs the context without librbd */
};
#endif

/* One target context's high availability. Freed with its last reference: the target's, one
 * per LU and map that has its hooks (scsi_ha), one per image ownership (ha_own.c), which may
 * outlive the target while its thread is stuck in the cluster. */
struct ha_ctx {
	atomic_int refs;
	struct scsi_ha scsi; /* the SCSI core's face (scsi_lu_cfg.ha, scsi_lun_map_set_ha) */
	struct bs_host host; /* the RBD backend's (bs_open_cfg.host) */
	/* Every change of any image's state or holder in this context: ALUA (ha_alua.c)
	 * compares it with the value its states were set from. */
	atomic_uint own_changes;
	/* The images of each target that change owner together (ha_own.c, struct own_group):
	 * the list and every group's members, refs and decision under groups_lock. */
	pthread_mutex_t groups_lock;
	struct list_head own_groups;
	/* Snapshot requests from other gateways (ha_set_snap_handler): called under snap_mu. */
	pthread_mutex_t snap_mu;
	ha_snap_handler snap_fn;
	void *snap_arg;
	ha_offline_handler off_fn; /* a rollback's offline/online notices, also under snap_mu */
	void *off_arg;
};

static inline struct ha_ctx *ha_ctx_of_scsi(const struct scsi_ha *s)
{
	return s ? (struct ha_ctx *)(void *)((char *)s - offsetof(struct ha_ctx, scsi)) : NULL;
}

static inline struct ha_ctx *ha_ctx_of_host(const struct bs_host *h)
{
	return h ? (struct ha_ctx *)(void *)((char *)h - offsetof(struct ha_ctx, host)) : NULL;
}

void ha_ctx_get(struct ha_ctx *c);
/* The change counter (0 without a context). */
unsigned ha_ctx_changes(const struct ha_ctx *c);

#endif
