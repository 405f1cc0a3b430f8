/* RBD ownership internals, between ha_own.c (the state, the lock, the image's ownership
 * thread, the images of a target, the API) and ha_handover.c (the owner record and the
 * gateway-to-gateway requests over RADOS). Internal to those two files. */
#ifndef IX_HA_OWN_INT_H
#define IX_HA_OWN_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend/bs_rbd.h"
#include "ha/ha_own.h"
#include "ha/ha_own_rec.h"
#include "util/list.h"

#define OWN_CHECK_MS_DEFAULT  1000
#define OWN_REC_RETRIES	      4 /* versioned writes of the record lost to a stale writer */
#define OWN_NOTIFY_MS_DEFAULT 5000
#define OWN_SOON_MS	      200 /* after handing the lock over: the next check */
#define OWN_TAKE_ROUNDS	      3	  /* a take-over asks, and reads the holder, at most this often */

/* The same values as ha_own.h's enum ha_own_state. */
enum rbd_own {
	RBD_OWN_NONE = HA_OWN_NONE, /* no managed lock (librbd's cooperative one) */
	RBD_OWN_ACQUIRING,	    /* taking the lock: at open, or a take-over */
	RBD_OWN_OWNER,		    /* this gateway holds the lock */
	RBD_OWN_STANDBY,	    /* another client holds it (or nobody): writes fail with
				       BS_ERR_NOT_OWNER */
	RBD_OWN_FENCED,		    /* this client was blocklisted: every I/O fails, until
				       the device rejoins with a new client */
	RBD_OWN_RELEASING,	    /* handing the lock over: draining writes, releasing */
};

enum job_kind {
	JOB_TAKE,    /* ha_own_take_over_async, or a planned release naming this gateway */
	JOB_RELEASE, /* ha_own_release_async */
	JOB_BREAK,   /* ha_own_break_lock: its caller waits */
	JOB_ASKED,   /* another gateway asks the holder to hand over (from the watch) */
};

struct own_job {
	struct list_head link;
	enum job_kind kind;
	ha_take_cb done; /* JOB_TAKE, JOB_RELEASE (may be NULL) */
	void *arg;
	int mode;	       /* JOB_TAKE: enum ha_take */
	uint32_t window_ms;    /* JOB_TAKE implicit */
	uint16_t group;	       /* JOB_RELEASE: the group to take it, 0 none */
	struct ha_own_msg ask; /* JOB_ASKED */
	uint64_t notify_id, cookie;
	bool finished; /* JOB_BREAK, under mu */
	int rc;
	char msg[512];
};

/* One image's ownership. The device holds a reference from open to close, the thread one
 * while it runs (a thread stuck in the cluster when the device closes keeps it). */
struct rbd_owner {
	atomic_int refs;
	struct ha_ctx *ctx;    /* the context (bs_open_cfg.host): held until the last put */
	atomic_int own;	       /* enum rbd_own */
	atomic_bool job;       /* a take-over or release is queued or running (one at a time) */
	atomic_bool unmanaged; /* a rejoined handle not under the managed lock policy yet:
				  rbd_own_io refuses I/O (rbd_own_attach) */
	unsigned check_ms;
	unsigned notify_ms; /* rbd.handover_timeout_ms */
	/* I/O seen through this gateway (rbd_own_io): the thread starts a new period (io_tick)
	 * at each check and at a hand-over decision; the data path marks the period it saw */
	atomic_uint io_tick, io_seen;
	_Atomic uint64_t last_io_ms; /* the end of the last period with I/O (the thread writes) */
	struct own_group *grp;	     /* the images of the same target, or NULL */
	struct list_head glink;	     /* on grp->members, under groups_lock */
	uint64_t watch;		     /* the thread's: the watch on oid */
	bool watching;
	atomic_bool rewatch; /* the watch broke: watch again */
	char name[160];	     /* pool/[ns/]image, for messages */
	char oid[300];	     /* "ix.own.<image>": the owner record, next to the image */
	rbd_image_t image;   /* set by attach; the thread's only while it runs */
	rados_ioctx_t io;    /* the image's pool and namespace (the device's, on its current
				connection: a rejoin sets both anew once the old thread ended) */
	uint64_t gid;	     /* this client's id (rados_get_instance_id) */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* the thread: work or stop; callers: a job finished, the thread ended */
	/* under mu */
	struct list_head jobs;
	bool running; /* the thread has not ended */
	bool stop;
	bool attached;
	bool rejoin;	  /* the thread's start: set the lock policy, standby (not take the lock) */
	char why[192];	  /* why the state is what it is (for the management API) */
	char holder[128]; /* who holds the lock, as librbd names it ("" nobody), last check */
	char me[128];	  /* this client, as the lock names it (learnt when it took it) */
	unsigned seq;	  /* changes of this image's state or holder */
	bool refused;	  /* the holder refused the last implicit hand-over (until it changes) */
	bool check_soon;  /* the lock just went to another gateway: look at it again soon */
	struct ha_own_rec rec;	 /* the last owner record read or written ("" holder: none) */
	bool rec_dirty;		 /* the identity changed while holding: write the record again */
	char rec_err[160];	 /* why the record could not be read last time (logged once) */
	uint8_t ngroups, nports; /* this gateway's identity (ha_own_set_identity) */
	bool identified;	 /* ha_own_set_identity was called (even with no groups) */
	uint16_t groups[HA_OWN_MAX_IDS], ports[HA_OWN_MAX_IDS];
	/* ha_own_watch: called by the thread, under hook_mu, when seq moved */
	pthread_mutex_t hook_mu;
	void (*hook)(void *arg);
	void *hook_arg;
};

struct own_group;

#ifdef IX_CHAOS_BREAK_LOST_LOCK
/* A DELIBERATELY BROKEN build (meson -Dchaos_break=lost-lock, tests/chaos/breaks.sh): a lock
 * is broken without blocklisting its holder (the cls lock removed directly), a holder that
 * lost its lock never steps down, so it keeps writing, it never answers a hand-over request
 * (so its lock is broken), and (ha_pr_store.c) a gateway that misses a reservation change is
 * not blocklisted either (that fence alone stopped the old holder in the first try). Never in
 * a real build. */
int chaos_break_unfenced(struct rbd_owner *o, const char *who);
#define rbd_lock_break(image, mode, who) chaos_break_unfenced(o, (who))
#endif

/* ---- ha_own.c: what the RBD backend calls through ha_own_ops (struct bs_own_ops) ---- */

/* The ownership state of a device with rbd.exclusive_lock, created at open (before the image
 * is), one of the images of group (bs_open_cfg.owner_group; NULL: on its own): 0 or
 * -ENOMEM. */
int rbd_own_new(struct bs_host *host, struct rbd_owner **out, const char *name,
		const struct bs_rbd_cfg *c, const char *group);
/* The image is open on a connection (io: its pool and namespace there): start the image's
 * ownership thread, which watches the owner record's object on that connection, and then
 * - at the first open (rejoin false): takes the lock (the state is "acquiring" meanwhile) and
 *   writes the owner record, or learns who holds it (standby);
 * - after a rejoin (rejoin true; the caller holds clusters_lock, the new connection not
 *   fenced): puts the new handle under the managed lock policy (rbd_lock_acquire; a lock it
 *   gets so, a free one, is released at once) and goes standby: a rejoined gateway never
 *   takes the lock back by itself. Until the policy is set ("acquiring") rbd_own_io refuses
 *   I/O: a handle without it would take a free lock on its first write.
 * Then it checks the lock every rbd.lock_check_ms. Leaves the fenced state only here. 0 or
 * -errno (the thread cannot start). */
int rbd_own_attach(struct rbd_owner *o, rbd_image_t image, rados_ioctx_t io, bool rejoin);
/* Before the image closes or is replaced: stop the thread (its watch goes, a pending
 * take-over's callback gets -ECANCELED) and wait at most wait_ms for it to end. false: it is
 * still in the cluster (the image and its ioctx must not go yet: abandon them, or ask again
 * later, which waits again). Nothing of the thread uses image or io once it returned true. */
bool rbd_own_detach(struct rbd_owner *o, unsigned wait_ms);
/* The device lets go of it (a thread still in the cluster keeps it). NULL: nothing. */
void rbd_own_put(struct rbd_owner *o);
/* The data path, before an I/O (counted for the hand-over rule): true when it must be refused
 * without asking the cluster (fenced, or a rejoined handle without the managed lock policy
 * yet). o NULL: false. */
bool rbd_own_io(struct rbd_owner *o);
/* Any thread, on an I/O result r (0 or -errno): with the managed lock (o != NULL) a refusal
 * because another client owns the image (EROFS) or because this client was fenced (ESHUTDOWN)
 * moves the state and becomes BS_ERR_NOT_OWNER; anything else is returned as it is. */
int rbd_own_io_result(struct rbd_owner *o, int r);
/* The connection was fenced (bs_rbd_conn.c, under clusters_lock): the state is fenced, with
 * why (logged once), until the rejoin's rbd_own_attach. */
void rbd_own_fenced(struct rbd_owner *o, const char *why);

/* The table of the functions above, given to the RBD backend at open (bs_open_cfg.host). */
extern const struct bs_own_ops ha_own_ops;

/* ---- ha_own.c ---- */

/* Under o->mu: this image changed; its thread tells the watcher. */
void rbd_own_changed(struct rbd_owner *o);
uint64_t rbd_own_now_ms(void);
/* A new state and its reason, logged once; fenced stays. Any thread. */
void rbd_own_set(struct rbd_owner *o, int own, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* This client answered ESHUTDOWN to what: its whole connection is fenced (and this image). */
void rbd_own_blocklisted(struct rbd_owner *o, const char *what);
/* Who holds the lock, comma-separated, into buf ("" nobody): 0 or -errno. */
int rbd_own_holder(struct rbd_owner *o, char *buf, size_t len);
/* Remember who holds it (a change ends a refusal). */
void rbd_own_holder_set(struct rbd_owner *o, const char *who);
void rbd_own_refused_set(struct rbd_owner *o, bool refused);
/* The holder's thread, answering an implicit request: ms since I/O went through this gateway
 * to any image of the target it holds. */
uint64_t rbd_own_group_idle(struct rbd_owner *o, uint32_t window);
/* rbd_lock_acquire succeeded: the record, then owner (fmt takes one string, who). */
void rbd_own_took(struct rbd_owner *o, const char *fmt, const char *who);
void rbd_own_take_failed(struct rbd_owner *o, const char *who, int rc);
/* Queue a job for the thread: a request from another gateway before the rest (answered
 * either way); anything else at the end (-EINVAL when the thread is stopping). */
void rbd_own_queue_front(struct rbd_owner *o, struct own_job *j);
int rbd_own_queue_job(struct rbd_owner *o, struct own_job *j);

/* ---- ha_handover.c (the owner's thread) ---- */

/* Holding the lock: write the record, one generation on. */
void rbd_own_rec_write(struct rbd_owner *o);
/* Not holding it: read the record while it does not name the holder. */
void rbd_own_rec_follow(struct rbd_owner *o);
/* Holding it: write the record again if it does not name this gateway. */
void rbd_own_rec_verify(struct rbd_owner *o);
/* Answer a request (any thread). */
void rbd_own_ack(struct rbd_owner *o, uint64_t notify_id, uint64_t cookie, const char *reply);
/* Watch the record's object (created empty when absent), or stop watching. */
void rbd_own_watch_start(struct rbd_owner *o);
void rbd_own_watch_stop(struct rbd_owner *o);
/* A take-over (mode: enum ha_take): 0, -EALREADY, -EAGAIN (refused), -errno. */
int rbd_own_run_take(struct rbd_owner *o, int mode, uint32_t window_ms);
/* Answer a request from another gateway (closing: as if explicit, the image closes). */
void rbd_own_run_asked(struct rbd_owner *o, struct own_job *j, bool closing);
/* A planned hand-over to group (0 none). */
int rbd_own_run_release(struct rbd_owner *o, uint16_t group);

#endif
