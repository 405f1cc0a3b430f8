/* Statistics of the target (target.h: ix_target_stats).
 *
 * Memory model: every counter is a plain uint64_t in a slot (struct tgt_lstat, struct
 * tgt_tstat) that belongs to one worker and is written only by that worker's thread, on its
 * event loop: no lock and no atomic on the data path. Nobody else reads a slot in place. To
 * read them, the main thread posts a message to each worker's loop (ev_loop_post); the worker
 * copies its slots on its own thread (program order: every earlier increment is visible to the
 * copy) into a buffer it allocated, and hands the buffer back through an atomic countdown and
 * ev_loop_post to the main loop. ev_loop_post takes the target loop's mutex, and the countdown
 * is a seq_cst read-modify-write, so each copy happens-before the main thread's summing (C11
 * 5.1.2.4: release by the unlock, acquire by the lock). The copies are summed by key there.
 *
 * Slots live as long as the worker (counters are "since start", as Prometheus wants): a session
 * keeps pointers to its slots, found once per session (target) and once per session and LUN
 * (the first command to that LUN), never per command. A worker holds at most
 * TGT_STATS_MAX_SLOTS slots of each kind; past that, new (target, LUN, initiator) combinations
 * are not counted (a warning is logged once).
 *
 * Per command: the arrival time is the worker loop's cached clock (no clock read); completion
 * reads the clock once (CLOCK_MONOTONIC, the same clock as the loop's). About 100 instructions
 * per command in all (callgrind, docs/perf.md).
 */
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "target/tgt_int.h"
#include "util/log.h"

#define TGT_STATS_MAX_SLOTS 4096

struct tgt_lstat {
	struct list_head link;
	struct ix_lun_stats v;
};

struct tgt_tstat {
	struct list_head link;
	struct ix_tgt_stats v;
};

void tgt_stats_worker_init(struct tgt_worker *w)
{
	list_init(&w->lstats);
	list_init(&w->tstats);
}

void tgt_stats_worker_free(struct tgt_worker *w)
{
	struct list_head *pos, *n;

	if (!w->lstats.next)
		return; /* never initialised */
	list_for_each_safe(pos, n, &w->lstats)
		free(list_entry(pos, struct tgt_lstat, link));
	list_for_each_safe(pos, n, &w->tstats)
		free(list_entry(pos, struct tgt_tstat, link));
	list_init(&w->lstats);
	list_init(&w->tstats);
}

static void slot_limit_warn(struct tgt_worker *w)
{
	if (!w->slots_warned)
		log_warn("stats", "worker %d: %d statistics slots in use, new ones are not counted",
			 w->id, TGT_STATS_MAX_SLOTS);
	w->slots_warned = true;
}

struct tgt_tstat *tgt_tstat_get(struct tgt_worker *w, const char *target)
{
	struct list_head *pos;
	struct tgt_tstat *ts;

	if (!target)
		target = "";
	list_for_each(pos, &w->tstats)
	{
		ts = list_entry(pos, struct tgt_tstat, link);
		if (strcmp(ts->v.target, target) == 0)
			return ts;
	}
	if (w->ntstats >= TGT_STATS_MAX_SLOTS) {
		slot_limit_warn(w);
		return NULL;
	}
	ts = calloc(1, sizeof(*ts));
	if (!ts)
		return NULL;
	snprintf(ts->v.target, sizeof(ts->v.target), "%s", target);
	list_add_tail(&ts->link, &w->tstats);
	w->ntstats++;
	return ts;
}

static struct tgt_lstat *lstat_get(struct tgt_worker *w, const char *target,
				   const char *initiator, uint32_t lun)
{
	struct list_head *pos;
	struct tgt_lstat *ls;

	list_for_each(pos, &w->lstats)
	{
		ls = list_entry(pos, struct tgt_lstat, link);
		if (ls->v.lun == lun && strcmp(ls->v.target, target) == 0 &&
		    strcasecmp(ls->v.initiator, initiator) == 0)
			return ls;
	}
	if (w->nlstats >= TGT_STATS_MAX_SLOTS) {
		slot_limit_warn(w);
		return NULL;
	}
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return NULL;
	snprintf(ls->v.target, sizeof(ls->v.target), "%s", target);
	/* iSCSI names compare case-insensitively (ACLs match so): one initiator, one series */
	for (size_t i = 0; initiator[i] && i + 1 < sizeof(ls->v.initiator); i++)
		ls->v.initiator[i] = (char)tolower((unsigned char)initiator[i]);
	ls->v.lun = lun;
	list_add_tail(&ls->link, &w->lstats);
	w->nlstats++;
	return ls;
}

struct tgt_tstat *tgt_conn_tstat(struct tgt_conn *tc)
{
	struct tgt_session *s = tc->sess;
	const char *name = "";

	if (s && s->tstat)
		return s->tstat;
	if (s && s->node)
		name = s->target;
	else if (!s && tc->login && tc->login->info.target_name[0] &&
		 cfg_find_target(tc->gen->cfg, tc->login->info.target_name))
		name = tc->login->info.target_name;
	if (s) {
		s->tstat = tgt_tstat_get(tc->worker, name);
		return s->tstat;
	}
	return tgt_tstat_get(tc->worker, name);
}

void tgt_stat_count(struct tgt_conn *tc, enum tgt_stat_event ev, uint64_t n)
{
	struct tgt_tstat *ts = tgt_conn_tstat(tc);

	if (!ts)
		return;
	switch (ev) {
	case TGT_ST_LOGIN_ACCEPTED:
		ts->v.logins_accepted += n;
		break;
	case TGT_ST_LOGIN_TIMEOUT:
		ts->v.login_timeouts += n;
		break;
	case TGT_ST_DIGEST_ERROR:
		ts->v.digest_errors += n;
		break;
	case TGT_ST_CONN_TIMEOUT:
		ts->v.conn_timeouts += n;
		break;
	case TGT_ST_TASK_ABORTED:
		ts->v.tasks_aborted += n;
		break;
	case TGT_ST_PDU_REJECTED:
		ts->v.pdus_rejected += n;
		break;
	}
}

void tgt_stat_login_refused(struct tgt_conn *tc, int reason_idx)
{
	struct tgt_tstat *ts = tgt_conn_tstat(tc);

	if (ts && reason_idx >= 0 && reason_idx < IX_LOGIN_REASONS)
		ts->v.logins_refused[reason_idx]++;
}

static inline int lat_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	int b = us ? 64 - __builtin_clzll(us) : 0; /* bucket b holds us < 2^b: bit length */

	return b < IX_LAT_BUCKETS - 1 ? b : IX_LAT_BUCKETS - 1;
}

int ix_lat_bucket(uint64_t ns)
{
	return lat_bucket(ns);
}

static inline uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { OP_READ, OP_WRITE, OP_OTHER };

static int cdb_kind(uint8_t opcode)
{
	switch (opcode) {
	case 0x08: case 0x28: case 0xa8: case 0x88: /* READ (6, 10, 12, 16) */
		return OP_READ;
	case 0x0a: case 0x2a: case 0xaa: case 0x8a: /* WRITE (6, 10, 12, 16) */
		return OP_WRITE;
	default:
		return OP_OTHER;
	}
}

/* CHECK CONDITION's sense key (fixed or descriptor format), else IX_ERR_OTHER_STATUS. */
static int err_kind(const struct scsi_cmd *sc)
{
	if (sc->status == SCSI_STATUS_CHECK_CONDITION && sc->sense_len >= 3) {
		uint8_t code = sc->sense[0] & 0x7f;
		return (code == 0x72 || code == 0x73 ? sc->sense[1] : sc->sense[2]) & 0x0f;
	}
	return IX_ERR_OTHER_STATUS;
}

static struct tgt_lstat *task_lstat(struct tgt_task *t)
{
	struct tgt_session *s = t->tc->sess;
	uint32_t lun;

	if (!s || !s->node)
		return NULL;
	lun = scsi_nexus_map_lun(s->nexus, scsi_lun_decode(t->lun)); /* the target's LUN */
	if (lun >= SCSI_MAX_LUNS)
		return NULL;
	if (!s->lstat[lun])
		s->lstat[lun] = lstat_get(s->worker, s->target, s->initiator, lun);
	return s->lstat[lun];
}

void tgt_stats_qos_wait(struct tgt_task *t, uint64_t ns)
{
	struct tgt_lstat *ls = ns ? task_lstat(t) : NULL;

	if (!ls)
		return;
	ls->v.qos_delayed++;
	ls->v.qos_wait_ns += ns;
}

void tgt_stats_cmd_done(struct tgt_task *t)
{
	struct tgt_lstat *ls = task_lstat(t);
	struct ix_lun_stats *v;
	uint64_t ns;

	if (!ls)
		return;
	v = &ls->v;
	ns = clock_ns() - t->start_ns;
	switch (cdb_kind(t->cdb[0])) {
	case OP_READ:
		v->cmds_read++;
		v->bytes_read += t->sc.data_in_len;
		break;
	case OP_WRITE:
		v->cmds_write++;
		if (t->sc.status == SCSI_STATUS_GOOD)
			v->bytes_written += t->edtl;
		break;
	default:
		v->cmds_other++;
		break;
	}
	if (__builtin_expect(t->sc.status != SCSI_STATUS_GOOD, 0))
		v->errors[err_kind(&t->sc)]++;
	v->lat[lat_bucket(ns)]++;
	v->lat_sum_ns += ns;
}

/* ---------------------------------------------------------------- reading */

struct stats_part {
	struct ix_stats st; /* this worker's copy */
};

struct stats_snap {
	ix_stats_cb cb;
	void *arg;
	struct ix_target *t;
};

void ix_stats_free(struct ix_stats *st)
{
	free(st->tgts);
	free(st->luns);
	free(st->workers);
	free(st->spaces);
	st->tgts = NULL;
	st->luns = NULL;
	st->workers = NULL;
	st->spaces = NULL;
	st->ntgts = st->nluns = st->nworkers = st->nspaces = 0;
}

static struct ix_tgt_stats *copy_tgt_find(struct ix_stats *st, const char *name)
{
	for (size_t i = 0; i < st->ntgts; i++)
		if (strcmp(st->tgts[i].target, name) == 0)
			return &st->tgts[i];
	return NULL;
}

/* Open sessions by transport, into the copy (the slot exists: the session counted its login). */
static void copy_sessions(struct tgt_worker *w, struct ix_stats *st)
{
	struct list_head *pos;

	list_for_each(pos, &w->sessions)
	{
		struct tgt_session *s = list_entry(pos, struct tgt_session, wlink);
		struct ix_tgt_stats *ts;
		int id;

		if (!s->conn || !s->conn->conn || s->conn->conn->terminated)
			continue;
		ts = copy_tgt_find(st, s->node ? s->target : "");
		id = dm_transport_id(s->conn->conn->dm);
		if (ts && id >= 0)
			ts->sessions[id]++;
	}
}

static void copy_loop(struct tgt_worker *w, struct ix_worker_stats *ws)
{
	struct ev_loop_stats ls;
	struct list_head *pos;

	ev_loop_get_stats(w->loop, &ls);
	ws->id = w->id;
	ws->sleeps = ls.sleeps;
	ws->poll_hits = ls.poll_hits + ls.poller_hits;
	ws->poller_hits = ls.poller_hits;
	ws->poll_backoffs = ls.backoffs;
	ws->poll_ns = ls.poll_ns;
	list_for_each(pos, &w->conns)
	{
		const struct tgt_conn *tc = list_entry(pos, struct tgt_conn, wlink);

		ws->task_slots += tc->ntasks;
		ws->pdu_descriptors += tc->conn ? tc->conn->tx_pooled : 0;
		ws->buffer_bytes += tc->buf_bytes;
	}
	ws->trims = w->trims;
}

static int copy_worker(struct tgt_worker *w, struct ix_stats *st)
{
	struct list_head *pos;
	size_t i = 0;

	st->logins = w->logins;
	st->tgts = calloc(w->ntstats ? w->ntstats : 1, sizeof(*st->tgts));
	st->luns = calloc(w->nlstats ? w->nlstats : 1, sizeof(*st->luns));
	st->workers = calloc(1, sizeof(*st->workers));
	if (!st->tgts || !st->luns || !st->workers) {
		ix_stats_free(st);
		return -ENOMEM;
	}
	list_for_each(pos, &w->tstats)
		st->tgts[i++] = list_entry(pos, struct tgt_tstat, link)->v;
	st->ntgts = i;
	i = 0;
	list_for_each(pos, &w->lstats)
		st->luns[i++] = list_entry(pos, struct tgt_lstat, link)->v;
	st->nluns = i;
	copy_sessions(w, st);
	copy_loop(w, st->workers);
	st->nworkers = 1;
	return 0;
}

static void add_tgt(struct ix_tgt_stats *a, const struct ix_tgt_stats *b)
{
	a->logins_accepted += b->logins_accepted;
	for (int i = 0; i < IX_LOGIN_REASONS; i++)
		a->logins_refused[i] += b->logins_refused[i];
	a->login_timeouts += b->login_timeouts;
	for (int i = 0; i < DM_MAX_TRANSPORTS; i++)
		a->sessions[i] += b->sessions[i];
	a->digest_errors += b->digest_errors;
	a->conn_timeouts += b->conn_timeouts;
	a->tasks_aborted += b->tasks_aborted;
	a->pdus_rejected += b->pdus_rejected;
}

static void add_lun(struct ix_lun_stats *a, const struct ix_lun_stats *b)
{
	a->cmds_read += b->cmds_read;
	a->cmds_write += b->cmds_write;
	a->cmds_other += b->cmds_other;
	a->bytes_read += b->bytes_read;
	a->bytes_written += b->bytes_written;
	for (int i = 0; i < IX_ERR_KINDS; i++)
		a->errors[i] += b->errors[i];
	for (int i = 0; i < IX_LAT_BUCKETS; i++)
		a->lat[i] += b->lat[i];
	a->lat_sum_ns += b->lat_sum_ns;
	a->qos_delayed += b->qos_delayed;
	a->qos_wait_ns += b->qos_wait_ns;
}

static int cmp_tgt(const void *a, const void *b)
{
	return strcmp(((const struct ix_tgt_stats *)a)->target,
		      ((const struct ix_tgt_stats *)b)->target);
}

static int cmp_lun(const void *pa, const void *pb)
{
	const struct ix_lun_stats *a = pa, *b = pb;
	int r = strcmp(a->target, b->target);

	if (r == 0)
		r = a->lun < b->lun ? -1 : a->lun > b->lun;
	return r ? r : strcmp(a->initiator, b->initiator);
}

/* Sort and fold entries with equal keys (they came from different workers). */
static size_t fold_tgts(struct ix_tgt_stats *v, size_t n)
{
	size_t k = 0;

	qsort(v, n, sizeof(*v), cmp_tgt);
	for (size_t i = 0; i < n; i++) {
		if (k && cmp_tgt(&v[k - 1], &v[i]) == 0)
			add_tgt(&v[k - 1], &v[i]);
		else
			v[k++] = v[i];
	}
	return k;
}

static size_t fold_luns(struct ix_lun_stats *v, size_t n)
{
	size_t k = 0;

	qsort(v, n, sizeof(*v), cmp_lun);
	for (size_t i = 0; i < n; i++) {
		if (k && cmp_lun(&v[k - 1], &v[i]) == 0)
			add_lun(&v[k - 1], &v[i]);
		else
			v[k++] = v[i];
	}
	return k;
}

/* Every worker's copy in one, summed by key. */
static int merge_parts(const struct stats_part *parts, int nparts, struct ix_stats *out)
{
	size_t nt = 0, nl = 0, nw = 0;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < nparts; i++) {
		nt += parts[i].st.ntgts;
		nl += parts[i].st.nluns;
		nw += parts[i].st.nworkers;
	}
	out->tgts = calloc(nt ? nt : 1, sizeof(*out->tgts));
	out->luns = calloc(nl ? nl : 1, sizeof(*out->luns));
	out->workers = calloc(nw ? nw : 1, sizeof(*out->workers));
	if (!out->tgts || !out->luns || !out->workers) {
		ix_stats_free(out);
		return -ENOMEM;
	}
	for (int i = 0; i < nparts; i++) {
		const struct ix_stats *p = &parts[i].st;
		tgt_login_stats_add(&out->logins, &p->logins);
		memcpy(out->tgts + out->ntgts, p->tgts, p->ntgts * sizeof(*p->tgts));
		out->ntgts += p->ntgts;
		memcpy(out->luns + out->nluns, p->luns, p->nluns * sizeof(*p->luns));
		out->nluns += p->nluns;
		memcpy(out->workers + out->nworkers, p->workers, p->nworkers * sizeof(*p->workers));
		out->nworkers += p->nworkers;
	}
	out->ntgts = fold_tgts(out->tgts, out->ntgts);
	out->nluns = fold_luns(out->luns, out->nluns);
	return 0;
}

/* The last space sample of every LUN whose backend tells (main thread: the node table). */
static int space_rows(struct ix_target *t, struct ix_stats *st)
{
	size_t n = 0, cap = 0;
	int r = 0;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nnodes && r == 0; i++) {
		const struct tgt_node *nd = t->nodes[i];

		for (uint32_t l = 0; l < SCSI_MAX_LUNS; l++) {
			struct scsi_lu *lu = scsi_lun_map_get(nd->map, l);
			struct ix_space_stats *row;
			struct scsi_lu_space sp;

			if (!lu)
				continue;
			scsi_lu_space_get(lu, &sp);
			if (!sp.total)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				row = realloc(st->spaces, cap * sizeof(*row));
				if (!row) {
					r = -ENOMEM;
					break;
				}
				st->spaces = row;
			}
			row = &st->spaces[n++];
			memset(row, 0, sizeof(*row));
			snprintf(row->target, sizeof(row->target), "%s", nd->cfg->name);
			row->lun = l;
			row->total = sp.total;
			row->avail = sp.avail;
			row->used = sp.used;
			row->threshold = sp.threshold;
			row->reached = sp.over;
		}
	}
	pthread_mutex_unlock(&t->lock);
	st->nspaces = n;
	return r;
}

static void snap_done(void *arg, void *parts_, int nparts)
{
	struct stats_snap *sn = arg;
	struct stats_part *parts = parts_;
	struct ix_stats st;

	if (merge_parts(parts, nparts, &st) < 0) {
		log_warn("stats", "statistics lost (out of memory)");
		memset(&st, 0, sizeof(st));
	} else if (space_rows(sn->t, &st) < 0)
		log_warn("stats", "space statistics lost (out of memory)");
	sn->cb(sn->arg, &st);
	ix_stats_free(&st);
	for (int i = 0; i < nparts; i++)
		ix_stats_free(&parts[i].st);
	free(sn);
}

/* On the worker's thread. */
static void snap_worker(struct tgt_worker *w, void *part)
{
	struct stats_part *p = part;

	if (copy_worker(w, &p->st) < 0)
		log_warn("stats", "worker %d: statistics not copied (out of memory)", w->id);
}

int ix_target_stats(struct ix_target *t, ix_stats_cb cb, void *arg)
{
	struct stats_snap *sn = calloc(1, sizeof(*sn));
	int r;

	if (!sn)
		return -ENOMEM;
	sn->cb = cb;
	sn->arg = arg;
	sn->t = t;
	r = tgt_gather(t, sizeof(struct stats_part), snap_worker, snap_done, sn);
	if (r < 0)
		free(sn);
	return r;
}
