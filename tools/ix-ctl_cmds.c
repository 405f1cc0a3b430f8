/* ix-ctl: sessions, statistics, session logout, ALUA and save (ix-ctl.h). */
#include "ix-ctl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_sessions(int argc, char **argv)
{
	json_t *params = json_object(), *result, *sess;
	bool verbose = false;
	size_t i;
	int r;

	for (int k = 0; k < argc; k++) {
		if (strcmp(argv[k], "-v") == 0)
			verbose = true;
		else if (strcmp(argv[k], "--target") == 0 && k + 1 < argc)
			json_object_set_new(params, "target", json_string(argv[++k]));
		else
			return json_decref(params), die_usage("sessions: unexpected '%s'", argv[k]);
	}
	r = fetch("iscsi_get_sessions", params, &result);
	if (r)
		return r;
	if (opt_json) {
		print_json(result);
		json_decref(result);
		return 0;
	}
	if (json_array_size(result) == 0)
		printf("no sessions\n");
	json_array_foreach(result, i, sess)
	{
		json_t *keys = json_object_get(sess, "keys"), *cmdsn = json_object_get(sess, "cmdsn");
		const char *key;
		json_t *v;

		printf("tsih %lld isid %s %s -> %s\n",
		       (long long)json_integer_value(json_object_get(sess, "tsih")),
		       jstr(sess, "isid", "?"), jstr(sess, "initiator", "?"),
		       strcmp(jstr(sess, "type", ""), "discovery") == 0 ? "(discovery)"
								 : jstr(sess, "target", "?"));
		printf("  portal %s tpgt %lld, %s from %s, %s, digests %s/%s, CmdSN %lld..%lld, "
		       "%lld in flight%s\n",
		       jstr(sess, "portal", "?"),
		       (long long)json_integer_value(json_object_get(sess, "tpgt")),
		       jstr(sess, "local", "?"), jstr(sess, "peer", "?"), jstr(sess, "transport", "?"),
		       jstr(keys, "HeaderDigest", "?"), jstr(keys, "DataDigest", "?"),
		       (long long)json_integer_value(json_object_get(cmdsn, "exp_cmdsn")),
		       (long long)json_integer_value(json_object_get(cmdsn, "max_cmdsn")),
		       (long long)json_integer_value(json_object_get(sess, "commands_in_flight")),
		       json_is_true(json_object_get(sess, "logout_requested")) ? ", logout requested"
									       : "");
		if (!verbose)
			continue;
		json_object_foreach(keys, key, v)
		{
			printf("    %s=", key);
			print_value(v);
			printf("\n");
		}
	}
	json_decref(result);
	return 0;
}

static long long jint(json_t *o, const char *path1, const char *path2)
{
	json_t *v = json_object_get(o, path1);

	if (path2)
		v = json_object_get(v, path2);
	return (long long)json_integer_value(v);
}

/* Latency percentile (upper bucket bound, microseconds) from "below_us" buckets. */
static long long lat_pct(json_t *lat, double pct)
{
	json_t *b = json_object_get(lat, "below_us");
	long long count = jint(lat, "count", NULL), seen = 0, best = -1;

	if (count <= 0)
		return -1;
	for (long long bound = 1; bound <= (1ll << 22); bound *= 2) {
		char k[24];
		snprintf(k, sizeof(k), "%lld", bound);
		seen += (long long)json_integer_value(json_object_get(b, k));
		if (seen >= count * pct) {
			best = bound;
			break;
		}
	}
	return best;
}

static void print_lat(json_t *lat, double pct)
{
	long long v = lat_pct(lat, pct);

	if (v < 0)
		printf(" %9s", "-");
	else
		printf(" %7lldus", v);
}

static void print_targets(json_t *targets)
{
	size_t i;
	json_t *t;

	printf("\n%-40s %6s %7s %5s %6s %6s %7s %7s\n", "TARGET", "LOGINS", "REFUSED", "SESS",
	       "DIGEST", "TMOUT", "ABORTED", "REJECTS");
	json_array_foreach(targets, i, t)
	{
		json_t *rf = json_object_get(t, "logins_refused"), *v;
		const char *key, *name = json_string_value(json_object_get(t, "target"));
		long long refused = 0;

		json_object_foreach(rf, key, v)
			refused += (long long)json_integer_value(v);
		printf("%-40s %6lld %7lld %5lld %6lld %6lld %7lld %7lld\n",
		       name && *name ? name : "(none)", jint(t, "logins_accepted", NULL), refused,
		       jint(json_object_get(t, "sessions"), "tcp", NULL) +
			   jint(json_object_get(t, "sessions"), "iser", NULL),
		       jint(t, "digest_errors", NULL), jint(t, "connection_timeouts", NULL),
		       jint(t, "tasks_aborted", NULL), jint(t, "pdus_rejected", NULL));
	}
}

static void print_luns(json_t *luns)
{
	size_t i;
	json_t *l;

	printf("\n%-32s %3s %-28s %9s %9s %9s %10s %10s %6s %9s %9s\n", "TARGET", "LUN",
	       "INITIATOR", "READS", "WRITES", "OTHER", "READ-MIB", "WRITE-MIB", "ERRORS",
	       "LAT-P50", "LAT-P99");
	json_array_foreach(luns, i, l)
	{
		json_t *errs = json_object_get(l, "errors"), *v;
		const char *key;
		long long nerr = 0;

		json_object_foreach(errs, key, v)
			nerr += (long long)json_integer_value(v);
		printf("%-32s %3lld %-28s %9lld %9lld %9lld %10.1f %10.1f %6lld",
		       json_string_value(json_object_get(l, "target")), jint(l, "lun", NULL),
		       json_string_value(json_object_get(l, "initiator")),
		       jint(json_object_get(l, "commands"), "read", NULL),
		       jint(json_object_get(l, "commands"), "write", NULL),
		       jint(json_object_get(l, "commands"), "other", NULL),
		       (double)jint(json_object_get(l, "bytes"), "read", NULL) / 1048576.0,
		       (double)jint(json_object_get(l, "bytes"), "written", NULL) / 1048576.0,
		       nerr);
		print_lat(json_object_get(l, "latency"), 0.5);
		print_lat(json_object_get(l, "latency"), 0.99);
		printf("\n");
		if (jint(l, "qos", "delayed")) /* held by QoS limits */
			printf("  QoS: %lld commands delayed, %.3f s waited\n",
			       jint(l, "qos", "delayed"), (double)jint(l, "qos", "wait_us") / 1e6);
	}
}

/* How full each LUN's backing store is (thin provisioning), when any backend tells. */
static void print_space(json_t *space)
{
	size_t i;
	json_t *s;

	if (!json_array_size(space))
		return;
	printf("\n%-32s %3s %12s %12s %12s %9s %8s\n", "TARGET", "LUN", "STORE-MIB", "FREE-MIB",
	       "USED-MIB", "THRESHOLD", "REACHED");
	json_array_foreach(space, i, s)
	{
		json_t *used = json_object_get(s, "used_bytes");

		printf("%-32s %3lld %12.1f %12.1f ", json_string_value(json_object_get(s, "target")),
		       jint(s, "lun", NULL), (double)jint(s, "total_bytes", NULL) / 1048576.0,
		       (double)jint(s, "available_bytes", NULL) / 1048576.0);
		if (used)
			printf("%12.1f", (double)json_integer_value(used) / 1048576.0);
		else
			printf("%12s", "-");
		if (jint(s, "thin_threshold", NULL))
			printf(" %8lld%%", jint(s, "thin_threshold", NULL));
		else
			printf(" %9s", "-");
		printf(" %8s\n", json_is_true(json_object_get(s, "threshold_reached")) ? "yes" : "no");
	}
}

int cmd_stats(int argc, char **argv)
{
	json_t *result, *logins, *refs, *v;
	const char *key;
	int r, shown = 0;

	(void)argv;
	if (argc != 0)
		return die_usage("stats takes no arguments%s", "");
	r = fetch("iscsi_get_stats", NULL, &result);
	if (r)
		return r;
	if (opt_json) {
		print_json(result);
		json_decref(result);
		return 0;
	}
	logins = json_object_get(result, "logins");
	refs = json_object_get(logins, "refused");
	printf("logins accepted: %lld normal, %lld discovery; not completed in time: %lld\n",
	       jint(logins, "accepted", "normal"), jint(logins, "accepted", "discovery"),
	       jint(logins, "timeouts", NULL));
	printf("logins refused:");
	json_object_foreach(refs, key, v)
	{
		if (json_integer_value(v)) {
			printf("%s %s %lld", shown++ ? "," : "", key, (long long)json_integer_value(v));
		}
	}
	printf("%s\n", shown ? "" : " none");
	printf("sessions: %lld tcp, %lld iser, %lld discovery\n",
	       jint(json_object_get(result, "sessions"), "normal", "tcp"),
	       jint(json_object_get(result, "sessions"), "normal", "iser"),
	       jint(json_object_get(result, "sessions"), "discovery", NULL));
	print_targets(json_object_get(result, "targets"));
	print_luns(json_object_get(result, "luns"));
	print_space(json_object_get(result, "space"));
	json_decref(result);
	return 0;
}

int cmd_session(int argc, char **argv)
{
	json_t *params;
	long long tsih, ms;

	if (argc < 2 || strcmp(argv[0], "logout") != 0)
		return die_usage("session logout TSIH [--drop] [--timeout MS]%s", "");
	if (parse_int(argv[1], 1, 65535, &tsih) < 0)
		return die_usage("bad TSIH '%s'", argv[1]);
	params = json_pack("{s:I}", "tsih", (json_int_t)tsih);
	for (int k = 2; k < argc; k++) {
		if (strcmp(argv[k], "--drop") == 0) {
			json_object_set_new(params, "drop", json_true());
		} else if (strcmp(argv[k], "--timeout") == 0 && k + 1 < argc &&
			   parse_int(argv[k + 1], 1000, 3600000, &ms) == 0) {
			json_object_set_new(params, "timeout_ms", json_integer(ms));
			k++;
		} else {
			json_decref(params);
			return die_usage("session logout: unexpected '%s'", argv[k]);
		}
	}
	return run("iscsi_logout_session", params, NULL);
}

static void print_alua(json_t *result)
{
	size_t i, j;
	json_t *g, *p;

	printf("ALUA %s, implicit transition time %lld s\n",
	       json_is_true(json_object_get(result, "explicit")) ? "explicit and implicit"
								: "implicit only",
	       (long long)json_integer_value(json_object_get(result, "transition_time")));
	json_array_foreach(json_object_get(result, "groups"), i, g)
	{
		printf("  group %lld %s%s (last change: %s), relative ports",
		       (long long)json_integer_value(json_object_get(g, "id")),
		       json_string_value(json_object_get(g, "state")),
		       json_is_true(json_object_get(g, "preferred")) ? ", preferred" : "",
		       json_string_value(json_object_get(g, "status")));
		json_array_foreach(json_object_get(g, "relative_ports"), j, p)
			printf(" %lld", (long long)json_integer_value(p));
		printf("\n");
	}
}

int cmd_alua(int argc, char **argv)
{
	long long group;

	if (argc == 4 && strcmp(argv[0], "set") == 0) {
		if (parse_int(argv[2], 1, 65535, &group) < 0)
			return die_usage("bad target port group '%s' (1-65535)", argv[2]);
		return run("iscsi_set_alua_state",
			   json_pack("{s:s, s:I, s:s}", "target", argv[1], "group",
				     (json_int_t)group, "state", argv[3]),
			   "state changed");
	}
	if (argc != 1)
		return die_usage("alua TARGET | alua set TARGET GROUP STATE%s", "");
	return show("iscsi_get_alua", json_pack("{s:s}", "target", argv[0]), print_alua);
}

int cmd_save(int argc, char **argv)
{
	json_t *params = json_object();
	char abs[4096];

	if (argc > 1)
		return json_decref(params), die_usage("save [FILE]%s", "");
	if (argc == 1) {
		/* the daemon resolves nothing relative to its own directory */
		if (argv[0][0] != '/') {
			if (!getcwd(abs, sizeof(abs) - 1 - strlen(argv[0]) - 1))
				return json_decref(params), die_usage("%s: path too long", argv[0]);
			strcat(abs, "/");
			strcat(abs, argv[0]);
		} else {
			snprintf(abs, sizeof(abs), "%s", argv[0]);
		}
		json_object_set_new(params, "path", json_string(abs));
	}
	return run("save_config", params, NULL);
}

