/* libFuzzer harness for the metrics endpoint's request parser (src/mgmt/http.c).
 *
 * The input is the bytes a client sends. Its prefixes are parsed, as the server does while
 * bytes trickle in. Properties checked beyond "no crash":
 *  - the result is 0, -EMSGSIZE, -EBADMSG or a head length within the bytes given;
 *  - once a prefix is complete (or refused), every longer prefix gives the same answer (every
 *    prefix up to 512 bytes, then a sample);
 *  - the method and path are NUL-terminated within their fields, the path starts with '/'.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_req(const struct http_req *rq)
{
	if (!memchr(rq->method, 0, sizeof(rq->method)) || !memchr(rq->path, 0, sizeof(rq->path)))
		abort();
	if (rq->path[0] != '/' || !rq->method[0])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_req rq;
	int first = 0;
	bool decided = false;

	if (size > HTTP_MAX_REQUEST + 64)
		size = HTTP_MAX_REQUEST + 64;
	for (size_t n = 0; n <= size; n++) {
		int r;

		/* every short prefix, then a sample (and the whole input) */
		if (n > 512 && n % 97 && n != size && n != HTTP_MAX_REQUEST)
			continue;
		r = http_parse_request((const char *)data, n, &rq);

		if (r != 0 && r != -EMSGSIZE && r != -EBADMSG && (r < 0 || (size_t)r > n))
			abort();
		if (r > 0)
			check_req(&rq);
		if (decided && r != first)
			abort();
		if (r != 0 && !decided) {
			decided = true;
			first = r;
		}
	}
	return 0;
}
