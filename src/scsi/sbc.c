/* SBC-3 block commands on the data path: READ CAPACITY (10)/(16), READ and WRITE (6/10/12/16),
 * WRITE AND VERIFY, VERIFY, SYNCHRONIZE CACHE, PRE-FETCH, GET LBA STATUS and READ DEFECT DATA.
 * Reads and writes go straight to the backend through the command's embedded bs_io, without locks.
 */
#include <errno.h>
#include <string.h>

#include "scsi/scsi_int.h"

/* ---- shared helpers ---- */

bool scsi_lba_ok(struct scsi_cmd *cmd, struct scsi_lu *lu, uint64_t lba, uint64_t nblocks)
{
	/* acquire: a grow publishes the backend's size before the capacity (scsi_lu_grow) */
	uint64_t cap = atomic_load_explicit(&lu->nblocks, memory_order_acquire);

	if (lba > cap || nblocks > cap - lba) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x21, 0x00); /* LBA OUT OF RANGE */
		return false;
	}
	return true;
}

static void guarded_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_priv *p = scsi_priv(cmd);

	scsi_guard_leave(p->io_guard, cmd);
	p->user_cb(io);
}

static void guarded_resume(struct scsi_cmd *cmd)
{
	bs_submit(cmd->thread ? cmd->thread->bs : NULL, &scsi_priv(cmd)->io);
}

void scsi_submit_io_lu(struct scsi_cmd *cmd, struct scsi_lu *lu, uint8_t op, uint64_t off,
		       uint64_t len, uint8_t *buf, uint8_t flags, bs_io_cb cb)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct bs_io *io = &p->io;
	uint32_t bs = lu->block_size;
	int rc;

	/* A write cancels the ROD tokens of what it changes (rod.c); one load without tokens. */
	if (op != BS_OP_READ && op != BS_OP_FLUSH && op != BS_OP_LBA_STATUS &&
	    atomic_load_explicit(&lu->rod_live, memory_order_acquire))
		scsi_rod_written(lu, off / bs, (len + bs - 1) / bs);
	io->dev = lu->dev;
	io->op = op;
	io->offset = off;
	io->len = len;
	io->buf = buf;
	io->flags = flags;
	io->pattern_len = bs;
	io->result = 0;
	io->cb = cb;
	if (op == BS_OP_FLUSH || len == 0 || (p->excl && lu == p->lu)) {
		bs_submit(cmd->thread ? cmd->thread->bs : NULL, io);
		return;
	}
	p->user_cb = cb;
	p->io_guard = lu->guard;
	io->cb = guarded_done;
	rc = scsi_guard_enter(lu->guard, cmd, off / bs, (len + bs - 1) / bs, false, guarded_resume);
	if (rc > 0) {
		bs_submit(cmd->thread ? cmd->thread->bs : NULL, io);
	} else if (rc < 0) {
		io->result = rc;
		cb(io);
	}
}

void scsi_submit_io(struct scsi_cmd *cmd, uint8_t op, uint64_t off, uint64_t len, uint8_t *buf,
		    uint8_t flags, bs_io_cb cb)
{
	scsi_submit_io_lu(cmd, scsi_priv(cmd)->lu, op, off, len, buf, flags, cb);
}

static void sync_cb(struct bs_io *io)
{
	(void)io;
}

int scsi_sync_io(struct scsi_lu *lu, uint8_t op, uint64_t off, uint64_t len, uint8_t *buf,
		 uint8_t flags)
{
	struct bs_io io = {
	    .dev = lu->dev,
	    .op = op,
	    .offset = off,
	    .len = len,
	    .buf = buf,
	    .flags = flags,
	    .pattern_len = lu->block_size,
	    .result = -EINPROGRESS,
	    .cb = sync_cb,
	};

	if (op != BS_OP_READ && op != BS_OP_FLUSH && op != BS_OP_LBA_STATUS &&
	    atomic_load_explicit(&lu->rod_live, memory_order_acquire))
		scsi_rod_written(lu, off / lu->block_size,
				 (len + lu->block_size - 1) / lu->block_size);
	/* Without a thread every backend completes before returning. */
	bs_submit(NULL, &io);
	return io.result;
}

void scsi_io_done_write(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);

	if (io->result < 0)
		scsi_fail_errno(cmd, io->result, true);
	scsi_cmd_finish(cmd);
}

void scsi_io_done_simple(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);

	if (io->result < 0)
		scsi_fail_errno(cmd, io->result, io->op != BS_OP_READ);
	scsi_cmd_finish(cmd);
}

static void read_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);

	if (io->result < 0)
		scsi_fail_errno(cmd, io->result, false);
	else
		cmd->data_in_len = (uint32_t)io->len;
	scsi_cmd_finish(cmd);
}

/* LBA, transfer length and the offset of the length field, by CDB group. */
struct rw_args {
	uint64_t lba;
	uint32_t n;
	uint8_t len_off;
};

static void rw_decode(const uint8_t *cdb, struct rw_args *a)
{
	switch (cdb[0] >> 5) {
	case 0: /* 6-byte: 21-bit LBA, length 0 means 256 */
		a->lba = get_be24(cdb + 1) & 0x1fffff;
		a->n = cdb[4] ? cdb[4] : 256;
		a->len_off = 4;
		break;
	case 1:
	case 2: /* 10-byte */
		a->lba = get_be32(cdb + 2);
		a->n = get_be16(cdb + 7);
		a->len_off = 7;
		break;
	case 5: /* 12-byte */
		a->lba = get_be32(cdb + 2);
		a->n = get_be32(cdb + 6);
		a->len_off = 6;
		break;
	default: /* 16-byte */
		a->lba = get_be64(cdb + 2);
		a->n = get_be32(cdb + 10);
		a->len_off = 10;
		break;
	}
}

static uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Range and maximum transfer length checks common to the data commands. */
static bool rw_check(struct scsi_cmd *cmd, struct scsi_lu *lu, const struct rw_args *a)
{
	if (!scsi_lba_ok(cmd, lu, a->lba, a->n))
		return false;
	if ((uint64_t)a->n * lu->block_size > SCSI_MAX_XFER_BYTES) {
		scsi_fail_cdb(cmd, a->len_off, -1);
		return false;
	}
	return true;
}

/* ---- READ CAPACITY ---- */

int scsi_sbc_read_capacity10(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[8];
	uint64_t last = lu->nblocks - 1;

	if (!(cmd->cdb[8] & 0x01) && get_be32(cmd->cdb + 2)) { /* LBA without PMI */
		scsi_fail_cdb(cmd, 2, -1);
		return SCSI_DONE;
	}
	put_be32(d, last > 0xffffffffULL ? 0xffffffffu : (uint32_t)last);
	put_be32(d + 4, lu->block_size);
	scsi_put_data(cmd, d, 8, 8);
	return SCSI_DONE;
}

int scsi_sbc_read_capacity16(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[32] = {0};

	put_be64(d, lu->nblocks - 1);
	put_be32(d + 8, lu->block_size);
	d[13] = (uint8_t)__builtin_ctz(lu->pblocks); /* LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT */
	d[14] = (lu->lbpme ? 0x80 : 0) | (lu->lbprz ? 0x40 : 0);
	scsi_put_data(cmd, d, 32, get_be32(cmd->cdb + 10));
	return SCSI_DONE;
}

/* ---- READ / WRITE / WRITE AND VERIFY ---- */

int scsi_sbc_read(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct rw_args a;
	uint64_t len;

	rw_decode(cmd->cdb, &a);
	cmd->xfer_wanted = clamp32((uint64_t)a.n * lu->block_size);
	if (!rw_check(cmd, lu, &a))
		return SCSI_DONE;
	len = cmd->xfer_wanted;
	if (len > cmd->data_in_max)
		len = cmd->data_in_max;
	if (len > cmd->buf_len)
		len = cmd->buf_len;
	if (!len)
		return SCSI_DONE;
	if (cmd->data_in_map_ok && lu->dev->ops->map) {
		const uint8_t *at = lu->dev->ops->map(lu->dev, a.lba * lu->block_size, len);

		if (at) { /* no copy: the transport sends straight from the LU */
			cmd->data_in = at;
			cmd->data_in_lu = lu;
			cmd->data_in_len = (uint32_t)len;
			return SCSI_DONE;
		}
	}
	scsi_submit_io(cmd, BS_OP_READ, a.lba * lu->block_size, len, cmd->buf, 0, read_done);
	return SCSI_ASYNC;
}

int scsi_data_in_pin(const struct scsi_cmd *cmd, const uint8_t *at, uint32_t len)
{
	const struct scsi_lu *lu = cmd->data_in_lu;

	if (!lu || !lu->dev || !lu->dev->ops->pin)
		return -ENOTSUP;
	return lu->dev->ops->pin(lu->dev, at, len);
}

void scsi_data_in_unpin(const struct scsi_cmd *cmd, const uint8_t *at, uint32_t len)
{
	const struct scsi_lu *lu = cmd->data_in_lu;

	lu->dev->ops->unpin(lu->dev, at, len);
}

bool scsi_cdb_is_read(const uint8_t *cdb, uint16_t cdb_len)
{
	if (cdb_len < 6)
		return false;
	switch (cdb[0]) {
	case 0x08: /* READ (6) */
	case 0x28: /* READ (10) */
	case 0xa8: /* READ (12) */
	case 0x88: /* READ (16) */
		return true;
	default:
		return false;
	}
}

int scsi_sbc_write(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	bool verify = (cdb[0] & 0x1f) == 0x0e; /* 0x2E, 0xAE, 0x8E */
	struct rw_args a;
	uint64_t len;
	uint8_t flags = 0;

	rw_decode(cdb, &a);
	len = (uint64_t)a.n * lu->block_size;
	cmd->xfer_wanted = clamp32(len);
	if (verify && ((cdb[1] >> 1) & 3) > 1) { /* BYTCHK 10b/11b reserved here */
		scsi_fail_cdb(cmd, 1, 2);
		return SCSI_DONE;
	}
	if (!rw_check(cmd, lu, &a))
		return SCSI_DONE;
	if (!len)
		return SCSI_DONE;
	if (cmd->data_out_len < len || cmd->buf_len < len) {
		/* The initiator sent less than the CDB asks for (iSCSI EDTL below the transfer
		 * length: an overflow the transport reports with the O flag). Write the whole
		 * blocks that arrived and return GOOD, as libiscsi's iSCSIResiduals tests require;
		 * the blocks past them stay untouched. */
		uint32_t have = cmd->data_out_len < cmd->buf_len ? cmd->data_out_len : cmd->buf_len;
		len = (uint64_t)(have / lu->block_size) * lu->block_size;
		if (!len)
			return SCSI_DONE;
	}
	/* FUA, write-through (WCE = 0) and WRITE AND VERIFY all make the data durable before
	 * status; the data just written is what a verify would read back. */
	if ((cdb[0] >> 5) != 0 && (cdb[1] & 0x08))
		flags |= BS_IO_FUA;
	if (verify || !atomic_load_explicit(&lu->wce, memory_order_relaxed))
		flags |= BS_IO_FUA;
	scsi_submit_io(cmd, BS_OP_WRITE, a.lba * lu->block_size, len, cmd->buf, flags,
		       scsi_io_done_write);
	return SCSI_ASYNC;
}

/* ---- VERIFY ---- */

/* Compare the medium with data (BYTCHK 1: data covers the range; BYTCHK 3: one block compared
 * with every block): the range is read in chunks of SCSI_BOUNCE_BYTES into the command's bounce
 * buffer through the thread's I/O ring, each chunk compared when it arrives. p->stage holds
 * BYTCHK, p->pos the blocks compared so far. */
static void verify_step(struct scsi_cmd *cmd);

static void verify_read_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t bs = p->lu->block_size;
	const uint8_t *medium = p->slow->bounce;
	bool one_block = p->stage == 3;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, false);
		scsi_cmd_finish(cmd);
		return;
	}
	for (uint64_t i = 0; i < io->len; i++) {
		uint64_t at = (uint64_t)p->pos * bs + i, doff = one_block ? i % bs : at;

		if (medium[i] != cmd->buf[doff]) {
			scsi_fail_info(cmd, SCSI_SENSE_MISCOMPARE, 0x1d, 0x00, at);
			scsi_cmd_finish(cmd);
			return;
		}
	}
	p->pos += (uint32_t)(io->len / bs);
	verify_step(cmd);
}

static void verify_step(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t bs = p->lu->block_size, left = p->nblocks - p->pos;

	if (left == 0) {
		scsi_cmd_finish(cmd);
		return;
	}
	if (left > SCSI_BOUNCE_BYTES / bs)
		left = SCSI_BOUNCE_BYTES / bs;
	scsi_submit_io(cmd, BS_OP_READ, (p->lba + p->pos) * bs, (uint64_t)left * bs,
		       p->slow->bounce, 0, verify_read_done);
}

static int verify_start(struct scsi_cmd *cmd, const struct rw_args *a, unsigned bytchk)
{
	struct scsi_priv *p = scsi_priv(cmd);

	if (!scsi_slow_get(cmd) || !scsi_slow_bounce(cmd)) {
		scsi_fail_errno(cmd, -ENOMEM, false);
		return SCSI_DONE;
	}
	p->lba = a->lba;
	p->nblocks = a->n;
	p->pos = 0;
	p->stage = (uint8_t)bytchk;
	verify_step(cmd);
	return SCSI_ASYNC;
}

int scsi_sbc_verify(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	unsigned bytchk = (cmd->cdb[1] >> 1) & 3;
	struct rw_args a;
	uint64_t need;

	rw_decode(cmd->cdb, &a);
	if (bytchk == 2) {
		scsi_fail_cdb(cmd, 1, 2);
		return SCSI_DONE;
	}
	need = bytchk == 1 ? (uint64_t)a.n * lu->block_size
			   : (bytchk == 3 && a.n ? lu->block_size : 0);
	cmd->xfer_wanted = clamp32(need);
	if (!rw_check(cmd, lu, &a) || !a.n || !bytchk)
		return SCSI_DONE; /* BYTCHK 0: medium verification, nothing can fail here */
	if (cmd->data_out_len < need || cmd->buf_len < need) {
		scsi_fail_cdb(cmd, a.len_off, -1);
		return SCSI_DONE;
	}
	return verify_start(cmd, &a, bytchk);
}

/* ---- SYNCHRONIZE CACHE, PRE-FETCH ---- */

int scsi_sbc_sync_cache(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct rw_args a;

	rw_decode(cmd->cdb, &a);
	if (!scsi_lba_ok(cmd, lu, a.lba, a.n))
		return SCSI_DONE;
	/* The whole file or device is flushed whatever the range (fdatasync). */
	scsi_submit_io(cmd, BS_OP_FLUSH, 0, 0, NULL, 0, scsi_io_done_write);
	return SCSI_ASYNC;
}

int scsi_sbc_prefetch(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct rw_args a;

	rw_decode(cmd->cdb, &a);
	scsi_lba_ok(cmd, lu, a.lba, a.n);
	return SCSI_DONE; /* GOOD: no cache to load, nothing to promise */
}

/* ---- GET LBA STATUS ---- */

#define LBAS_MAX_DESC  32 /* descriptors per reply */
#define LBAS_MAX_PROBE 64 /* backend lba_status calls per command (each is capped) */

struct lbas_walk {
	struct scsi_lu *lu;
	uint64_t pos;	  /* next block to probe */
	uint64_t run;	  /* blocks of the probe in hand */
	bool mapped, have; /* its state; whether a probe is in hand */
	int probes;
};

static int lbas_probe(struct lbas_walk *w)
{
	struct scsi_lu *lu = w->lu;
	uint64_t bytes = 0;
	int rc = 0;

	w->mapped = true;
	if (lu->dev->ops->lba_status)
		rc = lu->dev->ops->lba_status(lu->dev, w->pos * lu->block_size, &bytes, &w->mapped);
	else
		bytes = (lu->nblocks - w->pos) * lu->block_size;
	if (rc < 0)
		return rc;
	w->run = bytes / lu->block_size;
	if (w->run == 0)
		w->run = 1;
	if (w->run > lu->nblocks - w->pos)
		w->run = lu->nblocks - w->pos;
	if (w->run > 0xffffffffULL) /* one descriptor's worth */
		w->run = 0xffffffffULL;
	w->have = true;
	w->probes++;
	return 0;
}

/* One descriptor: consecutive probes with the same state merged, up to 2^32 - 1 blocks. */
static int lbas_extent(struct lbas_walk *w, uint64_t *len, bool *mapped)
{
	int rc = w->have ? 0 : lbas_probe(w);

	*len = 0;
	if (rc < 0)
		return rc;
	*mapped = w->mapped;
	while (w->have && w->mapped == *mapped && *len + w->run <= 0xffffffffULL) {
		*len += w->run;
		w->pos += w->run;
		w->have = false;
		if (w->pos >= w->lu->nblocks || w->probes >= LBAS_MAX_PROBE)
			break;
		if ((rc = lbas_probe(w)) < 0)
			return rc;
	}
	return 0;
}

static uint32_t lbas_max_desc(uint32_t alloc)
{
	uint32_t max = alloc < 24 ? 1 : (alloc - 8) / 16;

	return max > LBAS_MAX_DESC ? LBAS_MAX_DESC : max;
}

/* Would a run of len blocks fit: merged into the last descriptor, or as a new one? */
static bool lbas_fits(const uint8_t *d, uint32_t n, uint32_t max, uint64_t len, bool mapped)
{
	if (n > 8 && !d[n - 4] == mapped && get_be32(d + n - 8) + len <= 0xffffffffULL)
		return true;
	return n < 8 + 16 * max;
}

/* Append one descriptor, or extend the last one when it has the same state and room. */
static void lbas_put(uint8_t *d, uint32_t *n, uint64_t start, uint64_t len, bool mapped)
{
	uint8_t *last = *n > 8 ? d + *n - 16 : NULL;

	if (last && !last[12] == mapped && get_be32(last + 8) + len <= 0xffffffffULL) {
		put_be32(last + 8, get_be32(last + 8) + (uint32_t)len);
		return;
	}
	put_be64(d + *n, start);
	put_be32(d + *n + 8, (uint32_t)len);
	d[*n + 12] = mapped ? 0x00 : 0x01; /* mapped / deallocated */
	*n += 16;
}

/* The backend's extents (BS_OP_LBA_STATUS, in the bounce buffer) become the reply. */
static void lbas_async_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_lu *lu = scsi_priv(cmd)->lu;
	const struct bs_extent *e = (const struct bs_extent *)(const void *)io->buf;
	uint32_t alloc = get_be32(cmd->cdb + 10), max = lbas_max_desc(alloc), n = 8;
	uint64_t pos = get_be64(cmd->cdb + 2), nb = lu->nblocks;
	uint8_t d[8 + 16 * LBAS_MAX_DESC] = {0};

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, false);
		scsi_cmd_finish(cmd);
		return;
	}
	for (size_t i = 0; i < io->len / sizeof(*e) && e[i].len && pos < nb; i++) {
		uint64_t run = e[i].len / lu->block_size ? e[i].len / lu->block_size : 1;

		if (run > nb - pos)
			run = nb - pos;
		while (run > 0) {
			uint64_t part = run > 0xffffffffULL ? 0xffffffffULL : run;

			if (!lbas_fits(d, n, max, part, e[i].mapped))
				break;
			lbas_put(d, &n, pos, part, e[i].mapped);
			pos += part;
			run -= part;
		}
		if (run > 0)
			break;
	}
	put_be32(d, n - 4); /* PARAMETER DATA LENGTH */
	scsi_put_data(cmd, d, n, alloc);
	scsi_cmd_finish(cmd);
}

/* A backend whose mapping query waits on the network answers through the I/O ring. */
static int lbas_async(struct scsi_cmd *cmd, struct scsi_lu *lu, uint64_t lba)
{
	struct bs_io *io = &scsi_priv(cmd)->io;

	if (!scsi_slow_get(cmd) || !scsi_slow_bounce(cmd)) {
		scsi_fail_errno(cmd, -ENOMEM, false);
		return SCSI_DONE;
	}
	memset(io, 0, sizeof(*io));
	io->dev = lu->dev;
	io->op = BS_OP_LBA_STATUS;
	io->offset = lba * lu->block_size;
	io->buf = scsi_priv(cmd)->slow->bounce;
	io->len = 2 * LBAS_MAX_DESC * sizeof(struct bs_extent);
	memset(io->buf, 0, io->len);
	io->cb = lbas_async_done;
	bs_submit(cmd->thread ? cmd->thread->bs : NULL, io);
	return SCSI_ASYNC;
}

/* SBC-3 5.7: as many LBA status descriptors, from the starting LBA on, as the allocation
 * length takes (at most LBAS_MAX_DESC, and as far as LBAS_MAX_PROBE backend probes reach). */
int scsi_sbc_get_lba_status(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint64_t lba = get_be64(cmd->cdb + 2);
	uint32_t alloc = get_be32(cmd->cdb + 10), n = 8, max;
	uint8_t d[8 + 16 * LBAS_MAX_DESC] = {0};
	struct lbas_walk w = {.lu = lu, .pos = lba};

	if (lba >= lu->nblocks) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
		return SCSI_DONE;
	}
	if (lu->dev->caps & BS_CAP_LBA_ASYNC)
		return lbas_async(cmd, lu, lba);
	max = lbas_max_desc(alloc);
	while (n < 8 + 16 * max && w.pos < lu->nblocks) {
		uint64_t start = w.pos, len;
		bool mapped;
		int rc = lbas_extent(&w, &len, &mapped);

		if (rc < 0) {
			scsi_fail_errno(cmd, rc, false);
			return SCSI_DONE;
		}
		put_be64(d + n, start);
		put_be32(d + n + 8, (uint32_t)len);
		d[n + 12] = mapped ? 0x00 : 0x01; /* mapped / deallocated */
		n += 16;
		if (w.probes >= LBAS_MAX_PROBE && !w.have)
			break;
	}
	put_be32(d, n - 4); /* PARAMETER DATA LENGTH */
	scsi_put_data(cmd, d, n, alloc);
	return SCSI_DONE;
}

/* ---- READ DEFECT DATA (10)/(12) ---- */

/* Virtual media have no defects: both lists are returned empty and valid, in the format asked
 * for (SBC-3 5.11, 5.12). */
int scsi_sbc_read_defect_data(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	bool twelve = cdb[0] == 0xb7;
	uint8_t req = twelve ? cdb[1] : cdb[2], d[8] = {0};
	uint32_t alloc = twelve ? get_be32(cdb + 6) : get_be16(cdb + 7);

	(void)lu;
	if ((req & 0x07) == 0x07) { /* reserved DEFECT LIST FORMAT */
		scsi_fail_cdb(cmd, twelve ? 1 : 2, 2);
		return SCSI_DONE;
	}
	/* PLISTV, GLISTV as requested; DEFECT LIST FORMAT echoed; lengths (and, for (12), the
	 * GENERATION CODE) zero. */
	d[1] = req & 0x1f;
	scsi_put_data(cmd, d, twelve ? 8 : 4, alloc);
	return SCSI_DONE;
}
