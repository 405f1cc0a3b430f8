/* ix-bench latency histogram: see ixb_hist.h. Bucket i < 128 holds exactly the value i; above,
 * a value with its top bit at position e (e >= 7) lands in bucket ((e - 6) << 6) + (v >> (e - 6)),
 * i.e. its 7 leading bits select one of 64 buckets of its power of two. */
#include <string.h>

#include "ixb_hist.h"

#define SUB (1u << IXB_HIST_SUB_BITS)

void ixb_hist_init(struct ixb_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned ixb_hist_index(uint64_t v)
{
	unsigned e, shift;

	if (v < 2 * SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	shift = e - IXB_HIST_SUB_BITS;
	if (shift > IXB_HIST_MAX_SHIFT)
		return IXB_HIST_BUCKETS - 1;
	return (shift << IXB_HIST_SUB_BITS) + (unsigned)(v >> shift);
}

uint64_t ixb_hist_low(unsigned idx)
{
	unsigned shift;

	if (idx < 2 * SUB)
		return idx;
	shift = (idx >> IXB_HIST_SUB_BITS) - 1;
	return (uint64_t)(idx - (shift << IXB_HIST_SUB_BITS)) << shift;
}

/* The width of a bucket: 1 below 128, 2^shift above. */
static uint64_t width(unsigned idx)
{
	if (idx < 2 * SUB)
		return 1;
	return 1ull << ((idx >> IXB_HIST_SUB_BITS) - 1);
}

void ixb_hist_add(struct ixb_hist *h, uint64_t v)
{
	h->b[ixb_hist_index(v)]++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void ixb_hist_merge(struct ixb_hist *dst, const struct ixb_hist *src)
{
	if (!src->count)
		return;
	for (unsigned i = 0; i < IXB_HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t ixb_hist_pct(const struct ixb_hist *h, double p)
{
	uint64_t rank, seen = 0, v;

	if (!h->count)
		return 0;
	if (p >= 100.0)
		return h->max;
	rank = (uint64_t)(p / 100.0 * (double)h->count + 0.999999);
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < IXB_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen < rank)
			continue;
		v = ixb_hist_low(i) + width(i) / 2;
		if (v < h->min)
			v = h->min;
		if (v > h->max)
			v = h->max;
		return v;
	}
	return h->max;
}
