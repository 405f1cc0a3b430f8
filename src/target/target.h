/* The target role: portals, targets, LUNs, worker threads, the session registry, and the
 * iSCSI handling of each connection (login through logout). Built from a struct ix_config.
 *
 * Threads: the thread that calls ix_target_run() owns the listeners and signal handling; each
 * worker thread runs one event loop and owns the connections (and their sessions and tasks)
 * handed to it. The session registry is the only structure shared between workers; it is
 * touched at login and session end only, under a mutex, never on the data path.
 */
#ifndef IX_TARGET_TARGET_H
#define IX_TARGET_TARGET_H

#include <stdint.h>

#include "target/config.h"

struct ix_target;

/* Build LUs and listeners (nothing is served until ix_target_run). On failure returns -errno
 * with a message in err. Takes ownership of cfg. */
int ix_target_new(struct ix_config *cfg, struct ix_target **out, char *err, size_t errlen);
/* Serve until ix_target_stop(). Returns 0 or -errno. */
int ix_target_run(struct ix_target *t);
/* Thread- and signal-safe. */
void ix_target_stop(struct ix_target *t);
/* Apply a new configuration (takes ownership on success; on failure nothing changed and the
 * caller keeps cfg). Targets and ACLs added, changed or removed take effect for new logins;
 * sessions of removed targets are asked to log out and dropped after
 * global.logout_timeout_ms; LUNs added to or removed from a kept target take effect at once.
 * Details in tgt_reload.c. Call on the thread that runs ix_target_run(). */
int ix_target_reload(struct ix_target *t, struct ix_config *cfg, char *err, size_t errlen);
void ix_target_free(struct ix_target *t);

/* The main loop (for tools that add their own watches, e.g. signalfd). */
struct ev_loop *ix_target_main_loop(struct ix_target *t);

#endif
