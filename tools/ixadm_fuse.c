/* A LUN as a regular file, through FUSE (libfuse3's low-level API), served from the session
 * daemon's own poll loop: its /dev/fuse descriptor is one more fd; a readable descriptor means
 * one request per free slot is received (fuse_session_receive_buf) and dispatched
 * (fuse_session_process_buf); reads and writes become SCSI commands and are answered from
 * their completion callbacks. One thread: libfuse and the ix context are only ever called
 * from the daemon's loop.
 *
 * Semantics: no writeback cache, so a write(2) returns only after the target completed the
 * WRITE (with FUA when attached with --fua); fsync(2), and close(2) after writes, send
 * SYNCHRONIZE CACHE. Writes that do not cover whole blocks are read-modify-write and are
 * ordered against every other write. The file's size is the LUN's capacity and does not
 * change; O_TRUNC is ignored as on a block device.
 *
 * Memory: NSLOTS request slots, each with the request buffer libfuse allocates on its first
 * use and a data buffer of AX_IO_MAX plus two blocks, all kept for the attachment's life. */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ix/scsi.h"
#include "ixadm.h"
#include "ixadm_daemon.h"

#define NSLOTS 16
#define UA_RETRIES 3

enum sst {
	S_FREE,
	S_HELD,        /* the request is being dispatched */
	S_QUEUED,      /* a write waiting for the writes ahead of it */
	S_READ,
	S_WRITE,
	S_RMW_READ,    /* unaligned write: reading the blocks it touches */
	S_RMW_WRITE,
	S_SYNC,
};

struct fslot {
	struct attach *a;
	struct fuse_buf fbuf;
	uint8_t *data;
	fuse_req_t req;
	enum sst st;
	const char *wdata;     /* write payload, inside fbuf */
	size_t size;
	uint64_t off, lba;
	uint32_t nblk;
	int retries;
	uint64_t wgen;         /* S_SYNC: writes completed when it started */
	struct dcmd dc;
	struct fslot *qnext;
};

enum ast { A_ACTIVE, A_DRAIN, A_SYNC, A_ENDED };

struct attach {
	struct daemon *d;
	struct fuse_session *se;
	int fd;
	uint32_t lun, bs;
	uint64_t blocks, size;
	bool fua, ro, dio;
	char path[PATH_MAX];
	uid_t uid;
	gid_t gid;
	time_t mtime;
	struct fslot slots[NSLOTS];
	int nfree;
	struct fslot *cur;
	int writes;            /* aligned writes in flight */
	bool rmw;              /* a read-modify-write in flight */
	struct fslot *qh, *qt;
	bool dirty;
	uint64_t wgen;
	bool sync10;           /* the LUN refused SYNCHRONIZE CACHE(16) */
	enum ast st;
	bool lazy;
	struct dcmd final;
	int code;
	char msg[256];
};

static void progress_end(struct attach *a);

static struct attach *req_att(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void slot_free(struct fslot *sl)
{
	sl->st = S_FREE;
	sl->req = NULL;
	sl->a->nfree++;
	if (sl->a->st == A_DRAIN)
		progress_end(sl->a);
}

/* The slot of the request being dispatched, now owned by the handler until its reply. */
static struct fslot *claim(struct attach *a, fuse_req_t req, enum sst st)
{
	struct fslot *sl = a->cur;

	sl->req = req;
	sl->st = st;
	sl->retries = 0;
	return sl;
}

static void fail(struct fslot *sl, int err)
{
	fuse_reply_err(sl->req, err);
	slot_free(sl);
}

static bool is_unit_attention(const struct ix_scsi_cmd *c)
{
	uint8_t key, asc, ascq;

	return c->status == 2 && ix_parse_sense(c->sense, c->sense_len, &key, &asc, &ascq) == 0 &&
	       key == 6;
}

/* 0: the command did what was asked; 1: it was resubmitted (unit attention); -EIO. */
static int cmd_outcome(struct fslot *sl)
{
	struct ix_scsi_cmd *c = &sl->dc.cmd;
	char why[160];

	if (c->err == 0 && c->status == 0 && !(c->underflow && c->residual))
		return 0;
	if (c->err == 0 && is_unit_attention(c) && sl->retries++ < UA_RETRIES) {
		struct ix_scsi_cmd again = *c;
		ix_scsi_cmd_init(&sl->dc.cmd, again.lun, again.cdb, again.cdb_len, again.dir,
				 again.buf, again.len, NULL, NULL);
		if (d_submit(sl->a->d, &sl->dc, 0) == 0)
			return 1;
	}
	d_cmd_result_str(&sl->dc, why, sizeof(why));
	d_log(sl->a->d, "%s: command 0x%02x at LBA %llu: %s%s", sl->a->path, c->cdb[0],
	      (unsigned long long)sl->lba, why,
	      c->err == 0 && c->status == 0 ? " (short transfer)" : "");
	return -EIO;
}

static int submit_rw(struct fslot *sl, bool write, void *buf, bool fua)
{
	struct attach *a = sl->a;
	uint8_t cdb[16];
	uint8_t n = write ? ix_cdb_write16(cdb, sl->lba, sl->nblk, fua)
			  : ix_cdb_read16(cdb, sl->lba, sl->nblk, false);

	ix_scsi_cmd_init(&sl->dc.cmd, a->lun, cdb, n, write ? IX_DIR_WRITE : IX_DIR_READ, buf,
			 sl->nblk * a->bs, NULL, NULL);
	return d_submit(a->d, &sl->dc, 0);
}

/* ---------------------------------------------------------------- sync */

static uint8_t cdb_sync(struct attach *a, uint8_t cdb[16])
{
	if (!a->sync10)
		return ix_cdb_sync_cache16(cdb, 0, 0);
	memset(cdb, 0, 16);
	cdb[0] = 0x35; /* SYNCHRONIZE CACHE (10), whole medium */
	return 10;
}

static bool invalid_opcode(const struct ix_scsi_cmd *c)
{
	uint8_t key, asc, ascq;

	return c->err == 0 && c->status == 2 &&
	       ix_parse_sense(c->sense, c->sense_len, &key, &asc, &ascq) == 0 && key == 5 &&
	       asc == 0x20;
}

static int submit_sync(struct attach *a, struct dcmd *dc)
{
	uint8_t cdb[16], n = cdb_sync(a, cdb);

	ix_scsi_cmd_init(&dc->cmd, a->lun, cdb, n, IX_DIR_NONE, NULL, 0, NULL, NULL);
	return d_submit(a->d, dc, 0);
}

static void sync_done(struct dcmd *dc)
{
	struct fslot *sl = dc->owner;
	struct attach *a = sl->a;
	int r;

	if (invalid_opcode(&dc->cmd) && !a->sync10) {
		a->sync10 = true;
		if (submit_sync(a, dc) == 0)
			return;
	}
	r = cmd_outcome(sl);
	if (r == 1)
		return;
	if (r == 0 && a->wgen == sl->wgen)
		a->dirty = false;
	fuse_reply_err(sl->req, r == 0 ? 0 : EIO);
	slot_free(sl);
}

static void start_sync(struct attach *a, fuse_req_t req)
{
	struct fslot *sl = claim(a, req, S_SYNC);

	sl->wgen = a->wgen;
	sl->lba = 0;
	sl->dc.owner = sl;
	sl->dc.cb = sync_done;
	if (submit_sync(a, &sl->dc) < 0)
		fail(sl, EIO);
}

/* ---------------------------------------------------------------- read */

static void read_done(struct dcmd *dc)
{
	struct fslot *sl = dc->owner;
	int r = cmd_outcome(sl);

	if (r == 1)
		return;
	if (r < 0) {
		fail(sl, EIO);
		return;
	}
	fuse_reply_buf(sl->req, (const char *)sl->data + (sl->off - sl->lba * sl->a->bs),
		       sl->size);
	slot_free(sl);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct attach *a = req_att(req);
	struct fslot *sl;
	uint64_t end;

	(void)ino;
	(void)fi;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= a->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > AX_IO_MAX) {
		d_log(a->d, "%s: read of %zu bytes exceeds max_read", a->path, size);
		fuse_reply_err(req, EIO);
		return;
	}
	end = (uint64_t)off + size > a->size ? a->size : (uint64_t)off + size;
	sl = claim(a, req, S_READ);
	sl->off = (uint64_t)off;
	sl->size = (size_t)(end - sl->off);
	sl->lba = sl->off / a->bs;
	sl->nblk = (uint32_t)((end + a->bs - 1) / a->bs - sl->lba);
	sl->dc.owner = sl;
	sl->dc.cb = read_done;
	if (submit_rw(sl, false, sl->data, false) < 0)
		fail(sl, EIO);
}

/* ---------------------------------------------------------------- write */

static void write_start(struct fslot *sl);

static bool aligned(const struct fslot *sl)
{
	return sl->off % sl->a->bs == 0 && sl->size % sl->a->bs == 0;
}

/* Start queued writes while the one at the head may go. */
static void kick_queue(struct attach *a)
{
	while (a->qh && !a->rmw && (aligned(a->qh) || a->writes == 0)) {
		struct fslot *sl = a->qh;
		a->qh = sl->qnext;
		if (!a->qh)
			a->qt = NULL;
		sl->qnext = NULL;
		write_start(sl);
	}
}

static void write_finish(struct fslot *sl, int r)
{
	struct attach *a = sl->a;

	if (sl->st == S_WRITE)
		a->writes--;
	else
		a->rmw = false;
	if (r == 0) {
		a->wgen++;
		a->dirty = a->dirty || !a->fua;
		a->mtime = time(NULL);
		fuse_reply_write(sl->req, sl->size);
		slot_free(sl);
	} else {
		fail(sl, EIO);
	}
	kick_queue(a);
}

static void write_done(struct dcmd *dc)
{
	struct fslot *sl = dc->owner;
	struct attach *a = sl->a;
	int r = cmd_outcome(sl);

	if (r == 1)
		return;
	if (r == 0 && sl->st == S_RMW_READ) {
		memcpy(sl->data + (sl->off - sl->lba * a->bs), sl->wdata, sl->size);
		sl->st = S_RMW_WRITE;
		if (submit_rw(sl, true, sl->data, a->fua) == 0)
			return;
		r = -EIO;
	}
	write_finish(sl, r);
}

static void write_start(struct fslot *sl)
{
	struct attach *a = sl->a;
	int r;

	sl->lba = sl->off / a->bs;
	sl->nblk = (uint32_t)((sl->off + sl->size + a->bs - 1) / a->bs - sl->lba);
	sl->dc.owner = sl;
	sl->dc.cb = write_done;
	sl->retries = 0;
	if (aligned(sl)) {
		sl->st = S_WRITE;
		a->writes++;
		r = submit_rw(sl, true, (void *)sl->wdata, a->fua);
	} else {
		sl->st = S_RMW_READ;
		a->rmw = true;
		r = submit_rw(sl, false, sl->data, false);
	}
	if (r < 0)
		write_finish(sl, r);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct attach *a = req_att(req);
	struct fslot *sl;

	(void)ino;
	(void)fi;
	if (a->ro) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0 || size > AX_IO_MAX) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	if ((uint64_t)off >= a->size) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	sl = claim(a, req, S_QUEUED);
	sl->wdata = buf;
	sl->off = (uint64_t)off;
	sl->size = (uint64_t)off + size > a->size ? (size_t)(a->size - (uint64_t)off) : size;
	if (!a->rmw && !a->qh && (aligned(sl) || a->writes == 0)) {
		write_start(sl);
		return;
	}
	if (a->qt)
		a->qt->qnext = sl;
	else
		a->qh = sl;
	a->qt = sl;
}

/* ---------------------------------------------------------------- the rest of the file */

static void fill_stat(const struct attach *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFREG | (a->ro ? 0400 : 0600);
	st->st_nlink = 1;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = a->bs > 4096 ? (blksize_t)a->bs : 4096;
	st->st_blocks = (blkcnt_t)(a->size / 512);
	st->st_mtime = st->st_ctime = st->st_atime = a->mtime;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* requests must land in our slot buffers, and writes must not be cached */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
			FUSE_CAP_WRITEBACK_CACHE);
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC; /* O_TRUNC arrives in open: ignored */
	conn->max_write = AX_IO_MAX;
	conn->max_read = AX_IO_MAX; /* must equal the max_read mount option */
	conn->max_readahead = AX_IO_MAX;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent;
	(void)name;
	fuse_reply_err(req, ENOENT);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(req_att(req), &st);
	fuse_reply_attr(req, &st, 3600.0);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct attach *a = req_att(req);
	struct stat st;

	(void)ino;
	(void)fi;
	if (((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != a->size) ||
	    (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		fuse_reply_err(req, EPERM); /* the size is the LUN's; mode and owner are fixed */
		return;
	}
	fill_stat(a, &st); /* times: accepted and forgotten */
	fuse_reply_attr(req, &st, 3600.0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct attach *a = req_att(req);

	(void)ino;
	if (a->ro && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->direct_io = a->dio;
	fi->keep_cache = 0; /* drop cached pages at each open: another initiator may write */
	fuse_reply_open(req, fi);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct attach *a = req_att(req);

	(void)ino;
	(void)fi;
	if (a->dirty && !a->ro)
		start_sync(a, req);
	else
		fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct attach *a = req_att(req);

	(void)ino;
	(void)datasync;
	(void)fi;
	if (a->ro)
		fuse_reply_err(req, 0);
	else
		start_sync(a, req);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	(void)mode;
	(void)off;
	(void)len;
	(void)fi;
	fuse_reply_err(req, EOPNOTSUPP);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.fsync = op_fsync,
	.release = op_release,
	.fallocate = op_fallocate,
};

/* ---------------------------------------------------------------- life cycle */

static void finish(struct attach *a)
{
	if (a->st == A_ENDED)
		return;
	/* after an unmount this only closes the fd; when we stop first it unmounts lazily */
	fuse_session_unmount(a->se);
	a->fd = -1;
	a->st = A_ENDED;
	d_attach_ended(a->d, a, a->code, a->msg);
}

static void final_sync_done(struct dcmd *dc)
{
	struct attach *a = dc->owner;
	char why[160];

	if (invalid_opcode(&dc->cmd) && !a->sync10) {
		a->sync10 = true;
		if (submit_sync(a, dc) == 0)
			return;
	}
	if (dc->cmd.err || dc->cmd.status) {
		d_cmd_result_str(dc, why, sizeof(why));
		a->code = AX_ERR;
		snprintf(a->msg, sizeof(a->msg), "final SYNCHRONIZE CACHE failed: %s", why);
	}
	finish(a);
}

/* Called when draining: once nothing is in flight, flush and end. */
static void progress_end(struct attach *a)
{
	if (a->st != A_DRAIN || a->nfree != NSLOTS)
		return;
	if (a->dirty) {
		a->st = A_SYNC;
		a->final.owner = a;
		a->final.cb = final_sync_done;
		if (submit_sync(a, &a->final) == 0)
			return;
		a->code = AX_ERR;
		snprintf(a->msg, sizeof(a->msg), "final SYNCHRONIZE CACHE not possible: session "
			 "not connected");
	}
	finish(a);
}

static void begin_end(struct attach *a, int code, const char *msg)
{
	if (a->st != A_ACTIVE)
		return;
	a->st = A_DRAIN;
	a->code = code;
	snprintf(a->msg, sizeof(a->msg), "%s", msg);
	progress_end(a);
}

int att_poll_fd(const struct attach *a)
{
	return a->st == A_ACTIVE && a->nfree > 0 ? a->fd : -1;
}

void att_readable(struct attach *a)
{
	for (int k = 0; k < 2 * NSLOTS && a->st == A_ACTIVE && a->nfree > 0; k++) {
		struct fslot *sl = NULL;
		int r;

		for (int i = 0; i < NSLOTS && !sl; i++)
			if (a->slots[i].st == S_FREE)
				sl = &a->slots[i];
		r = fuse_session_receive_buf(a->se, &sl->fbuf);
		if (r == -EAGAIN || r == -EINTR)
			return;
		if (r <= 0) {
			if (r < 0)
				d_log(a->d, "%s: /dev/fuse: %s", a->path, strerror(-r));
			begin_end(a, 0, "unmounted");
			return;
		}
		sl->st = S_HELD;
		a->nfree--;
		a->cur = sl;
		fuse_session_process_buf(a->se, &sl->fbuf);
		a->cur = NULL;
		if (sl->st == S_HELD)
			slot_free(sl); /* answered at once */
	}
}

void att_shutdown(struct attach *a)
{
	a->lazy = true;
	begin_end(a, 0, "the session daemon stopped");
}

bool att_ended(const struct attach *a)
{
	return a->st == A_ENDED;
}

const char *att_path(const struct attach *a)
{
	return a->path;
}

uint32_t att_lun(const struct attach *a)
{
	return a->lun;
}

void att_free(struct attach *a)
{
	if (!a)
		return;
	if (a->st != A_ENDED && a->se)
		fuse_session_unmount(a->se);
	if (a->se)
		fuse_session_destroy(a->se);
	for (int i = 0; i < NSLOTS; i++) {
		free(a->slots[i].fbuf.mem);
		free(a->slots[i].data);
	}
	free(a);
}

static int check_mountpoint(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (path[0] != '/' || strlen(path) >= PATH_MAX || strchr(path, '\n')) {
		snprintf(err, errlen, "the file must be an absolute path");
		return -EINVAL;
	}
	if (lstat(path, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode) || st.st_size != 0) {
		snprintf(err, errlen, "%s must be an empty regular file (it becomes the LUN)",
			 path);
		return -EINVAL;
	}
	return 0;
}

struct attach *att_new(struct daemon *d, uint32_t lun, uint64_t blocks, uint32_t bs,
		       const char *flags, const char *path, char *err, size_t errlen)
{
	char opts[512];
	size_t dsize;
	struct attach *a;

	if (bs < 512 || bs > 65536 || (bs & (bs - 1)) || blocks == 0 ||
	    blocks > (uint64_t)INT64_MAX / bs) {
		snprintf(err, errlen, "unusable geometry: %llu blocks of %u bytes",
			 (unsigned long long)blocks, bs);
		return NULL;
	}
	if (check_mountpoint(path, err, errlen) < 0)
		return NULL;
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	a->d = d;
	a->fd = -1;
	a->lun = lun;
	a->bs = bs;
	a->blocks = blocks;
	a->size = blocks * bs;
	a->fua = strchr(flags, 'f') != NULL;
	a->ro = strchr(flags, 'r') != NULL;
	a->dio = strchr(flags, 'd') != NULL;
	a->uid = getuid();
	a->gid = getgid();
	a->mtime = time(NULL);
	snprintf(a->path, sizeof(a->path), "%s", path);
	dsize = ((size_t)AX_IO_MAX + 2 * bs + 4095) & ~(size_t)4095;
	for (int i = 0; i < NSLOTS; i++) {
		a->slots[i].a = a;
		a->slots[i].data = aligned_alloc(4096, dsize);
		if (!a->slots[i].data) {
			snprintf(err, errlen, "out of memory");
			att_free(a);
			return NULL;
		}
	}
	a->nfree = NSLOTS;
	snprintf(opts, sizeof(opts),
		 "fsname=ix:%s/%u,subtype=ixadm,default_permissions,max_read=%u%s%s",
		 d_target(d), lun, AX_IO_MAX, geteuid() == 0 ? ",allow_other" : "",
		 a->ro ? ",ro" : "");
	char *argv[] = {"ixadm", "-o", opts, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	a->se = fuse_session_new(&args, &ops, sizeof(ops), a);
	fuse_opt_free_args(&args);
	if (!a->se || fuse_session_mount(a->se, path) != 0) {
		snprintf(err, errlen, "cannot mount FUSE at %s (is /dev/fuse usable? see the "
			 "daemon's log)", path);
		if (a->se)
			fuse_session_destroy(a->se);
		a->se = NULL;
		att_free(a);
		return NULL;
	}
	a->fd = fuse_session_fd(a->se);
	fcntl(a->fd, F_SETFL, fcntl(a->fd, F_GETFL) | O_NONBLOCK);
	return a;
}
