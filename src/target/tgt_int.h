/* Target-internal objects: worker, session, connection, task. */
#ifndef IX_TARGET_TGT_INT_H
#define IX_TARGET_TGT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "scsi/scsi.h"
#include "dm/conn.h"
#include "session/login.h"
#include "target/config.h"
#include "target/target.h"
#include "target/tgt_qos.h"
#include "util/list.h"

#define TGT_MAX_R2T 16
#define TGT_IMMEDIATE_EXTRA 16
#define TGT_MAX_IO (64u * 1024 * 1024) /* largest EDTL served */
#define TGT_ITT_HASH 256
#define TGT_BUF_CACHE 32                   /* cached task buffers per size class ... */
#define TGT_BUF_CACHE_BYTES (32u << 20)    /* ... beyond 4 of them, at most this many bytes */

/* At most one message per second about the same thing; the rest are counted. */
struct tgt_ratelimit {
	uint64_t last_ms;
	uint64_t suppressed;
};
bool tgt_ratelimit_ok(struct tgt_ratelimit *rl, uint64_t now_ms, uint64_t *suppressed);

struct tgt_worker {
	struct ix_target *tgt;
	int id;
	pthread_t thread;
	struct ev_loop *loop;
	struct scsi_thread *sthread;
	int nconns;
	struct list_head sessions;      /* live sessions on this worker (owned by its thread) */
	struct list_head conns;         /* every connection on this worker, logged in or not */
	/* connections not yet in full feature phase, least recently active first: "fresh" ones
	   have not sent a whole Login PDU yet and are evicted first when the worker's share of
	   global.max_pending_logins is used up */
	struct list_head login_fresh, login_active;
	uint32_t npending;
	struct tgt_ratelimit evict_rl;
	uint64_t next_hold_id;          /* tags logins held for an old session (tgt_conn.held) */
	struct ix_login_stats logins;   /* owned by this worker's thread */
	/* statistics (tgt_stats.c): plain counters written by this worker's thread only */
	struct list_head lstats;        /* struct tgt_lstat, one per (target, LUN, initiator) */
	struct list_head tstats;        /* struct tgt_tstat, one per target name ("" = none) */
	uint32_t nlstats, ntstats;
	bool slots_warned; /* the "statistics slots in use" warning was logged */
	struct tgt_qos_worker qos; /* commands waiting for their QoS start time (tgt_qos.c) */
	struct dm_rx_stage stage;  /* the receive staging buffer its connections share */
	/* giving back what busy connections pooled, once they are quiet for
	   global.idle_release_ms (tgt_task.c): runs only while some connection holds more than
	   an idle one (tgt_conn.trim_due) */
	struct ev_timer trim_timer;
	uint64_t trims; /* connections that gave memory back */
};

/* One configured target as served: its settings and LUN map. Counted: one reference while the
 * configuration names it, one per session (or login about to become one) on it. A reload that
 * removes it marks it removed, asks its sessions to log out and drops the configuration's
 * reference; the LUs close when the last session has ended. */
struct tgt_node {
	struct cfg_target *cfg;         /* in the newest configuration that names it (under
					   ix_target.lock; fixed once removed) */
	struct scsi_lun_map *map;
	atomic_int refs;
	atomic_uint redirect_next;      /* redirect.addresses: the next one (round-robin over
					   the logins of every worker) */
	bool removed;                   /* under ix_target.lock */
	atomic_bool qos_on;             /* any QoS limit set: the data path's one test */
	struct tgt_qos_node *qos;       /* the limits (tgt_qos.h) */
};

/* One configuration as loaded. A reload keeps the old generations (in ix_target.old_gens)
 * until the target is freed: connections accepted under them still read them. */
struct tgt_cfg_gen {
	struct ix_config *cfg;
};

struct tgt_task;

/* Where a received PDU stands in CmdSN order (RFC 7143 3.2.2.1, 4.2.2.1), judged once in the
 * header phase for every initiator PDU that carries a CmdSN (cmdsn_check in tgt_conn.c). What follows
 * is the requester's: a SCSI command ahead of a hole waits in tgt_conn.order_q until the hole
 * is filled (tgt_scsi.c), a non-SCSI request is handled at once and advances ExpCmdSN when
 * it is the one expected (tgt_conn.c). */
#define TGT_USED_AHEAD_MAX 32

enum tgt_cmdsn {
	TGT_CMDSN_NONE = 0,     /* the PDU carries no CmdSN (Data-Out, SNACK, ...) */
	TGT_CMDSN_IMMEDIATE,    /* I=1: delivered at once, ExpCmdSN unchanged */
	TGT_CMDSN_IN_ORDER,     /* CmdSN == ExpCmdSN */
	TGT_CMDSN_AHEAD,        /* in (ExpCmdSN, MaxCmdSN]: behind a hole */
	TGT_CMDSN_DROP,         /* outside [ExpCmdSN, MaxCmdSN]: dropped silently */
};

struct tgt_session {
	struct ix_target *tgt;
	struct tgt_node *node;          /* NULL for discovery */
	enum iscsi_session_type type;
	char initiator[ISCSI_NAME_MAX];
	char target[ISCSI_NAME_MAX];
	uint8_t isid[6];
	uint16_t tsih;
	uint16_t tpgt;
	struct iscsi_sess_params params;
	uint32_t exp_cmdsn;
	uint32_t max_cmdsn;
	/* CmdSNs past ExpCmdSN already used up by requests that did not wait in the order queue
	   (a non-SCSI request behind a hole, a rejected SCSI command): ExpCmdSN steps over them
	   when it gets there (tgt_order_release) */
	uint32_t used_ahead[TGT_USED_AHEAD_MAX];
	uint32_t nused_ahead;
	uint32_t depth;
	uint32_t outstanding;           /* non-immediate tasks past ExpCmdSN, not yet answered */
	struct scsi_nexus *nexus;
	struct tgt_conn *conn;          /* one connection per session (MaxConnections=1) */
	struct list_head reg_link;      /* registry */
	struct tgt_worker *worker;
	struct list_head wlink;         /* worker's list */
	bool registered;
	/* under ix_target.lock: the connection has closed and the session waits for its tasks
	   to leave the backend; it stays in the registry (so that a login with its ISID waits
	   for it) until the connection is released */
	bool draining;
	/* a new session whose login is held (ix_target.held_logins, under its lock) until
	   wait_for, an old session with the same ISID, has drained; wait_for is compared,
	   never dereferenced */
	struct list_head wait_link;
	const struct tgt_session *wait_for;
	uint16_t wait_tsih;             /* wait_for's TSIH (for the log) */
	uint64_t hold_id;               /* tgt_worker.next_hold_id when held (owner thread) */
	/* statistics slots in worker's tables, found at the first use (tgt_stats.c) */
	struct tgt_tstat *tstat;
	struct tgt_lstat *lstat[SCSI_MAX_LUNS];
	/* the initiator's QoS entry of node (NULL: none), looked up again when qos_ini_gen is not
	   the node's ini_gen + 1 (tgt_qos.c) */
	struct tgt_qos_ini *qos_ini;
	unsigned qos_ini_gen;
};

enum tgt_task_state {
	TASK_FREE = 0,
	TASK_DATA_OUT,      /* collecting write data */
	TASK_WAIT_ORDER,    /* waiting for CmdSN order */
	TASK_QOS_WAIT,      /* waiting in the worker's QoS queue for its start time */
	TASK_EXEC,          /* in the SCSI layer */
	TASK_DONE,          /* response queued */
};

struct tgt_r2t {
	uint32_t ttt, offset, len, got, exp_datasn;
	bool active;
};

struct tgt_task {
	struct scsi_cmd sc;
	struct tgt_conn *tc;
	enum tgt_task_state state;
	uint32_t itt, cmdsn, edtl;
	uint64_t lun;
	bool immediate, read, write;
	bool aborted;
	/* aborted by another I_T nexus (PREEMPT AND ABORT, scsi_abort_fn): answered TASK ABORTED
	   (TAS = 1) rather than silently; tas_pending: asked while one of its PDUs was being
	   received, done once that PDU is in */
	bool tas, tas_pending;
	struct scsi_abort *abort_req[2]; /* requests waiting for this task to end (held) */
	bool discard;                   /* failed before execution: swallow remaining data */
	uint8_t fail_key, fail_asc, fail_ascq; /* the sense it is answered with */
	uint64_t start_ns;              /* the worker loop's clock when the command arrived */
	uint8_t cdb[ISCSI_MAX_CDB_LEN];
	uint16_t cdb_len;
	uint8_t *buf;
	uint32_t buf_cap;
	/* write data */
	uint32_t data_got;
	uint32_t unsol_len;             /* immediate + unsolicited data the initiator may send */
	uint32_t unsol_got;
	uint32_t unsol_exp_datasn;
	bool unsol_done;
	uint32_t r2t_next;              /* next offset to solicit */
	uint32_t r2tsn;
	struct tgt_r2t r2t[TGT_MAX_R2T];
	int r2t_active;
	/* data-in */
	uint32_t datasn;
	int tx_pending;                 /* PDUs in flight that reference buf */
	struct tgt_tmf *tmf_wait;       /* a TMF waiting for this task to finish */
	bool counted;                   /* in the session's outstanding count */
	uint32_t unsol_total;           /* immediate + unsolicited bytes the initiator sends */
	uint8_t rsp_data[2 + SCSI_SENSE_MAX];
	uint64_t qos_start, qos_since;  /* QoS: when it may run, since when it waits */
	bool qos_passed;                /* past its QoS limits (released or not limited) */
	bool qos_queued;                /* on its worker's QoS queue (qlink) */
	struct list_head link;          /* conn's active list or order queue */
	struct tgt_task *hnext;         /* ITT hash chain */
	/* zero-copy Data-In (sc.data_in points into a RAM LU): the PDUs not yet sent, and the
	   task's place on tgt_conn.zc_tasks while there are any */
	struct list_head zc_pdus;
	struct list_head zc_link;
	struct list_head qlink;         /* the worker's QoS queue (TASK_QOS_WAIT) */
};

#define TGT_TASK_CHUNK 8
struct tgt_task_chunk {
	struct tgt_task_chunk *next;
	uint32_t n;     /* slots in use of t[] (the last chunk up to task_cap may have fewer) */
	uint32_t nfree; /* tgt_task_trim's count */
	struct tgt_task t[TGT_TASK_CHUNK];
};

/* A TMF whose response waits for aborted tasks still inside the SCSI layer. */
struct tgt_tmf {
	uint32_t itt;
	uint8_t response;
	bool cold_reset;                /* drop the session after answering */
	int waiting;
};

struct tgt_conn {
	struct iscsi_conn *conn;
	struct tgt_worker *worker;
	struct list_head wlink;         /* worker->conns */
	struct ix_target *tgt;
	struct tgt_session *sess;
	struct login_acceptor *login;   /* during login only */
	/* the final Login Response, held until an old session with the same ISID has drained
	   (RFC 7143 6.3.5): the new session (not registered yet) and what to answer */
	struct tgt_session *held;
	struct iscsi_hdr held_rsp;
	const char *held_text;          /* in login->out_buf */
	uint32_t held_text_len;
	uint64_t held_since_ms;
	const struct cfg_portal *portal;
	struct tgt_cfg_gen *gen;        /* config generation seen at accept */
	struct neg_prefs prefs;         /* the config's, in target (declare-only) style */
	uint32_t statsn;
	bool logged_out;                /* close after the logout response is sent */
	/* DM_CAP_PEER_CLOSES: the final response went out, the initiator is to close; closed by
	   the target itself after TGT_PEER_CLOSE_MS */
	struct ev_timer close_timer;
	/* tasks: allocated on demand by TGT_TASK_CHUNK (an idle session holds none) up to
	   task_cap, the CmdSN window plus the immediate ones; given back but the first chunk
	   once no command has come for global.idle_release_ms (tgt_conn_trim) */
	struct tgt_task_chunk *task_chunks;
	uint32_t ntasks, task_cap;
	struct list_head free_tasks;
	uint64_t last_cmd_ns;           /* the loop's clock at the last SCSI command */
	bool trim_due;                  /* holds pooled memory to give back when quiet */
	struct list_head active;        /* tasks with ITT in use */
	struct list_head order_q;       /* CmdSN-ordered waiting tasks */
	struct list_head zc_tasks;      /* tasks with zero-copy Data-In still queued */
	struct tgt_task *itt_hash[TGT_ITT_HASH];
	uint32_t imm_in_use;
	uint32_t next_ttt;
	uint16_t cid;
	/* header-phase verdict for the PDU being received */
	enum tgt_cmdsn rx_cmdsn;        /* its CmdSN, as judged in rx_header */
	int rx_verdict;
	uint8_t rx_reject_reason;
	struct tgt_task *rx_task;
	/* buffer cache: power-of-two classes from 4 KiB to TGT_MAX_IO, up to TGT_BUF_CACHE
	   buffers a class (fewer for big classes: TGT_BUF_CACHE_BYTES), so a queue of large
	   writes reuses its buffers (and an RDMA transport its registrations) instead of
	   allocating and registering per I/O */
	uint8_t *buf_cache[16][TGT_BUF_CACHE];
	uint64_t buf_bytes;             /* task buffers owned (in use, cached, on idle slots) */
	uint64_t unread_bytes;          /* copied control responses not yet sent */
	uint32_t unread_pdus;
	/* text exchange */
	char *text_rsp;                 /* pending SendTargets answer being continued */
	uint32_t text_rsp_len, text_rsp_off, text_ttt, text_itt;
	char *text_req;                 /* accumulated C=1 text request */
	uint32_t text_req_len;
	/* a reload removed the target: Async logout request sent, then the drop */
	struct ev_timer logout_timer;
	bool logout_dropping; /* the initiator did not log out in time: closing */
	bool logout_admin;    /* the logout was requested through the management API */
	/* The Logout Response, held until the shared stores have stored the SPC-2 reservations
	   the session's end released (logout_waits of them left; the connection referenced) */
	struct iscsi_hdr logout_rsp;
	unsigned logout_waits;
	/* keepalive */
	struct ev_timer login_timer;
	struct ev_timer nop_timer;
	uint32_t nop_ttt;
	bool nop_outstanding;
	uint64_t last_rx_ms;
	/* limits */
	struct list_head plink;         /* worker's login_fresh / login_active list */
	bool pending, login_pdu_seen;
	uint64_t login_since_ms;        /* accepted, or its last whole Login PDU */
	struct ev_timer idle_timer;     /* discovery sessions: global.discovery_idle_timeout_ms */
};

struct ix_target {
	/* test configurations only: the wrapper (dm.h) of every connection, one per transport
	   (dm_transport(i)) */
	const struct dm_wrapper *wrap;
	void *fault[DM_MAX_TRANSPORTS];
	atomic_uint nconns_open;        /* accepted and not yet released (max_connections) */
	atomic_uint accept_in_transit;  /* posted to a worker, not yet picked up */
	/* global.max_pending_logins: connections accepted (in transit to a worker included) and
	   not yet in full feature phase nor closed. At the limit the main thread stops taking
	   connections from the listeners (the kernel's listen backlog holds them) until there is
	   room again (the login gate, tgt_login.c) */
	atomic_uint npending_logins;
	bool login_gate;                /* main thread's: listeners held */
	struct ev_timer login_gate_timer;
	uint32_t login_gate_ticks;
	struct tgt_ratelimit login_gate_rl;
	struct tgt_ratelimit accept_rl; /* main thread's */
	struct tgt_cfg_gen *gen;        /* current generation */
	struct tgt_node **nodes;        /* for gen */
	size_t nnodes;
	pthread_mutex_t lock;           /* registry, gen, nodes, tsih */
	struct list_head sessions;      /* registered sessions, draining ones included */
	uint32_t nsessions;             /* registered and not draining */
	struct list_head held_logins;   /* tgt_session.wait_link */
	uint16_t next_tsih;
	struct ev_loop *main_loop;
	struct tgt_worker *workers;
	int nworkers;
	int next_worker;
	struct listener_ctx **lctx;     /* one per portal being served (main thread) */
	size_t nlctx;
	/* earlier configuration generations: connections and sessions may still point into them,
	   so they live until the target is freed */
	struct tgt_cfg_gen **old_gens;
	size_t nold_gens;
	/* LUs a reload took out of a LUN map, each released once every worker has turned */
	struct tgt_lu_retire **lu_retires;
	size_t nlu_retires;
	struct scsi_lu_index *luidx; /* every LU of this context, by NAA (EXTENDED COPY) */
	struct ha_ctx *ha;	     /* high availability (src/ha/): ownership, ALUA, shared PR */
	struct list_head snap_offline; /* LUs offline for another gateway's rollback (tgt_snap.c,
					  main thread) */
	struct tgt_isns *isns;       /* iSNS registration (tgt_isns.h), NULL when off */
	struct ev_timer space_timer; /* samples how full the LUs' stores are (main thread) */
};

/* How often the main thread samples how full each LU's backing store is (thin provisioning
 * soft threshold, the space metrics): docs/configuration.md "thin_threshold". */
#define TGT_SPACE_POLL_MS 1000

/* target.c */
struct tgt_cfg_gen *tgt_gen_current(struct ix_target *t);
/* The node configured under name, with a reference (NULL if none); tgt_node_put() drops it. */
struct tgt_node *tgt_node_get(struct ix_target *t, const char *name);
void tgt_node_put(struct tgt_node *n);
/* Register a new session: session reinstatement (RFC 7143 6.3.5) and the session limit.
 * -EBUSY at the limit, -ENOENT when a reload removed the session's target meanwhile,
 * -EINPROGRESS when a session with the same ISID, initiator, target and TPGT is still
 * registered: it is told to close (unless already draining) and s waits on
 * ix_target.held_logins until it has been released; then tgt_conn_login_resume() runs on
 * s->worker's thread (s->hold_id identifies the wait) and calls this again. */
int tgt_session_register(struct ix_target *t, struct tgt_session *s);
/* The session's connection closed: it no longer counts against session limits, but stays
 * registered until its tasks are out of the backend. */
void tgt_session_drain(struct ix_target *t, struct tgt_session *s);
/* The session's connection was released (every task finished): it leaves the registry, and
 * logins held for it are resumed. */
void tgt_session_unregister(struct ix_target *t, struct tgt_session *s);
/* A held login gives up waiting (timeout, its connection closed): no resume will be posted
 * for s after this returns. */
void tgt_session_unhold(struct ix_target *t, struct tgt_session *s);
uint32_t tgt_cfg_depth(const struct ix_config *cfg);
/* The CmdSN window (and FirstBurstLength, when fbl != NULL) that fit a transport's fixed
 * receive buffers (tgt_conn.c). */
uint32_t tgt_recv_budget(const struct dm_ops *dm, uint32_t depth, uint32_t *fbl);
/* Build a node (its LUN map, one reference) for ct; one LU of ct. -errno with a message in
 * err. */
int tgt_node_new(struct ix_target *t, struct cfg_target *ct, struct tgt_node **out, char *err,
		 size_t errlen);
int tgt_lu_new(struct ix_target *t, struct cfg_target *ct, struct cfg_lun *cl,
	       struct scsi_lu **out, char *err, size_t errlen);
/* LUN masking (tgt_acl.c). The view (scsi_nexus_set_view) of initiator on ct: 1 with view
 * filled when it is masked (or has no ACL entry: an empty view), 0 when it sees every LUN. */
int tgt_acl_view(const struct cfg_target *ct, const char *initiator, uint16_t *view);
/* At login, on the session's thread: install the view of s->initiator on ct. 0/1, -ENOMEM. */
int tgt_session_set_view(struct tgt_session *s, const struct cfg_target *ct);
/* Under t->lock after a reload: every live session gets the view of the new configuration. */
void tgt_acl_views_reload(struct ix_target *t);
/* On w's thread: s if it is still a live session of w with that TSIH and a connection (a
 * message about s may arrive after it ended), else NULL. s is compared, not dereferenced. */
struct tgt_session *tgt_worker_session(struct tgt_worker *w, const struct tgt_session *s,
				       uint16_t tsih);

/* A portal's listeners (TCP and/or iSER, as it says), on the main loop. -errno with a message
 * in err. Connections already accepted through a closed portal go on. */
int tgt_portal_listen(struct ix_target *t, const struct cfg_portal *p, struct listener_ctx **out,
		      char *err, size_t errlen);
void tgt_portal_close(struct listener_ctx *lc);
const struct cfg_portal *tgt_portal_cfg(const struct listener_ctx *lc);
void tgt_portal_set_cfg(struct listener_ctx *lc, const struct cfg_portal *p);
/* The ops a new connection of transport dm runs with (dm_conn_setup.as): the fault wrapper in
 * test configurations, else NULL. */
const struct dm_ops *tgt_conn_ops(const struct ix_target *t, const struct dm_ops *dm);

/* tgt_reload.c (ix_target_reload is in target.h) */
struct tgt_lu_retire;
/* Release what reloads kept for later (workers stopped). */
void tgt_reload_free(struct ix_target *t);

/* tgt_mgmt.c: ask every worker (management reads, never the data path). on_worker(w, part)
 * runs on each worker's thread with its own zeroed part of part_size bytes; then, on the main
 * loop, done(arg, parts, n) with the n parts one after the other (a worker that could not be
 * asked leaves its part zeroed); the parts are freed after done returns. 0 or -ENOMEM. */
int tgt_gather(struct ix_target *t, size_t part_size,
	       void (*on_worker)(struct tgt_worker *w, void *part),
	       void (*done)(void *arg, void *parts, int n), void *arg);
void tgt_login_stats_add(struct ix_login_stats *a, const struct ix_login_stats *b);

/* tgt_login.c: the login gate (main thread). After a connection was admitted: holds the
 * listeners while global.max_pending_logins connections are logging in. */
void tgt_login_gate_check(struct ix_target *t);
/* A connection counted in npending_logins left the count (any thread). */
void tgt_login_slot_free(struct ix_target *t);
/* On w's thread: close logins idle past global.login_grace_ms, oldest first. */
void tgt_login_evict_stale(struct tgt_worker *w);

/* tgt_conn.c */
/* On w's thread: make the connection request in (consumed) a connection of portal. */
void tgt_conn_accept(struct tgt_worker *w, struct dm_incoming *in, const struct cfg_portal *portal);
/* A connection counted in nconns_open is gone (or never came to be). */
void tgt_conn_gone(struct ix_target *t);
int tgt_send(struct tgt_conn *tc, struct iscsi_hdr *h, const void *data, uint32_t len);
/* Send a PDU without data, then close the connection once it is on the wire. */
int tgt_send_then_close(struct tgt_conn *tc, struct iscsi_hdr *h, const void *data,
			uint32_t len);
void tgt_stamp(struct tgt_conn *tc, struct iscsi_hdr *h, bool advance_statsn);
void tgt_send_reject(struct tgt_conn *tc, uint8_t reason, const uint8_t *bhs);
void tgt_session_update_window(struct tgt_session *s);
/* The session's target was removed: ask the initiator to log out within timeout_ms (Async
 * Message, RFC 7143 11.9.1), drop the connection if it does not. */
void tgt_conn_request_logout(struct tgt_conn *tc, uint32_t timeout_ms, bool admin);

/* tgt_login.c: before full feature phase */
/* The login policy's admission callback (ctx: the tgt_conn): target, ACL, credentials. */
int tgt_login_admit(void *ctx, const struct login_info *li, struct login_grant *g);
/* One Login Request PDU (the connection is not in full feature phase yet). */
void tgt_login_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen);
/* tgt_conn.login_timer: the login (or the hold of its final response) took too long. */
void tgt_login_timeout(struct ev_timer *t);
/* Before accepting a connection on w: evict a login if w's share of
 * global.max_pending_logins is used up (peer: "addr:port" of the newcomer). */
void tgt_login_make_room(struct tgt_worker *w, const struct ix_config *cfg, const char *peer);
/* tc no longer counts as a pending login. */
void tgt_login_pending_del(struct tgt_conn *tc);
void tgt_session_free(struct tgt_session *s);
/* On w's thread: the old session that login s waits for has been released (a message may
 * arrive after the held connection went away: s and hold_id are checked, not trusted). */
void tgt_conn_login_resume(struct tgt_worker *w, struct tgt_session *s, uint64_t hold_id);

/* tgt_scsi.c */
int tgt_scsi_cmd_header(struct tgt_conn *tc, const struct iscsi_hdr *h, const uint8_t *ahs,
			uint32_t ahs_len, struct dm_rx_place *place);
void tgt_scsi_cmd_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok);
int tgt_data_out_header(struct tgt_conn *tc, const struct iscsi_hdr *h, struct dm_rx_place *place);
void tgt_data_out_pdu(struct tgt_conn *tc, const struct iscsi_hdr *h, bool ddigest_ok);
void tgt_order_release(struct tgt_conn *tc);
/* Hand a task whose data is complete to the SCSI layer (QoS: after its wait). */
void tgt_task_exec(struct tgt_task *t);
/* A data buffer back to the connection's cache. */
void tgt_buf_put(struct tgt_conn *tc, uint8_t *b, uint32_t cap);
/* Free a buffer of the live connection (the transport may have it registered). */
void tgt_buf_release(struct tgt_conn *tc, uint8_t *b, uint32_t cap);
/* Free every buffer nothing uses (the cache and free task slots' buffers). */
void tgt_buf_trim(struct tgt_conn *tc);
/* Answer the task TASK ABORTED (the connection is up). */
void tgt_respond_aborted(struct tgt_task *task);
/* The request with CmdSN sn (checked in the window, not immediate) is done with without going
 * through the order queue: ExpCmdSN moves past it now or when it gets there, so the commands
 * behind it do not wait for a CmdSN that never comes again. */
void tgt_cmdsn_consume(struct tgt_conn *tc, uint32_t sn);

/* tgt_task.c: the task table and task management */
/* One more chunk of task slots on tc->free_tasks: 0, -ENOSPC (task_cap reached), -ENOMEM. */
int tgt_task_grow(struct tgt_conn *tc);
/* Free the chunks of task slots whose slots are all free, so that at least keep chunks stay
 * (a chunk with a slot in use always stays): the number of slots freed. */
uint32_t tgt_task_trim(struct tgt_conn *tc, uint32_t keep);
/* Giving memory back after a quiet period (global.idle_release_ms). tc pooled more than an
 * idle connection holds (a second chunk of task slots or PDU descriptors, a data buffer):
 * mark it and make sure its worker's trim timer runs. Called where the memory is allocated
 * (cold paths), never per command. */
void tgt_trim_arm(struct tgt_conn *tc);
/* Give back what tc pooled and nothing uses: cached data buffers and those of free task
 * slots, task slots and PDU descriptors beyond the first chunk. True if nothing it pooled is
 * left beyond that (else a slot or descriptor is in use). */
bool tgt_conn_trim(struct tgt_conn *tc);
/* ms until a connection whose last command came at last_ns (the loop's clock, ns) has been
 * quiet for quiet_ms; 0: it has. */
uint64_t tgt_trim_wait_ms(uint64_t now_ns, uint64_t last_ns, uint32_t quiet_ms);
void tgt_trim_worker_init(struct tgt_worker *w);
struct tgt_task *tgt_task_alloc(struct tgt_conn *tc, bool immediate);
struct tgt_task *tgt_task_find(struct tgt_conn *tc, uint32_t itt);
void tgt_task_hash_add(struct tgt_conn *tc, struct tgt_task *task); /* findable by its ITT */
/* The task no longer holds a place in the CmdSN window (its status is on its way, or it is
 * gone): the window reopens by one on the next stamped PDU. */
void tgt_task_uncount(struct tgt_task *task);
void tgt_task_release(struct tgt_task *task); /* its slot back (no PDU refers to it) */
void tgt_task_free(struct tgt_task *task);
void tgt_task_abort(struct tgt_task *task);
/* End a task another I_T nexus aborted (PREEMPT AND ABORT). */
void tgt_task_abort_now(struct tgt_task *task);
/* The worker's scsi_abort_fn (arg: the tgt_worker): abort the tasks of the named nexuses. */
void tgt_abort_hook(void *arg, struct scsi_abort *req);
void tgt_tmf(struct tgt_conn *tc, const struct iscsi_hdr *h);
void tgt_task_finished(struct tgt_task *task);

/* tgt_stats.c: counting on the worker's thread (see the comment there) */
struct tgt_tstat;
struct tgt_lstat;
/* The worker's slot for a target name ("" or NULL: none); NULL when out of memory or past the
 * slot limit (then nothing is counted). */
struct tgt_tstat *tgt_tstat_get(struct tgt_worker *w, const char *target);
/* The slot a connection's events count against: its session's target, else the configured
 * target its login names, else "". */
struct tgt_tstat *tgt_conn_tstat(struct tgt_conn *tc);
enum tgt_stat_event {
	TGT_ST_LOGIN_ACCEPTED,
	TGT_ST_LOGIN_TIMEOUT,
	TGT_ST_DIGEST_ERROR,
	TGT_ST_CONN_TIMEOUT,
	TGT_ST_TASK_ABORTED,
	TGT_ST_PDU_REJECTED,
};
void tgt_stat_count(struct tgt_conn *tc, enum tgt_stat_event ev, uint64_t n);
void tgt_stat_login_refused(struct tgt_conn *tc, int reason_idx);
/* A command waited ns for its QoS start time. */
void tgt_stats_qos_wait(struct tgt_task *t, uint64_t ns);
/* A command is answered (status set in t->sc): its counts and latency. */
void tgt_stats_cmd_done(struct tgt_task *t);
void tgt_stats_worker_init(struct tgt_worker *w);
void tgt_stats_worker_free(struct tgt_worker *w);

/* tgt_snap.c: a snapshot request from another gateway of an image this one holds the lock
 * of (ha_set_snap_handler; librados' thread: queued for the main loop). arg: the target. */
struct ha_snap_req;
enum ha_snap_what;
void tgt_snap_asked(void *arg, struct ha_snap_req *r, const char *target, uint32_t lun,
		    const char *name, enum ha_snap_what what, unsigned timeout_ms);
/* The lock's holder of an image rolls one of its LUs back: it goes offline here, and back
 * (ha_set_offline_handler; librados' thread: queued for the main loop). arg: the target. */
void tgt_snap_offline_asked(void *arg, struct ha_snap_req *r, const char *target, uint32_t lun,
			    bool online, bool changed, unsigned bound_ms);
/* At the target's end (its main loop stopped): the LUs still offline come back. */
void tgt_snap_offline_stop(struct ix_target *t);

/* tgt_text.c */
void tgt_text(struct tgt_conn *tc, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen);

#endif
