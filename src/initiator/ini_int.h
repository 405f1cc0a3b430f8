/* Initiator internals: the context, the session state machine (ini_session.c), the full
 * feature phase (ini_io.c) and discovery (ini_disc.c). Only role policy lives here; login,
 * negotiation, CHAP, the PDU codec and the transport are the shared layers below.
 *
 * Session states:
 *   IDLE        created, or logged out; ix_session_login() starts an attempt
 *   CONNECTING  TCP connect in progress (login_timer armed)
 *   LOGIN       login exchange in progress (login_timer still armed)
 *   BACKOFF     waiting before the next attempt (retry_timer)
 *   FFP         full feature phase: commands flow
 *   LOGOUT      draining commands, then Logout sent (logout_timer)
 *   DOWN        failed for good (first login exhausted, or replacement timeout): submissions
 *               get -ENOTCONN; ix_session_login() may start again
 * "recovering" is a flag next to CONNECTING/LOGIN/BACKOFF: a connection was lost in FFP and
 * the replacement timer runs; commands queue until the session is back.
 */
#ifndef IX_INITIATOR_INI_INT_H
#define IX_INITIATOR_INI_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "ix/initiator.h"
#include "session/auth.h"
#include "dm/conn.h"
#include "session/keys.h"
#include "session/login_init.h"
#include "util/addr.h"
#include "util/list.h"

struct ix_ctx {
	struct ev_loop *loop;
	struct list_head sessions;
};

enum ini_state {
	INI_IDLE = 0,
	INI_CONNECTING,
	INI_LOGIN,
	INI_BACKOFF,
	INI_FFP,
	INI_LOGOUT,
	INI_DOWN,
};

#define INI_MAX_QUEUE_DEPTH 4096
#define INI_ITT_IDX_BITS 12           /* task index in the low bits of the ITT */
#define INI_ITT_CTRL 0x80000000u      /* ITTs of NOP/TMF/Text/Logout have the top bit */
#define INI_MAX_TMF 8
#define INI_MAX_REDIRECTS 4

/* One command in flight: binds a caller's struct ix_scsi_cmd to an ITT and CmdSN. */
struct ini_task {
	struct ix_scsi_cmd *cmd;        /* NULL when free */
	uint32_t itt;
	uint16_t gen;
	uint32_t cmdsn;
	uint32_t exp_datasn;            /* next Data-In DataSN */
	uint32_t data_in;               /* Data-In bytes received */
	uint32_t r2tsn;                 /* next R2TSN expected */
	struct list_head link;          /* free list, or the session's outstanding list */
};

struct ini_tmf {
	bool used;
	bool local;                     /* answered locally (the command was never sent) */
	uint32_t itt;
	uint8_t function;
	uint32_t lun;
	uint32_t ref_itt;
	struct ix_scsi_cmd *victim;     /* ABORT TASK */
	ix_tmf_cb cb;
	void *arg;
};

/* Strings copied from the options. */
struct ini_names {
	char initiator[ISCSI_NAME_MAX];
	char alias[256];
	char target[ISCSI_NAME_MAX];
	char portal[ADDR_HOST_MAX + 16];
	char chap_user[256], chap_secret[256];
	char mutual_user[256], mutual_secret[256];
};

struct ix_session {
	struct ix_ctx *ctx;
	struct list_head link;
	struct ix_session_opts opts;    /* string pointers point into names */
	struct ini_names names;
	enum iscsi_session_type type;
	struct neg_prefs prefs;
	struct auth_creds creds;

	enum ini_state state;
	/* the transports an attempt tries, in order ("auto": iSER, then TCP) */
	const struct dm_ops *xports[DM_MAX_TRANSPORTS];
	size_t nxports, xport_next;
	bool recovering;
	bool ever_logged_in;
	bool freeing;
	int hold;                       /* entry points in progress: memory freed at 0 */
	bool logout_sent;
	struct iscsi_conn *conn;        /* we hold a reference while set */
	struct login_initiator *login;
	uint32_t login_itt;
	char host[ADDR_HOST_MAX];       /* where the next attempt goes (redirects change it) */
	uint16_t port;
	char home_host[ADDR_HOST_MAX];  /* where recovery starts: the configured portal, or
					   the last permanent redirection's (RFC 7143 11.13.5) */
	uint16_t home_port;
	int redirects;
	uint32_t attempts;              /* failed attempts of the current login / recovery */
	uint32_t recoveries;

	struct ev_timer login_timer, retry_timer, replace_timer, nop_timer, logout_timer,
		notify_timer;

	/* session */
	uint8_t isid[6];
	uint16_t tsih;
	uint16_t tpgt;
	char target_alias[256];
	struct iscsi_sess_params sp;
	uint32_t cmdsn, exp_cmdsn, max_cmdsn, exp_statsn;
	uint32_t ctrl_itt;              /* next control ITT */

	/* I/O buffers from ix_session_buf_alloc (struct ini_buf), registered with each
	   connection's transport when it enters the full feature phase */
	struct list_head bufs;

	/* tasks */
	struct ini_task *tasks;
	uint32_t ntasks;
	struct list_head free_tasks;
	struct list_head active;        /* tasks bound to a command, in CmdSN order */
	uint32_t outstanding;
	struct ix_scsi_cmd *q_head, *q_tail; /* waiting for a task, the window or a connection */

	struct ini_tmf tmf[INI_MAX_TMF];
	struct ix_scsi_cmd *cancel_head; /* cancelled before sending, reported via cancel_timer */
	struct ev_timer cancel_timer;
	int lost_err;                   /* why the header phase failed the connection */

	/* keepalive */
	uint32_t nop_itt;               /* outstanding ping, 0 = none */
	uint64_t last_rx_ms;

	/* callbacks */
	ix_session_cb login_cb, logout_cb;
	void *login_arg, *logout_arg;
	int pending_login_err;          /* reported through notify_timer */
	bool notify_login, notify_logout;
	int pending_logout_err;
	ix_event_cb event_cb;
	void *event_arg;

	/* discovery: the Text exchange */
	void (*text_done)(struct ix_session *s, int err, char *text, uint32_t len);
	struct text_accum text;
	char *text_buf;
	uint32_t text_itt, text_ttt;

	void *disc;                     /* ini_disc.c's state for a discovery session */
	char error[256];
	char loss_reason[256];          /* why the last full-feature connection was lost */
};

/* ini_session.c */
struct ix_session *ini_session_new(struct ix_ctx *ctx, const struct ix_session_opts *opts,
				   enum iscsi_session_type type, int *err);
struct ix_ctx *ini_session_ctx(struct ix_session *s);
/* Keep the session's memory alive across callbacks that may free it. */
void ini_hold(struct ix_session *s);
void ini_release(struct ix_session *s);
/* During LOGOUT: send the Logout once nothing is outstanding. */
void ini_logout_maybe(struct ix_session *s);
void ini_set_error(struct ix_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define INI_DEF_PORT 3260 /* a portal without a port */

/* ini_opts.c: check the caller's options into s->opts (and s's names, transports, limits,
 * identity); 0 or -errno with the session's error set. */
int ini_setup_opts(struct ix_session *s, const struct ix_session_opts *in);
enum neg_digest_pref ini_digest_pref(enum ix_digest d);
/* The connection failed or the target broke the protocol: close it and recover (FFP) or
 * fail the attempt (login). */
void ini_conn_lost(struct ix_session *s, int err, const char *why);
/* Send a PDU (data optional, borrowed until sent). 0 or -errno. */
int ini_send(struct ix_session *s, struct iscsi_hdr *h, const void *data, uint32_t len);
uint32_t ini_next_ctrl_itt(struct ix_session *s);
void ini_enter_ffp_done(struct ix_session *s);

/* ini_io.c */
extern const struct iscsi_role_ops ini_role_ops;
/* ini_buf.c: register every pool buffer with the connection (entering FFP); free them all
 * (session destroyed). */
void ini_bufs_register(struct ix_session *s);
void ini_bufs_free(struct ix_session *s);

int ini_tasks_alloc(struct ix_session *s);
void ini_tasks_free(struct ix_session *s);
/* Send what the queue, the free tasks and the CmdSN window allow. */
void ini_kick(struct ix_session *s);
/* Connection gone: unbind sent commands and put them back at the head of the queue, in
 * CmdSN order, for reissue. TMFs in flight fail with err. */
void ini_requeue_all(struct ix_session *s, int err);
/* Complete every queued and outstanding command with err. */
void ini_fail_all(struct ix_session *s, int err);
void ini_ffp_started(struct ix_session *s);
void ini_io_init(struct ix_session *s);
void ini_nop_timer_cb(struct ev_timer *t);
int ini_send_text(struct ix_session *s, const char *text, uint32_t len,
		  void (*done)(struct ix_session *s, int err, char *text, uint32_t len));
/* Login-phase PDU (from the role ops). */
void ini_login_rx(struct ix_session *s, const struct iscsi_hdr *h, uint8_t *data, uint32_t dlen);
void ini_logout_rx(struct ix_session *s, const struct iscsi_hdr *h);

#endif
