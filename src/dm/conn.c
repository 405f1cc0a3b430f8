#include "dm/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct iscsi_conn *iscsi_conn_new(const struct dm_ops *dm, struct ev_loop *loop,
				  enum iscsi_role role, const struct iscsi_role_ops *ops,
				  void *role_priv)
{
	struct iscsi_conn *c = calloc(1, sizeof(*c) + dm->conn_priv_size);

	if (!c)
		return NULL;
	c->dm = dm;
	c->loop = loop;
	c->role = role;
	c->role_ops = ops;
	c->role_priv = role_priv;
	c->refcnt = 1;
	c->state = ISCSI_CONN_XPT_UP;
	c->params.max_recv_dsl = 8192;
	c->params.max_xmit_dsl = 8192;
	list_init(&c->tx_free);
	c->ctrl_cap = 8192;
	return c;
}

int iscsi_conn_set_ctrl_cap(struct iscsi_conn *c, uint32_t cap)
{
	if (cap > c->ctrl_cap)
		c->ctrl_cap = cap;
	return 0;
}

void iscsi_conn_ctrl_release(struct iscsi_conn *c)
{
	free(c->ctrl_buf);
	c->ctrl_buf = NULL;
	c->ctrl_alloc = 0;
}

/* ctrl_buf holds at least len (<= ctrl_cap) bytes: 0 or -ENOMEM. Grown in powers of two from
 * 8 KiB (a Login PDU's limit), so an idle connection keeps what its logins needed. */
__attribute__((noinline, cold)) static int ctrl_grow(struct iscsi_conn *c, uint32_t len)
{
	uint32_t n = 8192;
	uint8_t *b;

	while (n < len)
		n *= 2;
	if (n > c->ctrl_cap)
		n = c->ctrl_cap;
	b = malloc(n); /* the old contents are not needed: no realloc copy */
	if (!b)
		return -ENOMEM;
	free(c->ctrl_buf);
	c->ctrl_buf = b;
	c->ctrl_alloc = n;
	return 0;
}

static inline int ctrl_reserve(struct iscsi_conn *c, uint32_t len)
{
	return len <= c->ctrl_alloc ? 0 : ctrl_grow(c, len);
}

struct dm_txchunk {
	struct dm_txchunk *next;
	uint32_t nfree; /* iscsi_conn_tx_trim's count */
	struct dm_txpdu p[ISCSI_CONN_TXCHUNK];
};

/* One more chunk of pooled descriptors on tx_free: 0 or -ENOMEM. */
__attribute__((noinline, cold)) static int tx_grow(struct iscsi_conn *c)
{
	struct dm_txchunk *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	k->next = c->tx_chunks;
	c->tx_chunks = k;
	c->tx_pooled += ISCSI_CONN_TXCHUNK;
	for (int i = 0; i < ISCSI_CONN_TXCHUNK; i++) {
		k->p[i].pooled = true;
		list_add_tail(&k->p[i].link, &c->tx_free);
	}
	if (k->next && c->role_ops->tx_grown)
		c->role_ops->tx_grown(c);
	return 0;
}

uint32_t iscsi_conn_tx_trim(struct iscsi_conn *c)
{
	struct dm_txchunk *k, **pp;
	struct list_head *pos;
	uint32_t left = 0, freed = 0;

	/* a descriptor is free when it is on tx_free */
	for (k = c->tx_chunks; k; k = k->next)
		k->nfree = 0;
	list_for_each(pos, &c->tx_free)
	{
		uintptr_t a = (uintptr_t)list_entry(pos, struct dm_txpdu, link);

		for (k = c->tx_chunks; k; k = k->next)
			if (a >= (uintptr_t)k->p && a < (uintptr_t)(k->p + ISCSI_CONN_TXCHUNK)) {
				k->nfree++;
				break;
			}
	}
	for (k = c->tx_chunks; k; k = k->next)
		left += k->nfree < ISCSI_CONN_TXCHUNK;
	for (pp = &c->tx_chunks; (k = *pp);) {
		if (k->nfree < ISCSI_CONN_TXCHUNK || left < 1) {
			left += k->nfree == ISCSI_CONN_TXCHUNK; /* kept */
			pp = &k->next;
			continue;
		}
		for (int i = 0; i < ISCSI_CONN_TXCHUNK; i++)
			list_del(&k->p[i].link);
		c->tx_pooled -= ISCSI_CONN_TXCHUNK;
		freed += ISCSI_CONN_TXCHUNK;
		*pp = k->next;
		free(k);
	}
	return freed;
}

void iscsi_conn_get(struct iscsi_conn *c)
{
	c->refcnt++;
}

static void conn_free(void *arg)
{
	struct iscsi_conn *c = arg;

	if (c->role_ops->release)
		c->role_ops->release(c);
	if (c->dm->release)
		c->dm->release(c);
	while (c->tx_chunks) {
		struct dm_txchunk *k = c->tx_chunks;

		c->tx_chunks = k->next;
		free(k);
	}
	free(c->ctrl_buf);
	free(c);
}

void iscsi_conn_put(struct iscsi_conn *c)
{
	if (--c->refcnt > 0)
		return;
	/* The transport dropped its reference only after terminate, so no watch can fire for
	   this object any more; freeing is still deferred past the current epoll batch. */
	ev_defer(c->loop, &c->free_defer, conn_free, c);
}

void iscsi_conn_close(struct iscsi_conn *c, const char *why)
{
	if (c->terminated)
		return;
	c->terminated = true;
	if (why)
		log_info("conn", "%s: closing: %s", c->peer, why);
	iscsi_conn_get(c);
	c->state = ISCSI_CONN_CLEANUP;
	c->dm->terminate(c);
	if (c->role_ops->closed)
		c->role_ops->closed(c);
	iscsi_conn_put(c);
}

struct dm_txpdu *iscsi_txpdu_get(struct iscsi_conn *c)
{
	struct dm_txpdu *p;

	if (list_empty(&c->tx_free) && c->tx_pooled < ISCSI_CONN_TXPOOL)
		(void)tx_grow(c); /* else (out of memory too) a single allocation below */
	if (!list_empty(&c->tx_free)) {
		p = list_first_entry(&c->tx_free, struct dm_txpdu, link);
		list_del(&p->link);
		memset(p, 0, offsetof(struct dm_txpdu, link));
		p->pooled = true;
	} else {
		p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		list_init(&p->link);
	}
	list_init(&p->owner_link);
	p->sent = iscsi_txpdu_sent_default;
	p->arg = c;
	c->tx_outstanding++;
	return p;
}

void iscsi_txpdu_put(struct iscsi_conn *c, struct dm_txpdu *p)
{
	c->tx_outstanding--;
	if (p->pooled)
		list_add(&p->link, &c->tx_free);
	else
		free(p);
}

void iscsi_txpdu_sent_default(struct dm_txpdu *p, int err)
{
	(void)err;
	iscsi_txpdu_put(p->arg, p);
}

static int pack_and(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h,
		    int (*op)(struct iscsi_conn *, struct dm_txpdu *))
{
	int r = iscsi_hdr_pack(h, p->bhs);

	if (r < 0) {
		log_err("conn", "%s: cannot encode %s: %s", c->peer, iscsi_opcode_name(h->opcode),
			strerror(-r));
		p->sent(p, r);
		return r;
	}
	return op(c, p);
}

int iscsi_send_pdu(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h)
{
	return pack_and(c, p, h, c->dm->send_control);
}

int iscsi_put_data(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h)
{
	return pack_and(c, p, h, c->dm->put_data);
}

int iscsi_get_data(struct iscsi_conn *c, struct dm_txpdu *p, const struct iscsi_hdr *h)
{
	return pack_and(c, p, h, c->dm->get_data);
}

/* ---- upcalls from the transport ---- */

int dm_rx_header(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *ahs, uint32_t ahs_len,
		 struct dm_rx_place *place)
{
	int r;

	/* An unknown opcode still decodes the common fields; the role answers with Reject. */
	memcpy(c->rx_bhs, bhs, ISCSI_BHS_LEN);
	(void)iscsi_hdr_unpack(bhs, &c->rx_hdr);
	place->buf = NULL;
	place->len = 0;
	r = c->role_ops->rx_header(c, &c->rx_hdr, ahs, ahs_len, place);
	if (r < 0)
		return r;
	if (c->rx_hdr.dlength && !place->buf && !c->rx_placed) {
		/* (placed data the role does not want is simply left where it is) */
		if (c->rx_hdr.dlength > c->ctrl_cap)
			return -EMSGSIZE;
		if (ctrl_reserve(c, c->rx_hdr.dlength) < 0)
			return -ENOMEM;
		place->buf = c->ctrl_buf;
		place->len = c->rx_hdr.dlength;
	}
	c->rx_data = place->buf;
	c->rx_dlen = c->rx_hdr.dlength;
	return 0;
}

void dm_rx_pdu(struct iscsi_conn *c, bool ddigest_ok)
{
	iscsi_conn_get(c);
	c->role_ops->rx_pdu(c, &c->rx_hdr, c->rx_data, c->rx_dlen, ddigest_ok);
	iscsi_conn_put(c);
}

void dm_conn_failed(struct iscsi_conn *c, int err)
{
	char why[64];

	if (c->peer_close_expected && err == -ECONNRESET) {
		iscsi_conn_close(c, NULL); /* the close the role waited for */
		return;
	}
	snprintf(why, sizeof(why), "transport: %s", strerror(-err));
	iscsi_conn_close(c, err == -ECONNRESET || err == 0 ? "peer closed the connection" : why);
}
