#include <errno.h>
#include <string.h>

#include "ix/scsi.h"
#include "util/bytes.h"

uint8_t ix_cdb_test_unit_ready(uint8_t cdb[16])
{
	memset(cdb, 0, 16);
	return 6;
}

uint8_t ix_cdb_inquiry(uint8_t cdb[16], bool evpd, uint8_t page, uint16_t alloc_len)
{
	memset(cdb, 0, 16);
	cdb[0] = 0x12;
	cdb[1] = evpd ? 1 : 0;
	cdb[2] = evpd ? page : 0;
	put_be16(cdb + 3, alloc_len);
	return 6;
}

uint8_t ix_cdb_read_capacity16(uint8_t cdb[16], uint32_t alloc_len)
{
	memset(cdb, 0, 16);
	cdb[0] = 0x9e;
	cdb[1] = 0x10;
	put_be32(cdb + 10, alloc_len);
	return 16;
}

uint8_t ix_cdb_report_luns(uint8_t cdb[16], uint32_t alloc_len)
{
	memset(cdb, 0, 16);
	cdb[0] = 0xa0;
	put_be32(cdb + 6, alloc_len);
	return 12;
}

static uint8_t rw16(uint8_t cdb[16], uint8_t op, uint64_t lba, uint32_t blocks, bool fua)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	cdb[1] = fua ? 0x08 : 0;
	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, blocks);
	return 16;
}

uint8_t ix_cdb_read16(uint8_t cdb[16], uint64_t lba, uint32_t blocks, bool fua)
{
	return rw16(cdb, 0x88, lba, blocks, fua);
}

uint8_t ix_cdb_write16(uint8_t cdb[16], uint64_t lba, uint32_t blocks, bool fua)
{
	return rw16(cdb, 0x8a, lba, blocks, fua);
}

uint8_t ix_cdb_sync_cache16(uint8_t cdb[16], uint64_t lba, uint32_t blocks)
{
	return rw16(cdb, 0x91, lba, blocks, false);
}

int ix_parse_read_capacity16(const uint8_t *buf, size_t len, uint64_t *num_blocks,
			     uint32_t *block_size)
{
	if (len < 12)
		return -EINVAL;
	*num_blocks = get_be64(buf) + 1;
	*block_size = get_be32(buf + 8);
	return *block_size ? 0 : -EINVAL;
}

static void trim_copy(char *dst, const uint8_t *src, size_t n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
	while (n > 0 && (dst[n - 1] == ' ' || dst[n - 1] == 0))
		dst[--n] = 0;
	for (size_t i = 0; i < n; i++)
		if (dst[i] < 0x20 || dst[i] > 0x7e)
			dst[i] = '?';
}

int ix_parse_inquiry(const uint8_t *buf, size_t len, struct ix_inquiry *out)
{
	memset(out, 0, sizeof(*out));
	if (len < 36)
		return -EINVAL;
	out->device_type = buf[0] & 0x1f;
	out->removable = buf[1] & 0x80;
	trim_copy(out->vendor, buf + 8, 8);
	trim_copy(out->product, buf + 16, 16);
	trim_copy(out->revision, buf + 32, 4);
	return 0;
}

int ix_parse_report_luns(const uint8_t *buf, size_t len, uint32_t *luns, int max)
{
	uint32_t list_len, n;

	if (len < 8)
		return -EINVAL;
	list_len = get_be32(buf);
	if (list_len % 8)
		return -EINVAL;
	n = list_len / 8;
	for (uint32_t i = 0; i < n && (int)i < max && 8 + 8 * (size_t)i + 8 <= len; i++) {
		const uint8_t *e = buf + 8 + 8 * i;
		uint8_t method = e[0] >> 6;

		luns[i] = method == 0 ? e[1] : ((uint32_t)(e[0] & 0x3f) << 8 | e[1]);
	}
	return (int)n;
}

int ix_parse_sense(const uint8_t *sense, size_t len, uint8_t *key, uint8_t *asc, uint8_t *ascq)
{
	uint8_t code;

	if (len < 2)
		return -EINVAL;
	code = sense[0] & 0x7f;
	if (code == 0x70 || code == 0x71) {
		if (len < 14)
			return -EINVAL;
		*key = sense[2] & 0x0f;
		*asc = sense[12];
		*ascq = sense[13];
		return 0;
	}
	if (code == 0x72 || code == 0x73) {
		if (len < 4)
			return -EINVAL;
		*key = sense[1] & 0x0f;
		*asc = sense[2];
		*ascq = sense[3];
		return 0;
	}
	return -EINVAL;
}

const char *ix_scsi_status_str(uint8_t status)
{
	switch (status) {
	case 0x00: return "GOOD";
	case 0x02: return "CHECK CONDITION";
	case 0x04: return "CONDITION MET";
	case 0x08: return "BUSY";
	case 0x18: return "RESERVATION CONFLICT";
	case 0x28: return "TASK SET FULL";
	case 0x30: return "ACA ACTIVE";
	case 0x40: return "TASK ABORTED";
	default: return "UNKNOWN STATUS";
	}
}

const char *ix_sense_key_str(uint8_t key)
{
	static const char *const names[16] = {
		"NO SENSE",	   "RECOVERED ERROR", "NOT READY",	 "MEDIUM ERROR",
		"HARDWARE ERROR",  "ILLEGAL REQUEST", "UNIT ATTENTION",	 "DATA PROTECT",
		"BLANK CHECK",	   "VENDOR SPECIFIC", "COPY ABORTED",	 "ABORTED COMMAND",
		"RESERVED",	   "VOLUME OVERFLOW", "MISCOMPARE",	 "COMPLETED"};
	return names[key & 0x0f];
}
