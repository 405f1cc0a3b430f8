#include "transport/tcp/tcp.h"
#include "transport/tcp/tcp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/crc32c.h"
#include "util/bytes.h"
#include "util/log.h"

#define TCP_STAGE_SIZE DM_RX_STAGE_SIZE
/* Connections the kernel completes and queues while the target does not accept (a login
 * storm held back by global.max_pending_logins): as many as it allows, which is
 * net.core.somaxconn (4096 by default since Linux 5.4). */
#define TCP_LISTEN_BACKLOG 65535
#define TCP_DIRECT_MIN 8192      /* payload this large skips the staging copy */
#define TCP_MAX_AHS (255 * 4)
#define TCP_IOV_MAX 512
/* Data digests are computed in tcp_flush, just before the bytes go to the kernel, so they are
 * still in cache when it copies them: at most this many bytes per writev (a few large writes
 * are what loopback and fast links want) ... */
#define TCP_DIGEST_BATCH (4u << 20)
/* ... and of guarded (pinned) data at most this many, so writers wait briefly. */
#define TCP_PIN_BATCH (1u << 20)
/* Busy connections a worker's poll window reads itself (tcp_rx_poller); more would make each
 * try of the window a row of empty receives. */
#define TCP_RX_POLLERS_MAX 4

enum tcp_rx_state {
	RX_HDR = 0,   /* BHS + AHS + header digest */
	RX_DATA,      /* payload + padding + data digest */
};

struct tcp_conn {
	int fd;
	struct ev_io io;
	bool hdigest, ddigest;
	bool rx_stopped;

	/* receive */
	enum tcp_rx_state rx_state;
	uint8_t hdr[ISCSI_BHS_LEN + TCP_MAX_AHS + ISCSI_DIGEST_LEN];
	uint32_t hdr_have, hdr_need;
	uint8_t *dst;             /* NULL = discard */
	uint32_t dlen, dgot;      /* payload */
	uint32_t tail_need;       /* pad + digest bytes after the payload */
	uint32_t tail_have;
	uint8_t tail[8];
	uint32_t dcrc;
	uint32_t stage_len, stage_off;
	uint64_t rx_bytes;        /* received since the connection began */
	uint64_t rx_last_ns;      /* loop clock of the last receive that got bytes */
	struct ev_poller rxp;     /* tcp_rx_poller */

	/* transmit */
	uint64_t tx_total;        /* bytes written since the connection began */
	uint64_t tx_abort_at;     /* test hook: reset once tx_total reaches it (0 = never) */
	struct list_head txq;
	bool want_out;
	struct ev_defer flush_defer;
	bool flush_pending;

	/* active open (connect): until the socket is connected, fd is -1 */
	bool connecting;
	struct tcp_connector cn;
	void (*up)(struct iscsi_conn *c, int err);

	/* receive staging, used inside one tcp_read only and left empty: the thread's shared
	   one (dm_conn_setup.stage) when free, else own (allocated on first need) */
	struct dm_rx_stage *shared;
	uint8_t *own_stage;
	uint8_t *stage;                 /* the one this tcp_read uses */
};

/* A queued PDU's scratch (dm_txpdu.xport), set when tcp_queue takes it. */
struct tcp_tx {
	uint8_t hdigest[ISCSI_DIGEST_LEN];
	uint8_t ddigest[ISCSI_DIGEST_LEN];
	uint32_t tx_off;                /* bytes of the PDU already written */
	bool hd, dd;                    /* digests on the wire for this PDU (fixed when queued) */
	bool dd_ready;                  /* ddigest computed over data[] */
	bool pinned;                    /* guard->pin held (inside one flush only) */
};
_Static_assert(sizeof(struct tcp_tx) <= DM_TXPDU_XPORT_SIZE, "tcp_tx");
#define TX(p) DM_TXPDU_XPORT(struct tcp_tx, p)

static inline struct tcp_conn *tcp_of(struct iscsi_conn *c)
{
	return iscsi_conn_priv(c);
}

static const uint8_t zero_pad[4];

/* ---------------------------------------------------------------- transmit */

static void tcp_flush(struct iscsi_conn *c);

static void flush_deferred(void *arg)
{
	struct iscsi_conn *c = arg;
	struct tcp_conn *t = tcp_of(c);

	t->flush_pending = false;
	if (!c->terminated)
		tcp_flush(c);
	iscsi_conn_put(c);
}

/* The header digest when the PDU is queued; the data digest in tcp_flush (data_digest). */
static void prepare_digests(struct tcp_conn *t, struct dm_txpdu *p)
{
	TX(p)->hd = t->hdigest;
	TX(p)->dd = t->ddigest && p->data_len;
	TX(p)->dd_ready = false;
	TX(p)->pinned = false;
	if (t->hdigest) {
		uint32_t s = crc32c_update(CRC32C_INIT, p->bhs, ISCSI_BHS_LEN);
		if (p->ahs_len)
			s = crc32c_update(s, p->ahs, p->ahs_len);
		crc32c_put_wire(TX(p)->hdigest, crc32c_final(s));
	}
}

static void data_digest(struct dm_txpdu *p)
{
	uint32_t s = CRC32C_INIT;

	for (int i = 0; i < p->data_cnt; i++)
		s = crc32c_update(s, p->data[i].iov_base, p->data[i].iov_len);
	s = crc32c_update(s, zero_pad, iscsi_pad4(p->data_len) - p->data_len);
	crc32c_put_wire(TX(p)->ddigest, crc32c_final(s));
	TX(p)->dd_ready = true;
}

static int tcp_queue(struct iscsi_conn *c, struct dm_txpdu *p)
{
	struct tcp_conn *t = tcp_of(c);

	if (c->terminated) {
		p->sent(p, -ECONNABORTED);
		return -ECONNABORTED;
	}
	put_be24(p->bhs + 5, p->data_len);
	p->bhs[4] = (uint8_t)(p->ahs_len / 4);
	prepare_digests(t, p);
	TX(p)->tx_off = 0;
	list_add_tail(&p->link, &t->txq);
	if (!t->flush_pending && !t->want_out) {
		t->flush_pending = true;
		iscsi_conn_get(c);
		ev_defer(c->loop, &t->flush_defer, flush_deferred, c);
	}
	return 0;
}

/* Append the not-yet-sent part of p to iov; returns the number of entries used. */
static int pdu_iov(const struct tcp_conn *t, const struct dm_txpdu *p, struct iovec *iov, int max)
{
	struct iovec parts[4 + DM_TX_MAX_DATA_IOV];
	int np = 0, n = 0;
	uint32_t skip = TX(p)->tx_off;

	parts[np++] = (struct iovec){(void *)p->bhs, ISCSI_BHS_LEN};
	if (p->ahs_len)
		parts[np++] = (struct iovec){p->ahs, p->ahs_len};
	if (TX(p)->hd)
		parts[np++] = (struct iovec){(void *)TX(p)->hdigest, ISCSI_DIGEST_LEN};
	for (int i = 0; i < p->data_cnt; i++)
		if (p->data[i].iov_len)
			parts[np++] = p->data[i];
	if (p->data_len & 3)
		parts[np++] = (struct iovec){(void *)zero_pad, iscsi_pad4(p->data_len) - p->data_len};
	if (TX(p)->dd)
		parts[np++] = (struct iovec){(void *)TX(p)->ddigest, ISCSI_DIGEST_LEN};
	for (int i = 0; i < np && n < max; i++) {
		if (skip >= parts[i].iov_len) {
			skip -= (uint32_t)parts[i].iov_len;
			continue;
		}
		iov[n].iov_base = (uint8_t *)parts[i].iov_base + skip;
		iov[n].iov_len = parts[i].iov_len - skip;
		skip = 0;
		n++;
	}
	return n;
}

static uint32_t pdu_wire_len(const struct tcp_conn *t, const struct dm_txpdu *p)
{
	uint32_t len = ISCSI_BHS_LEN + p->ahs_len + iscsi_pad4(p->data_len);

	(void)t;
	if (TX(p)->hd)
		len += ISCSI_DIGEST_LEN;
	if (TX(p)->dd)
		len += ISCSI_DIGEST_LEN;
	return len;
}

/* Test hook (dm_ops.tx_abort_at): trim iov so that nothing past the abort point is written.
 * Returns the number of iov entries to write, 0 once the point is reached (tx_reset then). */
static int tx_limit(struct tcp_conn *t, struct iovec *iov, int n)
{
	uint64_t room;

	if (!t->tx_abort_at)
		return n;
	room = t->tx_abort_at > t->tx_total ? t->tx_abort_at - t->tx_total : 0;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len >= room) {
			iov[i].iov_len = room;
			n = i + (room > 0);
			break;
		}
		room -= iov[i].iov_len;
	}
	return n;
}

static void tx_reset(struct iscsi_conn *c, struct tcp_conn *t)
{
	struct linger l = {.l_onoff = 1, .l_linger = 0};

	setsockopt(t->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)); /* close sends RST */
	log_info("tcp", "%s: fault injection: reset after %llu bytes", c->peer,
		 (unsigned long long)t->tx_total);
	dm_conn_failed(c, -ECONNABORTED);
}

/* After a writev that took w bytes (0 if it failed): give back the pins of this batch before
 * anything can run a callback. A guarded PDU now wholly in the kernel is unpinned; one not
 * started is unpinned and summed again next time (its bytes may change meanwhile); one cut in
 * the middle sends the rest from a copy of the bytes that were summed. */
static void release_pins(const struct tcp_conn *t, size_t w, int npinned)
{
	struct list_head *pos;

	for (pos = t->txq.next; npinned && pos != &t->txq; pos = pos->next) {
		struct dm_txpdu *p = list_entry(pos, struct dm_txpdu, link);
		size_t left = pdu_wire_len(t, p) - TX(p)->tx_off;
		size_t took = w < left ? w : left;

		w -= took;
		if (!TX(p)->pinned)
			continue;
		npinned--;
		TX(p)->pinned = false;
		if (took == left) {
			p->guard->unpin(p);
		} else if (took == 0) {
			p->guard->unpin(p);
			TX(p)->dd_ready = false;
		} else {
			p->guard->detach(p, true);
		}
	}
}

static void tcp_flush(struct iscsi_conn *c)
{
	struct tcp_conn *t = tcp_of(c);
	struct iovec iov[TCP_IOV_MAX];

	while (!list_empty(&t->txq)) {
		struct list_head *pos;
		int n = 0, npinned = 0;
		uint32_t summed = 0, pinned = 0;
		ssize_t w;

		for (pos = t->txq.next; pos != &t->txq && n < TCP_IOV_MAX - 8; pos = pos->next) {
			struct dm_txpdu *p = list_entry(pos, struct dm_txpdu, link);

			if (TX(p)->dd && !TX(p)->dd_ready) {
				if (n && (summed >= TCP_DIGEST_BATCH ||
					  (p->guard && pinned >= TCP_PIN_BATCH)))
					break;
				if (p->guard) {
					if (p->guard->pin(p) == 0) {
						TX(p)->pinned = true;
						pinned += p->data_len;
						npinned++;
					} else {
						p->guard->detach(p, false);
					}
				}
				data_digest(p);
				summed += p->data_len;
			}
			n += pdu_iov(t, p, iov + n, TCP_IOV_MAX - n);
		}
		n = tx_limit(t, iov, n);
		if (n == 0) {
			release_pins(t, 0, npinned);
			if (t->tx_abort_at)
				tx_reset(c, t);
			return;
		}
		w = writev(t->fd, iov, n);
		release_pins(t, w > 0 ? (size_t)w : 0, npinned);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (!t->want_out) {
					t->want_out = true;
					ev_io_modify(c->loop, &t->io, EPOLLIN | EPOLLOUT);
				}
				return;
			}
			dm_conn_failed(c, -errno);
			return;
		}
		t->tx_total += (uint64_t)w;
		while (w > 0 && !list_empty(&t->txq)) {
			struct dm_txpdu *p = list_first_entry(&t->txq, struct dm_txpdu, link);
			uint32_t left = pdu_wire_len(t, p) - TX(p)->tx_off;
			if ((size_t)w < left) {
				TX(p)->tx_off += (uint32_t)w;
				break;
			}
			w -= left;
			list_del(&p->link);
			p->sent(p, 0);
		}
	}
	if (t->want_out) {
		t->want_out = false;
		ev_io_modify(c->loop, &t->io, EPOLLIN);
	}
}

/* ---------------------------------------------------------------- receive */

static void rx_reset(struct tcp_conn *t)
{
	t->rx_state = RX_HDR;
	t->hdr_have = 0;
	t->hdr_need = ISCSI_BHS_LEN;
}

/* The whole header (BHS, AHS, header digest) is in t->hdr. */
static int rx_header_done(struct iscsi_conn *c, struct tcp_conn *t)
{
	uint32_t ahs_len = (uint32_t)t->hdr[4] * 4;
	struct dm_rx_place place;
	int r;

	if (t->hdigest) {
		uint32_t got = crc32c_get_wire(t->hdr + ISCSI_BHS_LEN + ahs_len);
		if (got != crc32c(t->hdr, ISCSI_BHS_LEN + ahs_len)) {
			log_warn("tcp", "%s: header digest error", c->peer);
			c->digest_errors++;
			return -EBADMSG; /* the stream can no longer be trusted */
		}
	}
	t->dlen = get_be24(t->hdr + 5);
	r = dm_rx_header(c, t->hdr, ahs_len ? t->hdr + ISCSI_BHS_LEN : NULL, ahs_len, &place);
	if (r < 0)
		return r;
	t->dst = place.buf;
	t->dgot = 0;
	t->tail_have = 0;
	t->tail_need = iscsi_pad4(t->dlen) - t->dlen;
	if (t->ddigest && t->dlen)
		t->tail_need += ISCSI_DIGEST_LEN;
	t->dcrc = CRC32C_INIT;
	t->rx_state = RX_DATA;
	return 0;
}

static void rx_pdu_done(struct iscsi_conn *c, struct tcp_conn *t)
{
	bool ok = true;

	if (t->ddigest && t->dlen) {
		uint32_t pad = iscsi_pad4(t->dlen) - t->dlen;
		uint32_t s = t->dcrc;
		if (!t->dst)
			ok = true; /* discarded payload: nobody will look at it */
		else {
			s = crc32c_update(s, t->tail, pad);
			ok = crc32c_final(s) == crc32c_get_wire(t->tail + pad);
		}
	}
	rx_reset(t);
	dm_rx_pdu(c, ok);
}

/* Feed bytes from the staging buffer. Returns bytes consumed, or -errno. */
static int rx_consume(struct iscsi_conn *c, struct tcp_conn *t, const uint8_t *p, uint32_t len)
{
	uint32_t used = 0;

	while (used < len && !c->terminated) {
		uint32_t n;

		if (t->rx_state == RX_HDR) {
			n = t->hdr_need - t->hdr_have;
			if (n > len - used)
				n = len - used;
			memcpy(t->hdr + t->hdr_have, p + used, n);
			t->hdr_have += n;
			used += n;
			if (t->hdr_have < t->hdr_need)
				continue;
			if (t->hdr_need == ISCSI_BHS_LEN) {
				uint32_t extra = (uint32_t)t->hdr[4] * 4;
				if (t->hdigest)
					extra += ISCSI_DIGEST_LEN;
				if (extra) {
					t->hdr_need += extra;
					continue;
				}
			}
			int r = rx_header_done(c, t);
			if (r < 0)
				return r;
			if (t->dlen == 0 && t->tail_need == 0)
				rx_pdu_done(c, t);
			continue;
		}
		/* RX_DATA */
		if (t->dgot < t->dlen) {
			n = t->dlen - t->dgot;
			if (n > len - used)
				n = len - used;
			if (t->dst) {
				memcpy(t->dst + t->dgot, p + used, n);
				if (t->ddigest)
					t->dcrc = crc32c_update(t->dcrc, p + used, n);
			}
			t->dgot += n;
			used += n;
		} else {
			n = t->tail_need - t->tail_have;
			if (n > len - used)
				n = len - used;
			memcpy(t->tail + t->tail_have, p + used, n);
			t->tail_have += n;
			used += n;
		}
		if (t->dgot == t->dlen && t->tail_have == t->tail_need)
			rx_pdu_done(c, t);
	}
	return (int)used;
}

static int tcp_rx_poller(struct ev_poller *p);

/* Bytes arrived: while the loop polls, the connection is busy and the poll window reads its
 * socket directly (tcp_rx_poller), a few connections per worker at most. */
static void rx_got(struct iscsi_conn *c, struct tcp_conn *t, ssize_t n)
{
	t->rx_bytes += (uint64_t)n;
	t->rx_last_ns = ev_now_ns(c->loop);
	if (!t->rxp.active && ev_loop_poll_ns(c->loop) &&
	    ev_loop_pollers(c->loop) < TCP_RX_POLLERS_MAX)
		ev_poller_start(c->loop, &t->rxp);
}

static void tcp_read_staged(struct iscsi_conn *c, struct tcp_conn *t);

/* tcp_read when the thread's stage is taken or absent. */
__attribute__((noinline, cold)) static void tcp_read_other(struct iscsi_conn *c,
							  struct tcp_conn *t)
{
	if (t->stage) {
		/* nested in its own receive: the outer one's buffer, as it is */
		tcp_read_staged(c, t);
		return;
	}
	if (!t->own_stage && !(t->own_stage = malloc(TCP_STAGE_SIZE))) {
		dm_conn_failed(c, -ENOMEM);
		return;
	}
	t->stage = t->own_stage;
	tcp_read_staged(c, t);
	t->stage = NULL;
	t->stage_off = t->stage_len = 0;
}

/* Receive into a staging buffer taken for this call only: the thread's shared one when no
 * other connection's receive holds it, else the connection's own (allocated on first need).
 * Whatever it received is consumed before it returns (unless the connection was terminated
 * meanwhile), so nothing staged outlives the call. */
static void tcp_read(struct iscsi_conn *c)
{
	struct tcp_conn *t = tcp_of(c);
	struct dm_rx_stage *sh = t->shared;

	if (!sh || sh->busy || t->stage) {
		tcp_read_other(c, t);
		return;
	}
	sh->busy = true;
	t->stage = sh->buf;
	tcp_read_staged(c, t);
	sh->busy = false;
	t->stage = NULL;
	t->stage_off = t->stage_len = 0;
}

/* Receive what the socket holds, into t->stage. A recv that returns less than asked for has
 * emptied the socket (for now): we go back to the loop instead of asking again only to hear
 * EAGAIN (the watch is level-triggered, so data arriving meanwhile wakes us up). That saves
 * one system call per wake-up, a quarter of them at queue depth 1. */
static void tcp_read_staged(struct iscsi_conn *c, struct tcp_conn *t)
{
	bool drained = false;

	/* The budget counts receives (fairness between the worker's connections); whatever was
	   received is always consumed, or nothing would wake us up to finish it. */
	for (int budget = 0; !c->terminated;) {
		ssize_t n;
		size_t want;

		if (t->stage_off < t->stage_len) {
			int r = rx_consume(c, t, t->stage + t->stage_off, t->stage_len - t->stage_off);
			if (r < 0) {
				dm_conn_failed(c, r);
				return;
			}
			t->stage_off += (uint32_t)r;
			continue;
		}
		t->stage_off = t->stage_len = 0;
		if (drained || budget++ == 32)
			return;
		/* Large payload with nothing staged: receive straight into its destination. */
		if (t->rx_state == RX_DATA && t->dst && t->dlen - t->dgot >= TCP_DIRECT_MIN) {
			want = t->dlen - t->dgot;
			n = recv(t->fd, t->dst + t->dgot, want, 0);
			if (n > 0) {
				rx_got(c, t, n);
				drained = (size_t)n < want;
				if (t->ddigest)
					t->dcrc = crc32c_update(t->dcrc, t->dst + t->dgot, (size_t)n);
				t->dgot += (uint32_t)n;
				if (t->dgot == t->dlen && t->tail_need == 0)
					rx_pdu_done(c, t);
				continue;
			}
		} else {
			want = TCP_STAGE_SIZE;
			n = recv(t->fd, t->stage, want, 0);
			if (n > 0) {
				rx_got(c, t, n);
				drained = (size_t)n < want;
				t->stage_len = (uint32_t)n;
				continue;
			}
		}
		if (n == 0) {
			dm_conn_failed(c, -ECONNRESET);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		dm_conn_failed(c, -errno);
		return;
	}
}

/* A try of the poll window: recv on the socket without asking epoll first (one system call
 * for the bytes instead of two). A connection that received nothing for a whole window is
 * idle: its poller stops and epoll wakes it as before. */
static int tcp_rx_poller(struct ev_poller *p)
{
	struct iscsi_conn *c = p->arg;
	struct tcp_conn *t = tcp_of(c);
	uint64_t before = t->rx_bytes;
	int got;

	if (c->terminated || t->fd < 0 ||
	    ev_now_ns(c->loop) - t->rx_last_ns > ev_loop_poll_ns(c->loop)) {
		ev_poller_stop(c->loop, p);
		return 0;
	}
	iscsi_conn_get(c);
	tcp_read(c);
	got = t->rx_bytes != before;
	iscsi_conn_put(c);
	return got;
}

static void tcp_io_cb(struct ev_io *w, uint32_t revents)
{
	struct iscsi_conn *c = w->arg;

	iscsi_conn_get(c);
	if ((revents & EPOLLOUT) && !c->terminated)
		tcp_flush(c);
	if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->terminated)
		tcp_read(c);
	iscsi_conn_put(c);
}

/* ---------------------------------------------------------------- ops */

static int tcp_send_control(struct iscsi_conn *c, struct dm_txpdu *p)
{
	return tcp_queue(c, p);
}

static void tcp_enable(struct iscsi_conn *c, const struct iscsi_conn_params *cp)
{
	struct tcp_conn *t = tcp_of(c);

	t->hdigest = cp->header_digest;
	t->ddigest = cp->data_digest;
}

static void tcp_terminate(struct iscsi_conn *c)
{
	struct tcp_conn *t = tcp_of(c);

	if (t->connecting) {
		t->connecting = false;
		tcp_connect_cancel(&t->cn);
		iscsi_conn_put(c); /* the transport's own reference */
		return;
	}
	if (t->fd < 0)
		return;
	ev_poller_stop(c->loop, &t->rxp);
	ev_io_stop(c->loop, &t->io);
	close(t->fd);
	t->fd = -1;
	while (!list_empty(&t->txq)) {
		struct dm_txpdu *p = list_first_entry(&t->txq, struct dm_txpdu, link);
		list_del(&p->link);
		p->sent(p, -ECONNABORTED);
	}
	/* the transport's own reference */
	iscsi_conn_put(c);
}

static bool tcp_tx_busy(struct iscsi_conn *c)
{
	return !list_empty(&tcp_of(c)->txq);
}

static void tcp_rx_poll(struct iscsi_conn *c)
{
	iscsi_conn_get(c);
	if (!c->terminated)
		tcp_read(c);
	iscsi_conn_put(c);
}

static void tcp_tx_abort_at(struct iscsi_conn *c, uint64_t total)
{
	tcp_of(c)->tx_abort_at = total;
}

/* ---------------------------------------------------------------- set-up */

static const struct iscsi_role_ops no_role;

void tcp_format_sockaddr(const void *sa_, char *out, size_t cap)
{
	const struct sockaddr *sa = sa_;
	char a[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = sa_;
		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(out, cap, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = sa_;
		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(out, cap, "%s:%u", a, ntohs(s4->sin_port));
	}
}

/* A connection without a socket yet (fd -1). */
static struct iscsi_conn *conn_alloc(const struct dm_conn_setup *cs)
{
	struct iscsi_conn *c = iscsi_conn_new(cs->as ? cs->as : &tcp_dm_ops, cs->loop, cs->role,
					      cs->ops, cs->role_priv);
	struct tcp_conn *t;

	if (!c)
		return NULL;
	t = tcp_of(c);
	t->fd = -1;
	/* (a stage too small for TCP's reads is not used) */
	t->shared = cs->stage && cs->stage->size >= TCP_STAGE_SIZE ? cs->stage : NULL;
	list_init(&t->txq);
	rx_reset(t);
	return c;
}

static void tcp_release(struct iscsi_conn *c)
{
	free(tcp_of(c)->own_stage);
}

/* Free a connection the role never saw (its callbacks must not run). */
static void conn_discard(struct iscsi_conn *c)
{
	c->role_ops = &no_role;
	c->terminated = true;
	iscsi_conn_put(c);
}

/* Give c its connected socket and start receiving. 0 or -errno (fd is c's either way). */
static int conn_attach(struct iscsi_conn *c, int fd)
{
	struct tcp_conn *t = tcp_of(c);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1;

	t->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_sockaddr(&ss, c->peer, sizeof(c->peer));
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_sockaddr(&ss, c->local, sizeof(c->local));
	ev_io_init(&t->io, fd, tcp_io_cb, c);
	ev_poller_init(&t->rxp, tcp_rx_poller, c);
	return ev_io_start(c->loop, &t->io, EPOLLIN);
}

/* An accepted socket, on its way from the listener to the connection's thread. */
struct tcp_incoming {
	struct dm_incoming base;
	int fd;
};

static struct iscsi_conn *tcp_accept(struct dm_incoming *in, const struct dm_conn_setup *cs)
{
	struct tcp_incoming *ti = (struct tcp_incoming *)in;
	int fd = ti->fd;
	struct iscsi_conn *c;

	free(ti);
	c = conn_alloc(cs);
	if (!c) {
		close(fd);
		return NULL;
	}
	if (conn_attach(c, fd) < 0) {
		log_warn("tcp", "%s: cannot watch the socket", c->peer);
		close(fd);
		conn_discard(c);
		return NULL;
	}
	return c;
}

static void tcp_reject(struct dm_incoming *in)
{
	struct tcp_incoming *ti = (struct tcp_incoming *)in;

	close(ti->fd);
	free(ti);
}

static void connected(struct tcp_connector *cn, int fd, int err)
{
	struct iscsi_conn *c = cn->arg;
	struct tcp_conn *t = tcp_of(c);

	t->connecting = false;
	iscsi_conn_get(c);
	if (err == 0 && (err = conn_attach(c, fd)) < 0) {
		close(fd);
		t->fd = -1;
	}
	if (err < 0)
		iscsi_conn_put(c); /* the transport's reference: there is no transport */
	t->up(c, err);
	iscsi_conn_put(c);
}

static struct iscsi_conn *tcp_connect(const char *host, uint16_t port,
				      const struct dm_conn_setup *cs, int *err)
{
	struct iscsi_conn *c = conn_alloc(cs);
	struct tcp_conn *t;
	int r;

	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	t = tcp_of(c);
	t->up = cs->up;
	snprintf(c->peer, sizeof(c->peer), "%s:%u", host, port);
	r = tcp_connect_start(&t->cn, c->loop, host, port, connected, c);
	if (r < 0) {
		conn_discard(c);
		*err = r;
		return NULL;
	}
	t->connecting = true;
	*err = 0;
	return c;
}

/* ---------------------------------------------------------------- listener */

struct tcp_listener {
	struct dm_listener base;
	int fd;
	struct ev_loop *loop;
	struct ev_io io;
	struct ev_timer pause;      /* out of file descriptors: listen again later */
	dm_incoming_cb cb;
	void *arg;
};

#define TCP_ACCEPT_PAUSE_MS 100

static void accept_resume(struct ev_timer *t)
{
	struct tcp_listener *l = t->arg;

	ev_io_start(l->loop, &l->io, EPOLLIN);
}

static void tcp_listener_pause(struct dm_listener *dl, unsigned ms)
{
	struct tcp_listener *l = (struct tcp_listener *)dl;

	ev_io_stop(l->loop, &l->io);
	if (ms)
		ev_timer_start(l->loop, &l->pause, ms);
	else
		ev_timer_stop(l->loop, &l->pause);
}

static void tcp_listener_resume(struct dm_listener *dl)
{
	struct tcp_listener *l = (struct tcp_listener *)dl;

	ev_timer_stop(l->loop, &l->pause);
	if (!l->io.active)
		ev_io_start(l->loop, &l->io, EPOLLIN);
}

/* One accepted socket: 0, or -errno when the listener should stop for now. */
static int accept_one(struct tcp_listener *l)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tcp_incoming *ti;
	int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE) {
			/* the pending connection stays in the backlog, so the socket stays readable:
			   stop watching it for a while instead of spinning */
			log_warn("tcp", "accept: %s: not accepting for %d ms", strerror(errno),
				 TCP_ACCEPT_PAUSE_MS);
			tcp_listener_pause(&l->base, TCP_ACCEPT_PAUSE_MS);
		}
		return -EAGAIN;
	}
	ti = calloc(1, sizeof(*ti));
	if (!ti) {
		close(fd);
		return -ENOMEM;
	}
	ti->base.dm = &tcp_dm_ops;
	ti->fd = fd;
	tcp_format_sockaddr(&ss, ti->base.peer, sizeof(ti->base.peer));
	l->cb(&ti->base, l->arg);
	return 0;
}

static void accept_cb(struct ev_io *w, uint32_t revents)
{
	struct tcp_listener *l = w->arg;

	(void)revents;
	for (int i = 0; i < 64; i++)
		if (accept_one(l) < 0 || !l->io.active)
			return; /* nothing more, or the callback paused the listener */
}

static int listen_socket(const char *addr, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1, r;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
		sl = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
		sl = sizeof(struct sockaddr_in6);
	} else {
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, TCP_LISTEN_BACKLOG) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int tcp_listen(struct ev_loop *loop, const char *addr, uint16_t port, dm_incoming_cb cb,
		      void *arg, struct dm_listener **out)
{
	struct tcp_listener *l;
	int fd = listen_socket(addr, port), r;

	if (fd < 0)
		return fd;
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->base.dm = &tcp_dm_ops;
	l->fd = fd;
	l->loop = loop;
	l->cb = cb;
	l->arg = arg;
	ev_io_init(&l->io, fd, accept_cb, l);
	ev_timer_init(&l->pause, accept_resume, l);
	r = ev_io_start(loop, &l->io, EPOLLIN);
	if (r < 0) {
		close(fd);
		free(l);
		return r;
	}
	*out = &l->base;
	return 0;
}

static void tcp_listener_free(struct dm_listener *dl)
{
	struct tcp_listener *l = (struct tcp_listener *)dl;

	ev_io_stop(l->loop, &l->io);
	ev_timer_stop(l->loop, &l->pause);
	close(l->fd);
	free(l);
}

const struct dm_ops tcp_dm_ops = {
	.name = "tcp",
	.caps = DM_CAP_DIGESTS | DM_CAP_TX_GUARD,
	.conn_priv_size = sizeof(struct tcp_conn),
	.send_control = tcp_send_control,
	.put_data = tcp_send_control,
	.get_data = tcp_send_control,
	.enable = tcp_enable,
	.terminate = tcp_terminate,
	.tx_busy = tcp_tx_busy,
	.rx_poll = tcp_rx_poll,
	.release = tcp_release,
	.tx_abort_at = tcp_tx_abort_at,
	.listen = tcp_listen,
	.listener_pause = tcp_listener_pause,
	.listener_resume = tcp_listener_resume,
	.listener_free = tcp_listener_free,
	.accept = tcp_accept,
	.reject = tcp_reject,
	.connect = tcp_connect,
};
