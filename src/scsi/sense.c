/* Sense data (SPC-4 4.5): fixed format (0x70) and descriptor format (0x72), chosen per LU by
 * the Control mode page D_SENSE bit. */
#include <errno.h>
#include <string.h>

#include "scsi/scsi_int.h"

uint8_t scsi_sense_build(uint8_t *out, bool desc, const struct scsi_sense_info *si)
{
	memset(out, 0, SCSI_SENSE_MAX);
	if (!desc) {
		out[0] = 0x70 | (si->info_valid ? 0x80 : 0);
		out[2] = si->key & 0x0f;
		if (si->info_valid)
			put_be32(out + 3, (uint32_t)si->info);
		out[7] = 10;
		if (si->csi_valid)
			put_be32(out + 8, si->csi);
		out[12] = si->asc;
		out[13] = si->ascq;
		if (si->sks_valid)
			memcpy(out + 15, si->sks, 3);
		return 18;
	}
	uint8_t n = 8;

	out[0] = 0x72;
	out[1] = si->key & 0x0f;
	out[2] = si->asc;
	out[3] = si->ascq;
	if (si->info_valid) {
		/* Information descriptor: type 0, additional length 0x0A, VALID. */
		out[n] = 0x00;
		out[n + 1] = 0x0a;
		out[n + 2] = 0x80;
		put_be64(out + n + 4, si->info);
		n += 12;
	}
	if (si->csi_valid) {
		/* Command-specific information descriptor: type 1, additional length 0x0A. */
		out[n] = 0x01;
		out[n + 1] = 0x0a;
		put_be64(out + n + 4, si->csi);
		n += 12;
	}
	if (si->sks_valid) {
		/* Sense key specific descriptor: type 2, additional length 6. */
		out[n] = 0x02;
		out[n + 1] = 0x06;
		memcpy(out + n + 4, si->sks, 3);
		n += 8;
	}
	out[7] = (uint8_t)(n - 8);
	return n;
}

void scsi_fail_si(struct scsi_cmd *cmd, const struct scsi_sense_info *si)
{
	struct scsi_lu *lu = scsi_priv(cmd)->lu;

	cmd->status = SCSI_STATUS_CHECK_CONDITION;
	cmd->sense_len = scsi_sense_build(cmd->sense, lu && scsi_lu_d_sense(lu), si);
}

void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
	struct scsi_sense_info si = {.key = key, .asc = asc, .ascq = ascq};

	cmd->status = SCSI_STATUS_CHECK_CONDITION;
	cmd->sense_len = scsi_sense_build(cmd->sense, false, &si);
}

void scsi_fail(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
	struct scsi_sense_info si = {.key = key, .asc = asc, .ascq = ascq};

	scsi_fail_si(cmd, &si);
}

void scsi_fail_info(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq, uint64_t info)
{
	struct scsi_sense_info si = {
	    .key = key, .asc = asc, .ascq = ascq, .info_valid = true, .info = info};

	scsi_fail_si(cmd, &si);
}

static void fail_field(struct scsi_cmd *cmd, uint8_t asc, bool in_cdb, unsigned byte, int bit)
{
	struct scsi_sense_info si = {
	    .key = SCSI_SENSE_ILLEGAL_REQUEST, .asc = asc, .ascq = 0, .sks_valid = true};

	/* SKSV, C/D (1 = CDB), BPV + bit pointer, then the 16-bit field pointer. */
	si.sks[0] = 0x80 | (in_cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | (bit & 7) : 0);
	si.sks[1] = (uint8_t)(byte >> 8);
	si.sks[2] = (uint8_t)byte;
	scsi_fail_si(cmd, &si);
}

void scsi_fail_cdb(struct scsi_cmd *cmd, unsigned byte, int bit)
{
	fail_field(cmd, 0x24, true, byte, bit);
}

void scsi_fail_param(struct scsi_cmd *cmd, unsigned byte, int bit)
{
	fail_field(cmd, 0x26, false, byte, bit);
}

void scsi_fail_errno(struct scsi_cmd *cmd, int err, bool write)
{
	if (err == -ENOSPC || err == -EDQUOT)
		/* SPACE ALLOCATION FAILED WRITE PROTECT */
		scsi_fail(cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x07);
	else if (err == -ENOMEM)
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x44, 0x00);
	else if (err == BS_ERR_NOT_OWNER)
		/* another gateway owns the device, or this one was fenced: LOGICAL UNIT NOT
		 * ACCESSIBLE, TARGET PORT IN STANDBY STATE (a multipath initiator fails over) */
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x0b);
	else if (err == BS_ERR_NOT_READY)
		/* the backend is not open yet (a networked one started offline): LOGICAL UNIT NOT
		 * READY, MANUAL INTERVENTION REQUIRED, as for the LU's own commands */
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x03);
	else if (err == -ETIMEDOUT)
		/* a networked backend did not answer within its timeout: LOGICAL UNIT
		 * COMMUNICATION TIME-OUT */
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x08, 0x01);
	else if (err == -ENOTCONN || err == -ECONNREFUSED || err == -ECONNRESET ||
		 err == -ESHUTDOWN || err == -EHOSTUNREACH)
		/* the backend's cluster refused us or fenced us (blocklisted: -ESHUTDOWN):
		 * LOGICAL UNIT COMMUNICATION FAILURE */
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x08, 0x00);
	else if (err == -EROFS)
		/* the backend refuses writes (another client holds the image's exclusive
		 * lock): WRITE PROTECTED */
		scsi_fail(cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x00);
	else if (write)
		scsi_fail(cmd, SCSI_SENSE_MEDIUM_ERROR, 0x0c, 0x00); /* WRITE ERROR */
	else
		scsi_fail(cmd, SCSI_SENSE_MEDIUM_ERROR, 0x11, 0x00); /* UNRECOVERED READ ERROR */
}
