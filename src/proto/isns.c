/* iSNSP header and attribute codec (RFC 4171 section 5); see isns.h. */
#include "proto/isns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/bytes.h"

static const char *const status_names[] = {
    [ISNS_OK] = "Successful",
    [ISNS_UNKNOWN_ERROR] = "Unknown Error",
    [ISNS_FORMAT_ERROR] = "Message Format Error",
    [ISNS_INVALID_REGISTRATION] = "Invalid Registration",
    [ISNS_INVALID_QUERY] = "Invalid Query",
    [ISNS_SOURCE_UNKNOWN] = "Source Unknown",
    [ISNS_SOURCE_ABSENT] = "Source Absent",
    [ISNS_SOURCE_UNAUTHORIZED] = "Source Unauthorized",
    [ISNS_NO_SUCH_ENTRY] = "No Such Entry",
    [ISNS_VERSION_NOT_SUPPORTED] = "Version Not Supported",
    [ISNS_INTERNAL_ERROR] = "Internal Error",
    [ISNS_BUSY] = "Busy",
    [ISNS_OPTION_NOT_UNDERSTOOD] = "Option Not Understood",
    [ISNS_INVALID_UPDATE] = "Invalid Update",
    [ISNS_MESSAGE_NOT_SUPPORTED] = "Message (FUNCTION_ID) Not Supported",
    [16] = "SCN Event Rejected",
    [17] = "SCN Registration Rejected",
    [ISNS_ATTRIBUTE_NOT_IMPLEMENTED] = "Attribute Not Implemented",
    [19] = "FC_DOMAIN_ID Not Available",
    [20] = "FC_DOMAIN_ID Not Allocated",
    [ISNS_ESI_NOT_AVAILABLE] = "ESI Not Available",
    [ISNS_INVALID_DEREGISTRATION] = "Invalid Deregistration",
    [ISNS_REGISTRATION_NOT_SUPPORTED] = "Registration Feature Not Supported",
};

const char *isns_status_name(uint32_t status, char *buf, size_t cap)
{
	if (status < sizeof(status_names) / sizeof(status_names[0]) && status_names[status])
		return status_names[status];
	snprintf(buf, cap, "status %u", status);
	return buf;
}

void isns_hdr_pack(const struct isns_hdr *h, uint8_t out[ISNS_HDR_LEN])
{
	put_be16(out, h->version);
	put_be16(out + 2, h->func);
	put_be16(out + 4, h->length);
	put_be16(out + 6, h->flags);
	put_be16(out + 8, h->xid);
	put_be16(out + 10, h->seq);
}

void isns_hdr_unpack(const uint8_t in[ISNS_HDR_LEN], struct isns_hdr *h)
{
	h->version = get_be16(in);
	h->func = get_be16(in + 2);
	h->length = get_be16(in + 4);
	h->flags = get_be16(in + 6);
	h->xid = get_be16(in + 8);
	h->seq = get_be16(in + 10);
}

/* ---- building ---- */

static size_t msg_room(const struct isns_msg *m)
{
	size_t cap = m->cap < ISNS_MAX_PDU ? m->cap : ISNS_MAX_PDU;

	return cap > m->len ? cap - m->len : 0;
}

void isns_msg_init(struct isns_msg *m, uint8_t *buf, size_t cap, uint16_t func, uint16_t flags,
		   uint16_t xid)
{
	struct isns_hdr h = {.version = ISNS_VERSION,
			     .func = func,
			     .flags =
				 (uint16_t)(flags | ISNS_F_CLIENT | ISNS_F_FIRST | ISNS_F_LAST),
			     .xid = xid};

	*m = (struct isns_msg){.buf = buf, .cap = cap};
	if (!buf || cap < ISNS_HDR_LEN) {
		m->err = -ENOSPC;
		return;
	}
	isns_hdr_pack(&h, buf);
	m->len = ISNS_HDR_LEN;
}

int isns_put(struct isns_msg *m, uint32_t tag, const void *val, size_t len)
{
	size_t padded = (len + 3) & ~(size_t)3;

	if (m->err)
		return m->err;
	if (len && !val) {
		m->err = -EINVAL;
		return m->err;
	}
	if (len > ISNS_MAX_PAYLOAD || msg_room(m) < 8 + padded) {
		m->err = -ENOSPC;
		return m->err;
	}
	put_be32(m->buf + m->len, tag);
	put_be32(m->buf + m->len + 4, (uint32_t)padded);
	if (len)
		memcpy(m->buf + m->len + 8, val, len);
	memset(m->buf + m->len + 8 + len, 0, padded - len);
	m->len += 8 + padded;
	return 0;
}

int isns_put_u32(struct isns_msg *m, uint32_t tag, uint32_t v)
{
	uint8_t b[4];

	put_be32(b, v);
	return isns_put(m, tag, b, sizeof(b));
}

int isns_put_str(struct isns_msg *m, uint32_t tag, const char *s)
{
	if (!s) {
		if (!m->err)
			m->err = -EINVAL;
		return m->err;
	}
	return isns_put(m, tag, s, strlen(s) + 1); /* the NUL is part of the value */
}

int isns_put_empty(struct isns_msg *m, uint32_t tag)
{
	return isns_put(m, tag, NULL, 0);
}

void isns_msg_rewind(struct isns_msg *m, size_t mark)
{
	if (mark >= ISNS_HDR_LEN && mark <= m->len) {
		m->len = mark;
		m->err = 0;
	}
}

int isns_msg_finish(struct isns_msg *m, size_t *len)
{
	if (m->err)
		return m->err;
	put_be16(m->buf + 4, (uint16_t)(m->len - ISNS_HDR_LEN));
	*len = m->len;
	return 0;
}

int isns_addr_parse(const char *s, uint8_t out[16])
{
	uint8_t v4[4];

	if (!s)
		return -EINVAL;
	if (inet_pton(AF_INET, s, v4) == 1) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, v4, 4);
		return 0;
	}
	return inet_pton(AF_INET6, s, out) == 1 ? 0 : -EINVAL;
}

const char *isns_addr_str(const uint8_t ip[16], char *out, size_t cap)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (memcmp(ip, mapped, sizeof(mapped)) == 0) {
		if (!inet_ntop(AF_INET, ip + 12, out, (socklen_t)cap))
			snprintf(out, cap, "?");
	} else if (!inet_ntop(AF_INET6, ip, out, (socklen_t)cap)) {
		snprintf(out, cap, "?");
	}
	return out;
}

/* ---- parsing ---- */

void isns_iter_init(struct isns_iter *it, const uint8_t *attrs, size_t len)
{
	it->p = attrs;
	it->left = attrs ? len : 0;
}

int isns_iter_next(struct isns_iter *it, struct isns_attr *a)
{
	uint32_t len;

	if (it->left == 0)
		return 0;
	if (it->left < 8)
		goto bad;
	len = get_be32(it->p + 4);
	/* the length counts the padding, so it is a multiple of 4 (RFC 4171 5.5) */
	if ((len & 3) || len > it->left - 8)
		goto bad;
	a->tag = get_be32(it->p);
	a->len = len;
	a->val = it->p + 8;
	it->p += 8 + len;
	it->left -= 8 + (size_t)len;
	return 1;
bad:
	it->left = 0;
	return -EBADMSG;
}

int isns_attr_u32(const struct isns_attr *a, uint32_t *out)
{
	if (a->len != 4)
		return -EBADMSG;
	*out = get_be32(a->val);
	return 0;
}

int isns_attr_str(const struct isns_attr *a, char *out, size_t cap)
{
	const uint8_t *nul = a->len ? memchr(a->val, 0, a->len) : NULL;
	size_t n;

	if (!nul)
		return -EBADMSG;
	n = (size_t)(nul - a->val);
	for (size_t i = 0; i < n; i++)
		if (a->val[i] < 0x20 || a->val[i] == 0x7f)
			return -EBADMSG;
	if (n >= cap)
		return -ENOSPC;
	memcpy(out, a->val, n);
	out[n] = '\0';
	return 0;
}

size_t isns_pdu_size(const uint8_t *buf)
{
	return ISNS_HDR_LEN + (size_t)get_be16(buf + 4);
}

int isns_resp_parse(const uint8_t *pdu, size_t len, uint16_t func, uint16_t xid,
		    struct isns_resp *r)
{
	if (!pdu || len < ISNS_HDR_LEN)
		return -EBADMSG;
	isns_hdr_unpack(pdu, &r->h);
	if (r->h.version != ISNS_VERSION)
		return -EPROTO;
	if ((size_t)r->h.length != len - ISNS_HDR_LEN || r->h.length < 4)
		return -EBADMSG;
	if (r->h.func != (func | ISNS_RESPONSE) || r->h.xid != xid)
		return -EPROTO;
	if ((r->h.flags & (ISNS_F_FIRST | ISNS_F_LAST)) != (ISNS_F_FIRST | ISNS_F_LAST) ||
	    r->h.seq != 0 || (r->h.flags & ISNS_F_AUTH))
		return -EPROTO;
	r->status = get_be32(pdu + ISNS_HDR_LEN);
	r->attrs = pdu + ISNS_HDR_LEN + 4;
	r->attrs_len = len - ISNS_HDR_LEN - 4;
	return 0;
}

/* The first attribute tag after the Delimiter: 1 (in *a), 0 none, -EBADMSG. */
static int operating_attr(const struct isns_resp *r, uint32_t tag, struct isns_attr *a,
			  const char *s)
{
	struct isns_iter it;
	bool operating = false;
	int rc;

	isns_iter_init(&it, r->attrs, r->attrs_len);
	while ((rc = isns_iter_next(&it, a)) == 1) {
		if (a->tag == ISNS_TAG_DELIMITER) {
			operating = true;
			continue;
		}
		if (!operating || a->tag != tag)
			continue;
		if (!s)
			return 1;
		/* a string equal to s: its bytes, a NUL, then padding */
		if (a->len > strlen(s) && memcmp(a->val, s, strlen(s)) == 0 &&
		    a->val[strlen(s)] == 0)
			return 1;
	}
	return rc;
}

int isns_resp_has_str(const struct isns_resp *r, uint32_t tag, const char *s)
{
	struct isns_attr a;

	return s ? operating_attr(r, tag, &a, s) : -EINVAL;
}

int isns_resp_u32(const struct isns_resp *r, uint32_t tag, uint32_t *out)
{
	struct isns_attr a;
	int rc = operating_attr(r, tag, &a, NULL);

	if (rc != 1)
		return rc;
	return isns_attr_u32(&a, out) == 0 ? 1 : -EBADMSG;
}
