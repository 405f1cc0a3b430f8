/* iSCSI BHS and AHS codec (RFC 7143 sections 11.2 - 11.19).
 *
 * One pack/unpack pair per opcode, dispatched through a table indexed by the 6-bit opcode. The
 * common fields (opcode, I, F, TotalAHSLength, DataSegmentLength, ITT) are handled once in
 * iscsi_hdr_pack() / iscsi_hdr_unpack(); the per-opcode functions only touch byte 1's
 * opcode-specific bits, bytes 2-3, 8-15 and 20-47.
 */
#include <errno.h>
#include <string.h>

#include "proto/pdu.h"
#include "util/bytes.h"

#define OP_MASK 0x3f
#define BIT_I	0x40 /* byte 0: immediate delivery */
#define BIT_F	0x80 /* byte 1: final (or T for login) */
#define BIT_C	0x40 /* byte 1: continue (login, text) */

/* SCSI Command byte 1 */
#define CMD_R	 0x40
#define CMD_W	 0x20
#define CMD_ATTR 0x07

/* Data-In byte 1 */
#define DIN_A  0x40
#define DIN_S  0x01
#define DIN_OU (ISCSI_FLAG_OVERFLOW | ISCSI_FLAG_UNDERFLOW)

#define RSP_FLAGS                                                                                  \
	(ISCSI_FLAG_BIDI_OVERFLOW | ISCSI_FLAG_BIDI_UNDERFLOW | ISCSI_FLAG_OVERFLOW |              \
	 ISCSI_FLAG_UNDERFLOW)

/* Login byte 1 */
#define LOGIN_CSG_SHIFT	 2
#define LOGIN_STAGE_MASK 0x03

struct op_codec {
	const char *name;
	/* Fill the opcode-specific bytes; the buffer is zeroed and the common fields are set.
	 * Returns 0 or -EINVAL for a field that does not fit its bits. */
	int (*pack)(const struct iscsi_hdr *h, uint8_t *b);
	void (*unpack)(const uint8_t *b, struct iscsi_hdr *h);
	bool final_fixed; /* the RFC fixes byte 1 bit 7 at 1 for this opcode */
};

/* --- NOP-Out / NOP-In (11.18, 11.19) --- */

static int pack_nop_out(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_nop_out *p = &h->nop_out;

	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 24, p->cmdsn);
	put_be32(b + 28, p->expstatsn);
	return 0;
}

static void unpack_nop_out(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_nop_out *p = &h->nop_out;

	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->cmdsn = get_be32(b + 24);
	p->expstatsn = get_be32(b + 28);
}

static int pack_nop_in(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_nop_in *p = &h->nop_in;

	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	return 0;
}

static void unpack_nop_in(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_nop_in *p = &h->nop_in;

	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
}

/* --- SCSI Command / Response (11.3, 11.4) --- */

static int pack_scsi_cmd(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_scsi_cmd *p = &h->cmd;

	if (p->attr & ~CMD_ATTR)
		return -EINVAL;
	b[1] |= (p->read ? CMD_R : 0) | (p->write ? CMD_W : 0) | p->attr;
	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->edtl);
	put_be32(b + 24, p->cmdsn);
	put_be32(b + 28, p->expstatsn);
	memcpy(b + 32, p->cdb, ISCSI_CDB_BHS_LEN);
	return 0;
}

static void unpack_scsi_cmd(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_scsi_cmd *p = &h->cmd;

	p->read = b[1] & CMD_R;
	p->write = b[1] & CMD_W;
	p->attr = b[1] & CMD_ATTR;
	p->lun = get_be64(b + 8);
	p->edtl = get_be32(b + 20);
	p->cmdsn = get_be32(b + 24);
	p->expstatsn = get_be32(b + 28);
	memcpy(p->cdb, b + 32, ISCSI_CDB_BHS_LEN);
}

static int pack_scsi_rsp(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_scsi_rsp *p = &h->rsp;

	if (p->flags & ~RSP_FLAGS)
		return -EINVAL;
	b[1] |= p->flags;
	b[2] = p->response;
	b[3] = p->status;
	put_be32(b + 20, p->snack_tag);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	put_be32(b + 36, p->expdatasn);
	put_be32(b + 40, p->bidi_residual);
	put_be32(b + 44, p->residual);
	return 0;
}

static void unpack_scsi_rsp(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_scsi_rsp *p = &h->rsp;

	p->flags = b[1] & RSP_FLAGS;
	p->response = b[2];
	p->status = b[3];
	p->snack_tag = get_be32(b + 20);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->expdatasn = get_be32(b + 36);
	p->bidi_residual = get_be32(b + 40);
	p->residual = get_be32(b + 44);
}

/* --- Task Management Function Request / Response (11.5, 11.6) --- */

static int pack_tmf_req(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_tmf_req *p = &h->tmf_req;

	if (p->function & BIT_F)
		return -EINVAL;
	b[1] |= p->function;
	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->rtt);
	put_be32(b + 24, p->cmdsn);
	put_be32(b + 28, p->expstatsn);
	put_be32(b + 32, p->refcmdsn);
	put_be32(b + 36, p->expdatasn);
	return 0;
}

static void unpack_tmf_req(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_tmf_req *p = &h->tmf_req;

	p->function = b[1] & ~BIT_F;
	p->lun = get_be64(b + 8);
	p->rtt = get_be32(b + 20);
	p->cmdsn = get_be32(b + 24);
	p->expstatsn = get_be32(b + 28);
	p->refcmdsn = get_be32(b + 32);
	p->expdatasn = get_be32(b + 36);
}

static int pack_tmf_rsp(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_tmf_rsp *p = &h->tmf_rsp;

	b[2] = p->response;
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	return 0;
}

static void unpack_tmf_rsp(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_tmf_rsp *p = &h->tmf_rsp;

	p->response = b[2];
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
}

/* --- Login Request / Response (11.12, 11.13) --- */

static int pack_login_stages(bool transit, bool cont, uint8_t csg, uint8_t nsg, uint8_t *b)
{
	if ((csg | nsg) & ~LOGIN_STAGE_MASK)
		return -EINVAL;
	b[1] = (transit ? BIT_F : 0) | (cont ? BIT_C : 0) | (uint8_t)(csg << LOGIN_CSG_SHIFT) | nsg;
	return 0;
}

static int pack_login_req(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_login_req *p = &h->login_req;
	int ret;

	ret = pack_login_stages(p->transit, p->cont, p->csg, p->nsg, b);
	if (ret)
		return ret;
	b[0] |= BIT_I;
	b[2] = p->version_max;
	b[3] = p->version_min;
	memcpy(b + 8, p->isid, sizeof(p->isid));
	put_be16(b + 14, p->tsih);
	put_be16(b + 20, p->cid);
	put_be32(b + 24, p->cmdsn);
	put_be32(b + 28, p->expstatsn);
	return 0;
}

static void unpack_login_req(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_login_req *p = &h->login_req;

	p->transit = b[1] & BIT_F;
	p->cont = b[1] & BIT_C;
	p->csg = (b[1] >> LOGIN_CSG_SHIFT) & LOGIN_STAGE_MASK;
	p->nsg = b[1] & LOGIN_STAGE_MASK;
	p->version_max = b[2];
	p->version_min = b[3];
	memcpy(p->isid, b + 8, sizeof(p->isid));
	p->tsih = get_be16(b + 14);
	p->cid = get_be16(b + 20);
	p->cmdsn = get_be32(b + 24);
	p->expstatsn = get_be32(b + 28);
}

static int pack_login_rsp(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_login_rsp *p = &h->login_rsp;
	int ret;

	ret = pack_login_stages(p->transit, p->cont, p->csg, p->nsg, b);
	if (ret)
		return ret;
	b[2] = p->version_max;
	b[3] = p->version_active;
	memcpy(b + 8, p->isid, sizeof(p->isid));
	put_be16(b + 14, p->tsih);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	put_be16(b + 36, p->status); /* Status-Class at 36, Status-Detail at 37 */
	return 0;
}

static void unpack_login_rsp(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_login_rsp *p = &h->login_rsp;

	p->transit = b[1] & BIT_F;
	p->cont = b[1] & BIT_C;
	p->csg = (b[1] >> LOGIN_CSG_SHIFT) & LOGIN_STAGE_MASK;
	p->nsg = b[1] & LOGIN_STAGE_MASK;
	p->version_max = b[2];
	p->version_active = b[3];
	memcpy(p->isid, b + 8, sizeof(p->isid));
	p->tsih = get_be16(b + 14);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->status = get_be16(b + 36);
}

/* --- Text Request / Response (11.10, 11.11) --- */

static int pack_text_req(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_text_req *p = &h->text_req;

	b[1] |= p->cont ? BIT_C : 0;
	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 24, p->cmdsn);
	put_be32(b + 28, p->expstatsn);
	return 0;
}

static void unpack_text_req(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_text_req *p = &h->text_req;

	p->cont = b[1] & BIT_C;
	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->cmdsn = get_be32(b + 24);
	p->expstatsn = get_be32(b + 28);
}

static int pack_text_rsp(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_text_rsp *p = &h->text_rsp;

	b[1] |= p->cont ? BIT_C : 0;
	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	return 0;
}

static void unpack_text_rsp(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_text_rsp *p = &h->text_rsp;

	p->cont = b[1] & BIT_C;
	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
}

/* --- SCSI Data-Out / Data-In (11.7) --- */

static int pack_data_out(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_data_out *p = &h->data_out;

	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 28, p->expstatsn);
	put_be32(b + 36, p->datasn);
	put_be32(b + 40, p->offset);
	return 0;
}

static void unpack_data_out(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_data_out *p = &h->data_out;

	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->expstatsn = get_be32(b + 28);
	p->datasn = get_be32(b + 36);
	p->offset = get_be32(b + 40);
}

static int pack_data_in(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_data_in *p = &h->data_in;

	if (p->flags & ~DIN_OU)
		return -EINVAL;
	b[1] |= (p->ack ? DIN_A : 0) | p->flags | (p->status_present ? DIN_S : 0);
	b[3] = p->status;
	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	put_be32(b + 36, p->datasn);
	put_be32(b + 40, p->offset);
	put_be32(b + 44, p->residual);
	return 0;
}

static void unpack_data_in(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_data_in *p = &h->data_in;

	p->ack = b[1] & DIN_A;
	p->flags = b[1] & DIN_OU;
	p->status_present = b[1] & DIN_S;
	p->status = b[3];
	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->datasn = get_be32(b + 36);
	p->offset = get_be32(b + 40);
	p->residual = get_be32(b + 44);
}

/* --- Logout Request / Response (11.14, 11.15) --- */

static int pack_logout_req(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_logout_req *p = &h->logout_req;

	if (p->reason & BIT_F)
		return -EINVAL;
	b[1] |= p->reason;
	put_be16(b + 20, p->cid);
	put_be32(b + 24, p->cmdsn);
	put_be32(b + 28, p->expstatsn);
	return 0;
}

static void unpack_logout_req(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_logout_req *p = &h->logout_req;

	p->reason = b[1] & ~BIT_F;
	p->cid = get_be16(b + 20);
	p->cmdsn = get_be32(b + 24);
	p->expstatsn = get_be32(b + 28);
}

static int pack_logout_rsp(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_logout_rsp *p = &h->logout_rsp;

	b[2] = p->response;
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	put_be16(b + 40, p->time2wait);
	put_be16(b + 42, p->time2retain);
	return 0;
}

static void unpack_logout_rsp(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_logout_rsp *p = &h->logout_rsp;

	p->response = b[2];
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->time2wait = get_be16(b + 40);
	p->time2retain = get_be16(b + 42);
}

/* --- SNACK Request (11.16; RFC 7143 layout: BegRun at 40, RunLength at 44) --- */

#define SNACK_TYPE_MASK 0x0f

static int pack_snack(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_snack_req *p = &h->snack;

	if (p->type & ~SNACK_TYPE_MASK)
		return -EINVAL;
	b[1] |= p->type;
	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 28, p->expstatsn);
	put_be32(b + 40, p->begrun);
	put_be32(b + 44, p->runlength);
	return 0;
}

static void unpack_snack(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_snack_req *p = &h->snack;

	p->type = b[1] & SNACK_TYPE_MASK;
	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->expstatsn = get_be32(b + 28);
	p->begrun = get_be32(b + 40);
	p->runlength = get_be32(b + 44);
}

/* --- R2T (11.8) --- */

static int pack_r2t(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_r2t *p = &h->r2t;

	put_be64(b + 8, p->lun);
	put_be32(b + 20, p->ttt);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	put_be32(b + 36, p->r2tsn);
	put_be32(b + 40, p->offset);
	put_be32(b + 44, p->ddtl);
	return 0;
}

static void unpack_r2t(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_r2t *p = &h->r2t;

	p->lun = get_be64(b + 8);
	p->ttt = get_be32(b + 20);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->r2tsn = get_be32(b + 36);
	p->offset = get_be32(b + 40);
	p->ddtl = get_be32(b + 44);
}

/* --- Asynchronous Message (11.9) --- */

static int pack_async(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_async_msg *p = &h->async;

	put_be64(b + 8, p->lun);
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	b[36] = p->event;
	b[37] = p->vcode;
	put_be16(b + 38, p->param1);
	put_be16(b + 40, p->param2);
	put_be16(b + 42, p->param3);
	return 0;
}

static void unpack_async(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_async_msg *p = &h->async;

	p->lun = get_be64(b + 8);
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->event = b[36];
	p->vcode = b[37];
	p->param1 = get_be16(b + 38);
	p->param2 = get_be16(b + 40);
	p->param3 = get_be16(b + 42);
}

/* --- Reject (11.17) --- */

static int pack_reject(const struct iscsi_hdr *h, uint8_t *b)
{
	const struct iscsi_reject *p = &h->reject;

	b[2] = p->reason;
	put_be32(b + 24, p->statsn);
	put_be32(b + 28, p->expcmdsn);
	put_be32(b + 32, p->maxcmdsn);
	put_be32(b + 36, p->datasn);
	return 0;
}

static void unpack_reject(const uint8_t *b, struct iscsi_hdr *h)
{
	struct iscsi_reject *p = &h->reject;

	p->reason = b[2];
	p->statsn = get_be32(b + 24);
	p->expcmdsn = get_be32(b + 28);
	p->maxcmdsn = get_be32(b + 32);
	p->datasn = get_be32(b + 36);
}

#define CODEC(nm, fn, fixed)                                                                       \
	{                                                                                          \
		.name = nm, .pack = pack_##fn, .unpack = unpack_##fn, .final_fixed = fixed         \
	}

static const struct op_codec codecs[OP_MASK + 1] = {
    [ISCSI_OP_NOP_OUT] = CODEC("NOP-Out", nop_out, true),
    [ISCSI_OP_SCSI_CMD] = CODEC("SCSI Command", scsi_cmd, false),
    [ISCSI_OP_TMF_REQ] = CODEC("Task Management Function Request", tmf_req, true),
    [ISCSI_OP_LOGIN_REQ] = CODEC("Login Request", login_req, false),
    [ISCSI_OP_TEXT_REQ] = CODEC("Text Request", text_req, false),
    [ISCSI_OP_DATA_OUT] = CODEC("SCSI Data-Out", data_out, false),
    [ISCSI_OP_LOGOUT_REQ] = CODEC("Logout Request", logout_req, true),
    [ISCSI_OP_SNACK_REQ] = CODEC("SNACK Request", snack, true),
    [ISCSI_OP_NOP_IN] = CODEC("NOP-In", nop_in, true),
    [ISCSI_OP_SCSI_RSP] = CODEC("SCSI Response", scsi_rsp, true),
    [ISCSI_OP_TMF_RSP] = CODEC("Task Management Function Response", tmf_rsp, true),
    [ISCSI_OP_LOGIN_RSP] = CODEC("Login Response", login_rsp, false),
    [ISCSI_OP_TEXT_RSP] = CODEC("Text Response", text_rsp, false),
    [ISCSI_OP_DATA_IN] = CODEC("SCSI Data-In", data_in, false),
    [ISCSI_OP_LOGOUT_RSP] = CODEC("Logout Response", logout_rsp, true),
    [ISCSI_OP_R2T] = CODEC("R2T", r2t, true),
    [ISCSI_OP_ASYNC_MSG] = CODEC("Asynchronous Message", async, true),
    [ISCSI_OP_REJECT] = CODEC("Reject", reject, true),
};

static const struct op_codec *codec_of(uint8_t op)
{
	if (op > OP_MASK || !codecs[op].name)
		return NULL;
	return &codecs[op];
}

static bool is_login(uint8_t op)
{
	return op == ISCSI_OP_LOGIN_REQ || op == ISCSI_OP_LOGIN_RSP;
}

const char *iscsi_opcode_name(uint8_t op)
{
	const struct op_codec *c = codec_of(op);

	return c ? c->name : "unknown";
}

int iscsi_hdr_unpack(const uint8_t bhs[ISCSI_BHS_LEN], struct iscsi_hdr *h)
{
	const struct op_codec *c;

	memset(h, 0, sizeof(*h));
	h->opcode = bhs[0] & OP_MASK;
	/* Bit 6 is I for initiator opcodes and reserved (ignored) for target opcodes. */
	h->immediate = iscsi_opcode_is_initiator(h->opcode) && (bhs[0] & BIT_I);
	h->final = bhs[1] & BIT_F;
	h->total_ahs_len = bhs[4];
	h->dlength = get_be24(bhs + 5);
	h->itt = get_be32(bhs + 16);

	c = codec_of(h->opcode);
	if (!c)
		return -EBADMSG;
	c->unpack(bhs, h);
	return 0;
}

int iscsi_hdr_pack(const struct iscsi_hdr *h, uint8_t bhs[ISCSI_BHS_LEN])
{
	const struct op_codec *c = codec_of(h->opcode);
	int ret;

	memset(bhs, 0, ISCSI_BHS_LEN);
	if (!c || h->dlength > ISCSI_MAX_DSL)
		return -EINVAL;

	bhs[0] = h->opcode;
	if (h->immediate && iscsi_opcode_is_initiator(h->opcode))
		bhs[0] |= BIT_I;
	/* Login carries T in bit 7, taken from login_{req,rsp}.transit by the codec. */
	if (!is_login(h->opcode) && (h->final || c->final_fixed))
		bhs[1] = BIT_F;
	bhs[4] = h->total_ahs_len;
	put_be24(bhs + 5, h->dlength);
	put_be32(bhs + 16, h->itt);

	ret = c->pack(h, bhs);
	if (ret)
		memset(bhs, 0, ISCSI_BHS_LEN);
	return ret;
}

/* --- AHS (11.2.2) ---
 * Each AHS: AHSLength (2, bytes of the type-specific part, which starts with one reserved byte),
 * AHSType (1), the type-specific part, then zero padding to a multiple of 4. */

#define AHS_HDR_LEN	3
#define AHS_BIDI_LEN	5 /* reserved byte + 4-byte length */
#define AHS_EXT_CDB_MAX (ISCSI_MAX_CDB_LEN - ISCSI_CDB_BHS_LEN)

int iscsi_ahs_parse(const uint8_t *ahs, size_t len, struct iscsi_ahs_info *out)
{
	size_t pos = 0;

	memset(out, 0, sizeof(*out));
	if (len % 4)
		return -EBADMSG;

	while (pos < len) {
		size_t ahslen, total;
		uint8_t type;

		if (len - pos < AHS_HDR_LEN)
			return -EBADMSG;
		ahslen = get_be16(ahs + pos);
		type = ahs[pos + 2];
		total = iscsi_pad4((uint32_t)(AHS_HDR_LEN + ahslen));
		if (total > len - pos)
			return -EBADMSG;

		switch (type) {
		case ISCSI_AHS_EXTENDED_CDB:
			/* reserved byte + at least one CDB byte, CDB at most ISCSI_MAX_CDB_LEN */
			if (out->ext_cdb || ahslen < 2 || ahslen - 1 > AHS_EXT_CDB_MAX)
				return -EBADMSG;
			out->ext_cdb = ahs + pos + AHS_HDR_LEN + 1;
			out->ext_cdb_len = (uint16_t)(ahslen - 1);
			break;
		case ISCSI_AHS_BIDI_READ_LEN:
			if (out->has_bidi_read_len || ahslen != AHS_BIDI_LEN)
				return -EBADMSG;
			out->has_bidi_read_len = true;
			out->bidi_read_len = get_be32(ahs + pos + AHS_HDR_LEN + 1);
			break;
		default:
			break;
		}
		pos += total;
	}
	return 0;
}

int iscsi_ahs_build_ext_cdb(const uint8_t *ext, size_t ext_len, uint8_t *out, size_t cap)
{
	size_t total;

	if (ext_len == 0 || ext_len > AHS_EXT_CDB_MAX)
		return -EINVAL;
	total = iscsi_pad4((uint32_t)(AHS_HDR_LEN + 1 + ext_len));
	if (total > cap)
		return -ENOSPC;

	memset(out, 0, total);
	put_be16(out, (uint16_t)(ext_len + 1));
	out[2] = ISCSI_AHS_EXTENDED_CDB;
	memcpy(out + AHS_HDR_LEN + 1, ext, ext_len);
	return (int)total;
}

int iscsi_ahs_build_bidi_read_len(uint32_t len, uint8_t *out, size_t cap)
{
	if (cap < 8)
		return -ENOSPC;
	put_be16(out, AHS_BIDI_LEN);
	out[2] = ISCSI_AHS_BIDI_READ_LEN;
	out[3] = 0;
	put_be32(out + 4, len);
	return 8;
}

#define SN_FIELDS(f, m) ((f)->statsn = &(m).statsn, (f)->expcmdsn = &(m).expcmdsn, \
			 (f)->maxcmdsn = &(m).maxcmdsn)

int iscsi_hdr_sn_fields(struct iscsi_hdr *h, struct iscsi_sn_fields *f)
{
	switch (h->opcode) {
	case ISCSI_OP_NOP_IN: SN_FIELDS(f, h->nop_in); return 0;
	case ISCSI_OP_SCSI_RSP: SN_FIELDS(f, h->rsp); return 0;
	case ISCSI_OP_TMF_RSP: SN_FIELDS(f, h->tmf_rsp); return 0;
	case ISCSI_OP_TEXT_RSP: SN_FIELDS(f, h->text_rsp); return 0;
	case ISCSI_OP_DATA_IN: SN_FIELDS(f, h->data_in); return 0;
	case ISCSI_OP_LOGOUT_RSP: SN_FIELDS(f, h->logout_rsp); return 0;
	case ISCSI_OP_R2T: SN_FIELDS(f, h->r2t); return 0;
	case ISCSI_OP_ASYNC_MSG: SN_FIELDS(f, h->async); return 0;
	case ISCSI_OP_REJECT: SN_FIELDS(f, h->reject); return 0;
	default:
		f->statsn = f->expcmdsn = f->maxcmdsn = NULL;
		return -ENOENT;
	}
}
