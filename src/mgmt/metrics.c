/* Statistics as JSON and as Prometheus text (metrics.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/metrics.h"

/* ---------------------------------------------------------------- buffer */

static int mbuf_grow(struct mbuf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = -ENOMEM;
		return -ENOMEM;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void mbuf_printf(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	for (int pass = 0; pass < 2; pass++) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = -EINVAL;
			return;
		}
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		if (mbuf_grow(b, b->len + (size_t)n + 1) < 0)
			return;
	}
}

void mbuf_append(struct mbuf *b, const char *data, size_t len)
{
	if (b->err || !len)
		return;
	if (b->len + len + 1 > b->cap && mbuf_grow(b, b->len + len + 1) < 0)
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = 0;
}

void mbuf_free(struct mbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void metrics_escape_label(struct mbuf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			mbuf_printf(b, "\\\\");
		else if (*s == '"')
			mbuf_printf(b, "\\\"");
		else if (*s == '\n')
			mbuf_printf(b, "\\n");
		else
			mbuf_printf(b, "%c", *s);
	}
}

void metrics_bucket_le(int i, char *out, size_t cap)
{
	if (i >= IX_LAT_BUCKETS - 1)
		snprintf(out, cap, "+Inf");
	else
		snprintf(out, cap, "%.7g", (double)(1ull << i) * 1e-6);
}

/* ---------------------------------------------------------------- names */

static const char *const err_names[IX_ERR_KINDS] = {
    "no_sense",	      "recovered_error", "not_ready",	     "medium_error",
    "hardware_error",  "illegal_request", "unit_attention",  "data_protect",
    "blank_check",     "vendor_specific", "copy_aborted",    "aborted_command",
    "reserved_0c",     "volume_overflow", "miscompare",	     "completed",
    "other_status",
};

/* ---------------------------------------------------------------- Prometheus text */

static void family(struct mbuf *b, const char *name, const char *type, const char *help)
{
	mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void lun_labels(struct mbuf *b, const struct ix_lun_stats *l)
{
	mbuf_printf(b, "target=\"");
	metrics_escape_label(b, l->target);
	mbuf_printf(b, "\",lun=\"%u\",initiator=\"", l->lun);
	metrics_escape_label(b, l->initiator);
	mbuf_printf(b, "\"");
}

static void tgt_labels(struct mbuf *b, const struct ix_tgt_stats *t)
{
	mbuf_printf(b, "target=\"");
	metrics_escape_label(b, t->target);
	mbuf_printf(b, "\"");
}

static void lun_commands(struct mbuf *b, const struct ix_stats *st)
{
	static const char *const ops[] = {"read", "write", "other"};

	family(b, "ix_lun_commands_total", "counter",
	       "SCSI commands answered, by kind (READ, WRITE, everything else).");
	for (size_t i = 0; i < st->nluns; i++) {
		const struct ix_lun_stats *l = &st->luns[i];
		uint64_t v[] = {l->cmds_read, l->cmds_write, l->cmds_other};
		for (int k = 0; k < 3; k++) {
			mbuf_printf(b, "ix_lun_commands_total{");
			lun_labels(b, l);
			mbuf_printf(b, ",op=\"%s\"} %llu\n", ops[k], (unsigned long long)v[k]);
		}
	}
}

static void lun_bytes(struct mbuf *b, const struct ix_stats *st, bool read)
{
	const char *name = read ? "ix_lun_read_bytes_total" : "ix_lun_written_bytes_total";

	family(b, name, "counter",
	       read ? "Bytes sent to initiators by READ commands."
		    : "Bytes written by WRITE commands that completed with GOOD status.");
	for (size_t i = 0; i < st->nluns; i++) {
		const struct ix_lun_stats *l = &st->luns[i];
		mbuf_printf(b, "%s{", name);
		lun_labels(b, l);
		mbuf_printf(b, "} %llu\n",
			    (unsigned long long)(read ? l->bytes_read : l->bytes_written));
	}
}

static void lun_errors(struct mbuf *b, const struct ix_stats *st)
{
	family(b, "ix_lun_errors_total", "counter",
	       "Commands answered with CHECK CONDITION, by sense key, or another non-GOOD status "
	       "(other_status); kinds not seen yet are omitted.");
	for (size_t i = 0; i < st->nluns; i++) {
		const struct ix_lun_stats *l = &st->luns[i];
		for (int k = 0; k < IX_ERR_KINDS; k++) {
			if (!l->errors[k])
				continue;
			mbuf_printf(b, "ix_lun_errors_total{");
			lun_labels(b, l);
			mbuf_printf(b, ",kind=\"%s\"} %llu\n", err_names[k],
				    (unsigned long long)l->errors[k]);
		}
	}
}

static void lun_latency(struct mbuf *b, const struct ix_stats *st)
{
	const char *n = "ix_lun_command_duration_seconds";
	char le[32];

	family(b, n, "histogram", "Time from a SCSI Command's arrival to its completion.");
	for (size_t i = 0; i < st->nluns; i++) {
		const struct ix_lun_stats *l = &st->luns[i];
		uint64_t cum = 0;
		for (int k = 0; k < IX_LAT_BUCKETS; k++) {
			cum += l->lat[k];
			metrics_bucket_le(k, le, sizeof(le));
			mbuf_printf(b, "%s_bucket{", n);
			lun_labels(b, l);
			mbuf_printf(b, ",le=\"%s\"} %llu\n", le, (unsigned long long)cum);
		}
		mbuf_printf(b, "%s_sum{", n);
		lun_labels(b, l);
		mbuf_printf(b, "} %.9f\n%s_count{", (double)l->lat_sum_ns / 1e9, n);
		lun_labels(b, l);
		mbuf_printf(b, "} %llu\n", (unsigned long long)cum);
	}
}

/* QoS (target/tgt_qos.c): commands that waited for a limit, and how long. */
static void lun_qos(struct mbuf *b, const struct ix_stats *st)
{
	const char *n = "ix_lun_qos_delayed_commands_total", *w = "ix_lun_qos_wait_seconds_total";

	family(b, n, "counter", "Commands that waited for a QoS limit before they ran.");
	for (size_t i = 0; i < st->nluns; i++) {
		mbuf_printf(b, "%s{", n);
		lun_labels(b, &st->luns[i]);
		mbuf_printf(b, "} %llu\n", (unsigned long long)st->luns[i].qos_delayed);
	}
	family(b, w, "counter", "Time commands waited for QoS limits, summed.");
	for (size_t i = 0; i < st->nluns; i++) {
		mbuf_printf(b, "%s{", w);
		lun_labels(b, &st->luns[i]);
		mbuf_printf(b, "} %.9f\n", (double)st->luns[i].qos_wait_ns / 1e9);
	}
}

/* A family of plain counters, one per row of a table of stats structs. */
struct counter {
	const char *name, *help;
	size_t off; /* of the uint64_t in the row */
};

static void counters(struct mbuf *b, const struct counter *cs, size_t ncs, const void *rows,
		     size_t stride, size_t nrows, void (*labels)(struct mbuf *, const void *))
{
	for (size_t c = 0; c < ncs; c++) {
		family(b, cs[c].name, "counter", cs[c].help);
		for (size_t i = 0; i < nrows; i++) {
			const char *row = (const char *)rows + i * stride;
			const uint64_t *v = (const uint64_t *)(row + cs[c].off);

			mbuf_printf(b, "%s{", cs[c].name);
			labels(b, row);
			mbuf_printf(b, "} %llu\n", (unsigned long long)*v);
		}
	}
}

static void tgt_row_labels(struct mbuf *b, const void *row)
{
	tgt_labels(b, row);
}

static void tgt_counters(struct mbuf *b, const struct ix_stats *st)
{
	static const struct counter cs[] = {
	    {"ix_target_logins_accepted_total", "Logins that reached full feature phase.",
	     offsetof(struct ix_tgt_stats, logins_accepted)},
	    {"ix_target_login_timeouts_total",
	     "Connections closed because their login did not complete in time.",
	     offsetof(struct ix_tgt_stats, login_timeouts)},
	    {"ix_target_digest_errors_total", "Header and data digest errors.",
	     offsetof(struct ix_tgt_stats, digest_errors)},
	    {"ix_target_connection_timeouts_total",
	     "Connections dropped for an unanswered NOP-In or a Logout not done in time.",
	     offsetof(struct ix_tgt_stats, conn_timeouts)},
	    {"ix_target_tasks_aborted_total",
	     "Commands ended by task management or a closed connection.",
	     offsetof(struct ix_tgt_stats, tasks_aborted)},
	    {"ix_target_pdus_rejected_total", "Reject PDUs sent.",
	     offsetof(struct ix_tgt_stats, pdus_rejected)},
	};

	counters(b, cs, sizeof(cs) / sizeof(cs[0]), st->tgts, sizeof(*st->tgts), st->ntgts,
		 tgt_row_labels);
}

static void tgt_refused(struct mbuf *b, const struct ix_stats *st)
{
	const char *n = "ix_target_logins_refused_total";

	family(b, n, "counter", "Logins refused, by reason (login status); reasons not seen yet "
				"are omitted.");
	for (size_t i = 0; i < st->ntgts; i++) {
		for (int k = 0; k < IX_LOGIN_REASONS; k++) {
			if (!st->tgts[i].logins_refused[k])
				continue;
			mbuf_printf(b, "%s{", n);
			tgt_labels(b, &st->tgts[i]);
			mbuf_printf(b, ",reason=\"%s\"} %llu\n", ix_login_reason_name(k),
				    (unsigned long long)st->tgts[i].logins_refused[k]);
		}
	}
}

static void tgt_sessions(struct mbuf *b, const struct ix_stats *st)
{
	const char *n = "ix_target_sessions";

	family(b, n, "gauge", "Sessions open now, by transport.");
	for (size_t i = 0; i < st->ntgts; i++)
		for (size_t x = 0; dm_transport(x); x++) {
			mbuf_printf(b, "%s{", n);
			tgt_labels(b, &st->tgts[i]);
			mbuf_printf(b, ",transport=\"%s\"} %llu\n", dm_transport(x)->name,
				    (unsigned long long)st->tgts[i].sessions[x]);
		}
}

static void worker_labels(struct mbuf *b, const void *row)
{
	mbuf_printf(b, "worker=\"%d\"", ((const struct ix_worker_stats *)row)->id);
}

/* The worker threads' event loops: how they waited for work (global.poll_us). */
static void worker_counters(struct mbuf *b, const struct ix_stats *st)
{
	static const struct counter cs[] = {
	    {"ix_worker_sleeps_total", "Waits for work that went to sleep.",
	     offsetof(struct ix_worker_stats, sleeps)},
	    {"ix_worker_poll_hits_total",
	     "Waits that the poll window (global.poll_us) answered without sleeping.",
	     offsetof(struct ix_worker_stats, poll_hits)},
	    {"ix_worker_poller_hits_total",
	     "Of those, waits that a poller answered (a busy connection's receive, a completion "
	     "queue).",
	     offsetof(struct ix_worker_stats, poller_hits)},
	    {"ix_worker_poll_backoffs_total",
	     "Poll windows shut because other threads wanted the worker's CPU.",
	     offsetof(struct ix_worker_stats, poll_backoffs)},
	    {"ix_worker_trims_total",
	     "Quiet connections that gave pooled memory back (global.idle_release_ms).",
	     offsetof(struct ix_worker_stats, trims)},
	};
	static const struct counter gs[] = {
	    {"ix_worker_task_slots", "Task slots the worker's connections hold.",
	     offsetof(struct ix_worker_stats, task_slots)},
	    {"ix_worker_pdu_descriptors",
	     "Transmit PDU descriptors the worker's connections hold in their pools.",
	     offsetof(struct ix_worker_stats, pdu_descriptors)},
	    {"ix_worker_buffer_bytes",
	     "Data buffers the worker's connections hold: in use, cached, on free task slots.",
	     offsetof(struct ix_worker_stats, buffer_bytes)},
	};
	const char *n = "ix_worker_poll_seconds_total";

	counters(b, cs, sizeof(cs) / sizeof(cs[0]), st->workers, sizeof(*st->workers),
		 st->nworkers, worker_labels);
	family(b, n, "counter", "Time the worker spent polling instead of sleeping.");
	for (size_t i = 0; i < st->nworkers; i++)
		mbuf_printf(b, "%s{worker=\"%d\"} %.9f\n", n, st->workers[i].id,
			    (double)st->workers[i].poll_ns / 1e9);
	for (size_t c = 0; c < sizeof(gs) / sizeof(gs[0]); c++) {
		family(b, gs[c].name, "gauge", gs[c].help);
		for (size_t i = 0; i < st->nworkers; i++)
			mbuf_printf(b, "%s{worker=\"%d\"} %llu\n", gs[c].name, st->workers[i].id,
				    (unsigned long long)*(const uint64_t *)((const char *)&st->workers[i] +
									      gs[c].off));
	}
}

/* How full each LUN's backing store is (thin provisioning: docs/configuration.md). */
static void lun_space(struct mbuf *b, const struct ix_stats *st)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
	    {"ix_lun_space_total_bytes",
	     "Size of the LUN's backing store (its file system, its pool's quota or cluster)."},
	    {"ix_lun_space_available_bytes", "Bytes the LUN's backing store can still allocate."},
	    {"ix_lun_space_used_bytes", "Bytes the LUN holds in its backing store."},
	    {"ix_lun_thin_threshold_reached",
	     "1 while the store's use is at or above the LUN's thin_threshold."},
	};

	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		family(b, fam[f].name, "gauge", fam[f].help);
		for (size_t i = 0; i < st->nspaces; i++) {
			const struct ix_space_stats *s = &st->spaces[i];
			uint64_t v = f == 0 ? s->total : f == 1 ? s->avail : f == 2 ? s->used
										: s->reached;

			if (f == 2 && s->used == UINT64_MAX)
				continue;
			mbuf_printf(b, "%s{target=\"", fam[f].name);
			metrics_escape_label(b, s->target);
			mbuf_printf(b, "\",lun=\"%u\"} %llu\n", s->lun, (unsigned long long)v);
		}
	}
}

int metrics_format(const struct ix_stats *st, struct mbuf *out)
{
	lun_commands(out, st);
	lun_bytes(out, st, true);
	lun_bytes(out, st, false);
	lun_errors(out, st);
	lun_latency(out, st);
	lun_qos(out, st);
	lun_space(out, st);
	tgt_counters(out, st);
	tgt_refused(out, st);
	tgt_sessions(out, st);
	worker_counters(out, st);
	return out->err;
}

/* ---------------------------------------------------------------- JSON */

static json_t *nonzero_map(const uint64_t *v, int n, const char *(*name)(int))
{
	json_t *o = json_object();

	for (int i = 0; o && i < n; i++)
		if (v[i])
			json_object_set_new(o, name(i), json_integer((json_int_t)v[i]));
	return o;
}

static const char *err_name(int i)
{
	return err_names[i];
}

static json_t *latency_json(const struct ix_lun_stats *l)
{
	json_t *b = json_object();
	uint64_t count = 0;
	char key[24];

	for (int i = 0; b && i < IX_LAT_BUCKETS; i++) {
		count += l->lat[i];
		if (!l->lat[i])
			continue;
		if (i == IX_LAT_BUCKETS - 1)
			snprintf(key, sizeof(key), "inf");
		else
			snprintf(key, sizeof(key), "%llu", 1ull << i);
		json_object_set_new(b, key, json_integer((json_int_t)l->lat[i]));
	}
	return json_pack("{s:I, s:I, s:o*}", "count", (json_int_t)count, "sum_us",
			 (json_int_t)(l->lat_sum_ns / 1000), "below_us", b);
}

static json_t *lun_json(const struct ix_lun_stats *l)
{
	return json_pack("{s:s, s:I, s:s, s:{s:I, s:I, s:I}, s:{s:I, s:I}, s:o*, s:o*, "
			 "s:{s:I, s:I}}",
			 "target", l->target, "lun", (json_int_t)l->lun, "initiator",
			 l->initiator, "commands", "read", (json_int_t)l->cmds_read, "write",
			 (json_int_t)l->cmds_write, "other", (json_int_t)l->cmds_other, "bytes",
			 "read", (json_int_t)l->bytes_read, "written",
			 (json_int_t)l->bytes_written, "errors",
			 nonzero_map(l->errors, IX_ERR_KINDS, err_name), "latency",
			 latency_json(l), "qos", "delayed", (json_int_t)l->qos_delayed,
			 "wait_us", (json_int_t)(l->qos_wait_ns / 1000));
}

/* {NAME: N, ...}: one member per registered transport (dm.h), in registry order. */
static json_t *by_transport(const uint64_t *v)
{
	json_t *o = json_object();

	for (size_t x = 0; o && dm_transport(x); x++)
		json_object_set_new(o, dm_transport(x)->name, json_integer((json_int_t)v[x]));
	return o;
}

static json_t *tgt_json(const struct ix_tgt_stats *t)
{
	return json_pack("{s:s, s:I, s:o*, s:I, s:o*, s:I, s:I, s:I, s:I}", "target",
			 t->target, "logins_accepted", (json_int_t)t->logins_accepted,
			 "logins_refused",
			 nonzero_map(t->logins_refused, IX_LOGIN_REASONS, ix_login_reason_name),
			 "login_timeouts", (json_int_t)t->login_timeouts, "sessions",
			 by_transport(t->sessions), "digest_errors", (json_int_t)t->digest_errors, "connection_timeouts",
			 (json_int_t)t->conn_timeouts, "tasks_aborted", (json_int_t)t->tasks_aborted,
			 "pdus_rejected", (json_int_t)t->pdus_rejected);
}

static json_t *logins_json(const struct ix_login_stats *l)
{
	json_t *refused = json_object();

	for (int i = 0; refused && i < IX_LOGIN_REASONS; i++)
		json_object_set_new(refused, ix_login_reason_name(i),
				    json_integer((json_int_t)l->refused[i]));
	return json_pack("{s:{s:I, s:I}, s:o*, s:I}", "accepted", "normal",
			 (json_int_t)l->accepted_normal, "discovery",
			 (json_int_t)l->accepted_discovery, "refused", refused, "timeouts",
			 (json_int_t)l->timeouts);
}

static json_t *space_json(const struct ix_space_stats *s)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:i, s:b}", "target", s->target, "lun",
			      (json_int_t)s->lun, "total_bytes", (json_int_t)s->total,
			      "available_bytes", (json_int_t)s->avail, "thin_threshold",
			      (int)s->threshold, "threshold_reached", s->reached);

	if (o && s->used != UINT64_MAX)
		json_object_set_new(o, "used_bytes", json_integer((json_int_t)s->used));
	return o;
}

json_t *metrics_json(const struct ix_stats *st)
{
	json_t *tg = json_array(), *lu = json_array(), *wk = json_array(), *sp = json_array();
	uint64_t normal[DM_MAX_TRANSPORTS] = {0};
	json_int_t disc = 0;

	for (size_t i = 0; tg && i < st->ntgts; i++) {
		const struct ix_tgt_stats *t = &st->tgts[i];
		json_array_append_new(tg, tgt_json(t));
		for (size_t x = 0; x < DM_MAX_TRANSPORTS; x++)
			if (t->target[0])
				normal[x] += t->sessions[x];
			else
				disc += (json_int_t)t->sessions[x];
	}
	for (size_t i = 0; lu && i < st->nluns; i++)
		json_array_append_new(lu, lun_json(&st->luns[i]));
	for (size_t i = 0; wk && i < st->nworkers; i++) {
		const struct ix_worker_stats *w = &st->workers[i];
		json_array_append_new(
		    wk, json_pack("{s:i, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I}", "id", w->id,
				  "sleeps", (json_int_t)w->sleeps, "poll_hits",
				  (json_int_t)w->poll_hits, "poller_hits", (json_int_t)w->poller_hits,
				  "poll_backoffs", (json_int_t)w->poll_backoffs, "poll_seconds",
				  (double)w->poll_ns / 1e9, "task_slots", (json_int_t)w->task_slots,
				  "pdu_descriptors", (json_int_t)w->pdu_descriptors, "buffer_bytes",
				  (json_int_t)w->buffer_bytes, "trims", (json_int_t)w->trims));
	}
	for (size_t i = 0; sp && i < st->nspaces; i++)
		json_array_append_new(sp, space_json(&st->spaces[i]));
	return json_pack("{s:o*, s:{s:o*, s:I}, s:o*, s:o*, s:o*, s:o*}", "logins",
			 logins_json(&st->logins), "sessions", "normal", by_transport(normal),
			 "discovery", disc, "targets", tg, "luns", lu, "workers", wk, "space", sp);
}
