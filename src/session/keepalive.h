/* The NOP keepalive both roles run (RFC 7143 11.18, 11.19): a connection that has received
 * nothing for interval_ms is pinged; a ping with no answer within timeout_ms ends it. The
 * role owns the timer, sends the ping (target: NOP-In with a TTT; initiator: NOP-Out with an
 * ITT) and matches the answer; the decision on each timer expiry is written here once.
 */
#ifndef IX_SESSION_KEEPALIVE_H
#define IX_SESSION_KEEPALIVE_H

#include <stdbool.h>
#include <stdint.h>

enum keepalive_action {
	KEEPALIVE_WAIT, /* traffic arrived lately: run the timer again in *next_ms */
	KEEPALIVE_PING, /* send a ping now, run the timer again in *next_ms (the answer's deadline) */
	KEEPALIVE_DEAD, /* the last ping was not answered in time: end the connection */
};

/* On the keepalive timer. outstanding: a ping is still unanswered; last_rx_ms: when anything
 * was last received (same clock as now_ms). */
static inline enum keepalive_action keepalive_due(bool outstanding, uint64_t last_rx_ms,
						  uint64_t now_ms, uint32_t interval_ms,
						  uint32_t timeout_ms, uint32_t *next_ms)
{
	uint64_t idle = now_ms - last_rx_ms;

	if (outstanding)
		return KEEPALIVE_DEAD;
	if (idle < interval_ms) {
		*next_ms = (uint32_t)(interval_ms - idle);
		return KEEPALIVE_WAIT;
	}
	*next_ms = timeout_ms;
	return KEEPALIVE_PING;
}

#endif
