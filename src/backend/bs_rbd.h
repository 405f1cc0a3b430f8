/* The RBD backend's handle, for the high-availability layer (src/ha/) only: nothing but ha/,
 * backend/bs_rbd* and the backend registry (bs.c, for BS_RBD_OPS) include this. It says
 * - how the backend leaves an image's ownership (the managed exclusive lock) to ha/:
 *   struct bs_own_ops, given at open (bs_open_cfg.host), called on the backend's threads;
 * - what ha/ may ask of an RBD device (bs_rbd_handle), and what it may tell it (fenced);
 * - the cluster connection's other user (the shared persistent reservation store), and the
 *   device's open/rejoin state for the management API.
 * Built with librbd only (IX_HAVE_RBD); without it only BS_RBD_OPS (NULL) is here. */
#ifndef IX_BACKEND_BS_RBD_H
#define IX_BACKEND_BS_RBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/bs.h"

#ifdef IX_HAVE_RBD
#include <rados/librados.h>
#include <rbd/librbd.h>

extern const struct bs_ops bs_rbd_ops;
#define BS_RBD_OPS (&bs_rbd_ops) /* for the registry (bs.c) */

/* The ownership of one image (ha/ha_own.c): opaque to the backend. */
struct rbd_owner;

struct bs_own_ops;
struct bs_rbd_ctx;
/* The context an RBD device is opened in (bs_open_cfg.host), owned by the caller (src/ha/:
 * one per target context) and alive as long as any ownership it created. */
struct bs_host {
	const struct bs_own_ops *own_ops; /* who keeps the managed exclusive lock */
	struct bs_rbd_ctx *rbd;		  /* the backend's connections and threads */
};
/* The backend's state of one context: its cluster connections (shared by the devices of the
 * context that name a cluster the same way), the opener thread (offline starts, rejoins) and
 * the helper thread (GET LBA STATUS), both started when first needed. The creator's
 * reference; each open device holds one more; the threads stop with the last. NULL: -ENOMEM. */
struct bs_rbd_ctx *bs_rbd_ctx_new(void);
void bs_rbd_ctx_put(struct bs_rbd_ctx *x);

/* What the backend asks of the ownership of a device with rbd.exclusive_lock; the device
 * holds the object from open (create) to close (put). See ha/ha_own_int.h for each. */
struct bs_own_ops {
	/* At open, before the image is, in host's context: 0 or -ENOMEM. */
	int (*create)(struct bs_host *host, struct rbd_owner **out, const char *name,
		      const struct bs_rbd_cfg *c, const char *group);
	/* The image is open on a connection (the first open, or a rejoin): 0 or -errno. */
	int (*attach)(struct rbd_owner *o, rbd_image_t image, rados_ioctx_t io, bool rejoin);
	/* Before the image closes or is replaced: false while still in the cluster. */
	bool (*detach)(struct rbd_owner *o, unsigned wait_ms);
	void (*put)(struct rbd_owner *o);
	/* The data path, before an I/O: true when it must be refused. */
	bool (*io)(struct rbd_owner *o);
	/* An I/O result: EROFS / ESHUTDOWN become BS_ERR_NOT_OWNER. */
	int (*io_result)(struct rbd_owner *o, int r);
	/* The connection was fenced (under the connection registry's lock). */
	void (*fenced)(struct rbd_owner *o, const char *why);
};

/* What ha/ sees of an RBD device: 0, or -EINVAL for another backend. Any thread. */
struct bs_rbd_handle {
	struct rbd_owner *own; /* its ownership (rbd.exclusive_lock), from open to close; NULL */
	bool online;	       /* the image is open */
	bool exclusive;	       /* configured with rbd.exclusive_lock */
	const char *name;      /* pool/[ns/]image, for messages (lives as long as the device) */
};
int bs_rbd_handle(const struct bs_dev *dev, struct bs_rbd_handle *h);
/* The ownership o (of a device of context x) saw ESHUTDOWN (blocklisted) doing what: the
 * connection of its device is fenced, every device on it rejoins. Any thread. */
void bs_rbd_conn_fenced_owner(struct bs_rbd_ctx *x, const struct rbd_owner *o, const char *what);

/* Who else uses an RBD device's cluster connection (the persistent reservation store of
 * ha/ha_pr.c: its object sits next to the image, and a blocklisted connection must fence
 * both). attach(arg, rados, err, errlen) puts it on a connection (a librados rados_t): when the
 * device opens, when it rejoins after fencing, or at once in bs_rbd_attach_user when the
 * device is open; 0, or -errno + message (the open or the rejoin then fails, and is tried
 * again). detach(arg) takes it off before a fenced connection goes. Both run on the backend's
 * opener thread or in the caller of bs_rbd_attach_user, never at once, never after
 * bs_rbd_detach_user returns. u stays the caller's until then. */
struct bs_rbd_user {
	int (*attach)(void *arg, void *rados, char *err, size_t errlen);
	void (*detach)(void *arg);
	void *arg;
};
/* Main thread (LU creation): 0, or what attach returned (nothing kept); -EINVAL for another
 * backend. */
int bs_rbd_attach_user(struct bs_dev *dev, const struct bs_rbd_user *u, char *err, size_t errlen);
/* Main thread (LU end): waits for an attempt that uses it (bounded by the cluster's timeouts). */
void bs_rbd_detach_user(struct bs_dev *dev);
/* Any thread: the user saw ESHUTDOWN (blocklisted) doing what on the connection rados: every
 * LU on that connection is fenced and rejoins (ignored for a connection the device left). */
void bs_rbd_fenced(struct bs_dev *dev, void *rados, const char *what);
/* Whether the image is open ("online"), or not yet ("offline": started offline, opened again
 * in the background with back-off) with the reason and the attempt count; once open, the
 * state of its connection; -EINVAL for another backend. Any thread. */
struct bs_rbd_status {
	bool online;
	unsigned attempts; /* opens tried so far */
	unsigned next_s;   /* offline: seconds to the next attempt (0: now or running) */
	char reason[256];  /* offline: why ("image rbd/foo not found", ...) */
	/* online: "connected"; "fenced" (blocklisted: the rejoin starts in rejoin_next_s, or
	 * only when asked when rbd.rejoin_after_ms is 0); "rejoining" (an attempt runs, or
	 * failed and is tried again in rejoin_next_s) with conn_reason */
	char conn[16];
	char conn_reason[256];
	unsigned rejoins;	  /* rejoins completed since the start */
	unsigned rejoin_attempts; /* attempts of the rejoin under way */
	unsigned rejoin_next_s;
};
int bs_rbd_status(struct bs_dev *dev, struct bs_rbd_status *st);
/* Offline: try to open now (ix-ctl lun online), and restart the back-off; 0 (also when
 * online), -EINVAL for another backend. */
int bs_rbd_retry(struct bs_dev *dev);
/* Fenced: rejoin now (ix-ctl lun rejoin; a failure is tried again with back-off). 0 started
 * (or running); -EALREADY not fenced; -EAGAIN the image is not open yet (bs_rbd_retry);
 * -EINVAL another backend. Any thread. */
int bs_rbd_rejoin(struct bs_dev *dev);
#else
#define BS_RBD_OPS NULL
#endif

#endif
