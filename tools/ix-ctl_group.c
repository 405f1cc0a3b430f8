/* ix-ctl group: the gateway group (docs/ha.md "The gateway group", docs/management.md):
 *   group status                                    members, generations, health, LUN locks
 *   group member add NAME --portal ADDR[:PORT] [--portal ...] [--id N]
 *   group member remove NAME
 *   group init MEMBER [--pool P] [--namespace N] [--object O] [--ceph-conf PATH]
 *              [--ceph-client ID] [--keyring PATH]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ix-ctl.h"

static void print_status(json_t *r)
{
	json_t *m, *l;
	size_t i, j;

	printf("group %s, generation %lld (this gateway: %s)\n", jstr(r, "object", "?"),
	       (long long)json_integer_value(json_object_get(r, "generation")),
	       jstr(r, "member", "?"));
	if (json_is_string(json_object_get(r, "document_error")))
		printf("  the document cannot be used: %s\n", jstr(r, "document_error", ""));
	json_array_foreach(json_object_get(r, "members"), i, m)
	{
		printf("  %-16s id %-5lld generation %-6lld %s%s%s\n", jstr(m, "name", "?"),
		       (long long)json_integer_value(json_object_get(m, "id")),
		       (long long)json_integer_value(json_object_get(m, "generation")),
		       jstr(m, "health", "?"), json_is_string(json_object_get(m, "error")) ? ": " : "",
		       jstr(m, "error", ""));
		json_array_foreach(json_object_get(m, "luns"), j, l)
			printf("      %s LUN %lld: lock %s\n", jstr(l, "target", "?"),
			       (long long)json_integer_value(json_object_get(l, "lun")),
			       jstr(l, "lock", "?"));
	}
}

/* ADDR[:PORT] ([V6]:PORT for IPv6) as a portal object. */
static json_t *portal_arg(const char *s)
{
	char addr[256];
	const char *colon;
	long long port = 3260;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || (size_t)(end - s - 1) >= sizeof(addr))
			return NULL;
		snprintf(addr, sizeof(addr), "%.*s", (int)(end - s - 1), s + 1);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return NULL;
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon)
			colon = NULL; /* a bare IPv6 address */
		snprintf(addr, sizeof(addr), "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
	}
	if (colon && parse_int(colon + 1, 1, 65535, &port) < 0)
		return NULL;
	if (!addr[0])
		return NULL;
	return json_pack("{s:s, s:I}", "address", addr, "port", (json_int_t)port);
}

static int member_add(int argc, char **argv)
{
	json_t *portals = json_array(), *params;
	long long id = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--portal") == 0 && i + 1 < argc) {
			json_t *p = portal_arg(argv[++i]);
			if (!p) {
				json_decref(portals);
				return die_usage("bad portal '%s' (ADDRESS[:PORT])", argv[i]);
			}
			json_array_append_new(portals, p);
		} else if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
			if (parse_int(argv[++i], 1, 65535, &id) < 0) {
				json_decref(portals);
				return die_usage("bad id '%s' (1-65535)", argv[i]);
			}
		} else {
			json_decref(portals);
			return die_usage("group member add NAME --portal ADDRESS[:PORT]... [--id N]%s",
					 "");
		}
	}
	if (json_array_size(portals) == 0) {
		json_decref(portals);
		return die_usage("group member add %s: at least one --portal ADDRESS[:PORT]", argv[0]);
	}
	params = json_pack("{s:s, s:o}", "name", argv[0], "portals", portals);
	if (id)
		json_object_set_new(params, "id", json_integer(id));
	return run("group_add_member", params, "member added");
}

static int init(int argc, char **argv)
{
	static const char *const opts[][2] = {
	    {"--pool", "pool"},		{"--namespace", "namespace"}, {"--object", "object"},
	    {"--ceph-conf", "conf"},	{"--ceph-client", "client"},  {"--keyring", "keyring"}};
	json_t *g = json_pack("{s:s}", "member", argv[0]);

	for (int i = 1; i < argc; i++) {
		size_t k = 0;
		while (k < sizeof(opts) / sizeof(opts[0]) && strcmp(argv[i], opts[k][0]) != 0)
			k++;
		if (k == sizeof(opts) / sizeof(opts[0]) || i + 1 >= argc) {
			json_decref(g);
			return die_usage("group init MEMBER [--pool P] [--namespace N] [--object O] "
					 "[--ceph-conf PATH] [--ceph-client ID] [--keyring PATH]%s",
					 "");
		}
		json_object_set_new(g, opts[k][1], json_string(argv[++i]));
	}
	return run("group_init", json_pack("{s:o}", "group", g), "group document written");
}

int cmd_group(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[0], "init") == 0)
		return init(argc - 1, argv + 1);
	if (argc == 1 && strcmp(argv[0], "status") == 0)
		return show("group_get_status", json_object(), print_status);
	if (argc >= 3 && strcmp(argv[0], "member") == 0 && strcmp(argv[1], "add") == 0)
		return member_add(argc - 2, argv + 2);
	if (argc == 3 && strcmp(argv[0], "member") == 0 && strcmp(argv[1], "remove") == 0)
		return run("group_remove_member", json_pack("{s:s}", "name", argv[2]),
			   "member removed");
	return die_usage("group status | group member add NAME --portal ADDRESS[:PORT] | group "
			 "member remove NAME | group init MEMBER [options]%s",
			 "");
}
