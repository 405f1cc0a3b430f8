/* Slow-path contexts: per-command state of the commands that wait in a range guard or run in
 * several steps (COMPARE AND WRITE, ORWRITE, WRITE ATOMIC, EXTENDED COPY). Each worker thread
 * keeps a few for reuse, so a steady stream of such commands allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi_int.h"

void scsi_slow_thread_init(struct scsi_thread *t)
{
	list_init(&t->slow_free);
	t->nslow_free = 0;
	/* Spread threads over the guards' fast-path counters. */
	t->gslot = (unsigned)(((uintptr_t)t >> 6) * 0x9e3779b1u >> 16) % SCSI_GUARD_SLOTS;
}

static void slow_free(struct scsi_slow *s)
{
	free(s->bounce);
	free(s);
}

void scsi_slow_thread_fini(struct scsi_thread *t)
{
	while (!list_empty(&t->slow_free)) {
		struct scsi_slow *s = list_first_entry(&t->slow_free, struct scsi_slow, link);

		list_del(&s->link);
		slow_free(s);
	}
	t->nslow_free = 0;
}

struct scsi_slow *scsi_slow_get(struct scsi_cmd *cmd)
{
	struct scsi_thread *t = cmd->thread;
	struct scsi_slow *s = NULL;
	uint8_t *bounce = NULL;

	if (t && !list_empty(&t->slow_free)) {
		s = list_first_entry(&t->slow_free, struct scsi_slow, link);
		list_del(&s->link);
		t->nslow_free--;
		bounce = s->bounce;
	} else {
		s = malloc(sizeof(*s));
		if (!s)
			return NULL;
	}
	memset(s, 0, sizeof(*s));
	list_init(&s->link);
	list_init(&s->ent.link);
	s->bounce = bounce;
	scsi_priv(cmd)->slow = s;
	return s;
}

uint8_t *scsi_slow_bounce(struct scsi_cmd *cmd)
{
	struct scsi_slow *s = scsi_priv(cmd)->slow;

	if (s && !s->bounce && posix_memalign((void **)&s->bounce, 4096, SCSI_BOUNCE_BYTES))
		s->bounce = NULL;
	return s ? s->bounce : NULL;
}

void scsi_slow_put(struct scsi_cmd *cmd)
{
	struct scsi_priv *p = scsi_priv(cmd);
	struct scsi_slow *s = p->slow;
	struct scsi_thread *t = cmd->thread;

	if (!s)
		return;
	p->slow = NULL;
	scsi_lu_put(s->src);
	scsi_lu_put(s->dst);
	if (t && t->nslow_free < SCSI_SLOW_POOL) {
		list_add(&s->link, &t->slow_free);
		t->nslow_free++;
		return;
	}
	slow_free(s);
}
