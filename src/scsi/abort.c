/* Aborting the tasks of other I_T nexuses (PREEMPT AND ABORT, SPC-4 5.12.11.4.5), see
 * scsi_abort_fn in scsi.h.
 *
 * Every scsi_thread is on its target context's registry (scsi_lu_index: a mutex and a list;
 * slow path, never the data path), and an abort reaches the threads of the LU's context.
 * scsi_abort_start() posts one job to the loop of each thread whose transport set a hook; the
 * job runs the hook there, where the thread's tasks live, and the hook holds the request once
 * for each task it must still wait for. The request counts the jobs and holds in one atomic;
 * the last release completes it, on the thread that released it or posted to the caller's
 * loop with the request's own message node (so the completion cannot fail for want of memory).
 *
 * A job posted to a thread's loop runs unless that loop is freed first, which happens only
 * when the target shuts down (its workers' loops are run until their connections are gone,
 * then freed): a request still open then is never completed, as the commands waiting on it
 * are not. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scsi/scsi_int.h"
#include "util/log.h"

struct scsi_abort {
	atomic_int pending;  /* jobs not yet run + tasks held */
	struct scsi_lu *lu;  /* compared with the LUs of tasks, never dereferenced */
	struct pr_ua *ports; /* the nexuses (asc/ascq unused), owned */
	size_t n;
	struct ev_loop *reply;
	void (*done)(void *arg, bool all);
	void *arg;
	bool missed; /* a thread's job could not be posted (out of memory) */
	struct ev_post post; /* the completion, posted to reply */
};

struct abort_job {
	struct scsi_abort *req;
	struct scsi_thread *t;
	struct scsi_lu_index *ix; /* t's registry */
};

void scsi_abort_thread_add(struct scsi_lu_index *ix, struct scsi_thread *t)
{
	t->ix = ix;
	if (!ix)
		return;
	scsi_lu_index_get(ix);
	pthread_mutex_lock(&ix->threads_lock);
	list_add_tail(&t->abort_link, &ix->threads);
	pthread_mutex_unlock(&ix->threads_lock);
}

void scsi_abort_thread_del(struct scsi_thread *t)
{
	struct scsi_lu_index *ix = t->ix;

	if (!ix)
		return;
	pthread_mutex_lock(&ix->threads_lock);
	list_del(&t->abort_link);
	pthread_mutex_unlock(&ix->threads_lock);
	t->ix = NULL;
	scsi_lu_index_put(ix);
}

void scsi_thread_set_abort(struct scsi_thread *t, scsi_abort_fn fn, void *arg)
{
	if (t->ix)
		pthread_mutex_lock(&t->ix->threads_lock);
	t->abort_fn = fn;
	t->abort_arg = arg;
	if (t->ix)
		pthread_mutex_unlock(&t->ix->threads_lock);
}

struct scsi_lu *scsi_abort_lu(const struct scsi_abort *req)
{
	return req->lu;
}

bool scsi_abort_wants(const struct scsi_abort *req, const struct scsi_nexus *nx)
{
	for (size_t i = 0; i < req->n; i++)
		if (strcasecmp(req->ports[i].iport, nx->initiator_port) == 0 &&
		    strcasecmp(req->ports[i].tport, nx->target_port) == 0)
			return true;
	return false;
}

static void req_free(struct scsi_abort *req)
{
	for (size_t i = 0; i < req->n; i++) {
		free(req->ports[i].iport);
		free(req->ports[i].tport);
	}
	free(req->ports);
	free(req);
}

static void req_complete(void *arg)
{
	struct scsi_abort *req = arg;

	req->done(req->arg, !req->missed);
	req_free(req);
}

void scsi_abort_hold(struct scsi_abort *req)
{
	atomic_fetch_add(&req->pending, 1);
}

void scsi_abort_release(struct scsi_abort *req)
{
	if (atomic_fetch_sub(&req->pending, 1) != 1)
		return;
	if (req->reply)
		ev_loop_post_node(req->reply, &req->post, req_complete, req);
	else
		req_complete(req);
}

/* On the thread's loop. */
static void run_job(void *arg)
{
	struct abort_job *j = arg;
	scsi_abort_fn fn;
	void *fn_arg;

	pthread_mutex_lock(&j->ix->threads_lock);
	fn = j->t->abort_fn;
	fn_arg = j->t->abort_arg;
	pthread_mutex_unlock(&j->ix->threads_lock);
	if (fn)
		fn(fn_arg, j->req);
	scsi_abort_release(j->req);
	free(j);
}

static struct scsi_abort *req_new(struct scsi_lu *lu, const struct pr_ua *ports, size_t n)
{
	struct scsi_abort *req = calloc(1, sizeof(*req));

	if (!req || !(req->ports = calloc(n ? n : 1, sizeof(*req->ports)))) {
		free(req);
		return NULL;
	}
	req->lu = lu;
	for (; req->n < n; req->n++) {
		struct pr_ua *p = &req->ports[req->n];

		p->iport = strdup(ports[req->n].iport);
		p->tport = strdup(ports[req->n].tport);
		if (!p->iport || !p->tport) {
			free(p->iport);
			free(p->tport);
			req_free(req);
			return NULL;
		}
	}
	return req;
}

int scsi_abort_start(struct scsi_lu *lu, const struct pr_ua *ports, size_t n, struct ev_loop *reply,
		     void (*done)(void *arg, bool all), void *arg)
{
	struct scsi_lu_index *ix = lu->index; /* NULL: a LU of no target context, no thread */
	struct scsi_abort *req = req_new(lu, ports, n);
	struct list_head *pos;
	unsigned missed = 0;

	if (!req)
		return -ENOMEM;
	req->reply = reply;
	req->done = done;
	req->arg = arg;
	atomic_init(&req->pending, 1); /* ours, until every job is posted */
	if (ix)
		pthread_mutex_lock(&ix->threads_lock);
	for (pos = ix ? ix->threads.next : NULL; ix && pos != &ix->threads; pos = pos->next) {
		struct scsi_thread *t = list_entry(pos, struct scsi_thread, abort_link);
		struct abort_job *j;

		if (!t->abort_fn)
			continue;
		j = malloc(sizeof(*j));
		if (j) {
			j->req = req;
			j->t = t;
			j->ix = ix;
			atomic_fetch_add(&req->pending, 1);
			if (ev_loop_post(t->loop, run_job, j) == 0)
				continue;
			atomic_fetch_sub(&req->pending, 1);
			free(j);
		}
		missed++;
	}
	req->missed = missed > 0;
	if (ix)
		pthread_mutex_unlock(&ix->threads_lock);
	if (missed)
		log_err("scsi",
			"out of memory: the tasks of preempted nexuses on %u thread(s) are not "
			"aborted",
			missed);
	scsi_abort_release(req);
	return 0;
}
