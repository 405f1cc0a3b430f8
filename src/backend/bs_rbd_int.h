/* Between the RBD backend's device code (bs_rbd.c: cluster handles, the image, I/O, the
 * helper and opener threads) and its ownership code (bs_rbd_own.c: the managed exclusive lock,
 * failover). Internal to src/backend. */
#ifndef IX_BACKEND_BS_RBD_INT_H
#define IX_BACKEND_BS_RBD_INT_H

#include <rados/librados.h>
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
	struct rbd_owner *o; /* NULL without the managed lock */
	const char *name;    /* pool/[ns/]image, for messages */
	bool online;	     /* the image is open */
	bool exclusive_cfg;  /* rbd.exclusive_lock is configured */
};
/* false for a device of another backend. Any thread. */
bool rbd_dev_own(const struct bs_dev *dev, struct rbd_dev_own *out);

/* ---- bs_rbd_own.c ---- */

/* The ownership state of a device with rbd.exclusive_lock, created at open (before the image
 * is), one of the images of group (bs_open_cfg.owner_group; NULL: on its own): 0 or
 * -ENOMEM. */
int rbd_own_new(struct rbd_owner **out, const char *name, const struct bs_rbd_cfg *c,
		const char *group);
/* The image is open (io: its pool and namespace): start the owner's thread, which takes the
 * lock (the state is "acquiring" meanwhile), writes the owner record, and checks the lock
 * every rbd.lock_check_ms. 0 or -errno. */
int rbd_own_attach(struct rbd_owner *o, rbd_image_t image, rados_ioctx_t io);
/* Before the image closes: stop the thread, waiting at most wait_ms for a lock call it is in
 * (a pending take-over's callback gets -ECANCELED). false: it is still in the cluster (the
 * image must be abandoned, not closed). */
bool rbd_own_detach(struct rbd_owner *o, unsigned wait_ms);
/* The device lets go of it (a thread still in the cluster keeps it). NULL: nothing. */
void rbd_own_put(struct rbd_owner *o);
/* The data path, before an I/O: true when fenced (blocklisted: fail it without asking the
 * cluster). o NULL: false. */
bool rbd_own_io(struct rbd_owner *o);
/* Any thread, on an I/O result r (0 or -errno): with the managed lock (o != NULL) a refusal
 * because another client owns the image (EROFS) or because this client was fenced (ESHUTDOWN)
 * moves the state and becomes BS_ERR_NOT_OWNER; anything else is returned as it is. */
int rbd_own_io_result(struct rbd_owner *o, int r);

#endif
