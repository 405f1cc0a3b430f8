/* ALUA states that follow the owner of a target's LUs (ha_alua.c): the hooks the SCSI core
 * calls through scsi_ha_ops (ha.c), and the pure part the unit tests use. */
#ifndef IX_HA_ALUA_H
#define IX_HA_ALUA_H

#include "ha/ha_own.h"
#include "scsi/alua_int.h"

/* Before a command and REPORT TARGET PORT GROUPS (worker) or a management read (main
 * thread): bring the states in line if any lock changed. */
void ha_alua_follow(struct scsi_lun_map *map);
/* A read or write (scsi_alua_medium_io) refused on a standby local group: true while an
 * implicit failover is pending (the command then gets 04/0A, transitioning, instead of
 * 04/0B). Other commands never come here: they get 04/0B and move nothing. */
bool ha_alua_implicit(struct scsi_lun_map *map, struct scsi_alua *a);
/* SET TARGET PORT GROUPS, its parameter list checked, on a target whose states follow RBD
 * locks: a local group asked active takes every lock of the target; on the holder, a local
 * group asked standby or unavailable, or another gateway's asked active, hands them over.
 * SCSI_DONE or SCSI_ASYNC; -ENOENT when the target follows no lock. */
int ha_alua_stpg(struct scsi_cmd *cmd, struct scsi_alua *a, uint32_t len);
/* The layout changed (main thread): tell each lock what to write in its owner record. */
void ha_alua_configured(struct scsi_lun_map *map);
/* A LU whose backend has the managed lock: watch its ownership (on: at creation) or stop. */
void ha_alua_lu_watch(struct scsi_lu *lu, bool on);
/* The LU entered a map. Control path. */
void ha_alua_lu_mapped(struct scsi_lun_map *map, struct scsi_lu *lu);

/* The pure part, for the unit tests. One LU with a managed lock, as far as the states go. */
struct ha_alua_view {
	int8_t own;	/* enum ha_own_state */
	bool free;	/* nobody holds its lock */
	bool known;	/* the holder's owner record is known: match is its */
	bool refused;	/* the holder refused this gateway's implicit request */
	uint16_t match; /* bit i: the layout's group i is one of the holder's (a remote group whose
			   id or a port of which the record names) */
};
void ha_alua_view(const struct scsi_alua *a, const struct ha_owner *o, struct ha_alua_view *v);
/* The state of each group of a (st[i], 0xff: leave it) from the views of the target's LUs;
 * returns where the target stands (enum alua_town). */
int ha_alua_states(const struct scsi_alua *a, const struct ha_alua_view *v, unsigned n,
		   uint8_t *st);

#endif
