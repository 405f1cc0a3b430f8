/* CRC32C tests. Expected values: the check value of CRC-32C ("123456789" -> 0xE3069283), the
 * RFC 7143 appendix B.4 vectors (as listed in protocol.md 2.6) and the B.4 example SCSI
 * Read(10) command PDU. All were also recomputed with a bit-at-a-time reference in python3
 * (poly 0x82F63B78 reflected, init and final XOR 0xFFFFFFFF). */
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "proto/crc32c.h"
#include "tap.h"

static void test_vectors(void)
{
	uint8_t buf[48];
	int i;

	CHECK_EQ(crc32c("123456789", 9), 0xe3069283u);
	CHECK_EQ(crc32c("", 0), 0x00000000u);

	memset(buf, 0, 32);
	CHECK_EQ(crc32c(buf, 32), 0x8a9136aau);
	memset(buf, 0xff, 32);
	CHECK_EQ(crc32c(buf, 32), 0x62a8ab43u);
	for (i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ(crc32c(buf, 32), 0x46dd794eu);
	for (i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	CHECK_EQ(crc32c(buf, 32), 0x113fdb5cu);

	/* RFC 7143 B.4: iSCSI SCSI Read (10) command PDU; digest on the wire 56 3a 96 d9. */
	static const uint8_t read10[48] = {
	    0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	    0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
	    0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
	    0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t wire[4] = {0x56, 0x3a, 0x96, 0xd9};
	uint8_t out[4];

	CHECK_EQ(crc32c(read10, sizeof(read10)), 0xd9963a56u);
	crc32c_put_wire(out, crc32c(read10, sizeof(read10)));
	CHECK_MEM(out, wire, 4);
	CHECK_EQ(crc32c_get_wire(wire), 0xd9963a56u);
}

/* Bit at a time, the definition. */
static uint32_t crc_ref(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
	}
	return c ^ 0xffffffffu;
}

/* Every length up to 600 bytes at every alignment 0-7 against the bitwise definition: short
 * buffers take the SSE4.2 path on x86-64, longer ones ISA-L. */
static void test_reference(void)
{
	static uint8_t buf[608];
	int bad = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 3) * 17 + 5);
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n <= 600; n++)
			if (crc32c(buf + off, n) != crc_ref(buf + off, n))
				bad++;
	CHECK_EQ(bad, 0);
}

/* Incremental and iovec forms agree with the one-shot form at every split point. */
static void test_incremental(void)
{
	uint8_t buf[1027];
	uint32_t whole, st;
	int bad_split = 0, bad_iov = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	whole = crc32c(buf, sizeof(buf));

	for (size_t cut = 0; cut <= sizeof(buf); cut++) {
		st = crc32c_update(CRC32C_INIT, buf, cut);
		st = crc32c_update(st, buf + cut, sizeof(buf) - cut);
		if (crc32c_final(st) != whole)
			bad_split++;
	}
	CHECK_EQ(bad_split, 0);

	/* Byte at a time. */
	st = CRC32C_INIT;
	for (size_t i = 0; i < sizeof(buf); i++)
		st = crc32c_update(st, buf + i, 1);
	CHECK_EQ(crc32c_final(st), whole);

	for (size_t a = 0; a < 64; a++) {
		for (size_t b = a; b < sizeof(buf); b += 97) {
			struct iovec iov[4] = {
			    {buf, a},
			    {NULL, 0}, /* empty entries are allowed */
			    {buf + a, b - a},
			    {buf + b, sizeof(buf) - b},
			};
			if (crc32c_iov(iov, 4) != whole)
				bad_iov++;
		}
	}
	CHECK_EQ(bad_iov, 0);
	CHECK_EQ(crc32c_iov(NULL, 0), 0);

	/* BHS digest computed as header + AHS iovecs equals the digest of the contiguous
	 * bytes, and flipping one bit changes it. */
	struct iovec two[2] = {{buf, 48}, {buf + 48, 8}};
	uint32_t before = crc32c_iov(two, 2);

	CHECK_EQ(before, crc32c(buf, 56));
	buf[50] ^= 0x10;
	CHECK(crc32c_iov(two, 2) != before);
}

int main(void)
{
	test_vectors();
	test_reference();
	test_incremental();
	return tap_done();
}
