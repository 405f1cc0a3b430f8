/* `ixadm --serve`, inside: the daemon's and its control clients' state, shared by
 * ixadm_daemon.c (the session, the loop, set-up) and ixadm_daemon_ctl.c (the control socket's
 * clients). */
#ifndef IXADM_DAEMON_INT_H
#define IXADM_DAEMON_INT_H

#include "ix/scsi.h"
#include "ixadm.h"
#include "ixadm_daemon.h"

#define MAX_CLIENTS 32
#define CLIENT_IDLE_MS 60000      /* a control client silent this long is dropped */
#define CLIENT_IO_MS 30000        /* a half-sent request or reply stalled this long, too */
#define RELOGIN_MIN_MS 2000       /* after the replacement timeout: first new login... */
#define RELOGIN_MAX_MS 30000      /* ...backing off to this */
#define EPHEMERAL_IDLE_MS 30000   /* a daemon started by attach that never got one */
#define SHUTDOWN_MS 60000         /* SIGTERM: give up waiting after this */

enum dstate { D_LOGIN, D_UP, D_RECOVERING, D_DOWN, D_LOGOUT };
extern const char *const d_state_name[]; /* by enum dstate */

enum cstate { C_LINE, C_PAYLOAD, C_BUSY, C_REPLY, C_DETACH_WAIT };

struct client {
	struct daemon *d;
	int fd;
	enum cstate st, after_reply;
	char line[CTL_LINE_MAX];
	size_t llen;
	uint8_t *buf;                   /* payload / data, AX_IO_MAX, allocated on first use */
	size_t plen, pgot;
	char hdr[CTL_LINE_MAX + 64];
	size_t hlen, hsent;
	const uint8_t *data;
	size_t dlen, dsent;
	uint64_t deadline;
	struct dcmd dc;
	uint32_t tmo;                   /* the scsi request's timeout (0 = the session's) */
	struct attach *waiting;         /* detach: tell me when it is gone */
	bool dead;                      /* fd closed; freed once dc is not in flight */
	bool close_after;               /* the stream is out of step: close after this reply */
	bool logout_waiter;
};

struct daemon {
	const char *db;
	struct node_rec rec;
	struct ax_sess_cfg cfg;
	struct ctl_paths paths;
	struct ix_ctx *ctx;
	struct ix_session *s;
	enum dstate st;
	bool reported;                  /* the first login's outcome went to notify_fd */
	int notify_fd, listen_fd, lock_fd, sig_fd;
	bool persistent;
	struct client *clients[MAX_CLIENTS];
	struct attach *att[CTL_MAX_ATTACH];
	int natt;
	bool had_attach;
	struct dcmd *inflight;
	uint64_t relogin_at, idle_deadline, shutdown_deadline;
	uint32_t relogin_delay;
	bool shutting_down, logout_started, exit_now, reset_needed;
	int exit_code;
	unsigned resets;
	char last_error[256];
};

void d_accept_client(struct daemon *d);
void d_client_process(struct client *c);
void d_client_flush(struct client *c);
void d_client_readable(struct client *c);
void d_client_close(struct client *c);
void d_start_logout(struct daemon *d, const char *why);

#endif
