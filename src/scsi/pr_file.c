/* Persistent reservation state on disk, for APTPL (SPC-4 5.12.5). A small line-oriented text
 * file, written whole to PATH.tmp, fsynced, renamed over PATH, and the directory fsynced, so a
 * crash leaves either the old or the new state. Loading trusts nothing: every line and field is
 * checked, the FNV-1a checksum on the last line must match, and the registrations must form a
 * state the device server could have produced.
 *
 *   ix-pr-state 1
 *   generation <decimal>
 *   aptpl <0|1>
 *   type <0|1|3|5|6|7|8>
 *   reg <key, 16 hex> <holder 0|1> <initiator port> <target port>    (any number of lines)
 *   sum <FNV-1a 64 of every byte before this line, 16 hex>
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scsi/pr.h"
#include "util/bytes.h"

#define PR_FILE_MAGIC "ix-pr-state 1"
#define PR_FILE_MAX   (1u << 20)

/* ---- save ---- */

void pr_text_printf(struct pr_text *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	while (!b->oom) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p && (size_t)n < b->cap - b->n) {
			b->n += (size_t)n;
			return;
		}
		size_t cap = 2 * b->cap + (size_t)n + 256;
		char *q = realloc(b->p, cap);

		if (!q) {
			b->oom = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync the directory holding path, so a rename or unlink in it is durable. */
static int sync_dir(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 1;
	int fd, rc = 0;

	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	if (!slash)
		memcpy(dir, ".", 2);
	else if (n == 0)
		memcpy(dir, "/", 2);
	else {
		memcpy(dir, path, n);
		dir[n] = 0;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int pr_state_save(const struct pr_state *st, const char *path, char *err, size_t errlen)
{
	struct pr_text b = {0};
	char tmp[4096];
	int fd, rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	pr_text_printf(&b, "%s\ngeneration %" PRIu32 "\naptpl %d\ntype %u\n", PR_FILE_MAGIC,
		  st->generation, st->aptpl ? 1 : 0, st->type);
	for (size_t i = 0; i < st->nregs; i++)
		pr_text_printf(&b, "reg %016" PRIx64 " %d %s %s\n", st->regs[i].key,
			  st->regs[i].holder ? 1 : 0, st->regs[i].iport, st->regs[i].tport);
	if (!b.oom)
		pr_text_printf(&b, "sum %016" PRIx64 "\n", fnv1a64(FNV1A64_INIT, b.p, b.n));
	if (b.oom) {
		free(b.p);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
		free(b.p);
		return rc;
	}
	rc = write_all(fd, b.p, b.n);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	free(b.p);
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	rc = sync_dir(path);
	if (rc)
		snprintf(err, errlen, "%s: fsync of its directory: %s", path, strerror(-rc));
	return rc;
}

int pr_state_remove(const char *path, char *err, size_t errlen)
{
	int rc;

	if (unlink(path) < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = sync_dir(path);
	if (rc)
		snprintf(err, errlen, "%s: fsync of its directory: %s", path, strerror(-rc));
	return rc;
}

/* ---- load ---- */

struct lctx {
	const char *path;
	char *err;
	size_t errlen;
	unsigned line;
};

static int bad(struct lctx *c, const char *what)
{
	if (c->line)
		snprintf(c->err, c->errlen, "%s:%u: %s", c->path, c->line, what);
	else
		snprintf(c->err, c->errlen, "%s: %s", c->path, what);
	return -EINVAL;
}

bool pr_port_name_ok(const char *s, bool initiator)
{
	const char *sep = initiator ? ",i,0x" : ",t,0x";
	size_t n = strlen(s);
	const char *at;

	if (n < 6 || n >= PR_MAX_PORT_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)s[i]))
			return false;
	at = strstr(s, sep);
	if (!at || at == s || !at[5])
		return false;
	for (const char *h = at + 5; *h; h++)
		if (!isxdigit((unsigned char)*h))
			return false;
	return true;
}

int pr_parse_u64(const char *s, int base, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || (base == 10 && !isdigit((unsigned char)*s)) ||
	    (base == 16 && !isxdigit((unsigned char)*s)))
		return -1;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* "word value" line into value; returns 0 or -EINVAL. */
static int field(struct lctx *c, char *line, const char *word, int base, uint64_t max,
		 uint64_t *out)
{
	size_t n = strlen(word);
	char msg[96];

	if (strncmp(line, word, n) != 0 || line[n] != ' ' ||
	    pr_parse_u64(line + n + 1, base, max, out) < 0) {
		snprintf(msg, sizeof(msg), "expected \"%s <%s>\"", word,
			 base == 16 ? "hex" : "number");
		return bad(c, msg);
	}
	return 0;
}

static int parse_reg(struct lctx *c, char *line, struct pr_state *st)
{
	char *f[5], *save = NULL;
	int nf = 0;
	uint64_t key, holder;
	struct pr_nexus_id id;
	struct pr_reg *r;

	for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (nf == 5)
			return bad(c, "too many fields on a reg line");
		f[nf++] = t;
	}
	if (nf != 5 || strcmp(f[0], "reg") != 0)
		return bad(c, "expected \"reg <key> <holder> <initiator port> <target port>\"");
	if (strlen(f[1]) != 16 || pr_parse_u64(f[1], 16, UINT64_MAX, &key) < 0 || key == 0)
		return bad(c, "reservation key must be 16 hex digits, not zero");
	if (pr_parse_u64(f[2], 10, 1, &holder) < 0)
		return bad(c, "holder must be 0 or 1");
	if (!pr_port_name_ok(f[3], true))
		return bad(c, "malformed initiator port (want <name>,i,0x<isid>)");
	if (!pr_port_name_ok(f[4], false))
		return bad(c, "malformed target port (want <name>,t,0x<tpgt>)");
	id.iport = f[3];
	id.tport = f[4];
	if (pr_find(st, &id) >= 0)
		return bad(c, "the same I_T nexus is registered twice");
	if (st->nregs >= PR_MAX_REGS)
		return bad(c, "too many registrations");
	if (st->nregs == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 4;
		struct pr_reg *n = realloc(st->regs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		st->regs = n;
		st->cap = cap;
	}
	r = &st->regs[st->nregs];
	r->key = key;
	r->holder = holder;
	r->iport = strdup(f[3]);
	r->tport = strdup(f[4]);
	if (!r->iport || !r->tport) {
		free(r->iport);
		free(r->tport);
		return -ENOMEM;
	}
	st->nregs++;
	return 0;
}

/* Holders must match the reservation type. */
static int check_consistent(struct lctx *c, const struct pr_state *st)
{
	const char *why = pr_state_inconsistent(st);

	return why ? bad(c, why) : 0;
}

static int parse_text(struct lctx *c, char *text, struct pr_state *st)
{
	char *save = NULL, *line;
	uint64_t v;
	int rc;

	/* Line by line; every line ends in '\n' (checked by the caller). */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		c->line++;
		switch (c->line) {
		case 1:
			if (strcmp(line, PR_FILE_MAGIC) != 0)
				return bad(c,
					   "not an ix persistent reservation file (or an unknown "
					   "version)");
			break;
		case 2:
			if ((rc = field(c, line, "generation", 10, UINT32_MAX, &v)))
				return rc;
			st->generation = (uint32_t)v;
			break;
		case 3:
			if ((rc = field(c, line, "aptpl", 10, 1, &v)))
				return rc;
			st->aptpl = v;
			break;
		case 4:
			if ((rc = field(c, line, "type", 10, 15, &v)))
				return rc;
			if (v != PR_TYPE_NONE && !pr_type_valid((unsigned)v))
				return bad(c, "unknown reservation type");
			st->type = (uint8_t)v;
			break;
		default:
			if (strncmp(line, "sum ", 4) == 0) {
				if (strtok_r(NULL, "\n", &save))
					return bad(c, "text after the sum line");
				return check_consistent(c, st);
			}
			if ((rc = parse_reg(c, line, st)))
				return rc;
			break;
		}
	}
	return bad(c, "no sum line (truncated file?)");
}

static int read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	struct stat sb;
	char *p;
	size_t n = 0;

	if (fd < 0) {
		rc = -errno;
		if (rc != -ENOENT)
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > PR_FILE_MAX) {
		rc = fstat(fd, &sb) < 0 ? -errno : -EINVAL;
		snprintf(err, errlen, "%s: %s", path,
			 rc == -EINVAL ? "not a regular file of at most 1 MiB" : strerror(-rc));
		close(fd);
		return rc;
	}
	p = malloc((size_t)sb.st_size + 1);
	if (!p) {
		close(fd);
		return -ENOMEM;
	}
	while (n < (size_t)sb.st_size) {
		ssize_t r = read(fd, p + n, (size_t)sb.st_size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
			free(p);
			close(fd);
			return rc;
		}
		n += (size_t)r;
	}
	close(fd);
	p[n] = 0;
	*out = p;
	*len = n;
	return 0;
}

int pr_state_load(struct pr_state *st, const char *path, char *err, size_t errlen)
{
	struct lctx c = {.path = path, .err = err, .errlen = errlen};
	char *text = NULL, *sum;
	size_t len = 0;
	uint64_t want;
	int rc;

	pr_state_clear(st);
	rc = read_file(path, &text, &len, err, errlen);
	if (rc)
		return rc;
	/* Text only, newline terminated, and the checksum over everything before "sum". */
	if (strlen(text) != len || len == 0 || text[len - 1] != '\n') {
		rc = bad(&c, "not a text file ending in a newline");
		goto out;
	}
	text[len - 1] = 0;
	sum = strrchr(text, '\n');
	sum = sum ? sum + 1 : text;
	if (strncmp(sum, "sum ", 4) != 0 || strlen(sum + 4) != 16 ||
	    pr_parse_u64(sum + 4, 16, UINT64_MAX, &want) < 0) {
		rc = bad(&c, "the last line is not \"sum <16 hex digits>\" (truncated file?)");
		goto out;
	}
	if (fnv1a64(FNV1A64_INIT, text, (size_t)(sum - text)) != want) {
		rc = bad(&c, "checksum mismatch: the file was changed or damaged");
		goto out;
	}
	text[len - 1] = '\n';
	rc = parse_text(&c, text, st);
out:
	free(text);
	if (rc)
		pr_state_clear(st);
	return rc;
}
