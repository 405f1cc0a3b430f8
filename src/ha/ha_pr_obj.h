/* The persistent reservation store shared by gateways (ha_pr.c): its RADOS object's format,
 * pure (ha_ha_pr_obj.c: no librados, so unit tests and the fuzz harness use it as is). */
#ifndef IX_HA_PR_OBJ_H
#define IX_HA_PR_OBJ_H

#include <stddef.h>
#include <stdint.h>

#include "scsi/pr.h"

/* The state as one RADOS object shared by gateways (format at the top of ha_ha_pr_obj.c).
 * encode: the state, its epoch and write sequence number and, for a notify payload, the unit
 * attentions (fx NULL or empty for the object itself) into a malloc'ed buffer; 0 or -ENOMEM.
 * decode: 0 with st, v (and fx when not NULL: "ua" lines are then accepted) filled, or -EINVAL with
 * what is wrong in err (st, fx empty), or -ENOMEM. */
#define HA_PR_OBJ_MAX (256u << 10)
/* Which state of the object: epoch is random, chosen when the object is created (a removed
 * and recreated object starts a new one), seq counts the writes within the epoch. */
struct ha_pr_obj_ver {
	uint64_t epoch, seq;
};
int ha_pr_obj_encode(const struct pr_state *st, const struct ha_pr_obj_ver *v,
		     const struct pr_effects *fx, char **out, size_t *len);
int ha_pr_obj_decode(const void *buf, size_t len, struct pr_state *st, struct ha_pr_obj_ver *v,
		     struct pr_effects *fx, char *err, size_t errlen);
/* The first address of a rados_getaddrs() string as rados_blocklist_add() takes it
 * ("IP:PORT/NONCE"): 0, or -EINVAL if there is none. */
int ha_pr_client_addr(const char *addrs, char *out, size_t outlen);

#endif
