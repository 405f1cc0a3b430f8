/* Persistent reservations without a LU: the SPC-4 state machine (table-driven scenarios of
 * PERSISTENT RESERVE OUT service actions with the expected result, generation, reservation,
 * registrations and unit attentions after each step), the conflict table, the PERSISTENT
 * RESERVE IN parameter data, iSCSI TransportIDs, and the APTPL state file (round trip and
 * damaged files). Expected values come from SPC-4, not from running the code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scsi/pr.h"
#include "tap.h"
#include "util/bytes.h"

/* Three I_T nexuses: A and B from two initiators, C from A's initiator with another ISID. */
static const struct pr_nexus_id NX[3] = {
    {"iqn.2024-01.org.example:a,i,0x00023d000001", "iqn.2024-01.org.example:t,t,0x0001"},
    {"iqn.2024-01.org.example:b,i,0x00023d000002", "iqn.2024-01.org.example:t,t,0x0001"},
    {"iqn.2024-01.org.example:a,i,0x00023d000003", "iqn.2024-01.org.example:t,t,0x0001"},
};
enum { A = 0, B = 1, C = 2, NONE = -1 };

#define B8(...) ((const uint8_t[]){__VA_ARGS__})

#define KA 0xa1a1a1a1a1a1a1a1ULL
#define KB 0xb2b2b2b2b2b2b2b2ULL
#define KC 0xc3c3c3c3c3c3c3c3ULL

struct ua_exp {
	int who;
	uint8_t asc, ascq;
};

/* One step: who sends which PERSISTENT RESERVE OUT, and the state expected afterwards. */
struct step {
	int who;
	uint8_t sa, type;
	uint64_t key, sakey;
	int move_to; /* REGISTER AND MOVE destination, or NONE */
	bool unreg;
	enum pr_result rc;
	uint32_t gen;	     /* PRGENERATION after */
	uint8_t restype;     /* reservation type after */
	int holder;	     /* the holder after (NONE for none / all registrants) */
	uint64_t keys[3];    /* each nexus's key after, 0 = not registered */
	struct ua_exp ua[3]; /* the unit attentions established (asc 0: none) */
};

struct scenario {
	const char *name;
	const struct step *steps;
	size_t n;
};

#define REG(w, k, s, r, g, ka, kb, kc)                                                             \
	{                                                                                          \
		w, PR_OUT_REGISTER, 0, k, s, NONE, false, r, g, 0, NONE, {ka, kb, kc},             \
		{                                                                                  \
			{                                                                          \
				0                                                                  \
			}                                                                          \
		}                                                                                  \
	}
#define REGI(w, s, g, ka, kb, kc) REGIR(w, s, g, 0, NONE, ka, kb, kc)
/* ... with a reservation in place */
#define REGIR(w, s, g, rt, h, ka, kb, kc)                                                          \
	{                                                                                          \
		w, PR_OUT_REGISTER_IGNORE, 0, 0, s, NONE, false, PR_OK, g, rt, h, {ka, kb, kc},    \
		{                                                                                  \
			{                                                                          \
				0                                                                  \
			}                                                                          \
		}                                                                                  \
	}

static const struct step s_register[] = {
    /* unregistered, zero key: nothing to do, nothing changes */
    REG(A, 0, 0, PR_OK, 0, 0, 0, 0),
    /* unregistered nexus quoting a key it does not have */
    REG(A, 5, 0x10, PR_CONFLICT, 0, 0, 0, 0),
    REG(A, 0, KA, PR_OK, 1, KA, 0, 0),
    /* registered: the RESERVATION KEY must be its own */
    REG(A, 0, KA + 1, PR_CONFLICT, 1, KA, 0, 0),
    REG(A, KA, KA + 1, PR_OK, 2, KA + 1, 0, 0),
    /* REGISTER AND IGNORE EXISTING KEY does not look at the RESERVATION KEY */
    REGI(A, KA, 3, KA, 0, 0),
    REGI(B, KB, 4, KA, KB, 0),
    /* C is A's initiator with another ISID: its own I_T nexus, its own registration */
    REGI(C, KA, 5, KA, KB, KA),
    REG(A, KA, 0, PR_OK, 6, 0, KB, KA),
    REGI(B, 0, 7, 0, 0, KA),
    REGI(A, 0, 7, 0, 0, KA),
};

#define RES(w, t, k, r, g, rt, h, ka, kb, kc)                                                      \
	{                                                                                          \
		w, PR_OUT_RESERVE, t, k, 0, NONE, false, r, g, rt, h, {ka, kb, kc},                \
		{                                                                                  \
			{                                                                          \
				0                                                                  \
			}                                                                          \
		}                                                                                  \
	}
#define REL(w, t, k, r, g, rt, h, ka, kb, kc, ...)                                                 \
	{                                                                                          \
		w, PR_OUT_RELEASE, t, k, 0, NONE, false, r, g, rt, h, {ka, kb, kc},                \
		{                                                                                  \
			__VA_ARGS__                                                                \
		}                                                                                  \
	}

static const struct step s_reserve[] = {
    REGI(A, KA, 1, KA, 0, 0),
    REGI(B, KB, 2, KA, KB, 0),
    /* an unregistered nexus cannot reserve; a registered one must quote its key */
    RES(C, PR_WE, 0, PR_CONFLICT, 2, 0, NONE, KA, KB, 0),
    RES(A, PR_WE, KB, PR_CONFLICT, 2, 0, NONE, KA, KB, 0),
    /* RESERVE does not change the generation */
    RES(A, PR_WE, KA, PR_OK, 2, PR_WE, A, KA, KB, 0),
    RES(A, PR_WE, KA, PR_OK, 2, PR_WE, A, KA, KB, 0),
    RES(A, PR_EA, KA, PR_CONFLICT, 2, PR_WE, A, KA, KB, 0),
    RES(B, PR_WE, KB, PR_CONFLICT, 2, PR_WE, A, KA, KB, 0),
    /* RELEASE by a registrant that does not hold it: GOOD, nothing happens */
    REL(B, PR_WE, KB, PR_OK, 2, PR_WE, A, KA, KB, 0, {0}),
    REL(A, PR_EA, KA, PR_BAD_RELEASE, 2, PR_WE, A, KA, KB, 0, {0}),
    /* releasing Write Exclusive tells nobody */
    REL(A, PR_WE, KA, PR_OK, 2, 0, NONE, KA, KB, 0, {0}),
    RES(A, PR_WE_RO, KA, PR_OK, 2, PR_WE_RO, A, KA, KB, 0),
    /* releasing a registrants-only reservation: RESERVATIONS RELEASED to the others */
    REL(A, PR_WE_RO, KA, PR_OK, 2, 0, NONE, KA, KB, 0, {B, 0x2a, 0x04}),
    /* all registrants: every registrant holds it and may release it */
    RES(B, PR_EA_AR, KB, PR_OK, 2, PR_EA_AR, NONE, KA, KB, 0),
    RES(A, PR_EA_AR, KA, PR_OK, 2, PR_EA_AR, NONE, KA, KB, 0),
    REL(A, PR_EA_AR, KA, PR_OK, 2, 0, NONE, KA, KB, 0, {B, 0x2a, 0x04}),
};

static const struct step s_unregister_holder[] = {
    REGI(A, KA, 1, KA, 0, 0),
    REGI(B, KB, 2, KA, KB, 0),
    RES(A, PR_EA_RO, KA, PR_OK, 2, PR_EA_RO, A, KA, KB, 0),
    /* the holder leaves: its registrants-only reservation goes, the others are told */
    {A, PR_OUT_REGISTER, 0, KA, 0, NONE, false, PR_OK, 3, 0, NONE, {0, KB, 0}, {{B, 0x2a, 0x04}}},
    REGI(A, KA, 4, KA, KB, 0),
    RES(A, PR_WE_AR, KA, PR_OK, 4, PR_WE_AR, NONE, KA, KB, 0),
    /* all registrants: the reservation lasts until the last registrant leaves */
    REGIR(A, 0, 5, PR_WE_AR, NONE, 0, KB, 0),
    {B, PR_OUT_RELEASE, PR_WE_AR, KB, 0, NONE, false, PR_OK, 5, 0, NONE, {0, KB, 0}, {{0}}},
    RES(B, PR_WE_AR, KB, PR_OK, 5, PR_WE_AR, NONE, 0, KB, 0),
    REGI(B, 0, 6, 0, 0, 0),
};

static const struct step s_clear[] = {
    REGI(A, KA, 1, KA, 0, 0),
    REGI(B, KB, 2, KA, KB, 0),
    REGI(C, KC, 3, KA, KB, KC),
    RES(A, PR_WE, KA, PR_OK, 3, PR_WE, A, KA, KB, KC),
    /* the key must be the issuer's */
    {B, PR_OUT_CLEAR, 0, KA, 0, NONE, false, PR_CONFLICT, 3, PR_WE, A, {KA, KB, KC}, {{0}}},
    /* everything goes; every other registrant hears RESERVATIONS PREEMPTED */
    {B,
     PR_OUT_CLEAR,
     0,
     KB,
     0,
     NONE,
     false,
     PR_OK,
     4,
     0,
     NONE,
     {0, 0, 0},
     {{A, 0x2a, 0x03}, {C, 0x2a, 0x03}}},
    {C, PR_OUT_CLEAR, 0, KC, 0, NONE, false, PR_CONFLICT, 4, 0, NONE, {0, 0, 0}, {{0}}},
};

#define PRE(w, t, k, s, r, g, rt, h, ka, kb, kc, ...)                                              \
	{                                                                                          \
		w, PR_OUT_PREEMPT, t, k, s, NONE, false, r, g, rt, h, {ka, kb, kc},                \
		{                                                                                  \
			__VA_ARGS__                                                                \
		}                                                                                  \
	}

static const struct step s_preempt_regs[] = {
    REGI(A, KA, 1, KA, 0, 0),
    REGI(B, KB, 2, KA, KB, 0),
    /* no reservation: SARK 0 is invalid, a key nobody has conflicts */
    PRE(B, PR_EA, KB, 0, PR_BAD_PARAM, 2, 0, NONE, KA, KB, 0, {0}),
    PRE(B, PR_EA, KB, KC, PR_CONFLICT, 2, 0, NONE, KA, KB, 0, {0}),
    /* removes the registration, creates no reservation (libiscsi ProutPreempt) */
    PRE(B, PR_EA, KB, KA, PR_OK, 3, 0, NONE, 0, KB, 0, {A, 0x2a, 0x05}),
};

static const struct step s_preempt_res[] = {
    REGI(A, KA, 1, KA, 0, 0),
    REGI(B, KB, 2, KA, KB, 0),
    REGI(C, KC, 3, KA, KB, KC),
    RES(A, PR_WE, KA, PR_OK, 3, PR_WE, A, KA, KB, KC),
    /* not the holder's key: registrations only, the reservation stays */
    PRE(B, PR_EA, KB, KC, PR_OK, 4, PR_WE, A, KA, KB, 0, {C, 0x2a, 0x05}),
    REGIR(C, KC, 5, PR_WE, A, KA, KB, KC),
    /* the holder's key: B takes over with its type; the type changed, so the remaining
     * registrants are told the old one was released */
    PRE(B, PR_EA, KB, KA, PR_OK, 6, PR_EA, B, 0, KB, KC, {A, 0x2a, 0x05}, {C, 0x2a, 0x04}),
    /* the holder changes the type by preempting its own key: it keeps its registration */
    PRE(B, PR_EA_RO, KB, KB, PR_OK, 7, PR_EA_RO, B, 0, KB, KC, {C, 0x2a, 0x04}),
};

static const struct step s_preempt_ar[] = {
    REGI(A, KA, 1, KA, 0, 0),
    REGI(B, KB, 2, KA, KB, 0),
    REGI(C, KC, 3, KA, KB, KC),
    RES(A, PR_EA_AR, KA, PR_OK, 3, PR_EA_AR, NONE, KA, KB, KC),
    /* a key: those registrations only */
    PRE(B, PR_WE, KB, KC, PR_OK, 4, PR_EA_AR, NONE, KA, KB, 0, {C, 0x2a, 0x05}),
    REGIR(C, KC, 5, PR_EA_AR, NONE, KA, KB, KC),
    /* SARK 0 takes an all-registrants reservation: everyone else is removed */
    PRE(B, PR_WE, KB, 0, PR_OK, 6, PR_WE, B, 0, KB, 0, {A, 0x2a, 0x05}, {C, 0x2a, 0x05}),
};

#define MOV(w, k, s, to, u, r, g, rt, h, ka, kb, kc)                                               \
	{                                                                                          \
		w, PR_OUT_REGISTER_MOVE, 0, k, s, to, u, r, g, rt, h, {ka, kb, kc},                \
		{                                                                                  \
			{                                                                          \
				0                                                                  \
			}                                                                          \
		}                                                                                  \
	}

static const struct step s_move[] = {
    REGI(A, KA, 1, KA, 0, 0),
    /* no reservation: nothing to move */
    MOV(A, KA, KB, B, false, PR_CONFLICT, 1, 0, NONE, KA, 0, 0),
    RES(A, PR_WE, KA, PR_OK, 1, PR_WE, A, KA, 0, 0),
    MOV(A, KA, 0, B, false, PR_BAD_PARAM, 1, PR_WE, A, KA, 0, 0),
    MOV(A, KA, KB, A, false, PR_BAD_PARAM, 1, PR_WE, A, KA, 0, 0),
    MOV(A, KB, KB, B, false, PR_CONFLICT, 1, PR_WE, A, KA, 0, 0),
    /* B gets a registration and the reservation; A stays registered */
    MOV(A, KA, KB, B, false, PR_OK, 2, PR_WE, B, KA, KB, 0),
    /* only the holder may move it; with UNREG the source registration goes */
    MOV(A, KA, KC, C, false, PR_CONFLICT, 2, PR_WE, B, KA, KB, 0),
    MOV(B, KB, KC, C, true, PR_OK, 3, PR_WE, C, KA, 0, KC),
    /* an all-registrants reservation has no single holder to move */
    RES(C, PR_WE, KC, PR_OK, 3, PR_WE, C, KA, 0, KC),
    {C, PR_OUT_RELEASE, PR_WE, KC, 0, NONE, false, PR_OK, 3, 0, NONE, {KA, 0, KC}, {{0}}},
    RES(C, PR_EA_AR, KC, PR_OK, 3, PR_EA_AR, NONE, KA, 0, KC),
    MOV(C, KC, KB, B, false, PR_CONFLICT, 3, PR_EA_AR, NONE, KA, 0, KC),
};

#define SCN(s)                                                                                     \
	{                                                                                          \
#s, s, sizeof(s) / sizeof(s[0])                                                    \
	}
static const struct scenario scenarios[] = {
    SCN(s_register),	 SCN(s_reserve),     SCN(s_unregister_holder), SCN(s_clear),
    SCN(s_preempt_regs), SCN(s_preempt_res), SCN(s_preempt_ar),	       SCN(s_move),
};

static bool ua_listed(const struct pr_effects *fx, const struct ua_exp *u)
{
	for (size_t i = 0; i < fx->nua; i++)
		if (strcmp(fx->ua[i].iport, NX[u->who].iport) == 0 && fx->ua[i].asc == u->asc &&
		    fx->ua[i].ascq == u->ascq)
			return true;
	return false;
}

static void run_scenario(const struct scenario *sc)
{
	struct pr_state st;

	pr_state_init(&st);
	printf("# scenario %s\n", sc->name);
	for (size_t i = 0; i < sc->n; i++) {
		const struct step *s = &sc->steps[i];
		struct pr_out req = {.sa = s->sa,
				     .type = s->type,
				     .key = s->key,
				     .sakey = s->sakey,
				     .unreg = s->unreg};
		struct pr_effects fx;
		enum pr_result rc;

		if (s->move_to != NONE)
			req.move = NX[s->move_to];
		rc = pr_out_apply(&st, &NX[s->who], &req, &fx);
		printf("# step %zu: nexus %d sa %u\n", i, s->who, s->sa);
		CHECK_EQ(rc, s->rc);
		CHECK_EQ(st.generation, s->gen);
		CHECK_EQ(st.type, s->restype);
		for (int n = 0; n < 3; n++) {
			int r = pr_find(&st, &NX[n]);

			CHECK_EQ(r >= 0 ? st.regs[r].key : 0, s->keys[n]);
			if (st.type && !pr_type_all_registrants(st.type))
				CHECK_EQ(pr_is_holder(&st, &NX[n]), n == s->holder);
			else if (st.type)
				CHECK_EQ(pr_is_holder(&st, &NX[n]), r >= 0);
		}
		int nua = 0;

		for (int u = 0; u < 3; u++)
			if (s->ua[u].asc) {
				nua++;
				CHECK(ua_listed(&fx, &s->ua[u]));
			}
		CHECK_EQ(fx.nua, nua);
		pr_effects_clear(&fx);
	}
	pr_state_clear(&st);
}

/* ---- the conflict table (SPC-4 table 52/53, SBC-3 table 13) ---- */

static void test_conflict_table(void)
{
	static const struct {
		uint8_t type;
		bool reg, holder, read;
		bool conflict;
	} rows[] = {
	    {0, false, false, false, false},	   {PR_WE, false, false, true, false},
	    {PR_WE, false, false, false, true},	   {PR_WE, true, false, false, true},
	    {PR_WE, true, true, false, false},	   {PR_EA, true, false, true, true},
	    {PR_EA, false, false, true, true},	   {PR_EA, true, true, true, false},
	    {PR_EA, true, true, false, false},	   {PR_WE_RO, false, false, true, false},
	    {PR_WE_RO, false, false, false, true}, {PR_WE_RO, true, false, false, false},
	    {PR_EA_RO, false, false, true, true},  {PR_EA_RO, true, false, true, false},
	    {PR_EA_RO, true, false, false, false}, {PR_WE_AR, false, false, false, true},
	    {PR_WE_AR, false, false, true, false}, {PR_WE_AR, true, true, false, false},
	    {PR_EA_AR, false, false, true, true},  {PR_EA_AR, true, true, true, false},
	};

	printf("# conflict table\n");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint8_t f = (uint8_t)(rows[i].type | (rows[i].reg ? PR_F_REGISTERED : 0) |
				      (rows[i].holder ? PR_F_HOLDER : 0));

		CHECK_EQ(pr_conflict(f, rows[i].read), rows[i].conflict);
	}
}

/* ---- PERSISTENT RESERVE IN data ---- */

static void apply_ok(struct pr_state *st, int who, uint8_t sa, uint8_t type, uint64_t key,
		     uint64_t sakey)
{
	struct pr_out req = {.sa = sa, .type = type, .key = key, .sakey = sakey};
	struct pr_effects fx;

	CHECK_EQ(pr_out_apply(st, &NX[who], &req, &fx), PR_OK);
	pr_effects_clear(&fx);
}

static void test_in_data(void)
{
	struct pr_state st;
	uint8_t d[512];
	uint32_t n;

	printf("# PERSISTENT RESERVE IN data\n");
	pr_state_init(&st);
	memset(d, 0xee, sizeof(d));
	n = pr_in_read_keys(&st, d, sizeof(d));
	CHECK_EQ(n, 8);
	CHECK_MEM(d, B8(0, 0, 0, 0, 0, 0, 0, 0), 8);
	n = pr_in_read_reservation(&st, d, sizeof(d));
	CHECK_EQ(n, 8);
	apply_ok(&st, A, PR_OUT_REGISTER_IGNORE, 0, 0, KA);
	apply_ok(&st, B, PR_OUT_REGISTER_IGNORE, 0, 0, KB);
	/* READ KEYS truncated to 8 bytes: ADDITIONAL LENGTH still says 16 */
	memset(d, 0xee, sizeof(d));
	n = pr_in_read_keys(&st, d, 8);
	CHECK_EQ(n, 24);
	CHECK_MEM(d, B8(0, 0, 0, 2, 0, 0, 0, 16), 8);
	CHECK_EQ(d[8], 0xee);
	n = pr_in_read_keys(&st, d, sizeof(d));
	CHECK_EQ(get_be64(d + 8), KA);
	CHECK_EQ(get_be64(d + 16), KB);
	apply_ok(&st, B, PR_OUT_RESERVE, PR_EA_RO, KB, 0);
	n = pr_in_read_reservation(&st, d, sizeof(d));
	CHECK_EQ(n, 24);
	CHECK_EQ(get_be32(d + 4), 16);
	CHECK_EQ(get_be64(d + 8), KB);
	CHECK_EQ(d[21], PR_EA_RO);
	/* REPORT CAPABILITIES: CRH, PTPL_C as given, TMV, every type */
	n = pr_in_report_caps(&st, true, d, sizeof(d));
	CHECK_EQ(n, 8);
	CHECK_MEM(d, B8(0, 8, 0x11, 0x80, 0xea, 0x01, 0, 0), 8);
	n = pr_in_report_caps(&st, false, d, sizeof(d));
	CHECK_EQ(d[2], 0x10);
	/* READ FULL STATUS: A (not holder), B (holder, EA_RO), each with its TransportID */
	n = pr_in_read_full_status(&st, d, sizeof(d));
	{
		const char *ip = NX[A].iport;
		uint32_t tl = (uint32_t)((strlen(ip) + 1 + 3) & ~3u), one = 24 + 4 + tl;

		CHECK_EQ(n, 8 + 2 * one);
		CHECK_EQ(get_be32(d + 4), 2 * one);
		CHECK_EQ(get_be64(d + 8), KA);
		CHECK_EQ(d[8 + 12], 0);
		CHECK_EQ(get_be16(d + 8 + 18), 1);
		CHECK_EQ(get_be32(d + 8 + 20), 4 + tl);
		CHECK_EQ(d[8 + 24], 0x45);
		CHECK_EQ(get_be16(d + 8 + 26), tl);
		CHECK_MEM(d + 8 + 28, ip, strlen(ip) + 1);
		CHECK_EQ(get_be64(d + 8 + one), KB);
		CHECK_EQ(d[8 + one + 12], 0x01);
		CHECK_EQ(d[8 + one + 13], PR_EA_RO);
	}
	/* an all-registrants reservation reports key 0 */
	apply_ok(&st, B, PR_OUT_RELEASE, PR_EA_RO, KB, 0);
	apply_ok(&st, A, PR_OUT_RESERVE, PR_WE_AR, KA, 0);
	pr_in_read_reservation(&st, d, sizeof(d));
	CHECK_EQ(get_be64(d + 8), 0);
	CHECK_EQ(d[21], PR_WE_AR);
	pr_state_clear(&st);
}

/* ---- PREEMPT AND ABORT: whose tasks go ---- */

static bool abort_listed(const struct pr_effects *fx, int who)
{
	for (size_t i = 0; i < fx->nabort; i++)
		if (strcmp(fx->abort[i].iport, NX[who].iport) == 0 &&
		    strcmp(fx->abort[i].tport, NX[who].tport) == 0)
			return true;
	return false;
}

/* SPC-4 5.12.11.4.5: the tasks of the I_T nexuses whose registrations a PREEMPT AND ABORT
 * removes are aborted (never the issuer's); PREEMPT aborts nothing. */
static void test_preempt_abort(void)
{
	struct pr_state st;
	struct pr_out req = {.type = PR_WE};
	struct pr_effects fx;

	printf("# PREEMPT AND ABORT lists the preempted nexuses\n");
	pr_state_init(&st);
	apply_ok(&st, A, PR_OUT_REGISTER, 0, 0, KA);
	apply_ok(&st, B, PR_OUT_REGISTER, 0, 0, KB);
	apply_ok(&st, C, PR_OUT_REGISTER, 0, 0, KB);
	apply_ok(&st, B, PR_OUT_RESERVE, PR_WE, KB, 0);
	/* PREEMPT of B's key: B and C go, no aborts */
	req.sa = PR_OUT_PREEMPT;
	req.key = KA;
	req.sakey = KB;
	{
		struct pr_state copy;

		pr_state_init(&copy);
		CHECK_EQ(pr_state_copy(&copy, &st), 0);
		CHECK_EQ(pr_out_apply(&copy, &NX[A], &req, &fx), PR_OK);
		CHECK_EQ(fx.nabort, 0);
		CHECK_EQ(fx.nua, 2); /* 2A/05 to B and C */
		pr_effects_clear(&fx);
		pr_state_clear(&copy);
	}
	/* PREEMPT AND ABORT of the reservation holder's key: B and C are aborted, A is not */
	req.sa = PR_OUT_PREEMPT_ABORT;
	CHECK_EQ(pr_out_apply(&st, &NX[A], &req, &fx), PR_OK);
	CHECK_EQ(fx.nabort, 2);
	CHECK(abort_listed(&fx, B) && abort_listed(&fx, C) && !abort_listed(&fx, A));
	CHECK(pr_is_holder(&st, &NX[A]));
	pr_effects_clear(&fx);
	/* registrations only (no reservation held by the key): the same rule */
	apply_ok(&st, B, PR_OUT_REGISTER, 0, 0, KC);
	req.sakey = KC;
	CHECK_EQ(pr_out_apply(&st, &NX[A], &req, &fx), PR_OK);
	CHECK_EQ(fx.nabort, 1);
	CHECK(abort_listed(&fx, B));
	pr_effects_clear(&fx);
	/* a key nobody holds: RESERVATION CONFLICT, nothing listed */
	CHECK_EQ(pr_out_apply(&st, &NX[A], &req, &fx), PR_CONFLICT);
	CHECK_EQ(fx.nabort, 0);
	pr_effects_clear(&fx);
	/* an all-registrants reservation with key 0: every other registrant is aborted */
	apply_ok(&st, B, PR_OUT_REGISTER, 0, 0, KB);
	apply_ok(&st, C, PR_OUT_REGISTER, 0, 0, KC);
	apply_ok(&st, A, PR_OUT_RELEASE, PR_WE, KA, 0);
	apply_ok(&st, A, PR_OUT_RESERVE, PR_WE_AR, KA, 0);
	req.type = PR_WE_AR;
	req.sakey = 0;
	CHECK_EQ(pr_out_apply(&st, &NX[A], &req, &fx), PR_OK);
	CHECK_EQ(fx.nabort, 2);
	CHECK(abort_listed(&fx, B) && abort_listed(&fx, C) && !abort_listed(&fx, A));
	CHECK_EQ(st.nregs, 1);
	pr_effects_clear(&fx);
	pr_state_clear(&st);
}

/* ---- TransportIDs ---- */

static uint32_t tid(uint8_t *d, uint8_t fmt, const char *s, uint16_t addl)
{
	memset(d, 0, 4 + addl);
	d[0] = fmt;
	put_be16(d + 2, addl);
	memcpy(d + 4, s, strlen(s));
	return 4 + addl;
}

static void test_transport_id(void)
{
	uint8_t d[300];
	char port[PR_MAX_PORT_LEN];
	uint32_t n;

	printf("# iSCSI TransportID\n");
	n = tid(d, 0x45, "iqn.x:y,i,0x00023D000001", 28);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 32);
	CHECK_STR(port, "iqn.x:y,i,0x00023d000001");
	/* format 00b (name only), a protocol other than iSCSI, bad lengths, a bad ISID */
	n = tid(d, 0x05, "iqn.x:y", 20);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
	n = tid(d, 0x44, "iqn.x:y,i,0x00023d000001", 28);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
	n = tid(d, 0x45, "iqn.x:y,i,0x00023d000001", 26);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
	n = tid(d, 0x45, "iqn.x:y,i,0x00023d000001", 28);
	CHECK_EQ(pr_parse_transport_id(d, n - 1, port), 0);
	n = tid(d, 0x45, "iqn.x:y,i,0x00023d00001", 28);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
	n = tid(d, 0x45, "iqn.x:y,i,0x00023d00000g", 28);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
	n = tid(d, 0x45, ",i,0x00023d000001", 20);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
	/* not NUL terminated within its length */
	n = tid(d, 0x45, "iqn.x:yyyyyyyyyyyyy,i,0x00023d000001", 32);
	CHECK_EQ(pr_parse_transport_id(d, n, port), 0);
}

/* ---- the state file ---- */

static char dir[64];

static void write_file(const char *path, const char *body, bool sum)
{
	FILE *f = fopen(path, "w");

	fputs(body, f);
	if (sum)
		fprintf(f, "sum %016llx\n",
			(unsigned long long)fnv1a64(FNV1A64_INIT, body, strlen(body)));
	fclose(f);
}

static void test_file(void)
{
	struct pr_state st, back;
	char path[128], err[512];
	struct stat sb;
	static const struct {
		const char *body;
		bool sum;
		const char *want; /* substring of the error */
	} bad[] = {
	    {"", false, "not a text file"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\n", false, "last line"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nsum 0000000000000000\n", false,
	     "checksum mismatch"},
	    {"ix-pr-state 2\ngeneration 1\naptpl 1\ntype 0\n", true, ":1: not an ix"},
	    {"ix-pr-state 1\ngeneration x\naptpl 1\ntype 0\n", true, ":2: expected \"generation"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 2\ntype 0\n", true, ":3:"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 2\n", true,
	     ":4: unknown reservation type"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 1\n", true, "exactly one holder"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nreg 0000000000000000 0 a,i,0x1 "
	     "t,t,0x1\n",
	     true, ":5: reservation key"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nreg 00000000000000a1 0 a,i,0x1\n", true,
	     ":5: expected \"reg"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nreg 00000000000000a1 0 ai0x1 t,t,0x1\n",
	     true, "malformed initiator port"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nreg 00000000000000a1 3 a,i,0x1 "
	     "t,t,0x1\n",
	     true, "holder must be"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nreg 00000000000000a1 0 a,i,0x1 "
	     "t,t,0x1\n"
	     "reg 00000000000000a2 0 A,i,0x1 t,t,0x1\n",
	     true, ":6: the same I_T nexus"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 7\nreg 00000000000000a1 1 a,i,0x1 "
	     "t,t,0x1\n",
	     true, "a holder is marked"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 8\n", true, "without registrants"},
	    {"ix-pr-state 1\ngeneration 1\naptpl 1\ntype 3\nreg 00000000000000a1 1 a,i,0x1 "
	     "t,t,0x1\n"
	     "reg 00000000000000a2 1 b,i,0x1 t,t,0x1\n",
	     true, "exactly one holder"},
	};

	printf("# APTPL state file\n");
	strcpy(dir, "/tmp/ix-pr-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/lu.pr", dir);
	pr_state_init(&st);
	pr_state_init(&back);
	CHECK_EQ(pr_state_load(&back, path, err, sizeof(err)), -ENOENT);
	apply_ok(&st, A, PR_OUT_REGISTER_IGNORE, 0, 0, KA);
	apply_ok(&st, B, PR_OUT_REGISTER_IGNORE, 0, 0, KB);
	apply_ok(&st, C, PR_OUT_REGISTER_IGNORE, 0, 0, KC);
	apply_ok(&st, B, PR_OUT_RESERVE, PR_EA, KB, 0);
	st.aptpl = true;
	CHECK_EQ(pr_state_save(&st, path, err, sizeof(err)), 0);
	CHECK_EQ(stat(path, &sb), 0);
	CHECK_EQ(sb.st_mode & 0777, 0600);
	snprintf(err, sizeof(err), "%s/lu.pr.tmp", dir);
	CHECK(access(err, F_OK) < 0); /* the temporary file is gone */
	CHECK_EQ(pr_state_load(&back, path, err, sizeof(err)), 0);
	CHECK_EQ(back.generation, 3);
	CHECK_EQ(back.aptpl, true);
	CHECK_EQ(back.type, PR_EA);
	CHECK_EQ(back.nregs, 3);
	for (int n = 0; n < 3; n++) {
		int a = pr_find(&st, &NX[n]), b = pr_find(&back, &NX[n]);

		CHECK(b >= 0);
		if (b >= 0)
			CHECK_EQ(back.regs[b].key, st.regs[a].key);
		CHECK_EQ(pr_is_holder(&back, &NX[n]), n == B);
	}
	/* removing: then there is nothing to load, and removing again is fine */
	CHECK_EQ(pr_state_remove(path, err, sizeof(err)), 0);
	CHECK_EQ(pr_state_load(&back, path, err, sizeof(err)), -ENOENT);
	CHECK_EQ(pr_state_remove(path, err, sizeof(err)), 0);
	/* a directory that is not there: a clear error, nothing written */
	snprintf(err, sizeof(err), "%s/missing/lu.pr", dir);
	{
		char e2[512] = "";

		CHECK(pr_state_save(&st, err, e2, sizeof(e2)) < 0);
		CHECK(strstr(e2, "missing/lu.pr.tmp") != NULL);
	}
	/* damaged files: refused with the file, the line and what is wrong */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		write_file(path, bad[i].body, bad[i].sum);
		CHECK_EQ(pr_state_load(&back, path, err, sizeof(err)), -EINVAL);
		CHECK_EQ(back.nregs, 0);
		printf("# %s\n", err);
		CHECK(strstr(err, path) != NULL);
		CHECK(strstr(err, bad[i].want) != NULL);
	}
	/* binary junk */
	{
		FILE *f = fopen(path, "w");

		fwrite("ix-pr-state 1\n\0\n", 1, 16, f);
		fclose(f);
		CHECK_EQ(pr_state_load(&back, path, err, sizeof(err)), -EINVAL);
	}
	unlink(path);
	rmdir(dir);
	pr_state_clear(&st);
	pr_state_clear(&back);
}

static void test_limits(void)
{
	struct pr_state st, copy;
	char ip[64];
	struct pr_out req = {.sa = PR_OUT_REGISTER_IGNORE, .sakey = 1};
	struct pr_effects fx;
	enum pr_result rc = PR_OK;
	int ok = 0;

	printf("# registration limit\n");
	pr_state_init(&st);
	for (int i = 0; i <= PR_MAX_REGS; i++) {
		struct pr_nexus_id who = {ip, "t,t,0x1"};

		snprintf(ip, sizeof(ip), "iqn.x:%d,i,0x000000000001", i);
		rc = pr_out_apply(&st, &who, &req, &fx);
		pr_effects_clear(&fx);
		ok += rc == PR_OK;
	}
	CHECK_EQ(ok, PR_MAX_REGS);
	CHECK_EQ(rc, PR_NO_RESOURCES);
	CHECK_EQ(st.nregs, PR_MAX_REGS);
	pr_state_init(&copy);
	CHECK_EQ(pr_state_copy(&copy, &st), 0);
	CHECK_EQ(copy.nregs, PR_MAX_REGS);
	CHECK_STR(copy.regs[7].iport, st.regs[7].iport);
	CHECK(copy.regs[7].iport != st.regs[7].iport);
	pr_state_clear(&copy);
	pr_state_clear(&st);
}

/* ---- what a gateway that was not told derives (pr_missed_effects) ---- */

static bool has_ua(const struct pr_effects *fx, const char *iport, const char *tport,
		   uint8_t asc, uint8_t ascq)
{
	for (size_t i = 0; i < fx->nua; i++)
		if (strcmp(fx->ua[i].iport, iport) == 0 && strcmp(fx->ua[i].tport, tport) == 0 &&
		    fx->ua[i].asc == asc && fx->ua[i].ascq == ascq)
			return true;
	return false;
}

/* Apply req through nexus who to a copy of *st; the unit attentions the command established
 * (told) must be exactly those derived from the two states (missed), but for the issuing
 * nexus's own: it is on the gateway that made the change (another target port), never on one
 * that missed it. *st becomes the new state. */
static void missed_matches(struct pr_state *st, int who, uint8_t sa, uint8_t type,
			   uint64_t key, uint64_t sakey, const char *what)
{
	struct pr_out req = {.sa = sa, .type = type, .key = key, .sakey = sakey};
	struct pr_effects told, missed = {0};
	struct pr_state next;
	size_t n = 0, m = 0;
	bool same = true;

	pr_state_init(&next);
	CHECK_EQ(pr_state_copy(&next, st), 0);
	CHECK_EQ(pr_out_apply(&next, &NX[who], &req, &told), PR_OK);
	CHECK_EQ(pr_missed_effects(st, &next, &missed), 0);
	for (size_t i = 0; i < told.nua; i++) {
		if (strcmp(told.ua[i].iport, NX[who].iport) == 0 &&
		    strcmp(told.ua[i].tport, NX[who].tport) == 0)
			continue;
		n++;
		same = same && has_ua(&missed, told.ua[i].iport, told.ua[i].tport, told.ua[i].asc,
				      told.ua[i].ascq);
	}
	for (size_t i = 0; i < missed.nua; i++)
		if (strcmp(missed.ua[i].iport, NX[who].iport) != 0 ||
		    strcmp(missed.ua[i].tport, NX[who].tport) != 0)
			m++;
	printf("# %s: %zu told, %zu derived\n", what, n, m);
	CHECK(same);
	CHECK_EQ(m, n);
	pr_effects_clear(&told);
	pr_effects_clear(&missed);
	pr_state_clear(st);
	*st = next;
}

static void test_missed(void)
{
	struct pr_state st, same;
	struct pr_effects fx = {0};

	printf("# the unit attentions of a change a gateway was not told of\n");
	pr_state_init(&st);
	apply_ok(&st, A, PR_OUT_REGISTER, 0, 0, KA);
	apply_ok(&st, B, PR_OUT_REGISTER, 0, 0, KB);
	apply_ok(&st, C, PR_OUT_REGISTER, 0, 0, KC);
	apply_ok(&st, B, PR_OUT_RESERVE, PR_WE_RO, KB, 0);
	/* nothing changed: nothing to tell */
	pr_state_init(&same);
	CHECK_EQ(pr_state_copy(&same, &st), 0);
	CHECK_EQ(pr_missed_effects(&st, &same, &fx), 0);
	CHECK_EQ(fx.nua, 0);
	pr_state_clear(&same);
	missed_matches(&st, A, PR_OUT_PREEMPT, PR_WE_RO, KA, KC, "PREEMPT of a registrant's key");
	apply_ok(&st, C, PR_OUT_REGISTER, 0, 0, KC);
	missed_matches(&st, B, PR_OUT_RELEASE, PR_WE_RO, KB, 0,
		       "RELEASE of a registrants-only reservation");
	apply_ok(&st, B, PR_OUT_RESERVE, PR_WE, KB, 0);
	missed_matches(&st, B, PR_OUT_RELEASE, PR_WE, KB, 0, "RELEASE of Write Exclusive");
	apply_ok(&st, B, PR_OUT_RESERVE, PR_WE, KB, 0);
	missed_matches(&st, A, PR_OUT_PREEMPT, PR_EA, KA, KB,
		       "PREEMPT of the holder, another type");
	apply_ok(&st, B, PR_OUT_REGISTER, 0, 0, KB);
	missed_matches(&st, C, PR_OUT_CLEAR, 0, KC, 0, "CLEAR");
	pr_state_clear(&st);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		run_scenario(&scenarios[i]);
	test_conflict_table();
	test_in_data();
	test_preempt_abort();
	test_missed();
	test_transport_id();
	test_file();
	test_limits();
	return tap_done();
}
