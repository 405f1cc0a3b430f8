/* ix-bench: load generator and data verifier for iSCSI targets, on the ix initiator library.
 *
 *   ix-bench -p HOST:PORT -T IQN [--lun N] [--transport T] [--rw MODE] [--mix PCT] [--bs SIZE]
 *            [--qd N] [--sessions N] [--threads N] [--time DUR] [--size SIZE] [--offset SIZE]
 *            [--range SIZE] [--verify] [--seed N] [--json] [--progress] [--quiet]
 *            [--chap-user U --chap-secret S [--mutual-user U --mutual-secret S]]
 *            [--digests] [--replacement-timeout MS] [--login-timeout MS] [--poll-us US] [-v]
 *
 * Exit status: 0 the run completed without errors or miscompares, 1 a command failed, data
 * did not verify or a second interrupt cancelled the run, 2 bad usage or the run could not
 * start (login, capacity, range).
 * docs/initiator.md describes the options and the verification in full. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ixb.h"
#include "ixb_verify.h"

static const char *const rw_names[] = {
	[IXB_READ] = "read",         [IXB_WRITE] = "write",   [IXB_RANDREAD] = "randread",
	[IXB_RANDWRITE] = "randwrite", [IXB_RANDRW] = "randrw", [IXB_RW] = "rw",
};

static const char usage_text[] =
	"usage: ix-bench -p HOST[:PORT] -T IQN [options]\n"
	"  -p, --portal HOST:PORT    target portal (port 3260 if omitted)\n"
	"  -T, --target IQN          target name\n"
	"  -I, --initiator IQN       our name (default iqn.2026-11.io.ix:ix-bench)\n"
	"  -l, --lun N               LUN (default 0)\n"
	"      --transport T         tcp (default), iser or auto, as the library offers\n"
	"      --rw MODE             read|write|randread|randwrite|randrw|rw (default randread)\n"
	"      --mix PCT             percent reads in randrw/rw (default 70)\n"
	"      --bs SIZE             bytes per I/O, e.g. 4k (default 4k)\n"
	"  -q, --qd N                commands in flight per session (default 32)\n"
	"      --sessions N          sessions, each on its own slice of the range (default 1)\n"
	"      --threads N           threads the sessions are spread over (default: one per\n"
	"                            session, at most one per CPU)\n"
	"  -t, --time DUR            run time, e.g. 10s, 500ms, 2m (default 10s)\n"
	"  -s, --size SIZE           stop after this many bytes (with --time: first wins)\n"
	"      --offset SIZE         start of the range on the LUN (default 0)\n"
	"      --range SIZE          length of the range (default: to the end of the LUN)\n"
	"      --verify              write checkable blocks, check every read, and re-read\n"
	"                            everything written at the end; a read-only run checks\n"
	"                            the data of an earlier run with the same --seed\n"
	"      --seed N              seed of the data and the offsets (default random)\n"
	"      --json                print the result as one JSON object on stdout\n"
	"      --progress            progress line every second even if stderr is no tty\n"
	"      --quiet               no progress and no event lines on stderr\n"
	"      --chap-user U --chap-secret S        one-way CHAP\n"
	"      --mutual-user U --mutual-secret S    mutual CHAP (the target's credentials)\n"
	"      --digests             require CRC32C header and data digests\n"
	"      --replacement-timeout MS   wait for a lost connection (default 15000)\n"
	"      --login-timeout MS    per login attempt (default 5000)\n"
	"      --poll-us US          poll without sleeping for up to US microseconds after\n"
	"                            traffic (default 50; 0 = off)\n"
	"  -v                        library messages: warnings, then info, then debug\n"
	"Sizes take k, m, g, t suffixes (powers of 1024). Exit: 0 ok, 1 errors or\n"
	"miscompares (or cancelled), 2 usage or set-up failure.\n";

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

/* ---------------------------------------------------------------- option values */

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	default: break;
	}
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end || (v && mul > UINT64_MAX / v))
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int parse_ms(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (!strcmp(end, "ms"))
		*out = v;
	else if (!*end || !strcmp(end, "s"))
		*out = v * 1000;
	else if (!strcmp(end, "m"))
		*out = v * 60000;
	else if (!strcmp(end, "h"))
		*out = v * 3600000;
	else
		return -EINVAL;
	return 0;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

enum {
	OPT_RW = 256, OPT_MIX, OPT_BS, OPT_SESSIONS, OPT_THREADS, OPT_OFFSET, OPT_RANGE,
	OPT_VERIFY, OPT_SEED, OPT_JSON, OPT_PROGRESS, OPT_QUIET, OPT_CHAP_USER, OPT_CHAP_SECRET,
	OPT_MUTUAL_USER, OPT_MUTUAL_SECRET, OPT_DIGESTS, OPT_REPLACEMENT, OPT_LOGIN_TIMEOUT,
	OPT_TRANSPORT, OPT_POLL_US,
};

static const struct option long_opts[] = {
	{"portal", required_argument, NULL, 'p'},
	{"target", required_argument, NULL, 'T'},
	{"initiator", required_argument, NULL, 'I'},
	{"lun", required_argument, NULL, 'l'},
	{"transport", required_argument, NULL, OPT_TRANSPORT},
	{"rw", required_argument, NULL, OPT_RW},
	{"mix", required_argument, NULL, OPT_MIX},
	{"bs", required_argument, NULL, OPT_BS},
	{"qd", required_argument, NULL, 'q'},
	{"sessions", required_argument, NULL, OPT_SESSIONS},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"time", required_argument, NULL, 't'},
	{"size", required_argument, NULL, 's'},
	{"offset", required_argument, NULL, OPT_OFFSET},
	{"range", required_argument, NULL, OPT_RANGE},
	{"verify", no_argument, NULL, OPT_VERIFY},
	{"seed", required_argument, NULL, OPT_SEED},
	{"json", no_argument, NULL, OPT_JSON},
	{"progress", no_argument, NULL, OPT_PROGRESS},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"chap-user", required_argument, NULL, OPT_CHAP_USER},
	{"chap-secret", required_argument, NULL, OPT_CHAP_SECRET},
	{"mutual-user", required_argument, NULL, OPT_MUTUAL_USER},
	{"mutual-secret", required_argument, NULL, OPT_MUTUAL_SECRET},
	{"digests", no_argument, NULL, OPT_DIGESTS},
	{"replacement-timeout", required_argument, NULL, OPT_REPLACEMENT},
	{"login-timeout", required_argument, NULL, OPT_LOGIN_TIMEOUT},
	{"poll-us", required_argument, NULL, OPT_POLL_US},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static int bad(const char *opt, const char *val)
{
	fprintf(stderr, "ix-bench: bad value for %s: \"%s\"\n", opt, val);
	return -EINVAL;
}

static int parse_rw(const char *v, struct ixb_cfg *c)
{
	for (unsigned i = 0; i < sizeof(rw_names) / sizeof(rw_names[0]); i++)
		if (!strcmp(v, rw_names[i])) {
			c->rw = (enum ixb_rw)i;
			return 0;
		}
	return bad("--rw", v);
}

/* One option; seed_given tells whether --seed came. 0, 1 (--help) or -EINVAL. */
static int parse_one(int o, const char *v, struct ixb_cfg *c, bool *seed_given)
{
	uint64_t x;

	switch (o) {
	case 'p': c->portal = v; return 0;
	case 'T': c->target = v; return 0;
	case 'I': c->initiator = v; return 0;
	case OPT_TRANSPORT: c->transport = v; return 0;
	case 'l': return parse_u32(v, 0, 16383, &c->lun) ? bad("--lun", v) : 0;
	case OPT_RW: return parse_rw(v, c);
	case OPT_MIX: return parse_u32(v, 0, 100, &c->mix) ? bad("--mix", v) : 0;
	case OPT_BS:
		if (parse_size(v, &x) || x < 512 || x > (16u << 20) || x % 512)
			return bad("--bs (512 bytes to 16 MiB, a multiple of 512)", v);
		c->bs = (uint32_t)x;
		return 0;
	case 'q': return parse_u32(v, 1, 4096, &c->qd) ? bad("--qd (1..4096)", v) : 0;
	case OPT_SESSIONS:
		return parse_u32(v, 1, 256, &c->sessions) ? bad("--sessions (1..256)", v) : 0;
	case OPT_THREADS:
		return parse_u32(v, 1, 256, &c->threads) ? bad("--threads (1..256)", v) : 0;
	case 't': return parse_ms(v, &c->time_ms) || !c->time_ms ? bad("--time", v) : 0;
	case 's': return parse_size(v, &c->size) || !c->size ? bad("--size", v) : 0;
	case OPT_OFFSET: return parse_size(v, &c->offset) ? bad("--offset", v) : 0;
	case OPT_RANGE: return parse_size(v, &c->range) || !c->range ? bad("--range", v) : 0;
	case OPT_VERIFY: c->verify = true; return 0;
	case OPT_SEED:
		errno = 0;
		c->seed = strtoull(v, NULL, 0);
		*seed_given = true;
		return errno ? bad("--seed", v) : 0;
	case OPT_JSON: c->json = true; return 0;
	case OPT_PROGRESS: c->progress = true; return 0;
	case OPT_QUIET: c->quiet = true; return 0;
	case OPT_CHAP_USER: c->chap_user = v; return 0;
	case OPT_CHAP_SECRET: c->chap_secret = v; return 0;
	case OPT_MUTUAL_USER: c->mutual_user = v; return 0;
	case OPT_MUTUAL_SECRET: c->mutual_secret = v; return 0;
	case OPT_DIGESTS: c->digests = true; return 0;
	case OPT_REPLACEMENT:
		return parse_u32(v, 0, 3600000, &c->replacement_timeout_ms)
			       ? bad("--replacement-timeout", v)
			       : 0;
	case OPT_LOGIN_TIMEOUT:
		return parse_u32(v, 1, 600000, &c->login_timeout_ms) ? bad("--login-timeout", v)
								     : 0;
	case OPT_POLL_US: {
		uint32_t us;
		if (parse_u32(v, 0, 10000, &us))
			return bad("--poll-us", v);
		c->poll_us = (int)us;
		return 0;
	}
	case 'v': c->log_level++; return 0;
	case 'h': usage(stdout); return 1;
	default: usage(stderr); return -EINVAL;
	}
}

/* 0 to run, 1 after --help, -EINVAL on bad usage (reported). */
static int parse_args(int argc, char **argv, struct ixb_cfg *c)
{
	bool seed_given = false;
	int o, r;

	*c = (struct ixb_cfg){
		.initiator = "iqn.2026-11.io.ix:ix-bench",
		.rw = IXB_RANDREAD,
		.mix = 70,
		.bs = 4096,
		.qd = 32,
		.sessions = 1,
		.replacement_timeout_ms = 15000,
		.log_level = 0, /* ix-bench reports the library's events itself */
		.poll_us = -1,
	};
	while ((o = getopt_long(argc, argv, "p:T:I:l:q:t:s:vh", long_opts, NULL)) != -1) {
		r = parse_one(o, optarg, c, &seed_given);
		if (r)
			return r;
	}
	if (optind < argc) {
		fprintf(stderr, "ix-bench: unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (!c->portal || !c->target) {
		fprintf(stderr, "ix-bench: -p PORTAL and -T TARGET are required (--help)\n");
		return -EINVAL;
	}
	if (!c->chap_user != !c->chap_secret || !c->mutual_user != !c->mutual_secret ||
	    (c->mutual_user && !c->chap_user)) {
		fprintf(stderr, "ix-bench: CHAP needs --chap-user and --chap-secret (and both "
				"--mutual-* for mutual CHAP)\n");
		return -EINVAL;
	}
	if (c->verify && !ixb_rw_writes(c->rw) && !seed_given) {
		fprintf(stderr, "ix-bench: --verify on a read-only run checks what an earlier run "
				"wrote: give that run's --seed\n");
		return -EINVAL;
	}
	if (!c->threads) {
		/* one thread (and context) per session up to the CPU count: measured against
		   ix-target, two sessions on two threads did 1.1-2.7x the IOPS of both on one
		   (docs/initiator.md) */
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = n > 0 && (uint32_t)n < c->sessions ? (uint32_t)n : c->sessions;
	}
	if (c->threads > c->sessions)
		c->threads = c->sessions;
	if (c->size && c->size < c->bs) {
		fprintf(stderr, "ix-bench: --size is smaller than one I/O (--bs %u)\n", c->bs);
		return -EINVAL;
	}
	if (!c->time_ms && !c->size)
		c->time_ms = 10000;
	if (!seed_given && getrandom(&c->seed, sizeof(c->seed), 0) != sizeof(c->seed))
		c->seed = (uint64_t)ixb_now_ns() * 0x9e3779b97f4a7c15ull;
	return 0;
}

/* ---------------------------------------------------------------- the run */

struct totals {
	struct ixb_hist lat[2];
	uint64_t ios[2], bytes[2];
	uint64_t errors, miscompares, retries, verified_units, verify_errors, verify_skipped;
	uint64_t cancelled;
	uint64_t losses, recoveries, recovery_max_ms, session_recoveries;
	uint64_t end_ns, wall_end_ns, lun_blocks;
	uint32_t lun_block_size;
	const char *first_error;
	double secs, cpu_user, cpu_sys;
	bool interrupted;
};

static double tv_secs(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The progress line: rates over the last interval, counters since the start. */
static void progress(const struct ixb_run *run, struct ixb_worker *w, uint32_t nw,
		     uint64_t prev[2], uint64_t *prev_ns)
{
	uint64_t now = ixb_now_ns(), ios[2] = {0, 0}, bytes[2] = {0, 0}, err = 0, mis = 0, lost = 0,
		 rec = 0;
	double dt = (double)(now - *prev_ns) / 1e9;

	for (uint32_t i = 0; i < nw; i++) {
		for (int d = 0; d < 2; d++) {
			ios[d] += atomic_load_explicit(&w[i].live.ios[d], memory_order_relaxed);
			bytes[d] += atomic_load_explicit(&w[i].live.bytes[d], memory_order_relaxed);
		}
		err += atomic_load_explicit(&w[i].live.errors, memory_order_relaxed);
		mis += atomic_load_explicit(&w[i].live.miscompares, memory_order_relaxed);
		lost += atomic_load_explicit(&w[i].live.losses, memory_order_relaxed);
		rec += atomic_load_explicit(&w[i].live.recoveries, memory_order_relaxed);
	}
	if (dt <= 0)
		dt = 1e-9;
	fprintf(stderr,
		"%s[%4.0fs] read %8.0f IOPS %8.1f MiB/s | write %8.0f IOPS %8.1f MiB/s | "
		"errors %" PRIu64 " miscompares %" PRIu64 " | lost %" PRIu64 " recovered %" PRIu64
		"%s",
		run->tty ? "\r" : "", (double)(now - run->start_ns) / 1e9,
		(double)(ios[0] - prev[0]) / dt, (double)(bytes[0] - prev[2]) / dt / 1048576.0,
		(double)(ios[1] - prev[1]) / dt, (double)(bytes[1] - prev[3]) / dt / 1048576.0, err,
		mis, lost, rec, run->tty ? "\033[K" : "\n");
	prev[0] = ios[0], prev[1] = ios[1], prev[2] = bytes[0], prev[3] = bytes[1];
	*prev_ns = now;
}

static bool all(struct ixb_worker *w, uint32_t nw, bool done)
{
	for (uint32_t i = 0; i < nw; i++) {
		if (done && !atomic_load(&w[i].live.done))
			return false;
		if (!done && atomic_load(&w[i].live.ready) == 0)
			return false;
	}
	return true;
}

/* Read pending signals: the first asks the workers to stop, the second to cancel. */
static void on_signals(int sfd, struct ixb_run *run, struct totals *t)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
		t->interrupted = true;
		if (atomic_load(&run->stop))
			atomic_store(&run->abort, true);
		atomic_store(&run->stop, true);
		fprintf(stderr, "%six-bench: %s: %s\n", run->tty ? "\r\033[K" : "",
			strsignal((int)si.ssi_signo),
			atomic_load(&run->abort) ? "cancelling what is in flight"
						 : "stopping (again to cancel)");
	}
}

/* Wait until all workers are ready (or one failed), then start the clock. 0 or -1. */
static int start(struct ixb_run *run, struct ixb_worker *w, uint32_t nw, int sfd,
		 struct totals *t)
{
	struct pollfd pfd = {.fd = sfd, .events = POLLIN};

	while (!all(w, nw, false) && !atomic_load(&run->stop)) {
		if (poll(&pfd, 1, 20) > 0)
			on_signals(sfd, run, t);
	}
	for (uint32_t i = 0; i < nw; i++)
		if (atomic_load(&w[i].live.ready) < 0) {
			atomic_store(&run->stop, true);
			return -1;
		}
	if (atomic_load(&run->stop))
		return -1;
	run->start_ns = ixb_now_ns();
	run->deadline_ns = run->cfg->time_ms ? run->start_ns + run->cfg->time_ms * 1000000 : 0;
	atomic_store(&run->go, true);
	return 0;
}

static void watch(struct ixb_run *run, struct ixb_worker *w, uint32_t nw, int sfd,
		  struct totals *t)
{
	const struct ixb_cfg *cfg = run->cfg;
	bool show = !cfg->quiet && (run->tty || cfg->progress);
	uint64_t prev[4] = {0, 0, 0, 0}, prev_ns = run->start_ns, next = run->start_ns + 1000000000;
	struct pollfd pfd = {.fd = sfd, .events = POLLIN};

	while (!all(w, nw, true)) {
		uint64_t now = ixb_now_ns();
		int wait = now >= next ? 0 : (int)((next - now) / 1000000) + 1;

		if (wait > 100)
			wait = 100;
		if (poll(&pfd, 1, wait) > 0)
			on_signals(sfd, run, t);
		if (ixb_now_ns() >= next) {
			if (show)
				progress(run, w, nw, prev, &prev_ns);
			next += 1000000000;
		}
	}
	if (show && run->tty)
		fprintf(stderr, "\r\033[K");
}

static void collect(struct ixb_worker *w, uint32_t nw, struct totals *t)
{
	ixb_hist_init(&t->lat[0]);
	ixb_hist_init(&t->lat[1]);
	for (uint32_t i = 0; i < nw; i++) {
		const struct ixb_result *r = &w[i].res;
		for (int d = 0; d < 2; d++) {
			ixb_hist_merge(&t->lat[d], &r->lat[d]);
			t->ios[d] += r->ios[d];
			t->bytes[d] += r->bytes[d];
		}
		t->errors += r->errors;
		t->miscompares += r->miscompares;
		t->retries += r->retries;
		t->verified_units += r->verified_units;
		t->verify_errors += r->verify_errors;
		t->verify_skipped += r->verify_skipped;
		t->cancelled += r->cancelled;
		t->losses += r->losses;
		t->recoveries += r->recoveries;
		t->session_recoveries += r->session_recoveries;
		if (r->recovery_max_ms > t->recovery_max_ms)
			t->recovery_max_ms = r->recovery_max_ms;
		if (r->end_ns > t->end_ns)
			t->end_ns = r->end_ns;
		if (r->lun_block_size) {
			t->lun_blocks = r->lun_blocks;
			t->lun_block_size = r->lun_block_size;
		}
		if (!t->first_error && r->first_error[0])
			t->first_error = r->first_error;
	}
}

/* ---------------------------------------------------------------- report */

static const double pcts[] = {50, 90, 99, 99.9};
static const char *const pct_names[] = {"p50", "p90", "p99", "p99.9"};

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

/* 0 ok (ended by itself or by a first interrupt, no failure), 1 failed, 2 cancelled. */
static int outcome(const struct totals *t)
{
	if (t->errors || t->miscompares)
		return 1;
	return t->cancelled ? 2 : 0;
}

static const char *const outcome_text[] = {"OK", "FAILED", "CANCELLED"};
static const char *const outcome_json[] = {"ok", "error", "cancelled"};

static void text_dir(const struct totals *t, int d)
{
	const struct ixb_hist *h = &t->lat[d];

	printf("  %-5s: %10" PRIu64 " I/Os %10.0f IOPS %9.1f MiB/s | latency us avg %.1f",
	       d ? "write" : "read", t->ios[d], (double)t->ios[d] / t->secs,
	       (double)t->bytes[d] / t->secs / 1048576.0,
	       h->count ? us(h->sum / h->count) : 0.0);
	for (int i = 0; i < 4; i++)
		printf(" %s %.1f", pct_names[i], us(ixb_hist_pct(h, pcts[i])));
	printf(" max %.1f\n", us(h->max));
}

static void report_text(const struct ixb_cfg *cfg, const struct totals *t, uint32_t nthreads)
{
	uint64_t ios = t->ios[0] + t->ios[1], bytes = t->bytes[0] + t->bytes[1];

	printf("ix-bench: %s", cfg->rw < sizeof(rw_names) / sizeof(rw_names[0]) ? rw_names[cfg->rw]
										 : "?");
	if (cfg->rw == IXB_RANDRW || cfg->rw == IXB_RW)
		printf(" (%u%% reads)", cfg->mix);
	printf(", %u-byte I/Os, QD %u x %u session(s) on %u thread(s), LUN %u of %s at %s\n",
	       cfg->bs, cfg->qd, cfg->sessions, nthreads, cfg->lun, cfg->target, cfg->portal);
	printf("  %.2f s, seed %" PRIu64 "%s\n", t->secs, cfg->seed,
	       cfg->verify ? ", verify on" : "");
	if (t->ios[0] || !t->ios[1])
		text_dir(t, 0);
	if (t->ios[1])
		text_dir(t, 1);
	printf("  total: %10.0f IOPS %9.1f MiB/s\n", (double)ios / t->secs,
	       (double)bytes / t->secs / 1048576.0);
	if (cfg->verify && ixb_rw_writes(cfg->rw))
		printf("  verify: every read checked; %" PRIu64
		       " written %u-byte blocks re-read at the end, %" PRIu64 " of them wrong%s\n",
		       t->verified_units, cfg->bs, t->verify_errors,
		       t->verify_skipped ? " (not on failed sessions)" : "");
	else if (cfg->verify)
		printf("  verify: every block read checked against seed %" PRIu64 "\n", cfg->seed);
	if (t->losses || t->session_recoveries)
		printf("  recovery: %" PRIu64 " connection(s) lost, %" PRIu64
		       " recovered (sessions report %" PRIu64 "), longest %" PRIu64 " ms\n",
		       t->losses, t->recoveries, t->session_recoveries, t->recovery_max_ms);
	printf("  cpu: %.0f%% of one core (user %.2f s, sys %.2f s)\n",
	       (t->cpu_user + t->cpu_sys) / t->secs * 100.0, t->cpu_user, t->cpu_sys);
	printf("  errors %" PRIu64 ", miscompares %" PRIu64 ", retries %" PRIu64
	       " (unit attention, busy)\n",
	       t->errors, t->miscompares, t->retries);
	if (t->first_error)
		printf("  first error: %s\n", t->first_error);
	if (t->cancelled)
		printf("  cancelled: %" PRIu64 " commands (second interrupt)\n", t->cancelled);
	printf("  result: %s\n", outcome_text[outcome(t)]);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void json_dir(const struct totals *t, int d)
{
	const struct ixb_hist *h = &t->lat[d];

	printf("\"%s\":{\"ios\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"iops\":%.1f,\"mib_s\":%.2f,"
	       "\"lat_us\":{\"avg\":%.1f",
	       d ? "write" : "read", t->ios[d], t->bytes[d], (double)t->ios[d] / t->secs,
	       (double)t->bytes[d] / t->secs / 1048576.0, h->count ? us(h->sum / h->count) : 0.0);
	for (int i = 0; i < 4; i++)
		printf(",\"%s\":%.1f", pct_names[i], us(ixb_hist_pct(h, pcts[i])));
	printf(",\"max\":%.1f}}", us(h->max));
}

static void report_json(const struct ixb_cfg *cfg, const struct totals *t, uint32_t nthreads)
{
	uint64_t ios = t->ios[0] + t->ios[1], bytes = t->bytes[0] + t->bytes[1];

	printf("{\"portal\":");
	json_str(cfg->portal);
	printf(",\"target\":");
	json_str(cfg->target);
	printf(",\"transport\":");
	json_str(cfg->transport ? cfg->transport : "tcp");
	printf(",\"lun\":%u,\"rw\":\"%s\",\"mix\":%u,\"bs\":%u,\"qd\":%u,\"sessions\":%u,"
	       "\"threads\":%u,\"seed\":%" PRIu64 ",\"verify\":%s,\"digests\":%s,"
	       "\"lun_blocks\":%" PRIu64 ",\"block_size\":%u,\"seconds\":%.3f,",
	       cfg->lun, rw_names[cfg->rw], cfg->mix, cfg->bs, cfg->qd, cfg->sessions, nthreads,
	       cfg->seed, cfg->verify ? "true" : "false", cfg->digests ? "true" : "false",
	       t->lun_blocks, t->lun_block_size, t->secs);
	json_dir(t, 0);
	putchar(',');
	json_dir(t, 1);
	printf(",\"iops\":%.1f,\"mib_s\":%.2f,\"errors\":%" PRIu64 ",\"miscompares\":%" PRIu64
	       ",\"retries\":%" PRIu64 ",\"verified_blocks\":%" PRIu64
	       ",\"verify_pass_miscompares\":%" PRIu64 ",",
	       (double)ios / t->secs, (double)bytes / t->secs / 1048576.0, t->errors,
	       t->miscompares, t->retries, t->verified_units, t->verify_errors);
	printf("\"recovery\":{\"connection_losses\":%" PRIu64 ",\"recovered\":%" PRIu64
	       ",\"session_recoveries\":%" PRIu64 ",\"max_ms\":%" PRIu64 "},",
	       t->losses, t->recoveries, t->session_recoveries, t->recovery_max_ms);
	printf("\"cpu\":{\"user_s\":%.3f,\"sys_s\":%.3f,\"percent\":%.1f},",
	       t->cpu_user, t->cpu_sys, (t->cpu_user + t->cpu_sys) / t->secs * 100.0);
	printf("\"interrupted\":%s,\"first_error\":", t->interrupted ? "true" : "false");
	if (t->first_error)
		json_str(t->first_error);
	else
		printf("null");
	printf(",\"cancelled\":%" PRIu64 ",\"result\":\"%s\"}\n", t->cancelled,
	       outcome_json[outcome(t)]);
}

/* ---------------------------------------------------------------- main */

static int run_workers(struct ixb_run *run, struct ixb_worker *w, uint32_t nw, int sfd,
		       struct totals *t)
{
	const struct ixb_cfg *cfg = run->cfg;
	struct rusage ru0, ru1;
	uint32_t started = 0;
	int rc = 0;

	for (uint32_t i = 0; i < nw; i++) {
		w[i].id = (int)i;
		w[i].run = run;
		w[i].first_session = cfg->sessions * i / nw;
		w[i].nsessions = cfg->sessions * (i + 1) / nw - w[i].first_session;
		if (pthread_create(&w[i].thread, NULL, ixb_worker_main, &w[i]) != 0) {
			fprintf(stderr, "ix-bench: cannot start a thread\n");
			atomic_store(&run->stop, true);
			rc = -1;
			break;
		}
		started++;
	}
	if (rc == 0 && start(run, w, nw, sfd, t) < 0)
		rc = -1;
	getrusage(RUSAGE_SELF, &ru0);
	if (rc == 0)
		watch(run, w, nw, sfd, t);
	getrusage(RUSAGE_SELF, &ru1);
	t->wall_end_ns = ixb_now_ns();
	for (uint32_t i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	for (uint32_t i = 0; i < started && rc < 0; i++)
		if (w[i].res.setup_error[0]) {
			fprintf(stderr, "ix-bench: %s\n", w[i].res.setup_error);
			break;
		}
	t->cpu_user = tv_secs(ru1.ru_utime) - tv_secs(ru0.ru_utime);
	t->cpu_sys = tv_secs(ru1.ru_stime) - tv_secs(ru0.ru_stime);
	return rc;
}

int main(int argc, char **argv)
{
	struct ixb_cfg cfg;
	struct ixb_run run;
	struct ixb_worker *w;
	struct totals t;
	uint64_t end;
	sigset_t set;
	int sfd, r;

	r = parse_args(argc, argv, &cfg);
	if (r)
		return r > 0 ? 0 : 2;
	ix_set_log_level(cfg.log_level);
	/* signals arrive through a descriptor the main thread polls; the workers inherit the
	   mask and never see them */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	w = calloc(cfg.threads, sizeof(*w));
	if (sfd < 0 || !w) {
		fprintf(stderr, "ix-bench: %s\n", strerror(errno));
		return 2;
	}
	memset(&run, 0, sizeof(run));
	run.cfg = &cfg;
	run.tty = isatty(STDERR_FILENO);
	memset(&t, 0, sizeof(t));
	if (run_workers(&run, w, cfg.threads, sfd, &t) < 0) {
		free(w);
		return 2;
	}
	collect(w, cfg.threads, &t);
	/* the measured phase ends with its last completion (not with the verify pass) */
	end = t.end_ns > run.start_ns ? t.end_ns : t.wall_end_ns;
	t.secs = (double)(end - run.start_ns) / 1e9;
	if (t.secs <= 0)
		t.secs = 1e-9;
	if (cfg.json)
		report_json(&cfg, &t, cfg.threads);
	else
		report_text(&cfg, &t, cfg.threads);
	free(w);
	close(sfd);
	return outcome(&t) ? 1 : 0;
}
