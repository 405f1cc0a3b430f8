/* Token-based copy (ODX): POPULATE TOKEN and WRITE USING TOKEN (SBC-3 5.9, 5.47), RECEIVE ROD
 * TOKEN INFORMATION (SPC-4 6.26) and the third-party copy VPD page (SPC-4 7.8.17 with the
 * Block Device ROD Token Limits descriptor of SBC-3 6.6.8).
 *
 * POPULATE TOKEN does not copy anything: it records the source ranges in a slot of the source
 * LU's token table and answers with a 512-byte ROD token of type "point in time copy - change
 * vulnerable" (00800001h) naming the slot, its generation, the source LU (its NAA designator),
 * the copy manager (the target context's random identity, so a token of another context is
 * refused as remote) and a random nonce. The token stays valid until its inactivity timeout
 * runs out, it is deleted (DEL_TKN), the LU is reset or sanitized, or a write reaches any of
 * its source blocks: every write path goes through scsi_submit_io_lu / scsi_sync_io, which
 * call scsi_rod_written while the LU has a valid token (one relaxed load otherwise). WRITE
 * USING TOKEN then reads the source ranges and writes the destination's in chunks of the
 * command's bounce buffer, through the range guards like any read and write, checking after
 * every read that the token is still valid, so a copy never writes data changed since the
 * token was made. The source and destination are LUs of the same target context, found by
 * NAA in its LU index (as EXTENDED COPY finds them). The block device zero token
 * (FFFF0001h) writes zeros. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "scsi/scsi_int.h"

#define ROD_TYPE_PIT_DEF  0x00800000u
#define ROD_TYPE_PIT_VULN 0x00800001u
#define ROD_TYPE_PIT_ANY  0x0080ffffu
#define ROD_TYPE_ZERO	  0xffff0001u
#define ROD_TOKEN_LEN	  512
#define ROD_LEN_FIELD	  0x1f8

#define ROD_DEF_TIMEOUT_S 60	/* DEFAULT INACTIVITY TIMEOUT */
#define ROD_MAX_TIMEOUT_S 3600	/* MAXIMUM INACTIVITY TIMEOUT */
#define ROD_MAX_BYTES	  (256ull << 20) /* per token and per WRITE USING TOKEN */
#define ROD_OPT_BYTES	  (64ull << 20)

#define PT_HDR	16  /* POPULATE TOKEN parameter list header */
#define WUT_HDR 536 /* WRITE USING TOKEN parameter list header, the token included */
#define RANGE_LEN 16

/* Slot states (low byte of the state word). */
#define ROD_FREE    0
#define ROD_FILLING 1
#define ROD_VALID   2
#define ROD_DEAD    3 /* the ASCQ of INVALID TOKEN OPERATION is in bits 8..15 */

/* INVALID TOKEN OPERATION (23h) ASCQs */
#define TOK_UNSUPPORTED 0x01
#define TOK_REMOTE	0x02
#define TOK_UNKNOWN	0x04
#define TOK_CORRUPT	0x05
#define TOK_REVOKED	0x06
#define TOK_EXPIRED	0x07
#define TOK_CANCELLED	0x08
#define TOK_DELETED	0x09
#define TOK_BAD_LENGTH	0x0a

#define ST(gen, ascq, st) (((uint64_t)(gen) << 16) | ((uint64_t)(ascq) << 8) | (st))
#define ST_GEN(v)	  ((v) >> 16)
#define ST_ASCQ(v)	  ((uint8_t)((v) >> 8))
#define ST_STATE(v)	  ((uint8_t)(v))

_Static_assert(SCSI_ROD_SLOTS <= 256, "a slot number fits scsi_copy_status.rod_slot");

#define COPY_DONE_GOOD	0x01
#define COPY_DONE_ERROR 0x02

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void token_fail(struct scsi_cmd *cmd, uint8_t ascq)
{
	scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x23, ascq);
}

/* ---- the token table ---- */

static struct scsi_rod_table *table_get(struct scsi_lu *lu)
{
	struct scsi_rod_table *t = atomic_load_explicit(&lu->rod, memory_order_acquire), *none = NULL;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (lu->index)
		memcpy(t->cm_id, lu->index->id, sizeof(t->cm_id));
	else if (getrandom(t->cm_id, sizeof(t->cm_id), 0) != (ssize_t)sizeof(t->cm_id))
		memcpy(t->cm_id, lu->naa, sizeof(t->cm_id));
	if (!atomic_compare_exchange_strong_explicit(&lu->rod, &none, t, memory_order_acq_rel,
						     memory_order_acquire)) {
		free(t); /* another thread was first */
		return none;
	}
	return t;
}

void scsi_rod_lu_free(struct scsi_lu *lu)
{
	free(atomic_load_explicit(&lu->rod, memory_order_relaxed));
}

/* Move slot s from VALID (state v) to DEAD with ascq; false if someone else changed it. */
static bool slot_kill(struct scsi_lu *lu, struct scsi_rod_slot *s, uint64_t v, uint8_t ascq)
{
	if (!atomic_compare_exchange_strong_explicit(&s->state, &v, ST(ST_GEN(v), ascq, ROD_DEAD),
						     memory_order_acq_rel, memory_order_relaxed))
		return false;
	atomic_fetch_sub_explicit(&lu->rod_live, 1, memory_order_relaxed);
	return true;
}

static bool expired(const struct scsi_rod_slot *s, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&s->last_use_ms, memory_order_relaxed);

	return now - last > (uint64_t)atomic_load_explicit(&s->timeout_s, memory_order_relaxed) *
				     1000u;
}

void scsi_rod_written(struct scsi_lu *lu, uint64_t lba, uint64_t n)
{
	struct scsi_rod_table *t = atomic_load_explicit(&lu->rod, memory_order_acquire);

	if (!t || n == 0)
		return;
	for (unsigned i = 0; i < SCSI_ROD_SLOTS; i++) {
		struct scsi_rod_slot *s = &t->slot[i];
		uint64_t v = atomic_load_explicit(&s->state, memory_order_acquire);
		unsigned nr;

		if (ST_STATE(v) != ROD_VALID)
			continue;
		nr = atomic_load_explicit(&s->nranges, memory_order_relaxed);
		for (unsigned r = 0; r < nr && r < SCSI_ROD_RANGES; r++) {
			uint64_t a = atomic_load_explicit(&s->lba[r], memory_order_relaxed);
			uint32_t m = atomic_load_explicit(&s->nblk[r], memory_order_relaxed);

			if (m && lba < a + m && a < lba + n) {
				/* a failed CAS: the slot changed meanwhile (a new token is newer
				 * than this write) */
				slot_kill(lu, s, v, TOK_CANCELLED);
				break;
			}
		}
	}
}

void scsi_rod_lu_reset(struct scsi_lu *lu)
{
	struct scsi_rod_table *t = atomic_load_explicit(&lu->rod, memory_order_acquire);

	for (unsigned i = 0; t && i < SCSI_ROD_SLOTS; i++) {
		uint64_t v = atomic_load_explicit(&t->slot[i].state, memory_order_acquire);

		while (ST_STATE(v) == ROD_VALID && !slot_kill(lu, &t->slot[i], v, TOK_REVOKED))
			v = atomic_load_explicit(&t->slot[i].state, memory_order_acquire);
	}
}

/* A slot to fill: a free one, else one whose token is dead or expired. Returns its index with
 * the state FILLING at a new generation, or -1. */
static int slot_take(struct scsi_lu *lu, struct scsi_rod_table *t, uint64_t *gen)
{
	uint64_t now = now_ms();

	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < SCSI_ROD_SLOTS; i++) {
			struct scsi_rod_slot *s = &t->slot[i];
			uint64_t v = atomic_load_explicit(&s->state, memory_order_acquire);

			if (pass == 1 && ST_STATE(v) == ROD_VALID && expired(s, now) &&
			    slot_kill(lu, s, v, TOK_EXPIRED))
				v = atomic_load_explicit(&s->state, memory_order_acquire);
			if (ST_STATE(v) != ROD_FREE && (pass == 0 || ST_STATE(v) != ROD_DEAD))
				continue;
			*gen = (ST_GEN(v) + 1) & 0xffffffffffffull;
			if (atomic_compare_exchange_strong_explicit(
				&s->state, &v, ST(*gen, 0, ROD_FILLING), memory_order_acq_rel,
				memory_order_relaxed))
				return i;
		}
	}
	return -1;
}

/* ---- the token ---- */

static void token_build(const struct scsi_lu *lu, const struct scsi_rod_table *t, unsigned slot,
			uint64_t gen, uint8_t *d)
{
	const struct scsi_rod_slot *s = &t->slot[slot];
	uint64_t n0 = atomic_load_explicit(&s->nonce[0], memory_order_relaxed);
	uint64_t n1 = atomic_load_explicit(&s->nonce[1], memory_order_relaxed);

	memset(d, 0, ROD_TOKEN_LEN);
	put_be32(d, atomic_load_explicit(&s->type, memory_order_relaxed));
	put_be16(d + 6, ROD_LEN_FIELD);
	/* COPY MANAGER ROD TOKEN IDENTIFIER: the slot and its generation */
	put_be16(d + 8, (uint16_t)slot);
	put_be16(d + 10, (uint16_t)(gen >> 32));
	put_be32(d + 12, (uint32_t)gen);
	/* CREATOR LOGICAL UNIT DESCRIPTOR: an identification CSCD naming the source by NAA */
	d[16] = 0xe4;
	d[20] = 0x01; /* binary */
	d[21] = 0x03; /* LU association, NAA */
	d[23] = 16;
	memcpy(d + 24, lu->naa, 16);
	put_be24(d + 16 + 29, lu->block_size);
	/* NUMBER OF BYTES REPRESENTED (16 bytes) */
	put_be64(d + 56, atomic_load_explicit(&s->blocks, memory_order_relaxed) * lu->block_size);
	/* vendor specific: the copy manager and the token's nonce */
	memcpy(d + 128, t->cm_id, 16);
	put_be64(d + 144, n0);
	put_be64(d + 152, n1);
}

/* The source LU and slot a token names, checked: a reference on the LU and true, or false with
 * the command failed. */
static bool token_resolve(struct scsi_cmd *cmd, struct scsi_lu *lu, const uint8_t *tok,
			  struct scsi_lu **src_out, unsigned *slot_out, uint64_t *gen_out)
{
	const uint8_t *cm = lu->index ? lu->index->id : NULL;
	struct scsi_rod_table *t;
	struct scsi_rod_slot *s;
	struct scsi_lu *src = NULL;
	uint64_t v, gen;
	unsigned slot;

	if (get_be16(tok + 6) != ROD_LEN_FIELD) {
		token_fail(cmd, TOK_BAD_LENGTH);
		return false;
	}
	if (get_be32(tok) != ROD_TYPE_PIT_VULN) {
		token_fail(cmd, TOK_UNSUPPORTED);
		return false;
	}
	/* the creator: an identification CSCD with a 16-byte NAA designator */
	if (tok[16] != 0xe4 || (tok[21] & 0x0f) != 3 || tok[23] != 16) {
		token_fail(cmd, TOK_CORRUPT);
		return false;
	}
	if (lu->index) {
		src = scsi_lu_index_find(lu->index, tok + 24, 16);
	} else if (memcmp(lu->naa, tok + 24, 16) == 0) {
		scsi_lu_get(lu);
		src = lu;
	}
	t = src ? atomic_load_explicit(&src->rod, memory_order_acquire) : NULL;
	if (!cm && t)
		cm = t->cm_id;
	if (!cm || memcmp(tok + 128, cm, 16) != 0) {
		scsi_lu_put(src);
		token_fail(cmd, TOK_REMOTE); /* another copy manager's token */
		return false;
	}
	slot = get_be16(tok + 8);
	gen = ((uint64_t)get_be16(tok + 10) << 32) | get_be32(tok + 12);
	if (!src || !t || slot >= SCSI_ROD_SLOTS) {
		scsi_lu_put(src);
		token_fail(cmd, TOK_UNKNOWN);
		return false;
	}
	s = &t->slot[slot];
	v = atomic_load_explicit(&s->state, memory_order_acquire);
	if (ST_GEN(v) != gen ||
	    get_be64(tok + 144) != atomic_load_explicit(&s->nonce[0], memory_order_relaxed) ||
	    get_be64(tok + 152) != atomic_load_explicit(&s->nonce[1], memory_order_relaxed) ||
	    (ST_STATE(v) != ROD_VALID && ST_STATE(v) != ROD_DEAD)) {
		scsi_lu_put(src);
		token_fail(cmd, TOK_UNKNOWN); /* never made here, or its slot was reused */
		return false;
	}
	if (ST_STATE(v) == ROD_VALID && expired(s, now_ms()) && slot_kill(src, s, v, TOK_EXPIRED))
		v = atomic_load_explicit(&s->state, memory_order_acquire);
	if (ST_STATE(v) != ROD_VALID) {
		scsi_lu_put(src);
		token_fail(cmd, ST_ASCQ(v) ? ST_ASCQ(v) : TOK_UNKNOWN);
		return false;
	}
	*src_out = src;
	*slot_out = slot;
	*gen_out = gen;
	return true;
}

/* ---- the per-nexus log read by RECEIVE ROD TOKEN INFORMATION ---- */

static struct scsi_copy_status *log_find(struct scsi_itl *itl, uint32_t list_id)
{
	for (unsigned i = 0; itl && i < SCSI_COPY_LOG; i++)
		if (itl->copy_log[i].valid && itl->copy_log[i].lid4 &&
		    itl->copy_log[i].list_id == list_id)
			return &itl->copy_log[i];
	return NULL;
}

static struct scsi_copy_status *log_slot(struct scsi_itl *itl, uint32_t list_id)
{
	struct scsi_copy_status *cs = log_find(itl, list_id);

	if (!itl)
		return NULL;
	if (!cs) {
		cs = &itl->copy_log[itl->copy_next];
		itl->copy_next = (uint8_t)((itl->copy_next + 1) % SCSI_COPY_LOG);
	}
	memset(cs, 0, sizeof(*cs));
	cs->valid = true;
	cs->lid4 = true;
	cs->list_id = list_id;
	return cs;
}

/* Fixed-format sense the command ended with, back to key/asc/ascq. */
static void log_result(struct scsi_cmd *cmd, struct scsi_copy_status *cs)
{
	if (!cs)
		return;
	if (cmd->status == SCSI_STATUS_GOOD) {
		cs->status = COPY_DONE_GOOD;
		return;
	}
	cs->status = COPY_DONE_ERROR;
	if (cmd->sense_len >= 14 && (cmd->sense[0] & 0x7f) <= 0x71) {
		cs->key = cmd->sense[2] & 0x0f;
		cs->asc = cmd->sense[12];
		cs->ascq = cmd->sense[13];
	} else if (cmd->sense_len >= 4) { /* descriptor format */
		cs->key = cmd->sense[1] & 0x0f;
		cs->asc = cmd->sense[2];
		cs->ascq = cmd->sense[3];
	}
}

/* A list identifier in use by a copy still running on this nexus: OPERATION IN PROGRESS. */
static bool list_busy(struct scsi_cmd *cmd, uint32_t list_id)
{
	const struct scsi_copy_status *cs = log_find(scsi_priv(cmd)->itl, list_id);

	if (!cs || cs->status != 0)
		return false;
	scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x00, 0x16);
	return true;
}

/* ---- parameter lists ---- */

/* Check the parameter list length of a THIRD-PARTY COPY OUT command against its data: the
 * list, or NULL with the command failed (or done, for an empty list). */
static const uint8_t *param_list(struct scsi_cmd *cmd, uint32_t min, bool *done)
{
	uint32_t plen = get_be32(cmd->cdb + 10);

	*done = false;
	cmd->xfer_wanted = plen;
	if (plen == 0) {
		*done = true; /* no parameter list: nothing to do */
		return NULL;
	}
	if (cmd->data_out_len < plen || cmd->buf_len < plen) {
		scsi_fail_cdb(cmd, 10, -1);
		return NULL;
	}
	if (plen < min || (uint32_t)get_be16(cmd->buf) + 2 > plen) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
		return NULL;
	}
	return cmd->buf;
}

/* The block device range descriptors at d + off, whose length the 2-byte field at d + len_field
 * gives (*rlen): within the parameter list, then checked against lu's capacity. Returns their
 * total of blocks, or UINT64_MAX with the command failed. */
static uint64_t ranges_check(struct scsi_cmd *cmd, const struct scsi_lu *lu, const uint8_t *d,
			     uint32_t off, uint32_t len_field, uint32_t *rlen_out)
{
	uint64_t total = 0, cap = atomic_load_explicit(&lu->nblocks, memory_order_acquire);
	uint32_t rlen = get_be16(d + len_field);

	*rlen_out = rlen;
	if (off + rlen > get_be32(cmd->cdb + 10)) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
		return UINT64_MAX;
	}
	if (rlen == 0 || rlen % RANGE_LEN) {
		scsi_fail_param(cmd, len_field, -1);
		return UINT64_MAX;
	}
	if (rlen / RANGE_LEN > SCSI_ROD_RANGES) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x08); /* TOO MANY SEGMENT DESCRIPTORS */
		return UINT64_MAX;
	}
	for (uint32_t r = off; r < off + rlen; r += RANGE_LEN) {
		uint64_t lba = get_be64(d + r);
		uint32_t n = get_be32(d + r + 8);

		if (lba > cap || n > cap - lba) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
			return UINT64_MAX;
		}
		total += n;
	}
	if (total * lu->block_size > ROD_MAX_BYTES) {
		scsi_fail_param(cmd, off + 8, -1); /* more than MAXIMUM TOKEN TRANSFER SIZE */
		return UINT64_MAX;
	}
	return total;
}

/* ---- POPULATE TOKEN ---- */

static int populate(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint32_t list_id = get_be32(cmd->cdb + 6), rlen, timeout, type = ROD_TYPE_PIT_VULN;
	struct scsi_copy_status *cs;
	struct scsi_rod_table *t;
	struct scsi_rod_slot *s;
	const uint8_t *d;
	uint64_t total, gen = 0;
	bool done;
	int slot;

	d = param_list(cmd, PT_HDR + RANGE_LEN, &done);
	if (!d)
		return SCSI_DONE;
	if (list_busy(cmd, list_id))
		return SCSI_DONE;
	if (d[2] & 0x02) { /* RTV */
		type = get_be32(d + 8);
		if (type != ROD_TYPE_PIT_DEF && type != ROD_TYPE_PIT_VULN &&
		    type != ROD_TYPE_PIT_ANY) {
			scsi_fail_param(cmd, 8, -1); /* a type this copy manager does not make */
			return SCSI_DONE;
		}
		type = ROD_TYPE_PIT_VULN;
	}
	timeout = get_be32(d + 4);
	if (timeout > ROD_MAX_TIMEOUT_S) {
		scsi_fail_param(cmd, 4, -1);
		return SCSI_DONE;
	}
	total = ranges_check(cmd, lu, d, PT_HDR, 14, &rlen);
	if (total == UINT64_MAX)
		return SCSI_DONE;
	t = table_get(lu);
	slot = t ? slot_take(lu, t, &gen) : -1;
	if (slot < 0) {
		/* INSUFFICIENT RESOURCES TO CREATE ROD TOKEN */
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x55, 0x0d);
		return SCSI_DONE;
	}
	s = &t->slot[slot];
	for (uint32_t r = 0; r < rlen / RANGE_LEN; r++) {
		atomic_store_explicit(&s->lba[r], get_be64(d + PT_HDR + r * RANGE_LEN),
				      memory_order_relaxed);
		atomic_store_explicit(&s->nblk[r], get_be32(d + PT_HDR + r * RANGE_LEN + 8),
				      memory_order_relaxed);
	}
	atomic_store_explicit(&s->nranges, rlen / RANGE_LEN, memory_order_relaxed);
	atomic_store_explicit(&s->timeout_s, timeout ? timeout : ROD_DEF_TIMEOUT_S,
			      memory_order_relaxed);
	atomic_store_explicit(&s->last_use_ms, now_ms(), memory_order_relaxed);
	atomic_store_explicit(&s->type, type, memory_order_relaxed);
	atomic_store_explicit(&s->blocks, total, memory_order_relaxed);
	{
		uint64_t n[2];

		if (getrandom(n, sizeof(n), 0) != (ssize_t)sizeof(n)) {
			n[0] = now_ms() * 0x9e3779b97f4a7c15ull ^ (uintptr_t)cmd;
			n[1] = gen * 0xc2b2ae3d27d4eb4full ^ (uintptr_t)s;
		}
		atomic_store_explicit(&s->nonce[0], n[0], memory_order_relaxed);
		atomic_store_explicit(&s->nonce[1], n[1], memory_order_relaxed);
	}
	/* Counted before it is published: a write that sees it VALID has seen rod_live too. */
	atomic_fetch_add_explicit(&lu->rod_live, 1, memory_order_acq_rel);
	atomic_store_explicit(&s->state, ST(gen, 0, ROD_VALID), memory_order_release);
	cs = log_slot(scsi_priv(cmd)->itl, list_id);
	if (cs) {
		cs->sa = 0x10;
		cs->status = COPY_DONE_GOOD;
		cs->blocks = total;
		cs->rod_slot = (uint8_t)slot;
		cs->rod_gen = gen;
	}
	return SCSI_DONE;
}

/* ---- WRITE USING TOKEN ---- */

static void wut_next(struct scsi_cmd *cmd);

static void wut_finish(struct scsi_cmd *cmd)
{
	struct scsi_slow *s = scsi_priv(cmd)->slow;
	struct scsi_copy_status *cs = log_find(scsi_priv(cmd)->itl, get_be32(cmd->cdb + 6));

	if (cs && cs->sa == 0x11 && cs->status == 0) {
		log_result(cmd, cs);
		cs->blocks = s->total;
	}
	s->copying = false;
	scsi_cmd_finish(cmd);
}

static const uint8_t *dst_range(struct scsi_cmd *cmd, unsigned i)
{
	return cmd->buf + scsi_priv(cmd)->slow->dst_list + i * RANGE_LEN;
}

static void wut_write_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_slow *s = scsi_priv(cmd)->slow;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, true);
		wut_finish(cmd);
		return;
	}
	s->src_off += s->chunk;
	s->dst_off += s->chunk;
	s->total += s->chunk;
	s->rod_left -= s->chunk;
	wut_next(cmd);
}

/* Is the token still valid? Refreshes its inactivity time; fails the command if not. */
static bool token_alive(struct scsi_cmd *cmd)
{
	struct scsi_slow *s = scsi_priv(cmd)->slow;
	struct scsi_rod_table *t = atomic_load_explicit(&s->src->rod, memory_order_acquire);
	struct scsi_rod_slot *slot = &t->slot[s->rod_slot];
	uint64_t v = atomic_load_explicit(&slot->state, memory_order_acquire);

	if (ST_STATE(v) == ROD_VALID && ST_GEN(v) == s->rod_gen) {
		atomic_store_explicit(&slot->last_use_ms, now_ms(), memory_order_relaxed);
		return true;
	}
	/* Changed while the copy ran: what is written so far stays, the rest is not copied. */
	scsi_fail(cmd, SCSI_SENSE_COPY_ABORTED, 0x23,
		  ST_GEN(v) == s->rod_gen && ST_ASCQ(v) ? ST_ASCQ(v) : TOK_DELETED);
	return false;
}

static void wut_read_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_slow *s = p->slow;
	struct scsi_lu *dst = p->lu;
	uint8_t flags = atomic_load(&dst->wce) ? 0 : BS_IO_FUA;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, false);
		wut_finish(cmd);
		return;
	}
	if (!token_alive(cmd)) {
		wut_finish(cmd);
		return;
	}
	scsi_submit_io(cmd, BS_OP_WRITE,
		       (get_be64(dst_range(cmd, s->dst_i)) + s->dst_off) * dst->block_size,
		       (uint64_t)s->chunk * dst->block_size, s->bounce, flags, wut_write_done);
}

static void wut_next(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_slow *s = p->slow;
	uint32_t bs = p->lu->block_size, max = SCSI_BOUNCE_BYTES / bs;
	uint64_t sl, dl, n;
	bool zero = !s->src;

	if (s->aborted) {
		cmd->status = SCSI_STATUS_TASK_ABORTED;
		wut_finish(cmd);
		return;
	}
	while (s->dst_i < s->ndst && s->dst_off >= get_be32(dst_range(cmd, s->dst_i) + 8)) {
		s->dst_i++;
		s->dst_off = 0;
	}
	while (!zero && s->src_i < s->nsrc && s->src_off >= s->src_n[s->src_i]) {
		s->src_i++;
		s->src_off = 0;
	}
	if (s->dst_i == s->ndst || s->rod_left == 0 || (!zero && s->src_i == s->nsrc)) {
		if (!zero && (cmd->buf[2] & 0x02)) { /* DEL_TKN */
			struct scsi_rod_table *t = atomic_load(&s->src->rod);
			struct scsi_rod_slot *slot = &t->slot[s->rod_slot];
			uint64_t v = atomic_load_explicit(&slot->state, memory_order_acquire);

			if (ST_STATE(v) == ROD_VALID && ST_GEN(v) == s->rod_gen)
				slot_kill(s->src, slot, v, TOK_DELETED);
		}
		wut_finish(cmd);
		return;
	}
	dl = get_be32(dst_range(cmd, s->dst_i) + 8) - s->dst_off;
	if (zero) {
		max = (uint32_t)(ROD_OPT_BYTES / bs);
		n = dl < max ? dl : max;
		n = n < s->rod_left ? n : s->rod_left;
		s->chunk = (uint32_t)n;
		scsi_submit_io(cmd, BS_OP_WRITE_ZEROES,
			       (get_be64(dst_range(cmd, s->dst_i)) + s->dst_off) * bs, n * bs, NULL,
			       atomic_load(&p->lu->wce) ? 0 : BS_IO_FUA, wut_write_done);
		return;
	}
	sl = s->src_n[s->src_i] - s->src_off;
	n = sl < dl ? sl : dl;
	n = n < max ? n : max;
	n = n < s->rod_left ? n : s->rod_left;
	s->chunk = (uint32_t)n;
	scsi_submit_io_lu(cmd, s->src, BS_OP_READ, (s->src_lba[s->src_i] + s->src_off) * bs, n * bs,
			  s->bounce, 0, wut_read_done);
}

/* Within one LU, a destination range over the token's own source would cancel the token
 * half-way (the copy would read what it wrote): refused before anything is written. */
static bool overlaps_source(const struct scsi_slow *s, const uint8_t *d, uint32_t rlen)
{
	for (uint32_t r = 0; r < rlen; r += RANGE_LEN) {
		uint64_t lba = get_be64(d + r), n = get_be32(d + r + 8);

		for (unsigned i = 0; i < s->nsrc; i++)
			if (n && s->src_n[i] && lba < s->src_lba[i] + s->src_n[i] &&
			    s->src_lba[i] < lba + n)
				return true;
	}
	return false;
}

static int write_using_token(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint32_t list_id = get_be32(cmd->cdb + 6), rlen;
	struct scsi_copy_status *cs;
	struct scsi_lu *src = NULL;
	struct scsi_slow *s;
	const uint8_t *d, *tok;
	uint64_t total, offset, rod_blocks, gen = 0;
	unsigned slot = 0;
	bool done;

	d = param_list(cmd, WUT_HDR + RANGE_LEN, &done);
	if (!d)
		return SCSI_DONE;
	if (list_busy(cmd, list_id))
		return SCSI_DONE;
	total = ranges_check(cmd, lu, d, WUT_HDR, 534, &rlen);
	if (total == UINT64_MAX)
		return SCSI_DONE;
	tok = d + 16;
	offset = get_be64(d + 8);
	s = scsi_slow_get(cmd);
	if (!s || !scsi_slow_bounce(cmd)) {
		scsi_fail_errno(cmd, -ENOMEM, true);
		return SCSI_DONE;
	}
	if (get_be32(tok) == ROD_TYPE_ZERO) {
		if (get_be16(tok + 6) != ROD_LEN_FIELD) {
			token_fail(cmd, TOK_BAD_LENGTH);
			return SCSI_DONE;
		}
		rod_blocks = UINT64_MAX; /* zeros without end */
	} else {
		struct scsi_rod_slot *rs;
		uint64_t v;

		if (!token_resolve(cmd, lu, tok, &src, &slot, &gen))
			return SCSI_DONE;
		s->src = src; /* the slow context holds the reference from here */
		if (src->block_size != lu->block_size) {
			scsi_fail_param(cmd, 16 + 16 + 29, -1); /* the creator's block length */
			return SCSI_DONE;
		}
		rs = &atomic_load(&src->rod)->slot[slot];
		s->nsrc = (uint8_t)atomic_load_explicit(&rs->nranges, memory_order_relaxed);
		if (s->nsrc > SCSI_ROD_RANGES)
			s->nsrc = SCSI_ROD_RANGES;
		for (unsigned i = 0; i < s->nsrc; i++) {
			s->src_lba[i] = atomic_load_explicit(&rs->lba[i], memory_order_relaxed);
			s->src_n[i] = atomic_load_explicit(&rs->nblk[i], memory_order_relaxed);
		}
		rod_blocks = atomic_load_explicit(&rs->blocks, memory_order_relaxed);
		v = atomic_load_explicit(&rs->state, memory_order_acquire);
		if (ST_STATE(v) != ROD_VALID || ST_GEN(v) != gen) {
			token_fail(cmd, ST_GEN(v) == gen && ST_ASCQ(v) ? ST_ASCQ(v) : TOK_DELETED);
			return SCSI_DONE; /* changed while its ranges were read */
		}
		if (offset >= rod_blocks) {
			scsi_fail_param(cmd, 8, -1); /* OFFSET INTO ROD past its end */
			return SCSI_DONE;
		}
		if (src == lu && overlaps_source(s, d + WUT_HDR, rlen)) {
			scsi_fail_param(cmd, WUT_HDR, -1);
			return SCSI_DONE;
		}
		if (atomic_load_explicit(&src->mstate, memory_order_acquire) != SCSI_MS_LOADED) {
			scsi_fail(cmd, SCSI_SENSE_COPY_ABORTED, 0x0d, 0x02);
			return SCSI_DONE; /* COPY TARGET DEVICE NOT REACHABLE */
		}
		s->rod_slot = (uint16_t)slot;
		s->rod_gen = gen;
		/* skip OFFSET INTO ROD blocks of the source ranges */
		s->rod_left = rod_blocks - offset;
		for (s->src_i = 0; s->src_i < s->nsrc && offset >= s->src_n[s->src_i]; s->src_i++)
			offset -= s->src_n[s->src_i];
		s->src_off = offset;
	}
	if (rod_blocks == UINT64_MAX)
		s->rod_left = total;
	s->ndst = (uint8_t)(rlen / RANGE_LEN);
	s->dst_list = WUT_HDR;
	s->copying = true;
	cs = log_slot(scsi_priv(cmd)->itl, list_id);
	if (cs)
		cs->sa = 0x11; /* status 0: in progress until wut_finish */
	/* IMMED is accepted, and the copy still ends before the status: RECEIVE ROD TOKEN
	 * INFORMATION then finds it done. */
	wut_next(cmd);
	return SCSI_ASYNC;
}

/* A command that ended at once: its outcome for RECEIVE ROD TOKEN INFORMATION (but for an
 * OPERATION IN PROGRESS, which leaves the running one's). */
static int logged(struct scsi_cmd *cmd, int rc, uint8_t sa)
{
	struct scsi_copy_status *cs;

	if (rc != SCSI_DONE || cmd->status == SCSI_STATUS_GOOD ||
	    (cmd->sense_len >= 14 && cmd->sense[12] == 0x00 && cmd->sense[13] == 0x16))
		return rc;
	cs = log_slot(scsi_priv(cmd)->itl, get_be32(cmd->cdb + 6));
	if (cs) {
		cs->sa = sa;
		log_result(cmd, cs);
	}
	return rc;
}

int scsi_sbc_populate_token(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	return logged(cmd, populate(cmd, lu), 0x10);
}

int scsi_sbc_write_using_token(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	return logged(cmd, write_using_token(cmd, lu), 0x11);
}

bool scsi_copy_abort(struct scsi_cmd *cmd)
{
	struct scsi_slow *s = scsi_priv(cmd)->slow;

	if (!s || !s->copying)
		return false;
	s->aborted = true;
	return true;
}

/* ---- RECEIVE ROD TOKEN INFORMATION ---- */

int scsi_spc_rod_token_info(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const struct scsi_copy_status *cs = log_find(scsi_priv(cmd)->itl, get_be32(cmd->cdb + 2));
	struct scsi_rod_table *t = atomic_load_explicit(&lu->rod, memory_order_acquire);
	uint8_t d[32 + 18 + 6 + ROD_TOKEN_LEN] = {0};
	uint32_t n = 32;

	if (!cs) {
		scsi_fail_cdb(cmd, 2, -1); /* no operation with that LIST IDENTIFIER */
		return SCSI_DONE;
	}
	d[4] = cs->sa;
	d[5] = cs->status ? cs->status : 0x10; /* 10h: in progress, in the foreground */
	if (cs->status == COPY_DONE_ERROR) {
		d[12] = SCSI_STATUS_CHECK_CONDITION;
		d[13] = d[14] = 18;
		d[32] = 0x70;
		d[34] = cs->key;
		d[39] = 10;
		d[44] = cs->asc;
		d[45] = cs->ascq;
		n += 18;
	}
	d[15] = 0xf1; /* TRANSFER COUNT in logical blocks */
	put_be64(d + 16, cs->blocks);
	put_be16(d + 24, cs->status == COPY_DONE_GOOD); /* SEGMENTS PROCESSED */
	if (cs->sa == 0x10 && cs->status == COPY_DONE_GOOD && t &&
	    ST_GEN(atomic_load_explicit(&t->slot[cs->rod_slot].state, memory_order_acquire)) ==
		cs->rod_gen) {
		put_be32(d + n, 2 + ROD_TOKEN_LEN); /* ROD TOKEN DESCRIPTORS LENGTH */
		token_build(lu, t, cs->rod_slot, cs->rod_gen, d + n + 6);
		n += 6 + ROD_TOKEN_LEN;
	} else {
		n += 4; /* no token */
	}
	put_be32(d, n - 4);
	scsi_put_data(cmd, d, n, get_be32(cmd->cdb + 10));
	return SCSI_DONE;
}

/* ---- the third-party copy VPD page ---- */

static uint32_t desc(uint8_t *d, uint16_t type, uint16_t len)
{
	put_be16(d, type);
	put_be16(d + 2, len);
	return 4u + len;
}

uint32_t scsi_rod_vpd(const struct scsi_lu *lu, uint8_t *d)
{
	static const uint8_t cmds[] = {0x83, 3, 0x00, 0x10, 0x11, 0x84, 3, 0x00, 0x03, 0x07};
	uint32_t n = 4, bs = lu->block_size;
	uint8_t *b;

	d[1] = 0x8f;
	/* Block Device ROD Token Limits (SBC-3) */
	b = d + n;
	n += desc(b, 0x0000, 32);
	put_be16(b + 10, SCSI_ROD_RANGES);
	put_be32(b + 12, ROD_MAX_TIMEOUT_S);
	put_be32(b + 16, ROD_DEF_TIMEOUT_S);
	put_be64(b + 20, ROD_MAX_BYTES / bs);
	put_be64(b + 28, ROD_OPT_BYTES / bs);
	/* Supported Commands */
	b = d + n;
	b[4] = sizeof(cmds);
	memcpy(b + 5, cmds, sizeof(cmds));
	n += desc(b, 0x0001, (uint16_t)((1 + sizeof(cmds) + 3) & ~3u));
	/* ROD Token Features: no remote tokens; the block ROD device type descriptor */
	b = d + n;
	n += desc(b, 0x0106, 44 + 48);
	put_be32(b + 16, 0); /* MINIMUM TOKEN LIFETIME */
	put_be32(b + 20, ROD_MAX_TIMEOUT_S);
	put_be32(b + 24, ROD_MAX_TIMEOUT_S);
	put_be16(b + 46, 48);
	put_be16(b + 48 + 2, 44);
	put_be16(b + 48 + 6, 1); /* OPTIMAL BLOCK ROD LENGTH GRANULARITY */
	put_be64(b + 48 + 8, ROD_MAX_BYTES);
	put_be64(b + 48 + 16, ROD_OPT_BYTES);
	put_be64(b + 48 + 24, ROD_OPT_BYTES);
	put_be64(b + 48 + 32, ROD_OPT_BYTES);
	/* Supported ROD Types: change vulnerable in and out, the zero token in */
	b = d + n;
	n += desc(b, 0x0108, 4 + 2 * 64);
	put_be16(b + 6, 2 * 64);
	put_be32(b + 8, ROD_TYPE_PIT_VULN);
	b[8 + 4] = 0x02 | 0x01; /* TOKEN IN, TOKEN OUT */
	put_be32(b + 8 + 64, ROD_TYPE_ZERO);
	b[8 + 64 + 4] = 0x02;
	/* General Copy Operations */
	b = d + n;
	n += desc(b, 0x8001, 32);
	put_be32(b + 4, 64);  /* TOTAL CONCURRENT COPIES */
	put_be32(b + 8, 64);  /* MAXIMUM IDENTIFIED CONCURRENT COPIES */
	put_be32(b + 12, (uint32_t)ROD_MAX_BYTES); /* MAXIMUM SEGMENT LENGTH */
	b[16] = (uint8_t)__builtin_ctz(bs); /* DATA SEGMENT GRANULARITY (log2) */
	b[17] = 0;
	put_be16(d + 2, (uint16_t)(n - 4));
	return n;
}
