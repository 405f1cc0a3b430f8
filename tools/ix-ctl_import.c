/* ix-ctl import ceph-iscsi: a ceph-iscsi gateway.conf (from a file or from RADOS) converted into
 * the gateway group's document (src/mgmt/import_cephiscsi.c; docs/migration.md), written to a
 * file, to stdout or to RADOS (never over an existing object unless --force). What could not
 * be carried over is printed on stderr, one line each, with the reason.
 *
 *   import ceph-iscsi [--file F | --pool P --object O] [--namespace NS]
 *                     [--out F | --to-pool P --to-object O] [--force]
 *                     [--ceph-conf PATH] [--ceph-client ID] [--keyring PATH]
 *                     [--key PATH] [--rbd-conf PATH] [--rbd-client ID] [--exclusive-lock]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#ifdef IX_HAVE_RBD
#include <rados/librados.h>
#endif

#include "ix-ctl.h"
#include "mgmt/import_cephiscsi.h"

struct imp_args {
	const char *file, *pool, *object, *ns, *out, *to_pool, *to_object;
	const char *conf, *client, *keyring, *key;
	struct cephiscsi_opts o;
	bool force, to_rados;
};

/* ---- the gateways' private key (ceph-iscsi's priv_key, iscsi-gateway.key) ------------------ */

/* RSA-OAEP with SHA-256 (what ceph-iscsi writes), else SHA-1 (what its older versions wrote),
 * of the base64 text b64 with the PEM private key in the file arg. */
static int oaep(EVP_PKEY *k, const EVP_MD *md, const uint8_t *in, size_t n, char *out,
		size_t cap)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(k, NULL);
	size_t len = 0;
	int rc = -EINVAL;
	uint8_t *buf = NULL;

	if (c && EVP_PKEY_decrypt_init(c) > 0 &&
	    EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_OAEP_PADDING) > 0 &&
	    EVP_PKEY_CTX_set_rsa_oaep_md(c, md) > 0 && EVP_PKEY_CTX_set_rsa_mgf1_md(c, md) > 0 &&
	    EVP_PKEY_decrypt(c, NULL, &len, in, n) > 0 && (buf = malloc(len + 1)) &&
	    EVP_PKEY_decrypt(c, buf, &len, in, n) > 0 && len < cap && !memchr(buf, 0, len)) {
		memcpy(out, buf, len);
		out[len] = 0;
		rc = 0;
	}
	if (buf) {
		OPENSSL_cleanse(buf, len);
		free(buf);
	}
	EVP_PKEY_CTX_free(c);
	return rc;
}

static int decrypt(void *arg, const char *b64, char *out, size_t cap)
{
	size_t n = strlen(b64);
	uint8_t *raw = malloc(n + 3);
	int len, rc = -EINVAL;
	FILE *f;
	EVP_PKEY *k = NULL;

	if (!raw)
		return -ENOMEM;
	len = n % 4 == 0 ? EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n) : -1;
	if (len > 0) {
		/* EVP_DecodeBlock counts the padding as data */
		len -= n >= 1 && b64[n - 1] == '=';
		len -= n >= 2 && b64[n - 2] == '=';
	}
	if (len > 0 && (f = fopen(arg, "r"))) {
		k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
		fclose(f);
	}
	if (k && (rc = oaep(k, EVP_sha256(), raw, (size_t)len, out, cap)) < 0)
		rc = oaep(k, EVP_sha1(), raw, (size_t)len, out, cap);
	EVP_PKEY_free(k);
	free(raw);
	return rc;
}

/* ---- RADOS --------------------------------------------------------------------------------- */

#ifdef IX_HAVE_RBD
static int rados_open(const struct imp_args *a, const char *pool, rados_t *cl, rados_ioctx_t *io)
{
	int rc = rados_create(cl, a->client ? a->client : "admin");

	if (rc < 0) {
		fprintf(stderr, "ix-ctl: rados_create(client.%s): %s\n",
			a->client ? a->client : "admin", strerror(-rc));
		return rc;
	}
	if ((rc = rados_conf_read_file(*cl, a->conf)) < 0)
		fprintf(stderr, "ix-ctl: %s: %s\n", a->conf ? a->conf : "ceph.conf", strerror(-rc));
	else if (a->keyring && (rc = rados_conf_set(*cl, "keyring", a->keyring)) < 0)
		fprintf(stderr, "ix-ctl: keyring %s: %s\n", a->keyring, strerror(-rc));
	else if ((rc = rados_connect(*cl)) < 0)
		fprintf(stderr, "ix-ctl: connecting to the cluster: %s\n", strerror(-rc));
	else if ((rc = rados_ioctx_create(*cl, pool, io)) < 0)
		fprintf(stderr, "ix-ctl: pool %s: %s\n", pool, strerror(-rc));
	if (rc < 0) {
		rados_shutdown(*cl);
		return rc;
	}
	rados_ioctx_set_namespace(*io, a->ns ? a->ns : "");
	return 0;
}

static int rados_get(const struct imp_args *a, char **text, size_t *len)
{
	rados_t cl;
	rados_ioctx_t io;
	uint64_t size;
	time_t mtime;
	int rc = rados_open(a, a->pool, &cl, &io);

	if (rc < 0)
		return rc;
	rc = rados_stat(io, a->object, &size, &mtime);
	if (rc < 0)
		fprintf(stderr, "ix-ctl: %s/%s: %s\n", a->pool, a->object, strerror(-rc));
	else if (size > CEPHISCSI_MAX_DOC) {
		fprintf(stderr, "ix-ctl: %s/%s: %llu bytes, more than a gateway.conf can be\n",
			a->pool, a->object, (unsigned long long)size);
		rc = -EFBIG;
	} else if (!(*text = malloc(size + 1))) {
		rc = -ENOMEM;
	} else if ((rc = rados_read(io, a->object, *text, size, 0)) < 0) {
		fprintf(stderr, "ix-ctl: reading %s/%s: %s\n", a->pool, a->object, strerror(-rc));
		free(*text);
		*text = NULL;
	} else {
		*len = (size_t)rc;
		rc = 0;
	}
	rados_ioctx_destroy(io);
	rados_shutdown(cl);
	return rc;
}

static int rados_put(const struct imp_args *a, const char *text)
{
	rados_t cl;
	rados_ioctx_t io;
	rados_write_op_t op;
	int rc = rados_open(a, a->to_pool, &cl, &io);

	if (rc < 0)
		return rc;
	if (!(op = rados_create_write_op())) {
		rc = -ENOMEM;
	} else {
		if (!a->force)
			rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
		rados_write_op_write_full(op, text, strlen(text));
		rc = rados_write_op_operate(op, io, a->to_object, NULL, 0);
		rados_release_write_op(op);
		if (rc == -EEXIST)
			fprintf(stderr,
				"ix-ctl: %s/%s exists already (a group's document?): not overwritten "
				"(--force overwrites it)\n",
				a->to_pool, a->to_object);
		else if (rc < 0)
			fprintf(stderr, "ix-ctl: writing %s/%s: %s\n", a->to_pool, a->to_object,
				strerror(-rc));
	}
	rados_ioctx_destroy(io);
	rados_shutdown(cl);
	return rc;
}
#else
static int rados_get(const struct imp_args *a, char **text, size_t *len)
{
	(void)a, (void)text, (void)len;
	fprintf(stderr, "ix-ctl: built without librados: use --file\n");
	return -ENOTSUP;
}

static int rados_put(const struct imp_args *a, const char *text)
{
	(void)a, (void)text;
	fprintf(stderr, "ix-ctl: built without librados: use --out\n");
	return -ENOTSUP;
}
#endif

/* ---- files --------------------------------------------------------------------------------- */

static int file_get(const char *path, char **text, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	size_t cap = 65536, n = 0;
	char *b = NULL;

	if (!f) {
		fprintf(stderr, "ix-ctl: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	for (;;) {
		char *nb = n + 1 >= cap || !b ? realloc(b, cap *= 2) : b;
		size_t r;
		if (!nb || n > CEPHISCSI_MAX_DOC) {
			free(nb ? nb : b);
			if (f != stdin)
				fclose(f);
			fprintf(stderr, "ix-ctl: %s: %s\n", path,
				nb ? "larger than a gateway.conf can be" : "out of memory");
			return nb ? -EFBIG : -ENOMEM;
		}
		b = nb;
		r = fread(b + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	if (f != stdin)
		fclose(f);
	*text = b;
	*len = n;
	return 0;
}

/* Mode 0600 (it holds CHAP secrets); never over an existing file unless --force. */
static int file_put(const struct imp_args *a, const char *text)
{
	int fd;
	size_t n = strlen(text), off = 0;

	if (strcmp(a->out, "-") == 0)
		return fputs(text, stdout) < 0 || putchar('\n') == EOF ? -EIO : 0;
	fd = open(a->out, O_WRONLY | O_CREAT | O_CLOEXEC | (a->force ? O_TRUNC : O_EXCL), 0600);
	if (fd < 0) {
		int e = errno;
		fprintf(stderr, "ix-ctl: %s: %s%s\n", a->out, strerror(e),
			e == EEXIST ? " (--force overwrites it)" : "");
		return -e;
	}
	while (off < n) {
		ssize_t w = write(fd, text + off, n - off);
		if (w < 0) {
			int e = errno;
			fprintf(stderr, "ix-ctl: writing %s: %s\n", a->out, strerror(e));
			close(fd);
			return -e;
		}
		off += (size_t)w;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fprintf(stderr, "ix-ctl: writing %s: %s\n", a->out, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* ---- the command --------------------------------------------------------------------------- */

static int parse_args(int argc, char **argv, struct imp_args *a)
{
	static const struct {
		const char *opt;
		size_t off;
	} opts[] = {
	    {"--file", offsetof(struct imp_args, file)},
	    {"--pool", offsetof(struct imp_args, pool)},
	    {"--object", offsetof(struct imp_args, object)},
	    {"--namespace", offsetof(struct imp_args, ns)},
	    {"--out", offsetof(struct imp_args, out)},
	    {"--to-pool", offsetof(struct imp_args, to_pool)},
	    {"--to-object", offsetof(struct imp_args, to_object)},
	    {"--ceph-conf", offsetof(struct imp_args, conf)},
	    {"--ceph-client", offsetof(struct imp_args, client)},
	    {"--keyring", offsetof(struct imp_args, keyring)},
	    {"--key", offsetof(struct imp_args, key)},
	    {"--rbd-conf", offsetof(struct imp_args, o.rbd_conf)},
	    {"--rbd-client", offsetof(struct imp_args, o.rbd_client)},
	};

	for (int i = 0; i < argc; i++) {
		size_t k = 0;
		while (k < sizeof(opts) / sizeof(opts[0]) && strcmp(argv[i], opts[k].opt) != 0)
			k++;
		if (k < sizeof(opts) / sizeof(opts[0])) {
			if (i + 1 >= argc)
				return die_usage("%s needs a value", argv[i]);
			*(const char **)((char *)a + opts[k].off) = argv[++i];
			a->to_rados = a->to_rados || strncmp(argv[i - 1], "--to-", 5) == 0;
		} else if (strcmp(argv[i], "--force") == 0) {
			a->force = true;
		} else if (strcmp(argv[i], "--exclusive-lock") == 0) {
			a->o.exclusive_lock = 1;
		} else {
			return die_usage("import ceph-iscsi: unknown argument '%s'", argv[i]);
		}
	}
	if (a->file && (a->pool || a->object))
		return die_usage("import ceph-iscsi: --file or --pool/--object, not both%s", "");
	if (a->out && a->to_rados)
		return die_usage("import ceph-iscsi: --out or --to-pool/--to-object, not both%s", "");
	return 0;
}

int cmd_import(int argc, char **argv)
{
	struct imp_args a = {0};
	char *text = NULL, *out = NULL, err[512];
	size_t len = 0, i;
	json_t *doc = NULL, *notes = NULL, *n;
	int rc;

	if (argc < 1 || strcmp(argv[0], "ceph-iscsi") != 0)
		return die_usage("import ceph-iscsi [--file F | --pool P --object O] [--out F | "
				 "--to-pool P --to-object O] [--force] ...%s", "");
	if ((rc = parse_args(argc - 1, argv + 1, &a)) != 0)
		return rc;
	a.pool = a.pool ? a.pool : "rbd";
	a.object = a.object ? a.object : "gateway.conf";
	a.to_pool = a.to_pool ? a.to_pool : "rbd";
	a.to_object = a.to_object ? a.to_object : "ix.group";
	if (a.key) {
		if (access(a.key, R_OK) < 0) {
			fprintf(stderr, "ix-ctl: --key %s: %s\n", a.key, strerror(errno));
			return EXIT_USAGE;
		}
		a.o.decrypt = decrypt;
		a.o.decrypt_arg = (void *)a.key;
	}
	rc = a.file ? file_get(a.file, &text, &len) : rados_get(&a, &text, &len);
	if (rc < 0)
		return EXIT_REFUSED;
	rc = cephiscsi_import(text, len, &a.o, &doc, &notes, err, sizeof(err));
	free(text);
	if (rc < 0) {
		fprintf(stderr, "ix-ctl: %s: %s\n", a.file ? a.file : a.object, err);
		return EXIT_REFUSED;
	}
	json_array_foreach(notes, i, n) fprintf(stderr, "not carried over: %s\n",
						json_string_value(n));
	out = json_dumps(doc, JSON_INDENT(2));
	rc = !out ? -ENOMEM : a.out ? file_put(&a, out) : rados_put(&a, out);
	if (out && rc == 0 && !(a.out && strcmp(a.out, "-") == 0))
		fprintf(stderr, "ix-ctl: %zu target(s), %zu member(s) written to %s%s%s%s\n",
			json_array_size(json_object_get(doc, "targets")),
			json_array_size(json_object_get(doc, "members")), a.out ? a.out : a.to_pool,
			a.out ? "" : "/", a.out ? "" : a.to_object,
			json_array_size(notes) ? "; see what was not carried over above" : "");
	if (out)
		memset(out, 0, strlen(out));
	free(out);
	json_decref(doc);
	json_decref(notes);
	return rc < 0 ? EXIT_REFUSED : 0;
}
