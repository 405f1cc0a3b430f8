/* Management of a gateway in a group (mgmt_group.h; docs/ha.md "The gateway group"). No
 * message here quotes the document's text: it holds CHAP secrets. */
#include "mgmt/mgmt_group.h"
#include "mgmt/mgmt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "event/loop.h"
#include "ha/ha_group.h"
#include "util/log.h"

#define EDIT_TRIES 4 /* writes that lost a race, tried again while the edit still applies */

struct mgmt_group {
	struct ha_group_ref ref;
	struct ha_group *h;
	char *path;            /* the local file */
	json_t *local;         /* its JSON */
	json_t *doc;           /* the document applied last (the last good one) */
	uint64_t ver;          /* the object version read last (applied or not) */
	uint64_t failed_gen;   /* the generation that could not be applied, 0 none */
	char error[1024];      /* why ("" none) */
	char read_error[1024]; /* the last failed read's message, logged once */
	char *status;          /* the status object's text written last (without its time) */
	struct ix_mgmt *m;
	struct ev_loop *loop;
	struct ev_io io;
	struct ev_timer timer;
	bool io_on;
};

/* ---- checks ---- */

static int load_derived(json_t *e, const char *name, struct ix_config **cfg, char *err,
			size_t errlen)
{
	char *text = json_dumps(e, JSON_COMPACT), msg[1024];
	int rc;

	if (!text)
		return -ENOMEM;
	rc = cfg_load_string(text, name, cfg, msg, sizeof(msg));
	free(text);
	if (rc < 0)
		snprintf(err, errlen, "member %s: %s", name, mgmt_strip_position(msg, name));
	return rc;
}

int mgmt_group_validate(json_t *doc, json_t *local, const char *member, char *err,
			size_t errlen)
{
	json_t *m;
	size_t i;
	int rc;

	if ((rc = ha_group_doc_check(doc, err, errlen)))
		return rc;
	if (!ha_group_member_id(doc, member))
		return ha_group_derive(local, doc, member, &m, err, errlen); /* says why */
	json_array_foreach(json_object_get(doc, "members"), i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name"));
		struct ix_config *cfg = NULL;
		json_t *e = NULL;
		char why[1024];

		rc = ha_group_derive(strcmp(name, member) == 0 ? local : NULL, doc, name, &e, why,
				     sizeof(why));
		if (rc) {
			snprintf(err, errlen, "member %s: %s", name, why);
			return rc;
		}
		rc = load_derived(e, name, &cfg, err, errlen);
		json_decref(e);
		cfg_free(cfg);
		if (rc)
			return rc;
	}
	return 0;
}

/* The document of text: parsed and checked, or NULL with err (positions, never text). */
static json_t *parse_doc(const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *d = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);

	if (!d) {
		snprintf(err, errlen, "not valid JSON (line %d, column %d)", je.line, je.column);
		return NULL;
	}
	if (ha_group_doc_check(d, err, errlen)) {
		json_decref(d);
		return NULL;
	}
	return d;
}

int mgmt_group_edit(const struct mgmt_group_io *io, json_t *base, json_t *olde, json_t *newe,
		    json_t *local, const char *member, bool dry_run, json_t **written, char *err,
		    size_t errlen)
{
	char why[1024];
	int rc = -ECANCELED;

	*written = NULL;
	for (int t = 0; t < EDIT_TRIES && rc == -ECANCELED; t++) {
		json_t *fresh, *nd = NULL;
		char *text;
		size_t len;
		uint64_t ver;

		rc = io->read(io->arg, &text, &len, &ver, err, errlen);
		if (rc)
			return rc;
		fresh = parse_doc(text, len, why, sizeof(why));
		free(text);
		if (!fresh) {
			snprintf(err, errlen,
				 "the group document in RADOS is damaged (%s): nothing written", why);
			return -EINVAL;
		}
		if ((rc = ha_group_conflict(base, fresh, olde, newe, err, errlen)) ||
		    (rc = ha_group_lift(fresh, olde, newe, member, &nd, err, errlen)) ||
		    (rc = mgmt_group_validate(nd, local, member, err, errlen))) {
			json_decref(fresh);
			json_decref(nd);
			return rc;
		}
		/* nothing to change in the document: no new generation */
		json_object_set(nd, "generation", json_object_get(fresh, "generation"));
		if (json_equal(nd, fresh)) {
			json_decref(nd);
			*written = fresh;
			return 0;
		}
		json_object_set_new(nd, "generation",
				    json_integer((json_int_t)ha_group_generation(fresh) + 1));
		json_decref(fresh);
		if (dry_run) {
			*written = nd;
			return 0;
		}
		text = json_dumps(nd, JSON_INDENT(2));
		if (!text) {
			json_decref(nd);
			return -ENOMEM;
		}
		rc = io->write(io->arg, text, strlen(text), ver, err, errlen);
		free(text);
		if (rc == 0) {
			*written = nd;
			return 0;
		}
		json_decref(nd);
	}
	return rc;
}

/* ---- the object's I/O ---- */

static int io_read(void *arg, char **text, size_t *len, uint64_t *ver, char *err, size_t errlen)
{
	return ha_group_read(arg, text, len, ver, err, errlen);
}

static int io_write(void *arg, const char *text, size_t len, uint64_t ver, char *err,
		    size_t errlen)
{
	return ha_group_write(arg, text, len, ver, err, errlen);
}

/* ---- status ---- */

static json_t *lun_locks(struct mgmt_group *g)
{
	json_t *out = json_array(), *t, *l;
	size_t i, j;

	if (!g->m || !g->m->tgt)
		return out;
	json_array_foreach(json_object_get(g->m->doc, "targets"), i, t)
	{
		const char *tn = json_string_value(json_object_get(t, "name"));
		json_array_foreach(json_object_get(t, "luns"), j, l)
		{
			json_t *st = tn ? mgmt_lun_status(g->m->tgt, tn, json_object_get(l, "lun"))
					: NULL;
			json_t *lk = json_object_get(st, "lock");

			if (lk)
				json_array_append_new(out, json_pack("{s:s, s:O, s:O}", "target",
								     tn, "lun",
								     json_object_get(l, "lun"),
								     "lock",
								     json_object_get(lk, "state")));
			json_decref(st);
		}
	}
	return out;
}

static void status_put(struct mgmt_group *g)
{
	json_t *s = json_pack("{s:s, s:I, s:s*, s:I, s:b, s:o}", "member", g->ref.member,
			      "generation", (json_int_t)ha_group_generation(g->doc), "error",
			      g->error[0] ? g->error : NULL, "failed_generation",
			      (json_int_t)g->failed_gen, "watching",
			      g->h && ha_group_watching(g->h), "luns", lun_locks(g));
	char *text;
	int rc;

	if (!s || !g->h)
		goto out;
	text = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text || (g->status && strcmp(text, g->status) == 0)) {
		free(text);
		goto out;
	}
	free(g->status);
	g->status = text;
	json_object_set_new(s, "updated", json_integer((json_int_t)time(NULL)));
	json_object_set_new(s, "pid", json_integer((json_int_t)getpid()));
	text = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
	if (text && (rc = ha_group_status_write(g->h, g->ref.member, text)) < 0) {
		log_warn("group", "%s: cannot write this member's status: %s",
			 ha_group_name(g->h), strerror(-rc));
		free(g->status); /* again next time */
		g->status = NULL;
	}
	free(text);
out:
	json_decref(s);
}

/* ---- the last good document, on disk ---- */

/* "<state_dir>/ix-group.<member>.json" when the local file's global has a state_dir. */
static bool cache_path(const struct mgmt_group *g, char *buf, size_t cap)
{
	const char *dir = json_string_value(
		json_object_get(json_object_get(g->local, "global"), "state_dir"));

	return dir && dir[0] &&
	       (size_t)snprintf(buf, cap, "%s/ix-group.%s.json", dir, g->ref.member) < cap;
}

/* Kept where the gateway keeps its state (mode 0600: it holds CHAP secrets), so that a
 * gateway that cannot apply the group's generation when it starts serves this one. */
static void cache_save(struct mgmt_group *g)
{
	char path[4200], err[512];

	if (g->doc && cache_path(g, path, sizeof(path)) &&
	    mgmt_save_doc(g->doc, path, err, sizeof(err)) < 0)
		log_warn("group", "cannot keep the last good document: %s", err);
}

int mgmt_group_fallback(struct mgmt_group *g, const char *why, struct ix_config **cfg,
			json_t **doc, char *err, size_t errlen)
{
	char path[4200], msg[1024];
	json_error_t je;
	json_t *d, *e = NULL;
	uint64_t failed = ha_group_generation(g->doc);
	char *text;
	int rc;

	*cfg = NULL;
	*doc = NULL;
	if (!cache_path(g, path, sizeof(path))) {
		snprintf(err, errlen, "no last good document kept (no global.state_dir)");
		return -ENOENT;
	}
	d = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	text = d ? json_dumps(d, JSON_COMPACT) : NULL;
	json_decref(d);
	d = text ? parse_doc(text, strlen(text), msg, sizeof(msg)) : NULL;
	free(text);
	if (!d) {
		snprintf(err, errlen, "%s: no usable last good document", path);
		return -ENOENT;
	}
	if ((rc = ha_group_derive(g->local, d, g->ref.member, &e, msg, sizeof(msg))) ||
	    (rc = load_derived(e, g->ref.member, cfg, msg, sizeof(msg))) < 0 ||
	    (rc = mgmt_normalize(e)) < 0) {
		snprintf(err, errlen, "%s: %s", path, msg);
		json_decref(d);
		json_decref(e);
		cfg_free(*cfg);
		*cfg = NULL;
		return rc < 0 ? rc : -EINVAL;
	}
	json_decref(g->doc);
	g->doc = d;
	g->failed_gen = failed;
	snprintf(g->error, sizeof(g->error), "at start: %s", why);
	log_err("group",
		"%s: generation %llu not applied at start (%s): serving generation %llu, the last "
		"good one (%s)",
		ha_group_name(g->h), (unsigned long long)failed, why,
		(unsigned long long)ha_group_generation(d), path);
	*doc = e;
	return 0;
}

/* ---- following the document ---- */

static void set_error(struct mgmt_group *g, uint64_t gen, const char *why)
{
	bool again = g->failed_gen == gen && strcmp(g->error, why) == 0;

	g->failed_gen = gen;
	snprintf(g->error, sizeof(g->error), "%s", why);
	if (!again)
		log_err("group",
			"%s: generation %llu not applied, still serving generation %llu: %s",
			ha_group_name(g->h), (unsigned long long)gen,
			(unsigned long long)ha_group_generation(g->doc), why);
}

/* Apply the document d (read at version ver): its derivation for this member through the
 * reload. Takes d. */
static int apply(struct mgmt_group *g, json_t *d, uint64_t ver)
{
	uint64_t gen = ha_group_generation(d);
	json_t *e = NULL, *res = NULL;
	struct merr me = {0};
	char why[1024];

	g->ver = ver;
	if (ha_group_derive(g->local, d, g->ref.member, &e, why, sizeof(why))) {
		set_error(g, gen, why);
		json_decref(d);
		return -EINVAL;
	}
	if (mgmt_normalize(e) < 0 || mgmt_apply_doc(g->m, e, false, false, &res, &me) < 0) {
		set_error(g, gen, me.msg[0] ? me.msg : "out of memory");
		json_decref(me.data);
		json_decref(d);
		return -EINVAL;
	}
	log_info("group", "%s: generation %llu applied (%zu changes)", ha_group_name(g->h),
		 (unsigned long long)gen, json_array_size(json_object_get(res, "changes")));
	json_decref(res);
	json_decref(g->doc);
	g->doc = d;
	g->failed_gen = 0;
	g->error[0] = '\0';
	cache_save(g);
	return 0;
}

/* Read the object; apply it when it changed (force: even when it did not). */
static void refresh(struct mgmt_group *g, bool force)
{
	char why[1024], *text;
	size_t len;
	uint64_t ver;
	json_t *d;
	int rc;

	rc = ha_group_read(g->h, &text, &len, &ver, why, sizeof(why));
	if (rc < 0) {
		if (strcmp(why, g->read_error) != 0)
			log_warn("group", "%s (still serving generation %llu)", why,
				 (unsigned long long)ha_group_generation(g->doc));
		snprintf(g->read_error, sizeof(g->read_error), "%s", why);
		return;
	}
	if (g->read_error[0])
		log_info("group", "%s: readable again", ha_group_name(g->h));
	g->read_error[0] = '\0';
	if (ver == g->ver && !force) {
		free(text);
		return;
	}
	d = parse_doc(text, len, why, sizeof(why));
	free(text);
	if (!d) {
		char msg[1100];

		g->ver = ver;
		snprintf(msg, sizeof(msg), "the document is damaged: %s", why);
		set_error(g, 0, msg); /* its generation unknown */
		return;
	}
	if (!force && ha_group_generation(d) == ha_group_generation(g->doc) &&
	    json_equal(d, g->doc)) {
		g->ver = ver;
		json_decref(d);
		if (g->error[0]) { /* the last good document put back: nothing left failing */
			log_info("group", "%s: generation %llu again, the one served",
				 ha_group_name(g->h),
				 (unsigned long long)ha_group_generation(g->doc));
			g->error[0] = '\0';
			g->failed_gen = 0;
		}
		return;
	}
	apply(g, d, ver);
}

static void watch_again(struct mgmt_group *g)
{
	char why[512];

	if (ha_group_watching(g->h))
		return;
	if (ha_group_watch(g->h, why, sizeof(why)) < 0)
		log_warn("group", "%s (polling every %u ms meanwhile)", why, g->ref.poll_ms);
}

static void on_event(struct ev_io *w, uint32_t revents)
{
	struct mgmt_group *g = w->arg;
	unsigned ev = ha_group_event_drain(g->h);

	(void)revents;
	if (ev & 2) {
		log_warn("group", "%s: watch lost: watching and reading it again",
			 ha_group_name(g->h));
		watch_again(g);
	}
	refresh(g, false);
	status_put(g);
}

static void on_timer(struct ev_timer *t)
{
	struct mgmt_group *g = t->arg;

	watch_again(g);
	refresh(g, false);
	status_put(g);
	ev_timer_start(g->loop, &g->timer, g->ref.poll_ms);
}

/* ---- life ---- */

static json_t *load_local(const char *path, char *err, size_t errlen)
{
	json_error_t je;
	json_t *l = json_load_file(path, JSON_REJECT_DUPLICATES, &je);

	if (!l)
		snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
	return l;
}

int mgmt_group_load(const char *path, json_t *local, struct ix_config **cfg, json_t **doc,
		    struct mgmt_group **out, char *err, size_t errlen)
{
	struct mgmt_group *g = calloc(1, sizeof(*g));
	char why[1024], msg[1024], *text = NULL;
	json_t *d = NULL, *e = NULL;
	size_t len;
	int rc;

	*out = NULL;
	*cfg = NULL;
	*doc = NULL;
	if (!g || !(g->path = strdup(path))) {
		free(g);
		return -ENOMEM;
	}
	g->local = json_incref(local);
	if ((rc = ha_group_ref_parse(local, &g->ref, why, sizeof(why)))) {
		snprintf(err, errlen, "%s: %s", path, why);
		goto fail;
	}
	if ((rc = ha_group_open(&g->ref, &g->h, err, errlen)) < 0)
		goto fail;
	if ((rc = ha_group_read(g->h, &text, &len, &g->ver, err, errlen)) < 0)
		goto fail;
	d = parse_doc(text, len, why, sizeof(why));
	free(text);
	if (!d) {
		snprintf(err, errlen, "group %s: %s", ha_group_name(g->h), why);
		rc = -EINVAL;
		goto failst;
	}
	if ((rc = ha_group_derive(local, d, g->ref.member, &e, why, sizeof(why)))) {
		snprintf(err, errlen, "group %s: %s", ha_group_name(g->h), why);
		goto failst;
	}
	if ((rc = load_derived(e, g->ref.member, cfg, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "group %s, generation %llu: %s", ha_group_name(g->h),
			 (unsigned long long)ha_group_generation(d), why);
		goto failst;
	}
	g->doc = d;
	*doc = e;
	*out = g;
	log_info("group", "%s: member %s, generation %llu", ha_group_name(g->h), g->ref.member,
		 (unsigned long long)ha_group_generation(d));
	return 0;
failst:
	/* no status written: this may be `ix-target --check` beside a gateway that serves */
	json_decref(g->doc);
	g->doc = d; /* the generation that failed */
	d = NULL;
	snprintf(why, sizeof(why), "%s", err);
	if (mgmt_group_fallback(g, why, cfg, doc, msg, sizeof(msg)) == 0) {
		json_decref(e);
		*out = g;
		return 0;
	}
	snprintf(err, errlen, "%s (and %s)", why, msg);
fail:
	json_decref(d);
	json_decref(e);
	mgmt_group_free(g);
	return rc < 0 ? rc : -EINVAL;
}

int ix_mgmt_load_any(const char *path, struct ix_config **cfg, json_t **doc,
		     struct mgmt_group **grp, char *err, size_t errlen)
{
	struct ha_group_ref ref;
	json_t *local;
	int rc;

	*grp = NULL;
	if (!path)
		return ix_mgmt_load(path, cfg, doc, err, errlen);
	local = load_local(path, err, errlen);
	if (!local || ha_group_ref_parse(local, &ref, err, errlen) == -ENOENT) {
		json_decref(local);
		return ix_mgmt_load(path, cfg, doc, err, errlen);
	}
	rc = mgmt_group_load(path, local, cfg, doc, grp, err, errlen);
	json_decref(local);
	return rc;
}

int mgmt_group_start(struct mgmt_group *g, struct ix_mgmt *m, struct ev_loop *loop)
{
	g->m = m;
	g->loop = loop;
	if (!loop)
		return 0;
	watch_again(g);
	ev_io_init(&g->io, ha_group_event_fd(g->h), on_event, g);
	if (ev_io_start(loop, &g->io, EPOLLIN) == 0)
		g->io_on = true;
	ev_timer_init(&g->timer, on_timer, g);
	ev_timer_start(loop, &g->timer, g->ref.poll_ms);
	if (!g->error[0])
		cache_save(g);
	status_put(g);
	return 0;
}

void mgmt_group_free(struct mgmt_group *g)
{
	if (!g)
		return;
	if (g->loop) {
		if (g->io_on)
			ev_io_stop(g->loop, &g->io);
		ev_timer_stop(g->loop, &g->timer);
	}
	ha_group_close(g->h);
	json_decref(g->local);
	json_decref(g->doc);
	free(g->status);
	free(g->path);
	free(g);
}

int mgmt_group_reload(struct mgmt_group *g, char *err, size_t errlen)
{
	struct ha_group_ref ref;
	json_t *l = load_local(g->path, err, errlen);
	char why[1024];

	if (!l)
		return -EINVAL;
	if (ha_group_ref_parse(l, &ref, why, sizeof(why)) ||
	    strcmp(ref.member, g->ref.member) || strcmp(ref.pool, g->ref.pool) ||
	    strcmp(ref.ns, g->ref.ns) || strcmp(ref.object, g->ref.object)) {
		json_decref(l);
		snprintf(err, errlen,
			 "%s: the group (pool, namespace, object, member) changes with a restart "
			 "only",
			 g->path);
		return -EINVAL;
	}
	json_decref(g->local);
	g->local = l;
	g->ref.poll_ms = ref.poll_ms;
	g->error[0] = '\0';
	refresh(g, true); /* read and apply again, whatever the version */
	status_put(g);
	if (g->error[0]) {
		snprintf(err, errlen, "%s", g->error);
		return -EINVAL;
	}
	return 0;
}

/* ---- edits through this gateway ---- */

int mgmt_group_commit(struct call *c, json_t *newdoc, bool dry_run)
{
	struct mgmt_group *g = c->m->group;
	struct mgmt_group_io io = {io_read, io_write, g->h};
	json_t *written = NULL, *res = NULL, *e = NULL;
	char err[1024];
	uint64_t ver;
	size_t len;
	char *text;
	int rc;

	/* this gateway's own checks first (restart-only settings, test features) */
	if (mgmt_apply_doc(c->m, json_incref(newdoc), true, true, &res, c->e) < 0) {
		json_decref(newdoc);
		return -1;
	}
	json_decref(res);
	res = NULL;
	rc = mgmt_group_edit(&io, g->doc, c->m->doc, newdoc, g->local, g->ref.member, dry_run,
			     &written, err, sizeof(err));
	json_decref(newdoc);
	if (rc) {
		json_decref(written);
		return mgmt_err_set(c->e,
				    rc == -ECANCELED  ? MGMT_ERR_CONFLICT
				    : rc == -EINVAL || rc == -EPERM || rc == -EEXIST
					    ? MGMT_ERR_INVALID_CONFIG
					    : MGMT_ERR_IO,
				    "%s", err);
	}
	if (ha_group_derive(g->local, written, g->ref.member, &e, err, sizeof(err)) ||
	    mgmt_normalize(e) < 0) {
		json_decref(written);
		json_decref(e);
		return mgmt_err_set(c->e, MGMT_ERR_APPLY, "%s", err);
	}
	if (dry_run) {
		json_decref(written);
		rc = mgmt_apply_doc(c->m, e, true, true, &c->result, c->e);
		return rc;
	}
	/* written: this gateway applies it now, the others when the notify reaches them */
	if (ha_group_read(g->h, &text, &len, &ver, err, sizeof(err)) == 0) {
		json_t *d = parse_doc(text, len, err, sizeof(err));
		if (d && json_equal(d, written))
			g->ver = ver;
		json_decref(d);
		free(text);
	}
	json_decref(g->doc);
	g->doc = written;
	rc = mgmt_apply_doc(c->m, e, false, true, &c->result, c->e);
	if (rc < 0) {
		set_error(g, ha_group_generation(written), c->e->msg);
		snprintf(err, sizeof(err), "%s", c->e->msg);
		mgmt_err_set(c->e, MGMT_ERR_APPLY,
			     "written to the group as generation %llu, but this gateway could not "
			     "apply it: %s",
			     (unsigned long long)ha_group_generation(written), err);
	} else {
		g->failed_gen = 0;
		g->error[0] = '\0';
		cache_save(g);
		if (c->result)
			json_object_set_new(c->result, "generation",
				    json_integer((json_int_t)ha_group_generation(written)));
	}
	ha_group_notify(g->h);
	status_put(g);
	return rc;
}

/* ---- group methods ---- */

static json_t *member_status(struct mgmt_group *g, const char *name)
{
	char *text = NULL;
	json_t *s;
	int rc = ha_group_status_read(g->h, name, &text);

	if (rc < 0)
		return json_pack("{s:s}", "health",
				 rc == -ENOENT ? "unknown (no status written yet)" : strerror(-rc));
	s = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(s)) {
		json_decref(s);
		return json_pack("{s:s}", "health", "unknown (status unreadable)");
	}
	return s;
}

int mgmt_m_group_status(struct call *c)
{
	struct mgmt_group *g = c->m->group;
	json_t *members, *m, *d;
	char err[1024], *text;
	uint64_t ver;
	size_t i, len;

	if (!g)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND,
				    "this gateway is not in a group (no \"group\" in its local "
				    "file)");
	if (ha_group_read(g->h, &text, &len, &ver, err, sizeof(err)) < 0)
		return mgmt_err_set(c->e, MGMT_ERR_IO, "%s", err);
	d = parse_doc(text, len, err, sizeof(err));
	free(text);
	members = json_array();
	json_array_foreach(d ? json_object_get(d, "members") : json_object_get(g->doc, "members"),
			   i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name"));
		json_t *s = member_status(g, name), *gen = json_object_get(s, "generation");
		const char *health;

		if (json_is_string(json_object_get(s, "error")))
			health = "error";
		else if (!gen)
			health = NULL;
		else if (d && json_integer_value(gen) == (json_int_t)ha_group_generation(d))
			health = "ok";
		else
			health = "behind";
		if (health)
			json_object_set_new(s, "health", json_string(health));
		json_object_set_new(s, "name", json_string(name));
		json_object_set(s, "id", json_object_get(m, "id"));
		json_array_append_new(members, s);
	}
	c->result = json_pack("{s:s, s:s, s:I, s:s*, s:o}", "object", ha_group_name(g->h),
			      "member", g->ref.member, "generation",
			      (json_int_t)ha_group_generation(d ? d : g->doc), "document_error",
			      d ? NULL : err, "members", members);
	json_decref(d);
	return 0;
}

/* The membership change in the document d: name added (with portals, id idv or the highest
 * + 1) or removed (from the targets' lists too). -1 with c->e set. */
static int member_change(struct call *c, json_t *d, const char *name, bool add, json_t *portals,
			 json_t *idv)
{
	json_t *ms = json_object_get(d, "members"), *m, *t;
	json_int_t id = 0;
	long found = -1;
	size_t i;

	if (add) {
		if (ha_group_member_id(d, name))
			return mgmt_err_set(c->e, MGMT_ERR_EXISTS, "member %s is in the group already",
					    name);
		if (json_is_integer(idv))
			id = json_integer_value(idv);
		else
			json_array_foreach(ms, i, m)
				if (json_integer_value(json_object_get(m, "id")) >= id)
					id = json_integer_value(json_object_get(m, "id")) + 1;
		return json_array_append_new(ms, json_pack("{s:s, s:I, s:O}", "name", name, "id",
							   id, "portals", portals)) < 0
			       ? mgmt_err_set(c->e, -32603, "out of memory")
			       : 0;
	}
	json_array_foreach(ms, i, m)
		if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
			found = (long)i;
	if (found < 0)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "no member named %s", name);
	json_array_remove(ms, (size_t)found);
	/* and from the targets' lists (a list left empty: the target goes to nobody, refused
	   by the checks) */
	json_array_foreach(json_object_get(d, "targets"), i, t)
	{
		json_t *tm = json_object_get(t, "members"), *v;
		size_t j;
		json_array_foreach(tm, j, v)
			if (strcmp(json_string_value(v), name) == 0) {
				json_array_remove(tm, j);
				break;
			}
	}
	return 0;
}

/* Add or remove a member: an edit of the document itself (not of this gateway's targets). */
static int member_edit(struct call *c, bool add)
{
	static const char *const add_keys[] = {"name", "id", "portals", "dry_run", NULL};
	static const char *const rm_keys[] = {"name", "dry_run", NULL};
	struct mgmt_group *g = c->m->group;
	const char *name;
	json_t *portals = json_object_get(c->params, "portals"), *idv = json_object_get(c->params, "id");
	bool dry_run;
	char err[1024];
	int rc = -ECANCELED;

	if (!g)
		return mgmt_err_set(c->e, MGMT_ERR_NOT_FOUND, "this gateway is not in a group");
	if (mgmt_p_keys(c, add ? add_keys : rm_keys) < 0 || mgmt_p_str(c, "name", true, &name) < 0 ||
	    mgmt_p_bool(c, "dry_run", &dry_run) < 0)
		return -1;
	if (add && (!json_is_array(portals) || json_array_size(portals) == 0))
		return mgmt_err_set(c->e, -32602, "params.portals: required, an array of portals");
	if (!add && strcmp(name, g->ref.member) == 0)
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG,
				    "%s is this gateway: remove it through another member", name);
	for (int try = 0; try < EDIT_TRIES && rc == -ECANCELED; try++) {
		json_t *d;
		char *text;
		size_t len;
		uint64_t ver;

		if (ha_group_read(g->h, &text, &len, &ver, err, sizeof(err)) < 0)
			return mgmt_err_set(c->e, MGMT_ERR_IO, "%s", err);
		d = parse_doc(text, len, err, sizeof(err));
		free(text);
		if (!d)
			return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG,
					    "the group document is damaged: %s", err);
		if (member_change(c, d, name, add, portals, idv) < 0) {
			json_decref(d);
			return -1;
		}
		json_object_set_new(d, "generation",
				    json_integer((json_int_t)ha_group_generation(d) + 1));
		if ((rc = mgmt_group_validate(d, g->local, g->ref.member, err, sizeof(err)))) {
			json_decref(d);
			return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG, "%s", err);
		}
		if (dry_run) {
			c->result = json_pack("{s:b, s:I}", "changed", 1, "generation",
					      (json_int_t)ha_group_generation(d));
			json_decref(d);
			return 0;
		}
		text = json_dumps(d, JSON_INDENT(2));
		rc = text ? ha_group_write(g->h, text, strlen(text), ver, err, sizeof(err))
			  : -ENOMEM;
		free(text);
		if (rc == 0) {
			c->result = json_pack("{s:b, s:I}", "changed", 1, "generation",
					      (json_int_t)ha_group_generation(d));
			json_decref(d);
			ha_group_notify(g->h);
			refresh(g, false);
			status_put(g);
			return 0;
		}
		json_decref(d);
	}
	return mgmt_err_set(c->e, rc == -ECANCELED ? MGMT_ERR_CONFLICT : MGMT_ERR_IO, "%s", err);
}

int mgmt_m_group_member_add(struct call *c)
{
	return member_edit(c, true);
}

int mgmt_m_group_member_remove(struct call *c)
{
	return member_edit(c, false);
}

/* ---- a first document from this gateway's configuration ---- */

static int ref_param(struct call *c, json_t *p, struct ha_group_ref *ref, char *err, size_t errlen)
{
	json_t *l = json_pack("{s:O}", "group", p);
	int rc;

	if (!l)
		return -ENOMEM;
	rc = ha_group_ref_parse(l, ref, err, errlen);
	json_decref(l);
	(void)c;
	return rc;
}

/* The document a gateway's running configuration makes, as member 1 of a new group. */
static json_t *first_doc(json_t *cur, const char *member, char *err, size_t errlen)
{
	json_t *d = NULL, *ps = json_array(), *ts = json_array(), *g = json_object(), *p, *t, *v;
	const char *k;
	size_t i;

	if (!ps || !ts || !g)
		goto oom;
	json_array_foreach(json_object_get(cur, "portals"), i, p)
	{
		json_t *np = json_pack("{s:O}", "address", json_object_get(p, "address"));
		if (!np || json_array_append_new(ps, np) < 0)
			goto oom;
		if ((v = json_object_get(p, "port")))
			json_object_set(np, "port", v);
		if ((v = json_object_get(p, "transports")))
			json_object_set(np, "transports", v);
	}
	json_object_foreach(json_object_get(cur, "global"), k, v)
		if (!ha_group_global_local(k) && json_object_set(g, k, v) < 0)
			goto oom;
	json_array_foreach(json_object_get(cur, "targets"), i, t)
	{
		json_t *nt = json_deep_copy(t), *a;
		if (!nt || json_array_append_new(ts, nt) < 0)
			goto oom;
		if (json_object_get(nt, "portals") || json_object_get(nt, "redirect")) {
			snprintf(err, errlen,
				 "targets[%zu]: its portals or redirect are per gateway: remove them "
				 "first (a group's target is on every portal of its members)",
				 i);
			goto fail;
		}
		a = json_object_get(nt, "alua");
		if (json_is_object(a)) {
			json_object_del(a, "groups");
			if (json_object_size(a) == 0)
				json_object_del(nt, "alua");
		}
	}
	d = json_pack("{s:s, s:i, s:i, s:O, s:[{s:s, s:i, s:O}], s:O}", "kind", HA_GROUP_KIND,
		      "version", 1, "generation", 1, "global", g, "members", "name", member, "id",
		      1, "portals", ps, "targets", ts);
	if (!d)
		goto oom;
	json_decref(ps);
	json_decref(ts);
	json_decref(g);
	return d;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	json_decref(ps);
	json_decref(ts);
	json_decref(g);
	return NULL;
}

int mgmt_m_group_init(struct call *c)
{
	static const char *const keys[] = {"group", "dry_run", NULL};
	struct ha_group_ref ref;
	struct ha_group *h = NULL;
	json_t *p = NULL, *d;
	char err[1024], *text;
	bool dry_run;
	int rc;

	if (mgmt_p_keys(c, keys) < 0 || mgmt_p_obj(c, "group", &p) < 0 ||
	    mgmt_p_bool(c, "dry_run", &dry_run) < 0)
		return -1;
	if (c->m->group)
		return mgmt_err_set(c->e, MGMT_ERR_EXISTS,
				    "this gateway is in a group already: its document is %s",
				    ha_group_name(c->m->group->h));
	if (ref_param(c, p, &ref, err, sizeof(err)))
		return mgmt_err_set(c->e, -32602, "params.%s", err);
	if (!(d = first_doc(c->m->doc, ref.member, err, sizeof(err))))
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG, "%s", err);
	if ((rc = mgmt_group_validate(d, NULL, ref.member, err, sizeof(err)))) {
		json_decref(d);
		return mgmt_err_set(c->e, MGMT_ERR_INVALID_CONFIG, "%s", err);
	}
	if (dry_run) {
		c->result = json_pack("{s:b, s:i, s:I}", "changed", 1, "generation", 1, "targets",
				      (json_int_t)json_array_size(json_object_get(d, "targets")));
		json_decref(d);
		return 0;
	}
	if (c->m->no_save) { /* fuzzing: no cluster either */
		json_decref(d);
		return mgmt_err_set(c->e, MGMT_ERR_IO, "writing is disabled");
	}
	text = json_dumps(d, JSON_INDENT(2));
	rc = text ? ha_group_open(&ref, &h, err, sizeof(err)) : -ENOMEM;
	if (rc == 0)
		rc = ha_group_write(h, text, strlen(text), 0, err, sizeof(err));
	if (rc == -ECANCELED)
		snprintf(err, sizeof(err), "group %s exists already: not overwritten",
			 ha_group_name(h));
	free(text);
	ha_group_close(h);
	if (rc == 0)
		c->result = json_pack("{s:b, s:i, s:I}", "changed", 1, "generation", 1, "targets",
				      (json_int_t)json_array_size(json_object_get(d, "targets")));
	json_decref(d);
	if (rc)
		return mgmt_err_set(c->e, rc == -ECANCELED ? MGMT_ERR_EXISTS : MGMT_ERR_IO, "%s",
				    err);
	return 0;
}
