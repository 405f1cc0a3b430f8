/* The management socket and the JSON-RPC framing (rpc.h). */
#include "mgmt/rpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/list.h"
#include "util/log.h"

/* ---- framing ------------------------------------------------------------------------------ */

/* Requests are found by a scanner that follows strings and brackets, so that a value is handed
 * to the JSON parser only when it is complete (jansson would call a truncated token a syntax
 * error), in time linear in the input. */
struct rpc_stream {
	struct ix_mgmt *m;
	struct ix_mgmt_caller who;
	rpc_emit_fn emit;
	void *arg;
	char *buf;
	size_t len, cap;
	size_t scan;   /* bytes of buf scanned */
	int depth;
	bool in_str, esc;
	struct ix_mgmt_op *op;    /* a request whose answer comes later: the rest waits */
	bool failed;              /* a request after a late answer was not JSON (answered) */
	uint64_t completed;       /* requests taken from the buffer so far */
	void (*resumed)(void *arg); /* after a late answer was emitted */
};

struct rpc_stream *rpc_stream_new(struct ix_mgmt *m, const struct ix_mgmt_caller *who,
				  rpc_emit_fn emit, void *arg)
{
	struct rpc_stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->m = m;
	st->who = *who;
	st->emit = emit;
	st->arg = arg;
	return st;
}

void rpc_stream_set_resumed(struct rpc_stream *st, void (*fn)(void *arg))
{
	st->resumed = fn;
}

void rpc_stream_free(struct rpc_stream *st)
{
	if (!st)
		return;
	ix_mgmt_op_cancel(st->op);
	free(st->buf);
	free(st);
}

size_t rpc_stream_pending(const struct rpc_stream *st)
{
	return st->op ? 0 : st->len;
}

bool rpc_stream_failed(const struct rpc_stream *st)
{
	return st->failed;
}

bool rpc_stream_waiting(const struct rpc_stream *st)
{
	return st->op != NULL;
}

uint64_t rpc_stream_completed(const struct rpc_stream *st)
{
	return st->completed;
}

static void emit_json(rpc_emit_fn emit, void *arg, json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	if (!s) {
		static const char oom[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,"
					  "\"message\":\"out of memory\"}}\n";
		emit(arg, oom, sizeof(oom) - 1);
		return;
	}
	size_t n = strlen(s);
	char *line = realloc(s, n + 2);
	if (line) {
		line[n] = '\n';
		line[n + 1] = '\0';
		emit(arg, line, n + 1);
		free(line);
	} else {
		emit(arg, s, n);
		emit(arg, "\n", 1);
		free(s);
	}
}

void rpc_emit_error(rpc_emit_fn emit, void *arg, int code, const char *msg)
{
	json_t *r = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			      code, "message", msg);

	emit_json(emit, arg, r);
	json_decref(r);
}

static int process(struct rpc_stream *st);

/* The late answer of the request the stream waits for; then the requests behind it. */
static void late_answer(void *arg, json_t *resp)
{
	struct rpc_stream *st = arg;

	st->op = NULL;
	if (resp)
		emit_json(st->emit, st->arg, resp);
	if (process(st) < 0)
		st->failed = true;
	if (st->resumed)
		st->resumed(st->arg);
}

/* One complete value in buf[0..n): 0, 1 (its answer comes later) or -EPROTO. */
static int handle(struct rpc_stream *st, const char *p, size_t n)
{
	st->completed++;
	json_error_t je;
	json_t *req = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je), *resp;
	char msg[256];

	if (!req) {
		snprintf(msg, sizeof(msg), "parse error: %s (byte %d)", je.text, je.position);
		rpc_emit_error(st->emit, st->arg, -32700, msg);
		return -EPROTO;
	}
	resp = ix_mgmt_call_async(st->m, req, &st->who, late_answer, st, &st->op);
	if (resp) {
		emit_json(st->emit, st->arg, resp);
		json_decref(resp);
	} else if (!st->op && json_is_object(req) && json_object_get(req, "id")) {
		/* a request (not a notification) must be answered, whatever failed */
		rpc_emit_error(st->emit, st->arg, -32603, "internal error: no answer could be built");
	}
	json_decref(req);
	return st->op ? 1 : 0;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

int rpc_stream_feed(struct rpc_stream *st, const char *data, size_t len)
{
	if (st->failed)
		return -EPROTO;
	if (len == 0)
		return 0;
	if (len > MGMT_MAX_REQUEST - st->len) {
		rpc_emit_error(st->emit, st->arg, MGMT_ERR_LIMIT,
			       "request too large (at most 1048576 bytes)");
		return -EMSGSIZE;
	}
	if (st->len + len > st->cap) {
		size_t cap = st->cap ? st->cap : 4096;
		char *b;
		while (cap < st->len + len)
			cap *= 2;
		b = realloc(st->buf, cap);
		if (!b) {
			rpc_emit_error(st->emit, st->arg, -32603, "out of memory");
			return -ENOMEM;
		}
		st->buf = b;
		st->cap = cap;
	}
	memcpy(st->buf + st->len, data, len);
	st->len += len;
	return process(st);
}

/* Answer the complete requests in the buffer, up to one whose answer comes later. */
static int process(struct rpc_stream *st)
{
	size_t start = 0, i;

	if (st->op)
		return 0;
	for (i = st->scan; i < st->len; i++) {
		char ch = st->buf[i];

		if (st->in_str) {
			if (st->esc)
				st->esc = false;
			else if (ch == '\\')
				st->esc = true;
			else if (ch == '"')
				st->in_str = false;
			continue;
		}
		if (st->depth == 0) {
			if (is_space(ch)) {
				start = i + 1;
				continue;
			}
			if (ch != '{' && ch != '[') {
				rpc_emit_error(st->emit, st->arg, -32700,
					       "parse error: a request is a JSON object or array");
				return -EPROTO;
			}
		}
		if (ch == '"') {
			st->in_str = true;
		} else if (ch == '{' || ch == '[') {
			if (++st->depth > MGMT_MAX_DEPTH) {
				rpc_emit_error(st->emit, st->arg, MGMT_ERR_LIMIT,
					       "request nested too deeply");
				return -EMSGSIZE;
			}
		} else if (ch == '}' || ch == ']') {
			if (--st->depth == 0) {
				int r = handle(st, st->buf + start, i + 1 - start);
				if (r < 0)
					return r;
				start = i + 1;
				if (r > 0) { /* wait: the rest is scanned again later */
					i++;
					break;
				}
			}
		}
	}
	/* keep what follows (unscanned when waiting, an unfinished request otherwise) */
	memmove(st->buf, st->buf + start, st->len - start);
	st->len -= start;
	st->scan = i - start;
	return 0;
}

/* ---- the socket --------------------------------------------------------------------------- */

struct rpc_client {
	struct rpc_server *srv;
	struct list_head link;
	struct ev_io io;
	struct ev_timer timer;    /* request completion, or idle */
	struct ev_defer free_d;
	struct rpc_stream *st;
	char *out;
	size_t olen, ocap, ooff;
	bool overflow;
	bool closing;             /* close once the output is written */
	bool lingering;           /* output written and shut down: reading until the peer closes
				     (closing with unread input would reset the connection, and the
				     peer might lose the answer) */
	bool dead;
	bool eof;                 /* the client shut down its side; answers still to come */
	bool timing_request;      /* the timer bounds the request being received */
	uint64_t seen_completed;  /* rpc_stream_completed() when the timer was armed */
	struct ix_mgmt_caller who;
};

struct rpc_server {
	struct ix_mgmt *m;
	struct ev_loop *loop;
	struct ev_io io;
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	gid_t group;
	struct list_head clients;
	int nclients;
	uint64_t denied, refused;
};

static void client_free_deferred(void *arg)
{
	struct rpc_client *c = arg;

	rpc_stream_free(c->st);
	free(c->out);
	free(c);
}

static void client_teardown(struct rpc_client *c)
{
	c->dead = true;
	ev_io_stop(c->srv->loop, &c->io);
	ev_timer_stop(c->srv->loop, &c->timer);
	close(c->io.fd);
	list_del(&c->link);
	c->srv->nclients--;
}

/* From a callback: the client may still be named in the loop's current batch. */
static void client_close(struct rpc_client *c)
{
	if (c->dead)
		return;
	client_teardown(c);
	ev_defer(c->srv->loop, &c->free_d, client_free_deferred, c);
}

static void emit_out(void *arg, const char *p, size_t n)
{
	struct rpc_client *c = arg;

	if (c->overflow)
		return;
	if (c->olen - c->ooff + n > RPC_MAX_OUTPUT) {
		c->overflow = true;
		return;
	}
	if (c->ooff && c->ooff == c->olen)
		c->ooff = c->olen = 0;
	if (c->olen + n > c->ocap) {
		size_t cap = c->ocap ? c->ocap : 4096;
		char *b;
		if (c->ooff) {
			memmove(c->out, c->out + c->ooff, c->olen - c->ooff);
			c->olen -= c->ooff;
			c->ooff = 0;
		}
		while (cap < c->olen + n)
			cap *= 2;
		b = cap > c->ocap ? realloc(c->out, cap) : c->out;
		if (!b) {
			c->overflow = true;
			return;
		}
		c->out = b;
		c->ocap = cap > c->ocap ? cap : c->ocap;
	}
	memcpy(c->out + c->olen, p, n);
	c->olen += n;
}

/* Write what the socket takes; arm EPOLLOUT for the rest. */
static void client_flush(struct rpc_client *c)
{
	while (c->ooff < c->olen) {
		ssize_t w = send(c->io.fd, c->out + c->ooff, c->olen - c->ooff, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			client_close(c);
			return;
		}
		c->ooff += (size_t)w;
	}
	if (c->ooff == c->olen && c->closing) {
		if (!c->lingering) {
			c->lingering = true;
			shutdown(c->io.fd, SHUT_WR);
		}
		ev_io_modify(c->srv->loop, &c->io, EPOLLIN);
		return;
	}
	ev_io_modify(c->srv->loop, &c->io,
		     (c->closing ? 0 : EPOLLIN) | (c->ooff < c->olen ? EPOLLOUT : 0));
}

static void client_end(struct rpc_client *c)
{
	c->closing = true;
	ev_timer_start(c->srv->loop, &c->timer, 1000); /* a client that does not read */
	client_flush(c);
}

/* A request that has begun must be complete within RPC_REQUEST_TIMEOUT_MS of its first byte,
 * however slowly it trickles in; otherwise the connection may stay idle that long. */
static void client_arm_timer(struct rpc_client *c)
{
	bool partial = rpc_stream_pending(c->st) > 0;
	uint64_t done = rpc_stream_completed(c->st);

	if (partial && c->timing_request && done == c->seen_completed)
		return; /* the same request is still arriving: its deadline stands */
	c->timing_request = partial;
	c->seen_completed = done;
	ev_timer_start(c->srv->loop, &c->timer,
		       partial ? RPC_REQUEST_TIMEOUT_MS : RPC_IDLE_TIMEOUT_MS);
}

static void on_client_timer(struct ev_timer *t)
{
	struct rpc_client *c = t->arg;

	if (c->closing) {
		client_close(c);
		return;
	}
	if (rpc_stream_pending(c->st)) {
		log_info("mgmt", "rpc client pid %d: request incomplete after %u ms: closing",
			 (int)c->who.pid, RPC_REQUEST_TIMEOUT_MS);
		rpc_emit_error(emit_out, c, MGMT_ERR_LIMIT,
			       "request incomplete after 5000 ms: closing the connection");
	}
	client_end(c);
}

/* A late answer was emitted (and maybe more behind it). */
static void client_resumed(void *arg)
{
	struct rpc_client *c = arg;

	if (c->dead)
		return;
	if (rpc_stream_failed(c->st) || c->overflow) {
		client_end(c);
		return;
	}
	if (c->eof && !rpc_stream_waiting(c->st)) {
		client_end(c);
		return;
	}
	client_arm_timer(c);
	client_flush(c);
}

static void on_client(struct ev_io *w, uint32_t revents)
{
	struct rpc_client *c = w->arg;
	char buf[16384];

	if (revents & EPOLLOUT) {
		client_flush(c);
		if (c->dead)
			return;
	}
	if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	/* one read per wakeup: other clients and the listeners get their turn */
	ssize_t n = recv(w->fd, buf, sizeof(buf), 0);
	if (c->closing) { /* input is discarded now; the peer's close ends it */
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			client_close(c);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		client_close(c);
		return;
	}
	if (n == 0) { /* the client is done sending: answer what it sent, then close */
		if (rpc_stream_waiting(c->st)) {
			c->eof = true; /* after the late answers */
			ev_io_modify(c->srv->loop, &c->io, c->ooff < c->olen ? EPOLLOUT : 0);
			return;
		}
		client_end(c);
		return;
	}
	if (rpc_stream_feed(c->st, buf, (size_t)n) < 0 || c->overflow) {
		if (c->overflow)
			log_warn("mgmt", "rpc client pid %d does not read its responses: closing",
				 (int)c->who.pid);
		client_end(c);
		return;
	}
	client_arm_timer(c);
	client_flush(c);
}

/* Clients being served (not those closing). */
static int nserved(const struct rpc_server *s)
{
	const struct list_head *pos;
	int n = 0;

	list_for_each(pos, &s->clients)
		n += !list_entry(pos, struct rpc_client, link)->closing;
	return n;
}

static bool peer_allowed(struct rpc_server *s, int fd, struct ucred *uc)
{
	socklen_t len = sizeof(*uc);
	gid_t groups[256];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len) < 0)
		return false;
	if (uc->uid == 0 || uc->uid == geteuid())
		return true;
	if (s->group == (gid_t)-1)
		return false;
	if (uc->gid == s->group)
		return true;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return false;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == s->group)
			return true;
	return false;
}

static struct rpc_client *client_new(struct rpc_server *s, int fd, const struct ucred *uc,
				     bool serve)
{
	struct rpc_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->srv = s;
	c->who = (struct ix_mgmt_caller){.pid = uc->pid, .uid = uc->uid};
	if (serve && !(c->st = rpc_stream_new(s->m, &c->who, emit_out, c))) {
		free(c);
		return NULL;
	}
	if (c->st)
		rpc_stream_set_resumed(c->st, client_resumed);
	ev_io_init(&c->io, fd, on_client, c);
	ev_timer_init(&c->timer, on_client_timer, c);
	if (ev_io_start(s->loop, &c->io, EPOLLIN) < 0) {
		rpc_stream_free(c->st);
		free(c);
		return NULL;
	}
	list_add_tail(&c->link, &s->clients);
	s->nclients++;
	return c;
}

/* A refusal is answered, then the connection lingers until the peer closes it (at most 1 s),
 * so that the answer is not lost to a reset; past RPC_MAX_CLIENTS more it is just closed. */
static void refuse(struct rpc_server *s, int fd, const struct ucred *uc, int code,
		   const char *msg)
{
	struct rpc_client *c = s->nclients < 2 * RPC_MAX_CLIENTS ? client_new(s, fd, uc, false)
								 : NULL;

	if (!c) {
		close(fd);
		return;
	}
	rpc_emit_error(emit_out, c, code, msg);
	client_end(c);
}

static void on_accept(struct ev_io *w, uint32_t revents)
{
	struct rpc_server *s = w->arg;

	(void)revents;
	for (int k = 0; k < 64; k++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct rpc_client *c;
		struct ucred uc = {0};

		if (fd < 0)
			return;
		if (!peer_allowed(s, fd, &uc)) {
			if (s->denied++ % 1000 == 0)
				log_warn("mgmt",
					 "rpc: refused a caller (uid %u gid %u pid %d): not root, "
					 "the daemon's user or global.mgmt_group (%llu so far)",
					 (unsigned)uc.uid, (unsigned)uc.gid, (int)uc.pid,
					 (unsigned long long)s->denied);
			refuse(s, fd, &uc, MGMT_ERR_DENIED, "permission denied");
			continue;
		}
		if (nserved(s) >= RPC_MAX_CLIENTS) {
			if (s->refused++ % 1000 == 0)
				log_warn("mgmt", "rpc: %d connections open: refusing more (%llu so far)",
					 s->nclients, (unsigned long long)s->refused);
			refuse(s, fd, &uc, MGMT_ERR_LIMIT, "too many management connections");
			continue;
		}
		c = client_new(s, fd, &uc, true);
		if (!c) {
			close(fd);
			continue;
		}
		client_arm_timer(c);
	}
}

/* A socket file at path: replace it when nobody listens on it. */
static int clear_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (r == 0)
		return -EADDRINUSE;
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int rpc_server_new(struct ix_mgmt *m, struct ev_loop *loop, const char *path, gid_t group,
		   struct rpc_server **out, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct rpc_server *s;
	char dir[sizeof(sa.sun_path)], *slash;
	mode_t old;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "%s: path too long for a Unix socket", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	memcpy(dir, path, strlen(path) + 1);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			snprintf(err, errlen, "%s: %s", dir, strerror(-r));
			return r;
		}
	}
	r = clear_stale(path, &sa);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 r == -EADDRINUSE ? "another daemon serves this management socket"
			 : r == -EEXIST	  ? "exists and is not a socket"
					  : strerror(-r));
		return r;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->m = m;
	s->loop = loop;
	s->group = group;
	list_init(&s->clients);
	memcpy(s->path, path, strlen(path) + 1);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		r = -errno;
		goto fail;
	}
	old = umask(0177); /* the socket file is created 0600 */
	r = bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	umask(old);
	if (r < 0)
		goto fail;
	if (group != (gid_t)-1 && (chown(path, (uid_t)-1, group) < 0 || chmod(path, 0660) < 0)) {
		r = -errno;
		unlink(path);
		goto fail;
	}
	if (listen(s->fd, 64) < 0) {
		r = -errno;
		unlink(path);
		goto fail;
	}
	ev_io_init(&s->io, s->fd, on_accept, s);
	r = ev_io_start(loop, &s->io, EPOLLIN);
	if (r < 0) {
		unlink(path);
		goto fail;
	}
	log_info("mgmt", "JSON-RPC on %s", path);
	*out = s;
	return 0;
fail:
	snprintf(err, errlen, "%s: %s", path, strerror(-r));
	if (s->fd >= 0)
		close(s->fd);
	free(s);
	return r;
}

void rpc_server_free(struct rpc_server *s)
{
	if (!s)
		return;
	/* outside any callback of the loop: the clients go at once */
	while (!list_empty(&s->clients)) {
		struct rpc_client *c = list_first_entry(&s->clients, struct rpc_client, link);
		client_teardown(c);
		client_free_deferred(c);
	}
	ev_io_stop(s->loop, &s->io);
	close(s->fd);
	unlink(s->path);
	free(s);
}
