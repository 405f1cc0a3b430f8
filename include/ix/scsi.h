/* ix initiator: SCSI command builders and parsers (SPC-4 / SBC-3) for use with
 * struct ix_scsi_cmd. Pure functions, no I/O. Builders write into cdb (16 bytes) and return
 * the CDB length. */
#ifndef IX_SCSI_H
#define IX_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint8_t ix_cdb_test_unit_ready(uint8_t cdb[16]);
uint8_t ix_cdb_inquiry(uint8_t cdb[16], bool evpd, uint8_t page, uint16_t alloc_len);
uint8_t ix_cdb_read_capacity16(uint8_t cdb[16], uint32_t alloc_len);
uint8_t ix_cdb_report_luns(uint8_t cdb[16], uint32_t alloc_len);
uint8_t ix_cdb_read16(uint8_t cdb[16], uint64_t lba, uint32_t blocks, bool fua);
uint8_t ix_cdb_write16(uint8_t cdb[16], uint64_t lba, uint32_t blocks, bool fua);
uint8_t ix_cdb_sync_cache16(uint8_t cdb[16], uint64_t lba, uint32_t blocks);

/* READ CAPACITY (16) data: 0, or -EINVAL if len < 12 or the block size is 0. */
int ix_parse_read_capacity16(const uint8_t *buf, size_t len, uint64_t *num_blocks,
			     uint32_t *block_size);

/* Standard INQUIRY data: peripheral device type and the trimmed T10 strings. */
struct ix_inquiry {
	uint8_t device_type;
	bool removable;
	char vendor[9], product[17], revision[5];
};
int ix_parse_inquiry(const uint8_t *buf, size_t len, struct ix_inquiry *out);

/* REPORT LUNS data: up to max LUN numbers into luns; returns the count listed by the target
 * (may exceed max) or -EINVAL. */
int ix_parse_report_luns(const uint8_t *buf, size_t len, uint32_t *luns, int max);

/* Sense key / ASC / ASCQ from fixed (0x70/0x71) or descriptor (0x72/0x73) sense.
 * 0 or -EINVAL. */
int ix_parse_sense(const uint8_t *sense, size_t len, uint8_t *key, uint8_t *asc, uint8_t *ascq);

/* "CHECK CONDITION: ILLEGAL REQUEST 24/00" style text for a command's outcome. */
const char *ix_scsi_status_str(uint8_t status);
const char *ix_sense_key_str(uint8_t key);

#ifdef __cplusplus
}
#endif

#endif
