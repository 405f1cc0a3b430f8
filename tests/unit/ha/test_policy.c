/* The high-availability policy (src/ha/ha_policy.c), table by table, without a cluster: may a
 * holder hand over, what a take-over does with the holder's answer, implicit failover's
 * timing, healing a split, and where a rejoined gateway stands. Each row names the rule it
 * checks.
 *
 * Mutation check: 30 edits of ha_policy.c, each breaking one rule on its own (a comparison
 * made strict or loose, a condition dropped, a result swapped; e.g. "an alive holder's lock is
 * broken", "a refused heal is remembered", "a rejoined gateway keeps the free lock"), were
 * tried with these tables. The first run caught 28 of 30; the two missed ("last 0 is no
 * previous I/O" when the clock is small, "a release without the lock") got the rows marked
 * "... also early" and "a release without the lock"; then 30 of 30 were caught. */
#include <errno.h>
#include <stdio.h>

#include "ha/ha_own.h"
#include "ha/ha_own_rec.h"
#include "ha/ha_policy.h"
#include "scsi/scsi.h"
#include "tap.h"

#define N(t) (sizeof(t) / sizeof((t)[0]))

static void test_may_hand_over(void)
{
	static const struct {
		int ask;
		uint64_t idle_ms;
		uint32_t window_ms;
		bool want;
		const char *rule;
	} t[] = {
	    {HA_OWN_EXPLICIT, 0, 3000, true, "explicit: always, even while busy"},
	    {HA_OWN_EXPLICIT, 99999, 0, true, "explicit: always, without a window"},
	    {HA_OWN_IMPLICIT, 0, 3000, false, "implicit: busy now: refused"},
	    {HA_OWN_IMPLICIT, 1499, 3000, false, "implicit: idle under half the window: refused"},
	    {HA_OWN_IMPLICIT, 1500, 3000, true,
	     "implicit: idle exactly half the window: hands over"},
	    {HA_OWN_IMPLICIT, 1501, 3001, true, "implicit: half rounds down (3001 / 2 = 1500)"},
	    {HA_OWN_IMPLICIT, 60000, 3000, true, "implicit: long idle: hands over"},
	    {HA_OWN_HEAL, 60000, 3000, false, "heal: never, however idle"},
	    {HA_OWN_HEAL, 0, 0, false, "heal: never, without a window"},
	    {7, 60000, 3000, false, "an unknown ask: never"},
	};

	for (size_t i = 0; i < N(t); i++) {
		bool got = ha_policy_may_hand_over(t[i].ask, t[i].idle_ms, t[i].window_ms);

		if (got != t[i].want)
			printf("# %s\n", t[i].rule);
		CHECK_EQ(got, t[i].want);
	}
}

static void test_take_step(void)
{
	static const struct {
		int mode;
		enum ha_answer a;
		bool moved;
		enum ha_take_step want;
		const char *rule;
	} t[] = {
	    {HA_TAKE_EXPLICIT, HA_ANSWER_RELEASED, false, HA_STEP_TAKE, "released: take it"},
	    {HA_TAKE_IMPLICIT, HA_ANSWER_RELEASED, false, HA_STEP_TAKE,
	     "released (implicit): take it"},
	    {HA_TAKE_HEAL, HA_ANSWER_RELEASED, false, HA_STEP_TAKE, "released (heal): take it"},
	    {HA_TAKE_EXPLICIT, HA_ANSWER_SILENT, false, HA_STEP_BREAK,
	     "silent holder: break its lock"},
	    {HA_TAKE_HEAL, HA_ANSWER_SILENT, false, HA_STEP_BREAK,
	     "silent holder (heal): break it"},
	    {HA_TAKE_EXPLICIT, HA_ANSWER_SILENT, true, HA_STEP_AGAIN,
	     "silent, but moved: ask again"},
	    {HA_TAKE_EXPLICIT, HA_ANSWER_ALIVE, false, HA_STEP_GIVE_UP, "alive: never break it"},
	    {HA_TAKE_EXPLICIT, HA_ANSWER_ALIVE, true, HA_STEP_AGAIN, "alive and moved: ask again"},
	    {HA_TAKE_IMPLICIT, HA_ANSWER_REFUSED, false, HA_STEP_REFUSED, "refused: remember it"},
	    {HA_TAKE_EXPLICIT, HA_ANSWER_REFUSED, false, HA_STEP_REFUSED, "refused (explicit)"},
	    {HA_TAKE_HEAL, HA_ANSWER_REFUSED, false, HA_STEP_GIVE_UP,
	     "refused a heal: give up, not a refusal to remember"},
	};

	for (size_t i = 0; i < N(t); i++) {
		enum ha_take_step got = ha_policy_take_step(t[i].mode, t[i].a, t[i].moved);

		if (got != t[i].want)
			printf("# %s\n", t[i].rule);
		CHECK_EQ(got, t[i].want);
	}
}

static void test_implicit(void)
{
	static const struct {
		uint32_t implicit_ms;
		bool standby;
		uint64_t now, last, first;
		enum ha_implicit want;
		const char *rule;
	} t[] = {
	    {0, true, 10000, 9000, 1000, HA_IMPLICIT_OFF, "implicit failover off"},
	    {3000, false, 10000, 9000, 1000, HA_IMPLICIT_OFF, "not standby: nothing"},
	    {3000, true, 10000, 0, 0, HA_IMPLICIT_START, "the first refused I/O starts a run"},
	    {3000, true, 2000, 0, 0, HA_IMPLICIT_START,
	     "... also early on the clock (last 0: none)"},
	    {3000, true, 10000, 6999, 1000, HA_IMPLICIT_START, "a gap over implicit_ms: a new run"},
	    {3000, true, 10000, 7000, 8000, HA_IMPLICIT_WAIT,
	     "a gap of exactly implicit_ms: same run"},
	    {3000, true, 10000, 9999, 7001, HA_IMPLICIT_WAIT,
	     "the run is shorter than implicit_ms"},
	    {3000, true, 10000, 9999, 7000, HA_IMPLICIT_ASK, "the run is implicit_ms long: ask"},
	    {3000, true, 10000, 9999, 1000, HA_IMPLICIT_ASK, "a long run: ask"},
	};

	for (size_t i = 0; i < N(t); i++) {
		enum ha_implicit got = ha_policy_implicit(t[i].implicit_ms, t[i].standby, t[i].now,
							  t[i].last, t[i].first);

		if (got != t[i].want)
			printf("# %s\n", t[i].rule);
		CHECK_EQ(got, t[i].want);
	}
}

static void test_heal(void)
{
	static const struct {
		uint64_t since, now;
		bool want;
		const char *rule;
	} due[] = {
	    {0, 100000, false, "not split: no heal"},
	    {1000, 1000 + HA_HEAL_MS - 1, false, "split for less than HA_HEAL_MS: wait"},
	    {1000, 1000 + HA_HEAL_MS, true, "split for HA_HEAL_MS: heal"},
	    {1000, 100000, true, "split long: heal"},
	};
	static const struct {
		int first_own;
		enum ha_heal want;
		const char *rule;
	} how[] = {
	    {HA_OWN_OWNER, HA_HEAL_TAKE_OTHERS, "holds the lowest LU's lock: takes the others"},
	    {HA_OWN_STANDBY, HA_HEAL_ASK_FIRST, "standby for the lowest: asks for it (heal)"},
	    {HA_OWN_ACQUIRING, HA_HEAL_ASK_FIRST, "acquiring the lowest: asks for it"},
	    {HA_OWN_RELEASING, HA_HEAL_ASK_FIRST, "releasing the lowest: asks for it"},
	    {HA_OWN_FENCED, HA_HEAL_ASK_FIRST, "fenced: asks (the take-over refuses it)"},
	};

	for (size_t i = 0; i < N(due); i++) {
		bool got = ha_policy_heal_due(due[i].since, due[i].now);

		if (got != due[i].want)
			printf("# %s\n", due[i].rule);
		CHECK_EQ(got, due[i].want);
	}
	for (size_t i = 0; i < N(how); i++) {
		enum ha_heal got = ha_policy_heal(how[i].first_own);

		if (got != how[i].want)
			printf("# %s\n", how[i].rule);
		CHECK_EQ(got, how[i].want);
	}
}

static void test_rejoin(void)
{
	static const struct {
		int acquire_rc, release_rc;
		int want;
		const char *rule;
	} t[] = {
	    {0, 0, HA_OWN_STANDBY, "got the free lock, let it go: standby (never takes it back)"},
	    {-EROFS, 0, HA_OWN_STANDBY, "another holds it: standby"},
	    {-ETIMEDOUT, 0, HA_OWN_STANDBY, "the cluster is slow: standby"},
	    {-ESHUTDOWN, 0, HA_OWN_FENCED, "blocklisted again taking it: fenced"},
	    {0, -ESHUTDOWN, HA_OWN_FENCED, "blocklisted again releasing it: fenced"},
	    {0, -EIO, HA_OWN_OWNER, "could not release it: it holds it, says so"},
	    {-EROFS, -EIO, HA_OWN_STANDBY, "a release without the lock counts for nothing"},
	};

	for (size_t i = 0; i < N(t); i++) {
		int got = ha_policy_rejoin(t[i].acquire_rc, t[i].release_rc);

		if (got != t[i].want)
			printf("# %s\n", t[i].rule);
		CHECK_EQ(got, t[i].want);
	}
}

/* Login redirection to the owner: three gateways' groups (1 here with ports 1 and 5, 2 and 3
 * elsewhere), their states as the lock's owner makes them. */
static void test_owner_group(void)
{
	enum { AO = SCSI_ALUA_ACTIVE_OPTIMIZED, AN = SCSI_ALUA_ACTIVE_NON_OPTIMIZED,
	       SB = SCSI_ALUA_STANDBY, UA = SCSI_ALUA_UNAVAILABLE, TR = SCSI_ALUA_TRANSITIONING };
	static const struct {
		uint8_t s1, s2, s3;
		uint16_t port, want;
		const char *rule;
	} t[] = {
	    {AO, SB, SB, 1, 0, "this gateway owns it: served here"},
	    {AN, AO, SB, 1, 0, "this gateway active/non-optimized: served here (multipath)"},
	    {SB, AO, SB, 1, 2, "owned by gateway 2: sent there"},
	    {SB, SB, AO, 5, 3, "owned by gateway 3, login on the second local port: sent there"},
	    {UA, AO, SB, 1, 2, "unavailable here (fenced): sent to the owner"},
	    {TR, SB, AO, 1, 3, "transitioning here: sent to the owner"},
	    {SB, SB, SB, 1, 0, "nobody owns it: served here (a login may be what takes it)"},
	    {SB, AN, SB, 1, 0, "the other gateway only active/non-optimized: served here"},
	    {SB, AO, SB, 2, 0, "port 2 is not this gateway's: served (no local group)"},
	    {SB, AO, SB, 9, 0, "a port in no group: served"},
	    {SB, AO, AO, 1, 2, "two owners (a split): the first"},
	};

	for (size_t i = 0; i < N(t); i++) {
		struct scsi_alua_cfg a = {.ngroups = 3};

		a.groups[0] = (struct scsi_alua_group_cfg){
		    .id = 1, .state = t[i].s1, .local = true, .nports = 2, .ports = {1, 5}};
		a.groups[1] = (struct scsi_alua_group_cfg){
		    .id = 2, .state = t[i].s2, .nports = 1, .ports = {2}};
		a.groups[2] = (struct scsi_alua_group_cfg){
		    .id = 3, .state = t[i].s3, .nports = 1, .ports = {3}};
		uint16_t got = ha_policy_owner_group(&a, t[i].port);

		if (got != t[i].want)
			printf("# %s\n", t[i].rule);
		CHECK_EQ(got, t[i].want);
	}
	struct scsi_alua_cfg none = {.ngroups = 0};
	CHECK_EQ(ha_policy_owner_group(&none, 1), 0);
}

int main(void)
{
	test_may_hand_over();
	test_take_step();
	test_implicit();
	test_heal();
	test_rejoin();
	test_owner_group();
	return tap_done();
}
