/* The configuration loader's insides, shared by its files (not for use outside
 * src/target/config*.c):
 *
 *   config.c          entry points: load a file or a string, the built-in default
 *   config_keys.c     the machinery: error messages, typed accessors, lists, key tables
 *   config_global.c   "global"                config_portal.c   "portals"
 *   config_target.c   "targets"               config_lun.c      a target's "luns"
 *   config_acl.c      a target's "acls"       config_alua.c     a target's "alua"
 *   config_chap.c     CHAP credentials and algorithms, wherever they appear
 *   config_testing.c  "testing" and the "error" backend's rules (test-only features)
 *   config_isns.c     "global.isns" (iSNS registration)
 *
 * Every section is parsed from the json_t tree with a struct cfg_ctx that knows the JSON path
 * of the value at hand, so each message names its position in the text (config_json.c).
 */
#ifndef IX_TARGET_CONFIG_INT_H
#define IX_TARGET_CONFIG_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/config.h"
#include "target/config_json.h"

#define MAX_DEPTH      CFG_JSON_MAX_DEPTH
#define MAX_TIMEOUT_MS 3600000u

/* A CHAP secret seen while parsing, remembered with its path for the cross-direction check. */
struct secret_ref {
	const char *secret;
	bool mutual;
	struct cfg_pcomp path[MAX_DEPTH];
	int depth;
};

/* One parse: the text (for positions), where messages go, the path of the value at hand. */
struct cfg_ctx {
	const char *name; /* file name for messages */
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	struct cfg_pcomp path[MAX_DEPTH]; /* keys: literals of this file or of the json_t tree */
	int depth;
	struct secret_ref *secrets;
	size_t nsecrets, secrets_cap;
	struct ix_config *cfg; /* being filled in */
};

/* ---- error reporting (config_keys.c) ---------------------------------------------------- */

const char *cfg_esc(const char *s, char *buf, size_t cap); /* log_escape() into buf */
void cfg_push_key(struct cfg_ctx *c, const char *key);     /* the path goes into member key */
void cfg_push_idx(struct cfg_ctx *c, size_t idx);          /* ... into element idx */
void cfg_pop(struct cfg_ctx *c);
/* Report a problem with member `key` of the current value (key NULL: the current value), or
 * with the key token itself (at_key). Message: "NAME:LINE:COL: json.path: text".
 * Returns -EINVAL so callers can `return cfg_fail(...)`. */
__attribute__((format(printf, 4, 5))) int cfg_fail(struct cfg_ctx *c, const char *key,
						   bool at_key, const char *fmt, ...);
int cfg_missing(struct cfg_ctx *c, const char *key); /* "required but missing" */

/* ---- typed accessors: absent members (null counts as absent) leave *out as it is -------- */

enum str_flags {
	STR_REQUIRED = 1,
	STR_PRINTABLE = 2, /* no control characters */
	STR_ASCII = 4,	   /* printable ASCII only (SCSI INQUIRY fields) */
	KEY_PRESENT = 8,   /* in a key table: missing before any member is read */
};

const char *cfg_type_name(const json_t *v); /* "an object", "a string", ... */
json_t *cfg_member(json_t *obj, const char *key);
/* Reject members not among allowed (NULL-terminated), so a typo cannot pass silently. */
int cfg_check_keys(struct cfg_ctx *c, json_t *obj, const char *const *allowed);
int cfg_want_object(struct cfg_ctx *c, const char *key, json_t *v);
/* An optional object member key of obj: 0 when it is absent (*v NULL), 1 when it is an object
 * (*v set, key pushed so that messages name it: the caller pops it), or the error of a member
 * that is not an object. */
int cfg_enter_object(struct cfg_ctx *c, json_t *obj, const char *key, json_t **v);
int cfg_want_array(struct cfg_ctx *c, const char *key, json_t *v);
int cfg_get_bool(struct cfg_ctx *c, json_t *obj, const char *key, bool *out);
/* Integer in [min, max]. */
int cfg_get_uint(struct cfg_ctx *c, json_t *obj, const char *key, uint64_t min, uint64_t max,
		 uint64_t *out);
int cfg_get_u32(struct cfg_ctx *c, json_t *obj, const char *key, uint32_t min, uint32_t max,
		uint32_t *out);
int cfg_get_u16(struct cfg_ctx *c, json_t *obj, const char *key, uint16_t min, uint16_t max,
		uint16_t *out);
/* String of 1..maxlen bytes. Returns the json_t's own string in *out (not a copy). */
int cfg_get_str(struct cfg_ctx *c, json_t *obj, const char *key, size_t maxlen, int flags,
		const char **out);
/* Copy a string into the config; -ENOMEM reported like any other error. */
int cfg_dup_str(struct cfg_ctx *c, const char *s, char **out);
int cfg_get_strdup(struct cfg_ctx *c, json_t *obj, const char *key, size_t maxlen, int flags,
		   char **out);
void *cfg_alloc_array(struct cfg_ctx *c, size_t n, size_t size);

/* ---- value syntax ----------------------------------------------------------------------- */

int cfg_get_iscsi_name(struct cfg_ctx *c, json_t *obj, const char *key, char **out);
/* A size: an integer, or a string "4096", "512K", "1G", "2TiB" (powers of 1024). */
int cfg_get_size(struct cfg_ctx *c, json_t *obj, const char *key, uint64_t *out);
/* Pick a string from a fixed list (NULL-terminated); its index goes to *out. */
int cfg_get_enum(struct cfg_ctx *c, json_t *obj, const char *key, const char *const *names,
		 const char *what, int *out);
/* "state_dir": an absolute path (it must exist when a LU needs it; scsi_lu_new() checks). */
int cfg_get_state_dir(struct cfg_ctx *c, json_t *obj, char **out);

/* ---- lists ------------------------------------------------------------------------------ */

typedef int (*elem_fn)(struct cfg_ctx *c, json_t *e, size_t i, void *arg);

/* An array member of an object: its key, what to say when it is empty but must not be (NULL:
 * [] is fine), the size of the element its parser fills in (0: the parser stores it itself)
 * and that parser. */
struct list_spec {
	const char *key;
	const char *empty;
	size_t elem_size;
	elem_fn one;
};

/* Each element of array v (member `key` of the current value), path "key[i]" while parsed. */
int cfg_each_elem(struct cfg_ctx *c, const char *key, json_t *v, elem_fn one, void *arg);
/* The list l of obj (absent: nothing happens). With l->elem_size, *arr gets a zeroed array of
 * one element per entry and *n its length before the elements are parsed. */
int cfg_parse_list(struct cfg_ctx *c, json_t *obj, const struct list_spec *l, void **arr,
		   size_t *n, void *arg);

/* ---- key tables ------------------------------------------------------------------------- */

/* Each key of a section is named once, in a table: its JSON name, its type, where its value
 * goes (an offset into the section's struct), its bounds and its default. cfg_check_table() takes
 * the allowed names from the table (in its order: "allowed here" lists them so) and
 * cfg_parse_keys() reads the members in the same order. A key with rules of its own (a syntax,
 * an enum, a list, a sub-object) is K_FN: its parser gets the object and the section's base. */
enum key_type { K_BOOL, K_INT, K_U16, K_U32, K_U64, K_SIZE, K_STR, K_FN };

struct key {
	const char *name;
	enum key_type type;
	size_t off;	   /* of the value in the section's struct */
	uint64_t min, max; /* integers: the range; K_STR: max is the length limit */
	int flags;	   /* K_STR: enum str_flags */
	uint64_t def;	   /* integers and booleans: the default (key_defaults) */
	int (*parse)(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base); /* K_FN */
};

/* at: (struct type, member) */
#define K_OF(st, f) offsetof(st, f)
#define KEY_BOOL(n, at, d)                                                                         \
	{                                                                                          \
		.name = n, .type = K_BOOL, .off = K_OF at, .def = d                                \
	}
#define KEY_NUM(n, t, at, lo, hi, d)                                                               \
	{                                                                                          \
		.name = n, .type = t, .off = K_OF at, .min = lo, .max = hi, .def = d               \
	}
#define KEY_SIZE(n, at, d)                                                                         \
	{                                                                                          \
		.name = n, .type = K_SIZE, .off = K_OF at, .def = d                                \
	}
#define KEY_STR(n, at, len, fl)                                                                    \
	{                                                                                          \
		.name = n, .type = K_STR, .off = K_OF at, .max = len, .flags = fl                  \
	}
#define KEY_FN(n, at, fn)                                                                          \
	{                                                                                          \
		.name = n, .type = K_FN, .off = K_OF at, .parse = fn                               \
	}
#define KEY_END                                                                                    \
	{                                                                                          \
		.name = NULL                                                                       \
	}


/* Reject members the table does not name. */
int cfg_check_table(struct cfg_ctx *c, json_t *obj, const struct key *keys);
/* Where key k's value is in the section's struct at base. */
void *cfg_key_at(const struct key *k, void *base);
/* Every integer and boolean key of the table at its default. */
void cfg_key_defaults(const struct key *keys, void *base);
/* The members of obj the table names, in its order (absent ones keep their value). */
int cfg_parse_keys(struct cfg_ctx *c, json_t *obj, const struct key *keys, void *base);
/* An object: no keys but the table's, every KEY_PRESENT one there, then the members. */
int cfg_parse_table(struct cfg_ctx *c, json_t *obj, const struct key *keys, void *base);

/* ---- the sections ----------------------------------------------------------------------- */

/* config_chap.c: {"user", "secret"} at parent.key (mutual: the target's own credential). */
int cfg_parse_chap(struct cfg_ctx *c, json_t *parent, const char *key, bool mutual,
		   struct cfg_chap *out);
int cfg_chap_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base);
int cfg_mutual_chap_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base);
void cfg_chap_algs_default(uint8_t *algs, int *n);
int cfg_parse_chap_algs(struct cfg_ctx *c, json_t *parent, const char *key, uint8_t *algs,
			int *n);
/* RFC 7143 (12.1.3): no secret authenticates both directions; over the whole file, last. */
int cfg_check_secret_directions(struct cfg_ctx *c);

/* config_global.c */
void cfg_global_defaults(struct cfg_global *g);
int cfg_parse_global(struct cfg_ctx *c, json_t *root, const struct key *k, void *base);
/* config_isns.c: global.isns */
int cfg_parse_isns(struct cfg_ctx *c, json_t *g, const struct key *k, void *base);
/* config_portal.c */
int cfg_parse_portals(struct cfg_ctx *c, json_t *root, const struct key *k, void *base);
/* config_target.c */
int cfg_parse_targets(struct cfg_ctx *c, json_t *root, const struct key *k, void *base);
/* config_lun.c: cfg->targets[ti].luns[li] */
int cfg_parse_lun(struct cfg_ctx *c, json_t *v, struct ix_config *cfg, size_t ti, size_t li);
/* config_acl.c: t->acls[idx] */
int cfg_parse_acl(struct cfg_ctx *c, json_t *v, struct cfg_target *t, size_t idx);
/* config_alua.c: the target's "alua" member (tv is the target's object) */
int cfg_parse_alua(struct cfg_ctx *c, json_t *tv, const struct ix_config *cfg,
		   struct cfg_target *t);
/* config_qos.c: the "qos" member of obj (a LUN or an ACL entry), absent: no limits */
int cfg_parse_qos(struct cfg_ctx *c, json_t *obj, struct cfg_qos *out);
int cfg_qos_key(struct cfg_ctx *c, json_t *obj, const struct key *k, void *base);
/* config_testing.c */
int cfg_parse_testing(struct cfg_ctx *c, json_t *root, const struct key *k, void *base);
int cfg_parse_err_rules(struct cfg_ctx *c, json_t *v, struct scsi_lu_cfg *lu);

#endif
