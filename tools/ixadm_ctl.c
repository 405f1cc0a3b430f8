/* The client side of the control protocol (see ixadm.h), the run folder, and starting a
 * session daemon. Every wait here has a deadline: a daemon that does not answer makes the
 * command fail, never hang. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ixadm.h"

/* ---------------------------------------------------------------- paths */

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h ^ 0xff; /* separator, so ("ab","c") and ("a","bc") differ */
}

int ctl_paths(const char *db, const char *target, const struct ax_portal *p,
	      struct ctl_paths *out)
{
	char port[8];
	uint64_t h = 0xcbf29ce484222325ull;
	int n;

	snprintf(port, sizeof(port), "%u", p->port);
	h = fnv1a(fnv1a(fnv1a(h, target), p->host), port);
	if (snprintf(out->dir, sizeof(out->dir), "%s/.run", db) >= (int)sizeof(out->dir))
		return -ENAMETOOLONG;
	n = snprintf(out->sock, sizeof(out->sock), "%s/%016llx.sock", out->dir,
		     (unsigned long long)h);
	if (n < 0 || n >= (int)sizeof(out->sock))
		return -ENAMETOOLONG;
	if (snprintf(out->lock, sizeof(out->lock), "%s/%016llx.lock", out->dir,
		     (unsigned long long)h) >= (int)sizeof(out->lock) ||
	    snprintf(out->log, sizeof(out->log), "%s/%016llx.log", out->dir,
		     (unsigned long long)h) >= (int)sizeof(out->log))
		return -ENAMETOOLONG;
	return 0;
}

/* ---------------------------------------------------------------- hex */

void ax_hex(const uint8_t *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ax_unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = strlen(s);

	if (n % 2 || n / 2 > max)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (int)(n / 2);
}

/* ---------------------------------------------------------------- I/O with deadlines */

static int wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		uint64_t now = ax_now_ms();
		struct pollfd pfd = {.fd = fd, .events = ev};
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 0;
	}
}

static int write_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
	const char *p = buf;

	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int r = wait_fd(fd, POLLOUT, deadline);
				if (r < 0)
					return r;
				continue;
			}
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len); /* sockets and the report pipe: both non-blocking */
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int r = wait_fd(fd, POLLIN, deadline);
				if (r < 0)
					return r;
				continue;
			}
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One line, byte by byte so that nothing of the payload behind it is consumed. */
static int read_line(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t n = 0;

	for (;;) {
		char c;
		int r = read_all(fd, &c, 1, deadline);
		if (r < 0)
			return r;
		if (c == '\n')
			break;
		if (n + 1 >= cap)
			return -EMSGSIZE;
		buf[n++] = c;
	}
	buf[n] = 0;
	return 0;
}

int ctl_connect(const char *sock, int timeout_ms)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint64_t deadline = ax_now_ms() + (uint64_t)timeout_ms;
	int fd, r;

	if (strlen(sock) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* a Unix stream connect completes or fails at once; EAGAIN means a full backlog */
	while (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		r = -errno;
		if ((r == -EAGAIN || r == -EINTR) && ax_now_ms() < deadline) {
			usleep(10000);
			continue;
		}
		close(fd);
		return r == -EAGAIN ? -ETIMEDOUT : r;
	}
	return fd;
}

static int parse_reply(char *line, struct ctl_reply *rep)
{
	char *end;

	memset(rep, 0, sizeof(*rep) - sizeof(rep->rest));
	rep->rest[0] = 0;
	if (strncmp(line, "OK ", 3) == 0) {
		unsigned long long len;

		errno = 0;
		len = strtoull(line + 3, &end, 10);
		if (errno || end == line + 3 || (*end && *end != ' ') || len > AX_IO_MAX + 65536)
			return -EPROTO;
		rep->ok = true;
		rep->len = (size_t)len;
		snprintf(rep->rest, sizeof(rep->rest), "%s", *end ? end + 1 : "");
		return 0;
	}
	if (strncmp(line, "ERR ", 4) == 0 || strncmp(line, "DONE ", 5) == 0) {
		const char *p = line + (line[0] == 'E' ? 4 : 5);
		long code = strtol(p, &end, 10);
		if (end == p || code < 0 || code > 255)
			return -EPROTO;
		rep->ok = line[0] == 'D' && code == 0;
		rep->code = (int)code;
		snprintf(rep->rest, sizeof(rep->rest), "%s", *end ? end + 1 : "");
		return 0;
	}
	return -EPROTO;
}

int ctl_read_reply(int fd, struct ctl_reply *rep, int timeout_ms)
{
	char line[CTL_LINE_MAX];
	int r = read_line(fd, line, sizeof(line), ax_now_ms() + (uint64_t)timeout_ms);

	return r < 0 ? r : parse_reply(line, rep);
}

int ctl_call(int fd, const char *req, const void *payload, size_t plen, struct ctl_reply *rep,
	     void *buf, size_t cap, int timeout_ms)
{
	uint64_t deadline = ax_now_ms() + (uint64_t)timeout_ms;
	char line[CTL_LINE_MAX];
	int r;

	r = write_all(fd, req, strlen(req), deadline);
	if (r == 0)
		r = write_all(fd, "\n", 1, deadline);
	if (r == 0 && plen)
		r = write_all(fd, payload, plen, deadline);
	if (r == 0)
		r = read_line(fd, line, sizeof(line), deadline);
	if (r == 0)
		r = parse_reply(line, rep);
	if (r == 0 && rep->ok && rep->len) {
		if (rep->len > cap)
			return -EMSGSIZE;
		r = read_all(fd, buf, rep->len, deadline);
	}
	return r;
}

/* ---------------------------------------------------------------- info and listing */

static void info_field(struct ctl_info *inf, const char *k, const char *v)
{
	if (strcmp(k, "pid") == 0)
		inf->pid = strtol(v, NULL, 10);
	else if (strcmp(k, "target") == 0)
		snprintf(inf->target, sizeof(inf->target), "%s", v);
	else if (strcmp(k, "portal") == 0)
		snprintf(inf->portal, sizeof(inf->portal), "%s", v);
	else if (strcmp(k, "current_portal") == 0)
		snprintf(inf->current, sizeof(inf->current), "%s", v);
	else if (strcmp(k, "tpgt") == 0)
		inf->tpgt = (int)strtol(v, NULL, 10);
	else if (strcmp(k, "state") == 0)
		snprintf(inf->state, sizeof(inf->state), "%s", v);
	else if (strcmp(k, "initiator") == 0)
		snprintf(inf->initiator, sizeof(inf->initiator), "%s", v);
	else if (strcmp(k, "transport") == 0)
		snprintf(inf->transport, sizeof(inf->transport), "%s", v);
	else if (strcmp(k, "persistent") == 0)
		inf->persistent = strcmp(v, "yes") == 0;
	else if (strcmp(k, "attach") == 0 && inf->nattach < CTL_MAX_ATTACH) {
		char *end;
		unsigned long lun = strtoul(v, &end, 10);
		if (*end == ' ') {
			inf->attach[inf->nattach].lun = (uint32_t)lun;
			snprintf(inf->attach[inf->nattach].path, sizeof(inf->attach[0].path), "%s",
				 end + 1);
			inf->nattach++;
		}
	}
}

int ctl_info(int fd, struct ctl_info *inf, int timeout_ms)
{
	struct ctl_reply rep;
	char *save = NULL, *line;
	int r;

	memset(inf, 0, sizeof(*inf));
	r = ctl_call(fd, "info", NULL, 0, &rep, inf->text, sizeof(inf->text) - 1, timeout_ms);
	if (r < 0)
		return r;
	if (!rep.ok)
		return -EPROTO;
	inf->text[rep.len] = 0;
	{
		char copy[sizeof(inf->text)];
		memcpy(copy, inf->text, rep.len + 1);
		for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *eq = strchr(line, '=');
			if (!eq)
				continue;
			*eq = 0;
			info_field(inf, line, eq + 1);
		}
	}
	return inf->pid > 0 ? 0 : -EPROTO;
}

/* A socket nobody answers on, whose lock nobody holds, belongs to a dead daemon. */
static void remove_if_stale(const char *dir, const char *name)
{
	char sock[PATH_MAX], lock[PATH_MAX];
	size_t n = strlen(name) - 5; /* without ".sock" */
	int fd;

	if (snprintf(sock, sizeof(sock), "%s/%s", dir, name) >= (int)sizeof(sock) ||
	    snprintf(lock, sizeof(lock), "%s/%.*s.lock", dir, (int)n, name) >= (int)sizeof(lock))
		return;
	fd = open(lock, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		unlink(sock);
		return;
	}
	/* the lock file stays: unlinking it could let two daemons lock two different files */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		unlink(sock);
	close(fd);
}

int ctl_sessions(const char *db, struct ctl_info **out, int *n)
{
	char dir[PATH_MAX], sock[PATH_MAX];
	struct ctl_info *v = NULL;
	struct dirent *e;
	int cap = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	if (snprintf(dir, sizeof(dir), "%s/.run", db) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		int fd;

		if (len < 6 || strcmp(e->d_name + len - 5, ".sock") != 0)
			continue;
		if (snprintf(sock, sizeof(sock), "%s/%s", dir, e->d_name) >= (int)sizeof(sock))
			continue;
		fd = ctl_connect(sock, 2000);
		if (fd < 0) {
			if (fd == -ECONNREFUSED)
				remove_if_stale(dir, e->d_name);
			continue;
		}
		if (*n == cap) {
			int nc = cap ? cap * 2 : 8;
			struct ctl_info *nv = realloc(v, (size_t)nc * sizeof(*nv));
			if (!nv) {
				close(fd);
				break;
			}
			v = nv;
			cap = nc;
		}
		if (ctl_info(fd, &v[*n], 5000) == 0)
			(*n)++;
		close(fd);
	}
	closedir(d);
	*out = v;
	return 0;
}

/* ---------------------------------------------------------------- spawning a daemon */

static void child_exec(const char *db, const char *target, const char *portal, bool ephemeral,
		       int debug, int notify_w, const char *log)
{
	char dbg[16];
	const char *argv[16];
	int i = 0, fd;

	setsid();
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0)
		dup2(fd, 0);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (dup2(notify_w, 3) < 0)
		_exit(127);
	argv[i++] = "ixadm";
	argv[i++] = "--serve";
	argv[i++] = "--db";
	argv[i++] = db;
	argv[i++] = "-T";
	argv[i++] = target;
	argv[i++] = "-p";
	argv[i++] = portal;
	argv[i++] = "--notify-fd";
	argv[i++] = "3";
	if (ephemeral)
		argv[i++] = "--ephemeral";
	if (debug) {
		snprintf(dbg, sizeof(dbg), "%d", debug);
		argv[i++] = "-d";
		argv[i++] = dbg;
	}
	argv[i] = NULL;
	execv("/proc/self/exe", (char *const *)argv);
	dprintf(3, "ERR %d cannot execute /proc/self/exe: %s\n", AX_ERR_INTERNAL, strerror(errno));
	_exit(127);
}

int ctl_spawn(const char *db, const char *target, const char *portal, bool ephemeral, int debug,
	      int wait_ms, long *pid, char *err, size_t errlen)
{
	struct ax_portal p;
	struct ctl_paths cp;
	char line[1024];
	uint64_t deadline;
	int pfd[2], st, r;
	pid_t child;

	if (ax_portal_parse(portal, &p) < 0 || ctl_paths(db, target, &p, &cp) < 0) {
		snprintf(err, errlen, "the node database path is too long for a Unix socket "
			 "(use a shorter --db)");
		return AX_ERR_INVAL;
	}
	if (mkdir(db, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", db, strerror(errno));
		return AX_ERR_IDBM;
	}
	if (mkdir(cp.dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", cp.dir, strerror(errno));
		return AX_ERR_IDBM;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return AX_ERR_INTERNAL;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return AX_ERR_INTERNAL;
	}
	if (child == 0) {
		/* double fork: the daemon is not our child, so nobody has to reap it */
		close(pfd[0]);
		if (fork() == 0)
			child_exec(db, target, portal, ephemeral, debug, pfd[1], cp.log);
		_exit(0);
	}
	close(pfd[1]);
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	deadline = ax_now_ms() + (uint64_t)wait_ms;
	r = read_line(pfd[0], line, sizeof(line), deadline);
	close(pfd[0]);
	if (r == -ETIMEDOUT) {
		snprintf(err, errlen, "the session daemon did not report within %d ms (log: %s)",
			 wait_ms, cp.log);
		return AX_ERR_TIMEOUT;
	}
	if (r < 0) {
		snprintf(err, errlen, "the session daemon exited without a report (log: %s)",
			 cp.log);
		return AX_ERR_INTERNAL;
	}
	if (strncmp(line, "OK ", 3) == 0) {
		*pid = strtol(line + 3, NULL, 10);
		return AX_OK;
	}
	if (strncmp(line, "ERR ", 4) == 0) {
		char *end;
		long code = strtol(line + 4, &end, 10);
		snprintf(err, errlen, "%s", *end ? end + 1 : "unknown error");
		return code > 0 && code < 256 ? (int)code : AX_ERR;
	}
	snprintf(err, errlen, "unexpected report from the session daemon: %.200s", line);
	return AX_ERR_INTERNAL;
}
