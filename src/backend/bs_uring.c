/* Per-thread io_uring: one ring per worker thread, an eventfd registered on it and watched by
 * the thread's event loop, a free list of request structs sized to the ring, and a pending
 * list for I/O that arrives while every request is in flight. Completions are reaped on the
 * loop's thread; short transfers are resubmitted, EAGAIN/EINTR retried.
 *
 * System calls: SQEs queued during one loop iteration go to the kernel in one io_uring_submit
 * (a deferred call), and the completions the kernel finished inline (page cache hits) are
 * reaped right after it, so their replies leave in the same iteration. (The eventfd is not
 * registered "async": that mode stays silent for completions posted from interrupt or task
 * work, as block devices post them.) */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend/bs.h"
#include "event/loop.h"
#include "util/log.h"

#define BS_DEFAULT_DEPTH 128
#define BS_REQ_IOV	 64 /* pattern copies per WRITE SAME submission */

struct bs_req {
	struct list_head link; /* on free list while idle */
	struct bs_io *io;
	uint64_t done; /* bytes completed */
	struct iovec iov[BS_REQ_IOV];
};

struct bs_thread {
	struct io_uring ring;
	struct ev_loop *loop;
	struct ev_io watch;
	int efd;
	unsigned depth;
	unsigned inflight;
	unsigned queued;
	bool submit_pending;
	struct ev_defer submit_defer;
	struct bs_req *reqs;
	struct list_head free;
	struct list_head pending;
	struct bs_thread_ext *rbd;
};

static void uring_reap(struct bs_thread *t);

/* End of the loop iteration: hand every queued SQE to the kernel at once, then complete what
 * it finished inline. */
static void submit_deferred(void *arg)
{
	struct bs_thread *t = arg;
	int rc;

	t->submit_pending = false;
	rc = io_uring_submit(&t->ring);
	if (rc < 0)
		log_warn("bs", "io_uring_submit: %s (will retry)", strerror(-rc));
	uring_reap(t);
}

static void efd_cb(struct ev_io *w, uint32_t revents)
{
	struct bs_thread *t = w->arg;
	uint64_t v;

	(void)revents;
	if (read(t->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("bs", "eventfd read: %s", strerror(errno));
	uring_reap(t);
}

struct bs_thread *bs_thread_new(struct ev_loop *loop, unsigned depth, int *errp)
{
	struct bs_thread *t = calloc(1, sizeof(*t));
	int rc;

	if (!t) {
		*errp = -ENOMEM;
		return NULL;
	}
	t->depth = depth ? depth : BS_DEFAULT_DEPTH;
	t->loop = loop;
	t->efd = -1;
	list_init(&t->free);
	list_init(&t->pending);
	t->reqs = calloc(t->depth, sizeof(*t->reqs));
	if (!t->reqs) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < t->depth; i++)
		list_add_tail(&t->reqs[i].link, &t->free);
	rc = io_uring_queue_init(t->depth, &t->ring, 0);
	if (rc < 0)
		goto fail;
	t->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->efd < 0) {
		rc = -errno;
		goto fail_ring;
	}
	rc = io_uring_register_eventfd(&t->ring, t->efd);
	if (rc < 0)
		goto fail_ring;
	ev_io_init(&t->watch, t->efd, efd_cb, t);
	rc = ev_io_start(loop, &t->watch, EPOLLIN);
	if (rc < 0)
		goto fail_ring;
	return t;
fail_ring:
	io_uring_queue_exit(&t->ring);
fail:
	if (t->efd >= 0)
		close(t->efd);
	free(t->reqs);
	free(t);
	*errp = rc;
	return NULL;
}

unsigned bs_thread_busy(const struct bs_thread *t)
{
	return t->inflight + t->queued + (t->rbd ? t->rbd->busy(t->rbd) : 0);
}

struct bs_thread_ext **bs_thread_rbd_ext(struct bs_thread *t)
{
	return &t->rbd;
}

struct ev_loop *bs_thread_loop(const struct bs_thread *t)
{
	return t->loop;
}

/* Fill an SQE for the remaining part of req's io. */
static void prep(struct bs_thread *t, struct bs_req *req)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	struct bs_io *io = req->io;
	uint64_t left = io->len - req->done, off = io->offset + req->done;
	unsigned n, chunk = left > (1u << 30) ? (1u << 30) : (unsigned)left;

	/* Requests never outnumber SQ entries, so an SQE is always free here. */
	switch (io->op) {
	case BS_OP_READ:
		io_uring_prep_read(sqe, io->fd, io->buf + req->done, chunk, off);
		break;
	case BS_OP_WRITE:
		io_uring_prep_write(sqe, io->fd, io->buf + req->done, chunk, off);
		if (io->flags & BS_IO_FUA)
			sqe->rw_flags = RWF_DSYNC;
		break;
	case BS_OP_WRITE_SAME: {
		uint32_t skip = (uint32_t)(req->done % io->pattern_len);

		for (n = 0; n < BS_REQ_IOV && left > 0; n++) {
			uint64_t l = io->pattern_len - skip;

			if (l > left)
				l = left;
			req->iov[n].iov_base = io->buf + skip;
			req->iov[n].iov_len = (size_t)l;
			left -= l;
			skip = 0;
		}
		io_uring_prep_writev(sqe, io->fd, req->iov, n, off);
		if (io->flags & BS_IO_FUA)
			sqe->rw_flags = RWF_DSYNC;
		break;
	}
	case BS_OP_WRITE_ZEROES:
		io_uring_prep_fallocate(sqe, io->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
					off, left);
		break;
	case BS_OP_DISCARD:
		io_uring_prep_fallocate(sqe, io->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					off, left);
		break;
	case BS_OP_FLUSH:
	default:
		io_uring_prep_fsync(sqe, io->fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data(sqe, req);
}

static void start(struct bs_thread *t, struct bs_io *io)
{
	struct bs_req *req = list_first_entry(&t->free, struct bs_req, link);

	list_del(&req->link);
	req->io = io;
	req->done = 0;
	t->inflight++;
	prep(t, req);
	if (!t->submit_pending) {
		t->submit_pending = true;
		ev_defer(t->loop, &t->submit_defer, submit_deferred, t);
	}
}

void bs_uring_queue(struct bs_thread *t, struct bs_io *io)
{
	if (list_empty(&t->free)) {
		list_add_tail(&io->link, &t->pending);
		t->queued++;
		return;
	}
	start(t, io);
}

static void finish(struct bs_thread *t, struct bs_req *req, int result)
{
	struct bs_io *io = req->io;

	req->io = NULL;
	list_add(&req->link, &t->free);
	t->inflight--;
	io->result = result;
	io->cb(io);
}

/* Handle one completion; returns true if the request was resubmitted. */
static bool complete_one(struct bs_thread *t, struct bs_req *req, int res)
{
	struct bs_io *io = req->io;

	if (res == -EAGAIN || res == -EINTR)
		goto again;
	switch (io->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
	case BS_OP_WRITE_SAME:
		if (res < 0)
			break;
		if (res == 0) {
			res = -EIO;
			break;
		}
		req->done += (uint64_t)res;
		if (req->done < io->len)
			goto again;
		res = 0;
		break;
	case BS_OP_WRITE_ZEROES:
		if (res == -EOPNOTSUPP || res == -EINVAL) {
			/* No ZERO_RANGE here: write a zero pattern instead. */
			io->op = BS_OP_WRITE_SAME;
			io->buf = io->dev->zero_block;
			io->pattern_len = io->dev->block_size;
			goto again;
		}
		if (res == 0 && (io->flags & BS_IO_FUA)) {
			io->op = BS_OP_FLUSH;
			goto again;
		}
		break;
	default:
		break;
	}
	finish(t, req, res < 0 ? res : 0);
	return false;
again:
	prep(t, req);
	return true;
}

static void drain_pending(struct bs_thread *t)
{
	while (!list_empty(&t->pending) && !list_empty(&t->free)) {
		struct bs_io *io = list_first_entry(&t->pending, struct bs_io, link);

		list_del(&io->link);
		t->queued--;
		start(t, io);
	}
}

static void uring_reap(struct bs_thread *t)
{
	/* Resubmissions (short transfers, FUA flushes) may complete inline as well: reap again
	   after submitting them, a few rounds at most (the eventfd covers the rest). */
	for (int round = 0; round < 8; round++) {
		struct io_uring_cqe *cqe;
		bool resubmit = false;

		while (io_uring_peek_cqe(&t->ring, &cqe) == 0) {
			struct bs_req *req = io_uring_cqe_get_data(cqe);
			int res = cqe->res;

			io_uring_cqe_seen(&t->ring, cqe);
			if (!req)
				continue;
			if (complete_one(t, req, res))
				resubmit = true;
			drain_pending(t);
		}
		if (!resubmit && !io_uring_sq_ready(&t->ring))
			return;
		io_uring_submit(&t->ring);
	}
}

void bs_thread_free(struct bs_thread *t)
{
	if (!t)
		return;
	if (t->rbd)
		t->rbd->free(t->rbd);
	ev_io_stop(t->loop, &t->watch);
	while (t->inflight > 0 || t->queued > 0) {
		struct io_uring_cqe *cqe;

		if (io_uring_submit_and_wait(&t->ring, 1) < 0 &&
		    io_uring_wait_cqe(&t->ring, &cqe) < 0)
			break;
		uring_reap(t);
	}
	io_uring_queue_exit(&t->ring);
	close(t->efd);
	free(t->reqs);
	free(t);
}
