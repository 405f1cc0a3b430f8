/* LOG SENSE (SPC-4 6.6): the Supported Log Pages page (0x00, and its subpage list 0xFF) and,
 * on a thin LU whose backend tells how full its store is, the Logical Block Provisioning page
 * (SBC-3 6.4.5, 0x0C). No page is saved (DS = 1, TSD = 1; SP = 1 is refused), and LOG SELECT
 * is not there: every PAGE CONTROL value returns the current values (there are no settable
 * threshold or cumulative values apart from them). */
#include <string.h>

#include "scsi/scsi_int.h"

#define LP_SUPPORTED 0x00
#define LP_LBP	     0x0c

/* One LBA mapping resource parameter: the count in threshold sets (2^exponent blocks). */
static uint32_t lbp_param(uint8_t *d, uint16_t code, uint64_t bytes, const struct scsi_lu *lu,
			  uint8_t scope)
{
	uint64_t sets = bytes / lu->block_size >> scsi_thin_exponent(lu);

	put_be16(d, code);
	d[2] = 0x20 | 0x03; /* TSD (not saved), FORMAT AND LINKING 11b (binary list) */
	d[3] = 8;
	put_be32(d + 4, sets > UINT32_MAX ? UINT32_MAX : (uint32_t)sets);
	d[8] = scope;
	return 12;
}

/* Page 0x0C from the last sample of the store (none yet: no parameters). AVAILABLE LBA
 * MAPPING RESOURCE COUNT (0x0001) is the store's free space, which other LUs and files may
 * share (SCOPE 10b, not dedicated to this LU); USED LBA MAPPING RESOURCE COUNT (0x0002) what
 * this LU holds (SCOPE 01b, dedicated to it). */
static uint32_t page_lbp(struct scsi_lu *lu, uint16_t ptr, uint8_t *d)
{
	struct scsi_lu_space sp;
	uint32_t n = 4;

	scsi_lu_space_get(lu, &sp);
	d[0] = 0x80 | LP_LBP; /* DS: parameters are not saved */
	if (sp.total) {
		if (ptr <= 0x0001)
			n += lbp_param(d + n, 0x0001, sp.avail, lu, 0x02);
		if (ptr <= 0x0002 && sp.used != UINT64_MAX)
			n += lbp_param(d + n, 0x0002, sp.used, lu, 0x01);
	}
	put_be16(d + 2, (uint16_t)(n - 4));
	return n;
}

static uint32_t page_supported(const struct scsi_lu *lu, bool subpages, uint8_t *d)
{
	uint32_t n = 4;

	d[0] = LP_SUPPORTED | (subpages ? 0x40 : 0); /* SPF for the subpage list */
	d[1] = subpages ? 0xff : 0x00;
	if (subpages) {
		d[n++] = LP_SUPPORTED, d[n++] = 0x00;
		d[n++] = LP_SUPPORTED, d[n++] = 0xff;
		if (scsi_thin_lbp_log(lu))
			d[n++] = LP_LBP, d[n++] = 0x00;
	} else {
		d[n++] = LP_SUPPORTED;
		if (scsi_thin_lbp_log(lu))
			d[n++] = LP_LBP;
	}
	put_be16(d + 2, (uint16_t)(n - 4));
	return n;
}

int scsi_spc_log_sense(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t page = cdb[2] & 0x3f, sub = cdb[3], d[64];
	uint16_t ptr = get_be16(cdb + 5);
	uint32_t alloc = get_be16(cdb + 7), n;

	memset(d, 0, sizeof(d));
	if (page == LP_SUPPORTED && (sub == 0x00 || sub == 0xff)) {
		if (ptr) { /* the page has no parameter codes */
			scsi_fail_cdb(cmd, 5, -1);
			return SCSI_DONE;
		}
		n = page_supported(lu, sub == 0xff, d);
	} else if (page == LP_LBP && scsi_thin_lbp_log(lu)) {
		if (sub) {
			scsi_fail_cdb(cmd, 3, -1);
			return SCSI_DONE;
		}
		if (ptr > 0x0002) { /* beyond the last parameter code */
			scsi_fail_cdb(cmd, 5, -1);
			return SCSI_DONE;
		}
		n = page_lbp(lu, ptr, d);
	} else {
		scsi_fail_cdb(cmd, 2, 5);
		return SCSI_DONE;
	}
	scsi_put_data(cmd, d, n, alloc);
	return SCSI_DONE;
}
