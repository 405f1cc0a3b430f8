/* When the event loop's poll window may spin: the contention policy of ev_loop's adaptive
 * polling, apart from the loop so that it can be tested with made-up timings.
 *
 * Polling pays only when the polling thread has its CPU (nearly) to itself. A thread that spins
 * on a CPU other threads want takes their time, loses the scheduler's wake-up preference, and
 * then waits behind them when its own data arrives. The loop's spin yields between tries, so
 * another runnable thread gets the CPU at once; a try that took far longer than a try takes
 * (POLL_GAP_NS) means the CPU went to someone else meanwhile, and that time is "stolen". The
 * policy judges the share of stolen time over a period of polling (POLL_ACCT_NS of it, summed
 * over as many poll phases as that takes): above POLL_STOLEN_PCT the window shuts for a
 * back-off (POLL_BACKOFF_MIN_NS, doubling while the contention lasts, up to
 * POLL_BACKOFF_MAX_NS); a clean period halves the back-off level again. A kernel thread or an
 * interrupt that takes the CPU for some microseconds now and then is a small share and does not
 * shut the window; a CPU-bound neighbour, or the peer itself spinning on the same CPU, is a
 * large share and does. */
#ifndef IX_EVENT_POLLCTL_H
#define IX_EVENT_POLLCTL_H

#include <stdbool.h>
#include <stdint.h>

#define POLL_GAP_NS (10u * 1000u)	    /* a try slower than this: the CPU was taken */
#define POLL_ACCT_NS (2u * 1000000u)	    /* polling time per verdict */
#define POLL_STOLEN_PCT 25u		    /* stolen share that shuts the window */
#define POLL_BACKOFF_MIN_NS (5u * 1000000u) /* first back-off */
#define POLL_BACKOFF_MAX_NS (1000u * 1000000u)

struct ev_pollctl {
	uint64_t polled_ns;	   /* polling time in the current period */
	uint64_t stolen_ns;	   /* of it, time the CPU was someone else's */
	uint64_t backoff_ns;	   /* current back-off level (0: none) */
	uint64_t backoff_until_ns; /* no polling before this instant */
};

/* May the window spin at monotonic time now? */
static inline bool ev_pollctl_allowed(const struct ev_pollctl *pc, uint64_t now)
{
	return now >= pc->backoff_until_ns;
}

/* One try of a poll phase took took_ns. A try slower than POLL_GAP_NS counts whole as stolen
 * (a preemption is not a few microseconds late, it is another thread's time slice). Returns the
 * stolen nanoseconds of this try. */
static inline uint64_t ev_pollctl_stolen(uint64_t took_ns)
{
	return took_ns > POLL_GAP_NS ? took_ns : 0;
}

/* After a poll phase that lasted polled_ns, stolen_ns of it taken by others (the sum of
 * ev_pollctl_stolen over its tries), ending at now. Returns true when it shut the window. */
static inline bool ev_pollctl_account(struct ev_pollctl *pc, uint64_t now, uint64_t polled_ns,
				      uint64_t stolen_ns)
{
	pc->polled_ns += polled_ns;
	pc->stolen_ns += stolen_ns;
	if (pc->polled_ns < POLL_ACCT_NS)
		return false;
	bool contended = pc->stolen_ns * 100u > pc->polled_ns * (uint64_t)POLL_STOLEN_PCT;

	pc->polled_ns = pc->stolen_ns = 0;
	if (!contended) {
		pc->backoff_ns /= 2;
		if (pc->backoff_ns < POLL_BACKOFF_MIN_NS)
			pc->backoff_ns = 0;
		return false;
	}
	pc->backoff_ns = pc->backoff_ns ? pc->backoff_ns * 2 : POLL_BACKOFF_MIN_NS;
	if (pc->backoff_ns > POLL_BACKOFF_MAX_NS)
		pc->backoff_ns = POLL_BACKOFF_MAX_NS;
	pc->backoff_until_ns = now + pc->backoff_ns;
	return true;
}

#endif
