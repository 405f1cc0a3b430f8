/* What the SCSI harnesses (fuzz_scsi.c, fuzz_rod.c) share: a command that counts its
 * completions, and the properties every completed command must have. */
#ifndef IX_FUZZ_SCSI_CMD_H
#define IX_FUZZ_SCSI_CMD_H

#include <stdint.h>
#include <stdlib.h>

#include "scsi/scsi.h"

struct fcmd {
	struct scsi_cmd c;
	int ndone;
};

static inline void fcmd_done(struct scsi_cmd *c)
{
	((struct fcmd *)c->priv)->ndone++;
}

/* Completed exactly once; data and sense within their bounds; CHECK CONDITION carries fixed
 * or descriptor sense of at least 8 bytes, any other status none. */
static inline void fcmd_check(const struct fcmd *f)
{
	const struct scsi_cmd *c = &f->c;

	if (f->ndone != 1)
		abort();
	if (c->data_in_len > c->data_in_max || c->data_in_len > c->buf_len)
		abort();
	if (c->sense_len > SCSI_SENSE_MAX)
		abort();
	if (c->status == SCSI_STATUS_CHECK_CONDITION) {
		uint8_t code = c->sense[0] & 0x7f;

		if (c->sense_len < 8 || (code != 0x70 && code != 0x72))
			abort();
	} else if (c->sense_len != 0) {
		abort();
	}
}

#endif
