/* SendTargets discovery (RFC 7143 appendix C): a discovery session, one Text exchange
 * ("SendTargets=All", continued with the target's TTT while it has more), logout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/ini_int.h"
#include "proto/text.h"

struct disc {
	struct ix_ctx *ctx;
	ix_discovery_cb cb;
	void *arg;
	struct ix_session *s;
	struct ix_discovery result;
	int err;
	char errmsg[256];
};

static void disc_finish(struct disc *d, int err)
{
	struct ix_session *s = d->s;

	if (err && !d->errmsg[0])
		snprintf(d->errmsg, sizeof(d->errmsg), "%s", ix_session_error(s));
	d->cb(d->ctx, err, err ? NULL : &d->result, err ? d->errmsg : "", d->arg);
	free(d->result.targets);
	ix_session_free(s);
	free(d);
}

static void logged_out(struct ix_session *s, int err, void *arg)
{
	struct disc *d = arg;

	(void)s;
	(void)err; /* the answer is in hand; a failed logout does not change it */
	disc_finish(d, d->err);
}

/* Parse "TargetName=... TargetAddress=... ..." into d->result. */
static int parse_targets(struct disc *d, char *text, uint32_t len)
{
	struct text_kv *kv;
	size_t n = 0, max = len / 4 + 1;
	int nt = 0, r;

	kv = calloc(max, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	r = text_parse(text, len, kv, max, &n);
	if (r < 0) {
		free(kv);
		snprintf(d->errmsg, sizeof(d->errmsg), "malformed SendTargets response");
		return -EPROTO;
	}
	for (size_t i = 0; i < n; i++)
		nt += strcmp(kv[i].key, "TargetName") == 0;
	d->result.targets = calloc(nt ? (size_t)nt : 1, sizeof(*d->result.targets));
	if (!d->result.targets) {
		free(kv);
		return -ENOMEM;
	}
	d->result.ntargets = 0;
	for (size_t i = 0; i < n; i++) {
		struct ix_discovered_target *t;

		if (strcmp(kv[i].key, "TargetName") == 0) {
			t = &d->result.targets[d->result.ntargets++];
			snprintf(t->name, sizeof(t->name), "%s", kv[i].value);
		} else if (strcmp(kv[i].key, "TargetAddress") == 0) {
			if (d->result.ntargets == 0) {
				free(kv);
				snprintf(d->errmsg, sizeof(d->errmsg),
					 "TargetAddress before any TargetName");
				return -EPROTO;
			}
			t = &d->result.targets[d->result.ntargets - 1];
			if (t->naddrs < IX_MAX_ADDRS)
				snprintf(t->addrs[t->naddrs++], sizeof(t->addrs[0]), "%s",
					 kv[i].value);
		}
	}
	free(kv);
	return 0;
}

static void got_text(struct ix_session *s, int err, char *text, uint32_t len)
{
	struct disc *d = s->disc;

	if (err == 0)
		err = parse_targets(d, text, len);
	d->err = err;
	if (err == 0 && ix_session_logout(s, logged_out, d) == 0)
		return;
	disc_finish(d, err);
}

static void logged_in(struct ix_session *s, int err, void *arg)
{
	static const char req[] = "SendTargets=All";
	struct disc *d = arg;

	if (err == 0)
		err = ini_send_text(s, req, sizeof(req), got_text);
	if (err)
		disc_finish(d, err);
}

int ix_discover(struct ix_ctx *ctx, const struct ix_session_opts *opts, ix_discovery_cb cb,
		void *arg)
{
	struct ix_session_opts o = *opts;
	struct disc *d;
	int err;

	if (!cb)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	o.target_name = NULL;
	o.queue_depth = 1;
	o.replacement_timeout_ms = 0; /* a lost discovery session is simply an error */
	d->ctx = ctx;
	d->cb = cb;
	d->arg = arg;
	d->s = ini_session_new(ctx, &o, ISCSI_SESSION_DISCOVERY, &err);
	if (!d->s) {
		free(d);
		return err;
	}
	d->s->disc = d;
	err = ix_session_login(d->s, logged_in, d);
	if (err) {
		ix_session_free(d->s);
		free(d);
	}
	return err;
}
