/* tests/package.sh: a program built against the installed libix-dev (pkg-config ix) and run
 * against the installed libix0: SendTargets discovery through the public API, one target name
 * per line on stdout.
 *
 *   pkg_discover HOST:PORT */
#include <stdio.h>
#include <ix/initiator.h>
#include <ix/sync.h>

int main(int argc, char **argv)
{
	struct ix_session_opts o;
	struct ix_discovery *d = NULL;
	struct ix_ctx *ctx;
	char err[256] = "";
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: pkg_discover HOST:PORT\n");
		return 2;
	}
	ctx = ix_ctx_new();
	if (!ctx) {
		fprintf(stderr, "pkg_discover: ix_ctx_new failed\n");
		return 1;
	}
	ix_session_opts_default(&o);
	o.initiator_name = "iqn.2026-11.io.ix:pkg-discover";
	o.portal = argv[1];
	r = ix_sync_discover(ctx, &o, &d, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "pkg_discover: %s (%d)\n", err, r);
		ix_ctx_free(ctx);
		return 1;
	}
	for (int i = 0; i < d->ntargets; i++)
		printf("%s\n", d->targets[i].name);
	ix_discovery_free(d);
	ix_ctx_free(ctx);
	return 0;
}
