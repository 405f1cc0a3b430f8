/* ceph-iscsi's gateway.conf into the gateway group's document (import_cephiscsi.h).
 *
 * What ceph-iscsi (ceph_iscsi_config, schema 11) keeps, and where it goes:
 *   gateways{HOST}                    members[] (name HOST)
 *   targets{IQN}.ip_list              the order in which every gateway created the target's
 *                                     TPGs at start (one TPG a gateway, tags from 1): a
 *                                     gateway's tag, hence its relative port id and ALUA group
 *                                     id, is its place in that list; it becomes its member id
 *   targets{IQN}.portals{HOST}.portal_ip_addresses   members[].portals (port 3260)
 *   targets{IQN}.disks{POOL/IMAGE}.lun_id + disks{POOL/IMAGE}.{pool,image,wwn}
 *                                     targets[].luns[] (backend rbd) with LIO's identity
 *   targets{IQN}.clients{INITIATOR}   targets[].acls[]: auth -> chap / mutual_chap, luns (and
 *                                     its host group's disks) -> luns (masking)
 *   targets{IQN}.auth                 targets[].chap / mutual_chap (only without ACLs)
 *   discovery_auth                    global.discovery.chap / mutual_chap
 * Everything else that would change behaviour (controls, other backstores, ...) is a note.
 */
#include "mgmt/import_cephiscsi.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/chap.h"
#include "target/config.h"

#define MAX_GW 64         /* members of a group at most */
#define MAX_PORTALS 16    /* portals of a member at most */

void lio_naa_from_serial(const char *serial, uint8_t naa[16])
{
	size_t off = 3;
	bool high = false; /* the next digit goes to the high nibble of naa[off] */

	memset(naa, 0, 16);
	naa[0] = (uint8_t)(0x60 | ((LIO_OUI >> 20) & 0x0f));
	naa[1] = (uint8_t)(LIO_OUI >> 12);
	naa[2] = (uint8_t)(LIO_OUI >> 4);
	naa[3] = (uint8_t)((LIO_OUI & 0x0f) << 4);
	for (const char *p = serial; p && *p && off < 16; p++) {
		int v;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			v = *p - 'A' + 10;
		else
			continue;
		if (high) {
			naa[off] = (uint8_t)(v << 4);
		} else {
			naa[off] |= (uint8_t)v;
			off++;
		}
		high = !high;
	}
}

/* ---- the conversion's state --------------------------------------------------------------- */

struct gw {
	const char *name;
	unsigned id;     /* member id; 0: not a member (no portal address) */
	json_t *portals; /* array of portal objects */
};

struct imp {
	const struct cephiscsi_opts *o;
	json_t *in, *notes;
	struct gw gws[MAX_GW];
	size_t ngws;
	json_t *used_disks; /* object: disk key -> target IQN that exports it */
	int rc;             /* -ENOMEM once anything failed to allocate */
};

__attribute__((format(printf, 2, 3))) static void note(struct imp *m, const char *fmt, ...)
{
	char buf[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (json_array_append_new(m->notes, json_string(buf)) < 0)
		m->rc = -ENOMEM;
}

static void set(struct imp *m, json_t *o, const char *k, json_t *v)
{
	if (!v || json_object_set_new(o, k, v) < 0)
		m->rc = -ENOMEM;
}

static void append(struct imp *m, json_t *a, json_t *v)
{
	if (!v || json_array_append_new(a, v) < 0)
		m->rc = -ENOMEM;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of object o, sorted (the output does not depend on the input's key order). *n keys;
 * NULL when none or out of memory (m->rc). */
static const char **sorted_keys(struct imp *m, json_t *o, size_t *n)
{
	const char **k;
	const char *key;
	json_t *v;
	size_t i = 0;

	*n = json_is_object(o) ? json_object_size(o) : 0;
	if (*n == 0)
		return NULL;
	if (!(k = calloc(*n, sizeof(*k)))) {
		m->rc = -ENOMEM;
		*n = 0;
		return NULL;
	}
	json_object_foreach(o, key, v) k[i++] = key;
	qsort(k, *n, sizeof(*k), cmp_str);
	return k;
}

static const char *str_of(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static struct gw *gw_find(struct imp *m, const char *name)
{
	for (size_t i = 0; i < m->ngws; i++)
		if (strcmp(m->gws[i].name, name) == 0)
			return &m->gws[i];
	return NULL;
}

static bool gw_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static struct gw *gw_add(struct imp *m, const char *name)
{
	struct gw *g = gw_find(m, name);

	if (g)
		return g;
	if (!gw_name_ok(name)) {
		note(m, "gateway \"%.80s\": not a member: a member's name is 1-63 of A-Z a-z 0-9 . _ -",
		     name);
		return NULL;
	}
	if (m->ngws == MAX_GW) {
		note(m, "gateway \"%s\": not a member: more than %d gateways", name, MAX_GW);
		return NULL;
	}
	g = &m->gws[m->ngws++];
	g->name = name;
	g->id = 0;
	if (!(g->portals = json_array()))
		m->rc = -ENOMEM;
	return g;
}

/* "[v6]" or "v4" as ix writes an address: without brackets. */
static void bare_address(const char *s, char *out, size_t cap)
{
	size_t n = strlen(s);

	if (n >= 2 && s[0] == '[' && s[n - 1] == ']')
		snprintf(out, cap, "%.*s", (int)(n - 2), s + 1);
	else
		snprintf(out, cap, "%s", s);
}

static void gw_add_portal(struct imp *m, struct gw *g, const char *ip)
{
	char addr[128];
	size_t i;
	json_t *p;

	struct in6_addr a6;

	bare_address(ip, addr, sizeof(addr));
	json_array_foreach(g->portals, i, p) if (strcmp(str_of(p, "address"), addr) == 0) return;
	if (inet_pton(AF_INET, addr, &a6) != 1 && inet_pton(AF_INET6, addr, &a6) != 1) {
		note(m, "gateway %s: portal \"%.64s\" is not an IPv4 or IPv6 address: left out",
		     g->name, ip);
		return;
	}
	if (json_array_size(g->portals) == MAX_PORTALS) {
		note(m, "gateway %s: portal %s: more than %d portals: left out", g->name, addr,
		     MAX_PORTALS);
		return;
	}
	append(m, g->portals, json_pack("{s:s, s:i}", "address", addr, "port", 3260));
}

/* The gateway of target t that owns portal address ip (its portal_ip_addresses), or NULL. */
static const char *owner_of_ip(json_t *t, const char *ip)
{
	const char *host;
	json_t *p, *a;
	size_t i;

	json_object_foreach(json_object_get(t, "portals"), host, p)
		json_array_foreach(json_object_get(p, "portal_ip_addresses"), i, a)
			if (json_is_string(a) && strcmp(json_string_value(a), ip) == 0)
				return host;
	return NULL;
}

/* The gateways of target t in the order of their TPG tags (1, 2, ...): the order of their
 * first portal in ip_list; gateways with no portal in ip_list after them (*known: how many
 * are in ip_list). */
static size_t tpg_order(json_t *t, const char **out, size_t cap, size_t *known)
{
	json_t *ip, *p;
	const char *host;
	size_t i, n = 0;

	json_array_foreach(json_object_get(t, "ip_list"), i, ip)
	{
		const char *h = json_is_string(ip) ? owner_of_ip(t, json_string_value(ip)) : NULL;
		bool seen = false;
		for (size_t k = 0; h && k < n; k++)
			seen = seen || strcmp(out[k], h) == 0;
		if (h && !seen && n < cap)
			out[n++] = h;
	}
	*known = n;
	json_object_foreach(json_object_get(t, "portals"), host, p)
	{
		bool seen = false;
		for (size_t k = 0; k < n; k++)
			seen = seen || strcmp(out[k], host) == 0;
		if (!seen && n < cap)
			out[n++] = host;
	}
	return n;
}

static bool id_used(const struct imp *m, unsigned id)
{
	for (size_t i = 0; i < m->ngws; i++)
		if (m->gws[i].id == id)
			return true;
	return false;
}

static int cmp_gw_id(const void *a, const void *b)
{
	const struct gw *x = *(const struct gw *const *)a, *y = *(const struct gw *const *)b;

	return (x->id > y->id) - (x->id < y->id);
}

/* ---- members ------------------------------------------------------------------------------ */

static void build_members(struct imp *m, const char **tk, size_t ntk)
{
	json_t *targets = json_object_get(m->in, "targets");
	const char *order[MAX_GW];
	size_t n, known;

	/* every target's gateways, with their portals */
	for (size_t t = 0; t < ntk; t++) {
		json_t *tg = json_object_get(targets, tk[t]);
		n = tpg_order(tg, order, MAX_GW, &known);
		for (size_t k = 0; k < n; k++) {
			struct gw *g = gw_add(m, order[k]);
			json_t *p = json_object_get(json_object_get(tg, "portals"), order[k]), *a;
			size_t i;
			if (!g)
				continue;
			json_array_foreach(json_object_get(p, "portal_ip_addresses"), i, a)
				if (json_is_string(a))
					gw_add_portal(m, g, json_string_value(a));
		}
	}
	/* ids: the TPG tag a gateway had in the first target (by name) where it is known and
	   still free; then the lowest free id. A gateway without a portal address is none. */
	for (size_t t = 0; t < ntk; t++) {
		n = tpg_order(json_object_get(targets, tk[t]), order, MAX_GW, &known);
		for (size_t k = 0; k < known; k++) {
			struct gw *g = gw_find(m, order[k]);
			if (g && !g->id && json_array_size(g->portals) &&
			    !id_used(m, (unsigned)k + 1))
				g->id = (unsigned)k + 1;
		}
	}
	for (size_t i = 0; i < m->ngws; i++) {
		if (json_array_size(m->gws[i].portals) == 0) {
			note(m, "gateway %s: no portal address: not a member", m->gws[i].name);
			continue;
		}
		for (unsigned id = 1; !m->gws[i].id; id++)
			if (!id_used(m, id))
				m->gws[i].id = id;
	}
	/* where a target had another tag than the member id */
	for (size_t t = 0; t < ntk; t++) {
		n = tpg_order(json_object_get(targets, tk[t]), order, MAX_GW, &known);
		for (size_t k = 0; k < n; k++) {
			struct gw *g = gw_find(m, order[k]);
			if (!g || !g->id)
				continue;
			if (k >= known)
				note(m, "target %s, gateway %s: its portals are not in the target's ip_list, so "
					"its TPG tag under ceph-iscsi is unknown; it is member id %u", tk[t],
				     g->name, g->id);
			else if (g->id != k + 1)
				note(m, "target %s, gateway %s: TPG tag %zu under ceph-iscsi, member id %u in "
					"the group (one id for every target): its relative target port id and "
					"ALUA group id change for this target", tk[t], g->name, k + 1, g->id);
		}
	}
	/* gateways that export nothing */
	const char *host;
	json_t *v;
	json_object_foreach(json_object_get(m->in, "gateways"), host, v)
	{
		if (!json_is_object(v) || gw_find(m, host))
			continue;
		note(m, "gateway %.80s: no portal of it is in any target, so it is not a member (add it "
			"with ix-ctl group member add)", host);
	}
}

/* ---- CHAP ---------------------------------------------------------------------------------- */

/* auth {username, password, password_encryption_enabled, mutual_...}: which = "" or "mutual_".
 * *cred: {user, secret} or NULL when none is set. false (noted) when one is set but cannot be
 * carried over. */
static bool cred_of(struct imp *m, json_t *auth, const char *which, const char *what,
		    json_t **cred)
{
	char ku[64], kp[64], ke[64], plain[CHAP_MAX_SECRET_LEN + 1];
	const char *user, *pass;
	const char *label = *which ? "mutual CHAP" : "CHAP";

	*cred = NULL;
	snprintf(ku, sizeof(ku), "%susername", which);
	snprintf(kp, sizeof(kp), "%spassword", which);
	snprintf(ke, sizeof(ke), "%spassword_encryption_enabled", which);
	user = str_of(auth, ku);
	pass = str_of(auth, kp);
	if (!*user && !*pass)
		return true;
	if (!*user || !*pass) {
		note(m, "%s: %s has a %s but no %s: not set under ceph-iscsi either (LIO needs "
			"both)", what, label, *user ? "user name" : "password",
		     *user ? "password" : "user name");
		return true;
	}
	if (json_is_true(json_object_get(auth, ke))) {
		if (!m->o->decrypt) {
			note(m, "%s: %s password is encrypted with the gateways' key (give ix-ctl "
				"import --key PATH): not carried over", what, label);
			return false;
		}
		if (m->o->decrypt(m->o->decrypt_arg, pass, plain, sizeof(plain)) < 0) {
			note(m, "%s: %s password could not be decrypted with the key given: not "
				"carried over", what, label);
			return false;
		}
		pass = plain;
	}
	bool ctl = false;
	for (const char *p = user; *p; p++)
		ctl = ctl || (unsigned char)*p < 0x20 || *p == 0x7f;
	if (ctl || strlen(user) != json_string_length(json_object_get(auth, ku)) ||
	    (!json_is_true(json_object_get(auth, ke)) &&
	     strlen(pass) != json_string_length(json_object_get(auth, kp)))) {
		note(m, "%s: %s user name with a control character, or a password with a NUL: not "
			"carried over", what, label);
		memset(plain, 0, sizeof(plain));
		return false;
	}
	if (strlen(user) > 255 || strlen(pass) > CHAP_MAX_SECRET_LEN) {
		note(m, "%s: %s user name or password longer than ix takes (255): not carried over",
		     what, label);
		memset(plain, 0, sizeof(plain));
		return false;
	}
	*cred = json_pack("{s:s, s:s}", "user", user, "secret", pass);
	memset(plain, 0, sizeof(plain));
	if (!*cred)
		m->rc = -ENOMEM;
	return *cred != NULL;
}

/* ---- targets ------------------------------------------------------------------------------- */

/* target's LUN id of disk key, or -1 */
static long long target_lun_of(json_t *tg, const char *disk)
{
	json_t *d = json_object_get(json_object_get(tg, "disks"), disk);
	json_t *id = json_object_get(d, "lun_id");

	return json_is_integer(id) ? json_integer_value(id) : -1;
}

static void note_controls(struct imp *m, json_t *controls, const char *what)
{
	const char *k;
	json_t *v;

	json_object_foreach(controls, k, v)
	{
		char val[64] = "";
		if (json_is_integer(v))
			snprintf(val, sizeof(val), " = %lld", (long long)json_integer_value(v));
		else if (json_is_boolean(v))
			snprintf(val, sizeof(val), " = %s", json_is_true(v) ? "true" : "false");
		note(m, "%s: control %.64s%s is not carried over (ix sets its limits and timeouts in "
			"the group's global or each gateway's file)", what, k, val);
	}
}

static json_t *build_lun(struct imp *m, const char *iqn, const char *key, long long lun_id)
{
	json_t *disk = json_object_get(json_object_get(m->in, "disks"), key);
	const char *pool = str_of(disk, "pool"), *image = str_of(disk, "image");
	const char *wwn = str_of(disk, "wwn"), *bs = str_of(disk, "backstore");
	char what[600];
	json_t *l, *rbd;

	snprintf(what, sizeof(what), "target %s, disk %s", iqn, key);
	if (!json_is_object(disk)) {
		note(m, "%s: no such disk in \"disks\": not carried over", what);
		return NULL;
	}
	if (*bs && strcmp(bs, "user:rbd") != 0) {
		note(m, "%s: backstore \"%.40s\" (ix serves RBD images through librbd, as "
			"user:rbd): not carried over", what, bs);
		return NULL;
	}
	if (!*pool || !*image) {
		note(m, "%s: no pool or image: not carried over", what);
		return NULL;
	}
	if (lun_id < 0 || lun_id > 16383) {
		note(m, "%s: LUN id %lld out of range: not carried over", what, lun_id);
		return NULL;
	}
	const char *other = json_string_value(json_object_get(m->used_disks, key));
	if (other) {
		note(m, "%s: already exported by target %s (one image, one LU): not carried over "
			"here", what, other);
		return NULL;
	}
	set(m, m->used_disks, key, json_string(iqn));
	rbd = json_pack("{s:s, s:s}", "pool", pool, "image", image);
	l = json_pack("{s:I, s:s}", "lun", (json_int_t)lun_id, "backend", "rbd");
	if (!rbd || !l) {
		json_decref(rbd);
		json_decref(l);
		m->rc = -ENOMEM;
		return NULL;
	}
	if (m->o->rbd_conf)
		set(m, rbd, "conf", json_string(m->o->rbd_conf));
	if (m->o->rbd_client)
		set(m, rbd, "client", json_string(m->o->rbd_client));
	if (m->o->exclusive_lock)
		set(m, rbd, "exclusive_lock", json_true());
	set(m, l, "rbd", rbd);
	if (!*wwn) {
		note(m, "%s: no wwn, so its LIO identity is unknown: ix derives one (initiators see a "
			"new disk)", what);
	} else {
		uint8_t naa[16];
		char hex[35] = "0x";
		bool printable = strlen(wwn) <= 64;

		for (const char *p = wwn; *p; p++)
			printable = printable && *p >= 0x20 && *p < 0x7f;
		lio_naa_from_serial(wwn, naa);
		for (int i = 0; i < 16; i++)
			snprintf(hex + 2 + 2 * i, 3, "%02x", naa[i]);
		set(m, l, "naa_id", json_string(hex));
		if (printable)
			set(m, l, "serial", json_string(wwn));
		else
			note(m, "%s: wwn longer than 64 characters or not printable ASCII: the serial "
				"(VPD 0x80) is not carried over (the NAA designator is)", what);
	}
	set(m, l, "vendor", json_string(LIO_VENDOR));
	set(m, l, "product", json_string(LIO_TCMU_PRODUCT));
	/* tcmu-runner's osd_op_timeout is the LUN's rbd.osd_op_timeout_s (both default 30);
	   the other controls are noted */
	json_t *controls = json_deep_copy(json_object_get(disk, "controls"));
	json_t *ot = json_object_get(controls, "osd_op_timeout");
	if (json_is_integer(ot) && json_integer_value(ot) >= 1 && json_integer_value(ot) <= 3600) {
		set(m, rbd, "osd_op_timeout_s", json_integer(json_integer_value(ot)));
		json_object_del(controls, "osd_op_timeout");
	}
	if (json_object_size(controls))
		note_controls(m, controls, what);
	json_decref(controls);
	return l;
}

/* A client's LUNs (its own "luns" and its host group's disks) as acls[].luns. */
static json_t *client_luns(struct imp *m, json_t *tg, const char *iqn, const char *ini,
			   json_t *client, json_t *luns)
{
	json_t *out = json_array(), *grp, *all = json_object();
	const char *key, *gname = str_of(client, "group_name");
	json_t *v;
	size_t n;

	if (!out || !all) {
		json_decref(out);
		json_decref(all);
		m->rc = -ENOMEM;
		return NULL;
	}
	json_object_foreach(json_object_get(client, "luns"), key, v)
		set(m, all, key, json_incref(v));
	grp = *gname ? json_object_get(json_object_get(tg, "groups"), gname) : NULL;
	if (*gname && !grp)
		note(m, "target %s, client %s: host group %.64s does not exist", iqn, ini, gname);
	json_object_foreach(json_object_get(grp, "disks"), key, v)
		if (!json_object_get(all, key))
			set(m, all, key, json_incref(v));
	const char **keys = sorted_keys(m, all, &n);
	for (size_t i = 0; i < n; i++) {
		json_t *id = json_object_get(json_object_get(all, keys[i]), "lun_id");
		long long tl = target_lun_of(tg, keys[i]), lun = json_is_integer(id)
								   ? json_integer_value(id)
								   : tl;
		bool shown = false, dup = false;
		size_t k;
		json_t *l;
		json_array_foreach(luns, k, l) shown =
		    shown || json_integer_value(json_object_get(l, "lun")) == tl;
		json_array_foreach(out, k, l) dup =
		    dup || json_integer_value(json_object_get(l, "lun")) == lun;
		if (tl < 0 || !shown) {
			note(m, "target %s, client %s: disk %s is not a LUN of the target here: not "
				"mapped", iqn, ini, keys[i]);
			continue;
		}
		if (lun < 0 || lun > 16383 || dup) {
			note(m, "target %s, client %s: disk %s: LUN id %lld out of range or used twice: "
				"not mapped", iqn, ini, keys[i], lun);
			continue;
		}
		append(m, out, json_pack("{s:I, s:I}", "lun", (json_int_t)lun, "target_lun",
					 (json_int_t)tl));
	}
	free(keys);
	json_decref(all);
	return out;
}

static void build_acls(struct imp *m, json_t *tg, const char *iqn, json_t *t, json_t *luns)
{
	json_t *clients = json_object_get(tg, "clients"), *acls = json_array();
	size_t n, with_chap = 0;
	const char **keys = sorted_keys(m, clients, &n);

	if (!acls) {
		m->rc = -ENOMEM;
		free(keys);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *c = json_object_get(clients, keys[i]), *auth = json_object_get(c, "auth");
		json_t *chap = NULL, *mchap = NULL;
		char what[600];
		bool ok;

		snprintf(what, sizeof(what), "target %s, client %.230s", iqn, keys[i]);
		const char *why = cfg_iscsi_name_error(keys[i]);
		if (why) {
			note(m, "%s: not a valid iSCSI name (%s): left out", what, why);
			continue;
		}
		ok = cred_of(m, auth, "", what, &chap);
		ok = ok && cred_of(m, auth, "mutual_", what, &mchap);
		if (!ok) {
			/* a client whose credential cannot be carried is left out: it could not log
			   in with what ix would have, and its ACL must not open the target */
			note(m, "%s: left out (it cannot log in until its ACL is added)", what);
			json_decref(chap);
			json_decref(mchap);
			continue;
		}
		if (mchap && !chap) {
			note(m, "%s: mutual CHAP without one-way CHAP is not used by LIO: not carried "
				"over", what);
			json_decref(mchap);
			mchap = NULL;
		}
		json_t *a = json_pack("{s:s}", "initiator", keys[i]);
		if (!a) {
			json_decref(chap);
			json_decref(mchap);
			m->rc = -ENOMEM;
			continue;
		}
		if (chap) {
			set(m, a, "chap", chap);
			with_chap++;
		}
		if (mchap)
			set(m, a, "mutual_chap", mchap);
		set(m, a, "luns", client_luns(m, tg, iqn, keys[i], c, luns));
		if (json_object_size(json_object_get(c, "controls")))
			note_controls(m, json_object_get(c, "controls"), what);
		append(m, acls, a);
	}
	free(keys);
	/* LIO turns on CHAP for the whole TPG as soon as one client has a credential: then a
	   client without one cannot log in (ix's chap_required says the same, and refuses such an
	   ACL in its file: it is left out) */
	if (with_chap) {
		size_t i = 0;
		while (i < json_array_size(acls)) {
			json_t *a = json_array_get(acls, i);
			if (json_object_get(a, "chap")) {
				i++;
				continue;
			}
			note(m, "target %s, client %s: no CHAP credential while other clients have one "
				"(LIO required CHAP of every client): left out, as it could not log in",
			     iqn, str_of(a, "initiator"));
			json_array_remove(acls, i);
		}
	}
	set(m, t, "acls", acls);
	set(m, t, "chap_required", json_boolean(with_chap > 0));
}

struct disk_ref {
	const char *key;
	long long lun;
};

static int cmp_disk_ref(const void *a, const void *b)
{
	const struct disk_ref *x = a, *y = b;

	if (x->lun != y->lun)
		return (x->lun > y->lun) - (x->lun < y->lun);
	return strcmp(x->key, y->key);
}

static json_t *build_target(struct imp *m, const char *iqn)
{
	json_t *tg = json_object_get(json_object_get(m->in, "targets"), iqn);
	json_t *t, *luns, *members, *cred;
	const char *order[MAX_GW];
	size_t n, known, nd;
	char what[600];

	snprintf(what, sizeof(what), "target %.230s", iqn);
	if (cfg_iscsi_name_error(iqn)) {
		note(m, "%s: not a valid iSCSI name (%s): not carried over", what,
		     cfg_iscsi_name_error(iqn));
		return NULL;
	}
	if (!json_is_object(tg)) {
		note(m, "%s: not an object: not carried over", what);
		return NULL;
	}
	if (!(t = json_pack("{s:s}", "name", iqn)) || !(luns = json_array()) ||
	    !(members = json_array())) {
		json_decref(t);
		m->rc = -ENOMEM;
		return NULL;
	}
	/* members: its gateways, by member id */
	struct gw *mine[MAX_GW];
	size_t nmine = 0;

	n = tpg_order(tg, order, MAX_GW, &known);
	for (size_t k = 0; k < n; k++) {
		struct gw *g = gw_find(m, order[k]);
		if (g && g->id)
			mine[nmine++] = g;
	}
	qsort(mine, nmine, sizeof(mine[0]), cmp_gw_id);
	for (size_t k = 0; k < nmine; k++)
		append(m, members, json_string(mine[k]->name));
	set(m, t, "members", members);
	if (json_array_size(members) == 0) {
		/* in a group document, no "members" would mean every gateway */
		note(m, "%s: no gateway (with a portal) exports it: not carried over", what);
		json_decref(t);
		json_decref(luns);
		return NULL;
	}
	/* LUNs by LUN id */
	const char **dk = sorted_keys(m, json_object_get(tg, "disks"), &nd);
	struct disk_ref *dr = nd ? calloc(nd, sizeof(*dr)) : NULL;

	if (nd && !dr)
		m->rc = -ENOMEM;
	for (size_t i = 0; dr && i < nd; i++) {
		dr[i].key = dk[i];
		dr[i].lun = target_lun_of(tg, dk[i]);
	}
	if (dr)
		qsort(dr, nd, sizeof(*dr), cmp_disk_ref);
	for (size_t i = 0; dr && i < nd; i++) {
		json_t *l;
		if (dr[i].lun < 0 || dr[i].lun > 16383) {
			note(m, "%s, disk %s: no LUN id in range: not carried over", what, dr[i].key);
			continue;
		}
		if (i > 0 && dr[i - 1].lun == dr[i].lun) {
			note(m, "%s, disk %s: LUN id %lld is also disk %s's: not carried over", what,
			     dr[i].key, dr[i].lun, dr[i - 1].key);
			continue;
		}
		if ((l = build_lun(m, iqn, dr[i].key, dr[i].lun)))
			append(m, luns, l);
	}
	free(dr);
	free(dk);
	set(m, t, "luns", luns);
	/* access */
	json_t *auth = json_object_get(tg, "auth");
	bool acl_enabled = !json_is_false(json_object_get(tg, "acl_enabled"));
	if (acl_enabled) {
		if (*str_of(auth, "username") || *str_of(auth, "password"))
			note(m, "%s: target CHAP is set with ACLs on, which ceph-iscsi does not use "
				"together: the clients' credentials are carried over, not the target's",
			     what);
		build_acls(m, tg, iqn, t, luns);
		if (json_array_size(json_object_get(t, "acls")) == 0 && json_array_size(luns)) {
			/* LIO with ACLs on and no client admits nobody; ix with no ACLs admits
			   everyone: the LUNs are left out rather than opened to every initiator */
			note(m, "%s: ACLs are on (acl_enabled) and no client was carried over, so nobody "
				"could log in; ix without ACLs admits every initiator, so its %zu LUN(s) are "
				"left out (add the ACLs, then the LUNs)", what, json_array_size(luns));
			set(m, t, "luns", json_array());
		}
	} else {
		json_t *mcred = NULL;
		if (json_object_size(json_object_get(tg, "clients")))
			note(m, "%s: acl_enabled is false (every initiator sees every LUN): its %zu "
				"client entries (credentials, LUN maps) are not carried over", what,
			     json_object_size(json_object_get(tg, "clients")));
		bool ok = cred_of(m, auth, "", what, &cred);

		if (cred) {
			set(m, t, "chap", cred);
			if (cred_of(m, auth, "mutual_", what, &mcred) && mcred)
				set(m, t, "mutual_chap", mcred);
			set(m, t, "chap_required", json_true());
		} else if (!ok) {
			note(m, "%s: its LUNs are left out: CHAP protected it under ceph-iscsi and its "
				"credential is not carried over", what);
			set(m, t, "luns", json_array());
		} else {
			set(m, t, "chap_required", json_false());
		}
	}
	if (json_object_size(json_object_get(tg, "controls")))
		note_controls(m, json_object_get(tg, "controls"), what);
	return t;
}

/* RFC 7143 12.1.3 (and ix's loader): a mutual secret equal to any one-way secret is refused;
 * LIO took it. Such mutual credentials are dropped, each with a note. */
static void check_secret_directions(struct imp *m, json_t *doc)
{
	json_t *oneway = json_array(), *t, *a;
	size_t i, j;

	if (!oneway) {
		m->rc = -ENOMEM;
		return;
	}
#define ONEWAY(o)                                                                                \
	do {                                                                                     \
		json_t *s_ = json_object_get(json_object_get(o, "chap"), "secret");              \
		if (s_)                                                                          \
			append(m, oneway, json_incref(s_));                                      \
	} while (0)
	ONEWAY(json_object_get(json_object_get(doc, "global"), "discovery"));
	json_array_foreach(json_object_get(doc, "targets"), i, t)
	{
		ONEWAY(t);
		json_array_foreach(json_object_get(t, "acls"), j, a) ONEWAY(a);
	}
#undef ONEWAY
	json_t *d = json_object_get(json_object_get(doc, "global"), "discovery");
	json_t *objs[2];
	const char *names[2];
	size_t nobj;

	for (size_t ti = 0; ti <= json_array_size(json_object_get(doc, "targets")); ti++) {
		t = ti == 0 ? d : json_array_get(json_object_get(doc, "targets"), ti - 1);
		size_t na = ti == 0 ? 0 : json_array_size(json_object_get(t, "acls"));
		for (size_t ai = 0; t && ai <= na; ai++) {
			json_t *o = ai == 0 ? t : json_array_get(json_object_get(t, "acls"), ai - 1);
			json_t *ms = json_object_get(json_object_get(o, "mutual_chap"), "secret");
			bool same = false;
			size_t k;
			json_t *s;
			json_array_foreach(oneway, k, s) same = same || json_equal(s, ms);
			if (!ms || !same)
				continue;
			nobj = 0;
			objs[nobj] = o;
			names[nobj++] = ti == 0 ? "discovery" : str_of(t, "name");
			note(m, "%s%s%s: the mutual CHAP password equals a one-way CHAP password, which "
				"ix refuses (RFC 7143 12.1.3): mutual CHAP is not carried over; give the "
				"target its own password (and the initiator)",
			     names[0], ai ? ", client " : "", ai ? str_of(o, "initiator") : "");
			json_object_del(objs[0], "mutual_chap");
		}
	}
	json_decref(oneway);
}

int cephiscsi_import(const char *text, size_t len, const struct cephiscsi_opts *o, json_t **doc,
		     json_t **notes, char *err, size_t errlen)
{
	static const struct cephiscsi_opts none;
	struct imp m = {.o = o ? o : &none};
	json_error_t je;
	json_t *out = NULL, *targets, *members, *v;
	const char **tk = NULL;
	size_t ntk = 0;
	int rc = -EINVAL;

	*doc = NULL;
	*notes = NULL;
	if (len > CEPHISCSI_MAX_DOC) {
		snprintf(err, errlen, "%zu bytes: more than a gateway.conf can be (%u)", len,
			 CEPHISCSI_MAX_DOC);
		return -EINVAL;
	}
	m.in = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!m.in) {
		/* jansson quotes the text "near" the error: it may be a password */
		const char *near = strstr(je.text, " near ");
		snprintf(err, errlen, "not JSON: %.*s (line %d, column %d)",
			 near ? (int)(near - je.text) : (int)strlen(je.text), je.text, je.line,
			 je.column);
		return -EINVAL;
	}
	if (!json_is_object(m.in)) {
		snprintf(err, errlen, "not a gateway.conf: the top level is not an object");
		goto out;
	}
	v = json_object_get(m.in, "version");
	if (!json_is_integer(v)) {
		snprintf(err, errlen, "not a gateway.conf: no integer \"version\"");
		goto out;
	}
	if (json_integer_value(v) < CEPHISCSI_VERSION) {
		snprintf(err, errlen,
			 "gateway.conf version %lld is older than %d: start ceph-iscsi 3.x's "
			 "rbd-target-api once on every gateway (it upgrades the object), then import",
			 (long long)json_integer_value(v), CEPHISCSI_VERSION);
		goto out;
	}
	static const char *const objs[] = {"targets", "disks", "gateways"};
	for (size_t i = 0; i < 3; i++) {
		v = json_object_get(m.in, objs[i]);
		if (v && !json_is_object(v)) {
			snprintf(err, errlen, "not a gateway.conf: \"%s\" is not an object", objs[i]);
			goto out;
		}
	}
	v = json_object_get(m.in, "discovery_auth");
	if (v && !json_is_object(v)) {
		snprintf(err, errlen, "not a gateway.conf: \"discovery_auth\" is not an object");
		goto out;
	}
	rc = -ENOMEM;
	if (!(m.notes = json_array()) || !(m.used_disks = json_object()))
		goto out;
	if (json_integer_value(json_object_get(m.in, "version")) > CEPHISCSI_VERSION)
		note(&m, "gateway.conf version %lld is newer than %d, the one this importer knows: "
			 "check the result",
		     (long long)json_integer_value(json_object_get(m.in, "version")),
		     CEPHISCSI_VERSION);
	out = json_pack("{s:s, s:i, s:i, s:o, s:o, s:o}", "kind", "ix-group", "version", 1,
			"generation", 1, "global", json_object(), "members", json_array(),
			"targets", json_array());
	if (!out)
		goto out;
	tk = sorted_keys(&m, json_object_get(m.in, "targets"), &ntk);
	build_members(&m, tk, ntk);
	members = json_object_get(out, "members");
	{
		struct gw *all[MAX_GW];
		size_t na = 0;

		for (size_t i = 0; i < m.ngws; i++)
			if (m.gws[i].id)
				all[na++] = &m.gws[i];
		qsort(all, na, sizeof(all[0]), cmp_gw_id);
		for (size_t i = 0; i < na; i++)
			append(&m, members, json_pack("{s:s, s:i, s:O}", "name", all[i]->name, "id",
						      (int)all[i]->id, "portals", all[i]->portals));
	}
	targets = json_object_get(out, "targets");
	for (size_t i = 0; i < ntk; i++) {
		bool dup = false;
		for (size_t k = 0; k < i; k++)
			dup = dup || strcasecmp(tk[k], tk[i]) == 0;
		if (dup) {
			note(&m, "target %s: another target has that name (iSCSI names ignore case): "
				 "not carried over",
			     tk[i]);
			continue;
		}
		json_t *t = build_target(&m, tk[i]);
		if (t)
			append(&m, targets, t);
	}
	if (json_array_size(members) == 0 && m.rc == 0) {
		rc = -EINVAL;
		snprintf(err, errlen, "no gateway has a portal in any target: nothing to import");
		goto out;
	}
	/* discovery */
	json_t *da = json_object_get(m.in, "discovery_auth"), *dc = NULL, *dm = NULL;
	bool dok = cred_of(&m, da, "", "discovery", &dc);

	if (dc) {
		json_t *d = json_pack("{s:o}", "chap", dc);
		if (cred_of(&m, da, "mutual_", "discovery", &dm) && dm) {
			if (d)
				set(&m, d, "mutual_chap", dm);
			else
				json_decref(dm);
		}
		set(&m, json_object_get(out, "global"), "discovery", d);
	} else if (!dok) {
		note(&m, "discovery: CHAP is not carried over, so discovery sessions are open (set "
			 "it with ix-ctl)");
	}
	check_secret_directions(&m, out);
	if (m.rc)
		goto out;
	*doc = out;
	*notes = m.notes;
	out = NULL;
	m.notes = NULL;
	rc = 0;
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	for (size_t i = 0; i < m.ngws; i++)
		json_decref(m.gws[i].portals);
	free(tk);
	json_decref(out);
	json_decref(m.notes);
	json_decref(m.used_disks);
	json_decref(m.in);
	return rc;
}
