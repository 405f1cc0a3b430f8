/* ix-ctl: the administration CLI of ix-target, a client of its JSON-RPC socket
 * (docs/management.md).
 *
 *   ix-ctl [-s SOCKET] [--json] [--dry-run] COMMAND ...
 *
 * Exit status: 0 done; 1 the daemon refused the request (its message on stderr; with --json the
 * JSON-RPC error object on stdout); 2 usage error; 3 the daemon could not be reached or its
 * answer was not understood.
 */
#include "ix-ctl.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/ix/ix-target.sock"
#define TIMEOUT_MS     30000

static const char *sock_path;
bool opt_json, opt_dry_run;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ix-ctl [-s SOCKET] [--json] [--dry-run] COMMAND ...\n"
		"  ls                                   portals, targets, LUNs and ACLs as a tree\n"
		"  save [FILE]                          write the running configuration (default:\n"
		"                                       the daemon's configuration file)\n"
		"  rpc METHOD [PARAMS]                  raw JSON-RPC call; PARAMS is a JSON object\n"
		"  call METHOD [KEY=VALUE]...           any method, its parameters converted by the\n"
		"                                       types the daemon declares (JSON for objects\n"
		"                                       and arrays, true/false for booleans)\n"
		"  methods [METHOD]                     the daemon's methods, parameters and help\n"
		"  portal create NAME ADDRESS [PORT] [--tpgt N] [--iser] [--no-tcp]\n"
		"  portal delete NAME\n"
		"  target create NAME [--alias TEXT] [--portal NAME]...\n"
		"  target delete NAME\n"
		"  target set NAME alias=TEXT max_sessions=N chap_required=on|off (or =default)\n"
		"  lun create TARGET LUN (--ram SIZE | --file PATH [--size SIZE] | --block PATH |\n"
		"             --rbd POOL/[NAMESPACE/]IMAGE [--ceph-conf PATH] [--ceph-client ID]\n"
		"             [--keyring PATH] [--exclusive-lock]) (an RBD image must exist:\n"
		"             rbd create --size SIZE POOL/IMAGE)\n"
		"             [--block-size 512|4096] [--readonly] [--thin] [--write-cache]\n"
		"  lun delete TARGET LUN\n"
		"  lun resize TARGET LUN SIZE [--force] grow a file, block, RAM or RBD LUN online\n"
		"                                       (--force: shrink an RBD LUN, DANGEROUS: the\n"
		"                                       data past the new end is gone)\n"
		"  lun offline|online TARGET LUN        take a LUN offline (NOT READY) or back\n"
		"  lun status TARGET                    each LUN's state: online/offline and why, RBD lock\n"
		"                                       and cluster connection (fenced, rejoining)\n"
		"  lun rejoin TARGET LUN                a fenced RBD LUN rejoins the cluster now\n"
		"  lun set TARGET LUN write_cache=on|off|default readonly=on|off|default\n"
		"  snap create TARGET LUN NAME [--timeout MS]  crash-consistent RBD snapshot\n"
		"  snap ls TARGET LUN                   an RBD LUN's snapshots\n"
		"  snap delete TARGET LUN NAME\n"
		"  snap rollback TARGET LUN NAME [--force] [--timeout MS]\n"
		"  snap clone TARGET LUN NAME IMAGE NEW_LUN [--pool POOL] [--target TARGET]\n"
		"                                       clone into a new image served as a LUN\n"
		"  acl create TARGET INITIATOR [--chap-user USER --chap-secret SECRET]\n"
		"             [--luns LUN[=TARGET_LUN],...|none]\n"
		"  acl luns TARGET INITIATOR all|none|LUN[=TARGET_LUN],...\n"
		"  acl delete TARGET INITIATOR\n"
		"  sessions [-v] [--target NAME]        logged-in sessions (-v: every negotiated "
		"key)\n"
		"  stats                                login outcomes, sessions, per-target and "
		"per-LUN counters\n"
		"  session logout TSIH [--drop] [--timeout MS]\n"
		"                                       ask a session to log out (Async Message),\n"
		"                                       or with --drop close it at once\n"
		"  alua TARGET                          ALUA target port groups and their states\n"
		"  alua set TARGET GROUP STATE          change a group's state (active/optimized,\n"
		"                                       active/non-optimized, standby, unavailable,\n"
		"                                       offline, transitioning)\n"
		"  group status                         the gateway group: members, generations,\n"
		"                                       health, LUN locks\n"
		"  group member add NAME --portal ADDR[:PORT]... [--id N]\n"
		"  group member remove NAME\n"
		"  group init MEMBER [--pool P] [--namespace N] [--object O] [--ceph-conf PATH]\n"
		"             [--ceph-client ID] [--keyring PATH]\n"
		"                                       write a first group document from this\n"
		"                                       gateway's targets (never over one)\n"
		"  import ceph-iscsi [--file F | --pool P --object O] [--out F | --to-pool P\n"
		"             --to-object O] [--force] [--ceph-conf PATH] [--ceph-client ID]\n"
		"             [--keyring PATH] [--namespace NS] [--key PATH] [--rbd-conf PATH]\n"
		"             [--rbd-client ID] [--exclusive-lock]\n"
		"                                       a ceph-iscsi gateway.conf (default\n"
		"                                       rbd/gateway.conf) as a group document\n"
		"                                       (default rbd/ix.group; no daemon needed)\n"
		"options:\n"
		"  -s, --socket PATH   the daemon's socket (default $IX_CTL_SOCKET or %s)\n"
		"  --json              print the JSON result (or error) instead of text\n"
		"  --dry-run           validate and show what would change, change nothing\n"
		"exit status: 0 done, 1 refused by the daemon, 2 usage, 3 daemon unreachable\n",
		DEFAULT_SOCKET);
}

int die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "ix-ctl: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(ix-ctl --help for usage)\n");
	return EXIT_USAGE;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One call: *result or *error (both owned by the caller). Returns 0, or EXIT_UNREACHABLE with a
 * message printed. */
static int call(const char *method, json_t *params, json_t **result, json_t **error)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	json_t *req, *resp;
	char *text, *buf = NULL;
	size_t len = 0, cap = 0;
	long long end = now_ms() + TIMEOUT_MS;
	json_error_t je;
	int fd;

	*result = *error = NULL;
	if (strlen(sock_path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "ix-ctl: %s: path too long\n", sock_path);
		return EXIT_UNREACHABLE;
	}
	strcpy(sa.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "ix-ctl: cannot reach ix-target at %s: %s\n", sock_path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_UNREACHABLE;
	}
	req = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", 1, "method", method);
	if (params)
		json_object_set(req, "params", params);
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	for (size_t off = 0, n = text ? strlen(text) : 0; off < n;) {
		ssize_t w = send(fd, text + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "ix-ctl: %s: %s\n", sock_path, strerror(errno));
			free(text);
			close(fd);
			return EXIT_UNREACHABLE;
		}
		off += (size_t)w;
	}
	free(text);
	for (;;) { /* the answer is one line */
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		long long left = end - now_ms();
		ssize_t n;

		if (len && buf[len - 1] == '\n')
			break;
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			fprintf(stderr, "ix-ctl: %s: no answer within %d s\n", sock_path,
				TIMEOUT_MS / 1000);
			free(buf);
			close(fd);
			return EXIT_UNREACHABLE;
		}
		if (cap - len < 65536) {
			char *b = realloc(buf, cap + 65536);
			if (!b) {
				fprintf(stderr, "ix-ctl: out of memory\n");
				free(buf);
				close(fd);
				return EXIT_UNREACHABLE;
			}
			buf = b;
			cap += 65536;
		}
		n = recv(fd, buf + len, cap - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	resp = len ? json_loadb(buf, len, 0, &je) : NULL;
	free(buf);
	if (!json_is_object(resp)) {
		fprintf(stderr, "ix-ctl: %s: %s\n", sock_path,
			len ? "the answer is not a JSON-RPC response" : "connection closed without an answer");
		json_decref(resp);
		return EXIT_UNREACHABLE;
	}
	*result = json_incref(json_object_get(resp, "result"));
	*error = json_incref(json_object_get(resp, "error"));
	json_decref(resp);
	if (!*result && !json_is_object(*error)) {
		fprintf(stderr, "ix-ctl: %s: the answer is not a JSON-RPC response\n", sock_path);
		json_decref(*error);
		*error = NULL;
		return EXIT_UNREACHABLE;
	}
	return 0;
}

void print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);

	if (s) {
		printf("%s\n", s);
		free(s);
	}
}

/* Report an error (stderr, and stdout with --json): EXIT_REFUSED. */
static int refused(json_t *error)
{
	const char *msg = json_string_value(json_object_get(error, "message"));

	fprintf(stderr, "ix-ctl: %s\n", msg ? msg : "error");
	if (opt_json)
		print_json(error);
	return EXIT_REFUSED;
}

/* A call whose result is printed (JSON) or summed up (text). Takes params. */
/* Call method with params (taken) and keep its result: 0 with *result set, or the exit code
 * (an unreachable daemon, or the refusal, already reported). */
int fetch(const char *method, json_t *params, json_t **result)
{
	json_t *error;
	int r = call(method, params, result, &error);

	json_decref(params);
	if (r)
		return r;
	if (error) {
		r = refused(error);
		json_decref(error);
		return r;
	}
	return 0;
}

/* A query: its result as JSON with --json, else through text(). */
int show(const char *method, json_t *params, void (*text)(json_t *result))
{
	json_t *result;
	int r = fetch(method, params, &result);

	if (r)
		return r;
	if (opt_json)
		print_json(result);
	else
		text(result);
	json_decref(result);
	return 0;
}

int run(const char *method, json_t *params, const char *done_text)
{
	json_t *result;
	int r;

	if (opt_dry_run && params)
		json_object_set_new(params, "dry_run", json_true());
	r = fetch(method, params, &result);
	if (r)
		return r;
	if (opt_json) {
		print_json(result);
	} else if (done_text) {
		json_t *changes = json_object_get(result, "changes");
		size_t i;
		json_t *c;

		if (json_is_array(changes) && json_array_size(changes) == 0)
			printf("%s: nothing to change\n", done_text);
		else
			printf("%s%s\n", done_text, opt_dry_run ? " (dry run: nothing changed)" : "");
		json_array_foreach(changes, i, c)
		{
			char *name = json_dumps(json_object_get(c, "name"), JSON_ENCODE_ANY);
			const char *t = json_string_value(json_object_get(c, "target"));
			printf("  %s %s %s%s%s\n", json_string_value(json_object_get(c, "action")),
			       json_string_value(json_object_get(c, "type")), name ? name : "",
			       t ? " of " : "", t ? t : "");
			free(name);
		}
	} else {
		print_json(result);
	}
	json_decref(result);
	return 0;
}

/* ---- ls ---------------------------------------------------------------------------------- */

const char *jstr(json_t *o, const char *k, const char *def)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : def;
}

/* An ACL's LUN masking in ls: " [luns 0=2,1]" ("none" for an empty list). */
static void print_acl_luns(json_t *luns)
{
	size_t i;
	json_t *e;

	if (!json_is_array(luns))
		return;
	printf(" [luns %s", json_array_size(luns) ? "" : "none");
	json_array_foreach(luns, i, e)
	{
		json_int_t l = json_integer_value(json_object_get(e, "target_lun"));
		json_t *v = json_object_get(e, "lun");
		json_int_t vl = v ? json_integer_value(v) : l;
		printf("%s%lld", i ? "," : "", (long long)vl);
		if (vl != l)
			printf("=%lld", (long long)l);
	}
	printf("]");
}

void print_value(json_t *v)
{
	if (json_is_string(v))
		printf("%s", json_string_value(v));
	else if (json_is_integer(v))
		printf("%lld", (long long)json_integer_value(v));
}

/* The running state of a target's LUNs (iscsi_get_luns), NULL when it cannot be had. */
static json_t *lun_states(const char *target)
{
	json_t *params = json_pack("{s:s}", "target", target), *result = NULL, *error = NULL;
	int r = params ? call("iscsi_get_luns", params, &result, &error) : -1;

	json_decref(params);
	if (r != 0)
		return NULL;
	json_decref(error);
	return result;
}

/* " [offline: reason]" and the RBD lock state of LUN lun, from lun_states(). */
static void print_lun_state(json_t *states, json_t *lun)
{
	json_t *l, *st, *lock;
	size_t i;

	json_array_foreach(states, i, l)
	{
		if (!json_equal(json_object_get(l, "lun"), lun) || !(st = json_object_get(l, "status")))
			continue;
		if (strcmp(jstr(st, "state", ""), "online") != 0)
			printf(" [%s: %s]", jstr(st, "state", "?"), jstr(st, "reason", ""));
		if ((lock = json_object_get(st, "lock")) && strcmp(jstr(lock, "state", ""), "open"))
			printf(" [lock %s]", jstr(lock, "state", "?"));
		if ((lock = json_object_get(st, "rejoin")) &&
		    strcmp(jstr(lock, "state", ""), "connected"))
			printf(" [%s]", jstr(lock, "state", "?"));
	}
}

static void ls_text(json_t *cfg)
{
	json_t *portals = json_object_get(cfg, "portals"), *targets = json_object_get(cfg, "targets");
	size_t i, j;
	json_t *p, *t, *l, *a;

	printf("o- /\n");
	printf("  o- portals [%zu]\n", json_array_size(portals));
	json_array_foreach(portals, i, p)
	{
		json_t *tr = json_object_get(p, "transports");
		json_t *port = json_object_get(p, "port"), *tpgt = json_object_get(p, "tpgt");
		printf("  %c o- %s %s:%lld tpgt %lld", targets ? '|' : ' ', jstr(p, "name", "default"),
		       jstr(p, "address", "?"), port ? (long long)json_integer_value(port) : 3260,
		       tpgt ? (long long)json_integer_value(tpgt) : 1);
		if (json_is_array(tr)) {
			json_t *x;
			size_t k;
			printf(" [");
			json_array_foreach(tr, k, x) printf("%s%s", k ? "," : "", json_string_value(x));
			printf("]");
		} else {
			printf(" [tcp]");
		}
		printf("\n");
	}
	printf("  o- targets [%zu]\n", json_array_size(targets));
	json_array_foreach(targets, i, t)
	{
		json_t *luns = json_object_get(t, "luns"), *acls = json_object_get(t, "acls");
		json_t *states = lun_states(jstr(t, "name", ""));
		bool last = i + 1 == json_array_size(targets);
		const char *bar = last ? " " : "|";

		printf("    o- %s", jstr(t, "name", "?"));
		if (json_object_get(t, "alias"))
			printf(" (%s)", jstr(t, "alias", ""));
		if (json_object_get(t, "chap"))
			printf(" [chap]");
		printf("\n");
		printf("    %s o- luns [%zu]\n", bar, json_array_size(luns));
		json_array_foreach(luns, j, l)
		{
			printf("    %s | o- lun%lld %s", bar,
			       (long long)json_integer_value(json_object_get(l, "lun")),
			       jstr(l, "backend", "?"));
			if (json_object_get(l, "path"))
				printf(" %s", jstr(l, "path", ""));
			if (json_object_get(l, "size")) {
				printf(" ");
				print_value(json_object_get(l, "size"));
			}
			if (json_is_true(json_object_get(l, "readonly")))
				printf(" ro");
			print_lun_state(states, json_object_get(l, "lun"));
			printf("\n");
		}
		json_decref(states);
		printf("    %s o- acls [%zu]%s\n", bar, json_array_size(acls),
		       json_array_size(acls) ? "" : " (any initiator)");
		json_array_foreach(acls, j, a)
		{
			printf("    %s   o- %s%s%s%s", bar, jstr(a, "initiator", "?"),
			       json_object_get(a, "chap") ? " [chap " : "",
			       json_object_get(a, "chap") ? jstr(json_object_get(a, "chap"), "user", "")
							  : "",
			       json_object_get(a, "chap") ? "]" : "");
			print_acl_luns(json_object_get(a, "luns"));
			printf("\n");
		}
	}
}

static int cmd_ls(int argc, char **argv)
{
	(void)argv;
	if (argc != 0)
		return die_usage("ls takes no arguments%s", "");
	return show("iscsi_get_config", NULL, ls_text);
}

/* ---- object commands ---------------------------------------------------------------------- */

int parse_int(const char *s, long long min, long long max, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || end == s || *end || *out < min || *out > max ? -1 : 0;
}

/* A size: an integer, or the configuration's string form ("64M"), passed as given. */
static json_t *size_value(const char *s)
{
	long long v;

	return parse_int(s, 0, (long long)1 << 62, &v) == 0 ? json_integer(v) : json_string(s);
}

static int cmd_portal(int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "create") == 0) {
		json_t *p;
		long long v;
		bool tcp = true, iser = false;
		int pos = 0;

		if (argc < 3)
			return die_usage("portal create NAME ADDRESS [PORT] [--tpgt N] [--iser] "
					 "[--no-tcp]%s", "");
		p = json_pack("{s:s, s:s}", "name", argv[1], "address", argv[2]);
		for (int i = 3; i < argc; i++) {
			if (strcmp(argv[i], "--tpgt") == 0 && i + 1 < argc) {
				if (parse_int(argv[++i], 0, 65535, &v) < 0)
					return json_decref(p), die_usage("bad tpgt '%s'", argv[i]);
				json_object_set_new(p, "tpgt", json_integer(v));
			} else if (strcmp(argv[i], "--iser") == 0) {
				iser = true;
			} else if (strcmp(argv[i], "--no-tcp") == 0) {
				tcp = false;
			} else if (argv[i][0] != '-' && pos++ == 0) {
				if (parse_int(argv[i], 1, 65535, &v) < 0)
					return json_decref(p), die_usage("bad port '%s'", argv[i]);
				json_object_set_new(p, "port", json_integer(v));
			} else {
				json_decref(p);
				return die_usage("portal create: unexpected '%s'", argv[i]);
			}
		}
		if (iser || !tcp) {
			json_t *tr = json_array();
			if (tcp)
				json_array_append_new(tr, json_string("tcp"));
			if (iser)
				json_array_append_new(tr, json_string("iser"));
			json_object_set_new(p, "transports", tr);
		}
		return run("iscsi_create_portal", json_pack("{s:o}", "portal", p), "portal created");
	}
	if (argc == 2 && strcmp(argv[0], "delete") == 0)
		return run("iscsi_delete_portal", json_pack("{s:s}", "name", argv[1]),
			   "portal deleted");
	return die_usage("portal create|delete ...%s", "");
}

/* A KEY=VALUE of "target set" / "lun set" into params: booleans on|off (yes|no, true|false),
 * integers, strings; "default" removes the setting (JSON null). kinds[i] is 'b', 'i' or 's'
 * for keys[i]. */
static int set_option(json_t *params, const char *arg, const char *const *keys, const char *kinds)
{
	const char *eq = strchr(arg, '='), *v;
	long long n;

	for (int i = 0; eq && keys[i]; i++) {
		if (strlen(keys[i]) != (size_t)(eq - arg) ||
		    strncmp(arg, keys[i], (size_t)(eq - arg)))
			continue;
		v = eq + 1;
		if (strcmp(v, "default") == 0)
			return json_object_set_new(params, keys[i], json_null());
		if (kinds[i] == 's')
			return json_object_set_new(params, keys[i], json_string(v));
		if (kinds[i] == 'i')
			return parse_int(v, 0, 65535, &n) < 0
				   ? -1
				   : json_object_set_new(params, keys[i], json_integer(n));
		if (!strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "true"))
			return json_object_set_new(params, keys[i], json_true());
		if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false"))
			return json_object_set_new(params, keys[i], json_false());
		return -1;
	}
	return -1;
}

/* target set NAME KEY=VALUE... and lun set TARGET LUN KEY=VALUE... */
static int cmd_set(json_t *params, int argc, char **argv, const char *const *keys,
		   const char *kinds, const char *method, const char *what)
{
	if (argc == 0) {
		json_decref(params);
		return die_usage("%s set: nothing to set", what);
	}
	for (int i = 0; i < argc; i++) {
		if (set_option(params, argv[i], keys, kinds) < 0) {
			json_decref(params);
			return die_usage("bad setting '%s'", argv[i]);
		}
	}
	return run(method, params, "settings changed");
}

static int cmd_target_set(int argc, char **argv)
{
	static const char *const keys[] = {"alias", "max_sessions", "chap_required", NULL};

	return cmd_set(json_pack("{s:s}", "target", argv[1]), argc - 2, argv + 2, keys, "sib",
		       "iscsi_set_target_options", "target");
}

static int cmd_lun_set(int argc, char **argv)
{
	static const char *const keys[] = {"write_cache", "readonly", NULL};
	long long n;

	if (parse_int(argv[2], 0, 255, &n) < 0)
		return die_usage("bad LUN number '%s' (0-255)", argv[2]);
	return cmd_set(json_pack("{s:s, s:I}", "target", argv[1], "lun", (json_int_t)n), argc - 3,
		       argv + 3, keys, "bb", "iscsi_set_lun_options", "lun");
}

static int cmd_target(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[0], "set") == 0)
		return cmd_target_set(argc, argv);
	if (argc >= 2 && strcmp(argv[0], "create") == 0) {
		json_t *t = json_pack("{s:s}", "name", argv[1]), *portals = NULL;

		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "--alias") == 0 && i + 1 < argc) {
				json_object_set_new(t, "alias", json_string(argv[++i]));
			} else if (strcmp(argv[i], "--portal") == 0 && i + 1 < argc) {
				if (!portals) {
					portals = json_array();
					json_object_set_new(t, "portals", portals);
				}
				json_array_append_new(portals, json_string(argv[++i]));
			} else {
				json_decref(t);
				return die_usage("target create: unexpected '%s'", argv[i]);
			}
		}
		return run("iscsi_create_target", json_pack("{s:o}", "target", t), "target created");
	}
	if (argc == 2 && strcmp(argv[0], "delete") == 0)
		return run("iscsi_delete_target", json_pack("{s:s}", "name", argv[1]),
			   "target deleted");
	return die_usage("target create|delete|set NAME ...%s", "");
}

/* ", connection STATE: why (attempt N, next in S s, K rejoins)" of an RBD LUN's "rejoin". */
static void print_rejoin(json_t *rj)
{
	json_t *att = json_object_get(rj, "attempts"),
	       *next = json_object_get(rj, "next_attempt_s");

	printf(", connection %s", jstr(rj, "state", "?"));
	if (*jstr(rj, "reason", ""))
		printf(": %s", jstr(rj, "reason", ""));
	printf(" (");
	if (att)
		printf("attempt %lld, ", (long long)json_integer_value(att));
	if (next)
		printf("next in %lld s, ", (long long)json_integer_value(next));
	printf("%lld rejoins)", (long long)json_integer_value(json_object_get(rj, "count")));
}

/* A fenced RBD LUN rejoins now; prints its connection's state right after. */
static int cmd_lun_rejoin(const char *target, const char *lun)
{
	json_t *st;
	long long n;
	int r;

	if (opt_dry_run) /* it changes no configuration: nothing to validate, and it acts */
		return die_usage("lun rejoin has no --dry-run%s", "");
	if (parse_int(lun, 0, 255, &n) < 0)
		return die_usage("bad LUN number '%s' (0-255)", lun);
	r = fetch("iscsi_rejoin_lun",
		  json_pack("{s:s, s:I}", "target", target, "lun", (json_int_t)n), &st);
	if (r)
		return r;
	if (opt_json) {
		print_json(st);
	} else {
		printf("lun%lld: rejoin started", n);
		if (json_object_get(st, "rejoin"))
			print_rejoin(json_object_get(st, "rejoin"));
		printf("\n");
	}
	json_decref(st);
	return 0;
}

/* One line per LUN of target: its state, why, the RBD open attempts, lock and connection. */
static int cmd_lun_status(const char *target)
{
	json_t *luns = NULL, *l, *st, *lock;
	size_t i;
	int r = fetch("iscsi_get_luns", json_pack("{s:s}", "target", target), &luns);

	if (r)
		return r;
	if (opt_json)
		print_json(luns);
	json_array_foreach(luns, i, l)
	{
		if (opt_json)
			break;
		st = json_object_get(l, "status");
		printf("lun%lld %s %s", (long long)json_integer_value(json_object_get(l, "lun")),
		       jstr(l, "backend", "?"), jstr(st, "state", "(not running)"));
		if (*jstr(st, "reason", ""))
			printf(": %s", jstr(st, "reason", ""));
		if (json_object_get(st, "next_attempt_s"))
			printf(" (%lld attempts, next in %lld s)",
			       (long long)json_integer_value(json_object_get(st, "attempts")),
			       (long long)json_integer_value(json_object_get(st, "next_attempt_s")));
		if ((lock = json_object_get(st, "lock")))
			printf(", lock %s: %s", jstr(lock, "state", "?"), jstr(lock, "reason", ""));
		if (json_object_get(st, "rejoin"))
			print_rejoin(json_object_get(st, "rejoin"));
		printf("\n");
	}
	json_decref(luns);
	return 0;
}

/* --rbd POOL/IMAGE or POOL/NAMESPACE/IMAGE into rbd's pool, namespace and image; -1 when it is
 * neither (the daemon checks the names themselves). */
static int rbd_spec(const char *s, json_t *rbd)
{
	const char *a = strchr(s, '/'), *b = a ? strchr(a + 1, '/') : NULL;

	if (!a || a == s || !a[1] || (b && (b == a + 1 || !b[1] || strchr(b + 1, '/'))))
		return -1;
	json_object_set_new(rbd, "pool", json_stringn(s, (size_t)(a - s)));
	if (b) {
		json_object_set_new(rbd, "namespace", json_stringn(a + 1, (size_t)(b - a - 1)));
		json_object_set_new(rbd, "image", json_string(b + 1));
	} else {
		json_object_set_new(rbd, "image", json_string(a + 1));
	}
	return 0;
}

/* An option of the rbd section (--ceph-conf, --ceph-client, --keyring, --exclusive-lock), or
 * NULL. */
static const char *rbd_option(const char *o, bool *takes_value)
{
	static const char *const opts[][2] = {{"--ceph-conf", "conf"},
					      {"--ceph-client", "client"},
					      {"--keyring", "keyring"},
					      {"--exclusive-lock", "exclusive_lock"}};

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (strcmp(o, opts[i][0]) == 0) {
			*takes_value = strcmp(opts[i][1], "exclusive_lock") != 0;
			return opts[i][1];
		}
	return NULL;
}

static int cmd_lun(int argc, char **argv)
{
	long long n, v;

	if (argc == 2 && strcmp(argv[0], "status") == 0)
		return cmd_lun_status(argv[1]);
	if (argc == 3 && strcmp(argv[0], "rejoin") == 0)
		return cmd_lun_rejoin(argv[1], argv[2]);

	if (argc >= 3 && strcmp(argv[0], "set") == 0)
		return cmd_lun_set(argc, argv);
	if (argc >= 3 && strcmp(argv[0], "create") == 0) {
		json_t *l, *rbd = json_object();
		const char *backend = NULL, *rk;
		bool rv;

		if (parse_int(argv[2], 0, 255, &n) < 0)
			return json_decref(rbd), die_usage("bad LUN number '%s' (0-255)", argv[2]);
		l = json_pack("{s:I}", "lun", (json_int_t)n);
		json_object_set_new(l, "rbd", rbd); /* removed below unless used */
		for (int i = 3; i < argc; i++) {
			const char *o = argv[i];
			bool has = i + 1 < argc;

			if (strcmp(o, "--rbd") == 0 && has) {
				backend = "rbd";
				if (rbd_spec(argv[++i], rbd) < 0) {
					json_decref(l);
					return die_usage("--rbd POOL/IMAGE or POOL/NAMESPACE/IMAGE, not "
							 "'%s'", argv[i]);
				}
			} else if ((rk = rbd_option(o, &rv)) && (has || !rv)) {
				json_object_set_new(rbd, rk, rv ? json_string(argv[++i]) : json_true());
			} else if (strcmp(o, "--ram") == 0 && has) {
				backend = "ram";
				json_object_set_new(l, "size", size_value(argv[++i]));
			} else if ((strcmp(o, "--file") == 0 || strcmp(o, "--block") == 0) && has) {
				backend = o + 2;
				json_object_set_new(l, "path", json_string(argv[++i]));
			} else if (strcmp(o, "--size") == 0 && has) {
				json_object_set_new(l, "size", size_value(argv[++i]));
			} else if (strcmp(o, "--block-size") == 0 && has) {
				if (parse_int(argv[++i], 1, 1 << 20, &v) < 0)
					return json_decref(l), die_usage("bad block size '%s'", argv[i]);
				json_object_set_new(l, "block_size", json_integer(v));
			} else if (strcmp(o, "--readonly") == 0) {
				json_object_set_new(l, "readonly", json_true());
			} else if (strcmp(o, "--thin") == 0) {
				json_object_set_new(l, "thin", json_true());
			} else if (strcmp(o, "--write-cache") == 0) {
				json_object_set_new(l, "write_cache", json_true());
			} else {
				json_decref(l);
				return die_usage("lun create: unexpected '%s'", o);
			}
		}
		if (!backend) {
			json_decref(l);
			return die_usage("lun create: one of --ram SIZE, --file PATH, --block PATH, "
					 "--rbd POOL/IMAGE%s", "");
		}
		if (strcmp(backend, "rbd") && json_object_size(rbd)) {
			json_decref(l);
			return die_usage("lun create: --ceph-conf, --ceph-client, --keyring and "
					 "--exclusive-lock go with --rbd%s", "");
		}
		if (strcmp(backend, "rbd"))
			json_object_del(l, "rbd");
		{ /* the order a person would write: lun, backend, then the rest */
			json_t *o = json_pack("{s:I, s:s}", "lun", (json_int_t)n, "backend", backend);
			json_object_update_missing(o, l);
			json_decref(l);
			l = o;
		}
		return run("iscsi_create_lun", json_pack("{s:s, s:o}", "target", argv[1], "lun", l),
			   "LUN created");
	}
	if ((argc == 4 || (argc == 5 && strcmp(argv[4], "--force") == 0)) &&
	    strcmp(argv[0], "resize") == 0) {
		json_t *p;

		if (parse_int(argv[2], 0, 255, &n) < 0)
			return die_usage("bad LUN number '%s' (0-255)", argv[2]);
		p = json_pack("{s:s, s:I, s:o}", "target", argv[1], "lun", (json_int_t)n, "size",
			      size_value(argv[3]));
		if (p && argc == 5)
			json_object_set_new(p, "force", json_true());
		return run("iscsi_resize_lun", p, "LUN resized");
	}
	if (argc == 3 && (strcmp(argv[0], "offline") == 0 || strcmp(argv[0], "online") == 0)) {
		bool off = strcmp(argv[0], "offline") == 0;
		if (parse_int(argv[2], 0, 255, &n) < 0)
			return die_usage("bad LUN number '%s' (0-255)", argv[2]);
		return run("iscsi_set_lun_offline",
			   json_pack("{s:s, s:I, s:b}", "target", argv[1], "lun", (json_int_t)n,
				     "offline", off),
			   off ? "LUN offline" : "LUN online");
	}
	if (argc == 3 && strcmp(argv[0], "delete") == 0) {
		if (parse_int(argv[2], 0, 255, &n) < 0)
			return die_usage("bad LUN number '%s' (0-255)", argv[2]);
		return run("iscsi_delete_lun",
			   json_pack("{s:s, s:I}", "target", argv[1], "lun", (json_int_t)n),
			   "LUN deleted");
	}
	return die_usage(
	    "lun create|delete|resize|offline|online|status|rejoin|set TARGET LUN ...%s", "");
}

/* One "LUN[=TARGET_LUN]" of a LUN list: the initiator sees the target's LUN TARGET_LUN (default
 * LUN) as LUN. */
static json_t *acl_lun_item(const char *item)
{
	unsigned long l, tl;
	char *end;

	l = strtoul(item, &end, 10);
	if (end == item || l > 255)
		return NULL;
	tl = l;
	if (*end == '=') {
		const char *p = end + 1;
		tl = strtoul(p, &end, 10);
		if (end == p || tl > 255)
			return NULL;
	}
	if (*end)
		return NULL;
	return json_pack("{s:i, s:i}", "lun", (int)l, "target_lun", (int)tl);
}

/* "all" (no masking: JSON null), "none" (an empty list), or LUN[=TARGET_LUN],... */
static int acl_luns_parse(const char *spec, json_t **out)
{
	char *copy, *save = NULL, *tok;
	json_t *a;

	if (strcmp(spec, "all") == 0)
		return *out = json_null(), 0;
	if (!(a = json_array()) || !(copy = strdup(spec))) {
		json_decref(a);
		return -ENOMEM;
	}
	if (strcmp(spec, "none") != 0) {
		for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			json_t *e = acl_lun_item(tok);
			if (!e || json_array_append_new(a, e) < 0) {
				free(copy);
				json_decref(a);
				return -EINVAL;
			}
		}
		if (json_array_size(a) == 0) {
			free(copy);
			json_decref(a);
			return -EINVAL;
		}
	}
	free(copy);
	*out = a;
	return 0;
}

static int acl_luns_usage(const char *spec)
{
	return die_usage("bad LUN list '%s' (all, none, or LUN[=TARGET_LUN],... with LUNs 0..255)",
			 spec);
}

static int cmd_acl_luns(int argc, char **argv)
{
	json_t *l;

	if (argc != 4)
		return die_usage("acl luns TARGET INITIATOR all|none|LUN[=TARGET_LUN],...%s", "");
	if (acl_luns_parse(argv[3], &l) < 0)
		return acl_luns_usage(argv[3]);
	return run("iscsi_set_acl_luns",
		   json_pack("{s:s, s:s, s:o}", "target", argv[1], "initiator", argv[2], "luns", l),
		   "ACL LUNs set");
}

static int cmd_acl(int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "luns") == 0)
		return cmd_acl_luns(argc, argv);
	if (argc >= 3 && strcmp(argv[0], "create") == 0) {
		json_t *a = json_pack("{s:s}", "initiator", argv[2]), *l;
		const char *user = NULL, *secret = NULL;

		for (int i = 3; i < argc; i++) {
			if (strcmp(argv[i], "--chap-user") == 0 && i + 1 < argc)
				user = argv[++i];
			else if (strcmp(argv[i], "--chap-secret") == 0 && i + 1 < argc)
				secret = argv[++i];
			else if (strcmp(argv[i], "--luns") == 0 && i + 1 < argc) {
				if (acl_luns_parse(argv[++i], &l) < 0) {
					json_decref(a);
					return acl_luns_usage(argv[i]);
				}
				if (!json_is_null(l))
					json_object_set_new(a, "luns", l);
			} else {
				json_decref(a);
				return die_usage("acl create: unexpected '%s'", argv[i]);
			}
		}
		if (!user != !secret) {
			json_decref(a);
			return die_usage("acl create: --chap-user and --chap-secret go together%s",
					 "");
		}
		if (user)
			json_object_set_new(a, "chap",
					    json_pack("{s:s, s:s}", "user", user, "secret", secret));
		return run("iscsi_create_acl", json_pack("{s:s, s:o}", "target", argv[1], "acl", a),
			   "ACL created");
	}
	if (argc == 3 && strcmp(argv[0], "delete") == 0)
		return run("iscsi_delete_acl",
			   json_pack("{s:s, s:s}", "target", argv[1], "initiator", argv[2]),
			   "ACL deleted");
	return die_usage("acl create|delete|luns TARGET INITIATOR ...%s", "");
}

static int cmd_rpc(int argc, char **argv)
{
	json_t *params = NULL;
	json_error_t je;

	if (argc < 1 || argc > 2)
		return die_usage("rpc METHOD [PARAMS-JSON]%s", "");
	if (argc == 2) {
		params = json_loads(argv[1], JSON_REJECT_DUPLICATES, &je);
		if (!params) {
			fprintf(stderr, "ix-ctl: PARAMS: %s (column %d)\n", je.text, je.column);
			return EXIT_USAGE;
		}
	}
	/* the result as JSON, with --json or not */
	return show(argv[0], params, print_json);
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"ls", cmd_ls},	    {"save", cmd_save},		{"rpc", cmd_rpc},
    {"portal", cmd_portal}, {"target", cmd_target},	{"lun", cmd_lun},
    {"acl", cmd_acl},	    {"sessions", cmd_sessions}, {"session", cmd_session},
    {"stats", cmd_stats},   {"alua", cmd_alua},		{"call", cmd_call},
    {"methods", cmd_methods}, {"snap", cmd_snap},
    {"group", cmd_group},	{"import", cmd_import},
};

int main(int argc, char **argv)
{
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	int n = 0, r;

	sock_path = getenv("IX_CTL_SOCKET") ? getenv("IX_CTL_SOCKET") : DEFAULT_SOCKET;
	if (!args)
		return EXIT_UNREACHABLE;
	/* global options anywhere on the line */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			opt_json = true;
		} else if (strcmp(argv[i], "--dry-run") == 0) {
			opt_dry_run = true;
		} else if (strcmp(argv[i], "-s") == 0 || strcmp(argv[i], "--socket") == 0) {
			if (i + 1 >= argc) {
				free(args);
				return die_usage("%s needs a path", argv[i]);
			}
			sock_path = argv[++i];
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			free(args);
			return 0;
		} else {
			args[n++] = argv[i];
		}
	}
	if (n == 0) {
		usage(stderr);
		free(args);
		return EXIT_USAGE;
	}
	size_t i = 0;

	while (i < sizeof(commands) / sizeof(commands[0]) && strcmp(args[0], commands[i].name) != 0)
		i++;
	if (i < sizeof(commands) / sizeof(commands[0]))
		r = commands[i].fn(n - 1, args + 1);
	else
		r = die_usage("unknown command '%s'", args[0]);
	free(args);
	return r;
}
