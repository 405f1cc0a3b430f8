/* Initiator session options: defaults, checks and the login preferences they give (names and
 * portal, transport, limits and timers, identity), the per-session error string, and the SCSI
 * command descriptor's initialiser. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "initiator/ini_int.h"
#include "util/log.h"

/* ---------------------------------------------------------------- options */

void ix_session_opts_default(struct ix_session_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->transport = dm_transport(DM_ID_DEFAULT)->name;
	o->max_recv_data_segment_length = 262144;
	o->first_burst_length = 262144;
	o->max_burst_length = 1048576;
	o->immediate_data = true;
	o->initial_r2t = false;
	o->queue_depth = 128;
	o->login_timeout_ms = 5000;
	o->login_retries = 2;
	o->retry_delay_ms = 200;
	o->retry_delay_max_ms = 2000;
	o->replacement_timeout_ms = 15000;
	o->noop_interval_ms = 5000;
	o->noop_timeout_ms = 5000;
}

void ix_scsi_cmd_init(struct ix_scsi_cmd *cmd, uint32_t lun, const uint8_t *cdb, uint8_t cdb_len,
		      enum ix_dir dir, void *buf, uint32_t len, ix_cmd_cb done, void *arg)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->lun = lun;
	if (cdb_len > sizeof(cmd->cdb))
		cdb_len = 0; /* ix_scsi_submit refuses it */
	memcpy(cmd->cdb, cdb, cdb_len);
	cmd->cdb_len = cdb_len;
	cmd->attr = ISCSI_ATTR_SIMPLE;
	cmd->dir = dir;
	cmd->buf = buf;
	cmd->len = len;
	cmd->done = done;
	cmd->arg = arg;
}

void ini_set_error(struct ix_session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
}

const char *ix_session_error(const struct ix_session *s)
{
	return s->error;
}

static int copy_str(char *dst, size_t cap, const char *src, const char **field)
{
	if (!src) {
		*field = NULL;
		return 0;
	}
	if (strlen(src) >= cap)
		return -EINVAL;
	memcpy(dst, src, strlen(src) + 1);
	*field = dst;
	return 0;
}

enum neg_digest_pref ini_digest_pref(enum ix_digest d)
{
	switch (d) {
	case IX_DIGEST_PREFER_NONE: return NEG_DIGEST_PREFER_NONE;
	case IX_DIGEST_PREFER_CRC32C: return NEG_DIGEST_PREFER_CRC;
	case IX_DIGEST_CRC32C: return NEG_DIGEST_CRC_ONLY;
	default: return NEG_DIGEST_NONE_ONLY;
	}
}

/* Copy the caller's strings into the session and check the names and the portal. */
static int setup_names(struct ix_session *s, const struct ix_session_opts *in)
{
	struct ix_session_opts *o = &s->opts;
	struct ini_names *n = &s->names;
	const struct ix_chap *c = &in->chap;
	int r = 0;

	*o = *in;
	r |= copy_str(n->initiator, sizeof(n->initiator), in->initiator_name, &o->initiator_name);
	r |= copy_str(n->alias, sizeof(n->alias), in->initiator_alias, &o->initiator_alias);
	r |= copy_str(n->target, sizeof(n->target), in->target_name, &o->target_name);
	r |= copy_str(n->portal, sizeof(n->portal), in->portal, &o->portal);
	r |= copy_str(n->chap_user, sizeof(n->chap_user), c->user, &o->chap.user);
	r |= copy_str(n->chap_secret, sizeof(n->chap_secret), c->secret, &o->chap.secret);
	r |= copy_str(n->mutual_user, sizeof(n->mutual_user), c->mutual_user, &o->chap.mutual_user);
	r |= copy_str(n->mutual_secret, sizeof(n->mutual_secret), c->mutual_secret,
		      &o->chap.mutual_secret);
	if (r) {
		ini_set_error(s, "a name or secret is too long");
		return -EINVAL;
	}
	if (!o->initiator_name || !*o->initiator_name) {
		ini_set_error(s, "no initiator name");
		return -EINVAL;
	}
	if (s->type == ISCSI_SESSION_NORMAL && (!o->target_name || !*o->target_name)) {
		ini_set_error(s, "no target name");
		return -EINVAL;
	}
	if (!o->portal || addr_parse_portal(o->portal, INI_DEF_PORT, s->host, sizeof(s->host),
					    &s->port, NULL) < 0) {
		ini_set_error(s, "bad portal \"%s\" (host, host:port or [v6]:port)",
			      o->portal ? o->portal : "");
		return -EINVAL;
	}
	return 0;
}

/* The transports an attempt tries, in order, from opts.transport: a registered transport's
 * name (dm/dm.h), or "auto": every transport, those with direct placement (iSER) first, then
 * the others (TCP), each group in registry order. */
static int setup_transports(struct ix_session *s)
{
	static const char auto_name[] = "auto";
	struct ix_session_opts *o = &s->opts;
	const struct dm_ops *dm;
	char names[128];

	if (!o->transport)
		o->transport = dm_transport(DM_ID_DEFAULT)->name;
	if (strcmp(o->transport, auto_name) == 0) {
		o->transport = auto_name; /* the caller's string need not outlive us */
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; (dm = dm_transport(i)); i++)
				if (((dm->caps & DM_CAP_DIRECT_PLACEMENT) != 0) == (pass == 0))
					s->xports[s->nxports++] = dm;
		return 0;
	}
	if ((dm = dm_find(o->transport))) {
		o->transport = dm->name;
		s->xports[s->nxports++] = dm;
		return 0;
	}
	ini_set_error(s, "unknown transport \"%s\" (%s or %s)", o->transport,
		      dm_names("", ", ", names, sizeof(names)), auto_name);
	return -EPROTONOSUPPORT;
}

/* Queue depth, lengths and timers: checked, defaults filled in, and the login's preferences. */
static int setup_limits(struct ix_session *s)
{
	struct ix_session_opts *o = &s->opts;

	if (o->queue_depth == 0 || o->queue_depth > INI_MAX_QUEUE_DEPTH) {
		ini_set_error(s, "queue_depth must be 1..%u", INI_MAX_QUEUE_DEPTH);
		return -EINVAL;
	}
	if (o->max_recv_data_segment_length < 512 ||
	    o->max_recv_data_segment_length > ISCSI_MAX_DSL || o->first_burst_length < 512 ||
	    o->max_burst_length < 512 || o->first_burst_length > o->max_burst_length) {
		ini_set_error(s, "data segment / burst lengths out of range");
		return -EINVAL;
	}
	if (o->login_timeout_ms == 0) {
		ini_set_error(s, "login_timeout_ms must be > 0");
		return -EINVAL;
	}
	if (o->retry_delay_ms == 0)
		o->retry_delay_ms = 1;
	if (o->retry_delay_max_ms < o->retry_delay_ms)
		o->retry_delay_max_ms = o->retry_delay_ms;
	if (o->noop_interval_ms && !o->noop_timeout_ms)
		o->noop_timeout_ms = o->noop_interval_ms;

	neg_prefs_default(&s->prefs);
	s->prefs.offer_all = true;
	s->prefs.max_recv_dsl = o->max_recv_data_segment_length;
	s->prefs.sess.first_burst_length = o->first_burst_length;
	s->prefs.sess.max_burst_length = o->max_burst_length;
	s->prefs.sess.immediate_data = o->immediate_data;
	s->prefs.sess.initial_r2t = o->initial_r2t;
	s->prefs.header_digest = ini_digest_pref(o->header_digest);
	s->prefs.data_digest = ini_digest_pref(o->data_digest);
	return 0;
}

/* CHAP credentials and the ISID (random when the caller gives none). */
static int setup_identity(struct ix_session *s)
{
	struct ix_session_opts *o = &s->opts;

	memset(&s->creds, 0, sizeof(s->creds));
	if (o->chap.user && o->chap.secret) {
		s->creds.user = o->chap.user;
		s->creds.secret = (const uint8_t *)o->chap.secret;
		s->creds.secret_len = strlen(o->chap.secret);
		if (o->chap.mutual_user && o->chap.mutual_secret) {
			s->creds.mutual_user = o->chap.mutual_user;
			s->creds.mutual_secret = (const uint8_t *)o->chap.mutual_secret;
			s->creds.mutual_secret_len = strlen(o->chap.mutual_secret);
		}
		if (o->chap.nalgs < 0 || o->chap.nalgs > 4) {
			ini_set_error(s, "chap.nalgs must be 0..4");
			return -EINVAL;
		}
		memcpy(s->creds.algs, o->chap.algs, sizeof(s->creds.algs));
		s->creds.nalgs = o->chap.nalgs;
	} else if (o->chap.mutual_user || o->chap.required) {
		ini_set_error(s, "CHAP needs chap.user and chap.secret");
		return -EINVAL;
	}
	s->creds.required = o->chap.required;
	memcpy(s->isid, o->isid, 6);
	if (!memcmp(s->isid, "\0\0\0\0\0\0", 6)) {
		/* RFC 7143 10.12.5: type 10b "Random", 22-bit random qualifier, 16-bit qualifier */
		if (getrandom(s->isid + 1, 5, 0) != 5) {
			ini_set_error(s, "no random bytes for the ISID");
			return -EIO;
		}
		s->isid[0] = 0x80;
		s->isid[1] &= 0x3f;
	}
	return 0;
}

int ini_setup_opts(struct ix_session *s, const struct ix_session_opts *in)
{
	int r;

	if ((r = setup_names(s, in)) < 0 || (r = setup_transports(s)) < 0 ||
	    (r = setup_limits(s)) < 0 || (r = setup_identity(s)) < 0)
		return r;
	return 0;
}
