/* LU state commands through scsi_cmd_exec(): PERSISTENT RESERVE IN/OUT with the conflict table
 * applied to real commands, unit attentions to other nexuses, RESERVE(6) next to persistent
 * reservations, APTPL state surviving the LU (and a damaged state file refusing it), removable
 * medium (START STOP UNIT, PREVENT ALLOW per nexus, nexus loss, LU reset), SANITIZE (each
 * service action, progress, abort, failure mode), SWP, READ DEFECT DATA and REPORT SUPPORTED
 * OPERATION CODES for the new commands. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scsi/scsi_int.h"
#include "scsi_harness.h"

const uint8_t zblk[4096];

enum { L_PR = 0, L_RM = 1, L_THIN = 2, L_THICK = 3, L_APTPL = 4 };

static char state_dir[64];
/* The target context: its LUs and its thread (a PREEMPT AND ABORT reaches the context's
 * threads, abort.c). */
static struct scsi_lu_index *ctx_ix;

static int add_lu(struct env *e, uint32_t lun, struct scsi_lu_cfg cfg, char *err, size_t errlen)
{
	struct scsi_lu *lu;
	int rc;

	cfg.lun = lun;
	cfg.target_name = "iqn.2024-01.org.example:t1";
	cfg.index = ctx_ix;
	rc = scsi_lu_new(&cfg, &lu, err, errlen);
	if (rc == 0) {
		CHECK_EQ(scsi_lun_map_add(e->map, lun, lu), 0);
		scsi_lu_put(lu);
	}
	return rc;
}

static struct scsi_nexus *nexus(struct env *e, const char *iport)
{
	return scsi_nexus_new(e->map, iport, "iqn.2024-01.org.example:t1,t,0x0001");
}

/* Clear every pending UA of nx on lun. */
static void drain_ua(struct env *e, struct scsi_nexus *nx, uint32_t lun)
{
	struct tcmd t;

	for (int i = 0; i < 8; i++) {
		t_run(e, nx, lun, B(0x00), 0, NULL, 0, &t);
		if (!(t.c.status == 2 && (t.c.sense[2] & 0x0f) == 6))
			return;
	}
}

/* PERSISTENT RESERVE OUT with a basic 24-byte parameter list. */
static void prout(struct env *e, struct scsi_nexus *nx, uint32_t lun, uint8_t sa, uint8_t type,
		  uint64_t key, uint64_t sakey, uint8_t flags, struct tcmd *t)
{
	uint8_t p[24] = {0};

	put_be64(p, key);
	put_be64(p + 8, sakey);
	p[20] = flags;
	t_run(e, nx, lun, B(0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0), 0, p, 24, t);
}

static void prin(struct env *e, struct scsi_nexus *nx, uint32_t lun, uint8_t sa, uint16_t alloc,
		 struct tcmd *t)
{
	t_run(e, nx, lun, B(0x5e, sa, 0, 0, 0, 0, 0, (uint8_t)(alloc >> 8), (uint8_t)alloc, 0),
	      alloc, NULL, 0, t);
}

static const uint8_t rd10[16] = {0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0};
static const uint8_t wr10[16] = {0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0};

/* ---- persistent reservations through the command path ---- */

static void test_pr_commands(struct env *e)
{
	struct scsi_nexus *a = e->nx, *b = nexus(e, "iqn.2024-01.org.example:b,i,0x000000000002");
	struct tcmd t;

	printf("# PERSISTENT RESERVE through commands\n");
	drain_ua(e, a, L_PR);
	drain_ua(e, b, L_PR);
	/* CDB and parameter list checks */
	t_run(e, a, L_PR, B(0x5f, 0, 0, 0, 0, 0, 0, 0, 23, 0), 0, zblk, 23, &t);
	t_check_sense(&t, 0x5, 0x1a, 0x00);	 /* PARAMETER LIST LENGTH ERROR */
	prout(e, a, L_PR, 1, 0x11, 0, 0, 0, &t); /* scope 1 */
	t_check_sense(&t, 0x5, 0x24, 0x00);
	prout(e, a, L_PR, 1, 0x02, 0, 0, 0, &t); /* type 2 does not exist */
	t_check_sense(&t, 0x5, 0x24, 0x00);
	prout(e, a, L_PR, 0, 0, 0, 0x11, 0x08, &t); /* SPEC_I_PT */
	t_check_sense(&t, 0x5, 0x26, 0x00);
	prout(e, a, L_PR, 0, 0, 0, 0x11, 0x04, &t); /* ALL_TG_PT */
	t_check_sense(&t, 0x5, 0x26, 0x00);
	prout(e, a, L_PR, 0, 0, 0, 0x11, 0x01, &t); /* APTPL without a state_dir */
	t_check_sense(&t, 0x5, 0x26, 0x00);
	t_run(e, a, L_PR, B(0x5e, 4, 0, 0, 0, 0, 0, 0, 8, 0), 8, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00); /* service action 4 */
	/* REPORT CAPABILITIES without APTPL support: PTPL_C 0 */
	prin(e, a, L_PR, 2, 8, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_MEM(t.c.buf, B(0, 8, 0x10, 0x80, 0xea, 0x01, 0, 0), 8);

	/* register both, A reserves Exclusive Access */
	prout(e, a, L_PR, 6, 0, 0, 0xaa, 0, &t);
	CHECK_EQ(t.c.status, 0);
	prout(e, b, L_PR, 6, 0, 0, 0xbb, 0, &t);
	CHECK_EQ(t.c.status, 0);
	prout(e, a, L_PR, 1, 3, 0xaa, 0, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* READ KEYS with a short allocation length */
	prin(e, b, L_PR, 0, 8, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 8);
	CHECK_MEM(t.c.buf, B(0, 0, 0, 2, 0, 0, 0, 16), 8);
	/* the conflict table on real commands: B is registered, not the holder */
	t_run(e, b, L_PR, rd10, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, b, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, a, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	/* allowed to everyone: INQUIRY, TEST UNIT READY, READ CAPACITY, PR IN, REPORT LUNS */
	t_run(e, b, L_PR, B(0x12, 0, 0, 0, 36, 0), 36, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, B(0x00), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, B(0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), 8, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* RESERVE(6) next to a persistent reservation: the holder gets GOOD and nothing happens,
	 * anyone else conflicts */
	t_run(e, a, L_PR, B(0x16), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK(atomic_load(&scsi_lun_map_get(e->map, L_PR)->resv_holder) == NULL);
	t_run(e, b, L_PR, B(0x16), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, b, L_PR, B(0x17), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	/* Write Exclusive: B may read now, still not write; MODE SENSE is a read */
	prout(e, a, L_PR, 4, 1, 0xaa, 0xaa, 0, &t); /* the holder changes the type */
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, B(0x1a, 0, 0x3f, 0, 255, 0), 255, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x04); /* RESERVATIONS RELEASED: the type changed */
	t_run(e, b, L_PR, rd10, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, B(0x1a, 0, 0x3f, 0, 255, 0), 255, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, b, L_PR, B(0x1e, 0, 0, 0, 1, 0), 0, NULL, 0, &t); /* PREVENT is a write */
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, b, L_PR, B(0x1e, 0, 0, 0, 0, 0), 0, NULL, 0, &t); /* ALLOW is not */
	CHECK_EQ(t.c.status, 0);
	/* B preempts A: A hears REGISTRATIONS PREEMPTED and is locked out */
	prout(e, b, L_PR, 4, 3, 0xbb, 0xaa, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_PR, rd10, 512, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x05);
	t_run(e, a, L_PR, rd10, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	/* READ FULL STATUS: one registration, B, holding Exclusive Access */
	prin(e, a, L_PR, 3, 512, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(get_be64(t.c.buf + 8), 0xbb);
	CHECK_EQ(t.c.buf[8 + 12], 0x01);
	CHECK_EQ(t.c.buf[8 + 13], 3);
	CHECK_EQ(t.c.buf[8 + 24], 0x45);
	CHECK_MEM(t.c.buf + 8 + 28, "iqn.2024-01.org.example:b,i,0x000000000002", 42);
	/* REGISTER AND MOVE the reservation to A (TransportID of A's port) */
	{
		static const char ip[] = "iqn.2024-01.org.example:i1,i,0x000000000001";
		uint8_t p[24 + 4 + 48] = {0};

		put_be64(p, 0xbb);
		put_be64(p + 8, 0xa2);
		p[17] = 0x02; /* UNREG */
		put_be16(p + 18, 1);
		put_be32(p + 20, 4 + 48);
		p[24] = 0x45;
		put_be16(p + 26, 48);
		memcpy(p + 28, ip, sizeof(ip) - 1);
		t_run(e, b, L_PR, B(0x5f, 7, 0, 0, 0, 0, 0, 0, sizeof(p), 0), 0, p, sizeof(p), &t);
		CHECK_EQ(t.c.status, 0);
		t_run(e, a, L_PR, wr10, 0, zblk, 512, &t);
		CHECK_EQ(t.c.status, 0);
		t_run(e, b, L_PR, rd10, 512, NULL, 0, &t);
		CHECK_EQ(t.c.status, 0x18); /* B unregistered itself */
		/* a TransportID that is not one */
		p[24] = 0x05;
		t_run(e, a, L_PR, B(0x5f, 7, 0, 0, 0, 0, 0, 0, sizeof(p), 0), 0, p, sizeof(p), &t);
		t_check_sense(&t, 0x5, 0x26, 0x00);
	}
	/* CLEAR: everything goes, B (not registered) hears nothing; the data path is open */
	prout(e, a, L_PR, 3, 0, 0xa2, 0, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(atomic_load(&scsi_lun_map_get(e->map, L_PR)->pr_type), 0);
	/* registrations survive the loss of their nexus */
	prout(e, b, L_PR, 6, 0, 0, 0xb5, 0, &t);
	CHECK_EQ(t.c.status, 0);
	scsi_nexus_free(b);
	b = nexus(e, "iqn.2024-01.org.example:b,i,0x000000000002");
	drain_ua(e, b, L_PR);
	prout(e, b, L_PR, 1, 1, 0xb5, 0, 0, &t); /* B's new session reserves with its key */
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	/* and LU reset does not end them either */
	CHECK_EQ(scsi_lu_reset(scsi_lun_map_get(e->map, L_PR), b), 0);
	drain_ua(e, a, L_PR);
	t_run(e, a, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	drain_ua(e, b, L_PR); /* the reset's unit attention reaches its requester too */
	prout(e, b, L_PR, 3, 0, 0xb5, 0, 0, &t);
	CHECK_EQ(t.c.status, 0);
	drain_ua(e, a, L_PR);
	scsi_nexus_free(b);
}

/* REGISTER AND MOVE to a TransportID through relative target port rtpi; returns the status. */
static uint8_t register_move(struct env *e, struct scsi_nexus *nx, uint64_t key, uint64_t sakey,
			     uint16_t rtpi, const char *iport, struct tcmd *t)
{
	uint8_t p[24 + 4 + 48] = {0};

	put_be64(p, key);
	put_be64(p + 8, sakey);
	put_be16(p + 18, rtpi);
	put_be32(p + 20, 4 + 48);
	p[24] = 0x45;
	put_be16(p + 26, 48);
	memcpy(p + 28, iport, strlen(iport));
	t_run(e, nx, L_PR, B(0x5f, 7, 0, 0, 0, 0, 0, 0, sizeof(p), 0), 0, p, sizeof(p), t);
	return t->c.status;
}

/* The RELATIVE TARGET PORT IDENTIFIER of READ FULL STATUS descriptor i (or -1) and its key. */
static int full_status_port(const struct tcmd *t, unsigned i, uint64_t *key, bool *holder)
{
	uint32_t off = 8, end = 8 + get_be32(t->c.buf + 4);

	for (; off + 24 <= end; off += 24 + get_be32(t->c.buf + off + 20), i--)
		if (i == 0) {
			*key = get_be64(t->c.buf + off);
			*holder = t->c.buf[off + 12] & 1;
			return get_be16(t->c.buf + off + 18);
		}
	return -1;
}

/* Target ports other than 1 (SPC-4 6.15.4, 6.16.4): READ FULL STATUS reports each
 * registration's own port, REGISTER AND MOVE names the destination's port by its relative id:
 * the command's own, or one the ALUA groups list (another gateway's); any other is ILLEGAL
 * REQUEST, INVALID FIELD IN PARAMETER LIST pointing at the field. */
static void test_pr_ports(struct env *e)
{
	static const char ib[] = "iqn.2024-01.org.example:b,i,0x000000000002";
	static const char ic[] = "iqn.2024-01.org.example:c,i,0x000000000003";
	struct scsi_nexus *a = e->nx,
			  *c = scsi_nexus_new(e->map, ic, "iqn.2024-01.org.example:t1,t,0x0002");
	struct scsi_alua_cfg ac = {.ngroups = 2, .explicit_ok = true};
	struct scsi_lu *lu = scsi_lun_map_get(e->map, L_PR);
	uint64_t key;
	bool holder;
	struct tcmd t;

	drain_ua(e, a, L_PR);
	drain_ua(e, c, L_PR);
	prout(e, a, L_PR, 0, 0, 0, 0xa1, 0, &t);
	CHECK_EQ(t.c.status, 0);
	prout(e, c, L_PR, 0, 0, 0, 0xc1, 0, &t);
	CHECK_EQ(t.c.status, 0);
	prin(e, a, L_PR, 3, 1024, &t);
	CHECK_EQ(full_status_port(&t, 0, &key, &holder), 1);
	CHECK_EQ(key, 0xa1);
	CHECK_EQ(full_status_port(&t, 1, &key, &holder), 2); /* c came through port 2 */
	CHECK_EQ(key, 0xc1);
	prout(e, a, L_PR, 1, 1, 0xa1, 0, 0, &t); /* a reserves Write Exclusive */
	CHECK_EQ(t.c.status, 0);
	/* without ALUA the only port this target knows is the command's own: not 3 (another
	 * gateway's), not even 2 (c's) */
	CHECK_EQ(register_move(e, a, 0xa1, 0xb3, 3, ib, &t), 2);
	t_check_sense(&t, 0x5, 0x26, 0x00);
	CHECK_EQ(t.c.sense[15], 0x80);		/* SKSV, C/D 0: in the parameter list ... */
	CHECK_EQ(get_be16(t.c.sense + 16), 18); /* ... at RELATIVE TARGET PORT IDENTIFIER */
	CHECK_EQ(register_move(e, a, 0xa1, 0xc2, 2, ic, &t), 2);
	t_check_sense(&t, 0x5, 0x26, 0x00);
	/* ALUA: group 1 is this gateway's ports 1 and 2, group 2 another gateway's port 3 */
	ac.groups[0] = (struct scsi_alua_group_cfg){.id = 1,
						    .state = SCSI_ALUA_ACTIVE_OPTIMIZED,
						    .local = true,
						    .nports = 2,
						    .ports = {1, 2}};
	ac.groups[1] = (struct scsi_alua_group_cfg){
	    .id = 2, .state = SCSI_ALUA_ACTIVE_OPTIMIZED, .nports = 1, .ports = {3}};
	CHECK_EQ(scsi_alua_configure(e->map, &ac), 0);
	drain_ua(e, a, L_PR);
	drain_ua(e, c, L_PR);
	for (uint16_t bad = 0; bad <= 4; bad += 4) { /* reserved 0, unconfigured 4 */
		CHECK_EQ(register_move(e, a, 0xa1, 0xb3, bad, ib, &t), 2);
		t_check_sense(&t, 0x5, 0x26, 0x00);
	}
	/* to c through port 2, c's own nexus: c holds, a may no longer write */
	CHECK_EQ(register_move(e, a, 0xa1, 0xc2, 2, ic, &t), 0);
	t_run(e, c, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	/* to b through port 3 (a nexus of the other gateway): b holds, registered on port 3 */
	CHECK_EQ(register_move(e, c, 0xc2, 0xb3, 3, ib, &t), 0);
	prin(e, a, L_PR, 3, 1024, &t);
	CHECK_EQ(get_be32(t.c.buf + 4), 3 * (24 + 4 + 44));
	CHECK_EQ(full_status_port(&t, 2, &key, &holder), 3);
	CHECK(key == 0xb3 && holder);
	CHECK_MEM(t.c.buf + 8 + 2 * (24 + 4 + 44) + 28, ib, sizeof(ib));
	CHECK_EQ(full_status_port(&t, 1, &key, &holder), 2);
	CHECK(key == 0xc2 && !holder);
	pthread_mutex_lock(&lu->lock);
	CHECK_EQ(pr_find(&lu->pr, &(struct pr_nexus_id){ib, "iqn.2024-01.org.example:t1,t,0x0003"}),
		 2);
	pthread_mutex_unlock(&lu->lock);
	t_run(e, c, L_PR, wr10, 0, zblk, 512, &t); /* c no longer holds */
	CHECK_EQ(t.c.status, 0x18);
	CHECK_EQ(scsi_alua_configure(e->map, NULL), 0);
	drain_ua(e, a, L_PR);
	prout(e, a, L_PR, 3, 0, 0xa1, 0, 0, &t); /* CLEAR */
	CHECK_EQ(t.c.status, 0);
	drain_ua(e, c, L_PR);
	scsi_nexus_free(c);
}

/* PREEMPT AND ABORT on the file store: every thread's abort hook is asked for the preempted
 * nexuses' tasks on this LU (never the issuer's), and the command completes only once the
 * tasks it holds are released. */
struct hook_rec {
	int calls;
	struct scsi_abort *req;
	struct scsi_nexus *a, *b;
	bool wants_a, wants_b;
	struct scsi_lu *lu;
	bool hold;
};

static void abort_hook(void *arg, struct scsi_abort *req)
{
	struct hook_rec *h = arg;

	h->calls++;
	h->req = req;
	h->lu = scsi_abort_lu(req);
	h->wants_a = scsi_abort_wants(req, h->a);
	h->wants_b = scsi_abort_wants(req, h->b);
	if (h->hold) /* a task of b still in the backend */
		scsi_abort_hold(req);
}

static void test_preempt_abort(struct env *e)
{
	struct scsi_nexus *a = e->nx, *b = nexus(e, "iqn.2024-01.org.example:b,i,0x000000000002");
	struct hook_rec h = {.a = a, .b = b, .hold = true};
	struct tcmd t;
	uint8_t p[24] = {0};

	drain_ua(e, a, L_PR);
	drain_ua(e, b, L_PR);
	prout(e, a, L_PR, 0, 0, 0, 0xa1, 0, &t);
	prout(e, b, L_PR, 0, 0, 0, 0xb1, 0, &t);
	prout(e, b, L_PR, 1, 1, 0xb1, 0, 0, &t); /* b reserves Write Exclusive */
	CHECK_EQ(t.c.status, 0);
	scsi_thread_set_abort(e->thr, abort_hook, &h);
	/* PREEMPT (no abort) asks nobody */
	prout(e, a, L_PR, 4, 1, 0xa1, 0xb1, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(h.calls, 0);
	drain_ua(e, b, L_PR);
	prout(e, b, L_PR, 0, 0, 0, 0xb2, 0, &t); /* b registers again */
	/* PREEMPT AND ABORT of b's key: the hook is asked for b's tasks on this LU, not a's, and
	 * the command waits for the task it holds */
	put_be64(p, 0xa1);
	put_be64(p + 8, 0xb2);
	memset(&t, 0, sizeof(t));
	memcpy(t.cdb, B(0x5f, 5, 1, 0, 0, 0, 0, 0, 24, 0), 10);
	memcpy(e->buf, p, sizeof(p));
	t.c = (struct scsi_cmd){.thread = e->thr,
				.map = e->map,
				.nexus = a,
				.lun_field = scsi_lun_encode(L_PR),
				.cdb = t.cdb,
				.cdb_len = 16,
				.buf = e->buf,
				.buf_len = TBUF,
				.data_out_len = 24,
				.done = t_done,
				.priv = &t};
	scsi_cmd_exec(&t.c);
	for (int i = 0; i < 20; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(h.calls, 1);
	CHECK(h.wants_b && !h.wants_a);
	CHECK(h.lu == scsi_lun_map_get(e->map, L_PR));
	CHECK_EQ(t.ndone, 0); /* b's task is still in the backend */
	if (h.req)
		scsi_abort_release(h.req);
	for (int i = 0; i < 200 && t.ndone == 0; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(t.ndone, 1);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_PR, wr10, 0, zblk, 512, &t);
	t_check_sense(&t, 0x6, 0x2a, 0x05); /* REGISTRATIONS PREEMPTED */
	t_run(e, b, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	/* nothing held: at once */
	h.hold = false;
	prout(e, b, L_PR, 0, 0, 0, 0xb3, 0, &t);
	prout(e, a, L_PR, 5, 1, 0xa1, 0xb3, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(h.calls, 2);
	scsi_thread_set_abort(e->thr, NULL, NULL);
	drain_ua(e, b, L_PR);
	prout(e, a, L_PR, 3, 0, 0xa1, 0, 0, &t); /* CLEAR */
	CHECK_EQ(t.c.status, 0);
	scsi_nexus_free(b);
}

/* RESERVE/RELEASE on an LU whose store shares the SPC-2 reservation (the RADOS store; here a
 * stand-in that records what spc.c and lu.c hand it): a reservation held through another
 * gateway (SCSI_RESV_REMOTE) refuses every nexus here but lets RESERVE reach the store (which
 * asks the holder's gateway); RELEASE reaches it only from the holder; the holder's nexus loss
 * is reported to it. */
static struct {
	int reserve, release, lost;
	struct scsi_lu *lu;
	const struct scsi_nexus *lost_nx;
	struct scsi_lost_wait lost_w;
} fake;

static int fake_spc2(struct scsi_lu *lu, struct scsi_cmd *cmd, bool reserve)
{
	fake.lu = lu;
	if (reserve) {
		fake.reserve++;
		atomic_store(&lu->resv_holder, cmd->nexus); /* granted */
	} else {
		fake.release++;
		atomic_store(&lu->resv_holder, NULL);
	}
	return SCSI_DONE;
}

static int fake_lost(struct scsi_lu *lu, const struct scsi_nexus *nx,
		     const struct scsi_lost_wait *w)
{
	fake.lost++;
	fake.lost_nx = nx;
	fake.lost_w = w ? *w : (struct scsi_lost_wait){0};
	(void)lu;
	return w != NULL;
}

static void fake_lost_done(void *arg)
{
	(void)arg;
}

static void fake_free(struct scsi_lu *lu)
{
	(void)lu;
}

static int fake_out(struct scsi_lu *lu, struct scsi_cmd *cmd, const struct pr_out *req)
{
	(void)lu;
	(void)req;
	cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
	return SCSI_DONE;
}

static void test_spc2_shared(struct env *e)
{
	static const struct scsi_pr_store_ops ops = {.name = "fake",
						     .out = fake_out,
						     .free = fake_free,
						     .spc2 = fake_spc2,
						     .spc2_lost = fake_lost};
	struct scsi_lu *lu = scsi_lun_map_get(e->map, L_PR);
	struct scsi_nexus *a = e->nx, *b = nexus(e, "iqn.2024-01.org.example:b,i,0x000000000002");
	struct tcmd t;
	uintptr_t bp;

	drain_ua(e, a, L_PR);
	drain_ua(e, b, L_PR);
	lu->pr_ops = &ops;
	/* held through another gateway: everything here conflicts but RESERVE, which the store
	 * decides, and RELEASE from a non-holder, which is GOOD and nothing */
	atomic_store(&lu->resv_holder, SCSI_RESV_REMOTE);
	t_run(e, a, L_PR, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, b, L_PR, rd10, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, a, L_PR, B(0x17, 0, 0, 0, 0, 0), 0, NULL, 0, &t); /* RELEASE(6) */
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(fake.release, 0);
	CHECK(atomic_load(&lu->resv_holder) == SCSI_RESV_REMOTE);
	t_run(e, a, L_PR, B(0x16, 0, 0, 0, 0, 0), 0, NULL, 0, &t); /* RESERVE(6) */
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(fake.reserve, 1);
	CHECK(fake.lu == lu);
	CHECK(atomic_load(&lu->resv_holder) == a);
	/* held here by a: b conflicts without asking the store, a again is GOOD at once */
	t_run(e, b, L_PR, B(0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t); /* RESERVE(10) */
	CHECK_EQ(t.c.status, 0x18);
	t_run(e, a, L_PR, B(0x16, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(fake.reserve, 1);
	/* RELEASE from b: nothing; from a: the store */
	t_run(e, b, L_PR, B(0x17, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(fake.release, 0);
	t_run(e, a, L_PR, B(0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t); /* RELEASE(10) */
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(fake.release, 1);
	/* b holds, then its nexus goes: the store hears of it */
	t_run(e, b, L_PR, B(0x16, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK(t.c.status == 0 && atomic_load(&lu->resv_holder) == b);
	bp = (uintptr_t)b;
	scsi_nexus_free(b);
	CHECK_EQ(fake.lost, 1);
	CHECK((uintptr_t)fake.lost_nx == bp); /* (compared only: freed by now) */
	CHECK(fake.lost_w.loop == NULL);     /* a freed nexus: nobody waits */
	CHECK(atomic_load(&lu->resv_holder) == NULL);
	/* a Logout's loss: the store is given the waiter, and the caller told to wait once; a
	 * nexus that holds nothing leaves nothing to wait for */
	b = nexus(e, "iqn.2024-01.org.example:b,i,0x000000000003");
	drain_ua(e, b, L_PR);
	t_run(e, b, L_PR, B(0x16, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK(t.c.status == 0 && atomic_load(&lu->resv_holder) == b);
	{
		int marker;
		struct scsi_lost_wait w = {(struct ev_loop *)&marker, fake_lost_done, &marker};

		CHECK_EQ(scsi_nexus_lost_wait(b, &w), 1);
		CHECK_EQ(fake.lost, 2);
		CHECK(fake.lost_nx == b);
		CHECK(fake.lost_w.loop == w.loop && fake.lost_w.done == fake_lost_done &&
		      fake.lost_w.arg == &marker);
		CHECK(atomic_load(&lu->resv_holder) == NULL);
		CHECK_EQ(scsi_nexus_lost_wait(b, &w), 0); /* released already */
		CHECK_EQ(scsi_nexus_lost_wait(a, &w), 0); /* never held */
		CHECK_EQ(fake.lost, 2);
	}
	scsi_nexus_free(b);
	CHECK_EQ(fake.lost, 2);
	lu->pr_ops = NULL;
}

/* ---- APTPL ---- */

static void test_aptpl(struct env *e)
{
	struct scsi_nexus *a = e->nx;
	struct scsi_lu_cfg cfg = {.backend = BS_TYPE_RAM, .size_bytes = 1 << 20};
	char path[160], err[512] = "";
	struct tcmd t;
	struct scsi_lun_map *saved = e->map;

	printf("# APTPL\n");
	strcpy(state_dir, "/tmp/ix-aptpl-XXXXXX");
	CHECK(mkdtemp(state_dir) != NULL);
	cfg.state_dir = state_dir;
	snprintf(path, sizeof(path), "%s/iqn.2024-01.org.example:t1.lun%u.pr", state_dir, L_APTPL);
	CHECK_EQ(add_lu(e, L_APTPL, cfg, err, sizeof(err)), 0);
	drain_ua(e, a, L_APTPL);
	prin(e, a, L_APTPL, 2, 8, &t);
	CHECK_EQ(t.c.buf[2], 0x11); /* CRH, PTPL_C */
	CHECK_EQ(t.c.buf[3], 0x80); /* PTPL_A 0 */
	/* without APTPL nothing is written */
	prout(e, a, L_APTPL, 6, 0, 0, 0x55, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK(access(path, F_OK) < 0);
	/* with it, the state is on disk before GOOD */
	prout(e, a, L_APTPL, 0, 0, 0x55, 0x56, 0x01, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(access(path, F_OK), 0);
	prout(e, a, L_APTPL, 1, 5, 0x56, 0, 0, &t);
	CHECK_EQ(t.c.status, 0);
	prin(e, a, L_APTPL, 2, 8, &t);
	CHECK_EQ(t.c.buf[3], 0x81); /* PTPL_A */

	/* "power loss": a new LU (a new map) from the same configuration */
	e->map = scsi_lun_map_new();
	CHECK_EQ(add_lu(e, L_APTPL, cfg, err, sizeof(err)), 0);
	{
		struct scsi_nexus *a2 = scsi_nexus_new(e->map, a->initiator_port, a->target_port);
		struct scsi_nexus *c = nexus(e, "iqn.2024-01.org.example:c,i,0x000000000003");

		drain_ua(e, a2, L_APTPL);
		drain_ua(e, c, L_APTPL);
		prin(e, a2, L_APTPL, 1, 24, &t);
		CHECK_EQ(t.c.status, 0);
		CHECK_EQ(get_be32(t.c.buf), 2); /* PRGENERATION: two registrations */
		CHECK_EQ(get_be64(t.c.buf + 8), 0x56);
		CHECK_EQ(t.c.buf[21], 5);
		/* and it is enforced at once */
		t_run(e, c, L_APTPL, wr10, 0, zblk, 512, &t);
		CHECK_EQ(t.c.status, 0x18);
		t_run(e, a2, L_APTPL, wr10, 0, zblk, 512, &t);
		CHECK_EQ(t.c.status, 0);
		/* the state dir vanishes: the change is refused and nothing changes */
		{
			char tmp[96];

			snprintf(tmp, sizeof(tmp), "%s.moved", state_dir);
			CHECK_EQ(rename(state_dir, tmp), 0);
			prout(e, a2, L_APTPL, 2, 5, 0x56, 0, 0, &t);
			t_check_sense(&t, 0x4, 0x44, 0x00);
			t_run(e, c, L_APTPL, wr10, 0, zblk, 512, &t);
			CHECK_EQ(t.c.status, 0x18);
			CHECK_EQ(rename(tmp, state_dir), 0);
		}
		/* APTPL off: the file goes */
		prout(e, a2, L_APTPL, 0, 0, 0x56, 0x56, 0x00, &t);
		CHECK_EQ(t.c.status, 0);
		CHECK(access(path, F_OK) < 0);
		scsi_nexus_free(c);
		scsi_nexus_free(a2);
	}
	scsi_lun_map_free(e->map);

	/* a damaged file: the LU refuses to start and says which file and line */
	{
		FILE *f = fopen(path, "w");

		fputs("ix-pr-state 1\ngeneration 1\naptpl 1\ntype 0\nreg zz 0 a,i,0x1 t,t,0x1\n",
		      f);
		fclose(f);
		e->map = scsi_lun_map_new();
		err[0] = 0;
		CHECK_EQ(add_lu(e, L_APTPL, cfg, err, sizeof(err)), -EINVAL);
		printf("# %s\n", err);
		CHECK(strstr(err, path) != NULL);
		CHECK(strstr(err, "move the file away") != NULL);
		scsi_lun_map_free(e->map);
		unlink(path);
	}
	/* a state_dir that is not a directory */
	cfg.state_dir = "/dev/null";
	e->map = scsi_lun_map_new();
	CHECK_EQ(add_lu(e, L_APTPL, cfg, err, sizeof(err)), -ENOTDIR);
	CHECK(strstr(err, "state_dir /dev/null") != NULL);
	scsi_lun_map_free(e->map);
	e->map = saved;
	rmdir(state_dir);
}

/* ---- removable medium ---- */

static void test_removable(struct env *e)
{
	struct scsi_nexus *a = e->nx, *b = nexus(e, "iqn.2024-01.org.example:b,i,0x000000000009");
	static const uint8_t eject[16] = {0x1b, 0, 0, 0, 0x02, 0},
			     load[16] = {0x1b, 0, 0, 0, 0x03, 0};
	static const uint8_t prevent[16] = {0x1e, 0, 0, 0, 1, 0}, allow[16] = {0x1e, 0, 0, 0, 0, 0};
	struct tcmd t;

	printf("# removable medium\n");
	drain_ua(e, a, L_RM);
	drain_ua(e, a, L_THIN);
	drain_ua(e, b, L_RM);
	t_run(e, a, L_RM, B(0x12, 0, 0, 0, 36, 0), 36, NULL, 0, &t);
	CHECK_EQ(t.c.buf[1], 0x80); /* RMB */
	t_run(e, a, L_THIN, B(0x12, 0, 0, 0, 36, 0), 36, NULL, 0, &t);
	CHECK_EQ(t.c.buf[1], 0x00);
	/* LOEJ on a fixed LU is an invalid field */
	t_run(e, a, L_THIN, eject, 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	/* power conditions and START without LOEJ change nothing */
	t_run(e, a, L_RM, B(0x1b, 0, 0, 0, 0x32, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_RM, B(0x1b, 0, 0, 0, 0x00, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_RM, B(0x00), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* eject: medium commands get NOT READY, MEDIUM NOT PRESENT; INQUIRY does not */
	t_run(e, a, L_RM, wr10, 0, zblk, 512, &t); /* something to find after the reload */
	t_run(e, a, L_RM, eject, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_RM, rd10, 512, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x3a, 0x00);
	t_run(e, a, L_RM, B(0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), 8, NULL, 0, &t);
	t_check_sense(&t, 0x2, 0x3a, 0x00);
	t_run(e, a, L_RM, B(0x03, 0, 0, 0, 18, 0), 18, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[2], 0x02);
	CHECK_EQ(t.c.buf[12], 0x3a);
	t_run(e, a, L_RM, eject, 0, NULL, 0, &t); /* ejecting nothing is fine */
	CHECK_EQ(t.c.status, 0);
	/* prevention by B stops A from loading, until B's nexus goes away; A's load looks again
	   for a while (SCSI_EJECT_WAIT_MS, 250 ms) before REMOVAL PREVENTED, so a nexus lost
	   meanwhile (a connection whose close its worker has not read yet) lets it through */
	t_run(e, b, L_RM, prevent, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	uint64_t t0 = ev_now_ms(e->loop);
	CHECK_EQ(t_run(e, a, L_RM, load, 0, NULL, 0, &t), 1);
	t_check_sense(&t, 0x5, 0x53, 0x02);
	uint64_t waited = ev_now_ms(e->loop) - t0;
	CHECK(waited >= 240 && waited < 2000);
	t_start(e, a, L_RM, load, 0, NULL, 0, &t);
	for (int i = 0; i < 3; i++)
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(t.ndone, 0); /* still waiting */
	scsi_nexus_lost(b);   /* B's nexus goes: its prevention with it */
	CHECK_EQ(t_wait(e, &t), 1);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_RM, B(0x00), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0); /* loaded */
	/* a waiting eject ends with TASK ABORTED when aborted */
	drain_ua(e, b, L_RM); /* the load told B the medium may have changed */
	t_run(e, b, L_RM, prevent, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_start(e, a, L_RM, eject, 0, NULL, 0, &t);
	ev_loop_run_once(e->loop, 5);
	CHECK_EQ(t.ndone, 0);
	CHECK(scsi_cmd_abort(&t.c));
	CHECK_EQ(t.ndone, 1);
	CHECK_EQ(t.c.status, 0x40);
	for (int i = 0; i < 30; i++) /* the timer is gone: done never fires twice */
		ev_loop_run_once(e->loop, 10);
	CHECK_EQ(t.ndone, 1);
	/* A's own prevention answers at once */
	t_run(e, b, L_RM, allow, 0, NULL, 0, &t);
	t_run(e, a, L_RM, prevent, 0, NULL, 0, &t);
	t0 = ev_now_ms(e->loop);
	t_run(e, a, L_RM, eject, 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x53, 0x02);
	CHECK(ev_now_ms(e->loop) - t0 < 200);
	t_run(e, a, L_RM, allow, 0, NULL, 0, &t);
	scsi_nexus_free(b);
	t_run(e, a, L_RM, load, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_RM, rd10, 512, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* a second nexus is told the medium may have changed */
	b = nexus(e, "iqn.2024-01.org.example:b,i,0x00000000000a");
	drain_ua(e, b, L_RM);
	t_run(e, a, L_RM, eject, 0, NULL, 0, &t);
	t_run(e, a, L_RM, load, 0, NULL, 0, &t);
	t_run(e, b, L_RM, B(0x00), 0, NULL, 0, &t);
	t_check_sense(&t, 0x6, 0x28, 0x00);
	t_run(e, a, L_RM, B(0x00), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0); /* not the nexus that loaded it */
	/* two preventers: removal stays prevented until both allow; LU reset clears all */
	t_run(e, a, L_RM, prevent, 0, NULL, 0, &t);
	t_run(e, b, L_RM, prevent, 0, NULL, 0, &t);
	t_run(e, b, L_RM, prevent, 0, NULL, 0, &t); /* twice counts once */
	t_run(e, a, L_RM, allow, 0, NULL, 0, &t);
	t_run(e, a, L_RM, eject, 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x53, 0x02);
	CHECK_EQ(scsi_lu_reset(scsi_lun_map_get(e->map, L_RM), a), 0);
	drain_ua(e, b, L_RM);
	t_run(e, b, L_RM, eject, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, b, L_RM, load, 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	scsi_nexus_free(b);
	drain_ua(e, a, L_RM);
}

/* ---- SANITIZE ---- */

static void test_sanitize(struct env *e)
{
	struct scsi_nexus *a = e->nx;
	uint8_t p[4 + 512 + 8] = {0};
	struct tcmd t;
	uint64_t nb = (1 << 20) / 512;

	printf("# SANITIZE\n");
	drain_ua(e, a, L_THIN);
	drain_ua(e, a, L_THICK);
	memset(p + 4, 0xa5, 512);
	/* OVERWRITE with a 2-byte pattern, two passes, inverted between them: the last pass
	 * writes the inverse (SBC-4 5.30.3) */
	t_run(e, a, L_THICK, wr10, 0, zblk, 512, &t);
	p[0] = 0x80 | 2;
	p[1] = 0;
	put_be16(p + 2, 2);
	p[4] = 0x12;
	p[5] = 0x34;
	t_run(e, a, L_THICK, B(0x48, 0x01, 0, 0, 0, 0, 0, 0, 6, 0), 0, p, 6, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_THICK, B(0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), 512, NULL, 0,
	      &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.buf[0], 0xed);
	CHECK_EQ(t.c.buf[511], 0xcb);
	/* parameter list checks: length, count, pattern length, TEST */
	t_run(e, a, L_THICK, B(0x48, 0x01, 0, 0, 0, 0, 0, 0, 4, 0), 0, p, 4, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, a, L_THICK, B(0x48, 0x01, 0, 0, 0, 0, 0, 0x02, 0x05, 0), 0, p, 517, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	p[0] = 0;
	t_run(e, a, L_THICK, B(0x48, 0x01, 0, 0, 0, 0, 0, 0, 6, 0), 0, p, 6, &t);
	t_check_sense(&t, 0x5, 0x26, 0x00);
	p[0] = 0x21;
	t_run(e, a, L_THICK, B(0x48, 0x01, 0, 0, 0, 0, 0, 0, 6, 0), 0, p, 6, &t);
	t_check_sense(&t, 0x5, 0x26, 0x00);
	p[0] = 1;
	put_be16(p + 2, 3);
	t_run(e, a, L_THICK, B(0x48, 0x01, 0, 0, 0, 0, 0, 0, 6, 0), 0, p, 6, &t);
	t_check_sense(&t, 0x5, 0x26, 0x00);
	/* BLOCK ERASE exists only on thin LUs; there it deallocates everything */
	t_run(e, a, L_THICK, B(0x48, 0x02, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, a, L_THIN, wr10, 0, p + 4, 512, &t);
	t_run(e, a, L_THIN, B(0x48, 0x02, 0, 0, 0, 0, 0, 0, 8, 0), 0, zblk, 8, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00); /* no parameter list for it */
	t_run(e, a, L_THIN, B(0x48, 0x02, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_THIN, B(0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0), 24, NULL, 0,
	      &t);
	CHECK_EQ(get_be32(t.c.buf + 16), nb);
	CHECK_EQ(t.c.buf[20], 0x01); /* deallocated */
	t_run(e, a, L_THIN, rd10, 512, NULL, 0, &t);
	CHECK_MEM(t.c.buf, zblk, 512);
	/* CRYPTOGRAPHIC ERASE on the thick LU writes zeros */
	t_run(e, a, L_THICK, B(0x48, 0x03, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	t_run(e, a, L_THICK, rd10, 512, NULL, 0, &t);
	CHECK_MEM(t.c.buf, zblk, 512);
	/* unknown service actions; EXIT FAILURE MODE without a failure */
	t_run(e, a, L_THICK, B(0x48, 0x04, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	t_run(e, a, L_THICK, B(0x48, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x2c, 0x00);
	/* IMMED: GOOD at once, then SANITIZE IN PROGRESS with progress in REQUEST SENSE, and
	 * INQUIRY still works. A slow (rate limited) LU keeps it going long enough to see. */
	{
		struct scsi_lu *lu = scsi_lun_map_get(e->map, L_THICK);
		struct tcmd san;

		lu->sanitize_rate = 1 << 20; /* 1 MiB/s over 1 MiB: about a second */
		p[0] = 1;
		put_be16(p + 2, 1);
		t_run(e, a, L_THICK, B(0x48, 0x81, 0, 0, 0, 0, 0, 0, 5, 0), 0, p, 5, &t);
		CHECK_EQ(t.c.status, 0);
		t_run(e, a, L_THICK, B(0x00), 0, NULL, 0, &t);
		t_check_sense(&t, 0x2, 0x04, 0x1b);
		t_run(e, a, L_THICK, B(0x12, 0, 0, 0, 36, 0), 36, NULL, 0, &t);
		CHECK_EQ(t.c.status, 0);
		t_run(e, a, L_THICK, B(0x03, 0, 0, 0, 18, 0), 18, NULL, 0, &t);
		CHECK_EQ(t.c.status, 0);
		CHECK_EQ(t.c.buf[2], 0x02);
		CHECK_EQ(t.c.buf[12], 0x04);
		CHECK_EQ(t.c.buf[13], 0x1b);
		CHECK_EQ(t.c.buf[15], 0x80); /* SKSV: progress indication */
		/* a second SANITIZE waits its turn like everything else */
		t_run(e, a, L_THICK, B(0x48, 0x03, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
		t_check_sense(&t, 0x2, 0x04, 0x1b);
		while (atomic_load(&lu->mstate) & SCSI_MS_SANITIZE)
			ev_loop_run_once(e->loop, 50);
		/* without IMMED the command waits; abort ends the command, not the sanitize */
		memset(&san, 0, sizeof(san));
		memcpy(san.cdb, B(0x48, 0x01, 0, 0, 0, 0, 0, 0, 5, 0), 10);
		san.c = (struct scsi_cmd){.thread = e->thr,
					  .map = e->map,
					  .nexus = a,
					  .lun_field = scsi_lun_encode(L_THICK),
					  .cdb = san.cdb,
					  .cdb_len = 16,
					  .buf = p,
					  .buf_len = sizeof(p),
					  .data_out_len = 5,
					  .done = t_done,
					  .priv = &san};
		scsi_cmd_exec(&san.c);
		CHECK_EQ(san.ndone, 0);
		ev_loop_run_once(e->loop, 10);
		CHECK_EQ(san.ndone, 0);
		CHECK(scsi_cmd_abort(&san.c));
		CHECK_EQ(san.ndone, 1);
		CHECK_EQ(san.c.status, 0x40);	/* TASK ABORTED */
		CHECK(!scsi_cmd_abort(&san.c)); /* once */
		t_run(e, a, L_THICK, B(0x00), 0, NULL, 0, &t);
		t_check_sense(&t, 0x2, 0x04, 0x1b);
		while (atomic_load(&lu->mstate) & SCSI_MS_SANITIZE)
			ev_loop_run_once(e->loop, 50);
		t_run(e, a, L_THICK, B(0x00), 0, NULL, 0, &t);
		CHECK_EQ(t.c.status, 0);
		lu->sanitize_rate = 0;
	}
	/* SWP: SANITIZE and writes are refused as software write protected */
	{
		uint8_t ms[4 + 12] = {0,    0,	  0, 0, 0x0a, 0x0a, 0x02, 0x10,
				      0x08, 0x40, 0, 0, 0xff, 0xff, 0,	  0};

		t_run(e, a, L_THICK, B(0x15, 0x10, 0, 0, sizeof(ms), 0), 0, ms, sizeof(ms), &t);
		CHECK_EQ(t.c.status, 0);
		t_run(e, a, L_THICK, B(0x1a, 0x08, 0x0a, 0, 255, 0), 255, NULL, 0, &t);
		CHECK_EQ(t.c.buf[2], 0x90); /* WP */
		t_run(e, a, L_THICK, wr10, 0, zblk, 512, &t);
		t_check_sense(&t, 0x7, 0x27, 0x02);
		t_run(e, a, L_THICK, B(0x48, 0x03, 0, 0, 0, 0, 0, 0, 0, 0), 0, NULL, 0, &t);
		t_check_sense(&t, 0x7, 0x27, 0x02);
		ms[8] = 0;
		t_run(e, a, L_THICK, B(0x15, 0x10, 0, 0, sizeof(ms), 0), 0, ms, sizeof(ms), &t);
		CHECK_EQ(t.c.status, 0);
		t_run(e, a, L_THICK, wr10, 0, zblk, 512, &t);
		CHECK_EQ(t.c.status, 0);
	}
}

/* ---- READ DEFECT DATA, RSOC ---- */

static void test_misc(struct env *e)
{
	struct tcmd t;
	static const struct {
		uint8_t op, sa;
		bool on_thick;
	} listed[] = {
	    {0x5e, 0, true},  {0x5e, 3, true}, {0x5f, 0, true},	   {0x5f, 7, true}, {0x48, 1, true},
	    {0x48, 2, false}, {0x48, 3, true}, {0x48, 0x1f, true}, {0x37, 0, true}, {0xb7, 0, true},
	};

	printf("# READ DEFECT DATA, RSOC\n");
	t_run(e, e->nx, L_THICK, B(0x37, 0, 0x18, 0, 0, 0, 0, 0, 32, 0), 32, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 4);
	CHECK_MEM(t.c.buf, B(0, 0x18, 0, 0), 4);
	t_run(e, e->nx, L_THICK, B(0xb7, 0x0d, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0), 32, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK_EQ(t.c.data_in_len, 8);
	CHECK_MEM(t.c.buf, B(0, 0x0d, 0, 0, 0, 0, 0, 0), 8);
	t_run(e, e->nx, L_THICK, B(0x37, 0, 0x07, 0, 0, 0, 0, 0, 32, 0), 32, NULL, 0, &t);
	t_check_sense(&t, 0x5, 0x24, 0x00);
	for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
		bool sa = listed[i].op != 0x37 && listed[i].op != 0xb7;

		for (int thin = 0; thin < 2; thin++) {
			t_run(e, e->nx, thin ? L_THIN : L_THICK,
			      B(0xa3, 0x0c, sa ? 0x02 : 0x01, listed[i].op, 0, listed[i].sa, 0, 0,
				0, 64, 0, 0),
			      64, NULL, 0, &t);
			CHECK_EQ(t.c.status, 0);
			CHECK_EQ(t.c.buf[1] & 0x07, thin || listed[i].on_thick ? 3 : 1);
		}
	}
}

/* ---- LUN masking (scsi_nexus_set_view) and options changed online ---- */

static int report_luns(struct env *e, struct scsi_nexus *nx, uint32_t *luns, int max)
{
	struct tcmd t;
	int n;

	t_run(e, nx, 0, B(0xa0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0), 1024, NULL, 0, &t);
	if (t.c.status != 0)
		return -1;
	n = (int)(get_be32(t.c.data_in) / 8);
	for (int i = 0; i < n && i < max; i++)
		luns[i] = scsi_lun_decode(get_be64(t.c.data_in + 8 + 8 * i));
	return n;
}

static void test_view(struct env *e)
{
	struct scsi_nexus *nx = nexus(e, "iqn.2024-01.org.example:iv,i,0x000000000009");
	uint16_t view[SCSI_MAX_LUNS] = {0};
	uint32_t l[8];
	struct tcmd t;

	printf("# LUN masking: a nexus sees its view\n");
	view[0] = L_THICK + 1; /* LUN 0 shows the map's LUN L_THICK */
	view[5] = L_RM + 1;
	CHECK_EQ(scsi_nexus_set_view(nx, view), 1);
	CHECK_EQ(scsi_nexus_set_view(nx, view), 0);
	CHECK_EQ(report_luns(e, nx, l, 8), 2);
	CHECK(l[0] == 0 && l[1] == 5);
	CHECK_EQ(scsi_nexus_map_lun(nx, 5), L_RM);
	CHECK_EQ(scsi_nexus_map_lun(nx, 1), UINT32_MAX);
	t_run(e, nx, 1, B(0x00), 0, NULL, 0, &t);
	t_check_sense(&t, 5, 0x25, 0x00); /* hidden: LOGICAL UNIT NOT SUPPORTED */
	drain_ua(e, nx, 0);
	t_run(e, nx, 0, B(0x00), 0, NULL, 0, &t);
	CHECK_EQ(t.c.status, 0);
	/* LUN 0 keeps its LU, LUN 5 goes: 0 gets 3F/0E */
	view[5] = 0;
	CHECK_EQ(scsi_nexus_set_view(nx, view), 1);
	t_run(e, nx, 0, B(0x00), 0, NULL, 0, &t);
	t_check_sense(&t, 6, 0x3f, 0x0e);
	CHECK_EQ(report_luns(e, nx, l, 8), 1);
	/* LUN 0 now names another LU: its next command attaches it (power on, 29/00) */
	view[0] = L_THIN + 1;
	CHECK_EQ(scsi_nexus_set_view(nx, view), 1);
	t_run(e, nx, 0, B(0x00), 0, NULL, 0, &t);
	t_check_sense(&t, 6, 0x29, 0x00);
	CHECK_EQ(scsi_nexus_set_view(nx, NULL), 1); /* the whole map again */
	CHECK_EQ(report_luns(e, nx, l, 8), report_luns(e, e->nx, l, 8));
	CHECK(report_luns(e, nx, l, 8) >= 4);
	scsi_nexus_free(nx);
}

static void test_options(struct env *e)
{
	struct scsi_lu *lu = scsi_lun_map_get(e->map, L_THICK);
	struct tcmd t;

	printf("# write cache and readonly changed online\n");
	drain_ua(e, e->nx, L_THICK);
	CHECK_EQ(scsi_lu_set_options(lu, 1, -1), 0);
	t_run(e, e->nx, L_THICK, B(0x00), 0, NULL, 0, &t);
	t_check_sense(&t, 6, 0x2a, 0x01); /* MODE PARAMETERS CHANGED */
	t_run(e, e->nx, L_THICK, B(0x1a, 0x08, 0x08, 0, 64, 0), 64, NULL, 0, &t);
	CHECK(t.c.status == 0 && (t.c.data_in[4 + t.c.data_in[3] + 2] & 0x04));
	CHECK_EQ(scsi_lu_set_options(lu, 1, -1), 0); /* no change: no unit attention */
	CHECK_EQ(scsi_lu_set_options(lu, -1, 1), 0);
	t_run(e, e->nx, L_THICK, wr10, 0, zblk, 512, &t);
	t_check_sense(&t, 6, 0x2a, 0x01);
	t_run(e, e->nx, L_THICK, wr10, 0, zblk, 512, &t);
	t_check_sense(&t, 7, 0x27, 0x00); /* WRITE PROTECTED */
	CHECK_EQ(scsi_lu_set_options(lu, 0, 0), 0);
	drain_ua(e, e->nx, L_THICK);
	t_run(e, e->nx, L_THICK, wr10, 0, zblk, 512, &t);
	CHECK_EQ(t.c.status, 0);
	CHECK(scsi_lu_writable(lu));
}

int main(void)
{
	struct env e;
	char err[256] = "";

	memset(&e, 0, sizeof(e)); /* map_ok and anything the harness grows start false */
	e.loop = ev_loop_new();
	ctx_ix = scsi_lu_index_new();
	e.thr = scsi_thread_new(e.loop, ctx_ix);
	e.map = scsi_lun_map_new();
	e.buf = aligned_alloc(4096, TBUF);
	CHECK_EQ(add_lu(&e, L_PR,
			(struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 1 << 20},
			err, sizeof(err)),
		 0);
	CHECK_EQ(add_lu(&e, L_RM,
			(struct scsi_lu_cfg){
			    .backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .removable = true},
			err, sizeof(err)),
		 0);
	CHECK_EQ(add_lu(&e, L_THIN,
			(struct scsi_lu_cfg){
			    .backend = BS_TYPE_RAM, .size_bytes = 1 << 20, .thin = true},
			err, sizeof(err)),
		 0);
	CHECK_EQ(add_lu(&e, L_THICK,
			(struct scsi_lu_cfg){.backend = BS_TYPE_RAM, .size_bytes = 1 << 20},
			err, sizeof(err)),
		 0);
	e.nx = nexus(&e, "iqn.2024-01.org.example:i1,i,0x000000000001");
	test_pr_commands(&e);
	test_pr_ports(&e);
	test_preempt_abort(&e);
	test_spc2_shared(&e);
	test_aptpl(&e);
	test_removable(&e);
	test_sanitize(&e);
	test_misc(&e);
	test_view(&e);
	test_options(&e);
	scsi_nexus_free(e.nx);
	scsi_lun_map_free(e.map);
	scsi_thread_free(e.thr);
	scsi_lu_index_put(ctx_ix);
	ev_loop_free(e.loop);
	free(e.buf);
	return tap_done();
}
