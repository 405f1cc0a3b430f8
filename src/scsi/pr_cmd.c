/* PERSISTENT RESERVE IN / OUT (SPC-4 6.15, 6.16) on a logical unit: CDB and parameter list
 * checks, the state change under lu->lock (applied to a copy, saved when APTPL is active, then
 * swapped in), unit attentions to the nexuses concerned, the per-nexus view the data path reads
 * without a lock (itl->pr), and the rules for RESERVE/RELEASE(6)/(10) next to persistent
 * reservations. The state machine itself is pr.c; the file format pr_file.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scsi/scsi_int.h"
#include "util/log.h"

/* ---- LU life ---- */

int scsi_pr_lu_init(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen)
{
	struct stat sb;
	int rc;

	pr_state_init(&lu->pr);
	atomic_init(&lu->pr_type, PR_TYPE_NONE);
	if (!cfg->state_dir || cfg->pr_store != SCSI_PR_STORE_FILE)
		return 0; /* a shared store loads its state once the device is open */
	if (stat(cfg->state_dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		rc = stat(cfg->state_dir, &sb) < 0 ? -errno : -ENOTDIR;
		snprintf(err, errlen, "state_dir %s: %s", cfg->state_dir, strerror(-rc));
		return rc;
	}
	if (access(cfg->state_dir, W_OK | X_OK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "state_dir %s: %s", cfg->state_dir, strerror(-rc));
		return rc;
	}
	if (asprintf(&lu->pr_path, "%s/%s.lun%u.pr", cfg->state_dir,
		     cfg->target_name ? cfg->target_name : "target", cfg->lun) < 0) {
		lu->pr_path = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = pr_state_load(&lu->pr, lu->pr_path, err, errlen);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		size_t n = strlen(err);

		if (rc == -EINVAL && n < errlen)
			snprintf(err + n, errlen - n,
				 " (move the file away to start the LU without the persistent "
				 "reservations it saved)");
		free(lu->pr_path);
		lu->pr_path = NULL;
		return rc;
	}
	/* A file written with APTPL on is all that is ever kept; treat any other as damaged. */
	if (!lu->pr.aptpl) {
		snprintf(err, errlen, "%s: saved without APTPL", lu->pr_path);
		pr_state_clear(&lu->pr);
		free(lu->pr_path);
		lu->pr_path = NULL;
		return -EINVAL;
	}
	atomic_store(&lu->pr_type, lu->pr.type);
	lu->pr_persistent = true;
	log_info("scsi",
		 "LU %s LUN %u: restored %zu persistent reservation registration(s) "
		 "from %s",
		 cfg->target_name ? cfg->target_name : "", cfg->lun, lu->pr.nregs, lu->pr_path);
	return 0;
}

/* ENOENT above is no file yet: APTPL still works. */
int scsi_pr_lu_attach(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg, char *err, size_t errlen)
{
	if (cfg->pr_store == SCSI_PR_STORE_FILE) {
		lu->pr_persistent = lu->pr_path != NULL;
		return 0;
	}
	if (lu->ha && lu->ha->ops->pr_open) {
		pthread_mutex_lock(&lu->lock);
		lu->pr_unread = true; /* until the store's first state (scsi_pr_adopt_locked) */
		pthread_mutex_unlock(&lu->lock);
		return lu->ha->ops->pr_open(lu, cfg, err, errlen);
	}
	snprintf(err, errlen, "a shared pr_store needs the high-availability layer");
	return -EINVAL;
}

void scsi_pr_lu_free(struct scsi_lu *lu)
{
	if (lu->pr_ops)
		lu->pr_ops->free(lu);
	lu->pr_ops = NULL;
	pr_state_clear(&lu->pr);
	free(lu->pr_path);
	lu->pr_path = NULL;
}

/* ---- per-nexus view ---- */

static struct pr_nexus_id nexus_id(const struct scsi_nexus *nx)
{
	return (struct pr_nexus_id){nx->initiator_port, nx->target_port};
}

void scsi_pr_itl_attach_locked(struct scsi_lu *lu, struct scsi_itl *itl)
{
	struct pr_nexus_id who = nexus_id(itl->nx);

	atomic_store_explicit(&itl->pr, pr_nexus_flags(&lu->pr, &who), memory_order_release);
}

/* After a change of lu->pr: every nexus's view, and the UAs the change establishes. */
static void publish_locked(struct scsi_lu *lu, const struct pr_effects *fx)
{
	struct list_head *pos;

	list_for_each(pos, &lu->itls)
	{
		struct scsi_itl *itl = list_entry(pos, struct scsi_itl, lu_link);

		scsi_pr_itl_attach_locked(lu, itl);
		for (size_t i = 0; i < fx->nua; i++)
			if (strcasecmp(fx->ua[i].iport, itl->nx->initiator_port) == 0 &&
			    strcasecmp(fx->ua[i].tport, itl->nx->target_port) == 0)
				scsi_ua_add_locked(itl, fx->ua[i].asc, fx->ua[i].ascq);
	}
	atomic_store_explicit(&lu->pr_type, lu->pr.type, memory_order_release);
}

void scsi_pr_adopt_locked(struct scsi_lu *lu, struct pr_state *next, const struct pr_effects *fx)
{
	struct pr_state tmp = lu->pr;

	lu->pr = *next;
	*next = tmp;
	lu->pr_unread = false;
	publish_locked(lu, fx);
}

bool scsi_pr_conflict(struct scsi_cmd *cmd, struct scsi_lu *lu, bool read_class)
{
	struct scsi_itl *itl = scsi_priv(cmd)->itl;
	uint8_t f = itl ? atomic_load_explicit(&itl->pr, memory_order_acquire)
			: atomic_load_explicit(&lu->pr_type, memory_order_acquire);

	return (f & PR_F_TYPE) && pr_conflict(f, read_class);
}

bool scsi_pr_spc2(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	bool present, holder = false;

	pthread_mutex_lock(&lu->lock);
	present = lu->pr.nregs > 0 || lu->pr.type != PR_TYPE_NONE;
	if (present && cmd->nexus) {
		struct pr_nexus_id who = nexus_id(cmd->nexus);

		holder = pr_is_holder(&lu->pr, &who);
	}
	pthread_mutex_unlock(&lu->lock);
	if (!present)
		return false;
	/* A persistent reservation holder gets GOOD and nothing happens; anyone else conflicts
	 * while registrations exist. */
	if (!holder)
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
	return true;
}

/* ---- PERSISTENT RESERVE IN ---- */

int scsi_spc_pr_in(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint32_t alloc = get_be16(cmd->cdb + 7), cap = alloc, n = 0;

	cmd->xfer_wanted = alloc;
	if (cap > cmd->data_in_max)
		cap = cmd->data_in_max;
	if (cap > cmd->buf_len)
		cap = cmd->buf_len;
	pthread_mutex_lock(&lu->lock);
	if (lu->pr_unread) {
		/* a shared store not read yet (the image not open): no state to report; as the
		 * LU's other commands while it is offline, LOGICAL UNIT NOT READY */
		pthread_mutex_unlock(&lu->lock);
		scsi_fail_errno(cmd, BS_ERR_NOT_READY, false);
		return SCSI_DONE;
	}
	switch (cmd->cdb[1] & 0x1f) {
	case PR_IN_READ_KEYS:
		n = pr_in_read_keys(&lu->pr, cmd->buf, cap);
		break;
	case PR_IN_READ_RESERVATION:
		n = pr_in_read_reservation(&lu->pr, cmd->buf, cap);
		break;
	case PR_IN_REPORT_CAPABILITIES:
		n = pr_in_report_caps(&lu->pr, lu->pr_persistent, cmd->buf, cap);
		break;
	case PR_IN_READ_FULL_STATUS:
		n = pr_in_read_full_status(&lu->pr, cmd->buf, cap);
		break;
	}
	pthread_mutex_unlock(&lu->lock);
	cmd->data_in_len = n < cap ? n : cap;
	return SCSI_DONE;
}

/* ---- PERSISTENT RESERVE OUT ---- */

static bool register_family(uint8_t sa)
{
	return sa == PR_OUT_REGISTER || sa == PR_OUT_REGISTER_IGNORE || sa == PR_OUT_REGISTER_MOVE;
}

/* REGISTER AND MOVE's destination target port (SPC-4 6.16.4): the RELATIVE TARGET PORT
 * IDENTIFIER of the nexus the command came through, or of a port the target's ALUA groups list
 * (this gateway's portals and other gateways' relative_ports): its name is this target's name
 * with that TPGT, as that gateway's nexuses name it. false for a port nobody configured. */
static bool move_target_port(const struct scsi_cmd *cmd, uint16_t rtpi, char *tport)
{
	const char *own = cmd->nexus->target_port, *sep = strstr(own, ",t,0x");
	uint16_t group;

	if (rtpi == cmd->nexus->rtpi) {
		snprintf(tport, PR_MAX_PORT_LEN, "%s", own);
		return true;
	}
	if (rtpi == 0 || !sep || !scsi_alua_port_group(cmd->map, rtpi, &group))
		return false;
	return snprintf(tport, PR_MAX_PORT_LEN, "%.*s,t,0x%04x", (int)(sep - own), own, rtpi) <
	       PR_MAX_PORT_LEN;
}

/* Decode and check the parameter list into req; false with sense set. */
static bool parse_params(struct scsi_cmd *cmd, struct scsi_lu *lu, uint32_t len, struct pr_out *req,
			 char *move_port, char *move_tport)
{
	const uint8_t *d = cmd->buf;

	req->key = get_be64(d);
	req->sakey = get_be64(d + 8);
	if (req->sa != PR_OUT_REGISTER_MOVE) {
		if (d[20] & 0x08) { /* SPEC_I_PT: not supported (SIP_C = 0) */
			scsi_fail_param(cmd, 20, 3);
			return false;
		}
		if ((d[20] & 0x04) && register_family(req->sa)) { /* ALL_TG_PT (ATP_C = 0) */
			scsi_fail_param(cmd, 20, 2);
			return false;
		}
		req->aptpl = d[20] & 0x01;
	} else {
		uint32_t tlen = get_be32(d + 20);

		req->unreg = d[17] & 0x02;
		req->aptpl = d[17] & 0x01;
		/* an unknown RELATIVE TARGET PORT IDENTIFIER */
		if (!move_target_port(cmd, get_be16(d + 18), move_tport)) {
			scsi_fail_param(cmd, 18, -1);
			return false;
		}
		if (tlen > len - 24 || !pr_parse_transport_id(d + 24, tlen, move_port)) {
			scsi_fail_param(cmd, tlen > len - 24 ? 20 : 24, -1);
			return false;
		}
		req->move.iport = move_port;
		req->move.tport = move_tport;
	}
	if (req->aptpl && register_family(req->sa) && !lu->pr_persistent) { /* PTPL_C = 0 */
		scsi_fail_param(cmd, req->sa == PR_OUT_REGISTER_MOVE ? 17 : 20, 0);
		return false;
	}
	return true;
}

/* Apply req to a copy of the state, make it durable if APTPL says so, then publish it. fx:
 * what changed (the caller clears it). */
static enum pr_result apply(struct scsi_lu *lu, const struct scsi_nexus *nx,
			    const struct pr_out *req, struct pr_effects *out)
{
	struct pr_nexus_id who = nexus_id(nx);
	struct pr_state next;
	struct pr_effects fx;
	enum pr_result rc;

	pr_state_init(&next);
	pthread_mutex_lock(&lu->lock);
	if (pr_state_copy(&next, &lu->pr) < 0) {
		pthread_mutex_unlock(&lu->lock);
		return PR_NOMEM;
	}
	rc = pr_out_apply(&next, &who, req, &fx);
	if (rc == PR_OK && fx.changed && (next.aptpl || lu->pr.aptpl)) {
		char err[512] = "";
		int r = next.aptpl ? pr_state_save(&next, lu->pr_path, err, sizeof(err))
				   : pr_state_remove(lu->pr_path, err, sizeof(err));

		if (r < 0) {
			log_err("scsi", "LUN %u: cannot save persistent reservations: %s", lu->lun,
				err);
			rc = PR_NOMEM;
		}
	}
	if (rc == PR_OK && fx.changed)
		scsi_pr_adopt_locked(lu, &next, &fx);
	pthread_mutex_unlock(&lu->lock);
	pr_state_clear(&next);
	if (rc == PR_OK)
		*out = fx;
	else
		pr_effects_clear(&fx);
	return rc;
}

/* The aborts of a PREEMPT AND ABORT are over (on the command's loop). */
static void aborted(void *arg, bool all)
{
	struct scsi_cmd *cmd = arg;

	if (!all) /* the change is made; some preempted tasks may still run */
		scsi_pr_set_result(cmd, PR_NOMEM);
	scsi_cmd_finish(cmd);
}

/* PERSISTENT RESERVE OUT on the file store. A PREEMPT AND ABORT completes once the preempted
 * nexuses' tasks are gone from every thread (SPC-4 5.12.11.4.5): the ones in the backend have
 * completed, so none of them changes the medium after the command's GOOD. */
static int out_file(struct scsi_cmd *cmd, struct scsi_lu *lu, const struct pr_out *req)
{
	struct pr_effects fx = {0};
	enum pr_result rc = apply(lu, cmd->nexus, req, &fx);
	int r = SCSI_DONE;

	if (rc == PR_OK && fx.nabort) {
		if (cmd->thread && scsi_abort_start(lu, fx.abort, fx.nabort, cmd->thread->loop,
						    aborted, cmd) == 0) {
			r = SCSI_ASYNC;
		} else {
			log_err("scsi",
				"LUN %u: PREEMPT AND ABORT: the preempted nexuses' tasks cannot be "
				"aborted (out of memory)",
				lu->lun);
			rc = PR_NOMEM;
		}
	}
	pr_effects_clear(&fx);
	if (r == SCSI_DONE)
		scsi_pr_set_result(cmd, rc);
	return r;
}

void scsi_pr_set_result(struct scsi_cmd *cmd, enum pr_result rc)
{
	switch (rc) {
	case PR_OK:
		break;
	case PR_CONFLICT:
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
		break;
	case PR_BAD_PARAM:
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x00);
		break;
	case PR_BAD_RELEASE:
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x04);
		break;
	case PR_NO_RESOURCES:
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x55, 0x04);
		break;
	case PR_NOMEM:
		/* INTERNAL TARGET FAILURE: nothing changed (out of memory, or the state could not
		 * be saved or shared). */
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x44, 0x00);
		break;
	}
}

int scsi_spc_pr_out(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const uint8_t *cdb = cmd->cdb;
	uint32_t len = get_be32(cdb + 5);
	struct pr_out req = {.sa = cdb[1] & 0x1f, .type = cdb[2] & 0x0f};
	char move_port[PR_MAX_PORT_LEN], move_tport[PR_MAX_PORT_LEN];

	cmd->xfer_wanted = len;
	if (req.sa == PR_OUT_RESERVE || req.sa == PR_OUT_RELEASE || req.sa == PR_OUT_PREEMPT ||
	    req.sa == PR_OUT_PREEMPT_ABORT) {
		if (cdb[2] >> 4) { /* SCOPE: only LU_SCOPE */
			scsi_fail_cdb(cmd, 2, 7);
			return SCSI_DONE;
		}
		if (!pr_type_valid(req.type)) {
			scsi_fail_cdb(cmd, 2, 3);
			return SCSI_DONE;
		}
	}
	if (req.sa == PR_OUT_REGISTER_MOVE ? len < 24 : len != 24) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00); /* PARAMETER LIST LENGTH */
		return SCSI_DONE;
	}
	if (cmd->data_out_len < len || cmd->buf_len < len) {
		scsi_fail_cdb(cmd, 5, -1);
		return SCSI_DONE;
	}
	if (!cmd->nexus) { /* no I_T nexus to register: nothing this command could do */
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
		return SCSI_DONE;
	}
	if (!parse_params(cmd, lu, len, &req, move_port, move_tport))
		return SCSI_DONE;
	if (lu->pr_ops)
		return lu->pr_ops->out(lu, cmd, &req);
	return out_file(cmd, lu, &req);
}
