/* LU life and references, the LUN map, I_T nexuses, unit attentions, reservation release on
 * nexus loss and LU reset, and the per-thread I/O context. Control state is guarded by
 * lu->lock; the data path only reads atomics (itl->lu, itl->ua_pending, itl->pr,
 * lu->resv_holder, lu->mstate). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi_int.h"

/* ---- identifiers ---- */

static void copy_id(char *dst, size_t cap, const char *src, const char *def)
{
	const char *s = src && *src ? src : def;
	size_t i;

	for (i = 0; i + 1 < cap && s[i]; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '_';
	dst[i] = 0;
}

static void make_ids(struct scsi_lu *lu, const struct scsi_lu_cfg *cfg)
{
	const char *tn = cfg->target_name ? cfg->target_name : "";
	uint64_t h = fnv1a64(FNV1A64_INIT, tn, strlen(tn));
	uint64_t hi, lo;

	h = fnv1a64(h, &cfg->lun, sizeof(cfg->lun));
	/* A configured naa_id alone decides the whole designator (and the default serial), so the
	 * gateways that export one image under any target name or LUN present one LU. */
	if (cfg->has_naa_ext)
		lo = cfg->naa_ext;
	else if (cfg->naa_id)
		lo = fnv1a64(fnv1a64(FNV1A64_INIT, &cfg->naa_id, sizeof(cfg->naa_id)), "ix-naa-ext",
			     10);
	else
		lo = fnv1a64(h, "ix-naa-ext", 10);
	/* NAA 6 (IEEE Registered Extended): 4-bit NAA, then 60 bits (company id + vendor
	 * specific), then a 64-bit extension. */
	hi = cfg->naa_id ? cfg->naa_id : h;
	hi = (6ULL << 60) | (hi & 0x0fffffffffffffffULL);
	put_be64(lu->naa, hi);
	put_be64(lu->naa + 8, lo);
	if (cfg->serial && *cfg->serial)
		copy_id(lu->serial, sizeof(lu->serial), cfg->serial, "");
	else
		snprintf(lu->serial, sizeof(lu->serial), "%016llx%08llx",
			 (unsigned long long)(hi & 0x0fffffffffffffffULL),
			 (unsigned long long)(lo >> 32));
	copy_id(lu->vendor, sizeof(lu->vendor), cfg->vendor, "IX");
	copy_id(lu->product, sizeof(lu->product), cfg->product, "ix-disk");
	copy_id(lu->revision, sizeof(lu->revision), NULL, "0001");
}

/* ---- LU ---- */

/* A backend thread: the backend opened late (a networked one started offline). The capacity first,
 * then the medium serves; every nexus gets NOT READY TO READY CHANGE and CAPACITY DATA HAS CHANGED
 * (the capacity was unknown until now). */
static void lu_backend_ready(struct bs_dev *dev, void *arg)
{
	struct scsi_lu *lu = arg;

	lu->nblocks = dev->size / lu->block_size;
	pthread_mutex_lock(&lu->lock);
	atomic_fetch_and_explicit(&lu->mstate, (uint8_t)~SCSI_MS_NOT_READY, memory_order_acq_rel);
	pthread_mutex_unlock(&lu->lock);
	scsi_ua_post_others(lu, NULL, 0x28, 0x00);
	scsi_ua_post_others(lu, NULL, 0x2a, 0x09);
}

/* A backend thread: the backing store changed size by itself (an RBD image resized by another
 * client or gateway; dev->size is already the new one): the capacity follows, every nexus gets
 * CAPACITY DATA HAS CHANGED, as after scsi_lu_grow. */
static void lu_backend_resized(struct bs_dev *dev, void *arg)
{
	struct scsi_lu *lu = arg;
	uint64_t n = atomic_load_explicit(&dev->size, memory_order_acquire) / lu->block_size;

	if (atomic_exchange(&lu->nblocks, n) != n)
		scsi_ua_post_others(lu, NULL, 0x2a, 0x09);
}

int scsi_lu_new(const struct scsi_lu_cfg *cfg, struct scsi_lu **out, char *err, size_t errlen)
{
	struct scsi_lu *lu;
	uint32_t bs = cfg->block_size ? cfg->block_size : 512;
	int rc;

	if (bs != 512 && bs != 4096) {
		snprintf(err, errlen, "block size %u not supported (512 or 4096)", bs);
		return -EINVAL;
	}
	lu = calloc(1, sizeof(*lu));
	if (!lu) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	atomic_init(&lu->refs, 1);
	lu->block_size = bs;
	lu->lun = cfg->lun;
	atomic_init(&lu->readonly, cfg->readonly);
	lu->ro_open = cfg->readonly;
	lu->no_medium = cfg->no_medium;
	lu->removable = cfg->removable || cfg->no_medium;
	lu->sanitize_rate = cfg->sanitize_rate;
	atomic_init(&lu->thin_thr, cfg->thin_threshold <= 99 ? cfg->thin_threshold : 0);
	atomic_init(&lu->mstate, (cfg->no_medium ? 0 : SCSI_MS_LOADED) |
				     (cfg->offline ? SCSI_MS_OFFLINE : 0));
	atomic_init(&lu->swp, false);
	atomic_init(&lu->wce, cfg->write_cache);
	atomic_init(&lu->wce_default, cfg->write_cache);
	atomic_init(&lu->d_sense, false);
	atomic_init(&lu->resv_holder, NULL);
	list_init(&lu->itls);
	pthread_mutex_init(&lu->lock, NULL);
	pthread_mutex_init(&lu->slow_lock, NULL);
	lu->target_name = strdup(cfg->target_name ? cfg->target_name : "");
	lu->ha = cfg->ha;
	if (lu->ha)
		lu->ha->ops->get(lu->ha);
	lu->guard = scsi_guard_new();
	lu->pblocks = 1;
	list_init(&lu->index_link);
	if (!lu->target_name || !lu->guard ||
	    posix_memalign((void **)&lu->scratch, 4096, SCSI_SCRATCH_BYTES)) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	make_ids(lu, cfg);
	rc = scsi_pr_lu_init(lu, cfg, err, errlen);
	if (rc < 0)
		goto fail;
	if (!cfg->no_medium) {
		struct bs_open_cfg oc = {.path = cfg->path,
					 .backend_cfg = &cfg->bs,
					 .host = cfg->ha ? cfg->ha->host : NULL,
					 .owner_group = cfg->target_name,
					 .size_bytes = cfg->size_bytes,
					 .block_size = bs,
					 .readonly = cfg->readonly,
					 .err_rules = cfg->err_rules,
					 .n_err_rules = cfg->n_err_rules};

		rc = bs_dev_open(bs_ops_by_type(cfg->backend), &oc, &lu->dev, err, errlen);
		if (rc < 0)
			goto fail;
		lu->nblocks = lu->dev->size / bs;
		lu->pblocks = (cfg->phys_block_size ? cfg->phys_block_size
						     : lu->dev->phys_block_size) / bs;
		if (lu->pblocks == 0 || (lu->pblocks & (lu->pblocks - 1)))
			lu->pblocks = 1;
		/* what a deallocation frees whole: the backend's unit (a network object) when it
		 * is a multiple of the physical block, else the physical block */
		lu->ugran = lu->dev->unmap_granularity / bs;
		if (lu->ugran < lu->pblocks || lu->ugran % lu->pblocks)
			lu->ugran = lu->pblocks;
		lu->lbpme = cfg->thin && (lu->dev->caps & BS_CAP_DISCARD);
		lu->lbprz = lu->lbpme && (lu->dev->caps & BS_CAP_DISCARD_ZEROES);
		/* not ready until the backend says so (set first: its callback clears it) */
		atomic_fetch_or(&lu->mstate, SCSI_MS_NOT_READY);
		if (bs_dev_on_ready(lu->dev, lu_backend_ready, lu) == 0)
			atomic_fetch_and(&lu->mstate, (uint8_t)~SCSI_MS_NOT_READY);
		bs_dev_on_resize(lu->dev, lu_backend_resized, lu);
		lu_backend_resized(lu->dev, lu); /* a resize before the line above */
		if (lu->ha && lu->ha->ops->lu_watch)
			lu->ha->ops->lu_watch(lu, true);
		(void)scsi_lu_space_poll(lu); /* the first sample, before the first command */
	}
	rc = scsi_pr_lu_attach(lu, cfg, err, errlen);
	if (rc < 0) {
		scsi_pr_lu_free(lu);
		if (lu->ha && lu->ha->ops->lu_watch && lu->dev)
			lu->ha->ops->lu_watch(lu, false);
		bs_dev_close(lu->dev);
		goto fail;
	}
	if (cfg->index) {
		lu->index = cfg->index;
		scsi_lu_index_add(lu->index, lu);
	}
	*out = lu;
	return 0;
fail:
	scsi_pr_lu_free(lu);
	scsi_guard_free(lu->guard);
	free(lu->scratch);
	free(lu->target_name);
	pthread_mutex_destroy(&lu->lock);
	pthread_mutex_destroy(&lu->slow_lock);
	if (lu->ha)
		lu->ha->ops->put(lu->ha);
	free(lu);
	return rc;
}

void scsi_lu_get(struct scsi_lu *lu)
{
	atomic_fetch_add_explicit(&lu->refs, 1, memory_order_relaxed);
}

void scsi_lu_put(struct scsi_lu *lu)
{
	if (!lu || atomic_fetch_sub_explicit(&lu->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (lu->index)
		scsi_lu_index_del(lu->index, lu);
	scsi_guard_free(lu->guard);
	scsi_pr_lu_free(lu); /* first: a shared store uses the device's cluster connection */
	if (lu->ha && lu->ha->ops->lu_watch && lu->dev)
		lu->ha->ops->lu_watch(lu, false);
	bs_dev_close(lu->dev);
	if (lu->ha)
		lu->ha->ops->put(lu->ha);
	scsi_lu_index_put(lu->index); /* last: an abort started meanwhile reads lu->index */
	pthread_mutex_destroy(&lu->lock);
	pthread_mutex_destroy(&lu->slow_lock);
	scsi_rod_lu_free(lu);
	free(lu->scratch);
	free(lu->target_name);
	free(lu);
}

uint64_t scsi_lu_num_blocks(const struct scsi_lu *lu)
{
	return lu->nblocks;
}

void scsi_lu_set_offline(struct scsi_lu *lu, bool offline)
{
	uint8_t was;

	pthread_mutex_lock(&lu->lock);
	if (offline)
		was = atomic_fetch_or_explicit(&lu->mstate, SCSI_MS_OFFLINE, memory_order_acq_rel);
	else
		was = atomic_fetch_and_explicit(&lu->mstate, (uint8_t)~SCSI_MS_OFFLINE,
						memory_order_acq_rel);
	pthread_mutex_unlock(&lu->lock);
	if (!offline && (was & SCSI_MS_OFFLINE))
		scsi_ua_post_others(lu, NULL, 0x28, 0x00); /* NOT READY TO READY CHANGE */
}

bool scsi_lu_writable(const struct scsi_lu *lu)
{
	return !lu->ro_open && lu->dev;
}

int scsi_lu_set_options(struct scsi_lu *lu, int write_cache, int readonly)
{
	bool changed = false;

	if (readonly == 0 && !scsi_lu_writable(lu))
		return -EROFS;
	if (write_cache >= 0) {
		atomic_store(&lu->wce_default, write_cache != 0);
		changed = atomic_exchange(&lu->wce, write_cache != 0) != (write_cache != 0);
	}
	if (readonly >= 0)
		changed |= atomic_exchange(&lu->readonly, readonly != 0) != (readonly != 0);
	if (changed) /* MODE PARAMETERS CHANGED: WCE or WP of the mode pages */
		scsi_ua_post_others(lu, NULL, 0x2a, 0x01);
	return 0;
}

bool scsi_lu_offline(const struct scsi_lu *lu)
{
	return atomic_load_explicit(&lu->mstate, memory_order_acquire) & SCSI_MS_OFFLINE;
}

int scsi_lu_grow(struct scsi_lu *lu, uint64_t bytes, char *err, size_t errlen)
{
	int r;

	if (!lu->dev) {
		snprintf(err, errlen, "the LUN has no medium");
		return -ENOMEDIUM;
	}
	r = bs_dev_grow(lu->dev, bytes, err, errlen);
	if (r < 0)
		return r;
	/* the backend takes I/O up to the new end before the first command may ask for it */
	lu->nblocks = bytes / lu->block_size;
	scsi_ua_post_others(lu, NULL, 0x2a, 0x09); /* CAPACITY DATA HAS CHANGED */
	return 0;
}

int scsi_lu_shrink(struct scsi_lu *lu, uint64_t bytes, char *err, size_t errlen)
{
	uint64_t was;
	int r;

	if (!lu->dev) {
		snprintf(err, errlen, "the LUN has no medium");
		return -ENOMEDIUM;
	}
	if (bytes % lu->block_size || bytes == 0) {
		snprintf(err, errlen, "%llu bytes: not a multiple of the block size",
			 (unsigned long long)bytes);
		return -EINVAL;
	}
	was = atomic_exchange(&lu->nblocks, bytes / lu->block_size);
	r = bs_dev_shrink(lu->dev, bytes, err, errlen);
	if (r < 0) {
		lu->nblocks = was;
		return r;
	}
	scsi_ua_post_others(lu, NULL, 0x2a, 0x09); /* CAPACITY DATA HAS CHANGED */
	return 0;
}

struct bs_dev *scsi_lu_dev(struct scsi_lu *lu)
{
	return lu->dev;
}

uint32_t scsi_lu_block_size(const struct scsi_lu *lu)
{
	return lu->block_size;
}

bool scsi_lu_d_sense(const struct scsi_lu *lu)
{
	return atomic_load_explicit(&lu->d_sense, memory_order_relaxed);
}

/* ---- LUN map ---- */

struct scsi_lun_map *scsi_lun_map_new(void)
{
	struct scsi_lun_map *map = calloc(1, sizeof(*map));

	if (!map)
		return NULL;
	for (unsigned i = 0; i < SCSI_MAX_LUNS; i++)
		atomic_init(&map->lus[i], NULL);
	atomic_init(&map->alua, NULL);
	pthread_mutex_init(&map->alua_lock, NULL);
	return map;
}

void scsi_lun_map_set_ha(struct scsi_lun_map *map, struct scsi_ha *ha)
{
	if (ha)
		ha->ops->get(ha);
	if (map->ha)
		map->ha->ops->put(map->ha);
	map->ha = ha;
}

void scsi_lun_map_free(struct scsi_lun_map *map)
{
	if (!map)
		return;
	for (unsigned i = 0; i < SCSI_MAX_LUNS; i++)
		scsi_lu_put(atomic_load(&map->lus[i]));
	scsi_alua_map_free(map);
	if (map->ha)
		map->ha->ops->put(map->ha);
	pthread_mutex_destroy(&map->alua_lock);
	free(map);
}

int scsi_lun_map_add(struct scsi_lun_map *map, uint32_t lun, struct scsi_lu *lu)
{
	struct scsi_lu *expected = NULL;

	if (lun >= SCSI_MAX_LUNS)
		return -ERANGE;
	scsi_lu_get(lu);
	if (!atomic_compare_exchange_strong(&map->lus[lun], &expected, lu)) {
		scsi_lu_put(lu);
		return -EEXIST;
	}
	if (lu->ha && lu->ha->ops->lu_mapped)
		lu->ha->ops->lu_mapped(map, lu);
	return 0;
}

struct scsi_lu *scsi_lun_map_remove(struct scsi_lun_map *map, uint32_t lun)
{
	if (!map || lun >= SCSI_MAX_LUNS)
		return NULL;
	return atomic_exchange(&map->lus[lun], NULL);
}

void scsi_lun_map_changed(const struct scsi_lun_map *map)
{
	for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
		struct scsi_lu *lu = scsi_lun_map_get(map, i);
		if (lu) /* REPORTED LUNS DATA HAS CHANGED */
			scsi_ua_post_others(lu, NULL, 0x3f, 0x0e);
	}
}

struct scsi_lu *scsi_lun_map_get(const struct scsi_lun_map *map, uint64_t lun)
{
	if (lun >= SCSI_MAX_LUNS)
		lun = scsi_lun_decode(lun);
	if (!map || lun >= SCSI_MAX_LUNS)
		return NULL;
	return atomic_load_explicit(&((struct scsi_lun_map *)map)->lus[lun], memory_order_acquire);
}

uint32_t scsi_lun_decode(uint64_t lun_field)
{
	uint8_t b0 = (uint8_t)(lun_field >> 56), b1 = (uint8_t)(lun_field >> 48);

	if (lun_field & 0x0000ffffffffffffULL)
		return UINT32_MAX; /* second to fourth level: not addressed here */
	switch (b0 >> 6) {
	case 0: /* peripheral device addressing, bus 0 */
		return b0 == 0 ? b1 : UINT32_MAX;
	case 1: /* flat space addressing */
		return ((uint32_t)(b0 & 0x3f) << 8) | b1;
	default:
		return UINT32_MAX;
	}
}

uint64_t scsi_lun_encode(uint32_t lun)
{
	if (lun < 256)
		return (uint64_t)lun << 48;
	return ((uint64_t)(0x40 | ((lun >> 8) & 0x3f)) << 56) | ((uint64_t)(lun & 0xff) << 48);
}

/* ---- nexus and unit attentions ---- */

struct scsi_nexus *scsi_nexus_new(const struct scsi_lun_map *map, const char *initiator_port,
				  const char *target_port)
{
	struct scsi_nexus *nx = calloc(1, sizeof(*nx));

	if (!nx)
		return NULL;
	nx->map = map;
	nx->initiator_port = strdup(initiator_port ? initiator_port : "");
	nx->target_port = strdup(target_port ? target_port : "");
	nx->rtpi = pr_tport_rtpi(target_port);
	if (!nx->initiator_port || !nx->target_port) {
		free(nx->initiator_port);
		free(nx->target_port);
		free(nx);
		return NULL;
	}
	return nx;
}

const char scsi_resv_remote_tag = 0;


/* What I_T nexus loss ends at lu, under lu->lock: PREVENT MEDIUM REMOVAL and a RESERVE(6)/(10)
 * reservation held through the nexus. True when it released the reservation: the caller
 * tells the shared store (spc2_lost) once the lock is dropped. */
static bool itl_lose_locked(struct scsi_lu *lu, struct scsi_itl *itl)
{
	struct scsi_nexus *me = itl->nx;

	if (itl->prevent) {
		itl->prevent = false;
		lu->prevent--;
	}
	return atomic_compare_exchange_strong(&lu->resv_holder, &me, NULL);
}

static unsigned itl_lost_tell(struct scsi_lu *lu, struct scsi_itl *itl, bool held,
			      const struct scsi_lost_wait *w)
{
	if (held && lu->pr_ops && lu->pr_ops->spc2_lost)
		return lu->pr_ops->spc2_lost(lu, itl->nx, w) > 0;
	return 0;
}

/* Undo scsi_itl_attach(): the I_T nexus no longer reaches that LU (nexus loss, or the LUN now
 * names another LU). Runs on the nexus's thread. */
static void itl_detach(struct scsi_itl *itl)
{
	struct scsi_lu *lu = itl ? atomic_load(&itl->lu) : NULL;
	bool held;

	if (!lu)
		return;
	pthread_mutex_lock(&lu->lock);
	list_del(&itl->lu_link);
	held = itl_lose_locked(lu, itl);
	itl->n_ua = 0;
	atomic_store(&itl->ua_pending, false);
	atomic_store(&itl->lu, NULL);
	pthread_mutex_unlock(&lu->lock);
	itl_lost_tell(lu, itl, held, NULL);
	scsi_lu_put(lu);
}

void scsi_nexus_lost(struct scsi_nexus *nx)
{
	(void)scsi_nexus_lost_wait(nx, NULL);
}

unsigned scsi_nexus_lost_wait(struct scsi_nexus *nx, const struct scsi_lost_wait *w)
{
	unsigned waits = 0;

	for (unsigned i = 0; nx && i < SCSI_MAX_LUNS; i++) {
		struct scsi_itl *itl = nx->itl[i];
		struct scsi_lu *lu = itl ? atomic_load(&itl->lu) : NULL;
		bool held;

		if (!lu)
			continue;
		pthread_mutex_lock(&lu->lock);
		held = itl_lose_locked(lu, itl);
		pthread_mutex_unlock(&lu->lock);
		waits += itl_lost_tell(lu, itl, held, w);
	}
	return waits;
}

void scsi_nexus_free(struct scsi_nexus *nx)
{
	if (!nx)
		return;
	for (unsigned i = 0; i < SCSI_MAX_LUNS; i++) {
		itl_detach(nx->itl[i]);
		free(nx->itl[i]);
	}
	free(nx->view);
	free(nx->initiator_port);
	free(nx->target_port);
	free(nx);
}

uint32_t scsi_nexus_map_lun(const struct scsi_nexus *nx, uint32_t lun)
{
	if (lun >= SCSI_MAX_LUNS)
		return UINT32_MAX;
	if (!nx || !nx->view)
		return lun;
	return nx->view[lun] ? nx->view[lun] - 1u : UINT32_MAX;
}

static bool view_same(const uint16_t *a, const uint16_t *b)
{
	if (!a || !b)
		return a == b;
	return memcmp(a, b, SCSI_MAX_LUNS * sizeof(*a)) == 0;
}

/* After a view change: LUNs that name another LU now are detached (their next command attaches
 * the new one with 29/00); the others learn that the LUN inventory changed. */
static void view_changed(struct scsi_nexus *nx)
{
	for (uint32_t i = 0; i < SCSI_MAX_LUNS; i++) {
		struct scsi_itl *itl = nx->itl[i];
		struct scsi_lu *lu = itl ? atomic_load(&itl->lu) : NULL;
		if (!lu)
			continue;
		if (scsi_lun_map_get(nx->map, scsi_nexus_map_lun(nx, i)) != lu) {
			itl_detach(itl);
			continue;
		}
		pthread_mutex_lock(&lu->lock);
		scsi_ua_add_locked(itl, 0x3f, 0x0e); /* REPORTED LUNS DATA HAS CHANGED */
		pthread_mutex_unlock(&lu->lock);
	}
}

int scsi_nexus_set_view(struct scsi_nexus *nx, const uint16_t *view)
{
	uint16_t *copy = NULL;

	if (view_same(nx->view, view))
		return 0;
	if (view) {
		copy = malloc(SCSI_MAX_LUNS * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, view, SCSI_MAX_LUNS * sizeof(*copy));
	}
	free(nx->view);
	nx->view = copy;
	view_changed(nx);
	return 1;
}

void scsi_ua_add_locked(struct scsi_itl *itl, uint8_t asc, uint8_t ascq)
{
	for (unsigned i = 0; i < itl->n_ua; i++) {
		/* A power-on/reset condition pending already covers a later reset. */
		if (itl->ua[i][0] == asc && (itl->ua[i][1] == ascq || asc == 0x29))
			return;
	}
	if (itl->n_ua == SCSI_UA_QUEUE)
		return; /* the oldest ones are reported; SPC allows dropping */
	itl->ua[itl->n_ua][0] = asc;
	itl->ua[itl->n_ua][1] = ascq;
	itl->n_ua++;
	atomic_store_explicit(&itl->ua_pending, true, memory_order_release);
}

struct scsi_itl *scsi_itl_attach(struct scsi_nexus *nx, uint32_t lun, struct scsi_lu *lu)
{
	struct scsi_itl *itl = nx->itl[lun];
	struct scsi_lu *cur;

	if (!itl) {
		/* the LUN's first command through this nexus (its thread's) */
		itl = calloc(1, sizeof(*itl));
		if (!itl)
			return NULL;
		atomic_init(&itl->lu, NULL);
		atomic_init(&itl->ua_pending, false);
		atomic_init(&itl->wr_inflight, 0);
		itl->nx = nx;
		list_init(&itl->lu_link);
		nx->itl[lun] = itl;
	}
	cur = atomic_load_explicit(&itl->lu, memory_order_acquire);

	if (cur == lu)
		return itl;
	if (cur) /* a reload removed the LU this LUN named and put another one there */
		itl_detach(itl);
	pthread_mutex_lock(&lu->lock);
	if (atomic_load_explicit(&itl->lu, memory_order_relaxed) != lu) {
		scsi_lu_get(lu);
		list_add_tail(&itl->lu_link, &lu->itls);
		itl->prevent = false;
		scsi_pr_itl_attach_locked(lu, itl);
		scsi_ua_add_locked(itl, 0x29,
				   0x00); /* POWER ON, RESET, OR BUS DEVICE RESET OCCURRED */
		scsi_thin_itl_attach_locked(lu, itl);
		atomic_store_explicit(&itl->lu, lu, memory_order_release);
	}
	pthread_mutex_unlock(&lu->lock);
	return itl;
}

bool scsi_ua_take(struct scsi_itl *itl, uint8_t *asc, uint8_t *ascq)
{
	struct scsi_lu *lu = atomic_load_explicit(&itl->lu, memory_order_acquire);
	bool got = false;

	if (!lu || !atomic_load_explicit(&itl->ua_pending, memory_order_acquire))
		return false;
	pthread_mutex_lock(&lu->lock);
	if (itl->n_ua > 0) {
		*asc = itl->ua[0][0];
		*ascq = itl->ua[0][1];
		memmove(itl->ua[0], itl->ua[1], (size_t)(itl->n_ua - 1) * 2);
		itl->n_ua--;
		got = true;
	}
	if (itl->n_ua == 0)
		atomic_store_explicit(&itl->ua_pending, false, memory_order_release);
	pthread_mutex_unlock(&lu->lock);
	return got;
}

void scsi_ua_post_others(struct scsi_lu *lu, const struct scsi_nexus *except, uint8_t asc,
			 uint8_t ascq)
{
	struct list_head *pos, *n;

	pthread_mutex_lock(&lu->lock);
	list_for_each_safe(pos, n, &lu->itls)
	{
		struct scsi_itl *itl = list_entry(pos, struct scsi_itl, lu_link);

		if (itl->nx != except)
			scsi_ua_add_locked(itl, asc, ascq);
	}
	pthread_mutex_unlock(&lu->lock);
}

int scsi_lu_reset(struct scsi_lu *lu, struct scsi_nexus *from)
{
	struct list_head *pos;

	if (!lu)
		return -ENOENT;
	/* SPC-2 reservations and medium removal prevention end with a logical unit reset;
	 * persistent reservations do not (SPC-4 5.12.10). */
	atomic_store(&lu->resv_holder, NULL);
	pthread_mutex_lock(&lu->lock);
	list_for_each(pos, &lu->itls) list_entry(pos, struct scsi_itl, lu_link)->prevent = false;
	lu->prevent = 0;
	pthread_mutex_unlock(&lu->lock);
	/* SAM-5 6.3.3: a unit attention for every I_T nexus, the requester's included (so an
	 * initiator with several paths sees the reset on each; libiscsi MultipathIO.Reset). */
	(void)from;
	scsi_ua_post_others(lu, NULL, 0x29, 0x03); /* LOGICAL UNIT RESET OCCURRED */
	scsi_rod_lu_reset(lu); /* its ROD tokens are revoked */
	if (lu->pr_ops && lu->pr_ops->reset)
		lu->pr_ops->reset(lu); /* the same LU on other gateways (src/ha/ha_pr.c) */
	return 0;
}

/* ---- per-thread context ---- */

struct scsi_thread *scsi_thread_new(struct ev_loop *loop, struct scsi_lu_index *ix)
{
	struct scsi_thread *t = calloc(1, sizeof(*t));
	int err = 0;

	if (!t)
		return NULL;
	t->loop = loop;
	list_init(&t->sanitizes);
	list_init(&t->eject_waits);
	list_init(&t->hold_waits);
	scsi_slow_thread_init(t);
	t->bs = bs_thread_new(loop, 0, &err);
	if (!t->bs) {
		free(t);
		return NULL;
	}
	scsi_abort_thread_add(ix, t);
	return t;
}

void scsi_thread_free(struct scsi_thread *t)
{
	if (!t)
		return;
	scsi_abort_thread_del(t);
	scsi_sanitize_thread_stop(t);
	scsi_eject_thread_stop(t);
	scsi_hold_thread_stop(t);
	bs_thread_free(t->bs);
	scsi_slow_thread_fini(t);
	free(t);
}
