#!/bin/bash
# A long fuzzing campaign (docs/fuzzing.md): runs each libFuzzer harness in turn for SECONDS,
# one process per harness, keeping the growing corpus in WORKDIR/<harness> between runs (the
# committed seeds in tests/fuzz/corpus are read, never written). Appends one line per harness
# to WORKDIR/campaign.log: date, harness, wall seconds, user+system CPU seconds, executions,
# coverage, result. Crash reproducers land in WORKDIR/<harness>-crash-*.
#
#   tests/fuzz/campaign.sh [-s SECONDS] [-w WORKDIR] [-b BUILD_DIR] [HARNESS...]
#     defaults: 600 s, /var/tmp/ix-fuzz, build-fuzz (configured with CC=clang), all harnesses
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SECS=600
WORK=/var/tmp/ix-fuzz
BUILD=build-fuzz
while getopts s:w:b:h o; do
	case $o in
	s) SECS=$OPTARG ;;
	w) WORK=$OPTARG ;;
	b) BUILD=$OPTARG ;;
	*) sed -n 2,10p "$0"; exit 2 ;;
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
for n in "${NAMES[@]}"; do
	mkdir -p "$WORK/$n"
	log="$WORK/$n.$(date +%Y%m%d-%H%M%S).log"
	start=$(date +%s)
	/usr/bin/time -f '%U %S' -o "$WORK/$n.time" \
		"$ROOT/$BUILD/tests/fuzz/fuzz_$n" -max_total_time="$SECS" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$WORK/$n-" \
		"$WORK/$n" "$ROOT/tests/fuzz/corpus/$n" >"$log" 2>&1
	rc=$?
	wall=$(($(date +%s) - start))
	cpu=$(awk '{printf "%d", $1 + $2}' "$WORK/$n.time")
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
	res=ok
	[ $rc = 0 ] || res="CRASH (exit $rc, see $log)"
	printf '%s %-7s wall %5ds cpu %5ds execs %10s %s %s\n' "$(date -Is)" "$n" "$wall" "$cpu" \
		"${execs:-?}" "${cov:-}" "$res" | tee -a "$WORK/campaign.log"
done
