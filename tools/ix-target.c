/* ix-target: the iSCSI target daemon.
 *
 *   ix-target [-c CONFIG.json] [-l LEVEL] [-s SOCKET] [--check] [--testing]
 *
 * Without -c it serves the built-in default (a 1 GiB RAM LUN on 127.0.0.1:3260). Runs in the
 * foreground and logs to stderr; prints "ix-target: ready" once every portal listens and every
 * LUN is open, and at that point tells systemd READY=1 when started with Type=notify (see
 * notify() below). SIGTERM and SIGINT stop it; SIGHUP re-reads the configuration. With a
 * management socket (global.mgmt_socket or -s) it serves the JSON-RPC API that ix-ctl uses
 * (docs/management.md). */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "event/loop.h"
#include "mgmt/mgmt.h"
#include "mgmt/http.h"
#include "mgmt/rpc.h"
#include "target/config.h"
#include "target/target.h"
#include "util/log.h"

struct sigctx {
	struct ix_target *tgt;
	struct ix_mgmt *mgmt;
	const char *config_path;
	bool testing;
	struct ev_io io;
};

/* The systemd readiness protocol (sd_notify(3)), done here rather than by linking libsystemd:
 * one datagram of "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or
 * an abstract name written with a leading '@'). Without $NOTIFY_SOCKET (not started by systemd
 * with Type=notify) it does nothing. A failure is logged and otherwise ignored: the daemon works
 * the same, systemd would then report the start as timed out. */
static void notify(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len;
	int fd;

	if (!path || !path[0])
		return;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path)) {
		log_warn("main", "NOTIFY_SOCKET=%s: not an absolute path or @abstract name", path);
		return;
	}
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
			     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		log_warn("main", "cannot notify systemd through %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ix-target [-c CONFIG.json] [-l error|warn|info|debug] [-s SOCKET] "
		   "[--check]\n"
		   "  -c, --config FILE   configuration (default: built-in, RAM LUN on "
		   "127.0.0.1:3260)\n"
		   "  -l, --log-level L   log level (overrides the configuration)\n"
		   "  -s, --rpc-socket P  JSON-RPC management socket (overrides "
		   "global.mgmt_socket)\n"
		   "      --check         validate the configuration and exit\n"
		   "      --testing       allow test-only features (fault injection, the error\n"
		   "                      backend); never use this in production\n");
}

/* Test-only features need --testing, so a test configuration cannot go live by accident. */
static int check_testing(const struct ix_config *cfg, const char *path, bool testing, char *err,
			 size_t errlen)
{
	if (!cfg->test_features || testing)
		return 0;
	snprintf(err, errlen,
		 "%s uses test-only features (a \"testing\" section or an \"error\" LUN); "
		 "refusing to serve it without --testing",
		 path ? path : "the configuration");
	return -EPERM;
}

static void on_signal(struct ev_io *w, uint32_t revents)
{
	struct sigctx *sc = w->arg;
	struct signalfd_siginfo si;

	(void)revents;
	while (read(w->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			char err[1024];
			if (!sc->config_path) {
				log_warn("main", "SIGHUP: no configuration file to reload");
				continue;
			}
			/* a file with an error changes nothing; either way the old or the new
			   configuration is served afterwards: READY=1 again */
			notify("RELOADING=1\nSTATUS=reloading the configuration");
			if (ix_mgmt_reload_file(sc->mgmt, err, sizeof(err)) < 0)
				log_err("main", "reload refused, configuration unchanged: %s", err);
			else
				log_info("main", "configuration reloaded from %s", sc->config_path);
			notify("READY=1\nSTATUS=serving");
		} else {
			log_info("main", "signal %u: shutting down", si.ssi_signo);
			notify("STOPPING=1\nSTATUS=shutting down");
			ix_target_stop(sc->tgt);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"log-level", required_argument, NULL, 'l'},
		{"check", no_argument, NULL, 'C'},
		{"testing", no_argument, NULL, 'T'},
		{"rpc-socket", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *config = NULL, *rpc_path = NULL;
	struct rpc_server *rpc = NULL;
	struct metrics_server *metrics = NULL;
	char *metrics_listen = NULL;
	gid_t rpc_group = (gid_t)-1;
	json_t *doc;
	int level = -1, check = 0, c, r, sfd;
	struct ix_config *cfg;
	struct ix_target *tgt;
	struct sigctx sc = {0};
	struct mgmt_group *group = NULL;
	char err[1024];
	sigset_t mask;

	while ((c = getopt_long(argc, argv, "c:l:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'l':
			level = ix_log_level_parse(optarg);
			if (level < 0) {
				fprintf(stderr, "ix-target: unknown log level '%s'\n", optarg);
				return 2;
			}
			break;
		case 'C':
			check = 1;
			break;
		case 'T':
			sc.testing = true;
			break;
		case 's':
			rpc_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	/* signals are taken through a signalfd on the main loop; block them in every thread
	   (before loading: a group's configuration starts librados' threads) */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = ix_mgmt_load_any(config, &cfg, &doc, &group, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ix-target: %s\n", err);
		return 1;
	}
	if (check_testing(cfg, config, sc.testing, err, sizeof(err)) < 0) {
		fprintf(stderr, "ix-target: %s\n", err);
		cfg_free(cfg);
		mgmt_group_free(group);
		json_decref(doc);
		return 1;
	}
	if (check) {
		printf("ix-target: %s: configuration is valid\n", config ? config : "(built-in)");
		cfg_free(cfg);
		mgmt_group_free(group);
		json_decref(doc);
		return 0;
	}
	if (!rpc_path)
		rpc_path = cfg->global.mgmt_socket;
	if (rpc_path && cfg->global.mgmt_group) {
		struct group *gr = getgrnam(cfg->global.mgmt_group);
		if (!gr) {
			fprintf(stderr, "ix-target: global.mgmt_group: no group named \"%s\"\n",
				cfg->global.mgmt_group);
			cfg_free(cfg);
			mgmt_group_free(group);
			json_decref(doc);
			return 1;
		}
		rpc_group = gr->gr_gid;
	}
	ix_log_set_level(level >= 0 ? level : cfg->global.log_level);


	/* cfg belongs to the target from here: the socket path is copied first */
	if ((rpc_path && !(rpc_path = strdup(rpc_path))) ||
	    (cfg->global.metrics_listen &&
	     !(metrics_listen = strdup(cfg->global.metrics_listen)))) {
		fprintf(stderr, "ix-target: out of memory\n");
		mgmt_group_free(group);
		return 1;
	}
	r = ix_target_new(cfg, &tgt, err, sizeof(err));
	if (r < 0 && group) {
		/* a group's generation this gateway cannot serve: the last good one it kept */
		char why[1024];
		json_t *gdoc;

		snprintf(why, sizeof(why), "%s", err[0] ? err : strerror(-r));
		if (mgmt_group_fallback(group, why, &cfg, &gdoc, err, sizeof(err)) == 0) {
			json_decref(doc);
			doc = gdoc;
			r = ix_target_new(cfg, &tgt, err, sizeof(err));
		} else {
			fprintf(stderr, "ix-target: %s\n", err);
			snprintf(err, sizeof(err), "%s", why);
		}
	}
	if (r < 0) {
		fprintf(stderr, "ix-target: %s\n", err[0] ? err : strerror(-r));
		json_decref(doc);
		mgmt_group_free(group);
		return 1;
	}
	{
		struct ix_mgmt_opts mo = {.config_path = config, .testing = sc.testing,
					  .group = group};
		group = NULL; /* ix_mgmt_new's */
		r = ix_mgmt_new(tgt, doc, &mo, &sc.mgmt);
	}
	if (r == 0 && rpc_path)
		r = rpc_server_new(sc.mgmt, ix_target_main_loop(tgt), rpc_path, rpc_group, &rpc,
				   err, sizeof(err));
	else if (r < 0)
		snprintf(err, sizeof(err), "%s", strerror(-r));
	if (r < 0)
		fprintf(stderr, "ix-target: management socket: %s\n", err);
	if (r == 0 && metrics_listen &&
	    (r = metrics_server_new(tgt, ix_target_main_loop(tgt), metrics_listen, &metrics, err,
				    sizeof(err))) < 0)
		fprintf(stderr, "ix-target: global.%s\n", err);
	free(metrics_listen);
	if (r < 0) {
		rpc_server_free(rpc);
		ix_mgmt_free(sc.mgmt);
		ix_target_free(tgt);
		free((char *)rpc_path);
		return 1;
	}
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0) {
		fprintf(stderr, "ix-target: signalfd: %s\n", strerror(errno));
		metrics_server_free(metrics);
		rpc_server_free(rpc);
		free((char *)rpc_path);
		ix_mgmt_free(sc.mgmt);
		ix_target_free(tgt);
		return 1;
	}
	sc.tgt = tgt;
	sc.config_path = config;
	ev_io_init(&sc.io, sfd, on_signal, &sc);
	ev_io_start(ix_target_main_loop(tgt), &sc.io, EPOLLIN);
	/* ix_target_new() has opened every LUN and bound every portal, the management socket
	   listens: ready. */
	fprintf(stderr, "ix-target: ready\n");
	notify("READY=1\nSTATUS=serving");
	r = ix_target_run(tgt);
	ev_io_stop(ix_target_main_loop(tgt), &sc.io);
	close(sfd);
	metrics_server_free(metrics);
	rpc_server_free(rpc);
	free((char *)rpc_path);
	ix_mgmt_free(sc.mgmt); /* first: a group's watch is on the target's main loop */
	ix_target_free(tgt);
	return r < 0 ? 1 : 0;
}
