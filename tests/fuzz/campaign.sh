#!/bin/bash
# A long fuzzing campaign (docs/fuzzing.md). For each harness, runs its libFuzzer binary in
# chunks of CHUNK wall seconds until the CPU time spent on it (user + system, summed over every
# run recorded in WORKDIR/campaign.log, so a campaign can be stopped and resumed) reaches
# CPU seconds. The growing corpus lives in WORKDIR/<harness>; the committed seeds in
# tests/fuzz/corpus are read, never written. Each run appends one line to campaign.log: date,
# harness, wall and CPU seconds, executions, coverage, result. Crash reproducers land in
# WORKDIR/<harness>-crash-* and stop that harness (fix, add the reproducer as a regression seed,
# run again).
#
#   tests/fuzz/campaign.sh [-c CPU] [-t CHUNK] [-j JOBS] [-w WORKDIR] [-b BUILD] [HARNESS...]
#     defaults: 600 CPU s per harness, 300 s chunks, 1 harness at a time, /var/tmp/ix-fuzz,
#     build-fuzz (configured with CC=clang), every harness with a corpus directory
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CPU=600
CHUNK=300
JOBS=1
WORK=/var/tmp/ix-fuzz
BUILD=build-fuzz
while getopts c:t:j:w:b:h o; do
	case $o in
	c) CPU=$OPTARG ;;
	t) CHUNK=$OPTARG ;;
	j) JOBS=$OPTARG ;;
	w) WORK=$OPTARG ;;
	b) BUILD=$OPTARG ;;
	*) sed -n 2,14p "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
NAMES=("$@")
if [ ${#NAMES[@]} -eq 0 ]; then
	for d in tests/fuzz/corpus/*/; do NAMES+=("$(basename "$d")"); done
fi
if [ ! -f "$BUILD/build.ninja" ]; then
	CC=clang meson setup "$BUILD" >/dev/null || exit 1
fi
ninja -C "$BUILD" fuzzers >/dev/null || exit 1
mkdir -p "$WORK"
touch "$WORK/campaign.log"

spent() { # harness -> CPU seconds recorded so far
	awk -v h="$1" '$2 == h { for (i = 3; i < NF; i++) if ($i == "cpu") { sub("s", "", $(i+1)); s += $(i+1) } } END { print s + 0 }' "$WORK/campaign.log"
}

campaign() { # harness
	local n=$1 log start rc wall cpu execs cov res
	mkdir -p "$WORK/$n"
	while [ "$(spent "$n")" -lt "$CPU" ]; do
		log="$WORK/$n.$(date +%Y%m%d-%H%M%S).log"
		start=$(date +%s)
		/usr/bin/time -f '%U %S' -o "$WORK/$n.time" \
			"$ROOT/$BUILD/tests/fuzz/fuzz_$n" -max_total_time="$CHUNK" -timeout=10 \
			-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$WORK/$n-" \
			"$WORK/$n" "$ROOT/tests/fuzz/corpus/$n" >"$log" 2>&1
		rc=$?
		wall=$(($(date +%s) - start))
		cpu=$(awk '{printf "%d", $1 + $2}' "$WORK/$n.time")
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
		res=ok
		[ $rc = 0 ] || res="CRASH (exit $rc, see $log)"
		printf '%s %-7s wall %5ds cpu %5ds execs %10s %s %s\n' "$(date -Is)" "$n" "$wall" \
			"$cpu" "${execs:-?}" "${cov:-}" "$res" | tee -a "$WORK/campaign.log"
		[ $rc = 0 ] || return 1
	done
}

running=()
for n in "${NAMES[@]}"; do
	campaign "$n" &
	running+=($!)
	if [ ${#running[@]} -ge "$JOBS" ]; then
		wait "${running[0]}"
		running=("${running[@]:1}")
	fi
done
wait
echo "CPU seconds per harness:"
for n in "${NAMES[@]}"; do printf '  %-7s %5d\n' "$n" "$(spent "$n")"; done
