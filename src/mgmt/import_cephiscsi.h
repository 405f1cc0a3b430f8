/* ix-ctl import ceph-iscsi: ceph-iscsi's configuration object (gateway.conf, the JSON that
 * ceph_iscsi_config keeps in RADOS, schema version 11) converted into the gateway group's
 * document (docs/ha.md "The gateway group"; docs/migration.md says what carries over). Pure
 * functions: no I/O, no logging (the input holds CHAP secrets; no note quotes one).
 */
#ifndef IX_MGMT_IMPORT_CEPHISCSI_H
#define IX_MGMT_IMPORT_CEPHISCSI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CEPHISCSI_VERSION   11      /* the gateway.conf schema converted (ceph-iscsi 3.x) */
#define CEPHISCSI_MAX_DOC   (4u << 20)

/* What LIO (and tcmu-runner's rbd handler, which answers INQUIRY for ceph-iscsi's user:rbd
 * disks) reports for every disk, besides what is derived from its wwn. */
#define LIO_VENDOR          "LIO-ORG"
#define LIO_TCMU_PRODUCT    "TCMU device"
#define LIO_OUI             0x001405u   /* the IEEE company id LIO puts in the NAA designator */

struct cephiscsi_opts {
	const char *rbd_conf;     /* every LUN's rbd.conf; NULL: none (the gateway's default) */
	const char *rbd_client;   /* every LUN's rbd.client; NULL: none */
	int exclusive_lock;       /* every LUN's rbd.exclusive_lock (0: not written) */
	/* An encrypted CHAP password (password_encryption_enabled: base64 of RSA-OAEP with the
	   gateways' private key) into out (cap bytes, NUL-terminated): 0 or -errno. NULL: such
	   credentials are not carried over (noted). */
	int (*decrypt)(void *arg, const char *b64, char *out, size_t cap);
	void *decrypt_arg;
};

/* The NAA IEEE Registered Extended designator (16 bytes) LIO shows in VPD page 0x83 for a
 * device whose unit serial (vpd_unit_serial, ceph-iscsi's "wwn") is serial: 0x6, the 24-bit
 * company id 00 14 05, then the serial's hexadecimal digits in order, one nibble each (any
 * other character skipped), as many as fit (25); bytes not reached stay 0. */
void lio_naa_from_serial(const char *serial, uint8_t naa[16]);

/* text (len bytes): a gateway.conf. *doc: the group document (generation 1), a new reference;
 * *notes: a new array of strings, one for each thing not carried over and why (none quotes a
 * secret). -EINVAL with err when the input is no gateway.conf this can read (not JSON, not an
 * object, a schema older than CEPHISCSI_VERSION, the wrong type at the top level). */
int cephiscsi_import(const char *text, size_t len, const struct cephiscsi_opts *o, json_t **doc,
		     json_t **notes, char *err, size_t errlen);

#endif
