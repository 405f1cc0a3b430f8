/* iSCSI PDU header codec (RFC 7143 section 11): pure functions, no I/O, no allocation.
 *
 * A decoded header is `struct iscsi_hdr`: the common BHS fields plus one union member per
 * opcode. iscsi_hdr_pack() and iscsi_hdr_unpack() convert between it and the 48 wire bytes;
 * they are exact inverses for every field listed here (reserved bytes are written as zero and
 * ignored when read). Validation of values against session state (sequence numbers, lengths
 * against negotiated limits) is the caller's job; these only check what the 48 bytes alone can
 * tell.
 */
#ifndef IX_PROTO_PDU_H
#define IX_PROTO_PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which end of a connection this is. */
enum iscsi_role {
	ISCSI_ROLE_INITIATOR = 0,
	ISCSI_ROLE_TARGET = 1,
};

#define ISCSI_BHS_LEN 48
#define ISCSI_DIGEST_LEN 4
#define ISCSI_RSVD_TAG 0xffffffffu
#define ISCSI_MAX_DSL 0xffffffu  /* DataSegmentLength is 24 bits */
#define ISCSI_CDB_BHS_LEN 16     /* CDB bytes carried in the BHS */
#define ISCSI_MAX_CDB_LEN 260    /* 16 + extended CDB AHS (AHSLength is 16-bit, practical cap) */

static inline uint32_t iscsi_pad4(uint32_t len)
{
	return (len + 3u) & ~3u;
}

enum iscsi_opcode {
	ISCSI_OP_NOP_OUT = 0x00,
	ISCSI_OP_SCSI_CMD = 0x01,
	ISCSI_OP_TMF_REQ = 0x02,
	ISCSI_OP_LOGIN_REQ = 0x03,
	ISCSI_OP_TEXT_REQ = 0x04,
	ISCSI_OP_DATA_OUT = 0x05,
	ISCSI_OP_LOGOUT_REQ = 0x06,
	ISCSI_OP_SNACK_REQ = 0x10,
	ISCSI_OP_NOP_IN = 0x20,
	ISCSI_OP_SCSI_RSP = 0x21,
	ISCSI_OP_TMF_RSP = 0x22,
	ISCSI_OP_LOGIN_RSP = 0x23,
	ISCSI_OP_TEXT_RSP = 0x24,
	ISCSI_OP_DATA_IN = 0x25,
	ISCSI_OP_LOGOUT_RSP = 0x26,
	ISCSI_OP_R2T = 0x31,
	ISCSI_OP_ASYNC_MSG = 0x32,
	ISCSI_OP_REJECT = 0x3f,
};

/* Reject reasons (RFC 7143 section 11.17.1). */
enum iscsi_reject_reason {
	ISCSI_REJECT_DATA_DIGEST = 0x02,
	ISCSI_REJECT_SNACK = 0x03,
	ISCSI_REJECT_PROTOCOL_ERROR = 0x04,
	ISCSI_REJECT_CMD_NOT_SUPPORTED = 0x05,
	ISCSI_REJECT_IMM_CMD = 0x06,
	ISCSI_REJECT_TASK_IN_PROGRESS = 0x07,
	ISCSI_REJECT_INVALID_DATA_ACK = 0x08,
	ISCSI_REJECT_INVALID_PDU_FIELD = 0x09,
	ISCSI_REJECT_LONG_OP = 0x0a,
	ISCSI_REJECT_NEGOTIATION_RESET = 0x0b,
	ISCSI_REJECT_WAITING_FOR_LOGOUT = 0x0c,
};

/* Login status class/detail as one 16-bit value: class << 8 | detail (section 11.13.5). */
enum iscsi_login_status {
	ISCSI_LOGIN_OK = 0x0000,
	ISCSI_LOGIN_TARGET_MOVED_TEMP = 0x0101,
	ISCSI_LOGIN_TARGET_MOVED_PERM = 0x0102,
	ISCSI_LOGIN_INIT_ERR = 0x0200,
	ISCSI_LOGIN_AUTH_FAILED = 0x0201,
	ISCSI_LOGIN_AUTHORIZATION_FAILED = 0x0202,
	ISCSI_LOGIN_NOT_FOUND = 0x0203,
	ISCSI_LOGIN_TARGET_REMOVED = 0x0204,
	ISCSI_LOGIN_UNSUPPORTED_VERSION = 0x0205,
	ISCSI_LOGIN_TOO_MANY_CONNECTIONS = 0x0206,
	ISCSI_LOGIN_MISSING_PARAMETER = 0x0207,
	ISCSI_LOGIN_CANT_INCLUDE_IN_SESSION = 0x0208,
	ISCSI_LOGIN_UNSUPPORTED_SESSION_TYPE = 0x0209,
	ISCSI_LOGIN_SESSION_DOES_NOT_EXIST = 0x020a,
	ISCSI_LOGIN_INVALID_REQUEST_DURING_LOGIN = 0x020b,
	ISCSI_LOGIN_TARGET_ERROR = 0x0300,
	ISCSI_LOGIN_SERVICE_UNAVAILABLE = 0x0301,
	ISCSI_LOGIN_OUT_OF_RESOURCES = 0x0302,
};

/* Login stages (CSG/NSG). */
enum iscsi_stage {
	ISCSI_STAGE_SECURITY = 0,
	ISCSI_STAGE_OPERATIONAL = 1,
	ISCSI_STAGE_FULL_FEATURE = 3,
};

/* TMF function codes (11.5.1) and responses (11.6.1). */
enum iscsi_tmf_func {
	ISCSI_TMF_ABORT_TASK = 1,
	ISCSI_TMF_ABORT_TASK_SET = 2,
	ISCSI_TMF_CLEAR_ACA = 3,
	ISCSI_TMF_CLEAR_TASK_SET = 4,
	ISCSI_TMF_LUN_RESET = 5,
	ISCSI_TMF_TARGET_WARM_RESET = 6,
	ISCSI_TMF_TARGET_COLD_RESET = 7,
	ISCSI_TMF_TASK_REASSIGN = 8,
};

enum iscsi_tmf_response {
	ISCSI_TMF_RSP_COMPLETE = 0,
	ISCSI_TMF_RSP_NO_TASK = 1,
	ISCSI_TMF_RSP_NO_LUN = 2,
	ISCSI_TMF_RSP_TASK_ALLEGIANT = 3,
	ISCSI_TMF_RSP_NO_REASSIGN = 4,
	ISCSI_TMF_RSP_NOT_SUPPORTED = 5,
	ISCSI_TMF_RSP_AUTH_FAILED = 6,
	ISCSI_TMF_RSP_REJECTED = 255,
};

enum iscsi_logout_reason {
	ISCSI_LOGOUT_CLOSE_SESSION = 0,
	ISCSI_LOGOUT_CLOSE_CONNECTION = 1,
	ISCSI_LOGOUT_REMOVE_FOR_RECOVERY = 2,
};

enum iscsi_logout_response {
	ISCSI_LOGOUT_RSP_OK = 0,
	ISCSI_LOGOUT_RSP_CID_NOT_FOUND = 1,
	ISCSI_LOGOUT_RSP_RECOVERY_UNSUPPORTED = 2,
	ISCSI_LOGOUT_RSP_CLEANUP_FAILED = 3,
};

/* SCSI Command task attributes (byte 1 bits 2-0). */
enum iscsi_task_attr {
	ISCSI_ATTR_UNTAGGED = 0,
	ISCSI_ATTR_SIMPLE = 1,
	ISCSI_ATTR_ORDERED = 2,
	ISCSI_ATTR_HEAD_OF_QUEUE = 3,
	ISCSI_ATTR_ACA = 4,
};

/* SCSI Response / Data-In residual flags (byte 1). */
#define ISCSI_FLAG_BIDI_OVERFLOW 0x10  /* o */
#define ISCSI_FLAG_BIDI_UNDERFLOW 0x08 /* u */
#define ISCSI_FLAG_OVERFLOW 0x04       /* O */
#define ISCSI_FLAG_UNDERFLOW 0x02      /* U */

struct iscsi_nop_out {
	uint64_t lun;
	uint32_t ttt, cmdsn, expstatsn;
};

struct iscsi_nop_in {
	uint64_t lun;
	uint32_t ttt, statsn, expcmdsn, maxcmdsn;
};

struct iscsi_scsi_cmd {
	bool read, write;       /* R, W */
	uint8_t attr;           /* enum iscsi_task_attr */
	uint64_t lun;
	uint32_t edtl;          /* Expected Data Transfer Length */
	uint32_t cmdsn, expstatsn;
	uint8_t cdb[ISCSI_CDB_BHS_LEN];
};

struct iscsi_scsi_rsp {
	uint8_t flags;          /* ISCSI_FLAG_{BIDI_,}{OVER,UNDER}FLOW */
	uint8_t response;       /* 0 completed at target, 1 target failure */
	uint8_t status;         /* SCSI status */
	uint32_t snack_tag, statsn, expcmdsn, maxcmdsn, expdatasn;
	uint32_t bidi_residual, residual;
};

struct iscsi_tmf_req {
	uint8_t function;       /* enum iscsi_tmf_func */
	uint64_t lun;
	uint32_t rtt;           /* Referenced Task Tag */
	uint32_t cmdsn, expstatsn, refcmdsn, expdatasn;
};

struct iscsi_tmf_rsp {
	uint8_t response;       /* enum iscsi_tmf_response */
	uint32_t statsn, expcmdsn, maxcmdsn;
};

struct iscsi_login_req {
	bool transit, cont;     /* T, C */
	uint8_t csg, nsg;
	uint8_t version_max, version_min;
	uint8_t isid[6];
	uint16_t tsih, cid;
	uint32_t cmdsn, expstatsn;
};

struct iscsi_login_rsp {
	bool transit, cont;
	uint8_t csg, nsg;
	uint8_t version_max, version_active;
	uint8_t isid[6];
	uint16_t tsih;
	uint32_t statsn, expcmdsn, maxcmdsn;
	uint16_t status;        /* enum iscsi_login_status (class << 8 | detail) */
};

struct iscsi_text_req {
	bool cont;              /* C */
	uint64_t lun;
	uint32_t ttt, cmdsn, expstatsn;
};

struct iscsi_text_rsp {
	bool cont;
	uint64_t lun;
	uint32_t ttt, statsn, expcmdsn, maxcmdsn;
};

struct iscsi_data_out {
	uint64_t lun;
	uint32_t ttt, expstatsn, datasn, offset;
};

struct iscsi_data_in {
	bool ack;               /* A */
	bool status_present;    /* S */
	uint8_t flags;          /* O/U */
	uint8_t status;         /* valid when S */
	uint64_t lun;
	uint32_t ttt, statsn, expcmdsn, maxcmdsn, datasn, offset, residual;
};

struct iscsi_logout_req {
	uint8_t reason;         /* enum iscsi_logout_reason */
	uint16_t cid;
	uint32_t cmdsn, expstatsn;
};

struct iscsi_logout_rsp {
	uint8_t response;       /* enum iscsi_logout_response */
	uint32_t statsn, expcmdsn, maxcmdsn;
	uint16_t time2wait, time2retain;
};

struct iscsi_snack_req {
	uint8_t type;           /* 4 bits */
	uint64_t lun;
	uint32_t ttt, expstatsn, begrun, runlength;
};

struct iscsi_r2t {
	uint64_t lun;
	uint32_t ttt, statsn, expcmdsn, maxcmdsn, r2tsn, offset, ddtl;
};

/* AsyncEvent codes (RFC 7143 11.9.1). */
enum iscsi_async_event {
	ISCSI_ASYNC_SCSI_EVENT = 0,
	ISCSI_ASYNC_LOGOUT_REQUEST = 1,	      /* Parameter3: seconds the initiator has */
	ISCSI_ASYNC_DROP_CONNECTION = 2,      /* P1 CID, P2 Time2Wait, P3 Time2Retain */
	ISCSI_ASYNC_DROP_ALL_CONNECTIONS = 3, /* P2 Time2Wait, P3 Time2Retain */
	ISCSI_ASYNC_NEGOTIATION_REQUEST = 4,  /* P3: seconds */
	ISCSI_ASYNC_TASK_TERMINATION = 5,
	ISCSI_ASYNC_VENDOR = 255,
};

struct iscsi_async_msg {
	uint64_t lun;
	uint32_t statsn, expcmdsn, maxcmdsn;
	uint8_t event, vcode;
	uint16_t param1, param2, param3;
};

struct iscsi_reject {
	uint8_t reason;         /* enum iscsi_reject_reason */
	uint32_t statsn, expcmdsn, maxcmdsn, datasn;
};

struct iscsi_hdr {
	uint8_t opcode;         /* enum iscsi_opcode, 6 bits */
	bool immediate;         /* I bit (initiator opcodes only; ignored when packing others) */
	bool final;             /* F bit, byte 1 bit 7 */
	uint8_t total_ahs_len;  /* in 4-byte words */
	uint32_t dlength;       /* DataSegmentLength, 24 bits, excludes padding */
	uint32_t itt;           /* Initiator Task Tag */
	union {
		struct iscsi_nop_out nop_out;
		struct iscsi_nop_in nop_in;
		struct iscsi_scsi_cmd cmd;
		struct iscsi_scsi_rsp rsp;
		struct iscsi_tmf_req tmf_req;
		struct iscsi_tmf_rsp tmf_rsp;
		struct iscsi_login_req login_req;
		struct iscsi_login_rsp login_rsp;
		struct iscsi_text_req text_req;
		struct iscsi_text_rsp text_rsp;
		struct iscsi_data_out data_out;
		struct iscsi_data_in data_in;
		struct iscsi_logout_req logout_req;
		struct iscsi_logout_rsp logout_rsp;
		struct iscsi_snack_req snack;
		struct iscsi_r2t r2t;
		struct iscsi_async_msg async;
		struct iscsi_reject reject;
	};
};

/* Decode 48 BHS bytes. Returns 0, or -EBADMSG for an opcode this codec does not know (h->opcode
 * and the common fields are still filled in, so the caller can answer with a Reject). */
int iscsi_hdr_unpack(const uint8_t bhs[ISCSI_BHS_LEN], struct iscsi_hdr *h);

/* Encode h into 48 bytes (all reserved bytes zero). Login Request is always encoded with the I
 * bit set. Byte 1 bit 7: for Login it is T, taken from login_{req,rsp}.transit (h->final is
 * ignored); for the opcodes whose F bit RFC 7143 fixes at 1 (NOP, TMF, Logout, SNACK, SCSI
 * Response, R2T, Async, Reject) it is always set; otherwise it is h->final. Unpack always
 * reports bit 7 in h->final. Returns 0, or -EINVAL for an unknown opcode, dlength > 24 bits,
 * or a field wider than its bits on the wire (task attr > 7, TMF function or logout reason
 * > 127, SNACK type > 15, CSG/NSG > 3, response/Data-In flags outside O/U(/o/u)); on error
 * bhs is all zero. */
int iscsi_hdr_pack(const struct iscsi_hdr *h, uint8_t bhs[ISCSI_BHS_LEN]);

/* The sequence numbers a target's PDU carries in bytes 24-35 (RFC 7143 4.2.2): where they are
 * in h, for every target opcode of the full feature phase (Login Response excepted). Whether
 * StatSN stands for a status (R2T's and a reserved-tag NOP-In's do not) is the reader's
 * business. Returns 0, or -ENOENT for other opcodes (f is then all NULL). Written once for
 * both roles: the target stamps through it, the initiator reads through it. */
struct iscsi_sn_fields {
	uint32_t *statsn, *expcmdsn, *maxcmdsn;
};
int iscsi_hdr_sn_fields(struct iscsi_hdr *h, struct iscsi_sn_fields *f);

/* True if the opcode is sent by an initiator (0x00-0x1f). */
static inline bool iscsi_opcode_is_initiator(uint8_t op)
{
	return op < 0x20;
}

/* Name of an opcode for logs ("SCSI Command", ...); "unknown" for others. */
const char *iscsi_opcode_name(uint8_t op);

/* --- AHS (11.2.2) --- */
enum iscsi_ahs_type {
	ISCSI_AHS_EXTENDED_CDB = 1,
	ISCSI_AHS_BIDI_READ_LEN = 2,
};

struct iscsi_ahs_info {
	const uint8_t *ext_cdb; /* CDB bytes 16.. (points into the AHS buffer), or NULL */
	uint16_t ext_cdb_len;
	bool has_bidi_read_len;
	uint32_t bidi_read_len;
};

/* Walk the AHS area (len = TotalAHSLength * 4). Unknown AHS types are skipped. Returns 0, or
 * -EBADMSG when len is not a multiple of 4, an AHS runs past the area, a known type has the
 * wrong AHSLength (extended CDB: 2..245, i.e. 1..244 CDB bytes; bidi read length: 5), or a
 * known type appears twice. */
int iscsi_ahs_parse(const uint8_t *ahs, size_t len, struct iscsi_ahs_info *out);

/* Build an extended-CDB AHS for CDB bytes 16.. (ext_len bytes) into out (capacity cap). Returns
 * the number of bytes written (a multiple of 4, padding zeroed), -EINVAL if ext_len is 0 or
 * above ISCSI_MAX_CDB_LEN - 16, or -ENOSPC. */
int iscsi_ahs_build_ext_cdb(const uint8_t *ext, size_t ext_len, uint8_t *out, size_t cap);

/* Build a bidirectional-read-length AHS (8 bytes). Returns 8, or -ENOSPC. */
int iscsi_ahs_build_bidi_read_len(uint32_t len, uint8_t *out, size_t cap);

#endif
