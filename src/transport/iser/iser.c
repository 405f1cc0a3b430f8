/* iSER datamover (see iser.h). Facts followed here: RFC 7145 sections 5-9 and the behaviour of
 * the Linux initiator / LIO isert / tgt summarised in shared/docs/protocol.md sections 5-6. */
#include "transport/iser/iser.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "transport/iser/iser_int.h"
#include "util/bytes.h"
#include "util/log.h"

void iser_fail(struct iscsi_conn *c, int err, const char *why)
{
	struct iser_conn *ic = iser_of(c);

	if (ic->terminated)
		return;
	if (c->peer_close_expected && err == -ECONNRESET)
		log_dbg("iser", "%s: %s after our last PDU: the close we waited for", c->peer, why);
	else
		log_warn("iser", "%s: %s", c->peer, why);
	dm_conn_failed(c, err);
}

/* ---------------------------------------------------------------- CM events */

static void established(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	ic->established = true;
	log_info("iser", "%s: connected on %s (%s), %u RDMA Read%s outstanding at most", c->peer,
		 ibv_get_device_name(ic->id->verbs->device), ic->iwarp ? "iWARP" : "InfiniBand/RoCE",
		 ic->ord, ic->ord == 1 ? "" : "s");
	for (int i = 0; i < ic->nearly && !c->terminated; i++) {
		iser_handle_recv(c, ic->early[i], ic->early_len[i]);
		if (!c->terminated && iser_post_recv(ic, ic->early[i]) < 0)
			iser_fail(c, -EIO, "cannot repost a receive buffer");
	}
	ic->nearly = 0;
}

static void active_event(struct iscsi_conn *c, enum rdma_cm_event_type type);

static void cm_cb(struct ev_io *w, uint32_t revents)
{
	struct iscsi_conn *c = w->arg;
	struct iser_conn *ic = iser_of(c);
	struct rdma_cm_event *ev;

	(void)revents;
	iscsi_conn_get(c);
	while (!ic->dead && rdma_get_cm_event(ic->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;

		rdma_ack_cm_event(ev);
		if (ic->connecting) {
			active_event(c, type);
			continue;
		}
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			established(c);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (ic->established && !ic->terminated) {
				int n = iser_cq_take_rest(c);

				if (n)
					log_info("iser", "%s: %s read with %d completion(s) still "
						 "in the CQ: handled them first", c->peer,
						 rdma_event_str(type), n);
			}
			iser_fail(c, -ECONNRESET, rdma_event_str(type));
			break;
		default:
			break;
		}
	}
	iscsi_conn_put(c);
}

/* ---------------------------------------------------------------- ops */

static void iser_enable(struct iscsi_conn *c, const struct iscsi_conn_params *cp)
{
	(void)c;
	(void)cp; /* no digests, no framing: the negotiated limits live in c->params */
}

/* Wait (bounded) until every posted work request has completed or flushed, so no buffer is
 * touched by the device after the role is told the transfer ended. */
static void drain(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
	struct timespec t0, t;

	if (!ic->qp)
		return;
	ibv_modify_qp(ic->qp, &attr, IBV_QP_STATE);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(ic->cq, 32, wc);

		for (int i = 0; i < n; i++) {
			enum wr_kind kind = (enum wr_kind)(wc[i].wr_id >> 56);
			uintptr_t v = (uintptr_t)(wc[i].wr_id & ((1ull << 56) - 1));

			if (kind == WR_SEND) {
				struct dm_txpdu *p = ic->tx[v].p;
				ic->sends_out--;
				iser_tx_give(ic, (int)v);
				if (p)
					p->sent(p, -ECONNABORTED);
			} else if (kind == WR_READ) {
				iser_read_piece_done(c, (struct dm_txpdu *)v, false);
			} else if (kind == WR_WRITE) {
				struct dm_txpdu *p = (struct dm_txpdu *)v;
				ic->rdma_out--;
				p->sent(p, -ECONNABORTED);
			}
		}
		if (ic->sends_out == 0 && ic->rdma_out == 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 2000) {
			log_err("iser", "%s: %u sends and %u RDMA operations never flushed", c->peer,
				ic->sends_out, ic->rdma_out);
			break;
		}
		if (n == 0)
			usleep(1000);
	}
}

static void iser_terminate(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	if (ic->terminated)
		return;
	ic->terminated = true;
	ev_timer_stop(c->loop, &ic->cq_more);
	ev_io_stop(c->loop, &ic->cq_io);
	ev_poller_stop(c->loop, &ic->cq_poller);
	ev_io_stop(c->loop, &ic->cm_io);
	if (ic->id)
		rdma_disconnect(ic->id);
	drain(c);
	for (struct list_head *q = &ic->backlog; q; q = q == &ic->backlog ? &ic->rd_backlog : NULL)
		while (!list_empty(q)) {
			struct dm_txpdu *p = list_first_entry(q, struct dm_txpdu, link);
			list_del(&p->link);
			p->sent(p, -ECONNABORTED);
		}
	iscsi_conn_put(c); /* the transport's own reference */
}

static void iser_release(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	ic->dead = true;
	ev_timer_stop(c->loop, &ic->cq_more);
	for (int i = 0; i < MR_SLOTS; i++)
		if (ic->mrs[i].mr)
			ibv_dereg_mr(ic->mrs[i].mr);
	for (int i = 0; i < POOL_SLOTS; i++)
		if (ic->pools[i].mr)
			ibv_dereg_mr(ic->pools[i].mr);
	for (int i = 0; i < ITT_SLOTS; i++)
		if (ic->itts[i].used && ic->itts[i].mr)
			ibv_dereg_mr(ic->itts[i].mr);
	if (ic->qp)
		rdma_destroy_qp(ic->id);
	if (ic->cq)
		ibv_destroy_cq(ic->cq);
	if (ic->cc)
		ibv_destroy_comp_channel(ic->cc);
	if (ic->rx_mr)
		ibv_dereg_mr(ic->rx_mr);
	if (ic->tx_mr)
		ibv_dereg_mr(ic->tx_mr);
	if (ic->pd)
		ibv_dealloc_pd(ic->pd);
	if (ic->id)
		rdma_destroy_id(ic->id);
	if (ic->ch)
		rdma_destroy_event_channel(ic->ch);
	if (ic->rx_area)
		munmap(ic->rx_area, (size_t)NRX * RX_SIZE);
	if (ic->tx_area)
		munmap(ic->tx_area, (size_t)NTX * TX_SIZE);
}

static bool iser_tx_busy(struct iscsi_conn *c)
{
	struct iser_conn *ic = iser_of(c);

	return ic->sends_out || ic->rdma_out || !list_empty(&ic->backlog) ||
	       !list_empty(&ic->rd_backlog);
}


/* ---------------------------------------------------------------- accept */

static const struct iscsi_role_ops no_role;

static void iser_reject(struct dm_incoming *in)
{
	struct iser_request *req = (struct iser_request *)in;

	rdma_reject(req->id, NULL, 0);
	rdma_destroy_id(req->id);
	rdma_destroy_event_channel(req->ch);
	free(req);
}

/* Registered memory counts against RLIMIT_MEMLOCK with some providers: Soft-iWARP (siw)
 * counts it even for root, and a guest's default of 8 MiB does not hold one connection's rings
 * and an initiator's buffer pool. Raise the limit to unlimited where the process may (the
 * systemd units say LimitMEMLOCK=infinity too), else the soft limit to the hard one, as
 * rdma-core asks of RDMA applications; logged when it changes, so once per process. */
static void memlock_raise(void)
{
	struct rlimit rl, want = {RLIM_INFINITY, RLIM_INFINITY};

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	if (setrlimit(RLIMIT_MEMLOCK, &want) < 0) {
		if (rl.rlim_cur == rl.rlim_max)
			return;
		want.rlim_cur = want.rlim_max = rl.rlim_max;
		if (setrlimit(RLIMIT_MEMLOCK, &want) < 0)
			return;
	}
	if (want.rlim_cur == RLIM_INFINITY)
		log_info("iser", "locked-memory limit (RLIMIT_MEMLOCK) raised from %llu KiB to "
				 "unlimited for RDMA memory registrations",
			 (unsigned long long)rl.rlim_cur / 1024);
	else
		log_info("iser", "locked-memory limit (RLIMIT_MEMLOCK) raised from %llu to %llu KiB "
				 "(its hard limit) for RDMA memory registrations",
			 (unsigned long long)rl.rlim_cur / 1024,
			 (unsigned long long)want.rlim_cur / 1024);
}

static int setup(struct iser_conn *ic, struct rdma_cm_id *id, uint32_t rd_depth)
{
	struct ibv_qp_init_attr qa = {0};
	struct ibv_context *verbs = id->verbs;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	if (ibv_query_device(verbs, &da) || ibv_query_port(verbs, id->port_num, &pa))
		return -EIO;
	memlock_raise();
	/* one RDMA Read carries at most the port's message size (rxe: 8 MiB); the task buffer is
	   one registration and one SGE, so no other limit applies */
	ic->max_msg = pa.max_msg_sz ? pa.max_msg_sz : 1u << 20;
	ic->iwarp = verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	ic->local_access = IBV_ACCESS_LOCAL_WRITE | (ic->iwarp ? IBV_ACCESS_REMOTE_WRITE : 0);
	ic->pd = ibv_alloc_pd(verbs);
	ic->cc = ic->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!ic->cc)
		return -EIO;
	ic->cq = ibv_create_cq(verbs, CQ_DEPTH, NULL, ic->cc, 0);
	if (!ic->cq || ibv_req_notify_cq(ic->cq, 0))
		return -EIO;
	qa.send_cq = ic->cq;
	qa.recv_cq = ic->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = NTX + MAX_RDMA;
	qa.cap.max_recv_wr = NRX;
	qa.cap.max_send_sge = DM_TX_MAX_DATA_IOV;
	qa.cap.max_recv_sge = 1;
	if ((uint32_t)da.max_qp_wr < qa.cap.max_send_wr)
		qa.cap.max_send_wr = (uint32_t)da.max_qp_wr;
	if (rdma_create_qp(id, ic->pd, &qa))
		return -errno ? -errno : -EIO;
	ic->qp = id->qp;
	/* the rings (several MiB) are mappings of their own, not heap memory: a closed
	   connection gives their pages back at once (freed from the heap, blocks this large stay
	   with the allocator, and a target that sees many short connections grows) */
	{
		void *rx = mmap(NULL, (size_t)NRX * RX_SIZE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		void *tx;

		if (rx == MAP_FAILED)
			return -ENOMEM;
		ic->rx_area = rx; /* unmapped by release() */
		tx = mmap(NULL, (size_t)NTX * TX_SIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (tx == MAP_FAILED)
			return -ENOMEM;
		ic->tx_area = tx;
	}
	ic->rx_mr = ibv_reg_mr(ic->pd, ic->rx_area, (size_t)NRX * RX_SIZE, IBV_ACCESS_LOCAL_WRITE);
	ic->tx_mr = ibv_reg_mr(ic->pd, ic->tx_area, (size_t)NTX * TX_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!ic->rx_mr || !ic->tx_mr) {
		int e = errno ? errno : EIO;
		log_warn("iser", "cannot register %zu KiB of send and receive rings: %s%s",
			 ((size_t)NRX * RX_SIZE + (size_t)NTX * TX_SIZE) / 1024, strerror(e),
			 e == ENOMEM ? " (the locked-memory limit, ulimit -l, may be too low)" : "");
		return -e;
	}
	ic->tx_free = -1;
	for (int i = NTX - 1; i >= 0; i--)
		iser_tx_give(ic, i);
	/* every receive buffer before the initiator may send (login and full feature phase) */
	for (int i = 0; i < NRX; i++)
		if (iser_post_recv(ic, i) < 0)
			return -EIO;
	ic->ord = rd_depth;
	if (ic->ord > (uint32_t)da.max_qp_init_rd_atom)
		ic->ord = (uint32_t)da.max_qp_init_rd_atom;
	if (ic->ord == 0)
		ic->ord = 1;
	return 0;
}

static struct iscsi_conn *iser_accept(struct dm_incoming *in, const struct dm_conn_setup *cs)
{
	struct iser_request *req = (struct iser_request *)in;
	struct ev_loop *loop = cs->loop;
	struct iscsi_conn *c = iscsi_conn_new(cs->as ? cs->as : &iser_dm_ops, loop, cs->role,
					      cs->ops, cs->role_priv);
	struct rdma_conn_param cp = {0};
	uint8_t pd[4] = {ISER_CM_ZBVA_NOT_USED | ISER_CM_SEND_W_INV_NOT_USED, 0, 0, 0};
	struct iser_conn *ic;
	int r;

	if (!c) {
		iser_reject(&req->base);
		return NULL;
	}
	ic = iser_of(c);
	ic->c = c;
	ic->id = req->id;
	ic->ch = req->ch;
	list_init(&ic->backlog);
	ev_timer_init(&ic->cq_more, iser_cq_more_cb, c);
	list_init(&ic->rd_backlog);
	snprintf(c->peer, sizeof(c->peer), "%s", req->base.peer);
	r = setup(ic, req->id, req->responder_resources);
	if (r < 0) {
		log_warn("iser", "%s: cannot set up the connection: %s", c->peer, strerror(-r));
		goto bad;
	}
	cp.initiator_depth = (uint8_t)ic->ord;
	cp.responder_resources = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	cp.private_data = pd;
	cp.private_data_len = sizeof(pd);
	ev_io_init(&ic->cm_io, ic->ch->fd, cm_cb, c);
	ev_io_init(&ic->cq_io, ic->cc->fd, iser_cq_cb, c);
	if (ev_io_start(loop, &ic->cm_io, EPOLLIN) < 0 || ev_io_start(loop, &ic->cq_io, EPOLLIN) < 0)
		goto bad;
	ev_poller_init(&ic->cq_poller, iser_cq_poller, c);
	ev_poller_start(loop, &ic->cq_poller);
	if (rdma_accept(ic->id, &cp)) {
		log_warn("iser", "%s: rdma_accept: %s", c->peer, strerror(errno));
		goto bad;
	}
	free(req);
	return c;
bad:
	rdma_reject(req->id, NULL, 0);
	free(req);
	c->role_ops = &no_role; /* the role never saw this connection */
	ic->terminated = true; /* nothing posted is in flight that the role knows of */
	ev_io_stop(loop, &ic->cq_io);
	ev_poller_stop(loop, &ic->cq_poller);
	ev_io_stop(loop, &ic->cm_io);
	iscsi_conn_put(c);
	return NULL;
}

/* ---------------------------------------------------------------- listener */

/* "addr:port/iser" of the peer of id. */
static void format_peer(struct rdma_cm_id *id, char *out, size_t cap)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[64] = "?", serv[16] = "?";

	getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						  : sizeof(struct sockaddr_in),
		    host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, cap, "%s%s%s:%s/iser", sa->sa_family == AF_INET6 ? "[" : "", host,
		 sa->sa_family == AF_INET6 ? "]" : "", serv);
}

static void listen_cb(struct ev_io *w, uint32_t revents)
{
	struct iser_listener *l = w->arg;
	struct rdma_cm_event *ev;

	(void)revents;
	while (rdma_get_cm_event(l->ch, &ev) == 0) {
		struct iser_request *req;
		struct rdma_cm_id *id = ev->id;

		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		req = calloc(1, sizeof(*req));
		if (req) {
			const uint8_t *p = ev->param.conn.private_data;
			req->base.dm = &iser_dm_ops;
			format_peer(id, req->base.peer, sizeof(req->base.peer));
			req->id = id;
			req->peer_flags = ev->param.conn.private_data_len >= 1 && p ? p[0] : 0;
			req->responder_resources = ev->param.conn.responder_resources;
			req->initiator_depth = ev->param.conn.initiator_depth;
		}
		rdma_ack_cm_event(ev);
		if (!req) {
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			continue;
		}
		/* its own event channel, so the worker that takes it owns all its events */
		req->ch = rdma_create_event_channel();
		if (!req->ch || rdma_migrate_id(id, req->ch)) {
			if (req->ch)
				rdma_destroy_event_channel(req->ch);
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			free(req);
			continue;
		}
		{
			int fl = fcntl(req->ch->fd, F_GETFL);
			fcntl(req->ch->fd, F_SETFL, fl | O_NONBLOCK);
		}
		l->cb(&req->base, l->arg);
	}
}

static int iser_listen(struct ev_loop *loop, const char *addr, uint16_t port, dm_incoming_cb cb,
		       void *arg, struct dm_listener **out)
{
	struct iser_listener *l = calloc(1, sizeof(*l));
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE}, *ai = NULL;
	char serv[8];
	int r, fl;

	if (!l)
		return -ENOMEM;
	l->base.dm = &iser_dm_ops;
	l->loop = loop;
	l->cb = cb;
	l->arg = arg;
	snprintf(serv, sizeof(serv), "%u", port);
	if (getaddrinfo(addr, serv, &hints, &ai) != 0) {
		free(l);
		return -EINVAL;
	}
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		r = errno == ENODEV || errno == ENOENT ? -ENODEV : -errno;
		goto iser_fail;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		r = -errno;
		goto iser_fail;
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		r = -errno;
		goto iser_fail;
	}
	if (rdma_listen(l->id, 64)) {
		r = -errno;
		goto iser_fail;
	}
	fl = fcntl(l->ch->fd, F_GETFL);
	fcntl(l->ch->fd, F_SETFL, fl | O_NONBLOCK);
	ev_io_init(&l->io, l->ch->fd, listen_cb, l);
	r = ev_io_start(loop, &l->io, EPOLLIN);
	if (r < 0)
		goto iser_fail;
	freeaddrinfo(ai);
	*out = &l->base;
	return 0;
iser_fail:
	freeaddrinfo(ai);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
	return r ? r : -EIO;
}

static void iser_listener_free(struct dm_listener *dl)
{
	struct iser_listener *l = (struct iser_listener *)dl;

	ev_io_stop(l->loop, &l->io);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

/* ---------------------------------------------------------------- active open (initiator) */

static void up_failed(struct iscsi_conn *c, int err, const char *why)
{
	struct iser_conn *ic = iser_of(c);
	void (*cb)(struct iscsi_conn *, int) = ic->on_up;

	ic->connecting = false;
	ic->on_up = NULL;
	log_info("iser", "%s: connect failed: %s", c->peer, why);
	if (cb)
		cb(c, err);
}

static void active_event(struct iscsi_conn *c, enum rdma_cm_event_type type)
{
	struct iser_conn *ic = iser_of(c);
	struct rdma_conn_param cp = {0};
	uint8_t pd[4] = {ISER_CM_ZBVA_NOT_USED | ISER_CM_SEND_W_INV_NOT_USED, 0, 0, 0};
	int r;

	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ic->id, 2000))
			up_failed(c, -errno, "rdma_resolve_route");
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		struct ibv_device_attr da;

		if (ibv_query_device(ic->id->verbs, &da)) {
			up_failed(c, -EIO, "ibv_query_device");
			return;
		}
		r = setup(ic, ic->id, 0);
		if (r < 0) {
			up_failed(c, r, "cannot create the queue pair and buffers");
			return;
		}
		ev_io_init(&ic->cq_io, ic->cc->fd, iser_cq_cb, c);
		if (ev_io_start(c->loop, &ic->cq_io, EPOLLIN) < 0) {
			up_failed(c, -EIO, "cannot watch the completion channel");
			return;
		}
		ev_poller_init(&ic->cq_poller, iser_cq_poller, c);
		ev_poller_start(c->loop, &ic->cq_poller);
		/* we serve the target's RDMA Reads of our write buffers */
		/* the target's RDMA Reads of our write buffers we serve at once (libiscsi uses 4;
		   16 is enough for the target's ORD and stays within every device's limits) */
		cp.responder_resources = da.max_qp_rd_atom > 16 ? 16 : (uint8_t)da.max_qp_rd_atom;
		cp.initiator_depth = 1;
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		cp.private_data = pd;
		cp.private_data_len = sizeof(pd);
		if (rdma_connect(ic->id, &cp))
			up_failed(c, -errno, "rdma_connect");
		return;
	}
	case RDMA_CM_EVENT_ESTABLISHED: {
		void (*cb)(struct iscsi_conn *, int) = ic->on_up;

		ic->connecting = false;
		ic->on_up = NULL;
		established(c);
		if (cb)
			cb(c, 0);
		return;
	}
	case RDMA_CM_EVENT_REJECTED:
		up_failed(c, -ECONNREFUSED, "rejected by the target");
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		up_failed(c, -EHOSTUNREACH, rdma_event_str(type));
		return;
	default:
		return;
	}
}

static struct iscsi_conn *iser_connect(const char *host, uint16_t port,
				       const struct dm_conn_setup *cs, int *err)
{
	struct ev_loop *loop = cs->loop;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	struct iscsi_conn *c;
	struct iser_conn *ic;
	char serv[8];
	int fl, r;

	snprintf(serv, sizeof(serv), "%u", port);
	if (getaddrinfo(host, serv, &hints, &ai) != 0) {
		*err = -EHOSTUNREACH;
		return NULL;
	}
	c = iscsi_conn_new(cs->as ? cs->as : &iser_dm_ops, loop, cs->role, cs->ops, cs->role_priv);
	if (!c) {
		freeaddrinfo(ai);
		*err = -ENOMEM;
		return NULL;
	}
	ic = iser_of(c);
	ic->c = c;
	ic->connecting = true;
	ic->on_up = cs->up;
	list_init(&ic->backlog);
	ev_timer_init(&ic->cq_more, iser_cq_more_cb, c);
	list_init(&ic->rd_backlog);
	snprintf(c->peer, sizeof(c->peer), "%s:%u/iser", host, port);
	ic->ch = rdma_create_event_channel();
	if (!ic->ch) {
		r = -ENODEV;
		goto iser_fail;
	}
	fl = fcntl(ic->ch->fd, F_GETFL);
	fcntl(ic->ch->fd, F_SETFL, fl | O_NONBLOCK);
	if (rdma_create_id(ic->ch, &ic->id, c, RDMA_PS_TCP)) {
		r = -errno;
		goto iser_fail;
	}
	ev_io_init(&ic->cm_io, ic->ch->fd, cm_cb, c);
	if (ev_io_start(loop, &ic->cm_io, EPOLLIN) < 0) {
		r = -EIO;
		goto iser_fail;
	}
	if (rdma_resolve_addr(ic->id, NULL, ai->ai_addr, 2000)) {
		r = errno == ENODEV ? -ENODEV : -EHOSTUNREACH;
		goto iser_fail;
	}
	freeaddrinfo(ai);
	*err = 0;
	return c;
iser_fail:
	freeaddrinfo(ai);
	ic->terminated = true;
	ev_io_stop(loop, &ic->cm_io);
	c->role_ops = &no_role;
	iscsi_conn_put(c);
	*err = r;
	return NULL;
}

const struct dm_ops iser_dm_ops = {
	.name = "iser",
	.caps = DM_CAP_DIRECT_PLACEMENT | DM_CAP_PEER_CLOSES,
	.conn_priv_size = sizeof(struct iser_conn),
	.max_recv_data = ISER_RECV_DATA,
	.recv_credits = NRX,
	.send_control = iser_queue,
	.put_data = iser_queue,
	.get_data = iser_queue,
	.enable = iser_enable,
	.terminate = iser_terminate,
	.release = iser_release,
	.tx_busy = iser_tx_busy,
	.buf_free = iser_buf_free,
	.mem_register = iser_mem_register,
	.tx_abort_at = iser_tx_abort_at,
	.listen = iser_listen,
	.listener_free = iser_listener_free,
	.accept = iser_accept,
	.reject = iser_reject,
	.connect = iser_connect,
};
