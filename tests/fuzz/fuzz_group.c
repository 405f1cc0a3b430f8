/* libFuzzer harness for the gateway group's document (ha/ha_group_doc.c, mgmt/mgmt_group.c).
 *
 * Input: the text of a group document (inputs over 64 KiB are skipped). Properties beyond "no
 * crash": the checks return 0 or -EINVAL with a message; no message quotes a secret of the
 * input (the string value of any "secret" key, 4 bytes or longer); a document that passes the
 * checks derives a configuration for each member, or says why; an edit that changes nothing
 * lifts to the same document one generation later. The same bytes are also tried as a
 * gateway's local file. */
#include <errno.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_group_doc.h"
#include "mgmt/mgmt_group.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input's secrets: the string values of its "secret" keys (at any depth). */
#define MAX_SECRETS 64
#define MAX_OTHERS 1024
struct secrets {
	const char *v[MAX_SECRETS];
	size_t n;
	const char *other[MAX_OTHERS]; /* keys and other strings: a message may quote them */
	size_t nother;
	bool overflow;
};

static void other(struct secrets *s, const char *t)
{
	if (s->nother < MAX_OTHERS)
		s->other[s->nother++] = t;
	else
		s->overflow = true;
}

static void find_secrets(struct secrets *s, json_t *j, int depth)
{
	const char *k;
	json_t *v;
	size_t i;

	if (depth > 64)
		return;
	if (json_is_object(j))
		json_object_foreach(j, k, v)
		{
			other(s, k);
			if (strcmp(k, "secret") == 0 && json_is_string(v) &&
			    json_string_length(v) >= 4 && s->n < MAX_SECRETS)
				s->v[s->n++] = json_string_value(v);
			else if (json_is_string(v))
				other(s, json_string_value(v));
			find_secrets(s, v, depth + 1);
		}
	else if (json_is_array(j))
		json_array_foreach(j, i, v)
		{
			if (json_is_string(v))
				other(s, json_string_value(v));
			find_secrets(s, v, depth + 1);
		}
}

/* A message, and none of the input's secrets in it (a secret that is also part of a key or of
 * another string of the input cannot be told apart: a message may name those). */
static void no_secret(const struct secrets *s, const char *err)
{
	if (!err[0])
		abort();
	for (size_t i = 0; i < s->n && !s->overflow; i++) {
		bool elsewhere = false;
		for (size_t k = 0; k < s->nother && !elsewhere; k++)
			elsewhere = strstr(s->other[k], s->v[i]) != NULL;
		if (!elsewhere && strstr(err, s->v[i]))
			abort();
	}
}

static void as_local(const struct secrets *s, json_t *j)
{
	struct ha_group_ref ref;
	char err[512] = "";
	int rc = ha_group_ref_parse(j, &ref, err, sizeof(err));

	if (rc == -EINVAL)
		no_secret(s, err);
	else if (rc != 0 && rc != -ENOENT)
		abort();
	else if (rc == 0 && (!ref.member[0] || ref.poll_ms < 100))
		abort();
}

static void as_doc(const struct secrets *s, json_t *d)
{
	char err[1024] = "";
	json_t *m, *e, *same;
	size_t i;
	int rc = ha_group_doc_check(d, err, sizeof(err));

	if (rc) {
		if (rc != -EINVAL)
			abort();
		no_secret(s, err);
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
			no_secret(s, err);
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
		no_secret(s, err);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct secrets s = {.n = 0};
	json_t *j;

	if (size > 65536)
		return 0;
	j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!j)
		return 0;
	find_secrets(&s, j, 0);
	as_local(&s, j);
	as_doc(&s, j);
	json_decref(j);
	return 0;
}
