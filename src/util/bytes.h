/* Big-endian field access for wire formats. All iSCSI and SCSI multi-byte integers are
 * big-endian; these helpers never assume alignment. */
#ifndef IX_UTIL_BYTES_H
#define IX_UTIL_BYTES_H

#include <stddef.h>
#include <stdint.h>

static inline uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t get_be24(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t get_be64(const uint8_t *p)
{
	return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

static inline void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

/* RFC 1982 serial number arithmetic, SERIAL_BITS = 32 (RFC 7143 section 4.2.2). */
static inline int sn_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline int sn_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

/* FNV-1a, 64 bit: a cheap non-cryptographic hash for derived identifiers and file checksums. */
#define FNV1A64_INIT 0xcbf29ce484222325ULL

static inline uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

#endif
