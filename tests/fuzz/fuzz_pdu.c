/* libFuzzer harness for the BHS + AHS decoder.
 *
 * Input: 48 BHS bytes followed by whatever the fuzzer likes; the AHS area is the next
 * TotalAHSLength * 4 bytes (or fewer, if the input is shorter: the parser must refuse a
 * truncated area, not read past it). Properties checked beyond "no crash":
 *  - any header unpack accepts also packs, and pack(unpack(pack(h))) is stable;
 *  - an accepted AHS area yields pointers inside the area, and rebuilding it from what was
 *    decoded parses back to the same values.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/pdu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hdr(const uint8_t *bhs)
{
	struct iscsi_hdr h, h2;
	uint8_t out[ISCSI_BHS_LEN], again[ISCSI_BHS_LEN];
	int ret;

	ret = iscsi_hdr_unpack(bhs, &h);
	if (!iscsi_opcode_name(h.opcode))
		abort();
	if (ret != 0)
		return;
	if (iscsi_hdr_pack(&h, out) != 0)
		abort();
	if (iscsi_hdr_unpack(out, &h2) != 0 || iscsi_hdr_pack(&h2, again) != 0)
		abort();
	if (memcmp(out, again, ISCSI_BHS_LEN) != 0)
		abort();
	/* Common fields survive the round trip unchanged. */
	if (h2.opcode != h.opcode || h2.dlength != h.dlength || h2.itt != h.itt ||
	    h2.total_ahs_len != h.total_ahs_len)
		abort();
}

static void check_ahs(const uint8_t *area, size_t len)
{
	struct iscsi_ahs_info info, info2;
	uint8_t rebuilt[ISCSI_MAX_CDB_LEN + 16];
	int n = 0, m;

	if (iscsi_ahs_parse(area, len, &info) != 0)
		return;
	if (info.ext_cdb) {
		if (info.ext_cdb < area || info.ext_cdb_len == 0 ||
		    info.ext_cdb_len > ISCSI_MAX_CDB_LEN - ISCSI_CDB_BHS_LEN ||
		    (size_t)(info.ext_cdb - area) + info.ext_cdb_len > len)
			abort();
		n = iscsi_ahs_build_ext_cdb(info.ext_cdb, info.ext_cdb_len, rebuilt,
					    sizeof(rebuilt));
		if (n <= 0)
			abort();
	}
	if (info.has_bidi_read_len) {
		m = iscsi_ahs_build_bidi_read_len(info.bidi_read_len, rebuilt + n,
						  sizeof(rebuilt) - (size_t)n);
		if (m != 8)
			abort();
		n += m;
	}
	if (iscsi_ahs_parse(rebuilt, (size_t)n, &info2) != 0)
		abort();
	if (info2.ext_cdb_len != info.ext_cdb_len ||
	    info2.has_bidi_read_len != info.has_bidi_read_len ||
	    info2.bidi_read_len != info.bidi_read_len)
		abort();
	if (info.ext_cdb && memcmp(info.ext_cdb, info2.ext_cdb, info.ext_cdb_len) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t want, len;
	uint8_t *area;

	if (size < ISCSI_BHS_LEN)
		return 0;
	check_hdr(data);

	/* Copy the AHS area to a buffer of exactly its size so any over-read is caught. */
	want = (size_t)data[4] * 4;
	len = size - ISCSI_BHS_LEN < want ? size - ISCSI_BHS_LEN : want;
	area = malloc(len ? len : 1);
	if (!area)
		return 0;
	memcpy(area, data + ISCSI_BHS_LEN, len);
	check_ahs(area, len);
	free(area);
	return 0;
}
