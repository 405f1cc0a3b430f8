#!/bin/sh
# timeout: 480
# Faults on ix's iSER target: an initiator's QP destroyed mid-I/O, 100 times. ix-target serves
# a 64 MiB RAM LUN over iSER on 10.99.0.1:3260, its first 24 MiB written once before the
# baseline (so the RAM LUN's own pages do not count as growth). A long-lived ix-bench session
# (iSER, verified random 64 KiB reads and writes at QD4 on the first 8 MiB) runs through the
# whole test. 25 rounds of 2 concurrent ix-bench processes with 2 iSER sessions each (random
# 64 KiB reads and writes at QD8 per session, on 8 MiB of their own): each round waits until
# the target has logged all 4 sessions in (every fifth round does not wait: they are killed
# wherever they are, connect and login included), then kills the processes with SIGKILL 0-0.3 s
# apart: the kernel destroys their QPs and CM ids, the target sees disconnects with commands
# and RDMA operations in flight. (Two sessions per process halve the process start-ups, which
# dominate a round under TCG.)
# Checks: the target frees every one of those connections (a "closing" log line for every
# killed peer that logged in), its fd count after 100 kills equals the one with only the long-lived
# session, its RSS grows at most 16 MiB between the warm-up (3 rounds) and the end, the
# long-lived session saw 0 errors, 0 miscompares, no connection loss and re-reads every block
# it wrote, a new session logs in and verifies I/O afterwards, and the target exits 0 on
# SIGTERM with no sanitizer report (its warnings about the killed peers' failed work requests
# are expected), no ix-bench process is left and rxe0 is quiet at the end.
# `rdma link delete rxe0` is not used: target and initiators share the one rxe device of this
# guest, so deleting it removes the target's own listener and every QP (a device-removal test,
# not an initiator fault; see docs/testing.md).
. /mnt/ix/tests/rdma/guest/lib.sh
BENCH=/mnt/build/tools/ix-bench
IQN=iqn.2026-11.io.ix.rdma:fault
ROUNDS=${IX_FAULT_ROUNDS:-25}
PROCS=2 # initiator processes per round
SESS=2  # iSER sessions (connections) per process
PAR=$((PROCS * SESS))
WARM=3
# Known regression, kept visible as a skip with its reason rather than dropped: since the iSER
# data path change (e4c727b: 512 receive buffers, whole-burst RDMA Reads, 32 cached task
# buffers per size class) the long-lived session misses NOP-Out answers during the kills and
# some new connections fail in setup() with EINVAL (docs/testing.md, issue 4's note).
# IX_FAULT=1 runs it anyway.
[ "${IX_FAULT:-0}" = 1 ] || ixr_skip_all "known regression since e4c727b (long-lived session stalls, setup() EINVAL during kills; docs/testing.md); IX_RDMA_GUEST_ENV=IX_FAULT=1 tests/rdma/run.sh ix-fault runs it"
[ -x "$BENCH" ] || ixr_skip_all "ix-bench not built in the shared build dir ($BENCH)"
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"

# ASan's quarantine holds freed memory back from reuse (256 MiB by default): with it the RSS
# after 100 connections says nothing about leaks. 8 MiB keeps the use-after-free detection for
# recent frees and lets the RSS bound below mean something. No effect on a normal build.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
export ASAN_OPTIONS
ixr_ix_config "$IQN" 64M '"tcp", "iser"'
ixr_ix_start || ixr_exit
TPID=$(ixr_pid ix-target)
# write the part of the LUN the sessions use once (over TCP: no iSER connection before the
# baseline), so the RAM LUN's pages are in the baseline
timeout 120 "$BENCH" -p "$RDMA_IP:3260" -T "$IQN" -I "$IXR_INITIATOR:fill" --rw write --bs 1m \
	--qd 4 --range 24m --size 24m --quiet >&2 ||
	ixr_fail prefill "ix-bench could not write the first 24 MiB over TCP"

fds() { ls "/proc/$TPID/fd" | wc -l; }
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$TPID/status"; } # KiB
logins() { grep -c '/iser: normal session tsih' "$IXR_IX_LOG"; }
# iSER peers that logged a session in and whose connection the target has not closed
open_peers() {
	awk '$5 == "normal" && $6 == "session" && $4 ~ /\/iser:$/ { open[$4] = 1 }
		$3 == "conn" && $5 == "closing:" { delete open[$4] }
		END { for (p in open) print p }' "$IXR_IX_LOG"
}
only_long_open() { [ "$(open_peers | wc -l)" = 1 ]; }
logged_in() { [ "$(logins)" -ge "$1" ]; }

# the target's baseline, before any session
FD0=$(fds)
RSS0=$(rss)
ixr_log "baseline: $FD0 fds, RSS $RSS0 KiB"

# the long-lived session (exit status 0 only without errors and miscompares)
ixr_daemon long "$BENCH" -p "$RDMA_IP:3260" -T "$IQN" --transport iser -I "$IXR_INITIATOR:long" \
	--rw randrw --mix 50 --bs 64k --qd 4 --offset 0 --range 8m --time 60m --verify --json
if ! ixr_wait 60 logged_in 1; then
	ixr_fail long-login "the long-lived session did not log in within 60 s: $(tail -3 "$IXR_OUT/$IX_TEST.long.log" | tr '\n' ' ')"
	ixr_exit
fi
ixr_pass long-login "long-lived iSER session logged in"
FD1=$(fds)

# one round: PAR initiators, wait for their logins (unless told not to), SIGKILL each after a
# random delay
round() { # N WAIT_FOR_LOGIN(0|1)
	before=$(logins)
	pids=
	k=1
	while [ $k -le $PROCS ]; do
		"$BENCH" -p "$RDMA_IP:3260" -T "$IQN" --transport iser -I "$IXR_INITIATOR:r$1.$k" \
			--rw randrw --mix 50 --bs 64k --qd 8 --sessions $SESS --offset $((8 * k))m \
			--range 8m --time 60s --quiet \
			>/dev/null 2>>"$IXR_OUT/$IX_TEST.cycles.log" &
		pids="$pids $!"
		k=$((k + 1))
	done
	if [ "$2" = 1 ]; then
		n=150 # 30 s
		while [ "$(logins)" -lt $((before + PAR)) ] && [ $n -gt 0 ]; do
			sleep 0.2
			n=$((n - 1))
		done
		[ "$(logins)" -ge $((before + PAR)) ] || NOLOGIN=$((NOLOGIN + 1))
	fi
	for bp in $pids; do
		sleep "0.$((RANDOM % 4))"
		if ixr_running $bp; then
			kill -KILL $bp
			KILLED=$((KILLED + SESS))
		else
			EARLY=$((EARLY + 1)) # it ended by itself: a failed login, reported below
		fi
		wait $bp 2>/dev/null
	done
}

# After the kills the target must notice the disconnects and free the connections: its
# "closing" lines catch up with the logins of the killed sessions (the long-lived one stays).
NOLOGIN=0 EARLY=0 KILLED=0
t0=$(cut -d' ' -f1 /proc/uptime)
i=1
while [ $i -le $ROUNDS ]; do
	if [ $((i % 5)) = 3 ]; then round $i 0; else round $i 1; fi
	if [ $i = $WARM ]; then
		ixr_wait 30 only_long_open
		FDW=$(fds)
		RSSW=$(rss)
		ixr_log "after $((WARM * PAR)) kills: $FDW fds, RSS $RSSW KiB"
	fi
	i=$((i + 1))
done
t1=$(cut -d' ' -f1 /proc/uptime)
L=$(logins)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')
if ixr_wait 60 only_long_open; then
	ixr_pass freed "the connections of all $((L - 1)) killed iSER sessions closed by the target, only the long-lived one open ($ROUNDS rounds of $PAR in $secs s)"
else
	ixr_fail freed "60 s after the last kill the target still has $(open_peers | wc -l) logged-in iSER connections open (1 expected): $(open_peers | tr '\n' ' ')"
fi
# the rounds that waited for their logins got them all (rounds 3, 8, ... were killed anywhere)
if [ $NOLOGIN = 0 ] && [ $EARLY = 0 ] && [ $KILLED = $((ROUNDS * PAR)) ] &&
	[ "$L" -ge $((ROUNDS * PAR * 4 / 5 + 1)) ]; then
	ixr_pass kills "$((ROUNDS * PROCS)) initiator processes with $KILLED iSER sessions killed mid-I/O, $((L - 1)) sessions after their login"
else
	ixr_fail kills "$KILLED sessions killed, $NOLOGIN rounds without all logins, $EARLY initiators ended before the kill, $((L - 1)) logins"
	tail -5 "$IXR_OUT/$IX_TEST.cycles.log" >&2
fi

FD2=$(fds)
RSS2=$(rss)
ixr_log "after $KILLED kills: $FD2 fds, RSS $RSS2 KiB"
# fds: exactly those with the long-lived session open again (each leaked iSER connection would
# keep its CM event channel and completion channel: 2 fds per kill)
if [ "$FD2" -le "$FD1" ]; then
	ixr_pass fds "target fds: $FD0 idle, $FD1 with the long-lived session, $FDW after $((WARM * PAR)) kills, $FD2 after $KILLED (bound: no growth)"
else
	ixr_fail fds "target fds grew: $FD0 idle, $FD1 with the long-lived session, $FDW after $((WARM * PAR)) kills, $FD2 after $KILLED"
fi
# RSS: at most 16 MiB above the warm-up figure over 88 kills (a connection's receive and send
# rings alone are over 2 MiB: a leak of one per kill would add 176 MiB)
if [ $((RSS2 - RSSW)) -le 16384 ]; then
	ixr_pass rss "target RSS: $RSS0 KiB idle, $RSSW KiB after $((WARM * PAR)) kills, $RSS2 KiB after $KILLED (bound: +16384 KiB after the warm-up; grew $((RSS2 - RSSW)) KiB)"
else
	ixr_fail rss "target RSS grew $((RSS2 - RSSW)) KiB between kill $((WARM * PAR)) and $KILLED ($RSS0 idle, $RSSW, $RSS2 KiB)"
fi

# a new session still logs in and verifies I/O
ixr_log "+ ix-bench verified randrw after the faults"
if timeout 120 "$BENCH" -p "$RDMA_IP:3260" -T "$IQN" --transport iser -I "$IXR_INITIATOR:after" \
	--rw randrw --bs 64k --qd 16 --offset 24m --range 16m --time 5s --verify \
	>"$IXR_OUT/$IX_TEST.after.log" 2>&1; then
	ixr_pass after "new iSER session after the faults: $(grep -m1 'verify:' "$IXR_OUT/$IX_TEST.after.log" | sed 's/^ *//')"
else
	ixr_fail after "ix-bench after the faults exited $?: $(grep -m3 -iE 'error|fail|miscompare' "$IXR_OUT/$IX_TEST.after.log" | tr '\n' ' ')"
fi

# the long-lived session: stop it (SIGTERM: it stops, re-reads everything it wrote, reports)
ixr_stop long 120
J=$IXR_OUT/$IX_TEST.long.log
num() { sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p" "$J" | head -1; }
errs=$(num errors) mis=$(num miscompares) lost=$(num connection_losses) vb=$(num verified_blocks)
if [ "$IXR_RC" = 0 ] && [ "$errs" = 0 ] && [ "$mis" = 0 ] && [ "$lost" = 0 ] && [ "${vb:-0}" -gt 0 ]; then
	ixr_pass long-session "long-lived session through all cycles: 0 errors, 0 miscompares, 0 connection losses, $vb blocks re-read and verified"
else
	ixr_fail long-session "long-lived session: exit ${IXR_RC:-none}, errors ${errs:-?}, miscompares ${mis:-?}, connection losses ${lost:-?}, verified ${vb:-?}"
	tail -20 "$J" >&2
fi

# the killed peers' RDMA operations and sends fail on the target's side: expected warnings
ixr_ix_finish 'warn +iser +[^ ]+/iser: (work completion error|RDMA_CM_EVENT)|info +conn +[^ ]+/iser: closing: transport: Input/output error'

# What the faults leave in the guest's kernel: no killed initiator still around (a process stuck
# in its RDMA teardown keeps its QPs), and rxe0 quiet once every session has ended.
left=$(for p in /proc/[0-9]*; do
	[ "$(readlink "$p/exe" 2>/dev/null)" = "$BENCH" ] && echo "${p#/proc/}:$(sed 's/.*) //' "$p/stat" | cut -d' ' -f1)"
done)
if [ -z "$left" ]; then
	ixr_pass no-leftovers "no ix-bench process left"
else
	ixr_fail no-leftovers "ix-bench processes still present (pid:state): $(echo $left)"
fi
q0=$(ixr_rxe_pkts)
sleep 3
q1=$(ixr_rxe_pkts)
if [ $((q1 - q0)) -le 16 ]; then
	ixr_pass rxe-quiet "rxe0 carried $((q1 - q0)) packets in 3 s with no session left"
else
	ixr_fail rxe-quiet "rxe0 carried $((q1 - q0)) packets in 3 s with no session left (leftover QP traffic)"
fi
ixr_exit
