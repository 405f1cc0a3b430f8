/* SBC-3 provisioning commands: UNMAP and WRITE SAME (10)/(16).
 *
 * UNMAP walks its descriptors with one backend discard at a time. WRITE SAME with UNMAP set
 * deallocates when the LU is thin and a deallocated block reads back as zeros (LBPRZ),
 * whatever the data-out block holds (as LIO does, and as libiscsi's tests expect: the blocks
 * then read as zeros), and is refused on a fully provisioned LU (LBPWS 0); otherwise it writes
 * the pattern, or zeros for NDOB. A NUMBER OF LOGICAL BLOCKS of zero
 * means "to the last block" (WSNZ = 0), within MAXIMUM WRITE SAME LENGTH. ANCHOR is refused
 * (ANC_SUP = 0): no backend keeps an anchored state apart from mapped or deallocated.
 *
 * The soft threshold (SBC-3 4.7.3.6): a timer of the target samples how full each LU's
 * backing store is (bs_dev_space: a file LU's file system, an RBD image's pool); when a
 * sample of a thin LU finds the store's use at or above the configured percentage, each I_T
 * nexus gets THIN PROVISIONING SOFT THRESHOLD REACHED (6/38/07) once, and a nexus that
 * attaches while it is so gets it too; a sample below the threshold re-arms it. The hard
 * limit needs nothing here: a write the store cannot hold fails with ENOSPC or EDQUOT, which
 * scsi_fail_errno turns into SPACE ALLOCATION FAILED WRITE PROTECT (7/27/07). */
#include <errno.h>

#include <string.h>

#include "scsi/scsi_int.h"
#include "util/log.h"

/* ---- UNMAP ---- */

static void unmap_next(struct scsi_cmd *cmd);

static void unmap_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, true);
		scsi_cmd_finish(cmd);
		return;
	}
	scsi_priv(cmd)->pos++;
	unmap_next(cmd);
}

static void unmap_next(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	uint32_t bs = p->lu->block_size;

	while (p->pos < p->nblocks) {
		const uint8_t *desc = cmd->buf + 8 + 16 * p->pos;
		uint64_t lba = get_be64(desc);
		uint32_t n = get_be32(desc + 8);

		if (n) {
			scsi_submit_io(cmd, BS_OP_DISCARD, lba * bs, (uint64_t)n * bs, NULL, 0,
				       unmap_done);
			return;
		}
		p->pos++;
	}
	scsi_cmd_finish(cmd);
}

int scsi_sbc_unmap(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint32_t len = get_be16(cmd->cdb + 7), bddl, ndesc;
	const uint8_t *d = cmd->buf;
	uint64_t total = 0;

	cmd->xfer_wanted = len;
	if (!lu->lbpme) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
		return SCSI_DONE;
	}
	if (!len)
		return SCSI_DONE;
	if (cmd->data_out_len < len || cmd->buf_len < len) {
		scsi_fail_cdb(cmd, 7, -1);
		return SCSI_DONE;
	}
	if (len < 8) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00); /* PARAMETER LIST LENGTH */
		return SCSI_DONE;
	}
	bddl = get_be16(d + 2);
	if (bddl > len - 8)
		bddl = len - 8;
	ndesc = bddl / 16;
	if (ndesc > SCSI_MAX_UNMAP_DESC) {
		scsi_fail_param(cmd, 2, -1);
		return SCSI_DONE;
	}
	for (uint32_t i = 0; i < ndesc; i++) {
		const uint8_t *desc = d + 8 + 16 * i;
		uint32_t n = get_be32(desc + 8);

		total += n;
		if (n > SCSI_MAX_UNMAP_BLOCKS || total > SCSI_MAX_UNMAP_BLOCKS) {
			scsi_fail_param(cmd, 8 + 16 * i + 8, -1);
			return SCSI_DONE;
		}
		if (!scsi_lba_ok(cmd, lu, get_be64(desc), n))
			return SCSI_DONE;
	}
	scsi_priv(cmd)->nblocks = ndesc;
	scsi_priv(cmd)->pos = 0;
	unmap_next(cmd);
	return SCSI_ASYNC;
}

/* ---- WRITE SAME ---- */

static bool all_zero(const uint8_t *b, uint32_t n)
{
	return b[0] == 0 && memcmp(b, b + 1, n - 1) == 0;
}

int scsi_sbc_write_same(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	bool ws16 = cdb[0] == 0x93;
	bool unmap = cdb[1] & 0x08, ndob = ws16 && (cdb[1] & 0x01);
	uint32_t bs = lu->block_size, len_off = ws16 ? 10 : 7;
	uint64_t lba = ws16 ? get_be64(cdb + 2) : get_be32(cdb + 2), n;
	uint8_t flags = atomic_load(&lu->wce) ? 0 : BS_IO_FUA;
	bool zero;

	n = ws16 ? get_be32(cdb + 10) : get_be16(cdb + 7);
	cmd->xfer_wanted = ndob ? 0 : bs;
	if (unmap && !lu->lbpme) { /* LBPWS = 0: a fully provisioned LU unmaps nothing */
		scsi_fail_cdb(cmd, 1, 3);
		return SCSI_DONE;
	}
	if (!scsi_lba_ok(cmd, lu, lba, n))
		return SCSI_DONE;
	if (n == 0) /* WSNZ = 0: from lba to the last block */
		n = lu->nblocks - lba;
	if (n > SCSI_MAX_WS_BLOCKS) {
		scsi_fail_cdb(cmd, len_off, -1);
		return SCSI_DONE;
	}
	/* One block of data, no more and no less (unless NDOB). */
	if (!ndob && (cmd->data_out_len != bs || cmd->buf_len < bs)) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
		return SCSI_DONE;
	}
	if (n == 0)
		return SCSI_DONE; /* lba is the capacity: nothing to write */
	zero = ndob || all_zero(cmd->buf, bs);
	if (unmap && lu->lbpme && lu->lbprz)
		scsi_submit_io(cmd, BS_OP_DISCARD, lba * bs, n * bs, NULL, 0, scsi_io_done_write);
	else if (zero)
		scsi_submit_io(cmd, BS_OP_WRITE_ZEROES, lba * bs, n * bs, NULL, flags,
			       scsi_io_done_write);
	else
		scsi_submit_io(cmd, BS_OP_WRITE_SAME, lba * bs, n * bs, cmd->buf, flags,
			       scsi_io_done_write);
	return SCSI_ASYNC;
}

/* ---- soft threshold ---- */

bool scsi_thin_lbp_log(const struct scsi_lu *lu)
{
	return lu->lbpme && lu->dev && lu->dev->ops->space;
}

uint8_t scsi_thin_exponent(const struct scsi_lu *lu)
{
	uint8_t e = 0;

	if (!scsi_thin_lbp_log(lu))
		return 0;
	while ((lu->block_size << e) < (1u << 20))
		e++;
	return e;
}

static bool thin_reached(const struct scsi_lu *lu)
{
	uint64_t total = atomic_load(&lu->sp_total), avail = atomic_load(&lu->sp_avail);
	unsigned thr = atomic_load(&lu->thin_thr);

	if (!lu->lbpme || !thr || !total || avail > total)
		return false;
	/* in use / total >= thr / 100, without overflow for any 64-bit size */
	return (double)(total - avail) * 100.0 >= (double)total * thr;
}

static void thin_check_locked(struct scsi_lu *lu)
{
	bool over = thin_reached(lu);
	struct list_head *pos;

	if (over == lu->thin_over)
		return;
	lu->thin_over = over;
	list_for_each(pos, &lu->itls)
	{
		struct scsi_itl *itl = list_entry(pos, struct scsi_itl, lu_link);

		if (!over)
			itl->thin_told = false; /* re-armed */
		else if (!itl->thin_told) {
			itl->thin_told = true;
			scsi_ua_add_locked(itl, 0x38, 0x07);
		}
	}
}

void scsi_thin_itl_attach_locked(struct scsi_lu *lu, struct scsi_itl *itl)
{
	itl->thin_told = lu->thin_over;
	if (lu->thin_over)
		scsi_ua_add_locked(itl, 0x38, 0x07);
}

static void thin_log(struct scsi_lu *lu, bool was)
{
	struct scsi_lu_space sp;

	scsi_lu_space_get(lu, &sp);
	if (sp.over == was)
		return;
	if (sp.over)
		log_warn("scsi",
			 "target %s LUN %u: thin provisioning soft threshold (%u%%) reached: %llu of "
			 "%llu bytes of the backing store in use",
			 lu->target_name, lu->lun, sp.threshold,
			 (unsigned long long)(sp.total - sp.avail), (unsigned long long)sp.total);
	else if (sp.threshold)
		log_info("scsi", "target %s LUN %u: backing store below the soft threshold (%u%%)",
			 lu->target_name, lu->lun, sp.threshold);
	else
		log_info("scsi", "target %s LUN %u: soft threshold off", lu->target_name, lu->lun);
}

void scsi_lu_space_update(struct scsi_lu *lu, uint64_t total, uint64_t avail, uint64_t used)
{
	bool was;

	pthread_mutex_lock(&lu->lock);
	was = lu->thin_over;
	atomic_store(&lu->sp_avail, avail < total ? avail : total);
	atomic_store(&lu->sp_used, used);
	atomic_store(&lu->sp_total, total);
	thin_check_locked(lu);
	pthread_mutex_unlock(&lu->lock);
	thin_log(lu, was);
}

int scsi_lu_space_poll(struct scsi_lu *lu)
{
	struct bs_space sp;
	int r;

	if (atomic_load(&lu->mstate) & SCSI_MS_NOT_READY)
		return -EAGAIN;
	r = bs_dev_space(lu->dev, &sp);
	if (r == 0)
		scsi_lu_space_update(lu, sp.total, sp.avail, sp.used);
	return r;
}

void scsi_lu_space_get(struct scsi_lu *lu, struct scsi_lu_space *out)
{
	pthread_mutex_lock(&lu->lock);
	out->total = atomic_load(&lu->sp_total);
	out->avail = atomic_load(&lu->sp_avail);
	out->used = atomic_load(&lu->sp_used);
	out->threshold = atomic_load(&lu->thin_thr);
	out->over = lu->thin_over;
	pthread_mutex_unlock(&lu->lock);
}

int scsi_lu_set_thin_threshold(struct scsi_lu *lu, unsigned percent)
{
	bool was;

	if (percent > 99)
		return -EINVAL;
	pthread_mutex_lock(&lu->lock);
	was = lu->thin_over;
	atomic_store(&lu->thin_thr, (uint8_t)percent);
	thin_check_locked(lu);
	pthread_mutex_unlock(&lu->lock);
	thin_log(lu, was);
	return 0;
}
