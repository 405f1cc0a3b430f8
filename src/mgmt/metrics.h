/* The statistics of the target (target.h: struct ix_stats) as JSON (iscsi_get_stats) and in the
 * Prometheus text exposition format 0.0.4 (the metrics endpoint, http.c). Pure code: no
 * threads, no I/O (unit-tested in tests/unit/mgmt). The metric list is in docs/management.md.
 */
#ifndef IX_MGMT_METRICS_H
#define IX_MGMT_METRICS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "target/target.h"

/* A growing text buffer; on allocation failure it stops growing and remembers it. */
struct mbuf {
	char *p;
	size_t len, cap;
	int err; /* -ENOMEM once an append failed */
};
void mbuf_printf(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mbuf_append(struct mbuf *b, const char *data, size_t len);
void mbuf_free(struct mbuf *b);

/* A Prometheus label value: backslash, double quote and line feed escaped (\\, \", \n); other
 * bytes as they are (the format is UTF-8 and names are printable). */
void metrics_escape_label(struct mbuf *b, const char *s);

/* The upper bound of histogram bucket i in seconds as Prometheus writes it ("1e-06", ...,
 * "+Inf" for the last). */
void metrics_bucket_le(int i, char *out, size_t cap);

/* The whole exposition (HELP and TYPE lines, every series). 0 or -ENOMEM. */
int metrics_format(const struct ix_stats *st, struct mbuf *out);

/* The result object of iscsi_get_stats; NULL when out of memory. */
json_t *metrics_json(const struct ix_stats *st);

#endif
