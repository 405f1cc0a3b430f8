/* libFuzzer harness for ix-ctl import ceph-iscsi (mgmt/import_cephiscsi.c).
 *
 * Input: the text of a ceph-iscsi gateway.conf (inputs over 256 KiB are skipped). Properties
 * beyond "no crash": the import returns 0 or -EINVAL; on -EINVAL nothing is returned and err
 * says why; on 0 the document passes the group document's own checks (ha_group_doc_check) and
 * every note is a string that quotes no secret (the seeds' CHAP passwords are "SECRET-..."
 * strings). The same input is converted twice, with and without a decryption callback. */
#include <errno.h>
#include <jansson.h>
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

static void one(const uint8_t *data, size_t size, const struct cephiscsi_opts *o)
{
	json_t *doc = NULL, *notes = NULL, *n;
	char err[512] = "";
	size_t i;
	int rc = cephiscsi_import((const char *)data, size, o, &doc, &notes, err, sizeof(err));

	if (rc == -EINVAL) {
		if (doc || notes || !err[0] || strstr(err, "SECRET-"))
			abort();
		return;
	}
	if (rc != 0 || !doc || !json_is_array(notes))
		abort();
	if (ha_group_doc_check(doc, err, sizeof(err)) != 0)
		abort();
	json_array_foreach(notes, i, n) if (!json_is_string(n) ||
					    strstr(json_string_value(n), "SECRET-")) abort();
	json_decref(doc);
	json_decref(notes);
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
