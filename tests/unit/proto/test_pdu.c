/* BHS and AHS codec tests.
 *
 * Every row's 48 bytes were assembled by hand from the RFC 7143 section 11 diagrams (and
 * protocol.md 2.7), one 4-byte word per line, with field values chosen so that every byte of a
 * field is distinct from its neighbours: a field packed at the wrong offset, in the wrong byte
 * order or with the wrong width changes the bytes. Each row is checked both ways, then again
 * with every reserved byte and reserved bit (byte 0 bit 7, byte 0 bit 6 on target opcodes, the
 * reserved bits of byte 1) set to 1, which unpack must ignore.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/pdu.h"
#include "tap.h"

/* Bit mask of the reserved BHS bytes a..b (inclusive). */
#define R(a, b) ((~0ULL >> (63 - (b))) & (~0ULL << (a)))

struct pdu_case {
	const char *name;
	struct iscsi_hdr h;
	uint8_t bytes[ISCSI_BHS_LEN];
	uint64_t rsvd; /* reserved byte offsets */
	uint8_t rsvd1; /* reserved bits of byte 1 */
};

static const struct pdu_case cases[] = {
    {"NOP-Out",
     {.opcode = ISCSI_OP_NOP_OUT,
      .immediate = true,
      .final = true,
      .dlength = 0x123,
      .itt = 0x10203040,
      .nop_out = {.lun = 0x0011223344556677ULL, .ttt = 0xffffffff, .cmdsn = 7, .expstatsn = 9}},
     {0x40, 0x80, 0x00, 0x00, /* I | 0x00, F */
      0x00, 0x00, 0x01, 0x23, /* AHS 0, DSL 0x123 */
      0x00, 0x11, 0x22, 0x33, /* LUN */
      0x44, 0x55, 0x66, 0x77, /* */
      0x10, 0x20, 0x30, 0x40, /* ITT */
      0xff, 0xff, 0xff, 0xff, /* TTT */
      0x00, 0x00, 0x00, 0x07, /* CmdSN */
      0x00, 0x00, 0x00, 0x09, /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 3) | R(32, 47),
     0x7f},
    {"SCSI Command read",
     {.opcode = ISCSI_OP_SCSI_CMD,
      .final = true,
      .itt = 0x11,
      .cmd = {.read = true,
	      .attr = ISCSI_ATTR_SIMPLE,
	      .lun = 0x0002000000000000ULL,
	      .edtl = 0x1000,
	      .cmdsn = 0x22,
	      .expstatsn = 0x33,
	      .cdb = {0x28, 0, 0, 0, 0x12, 0x34, 0, 0, 0x08}}},
     {0x01, 0xc1, 0x00, 0x00, /* F | R | SIMPLE */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x02, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x11, /* ITT */
      0x00, 0x00, 0x10, 0x00, /* EDTL */
      0x00, 0x00, 0x00, 0x22, /* CmdSN */
      0x00, 0x00, 0x00, 0x33, /* ExpStatSN */
      0x28, 0x00, 0x00, 0x00, /* CDB: READ(10) LBA 0x1234 len 8 */
      0x12, 0x34, 0x00, 0x00, /* */
      0x08, 0x00, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x00},
     R(2, 3),
     0x18},
    {"SCSI Command write",
     {.opcode = ISCSI_OP_SCSI_CMD,
      .immediate = true,
      .total_ahs_len = 5,
      .dlength = 0xfffffe,
      .itt = 0xdeadbeef,
      .cmd = {.write = true,
	      .attr = ISCSI_ATTR_ACA,
	      .lun = 0xfedcba9876543210ULL,
	      .edtl = 0x20000,
	      .cmdsn = 0xfffffffe,
	      .expstatsn = 0x80000000,
	      .cdb = {0x8a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}},
     {0x41, 0x24, 0x00, 0x00, /* I | 0x01, W | ACA, F = 0 */
      0x05, 0xff, 0xff, 0xfe, /* AHS 5 words, DSL */
      0xfe, 0xdc, 0xba, 0x98, /* LUN */
      0x76, 0x54, 0x32, 0x10, /* */
      0xde, 0xad, 0xbe, 0xef, /* ITT */
      0x00, 0x02, 0x00, 0x00, /* EDTL */
      0xff, 0xff, 0xff, 0xfe, /* CmdSN */
      0x80, 0x00, 0x00, 0x00, /* ExpStatSN */
      0x8a, 0x01, 0x02, 0x03, /* CDB */
      0x04, 0x05, 0x06, 0x07, /* */
      0x08, 0x09, 0x0a, 0x0b, /* */
      0x0c, 0x0d, 0x0e, 0x0f},
     R(2, 3),
     0x18},
    {"SCSI Response",
     {.opcode = ISCSI_OP_SCSI_RSP,
      .final = true,
      .dlength = 0x14,
      .itt = 0x01020304,
      .rsp = {.flags = ISCSI_FLAG_BIDI_OVERFLOW | ISCSI_FLAG_UNDERFLOW,
	      .response = 0,
	      .status = 0x02,
	      .snack_tag = 0x0a0b0c0d,
	      .statsn = 0x100,
	      .expcmdsn = 0x200,
	      .maxcmdsn = 0x300,
	      .expdatasn = 4,
	      .bidi_residual = 0x500,
	      .residual = 0x600}},
     {0x21, 0x92, 0x00, 0x02, /* F | o | U, Response 0, Status CHECK CONDITION */
      0x00, 0x00, 0x00, 0x14, /* DSL 20 */
      0x00, 0x00, 0x00, 0x00, /* reserved */
      0x00, 0x00, 0x00, 0x00, /* */
      0x01, 0x02, 0x03, 0x04, /* ITT */
      0x0a, 0x0b, 0x0c, 0x0d, /* SNACK Tag */
      0x00, 0x00, 0x01, 0x00, /* StatSN */
      0x00, 0x00, 0x02, 0x00, /* ExpCmdSN */
      0x00, 0x00, 0x03, 0x00, /* MaxCmdSN */
      0x00, 0x00, 0x00, 0x04, /* ExpDataSN */
      0x00, 0x00, 0x05, 0x00, /* Bidirectional Read Residual Count */
      0x00, 0x00, 0x06, 0x00},
     R(8, 15),
     0x61},
    {"TMF Request",
     {.opcode = ISCSI_OP_TMF_REQ,
      .immediate = true,
      .final = true,
      .itt = 0x77,
      .tmf_req = {.function = ISCSI_TMF_ABORT_TASK,
		  .lun = 0x0003000000000000ULL,
		  .rtt = 0x66,
		  .cmdsn = 0x10,
		  .expstatsn = 0x20,
		  .refcmdsn = 0x0f,
		  .expdatasn = 3}},
     {0x42, 0x81, 0x00, 0x00, /* I | 0x02, 0x80 | ABORT TASK */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x03, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x77, /* ITT */
      0x00, 0x00, 0x00, 0x66, /* Referenced Task Tag */
      0x00, 0x00, 0x00, 0x10, /* CmdSN */
      0x00, 0x00, 0x00, 0x20, /* ExpStatSN */
      0x00, 0x00, 0x00, 0x0f, /* RefCmdSN */
      0x00, 0x00, 0x00, 0x03, /* ExpDataSN */
      0,    0,	  0,	0,    0, 0, 0, 0},
     R(2, 3) | R(40, 47),
     0x00},
    {"TMF Response",
     {.opcode = ISCSI_OP_TMF_RSP,
      .final = true,
      .itt = 0x77,
      .tmf_rsp = {.response = ISCSI_TMF_RSP_NO_TASK,
		  .statsn = 0xaaa,
		  .expcmdsn = 0xbbb,
		  .maxcmdsn = 0xccc}},
     {0x22, 0x80, 0x01, 0x00,		  /* Response 1 */
      0x00, 0x00, 0x00, 0x00,		  /* */
      0,    0,	  0,	0,    0, 0, 0, 0, /* reserved */
      0x00, 0x00, 0x00, 0x77,		  /* ITT */
      0x00, 0x00, 0x00, 0x00,		  /* reserved */
      0x00, 0x00, 0x0a, 0xaa,		  /* StatSN */
      0x00, 0x00, 0x0b, 0xbb,		  /* ExpCmdSN */
      0x00, 0x00, 0x0c, 0xcc,		  /* MaxCmdSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0},
     R(3, 3) | R(8, 15) | R(20, 23) | R(36, 47),
     0x7f},
    {"Login Request transit",
     {.opcode = ISCSI_OP_LOGIN_REQ,
      .immediate = true,
      .final = true,
      .dlength = 0x200,
      .itt = 1,
      .login_req = {.transit = true,
		    .csg = ISCSI_STAGE_OPERATIONAL,
		    .nsg = ISCSI_STAGE_FULL_FEATURE,
		    .version_max = 5,
		    .version_min = 3,
		    .isid = {0x80, 0x12, 0x34, 0x56, 0x78, 0x9a},
		    .tsih = 0x1234,
		    .cid = 0xabcd,
		    .cmdsn = 5,
		    .expstatsn = 6}},
     {0x43, 0x87, 0x05, 0x03, /* I | 0x03, T | CSG 1 | NSG 3, Version-max, Version-min */
      0x00, 0x00, 0x02, 0x00, /* DSL 512 */
      0x80, 0x12, 0x34, 0x56, /* ISID */
      0x78, 0x9a, 0x12, 0x34, /* ISID, TSIH */
      0x00, 0x00, 0x00, 0x01, /* ITT */
      0xab, 0xcd, 0x00, 0x00, /* CID, reserved */
      0x00, 0x00, 0x00, 0x05, /* CmdSN */
      0x00, 0x00, 0x00, 0x06, /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     R(22, 23) | R(32, 47),
     0x30},
    {"Login Request continue",
     {.opcode = ISCSI_OP_LOGIN_REQ,
      .immediate = true,
      .itt = 0xffffffff,
      .login_req = {.cont = true,
		    .csg = ISCSI_STAGE_SECURITY,
		    .nsg = ISCSI_STAGE_SECURITY,
		    .isid = {0x00, 0x02, 0x3d, 0x00, 0x00, 0x01},
		    .cmdsn = 1}},
     {0x43, 0x40, 0x00, 0x00, /* C, CSG 0, NSG 0 */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x02, 0x3d, 0x00, /* ISID */
      0x00, 0x01, 0x00, 0x00, /* ISID, TSIH 0 */
      0xff, 0xff, 0xff, 0xff, /* ITT */
      0x00, 0x00, 0x00, 0x00, /* CID 0 */
      0x00, 0x00, 0x00, 0x01, /* CmdSN */
      0x00, 0x00, 0x00, 0x00, /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     R(22, 23) | R(32, 47),
     0x30},
    {"Login Response",
     {.opcode = ISCSI_OP_LOGIN_RSP,
      .final = true,
      .dlength = 0x1fc,
      .itt = 1,
      .login_rsp = {.transit = true,
		    .csg = ISCSI_STAGE_SECURITY,
		    .nsg = ISCSI_STAGE_OPERATIONAL,
		    .version_max = 7,
		    .version_active = 2,
		    .isid = {0x40, 0x00, 0x01, 0x37, 0x00, 0x00},
		    .tsih = 0x42,
		    .statsn = 0x12345678,
		    .expcmdsn = 5,
		    .maxcmdsn = 0x44,
		    .status = ISCSI_LOGIN_AUTH_FAILED}},
     {0x23, 0x81, 0x07, 0x02, /* T | CSG 0 | NSG 1, Version-max, Version-active */
      0x00, 0x00, 0x01, 0xfc, /* DSL */
      0x40, 0x00, 0x01, 0x37, /* ISID */
      0x00, 0x00, 0x00, 0x42, /* ISID, TSIH */
      0x00, 0x00, 0x00, 0x01, /* ITT */
      0x00, 0x00, 0x00, 0x00, /* reserved */
      0x12, 0x34, 0x56, 0x78, /* StatSN */
      0x00, 0x00, 0x00, 0x05, /* ExpCmdSN */
      0x00, 0x00, 0x00, 0x44, /* MaxCmdSN */
      0x02, 0x01, 0x00, 0x00, /* Status-Class 2, Status-Detail 1, reserved */
      0,    0,	  0,	0,    0, 0, 0, 0},
     R(20, 23) | R(38, 47),
     0x30},
    {"Text Request",
     {.opcode = ISCSI_OP_TEXT_REQ,
      .final = true,
      .dlength = 0x1a,
      .itt = 0x99,
      .text_req =
	  {.lun = 0x0a0b0c0d0e0f1011ULL, .ttt = 0xffffffff, .cmdsn = 0x100, .expstatsn = 0x101}},
     {0x04, 0x80, 0x00, 0x00, /* F */
      0x00, 0x00, 0x00, 0x1a, /* DSL 26 */
      0x0a, 0x0b, 0x0c, 0x0d, /* LUN */
      0x0e, 0x0f, 0x10, 0x11, /* */
      0x00, 0x00, 0x00, 0x99, /* ITT */
      0xff, 0xff, 0xff, 0xff, /* TTT */
      0x00, 0x00, 0x01, 0x00, /* CmdSN */
      0x00, 0x00, 0x01, 0x01, /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 3) | R(32, 47),
     0x3f},
    {"Text Request continue",
     {.opcode = ISCSI_OP_TEXT_REQ,
      .immediate = true,
      .itt = 9,
      .text_req = {.cont = true, .ttt = 0x777, .cmdsn = 5, .expstatsn = 6}},
     {0x44, 0x40, 0x00, 0x00,		  /* I | 0x04, C */
      0x00, 0x00, 0x00, 0x00,		  /* */
      0,    0,	  0,	0,    0, 0, 0, 0, /* LUN 0 */
      0x00, 0x00, 0x00, 0x09,		  /* ITT */
      0x00, 0x00, 0x07, 0x77,		  /* TTT */
      0x00, 0x00, 0x00, 0x05,		  /* CmdSN */
      0x00, 0x00, 0x00, 0x06,		  /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 3) | R(32, 47),
     0x3f},
    {"Text Response",
     {.opcode = ISCSI_OP_TEXT_RSP,
      .dlength = 0x2000,
      .itt = 0x99,
      .text_rsp =
	  {.cont = true, .ttt = 0x1234, .statsn = 0x10, .expcmdsn = 0x101, .maxcmdsn = 0x140}},
     {0x24, 0x40, 0x00, 0x00,		  /* C */
      0x00, 0x00, 0x20, 0x00,		  /* DSL 8192 */
      0,    0,	  0,	0,    0, 0, 0, 0, /* LUN 0 */
      0x00, 0x00, 0x00, 0x99,		  /* ITT */
      0x00, 0x00, 0x12, 0x34,		  /* TTT */
      0x00, 0x00, 0x00, 0x10,		  /* StatSN */
      0x00, 0x00, 0x01, 0x01,		  /* ExpCmdSN */
      0x00, 0x00, 0x01, 0x40,		  /* MaxCmdSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 3) | R(36, 47),
     0x3f},
    {"Data-Out",
     {.opcode = ISCSI_OP_DATA_OUT,
      .final = true,
      .dlength = 0x10000,
      .itt = 0x42,
      .data_out = {.lun = 0x0001000000000000ULL,
		   .ttt = 0xabc,
		   .expstatsn = 0x33,
		   .datasn = 2,
		   .offset = 0x10000}},
     {0x05, 0x80, 0x00, 0x00, /* F */
      0x00, 0x01, 0x00, 0x00, /* DSL 65536 */
      0x00, 0x01, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x42, /* ITT */
      0x00, 0x00, 0x0a, 0xbc, /* TTT */
      0x00, 0x00, 0x00, 0x00, /* reserved */
      0x00, 0x00, 0x00, 0x33, /* ExpStatSN */
      0x00, 0x00, 0x00, 0x00, /* reserved */
      0x00, 0x00, 0x00, 0x02, /* DataSN */
      0x00, 0x01, 0x00, 0x00, /* Buffer Offset */
      0x00, 0x00, 0x00, 0x00},
     R(2, 3) | R(24, 27) | R(32, 35) | R(44, 47),
     0x7f},
    {"Data-In with status",
     {.opcode = ISCSI_OP_DATA_IN,
      .final = true,
      .dlength = 0x1000,
      .itt = 0xabcd,
      .data_in = {.status_present = true,
		  .flags = ISCSI_FLAG_UNDERFLOW,
		  .status = 0x08,
		  .lun = 0x0102030405060708ULL,
		  .ttt = 0xffffffff,
		  .statsn = 0x20,
		  .expcmdsn = 0x30,
		  .maxcmdsn = 0x40,
		  .datasn = 5,
		  .offset = 0x4000,
		  .residual = 0x200}},
     {0x25, 0x83, 0x00, 0x08, /* F | U | S, Status BUSY */
      0x00, 0x00, 0x10, 0x00, /* DSL 4096 */
      0x01, 0x02, 0x03, 0x04, /* LUN */
      0x05, 0x06, 0x07, 0x08, /* */
      0x00, 0x00, 0xab, 0xcd, /* ITT */
      0xff, 0xff, 0xff, 0xff, /* TTT */
      0x00, 0x00, 0x00, 0x20, /* StatSN */
      0x00, 0x00, 0x00, 0x30, /* ExpCmdSN */
      0x00, 0x00, 0x00, 0x40, /* MaxCmdSN */
      0x00, 0x00, 0x00, 0x05, /* DataSN */
      0x00, 0x00, 0x40, 0x00, /* Buffer Offset */
      0x00, 0x00, 0x02, 0x00},
     R(2, 2),
     0x38},
    {"Data-In ack",
     {.opcode = ISCSI_OP_DATA_IN,
      .itt = 1,
      .data_in = {.ack = true,
		  .flags = ISCSI_FLAG_OVERFLOW,
		  .lun = 0xff,
		  .ttt = 0x555,
		  .expcmdsn = 1,
		  .maxcmdsn = 2}},
     {0x25, 0x44, 0x00, 0x00, /* A | O */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0xff, /* */
      0x00, 0x00, 0x00, 0x01, /* ITT */
      0x00, 0x00, 0x05, 0x55, /* TTT */
      0x00, 0x00, 0x00, 0x00, /* StatSN */
      0x00, 0x00, 0x00, 0x01, /* ExpCmdSN */
      0x00, 0x00, 0x00, 0x02, /* MaxCmdSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 2),
     0x38},
    {"Logout Request",
     {.opcode = ISCSI_OP_LOGOUT_REQ,
      .immediate = true,
      .final = true,
      .itt = 0xfed,
      .logout_req =
	  {.reason = ISCSI_LOGOUT_CLOSE_CONNECTION, .cid = 3, .cmdsn = 0x50, .expstatsn = 0x60}},
     {0x46, 0x81, 0x00, 0x00,		  /* I | 0x06, 0x80 | reason 1 */
      0x00, 0x00, 0x00, 0x00,		  /* */
      0,    0,	  0,	0,    0, 0, 0, 0, /* reserved */
      0x00, 0x00, 0x0f, 0xed,		  /* ITT */
      0x00, 0x03, 0x00, 0x00,		  /* CID, reserved */
      0x00, 0x00, 0x00, 0x50,		  /* CmdSN */
      0x00, 0x00, 0x00, 0x60,		  /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 3) | R(8, 15) | R(22, 23) | R(32, 47),
     0x00},
    {"Logout Response",
     {.opcode = ISCSI_OP_LOGOUT_RSP,
      .final = true,
      .itt = 0xfed,
      .logout_rsp = {.response = ISCSI_LOGOUT_RSP_RECOVERY_UNSUPPORTED,
		     .statsn = 0x70,
		     .expcmdsn = 0x51,
		     .maxcmdsn = 0x90,
		     .time2wait = 2,
		     .time2retain = 0x14}},
     {0x26, 0x80, 0x02, 0x00,		  /* Response 2 */
      0x00, 0x00, 0x00, 0x00,		  /* */
      0,    0,	  0,	0,    0, 0, 0, 0, /* reserved */
      0x00, 0x00, 0x0f, 0xed,		  /* ITT */
      0x00, 0x00, 0x00, 0x00,		  /* reserved */
      0x00, 0x00, 0x00, 0x70,		  /* StatSN */
      0x00, 0x00, 0x00, 0x51,		  /* ExpCmdSN */
      0x00, 0x00, 0x00, 0x90,		  /* MaxCmdSN */
      0x00, 0x00, 0x00, 0x00,		  /* reserved */
      0x00, 0x02, 0x00, 0x14,		  /* Time2Wait, Time2Retain */
      0x00, 0x00, 0x00, 0x00},
     R(3, 3) | R(8, 15) | R(20, 23) | R(36, 39) | R(44, 47),
     0x7f},
    {"SNACK Request",
     {.opcode = ISCSI_OP_SNACK_REQ,
      .final = true,
      .itt = 0xffffffff,
      .snack = {.type = 1,
		.lun = 0x0004000000000000ULL,
		.ttt = 0xcab,
		.expstatsn = 0x88,
		.begrun = 0x11,
		.runlength = 0x22}},
     {0x10, 0x81, 0x00, 0x00,		  /* 0x80 | Type 1 (Status) */
      0x00, 0x00, 0x00, 0x00,		  /* */
      0x00, 0x04, 0x00, 0x00,		  /* LUN */
      0x00, 0x00, 0x00, 0x00,		  /* */
      0xff, 0xff, 0xff, 0xff,		  /* ITT */
      0x00, 0x00, 0x0c, 0xab,		  /* TTT / SNACK Tag */
      0x00, 0x00, 0x00, 0x00,		  /* reserved */
      0x00, 0x00, 0x00, 0x88,		  /* ExpStatSN */
      0,    0,	  0,	0,    0, 0, 0, 0, /* reserved */
      0x00, 0x00, 0x00, 0x11,		  /* BegRun (RFC 7143 offset 40) */
      0x00, 0x00, 0x00, 0x22},
     R(2, 3) | R(24, 27) | R(32, 39),
     0x70},
    {"R2T",
     {.opcode = ISCSI_OP_R2T,
      .final = true,
      .itt = 0x123,
      .r2t = {.lun = 0x0005000000000000ULL,
	      .ttt = 0x456,
	      .statsn = 0x789,
	      .expcmdsn = 0xabc,
	      .maxcmdsn = 0xdef,
	      .r2tsn = 1,
	      .offset = 0x8000,
	      .ddtl = 0x40000}},
     {0x31, 0x80, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x05, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x00, 0x01, 0x23, /* ITT */
      0x00, 0x00, 0x04, 0x56, /* TTT */
      0x00, 0x00, 0x07, 0x89, /* StatSN */
      0x00, 0x00, 0x0a, 0xbc, /* ExpCmdSN */
      0x00, 0x00, 0x0d, 0xef, /* MaxCmdSN */
      0x00, 0x00, 0x00, 0x01, /* R2TSN */
      0x00, 0x00, 0x80, 0x00, /* Buffer Offset */
      0x00, 0x04, 0x00, 0x00},
     R(2, 3),
     0x7f},
    {"Async Message",
     {.opcode = ISCSI_OP_ASYNC_MSG,
      .final = true,
      .itt = 0xffffffff,
      .async = {.lun = 0x0006000000000000ULL,
		.statsn = 0x100,
		.expcmdsn = 0x200,
		.maxcmdsn = 0x300,
		.event = 2,
		.vcode = 0x7e,
		.param1 = 1,
		.param2 = 2,
		.param3 = 0x14}},
     {0x32, 0x80, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x06, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0x00, /* */
      0xff, 0xff, 0xff, 0xff, /* ITT */
      0x00, 0x00, 0x00, 0x00, /* reserved */
      0x00, 0x00, 0x01, 0x00, /* StatSN */
      0x00, 0x00, 0x02, 0x00, /* ExpCmdSN */
      0x00, 0x00, 0x03, 0x00, /* MaxCmdSN */
      0x02, 0x7e, 0x00, 0x01, /* AsyncEvent, AsyncVCode, Parameter1 */
      0x00, 0x02, 0x00, 0x14, /* Parameter2, Parameter3 */
      0x00, 0x00, 0x00, 0x00},
     R(2, 3) | R(20, 23) | R(44, 47),
     0x7f},
    {"Reject",
     {.opcode = ISCSI_OP_REJECT,
      .final = true,
      .dlength = ISCSI_BHS_LEN,
      .itt = 0xffffffff,
      .reject = {.reason = ISCSI_REJECT_INVALID_PDU_FIELD,
		 .statsn = 0x10,
		 .expcmdsn = 0x20,
		 .maxcmdsn = 0x30,
		 .datasn = 4}},
     {0x3f, 0x80, 0x09, 0x00,		  /* Reason 9 */
      0x00, 0x00, 0x00, 0x30,		  /* DSL 48 */
      0,    0,	  0,	0,    0, 0, 0, 0, /* reserved */
      0xff, 0xff, 0xff, 0xff,		  /* 0xffffffff */
      0x00, 0x00, 0x00, 0x00,		  /* reserved */
      0x00, 0x00, 0x00, 0x10,		  /* StatSN */
      0x00, 0x00, 0x00, 0x20,		  /* ExpCmdSN */
      0x00, 0x00, 0x00, 0x30,		  /* MaxCmdSN */
      0x00, 0x00, 0x00, 0x04,		  /* DataSN/R2TSN */
      0,    0,	  0,	0,    0, 0, 0, 0},
     R(3, 3) | R(8, 15) | R(20, 23) | R(40, 47),
     0x7f},
    {"NOP-In",
     {.opcode = ISCSI_OP_NOP_IN,
      .final = true,
      .itt = 0xffffffff,
      .nop_in = {.lun = 0x0007000000000000ULL,
		 .ttt = 0x321,
		 .statsn = 0x11,
		 .expcmdsn = 0x22,
		 .maxcmdsn = 0x33}},
     {0x20, 0x80, 0x00, 0x00, /* */
      0x00, 0x00, 0x00, 0x00, /* */
      0x00, 0x07, 0x00, 0x00, /* LUN */
      0x00, 0x00, 0x00, 0x00, /* */
      0xff, 0xff, 0xff, 0xff, /* ITT */
      0x00, 0x00, 0x03, 0x21, /* TTT */
      0x00, 0x00, 0x00, 0x11, /* StatSN */
      0x00, 0x00, 0x00, 0x22, /* ExpCmdSN */
      0x00, 0x00, 0x00, 0x33, /* MaxCmdSN */
      0,    0,	  0,	0,    0, 0, 0, 0, 0, 0, 0, 0},
     R(2, 3) | R(36, 47),
     0x7f},
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* Name of the first field that differs, or NULL. Field by field (never memcmp of the structs:
 * padding bytes are unspecified). */
static const char *hdr_diff(const struct iscsi_hdr *a, const struct iscsi_hdr *b)
{
#define F(f)                                                                                       \
	do {                                                                                       \
		if (a->f != b->f)                                                                  \
			return #f;                                                                 \
	} while (0)
#define A(f)                                                                                       \
	do {                                                                                       \
		if (memcmp(a->f, b->f, sizeof(a->f)))                                              \
			return #f;                                                                 \
	} while (0)

	F(opcode);
	F(immediate);
	F(final);
	F(total_ahs_len);
	F(dlength);
	F(itt);
	switch (a->opcode) {
	case ISCSI_OP_NOP_OUT:
		F(nop_out.lun);
		F(nop_out.ttt);
		F(nop_out.cmdsn);
		F(nop_out.expstatsn);
		break;
	case ISCSI_OP_NOP_IN:
		F(nop_in.lun);
		F(nop_in.ttt);
		F(nop_in.statsn);
		F(nop_in.expcmdsn);
		F(nop_in.maxcmdsn);
		break;
	case ISCSI_OP_SCSI_CMD:
		F(cmd.read);
		F(cmd.write);
		F(cmd.attr);
		F(cmd.lun);
		F(cmd.edtl);
		F(cmd.cmdsn);
		F(cmd.expstatsn);
		A(cmd.cdb);
		break;
	case ISCSI_OP_SCSI_RSP:
		F(rsp.flags);
		F(rsp.response);
		F(rsp.status);
		F(rsp.snack_tag);
		F(rsp.statsn);
		F(rsp.expcmdsn);
		F(rsp.maxcmdsn);
		F(rsp.expdatasn);
		F(rsp.bidi_residual);
		F(rsp.residual);
		break;
	case ISCSI_OP_TMF_REQ:
		F(tmf_req.function);
		F(tmf_req.lun);
		F(tmf_req.rtt);
		F(tmf_req.cmdsn);
		F(tmf_req.expstatsn);
		F(tmf_req.refcmdsn);
		F(tmf_req.expdatasn);
		break;
	case ISCSI_OP_TMF_RSP:
		F(tmf_rsp.response);
		F(tmf_rsp.statsn);
		F(tmf_rsp.expcmdsn);
		F(tmf_rsp.maxcmdsn);
		break;
	case ISCSI_OP_LOGIN_REQ:
		F(login_req.transit);
		F(login_req.cont);
		F(login_req.csg);
		F(login_req.nsg);
		F(login_req.version_max);
		F(login_req.version_min);
		A(login_req.isid);
		F(login_req.tsih);
		F(login_req.cid);
		F(login_req.cmdsn);
		F(login_req.expstatsn);
		break;
	case ISCSI_OP_LOGIN_RSP:
		F(login_rsp.transit);
		F(login_rsp.cont);
		F(login_rsp.csg);
		F(login_rsp.nsg);
		F(login_rsp.version_max);
		F(login_rsp.version_active);
		A(login_rsp.isid);
		F(login_rsp.tsih);
		F(login_rsp.statsn);
		F(login_rsp.expcmdsn);
		F(login_rsp.maxcmdsn);
		F(login_rsp.status);
		break;
	case ISCSI_OP_TEXT_REQ:
		F(text_req.cont);
		F(text_req.lun);
		F(text_req.ttt);
		F(text_req.cmdsn);
		F(text_req.expstatsn);
		break;
	case ISCSI_OP_TEXT_RSP:
		F(text_rsp.cont);
		F(text_rsp.lun);
		F(text_rsp.ttt);
		F(text_rsp.statsn);
		F(text_rsp.expcmdsn);
		F(text_rsp.maxcmdsn);
		break;
	case ISCSI_OP_DATA_OUT:
		F(data_out.lun);
		F(data_out.ttt);
		F(data_out.expstatsn);
		F(data_out.datasn);
		F(data_out.offset);
		break;
	case ISCSI_OP_DATA_IN:
		F(data_in.ack);
		F(data_in.status_present);
		F(data_in.flags);
		F(data_in.status);
		F(data_in.lun);
		F(data_in.ttt);
		F(data_in.statsn);
		F(data_in.expcmdsn);
		F(data_in.maxcmdsn);
		F(data_in.datasn);
		F(data_in.offset);
		F(data_in.residual);
		break;
	case ISCSI_OP_LOGOUT_REQ:
		F(logout_req.reason);
		F(logout_req.cid);
		F(logout_req.cmdsn);
		F(logout_req.expstatsn);
		break;
	case ISCSI_OP_LOGOUT_RSP:
		F(logout_rsp.response);
		F(logout_rsp.statsn);
		F(logout_rsp.expcmdsn);
		F(logout_rsp.maxcmdsn);
		F(logout_rsp.time2wait);
		F(logout_rsp.time2retain);
		break;
	case ISCSI_OP_SNACK_REQ:
		F(snack.type);
		F(snack.lun);
		F(snack.ttt);
		F(snack.expstatsn);
		F(snack.begrun);
		F(snack.runlength);
		break;
	case ISCSI_OP_R2T:
		F(r2t.lun);
		F(r2t.ttt);
		F(r2t.statsn);
		F(r2t.expcmdsn);
		F(r2t.maxcmdsn);
		F(r2t.r2tsn);
		F(r2t.offset);
		F(r2t.ddtl);
		break;
	case ISCSI_OP_ASYNC_MSG:
		F(async.lun);
		F(async.statsn);
		F(async.expcmdsn);
		F(async.maxcmdsn);
		F(async.event);
		F(async.vcode);
		F(async.param1);
		F(async.param2);
		F(async.param3);
		break;
	case ISCSI_OP_REJECT:
		F(reject.reason);
		F(reject.statsn);
		F(reject.expcmdsn);
		F(reject.maxcmdsn);
		F(reject.datasn);
		break;
	default:
		return "opcode not covered by hdr_diff";
	}
	return NULL;
#undef F
#undef A
}

static void check_diff(const char *what, const struct iscsi_hdr *got, const struct iscsi_hdr *exp)
{
	const char *d = hdr_diff(got, exp);

	tap_n++;
	if (!d) {
		printf("ok %d - %s\n", tap_n, what);
	} else {
		tap_failed++;
		printf("not ok %d - %s: field %s differs\n", tap_n, what, d);
	}
}

static void test_table(void)
{
	char what[128];

	for (size_t i = 0; i < N_CASES; i++) {
		const struct pdu_case *c = &cases[i];
		uint8_t out[ISCSI_BHS_LEN], dirty[ISCSI_BHS_LEN];
		struct iscsi_hdr h;

		memset(out, 0xaa, sizeof(out));
		CHECK_EQ(iscsi_hdr_pack(&c->h, out), 0);
		snprintf(what, sizeof(what), "pack %s", c->name);
		tap_n++;
		if (memcmp(out, c->bytes, ISCSI_BHS_LEN) == 0) {
			printf("ok %d - %s\n", tap_n, what);
		} else {
			tap_failed++;
			printf("not ok %d - %s\n#  got: ", tap_n, what);
			for (int k = 0; k < ISCSI_BHS_LEN; k++)
				printf("%02x%s", out[k], k % 4 == 3 ? " " : "");
			printf("\n");
		}

		memset(&h, 0x5a, sizeof(h));
		CHECK_EQ(iscsi_hdr_unpack(c->bytes, &h), 0);
		snprintf(what, sizeof(what), "unpack %s", c->name);
		check_diff(what, &h, &c->h);

		/* Reserved bytes and reserved bit 7 of byte 0 set: unpack must ignore them. For
		 * target opcodes bit 6 (I) is reserved too. */
		memcpy(dirty, c->bytes, ISCSI_BHS_LEN);
		dirty[0] |= 0x80;
		if (!iscsi_opcode_is_initiator(c->h.opcode))
			dirty[0] |= 0x40;
		dirty[1] |= c->rsvd1;
		for (int k = 0; k < ISCSI_BHS_LEN; k++) {
			if (c->rsvd & (1ULL << k))
				dirty[k] = 0xff;
		}
		CHECK_EQ(iscsi_hdr_unpack(dirty, &h), 0);
		snprintf(what, sizeof(what), "unpack %s with reserved bytes set", c->name);
		check_diff(what, &h, &c->h);
	}
}

/* Every opcode in enum iscsi_opcode has a row. */
static void test_table_covers_all_opcodes(void)
{
	static const uint8_t ops[] = {
	    ISCSI_OP_NOP_OUT,	ISCSI_OP_SCSI_CMD, ISCSI_OP_TMF_REQ,	ISCSI_OP_LOGIN_REQ,
	    ISCSI_OP_TEXT_REQ,	ISCSI_OP_DATA_OUT, ISCSI_OP_LOGOUT_REQ, ISCSI_OP_SNACK_REQ,
	    ISCSI_OP_NOP_IN,	ISCSI_OP_SCSI_RSP, ISCSI_OP_TMF_RSP,	ISCSI_OP_LOGIN_RSP,
	    ISCSI_OP_TEXT_RSP,	ISCSI_OP_DATA_IN,  ISCSI_OP_LOGOUT_RSP, ISCSI_OP_R2T,
	    ISCSI_OP_ASYNC_MSG, ISCSI_OP_REJECT,
	};

	for (size_t i = 0; i < sizeof(ops); i++) {
		bool found = false;

		for (size_t k = 0; k < N_CASES; k++)
			found |= cases[k].h.opcode == ops[i];
		CHECK(found);
	}
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i])
			return false;
	}
	return true;
}

static void test_pack_rules(void)
{
	struct iscsi_hdr h;
	uint8_t b[ISCSI_BHS_LEN];

	/* F is fixed at 1 for NOP-Out even if the caller forgot it. */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_NOP_OUT;
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[0], 0x00);
	CHECK_EQ(b[1], 0x80);

	/* ... but not for SCSI Command or Data-Out, where F=0 means more data follows. */
	h.opcode = ISCSI_OP_DATA_OUT;
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[1], 0x00);

	/* The I bit is not sent on target opcodes. */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_NOP_IN;
	h.immediate = true;
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[0], 0x20);

	/* Login Request always carries I; bit 7 is T from .transit, not .final. */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_REQ;
	h.final = true;
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[0], 0x43);
	CHECK_EQ(b[1], 0x00);
	h.final = false;
	h.login_req.transit = true;
	h.login_req.csg = 1;
	h.login_req.nsg = 1;
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[1], 0x85);
	CHECK_EQ(iscsi_hdr_unpack(b, &h), 0);
	CHECK(h.final && h.login_req.transit && h.immediate);

	/* Largest DSL fits, one more does not; -EINVAL leaves the buffer zeroed. */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_SCSI_CMD;
	h.dlength = ISCSI_MAX_DSL;
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK(b[5] == 0xff && b[6] == 0xff && b[7] == 0xff && b[4] == 0);
	h.dlength = ISCSI_MAX_DSL + 1;
	memset(b, 0xee, sizeof(b));
	CHECK_EQ(iscsi_hdr_pack(&h, b), -EINVAL);
	CHECK(all_zero(b, sizeof(b)));
}

static void test_pack_invalid_fields(void)
{
	struct {
		const char *name;
		struct iscsi_hdr h;
	} bad[] = {
	    {"unknown opcode 0x07", {.opcode = 0x07}},
	    {"vendor opcode 0x1c", {.opcode = 0x1c}},
	    {"opcode above 6 bits", {.opcode = 0x41}},
	    {"task attr 5..7 fit, 8 does not", {.opcode = ISCSI_OP_SCSI_CMD, .cmd.attr = 8}},
	    {"TMF function 128", {.opcode = ISCSI_OP_TMF_REQ, .tmf_req.function = 0x80}},
	    {"logout reason 128", {.opcode = ISCSI_OP_LOGOUT_REQ, .logout_req.reason = 0x80}},
	    {"SNACK type 16", {.opcode = ISCSI_OP_SNACK_REQ, .snack.type = 0x10}},
	    {"login CSG 4", {.opcode = ISCSI_OP_LOGIN_REQ, .login_req.csg = 4}},
	    {"login NSG 4", {.opcode = ISCSI_OP_LOGIN_RSP, .login_rsp.nsg = 4}},
	    {"response flag 0x01", {.opcode = ISCSI_OP_SCSI_RSP, .rsp.flags = 0x01}},
	    {"response flag 0x80", {.opcode = ISCSI_OP_SCSI_RSP, .rsp.flags = 0x80}},
	    {"Data-In flag S via flags", {.opcode = ISCSI_OP_DATA_IN, .data_in.flags = 0x01}},
	    {"Data-In flag o", {.opcode = ISCSI_OP_DATA_IN, .data_in.flags = 0x10}},
	};
	uint8_t b[ISCSI_BHS_LEN];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(b, 0xee, sizeof(b));
		tap_n++;
		if (iscsi_hdr_pack(&bad[i].h, b) == -EINVAL && all_zero(b, sizeof(b))) {
			printf("ok %d - pack rejects %s\n", tap_n, bad[i].name);
		} else {
			tap_failed++;
			printf("not ok %d - pack rejects %s\n", tap_n, bad[i].name);
		}
	}

	/* The largest values that do fit are accepted. */
	struct iscsi_hdr h = {.opcode = ISCSI_OP_SCSI_CMD, .cmd.attr = 7};

	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[1], 0x07);
	h = (struct iscsi_hdr){.opcode = ISCSI_OP_SNACK_REQ, .snack.type = 0x0f};
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[1], 0x8f);
	h = (struct iscsi_hdr){.opcode = ISCSI_OP_TMF_REQ, .tmf_req.function = 0x7f};
	CHECK_EQ(iscsi_hdr_pack(&h, b), 0);
	CHECK_EQ(b[1], 0xff);
}

static void test_unpack_unknown(void)
{
	/* Vendor-specific opcode 0x1c, immediate, F, AHS 1 word, DSL 0x010203, ITT 0x0a0b0c0d. */
	static const uint8_t b[ISCSI_BHS_LEN] = {
	    0x5c, 0x80, 0x12, 0x34, 0x01, 0x01, 0x02, 0x03, 0,	  0,
	    0,	  0,	0,    0,    0,	  0,	0x0a, 0x0b, 0x0c, 0x0d,
	};
	struct iscsi_hdr h;

	CHECK_EQ(iscsi_hdr_unpack(b, &h), -EBADMSG);
	CHECK_EQ(h.opcode, 0x1c);
	CHECK(h.immediate);
	CHECK(h.final);
	CHECK_EQ(h.total_ahs_len, 1);
	CHECK_EQ(h.dlength, 0x010203);
	CHECK_EQ(h.itt, 0x0a0b0c0d);

	/* Reserved initiator opcode 0x07 and target opcode 0x27 */
	uint8_t c[ISCSI_BHS_LEN] = {0x07};

	CHECK_EQ(iscsi_hdr_unpack(c, &h), -EBADMSG);
	c[0] = 0x27;
	CHECK_EQ(iscsi_hdr_unpack(c, &h), -EBADMSG);
	CHECK_EQ(h.opcode, 0x27);
	CHECK(!h.immediate);
}

static void test_opcode_names(void)
{
	CHECK_STR(iscsi_opcode_name(ISCSI_OP_SCSI_CMD), "SCSI Command");
	CHECK_STR(iscsi_opcode_name(ISCSI_OP_NOP_OUT), "NOP-Out");
	CHECK_STR(iscsi_opcode_name(ISCSI_OP_REJECT), "Reject");
	CHECK_STR(iscsi_opcode_name(ISCSI_OP_R2T), "R2T");
	CHECK_STR(iscsi_opcode_name(0x07), "unknown");
	CHECK_STR(iscsi_opcode_name(0x1c), "unknown");
	CHECK_STR(iscsi_opcode_name(0x40), "unknown");
	CHECK_STR(iscsi_opcode_name(0xff), "unknown");
	CHECK(iscsi_opcode_is_initiator(ISCSI_OP_SNACK_REQ));
	CHECK(!iscsi_opcode_is_initiator(ISCSI_OP_NOP_IN));
}

/* --- AHS --- */

static void test_ahs_build(void)
{
	uint8_t ext[16], out[64];
	int i;

	for (i = 0; i < 16; i++)
		ext[i] = (uint8_t)(0x10 + i);

	/* 32-byte CDB: 16 extra bytes, AHSLength = 17, 3 + 17 = 20 bytes, no padding. */
	static const uint8_t exp16[] = {0x00, 0x11, 0x01, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
					0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f};
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(iscsi_ahs_build_ext_cdb(ext, 16, out, sizeof(out)), 20);
	CHECK_MEM(out, exp16, sizeof(exp16));

	/* 5 extra bytes: AHSLength 6, 9 bytes, padded to 12 with zeros. */
	static const uint8_t exp5[] = {0x00, 0x06, 0x01, 0x00, 0x10, 0x11,
				       0x12, 0x13, 0x14, 0x00, 0x00, 0x00};
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(iscsi_ahs_build_ext_cdb(ext, 5, out, sizeof(out)), 12);
	CHECK_MEM(out, exp5, sizeof(exp5));
	CHECK_EQ(out[12], 0xee); /* nothing written past the AHS */

	/* 1 extra byte: AHSLength 2, padded to 8. */
	static const uint8_t exp1[] = {0x00, 0x02, 0x01, 0x00, 0x10, 0x00, 0x00, 0x00};
	CHECK_EQ(iscsi_ahs_build_ext_cdb(ext, 1, out, 8), 8);
	CHECK_MEM(out, exp1, sizeof(exp1));

	CHECK_EQ(iscsi_ahs_build_ext_cdb(ext, 5, out, 11), -ENOSPC);
	CHECK_EQ(iscsi_ahs_build_ext_cdb(ext, 0, out, sizeof(out)), -EINVAL);
	CHECK_EQ(iscsi_ahs_build_ext_cdb(ext, ISCSI_MAX_CDB_LEN - 15, out, sizeof(out)), -EINVAL);

	static const uint8_t expb[] = {0x00, 0x05, 0x02, 0x00, 0x12, 0x34, 0x56, 0x78};
	memset(out, 0xee, sizeof(out));
	CHECK_EQ(iscsi_ahs_build_bidi_read_len(0x12345678, out, 8), 8);
	CHECK_MEM(out, expb, sizeof(expb));
	CHECK_EQ(iscsi_ahs_build_bidi_read_len(1, out, 7), -ENOSPC);
}

static void test_ahs_parse(void)
{
	struct iscsi_ahs_info info;

	/* bidi read length, then a 5-byte extended CDB, then an unknown type (skipped) */
	static const uint8_t both[] = {
	    0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x00, /* bidi: 65536 */
	    0x00, 0x06, 0x01, 0x00, 0xa0, 0xa1, 0xa2, 0xa3, /* ext CDB */
	    0xa4, 0x00, 0x00, 0x00,			    /* */
	    0x00, 0x01, 0x3c, 0x00,			    /* type 60, AHSLength 1 */
	};
	CHECK_EQ(iscsi_ahs_parse(both, sizeof(both), &info), 0);
	CHECK(info.has_bidi_read_len);
	CHECK_EQ(info.bidi_read_len, 0x10000);
	CHECK(info.ext_cdb == both + 12);
	CHECK_EQ(info.ext_cdb_len, 5);

	/* empty area */
	memset(&info, 0x5a, sizeof(info));
	CHECK_EQ(iscsi_ahs_parse(both, 0, &info), 0);
	CHECK(!info.ext_cdb && info.ext_cdb_len == 0 && !info.has_bidi_read_len);

	/* unknown type with AHSLength 0 occupies one word */
	static const uint8_t unk0[] = {0x00, 0x00, 0x05, 0x00};
	CHECK_EQ(iscsi_ahs_parse(unk0, sizeof(unk0), &info), 0);
	CHECK(!info.ext_cdb && !info.has_bidi_read_len);

	/* largest extended CDB: 244 bytes, AHSLength 245, 248 bytes */
	uint8_t big[252] = {0x00, 0xf5, 0x01, 0x00};
	CHECK_EQ(iscsi_ahs_parse(big, 248, &info), 0);
	CHECK_EQ(info.ext_cdb_len, 244);
	big[1] = 0xf6; /* 245 CDB bytes: CDB of 261 bytes */
	CHECK_EQ(iscsi_ahs_parse(big, 252, &info), -EBADMSG);

	struct {
		const char *name;
		uint8_t b[16];
		size_t len;
	} bad[] = {
	    {"area not a multiple of 4", {0x00, 0x01, 0x05, 0x00, 0, 0}, 6},
	    {"AHSLength past the area", {0x00, 0x10, 0x01, 0x00, 1, 2, 3, 4}, 8},
	    {"AHSLength 0xffff", {0xff, 0xff, 0x01, 0x00}, 4},
	    {"padding past the area", {0x00, 0x02, 0x3c, 0x00}, 4},
	    {"second AHS runs past", {0x00, 0x01, 0x3c, 0x00, 0x00, 0x05, 0x02, 0x00}, 8},
	    {"bidi AHSLength 4", {0x00, 0x04, 0x02, 0x00, 0, 0, 0, 1}, 8},
	    {"bidi AHSLength 9", {0x00, 0x09, 0x02, 0x00, 0, 0, 0, 1, 0, 0, 0, 0}, 12},
	    {"ext CDB with no CDB byte", {0x00, 0x01, 0x01, 0x00}, 4},
	    {"two bidi AHSs",
	     {0x00, 0x05, 0x02, 0x00, 0, 0, 0, 1, 0x00, 0x05, 0x02, 0x00, 0, 0, 0, 2},
	     16},
	    {"two ext CDB AHSs",
	     {0x00, 0x02, 0x01, 0x00, 0xa0, 0, 0, 0, 0x00, 0x02, 0x01, 0x00, 0xa1, 0, 0, 0},
	     16},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tap_n++;
		if (iscsi_ahs_parse(bad[i].b, bad[i].len, &info) == -EBADMSG) {
			printf("ok %d - AHS parse rejects %s\n", tap_n, bad[i].name);
		} else {
			tap_failed++;
			printf("not ok %d - AHS parse rejects %s\n", tap_n, bad[i].name);
		}
	}
}

/* What the builders produce, the parser reads back. */
static void test_ahs_build_parse(void)
{
	uint8_t area[64], ext[11];
	struct iscsi_ahs_info info;
	int a, b;

	for (int i = 0; i < 11; i++)
		ext[i] = (uint8_t)(0xc0 + i);
	a = iscsi_ahs_build_ext_cdb(ext, sizeof(ext), area, sizeof(area));
	CHECK_EQ(a, 16);
	b = iscsi_ahs_build_bidi_read_len(0xfeedf00d, area + a, sizeof(area) - (size_t)a);
	CHECK_EQ(b, 8);
	CHECK_EQ(iscsi_ahs_parse(area, (size_t)(a + b), &info), 0);
	CHECK_EQ(info.ext_cdb_len, 11);
	CHECK(info.ext_cdb && memcmp(info.ext_cdb, ext, 11) == 0);
	CHECK(info.has_bidi_read_len);
	CHECK_EQ(info.bidi_read_len, 0xfeedf00d);
}

int main(void)
{
	test_table();
	test_table_covers_all_opcodes();
	test_pack_rules();
	test_pack_invalid_fields();
	test_unpack_unknown();
	test_opcode_names();
	test_ahs_build();
	test_ahs_parse();
	test_ahs_build_parse();
	return tap_done();
}
