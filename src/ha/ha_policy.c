/* The high-availability policy as pure functions (ha_policy.h has what each decides). */
#include "ha/ha_policy.h"

#include <errno.h>

#include "ha/ha_own.h"
#include "ha/ha_own_rec.h"
#include "scsi/scsi.h"

uint16_t ha_policy_owner_group(const struct scsi_alua_cfg *a, uint16_t port)
{
	const struct scsi_alua_group_cfg *own = NULL;

	for (unsigned i = 0; i < a->ngroups && !own; i++)
		for (unsigned j = 0; j < a->groups[i].nports; j++)
			if (a->groups[i].local && a->groups[i].ports[j] == port) {
				own = &a->groups[i];
				break;
			}
	if (!own || own->state == SCSI_ALUA_ACTIVE_OPTIMIZED ||
	    own->state == SCSI_ALUA_ACTIVE_NON_OPTIMIZED)
		return 0;
	for (unsigned i = 0; i < a->ngroups; i++)
		if (!a->groups[i].local && a->groups[i].state == SCSI_ALUA_ACTIVE_OPTIMIZED)
			return a->groups[i].id;
	return 0;
}

bool ha_policy_may_hand_over(int ask, uint64_t idle_ms, uint32_t window_ms)
{
	if (ask == HA_OWN_EXPLICIT)
		return true;
	return ask == HA_OWN_IMPLICIT && idle_ms >= window_ms / 2;
}

enum ha_take_step ha_policy_take_step(int mode, enum ha_answer a, bool moved)
{
	switch (a) {
	case HA_ANSWER_RELEASED:
		return HA_STEP_TAKE;
	case HA_ANSWER_REFUSED:
		return mode == HA_TAKE_HEAL ? HA_STEP_GIVE_UP : HA_STEP_REFUSED;
	case HA_ANSWER_ALIVE:
		return moved ? HA_STEP_AGAIN : HA_STEP_GIVE_UP;
	case HA_ANSWER_SILENT:
	default:
		return moved ? HA_STEP_AGAIN : HA_STEP_BREAK;
	}
}

enum ha_implicit ha_policy_implicit(uint32_t implicit_ms, bool standby, uint64_t now, uint64_t last,
				    uint64_t first)
{
	if (!implicit_ms || !standby)
		return HA_IMPLICIT_OFF;
	if (last == 0 || now - last > implicit_ms)
		return HA_IMPLICIT_START;
	if (now - first < implicit_ms)
		return HA_IMPLICIT_WAIT;
	return HA_IMPLICIT_ASK;
}

bool ha_policy_heal_due(uint64_t since, uint64_t now)
{
	return since && now - since >= HA_HEAL_MS;
}

enum ha_heal ha_policy_heal(int first_own)
{
	return first_own == HA_OWN_OWNER ? HA_HEAL_TAKE_OTHERS : HA_HEAL_ASK_FIRST;
}

int ha_policy_rejoin(int acquire_rc, int release_rc)
{
	if (acquire_rc == -ESHUTDOWN || release_rc == -ESHUTDOWN)
		return HA_OWN_FENCED;
	if (acquire_rc == 0 && release_rc < 0)
		return HA_OWN_OWNER;
	return HA_OWN_STANDBY;
}
