/* Internal to the RBD backend: bs_rbd.c (the device, its I/O, the helper thread),
 * bs_rbd_conn.c (cluster connections, the opener thread, fencing and rejoin) and bs_rbd_ctx.c
 * (the context they belong to). The ownership of the managed exclusive lock is src/ha/'s
 * (ha_own.c), reached through p->own_ops (backend/bs_rbd.h). Nothing outside src/backend
 * includes this. */
#ifndef IX_BACKEND_BS_RBD_INT_H
#define IX_BACKEND_BS_RBD_INT_H

#include <pthread.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend/bs.h"
#include "backend/bs_rbd.h"
#include "util/list.h"

#define RBD_DEFAULT_OSD_TIMEOUT_S 30
#define RBD_DEFAULT_CONNECT_S	  10

#define RBD_HELPER_QUEUE 64 /* the helper thread's queue (bs_rbd.c) */

struct rbd_job {
	void (*fn)(void *arg);
	void *arg;
};

/* The RBD backend's state of one context (bs_rbd_ctx_new; owned by src/ha/'s context): its
 * cluster connections, its opener thread and its helper thread. Alive while its owner or an
 * open device holds it (refs), and until its threads, stopped then, have ended. */
struct bs_rbd_ctx {
	pthread_mutex_t life_lock; /* refs, threads */
	unsigned refs;		   /* the owner's, and one per device from open to close */
	unsigned threads;	   /* the opener and the helper while they run */
	bool gone;		   /* refs reached 0: the last thread to end frees it */
	/* cluster connections (bs_rbd_conn.c) */
	pthread_mutex_t clusters_lock;
	pthread_cond_t clusters_cv; /* a connect ended */
	struct list_head clusters;  /* struct rbd_cluster */
	/* the opener thread (bs_rbd_conn.c): every field under lock */
	struct {
		pthread_mutex_t lock;
		pthread_cond_t work; /* the thread: something queued or due, or stop */
		pthread_cond_t done; /* an attempt ended */
		bool started, stop;
		uint64_t busy_since; /* when the running attempt began; 0 = none */
		struct list_head list;
	} opener;
	/* the helper thread (bs_rbd.c): every field under lock */
	struct {
		pthread_mutex_t lock;
		pthread_cond_t cond;
		bool started, stop;
		unsigned head, n;
		struct rbd_job q[RBD_HELPER_QUEUE];
	} helper;
};

/* A thread of x starts (under its own lock: opener.lock or helper.lock), or ended (its last
 * act, no lock held): x goes once nothing else holds it. */
void bs_rbd_ctx_thread_start(struct bs_rbd_ctx *x);
void bs_rbd_ctx_thread_end(struct bs_rbd_ctx *x);
/* A device holds x from open to close. */
void bs_rbd_ctx_get(struct bs_rbd_ctx *x);

/* A cluster connection, shared by every LU of a context that names the cluster the same way
 * (bs_rbd_conn.c). Every field under the context's clusters_lock. */
struct rbd_cluster {
	struct bs_rbd_ctx *ctx;
	struct list_head link; /* on the list new LUs share from; off once fenced */
	char *key;	       /* conf \n client \n keyring \n timeouts */
	rados_t rados;
	unsigned refs;
	uint64_t gid;	 /* this client's id (client.<gid>), for messages */
	char addr[128];	 /* its address as rados_getaddrs() gives it ("" if not known): what
			  * `ceph osd blocklist ls` names when this client is fenced */
	bool connecting; /* rados_connect runs (without the lock): others of the key wait */
	bool abandoned;	 /* an image of it did not close: never rados_shutdown (it could hang) */
	bool fenced;	 /* blocklisted: its devices rejoin through a new connection */
	struct list_head devs; /* rbd_priv.cl_link: the devices whose image is open on it */
};

/* The device's place on the opener thread's list: its first open (rbd.start_offline) and,
 * once fenced, its rejoin, each tried again with back-off. Every field under opener.lock. */
struct rbd_retry {
	struct list_head link; /* on opener.list while queued */
	struct bs_dev *dev;
	uint64_t next_ms; /* monotonic: the next attempt */
	unsigned backoff_ms;
	unsigned attempts;	  /* opens tried */
	unsigned rejoin_attempts; /* attempts of the rejoin under way */
	unsigned rejoins;	  /* rejoins completed */
	bool rejoin;		  /* the entry is a rejoin, not the first open */
	bool queued;		  /* on the list */
	bool running;		  /* an attempt is running: close waits for it */
	bool kick; /* a retry was asked for while one ran: go again at once if it fails */
	bs_ready_cb cb;
	void *cb_arg;
	const struct bs_rbd_user *user; /* who else uses the connection (the PR store) */
	char why[256];			/* why it is not open, or why the rejoin failed */
	char fenced_why[256];		/* why the connection was fenced */
};

struct rbd_owner;

struct rbd_priv {
	struct rbd_cluster *cl;	  /* set and cleared under clusters_lock */
	struct list_head cl_link; /* on cl->devs while the image is open on it */
	rados_ioctx_t ioctx;
	rbd_image_t image;
	uint64_t obj_size;
	bool exclusive;		     /* rbd.exclusive_lock */
	struct bs_rbd_ctx *ctx;	     /* bs_open_cfg.host->rbd: held from open to close */
	struct rbd_owner *o;	     /* with exclusive: from open to close (ha/ha_own.c) */
	const struct bs_own_ops *own_ops; /* what o is asked through (bs_open_cfg.host) */
	unsigned close_ms;	     /* how long closing may take: the OSD timeout and some */
	_Atomic uint64_t last_err_s; /* when the last I/O error was logged (monotonic seconds) */
	atomic_uint quiet_errs;	     /* errors not logged since */
	char name[160];		     /* pool/[ns/]image, for messages */
	/* the open (rbd_attach), and with rbd.start_offline its retries in the background */
	struct bs_rbd_cfg c; /* copied at open (strings owned) */
	uint64_t cfg_size;   /* the configured size, 0 = the image's */
	uint32_t cfg_block;
	bool readonly;
	bool background;    /* started with start_offline: on_ready reports the open */
	atomic_bool online; /* the image was opened: image, ioctx and cl are set (a rejoin
			       replaces them while fenced) */
	/* Fencing (bs_rbd_conn.c): while fenced no request reaches the image, and the rejoin
	 * replaces image, ioctx and cl once inflight is 0 (see io_enter in bs_rbd.c). */
	atomic_bool fenced;
	atomic_uint inflight; /* requests between io_enter and librbd's answer */
	struct rbd_retry r;
	/* How full the pool is (bs_ops.space): the last sample, taken on the helper thread at
	 * most every RBD_SPACE_MS; sp_busy while a sample is queued or running (close waits). */
	_Atomic uint64_t sp_total, sp_avail, sp_when_ms;
	atomic_bool sp_busy;
	/* librbd's update watch on the open image (bs_rbd.c, rbd_watch_*): a resize by anyone
	 * reaches the LU through resize_cb */
	uint64_t watch_handle;
	bool watching;
	_Atomic(bs_ready_cb) resize_cb;
	void *_Atomic resize_arg;
};

#define RBD_SPACE_MS 10000 /* how often the pool's space is asked for at most */

static inline uint64_t bs_rbd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- bs_rbd_conn.c ---- */

/* Put p's image on the connection for its configuration (a shared one, or a new one:
 * blocking, connect_timeout_s): p->cl. -errno + message. */
int bs_rbd_conn_join(struct rbd_priv *p, char *err, size_t errlen);
/* p's image is closed (or, with abandon, could not be: the connection is then never shut
 * down); p->cl goes, and the connection with its last image. */
void bs_rbd_conn_leave(struct rbd_priv *p, bool abandon);
/* Any thread: p's connection answered ESHUTDOWN (librados' EBLOCKLISTED) to what (a
 * request, taking the lock...): every device on it is fenced and rejoins. */
void bs_rbd_conn_fenced(struct rbd_priv *p, const char *what);
/* Open the device: on the opener thread (background, rbd.start_offline) or here. */
int bs_rbd_open(struct bs_dev *dev, bool background, char *err, size_t errlen);
/* Off the opener's list, and out of a running attempt (device close). */
void bs_rbd_open_stop(struct rbd_priv *p);
/* bs_ops.on_ready. */
int bs_rbd_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg);

/* ---- bs_rbd.c ---- */

/* The first open: the connection, the image, its size, and the ownership started on it (p->cl,
 * ioctx, image, obj_size, dev->size). Blocking (bounded by connect_timeout_s and the OSD
 * timeout). -errno + message. */
int bs_rbd_attach(struct bs_dev *dev, char *err, size_t errlen);
/* Undo bs_rbd_attach (the device closes, or its first open fails after it): the ownership
 * stopped first (bounded; a thread still in the cluster gets the image abandoned), then the
 * image and its connection. The ownership itself stays (rbd_own_put at close). */
void bs_rbd_attach_undo(struct rbd_priv *p);
/* A rejoin: a new connection and the image again (at least dev->size bytes); not the
 * ownership (the rejoin starts it once the new connection is known not fenced). */
int bs_rbd_reattach(struct bs_dev *dev, char *err, size_t errlen);
/* Close the image and leave its connection (bounded by close_ms; then abandoned). The
 * ownership must be stopped first (rbd_own_detach). */
void bs_rbd_detach(struct rbd_priv *p);

/* Queue fn(arg) on the context's helper thread (librbd calls without an asynchronous form);
 * -EBUSY when its queue is half full. */
int bs_rbd_helper_post(struct bs_rbd_ctx *bx, void (*fn)(void *arg), void *arg);

/* ---- bs_rbd_snap.c ---- */

/* bs_ops.snap: snapshots and clones, on the helper thread. */
int bs_rbd_snap(struct bs_dev *dev, struct bs_snap_req *req);

/* ---- the ownership (ha/ha_own.c, through p->own_ops; o NULL: none) ---- */

static inline bool bs_rbd_own_io(const struct rbd_priv *p)
{
	return p->o && p->own_ops->io(p->o);
}

static inline int bs_rbd_own_io_result(const struct rbd_priv *p, int r)
{
	return p->o ? p->own_ops->io_result(p->o, r) : r;
}

#endif
