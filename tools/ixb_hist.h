/* ix-bench: latency histogram. Log-linear buckets (64 per power of two, so any value is
 * reported within 1/64 = 1.6 % of itself), fixed size, no allocation: one per direction per
 * worker thread, merged at the end. Exact count, sum, min and max are kept beside the buckets.
 * Not thread-safe: one writer, read after the writer has stopped. */
#ifndef IX_TOOLS_IXB_HIST_H
#define IX_TOOLS_IXB_HIST_H

#include <stdint.h>

#define IXB_HIST_SUB_BITS 6
#define IXB_HIST_MAX_SHIFT 34 /* values up to 2^41 ns (~36 minutes); larger are clamped */
#define IXB_HIST_BUCKETS ((IXB_HIST_MAX_SHIFT + 2) << IXB_HIST_SUB_BITS)

struct ixb_hist {
	uint64_t count, sum, min, max;
	uint64_t b[IXB_HIST_BUCKETS];
};

void ixb_hist_init(struct ixb_hist *h);
void ixb_hist_add(struct ixb_hist *h, uint64_t v);
/* dst += src */
void ixb_hist_merge(struct ixb_hist *dst, const struct ixb_hist *src);
/* The value at percentile p (0 < p <= 100): the smallest recorded value v such that at least
 * p % of the values are <= v, rounded to its bucket's midpoint (and clamped to [min, max]).
 * 0 when empty. */
uint64_t ixb_hist_pct(const struct ixb_hist *h, double p);
/* Bucket index of a value, and the lowest value of a bucket (exposed for the unit test). */
unsigned ixb_hist_index(uint64_t v);
uint64_t ixb_hist_low(unsigned idx);

#endif
