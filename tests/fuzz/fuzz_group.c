/* libFuzzer harness for the gateway group's document (ha/ha_group_doc.c, mgmt/mgmt_group.c).
 *
 * Input: the text of a group document (inputs over 64 KiB are skipped). Properties beyond "no
 * crash": the checks return 0 or -EINVAL with a message; no message quotes a string value of
 * the input longer than a few bytes that is not a name (the CHAP secrets of the seeds are
 * "SECRET-..." strings: they must never appear in a message); a document that passes the
 * checks derives a configuration for each member, or says why; an edit that changes nothing
 * lifts to the same document one generation later. The same bytes are also tried as a
 * gateway's local file. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_group_doc.h"
#include "mgmt/mgmt_group.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_secret(const char *err)
{
	if (!err[0] || strstr(err, "SECRET-"))
		abort();
}

static void as_local(json_t *j)
{
	struct ha_group_ref ref;
	char err[512] = "";
	int rc = ha_group_ref_parse(j, &ref, err, sizeof(err));

	if (rc == -EINVAL)
		no_secret(err);
	else if (rc != 0 && rc != -ENOENT)
		abort();
	else if (rc == 0 && (!ref.member[0] || ref.poll_ms < 100))
		abort();
}

static void as_doc(json_t *d)
{
	char err[1024] = "";
	json_t *m, *e, *same;
	size_t i;
	int rc = ha_group_doc_check(d, err, sizeof(err));

	if (rc) {
		if (rc != -EINVAL)
			abort();
		no_secret(err);
		return;
	}
	json_array_foreach(json_object_get(d, "members"), i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name"));

		err[0] = '\0';
		rc = ha_group_derive(NULL, d, name, &e, err, sizeof(err));
		if (rc) {
			if (rc != -EINVAL && rc != -ENOMEM)
				abort();
			no_secret(err);
			continue;
		}
		/* nothing changed: the same document, one generation on */
		if (ha_group_lift(d, e, e, name, &same, err, sizeof(err)) != 0)
			abort();
		json_object_set(same, "generation", json_object_get(d, "generation"));
		if (!json_object_get(d, "targets") &&
		    json_array_size(json_object_get(same, "targets")) == 0)
			json_object_del(same, "targets");
		if (!json_equal(same, d))
			abort();
		json_decref(same);
		json_decref(e);
	}
	err[0] = '\0';
	if (json_array_size(json_object_get(d, "members")) &&
	    (rc = mgmt_group_validate(d, NULL,
				      json_string_value(json_object_get(
					  json_array_get(json_object_get(d, "members"), 0), "name")),
				      err, sizeof(err))) != 0) {
		if (rc != -EINVAL && rc != -ENOMEM)
			abort();
		no_secret(err);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j;

	if (size > 65536)
		return 0;
	j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!j)
		return 0;
	as_local(j);
	as_doc(j);
	json_decref(j);
	return 0;
}
