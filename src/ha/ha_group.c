/* The gateway group's object in RADOS (ha_group.h). */
#include "ha/ha_group.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#ifdef IX_HAVE_RBD
#include <rados/librados.h>

#include "util/log.h"

#define GROUP_OSD_TIMEOUT_S "10"   /* every RADOS call of the group's is bounded by this */
#define GROUP_CONNECT_S     "30"
#define GROUP_NOTIFY_MS     2000   /* a gateway that does not ack within this catches up by
				      its poll */

struct ha_group {
	rados_t cluster;
	rados_ioctx_t io;
	char oid[160];
	char name[400];
	uint64_t watch;
	bool watching;
	int efd;
	atomic_uint events;
};

static int conf_set(rados_t r, const char *opt, const char *val, char *err, size_t errlen)
{
	int rc = rados_conf_set(r, opt, val);

	if (rc < 0)
		snprintf(err, errlen, "rados_conf_set %s: %s", opt, strerror(-rc));
	return rc;
}

int ha_group_open(const struct ha_group_ref *ref, struct ha_group **out, char *err,
		  size_t errlen)
{
	struct ha_group *g = calloc(1, sizeof(*g));
	int rc;

	*out = NULL;
	if (!g)
		return -ENOMEM;
	g->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g->efd < 0) {
		rc = -errno;
		free(g);
		snprintf(err, errlen, "eventfd: %s", strerror(-rc));
		return rc;
	}
	snprintf(g->oid, sizeof(g->oid), "%s", ref->object);
	snprintf(g->name, sizeof(g->name), "%s%s%s/%s", ref->pool, ref->ns[0] ? "/" : "", ref->ns,
		 ref->object);
	rc = rados_create(&g->cluster, ref->client);
	if (rc < 0) {
		snprintf(err, errlen, "rados_create(client.%s): %s", ref->client, strerror(-rc));
		g->cluster = NULL;
		goto fail;
	}
	rc = rados_conf_read_file(g->cluster, ref->conf[0] ? ref->conf : NULL);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read ceph configuration %s: %s",
			 ref->conf[0] ? ref->conf : "(default search path)", strerror(-rc));
		goto fail;
	}
	if ((ref->keyring[0] && (rc = conf_set(g->cluster, "keyring", ref->keyring, err, errlen))) ||
	    (rc = conf_set(g->cluster, "rados_osd_op_timeout", GROUP_OSD_TIMEOUT_S, err, errlen)) ||
	    (rc = conf_set(g->cluster, "rados_mon_op_timeout", GROUP_OSD_TIMEOUT_S, err, errlen)) ||
	    (rc = conf_set(g->cluster, "client_mount_timeout", GROUP_CONNECT_S, err, errlen)))
		goto fail;
	rc = rados_connect(g->cluster);
	if (rc < 0) {
		snprintf(err, errlen,
			 "group %s: cannot connect to the Ceph cluster as client.%s within %s s: %s",
			 g->name, ref->client, GROUP_CONNECT_S, strerror(-rc));
		goto fail;
	}
	rc = rados_ioctx_create(g->cluster, ref->pool, &g->io);
	if (rc < 0) {
		snprintf(err, errlen, "group %s: pool %s: %s", g->name, ref->pool, strerror(-rc));
		g->io = NULL;
		goto fail;
	}
	if (ref->ns[0])
		rados_ioctx_set_namespace(g->io, ref->ns);
	*out = g;
	return 0;
fail:
	ha_group_close(g);
	return rc;
}

void ha_group_close(struct ha_group *g)
{
	if (!g)
		return;
	if (g->watching) {
		rados_unwatch2(g->io, g->watch);
		rados_watch_flush(g->cluster); /* no callback of ours after this */
	}
	if (g->io)
		rados_ioctx_destroy(g->io);
	if (g->cluster)
		rados_shutdown(g->cluster);
	close(g->efd);
	free(g);
}

const char *ha_group_name(const struct ha_group *g)
{
	return g->name;
}

static int read_obj(struct ha_group *g, const char *oid, char **text, size_t *len, uint64_t *ver)
{
	char *buf = malloc(HA_GROUP_MAX_DOC + 1);
	int n;

	*text = NULL;
	if (!buf)
		return -ENOMEM;
	n = rados_read(g->io, oid, buf, HA_GROUP_MAX_DOC + 1, 0);
	if (n < 0) {
		free(buf);
		return n;
	}
	if ((size_t)n > HA_GROUP_MAX_DOC) {
		free(buf);
		return -EFBIG;
	}
	if (ver)
		*ver = rados_get_last_version(g->io);
	buf[n] = '\0';
	*text = buf;
	if (len)
		*len = (size_t)n;
	return 0;
}

int ha_group_read(struct ha_group *g, char **text, size_t *len, uint64_t *ver, char *err,
		  size_t errlen)
{
	int rc = read_obj(g, g->oid, text, len, ver);

	if (rc == -ENOENT)
		snprintf(err, errlen, "group %s: no such object (write one: ix-ctl group init, or "
				      "ix-ctl import)", g->name);
	else if (rc == -EFBIG)
		snprintf(err, errlen, "group %s: larger than %u bytes", g->name, HA_GROUP_MAX_DOC);
	else if (rc < 0)
		snprintf(err, errlen, "group %s: read: %s", g->name, strerror(-rc));
	return rc;
}

int ha_group_write(struct ha_group *g, const char *text, size_t len, uint64_t ver, char *err,
		   size_t errlen)
{
	rados_write_op_t op = rados_create_write_op();
	int rc;

	if (!op)
		return -ENOMEM;
	if (ver)
		rados_write_op_assert_version(op, ver);
	else
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	rados_write_op_write_full(op, text, len);
	rc = rados_write_op_operate(op, g->io, g->oid, NULL, 0);
	rados_release_write_op(op);
	/* an older version asserted: -ERANGE; a newer one: -EOVERFLOW */
	if (rc == -ERANGE || rc == -EOVERFLOW || rc == -EEXIST || (ver && rc == -ENOENT)) {
		snprintf(err, errlen,
			 "group %s: changed by someone else since it was read (conflict): nothing "
			 "written", g->name);
		return -ECANCELED;
	}
	if (rc < 0)
		snprintf(err, errlen, "group %s: write: %s", g->name, strerror(-rc));
	return rc;
}

void ha_group_notify(struct ha_group *g)
{
	char *reply = NULL;
	size_t rlen = 0;
	int rc = rados_notify2(g->io, g->oid, "changed", 7, GROUP_NOTIFY_MS, &reply, &rlen);

	if (rc < 0 && rc != -ETIMEDOUT)
		log_warn("group", "%s: notify: %s (the others find the change by their poll)",
			 g->name, strerror(-rc));
	rados_buffer_free(reply);
}

static void post(struct ha_group *g, unsigned bit)
{
	uint64_t one = 1;

	atomic_fetch_or(&g->events, bit);
	if (write(g->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("group", "%s: event: %s", g->name, strerror(errno));
}

static void watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id,
		     void *data, size_t len)
{
	struct ha_group *g = arg;

	(void)notifier_id;
	(void)data;
	(void)len;
	post(g, 1);
	rados_notify_ack(g->io, g->oid, notify_id, handle, NULL, 0);
}

static void watch_err_cb(void *arg, uint64_t cookie, int err)
{
	struct ha_group *g = arg;

	(void)cookie;
	(void)err;
	post(g, 2);
}

int ha_group_watch(struct ha_group *g, char *err, size_t errlen)
{
	int rc;

	if (g->watching) {
		rados_unwatch2(g->io, g->watch);
		g->watching = false;
	}
	rc = rados_watch2(g->io, g->oid, &g->watch, watch_cb, watch_err_cb, g);
	if (rc < 0) {
		snprintf(err, errlen, "group %s: watch: %s", g->name, strerror(-rc));
		return rc;
	}
	g->watching = true;
	return 0;
}

bool ha_group_watching(const struct ha_group *g)
{
	return g->watching;
}

int ha_group_event_fd(const struct ha_group *g)
{
	return g->efd;
}

unsigned ha_group_event_drain(struct ha_group *g)
{
	uint64_t n;
	unsigned ev;

	while (read(g->efd, &n, sizeof(n)) == (ssize_t)sizeof(n))
		;
	ev = atomic_exchange(&g->events, 0);
	if (ev & 2)
		g->watching = false; /* the watch is gone: ha_group_watch makes a new one */
	return ev;
}

static void status_oid(const struct ha_group *g, const char *member, char *oid, size_t cap)
{
	snprintf(oid, cap, "%s.status.%s", g->oid, member);
}

int ha_group_status_write(struct ha_group *g, const char *member, const char *text)
{
	char oid[256];

	status_oid(g, member, oid, sizeof(oid));
	return rados_write_full(g->io, oid, text, strlen(text));
}

int ha_group_status_read(struct ha_group *g, const char *member, char **text)
{
	char oid[256];

	status_oid(g, member, oid, sizeof(oid));
	return read_obj(g, oid, text, NULL, NULL);
}

#else /* without the rbd backend there is no librados */

int ha_group_open(const struct ha_group_ref *ref, struct ha_group **out, char *err,
		  size_t errlen)
{
	(void)ref;
	*out = NULL;
	snprintf(err, errlen, "group: this ix-target was built without librados (-Drbd=disabled)");
	return -ENOTSUP;
}

void ha_group_close(struct ha_group *g)
{
	(void)g;
}

int ha_group_read(struct ha_group *g, char **text, size_t *len, uint64_t *ver, char *err,
		  size_t errlen)
{
	(void)g, (void)text, (void)len, (void)ver, (void)err, (void)errlen;
	return -ENOTSUP;
}

int ha_group_write(struct ha_group *g, const char *text, size_t len, uint64_t ver, char *err,
		   size_t errlen)
{
	(void)g, (void)text, (void)len, (void)ver, (void)err, (void)errlen;
	return -ENOTSUP;
}

void ha_group_notify(struct ha_group *g)
{
	(void)g;
}

int ha_group_watch(struct ha_group *g, char *err, size_t errlen)
{
	(void)g, (void)err, (void)errlen;
	return -ENOTSUP;
}

bool ha_group_watching(const struct ha_group *g)
{
	(void)g;
	return false;
}

int ha_group_event_fd(const struct ha_group *g)
{
	(void)g;
	return -1;
}

unsigned ha_group_event_drain(struct ha_group *g)
{
	(void)g;
	return 0;
}

int ha_group_status_write(struct ha_group *g, const char *member, const char *text)
{
	(void)g, (void)member, (void)text;
	return -ENOTSUP;
}

int ha_group_status_read(struct ha_group *g, const char *member, char **text)
{
	(void)g, (void)member, (void)text;
	return -ENOTSUP;
}

const char *ha_group_name(const struct ha_group *g)
{
	(void)g;
	return "";
}

#endif
