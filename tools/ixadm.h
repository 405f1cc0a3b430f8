/* ixadm: the ix initiator's command line (iscsiadm-style). Shared declarations of its files:
 *
 *   ixadm.c         argument parsing, mode dispatch, help
 *   ixadm_util.c    messages, exit codes, names and portals
 *   ixadm_node.c    the node database: one key = value file per record, the settings table
 *   ixadm_cmd.c     -m discovery / node / session: records, login, logout, session listing
 *   ixadm_ctl.c     the control protocol between ixadm and a session daemon (both sides'
 *                   framing), run-folder paths, starting a daemon
 *   ixadm_daemon.c  `ixadm --serve`: one process per logged-in session (event loop, control
 *                   socket, recovery, command timeouts)
 *   ixadm_fuse.c    LUNs exposed as files through FUSE, inside the daemon's event loop
 *   ixadm_dev.c     a SCSI command channel: through a daemon, or a session of our own
 *   ixadm_io.c      -m io: list, inquiry, readcap, read, write, sync
 *   ixadm_attach.c  `ixadm attach` / `ixadm detach`
 *
 * Only the public initiator API (include/ix) is used. docs/initiator.md describes the design.
 */
#ifndef IXADM_H
#define IXADM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ix/initiator.h"

/* Exit codes: open-iscsi's ISCSI_ERR_* numbers where they exist, so scripts written for
 * iscsiadm keep working. */
enum {
	AX_OK = 0,
	AX_ERR = 1,              /* generic failure, also SCSI errors of -m io */
	AX_ERR_SESS_NOT_FOUND = 2,
	AX_ERR_NOMEM = 3,
	AX_ERR_TRANS = 4,        /* cannot connect to the portal */
	AX_ERR_LOGIN = 5,        /* login failed (protocol) */
	AX_ERR_IDBM = 6,         /* node database error */
	AX_ERR_INVAL = 7,        /* bad arguments */
	AX_ERR_TIMEOUT = 8,      /* the target did not answer in time */
	AX_ERR_INTERNAL = 9,
	AX_ERR_LOGOUT = 10,
	AX_ERR_SESS_EXISTS = 15,
	AX_ERR_FATAL_LOGIN = 19, /* no such target, or refused for good */
	AX_ERR_NO_OBJS = 21,     /* no records / no sessions */
	AX_ERR_AUTH = 24,        /* authentication failed */
	AX_ERR_OP_NOT_SUPP = 27,
	AX_ERR_BUSY = 28,        /* e.g. logout of a session with attached LUNs */
};

#define AX_DEFAULT_DB "/var/lib/ix/nodes"
#define AX_IO_MAX (1024u * 1024u) /* largest data transfer of one command we issue */

uint64_t ax_now_ms(void);
/* A decimal number in lo..hi: 0 or -EINVAL. */
int ax_parse_num(const char *s, long lo, long hi, long *out);
/* "ixadm: ..." on stderr. */
void ax_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Exit code for a negative errno from a login or command. */
int ax_errno_exit(int err);
const char *ax_exit_str(int code);

/* ---------------------------------------------------------------- portals */

#define AX_HOST_MAX 256
struct ax_portal {
	char host[AX_HOST_MAX]; /* without IPv6 brackets */
	uint16_t port;
	int tpgt;               /* -1 unknown */
	bool port_given;        /* the text named the port */
};
/* "host", "host:port", "[v6]:port", each optionally ",tpgt". 0 or -EINVAL. */
int ax_portal_parse(const char *s, struct ax_portal *p);
/* "host:port" with brackets around IPv6 hosts. */
void ax_portal_str(const struct ax_portal *p, char *buf, size_t len);
/* Is s usable as a file name component and a host (no '/', no control characters)? */
bool ax_host_ok(const char *s);
/* Is s a plausible iSCSI name (iqn./eui./naa., RFC 3722 characters, < 224 bytes)? */
bool ax_iscsi_name_ok(const char *s);

/* ---------------------------------------------------------------- node records */

#define AX_NAME_MAX 224
#define AX_SECRET_MAX 256

struct node_rec {
	char name[AX_NAME_MAX];
	int32_t tpgt;
	char address[AX_HOST_MAX];
	uint32_t port;
	char startup[16];
	char transport[8];
	char initiatorname[AX_NAME_MAX];
	char disc_address[AX_HOST_MAX];
	uint32_t disc_port;
	char disc_type[16];
	char authmethod[8];
	char username[AX_SECRET_MAX], password[AX_SECRET_MAX];
	char username_in[AX_SECRET_MAX], password_in[AX_SECRET_MAX];
	char chap_algs[64];
	uint32_t replacement_timeout, login_timeout, login_retry_max;
	uint32_t noop_interval, noop_timeout, cmds_max, cmd_timeout, abort_timeout;
	char header_digest[16], data_digest[16];
	uint32_t max_recv_dsl, first_burst, max_burst;
	char immediate_data[4], initial_r2t[4];
};

struct node_list {
	struct node_rec *recs;
	int n;
};

void node_defaults(struct node_rec *r);
/* Set one setting by its iscsiadm name, validating the value. internal_ok allows the keys
 * that name the record (node.name, node.tpgt, address, port). 0 or -EINVAL with err. */
int node_set(struct node_rec *r, const char *key, const char *value, bool internal_ok,
	     char *err, size_t errlen);
/* Print "key = value" lines (secrets masked unless show_secrets). */
void node_print(FILE *f, const struct node_rec *r, bool show_secrets);
/* "IP:PORT,TPGT IQN" */
void node_line(const struct node_rec *r, char *buf, size_t len);
void node_portal(const struct node_rec *r, struct ax_portal *p);

int node_load_file(const char *path, struct node_rec *r, char *err, size_t errlen);
/* Atomic (temporary file + rename), mode 0600; replaces a record of the same name, address
 * and port with another TPGT. */
int node_save(const char *db, const struct node_rec *r, char *err, size_t errlen);
int node_delete(const char *db, const struct node_rec *r);
/* Every record, sorted by name then portal; records that fail to parse are reported on
 * stderr and skipped. 0 or -errno (a missing database is an empty list). */
int node_list_load(const char *db, struct node_list *out);
void node_list_free(struct node_list *l);
/* Records matching the target name and portal filters (either may be NULL/absent). */
bool node_match(const struct node_rec *r, const char *target, const struct ax_portal *p);

/* Session options from a record: target name and secrets point into r (which must outlive
 * the options), the rest into the struct. 0 or -EINVAL with err. */
struct ax_sess_cfg {
	struct ix_session_opts o;
	char initiator[AX_NAME_MAX];
	char portal[AX_HOST_MAX + 16];
	uint32_t cmd_timeout_ms;   /* a command older than this is aborted */
	uint32_t abort_timeout_ms; /* an abort unanswered this long resets the session */
};
int node_to_cfg(const struct node_rec *r, const char *initiator, struct ax_sess_cfg *c,
		char *err, size_t errlen);
/* The initiator name: IX_INITIATOR_NAME, else <db>/initiatorname.iscsi (created with a new
 * name on first use when create is set). 0 or -errno. */
int ax_initiator_name(const char *db, bool create, char *out, size_t len);

/* ---------------------------------------------------------------- control protocol (ixadm_ctl.c)
 *
 * A session daemon listens on <db>/.run/<id>.sock (<id>: 16 hex digits hashed from the target
 * name, host and port; .lock is held by the living daemon, .log collects its messages).
 * Requests are one text line, optionally followed by a binary payload whose length the line
 * gives; replies are "OK <len> [fields]\n" + len bytes, or "ERR <exit code> <message>\n".
 *   info                                   key=value lines about the session
 *   scsi <lun> <r|w|n> <len> <timeout ms> <cdb hex>   (+ len bytes when w)
 *        -> OK <datalen> <status> <residual> <u|o|-> <sense hex or ->   (+ data when r)
 *   attach <lun> <blocks> <block size> <flags> <path>    flags: any of f (FUA), r (read
 *        only), d (direct_io), or -
 *   detach <path>   -> OK 0 now, then "DONE <code> <message>" once the FUSE file is gone
 *   persist         keep the session after its last attachment ends
 *   logout          -> OK 0 after the Logout exchange; the daemon then exits
 */
#define CTL_LINE_MAX 4608 /* a request line: an attach carries a path */

struct ctl_paths {
	char dir[4096];
	char sock[108];  /* sun_path */
	char lock[4096];
	char log[4096];
};
int ctl_paths(const char *db, const char *target, const struct ax_portal *p,
	      struct ctl_paths *out);

struct ctl_reply {
	bool ok;
	int code;                 /* ERR: the exit code */
	size_t len;               /* OK: payload length (received into the caller's buffer) */
	char rest[CTL_LINE_MAX];  /* OK: fields after the length; ERR: the message */
};
/* Connect to a daemon's socket. fd or -errno (-ECONNREFUSED / -ENOENT: no daemon). */
int ctl_connect(const char *sock, int timeout_ms);
/* Send a request (and payload), read the reply line and up to cap payload bytes into buf.
 * 0 (rep filled; rep->ok tells success) or -errno (-ETIMEDOUT after timeout_ms). */
int ctl_call(int fd, const char *req, const void *payload, size_t plen, struct ctl_reply *rep,
	     void *buf, size_t cap, int timeout_ms);
/* Read one more reply line (e.g. DONE after a detach). */
int ctl_read_reply(int fd, struct ctl_reply *rep, int timeout_ms);

#define CTL_MAX_ATTACH 16
struct ctl_info {
	long pid;
	char target[AX_NAME_MAX];
	char portal[AX_HOST_MAX + 16]; /* configured host:port */
	char current[AX_HOST_MAX + 16]; /* connected host:port */
	int tpgt;
	char state[32];
	char initiator[AX_NAME_MAX];
	char transport[8];
	bool persistent;
	int nattach;
	struct {
		uint32_t lun;
		char path[4096];
	} attach[CTL_MAX_ATTACH];
	char text[8192];                /* the whole answer, for -P 3 */
};
int ctl_info(int fd, struct ctl_info *inf, int timeout_ms);
/* Every living daemon under db (stale sockets of dead daemons are removed). */
int ctl_sessions(const char *db, struct ctl_info **out, int *n);
/* Start `ixadm --serve` for the record's target and portal and wait (at most wait_ms) until
 * it logged in or failed. Returns an exit code (AX_OK and *pid, or an error with err). */
int ctl_spawn(const char *db, const char *target, const char *portal, bool ephemeral, int debug,
	      int wait_ms, long *pid, char *err, size_t errlen);
/* Hex helpers for CDBs and sense data. */
void ax_hex(const uint8_t *p, size_t n, char *out);
int ax_unhex(const char *s, uint8_t *out, size_t max);

/* ---------------------------------------------------------------- command channel (ixadm_dev.c) */

struct ix_inquiry;
struct ax_opts;
struct ax_dev {
	int fd;                  /* a session daemon's control socket, or -1 */
	long sid;                /* that daemon's pid */
	struct ix_ctx *ctx;      /* or a session of our own */
	struct ix_session *s;
	struct node_rec rec;
	struct ax_sess_cfg cfg;
	int timeout_ms;          /* backstop for a daemon's answer */
	int ecode;               /* exit code of the last failure... */
	char err[512];           /* ...and its text */
};
/* A channel to the target at p: through its session daemon if one runs (unless direct),
 * else a login of our own with the record's settings (defaults without a record), unless
 * daemon_only. Returns an exit code (message in dev->err). */
int ax_dev_open(struct ax_opts *o, const char *target, const struct ax_portal *p, bool direct,
		bool daemon_only, struct ax_dev *dev);
/* One command, bounded by the session's command timeout; unit attentions are retried.
 * 0: the target answered (cmd->status, sense); -1: it did not (dev->err, dev->ecode). */
int ax_dev_scsi(struct ax_dev *dev, struct ix_scsi_cmd *cmd);
void ax_dev_close(struct ax_dev *dev);
/* GOOD status required; else an exit code with the decoded status in dev->err. */
int ax_dev_check(struct ax_dev *dev, struct ix_scsi_cmd *cmd, const char *what);
int ax_dev_readcap(struct ax_dev *dev, uint32_t lun, uint64_t *blocks, uint32_t *bs);
int ax_dev_inquiry(struct ax_dev *dev, uint32_t lun, struct ix_inquiry *inq);
/* "CHECK CONDITION: ILLEGAL REQUEST 21/00 (LOGICAL BLOCK ADDRESS OUT OF RANGE)" */
void ax_status_str(const struct ix_scsi_cmd *cmd, char *buf, size_t len);

/* ---------------------------------------------------------------- global options */

#define AX_ISNS_PORT	   3205	 /* iSNS's port, when -p names none */
#define AX_ISNS_TIMEOUT_MS 10000 /* the whole iSNS exchange */

struct ax_opts {
	const char *db;
	const char *mode;          /* discovery, node, session, io, attach, detach */
	const char *type;          /* -t */
	bool isns;                 /* -t isns: -p names the iSNS server */
	const char *portal_arg;    /* -p */
	struct ax_portal portal;
	bool have_portal;
	const char *target;        /* -T */
	const char *iface;         /* -I */
	const char *ops[8];        /* -o, repeatable */
	int nops;
	const char *names[16], *values[16]; /* -n / -v pairs */
	int nnames, nvalues;
	bool login, logout;        /* -l, -u */
	const char *login_all;     /* -L all|manual|automatic */
	const char *logout_all;    /* -U all|manual|automatic */
	int print_level;           /* -P */
	long sid;                  /* -r, 0 = none */
	int debug;                 /* -d */
	uint32_t lun;              /* --lun */
	bool have_lun;
	uint64_t lba;              /* --lba */
	bool have_lba;
	uint64_t count;            /* --count */
	bool have_count;
	const char *file;          /* --file */
	bool fua, direct, read_only, direct_io, show_secrets;
	int timeout_s;             /* --timeout: backstop for talking to a daemon */
	char **args;               /* positional arguments */
	int nargs;
	const char *argv0;
};

/* ---------------------------------------------------------------- modes (ixadm_cmd.c etc.) */

int ax_mode_discovery(struct ax_opts *o);
int ax_mode_node(struct ax_opts *o);
int ax_mode_session(struct ax_opts *o);
int ax_mode_io(struct ax_opts *o);
int ax_mode_attach(struct ax_opts *o);
int ax_mode_detach(struct ax_opts *o);
/* The daemon: argv after "--serve". Returns the process exit status. */
int ax_serve(const char *db, const char *target, const char *portal, bool ephemeral,
	     int notify_fd, int debug);

/* SendTargets at o->portal (discovery CHAP from -n discovery.sendtargets.auth.* -v ...).
 * Returns an exit code; *out to free with ix_discovery_free. */
int ax_discover(struct ax_opts *o, struct ix_discovery **out, char *err, size_t errlen);
/* Log in to one record through a new session daemon (or report the one that exists).
 * Prints iscsiadm's "Logging in to ..." lines. Returns an exit code. */
int ax_login_rec(struct ax_opts *o, const struct node_rec *r, bool ephemeral, long *sid);

#endif
