/* MODE SENSE (6)/(10) and MODE SELECT (6)/(10): the read-write error recovery (0x01),
 * disconnect-reconnect (0x02), caching (0x08), control (0x0A) and informational exceptions
 * (0x1C) pages. Changeable: WCE in the caching page, D_SENSE and SWP (software write protect)
 * in the control page. No saved pages. WP in the header reports readonly or SWP. */
#include <string.h>

#include "scsi/scsi_int.h"

enum { PC_CURRENT = 0, PC_CHANGEABLE = 1, PC_DEFAULT = 2, PC_SAVED = 3 };

struct mode_page {
	uint8_t code;
	uint8_t len; /* PAGE LENGTH (bytes after the 2-byte header) */
};

static const struct mode_page mode_pages[] = {
    {0x01, 0x0a}, {0x02, 0x0e}, {0x08, 0x12}, {0x0a, 0x0a}, {0x1c, 0x0a},
};

#define N_PAGES (sizeof(mode_pages) / sizeof(mode_pages[0]))

static const struct mode_page *find_page(uint8_t code)
{
	for (size_t i = 0; i < N_PAGES; i++)
		if (mode_pages[i].code == code)
			return &mode_pages[i];
	return NULL;
}

/* Build one page for the page control value; returns its total length. */
static uint32_t build_page(const struct scsi_lu *lu, const struct mode_page *mp, int pc, uint8_t *d)
{
	bool wce = pc == PC_CURRENT ? atomic_load(&lu->wce) : false;
	bool dsense = pc == PC_CURRENT ? atomic_load(&lu->d_sense) : false;
	bool swp = pc == PC_CURRENT ? atomic_load(&lu->swp) : false;

	memset(d, 0, 2u + mp->len);
	d[0] = mp->code;
	d[1] = mp->len;
	switch (mp->code) {
	case 0x08: /* caching */
		if (pc == PC_CHANGEABLE)
			d[2] = 0x04;
		else if (wce || (pc == PC_DEFAULT && atomic_load(&lu->wce_default)))
			d[2] = 0x04;
		break;
	case 0x0a: /* control */
		if (pc == PC_CHANGEABLE) {
			d[2] = 0x04; /* D_SENSE */
			d[4] = 0x08; /* SWP */
			break;
		}
		d[2] = 0x02 | (dsense ? 0x04 : 0); /* GLTSD, D_SENSE */
		d[3] = 0x10;			   /* QUEUE ALGORITHM MODIFIER: unrestricted */
		d[4] = swp ? 0x08 : 0;
		d[5] = 0x40; /* TAS: a task aborted by another I_T nexus (PREEMPT AND ABORT) ends
				with TASK ABORTED status, not silently (SAM-5 5.6) */
		put_be16(d + 8, 0xffff);	   /* BUSY TIMEOUT PERIOD: unlimited */
		break;
	case 0x1c: /* informational exceptions: reporting disabled */
		if (pc != PC_CHANGEABLE)
			d[2] = 0x08; /* DEXCPT */
		break;
	default:
		break;
	}
	return 2u + mp->len;
}

int scsi_spc_mode_sense(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	bool ten = cdb[0] == 0x5a, dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
	int pc = cdb[2] >> 6;
	uint8_t page = cdb[2] & 0x3f, subpage = cdb[3];
	uint32_t alloc = ten ? get_be16(cdb + 7) : cdb[4];
	uint32_t hdr = ten ? 8 : 4, bdl = dbd ? 0 : (llbaa ? 16 : 8), n;
	bool wp = atomic_load(&lu->readonly) || atomic_load(&lu->swp);
	uint8_t d[512];

	memset(d, 0, sizeof(d));
	if (pc == PC_SAVED) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x39, 0x00);
		return SCSI_DONE;
	}
	n = hdr + bdl;
	if (page == 0x3f && (subpage == 0x00 || subpage == 0xff)) {
		for (size_t i = 0; i < N_PAGES; i++)
			n += build_page(lu, &mode_pages[i], pc, d + n);
	} else if ((subpage == 0x00 || subpage == 0xff) && find_page(page)) {
		/* 0xFF: all subpages of the page; these pages have only subpage 0. */
		n += build_page(lu, find_page(page), pc, d + n);
	} else {
		scsi_fail_cdb(cmd, subpage ? 3 : 2, subpage ? 7 : 5);
		return SCSI_DONE;
	}
	if (bdl == 8) {
		put_be32(d + hdr,
			 lu->nblocks > 0xffffffffULL ? 0xffffffffu : (uint32_t)lu->nblocks);
		put_be24(d + hdr + 5, lu->block_size);
	} else if (bdl == 16) {
		put_be64(d + hdr, lu->nblocks);
		put_be32(d + hdr + 12, lu->block_size);
	}
	if (ten) {
		put_be16(d, (uint16_t)(n - 2));
		d[3] = (wp ? 0x80 : 0) | 0x10; /* WP, DPOFUA */
		d[4] = bdl == 16 ? 0x01 : 0;		 /* LONGLBA */
		put_be16(d + 6, (uint16_t)bdl);
	} else {
		d[0] = (uint8_t)(n - 1);
		d[2] = (wp ? 0x80 : 0) | 0x10;
		d[3] = (uint8_t)bdl;
	}
	scsi_put_data(cmd, d, n, alloc);
	return SCSI_DONE;
}

/* Check one page of a MODE SELECT list against the current values: only changeable bits may
 * differ. Returns the offset (within the page) of the first bad byte, or 0 if acceptable. */
static uint32_t check_page(const struct scsi_lu *lu, const struct mode_page *mp, const uint8_t *p,
			   int *bad_bit)
{
	uint8_t cur[64], chg[64];

	build_page(lu, mp, PC_CURRENT, cur);
	build_page(lu, mp, PC_CHANGEABLE, chg);
	for (uint32_t i = 2; i < 2u + mp->len; i++) {
		uint8_t diff = (uint8_t)((p[i] ^ cur[i]) & ~chg[i]);

		if (diff) {
			*bad_bit = 7;
			while (!(diff & (1u << *bad_bit)))
				(*bad_bit)--;
			return i;
		}
	}
	return 0;
}

static bool apply_page(struct scsi_lu *lu, const uint8_t *p)
{
	bool changed = false;

	if (p[0] == 0x08) {
		bool v = p[2] & 0x04;

		changed = atomic_exchange(&lu->wce, v) != v;
	} else if (p[0] == 0x0a) {
		bool v = p[2] & 0x04, swp = p[4] & 0x08;

		changed = atomic_exchange(&lu->d_sense, v) != v;
		changed |= atomic_exchange(&lu->swp, swp) != swp;
	}
	return changed;
}

/* Validate the block descriptor and the pages; returns false with sense set. */
static bool select_validate(struct scsi_cmd *cmd, struct scsi_lu *lu, const uint8_t *d,
			    uint32_t len, uint32_t hdr, uint32_t bdl)
{
	uint32_t off;

	if (bdl == 8 || bdl == 16) {
		const uint8_t *b = d + hdr;
		uint64_t nb = bdl == 8 ? get_be32(b) : get_be64(b);
		uint32_t bl = bdl == 8 ? get_be24(b + 5) : get_be32(b + 12);

		if (bl != lu->block_size) {
			scsi_fail_param(cmd, hdr + (bdl == 8 ? 5 : 12), -1);
			return false;
		}
		if (nb != 0 && nb != lu->nblocks &&
		    !(bdl == 8 && nb == 0xffffffffu && lu->nblocks > 0xffffffffULL)) {
			scsi_fail_param(cmd, hdr, -1);
			return false;
		}
	} else if (bdl) {
		scsi_fail_param(cmd, hdr == 4 ? 3 : 6, -1);
		return false;
	}
	for (off = hdr + bdl; off < len;) {
		const struct mode_page *mp = find_page(d[off] & 0x3f);
		uint32_t bad;
		int bit = -1;

		if (len - off < 2 || !mp || (d[off] & 0x40)) {
			scsi_fail_param(cmd, off, -1);
			return false;
		}
		if (d[off + 1] != mp->len || len - off < 2u + mp->len) {
			scsi_fail_param(cmd, off + 1, -1);
			return false;
		}
		bad = check_page(lu, mp, d + off, &bit);
		if (bad) {
			scsi_fail_param(cmd, off + bad, bit);
			return false;
		}
		off += 2u + mp->len;
	}
	return true;
}

int scsi_spc_mode_select(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb, *d = cmd->buf;
	bool ten = cdb[0] == 0x55;
	uint32_t len = ten ? get_be16(cdb + 7) : cdb[4];
	uint32_t hdr = ten ? 8 : 4, bdl, off;
	bool changed = false;

	cmd->xfer_wanted = len;
	if (!(cdb[1] & 0x10) && len) { /* PF = 0: vendor-specific format, not supported */
		scsi_fail_cdb(cmd, 1, 4);
		return SCSI_DONE;
	}
	if (cdb[1] & 0x01) { /* SP: no saved pages */
		scsi_fail_cdb(cmd, 1, 0);
		return SCSI_DONE;
	}
	if (!len)
		return SCSI_DONE;
	if (cmd->data_out_len < len) {
		scsi_fail_cdb(cmd, ten ? 7 : 4, -1);
		return SCSI_DONE;
	}
	if (len < hdr) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
		return SCSI_DONE;
	}
	bdl = ten ? get_be16(d + 6) : d[3];
	if (hdr + bdl > len) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
		return SCSI_DONE;
	}
	if (!select_validate(cmd, lu, d, len, hdr, bdl))
		return SCSI_DONE;
	for (off = hdr + bdl; off < len; off += 2u + d[off + 1])
		changed |= apply_page(lu, d + off);
	if (changed)
		scsi_ua_post_others(lu, cmd->nexus, 0x2a, 0x01); /* MODE PARAMETERS CHANGED */
	return SCSI_DONE;
}
