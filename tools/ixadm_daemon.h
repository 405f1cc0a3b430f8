/* Inside the session daemon (`ixadm --serve`): what ixadm_daemon.c and ixadm_fuse.c share.
 *
 * One thread, one poll(2) loop over: the initiator context's fd (ix_ctx_fd), the control
 * socket and its clients, a signalfd, and the /dev/fuse descriptor of each attachment. The
 * ix context is only ever called from this thread. Every SCSI command the daemon issues is a
 * struct dcmd with a deadline: past it the command is aborted (ABORT TASK); an abort that
 * is not answered within the abort timeout resets the session (free, new login), which
 * completes everything outstanding. Nothing waits without a bound.
 */
#ifndef IXADM_DAEMON_H
#define IXADM_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ix/initiator.h"

struct daemon;
struct dcmd;
struct attach;
typedef void (*dcmd_cb)(struct dcmd *dc);

struct dcmd {
	struct ix_scsi_cmd cmd;   /* cmd.err is -ETIMEDOUT when the deadline aborted it */
	struct daemon *d;
	dcmd_cb cb;               /* runs once, on the loop thread */
	void *owner;
	uint64_t deadline;        /* abort at; then: reset the session at */
	bool inflight;
	bool aborting;
	bool timed_out;
	struct dcmd *prev, *next; /* the daemon's in-flight list */
};

/* Submit with the session's command timeout (timeout_ms 0) or the given one. 0: cb runs
 * later; -errno: cb will not run (e.g. -ENOTCONN when the session is down). */
int d_submit(struct daemon *d, struct dcmd *dc, uint32_t timeout_ms);
/* "CHECK CONDITION: ILLEGAL REQUEST 24/00" or the error of a failed command. */
void d_cmd_result_str(const struct dcmd *dc, char *buf, size_t len);
/* An attachment ended: tell the clients waiting in "detach" (code 0 = clean). */
void d_attach_ended(struct daemon *d, struct attach *a, int code, const char *msg);
const char *d_target(const struct daemon *d);
void d_log(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- ixadm_fuse.c */
/* Mount a FUSE file at path (an existing empty regular file) exposing lun. flags: 'f' FUA
 * on every write, 'r' read only, 'd' direct_io (no page cache). */
struct attach *att_new(struct daemon *d, uint32_t lun, uint64_t blocks, uint32_t bs,
		       const char *flags, const char *path, char *err, size_t errlen);
/* The fd to poll for POLLIN now, or -1 (all request slots busy, or ending). */
int att_poll_fd(const struct attach *a);
void att_readable(struct attach *a);
/* Stop serving (SIGTERM): finish what is in flight, flush, then unmount lazily. */
void att_shutdown(struct attach *a);
/* Ended (unmounted and flushed, waiters told): the daemon frees it. */
bool att_ended(const struct attach *a);
void att_free(struct attach *a);
const char *att_path(const struct attach *a);
uint32_t att_lun(const struct attach *a);

#endif
