/* Finding a value's position in the JSON text of a configuration, and the parts of error
 * messages that depend on it (see config_json.h). */
#include "target/config_json.h"

#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

static const char *skip_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *skip_string(const char *p, const char *e)
{
	for (p++; p < e && *p != '"'; p++)
		if (*p == '\\')
			p++;
	return p < e ? p + 1 : e;
}

static const char *skip_value(const char *p, const char *e)
{
	int depth = 0;

	if (p < e && *p == '"')
		return skip_string(p, e);
	if (p < e && (*p == '{' || *p == '[')) {
		while (p < e) {
			if (*p == '"') {
				p = skip_string(p, e);
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return e;
	}
	while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' &&
	       *p != '\n' && *p != '\r')
		p++;
	return p;
}

/* Does the JSON string token at p decode to key? Escaped tokens are decoded by jansson. */
static bool string_is(const char *p, const char *e, const char *key)
{
	const char *end = skip_string(p, e);
	size_t n = (size_t)(end - p);
	json_t *s;
	bool eq;

	if (!memchr(p, '\\', n))
		return n >= 2 && strlen(key) == n - 2 && memcmp(p + 1, key, n - 2) == 0;
	s = json_loadb(p, n, JSON_DECODE_ANY, NULL);
	eq = json_is_string(s) && strcmp(json_string_value(s), key) == 0;
	json_decref(s);
	return eq;
}

/* Find the member `key` of the object at p; returns the key token (value in *val) or NULL. */
static const char *find_member(const char *p, const char *e, const char *key, const char **val)
{
	if (p >= e || *p != '{')
		return NULL;
	p = skip_ws(p + 1, e);
	while (p < e && *p == '"') {
		const char *k = p;
		bool match = string_is(p, e, key);
		p = skip_ws(skip_string(p, e), e);
		if (p >= e || *p != ':')
			return NULL;
		p = skip_ws(p + 1, e);
		if (match) {
			*val = p;
			return k;
		}
		p = skip_ws(skip_value(p, e), e);
		if (p < e && *p == ',')
			p = skip_ws(p + 1, e);
	}
	return NULL;
}

long cfg_json_locate(const char *text, size_t len, const struct cfg_pcomp *path, int n, bool at_key)
{
	const char *e = text + len, *p = skip_ws(text, e), *key = NULL;

	for (int i = 0; i < n; i++) {
		if (path[i].key) {
			key = find_member(p, e, path[i].key, &p);
			if (!key)
				return -1;
			continue;
		}
		if (p >= e || *p != '[')
			return -1;
		p = skip_ws(p + 1, e);
		for (size_t j = 0; j < path[i].idx; j++) {
			p = skip_ws(skip_value(p, e), e);
			if (p >= e || *p != ',')
				return -1;
			p = skip_ws(p + 1, e);
		}
		if (p >= e || *p == ']')
			return -1;
		key = NULL;
	}
	if (at_key)
		return key ? key - text : -1;
	return p - text;
}

void cfg_json_line_col(const char *t, size_t off, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off; i++) {
		if (t[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)t[i] & 0xc0) != 0x80) {
			(*col)++; /* columns count characters, not UTF-8 continuation bytes */
		}
	}
}

void cfg_json_format_path(const struct cfg_pcomp *path, int n, char *out, size_t cap)
{
	size_t o = 0;

	out[0] = '\0';
	for (int i = 0; i < n && o < cap; i++) {
		char k[128];
		int w;
		if (path[i].key)
			w = snprintf(out + o, cap - o, "%s%s", i ? "." : "",
				     log_escape(path[i].key, strlen(path[i].key), k, sizeof(k)));
		else
			w = snprintf(out + o, cap - o, "[%zu]", path[i].idx);
		if (w < 0)
			break;
		o += (size_t)w;
	}
}

void cfg_json_verror(char *err, size_t errlen, const char *name, const char *text, size_t len,
		     const struct cfg_pcomp *path, int n, const char *key, bool at_key,
		     const char *fmt, va_list ap)
{
	struct cfg_pcomp full[CFG_JSON_MAX_DEPTH + 1];
	char jpath[256];
	size_t o = 0;
	long off;
	int w;

	if (!err || !errlen)
		return;
	if (n > CFG_JSON_MAX_DEPTH)
		n = CFG_JSON_MAX_DEPTH;
	memcpy(full, path, (size_t)n * sizeof(full[0]));
	if (key)
		full[n++] = (struct cfg_pcomp){.key = key};
	off = cfg_json_locate(text, len, full, n, at_key);
	if (off < 0 && key) /* a missing member: point at its object */
		off = cfg_json_locate(text, len, full, n - 1, false);
	cfg_json_format_path(full, n, jpath, sizeof(jpath));
	if (off >= 0) {
		int line, col;
		cfg_json_line_col(text, (size_t)off, &line, &col);
		w = snprintf(err, errlen, "%s:%d:%d: ", name, line, col);
	} else {
		w = snprintf(err, errlen, "%s: ", name);
	}
	o = w > 0 ? (size_t)w : 0;
	if (jpath[0] && o < errlen) {
		w = snprintf(err + o, errlen - o, "%s: ", jpath);
		o += w > 0 ? (size_t)w : 0;
	}
	if (o < errlen)
		vsnprintf(err + o, errlen - o, fmt, ap);
}

/* Edit distance ignoring case, for "did you mean" on unknown keys. Long strings count as far
 * apart. */
size_t cfg_json_key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[33];

	if (la > 32 || lb > 32)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (tolower((unsigned char)a[i - 1]) !=
					      tolower((unsigned char)b[j - 1]));
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}
