/* SCSI block-device core (SPC-4 / SBC-3), the target side's view. Knows nothing of iSCSI: the
 * transport layer hands it a CDB, the data-out bytes and a buffer for data-in, and gets back a
 * SCSI status, sense data and the number of data-in bytes.
 *
 * Objects:
 *   struct scsi_lu      one logical unit (a backend plus SCSI state: unit attentions,
 *                       reservations, mode pages). Shared by sessions on every worker thread;
 *                       the data path takes no locks, control state is guarded internally.
 *   struct scsi_lun_map the LUN -> LU table of one target (REPORT LUNS, absent LUNs).
 *   struct scsi_nexus   one I_T nexus (an iSCSI session), for unit attentions and
 *                       reservations. Created when a session logs in, freed when it ends.
 *   struct scsi_thread  per worker thread I/O context (io_uring for file/block backends),
 *                       bound to that thread's event loop.
 *   struct scsi_cmd     one command, embedded in the transport's task.
 */
#ifndef IX_SCSI_SCSI_H
#define IX_SCSI_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/bs_cfg.h"

struct bs_dev;
struct ev_loop;
struct scsi_lu;
struct scsi_lu_index;
struct scsi_lun_map;
struct scsi_nexus;
struct scsi_thread;

/* SCSI status codes (SAM-5). */
enum scsi_status {
	SCSI_STATUS_GOOD = 0x00,
	SCSI_STATUS_CHECK_CONDITION = 0x02,
	SCSI_STATUS_CONDITION_MET = 0x04,
	SCSI_STATUS_BUSY = 0x08,
	SCSI_STATUS_RESERVATION_CONFLICT = 0x18,
	SCSI_STATUS_TASK_SET_FULL = 0x28,
	SCSI_STATUS_ACA_ACTIVE = 0x30,
	SCSI_STATUS_TASK_ABORTED = 0x40,
};

enum scsi_sense_key {
	SCSI_SENSE_NO_SENSE = 0x0,
	SCSI_SENSE_RECOVERED_ERROR = 0x1,
	SCSI_SENSE_NOT_READY = 0x2,
	SCSI_SENSE_MEDIUM_ERROR = 0x3,
	SCSI_SENSE_HARDWARE_ERROR = 0x4,
	SCSI_SENSE_ILLEGAL_REQUEST = 0x5,
	SCSI_SENSE_UNIT_ATTENTION = 0x6,
	SCSI_SENSE_DATA_PROTECT = 0x7,
	SCSI_SENSE_BLANK_CHECK = 0x8,
	SCSI_SENSE_COPY_ABORTED = 0xa,
	SCSI_SENSE_ABORTED_COMMAND = 0xb,
	SCSI_SENSE_VOLUME_OVERFLOW = 0xd,
	SCSI_SENSE_MISCOMPARE = 0xe,
};

#define SCSI_SENSE_MAX 96

/* Configuration of one LU (filled by the target from its config file). */
/* Where a LU keeps its persistent reservations (scsi_lu_cfg.pr_store). */
enum scsi_pr_store {
	SCSI_PR_STORE_FILE = 0,	  /* this process's memory; APTPL state in state_dir */
	SCSI_PR_STORE_SHARED = 1, /* a store shared by every gateway of the LU's backend, kept by
				     the high-availability layer (src/ha/, scsi_ha_ops.pr_open) */
};

struct scsi_ha;

struct scsi_lu_cfg {
	enum bs_type backend;
	const char *path;        /* file or block device; NULL for RAM */
	struct bs_backend_cfg bs; /* the settings of a backend that has any (backend/bs_cfg.h) */
	uint64_t size_bytes;     /* RAM: required; file: created/extended to this size if
				    nonzero and the file is smaller; block: 0 = device size */
	uint32_t block_size;     /* 512 or 4096; default 512 */
	uint32_t phys_block_size; /* advertised physical block (READ CAPACITY(16) LBPPBE, Block
				     Limits granularities): a power-of-two multiple of
				     block_size; 0 = the backend's (RAM: a page; file: the file
				     system block; block: the device's physical block) */
	bool readonly;
	bool thin;               /* advertise thin provisioning (UNMAP/WRITE SAME UNMAP) */
	bool write_cache;        /* WCE in the caching mode page; SYNCHRONIZE CACHE always
				    flushes, FUA always makes the write durable */
	bool no_medium;          /* LU present, medium absent (NOT READY 0x3A); implies removable */
	bool removable;          /* RMB: START STOP UNIT with LOEJ ejects and loads the medium */
	bool offline;            /* taken offline by the administrator: medium commands get NOT
				    READY, LOGICAL UNIT NOT READY, OFFLINE (04/12) */
	uint64_t sanitize_rate;  /* bytes per second a SANITIZE OVERWRITE may write; 0 = as
				    fast as the backend goes */
	uint8_t thin_threshold;  /* thin: the soft threshold, a percentage (1..99) of the
				    backing store in use; 0 = none (scsi_lu_space_update) */
	const char *vendor;      /* INQUIRY T10 vendor, default "IX" */
	const char *product;     /* default "ix-disk" */
	const char *serial;      /* VPD 0x80; default derived from the naa id */
	uint64_t naa_id;         /* VPD 0x83 NAA IEEE Registered (type 6 uses the low 60 bits
				    plus a second 64-bit word); 0 = derived from a hash of
				    target name and LUN */
	uint64_t naa_ext;        /* the designator's second 64-bit word when naa_id was given
				    with all 32 digits (has_naa_ext), e.g. LIO's for a disk
				    moved from ceph-iscsi; else derived from naa_id */
	bool has_naa_ext;
	const struct bs_err_rule *err_rules; /* BS_TYPE_ERROR only; borrowed until
						  scsi_lu_new() returns */
	uint32_t n_err_rules;
	const char *target_name; /* for the derived identifiers */
	uint32_t lun;
	const char *state_dir;   /* where APTPL persistent reservations are kept, as
				    "<state_dir>/<target_name>.lun<lun>.pr"; NULL = APTPL not
				    supported (PTPL_C = 0) */
	enum scsi_pr_store pr_store; /* where persistent reservations live: SCSI_PR_STORE_FILE
					(in memory, APTPL state in state_dir) or, for a LU
					exported by several gateways, SCSI_PR_STORE_SHARED
					(src/ha/ha_pr.c, through ha) */
	struct scsi_ha *ha; /* the high-availability layer's hooks (src/ha/, see scsi_int.h),
			       NULL: none (no managed lock, no shared store); the LU holds a
			       reference from scsi_lu_new() on */
	struct scsi_lu_index *index; /* where EXTENDED COPY finds this LU by its NAA designator;
				        NULL = only copies within this LU */
};

/* The LUs of one target context (a process may hold several), indexed by their VPD 0x83 NAA
 * designator so that EXTENDED COPY can name any of them as source or destination; and the
 * context's SCSI threads, so that a PREEMPT AND ABORT reaches the tasks of every thread of the
 * context (abort.c). An LU built with cfg->index set is listed from scsi_lu_new() until it is
 * freed, a thread made with it from scsi_thread_new() until scsi_thread_free(), and each keeps
 * the index alive meanwhile; the creator drops its reference with scsi_lu_index_put(). Lookups
 * take a mutex: they happen once per EXTENDED COPY segment or abort, never on the read/write
 * path. */
struct scsi_lu_index *scsi_lu_index_new(void);
void scsi_lu_index_put(struct scsi_lu_index *ix);

/* Open the backend and build the LU, restoring persistent reservations saved with APTPL when
 * state_dir has a file for it. Returns 0 and *out, or -errno with a message in err (a state
 * file that cannot be read or is damaged fails the LU: -EINVAL, message naming file and line). */
int scsi_lu_new(const struct scsi_lu_cfg *cfg, struct scsi_lu **out, char *err, size_t errlen);
/* Drop the creator's reference; the LU is freed when the last command and nexus let go. */
void scsi_lu_put(struct scsi_lu *lu);
void scsi_lu_get(struct scsi_lu *lu);

/* LUN map: up to SCSI_MAX_LUNS entries, sparse. */
#define SCSI_MAX_LUNS 256
struct scsi_lun_map *scsi_lun_map_new(void);
/* The high-availability hooks of the map's ALUA states (src/ha/, scsi_int.h): set once, right
 * after scsi_lun_map_new, before the map is used (the map holds a reference until it is
 * freed); NULL (the default): none. */
void scsi_lun_map_set_ha(struct scsi_lun_map *map, struct scsi_ha *ha);
void scsi_lun_map_free(struct scsi_lun_map *map);
/* Takes a reference on lu. -EEXIST, -ERANGE. */
int scsi_lun_map_add(struct scsi_lun_map *map, uint32_t lun, struct scsi_lu *lu);
/* Take LUN lun out of the map: commands that look it up from now on get LOGICAL UNIT NOT
 * SUPPORTED. Returns its LU with the map's reference, or NULL if the LUN was empty.
 * scsi_lun_map_get() hands out pointers without a reference, so the caller keeps this reference
 * until every thread that looks LUs up in the map has passed a point where it holds no such
 * pointer (the target waits for one turn of each worker loop), then drops it with
 * scsi_lu_put(). Commands already running hold their own reference and finish normally. */
struct scsi_lu *scsi_lun_map_remove(struct scsi_lun_map *map, uint32_t lun);
/* The LUN inventory changed (a LUN added or removed): every I_T nexus that has used an LU of the
 * map gets the unit attention REPORTED LUNS DATA HAS CHANGED (3F/0E) on it (SPC-4, REPORT
 * LUNS). Call it on the thread that adds and removes LUNs (it reads the map without taking
 * references). */
void scsi_lun_map_changed(const struct scsi_lun_map *map);
/* lun is either the 8-byte SAM LUN field from a PDU (decoded with scsi_lun_decode()) or a
 * plain LUN number below SCSI_MAX_LUNS; the two cannot be confused (a field addressing LUN n > 0
 * is >= 2^48). No reference is taken; NULL if absent. */
struct scsi_lu *scsi_lun_map_get(const struct scsi_lun_map *map, uint64_t lun);

/* ALUA (SPC-4 5.15): the target port groups of one LUN map (one target), shared by all its LUs.
 * A target port is named by its RELATIVE TARGET PORT IDENTIFIER, which the nexus takes from the
 * TPGT in its target_port string (scsi_nexus_new). Without a configuration (the default) the
 * map has no ALUA: INQUIRY TPGS is 0 and REPORT/SET TARGET PORT GROUPS are not there. */
enum scsi_alua_state {
	SCSI_ALUA_ACTIVE_OPTIMIZED = 0x0,
	SCSI_ALUA_ACTIVE_NON_OPTIMIZED = 0x1,
	SCSI_ALUA_STANDBY = 0x2,
	SCSI_ALUA_UNAVAILABLE = 0x3,
	SCSI_ALUA_OFFLINE = 0xe,
	SCSI_ALUA_TRANSITIONING = 0xf,
};
#define SCSI_ALUA_MAX_GROUPS 16
#define SCSI_ALUA_MAX_PORTS  16 /* per group */

struct scsi_alua_group_cfg {
	uint16_t id;      /* TARGET PORT GROUP, 1..65535, unique in the map */
	uint8_t state;    /* enum scsi_alua_state */
	uint8_t status;   /* out of scsi_alua_get(): RTPG STATUS CODE (0 none, 1 explicit, 2
			     implicit); ignored by scsi_alua_configure() */
	bool preferred;   /* PREF bit */
	bool local;	  /* this gateway's ports ("portals"), not another gateway's: with a
			     LU's managed exclusive lock its state follows the lock (src/ha/) */
	uint8_t nports;
	uint16_t ports[SCSI_ALUA_MAX_PORTS]; /* relative target port ids (1..65535), each in
						one group only; ports on other gateways too */
};

struct scsi_alua_cfg {
	uint8_t ngroups;  /* 0: no ALUA */
	bool explicit_ok; /* SET TARGET PORT GROUPS accepted (INQUIRY TPGS 11b, else 01b) */
	uint8_t transition_s; /* IMPLICIT TRANSITION TIME reported by REPORT TARGET PORT GROUPS */
	uint32_t implicit_failover_ms; /* I/O refused on a standby local group for this long
					  takes over the LUs' lock; 0: never (docs/ha.md) */
	struct scsi_alua_group_cfg groups[SCSI_ALUA_MAX_GROUPS];
};

/* Check a configuration: NULL if usable, else what is wrong (a static string). */
const char *scsi_alua_cfg_error(const struct scsi_alua_cfg *cfg);
/* Install (or replace, on a reload) the port groups of a map; cfg NULL or ngroups 0 turns ALUA
 * off. A group whose id and configured state are those of the running layout keeps its current
 * state (set by SET TARGET PORT GROUPS or scsi_alua_set_state); when any port's state or
 * group changes, every I_T nexus that used an LU of the map gets ASYMMETRIC ACCESS STATE
 * CHANGED (2A/06). -EINVAL (scsi_alua_cfg_error), -ENOMEM. Control path, any thread. */
int scsi_alua_configure(struct scsi_lun_map *map, const struct scsi_alua_cfg *cfg);
/* An implicit state change of one group (the administrator, a failover): every I_T nexus gets
 * 2A/06. -ENOENT (no ALUA or no such group), -EINVAL (not a state). */
int scsi_alua_set_state(struct scsi_lun_map *map, uint16_t group, uint8_t state);
/* The running layout and states; -ENOENT without ALUA. */
int scsi_alua_get(const struct scsi_lun_map *map, struct scsi_alua_cfg *out);
/* "active/optimized", "active/non-optimized", "standby", "unavailable", "offline",
 * "transitioning"; NULL for anything else. And back: -EINVAL for an unknown name. */
const char *scsi_alua_state_name(uint8_t state);
int scsi_alua_state_parse(const char *name, uint8_t *state);

/* Decode an 8-byte SAM LUN field (peripheral / flat addressing) to a LUN number; returns
 * UINT32_MAX for a format this target does not address. And the reverse. */
uint32_t scsi_lun_decode(uint64_t lun_field);
uint64_t scsi_lun_encode(uint32_t lun);

/* I_T nexus. initiator_port is "<InitiatorName>,i,0x<ISID hex>", target_port
 * "<TargetName>,t,0x<TPGT hex>" (SPC-4 iSCSI TransportID forms). Gets a power-on unit attention
 * on each LU at first access. Its RELATIVE TARGET PORT IDENTIFIER (VPD 0x83, ALUA) is the
 * TPGT, or 1 when the TPGT is 0 or target_port has another form. */
struct scsi_nexus *scsi_nexus_new(const struct scsi_lun_map *map, const char *initiator_port,
				  const char *target_port);
/* LUN masking and mapping of one I_T nexus (an ACL's "luns"): view[n] is 1 + the map LUN the
 * nexus sees as LUN n, 0 where it sees nothing; NULL shows the whole map unchanged. Copies
 * view. A LUN that now names another LU (or none) is detached; every LU still attached gets
 * REPORTED LUNS DATA HAS CHANGED (3F/0E). Returns 1 when the view changed, 0 when it is the
 * same, -ENOMEM. On the nexus's thread (the data path reads the view without a lock). */
int scsi_nexus_set_view(struct scsi_nexus *nx, const uint16_t *view);
/* The map LUN that LUN lun of the nexus names, or UINT32_MAX when the nexus does not see it. */
uint32_t scsi_nexus_map_lun(const struct scsi_nexus *nx, uint32_t lun);

/* I_T nexus loss: releases RESERVE(6) reservations and PREVENT MEDIUM REMOVAL held through
 * it; persistent reservations and registrations survive it (SPC-4 5.12.10). */
void scsi_nexus_free(struct scsi_nexus *nx);
/* The same release at once, the nexus staying allocated (its tasks may still be finishing):
 * when the session ends (its connection closes, or a Logout, before its response lets the
 * initiator log in again and meet a PREVENT or reservation of the session it just ended: the
 * Logout uses scsi_nexus_lost_wait below). Nexus's thread only. */
void scsi_nexus_lost(struct scsi_nexus *nx);
/* Who waits for a shared store (src/ha/ha_pr.c) to have stored what a nexus loss released: an
 * SPC-2 reservation held through the nexus is released in the LU at once but in the store
 * (which the other gateways go by) only when its helper has written it; done(arg) runs on
 * loop once it has (stored, or failed and logged). */
struct scsi_lost_wait {
	struct ev_loop *loop;
	void (*done)(void *arg);
	void *arg;
};
/* scsi_nexus_lost, returning how many times w->done will be called (0: nothing to wait for). A
 * Logout's response waits for them: the initiator may reserve through another gateway next. */
unsigned scsi_nexus_lost_wait(struct scsi_nexus *nx, const struct scsi_lost_wait *w);

/* Per-thread I/O context, bound to the thread's loop; listed in ix (the target context's, see
 * scsi_lu_index_new; NULL: none, the thread's tasks are then never aborted by another
 * nexus's PREEMPT AND ABORT). */
struct scsi_thread *scsi_thread_new(struct ev_loop *loop, struct scsi_lu_index *ix);
void scsi_thread_free(struct scsi_thread *t);

struct scsi_cmd;
typedef void (*scsi_done_cb)(struct scsi_cmd *cmd);

struct scsi_cmd {
	/* In: set by the transport before scsi_cmd_exec(). */
	struct scsi_thread *thread;
	const struct scsi_lun_map *map;
	struct scsi_nexus *nexus;
	uint64_t lun_field;        /* the 8-byte LUN from the PDU */
	const uint8_t *cdb;
	uint16_t cdb_len;
	uint8_t task_attr;
	uint8_t *buf;              /* data buffer, buf_len bytes: write data in, read data out */
	uint32_t buf_len;
	uint32_t data_out_len;     /* bytes of write data in buf (the initiator's EDTL, W=1) */
	uint32_t data_in_max;      /* most data-in the initiator accepts (EDTL, R=1) */
	bool data_in_map_ok;       /* READ may answer with data_in pointing into the LU's own
				      memory (RAM LUs) instead of copying into buf. Only for a
				      transport that reads those bytes after completion without
				      checksumming them (no data digest), and that calls
				      scsi_cdb_is_read() to keep later commands on the same
				      connection from changing them before they are sent. */
	scsi_done_cb done;         /* called exactly once, on the submitting thread; may be called
				      before scsi_cmd_exec() returns */
	void *priv;                /* the transport's */

	/* Out: set by the SCSI layer before done(). */
	uint8_t status;            /* enum scsi_status */
	uint8_t sense_len;
	uint8_t sense[SCSI_SENSE_MAX];
	uint32_t data_in_len;      /* bytes of data-in (<= data_in_max) at data_in */
	const uint8_t *data_in;    /* where they are: buf, or (data_in_map_ok) the LU's memory,
				      valid as long as the LU (the LU outlives every session) */
	struct scsi_lu *data_in_lu; /* the LU whose memory data_in points into, else NULL */
	uint32_t xfer_wanted;      /* bytes the CDB asks to move in its data direction; the
				      transport derives O/U residuals from this and the EDTL */

	/* Private to the SCSI layer (holds the backend I/O descriptor, so no allocation per
	 * command). */
	uint64_t internal[20];
};

/* True for READ (6), (10), (12), (16): commands that only move data from the medium. Anything
 * else may change the medium, so a transport holding data-in that points into LU memory
 * (data_in_map_ok) must copy it out before executing such a command. */
bool scsi_cdb_is_read(const uint8_t *cdb, uint16_t cdb_len);

/* For data_in in the LU's memory (data_in_lu set): keep every write out of the bytes
 * [at, at + len) of it until scsi_data_in_unpin, so they can be checksummed and then handed to
 * the kernel unchanged (a data digest over a zero-copy Data-In). Never waits. 0 when pinned;
 * -EBUSY when a write to them is running (copy them instead); -ENOTSUP when the LU cannot pin.
 * Hold a pin only for a bounded stretch with no callbacks: writers on other threads wait. */
int scsi_data_in_pin(const struct scsi_cmd *cmd, const uint8_t *at, uint32_t len);
void scsi_data_in_unpin(const struct scsi_cmd *cmd, const uint8_t *at, uint32_t len);

/* Execute. Always completes through cmd->done exactly once. */
void scsi_cmd_exec(struct scsi_cmd *cmd);

/* ABORT TASK and friends for a command that has not completed yet: a command the SCSI layer is
 * only waiting on (a SANITIZE without IMMED; the operation itself continues, as SBC-4 requires)
 * completes at once through cmd->done with TASK ABORTED and this returns true. For any other
 * command returns false: it completes normally and soon (backend I/O in flight); a copy
 * (EXTENDED COPY, WRITE USING TOKEN) stops after its chunk in flight and completes with TASK
 * ABORTED. Call on the submitting thread. */
bool scsi_cmd_abort(struct scsi_cmd *cmd);

/* Tasks of other I_T nexuses that a command aborts (PERSISTENT RESERVE OUT PREEMPT AND
 * ABORT, SPC-4 5.12.11.4.5; on a shared store also a PREEMPT AND ABORT through another
 * gateway). The SCSI layer does not own the tasks, the transport does: it gives each thread a
 * hook, and the SCSI layer runs every thread's hook on that thread's loop with a request. The
 * hook aborts the tasks of the nexuses the request names (scsi_abort_wants) addressed to its
 * LU (scsi_abort_lu): a task that has not reached the SCSI layer ends at once, one inside it
 * with scsi_cmd_abort(); the control mode page reports TAS = 1, so each ends with TASK ABORTED
 * status. For every task that is still to finish (its backend I/O in flight) the hook calls
 * scsi_abort_hold() and, once the task has completed, scsi_abort_release(), on the same thread.
 * The request completes when every thread's hook has returned and every hold is released. */
struct scsi_abort;
typedef void (*scsi_abort_fn)(void *arg, struct scsi_abort *req);
/* Set the thread's hook (NULL: this thread serves no nexus whose tasks could be aborted). */
void scsi_thread_set_abort(struct scsi_thread *t, scsi_abort_fn fn, void *arg);
struct scsi_lu *scsi_abort_lu(const struct scsi_abort *req);
/* Does the request abort the tasks of this I_T nexus? */
bool scsi_abort_wants(const struct scsi_abort *req, const struct scsi_nexus *nx);
void scsi_abort_hold(struct scsi_abort *req);
void scsi_abort_release(struct scsi_abort *req);

/* Task management on an LU: LOGICAL UNIT RESET (clears reservations per SPC, sets a unit
 * attention 29/03 for every nexus, from's too). Outstanding commands are the transport's to
 * abort.
 * Returns 0 or -ENOENT. */
int scsi_lu_reset(struct scsi_lu *lu, struct scsi_nexus *from);

/* Build fixed-format sense (0x70) into cmd and set CHECK CONDITION. */
void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);

/* LU facts the transport and tools need. */
uint64_t scsi_lu_num_blocks(const struct scsi_lu *lu);
/* Grow the LU to bytes (a multiple of its block size, more than now) while it serves: the
 * backend first (bs_dev_grow), then the capacity, then the unit attention CAPACITY DATA HAS
 * CHANGED (6/2A/09) for every I_T nexus that has used it. Main thread. -errno + message. */
int scsi_lu_grow(struct scsi_lu *lu, uint64_t bytes, char *err, size_t errlen);
/* Shrink the LU to bytes (an RBD LUN: iscsi_resize_lun with force): the capacity first (no new
 * command reaches past it), then the backend (bs_dev_shrink; the capacity is restored if it
 * fails), then CAPACITY DATA HAS CHANGED for every nexus. Main thread. -errno + message. */
int scsi_lu_shrink(struct scsi_lu *lu, uint64_t bytes, char *err, size_t errlen);
/* Take the LU offline (medium commands get NOT READY, OFFLINE 04/12; INQUIRY, REPORT LUNS and
 * the like still answer) or back online (every nexus that used it gets NOT READY TO READY
 * CHANGE, 6/28/00). Any thread. */
void scsi_lu_set_offline(struct scsi_lu *lu, bool offline);
bool scsi_lu_offline(const struct scsi_lu *lu);
/* Quiesce the LU's writes for a snapshot or a rollback (hold.c; docs/snapshots.md). busy
 * false: new write commands wait (queued on their threads, not failed); busy true: every
 * medium command gets NOT READY, LOGICAL UNIT NOT READY, OPERATION IN PROGRESS (02/04/07).
 * Then the writes already running drain: cb(arg, 0) runs on loop once none is left, and the
 * LU stays quiesced until scsi_lu_resume. If they have not drained within timeout_ms the
 * quiesce ends by itself (the held writes run, nothing is refused any more) and cb gets
 * -ETIMEDOUT. -EBUSY when the LU is quiesced already, -EINPROGRESS while a SANITIZE runs
 * (it writes with no command in flight), -ENOMEDIUM without medium, -ENOMEM.
 * Main thread (loop is its loop); cb is never called before this returns. */
typedef void (*scsi_quiesce_cb)(void *arg, int rc);
int scsi_lu_quiesce(struct scsi_lu *lu, struct ev_loop *loop, unsigned timeout_ms, bool busy,
		    scsi_quiesce_cb cb, void *arg);
/* End a quiesce that drained: held writes run, refused commands are served again; with
 * changed (after a rollback) every I_T nexus that used the LU gets NOT READY TO READY
 * CHANGE, MEDIUM MAY HAVE CHANGED (6/28/00). */
void scsi_lu_resume(struct scsi_lu *lu, bool changed);
/* I_T nexuses that have used the LU and still exist (a rollback refuses them unless
 * forced). */
unsigned scsi_lu_nexus_count(struct scsi_lu *lu);
/* Change the write cache (WCE, current and default) and the write protection (readonly) of an
 * LU while it serves; -1 leaves one as it is. Every I_T nexus that used the LU gets MODE
 * PARAMETERS CHANGED (6/2A/01) when either changed. An LU whose backend was opened read-only
 * (readonly at creation) cannot become writable: -EROFS (scsi_lu_writable). Control path. */
int scsi_lu_set_options(struct scsi_lu *lu, int write_cache, int readonly);
bool scsi_lu_writable(const struct scsi_lu *lu);
uint32_t scsi_lu_block_size(const struct scsi_lu *lu);
/* The LU's backend device (NULL without medium). */
struct bs_dev *scsi_lu_dev(struct scsi_lu *lu);

/* Thin provisioning: how full the LU's backing store is, and its soft threshold (SBC-3
 * 4.7.3.6; src/scsi/sbc_thin.c). Nothing here is on the data path: the store is sampled by
 * a timer of the target (scsi_lu_index_space_poll, which calls bs_dev_space and then
 * scsi_lu_space_update); the commands read the last sample. When a sample of a thin LU with a
 * threshold finds the store's use (total - avail) at or above the threshold, every I_T nexus
 * of the LU, and any that attaches later, gets THIN PROVISIONING SOFT THRESHOLD REACHED
 * (6/38/07) once; the threshold is re-armed by a sample below it. */
struct scsi_lu_space {
	uint64_t total, avail, used; /* bytes, as struct bs_space (used UINT64_MAX: not known);
					total 0: no sample yet */
	uint8_t threshold;	     /* percent, 0: none */
	bool over;		     /* the last sample was at or above the threshold */
};
/* Take a sample (any thread; takes lu->lock). */
void scsi_lu_space_update(struct scsi_lu *lu, uint64_t total, uint64_t avail, uint64_t used);
/* Sample the LU's backend now: 0, or the -errno of bs_dev_space (nothing changes then). */
int scsi_lu_space_poll(struct scsi_lu *lu);
/* Sample every LU of the index whose backend can tell (the target's timer, main thread). */
void scsi_lu_index_space_poll(struct scsi_lu_index *ix);
/* The last sample. */
void scsi_lu_space_get(struct scsi_lu *lu, struct scsi_lu_space *out);
/* Change the threshold while the LU serves (a reload): 0 turns it off; checked against the
 * last sample at once. -EINVAL above 99. */
int scsi_lu_set_thin_threshold(struct scsi_lu *lu, unsigned percent);

#endif
