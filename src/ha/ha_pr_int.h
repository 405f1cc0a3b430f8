/* Internal to the shared persistent reservation store: ha_pr.c (the helper and acknowledging
 * threads, the jobs, the store's ops and its life on a connection) and ha_pr_store.c (the
 * object: reading and writing it, adopting a state, the watch, notifies, fencing). Each
 * function's whole contract is above its definition. */
#ifndef IX_HA_PR_INT_H
#define IX_HA_PR_INT_H

#include <pthread.h>
#include <rados/librados.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/bs_rbd.h"
#include "ha/ha_pr.h"
#include "ha/ha_pr_obj.h"
#include "scsi/scsi_int.h"
#include "util/list.h"

/* Defaults of the LU's rbd.pr settings (struct bs_rbd_pr_cfg, docs/configuration.md) */
#define PR_RADOS_RETRIES       16   /* versioned writes lost to other gateways before giving up */
#define PR_RADOS_NOTIFY_MS     5000 /* a watcher that has not acknowledged by then is fenced */
#define PR_RADOS_BLOCKLIST_S   3600 /* how long a fenced gateway stays blocklisted */
#define PR_RADOS_RESET_WAIT_MS 2000 /* how long a LUN RESET waits for the other gateways */
#define PR_RADOS_UA_RING       16   /* sequence numbers whose unit attentions were queued here */
#define RESET_MAGIC	       "ix-lu-reset 1 "

enum pr_job_kind { JOB_OUT = 1, JOB_RELOAD, JOB_RESET, JOB_ACK, JOB_SPC2 };

/* What a JOB_SPC2 does with the SPC-2 reservation (RESERVE(6)/(10)) of the object. */
enum spc2_op {
	SPC2_RESERVE = 1, /* take it for the job's nexus */
	SPC2_RELEASE,	  /* drop it if the job's nexus holds it through this gateway */
	SPC2_LOST,	  /* the same, for an I_T nexus loss (no command) */
};

struct pr_job {
	struct list_head link;
	enum pr_job_kind kind;
	int refs;	      /* JOB_RESET: the waiter's and the helper's (under r->mu) */
	bool finished;	      /* JOB_RESET, under r->mu */
	struct scsi_cmd *cmd; /* JOB_OUT, JOB_SPC2: the command, answered on its loop (JOB_SPC2
				 SPC2_LOST: none) */
	enum spc2_op spc2;
	struct scsi_lu *lu;
	struct pr_out req;
	char iport[PR_MAX_PORT_LEN], tport[PR_MAX_PORT_LEN];
	char move[PR_MAX_PORT_LEN], move_t[PR_MAX_PORT_LEN]; /* REGISTER AND MOVE's destination */
	enum pr_result res;
	struct ev_post post;
	uint64_t notify_id, handle; /* JOB_ACK: the notify acknowledged once its aborts are done */
	uint64_t gen;		    /* JOB_ACK: r->conn_gen when the notify came */
	struct pr_rados *r;	    /* JOB_ACK */
	struct scsi_lost_wait wait; /* SPC2_LOST: told on wait.loop once stored (loop NULL: none) */
};

struct pr_rados {
	struct scsi_lu *lu;
	struct bs_rbd_user user; /* conn_attach, conn_detach */
	/* The connection: the helper holds conn_mu around each job, attach and detach take it. */
	pthread_mutex_t conn_mu;
	rados_t cluster; /* the RBD device's, while connected */
	rados_ioctx_t io;
	bool connected;
	/* The connection's client id: its gw.<gid> address entry, the notifier id of its own
	 * notifies, the gateway of an SPC-2 holder reserved through it. Set by conn_attach under
	 * conn_mu before the watch starts (the watch callbacks read it). */
	uint64_t gid;
	uint64_t stale_gid; /* a fenced connection's id: its entry (and SPC-2 holder) fixed on the
			       next one */
	char *pool, *ns;    /* where the object is (the image's pool and namespace) */
	uint64_t watch;
	bool watching;
	char oid[300];
	char gwoid[304];	 /* "<oid>.gw": the gateways' client addresses */
	char name[400];		 /* pool/[ns/]oid, for messages */
	pthread_t thread, acker; /* the helper; the thread that acknowledges notifies late */
	bool acker_started;
	/* jobs, acks, stop, reload_queued, the local abort's end, conn_gen, acking, and io as
	 * the acker reads it */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t done_cv; /* a JOB_RESET finished, or run_out's local aborts */
	pthread_cond_t ack_cv;	/* acks not empty, or stop; acking cleared (broadcast) */
	struct list_head jobs;
	struct list_head acks; /* JOB_ACK, for the acker */
	/* Bumped when the store leaves a connection (its watch gone): an ack queued for a
	 * notify of an older connection is dropped, never sent on the next one. */
	uint64_t conn_gen;
	bool acking;	 /* the acker is in rados_notify_ack with io: conn_drop waits */
	atomic_int refs; /* the LU's, and one per PREEMPT AND ABORT of another gateway in progress
			    (its end queues the ack: the struct outlives rados_free for it) */
	uint64_t origin; /* names this store in reset notifies */
	uint32_t notify_ms, reset_wait_ms, retries, blocklist_s; /* rbd.pr, defaults applied */
	bool stop, reload_queued;
	/* under lu->lock */
	uint64_t epoch; /* of the object lu->pr came from (lu->pr_seq: its sequence) */
	uint64_t ua_seen[PR_RADOS_UA_RING];
	unsigned ua_next;
};

/* ---- ha_pr_store.c ---- */

/* Drop a reference (the LU's, or a remote abort's); the last frees the store. */
void ha_pr_put(struct pr_rados *r);
/* Remove gateway gid's address entry from "<oid>.gw". */
void ha_pr_forget_address(struct pr_rados *r, uint64_t gid);
/* Tell every gateway of a new state (with its unit attentions); fence those that stay
 * silent. 0 or -errno (someone not fenced). */
int ha_pr_notify(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v,
		 const struct pr_effects *fx);
/* Publish this connection's client address in "<oid>.gw": 0 or -errno + message. */
int ha_pr_advertise(struct pr_rados *r, char *err, size_t errlen);
/* Blocklist the gateway gid that did not acknowledge: 0 or -errno. */
int ha_pr_fence(struct pr_rados *r, uint64_t gid);
/* A PREEMPT AND ABORT through another gateway: this gateway's tasks of the preempted nexuses
 * are gone (or could not all be asked to go); its notify is acknowledged. Any thread. */
void ha_pr_remote_aborted(void *arg, bool all);
/* lu->resv_holder from the adopted state's SPC-2 reservation; lu->lock held. */
void ha_pr_spc2_publish_locked(struct pr_rados *r);
/* rc from the cluster doing what: ESHUTDOWN fences the connection (bs_rbd_fenced). */
void ha_pr_check_fenced(struct pr_rados *r, int rc, const char *what);
/* The same; *probe says whether gateway probe_gid acknowledged (1), did not (0), or does not
 * watch the object (-1). */
int ha_pr_notify_probe(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v,
		       const struct pr_effects *fx, uint64_t probe_gid, int *probe);
/* Watch the object (created empty when absent): 0 or -errno + message. */
int ha_pr_watch_start(struct pr_rados *r, char *err, size_t errlen);
/* Versioned write (exclusive create for version 0): 0, -EAGAIN (another gateway wrote since
 * ver: read again) or -errno. */
int ha_pr_obj_write(struct pr_rados *r, const struct pr_state *st, const struct ha_pr_obj_ver *v,
		    uint64_t ver);
/* Make st (of version v) the LU's state with its unit attentions, if newer. */
void ha_pr_adopt(struct pr_rados *r, struct pr_state *st, const struct ha_pr_obj_ver *v,
		 const struct pr_effects *fx);
/* A new object's epoch: random, never 0. */
uint64_t ha_pr_new_epoch(void);
/* Read and decode the object: 0 (st, v, *ver set; an absent object is the empty state with
 * version 0), -EINVAL (damaged: err says how) or -errno. */
int ha_pr_obj_read(struct pr_rados *r, struct pr_state *st, struct ha_pr_obj_ver *v, uint64_t *ver,
		   char *err, size_t errlen);

/* ---- ha_pr.c ---- */

/* Have the helper read the object again (once, however often asked). */
void ha_pr_queue_reload(struct pr_rados *r);

#endif
