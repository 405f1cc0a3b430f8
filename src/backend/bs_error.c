/* Error backend, for tests only: a RAM device whose I/O fails (EIO, ENOSPC, any -errno) or
 * completes late, selected by rules (struct bs_err_rule): per operation class, per LBA range,
 * every Nth matching I/O. The configuration loader accepts it only in a file that ix-target is
 * told to treat as a test configuration (docs/configuration.md, "testing").
 *
 * A delayed I/O completes from a timer on the submitting thread's event loop, using one of a
 * fixed set of slots (no allocation per I/O); without a thread, or when every slot is busy, the
 * delay is a plain sleep of the caller. Counters of the "every" rules are atomics: LUs are
 * shared by all worker threads.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/bs.h"
#include "event/loop.h"
#include "util/log.h"

#define ERR_MAX_RULES 16
#define ERR_SLOTS     64

struct err_slot {
	struct ev_timer timer;
	struct bs_dev *dev;
	struct bs_io *io;
	int error;
};

struct err_priv {
	struct bs_dev *ram;
	struct bs_err_rule rules[ERR_MAX_RULES];
	atomic_uint_fast64_t hits[ERR_MAX_RULES];
	uint32_t nrules;
	atomic_uint_fast64_t busy; /* bit per slot */
	struct err_slot slots[ERR_SLOTS];
};

static int err_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err, size_t errlen)
{
	struct err_priv *p = dev->priv;
	struct bs_open_cfg rc = *cfg;
	int r;

	if (cfg->n_err_rules > ERR_MAX_RULES) {
		snprintf(err, errlen, "at most %d error rules", ERR_MAX_RULES);
		return -EINVAL;
	}
	rc.err_rules = NULL;
	rc.n_err_rules = 0;
	r = bs_dev_open(&bs_ram_ops, &rc, &p->ram, err, errlen);
	if (r < 0)
		return r;
	memcpy(p->rules, cfg->err_rules, cfg->n_err_rules * sizeof(p->rules[0]));
	p->nrules = cfg->n_err_rules;
	for (uint32_t i = 0; i < ERR_MAX_RULES; i++)
		atomic_init(&p->hits[i], 0);
	atomic_init(&p->busy, 0);
	dev->size = p->ram->size;
	dev->caps = p->ram->caps;
	return 0;
}

static void err_close(struct bs_dev *dev)
{
	struct err_priv *p = dev->priv;

	bs_dev_close(p->ram);
}

static uint8_t op_class(uint8_t op)
{
	switch (op) {
	case BS_OP_READ:
		return BS_ERR_OP_READ;
	case BS_OP_FLUSH:
		return BS_ERR_OP_FLUSH;
	default:
		return BS_ERR_OP_WRITE;
	}
}

/* The rule deciding io's fate, or NULL. */
static const struct bs_err_rule *match(struct bs_dev *dev, struct err_priv *p,
					 const struct bs_io *io)
{
	uint8_t cls = op_class(io->op);

	for (uint32_t i = 0; i < p->nrules; i++) {
		const struct bs_err_rule *r = &p->rules[i];
		uint64_t start = r->lba * dev->block_size;
		uint64_t end = r->blocks ? start + r->blocks * dev->block_size : UINT64_MAX;
		uint64_t n;

		if (!(r->ops & cls))
			continue;
		if (io->op != BS_OP_FLUSH && (io->offset + io->len <= start || io->offset >= end))
			continue;
		n = atomic_fetch_add(&p->hits[i], 1) + 1;
		if (r->every > 1 && n % r->every)
			continue;
		return r;
	}
	return NULL;
}

static void finish(struct err_priv *p, struct bs_io *io, int error)
{
	if (error) {
		io->result = error;
		io->cb(io);
		return;
	}
	/* the RAM device completes synchronously; io->cb runs from inside */
	p->ram->ops->submit(p->ram, NULL, io);
}

static void slot_fire(struct ev_timer *t)
{
	struct err_slot *s = t->arg;
	struct err_priv *p = s->dev->priv;
	struct bs_io *io = s->io;
	int error = s->error;
	size_t idx = (size_t)(s - p->slots);

	atomic_fetch_and(&p->busy, ~(1ull << idx));
	finish(p, io, error);
}

static bool delay_async(struct bs_dev *dev, struct err_priv *p, struct bs_thread *t,
			struct bs_io *io, const struct bs_err_rule *r)
{
	uint64_t busy = atomic_load(&p->busy);

	if (!t)
		return false;
	for (;;) {
		int idx;

		if (busy == UINT64_MAX)
			return false;
		idx = __builtin_ctzll(~busy);
		if (atomic_compare_exchange_weak(&p->busy, &busy, busy | (1ull << idx))) {
			struct err_slot *s = &p->slots[idx];

			s->dev = dev;
			s->io = io;
			s->error = r->error;
			ev_timer_init(&s->timer, slot_fire, s);
			ev_timer_start(bs_thread_loop(t), &s->timer, r->delay_ms);
			return true;
		}
	}
}

static void err_submit(struct bs_dev *dev, struct bs_thread *t, struct bs_io *io)
{
	struct err_priv *p = dev->priv;
	const struct bs_err_rule *r = match(dev, p, io);

	if (!r) {
		finish(p, io, 0);
		return;
	}
	log_dbg("backend", "error backend: op %u at %llu+%llu: %s after %u ms", io->op,
		(unsigned long long)io->offset, (unsigned long long)io->len,
		r->error ? strerror(-r->error) : "success", r->delay_ms);
	if (r->delay_ms) {
		struct timespec ts = {.tv_sec = r->delay_ms / 1000,
				      .tv_nsec = (long)(r->delay_ms % 1000) * 1000000L};

		if (delay_async(dev, p, t, io, r))
			return;
		nanosleep(&ts, NULL);
	}
	finish(p, io, r->error);
}

static int err_lba_status(struct bs_dev *dev, uint64_t offset, uint64_t *run, bool *mapped)
{
	struct err_priv *p = dev->priv;

	return p->ram->ops->lba_status(p->ram, offset, run, mapped);
}

const struct bs_ops bs_error_ops = {
    .name = "error",
    .type = BS_TYPE_ERROR,
    .priv_size = sizeof(struct err_priv),
    .caps = BS_CAP_DISCARD | BS_CAP_DISCARD_ZEROES | BS_CAP_LBA_STATUS,
    .open = err_open,
    .close = err_close,
    .submit = err_submit,
    .lba_status = err_lba_status,
};
