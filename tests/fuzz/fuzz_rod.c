/* libFuzzer harness for the token-based copy commands (src/scsi/rod.c): the parameter lists
 * of POPULATE TOKEN and WRITE USING TOKEN, the ROD token inside the latter, and RECEIVE ROD
 * TOKEN INFORMATION, on two small RAM LUs of one target context's index (copies between them
 * and within one) and a third of another context.
 *
 * Each input builds fresh LUs, takes their power-on unit attentions, and runs a sequence of records:
 *   byte 0  bits 0-1 LUN (0: 256 blocks, 1: 128 blocks, 2: another copy manager's LU, 3: LU 0
 *           again), bits 2-3 command (0 POPULATE TOKEN, 1 WRITE USING TOKEN, 2 RECEIVE ROD
 *           TOKEN INFORMATION, 3 WRITE(10) of one block at the LBA in byte 3, or with bit 7 a
 *           LU reset), bit 4: for WRITE USING TOKEN, put the last token RECEIVE ROD TOKEN
 *           INFORMATION returned at bytes 16..527 of the parameter list (so inputs reach a
 *           valid token and mutate around it), bits 5-6 the list identifier's low bits
 *   byte 1-2 the PARAMETER LIST LENGTH / ALLOCATION LENGTH (big endian)
 *   byte 3  LBA for command 3
 *   then, for commands 0 and 1, that many bytes of parameter list (zero-filled if short)
 * The data buffer is exactly as long as the CDB says, so ASan sees any access past it.
 * Checked beyond "no crash": done() fires exactly once, data-in stays within the buffer, the
 * status and sense are coherent, and a RECEIVE ROD TOKEN INFORMATION answer's lengths agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi.h"
#include "fuzz_scsi_cmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CMDS 32
#define MAX_LIST 2048


static void lu_add(struct scsi_lun_map *map, struct scsi_lu_index *ix, uint32_t lun,
		   uint64_t blocks)
{
	struct scsi_lu_cfg cfg = {.backend = BS_TYPE_RAM,
				  .size_bytes = blocks * 512,
				  .block_size = 512,
				  .thin = true,
				  .lun = lun,
				  .target_name = "iqn.2026-11.io.ix:fuzz-rod",
				  .index = ix};
	struct scsi_lu *lu;
	char err[128];

	if (scsi_lu_new(&cfg, &lu, err, sizeof(err)) != 0 || scsi_lun_map_add(map, lun, lu) != 0)
		abort(); /* fixed, valid configuration */
	scsi_lu_put(lu);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t luns[4] = {0, 1, 2, 0};
	struct scsi_lun_map *map = scsi_lun_map_new();
	struct scsi_lu_index *ix = scsi_lu_index_new(), *other = scsi_lu_index_new();
	struct scsi_nexus *nx;
	uint8_t token[512] = {0};
	size_t off = 0;

	if (!map || !ix || !other)
		abort();
	lu_add(map, ix, 0, 256);
	lu_add(map, ix, 1, 128);
	lu_add(map, other, 2, 64);
	nx = scsi_nexus_new(map, "iqn.2026-11.io.ix:i0,i,0x000000000001",
			    "iqn.2026-11.io.ix:fuzz-rod,t,0x0001");
	if (!nx)
		abort();
	for (uint32_t lun = 0; lun < 3; lun++) { /* take the power-on unit attentions */
		uint8_t tur[16] = {0};
		struct fcmd f = {.c = {.map = map,
				       .nexus = nx,
				       .lun_field = scsi_lun_encode(lun),
				       .cdb = tur,
				       .cdb_len = 16,
				       .done = fcmd_done}};

		f.c.priv = &f;
		scsi_cmd_exec(&f.c);
		fcmd_check(&f);
	}
	for (int n = 0; n < MAX_CMDS && size - off >= 4; n++) {
		uint8_t flags = data[off], op = (flags >> 2) & 3, cdb[16] = {0};
		uint32_t len = (uint32_t)data[off + 1] << 8 | data[off + 2], list_id;
		uint8_t lba = data[off + 3];
		struct fcmd f;
		uint8_t *buf = NULL;

		off += 4;
		list_id = 0x100u | ((flags >> 5) & 3);
		if (op == 3 && (flags & 0x80)) {
			scsi_lu_reset(scsi_lun_map_get(map, luns[flags & 3]), nx);
			continue;
		}
		if (op == 3)
			len = 512;
		if (len > MAX_LIST)
			len = MAX_LIST;
		if (len) {
			buf = malloc(len);
			if (!buf)
				break;
			memset(buf, 0, len);
		}
		if (op <= 1 && len) {
			size_t have = size - off < len ? size - off : len;

			memcpy(buf, data + off, have);
			off += have;
			if (op == 1 && (flags & 0x10) && len >= 16 + 512)
				memcpy(buf + 16, token, 512);
		}
		switch (op) {
		case 0:
		case 1:
			cdb[0] = 0x83;
			cdb[1] = op == 0 ? 0x10 : 0x11;
			cdb[6] = (uint8_t)(list_id >> 24);
			cdb[7] = (uint8_t)(list_id >> 16);
			cdb[8] = (uint8_t)(list_id >> 8);
			cdb[9] = (uint8_t)list_id;
			break;
		case 2:
			cdb[0] = 0x84;
			cdb[1] = 0x07;
			cdb[2] = (uint8_t)(list_id >> 24);
			cdb[3] = (uint8_t)(list_id >> 16);
			cdb[4] = (uint8_t)(list_id >> 8);
			cdb[5] = (uint8_t)list_id;
			break;
		default:
			cdb[0] = 0x2a;
			cdb[5] = lba;
			cdb[8] = 1;
			break;
		}
		if (op != 3) {
			cdb[10] = (uint8_t)(len >> 24);
			cdb[11] = (uint8_t)(len >> 16);
			cdb[12] = (uint8_t)(len >> 8);
			cdb[13] = (uint8_t)len;
		}
		memset(&f, 0, sizeof(f));
		f.c.map = map;
		f.c.nexus = nx;
		f.c.lun_field = scsi_lun_encode(luns[flags & 3]);
		f.c.cdb = cdb;
		f.c.cdb_len = 16;
		f.c.buf = buf;
		f.c.buf_len = len;
		f.c.data_out_len = op == 2 ? 0 : len;
		f.c.data_in_max = op == 2 ? len : 0;
		f.c.done = fcmd_done;
		f.c.priv = &f;
		scsi_cmd_exec(&f.c);
		fcmd_check(&f);
		if (op == 2 && f.c.status == SCSI_STATUS_GOOD && f.c.data_in_len >= 32) {
			uint32_t avail = be32(f.c.data_in);
			uint32_t at = 32u + f.c.data_in[13];

			if (avail + 4 < at + 4)
				abort(); /* AVAILABLE DATA shorter than the header and sense */
			if (f.c.data_in_len >= at + 6 + 512 && be32(f.c.data_in + at) == 514)
				memcpy(token, f.c.data_in + at + 6, 512);
		}
		free(buf);
	}
	scsi_nexus_free(nx);
	scsi_lun_map_free(map);
	scsi_lu_index_put(ix);
	scsi_lu_index_put(other);
	return 0;
}
