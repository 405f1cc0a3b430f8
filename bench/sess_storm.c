/* sess_storm: many sessions at once against one target, for bench/sessions.py (issue 28: a
 * hypervisor cluster or a VDI farm logging in after a failover or a boot storm).
 *
 *   sess_storm -p HOST:PORT -T IQN -n N [-I PREFIX] [--chap-user U --chap-secret S]
 *              [--idle SECS] [--login-timeout MS] [--burst K]
 *
 * Opens N sessions on one ix_ctx (one thread, the library's event loop) and starts all N
 * logins at once, each initiator named PREFIX:NNNNN (so N initiators, as N hosts would be).
 * Prints one JSON line when every login has ended:
 *   {"event":"logged_in","n":N,"ok":K,"failed":F,"first_error":"...","seconds":S,
 *    "logins_per_s":R,"p50_ms":..,"p99_ms":..,"max_ms":..}
 * (times from the start of the storm to each login's completion), then keeps the sessions
 * With --burst K, every session logged in first sends K WRITE(10)s of 4 KiB at once (to LBAs
 * 0, 8, ... 8 * (K - 1), the same for every session, so the LUN's memory the target touches
 * does not grow with N) and waits for them, as a host does at boot,
 * printing {"event":"busy_done","ios":I,"errors":E,"seconds":S}. Then it keeps the sessions
 * idle for SECS seconds (the library answers the target's NOP-Ins), prints
 *   {"event":"idle_done"} and logs every session out, printing {"event":"logged_out",...}.
 * Uses only the public API (include/ix). Exit 0 when every login succeeded. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ix/initiator.h"

struct one {
	struct ix_session *s;
	int idx;
	int err; /* 1 pending */
	double t_ms;
	struct storm *st;
	char name[96];
};

struct storm {
	struct one *v;
	int n, pending;
	double t0;
	char first_error[256];
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void done(struct ix_session *s, int err, void *arg)
{
	struct one *o = arg;

	o->err = err;
	o->t_ms = now_ms() - o->st->t0;
	o->st->pending--;
	if (err && !o->st->first_error[0])
		snprintf(o->st->first_error, sizeof(o->st->first_error), "%s: %s",
			 strerror(-err), ix_session_error(s));
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The --burst phase: K commands a session, all submitted at once. */
struct burst {
	int pending, errors;
};

static void burst_done(struct ix_scsi_cmd *cmd)
{
	struct burst *b = cmd->arg;

	if (cmd->err || cmd->status)
		b->errors++;
	b->pending--;
}

/* Every logged-in session submits k 4 KiB writes at once; the context serves them until all
 * are done (or 60 s). Prints the busy_done event. */
static void run_burst(struct ix_ctx *ctx, struct storm *st, int k)
{
	struct ix_scsi_cmd *cmds = calloc((size_t)st->n * (size_t)k, sizeof(*cmds));
	uint8_t *buf = calloc(1, 4096);
	struct burst b = {0};
	double t0 = now_ms();
	int ios = 0;

	if (!cmds || !buf) {
		fprintf(stderr, "sess_storm: out of memory for the burst\n");
		exit(2);
	}
	for (int i = 0; i < st->n; i++) {
		if (st->v[i].err != 0)
			continue;
		for (int j = 0; j < k; j++) {
			struct ix_scsi_cmd *c = &cmds[(size_t)i * (size_t)k + (size_t)j];
			uint32_t lba = (uint32_t)j * 8;
			uint8_t cdb[10] = {0x2a, 0, (uint8_t)(lba >> 24), (uint8_t)(lba >> 16),
					   (uint8_t)(lba >> 8), (uint8_t)lba, 0, 0, 8, 0};

			ix_scsi_cmd_init(c, 0, cdb, 10, IX_DIR_WRITE, buf, 4096, burst_done, &b);
			if (ix_scsi_submit(st->v[i].s, c) == 0) {
				b.pending++;
				ios++;
			} else {
				b.errors++;
			}
		}
	}
	while (b.pending > 0 && now_ms() < t0 + 60000)
		ix_ctx_service(ctx, 50);
	printf("{\"event\":\"busy_done\",\"ios\":%d,\"errors\":%d,\"pending\":%d,"
	       "\"seconds\":%.3f}\n",
	       ios, b.errors, b.pending, (now_ms() - t0) / 1e3);
	fflush(stdout);
	if (b.pending == 0) { /* (else the library still refers to them: kept) */
		free(cmds);
		free(buf);
	}
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* Service the context until pending reaches 0 or deadline (ms, monotonic). */
static void wait_all(struct ix_ctx *ctx, struct storm *st, double deadline)
{
	while (st->pending > 0 && now_ms() < deadline)
		ix_ctx_service(ctx, 50);
}

static void usage(void)
{
	fprintf(stderr, "usage: sess_storm -p HOST:PORT -T IQN -n N [-I PREFIX] "
			"[--chap-user U --chap-secret S] [--idle SECS] [--login-timeout MS] "
			"[--burst K]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"chap-user", required_argument, NULL, 'u'},
	    {"chap-secret", required_argument, NULL, 'k'},
	    {"idle", required_argument, NULL, 'i'},
	    {"login-timeout", required_argument, NULL, 'L'},
	    {"burst", required_argument, NULL, 'b'},
	    {NULL, 0, NULL, 0},
	};
	const char *portal = NULL, *target = NULL, *prefix = "iqn.2026-11.io.ix.bench:host";
	const char *chap_user = NULL, *chap_secret = NULL;
	int n = 0, idle_s = 10, login_timeout_ms = 60000, c, ok = 0, burst = 0;
	struct storm st = {0};
	struct ix_ctx *ctx;
	struct rlimit rl;
	double *t;

	while ((c = getopt_long(argc, argv, "p:T:n:I:", lo, NULL)) != -1) {
		switch (c) {
		case 'p': portal = optarg; break;
		case 'T': target = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'I': prefix = optarg; break;
		case 'u': chap_user = optarg; break;
		case 'k': chap_secret = optarg; break;
		case 'i': idle_s = atoi(optarg); break;
		case 'L': login_timeout_ms = atoi(optarg); break;
		case 'b': burst = atoi(optarg); break;
		default: usage();
		}
	}
	if (!portal || !target || n <= 0 || n > 100000 || idle_s < 0 || login_timeout_ms <= 0 ||
	    burst < 0 || burst > 1024)
		usage();
	/* a descriptor per session, and some */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)n + 64
				      ? (rlim_t)n + 64
				      : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	ctx = ix_ctx_new();
	st.v = calloc((size_t)n, sizeof(*st.v));
	t = calloc((size_t)n, sizeof(*t));
	if (!ctx || !st.v || !t) {
		fprintf(stderr, "sess_storm: out of memory\n");
		return 2;
	}
	ix_set_log_level(0); /* thousands of sessions: the summary says what failed */
	ix_ctx_set_poll_us(ctx, 0);
	st.n = n;
	for (int i = 0; i < n; i++) {
		struct ix_session_opts o;
		struct one *x = &st.v[i];
		int err;

		x->idx = i;
		x->st = &st;
		x->err = 1;
		snprintf(x->name, sizeof(x->name), "%s:%05d", prefix, i);
		ix_session_opts_default(&o);
		o.initiator_name = x->name;
		o.target_name = target;
		o.portal = portal;
		o.queue_depth = burst > 1 ? (uint32_t)burst : 1;
		o.login_timeout_ms = (uint32_t)login_timeout_ms;
		o.chap.user = chap_user;
		o.chap.secret = chap_secret;
		x->s = ix_session_new(ctx, &o, &err);
		if (!x->s) {
			fprintf(stderr, "sess_storm: session %d: %s\n", i, strerror(-err));
			return 2;
		}
	}
	st.t0 = now_ms();
	for (int i = 0; i < n; i++) {
		int r = ix_session_login(st.v[i].s, done, &st.v[i]);

		if (r < 0) {
			st.v[i].err = r;
			st.v[i].t_ms = now_ms() - st.t0;
			if (!st.first_error[0])
				snprintf(st.first_error, sizeof(st.first_error), "login: %s",
					 strerror(-r));
		} else {
			st.pending++;
		}
	}
	wait_all(ctx, &st, st.t0 + login_timeout_ms + 5000.0);
	{
		double last = 0, secs;
		int k = 0;

		for (int i = 0; i < n; i++) {
			if (st.v[i].err == 0) {
				t[k++] = st.v[i].t_ms;
				ok++;
			}
			if (st.v[i].err != 1 && st.v[i].t_ms > last)
				last = st.v[i].t_ms;
		}
		qsort(t, (size_t)k, sizeof(*t), cmp_d);
		secs = last / 1e3;
		printf("{\"event\":\"logged_in\",\"n\":%d,\"ok\":%d,\"failed\":%d,\"pending\":%d,"
		       "\"first_error\":",
		       n, ok, n - ok - st.pending, st.pending);
		json_str(st.first_error);
		printf(",\"seconds\":%.3f,\"logins_per_s\":%.1f,\"p50_ms\":%.1f,\"p99_ms\":%.1f,"
		       "\"max_ms\":%.1f}\n",
		       secs, secs > 0 ? ok / secs : 0.0, k ? t[k / 2] : 0.0,
		       k ? t[(k * 99) / 100 < k ? (k * 99) / 100 : k - 1] : 0.0, k ? t[k - 1] : 0.0);
		fflush(stdout);
	}
	if (burst)
		run_burst(ctx, &st, burst);
	{
		double end = now_ms() + idle_s * 1e3;

		while (now_ms() < end)
			ix_ctx_service(ctx, 100);
	}
	{
		int lost = 0;

		for (int i = 0; i < n; i++) {
			struct ix_session_info info;

			if (st.v[i].err == 0 && ix_session_get_info(st.v[i].s, &info) == 0 &&
			    !info.logged_in)
				lost++;
		}
		printf("{\"event\":\"idle_done\",\"not_logged_in\":%d}\n", lost);
		fflush(stdout);
	}
	st.pending = 0;
	st.t0 = now_ms();
	for (int i = 0; i < n; i++) {
		st.v[i].err = 1;
		if (ix_session_logout(st.v[i].s, done, &st.v[i]) == 0)
			st.pending++;
	}
	wait_all(ctx, &st, st.t0 + 60000.0);
	printf("{\"event\":\"logged_out\",\"seconds\":%.3f,\"pending\":%d}\n",
	       (now_ms() - st.t0) / 1e3, st.pending);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		ix_session_free(st.v[i].s);
	ix_ctx_free(ctx);
	free(st.v);
	free(t);
	return ok == n ? 0 : 1;
}
