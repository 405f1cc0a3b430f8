/* Blocking wrappers: run the loop until a flag set by the completion callback. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/ini_int.h"
#include "ix/sync.h"

struct waiter {
	bool done;
	int err;
};

static int wait_for(struct ix_ctx *ctx, struct waiter *w)
{
	while (!w->done) {
		int r = ix_ctx_service(ctx, -1);
		if (r < 0)
			return r;
	}
	return w->err;
}

struct ix_ctx *ix_session_ctx(struct ix_session *s)
{
	return s->ctx;
}

static void sess_done(struct ix_session *s, int err, void *arg)
{
	struct waiter *w = arg;

	(void)s;
	w->err = err;
	w->done = true;
}

int ix_sync_login(struct ix_session *s)
{
	struct waiter w = {0};
	int r = ix_session_login(s, sess_done, &w);

	return r ? r : wait_for(s->ctx, &w);
}

int ix_sync_logout(struct ix_session *s)
{
	struct waiter w = {0};
	int r = ix_session_logout(s, sess_done, &w);

	return r ? r : wait_for(s->ctx, &w);
}

static void cmd_done(struct ix_scsi_cmd *cmd)
{
	struct waiter *w = cmd->arg;

	w->err = cmd->err;
	w->done = true;
}

int ix_sync_scsi(struct ix_session *s, struct ix_scsi_cmd *cmd)
{
	struct waiter w = {0};
	int r;

	cmd->done = cmd_done;
	cmd->arg = &w;
	r = ix_scsi_submit(s, cmd);
	return r ? r : wait_for(s->ctx, &w);
}

static void tmf_done(struct ix_session *s, int response, void *arg)
{
	struct waiter *w = arg;

	(void)s;
	w->err = response;
	w->done = true;
}

int ix_sync_lun_reset(struct ix_session *s, uint32_t lun)
{
	struct waiter w = {0};
	int r = ix_lun_reset(s, lun, tmf_done, &w);

	return r ? r : wait_for(s->ctx, &w);
}

struct disc_waiter {
	struct waiter w;
	struct ix_discovery *out;
	char *errmsg;
	size_t errlen;
};

static void disc_done(struct ix_ctx *ctx, int err, const struct ix_discovery *d,
		      const char *errmsg, void *arg)
{
	struct disc_waiter *dw = arg;

	(void)ctx;
	dw->w.done = true;
	dw->w.err = err;
	if (dw->errmsg && dw->errlen)
		snprintf(dw->errmsg, dw->errlen, "%s", errmsg ? errmsg : "");
	if (err)
		return;
	dw->out = calloc(1, sizeof(*dw->out));
	if (dw->out)
		dw->out->targets = calloc(d->ntargets ? (size_t)d->ntargets : 1,
					  sizeof(*d->targets));
	if (!dw->out || !dw->out->targets) {
		free(dw->out);
		dw->out = NULL;
		dw->w.err = -ENOMEM;
		return;
	}
	dw->out->ntargets = d->ntargets;
	memcpy(dw->out->targets, d->targets, (size_t)d->ntargets * sizeof(*d->targets));
}

int ix_sync_discover(struct ix_ctx *ctx, const struct ix_session_opts *opts,
		     struct ix_discovery **out, char *errmsg, size_t errlen)
{
	struct disc_waiter dw = {.errmsg = errmsg, .errlen = errlen};
	int r;

	*out = NULL;
	if (errmsg && errlen)
		errmsg[0] = 0;
	r = ix_discover(ctx, opts, disc_done, &dw);
	if (r) {
		if (errmsg && errlen)
			snprintf(errmsg, errlen, "%s", strerror(-r));
		return r;
	}
	r = wait_for(ctx, &dw.w);
	if (r == 0)
		*out = dw.out;
	return r;
}

void ix_discovery_free(struct ix_discovery *d)
{
	if (!d)
		return;
	free(d->targets);
	free(d);
}
