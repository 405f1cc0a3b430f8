/* libFuzzer harness for RBD ownership's owner record and hand-over messages
 * (backend/ha_own_rec.c): whatever bytes the "ix.own.<image>" object or a notify payload holds,
 * the decoders return 0, -ENOENT (an empty object) or -EINVAL without crashing; on failure
 * the record is empty and the message set (also a snapshot request, and the holder's answer
 * to one, and the "offline"/"online" notices of a rollback with the answer to one); an accepted record or message encodes again to
 * exactly the bytes it came from (the format has one spelling). The record is tried once more
 * with a correct checksum line put in place of the last line, so that the fuzzer reaches the
 * line parser without having to forge FNV-1a sums. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ha/ha_own_rec.h"
#include "util/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void record(const uint8_t *data, size_t size)
{
	struct ha_own_rec r;
	char err[128] = "", buf[HA_OWN_REC_MAX];
	int rc = ha_own_rec_decode(data, size, &r, err, sizeof(err)), n;

	if (rc == -ENOENT && size == 0)
		return;
	if (rc) {
		if (rc != -EINVAL || !err[0] || r.gen || r.holder[0] || r.ngroups || r.nports)
			abort();
		return;
	}
	n = ha_own_rec_encode(&r, buf, sizeof(buf));
	if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
		abort();
}

/* data without its last line, plus "sum <the right value>\n". */
static void resummed(const uint8_t *data, size_t size)
{
	size_t len;
	char *buf = fuzz_resum(data, size, &len);

	if (!buf)
		return;
	record((const uint8_t *)buf, len);
	free(buf);
}

static void message(const uint8_t *data, size_t size)
{
	struct ha_own_msg m;
	char buf[HA_OWN_MSG_MAX];
	int n;

	(void)ha_own_reply_kind(data, size);
	if (ha_own_msg_decode(data, size, &m) != 0) {
		if (m.kind || m.gid || m.group || m.window_ms || m.ask)
			abort();
		return;
	}
	n = ha_own_msg_encode(&m, buf, sizeof(buf));
	if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
		abort();
}

/* The holder's answer to a snapshot request: accepted ones encode back to the same bytes. */
static void snap_reply(const uint8_t *data, size_t size)
{
	char msg[HA_OWN_MSG_MAX], buf[HA_OWN_MSG_MAX + 32];
	unsigned held;
	int rc, n;

	if (ha_own_snap_reply_decode(data, size, &rc, &held, msg, sizeof(msg)) != 0) {
		if (rc || held || msg[0])
			abort();
		return;
	}
	if (rc > 0 || rc <= -4096 || (rc == 0 && msg[0]) || size >= sizeof(msg) - 16)
		return;
	n = ha_own_snap_reply_encode(rc, held, msg, buf, sizeof(buf));
	if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
		abort();
}

/* A gateway's answer to "offline": accepted ones encode back to the same bytes. */
static void offline_reply(const uint8_t *data, size_t size)
{
	char who[HA_OWN_MSG_MAX], buf[HA_OWN_MSG_MAX + 32];
	unsigned users;
	int rc, n;

	if (ha_own_offline_reply_decode(data, size, &rc, &users, who, sizeof(who)) != 0) {
		if (rc || users || who[0])
			abort();
		return;
	}
	if (rc > 0 || rc <= -4096 || (rc < 0 && users) || size >= sizeof(who) - 16)
		return;
	n = ha_own_offline_reply_encode(rc, users, who, buf, sizeof(buf));
	if (n < 0 || (size_t)n != size || memcmp(buf, data, size) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	record(data, size);
	resummed(data, size);
	message(data, size);
	snap_reply(data, size);
	offline_reply(data, size);
	return 0;
}
