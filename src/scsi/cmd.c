/* Command dispatch: the opcode table (designated initialisers, with CDB lengths and usage
 * bitmaps shared with REPORT SUPPORTED OPERATION CODES), the checks every command goes through
 * (LUN, CDB fields, unit attention, reservation, medium, write protect) and completion. */
#include <string.h>

#include "scsi/scsi_int.h"

/* Usage bitmaps: byte 0 is the opcode; the last byte is CONTROL (NACA/LINK unsupported). */
#define U6(b1, b2, b3, b4)                                                                         \
	{                                                                                          \
		0xff, b1, b2, b3, b4, 0                                                            \
	}
#define U_LBA10(b1)                                                                                \
	{                                                                                          \
		0xff, b1, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0                              \
	}
#define U_LBA12(b1)                                                                                \
	{                                                                                          \
		0xff, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0                  \
	}
#define U_LBA16(b1)                                                                                \
	{                                                                                          \
		0xff, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  \
		    0x1f, 0                                                                        \
	}

/* An op_table entry. Designated initialisers throughout, so fields added to struct scsi_op
 * (sa, sa_ops, n_sa here) start zeroed without -Wmissing-field-initializers (clang) firing.
 * The usage bitmap is the variadic tail because a braced list holds commas. */
#define OP(f, n, len, fl, ...)                                                                     \
	{                                                                                          \
		.fn = (f), .name = (n), .cdb_len = (len), .flags = (fl), .usage = __VA_ARGS__      \
	}

/* Flag sets. A command without SCSI_F_PR_ALLOW or SCSI_F_PR_READ is in the "write" class of
 * the persistent reservation conflict table: the safe default. */
#define F_IO (SCSI_F_MEDIUM)
#define F_RD (SCSI_F_MEDIUM | SCSI_F_PR_READ)
#define F_WR (SCSI_F_MEDIUM | SCSI_F_WRITE)
#define F_INFO                                                                                     \
	(SCSI_F_NO_UA | SCSI_F_RESV_OK | SCSI_F_ABSENT_OK | SCSI_F_PR_ALLOW | SCSI_F_SANITIZE_OK |  \
	 SCSI_F_ALUA_ANY)
#define F_PR (SCSI_F_PR_ALLOW)
/* ALUA classes (SPC-4 5.15.2.4): what runs in every state, and what standby allows too. */
#define F_AANY (SCSI_F_ALUA_ANY)
#define F_ASTB (SCSI_F_ALUA_STBY)
#define F_PRA  (F_PR | F_ASTB) /* PERSISTENT RESERVE IN/OUT */

static const struct scsi_op sai16_ops[] = {
    {.fn = scsi_sbc_read_capacity16,
     .name = "READ CAPACITY(16)",
     .cdb_len = 16,
     .flags = F_IO | SCSI_F_PR_ALLOW | F_ASTB,
     .sa = 0x10,
     .usage = {0x9e, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0}},
    {.fn = scsi_sbc_get_lba_status,
     .name = "GET LBA STATUS",
     .cdb_len = 16,
     .flags = F_RD,
     .sa = 0x12,
     .usage = {0x9e, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	       0, 0}},
};

static const struct scsi_op maint_in_ops[] = {
    {.fn = scsi_spc_report_opcodes,
     .name = "REPORT SUPPORTED OPERATION CODES",
     .cdb_len = 12,
     .flags = SCSI_F_RESV_OK | F_PR,
     .sa = 0x0c,
     .usage = {0xa3, 0x1f, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0}},
    {.fn = scsi_spc_report_tmf,
     .name = "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS",
     .cdb_len = 12,
     .flags = SCSI_F_RESV_OK | F_PR,
     .sa = 0x0d,
     .usage = {0xa3, 0x1f, 0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0}},
    {.fn = scsi_spc_report_tpgs,
     .name = "REPORT TARGET PORT GROUPS",
     .cdb_len = 12,
     .flags = SCSI_F_RESV_OK | F_PR | F_AANY | SCSI_F_ALUA_ONLY,
     .sa = 0x0a,
     .usage = {0xa3, 0x3f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0}},
};

/* SET TARGET PORT GROUPS changes the device's configuration: in the persistent reservation
 * conflict table it is in the write class, as MODE SELECT is. */
static const struct scsi_op maint_out_ops[] = {
    {.fn = scsi_spc_set_tpgs,
     .name = "SET TARGET PORT GROUPS",
     .cdb_len = 12,
     .flags = SCSI_F_ALUA_UNAV | SCSI_F_ALUA_EXPL,
     .sa = 0x0a,
     .usage = {0xa4, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0}},
};

/* SANITIZE (SBC-4 5.30): byte 1 is IMMED, AUSE and the service action. */
#define U_SANITIZE                                                                                 \
	{                                                                                          \
		0xff, 0xbf, 0, 0, 0, 0, 0, 0xff, 0xff, 0                                           \
	}
/* A 10-byte service action entry. */
#define SA10(f, n, fl, s, u)                                                                       \
	{                                                                                          \
		.fn = f, .name = n, .cdb_len = 10, .flags = fl, .sa = s, .usage = u                \
	}
static const struct scsi_op sanitize_ops[] = {
    SA10(scsi_sbc_sanitize, "SANITIZE OVERWRITE", SCSI_F_WRITE, 0x01, U_SANITIZE),
    SA10(scsi_sbc_sanitize, "SANITIZE BLOCK ERASE", SCSI_F_WRITE | SCSI_F_THIN, 0x02, U_SANITIZE),
    SA10(scsi_sbc_sanitize, "SANITIZE CRYPTOGRAPHIC ERASE", SCSI_F_WRITE, 0x03, U_SANITIZE),
    SA10(scsi_sbc_sanitize, "SANITIZE EXIT FAILURE MODE", SCSI_F_WRITE, 0x1f, U_SANITIZE),
};

/* PERSISTENT RESERVE IN/OUT: allowed under persistent reservations (they are how one deals
 * with them), not under another nexus's RESERVE(6). */
#define U_PRIN                                                                                     \
	{                                                                                          \
		0xff, 0x1f, 0, 0, 0, 0, 0, 0xff, 0xff, 0                                           \
	}
#define U_PROUT                                                                                    \
	{                                                                                          \
		0xff, 0x1f, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0                                  \
	}
static const struct scsi_op pr_in_ops[] = {
    SA10(scsi_spc_pr_in, "PERSISTENT RESERVE IN READ KEYS", F_PRA, 0x00, U_PRIN),
    SA10(scsi_spc_pr_in, "PERSISTENT RESERVE IN READ RESERVATION", F_PRA, 0x01, U_PRIN),
    SA10(scsi_spc_pr_in, "PERSISTENT RESERVE IN REPORT CAPABILITIES", F_PRA, 0x02, U_PRIN),
    SA10(scsi_spc_pr_in, "PERSISTENT RESERVE IN READ FULL STATUS", F_PRA, 0x03, U_PRIN),
};
static const struct scsi_op pr_out_ops[] = {
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT REGISTER", F_PRA, 0x00, U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT RESERVE", F_PRA, 0x01, U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT RELEASE", F_PRA, 0x02, U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT CLEAR", F_PRA, 0x03, U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT PREEMPT", F_PRA, 0x04, U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT PREEMPT AND ABORT", F_PRA, 0x05, U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT REGISTER AND IGNORE EXISTING KEY", F_PRA, 0x06,
	 U_PROUT),
    SA10(scsi_spc_pr_out, "PERSISTENT RESERVE OUT REGISTER AND MOVE", F_PRA, 0x07, U_PROUT),
};

#define N_OPS(a) (uint8_t)(sizeof(a) / sizeof((a)[0]))

/* THIRD-PARTY COPY OUT and IN (SPC-4): only the LID1 forms. */
#define U_XCOPY(sa, b2)                                                                            \
	{                                                                                          \
		sa, 0x1f, b2, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0                    \
	}
/* POPULATE TOKEN and WRITE USING TOKEN (SBC-3): LIST IDENTIFIER in bytes 6-9, GROUP NUMBER. */
#define U_TOKEN(sa)                                                                                \
	{                                                                                          \
		0x83, sa, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0      \
	}
static const struct scsi_op tpc_out_ops[] = {
    {.fn = scsi_spc_extended_copy,
     .name = "EXTENDED COPY(LID1)",
     .cdb_len = 16,
     .sa = 0x00,
     .usage = U_XCOPY(0x83, 0)},
    {.fn = scsi_sbc_populate_token,
     .name = "POPULATE TOKEN",
     .cdb_len = 16,
     .flags = F_RD,
     .sa = 0x10,
     .usage = U_TOKEN(0x10)},
    {.fn = scsi_sbc_write_using_token,
     .name = "WRITE USING TOKEN",
     .cdb_len = 16,
     .flags = F_WR,
     .sa = 0x11,
     .usage = U_TOKEN(0x11)},
};

static const struct scsi_op tpc_in_ops[] = {
    {.fn = scsi_spc_copy_status,
     .name = "RECEIVE COPY STATUS(LID1)",
     .cdb_len = 16,
     .flags = F_PR,
     .sa = 0x00,
     .usage = U_XCOPY(0x84, 0xff)},
    {.fn = scsi_spc_copy_op_params,
     .name = "RECEIVE COPY OPERATING PARAMETERS",
     .cdb_len = 16,
     .flags = F_PR,
     .sa = 0x03,
     .usage = U_XCOPY(0x84, 0)},
    {.fn = scsi_spc_rod_token_info,
     .name = "RECEIVE ROD TOKEN INFORMATION",
     .cdb_len = 16,
     .flags = F_PR,
     .sa = 0x07,
     .usage = {0x84, 0x07, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0}},
};

static const struct scsi_op op_table[256] = {
    [0x00] = OP(scsi_spc_test_unit_ready, "TEST UNIT READY", 6, F_IO | F_PR, U6(0, 0, 0, 0)),
    [0x03] = OP(scsi_spc_request_sense, "REQUEST SENSE", 6, F_INFO, U6(0x01, 0, 0, 0xff)),
    [0x08] = OP(scsi_sbc_read, "READ(6)", 6, F_RD, U6(0x1f, 0xff, 0xff, 0xff)),
    [0x0a] = OP(scsi_sbc_write, "WRITE(6)", 6, F_WR, U6(0x1f, 0xff, 0xff, 0xff)),
    [0x12] = OP(scsi_spc_inquiry, "INQUIRY", 6, F_INFO, U6(0x01, 0xff, 0xff, 0xff)),
    [0x15] = OP(scsi_spc_mode_select, "MODE SELECT(6)", 6, F_ASTB, U6(0x11, 0, 0, 0xff)),
    [0x16] = OP(scsi_spc_reserve, "RESERVE(6)", 6, F_PR | SCSI_F_RESV_PROBE, U6(0, 0, 0, 0)),
    [0x17] = OP(scsi_spc_release, "RELEASE(6)", 6, SCSI_F_RESV_OK | F_PR, U6(0, 0, 0, 0)),
    [0x1a] = OP(scsi_spc_mode_sense, "MODE SENSE(6)", 6, SCSI_F_PR_READ | F_ASTB,
		U6(0x08, 0xff, 0xff, 0xff)),
    [0x1b] = OP(scsi_spc_start_stop, "START STOP UNIT", 6, 0, U6(0x01, 0, 0x0f, 0xf7)),
    [0x1e] = OP(scsi_spc_prevent_allow, "PREVENT ALLOW MEDIUM REMOVAL", 6, F_PR, U6(0, 0, 0, 0x03)),
    [0x25] = OP(scsi_sbc_read_capacity10, "READ CAPACITY(10)", 10, F_IO | F_PR | F_ASTB,
		{0xff, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0}),
    [0x28] = OP(scsi_sbc_read, "READ(10)", 10, F_RD, U_LBA10(0x18)),
    [0x2a] = OP(scsi_sbc_write, "WRITE(10)", 10, F_WR, U_LBA10(0x18)),
    [0x2e] = OP(scsi_sbc_write, "WRITE AND VERIFY(10)", 10, F_WR, U_LBA10(0x16)),
    [0x2f] = OP(scsi_sbc_verify, "VERIFY(10)", 10, F_RD, U_LBA10(0x16)),
    [0x34] = OP(scsi_sbc_prefetch, "PRE-FETCH(10)", 10, F_RD, U_LBA10(0x02)),
    /* SYNC_NV (obsolete since SBC-3) is accepted and ignored: everything is flushed. */
    [0x35] = OP(scsi_sbc_sync_cache, "SYNCHRONIZE CACHE(10)", 10, F_IO, U_LBA10(0x06)),
    [0x37] = OP(scsi_sbc_read_defect_data, "READ DEFECT DATA(10)", 10, F_RD,
		{0xff, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0}),
    [0x41] = OP(scsi_sbc_write_same, "WRITE SAME(10)", 10, F_WR, U_LBA10(0x08)),
    [0x42] = OP(scsi_sbc_unmap, "UNMAP", 10, F_WR, {0xff, 0, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0}),
    [0x48] = {.name = "SANITIZE",
	      .cdb_len = 10,
	      .sa_ops = sanitize_ops,
	      .n_sa = N_OPS(sanitize_ops)},
    [0x4d] = OP(scsi_spc_log_sense, "LOG SENSE", 10,
		F_PR | SCSI_F_RESV_OK | SCSI_F_SANITIZE_OK | F_ASTB,
		{0xff, 0, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0}),
    [0x55] = OP(scsi_spc_mode_select, "MODE SELECT(10)", 10, F_ASTB,
		{0xff, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0}),
    [0x56] = OP(scsi_spc_reserve, "RESERVE(10)", 10, F_PR | SCSI_F_RESV_PROBE,
		{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
    [0x57] = OP(scsi_spc_release, "RELEASE(10)", 10, SCSI_F_RESV_OK | F_PR,
		{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
    [0x5a] = OP(scsi_spc_mode_sense, "MODE SENSE(10)", 10, SCSI_F_PR_READ | F_ASTB,
		{0xff, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0}),
    [0x5e] = {.name = "PERSISTENT RESERVE IN",
	      .cdb_len = 10,
	      .sa_ops = pr_in_ops,
	      .n_sa = N_OPS(pr_in_ops)},
    [0x5f] = {.name = "PERSISTENT RESERVE OUT",
	      .cdb_len = 10,
	      .sa_ops = pr_out_ops,
	      .n_sa = N_OPS(pr_out_ops)},
    [0x83] = {.name = "THIRD-PARTY COPY OUT",
	      .cdb_len = 16,
	      .sa_ops = tpc_out_ops,
	      .n_sa = N_OPS(tpc_out_ops)},
    [0x84] = {.name = "THIRD-PARTY COPY IN",
	      .cdb_len = 16,
	      .sa_ops = tpc_in_ops,
	      .n_sa = N_OPS(tpc_in_ops)},
    [0x88] = OP(scsi_sbc_read, "READ(16)", 16, F_RD, U_LBA16(0x18)),
    [0x89] =
	OP(scsi_sbc_compare_and_write, "COMPARE AND WRITE", 16, F_WR,
	   {0xff, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x1f, 0}),
    [0x8a] = OP(scsi_sbc_write, "WRITE(16)", 16, F_WR, U_LBA16(0x18)),
    [0x8b] = OP(scsi_sbc_orwrite, "ORWRITE(16)", 16, F_WR, U_LBA16(0x18)),
    [0x8e] = OP(scsi_sbc_write, "WRITE AND VERIFY(16)", 16, F_WR, U_LBA16(0x16)),
    [0x8f] = OP(scsi_sbc_verify, "VERIFY(16)", 16, F_RD, U_LBA16(0x16)),
    [0x90] = OP(scsi_sbc_prefetch, "PRE-FETCH(16)", 16, F_RD, U_LBA16(0x02)),
    [0x91] = OP(scsi_sbc_sync_cache, "SYNCHRONIZE CACHE(16)", 16, F_IO, U_LBA16(0x06)),
    [0x93] = OP(scsi_sbc_write_same, "WRITE SAME(16)", 16, F_WR, U_LBA16(0x09)),
    [0x9c] = OP(scsi_sbc_write_atomic, "WRITE ATOMIC(16)", 16, F_WR,
		{0xff, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0x1f, 0}),
    [0x9e] = {.name = "SERVICE ACTION IN(16)",
	      .cdb_len = 16,
	      .sa_ops = sai16_ops,
	      .n_sa = N_OPS(sai16_ops)},
    [0xa0] = OP(scsi_spc_report_luns, "REPORT LUNS", 12, F_INFO,
		{0xff, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0}),
    [0xa3] = {.name = "MAINTENANCE IN",
	      .cdb_len = 12,
	      .sa_ops = maint_in_ops,
	      .n_sa = N_OPS(maint_in_ops)},
    [0xa4] = {.name = "MAINTENANCE OUT",
	      .cdb_len = 12,
	      .sa_ops = maint_out_ops,
	      .n_sa = N_OPS(maint_out_ops)},
    [0xa8] = OP(scsi_sbc_read, "READ(12)", 12, F_RD, U_LBA12(0x18)),
    [0xaa] = OP(scsi_sbc_write, "WRITE(12)", 12, F_WR, U_LBA12(0x18)),
    [0xae] = OP(scsi_sbc_write, "WRITE AND VERIFY(12)", 12, F_WR, U_LBA12(0x16)),
    [0xaf] = OP(scsi_sbc_verify, "VERIFY(12)", 12, F_RD, U_LBA12(0x16)),
    [0xb7] = OP(scsi_sbc_read_defect_data, "READ DEFECT DATA(12)", 12, F_RD,
		{0xff, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0}),
};

const struct scsi_op *scsi_op_table(void)
{
	return op_table;
}

const struct scsi_op *scsi_op_lookup(uint8_t opcode, uint16_t sa, bool *sa_valid)
{
	const struct scsi_op *op = &op_table[opcode];

	*sa_valid = op->sa_ops != NULL;
	if (!op->sa_ops)
		return op->fn ? op : NULL;
	for (unsigned i = 0; i < op->n_sa; i++)
		if (op->sa_ops[i].sa == sa)
			return &op->sa_ops[i];
	return NULL;
}

bool scsi_op_on_lu(const struct scsi_op *op, const struct scsi_lu *lu,
		   const struct scsi_lun_map *map)
{
	if ((op->flags & SCSI_F_ALUA_ONLY) && !scsi_alua_tpgs(map))
		return false;
	if ((op->flags & SCSI_F_ALUA_EXPL) && scsi_alua_tpgs(map) != 0x3)
		return false;
	return !(op->flags & SCSI_F_THIN) || (lu && lu->lbpme);
}

/* Has the opcode any service action on this LU (an opcode whose actions are all absent is an
 * unknown opcode, not an unknown service action)? */
static bool opcode_on_lu(uint8_t opcode, const struct scsi_lu *lu, const struct scsi_lun_map *map)
{
	const struct scsi_op *op = &op_table[opcode];

	for (unsigned i = 0; i < op->n_sa; i++)
		if (scsi_op_on_lu(&op->sa_ops[i], lu, map))
			return true;
	return false;
}

uint64_t scsi_alloc_len(const uint8_t *cdb, unsigned off, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v = (v << 8) | cdb[off + i];
	return v;
}

void scsi_put_data(struct scsi_cmd *cmd, const void *data, uint32_t len, uint32_t alloc)
{
	uint32_t n = len < alloc ? len : alloc;

	cmd->xfer_wanted = alloc;
	if (n > cmd->data_in_max)
		n = cmd->data_in_max;
	if (n > cmd->buf_len)
		n = cmd->buf_len;
	if (n)
		memcpy(cmd->buf, data, n);
	cmd->data_in_len = n;
}

void scsi_cmd_finish(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_lu *lu = p->lu;

	if (p->counted) /* the nexus's thread: the only writer */
		atomic_store_explicit(&p->itl->wr_inflight,
				      atomic_load_explicit(&p->itl->wr_inflight, memory_order_relaxed) - 1,
				      memory_order_release);
	scsi_slow_put(cmd);
	cmd->done(cmd);
	scsi_lu_put(lu);
}

/* Reserved or unsupported bits set in the CDB: 24/00 with a pointer at the first one. */
static bool cdb_fields_ok(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	if (cmd->cdb_len < op->cdb_len) { /* also for absent LUs, which skip precheck() */
		scsi_fail_cdb(cmd, 0, -1);
		return false;
	}
	for (unsigned i = 1; i < op->cdb_len; i++) {
		uint8_t bad = cmd->cdb[i] & (uint8_t)~op->usage[i];

		if (bad) {
			int bit = 7;

			while (!(bad & (1u << bit)))
				bit--;
			scsi_fail_cdb(cmd, i, bit);
			return false;
		}
	}
	return true;
}

static bool ua_check(struct scsi_cmd *cmd, struct scsi_itl *itl)
{
	uint8_t asc, ascq;

	if (!itl || !atomic_load_explicit(&itl->ua_pending, memory_order_acquire))
		return true;
	if (!scsi_ua_take(itl, &asc, &ascq))
		return true;
	scsi_fail(cmd, SCSI_SENSE_UNIT_ATTENTION, asc, ascq);
	return false;
}

/* The medium (ms = lu->mstate, not SCSI_MS_LOADED alone): present, not left unusable by a
 * failed sanitize. */
static bool medium_ok(struct scsi_cmd *cmd, const struct scsi_op *op, uint8_t ms)
{
	if (!(op->flags & SCSI_F_MEDIUM))
		return true;
	if (ms & SCSI_MS_OFFLINE) {
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x12); /* LOGICAL UNIT NOT READY, OFFLINE */
		return false;
	}
	if (ms & SCSI_MS_BUSY) { /* a rollback runs (hold.c) */
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x07); /* OPERATION IN PROGRESS */
		return false;
	}
	if (ms & SCSI_MS_NOT_READY) { /* the backend is not open yet: see docs/configuration.md */
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x03); /* MANUAL INTERVENTION REQUIRED */
		return false;
	}
	if (!(ms & SCSI_MS_LOADED)) {
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x3a, 0x00); /* MEDIUM NOT PRESENT */
		return false;
	}
	if (ms & SCSI_MS_SAN_FAIL) {
		scsi_fail(cmd, SCSI_SENSE_MEDIUM_ERROR, 0x31, 0x03); /* SANITIZE COMMAND FAILED */
		return false;
	}
	if ((ms & SCSI_MS_HOLD) && (op->flags & SCSI_F_WRITE) && cmd->thread) {
		scsi_priv(cmd)->held = true; /* waits for the hold to end (hold.c) */
		return false;
	}
	return true;
}

/* The generic checks; returns false with status set if the command must not run. */
/* inlined into both callers: the command path keeps it inline (scsi_cmd_rerun is the cold one) */
static inline __attribute__((always_inline)) bool precheck(struct scsi_cmd *cmd,
							  const struct scsi_op *op,
							  struct scsi_lu *lu)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_nexus *holder;
	uint8_t ms = atomic_load_explicit(&lu->mstate, memory_order_acquire);

	/* A sanitize in progress stops everything but a few commands, before anything else
	 * (SBC-4 4.11): a pending unit attention stays pending until it is over. */
	if ((ms & SCSI_MS_SANITIZE) && !(op->flags & SCSI_F_SANITIZE_OK)) {
		scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x1b); /* SANITIZE IN PROGRESS */
		return false;
	}
	if (!(op->flags & SCSI_F_NO_UA) && !ua_check(cmd, p->itl))
		return false;
	if (cmd->cdb_len < op->cdb_len) {
		scsi_fail_cdb(cmd, 0, -1);
		return false;
	}
	if (!cdb_fields_ok(cmd, op))
		return false;
	if (!scsi_alua_check(cmd, lu, op->flags))
		return false;
	holder = atomic_load_explicit(&lu->resv_holder, memory_order_acquire);
	if (holder && holder != cmd->nexus && !(op->flags & SCSI_F_RESV_OK) &&
	    !(holder == SCSI_RESV_REMOTE && (op->flags & SCSI_F_RESV_PROBE))) {
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
		return false;
	}
	if (!(op->flags & SCSI_F_PR_ALLOW) &&
	    scsi_pr_conflict(cmd, lu, op->flags & SCSI_F_PR_READ)) {
		cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
		return false;
	}
	if (ms != SCSI_MS_LOADED && !medium_ok(cmd, op, ms)) /* loaded: the common case */
		return false;
	if ((op->flags & SCSI_F_WRITE) &&
	    atomic_load_explicit(&lu->readonly, memory_order_relaxed)) {
		scsi_fail(cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x00); /* WRITE PROTECTED */
		return false;
	}
	if ((op->flags & SCSI_F_WRITE) && atomic_load_explicit(&lu->swp, memory_order_relaxed)) {
		/* LOGICAL UNIT SOFTWARE WRITE PROTECTED (control mode page SWP) */
		scsi_fail(cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x02);
		return false;
	}
	return true;
}

/* A write command counted in its I_T_L nexus until it completes, for a drain (hold.c): the
 * nexus's thread is the only writer, so a plain load and store. */
static inline void count_write(struct scsi_priv *p)
{
	p->counted = true;
	atomic_store_explicit(&p->itl->wr_inflight,
			      atomic_load_explicit(&p->itl->wr_inflight, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void scsi_cmd_exec(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	const struct scsi_op *op;
	struct scsi_lu *lu = NULL;
	uint32_t lun = scsi_lun_decode(cmd->lun_field);
	uint16_t sa = 0;
	bool has_sa;

	memset(p, 0, sizeof(*p));
	cmd->status = SCSI_STATUS_GOOD;
	cmd->sense_len = 0;
	cmd->data_in_len = 0;
	cmd->data_in = cmd->buf;
	cmd->data_in_lu = NULL;
	cmd->xfer_wanted = 0;
	if (lun != UINT32_MAX) /* the LU that this nexus's LUN names (LUN masking) */
		lu = scsi_lun_map_get(cmd->map, scsi_nexus_map_lun(cmd->nexus, lun));
	if (lu) {
		scsi_lu_get(lu);
		p->lu = lu;
		if (cmd->nexus)
			p->itl = scsi_itl_attach(cmd->nexus, lun, lu);
	}
	if (cmd->cdb_len < 1) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
		goto out;
	}
	if (cmd->cdb_len >= 2)
		sa = cmd->cdb[1] & 0x1f;
	op = scsi_op_lookup(cmd->cdb[0], sa, &has_sa);
	if (op && !scsi_op_on_lu(op, lu, cmd->map)) {
		op = NULL;
		has_sa = has_sa && opcode_on_lu(cmd->cdb[0], lu, cmd->map);
	}
	if (!lu && !(op && (op->flags & SCSI_F_ABSENT_OK))) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x25, 0x00); /* LU NOT SUPPORTED */
		goto out;
	}
	if (!op) {
		/* A pending unit attention is reported before the unknown opcode. */
		if (lu && !ua_check(cmd, p->itl))
			goto out;
		if (has_sa) /* known opcode, unknown service action */
			scsi_fail_cdb(cmd, 1, 4);
		else
			scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
		goto out;
	}
	if (lu && !precheck(cmd, op, lu)) {
		if (p->held) { /* a write while the LU holds them: it waits (hold.c) */
			p->held = false;
			scsi_hold_park(cmd, op);
			return;
		}
		goto out;
	}
	if (!lu && !cdb_fields_ok(cmd, op))
		goto out;
	if ((op->flags & SCSI_F_WRITE) && p->itl)
		count_write(p);
	if (op->fn(cmd, lu) == SCSI_ASYNC)
		return;
out:
	scsi_cmd_finish(cmd);
}

void scsi_cmd_rerun(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_lu *lu = p->lu;

	if (!precheck(cmd, op, lu)) {
		if (p->held) { /* held again */
			p->held = false;
			scsi_hold_park(cmd, op);
			return;
		}
		scsi_cmd_finish(cmd);
		return;
	}
	if ((op->flags & SCSI_F_WRITE) && p->itl)
		count_write(p);
	if (op->fn(cmd, lu) == SCSI_ASYNC)
		return;
	scsi_cmd_finish(cmd);
}

bool scsi_cmd_abort(struct scsi_cmd *cmd)
{
	if (scsi_copy_abort(cmd))
		return false; /* it stops after the chunk in flight, with TASK ABORTED */
	return scsi_sanitize_abort(cmd) || scsi_eject_abort(cmd) || scsi_hold_abort(cmd);
}

