/* ALUA states that follow the RBD locks of a target's LUs (docs/ha.md, "Ownership and
 * failover").
 *
 * The target is the unit of ownership: its groups belong to the target, so its states say
 * where the locks of all its LUs with rbd.exclusive_lock are. This gateway holds them all:
 * its (local) groups active/optimized, the others standby. Another gateway holds them all:
 * the local groups standby (unavailable when fenced), the holder's groups (named by its owner
 * record, ha_own_owner) active/optimized, the rest standby. A lock being taken or given up
 * here: the local groups transitioning. The locks not all on one owner: every group
 * transitioning. The states are brought in line lazily: each command, REPORT TARGET PORT
 * GROUPS and management read compares a counter of ownership changes (one atomic load) with
 * the one the states were set from; the lock's thread gives the nexuses of the LU whose lock
 * changed 2A/06 at once (lu_own_changed), so an idle initiator's next command learns of it.
 *
 * Moving the locks: SET TARGET PORT GROUPS asking for a local group to be active takes every
 * lock of the target (ha_own_take_over_async on each, the command answered when all have
 * ended); I/O on a standby local group for alua.implicit_failover_ms does the same without a
 * command to answer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ha/ha_alua.h"
#include "ha/ha_int.h"
#include "ha/ha_policy.h"
#include "util/log.h"

#ifdef IX_HAVE_RBD
static int lu_owner(const struct scsi_lu *lu, struct ha_owner *o)
{
	int rc = lu && lu->dev ? ha_own_owner(lu->dev, o) : -EINVAL;

	return rc == 0 && o->own != HA_OWN_NONE ? 0 : -EINVAL;
}

#else
static int lu_owner(const struct scsi_lu *lu, struct ha_owner *o)
{
	(void)lu;
	(void)o;
	return -EINVAL;
}

#endif

/* The ownership changes of the context the map's or LU's hooks come from. */
static unsigned own_changes(const struct scsi_ha *ha)
{
	return ha_ctx_changes(ha_ctx_of_scsi(ha));
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1;
}

/* ---- the states, from the locks (pure) ---- */

static bool group_is(const struct alua_group *g, const struct ha_owner *o)
{
	for (unsigned i = 0; i < o->ngroups && i < 16; i++)
		if (o->groups[i] == g->id)
			return true;
	for (unsigned i = 0; i < o->nports && i < 16; i++)
		for (unsigned j = 0; j < g->nports; j++)
			if (o->ports[i] == g->ports[j])
				return true;
	return false;
}

void ha_alua_view(const struct scsi_alua *a, const struct ha_owner *o, struct ha_alua_view *v)
{
	memset(v, 0, sizeof(*v));
	v->own = (int8_t)o->own;
	v->free = o->free;
	v->known = o->known && !o->free;
	v->refused = o->refused;
	for (unsigned i = 0; v->known && i < a->ngroups; i++)
		if (!a->g[i].local && group_is(&a->g[i], o))
			v->match |= (uint16_t)(1u << i);
}

/* Standby or fenced everywhere here: which remote groups are the holder's? */
static void remote_states(const struct scsi_alua *a, const struct ha_alua_view *v, unsigned n,
			  uint8_t *st)
{
	unsigned nfree = 0, unknown = 0, remote = 0;
	uint16_t match = 0;
	bool same = true;

	for (unsigned k = 0; k < n; k++) {
		if (v[k].free)
			nfree++;
		else if (!v[k].known || !v[k].match)
			unknown++;
		else if (match && v[k].match != match)
			same = false;
		else
			match = v[k].match;
	}
	for (unsigned i = 0; i < a->ngroups; i++)
		remote += !a->g[i].local;
	for (unsigned i = 0; i < a->ngroups; i++) {
		if (a->g[i].local)
			continue;
		if (nfree == n) /* nobody holds them: nobody is active */
			st[i] = SCSI_ALUA_STANDBY;
		else if ((nfree && nfree < n) || !same) /* split between owners */
			st[i] = SCSI_ALUA_TRANSITIONING;
		else if (!unknown)
			st[i] = match & (1u << i) ? SCSI_ALUA_ACTIVE_OPTIMIZED : SCSI_ALUA_STANDBY;
		else if (remote == 1 && !match) /* unknown holder, one other gateway: it */
			st[i] = SCSI_ALUA_ACTIVE_OPTIMIZED;
		else
			st[i] = 0xff; /* unknown: leave them */
	}
}

int ha_alua_states(const struct scsi_alua *a, const struct ha_alua_view *v, unsigned n, uint8_t *st)
{
	unsigned owner = 0, fenced = 0, moving = 0;
	uint8_t mine, others = 0xff;
	int town;

	memset(st, 0xff, a->ngroups);
	if (n == 0)
		return ALUA_TOWN_NONE;
	for (unsigned k = 0; k < n; k++) {
		owner += v[k].own == HA_OWN_OWNER;
		fenced += v[k].own == HA_OWN_FENCED;
		moving += v[k].own == HA_OWN_ACQUIRING || v[k].own == HA_OWN_RELEASING;
	}
	if (moving) {
		mine = SCSI_ALUA_TRANSITIONING;
		town = ALUA_TOWN_MOVING;
	} else if (owner == n) {
		mine = SCSI_ALUA_ACTIVE_OPTIMIZED;
		others = SCSI_ALUA_STANDBY;
		town = ALUA_TOWN_OWNER;
	} else if (owner) {
		mine = others = SCSI_ALUA_TRANSITIONING;
		town = ALUA_TOWN_SPLIT;
	} else {
		mine = fenced ? SCSI_ALUA_UNAVAILABLE : SCSI_ALUA_STANDBY;
		town = fenced ? ALUA_TOWN_FENCED : ALUA_TOWN_STANDBY;
		remote_states(a, v, n, st);
	}
	for (unsigned i = 0; i < a->ngroups; i++)
		if (a->g[i].local)
			st[i] = mine;
		else if (others != 0xff)
			st[i] = others;
	return town;
}

/* ---- following the locks ---- */

static bool group_set(struct alua_group *g, uint8_t state, uint8_t status)
{
	if (state == 0xff || atomic_exchange(&g->state, state) == state)
		return false;
	atomic_store(&g->status, status);
	return true;
}

/* The views of the map's LUs with an open managed lock; a thread that may look LUs up in the
 * map (a worker, or the main thread). */
static unsigned gather(const struct scsi_lun_map *map, const struct scsi_alua *a,
		       struct ha_alua_view *v, bool *all_free, bool *refused)
{
	struct ha_owner o;
	unsigned n = 0;

	*all_free = true;
	*refused = false;
	for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
		struct scsi_lu *lu = scsi_lun_map_get(map, i);

		if (lu && lu_owner(lu, &o) == 0) {
			ha_alua_view(a, &o, &v[n++]);
			*all_free &= o.free;
			*refused |= o.refused;
		}
	}
	return n;
}

/* Set the states from the locks; 2A/06 to every nexus but except (and those the lock's
 * thread told already). Under alua_lock, so two threads that saw different states end with
 * the latest. */
static void own_sync(struct scsi_lun_map *map, uint8_t status, const struct scsi_nexus *except)
{
	struct ha_alua_view v[SCSI_MAX_LUNS];
	uint8_t st[SCSI_ALUA_MAX_GROUPS];
	unsigned seen = own_changes(map->ha), n;
	struct scsi_alua *a;
	bool changed = false, all_free, refused;
	int town;

	pthread_mutex_lock(&map->alua_lock);
	a = scsi_alua_of(map);
	if (!a) {
		pthread_mutex_unlock(&map->alua_lock);
		return;
	}
	atomic_store(&a->changes_seen, seen);
	n = gather(map, a, v, &all_free, &refused);
	town = ha_alua_states(a, v, n, st);
	for (unsigned i = 0; i < a->ngroups; i++)
		changed |= group_set(&a->g[i], st[i], status);
	if (town != ALUA_TOWN_STANDBY)
		atomic_store(&a->sb_last, 0);
	if (town != ALUA_TOWN_SPLIT)
		atomic_store(&a->split_since, 0);
	else if (!atomic_load(&a->split_since))
		atomic_store(&a->split_since, now_ms());
	atomic_store(&a->town, town);
	atomic_store(&a->all_free, n && all_free);
	atomic_store(&a->refused, refused);
	pthread_mutex_unlock(&map->alua_lock);
	if (changed)
		scsi_alua_post_changed(map, except, &seen);
}

static void heal(struct scsi_lun_map *map, struct scsi_alua *a);

void ha_alua_follow(struct scsi_lun_map *map)
{
	struct scsi_alua *a = scsi_alua_of(map);

	if (!a)
		return;
	if (own_changes(map->ha) != atomic_load_explicit(&a->changes_seen, memory_order_relaxed))
		own_sync(map, ALUA_STATUS_IMPLICIT, NULL);
	if (atomic_load_explicit(&a->town, memory_order_relaxed) == ALUA_TOWN_SPLIT)
		heal(map, a);
}

/* The lock's thread, after a change of the LU's ownership: 2A/06 to its nexuses at once, so
 * that an idle initiator's next command learns of it (the states themselves are brought in
 * line by that command). */
static void lu_own_changed(void *arg)
{
	struct scsi_lu *lu = arg;
	unsigned seen = own_changes(lu->ha);

	if (!atomic_load(&lu->alua_on))
		return;
	scsi_ua_post_others(lu, NULL, 0x2a, 0x06);
	atomic_store(&lu->own_told, seen);
}

void ha_alua_lu_watch(struct scsi_lu *lu, bool on)
{
#ifdef IX_HAVE_RBD
	if (lu->dev)
		(void)ha_own_watch(lu->dev, on ? lu_own_changed : NULL, lu);
#else
	(void)lu;
	(void)on;
	(void)lu_own_changed;
#endif
}

/* What the LU's lock writes in its owner record: the layout's local groups and their ports. */
static void lu_identity(const struct scsi_alua *a, struct scsi_lu *lu)
{
#ifdef IX_HAVE_RBD
	uint16_t groups[16], ports[16];
	unsigned ng = 0, np = 0;

	for (unsigned i = 0; a && i < a->ngroups; i++) {
		if (!a->g[i].local)
			continue;
		if (ng < 16)
			groups[ng++] = a->g[i].id;
		for (unsigned j = 0; j < a->g[i].nports && np < 16; j++)
			ports[np++] = a->g[i].ports[j];
	}
	if (lu->dev)
		(void)ha_own_set_identity(lu->dev, groups, ng, ports, np);
#else
	(void)a;
	(void)lu;
#endif
}

void ha_alua_lu_mapped(struct scsi_lun_map *map, struct scsi_lu *lu)
{
	const struct scsi_alua *a = scsi_alua_of(map);

	atomic_store(&lu->alua_on, a != NULL);
	lu_identity(a, lu);
}

void ha_alua_configured(struct scsi_lun_map *map)
{
	const struct scsi_alua *a = scsi_alua_of(map);

	for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
		struct scsi_lu *lu = scsi_lun_map_get(map, i);

		if (lu) {
			atomic_store(&lu->alua_on, a != NULL);
			lu_identity(a, lu);
		}
	}
	if (a) /* a new layout follows the locks at once */
		own_sync(map, ALUA_STATUS_IMPLICIT, NULL);
}

/* ---- moving the locks ---- */

/* SET TARGET PORT GROUPS that moves the locks: answered once every LU's move has ended. */
struct own_move {
	struct ev_post post;
	struct scsi_cmd *cmd;
	atomic_uint pending;
	atomic_int rc; /* the first failure */
};

/* The command's worker: the answer. */
static void move_finish(void *arg)
{
	struct own_move *m = arg;
	struct scsi_cmd *cmd = m->cmd;
	int rc = atomic_load(&m->rc);

	if (rc < 0) /* SET TARGET PORT GROUPS COMMAND FAILED */
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x67, 0x0a);
	own_sync((struct scsi_lun_map *)cmd->map, ALUA_STATUS_EXPLICIT, cmd->nexus);
	free(m);
	scsi_cmd_finish(cmd);
}

/* One LU's move ended (any thread; rc -EALREADY: there already). */
static void move_done(void *arg, int rc)
{
	struct own_move *m = arg;
	int none = 0;

	if (rc < 0 && rc != -EALREADY)
		atomic_compare_exchange_strong(&m->rc, &none, rc);
	if (atomic_fetch_sub(&m->pending, 1) == 1)
		ev_loop_post_node(m->cmd->thread->loop, &m->post, move_finish, m);
}

/* Take (or, with release, hand over) every lock of the map: done(arg, rc) per LU, or nothing
 * with done NULL. On the command's worker or another thread that may look LUs up. */
static void move_all(struct scsi_lun_map *map, bool release, int mode, uint32_t arg32,
		     ha_take_cb done, void *arg, const char *why)
{
	struct ha_owner o;

	for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
		struct scsi_lu *lu = scsi_lun_map_get(map, i);
		int rc = -ENOTSUP;

		if (!lu || lu_owner(lu, &o) < 0)
			continue;
		if (done)
			atomic_fetch_add(&((struct own_move *)arg)->pending, 1);
#ifdef IX_HAVE_RBD
		rc = release ? ha_own_release_async(lu->dev, (uint16_t)arg32, done, arg)
			     : ha_own_take_over_async(lu->dev, mode, arg32, done, arg);
#else
		(void)release;
		(void)mode;
		(void)arg32;
#endif
		if (rc < 0 && rc != -EALREADY && rc != -EBUSY)
			log_warn("alua", "LUN %u: %s: cannot %s the lock: %s", lu->lun, why,
				 release ? "release" : "take", strerror(-rc));
		if (rc < 0 && done)
			done(arg, rc);
	}
}

/* What counts as I/O for an implicit failover: commands that read or write the medium (the
 * read and write classes of the dispatch table). TEST UNIT READY, which the SCSI scan and
 * multipathd's tur checker send to every path, SYNCHRONIZE CACHE and START STOP UNIT do not: on a
 * standby port they get 04/0B, which is how an initiator recognises one (multipath's tur checker
 * calls it "ghost", any other NOT READY "down"), and they never move the lock. Linux's scan sends
 * TEST UNIT READY again and again while it gets 04/0A, so counting it took the lock from a
 * healthy owner about 5 s after a login to the standby gateway (tests/rdma/tests/mpath.sh). */
bool scsi_alua_medium_io(uint16_t op_flags)
{
	return (op_flags & SCSI_F_MEDIUM) && (op_flags & (SCSI_F_WRITE | SCSI_F_PR_READ));
}

/* Implicit failover (docs/ha.md): reads and writes refused on a standby local group for
 * implicit_ms, without a gap as long, ask the holder for every lock of the target (it hands
 * them over only if the initiator left it; a free lock is taken). Until a holder refuses,
 * such commands get 04/0A (the initiator retries: the path is coming); after a refusal 04/0B
 * (the path stays standby, the initiator's ALUA logic uses the holder's), and the holder is
 * asked again after each further implicit_ms of I/O here. */
bool ha_alua_implicit(struct scsi_lun_map *map, struct scsi_alua *a)
{
	bool refused = atomic_load(&a->refused);
	bool standby = atomic_load(&a->town) == ALUA_TOWN_STANDBY;
	uint64_t now, last;

	if (ha_policy_implicit(a->implicit_ms, standby, 1, 0, 0) == HA_IMPLICIT_OFF)
		return false; /* off: the run (sb_last) is left alone */
	now = now_ms();
	last = atomic_exchange(&a->sb_last, now);
	switch (ha_policy_implicit(a->implicit_ms, standby, now, last, atomic_load(&a->sb_first))) {
	case HA_IMPLICIT_OFF:
		return false;
	case HA_IMPLICIT_START:
		atomic_store(&a->sb_first, now);
		return !refused;
	case HA_IMPLICIT_WAIT:
		return !refused;
	case HA_IMPLICIT_ASK:
		break;
	}
	log_warn("alua", "I/O on a standby path for %u ms: asking the holder for the locks",
		 a->implicit_ms);
	move_all(map, false, HA_TAKE_IMPLICIT, a->implicit_ms, NULL, NULL, "implicit failover");
	atomic_store(&a->sb_last, 0);
	return !refused;
}

/* What a SET TARGET PORT GROUPS list asks of the locks: take them (a local group active),
 * hand them over (a local group standby or unavailable, or another gateway's group active:
 * *to is the first such group, else 0), or nothing. */
enum stpg_want { STPG_NOTHING, STPG_TAKE, STPG_HAND_OVER };

static enum stpg_want stpg_wants(struct scsi_alua *a, const uint8_t *p, uint32_t len, uint16_t *to)
{
	enum stpg_want w = STPG_NOTHING;

	*to = 0;
	for (uint32_t off = 4; off < len; off += 4) {
		const struct alua_group *g = scsi_alua_group(a, get_be16(p + off + 2));
		uint8_t s = p[off] & 0x0f;
		bool active =
		    s == SCSI_ALUA_ACTIVE_OPTIMIZED || s == SCSI_ALUA_ACTIVE_NON_OPTIMIZED;

		if (!g)
			continue;
		if (g->local && active)
			return STPG_TAKE;
		if (!g->local && active && !*to)
			*to = g->id;
		if (g->local != active)
			w = STPG_HAND_OVER;
	}
	return w;
}

/* The target's locks are split between this gateway and others (or nobody) since HA_HEAL_MS
 * (an initiator's commands meanwhile get 04/0A, transitioning, and retry): the gateway that
 * holds the lowest-numbered LU's lock takes the others (asking, so their live holders hand
 * them over); one that holds only others asks for that lowest lock to heal (only a holder
 * that does not answer gives it up, broken; a free one is taken). Both at most once per
 * HA_HEAL_MS. A start race (two gateways starting at once take one lock each) ends so. */
static void heal(struct scsi_lun_map *map, struct scsi_alua *a)
{
	uint64_t now = now_ms(), since = atomic_load(&a->split_since);
	struct scsi_lu *first = NULL;
	struct ha_owner o;

	if (!ha_policy_heal_due(since, now) ||
	    !atomic_compare_exchange_strong(&a->split_since, &since, now))
		return;
	for (uint32_t i = 0; i < SCSI_MAX_LUNS && !first; i++) {
		struct scsi_lu *lu = scsi_lun_map_get(map, i);

		if (lu && lu_owner(lu, &o) == 0)
			first = lu;
	}
	if (!first)
		return;
	if (ha_policy_heal(o.own) == HA_HEAL_TAKE_OTHERS) {
		log_warn("alua",
			 "the target's locks are split between gateways: taking the others "
			 "(this gateway holds LUN %u's)",
			 first->lun);
		move_all(map, false, HA_TAKE_EXPLICIT, 0, NULL, NULL, "healing a split");
		return;
	}
	log_warn("alua",
		 "the target's locks are split between gateways: asking for LUN %u's "
		 "(taken only if nobody or a silent gateway holds it)",
		 first->lun);
#ifdef IX_HAVE_RBD
	(void)ha_own_take_over_async(first->dev, HA_TAKE_HEAL, 0, NULL, NULL);
#endif
}

int ha_alua_stpg(struct scsi_cmd *cmd, struct scsi_alua *a, uint32_t len)
{
	struct scsi_lun_map *map = (struct scsi_lun_map *)cmd->map;
	struct own_move *m;
	enum stpg_want w;
	uint16_t to;
	int town;

	ha_alua_follow(map);
	town = atomic_load(&a->town);
	if (town == ALUA_TOWN_NONE)
		return -ENOENT;
	w = stpg_wants(a, cmd->buf, len, &to);
	/* the states follow the locks: anything else is accepted, and they keep following */
	if (w == STPG_NOTHING ||
	    (w == STPG_HAND_OVER && town != ALUA_TOWN_OWNER && town != ALUA_TOWN_SPLIT))
		return SCSI_DONE;
	if (!cmd->thread || !(m = calloc(1, sizeof(*m)))) {
		scsi_fail(cmd, SCSI_SENSE_HARDWARE_ERROR, 0x67, 0x0a);
		return SCSI_DONE;
	}
	m->cmd = cmd;
	atomic_init(&m->pending, 1); /* ours, until every LU's move is started */
	atomic_init(&m->rc, 0);
	if (w == STPG_TAKE)
		move_all(map, false, HA_TAKE_EXPLICIT, 0, move_done, m, "SET TARGET PORT GROUPS");
	else
		move_all(map, true, 0, to, move_done, m, "SET TARGET PORT GROUPS (hand-over)");
	move_done(m, 0);
	return SCSI_ASYNC;
}
