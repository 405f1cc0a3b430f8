/* ALUA internals shared by alua.c (groups, states, REPORT/SET TARGET PORT GROUPS, the
 * configuration) and, through the map's HA hooks, src/ha/ha_alua.c (states that follow the
 * owner of the target's LUs). */
#ifndef IX_SCSI_ALUA_INT_H
#define IX_SCSI_ALUA_INT_H

#include "scsi/scsi_int.h"

/* RTPG STATUS CODE */
#define ALUA_STATUS_NONE     0
#define ALUA_STATUS_EXPLICIT 1
#define ALUA_STATUS_IMPLICIT 2

/* Supported states: T_SUP, O_SUP, U_SUP, S_SUP, AN_SUP, AO_SUP (no LBA dependent). */
#define ALUA_SUPPORTED 0xcf

struct alua_group {
	uint16_t id;
	uint8_t
	    cfg_state; /* as configured: a reload keeps the running state if this is unchanged */
	bool pref;
	bool local; /* this gateway's: follows the owner (src/ha/) */
	atomic_uchar state;
	atomic_uchar status;
	uint8_t nports;
	uint16_t ports[SCSI_ALUA_MAX_PORTS];
};

/* Where the target's ownership stands, from the owners of its LUs (src/ha/ha_alua.c). */
enum alua_town {
	ALUA_TOWN_NONE = 0, /* no LU with a managed lock open: the states are the configured ones */
	ALUA_TOWN_OWNER,    /* this gateway holds every lock */
	ALUA_TOWN_STANDBY,  /* another gateway (or nobody) holds them, this one is healthy */
	ALUA_TOWN_FENCED,   /* this gateway's client was blocklisted */
	ALUA_TOWN_MOVING,   /* a lock is being taken or given up here */
	ALUA_TOWN_SPLIT,    /* the locks are not all on one owner */
};

struct scsi_alua {
	struct scsi_alua *retired_next;
	uint8_t ngroups;
	bool explicit_ok;
	uint8_t transition_s;
	uint32_t implicit_ms;	   /* implicit failover delay, 0: off */
	atomic_uint changes_seen;  /* the ownership change counter when the states were last
				      brought in line with the locks (src/ha/) */
	atomic_int town;	   /* enum alua_town, as of then */
	atomic_bool all_free;	   /* ... and nobody held any of the locks */
	atomic_bool refused;	   /* ... and a holder refused an implicit take-over */
	_Atomic uint64_t split_since; /* the locks were first seen split (ms), 0: they are not */
	_Atomic uint64_t sb_first; /* I/O refused in standby: first of the current run (ms) */
	_Atomic uint64_t sb_last;  /* ... and the latest (0: no run) */
	struct alua_group g[SCSI_ALUA_MAX_GROUPS];
};

/* alua.c */
struct scsi_alua *scsi_alua_of(const struct scsi_lun_map *map);
struct alua_group *scsi_alua_group(struct scsi_alua *a, uint16_t id);
/* ASYMMETRIC ACCESS STATE CHANGED to every nexus of the map but except; with told, not to the
 * nexuses of an LU whose lock's thread told them of the very changes (told) already. */
void scsi_alua_post_changed(const struct scsi_lun_map *map, const struct scsi_nexus *except,
			    const unsigned *told);

#endif
