/* The target role: portals, targets, LUNs, worker threads, the session registry, and the
 * iSCSI handling of each connection (login through logout). Built from a struct ix_config.
 *
 * Threads: the thread that calls ix_target_run() owns the listeners and signal handling; each
 * worker thread runs one event loop and owns the connections (and their sessions and tasks)
 * handed to it. The session registry is the only structure shared between workers; it is
 * touched at login and session end only, under a mutex, never on the data path.
 */
#ifndef IX_TARGET_TARGET_H
#define IX_TARGET_TARGET_H

#include <stdint.h>

#include "dm/dm.h"
#include "session/keys.h"
#include "target/config.h"

struct ix_target;

/* Build LUs and listeners (nothing is served until ix_target_run). On failure returns -errno
 * with a message in err. Takes ownership of cfg. */
int ix_target_new(struct ix_config *cfg, struct ix_target **out, char *err, size_t errlen);
/* Serve until ix_target_stop(). Returns 0 or -errno. */
int ix_target_run(struct ix_target *t);
/* Thread- and signal-safe. */
void ix_target_stop(struct ix_target *t);
/* Apply a new configuration (takes ownership on success; on failure nothing changed and the
 * caller keeps cfg). Targets and ACLs added, changed or removed take effect for new logins;
 * sessions of removed targets are asked to log out and dropped after
 * global.logout_timeout_ms; LUNs added to or removed from a kept target take effect at once.
 * Details in tgt_reload.c. Call on the thread that runs ix_target_run(). */
int ix_target_reload(struct ix_target *t, struct ix_config *cfg, char *err, size_t errlen);
void ix_target_free(struct ix_target *t);

/* ---- inspection and session control (the management API; main thread) ---- */

/* One session as its worker saw it. */
struct ix_session_info {
	char initiator[224];
	char target[224];            /* "" for discovery sessions */
	bool discovery;
	uint8_t isid[6];
	uint16_t tsih, tpgt, cid;
	int worker;
	char portal[65];             /* the portal's name */
	char peer[72], local[72];    /* "addr:port" */
	char transport[16];          /* the datamover's name (dm/dm.h registry) */
	struct iscsi_sess_params sess;  /* negotiated session keys */
	struct iscsi_conn_params conn;  /* negotiated connection keys (digests, segment lengths) */
	uint32_t exp_cmdsn, max_cmdsn;
	uint32_t cmdsn_window;       /* MaxCmdSN - ExpCmdSN + 1 */
	uint32_t tasks_active;       /* commands with an ITT in use */
	uint32_t commands_pending;   /* non-immediate commands past ExpCmdSN not yet answered */
	bool logout_requested;       /* an Async logout request is outstanding */
};

/* Login outcomes since start, counted by each worker on its own thread and summed when read.
 * refused[] is indexed by ix_login_reason_index(status). */
#define IX_LOGIN_REASONS 18
struct ix_login_stats {
	uint64_t accepted_normal, accepted_discovery;
	uint64_t refused[IX_LOGIN_REASONS];
	uint64_t timeouts; /* connections closed because the login did not complete in time */
};
/* 0x0200..0x020b -> 0..11, 0x0300..0x0302 -> 12..14, the redirections 0x0101 and 0x0102 ->
 * 15 and 16, anything else -> 17. */
int ix_login_reason_index(uint16_t status);
/* "authentication_failed", ... for an index (RFC 7143 11.13.5 names, snake case). */
const char *ix_login_reason_name(int idx);

/* Collect every logged-in session and the login counters: each worker describes its own
 * sessions on its thread; cb runs on the main loop once all have answered (list freed after cb
 * returns). 0 or -ENOMEM. */
typedef void (*ix_sessions_cb)(void *arg, const struct ix_session_info *list, size_t n,
			       const struct ix_login_stats *logins);
int ix_target_sessions(struct ix_target *t, ix_sessions_cb cb, void *arg);

/* Ask the session with this TSIH to log out (Async Message "target requests Logout", then
 * dropped after timeout_ms if it has not), or with drop close its connection at once.
 * -ENOENT when no such session is registered. */
int ix_target_session_end(struct ix_target *t, uint16_t tsih, bool drop, uint32_t timeout_ms);

/* The capacity in bytes of a running LUN; -ENOENT when the target or LUN is not served, or it
 * has no medium. */
int ix_target_lun_bytes(struct ix_target *t, const char *target, uint32_t lun, uint64_t *bytes);
/* Shrink a running LUN to bytes (scsi_lu_shrink: RBD only; the data past it is gone). Main
 * thread. -errno + message. */
int ix_target_lun_shrink(struct ix_target *t, const char *target, uint32_t lun, uint64_t bytes,
			 char *err, size_t errlen);
/* Can a running LUN become writable online (scsi_lu_writable)? false also when it is not
 * served. */
bool ix_target_lun_writable(struct ix_target *t, const char *target, uint32_t lun);

/* A running RBD LUN's managed exclusive lock (rbd.exclusive_lock): its state ("owner",
 * "standby", "fenced", ...) and reason into state/reason; with brk, first break the lock of
 * whoever holds it (librbd blocklists that client) and take it (ha_dev_lock: main thread,
 * bounded by the cluster's timeouts). -ENOENT: no such LUN; -EINVAL: not an RBD LUN with
 * exclusive_lock, -EOPNOTSUPP: built without RBD; else -errno with the reason in reason. */
int ix_target_lun_rbd_lock(struct ix_target *t, const char *target, uint32_t lun, bool brk,
			   char *state, size_t slen, char *reason, size_t rlen);
/* ALUA of a served target (the running states, which SET TARGET PORT GROUPS changes too), and
 * an implicit state change of one of its groups (every I_T nexus gets 2A/06). -ENOENT: no such
 * target, or it has no ALUA, or (set) no such group; -EINVAL: not a state. Main thread. */
int ix_target_alua_get(struct ix_target *t, const char *target, struct scsi_alua_cfg *out);
int ix_target_alua_set(struct ix_target *t, const char *target, uint16_t group, uint8_t state);
/* ---- statistics (iscsi_get_stats, the Prometheus endpoint) ---- */

/* Command latency, from the arrival of the SCSI Command PDU (the worker loop's clock after
 * its wait) to the command's completion: bucket i counts latencies below 2^i microseconds
 * (and at least 2^(i-1) for i > 0); the last bucket everything longer. Not cumulative. */
#define IX_LAT_BUCKETS 24 /* 1 us .. 2^22 us (4.2 s), then the rest */
/* Errors: CHECK CONDITION by sense key (0..15), then any other status that is not GOOD
 * (BUSY, TASK SET FULL, RESERVATION CONFLICT, TASK ABORTED). */
#define IX_ERR_KINDS 17
#define IX_ERR_OTHER_STATUS 16

/* One LUN of one target as used by one initiator, since the daemon started (a session that
 * ends leaves its counts). Reads and writes are READ/WRITE (6/10/12/16) commands; everything
 * else is "other"; bytes are the data those reads and writes moved. */
struct ix_lun_stats {
	char target[224];
	char initiator[224];
	uint32_t lun;
	uint64_t cmds_read, cmds_write, cmds_other;
	uint64_t bytes_read, bytes_written;
	uint64_t errors[IX_ERR_KINDS];
	uint64_t lat[IX_LAT_BUCKETS];
	uint64_t lat_sum_ns;
	uint64_t qos_delayed;  /* commands that waited for a QoS limit (tgt_qos.c) */
	uint64_t qos_wait_ns;  /* the time they waited, summed */
};

/* One target ("" for what belongs to none: discovery sessions, logins to unknown names). */
struct ix_tgt_stats {
	char target[224];
	uint64_t logins_accepted;
	uint64_t logins_refused[IX_LOGIN_REASONS];
	uint64_t login_timeouts;     /* logins not completed within global.login_timeout_ms */
	uint64_t sessions[DM_MAX_TRANSPORTS]; /* open now, by transport: [registry id] (dm.h) */
	uint64_t digest_errors;      /* header and data digest mismatches */
	uint64_t conn_timeouts;      /* NOP-Out not answered, logout not done in time */
	uint64_t tasks_aborted;      /* commands ended by a TMF or a closed connection */
	uint64_t pdus_rejected;      /* Reject PDUs sent */
};

/* One worker thread's event loop: how it waited (global.poll_us). */
struct ix_worker_stats {
	int id;
	uint64_t sleeps;        /* waits that went to sleep */
	uint64_t poll_hits;     /* waits that the poll window answered without sleeping */
	uint64_t poller_hits;   /* of those, answered by a poller (a busy socket's recv, a CQ) */
	uint64_t poll_backoffs; /* windows shut because other threads wanted the CPU */
	uint64_t poll_ns;       /* time spent polling */
	/* what its connections hold now, pooled for commands (global.idle_release_ms gives it
	   back once they are quiet) */
	uint64_t task_slots;       /* task slots allocated */
	uint64_t pdu_descriptors;  /* pooled transmit PDU descriptors */
	uint64_t buffer_bytes;     /* data buffers: in use, cached, on free task slots */
	uint64_t trims;            /* connections that gave pooled memory back, since start */
};

/* How full one LUN's backing store is (thin provisioning, src/scsi/sbc_thin.c): the last
 * sample, taken each second; only LUNs whose backend tells. */
struct ix_space_stats {
	char target[224];
	uint32_t lun;
	uint64_t total, avail; /* bytes of the store (a file system, a pool) and still free */
	uint64_t used;	       /* bytes the LUN holds of it; UINT64_MAX: not known */
	uint8_t threshold;     /* thin_threshold in percent, 0: none */
	bool reached;	       /* the store's use is at or above the threshold */
};

struct ix_stats {
	struct ix_login_stats logins; /* over all targets */
	struct ix_tgt_stats *tgts;
	size_t ntgts;
	struct ix_lun_stats *luns;
	size_t nluns;
	struct ix_worker_stats *workers; /* by id */
	size_t nworkers;
	struct ix_space_stats *spaces; /* by target and LUN */
	size_t nspaces;
};
void ix_stats_free(struct ix_stats *st);

/* Collect the statistics: each worker copies its own counters on its thread, the copies are
 * summed on the main loop, then cb runs there (st is freed after it returns). 0 or -ENOMEM. */
typedef void (*ix_stats_cb)(void *arg, const struct ix_stats *st);
int ix_target_stats(struct ix_target *t, ix_stats_cb cb, void *arg);

/* Histogram bucket of a latency (pure). */
int ix_lat_bucket(uint64_t ns);

/* A running LUN's state for the management API: "online" or "offline" with the reason
 * (taken offline by the administrator; an RBD image not open yet, retried in the background:
 * "image rbd/foo not found (...)", "cluster unreachable: ..."), the open attempts so far and
 * the seconds to the next one; for an RBD LUN the lock state and its reason (lock "" if none).
 * -ENOENT: no such LUN or no medium. Main thread. */
struct ix_lun_status {
	char state[16];
	char reason[320];
	unsigned attempts, next_s;
	char lock[16];
	char lock_reason[256];
	/* RBD, open: its cluster connection ("connected", "fenced", "rejoining"; "" for other
	 * LUNs), why, rejoins completed, attempts of the rejoin under way, seconds to the next */
	char conn[16];
	char conn_reason[256];
	unsigned rejoins, rejoin_attempts, rejoin_next_s;
};
int ix_target_lun_status(struct ix_target *t, const char *target, uint32_t lun,
			 struct ix_lun_status *st);
/* Try to open a LUN's backend now if it is not open (RBD started offline; ix-ctl lun online):
 * 0, also when nothing is to be done; -ENOENT: no such LUN. Main thread. */
int ix_target_lun_retry(struct ix_target *t, const char *target, uint32_t lun);
/* Rejoin a fenced RBD LUN now (ix-ctl lun rejoin): a new cluster connection, the image
 * reopened, standby (see docs/ha.md). 0 started; -ENOENT no such LUN; -EINVAL not an RBD
 * LUN; -EALREADY not fenced; -EAGAIN the image is not open yet; -EOPNOTSUPP built without
 * RBD. Main thread. */
int ix_target_lun_rejoin(struct ix_target *t, const char *target, uint32_t lun);

/* Snapshots and clones of a running RBD LUN (tgt_snap.c, docs/snapshots.md). op is an enum
 * bs_snap_op (backend/bs.h). CREATE holds the LU's new writes and drains the running ones
 * first (bounded by timeout_ms, then aborted and the writes resumed); ROLLBACK takes the LU
 * offline on this gateway first (NOT READY, OPERATION IN PROGRESS) and refuses while I_T
 * nexuses use it unless force, and posts NOT READY TO READY CHANGE after; the others leave the
 * LU alone. 0: cb runs later on the main loop, with rc 0 or -errno and a message, the list of
 * a LIST, and how long the LU's writes were held (held_ms); else -errno with the reason in err
 * (no such LUN, not an RBD LUN, quiesced already, nexuses using it, not the lock's owner) and
 * cb is never called. A CREATE or ROLLBACK on a standby of an image with the managed
 * exclusive lock is sent to the lock's holder (unless no_forward), which does it; cb gets its
 * answer. A ROLLBACK on the holder takes the LU offline on every other gateway of the image
 * first (refused, through cb, while any has nexuses on it, unless force) and brings them
 * back after (docs/snapshots.md). Main thread. */
struct bs_snap_info;
struct ix_snap_args {
	int op;
	const char *name, *clone_pool, *clone_image;
	unsigned timeout_ms;
	bool force;
	bool no_forward; /* CREATE, ROLLBACK on a standby: refuse, not ask the holder */
};
struct ix_snap_result {
	int rc;
	const char *err;
	const struct bs_snap_info *list;
	size_t n;
	bool protected_now; /* CLONE: the snapshot was protected for a v1 clone */
	unsigned held_ms;   /* CREATE, ROLLBACK: how long writes were held or refused */
	/* CREATE taken here (not forwarded): the parts of held_ms, from the hold's start to the
	   writes in flight drained, and the cluster's call (rbd_snap_create2); the rest is the
	   resume and the hops between threads */
	bool parts;
	unsigned drain_ms, create_ms;
};
typedef void (*ix_snap_cb)(void *arg, const struct ix_snap_result *res);
int ix_target_lun_snap(struct ix_target *t, const char *target, uint32_t lun,
		       const struct ix_snap_args *a, ix_snap_cb cb, void *arg, char *err,
		       size_t errlen);

/* The main loop (for tools that add their own watches, e.g. signalfd). */
struct ev_loop *ix_target_main_loop(struct ix_target *t);

#endif
