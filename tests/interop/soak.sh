#!/bin/bash
# Soak (issue acceptance: "32 sessions x QD32 mixed verified I/O for 5 minutes in CI, 0
# errors"): ix-bench with 32 sessions at QD 32, 4 KiB random reads and writes (50 %), every
# block checkable (--verify: each read checked, everything written re-read at the end), for
# IX_SOAK_TIME (default 30s, ix-bench's duration syntax: 30s, 5m, 1h; the acceptance's 5-minute
# form: IX_SOAK_TIME=5m tests/run.sh --filter soak, docs/testing.md) against ix-target (in the
# suite: the ASan build). Must end with 0 errors and 0 miscompares, with real work done
# (IX_SOAK_MIN_IOS commands each way, default 1000 per minute of the run).
# Before it, a verified warm-up (a sequential fill of the LUN, then 20 s of the same mix)
# brings the RAM LUN's pages, the daemon's buffer caches and the allocator to their working
# size; the daemon's descriptors must come back to exactly their number after the warm-up, and
# its RSS may grow by at most IX_SOAK_RSS_KB (default 16384 KiB; ASan's quarantine of freed
# memory is limited to 16 MiB here so that the bound means something).
# ix only (reads /proc of the daemon it starts); exits 77 against other peers.
. "$(dirname "$0")/../lib/common.sh"

ixt_init soak
IXB=$IX_BUILD/tools/ix-bench
[ -x "$IXB" ] || ixt_skip "ix-bench not built at $IXB"
[ "$IX_PEER" = ix ] || ixt_skip "measures ix-target's descriptors and RSS (peer is $IX_PEER)"
SOAK_TIME=${IX_SOAK_TIME:-30s}
RSS_BOUND_KB=${IX_SOAK_RSS_KB:-16384}
SESSIONS=32
QD=32
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16"
PEER_SIZE=256
peer_start

secs=$(python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)(ms|s|m|h)?", sys.argv[1])
if not m:
    sys.exit(1)
n, u = int(m.group(1)), m.group(2) or "s"
print(max(1, n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[u]).__int__())' "$SOAK_TIME") ||
	ixt_die "IX_SOAK_TIME=$SOAK_TIME: want e.g. 30s, 5m, 1h"
MIN_IOS=${IX_SOAK_MIN_IOS:-$(( (secs * 1000 + 59) / 60 ))}

fds() { ls "/proc/$PEER_PID/fd" | wc -l; }
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$PEER_PID/status"; }
# settle WANT: wait (bounded) for the daemon's descriptor count to come back to WANT
settle() {
	local i n
	for i in $(seq 100); do
		n=$(fds)
		[ "$n" = "$1" ] && break
		sleep 0.1
	done
	echo "$n"
}

# run NAME SECONDS_LIMIT ARGS...: one verified ix-bench run, JSON in $IXT_TMP/NAME.json
run() {
	local name=$1 limit=$2
	shift 2
	ixt_run "$limit" "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" \
		--sessions $SESSIONS --qd $QD --bs 4k --verify --json --quiet "$@" \
		>"$IXT_TMP/$name.json" 2>"$IXT_TMP/$name.err"
	RC=$?
	cat "$IXT_TMP/$name.err" >&2
	cat "$IXT_TMP/$name.json" >&2
}

# judge CHECK NAME PYTHON_CONDITION DETAIL_EXPR: the last run's exit status, then its JSON
judge() { ixb_judge_run "$1" "$RC" "$2" "$3" "$4"; }

DETAIL='"%d reads, %d writes, %d blocks verified, %d errors, %d miscompares, %d retries, %.1f s, %.0f IOPS" % (d["read"]["ios"], d["write"]["ios"], d["verified_blocks"], d["errors"], d["miscompares"], d.get("retries", 0), d.get("seconds", 0), d["iops"])'
OK='d["result"] == "ok" and d["errors"] == 0 and d["miscompares"] == 0'

fds_start=$(fds)
ixt_log "warm-up: verified fill of ${PEER_SIZE} MiB, then 20 s of the soak's mix"
run fill 300 --rw write --size ${PEER_SIZE}m --time 10m
judge soak.warmup-fill fill "$OK and d['write']['ios'] == $PEER_SIZE * 256" "$DETAIL"
run warm 120 --rw randrw --mix 50 --time 20s
judge soak.warmup-mix warm "$OK" "$DETAIL"
fds0=$(settle "$fds_start")
rss0=$(rss)

ixt_log "soak: $SESSIONS sessions x QD $QD, randrw 50 % reads, 4 KiB, verified, $SOAK_TIME"
run soak $((secs + 180)) --rw randrw --mix 50 --time "$SOAK_TIME"
judge soak.verified soak "$OK and d['read']['ios'] >= $MIN_IOS and \
d['write']['ios'] >= $MIN_IOS and d['verified_blocks'] > 0" "$DETAIL"

fds1=$(settle "$fds0")
sleep 0.5
rss1=$(rss)
if [ "$fds1" = "$fds0" ]; then
	ixt_check_pass soak.fds "daemon fds $fds_start at start, $fds0 after the warm-up, $fds1 after the soak"
else
	ixt_check_fail soak.fds "daemon fds $fds0 after the warm-up, $fds1 after the soak"
fi
growth=$((rss1 - rss0))
if [ "$growth" -le "$RSS_BOUND_KB" ]; then
	ixt_check_pass soak.rss "daemon RSS $rss0 KiB after the warm-up, $rss1 KiB after the soak (growth $growth KiB, bound $RSS_BOUND_KB)"
else
	ixt_check_fail soak.rss "daemon RSS $rss0 KiB after the warm-up, $rss1 KiB after the soak (growth $growth KiB, bound $RSS_BOUND_KB)"
fi
peer_check
