/* What a backend is opened with, as the configuration names it: the backend type, an RBD
 * image's whereabouts, the test backend's error rules. The SCSI layer's LU configuration
 * (scsi/scsi.h) embeds these; the backend layer defines them, so its headers need nothing
 * from the layers above.
 */
#ifndef IX_BACKEND_BS_CFG_H
#define IX_BACKEND_BS_CFG_H

#include <stdbool.h>
#include <stdint.h>

enum bs_type {
	BS_TYPE_RAM = 0,
	BS_TYPE_FILE = 1,
	BS_TYPE_BLOCK = 2,
	BS_TYPE_ERROR = 3, /* test only: RAM whose I/O fails or is slowed by rules */
	BS_TYPE_RBD = 4,   /* a Ceph RBD image through librbd (backend/bs_rbd.c) */
};

/* The shared persistent reservation store's timeouts (pr_store "rados": src/ha/ha_pr.c;
 * luns[].rbd.pr in the configuration); 0 takes the default. */
struct bs_rbd_pr_cfg {
	uint32_t notify_timeout_s; /* a gateway that has not acknowledged a change by then is
				      blocklisted (5); whole seconds, as RADOS counts a notify's */
	uint32_t reset_wait_s;	   /* a LOGICAL UNIT RESET waits this long for the other
				      gateways' acknowledgements (2) */
	uint32_t retries;	   /* versioned writes lost to other gateways before a
				      PERSISTENT RESERVE OUT fails (16) */
	uint32_t blocklist_s;	   /* how long a fenced gateway stays blocklisted (3600) */
};

/* Where an RBD LU's image lives and how to reach its cluster (BS_TYPE_RBD). */
struct bs_rbd_cfg {
	const char *pool;      /* required */
	const char *image;     /* required */
	const char *ns;        /* RADOS namespace; NULL = the default one */
	const char *conf;      /* ceph.conf; NULL = librados' default search ($CEPH_CONF,
				  /etc/ceph/ceph.conf, ...) */
	const char *client;    /* cephx user without "client."; NULL = "admin" */
	const char *keyring;   /* NULL = what ceph.conf says */
	uint32_t osd_op_timeout_s; /* an OSD or monitor request fails (-ETIMEDOUT) after this
				      long; 0 = the default (30) */
	uint32_t connect_timeout_s; /* the connection at start; 0 = the default (10) */
	bool exclusive_lock;	    /* take librbd's managed exclusive lock at open; it moves
				       only when another ix gateway asks for it or breaks it
				       (fencing for several gateways: docs/ha.md) */
	uint32_t lock_check_ms;     /* with exclusive_lock: ask the cluster who holds the lock
				       this often; 0 = the default (1000) */
	uint32_t handover_timeout_ms; /* with exclusive_lock: how long a gateway that wants
					 the lock waits for the holder's answer before it
					 breaks the lock; 0 = the default (5000) */
	bool start_offline;         /* an image that cannot be opened at start leaves the LU
				       offline (NOT READY 04/03) and is retried in the
				       background; false: the start fails (config default true) */
	uint32_t rejoin_after_ms;   /* fenced (blocklisted): rejoin with a new client this much
				       later; 0 = only when asked (config default 5000) */
	struct bs_rbd_pr_cfg pr;    /* the shared PR store (read by src/ha/, not the backend) */
};

/* The settings of the backends that have any: an LU's configuration carries one (scsi.h's
 * scsi_lu_cfg.bs), the opened backend reads its own part (bs_open_cfg.backend_cfg). */
struct bs_backend_cfg {
	struct bs_rbd_cfg rbd; /* BS_TYPE_RBD */
};

/* Error injection rules of the test backend (BS_TYPE_ERROR, backend/bs_error.c). The
 * first rule that matches an I/O decides what happens to it. */
#define BS_ERR_OP_READ  0x1 /* reads */
#define BS_ERR_OP_WRITE 0x2 /* writes, WRITE SAME, zeroing, unmapping */
#define BS_ERR_OP_FLUSH 0x4 /* SYNCHRONIZE CACHE and FUA flushes */
struct bs_err_rule {
	uint8_t ops;             /* BS_ERR_OP_* this rule applies to */
	int error;               /* the I/O fails with this -errno (-EIO, -ENOSPC, ...); 0 = it
				    succeeds (delay only) */
	uint64_t lba, blocks;    /* logical blocks the I/O must touch; blocks 0 = all from lba */
	uint32_t every;          /* act on every Nth I/O the rule matches (0 or 1: each one) */
	uint32_t delay_ms;       /* complete this much later */
};

#endif
