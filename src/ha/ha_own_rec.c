/* The owner record and hand-over messages of RBD ownership (format in ha_own_rec.h). Strict:
 * a record is accepted only in the exact form the encoder writes, so a damaged or foreign
 * object is never mistaken for an owner. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ha/ha_own_rec.h"
#include "util/bytes.h"

#define REC_MAGIC "ix-own 1\n"

static int put(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *at, *at < len ? len - *at : 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *at)
		return -ENOSPC;
	*at += (size_t)n;
	return 0;
}

static int put_ids(char *buf, size_t len, size_t *at, const char *key, const uint16_t *ids,
		   unsigned n)
{
	int rc = put(buf, len, at, "%s ", key);

	if (n == 0 && rc == 0)
		rc = put(buf, len, at, "-");
	for (unsigned i = 0; i < n && rc == 0; i++)
		rc = put(buf, len, at, "%s%u", i ? "," : "", ids[i]);
	return rc ? rc : put(buf, len, at, "\n");
}

static bool holder_ok(const char *h)
{
	size_t n = strnlen(h, HA_OWN_HOLDER_MAX);

	if (n == 0 || n == HA_OWN_HOLDER_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (h[i] <= ' ' || h[i] > '~')
			return false;
	return true;
}

static bool ids_ok(const uint16_t *ids, unsigned n)
{
	if (n > HA_OWN_MAX_IDS)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (ids[i] == 0)
			return false;
	return true;
}

int ha_own_rec_encode(const struct ha_own_rec *r, char *buf, size_t len)
{
	size_t at = 0;
	int rc;

	if (!holder_ok(r->holder) || !ids_ok(r->groups, r->ngroups) ||
	    !ids_ok(r->ports, r->nports) || len == 0)
		return -EINVAL;
	rc = put(buf, len, &at, REC_MAGIC "gen %" PRIu64 "\nholder %s\ngid %" PRIu64 "\n", r->gen,
		 r->holder, r->gid);
	if (rc == 0)
		rc = put_ids(buf, len, &at, "groups", r->groups, r->ngroups);
	if (rc == 0)
		rc = put_ids(buf, len, &at, "ports", r->ports, r->nports);
	if (rc == 0)
		rc = put(buf, len, &at, "sum %016" PRIx64 "\n", fnv1a64(FNV1A64_INIT, buf, at));
	return rc ? rc : (int)at;
}

/* ---- decoding ---- */

struct rd {
	const char *p, *end;
	unsigned line;
	char *err;
	size_t errlen;
};

static int bad(struct rd *d, const char *what)
{
	snprintf(d->err, d->errlen, "line %u: %s", d->line, what);
	return -EINVAL;
}

/* The next line, without its newline, into [*s, *e); a line must end with '\n'. */
static int next_line(struct rd *d, const char **s, const char **e)
{
	const char *nl = d->p < d->end ? memchr(d->p, '\n', (size_t)(d->end - d->p)) : NULL;

	d->line++;
	if (!nl)
		return bad(d, d->p < d->end ? "no newline at the end" : "missing");
	*s = d->p;
	*e = nl;
	d->p = nl + 1;
	return 0;
}

/* "<key> <value>": the value into [*s, *e). */
static int keyed(struct rd *d, const char *key, const char **s, const char **e)
{
	size_t k = strlen(key);
	int rc = next_line(d, s, e);

	if (rc)
		return rc;
	if ((size_t)(*e - *s) <= k + 1 || memcmp(*s, key, k) != 0 || (*s)[k] != ' ')
		return bad(d, "not the expected key");
	*s += k + 1;
	return 0;
}

/* A decimal number without sign or leading zeros, at most max. */
static bool dec(const char *s, const char *e, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == e || e - s > 20 || (*s == '0' && e - s > 1))
		return false;
	for (; s < e; s++) {
		uint64_t digit = (uint64_t)(*s - '0');

		if (*s < '0' || *s > '9' || v > (UINT64_MAX - digit) / 10)
			return false;
		v = v * 10 + digit;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

static int num_line(struct rd *d, const char *key, uint64_t max, uint64_t *out)
{
	const char *s, *e;
	int rc = keyed(d, key, &s, &e);

	if (rc)
		return rc;
	return dec(s, e, max, out) ? 0 : bad(d, "not a number in range");
}

static int ids_line(struct rd *d, const char *key, uint16_t *ids, uint8_t *n)
{
	const char *s, *e;
	int rc = keyed(d, key, &s, &e);

	if (rc)
		return rc;
	*n = 0;
	if (e - s == 1 && *s == '-')
		return 0;
	for (;;) {
		const char *c = memchr(s, ',', (size_t)(e - s));
		const char *end = c ? c : e;
		uint64_t v;

		if (*n == HA_OWN_MAX_IDS)
			return bad(d, "too many");
		if (!dec(s, end, 65535, &v) || v == 0)
			return bad(d, "not an id 1-65535");
		ids[(*n)++] = (uint16_t)v;
		if (!c)
			return 0;
		s = c + 1;
	}
}

static int holder_line(struct rd *d, char *out)
{
	const char *s, *e;
	int rc = keyed(d, "holder", &s, &e);

	if (rc)
		return rc;
	if (e - s >= HA_OWN_HOLDER_MAX)
		return bad(d, "too long");
	for (const char *c = s; c < e; c++)
		if (*c <= ' ' || *c > '~') /* a NUL too: the name would not be these bytes */
			return bad(d, "not a client name");
	memcpy(out, s, (size_t)(e - s));
	out[e - s] = 0;
	return holder_ok(out) ? 0 : bad(d, "not a client name");
}

static int rec_parse(struct rd *d, struct ha_own_rec *r)
{
	const char *s, *e, *body = d->p;
	char want[17];
	uint64_t sum;
	int rc;

	body = d->p;
	if ((size_t)(d->end - d->p) < strlen(REC_MAGIC) ||
	    memcmp(d->p, REC_MAGIC, strlen(REC_MAGIC)) != 0) {
		d->line = 1;
		return bad(d, "not an ix owner record (\"ix-own 1\")");
	}
	d->p += strlen(REC_MAGIC);
	d->line = 1;
	if ((rc = num_line(d, "gen", UINT64_MAX, &r->gen)) || (rc = holder_line(d, r->holder)) ||
	    (rc = num_line(d, "gid", UINT64_MAX, &r->gid)) ||
	    (rc = ids_line(d, "groups", r->groups, &r->ngroups)) ||
	    (rc = ids_line(d, "ports", r->ports, &r->nports)))
		return rc;
	sum = fnv1a64(FNV1A64_INIT, body, (size_t)(d->p - body));
	if ((rc = keyed(d, "sum", &s, &e)))
		return rc;
	snprintf(want, sizeof(want), "%016" PRIx64, sum);
	if (e - s != 16 || memcmp(s, want, 16) != 0)
		return bad(d, "checksum mismatch");
	if (d->p != d->end)
		return bad(d, "something after the checksum");
	return 0;
}

int ha_own_rec_decode(const void *buf, size_t len, struct ha_own_rec *r, char *err, size_t errlen)
{
	struct rd d = {buf, (const char *)buf + len, 0, err, errlen};
	int rc;

	memset(r, 0, sizeof(*r));
	if (len == 0)
		return -ENOENT;
	rc = rec_parse(&d, r);
	if (rc)
		memset(r, 0, sizeof(*r));
	return rc;
}

/* ---- messages ---- */

/* A snapshot request's target: 1 to HA_OWN_TARGET_MAX - 1 printable bytes, no space. */
static bool target_ok(const char *s, size_t n)
{
	if (n == 0 || n >= HA_OWN_TARGET_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* A snapshot's name as the management API takes it (mgmt_rbd_name_ok). */
static bool snap_name_ok(const char *s, size_t n)
{
	if (n == 0 || n >= HA_OWN_SNAP_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

int ha_own_msg_encode(const struct ha_own_msg *m, char *buf, size_t len)
{
	size_t at = 0;
	int rc;

	static const char *const asks[] = {"explicit", "implicit", "heal"};

	if (m->kind == HA_OWN_ASK && m->ask <= HA_OWN_HEAL)
		rc = put(buf, len, &at, "ix-own-ask 1 %s %" PRIu32 " %" PRIu64 "\n", asks[m->ask],
			 m->window_ms, m->gid);
	else if (m->kind == HA_OWN_FREE)
		rc = put(buf, len, &at, "ix-own-free 1 %u %" PRIu64 "\n", m->group, m->gid);
	else if (m->kind == HA_OWN_SNAP && target_ok(m->target, strlen(m->target)) &&
		 snap_name_ok(m->name, strlen(m->name)))
		rc = put(buf, len, &at, "ix-own-snap 1 %" PRIu32 " %" PRIu64 " %" PRIu32 " %s %s\n",
			 m->window_ms, m->gid, m->lun, m->target, m->name);
	else if (m->kind == HA_OWN_ROLLBACK && target_ok(m->target, strlen(m->target)) &&
		 snap_name_ok(m->name, strlen(m->name)))
		rc = put(buf, len, &at,
			 "ix-own-rollback 1 %" PRIu32 " %" PRIu64 " %" PRIu32 " %u %s %s\n",
			 m->window_ms, m->gid, m->lun, m->changed ? 1u : 0u, m->target, m->name);
	else if (m->kind == HA_OWN_OFFLINE && target_ok(m->target, strlen(m->target)))
		rc = put(buf, len, &at, "ix-own-offline 1 %" PRIu32 " %" PRIu64 " %" PRIu32 " %s\n",
			 m->window_ms, m->gid, m->lun, m->target);
	else if (m->kind == HA_OWN_ONLINE && target_ok(m->target, strlen(m->target)))
		rc = put(buf, len, &at, "ix-own-online 1 %u %" PRIu64 " %" PRIu32 " %s\n",
			 m->changed ? 1u : 0u, m->gid, m->lun, m->target);
	else
		return -EINVAL;
	return rc ? rc : (int)at;
}

/* The next space-separated word of [*s, e) (the last one ends at e). */
static bool word(const char **s, const char *e, const char **ws, const char **we)
{
	const char *sp = memchr(*s, ' ', (size_t)(e - *s));

	*ws = *s;
	*we = sp ? sp : e;
	*s = sp ? sp + 1 : e;
	return *we > *ws;
}

/* The message's fields into m (left partly set on failure: the caller clears it). */
static int msg_parse(const char *s, const char *e, struct ha_own_msg *m)
{
	const char *ws, *we;
	uint64_t v;

	if (e[-1] == ' ' || !word(&s, e, &ws, &we)) /* one spelling: no trailing space */
		return -EINVAL;
	if (we - ws == 10 && memcmp(ws, "ix-own-ask", 10) == 0)
		m->kind = HA_OWN_ASK;
	else if (we - ws == 11 && memcmp(ws, "ix-own-free", 11) == 0)
		m->kind = HA_OWN_FREE;
	else if (we - ws == 11 && memcmp(ws, "ix-own-snap", 11) == 0)
		m->kind = HA_OWN_SNAP;
	else if (we - ws == 15 && memcmp(ws, "ix-own-rollback", 15) == 0)
		m->kind = HA_OWN_ROLLBACK;
	else if (we - ws == 14 && memcmp(ws, "ix-own-offline", 14) == 0)
		m->kind = HA_OWN_OFFLINE;
	else if (we - ws == 13 && memcmp(ws, "ix-own-online", 13) == 0)
		m->kind = HA_OWN_ONLINE;
	else
		return -EINVAL;
	if (!word(&s, e, &ws, &we) || we - ws != 1 || *ws != '1' || !word(&s, e, &ws, &we))
		return -EINVAL;
	if (m->kind == HA_OWN_SNAP || m->kind == HA_OWN_ROLLBACK) {
		if (!dec(ws, we, UINT32_MAX, &v))
			return -EINVAL;
		m->window_ms = (uint32_t)v;
		if (!word(&s, e, &ws, &we) || !dec(ws, we, UINT64_MAX, &m->gid) ||
		    !word(&s, e, &ws, &we) || !dec(ws, we, UINT32_MAX, &v))
			return -EINVAL;
		m->lun = (uint32_t)v;
		if (m->kind == HA_OWN_ROLLBACK) {
			if (!word(&s, e, &ws, &we) || !dec(ws, we, 1, &v))
				return -EINVAL;
			m->changed = v == 1;
		}
		if (!word(&s, e, &ws, &we) || !target_ok(ws, (size_t)(we - ws)))
			return -EINVAL;
		memcpy(m->target, ws, (size_t)(we - ws));
		if (!word(&s, e, &ws, &we) || !snap_name_ok(ws, (size_t)(we - ws)) || s != e)
			return -EINVAL;
		memcpy(m->name, ws, (size_t)(we - ws));
		return 0;
	}
	if (m->kind == HA_OWN_OFFLINE || m->kind == HA_OWN_ONLINE) {
		/* offline: the bound in ms; online: whether the medium changed (0 or 1) */
		if (!dec(ws, we, m->kind == HA_OWN_ONLINE ? 1 : UINT32_MAX, &v))
			return -EINVAL;
		if (m->kind == HA_OWN_ONLINE)
			m->changed = v == 1;
		else
			m->window_ms = (uint32_t)v;
		if (!word(&s, e, &ws, &we) || !dec(ws, we, UINT64_MAX, &m->gid) ||
		    !word(&s, e, &ws, &we) || !dec(ws, we, UINT32_MAX, &v))
			return -EINVAL;
		m->lun = (uint32_t)v;
		if (!word(&s, e, &ws, &we) || !target_ok(ws, (size_t)(we - ws)) || s != e)
			return -EINVAL;
		memcpy(m->target, ws, (size_t)(we - ws));
		return 0;
	}
	if (m->kind == HA_OWN_ASK) {
		if (we - ws == 8 && memcmp(ws, "implicit", 8) == 0)
			m->ask = HA_OWN_IMPLICIT;
		else if (we - ws == 4 && memcmp(ws, "heal", 4) == 0)
			m->ask = HA_OWN_HEAL;
		else if (!(we - ws == 8 && memcmp(ws, "explicit", 8) == 0))
			return -EINVAL;
		if (!word(&s, e, &ws, &we) || !dec(ws, we, UINT32_MAX, &v))
			return -EINVAL;
		m->window_ms = (uint32_t)v;
	} else {
		if (!dec(ws, we, 65535, &v))
			return -EINVAL;
		m->group = (uint16_t)v;
	}
	if (!word(&s, e, &ws, &we) || !dec(ws, we, UINT64_MAX, &m->gid) || s != e)
		return -EINVAL;
	return 0;
}

int ha_own_msg_decode(const void *buf, size_t len, struct ha_own_msg *m)
{
	int rc = -EINVAL;

	memset(m, 0, sizeof(*m));
	if (len >= 2 && ((const char *)buf)[len - 1] == '\n')
		rc = msg_parse(buf, (const char *)buf + len - 1, m);
	if (rc)
		memset(m, 0, sizeof(*m));
	return rc;
}

enum ha_own_reply ha_own_reply_kind(const void *buf, size_t len)
{
	if (len == 8 && memcmp(buf, "released", 8) == 0)
		return HA_OWN_RELEASED;
	if (len >= 7 && memcmp(buf, "refused", 7) == 0 &&
	    (len == 7 || ((const char *)buf)[7] == ' '))
		return HA_OWN_REFUSED;
	return HA_OWN_NOT_HOLDER;
}

int ha_own_snap_reply_encode(int rc, unsigned held_ms, const char *msg, char *buf, size_t len)
{
	size_t at = 0;
	int r;

	if (rc == 0)
		r = put(buf, len, &at, "snap-done %u", held_ms);
	else if (rc < 0 && rc > -4096)
		r = put(buf, len, &at, "snap-failed %d %s", -rc, msg && msg[0] ? msg : "failed");
	else
		return -EINVAL;
	return r ? r : (int)at;
}

int ha_own_snap_reply_decode(const void *buf, size_t len, int *rc, unsigned *held_ms, char *msg,
			     size_t msglen)
{
	const char *s = buf, *e = s + len, *ws, *we;
	uint64_t v;

	*rc = 0;
	*held_ms = 0;
	if (msglen)
		msg[0] = 0;
	if (len == 0 || s[len - 1] == ' ' || memchr(buf, 0, len) || !word(&s, e, &ws, &we))
		return -EINVAL;
	if (we - ws == 9 && memcmp(ws, "snap-done", 9) == 0) {
		if (!word(&s, e, &ws, &we) || !dec(ws, we, UINT32_MAX, &v) || s != e)
			return -EINVAL;
		*held_ms = (unsigned)v;
		return 0;
	}
	if (!(we - ws == 11 && memcmp(ws, "snap-failed", 11) == 0) || !word(&s, e, &ws, &we) ||
	    !dec(ws, we, 4095, &v) || v == 0 || s == e)
		return -EINVAL;
	*rc = -(int)v;
	if (msglen)
		snprintf(msg, msglen, "%.*s", (int)(e - s), s);
	return 0;
}

int ha_own_offline_reply_encode(int rc, unsigned users, const char *who, char *buf, size_t len)
{
	size_t at = 0;
	int r;

	if (rc == 0 && who && target_ok(who, strlen(who)) && strlen(who) < HA_OWN_WHO_MAX)
		r = put(buf, len, &at, "offline %u %s", users, who);
	else if (rc < 0 && rc > -4096)
		r = put(buf, len, &at, "offline-failed %d %s", -rc, who && who[0] ? who : "failed");
	else
		return -EINVAL;
	return r ? r : (int)at;
}

int ha_own_offline_reply_decode(const void *buf, size_t len, int *rc, unsigned *users, char *who,
				size_t wholen)
{
	const char *s = buf, *e = s + len, *ws, *we;
	uint64_t v;

	*rc = 0;
	*users = 0;
	if (wholen)
		who[0] = 0;
	if (len == 0 || s[len - 1] == ' ' || memchr(buf, 0, len) || !word(&s, e, &ws, &we))
		return -EINVAL;
	if (we - ws == 7 && memcmp(ws, "offline", 7) == 0) {
		if (!word(&s, e, &ws, &we) || !dec(ws, we, UINT32_MAX, &v) ||
		    !word(&s, e, &ws, &we) || s != e || (size_t)(we - ws) >= HA_OWN_WHO_MAX ||
		    !target_ok(ws, (size_t)(we - ws)))
			return -EINVAL;
		*users = (unsigned)v;
		if (wholen)
			snprintf(who, wholen, "%.*s", (int)(we - ws), ws);
		return 0;
	}
	if (!(we - ws == 14 && memcmp(ws, "offline-failed", 14) == 0) || !word(&s, e, &ws, &we) ||
	    !dec(ws, we, 4095, &v) || v == 0 || s == e)
		return -EINVAL;
	*rc = -(int)v;
	if (wholen)
		snprintf(who, wholen, "%.*s", (int)(e - s), s);
	return 0;
}
