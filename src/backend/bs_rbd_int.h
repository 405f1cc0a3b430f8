/* Internal to the RBD backend: bs_rbd.c (the device, its I/O, the helper thread),
 * bs_rbd_conn.c (cluster connections, the opener thread, fencing and rejoin) and bs_rbd_own.c
 * with bs_rbd_handover.c (the ownership of the managed exclusive lock, on each image's
 * ownership thread). Nothing outside src/backend includes this. */
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
#include "util/list.h"

#define RBD_DEFAULT_OSD_TIMEOUT_S 30
#define RBD_DEFAULT_CONNECT_S	  10

/* A cluster connection, shared by every LU that names the cluster the same way
 * (bs_rbd_conn.c). Every field under clusters_lock. */
struct rbd_cluster {
	struct list_head link; /* on the list new LUs share from; off once fenced */
	char *key;	       /* conf \n client \n keyring \n timeouts */
	rados_t rados;
	unsigned refs;
	uint64_t gid;	 /* this client's id (client.<gid>), for messages */
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
	struct rbd_owner *o;	     /* with exclusive: from open to close (bs_rbd_own.c) */
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
};

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
/* The same for the device whose ownership is o (its ownership thread knows only o). */
void bs_rbd_conn_fenced_owner(const struct rbd_owner *o, const char *what);
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

/* ---- bs_rbd_own.c ---- */

/* The ownership state of a device with rbd.exclusive_lock, created at open (before the image
 * is), one of the images of group (bs_open_cfg.owner_group; NULL: on its own): 0 or
 * -ENOMEM. */
int rbd_own_new(struct rbd_owner **out, const char *name, const struct bs_rbd_cfg *c,
		const char *group);
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

#endif
