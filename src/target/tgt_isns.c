/* The target's iSNS client: what it registers (the model), the messages that do it, and the
 * connection's state machine. See tgt_isns.h for the behaviour. */
#include "target/tgt_isns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event/loop.h"
#include "proto/isns.h"
#include "target/config.h"
#include "util/log.h"

/* ---- the model: what the server should know ---- */

struct isns_pg {
	uint8_t ip[16];
	uint16_t port;
	uint16_t tag; /* the portal's TPGT */
};

struct isns_node {
	char *name;
	char *alias; /* NULL: none */
	struct isns_pg *pgs;
	size_t npgs;
};

struct isns_portal {
	uint8_t ip[16];
	uint16_t port;
};

struct isns_model {
	struct isns_portal *portals;
	size_t nportals;
	struct isns_node *nodes;
	size_t nnodes;
};

static void node_free(struct isns_node *n)
{
	free(n->name);
	free(n->alias);
	free(n->pgs);
	memset(n, 0, sizeof(*n));
}

static void model_free(struct isns_model *m)
{
	for (size_t i = 0; i < m->nnodes; i++)
		node_free(&m->nodes[i]);
	free(m->nodes);
	free(m->portals);
	memset(m, 0, sizeof(*m));
}

static int node_copy(struct isns_node *dst, const struct isns_node *src)
{
	*dst = (struct isns_node){.npgs = src->npgs};
	dst->name = strdup(src->name);
	dst->alias = src->alias ? strdup(src->alias) : NULL;
	dst->pgs = malloc((src->npgs ? src->npgs : 1) * sizeof(*dst->pgs));
	if (!dst->name || (src->alias && !dst->alias) || !dst->pgs) {
		node_free(dst);
		return -ENOMEM;
	}
	if (src->npgs)
		memcpy(dst->pgs, src->pgs, src->npgs * sizeof(*dst->pgs));
	return 0;
}

/* The portals of src and its first nnodes nodes. */
static int model_copy(struct isns_model *dst, const struct isns_model *src, size_t nnodes)
{
	*dst = (struct isns_model){0};
	dst->portals = malloc((src->nportals ? src->nportals : 1) * sizeof(*dst->portals));
	dst->nodes = calloc(nnodes ? nnodes : 1, sizeof(*dst->nodes));
	if (!dst->portals || !dst->nodes)
		goto fail;
	if (src->nportals)
		memcpy(dst->portals, src->portals, src->nportals * sizeof(*dst->portals));
	dst->nportals = src->nportals;
	for (; dst->nnodes < nnodes; dst->nnodes++)
		if (node_copy(&dst->nodes[dst->nnodes], &src->nodes[dst->nnodes]) < 0)
			goto fail;
	return 0;
fail:
	model_free(dst);
	return -ENOMEM;
}

static const struct isns_node *model_node(const struct isns_model *m, const char *name)
{
	for (size_t i = 0; i < m->nnodes; i++)
		if (strcmp(m->nodes[i].name, name) == 0)
			return &m->nodes[i];
	return NULL;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool node_same(const struct isns_node *a, const struct isns_node *b)
{
	return strcmp(a->name, b->name) == 0 && str_eq(a->alias, b->alias) && a->npgs == b->npgs &&
	       memcmp(a->pgs, b->pgs, a->npgs * sizeof(*a->pgs)) == 0;
}

static bool portals_same(const struct isns_model *a, const struct isns_model *b)
{
	return a->nportals == b->nportals &&
	       memcmp(a->portals, b->portals, a->nportals * sizeof(*a->portals)) == 0;
}

/* The addresses a portal is reached at: its own, or for a wildcard ("0.0.0.0", "::") every
 * address of the host's interfaces that are up, loopback and IPv6 link-local ones excepted
 * ("::" takes IPv4 ones too, as a dual-stack socket accepts them). */
static int portal_addrs(const char *address, uint8_t (**out)[16], size_t *n)
{
	static const uint8_t any4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0},
			     any6[16] = {0};
	struct ifaddrs *ifs = NULL;
	uint8_t ip[16], (*a)[16];
	size_t cap = 1;
	bool v4only;

	*out = NULL;
	*n = 0;
	if (isns_addr_parse(address, ip) < 0)
		return -EINVAL;
	if (memcmp(ip, any4, 16) != 0 && memcmp(ip, any6, 16) != 0) {
		if (!(*out = malloc(sizeof(**out))))
			return -ENOMEM;
		memcpy((*out)[0], ip, 16);
		*n = 1;
		return 0;
	}
	v4only = memcmp(ip, any4, 16) == 0;
	if (getifaddrs(&ifs) < 0)
		return -errno;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
		cap++;
	if (!(a = calloc(cap, sizeof(*a)))) {
		freeifaddrs(ifs);
		return -ENOMEM;
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		const struct sockaddr *sa = i->ifa_addr;
		char s[INET6_ADDRSTRLEN];

		if (!sa || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		if (sa->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, s,
				  sizeof(s));
		} else if (sa->sa_family == AF_INET6 && !v4only) {
			const struct in6_addr *v6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
			if (IN6_IS_ADDR_LINKLOCAL(v6))
				continue;
			inet_ntop(AF_INET6, v6, s, sizeof(s));
		} else {
			continue;
		}
		if (isns_addr_parse(s, ip) < 0)
			continue;
		bool dup = false;
		for (size_t j = 0; j < *n; j++)
			dup |= memcmp(a[j], ip, 16) == 0;
		if (!dup)
			memcpy(a[(*n)++], ip, 16);
	}
	freeifaddrs(ifs);
	*out = a;
	return 0;
}

static int add_portal(struct isns_model *m, const uint8_t ip[16], uint16_t port)
{
	struct isns_portal *p;

	for (size_t i = 0; i < m->nportals; i++)
		if (m->portals[i].port == port && memcmp(m->portals[i].ip, ip, 16) == 0)
			return 0;
	p = realloc(m->portals, (m->nportals + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	m->portals = p;
	p = &p[m->nportals++];
	memset(p, 0, sizeof(*p)); /* compared with memcmp */
	memcpy(p->ip, ip, 16);
	p->port = port;
	return 0;
}

static int add_pg(struct isns_node *n, const uint8_t ip[16], uint16_t port, uint16_t tag)
{
	struct isns_pg *pg = realloc(n->pgs, (n->npgs + 1) * sizeof(*pg));

	if (!pg)
		return -ENOMEM;
	n->pgs = pg;
	pg = &pg[n->npgs++];
	memset(pg, 0, sizeof(*pg));
	memcpy(pg->ip, ip, 16);
	pg->port = port;
	pg->tag = tag;
	return 0;
}

/* What cfg says the server should know. */
static int model_build(const struct ix_config *cfg, struct isns_model *m)
{
	uint8_t(**addrs)[16] = calloc(cfg->nportals ? cfg->nportals : 1, sizeof(*addrs));
	size_t *naddrs = calloc(cfg->nportals ? cfg->nportals : 1, sizeof(*naddrs));
	int rc = addrs && naddrs ? 0 : -ENOMEM;

	*m = (struct isns_model){0};
	for (size_t i = 0; rc == 0 && i < cfg->nportals; i++) {
		const struct cfg_portal *p = &cfg->portals[i];

		rc = portal_addrs(p->address, &addrs[i], &naddrs[i]);
		for (size_t j = 0; rc == 0 && j < naddrs[i]; j++)
			rc = add_portal(m, addrs[i][j], p->port);
	}
	if (rc == 0 && !(m->nodes = calloc(cfg->ntargets ? cfg->ntargets : 1, sizeof(*m->nodes))))
		rc = -ENOMEM;
	for (size_t t = 0; rc == 0 && t < cfg->ntargets; t++) {
		const struct cfg_target *ct = &cfg->targets[t];
		struct isns_node *n = &m->nodes[m->nnodes++];

		n->name = strdup(ct->name);
		n->alias = ct->alias ? strdup(ct->alias) : NULL;
		if (!n->name || (ct->alias && !n->alias))
			rc = -ENOMEM;
		for (size_t i = 0; rc == 0 && i < cfg->nportals; i++) {
			const struct cfg_portal *p = &cfg->portals[i];

			if (!cfg_target_on_portal(ct, p))
				continue;
			for (size_t j = 0; rc == 0 && j < naddrs[i]; j++)
				rc = add_pg(n, addrs[i][j], p->port, p->tpgt);
		}
	}
	for (size_t i = 0; addrs && i < cfg->nportals; i++)
		free(addrs[i]);
	free(addrs);
	free(naddrs);
	if (rc < 0)
		model_free(m);
	return rc;
}

/* ---- the client ---- */

enum isns_state {
	ST_DOWN,       /* no connection; the timer is the back-off (or nothing to do) */
	ST_CONNECTING, /* connect() under way; the timer is its timeout */
	ST_READY,      /* connected, nothing asked; the timer is the next refresh */
	ST_BUSY,       /* a request sent (perhaps partly), its answer awaited; the timer too */
};

enum isns_op {
	OP_REG_FULL,	 /* DevAttrReg, Replace: the entity, its portals, nodes that fit */
	OP_REG_NODES,	 /* DevAttrReg: more nodes */
	OP_DEREG_NODE,	 /* DevDereg of one node */
	OP_DEREG_ENTITY, /* DevDereg of the entity (no targets left, or shutdown) */
	OP_QUERY,	 /* DevAttrQry of the entity: refresh, and is it still known? */
};

struct tgt_isns {
	struct ev_loop *loop;
	struct sockaddr_storage sa;
	socklen_t salen;
	char server[80]; /* "ADDR:PORT" for logs */
	char entity[256];
	uint32_t period_s;  /* asked for */
	uint32_t granted_s; /* the server's, 0 until known */

	struct isns_model want; /* from the newest configuration */
	struct isns_model have; /* what the server was last told, when have_valid */
	bool have_valid;
	bool registered; /* the entity may exist at the server (for the shutdown) */

	enum isns_state st;
	int fd;
	struct ev_io io;
	struct ev_timer timer;
	uint64_t refresh_at_ms;
	unsigned backoff_ms;

	/* the request in flight */
	enum isns_op op;
	uint16_t xid;
	struct isns_model sent; /* OP_REG_FULL: what it states; OP_REG_NODES: the nodes;
				   OP_DEREG_NODE: the node (nodes[0]) */
	uint8_t *tx;
	size_t tx_len, tx_off;
	uint8_t *rx;
	size_t rx_len;

	bool stopping, stopped;
	char problem[256]; /* the failure logged last ("" after a success) */
	size_t filling;	   /* targets a full registration left out, not registered yet */
};

static void kick(struct tgt_isns *c);
static void on_io(struct ev_io *w, uint32_t revents);

static uint64_t refresh_ms(const struct tgt_isns *c)
{
	uint64_t p = (uint64_t)(c->granted_s ? c->granted_s : c->period_s) * 1000 / 2;

	return p < ISNS_REFRESH_MAX_MS ? p : ISNS_REFRESH_MAX_MS;
}

static void close_conn(struct tgt_isns *c)
{
	if (c->fd >= 0) {
		ev_io_stop(c->loop, &c->io);
		close(c->fd);
		c->fd = -1;
	}
	ev_timer_stop(c->loop, &c->timer);
	model_free(&c->sent);
	c->tx_len = c->tx_off = c->rx_len = 0;
	c->st = ST_DOWN;
}

/* Something went wrong: log it (unless it is what was logged last), drop the connection, try
 * again after the back-off, stating the whole entity then. */
__attribute__((format(printf, 2, 3))) static void fail(struct tgt_isns *c, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	close_conn(c);
	c->have_valid = false;
	c->filling = 0;
	if (c->stopping) {
		log_warn("isns", "iSNS server %s: not deregistered: %s", c->server, what);
		c->stopped = true;
		return;
	}
	if (strcmp(what, c->problem) != 0) {
		log_warn("isns", "iSNS server %s: %s; trying again (every %u s at most)", c->server,
			 what, ISNS_RETRY_MAX_MS / 1000);
		snprintf(c->problem, sizeof(c->problem), "%s", what);
	} else {
		log_dbg("isns", "iSNS server %s: %s", c->server, what);
	}
	ev_timer_start(c->loop, &c->timer, c->backoff_ms);
	c->backoff_ms =
	    c->backoff_ms * 2 < ISNS_RETRY_MAX_MS ? c->backoff_ms * 2 : ISNS_RETRY_MAX_MS;
}

static void succeeded(struct tgt_isns *c)
{
	if (c->problem[0])
		log_info("isns", "iSNS server %s: answering again", c->server);
	c->problem[0] = '\0';
	c->backoff_ms = ISNS_RETRY_MIN_MS;
}

static void connect_server(struct tgt_isns *c)
{
	int fd = socket(c->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		fail(c, "socket: %s", strerror(errno));
		return;
	}
	if (connect(fd, (struct sockaddr *)&c->sa, c->salen) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		fail(c, "connect: %s", strerror(e));
		return;
	}
	c->fd = fd;
	c->st = ST_CONNECTING;
	ev_io_init(&c->io, fd, on_io, c);
	if (ev_io_start(c->loop, &c->io, EPOLLOUT) < 0) {
		fail(c, "cannot watch the connection");
		return;
	}
	ev_timer_start(c->loop, &c->timer, ISNS_IO_TIMEOUT_MS);
}

/* ---- messages ---- */

static bool node_has_pg(const struct isns_node *n, const struct isns_portal *p)
{
	for (size_t i = 0; i < n->npgs; i++)
		if (n->pgs[i].port == p->port && memcmp(n->pgs[i].ip, p->ip, 16) == 0)
			return true;
	return false;
}

/* A node with its portal groups: one tagged with the portal's TPGT for each portal it is
 * reachable through, and one with a NULL tag (no access, RFC 4171 3.4) for each other portal
 * of the entity: without it a server gives a node and portal registered together a portal
 * group of tag 1 (RFC 4171 5.6.5.1; open-isns does), which would lead initiators to a portal
 * the target's `portals` list does not name. */
static void put_node(struct isns_msg *m, const struct isns_node *n,
		     const struct isns_model *entity)
{
	isns_put_str(m, ISNS_TAG_ISCSI_NAME, n->name);
	isns_put_u32(m, ISNS_TAG_ISCSI_NODE_TYPE, ISNS_NODE_TARGET);
	if (n->alias)
		isns_put_str(m, ISNS_TAG_ISCSI_ALIAS, n->alias);
	for (size_t i = 0; i < n->npgs; i++) {
		isns_put_str(m, ISNS_TAG_PG_ISCSI_NAME, n->name);
		isns_put(m, ISNS_TAG_PG_PORTAL_IP, n->pgs[i].ip, 16);
		isns_put_u32(m, ISNS_TAG_PG_PORTAL_PORT, n->pgs[i].port);
		isns_put_u32(m, ISNS_TAG_PG_TAG, n->pgs[i].tag);
	}
	for (size_t i = 0; i < entity->nportals; i++) {
		if (node_has_pg(n, &entity->portals[i]))
			continue;
		isns_put_str(m, ISNS_TAG_PG_ISCSI_NAME, n->name);
		isns_put(m, ISNS_TAG_PG_PORTAL_IP, entity->portals[i].ip, 16);
		isns_put_u32(m, ISNS_TAG_PG_PORTAL_PORT, entity->portals[i].port);
		isns_put_empty(m, ISNS_TAG_PG_TAG);
	}
}

/* Source, the entity as message key, the Delimiter, and the entity as first operating
 * attribute. */
static void put_head(struct tgt_isns *c, struct isns_msg *m, const char *source)
{
	isns_put_str(m, ISNS_TAG_ISCSI_NAME, source);
	isns_put_str(m, ISNS_TAG_ENTITY_ID, c->entity);
	isns_put_delim(m);
	isns_put_str(m, ISNS_TAG_ENTITY_ID, c->entity);
}

/* The whole entity: its attributes and portals, then as many of the wanted nodes (with their
 * portal groups) as fit in ISNS_REQ_MAX. sent gets what was stated. */
static int build_full(struct tgt_isns *c, struct isns_msg *m)
{
	size_t k = 0;

	put_head(c, m, c->want.nodes[0].name);
	isns_put_u32(m, ISNS_TAG_ENTITY_PROTOCOL, ISNS_ENTITY_PROTOCOL_ISCSI);
	isns_put_u32(m, ISNS_TAG_REG_PERIOD, c->period_s);
	for (size_t i = 0; i < c->want.nportals; i++) {
		isns_put(m, ISNS_TAG_PORTAL_IP, c->want.portals[i].ip, 16);
		isns_put_u32(m, ISNS_TAG_PORTAL_PORT, c->want.portals[i].port);
	}
	for (; k < c->want.nnodes && !m->err; k++) {
		size_t mark = isns_msg_mark(m);

		put_node(m, &c->want.nodes[k], &c->want);
		if (m->err == -ENOSPC && k > 0) {
			isns_msg_rewind(m, mark); /* the rest follows node by node */
			break;
		}
	}
	if (m->err)
		return m->err;
	return model_copy(&c->sent, &c->want, k);
}

/* The next thing to tell the server, built into c->tx; false when there is nothing. */
static bool next_op(struct tgt_isns *c, struct isns_msg *m)
{
	const struct isns_node *source = c->have.nnodes	  ? &c->have.nodes[0]
					 : c->want.nnodes ? &c->want.nodes[0]
							  : NULL;
	uint16_t xid = ++c->xid;

	if (c->stopping) {
		if (!c->registered || !source)
			return false;
		c->op = OP_DEREG_ENTITY;
		isns_msg_init(m, c->tx, ISNS_REQ_MAX, ISNS_DEV_DEREG, 0, xid);
		isns_put_str(m, ISNS_TAG_ISCSI_NAME, source->name);
		isns_put_delim(m);
		isns_put_str(m, ISNS_TAG_ENTITY_ID, c->entity);
		return true;
	}
	/* no targets: nothing to register; an entity registered before goes */
	if (c->want.nnodes == 0) {
		if (!c->have.nnodes && (c->have_valid || !c->registered))
			return false;
		c->op = OP_DEREG_ENTITY;
		isns_msg_init(m, c->tx, ISNS_REQ_MAX, ISNS_DEV_DEREG, 0, xid);
		isns_put_str(m, ISNS_TAG_ISCSI_NAME, source ? source->name : "");
		isns_put_delim(m);
		isns_put_str(m, ISNS_TAG_ENTITY_ID, c->entity);
		return source != NULL;
	}
	if (!c->have_valid || !c->have.nnodes || !portals_same(&c->want, &c->have))
		goto full;
	for (size_t i = 0; i < c->have.nnodes; i++) {
		const struct isns_node *n = &c->have.nodes[i];

		if (model_node(&c->want, n->name))
			continue;
		c->op = OP_DEREG_NODE;
		c->sent = (struct isns_model){.nodes = calloc(1, sizeof(*c->sent.nodes))};
		if (!c->sent.nodes || node_copy(&c->sent.nodes[0], n) < 0)
			goto nomem;
		c->sent.nnodes = 1;
		isns_msg_init(m, c->tx, ISNS_REQ_MAX, ISNS_DEV_DEREG, 0, xid);
		isns_put_str(m, ISNS_TAG_ISCSI_NAME, n->name);
		isns_put_delim(m);
		isns_put_str(m, ISNS_TAG_ISCSI_NAME, n->name);
		return true;
	}
	for (size_t i = 0; i < c->want.nnodes; i++) {
		const struct isns_node *h = model_node(&c->have, c->want.nodes[i].name);

		if (h && !node_same(&c->want.nodes[i], h))
			goto full; /* alias or portal groups changed */
	}
	/* new nodes: as many as fit in one message */
	c->op = OP_REG_NODES;
	c->sent = (struct isns_model){.nodes = calloc(c->want.nnodes, sizeof(*c->sent.nodes))};
	if (!c->sent.nodes)
		goto nomem;
	isns_msg_init(m, c->tx, ISNS_REQ_MAX, ISNS_DEV_ATTR_REG, 0, xid);
	put_head(c, m, c->have.nodes[0].name);
	for (size_t i = 0; i < c->want.nnodes && !m->err; i++) {
		const struct isns_node *n = &c->want.nodes[i];
		size_t mark = isns_msg_mark(m);

		if (model_node(&c->have, n->name))
			continue;
		put_node(m, n, &c->want);
		if (m->err == -ENOSPC && c->sent.nnodes > 0) {
			isns_msg_rewind(m, mark); /* the next message takes it */
			break;
		}
		if (!m->err && node_copy(&c->sent.nodes[c->sent.nnodes++], n) < 0)
			goto nomem;
	}
	if (c->sent.nnodes || m->err)
		return true;
	model_free(&c->sent);
	if (ev_now_ms(c->loop) < c->refresh_at_ms)
		return false;
	c->op = OP_QUERY;
	isns_msg_init(m, c->tx, ISNS_REQ_MAX, ISNS_DEV_ATTR_QRY, 0, xid);
	isns_put_str(m, ISNS_TAG_ISCSI_NAME, c->have.nodes[0].name);
	isns_put_str(m, ISNS_TAG_ENTITY_ID, c->entity);
	isns_put_delim(m);
	isns_put_empty(m, ISNS_TAG_ENTITY_ID);
	isns_put_empty(m, ISNS_TAG_REG_PERIOD);
	return true;
full:
	c->op = OP_REG_FULL;
	isns_msg_init(m, c->tx, ISNS_REQ_MAX, ISNS_DEV_ATTR_REG, ISNS_F_REPLACE, xid);
	if (build_full(c, m) == -ENOMEM)
		goto nomem;
	return true;
nomem:
	model_free(&c->sent);
	m->err = -ENOMEM;
	return true;
}

static void flush_tx(struct tgt_isns *c)
{
	while (c->tx_off < c->tx_len) {
		ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			fail(c, "send: %s", n < 0 ? strerror(errno) : "nothing sent");
			return;
		}
		c->tx_off += (size_t)n;
	}
	if (ev_io_modify(c->loop, &c->io, EPOLLIN | (c->tx_off < c->tx_len ? EPOLLOUT : 0)) < 0)
		fail(c, "cannot watch the connection");
}

/* Connected and idle: send what is to be said next, or wait for the next refresh. */
static void kick(struct tgt_isns *c)
{
	struct isns_msg m;
	size_t len;
	int rc;

	if (c->st != ST_READY)
		return;
	if (!next_op(c, &m)) {
		if (c->stopping || (c->want.nnodes == 0 && c->have.nnodes == 0)) {
			/* done, or nothing registered and nothing to register: a reload that
			   adds a target connects again */
			close_conn(c);
			c->have_valid = true;
			c->stopped = c->stopping;
			return;
		}
		c->filling = 0; /* nothing left to register */
		ev_timer_start(c->loop, &c->timer,
			       c->refresh_at_ms > ev_now_ms(c->loop)
				   ? c->refresh_at_ms - ev_now_ms(c->loop)
				   : 0);
		return;
	}
	if ((rc = isns_msg_finish(&m, &len)) < 0) {
		model_free(&c->sent);
		/* one node that does not fit in ISNS_REQ_MAX (dozens of portals): nothing to do but
		   to say so and retry later (a reload may fix it) */
		fail(c, "cannot build the registration: %s", strerror(-rc));
		return;
	}
	if (c->op == OP_REG_FULL)
		c->registered = true; /* it may exist from now on: deregistered at shutdown */
	c->tx_len = len;
	c->tx_off = 0;
	c->st = ST_BUSY;
	ev_timer_start(c->loop, &c->timer, ISNS_IO_TIMEOUT_MS);
	flush_tx(c);
}

static void log_full(struct tgt_isns *c)
{
	char more[64] = "";

	if (c->sent.nnodes < c->want.nnodes)
		snprintf(more, sizeof(more), " (of %zu: the others follow)", c->want.nnodes);
	log_info("isns",
		 "registered with iSNS server %s: entity %s, %zu target%s%s, %zu portal%s "
		 "(registration period %u s)",
		 c->server, c->entity, c->sent.nnodes, c->sent.nnodes == 1 ? "" : "s", more,
		 c->sent.nportals, c->sent.nportals == 1 ? "" : "s",
		 c->granted_s ? c->granted_s : c->period_s);
}

/* The answer to the request in flight, status and all: what the server now knows. */
static void answered(struct tgt_isns *c, const struct isns_resp *r)
{
	char st[24];
	uint32_t period;
	int rc;

	if (r->status != ISNS_OK &&
	    !((c->op == OP_DEREG_NODE || c->op == OP_DEREG_ENTITY) &&
	      (r->status == ISNS_NO_SUCH_ENTRY || r->status == ISNS_INVALID_DEREGISTRATION))) {
		fail(c, "%s refused: %s",
		     c->op == OP_QUERY		? "query"
		     : c->op == OP_DEREG_NODE	? "deregistration of a target"
		     : c->op == OP_DEREG_ENTITY ? "deregistration"
						: "registration",
		     isns_status_name(r->status, st, sizeof(st)));
		return;
	}
	if ((rc = isns_resp_u32(r, ISNS_TAG_REG_PERIOD, &period)) == 1 && period > 0)
		c->granted_s = period;
	succeeded(c);
	switch (c->op) {
	case OP_REG_FULL:
		log_full(c);
		c->filling = c->want.nnodes > c->sent.nnodes ? c->want.nnodes - c->sent.nnodes : 0;
		model_free(&c->have);
		c->have = c->sent;
		c->sent = (struct isns_model){0};
		c->have_valid = c->registered = true;
		break;
	case OP_REG_NODES: {
		size_t k = c->sent.nnodes;
		struct isns_node *n = realloc(c->have.nodes, (c->have.nnodes + k) * sizeof(*n));

		if (!n) {
			c->have_valid = false; /* stated whole next time */
			break;
		}
		c->have.nodes = n;
		memcpy(&n[c->have.nnodes], c->sent.nodes, k * sizeof(*n));
		c->have.nnodes += k;
		c->sent.nnodes = 0; /* moved */
		if (c->filling) {
			c->filling -= k < c->filling ? k : c->filling;
			if (!c->filling)
				log_info("isns",
					 "iSNS server %s: entity %s: all %zu targets registered",
					 c->server, c->entity, c->have.nnodes);
		} else if (k == 1) {
			log_info("isns", "iSNS server %s: registered target %s", c->server,
				 n[c->have.nnodes - 1].name);
		} else {
			log_info("isns", "iSNS server %s: registered %zu targets", c->server, k);
		}
		break;
	}
	case OP_DEREG_NODE:
		for (size_t i = 0; i < c->have.nnodes; i++) {
			if (strcmp(c->have.nodes[i].name, c->sent.nodes[0].name) != 0)
				continue;
			node_free(&c->have.nodes[i]);
			c->have.nodes[i] = c->have.nodes[--c->have.nnodes];
			break;
		}
		log_info("isns", "iSNS server %s: deregistered target %s", c->server,
			 c->sent.nodes[0].name);
		break;
	case OP_DEREG_ENTITY:
		log_info("isns", "iSNS server %s: deregistered entity %s", c->server, c->entity);
		model_free(&c->have);
		c->have_valid = true;
		c->registered = false;
		if (c->stopping) {
			c->stopped = true;
			close_conn(c);
			return;
		}
		break;
	case OP_QUERY:
		rc = isns_resp_has_str(r, ISNS_TAG_ENTITY_ID, c->entity);
		if (rc < 0) {
			fail(c, "malformed answer to a query");
			return;
		}
		if (rc == 0) {
			log_warn("isns",
				 "iSNS server %s no longer knows entity %s: registering it again",
				 c->server, c->entity);
			c->have_valid = false;
		} else {
			log_dbg("isns", "iSNS server %s: registration of %s refreshed", c->server,
				c->entity);
		}
		break;
	}
	model_free(&c->sent);
	c->refresh_at_ms = ev_now_ms(c->loop) + refresh_ms(c);
	c->st = ST_READY;
	ev_timer_stop(c->loop, &c->timer);
	kick(c);
}

/* One whole PDU at the front of rx. */
static void on_pdu(struct tgt_isns *c, const uint8_t *pdu, size_t len)
{
	struct isns_resp r;
	struct isns_hdr h;
	int rc;

	isns_hdr_unpack(pdu, &h);
	if (h.version == ISNS_VERSION && !(h.func & ISNS_RESPONSE) && (h.flags & ISNS_F_SERVER)) {
		/* a request from the server (ESI, SCN): not asked for, not answered */
		log_dbg("isns", "iSNS server %s: ignoring its request (function %#x)", c->server,
			h.func);
		return;
	}
	if (c->st != ST_BUSY) {
		fail(c, "unexpected message (function %#x)", h.func);
		return;
	}
	static const uint16_t funcs[] = {[OP_REG_FULL] = ISNS_DEV_ATTR_REG,
					 [OP_REG_NODES] = ISNS_DEV_ATTR_REG,
					 [OP_DEREG_NODE] = ISNS_DEV_DEREG,
					 [OP_DEREG_ENTITY] = ISNS_DEV_DEREG,
					 [OP_QUERY] = ISNS_DEV_ATTR_QRY};
	rc = isns_resp_parse(pdu, len, funcs[c->op], c->xid, &r);
	if (rc < 0) {
		fail(c, "%s answer (function %#x, transaction %u, version %u)",
		     rc == -EBADMSG ? "malformed" : "unexpected", h.func, h.xid, h.version);
		return;
	}
	answered(c, &r);
}

static void on_readable(struct tgt_isns *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->rx + c->rx_len, ISNS_MAX_PDU - c->rx_len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			fail(c, "%s", n == 0 ? "connection closed by the server" : strerror(errno));
			return;
		}
		c->rx_len += (size_t)n;
		while (c->rx_len >= ISNS_HDR_LEN && c->fd >= 0) {
			size_t size = isns_pdu_size(c->rx);

			if (c->rx_len < size)
				break;
			on_pdu(c, c->rx, size);
			if (c->fd < 0) /* failed, or stopped: rx is gone */
				return;
			memmove(c->rx, c->rx + size, c->rx_len - size);
			c->rx_len -= size;
		}
		if (c->fd < 0)
			return;
	}
}

static void on_io(struct ev_io *w, uint32_t revents)
{
	struct tgt_isns *c = w->arg;
	int err = 0;
	socklen_t elen = sizeof(err);

	if (c->st == ST_CONNECTING) {
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			err = errno;
		if (err) {
			fail(c, "connect: %s", strerror(err));
			return;
		}
		if (ev_io_modify(c->loop, &c->io, EPOLLIN) < 0) {
			fail(c, "cannot watch the connection");
			return;
		}
		ev_timer_stop(c->loop, &c->timer);
		log_dbg("isns", "connected to iSNS server %s", c->server);
		c->st = ST_READY;
		c->have_valid = false; /* a new connection: state the whole entity */
		kick(c);
		return;
	}
	if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP))
		on_readable(c);
	if (c->fd >= 0 && (revents & EPOLLOUT) && c->st == ST_BUSY)
		flush_tx(c);
}

static void on_timer(struct ev_timer *t)
{
	struct tgt_isns *c = t->arg;

	switch (c->st) {
	case ST_DOWN:
		connect_server(c);
		break;
	case ST_CONNECTING:
		fail(c, "connect: no answer within %u s", ISNS_IO_TIMEOUT_MS / 1000);
		break;
	case ST_BUSY:
		fail(c, "no answer within %u s", ISNS_IO_TIMEOUT_MS / 1000);
		break;
	case ST_READY:
		kick(c); /* the refresh is due */
		break;
	}
}

/* ---- entry points ---- */

int tgt_isns_new(struct ev_loop *loop, const struct ix_config *cfg, struct tgt_isns **out)
{
	const struct cfg_isns *ci = &cfg->global.isns;
	struct tgt_isns *c;
	uint8_t ip[16];
	char host[200];

	*out = NULL;
	if (!ci->enabled || !ci->server)
		return 0;
	if (isns_addr_parse(ci->server, ip) < 0)
		return -EINVAL; /* the loader checked it */
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->loop = loop;
	c->fd = -1;
	c->period_s = ci->registration_period_s;
	c->backoff_ms = ISNS_RETRY_MIN_MS;
	if (strchr(ci->server, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&c->sa;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(ci->port);
		inet_pton(AF_INET6, ci->server, &s6->sin6_addr);
		c->salen = sizeof(*s6);
		snprintf(c->server, sizeof(c->server), "[%s]:%u", ci->server, ci->port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&c->sa;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(ci->port);
		inet_pton(AF_INET, ci->server, &s4->sin_addr);
		c->salen = sizeof(*s4);
		snprintf(c->server, sizeof(c->server), "%s:%u", ci->server, ci->port);
	}
	if (ci->entity) {
		snprintf(c->entity, sizeof(c->entity), "%s", ci->entity);
	} else {
		if (gethostname(host, sizeof(host)) < 0 || !host[0])
			snprintf(host, sizeof(host), "localhost");
		host[sizeof(host) - 1] = '\0';
		snprintf(c->entity, sizeof(c->entity), "ix:%s", host);
	}
	c->tx = malloc(ISNS_REQ_MAX);
	c->rx = malloc(ISNS_MAX_PDU);
	if (!c->tx || !c->rx || model_build(cfg, &c->want) < 0) {
		tgt_isns_free(c);
		return -ENOMEM;
	}
	ev_timer_init(&c->timer, on_timer, c);
	ev_timer_start(loop, &c->timer, 0); /* connect once the loop runs */
	log_info("isns", "registering entity %s with iSNS server %s", c->entity, c->server);
	*out = c;
	return 0;
}

void tgt_isns_update(struct tgt_isns *c, const struct ix_config *cfg)
{
	struct isns_model m;
	int rc;

	if (!c)
		return;
	if ((rc = model_build(cfg, &m)) < 0) {
		log_warn("isns", "iSNS: the registration does not follow the reload: %s",
			 strerror(-rc));
		return;
	}
	model_free(&c->want);
	c->want = m;
	if (c->st == ST_READY)
		kick(c);
	else if (c->st == ST_DOWN && !ev_timer_pending(&c->timer))
		ev_timer_start(c->loop, &c->timer, 0);
}

void tgt_isns_stop(struct tgt_isns *c)
{
	uint64_t deadline;

	if (!c)
		return;
	c->stopping = true;
	ev_timer_stop(c->loop, &c->timer);
	if (!c->registered) {
		close_conn(c);
		return;
	}
	if (c->st == ST_READY)
		kick(c);
	else if (c->st == ST_DOWN)
		connect_server(c);
	deadline = ev_now_ms(c->loop) + ISNS_STOP_MS;
	while (!c->stopped && c->st != ST_DOWN && ev_now_ms(c->loop) < deadline)
		ev_loop_run_once(c->loop, 50);
	if (!c->stopped)
		log_warn("isns",
			 "iSNS server %s: entity %s not deregistered (no answer within %u s)",
			 c->server, c->entity, ISNS_STOP_MS / 1000);
	close_conn(c);
}

void tgt_isns_free(struct tgt_isns *c)
{
	if (!c)
		return;
	close_conn(c);
	model_free(&c->want);
	model_free(&c->have);
	free(c->tx);
	free(c->rx);
	free(c);
}
