/* CRC32C over ISA-L.
 *
 * crc32_iscsi(buf, len, init) runs the reflected Castagnoli register starting from init and
 * returns the register without the final inversion (checked: crc32_iscsi("123456789", 9,
 * 0xffffffff) == 0x1cf96d7c == ~0xe3069283). So it is exactly our crc32c_update() with the
 * standard init, and crc32c_final() applies the final XOR.
 */
#include <isa-l/crc.h>

#include "proto/crc32c.h"

/* ISA-L takes an int length; feed larger buffers in pieces. */
#define CRC_CHUNK (1u << 30)

uint32_t crc32c_update(uint32_t state, const void *buf, size_t len)
{
	/* ISA-L's prototype is not const-correct; it only reads the buffer. */
	unsigned char *p = (unsigned char *)(uintptr_t)buf;

	while (len > 0) {
		size_t n = len < CRC_CHUNK ? len : CRC_CHUNK;

		state = crc32_iscsi(p, (int)n, state);
		p += n;
		len -= n;
	}
	return state;
}

uint32_t crc32c(const void *buf, size_t len)
{
	return crc32c_final(crc32c_update(CRC32C_INIT, buf, len));
}

uint32_t crc32c_iov(const struct iovec *iov, int iovcnt)
{
	uint32_t state = CRC32C_INIT;

	for (int i = 0; i < iovcnt; i++)
		state = crc32c_update(state, iov[i].iov_base, iov[i].iov_len);
	return crc32c_final(state);
}
