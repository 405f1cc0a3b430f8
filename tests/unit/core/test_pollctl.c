/* The poll window's contention policy (event/pollctl.h) on made-up timings: what share of
 * stolen time shuts the window, how long for, how the back-off grows and decays. The loop's own
 * test (test_loop.c) checks the policy in action beside a real busy thread. */
#include "event/pollctl.h"
#include "tap.h"

#define US 1000u
#define MS 1000000u

/* Poll for total_ns in phases of phase_ns, each with stolen_pct of it stolen, starting at *now.
 * Returns the number of back-offs the phases caused; *now advances past each phase and, after
 * a back-off, to its end (the loop does not poll meanwhile). */
static int run(struct ev_pollctl *pc, uint64_t *now, uint64_t total_ns, uint64_t phase_ns,
	       unsigned stolen_pct)
{
	int backoffs = 0;

	for (uint64_t done = 0; done < total_ns; done += phase_ns) {
		if (!ev_pollctl_allowed(pc, *now))
			*now = pc->backoff_until_ns;
		*now += phase_ns;
		if (ev_pollctl_account(pc, *now, phase_ns, phase_ns * stolen_pct / 100u))
			backoffs++;
	}
	return backoffs;
}

int main(void)
{
	struct ev_pollctl pc = {0};
	uint64_t now = 1000 * MS;

	/* a try is stolen only when it is far slower than a try: a time slice, not jitter */
	CHECK_EQ(ev_pollctl_stolen(2 * US), 0);
	CHECK_EQ(ev_pollctl_stolen(POLL_GAP_NS), 0);
	CHECK_EQ(ev_pollctl_stolen(POLL_GAP_NS + 1), POLL_GAP_NS + 1);
	CHECK_EQ(ev_pollctl_stolen(3 * MS), 3 * MS);

	/* a quiet CPU: QD1 round trips leave 20 us phases, 2 % stolen by kernel threads and
	   interrupts: the window never shuts (the policy this replaced shut it on any preemption) */
	CHECK(ev_pollctl_allowed(&pc, now));
	CHECK_EQ(run(&pc, &now, 1000 * MS, 20 * US, 2), 0);
	CHECK(ev_pollctl_allowed(&pc, now));
	/* just under the threshold: still open */
	CHECK_EQ(run(&pc, &now, 100 * MS, 20 * US, POLL_STOLEN_PCT - 1), 0);

	/* no verdict before POLL_ACCT_NS of polling, however bad one phase was */
	CHECK(!ev_pollctl_account(&pc, now, POLL_ACCT_NS / 2, POLL_ACCT_NS / 2));
	CHECK(ev_pollctl_allowed(&pc, now));
	/* the period's second half completes it: over the threshold, shut for the first back-off */
	CHECK(ev_pollctl_account(&pc, now, POLL_ACCT_NS / 2, 0));
	CHECK_EQ(pc.backoff_ns, POLL_BACKOFF_MIN_NS);
	CHECK(!ev_pollctl_allowed(&pc, now));
	CHECK(!ev_pollctl_allowed(&pc, now + POLL_BACKOFF_MIN_NS - 1));
	CHECK(ev_pollctl_allowed(&pc, now + POLL_BACKOFF_MIN_NS));
	now += POLL_BACKOFF_MIN_NS;

	/* contention that lasts (a CPU-bound neighbour: half the polling time goes to it): the
	   back-off doubles each period up to the maximum, so polling costs the neighbour at most
	   one accounting period per back-off */
	CHECK(run(&pc, &now, 40 * MS, 20 * US, 50) >= 5);
	CHECK(pc.backoff_ns >= 32 * POLL_BACKOFF_MIN_NS);
	CHECK(run(&pc, &now, 200 * MS, 20 * US, 50) >= 5);
	CHECK_EQ(pc.backoff_ns, POLL_BACKOFF_MAX_NS);
	/* at the maximum the polling share of the time is tiny */
	{
		uint64_t t0 = now;
		int n = run(&pc, &now, 20 * MS, 20 * US, 50);

		CHECK(n >= 9);
		CHECK(now - t0 >= (uint64_t)(n - 1) * POLL_BACKOFF_MAX_NS);
	}

	/* the contention ends: each clean period halves the level, down to none */
	CHECK_EQ(run(&pc, &now, POLL_ACCT_NS, 20 * US, 0), 0);
	CHECK_EQ(pc.backoff_ns, POLL_BACKOFF_MAX_NS / 2);
	CHECK_EQ(run(&pc, &now, 20 * POLL_ACCT_NS, 20 * US, 0), 0);
	CHECK_EQ(pc.backoff_ns, 0);
	/* and the next contention starts small again */
	CHECK_EQ(run(&pc, &now, POLL_ACCT_NS, 20 * US, 90), 1);
	CHECK_EQ(pc.backoff_ns, POLL_BACKOFF_MIN_NS);
	return tap_done();
}
