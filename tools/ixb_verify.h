/* ix-bench data verification. Every logical block ix-bench writes with --verify starts with a
 * 32-byte header, little-endian:
 *
 *   0  magic "IXBENCH1"     8  LBA of this block
 *   16 seed of the run      24 write generation (1, 2, ...; unique per write in a session)
 *   28 CRC32C of the whole block, computed with these 4 bytes left out
 *
 * followed by pseudo-random bytes derived from (seed, LBA, generation). A header in every
 * block (not only per I/O) lets a later run read with any I/O size, and shows a write torn at
 * a block boundary as blocks of two generations. A read then tells apart: data this run never
 * wrote (no magic or another seed), data for another LBA (a misdirected write), a corrupted
 * block (checksum), and stale or unexpected data (an intact block of another generation).
 * Pure functions, no I/O, no allocation. */
#ifndef IX_TOOLS_IXB_VERIFY_H
#define IX_TOOLS_IXB_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IXB_HDR_LEN 32
#define IXB_MIN_UNIT 512

/* Expected generation of a unit, as a session tracks it. */
#define IXB_GEN_NONE 0u          /* not written by this run */
#define IXB_GEN_UNKNOWN 0xffffffffu /* a write failed: the content is undefined */

enum ixb_verdict {
	IXB_OK = 0,
	IXB_NOT_OURS,   /* no header of this seed (never written, or by another run) */
	IXB_WRONG_LBA,  /* an intact block of this seed, but for another LBA */
	IXB_CORRUPT,    /* header of this seed, checksum wrong: corrupted */
	IXB_STALE,      /* intact, older generation than expected */
	IXB_FUTURE,     /* intact, a generation other than expected and not older */
};

/* The header a block carries, if any. */
struct ixb_found {
	bool header;           /* an ix-bench header (the magic), of any seed */
	uint64_t seed, lba;
	uint32_t gen;
};

/* What a failed check found: the first bad block of the I/O and how many were bad. */
struct ixb_bad {
	enum ixb_verdict verdict;
	uint32_t block;        /* index of the first bad block in the buffer */
	uint32_t nbad;
	struct ixb_found found; /* in that block */
};

/* Fill buf (len bytes, a multiple of bsize >= IXB_MIN_UNIT) as the blocks lba, lba+1, ... of
 * generation gen. */
void ixb_fill(uint8_t *buf, uint32_t len, uint32_t bsize, uint64_t lba, uint64_t seed,
	      uint32_t gen);

/* Check one block of bsize bytes; *found tells what its header says. */
enum ixb_verdict ixb_check(const uint8_t *blk, uint32_t bsize, uint64_t lba, uint64_t seed,
			   uint32_t expect_gen, struct ixb_found *found);

/* The rule ix-bench applies to the blocks of one read (len bytes from lba on, all expected at
 * generation expect_gen). strict (a read-only run): every block must hold intact data of this
 * seed, any generation. Otherwise IXB_GEN_NONE means "not written by this run": anything but
 * a broken block of this seed passes; IXB_GEN_UNKNOWN passes anything. Returns IXB_OK, or the
 * first failure with the details in *bad. */
enum ixb_verdict ixb_judge(const uint8_t *buf, uint32_t len, uint32_t bsize, uint64_t lba,
			   uint64_t seed, uint32_t expect_gen, int strict, struct ixb_bad *bad);

const char *ixb_verdict_str(enum ixb_verdict v);
/* splitmix64: the run's pseudo-random numbers (also used to pick LBAs). */
static inline uint64_t ixb_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif
