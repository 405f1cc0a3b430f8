/* ix initiator: asynchronous iSCSI initiator API.
 *
 * Model (in the style of libiscsi): a struct ix_ctx owns one event loop. The caller either runs
 * it (ix_ctx_run) or integrates it into its own loop: poll ix_ctx_fd() for POLLIN, wait at most
 * ix_ctx_timeout_ms(), then call ix_ctx_service(). Every asynchronous call takes a completion
 * callback that fires exactly once, from inside ix_ctx_service()/ix_ctx_run(), never from
 * inside the call that started the operation (a call that fails at once returns -errno and
 * does not call back).
 *
 * Threading: a context and everything made from it belong to the thread that created the
 * context. No call is thread-safe; use one context per thread. Several contexts can live in
 * one process (there are no global variables).
 *
 * Ownership: strings in option structs are copied by the call that receives them. A
 * struct ix_scsi_cmd and the data buffer it points to belong to the library from a successful
 * ix_scsi_submit() until its done() callback runs; the library never allocates per command
 * (tasks come from a pool sized by queue_depth; commands beyond it wait in a queue inside
 * their own struct).
 *
 * Errors: functions return 0 or a negative errno. Failures of iSCSI itself (login refused,
 * protocol violations of the target, lost connections) come back as negative errnos in
 * callbacks, with text in ix_session_error(); SCSI status and sense data are results of a
 * command, not errors (cmd->err == 0, cmd->status == 2 CHECK CONDITION).
 *
 *   -EACCES     login refused: authentication or authorization (login status 0x0201/0x0202)
 *   -ENOENT     login refused: no such target (0x0203/0x0204)
 *   -ETIMEDOUT  no answer within login_timeout_ms, or a command outlived the replacement
 *               timeout after its connection was lost
 *   -ECONNREFUSED, -EHOSTUNREACH, ...   from connect(2)
 *   -EPROTO     the target broke the protocol (details in ix_session_error())
 *   -ENOTCONN   the session is not logged in (never was, logged out, or failed for good)
 *   -ECANCELED  the command was aborted by a task management function or ix_session_free()
 */
#ifndef IX_INITIATOR_H
#define IX_INITIATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ix_ctx;
struct ix_session;

/* ---------------------------------------------------------------- context */

/* A context with its own event loop. NULL on allocation failure. */
struct ix_ctx *ix_ctx_new(void);
/* Frees the context. Sessions still open are freed first (ix_session_free semantics). */
void ix_ctx_free(struct ix_ctx *ctx);

/* A file descriptor that becomes readable when ix_ctx_service() has work to do. */
int ix_ctx_fd(const struct ix_ctx *ctx);
/* Milliseconds until the next timer is due (0 = now), or -1 if no timer is armed. */
int ix_ctx_timeout_ms(struct ix_ctx *ctx);
/* Dispatch ready events and due timers, waiting at most timeout_ms (0 = do not wait, -1 =
 * until something happens). Returns the number of events handled, or -errno. */
int ix_ctx_service(struct ix_ctx *ctx, int timeout_ms);
/* Adaptive polling: after ix_ctx_service()/ix_ctx_run() handled events, a wait that would
 * sleep first polls without sleeping for up to poll_us microseconds, so a response that comes
 * back within that time is taken without a wake-up (lower latency at queue depth 1, at the
 * price of CPU while traffic flows; none when idle; a thread that other threads compete with
 * for its CPU stops polling for a while). A busy connection's socket is read directly by the
 * window (no epoll call first). 0 turns it off. Default IX_CTX_POLL_US_DEFAULT (50; what it
 * gains and costs: docs/perf.md). A caller that polls ix_ctx_fd() itself and services with a
 * zero timeout never polls here. */
#define IX_CTX_POLL_US_DEFAULT 50
void ix_ctx_set_poll_us(struct ix_ctx *ctx, unsigned poll_us);
/* Run until ix_ctx_stop() (callable from a callback or another thread). 0 or -errno. */
int ix_ctx_run(struct ix_ctx *ctx);
void ix_ctx_stop(struct ix_ctx *ctx);

/* Log level for the library's messages on stderr: 0 errors, 1 warnings (default), 2 info,
 * 3 debug. Process-wide. */
void ix_set_log_level(int level);

/* ---------------------------------------------------------------- session options */

enum ix_digest {
	IX_DIGEST_NONE = 0,        /* offer None only (default) */
	IX_DIGEST_PREFER_NONE,     /* "None,CRC32C" */
	IX_DIGEST_PREFER_CRC32C,   /* "CRC32C,None" */
	IX_DIGEST_CRC32C,          /* require CRC32C: the login fails without it */
};

struct ix_chap {
	const char *user;          /* CHAP_N we send; NULL = no CHAP */
	const char *secret;        /* our secret (12-16+ bytes recommended) */
	const char *mutual_user;   /* expected CHAP_N of the target; NULL = one-way */
	const char *mutual_secret;
	uint8_t algs[4];           /* CHAP_A values offered in this order (5 MD5, 6 SHA-1, 7
				      SHA-256, 8 SHA3-256); nalgs 0 = all four, in that order */
	int nalgs;
	bool required;             /* refuse a target that does not authenticate us */
};

struct ix_session_opts {
	const char *initiator_name;     /* required */
	const char *initiator_alias;    /* optional */
	const char *target_name;        /* required for normal sessions */
	const char *portal;             /* "host", "host:port", "[v6addr]:port"; a trailing
					   ",TPGT" (as SendTargets reports it) is ignored */
	const char *transport;          /* "tcp" (default), "iser" (RDMA, RFC 7145), or "auto":
					   iSER first, TCP when iSER cannot connect */
	struct ix_chap chap;

	enum ix_digest header_digest, data_digest;
	uint32_t max_recv_data_segment_length; /* default 262144 */
	uint32_t first_burst_length;    /* default 262144 */
	uint32_t max_burst_length;      /* default 1048576 */
	bool immediate_data;            /* default true */
	bool initial_r2t;               /* default false */

	uint32_t queue_depth;           /* commands in flight at once (default 128, max 4096);
					   the target's CmdSN window may allow fewer */

	/* Connection establishment (documented defaults keep a boot with unreachable targets
	   short: at most about login_timeout_ms * (1 + login_retries) plus the backoff). */
	uint32_t login_timeout_ms;      /* per attempt, connect + login (default 5000) */
	uint32_t login_retries;         /* further attempts of the first login (default 2) */
	uint32_t retry_delay_ms;        /* first backoff (default 200), doubled per attempt... */
	uint32_t retry_delay_max_ms;    /* ...up to this (default 2000) */

	/* Recovery: after a connection is lost, how long commands wait for a new one (the
	   session is reinstated with the same ISID and unfinished commands are reissued).
	   0 = fail them at once. Default 15000. */
	uint32_t replacement_timeout_ms;

	uint32_t noop_interval_ms;      /* keepalive NOP-Out when idle (default 5000, 0 = off) */
	uint32_t noop_timeout_ms;       /* no answer within this = connection lost (def. 5000) */

	uint8_t isid[6];                /* all zero = a random ISID of the "random" type */
};

/* Fill with the defaults above (names NULL). */
void ix_session_opts_default(struct ix_session_opts *o);

/* ---------------------------------------------------------------- sessions */

enum ix_session_event {
	IX_EVENT_CONNECTION_LOST = 1,   /* recovery started (err = why) */
	IX_EVENT_RECOVERED,             /* logged in again, commands reissued */
	IX_EVENT_RECOVERY_FAILED,       /* replacement timeout: commands failed, session down */
	IX_EVENT_TARGET_LOGOUT_REQUEST, /* the target asked for a logout (Async Message) */
};
typedef void (*ix_event_cb)(struct ix_session *s, enum ix_session_event ev, int err, void *arg);
typedef void (*ix_session_cb)(struct ix_session *s, int err, void *arg);

/* Create a session object (no I/O yet). Validates and copies opts. NULL and *err = -EINVAL
 * (missing names, bad portal, unknown transport, digest/CHAP combination impossible) or
 * -ENOMEM. */
struct ix_session *ix_session_new(struct ix_ctx *ctx, const struct ix_session_opts *opts,
				  int *err);
/* Close at once (no logout): queued and outstanding commands complete with -ECANCELED,
 * pending login/logout callbacks with -ECANCELED, before this returns. */
void ix_session_free(struct ix_session *s);

void ix_session_set_event_cb(struct ix_session *s, ix_event_cb cb, void *arg);

/* Connect and log in (retrying per opts). cb(s, 0) once in full feature phase. -EALREADY if
 * a login is in progress or done, -EINVAL if the session is being freed. */
int ix_session_login(struct ix_session *s, ix_session_cb cb, void *arg);
/* Wait for outstanding commands, send Logout, close. cb(s, 0) after the response (or
 * -ETIMEDOUT after login_timeout_ms, the connection closed either way). */
int ix_session_logout(struct ix_session *s, ix_session_cb cb, void *arg);

/* Last error text of the session ("" if none). Valid until the next call on the session. */
const char *ix_session_error(const struct ix_session *s);

struct ix_session_info {
	bool logged_in;
	uint16_t tsih;
	uint8_t isid[6];
	uint16_t tpgt;
	char target_alias[256];
	char portal[272];               /* host:port actually connected (after redirects) */
	bool header_digest, data_digest;
	bool immediate_data, initial_r2t;
	uint32_t max_recv_dsl, max_xmit_dsl, first_burst_length, max_burst_length;
	uint32_t cmdsn_window;          /* MaxCmdSN - CmdSN + 1 now */
	uint32_t outstanding;           /* commands sent and not completed */
	uint32_t recoveries;            /* connections re-established since login */
};
int ix_session_get_info(const struct ix_session *s, struct ix_session_info *info);

/* ---------------------------------------------------------------- I/O buffers */

/* Memory for command buffers that the session's transport moves without copying and without
 * work per command. Over iSER the buffer is registered with the RDMA device once per
 * connection (when it enters the full feature phase, again after a recovery, or at once if
 * the session is logged in), and a command whose buf lies inside it advertises that
 * registration's STag: no registration per I/O. Over TCP it is ordinary memory. One call per
 * buffer area, at set-up time (carve slots out of one large area rather than calling per
 * I/O). NULL if size is 0 or memory is short. Page aligned.
 *
 * Any other memory still works as a command buffer: over iSER it is registered when the
 * command is sent and deregistered when its response arrives (a registration cache keyed by
 * address cannot be used, since the library cannot see the caller free and reuse memory; a
 * copy through a bounce buffer would cost the copy the pool avoids).
 *
 * A registered area is open to the target's RDMA for as long as the connection lives (its
 * STag covers the whole area, not only the command's part): give one target's session its
 * own areas. */
void *ix_session_buf_alloc(struct ix_session *s, size_t size);
/* Give back an area from ix_session_buf_alloc (NULL: nothing). No command using it may be
 * outstanding. ix_session_free() frees the areas still allocated. */
void ix_session_buf_free(struct ix_session *s, void *buf);

/* ---------------------------------------------------------------- SCSI commands */

enum ix_dir {
	IX_DIR_NONE = 0,
	IX_DIR_READ = 1,    /* data from the target into buf */
	IX_DIR_WRITE = 2,   /* data from buf to the target */
};

struct ix_scsi_cmd;
typedef void (*ix_cmd_cb)(struct ix_scsi_cmd *cmd);

struct ix_scsi_cmd {
	/* in */
	uint32_t lun;                   /* LUN number (0..16383) */
	uint8_t cdb[16];
	uint8_t cdb_len;                /* 6..16 */
	uint8_t attr;                   /* task attribute: 0 untagged, 1 SIMPLE (what
					   ix_scsi_cmd_init sets), 2 ORDERED, 3 HEAD OF QUEUE */
	enum ix_dir dir;
	void *buf;                      /* len bytes; read data lands here directly */
	uint32_t len;                   /* Expected Data Transfer Length */
	ix_cmd_cb done;
	void *arg;

	/* out, valid in done() */
	int err;                        /* 0 = the target answered (look at status); or -errno */
	uint8_t status;                 /* SCSI status */
	uint8_t sense_len;
	uint8_t sense[96];
	bool overflow, underflow;       /* residual flags of the response */
	uint32_t residual;              /* residual count */

	/* private to the library */
	void *_next;
	uint32_t _itt;
	uint32_t _pad;
};

/* Zero cmd and set the common fields (attr SIMPLE). */
void ix_scsi_cmd_init(struct ix_scsi_cmd *cmd, uint32_t lun, const uint8_t *cdb, uint8_t cdb_len,
		      enum ix_dir dir, void *buf, uint32_t len, ix_cmd_cb done, void *arg);

/* Queue a command. 0: done() will run exactly once. -EINVAL (bad fields), -ENOTCONN (not
 * logged in and not recovering), -ESHUTDOWN (logout in progress). While the session recovers
 * from a lost connection, commands queue and are sent once it is back (or fail with
 * -ETIMEDOUT at the replacement timeout). */
int ix_scsi_submit(struct ix_session *s, struct ix_scsi_cmd *cmd);

/* ---------------------------------------------------------------- task management */

/* response: >= 0 the iSCSI TMF response (0 function complete, 1 task does not exist, 2 LUN
 * does not exist, 5 not supported, ...), or -errno (connection lost, -ETIMEDOUT). A command
 * aborted by the TMF completes with -ECANCELED before cb runs. */
typedef void (*ix_tmf_cb)(struct ix_session *s, int response, void *arg);

/* ABORT TASK for a submitted command. -ENOENT if cmd is not outstanding (it may have
 * completed: its done() has run or runs before cb). A command still queued locally is
 * completed with -ECANCELED without asking the target (cb gets 0). */
int ix_task_abort(struct ix_session *s, struct ix_scsi_cmd *cmd, ix_tmf_cb cb, void *arg);
/* LOGICAL UNIT RESET; every command of this session to that LUN completes with -ECANCELED. */
int ix_lun_reset(struct ix_session *s, uint32_t lun, ix_tmf_cb cb, void *arg);

/* ---------------------------------------------------------------- discovery */

#define IX_MAX_ADDRS 8
struct ix_discovered_target {
	char name[224];
	int naddrs;
	char addrs[IX_MAX_ADDRS][128];  /* "addr:port,tpgt" as the target reports them */
};
struct ix_discovery {
	int ntargets;
	struct ix_discovered_target *targets;
};
/* d is valid during the callback only (NULL when err != 0). */
typedef void (*ix_discovery_cb)(struct ix_ctx *ctx, int err, const struct ix_discovery *d,
				const char *errmsg, void *arg);

/* SendTargets=All on a discovery session: log in (opts: initiator_name, portal, chap,
 * timeouts; target_name ignored), ask, log out, call cb. */
int ix_discover(struct ix_ctx *ctx, const struct ix_session_opts *opts, ix_discovery_cb cb,
		void *arg);

#ifdef __cplusplus
}
#endif

#endif
