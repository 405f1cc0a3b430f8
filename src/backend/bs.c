/* Backend registry, device life, and the synchronous fd I/O path shared by file and block. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend/bs.h"
#include "backend/bs_rbd.h"

static const struct bs_ops *const bs_registry[] = {
    &bs_ram_ops, &bs_file_ops, &bs_block_ops, &bs_error_ops,
    BS_RBD_OPS, /* NULL in a build without librbd */
};

const struct bs_ops *bs_ops_by_type(enum bs_type type)
{
	for (size_t i = 0; i < sizeof(bs_registry) / sizeof(bs_registry[0]); i++)
		if (bs_registry[i] && bs_registry[i]->type == type)
			return bs_registry[i];
	return NULL;
}

const struct bs_ops *bs_ops_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(bs_registry) / sizeof(bs_registry[0]); i++)
		if (bs_registry[i] && strcmp(bs_registry[i]->name, name) == 0)
			return bs_registry[i];
	return NULL;
}

int bs_dev_open(const struct bs_ops *ops, const struct bs_open_cfg *cfg, struct bs_dev **out,
		char *err, size_t errlen)
{
	struct bs_dev *dev;
	int rc;

	if (!ops) {
		snprintf(err, errlen, "unknown backend");
		return -EINVAL;
	}
	if (cfg->block_size != 512 && cfg->block_size != 4096) {
		snprintf(err, errlen, "block size %u not supported (512 or 4096)", cfg->block_size);
		return -EINVAL;
	}
	dev = calloc(1, sizeof(*dev) + ((ops->priv_size + 15) & ~(size_t)15));
	if (!dev) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	dev->ops = ops;
	dev->block_size = cfg->block_size;
	dev->readonly = cfg->readonly;
	dev->caps = ops->caps;
	dev->priv = ops->priv_size ? (void *)(dev + 1) : NULL;
	if (posix_memalign((void **)&dev->zero_block, 4096, cfg->block_size)) {
		free(dev);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memset(dev->zero_block, 0, cfg->block_size);
	rc = ops->open(dev, cfg, err, errlen);
	if (rc < 0) {
		free(dev->zero_block);
		free(dev);
		return rc;
	}
	dev->size = dev->size - dev->size % dev->block_size;
	/* A physical block is a power-of-two number of logical blocks, at most 2^15 (the 4-bit
	 * exponent of READ CAPACITY(16)); anything else the backend found is ignored. */
	if (dev->phys_block_size < dev->block_size || dev->phys_block_size % dev->block_size ||
	    (dev->phys_block_size & (dev->phys_block_size - 1)) ||
	    dev->phys_block_size / dev->block_size > (1u << 15))
		dev->phys_block_size = dev->block_size;
	*out = dev;
	return 0;
}

int bs_dev_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg)
{
	return dev->ops->on_ready ? dev->ops->on_ready(dev, cb, arg) : 0;
}

int bs_dev_shrink(struct bs_dev *dev, uint64_t size, char *err, size_t errlen)
{
	int r;

	if (!dev->ops->grow || !dev->ops->on_resize) {
		snprintf(err, errlen, "a %s backend cannot shrink online", dev->ops->name);
		return -EOPNOTSUPP;
	}
	if (dev->readonly) {
		snprintf(err, errlen, "the LUN is read-only");
		return -EROFS;
	}
	if (size == 0 || size % dev->block_size || size >= dev->size) {
		snprintf(err, errlen, "%llu bytes: not a smaller multiple of the block size",
			 (unsigned long long)size);
		return -EINVAL;
	}
	r = dev->ops->grow(dev, size, err, errlen);
	if (r == 0)
		dev->size = size;
	return r;
}

int bs_dev_snap(struct bs_dev *dev, struct bs_snap_req *req)
{
	if (!dev->ops->snap) {
		snprintf(req->err, sizeof(req->err), "a %s LUN has no snapshots (only RBD LUNs)",
			 dev->ops->name);
		return -EOPNOTSUPP;
	}
	return dev->ops->snap(dev, req);
}

void bs_dev_on_resize(struct bs_dev *dev, bs_ready_cb cb, void *arg)
{
	if (dev->ops->on_resize)
		dev->ops->on_resize(dev, cb, arg);
}

void bs_dev_close(struct bs_dev *dev)
{
	if (!dev)
		return;
	dev->ops->close(dev);
	free(dev->zero_block);
	free(dev);
}

static int sync_rw(struct bs_io *io)
{
	uint64_t done = 0;
	int flags = (io->flags & BS_IO_FUA) ? RWF_DSYNC : 0;

	while (done < io->len) {
		size_t chunk = (size_t)(io->len - done);
		ssize_t n;

		if (chunk > (1u << 30))
			chunk = 1u << 30;
		if (io->op == BS_OP_READ) {
			n = pread(io->fd, io->buf + done, chunk, (off_t)(io->offset + done));
		} else {
			struct iovec iov = {.iov_base = io->buf + done, .iov_len = chunk};
			n = pwritev2(io->fd, &iov, 1, (off_t)(io->offset + done), flags);
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

static int sync_write_same(struct bs_io *io)
{
	struct bs_io one = *io;
	uint64_t pos;

	one.op = BS_OP_WRITE;
	one.len = io->pattern_len;
	for (pos = 0; pos < io->len; pos += io->pattern_len) {
		int rc;

		one.offset = io->offset + pos;
		if (io->len - pos < io->pattern_len)
			one.len = io->len - pos;
		rc = sync_rw(&one);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int bs_sync_fd_io(struct bs_io *io)
{
	switch (io->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
		return sync_rw(io);
	case BS_OP_WRITE_SAME:
		return sync_write_same(io);
	case BS_OP_WRITE_ZEROES:
		if (fallocate(io->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)io->offset,
			      (off_t)io->len) == 0) {
			if ((io->flags & BS_IO_FUA) && fdatasync(io->fd) < 0)
				return -errno;
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != EINVAL)
			return -errno;
		io->pattern_len = io->dev->block_size;
		io->buf = io->dev->zero_block;
		return sync_write_same(io);
	case BS_OP_DISCARD:
		if (fallocate(io->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)io->offset,
			      (off_t)io->len) < 0)
			return -errno;
		return 0;
	case BS_OP_FLUSH:
		return fdatasync(io->fd) < 0 ? -errno : 0;
	}
	return -EINVAL;
}

int bs_dev_grow(struct bs_dev *dev, uint64_t size, char *err, size_t errlen)
{
	int r;

	if (!dev->ops->grow) {
		snprintf(err, errlen, "a %s backend cannot grow online", dev->ops->name);
		return -EOPNOTSUPP;
	}
	if (dev->readonly) {
		snprintf(err, errlen, "the LUN is read-only");
		return -EROFS;
	}
	if (size % dev->block_size || size <= dev->size) {
		snprintf(err, errlen, "%llu bytes: not a larger multiple of the block size",
			 (unsigned long long)size);
		return -EINVAL;
	}
	r = dev->ops->grow(dev, size, err, errlen);
	if (r == 0)
		dev->size = size;
	return r;
}

int bs_dev_space(struct bs_dev *dev, struct bs_space *out)
{
	if (!dev || !dev->ops->space)
		return -EOPNOTSUPP;
	return dev->ops->space(dev, out);
}
