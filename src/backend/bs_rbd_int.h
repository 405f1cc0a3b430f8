/* Internal to the RBD backend: bs_rbd.c (the device, its I/O, the helper thread and the
 * ownership of the managed exclusive lock) and bs_rbd_conn.c (cluster connections and the
 * opener thread). Nothing outside src/backend includes this. */
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
 * (bs_rbd_conn.c). */
struct rbd_cluster {
	struct list_head link;
	char *key; /* conf \n client \n keyring \n timeouts */
	rados_t rados;
	unsigned refs;
	bool abandoned; /* an image of it did not close: never rados_shutdown (it could hang) */
};

/* An image not open yet (rbd.start_offline): its place on the opener thread's list. Every
 * field under opener.lock. */
struct rbd_retry {
	struct list_head link; /* on opener.list while queued */
	struct bs_dev *dev;
	uint64_t next_ms; /* monotonic: the next attempt */
	unsigned backoff_ms;
	unsigned attempts;
	bool queued;  /* on the list */
	bool running; /* an attempt is running: close waits for it */
	bool kick;    /* a retry was asked for while one ran: go again at once if it fails */
	bs_ready_cb cb;
	void *cb_arg;
	char why[256]; /* why it is not open */
};

struct rbd_owner;

struct rbd_priv {
	struct rbd_cluster *cl;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	uint64_t obj_size;
	bool exclusive;	      /* rbd.exclusive_lock */
	struct rbd_owner *o;  /* with exclusive */
	unsigned close_ms; /* how long closing may take: the OSD timeout and some */
	_Atomic uint64_t last_err_s; /* when the last I/O error was logged (monotonic seconds) */
	atomic_uint quiet_errs;	     /* errors not logged since */
	char name[160];		     /* pool/[ns/]image, for messages */
	/* the open (rbd_attach), and with rbd.start_offline its retries in the background */
	struct bs_rbd_cfg c;	     /* copied at open (strings owned) */
	uint64_t cfg_size;	     /* the configured size, 0 = the image's */
	uint32_t cfg_block;
	bool readonly;
	bool background;	     /* started with start_offline: r is on the opener */
	atomic_bool online;	     /* the image is open: image, ioctx, cl, o are set */
	struct rbd_retry r;
};

static inline uint64_t bs_rbd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- bs_rbd_conn.c ---- */

/* The connection for c (a shared one, or a new one): NULL with *rcp and a message. Blocking
 * (connect_timeout_s) on a new connection. */
struct rbd_cluster *bs_rbd_cluster_get(const struct bs_rbd_cfg *c, char *err, size_t errlen,
				       int *rcp);
void bs_rbd_cluster_put(struct rbd_cluster *cl);
/* An image of cl did not close: cl is never shut down (it could hang); then put. */
void bs_rbd_cluster_abandon(struct rbd_cluster *cl);
/* rbd.start_offline: queue the first open on the opener thread (see bs_rbd_conn.c). */
int bs_rbd_open_background(struct bs_dev *dev, char *err, size_t errlen);
/* Off the opener's list, and out of a running attempt (device close). */
void bs_rbd_open_stop(struct rbd_priv *p);
/* bs_ops.on_ready. */
int bs_rbd_on_ready(struct bs_dev *dev, bs_ready_cb cb, void *arg);

/* ---- bs_rbd.c ---- */

/* Open the image, its size and its lock: p->cl, ioctx, image, obj_size, o and dev->size.
 * Blocking (bounded by connect_timeout_s and the OSD timeout). -errno + message. */
int bs_rbd_attach(struct bs_dev *dev, char *err, size_t errlen);

#endif
