/* Internal to src/scsi: the LU, nexus and per-command state, the dispatch table and helpers
 * shared by sense.c, lu.c, cmd.c, spc.c, mode.c and sbc.c. */
#ifndef IX_SCSI_SCSI_INT_H
#define IX_SCSI_SCSI_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend/bs.h"
#include "event/loop.h"
#include "scsi/guard.h"
#include "scsi/pr.h"
#include "scsi/scsi.h"
#include "util/bytes.h"
#include "util/list.h"

/* Limits advertised in the Block Limits VPD page and enforced. */
#define SCSI_MAX_XFER_BYTES   (32u << 20) /* MAXIMUM TRANSFER LENGTH, in bytes */
#define SCSI_MAX_CAW_BLOCKS   8
#define SCSI_MAX_UNMAP_BLOCKS 0x100000u
#define SCSI_MAX_UNMAP_DESC   256u
#define SCSI_MAX_WS_BLOCKS    0x10000u
#define SCSI_SCRATCH_BYTES    (64u << 10)
#define SCSI_UA_QUEUE	      4
#define SCSI_BOUNCE_BYTES     (1u << 20) /* ORWRITE, COMPARE AND WRITE, EXTENDED COPY chunks */
#define SCSI_SLOW_POOL	      8		 /* slow contexts a thread keeps for reuse */

struct scsi_slow;

struct scsi_sanitize;

struct scsi_thread {
	struct bs_thread *bs;
	struct ev_loop *loop;
	scsi_abort_fn abort_fn; /* the transport's (scsi_thread_set_abort), under the registry's
				   lock (abort.c) */
	void *abort_arg;
	struct scsi_lu_index *ix;    /* the target context's registry of threads (abort.c) */
	struct list_head abort_link; /* on ix->threads */
	struct list_head sanitizes; /* scsi_sanitize operations driven by this thread */
	struct list_head eject_waits; /* START STOP UNIT waiting for other nexuses' loss (spc.c) */
	struct list_head hold_waits;  /* writes waiting for their LU's hold to end (hold.c) */
	unsigned gslot;		     /* this thread's fast-path counter in every LU's guard */
	struct list_head slow_free;  /* struct scsi_slow kept for reuse */
	unsigned nslow_free;
};

/* The last EXTENDED COPY statuses of one I_T_L nexus, for RECEIVE COPY RESULTS (LID1). Only
 * the nexus' own thread touches them. */
#define SCSI_COPY_LOG 2
struct scsi_copy_status {
	bool valid;
	bool lid4;	   /* POPULATE TOKEN / WRITE USING TOKEN (RECEIVE ROD TOKEN INFORMATION) */
	uint8_t sa;	   /* the originating command's service action (lid4) */
	uint8_t status;	   /* COPY MANAGER STATUS: 1 done, 2 done with errors */
	uint32_t list_id;  /* 8 bits for EXTENDED COPY(LID1), 32 for the token commands */
	uint16_t segments; /* SEGMENTS PROCESSED */
	uint8_t key, asc, ascq; /* lid4: the sense of a command that failed */
	uint8_t rod_slot;	/* POPULATE TOKEN: the token made (rod.c), its slot ... */
	uint64_t blocks;	/* TRANSFER COUNT, in blocks */
	uint64_t rod_gen;	/* ... and generation */
};

/* ROD tokens (rod.c): the live tokens of one source LU. A slot's state word is
 * gen << 16 | ascq << 8 | SCSI_ROD_*; its ranges are written while it is FILLING and only
 * read once the state says VALID (release/acquire), so writes on any thread can look at them
 * without a lock. */
#define SCSI_ROD_SLOTS	32 /* fits scsi_copy_status.rod_slot */
#define SCSI_ROD_RANGES 16
struct scsi_rod_slot {
	_Atomic uint64_t state;
	_Atomic uint64_t lba[SCSI_ROD_RANGES];
	_Atomic uint32_t nblk[SCSI_ROD_RANGES];
	atomic_uint nranges;
	atomic_uint timeout_s;	     /* inactivity timeout */
	_Atomic uint64_t last_use_ms; /* CLOCK_MONOTONIC */
	_Atomic uint64_t nonce[2];
	atomic_uint type;
	_Atomic uint64_t blocks;
};
struct scsi_rod_table {
	uint8_t cm_id[16]; /* the copy manager's identity in its tokens (the index's) */
	struct scsi_rod_slot slot[SCSI_ROD_SLOTS];
};

/* Per I_T nexus, per LUN: the I_T_L nexus. */
struct scsi_itl {
	_Atomic(struct scsi_lu *) lu; /* set (with a reference) on first access */
	atomic_bool ua_pending;	      /* mirrors n_ua != 0, read without the lock */
	atomic_uchar pr;	      /* PR_F_* view of the LU's persistent reservation for this
					 nexus: written under lu->lock, read by the data path */
	struct scsi_nexus *nx;
	struct list_head lu_link; /* on lu->itls, under lu->lock */
	uint8_t n_ua;		  /* under lu->lock */
	bool prevent;		  /* PREVENT MEDIUM REMOVAL through this nexus, under lu->lock */
	bool thin_told;		  /* told THIN PROVISIONING SOFT THRESHOLD REACHED since the
				     threshold was last re-armed (sbc_thin.c), under lu->lock */
	uint8_t ua[SCSI_UA_QUEUE][2];
	uint8_t copy_next;	  /* next copy_log slot to overwrite */
	struct scsi_copy_status copy_log[SCSI_COPY_LOG];
	/* write commands of this nexus in the LU (between precheck and completion): changed by
	 * the nexus's thread only (a relaxed load and store, no read-modify-write), read by a
	 * drain (hold.c) under lu->lock */
	atomic_uint wr_inflight;
};

struct scsi_nexus {
	const struct scsi_lun_map *map;
	char *initiator_port;
	char *target_port;
	uint16_t rtpi; /* RELATIVE TARGET PORT IDENTIFIER (the TPGT; 1 if that is 0) */
	uint16_t *view; /* LUN masking (scsi_nexus_set_view): map LUN + 1 per LUN, 0 = hidden;
			   NULL = the whole map. Read and changed on the nexus's thread only */
	/* one per LUN, allocated at its first command (scsi_itl_attach) and kept until the nexus
	   is freed: an I_T nexus that never reached a LUN holds only the pointers */
	struct scsi_itl *itl[SCSI_MAX_LUNS];
};

struct scsi_alua;

struct scsi_lun_map {
	_Atomic(struct scsi_lu *) lus[SCSI_MAX_LUNS];
	_Atomic(struct scsi_alua *) alua; /* NULL: no ALUA; layouts are immutable but for
					     their atomic states (alua.c) */
	pthread_mutex_t alua_lock;	  /* serialises ALUA changes (never on the data path) */
	struct scsi_alua *alua_retired;	  /* replaced layouts, freed with the map */
	struct scsi_ha *ha;		  /* scsi_lun_map_set_ha (held): NULL, or HA's hooks */
};

/* The high-availability layer's hooks into the core (src/ha/ha.c): ALUA states that follow
 * the owner of the LUs' shared backend, and a persistent reservation store shared by the
 * gateways of a LU. The core calls them where it would otherwise know the storage underneath;
 * a LU (scsi_lu_cfg.ha) or map (scsi_lun_map_set_ha) without them behaves as a single
 * gateway. struct scsi_ha is the HA context's face to the core (embedded in it); the core
 * holds a reference for each LU and map that has it (ops->get/put). Every hook but get and
 * put is optional. */
struct bs_host;
struct scsi_alua;
struct scsi_ha {
	const struct scsi_ha_ops *ops;
	struct bs_host *host; /* given to the backend at open (bs_open_cfg.host) */
};
struct scsi_ha_ops {
	void (*get)(struct scsi_ha *ha);
	void (*put)(struct scsi_ha *ha);
	/* After the LU's device is open, for cfg->pr_store SCSI_PR_STORE_SHARED: connect the
	 * shared store (sets lu->pr_ops). 0 or -errno + message. */
	int (*pr_open)(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen);
	/* A LU whose backend may change owner: watch its ownership (on: at creation) or stop
	 * (before the device closes). */
	void (*lu_watch)(struct scsi_lu *lu, bool on);
	/* The LU entered a map (control path). */
	void (*lu_mapped)(struct scsi_lun_map *map, struct scsi_lu *lu);
	/* Before a command and REPORT TARGET PORT GROUPS (worker) or a management read (main
	 * thread): bring the ALUA states in line with the owner if it changed. */
	void (*alua_follow)(struct scsi_lun_map *map);
	/* A read or write refused on a standby local group: true while an implicit failover is
	 * pending (the command then gets 04/0A instead of 04/0B). */
	bool (*alua_implicit)(struct scsi_lun_map *map, struct scsi_alua *a);
	/* SET TARGET PORT GROUPS, its parameter list checked: SCSI_DONE or SCSI_ASYNC; -ENOENT
	 * when the states follow no owner. */
	int (*alua_stpg)(struct scsi_cmd *cmd, struct scsi_alua *a, uint32_t len);
	/* The ALUA layout changed (main thread). */
	void (*alua_configured)(struct scsi_lun_map *map);
};

struct scsi_lu {
	atomic_int refs;
	struct bs_dev *dev; /* NULL without medium */
	_Atomic uint64_t nblocks; /* grows online (scsi_lu_grow); reads are plain loads */
	uint32_t block_size;
	uint32_t lun;
	atomic_bool readonly; /* changes online (scsi_lu_set_options) */
	bool ro_open;         /* the backend was opened read-only: readonly stays */
	bool no_medium;
	bool removable; /* RMB */
	uint64_t sanitize_rate; /* bytes/s for SANITIZE OVERWRITE, 0 = unlimited */
	bool lbpme; /* thin and the backend can deallocate */
	bool lbprz;
	uint32_t pblocks; /* logical blocks per physical block (a power of two) */
	uint32_t ugran;	  /* OPTIMAL UNMAP GRANULARITY in logical blocks (>= pblocks) */
	/* How full the backing store is (sbc_thin.c): the last sample of bs_dev_space, in bytes
	 * (sp_total 0: none yet), and the soft threshold, a percentage of the store in use (0:
	 * none); thin_over (under lock): the last sample was at or above it. */
	_Atomic uint64_t sp_total, sp_avail, sp_used;
	atomic_uchar thin_thr;
	bool thin_over;
	struct scsi_guard *guard;     /* ranges of atomic commands, see guard.h */
	struct scsi_lu_index *index;  /* the LUs of the process, for EXTENDED COPY; may be NULL */
	struct list_head index_link;  /* on index->lus, under its lock */
	char vendor[9];
	char product[17];
	char revision[5];
	char serial[65];
	char *target_name;
	uint8_t naa[16]; /* NAA 6 designator */

	/* Mode parameters that initiators may change (read lock-free on the data path). */
	atomic_bool wce;
	atomic_bool d_sense;
	atomic_bool swp; /* software write protect (control mode page) */
	atomic_bool wce_default; /* the configured write_cache (scsi_lu_set_options) */

	/* Medium state, SCSI_MS_*: one lock-free load per command; SCSI_MS_LOADED alone is the
	 * common case. Changed under lock. */
	atomic_uchar mstate;

	/* ALUA states that follow the owner of the LU's backend (src/ha/ha_alua.c): the LU's map
	 * has ALUA; the ownership change counter at which this LU's nexuses were last told 2A/06
	 * by the ownership's thread. */
	atomic_bool alua_on;
	atomic_uint own_told;

	/* Control state. */
	pthread_mutex_t lock;
	struct list_head itls;			  /* scsi_itl that have accessed this LU */
	_Atomic(struct scsi_nexus *) resv_holder; /* RESERVE(6)/(10), NULL if none,
						     SCSI_RESV_REMOTE: through another gateway */
	unsigned prevent;			  /* nexuses preventing medium removal */
	struct pr_state pr;			  /* persistent reservations */
	atomic_uchar pr_type;			  /* pr.type, for commands without a nexus */
	char *pr_path;				  /* APTPL state file, NULL = no APTPL */
	const struct scsi_pr_store_ops *pr_ops;	  /* NULL = the file store (pr_cmd.c) */
	struct scsi_ha *ha;			  /* scsi_lu_cfg.ha (held), or NULL */
	void *pr_store;				  /* the store's own state */
	bool pr_persistent;			  /* PTPL_C: the store keeps state across
						     restarts (APTPL accepted) */
	uint64_t pr_seq; /* the shared store's write sequence of lu->pr (under lock) */
	bool pr_unread;	 /* the shared store has not given lu->pr a state yet (its object
			    not read: the image not open): PERSISTENT RESERVE IN answers NOT
			    READY, not an empty state (under lock) */
	struct scsi_sanitize *san;		  /* the sanitize operation in progress */
	bool san_fail_ause;			  /* the failed sanitize allowed EXIT FAILURE MODE */

	/* ROD tokens made from this LU (rod.c): allocated at the first POPULATE TOKEN; writes
	 * look at them only while rod_live (the VALID ones) is not 0. */
	atomic_uint rod_live;
	_Atomic(struct scsi_rod_table *) rod;

	/* A hold or a busy state (SCSI_MS_HOLD, SCSI_MS_BUSY) set by scsi_lu_quiesce, until
	 * scsi_lu_resume or its timeout (hold.c); under lock */
	bool quiescing;

	/* COMPARE AND WRITE and VERIFY(BYTCHK): one at a time, synchronous, on scratch. */
	pthread_mutex_t slow_lock;
	uint8_t *scratch; /* SCSI_SCRATCH_BYTES, aligned */
};

/* Per-command private state, kept in scsi_cmd.internal. */
struct scsi_priv {
	struct bs_io io;
	struct scsi_lu *lu;
	struct scsi_itl *itl;
	struct scsi_slow *slow;	   /* slow-path context, NULL on the common path */
	bs_io_cb user_cb;	   /* the completion behind the guard's */
	struct scsi_guard *io_guard; /* the guard io's range is held in */
	uint64_t lba;
	uint32_t nblocks;
	uint32_t pos; /* progress (UNMAP descriptor index) */
	uint8_t stage;
	uint8_t gmode; /* the guard range held (guard.c) */
	bool excl;     /* holds its LU range exclusively: its I/O bypasses the guard */
	bool counted;  /* a write counted in itl->wr_inflight until it completes (hold.c) */
	bool held;     /* precheck: a write that must wait for the LU's hold to end */
};

/* Slow-path context of a command: its guard range when it waits or holds one, and the state
 * of the multi-step commands. Taken from the thread's pool, given back when the command ends. */
struct scsi_slow {
	struct list_head link; /* thread's slow_free */
	struct scsi_guard_ent ent;
	uint8_t *bounce; /* SCSI_BOUNCE_BYTES, 4096-aligned, allocated on first use */
	void (*next)(struct scsi_cmd *cmd); /* first step once an exclusive range is granted */
	/* EXTENDED COPY */
	struct scsi_lu *src, *dst; /* the LUs of the segment in progress (referenced) */
	uint64_t seg_done;	   /* blocks of the current segment copied */
	uint64_t total;		   /* blocks copied by the whole command */
	uint32_t chunk;		   /* blocks of the chunk in flight */
	uint16_t seg;		   /* segment in progress */
	uint16_t nseg;
	uint32_t seg_off;	   /* offset of the segment list in the parameter data */
	uint32_t cscd_off;	   /* offset of the CSCD descriptor list */
	uint16_t ncscd;
	bool backward; /* the copy overlaps itself forwards: chunks go from the end */
	bool copying;  /* an EXTENDED COPY or WRITE USING TOKEN moving data (abortable) */
	bool aborted;  /* scsi_cmd_abort asked it to stop at the next chunk */
	/* WRITE USING TOKEN: the token's source ranges, where the copy is in them and in the
	 * destination's range descriptors */
	uint16_t rod_slot;
	uint64_t rod_gen;
	uint8_t nsrc, src_i, ndst, dst_i;
	uint64_t src_lba[SCSI_ROD_RANGES];
	uint32_t src_n[SCSI_ROD_RANGES];
	uint64_t src_off, dst_off; /* blocks done in the current source and destination range */
	uint64_t rod_left;	   /* blocks of the token still to copy */
	uint32_t dst_list;	   /* offset of the range descriptors in the parameter data */
};

_Static_assert(sizeof(struct scsi_priv) <= sizeof(((struct scsi_cmd *)0)->internal),
	       "scsi_cmd.internal too small");

static inline struct scsi_priv *scsi_priv(struct scsi_cmd *cmd)
{
	return (struct scsi_priv *)(void *)cmd->internal;
}

/* The command whose embedded bs_io completed. */
static inline struct scsi_cmd *scsi_io_cmd(struct bs_io *io)
{
	return (struct scsi_cmd *)(void *)((uint8_t *)io - offsetof(struct scsi_priv, io) -
					   offsetof(struct scsi_cmd, internal));
}

/* Handler results. */
#define SCSI_DONE  0 /* status and sense set; the core calls done */
#define SCSI_ASYNC 1 /* the handler completes through scsi_cmd_finish() */

typedef int (*scsi_exec_fn)(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* Medium states (lu->mstate bits). */
#define SCSI_MS_LOADED	 0x01 /* the medium is present (not ejected, configured) */
#define SCSI_MS_SANITIZE 0x02 /* a sanitize operation is in progress */
#define SCSI_MS_SAN_FAIL 0x04 /* the last sanitize failed: medium access refused */
#define SCSI_MS_OFFLINE	 0x08 /* taken offline by the administrator */
#define SCSI_MS_NOT_READY                                                                          \
	0x10 /* the backend is not open yet (a networked one started                               \
		offline) */
#define SCSI_MS_HOLD 0x20 /* new writes wait (a snapshot is being taken, hold.c) */
#define SCSI_MS_BUSY 0x40 /* medium commands get NOT READY, OPERATION IN PROGRESS (04/07): a
			     rollback runs (hold.c) */

/* Flags of a dispatch entry. */
#define SCSI_F_ABSENT_OK   0x01 /* runs on an absent LUN (lu == NULL) */
#define SCSI_F_NO_UA	   0x02 /* does not report or clear unit attentions */
#define SCSI_F_RESV_OK	   0x04 /* allowed while another nexus holds a RESERVE(6) */
#define SCSI_F_MEDIUM	   0x08 /* needs the medium (NOT READY 3A/00 without) */
#define SCSI_F_WRITE	   0x10 /* modifies the medium (DATA PROTECT 27/xx when protected) */
#define SCSI_F_PR_ALLOW	   0x20 /* never conflicts with a persistent reservation (or the
				   handler checks itself) */
#define SCSI_F_PR_READ	   0x40 /* conflicts only with exclusive-access reservations */
#define SCSI_F_SANITIZE_OK 0x80 /* runs while a sanitize is in progress */
#define SCSI_F_THIN	   0x100 /* exists only on LUs with LBPME (thin provisioning) */
/* ALUA (SPC-4 5.15.2.4): the target port asymmetric access states a command runs in besides
 * the active ones. Without any of these it gets NOT READY in standby, unavailable, offline
 * and transitioning. */
#define SCSI_F_ALUA_ANY	   0x200 /* every state (INQUIRY, REPORT LUNS, REPORT TARGET PORT
				    GROUPS, REQUEST SENSE) */
#define SCSI_F_ALUA_UNAV   0x400 /* unavailable and standby (SET TARGET PORT GROUPS) */
#define SCSI_F_ALUA_STBY   0x800 /* standby (MODE SENSE/SELECT, PERSISTENT RESERVE IN/OUT,
				    READ CAPACITY) */
#define SCSI_F_ALUA_ONLY   0x1000 /* exists only on maps with ALUA */
#define SCSI_F_ALUA_EXPL   0x2000 /* exists only on maps with explicit ALUA */
#define SCSI_F_RESV_PROBE                                                                          \
	0x4000 /* RESERVE: passes an SPC-2 reservation held through another                        \
		  gateway (SCSI_RESV_REMOTE): the shared store decides */

struct scsi_op {
	scsi_exec_fn fn;
	const char *name;
	uint8_t cdb_len;
	uint16_t flags;
	uint16_t sa;	   /* service action, if this entry is in a service-action table */
	uint8_t usage[16]; /* CDB usage data: bits the device server looks at */
	const struct scsi_op *sa_ops; /* non-NULL: dispatch further by service action */
	uint8_t n_sa;
};

/* cmd.c */
const struct scsi_op *scsi_op_table(void); /* 256 entries indexed by opcode */
const struct scsi_op *scsi_op_lookup(uint8_t opcode, uint16_t sa, bool *sa_valid);
/* Is the op there on this LU (SCSI_F_THIN) of this map (SCSI_F_ALUA_ONLY)? lu and map may be
 * NULL. */
bool scsi_op_on_lu(const struct scsi_op *op, const struct scsi_lu *lu,
		   const struct scsi_lun_map *map);
void scsi_cmd_finish(struct scsi_cmd *cmd);
uint64_t scsi_alloc_len(const uint8_t *cdb, unsigned off, unsigned width);
/* Copy len bytes of reply data, honouring the allocation length and data_in_max. */
void scsi_put_data(struct scsi_cmd *cmd, const void *data, uint32_t len, uint32_t alloc);

/* sense.c */
struct scsi_sense_info {
	uint8_t key, asc, ascq;
	bool info_valid;
	bool sks_valid;
	bool csi_valid;
	uint64_t info;
	uint32_t csi; /* COMMAND-SPECIFIC INFORMATION */
	uint8_t sks[3];
};
/* Build sense into out (SCSI_SENSE_MAX bytes); returns its length. */
uint8_t scsi_sense_build(uint8_t *out, bool desc, const struct scsi_sense_info *si);
/* CHECK CONDITION with the LU's preferred sense format. */
void scsi_fail(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);
void scsi_fail_si(struct scsi_cmd *cmd, const struct scsi_sense_info *si);
void scsi_fail_info(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq, uint64_t info);
/* ILLEGAL REQUEST 24/00 pointing at CDB byte/bit (bit < 0: no bit pointer). */
void scsi_fail_cdb(struct scsi_cmd *cmd, unsigned byte, int bit);
/* ILLEGAL REQUEST 26/00 pointing into the parameter list. */
void scsi_fail_param(struct scsi_cmd *cmd, unsigned byte, int bit);
/* Sense for a backend error (-errno) on a read or a write. */
void scsi_fail_errno(struct scsi_cmd *cmd, int err, bool write);

/* lu.c */
struct scsi_itl *scsi_itl_attach(struct scsi_nexus *nx, uint32_t lun, struct scsi_lu *lu);
/* Queue a UA for one nexus; lu->lock held. */
void scsi_ua_add_locked(struct scsi_itl *itl, uint8_t asc, uint8_t ascq);
/* Pop the oldest pending UA (under the LU lock); false if none. */
bool scsi_ua_take(struct scsi_itl *itl, uint8_t *asc, uint8_t *ascq);
/* Queue a UA for every nexus on lu except `except`. */
void scsi_ua_post_others(struct scsi_lu *lu, const struct scsi_nexus *except, uint8_t asc,
			 uint8_t ascq);
bool scsi_lu_d_sense(const struct scsi_lu *lu);

/* spc.c */
int scsi_spc_inquiry(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_report_luns(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_test_unit_ready(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_request_sense(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_start_stop(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_prevent_allow(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_reserve(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_release(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_report_opcodes(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_report_tmf(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* lu->resv_holder of an LU whose SPC-2 reservation is held through another gateway (the
 * shared store): no nexus of this process, never dereferenced (the address of a constant,
 * only compared). */
extern const char scsi_resv_remote_tag;
#define SCSI_RESV_REMOTE ((struct scsi_nexus *)(uintptr_t)&scsi_resv_remote_tag)

/* A persistent reservation store other than the file store (the shared one: src/ha/ha_pr.c). */
struct scsi_pr_store_ops {
	const char *name;
	/* PERSISTENT RESERVE OUT of a checked request from cmd->nexus: SCSI_DONE with the status
	 * set, or SCSI_ASYNC (then scsi_cmd_finish() later, on the command's thread). */
	int (*out)(struct scsi_lu *lu, struct scsi_cmd *cmd, const struct pr_out *req);
	/* A LOGICAL UNIT RESET here: tell the other gateways (their nexuses get 29/03 too) and
	 * drop the shared SPC-2 reservation. */
	void (*reset)(struct scsi_lu *lu);
	/* RESERVE (reserve true) or RELEASE (6)/(10) that spc.c leaves to the store (it shares
	 * the SPC-2 reservation): SCSI_DONE with the status set, or SCSI_ASYNC. NULL: the LU
	 * keeps it in resv_holder alone. */
	int (*spc2)(struct scsi_lu *lu, struct scsi_cmd *cmd, bool reserve);
	/* I_T nexus loss of the SPC-2 reservation's holder nx (it was lu->resv_holder); on the
	 * nexus's thread, lu->lock not held. With w (may be NULL), returns 1 when w->done will
	 * run once the store has it, else 0. */
	int (*spc2_lost)(struct scsi_lu *lu, const struct scsi_nexus *nx,
			 const struct scsi_lost_wait *w);
	void (*free)(struct scsi_lu *lu);
};

/* pr_cmd.c: PERSISTENT RESERVE IN/OUT and what the rest of the core asks of them. */
/* After the LU's device is open: connect the configured store (cfg->pr_store). */
int scsi_pr_lu_attach(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err,
		      size_t errlen);
/* Make next the LU's state (next gets the old one), refresh every nexus's view and queue the
 * unit attentions of fx for the nexuses of this LU they name; lu->lock held. */
void scsi_pr_adopt_locked(struct scsi_lu *lu, struct pr_state *next, const struct pr_effects *fx);
/* Status and sense of a PERSISTENT RESERVE OUT result. */
void scsi_pr_set_result(struct scsi_cmd *cmd, enum pr_result rc);
int scsi_spc_pr_in(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_pr_out(struct scsi_cmd *cmd, struct scsi_lu *lu);
/* LU life: restore APTPL state (-errno and a message when the file is unusable); free. */
int scsi_pr_lu_init(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen);
void scsi_pr_lu_free(struct scsi_lu *lu);
/* Set a new I_T_L nexus's view of the reservation; lu->lock held. */
void scsi_pr_itl_attach_locked(struct scsi_lu *lu, struct scsi_itl *itl);
/* Would this command conflict with the persistent reservation? (lock-free) */
bool scsi_pr_conflict(struct scsi_cmd *cmd, struct scsi_lu *lu, bool read_class);
/* RESERVE/RELEASE(6)/(10) with persistent reservations present (SPC-4 5.12.3, CRH = 1):
 * returns true with the outcome set when PR state decides it. */
bool scsi_pr_spc2(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* sanitize.c */
int scsi_sbc_sanitize(struct scsi_cmd *cmd, struct scsi_lu *lu);
/* Progress of the running sanitize, 0..65535 (for REQUEST SENSE); false if none. */
bool scsi_sanitize_progress(struct scsi_lu *lu, uint16_t *progress);
/* Detach a waiting SANITIZE command (scsi_cmd_abort). */
bool scsi_sanitize_abort(struct scsi_cmd *cmd);
/* The thread is going away: stop its sanitize operations (they fail). */
void scsi_sanitize_thread_stop(struct scsi_thread *t);
/* spc.c: a START STOP UNIT waiting for other nexuses' prevention to go ends (TASK ABORTED) */
bool scsi_eject_abort(struct scsi_cmd *cmd);
void scsi_eject_thread_stop(struct scsi_thread *t);

/* hold.c: a write met SCSI_MS_HOLD (precheck set p->held): it waits on its thread and runs
 * again (scsi_cmd_rerun) once the hold ends. Always completes the command eventually. */
void scsi_hold_park(struct scsi_cmd *cmd, const struct scsi_op *op);
bool scsi_hold_abort(struct scsi_cmd *cmd);
void scsi_hold_thread_stop(struct scsi_thread *t);
/* cmd.c: run a parked command from its checks on */
void scsi_cmd_rerun(struct scsi_cmd *cmd, const struct scsi_op *op);

/* mode.c */
int scsi_spc_mode_sense(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_mode_select(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* sbc.c */
int scsi_sbc_read_capacity10(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_read_capacity16(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_read(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_write(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_verify(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_sync_cache(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_prefetch(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_get_lba_status(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_read_defect_data(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* sbc_thin.c */
int scsi_sbc_unmap(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_write_same(struct scsi_cmd *cmd, struct scsi_lu *lu);
/* Has the LU the Logical Block Provisioning log page and thresholds (thin, and its backend
 * tells how full its store is)? */
bool scsi_thin_lbp_log(const struct scsi_lu *lu);
/* THRESHOLD EXPONENT: a threshold set is 2^this logical blocks (1 MiB); 0 without the log
 * page. */
uint8_t scsi_thin_exponent(const struct scsi_lu *lu);
/* A nexus attaches to the LU (lu->lock held): told the soft threshold is reached if it is. */
void scsi_thin_itl_attach_locked(struct scsi_lu *lu, struct scsi_itl *itl);

/* logsense.c */
int scsi_spc_log_sense(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* sbc_atomic.c: the commands that hold their range exclusively */
int scsi_sbc_compare_and_write(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_orwrite(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_write_atomic(struct scsi_cmd *cmd, struct scsi_lu *lu);
/* Most blocks one WRITE ATOMIC may carry (MAXIMUM ATOMIC TRANSFER LENGTH). */
uint32_t scsi_atomic_max_blocks(const struct scsi_lu *lu);

/* xcopy.c */
int scsi_spc_extended_copy(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_copy_status(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_copy_op_params(struct scsi_cmd *cmd, struct scsi_lu *lu);

/* rod.c: POPULATE TOKEN, WRITE USING TOKEN, RECEIVE ROD TOKEN INFORMATION */
int scsi_sbc_populate_token(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_sbc_write_using_token(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_rod_token_info(struct scsi_cmd *cmd, struct scsi_lu *lu);
/* The third-party copy VPD page (0x8F) into d (at least 512 bytes); its length. */
uint32_t scsi_rod_vpd(const struct scsi_lu *lu, uint8_t *d);
/* Blocks [lba, lba + n) of lu are about to change: the tokens that represent any of them are
 * cancelled. Only called while lu->rod_live is not 0. */
void scsi_rod_written(struct scsi_lu *lu, uint64_t lba, uint64_t n);
/* A logical unit reset, a sanitize: every token of lu is revoked. */
void scsi_rod_lu_reset(struct scsi_lu *lu);
void scsi_rod_lu_free(struct scsi_lu *lu);
/* A copy (EXTENDED COPY, WRITE USING TOKEN) asked to stop: true if cmd is one (it then ends
 * with TASK ABORTED after its chunk in flight). */
bool scsi_copy_abort(struct scsi_cmd *cmd);

/* alua.c */
/* Does a command with these op flags run in this asymmetric access state? If not, *ascq is the
 * ASCQ of the NOT READY 04/xx it gets (0x0a transitioning, 0x0b standby, 0x0c unavailable,
 * 0x12 offline). */
bool scsi_alua_allows(uint8_t state, uint16_t op_flags, uint8_t *ascq);
/* The precheck step: false with NOT READY set when the nexus's target port is in a state that
 * refuses the command. Lock-free: one atomic load without ALUA. */
bool scsi_alua_check(struct scsi_cmd *cmd, struct scsi_lu *lu, uint16_t op_flags);
/* Does a command of this class read or write the medium (what starts an implicit failover)? */
bool scsi_alua_medium_io(uint16_t op_flags);
/* INQUIRY TPGS field (byte 5 bits 5:4): 0, 01b implicit, 11b implicit and explicit. */
uint8_t scsi_alua_tpgs(const struct scsi_lun_map *map);
/* The nexus's TARGET PORT GROUP for VPD 0x83; false if none. */
bool scsi_alua_port_group(const struct scsi_lun_map *map, uint16_t rtpi, uint16_t *group);
int scsi_spc_report_tpgs(struct scsi_cmd *cmd, struct scsi_lu *lu);
int scsi_spc_set_tpgs(struct scsi_cmd *cmd, struct scsi_lu *lu);
void scsi_alua_map_free(struct scsi_lun_map *map);

/* abort.c: aborting other nexuses' tasks (see scsi_abort_fn) */
/* Abort the tasks that the I_T nexuses ports[0..n) have on lu, on every thread of the process.
 * done(arg, all) runs once all of them have left the SCSI layer: posted to reply when reply is
 * not NULL, else on the thread that finishes last (maybe before this returns); all is false
 * when some thread could not be asked (out of memory: its tasks were not aborted). lu is only
 * compared with the tasks' LUs, and its index read (the threads of its target context), nothing
 * else (no reference is taken: a store's watch callback may start one while the LU is being
 * freed; the LU keeps its index until its store is gone). 0, or -ENOMEM (nothing was started,
 * done never runs). */
int scsi_abort_start(struct scsi_lu *lu, const struct pr_ua *ports, size_t n, struct ev_loop *reply,
		     void (*done)(void *arg, bool all), void *arg);
void scsi_abort_thread_add(struct scsi_lu_index *ix, struct scsi_thread *t);
void scsi_abort_thread_del(struct scsi_thread *t);

/* lu_index.c (struct scsi_lu_index: the LUs and the threads of a target context) */
struct scsi_lu_index {
	atomic_int refs; /* the creator's, one per listed LU and one per listed thread */
	uint8_t id[16];	 /* random: the copy manager's identity in its ROD tokens (rod.c) */
	pthread_mutex_t lock;
	struct list_head lus;	      /* scsi_lu.index_link */
	pthread_mutex_t threads_lock; /* the thread list, and each listed thread's abort hook */
	struct list_head threads;     /* scsi_thread.abort_link (abort.c) */
};
void scsi_lu_index_get(struct scsi_lu_index *ix);
void scsi_lu_index_add(struct scsi_lu_index *ix, struct scsi_lu *lu);
/* Off the list; the LU keeps its reference until it is freed (scsi_lu_put). */
void scsi_lu_index_del(struct scsi_lu_index *ix, struct scsi_lu *lu);
/* The LU whose 16-byte NAA designator is desig, with a reference; NULL if none. */
struct scsi_lu *scsi_lu_index_find(struct scsi_lu_index *ix, const uint8_t *desig, uint8_t len);

/* slow.c: slow-path contexts (NULL on failure; sets scsi_priv(cmd)->slow) */
struct scsi_slow *scsi_slow_get(struct scsi_cmd *cmd);
void scsi_slow_put(struct scsi_cmd *cmd);
uint8_t *scsi_slow_bounce(struct scsi_cmd *cmd);
void scsi_slow_thread_init(struct scsi_thread *t);
void scsi_slow_thread_fini(struct scsi_thread *t);

/* Shared by sbc.c and sbc_thin.c. */
/* Check lba/nblocks against capacity; sets 21/00 and returns false if out of range. */
bool scsi_lba_ok(struct scsi_cmd *cmd, struct scsi_lu *lu, uint64_t lba, uint64_t nblocks);
/* Submit p->io on cmd's thread with the given completion, through the LU's range guard
 * (the completion runs after the range is given back; a command holding its range
 * exclusively bypasses the guard). off and len are bytes. */
void scsi_submit_io(struct scsi_cmd *cmd, uint8_t op, uint64_t off, uint64_t len, uint8_t *buf,
		    uint8_t flags, bs_io_cb cb);
/* The same against another LU of the process (EXTENDED COPY). */
void scsi_submit_io_lu(struct scsi_cmd *cmd, struct scsi_lu *lu, uint8_t op, uint64_t off,
		       uint64_t len, uint8_t *buf, uint8_t flags, bs_io_cb cb);
/* Synchronous I/O (t = NULL): for the slow-path commands under slow_lock. */
int scsi_sync_io(struct scsi_lu *lu, uint8_t op, uint64_t off, uint64_t len, uint8_t *buf,
		 uint8_t flags);
/* Common completion for single-step data commands. */
void scsi_io_done_write(struct bs_io *io);
void scsi_io_done_simple(struct bs_io *io);

#endif
