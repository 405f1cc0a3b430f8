/* `ixadm attach` and `ixadm detach`: a LUN as a file. The FUSE file lives in the target's
 * session daemon (ixadm_fuse.c); attach starts one (an "ephemeral" daemon that ends with its
 * last attachment) when the target is not logged in, checks the LUN, and asks the daemon to
 * mount. Detach tells the daemon, unmounts (a plain unmount: it fails while the file is in
 * use, e.g. by a loop device) and waits until the daemon flushed and let go. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ix/scsi.h"
#include "ixadm.h"

#define DETACH_BUSY_MS 5000 /* an unmount refused as busy is retried this long */

/* The mount point: an empty regular file (created when missing). */
static int prepare_file(const char *path, char *real, bool *created)
{
	struct stat st;
	int fd;

	*created = false;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		*created = true;
	} else if (errno != EEXIST) {
		ax_err("%s: %s", path, strerror(errno));
		return AX_ERR;
	}
	if (!realpath(path, real) || stat(real, &st) < 0) {
		ax_err("%s: %s", path, strerror(errno));
		return AX_ERR;
	}
	if (!S_ISREG(st.st_mode) || st.st_size != 0) {
		ax_err("%s must be an empty regular file: it becomes the LUN", path);
		return AX_ERR_INVAL;
	}
	return AX_OK;
}

static int attach_via(struct ax_opts *o, struct ax_dev *dev, const char *real)
{
	struct ix_inquiry inq;
	struct ctl_reply rep;
	char req[CTL_LINE_MAX], flags[8];
	uint64_t blocks;
	uint32_t bs;
	int rc, n = 0;

	rc = ax_dev_inquiry(dev, o->lun, &inq);
	if (rc == AX_OK && inq.device_type != 0) {
		ax_err("LUN %u of %s is not a disk (device type 0x%02x)", o->lun, o->target,
		       inq.device_type);
		return AX_ERR_INVAL;
	}
	if (rc == AX_OK)
		rc = ax_dev_readcap(dev, o->lun, &blocks, &bs);
	if (rc) {
		ax_err("LUN %u: %s", o->lun, dev->err);
		return rc;
	}
	if (o->fua)
		flags[n++] = 'f';
	if (o->read_only)
		flags[n++] = 'r';
	if (o->direct_io)
		flags[n++] = 'd';
	if (!n)
		flags[n++] = '-';
	flags[n] = 0;
	snprintf(req, sizeof(req), "attach %u %llu %u %s %s", o->lun, (unsigned long long)blocks,
		 bs, flags, real);
	rc = ctl_call(dev->fd, req, NULL, 0, &rep, NULL, 0, dev->timeout_ms);
	if (rc < 0 || !rep.ok) {
		ax_err("attach: %s", rc < 0 ? strerror(-rc) : rep.rest);
		return rc < 0 ? AX_ERR_INTERNAL : rep.code;
	}
	printf("Attached LUN %u of %s at %s: %llu bytes (%llu blocks of %u bytes)\n", o->lun,
	       o->target, real, (unsigned long long)(blocks * bs), (unsigned long long)blocks, bs);
	return AX_OK;
}

int ax_mode_attach(struct ax_opts *o)
{
	char real[PATH_MAX];
	struct node_rec r;
	struct node_list l;
	struct ax_dev dev;
	struct ctl_reply rep;
	bool created, spawned = false;
	long sid = 0;
	int rc;

	if (!o->target || !o->have_portal || o->nargs != 1) {
		ax_err("usage: ixadm attach -T IQN -p IP[:PORT] [--lun N] [--fua] [--read-only] "
		       "[--direct-io] FILE");
		return AX_ERR_INVAL;
	}
	if (!ax_iscsi_name_ok(o->target)) {
		ax_err("\"%s\" is not an iSCSI name", o->target);
		return AX_ERR_INVAL;
	}
	rc = prepare_file(o->args[0], real, &created);
	if (rc)
		return rc;
	rc = ax_dev_open(o, o->target, &o->portal, false, true, &dev);
	if (rc == AX_ERR_SESS_NOT_FOUND) {
		/* not logged in: a daemon just for this attachment, with the record's settings */
		node_defaults(&r);
		snprintf(r.name, sizeof(r.name), "%s", o->target);
		snprintf(r.address, sizeof(r.address), "%s", o->portal.host);
		r.port = o->portal.port;
		if (node_list_load(o->db, &l) == 0) {
			for (int i = 0; i < l.n; i++)
				if (node_match(&l.recs[i], o->target, &o->portal))
					r = l.recs[i];
			node_list_free(&l);
		}
		rc = ax_login_rec(o, &r, true, &sid);
		spawned = rc == AX_OK;
		if (rc == AX_OK || rc == AX_ERR_SESS_EXISTS)
			rc = ax_dev_open(o, o->target, &o->portal, false, true, &dev);
	} else if (rc) {
		ax_err("%s", dev.err);
	}
	if (rc == AX_OK)
		rc = attach_via(o, &dev, real);
	if (rc && spawned && dev.fd >= 0)
		ctl_call(dev.fd, "logout", NULL, 0, &rep, NULL, 0, dev.timeout_ms);
	ax_dev_close(&dev);
	if (rc && created)
		unlink(real);
	return rc;
}

/* ---------------------------------------------------------------- detach */

static int fusermount_u(const char *path)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", path, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) { /* 10 s */
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EBUSY;
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -ETIMEDOUT;
}

/* A plain (not lazy) unmount: it fails while the file is open, which is what we want. */
static int unmount_file(const char *path)
{
	uint64_t deadline = ax_now_ms() + DETACH_BUSY_MS;

	for (;;) {
		if (umount2(path, UMOUNT_NOFOLLOW) == 0)
			return 0;
		if (errno == EPERM)
			return fusermount_u(path); /* not root: the setuid helper */
		if (errno != EBUSY || ax_now_ms() >= deadline)
			return -errno;
		usleep(100000); /* e.g. a loop device that is being released */
	}
}

static bool is_ixadm_mount(const char *path)
{
	char line[8192];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], *sep;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		sep = strstr(line, " - ");
		found = strcmp(mnt, path) == 0 && sep && strncmp(sep + 3, "fuse.ixadm ", 11) == 0;
	}
	fclose(f);
	return found;
}

int ax_mode_detach(struct ax_opts *o)
{
	char real[PATH_MAX], req[CTL_LINE_MAX];
	struct ctl_info *v = NULL;
	struct ctl_reply rep;
	int n = 0, fd = -1, r;
	const struct ctl_info *owner = NULL;

	if (o->nargs != 1) {
		ax_err("usage: ixadm detach FILE");
		return AX_ERR_INVAL;
	}
	if (!realpath(o->args[0], real)) {
		ax_err("%s: %s", o->args[0], strerror(errno));
		return AX_ERR;
	}
	ctl_sessions(o->db, &v, &n);
	for (int i = 0; i < n && !owner; i++)
		for (int k = 0; k < v[i].nattach; k++)
			if (strcmp(v[i].attach[k].path, real) == 0)
				owner = &v[i];
	if (!owner) {
		free(v);
		if (is_ixadm_mount(real)) {
			/* its daemon is gone (killed): the mount is dead, just remove it */
			r = unmount_file(real);
			if (r == 0) {
				printf("Detached %s (no session daemon held it any more)\n", real);
				return AX_OK;
			}
			ax_err("%s: unmount failed: %s", real, strerror(-r));
			return AX_ERR_BUSY;
		}
		ax_err("%s is not attached (no session under %s holds it)", real, o->db);
		return AX_ERR_NO_OBJS;
	}
	{
		struct ax_portal p;
		struct ctl_paths cp;
		if (ax_portal_parse(owner->portal, &p) == 0 &&
		    ctl_paths(o->db, owner->target, &p, &cp) == 0)
			fd = ctl_connect(cp.sock, 2000);
	}
	free(v);
	if (fd < 0) {
		ax_err("cannot reach the session daemon holding %s", real);
		return AX_ERR_SESS_NOT_FOUND;
	}
	snprintf(req, sizeof(req), "detach %s", real);
	r = ctl_call(fd, req, NULL, 0, &rep, NULL, 0, 10000);
	if (r < 0 || !rep.ok) {
		ax_err("detach: %s", r < 0 ? strerror(-r) : rep.rest);
		close(fd);
		return r < 0 ? AX_ERR_INTERNAL : rep.code;
	}
	r = unmount_file(real);
	if (r < 0) {
		ax_err("cannot unmount %s: %s%s", real, strerror(-r),
		       r == -EBUSY ? " (still in use: losetup -d / umount what uses it first)" : "");
		close(fd);
		return AX_ERR_BUSY;
	}
	/* the daemon finishes in-flight requests and flushes the LUN's cache, then reports */
	r = ctl_read_reply(fd, &rep, o->timeout_s * 1000);
	close(fd);
	if (r < 0) {
		ax_err("%s is unmounted, but the session daemon did not confirm the flush: %s", real,
		       strerror(-r));
		return r == -ETIMEDOUT ? AX_ERR_TIMEOUT : AX_ERR;
	}
	if (!rep.ok) {
		ax_err("%s detached with an error: %s", real, rep.rest);
		return rep.code ? rep.code : AX_ERR;
	}
	printf("Detached %s\n", real);
	return AX_OK;
}
