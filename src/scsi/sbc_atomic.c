/* The SBC commands that must not interleave with any other command on their blocks: COMPARE
 * AND WRITE, ORWRITE (16) and WRITE ATOMIC (16). Each takes its block range exclusively in the
 * LU's range guard (guard.h), which waits for every overlapping command on every thread, then
 * runs its steps asynchronously through the thread's I/O ring and gives the range back.
 * Reads of the medium go to the command's bounce buffer in chunks of SCSI_BOUNCE_BYTES. */
#include <errno.h>
#include <string.h>

#include "scsi/scsi_int.h"

/* Atomic writes: multiples of, and aligned to, a physical block; at most what one transfer
 * and the 16-bit TRANSFER LENGTH allow. Shared with the Block Limits VPD page. */
uint32_t scsi_atomic_max_blocks(const struct scsi_lu *lu)
{
	uint32_t max = SCSI_MAX_XFER_BYTES / lu->block_size;

	if (max > 0xffff)
		max = 0xffff;
	return max - max % lu->pblocks;
}

static void excl_granted(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);

	p->excl = true;
	p->slow->next(cmd);
}

/* Take [lba, lba + n) exclusively, then run next(cmd). Returns SCSI_ASYNC, or SCSI_DONE with
 * the status set when there was no memory for it. */
static int excl_start(struct scsi_cmd *cmd, struct scsi_lu *lu, uint64_t lba, uint64_t n,
		      bool bounce, void (*next)(struct scsi_cmd *cmd))
{
	struct scsi_slow *s = scsi_slow_get(cmd);
	int rc;

	if (!s || (bounce && !scsi_slow_bounce(cmd))) {
		scsi_fail_errno(cmd, -ENOMEM, true);
		return SCSI_DONE;
	}
	s->next = next;
	rc = scsi_guard_enter(lu->guard, cmd, lba, n, true, excl_granted);
	if (rc < 0) {
		scsi_fail_errno(cmd, rc, true);
		return SCSI_DONE;
	}
	if (rc > 0)
		excl_granted(cmd);
	return SCSI_ASYNC;
}

static void excl_finish(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);

	p->excl = false;
	scsi_guard_leave(p->lu->guard, cmd);
	scsi_cmd_finish(cmd);
}

static uint8_t write_flags(const struct scsi_cmd *cmd, const struct scsi_lu *lu)
{
	return (cmd->cdb[1] & 0x08) || !atomic_load(&lu->wce) ? BS_IO_FUA : 0;
}

static void excl_write_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);

	if (io->result < 0)
		scsi_fail_errno(cmd, io->result, true);
	excl_finish(cmd);
}

/* ---- COMPARE AND WRITE ---- */

static void caw_read_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t half = p->nblocks * p->lu->block_size;
	const uint8_t *medium = p->slow->bounce;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, false);
		excl_finish(cmd);
		return;
	}
	for (uint32_t i = 0; i < half; i++) {
		if (medium[i] != cmd->buf[i]) {
			/* MISCOMPARE DURING VERIFY OPERATION; INFORMATION = offset of the first
			 * byte that differs. */
			scsi_fail_info(cmd, SCSI_SENSE_MISCOMPARE, 0x1d, 0x00, i);
			excl_finish(cmd);
			return;
		}
	}
	scsi_submit_io(cmd, BS_OP_WRITE, p->lba * p->lu->block_size, half, cmd->buf + half,
		       write_flags(cmd, p->lu), excl_write_done);
}

/* The backend compared and wrote in one operation (a networked one: on its servers, atomic
 * against every client of the image, not only this target's). */
static void caw_backend_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);

	if (io->result == -EILSEQ)
		scsi_fail_info(cmd, SCSI_SENSE_MISCOMPARE, 0x1d, 0x00, (uint32_t)io->mismatch);
	else if (io->result < 0)
		scsi_fail_errno(cmd, io->result, true);
	excl_finish(cmd);
}

static void caw_read(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct bs_dev *dev = p->lu->dev;
	uint64_t off = p->lba * p->lu->block_size, half = (uint64_t)p->nblocks * p->lu->block_size;

	if ((dev->caps & BS_CAP_COMPARE_WRITE) && dev->ops->compare_write_ok(dev, off, half)) {
		scsi_submit_io(cmd, BS_OP_COMPARE_WRITE, off, half, cmd->buf,
			       write_flags(cmd, p->lu), caw_backend_done);
		return;
	}
	scsi_submit_io(cmd, BS_OP_READ, p->lba * p->lu->block_size,
		       (uint64_t)p->nblocks * p->lu->block_size, p->slow->bounce, 0, caw_read_done);
}

int scsi_sbc_compare_and_write(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint64_t lba = get_be64(cmd->cdb + 2);
	uint32_t n = cmd->cdb[13], half = n * lu->block_size;

	cmd->xfer_wanted = 2 * half;
	if (n > SCSI_MAX_CAW_BLOCKS) {
		scsi_fail_cdb(cmd, 13, -1);
		return SCSI_DONE;
	}
	if (!scsi_lba_ok(cmd, lu, lba, n))
		return SCSI_DONE;
	/* The data-out must be exactly the verify and the write data (a NUMBER OF LOGICAL
	 * BLOCKS of zero transfers nothing). */
	if (cmd->data_out_len != 2 * half || cmd->buf_len < 2 * half) {
		scsi_fail_cdb(cmd, 13, -1);
		return SCSI_DONE;
	}
	if (n == 0)
		return SCSI_DONE;
	p->lba = lba;
	p->nblocks = n;
	return excl_start(cmd, lu, lba, n, true, caw_read);
}

/* ---- ORWRITE (16) ---- */

static void orw_step(struct scsi_cmd *cmd);

static void orw_read_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t bs = p->lu->block_size;
	uint8_t *data = cmd->buf + (uint64_t)p->pos * bs;
	const uint8_t *medium = p->slow->bounce;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, false);
		excl_finish(cmd);
		return;
	}
	/* The new data is the old data OR the data-out (ORPROTECT 0: plain OR). */
	for (uint64_t i = 0; i < io->len; i++)
		data[i] |= medium[i];
	p->pos += (uint32_t)(io->len / bs);
	orw_step(cmd);
}

/* Read the next chunk of the old data, or write the result when all of it has been merged. */
static void orw_step(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t bs = p->lu->block_size, chunk = SCSI_BOUNCE_BYTES / bs;
	uint32_t left = p->nblocks - p->pos;

	if (left == 0) {
		scsi_submit_io(cmd, BS_OP_WRITE, p->lba * bs, (uint64_t)p->nblocks * bs, cmd->buf,
			       write_flags(cmd, p->lu), excl_write_done);
		return;
	}
	if (left > chunk)
		left = chunk;
	scsi_submit_io(cmd, BS_OP_READ, (p->lba + p->pos) * bs, (uint64_t)left * bs,
		       p->slow->bounce, 0, orw_read_done);
}

int scsi_sbc_orwrite(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint64_t lba = get_be64(cmd->cdb + 2);
	uint32_t n = get_be32(cmd->cdb + 10), bs = lu->block_size, have;

	cmd->xfer_wanted = (uint64_t)n * bs > UINT32_MAX ? UINT32_MAX : n * bs;
	if (!scsi_lba_ok(cmd, lu, lba, n))
		return SCSI_DONE;
	if ((uint64_t)n * bs > SCSI_MAX_XFER_BYTES) {
		scsi_fail_cdb(cmd, 10, -1);
		return SCSI_DONE;
	}
	/* As for WRITE: with less data-out than the CDB asks for (an iSCSI overflow), the whole
	 * blocks that arrived are merged and the rest stays untouched. */
	have = cmd->data_out_len < cmd->buf_len ? cmd->data_out_len : cmd->buf_len;
	if (have / bs < n)
		n = have / bs;
	if (n == 0)
		return SCSI_DONE;
	p->lba = lba;
	p->nblocks = n;
	p->pos = 0;
	return excl_start(cmd, lu, lba, n, true, orw_step);
}

/* ---- WRITE ATOMIC (16) ---- */

static void watomic_write(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t bs = p->lu->block_size;

	scsi_submit_io(cmd, BS_OP_WRITE, p->lba * bs, (uint64_t)p->nblocks * bs, cmd->buf,
		       write_flags(cmd, p->lu), excl_write_done);
}

int scsi_sbc_write_atomic(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint64_t lba = get_be64(cmd->cdb + 2);
	uint32_t n = get_be16(cmd->cdb + 12), bs = lu->block_size;

	cmd->xfer_wanted = n * bs;
	if (!scsi_lba_ok(cmd, lu, lba, n) || n == 0)
		return SCSI_DONE;
	if (n > scsi_atomic_max_blocks(lu) || n % lu->pblocks) {
		scsi_fail_cdb(cmd, 12, -1); /* TRANSFER LENGTH: too long or not a granule */
		return SCSI_DONE;
	}
	if (lba % lu->pblocks) {
		scsi_fail_cdb(cmd, 2, -1); /* LOGICAL BLOCK ADDRESS: not aligned */
		return SCSI_DONE;
	}
	/* All of it or nothing: an atomic write cannot be cut short by a short data-out. */
	if (cmd->data_out_len < n * bs || cmd->buf_len < n * bs) {
		scsi_fail_cdb(cmd, 12, -1);
		return SCSI_DONE;
	}
	p->lba = lba;
	p->nblocks = n;
	return excl_start(cmd, lu, lba, n, false, watomic_write);
}
