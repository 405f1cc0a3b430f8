/* CRC32C (Castagnoli) for iSCSI header and data digests (RFC 7143 section 13.1, test vectors in
 * appendix B.4). Backed by ISA-L's crc32_iscsi (hardware CRC where the CPU has it). */
#ifndef IX_PROTO_CRC32C_H
#define IX_PROTO_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Standard CRC-32C of buf: crc32c("123456789") == 0xE3069283. */
uint32_t crc32c(const void *buf, size_t len);

/* Incremental form: state starts at CRC32C_INIT, fold in pieces with crc32c_update(), and
 * crc32c_final() gives the same value crc32c() would over the concatenation. */
#define CRC32C_INIT 0xffffffffu
uint32_t crc32c_update(uint32_t state, const void *buf, size_t len);
static inline uint32_t crc32c_final(uint32_t state)
{
	return state ^ 0xffffffffu;
}

/* CRC-32C over an iovec list. */
uint32_t crc32c_iov(const struct iovec *iov, int iovcnt);

/* Digests travel least-significant byte first. */
static inline void crc32c_put_wire(uint8_t out[4], uint32_t crc)
{
	out[0] = (uint8_t)crc;
	out[1] = (uint8_t)(crc >> 8);
	out[2] = (uint8_t)(crc >> 16);
	out[3] = (uint8_t)(crc >> 24);
}

static inline uint32_t crc32c_get_wire(const uint8_t in[4])
{
	return (uint32_t)in[0] | ((uint32_t)in[1] << 8) | ((uint32_t)in[2] << 16) |
	       ((uint32_t)in[3] << 24);
}

#endif
