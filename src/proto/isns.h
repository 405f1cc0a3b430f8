/* iSNSP, the Internet Storage Name Service protocol (RFC 4171 section 5): the 12-byte PDU
 * header and the tag-length-value attributes of its messages. Pure code on caller buffers: no
 * sockets, no allocation, no global state; every length read from the wire is checked before
 * it is used.
 *
 * A request is built with struct isns_msg: isns_msg_init() writes the header, the isns_put_*
 * calls append attributes in the order RFC 4171 5.6.1 wants them (Source, Message Key, the
 * Delimiter, Operating Attributes), isns_msg_finish() fills in the PDU length. A failed append
 * leaves the message as it was and sets a sticky error that isns_msg_finish() returns, so a
 * builder can append unconditionally and check once; isns_msg_mark()/isns_msg_rewind() take
 * back a group of attributes that did not fit.
 *
 * A response is parsed with isns_resp_parse() (header, function, transaction id, status code)
 * and its attributes walked with struct isns_iter.
 *
 * Only single-PDU messages are built and parsed (FIRST and LAST both set): a registration that
 * does not fit in one PDU is split by its caller into several messages.
 */
#ifndef IX_PROTO_ISNS_H
#define IX_PROTO_ISNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ISNS_VERSION	 1
#define ISNS_HDR_LEN	 12
#define ISNS_PORT	 3205	/* IANA */
#define ISNS_MAX_PAYLOAD 65535u /* the PDU Length field is 16 bits */
#define ISNS_MAX_PDU	 (ISNS_HDR_LEN + ISNS_MAX_PAYLOAD)

/* Function IDs (RFC 4171 5.1.3); a response carries the request's ID | ISNS_RESPONSE. */
enum isns_func {
	ISNS_DEV_ATTR_REG = 0x0001,
	ISNS_DEV_ATTR_QRY = 0x0002,
	ISNS_DEV_GET_NEXT = 0x0003,
	ISNS_DEV_DEREG = 0x0004,
	ISNS_SCN_REG = 0x0005,
	ISNS_SCN_DEREG = 0x0006,
	ISNS_SCN_EVENT = 0x0007,
	ISNS_SCN = 0x0008,
	ISNS_ESI = 0x000d,
	ISNS_RESPONSE = 0x8000,
};

/* Header flags (RFC 4171 5.1.4). */
enum isns_flags {
	ISNS_F_CLIENT = 0x8000,	 /* sender is the iSNS client */
	ISNS_F_SERVER = 0x4000,	 /* sender is the iSNS server */
	ISNS_F_AUTH = 0x2000,	 /* an authentication block is present */
	ISNS_F_REPLACE = 0x1000, /* DevAttrReg: replace what the key names */
	ISNS_F_LAST = 0x0800,	 /* last PDU of the message */
	ISNS_F_FIRST = 0x0400,	 /* first PDU of the message */
};

/* Attribute tags used by an iSCSI target (RFC 4171 6.1). */
enum isns_tag {
	ISNS_TAG_DELIMITER = 0,
	ISNS_TAG_ENTITY_ID = 1,
	ISNS_TAG_ENTITY_PROTOCOL = 2,
	ISNS_TAG_REG_PERIOD = 6,
	ISNS_TAG_PORTAL_IP = 16,
	ISNS_TAG_PORTAL_PORT = 17,
	ISNS_TAG_ESI_INTERVAL = 19,
	ISNS_TAG_ESI_PORT = 20,
	ISNS_TAG_ISCSI_NAME = 32,
	ISNS_TAG_ISCSI_NODE_TYPE = 33,
	ISNS_TAG_ISCSI_ALIAS = 34,
	ISNS_TAG_PG_ISCSI_NAME = 48,
	ISNS_TAG_PG_PORTAL_IP = 49,
	ISNS_TAG_PG_PORTAL_PORT = 50,
	ISNS_TAG_PG_TAG = 51,
};

#define ISNS_ENTITY_PROTOCOL_ISCSI 2	    /* Entity Protocol value */
#define ISNS_NODE_TARGET	   1	    /* iSCSI Node Type bit */
#define ISNS_PORT_UDP		   0x10000u /* Portal TCP/UDP Port: UDP, else TCP */

/* Status codes of a response (RFC 4171 5.4). */
enum isns_status {
	ISNS_OK = 0,
	ISNS_UNKNOWN_ERROR = 1,
	ISNS_FORMAT_ERROR = 2,
	ISNS_INVALID_REGISTRATION = 3,
	ISNS_INVALID_QUERY = 5,
	ISNS_SOURCE_UNKNOWN = 6,
	ISNS_SOURCE_ABSENT = 7,
	ISNS_SOURCE_UNAUTHORIZED = 8,
	ISNS_NO_SUCH_ENTRY = 9,
	ISNS_VERSION_NOT_SUPPORTED = 10,
	ISNS_INTERNAL_ERROR = 11,
	ISNS_BUSY = 12,
	ISNS_OPTION_NOT_UNDERSTOOD = 13,
	ISNS_INVALID_UPDATE = 14,
	ISNS_MESSAGE_NOT_SUPPORTED = 15,
	ISNS_ATTRIBUTE_NOT_IMPLEMENTED = 18,
	ISNS_ESI_NOT_AVAILABLE = 21,
	ISNS_INVALID_DEREGISTRATION = 22,
	ISNS_REGISTRATION_NOT_SUPPORTED = 23,
};

/* The RFC's name of a status code ("Source Unauthorized"), "status N" style text for codes it
 * does not name (written into buf, which must hold 24 bytes). */
const char *isns_status_name(uint32_t status, char *buf, size_t cap);

struct isns_hdr {
	uint16_t version;
	uint16_t func;
	uint16_t length; /* payload bytes after the header */
	uint16_t flags;
	uint16_t xid; /* transaction id: a response echoes the request's */
	uint16_t seq; /* PDU number within the message, from 0 */
};

void isns_hdr_pack(const struct isns_hdr *h, uint8_t out[ISNS_HDR_LEN]);
/* Any 12 bytes decode; the checks are isns_resp_parse()'s. */
void isns_hdr_unpack(const uint8_t in[ISNS_HDR_LEN], struct isns_hdr *h);

/* ---- building a message ---- */

struct isns_msg {
	uint8_t *buf; /* the PDU: header, then payload */
	size_t cap;   /* at most ISNS_MAX_PDU is used */
	size_t len;   /* bytes written, header included */
	int err;      /* first failure (-ENOSPC, -EINVAL), sticky */
};

/* Start a PDU of function func in buf (cap >= ISNS_HDR_LEN, else err = -ENOSPC). flags gets
 * ISNS_F_CLIENT | ISNS_F_FIRST | ISNS_F_LAST added. */
void isns_msg_init(struct isns_msg *m, uint8_t *buf, size_t cap, uint16_t func, uint16_t flags,
		   uint16_t xid);
/* Append one attribute: the value's len bytes, zero-padded to a multiple of 4 (the length
 * field counts the padding, RFC 4171 5.5). -ENOSPC when it would not fit in the buffer or in
 * one PDU. */
int isns_put(struct isns_msg *m, uint32_t tag, const void *val, size_t len);
int isns_put_u32(struct isns_msg *m, uint32_t tag, uint32_t v);
/* A string attribute: UTF-8, NUL-terminated, padded. -EINVAL for NULL. */
int isns_put_str(struct isns_msg *m, uint32_t tag, const char *s);
/* An empty attribute (length 0): the Delimiter, or an attribute asked for by a query. */
int isns_put_empty(struct isns_msg *m, uint32_t tag);
static inline int isns_put_delim(struct isns_msg *m)
{
	return isns_put_empty(m, ISNS_TAG_DELIMITER);
}
/* Where the message ends now, and back to it (a group of attributes that did not fit comes
 * out whole; the sticky error is cleared). */
static inline size_t isns_msg_mark(const struct isns_msg *m)
{
	return m->len;
}
void isns_msg_rewind(struct isns_msg *m, size_t mark);
/* Fill in the PDU length. Returns the first error of the build, else 0 with *len the PDU's
 * size in bytes. */
int isns_msg_finish(struct isns_msg *m, size_t *len);

/* An IP address as iSNS carries it (16 bytes, IPv4 as ::ffff:a.b.c.d) from a numeric IPv4 or
 * IPv6 literal. 0 or -EINVAL. */
int isns_addr_parse(const char *s, uint8_t out[16]);
/* And back, for logs ("192.0.2.1", "2001:db8::1"); out must hold 46 bytes. */
const char *isns_addr_str(const uint8_t ip[16], char *out, size_t cap);

/* ---- parsing a response ---- */

struct isns_attr {
	uint32_t tag;
	uint32_t len;	    /* value bytes (padding included) */
	const uint8_t *val; /* into the parsed buffer */
};

struct isns_iter {
	const uint8_t *p;
	size_t left;
};

void isns_iter_init(struct isns_iter *it, const uint8_t *attrs, size_t len);
/* The next attribute: 1 with *a set, 0 at the end, -EBADMSG when the rest is not a whole
 * attribute (a header cut short, a length past the end; the iterator then stays at the end). */
int isns_iter_next(struct isns_iter *it, struct isns_attr *a);
/* A 4-byte unsigned value: 0 or -EBADMSG (another length). */
int isns_attr_u32(const struct isns_attr *a, uint32_t *out);
/* A string value: NUL-terminated within its length and free of control characters; copied
 * into out. 0, -EBADMSG, or -ENOSPC (longer than cap - 1). */
int isns_attr_str(const struct isns_attr *a, char *out, size_t cap);

struct isns_resp {
	struct isns_hdr h;
	uint32_t status;
	const uint8_t *attrs; /* after the status code, into the parsed buffer */
	size_t attrs_len;
};

/* How many bytes the PDU whose header starts buf takes, header included (len >=
 * ISNS_HDR_LEN). */
size_t isns_pdu_size(const uint8_t *buf);

/* Check a whole PDU (len bytes) as the response to a request of function func with
 * transaction id xid: version 1, function func | ISNS_RESPONSE, a payload of exactly the
 * header's length holding at least the status code, one PDU (FIRST and LAST), no
 * authentication block. Returns 0 with r filled in, -EBADMSG (malformed), -EPROTO (a
 * well-formed PDU that is not this answer: another function, transaction, version, a
 * multi-PDU or authenticated message). */
int isns_resp_parse(const uint8_t *pdu, size_t len, uint16_t func, uint16_t xid,
		    struct isns_resp *r);

/* In the attributes of a response: is there, after the Delimiter (in the operating
 * attributes), a string attribute tag equal to s? 1 yes, 0 no, -EBADMSG malformed. */
int isns_resp_has_str(const struct isns_resp *r, uint32_t tag, const char *s);
/* The first 4-byte attribute tag after the Delimiter: 1 found (*out set), 0 none, -EBADMSG. */
int isns_resp_u32(const struct isns_resp *r, uint32_t tag, uint32_t *out);

#endif
