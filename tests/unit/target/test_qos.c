/* Unit tests for the QoS cell arithmetic (src/target/tgt_qos.c): the GCRA reservation of one
 * cell, table-driven (a sequence of commands at given times and the start each gets), the
 * combination of a LUN's limits, and the long-run rate. */
#include <stdint.h>
#include <stdio.h>

#include "tap.h"
#include "target/tgt_qos.h"

#define MS 1000000ull
#define S  1000000000ull

static void test_cost(void)
{
	static const struct {
		uint64_t cost, rate, ns;
	} t[] = {
	    {1, 1, S},           {1, 1000, MS},          {1, 2000, 500000},
	    {1, 3, 333333333},   {4096, 4096, S},        {4096, 1u << 20, 3906250},
	    {65536, 100u << 20, 625000}, {0, 10, 0},     {1u << 26, 1, (1ull << 26) * S},
	    {1, 100000000, 10},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t got = tgt_qos_cost_ns(t[i].cost, t[i].rate);

		CHECK_EQ(got, t[i].ns);
	}
}

/* One cell: each step is a command of cost at now; want is its start and tat after. */
struct step {
	uint64_t now, cost, want_start, want_tat;
};

static const struct {
	const char *name;
	uint64_t rate, burst_ns, tat0;
	struct step s[6];
	int n;
} cells[] = {
    {"idle cell: at once, then spaced by 1/rate", 1000, 0, 0,
     {{10 * MS, 1, 10 * MS, 11 * MS}, {10 * MS, 1, 11 * MS, 12 * MS},
      {10 * MS, 1, 12 * MS, 13 * MS}, {20 * MS, 1, 20 * MS, 21 * MS}},
     4},
    {"burst: 3 ms of a 1000/s rate, 4 at once, then spaced", 1000, 3 * MS, 0,
     {{10 * MS, 1, 10 * MS, 11 * MS}, {10 * MS, 1, 10 * MS, 12 * MS},
      {10 * MS, 1, 10 * MS, 13 * MS}, {10 * MS, 1, 10 * MS, 14 * MS},
      {10 * MS, 1, 11 * MS, 15 * MS}, {10 * MS, 1, 12 * MS, 16 * MS}},
     6},
    {"bytes: cost by size", 1u << 20, 0, 0,
     {{0, 1u << 19, 0, S / 2}, {0, 1u << 19, S / 2, S}, {2 * S, 4096, 2 * S, 2 * S + 3906250}},
     3},
    {"late arrivals do not bank beyond the burst", 100, 10 * MS, 0,
     {{1 * S, 1, 1 * S, 1 * S + 10 * MS}, {5 * S, 1, 5 * S, 5 * S + 10 * MS},
      {5 * S, 1, 5 * S, 5 * S + 20 * MS}, {5 * S, 1, 5 * S + 10 * MS, 5 * S + 30 * MS}},
     4},
    {"a future tat (commands already reserved) is waited for", 10, 0, 3 * S,
     {{1 * S, 1, 3 * S, 3 * S + 100 * MS}, {2 * S, 1, 3 * S + 100 * MS, 3 * S + 200 * MS}},
     2},
};

static void test_cells(void)
{
	for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++) {
		_Atomic uint64_t tat = cells[c].tat0;

		printf("# %s\n", cells[c].name);
		for (int i = 0; i < cells[c].n; i++) {
			const struct step *st = &cells[c].s[i];
			uint64_t start = tgt_qos_cell_take(&tat, cells[c].rate, cells[c].burst_ns,
							   st->cost, st->now);

			CHECK_EQ(start, st->want_start);
			CHECK_EQ(atomic_load(&tat), st->want_tat);
		}
	}
}

/* A LUN's limits together: a read takes read_iops, iops, read_bps and bps; the latest start
 * wins; a write does not touch the read cells. */
static void test_limits(void)
{
	struct tgt_qos q = {0};
	struct cfg_qos c = {.limit = {[CFG_QOS_READ_IOPS] = 1000, [CFG_QOS_READ_BPS] = 1u << 20}};
	uint64_t s;

	CHECK(tgt_qos_set(&q, &c));
	CHECK(!tgt_qos_set(&q, &c)); /* unchanged */
	CHECK(atomic_load(&q.on));
	s = tgt_qos_take(&q, false, 4096, 0); /* first: at once */
	CHECK_EQ(s, 0);
	s = tgt_qos_take(&q, false, 4096, 0); /* bytes bind: 4 KiB at 1 MiB/s = 3.9 ms */
	CHECK_EQ(s, 3906250);
	s = tgt_qos_take(&q, true, 1u << 20, 0); /* writes are not limited */
	CHECK_EQ(s, 0);
	s = tgt_qos_take(&q, false, 0, 0); /* no data: only the IOPS cell (tat 2 ms) */
	CHECK_EQ(s, 2 * MS);
	/* a new limit starts afresh: no wait left from the old one */
	c.limit[CFG_QOS_READ_BPS] = 0;
	c.limit[CFG_QOS_READ_IOPS] = 10;
	CHECK(tgt_qos_set(&q, &c));
	CHECK_EQ(tgt_qos_take(&q, false, 4096, 5 * MS), 5 * MS);
	CHECK_EQ(tgt_qos_take(&q, false, 4096, 5 * MS), 105 * MS);
	/* total iops: reads and writes share it */
	c = (struct cfg_qos){.limit = {[CFG_QOS_IOPS] = 100}};
	CHECK(tgt_qos_set(&q, &c));
	CHECK_EQ(tgt_qos_take(&q, false, 512, S), S);
	CHECK_EQ(tgt_qos_take(&q, true, 512, S), S + 10 * MS);
	CHECK_EQ(tgt_qos_take(&q, false, 512, S), S + 20 * MS);
	/* all off */
	c = (struct cfg_qos){0};
	CHECK(tgt_qos_set(&q, &c));
	CHECK(!atomic_load(&q.on));
}

/* The long run: a queue always full (commands arrive ahead of their time) starts rate commands
 * a second, whatever the burst beyond its first bite. */
static void test_long_run(void)
{
	static const struct {
		uint64_t rate, burst_ms;
	} t[] = {{2000, 0}, {2000, 100}, {333, 0}, {77777, 5}};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		_Atomic uint64_t tat = 0;
		uint64_t now = S, n = 0, start = 0;

		/* reserve until a start passes 10 s after the first */
		while (start < now + 10 * S) {
			start = tgt_qos_cell_take(&tat, t[i].rate, t[i].burst_ms * MS, 1, now);
			n++;
		}
		/* n - 1 commands started in [now, now + 10 s]: 10 s of the rate plus the burst */
		uint64_t want = 10 * t[i].rate + t[i].rate * t[i].burst_ms / 1000;
		printf("# rate %llu burst %llu ms: %llu in 10 s (want %llu)\n",
		       (unsigned long long)t[i].rate, (unsigned long long)t[i].burst_ms,
		       (unsigned long long)(n - 1), (unsigned long long)want);
		/* (1/rate rounded down to whole nanoseconds: at most 1 ns a command fast) */
		CHECK(n - 1 >= want && n - 1 <= want + 2 + want / 10000);
	}
}

int main(void)
{
	test_cost();
	test_cells();
	test_limits();
	test_long_run();
	return tap_done();
}
