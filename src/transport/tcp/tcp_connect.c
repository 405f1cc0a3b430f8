#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/tcp_int.h"

static void try_next(struct tcp_connector *tc);

static void finish(struct tcp_connector *tc, int fd, int err)
{
	if (tc->ai) {
		freeaddrinfo(tc->ai);
		tc->ai = tc->cur = NULL;
	}
	tc->fd = -1;
	tc->active = false;
	tc->cb(tc, fd, err);
}

static void connect_io(struct ev_io *w, uint32_t revents)
{
	struct tcp_connector *tc = w->arg;
	int err = 0, one = 1, fd = tc->fd;
	socklen_t len = sizeof(err);

	(void)revents;
	ev_io_stop(tc->loop, &tc->io);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		close(fd);
		tc->fd = -1;
		tc->last_err = -err;
		tc->cur = tc->cur->ai_next;
		try_next(tc);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	finish(tc, fd, 0);
}

static void try_next(struct tcp_connector *tc)
{
	for (; tc->cur; tc->cur = tc->cur->ai_next) {
		struct addrinfo *a = tc->cur;
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0) {
			tc->last_err = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			finish(tc, fd, 0);
			return;
		}
		if (errno != EINPROGRESS) {
			tc->last_err = -errno;
			close(fd);
			continue;
		}
		tc->fd = fd;
		ev_io_init(&tc->io, fd, connect_io, tc);
		if (ev_io_start(tc->loop, &tc->io, EPOLLOUT) < 0) {
			tc->last_err = -EIO;
			close(fd);
			tc->fd = -1;
			continue;
		}
		return;
	}
	finish(tc, -1, tc->last_err ? tc->last_err : -EHOSTUNREACH);
}

int tcp_connect_start(struct tcp_connector *tc, struct ev_loop *loop, const char *host,
		      uint16_t port, tcp_connect_cb cb, void *arg)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	char service[8];
	int r;

	memset(tc, 0, sizeof(*tc));
	tc->fd = -1;
	tc->loop = loop;
	tc->cb = cb;
	tc->arg = arg;
	snprintf(service, sizeof(service), "%u", port);
	r = getaddrinfo(host, service, &hints, &tc->ai);
	if (r != 0) {
		tc->ai = NULL;
		return r == EAI_SYSTEM ? -errno : (r == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH);
	}
	tc->cur = tc->ai;
	tc->last_err = 0;
	/* connect() to loopback can complete at once; the callback must still not run inside
	   this call, so the first attempt is always reported through the loop. */
	for (; tc->cur; tc->cur = tc->cur->ai_next) {
		struct addrinfo *a = tc->cur;
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0) {
			tc->last_err = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
			tc->last_err = -errno;
			close(fd);
			continue;
		}
		tc->fd = fd;
		ev_io_init(&tc->io, fd, connect_io, tc);
		if (ev_io_start(loop, &tc->io, EPOLLOUT) < 0) {
			close(fd);
			tc->fd = -1;
			tc->last_err = -EIO;
			continue;
		}
		tc->active = true;
		return 0;
	}
	r = tc->last_err ? tc->last_err : -EHOSTUNREACH;
	freeaddrinfo(tc->ai);
	tc->ai = tc->cur = NULL;
	return r;
}

void tcp_connect_cancel(struct tcp_connector *tc)
{
	if (!tc->active)
		return;
	tc->active = false;
	if (tc->fd >= 0) {
		ev_io_stop(tc->loop, &tc->io);
		close(tc->fd);
		tc->fd = -1;
	}
	if (tc->ai) {
		freeaddrinfo(tc->ai);
		tc->ai = tc->cur = NULL;
	}
}
