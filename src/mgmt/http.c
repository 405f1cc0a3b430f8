/* The Prometheus metrics endpoint (http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mgmt/http.h"
#include "mgmt/metrics.h"
#include "util/addr.h"
#include "util/list.h"
#include "util/log.h"

/* ---------------------------------------------------------------- parsing */

static const char *find_head_end(const char *buf, size_t len, size_t *end)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n') {
			*end = i + 2;
			return buf;
		}
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
			*end = i + 3;
			return buf;
		}
	}
	return NULL;
}

static bool is_tchar(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* "METHOD SP TARGET SP HTTP/1.x" in [line, line + n) (CR removed). */
static int parse_request_line(const char *line, size_t n, struct http_req *out)
{
	size_t i = 0, m, p;

	while (i < n && is_tchar(line[i]))
		i++;
	if (i == 0 || i >= sizeof(out->method) || i >= n || line[i] != ' ')
		return -EBADMSG;
	memcpy(out->method, line, i);
	out->method[i] = 0;
	m = ++i;
	while (i < n && line[i] > ' ' && line[i] < 0x7f)
		i++;
	if (i == m || line[m] != '/' || i >= n || line[i] != ' ')
		return -EBADMSG;
	p = i - m;
	if (memchr(line + m, '?', p))
		p = (size_t)((const char *)memchr(line + m, '?', p) - (line + m));
	if (p >= sizeof(out->path))
		return -EBADMSG;
	memcpy(out->path, line + m, p);
	out->path[p] = 0;
	i++;
	if (n - i != 8 || memcmp(line + i, "HTTP/1.", 7) != 0 ||
	    (line[i + 7] != '0' && line[i + 7] != '1'))
		return -EBADMSG;
	return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_req *out)
{
	const char *nl;
	size_t n, end = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (len > HTTP_MAX_REQUEST)
		len = HTTP_MAX_REQUEST;
	/* only the head is looked at: bytes after it never change the answer */
	if (find_head_end(buf, len, &end))
		len = end;
	if (memchr(buf, 0, len))
		return -EBADMSG;
	nl = memchr(buf, '\n', len);
	if (!nl)
		return len >= HTTP_MAX_REQUEST ? -EMSGSIZE : 0;
	n = (size_t)(nl - buf);
	if (n && buf[n - 1] == '\r')
		n--;
	r = parse_request_line(buf, n, out);
	if (r < 0)
		return r;
	if (!end)
		return len >= HTTP_MAX_REQUEST ? -EMSGSIZE : 0;
	return (int)end;
}

/* ---------------------------------------------------------------- server */

struct scrape;

struct http_client {
	struct metrics_server *srv;
	struct list_head link;
	struct ev_io io;
	struct ev_timer timer;
	char in[HTTP_MAX_REQUEST];
	size_t in_len;
	char *out;
	size_t out_len, out_off;
	bool head_only;
	struct scrape *scrape; /* statistics being gathered for this client */
};

/* Outlives its client if the client goes first (the workers answer later). */
struct scrape {
	struct http_client *c; /* NULL once the client is gone */
};

struct metrics_server {
	struct ix_target *t;
	struct ev_loop *loop;
	struct ev_io lio;
	struct list_head clients;
	unsigned nclients;
};

static void client_close(struct http_client *c)
{
	ev_io_stop(c->srv->loop, &c->io);
	ev_timer_stop(c->srv->loop, &c->timer);
	close(c->io.fd);
	if (c->scrape)
		c->scrape->c = NULL;
	list_del(&c->link);
	c->srv->nclients--;
	free(c->out);
	free(c);
}

static void client_flush(struct http_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->io.fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ev_io_modify(c->srv->loop, &c->io, EPOLLOUT);
			return;
		}
		if (n <= 0)
			break;
		c->out_off += (size_t)n;
	}
	client_close(c);
}

static void client_respond(struct http_client *c, const char *status, const char *extra,
			   const char *body, size_t blen)
{
	struct mbuf b = {0};

	mbuf_printf(&b,
		    "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
		    "Connection: close\r\n\r\n",
		    status,
		    body && strncmp(status, "200", 3) == 0
			? "text/plain; version=0.0.4; charset=utf-8"
			: "text/plain; charset=utf-8",
		    blen, extra ? extra : "");
	if (body && !c->head_only)
		mbuf_append(&b, body, blen);
	if (b.err) {
		mbuf_free(&b);
		client_close(c);
		return;
	}
	c->out = b.p;
	c->out_len = b.len;
	c->out_off = 0;
	client_flush(c);
}

static void client_error(struct http_client *c, const char *status, const char *extra)
{
	char body[64];
	int n = snprintf(body, sizeof(body), "%s\n", status);

	client_respond(c, status, extra, body, (size_t)n);
}

static void scrape_done(void *arg, const struct ix_stats *st)
{
	struct scrape *sc = arg;
	struct http_client *c = sc->c;
	struct mbuf b = {0};

	free(sc);
	if (!c)
		return;
	c->scrape = NULL;
	if (metrics_format(st, &b) < 0) {
		mbuf_free(&b);
		client_error(c, "500 Internal Server Error", NULL);
		return;
	}
	client_respond(c, "200 OK", NULL, b.p ? b.p : "", b.len);
	mbuf_free(&b);
}

static void client_request(struct http_client *c, const struct http_req *rq)
{
	struct scrape *sc;

	c->head_only = strcmp(rq->method, "HEAD") == 0;
	if (strcmp(rq->method, "GET") != 0 && !c->head_only) {
		client_error(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n");
		return;
	}
	if (strcmp(rq->path, "/metrics") != 0) {
		client_error(c, "404 Not Found", NULL);
		return;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		client_error(c, "503 Service Unavailable", NULL);
		return;
	}
	sc->c = c;
	c->scrape = sc;
	ev_io_modify(c->srv->loop, &c->io, 0); /* nothing more is read */
	if (ix_target_stats(c->srv->t, scrape_done, sc) < 0) {
		c->scrape = NULL;
		free(sc);
		client_error(c, "503 Service Unavailable", NULL);
	}
}

static void client_read(struct http_client *c)
{
	struct http_req rq;
	ssize_t n;
	int r;

	n = recv(c->io.fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c);
		return;
	}
	c->in_len += (size_t)n;
	r = http_parse_request(c->in, c->in_len, &rq);
	if (r == -EMSGSIZE)
		client_error(c, "431 Request Header Fields Too Large", NULL);
	else if (r < 0)
		client_error(c, "400 Bad Request", NULL);
	else if (r > 0)
		client_request(c, &rq);
}

static void client_cb(struct ev_io *w, uint32_t revents)
{
	struct http_client *c = w->arg;

	if (c->out)
		client_flush(c);
	else if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP))
		client_read(c);
}

static void client_timeout(struct ev_timer *t)
{
	struct http_client *c = t->arg;

	log_dbg("metrics", "closing a client after %d ms", HTTP_TIMEOUT_MS);
	client_close(c);
}

static void accept_one(struct metrics_server *s, int fd)
{
	struct http_client *c;

	if (s->nclients >= HTTP_MAX_CLIENTS || !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return;
	}
	c->srv = s;
	ev_io_init(&c->io, fd, client_cb, c);
	ev_timer_init(&c->timer, client_timeout, c);
	if (ev_io_start(s->loop, &c->io, EPOLLIN) < 0) {
		close(fd);
		free(c);
		return;
	}
	ev_timer_start(s->loop, &c->timer, HTTP_TIMEOUT_MS);
	list_add_tail(&c->link, &s->clients);
	s->nclients++;
}

static void listen_cb(struct ev_io *w, uint32_t revents)
{
	struct metrics_server *s = w->arg;

	(void)revents;
	for (int i = 0; i < 16; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		accept_one(s, fd);
	}
}

static int make_addr(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, char *err,
		     size_t errlen)
{
	char host[ADDR_HOST_MAX];
	uint16_t port = 0;
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (addr_parse_portal(listen, 0, host, sizeof(host), &port, NULL) < 0 || port == 0) {
		snprintf(err, errlen, "metrics_listen \"%s\": not ADDRESS:PORT", listen);
		return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*sl = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*sl = sizeof(*a6);
		return 0;
	}
	snprintf(err, errlen, "metrics_listen \"%s\": not a numeric address", listen);
	return -EINVAL;
}

static int open_listener(const struct sockaddr_storage *ss, socklen_t sl)
{
	int one = 1, fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, sl) < 0 || listen(fd, 16) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int metrics_server_new(struct ix_target *t, struct ev_loop *loop, const char *listen,
		       struct metrics_server **out, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct metrics_server *s;
	socklen_t sl = 0;
	int fd, r;

	r = make_addr(listen, &ss, &sl, err, errlen);
	if (r < 0)
		return r;
	fd = open_listener(&ss, sl);
	if (fd < 0) {
		snprintf(err, errlen, "metrics_listen %s: %s", listen, strerror(-fd));
		return fd;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->t = t;
	s->loop = loop;
	list_init(&s->clients);
	ev_io_init(&s->lio, fd, listen_cb, s);
	r = ev_io_start(loop, &s->lio, EPOLLIN);
	if (r < 0) {
		snprintf(err, errlen, "metrics_listen %s: %s", listen, strerror(-r));
		close(fd);
		free(s);
		return r;
	}
	log_info("metrics", "Prometheus metrics on http://%s/metrics", listen);
	*out = s;
	return 0;
}

void metrics_server_free(struct metrics_server *s)
{
	struct list_head *pos, *n;

	if (!s)
		return;
	list_for_each_safe(pos, n, &s->clients)
		client_close(list_entry(pos, struct http_client, link));
	ev_io_stop(s->loop, &s->lio);
	close(s->lio.fd);
	free(s);
}
