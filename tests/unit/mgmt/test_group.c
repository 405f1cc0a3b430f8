/* The gateway group's document (ha/ha_group_doc.c) and its edits (mgmt/mgmt_group.c): the
 * checks, a member's derived configuration (portals, targets, ALUA groups from the
 * membership) through the real configuration loader, the way back from an edit, and the
 * compare-and-swap loop against a stub object that another gateway writes to at the worst
 * moment. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_group_doc.h"
#include "mgmt/mgmt_group.h"
#include "target/config.h"
#include "tap.h"

static const char DOC[] =
    "{\"kind\": \"ix-group\", \"version\": 1, \"generation\": 3,"
    " \"global\": {\"nop_interval_ms\": 5000},"
    " \"members\": ["
    "  {\"name\": \"gw-a\", \"id\": 1, \"portals\": [{\"address\": \"127.0.0.1\", \"port\": 3261}]},"
    "  {\"name\": \"gw-b\", \"id\": 2, \"portals\": [{\"address\": \"127.0.0.2\"}]},"
    "  {\"name\": \"gw-c\", \"id\": 7, \"portals\": [{\"address\": \"127.0.0.3\"}]}],"
    " \"targets\": ["
    "  {\"name\": \"iqn.2026-11.io.ix:all\", \"luns\": [{\"lun\": 0, \"backend\": \"ram\","
    "    \"size\": \"1M\", \"naa_id\": \"0x6001405a1a2b3c4d\"}],"
    "   \"acls\": [{\"initiator\": \"iqn.1994-05.com.redhat:c\","
    "     \"chap\": {\"user\": \"u\", \"secret\": \"s3cret-s3cret\"}}],"
    "   \"alua\": {\"transition_time\": 5}},"
    "  {\"name\": \"iqn.2026-11.io.ix:ab\", \"members\": [\"gw-a\", \"gw-b\"],"
    "   \"luns\": [{\"lun\": 0, \"backend\": \"ram\", \"size\": \"1M\"}]}]}";

static const char LOCAL[] =
    "{\"group\": {\"pool\": \"rbd\", \"member\": \"gw-a\", \"client\": \"ixgw\"},"
    " \"global\": {\"mgmt_socket\": \"/tmp/x.sock\"}}";

static json_t *js(const char *s)
{
	json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);

	if (!j) {
		printf("# bad test JSON: %s\n", s);
		exit(1);
	}
	return j;
}

static json_t *target_named(json_t *e, const char *name)
{
	json_t *t;
	size_t i;

	json_array_foreach(json_object_get(e, "targets"), i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			return t;
	return NULL;
}

static int loads(json_t *e)
{
	char *text = json_dumps(e, 0), err[512];
	struct ix_config *cfg = NULL;
	int rc = cfg_load_string(text, "derived", &cfg, err, sizeof(err));

	if (rc)
		printf("# %s\n", err);
	free(text);
	cfg_free(cfg);
	return rc;
}

static void test_ref(void)
{
	struct ha_group_ref ref;
	char err[256];
	json_t *l = js(LOCAL);

	CHECK_EQ(ha_group_ref_parse(l, &ref, err, sizeof(err)), 0);
	CHECK_STR(ref.member, "gw-a");
	CHECK_STR(ref.object, "ix.group");
	CHECK_STR(ref.client, "ixgw");
	CHECK_EQ(ref.poll_ms, HA_GROUP_POLL_MS);
	json_decref(l);
	l = js("{\"portals\": []}");
	CHECK_EQ(ha_group_ref_parse(l, &ref, err, sizeof(err)), -ENOENT);
	json_decref(l);
	l = js("{\"group\": {\"member\": \"gw-a\"}, \"targets\": []}");
	CHECK_EQ(ha_group_ref_parse(l, &ref, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "targets") != NULL);
	json_decref(l);
	l = js("{\"group\": {\"member\": \"gw a/\"}}");
	CHECK_EQ(ha_group_ref_parse(l, &ref, err, sizeof(err)), -EINVAL);
	json_decref(l);
	l = js("{\"group\": {\"pool\": \"rbd\"}}");
	CHECK_EQ(ha_group_ref_parse(l, &ref, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "member") != NULL);
	json_decref(l);
	l = js("{\"group\": {\"member\": \"a\", \"poll\": 1}}");
	CHECK_EQ(ha_group_ref_parse(l, &ref, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "group.poll") != NULL);
	json_decref(l);
}

/* Each case: a change to DOC, and a word its error must have. */
static void test_check(void)
{
	static const struct {
		const char *path, *json, *word;
	} bad[] = {
	    {"kind", "\"ix\"", "kind"},
	    {"version", "2", "version"},
	    {"generation", "0", "generation"},
	    {"members", "[]", "members"},
	    {"members", "[{\"name\": \"a\", \"id\": 1, \"portals\": [{\"address\": \"x\"}]},"
			"{\"name\": \"b\", \"id\": 1, \"portals\": [{\"address\": \"y\"}]}]",
	     "members[1].id"},
	    {"members", "[{\"name\": \"a\", \"id\": 1, \"portals\": [{\"address\": \"x\"}]},"
			"{\"name\": \"a\", \"id\": 2, \"portals\": [{\"address\": \"y\"}]}]",
	     "members[1].name"},
	    {"members", "[{\"name\": \"a\", \"id\": 70000, \"portals\": [{\"address\": \"x\"}]}]",
	     "members[0].id"},
	    {"members", "[{\"name\": \"a\", \"id\": 1, \"portals\": [{\"port\": 1}]}]",
	     "address"},
	    {"members", "[{\"name\": \"a\", \"id\": 1, \"portals\": [{\"address\": \"x\", "
			"\"tpgt\": 3}]}]",
	     "tpgt"},
	    {"global", "{\"mgmt_socket\": \"/x\"}", "global.mgmt_socket"},
	    {"targets", "[{\"name\": \"iqn.x:y\", \"members\": [\"nobody\"]}]", "members[0]"},
	    {"targets", "[{\"name\": \"iqn.x:y\", \"portals\": [\"p\"]}]", "portals"},
	    {"targets", "[{\"name\": \"iqn.x:y\", \"alua\": {\"groups\": []}}]", "groups"},
	    {"targets", "[{\"name\": \"iqn.x:y\"}, {\"name\": \"IQN.x:y\"}]", "targets[1].name"},
	    {"extra", "1", "extra"},
	};
	char err[512];
	json_t *d = js(DOC);

	CHECK_EQ(ha_group_doc_check(d, err, sizeof(err)), 0);
	CHECK_EQ(ha_group_generation(d), 3);
	CHECK_EQ(ha_group_member_id(d, "gw-c"), 7);
	CHECK_EQ(ha_group_member_id(d, "gw-x"), 0);
	json_decref(d);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		d = js(DOC);
		json_object_set_new(d, bad[i].path, js(bad[i].json));
		err[0] = '\0';
		CHECK_EQ(ha_group_doc_check(d, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, bad[i].word) != NULL);
		if (!strstr(err, bad[i].word))
			printf("# case %zu: %s\n", i, err);
		json_decref(d);
	}
}

static void test_derive(void)
{
	json_t *d = js(DOC), *l = js(LOCAL), *e = NULL, *t, *g, *p;
	char err[512], *text;

	CHECK_EQ(ha_group_derive(l, d, "gw-a", &e, err, sizeof(err)), 0);
	CHECK_EQ(loads(e), 0);
	/* portals: the member's, named <member>-<k>, tpgt = id */
	p = json_array_get(json_object_get(e, "portals"), 0);
	CHECK_EQ(json_array_size(json_object_get(e, "portals")), 1);
	CHECK_STR(json_string_value(json_object_get(p, "name")), "gw-a-1");
	CHECK_EQ(json_integer_value(json_object_get(p, "tpgt")), 1);
	CHECK_EQ(json_integer_value(json_object_get(p, "port")), 3261);
	/* global: the group's and the local file's */
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(e, "global"), "nop_interval_ms")),
		 5000);
	CHECK_STR(json_string_value(json_object_get(json_object_get(e, "global"), "mgmt_socket")),
		  "/tmp/x.sock");
	CHECK(!json_object_get(e, "group"));
	/* both targets, ALUA derived: one group per member, this one with its portal */
	CHECK_EQ(json_array_size(json_object_get(e, "targets")), 2);
	t = target_named(e, "iqn.2026-11.io.ix:all");
	CHECK(!json_object_get(t, "members"));
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(t, "alua"), "transition_time")),
		 5);
	g = json_object_get(json_object_get(t, "alua"), "groups");
	CHECK_EQ(json_array_size(g), 3);
	text = json_dumps(g, JSON_COMPACT);
	CHECK_STR(text, "[{\"id\":1,\"state\":\"active/optimized\",\"portals\":[\"gw-a-1\"]},"
			"{\"id\":2,\"state\":\"active/optimized\",\"relative_ports\":[2]},"
			"{\"id\":7,\"state\":\"active/optimized\",\"relative_ports\":[7]}]");
	free(text);
	g = json_object_get(json_object_get(target_named(e, "iqn.2026-11.io.ix:ab"), "alua"),
			    "groups");
	CHECK_EQ(json_array_size(g), 2);
	json_decref(e);

	/* gw-c exports only the first target */
	CHECK_EQ(ha_group_derive(NULL, d, "gw-c", &e, err, sizeof(err)), 0);
	CHECK_EQ(loads(e), 0);
	CHECK_EQ(json_array_size(json_object_get(e, "targets")), 1);
	p = json_array_get(json_object_get(e, "portals"), 0);
	CHECK_EQ(json_integer_value(json_object_get(p, "tpgt")), 7);
	json_decref(e);

	/* not a member */
	CHECK_EQ(ha_group_derive(l, d, "gw-z", &e, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "gw-z") != NULL);

	/* RBD with exclusive_lock: standby everywhere, the lock decides */
	json_object_set_new(json_array_get(json_object_get(target_named(d, "iqn.2026-11.io.ix:ab"),
							    "luns"), 0),
			    "rbd", js("{\"pool\": \"rbd\", \"image\": \"i\", \"exclusive_lock\": true}"));
	json_object_set_new(json_array_get(json_object_get(target_named(d, "iqn.2026-11.io.ix:ab"),
							    "luns"), 0),
			    "backend", json_string("rbd"));
	json_object_del(json_array_get(json_object_get(target_named(d, "iqn.2026-11.io.ix:ab"),
						       "luns"), 0),
			"size");
	CHECK_EQ(ha_group_derive(l, d, "gw-b", &e, err, sizeof(err)), 0);
	g = json_object_get(json_object_get(target_named(e, "iqn.2026-11.io.ix:ab"), "alua"),
			    "groups");
	CHECK_STR(json_string_value(json_object_get(json_array_get(g, 0), "state")), "standby");
	CHECK_STR(json_string_value(json_object_get(json_array_get(g, 1), "state")), "standby");
	/* gw-b derived with gw-a's local file: its portal names follow gw-b */
	CHECK_STR(json_string_value(json_array_get(json_object_get(json_array_get(g, 1), "portals"),
						   0)),
		  "gw-b-1");
	json_decref(e);

	/* local portals: kept, tpgt forced to the id, another tpgt refused */
	json_object_set_new(l, "portals",
			    js("[{\"name\": \"p\", \"address\": \"127.0.0.1\", \"port\": 3262}]"));
	CHECK_EQ(ha_group_derive(l, d, "gw-a", &e, err, sizeof(err)), 0);
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(json_object_get(e, "portals"), 0),
						    "tpgt")),
		 1);
	CHECK_EQ(loads(e), 0);
	json_decref(e);
	/* a local portal without a name is named as the member's own would be, and the ALUA
	 * group lists it (it was a NULL in the group's portals: "out of memory") */
	json_object_set_new(l, "portals", js("[{\"address\": \"127.0.0.1\", \"port\": 3262}]"));
	CHECK_EQ(ha_group_derive(l, d, "gw-a", &e, err, sizeof(err)), 0);
	CHECK_STR(json_string_value(json_object_get(
		      json_array_get(json_object_get(e, "portals"), 0), "name")),
		  "gw-a-1");
	CHECK_EQ(loads(e), 0);
	json_decref(e);
	json_object_set_new(l, "portals",
			    js("[{\"name\": \"p\", \"address\": \"127.0.0.1\", \"tpgt\": 9}]"));
	CHECK_EQ(ha_group_derive(l, d, "gw-a", &e, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "tpgt") != NULL);
	json_decref(l);
	json_decref(d);
}

/* An edit of gw-a's effective configuration goes back into the document. */
static void test_lift(void)
{
	json_t *d = js(DOC), *l = js(LOCAL), *olde, *newe, *nd, *t;
	char err[512];

	ha_group_derive(l, d, "gw-a", &olde, err, sizeof(err));
	newe = json_deep_copy(olde);
	/* add a LUN to "ab", a new target, drop "all" */
	t = target_named(newe, "iqn.2026-11.io.ix:ab");
	json_array_append_new(json_object_get(t, "luns"),
			      js("{\"lun\": 1, \"backend\": \"ram\", \"size\": \"2M\"}"));
	json_array_append_new(json_object_get(newe, "targets"),
			      js("{\"name\": \"iqn.2026-11.io.ix:new\", \"luns\": []}"));
	json_array_remove(json_object_get(newe, "targets"), 0);
	json_object_set_new(json_object_get(newe, "global"), "nop_interval_ms", json_integer(7000));
	CHECK_EQ(ha_group_lift(d, olde, newe, "gw-a", &nd, err, sizeof(err)), 0);
	CHECK_EQ(ha_group_generation(nd), 4);
	CHECK_EQ(ha_group_doc_check(nd, err, sizeof(err)), 0);
	CHECK_EQ(mgmt_group_validate(nd, l, "gw-a", err, sizeof(err)), 0);
	CHECK(target_named(nd, "iqn.2026-11.io.ix:all") == NULL);
	t = target_named(nd, "iqn.2026-11.io.ix:ab");
	CHECK_EQ(json_array_size(json_object_get(t, "luns")), 2);
	CHECK_EQ(json_array_size(json_object_get(t, "members")), 2); /* kept */
	CHECK(json_object_get(t, "alua") == NULL);                    /* derived: not taken */
	CHECK(target_named(nd, "iqn.2026-11.io.ix:new") != NULL);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(nd, "global"),
						    "nop_interval_ms")),
		 7000);
	CHECK(json_object_get(json_object_get(nd, "global"), "mgmt_socket") == NULL);
	json_decref(nd);
	json_decref(newe);

	/* per gateway: refused */
	newe = json_deep_copy(olde);
	json_object_set_new(json_object_get(newe, "global"), "mgmt_socket", json_string("/y"));
	CHECK_EQ(ha_group_lift(d, olde, newe, "gw-a", &nd, err, sizeof(err)), -EPERM);
	json_decref(newe);
	newe = json_deep_copy(olde);
	json_object_set_new(newe, "portals", js("[]"));
	CHECK_EQ(ha_group_lift(d, olde, newe, "gw-a", &nd, err, sizeof(err)), -EPERM);
	json_decref(newe);
	json_decref(olde);

	/* gw-c creates a target the group has but gw-c does not export */
	ha_group_derive(NULL, d, "gw-c", &olde, err, sizeof(err));
	newe = json_deep_copy(olde);
	json_array_append_new(json_object_get(newe, "targets"),
			      js("{\"name\": \"iqn.2026-11.io.ix:ab\", \"luns\": []}"));
	CHECK_EQ(ha_group_lift(d, olde, newe, "gw-c", &nd, err, sizeof(err)), -EEXIST);
	CHECK(strstr(err, "gw-c") != NULL);
	json_decref(newe);
	json_decref(olde);

	/* a document a member cannot load: validation names the member */
	nd = js(DOC);
	json_object_set_new(json_array_get(json_object_get(nd, "members"), 2), "portals",
			    js("[{\"address\": \"not an address\"}]"));
	CHECK_EQ(mgmt_group_validate(nd, l, "gw-a", err, sizeof(err)), -EINVAL);
	CHECK(strncmp(err, "member gw-c: ", 13) == 0);
	json_decref(nd);
	json_decref(l);
	json_decref(d);
}

/* ---- the compare-and-swap loop against a stub object ---- */

struct stub {
	char *text;
	uint64_t ver;
	int writes, reads;
	int race;        /* before this many reads have been answered, another edit lands */
	const char *race_target; /* the target it adds a LUN to */
};

static void stub_other_edit(struct stub *s)
{
	json_t *d = js(s->text), *t = target_named(d, s->race_target);

	json_array_append_new(json_object_get(t, "luns"),
			      json_pack("{s:I, s:s, s:s}", "lun", (json_int_t)(100 + s->ver),
					"backend", "ram", "size", "1M"));
	json_object_set_new(d, "generation", json_integer((json_int_t)ha_group_generation(d) + 1));
	free(s->text);
	s->text = json_dumps(d, 0);
	s->ver++;
	json_decref(d);
}

static int stub_read(void *arg, char **text, size_t *len, uint64_t *ver, char *err, size_t errlen)
{
	struct stub *s = arg;

	(void)err, (void)errlen;
	*text = strdup(s->text);
	*len = strlen(s->text);
	*ver = s->ver;
	/* the other gateway writes between this read and the write that follows */
	if (++s->reads <= s->race)
		stub_other_edit(s);
	return 0;
}

static int stub_write(void *arg, const char *text, size_t len, uint64_t ver, char *err,
		      size_t errlen)
{
	struct stub *s = arg;

	if (ver != s->ver) {
		snprintf(err, errlen, "conflict");
		return -ECANCELED;
	}
	free(s->text);
	s->text = strndup(text, len);
	s->ver++;
	s->writes++;
	return 0;
}

static void test_cas(void)
{
	json_t *base = js(DOC), *l = js(LOCAL), *olde, *newe, *w = NULL, *t;
	struct stub s = {.text = strdup(DOC), .ver = 10};
	struct mgmt_group_io io = {stub_read, stub_write, &s};
	char err[512];

	ha_group_derive(l, base, "gw-a", &olde, err, sizeof(err));
	newe = json_deep_copy(olde);
	json_array_append_new(json_object_get(target_named(newe, "iqn.2026-11.io.ix:ab"), "luns"),
			      js("{\"lun\": 1, \"backend\": \"ram\", \"size\": \"2M\"}"));

	/* no one else: written at once */
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", false, &w, err, sizeof(err)), 0);
	CHECK_EQ(s.writes, 1);
	CHECK_EQ(ha_group_generation(w), 4);
	json_decref(w);

	/* an edit that changes nothing in the document: no new generation, nothing written */
	free(s.text);
	s = (struct stub){.text = strdup(DOC), .ver = 10};
	CHECK_EQ(mgmt_group_edit(&io, base, olde, olde, l, "gw-a", false, &w, err, sizeof(err)), 0);
	CHECK_EQ(s.writes, 0);
	CHECK_EQ(ha_group_generation(w), 3);
	json_decref(w);

	/* dry run: every check, nothing written */
	free(s.text);
	s = (struct stub){.text = strdup(DOC), .ver = 10};
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", true, &w, err, sizeof(err)), 0);
	CHECK_EQ(s.writes, 0);
	CHECK(w != NULL);
	json_decref(w);

	/* another gateway changes ANOTHER target between the read and the write: the write
	   loses the race, the edit still applies: read again, both changes kept */
	free(s.text);
	s = (struct stub){.text = strdup(DOC), .ver = 10, .race = 1,
			  .race_target = "iqn.2026-11.io.ix:all"};
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", false, &w, err, sizeof(err)), 0);
	CHECK_EQ(s.reads, 2);
	CHECK_EQ(s.writes, 1);
	CHECK_EQ(ha_group_generation(w), 5);
	t = target_named(w, "iqn.2026-11.io.ix:all");
	CHECK_EQ(json_array_size(json_object_get(t, "luns")), 2); /* the other edit's LUN 9 */
	t = target_named(w, "iqn.2026-11.io.ix:ab");
	CHECK_EQ(json_array_size(json_object_get(t, "luns")), 2); /* ours */
	json_decref(w);

	/* ... the SAME target: a conflict, nothing written, the error says so */
	free(s.text);
	s = (struct stub){.text = strdup(DOC), .ver = 10, .race = 1,
			  .race_target = "iqn.2026-11.io.ix:ab"};
	w = NULL;
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", false, &w, err, sizeof(err)),
		 -ECANCELED);
	CHECK(w == NULL);
	CHECK_EQ(s.writes, 0);
	CHECK(strstr(err, "conflict") != NULL && strstr(err, "iqn.2026-11.io.ix:ab") != NULL);

	/* a base older than the object (the edit was made before this gateway applied another
	   one of the same target): the same conflict without any race */
	free(s.text);
	s = (struct stub){.text = strdup(DOC), .ver = 10};
	s.race_target = "iqn.2026-11.io.ix:ab";
	stub_other_edit(&s);
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", false, &w, err, sizeof(err)),
		 -ECANCELED);

	/* losing every race: bounded, then the conflict */
	free(s.text);
	s = (struct stub){.text = strdup(DOC), .ver = 10, .race = 100,
			  .race_target = "iqn.2026-11.io.ix:all"};
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", false, &w, err, sizeof(err)),
		 -ECANCELED);
	CHECK(s.reads <= 4);

	/* a damaged object: refused, nothing written */
	free(s.text);
	s = (struct stub){.text = strdup("{\"kind\": \"ix-group\", \"secret\": \"zzz\""), .ver = 1};
	CHECK_EQ(mgmt_group_edit(&io, base, olde, newe, l, "gw-a", false, &w, err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, "damaged") != NULL && strstr(err, "zzz") == NULL);
	free(s.text);
	json_decref(newe);
	json_decref(olde);
	json_decref(l);
	json_decref(base);
}

int main(void)
{
	test_ref();
	test_check();
	test_derive();
	test_lift();
	test_cas();
	return tap_done();
}
