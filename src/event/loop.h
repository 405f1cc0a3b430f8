/* Per-thread event loop: fd watches (epoll), timers, deferred calls, and messages posted from
 * other threads. Everything except ev_loop_post() and ev_loop_stop() must be called on the
 * loop's own thread. Callbacks run on that thread, one at a time.
 *
 * Watch and timer structs are embedded in the caller's objects (no allocation per watch); the
 * caller keeps them alive until removed. Removing a watch from inside any callback is safe.
 */
#ifndef IX_EVENT_LOOP_H
#define IX_EVENT_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct ev_loop;

struct ev_io;
typedef void (*ev_io_cb)(struct ev_io *w, uint32_t revents);
struct ev_io {
	int fd;
	uint32_t events;  /* EPOLLIN / EPOLLOUT */
	ev_io_cb cb;
	void *arg;
	bool active;
};

struct ev_timer;
typedef void (*ev_timer_cb)(struct ev_timer *t);
struct ev_timer {
	uint64_t when_ms; /* absolute, CLOCK_MONOTONIC */
	ev_timer_cb cb;
	void *arg;
	int heap_idx;     /* -1 when not armed */
};

/* A poller: work that the poll window (ev_loop_set_poll_us) looks for between its epoll tries,
 * because it does not make an fd readable soon enough or cheaply: an RDMA completion queue,
 * whose completion channel fires only when armed and costs system calls per event, or a busy
 * socket, where a recv that finds the bytes saves the epoll call that would announce them. The callback
 * does the work it finds (it runs on the loop's thread, like any callback) and returns how much
 * (> 0 ends the window as an event would; 0 nothing found). Pollers run only inside an open
 * window: an idle loop, or one with the window off, never calls them, so the fd path must still
 * deliver everything. Embedded in the caller's object; stop it before the object goes. */
struct ev_poller;
typedef int (*ev_poller_cb)(struct ev_poller *p);
struct ev_poller {
	ev_poller_cb cb;
	void *arg;
	struct ev_poller *next, **pprev;
	bool active;
};

struct ev_loop *ev_loop_new(void);
void ev_loop_free(struct ev_loop *loop);

/* Run until ev_loop_stop(). Returns 0 or -errno. */
int ev_loop_run(struct ev_loop *loop);
/* Adaptive polling: after an iteration that handled events, keep asking epoll without
 * sleeping for up to poll_us microseconds before the next wait sleeps (0 = off, the default).
 * Costs CPU only while there is traffic; an idle loop sleeps as before. A thread whose CPU
 * other threads want (a large share of its polling time went to them: event/pollctl.h) stops
 * polling for a back-off period. Loop thread only. */
void ev_loop_set_poll_us(struct ev_loop *loop, unsigned poll_us);
/* Keep polling even when the CPU is contended (no back-off). For tests that must see the
 * window work on a loaded machine; never in production. */
void ev_loop_set_poll_greedy(struct ev_loop *loop, bool greedy);
/* How the loop waited: waits that went to sleep in epoll_wait (timeout not 0), and waits that
 * the poll window answered without sleeping. Loop thread only. */
struct ev_loop_stats {
	uint64_t sleeps;
	uint64_t poll_hits;
	uint64_t backoffs; /* poll windows shut because other threads wanted the CPU */
	uint64_t poll_ns;  /* time spent in poll windows (CPU the polling cost) */
	uint64_t poller_hits; /* poll windows that a poller (not epoll) ended with work */
};
void ev_loop_get_stats(const struct ev_loop *loop, struct ev_loop_stats *st);
/* One iteration: wait at most timeout_ms (-1 forever) and dispatch. Returns events handled. */
int ev_loop_run_once(struct ev_loop *loop, int timeout_ms);
/* Thread-safe. The request ends the current (or next) ev_loop_run() and is then consumed. */
void ev_loop_stop(struct ev_loop *loop);

/* For embedding the loop in another one: the epoll descriptor (readable when events are
 * pending) and the milliseconds until the next timer or deferred call is due (-1 none). */
int ev_loop_fd(const struct ev_loop *loop);
int ev_loop_next_timeout_ms(struct ev_loop *loop);

/* Monotonic milliseconds, cached per loop iteration. */
uint64_t ev_now_ms(struct ev_loop *loop);
/* The same instant in nanoseconds (the clock read after the last wait: no clock read here). */
uint64_t ev_now_ns(const struct ev_loop *loop);

void ev_poller_init(struct ev_poller *p, ev_poller_cb cb, void *arg);
/* Add to / remove from the loop's pollers (idempotent; stopping from inside any callback,
 * the poller's own included, is safe). Loop thread only. */
void ev_poller_start(struct ev_loop *loop, struct ev_poller *p);
void ev_poller_stop(struct ev_loop *loop, struct ev_poller *p);
/* Pollers running now. */
unsigned ev_loop_pollers(const struct ev_loop *loop);
/* The poll window set by ev_loop_set_poll_us, in nanoseconds (0 = off). */
uint64_t ev_loop_poll_ns(const struct ev_loop *loop);

void ev_io_init(struct ev_io *w, int fd, ev_io_cb cb, void *arg);
int ev_io_start(struct ev_loop *loop, struct ev_io *w, uint32_t events);
int ev_io_modify(struct ev_loop *loop, struct ev_io *w, uint32_t events);
void ev_io_stop(struct ev_loop *loop, struct ev_io *w);

void ev_timer_init(struct ev_timer *t, ev_timer_cb cb, void *arg);
/* Armed and not fired yet? */
static inline bool ev_timer_pending(const struct ev_timer *t)
{
	return t->heap_idx >= 0;
}
/* (Re)arm to fire once after delay_ms. */
void ev_timer_start(struct ev_loop *loop, struct ev_timer *t, uint64_t delay_ms);
void ev_timer_stop(struct ev_loop *loop, struct ev_timer *t);
static inline bool ev_timer_active(const struct ev_timer *t)
{
	return t->heap_idx >= 0;
}

/* Deferred call on the loop's own thread: runs after every callback of the current iteration
 * (fd events and timers) has returned. Used to free objects whose watches may still be named in
 * the current epoll batch. The node is embedded in the caller's object; deferring a node that is
 * already pending is a no-op. */
struct ev_defer {
	void (*fn)(void *arg);
	void *arg;
	struct ev_defer *next;
	bool pending;
};
void ev_defer(struct ev_loop *loop, struct ev_defer *d, void (*fn)(void *arg), void *arg);

/* Run fn(arg) on the loop's thread soon. Thread-safe; the way for other threads to reach this
 * loop's objects. Allocates the message: returns 0 or -ENOMEM. */
int ev_loop_post(struct ev_loop *loop, void (*fn)(void *arg), void *arg);

/* The same without allocation: node is the caller's (embedded in its object) and must stay
 * alive and unposted until fn has started; fn may post it again. Messages that have not run
 * when the loop is freed are dropped. Thread-safe. */
struct ev_post {
	void (*fn)(void *arg);
	void *arg;
	struct ev_post *next;
	bool embedded; /* the caller's node: not freed by the loop */
	bool queued;   /* posted and not yet run (for the owner's assertions and tests) */
};
void ev_loop_post_node(struct ev_loop *loop, struct ev_post *node, void (*fn)(void *arg), void *arg);

#endif
