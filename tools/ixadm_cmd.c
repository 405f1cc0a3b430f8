/* -m discovery, -m node and -m session: the node database, logins (each one a session daemon,
 * ixadm_daemon.c), logouts, and session listings printed the way iscsiadm prints them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ix/sync.h"
#include "ixadm.h"

static bool has_op(const struct ax_opts *o, const char *op)
{
	for (int i = 0; i < o->nops; i++)
		if (strcmp(o->ops[i], op) == 0)
			return true;
	return false;
}

static const char *iface_name(const char *transport)
{
	return strcmp(transport, "iser") == 0 ? "iser" : "default";
}

/* "[iface: default, target: IQN, portal: HOST,PORT]" */
static void rec_tag(const struct node_rec *r, char *buf, size_t len)
{
	snprintf(buf, len, "[iface: %s, target: %s, portal: %s,%u]", iface_name(r->transport),
		 r->name, r->address, r->port);
}

/* ---------------------------------------------------------------- discovery */

static int discovery_chap(const struct ax_opts *o, struct ix_chap *c)
{
	const char *method = "None";

	memset(c, 0, sizeof(*c));
	for (int i = 0; i < o->nnames; i++) {
		const char *k = o->names[i], *v = o->values[i];
		if (strcmp(k, "discovery.sendtargets.auth.authmethod") == 0)
			method = v;
		else if (strcmp(k, "discovery.sendtargets.auth.username") == 0)
			c->user = v;
		else if (strcmp(k, "discovery.sendtargets.auth.password") == 0)
			c->secret = v;
		else if (strcmp(k, "discovery.sendtargets.auth.username_in") == 0)
			c->mutual_user = v;
		else if (strcmp(k, "discovery.sendtargets.auth.password_in") == 0)
			c->mutual_secret = v;
		else {
			ax_err("unknown discovery setting \"%s\" (discovery.sendtargets.auth.* only)",
			       k);
			return -EINVAL;
		}
	}
	if (strcasecmp(method, "CHAP") != 0) {
		memset(c, 0, sizeof(*c));
		return 0;
	}
	if (!c->user || !c->secret) {
		ax_err("discovery CHAP needs discovery.sendtargets.auth.username and .password");
		return -EINVAL;
	}
	c->required = true;
	return 0;
}

int ax_discover(struct ax_opts *o, struct ix_discovery **out, char *err, size_t errlen)
{
	struct ix_session_opts so;
	char initiator[AX_NAME_MAX], portal[AX_HOST_MAX + 16];
	struct ix_ctx *ctx;
	int r;

	*out = NULL;
	r = ax_initiator_name(o->db, true, initiator, sizeof(initiator));
	if (r < 0) {
		snprintf(err, errlen, "no initiator name (%s/initiatorname.iscsi): %s", o->db,
			 strerror(-r));
		return AX_ERR_IDBM;
	}
	if (o->isns) {
		char server[AX_HOST_MAX + 16];
		ax_portal_str(&o->portal, server, sizeof(server));
		r = ix_sync_discover_isns(server, initiator, AX_ISNS_TIMEOUT_MS, out, err, errlen);
		return r ? ax_errno_exit(r) : AX_OK;
	}
	ix_session_opts_default(&so);
	so.initiator_name = initiator;
	ax_portal_str(&o->portal, portal, sizeof(portal));
	so.portal = portal;
	/* the discovery session itself runs over the chosen transport (iscsiadm -I iser does
	   the same: a target must serve SendTargets on its iSER portal) */
	so.transport = o->iface ? o->iface : "tcp";
	if (discovery_chap(o, &so.chap) < 0)
		return AX_ERR_INVAL;
	ctx = ix_ctx_new();
	if (!ctx)
		return AX_ERR_NOMEM;
	r = ix_sync_discover(ctx, &so, out, err, errlen);
	ix_ctx_free(ctx);
	return r ? ax_errno_exit(r) : AX_OK;
}

/* The records a SendTargets (or iSNS) answer describes (invalid names and addresses are reported and
 * skipped: they come from the wire). */
static int disc_records(const struct ax_opts *o, const struct ix_discovery *d,
			struct node_list *out)
{
	struct node_rec r;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < d->ntargets; i++) {
		const struct ix_discovered_target *t = &d->targets[i];
		int naddr = t->naddrs ? t->naddrs : 1;

		if (!ax_iscsi_name_ok(t->name)) {
			ax_err("discovery: skipping a target with an invalid name");
			continue;
		}
		for (int a = 0; a < naddr; a++) {
			struct ax_portal p = o->portal;
			if (t->naddrs && ax_portal_parse(t->addrs[a], &p) < 0) {
				ax_err("discovery: %s: skipping invalid TargetAddress", t->name);
				continue;
			}
			node_defaults(&r);
			snprintf(r.name, sizeof(r.name), "%s", t->name);
			snprintf(r.address, sizeof(r.address), "%s", p.host);
			r.port = p.port;
			r.tpgt = t->naddrs ? p.tpgt : -1;
			snprintf(r.disc_address, sizeof(r.disc_address), "%s", o->portal.host);
			r.disc_port = o->portal.port;
			snprintf(r.disc_type, sizeof(r.disc_type), "%s",
				 o->isns ? "isns" : "send_targets");
			if (o->iface)
				snprintf(r.transport, sizeof(r.transport), "%s", o->iface);
			if ((size_t)out->n == cap) {
				cap = cap ? cap * 2 : 8;
				struct node_rec *nr = realloc(out->recs, cap * sizeof(*nr));
				if (!nr)
					return -ENOMEM;
				out->recs = nr;
			}
			out->recs[out->n++] = r;
		}
	}
	return 0;
}

static const struct node_rec *find_rec(const struct node_list *l, const struct node_rec *r)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->recs[i].name, r->name) == 0 &&
		    strcmp(l->recs[i].address, r->address) == 0 && l->recs[i].port == r->port)
			return &l->recs[i];
	return NULL;
}

static int store_discovered(const struct ax_opts *o, struct node_list *found)
{
	bool any = o->nops == 0, op_new = any || has_op(o, "new"), op_old = any || has_op(o, "old");
	struct node_list have;
	char err[512];
	int rc = AX_OK;

	if (node_list_load(o->db, &have) < 0) {
		ax_err("cannot read the node database %s", o->db);
		return AX_ERR_IDBM;
	}
	for (int i = 0; i < found->n; i++) {
		struct node_rec *f = &found->recs[i];
		const struct node_rec *old = find_rec(&have, f);
		struct node_rec w;

		if (old) {
			/* keep the admin's settings; the record may only have moved TPGT */
			w = *old;
			w.tpgt = f->tpgt;
			*f = w;
			if (!op_old || old->tpgt == f->tpgt)
				continue;
		} else if (!op_new) {
			continue;
		} else {
			w = *f;
		}
		if (node_save(o->db, &w, err, sizeof(err)) < 0) {
			ax_err("%s", err);
			rc = AX_ERR_IDBM;
		}
	}
	if (has_op(o, "delete")) {
		for (int i = 0; i < have.n; i++) {
			const struct node_rec *h = &have.recs[i];
			if (strcmp(h->disc_address, o->portal.host) == 0 &&
			    h->disc_port == o->portal.port && !find_rec(found, h)) {
				char line[512];
				node_line(h, line, sizeof(line));
				if (node_delete(o->db, h) == 0)
					printf("Deleted stale record %s\n", line);
			}
		}
	}
	node_list_free(&have);
	return rc;
}

int ax_mode_discovery(struct ax_opts *o)
{
	struct ix_discovery *d = NULL;
	struct node_list found;
	char err[512];
	int rc, n;

	if (!o->type) {
		ax_err("-t sendtargets (st) or -t isns is required");
		return AX_ERR_INVAL;
	}
	o->isns = strcmp(o->type, "isns") == 0;
	if (!o->isns && strcmp(o->type, "st") && strcmp(o->type, "sendtargets")) {
		ax_err("discovery type \"%s\" is not supported (sendtargets or isns)", o->type);
		return AX_ERR_OP_NOT_SUPP;
	}
	if (!o->have_portal) {
		ax_err(o->isns ? "-p SERVER[:PORT] (the iSNS server) is required" :
				 "-p IP[:PORT] is required");
		return AX_ERR_INVAL;
	}
	if (o->isns && !o->portal.port_given)
		o->portal.port = AX_ISNS_PORT;
	if (o->isns && o->nnames) {
		ax_err("discovery settings (-n) apply to sendtargets only");
		return AX_ERR_INVAL;
	}
	if (o->iface && strcmp(o->iface, "tcp") && strcmp(o->iface, "iser") &&
	    strcmp(o->iface, "auto") && strcmp(o->iface, "default")) {
		ax_err("interface \"%s\": tcp, iser or auto", o->iface);
		return AX_ERR_INVAL;
	}
	if (o->iface && strcmp(o->iface, "default") == 0)
		o->iface = "tcp";
	for (int i = 0; i < o->nops; i++)
		if (strcmp(o->ops[i], "new") && strcmp(o->ops[i], "old") &&
		    strcmp(o->ops[i], "delete") && strcmp(o->ops[i], "nonpersistent")) {
			ax_err("discovery: -o %s is not new, old, delete or nonpersistent", o->ops[i]);
			return AX_ERR_INVAL;
		}
	rc = ax_discover(o, &d, err, sizeof(err));
	if (rc) {
		char p[AX_HOST_MAX + 16];
		ax_portal_str(&o->portal, p, sizeof(p));
		ax_err("cannot discover targets at %s: %s", p, err);
		ax_err("initiator reported error (%d - %s)", rc, ax_exit_str(rc));
		return rc;
	}
	rc = disc_records(o, d, &found) < 0 ? AX_ERR_NOMEM : AX_OK;
	ix_discovery_free(d);
	if (rc)
		return rc;
	for (int i = 0; i < found.n; i++) {
		char line[512];
		node_line(&found.recs[i], line, sizeof(line));
		printf("%s\n", line);
	}
	fflush(stdout);
	if (found.n == 0)
		ax_err("no targets found at %s", o->portal_arg);
	if (!has_op(o, "nonpersistent"))
		rc = store_discovered(o, &found);
	if (o->login) {
		for (int i = 0; i < found.n; i++) {
			int r = ax_login_rec(o, &found.recs[i], false, NULL);
			if (r && r != AX_ERR_SESS_EXISTS)
				rc = r;
		}
		if (rc)
			ax_err("Could not log into all portals");
	}
	n = found.n;
	node_list_free(&found);
	return n || rc ? rc : AX_ERR_NO_OBJS;
}

/* ---------------------------------------------------------------- login / logout */

int ax_login_rec(struct ax_opts *o, const struct node_rec *r, bool ephemeral, long *sid)
{
	struct ax_portal p;
	struct ctl_paths cp;
	struct ctl_info inf;
	struct ctl_reply rep;
	char tag[600], err[1024], portal[AX_HOST_MAX + 16];
	long pid = 0;
	int fd, rc, wait_ms;

	rec_tag(r, tag, sizeof(tag));
	node_portal(r, &p);
	if (ctl_paths(o->db, r->name, &p, &cp) < 0) {
		ax_err("the node database path %s is too long for a Unix socket", o->db);
		return AX_ERR_INVAL;
	}
	fd = ctl_connect(cp.sock, 2000);
	if (fd >= 0) {
		rc = ctl_info(fd, &inf, 5000);
		if (rc == 0 && !ephemeral && !inf.persistent)
			ctl_call(fd, "persist", NULL, 0, &rep, NULL, 0, 5000);
		close(fd);
		if (rc == 0) {
			if (sid)
				*sid = inf.pid;
			if (!ephemeral)
				ax_err("%s: 1 session requested, but 1 already present.",
				       iface_name(r->transport));
			return AX_ERR_SESS_EXISTS;
		}
	}
	if (!ephemeral)
		printf("Logging in to %s\n", tag);
	fflush(stdout);
	/* the library bounds the login: attempts x timeout plus the backoff between them */
	wait_ms = (int)((r->login_retry_max + 1) * (r->login_timeout * 1000 + 2000)) + 10000;
	ax_portal_str(&p, portal, sizeof(portal));
	rc = ctl_spawn(o->db, r->name, portal, ephemeral, o->debug, wait_ms, &pid, err,
		       sizeof(err));
	if (rc) {
		ax_err("Could not login to %s.", tag);
		ax_err("initiator reported error (%d - %s)", rc, ax_exit_str(rc));
		ax_err("%s", err);
		return rc;
	}
	if (sid)
		*sid = pid;
	if (!ephemeral)
		printf("Login to %s successful.\n", tag);
	return AX_OK;
}

static int logout_sock(const char *sock, long pid, const char *target, const char *portal,
		       int wait_ms)
{
	struct ctl_reply rep;
	int fd = ctl_connect(sock, 2000), r;

	printf("Logging out of session [sid: %ld, target: %s, portal: %s]\n", pid, target, portal);
	fflush(stdout);
	if (fd < 0) {
		ax_err("session %ld: %s", pid, strerror(-fd));
		return AX_ERR_SESS_NOT_FOUND;
	}
	r = ctl_call(fd, "logout", NULL, 0, &rep, NULL, 0, wait_ms);
	close(fd);
	if (r < 0 || !rep.ok) {
		ax_err("Could not logout of [sid: %ld, target: %s, portal: %s]: %s", pid, target,
		       portal, r < 0 ? strerror(-r) : rep.rest);
		return r < 0 ? (r == -ETIMEDOUT ? AX_ERR_TIMEOUT : AX_ERR_LOGOUT) : rep.code;
	}
	printf("Logout of [sid: %ld, target: %s, portal: %s] successful.\n", pid, target, portal);
	return AX_OK;
}

static int logout_info(const struct ax_opts *o, const struct ctl_info *inf)
{
	struct ax_portal p;
	struct ctl_paths cp;
	char portal[AX_HOST_MAX + 16];

	if (ax_portal_parse(inf->portal, &p) < 0 || ctl_paths(o->db, inf->target, &p, &cp) < 0)
		return AX_ERR_INTERNAL;
	snprintf(portal, sizeof(portal), "%s,%u", p.host, p.port);
	return logout_sock(cp.sock, inf->pid, inf->target, portal, o->timeout_s * 1000);
}

/* Sessions matching the filters; returns how many. */
static int sessions_matching(const struct ax_opts *o, struct ctl_info **out, int *n)
{
	struct ctl_info *v;
	int m = 0;

	if (ctl_sessions(o->db, &v, n) < 0)
		return -1;
	for (int i = 0; i < *n; i++) {
		struct ax_portal p;
		bool ok = ax_portal_parse(v[i].portal, &p) == 0;
		if (o->sid && v[i].pid != o->sid)
			ok = false;
		if (o->target && strcmp(o->target, v[i].target) != 0)
			ok = false;
		if (o->have_portal && (strcmp(o->portal.host, p.host) || o->portal.port != p.port))
			ok = false;
		if (ok)
			v[m++] = v[i];
	}
	*out = v;
	*n = m;
	return m;
}

/* ---------------------------------------------------------------- node mode */

static int node_new(struct ax_opts *o)
{
	struct node_rec r;
	char err[512], line[512];

	if (!o->target || !o->have_portal) {
		ax_err("-o new needs -T IQN and -p IP[:PORT][,TPGT]");
		return AX_ERR_INVAL;
	}
	if (!ax_iscsi_name_ok(o->target)) {
		ax_err("\"%s\" is not an iSCSI name (iqn., eui., naa.)", o->target);
		return AX_ERR_INVAL;
	}
	node_defaults(&r);
	snprintf(r.name, sizeof(r.name), "%s", o->target);
	snprintf(r.address, sizeof(r.address), "%s", o->portal.host);
	r.port = o->portal.port;
	r.tpgt = o->portal.tpgt;
	if (o->iface)
		snprintf(r.transport, sizeof(r.transport), "%s",
			 strcmp(o->iface, "default") == 0 ? "tcp" : o->iface);
	for (int i = 0; i < o->nnames; i++)
		if (node_set(&r, o->names[i], o->values[i], false, err, sizeof(err)) < 0) {
			ax_err("%s", err);
			return AX_ERR_INVAL;
		}
	if (node_save(o->db, &r, err, sizeof(err)) < 0) {
		ax_err("%s", err);
		return AX_ERR_IDBM;
	}
	node_line(&r, line, sizeof(line));
	printf("New iSCSI node [%s:[hw=,ip=,net_if=,iscsi_if=%s] %s] added\n", r.transport,
	       iface_name(r.transport), line);
	return AX_OK;
}

static bool session_alive(const struct ax_opts *o, const struct node_rec *r)
{
	struct ax_portal p;
	struct ctl_paths cp;
	int fd;

	node_portal(r, &p);
	if (ctl_paths(o->db, r->name, &p, &cp) < 0)
		return false;
	fd = ctl_connect(cp.sock, 2000);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* An exit code, or -1 when the record has no session. */
static int node_logout(struct ax_opts *o, const struct node_rec *r)
{
	struct ax_portal p;
	struct ctl_paths cp;
	char portal[AX_HOST_MAX + 16];
	struct ctl_info inf;
	int fd, rc;

	node_portal(r, &p);
	if (ctl_paths(o->db, r->name, &p, &cp) < 0)
		return AX_ERR_INVAL;
	fd = ctl_connect(cp.sock, 2000);
	if (fd < 0)
		return -1; /* no session */
	rc = ctl_info(fd, &inf, 5000);
	close(fd);
	if (rc < 0)
		return AX_ERR_SESS_NOT_FOUND;
	snprintf(portal, sizeof(portal), "%s,%u", r->address, r->port);
	return logout_sock(cp.sock, inf.pid, r->name, portal, o->timeout_s * 1000);
}

static bool startup_match(const char *which, const struct node_rec *r)
{
	return strcmp(which, "all") == 0 || strcmp(which, r->startup) == 0;
}

static bool startup_ok(const char *which)
{
	return !strcmp(which, "all") || !strcmp(which, "manual") || !strcmp(which, "automatic");
}

static int node_each(struct ax_opts *o, struct node_list *l)
{
	bool update = has_op(o, "update"), del = has_op(o, "delete");
	int rc = AX_OK, done = 0, sessions = 0;
	char err[512];

	for (int i = 0; i < l->n; i++) {
		struct node_rec *r = &l->recs[i];
		int x = AX_OK;

		if (!node_match(r, o->target, o->have_portal ? &o->portal : NULL))
			continue;
		if (o->login_all && !startup_match(o->login_all, r))
			continue;
		if (o->logout_all && !startup_match(o->logout_all, r))
			continue;
		done++;
		if (update) {
			for (int k = 0; k < o->nnames && x == AX_OK; k++)
				if (node_set(r, o->names[k], o->values[k], false, err, sizeof(err)) < 0) {
					ax_err("%s", err);
					x = AX_ERR_INVAL;
				}
			if (x == AX_OK && node_save(o->db, r, err, sizeof(err)) < 0) {
				ax_err("%s", err);
				x = AX_ERR_IDBM;
			}
		} else if (del) {
			char tag[600];
			rec_tag(r, tag, sizeof(tag));
			if (session_alive(o, r)) {
				ax_err("This command will remove the record %s, but a session is using "
				       "it. Logout session then rerun command to remove record.", tag);
				x = AX_ERR_BUSY;
			} else if (node_delete(o->db, r) < 0) {
				ax_err("cannot delete the record %s", tag);
				x = AX_ERR_IDBM;
			}
		} else if (o->login || o->login_all) {
			x = ax_login_rec(o, r, false, NULL);
			if (x == AX_ERR_SESS_EXISTS && o->login_all)
				x = AX_OK;
		} else if (o->logout || o->logout_all) {
			x = node_logout(o, r);
			sessions += x >= 0;
			x = x < 0 ? AX_OK : x;
		} else {
			printf("# BEGIN RECORD ix\n");
			node_print(stdout, r, o->show_secrets);
			printf("# END RECORD\n");
		}
		if (x)
			rc = x;
	}
	if (!done) {
		ax_err("No records found");
		return AX_ERR_NO_OBJS;
	}
	if ((o->login || o->login_all) && rc)
		ax_err("Could not log into all portals");
	if (o->logout && !sessions) {
		ax_err("No matching sessions found");
		return AX_ERR_NO_OBJS;
	}
	return rc;
}

int ax_mode_node(struct ax_opts *o)
{
	struct node_list l;
	int rc;

	for (int i = 0; i < o->nops; i++)
		if (strcmp(o->ops[i], "new") && strcmp(o->ops[i], "delete") &&
		    strcmp(o->ops[i], "update") && strcmp(o->ops[i], "show")) {
			ax_err("node: -o %s is not new, delete, update or show", o->ops[i]);
			return AX_ERR_INVAL;
		}
	if (has_op(o, "new"))
		return node_new(o);
	if (has_op(o, "update") && o->nnames == 0) {
		ax_err("-o update needs -n NAME -v VALUE");
		return AX_ERR_INVAL;
	}
	if ((o->login_all && !startup_ok(o->login_all)) ||
	    (o->logout_all && !startup_ok(o->logout_all))) {
		ax_err("-L / -U take all, manual or automatic");
		return AX_ERR_INVAL;
	}
	if (node_list_load(o->db, &l) < 0) {
		ax_err("cannot read the node database %s", o->db);
		return AX_ERR_IDBM;
	}
	if (o->nops == 0 && !o->login && !o->logout && !o->login_all && !o->logout_all &&
	    !o->target && !o->have_portal) {
		for (int i = 0; i < l.n; i++) {
			char line[512];
			node_line(&l.recs[i], line, sizeof(line));
			printf("%s\n", line);
		}
		rc = l.n ? AX_OK : AX_ERR_NO_OBJS;
		if (!l.n)
			ax_err("No records found");
	} else {
		rc = node_each(o, &l);
	}
	node_list_free(&l);
	return rc;
}

/* ---------------------------------------------------------------- session mode */

static void conn_states(const char *st, const char **conn, const char **sess)
{
	*conn = "LOGGED IN";
	*sess = "LOGGED_IN";
	if (strcmp(st, "RECOVERING") == 0 || strcmp(st, "FAILED") == 0) {
		*conn = "TRANSPORT WAIT";
		*sess = "FAILED";
	} else if (strcmp(st, "LOGGING_IN") == 0) {
		*conn = "IN LOGIN";
		*sess = "FREE";
	} else if (strcmp(st, "LOGGING_OUT") == 0) {
		*conn = "IN LOGOUT";
	}
}

static const char *info_get(const struct ctl_info *inf, const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key);
	const char *p = inf->text;

	buf[0] = 0;
	while (p && *p) {
		if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t n = strcspn(p + kl + 1, "\n");
			snprintf(buf, len, "%.*s", (int)n, p + kl + 1);
			break;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return buf;
}

static void print_session(const struct ctl_info *inf, int level)
{
	const char *cs, *ss;
	char v[256];

	if (level == 0) {
		printf("%s: [%ld] %s,%d %s (non-flash)\n", inf->transport, inf->pid, inf->portal,
		       inf->tpgt, inf->target);
		return;
	}
	conn_states(inf->state, &cs, &ss);
	printf("Target: %s (non-flash)\n", inf->target);
	printf("\tCurrent Portal: %s,%d\n", inf->current[0] && strcmp(inf->current, ":0")
						  ? inf->current : inf->portal, inf->tpgt);
	printf("\tPersistent Portal: %s,%d\n", inf->portal, inf->tpgt);
	printf("\t\t**********\n\t\tInterface:\n\t\t**********\n");
	printf("\t\tIface Name: %s\n", iface_name(inf->transport));
	printf("\t\tIface Transport: %s\n", inf->transport);
	printf("\t\tIface Initiatorname: %s\n", inf->initiator);
	printf("\t\tSID: %ld\n", inf->pid);
	printf("\t\tiSCSI Connection State: %s\n", cs);
	printf("\t\tiSCSI Session State: %s\n", ss);
	printf("\t\tInternal ixadm Session State: %s%s\n", inf->state,
	       inf->persistent ? "" : " (ends with its last attachment)");
	if (*info_get(inf, "last_error", v, sizeof(v)))
		printf("\t\tLast error: %s\n", v);
	printf("\t\tRecoveries: %s\n", info_get(inf, "recoveries", v, sizeof(v)));
	if (level >= 2) {
		static const struct {
			const char *label, *key;
		} params[] = {
			{"HeaderDigest", "header_digest"},
			{"DataDigest", "data_digest"},
			{"MaxRecvDataSegmentLength", "max_recv_dsl"},
			{"MaxXmitDataSegmentLength", "max_xmit_dsl"},
			{"FirstBurstLength", "first_burst"},
			{"MaxBurstLength", "max_burst"},
			{"ImmediateData", "immediate_data"},
			{"InitialR2T", "initial_r2t"},
			{"ISID", "isid"},
			{"TSIH", "tsih"},
			{"CmdSN window", "cmdsn_window"},
			{"Outstanding commands", "outstanding"},
		};
		printf("\t\t************************\n\t\tNegotiated iSCSI params:\n"
		       "\t\t************************\n");
		for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
			printf("\t\t%s: %s\n", params[i].label,
			       info_get(inf, params[i].key, v, sizeof(v)));
	}
	if (inf->nattach) {
		printf("\t\t************************\n\t\tAttached LUNs (FUSE files):\n"
		       "\t\t************************\n");
		for (int i = 0; i < inf->nattach; i++)
			printf("\t\tLUN %u: %s\n", inf->attach[i].lun, inf->attach[i].path);
	}
}

int ax_mode_session(struct ax_opts *o)
{
	struct ctl_info *v = NULL;
	int n = 0, rc = AX_OK;

	if (sessions_matching(o, &v, &n) < 0) {
		ax_err("cannot read %s/.run", o->db);
		return AX_ERR_IDBM;
	}
	if (n == 0) {
		free(v);
		ax_err(o->sid || o->target || o->have_portal ? "No matching sessions found"
							      : "No active sessions.");
		return AX_ERR_NO_OBJS;
	}
	for (int i = 0; i < n; i++) {
		if (o->logout) {
			int x = logout_info(o, &v[i]);
			if (x)
				rc = x;
		} else {
			print_session(&v[i], o->print_level);
		}
	}
	free(v);
	return rc;
}
