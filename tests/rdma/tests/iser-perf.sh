#!/bin/sh
# timeout: 600
# on-demand: a measurement (about 200 s), not in tests/rdma/run.sh --list
# iSER throughput in the TCG guest (a comparison, never a prediction of real hardware): the
# Linux kernel iSER initiator's fio (1 MiB sequential write QD16, 4 KiB random write QD16,
# 1 MiB sequential read QD16; 15 s each) against the ix target and against LIO with isert in
# the same boot, then ix's own initiator (ix-bench --transport iser, buffers from its session's
# registered pool) writing and reading 1 MiB blocks at QD8 against the ix target and LIO. Each check passes when the run completed without I/O errors;
# the figures are in the reasons (docs/perf.md, "iSER in TCG").
. /mnt/ix/tests/rdma/guest/lib.sh
BENCH=/mnt/build/tools/ix-bench
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"

# perf CHECK DEV BS RW: 15 s of fio at QD16, O_DIRECT; PASS with bandwidth and IOPS
perf() {
	chk=$1 dev=$2 bs=$3 rw=$4
	log=$IXR_OUT/$IX_TEST.$chk.log
	ixr_log "+ fio $rw bs=$bs QD16 15 s on $dev"
	/usr/bin/fio --name="$chk" --filename="$dev" --size=96m --bs="$bs" --iodepth=16 \
		--ioengine=libaio --direct=1 --thread --rw="$rw" --runtime=15 --time_based \
		--ramp_time=2 >"$log" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q 'err= 0' "$log"; then
		ixr_pass "$chk" "$(grep -m1 -E '^ +(read|write): IOPS=' "$log" | sed 's/^ *//; s/ (.*//')"
	else
		ixr_fail "$chk" "fio exited $rc: $(grep -m1 -iE 'error' "$log")"
		tail -20 "$log" >&2
	fi
}

bench() { # LABEL IQN: ix-bench over iSER, 1 MiB writes then reads at QD8, 15 s each
	if [ ! -x "$BENCH" ]; then
		ixr_skip "$1.ix-bench" "ix-bench not built in the shared build dir ($BENCH)"
		return
	fi
	for rw in write read; do
		log=$IXR_OUT/$IX_TEST.$1.bench-$rw.log
		ixr_log "+ ix-bench --transport iser --rw $rw --bs 1m --qd 8 --time 15s ($1)"
		timeout 120 "$BENCH" -p "$RDMA_IP:3260" -T "$2" -I "$IXR_INITIATOR" --transport iser \
			--rw $rw --bs 1m --qd 8 --time 15s --range 96m --quiet >"$log" 2>&1
		rc=$?
		if [ $rc = 0 ]; then
			ixr_pass "$1.ix-bench-$rw" "$(grep -m1 "total:" "$log" | sed "s/^ *//")"
		else
			ixr_fail "$1.ix-bench-$rw" "exit $rc: $(tail -3 "$log" | tr '\n' ' ')"
		fi
	done
}

kernel_runs() { # LABEL
	ixr_check "$1.login" timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st \
		-I iser -p "$RDMA_IP:3260" -l || return 1
	ixr_session_disk || { ixr_fail "$1.disk" "no SCSI disk appeared"; return 1; }
	perf "$1.seqwrite-1m" "$IXR_DISK" 1m write
	perf "$1.randwrite-4k" "$IXR_DISK" 4k randwrite
	perf "$1.seqread-1m" "$IXR_DISK" 1m read
	ixr_logout_all
}

ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }

IQN=iqn.2026-11.io.ix.rdma:perf
ixr_ix_config "$IQN" 128M '"tcp", "iser"'
if ixr_ix_start; then
	kernel_runs ix
	bench ix "$IQN"
	ixr_ix_finish
fi

LIQN=iqn.2026-11.io.ix.rdma:lio-perf
if ixr_lio_start "$LIQN" 128 1; then
	kernel_runs lio
	bench lio "$LIQN"
	ixr_lio_stop
else
	ixr_fail lio.target "LIO with isert could not be set up"
fi
ixr_exit
