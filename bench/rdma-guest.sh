#!/bin/sh
# timeout: 1200
# Runs inside the RDMA tier's guest (started by bench/rdma.sh, never by the default suite): the
# kernel initiator's fio against ix, tgt and LIO, each over iSER and over TCP, one after the
# other in this one boot. Per (target, transport): the target with a 256 MiB LUN (ix: RAM; tgt:
# a file in /dev/shm; LIO: rd_mcp ramdisk), `iscsiadm -m discovery -o new -o old -t st -I
# iser|default -p 10.99.0.1:3260 -l`, a 64 MiB sequential prefill, then five fio jobs of
# $IX_BENCH_TIME seconds each (default 8; direct, libaio): 4 KiB random read QD16, 512 KiB
# sequential read QD8, 4 KiB random write QD16, 4 KiB random read and write at QD1; logout,
# target down. ix runs twice per transport: with its adaptive poll window (global.poll_us 50,
# the default; IX_BENCH_POLL_US for another) and with it off ("ix-nopoll": the wait of the
# builds before it), so the latency rows compare the two in one boot; after each ix run the
# workers' wait statistics go to $IXR_OUT/bench.workers. Each figure becomes a check line (PASS: measured;
# FAIL: fio failed) and a row of $IXR_OUT/bench.table.
# TCG figures only compare implementations side by side in one boot; never read them as a
# property of real hardware.
# IX_BENCH_QD1=1: only the two QD1 jobs, and every target and transport IX_BENCH_ROUNDS times
# (default 3) in rounds whose order alternates (forward, backward, ...), so that the host's load
# drifting during the boot hits every row alike; one table row per (round, target, transport).
. /mnt/ix/tests/rdma/guest/lib.sh
TIME=${IX_BENCH_TIME:-8}
QD1=${IX_BENCH_QD1:-0}
ROUNDS=${IX_BENCH_ROUNDS:-3}
POLL=${IX_BENCH_POLL_US:-50}	# the "ix" rows' global.poll_us (the default 50)
[ "$QD1" = 1 ] || ROUNDS=1
TABLE=$IXR_OUT/bench.table
if [ "$QD1" = 1 ]; then
	SPECS="randread:4k:1 randwrite:4k:1"
	echo "round target transport randread-4k-qd1(IOPS) randwrite-4k-qd1(IOPS)" >"$TABLE"
else
	SPECS="randread:4k:16 read:512k:8 randwrite:4k:16 randread:4k:1 randwrite:4k:1"
	echo "target transport randread-4k-qd16(IOPS) seqread-512k-qd8(MiB/s) randwrite-4k-qd16(IOPS) randread-4k-qd1(IOPS) randwrite-4k-qd1(IOPS)" >"$TABLE"
fi
ROUND=1
ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }

# job NAME DEV RW BS QD: one fio run; prints "IOPS KIB_S" (read or write side) or nothing
job() {
	out=$(/usr/bin/fio --name="$1" --filename="$2" --rw="$3" --bs="$4" --iodepth="$5" \
		--ioengine=libaio --direct=1 --thread --time_based --runtime="$TIME" --size=256m \
		--minimal 2>>"$IXR_OUT/bench.fio.err")
	[ $? = 0 ] || return 1
	echo "$out" | awk -F';' -v w="$([ "$3" = randwrite ] && echo 1 || echo 0)" '
		$5 != 0 { exit 1 }
		{ if (w) print $49, $48; else print $8, $7 }'
}

# one TARGET TRANSPORT: the kernel initiator's session and the three jobs against it
one() {
	t=$1 x=$2
	pre= sfx=
	[ "$QD1" = 1 ] && pre="$ROUND " sfx=".r$ROUND"
	iface=$([ "$x" = iser ] && echo iser || echo default)
	if ! timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st -I "$iface" \
		-p "$RDMA_IP:3260" -l >&2 || ! ixr_session_disk; then
		ixr_fail "$t-$x.login$sfx" "no session/disk with -I $iface"
		echo "$pre$t $x $(echo $SPECS | sed 's/[^ ]*/-/g')" >>"$TABLE"
		ixr_logout_all
		return
	fi
	dd if=/dev/zero of="$IXR_DISK" bs=1M count=64 oflag=direct 2>/dev/null
	row="$pre$t $x"
	for spec in $SPECS; do
		set -- $(echo "$spec" | tr : ' ')
		if r=$(job "$t-$x-$1" "$IXR_DISK" "$1" "$2" "$3") && [ -n "$r" ]; then
			set -- $(echo "$spec" | tr : ' ') $r
			if [ "$2" = 512k ]; then v=$(awk -v k="$5" 'BEGIN { printf "%.1f", k / 1024 }'); else v=$4; fi
			ixr_pass "$t-$x.$1-$2-qd$3$sfx" "$v $([ "$2" = 512k ] && echo MiB/s || echo IOPS)"
		else
			v=-
			ixr_fail "$t-$x.$1-$2-qd$3$sfx" "fio failed: $(tail -2 "$IXR_OUT/bench.fio.err" | tr '\n' ' ')"
		fi
		row="$row $v"
	done
	echo "$row" >>"$TABLE"
	ixr_logout_all
}

# ix (the host's build over 9p; bench/rdma.sh passes a release build), with and without polling
IQN=iqn.2026-11.io.ix.rdma:bench
ix_rows() { # POLL_US
	poll=$1
	# (not $name: lib.sh's ixr_daemon sets that one)
	label=$([ $poll = 0 ] && echo ix-nopoll || echo ix)
	if [ ! -x "$IXR_IX_BIN" ]; then
		ixr_skip "$label$([ "$QD1" = 1 ] && echo ".r$ROUND")" "ix-target not built in the shared build dir ($IXR_IX_BIN)"
		return
	fi
	ixr_ix_config "$IQN" 256M '"tcp", "iser"'
	sed -i "s/\"log_level\": \"info\"/\"log_level\": \"info\", \"poll_us\": $poll, \"mgmt_socket\": \"\/run\/ix-bench.sock\"/" \
		/run/ix-target.json
	if ixr_ix_start; then
		one $label iser
		one $label tcp
		# how the workers waited (did the poll window answer, or back off?)
		echo "round $ROUND $label: $(/mnt/build/tools/ix-ctl -s /run/ix-bench.sock --json stats |
			tr -d '\n ' | sed 's/.*"workers"/"workers"/')" >>"$IXR_OUT/bench.workers"
	fi
	ixr_stop ix-target 15
}

# tgt: one tgtd per transport (its iSER and TCP targets are separate LLDs)
TIQN=iqn.2026-11.io.ix.rdma:tgt
tgt_rows() {
	for x in iser tcp; do
		lld=$([ "$x" = iser ] && echo iser || echo iscsi)
		if ixr_tgt_start "$lld" "$TIQN" 256; then
			one tgt $x
		else
			ixr_fail "tgt-$x.target" "tgtd could not be set up"
		fi
		ixr_tgt_stop
	done
}

# LIO with and without isert on the portal
LIQN=iqn.2026-11.io.ix.rdma:lio
lio_rows() {
	for x in iser tcp; do
		if ixr_lio_start "$LIQN" 256 "$([ "$x" = iser ] && echo 1 || echo 0)"; then
			one lio $x
		else
			ixr_fail "lio-$x.target" "LIO could not be set up"
		fi
		ixr_lio_stop
	done
}

while [ "$ROUND" -le "$ROUNDS" ]; do
	if [ $((ROUND % 2)) = 1 ]; then
		ix_rows $POLL; ix_rows 0; tgt_rows; lio_rows
	else
		lio_rows; tgt_rows; ix_rows 0; ix_rows $POLL
	fi
	ROUND=$((ROUND + 1))
done
ixr_exit
