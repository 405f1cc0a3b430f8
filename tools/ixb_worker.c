/* ix-bench worker thread: one ix_ctx, one or more sessions, each with --qd preallocated slots
 * (a struct ix_scsi_cmd and its buffer) that are reissued from their completion callbacks.
 *
 * Each session owns a disjoint slice of the LUN's units (unit = one --bs I/O at a bs-aligned
 * offset), so with --verify the expected generation of every unit is known exactly without
 * sharing state between threads, and a slice never has two commands on the same unit in flight
 * (a busy byte per unit). After the measured phase, a run that wrote with --verify reads back
 * every unit it wrote and checks it. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ix/scsi.h"
#include "ix/sync.h"
#include "ixb.h"
#include "ixb_verify.h"

#define MAX_RETRIES 8
#define VERIFY_CHUNK (256u * 1024) /* read-back I/O size of the verify pass */
#define MAX_MESSAGES 5             /* error lines printed per worker */

struct wctx;

struct slot {
	struct ix_scsi_cmd cmd;
	struct sess *ss;
	uint8_t *buf;
	uint64_t unit;          /* first unit, relative to the session's slice */
	uint32_t nunits;
	uint32_t gen;           /* generation written (verified writes) */
	uint64_t t0;            /* first submission, ns */
	uint8_t write;
	uint8_t retries;
	bool verify_pass;
};

struct sess {
	struct wctx *wc;
	int idx;                /* global session number */
	struct ix_session *s;
	struct slot *slots;
	uint8_t *bufs;
	uint32_t inflight;
	uint64_t unit0, nunits; /* slice of global units */
	uint64_t cursor;        /* sequential position, and the verify pass's */
	uint64_t quota, issued; /* I/Os of the measured phase (UINT64_MAX: no limit) */
	uint32_t *gen;          /* expected generation per unit (verify) */
	uint8_t *busy;          /* a command on this unit is in flight (verify) */
	uint32_t next_gen;
	uint64_t rng;
	bool dead;              /* no more commands: the session failed for good */
	uint64_t lost_ns;
};

struct wctx {
	struct ixb_worker *w;
	struct ixb_run *run;
	const struct ixb_cfg *cfg;
	struct ix_ctx *ctx;
	struct sess *sess;
	uint32_t nsess;
	uint32_t lbs;           /* logical block size */
	uint64_t lun_blocks;
	uint64_t base_lba, unit_blocks;
	uint32_t slot_cap;      /* bytes per slot buffer */
	bool verify, strict;    /* strict: a read-only run checks data of an earlier run */
	bool stopping, aborting, in_verify;
	unsigned messages;
};

uint64_t ixb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- messages and counters */

static void say(struct wctx *wc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line on stderr, clearing a progress line first on a terminal. */
static void say(struct wctx *wc, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (wc->cfg->quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%sixb: %s\n", wc->run->tty ? "\r\033[K" : "", line);
}

static void record_error(struct wctx *wc, bool miscompare, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void record_error(struct wctx *wc, bool miscompare, const char *fmt, ...)
{
	struct ixb_result *res = &wc->w->res;
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (miscompare)
		res->miscompares++;
	else
		res->errors++;
	atomic_store_explicit(&wc->w->live.errors, res->errors, memory_order_relaxed);
	atomic_store_explicit(&wc->w->live.miscompares, res->miscompares, memory_order_relaxed);
	if (!res->first_error[0])
		snprintf(res->first_error, sizeof(res->first_error), "%s", line);
	if (wc->messages < MAX_MESSAGES)
		say(wc, "%s", line);
	else if (wc->messages == MAX_MESSAGES)
		say(wc, "further errors of this thread are counted, not printed");
	wc->messages++;
}

static const char *errname(int err)
{
	const char *n = strerrorname_np(err < 0 ? -err : err);

	return n ? n : "?";
}

static uint64_t unit_lba(const struct wctx *wc, const struct sess *ss, uint64_t unit)
{
	return wc->base_lba + (ss->unit0 + unit) * wc->unit_blocks;
}

/* ---------------------------------------------------------------- events */

static void on_event(struct ix_session *s, enum ix_session_event ev, int err, void *arg)
{
	struct sess *ss = arg;
	struct wctx *wc = ss->wc;
	struct ixb_result *res = &wc->w->res;
	uint64_t now = ixb_now_ns(), ms = ss->lost_ns ? (now - ss->lost_ns) / 1000000 : 0;

	switch (ev) {
	case IX_EVENT_CONNECTION_LOST:
		ss->lost_ns = now;
		res->losses++;
		atomic_store_explicit(&wc->w->live.losses, res->losses, memory_order_relaxed);
		say(wc, "session %d: connection lost (%s: %s); recovering, replacement timeout "
			"%u ms",
		    ss->idx, errname(err), ix_session_error(s), wc->cfg->replacement_timeout_ms);
		break;
	case IX_EVENT_RECOVERED:
		res->recoveries++;
		res->recovery_total_ms += ms;
		if (ms > res->recovery_max_ms)
			res->recovery_max_ms = ms;
		atomic_store_explicit(&wc->w->live.recoveries, res->recoveries,
				      memory_order_relaxed);
		say(wc, "session %d: recovered after %" PRIu64 " ms; unfinished commands reissued",
		    ss->idx, ms);
		break;
	case IX_EVENT_RECOVERY_FAILED:
		ss->dead = true;
		say(wc, "session %d: recovery failed after %" PRIu64 " ms (%s: %s)", ss->idx, ms,
		    errname(err), ix_session_error(s));
		break;
	case IX_EVENT_TARGET_LOGOUT_REQUEST:
		say(wc, "session %d: the target asks for a logout; reconnecting", ss->idx);
		break;
	}
}

/* ---------------------------------------------------------------- issuing */

static bool can_issue(const struct wctx *wc, const struct sess *ss)
{
	return !wc->stopping && !wc->aborting && !ss->dead && ss->issued < ss->quota;
}

static bool pick_write(struct wctx *wc, struct sess *ss)
{
	switch (wc->cfg->rw) {
	case IXB_READ:
	case IXB_RANDREAD: return false;
	case IXB_WRITE:
	case IXB_RANDWRITE: return true;
	default: return ixb_rand(&ss->rng) % 100 >= wc->cfg->mix;
	}
}

/* The next unit to use; with --verify, one with nothing in flight (the slice holds more
 * units than the queue depth, so a free one always exists). */
static uint64_t pick_unit(struct wctx *wc, struct sess *ss)
{
	uint64_t u;

	if (ixb_rw_random(wc->cfg->rw)) {
		u = ixb_rand(&ss->rng) % ss->nunits;
		for (int i = 0; wc->verify && ss->busy[u] && i < 8; i++)
			u = ixb_rand(&ss->rng) % ss->nunits;
	} else {
		u = ss->cursor;
	}
	while (wc->verify && ss->busy[u])
		u = u + 1 == ss->nunits ? 0 : u + 1;
	if (!ixb_rw_random(wc->cfg->rw))
		ss->cursor = u + 1 == ss->nunits ? 0 : u + 1;
	return u;
}

static void on_done(struct ix_scsi_cmd *cmd);

/* (Re)build the command of a slot and queue it. */
static int submit(struct wctx *wc, struct sess *ss, struct slot *sl)
{
	uint8_t cdb[16], n;
	uint64_t lba = unit_lba(wc, ss, sl->unit);
	uint32_t blocks = (uint32_t)(sl->nunits * wc->unit_blocks);
	int r;

	if (sl->write)
		n = ix_cdb_write16(cdb, lba, blocks, false);
	else
		n = ix_cdb_read16(cdb, lba, blocks, false);
	ix_scsi_cmd_init(&sl->cmd, wc->cfg->lun, cdb, n, sl->write ? IX_DIR_WRITE : IX_DIR_READ,
			 sl->buf, blocks * wc->lbs, on_done, sl);
	r = ix_scsi_submit(ss->s, &sl->cmd);
	if (r < 0) {
		ss->dead = true;
		record_error(wc, false, "session %d: cannot submit %s LBA %" PRIu64 ": %s (%s): %s",
			     ss->idx, sl->write ? "WRITE(16)" : "READ(16)", lba, strerror(-r),
			     errname(r), ix_session_error(ss->s));
		return r;
	}
	ss->inflight++;
	if (wc->verify)
		for (uint32_t i = 0; i < sl->nunits; i++)
			ss->busy[sl->unit + i] = 1;
	return 0;
}

/* Measured phase: the next I/O for a free slot. */
static void issue(struct wctx *wc, struct sess *ss, struct slot *sl)
{
	sl->write = pick_write(wc, ss);
	sl->unit = pick_unit(wc, ss);
	sl->nunits = 1;
	sl->retries = 0;
	sl->verify_pass = false;
	if (sl->write && wc->verify) {
		if (++ss->next_gen == IXB_GEN_UNKNOWN)
			ss->next_gen = 1;
		sl->gen = ss->next_gen;
		ixb_fill(sl->buf, wc->cfg->bs, wc->lbs, unit_lba(wc, ss, sl->unit), wc->cfg->seed,
			 sl->gen);
	}
	sl->t0 = ixb_now_ns();
	if (submit(wc, ss, sl) == 0)
		ss->issued++;
}

/* Verify pass: read back the next run of units this session wrote. false when none is left. */
static bool issue_verify(struct wctx *wc, struct sess *ss, struct slot *sl)
{
	uint32_t max = wc->slot_cap / wc->cfg->bs;
	uint64_t u = ss->cursor;

	if (ss->dead || wc->aborting)
		return false;
	while (u < ss->nunits && (ss->gen[u] == IXB_GEN_NONE || ss->gen[u] == IXB_GEN_UNKNOWN))
		u++;
	if (u >= ss->nunits) {
		ss->cursor = u;
		return false;
	}
	sl->unit = u;
	sl->nunits = 0;
	while (u < ss->nunits && sl->nunits < max && ss->gen[u] != IXB_GEN_NONE &&
	       ss->gen[u] != IXB_GEN_UNKNOWN) {
		sl->nunits++;
		u++;
	}
	ss->cursor = u;
	sl->write = 0;
	sl->retries = 0;
	sl->verify_pass = true;
	sl->t0 = ixb_now_ns();
	return submit(wc, ss, sl) == 0;
}

/* ---------------------------------------------------------------- completions */

/* A UNIT ATTENTION (after a reset or a target restart), BUSY or TASK SET FULL: send again. */
static bool retryable(const struct ix_scsi_cmd *c)
{
	uint8_t key = 0, asc, ascq;

	if (c->err)
		return false;
	if (c->status == 0x08 || c->status == 0x28)
		return true;
	return c->status == 0x02 &&
	       ix_parse_sense(c->sense, c->sense_len, &key, &asc, &ascq) == 0 && key == 6;
}

static void report_failure(struct wctx *wc, struct sess *ss, struct slot *sl)
{
	const struct ix_scsi_cmd *c = &sl->cmd;
	uint64_t lba = unit_lba(wc, ss, sl->unit);
	const char *op = sl->write ? "WRITE(16)" : "READ(16)";
	uint8_t key = 0, asc = 0, ascq = 0;

	if (c->err) {
		record_error(wc, false, "session %d: %s LBA %" PRIu64 ": %s (%s): %s", ss->idx, op,
			     lba, strerror(-c->err), errname(c->err), ix_session_error(ss->s));
		return;
	}
	ix_parse_sense(c->sense, c->sense_len, &key, &asc, &ascq);
	record_error(wc, false, "session %d: %s LBA %" PRIu64 ": %s, %s %02x/%02x", ss->idx, op,
		     lba, ix_scsi_status_str(c->status), ix_sense_key_str(key), asc, ascq);
}

/* Check the units a read brought in. */
static void verify_read(struct wctx *wc, struct sess *ss, struct slot *sl)
{
	uint32_t bs = wc->cfg->bs;

	for (uint32_t i = 0; i < sl->nunits; i++) {
		uint64_t u = sl->unit + i, lba = unit_lba(wc, ss, u);
		uint32_t expect = ss->gen ? ss->gen[u] : IXB_GEN_NONE;
		struct ixb_bad bad;
		char found[128], want[96];

		if (sl->verify_pass)
			wc->w->res.verified_units++;
		if (ixb_judge(sl->buf + (size_t)i * bs, bs, wc->lbs, lba, wc->cfg->seed, expect,
			      wc->strict, &bad) == IXB_OK)
			continue;
		if (sl->verify_pass)
			wc->w->res.verify_errors++;
		if (bad.found.header)
			snprintf(found, sizeof(found),
				 ": it holds generation %u of LBA %" PRIu64 " of seed %" PRIu64,
				 bad.found.gen, bad.found.lba, bad.found.seed);
		else
			snprintf(found, sizeof(found), ": no ix-bench header");
		if (expect == IXB_GEN_NONE)
			snprintf(want, sizeof(want), "an intact block of seed %" PRIu64,
				 wc->cfg->seed);
		else
			snprintf(want, sizeof(want), "generation %u", expect);
		record_error(wc, true,
			     "MISCOMPARE session %d, LBA %" PRIu64
			     " (block %u of the %u-byte I/O at LBA %" PRIu64 ", %u bad): %s%s; "
			     "expected %s",
			     ss->idx, lba + bad.block, bad.block, bs, lba, bad.nbad,
			     ixb_verdict_str(bad.verdict), found, want);
	}
}

static void account(struct wctx *wc, struct slot *sl, uint64_t now)
{
	struct ixb_worker *w = wc->w;
	int d = sl->write;

	ixb_hist_add(&w->res.lat[d], now - sl->t0);
	w->res.ios[d]++;
	w->res.bytes[d] += sl->cmd.len;
	w->res.end_ns = now;
	atomic_store_explicit(&w->live.ios[d], w->res.ios[d], memory_order_relaxed);
	atomic_store_explicit(&w->live.bytes[d], w->res.bytes[d], memory_order_relaxed);
}

static void on_done(struct ix_scsi_cmd *c)
{
	struct slot *sl = c->arg;
	struct sess *ss = sl->ss;
	struct wctx *wc = ss->wc;
	uint64_t now = ixb_now_ns();
	bool ok = c->err == 0 && c->status == 0;

	ss->inflight--;
	if (!ok && !wc->aborting && retryable(c) && sl->retries < MAX_RETRIES) {
		sl->retries++;
		wc->w->res.retries++;
		if (submit(wc, ss, sl) == 0)
			return;
		ok = false;
	} else if (!ok && c->err == -ECANCELED && wc->aborting) {
		wc->w->res.cancelled++; /* by the second interrupt: not a target failure */
	} else if (!ok) {
		report_failure(wc, ss, sl);
		/* the session is gone for good: its other commands fail the same way */
		if (c->err == -ETIMEDOUT || c->err == -ENOTCONN || c->err == -ECONNABORTED)
			ss->dead = true;
	}
	if (wc->verify) {
		for (uint32_t i = 0; i < sl->nunits; i++)
			ss->busy[sl->unit + i] = 0;
		if (sl->write)
			ss->gen[sl->unit] = ok ? sl->gen : IXB_GEN_UNKNOWN;
		else if (ok)
			verify_read(wc, ss, sl);
	}
	if (sl->verify_pass) {
		issue_verify(wc, ss, sl);
		return;
	}
	if (ok)
		account(wc, sl, now);
	if (!wc->stopping && wc->run->deadline_ns && now >= wc->run->deadline_ns)
		wc->stopping = true;
	if (can_issue(wc, ss))
		issue(wc, ss, sl);
}

/* ---------------------------------------------------------------- set-up */

static int setup_fail(struct wctx *wc, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int setup_fail(struct wctx *wc, int r, const char *fmt, ...)
{
	struct ixb_result *res = &wc->w->res;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->setup_error, sizeof(res->setup_error), fmt, ap);
	va_end(ap);
	return r;
}

static int open_session(struct wctx *wc, struct sess *ss)
{
	const struct ixb_cfg *cfg = wc->cfg;
	struct ix_session_opts o;
	int err, r;

	ix_session_opts_default(&o);
	o.initiator_name = cfg->initiator;
	o.target_name = cfg->target;
	o.portal = cfg->portal;
	if (cfg->transport)
		o.transport = cfg->transport;
	o.queue_depth = cfg->qd;
	o.replacement_timeout_ms = cfg->replacement_timeout_ms;
	if (cfg->login_timeout_ms)
		o.login_timeout_ms = cfg->login_timeout_ms;
	if (cfg->digests)
		o.header_digest = o.data_digest = IX_DIGEST_CRC32C;
	o.chap.user = cfg->chap_user;
	o.chap.secret = cfg->chap_secret;
	o.chap.mutual_user = cfg->mutual_user;
	o.chap.mutual_secret = cfg->mutual_secret;
	ss->s = ix_session_new(wc->ctx, &o, &err);
	if (!ss->s)
		return setup_fail(wc, err, "session options: %s%s%s%s", strerror(-err),
				  err == -EPROTONOSUPPORT ? " (transport \"" : "",
				  err == -EPROTONOSUPPORT ? o.transport : "",
				  err == -EPROTONOSUPPORT ? "\" is not available)" : "");
	ix_session_set_event_cb(ss->s, on_event, ss);
	r = ix_sync_login(ss->s);
	if (r < 0)
		return setup_fail(wc, r, "login to %s at %s: %s (%s): %s", cfg->target, cfg->portal,
				  strerror(-r), errname(r), ix_session_error(ss->s));
	return 0;
}

/* READ CAPACITY (16), answering the unit attentions a fresh login may meet first. */
static int read_capacity(struct wctx *wc, struct ix_session *s)
{
	uint8_t buf[32], cdb[16], n = ix_cdb_read_capacity16(cdb, sizeof(buf));
	struct ix_scsi_cmd cmd;
	int r;

	for (int i = 0; i <= MAX_RETRIES; i++) {
		ix_scsi_cmd_init(&cmd, wc->cfg->lun, cdb, n, IX_DIR_READ, buf, sizeof(buf), NULL,
				 NULL);
		r = ix_sync_scsi(s, &cmd);
		if (r < 0)
			return setup_fail(wc, r, "READ CAPACITY(16): %s: %s", strerror(-r),
					  ix_session_error(s));
		if (cmd.status == 0)
			break;
		if (!retryable(&cmd) || i == MAX_RETRIES) {
			uint8_t key = 0, asc = 0, ascq = 0;
			ix_parse_sense(cmd.sense, cmd.sense_len, &key, &asc, &ascq);
			return setup_fail(wc, -EIO, "READ CAPACITY(16) of LUN %u: %s, %s %02x/%02x",
					  wc->cfg->lun, ix_scsi_status_str(cmd.status),
					  ix_sense_key_str(key), asc, ascq);
		}
	}
	if (ix_parse_read_capacity16(buf, sizeof(buf), &wc->lun_blocks, &wc->lbs) < 0)
		return setup_fail(wc, -EPROTO, "READ CAPACITY(16): malformed answer");
	wc->w->res.lun_blocks = wc->lun_blocks;
	wc->w->res.lun_block_size = wc->lbs;
	return 0;
}

/* Units, slices and quotas: every worker computes the same from the same capacity. */
static int plan(struct wctx *wc)
{
	const struct ixb_cfg *cfg = wc->cfg;
	uint64_t cap = wc->lun_blocks * wc->lbs, range, nunits, total_ios;
	uint32_t nsess = cfg->sessions;

	if (wc->verify && wc->lbs < IXB_MIN_UNIT)
		return setup_fail(wc, -EINVAL, "--verify needs blocks of at least %u bytes (the "
				  "LUN has %u)", IXB_MIN_UNIT, wc->lbs);
	if (cfg->bs % wc->lbs)
		return setup_fail(wc, -EINVAL,
				  "--bs %u is not a multiple of the LUN's block size %u", cfg->bs,
				  wc->lbs);
	if (cfg->offset % wc->lbs || cfg->offset >= cap)
		return setup_fail(wc, -EINVAL,
				  "--offset %" PRIu64 " is not a multiple of the block size %u or "
				  "beyond the LUN (%" PRIu64 " bytes)",
				  cfg->offset, wc->lbs, cap);
	range = cfg->range ? cfg->range : cap - cfg->offset;
	if (range > cap - cfg->offset)
		return setup_fail(wc, -EINVAL,
				  "--offset + --range (%" PRIu64 " + %" PRIu64 ") exceed the LUN "
				  "(%" PRIu64 " bytes)",
				  cfg->offset, range, cap);
	nunits = range / cfg->bs;
	if (nunits < (uint64_t)nsess * (wc->verify ? cfg->qd + 1 : 1))
		return setup_fail(wc, -EINVAL,
				  "the range holds %" PRIu64 " blocks of %u bytes: too few for %u "
				  "sessions%s",
				  nunits, cfg->bs, nsess,
				  wc->verify ? " with --verify (each needs more than --qd)" : "");
	wc->base_lba = cfg->offset / wc->lbs;
	wc->unit_blocks = cfg->bs / wc->lbs;
	total_ios = cfg->size / cfg->bs;
	for (uint32_t i = 0; i < wc->nsess; i++) {
		struct sess *ss = &wc->sess[i];
		uint64_t g = (uint64_t)ss->idx;

		ss->unit0 = nunits * g / nsess;
		ss->nunits = nunits * (g + 1) / nsess - ss->unit0;
		ss->quota = total_ios * (g + 1) / nsess - total_ios * g / nsess;
		if (!cfg->size)
			ss->quota = UINT64_MAX;
	}
	return 0;
}

static int alloc_session(struct wctx *wc, struct sess *ss)
{
	const struct ixb_cfg *cfg = wc->cfg;
	size_t cap = wc->slot_cap;

	ss->slots = calloc(cfg->qd, sizeof(*ss->slots));
	/* the session's registered buffer area: over iSER the target reads and writes the
	   slots in place, with no registration per I/O (freed by ix_session_free) */
	ss->bufs = ix_session_buf_alloc(ss->s, cap * cfg->qd);
	if (wc->verify) {
		ss->gen = calloc(ss->nunits, sizeof(*ss->gen));
		ss->busy = calloc(ss->nunits, 1);
	}
	if (!ss->slots || !ss->bufs || (wc->verify && (!ss->gen || !ss->busy)))
		return setup_fail(wc, -ENOMEM, "out of memory for %u slots of %zu bytes", cfg->qd,
				  cap);
	ss->rng = cfg->seed ^ (0x632be59bd9b4e019ull * (uint64_t)(ss->idx + 1));
	/* payload of unverified writes: random bytes once, so nothing compresses them away */
	for (size_t off = 0; off + 8 <= cap * cfg->qd; off += 8) {
		uint64_t r = ixb_rand(&ss->rng);
		memcpy(ss->bufs + off, &r, 8);
	}
	for (uint32_t i = 0; i < cfg->qd; i++) {
		ss->slots[i].ss = ss;
		ss->slots[i].buf = ss->bufs + cap * i;
	}
	return 0;
}

static int setup(struct wctx *wc)
{
	const struct ixb_cfg *cfg = wc->cfg;
	int r;

	wc->verify = cfg->verify;
	wc->strict = cfg->verify && !ixb_rw_writes(cfg->rw);
	wc->slot_cap = cfg->bs;
	if (wc->verify && ixb_rw_writes(cfg->rw) && cfg->bs < VERIFY_CHUNK)
		wc->slot_cap = VERIFY_CHUNK / cfg->bs * cfg->bs;
	wc->ctx = ix_ctx_new();
	wc->sess = calloc(wc->nsess, sizeof(*wc->sess));
	if (!wc->ctx || !wc->sess)
		return setup_fail(wc, -ENOMEM, "out of memory");
	if (cfg->poll_us >= 0)
		ix_ctx_set_poll_us(wc->ctx, (unsigned)cfg->poll_us);
	for (uint32_t i = 0; i < wc->nsess; i++) {
		wc->sess[i].wc = wc;
		wc->sess[i].idx = (int)(wc->w->first_session + i);
		r = open_session(wc, &wc->sess[i]);
		if (r < 0)
			return r;
	}
	r = read_capacity(wc, wc->sess[0].s);
	if (r == 0)
		r = plan(wc);
	for (uint32_t i = 0; r == 0 && i < wc->nsess; i++)
		r = alloc_session(wc, &wc->sess[i]);
	return r;
}

static void teardown(struct wctx *wc)
{
	for (uint32_t i = 0; wc->sess && i < wc->nsess; i++) {
		struct sess *ss = &wc->sess[i];
		struct ix_session_info info;

		if (ss->s) {
			if (ix_session_get_info(ss->s, &info) == 0 && info.logged_in &&
			    !wc->aborting)
				ix_sync_logout(ss->s); /* best effort: the numbers are taken */
			ix_session_free(ss->s);
		}
		free(ss->slots);
		free(ss->gen);
		free(ss->busy);
	}
	free(wc->sess);
	ix_ctx_free(wc->ctx);
}

/* ---------------------------------------------------------------- the thread */

static uint32_t inflight(const struct wctx *wc)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < wc->nsess; i++)
		n += wc->sess[i].inflight;
	return n;
}

/* Service the context until nothing is in flight; the two run flags are watched. */
static void drain(struct wctx *wc)
{
	struct ixb_run *run = wc->run;

	while (inflight(wc) > 0) {
		if (atomic_load(&run->abort) && !wc->aborting) {
			wc->aborting = true;
			/* the commands complete with -ECANCELED inside ix_session_free() */
			for (uint32_t i = 0; i < wc->nsess; i++) {
				ix_session_free(wc->sess[i].s);
				wc->sess[i].s = NULL;
			}
			break;
		}
		if (atomic_load_explicit(&run->stop, memory_order_relaxed))
			wc->stopping = true;
		if (!wc->stopping && run->deadline_ns && ixb_now_ns() >= run->deadline_ns)
			wc->stopping = true;
		ix_ctx_service(wc->ctx, 50);
	}
}

static void measure(struct wctx *wc)
{
	for (uint32_t i = 0; i < wc->nsess; i++) {
		struct sess *ss = &wc->sess[i];
		for (uint32_t k = 0; k < wc->cfg->qd && can_issue(wc, ss); k++)
			issue(wc, ss, &ss->slots[k]);
	}
	drain(wc);
}

static void verify_pass(struct wctx *wc)
{
	wc->in_verify = true;
	for (uint32_t i = 0; i < wc->nsess; i++) {
		struct sess *ss = &wc->sess[i];
		ss->cursor = 0;
		if (ss->dead)
			wc->w->res.verify_skipped++;
		for (uint32_t k = 0; k < wc->cfg->qd; k++)
			if (!issue_verify(wc, ss, &ss->slots[k]))
				break;
	}
	drain(wc);
}

void *ixb_worker_main(void *arg)
{
	struct ixb_worker *w = arg;
	struct wctx wc = {.w = w, .run = w->run, .cfg = w->run->cfg, .nsess = w->nsessions};

	ixb_hist_init(&w->res.lat[0]);
	ixb_hist_init(&w->res.lat[1]);
	if (setup(&wc) < 0) {
		atomic_store(&w->live.ready, -1);
		teardown(&wc);
		atomic_store(&w->live.done, true);
		return NULL;
	}
	atomic_store(&w->live.ready, 1);
	while (!atomic_load(&w->run->go) && !atomic_load(&w->run->stop))
		ix_ctx_service(wc.ctx, 10); /* keepalives meanwhile */
	if (atomic_load(&w->run->go) && !atomic_load(&w->run->stop)) {
		w->res.end_ns = w->run->start_ns;
		measure(&wc);
		if (wc.verify && ixb_rw_writes(wc.cfg->rw) && !wc.aborting)
			verify_pass(&wc);
	}
	for (uint32_t i = 0; i < wc.nsess; i++)
		if (wc.sess[i].s) {
			struct ix_session_info info;
			ix_session_get_info(wc.sess[i].s, &info);
			w->res.session_recoveries += info.recoveries;
		}
	teardown(&wc);
	atomic_store(&w->live.done, true);
	return NULL;
}
