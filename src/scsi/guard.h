/* The LU range guard: what makes COMPARE AND WRITE, ORWRITE and WRITE ATOMIC atomic with
 * respect to every other command on the LU, whichever worker thread runs it.
 *
 * An atomic command takes its block range exclusively. Every other command that touches the
 * medium (reads, writes, WRITE SAME, UNMAP, EXTENDED COPY chunks) takes its range shared, in
 * one of two ways:
 *   - fast path, while no exclusive range is held or waiting: one atomic increment of a
 *     per-thread-slot counter and one atomic load, no lock, no list;
 *   - slow path, while one is: under the guard's mutex, the range goes on the held list (or
 *     waits behind an overlapping exclusive range, FIFO) and a parked command is resumed on
 *     its own thread through an allocation-free post.
 * An exclusive range is granted when no overlapping range is held or queued ahead of it and
 * no fast-path I/O is in flight anywhere on the LU (the fast path cannot say which blocks it
 * touches, so an exclusive range waits for all of it to drain; new I/O meanwhile takes the
 * slow path). The increment-then-check on the fast path and the increment-then-sum on the
 * exclusive side are sequentially consistent, so one of the two always sees the other.
 *
 * Threads: scsi_guard_enter/leave run on the command's thread; resume callbacks run there
 * too. The guard outlives every command on its LU (it is freed with the LU).
 */
#ifndef IX_SCSI_GUARD_H
#define IX_SCSI_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "util/list.h"

struct scsi_cmd;
struct scsi_guard;

#define SCSI_GUARD_SLOTS 16

/* A range held or waiting on the slow path; lives in the command's slow context. */
struct scsi_guard_ent {
	struct list_head link;	     /* guard->held or guard->waiting */
	struct scsi_cmd *cmd;
	uint64_t lba, end;	     /* blocks [lba, end) */
	bool excl;
	bool held;
	void (*resume)(struct scsi_cmd *cmd); /* runs on cmd's thread once granted */
	struct ev_post post;
	struct scsi_guard_ent *granted_next; /* private to a grant pass */
};

struct scsi_guard *scsi_guard_new(void);
void scsi_guard_free(struct scsi_guard *g);

/* Take blocks [lba, lba + n) of the command's LU g (n > 0), exclusively or shared. Returns 1
 * when the command may go on now, 0 when it was parked (resume(cmd) runs later on the
 * command's thread, with the range held), -ENOMEM when the slow path had no memory. The
 * command holds at most one range at a time. */
int scsi_guard_enter(struct scsi_guard *g, struct scsi_cmd *cmd, uint64_t lba, uint64_t n,
		     bool excl, void (*resume)(struct scsi_cmd *cmd));
/* Give the range back (wakes whatever waited for it). */
void scsi_guard_leave(struct scsi_guard *g, struct scsi_cmd *cmd);

/* For tests: exclusive ranges held or waiting, and fast-path I/O in flight. */
unsigned scsi_guard_excl_count(const struct scsi_guard *g);
unsigned scsi_guard_fast_count(const struct scsi_guard *g);

#endif
