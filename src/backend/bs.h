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

struct bs_open_cfg {
	const char *path;
	const struct bs_rbd_cfg *rbd; /* rbd backend: pool, image, cluster (copied at open) */
	const char *owner_group;      /* rbd with exclusive_lock: the devices that change owner
					 together (the target's name); NULL: alone */
	uint64_t size_bytes;
	uint32_t block_size;
	bool readonly;
	const struct bs_err_rule *err_rules; /* error backend: copied at open */
	uint32_t n_err_rules;
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
	 * while I/O goes on. NULL: the backend cannot grow. -errno + message. */
	int (*grow)(struct bs_dev *dev, uint64_t size, char *err, size_t errlen);
	/* Optional, for a backend whose open may finish later (RBD started offline): 0 when the
	 * device serves now (cb is never called); 1 when it does not yet: cb(dev, arg) runs once,
	 * on a backend thread, when it does (dev->size is then final), and never after close. */
	int (*on_ready)(struct bs_dev *dev, bs_ready_cb cb, void *arg);
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
/* See bs_ops.on_ready: 0 = serves now, 1 = cb comes once it does. */
int bs_dev_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg);

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
/* RBD ownership (declared for every build: the SCSI layer follows it when RBD is there).
 * The lock states as numbers, for code that follows them (scsi/alua.c): one atomic load. */
enum bs_rbd_own {
	BS_RBD_OWN_NONE = 0, /* no managed lock */
	BS_RBD_OWN_ACQUIRING,
	BS_RBD_OWN_OWNER,
	BS_RBD_OWN_STANDBY,
	BS_RBD_OWN_FENCED,
	BS_RBD_OWN_RELEASING, /* handing the lock over (draining writes, releasing) */
};
/* How a take-over goes (bs_rbd_take_over_async, below). */
enum bs_rbd_take {
	BS_RBD_TAKE_EXPLICIT = 0,
	BS_RBD_TAKE_IMPLICIT,
	BS_RBD_TAKE_FREE, /* only a free lock */
	BS_RBD_TAKE_HEAL, /* only a free lock or one whose holder does not answer */
};
typedef void (*bs_rbd_take_cb)(void *arg, int rc);
/* RBD ownership as this gateway knows it (bs_rbd_owner), for the ALUA states: the lock state
 * and who holds the lock, with what the holder's owner record says of it. */
struct bs_rbd_owner {
	int own;    /* enum bs_rbd_own */
	bool free;  /* nobody held the lock at the last check */
	bool known; /* the owner record names the holder: gen, groups and ports are its */
	bool refused; /* the holder refused this gateway's last implicit request (until the
			 holder changes) */
	uint8_t ngroups, nports;
	uint16_t groups[16]; /* the holder's ALUA target port groups ... */
	uint16_t ports[16];  /* ... and relative target ports */
	uint64_t gen;	     /* the record's generation */
	char holder[128];    /* the lock's holder as librbd names it ("" nobody) */
};

#ifdef IX_HAVE_RBD
extern const struct bs_ops bs_rbd_ops;
/* Managed exclusive lock (rbd.exclusive_lock), for failover between gateways: break the lock
 * of whoever holds the image's lock (librbd blocklists that client, so it never writes again:
 * its gateway rejoins with a new client, standby) and take it. Synchronous, bounded by the
 * cluster's timeouts: the main thread only. 0 with the former owners in msg ("" if none), or
 * -errno with the reason in msg. */
int bs_rbd_break_lock(struct bs_dev *dev, char *msg, size_t msglen);
/* The ownership state (an index for bs_rbd_state_name) and its reason; -EINVAL for another
 * backend. */
int bs_rbd_state(struct bs_dev *dev, char *reason, size_t len);
const char *bs_rbd_state_name(int state);
/* The state of a device with the managed lock; -EINVAL for any other device (and for one whose
 * image is not open yet). Any thread. */
int bs_rbd_own(const struct bs_dev *dev);
/* A counter of changes of any device's ownership (its state, who holds its lock): code that
 * follows them (scsi/alua.c) compares it with the value it last acted on. One atomic load;
 * any thread. */
unsigned bs_rbd_own_changes(void);
/* fn(arg) runs on the image's ownership thread after each change of this device's ownership
 * (its state, who holds its lock), whether or not the image is open yet; NULL clears it,
 * waiting for a call in progress. Never called after the device closes. -EINVAL for another
 * device or one without the managed lock. Control path. */
int bs_rbd_own_watch(struct bs_dev *dev, void (*fn)(void *arg), void *arg);
/* Who owns the lock, as the last lock check saw it, and what the owner record says of the
 * holder. 0, or -EINVAL (another device, no managed lock, or the image is not open). Any
 * thread. */
int bs_rbd_owner(const struct bs_dev *dev, struct bs_rbd_owner *out);
/* What this gateway writes into the owner record when it holds the lock: its local ALUA
 * target port groups and relative target ports (at most 16 each). Written again at once when
 * it changes while holding. 0 or -EINVAL (not a device with the managed lock). Any thread. */
int bs_rbd_set_identity(struct bs_dev *dev, const uint16_t *groups, unsigned ngroups,
			const uint16_t *ports, unsigned nports);
/* Failover, on the image's ownership thread (docs/ha.md, "Ownership and failover"): a free
 * lock is taken; a held one is asked for over RADOS (the object of the owner record), and
 * the holder hands it over (explicit: always; implicit: only if no I/O went through it for
 * half of window_ms) or refuses; a holder that does not answer within
 * rbd.handover_timeout_ms has its lock broken (librbd blocklists it). BS_RBD_TAKE_FREE takes
 * the lock only if it is free. The state is ACQUIRING while taking, then OWNER (or STANDBY /
 * FENCED). done(arg, rc) runs on that thread when it is over (done may be NULL): 0 taken,
 * -EAGAIN refused by a live holder (bs_rbd_owner's refused says so until the holder changes),
 * -ECANCELED (the image closed), -errno. Returns 0 when started; -EALREADY (already the
 * owner), -EBUSY (a take-over or release is queued), -ESHUTDOWN (fenced), -EINVAL (no managed
 * lock or not open), -ENOMEM. Never blocks. */
int bs_rbd_take_over_async(struct bs_dev *dev, int mode, uint32_t window_ms, bs_rbd_take_cb done,
			   void *arg);
/* A planned hand-over (SET TARGET PORT GROUPS on the holder): on that thread, release the
 * lock (draining the writes in flight; this gateway stays healthy, standby) and tell the other
 * gateways that group (0: none) is to take it. done as above (0 released). Returns 0 when
 * started; -EALREADY (not the holder), -EBUSY, -ESHUTDOWN, -EINVAL, -ENOMEM. */
int bs_rbd_release_async(struct bs_dev *dev, uint16_t group, bs_rbd_take_cb done, void *arg);
/* Who else uses an RBD device's cluster connection (the persistent reservation store of
 * scsi/pr_rados.c: its object sits next to the image, and a blocklisted connection must fence
 * both). attach(arg, rados, err, errlen) puts it on a connection (a librados rados_t): when the
 * device opens, when it rejoins after fencing, or at once in bs_rbd_attach_user when the
 * device is open; 0, or -errno + message (the open or the rejoin then fails, and is tried
 * again). detach(arg) takes it off before a fenced connection goes. Both run on the backend's
 * opener thread or in the caller of bs_rbd_attach_user, never at once, never after
 * bs_rbd_detach_user returns. u stays the caller's until then. */
struct bs_rbd_user {
	int (*attach)(void *arg, void *rados, char *err, size_t errlen);
	void (*detach)(void *arg);
	void *arg;
};
/* Main thread (LU creation): 0, or what attach returned (nothing kept); -EINVAL for another
 * backend. */
int bs_rbd_attach_user(struct bs_dev *dev, const struct bs_rbd_user *u, char *err, size_t errlen);
/* Main thread (LU end): waits for an attempt that uses it (bounded by the cluster's timeouts). */
void bs_rbd_detach_user(struct bs_dev *dev);
/* Any thread: the user saw ESHUTDOWN (blocklisted) doing what on the connection rados: every
 * LU on that connection is fenced and rejoins (ignored for a connection the device left). */
void bs_rbd_fenced(struct bs_dev *dev, void *rados, const char *what);
/* Whether the image is open ("online"), or not yet ("offline": started offline, opened again
 * in the background with back-off) with the reason and the attempt count; once open, the
 * state of its connection; -EINVAL for another backend. Any thread. */
struct bs_rbd_status {
	bool online;
	unsigned attempts;     /* opens tried so far */
	unsigned next_s;       /* offline: seconds to the next attempt (0: now or running) */
	char reason[256];      /* offline: why ("image rbd/foo not found", ...) */
	/* online: "connected"; "fenced" (blocklisted: the rejoin starts in rejoin_next_s, or
	 * only when asked when rbd.rejoin_after_ms is 0); "rejoining" (an attempt runs, or
	 * failed and is tried again in rejoin_next_s) with conn_reason */
	char conn[16];
	char conn_reason[256];
	unsigned rejoins;	  /* rejoins completed since the start */
	unsigned rejoin_attempts; /* attempts of the rejoin under way */
	unsigned rejoin_next_s;
};
int bs_rbd_status(struct bs_dev *dev, struct bs_rbd_status *st);
/* Offline: try to open now (ix-ctl lun online), and restart the back-off; 0 (also when
 * online), -EINVAL for another backend. */
int bs_rbd_retry(struct bs_dev *dev);
/* Fenced: rejoin now (ix-ctl lun rejoin; a failure is tried again with back-off). 0 started
 * (or running); -EALREADY not fenced; -EAGAIN the image is not open yet (bs_rbd_retry);
 * -EINVAL another backend. Any thread. */
int bs_rbd_rejoin(struct bs_dev *dev);
#endif

#endif
