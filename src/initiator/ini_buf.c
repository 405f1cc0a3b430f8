/* Command buffers registered with the transport once per connection (ix_session_buf_alloc,
 * include/ix/initiator.h): the iSER datamover advertises their STags without registering per
 * I/O. The areas are set-up time allocations; nothing here runs per command. */
#include <errno.h>
#include <stdlib.h>

#include "initiator/ini_int.h"
#include "util/log.h"

struct ini_buf {
	struct list_head link;          /* ix_session.bufs */
	void *base;
	size_t size;
};

/* Register one area with the session's connection, if it is in full feature phase and its
 * transport registers memory. A failure is logged: the area still works, per command. */
static void buf_register(struct ix_session *s, struct ini_buf *b)
{
	struct iscsi_conn *c = s->conn;
	int r;

	if (!c || !c->dm->mem_register || c->state != ISCSI_CONN_LOGGED_IN)
		return;
	r = c->dm->mem_register(c, b->base, b->size);
	if (r < 0)
		log_warn("initiator", "%s: cannot register a %zu-byte I/O buffer area (%d): its "
				      "commands register their buffers one by one",
			 c->peer, b->size, r);
}

void ini_bufs_register(struct ix_session *s)
{
	struct list_head *pos;

	for (pos = s->bufs.next; pos != &s->bufs; pos = pos->next)
		buf_register(s, list_entry(pos, struct ini_buf, link));
}

void ini_bufs_free(struct ix_session *s)
{
	while (!list_empty(&s->bufs)) {
		struct ini_buf *b = list_first_entry(&s->bufs, struct ini_buf, link);

		list_del(&b->link);
		free(b->base);
		free(b);
	}
}

void *ix_session_buf_alloc(struct ix_session *s, size_t size)
{
	struct ini_buf *b;
	void *mem = NULL;
	size_t rounded;

	if (!s || !size || size > SIZE_MAX - 4095)
		return NULL;
	rounded = (size + 4095) & ~(size_t)4095;
	b = calloc(1, sizeof(*b));
	/* posix_memalign: C11 aligned_alloc wants the size to be a multiple of the alignment */
	if (!b || posix_memalign(&mem, 4096, rounded) != 0) {
		free(b);
		return NULL;
	}
	b->base = mem;
	b->size = rounded;
	list_add_tail(&b->link, &s->bufs);
	buf_register(s, b);
	return mem;
}

void ix_session_buf_free(struct ix_session *s, void *buf)
{
	struct list_head *pos;

	if (!s || !buf)
		return;
	for (pos = s->bufs.next; pos != &s->bufs; pos = pos->next) {
		struct ini_buf *b = list_entry(pos, struct ini_buf, link);

		if (b->base != buf)
			continue;
		if (s->conn && s->conn->dm->buf_free)
			s->conn->dm->buf_free(s->conn, b->base);
		list_del(&b->link);
		free(b->base);
		free(b);
		return;
	}
	log_warn("initiator", "ix_session_buf_free: %p is not an area of this session", buf);
}
