/* Between the RBD backend's device code (bs_rbd.c: cluster handles, the image, I/O, the
 * helper and opener threads) and its ownership code (bs_rbd_own.c: the managed exclusive lock,
 * failover). Internal to src/backend. */
#ifndef IX_BACKEND_BS_RBD_INT_H
#define IX_BACKEND_BS_RBD_INT_H

#include <rbd/librbd.h>
#include <stdbool.h>

#include "backend/bs.h"

/* The ownership state of one image opened with rbd.exclusive_lock (bs_rbd_own.c). */
struct rbd_owner;

/* ---- bs_rbd.c ---- */

/* Run fn(arg) on the process's RBD helper thread (librbd calls without an asynchronous
 * form). 0, or -EBUSY (the queue is full), -errno (the thread cannot start). Any thread. */
int rbd_helper_post(void (*fn)(void *arg), void *arg);

/* What the ownership code needs of a device. */
struct rbd_dev_own {
	struct rbd_owner *o; /* NULL without the managed lock, or before the image is open */
	const char *name;    /* pool/[ns/]image, for messages */
	bool online;	     /* the image is open */
	bool exclusive_cfg;  /* rbd.exclusive_lock is configured */
};
/* false for a device of another backend. Any thread. */
bool rbd_dev_own(const struct bs_dev *dev, struct rbd_dev_own *out);

/* ---- bs_rbd_own.c ---- */

/* Create the ownership state of an open image and take its lock on the helper thread (the
 * state is "acquiring" meanwhile). 0 or -errno. */
int rbd_own_start(struct rbd_owner **out, rbd_image_t image, const char *name);
/* The device lets go of it (a lock job still running keeps it until it ends). NULL: nothing. */
void rbd_own_put(struct rbd_owner *o);
/* A lock job runs on the helper thread: the image must not close under it. */
bool rbd_own_busy(const struct rbd_owner *o);
/* Fenced (blocklisted): every I/O fails without asking the cluster. o NULL: false. */
bool rbd_own_fenced(const struct rbd_owner *o);
/* Any thread, on an I/O result r (0 or -errno): with the managed lock (o != NULL) a refusal
 * because another client owns the image (EROFS) or because this client was fenced (ESHUTDOWN)
 * moves the state and becomes BS_ERR_NOT_OWNER; anything else is returned as it is. */
int rbd_own_io_result(struct rbd_owner *o, int r);

#endif
