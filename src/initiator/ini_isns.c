/* iSNS discovery (RFC 4171) for the initiator: ask an iSNS server which targets this initiator
 * may see and through which portals, as `iscsiadm -m discovery -t isns` does.
 *
 * One blocking exchange on its own TCP connection, bounded by the caller's timeout: a
 * DevAttrQry for the storage nodes of type Target with their portal groups, the initiator's
 * name as its Source. A server answers only registered sources (open-isns: Source Unknown),
 * and shows a source only the targets of the discovery domains it shares with them, so when
 * the initiator is not registered it registers itself first (an entity of its own holding the
 * initiator node), asks, and deregisters again: the server's discovery domains decide what it
 * sees. Nothing else the server may send on the connection (it knows no ESI port of ours) is
 * expected; a PDU that is not the answer is skipped, at most a few. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "initiator/ini_isns.h"
#include "ix/sync.h"

#define ISNS_NODE_INITIATOR 2 /* iSCSI Node Type bit */
#define SKIP_MAX	    8 /* PDUs that are not the answer, skipped before giving up */
#define QUERY_EACH_MAX	    65536 /* nodes asked for one at a time, at most */

int ini_isns_build_query(uint8_t *buf, size_t cap, const char *source, const char *node,
			 uint16_t xid)
{
	struct isns_msg m;
	size_t len;
	int rc;

	isns_msg_init(&m, buf, cap, ISNS_DEV_ATTR_QRY, 0, xid);
	isns_put_str(&m, ISNS_TAG_ISCSI_NAME, source);
	if (node)
		isns_put_str(&m, ISNS_TAG_ISCSI_NAME, node);
	else
		isns_put_u32(&m, ISNS_TAG_ISCSI_NODE_TYPE, ISNS_NODE_TARGET);
	isns_put_delim(&m);
	isns_put_empty(&m, ISNS_TAG_ISCSI_NAME);
	isns_put_empty(&m, ISNS_TAG_ISCSI_NODE_TYPE);
	isns_put_empty(&m, ISNS_TAG_PG_ISCSI_NAME);
	isns_put_empty(&m, ISNS_TAG_PG_PORTAL_IP);
	isns_put_empty(&m, ISNS_TAG_PG_PORTAL_PORT);
	isns_put_empty(&m, ISNS_TAG_PG_TAG);
	rc = isns_msg_finish(&m, &len);
	return rc < 0 ? rc : (int)len;
}

/* ---------------------------------------------------------------- the answer */

struct pg {
	char name[sizeof(((struct ix_discovered_target *)0)->name)];
	uint8_t ip[16];
	uint32_t port, tag;
	bool have_ip, have_port, have_tag, bad;
};

struct parse {
	struct ix_discovered_target *nodes;
	size_t nnodes, capnodes;
	bool *is_target; /* parallel to nodes */
	struct pg *pgs;
	size_t npgs, cappgs;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	void *np;
	size_t nc;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	np = realloc(*p, nc * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

static struct ix_discovered_target *node_find(struct parse *ps, const char *name)
{
	for (size_t i = 0; i < ps->nnodes; i++)
		if (strcmp(ps->nodes[i].name, name) == 0)
			return &ps->nodes[i];
	return NULL;
}

/* A new node by name (or the one of that name seen before): its index, or -1 with *err set. */
static long node_add(struct parse *ps, const char *name, int *err)
{
	struct ix_discovered_target *t = node_find(ps, name);
	size_t cap = ps->capnodes;

	if (t)
		return t - ps->nodes;
	if (grow((void **)&ps->nodes, &ps->capnodes, ps->nnodes, sizeof(*ps->nodes)) < 0 ||
	    grow((void **)&ps->is_target, &cap, ps->nnodes, sizeof(*ps->is_target)) < 0) {
		*err = -ENOMEM;
		return -1;
	}
	t = &ps->nodes[ps->nnodes];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	ps->is_target[ps->nnodes] = true; /* the query's key: only targets come back */
	return (long)ps->nnodes++;
}

static int walk(struct parse *ps, const struct isns_resp *r)
{
	struct isns_iter it;
	struct isns_attr a;
	bool operating = false;
	long node = -1;
	struct pg *pg = NULL;
	int rc, err = 0;

	isns_iter_init(&it, r->attrs, r->attrs_len);
	while ((rc = isns_iter_next(&it, &a)) == 1) {
		char s[sizeof(ps->nodes[0].name)];
		uint32_t v;

		if (a.tag == ISNS_TAG_DELIMITER) {
			operating = true;
			continue;
		}
		if (!operating)
			continue; /* the key, echoed */
		switch (a.tag) {
		case ISNS_TAG_ISCSI_NAME:
			/* a name that is not a string the node database could hold: skip it, and
			   what follows it until the next node */
			node = isns_attr_str(&a, s, sizeof(s)) == 0 && s[0] ?
				       node_add(ps, s, &err) : -1;
			if (err)
				return err;
			break;
		case ISNS_TAG_ISCSI_NODE_TYPE:
			if (node >= 0 && isns_attr_u32(&a, &v) == 0 && !(v & ISNS_NODE_TARGET))
				ps->is_target[node] = false;
			break;
		case ISNS_TAG_PG_ISCSI_NAME:
			if (grow((void **)&ps->pgs, &ps->cappgs, ps->npgs, sizeof(*ps->pgs)) < 0)
				return -ENOMEM;
			pg = &ps->pgs[ps->npgs++];
			memset(pg, 0, sizeof(*pg));
			if (isns_attr_str(&a, pg->name, sizeof(pg->name)) < 0)
				pg->bad = true;
			break;
		case ISNS_TAG_PG_PORTAL_IP:
			if (!pg)
				break;
			if (a.len == 16) {
				memcpy(pg->ip, a.val, 16);
				pg->have_ip = true;
			} else {
				pg->bad = true;
			}
			break;
		case ISNS_TAG_PG_PORTAL_PORT:
			if (!pg)
				break;
			if (isns_attr_u32(&a, &v) == 0 && !(v & ISNS_PORT_UDP) && (v & 0xffff)) {
				pg->port = v & 0xffff;
				pg->have_port = true;
			} else {
				pg->bad = true;
			}
			break;
		case ISNS_TAG_PG_TAG:
			/* an empty PGT: the portal gives no access to the node */
			if (pg && a.len == 4 && isns_attr_u32(&a, &v) == 0 && v <= 0xffff) {
				pg->tag = v;
				pg->have_tag = true;
			}
			break;
		default:
			break;
		}
	}
	return rc < 0 ? -EBADMSG : 0;
}

static void pg_addr(const struct pg *pg, char *out, size_t cap)
{
	char ip[48];
	bool v4 = true;

	for (int i = 0; i < 10; i++)
		v4 = v4 && pg->ip[i] == 0;
	v4 = v4 && pg->ip[10] == 0xff && pg->ip[11] == 0xff;
	isns_addr_str(pg->ip, ip, sizeof(ip));
	snprintf(out, cap, v4 ? "%s:%u,%u" : "[%s]:%u,%u", ip, pg->port, pg->tag);
}

int ini_isns_parse_targets(const struct isns_resp *r, struct ix_discovery **out)
{
	struct parse ps = {0};
	struct ix_discovery *d;
	size_t n = 0;
	int rc;

	*out = NULL;
	rc = walk(&ps, r);
	if (rc == 0) {
		for (size_t i = 0; i < ps.npgs; i++) {
			const struct pg *pg = &ps.pgs[i];
			struct ix_discovered_target *t;

			if (pg->bad || !pg->have_ip || !pg->have_port || !pg->have_tag)
				continue;
			t = node_find(&ps, pg->name);
			if (!t || t->naddrs >= IX_MAX_ADDRS)
				continue;
			pg_addr(pg, t->addrs[t->naddrs], sizeof(t->addrs[0]));
			/* the same portal twice (in two answers' worth of portal groups): once */
			for (int k = 0; k < t->naddrs; k++)
				if (strcmp(t->addrs[k], t->addrs[t->naddrs]) == 0) {
					t->naddrs--;
					break;
				}
			t->naddrs++;
		}
		/* targets only, and only those reachable through some portal */
		for (size_t i = 0; i < ps.nnodes; i++)
			if (ps.is_target[i] && ps.nodes[i].naddrs > 0)
				ps.nodes[n++] = ps.nodes[i];
		d = calloc(1, sizeof(*d));
		if (!d) {
			rc = -ENOMEM;
		} else {
			d->ntargets = (int)n;
			d->targets = ps.nodes;
			ps.nodes = NULL;
			*out = d;
		}
	}
	free(ps.nodes);
	free(ps.is_target);
	free(ps.pgs);
	return rc;
}

/* ---------------------------------------------------------------- the exchange */

struct conn {
	int fd;
	struct timespec deadline;
	uint16_t xid;
	uint8_t *buf; /* ISNS_MAX_PDU: requests and answers */
	char *err;
	size_t errlen;
};

static int ms_left(const struct conn *c)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (c->deadline.tv_sec - now.tv_sec) * 1000LL +
	     (c->deadline.tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : ms > 1 << 30 ? 1 << 30 : (int)ms;
}

static int wait_fd(struct conn *c, short ev)
{
	struct pollfd p = {.fd = c->fd, .events = ev};
	int n;

	do {
		n = poll(&p, 1, ms_left(c));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

static int send_all(struct conn *c, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = wait_fd(c, POLLOUT);
			if (rc < 0)
				return rc;
			continue;
		}
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(struct conn *c, uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = recv(c->fd, p, len, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = wait_fd(c, POLLIN);
			if (rc < 0)
				return rc;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Send the request in c->buf (len bytes, function func) and receive its answer there. */
static int exchange(struct conn *c, size_t len, uint16_t func, struct isns_resp *r)
{
	const char *what = func == ISNS_DEV_ATTR_QRY  ? "DevAttrQry" :
			   func == ISNS_DEV_ATTR_REG  ? "DevAttrReg" :
			   func == ISNS_DEV_GET_NEXT ? "DevGetNext" : "DevDereg";
	int rc = send_all(c, c->buf, len);

	if (rc < 0) {
		snprintf(c->err, c->errlen, "sending %s: %s", what, strerror(-rc));
		return rc;
	}
	for (int skipped = 0; skipped <= SKIP_MAX; skipped++) {
		size_t size = 0;

		rc = recv_all(c, c->buf, ISNS_HDR_LEN);
		if (rc == 0) {
			size = isns_pdu_size(c->buf);
			rc = recv_all(c, c->buf + ISNS_HDR_LEN, size - ISNS_HDR_LEN);
		}
		if (rc < 0) {
			snprintf(c->err, c->errlen, "waiting for the answer to %s: %s", what,
				 rc == -ECONNRESET ? "connection closed by the server" :
						     strerror(-rc));
			return rc;
		}
		rc = isns_resp_parse(c->buf, size, func, c->xid, r);
		if (rc == 0)
			return 0;
		if (rc == -EBADMSG) {
			snprintf(c->err, c->errlen, "malformed answer to %s", what);
			return -EBADMSG;
		}
		if (r->h.func == (func | ISNS_RESPONSE) && r->h.xid == c->xid) {
			snprintf(c->err, c->errlen,
				 "the answer to %s comes in several PDUs or authenticated, which "
				 "this client does not take",
				 what);
			return -EPROTO;
		}
	}
	snprintf(c->err, c->errlen, "no answer to %s among the server's messages", what);
	return -EPROTO;
}

static int status_err(struct conn *c, const char *what, uint32_t status)
{
	char sb[24];

	snprintf(c->err, c->errlen, "%s refused by the iSNS server: %s", what,
		 isns_status_name(status, sb, sizeof(sb)));
	return status == ISNS_SOURCE_UNAUTHORIZED ? -EACCES : -EPROTO;
}

static int query(struct conn *c, const char *initiator, const char *node, struct isns_resp *r)
{
	int len = ini_isns_build_query(c->buf, ISNS_MAX_PDU, initiator, node, ++c->xid);

	if (len < 0) {
		snprintf(c->err, c->errlen, "initiator name too long for iSNS");
		return len;
	}
	return exchange(c, (size_t)len, ISNS_DEV_ATTR_QRY, r);
}

static int reg(struct conn *c, const char *initiator, uint16_t func)
{
	struct isns_resp r;
	struct isns_msg m;
	size_t len;
	int rc;

	isns_msg_init(&m, c->buf, ISNS_MAX_PDU, func, 0, ++c->xid);
	isns_put_str(&m, ISNS_TAG_ISCSI_NAME, initiator);
	isns_put_delim(&m);
	if (func == ISNS_DEV_ATTR_REG)
		/* no Message Key: a new entity, its identifier the server's choice */
		isns_put_u32(&m, ISNS_TAG_ENTITY_PROTOCOL, ISNS_ENTITY_PROTOCOL_ISCSI);
	isns_put_str(&m, ISNS_TAG_ISCSI_NAME, initiator);
	if (func == ISNS_DEV_ATTR_REG)
		isns_put_u32(&m, ISNS_TAG_ISCSI_NODE_TYPE, ISNS_NODE_INITIATOR);
	rc = isns_msg_finish(&m, &len);
	if (rc < 0)
		return rc;
	rc = exchange(c, len, func, &r);
	if (rc < 0)
		return rc;
	if (r.status != ISNS_OK)
		return status_err(c, func == ISNS_DEV_ATTR_REG ? "registering the initiator" :
								 "deregistering the initiator",
				  r.status);
	return 0;
}

static int parse_err(struct conn *c, int rc)
{
	if (rc == -EBADMSG)
		snprintf(c->err, c->errlen, "malformed attributes in the answer to DevAttrQry");
	else if (rc < 0)
		snprintf(c->err, c->errlen, "%s", strerror(-rc));
	return rc;
}

/* The storage node after prev ("" for the first) in the server's order: DevGetNext. 1 with
 * next set, 0 at the end, -errno. */
static int get_next(struct conn *c, const char *initiator, const char *prev, char *next,
		    size_t cap)
{
	struct isns_resp r;
	struct isns_msg m;
	struct isns_iter it;
	struct isns_attr a;
	size_t len;
	int rc;

	isns_msg_init(&m, c->buf, ISNS_MAX_PDU, ISNS_DEV_GET_NEXT, 0, ++c->xid);
	isns_put_str(&m, ISNS_TAG_ISCSI_NAME, initiator);
	if (prev[0])
		isns_put_str(&m, ISNS_TAG_ISCSI_NAME, prev);
	else
		isns_put_empty(&m, ISNS_TAG_ISCSI_NAME);
	isns_put_delim(&m);
	isns_put_u32(&m, ISNS_TAG_ISCSI_NODE_TYPE, ISNS_NODE_TARGET);
	rc = isns_msg_finish(&m, &len);
	if (rc == 0)
		rc = exchange(c, len, ISNS_DEV_GET_NEXT, &r);
	if (rc < 0)
		return rc;
	if (r.status == ISNS_NO_SUCH_ENTRY)
		return 0;
	if (r.status != ISNS_OK)
		return status_err(c, "DevGetNext", r.status);
	/* the next object's key comes first, before the Delimiter */
	isns_iter_init(&it, r.attrs, r.attrs_len);
	while ((rc = isns_iter_next(&it, &a)) == 1 && a.tag != ISNS_TAG_DELIMITER)
		if (a.tag == ISNS_TAG_ISCSI_NAME)
			return isns_attr_str(&a, next, cap) == 0 && next[0] ? 1 : parse_err(c, -EBADMSG);
	return rc < 0 ? parse_err(c, -EBADMSG) : 0;
}

/* Every target one DevGetNext and one DevAttrQry at a time, into *out. */
static int query_each(struct conn *c, const char *initiator, struct ix_discovery **out)
{
	char prev[sizeof(((struct ix_discovered_target *)0)->name)] = "", next[sizeof(prev)];
	struct ix_discovery *all = calloc(1, sizeof(*all));
	int cap = 0, rc = 0;

	if (!all)
		return parse_err(c, -ENOMEM);
	for (int n = 0; n < QUERY_EACH_MAX; n++) {
		struct ix_discovery *one = NULL;
		struct isns_resp r;

		rc = get_next(c, initiator, prev, next, sizeof(next));
		if (rc <= 0)
			break;
		if (strcmp(next, prev) == 0) {
			snprintf(c->err, c->errlen, "DevGetNext answers %s after itself", prev);
			rc = -EPROTO;
			break;
		}
		memcpy(prev, next, sizeof(prev));
		rc = query(c, initiator, next, &r);
		if (rc == 0 && r.status == ISNS_NO_SUCH_ENTRY)
			continue; /* gone meanwhile */
		if (rc == 0 && r.status != ISNS_OK)
			rc = status_err(c, "DevAttrQry", r.status);
		if (rc == 0)
			rc = parse_err(c, ini_isns_parse_targets(&r, &one));
		if (rc < 0)
			break;
		for (int i = 0; i < one->ntargets; i++) {
			if (all->ntargets == cap) {
				void *nt = realloc(all->targets, (size_t)(cap ? cap * 2 : 16) *
								 sizeof(*all->targets));
				if (!nt) {
					rc = parse_err(c, -ENOMEM);
					break;
				}
				all->targets = nt;
				cap = cap ? cap * 2 : 16;
			}
			all->targets[all->ntargets++] = one->targets[i];
		}
		ix_discovery_free(one);
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		ix_discovery_free(all);
		return rc;
	}
	*out = all;
	return 0;
}

/* host, host:port, [v6], [v6]:port, or a bare IPv6 literal. */
static int split_server(const char *server, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon = strrchr(server, ':');
	size_t hl;

	snprintf(port, pcap, "%d", ISNS_PORT);
	if (server[0] == '[') {
		const char *end = strchr(server, ']');
		if (!end || (end[1] && end[1] != ':'))
			return -EINVAL;
		hl = (size_t)(end - server - 1);
		if (end[1] == ':')
			snprintf(port, pcap, "%s", end + 2);
		server++;
	} else if (colon && strchr(server, ':') == colon) {
		hl = (size_t)(colon - server);
		snprintf(port, pcap, "%s", colon + 1);
	} else {
		hl = strlen(server);
	}
	if (hl == 0 || hl >= hcap)
		return -EINVAL;
	memcpy(host, server, hl);
	host[hl] = 0;
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	return port[0] && atoi(port) > 0 && atoi(port) < 65536 ? 0 : -EINVAL;
}

static int connect_server(struct conn *c, const char *server)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	char host[256], port[16];
	int rc;

	if (split_server(server, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(c->err, c->errlen, "\"%s\" is not an iSNS server address "
			 "(HOST, HOST:PORT or [IPv6]:PORT)", server);
		return -EINVAL;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		snprintf(c->err, c->errlen, "%s: %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	rc = -ECONNREFUSED;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		socklen_t sl = sizeof(rc);
		int soerr = 0;

		c->fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       a->ai_protocol);
		if (c->fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(c->fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		rc = errno == EINPROGRESS ? wait_fd(c, POLLOUT) : -errno;
		if (rc == 0 && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0)
			rc = -soerr;
		if (rc == 0)
			break;
		close(c->fd);
		c->fd = -1;
	}
	freeaddrinfo(ai);
	if (c->fd < 0)
		snprintf(c->err, c->errlen, "connecting to %s port %s: %s", host, port,
			 strerror(-rc));
	return c->fd < 0 ? rc : 0;
}

int ix_sync_discover_isns(const char *server, const char *initiator_name, int timeout_ms,
			  struct ix_discovery **out, char *errmsg, size_t errlen)
{
	char dummy[8];
	struct conn c = {.fd = -1, .err = errmsg ? errmsg : dummy,
			 .errlen = errmsg ? errlen : sizeof(dummy)};
	struct isns_resp r;
	bool registered = false;
	int rc;

	if (out)
		*out = NULL;
	if (c.errlen)
		c.err[0] = 0;
	if (!server || !initiator_name || !initiator_name[0] || !out || timeout_ms <= 0) {
		snprintf(c.err, c.errlen, "invalid arguments");
		return -EINVAL;
	}
	clock_gettime(CLOCK_MONOTONIC, &c.deadline);
	c.deadline.tv_sec += timeout_ms / 1000;
	c.deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
	if (c.deadline.tv_nsec >= 1000000000L) {
		c.deadline.tv_sec++;
		c.deadline.tv_nsec -= 1000000000L;
	}
	c.buf = malloc(ISNS_MAX_PDU);
	if (!c.buf) {
		snprintf(c.err, c.errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	rc = connect_server(&c, server);
	if (rc == 0)
		rc = query(&c, initiator_name, NULL, &r);
	if (rc == 0 && (r.status == ISNS_SOURCE_UNKNOWN || r.status == ISNS_NO_SUCH_ENTRY)) {
		/* not registered: register, ask again, deregister below */
		rc = reg(&c, initiator_name, ISNS_DEV_ATTR_REG);
		registered = rc == 0;
		if (rc == 0)
			rc = query(&c, initiator_name, NULL, &r);
	}
	if (rc == 0 && (r.status == ISNS_INTERNAL_ERROR || r.status == ISNS_BUSY)) {
		/* an answer too big for the server (open-isns: Internal Error past ~64 KiB):
		   one node at a time */
		rc = query_each(&c, initiator_name, out);
	} else {
		if (rc == 0 && r.status != ISNS_OK)
			rc = status_err(&c, "DevAttrQry", r.status);
		if (rc == 0)
			rc = parse_err(&c, ini_isns_parse_targets(&r, out));
	}
	if (registered) {
		/* best effort: the server drops the entity after its registration period anyway;
		   the message stays the query's (a failed clean-up overwrote a failure's reason) */
		char keep[256];

		snprintf(keep, sizeof(keep), "%s", c.err);
		reg(&c, initiator_name, ISNS_DEV_DEREG);
		snprintf(c.err, c.errlen, "%s", keep);
	}
	if (c.fd >= 0)
		close(c.fd);
	free(c.buf);
	return rc;
}
