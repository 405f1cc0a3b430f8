/* libFuzzer harness for ix-ctl import ceph-iscsi (mgmt/import_cephiscsi.c).
 *
 * Input: the text of a ceph-iscsi gateway.conf (inputs over 256 KiB are skipped). Properties
 * beyond "no crash": the import returns 0 or -EINVAL; on -EINVAL nothing is returned and err
 * says why, quoting no part of the input past the parser's position; on 0 the document passes
 * the group document's own checks (ha_group_doc_check) and no note quotes a password of the
 * input (a value of a "...password" key of 6 or more characters that no other string of the
 * input, key or value, contains: such a one a note may name as what it is). The same input
 * is converted twice, with and without a decryption callback. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_group_doc.h"
#include "mgmt/import_cephiscsi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* "decrypts" by copying, refuses what starts with 'x' */
static int copy_decrypt(void *arg, const char *b64, char *out, size_t cap)
{
	(void)arg;
	if (b64[0] == 'x' || strlen(b64) >= cap)
		return -EINVAL;
	strcpy(out, b64);
	return 0;
}

/* strings of j: the passwords into pw, every other key and string into other */
static void strings(json_t *j, json_t *pw, json_t *other)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_object(j)) {
		json_object_foreach(j, k, v)
		{
			size_t n = strlen(k);
			json_array_append_new(other, json_string(k));
			if (json_is_string(v) && n >= 8 && strcmp(k + n - 8, "password") == 0)
				json_array_append(pw, v);
			else
				strings(v, pw, other);
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v) strings(v, pw, other);
	} else if (json_is_string(j)) {
		json_array_append(other, j);
	}
}

static bool quotes_secret(const char *msg, json_t *pw, json_t *other)
{
	json_t *p, *o;
	size_t i, k;

	json_array_foreach(pw, i, p)
	{
		const char *s = json_string_value(p);
		bool named = false;
		if (strlen(s) < 6 || !strstr(msg, s))
			continue;
		json_array_foreach(other, k, o) named = named || strstr(json_string_value(o), s);
		if (!named)
			return true;
	}
	return false;
}

static void one(const uint8_t *data, size_t size, const struct cephiscsi_opts *o)
{
	json_t *in = json_loadb((const char *)data, size, 0, NULL);
	json_t *pw = json_array(), *other = json_array();
	json_t *doc = NULL, *notes = NULL, *n;
	char err[512] = "";
	size_t i;
	int rc = cephiscsi_import((const char *)data, size, o, &doc, &notes, err, sizeof(err));

	if (!pw || !other)
		abort();
	strings(in, pw, other);
	if (rc == -EINVAL) {
		if (doc || notes || !err[0] || quotes_secret(err, pw, other))
			abort();
	} else {
		if (rc != 0 || !doc || !json_is_array(notes))
			abort();
		if (ha_group_doc_check(doc, err, sizeof(err)) != 0)
			abort();
		json_array_foreach(notes, i, n) if (!json_is_string(n) ||
						    quotes_secret(json_string_value(n), pw, other))
		    abort();
	}
	json_decref(doc);
	json_decref(notes);
	json_decref(in);
	json_decref(pw);
	json_decref(other);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct cephiscsi_opts with_key = {.decrypt = copy_decrypt,
						       .rbd_conf = "/etc/ceph/ceph.conf"};

	if (size > 256 * 1024)
		return 0;
	one(data, size, NULL);
	one(data, size, &with_key);
	return 0;
}
