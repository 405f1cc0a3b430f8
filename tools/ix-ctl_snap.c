/* ix-ctl snap: snapshots and clones of RBD LUNs (docs/snapshots.md; the methods
 * iscsi_*_snapshot, docs/management.md). */
#include "ix-ctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_list(json_t *a)
{
	size_t i;
	json_t *s;

	if (json_array_size(a) == 0)
		printf("no snapshots\n");
	json_array_foreach(a, i, s)
	    printf("%s id %lld size %lld%s%s\n", json_string_value(json_object_get(s, "name")),
		   (long long)json_integer_value(json_object_get(s, "id")),
		   (long long)json_integer_value(json_object_get(s, "size")),
		   json_is_true(json_object_get(s, "protected")) ? " protected" : "",
		   json_integer_value(json_object_get(s, "clones")) ? " (has clones)" : "");
}

/* A call whose result is printed as one line (or JSON). */
static int act(const char *method, json_t *params, const char *what)
{
	json_t *r;
	int rc;

	if (opt_dry_run)
		return json_decref(params), die_usage("snap: no --dry-run (it acts at once)%s", "");
	rc = fetch(method, params, &r);
	if (rc)
		return rc;
	if (opt_json) {
		print_json(r);
	} else {
		printf("%s %s", what, json_string_value(json_object_get(r, "snapshot")));
		if (json_object_get(r, "held_ms") && json_object_get(r, "create_ms"))
			printf(" (writes held %lld ms: drain %lld ms, rbd_snap_create2 %lld ms)",
			       (long long)json_integer_value(json_object_get(r, "held_ms")),
			       (long long)json_integer_value(json_object_get(r, "drain_ms")),
			       (long long)json_integer_value(json_object_get(r, "create_ms")));
		else if (json_object_get(r, "held_ms"))
			printf(" (writes held %lld ms)",
			       (long long)json_integer_value(json_object_get(r, "held_ms")));
		if (json_object_get(r, "offline_ms"))
			printf(" (LUN not ready %lld ms)",
			       (long long)json_integer_value(json_object_get(r, "offline_ms")));
		if (json_object_get(r, "image"))
			printf(" into %s, LUN %lld of %s%s",
			       json_string_value(json_object_get(r, "image")),
			       (long long)json_integer_value(json_object_get(r, "lun")),
			       json_string_value(json_object_get(r, "target")),
			       json_is_true(json_object_get(r, "protected"))
				   ? " (the snapshot was protected for a v1 clone)"
				   : "");
		printf("\n");
	}
	json_decref(r);
	return 0;
}

static int timeout_opt(json_t *p, const char *v)
{
	long long ms;

	if (parse_int(v, 100, 600000, &ms) < 0)
		return -1;
	json_object_set_new(p, "timeout_ms", json_integer(ms));
	return 0;
}

int cmd_snap(int argc, char **argv)
{
	long long lun, nl;
	json_t *p;

	if (argc < 3)
		goto usage;
	if (parse_int(argv[2], 0, 255, &lun) < 0)
		return die_usage("bad LUN number '%s' (0-255)", argv[2]);
	p = json_pack("{s:s, s:I}", "target", argv[1], "lun", (json_int_t)lun);
	if (!p)
		return EXIT_FAILURE;
	if (strcmp(argv[0], "ls") == 0 && argc == 3)
		return show("iscsi_get_snapshots", p, print_list);
	if (argc < 4) {
		json_decref(p);
		goto usage;
	}
	json_object_set_new(p, "name", json_string(argv[3]));
	if (strcmp(argv[0], "delete") == 0 && argc == 4)
		return act("iscsi_delete_snapshot", p, "deleted");
	if (strcmp(argv[0], "create") == 0 || strcmp(argv[0], "rollback") == 0) {
		bool rb = argv[0][0] == 'r';

		for (int i = 4; i < argc; i++) {
			if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
				if (timeout_opt(p, argv[++i]) < 0)
					return json_decref(p),
					       die_usage("bad --timeout '%s' (100-600000 ms)",
							 argv[i]);
			} else if (rb && strcmp(argv[i], "--force") == 0) {
				json_object_set_new(p, "force", json_true());
			} else {
				json_decref(p);
				return die_usage("snap: unexpected '%s'", argv[i]);
			}
		}
		return rb ? act("iscsi_rollback_snapshot", p, "rolled back to")
			  : act("iscsi_create_snapshot", p, "created");
	}
	if (strcmp(argv[0], "clone") == 0 && argc >= 6) {
		if (parse_int(argv[5], 0, 255, &nl) < 0)
			return json_decref(p), die_usage("bad LUN number '%s' (0-255)", argv[5]);
		json_object_set_new(p, "image", json_string(argv[4]));
		json_object_set_new(p, "new_lun", json_integer(nl));
		for (int i = 6; i < argc; i++) {
			if (strcmp(argv[i], "--pool") == 0 && i + 1 < argc) {
				json_object_set_new(p, "pool", json_string(argv[++i]));
			} else if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) {
				json_object_set_new(p, "new_target", json_string(argv[++i]));
			} else {
				json_decref(p);
				return die_usage("snap clone: unexpected '%s'", argv[i]);
			}
		}
		return act("iscsi_clone_snapshot", p, "cloned");
	}
	json_decref(p);
usage:
	return die_usage("snap create|ls|delete|rollback|clone TARGET LUN [NAME] ...%s", "");
}
