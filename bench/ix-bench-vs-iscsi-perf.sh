#!/bin/bash
# ix-bench against libiscsi's iscsi-perf: 4 KiB random reads at queue depth 32, one session,
# against the SAME tgt LUN (a 1 GiB file in /dev/shm, written once so that reads hit real
# pages). The two tools run alternately (the order flips every round) on this machine; the
# script prints every run, the medians, the ratio of the medians and each tool's CPU use
# (user + sys over wall time of the whole process, from bash's `time`; 100 % = one core) and
# CPU time per I/O.
#
#   bench/ix-bench-vs-iscsi-perf.sh [-r ROUNDS] [-t SECONDS] [-b BUILD_DIR] [-p tgt|ix]
#     -r  rounds (default 5; each round runs both tools once)
#     -t  seconds per run (default 10)
#     -b  build with ix-bench (default build-release, set up with --buildtype=release if missing)
#     -p  the target: tgt (default, what docs/perf.md compares on), or ix-target from the same
#         build with a 1 GiB RAM LUN (there the target is fast enough for the client to matter)
#
# iscsi-perf -r -m 32 -b 8 -t SECONDS: random READ(16) of 8 x 512-byte blocks, 32 in flight.
# ix-bench --rw randread --bs 4k --qd 32 --time SECONDS: the same load, 4 KiB-aligned offsets.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=5
SECS=10
BUILD=$ROOT/build-release
TARGET=tgt
while getopts r:t:b:p:h o; do
	case $o in
	r) ROUNDS=$OPTARG ;;
	t) SECS=$OPTARG ;;
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	p) TARGET=$OPTARG ;;
	*) sed -n 2,17p "$0"; exit 2 ;;
	esac
done

command -v iscsi-perf >/dev/null || { echo "iscsi-perf missing (package libiscsi-bin)" >&2; exit 2; }
command -v tgtd >/dev/null || { echo "tgtd missing (package tgt)" >&2; exit 2; }
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" --buildtype=release >/dev/null || exit 2
fi
ninja -C "$BUILD" tools/ix-bench tools/ix-target >/dev/null || exit 2

# the target through the test library: a free port, (tgt) a private control socket, cleanup
export IX_OUT=${IX_OUT:-$(mktemp -d /tmp/ixb-vs-perf.XXXXXX)}
export IX_BUILD=$BUILD
. "$ROOT/tests/lib/common.sh"
ixt_init ixb-vs-iscsi-perf
case $TARGET in
tgt | ix) IX_PEER=$TARGET ;;
*) ixt_die "-p tgt or -p ix" ;;
esac
PEER_SIZE=1024
PEER_DIGESTS=0
peer_start
if [ "$TARGET" = tgt ]; then
	img=$(ls /dev/shm/ixtest-ixb-vs-iscsi-perf-$$.img)
	dd if=/dev/zero of="$img" bs=1M count=$PEER_SIZE conv=notrunc status=none
else # write the RAM LUN once, like tgt's file
	"$BUILD/tools/ix-bench" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --rw write --bs 1m \
		--size 1g --quiet >/dev/null || ixt_die "cannot fill the LUN"
fi
URL="iscsi://$IX_HOST:$PEER_PORT/$PEER_IQN/$PEER_LUN"
IXB=$BUILD/tools/ix-bench
log=$IXT_TMP/run.out

# run TOOL: one measured run; appends "TOOL IOPS CPU%" to $IXT_TMP/results
run() {
	local tool=$1 iops t
	TIMEFORMAT='%U %S %R'
	case $tool in
	ix-bench)
		{ time "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" \
			--rw randread --bs 4k --qd 32 --time "${SECS}s" --json --quiet >"$log"; } \
			2>"$IXT_TMP/time"
		iops=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["iops"]))' "$log")
		;;
	iscsi-perf)
		{ time timeout $((SECS + 30)) iscsi-perf -r -m 32 -b 8 -t "$SECS" "$URL" >"$log"; } \
			2>"$IXT_TMP/time"
		iops=$(tr '\r' '\n' <"$log" | sed -n 's/^iops average \([0-9]*\) .*/\1/p' | tail -1)
		;;
	esac
	t=$(tail -1 "$IXT_TMP/time")
	if [ -z "$iops" ]; then
		echo "$tool: no result" >&2
		cat "$log" >&2
		exit 1
	fi
	cpu=$(awk '{printf "%.0f", ($1 + $2) / $3 * 100}' <<<"$t")
	printf '%-10s round %d: %8d IOPS, client CPU %3d%% (%s s user+sys in %s s)\n' "$tool" \
		"$round" "$iops" "$cpu" "$(awk '{print $1 + $2}' <<<"$t")" "$(awk '{print $3}' <<<"$t")"
	echo "$tool $iops $(awk '{print ($1 + $2) / $3 * 100}' <<<"$t")" >>"$IXT_TMP/results"
}

if [ "$TARGET" = tgt ]; then
	echo "tgt $(tgtd --version 2>/dev/null | head -1) on $IX_HOST:$PEER_PORT, LUN $PEER_LUN: 1 GiB in /dev/shm; $ROUNDS rounds of ${SECS}s"
else
	echo "ix-target ($BUILD) on $IX_HOST:$PEER_PORT, LUN $PEER_LUN: 1 GiB RAM; $ROUNDS rounds of ${SECS}s"
fi
for ((round = 1; round <= ROUNDS; round++)); do
	if ((round % 2)); then
		run ix-bench
		run iscsi-perf
	else
		run iscsi-perf
		run ix-bench
	fi
done

python3 - "$IXT_TMP/results" <<'PY'
import statistics, sys
r = {}
for line in open(sys.argv[1]):
    tool, iops, cpu = line.split()
    r.setdefault(tool, []).append((int(iops), float(cpu)))
med = {t: (statistics.median(i for i, _ in v), statistics.median(c for _, c in v))
       for t, v in r.items()}
for t in ('ix-bench', 'iscsi-perf'):
    # CPU time per I/O, from each run's own IOPS and CPU share
    per_io = statistics.median(c / 100 * 1e6 / i for i, c in r[t])
    print('%-10s median %8.0f IOPS, client CPU %3.0f%%, %.1f us CPU per I/O (runs: %s)' % (
        t, med[t][0], med[t][1], per_io, ' '.join(str(i) for i, _ in r[t])))
print('ratio ix-bench / iscsi-perf: %.2f' % (med['ix-bench'][0] / med['iscsi-perf'][0]))
PY
peer_check
