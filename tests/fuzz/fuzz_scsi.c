/* libFuzzer harness for the SCSI CDB dispatcher (scsi_cmd_exec) on small RAM LUs.
 *
 * Each input builds fresh LUs (so reservations, unit attentions and data never leak from one
 * input into the next) and runs a sequence of commands, as an iSCSI session would hand them
 * over. Record per command:
 *   byte 0  bits 0-1 LUN (0: 128 x 512-byte blocks, thin, write cache; 1: 16 x 4096-byte
 *           blocks, read-only; 2: no medium; 3: LUN 7, absent), bit 2 second I_T nexus,
 *           bit 3 R (data-in expected), bit 4 W (data-out), bits 5-7 task attribute
 *   byte 1  CDB length (0..64; larger means 16, what the iSCSI target always passes)
 *   2 bytes expected data transfer length (big endian)
 *   the CDB
 *   with W, EDTL bytes of data-out (zero-filled if the input runs short)
 * The data buffer is exactly EDTL bytes (NULL when 0), as the target allocates it, so ASan sees
 * any access past it.
 *
 * Properties checked beyond "no crash": done() fires exactly once (RAM completes before
 * scsi_cmd_exec returns when no thread is given); data-in stays within data_in_max and the
 * buffer; CHECK CONDITION carries fixed or descriptor sense of a sane length, other statuses
 * none; scsi_cdb_data_out_len() is callable on any CDB.
 *
 * The map has ALUA (explicit): the first nexus is on target port 1 (group 1, active/optimized),
 * the second on port 2 (group 2, active/non-optimized, so every command still runs through it
 * until a SET TARGET PORT GROUPS from the input moves a group to standby or unavailable).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi.h"
#include "fuzz_scsi_cmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CMDS 64
#define MAX_CDB	 64


static struct scsi_lu *lu_new(const struct scsi_lu_cfg *cfg_in, uint32_t lun)
{
	struct scsi_lu_cfg cfg = *cfg_in;
	struct scsi_lu *lu;
	char err[128];

	cfg.lun = lun;
	cfg.target_name = "iqn.2026-11.io.ix:fuzz";
	if (scsi_lu_new(&cfg, &lu, err, sizeof(err)) != 0)
		abort(); /* fixed, valid configuration */
	return lu;
}

static struct scsi_lun_map *map_new(void)
{
	static const struct scsi_lu_cfg cfgs[3] = {
	    {.backend = BS_TYPE_RAM, .size_bytes = 128 * 512, .block_size = 512, .thin = true,
	     .write_cache = true},
	    {.backend = BS_TYPE_RAM, .size_bytes = 16 * 4096, .block_size = 4096,
	     .readonly = true},
	    {.backend = BS_TYPE_RAM, .no_medium = true},
	};
	static const struct scsi_alua_cfg alua = {
	    .ngroups = 3,
	    .explicit_ok = true,
	    .groups = {{.id = 1, .state = SCSI_ALUA_ACTIVE_OPTIMIZED, .nports = 1, .ports = {1}},
		       {.id = 2, .state = SCSI_ALUA_ACTIVE_NON_OPTIMIZED, .nports = 1, .ports = {2}},
		       {.id = 3, .state = SCSI_ALUA_STANDBY, .nports = 2, .ports = {3, 4}}}};
	struct scsi_lun_map *map = scsi_lun_map_new();

	if (!map)
		abort();
	for (uint32_t i = 0; i < 3; i++) {
		struct scsi_lu *lu = lu_new(&cfgs[i], i);

		if (scsi_lun_map_add(map, i, lu) != 0)
			abort();
		scsi_lu_put(lu);
	}
	if (scsi_alua_configure(map, &alua) != 0)
		abort();
	return map;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t luns[4] = {0, 1, 2, 7};
	struct scsi_lun_map *map = map_new();
	struct scsi_nexus *nx[2];
	size_t off = 0;

	nx[0] = scsi_nexus_new(map, "iqn.2026-11.io.ix:i0,i,0x000000000001",
			       "iqn.2026-11.io.ix:fuzz,t,0x0001");
	nx[1] = scsi_nexus_new(map, "iqn.2026-11.io.ix:i1,i,0x000000000002",
			       "iqn.2026-11.io.ix:fuzz,t,0x0002");
	if (!nx[0] || !nx[1])
		abort();

	for (int n = 0; n < MAX_CMDS && size - off >= 4; n++) {
		uint8_t flags = data[off], cdb_len = data[off + 1];
		uint32_t edtl = (uint32_t)data[off + 2] << 8 | data[off + 3];
		struct fcmd f;
		uint8_t *cdb, *buf = NULL;

		off += 4;
		if (cdb_len > MAX_CDB)
			cdb_len = 16;
		if (size - off < cdb_len)
			break;
		cdb = malloc(cdb_len ? cdb_len : 1);
		if (!cdb)
			break;
		memcpy(cdb, data + off, cdb_len);
		off += cdb_len;
		if (edtl) {
			buf = malloc(edtl);
			if (!buf) {
				free(cdb);
				break;
			}
			memset(buf, 0xa5, edtl);
		}
		if ((flags & 0x10) && edtl) {
			size_t have = size - off < edtl ? size - off : edtl;

			memcpy(buf, data + off, have);
			off += have;
		}

		memset(&f, 0, sizeof(f));
		f.c.thread = NULL;
		f.c.map = map;
		f.c.nexus = nx[(flags >> 2) & 1];
		f.c.lun_field = scsi_lun_encode(luns[flags & 3]);
		f.c.cdb = cdb;
		f.c.cdb_len = cdb_len;
		f.c.task_attr = flags >> 5;
		f.c.buf = buf;
		f.c.buf_len = buf ? edtl : 0;
		f.c.data_out_len = (flags & 0x10) ? f.c.buf_len : 0;
		f.c.data_in_max = (flags & 0x08) ? f.c.buf_len : 0;
		f.c.done = fcmd_done;
		f.c.priv = &f;
		scsi_cmd_exec(&f.c);
		fcmd_check(&f);
		free(buf);
		free(cdb);
	}
	scsi_nexus_free(nx[0]);
	scsi_nexus_free(nx[1]);
	scsi_lun_map_free(map);
	return 0;
}
