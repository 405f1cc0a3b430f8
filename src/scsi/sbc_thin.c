/* SBC-3 provisioning commands: UNMAP and WRITE SAME (10)/(16).
 *
 * UNMAP walks its descriptors with one backend discard at a time. WRITE SAME with UNMAP set
 * deallocates when the LU is thin and a deallocated block reads back as zeros (LBPRZ),
 * whatever the data-out block holds (as LIO does, and as libiscsi's tests expect: the blocks
 * then read as zeros), and is refused on a fully provisioned LU (LBPWS 0); otherwise it writes
 * the pattern, or zeros for NDOB. A NUMBER OF LOGICAL BLOCKS of zero
 * means "to the last block" (WSNZ = 0), within MAXIMUM WRITE SAME LENGTH. ANCHOR is refused
 * (ANC_SUP = 0): no backend keeps an anchored state apart from mapped or deallocated. */
#include <string.h>

#include "scsi/scsi_int.h"

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
