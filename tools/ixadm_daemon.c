/* `ixadm --serve`: the process that holds one logged-in session (a user-space initiator has no
 * kernel to keep it). Started detached by `ixadm -m node -l` or `ixadm attach`; reports the
 * first login's outcome on --notify-fd; then serves the control socket (ixadm.h) and the FUSE
 * files of its attachments from one poll loop, keeps the session through connection loss
 * (the library's recovery), logs in again after the replacement timeout expired, bounds every
 * command (abort, then session reset), and exits after a logout, on SIGTERM, or (ephemeral
 * daemons started by attach) when its last attachment is gone. See docs/initiator.md. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ixadm_daemon_int.h"

const char *const d_state_name[] = {
	[D_LOGIN] = "LOGGING_IN", [D_UP] = "LOGGED_IN", [D_RECOVERING] = "RECOVERING",
	[D_DOWN] = "FAILED", [D_LOGOUT] = "LOGGING_OUT",
};

const char *d_target(const struct daemon *d)
{
	return d->rec.name;
}


void d_log(struct daemon *d, const char *fmt, ...)
{
	char ts[32];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	localtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
	fprintf(stderr, "%s ixadm[%d] %s: ", ts, (int)getpid(), d->rec.name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

static void report(struct daemon *d, int code, const char *msg)
{
	if (d->reported || d->notify_fd < 0)
		return;
	if (code == 0)
		dprintf(d->notify_fd, "OK %d\n", (int)getpid());
	else
		dprintf(d->notify_fd, "ERR %d %s\n", code, msg);
	close(d->notify_fd);
	d->notify_fd = -1;
	d->reported = true;
}

/* ---------------------------------------------------------------- commands with deadlines */

static void dcmd_unlink(struct dcmd *dc)
{
	if (dc->prev)
		dc->prev->next = dc->next;
	else
		dc->d->inflight = dc->next;
	if (dc->next)
		dc->next->prev = dc->prev;
	dc->prev = dc->next = NULL;
	dc->inflight = false;
}

static void dcmd_done(struct ix_scsi_cmd *cmd)
{
	struct dcmd *dc = cmd->arg;

	dcmd_unlink(dc);
	if (dc->timed_out && cmd->err == -ECANCELED)
		cmd->err = -ETIMEDOUT;
	dc->cb(dc);
}

int d_submit(struct daemon *d, struct dcmd *dc, uint32_t timeout_ms)
{
	int r;

	if (!d->s)
		return -ENOTCONN;
	dc->d = d;
	dc->cmd.done = dcmd_done;
	dc->cmd.arg = dc;
	dc->aborting = dc->timed_out = false;
	dc->deadline = ax_now_ms() + (timeout_ms ? timeout_ms : d->cfg.cmd_timeout_ms);
	r = ix_scsi_submit(d->s, &dc->cmd);
	if (r < 0)
		return r;
	dc->inflight = true;
	dc->prev = NULL;
	dc->next = d->inflight;
	if (d->inflight)
		d->inflight->prev = dc;
	d->inflight = dc;
	return 0;
}

void d_cmd_result_str(const struct dcmd *dc, char *buf, size_t len)
{
	const struct ix_scsi_cmd *c = &dc->cmd;

	if (c->err)
		snprintf(buf, len, "%s%s%s", strerror(-c->err),
			 c->err == -ETIMEDOUT && dc->timed_out ? " (no answer in time: aborted)" : "",
			 c->err == -ENOTCONN ? " (session not connected)" : "");
	else
		ax_status_str(c, buf, len);
}

static void abort_done(struct ix_session *s, int response, void *arg)
{
	(void)s;
	d_log(arg, "ABORT TASK of a timed-out command: response %d", response);
}

static void check_cmd_deadlines(struct daemon *d, uint64_t now)
{
	for (struct dcmd *dc = d->inflight; dc; dc = dc->next) {
		if (now < dc->deadline)
			continue;
		if (dc->aborting) {
			d->reset_needed = true;
			continue;
		}
		dc->aborting = dc->timed_out = true;
		dc->deadline = now + d->cfg.abort_timeout_ms;
		d_log(d, "command 0x%02x to LUN %u: no answer within %u ms, aborting it",
		      dc->cmd.cdb[0], dc->cmd.lun, d->cfg.cmd_timeout_ms);
		int r = ix_task_abort(d->s, &dc->cmd, abort_done, d);
		if (r < 0 && r != -ENOENT)
			d_log(d, "ABORT TASK not sent: %s", strerror(-r));
	}
}

/* ---------------------------------------------------------------- the session */

static void login_done(struct ix_session *s, int err, void *arg);

static void event_cb(struct ix_session *s, enum ix_session_event ev, int err, void *arg)
{
	struct daemon *d = arg;

	switch (ev) {
	case IX_EVENT_CONNECTION_LOST:
		d->st = D_RECOVERING;
		d_log(d, "connection lost (%s): recovering for up to %u s", strerror(-err),
		      d->rec.replacement_timeout);
		break;
	case IX_EVENT_RECOVERED:
		d->st = D_UP;
		d_log(d, "recovered: logged in again, commands reissued");
		break;
	case IX_EVENT_RECOVERY_FAILED:
		snprintf(d->last_error, sizeof(d->last_error), "%s", ix_session_error(s));
		d->st = D_DOWN;
		d->relogin_delay = RELOGIN_MIN_MS;
		d->relogin_at = ax_now_ms() + d->relogin_delay;
		d_log(d, "recovery failed (%s): commands fail until a new login succeeds",
		      d->last_error);
		break;
	case IX_EVENT_TARGET_LOGOUT_REQUEST:
		d_log(d, "the target asked for a logout; the connection will be re-established "
		      "when it drops");
		break;
	}
}

static int session_create(struct daemon *d, char *err, size_t errlen)
{
	int e = 0;

	d->s = ix_session_new(d->ctx, &d->cfg.o, &e);
	if (!d->s && e == -EPROTONOSUPPORT && strcmp(d->rec.transport, "auto") == 0) {
		/* "auto" tries iSER first; in a build without it, TCP is what is left */
		d->cfg.o.transport = "tcp";
		d->s = ix_session_new(d->ctx, &d->cfg.o, &e);
	}
	if (!d->s) {
		snprintf(err, errlen, "cannot create the session: %s%s", strerror(-e),
			 e == -EPROTONOSUPPORT ? " (transport not available in this build)" : "");
		return e;
	}
	ix_session_set_event_cb(d->s, event_cb, d);
	return 0;
}

static void start_login(struct daemon *d)
{
	char err[256];
	int r;

	if (!d->s && session_create(d, err, sizeof(err)) < 0) {
		d_log(d, "%s", err);
		d->relogin_at = ax_now_ms() + RELOGIN_MAX_MS;
		return;
	}
	d->relogin_at = 0;
	if (d->st != D_LOGIN)
		d_log(d, "logging in again");
	r = ix_session_login(d->s, login_done, d);
	if (r < 0) {
		d_log(d, "login not started: %s", strerror(-r));
		d->relogin_at = ax_now_ms() + RELOGIN_MAX_MS;
		return;
	}
	if (d->reported)
		d->st = D_DOWN; /* stays "FAILED" for clients until the login succeeds */
}

static void login_done(struct ix_session *s, int err, void *arg)
{
	struct daemon *d = arg;

	if (s != d->s)
		return; /* a session being freed by a reset */
	if (err == 0) {
		d->st = D_UP;
		d->relogin_delay = RELOGIN_MIN_MS;
		d->last_error[0] = 0;
		if (!d->reported) {
			d_log(d, "logged in to %s", d->cfg.portal);
			report(d, 0, NULL);
			if (!d->persistent)
				d->idle_deadline = ax_now_ms() + EPHEMERAL_IDLE_MS;
		} else {
			d_log(d, "logged in again");
		}
		return;
	}
	snprintf(d->last_error, sizeof(d->last_error), "%s", ix_session_error(s));
	if (!d->reported) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s (%s)", d->last_error[0] ? d->last_error : "",
			 strerror(-err));
		d_log(d, "login failed: %s", msg);
		report(d, ax_errno_exit(err), msg);
		d->exit_code = ax_errno_exit(err);
		d->exit_now = true;
		return;
	}
	d->st = D_DOWN;
	d->relogin_at = ax_now_ms() + d->relogin_delay;
	d_log(d, "login failed (%s): next attempt in %u ms", d->last_error, d->relogin_delay);
	d->relogin_delay = d->relogin_delay * 2 > RELOGIN_MAX_MS ? RELOGIN_MAX_MS
								 : d->relogin_delay * 2;
}

/* An abort went unanswered: drop the session (everything outstanding completes) and log in
 * anew. The only way to bound a target that answers NOPs but not commands or TMFs. */
static void session_reset(struct daemon *d)
{
	struct ix_session *old = d->s;

	d->reset_needed = false;
	d->resets++;
	d_log(d, "an ABORT TASK was not answered within %u ms: resetting the session",
	      d->cfg.abort_timeout_ms);
	d->s = NULL;
	d->st = D_DOWN;
	ix_session_free(old);
	d->relogin_delay = RELOGIN_MIN_MS;
	start_login(d);
}

static void logout_done(struct ix_session *s, int err, void *arg)
{
	struct daemon *d = arg;

	(void)s;
	if (err)
		d_log(d, "logout: %s (%s)", strerror(-err), ix_session_error(s));
	else
		d_log(d, "logged out");
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = d->clients[i];
		if (!c || !c->logout_waiter || c->dead)
			continue;
		c->logout_waiter = false;
		c->after_reply = C_LINE;
		c->hlen = (size_t)snprintf(c->hdr, sizeof(c->hdr), "OK 0 %s\n",
					    err ? "closed without a Logout Response" : "logged out");
		c->hsent = c->dlen = c->dsent = 0;
		c->st = C_REPLY;
	}
	d->exit_now = true;
}

void d_start_logout(struct daemon *d, const char *why)
{
	int r = -ENOTCONN;

	if (d->logout_started)
		return;
	d->logout_started = true;
	d_log(d, "logging out: %s", why);
	if (d->s && d->st == D_UP)
		r = ix_session_logout(d->s, logout_done, d);
	if (r == 0) {
		d->st = D_LOGOUT;
		return;
	}
	logout_done(d->s, 0, d); /* not connected: nothing to say to the target */
}

/* ---------------------------------------------------------------- the loop */

static uint64_t next_deadline(struct daemon *d)
{
	uint64_t t = UINT64_MAX;

#define MIN_T(x) if ((x) && (x) < t) t = (x)
	for (struct dcmd *dc = d->inflight; dc; dc = dc->next)
		MIN_T(dc->deadline);
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (d->clients[i] && !d->clients[i]->dead && d->clients[i]->st != C_BUSY &&
		    d->clients[i]->st != C_DETACH_WAIT)
			MIN_T(d->clients[i]->deadline);
	MIN_T(d->relogin_at);
	MIN_T(d->idle_deadline);
	MIN_T(d->shutdown_deadline);
#undef MIN_T
	return t;
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			continue;
		if (d->shutting_down) {
			d_log(d, "second signal: exiting now");
			d->exit_now = true;
			return;
		}
		d_log(d, "signal %u: detaching, logging out", si.ssi_signo);
		d->shutting_down = true;
		d->shutdown_deadline = ax_now_ms() + SHUTDOWN_MS;
		for (int i = 0; i < CTL_MAX_ATTACH; i++)
			if (d->att[i])
				att_shutdown(d->att[i]);
	}
}

static void housekeeping(struct daemon *d)
{
	uint64_t now = ax_now_ms();

	check_cmd_deadlines(d, now);
	if (d->reset_needed)
		session_reset(d);
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = d->clients[i];
		if (!c)
			continue;
		d_client_process(c);
		if (!c->dead && c->st != C_BUSY && c->st != C_DETACH_WAIT && now >= c->deadline)
			d_client_close(c);
		if (c->dead && !c->dc.inflight) {
			free(c->buf);
			free(c);
			d->clients[i] = NULL;
		}
	}
	for (int i = 0; i < CTL_MAX_ATTACH; i++)
		if (d->att[i] && att_ended(d->att[i])) {
			att_free(d->att[i]);
			d->att[i] = NULL;
			d->natt--;
		}
	if (d->relogin_at && now >= d->relogin_at && !d->logout_started)
		start_login(d);
	if (d->shutdown_deadline && now >= d->shutdown_deadline) {
		d_log(d, "shutdown took longer than %d ms: exiting", SHUTDOWN_MS);
		d->exit_now = true;
	}
	if (d->shutting_down && d->natt == 0)
		d_start_logout(d, "signal");
	else if (!d->persistent && d->had_attach && d->natt == 0)
		d_start_logout(d, "the last attachment is gone");
	else if (d->idle_deadline && now >= d->idle_deadline && d->natt == 0 && !d->persistent)
		d_start_logout(d, "started for an attach that never came");
}

static void loop(struct daemon *d)
{
	struct pollfd pfd[3 + MAX_CLIENTS + CTL_MAX_ATTACH];
	void *who[3 + MAX_CLIENTS + CTL_MAX_ATTACH];
	char kind[3 + MAX_CLIENTS + CTL_MAX_ATTACH];

	while (!d->exit_now) {
		int n = 0, tmo = ix_ctx_timeout_ms(d->ctx);
		uint64_t dl = next_deadline(d), now = ax_now_ms();

#define ADD(fd_, ev, k, w) (pfd[n] = (struct pollfd){.fd = (fd_), .events = (ev)}, \
			    kind[n] = (k), who[n++] = (w))
		ADD(ix_ctx_fd(d->ctx), POLLIN, 'x', NULL);
		ADD(d->sig_fd, POLLIN, 's', NULL);
		if (!d->shutting_down)
			ADD(d->listen_fd, POLLIN, 'l', NULL);
		for (int i = 0; i < MAX_CLIENTS; i++) {
			struct client *c = d->clients[i];
			if (c && !c->dead)
				ADD(c->fd, c->st == C_REPLY ? POLLOUT
					   : c->st == C_BUSY || c->st == C_DETACH_WAIT ? POLLRDHUP
					   : POLLIN, 'c', c);
		}
		for (int i = 0; i < CTL_MAX_ATTACH; i++)
			if (d->att[i] && att_poll_fd(d->att[i]) >= 0)
				ADD(att_poll_fd(d->att[i]), POLLIN, 'a', d->att[i]);
#undef ADD
		if (dl != UINT64_MAX) {
			uint64_t w = dl > now ? dl - now : 0;
			if (tmo < 0 || w < (uint64_t)tmo)
				tmo = w > INT32_MAX ? INT32_MAX : (int)w;
		}
		if (poll(pfd, (nfds_t)n, tmo) < 0 && errno != EINTR) {
			d_log(d, "poll: %s", strerror(errno));
			d->exit_code = AX_ERR_INTERNAL;
			break;
		}
		ix_ctx_service(d->ctx, 0);
		for (int i = 0; i < n && !d->exit_now; i++) {
			if (!pfd[i].revents)
				continue;
			switch (kind[i]) {
			case 's': on_signal(d); break;
			case 'l': d_accept_client(d); break;
			case 'c': {
				struct client *c = who[i];
				if (c->dead)
					break;
				if ((c->st == C_BUSY || c->st == C_DETACH_WAIT) &&
				    (pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
					d_client_close(c); /* gone while waiting */
				else if (c->st == C_REPLY)
					d_client_flush(c);
				else
					d_client_readable(c);
				d_client_process(c);
				break;
			}
			case 'a': att_readable(who[i]); break;
			default: break;
			}
		}
		housekeeping(d);
	}
}

/* Replies queued when the loop ends (a logout's OK) still go out, within a second. */
static void final_flush(struct daemon *d)
{
	uint64_t deadline = ax_now_ms() + 1000;

	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = d->clients[i];
		while (c && !c->dead && c->st == C_REPLY && ax_now_ms() < deadline) {
			struct pollfd p = {.fd = c->fd, .events = POLLOUT};
			poll(&p, 1, 100);
			d_client_flush(c);
		}
	}
}

/* ---------------------------------------------------------------- set-up */

static int listen_on(struct daemon *d, char *err, size_t errlen)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	d->lock_fd = open(d->paths.lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0) {
		snprintf(err, errlen, "%.300s: %s", d->paths.lock, strerror(errno));
		return AX_ERR_IDBM;
	}
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		snprintf(err, errlen, "a session to %s at %s already exists", d->rec.name,
			 d->cfg.portal);
		return AX_ERR_SESS_EXISTS;
	}
	unlink(d->paths.sock); /* we hold the lock: any socket there is a dead daemon's */
	strcpy(a.sun_path, d->paths.sock);
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->listen_fd < 0 || bind(d->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(d->listen_fd, 16) < 0) {
		snprintf(err, errlen, "control socket %.108s: %s", d->paths.sock, strerror(errno));
		return AX_ERR_INTERNAL;
	}
	return 0;
}

static int setup(struct daemon *d, const char *target, const char *portal, char *err,
		 size_t errlen)
{
	struct node_list l;
	struct ax_portal p;
	char initiator[AX_NAME_MAX];
	sigset_t ss;
	int r;

	if (ax_portal_parse(portal, &p) < 0 || !ax_iscsi_name_ok(target)) {
		snprintf(err, errlen, "bad target name or portal");
		return AX_ERR_INVAL;
	}
	/* the record's settings when there is one, the defaults otherwise */
	node_defaults(&d->rec);
	snprintf(d->rec.name, sizeof(d->rec.name), "%s", target);
	snprintf(d->rec.address, sizeof(d->rec.address), "%s", p.host);
	d->rec.port = p.port;
	d->rec.tpgt = p.tpgt;
	if (node_list_load(d->db, &l) == 0) {
		for (int i = 0; i < l.n; i++)
			if (node_match(&l.recs[i], target, &p)) {
				d->rec = l.recs[i];
				break;
			}
		node_list_free(&l);
	}
	if (d->rec.initiatorname[0])
		snprintf(initiator, sizeof(initiator), "%s", d->rec.initiatorname);
	else if ((r = ax_initiator_name(d->db, true, initiator, sizeof(initiator))) < 0) {
		snprintf(err, errlen, "no initiator name: %s", strerror(-r));
		return AX_ERR_IDBM;
	}
	if (node_to_cfg(&d->rec, initiator, &d->cfg, err, errlen) < 0)
		return AX_ERR_INVAL;
	if (ctl_paths(d->db, target, &p, &d->paths) < 0) {
		snprintf(err, errlen, "database path too long for a Unix socket");
		return AX_ERR_INVAL;
	}
	r = listen_on(d, err, errlen);
	if (r)
		return r;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->sig_fd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	d->ctx = ix_ctx_new();
	if (d->sig_fd < 0 || !d->ctx) {
		snprintf(err, errlen, "out of resources");
		return AX_ERR_NOMEM;
	}
	r = session_create(d, err, errlen);
	if (r < 0)
		return ax_errno_exit(r);
	d->relogin_delay = RELOGIN_MIN_MS;
	return 0;
}

int ax_serve(const char *db, const char *target, const char *portal, bool ephemeral,
	     int notify_fd, int debug)
{
	struct daemon *d = calloc(1, sizeof(*d));
	char err[512];
	int r;

	if (!d)
		return AX_ERR_NOMEM;
	umask(077);
	if (chdir("/") < 0) /* keep no file system busy; the database path is absolute */
		return AX_ERR_INTERNAL;
	d->db = db;
	d->notify_fd = notify_fd;
	d->listen_fd = d->lock_fd = d->sig_fd = -1;
	d->persistent = !ephemeral;
	d->st = D_LOGIN;
	ix_set_log_level(debug ? debug : 1);
	r = setup(d, target, portal, err, sizeof(err));
	if (r) {
		d_log(d, "%s", err);
		report(d, r, err);
	} else {
		d_log(d, "session daemon for %s at %s (initiator %s)", target, d->cfg.portal,
		      d->cfg.initiator);
		start_login(d);
		loop(d);
		final_flush(d);
		r = d->exit_code;
	}
	/* the session first: what it still holds completes into live attachments and clients */
	if (d->s)
		ix_session_free(d->s);
	d->s = NULL;
	for (int i = 0; i < CTL_MAX_ATTACH; i++)
		if (d->att[i]) {
			att_shutdown(d->att[i]);
			att_free(d->att[i]);
		}
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (d->clients[i]) {
			d_client_close(d->clients[i]);
			free(d->clients[i]->buf);
			free(d->clients[i]);
		}
	if (d->ctx)
		ix_ctx_free(d->ctx);
	if (d->listen_fd >= 0) {
		unlink(d->paths.sock); /* before the lock goes: a successor may already bind */
		close(d->listen_fd);
	}
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	if (d->sig_fd >= 0)
		close(d->sig_fd);
	report(d, AX_ERR_INTERNAL, "the daemon ended before logging in");
	d_log(d, "exit %d", r);
	explicit_bzero(d, sizeof(*d));
	free(d);
	return r;
}
