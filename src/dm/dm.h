/* The datamover interface (RFC 5047): what the iSCSI layer (session/, target/, initiator/)
 * asks of a transport, and the two upcalls a transport makes. Nothing above this header knows
 * whether TCP or RDMA is underneath.
 *
 * A transport is a const struct dm_ops registered by name in dm.c's table. Its per-connection
 * state lives in the same allocation as the generic struct iscsi_conn, right behind it
 * (conn_priv_size bytes, reached with iscsi_conn_priv()).
 *
 * Threading: every op runs on the connection's thread. Ownership: a struct dm_txpdu belongs to
 * the caller until the transport calls its sent() callback (once, after the bytes left or when
 * the connection is torn down with err != 0); the data it points to must stay valid until then.
 */
#ifndef IX_DM_DM_H
#define IX_DM_DM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/pdu.h"
#include "util/list.h"

struct iscsi_conn;
struct iscsi_role_ops;
struct ev_loop;
struct dm_ops;

/* A connection's negotiated parameters the datamover needs (the login's result; keys.h). */
struct iscsi_conn_params {
	bool header_digest;             /* CRC32C negotiated */
	bool data_digest;
	uint32_t max_recv_dsl;          /* our declared MaxRecvDataSegmentLength: most we accept */
	uint32_t max_xmit_dsl;          /* the peer's declared value: most we may send (8192 until
					   the peer declares) */
	bool rdma;                      /* RDMAExtensions=Yes negotiated */
	uint32_t target_rdsl, initiator_rdsl; /* iSER results (8192 defaults) */
};

#define DM_TX_MAX_DATA_IOV 4

struct dm_txpdu;

/* Data another thread may change until it is on the wire: a RAM LU's memory sent without a
 * copy. A transport that checksums data[] (a data digest) and has DM_CAP_TX_GUARD brackets
 * the checksum and the hand-over of those bytes to the kernel with pin and unpin, holding
 * the pin for one bounded stretch that runs no callbacks (writers on other threads wait for
 * it). Runs on the connection's thread. */
struct dm_tx_guard {
	/* 0: data[] cannot change until unpin; -EBUSY: it may be changing now */
	int (*pin)(struct dm_txpdu *p);
	void (*unpin)(struct dm_txpdu *p);
	/* Point data[] at a copy the owner keeps stable until the PDU is sent, clear p->guard,
	   and, if pinned, unpin (after the copy, so the copy holds the checksummed bytes). */
	void (*detach)(struct dm_txpdu *p, bool pinned);
};

/* An outgoing PDU: header bytes plus up to DM_TX_MAX_DATA_IOV data pieces. The transport adds
 * padding and digests.
 *
 * Three parts, and one reset rule: everything before `link` is the caller's description of
 * the PDU and is zeroed by iscsi_txpdu_get() on every reuse (so a recycled descriptor never
 * names the buffer of its previous use); `link`, `owner_link` and `pooled` belong to whoever
 * queues or pools it and survive reuse; `xport` is the transport's scratch while it holds the
 * PDU (from send_control/put_data/get_data until sent()), which the transport initialises
 * itself when it takes the PDU (it may hold the values of an earlier use). */
#define DM_TXPDU_XPORT_SIZE 32
struct dm_txpdu {
	uint8_t bhs[ISCSI_BHS_LEN];
	uint8_t *ahs;                   /* NULL or ahs_len bytes (multiple of 4) */
	uint32_t ahs_len;
	struct iovec data[DM_TX_MAX_DATA_IOV];
	int data_cnt;
	uint32_t data_len;              /* sum of data[] lengths == DataSegmentLength */
	void (*sent)(struct dm_txpdu *p, int err);
	void *arg;
	const struct dm_tx_guard *guard; /* NULL: data[] stays as it is until sent */
	/* Direct placement (DM_CAP_DIRECT_PLACEMENT transports only; TCP ignores these):
	   Put_Data writes data[] straight to the initiator's buffer; Get_Data reads the R2T's
	   DesiredDataTransferLength into `dest`. buf_base/buf_size name the whole allocation
	   the data lives in, so the transport can register it once and reuse the
	   registration. */
	struct iovec dest;
	void *buf_base;
	size_t buf_size;

	struct list_head link;          /* transport's queue */
	struct list_head owner_link;    /* the owner's (e.g. the task's PDUs); never the
					   transport's. Self-linked from iscsi_txpdu_get(). */
	bool pooled;                    /* owned by a connection pool */

	/* the transport's scratch (digests, progress, posted work): see DM_TXPDU_XPORT() */
	_Alignas(8) unsigned char xport[DM_TXPDU_XPORT_SIZE];
};

/* A transport's view of p->xport as its own struct type (which must fit: check it with
 * _Static_assert(sizeof(type) <= DM_TXPDU_XPORT_SIZE)). */
#define DM_TXPDU_XPORT(type, p) ((type *)(void *)(p)->xport)

/* Where the payload of a received PDU goes, decided by the iSCSI layer in the header phase. */
struct dm_rx_place {
	uint8_t *buf;                   /* payload destination, NULL = discard */
	uint32_t len;                   /* must equal DataSegmentLength when buf != NULL */
};

/* Largest Put_Data a role asks of a direct-placement transport at once (one RDMA Write;
 * every RDMA device carries messages this large). */
#define DM_PLACE_MAX (1u << 20)

/* Datamover capabilities. */
#define DM_CAP_DIGESTS 0x1               /* header/data digests supported (TCP) */
#define DM_CAP_DIRECT_PLACEMENT 0x2      /* Put_Data/Get_Data move data without PDUs (iSER) */
#define DM_CAP_TX_GUARD 0x4              /* honours dm_txpdu.guard (TCP) */
/* Closing discards what the peer has not consumed yet: no half-close (iSER: an RDMA disconnect
   can be seen by the peer before the receive completion of our last Send). A role that closes
   after a final PDU (Logout Response, failed Login Response) lets the peer close first, for a
   bounded time, and marks the connection peer_close_expected (RFC 7145 5.2: the initiator
   terminates the connection after the Logout Response). */
#define DM_CAP_PEER_CLOSES 0x8

/* ---- Connection establishment (RFC 5047 leaves it to the transport; IDM's it_tgt_svc_* and
 * it_ini_conn_*). The same three steps for every transport:
 *
 *   listen   (main loop)  a listener calls back with one dm_incoming per connection request;
 *   accept   (any loop)   the holder of a dm_incoming hands it to the thread that will own the
 *                         connection, which turns it into an iscsi_conn (or reject()s it);
 *   connect  (any loop)   an initiator gets its iscsi_conn at once, and up() later.
 *
 * The generic parts below are the first members of each transport's own structures. */

/* A transport's listening endpoint on one address and port. Owned by whoever called listen();
 * freed with dm_listener_free() on the loop it listens on. */
struct dm_listener {
	const struct dm_ops *dm;
};

/* One connection request taken from a listener and not yet a connection (TCP: an accepted
 * socket; iSER: an RDMA CM connect request). It belongs to its holder, who passes it on by
 * pointer (to another thread too) and ends it with exactly one dm_accept() or dm_reject(). */
struct dm_incoming {
	const struct dm_ops *dm;
	char peer[72]; /* "addr:port" for logs and the login limit; "" if unknown */
};

typedef void (*dm_incoming_cb)(struct dm_incoming *in, void *arg);

/* What a new connection is for. */
/* A receive staging buffer shared by the connections of one thread (transports that read a
 * byte stream in bulk: TCP). A connection uses it only inside one receive call and leaves it
 * empty, so an idle connection holds none; busy marks it taken (a nested receive of another
 * connection then uses a buffer of its own). Owned by the thread's role object. */
#define DM_RX_STAGE_SIZE (64 * 1024)
struct dm_rx_stage {
	uint8_t *buf;                       /* size bytes, DM_RX_STAGE_SIZE for TCP's use */
	uint32_t size;
	bool busy;
};

struct dm_conn_setup {
	struct ev_loop *loop;               /* the connection's thread */
	enum iscsi_role role;
	const struct iscsi_role_ops *ops;
	void *role_priv;
	/* The ops the connection runs with: NULL for the transport's own, or a wrapper around
	   them whose private area starts with the transport's (transport/fault). */
	const struct dm_ops *as;
	/* connect only: the transport is up (err 0) or could not come up (-errno; the role then
	   closes the connection). Runs once, on the loop, never inside connect(). */
	void (*up)(struct iscsi_conn *c, int err);
	/* optional: the thread's shared receive stage (NULL: the connection allocates its own
	   on first receive) */
	struct dm_rx_stage *stage;
};

struct dm_ops {
	const char *name;
	uint32_t caps;
	size_t conn_priv_size;
	/* Largest data segment of a received control PDU (iSER: the receive buffer size; 0 =
	   no transport limit, TCP) */
	uint32_t max_recv_data;
	/* Receive buffers the peer's control PDUs land in, posted for the whole connection
	   (iSER: every Send the peer may have in flight needs one; 0 = no such limit, TCP). The
	   target sizes its CmdSN window and FirstBurstLength so that a command with its
	   immediate and unsolicited data can never find the queue empty. */
	uint32_t recv_credits;

	/* Send_Control: queue a control PDU. 0 or -errno (connection dead). */
	int (*send_control)(struct iscsi_conn *c, struct dm_txpdu *p);
	/* Put_Data: target-side read data described by a Data-In PDU (TCP sends the PDU). */
	int (*put_data)(struct iscsi_conn *c, struct dm_txpdu *p);
	/* Get_Data: target-side request for write data described by an R2T (TCP sends it). */
	int (*get_data)(struct iscsi_conn *c, struct dm_txpdu *p);
	/* Notice_Key_Values + Enable_Datamover: login finished, switch to these parameters
	   (digests take effect from the next PDU in each direction). */
	void (*enable)(struct iscsi_conn *c, const struct iscsi_conn_params *cp);
	/* Connection_Terminate: stop I/O, close; pending txpdus complete with -ECONNABORTED.
	   Idempotent. */
	void (*terminate)(struct iscsi_conn *c);
	/* Release transport resources (after terminate, when the last reference is gone). */
	void (*release)(struct iscsi_conn *c);
	/* Flush: true while PDUs are still queued for transmission. */
	bool (*tx_busy)(struct iscsi_conn *c);
	/* Optional: the role is about to free a buffer it named as buf_base in Put_Data /
	   Get_Data (a transport that registered it for RDMA must drop the registration: the
	   memory may be unmapped and reused). */
	void (*buf_free)(struct iscsi_conn *c, void *base);
	/* Optional: register [base, base + size) for the connection's lifetime (iSER: one
	   memory region the device may read and write, remote access included), so a txpdu
	   whose buf_base/buf_size lie inside it needs no registration of its own. Called at
	   set-up time (the initiator's buffer pool, at login), never per I/O. 0 or -errno
	   (-ENOSPC: the transport's table is full; the memory still works, registered per
	   use). Dropped by buf_free(base) or with the connection. NULL: nothing to do (TCP). */
	int (*mem_register)(struct iscsi_conn *c, void *base, size_t size);
	/* Receive and handle whatever the peer has sent, now, as if the transport had been told
	   it is readable (the login limit uses it to tell a connection whose Login PDU is
	   waiting from a half-open one). Upcalls may close the connection. NULL = nothing. */
	void (*rx_poll)(struct iscsi_conn *c);
	/* Test hook for fault injection (transport/fault/fault.h): once `total` bytes have been sent on the
	   connection since it began, abort it (TCP: with a reset) instead of sending byte total+1
	   (iSER: before the message that would carry it).
	   0 disarms. NULL when the transport cannot. */
	void (*tx_abort_at)(struct iscsi_conn *c, uint64_t total);

	/* Connection establishment (see above); called through the dm_* functions below. */
	int (*listen)(struct ev_loop *loop, const char *addr, uint16_t port, dm_incoming_cb cb,
		      void *arg, struct dm_listener **out);
	/* Optional: stop taking requests for ms (the caller is overloaded), 0 = until
	   listener_resume; they wait in the transport's backlog. */
	void (*listener_pause)(struct dm_listener *l, unsigned ms);
	/* Optional (with listener_pause): take requests again at once. */
	void (*listener_resume)(struct dm_listener *l);
	void (*listener_free)(struct dm_listener *l);
	struct iscsi_conn *(*accept)(struct dm_incoming *in, const struct dm_conn_setup *cs);
	void (*reject)(struct dm_incoming *in);
	struct iscsi_conn *(*connect)(const char *host, uint16_t port,
				      const struct dm_conn_setup *cs, int *err);
};

/* ---- The registry: dm.c's one table of transports. A transport's id is its index in the
 * table (0 .. DM_MAX_TRANSPORTS - 1); what the layers above keep per transport (the portals a
 * transport serves, sessions counted by transport) they keep by id, and what they show (the
 * configuration's "transports", statistics, metric labels) they name with ops->name. Nothing
 * above dm/ spells a transport's name. */
#define DM_MAX_TRANSPORTS 4
/* Id 0, the first of the table, is the default: what a portal serves and an initiator uses
 * when nothing else is said. */
#define DM_ID_DEFAULT 0

/* The transport called name, or NULL. */
const struct dm_ops *dm_find(const char *name);
/* The transport with id i (0, 1, ...), NULL past the last. */
const struct dm_ops *dm_transport(size_t i);
/* The id of the transport called name, or -ENOENT. */
int dm_find_id(const char *name);
/* The id of dm, or of the transport it wraps (a wrapper such as transport/fault carries the
 * name of the transport it wraps), or -ENOENT. */
int dm_transport_id(const struct dm_ops *dm);
/* The registered names joined for a message, each between quote characters ("" for none),
 * separated by ", " but the last by last: ("", " or ") gives "tcp or iser". Truncated to fit
 * cap; returns out. */
const char *dm_names(const char *quote, const char *last, char *out, size_t cap);

/* ---- Wrappers: a datamover wrapped around each transport of one side (transport/fault: faults
 * injected for tests), registered by name in dm_wrap.c's table. dm_wrap.c belongs to the
 * target side (ix-target --testing), not to libix. A wrapper's options are opaque above dm/:
 * its table of struct dm_opt describes them (name, type, place, bounds, default), so the
 * configuration reads them without knowing the wrapper's types. */
enum dm_opt_type {
	DM_OPT_BOOL, /* bool */
	DM_OPT_U32,  /* uint32_t in [min, max] */
	DM_OPT_U64,  /* uint64_t in [min, max] */
	DM_OPT_BITS, /* uint64_t: given as a list of bit numbers in [min, max] (max <= 63) */
};

struct dm_opt {
	const char *name; /* NULL ends a table */
	enum dm_opt_type type;
	size_t off;       /* of the value in the wrapper's options */
	uint64_t min, max, def;
	const char *what; /* DM_OPT_BITS: what one number is ("an opcode number") */
};

/* Room for any wrapper's options (a wrapper checks its struct fits with _Static_assert). */
#define DM_WRAP_OPTS_SIZE 64

struct dm_wrapper {
	const char *name;
	const struct dm_opt *opts;
	/* A wrapper of inner (which must outlive it) with these options; NULL on allocation
	   failure. Freed by wrap_free once its connections are gone. */
	void *(*wrap_new)(const struct dm_ops *inner, const void *opts);
	void (*wrap_free)(void *w);
	/* The ops its connections run with (dm_conn_setup.as). */
	const struct dm_ops *(*wrap_ops)(const void *w);
	/* For the log: its options in words, and what the wrappers w[0..n) did together. */
	void (*describe)(const void *opts, char *buf, size_t cap);
	void (*report)(void *const *w, size_t n, char *buf, size_t cap);
};

/* The wrapper called name, or NULL (dm_wrap.c: target side only). */
const struct dm_wrapper *dm_find_wrapper(const char *name);

/* Listen on addr (numeric) and port. 0 or -errno (-ENODEV: no device of this transport serves
 * the address). */
int dm_listen(const struct dm_ops *dm, struct ev_loop *loop, const char *addr, uint16_t port,
	      dm_incoming_cb cb, void *arg, struct dm_listener **out);
void dm_listener_pause(struct dm_listener *l, unsigned ms);
/* Can the listener be paused until dm_listener_resume (pause with ms 0)? */
bool dm_listener_can_hold(const struct dm_listener *l);
void dm_listener_resume(struct dm_listener *l);
void dm_listener_free(struct dm_listener *l); /* NULL is fine */
/* Make in a connection on cs->loop (the calling thread). in is consumed either way; NULL when
 * the connection could not be set up (the request was refused; logged). The role starts it
 * (it is up, in state ISCSI_CONN_XPT_UP, and receives once the role returns to the loop). */
struct iscsi_conn *dm_accept(struct dm_incoming *in, const struct dm_conn_setup *cs);
void dm_reject(struct dm_incoming *in); /* NULL is fine */
/* Start a connection to host:port (a name or an address). The connection is returned at once
 * (with the transport's reference, as after accept) and cs->up reports the outcome; NULL with
 * *err = -errno when it cannot even start. */
struct iscsi_conn *dm_connect(const struct dm_ops *dm, const char *host, uint16_t port,
			      const struct dm_conn_setup *cs, int *err);

/* Upcalls from the transport (implemented in dm/conn.c). Control_Notify, split in two:
 * first the header (BHS, AHS; digest already checked), then, once the payload has been placed
 * where the header phase said, the PDU.
 * dm_rx_header returns 0, or -errno to fail the connection; it fills place. */
int dm_rx_header(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *ahs, uint32_t ahs_len,
		 struct dm_rx_place *place);
/* ddigest_ok is false when the data digest did not match (payload already consumed). */
void dm_rx_pdu(struct iscsi_conn *c, bool ddigest_ok);
/* Connection_Terminate_Notify: the transport failed or the peer went away. */
void dm_conn_failed(struct iscsi_conn *c, int err);

#endif
