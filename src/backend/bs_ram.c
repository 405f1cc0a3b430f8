/* RAM backend: an anonymous zeroed mapping; every I/O completes synchronously. Discard gives
 * whole pages back with madvise(MADV_DONTNEED) (they read back as zeros) and zeroes the
 * partial pages at the edges, so a page is the physical block.
 *
 * Reads may be answered straight from the mapping (map). Worker threads write into it
 * concurrently, which a plain zero-copy Data-In tolerates (the initiator sees the bytes as
 * they are when they leave, as overlapping commands from different initiators allow), but a
 * data digest does not: the CRC and the bytes on the wire must be the same bytes. pin/unpin
 * give that: per 1 MiB chunk, a count of pins (readers between checksum and hand-over to the
 * kernel) and of writers. A reader adds its pins, then backs off if it sees a writer; a writer
 * adds itself, then waits while it sees a pin. Both steps are sequentially consistent, so at
 * least one of the two sees the other (Dekker): the reader falls back to a copy, or the
 * writer waits out a pin, which is held only for one checksum and one writev.
 *
 * Growing online (bs_dev_grow): the mapping is a reservation of address space (PROT_NONE, no
 * memory) of RAM_RESERVE_FACTOR times the size at open, capped at RAM_RESERVE_EXTRA more, of
 * which the first size bytes are readable and writable. Growing makes more of it writable
 * (mprotect) and then publishes the new size: the memory never moves, so readers on other
 * threads and data-in pointing into it need no lock. Past the reservation, a restart. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/bs.h"

#define RAM_CHUNK_SHIFT 20
#define RAM_RESERVE_FACTOR 8
#define RAM_RESERVE_EXTRA  (1ULL << 40)

struct ram_chunk {
	atomic_uint pins;
	atomic_uint writers;
};

struct ram_priv {
	uint8_t *mem;
	uint64_t reserved; /* bytes of address space at mem; the chunk counters cover them */
	size_t page;
	struct ram_chunk *chunks;
	uint64_t nchunks;
};

/* The address space to reserve for a LUN of size bytes (a whole number of pages). */
static uint64_t ram_reserve(uint64_t size, size_t page)
{
	uint64_t r = size > UINT64_MAX / RAM_RESERVE_FACTOR ? size : size * RAM_RESERVE_FACTOR;

	if (r - size > RAM_RESERVE_EXTRA)
		r = size + RAM_RESERVE_EXTRA;
	return (r + page - 1) & ~(uint64_t)(page - 1);
}

static int ram_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err, size_t errlen)
{
	struct ram_priv *p = dev->priv;

	if (cfg->size_bytes < cfg->block_size) {
		snprintf(err, errlen, "RAM backend needs a size of at least one block");
		return -EINVAL;
	}
	p->page = (size_t)sysconf(_SC_PAGESIZE);
	p->reserved = ram_reserve(cfg->size_bytes, p->page);
	/* PROT_NONE costs no memory; mprotect charges what becomes writable, as a plain mmap
	 * would */
	p->mem = mmap(NULL, p->reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->mem == MAP_FAILED || mprotect(p->mem, cfg->size_bytes, PROT_READ | PROT_WRITE)) {
		int rc = -errno;

		if (p->mem != MAP_FAILED)
			munmap(p->mem, p->reserved);
		snprintf(err, errlen, "mmap %llu bytes: %s", (unsigned long long)cfg->size_bytes,
			 strerror(-rc));
		return rc;
	}
	p->nchunks = ((p->reserved - 1) >> RAM_CHUNK_SHIFT) + 1;
	p->chunks = calloc(p->nchunks, sizeof(*p->chunks));
	if (!p->chunks) {
		munmap(p->mem, p->reserved);
		snprintf(err, errlen, "out of memory for %llu chunk counters",
			 (unsigned long long)p->nchunks);
		return -ENOMEM;
	}
	dev->size = cfg->size_bytes;
	dev->phys_block_size = (uint32_t)p->page; /* discard works in whole pages */
	return 0;
}

static void ram_close(struct bs_dev *dev)
{
	struct ram_priv *p = dev->priv;

	munmap(p->mem, p->reserved);
	free(p->chunks);
}

/* Make [size, new size) of the reservation writable; bs_dev_grow then publishes the size. Its
 * pages are untouched (zero) already: a RAM LUN grows with zeros. Control path. */
static int ram_grow(struct bs_dev *dev, uint64_t size, char *err, size_t errlen)
{
	struct ram_priv *p = dev->priv;
	uint64_t mask = ~(uint64_t)(p->page - 1);
	uint64_t from = (dev->size + p->page - 1) & mask, to = (size + p->page - 1) & mask;

	if (size > p->reserved) {
		snprintf(err, errlen,
			 "a RAM LUN grows online up to %llu bytes (%d times its size at start, "
			 "at most 1 TiB more); a restart gives it more",
			 (unsigned long long)p->reserved, RAM_RESERVE_FACTOR);
		return -ENOSPC;
	}
	if (to > from && mprotect(p->mem + from, to - from, PROT_READ | PROT_WRITE) < 0) {
		int rc = -errno;
		snprintf(err, errlen, "cannot map %llu more bytes: %s",
			 (unsigned long long)(to - from), strerror(-rc));
		return rc;
	}
	return 0;
}

/* Chunks [*c0, *c1] holding bytes [off, off + len), len > 0. */
static void chunk_span(uint64_t off, uint64_t len, uint64_t *c0, uint64_t *c1)
{
	*c0 = off >> RAM_CHUNK_SHIFT;
	*c1 = (off + len - 1) >> RAM_CHUNK_SHIFT;
}

static void write_begin(struct ram_priv *p, uint64_t off, uint64_t len)
{
	uint64_t c0, c1;

	chunk_span(off, len, &c0, &c1);
	for (uint64_t c = c0; c <= c1; c++)
		atomic_fetch_add(&p->chunks[c].writers, 1);
	for (uint64_t c = c0; c <= c1; c++)
		for (unsigned spin = 0; atomic_load(&p->chunks[c].pins); spin++)
			if (spin >= 64)
				sched_yield(); /* the pin's thread may be off the CPU */
}

static void write_end(struct ram_priv *p, uint64_t off, uint64_t len)
{
	uint64_t c0, c1;

	chunk_span(off, len, &c0, &c1);
	for (uint64_t c = c0; c <= c1; c++)
		atomic_fetch_sub(&p->chunks[c].writers, 1);
}

static int ram_pin(struct bs_dev *dev, const uint8_t *at, uint64_t len)
{
	struct ram_priv *p = dev->priv;
	uint64_t off, c0, c1, c;

	if (at < p->mem || at > p->mem + dev->size)
		return -EINVAL;
	off = (uint64_t)(at - p->mem);
	if (len == 0 || len > dev->size - off)
		return -EINVAL;
	chunk_span(off, len, &c0, &c1);
	for (c = c0; c <= c1; c++)
		atomic_fetch_add(&p->chunks[c].pins, 1);
	for (c = c0; c <= c1; c++)
		if (atomic_load(&p->chunks[c].writers))
			break;
	if (c <= c1) {
		for (c = c0; c <= c1; c++)
			atomic_fetch_sub(&p->chunks[c].pins, 1);
		return -EBUSY;
	}
	return 0;
}

static void ram_unpin(struct bs_dev *dev, const uint8_t *at, uint64_t len)
{
	struct ram_priv *p = dev->priv;
	uint64_t c0, c1;

	chunk_span((uint64_t)(at - p->mem), len, &c0, &c1);
	for (uint64_t c = c0; c <= c1; c++)
		atomic_fetch_sub(&p->chunks[c].pins, 1);
}

static void ram_discard(struct ram_priv *p, uint64_t off, uint64_t len)
{
	uint64_t start = (off + p->page - 1) & ~(uint64_t)(p->page - 1);
	uint64_t end = (off + len) & ~(uint64_t)(p->page - 1);

	if (start >= end || madvise(p->mem + start, end - start, MADV_DONTNEED) < 0) {
		memset(p->mem + off, 0, len);
		return;
	}
	memset(p->mem + off, 0, start - off);
	memset(p->mem + end, 0, off + len - end);
}

static int ram_do(struct bs_dev *dev, struct bs_io *io)
{
	struct ram_priv *p = dev->priv;
	uint8_t *at = p->mem + io->offset;
	uint64_t size = atomic_load_explicit(&dev->size, memory_order_relaxed);

	if (io->offset > size || io->len > size - io->offset)
		return -EINVAL;
	switch (io->op) {
	case BS_OP_READ:
		memcpy(io->buf, at, io->len);
		return 0;
	case BS_OP_FLUSH:
		return 0;
	case BS_OP_WRITE:
	case BS_OP_WRITE_SAME:
	case BS_OP_WRITE_ZEROES:
	case BS_OP_DISCARD:
		break;
	default:
		return -EINVAL;
	}
	if (!io->len)
		return 0;
	write_begin(p, io->offset, io->len);
	if (io->op == BS_OP_WRITE) {
		memcpy(at, io->buf, io->len);
	} else if (io->op == BS_OP_WRITE_SAME) {
		for (uint64_t pos = 0; pos < io->len; pos += io->pattern_len) {
			uint64_t n =
			    io->len - pos < io->pattern_len ? io->len - pos : io->pattern_len;

			memcpy(at + pos, io->buf, n);
		}
	} else { /* WRITE_ZEROES (zero pages read as zeros: no need to touch them), DISCARD */
		ram_discard(p, io->offset, io->len);
	}
	write_end(p, io->offset, io->len);
	return 0;
}

static void ram_submit(struct bs_dev *dev, struct bs_thread *t, struct bs_io *io)
{
	(void)t;
	io->result = ram_do(dev, io);
	io->cb(io);
}

static const uint8_t *ram_map(struct bs_dev *dev, uint64_t offset, uint64_t len)
{
	struct ram_priv *p = dev->priv;

	if (offset > dev->size || len > dev->size - offset)
		return NULL;
	return p->mem + offset;
}

static int ram_lba_status(struct bs_dev *dev, uint64_t offset, uint64_t *run, bool *mapped)
{
	struct ram_priv *p = dev->priv;
	uint64_t bs = dev->block_size, pos = offset;
	bool first = true, state = false;

	/* Deallocated blocks read as zeros, so an all-zero block is reported deallocated. The
	 * run is capped so one call stays cheap. */
	for (; pos < dev->size && pos - offset < (bs << 16); pos += bs) {
		const uint8_t *b = p->mem + pos;
		bool m = b[0] != 0 || memcmp(b, b + 1, bs - 1) != 0;

		if (first) {
			state = m;
			first = false;
		} else if (m != state) {
			break;
		}
	}
	*mapped = state;
	*run = pos - offset;
	return 0;
}

const struct bs_ops bs_ram_ops = {
    .name = "ram",
    .type = BS_TYPE_RAM,
    .priv_size = sizeof(struct ram_priv),
    .caps = BS_CAP_DISCARD | BS_CAP_DISCARD_ZEROES | BS_CAP_LBA_STATUS,
    .open = ram_open,
    .close = ram_close,
    .grow = ram_grow,
    .submit = ram_submit,
    .map = ram_map,
    .pin = ram_pin,
    .unpin = ram_unpin,
    .lba_status = ram_lba_status,
};
