#!/bin/sh
# timeout: 1200
# Runs inside the RDMA tier's guest (started by bench/rdma.sh, never by the default suite): the
# kernel initiator's fio against ix, tgt and LIO, each over iSER and over TCP, one after the
# other in this one boot. Per (target, transport): the target with a 256 MiB LUN (ix: RAM; tgt:
# a file in /dev/shm; LIO: rd_mcp ramdisk), `iscsiadm -m discovery -o new -o old -t st -I
# iser|default -p 10.99.0.1:3260 -l`, a 64 MiB sequential prefill, then five fio jobs of
# $IX_BENCH_TIME seconds each (default 8; direct, libaio): 4 KiB random read QD16, 512 KiB
# sequential read QD8, 4 KiB random write QD16, 4 KiB random read and write at QD1; logout,
# target down. ix runs twice per transport: with its adaptive poll window (global.poll_us 50)
# and with it off ("ix-nopoll", the default, and the wait of the builds before it), so the
# latency rows compare the two in one boot. Each figure becomes a check line (PASS: measured;
# FAIL: fio failed) and a row of $IXR_OUT/bench.table.
# TCG figures only compare implementations side by side in one boot; never read them as a
# property of real hardware.
. /mnt/ix/tests/rdma/guest/lib.sh
TIME=${IX_BENCH_TIME:-8}
TABLE=$IXR_OUT/bench.table
echo "target transport randread-4k-qd16(IOPS) seqread-512k-qd8(MiB/s) randwrite-4k-qd16(IOPS) randread-4k-qd1(IOPS) randwrite-4k-qd1(IOPS)" >"$TABLE"
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
	iface=$([ "$x" = iser ] && echo iser || echo default)
	if ! timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st -I "$iface" \
		-p "$RDMA_IP:3260" -l >&2 || ! ixr_session_disk; then
		ixr_fail "$t-$x.login" "no session/disk with -I $iface"
		echo "$t $x - - - - -" >>"$TABLE"
		ixr_logout_all
		return
	fi
	dd if=/dev/zero of="$IXR_DISK" bs=1M count=64 oflag=direct 2>/dev/null
	row="$t $x"
	for spec in "randread 4k 16" "read 512k 8" "randwrite 4k 16" "randread 4k 1" "randwrite 4k 1"; do
		set -- $spec
		if r=$(job "$t-$x-$1" "$IXR_DISK" "$1" "$2" "$3") && [ -n "$r" ]; then
			set -- $spec $r
			if [ "$2" = 512k ]; then v=$(awk -v k="$5" 'BEGIN { printf "%.1f", k / 1024 }'); else v=$4; fi
			ixr_pass "$t-$x.$1-$2-qd$3" "$v $([ "$2" = 512k ] && echo MiB/s || echo IOPS)"
		else
			v=-
			ixr_fail "$t-$x.$1-$2-qd$3" "fio failed: $(tail -2 "$IXR_OUT/bench.fio.err" | tr '\n' ' ')"
		fi
		row="$row $v"
	done
	echo "$row" >>"$TABLE"
	ixr_logout_all
}

# ix (the host's build over 9p; bench/rdma.sh passes a release build)
IQN=iqn.2026-11.io.ix.rdma:bench
if [ -x "$IXR_IX_BIN" ]; then
	for poll in 50 0; do
		# (not $name: lib.sh's ixr_daemon sets that one)
		label=$([ $poll = 0 ] && echo ix-nopoll || echo ix)
		ixr_ix_config "$IQN" 256M '"tcp", "iser"'
		sed -i "s/\"log_level\": \"info\"/\"log_level\": \"info\", \"poll_us\": $poll/" \
			/run/ix-target.json
		if ixr_ix_start; then
			one $label iser
			one $label tcp
		fi
		ixr_stop ix-target 15
	done
else
	ixr_skip ix "ix-target not built in the shared build dir ($IXR_IX_BIN)"
fi

# tgt: one tgtd per transport (its iSER and TCP targets are separate LLDs)
TIQN=iqn.2026-11.io.ix.rdma:tgt
for x in iser tcp; do
	lld=$([ "$x" = iser ] && echo iser || echo iscsi)
	if ixr_tgt_start "$lld" "$TIQN" 256; then
		one tgt $x
	else
		ixr_fail "tgt-$x.target" "tgtd could not be set up"
	fi
	ixr_tgt_stop
done

# LIO with and without isert on the portal
LIQN=iqn.2026-11.io.ix.rdma:lio
for x in iser tcp; do
	if ixr_lio_start "$LIQN" 256 "$([ "$x" = iser ] && echo 1 || echo 0)"; then
		one lio $x
	else
		ixr_fail "lio-$x.target" "LIO could not be set up"
	fi
	ixr_lio_stop
done
ixr_exit
