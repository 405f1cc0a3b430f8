/* The persistent reservation store shared by the gateways of an RBD LU (pr_store "rados";
 * ha_pr.c, ha_pr_store.c): opened through the SCSI core's hook (ha.c, scsi_ha_ops.pr_open). */
#ifndef IX_HA_PR_H
#define IX_HA_PR_H

#include <stddef.h>

struct scsi_lu;
struct scsi_lu_cfg;

/* After the LU's device (an RBD image) is open: the store on the device's cluster connection
 * (lu->pr_ops, lu->pr_store). 0 or -errno + message. Main thread. */
int ha_pr_open(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen);

#endif
