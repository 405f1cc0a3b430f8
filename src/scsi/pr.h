/* Persistent reservations (SPC-4 5.12, 6.15 PERSISTENT RESERVE IN, 6.16 PERSISTENT RESERVE OUT):
 * the state of one logical unit and the pure operations on it.
 *
 * Nothing here locks, logs or touches a file except pr_state_save()/pr_state_load() (pr_file.c).
 * The LU (pr_cmd.c) holds lu->lock around every call, applies an OUT command to a copy of its
 * state, saves the copy when APTPL is active, and only then swaps it in, so a failed save leaves
 * the LU as it was.
 *
 * An I_T nexus is named by its SPC-4 iSCSI port names: the initiator port
 * "<InitiatorName>,i,0x<ISID>" and the target port "<TargetName>,t,0x<TPGT>", compared
 * case-insensitively (iSCSI names are case-insensitive, ISIDs are hex). Registrations are per
 * I_T nexus and outlive the session (I_T nexus loss does not remove them).
 */
#ifndef IX_SCSI_PR_H
#define IX_SCSI_PR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reservation types (SPC-4 table 168). */
enum pr_type {
	PR_TYPE_NONE = 0,
	PR_WE = 1,    /* Write Exclusive */
	PR_EA = 3,    /* Exclusive Access */
	PR_WE_RO = 5, /* Write Exclusive, Registrants Only */
	PR_EA_RO = 6, /* Exclusive Access, Registrants Only */
	PR_WE_AR = 7, /* Write Exclusive, All Registrants */
	PR_EA_AR = 8, /* Exclusive Access, All Registrants */
};

/* PERSISTENT RESERVE OUT service actions. */
enum pr_out_sa {
	PR_OUT_REGISTER = 0,
	PR_OUT_RESERVE = 1,
	PR_OUT_RELEASE = 2,
	PR_OUT_CLEAR = 3,
	PR_OUT_PREEMPT = 4,
	PR_OUT_PREEMPT_ABORT = 5,
	PR_OUT_REGISTER_IGNORE = 6,
	PR_OUT_REGISTER_MOVE = 7,
};

/* PERSISTENT RESERVE IN service actions. */
enum pr_in_sa {
	PR_IN_READ_KEYS = 0,
	PR_IN_READ_RESERVATION = 1,
	PR_IN_REPORT_CAPABILITIES = 2,
	PR_IN_READ_FULL_STATUS = 3,
};

#define PR_MAX_REGS	128 /* more: INSUFFICIENT REGISTRATION RESOURCES */
#define PR_MAX_PORT_LEN 300 /* longest port name accepted (iSCSI names are <= 223 bytes) */

/* Per-nexus view, as cached in each I_T_L nexus for the data path. */
#define PR_F_REGISTERED 0x10
#define PR_F_HOLDER	0x20
#define PR_F_TYPE	0x0f /* the LU's reservation type, enum pr_type */

struct pr_nexus_id {
	const char *iport;
	const char *tport;
};

struct pr_reg {
	uint64_t key; /* never 0 */
	bool holder;  /* holds the reservation (non all-registrants types only) */
	char *iport;  /* owned */
	char *tport;  /* owned */
};

struct pr_state {
	uint32_t generation; /* PRGENERATION */
	bool aptpl;	     /* persist through power loss is active */
	uint8_t type;	     /* enum pr_type; PR_TYPE_NONE = not reserved */
	struct pr_reg *regs; /* nregs used of cap */
	size_t nregs, cap;
	/* The SPC-2 reservation (RESERVE(6)/(10)) as the shared store keeps it (src/ha/ha_pr.c):
	 * the holder's I_T nexus and the cluster client id of the gateway it was reserved
	 * through; spc2_iport NULL: none. (The file store holds it in lu->resv_holder only.) */
	char *spc2_iport, *spc2_tport; /* owned */
	uint64_t spc2_gid;
};

/* Results of pr_out_apply(), mapped to status/sense by the caller. */
enum pr_result {
	PR_OK = 0,
	PR_CONFLICT,	 /* RESERVATION CONFLICT */
	PR_BAD_PARAM,	 /* ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST (26/00) */
	PR_BAD_RELEASE,	 /* ILLEGAL REQUEST, INVALID RELEASE OF PERSISTENT RESERVATION (26/04) */
	PR_NO_RESOURCES, /* ILLEGAL REQUEST, INSUFFICIENT REGISTRATION RESOURCES (55/04) */
	PR_NOMEM,	 /* out of memory: the state is unchanged */
};

/* One PERSISTENT RESERVE OUT request, decoded and checked for CDB and parameter list format. */
struct pr_out {
	uint8_t sa;		 /* enum pr_out_sa */
	uint8_t type;		 /* TYPE (RESERVE, RELEASE, PREEMPT*: already checked valid) */
	uint64_t key;		 /* RESERVATION KEY */
	uint64_t sakey;		 /* SERVICE ACTION RESERVATION KEY */
	bool aptpl;		 /* APTPL (REGISTER*, REGISTER AND MOVE) */
	bool unreg;		 /* UNREG (REGISTER AND MOVE) */
	struct pr_nexus_id move; /* REGISTER AND MOVE destination */
};

/* A unit attention the caller must establish for one I_T nexus. */
struct pr_ua {
	char *iport, *tport; /* owned */
	uint8_t asc, ascq;
};

struct pr_effects {
	bool changed; /* the state differs (save it when APTPL is or was active) */
	struct pr_ua *ua;
	size_t nua, cap;
	/* PREEMPT AND ABORT: the I_T nexuses whose tasks are to be aborted (those whose
	 * registrations it removed); asc and ascq are unused */
	struct pr_ua *abort;
	size_t nabort, abort_cap;
};

void pr_state_init(struct pr_state *st);
void pr_state_clear(struct pr_state *st); /* frees everything; back to the init state */
/* Deep copy into dst (initialised or cleared). 0 or -ENOMEM (dst then cleared). */
int pr_state_copy(struct pr_state *dst, const struct pr_state *src);
void pr_effects_clear(struct pr_effects *fx);
/* Set (copies) or, with iport NULL, clear the SPC-2 reservation holder. 0 or -ENOMEM (then
 * cleared). */
int pr_state_set_spc2(struct pr_state *st, const char *iport, const char *tport, uint64_t gid);
/* Is the SPC-2 reservation held by this I_T nexus? */
bool pr_spc2_is(const struct pr_state *st, const struct pr_nexus_id *who);
/* Append a unit attention for the nexus (iport, tport) (copied). 0 or -ENOMEM. */
int pr_effects_add_ua(struct pr_effects *fx, const char *iport, const char *tport, uint8_t asc,
		      uint8_t ascq);
/* The unit attentions a change from old to next established for the registrants, for a
 * holder of old that missed how it came about (a gateway that reads a state it was not told
 * of: cut from the cluster, fenced, its watch lost): REGISTRATIONS PREEMPTED (2A/05) to each
 * registration of old that next lacks (RESERVATIONS PREEMPTED, 2A/03, when none is left: a
 * CLEAR); RESERVATIONS RELEASED (2A/04) to the remaining ones when the reservation's type
 * changed, or a registrants-only or all-registrants one is gone. Appended to fx; 0 or
 * -ENOMEM. */
int pr_missed_effects(const struct pr_state *old, const struct pr_state *next,
		      struct pr_effects *fx);
/* Append a nexus whose tasks are to be aborted (copied). 0 or -ENOMEM. */
int pr_effects_add_abort(struct pr_effects *fx, const char *iport, const char *tport);

/* Text helpers of the two stored forms (pr_file.c's state file, and the shared store's object:
 * src/ha/ha_pr_obj.c). */
struct pr_text {
	char *p; /* NULL to start; the caller frees it */
	size_t n, cap;
	bool oom; /* an allocation failed: the text is incomplete */
};
void pr_text_printf(struct pr_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A whole string as a number of the base (10 or 16; it must start with a digit of it), at
 * most max. 0 or -1. */
int pr_parse_u64(const char *s, int base, uint64_t max, uint64_t *out);

bool pr_type_valid(unsigned type);
bool pr_type_all_registrants(unsigned type);
/* Index of the registration of this I_T nexus, or -1. */
int pr_find(const struct pr_state *st, const struct pr_nexus_id *who);
/* PR_F_* flags for one I_T nexus (type in the low nibble). */
uint8_t pr_nexus_flags(const struct pr_state *st, const struct pr_nexus_id *who);
/* Does this I_T nexus hold the reservation (every registrant does for all-registrants types)? */
bool pr_is_holder(const struct pr_state *st, const struct pr_nexus_id *who);

/* Apply one PERSISTENT RESERVE OUT from `who`. On PR_OK, fx lists what changed and the unit
 * attentions to establish; on any other result st is unchanged and fx is empty. */
enum pr_result pr_out_apply(struct pr_state *st, const struct pr_nexus_id *who,
			    const struct pr_out *req, struct pr_effects *fx);

/* The PR conflict table (SPC-4 5.12.1, table 52/53 and SBC-3 table 13) for one command from an
 * I_T nexus with flags `f` (pr_nexus_flags()). read_class: the command only reads (conflicts
 * only under the exclusive access types); otherwise it is treated as writing. */
bool pr_conflict(uint8_t f, bool read_class);

/* PERSISTENT RESERVE IN parameter data. Each writes at most cap bytes into out and returns the
 * full length of the data (the caller truncates to the allocation length). */
uint32_t pr_in_read_keys(const struct pr_state *st, uint8_t *out, uint32_t cap);
uint32_t pr_in_read_reservation(const struct pr_state *st, uint8_t *out, uint32_t cap);
uint32_t pr_in_report_caps(const struct pr_state *st, bool ptpl_c, uint8_t *out, uint32_t cap);
uint32_t pr_in_read_full_status(const struct pr_state *st, uint8_t *out, uint32_t cap);

/* The RELATIVE TARGET PORT IDENTIFIER of a target port name "<TargetName>,t,0x<TPGT>": the
 * TPGT, or 1 when it is 0 or the name has another form (relative port 0 is reserved). */
uint16_t pr_tport_rtpi(const char *tport);

/* Parse an iSCSI TransportID (SPC-4 7.6.4.6, format 01b: name and ISID) into an initiator port
 * name "<name>,i,0x<isid>" (lower-case ISID) in port (PR_MAX_PORT_LEN bytes). Returns its length
 * in bytes (>= 24), or 0 if it is not a well-formed iSCSI TransportID of format 01b. */
uint32_t pr_parse_transport_id(const uint8_t *tid, uint32_t len, char *port);

/* pr_file.c: APTPL state on disk. save writes path.tmp, fsyncs it, renames it over path and
 * fsyncs the directory. load returns 0 (st filled), -ENOENT (no file: st empty), or -EINVAL /
 * -errno with a message naming the file and the line in err. */
int pr_state_save(const struct pr_state *st, const char *path, char *err, size_t errlen);
int pr_state_load(struct pr_state *st, const char *path, char *err, size_t errlen);
/* Remove the file (APTPL turned off); a missing file is fine. */
int pr_state_remove(const char *path, char *err, size_t errlen);

/* Checks shared by the decoders of saved state. A port name field: printable, no blanks,
 * "<name>,i,0x<hex>" (initiator) or "<name>,t,0x<hex>" (target). */
bool pr_port_name_ok(const char *s, bool initiator);
/* NULL if the holders fit the reservation type, else what is wrong. */
const char *pr_state_inconsistent(const struct pr_state *st);
/* Append a registration (not a holder): 0, -ENOSPC (PR_MAX_REGS) or -ENOMEM. */
int pr_state_add_reg(struct pr_state *st, uint64_t key, const struct pr_nexus_id *who);

#endif
