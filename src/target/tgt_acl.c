/* Per-ACL LUN masking (an ACL's "luns", docs/configuration.md): which LUNs of a target an
 * initiator sees and under which numbers. Each session's I_T nexus carries its view
 * (scsi_nexus_set_view), set at login from the configuration the login was checked against
 * and replaced on every reload: the session's worker installs the new view, and an I_T nexus
 * whose view changed gets REPORTED LUNS DATA HAS CHANGED (3F/0E) on the LUs it still uses. An
 * initiator whose ACL entry is gone keeps its session but sees no LUN (its next login is
 * refused).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "target/tgt_int.h"
#include "util/log.h"

int tgt_acl_view(const struct cfg_target *ct, const char *initiator, uint16_t *view)
{
	const struct cfg_acl *acl = ct ? cfg_find_acl(ct, initiator) : NULL;

	memset(view, 0, SCSI_MAX_LUNS * sizeof(*view));
	if (!acl)
		return 1; /* not (or no longer) allowed: sees nothing */
	if (!acl->masked)
		return 0;
	for (size_t i = 0; i < acl->nluns; i++)
		view[acl->luns[i].lun] = (uint16_t)(acl->luns[i].target_lun + 1);
	return 1;
}

int tgt_session_set_view(struct tgt_session *s, const struct cfg_target *ct)
{
	uint16_t view[SCSI_MAX_LUNS];
	int masked = tgt_acl_view(ct, s->initiator, view);

	return scsi_nexus_set_view(s->nexus, masked ? view : NULL);
}

struct view_msg {
	struct tgt_worker *w;
	struct tgt_session *s; /* compared, never dereferenced unless still live */
	uint16_t tsih;
	bool masked;
	uint16_t view[SCSI_MAX_LUNS];
};

static void view_msg_run(void *arg)
{
	struct view_msg *m = arg;
	struct tgt_session *s = tgt_worker_session(m->w, m->s, m->tsih);

	if (s && s->nexus && scsi_nexus_set_view(s->nexus, m->masked ? m->view : NULL) > 0)
		log_info("target", "session tsih %u of %s: LUN view changed", s->tsih,
			 s->initiator);
	free(m);
}

/* Under t->lock, after a reload installed the new configuration in the nodes. */
void tgt_acl_views_reload(struct ix_target *t)
{
	struct list_head *pos;

	list_for_each(pos, &t->sessions)
	{
		struct tgt_session *s = list_entry(pos, struct tgt_session, reg_link);
		struct view_msg *m;

		if (!s->node || s->node->removed || s->draining)
			continue;
		if (!(m = malloc(sizeof(*m)))) {
			log_warn("target", "reload: session tsih %u keeps its LUN view (no memory)",
				 s->tsih);
			continue;
		}
		m->w = s->worker;
		m->s = s;
		m->tsih = s->tsih;
		m->masked = tgt_acl_view(s->node->cfg, s->initiator, m->view) != 0;
		if (ev_loop_post(s->worker->loop, view_msg_run, m) < 0)
			free(m);
	}
}
