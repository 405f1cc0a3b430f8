/* SANITIZE (SBC-4 5.30, 4.11): OVERWRITE, BLOCK ERASE, CRYPTOGRAPHIC ERASE and EXIT FAILURE
 * MODE.
 *
 * A sanitize is an operation of the LU, not of the command: it runs in the background on the
 * submitting worker's thread, in chunks (each a backend I/O; the thread's event loop runs
 * between chunks), while every command but INQUIRY, REPORT LUNS and REQUEST SENSE gets NOT
 * READY, SANITIZE IN PROGRESS (cmd.c) and REQUEST SENSE reports the progress. Without IMMED the
 * command completes when the operation does; ABORT TASK, resets and the loss of the nexus end
 * the command but not the operation. A failed operation leaves the medium refusing access with
 * MEDIUM ERROR, SANITIZE COMMAND FAILED until a sanitize succeeds or EXIT FAILURE MODE.
 *
 * What each service action does here:
 *   OVERWRITE      writes the initialization pattern (repeated to fill each block) over every
 *                  block, OVERWRITE COUNT times, inverted between passes when INVERT is set;
 *                  at most lu->sanitize_rate bytes per second when that is set.
 *   BLOCK ERASE    deallocates every block (only on thin LUs, where it is listed by REPORT
 *                  SUPPORTED OPERATION CODES); they read back as zeros (LBPRZ).
 *   CRYPTOGRAPHIC ERASE  ix keeps no encryption key to change, so it erases the data itself:
 *                  deallocation on thin LUs that read deallocated blocks as zeros, zeros
 *                  written over every block otherwise. The user data is gone either way.
 * Then the backend is flushed, so the result is durable when the operation ends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi_int.h"

#define SAN_OVERWRITE	0x01
#define SAN_BLOCK_ERASE 0x02
#define SAN_CRYPTO	0x03
#define SAN_EXIT_FAIL	0x1f

#define SAN_CHUNK (4u << 20) /* bytes per backend I/O */

struct scsi_sanitize {
	struct list_head link; /* on thread->sanitizes */
	struct bs_io io;
	struct ev_timer timer;
	struct scsi_lu *lu; /* holds a reference */
	struct scsi_thread *thread;
	struct scsi_cmd *cmd; /* waiting for the end (no IMMED), or NULL */
	uint8_t op;	      /* backend op of the passes */
	bool invert;
	bool ause;
	bool submitting, in_flight, flushing, failed, stopping;
	unsigned pass, passes;
	uint64_t pos, size; /* bytes done in this pass, bytes per pass */
	uint64_t delay_ms;  /* pause after the chunk in flight (rate limit) */
	uint8_t *pattern;   /* one block for OVERWRITE, its inverse after it */
};

static void san_next(struct scsi_sanitize *s);

static void san_finish(struct scsi_sanitize *s)
{
	struct scsi_lu *lu = s->lu;
	struct scsi_cmd *cmd = s->cmd;
	bool ok = !s->failed && !s->stopping;

	if (s->thread) {
		ev_timer_stop(s->thread->loop, &s->timer);
		list_del(&s->link);
	}
	pthread_mutex_lock(&lu->lock);
	lu->san = NULL;
	if (ok) {
		atomic_fetch_and(&lu->mstate, (uint8_t) ~(SCSI_MS_SANITIZE | SCSI_MS_SAN_FAIL));
	} else {
		lu->san_fail_ause = s->ause;
		atomic_fetch_or(&lu->mstate, SCSI_MS_SAN_FAIL);
		atomic_fetch_and(&lu->mstate, (uint8_t)~SCSI_MS_SANITIZE);
	}
	pthread_mutex_unlock(&lu->lock);
	if (cmd) {
		if (!ok)
			scsi_fail(cmd, SCSI_SENSE_MEDIUM_ERROR, 0x31, 0x03); /* SANITIZE FAILED */
		scsi_cmd_finish(cmd);
	}
	free(s->pattern);
	scsi_lu_put(lu);
	free(s);
}

static void san_io_done(struct bs_io *io)
{
	struct scsi_sanitize *s =
	    (struct scsi_sanitize *)(void *)((uint8_t *)io - offsetof(struct scsi_sanitize, io));

	s->in_flight = false;
	if (io->result < 0)
		s->failed = true;
	else if (s->flushing)
		s->pass = s->passes + 1; /* all done */
	else if ((s->pos += io->len) >= s->size) {
		s->pos = 0;
		s->pass++;
	}
	if (s->submitting)
		return; /* completed inside bs_submit: san_next goes on */
	if (s->stopping || s->failed)
		san_finish(s);
	else if (s->thread)
		ev_timer_start(s->thread->loop, &s->timer, s->delay_ms);
	else
		san_next(s);
}

static void san_timer(struct ev_timer *t)
{
	san_next(t->arg);
}

/* Submit the next chunk (or the final flush). With a thread, a chunk that completed at once is
 * followed by a turn of the event loop (a timer, delayed to keep to the rate limit); without
 * one (unit tests) everything runs here. */
static void san_next(struct scsi_sanitize *s)
{
	struct scsi_lu *lu = s->lu;

	while (!s->failed && !s->stopping && s->pass <= s->passes) {
		uint64_t n = s->size - s->pos, delay = 0;

		s->flushing = s->pass == s->passes;
		if (n > SAN_CHUNK)
			n = SAN_CHUNK;
		if (lu->sanitize_rate && s->op == BS_OP_WRITE_SAME) {
			if (n > lu->sanitize_rate / 10 + lu->block_size)
				n = (lu->sanitize_rate / 10 / lu->block_size + 1) * lu->block_size;
			delay = n * 1000 / lu->sanitize_rate;
		}
		if (s->flushing) {
			n = 0;
			delay = 0;
		}
		s->io = (struct bs_io){
		    .dev = lu->dev,
		    .op = s->flushing ? BS_OP_FLUSH : s->op,
		    .offset = s->pos,
		    .len = n,
		    .buf = s->pattern && s->invert && s->pass % 2 ? s->pattern + lu->block_size
								  : s->pattern,
		    .pattern_len = lu->block_size,
		    .flags = 0,
		    .cb = san_io_done,
		};
		s->delay_ms = delay;
		s->in_flight = true;
		s->submitting = true;
		bs_submit(s->thread ? s->thread->bs : NULL, &s->io);
		s->submitting = false;
		if (s->in_flight)
			return; /* the completion goes on */
		if (s->thread && !s->failed && s->pass <= s->passes) {
			ev_timer_start(s->thread->loop, &s->timer, delay);
			return;
		}
	}
	san_finish(s);
}

/* ---- the command ---- */

/* OVERWRITE parameter list into a pattern block (and its inverse); false with sense set. */
static bool overwrite_params(struct scsi_cmd *cmd, struct scsi_lu *lu, uint32_t len,
			     struct scsi_sanitize *s)
{
	const uint8_t *d = cmd->buf;
	uint32_t bs = lu->block_size, plen;

	if (len < 5 || len > bs + 4) {
		scsi_fail_cdb(cmd, 7, -1);
		return false;
	}
	plen = get_be16(d + 2);
	if ((d[0] & 0x60) || (d[0] & 0x1f) == 0) { /* TEST must be 0, OVERWRITE COUNT not */
		scsi_fail_param(cmd, 0, (d[0] & 0x60) ? 6 : 4);
		return false;
	}
	if (plen == 0 || plen > bs || plen != len - 4) {
		scsi_fail_param(cmd, 2, -1);
		return false;
	}
	s->pattern = malloc(2 * (size_t)bs);
	if (!s->pattern) {
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x44, 0x00);
		return false;
	}
	for (uint32_t i = 0; i < bs; i++) {
		s->pattern[i] = d[4 + i % plen];
		s->pattern[bs + i] = (uint8_t)~d[4 + i % plen];
	}
	s->invert = d[0] & 0x80;
	s->passes = d[0] & 0x1f;
	s->op = BS_OP_WRITE_SAME;
	return true;
}

static int exit_failure_mode(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	pthread_mutex_lock(&lu->lock);
	if (!(atomic_load(&lu->mstate) & SCSI_MS_SAN_FAIL)) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x2c, 0x00); /* COMMAND SEQUENCE ERROR */
	} else if (!lu->san_fail_ause) {
		/* The failed sanitize did not allow an unrestricted exit: only a successful
		 * sanitize clears the failure. */
		scsi_fail_cdb(cmd, 1, 4);
	} else {
		atomic_fetch_and(&lu->mstate, (uint8_t)~SCSI_MS_SAN_FAIL);
	}
	pthread_mutex_unlock(&lu->lock);
	return SCSI_DONE;
}

int scsi_sbc_sanitize(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t sa = cdb[1] & 0x1f;
	bool immed = cdb[1] & 0x80;
	uint32_t len = get_be16(cdb + 7);
	struct scsi_sanitize *s;

	cmd->xfer_wanted = len;
	if (sa != SAN_OVERWRITE && len) { /* only OVERWRITE has a parameter list */
		scsi_fail_cdb(cmd, 7, -1);
		return SCSI_DONE;
	}
	if (cmd->data_out_len < len || cmd->buf_len < len) {
		scsi_fail_cdb(cmd, 7, -1);
		return SCSI_DONE;
	}
	if (sa == SAN_EXIT_FAIL)
		return exit_failure_mode(cmd, lu);
	if (!(atomic_load(&lu->mstate) & SCSI_MS_LOADED)) {
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x3a, 0x00);
		return SCSI_DONE;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x44, 0x00);
		return SCSI_DONE;
	}
	s->passes = 1;
	if (sa == SAN_OVERWRITE) {
		if (!overwrite_params(cmd, lu, len, s)) {
			free(s);
			return SCSI_DONE;
		}
	} else if (sa == SAN_BLOCK_ERASE || (lu->lbpme && lu->lbprz)) {
		s->op = BS_OP_DISCARD;
	} else {
		s->op = BS_OP_WRITE_ZEROES;
	}
	s->ause = cdb[1] & 0x20;
	s->size = lu->nblocks * lu->block_size;
	s->thread = cmd->thread;
	s->lu = lu;
	pthread_mutex_lock(&lu->lock);
	if (lu->san) { /* raced with another SANITIZE */
		pthread_mutex_unlock(&lu->lock);
		free(s->pattern);
		free(s);
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x1b);
		return SCSI_DONE;
	}
	lu->san = s;
	atomic_fetch_or(&lu->mstate, SCSI_MS_SANITIZE);
	scsi_rod_lu_reset(lu); /* the data its ROD tokens represent goes */
	pthread_mutex_unlock(&lu->lock);
	scsi_lu_get(lu);
	if (s->thread) {
		ev_timer_init(&s->timer, san_timer, s);
		list_add_tail(&s->link, &s->thread->sanitizes);
	}
	if (!immed)
		s->cmd = cmd;
	san_next(s);
	return immed ? SCSI_DONE : SCSI_ASYNC;
}

bool scsi_sanitize_progress(struct scsi_lu *lu, uint16_t *progress)
{
	bool running;

	pthread_mutex_lock(&lu->lock);
	running = lu->san != NULL;
	if (running) {
		const struct scsi_sanitize *s = lu->san;
		uint64_t total = (uint64_t)s->passes * s->size, done = (uint64_t)s->pass * s->size;

		done += s->pos;
		*progress = total ? (uint16_t)(done >= total ? 0xffff : done * 65536 / total) : 0;
	}
	pthread_mutex_unlock(&lu->lock);
	return running;
}

bool scsi_sanitize_abort(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = scsi_priv(cmd)->lu;
	bool found = false;

	if (!lu)
		return false;
	/* lu->san->cmd is only touched on this (the submitting) thread; the lock keeps lu->san
	 * from going away while we look. */
	pthread_mutex_lock(&lu->lock);
	if (lu->san && lu->san->cmd == cmd) {
		lu->san->cmd = NULL;
		found = true;
	}
	pthread_mutex_unlock(&lu->lock);
	if (!found)
		return false;
	cmd->status = SCSI_STATUS_TASK_ABORTED;
	scsi_cmd_finish(cmd);
	return true;
}

void scsi_sanitize_thread_stop(struct scsi_thread *t)
{
	struct list_head *pos, *n;

	/* Operations waiting for a timer end now; those with I/O in flight end when the backend
	 * completes it (bs_thread_free, right after this). */
	list_for_each_safe(pos, n, &t->sanitizes)
	{
		struct scsi_sanitize *s = list_entry(pos, struct scsi_sanitize, link);

		s->stopping = true;
		if (!s->in_flight)
			san_finish(s);
	}
}
