/* Backends: registry, open errors, RAM operations, the file backend through a small io_uring
 * (pending list when the ring is full, completions on the loop), WRITE SAME across several
 * submissions, discard reading back zeros, misaligned buffers with O_DIRECT, error results,
 * and the block backend on a loop device when one can be set up. */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "backend/bs.h"
#include "event/loop.h"
#include "tap.h"

#define BSZ 512

struct tio {
	struct bs_io io;
	int ndone;
};

static void tio_cb(struct bs_io *io)
{
	((struct tio *)io)->ndone++;
}

static void tio_set(struct tio *t, struct bs_dev *dev, uint8_t op, uint64_t off, uint64_t len,
		    void *buf, uint8_t flags)
{
	memset(t, 0, sizeof(*t));
	t->io.dev = dev;
	t->io.op = op;
	t->io.offset = off;
	t->io.len = len;
	t->io.buf = buf;
	t->io.flags = flags;
	t->io.pattern_len = BSZ;
	t->io.result = 1;
	t->io.cb = tio_cb;
}

/* Submit and wait (running the loop when there is a thread). */
static int tio_run(struct ev_loop *loop, struct bs_thread *thr, struct tio *t)
{
	bs_submit(thr, &t->io);
	for (int i = 0; i < 1000 && !t->ndone; i++)
		ev_loop_run_once(loop, 10);
	CHECK_EQ(t->ndone, 1);
	return t->io.result;
}

static void test_registry(void)
{
	char err[128];
	struct bs_dev *dev;
	struct bs_open_cfg cfg = {.size_bytes = 1 << 20, .block_size = BSZ};

	printf("# registry and open errors\n");
	CHECK(bs_ops_by_name("ram") == &bs_ram_ops);
	CHECK(bs_ops_by_name("file") == &bs_file_ops);
	CHECK(bs_ops_by_name("block") == &bs_block_ops);
	CHECK(bs_ops_by_name("nope") == NULL);
	CHECK(bs_ops_by_type(BS_TYPE_FILE) == &bs_file_ops);
	CHECK(bs_ops_by_type(BS_TYPE_BLOCK) == &bs_block_ops);
	cfg.block_size = 1000;
	CHECK_EQ(bs_dev_open(&bs_ram_ops, &cfg, &dev, err, sizeof(err)), -EINVAL);
	cfg.block_size = BSZ;
	cfg.size_bytes = 0;
	CHECK_EQ(bs_dev_open(&bs_ram_ops, &cfg, &dev, err, sizeof(err)), -EINVAL);
	CHECK_EQ(bs_dev_open(&bs_file_ops, &cfg, &dev, err, sizeof(err)), -EINVAL); /* no path */
	cfg.path = "/nonexistent/dir/file";
	cfg.size_bytes = 4096;
	CHECK_EQ(bs_dev_open(&bs_file_ops, &cfg, &dev, err, sizeof(err)), -ENOENT);
	cfg.path = "/dev/null";
	CHECK_EQ(bs_dev_open(&bs_block_ops, &cfg, &dev, err, sizeof(err)), -ENOTBLK);
	CHECK(strlen(err) > 0);
}

static void test_ram(void)
{
	struct bs_open_cfg cfg = {.size_bytes = 64 * 4096, .block_size = BSZ};
	static uint8_t buf[16384], chk[16384];
	struct bs_dev *dev;
	char err[128];
	struct tio t;
	uint64_t run;
	bool mapped;

	printf("# RAM backend\n");
	CHECK_EQ(bs_dev_open(&bs_ram_ops, &cfg, &dev, err, sizeof(err)), 0);
	CHECK_EQ(dev->size, 64 * 4096);
	CHECK(dev->caps & BS_CAP_DISCARD_ZEROES);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 1);
	tio_set(&t, dev, BS_OP_WRITE, 1000, 16384, buf, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	tio_set(&t, dev, BS_OP_READ, 1000, 16384, chk, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	CHECK_MEM(chk, buf, 16384);
	CHECK_EQ(dev->ops->lba_status(dev, 4096, &run, &mapped), 0);
	CHECK(mapped);
	/* Discard a range covering whole pages and partial edges: all zeros. */
	tio_set(&t, dev, BS_OP_DISCARD, 1024, 12288, NULL, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	tio_set(&t, dev, BS_OP_READ, 1000, 16384, chk, 0);
	tio_run(NULL, NULL, &t);
	CHECK_MEM(chk, buf, 24);
	memset(buf + 24, 0, 12288);
	CHECK_MEM(chk, buf, 16384);
	CHECK_EQ(dev->ops->lba_status(dev, 4096, &run, &mapped), 0);
	CHECK(!mapped);
	CHECK_EQ(run, 13312 - 4096); /* zeros from 1024 to 13312 */
	/* WRITE SAME and WRITE ZEROES */
	memset(buf, 0xc3, BSZ);
	tio_set(&t, dev, BS_OP_WRITE_SAME, 0, 10 * BSZ, buf, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	tio_set(&t, dev, BS_OP_READ, 0, 10 * BSZ, chk, 0);
	tio_run(NULL, NULL, &t);
	memset(buf, 0xc3, 10 * BSZ);
	CHECK_MEM(chk, buf, 10 * BSZ);
	tio_set(&t, dev, BS_OP_WRITE_ZEROES, BSZ, BSZ, NULL, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	tio_set(&t, dev, BS_OP_READ, 0, 3 * BSZ, chk, 0);
	tio_run(NULL, NULL, &t);
	memset(buf + BSZ, 0, BSZ);
	CHECK_MEM(chk, buf, 3 * BSZ);
	tio_set(&t, dev, BS_OP_FLUSH, 0, 0, NULL, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	/* Outside the device */
	tio_set(&t, dev, BS_OP_READ, 64 * 4096 - 512, 1024, chk, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), -EINVAL);
	bs_dev_close(dev);
}

struct pin_writer {
	struct tio t;
	atomic_bool done;
};

static void *pin_writer_main(void *arg)
{
	struct pin_writer *w = arg;

	tio_run(NULL, NULL, &w->t);
	atomic_store(&w->done, true);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* The RAM backend's pin (bs.h): a write into pinned bytes waits for unpin, on another thread;
 * a pin over bytes a write is changing fails with -EBUSY instead of waiting; other bytes are
 * not affected. Counters are per 1 MiB chunk. */
/* A RAM LUN grows in its reservation: the memory does not move (a pointer from map() stays
 * valid while a reader on another thread keeps using it), the new blocks read as zeros, the
 * old data stays, and past the reservation it refuses. */
struct ram_reader {
	struct bs_dev *dev;
	atomic_bool stop;
	atomic_int reads;
};

static void *ram_reader_main(void *arg)
{
	struct ram_reader *r = arg;
	uint8_t b[BSZ];

	while (!atomic_load(&r->stop)) {
		struct tio t;
		uint64_t end = r->dev->size;
		tio_set(&t, r->dev, BS_OP_READ, end - BSZ, BSZ, b, 0);
		bs_submit(NULL, &t.io);
		if (t.io.result == 0)
			atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

static void test_ram_grow(void)
{
	uint64_t size0 = 65536 + BSZ, reserved = (size0 * 8 + 4095) & ~4095ULL;
	struct bs_open_cfg cfg = {.size_bytes = size0, .block_size = BSZ};
	static uint8_t buf[BSZ], chk[65536];
	struct ram_reader rd = {0};
	const uint8_t *m0;
	struct bs_dev *dev;
	pthread_t th;
	char err[256];
	struct tio t;

	printf("# RAM backend grows online\n");
	CHECK_EQ(bs_dev_open(&bs_ram_ops, &cfg, &dev, err, sizeof(err)), 0);
	memset(buf, 0x5a, BSZ);
	tio_set(&t, dev, BS_OP_WRITE, size0 - BSZ, BSZ, buf, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	m0 = dev->ops->map(dev, 0, BSZ);
	rd.dev = dev;
	CHECK_EQ(pthread_create(&th, NULL, ram_reader_main, &rd), 0);
	for (uint64_t s = size0 + BSZ; s <= size0 + 64 * BSZ; s += 7 * BSZ) {
		int before = atomic_load(&rd.reads);
		for (int i = 0; i < 100000 && atomic_load(&rd.reads) < before + 2; i++)
			sched_yield(); /* the reader reads the end of every size */
		CHECK_EQ(bs_dev_grow(dev, s, err, sizeof(err)), 0);
	}
	CHECK_EQ(bs_dev_grow(dev, reserved, err, sizeof(err)), 0);
	atomic_store(&rd.stop, true);
	pthread_join(th, NULL);
	CHECK(atomic_load(&rd.reads) > 0);
	CHECK_EQ(dev->size, reserved);
	CHECK(dev->ops->map(dev, 0, BSZ) == m0);
	tio_set(&t, dev, BS_OP_READ, size0 - BSZ, BSZ, chk, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	CHECK_MEM(chk, buf, BSZ);
	tio_set(&t, dev, BS_OP_READ, size0, 65536, chk, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	memset(buf, 0, BSZ);
	CHECK_MEM(chk, buf, BSZ);
	CHECK_MEM(chk + 65536 - BSZ, buf, BSZ);
	memset(buf, 0xa5, BSZ);
	tio_set(&t, dev, BS_OP_WRITE, reserved - BSZ, BSZ, buf, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	CHECK_EQ(bs_dev_grow(dev, reserved + BSZ, err, sizeof(err)), -ENOSPC);
	CHECK(strstr(err, "grows online up to") != NULL);
	CHECK_EQ(dev->size, reserved);
	bs_dev_close(dev);
}

static void test_ram_pin(void)
{
	const uint64_t MB = 1 << 20;
	struct bs_open_cfg cfg = {.size_bytes = 4 * MB, .block_size = BSZ};
	static uint8_t buf[2 << 20];
	static struct pin_writer w;
	const uint8_t *base;
	struct bs_dev *dev;
	char err[128];
	pthread_t th;
	int rc = 0;

	printf("# RAM backend: pin against writers on other threads\n");
	CHECK_EQ(bs_dev_open(&bs_ram_ops, &cfg, &dev, err, sizeof(err)), 0);
	base = dev->ops->map(dev, 0, 4 * MB);
	CHECK(base != NULL);
	CHECK_EQ(dev->ops->pin(dev, base + 4 * MB - 512, 1024), -EINVAL); /* past the end */
	CHECK_EQ(dev->ops->pin(dev, base, 0), -EINVAL);
	memset(buf, 0x5a, sizeof(buf));

	/* a write into a pinned chunk waits until the pin goes */
	CHECK_EQ(dev->ops->pin(dev, base + 2 * MB + 4096, 8192), 0);
	atomic_store(&w.done, false);
	tio_set(&w.t, dev, BS_OP_WRITE, MB + MB / 2, MB, buf, 0); /* chunks 1 and 2 */
	CHECK_EQ(pthread_create(&th, NULL, pin_writer_main, &w), 0);
	/* the writer is counted in chunk 1 before it waits on chunk 2: a pin there fails */
	for (int i = 0; i < 5000; i++) {
		rc = dev->ops->pin(dev, base + MB, 512);
		if (rc != 0)
			break;
		dev->ops->unpin(dev, base + MB, 512);
		sleep_ms(1);
	}
	CHECK_EQ(rc, -EBUSY);
	sleep_ms(50);
	CHECK(!atomic_load(&w.done)); /* still waiting for the pin */
	CHECK(base[2 * MB] == 0);
	/* a write elsewhere goes on meanwhile */
	{
		struct tio t2;

		tio_set(&t2, dev, BS_OP_WRITE, 3 * MB, 4096, buf, 0);
		CHECK_EQ(tio_run(NULL, NULL, &t2), 0);
		CHECK(base[3 * MB] == 0x5a);
	}
	dev->ops->unpin(dev, base + 2 * MB + 4096, 8192);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK(atomic_load(&w.done));
	CHECK_EQ(w.t.io.result, 0);
	CHECK(base[MB + MB / 2] == 0x5a && base[2 * MB + MB / 2 - 1] == 0x5a);
	/* once the write is done, pins succeed again */
	CHECK_EQ(dev->ops->pin(dev, base + MB, 2 * MB), 0);
	dev->ops->unpin(dev, base + MB, 2 * MB);
	bs_dev_close(dev);
}

static void test_file_uring(struct ev_loop *loop)
{
	enum { N = 32, CH = 4096 };
	static struct tio ios[N];
	static uint8_t data[40 * CH], rd[40 * CH + 1];
	char path[] = "/tmp/ix-bs-XXXXXX", err[128];
	struct bs_open_cfg cfg = {.size_bytes = 1 << 20, .block_size = BSZ};
	struct bs_thread *thr;
	struct bs_dev *dev;
	struct tio t;
	int fd, rc = 0, alldone;
	uint64_t run;
	bool mapped;

	printf("# file backend through io_uring\n");
	fd = mkstemp(path);
	close(fd);
	cfg.path = path;
	CHECK_EQ(bs_dev_open(&bs_file_ops, &cfg, &dev, err, sizeof(err)), 0);
	CHECK_EQ(dev->size, 1 << 20);
	thr = bs_thread_new(loop, 4, &rc);
	CHECK(thr != NULL);
	if (!thr)
		return;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i / CH + i * 3);
	/* 32 writes on a 4-entry ring: 4 in flight, 28 on the pending list. */
	for (int i = 0; i < N; i++) {
		tio_set(&ios[i], dev, BS_OP_WRITE, (uint64_t)i * CH, CH, data + i * CH,
			i == 5 ? BS_IO_FUA : 0);
		bs_submit(thr, &ios[i].io);
	}
	CHECK_EQ(bs_thread_busy(thr), N);
	CHECK_EQ(ios[0].ndone, 0);
	for (int k = 0; k < 2000; k++) {
		alldone = 1;
		for (int i = 0; i < N; i++)
			alldone &= ios[i].ndone == 1;
		if (alldone)
			break;
		ev_loop_run_once(loop, 10);
	}
	CHECK(alldone);
	CHECK_EQ(bs_thread_busy(thr), 0);
	for (int i = 0; i < N; i++)
		rc |= ios[i].io.result;
	CHECK_EQ(rc, 0);
	fd = open(path, O_RDONLY);
	CHECK_EQ(pread(fd, rd, N * CH, 0), N * CH);
	close(fd);
	CHECK_MEM(rd, data, N * CH);
	/* Read back through the ring into a misaligned buffer (O_DIRECT falls back). */
	memset(rd, 0, sizeof(rd));
	tio_set(&t, dev, BS_OP_READ, CH, 3 * CH, rd + 1, 0);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	CHECK_MEM(rd + 1, data + CH, 3 * CH);
	/* FLUSH, DISCARD -> zeros and a hole, WRITE ZEROES */
	tio_set(&t, dev, BS_OP_FLUSH, 0, 0, NULL, 0);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	tio_set(&t, dev, BS_OP_DISCARD, 2 * CH, 4 * CH, NULL, 0);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	tio_set(&t, dev, BS_OP_READ, 2 * CH, 4 * CH, rd, 0);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	memset(data + 2 * CH, 0, 4 * CH);
	CHECK_MEM(rd, data + 2 * CH, 4 * CH);
	CHECK_EQ(dev->ops->lba_status(dev, 2 * CH, &run, &mapped), 0);
	CHECK(!mapped);
	CHECK_EQ(run, 4 * CH);
	CHECK_EQ(dev->ops->lba_status(dev, 0, &run, &mapped), 0);
	CHECK(mapped);
	CHECK_EQ(run, 2 * CH);
	tio_set(&t, dev, BS_OP_WRITE_ZEROES, 10 * CH, CH, NULL, BS_IO_FUA);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	tio_set(&t, dev, BS_OP_READ, 9 * CH, 3 * CH, rd, 0);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	memset(data + 10 * CH, 0, CH);
	CHECK_MEM(rd, data + 9 * CH, 3 * CH);
	/* WRITE SAME over 300 blocks: several submissions of the pattern iovecs */
	memset(data, 0x5e, BSZ);
	tio_set(&t, dev, BS_OP_WRITE_SAME, 200 * CH, 300 * BSZ, data, 0);
	CHECK_EQ(tio_run(loop, thr, &t), 0);
	fd = open(path, O_RDONLY);
	CHECK_EQ(pread(fd, rd, 300 * BSZ + 1, 200 * CH), 300 * BSZ + 1);
	close(fd);
	memset(data, 0x5e, 300 * BSZ);
	CHECK_MEM(rd, data, 300 * BSZ);
	CHECK_EQ(rd[300 * BSZ], 0);
	/* Synchronous path (no thread) */
	tio_set(&t, dev, BS_OP_READ, 200 * CH, BSZ, rd, BS_IO_FUA);
	CHECK_EQ(tio_run(NULL, NULL, &t), 0);
	CHECK_EQ(rd[0], 0x5e);
	/* Errors: reads on a write-only fd */
	fd = open(path, O_WRONLY);
	CHECK_EQ(bs_file_debug_set_fd(dev, fd), 0);
	close(fd);
	tio_set(&t, dev, BS_OP_READ, 0, CH, rd, 0);
	CHECK_EQ(tio_run(loop, thr, &t), -EBADF);
	tio_set(&t, dev, BS_OP_READ, 0, CH, rd, 0);
	CHECK_EQ(tio_run(NULL, NULL, &t), -EBADF);
	bs_thread_free(thr);
	bs_dev_close(dev);
	unlink(path);
}

/* The block backend on a loop device, if this environment lets us create one. */
static void test_block(struct ev_loop *loop)
{
	char path[] = "/tmp/ix-bs-blk-XXXXXX", dev_path[32], err[128], why[128];
	struct bs_open_cfg cfg = {.block_size = BSZ};
	static uint8_t buf[8192], rd[8192];
	int bfd, ctl, n, lfd = -1, rc = 0;
	struct bs_thread *thr;
	struct bs_dev *dev;
	struct tio t;

	printf("# block backend on a loop device\n");
	bfd = mkstemp(path);
	if (bfd < 0 || ftruncate(bfd, 4 << 20) < 0) {
		snprintf(why, sizeof(why), "backing file %s: %s", path, strerror(errno));
		goto skip;
	}
	ctl = open("/dev/loop-control", O_RDWR);
	n = ctl >= 0 ? ioctl(ctl, LOOP_CTL_GET_FREE) : -1;
	if (n < 0)
		snprintf(why, sizeof(why), "/dev/loop-control: %s", strerror(errno));
	if (ctl >= 0)
		close(ctl);
	if (n < 0)
		goto skip;
	snprintf(dev_path, sizeof(dev_path), "/dev/loop%d", n);
	lfd = open(dev_path, O_RDWR);
	if (lfd < 0 || ioctl(lfd, LOOP_SET_FD, bfd) < 0) {
		snprintf(why, sizeof(why), "%s: %s", dev_path, strerror(errno));
		goto skip;
	}
	cfg.path = dev_path;
	rc = bs_dev_open(&bs_block_ops, &cfg, &dev, err, sizeof(err));
	CHECK_EQ(rc, 0);
	if (rc == 0) {
		CHECK_EQ(dev->size, 4 << 20);
		thr = bs_thread_new(loop, 8, &rc);
		memset(buf, 0x9a, sizeof(buf));
		tio_set(&t, dev, BS_OP_WRITE, 8192, 8192, buf, BS_IO_FUA);
		CHECK_EQ(tio_run(loop, thr, &t), 0);
		tio_set(&t, dev, BS_OP_READ, 8192, 8192, rd, 0);
		CHECK_EQ(tio_run(loop, thr, &t), 0);
		CHECK_MEM(rd, buf, 8192);
		tio_set(&t, dev, BS_OP_WRITE_ZEROES, 8192, 4096, NULL, 0);
		CHECK_EQ(tio_run(loop, thr, &t), 0);
		tio_set(&t, dev, BS_OP_READ, 8192, 8192, rd, 0);
		CHECK_EQ(tio_run(loop, thr, &t), 0);
		memset(buf, 0, 4096);
		CHECK_MEM(rd, buf, 8192);
		tio_set(&t, dev, BS_OP_FLUSH, 0, 0, NULL, 0);
		CHECK_EQ(tio_run(loop, thr, &t), 0);
		bs_thread_free(thr);
		bs_dev_close(dev);
	}
	ioctl(lfd, LOOP_CLR_FD, 0);
	close(lfd);
	close(bfd);
	unlink(path);
	return;
skip:
	/* no block device can exist here: the block backend's checks are skips, not passes */
	printf("# no loop device: %s\n", why);
	for (int i = 0; i < 9; i++)
		tap_skip(why);
	if (lfd >= 0)
		close(lfd);
	if (bfd >= 0) {
		close(bfd);
		unlink(path);
	}
}

/* A file on tmpfs does its I/O inline even with a thread (no io-wq trip). */
static void test_file_memfs(struct ev_loop *loop)
{
	char path[] = "/dev/shm/ix-bs-XXXXXX", err[128];
	struct bs_open_cfg cfg = {.size_bytes = 1 << 20, .block_size = BSZ};
	static uint8_t buf[8192], rd[8192];
	struct bs_thread *thr;
	struct bs_dev *dev;
	struct statfs sf;
	struct tio t;
	int fd, rc = 0;

	printf("# file backend on tmpfs: inline I/O\n");
	fd = mkstemp(path);
	if (fd < 0 || fstatfs(fd, &sf) < 0 || (uint32_t)sf.f_type != TMPFS_MAGIC) {
		printf("ok %d # SKIP /dev/shm is not a tmpfs here\n", ++tap_n);
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
		return;
	}
	close(fd);
	cfg.path = path;
	CHECK_EQ(bs_dev_open(&bs_file_ops, &cfg, &dev, err, sizeof(err)), 0);
	thr = bs_thread_new(loop, 4, &rc);
	CHECK(thr != NULL);
	if (!thr)
		return;
	memset(buf, 0x3c, sizeof(buf));
	tio_set(&t, dev, BS_OP_WRITE, 4096, sizeof(buf), buf, BS_IO_FUA);
	bs_submit(thr, &t.io);
	CHECK_EQ(t.ndone, 1); /* completed before bs_submit returned */
	CHECK_EQ(t.io.result, 0);
	CHECK_EQ(bs_thread_busy(thr), 0);
	tio_set(&t, dev, BS_OP_READ, 4096, sizeof(rd), rd, 0);
	bs_submit(thr, &t.io);
	CHECK_EQ(t.ndone, 1);
	CHECK_EQ(t.io.result, 0);
	CHECK_MEM(rd, buf, sizeof(rd));
	tio_set(&t, dev, BS_OP_READ, (1 << 20) - 512, 1024, rd, 0); /* past the end */
	bs_submit(thr, &t.io);
	CHECK_EQ(t.ndone, 1);
	CHECK_EQ(t.io.result, -EINVAL);
	bs_thread_free(thr);
	bs_dev_close(dev);
	unlink(path);
}

int main(void)
{
	struct ev_loop *loop = ev_loop_new();

	test_registry();
	test_ram();
	test_ram_pin();
	test_ram_grow();
	test_file_uring(loop);
	test_file_memfs(loop);
	test_block(loop);
	ev_loop_free(loop);
	return tap_done();
}
