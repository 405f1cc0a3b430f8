/* -m io: small commands on a LUN, through the target's session daemon when it is logged in,
 * else through a session of their own:
 *   list      REPORT LUNS, then INQUIRY and READ CAPACITY per LUN (all targets of the
 *             portal when -T is absent)
 *   inquiry, readcap, tur, sync
 *   read      --lba X --count N [--file OUT]   blocks to a file (standard output by default)
 *   write     --lba X [--count N] [--file IN] [--fua]   a file's blocks to the LUN
 * SCSI errors are printed decoded ("CHECK CONDITION: ILLEGAL REQUEST 21/00 (...)"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ix/scsi.h"
#include "ix/sync.h"
#include "ixadm.h"

#define MAX_LUNS 256

static const char *devtype(uint8_t t)
{
	switch (t) {
	case 0x00: return "disk";
	case 0x01: return "tape";
	case 0x05: return "cd/dvd";
	case 0x07: return "optical";
	case 0x08: return "changer";
	case 0x0c: return "storage array controller";
	case 0x0d: return "enclosure";
	case 0x1f: return "unknown or no device";
	default: return "other";
	}
}

static int fail(struct ax_dev *dev, int rc)
{
	ax_err("%s", dev->err);
	return rc;
}

static int print_lun(struct ax_dev *dev, uint32_t lun, const char *indent)
{
	struct ix_inquiry inq;
	uint64_t blocks;
	uint32_t bs;
	int rc = ax_dev_inquiry(dev, lun, &inq);

	if (rc) {
		ax_err("LUN %u: %s", lun, dev->err);
		return rc;
	}
	printf("%sLUN %u: %s (type 0x%02x), vendor \"%s\", product \"%s\", revision \"%s\"",
	       indent, lun, devtype(inq.device_type), inq.device_type, inq.vendor, inq.product,
	       inq.revision);
	if (inq.device_type == 0 && ax_dev_readcap(dev, lun, &blocks, &bs) == 0)
		printf(", %llu blocks of %u bytes (%.2f MiB)", (unsigned long long)blocks, bs,
		       (double)blocks * bs / 1048576.0);
	printf("\n");
	return AX_OK;
}

static int list_luns(struct ax_dev *dev, const char *indent)
{
	static const size_t cap = 16 + 8 * MAX_LUNS;
	uint8_t *buf = malloc(cap), cdb[16], n = ix_cdb_report_luns(cdb, (uint32_t)cap);
	uint32_t luns[MAX_LUNS];
	struct ix_scsi_cmd cmd;
	int rc, cnt;

	if (!buf)
		return AX_ERR_NOMEM;
	ix_scsi_cmd_init(&cmd, 0, cdb, n, IX_DIR_READ, buf, (uint32_t)cap, NULL, NULL);
	rc = ax_dev_check(dev, &cmd, "REPORT LUNS");
	if (rc) {
		free(buf);
		return fail(dev, rc);
	}
	cnt = ix_parse_report_luns(buf, cap - (cmd.underflow ? cmd.residual : 0), luns, MAX_LUNS);
	free(buf);
	if (cnt < 0) {
		ax_err("REPORT LUNS: malformed answer");
		return AX_ERR;
	}
	if (cnt > MAX_LUNS) {
		ax_err("the target reports %d LUNs; listing the first %d", cnt, MAX_LUNS);
		cnt = MAX_LUNS;
	}
	rc = AX_OK;
	for (int i = 0; i < cnt; i++) {
		int x = print_lun(dev, luns[i], indent);
		if (x)
			rc = x;
	}
	return rc;
}

static int list_target(struct ax_opts *o, const char *target, const struct ax_portal *p)
{
	struct ax_dev dev;
	char ps[AX_HOST_MAX + 16];
	int rc;

	ax_portal_str(p, ps, sizeof(ps));
	printf("Target: %s\n\tPortal: %s,%d\n", target, ps, p->tpgt);
	rc = ax_dev_open(o, target, p, o->direct, false, &dev);
	if (rc == AX_OK)
		rc = list_luns(&dev, "\t");
	else
		fail(&dev, rc);
	ax_dev_close(&dev);
	return rc;
}

static int cmd_list(struct ax_opts *o)
{
	struct ix_discovery *d;
	char err[512];
	int rc = AX_OK;

	if (o->target)
		return list_target(o, o->target, &o->portal);
	rc = ax_discover(o, &d, err, sizeof(err));
	if (rc) {
		ax_err("cannot discover targets at %s: %s", o->portal_arg, err);
		return rc;
	}
	for (int i = 0; i < d->ntargets; i++) {
		struct ax_portal p = o->portal;
		int x;
		if (!ax_iscsi_name_ok(d->targets[i].name) ||
		    (d->targets[i].naddrs && ax_portal_parse(d->targets[i].addrs[0], &p) < 0)) {
			ax_err("skipping a target with an invalid name or address");
			continue;
		}
		x = list_target(o, d->targets[i].name, &p);
		if (x)
			rc = x;
	}
	if (d->ntargets == 0) {
		ax_err("no targets at %s", o->portal_arg);
		rc = AX_ERR_NO_OBJS;
	}
	ix_discovery_free(d);
	return rc;
}

static int write_all_fd(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Fill up to n bytes; returns the count (short only at end of input) or -errno. */
static ssize_t read_full(int fd, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int cmd_read(struct ax_opts *o, struct ax_dev *dev, uint32_t bs, uint8_t *buf)
{
	uint64_t lba = o->lba, left = o->count;
	int fd = 1, rc = AX_OK;

	if (!o->have_lba || !o->have_count) {
		ax_err("read needs --lba LBA --count BLOCKS");
		return AX_ERR_INVAL;
	}
	if (o->file && strcmp(o->file, "-") != 0) {
		fd = open(o->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			ax_err("%s: %s", o->file, strerror(errno));
			return AX_ERR;
		}
	}
	while (left && rc == AX_OK) {
		uint32_t nb = left > AX_IO_MAX / bs ? AX_IO_MAX / bs : (uint32_t)left;
		uint8_t cdb[16], n = ix_cdb_read16(cdb, lba, nb, false);
		struct ix_scsi_cmd cmd;
		char what[64];

		ix_scsi_cmd_init(&cmd, o->lun, cdb, n, IX_DIR_READ, buf, nb * bs, NULL, NULL);
		snprintf(what, sizeof(what), "READ(16) at LBA %llu", (unsigned long long)lba);
		rc = ax_dev_check(dev, &cmd, what);
		if (rc) {
			fail(dev, rc);
			break;
		}
		if (cmd.underflow && cmd.residual) {
			ax_err("%s: %u bytes missing from the answer", what, cmd.residual);
			rc = AX_ERR;
			break;
		}
		if (write_all_fd(fd, buf, (size_t)nb * bs) < 0) {
			ax_err("writing %s: %s", o->file ? o->file : "standard output", strerror(errno));
			rc = AX_ERR;
		}
		lba += nb;
		left -= nb;
	}
	if (fd != 1 && close(fd) < 0 && rc == AX_OK) {
		ax_err("%s: %s", o->file, strerror(errno));
		rc = AX_ERR;
	}
	if (rc == AX_OK)
		fprintf(stderr, "ixadm: read %llu blocks of %u bytes from LBA %llu of LUN %u\n",
			(unsigned long long)o->count, bs, (unsigned long long)o->lba, o->lun);
	return rc;
}

static int cmd_write(struct ax_opts *o, struct ax_dev *dev, uint32_t bs, uint8_t *buf)
{
	uint64_t lba = o->lba, done = 0;
	struct stat st;
	int fd = 0, rc = AX_OK;

	if (!o->have_lba) {
		ax_err("write needs --lba LBA");
		return AX_ERR_INVAL;
	}
	if (o->file && strcmp(o->file, "-") != 0) {
		fd = open(o->file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			ax_err("%s: %s", o->file, strerror(errno));
			return AX_ERR;
		}
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		uint64_t want = o->have_count ? o->count * bs : (uint64_t)st.st_size;
		if (want % bs || (uint64_t)st.st_size < want) {
			ax_err("%s has %lld bytes: %s", o->file ? o->file : "the input",
			       (long long)st.st_size,
			       want % bs ? "not a whole number of blocks" : "fewer than --count blocks");
			if (fd)
				close(fd);
			return AX_ERR_INVAL;
		}
	}
	for (;;) {
		uint64_t left = o->have_count ? o->count - done : UINT64_MAX;
		size_t want = left > AX_IO_MAX / bs ? AX_IO_MAX : (size_t)left * bs;
		ssize_t got;
		uint32_t nb;

		if (!left)
			break;
		got = read_full(fd, buf, want);
		if (got < 0) {
			ax_err("reading the input: %s", strerror((int)-got));
			rc = AX_ERR;
			break;
		}
		if (got == 0 && !o->have_count)
			break;
		if (got % bs || (o->have_count && (size_t)got < want)) {
			ax_err("the input ends inside a block or before --count blocks (%llu blocks "
			       "written)", (unsigned long long)done);
			rc = AX_ERR_INVAL;
			break;
		}
		nb = (uint32_t)((size_t)got / bs);
		uint8_t cdb[16], n = ix_cdb_write16(cdb, lba, nb, o->fua);
		struct ix_scsi_cmd cmd;
		char what[64];
		ix_scsi_cmd_init(&cmd, o->lun, cdb, n, IX_DIR_WRITE, buf, nb * bs, NULL, NULL);
		snprintf(what, sizeof(what), "WRITE(16) at LBA %llu", (unsigned long long)lba);
		rc = ax_dev_check(dev, &cmd, what);
		if (rc) {
			fail(dev, rc);
			break;
		}
		lba += nb;
		done += nb;
	}
	if (fd)
		close(fd);
	if (rc == AX_OK)
		fprintf(stderr, "ixadm: wrote %llu blocks of %u bytes at LBA %llu of LUN %u\n",
			(unsigned long long)done, bs, (unsigned long long)o->lba, o->lun);
	return rc;
}

static int cmd_simple(struct ax_opts *o, struct ax_dev *dev, const char *c)
{
	uint8_t cdb[16], n;
	struct ix_scsi_cmd cmd;
	int rc;

	if (strcmp(c, "tur") == 0)
		n = ix_cdb_test_unit_ready(cdb);
	else
		n = ix_cdb_sync_cache16(cdb, 0, 0);
	ix_scsi_cmd_init(&cmd, o->lun, cdb, n, IX_DIR_NONE, NULL, 0, NULL, NULL);
	rc = ax_dev_check(dev, &cmd, strcmp(c, "tur") == 0 ? "TEST UNIT READY"
							  : "SYNCHRONIZE CACHE(16)");
	if (rc)
		return fail(dev, rc);
	printf("LUN %u: %s: GOOD\n", o->lun, c);
	return AX_OK;
}

int ax_mode_io(struct ax_opts *o)
{
	static const char *const cmds[] = {"list", "inquiry", "readcap", "read", "write", "tur",
					   "sync", NULL};
	const char *c = o->nargs ? o->args[0] : NULL;
	struct ax_dev dev;
	uint64_t blocks;
	uint32_t bs;
	uint8_t *buf = NULL;
	int rc;
	bool known = false;

	for (int i = 0; c && cmds[i]; i++)
		known |= strcmp(c, cmds[i]) == 0;
	if (!known || o->nargs != 1) {
		ax_err("-m io needs one command: list, inquiry, readcap, read, write, tur, sync");
		return AX_ERR_INVAL;
	}
	if (!o->have_portal || (!o->target && strcmp(c, "list") != 0)) {
		ax_err("-m io %s needs -p IP[:PORT]%s", c, strcmp(c, "list") ? " and -T IQN" : "");
		return AX_ERR_INVAL;
	}
	if (strcmp(c, "list") == 0)
		return cmd_list(o);
	rc = ax_dev_open(o, o->target, &o->portal, o->direct, false, &dev);
	if (rc) {
		fail(&dev, rc);
		ax_dev_close(&dev);
		return rc;
	}
	if (strcmp(c, "inquiry") == 0) {
		rc = print_lun(&dev, o->lun, "");
	} else if (strcmp(c, "tur") == 0 || strcmp(c, "sync") == 0) {
		rc = cmd_simple(o, &dev, c);
	} else if ((rc = ax_dev_readcap(&dev, o->lun, &blocks, &bs)) != 0) {
		fail(&dev, rc);
	} else if (strcmp(c, "readcap") == 0) {
		printf("LUN %u: %llu blocks of %u bytes (%.2f MiB)\n", o->lun,
		       (unsigned long long)blocks, bs, (double)blocks * bs / 1048576.0);
	} else if (bs > AX_IO_MAX || !(buf = malloc(AX_IO_MAX))) {
		ax_err("cannot buffer blocks of %u bytes", bs);
		rc = AX_ERR_NOMEM;
	} else {
		rc = strcmp(c, "read") == 0 ? cmd_read(o, &dev, bs, buf) : cmd_write(o, &dev, bs, buf);
	}
	free(buf);
	ax_dev_close(&dev);
	return rc;
}
