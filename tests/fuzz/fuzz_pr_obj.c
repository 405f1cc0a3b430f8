/* libFuzzer harness for the shared persistent reservation object (scsi/ha_pr_obj.c): whatever
 * bytes a RADOS object or a notify payload holds, the decoder returns 0 or -EINVAL without
 * crashing or leaking; on -EINVAL the state, unit attentions and aborts are empty and the
 * message is set; a state it accepts encodes again to bytes that decode to the same state (a
 * fixed point after one round). Run both ways: as a stored object (no "ua" or "abort" lines)
 * and as a payload, and
 * once more with a correct checksum line put in place of the last line, so that the fuzzer
 * reaches the line parser without having to forge FNV-1a sums. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ha/ha_pr_obj.h"
#include "util/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_state(const struct pr_state *a, const struct pr_state *b)
{
	if (a->generation != b->generation || a->aptpl != b->aptpl || a->type != b->type ||
	    a->nregs != b->nregs || !a->spc2_iport != !b->spc2_iport)
		abort();
	if (a->spc2_iport && (a->spc2_gid != b->spc2_gid || strcmp(a->spc2_iport, b->spc2_iport) ||
			      strcmp(a->spc2_tport, b->spc2_tport)))
		abort();
	for (size_t i = 0; i < a->nregs; i++)
		if (a->regs[i].key != b->regs[i].key || a->regs[i].holder != b->regs[i].holder ||
		    strcmp(a->regs[i].iport, b->regs[i].iport) ||
		    strcmp(a->regs[i].tport, b->regs[i].tport))
			abort();
}

static void one(const uint8_t *data, size_t size, bool payload)
{
	struct pr_state st, again;
	struct pr_effects fx, fx2;
	struct ha_pr_obj_ver seq, seq2;
	char err[256] = "", *buf;
	size_t len;
	int rc;

	pr_state_init(&st);
	pr_state_init(&again);
	rc = ha_pr_obj_decode(data, size, &st, &seq, payload ? &fx : NULL, err, sizeof(err));
	if (rc == -ENOMEM)
		return;
	if (rc) {
		if (rc != -EINVAL || st.nregs || st.type || !err[0] ||
		    (payload && (fx.nua || fx.nabort)))
			abort();
		return;
	}
	if (ha_pr_obj_encode(&st, &seq, payload ? &fx : NULL, &buf, &len) == 0) {
		rc = ha_pr_obj_decode(buf, len, &again, &seq2, payload ? &fx2 : NULL, err,
				      sizeof(err));
		if (rc == -EINVAL || (rc == 0 && (seq2.seq != seq.seq || seq2.epoch != seq.epoch)))
			abort();
		if (rc == 0) {
			same_state(&st, &again);
			if (payload && (fx2.nua != fx.nua || fx2.nabort != fx.nabort))
				abort();
			for (size_t i = 0; payload && i < fx.nabort; i++)
				if (strcmp(fx.abort[i].iport, fx2.abort[i].iport) ||
				    strcmp(fx.abort[i].tport, fx2.abort[i].tport))
					abort();
			if (payload)
				pr_effects_clear(&fx2);
		}
		free(buf);
	}
	if (payload)
		pr_effects_clear(&fx);
	pr_state_clear(&st);
	pr_state_clear(&again);
}

/* data without its last line, plus "sum <the right value>\n". */
static void resummed(const uint8_t *data, size_t size)
{
	size_t len;
	char *buf = fuzz_resum(data, size, &len);

	if (!buf)
		return;
	one((const uint8_t *)buf, len, false);
	one((const uint8_t *)buf, len, true);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(data, size, false);
	one(data, size, true);
	resummed(data, size);
	return 0;
}
