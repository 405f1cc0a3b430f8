/* The index of a target context's LUs by NAA designator (for EXTENDED COPY); it holds the
 * context's thread registry too (abort.c). */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "scsi/scsi_int.h"

struct scsi_lu_index *scsi_lu_index_new(void)
{
	struct scsi_lu_index *ix = calloc(1, sizeof(*ix));

	if (!ix)
		return NULL;
	atomic_init(&ix->refs, 1);
	if (getrandom(ix->id, sizeof(ix->id), 0) != (ssize_t)sizeof(ix->id)) {
		struct timespec ts; /* no entropy: unique enough to tell contexts apart */

		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(ix->id, &ts, sizeof(ts) < sizeof(ix->id) ? sizeof(ts) : sizeof(ix->id));
		memcpy(ix->id + 8, &ix, sizeof(ix));
	}
	pthread_mutex_init(&ix->lock, NULL);
	list_init(&ix->lus);
	pthread_mutex_init(&ix->threads_lock, NULL);
	list_init(&ix->threads);
	return ix;
}

void scsi_lu_index_get(struct scsi_lu_index *ix)
{
	atomic_fetch_add_explicit(&ix->refs, 1, memory_order_relaxed);
}

void scsi_lu_index_put(struct scsi_lu_index *ix)
{
	if (!ix || atomic_fetch_sub_explicit(&ix->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&ix->lock);
	pthread_mutex_destroy(&ix->threads_lock);
	free(ix);
}

void scsi_lu_index_add(struct scsi_lu_index *ix, struct scsi_lu *lu)
{
	atomic_fetch_add_explicit(&ix->refs, 1, memory_order_relaxed);
	pthread_mutex_lock(&ix->lock);
	list_add_tail(&lu->index_link, &ix->lus);
	pthread_mutex_unlock(&ix->lock);
}

void scsi_lu_index_del(struct scsi_lu_index *ix, struct scsi_lu *lu)
{
	pthread_mutex_lock(&ix->lock);
	list_del(&lu->index_link);
	pthread_mutex_unlock(&ix->lock);
}

/* A reference unless the LU is already on its way out (its last reference is gone and it is
 * about to leave the index). */
static bool get_unless_zero(struct scsi_lu *lu)
{
	int r = atomic_load_explicit(&lu->refs, memory_order_relaxed);

	while (r > 0)
		if (atomic_compare_exchange_weak_explicit(&lu->refs, &r, r + 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			return true;
	return false;
}

struct scsi_lu *scsi_lu_index_find(struct scsi_lu_index *ix, const uint8_t *desig, uint8_t len)
{
	struct scsi_lu *found = NULL;
	struct list_head *pos, *n;

	if (!ix || len != sizeof(((struct scsi_lu *)0)->naa))
		return NULL; /* every LU here has a 16-byte NAA 6 designator */
	pthread_mutex_lock(&ix->lock);
	list_for_each_safe(pos, n, &ix->lus)
	{
		struct scsi_lu *lu = list_entry(pos, struct scsi_lu, index_link);

		if (memcmp(lu->naa, desig, len) == 0 && get_unless_zero(lu)) {
			found = lu;
			break;
		}
	}
	pthread_mutex_unlock(&ix->lock);
	return found;
}

void scsi_lu_index_space_poll(struct scsi_lu_index *ix)
{
	struct list_head *pos;

	if (!ix)
		return;
	/* Under the index lock: an LU whose last reference went waits in scsi_lu_index_del
	 * before its device closes, so the sample never meets a closed device. */
	pthread_mutex_lock(&ix->lock);
	list_for_each(pos, &ix->lus)
	{
		struct scsi_lu *lu = list_entry(pos, struct scsi_lu, index_link);

		if (lu->dev && lu->dev->ops->space && atomic_load(&lu->refs) > 0)
			(void)scsi_lu_space_poll(lu);
	}
	pthread_mutex_unlock(&ix->lock);
}
