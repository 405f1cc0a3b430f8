/* `ixadm --serve`: the control socket's clients (the protocol in ixadm.h): requests read,
 * SCSI commands and attachments served, replies sent (ixadm_daemon_int.h). */
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

/* ---------------------------------------------------------------- control clients */

static void client_reply(struct client *c, const uint8_t *data, size_t dlen, const char *fmt,
			 ...) __attribute__((format(printf, 4, 5)));
static void client_reply(struct client *c, const uint8_t *data, size_t dlen, const char *fmt,
			 ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(c->hdr, sizeof(c->hdr) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(c->hdr) - 1)
		n = (int)sizeof(c->hdr) - 2;
	for (int i = 0; i < n; i++)
		if (c->hdr[i] == '\n')
			c->hdr[i] = ' ';
	c->hdr[n++] = '\n';
	c->hlen = (size_t)n;
	c->hsent = 0;
	c->data = data;
	c->dlen = dlen;
	c->dsent = 0;
	c->st = C_REPLY;
	c->deadline = ax_now_ms() + CLIENT_IO_MS;
}

void d_client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->dead = true;
	c->waiting = NULL;
	c->logout_waiter = false;
}

static int client_buf(struct client *c)
{
	if (!c->buf)
		c->buf = malloc(AX_IO_MAX);
	return c->buf ? 0 : -ENOMEM;
}

void d_client_flush(struct client *c)
{
	while (c->hsent < c->hlen || c->dsent < c->dlen) {
		struct iovec iov[2];
		int n = 0;
		ssize_t w;

		if (c->hsent < c->hlen)
			iov[n++] = (struct iovec){c->hdr + c->hsent, c->hlen - c->hsent};
		if (c->dsent < c->dlen)
			iov[n++] = (struct iovec){(void *)(c->data + c->dsent), c->dlen - c->dsent};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			d_client_close(c);
			return;
		}
		size_t h = c->hlen - c->hsent < (size_t)w ? c->hlen - c->hsent : (size_t)w;
		c->hsent += h;
		c->dsent += (size_t)w - h;
		c->deadline = ax_now_ms() + CLIENT_IO_MS;
	}
	if (c->close_after) {
		d_client_close(c);
		return;
	}
	c->st = c->after_reply;
	c->after_reply = C_LINE;
	c->deadline = ax_now_ms() + CLIENT_IDLE_MS;
}

static void scsi_done(struct dcmd *dc)
{
	struct client *c = dc->owner;
	const struct ix_scsi_cmd *cmd = &dc->cmd;
	char sense[2 * sizeof(cmd->sense) + 1] = "-", msg[256];
	size_t dlen = 0;

	if (c->dead)
		return;
	if (cmd->err) {
		const char *why = dc->timed_out ? "" : c->d->s ? ix_session_error(c->d->s)
							     : c->d->last_error;
		d_cmd_result_str(dc, msg, sizeof(msg));
		client_reply(c, NULL, 0, "ERR %d command failed: %s%s%s", ax_errno_exit(cmd->err),
			     msg, *why ? ": " : "", why);
	} else {
		if (cmd->dir == IX_DIR_READ && cmd->status == 0)
			dlen = cmd->underflow && cmd->residual < cmd->len ? cmd->len - cmd->residual
			       : cmd->underflow ? 0 : cmd->len;
		if (cmd->sense_len)
			ax_hex(cmd->sense, cmd->sense_len, sense);
		client_reply(c, c->buf, dlen, "OK %zu %u %u %c %s", dlen, cmd->status,
			     cmd->residual, cmd->underflow ? 'u' : cmd->overflow ? 'o' : '-', sense);
	}
	d_client_flush(c);
}

static void scsi_submit(struct client *c)
{
	int r = d_submit(c->d, &c->dc, c->tmo);

	if (r < 0) {
		client_reply(c, NULL, 0, "ERR %d session not usable: %s%s%s", ax_errno_exit(r),
			     strerror(-r), c->d->last_error[0] ? ": " : "", c->d->last_error);
		return;
	}
	c->st = C_BUSY;
}

/* scsi <lun> <r|w|n> <len> <timeout ms> <cdb hex> */
static void req_scsi(struct client *c, const char *args)
{
	unsigned lun, len, tmo;
	char dir, hex[64];
	uint8_t cdb[16];
	int n;

	if (sscanf(args, "%u %c %u %u %63s", &lun, &dir, &len, &tmo, hex) != 5 || lun > 16383 ||
	    len > AX_IO_MAX || (dir != 'r' && dir != 'w' && dir != 'n') || tmo > 3600000 ||
	    (dir == 'n' && len) || (n = ax_unhex(hex, cdb, sizeof(cdb))) < 6) {
		client_reply(c, NULL, 0, "ERR %d malformed scsi request", AX_ERR_INVAL);
		c->close_after = true; /* a payload may follow that we will not read */
		return;
	}
	if (len && client_buf(c) < 0) {
		client_reply(c, NULL, 0, "ERR %d out of memory", AX_ERR_NOMEM);
		c->close_after = true;
		return;
	}
	ix_scsi_cmd_init(&c->dc.cmd, lun, cdb, (uint8_t)n,
			 dir == 'r' ? IX_DIR_READ : dir == 'w' ? IX_DIR_WRITE : IX_DIR_NONE,
			 len ? c->buf : NULL, len, NULL, NULL);
	c->dc.owner = c;
	c->dc.cb = scsi_done;
	c->tmo = tmo;
	if (dir == 'w' && len) {
		c->plen = len;
		c->pgot = 0;
		c->st = C_PAYLOAD;
		c->deadline = ax_now_ms() + CLIENT_IO_MS;
		return;
	}
	scsi_submit(c);
}

static int info_text(struct daemon *d, char *buf, size_t cap)
{
	struct ix_session_info si;
	char isid[13] = "";
	size_t n = 0;

#define P(...) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__)
	memset(&si, 0, sizeof(si));
	if (d->s)
		ix_session_get_info(d->s, &si);
	ax_hex(si.isid, 6, isid);
	P("pid=%d\ntarget=%s\nportal=%s\ncurrent_portal=%s\ntpgt=%u\nstate=%s\n", (int)getpid(),
	  d->rec.name, d->cfg.portal, si.portal, si.tpgt, d_state_name[d->st]);
	P("persistent=%s\ninitiator=%s\ntransport=%s\nisid=%s\ntsih=%u\n",
	  d->persistent ? "yes" : "no", d->cfg.initiator, d->cfg.o.transport, isid, si.tsih);
	P("target_alias=%s\nheader_digest=%s\ndata_digest=%s\n", si.target_alias,
	  si.header_digest ? "CRC32C" : "None", si.data_digest ? "CRC32C" : "None");
	P("max_recv_dsl=%u\nmax_xmit_dsl=%u\nfirst_burst=%u\nmax_burst=%u\n", si.max_recv_dsl,
	  si.max_xmit_dsl, si.first_burst_length, si.max_burst_length);
	P("immediate_data=%s\ninitial_r2t=%s\ncmdsn_window=%u\noutstanding=%u\n",
	  si.immediate_data ? "Yes" : "No", si.initial_r2t ? "Yes" : "No", si.cmdsn_window,
	  si.outstanding);
	P("recoveries=%u\nresets=%u\nreplacement_timeout=%u\nlast_error=%s\n", si.recoveries,
	  d->resets, d->rec.replacement_timeout, d->last_error);
	for (int i = 0; i < CTL_MAX_ATTACH; i++)
		if (d->att[i])
			P("attach=%u %s\n", att_lun(d->att[i]), att_path(d->att[i]));
#undef P
	return n < cap ? (int)n : -EMSGSIZE;
}

static void req_attach(struct client *c, char *args)
{
	struct daemon *d = c->d;
	unsigned lun, bs;
	unsigned long long blocks;
	char flags[8], err[512];
	int off = 0, slot = -1;
	struct attach *a;

	if (sscanf(args, "%u %llu %u %7s %n", &lun, &blocks, &bs, flags, &off) != 4 || !off ||
	    args[off] != '/' || lun > 16383) {
		client_reply(c, NULL, 0, "ERR %d malformed attach request", AX_ERR_INVAL);
		return;
	}
	for (int i = 0; i < CTL_MAX_ATTACH; i++) {
		if (d->att[i] && strcmp(att_path(d->att[i]), args + off) == 0) {
			client_reply(c, NULL, 0, "ERR %d %s is already attached", AX_ERR_BUSY,
				     args + off);
			return;
		}
		if (!d->att[i] && slot < 0)
			slot = i;
	}
	if (slot < 0 || d->shutting_down || d->logout_started) {
		client_reply(c, NULL, 0, "ERR %d %s", AX_ERR_BUSY,
			     slot < 0 ? "too many attachments in this session" : "logging out");
		return;
	}
	a = att_new(d, lun, blocks, bs, flags, args + off, err, sizeof(err));
	if (!a) {
		client_reply(c, NULL, 0, "ERR %d %s", AX_ERR, err);
		return;
	}
	d->att[slot] = a;
	d->natt++;
	d->had_attach = true;
	d->idle_deadline = 0;
	d_log(d, "attached LUN %u at %s (%llu blocks of %u bytes)", lun, args + off, blocks, bs);
	client_reply(c, NULL, 0, "OK 0");
}

static void req_detach(struct client *c, const char *path)
{
	struct daemon *d = c->d;

	for (int i = 0; i < CTL_MAX_ATTACH; i++)
		if (d->att[i] && strcmp(att_path(d->att[i]), path) == 0) {
			c->waiting = d->att[i];
			client_reply(c, NULL, 0, "OK 0 unmount it now; DONE follows");
			c->after_reply = C_DETACH_WAIT;
			return;
		}
	client_reply(c, NULL, 0, "ERR %d %s is not attached in this session", AX_ERR_NO_OBJS,
		     path);
}

static void handle_request(struct client *c, char *line)
{
	struct daemon *d = c->d;
	char *args = strchr(line, ' ');

	if (args)
		*args++ = 0;
	else
		args = line + strlen(line);
	if (strcmp(line, "info") == 0) {
		int n;
		if (client_buf(c) < 0 || (n = info_text(d, (char *)c->buf, AX_IO_MAX)) < 0) {
			client_reply(c, NULL, 0, "ERR %d out of memory", AX_ERR_NOMEM);
			return;
		}
		client_reply(c, c->buf, (size_t)n, "OK %d", n);
	} else if (strcmp(line, "scsi") == 0) {
		req_scsi(c, args);
	} else if (strcmp(line, "attach") == 0) {
		req_attach(c, args);
	} else if (strcmp(line, "detach") == 0) {
		req_detach(c, args);
	} else if (strcmp(line, "persist") == 0) {
		d->persistent = true;
		d->idle_deadline = 0;
		client_reply(c, NULL, 0, "OK 0");
	} else if (strcmp(line, "logout") == 0) {
		if (d->natt > 0) {
			client_reply(c, NULL, 0, "ERR %d %d LUN(s) attached: ixadm detach FILE first",
				     AX_ERR_BUSY, d->natt);
			return;
		}
		c->logout_waiter = true;
		c->st = C_BUSY;
		d_start_logout(d, "requested");
	} else {
		client_reply(c, NULL, 0, "ERR %d unknown request \"%.64s\"", AX_ERR_INVAL, line);
	}
}

void d_client_readable(struct client *c)
{
	if (c->st == C_PAYLOAD) {
		ssize_t n = recv(c->fd, c->buf + c->pgot, c->plen - c->pgot, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			d_client_close(c);
			return;
		}
		if (n > 0) {
			c->pgot += (size_t)n;
			c->deadline = ax_now_ms() + CLIENT_IO_MS;
		}
		if (c->pgot == c->plen)
			scsi_submit(c);
		return;
	}
	if (c->st != C_LINE)
		return;
	ssize_t n = recv(c->fd, c->line + c->llen, sizeof(c->line) - 1 - c->llen, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		d_client_close(c);
		return;
	}
	if (n < 0)
		return;
	c->llen += (size_t)n;
	c->deadline = ax_now_ms() + CLIENT_IDLE_MS;
	if (!memchr(c->line, '\n', c->llen) && c->llen == sizeof(c->line) - 1)
		d_client_close(c); /* a line that long is not ours */
}

/* A complete request line is buffered and the client is ready for it: serve it. (Called
 * after reads and from housekeeping, so a request that arrived with the previous one is not
 * left waiting for more input.) */
void d_client_process(struct client *c)
{
	char line[CTL_LINE_MAX], *nl;
	size_t rest;

	if (c->dead || c->st != C_LINE || !(nl = memchr(c->line, '\n', c->llen)))
		return;
	*nl = 0;
	rest = c->llen - (size_t)(nl + 1 - c->line);
	memcpy(line, c->line, (size_t)(nl - c->line) + 1);
	memmove(c->line, nl + 1, rest);
	c->llen = rest;
	handle_request(c, line);
	if (c->st == C_PAYLOAD && c->llen) {
		/* the payload's first bytes came with the line */
		size_t take = c->llen < c->plen ? c->llen : c->plen;
		memcpy(c->buf, c->line, take);
		c->pgot = take;
		memmove(c->line, c->line + take, c->llen - take);
		c->llen -= take;
		if (c->pgot == c->plen)
			scsi_submit(c);
	}
	if (c->st == C_REPLY)
		d_client_flush(c);
}

void d_accept_client(struct daemon *d)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	int slot = -1;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
	    (cr.uid != 0 && cr.uid != getuid())) {
		close(fd);
		return;
	}
	for (int i = 0; i < MAX_CLIENTS && slot < 0; i++)
		if (!d->clients[i])
			slot = i;
	struct client *c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		close(fd);
		return;
	}
	c->d = d;
	c->fd = fd;
	c->st = C_LINE;
	c->after_reply = C_LINE;
	c->deadline = ax_now_ms() + CLIENT_IDLE_MS;
	d->clients[slot] = c;
}

void d_attach_ended(struct daemon *d, struct attach *a, int code, const char *msg)
{
	d_log(d, "LUN %u at %s detached%s%s", att_lun(a), att_path(a), code ? ": " : "",
	      code ? msg : "");
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = d->clients[i];
		if (!c || c->dead || c->waiting != a)
			continue;
		c->waiting = NULL;
		if (c->st == C_REPLY && c->dlen == 0 &&
		    c->hlen + 300 < sizeof(c->hdr)) { /* "OK 0" not yet out: DONE right after */
			c->hlen += (size_t)snprintf(c->hdr + c->hlen, sizeof(c->hdr) - c->hlen,
						    "DONE %d %.250s\n", code, msg);
			c->after_reply = C_LINE;
		} else {
			client_reply(c, NULL, 0, "DONE %d %s", code, msg);
			d_client_flush(c);
		}
	}
}

