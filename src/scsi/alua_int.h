/* ALUA internals shared by alua.c (groups, states, REPORT/SET TARGET PORT GROUPS, the
 * configuration) and alua_own.c (states that follow the RBD locks of the target's LUs). */
#ifndef IX_SCSI_ALUA_INT_H
#define IX_SCSI_ALUA_INT_H

#include "backend/bs.h"
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
	bool local; /* this gateway's: follows the RBD lock */
	atomic_uchar state;
	atomic_uchar status;
	uint8_t nports;
	uint16_t ports[SCSI_ALUA_MAX_PORTS];
};

/* Where the target's ownership stands, from the RBD locks of its LUs (alua_own.c). */
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
	atomic_uint changes_seen;  /* bs_rbd_own_changes() when the states were last brought in
				      line with the locks */
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

/* alua_own.c */
/* Before a command and REPORT TARGET PORT GROUPS (worker) or a management read (main
 * thread): bring the states in line if any lock changed. */
void scsi_alua_own_follow(struct scsi_lun_map *map);
/* A read or write (scsi_alua_medium_io) refused on a standby local group: true while an
 * implicit failover is pending (the command then gets 04/0A, transitioning, instead of
 * 04/0B). Other commands never come here: they get 04/0B and move nothing. */
bool scsi_alua_own_implicit(struct scsi_lun_map *map, struct scsi_alua *a);
/* SET TARGET PORT GROUPS, its parameter list checked, on a target whose states follow RBD
 * locks: a local group asked active takes every lock of the target; on the holder, a local
 * group asked standby or unavailable, or another gateway's asked active, hands them over.
 * SCSI_DONE or SCSI_ASYNC; -ENOENT when the target follows no lock. */
int scsi_alua_own_stpg(struct scsi_cmd *cmd, struct scsi_alua *a, uint32_t len);
/* The layout changed (main thread): tell each lock what to write in its owner record. */
void scsi_alua_own_configured(struct scsi_lun_map *map);

/* The pure part, for the unit tests. One LU with a managed lock, as far as the states go. */
struct alua_own_view {
	int8_t own;	/* enum bs_rbd_own */
	bool free;	/* nobody holds its lock */
	bool known;	/* the holder's owner record is known: match is its */
	bool refused;	/* the holder refused this gateway's implicit request */
	uint16_t match; /* bit i: the layout's group i is one of the holder's (a remote group whose
			   id or a port of which the record names) */
};
void scsi_alua_own_view(const struct scsi_alua *a, const struct bs_rbd_owner *o,
			struct alua_own_view *v);
/* The state of each group of a (st[i], 0xff: leave it) from the views of the target's LUs;
 * returns where the target stands (enum alua_town). */
int scsi_alua_own_states(const struct scsi_alua *a, const struct alua_own_view *v, unsigned n,
			 uint8_t *st);

#endif
