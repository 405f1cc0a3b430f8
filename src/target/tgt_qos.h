/* QoS: I/O limits per LUN and per initiator of a target (configuration.md, "QoS").
 *
 * Each limit is a cell of a generic cell rate algorithm (GCRA, the virtual-scheduling form of a
 * token bucket): its theoretical arrival time `tat` says when the allowance spent so far is
 * paid back. A command of cost c (1 for an IOPS limit, its bytes for a byte rate) may start at
 * max(now, tat - burst) and moves tat to max(tat, now) + c / rate. Reserving is one
 * compare-and-swap on the cell: the cells of a limited LUN or initiator are shared by every
 * worker that serves it, so the rate is exact and first come first served however the
 * sessions are spread over the workers, without a lock and without splitting the rate into
 * per-worker shares that an uneven load would leave unused. A command that may not start yet
 * waits in its worker's queue (sorted by start time, FIFO among equal ones) until the
 * worker's timer releases it; it keeps its place in the task table, so TMFs and a closed
 * connection end it as any task that has not reached the SCSI layer.
 *
 * Nothing of this runs for a target without limits: the data path tests one flag of the
 * target (tgt_node.qos_on). */
#ifndef IX_TARGET_TGT_QOS_H
#define IX_TARGET_TGT_QOS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "target/config.h"
#include "util/list.h"

/* One limited thing (a LUN, an initiator): its rates and cells. Written by the main thread
 * (rates), reserved from by workers (cells). */
struct tgt_qos {
	_Atomic uint64_t rate[CFG_QOS_NLIMITS]; /* per second, 0 = none */
	_Atomic uint64_t burst_ns;
	_Atomic uint64_t tat[CFG_QOS_NLIMITS];  /* CLOCK_MONOTONIC ns */
	atomic_bool on;                         /* any rate set */
};

struct tgt_qos_ini {
	struct tgt_qos q;
	struct tgt_qos_ini *next; /* fixed once published */
	char name[224];
};

/* A target's limits, as long as its node. LUN and initiator entries are made by the main
 * thread when a limit is first configured and stay (a limit taken away is rates of 0). */
struct tgt_qos_node {
	_Atomic(struct tgt_qos *) lun[SCSI_MAX_LUNS]; /* by the target's LUN */
	_Atomic(struct tgt_qos_ini *) inis;       /* prepended */
	atomic_uint ini_gen;                      /* entries added (sessions look again) */
};

/* One worker's queue of commands waiting for their start time. */
struct tgt_qos_worker {
	bool init;
	struct list_head queue;  /* struct tgt_task.qlink, by qos_start */
	struct ev_timer timer;
	struct ev_loop *loop;
};

/* ---- pure (unit-tested: tests/unit/target/test_qos.c) ---- */

/* Nanoseconds that cost units take at rate per second (rate > 0). */
uint64_t tgt_qos_cost_ns(uint64_t cost, uint64_t rate);
/* Reserve cost units in the cell tat (rate > 0): the time the command may start. */
uint64_t tgt_qos_cell_take(_Atomic uint64_t *tat, uint64_t rate, uint64_t burst_ns,
			   uint64_t cost, uint64_t now_ns);
/* Reserve a command (write: else a read) of bytes bytes in q's cells: its start time. */
uint64_t tgt_qos_take(struct tgt_qos *q, bool write, uint64_t bytes, uint64_t now_ns);
/* Set q's limits: true when they changed (then the cells start afresh). */
bool tgt_qos_set(struct tgt_qos *q, const struct cfg_qos *c);

/* ---- the target (main thread) ---- */
struct tgt_node;
struct ix_target;
struct tgt_qos_node *tgt_qos_node_new(void);
void tgt_qos_node_free(struct tgt_qos_node *qn);
/* Make the node's limits those of ct (at creation and after a reload); when anything
 * changed, the workers plan their waiting commands again. 0 or -ENOMEM (then some limits
 * keep their old values). */
int tgt_qos_apply(struct ix_target *t, struct tgt_node *n, const struct cfg_target *ct);

/* ---- the worker ---- */
struct tgt_task;
/* The command may run now (false), or it waits in its worker's queue (true) and runs
 * (tgt_task_exec) when released. Only when the node's qos_on is set. */
bool tgt_qos_hold(struct tgt_task *t);
/* Take a waiting task out of its worker's queue (it is being freed). */
void tgt_qos_unqueue(struct tgt_task *t);

#endif
