/* Internal to the configuration loader (config.c): where in the JSON text a value is, for
 * error messages. jansson keeps no positions per value, so a message finds its position by
 * walking the original text along the value's JSON path. The scanner only ever sees text
 * jansson has already accepted. Pure functions (comparing a key written with JSON escapes
 * asks jansson to decode it).
 */
#ifndef IX_TARGET_CONFIG_JSON_H
#define IX_TARGET_CONFIG_JSON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* One step of a JSON path: an object key, or (key == NULL) an array index. The key strings
 * belong to the caller. */
#define CFG_JSON_MAX_DEPTH 8

struct cfg_pcomp {
	const char *key;
	size_t idx;
};

/* Byte offset in text[0..len) of the value at path[0..n) (of its key token with at_key, which
 * needs the last step to be a key), or -1 when the path is not in the text. */
long cfg_json_locate(const char *text, size_t len, const struct cfg_pcomp *path, int n,
		     bool at_key);

/* 1-based line and column (in characters, not UTF-8 bytes) of byte offset off. */
void cfg_json_line_col(const char *text, size_t off, int *line, int *col);

/* "targets[0].luns[1].size" into out (always terminated; keys escaped). */
void cfg_json_format_path(const struct cfg_pcomp *path, int n, char *out, size_t cap);

/* Write "NAME:LINE:COL: json.path: <fmt...>" into err[0..errlen) for member `key` of the
 * value at path[0..n) (key NULL: that value itself), or for the key token (at_key). n must be
 * below CFG_JSON_MAX_DEPTH. When the member is not in the text (a missing member), the
 * position is its object's; when no position applies, "NAME: json.path: ...". */
void cfg_json_verror(char *err, size_t errlen, const char *name, const char *text, size_t len,
		     const struct cfg_pcomp *path, int n, const char *key, bool at_key,
		     const char *fmt, va_list ap) __attribute__((format(printf, 10, 0)));

/* Edit distance between two keys ignoring case, for "did you mean" on unknown keys; SIZE_MAX
 * for keys longer than 32 characters. */
size_t cfg_json_key_distance(const char *a, const char *b);

#endif
