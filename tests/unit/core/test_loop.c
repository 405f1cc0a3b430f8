/* The event loop's adaptive poll window (ev_loop_set_poll_us): an event that arrives within the
 * window after activity is taken without sleeping; an idle loop, a loop with the window off and
 * a loop whose window has passed sleep; the window never delays a due timer and never spins
 * through a wait's whole timeout; a thread whose CPU another thread wants stops polling. Checks
 * use the loop's own counters and thread CPU time, not wall-clock speed; the window checks run
 * "greedy" (no contention back-off) so that a loaded machine does not make them flaky. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "event/loop.h"
#include "tap.h"

struct fdev {
	struct ev_io io;
	int hits;
};

static void fd_cb(struct ev_io *w, uint32_t revents)
{
	struct fdev *f = w->arg;
	uint64_t v;

	(void)revents;
	if (read(w->fd, &v, sizeof(v)) == sizeof(v))
		f->hits++;
}

static void timer_cb(struct ev_timer *t)
{
	(*(int *)t->arg)++;
}

struct delayed_write {
	int fd;
	unsigned delay_us;
};

static void *writer(void *arg)
{
	struct delayed_write *d = arg;
	uint64_t one = 1;

	usleep(d->delay_us);
	if (write(d->fd, &one, sizeof(one)) != sizeof(one))
		return NULL;
	return NULL;
}

static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void poke(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		return;
}

/* One event now (opens the window), then an event from another thread after delay_us, taken by
 * one ev_loop_run_once(timeout_ms). Returns the stats delta of that second wait. */
static struct ev_loop_stats second_event(struct ev_loop *loop, struct fdev *f, unsigned delay_us,
					 int timeout_ms)
{
	struct ev_loop_stats a, b, d;
	struct delayed_write dw = {f->io.fd, delay_us};
	pthread_t th;

	poke(f->io.fd);
	ev_loop_run_once(loop, 1000);
	ev_loop_get_stats(loop, &a);
	pthread_create(&th, NULL, writer, &dw);
	ev_loop_run_once(loop, timeout_ms);
	pthread_join(th, NULL);
	ev_loop_get_stats(loop, &b);
	d.sleeps = b.sleeps - a.sleeps;
	d.poll_hits = b.poll_hits - a.poll_hits;
	return d;
}

static atomic_bool spin_stop;

static void *spinner(void *arg)
{
	cpu_set_t *cpu = arg;

	pthread_setaffinity_np(pthread_self(), sizeof(*cpu), cpu);
	while (!atomic_load(&spin_stop)) {
	}
	return NULL;
}

/* Another thread busy on this thread's only CPU: the first poll window after activity sees the
 * CPU wanted (its yield lets the spinner run) and shuts; the next waits sleep at once, however
 * soon they come, until the back-off ends. */
static void test_contention(struct ev_loop *loop, struct fdev *f)
{
	struct ev_loop_stats a, b;
	cpu_set_t cpu, old;
	pthread_t th;

	if (pthread_getaffinity_np(pthread_self(), sizeof(old), &old) != 0) {
		tap_skip("pthread_getaffinity_np failed");
		return;
	}
	CPU_ZERO(&cpu);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &cpu);
	if (pthread_setaffinity_np(pthread_self(), sizeof(cpu), &cpu) != 0) {
		tap_skip("cannot pin this thread to one CPU");
		return;
	}
	ev_loop_set_poll_us(loop, 5000);
	ev_loop_set_poll_greedy(loop, false);
	atomic_store(&spin_stop, false);
	pthread_create(&th, NULL, spinner, &cpu);
	usleep(20000); /* the spinner is running */
	ev_loop_get_stats(loop, &a);
	for (int i = 0; i < 20; i++) {
		poke(f->io.fd);
		ev_loop_run_once(loop, 1000); /* takes the event, opens the window */
		ev_loop_run_once(loop, 20);   /* nothing comes: polls, or sleeps if shut */
	}
	ev_loop_get_stats(loop, &b);
	atomic_store(&spin_stop, true);
	pthread_join(th, NULL);
	pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
	/* without the contention check (or greedy) no window is ever shut: 0 back-offs */
	CHECK(b.backoffs - a.backoffs >= 1);
	CHECK(b.backoffs - a.backoffs <= 20);
}

struct cnt_poller {
	struct ev_poller p;
	int calls;
	int work_at;		  /* return 1 on this call (0: never) */
	struct ev_loop *loop;
	struct ev_poller *stop_too; /* stopped (with itself) on its work_at call */
	int poke_at;		  /* make poke_fd readable on this call (0: never) */
	int poke_fd;
};

static int cnt_cb(struct ev_poller *p)
{
	struct cnt_poller *c = p->arg;

	c->calls++;
	if (c->poke_at && c->calls == c->poke_at)
		poke(c->poke_fd);
	if (c->work_at && c->calls == c->work_at) {
		if (c->stop_too) {
			ev_poller_stop(c->loop, c->stop_too);
			ev_poller_stop(c->loop, &c->p);
		}
		return 1;
	}
	return 0;
}

/* Pollers: work found between epoll tries ends the window like an event (no sleep); they run
 * only inside an open window; stopping pollers from a poller's callback is safe. */
static void test_pollers(struct ev_loop *loop, struct fdev *f)
{
	struct cnt_poller a = {.work_at = 3, .loop = loop}, b = {.loop = loop};
	struct ev_loop_stats s0, s1;
	int r;

	ev_poller_init(&a.p, cnt_cb, &a);
	ev_poller_init(&b.p, cnt_cb, &b);

	/* window off: a poller is never asked, the loop sleeps */
	ev_loop_set_poll_us(loop, 0);
	ev_poller_start(loop, &a.p);
	ev_poller_start(loop, &a.p); /* idempotent */
	poke(f->io.fd);
	ev_loop_run_once(loop, 1000);
	ev_loop_get_stats(loop, &s0);
	ev_loop_run_once(loop, 5);
	ev_loop_get_stats(loop, &s1);
	CHECK_EQ(a.calls, 0);
	CHECK_EQ(s1.sleeps - s0.sleeps, 1);

	/* a 1 s window after activity: the poller's work on its third call ends the wait at
	   once, counted as a poller hit and as work done, with no sleep */
	ev_loop_set_poll_us(loop, 1000000);
	ev_loop_set_poll_greedy(loop, true);
	poke(f->io.fd);
	ev_loop_run_once(loop, 1000);
	a.calls = 0;
	ev_loop_get_stats(loop, &s0);
	r = ev_loop_run_once(loop, 5000);
	ev_loop_get_stats(loop, &s1);
	CHECK_EQ(a.calls, 3);
	CHECK_EQ(r, 1);
	CHECK_EQ(s1.poller_hits - s0.poller_hits, 1);
	CHECK_EQ(s1.sleeps - s0.sleeps, 0);

	/* the work reopened the window: a poller finding nothing keeps being asked until the
	   window ends (a short one here), then the loop sleeps; pollers are not asked asleep */
	ev_loop_set_poll_us(loop, 2000);
	poke(f->io.fd);
	ev_loop_run_once(loop, 1000);
	a.calls = 0;
	a.work_at = 0;
	ev_loop_get_stats(loop, &s0);
	r = ev_loop_run_once(loop, 50);
	ev_loop_get_stats(loop, &s1);
	CHECK(a.calls >= 1);
	CHECK_EQ(r, 0);
	CHECK_EQ(s1.sleeps - s0.sleeps, 1);
	CHECK_EQ(s1.poller_hits - s0.poller_hits, 0);
	{
		int calls = a.calls;

		ev_loop_run_once(loop, 5); /* idle: the window closed, no poller call */
		CHECK_EQ(a.calls, calls);
	}

	/* with a poller running, epoll is asked on every fourth try only (a poller that reads its
	   socket itself saves the epoll call): an fd made readable during the poller's second
	   call is seen by the epoll of the fifth try, after the poller's fourth call, not at once */
	{
		int hits = f->hits;

		ev_loop_set_poll_us(loop, 1000000);
		poke(f->io.fd);
		ev_loop_run_once(loop, 1000);
		a.calls = 0;
		a.work_at = 0;
		a.poke_at = 2;
		a.poke_fd = f->io.fd;
		r = ev_loop_run_once(loop, 5000);
		CHECK_EQ(r, 1);
		CHECK_EQ(a.calls, 4);
		CHECK_EQ(f->hits, hits + 2);
		a.poke_at = 0;
	}

	/* a poller stops itself and the other one from its callback: the round ends safely and
	   neither is asked again */
	ev_loop_set_poll_us(loop, 1000000);
	ev_poller_start(loop, &b.p);
	a.calls = b.calls = 0;
	b.work_at = 2;
	b.stop_too = &a.p;
	poke(f->io.fd);
	ev_loop_run_once(loop, 1000);
	r = ev_loop_run_once(loop, 5000);
	CHECK_EQ(r, 1);
	CHECK(!a.p.active && !b.p.active);
	{
		int ca = a.calls, cb = b.calls;

		poke(f->io.fd);
		ev_loop_run_once(loop, 1000);
		ev_loop_run_once(loop, 5);
		CHECK_EQ(a.calls, ca);
		CHECK_EQ(b.calls, cb);
	}
	ev_poller_stop(loop, &a.p); /* idempotent */
	ev_loop_set_poll_greedy(loop, false);
	ev_loop_set_poll_us(loop, 0);
}

int main(void)
{
	struct ev_loop *loop = ev_loop_new();
	struct fdev f = {0};
	struct ev_loop_stats st, d;
	struct ev_timer t;
	uint64_t cpu, wall;
	int fired = 0, hits;

	CHECK(loop != NULL);
	ev_io_init(&f.io, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), fd_cb, &f);
	CHECK_EQ(ev_io_start(loop, &f.io, EPOLLIN), 0);

	/* off (the default): the second event is waited for asleep */
	d = second_event(loop, &f, 2000, 5000);
	CHECK_EQ(d.poll_hits, 0);
	CHECK_EQ(d.sleeps, 1);
	CHECK_EQ(f.hits, 2);

	/* a 200 ms window: an event 2 ms after the last one is taken by the poll, no sleep */
	ev_loop_set_poll_us(loop, 200000);
	ev_loop_set_poll_greedy(loop, true);
	d = second_event(loop, &f, 2000, 5000);
	CHECK_EQ(d.poll_hits, 1);
	CHECK_EQ(d.sleeps, 0);
	CHECK_EQ(f.hits, 4);

	/* a zero timeout never polls: the caller asked not to wait */
	hits = f.hits;
	poke(f.io.fd);
	ev_loop_run_once(loop, 0);
	ev_loop_get_stats(loop, &st);
	CHECK_EQ(ev_loop_run_once(loop, 0), 0);
	ev_loop_get_stats(loop, &d);
	CHECK_EQ(d.poll_hits, st.poll_hits);
	CHECK_EQ(d.sleeps, st.sleeps);
	CHECK_EQ(f.hits, hits + 1);

	/* the window is bounded: with nothing arriving, a 1 s wait after activity polls for at
	   most the 2 ms window, then sleeps; CPU time stays far below the wait (a spin through the
	   whole wait would use 250 ms or more even with four threads per core) */
	ev_loop_set_poll_us(loop, 2000);
	poke(f.io.fd);
	ev_loop_run_once(loop, 1000);
	ev_loop_get_stats(loop, &st);
	cpu = thread_cpu_us();
	ev_loop_run_once(loop, 1000);
	cpu = thread_cpu_us() - cpu;
	ev_loop_get_stats(loop, &d);
	CHECK_EQ(d.sleeps - st.sleeps, 1);
	CHECK(cpu < 50000);

	/* an idle loop (no activity since the window closed) sleeps at once, spending no CPU */
	ev_loop_set_poll_us(loop, 10000);
	ev_loop_get_stats(loop, &st);
	cpu = thread_cpu_us();
	ev_loop_run_once(loop, 200);
	cpu = thread_cpu_us() - cpu;
	ev_loop_get_stats(loop, &d);
	CHECK_EQ(d.sleeps - st.sleeps, 1);
	CHECK_EQ(d.poll_hits, st.poll_hits);
	CHECK(cpu < 20000);

	/* a timer due inside a 2 s window fires on time: the poll ends at the wait's timeout */
	ev_loop_set_poll_us(loop, 2000000);
	poke(f.io.fd);
	ev_loop_run_once(loop, 1000);
	ev_timer_init(&t, timer_cb, &fired);
	ev_timer_start(loop, &t, 3);
	wall = mono_us();
	while (!fired && mono_us() - wall < 2000000)
		ev_loop_run_once(loop, -1);
	wall = mono_us() - wall;
	CHECK_EQ(fired, 1);
	CHECK(wall < 1000000);

	test_contention(loop, &f);
	test_pollers(loop, &f);
	ev_io_stop(loop, &f.io);
	close(f.io.fd);
	ev_loop_free(loop);
	return tap_done();
}
