/* EXTENDED COPY (LID1) and RECEIVE COPY RESULTS (SPC-4 6.4, 6.20): the copy manager.
 *
 * Supported: identification descriptor CSCDs (type E4h) naming a block LU of this process by
 * its 16-byte NAA designator (VPD page 83h), looked up in the target context's LU index, and
 * block-to-block segment descriptors (type 02h). Segments run one after the other; each moves
 * its blocks in chunks of SCSI_BOUNCE_BYTES through the command's bounce buffer, every chunk
 * taking its range in the source's and then the destination's range guard like any read and
 * write. Errors in the parameter list are found before any data moves (ILLEGAL REQUEST);
 * errors while a segment runs end the command with COPY ABORTED and the failing segment's
 * number in COMMAND-SPECIFIC INFORMATION. The outcome is kept per I_T_L nexus for RECEIVE
 * COPY RESULTS (COPY STATUS) unless LIST ID USAGE is 11b. */
#include <errno.h>
#include <string.h>

#include "scsi/scsi_int.h"

#define XC_HDR		  16
#define XC_MAX_CSCD	  16
#define XC_MAX_SEG	  16
#define XC_CSCD_LEN	  32
#define XC_B2B_LEN	  28
#define XC_MAX_LIST_LEN	  (XC_MAX_CSCD * XC_CSCD_LEN + XC_MAX_SEG * XC_B2B_LEN)
#define XC_CSCD_IDENT	  0xe4
#define XC_SEG_B2B	  0x02
#define XC_USAGE_NO_LIST  3
#define XC_CONCURRENT	  64

/* COPY STATUS values of COPY MANAGER STATUS. */
#define XC_DONE_GOOD  0x01
#define XC_DONE_ERROR 0x02

static void copy_aborted(struct scsi_cmd *cmd, uint8_t asc, uint8_t ascq, uint32_t segment)
{
	struct scsi_sense_info si = {.key = SCSI_SENSE_COPY_ABORTED,
				     .asc = asc,
				     .ascq = ascq,
				     .csi_valid = true,
				     .csi = segment};

	scsi_fail_si(cmd, &si);
}

/* ---- parameter list checks ---- */

/* Length of the CSCD descriptor at d (SPC-4 table 110), 0 for a code that is not one. */
static uint32_t cscd_len(uint8_t type)
{
	if (type >= 0xe0 && type <= 0xe9)
		return 32;
	if (type == 0xea || type == 0xeb)
		return 64;
	return 0;
}

/* Walk the CSCD and segment lists. Returns true when they are well formed and supported;
 * otherwise fails cmd with the ILLEGAL REQUEST sense SPC-4 names. */
static bool check_lists(struct scsi_cmd *cmd, const uint8_t *d, uint32_t clen, uint32_t slen,
			struct scsi_slow *s)
{
	uint32_t off = XC_HDR, end = XC_HDR + clen;

	s->ncscd = 0;
	while (off < end) {
		uint32_t n = cscd_len(d[off]);

		if (n == 0 || off + n > end) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x07);
			return false; /* UNSUPPORTED TARGET DESCRIPTOR TYPE CODE */
		}
		if (++s->ncscd > XC_MAX_CSCD) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x06);
			return false; /* TOO MANY TARGET DESCRIPTORS */
		}
		if (d[off] != XC_CSCD_IDENT) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x07);
			return false;
		}
		/* Byte 1: LU ID TYPE and NUL are obsolete in SPC-4 and ignored. */
		if ((d[off + 1] & 0x1f) != 0) { /* PERIPHERAL DEVICE TYPE: block devices */
			scsi_fail_param(cmd, off + 1, 4);
			return false;
		}
		off += n;
	}
	s->cscd_off = XC_HDR;
	s->seg_off = end;
	s->nseg = 0;
	end += slen;
	while (off < end) {
		uint32_t n;

		if (off + 4 > end) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
			return false; /* PARAMETER LIST LENGTH ERROR */
		}
		if (++s->nseg > XC_MAX_SEG) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x08);
			return false; /* TOO MANY SEGMENT DESCRIPTORS */
		}
		if (d[off] != XC_SEG_B2B) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x09);
			return false; /* UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE */
		}
		n = 4u + get_be16(d + off + 2);
		if (n != XC_B2B_LEN) {
			scsi_fail_param(cmd, off + 2, -1);
			return false;
		}
		if (off + n > end) {
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
			return false;
		}
		off += n;
	}
	return true;
}

/* ---- segment processing ---- */

static void seg_next(struct scsi_cmd *cmd);
static void chunk_next(struct scsi_cmd *cmd);

/* The LU a CSCD names, referenced; NULL with the command failed (COPY ABORTED) otherwise. */
static struct scsi_lu *resolve(struct scsi_cmd *cmd, struct scsi_lu *mgr, const uint8_t *c,
			       uint32_t segment)
{
	struct scsi_lu *lu = NULL;

	/* Code set binary, LU association, designator type NAA, 16 bytes: the designator of
	 * VPD page 83h. */
	if ((c[4] & 0x0f) == 1 && (c[5] & 0x30) == 0 && (c[5] & 0x0f) == 3 && c[7] == 16) {
		if (mgr->index) {
			lu = scsi_lu_index_find(mgr->index, c + 8, 16);
		} else if (memcmp(mgr->naa, c + 8, 16) == 0) {
			scsi_lu_get(mgr);
			lu = mgr;
		}
	}
	if (!lu || !lu->dev ||
	    atomic_load_explicit(&lu->mstate, memory_order_acquire) != SCSI_MS_LOADED) {
		scsi_lu_put(lu); /* none, or no medium, or a sanitize in progress */
		copy_aborted(cmd, 0x0d, 0x02, segment); /* COPY TARGET DEVICE NOT REACHABLE */
		return NULL;
	}
	if (get_be24(c + 29) != lu->block_size) { /* DISK BLOCK LENGTH */
		scsi_lu_put(lu);
		scsi_fail_param(cmd, (uint32_t)(c + 29 - cmd->buf), -1);
		return NULL;
	}
	return lu;
}

static void record(struct scsi_cmd *cmd, uint8_t status)
{
	struct scsi_itl *itl = scsi_priv(cmd)->itl;
	const uint8_t *d = cmd->buf;
	struct scsi_slow *s = scsi_priv(cmd)->slow;
	struct scsi_copy_status *cs;

	if (!itl || ((d[1] >> 3) & 3) == XC_USAGE_NO_LIST)
		return;
	cs = &itl->copy_log[itl->copy_next];
	for (unsigned i = 0; i < SCSI_COPY_LOG; i++)
		if (itl->copy_log[i].valid && !itl->copy_log[i].lid4 &&
		    itl->copy_log[i].list_id == d[0])
			cs = &itl->copy_log[i]; /* a list identifier is reused: replace it */
	if (cs == &itl->copy_log[itl->copy_next])
		itl->copy_next = (uint8_t)((itl->copy_next + 1) % SCSI_COPY_LOG);
	memset(cs, 0, sizeof(*cs));
	cs->valid = true;
	cs->list_id = d[0];
	cs->status = status;
	cs->segments = s->seg;
	cs->blocks = s->total;
}

static void xc_finish(struct scsi_cmd *cmd)
{
	scsi_priv(cmd)->slow->copying = false;
	record(cmd, cmd->status == SCSI_STATUS_GOOD ? XC_DONE_GOOD : XC_DONE_ERROR);
	scsi_cmd_finish(cmd);
}

static const uint8_t *cur_seg(struct scsi_cmd *cmd)
{
	const struct scsi_slow *s = scsi_priv(cmd)->slow;

	return cmd->buf + s->seg_off + (uint32_t)s->seg * XC_B2B_LEN;
}

static void chunk_write_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_slow *s = scsi_priv(cmd)->slow;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, true);
		xc_finish(cmd);
		return;
	}
	s->seg_done += s->chunk;
	s->total += s->chunk;
	chunk_next(cmd);
}

/* The first block of the chunk in flight, relative to the segment's start. */
static uint64_t chunk_start(const struct scsi_slow *s, uint64_t n)
{
	return s->backward ? n - s->seg_done - s->chunk : s->seg_done;
}

static void chunk_read_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = scsi_io_cmd(io);
	struct scsi_slow *s = scsi_priv(cmd)->slow;
	const uint8_t *seg = cur_seg(cmd);
	uint32_t bs = s->dst->block_size;
	uint64_t at = get_be64(seg + 20) + chunk_start(s, get_be16(seg + 10));
	uint8_t flags = atomic_load(&s->dst->wce) ? 0 : BS_IO_FUA;

	if (io->result < 0) {
		scsi_fail_errno(cmd, io->result, false);
		xc_finish(cmd);
		return;
	}
	scsi_submit_io_lu(cmd, s->dst, BS_OP_WRITE, at * bs, (uint64_t)s->chunk * bs, s->bounce,
			  flags, chunk_write_done);
}

static void chunk_next(struct scsi_cmd *cmd)
{
	struct scsi_slow *s = scsi_priv(cmd)->slow;
	const uint8_t *seg = cur_seg(cmd);
	uint64_t n = get_be16(seg + 10), left = n - s->seg_done;
	uint32_t bs = s->src->block_size, max = SCSI_BOUNCE_BYTES / bs;

	if (s->aborted) { /* ABORT TASK, a reset: stop between chunks (scsi_copy_abort) */
		cmd->status = SCSI_STATUS_TASK_ABORTED;
		xc_finish(cmd);
		return;
	}
	if (left == 0) {
		scsi_lu_put(s->src);
		scsi_lu_put(s->dst);
		s->src = s->dst = NULL;
		s->seg++;
		seg_next(cmd);
		return;
	}
	s->chunk = (uint32_t)(left < max ? left : max);
	scsi_submit_io_lu(cmd, s->src, BS_OP_READ,
			  (get_be64(seg + 12) + chunk_start(s, n)) * bs, (uint64_t)s->chunk * bs,
			  s->bounce, 0, chunk_read_done);
}

/* The copy manager's own LU passed the command's reservation checks. Another LU may be
 * reached through a target this nexus is not logged in to, where its registrations cannot be
 * known: any reservation held there by someone else refuses the copy. */
static bool reserved_elsewhere(struct scsi_cmd *cmd, const struct scsi_lu *mgr,
			       struct scsi_lu *lu)
{
	struct scsi_nexus *holder;

	if (lu == mgr)
		return false;
	holder = atomic_load_explicit(&lu->resv_holder, memory_order_acquire);
	return (holder && holder != cmd->nexus) ||
	       atomic_load_explicit(&lu->pr_type, memory_order_acquire) != PR_TYPE_NONE;
}

static bool range_ok(const struct scsi_lu *lu, uint64_t lba, uint64_t n)
{
	return lba <= lu->nblocks && n <= lu->nblocks - lba;
}

/* Start segment s->seg, or end the command after the last one. */
static void seg_next(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_slow *s = p->slow;
	const uint8_t *seg, *d = cmd->buf;
	uint16_t si, di;
	uint64_t n, src_lba, dst_lba;

	if (s->seg == s->nseg) {
		xc_finish(cmd);
		return;
	}
	seg = cur_seg(cmd);
	si = get_be16(seg + 4);
	di = get_be16(seg + 6);
	n = get_be16(seg + 10);
	src_lba = get_be64(seg + 12);
	dst_lba = get_be64(seg + 20);
	if (si >= s->ncscd || di >= s->ncscd) {
		copy_aborted(cmd, 0x0d, 0x02, s->seg); /* no such CSCD: nothing to reach */
		xc_finish(cmd);
		return;
	}
	s->src = resolve(cmd, p->lu, d + s->cscd_off + (uint32_t)si * XC_CSCD_LEN, s->seg);
	if (s->src)
		s->dst = resolve(cmd, p->lu, d + s->cscd_off + (uint32_t)di * XC_CSCD_LEN, s->seg);
	if (!s->src || !s->dst) {
		xc_finish(cmd);
		return;
	}
	bool ro = atomic_load_explicit(&s->dst->readonly, memory_order_relaxed);

	if (ro || atomic_load_explicit(&s->dst->swp, memory_order_relaxed)) {
		scsi_fail(cmd, SCSI_SENSE_DATA_PROTECT, 0x27, ro ? 0x00 : 0x02);
		xc_finish(cmd);
		return;
	}
	if (reserved_elsewhere(cmd, p->lu, s->src) || reserved_elsewhere(cmd, p->lu, s->dst)) {
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
		xc_finish(cmd);
		return;
	}
	if (!range_ok(s->src, src_lba, n) || !range_ok(s->dst, dst_lba, n)) {
		copy_aborted(cmd, 0x00, 0x00, s->seg);
		xc_finish(cmd);
		return;
	}
	/* Copying within one LU to a higher, overlapping range goes from the end. */
	s->backward = s->src == s->dst && dst_lba > src_lba && dst_lba < src_lba + n;
	s->seg_done = 0;
	chunk_next(cmd);
}

int scsi_spc_extended_copy(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint32_t plen = get_be32(cmd->cdb + 10), clen, slen, ilen;
	const uint8_t *d = cmd->buf;
	struct scsi_slow *s;

	cmd->xfer_wanted = plen;
	if (plen == 0)
		return SCSI_DONE; /* no parameter list: nothing to copy */
	if (cmd->data_out_len < plen || cmd->buf_len < plen) {
		scsi_fail_cdb(cmd, 10, -1);
		return SCSI_DONE;
	}
	if (plen < XC_HDR) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
		return SCSI_DONE;
	}
	clen = get_be16(d + 2);
	slen = get_be32(d + 8);
	ilen = get_be32(d + 12);
	if (((d[1] >> 3) & 3) == 1) { /* LIST ID USAGE 01b is reserved */
		scsi_fail_param(cmd, 1, 4);
		return SCSI_DONE;
	}
	if (ilen) { /* MAXIMUM INLINE DATA LENGTH is 0 */
		scsi_fail_param(cmd, 12, -1);
		return SCSI_DONE;
	}
	if ((uint64_t)clen + slen > XC_MAX_LIST_LEN || XC_HDR + (uint64_t)clen + slen > plen) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
		return SCSI_DONE;
	}
	s = scsi_slow_get(cmd);
	if (!s || !scsi_slow_bounce(cmd)) {
		scsi_fail_errno(cmd, -ENOMEM, true);
		return SCSI_DONE;
	}
	if (!check_lists(cmd, d, clen, slen, s))
		return SCSI_DONE;
	s->copying = true;
	seg_next(cmd);
	return SCSI_ASYNC;
}

/* ---- RECEIVE COPY RESULTS ---- */

int scsi_spc_copy_status(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const struct scsi_itl *itl = scsi_priv(cmd)->itl;
	uint8_t d[12] = {0};

	for (unsigned i = 0; itl && i < SCSI_COPY_LOG; i++) {
		const struct scsi_copy_status *cs = &itl->copy_log[i];

		if (!cs->valid || cs->lid4 || cs->list_id != cmd->cdb[2])
			continue;
		uint64_t bytes = cs->blocks * lu->block_size;

		put_be32(d, 8);
		d[4] = cs->status; /* HDD 0: no held data */
		put_be16(d + 5, cs->segments);
		/* TRANSFER COUNT UNITS: bytes while they fit, else kibibytes */
		d[7] = bytes > UINT32_MAX ? 0x01 : 0x00;
		put_be32(d + 8, (uint32_t)(bytes > UINT32_MAX ? bytes >> 10 : bytes));
		scsi_put_data(cmd, d, sizeof(d), get_be32(cmd->cdb + 10));
		return SCSI_DONE;
	}
	scsi_fail_cdb(cmd, 2, -1); /* no copy with that LIST IDENTIFIER */
	return SCSI_DONE;
}

int scsi_spc_copy_op_params(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[46] = {0};

	put_be32(d, sizeof(d) - 4);
	d[4] = 0x01; /* SNLID: LIST ID USAGE 11b is supported */
	put_be16(d + 8, XC_MAX_CSCD);
	put_be16(d + 10, XC_MAX_SEG);
	put_be32(d + 12, XC_MAX_LIST_LEN);
	put_be32(d + 16, 0xffffu * lu->block_size); /* MAXIMUM SEGMENT LENGTH (bytes) */
	put_be32(d + 20, 0);			      /* MAXIMUM INLINE DATA LENGTH */
	put_be32(d + 24, 0);			      /* HELD DATA LIMIT */
	put_be32(d + 28, 0);			      /* MAXIMUM STREAM DEVICE TRANSFER SIZE */
	put_be16(d + 34, XC_CONCURRENT); /* TOTAL CONCURRENT COPIES: not limited below this */
	d[36] = XC_CONCURRENT;		 /* MAXIMUM CONCURRENT COPIES */
	d[37] = (uint8_t)__builtin_ctz(lu->block_size); /* DATA SEGMENT GRANULARITY (log2) */
	d[38] = 0;
	d[39] = 0;
	d[43] = 2; /* IMPLEMENTED DESCRIPTOR LIST LENGTH */
	d[44] = XC_SEG_B2B;
	d[45] = XC_CSCD_IDENT;
	scsi_put_data(cmd, d, sizeof(d), get_be32(cmd->cdb + 10));
	return SCSI_DONE;
}
