/* ixadm: the ix initiator's administration command, with open-iscsi's iscsiadm syntax where
 * the two overlap. Argument parsing, mode dispatch and the helpers every mode shares. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ixadm.h"

static const char usage_text[] =
	"usage: ixadm [--db DIR] -m MODE [options]\n"
	"\n"
	"  ixadm -m discovery -t st|isns -p IP[:PORT] [-I tcp|iser|auto] [-o new|old|delete|nonpersistent]... [-l]\n"
	"        [-n discovery.sendtargets.auth.KEY -v VALUE]...\n"
	"  ixadm -m node                                   list the records\n"
	"  ixadm -m node [-T IQN] [-p IP[:PORT]] -l | -u | -o show | -o delete\n"
	"  ixadm -m node -T IQN -p IP[:PORT][,TPGT] -o new\n"
	"  ixadm -m node [-T IQN] [-p IP[:PORT]] -o update -n KEY -v VALUE\n"
	"  ixadm -m node -L all|manual|automatic | -U all|manual|automatic\n"
	"  ixadm -m session [-r SID] [-P 0..3] [-u]\n"
	"  ixadm -m io [-T IQN] -p IP[:PORT] [--lun N] [--direct] COMMAND\n"
	"        list | inquiry | readcap | tur | sync\n"
	"        read --lba LBA --count BLOCKS [--file OUT]      (default: standard output)\n"
	"        write --lba LBA [--count BLOCKS] [--file IN] [--fua]   (default: standard input)\n"
	"  ixadm attach -T IQN -p IP[:PORT] [--lun N] [--fua] [--read-only] [--direct-io] FILE\n"
	"  ixadm detach FILE\n"
	"\n"
	"  --db DIR       node database (default $IX_DB or " AX_DEFAULT_DB ")\n"
	"  --timeout SEC  longest wait for a session daemon's answer (default 120)\n"
	"  -d LEVEL       library log level 0..3\n"
	"Exit codes follow iscsiadm's (0 ok, 7 bad arguments, 8 timeout, 15 session exists,\n"
	"21 nothing found, 24 authentication failed, 28 busy...). See docs/initiator.md.\n";

/* ---------------------------------------------------------------- arguments */

enum {
	OPT_DB = 1000, OPT_LUN, OPT_LBA, OPT_COUNT, OPT_FILE, OPT_FUA, OPT_DIRECT, OPT_RO,
	OPT_DIO, OPT_SHOW, OPT_TIMEOUT, OPT_SERVE, OPT_NOTIFY, OPT_EPHEMERAL,
};

static const struct option long_opts[] = {
	{"mode", required_argument, NULL, 'm'},
	{"type", required_argument, NULL, 't'},
	{"portal", required_argument, NULL, 'p'},
	{"targetname", required_argument, NULL, 'T'},
	{"interface", required_argument, NULL, 'I'},
	{"op", required_argument, NULL, 'o'},
	{"name", required_argument, NULL, 'n'},
	{"value", required_argument, NULL, 'v'},
	{"login", no_argument, NULL, 'l'},
	{"logout", no_argument, NULL, 'u'},
	{"loginall", required_argument, NULL, 'L'},
	{"logoutall", required_argument, NULL, 'U'},
	{"print", required_argument, NULL, 'P'},
	{"sid", required_argument, NULL, 'r'},
	{"debug", required_argument, NULL, 'd'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{"db", required_argument, NULL, OPT_DB},
	{"lun", required_argument, NULL, OPT_LUN},
	{"lba", required_argument, NULL, OPT_LBA},
	{"count", required_argument, NULL, OPT_COUNT},
	{"file", required_argument, NULL, OPT_FILE},
	{"fua", no_argument, NULL, OPT_FUA},
	{"direct", no_argument, NULL, OPT_DIRECT},
	{"read-only", no_argument, NULL, OPT_RO},
	{"direct-io", no_argument, NULL, OPT_DIO},
	{"show", no_argument, NULL, OPT_SHOW},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"serve", no_argument, NULL, OPT_SERVE},
	{"notify-fd", required_argument, NULL, OPT_NOTIFY},
	{"ephemeral", no_argument, NULL, OPT_EPHEMERAL},
	{NULL, 0, NULL, 0},
};

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	if (*s == '-')
		return -EINVAL;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end ? -EINVAL : 0;
}

struct serve_args {
	bool serve, ephemeral;
	long notify_fd;
};

static int parse_one(struct ax_opts *o, struct serve_args *sv, int c, const char *arg)
{
	long v;
	uint64_t u;

	switch (c) {
	case 'm': o->mode = arg; break;
	case 't': o->type = arg; break;
	case 'p':
		o->portal_arg = arg;
		if (ax_portal_parse(arg, &o->portal) < 0) {
			ax_err("bad portal \"%s\" (IP, IP:PORT, [IPv6]:PORT, optionally ,TPGT)", arg);
			return -1;
		}
		o->have_portal = true;
		break;
	case 'T': o->target = arg; break;
	case 'I': o->iface = arg; break;
	case 'o':
		if (o->nops == 8)
			return -1;
		o->ops[o->nops++] = arg;
		break;
	case 'n':
		if (o->nnames == 16)
			return -1;
		o->names[o->nnames++] = arg;
		break;
	case 'v':
		if (o->nvalues == 16)
			return -1;
		o->values[o->nvalues++] = arg;
		break;
	case 'l': o->login = true; break;
	case 'u': o->logout = true; break;
	case 'L': o->login_all = arg; break;
	case 'U': o->logout_all = arg; break;
	case 'P':
		if (ax_parse_num(arg, 0, 3, &v) < 0)
			return -1;
		o->print_level = (int)v;
		break;
	case 'r':
		if (ax_parse_num(arg, 1, LONG_MAX, &v) < 0)
			return -1;
		o->sid = v;
		break;
	case 'd':
		if (ax_parse_num(arg, 0, 8, &v) < 0)
			return -1;
		o->debug = v > 3 ? 3 : (int)v;
		break;
	case OPT_DB: o->db = arg; break;
	case OPT_LUN:
		if (ax_parse_num(arg, 0, 16383, &v) < 0)
			return -1;
		o->lun = (uint32_t)v;
		o->have_lun = true;
		break;
	case OPT_LBA:
		if (parse_u64(arg, &u) < 0)
			return -1;
		o->lba = u;
		o->have_lba = true;
		break;
	case OPT_COUNT:
		if (parse_u64(arg, &u) < 0 || u == 0)
			return -1;
		o->count = u;
		o->have_count = true;
		break;
	case OPT_FILE: o->file = arg; break;
	case OPT_FUA: o->fua = true; break;
	case OPT_DIRECT: o->direct = true; break;
	case OPT_RO: o->read_only = true; break;
	case OPT_DIO: o->direct_io = true; break;
	case OPT_SHOW: o->show_secrets = true; break;
	case OPT_TIMEOUT:
		if (ax_parse_num(arg, 1, 86400, &v) < 0)
			return -1;
		o->timeout_s = (int)v;
		break;
	case OPT_SERVE: sv->serve = true; break;
	case OPT_EPHEMERAL: sv->ephemeral = true; break;
	case OPT_NOTIFY:
		if (ax_parse_num(arg, 0, 65535, &v) < 0)
			return -1;
		sv->notify_fd = v;
		break;
	default: return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ax_opts o;
	struct serve_args sv = {.notify_fd = -1};
	char abs_db[PATH_MAX]; /* lives as long as main, like o */
	int c;

	memset(&o, 0, sizeof(o));
	o.argv0 = argv[0];
	o.timeout_s = 120;
	o.db = getenv("IX_DB");
	while ((c = getopt_long(argc, argv, "m:t:p:T:I:o:n:v:luL:U:P:r:d:hV", long_opts,
				NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		}
		if (c == 'V') {
			printf("ixadm (ix) 0.1.0\n");
			return 0;
		}
		if (parse_one(&o, &sv, c, optarg) < 0) {
			if (c != '?')
				ax_err("bad value for option -%c%s%s", c < 128 ? c : '-',
				       optarg ? ": " : "", optarg ? optarg : "");
			fputs(usage_text, stderr);
			return AX_ERR_INVAL;
		}
	}
	o.args = argv + optind;
	o.nargs = argc - optind;
	/* "ixadm [options] attach|detach ...": the verb is the first word that is no option */
	if (!o.mode && o.nargs > 0 &&
	    (strcmp(o.args[0], "attach") == 0 || strcmp(o.args[0], "detach") == 0)) {
		o.mode = o.args[0];
		o.args++;
		o.nargs--;
	}
	if (!o.db || !*o.db)
		o.db = AX_DEFAULT_DB;
	if (o.db[0] != '/') {
		/* daemons run from "/": hand them an absolute path */
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)) ||
		    snprintf(abs_db, sizeof(abs_db), "%s/%s", cwd, o.db) >= (int)sizeof(abs_db)) {
			ax_err("cannot make the database path %s absolute", o.db);
			return AX_ERR_INVAL;
		}
		o.db = abs_db;
	}
	if (o.debug)
		ix_set_log_level(o.debug);
	else
		ix_set_log_level(0);
	if (sv.serve) {
		if (!o.target || !o.portal_arg)
			return AX_ERR_INVAL;
		return ax_serve(o.db, o.target, o.portal_arg, sv.ephemeral, (int)sv.notify_fd,
				o.debug);
	}
	if (o.nnames != o.nvalues) {
		ax_err("each -n NAME needs a -v VALUE");
		return AX_ERR_INVAL;
	}
	if (!o.mode) {
		ax_err("no mode given (-m discovery|node|session|io, attach, detach)");
		fputs(usage_text, stderr);
		return AX_ERR_INVAL;
	}
	if (strcmp(o.mode, "discovery") == 0 || strcmp(o.mode, "discoverydb") == 0)
		return ax_mode_discovery(&o);
	if (strcmp(o.mode, "node") == 0)
		return ax_mode_node(&o);
	if (strcmp(o.mode, "session") == 0)
		return ax_mode_session(&o);
	if (strcmp(o.mode, "io") == 0)
		return ax_mode_io(&o);
	if (strcmp(o.mode, "attach") == 0)
		return ax_mode_attach(&o);
	if (strcmp(o.mode, "detach") == 0)
		return ax_mode_detach(&o);
	ax_err("unknown mode \"%s\"", o.mode);
	return AX_ERR_INVAL;
}
