/* The high-availability layer's face (ha.h): the hook table the SCSI core calls, and the
 * management API's questions about an RBD LUN, answered in every build (a build without
 * librbd says so). The #if IX_HAVE_RBD of the layers above gather here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/bs_rbd.h"
#include "ha/ha.h"
#include "ha/ha_alua.h"
#include "ha/ha_int.h"
#include "ha/ha_own.h"
#include "scsi/scsi_int.h"

#ifdef IX_HAVE_RBD
#include "ha/ha_own_int.h"
#include "ha/ha_pr.h"
#endif

/* PERSISTENT RESERVE store "rados": the RADOS object next to the image (ha_pr.c). */
static int pr_open(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen)
{
#ifdef IX_HAVE_RBD
	if (cfg->backend == BS_TYPE_RBD && lu->dev)
		return ha_pr_open(lu, cfg, err, errlen);
#endif
	snprintf(err, errlen, "pr_store \"rados\" needs an RBD LU with its medium%s",
		 ha_have_rbd() ? "" : " (this build has no librados)");
	return -EINVAL;
}

static void scsi_get(struct scsi_ha *s)
{
	ha_ctx_get(ha_ctx_of_scsi(s));
}

static void scsi_put(struct scsi_ha *s)
{
	ha_ctx_put(ha_ctx_of_scsi(s));
}

static const struct scsi_ha_ops scsi_ops = {
    .get = scsi_get,
    .put = scsi_put,
    .pr_open = pr_open,
    .lu_watch = ha_alua_lu_watch,
    .lu_mapped = ha_alua_lu_mapped,
    .alua_follow = ha_alua_follow,
    .alua_implicit = ha_alua_implicit,
    .alua_stpg = ha_alua_stpg,
    .alua_configured = ha_alua_configured,
};

struct ha_ctx *ha_ctx_new(void)
{
	struct ha_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	atomic_init(&c->refs, 1);
	c->scsi.ops = &scsi_ops;
	c->scsi.host = &c->host;
#ifdef IX_HAVE_RBD
	c->host.own_ops = &ha_own_ops;
	c->host.rbd = bs_rbd_ctx_new();
	if (!c->host.rbd) {
		free(c);
		return NULL;
	}
#endif
	atomic_init(&c->own_changes, 0);
	pthread_mutex_init(&c->groups_lock, NULL);
	pthread_mutex_init(&c->snap_mu, NULL);
	list_init(&c->own_groups);
	return c;
}

void ha_ctx_get(struct ha_ctx *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void ha_ctx_put(struct ha_ctx *c)
{
	if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
		return;
#ifdef IX_HAVE_RBD
	bs_rbd_ctx_put(c->host.rbd); /* its threads end once its last device has closed */
#endif
	pthread_mutex_destroy(&c->groups_lock);
	pthread_mutex_destroy(&c->snap_mu);
	free(c);
}

struct scsi_ha *ha_scsi(struct ha_ctx *c)
{
	return c ? &c->scsi : NULL;
}

unsigned ha_ctx_changes(const struct ha_ctx *c)
{
	return c ? atomic_load_explicit(&((struct ha_ctx *)c)->own_changes, memory_order_acquire)
		 : 0;
}

bool ha_have_rbd(void)
{
#ifdef IX_HAVE_RBD
	return true;
#else
	return false;
#endif
}

int ha_dev_lock(struct bs_dev *dev, bool brk, char *state, size_t slen, char *reason, size_t rlen)
{
#ifdef IX_HAVE_RBD
	int rc;

	if ((rc = ha_own_state(dev, reason, rlen)) < 0)
		snprintf(reason, rlen, "not an rbd LUN");
	if (rc >= 0 && brk)
		rc = ha_own_break_lock(dev, reason, rlen);
	if (rc >= 0)
		snprintf(state, slen, "%s", ha_own_state_name(ha_own_state(dev, reason, rlen)));
	return rc < 0 ? rc : 0;
#else
	(void)dev;
	(void)brk;
	(void)state;
	(void)slen;
	snprintf(reason, rlen, "built without RBD");
	return -EOPNOTSUPP;
#endif
}

int ha_dev_status(struct bs_dev *dev, struct ha_dev_status *st)
{
	memset(st, 0, sizeof(*st));
#ifdef IX_HAVE_RBD
	struct bs_rbd_status rs;
	int own;

	if (bs_rbd_status(dev, &rs) < 0)
		return -EINVAL;
	st->attempts = rs.attempts;
	st->next_s = rs.next_s;
	st->offline = !rs.online;
	if (!rs.online)
		snprintf(st->reason, sizeof(st->reason), "%s", rs.reason);
	own = ha_own_state(dev, st->lock_reason, sizeof(st->lock_reason));
	snprintf(st->lock, sizeof(st->lock), "%s", rs.online ? ha_own_state_name(own) : "");
	snprintf(st->conn, sizeof(st->conn), "%s", rs.conn);
	snprintf(st->conn_reason, sizeof(st->conn_reason), "%s", rs.conn_reason);
	st->rejoins = rs.rejoins;
	st->rejoin_attempts = rs.rejoin_attempts;
	st->rejoin_next_s = rs.rejoin_next_s;
	return 0;
#else
	(void)dev;
	return -EINVAL;
#endif
}

int ha_dev_retry(struct bs_dev *dev)
{
#ifdef IX_HAVE_RBD
	if (dev && dev->ops == &bs_rbd_ops)
		return bs_rbd_retry(dev);
#else
	(void)dev;
#endif
	return -EINVAL;
}

int ha_dev_rejoin(struct bs_dev *dev)
{
#ifdef IX_HAVE_RBD
	return dev && dev->ops == &bs_rbd_ops ? bs_rbd_rejoin(dev) : -EINVAL;
#else
	(void)dev;
	return -EOPNOTSUPP;
#endif
}

void ha_set_snap_handler(struct ha_ctx *c, ha_snap_handler fn, void *arg)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->snap_mu);
	c->snap_fn = fn;
	c->snap_arg = arg;
	pthread_mutex_unlock(&c->snap_mu);
}

void ha_set_offline_handler(struct ha_ctx *c, ha_offline_handler fn, void *arg)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->snap_mu);
	c->off_fn = fn;
	c->off_arg = arg;
	pthread_mutex_unlock(&c->snap_mu);
}

#ifndef IX_HAVE_RBD
int ha_dev_lu_offline(struct bs_dev *dev, const char *target, uint32_t lun, unsigned timeout_ms,
		      ha_offline_cb cb, void *arg, unsigned *bound_ms, char *err, size_t errlen)
{
	(void)dev, (void)target, (void)lun, (void)timeout_ms, (void)cb, (void)arg;
	*bound_ms = 0;
	snprintf(err, errlen, "built without RBD");
	return -EPERM;
}

int ha_dev_lu_online(struct bs_dev *dev, const char *target, uint32_t lun, bool changed)
{
	(void)dev, (void)target, (void)lun, (void)changed;
	return -EOPNOTSUPP;
}

void ha_offline_req_answer(struct ha_snap_req *r, int rc, unsigned users, const char *who)
{
	(void)r, (void)rc, (void)users, (void)who; /* never made without RBD */
}

int ha_dev_snap_forward(struct bs_dev *dev, const char *target, uint32_t lun, const char *name,
			enum ha_snap_what what, unsigned timeout_ms, ha_snap_answer_cb cb,
			void *arg, unsigned *bound_ms, char *err, size_t errlen)
{
	(void)dev, (void)target, (void)lun, (void)name, (void)timeout_ms, (void)cb, (void)arg;
	(void)what;
	*bound_ms = 0;
	snprintf(err, errlen, "built without RBD");
	return -EOPNOTSUPP;
}

void ha_snap_req_answer(struct ha_snap_req *r, int rc, unsigned held_ms, const char *msg)
{
	(void)r, (void)rc, (void)held_ms, (void)msg; /* never made without RBD */
}
#endif
