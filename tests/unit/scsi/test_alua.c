/* ALUA (SPC-4 5.15): the state -> allowed command table, INQUIRY TPGS and the VPD 0x83
 * designators, REPORT TARGET PORT GROUPS in both formats (bytes written out from SPC-4 6.36),
 * SET TARGET PORT GROUPS and its parameter checks, the NOT READY sense each state gives, unit
 * attentions 2A/06 on a state change, configuration checks and reload keeping states. */
#include <errno.h>
#include <stdio.h>

#include "ha/ha_alua.h"
#include "scsi/scsi_int.h"
#include "scsi_harness.h"

#define TN "iqn.2024-01.org.example:alua"

struct aenv {
	struct env e;
	struct scsi_nexus *a, *b; /* nexus a on target port 1 (group 10), b on port 2 (group 20) */
};

static struct scsi_alua_cfg two_groups(uint8_t s1, uint8_t s2)
{
	struct scsi_alua_cfg c = {.ngroups = 3, .explicit_ok = true, .transition_s = 7};

	c.groups[0] = (struct scsi_alua_group_cfg){
	    .id = 10, .state = s1, .preferred = true, .nports = 1, .ports = {1}};
	c.groups[1] =
	    (struct scsi_alua_group_cfg){.id = 20, .state = s2, .nports = 1, .ports = {2}};
	/* a group of another gateway: reported, no local port */
	c.groups[2] = (struct scsi_alua_group_cfg){
	    .id = 30, .state = SCSI_ALUA_STANDBY, .nports = 2, .ports = {3, 4}};
	return c;
}

static void setup(struct aenv *x)
{
	struct scsi_lu_cfg cfg = {.backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .target_name = TN};
	struct scsi_lu *lu;
	char err[128];
	static const uint8_t tur[16] = {0};
	struct tcmd t;

	memset(x, 0, sizeof(*x));
	x->e.loop = ev_loop_new();
	x->e.thr = scsi_thread_new(x->e.loop, NULL);
	x->e.map = scsi_lun_map_new();
	x->e.buf = aligned_alloc(4096, TBUF);
	CHECK_EQ(scsi_lu_new(&cfg, &lu, err, sizeof(err)), 0);
	CHECK_EQ(scsi_lun_map_add(x->e.map, 0, lu), 0);
	scsi_lu_put(lu);
	x->a = scsi_nexus_new(x->e.map, "iqn.i1,i,0x1", TN ",t,0x0001");
	x->b = scsi_nexus_new(x->e.map, "iqn.i1,i,0x2", TN ",t,0x0002");
	x->e.nx = x->a;
	/* take the power-on unit attentions */
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
}

static void teardown(struct aenv *x)
{
	scsi_nexus_free(x->a);
	scsi_nexus_free(x->b);
	scsi_lun_map_free(x->e.map);
	scsi_thread_free(x->e.thr);
	ev_loop_free(x->e.loop);
	free(x->e.buf);
}

/* ---- the pure table ---- */

static void test_table(void)
{
	static const struct {
		uint8_t state;
		uint16_t flags;
		bool ok;
		uint8_t ascq;
	} rows[] = {
	    {SCSI_ALUA_ACTIVE_OPTIMIZED, 0, true, 0},
	    {SCSI_ALUA_ACTIVE_NON_OPTIMIZED, 0, true, 0},
	    {SCSI_ALUA_STANDBY, 0, false, 0x0b},
	    {SCSI_ALUA_STANDBY, SCSI_F_ALUA_STBY, true, 0},
	    {SCSI_ALUA_STANDBY, SCSI_F_ALUA_UNAV, true, 0},
	    {SCSI_ALUA_STANDBY, SCSI_F_ALUA_ANY, true, 0},
	    {SCSI_ALUA_UNAVAILABLE, 0, false, 0x0c},
	    {SCSI_ALUA_UNAVAILABLE, SCSI_F_ALUA_STBY, false, 0x0c},
	    {SCSI_ALUA_UNAVAILABLE, SCSI_F_ALUA_UNAV, true, 0},
	    {SCSI_ALUA_UNAVAILABLE, SCSI_F_ALUA_ANY, true, 0},
	    {SCSI_ALUA_TRANSITIONING, SCSI_F_ALUA_UNAV, false, 0x0a},
	    {SCSI_ALUA_TRANSITIONING, SCSI_F_ALUA_STBY, false, 0x0a},
	    {SCSI_ALUA_TRANSITIONING, SCSI_F_ALUA_ANY, true, 0},
	    {SCSI_ALUA_OFFLINE, SCSI_F_ALUA_UNAV, false, 0x12},
	    {SCSI_ALUA_OFFLINE, SCSI_F_ALUA_ANY, true, 0},
	};

	printf("# state table\n");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint8_t ascq = 0;
		CHECK_EQ(scsi_alua_allows(rows[i].state, rows[i].flags, &ascq), rows[i].ok);
		if (!rows[i].ok)
			CHECK_EQ(ascq, rows[i].ascq);
	}
	/* every command in the opcode table is classed as SPC-4 5.15.2.4.4-6 say */
	{
		const struct scsi_op *tab = scsi_op_table();
		bool sa;
		const struct scsi_op *tur = &tab[0x00], *inq = &tab[0x12], *rl = &tab[0xa0];
		const struct scsi_op *rs = &tab[0x03], *ms = &tab[0x1a], *rd = &tab[0x28];
		const struct scsi_op *rtpg = scsi_op_lookup(0xa3, 0x0a, &sa);
		const struct scsi_op *stpg = scsi_op_lookup(0xa4, 0x0a, &sa);
		const struct scsi_op *prin = scsi_op_lookup(0x5e, 0x00, &sa);
		const struct scsi_op *rsoc = scsi_op_lookup(0xa3, 0x0c, &sa);
		uint8_t q;

		CHECK(rtpg && stpg && prin && rsoc);
		if (!rtpg || !stpg || !prin || !rsoc)
			return;
		CHECK(!scsi_alua_allows(SCSI_ALUA_STANDBY, tur->flags, &q));
		CHECK(!scsi_alua_allows(SCSI_ALUA_STANDBY, rd->flags, &q));
		CHECK(!scsi_alua_allows(SCSI_ALUA_STANDBY, rsoc->flags, &q));
		CHECK(scsi_alua_allows(SCSI_ALUA_STANDBY, ms->flags, &q));
		CHECK(scsi_alua_allows(SCSI_ALUA_STANDBY, prin->flags, &q));
		CHECK(scsi_alua_allows(SCSI_ALUA_STANDBY, stpg->flags, &q));
		CHECK(!scsi_alua_allows(SCSI_ALUA_UNAVAILABLE, ms->flags, &q));
		CHECK(!scsi_alua_allows(SCSI_ALUA_UNAVAILABLE, prin->flags, &q));
		CHECK(scsi_alua_allows(SCSI_ALUA_UNAVAILABLE, stpg->flags, &q));
		CHECK(!scsi_alua_allows(SCSI_ALUA_TRANSITIONING, stpg->flags, &q));
		for (unsigned s = 0; s < 16; s++) {
			if (!scsi_alua_state_name((uint8_t)s))
				continue;
			CHECK(scsi_alua_allows((uint8_t)s, inq->flags, &q));
			CHECK(scsi_alua_allows((uint8_t)s, rl->flags, &q));
			CHECK(scsi_alua_allows((uint8_t)s, rs->flags, &q));
			CHECK(scsi_alua_allows((uint8_t)s, rtpg->flags, &q));
		}
	}
}

static void test_names(void)
{
	uint8_t s = 0xff;

	printf("# state names\n");
	CHECK_EQ(scsi_alua_state_parse("active/optimized", &s), 0);
	CHECK_EQ(s, SCSI_ALUA_ACTIVE_OPTIMIZED);
	CHECK_EQ(scsi_alua_state_parse("Standby", &s), 0);
	CHECK_EQ(s, SCSI_ALUA_STANDBY);
	CHECK_EQ(scsi_alua_state_parse("active", &s), -EINVAL);
	CHECK_EQ(scsi_alua_state_parse(NULL, &s), -EINVAL);
	CHECK_STR(scsi_alua_state_name(SCSI_ALUA_TRANSITIONING), "transitioning");
	CHECK(scsi_alua_state_name(0x4) == NULL); /* LBA dependent: not supported */
}

static void test_cfg_errors(void)
{
	struct scsi_alua_cfg c = two_groups(0, 2);

	printf("# configuration checks\n");
	CHECK(scsi_alua_cfg_error(&c) == NULL);
	c.groups[1].id = 10;
	CHECK(scsi_alua_cfg_error(&c) != NULL);
	c = two_groups(0, 2);
	c.groups[1].ports[0] = 1; /* port 1 in two groups */
	CHECK(scsi_alua_cfg_error(&c) != NULL);
	c = two_groups(0, 2);
	c.groups[2].ports[1] = 3; /* twice in one group */
	CHECK(scsi_alua_cfg_error(&c) != NULL);
	c = two_groups(0, 2);
	c.groups[0].id = 0;
	CHECK(scsi_alua_cfg_error(&c) != NULL);
	c = two_groups(0, 9);
	CHECK(scsi_alua_cfg_error(&c) != NULL);
	c = two_groups(0, 2);
	c.groups[0].ports[0] = 0;
	CHECK(scsi_alua_cfg_error(&c) != NULL);
	c = two_groups(0, 2);
	c.ngroups = SCSI_ALUA_MAX_GROUPS + 1;
	CHECK(scsi_alua_cfg_error(&c) != NULL);
}

/* ---- without ALUA: nothing changes ---- */

static void test_off(struct aenv *x)
{
	static const uint8_t inq[16] = {0x12, 0, 0, 0, 96, 0};
	static const uint8_t rtpg[16] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
	static const uint8_t stpg[16] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0};
	static const uint8_t rsoc[16] = {0xa3, 0x0c, 0x02, 0xa4, 0, 0x0a, 0, 0, 1, 0, 0, 0};
	struct scsi_alua_cfg got;
	struct tcmd t;

	printf("# without ALUA\n");
	t_run(&x->e, x->a, 0, inq, 96, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[5] & 0x30, 0);
	t_run(&x->e, x->a, 0, rtpg, 256, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00); /* MAINTENANCE IN exists, this action does not */
	t_run(&x->e, x->a, 0, stpg, 0, B(0, 0, 0, 0, 0, 0, 0, 10), 8, &t);
	t_check_sense(&t, 0x5, 0x20, 0x00); /* MAINTENANCE OUT has nothing: unknown opcode */
	t_run(&x->e, x->a, 0, rsoc, 256, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[1] & 0x07, 0x01); /* not supported */
	CHECK_EQ(scsi_alua_get(x->e.map, &got), -ENOENT);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 10, SCSI_ALUA_STANDBY), -ENOENT);
}

/* ---- INQUIRY and VPD 0x83 ---- */

/* Find designator type `type` (association port) in a VPD 0x83 page; -1 if absent. */
static long find_desig(const uint8_t *d, uint32_t n, uint8_t assoc_type)
{
	for (uint32_t o = 4; o + 4 <= n; o += 4u + d[o + 3])
		if ((d[o + 1] & 0x3f) == assoc_type)
			return (long)o;
	return -1;
}

static void test_inquiry(struct aenv *x)
{
	static const uint8_t inq[16] = {0x12, 0, 0, 0, 96, 0};
	static const uint8_t vpd83[16] = {0x12, 1, 0x83, 0x01, 0, 0};
	struct tcmd t;
	long o;

	printf("# INQUIRY with ALUA\n");
	t_run(&x->e, x->a, 0, inq, 96, NULL, 0, &t);
	CHECK_EQ(t.c.buf[5] & 0x30, 0x30);	     /* TPGS 11b: implicit and explicit */
	CHECK_EQ(t.c.buf[5] & 0x08, 0x08);	     /* 3PC kept */
	t_run(&x->e, x->a, 5, inq, 96, NULL, 0, &t); /* no LU at LUN 5 */
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[0], 0x7f);
	CHECK_EQ(t.c.buf[5] & 0x30, 0);
	t_run(&x->e, x->b, 0, vpd83, 256, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* the LU designators are still there: NAA first */
	CHECK_EQ(t.c.buf[4 + 1], 0x03);
	o = find_desig(t.c.buf, t.c.data_in_len, 0x14); /* port assoc, relative target port */
	CHECK(o > 0);
	if (o > 0) {
		CHECK_EQ(t.c.buf[o + 1], 0x94);
		CHECK_EQ(get_be16(t.c.buf + o + 6), 2); /* nexus b is on TPGT 2 */
	}
	o = find_desig(t.c.buf, t.c.data_in_len, 0x15); /* target port group */
	CHECK(o > 0);
	if (o > 0) {
		CHECK_EQ(t.c.buf[o + 3], 4);
		CHECK_EQ(get_be16(t.c.buf + o + 6), 20);
	}
}

/* ---- REPORT TARGET PORT GROUPS ---- */

static void test_rtpg(struct aenv *x)
{
	static const uint8_t rtpg[16] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
	static const uint8_t rtpg_ext[16] = {0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
	static const uint8_t rtpg_short[16] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0};
	static const uint8_t rtpg_bad[16] = {0xa3, 0x4a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
	static const uint8_t body[] = {
	    0x80, 0xcf, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1,		   /* PREF, AO, group 10: port 1 */
	    0x02, 0xcf, 0, 20, 0, 0, 0, 1, 0, 0, 0, 2,		   /* standby, group 20: port 2 */
	    0x02, 0xcf, 0, 30, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, /* group 30: ports 3, 4 */
	};
	struct tcmd t;

	printf("# REPORT TARGET PORT GROUPS\n");
	t_run(&x->e, x->a, 0, rtpg, 256, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 4 + sizeof(body));
	CHECK_EQ(get_be32(t.c.buf), sizeof(body));
	CHECK_MEM(t.c.buf + 4, body, sizeof(body));
	t_run(&x->e, x->b, 0, rtpg_ext, 256, NULL, 0, &t); /* allowed on the standby path */
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 8 + sizeof(body));
	CHECK_EQ(get_be32(t.c.buf), 4 + sizeof(body));
	CHECK_MEM(t.c.buf + 4, B(0x10, 7, 0, 0), 4); /* FORMAT TYPE 1, IMPLICIT TRANSITION TIME */
	CHECK_MEM(t.c.buf + 8, body, sizeof(body));
	t_run(&x->e, x->a, 0, rtpg_short, 10, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 10); /* truncated; the length still says all */
	CHECK_EQ(get_be32(t.c.buf), sizeof(body));
	t_run(&x->e, x->a, 0, rtpg_bad, 256, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
}

/* ---- commands on a standby path, SET TARGET PORT GROUPS and the unit attention ---- */

static void test_states(struct aenv *x)
{
	static const uint8_t tur[16] = {0};
	static const uint8_t rd[16] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
	static const uint8_t rc10[16] = {0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	static const uint8_t rl[16] = {0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
	static const uint8_t stpg[16] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0};
	struct tcmd t;

	printf("# asymmetric access states\n");
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0b); /* standby */
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0b);
	t_run(&x->e, x->b, 0, rc10, 8, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(&x->e, x->b, 0, rl, 256, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(&x->e, x->a, 0, rd, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);

	/* through b (standby is allowed to): group 20 active/optimized, group 10 standby */
	t_run(&x->e, x->b, 0, stpg, 0, B(0, 0, 0, 0, 0x00, 0, 0, 20, 0x02, 0, 0, 10), 12, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0); /* b: no unit attention (it asked), and now active */
	t_run(&x->e, x->a, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06); /* a: ASYMMETRIC ACCESS STATE CHANGED */
	t_run(&x->e, x->a, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0b);
	{
		static const uint8_t rtpg[16] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
		t_run(&x->e, x->a, 0, rtpg, 256, NULL, 0, &t);
		CHECK_MEM(t.c.buf + 4, B(0x82, 0xcf, 0, 10, 0, 1), 6); /* status: explicit */
		CHECK_MEM(t.c.buf + 16, B(0x00, 0xcf, 0, 20, 0, 1), 6);
	}

	/* implicit changes: every nexus hears of them */
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, SCSI_ALUA_UNAVAILABLE), 0);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0c);
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, SCSI_ALUA_TRANSITIONING), 0);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0a);
	t_run(&x->e, x->b, 0, stpg, 0, B(0, 0, 0, 0, 0x00, 0, 0, 20, 0x02, 0, 0, 10), 12, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0a); /* no SET TARGET PORT GROUPS while transitioning */
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, SCSI_ALUA_OFFLINE), 0);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x12);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, SCSI_ALUA_ACTIVE_NON_OPTIMIZED), 0);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* the same state again changes nothing and posts nothing */
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t); /* a's pending 2A/06s */
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t);
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, SCSI_ALUA_ACTIVE_NON_OPTIMIZED), 0);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 99, SCSI_ALUA_STANDBY), -ENOENT);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, 0x7), -EINVAL);
}

static void test_stpg_params(struct aenv *x)
{
	struct {
		const char *name;
		uint32_t len;
		const uint8_t *p;
		uint32_t plen;
		uint8_t key, asc;
		uint16_t field; /* SENSE-KEY SPECIFIC field pointer for 26/00 */
	} rows[] = {
	    {"length not a multiple of 4", 6, B(0, 0, 0, 0, 0, 0), 6, 0x5, 0x1a, 0},
	    {"transitioning asked for", 8, B(0, 0, 0, 0, 0x0f, 0, 0, 10), 8, 0x5, 0x26, 4},
	    {"offline asked for", 8, B(0, 0, 0, 0, 0x0e, 0, 0, 10), 8, 0x5, 0x26, 4},
	    {"reserved state", 8, B(0, 0, 0, 0, 0x05, 0, 0, 10), 8, 0x5, 0x26, 4},
	    {"unknown group", 8, B(0, 0, 0, 0, 0x00, 0, 0, 11), 8, 0x5, 0x26, 6},
	    {"a group twice", 12, B(0, 0, 0, 0, 0, 0, 0, 10, 2, 0, 0, 10), 12, 0x5, 0x26, 10},
	    {"less data than the length", 12, B(0, 0, 0, 0, 0, 0, 0, 10), 8, 0x5, 0x24, 0},
	};
	struct scsi_alua_cfg got;
	struct tcmd t;

	printf("# SET TARGET PORT GROUPS parameter checks\n");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint8_t cdb[16] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, (uint8_t)rows[i].len, 0, 0};

		printf("# %s\n", rows[i].name);
		t_run(&x->e, x->a, 0, cdb, 0, rows[i].p, rows[i].plen, &t);
		t_check_sense(&t, rows[i].key, rows[i].asc, 0);
		if (rows[i].asc == 0x26)
			CHECK_EQ(get_be16(t.c.sense + 16), rows[i].field);
	}
	/* a refused list changes nothing, even its valid first descriptor */
	CHECK_EQ(scsi_alua_get(x->e.map, &got), 0);
	CHECK_EQ(got.groups[0].state, SCSI_ALUA_ACTIVE_OPTIMIZED);
	{
		uint8_t cdb[16] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
		t_run(&x->e, x->a, 0, cdb, 0, NULL, 0, &t);
		CHECK_EQ(t.c.status, 0); /* length 0: nothing to do */
	}
}

/* Which commands count as I/O for an implicit failover (scsi_alua_medium_io, through the
 * dispatch table's flags): reads and writes of the medium do; TEST UNIT READY, which Linux's
 * scan and multipathd's path checker send to standby paths, and the other non-transfer commands
 * do not (they must get 04/0B and never move an RBD lock). The take-over itself needs an RBD
 * LU: tests/interop/ha_failover.py (standby-tur-keeps-owner) and tests/rdma/tests/mpath.sh. */
static void test_implicit_io_class(void)
{
	static const struct {
		uint8_t op;
		uint16_t sa;
		bool io;
	} cases[] = {
	    {0x00, 0, false}, /* TEST UNIT READY */
	    {0x1b, 0, false}, /* START STOP UNIT */
	    {0x25, 0, false}, /* READ CAPACITY(10) (runs in standby anyway) */
	    {0x35, 0, false}, /* SYNCHRONIZE CACHE(10) */
	    {0x91, 0, false}, /* SYNCHRONIZE CACHE(16) */
	    {0x08, 0, true},  /* READ(6) */
	    {0x28, 0, true},  /* READ(10) */
	    {0x88, 0, true},  /* READ(16) */
	    {0x0a, 0, true},  /* WRITE(6) */
	    {0x2a, 0, true},  /* WRITE(10) */
	    {0x8a, 0, true},  /* WRITE(16) */
	    {0x2f, 0, true},  /* VERIFY(10) */
	    {0x41, 0, true},  /* WRITE SAME(10) */
	    {0x89, 0, true},  /* COMPARE AND WRITE */
	};
	bool sa_valid;

	printf("# implicit failover: which commands count as I/O on a standby port\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct scsi_op *op = scsi_op_lookup(cases[i].op, cases[i].sa, &sa_valid);

		CHECK(op != NULL);
		if (op)
			CHECK_EQ(scsi_alua_medium_io(op->flags), cases[i].io);
	}
}

static void test_implicit_only(struct aenv *x)
{
	struct scsi_alua_cfg c = two_groups(0, 2);
	static const uint8_t inq[16] = {0x12, 0, 0, 0, 96, 0};
	static const uint8_t stpg[16] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0};
	static const uint8_t rsoc_stpg[16] = {0xa3, 0x0c, 0x02, 0xa4, 0, 0x0a, 0, 0, 1, 0, 0, 0};
	static const uint8_t tur[16] = {0};
	struct tcmd t;

	printf("# implicit ALUA only\n");
	c.explicit_ok = false;
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), 0);
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t); /* the 2A/06 of the change */
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->a, 0, inq, 96, NULL, 0, &t);
	CHECK_EQ(t.c.buf[5] & 0x30, 0x10);
	t_run(&x->e, x->a, 0, stpg, 0, B(0, 0, 0, 0, 0, 0, 0, 20), 8, &t);
	t_check_sense(&t, 0x5, 0x20, 0x00); /* no SET TARGET PORT GROUPS: an unknown opcode */
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t); /* b's 2A/06 */
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rsoc_stpg, 256, NULL, 0, &t); /* b is active/non-optimized */
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[1] & 0x07, 0x01); /* not supported */
}

/* A reload with the same configuration keeps states changed at run time; a changed one
 * applies, and both the change and turning ALUA off reach the nexuses. */
static void test_reload(struct aenv *x)
{
	struct scsi_alua_cfg c = two_groups(0, 2), got;
	static const uint8_t tur[16] = {0};
	static const uint8_t rd[16] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
	struct tcmd t;

	printf("# reload\n");
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), 0);
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	CHECK_EQ(scsi_alua_set_state(x->e.map, 20, SCSI_ALUA_ACTIVE_OPTIMIZED), 0);
	t_run(&x->e, x->a, 0, tur, 0, NULL, 0, &t);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), 0);
	CHECK_EQ(scsi_alua_get(x->e.map, &got), 0);
	CHECK_EQ(got.groups[1].state, SCSI_ALUA_ACTIVE_OPTIMIZED);
	CHECK_EQ(got.groups[1].status, 2);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0); /* nothing visible changed: no unit attention */
	c.groups[1].state = SCSI_ALUA_UNAVAILABLE;
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), 0);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0c);
	/* port 2 leaves every group: unavailable, and no group designator */
	c.groups[1].nports = 0;
	c.groups[1].state = SCSI_ALUA_ACTIVE_OPTIMIZED;
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), 0);
	t_run(&x->e, x->b, 0, tur, 0, NULL, 0, &t);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x04, 0x0c);
	c.ngroups = 0;
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), 0);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x06);
	t_run(&x->e, x->b, 0, rd, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(scsi_alua_configure(x->e.map, NULL), 0);
	c = two_groups(0, 2);
	c.groups[1].id = 10;
	CHECK_EQ(scsi_alua_configure(x->e.map, &c), -EINVAL);
}

static void test_rsoc(struct aenv *x)
{
	static const uint8_t one_rtpg[16] = {0xa3, 0x0c, 0x02, 0xa3, 0, 0x0a, 0, 0, 1, 0, 0, 0};
	static const uint8_t one_stpg[16] = {0xa3, 0x0c, 0x02, 0xa4, 0, 0x0a, 0, 0, 1, 0, 0, 0};
	static const uint8_t all[16] = {0xa3, 0x0c, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0};
	struct tcmd t;
	bool rtpg = false, stpg = false;

	printf("# REPORT SUPPORTED OPERATION CODES with ALUA\n");
	t_run(&x->e, x->a, 0, one_rtpg, 256, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[1] & 0x07, 0x03);
	CHECK_MEM(t.c.buf + 4, B(0xa3, 0x3f, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0), 12);
	t_run(&x->e, x->a, 0, one_stpg, 256, NULL, 0, &t);
	CHECK_EQ(t.c.buf[1] & 0x07, 0x03);
	CHECK_EQ(get_be16(t.c.buf + 2), 12);
	t_run(&x->e, x->a, 0, all, 4096, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	for (uint32_t o = 4; o + 8 <= t.c.data_in_len; o += 8) {
		uint16_t sa = get_be16(t.c.buf + o + 2);
		rtpg |= t.c.buf[o] == 0xa3 && sa == 0x0a;
		stpg |= t.c.buf[o] == 0xa4 && sa == 0x0a;
	}
	CHECK(rtpg && stpg);
}

/* Two gateways that export one image: the same naa_id under other target names and LUNs gives
 * the same VPD 0x83 NAA designator and the same VPD 0x80 serial; without it they differ. */
static void vpd_ids_ext(const char *tn, uint32_t lun, uint64_t naa_id, const uint64_t *naa_ext,
			const char *serial_cfg, uint8_t *naa, char *serial)
{
	struct scsi_lu_cfg cfg = {.backend = BS_TYPE_RAM,
				  .size_bytes = 64 << 10,
				  .target_name = tn,
				  .lun = lun,
				  .naa_id = naa_id,
				  .naa_ext = naa_ext ? *naa_ext : 0,
				  .has_naa_ext = naa_ext != NULL,
				  .serial = serial_cfg};
	static const uint8_t vpd83[16] = {0x12, 1, 0x83, 0x01, 0, 0};
	static const uint8_t vpd80[16] = {0x12, 1, 0x80, 0x01, 0, 0};
	struct aenv x;
	struct scsi_lu *lu;
	char err[128];
	struct tcmd t;

	memset(&x, 0, sizeof(x));
	x.e.loop = ev_loop_new();
	x.e.thr = scsi_thread_new(x.e.loop, NULL);
	x.e.map = scsi_lun_map_new();
	x.e.buf = aligned_alloc(4096, TBUF);
	CHECK_EQ(scsi_lu_new(&cfg, &lu, err, sizeof(err)), 0);
	CHECK_EQ(scsi_lun_map_add(x.e.map, lun, lu), 0);
	scsi_lu_put(lu);
	x.a = scsi_nexus_new(x.e.map, "iqn.i1,i,0x1", "t,t,0x1");
	x.b = scsi_nexus_new(x.e.map, "iqn.i1,i,0x2", "t,t,0x2");
	t_run(&x.e, x.a, lun, vpd83, 256, NULL, 0, &t);
	CHECK_EQ(t.c.buf[5], 0x03); /* the NAA designator first */
	memcpy(naa, t.c.buf + 8, 16);
	t_run(&x.e, x.a, lun, vpd80, 256, NULL, 0, &t);
	memcpy(serial, t.c.buf + 4, t.c.buf[3]);
	serial[t.c.buf[3]] = 0;
	teardown(&x);
}

static void vpd_ids(const char *tn, uint32_t lun, uint64_t naa_id, uint8_t *naa, char *serial)
{
	vpd_ids_ext(tn, lun, naa_id, NULL, NULL, naa, serial);
}

static void test_lu_identity(void)
{
	uint8_t n1[16], n2[16], n3[16];
	char s1[80], s2[80], s3[80];

	printf("# one LU identity on two gateways\n");
	vpd_ids("iqn.2024-01.org.example:gw1", 0, 0x6001405abcdef012ULL, n1, s1);
	vpd_ids("iqn.2024-01.org.example:gw2", 3, 0x6001405abcdef012ULL, n2, s2);
	vpd_ids("iqn.2024-01.org.example:gw2", 3, 0, n3, s3);
	CHECK_MEM(n1, n2, 16);
	CHECK_STR(s1, s2);
	CHECK(memcmp(n1, n3, 16) != 0);
	CHECK(strcmp(s1, s3) != 0);
	CHECK_EQ(n1[0] >> 4, 6); /* NAA 6 */
	/* all 32 digits given (naa_ext): the designator is exactly those 16 bytes */
	{
		static const uint8_t want[16] = {0x60, 0x01, 0x40, 0x54, 0xfc, 0x10, 0x71, 0xd7,
						 0xe2, 0xf4, 0xdf, 0x09, 0x5c, 0x89, 0x25, 0xa6};
		uint64_t ext = 0xe2f4df095c8925a6ULL;

		vpd_ids_ext("iqn.2024-01.org.example:gw1", 0, 0x60014054fc1071d7ULL, &ext,
			    "4fc1071d-7e2f-4df0-95c8-925a617e2d62", n1, s1);
		CHECK_MEM(n1, want, 16);
		/* a serial of up to 64 characters is shown whole (LIO's are 36: a UUID) */
		CHECK_STR(s1, "4fc1071d-7e2f-4df0-95c8-925a617e2d62");
	}
}

/* SET TARGET PORT GROUPS is in the write class of the persistent reservation conflict table
 * (as MODE SELECT is): another nexus's Write Exclusive reservation refuses it. */
static void prout(struct aenv *x, struct scsi_nexus *nx, uint8_t sa, uint8_t type, uint64_t key,
		  uint64_t sakey)
{
	uint8_t cdb[16] = {0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0}, p[24] = {0};
	struct tcmd t;

	put_be64(p, key);
	put_be64(p + 8, sakey);
	t_run(&x->e, nx, 0, cdb, 0, p, 24, &t);
	CHECK_EQ(t.c.status, 0);
}

static void test_stpg_reservation(struct aenv *x)
{
	static const uint8_t stpg[16] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0};
	struct tcmd t;

	printf("# SET TARGET PORT GROUPS under a persistent reservation\n");
	prout(x, x->a, 0x00, 0, 0, 0x1234); /* REGISTER */
	prout(x, x->a, 0x01, 1, 0x1234, 0); /* RESERVE, Write Exclusive */
	t_run(&x->e, x->b, 0, stpg, 0, B(0, 0, 0, 0, 0x02, 0, 0, 20), 8, &t);
	CHECK_EQ(t.c.status, 0x18); /* RESERVATION CONFLICT */
	t_run(&x->e, x->a, 0, stpg, 0, B(0, 0, 0, 0, 0x02, 0, 0, 20), 8, &t);
	CHECK_EQ(t.c.status, 0);	    /* the holder may (group 20 was standby: no change) */
	prout(x, x->a, 0x02, 1, 0x1234, 0); /* RELEASE */
	prout(x, x->a, 0x00, 0, 0x1234, 0); /* unregister */
}

/* The states the RBD locks of a target's LUs give its groups (alua_own.c): local group 1
 * (port 1), other gateways' groups 2 (port 2) and 3 (ports 3 and 5). */
static struct ha_owner lk(int own, bool free, bool known, uint16_t group, uint16_t port)
{
	struct ha_owner o = {.own = own, .free = free, .known = known};

	if (group)
		o.groups[o.ngroups++] = group;
	if (port)
		o.ports[o.nports++] = port;
	return o;
}

static int own_states(const struct scsi_alua *a, const struct ha_owner *o, unsigned n, uint8_t *st)
{
	struct ha_alua_view v[4];

	for (unsigned i = 0; i < n; i++)
		ha_alua_view(a, &o[i], &v[i]);
	return ha_alua_states(a, v, n, st);
}

#define ST3(x, y, z) CHECK(st[0] == (x) && st[1] == (y) && st[2] == (z))

static void test_own_states(void)
{
	enum {
		AO = SCSI_ALUA_ACTIVE_OPTIMIZED,
		SB = SCSI_ALUA_STANDBY,
		UN = SCSI_ALUA_UNAVAILABLE,
		TR = SCSI_ALUA_TRANSITIONING,
		KEEP = 0xff
	};
	struct scsi_alua_cfg c = {.ngroups = 3, .explicit_ok = true};
	struct scsi_lun_map *map = scsi_lun_map_new(), *one = scsi_lun_map_new();
	const struct scsi_alua *a, *a1;
	struct ha_owner o[2];
	uint8_t st[SCSI_ALUA_MAX_GROUPS];

	c.groups[0] =
	    (struct scsi_alua_group_cfg){.id = 1, .local = true, .nports = 1, .ports = {1}};
	c.groups[1] = (struct scsi_alua_group_cfg){.id = 2, .nports = 1, .ports = {2}};
	c.groups[2] = (struct scsi_alua_group_cfg){.id = 3, .nports = 2, .ports = {3, 5}};
	CHECK_EQ(scsi_alua_configure(map, &c), 0);
	c.ngroups = 2;
	CHECK_EQ(scsi_alua_configure(one, &c), 0);
	a = scsi_alua_of(map);
	a1 = scsi_alua_of(one);
	CHECK_EQ(own_states(a, o, 0, st), ALUA_TOWN_NONE); /* no lock: the configured states */
	ST3(KEEP, KEEP, KEEP);
	o[0] = lk(HA_OWN_OWNER, false, true, 1, 1);
	CHECK_EQ(own_states(a, o, 1, st), ALUA_TOWN_OWNER);
	ST3(AO, SB, SB);
	o[0] = lk(HA_OWN_STANDBY, false, true, 3, 0); /* the record names group 3 */
	CHECK_EQ(own_states(a, o, 1, st), ALUA_TOWN_STANDBY);
	ST3(SB, SB, AO);
	o[0] = lk(HA_OWN_STANDBY, false, true, 9, 5); /* ... or one of its ports */
	own_states(a, o, 1, st);
	ST3(SB, SB, AO);
	o[0] = lk(HA_OWN_STANDBY, true, false, 0, 0); /* nobody holds it */
	own_states(a, o, 1, st);
	ST3(SB, SB, SB);
	o[0] = lk(HA_OWN_STANDBY, false, false, 0, 0); /* holder unknown: leave the others */
	own_states(a, o, 1, st);
	ST3(SB, KEEP, KEEP);
	CHECK_EQ(own_states(a1, o, 1, st), ALUA_TOWN_STANDBY); /* ... but one other: it */
	CHECK(st[0] == SB && st[1] == AO);
	o[0] = lk(HA_OWN_FENCED, false, true, 1, 1); /* fenced: its stale record is its own */
	CHECK_EQ(own_states(a, o, 1, st), ALUA_TOWN_FENCED);
	ST3(UN, KEEP, KEEP);
	o[0] = lk(HA_OWN_ACQUIRING, false, false, 0, 0);
	CHECK_EQ(own_states(a, o, 1, st), ALUA_TOWN_MOVING);
	ST3(TR, KEEP, KEEP);
	/* two LUs: on one owner, or not */
	o[0] = lk(HA_OWN_OWNER, false, true, 1, 1);
	o[1] = lk(HA_OWN_OWNER, false, true, 1, 1);
	CHECK_EQ(own_states(a, o, 2, st), ALUA_TOWN_OWNER);
	ST3(AO, SB, SB);
	o[1] = lk(HA_OWN_STANDBY, false, true, 2, 2);
	CHECK_EQ(own_states(a, o, 2, st), ALUA_TOWN_SPLIT);
	ST3(TR, TR, TR);
	o[0] = lk(HA_OWN_STANDBY, false, true, 3, 3);
	CHECK_EQ(own_states(a, o, 2, st), ALUA_TOWN_STANDBY);
	ST3(SB, TR, TR);
	o[0] = lk(HA_OWN_STANDBY, false, true, 2, 0);
	own_states(a, o, 2, st);
	ST3(SB, AO, SB);
	o[0] = lk(HA_OWN_STANDBY, true, false, 0, 0); /* one free, one held */
	own_states(a, o, 2, st);
	ST3(SB, TR, TR);
	o[1] = lk(HA_OWN_ACQUIRING, false, false, 0, 0);
	CHECK_EQ(own_states(a, o, 2, st), ALUA_TOWN_MOVING);
	ST3(TR, KEEP, KEEP);
	scsi_lun_map_free(map);
	scsi_lun_map_free(one);
}

int main(void)
{
	struct aenv x;
	struct scsi_alua_cfg c = two_groups(SCSI_ALUA_ACTIVE_OPTIMIZED, SCSI_ALUA_STANDBY);

	test_table();
	test_names();
	test_cfg_errors();
	test_lu_identity();
	test_own_states();
	setup(&x);
	test_off(&x);
	CHECK_EQ(scsi_alua_configure(x.e.map, &c), 0);
	{
		static const uint8_t tur[16] = {0};
		struct tcmd t;
		t_run(&x.e, x.a, 0, tur, 0, NULL, 0, &t); /* 2A/06: ALUA turned on */
		t_check_sense(&t, 0x6, 0x2a, 0x06);
		t_run(&x.e, x.b, 0, tur, 0, NULL, 0, &t);
		t_check_sense(&t, 0x6, 0x2a, 0x06);
	}
	test_inquiry(&x);
	test_rtpg(&x);
	test_rsoc(&x);
	test_stpg_params(&x);
	test_stpg_reservation(&x);
	test_states(&x);
	test_implicit_only(&x);
	test_implicit_io_class();
	test_reload(&x);
	teardown(&x);
	return tap_done();
}
