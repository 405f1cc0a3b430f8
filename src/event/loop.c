/* epoll-based event loop with a binary-heap timer queue and a cross-thread message queue.
 * Cross-thread posts take a mutex: they are control-path and slow-path only (session
 * coordination, shutdown, waking a command parked behind an atomic command of another
 * thread); the common data path never posts.
 *
 * Adaptive polling (ev_loop_set_poll_us): after an iteration that handled events, the next
 * wait first asks epoll without sleeping, again and again, for up to poll_us; only if nothing
 * arrives in that window does the thread go to sleep in epoll_wait. A request/response peer
 * (queue depth 1, a one-thread client) answers within a few tens of microseconds, so the
 * sleep, the wake-up interrupt and the scheduler's switch back (the larger part of a loopback
 * round trip) are skipped. An idle loop sleeps: the window opens only after real work, and
 * closes after poll_us without any. A thread whose CPU other threads want stops polling for a
 * while (the policy in event/pollctl.h). */
#include "event/loop.h"
#include "event/pollctl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define EV_MAX_EVENTS 64

/* Posted messages are struct ev_post: allocated by ev_loop_post() (freed after they run) or
 * embedded in the caller's object (ev_loop_post_node(), never freed here). */
struct ev_loop {
	int epfd;
	int wakefd;
	struct ev_io wake_io;
	bool stop;
	uint64_t now_ms;
	uint64_t now_ns;         /* the same instant in nanoseconds */
	uint64_t poll_ns;       /* adaptive poll window, 0 = off */
	uint64_t poll_until_ns; /* end of the current window (monotonic ns) */
	struct ev_pollctl pc;   /* contention back-off */
	struct ev_poller *pollers;
	unsigned npollers;
	unsigned pollers_gen;   /* changes when a poller starts or stops */
	bool poll_greedy;       /* poll even when the CPU is contended (tests) */
	struct ev_loop_stats st;
	struct ev_timer **heap;
	int heap_len, heap_cap;
	pthread_mutex_t post_lock;
	struct ev_post *post_head, *post_tail;
	struct ev_defer *defer_head;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ms(void)
{
	return mono_ns() / 1000000u;
}

static void run_posted(struct ev_loop *loop)
{
	struct ev_post *m;
	uint64_t v;

	if (read(loop->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&loop->post_lock);
	m = loop->post_head;
	loop->post_head = loop->post_tail = NULL;
	pthread_mutex_unlock(&loop->post_lock);
	while (m) {
		struct ev_post *next = m->next;
		bool owned = m->embedded;

		/* an embedded node may be posted again from its own callback */
		m->queued = false;
		m->fn(m->arg);
		if (!owned)
			free(m);
		m = next;
	}
}

static void wake_cb(struct ev_io *w, uint32_t revents)
{
	(void)revents;
	run_posted(w->arg);
}

struct ev_loop *ev_loop_new(void)
{
	struct ev_loop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return NULL;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (loop->epfd < 0 || loop->wakefd < 0)
		goto fail;
	pthread_mutex_init(&loop->post_lock, NULL);
	loop->now_ns = mono_ns();
	loop->now_ms = loop->now_ns / 1000000u;
	ev_io_init(&loop->wake_io, loop->wakefd, wake_cb, loop);
	if (ev_io_start(loop, &loop->wake_io, EPOLLIN) < 0)
		goto fail;
	return loop;
fail:
	if (loop->epfd >= 0)
		close(loop->epfd);
	if (loop->wakefd >= 0)
		close(loop->wakefd);
	free(loop);
	return NULL;
}

void ev_loop_free(struct ev_loop *loop)
{
	struct ev_post *m, *next;

	if (!loop)
		return;
	for (m = loop->post_head; m; m = next) {
		next = m->next;
		if (!m->embedded)
			free(m);
	}
	close(loop->epfd);
	close(loop->wakefd);
	pthread_mutex_destroy(&loop->post_lock);
	free(loop->heap);
	free(loop);
}

uint64_t ev_now_ms(struct ev_loop *loop)
{
	return loop->now_ms;
}

uint64_t ev_now_ns(const struct ev_loop *loop)
{
	return loop->now_ns;
}

/* ---- timers: min-heap on when_ms ---- */

static void heap_swap(struct ev_loop *loop, int a, int b)
{
	struct ev_timer *t = loop->heap[a];

	loop->heap[a] = loop->heap[b];
	loop->heap[b] = t;
	loop->heap[a]->heap_idx = a;
	loop->heap[b]->heap_idx = b;
}

static void heap_up(struct ev_loop *loop, int i)
{
	while (i > 0) {
		int p = (i - 1) / 2;
		if (loop->heap[p]->when_ms <= loop->heap[i]->when_ms)
			break;
		heap_swap(loop, p, i);
		i = p;
	}
}

static void heap_down(struct ev_loop *loop, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < loop->heap_len && loop->heap[l]->when_ms < loop->heap[m]->when_ms)
			m = l;
		if (r < loop->heap_len && loop->heap[r]->when_ms < loop->heap[m]->when_ms)
			m = r;
		if (m == i)
			break;
		heap_swap(loop, i, m);
		i = m;
	}
}

void ev_timer_init(struct ev_timer *t, ev_timer_cb cb, void *arg)
{
	t->when_ms = 0;
	t->cb = cb;
	t->arg = arg;
	t->heap_idx = -1;
}

void ev_timer_stop(struct ev_loop *loop, struct ev_timer *t)
{
	int i = t->heap_idx;

	if (i < 0)
		return;
	loop->heap_len--;
	if (i != loop->heap_len) {
		loop->heap[i] = loop->heap[loop->heap_len];
		loop->heap[i]->heap_idx = i;
		heap_down(loop, i);
		heap_up(loop, i);
	}
	t->heap_idx = -1;
}

void ev_timer_start(struct ev_loop *loop, struct ev_timer *t, uint64_t delay_ms)
{
	ev_timer_stop(loop, t);
	if (loop->heap_len == loop->heap_cap) {
		int cap = loop->heap_cap ? loop->heap_cap * 2 : 64;
		struct ev_timer **h = realloc(loop->heap, (size_t)cap * sizeof(*h));
		if (!h)
			return; /* timer not armed; callers treat timers as best effort under OOM */
		loop->heap = h;
		loop->heap_cap = cap;
	}
	t->when_ms = mono_ms() + delay_ms;
	t->heap_idx = loop->heap_len;
	loop->heap[loop->heap_len++] = t;
	heap_up(loop, t->heap_idx);
}

static void run_timers(struct ev_loop *loop)
{
	while (loop->heap_len > 0 && loop->heap[0]->when_ms <= loop->now_ms) {
		struct ev_timer *t = loop->heap[0];
		ev_timer_stop(loop, t);
		t->cb(t);
	}
}

/* ---- fd watches ---- */

void ev_io_init(struct ev_io *w, int fd, ev_io_cb cb, void *arg)
{
	w->fd = fd;
	w->events = 0;
	w->cb = cb;
	w->arg = arg;
	w->active = false;
}

int ev_io_start(struct ev_loop *loop, struct ev_io *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0)
		return -errno;
	w->events = events;
	w->active = true;
	return 0;
}

int ev_io_modify(struct ev_loop *loop, struct ev_io *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	if (!w->active)
		return ev_io_start(loop, w, events);
	if (w->events == events)
		return 0;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		return -errno;
	w->events = events;
	return 0;
}

void ev_io_stop(struct ev_loop *loop, struct ev_io *w)
{
	if (!w->active)
		return;
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->active = false;
}

void ev_defer(struct ev_loop *loop, struct ev_defer *d, void (*fn)(void *arg), void *arg)
{
	if (d->pending)
		return;
	d->fn = fn;
	d->arg = arg;
	d->pending = true;
	d->next = loop->defer_head;
	loop->defer_head = d;
}

static void run_deferred(struct ev_loop *loop)
{
	while (loop->defer_head) {
		struct ev_defer *d = loop->defer_head;
		loop->defer_head = d->next;
		d->pending = false;
		d->fn(d->arg);
	}
}

void ev_loop_set_poll_us(struct ev_loop *loop, unsigned poll_us)
{
	loop->poll_ns = (uint64_t)poll_us * 1000u;
	loop->poll_until_ns = 0;
	memset(&loop->pc, 0, sizeof(loop->pc));
}

void ev_poller_init(struct ev_poller *p, ev_poller_cb cb, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->cb = cb;
	p->arg = arg;
}

void ev_poller_start(struct ev_loop *loop, struct ev_poller *p)
{
	if (p->active)
		return;
	p->next = loop->pollers;
	if (p->next)
		p->next->pprev = &p->next;
	p->pprev = &loop->pollers;
	loop->pollers = p;
	p->active = true;
	loop->npollers++;
	loop->pollers_gen++;
}

void ev_poller_stop(struct ev_loop *loop, struct ev_poller *p)
{
	if (!p->active)
		return;
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	p->next = NULL;
	p->pprev = NULL;
	p->active = false;
	loop->npollers--;
	loop->pollers_gen++;
}

unsigned ev_loop_pollers(const struct ev_loop *loop)
{
	return loop->npollers;
}

uint64_t ev_loop_poll_ns(const struct ev_loop *loop)
{
	return loop->poll_ns;
}

/* Every poller once; the work they found. A poller that starts or stops pollers (a connection
 * that ended) ends the round: the list it was walking may have changed. A call that found
 * nothing and still took long lost the CPU meanwhile: that goes to *stolen, as for epoll. */
static int run_pollers(struct ev_loop *loop, uint64_t *stolen)
{
	unsigned gen = loop->pollers_gen;
	int work = 0;

	for (struct ev_poller *p = loop->pollers; p; p = p->next) {
		uint64_t before = mono_ns();
		int r = p->cb(p);

		if (r > 0)
			work += r;
		else
			*stolen += ev_pollctl_stolen(mono_ns() - before);
		if (loop->pollers_gen != gen)
			break;
	}
	return work;
}

/* The poll window: epoll without sleeping until an event, the end of the window, or a timer
 * that is due. Only when the caller would sleep (timeout_ms != 0), the window is open and no
 * contention back-off is running. Between tries the thread yields, so that a thread waiting
 * for this CPU runs at once; a try that took long (the CPU was someone else's) counts as
 * stolen time for the contention policy (event/pollctl.h), which is consulted once per phase,
 * after it: never between an event's arrival and its handling. Between epoll tries the
 * pollers run; the work they did goes to *work (it was done: the caller must not sleep).
 * With pollers, epoll and the yield come only every EV_POLL_EPOLL_EVERY-th try: a poller that
 * reads its socket itself gets the bytes in one system call where epoll costs two (the try
 * that sees the event, then the recv), and at queue depth 1 each side's share of the round
 * trip is those calls. Returns what epoll_wait returned, 0 when the window closed empty or
 * was shut. */
#define EV_POLL_EPOLL_EVERY 4

static int poll_phase(struct ev_loop *loop, struct epoll_event *evs, int timeout_ms, int *work)
{
	uint64_t now, start, end, stolen = 0;
	int n = 0;

	*work = 0;
	if (!timeout_ms || !loop->poll_ns)
		return 0;
	now = mono_ns();
	end = loop->poll_until_ns;
	if (now >= end || !ev_pollctl_allowed(&loop->pc, now))
		return 0;
	if (timeout_ms > 0 && end > now + (uint64_t)timeout_ms * 1000000u)
		end = now + (uint64_t)timeout_ms * 1000000u;
	start = now;
	for (unsigned try = 0;; try++) {
		bool full = !loop->pollers || try % EV_POLL_EPOLL_EVERY == 0;

		if (full) {
			uint64_t before = now;

			n = epoll_wait(loop->epfd, evs, EV_MAX_EVENTS, 0);
			now = mono_ns();
			stolen += ev_pollctl_stolen(now - before);
			if (n != 0 || now >= end)
				break;
		}
		if (loop->pollers) {
			loop->now_ns = now; /* the pollers' callbacks read the loop's clock */
			loop->now_ms = now / 1000000u;
			if ((*work = run_pollers(loop, &stolen)) > 0) {
				loop->st.poller_hits++;
				break;
			}
			now = mono_ns();
			if (now >= end)
				break;
		}
		if (full)
			sched_yield();
	}
	loop->st.poll_ns += now - start;
	if (!loop->poll_greedy && ev_pollctl_account(&loop->pc, now, now - start, stolen))
		loop->st.backoffs++;
	if (n > 0)
		loop->st.poll_hits++;
	return n;
}

void ev_loop_set_poll_greedy(struct ev_loop *loop, bool greedy)
{
	loop->poll_greedy = greedy;
}

void ev_loop_get_stats(const struct ev_loop *loop, struct ev_loop_stats *st)
{
	*st = loop->st;
}

int ev_loop_run_once(struct ev_loop *loop, int timeout_ms)
{
	struct epoll_event evs[EV_MAX_EVENTS];
	uint64_t now_ns;
	int n, work;

	loop->now_ns = mono_ns();
	loop->now_ms = loop->now_ns / 1000000u;
	/* work deferred from outside the loop (e.g. a flush queued by an API call) must not
	   wait for the next event */
	if (loop->defer_head)
		timeout_ms = 0;
	if (loop->heap_len > 0) {
		uint64_t first = loop->heap[0]->when_ms;
		int t = first <= loop->now_ms ? 0 : (int)(first - loop->now_ms);
		if (timeout_ms < 0 || t < timeout_ms)
			timeout_ms = t;
	}
	if (loop->defer_head)
		timeout_ms = 0; /* work deferred from outside a loop callback runs now */
	n = poll_phase(loop, evs, timeout_ms, &work);
	if (n == 0 && !work) {
		if (timeout_ms != 0)
			loop->st.sleeps++;
		n = epoll_wait(loop->epfd, evs, EV_MAX_EVENTS, timeout_ms);
	}
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		return -errno;
	}
	now_ns = mono_ns();
	loop->now_ns = now_ns;
	loop->now_ms = now_ns / 1000000u;
	if ((n > 0 || work > 0) && loop->poll_ns)
		loop->poll_until_ns = now_ns + loop->poll_ns;
	for (int i = 0; i < n; i++) {
		struct ev_io *w = evs[i].data.ptr;
		/* A callback earlier in this batch may have stopped a watch; owners free
		   objects only through ev_defer(), which runs after the batch, so the memory is
		   still valid here and the active flag tells whether to dispatch. */
		if (w->active)
			w->cb(w, evs[i].events);
	}
	run_timers(loop);
	run_deferred(loop);
	return n + work;
}

int ev_loop_run(struct ev_loop *loop)
{
	while (!__atomic_load_n(&loop->stop, __ATOMIC_ACQUIRE)) {
		int r = ev_loop_run_once(loop, -1);
		if (r < 0)
			return r;
	}
	/* the stop request is consumed: a later run goes on until the next stop */
	__atomic_store_n(&loop->stop, false, __ATOMIC_RELEASE);
	return 0;
}

int ev_loop_fd(const struct ev_loop *loop)
{
	return loop->epfd;
}

int ev_loop_next_timeout_ms(struct ev_loop *loop)
{
	uint64_t now = mono_ms(), first;

	if (loop->defer_head)
		return 0;
	if (loop->heap_len == 0)
		return -1;
	first = loop->heap[0]->when_ms;
	if (first <= now)
		return 0;
	return first - now > (uint64_t)INT32_MAX ? INT32_MAX : (int)(first - now);
}

void ev_loop_stop(struct ev_loop *loop)
{
	uint64_t one = 1;

	__atomic_store_n(&loop->stop, true, __ATOMIC_RELEASE);
	if (write(loop->wakefd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the loop is awake anyway */
	}
}

static void post_enqueue(struct ev_loop *loop, struct ev_post *m)
{
	uint64_t one = 1;

	m->next = NULL;
	pthread_mutex_lock(&loop->post_lock);
	if (loop->post_tail)
		loop->post_tail->next = m;
	else
		loop->post_head = m;
	loop->post_tail = m;
	pthread_mutex_unlock(&loop->post_lock);
	if (write(loop->wakefd, &one, sizeof(one)) < 0) {
		/* saturated counter: already pending wake-up */
	}
}

int ev_loop_post(struct ev_loop *loop, void (*fn)(void *arg), void *arg)
{
	struct ev_post *m = malloc(sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->fn = fn;
	m->arg = arg;
	m->embedded = false;
	m->queued = true;
	post_enqueue(loop, m);
	return 0;
}

void ev_loop_post_node(struct ev_loop *loop, struct ev_post *node, void (*fn)(void *arg), void *arg)
{
	node->fn = fn;
	node->arg = arg;
	node->embedded = true;
	node->queued = true;
	post_enqueue(loop, node);
}
