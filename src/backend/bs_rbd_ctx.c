/* RBD backend: the context of a set of devices (struct bs_rbd_ctx, bs_rbd_int.h): its cluster
 * connections (bs_rbd_conn.c), its opener thread (bs_rbd_conn.c) and its helper thread
 * (bs_rbd.c), created by its owner (src/ha/: one per target context), held by every open
 * device, freed once the last reference has gone and the threads it stopped then have ended. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "backend/bs_rbd_int.h"

struct bs_rbd_ctx *bs_rbd_ctx_new(void)
{
	struct bs_rbd_ctx *x = calloc(1, sizeof(*x));
	pthread_condattr_t ca;

	if (!x)
		return NULL;
	pthread_mutex_init(&x->life_lock, NULL);
	x->refs = 1;
	pthread_mutex_init(&x->clusters_lock, NULL);
	pthread_cond_init(&x->clusters_cv, NULL);
	list_init(&x->clusters);
	pthread_mutex_init(&x->opener.lock, NULL);
	pthread_condattr_init(&ca); /* the opener's conditions on the monotonic clock */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&x->opener.work, &ca);
	pthread_cond_init(&x->opener.done, &ca);
	pthread_condattr_destroy(&ca);
	list_init(&x->opener.list);
	pthread_mutex_init(&x->helper.lock, NULL);
	pthread_cond_init(&x->helper.cond, NULL);
	return x;
}

static void ctx_free(struct bs_rbd_ctx *x)
{
	pthread_cond_destroy(&x->helper.cond);
	pthread_mutex_destroy(&x->helper.lock);
	pthread_cond_destroy(&x->opener.done);
	pthread_cond_destroy(&x->opener.work);
	pthread_mutex_destroy(&x->opener.lock);
	pthread_cond_destroy(&x->clusters_cv);
	pthread_mutex_destroy(&x->clusters_lock);
	pthread_mutex_destroy(&x->life_lock);
	free(x);
}

void bs_rbd_ctx_get(struct bs_rbd_ctx *x)
{
	pthread_mutex_lock(&x->life_lock);
	x->refs++;
	pthread_mutex_unlock(&x->life_lock);
}

/* The last reference: no device is open, so nothing starts a thread any more; the threads
 * are told to stop, and whichever of this and their ends comes last frees x. */
void bs_rbd_ctx_put(struct bs_rbd_ctx *x)
{
	bool last;

	if (!x)
		return;
	pthread_mutex_lock(&x->life_lock);
	last = --x->refs == 0;
	pthread_mutex_unlock(&x->life_lock);
	if (!last)
		return;
	pthread_mutex_lock(&x->opener.lock);
	x->opener.stop = true;
	pthread_cond_broadcast(&x->opener.work);
	pthread_mutex_unlock(&x->opener.lock);
	pthread_mutex_lock(&x->helper.lock);
	x->helper.stop = true;
	pthread_cond_broadcast(&x->helper.cond);
	pthread_mutex_unlock(&x->helper.lock);
	pthread_mutex_lock(&x->life_lock);
	x->gone = true;
	last = x->threads == 0;
	pthread_mutex_unlock(&x->life_lock);
	if (last)
		ctx_free(x);
}

void bs_rbd_ctx_thread_end(struct bs_rbd_ctx *x)
{
	bool last;

	pthread_mutex_lock(&x->life_lock);
	last = --x->threads == 0 && x->gone;
	pthread_mutex_unlock(&x->life_lock);
	if (last)
		ctx_free(x);
}

void bs_rbd_ctx_thread_start(struct bs_rbd_ctx *x)
{
	pthread_mutex_lock(&x->life_lock);
	x->threads++;
	pthread_mutex_unlock(&x->life_lock);
}
