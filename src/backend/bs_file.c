/* File and block-device backends. Both keep a buffered fd and, when the kernel accepts it, an
 * O_DIRECT fd used for I/O whose buffer, offset and length are aligned. I/O goes through the
 * caller's bs_thread ring, or synchronously without one. Files discard with
 * fallocate(PUNCH_HOLE) (reads then return zeros); block devices with BLKDISCARD, zero with
 * BLKZEROOUT, synchronously (rare).
 *
 * A file on a memory file system (tmpfs, ramfs) does its small I/O inline, like the RAM
 * backend: such I/O is a memory copy that never waits for a device, and io_uring cannot do it
 * inline (tmpfs refuses RWF_NOWAIT), so every request would take a trip through an io-wq
 * thread and an eventfd wake-up (at QD1 that made a tmpfs LUN slower than tgt's thread pool).
 * Large transfers still go through the ring: there the copy is the work, and an io-wq thread
 * does it on another core while this loop serves the network. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend/bs.h"

#define BS_MEMFS_INLINE (64u * 1024)

struct file_priv {
	int fd;	 /* buffered */
	int dfd; /* O_DIRECT, or -1 */
	uint32_t dio_align;
	bool block;
	bool memfs; /* on tmpfs/ramfs: I/O up to BS_MEMFS_INLINE runs inline */
};

static int direct_probe(const char *path, int flags, uint64_t size, uint32_t *align)
{
	static const uint32_t aligns[] = {512, 4096};
	int dfd = open(path, flags | O_DIRECT | O_CLOEXEC);
	void *buf;

	if (dfd < 0)
		return -1;
	if (size < 4096 || posix_memalign(&buf, 4096, 4096)) {
		close(dfd);
		return -1;
	}
	for (size_t i = 0; i < 2; i++) {
		if (pread(dfd, buf, aligns[i], 0) == (ssize_t)aligns[i]) {
			*align = aligns[i];
			free(buf);
			return dfd;
		}
	}
	free(buf);
	close(dfd);
	return -1;
}

static bool on_memfs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 &&
	       ((uint32_t)sf.f_type == TMPFS_MAGIC || (uint32_t)sf.f_type == RAMFS_MAGIC);
}

static int open_common(struct bs_dev *dev, const struct bs_open_cfg *cfg, bool block, char *err,
		       size_t errlen)
{
	struct file_priv *p = dev->priv;
	int flags = cfg->readonly ? O_RDONLY : O_RDWR;
	struct stat st;
	int rc;

	p->dfd = -1;
	p->block = block;
	if (!cfg->path) {
		snprintf(err, errlen, "%s backend needs a path", block ? "block" : "file");
		return -EINVAL;
	}
	p->fd = open(
	    cfg->path,
	    flags | O_CLOEXEC | (!block && !cfg->readonly && cfg->size_bytes ? O_CREAT : 0), 0644);
	if (p->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "open %s: %s", cfg->path, strerror(errno));
		return rc;
	}
	if (fstat(p->fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "stat %s: %s", cfg->path, strerror(errno));
		goto fail;
	}
	if (block) {
		uint64_t sz;

		if (!S_ISBLK(st.st_mode)) {
			rc = -ENOTBLK;
			snprintf(err, errlen, "%s is not a block device", cfg->path);
			goto fail;
		}
		if (ioctl(p->fd, BLKGETSIZE64, &sz) < 0) {
			rc = -errno;
			snprintf(err, errlen, "BLKGETSIZE64 %s: %s", cfg->path, strerror(errno));
			goto fail;
		}
		dev->size = cfg->size_bytes && cfg->size_bytes < sz ? cfg->size_bytes : sz;
		unsigned int pbs = 0;

		if (ioctl(p->fd, BLKPBSZGET, &pbs) == 0)
			dev->phys_block_size = pbs;
	} else {
		if (!S_ISREG(st.st_mode)) {
			rc = -EINVAL;
			snprintf(err, errlen, "%s is not a regular file", cfg->path);
			goto fail;
		}
		if (cfg->size_bytes > (uint64_t)st.st_size) {
			if (cfg->readonly || ftruncate(p->fd, (off_t)cfg->size_bytes) < 0) {
				rc = cfg->readonly ? -EINVAL : -errno;
				snprintf(err, errlen, "cannot extend %s to %llu bytes", cfg->path,
					 (unsigned long long)cfg->size_bytes);
				goto fail;
			}
			st.st_size = (off_t)cfg->size_bytes;
		}
		dev->size = (uint64_t)st.st_size;
		/* the file system's allocation unit: what a hole punch frees whole */
		dev->phys_block_size = (uint32_t)st.st_blksize;
		p->memfs = on_memfs(p->fd);
	}
	if (dev->size < cfg->block_size) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s is smaller than one block", cfg->path);
		goto fail;
	}
	p->dfd = direct_probe(cfg->path, flags, dev->size, &p->dio_align);
	return 0;
fail:
	close(p->fd);
	return rc;
}

static int file_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err, size_t errlen)
{
	return open_common(dev, cfg, false, err, errlen);
}

static bool discard_supported(int fd)
{
	struct stat st;
	char path[96];
	unsigned long long v = 0;
	FILE *f;

	if (fstat(fd, &st) < 0)
		return false;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/discard_max_bytes",
		 major(st.st_rdev), minor(st.st_rdev));
	f = fopen(path, "re");
	if (!f) {
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/discard_max_bytes",
			 major(st.st_rdev), minor(st.st_rdev));
		f = fopen(path, "re");
	}
	if (!f)
		return false;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v > 0;
}

static int block_open(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err, size_t errlen)
{
	struct file_priv *p = dev->priv;
	int rc = open_common(dev, cfg, true, err, errlen);

	if (rc < 0)
		return rc;
	if (discard_supported(p->fd))
		dev->caps |= BS_CAP_DISCARD;
	return 0;
}

static void file_close(struct bs_dev *dev)
{
	struct file_priv *p = dev->priv;

	if (p->dfd >= 0)
		close(p->dfd);
	close(p->fd);
}

static int pick_fd(const struct file_priv *p, const struct bs_io *io)
{
	uint64_t mask = p->dio_align - 1;

	if (p->dfd < 0 || io->op == BS_OP_WRITE_SAME)
		return p->fd;
	if (io->op != BS_OP_READ && io->op != BS_OP_WRITE)
		return p->fd;
	if (((uintptr_t)io->buf | io->offset | io->len) & mask)
		return p->fd;
	return p->dfd;
}

static int block_ioctl(struct file_priv *p, struct bs_io *io)
{
	uint64_t range[2] = {io->offset, io->len};

	if (ioctl(p->fd, io->op == BS_OP_DISCARD ? BLKDISCARD : BLKZEROOUT, range) < 0)
		return -errno;
	if ((io->flags & BS_IO_FUA) && fdatasync(p->fd) < 0)
		return -errno;
	return 0;
}

static void file_submit(struct bs_dev *dev, struct bs_thread *t, struct bs_io *io)
{
	struct file_priv *p = dev->priv;
	uint64_t size = atomic_load_explicit(&dev->size, memory_order_relaxed);

	if (io->offset > size || io->len > size - io->offset) {
		io->result = -EINVAL;
		io->cb(io);
		return;
	}
	io->fd = pick_fd(p, io);
	if (p->block && (io->op == BS_OP_DISCARD || io->op == BS_OP_WRITE_ZEROES)) {
		io->result = block_ioctl(p, io);
		io->cb(io);
		return;
	}
	if (!t || (p->memfs && io->len <= BS_MEMFS_INLINE)) {
		io->result = bs_sync_fd_io(io);
		io->cb(io);
		return;
	}
	bs_uring_queue(t, io);
}

static int file_lba_status(struct bs_dev *dev, uint64_t offset, uint64_t *run, bool *mapped)
{
	struct file_priv *p = dev->priv;
	off_t data = lseek(p->fd, (off_t)offset, SEEK_DATA), end;

	if (data < 0 && errno != ENXIO)
		return -errno;
	if (data < 0 || (uint64_t)data >= dev->size) {
		*mapped = false;
		*run = dev->size - offset;
		return 0;
	}
	if ((uint64_t)data > offset) {
		*mapped = false;
		*run = (uint64_t)data - offset;
		return 0;
	}
	end = lseek(p->fd, (off_t)offset, SEEK_HOLE);
	if (end < 0)
		return -errno;
	*mapped = true;
	*run = ((uint64_t)end > dev->size ? dev->size : (uint64_t)end) - offset;
	return 0;
}

int bs_file_debug_set_fd(struct bs_dev *dev, int newfd)
{
	struct file_priv *p = dev->priv;

	if (dev->ops != &bs_file_ops && dev->ops != &bs_block_ops)
		return -EINVAL;
	if (dup3(newfd, p->fd, O_CLOEXEC) < 0)
		return -errno;
	if (p->dfd >= 0) {
		close(p->dfd);
		p->dfd = -1;
	}
	return 0;
}

static int file_grow(struct bs_dev *dev, uint64_t size, char *err, size_t errlen)
{
	struct file_priv *p = dev->priv;
	struct stat st;
	uint64_t have;

	if (p->block) {
		if (ioctl(p->fd, BLKGETSIZE64, &have) < 0) {
			snprintf(err, errlen, "BLKGETSIZE64: %s", strerror(errno));
			return -errno;
		}
		if (have < size) {
			snprintf(err, errlen, "the device holds only %llu bytes",
				 (unsigned long long)have);
			return -ENOSPC;
		}
		return 0;
	}
	if (fstat(p->fd, &st) < 0) {
		snprintf(err, errlen, "fstat: %s", strerror(errno));
		return -errno;
	}
	if ((uint64_t)st.st_size < size && ftruncate(p->fd, (off_t)size) < 0) {
		int e = errno;
		snprintf(err, errlen, "extending the file to %llu bytes: %s",
			 (unsigned long long)size, strerror(e));
		return -e;
	}
	return 0;
}

/* The file system the file lives in is the store: its capacity and what an unprivileged
 * writer may still allocate (f_bavail), and the blocks the file holds (sparse: what was
 * written and not punched out). Two system calls, no I/O. */
static int file_space(struct bs_dev *dev, struct bs_space *out)
{
	struct file_priv *p = dev->priv;
	struct statvfs sv;
	struct stat st;

	if (fstatvfs(p->fd, &sv) < 0 || fstat(p->fd, &st) < 0)
		return -errno;
	out->total = (uint64_t)sv.f_blocks * sv.f_frsize;
	out->avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	out->used = (uint64_t)st.st_blocks * 512;
	if (!out->total)
		return -EOPNOTSUPP; /* a file system that keeps no count */
	if (out->avail > out->total)
		out->avail = out->total;
	return 0;
}

const struct bs_ops bs_file_ops = {
    .name = "file",
    .type = BS_TYPE_FILE,
    .priv_size = sizeof(struct file_priv),
    .caps = BS_CAP_DISCARD | BS_CAP_DISCARD_ZEROES | BS_CAP_ASYNC | BS_CAP_LBA_STATUS,
    .open = file_open,
    .close = file_close,
    .submit = file_submit,
    .lba_status = file_lba_status,
    .grow = file_grow,
    .space = file_space,
};

const struct bs_ops bs_block_ops = {
    .name = "block",
    .type = BS_TYPE_BLOCK,
    .priv_size = sizeof(struct file_priv),
    .caps = BS_CAP_ASYNC,
    .open = block_open,
    .close = file_close,
    .submit = file_submit,
    .grow = file_grow,
};
