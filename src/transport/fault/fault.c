/* Fault-injecting datamover wrapper (fault.h). Faults are decided when a PDU is handed to the
 * wrapper (drop, corrupt, duplicate, delay) and when it is handed on to the inner transport
 * (truncate, counted in the bytes it will put on the wire). */
#include "transport/fault/fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event/loop.h"
#include "dm/conn.h"
#include "util/bytes.h"
#include "util/log.h"

struct fault_dm {
	struct dm_ops ops; /* first: connections point here */
	const struct dm_ops *inner;
	struct fault_cfg cfg;
	size_t inner_size; /* offset of our per-connection state in the private area */
	atomic_uint_fast64_t next_conn;
	atomic_uint_fast64_t pdus, dropped, delayed, duplicated, corrupted, truncated;
};

struct fault_conn {
	bool init;
	bool active;               /* faults armed */
	bool hd, dd;               /* digests the inner transport adds (from enable) */
	uint64_t rng;
	uint64_t wire_bytes;       /* handed to the inner transport so far */
	struct list_head delayq;   /* PDUs held back, in order */
	struct ev_timer timer;
	struct iscsi_conn *c;
};

static struct fault_dm *fdm(struct iscsi_conn *c)
{
	return (struct fault_dm *)((char *)c->dm - offsetof(struct fault_dm, ops));
}

static struct fault_conn *fconn(struct iscsi_conn *c);

static uint64_t rnd(struct fault_conn *fc)
{
	/* xorshift64* */
	fc->rng ^= fc->rng >> 12;
	fc->rng ^= fc->rng << 25;
	fc->rng ^= fc->rng >> 27;
	return fc->rng * 0x2545f4914f6cdd1dull;
}

static bool roll(struct fault_conn *fc, uint32_t ppm)
{
	return ppm && rnd(fc) % FAULT_PPM < ppm;
}

/* Faults only hit PDUs after login (unless during_login) whose opcode the filter selects. */
static bool eligible(const struct fault_dm *f, const struct fault_conn *fc, uint8_t op)
{
	return fc->active && (!f->cfg.opcodes || (f->cfg.opcodes & (1ull << op)));
}

static uint32_t wire_len(const struct fault_conn *fc, const struct dm_txpdu *p)
{
	return ISCSI_BHS_LEN + p->ahs_len + (fc->hd ? ISCSI_DIGEST_LEN : 0) +
	       iscsi_pad4(p->data_len) + (fc->dd && p->data_len ? ISCSI_DIGEST_LEN : 0);
}

/* Which datamover operation a PDU goes through: by its opcode, so held-back PDUs need no
 * extra bookkeeping (Data-In is Put_Data, R2T is Get_Data, everything else Send_Control). */
static int inner_send(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct fault_dm *f = fdm(c);
	struct fault_conn *fc = fconn(c);
	uint8_t op = p->bhs[0] & 0x3f;
	uint32_t len = wire_len(fc, p);

	if (eligible(f, fc, op) && f->inner->tx_abort_at && len > 1 &&
	    roll(fc, f->cfg.truncate_ppm)) {
		uint64_t at = fc->wire_bytes + 1 + rnd(fc) % (len - 1);

		atomic_fetch_add(&f->truncated, 1);
		log_info("fault", "%s: truncating %s after %llu of its %u bytes", c->peer,
			 iscsi_opcode_name(op), (unsigned long long)(at - fc->wire_bytes), len);
		f->inner->tx_abort_at(c, at);
	}
	fc->wire_bytes += len;
	if (op == ISCSI_OP_DATA_IN)
		return f->inner->put_data(c, p);
	if (op == ISCSI_OP_R2T)
		return f->inner->get_data(c, p);
	return f->inner->send_control(c, p);
}

static void release_delayed(struct ev_timer *t)
{
	struct fault_conn *fc = t->arg;
	struct iscsi_conn *c = fc->c;

	iscsi_conn_get(c);
	while (!list_empty(&fc->delayq) && !c->terminated) {
		struct dm_txpdu *p = list_first_entry(&fc->delayq, struct dm_txpdu, link);

		list_del(&p->link);
		inner_send(c, p);
	}
	iscsi_conn_put(c);
}

static struct fault_conn *fconn(struct iscsi_conn *c)
{
	struct fault_dm *f = fdm(c);
	struct fault_conn *fc = (struct fault_conn *)(c->priv + f->inner_size);

	if (!fc->init) {
		uint64_t n = atomic_fetch_add(&f->next_conn, 1);

		fc->init = true;
		fc->c = c;
		fc->rng = (f->cfg.seed ^ (n * 0x9e3779b97f4a7c15ull)) | 1;
		fc->active = f->cfg.during_login;
		list_init(&fc->delayq);
		ev_timer_init(&fc->timer, release_delayed, fc);
		if (f->cfg.reset_after_bytes && f->inner->tx_abort_at)
			f->inner->tx_abort_at(c, f->cfg.reset_after_bytes);
	}
	return fc;
}

/* A second descriptor for the same bytes, sent just before the original (so the data the
 * original points to is still valid while the copy goes out). */
static struct dm_txpdu *twin(struct iscsi_conn *c, const struct dm_txpdu *p)
{
	struct dm_txpdu *d = iscsi_txpdu_get(c);

	if (!d)
		return NULL;
	memcpy(d->bhs, p->bhs, sizeof(d->bhs));
	d->ahs = p->ahs;
	d->ahs_len = p->ahs_len;
	memcpy(d->data, p->data, sizeof(d->data));
	d->data_cnt = p->data_cnt;
	d->data_len = p->data_len;
	return d;
}

static int fault_send(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct fault_dm *f = fdm(c);
	struct fault_conn *fc = fconn(c);
	const struct fault_cfg *cfg = &f->cfg;
	uint8_t op = p->bhs[0] & 0x3f;
	struct dm_txpdu *dup = NULL;

	if (c->terminated) {
		p->sent(p, -ECONNABORTED);
		return -ECONNABORTED;
	}
	if (eligible(f, fc, op)) {
		atomic_fetch_add(&f->pdus, 1);
		if (roll(fc, cfg->drop_ppm)) {
			atomic_fetch_add(&f->dropped, 1);
			log_info("fault", "%s: dropping %s ITT 0x%08x", c->peer,
				 iscsi_opcode_name(op), get_be32(p->bhs + 16));
			p->sent(p, 0);
			return 0;
		}
		if (roll(fc, cfg->corrupt_ppm)) {
			/* bytes 1-3 and 8-47 */
			unsigned at = (unsigned)(rnd(fc) % 43), bit = (unsigned)(rnd(fc) % 8);

			at = at < 3 ? at + 1 : at + 5;
			p->bhs[at] ^= (uint8_t)(1u << bit);
			atomic_fetch_add(&f->corrupted, 1);
			log_info("fault", "%s: flipped bit %u of byte %u of a %s", c->peer, bit, at,
				 iscsi_opcode_name(op));
		}
		if (roll(fc, cfg->duplicate_ppm) && (dup = twin(c, p)) != NULL) {
			atomic_fetch_add(&f->duplicated, 1);
			log_info("fault", "%s: duplicating %s", c->peer, iscsi_opcode_name(op));
		}
		if (list_empty(&fc->delayq) && roll(fc, cfg->delay_ppm)) {
			atomic_fetch_add(&f->delayed, 1);
			log_info("fault", "%s: delaying %s by %u ms", c->peer,
				 iscsi_opcode_name(op), cfg->delay_ms);
			ev_timer_start(c->loop, &fc->timer, cfg->delay_ms);
		}
	}
	/* Behind a delayed PDU everything waits, so the order on the wire never changes. */
	if (!list_empty(&fc->delayq) || ev_timer_active(&fc->timer)) {
		if (dup)
			list_add_tail(&dup->link, &fc->delayq);
		list_add_tail(&p->link, &fc->delayq);
		return 0;
	}
	if (dup)
		inner_send(c, dup);
	return inner_send(c, p);
}

static void fault_enable(struct iscsi_conn *c, const struct iscsi_conn_params *cp)
{
	struct fault_conn *fc = fconn(c);

	fdm(c)->inner->enable(c, cp);
	fc->hd = cp->header_digest;
	fc->dd = cp->data_digest;
	fc->active = true;
}

static void fault_terminate(struct iscsi_conn *c)
{
	struct fault_conn *fc = fconn(c);

	ev_timer_stop(c->loop, &fc->timer);
	while (!list_empty(&fc->delayq)) {
		struct dm_txpdu *p = list_first_entry(&fc->delayq, struct dm_txpdu, link);

		list_del(&p->link);
		p->sent(p, -ECONNABORTED);
	}
	fdm(c)->inner->terminate(c);
}

static void fault_release(struct iscsi_conn *c)
{
	if (fdm(c)->inner->release)
		fdm(c)->inner->release(c);
}

static bool fault_tx_busy(struct iscsi_conn *c)
{
	return !list_empty(&fconn(c)->delayq) || fdm(c)->inner->tx_busy(c);
}

static void fault_tx_abort_at(struct iscsi_conn *c, uint64_t total)
{
	fdm(c)->inner->tx_abort_at(c, total);
}

struct fault_dm *fault_dm_new(const struct dm_ops *inner, const struct fault_cfg *cfg)
{
	struct fault_dm *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->inner = inner;
	f->cfg = *cfg;
	if (!f->cfg.delay_ms)
		f->cfg.delay_ms = 100;
	f->inner_size = (inner->conn_priv_size + 15) & ~(size_t)15;
	f->ops = *inner;
	f->ops.conn_priv_size = f->inner_size + sizeof(struct fault_conn);
	f->ops.send_control = fault_send;
	f->ops.put_data = fault_send;
	f->ops.get_data = fault_send;
	f->ops.enable = fault_enable;
	f->ops.terminate = fault_terminate;
	f->ops.release = fault_release;
	f->ops.tx_busy = fault_tx_busy;
	f->ops.tx_abort_at = inner->tx_abort_at ? fault_tx_abort_at : NULL;
	/* not a transport of its own: connections are set up through the inner one, with these
	   ops as dm_conn_setup.as */
	f->ops.listen = NULL;
	f->ops.listener_pause = NULL;
	f->ops.listener_free = NULL;
	f->ops.accept = NULL;
	f->ops.reject = NULL;
	f->ops.connect = NULL;
	return f;
}

void fault_dm_stats(const struct fault_dm *f, struct fault_stats *out)
{
	out->pdus = atomic_load(&f->pdus);
	out->dropped = atomic_load(&f->dropped);
	out->delayed = atomic_load(&f->delayed);
	out->duplicated = atomic_load(&f->duplicated);
	out->corrupted = atomic_load(&f->corrupted);
	out->truncated = atomic_load(&f->truncated);
}

void fault_dm_free(struct fault_dm *f)
{
	free(f);
}

const struct dm_ops *fault_dm_ops(const struct fault_dm *f)
{
	return &f->ops;
}

/* ---- the registry's view (dm.h): options described by a table, the log's words ---------- */

_Static_assert(sizeof(struct fault_cfg) <= DM_WRAP_OPTS_SIZE, "DM_WRAP_OPTS_SIZE");

#define FAULT(f) offsetof(struct fault_cfg, f)
#define MAX_DELAY_MS 3600000u
static const struct dm_opt fault_opts[] = {
    {"seed", DM_OPT_U64, FAULT(seed), 0, UINT64_MAX >> 1, 0, NULL},
    {"drop_ppm", DM_OPT_U32, FAULT(drop_ppm), 0, FAULT_PPM, 0, NULL},
    {"delay_ppm", DM_OPT_U32, FAULT(delay_ppm), 0, FAULT_PPM, 0, NULL},
    {"delay_ms", DM_OPT_U32, FAULT(delay_ms), 1, MAX_DELAY_MS, 100, NULL},
    {"duplicate_ppm", DM_OPT_U32, FAULT(duplicate_ppm), 0, FAULT_PPM, 0, NULL},
    {"corrupt_ppm", DM_OPT_U32, FAULT(corrupt_ppm), 0, FAULT_PPM, 0, NULL},
    {"truncate_ppm", DM_OPT_U32, FAULT(truncate_ppm), 0, FAULT_PPM, 0, NULL},
    {"reset_after_bytes", DM_OPT_U64, FAULT(reset_after_bytes), 0, UINT64_MAX >> 1, 0, NULL},
    {"opcodes", DM_OPT_BITS, FAULT(opcodes), 0, 63, 0, "an opcode number"}, /* 0: all */
    {"during_login", DM_OPT_BOOL, FAULT(during_login), 0, 1, 0, NULL},
    {NULL, DM_OPT_BOOL, 0, 0, 0, 0, NULL},
};
#undef FAULT

static void *wrap_new(const struct dm_ops *inner, const void *opts)
{
	return fault_dm_new(inner, opts);
}

static void wrap_free(void *w)
{
	fault_dm_free(w);
}

static const struct dm_ops *wrap_ops(const void *w)
{
	return fault_dm_ops(w);
}

static void describe(const void *opts, char *buf, size_t cap)
{
	const struct fault_cfg *f = opts;

	snprintf(buf, cap,
		 "seed %llu; ppm: drop %u delay %u (%u ms) duplicate %u corrupt %u truncate %u; "
		 "reset after %llu bytes",
		 (unsigned long long)f->seed, f->drop_ppm, f->delay_ppm, f->delay_ms,
		 f->duplicate_ppm, f->corrupt_ppm, f->truncate_ppm,
		 (unsigned long long)f->reset_after_bytes);
}

static void report(void *const *w, size_t n, char *buf, size_t cap)
{
	struct fault_stats st = {0}, one;

	for (size_t i = 0; i < n; i++) {
		fault_dm_stats(w[i], &one);
		st.pdus += one.pdus;
		st.dropped += one.dropped;
		st.delayed += one.delayed;
		st.duplicated += one.duplicated;
		st.corrupted += one.corrupted;
		st.truncated += one.truncated;
	}
	snprintf(buf, cap,
		 "%llu PDUs eligible, %llu dropped, %llu delayed, %llu duplicated, %llu corrupted, "
		 "%llu truncated",
		 (unsigned long long)st.pdus, (unsigned long long)st.dropped,
		 (unsigned long long)st.delayed, (unsigned long long)st.duplicated,
		 (unsigned long long)st.corrupted, (unsigned long long)st.truncated);
}

const struct dm_wrapper fault_dm_wrapper = {
    .name = "fault",
    .opts = fault_opts,
    .wrap_new = wrap_new,
    .wrap_free = wrap_free,
    .wrap_ops = wrap_ops,
    .describe = describe,
    .report = report,
};
