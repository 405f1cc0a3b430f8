/* Acceptance driver for the ix initiator library against a real target (ix or tgt): every
 * check prints one line "PASS name" / "FAIL name: why" / "SKIP name: why"; the exit status is
 * 1 if anything failed. Used by tests/interop/initiator.sh.
 *
 *   ini_accept -p HOST:PORT -T IQN [-i INITIATOR] [-u USER -s SECRET [-U MUSER -S MSECRET]]
 *              [-a CHAP_A] [-m MiB] [-q QD] [-l LUN] [-I tcp|iser|auto] [-d] [-v] CHECK...
 * CHECKs: discover login io tmf badchap unreachable badio (see each function); -d requires
 * CRC32C header and data digests, -v logs the library at debug level.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ix/initiator.h"
#include "ix/scsi.h"
#include "ix/sync.h"

static struct ix_session_opts base;
static uint32_t size_mib = 64, qd = 32, lun;
static int failed;

#define PASS(name) printf("PASS %s\n", name)
#define FAIL(name, ...)                                                                            \
	do {                                                                                       \
		printf("FAIL %s: ", name);                                                          \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		failed = 1;                                                                        \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct ix_session *open_session(struct ix_ctx *ctx, const char *name)
{
	struct ix_session *s;
	int err, r;

	s = ix_session_new(ctx, &base, &err);
	if (!s) {
		FAIL(name, "ix_session_new: %s", strerror(-err));
		return NULL;
	}
	r = ix_sync_login(s);
	if (r) {
		FAIL(name, "login: %s (%s)", strerror(-r), ix_session_error(s));
		ix_session_free(s);
		return NULL;
	}
	return s;
}

static int capacity(struct ix_session *s, uint64_t *blocks, uint32_t *bs)
{
	uint8_t buf[32];
	struct ix_scsi_cmd cmd;
	uint8_t cdb[16];
	uint8_t n = ix_cdb_read_capacity16(cdb, sizeof(buf));
	int r;

	for (int tries = 0; tries < 3; tries++) { /* a unit attention may come first */
		ix_scsi_cmd_init(&cmd, lun, cdb, n, IX_DIR_READ, buf, sizeof(buf), NULL, NULL);
		r = ix_sync_scsi(s, &cmd);
		if (r)
			return r;
		if (cmd.status == 0)
			return ix_parse_read_capacity16(buf, sizeof(buf), blocks, bs);
	}
	return -EIO;
}

static void check_discover(struct ix_ctx *ctx)
{
	struct ix_discovery *d = NULL;
	char err[256];
	bool found = false;
	int r = ix_sync_discover(ctx, &base, &d, err, sizeof(err));

	if (r) {
		FAIL("discover", "%s (%s)", strerror(-r), err);
		return;
	}
	for (int i = 0; i < d->ntargets; i++) {
		printf("# target %s", d->targets[i].name);
		for (int a = 0; a < d->targets[i].naddrs; a++)
			printf(" %s", d->targets[i].addrs[a]);
		printf("\n");
		if (strcmp(d->targets[i].name, base.target_name) == 0 && d->targets[i].naddrs > 0)
			found = true;
	}
	if (found)
		PASS("discover");
	else
		FAIL("discover", "%s not in the SendTargets answer (%d targets)", base.target_name,
		     d->ntargets);
	ix_discovery_free(d);
}

static void check_login(struct ix_ctx *ctx)
{
	struct ix_session *s = open_session(ctx, "login");
	struct ix_session_info info;
	uint64_t blocks;
	uint32_t bs;
	int r;

	if (!s)
		return;
	ix_session_get_info(s, &info);
	printf("# tsih %u, MaxRecvDSL %u/%u, digests %d/%d, ImmediateData %d, InitialR2T %d\n",
	       info.tsih, info.max_recv_dsl, info.max_xmit_dsl, info.header_digest,
	       info.data_digest, info.immediate_data, info.initial_r2t);
	r = capacity(s, &blocks, &bs);
	if (r)
		FAIL("login", "READ CAPACITY(16): %s", strerror(-r));
	else
		printf("# %llu blocks of %u bytes\n", (unsigned long long)blocks, bs);
	r = ix_sync_logout(s);
	if (r)
		FAIL("login", "logout: %s (%s)", strerror(-r), ix_session_error(s));
	else if (!failed)
		PASS("login");
	ix_session_free(s);
}

/* ---- verified I/O at queue depth qd ---- */

struct io_run {
	struct ix_session *s;
	uint8_t *data;        /* the pattern written */
	uint8_t *rbuf;        /* read back */
	uint64_t total, next, done_bytes;
	uint32_t chunk, bs;
	bool writing;
	int inflight, errors, cancelled;
	struct ix_scsi_cmd *cmds;
	char why[256];
};

static void io_issue(struct io_run *io, struct ix_scsi_cmd *c);

static void io_done(struct ix_scsi_cmd *c)
{
	struct io_run *io = c->arg;

	io->inflight--;
	if (c->err == -ECANCELED) {
		io->cancelled++;
	} else if (c->err || c->status) {
		uint8_t k = 0, asc = 0, ascq = 0;
		ix_parse_sense(c->sense, c->sense_len, &k, &asc, &ascq);
		if (!io->errors)
			snprintf(io->why, sizeof(io->why), "%s: err %s, status %s %s %02x/%02x",
				 io->writing ? "write" : "read", c->err ? strerror(-c->err) : "0",
				 ix_scsi_status_str(c->status), ix_sense_key_str(k), asc, ascq);
		io->errors++;
	} else {
		io->done_bytes += c->len;
	}
	if (io->next < io->total)
		io_issue(io, c);
}

static void io_issue(struct io_run *io, struct ix_scsi_cmd *c)
{
	uint8_t cdb[16], n;
	uint64_t off = io->next;
	uint32_t len = io->total - off < io->chunk ? (uint32_t)(io->total - off) : io->chunk;
	int r;

	io->next += len;
	if (io->writing)
		n = ix_cdb_write16(cdb, off / io->bs, len / io->bs, false);
	else
		n = ix_cdb_read16(cdb, off / io->bs, len / io->bs, false);
	ix_scsi_cmd_init(c, lun, cdb, n, io->writing ? IX_DIR_WRITE : IX_DIR_READ,
			 (io->writing ? io->data : io->rbuf) + off, len, io_done, io);
	r = ix_scsi_submit(io->s, c);
	if (r) {
		snprintf(io->why, sizeof(io->why), "submit: %s", strerror(-r));
		io->errors++;
		return;
	}
	io->inflight++;
}

static int io_pass(struct ix_ctx *ctx, struct io_run *io, bool writing, uint32_t depth)
{
	io->writing = writing;
	io->next = 0;
	io->done_bytes = 0;
	for (uint32_t i = 0; i < depth && io->next < io->total; i++)
		io_issue(io, &io->cmds[i]);
	while (io->inflight > 0)
		if (ix_ctx_service(ctx, 1000) < 0)
			return -EIO;
	return io->errors ? -EIO : 0;
}

static void check_io(struct ix_ctx *ctx)
{
	struct ix_session *s = open_session(ctx, "io");
	struct io_run io = {0};
	uint64_t blocks, t0, t1, t2;
	uint32_t bs;

	if (!s)
		return;
	if (capacity(s, &blocks, &bs)) {
		FAIL("io", "READ CAPACITY failed");
		goto out;
	}
	io.s = s;
	io.bs = bs;
	io.total = (uint64_t)size_mib << 20;
	if (io.total > blocks * bs)
		io.total = blocks * bs / (1u << 20) * (1u << 20);
	io.chunk = 256 * 1024;
	/* the session's registered areas (over iSER: no registration per command; the tmf
	   check below uses plain malloc memory, registered per command) */
	io.data = ix_session_buf_alloc(s, io.total);
	io.rbuf = ix_session_buf_alloc(s, io.total);
	io.cmds = calloc(qd, sizeof(*io.cmds));
	if (!io.data || !io.rbuf || !io.cmds) {
		FAIL("io", "out of memory");
		goto out;
	}
	for (uint64_t off = 0; off < io.total; off += 1u << 20)
		if (getrandom(io.data + off, 1u << 20, 0) != 1 << 20) {
			FAIL("io", "getrandom");
			goto out;
		}
	memset(io.rbuf, 0xa5, io.total);
	t0 = now_ms();
	if (io_pass(ctx, &io, true, qd)) {
		FAIL("io", "%d write errors: %s", io.errors, io.why);
		goto out;
	}
	t1 = now_ms();
	if (io_pass(ctx, &io, false, qd)) {
		FAIL("io", "%d read errors: %s", io.errors, io.why);
		goto out;
	}
	t2 = now_ms();
	if (memcmp(io.data, io.rbuf, io.total) != 0) {
		uint64_t i = 0;
		while (io.data[i] == io.rbuf[i])
			i++;
		FAIL("io", "read data differs from written data at byte %llu", (unsigned long long)i);
		goto out;
	}
	printf("# %llu MiB written in %llu ms, read back in %llu ms, equal (QD %u, %u KiB)\n",
	       (unsigned long long)(io.total >> 20), (unsigned long long)(t1 - t0),
	       (unsigned long long)(t2 - t1), qd, io.chunk / 1024);
	if (ix_sync_logout(s))
		FAIL("io", "logout: %s", ix_session_error(s));
	else
		PASS("io");
out:
	ix_session_buf_free(s, io.data);
	ix_session_buf_free(s, io.rbuf);
	free(io.cmds);
	ix_session_free(s);
}

/* ---- task management under load ---- */

struct tmf_wait {
	bool done;
	int response;
};

static void tmf_cb(struct ix_session *s, int response, void *arg)
{
	struct tmf_wait *w = arg;

	(void)s;
	w->done = true;
	w->response = response;
}

static void check_tmf(struct ix_ctx *ctx)
{
	struct ix_session *s = open_session(ctx, "tmf");
	struct io_run io = {0};
	struct tmf_wait w = {0};
	uint64_t blocks;
	uint32_t bs;
	int r;

	if (!s)
		return;
	if (capacity(s, &blocks, &bs)) {
		FAIL("tmf", "READ CAPACITY failed");
		goto out;
	}
	io.s = s;
	io.bs = bs;
	io.total = 64ull << 20;
	if (io.total > blocks * bs)
		io.total = blocks * bs;
	io.chunk = 64 * 1024;
	io.data = calloc(1, io.total);
	io.rbuf = calloc(1, io.total);
	io.cmds = calloc(qd, sizeof(*io.cmds));
	if (!io.data || !io.rbuf || !io.cmds) {
		FAIL("tmf", "out of memory");
		goto out;
	}
	/* abort one command in flight (or queued): it must end exactly once, as aborted or
	   completed, and the session must go on */
	io.writing = true;
	for (uint32_t i = 0; i < qd; i++)
		io_issue(&io, &io.cmds[i]);
	r = ix_task_abort(s, &io.cmds[qd - 1], tmf_cb, &w);
	if (r == -ENOENT) {
		w.done = true; /* it completed already */
	} else if (r) {
		FAIL("tmf", "ix_task_abort: %s", strerror(-r));
		goto out;
	}
	while (!w.done || io.inflight > 0)
		ix_ctx_service(ctx, 1000);
	if (w.response < 0 || (w.response != 0 && w.response != 1)) {
		FAIL("tmf", "ABORT TASK response %d", w.response);
		goto out;
	}
	printf("# ABORT TASK: response %d, %d commands cancelled, %d errors\n", w.response,
	       io.cancelled, io.errors);
	if (io.errors) {
		FAIL("tmf", "errors besides the abort: %s", io.why);
		goto out;
	}
	/* LUN reset under load: every command ends; the LU answers afterwards */
	memset(&w, 0, sizeof(w));
	io.next = 0;
	io.cancelled = 0;
	io.total = 64ull << 20 < blocks * bs ? 64ull << 20 : blocks * bs;
	for (uint32_t i = 0; i < qd; i++)
		io_issue(&io, &io.cmds[i]);
	r = ix_lun_reset(s, lun, tmf_cb, &w);
	if (r) {
		FAIL("tmf", "ix_lun_reset: %s", strerror(-r));
		goto out;
	}
	while (!w.done || io.inflight > 0)
		ix_ctx_service(ctx, 1000);
	printf("# LUN RESET: response %d, %d commands cancelled, %d other errors\n", w.response,
	       io.cancelled, io.errors);
	if (w.response != 0) {
		FAIL("tmf", "LUN RESET response %d", w.response);
		goto out;
	}
	/* errors after the reset are unit attentions (29/xx) at most */
	if (capacity(s, &blocks, &bs)) {
		FAIL("tmf", "LU does not answer after the reset");
		goto out;
	}
	if (ix_sync_logout(s))
		FAIL("tmf", "logout: %s", ix_session_error(s));
	else
		PASS("tmf");
out:
	free(io.data);
	free(io.rbuf);
	free(io.cmds);
	ix_session_free(s);
}

/* A wrong secret must fail quickly with -EACCES, never retry forever. */
static void check_badchap(struct ix_ctx *ctx)
{
	struct ix_session_opts o = base;
	struct ix_session *s;
	uint64_t t0 = now_ms();
	int err, r;

	o.chap.user = base.chap.user ? base.chap.user : "nobody";
	o.chap.secret = "definitely-the-wrong-secret";
	s = ix_session_new(ctx, &o, &err);
	if (!s) {
		FAIL("badchap", "ix_session_new: %s", strerror(-err));
		return;
	}
	r = ix_sync_login(s);
	if (r == -EACCES && now_ms() - t0 < 3000)
		PASS("badchap");
	else
		FAIL("badchap", "login gave %s after %llu ms (%s), want EACCES at once",
		     strerror(-r), (unsigned long long)(now_ms() - t0), ix_session_error(s));
	ix_session_free(s);
}

/* Unreachable portal: bounded failure. */
static void check_unreachable(struct ix_ctx *ctx)
{
	struct ix_session_opts o = base;
	struct ix_session *s;
	uint64_t t0 = now_ms(), dt;
	int err, r;

	o.portal = "127.0.0.1:1"; /* nothing listens there */
	s = ix_session_new(ctx, &o, &err);
	if (!s) {
		FAIL("unreachable", "ix_session_new: %s", strerror(-err));
		return;
	}
	r = ix_sync_login(s);
	dt = now_ms() - t0;
	if (r == -ECONNREFUSED && dt < 5000)
		PASS("unreachable");
	else
		FAIL("unreachable", "login gave %s after %llu ms", strerror(-r),
		     (unsigned long long)dt);
	ix_session_free(s);
}

/* Against a misbehaving target (tests/interop/ini_badtarget.py): the login or a 64 KiB READ
 * must end with a clean error (negative errno, or a non-GOOD SCSI status), quickly. */
static void check_badio(struct ix_ctx *ctx)
{
	static uint8_t buf[65536];
	struct ix_session_opts o = base;
	struct ix_scsi_cmd cmd;
	struct ix_session *s;
	uint64_t t0 = now_ms();
	uint8_t cdb[16], n;
	int err, r;

	o.login_retries = 0;
	o.login_timeout_ms = 3000;
	o.replacement_timeout_ms = 1500;
	s = ix_session_new(ctx, &o, &err);
	if (!s) {
		FAIL("badio", "ix_session_new: %s", strerror(-err));
		return;
	}
	r = ix_sync_login(s);
	if (r) {
		printf("PASS badio: login failed in %llu ms: %s (%s)\n",
		       (unsigned long long)(now_ms() - t0), strerror(-r), ix_session_error(s));
		ix_session_free(s);
		return;
	}
	n = ix_cdb_read16(cdb, 0, sizeof(buf) / 512, false);
	ix_scsi_cmd_init(&cmd, lun, cdb, n, IX_DIR_READ, buf, sizeof(buf), NULL, NULL);
	r = ix_sync_scsi(s, &cmd);
	if (r < 0)
		printf("PASS badio: READ failed in %llu ms: %s (%s)\n",
		       (unsigned long long)(now_ms() - t0), strerror(-r), ix_session_error(s));
	else if (cmd.status != 0)
		printf("PASS badio: READ ended with %s (sense %u bytes)\n",
		       ix_scsi_status_str(cmd.status), cmd.sense_len);
	else
		FAIL("badio", "READ reported GOOD");
	ix_session_free(s);
}

int main(int argc, char **argv)
{
	struct ix_ctx *ctx;
	int c;

	signal(SIGPIPE, SIG_IGN);
	ix_session_opts_default(&base);
	base.initiator_name = "iqn.2026-11.io.ix:ini-accept";
	base.login_timeout_ms = 5000;
	while ((c = getopt(argc, argv, "p:T:i:u:s:U:S:a:m:q:l:I:dv")) != -1) {
		switch (c) {
		case 'p': base.portal = optarg; break;
		case 'T': base.target_name = optarg; break;
		case 'i': base.initiator_name = optarg; break;
		case 'u': base.chap.user = optarg; break;
		case 's': base.chap.secret = optarg; break;
		case 'U': base.chap.mutual_user = optarg; break;
		case 'S': base.chap.mutual_secret = optarg; break;
		case 'a':
			base.chap.algs[0] = (uint8_t)atoi(optarg);
			base.chap.nalgs = 1;
			break;
		case 'm': size_mib = (uint32_t)atoi(optarg); break;
		case 'q': qd = (uint32_t)atoi(optarg); break;
		case 'l': lun = (uint32_t)atoi(optarg); break;
		case 'I': base.transport = optarg; break;
		case 'd':
			base.header_digest = IX_DIGEST_CRC32C;
			base.data_digest = IX_DIGEST_CRC32C;
			break;
		case 'v': ix_set_log_level(3); break;
		default:
			fprintf(stderr, "usage: see the comment at the top of ini_accept.c\n");
			return 2;
		}
	}
	if (!base.portal || !base.target_name || optind >= argc || qd == 0 || qd > 1024) {
		fprintf(stderr, "ini_accept: -p and -T and at least one check are required\n");
		return 2;
	}
	ctx = ix_ctx_new();
	if (!ctx)
		return 2;
	for (int i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "discover"))
			check_discover(ctx);
		else if (!strcmp(argv[i], "login"))
			check_login(ctx);
		else if (!strcmp(argv[i], "io"))
			check_io(ctx);
		else if (!strcmp(argv[i], "tmf"))
			check_tmf(ctx);
		else if (!strcmp(argv[i], "badchap"))
			check_badchap(ctx);
		else if (!strcmp(argv[i], "unreachable"))
			check_unreachable(ctx);
		else if (!strcmp(argv[i], "badio"))
			check_badio(ctx);
		else {
			fprintf(stderr, "ini_accept: unknown check %s\n", argv[i]);
			failed = 1;
		}
		fflush(stdout);
	}
	ix_ctx_free(ctx);
	return failed;
}
