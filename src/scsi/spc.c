/* SPC-4 primary commands: INQUIRY (standard data and VPD pages), REPORT LUNS, TEST UNIT
 * READY, REQUEST SENSE, START STOP UNIT, PREVENT ALLOW MEDIUM REMOVAL (removable medium:
 * eject and load), RESERVE/RELEASE, REPORT SUPPORTED OPERATION CODES and REPORT SUPPORTED TASK
 * MANAGEMENT FUNCTIONS. */
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi_int.h"

static void put_ascii(uint8_t *dst, size_t width, const char *s)
{
	size_t n = strlen(s);

	memset(dst, ' ', width);
	memcpy(dst, s, n < width ? n : width);
}

/* ---- INQUIRY ---- */

static uint32_t inquiry_std(const struct scsi_lu *lu, const struct scsi_lun_map *map, uint8_t *d)
{
	static const uint16_t versions[] = {
	    0x00a0, /* SAM-5 */
	    0x0960, /* iSCSI */
	    0x0460, /* SPC-4 */
	    0x04c0, /* SBC-3 */
	};

	memset(d, 0, 96);
	if (!lu) {
		d[0] = 0x7f; /* PQ 011b: no LU at this LUN; PDT 0x1F unknown */
	} else {
		d[0] = 0x00;			 /* PQ 0, direct access block device */
		d[1] = lu->removable ? 0x80 : 0; /* RMB */
	}
	d[2] = 0x06;	    /* SPC-4 */
	d[3] = 0x10 | 0x02; /* HISUP, RESPONSE DATA FORMAT 2 */
	d[4] = 96 - 5;
	/* 3PC: EXTENDED COPY, POPULATE TOKEN / WRITE USING TOKEN; TPGS: ALUA (an absent LU has none) */
	d[5] = (uint8_t)(0x08 | scsi_alua_tpgs(lu ? map : NULL) << 4);
	d[7] = 0x02; /* CMDQUE */
	put_ascii(d + 8, 8, lu ? lu->vendor : "IX");
	put_ascii(d + 16, 16, lu ? lu->product : "ix-disk");
	put_ascii(d + 32, 4, lu ? lu->revision : "0001");
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		put_be16(d + 58 + 2 * i, versions[i]);
	return 96;
}

static uint32_t add_name_desc(uint8_t *d, uint8_t assoc_type, const char *name)
{
	size_t n = strlen(name) + 1; /* at least one NUL */

	n = (n + 3) & ~(size_t)3;
	if (n > 252)
		n = 252;
	d[0] = 0x53;	   /* PROTOCOL IDENTIFIER iSCSI, CODE SET UTF-8 */
	d[1] = assoc_type; /* PIV | ASSOCIATION | TYPE 8 (SCSI name string) */
	d[2] = 0;
	d[3] = (uint8_t)n;
	memset(d + 4, 0, n);
	memcpy(d + 4, name, strlen(name) < n - 1 ? strlen(name) : n - 1);
	return 4 + (uint32_t)n;
}

static uint32_t vpd_device_id(struct scsi_cmd *cmd, const struct scsi_lu *lu, uint8_t *d)
{
	uint32_t n = 4, l;
	uint16_t tpg;

	/* NAA IEEE Registered Extended, LU association. */
	d[n] = 0x01;
	d[n + 1] = 0x03;
	d[n + 3] = 16;
	memcpy(d + n + 4, lu->naa, 16);
	n += 20;
	/* T10 vendor ID designator: vendor (8, space padded) + serial. */
	l = 8 + (uint32_t)strlen(lu->serial);
	d[n] = 0x02;
	d[n + 1] = 0x01;
	d[n + 3] = (uint8_t)l;
	put_ascii(d + n + 4, 8, lu->vendor);
	memcpy(d + n + 12, lu->serial, strlen(lu->serial));
	n += 4 + l;
	if (cmd->nexus && cmd->nexus->target_port[0]) {
		/* Relative target port (the TPGT), target port association. */
		d[n] = 0x51;
		d[n + 1] = 0x80 | 0x10 | 0x04;
		d[n + 3] = 4;
		put_be32(d + n + 4, cmd->nexus->rtpi);
		n += 8;
		if (scsi_alua_port_group(cmd->map, cmd->nexus->rtpi, &tpg)) {
			/* Target port group, target port association. */
			d[n] = 0x51;
			d[n + 1] = 0x80 | 0x10 | 0x05;
			d[n + 3] = 4;
			put_be32(d + n + 4, tpg);
			n += 8;
		}
		n += add_name_desc(d + n, 0x80 | 0x10 | 0x08, cmd->nexus->target_port);
	}
	if (lu->target_name[0])
		n += add_name_desc(d + n, 0x80 | 0x20 | 0x08, lu->target_name);
	put_be16(d + 2, (uint16_t)(n - 4));
	return n;
}

static uint32_t vpd_block_limits(const struct scsi_lu *lu, uint8_t *d)
{
	uint32_t bs = lu->block_size, gran = lu->pblocks;

	put_be16(d + 2, 0x3c);
	d[4] = 0x00; /* WSNZ 0: WRITE SAME with zero blocks writes to the last block */
	d[5] = SCSI_MAX_CAW_BLOCKS;
	put_be16(d + 6, (uint16_t)gran); /* a physical block */
	put_be32(d + 8, SCSI_MAX_XFER_BYTES / bs);
	put_be32(d + 16, SCSI_MAX_XFER_BYTES / bs);
	if (lu->lbpme) {
		put_be32(d + 20, SCSI_MAX_UNMAP_BLOCKS);
		put_be32(d + 24, SCSI_MAX_UNMAP_DESC);
		put_be32(d + 28, lu->ugran ? lu->ugran : gran);
		put_be32(d + 32, 0x80000000u); /* UGAVALID, alignment 0 */
	}
	put_be64(d + 36, SCSI_MAX_WS_BLOCKS);
	/* WRITE ATOMIC (16): whole, aligned physical blocks; no atomic boundaries. */
	put_be32(d + 44, scsi_atomic_max_blocks(lu));
	put_be32(d + 48, gran);
	put_be32(d + 52, gran);
	return 64;
}

static uint32_t vpd_page(struct scsi_cmd *cmd, const struct scsi_lu *lu, uint8_t page, uint8_t *d)
{
	static const uint8_t pages[] = {0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2};
	size_t n;

	d[1] = page;
	switch (page) {
	case 0x00:
		memcpy(d + 4, pages, sizeof(pages));
		put_be16(d + 2, sizeof(pages));
		return 4 + sizeof(pages);
	case 0x80:
		n = strlen(lu->serial);
		memcpy(d + 4, lu->serial, n);
		put_be16(d + 2, (uint16_t)n);
		return 4 + (uint32_t)n;
	case 0x83:
		return vpd_device_id(cmd, lu, d);
	case 0x8f:
		return scsi_rod_vpd(lu, d);
	case 0xb0:
		return vpd_block_limits(lu, d);
	case 0xb1:
		put_be16(d + 2, 0x3c);
		put_be16(d + 4, 0x0001); /* non-rotating medium */
		/* WABEREQ 01b, WACEREQ 01b: reads after a BLOCK ERASE or CRYPTOGRAPHIC ERASE
		 * sanitize succeed (and return zeros). */
		d[7] = 0x40 | 0x10;
		return 64;
	case 0xb2:
		put_be16(d + 2, 4);
		/* THRESHOLD EXPONENT: the unit of the Logical Block Provisioning log page's
		 * resource counts; 0 (no thresholds) without that page */
		d[4] = scsi_thin_exponent(lu);
		if (lu->lbpme)
			d[5] = 0x80 | 0x40 | 0x20; /* LBPU, LBPWS, LBPWS10 */
		if (lu->lbprz)
			d[5] |= 0x04;		/* LBPRZ */
		d[6] = lu->lbpme ? 0x02 : 0x00; /* thin / full provisioning */
		/* THRESHOLD PERCENTAGE (SBC-4): the soft threshold, percent of the store in use
		 * (thin LUs only); DP 0: no provisioning group descriptor */
		if (d[4])
			d[7] = atomic_load(&lu->thin_thr);
		return 8;
	default:
		return 0;
	}
}

int scsi_spc_inquiry(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[1024];
	uint32_t alloc = get_be16(cmd->cdb + 3), n;

	memset(d, 0, sizeof(d));
	if (!(cmd->cdb[1] & 0x01)) {
		if (cmd->cdb[2]) {
			scsi_fail_cdb(cmd, 2, 7);
			return SCSI_DONE;
		}
		n = inquiry_std(lu, cmd->map, d);
	} else if (!lu) {
		d[0] = 0x7f;
		d[1] = cmd->cdb[2];
		n = 4;
	} else {
		n = vpd_page(cmd, lu, cmd->cdb[2], d);
		if (!n) {
			scsi_fail_cdb(cmd, 2, 7);
			return SCSI_DONE;
		}
	}
	scsi_put_data(cmd, d, n, alloc);
	return SCSI_DONE;
}

/* ---- REPORT LUNS ---- */

int scsi_spc_report_luns(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[8 + 8 * SCSI_MAX_LUNS];
	uint32_t alloc = get_be32(cmd->cdb + 6), n = 8;
	uint8_t sel = cmd->cdb[2];

	(void)lu;
	if (sel != 0x00 && sel != 0x01 && sel != 0x02) {
		scsi_fail_cdb(cmd, 2, 7);
		return SCSI_DONE;
	}
	if (alloc < 16) {
		scsi_fail_cdb(cmd, 6, -1);
		return SCSI_DONE;
	}
	memset(d, 0, sizeof(d));
	if (sel != 0x01) { /* 0x01: well known LUs only; this target has none */
		for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
			if (!scsi_lun_map_get(cmd->map, scsi_nexus_map_lun(cmd->nexus, i)))
				continue;
			put_be64(d + n, scsi_lun_encode(i));
			n += 8;
		}
	}
	put_be32(d, n - 8);
	scsi_put_data(cmd, d, n, alloc);
	return SCSI_DONE;
}

/* ---- TEST UNIT READY, REQUEST SENSE, START STOP, PREVENT ALLOW ---- */

int scsi_spc_test_unit_ready(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	(void)cmd;
	(void)lu;
	return SCSI_DONE; /* medium and unit attention were checked by the core */
}

int scsi_spc_request_sense(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_sense_info si = {.key = SCSI_SENSE_NO_SENSE};
	uint8_t d[SCSI_SENSE_MAX];
	uint16_t progress;
	uint8_t n;

	if (!lu) {
		si.key = SCSI_SENSE_ILLEGAL_REQUEST;
		si.asc = 0x25; /* LOGICAL UNIT NOT SUPPORTED */
	} else if (scsi_priv(cmd)->itl && scsi_ua_take(scsi_priv(cmd)->itl, &si.asc, &si.ascq)) {
		si.key = SCSI_SENSE_UNIT_ATTENTION;
	} else if (scsi_sanitize_progress(lu, &progress)) {
		/* SANITIZE IN PROGRESS, with the PROGRESS INDICATION (SKSV). */
		si.key = SCSI_SENSE_NOT_READY;
		si.asc = 0x04;
		si.ascq = 0x1b;
		si.sks_valid = true;
		si.sks[0] = 0x80;
		si.sks[1] = (uint8_t)(progress >> 8);
		si.sks[2] = (uint8_t)progress;
	} else if (!(atomic_load(&lu->mstate) & SCSI_MS_LOADED)) {
		si.key = SCSI_SENSE_NOT_READY;
		si.asc = 0x3a;
	}
	n = scsi_sense_build(d, cmd->cdb[1] & 0x01, &si);
	scsi_put_data(cmd, d, n, cmd->cdb[4]);
	return SCSI_DONE;
}

/* An eject or load that meets a prevention held only through other I_T nexuses looks again
 * every SCSI_EJECT_RETRY_MS, up to SCSI_EJECT_WAIT_MS in all, before it answers REMOVAL
 * PREVENTED: a nexus whose connection has just gone (an initiator that dropped its connection
 * and logged in again at once) is lost only when its worker has read the close, which can come
 * a little after the new session's first command. The wait is on the command's own loop (a
 * timer; SCSI_ASYNC), aborts end it (scsi_cmd_abort), and so does the thread's end. */
#define SCSI_EJECT_RETRY_MS 10
#define SCSI_EJECT_WAIT_MS 250

struct scsi_eject_wait {
	struct ev_timer timer;
	struct scsi_cmd *cmd;
	struct list_head link; /* on cmd->thread->eject_waits */
	unsigned waited_ms;
};

static int start_stop_locked(struct scsi_cmd *cmd, struct scsi_lu *lu, bool may_wait);

static void eject_wait_end(struct scsi_eject_wait *w)
{
	ev_timer_stop(w->cmd->thread->loop, &w->timer);
	list_del(&w->link);
	free(w);
}

static void eject_wait_timer(struct ev_timer *t)
{
	struct scsi_eject_wait *w = t->arg;
	struct scsi_cmd *cmd = w->cmd;
	struct scsi_lu *lu = scsi_priv(cmd)->lu;
	bool may_wait;

	w->waited_ms += SCSI_EJECT_RETRY_MS;
	may_wait = w->waited_ms < SCSI_EJECT_WAIT_MS;
	pthread_mutex_lock(&lu->lock);
	if (start_stop_locked(cmd, lu, may_wait) == SCSI_ASYNC) {
		pthread_mutex_unlock(&lu->lock);
		ev_timer_start(cmd->thread->loop, &w->timer, SCSI_EJECT_RETRY_MS);
		return;
	}
	/* start_stop_locked() dropped the lock */
	eject_wait_end(w);
	scsi_cmd_finish(cmd);
}

/* Under lu->lock; returns SCSI_ASYNC with the lock held (the caller waits), SCSI_DONE with it
 * dropped. */
static int start_stop_locked(struct scsi_cmd *cmd, struct scsi_lu *lu, bool may_wait)
{
	struct scsi_itl *itl = scsi_priv(cmd)->itl;
	bool start = cmd->cdb[4] & 0x01;

	if (lu->prevent) {
		unsigned others = lu->prevent - (itl && itl->prevent ? 1u : 0u);

		if (may_wait && others == lu->prevent && cmd->thread)
			return SCSI_ASYNC;
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x53, 0x02); /* REMOVAL PREVENTED */
	} else if (start && !lu->dev) {
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x3a, 0x00); /* nothing to load */
	} else if (start && !(atomic_load(&lu->mstate) & SCSI_MS_LOADED)) {
		atomic_fetch_or(&lu->mstate, SCSI_MS_LOADED);
		pthread_mutex_unlock(&lu->lock);
		/* NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED, for the other nexuses */
		scsi_ua_post_others(lu, cmd->nexus, 0x28, 0x00);
		return SCSI_DONE;
	} else if (!start) {
		atomic_fetch_and(&lu->mstate, (uint8_t)~SCSI_MS_LOADED);
	}
	pthread_mutex_unlock(&lu->lock);
	return SCSI_DONE;
}

/* SBC-3 5.25. The LU is always in the active power condition: POWER CONDITION values and
 * START without LOEJ change nothing. LOEJ ejects (START = 0) or loads (START = 1) the medium of
 * a removable LU; the backing store stays open, so a loaded medium has the data it had. */
int scsi_spc_start_stop(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t b4 = cmd->cdb[4];
	bool loej = b4 & 0x02;
	struct scsi_eject_wait *w;

	if ((b4 >> 4) != 0 || !loej)
		return SCSI_DONE;
	if (!lu->removable) {
		scsi_fail_cdb(cmd, 4, 1);
		return SCSI_DONE;
	}
	pthread_mutex_lock(&lu->lock);
	if (start_stop_locked(cmd, lu, true) == SCSI_DONE)
		return SCSI_DONE;
	pthread_mutex_unlock(&lu->lock);
	w = calloc(1, sizeof(*w));
	if (!w) { /* no memory to wait with: answer now */
		pthread_mutex_lock(&lu->lock);
		start_stop_locked(cmd, lu, false);
		return SCSI_DONE;
	}
	w->cmd = cmd;
	ev_timer_init(&w->timer, eject_wait_timer, w);
	list_add_tail(&w->link, &cmd->thread->eject_waits);
	ev_timer_start(cmd->thread->loop, &w->timer, SCSI_EJECT_RETRY_MS);
	return SCSI_ASYNC;
}

bool scsi_eject_abort(struct scsi_cmd *cmd)
{
	struct list_head *pos;

	if (!cmd->thread)
		return false;
	list_for_each(pos, &cmd->thread->eject_waits)
	{
		struct scsi_eject_wait *w = list_entry(pos, struct scsi_eject_wait, link);

		if (w->cmd == cmd) {
			eject_wait_end(w);
			cmd->status = SCSI_STATUS_TASK_ABORTED;
			scsi_cmd_finish(cmd);
			return true;
		}
	}
	return false;
}

void scsi_eject_thread_stop(struct scsi_thread *t)
{
	while (!list_empty(&t->eject_waits)) {
		struct scsi_eject_wait *w =
		    list_first_entry(&t->eject_waits, struct scsi_eject_wait, link);
		struct scsi_cmd *cmd = w->cmd;

		eject_wait_end(w);
		cmd->status = SCSI_STATUS_TASK_ABORTED;
		scsi_cmd_finish(cmd);
	}
}

/* Prevention is per I_T nexus (SBC-3 5.13); removal is prevented while any nexus prevents it.
 * PREVENT (not ALLOW) is a write-class command for persistent reservations. */
int scsi_spc_prevent_allow(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_itl *itl = scsi_priv(cmd)->itl;
	bool want = (cmd->cdb[4] & 0x03) != 0;

	if (want && scsi_pr_conflict(cmd, lu, false)) {
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
		return SCSI_DONE;
	}
	if (!itl)
		return SCSI_DONE;
	pthread_mutex_lock(&lu->lock);
	if (itl->prevent != want) {
		itl->prevent = want;
		if (want)
			lu->prevent++;
		else
			lu->prevent--;
	}
	pthread_mutex_unlock(&lu->lock);
	return SCSI_DONE;
}

/* ---- RESERVE / RELEASE (6) and (10): SPC-2 LU-wide reservations ---- */

int scsi_spc_reserve(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_nexus *expected = NULL;

	if (!cmd->nexus || scsi_pr_spc2(cmd, lu))
		return SCSI_DONE;
	if (lu->pr_ops && lu->pr_ops->spc2) { /* shared by every gateway of the LU */
		expected = atomic_load(&lu->resv_holder);
		if (expected == cmd->nexus)
			return SCSI_DONE; /* held already */
		if (expected && expected != SCSI_RESV_REMOTE) {
			cmd->status = SCSI_STATUS_RESERVATION_CONFLICT; /* another nexus here */
			return SCSI_DONE;
		}
		return lu->pr_ops->spc2(lu, cmd, true);
	}
	if (!atomic_compare_exchange_strong(&lu->resv_holder, &expected, cmd->nexus) &&
	    expected != cmd->nexus)
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
	return SCSI_DONE;
}

int scsi_spc_release(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_nexus *expected = cmd->nexus;

	if (scsi_pr_spc2(cmd, lu))
		return SCSI_DONE;
	if (expected && lu->pr_ops && lu->pr_ops->spc2 && atomic_load(&lu->resv_holder) == expected)
		return lu->pr_ops->spc2(lu, cmd, false);
	/* Releasing someone else's reservation, or none, is a no-op with GOOD status. */
	if (expected)
		atomic_compare_exchange_strong(&lu->resv_holder, &expected, NULL);
	return SCSI_DONE;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---- */

#define RSOC_NOMINAL_TIMEOUT	 0
#define RSOC_RECOMMENDED_TIMEOUT 30

static uint32_t put_timeouts(uint8_t *d)
{
	memset(d, 0, 12);
	put_be16(d, 0x0a);
	put_be32(d + 4, RSOC_NOMINAL_TIMEOUT);
	put_be32(d + 8, RSOC_RECOMMENDED_TIMEOUT);
	return 12;
}

static uint32_t rsoc_desc(uint8_t *d, uint8_t opcode, const struct scsi_op *op, bool sa, bool rctd)
{
	memset(d, 0, 8);
	d[0] = opcode;
	put_be16(d + 2, sa ? op->sa : 0);
	d[5] = (rctd ? 0x02 : 0) | (sa ? 0x01 : 0);
	put_be16(d + 6, op->cdb_len);
	return rctd ? 8 + put_timeouts(d + 8) : 8;
}

static uint32_t rsoc_all(const struct scsi_lu *lu, const struct scsi_lun_map *map, uint8_t *d,
			 bool rctd)
{
	const struct scsi_op *tab = scsi_op_table();
	uint32_t n = 4;

	for (unsigned opc = 0; opc < 256; opc++) {
		const struct scsi_op *op = &tab[opc];

		if (op->sa_ops) {
			for (unsigned i = 0; i < op->n_sa; i++)
				if (scsi_op_on_lu(&op->sa_ops[i], lu, map))
					n += rsoc_desc(d + n, (uint8_t)opc, &op->sa_ops[i], true,
						       rctd);
		} else if (op->fn && scsi_op_on_lu(op, lu, map))
			n += rsoc_desc(d + n, (uint8_t)opc, op, false, rctd);
	}
	put_be32(d, n - 4);
	return n;
}

int scsi_spc_report_opcodes(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[4096];
	const uint8_t *cdb = cmd->cdb;
	bool rctd = cdb[2] & 0x80, has_sa;
	unsigned opt = cdb[2] & 0x07;
	uint32_t alloc = get_be32(cdb + 6), n;
	const struct scsi_op *op;

	memset(d, 0, sizeof(d));
	if (opt == 0) {
		scsi_put_data(cmd, d, rsoc_all(lu, cmd->map, d, rctd), alloc);
		return SCSI_DONE;
	}
	if (opt > 3) {
		scsi_fail_cdb(cmd, 2, 2);
		return SCSI_DONE;
	}
	op = scsi_op_lookup(cdb[3], get_be16(cdb + 4), &has_sa);
	if ((opt == 1 && has_sa) || (opt == 2 && !has_sa)) {
		scsi_fail_cdb(cmd, 2, 2);
		return SCSI_DONE;
	}
	if (!op || !scsi_op_on_lu(op, lu, cmd->map)) {
		d[1] = 0x01; /* SUPPORT: not supported */
		n = 4;
	} else {
		d[1] = (rctd ? 0x80 : 0) | 0x03; /* CTDP, SUPPORT: supported per standard */
		put_be16(d + 2, op->cdb_len);
		memcpy(d + 4, op->usage, op->cdb_len);
		d[4] = cdb[3];
		n = 4 + op->cdb_len;
		if (rctd)
			n += put_timeouts(d + n);
	}
	scsi_put_data(cmd, d, n, alloc);
	return SCSI_DONE;
}

int scsi_spc_report_tmf(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	uint8_t d[16] = {0};
	bool repd = cmd->cdb[2] & 0x80;

	(void)lu;
	/* ABORT TASK, ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET, TARGET RESET (the
	 * iSCSI TARGET WARM RESET) */
	d[0] = 0x80 | 0x40 | 0x10 | 0x08 | 0x02;
	if (repd)
		d[3] = 0x0c;
	scsi_put_data(cmd, d, repd ? 16 : 4, get_be32(cmd->cdb + 6));
	return SCSI_DONE;
}
