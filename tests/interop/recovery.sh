#!/bin/bash
# Session recovery of the ix initiator, seen through a verified ix-bench run against ix-target
# with a file-backed LUN (its data survives the daemon):
#  1. kill -9 the target 4 s into a 20 s randrw --verify run at QD 16 (replacement timeout
#     15 s), restart it on the same port 1.5 s later: the run must complete with 0 errors and
#     0 miscompares, report the recovery (events and ix_session_info.recoveries), and re-read
#     everything it wrote;
#  2. kill it during a run with a 5 s replacement timeout and keep it down: commands must fail
#     with ETIMEDOUT naming the replacement timeout, and ix-bench must exit 1 within the
#     timeout plus a few seconds (no hang);
#  3. freeze it (SIGSTOP) during a run: the NOP keepalive notices, the replacement timeout
#     ends the run with ETIMEDOUT;
#  4. kill -9 ix-bench with I/O in flight, three times: the target serves the next run and
#     still stops cleanly on SIGTERM.
. "$(dirname "$0")/../lib/common.sh"

ixt_init recovery
IXB=$IX_BUILD/tools/ix-bench
[ -x "$IXB" ] || ixt_skip "ix-bench not built at $IXB"
[ "$IX_PEER" = ix ] || ixt_skip "kills and restarts ix-target; tgt is not restarted this way"
PEER_SIZE=64
PEER_BACKEND=file # the data must survive the daemon
peer_start

now_ms() { date +%s%3N; }

# judge CHECK FILE PYTHON_CONDITION: the condition sees the run's JSON as d.
judge() { ixb_judge "$@"; }

# 1. restart within the replacement timeout
out=$IXT_TMP/survive
ixt_log "run 1: randrw --verify 20 s, QD 16, replacement timeout 15 s; kill -9 at 4 s"
timeout -k 5 90 "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" --rw randrw \
	--mix 70 --verify --time 20s --qd 16 --replacement-timeout 15000 --json --progress \
	>"$out.json" 2>"$out.err" &
bench=$!
sleep 4
t_kill=$(now_ms)
ix_kill9
sleep 1.5
if ix_restart 10; then
	t_up=$(now_ms)
	ixt_log "target down for $((t_up - t_kill)) ms (kill -9 to ready)"
else
	ixt_check_fail recovery.restart "ix-target did not come back"
	t_up=$(now_ms)
fi
wait $bench
rc=$?
cat "$out.err" "$out.json" >&2
if [ $rc = 0 ]; then
	ixt_check_pass recovery.survive-rc
else
	ixt_check_fail recovery.survive-rc "ix-bench exited $rc: $(grep -m3 'ixb:' "$out.err")"
fi
judge recovery.survive "$out.json" "d['result'] == 'ok' and d['errors'] == 0 and \
d['miscompares'] == 0 and d['write']['ios'] > 1000 and d['verified_blocks'] > 1000"
judge recovery.reported "$out.json" "d['recovery']['connection_losses'] == 1 and \
d['recovery']['recovered'] == 1 and d['recovery']['session_recoveries'] == 1"
# reconnecting once the target listens again takes at most one backoff step (2 s) + login
down=$((t_up - t_kill))
judge recovery.prompt "$out.json" "d['recovery']['max_ms'] <= $down + 3000"
if grep -q 'connection lost' "$out.err" && grep -q 'recovered after' "$out.err"; then
	ixt_check_pass recovery.events
else
	ixt_check_fail recovery.events "no 'connection lost' / 'recovered after' lines on stderr"
fi
ixt_note "recovery: target down $down ms, ix-bench reconnected after $(python3 -c "import json; print(json.load(open('$out.json'))['recovery']['max_ms'])" 2>/dev/null) ms"

# 2. the target stays down longer than the replacement timeout
out=$IXT_TMP/timeout
ixt_log "run 2: randrw --verify 60 s, replacement timeout 5 s; kill -9 at 3 s, no restart"
timeout -k 5 60 "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" --rw randrw \
	--verify --time 60s --qd 16 --replacement-timeout 5000 --json --progress \
	>"$out.json" 2>"$out.err" &
bench=$!
sleep 3
t_kill=$(now_ms)
ix_kill9
wait $bench
rc=$?
t_exit=$(now_ms)
cat "$out.err" "$out.json" >&2
took=$((t_exit - t_kill))
ixt_note "recovery: target killed, ix-bench exited $rc after $took ms (replacement timeout 5000 ms)"
if [ $rc = 1 ]; then
	ixt_check_pass recovery.timeout-rc
else
	ixt_check_fail recovery.timeout-rc "ix-bench exited $rc (124 = hung until killed), want 1"
fi
if [ $took -ge 4500 ] && [ $took -le 9000 ]; then
	ixt_check_pass recovery.timeout-bounded
else
	ixt_check_fail recovery.timeout-bounded "ix-bench ended $took ms after the kill, want 5000..9000"
fi
judge recovery.timeout-error "$out.json" "d['result'] == 'error' and d['errors'] > 0 and \
d['miscompares'] == 0 and 'ETIMEDOUT' in d['first_error'] and \
'replacement timeout' in d['first_error'] and d['recovery']['recovered'] == 0"
grep -q 'recovery failed' "$out.err" && ixt_check_pass recovery.failed-event ||
	ixt_check_fail recovery.failed-event "no 'recovery failed' line on stderr"

# bring the daemon back
ix_restart 10 || ixt_die "ix-target did not come back after run 2"

# 3. the target hangs (SIGSTOP): the connection stays open, nothing answers; the NOP keepalive
# (5 s idle, 5 s for the answer) declares it lost, the replacement timeout (5 s) ends it
out=$IXT_TMP/frozen
ixt_log "run 3: randrw --verify 60 s, replacement timeout 5 s; SIGSTOP the target at 3 s"
timeout -k 5 60 "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" --rw randrw \
	--verify --time 60s --qd 16 --replacement-timeout 5000 --json --progress \
	>"$out.json" 2>"$out.err" &
bench=$!
sleep 3
t_stop=$(now_ms)
kill -STOP "$PEER_PID"
wait $bench
rc=$?
took=$(($(now_ms) - t_stop))
kill -CONT "$PEER_PID"
cat "$out.err" "$out.json" >&2
ixt_note "recovery: target stopped, ix-bench exited $rc after $took ms (NOP 5+5 s, replacement 5 s)"
if [ $rc = 1 ] && [ $took -ge 9500 ] && [ $took -le 20000 ]; then
	ixt_check_pass recovery.frozen-bounded
else
	ixt_check_fail recovery.frozen-bounded "exit $rc after $took ms, want 1 after 10..20 s"
fi
judge recovery.frozen-error "$out.json" "d['errors'] > 0 and d['miscompares'] == 0 and \
'ETIMEDOUT' in d['first_error'] and 'NOP-Out' in d['first_error']"

# 4. the other side dies: kill -9 ix-bench three times with 32 file I/Os in flight; the target
# must drop those connections (commands still inside its SCSI layer included), serve the next
# verified run, and still stop cleanly on SIGTERM. A dead session's commands may still land
# after the next session's writes (another I_T nexus: nothing orders the two), so the clients
# that die use the first half of the LUN and the next run the second.
for i in 1 2 3; do
	"$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" --rw randrw --range 32M \
		--verify --seed 777 --time 30s --qd 32 --quiet >/dev/null 2>&1 &
	bench=$!
	sleep 1
	kill -KILL $bench
	wait $bench 2>/dev/null
done
out=$IXT_TMP/after
timeout -k 5 60 "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" --rw randrw \
	--offset 32M --verify --time 2s --qd 16 --login-timeout 3000 --json --quiet \
	>"$out.json" 2>"$out.err"
cat "$out.err" "$out.json" >&2
judge recovery.initiator-killed "$out.json" "d['result'] == 'ok' and d['write']['ios'] > 100"

# the exit trap stops the daemon with SIGTERM: it must exit cleanly (and, in the sanitizer
# build, without a leak report) after all these lost connections
peer_check
