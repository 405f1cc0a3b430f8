#!/bin/sh
# timeout: 300
# The fault-injecting datamover (src/transport/fault) over iSER: ix-target --testing wraps every
# transport, so a "testing.transport_faults" configuration mistreats the PDUs it sends over
# RDMA as over TCP (tests/interop/faults.py covers TCP byte for byte).
# 1. reset: every connection is aborted before the message that would carry its 4 MiB + 1st
#    byte (iSER's tx_abort_at: RDMA messages are atomic). ix-bench over iSER (verified random
#    64 KiB writes and reads at QD4, 24 MiB) must lose connections, recover each one (ERL 0
#    session reinstatement, commands reissued) and finish with 0 errors and 0 miscompares; the
#    target logs the aborts on "/iser" peers and the wrapper's statistics at exit.
# 2. drop: every NOP-In the target sends is dropped (opcode filter 0x20). An idle ixadm session
#    over iSER never sees the target's pings (nop_interval 1 s, timeout 1 s), so the target
#    closes it ("no NOP-Out answer") while I/O PDUs still flow: the session recovers and
#    `-m io readcap` works afterwards.
. /mnt/ix/tests/rdma/guest/lib.sh
BENCH=/mnt/build/tools/ix-bench
AX=/mnt/build/tools/ixadm
IQN=iqn.2026-11.io.ix.rdma:faults
P="$RDMA_IP:3260"
[ -x "$BENCH" ] || ixr_skip_all "ix-bench not built in the shared build dir ($BENCH)"
[ -x "$AX" ] || ixr_skip_all "ixadm not built in the shared build dir ($AX)"
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"

# faults_config GLOBAL FAULTS: the iSER-only portal, one 64 MiB RAM LUN, the testing section
faults_config() {
	cat >/run/ix-target.json <<-JSON
		{
		  "global": { "log_level": "info", $1 },
		  "portals": [ { "name": "rdma-net", "address": "$RDMA_IP", "port": 3260,
		                 "transports": ["iser"] } ],
		  "targets": [
		    { "name": "$IQN", "luns": [ { "lun": 0, "backend": "ram", "size": "64M" } ] }
		  ],
		  "testing": { "transport_faults": { "seed": 7, $2 } }
		}
	JSON
}
start() {
	IXR_IX_LOG=$IXR_OUT/$IX_TEST.ix-target.log
	ixr_daemon ix-target "$IXR_IX_BIN" --testing -c /run/ix-target.json
	if ixr_wait 30 grep -q 'ix-target: ready' "$IXR_IX_LOG"; then
		ixr_pass "$1.target" "ix-target --testing ready: $(grep -m1 'TESTING' "$IXR_IX_LOG" | sed 's/^.*TESTING: //')"
		return 0
	fi
	ixr_fail "$1.target" "ix-target --testing not ready after 30 s: $(tail -3 "$IXR_IX_LOG" | tr '\n' ' ')"
	return 1
}
# logged CHECK REGEX MIN: at least MIN lines of ix-target's log match
logged() {
	n=$(grep -cE "$2" "$IXR_IX_LOG")
	if [ "$n" -ge "$3" ]; then
		ixr_pass "$1" "$n lines, e.g. $(grep -m1 -E "$2" "$IXR_IX_LOG" | sed 's/^[0-9.]* *[a-z]* *[a-z]* *//')"
	else
		ixr_fail "$1" "$n lines matching '$2' in ix-target's log, expected at least $3"
	fi
}
stop() {
	if ! ixr_stop ix-target 15; then
		ixr_fail "$1.shutdown" "ix-target ignored SIGTERM for 15 s"
	elif [ "$IXR_RC" = 0 ]; then
		ixr_pass "$1.shutdown" "ix-target exited 0 on SIGTERM"
	else
		ixr_fail "$1.shutdown" "ix-target exited with status $IXR_RC after SIGTERM"
	fi
	if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$IXR_IX_LOG"; then
		ixr_fail "$1.sanitizer" "$(grep -m1 -E 'ERROR: |runtime error:' "$IXR_IX_LOG")"
	fi
	cp "$IXR_IX_LOG" "$IXR_OUT/$IX_TEST.$1.ix-target.log" # the next case starts a new log
}

# ---- 1. reset after 4 MiB on every connection ----------------------------------------------------
faults_config '"nop_interval_ms": 0' '"reset_after_bytes": 4194304'
if start reset; then
	timeout 240 "$BENCH" -p "$P" -T "$IQN" -I "$IXR_INITIATOR:faults" --transport iser \
		--rw randrw --bs 64k --qd 4 --size 24m --range 16m --verify >/run/bench.out 2>&1
	rc=$?
	sed 's/^/    /' /run/bench.out >&2
	if [ $rc = 0 ] && grep -qE '^ *errors 0, miscompares 0' /run/bench.out; then
		ixr_pass reset.bench "ix-bench over iSER: $(grep -m1 -E '^ *errors' /run/bench.out | sed 's/^ *//')"
	else
		ixr_fail reset.bench "ix-bench exit $rc: $(grep -E 'errors|ix-bench:' /run/bench.out | head -2 | tr '\n' ' ')"
	fi
	if grep -qE 'recovery: [1-9][0-9]* connection\(s\) lost, [1-9]' /run/bench.out; then
		ixr_pass reset.recovered "$(grep -m1 'recovery:' /run/bench.out | sed 's/^ *//')"
	else
		ixr_fail reset.recovered "no lost-and-recovered connection reported: $(grep -m1 'recovery:' /run/bench.out)"
	fi
	logged reset.aborted '/iser: fault injection: aborting the connection after [0-9]+ bytes' 2
	logged reset.relogin '/iser: normal session tsih' 3
	stop reset
	logged reset.stats 'fault injection: [1-9][0-9]* PDUs eligible' 1
fi

# ---- 2. every NOP-In dropped: the target's keepalive ends an idle session -------------------------
DB=/run/ixadm-faults-db
rm -rf "$DB"
faults_config '"nop_interval_ms": 1000, "nop_timeout_ms": 1000' '"drop_ppm": 1000000, "opcodes": [32]'
if start drop; then
	export IX_INITIATOR_NAME="$IXR_INITIATOR:faults-drop"
	T="-T $IQN -p $P"
	timeout 60 "$AX" --db "$DB" -m discovery -t st -I iser -p "$P" -l >/run/ax.out 2>&1
	rc=$?
	sed 's/^/    /' /run/ax.out >&2
	if [ $rc = 0 ]; then ixr_pass drop.login "ixadm logged in over iSER"; else ixr_fail drop.login "ixadm exit $rc: $(tail -2 /run/ax.out | tr '\n' ' ')"; fi
	# idle: the target's pings vanish, it closes after interval + timeout (2 s); the session
	# daemon logs in again
	sleep 5
	logged drop.dropped '/iser: dropping NOP-In' 1
	logged drop.closed '/iser: closing: no NOP-Out answer to our NOP-In ping' 1
	timeout 60 "$AX" --db "$DB" -m io $T readcap >/run/ax.out 2>&1
	rc=$?
	sed 's/^/    /' /run/ax.out >&2
	if [ $rc = 0 ] && grep -q '^LUN 0: 131072 blocks of 512 bytes' /run/ax.out; then
		ixr_pass drop.io-after "readcap after the keepalive closes: $(head -1 /run/ax.out)"
	else
		ixr_fail drop.io-after "readcap exit $rc: $(head -2 /run/ax.out | tr '\n' ' ')"
	fi
	logged drop.relogin '/iser: normal session tsih' 2
	timeout 60 "$AX" --db "$DB" -m node $T -u >/dev/null 2>&1
	stop drop
fi
ixr_exit
