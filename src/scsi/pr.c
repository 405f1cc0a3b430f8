/* Persistent reservations: the SPC-4 state machine (PERSISTENT RESERVE OUT service actions),
 * the conflict table and the PERSISTENT RESERVE IN parameter data. Pure functions over a
 * struct pr_state; see pr.h for who locks and who saves. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scsi/pr.h"
#include "util/bytes.h"

/* ---- state ---- */

void pr_state_init(struct pr_state *st)
{
	memset(st, 0, sizeof(*st));
}

void pr_state_clear(struct pr_state *st)
{
	for (size_t i = 0; i < st->nregs; i++) {
		free(st->regs[i].iport);
		free(st->regs[i].tport);
	}
	free(st->regs);
	free(st->spc2_iport);
	free(st->spc2_tport);
	pr_state_init(st);
}

int pr_state_set_spc2(struct pr_state *st, const char *iport, const char *tport, uint64_t gid)
{
	free(st->spc2_iport);
	free(st->spc2_tport);
	st->spc2_iport = st->spc2_tport = NULL;
	st->spc2_gid = 0;
	if (!iport)
		return 0;
	st->spc2_iport = strdup(iport);
	st->spc2_tport = strdup(tport);
	if (!st->spc2_iport || !st->spc2_tport) {
		pr_state_set_spc2(st, NULL, NULL, 0);
		return -ENOMEM;
	}
	st->spc2_gid = gid;
	return 0;
}

bool pr_spc2_is(const struct pr_state *st, const struct pr_nexus_id *who)
{
	return st->spc2_iport && strcasecmp(st->spc2_iport, who->iport) == 0 &&
	       strcasecmp(st->spc2_tport, who->tport) == 0;
}

int pr_state_copy(struct pr_state *dst, const struct pr_state *src)
{
	pr_state_clear(dst);
	dst->generation = src->generation;
	dst->aptpl = src->aptpl;
	dst->type = src->type;
	if (pr_state_set_spc2(dst, src->spc2_iport, src->spc2_tport, src->spc2_gid) < 0)
		return -ENOMEM;
	if (!src->nregs)
		return 0;
	dst->regs = calloc(src->nregs, sizeof(*dst->regs));
	if (!dst->regs)
		return -ENOMEM;
	dst->cap = src->nregs;
	for (size_t i = 0; i < src->nregs; i++) {
		struct pr_reg *r = &dst->regs[i];

		*r = src->regs[i];
		r->iport = strdup(src->regs[i].iport);
		r->tport = strdup(src->regs[i].tport);
		dst->nregs++;
		if (!r->iport || !r->tport) {
			pr_state_clear(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

static void ua_list_free(struct pr_ua *ua, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ua[i].iport);
		free(ua[i].tport);
	}
	free(ua);
}

void pr_effects_clear(struct pr_effects *fx)
{
	ua_list_free(fx->ua, fx->nua);
	ua_list_free(fx->abort, fx->nabort);
	memset(fx, 0, sizeof(*fx));
}

bool pr_type_valid(unsigned type)
{
	return type == PR_WE || type == PR_EA || (type >= PR_WE_RO && type <= PR_EA_AR);
}

bool pr_type_all_registrants(unsigned type)
{
	return type == PR_WE_AR || type == PR_EA_AR;
}

static bool reg_is(const struct pr_reg *r, const struct pr_nexus_id *who)
{
	return strcasecmp(r->iport, who->iport) == 0 && strcasecmp(r->tport, who->tport) == 0;
}

int pr_find(const struct pr_state *st, const struct pr_nexus_id *who)
{
	for (size_t i = 0; i < st->nregs; i++)
		if (reg_is(&st->regs[i], who))
			return (int)i;
	return -1;
}

static bool holds(const struct pr_state *st, int i)
{
	if (i < 0 || st->type == PR_TYPE_NONE)
		return false;
	return pr_type_all_registrants(st->type) || st->regs[i].holder;
}

bool pr_is_holder(const struct pr_state *st, const struct pr_nexus_id *who)
{
	return holds(st, pr_find(st, who));
}

uint8_t pr_nexus_flags(const struct pr_state *st, const struct pr_nexus_id *who)
{
	int i = pr_find(st, who);

	return (uint8_t)(st->type | (i >= 0 ? PR_F_REGISTERED : 0) |
			 (holds(st, i) ? PR_F_HOLDER : 0));
}

bool pr_conflict(uint8_t f, bool read_class)
{
	switch (f & PR_F_TYPE) {
	case PR_WE:
		return !read_class && !(f & PR_F_HOLDER);
	case PR_EA:
		return !(f & PR_F_HOLDER);
	case PR_WE_RO:
	case PR_WE_AR:
		return !read_class && !(f & PR_F_REGISTERED);
	case PR_EA_RO:
	case PR_EA_AR:
		return !(f & PR_F_REGISTERED);
	default:
		return false;
	}
}

/* ---- building blocks of the service actions ---- */

/* Append (iport, tport, asc, ascq) to a list of n used of *cap. */
static int ua_list_add(struct pr_ua **list, size_t *n, size_t *cap, const char *iport,
		       const char *tport, uint8_t asc, uint8_t ascq)
{
	struct pr_ua *u;

	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 8;
		struct pr_ua *l = realloc(*list, c * sizeof(*l));

		if (!l)
			return -ENOMEM;
		*list = l;
		*cap = c;
	}
	u = &(*list)[*n];
	u->iport = strdup(iport);
	u->tport = strdup(tport);
	u->asc = asc;
	u->ascq = ascq;
	if (!u->iport || !u->tport) {
		free(u->iport);
		free(u->tport);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

int pr_effects_add_ua(struct pr_effects *fx, const char *iport, const char *tport, uint8_t asc,
		      uint8_t ascq)
{
	return ua_list_add(&fx->ua, &fx->nua, &fx->cap, iport, tport, asc, ascq);
}

int pr_missed_effects(const struct pr_state *old, const struct pr_state *next,
		      struct pr_effects *fx)
{
	bool gone = old->type != PR_TYPE_NONE && next->type != old->type &&
		    (next->type != PR_TYPE_NONE || old->type == PR_WE_RO || old->type == PR_EA_RO ||
		     pr_type_all_registrants(old->type));
	/* PREEMPT never removes the preempting registration: a state with none left is a CLEAR */
	uint8_t removed = next->nregs == 0 ? 0x03 : 0x05;

	for (size_t i = 0; i < old->nregs; i++) {
		const struct pr_reg *r = &old->regs[i];
		struct pr_nexus_id who = {r->iport, r->tport};
		int rc = 0;

		if (pr_find(next, &who) < 0) /* REGISTRATIONS (or, CLEAR: RESERVATIONS) PREEMPTED */
			rc = pr_effects_add_ua(fx, r->iport, r->tport, 0x2a, removed);
		else if (gone) /* RESERVATIONS RELEASED */
			rc = pr_effects_add_ua(fx, r->iport, r->tport, 0x2a, 0x04);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int pr_effects_add_abort(struct pr_effects *fx, const char *iport, const char *tport)
{
	return ua_list_add(&fx->abort, &fx->nabort, &fx->abort_cap, iport, tport, 0, 0);
}

static int ua_add(struct pr_effects *fx, const struct pr_reg *r, uint8_t asc, uint8_t ascq)
{
	return pr_effects_add_ua(fx, r->iport, r->tport, asc, ascq);
}

/* UA to every registrant except `except` (an index, or -1). */
static int ua_all(const struct pr_state *st, int except, struct pr_effects *fx, uint8_t asc,
		  uint8_t ascq)
{
	for (size_t i = 0; i < st->nregs; i++)
		if ((int)i != except && ua_add(fx, &st->regs[i], asc, ascq))
			return -ENOMEM;
	return 0;
}

static enum pr_result add_reg(struct pr_state *st, uint64_t key, const struct pr_nexus_id *who)
{
	struct pr_reg *r;

	if (st->nregs >= PR_MAX_REGS)
		return PR_NO_RESOURCES;
	if (st->nregs == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 4;
		struct pr_reg *n = realloc(st->regs, cap * sizeof(*n));

		if (!n)
			return PR_NOMEM;
		st->regs = n;
		st->cap = cap;
	}
	r = &st->regs[st->nregs];
	r->key = key;
	r->holder = false;
	r->iport = strdup(who->iport);
	r->tport = strdup(who->tport);
	if (!r->iport || !r->tport) {
		free(r->iport);
		free(r->tport);
		return PR_NOMEM;
	}
	st->nregs++;
	return PR_OK;
}

int pr_state_add_reg(struct pr_state *st, uint64_t key, const struct pr_nexus_id *who)
{
	switch (add_reg(st, key, who)) {
	case PR_OK:
		return 0;
	case PR_NO_RESOURCES:
		return -ENOSPC;
	default:
		return -ENOMEM;
	}
}

const char *pr_state_inconsistent(const struct pr_state *st)
{
	size_t holders = 0;

	for (size_t i = 0; i < st->nregs; i++)
		holders += st->regs[i].holder;
	if (st->type == PR_TYPE_NONE || pr_type_all_registrants(st->type)) {
		if (holders)
			return "a holder is marked but the reservation type has none";
		if (st->type != PR_TYPE_NONE && st->nregs == 0)
			return "an all-registrants reservation without registrants";
		return NULL;
	}
	return holders == 1 ? NULL : "the reservation needs exactly one holder";
}

static void remove_reg(struct pr_state *st, size_t i)
{
	free(st->regs[i].iport);
	free(st->regs[i].tport);
	memmove(&st->regs[i], &st->regs[i + 1], (st->nregs - i - 1) * sizeof(st->regs[0]));
	st->nregs--;
}

static void release(struct pr_state *st)
{
	st->type = PR_TYPE_NONE;
	for (size_t i = 0; i < st->nregs; i++)
		st->regs[i].holder = false;
}

static void reserve(struct pr_state *st, int holder, uint8_t type)
{
	release(st);
	st->type = type;
	if (!pr_type_all_registrants(type))
		st->regs[holder].holder = true;
}

/* Remove registration i as REGISTER with a zero key does (SPC-4 5.12.11.2.3): a holder's
 * reservation goes with it, except that an all-registrants reservation lasts until the last
 * registrant leaves. Releasing a registrants-only reservation this way tells the others. */
static int unregister(struct pr_state *st, int i, struct pr_effects *fx)
{
	bool was_holder = holds(st, i);
	uint8_t type = st->type;

	remove_reg(st, (size_t)i);
	if (type == PR_TYPE_NONE)
		return 0;
	if (pr_type_all_registrants(type)) {
		if (st->nregs == 0)
			release(st);
		return 0;
	}
	if (!was_holder)
		return 0;
	release(st);
	if (type == PR_WE_RO || type == PR_EA_RO)
		return ua_all(st, -1, fx, 0x2a, 0x04); /* RESERVATIONS RELEASED */
	return 0;
}

/* Remove registration i, preempted: its nexus is told REGISTRATIONS PREEMPTED and, for
 * PREEMPT AND ABORT, its tasks are to be aborted. *me follows the issuer's index. */
static int preempt_one(struct pr_state *st, size_t i, int *me, bool abort, struct pr_effects *fx)
{
	if (ua_add(fx, &st->regs[i], 0x2a, 0x05) ||
	    (abort && pr_effects_add_abort(fx, st->regs[i].iport, st->regs[i].tport)))
		return -ENOMEM;
	remove_reg(st, i);
	if ((int)i < *me)
		(*me)--;
	return 0;
}

/* Remove every registration with `key` except the issuer's (preempt_one). Returns how many
 * went, or -ENOMEM. */
static int preempt_key(struct pr_state *st, uint64_t key, int *me, bool abort,
		       struct pr_effects *fx)
{
	int n = 0;

	for (size_t i = 0; i < st->nregs;) {
		if ((int)i == *me || st->regs[i].key != key) {
			i++;
			continue;
		}
		if (preempt_one(st, i, me, abort, fx))
			return -ENOMEM;
		n++;
	}
	return n;
}

/* ---- the service actions ---- */

static enum pr_result do_register(struct pr_state *st, int me, const struct pr_nexus_id *who,
				  const struct pr_out *req, struct pr_effects *fx)
{
	bool ignore = req->sa == PR_OUT_REGISTER_IGNORE;
	enum pr_result rc;

	if (me < 0) {
		if (!ignore && req->key != 0)
			return PR_CONFLICT;
		if (req->sakey == 0)
			return PR_OK; /* nothing to register, nothing to remove */
		rc = add_reg(st, req->sakey, who);
		if (rc != PR_OK)
			return rc;
	} else {
		if (!ignore && req->key != st->regs[me].key)
			return PR_CONFLICT;
		if (req->sakey == 0) {
			if (unregister(st, me, fx))
				return PR_NOMEM;
		} else {
			st->regs[me].key = req->sakey;
		}
	}
	st->generation++;
	st->aptpl = req->aptpl;
	fx->changed = true;
	return PR_OK;
}

static enum pr_result do_reserve(struct pr_state *st, int me, const struct pr_out *req,
				 struct pr_effects *fx)
{
	if (st->type != PR_TYPE_NONE)
		return holds(st, me) && st->type == req->type ? PR_OK : PR_CONFLICT;
	reserve(st, me, req->type);
	fx->changed = true;
	return PR_OK;
}

static enum pr_result do_release(struct pr_state *st, int me, const struct pr_out *req,
				 struct pr_effects *fx)
{
	uint8_t type = st->type;

	if (type == PR_TYPE_NONE || !holds(st, me))
		return PR_OK; /* GOOD, and nothing happens */
	if (req->type != type)
		return PR_BAD_RELEASE;
	release(st);
	fx->changed = true;
	if (type == PR_WE_RO || type == PR_EA_RO || pr_type_all_registrants(type))
		if (ua_all(st, me, fx, 0x2a, 0x04)) /* RESERVATIONS RELEASED */
			return PR_NOMEM;
	return PR_OK;
}

static enum pr_result do_clear(struct pr_state *st, int me, struct pr_effects *fx)
{
	if (ua_all(st, me, fx, 0x2a, 0x03)) /* RESERVATIONS PREEMPTED */
		return PR_NOMEM;
	for (size_t i = st->nregs; i > 0; i--)
		remove_reg(st, i - 1);
	release(st);
	st->generation++;
	fx->changed = true;
	return PR_OK;
}

static int holder_index(const struct pr_state *st)
{
	for (size_t i = 0; i < st->nregs; i++)
		if (st->regs[i].holder)
			return (int)i;
	return -1;
}

/* SPC-4 5.12.11.4: PREEMPT and PREEMPT AND ABORT. For PREEMPT AND ABORT fx->abort lists the
 * I_T nexuses whose registrations went: the caller aborts their tasks (5.12.11.4.5; the
 * issuer's own tasks are not among them). */
static enum pr_result do_preempt(struct pr_state *st, int me, const struct pr_out *req,
				 struct pr_effects *fx)
{
	uint8_t old = st->type;
	bool abort = req->sa == PR_OUT_PREEMPT_ABORT;
	int n, hi = holder_index(st);

	if (old != PR_TYPE_NONE &&
	    (pr_type_all_registrants(old) ? req->sakey == 0
					  : hi >= 0 && req->sakey == st->regs[hi].key)) {
		/* Preempting the reservation: its holders' registrations go (all registrants'
		 * but the issuer's for an all-registrants type), the issuer gets a reservation of
		 * the requested type. */
		if (pr_type_all_registrants(old)) {
			for (size_t i = 0; i < st->nregs;) {
				if ((int)i == me)
					i++;
				else if (preempt_one(st, i, &me, abort, fx))
					return PR_NOMEM;
			}
		} else if (preempt_key(st, req->sakey, &me, abort, fx) < 0) {
			return PR_NOMEM;
		}
		reserve(st, me, req->type);
		if (req->type != old && ua_all(st, me, fx, 0x2a, 0x04))
			return PR_NOMEM;
	} else {
		/* Preempting registrations only. */
		if (req->sakey == 0)
			return PR_BAD_PARAM;
		n = preempt_key(st, req->sakey, &me, abort, fx);
		if (n < 0)
			return PR_NOMEM;
		if (n == 0)
			return PR_CONFLICT;
	}
	st->generation++;
	fx->changed = true;
	return PR_OK;
}

/* SPC-4 5.12.8: the holder hands its reservation (and a registration) to another I_T nexus. */
static enum pr_result do_register_move(struct pr_state *st, int me, const struct pr_nexus_id *who,
				       const struct pr_out *req, struct pr_effects *fx)
{
	int d;
	enum pr_result rc;

	if (st->type == PR_TYPE_NONE || pr_type_all_registrants(st->type) || !st->regs[me].holder)
		return PR_CONFLICT;
	if (req->sakey == 0 || !req->move.iport || !req->move.tport)
		return PR_BAD_PARAM;
	if (strcasecmp(req->move.iport, who->iport) == 0 &&
	    strcasecmp(req->move.tport, who->tport) == 0)
		return PR_BAD_PARAM;
	d = pr_find(st, &req->move);
	if (d < 0) {
		rc = add_reg(st, req->sakey, &req->move);
		if (rc != PR_OK)
			return rc;
		d = (int)st->nregs - 1;
	} else {
		st->regs[d].key = req->sakey;
	}
	st->regs[me].holder = false;
	st->regs[d].holder = true;
	if (req->unreg)
		remove_reg(st, (size_t)me);
	st->generation++;
	st->aptpl = req->aptpl;
	fx->changed = true;
	return PR_OK;
}

enum pr_result pr_out_apply(struct pr_state *st, const struct pr_nexus_id *who,
			    const struct pr_out *req, struct pr_effects *fx)
{
	int me = pr_find(st, who);
	enum pr_result rc;

	memset(fx, 0, sizeof(*fx));
	if (req->sa == PR_OUT_REGISTER || req->sa == PR_OUT_REGISTER_IGNORE) {
		rc = do_register(st, me, who, req, fx);
	} else if (me < 0 || req->key != st->regs[me].key) {
		/* Every other service action needs a registered nexus quoting its own key. */
		rc = PR_CONFLICT;
	} else {
		switch (req->sa) {
		case PR_OUT_RESERVE:
			rc = do_reserve(st, me, req, fx);
			break;
		case PR_OUT_RELEASE:
			rc = do_release(st, me, req, fx);
			break;
		case PR_OUT_CLEAR:
			rc = do_clear(st, me, fx);
			break;
		case PR_OUT_PREEMPT:
		case PR_OUT_PREEMPT_ABORT:
			rc = do_preempt(st, me, req, fx);
			break;
		case PR_OUT_REGISTER_MOVE:
			rc = do_register_move(st, me, who, req, fx);
			break;
		default:
			rc = PR_BAD_PARAM;
			break;
		}
	}
	if (rc != PR_OK)
		pr_effects_clear(fx);
	return rc;
}

/* ---- PERSISTENT RESERVE IN ---- */

static void put(uint8_t *out, uint32_t cap, uint32_t off, const void *src, uint32_t n)
{
	if (off >= cap)
		return;
	memcpy(out + off, src, n < cap - off ? n : cap - off);
}

static void put_u32(uint8_t *out, uint32_t cap, uint32_t off, uint32_t v)
{
	uint8_t b[4];

	put_be32(b, v);
	put(out, cap, off, b, 4);
}

static void put_u64(uint8_t *out, uint32_t cap, uint32_t off, uint64_t v)
{
	uint8_t b[8];

	put_be64(b, v);
	put(out, cap, off, b, 8);
}

uint32_t pr_in_read_keys(const struct pr_state *st, uint8_t *out, uint32_t cap)
{
	uint32_t n = 8;

	put_u32(out, cap, 0, st->generation);
	for (size_t i = 0; i < st->nregs; i++, n += 8)
		put_u64(out, cap, n, st->regs[i].key);
	put_u32(out, cap, 4, n - 8); /* ADDITIONAL LENGTH: whatever the allocation length */
	return n;
}

uint32_t pr_in_read_reservation(const struct pr_state *st, uint8_t *out, uint32_t cap)
{
	uint8_t d[24] = {0};
	int hi = holder_index(st);

	put_be32(d, st->generation);
	if (st->type == PR_TYPE_NONE) {
		put(out, cap, 0, d, 8);
		return 8;
	}
	put_be32(d + 4, 16);
	/* An all-registrants reservation reports key 0 (SPC-4 6.15.3.3). */
	if (!pr_type_all_registrants(st->type) && hi >= 0)
		put_be64(d + 8, st->regs[hi].key);
	d[21] = st->type; /* SCOPE 0 (LU_SCOPE) | TYPE */
	put(out, cap, 0, d, 24);
	return 24;
}

uint32_t pr_in_report_caps(const struct pr_state *st, bool ptpl_c, uint8_t *out, uint32_t cap)
{
	uint8_t d[8] = {0};

	put_be16(d, 8);
	/* CRH: RESERVE/RELEASE follow SPC-4 5.12.3; no SPEC_I_PT, no ALL_TG_PT. */
	d[2] = 0x10 | (ptpl_c ? 0x01 : 0x00);
	/* TMV; ALLOW COMMANDS 000b (no information); PTPL_A. */
	d[3] = 0x80 | (st->aptpl ? 0x01 : 0x00);
	/* Every type: WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX | EX_AC_AR. */
	d[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;
	d[5] = 0x01;
	put(out, cap, 0, d, 8);
	return 8;
}

/* An iSCSI TransportID of format 01b for an initiator port name; returns its length. */
static uint32_t transport_id(const char *iport, uint8_t *d, uint32_t room)
{
	uint32_t slen = (uint32_t)strlen(iport) + 1, n = (slen + 3) & ~3u;

	if (n < 20)
		n = 20;
	if (4 + n > room)
		return 0;
	memset(d, 0, 4 + n);
	d[0] = 0x40 | 0x05; /* FORMAT CODE 01b, PROTOCOL IDENTIFIER iSCSI */
	put_be16(d + 2, (uint16_t)n);
	memcpy(d + 4, iport, slen - 1);
	return 4 + n;
}

uint32_t pr_in_read_full_status(const struct pr_state *st, uint8_t *out, uint32_t cap)
{
	uint32_t n = 8;

	put_u32(out, cap, 0, st->generation);
	for (size_t i = 0; i < st->nregs; i++) {
		uint8_t d[24 + 4 + PR_MAX_PORT_LEN + 4] = {0};
		uint32_t tl;

		put_be64(d, st->regs[i].key);
		if (holds(st, (int)i)) {
			d[12] = 0x01; /* R_HOLDER */
			d[13] = st->type;
		}
		/* RELATIVE TARGET PORT IDENTIFIER: the registration's target port, as VPD 0x83
		 * and REPORT TARGET PORT GROUPS report it (another gateway's port too) */
		put_be16(d + 18, pr_tport_rtpi(st->regs[i].tport));
		tl = transport_id(st->regs[i].iport, d + 24, sizeof(d) - 24);
		put_be32(d + 20, tl);
		put(out, cap, n, d, 24 + tl);
		n += 24 + tl;
	}
	put_u32(out, cap, 4, n - 8);
	return n;
}

uint16_t pr_tport_rtpi(const char *tport)
{
	const char *t = tport ? strstr(tport, ",t,0x") : NULL;
	char *end;
	unsigned long v;

	if (!t)
		return 1;
	v = strtoul(t + 5, &end, 16);
	return (*end || end == t + 5 || v == 0 || v > 0xffff) ? 1 : (uint16_t)v;
}

uint32_t pr_parse_transport_id(const uint8_t *tid, uint32_t len, char *port)
{
	uint32_t n, slen, sep = 0, isid_len;
	const char *s;

	if (len < 4 || tid[0] != (0x40 | 0x05))
		return 0;
	n = get_be16(tid + 2);
	if (n < 20 || n % 4 || 4 + n > len)
		return 0;
	s = (const char *)tid + 4;
	slen = (uint32_t)strnlen(s, n);
	if (slen == n || slen + 1 > PR_MAX_PORT_LEN)
		return 0; /* not NUL terminated, or too long */
	for (uint32_t i = 0; i < slen; i++) {
		if (!isgraph((unsigned char)s[i]))
			return 0;
		if (i + 5 <= slen && strncasecmp(s + i, ",i,0x", 5) == 0)
			sep = i;
	}
	isid_len = slen - sep - 5;
	if (sep == 0 || isid_len != 12)
		return 0;
	memcpy(port, s, sep + 5);
	for (uint32_t i = 0; i < isid_len; i++) {
		char c = s[sep + 5 + i];

		if (!isxdigit((unsigned char)c))
			return 0;
		port[sep + 5 + i] = (char)tolower((unsigned char)c);
	}
	port[slen] = 0;
	memcpy(port + sep, ",i,0x", 5);
	return 4 + n;
}
