/* ix-bench's latency histogram (bucket layout, percentiles, merging) and its verification block
 * format: every failure class the tool reports must be produced by the damage it names, and
 * intact data must pass. */
#include <stdint.h>
#include <string.h>

#include "ixb_hist.h"
#include "ixb_verify.h"
#include "tap.h"

static void test_hist_layout(void)
{
	unsigned prev = 0;
	int monotonic = 1, within = 1;

	/* indices grow with the value, and a value lies in [low(idx), low(idx+1)) */
	for (uint64_t v = 0; v < (1ull << 40); v = v < 4096 ? v + 1 : v + v / 37) {
		unsigned i = ixb_hist_index(v);
		if (i < prev)
			monotonic = 0;
		if (ixb_hist_low(i) > v || (i + 1 < IXB_HIST_BUCKETS && ixb_hist_low(i + 1) <= v))
			within = 0;
		prev = i;
	}
	CHECK(monotonic);
	CHECK(within);
	CHECK_EQ(ixb_hist_index(0), 0);
	CHECK_EQ(ixb_hist_index(127), 127);
	CHECK_EQ(ixb_hist_index(128), 128);
	CHECK_EQ(ixb_hist_index(129), 128);        /* width 2 from 128 on */
	CHECK_EQ(ixb_hist_low(ixb_hist_index(1000000)), 999424); /* 1 ms within 1/64 */
	CHECK_EQ(ixb_hist_index(UINT64_MAX), IXB_HIST_BUCKETS - 1);
}

static void test_hist_pct(void)
{
	static struct ixb_hist h, a, b;

	ixb_hist_init(&h);
	CHECK_EQ(ixb_hist_pct(&h, 50), 0);
	for (uint64_t v = 1; v <= 100; v++)
		ixb_hist_add(&h, v * 1000); /* 1..100 us */
	CHECK_EQ(h.count, 100);
	CHECK_EQ(h.min, 1000);
	CHECK_EQ(h.max, 100000);
	CHECK_EQ(h.sum, 5050000);
	/* exact to within the bucket width (1/64 of the value) */
	CHECK(ixb_hist_pct(&h, 50) >= 50000 * 63 / 64 && ixb_hist_pct(&h, 50) <= 50000 * 65 / 64);
	CHECK(ixb_hist_pct(&h, 90) >= 90000 * 63 / 64 && ixb_hist_pct(&h, 90) <= 90000 * 65 / 64);
	CHECK(ixb_hist_pct(&h, 99) >= 99000 * 63 / 64 && ixb_hist_pct(&h, 99) <= 99000 * 65 / 64);
	CHECK_EQ(ixb_hist_pct(&h, 100), 100000);
	CHECK(ixb_hist_pct(&h, 0.001) >= 1000 && ixb_hist_pct(&h, 0.001) < 1008); /* first bucket */

	/* a tail of 1 in 1000 shows at p99.9 and not at p99 */
	ixb_hist_init(&a);
	for (int i = 0; i < 999; i++)
		ixb_hist_add(&a, 50000);
	ixb_hist_add(&a, 2000000000);
	CHECK(ixb_hist_pct(&a, 99) < 51000);
	CHECK(ixb_hist_pct(&a, 99.9) < 51000);
	CHECK(ixb_hist_pct(&a, 99.95) > 1968000000); /* the outlier, within 1/64 */

	/* merging equals adding everything to one */
	ixb_hist_init(&b);
	ixb_hist_add(&b, 7);
	ixb_hist_merge(&b, &a);
	CHECK_EQ(b.count, 1001);
	CHECK_EQ(b.min, 7);
	CHECK_EQ(b.max, 2000000000);
	CHECK_EQ(b.sum, a.sum + 7);
}

#define BS 512
#define SEED 0x1234abcdull

static uint8_t buf[8 * BS], other[8 * BS];

static void test_verify_roundtrip(void)
{
	struct ixb_bad bad;
	struct ixb_found f;

	ixb_fill(buf, sizeof(buf), BS, 1000, SEED, 5);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 5, 0, &bad), IXB_OK);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, IXB_GEN_NONE, 1, &bad), IXB_OK);
	/* every block carries its own LBA: block 3 is LBA 1003 */
	CHECK_EQ(ixb_check(buf + 3 * BS, BS, 1003, SEED, 5, &f), IXB_OK);
	CHECK(f.header);
	CHECK_EQ(f.lba, 1003);
	CHECK_EQ(f.gen, 5);
	CHECK_EQ(f.seed, SEED);
	/* read back with another I/O size: the blocks 1004..1007 alone */
	CHECK_EQ(ixb_judge(buf + 4 * BS, 4 * BS, BS, 1004, SEED, IXB_GEN_NONE, 1, &bad), IXB_OK);
	/* 4096-byte blocks work the same */
	ixb_fill(buf, sizeof(buf), 4096, 7, SEED, 1);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), 4096, 7, SEED, 1, 0, &bad), IXB_OK);
}

static void test_verify_failures(void)
{
	struct ixb_bad bad;

	/* stale: generation 4 where 5 was written last */
	ixb_fill(buf, sizeof(buf), BS, 1000, SEED, 4);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 5, 0, &bad), IXB_STALE);
	CHECK_EQ(bad.nbad, 8);
	CHECK_EQ(bad.found.gen, 4);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 3, 0, &bad), IXB_FUTURE);

	/* torn at a block boundary: blocks 0-2 new, 3-7 old */
	ixb_fill(buf, sizeof(buf), BS, 1000, SEED, 5);
	ixb_fill(other, sizeof(other), BS, 1000, SEED, 4);
	memcpy(buf + 3 * BS, other + 3 * BS, 5 * BS);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 5, 0, &bad), IXB_STALE);
	CHECK_EQ(bad.block, 3);
	CHECK_EQ(bad.nbad, 5);

	/* torn inside a block, or one flipped bit: checksum */
	ixb_fill(buf, sizeof(buf), BS, 1000, SEED, 5);
	buf[2 * BS + 300] ^= 0x10;
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 5, 0, &bad), IXB_CORRUPT);
	CHECK_EQ(bad.block, 2);
	CHECK_EQ(bad.nbad, 1);
	/* even where the run has not written (not strict): a broken block of ours is reported */
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, IXB_GEN_NONE, 0, &bad), IXB_CORRUPT);
	/* the header's own bytes are covered too (not the checksum field alone) */
	ixb_fill(buf, sizeof(buf), BS, 1000, SEED, 5);
	buf[24] ^= 1; /* generation 5 -> 4 without fixing the checksum */
	CHECK_EQ(ixb_judge(buf, BS, BS, 1000, SEED, 5, 0, &bad), IXB_CORRUPT);

	/* misdirected: the data of LBA 2000 at LBA 1000 */
	ixb_fill(buf, sizeof(buf), BS, 2000, SEED, 5);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 5, 0, &bad), IXB_WRONG_LBA);
	CHECK_EQ(bad.found.lba, 2000);

	/* another run's data (other seed), zeros */
	ixb_fill(buf, sizeof(buf), BS, 1000, SEED + 1, 5);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 5, 0, &bad), IXB_NOT_OURS);
	CHECK(bad.found.header); /* the other run's header is reported */
	CHECK_EQ(bad.found.seed, SEED + 1);
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, IXB_GEN_NONE, 1, &bad), IXB_NOT_OURS);
	/* ...which is fine where this run has not written yet, unless the run is read-only */
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, IXB_GEN_NONE, 0, &bad), IXB_OK);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, 1, 0, &bad), IXB_NOT_OURS);
	CHECK(!bad.found.header);
	/* after a failed write anything goes */
	CHECK_EQ(ixb_judge(buf, sizeof(buf), BS, 1000, SEED, IXB_GEN_UNKNOWN, 0, &bad), IXB_OK);
	CHECK(strstr(ixb_verdict_str(IXB_STALE), "stale") != NULL);
}

int main(void)
{
	test_hist_layout();
	test_hist_pct();
	test_verify_roundtrip();
	test_verify_failures();
	return tap_done();
}
