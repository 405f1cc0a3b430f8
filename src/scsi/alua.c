/* Asymmetric logical unit access (SPC-4 5.15): the target port groups of a LUN map, the states
 * commands are checked against, REPORT TARGET PORT GROUPS and SET TARGET PORT GROUPS.
 *
 * A layout (struct scsi_alua) is built whole and published with one atomic store; after that
 * only its states and status codes change (atomics). A replaced layout stays allocated until the
 * map is freed, so a command that loaded the old pointer can go on reading it. Writers (a SET
 * TARGET PORT GROUPS on any worker, a reload or the management API on the main thread) take
 * map->alua_lock; readers take nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "scsi/alua_int.h"
#include "util/log.h"

static const struct {
	uint8_t state;
	const char *name;
} state_names[] = {
    {SCSI_ALUA_ACTIVE_OPTIMIZED, "active/optimized"},
    {SCSI_ALUA_ACTIVE_NON_OPTIMIZED, "active/non-optimized"},
    {SCSI_ALUA_STANDBY, "standby"},
    {SCSI_ALUA_UNAVAILABLE, "unavailable"},
    {SCSI_ALUA_OFFLINE, "offline"},
    {SCSI_ALUA_TRANSITIONING, "transitioning"},
};

const char *scsi_alua_state_name(uint8_t state)
{
	for (size_t i = 0; i < sizeof(state_names) / sizeof(state_names[0]); i++)
		if (state_names[i].state == state)
			return state_names[i].name;
	return NULL;
}

int scsi_alua_state_parse(const char *name, uint8_t *state)
{
	for (size_t i = 0; name && i < sizeof(state_names) / sizeof(state_names[0]); i++)
		if (strcasecmp(state_names[i].name, name) == 0) {
			*state = state_names[i].state;
			return 0;
		}
	return -EINVAL;
}

/* ---- the state table (SPC-4 5.15.2.4.x) ---- */

bool scsi_alua_allows(uint8_t state, uint16_t op_flags, uint8_t *ascq)
{
	switch (state) {
	case SCSI_ALUA_ACTIVE_OPTIMIZED:
	case SCSI_ALUA_ACTIVE_NON_OPTIMIZED:
		return true;
	case SCSI_ALUA_STANDBY:
		*ascq = 0x0b; /* LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE */
		return op_flags & (SCSI_F_ALUA_ANY | SCSI_F_ALUA_UNAV | SCSI_F_ALUA_STBY);
	case SCSI_ALUA_UNAVAILABLE:
		*ascq = 0x0c; /* ... TARGET PORT IN UNAVAILABLE STATE */
		return op_flags & (SCSI_F_ALUA_ANY | SCSI_F_ALUA_UNAV);
	case SCSI_ALUA_OFFLINE:
		*ascq = 0x12; /* LOGICAL UNIT NOT READY, OFFLINE */
		return op_flags & SCSI_F_ALUA_ANY;
	default:	      /* transitioning */
		*ascq = 0x0a; /* ... ASYMMETRIC ACCESS STATE TRANSITION */
		return op_flags & SCSI_F_ALUA_ANY;
	}
}

static const struct alua_group *port_group(const struct scsi_alua *a, uint16_t rtpi)
{
	for (unsigned i = 0; i < a->ngroups; i++)
		for (unsigned j = 0; j < a->g[i].nports; j++)
			if (a->g[i].ports[j] == rtpi)
				return &a->g[i];
	return NULL;
}

struct scsi_alua *scsi_alua_of(const struct scsi_lun_map *map)
{
	return map ? atomic_load_explicit(&((struct scsi_lun_map *)map)->alua, memory_order_acquire)
		   : NULL;
}

/* States that follow the owner of the LUs' backend (src/ha/): in line with it if it changed. */
static void ha_follow(const struct scsi_lun_map *map)
{
	if (map->ha && map->ha->ops->alua_follow)
		map->ha->ops->alua_follow((struct scsi_lun_map *)map);
}

bool scsi_alua_check(struct scsi_cmd *cmd, struct scsi_lu *lu, uint16_t op_flags)
{
	struct scsi_alua *a = scsi_alua_of(cmd->map);
	const struct alua_group *g;
	uint8_t state, ascq = 0;

	if (!a || !cmd->nexus)
		return true;
	ha_follow(cmd->map);
	g = port_group(a, cmd->nexus->rtpi);
	/* a port in no group (its portal left the groups in a reload) serves nothing */
	state = g ? atomic_load_explicit(&g->state, memory_order_relaxed) : SCSI_ALUA_UNAVAILABLE;
	if (scsi_alua_allows(state, op_flags, &ascq))
		return true;
	if (state == SCSI_ALUA_STANDBY && g && g->local && scsi_alua_medium_io(op_flags) &&
	    cmd->map->ha && cmd->map->ha->ops->alua_implicit &&
	    cmd->map->ha->ops->alua_implicit((struct scsi_lun_map *)cmd->map, a))
		ascq = 0x0a; /* ASYMMETRIC ACCESS STATE TRANSITION: retry, it is coming */
	scsi_fail(cmd, SCSI_SENSE_NOT_READY, 0x04, ascq);
	return false;
}

uint8_t scsi_alua_tpgs(const struct scsi_lun_map *map)
{
	const struct scsi_alua *a = scsi_alua_of(map);

	if (!a)
		return 0;
	return a->explicit_ok ? 0x3 : 0x1;
}

bool scsi_alua_port_group(const struct scsi_lun_map *map, uint16_t rtpi, uint16_t *group)
{
	const struct scsi_alua *a = scsi_alua_of(map);
	const struct alua_group *g = a ? port_group(a, rtpi) : NULL;

	if (g)
		*group = g->id;
	return g != NULL;
}

/* ---- REPORT TARGET PORT GROUPS (SPC-4 6.36) ---- */

static uint32_t rtpg_encode(const struct scsi_alua *a, bool ext, uint8_t *d)
{
	uint32_t n = ext ? 8 : 4;

	for (unsigned i = 0; i < a->ngroups; i++) {
		const struct alua_group *g = &a->g[i];

		d[n] = (uint8_t)((g->pref ? 0x80 : 0) |
				 atomic_load_explicit(&g->state, memory_order_relaxed));
		d[n + 1] = ALUA_SUPPORTED;
		put_be16(d + n + 2, g->id);
		d[n + 5] = atomic_load_explicit(&g->status, memory_order_relaxed);
		d[n + 7] = g->nports;
		n += 8;
		for (unsigned j = 0; j < g->nports; j++, n += 4)
			put_be16(d + n + 2, g->ports[j]);
	}
	/* RETURN DATA LENGTH: what follows it, the extended header included (as the Linux
	 * ALUA device handler and sg_rtpg read it) */
	put_be32(d, n - 4);
	if (ext) {
		d[4] = 0x10; /* FORMAT TYPE 001b */
		d[5] = a->transition_s;
	}
	return n;
}

#define RTPG_MAX (8 + SCSI_ALUA_MAX_GROUPS * (8 + 4 * SCSI_ALUA_MAX_PORTS))

int scsi_spc_report_tpgs(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	const struct scsi_alua *a;
	uint8_t d[RTPG_MAX];
	uint8_t fmt = cmd->cdb[1] >> 5;

	(void)lu;
	ha_follow(cmd->map);
	a = scsi_alua_of(cmd->map);
	if (!a) { /* ALUA turned off by a reload after the lookup */
		scsi_fail_cdb(cmd, 1, 4);
		return SCSI_DONE;
	}
	if (fmt > 1) {
		scsi_fail_cdb(cmd, 1, 7);
		return SCSI_DONE;
	}
	memset(d, 0, sizeof(d));
	scsi_put_data(cmd, d, rtpg_encode(a, fmt == 1, d), get_be32(cmd->cdb + 6));
	return SCSI_DONE;
}

/* ---- state changes ---- */

/* ASYMMETRIC ACCESS STATE CHANGED to every nexus of the map but except; with told, not to
 * the nexuses of an LU whose lock's thread told them of the very changes (told) already. */
void scsi_alua_post_changed(const struct scsi_lun_map *map, const struct scsi_nexus *except,
			    const unsigned *told)
{
	for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
		struct scsi_lu *lu = scsi_lun_map_get(map, i);

		if (lu && !(told && atomic_load(&lu->own_told) == *told))
			scsi_ua_post_others(lu, except, 0x2a, 0x06);
	}
}

struct alua_group *scsi_alua_group(struct scsi_alua *a, uint16_t id)
{
	for (unsigned i = 0; a && i < a->ngroups; i++)
		if (a->g[i].id == id)
			return &a->g[i];
	return NULL;
}

/* One SET TARGET PORT GROUPS descriptor: a primary state an initiator may ask for. */
static bool stpg_state_ok(uint8_t s)
{
	return s == SCSI_ALUA_ACTIVE_OPTIMIZED || s == SCSI_ALUA_ACTIVE_NON_OPTIMIZED ||
	       s == SCSI_ALUA_STANDBY || s == SCSI_ALUA_UNAVAILABLE;
}

/* Check the descriptors against the layout; -EINVAL with *bad the parameter byte at fault. */
static int stpg_check(struct scsi_alua *a, const uint8_t *p, uint32_t len, uint32_t *bad)
{
	for (uint32_t off = 4; off < len; off += 4) {
		uint16_t id = get_be16(p + off + 2);

		if ((p[off] & 0xf0) || !stpg_state_ok(p[off] & 0x0f)) {
			*bad = off;
			return -EINVAL;
		}
		if (!scsi_alua_group(a, id)) {
			*bad = off + 2;
			return -EINVAL;
		}
		for (uint32_t o = 4; o < off; o += 4)
			if (get_be16(p + o + 2) == id) { /* the same group twice */
				*bad = off + 2;
				return -EINVAL;
			}
	}
	return 0;
}

int scsi_spc_set_tpgs(struct scsi_cmd *cmd, struct scsi_lu *lu)
{
	struct scsi_lun_map *map = (struct scsi_lun_map *)cmd->map;
	uint32_t len = get_be32(cmd->cdb + 6), bad = 0;
	struct scsi_alua *a;
	bool changed = false;
	int rc;

	(void)lu;
	if (len == 0)
		return SCSI_DONE;
	if (len < 4 || len % 4) {
		scsi_fail(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00); /* PARAMETER LIST LENGTH */
		return SCSI_DONE;
	}
	if (cmd->data_out_len < len || cmd->buf_len < len) {
		scsi_fail_cdb(cmd, 6, -1);
		return SCSI_DONE;
	}
	ha_follow(map);
	pthread_mutex_lock(&map->alua_lock);
	a = scsi_alua_of(map);
	if (!a || !a->explicit_ok) {
		pthread_mutex_unlock(&map->alua_lock);
		scsi_fail_cdb(cmd, 1, 4);
		return SCSI_DONE;
	}
	if (stpg_check(a, cmd->buf, len, &bad) < 0) {
		pthread_mutex_unlock(&map->alua_lock);
		scsi_fail_param(cmd, bad, -1);
		return SCSI_DONE;
	}
	if (atomic_load(&a->town) != ALUA_TOWN_NONE && map->ha && map->ha->ops->alua_stpg) {
		/* the states follow the owner (src/ha/ha_alua.c) */
		pthread_mutex_unlock(&map->alua_lock);
		rc = map->ha->ops->alua_stpg(cmd, a, len);
		if (rc != -ENOENT)
			return rc;
		pthread_mutex_lock(&map->alua_lock); /* no lock open after all */
		if (scsi_alua_of(map) != a) {
			pthread_mutex_unlock(&map->alua_lock);
			scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x67, 0x0a);
			return SCSI_DONE;
		}
	}
	for (uint32_t off = 4; off < len; off += 4) {
		struct alua_group *g = scsi_alua_group(a, get_be16(cmd->buf + off + 2));
		uint8_t to = cmd->buf[off] & 0x0f;

		changed |= atomic_exchange(&g->state, to) != to;
		atomic_store(&g->status, ALUA_STATUS_EXPLICIT);
	}
	pthread_mutex_unlock(&map->alua_lock);
	if (changed)
		scsi_alua_post_changed(map, cmd->nexus, NULL);
	return SCSI_DONE;
}

int scsi_alua_set_state(struct scsi_lun_map *map, uint16_t group, uint8_t state)
{
	struct alua_group *g;
	bool changed;

	if (!scsi_alua_state_name(state))
		return -EINVAL;
	pthread_mutex_lock(&map->alua_lock);
	g = scsi_alua_group(scsi_alua_of(map), group);
	if (!g) {
		pthread_mutex_unlock(&map->alua_lock);
		return -ENOENT;
	}
	changed = atomic_exchange(&g->state, state) != state;
	if (changed)
		atomic_store(&g->status, ALUA_STATUS_IMPLICIT);
	pthread_mutex_unlock(&map->alua_lock);
	if (changed)
		scsi_alua_post_changed(map, NULL, NULL);
	return 0;
}

/* ---- configuration ---- */

const char *scsi_alua_cfg_error(const struct scsi_alua_cfg *cfg)
{
	if (cfg->ngroups > SCSI_ALUA_MAX_GROUPS)
		return "too many target port groups";
	for (unsigned i = 0; i < cfg->ngroups; i++) {
		const struct scsi_alua_group_cfg *g = &cfg->groups[i];

		if (g->id == 0)
			return "target port group 0 is reserved";
		if (!scsi_alua_state_name(g->state))
			return "unknown asymmetric access state";
		if (g->nports > SCSI_ALUA_MAX_PORTS)
			return "too many target ports in a group";
		for (unsigned k = 0; k < i; k++)
			if (cfg->groups[k].id == g->id)
				return "two target port groups with the same id";
		for (unsigned j = 0; j < g->nports; j++) {
			if (g->ports[j] == 0)
				return "relative target port 0 is reserved";
			for (unsigned k = 0; k <= i; k++)
				for (unsigned m = 0; m < (k == i ? j : cfg->groups[k].nports); m++)
					if (cfg->groups[k].ports[m] == g->ports[j])
						return "a relative target port in two places";
		}
	}
	return NULL;
}

static void build(struct scsi_alua *a, const struct scsi_alua_cfg *cfg, const struct scsi_alua *old)
{
	a->ngroups = cfg->ngroups;
	a->explicit_ok = cfg->explicit_ok;
	a->transition_s = cfg->transition_s;
	a->implicit_ms = cfg->implicit_failover_ms;
	atomic_init(&a->changes_seen, 0);
	atomic_init(&a->town, ALUA_TOWN_NONE);
	for (unsigned i = 0; i < cfg->ngroups; i++) {
		const struct scsi_alua_group_cfg *c = &cfg->groups[i];
		struct alua_group *g = &a->g[i];
		const struct alua_group *o = scsi_alua_group((struct scsi_alua *)old, c->id);
		bool keep = o && o->cfg_state == c->state;

		g->id = c->id;
		g->cfg_state = c->state;
		g->pref = c->preferred;
		g->local = c->local;
		atomic_init(&g->state, keep ? atomic_load(&o->state) : c->state);
		atomic_init(&g->status, keep ? atomic_load(&o->status) : ALUA_STATUS_NONE);
		g->nports = c->nports;
		memcpy(g->ports, c->ports, c->nports * sizeof(c->ports[0]));
	}
}

/* What an initiator can see of a layout: its REPORT TARGET PORT GROUPS data and TPGS. */
static bool visible_same(const struct scsi_alua *x, const struct scsi_alua *y)
{
	uint8_t dx[RTPG_MAX], dy[RTPG_MAX];
	uint32_t nx, ny;

	if (!x || !y)
		return x == y;
	memset(dx, 0, sizeof(dx));
	memset(dy, 0, sizeof(dy));
	nx = rtpg_encode(x, true, dx);
	ny = rtpg_encode(y, true, dy);
	return nx == ny && memcmp(dx, dy, nx) == 0 && x->explicit_ok == y->explicit_ok;
}

int scsi_alua_configure(struct scsi_lun_map *map, const struct scsi_alua_cfg *cfg)
{
	struct scsi_alua *a = NULL, *old;
	bool same;

	if (cfg && cfg->ngroups) {
		if (scsi_alua_cfg_error(cfg))
			return -EINVAL;
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
	}
	pthread_mutex_lock(&map->alua_lock);
	old = scsi_alua_of(map);
	if (a)
		build(a, cfg, old);
	same = visible_same(old, a);
	atomic_store_explicit(&map->alua, a, memory_order_release);
	if (old) {
		old->retired_next = map->alua_retired;
		map->alua_retired = old;
	}
	pthread_mutex_unlock(&map->alua_lock);
	if (!same)
		scsi_alua_post_changed(map, NULL, NULL);
	if (map->ha && map->ha->ops->alua_configured)
		map->ha->ops->alua_configured(map);
	return 0;
}

int scsi_alua_get(const struct scsi_lun_map *map, struct scsi_alua_cfg *out)
{
	const struct scsi_alua *a;

	ha_follow(map);
	a = scsi_alua_of(map);

	memset(out, 0, sizeof(*out));
	if (!a)
		return -ENOENT;
	out->ngroups = a->ngroups;
	out->explicit_ok = a->explicit_ok;
	out->transition_s = a->transition_s;
	out->implicit_failover_ms = a->implicit_ms;
	for (unsigned i = 0; i < a->ngroups; i++) {
		struct scsi_alua_group_cfg *o = &out->groups[i];

		o->id = a->g[i].id;
		o->state = atomic_load(&a->g[i].state);
		o->status = atomic_load(&a->g[i].status);
		o->preferred = a->g[i].pref;
		o->local = a->g[i].local;
		o->nports = a->g[i].nports;
		memcpy(o->ports, a->g[i].ports, o->nports * sizeof(o->ports[0]));
	}
	return 0;
}

void scsi_alua_map_free(struct scsi_lun_map *map)
{
	struct scsi_alua *a = scsi_alua_of(map), *next;

	free(a);
	for (a = map->alua_retired; a; a = next) {
		next = a->retired_next;
		free(a);
	}
}
