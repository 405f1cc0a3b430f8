/* RAM backend: an anonymous zeroed mapping; every I/O completes synchronously. Discard gives
 * whole pages back with madvise(MADV_DONTNEED) (they read back as zeros) and zeroes the
 * partial pages at the edges, so a page is the physical block. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/bs.h"

struct ram_priv {
	uint8_t *mem;
	size_t page;
};

static int ram_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err, size_t errlen)
{
	struct ram_priv *p = dev->priv;

	if (cfg->size_bytes < cfg->block_size) {
		snprintf(err, errlen, "RAM backend needs a size of at least one block");
		return -EINVAL;
	}
	p->page = (size_t)sysconf(_SC_PAGESIZE);
	p->mem =
	    mmap(NULL, cfg->size_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->mem == MAP_FAILED) {
		int rc = -errno;

		snprintf(err, errlen, "mmap %llu bytes: %s", (unsigned long long)cfg->size_bytes,
			 strerror(-rc));
		return rc;
	}
	dev->size = cfg->size_bytes;
	dev->phys_block_size = (uint32_t)p->page; /* discard works in whole pages */
	return 0;
}

static void ram_close(struct bs_dev *dev)
{
	struct ram_priv *p = dev->priv;

	munmap(p->mem, dev->size);
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

	if (io->offset > dev->size || io->len > dev->size - io->offset)
		return -EINVAL;
	switch (io->op) {
	case BS_OP_READ:
		memcpy(io->buf, at, io->len);
		return 0;
	case BS_OP_WRITE:
		memcpy(at, io->buf, io->len);
		return 0;
	case BS_OP_WRITE_SAME:
		for (uint64_t pos = 0; pos < io->len; pos += io->pattern_len) {
			uint64_t n =
			    io->len - pos < io->pattern_len ? io->len - pos : io->pattern_len;

			memcpy(at + pos, io->buf, n);
		}
		return 0;
	case BS_OP_WRITE_ZEROES: /* zero pages read as zeros: no need to touch them */
	case BS_OP_DISCARD:
		ram_discard(p, io->offset, io->len);
		return 0;
	case BS_OP_FLUSH:
		return 0;
	}
	return -EINVAL;
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
    .type = SCSI_BACKEND_RAM,
    .priv_size = sizeof(struct ram_priv),
    .caps = BS_CAP_DISCARD | BS_CAP_DISCARD_ZEROES | BS_CAP_LBA_STATUS,
    .open = ram_open,
    .close = ram_close,
    .submit = ram_submit,
    .map = ram_map,
    .lba_status = ram_lba_status,
};
