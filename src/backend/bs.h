/* Storage backends ("bs_"): the byte-addressed store under a SCSI logical unit.
 *
 * A backend is a const struct bs_ops table registered in one explicit table (bs.c). An opened
 * backend is a struct bs_dev with the backend's private area allocated behind it.
 *
 * I/O: the caller owns a struct bs_io (embedded in its command), fills op/buf/offset/len/flags
 * and cb, and calls bs_submit(). The io completes exactly once through io->cb with io->result
 * set to 0 or -errno, on the submitting thread; cb may run before bs_submit() returns (RAM
 * backend, synchronous fallback, or an immediate error). No allocation happens per I/O.
 *
 * Threads: each worker thread owns one struct bs_thread (an io_uring, an eventfd registered on
 * it and watched by the thread's event loop, and a free list of request structs sized to the
 * ring). A NULL thread means "complete synchronously on the caller's stack" (pread/pwrite);
 * that is how the RAM backend always works and a fallback for the others.
 */
#ifndef IX_BACKEND_BS_H
#define IX_BACKEND_BS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/bs_cfg.h"
#include "util/list.h"

struct ev_loop;
struct bs_dev;
struct bs_thread;
struct bs_io;
struct bs_host;

enum bs_op {
	BS_OP_READ = 0,		/* buf <- [offset, offset+len) */
	BS_OP_WRITE = 1,	/* buf -> [offset, offset+len) */
	BS_OP_WRITE_SAME = 2,	/* the pattern buf[0..pattern_len) repeated over the range */
	BS_OP_WRITE_ZEROES = 3, /* zeros over the range (allocating) */
	BS_OP_DISCARD = 4,	/* deallocate; reads return zeros iff dev->discard_zeroes */
	BS_OP_FLUSH = 5,	/* make all completed writes durable (fdatasync) */
	BS_OP_COMPARE_WRITE = 6, /* only with BS_CAP_COMPARE_WRITE: if the range holds buf[0, len)
				    write buf[len, 2 len) over it, atomically in the backend;
				    else fail with -EILSEQ and set mismatch */
	BS_OP_LBA_STATUS = 7,	 /* only with BS_CAP_LBA_ASYNC: the mapping from offset on, as
				    consecutive struct bs_extent in buf (len bytes of room); the
				    list ends at an extent of length 0 or at the end of buf */
};

/* One run of BS_OP_LBA_STATUS's answer: len bytes, all mapped or all deallocated. */
struct bs_extent {
	uint64_t len;
	uint64_t mapped; /* 1 mapped, 0 deallocated */
};

/* A backend that is not the owner of its device (RBD with the managed exclusive lock:
 * another gateway holds it, or this one was fenced) fails I/O with this; the SCSI layer
 * answers NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE (04/0B) so a
 * multipath initiator takes another path. */
#define BS_ERR_NOT_OWNER (-ENOLCK)

/* A backend whose device is not open yet (RBD started offline: the cluster is unreachable or
 * the image missing, retried in the background) fails I/O with this; the SCSI layer answers
 * NOT READY, LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED (04/03). */
#define BS_ERR_NOT_READY (-EUNATCH)

#define BS_IO_FUA 0x01 /* the write is durable when it completes */

typedef void (*bs_io_cb)(struct bs_io *io);
typedef void (*bs_ready_cb)(struct bs_dev *dev, void *arg);

struct bs_io {
	struct list_head link; /* backend-private: the thread's pending list */
	struct bs_dev *dev;
	uint8_t *buf;
	uint64_t offset; /* bytes */
	uint64_t len;	 /* bytes */
	uint32_t pattern_len;
	uint8_t op;    /* enum bs_op */
	uint8_t flags; /* BS_IO_* */
	int fd;	       /* backend-private */
	int result;    /* out: 0 or -errno */
	uint64_t mismatch;   /* out: COMPARE_WRITE's -EILSEQ: offset of the first byte that
				differs */
	void *bpriv;	     /* backend-private (rbd: the submitting thread's queue) */
	struct bs_io *bnext; /* backend-private (rbd: its completed list) */
	bs_io_cb cb;
};

/* Backend capability bits (bs_ops.caps, refined per device in bs_dev.caps). */
#define BS_CAP_DISCARD	      0x01 /* can deallocate */
#define BS_CAP_DISCARD_ZEROES 0x02 /* deallocated blocks read back as zeros (LBPRZ) */
#define BS_CAP_ASYNC	      0x04 /* completes through a bs_thread's ring when given one */
#define BS_CAP_LBA_STATUS     0x08 /* lba_status reports real mapping */
#define BS_CAP_COMPARE_WRITE  0x10 /* BS_OP_COMPARE_WRITE, within compare_write_ok() ranges */
#define BS_CAP_LBA_ASYNC      0x20 /* BS_OP_LBA_STATUS (instead of the synchronous lba_status) */

/* How full a device's backing store is (bs_ops.space), in bytes. The store is what the
 * device allocates from and may share with others: the file system of a file LUN, the pool of
 * an RBD image. */
struct bs_space {
	uint64_t total; /* the store's capacity (> 0) */
	uint64_t avail; /* what the store can still allocate (<= total) */
	uint64_t used;	/* what this device holds of it; UINT64_MAX: not known */
};

struct bs_open_cfg {
	const char *path;
	const void *backend_cfg; /* the backend's own settings (rbd: pool, image, cluster, as in
				    backend/bs_cfg.h; copied at open), NULL: none */
	/* the context the device lives in, for a backend that needs one (rbd: who keeps the
	 * managed exclusive lock, src/ha/; see backend/bs_rbd.h); NULL: none (rbd refuses the
	 * managed lock) */
	struct bs_host *host;
	const char *owner_group; /* with the managed lock: the devices that change owner
				    together (the target's name); NULL: alone */
	uint64_t size_bytes;
	uint32_t block_size;
	bool readonly;
	const struct bs_err_rule *err_rules; /* error backend: copied at open */
	uint32_t n_err_rules;
};

/* Snapshots and clones of a backing store that has them (RBD; bs_ops.snap, docs/snapshots.md).
 * The caller fills op and its names, and done; the backend runs the request on a thread of its
 * own (never the caller's loop, never a worker's) and calls done(req) there with result (0 or
 * -errno) and, on failure, a message in err. */
enum bs_snap_op {
	BS_SNAP_CREATE,	  /* name */
	BS_SNAP_LIST,	  /* out: list, n (malloc'd, the caller frees list) */
	BS_SNAP_REMOVE,	  /* name; refused (-EBUSY) while protected or with clones */
	BS_SNAP_ROLLBACK, /* name: the image's data and size become the snapshot's */
	BS_SNAP_CLONE,	  /* name into clone_pool/clone_image (pool "": the image's own);
			     protects the snapshot first when only clone v1 is possible */
};

#define BS_SNAP_NAME_MAX 128

struct bs_snap_info {
	char name[BS_SNAP_NAME_MAX];
	uint64_t id, size;
	bool protect; /* protected (clone v1 children need it) */
	unsigned children;
};

struct bs_snap_req {
	enum bs_snap_op op;
	char name[BS_SNAP_NAME_MAX];
	char clone_pool[BS_SNAP_NAME_MAX];
	char clone_image[BS_SNAP_NAME_MAX];
	void (*done)(struct bs_snap_req *req);
	void *arg;
	/* out */
	int result;
	char err[256];
	struct bs_snap_info *list;
	size_t n;
	bool protected_now; /* CLONE: the snapshot was protected for it (clone v1) */
	uint32_t call_ms;   /* CREATE: how long the cluster's call took (rbd_snap_create2) */
	char image[BS_SNAP_NAME_MAX * 2]; /* the device's pool/[ns/]image, for messages */
};

struct bs_ops {
	const char *name;
	enum bs_type type;
	size_t priv_size;
	unsigned caps;
	/* Fill dev->size (bytes, a multiple of block_size) and dev->caps. -errno + message. */
	int (*open)(struct bs_dev *dev, const struct bs_open_cfg *cfg, char *err, size_t errlen);
	void (*close)(struct bs_dev *dev);
	/* Start io (see above). t may be NULL. */
	void (*submit)(struct bs_dev *dev, struct bs_thread *t, struct bs_io *io);
	/* Optional: the address of the bytes [offset, offset+len) in the backend's own memory, for
	 * reads without a copy; valid until close. NULL if out of range or not mappable. */
	const uint8_t *(*map)(struct bs_dev *dev, uint64_t offset, uint64_t len);
	/* With map: keep every write out of map()ped bytes [at, at + len) until unpin, so a
	 * reader on another thread may checksum them and then hand the same bytes to the kernel
	 * (a data digest over a zero-copy Data-In). Never waits: returns 0 when pinned, -EBUSY
	 * when a write to those bytes is running now (nothing is pinned then). A pin is held only
	 * for a bounded stretch of one function (no callbacks, no waiting) on the reader's
	 * thread; a write that meets one waits for it to go. */
	int (*pin)(struct bs_dev *dev, const uint8_t *at, uint64_t len);
	void (*unpin)(struct bs_dev *dev, const uint8_t *at, uint64_t len);
	/* Synchronous: is the byte range starting at offset mapped? Sets *run to the length of
	 * the run with the same state (> 0). NULL = everything mapped. */
	int (*lba_status)(struct bs_dev *dev, uint64_t offset, uint64_t *run, bool *mapped);
	/* With BS_CAP_COMPARE_WRITE: can the backend compare and write [offset, offset+len) as
	 * one operation? (RBD: not across an object boundary.) */
	bool (*compare_write_ok)(struct bs_dev *dev, uint64_t offset, uint64_t len);
	/* Make the backing store hold at least size bytes (a regular file is extended, a block
	 * device must already be that large; RAM maps more of its reservation). Main thread,
	 * while I/O goes on. NULL: the backend cannot grow. -errno + message. A backend with
	 * on_resize (a store other clients resize too) also takes a smaller size (bs_dev_shrink). */
	int (*grow)(struct bs_dev *dev, uint64_t size, char *err, size_t errlen);
	/* Optional, for a backend whose open may finish later (RBD started offline): 0 when the
	 * device serves now (cb is never called); 1 when it does not yet: cb(dev, arg) runs once,
	 * on a backend thread, when it does (dev->size is then final), and never after close. */
	int (*on_ready)(struct bs_dev *dev, bs_ready_cb cb, void *arg);
	/* Optional: how full the backing store is. Cheap and never waits on the network (a
	 * backend that must ask a cluster answers from its last sample); called off the data
	 * path, on any thread, while I/O goes on. 0, -EAGAIN (nothing known yet), -errno. */
	int (*space)(struct bs_dev *dev, struct bs_space *out);
	/* Optional, for a backing store another client can resize (an RBD image): from now on,
	 * each time it has, dev->size holds the new size (a multiple of block_size) before
	 * cb(dev, arg) runs on a backend thread; never after close. */
	void (*on_resize)(struct bs_dev *dev, bs_ready_cb cb, void *arg);
	/* Optional: start a snapshot request (struct bs_snap_req); 0 when done will be called,
	 * else -errno with the reason in req->err and done not called. Any thread; the device
	 * must stay open until done. */
	int (*snap)(struct bs_dev *dev, struct bs_snap_req *req);
};

struct bs_dev {
	const struct bs_ops *ops;
	_Atomic uint64_t size; /* grows online (bs_dev_grow); every read is one plain load */
	uint32_t block_size;
	uint32_t phys_block_size; /* the unit the medium writes in (READ CAPACITY(16) LBPPBE,
				     Block Limits granularities): a power-of-two multiple of
				     block_size; the backend's open may set it, else block_size */
	unsigned caps;
	bool readonly;
	uint32_t unmap_granularity; /* bytes a deallocation frees whole (Block Limits OPTIMAL
				       UNMAP GRANULARITY); 0 = phys_block_size */
	uint8_t *zero_block; /* block_size zeros, aligned for O_DIRECT */
	void *priv;	     /* ops->priv_size bytes, allocated with the dev */
};

/* The registry. */
const struct bs_ops *bs_ops_by_type(enum bs_type type);
const struct bs_ops *bs_ops_by_name(const char *name);

int bs_dev_open(const struct bs_ops *ops, const struct bs_open_cfg *cfg, struct bs_dev **out,
		char *err, size_t errlen);
void bs_dev_close(struct bs_dev *dev);
/* Grow the device to size bytes (a multiple of the block size, larger than now): the backing
 * store first, then dev->size. -EOPNOTSUPP when the backend cannot. */
int bs_dev_grow(struct bs_dev *dev, uint64_t size, char *err, size_t errlen);
/* Shrink the device to size bytes (a multiple of the block size, smaller than now, > 0): the
 * data past it is gone. Only a backend with on_resize (RBD); -EOPNOTSUPP otherwise. */
int bs_dev_shrink(struct bs_dev *dev, uint64_t size, char *err, size_t errlen);
/* See bs_ops.on_ready: 0 = serves now, 1 = cb comes once it does. */
int bs_dev_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg);
/* See bs_ops.space: -EOPNOTSUPP when the backend cannot tell. */
int bs_dev_space(struct bs_dev *dev, struct bs_space *out);
/* See bs_ops.snap: -EOPNOTSUPP (message in req->err) when the backend has no snapshots. */
int bs_dev_snap(struct bs_dev *dev, struct bs_snap_req *req);
/* See bs_ops.on_resize (nothing when the backend has none). */
void bs_dev_on_resize(struct bs_dev *dev, bs_ready_cb cb, void *arg);

static inline void bs_submit(struct bs_thread *t, struct bs_io *io)
{
	io->dev->ops->submit(io->dev, t, io);
}

/* Per-thread ring. depth 0 = default (128). Returns NULL and *errp = -errno. Must be freed on
 * its own thread; bs_thread_free() waits for outstanding I/O and completes it. */
struct bs_thread *bs_thread_new(struct ev_loop *loop, unsigned depth, int *errp);
void bs_thread_free(struct bs_thread *t);
/* I/O in flight on the ring plus queued behind it (for tests and statistics). */
unsigned bs_thread_busy(const struct bs_thread *t);
/* The loop the thread's completions run on (for backends that complete later by timer). */
struct ev_loop *bs_thread_loop(const struct bs_thread *t);

/* A backend's own per-thread state (the rbd backend's completion queue), hung on a bs_thread
 * the first time the backend sees that thread: bs_thread_free() calls free (which must wait
 * for the backend's I/O of that thread and complete it), bs_thread_busy() adds busy. */
struct bs_thread_ext {
	void (*free)(struct bs_thread_ext *ext);
	unsigned (*busy)(const struct bs_thread_ext *ext);
};
/* The slot for the rbd backend's extension (NULL until it sets it). */
struct bs_thread_ext **bs_thread_rbd_ext(struct bs_thread *t);

/* For backends: queue io on t's ring against io->fd (t != NULL). */
void bs_uring_queue(struct bs_thread *t, struct bs_io *io);
/* For backends: run io synchronously against io->fd with pread/pwrite/fallocate/fdatasync and
 * return 0 or -errno (does not call cb). */
int bs_sync_fd_io(struct bs_io *io);

/* Error injection for tests: make the file/block backend do its I/O on newfd (duplicated;
 * the caller keeps newfd). Returns 0 or -errno. */
int bs_file_debug_set_fd(struct bs_dev *dev, int newfd);

extern const struct bs_ops bs_ram_ops;
extern const struct bs_ops bs_file_ops;
extern const struct bs_ops bs_block_ops;
extern const struct bs_ops bs_error_ops;

#endif
