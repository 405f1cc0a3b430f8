/* iSER: the ITT table and the memory registration cache (iser_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "transport/iser/iser_int.h"
#include "util/bytes.h"
#include "util/log.h"

/* ---------------------------------------------------------------- ITT table */

struct itt_ent *iser_itt_find(struct iser_conn *ic, uint32_t itt, bool create)
{
	uint32_t h = (itt * 2654435761u) & (ITT_SLOTS - 1);

	for (uint32_t i = 0; i < ITT_SLOTS; i++) {
		struct itt_ent *e = &ic->itts[(h + i) & (ITT_SLOTS - 1)];

		if (e->used && e->itt == itt)
			return e;
		if (!e->used && create) {
			memset(e, 0, sizeof(*e));
			e->used = true;
			e->itt = itt;
			return e;
		}
		if (!e->used && !create)
			return NULL; /* no tombstones: deletion re-inserts the run below */
	}
	return NULL;
}

void iser_itt_del(struct iser_conn *ic, uint32_t itt)
{
	struct itt_ent *e = iser_itt_find(ic, itt, false);
	uint32_t i;

	if (!e)
		return;
	e->used = false;
	/* re-insert the rest of the probe run (linear probing without tombstones) */
	i = (uint32_t)(e - ic->itts);
	for (uint32_t k = 1; k < ITT_SLOTS; k++) {
		struct itt_ent *n = &ic->itts[(i + k) & (ITT_SLOTS - 1)], tmp;

		if (!n->used)
			break;
		tmp = *n;
		n->used = false;
		*iser_itt_find(ic, tmp.itt, true) = tmp;
	}
}

/* ---------------------------------------------------------------- memory registrations */

struct mr_ent *iser_mr_get(struct iser_conn *ic, void *base, size_t size)
{
	struct mr_ent *victim = NULL;

	for (int i = 0; i < MR_SLOTS; i++) {
		struct mr_ent *m = &ic->mrs[i];

		if (m->mr && m->base == base && m->size >= size) {
			m->used = ++ic->mr_clock;
			return m;
		}
		if (!m->mr) {
			if (!victim || victim->mr)
				victim = m;
		} else if (m->refs == 0 && (!victim || (victim->mr && m->used < victim->used))) {
			victim = m;
		}
	}
	if (!victim)
		return NULL;
	if (victim->mr) {
		ibv_dereg_mr(victim->mr);
		victim->mr = NULL;
	}
	victim->mr = ibv_reg_mr(ic->pd, base, size, ic->local_access);
	if (!victim->mr)
		return NULL;
	victim->base = base;
	victim->size = size;
	victim->refs = 0;
	victim->used = ++ic->mr_clock;
	return victim;
}

void iser_buf_free(struct iscsi_conn *c, void *base)
{
	struct iser_conn *ic = iser_of(c);

	for (int i = 0; i < MR_SLOTS; i++) {
		struct mr_ent *m = &ic->mrs[i];

		if (m->mr && m->base == base) {
			/* in-flight work on a buffer the role frees would be a role bug; the
			   registration is dropped either way */
			ibv_dereg_mr(m->mr);
			memset(m, 0, sizeof(*m));
		}
	}
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];

		if (pe->mr && pe->base == base) {
			ibv_dereg_mr(pe->mr);
			memset(pe, 0, sizeof(*pe));
		}
	}
}

/* mem_register: one region for the connection's lifetime, open to the peer's RDMA Reads and
 * Writes (the initiator names parts of it as Read/Write STags). */
int iser_mem_register(struct iscsi_conn *c, void *base, size_t size)
{
	struct iser_conn *ic = iser_of(c);

	if (!ic->pd || ic->terminated)
		return -ENOTCONN;
	if (!base || !size)
		return -EINVAL;
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];

		if (pe->mr && pe->base == base && pe->size >= size)
			return 0; /* already there */
	}
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];

		if (pe->mr)
			continue;
		pe->mr = ibv_reg_mr(ic->pd, base, size,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		if (!pe->mr)
			return errno ? -errno : -ENOMEM;
		pe->base = base;
		pe->size = size;
		return 0;
	}
	return -ENOSPC;
}

/* The registered region that holds all of [base, base + size), or NULL. */
struct pool_ent *iser_pool_find(struct iser_conn *ic, const void *base, size_t size)
{
	uintptr_t b = (uintptr_t)base;

	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *pe = &ic->pools[i];
		uintptr_t pb = (uintptr_t)pe->base;

		if (pe->mr && b >= pb && size <= pe->size && b - pb <= pe->size - size)
			return pe;
	}
	return NULL;
}
