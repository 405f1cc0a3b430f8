/* Persistent reservation state shared by gateways through one RADOS object (ha_pr.c): the
 * object's format, pure (no librados here, so unit tests and the fuzz harness use it as is).
 *
 *   ix-pr-rados <1|2>
 *   epoch <16 hex>               random, set when the object is created
 *   seq <decimal u64>            bumped by every write in the epoch: orders notifies
 *   generation <decimal u32>     PRGENERATION
 *   aptpl <0|1>                  the last APTPL bit received (the object is always persistent)
 *   type <0|1|3|5|6|7|8>
 *   spc2 <gid, 16 hex> <initiator port> <target port>    (version 2 only, and always there)
 *   reg <key, 16 hex> <holder 0|1> <initiator port> <target port>    (any number)
 *   ua <asc, 2 hex> <ascq, 2 hex> <initiator port> <target port>     (notify payloads only)
 *   abort <initiator port> <target port>                             (notify payloads only)
 *   sum <FNV-1a 64 of every byte before this line, 16 hex>
 *
 * The stored object never holds "ua" or "abort" lines; a notify payload is the object as
 * written plus the unit attentions the PERSISTENT RESERVE OUT established, so that every
 * gateway queues those of its own nexuses, and for PREEMPT AND ABORT the nexuses whose tasks
 * every gateway aborts before it acknowledges. Both kinds come after the registrations, in any
 * order. Version 2 is version 1 plus the SPC-2 reservation (RESERVE(6)/(10)): its holder's
 * I_T nexus and the RADOS client id (gid) of the gateway it was made through. An object is
 * written as version 1 whenever no SPC-2 reservation is held, byte for byte as before it
 * existed, so gateways that only know version 1 read it until somebody uses RESERVE(6); they
 * refuse version 2 as an unknown version. Decoding trusts nothing: bytes, lines, fields, the
 * checksum, and that the
 * registrations form a state the device server could have produced. (A gateway built before
 * "abort" lines existed cannot read such a payload: it logs it and reads the object, so it
 * takes the state but neither the unit attentions nor the aborts.) */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_pr_obj.h"
#include "util/bytes.h"

#define OBJ_MAGIC  "ix-pr-rados 1"
#define OBJ_MAGIC2 "ix-pr-rados 2" /* with the SPC-2 reservation */

/* ---- encode ---- */

int ha_pr_obj_encode(const struct pr_state *st, const struct ha_pr_obj_ver *v,
		     const struct pr_effects *fx, char **out, size_t *len)
{
	struct pr_text b = {0};

	pr_text_printf(&b,
		       "%s\nepoch %016" PRIx64 "\nseq %" PRIu64 "\ngeneration %" PRIu32
		       "\naptpl %d\ntype %u\n",
		       st->spc2_iport ? OBJ_MAGIC2 : OBJ_MAGIC, v->epoch, v->seq, st->generation,
		       st->aptpl ? 1 : 0, st->type);
	if (st->spc2_iport)
		pr_text_printf(&b, "spc2 %016" PRIx64 " %s %s\n", st->spc2_gid, st->spc2_iport,
			       st->spc2_tport);
	for (size_t i = 0; i < st->nregs; i++)
		pr_text_printf(&b, "reg %016" PRIx64 " %d %s %s\n", st->regs[i].key,
			       st->regs[i].holder ? 1 : 0, st->regs[i].iport, st->regs[i].tport);
	for (size_t i = 0; fx && i < fx->nua; i++)
		pr_text_printf(&b, "ua %02x %02x %s %s\n", fx->ua[i].asc, fx->ua[i].ascq,
			       fx->ua[i].iport, fx->ua[i].tport);
	for (size_t i = 0; fx && i < fx->nabort; i++)
		pr_text_printf(&b, "abort %s %s\n", fx->abort[i].iport, fx->abort[i].tport);
	if (!b.oom)
		pr_text_printf(&b, "sum %016" PRIx64 "\n", fnv1a64(FNV1A64_INIT, b.p, b.n));
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.n;
	return 0;
}

/* ---- decode ---- */

struct dctx {
	char *err;
	size_t errlen;
	unsigned line;
};

static int bad(struct dctx *c, const char *what)
{
	if (c->line)
		snprintf(c->err, c->errlen, "line %u: %s", c->line, what);
	else
		snprintf(c->err, c->errlen, "%s", what);
	return -EINVAL;
}

/* "word <number>" (base 10, or 16 with exactly 16 digits) into *out. */
static int field(struct dctx *c, const char *line, const char *word, int base, uint64_t max,
		 uint64_t *out)
{
	size_t n = strlen(word);
	char msg[64];

	if (strncmp(line, word, n) != 0 || line[n] != ' ' ||
	    (base == 16 && strlen(line + n + 1) != 16) ||
	    pr_parse_u64(line + n + 1, base, max, out)) {
		snprintf(msg, sizeof(msg), "expected \"%s <%s>\"", word,
			 base == 16 ? "16 hex digits" : "number");
		return bad(c, msg);
	}
	return 0;
}

/* Split line at blanks into exactly n fields. */
static bool split(char *line, char **f, int n)
{
	char *save = NULL;
	int nf = 0;

	for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (nf == n)
			return false;
		f[nf++] = t;
	}
	return nf == n;
}

static int ports(struct dctx *c, char *ip, char *tp)
{
	if (!pr_port_name_ok(ip, true))
		return bad(c, "malformed initiator port (want <name>,i,0x<isid>)");
	if (!pr_port_name_ok(tp, false))
		return bad(c, "malformed target port (want <name>,t,0x<tpgt>)");
	return 0;
}

static int parse_reg(struct dctx *c, char *line, struct pr_state *st)
{
	char *f[5];
	uint64_t key, holder;
	struct pr_nexus_id id;
	int rc;

	if (!split(line, f, 5) || strcmp(f[0], "reg") != 0)
		return bad(c, "expected \"reg <key> <holder> <initiator port> <target port>\"");
	if (strlen(f[1]) != 16 || pr_parse_u64(f[1], 16, UINT64_MAX, &key) || key == 0)
		return bad(c, "reservation key must be 16 hex digits, not zero");
	if (pr_parse_u64(f[2], 10, 1, &holder))
		return bad(c, "holder must be 0 or 1");
	if ((rc = ports(c, f[3], f[4])))
		return rc;
	id = (struct pr_nexus_id){f[3], f[4]};
	if (pr_find(st, &id) >= 0)
		return bad(c, "the same I_T nexus is registered twice");
	if (st->nregs >= PR_MAX_REGS)
		return bad(c, "too many registrations");
	rc = pr_state_add_reg(st, key, &id);
	if (rc)
		return rc;
	st->regs[st->nregs - 1].holder = holder;
	return 0;
}

static int parse_ua(struct dctx *c, char *line, struct pr_effects *fx)
{
	char *f[5];
	uint64_t asc, ascq;
	int rc;

	if (!fx)
		return bad(c, "a unit attention line in the stored object");
	if (!split(line, f, 5) || strcmp(f[0], "ua") != 0 || strlen(f[1]) != 2 ||
	    strlen(f[2]) != 2 || pr_parse_u64(f[1], 16, 0xff, &asc) ||
	    pr_parse_u64(f[2], 16, 0xff, &ascq))
		return bad(c, "expected \"ua <asc> <ascq> <initiator port> <target port>\"");
	if ((rc = ports(c, f[3], f[4])))
		return rc;
	if (fx->nua >= 4 * PR_MAX_REGS)
		return bad(c, "too many unit attentions");
	return pr_effects_add_ua(fx, f[3], f[4], (uint8_t)asc, (uint8_t)ascq);
}

static int parse_abort(struct dctx *c, char *line, struct pr_effects *fx)
{
	char *f[3];
	int rc;

	if (!fx)
		return bad(c, "an abort line in the stored object");
	if (!split(line, f, 3) || strcmp(f[0], "abort") != 0)
		return bad(c, "expected \"abort <initiator port> <target port>\"");
	if ((rc = ports(c, f[1], f[2])))
		return rc;
	if (fx->nabort >= PR_MAX_REGS)
		return bad(c, "too many aborts");
	return pr_effects_add_abort(fx, f[1], f[2]);
}

/* Version 2's "spc2 <gid> <initiator port> <target port>". */
static int parse_spc2(struct dctx *c, char *line, struct pr_state *st)
{
	char *f[4];
	uint64_t gid;
	int rc;

	if (!split(line, f, 4) || strcmp(f[0], "spc2") != 0)
		return bad(c, "expected \"spc2 <gid> <initiator port> <target port>\"");
	if (strlen(f[1]) != 16 || pr_parse_u64(f[1], 16, UINT64_MAX, &gid) || gid == 0)
		return bad(c, "the SPC-2 holder's client id must be 16 hex digits, not zero");
	if ((rc = ports(c, f[2], f[3])))
		return rc;
	return pr_state_set_spc2(st, f[2], f[3], gid);
}

/* The header lines after the magic: epoch, seq, generation, aptpl, type. */
static int parse_head(struct dctx *c, const char *line, struct pr_state *st,
		      struct ha_pr_obj_ver *ver)
{
	uint64_t v;
	int rc;

	switch (c->line) {
	case 2:
		return field(c, line, "epoch", 16, UINT64_MAX, &ver->epoch);
	case 3:
		return field(c, line, "seq", 10, UINT64_MAX, &ver->seq);
	case 4:
		if ((rc = field(c, line, "generation", 10, UINT32_MAX, &v)))
			return rc;
		st->generation = (uint32_t)v;
		return 0;
	case 5:
		if ((rc = field(c, line, "aptpl", 10, 1, &v)))
			return rc;
		st->aptpl = v;
		return 0;
	default:
		if ((rc = field(c, line, "type", 10, 15, &v)))
			return rc;
		if (v != PR_TYPE_NONE && !pr_type_valid((unsigned)v))
			return bad(c, "unknown reservation type");
		st->type = (uint8_t)v;
		return 0;
	}
}

static int parse_lines(struct dctx *c, char *text, struct pr_state *st, struct ha_pr_obj_ver *v,
		       struct pr_effects *fx)
{
	char *save = NULL, *line;
	const char *why;
	bool uas = false;
	unsigned head = 6; /* header lines: version 1's; version 2 has the spc2 line too */
	int rc;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		c->line++;
		if (c->line == 1) {
			if (strcmp(line, OBJ_MAGIC2) == 0)
				head = 7;
			else if (strcmp(line, OBJ_MAGIC) != 0)
				return bad(c, "not an ix persistent reservation object (or an "
					      "unknown version)");
		} else if (c->line <= 6) {
			if ((rc = parse_head(c, line, st, v)))
				return rc;
		} else if (c->line <= head) {
			if ((rc = parse_spc2(c, line, st)))
				return rc;
		} else if (strncmp(line, "ua ", 3) == 0) {
			uas = true;
			if ((rc = parse_ua(c, line, fx)))
				return rc;
		} else if (strncmp(line, "abort ", 6) == 0) {
			uas = true;
			if ((rc = parse_abort(c, line, fx)))
				return rc;
		} else if (uas) {
			return bad(c, "a registration after the unit attentions or aborts");
		} else if ((rc = parse_reg(c, line, st))) {
			return rc;
		}
	}
	if (c->line < head)
		return bad(c, head == 6 ? "truncated before the reservation type"
					: "truncated before the SPC-2 reservation");
	why = pr_state_inconsistent(st);
	return why ? bad(c, why) : 0;
}

int ha_pr_obj_decode(const void *buf, size_t len, struct pr_state *st, struct ha_pr_obj_ver *v,
		     struct pr_effects *fx, char *err, size_t errlen)
{
	struct dctx c = {.err = err, .errlen = errlen};
	char *text, *sum;
	uint64_t want;
	int rc;

	pr_state_clear(st);
	if (fx)
		memset(fx, 0, sizeof(*fx));
	*v = (struct ha_pr_obj_ver){0, 0};
	if (len == 0 || len > HA_PR_OBJ_MAX)
		return bad(&c, len ? "larger than 256 KiB" : "empty");
	if (memchr(buf, 0, len) || ((const char *)buf)[len - 1] != '\n')
		return bad(&c, "not text ending in a newline");
	text = malloc(len);
	if (!text)
		return -ENOMEM;
	memcpy(text, buf, len - 1);
	text[len - 1] = 0;
	sum = strrchr(text, '\n');
	sum = sum ? sum + 1 : text;
	if (strncmp(sum, "sum ", 4) != 0 || strlen(sum + 4) != 16 ||
	    pr_parse_u64(sum + 4, 16, UINT64_MAX, &want)) {
		rc = bad(&c, "the last line is not \"sum <16 hex digits>\" (truncated?)");
	} else if (fnv1a64(FNV1A64_INIT, text, (size_t)(sum - text)) != want) {
		rc = bad(&c, "checksum mismatch: the object was changed or damaged");
	} else {
		*sum = 0;
		rc = parse_lines(&c, text, st, v, fx);
	}
	free(text);
	if (rc) {
		pr_state_clear(st);
		if (fx)
			pr_effects_clear(fx);
		*v = (struct ha_pr_obj_ver){0, 0};
	}
	return rc;
}

/* rados_getaddrs() gives "[v2:IP:PORT/NONCE,v1:IP:PORT/NONCE]", "v1:IP:PORT/NONCE" or plain
 * "IP:PORT/NONCE" (a client usually has one, "any:"-typed or "v1:"); the blocklist wants
 * "IP:PORT/NONCE". Takes the first address, without its type prefix. */
int ha_pr_client_addr(const char *addrs, char *out, size_t outlen)
{
	const char *s = addrs, *colon, *end;
	size_t n;

	if (*s == '[')
		s++;
	end = s + strcspn(s, ",]");
	colon = memchr(s, ':', (size_t)(end - s));
	/* a type prefix is letters and digits before the first colon: "v2", "v1", "any" */
	if (colon && colon - s <= 3 &&
	    (strncmp(s, "v1:", 3) == 0 || strncmp(s, "v2:", 3) == 0 || strncmp(s, "any:", 4) == 0))
		s = colon + 1;
	n = (size_t)(end - s);
	if (n == 0 || n >= outlen || !memchr(s, '/', n) || !memchr(s, ':', n))
		return -EINVAL;
	memcpy(out, s, n);
	out[n] = 0;
	return 0;
}
