/* ix-bench internals shared by its files: the run's configuration (ix-bench.c parses it), the
 * worker threads (ixb_worker.c: each owns one ix_ctx and drives its sessions' I/O), and the
 * counters the main thread reads for the progress line.
 *
 * Threads: the main thread parses options, starts the workers, prints progress and the summary.
 * A worker touches only its own sessions. Counters the main thread reads while a worker runs
 * are published with relaxed atomic stores (plain moves on x86, no locks on the I/O path);
 * everything else (histograms, messages) is read after the worker thread has been joined. */
#ifndef IX_TOOLS_IXB_H
#define IX_TOOLS_IXB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ix/initiator.h"
#include "ixb_hist.h"

enum ixb_rw { IXB_READ, IXB_WRITE, IXB_RANDREAD, IXB_RANDWRITE, IXB_RANDRW, IXB_RW };

struct ixb_cfg {
	const char *portal, *target, *initiator, *transport;
	uint32_t lun;
	enum ixb_rw rw;
	unsigned mix;            /* percent reads in randrw / rw */
	uint32_t bs;             /* bytes per I/O (and per verified unit) */
	uint32_t qd;             /* per session */
	uint32_t sessions, threads;
	uint64_t time_ms;        /* 0 = no time limit */
	uint64_t size;           /* bytes to transfer in all (0 = no limit) */
	uint64_t offset, range;  /* bytes; range 0 = to the end of the LUN */
	bool verify, json, progress, digests, quiet;
	uint64_t seed;
	const char *chap_user, *chap_secret, *mutual_user, *mutual_secret;
	uint32_t replacement_timeout_ms, login_timeout_ms;
	int log_level;
	int poll_us;             /* the library's adaptive poll window; -1 = its default */
};

static inline bool ixb_rw_random(enum ixb_rw rw)
{
	return rw == IXB_RANDREAD || rw == IXB_RANDWRITE || rw == IXB_RANDRW;
}

static inline bool ixb_rw_writes(enum ixb_rw rw)
{
	return rw != IXB_READ && rw != IXB_RANDREAD;
}

/* Published by a worker, read by the main thread at any time. */
struct ixb_live {
	_Atomic uint64_t ios[2], bytes[2]; /* [0] reads, [1] writes */
	_Atomic uint64_t errors, miscompares, losses, recoveries;
	_Atomic int ready;       /* 0 setting up, 1 logged in and waiting for go, -1 failed */
	_Atomic bool done;       /* the measured phase (and the verify pass) is over */
};

/* Shared by all threads of one run. */
struct ixb_run {
	const struct ixb_cfg *cfg;
	_Atomic bool go;         /* set by the main thread once every worker is ready */
	_Atomic bool stop;       /* stop issuing (a signal, or a worker gave up) */
	_Atomic bool abort;      /* cancel what is in flight (second signal) */
	uint64_t start_ns;       /* written before go */
	uint64_t deadline_ns;    /* 0 = none; written before go */
	bool tty;                /* stderr is a terminal */
};

/* Results of one worker, read after join. */
struct ixb_result {
	struct ixb_hist lat[2];   /* per direction, nanoseconds */
	uint64_t ios[2], bytes[2];
	uint64_t errors, miscompares, retries, verified_units, verify_errors;
	uint64_t verify_skipped;  /* sessions that failed before the verify pass */
	uint64_t cancelled;       /* commands cancelled by a second interrupt */
	uint64_t losses, recoveries, recovery_max_ms, recovery_total_ms; /* from the events */
	uint64_t session_recoveries;  /* sum of ix_session_info.recoveries at the end */
	uint64_t end_ns;          /* last completion of the measured phase */
	uint64_t lun_blocks;
	uint32_t lun_block_size;
	char first_error[512];
	char setup_error[512];
};

struct ixb_worker {
	int id;
	struct ixb_run *run;
	uint32_t first_session, nsessions; /* global indices first..first+n-1 */
	pthread_t thread;
	struct ixb_live live;
	struct ixb_result res;
};

/* Thread entry of a worker (arg: struct ixb_worker *). */
void *ixb_worker_main(void *arg);

uint64_t ixb_now_ns(void);

#endif
