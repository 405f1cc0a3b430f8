/* ix-ctl call and ix-ctl methods: any method the daemon declares (rpc_get_methods with
 * "detail"), its parameters given as key=value and converted by their declared type. */
#include "ix-ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The daemon's declared methods: 0 with *out (an array of {name, help, params}), or the exit
 * code (already reported). */
static int methods_detail(json_t **out)
{
	return fetch("rpc_get_methods", json_pack("{s:b}", "detail", 1), out);
}

static json_t *find_method(json_t *methods, const char *name)
{
	size_t i;
	json_t *m;

	json_array_foreach(methods, i, m)
		if (strcmp(jstr(m, "name", ""), name) == 0)
			return m;
	return NULL;
}

static void print_params(FILE *f, json_t *m)
{
	size_t i;
	json_t *p;

	if (json_array_size(json_object_get(m, "params")) == 0)
		fprintf(f, "    (no parameters)\n");
	json_array_foreach(json_object_get(m, "params"), i, p)
		fprintf(f, "    %s=%s%s  %s\n", json_string_value(json_object_get(p, "name")),
			json_string_value(json_object_get(p, "type")),
			json_is_true(json_object_get(p, "required")) ? " (required)" : "",
			jstr(p, "help", ""));
}

static void print_method(FILE *f, json_t *m)
{
	fprintf(f, "%s  %s\n", json_string_value(json_object_get(m, "name")),
		jstr(m, "help", ""));
	print_params(f, m);
}

/* value converted to the declared type, or NULL (the message printed). */
static json_t *convert(const char *key, const char *type, const char *value)
{
	json_error_t je;
	json_t *v;

	if (strcmp(type, "string") == 0)
		return json_string(value);
	if (strcmp(type, "integer") == 0) {
		char *end;
		long long n;

		errno = 0;
		n = strtoll(value, &end, 0);
		if (!*value || *end || errno) {
			fprintf(stderr, "ix-ctl: %s: an integer, not '%s'\n", key, value);
			return NULL;
		}
		return json_integer(n);
	}
	if (strcmp(type, "boolean") == 0) {
		if (strcmp(value, "true") == 0)
			return json_true();
		if (strcmp(value, "false") == 0)
			return json_false();
		fprintf(stderr, "ix-ctl: %s: true or false, not '%s'\n", key, value);
		return NULL;
	}
	/* object, array: JSON (null removes a setting where the method says so) */
	v = json_loads(value, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!v) {
		fprintf(stderr, "ix-ctl: %s: %s (column %d)\n", key, je.text, je.column);
		return NULL;
	}
	if (!json_is_null(v) && ((strcmp(type, "object") == 0 && !json_is_object(v)) ||
				 (strcmp(type, "array") == 0 && !json_is_array(v)))) {
		fprintf(stderr, "ix-ctl: %s: a JSON %s\n", key, type);
		json_decref(v);
		return NULL;
	}
	return v;
}

/* params of method m from key=value arguments: 0, or EXIT_USAGE (reported). */
static int build_params(json_t *m, int argc, char **argv, json_t *params)
{
	json_t *decl = json_object_get(m, "params"), *p;
	const char *name = json_string_value(json_object_get(m, "name"));
	size_t i;

	for (int a = 0; a < argc; a++) {
		char *eq = strchr(argv[a], '=');
		json_t *found = NULL, *v;

		if (!eq || eq == argv[a]) {
			fprintf(stderr, "ix-ctl: '%s': parameters are KEY=VALUE\n", argv[a]);
			goto bad;
		}
		*eq = '\0';
		json_array_foreach(decl, i, p)
			if (strcmp(json_string_value(json_object_get(p, "name")), argv[a]) == 0)
				found = p;
		if (!found) {
			fprintf(stderr, "ix-ctl: %s has no parameter '%s'\n", name, argv[a]);
			goto bad;
		}
		if (json_object_get(params, argv[a])) {
			fprintf(stderr, "ix-ctl: %s given twice\n", argv[a]);
			goto bad;
		}
		v = convert(argv[a], json_string_value(json_object_get(found, "type")), eq + 1);
		if (!v)
			goto bad;
		json_object_set_new(params, argv[a], v);
	}
	json_array_foreach(decl, i, p)
	{
		const char *k = json_string_value(json_object_get(p, "name"));

		if (json_is_true(json_object_get(p, "required")) && !json_object_get(params, k)) {
			fprintf(stderr, "ix-ctl: %s needs %s\n", name, k);
			goto bad;
		}
	}
	return 0;
bad:
	fprintf(stderr, "parameters of %s:\n", name);
	print_params(stderr, m);
	return EXIT_USAGE;
}

int cmd_call(int argc, char **argv)
{
	json_t *methods, *m, *params;
	int r;

	if (argc < 1)
		return die_usage("call METHOD [KEY=VALUE]...%s", "");
	r = methods_detail(&methods);
	if (r)
		return r;
	m = find_method(methods, argv[0]);
	if (!m) {
		json_decref(methods);
		return die_usage("the daemon has no method '%s' (ix-ctl methods lists them)", argv[0]);
	}
	params = json_object();
	if (!params) {
		json_decref(methods);
		return EXIT_UNREACHABLE;
	}
	r = build_params(m, argc - 1, argv + 1, params);
	if (!r && opt_dry_run) {
		bool has = false;
		size_t i;
		json_t *p;

		json_array_foreach(json_object_get(m, "params"), i, p)
			has |= strcmp(json_string_value(json_object_get(p, "name")), "dry_run") == 0;
		if (has)
			json_object_set_new(params, "dry_run", json_true());
		else
			r = die_usage("%s has no dry run", argv[0]);
	}
	json_decref(methods);
	if (r) {
		json_decref(params);
		return r;
	}
	/* the result as JSON, with --json or not */
	return show(argv[0], params, print_json);
}

int cmd_methods(int argc, char **argv)
{
	json_t *methods, *m;
	size_t i;
	int r;

	if (argc > 1)
		return die_usage("methods [METHOD]%s", "");
	r = methods_detail(&methods);
	if (r)
		return r;
	if (argc == 1) {
		m = find_method(methods, argv[0]);
		if (!m) {
			json_decref(methods);
			return die_usage("the daemon has no method '%s'", argv[0]);
		}
		if (opt_json)
			print_json(m);
		else
			print_method(stdout, m);
	} else if (opt_json) {
		print_json(methods);
	} else {
		json_array_foreach(methods, i, m)
			print_method(stdout, m);
	}
	json_decref(methods);
	return 0;
}
