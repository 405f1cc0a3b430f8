/* ix-bench data verification: see ixb_verify.h. */
#include <string.h>

#include "ixb_verify.h"
#include "proto/crc32c.h"

static const uint8_t magic[8] = {'I', 'X', 'B', 'E', 'N', 'C', 'H', '1'};

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* CRC32C of the unit without the 4 checksum bytes at offset 28. */
static uint32_t unit_crc(const uint8_t *buf, uint32_t len)
{
	uint32_t st = crc32c_update(CRC32C_INIT, buf, 28);

	st = crc32c_update(st, buf + IXB_HDR_LEN, len - IXB_HDR_LEN);
	return crc32c_final(st);
}

static void fill_block(uint8_t *buf, uint32_t len, uint64_t lba, uint64_t seed, uint32_t gen)
{
	uint64_t st = seed ^ (lba * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)gen << 32);

	memcpy(buf, magic, 8);
	put_le64(buf + 8, lba);
	put_le64(buf + 16, seed);
	put_le32(buf + 24, gen);
	for (uint32_t off = IXB_HDR_LEN; off + 8 <= len; off += 8) {
		uint64_t r = ixb_rand(&st);
		memcpy(buf + off, &r, 8);
	}
	put_le32(buf + 28, unit_crc(buf, len));
}

void ixb_fill(uint8_t *buf, uint32_t len, uint32_t bsize, uint64_t lba, uint64_t seed,
	      uint32_t gen)
{
	for (uint32_t off = 0; off + bsize <= len; off += bsize)
		fill_block(buf + off, bsize, lba++, seed, gen);
}

enum ixb_verdict ixb_check(const uint8_t *buf, uint32_t len, uint64_t lba, uint64_t seed,
			   uint32_t expect_gen, struct ixb_found *found)
{
	memset(found, 0, sizeof(*found));
	if (memcmp(buf, magic, 8) != 0)
		return IXB_NOT_OURS;
	found->header = true;
	found->lba = get_le64(buf + 8);
	found->seed = get_le64(buf + 16);
	found->gen = get_le32(buf + 24);
	if (found->seed != seed)
		return IXB_NOT_OURS;
	if (unit_crc(buf, len) != get_le32(buf + 28))
		return IXB_CORRUPT;
	if (found->lba != lba)
		return IXB_WRONG_LBA;
	if (expect_gen == IXB_GEN_NONE || expect_gen == IXB_GEN_UNKNOWN || found->gen == expect_gen)
		return IXB_OK;
	return found->gen < expect_gen ? IXB_STALE : IXB_FUTURE;
}

enum ixb_verdict ixb_judge(const uint8_t *buf, uint32_t len, uint32_t bsize, uint64_t lba,
			   uint64_t seed, uint32_t expect_gen, int strict, struct ixb_bad *bad)
{
	memset(bad, 0, sizeof(*bad));
	if (expect_gen == IXB_GEN_UNKNOWN)
		return IXB_OK; /* a failed write left it undefined (already counted as an error) */
	for (uint32_t i = 0; (uint64_t)(i + 1) * bsize <= len; i++) {
		struct ixb_found found;
		enum ixb_verdict v = ixb_check(buf + (size_t)i * bsize, bsize, lba + i, seed,
					       expect_gen, &found);

		if (v == IXB_OK || (v == IXB_NOT_OURS && expect_gen == IXB_GEN_NONE && !strict))
			continue;
		if (bad->nbad++ == 0) {
			bad->verdict = v;
			bad->block = i;
			bad->found = found;
		}
	}
	return bad->verdict;
}
const char *ixb_verdict_str(enum ixb_verdict v)
{
	switch (v) {
	case IXB_OK: return "ok";
	case IXB_NOT_OURS: return "not data of this run";
	case IXB_WRONG_LBA: return "data of another LBA (misdirected write)";
	case IXB_CORRUPT: return "checksum mismatch (corrupted block)";
	case IXB_STALE: return "stale data (an older generation)";
	case IXB_FUTURE: return "unexpected generation (not the last one written)";
	}
	return "?";
}
