/* A SCSI command channel for the small commands and attach: through the target's session
 * daemon (the "scsi" control request) when one runs, else a session of our own that lives for
 * this one ixadm invocation. Both bound every command: the daemon by its own deadlines, the
 * direct path here (deadline, ABORT TASK, then dropping the session). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ix/scsi.h"
#include "ix/sync.h"
#include "ixadm.h"

#define UA_RETRIES 3

static const struct {
	uint8_t asc, ascq;
	const char *text;
} asc_names[] = {
	{0x04, 0x00, "LOGICAL UNIT NOT READY"},
	{0x20, 0x00, "INVALID COMMAND OPERATION CODE"},
	{0x21, 0x00, "LOGICAL BLOCK ADDRESS OUT OF RANGE"},
	{0x24, 0x00, "INVALID FIELD IN CDB"},
	{0x25, 0x00, "LOGICAL UNIT NOT SUPPORTED"},
	{0x27, 0x00, "WRITE PROTECTED"},
	{0x29, 0x00, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED"},
	{0x2a, 0x09, "CAPACITY DATA HAS CHANGED"},
	{0x3a, 0x00, "MEDIUM NOT PRESENT"},
	{0x3f, 0x0e, "REPORTED LUNS DATA HAS CHANGED"},
};

void ax_status_str(const struct ix_scsi_cmd *cmd, char *buf, size_t len)
{
	uint8_t key, asc, ascq;
	const char *what = NULL;

	if (cmd->status == 0 || ix_parse_sense(cmd->sense, cmd->sense_len, &key, &asc, &ascq) < 0) {
		snprintf(buf, len, "%s", ix_scsi_status_str(cmd->status));
		return;
	}
	for (size_t i = 0; i < sizeof(asc_names) / sizeof(asc_names[0]); i++)
		if (asc_names[i].asc == asc && asc_names[i].ascq == ascq)
			what = asc_names[i].text;
	snprintf(buf, len, "%s: %s %02x/%02x%s%s%s", ix_scsi_status_str(cmd->status),
		 ix_sense_key_str(key), asc, ascq, what ? " (" : "", what ? what : "",
		 what ? ")" : "");
}

static bool unit_attention(const struct ix_scsi_cmd *cmd)
{
	uint8_t key, asc, ascq;

	return cmd->status == 2 &&
	       ix_parse_sense(cmd->sense, cmd->sense_len, &key, &asc, &ascq) == 0 && key == 6;
}

/* ---------------------------------------------------------------- through a daemon */

static int daemon_scsi(struct ax_dev *dev, struct ix_scsi_cmd *cmd)
{
	char req[128], cdb[33];
	struct ctl_reply rep;
	unsigned st, resid;
	char flag, sense[200];
	int r;

	ax_hex(cmd->cdb, cmd->cdb_len, cdb);
	snprintf(req, sizeof(req), "scsi %u %c %u 0 %s", cmd->lun,
		 cmd->dir == IX_DIR_READ ? 'r' : cmd->dir == IX_DIR_WRITE ? 'w' : 'n',
		 cmd->dir == IX_DIR_NONE ? 0 : cmd->len, cdb);
	r = ctl_call(dev->fd, req, cmd->dir == IX_DIR_WRITE ? cmd->buf : NULL,
		     cmd->dir == IX_DIR_WRITE ? cmd->len : 0, &rep, cmd->buf,
		     cmd->dir == IX_DIR_READ ? cmd->len : 0, dev->timeout_ms);
	if (r < 0) {
		snprintf(dev->err, sizeof(dev->err), "session daemon %ld: %s", dev->sid,
			 strerror(-r));
		dev->ecode = r == -ETIMEDOUT ? AX_ERR_TIMEOUT : AX_ERR_INTERNAL;
		close(dev->fd); /* the stream is out of step now */
		dev->fd = -1;
		return -1;
	}
	if (!rep.ok) {
		snprintf(dev->err, sizeof(dev->err), "%.500s", rep.rest);
		dev->ecode = rep.code ? rep.code : AX_ERR;
		return -1;
	}
	if (sscanf(rep.rest, "%u %u %c %199s", &st, &resid, &flag, sense) != 4) {
		snprintf(dev->err, sizeof(dev->err), "malformed answer from the session daemon");
		dev->ecode = AX_ERR_INTERNAL;
		return -1;
	}
	cmd->status = (uint8_t)st;
	cmd->residual = resid;
	cmd->underflow = flag == 'u';
	cmd->overflow = flag == 'o';
	cmd->sense_len = 0;
	if (strcmp(sense, "-") != 0) {
		int n = ax_unhex(sense, cmd->sense, sizeof(cmd->sense));
		cmd->sense_len = n > 0 ? (uint8_t)n : 0;
	}
	return 0;
}

/* ---------------------------------------------------------------- direct */

struct waitflag {
	bool done;
};

static void flag_done(struct ix_scsi_cmd *cmd)
{
	((struct waitflag *)cmd->arg)->done = true;
}

static void tmf_ignored(struct ix_session *s, int response, void *arg)
{
	(void)s;
	(void)response;
	(void)arg;
}

static int direct_scsi(struct ax_dev *dev, struct ix_scsi_cmd *cmd)
{
	struct waitflag w = {false};
	uint64_t deadline;
	bool aborted = false;
	int r;

	if (!dev->s) {
		snprintf(dev->err, sizeof(dev->err), "the session was dropped after a timeout");
		dev->ecode = AX_ERR_TRANS;
		return -1;
	}
	cmd->done = flag_done;
	cmd->arg = &w;
	r = ix_scsi_submit(dev->s, cmd);
	if (r < 0) {
		snprintf(dev->err, sizeof(dev->err), "%s (%s)", strerror(-r),
			 ix_session_error(dev->s));
		dev->ecode = ax_errno_exit(r);
		return -1;
	}
	deadline = ax_now_ms() + dev->cfg.cmd_timeout_ms;
	while (!w.done) {
		uint64_t now = ax_now_ms();
		if (now >= deadline) {
			if (!aborted) {
				aborted = true;
				ix_task_abort(dev->s, cmd, tmf_ignored, NULL);
				deadline = now + dev->cfg.abort_timeout_ms;
				continue;
			}
			ix_session_free(dev->s); /* completes the command with -ECANCELED */
			dev->s = NULL;
			break;
		}
		r = ix_ctx_service(dev->ctx, (int)(deadline - now));
		if (r < 0 && r != -EINTR)
			break;
	}
	if (!w.done || cmd->err) {
		int e = aborted ? -ETIMEDOUT : w.done ? cmd->err : -EIO;
		snprintf(dev->err, sizeof(dev->err), "%s%s%s%s", strerror(-e),
			 aborted ? " (no answer within the command timeout: aborted)" : "",
			 dev->s ? ": " : "", dev->s ? ix_session_error(dev->s) : "");
		dev->ecode = ax_errno_exit(e);
		return -1;
	}
	return 0;
}

int ax_dev_scsi(struct ax_dev *dev, struct ix_scsi_cmd *cmd)
{
	struct ix_scsi_cmd orig = *cmd;

	for (int i = 0;; i++) {
		int r = dev->fd >= 0 ? daemon_scsi(dev, cmd) : direct_scsi(dev, cmd);
		if (r < 0 || !unit_attention(cmd) || i == UA_RETRIES)
			return r;
		*cmd = orig; /* a unit attention (reset, capacity change...) is reported once */
	}
}

int ax_dev_check(struct ax_dev *dev, struct ix_scsi_cmd *cmd, const char *what)
{
	char st[200];

	if (ax_dev_scsi(dev, cmd) < 0) {
		char tmp[sizeof(dev->err)];
		snprintf(tmp, sizeof(tmp), "%s", dev->err);
		if (snprintf(dev->err, sizeof(dev->err), "%s: %s", what, tmp) >= (int)sizeof(dev->err))
			dev->err[sizeof(dev->err) - 1] = 0;
		return dev->ecode;
	}
	if (cmd->status != 0) {
		ax_status_str(cmd, st, sizeof(st));
		snprintf(dev->err, sizeof(dev->err), "%s: %s", what, st);
		dev->ecode = AX_ERR;
		return AX_ERR;
	}
	return AX_OK;
}

int ax_dev_readcap(struct ax_dev *dev, uint32_t lun, uint64_t *blocks, uint32_t *bs)
{
	uint8_t buf[32], cdb[16], n = ix_cdb_read_capacity16(cdb, sizeof(buf));
	struct ix_scsi_cmd cmd;
	int rc;

	ix_scsi_cmd_init(&cmd, lun, cdb, n, IX_DIR_READ, buf, sizeof(buf), NULL, NULL);
	rc = ax_dev_check(dev, &cmd, "READ CAPACITY(16)");
	if (rc)
		return rc;
	if (ix_parse_read_capacity16(buf, sizeof(buf) - (cmd.underflow ? cmd.residual : 0),
				     blocks, bs) < 0) {
		snprintf(dev->err, sizeof(dev->err), "READ CAPACITY(16): malformed answer");
		return dev->ecode = AX_ERR;
	}
	return AX_OK;
}

int ax_dev_inquiry(struct ax_dev *dev, uint32_t lun, struct ix_inquiry *inq)
{
	uint8_t buf[96], cdb[16], n = ix_cdb_inquiry(cdb, false, 0, sizeof(buf));
	struct ix_scsi_cmd cmd;
	int rc;

	ix_scsi_cmd_init(&cmd, lun, cdb, n, IX_DIR_READ, buf, sizeof(buf), NULL, NULL);
	rc = ax_dev_check(dev, &cmd, "INQUIRY");
	if (rc)
		return rc;
	if (ix_parse_inquiry(buf, sizeof(buf) - (cmd.underflow ? cmd.residual : 0), inq) < 0) {
		snprintf(dev->err, sizeof(dev->err), "INQUIRY: malformed answer");
		return dev->ecode = AX_ERR;
	}
	return AX_OK;
}

/* ---------------------------------------------------------------- open / close */

static int open_direct(struct ax_opts *o, struct ax_dev *dev)
{
	char initiator[AX_NAME_MAX];
	int r, e = 0;

	if (dev->rec.initiatorname[0])
		snprintf(initiator, sizeof(initiator), "%s", dev->rec.initiatorname);
	else if ((r = ax_initiator_name(o->db, true, initiator, sizeof(initiator))) < 0) {
		snprintf(dev->err, sizeof(dev->err), "no initiator name: %s", strerror(-r));
		return dev->ecode = AX_ERR_IDBM;
	}
	if (node_to_cfg(&dev->rec, initiator, &dev->cfg, dev->err, sizeof(dev->err)) < 0)
		return dev->ecode = AX_ERR_INVAL;
	dev->ctx = ix_ctx_new();
	if (!dev->ctx)
		return dev->ecode = AX_ERR_NOMEM;
	dev->s = ix_session_new(dev->ctx, &dev->cfg.o, &e);
	if (!dev->s) {
		snprintf(dev->err, sizeof(dev->err), "cannot create the session: %s", strerror(-e));
		return dev->ecode = ax_errno_exit(e);
	}
	r = ix_sync_login(dev->s);
	if (r < 0) {
		snprintf(dev->err, sizeof(dev->err), "login to %s at %s failed: %s (%s)",
			 dev->rec.name, dev->cfg.portal, ix_session_error(dev->s), strerror(-r));
		return dev->ecode = ax_errno_exit(r);
	}
	return AX_OK;
}

int ax_dev_open(struct ax_opts *o, const char *target, const struct ax_portal *p, bool direct,
		bool daemon_only, struct ax_dev *dev)
{
	struct node_list l;
	struct ctl_paths cp;
	struct ctl_info inf;

	memset(dev, 0, sizeof(*dev));
	dev->fd = -1;
	dev->timeout_ms = o->timeout_s * 1000;
	node_defaults(&dev->rec);
	snprintf(dev->rec.name, sizeof(dev->rec.name), "%s", target);
	snprintf(dev->rec.address, sizeof(dev->rec.address), "%s", p->host);
	dev->rec.port = p->port;
	dev->rec.tpgt = p->tpgt;
	if (node_list_load(o->db, &l) == 0) {
		for (int i = 0; i < l.n; i++)
			if (node_match(&l.recs[i], target, p)) {
				dev->rec = l.recs[i];
				break;
			}
		node_list_free(&l);
	}
	if (!direct && ctl_paths(o->db, target, p, &cp) == 0) {
		dev->fd = ctl_connect(cp.sock, 2000);
		if (dev->fd >= 0 && ctl_info(dev->fd, &inf, 5000) == 0) {
			dev->sid = inf.pid;
			return AX_OK;
		}
		if (dev->fd >= 0)
			close(dev->fd);
		dev->fd = -1;
	}
	if (daemon_only) {
		snprintf(dev->err, sizeof(dev->err), "no session to %s", target);
		return dev->ecode = AX_ERR_SESS_NOT_FOUND;
	}
	return open_direct(o, dev);
}

void ax_dev_close(struct ax_dev *dev)
{
	if (dev->fd >= 0)
		close(dev->fd);
	dev->fd = -1;
	if (dev->s) {
		ix_sync_logout(dev->s); /* bounded by the login timeout */
		ix_session_free(dev->s);
	}
	dev->s = NULL;
	if (dev->ctx)
		ix_ctx_free(dev->ctx);
	dev->ctx = NULL;
	explicit_bzero(&dev->rec, sizeof(dev->rec));
}
