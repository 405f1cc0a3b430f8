#!/bin/bash
# The whole test suite: installs missing Debian packages, builds a normal and an ASan+UBSan
# tree, runs the unit tests in both, checks that the tree builds with clang, then every interop
# test (tests/interop/*.sh and *.py) against the real ix-target daemon from the sanitizer build
# (those with a Ceph cluster of their own, and those marked "# ix-suite: parallel", last,
# IX_CEPH_JOBS at a time, default 3), then the
# set-up tier and the RDMA tier (tests/rdma/: a QEMU guest with Debian's kernel running the
# Linux initiator, Soft-RoCE, LIO and tgt against the same build). Prints the time each tier
# took, then ends with one line "N passed, N failed, N skipped" and exits non-zero if anything
# failed. Logs: tests/out/ (the RDMA tier's: tests/out/rdma/). Long forms (the 5-minute soak,
# iser-perf): docs/testing.md, "The suite's time, and the long forms".
#
#   tests/run.sh [--quick | --fresh] [--filter PATTERN] [--peer ix|tgt] [--rdma | --no-rdma]
#     --quick    no ASan build (interop tests use the normal build), no clang build, no RDMA tier
#     --fresh    the clean-room subset (tests/fresh.sh runs it in a minimal Debian root): --quick,
#                and of the interop tests only those that need each peer installed ($FRESH_TESTS)
#     --filter   run only interop and RDMA tests whose name matches PATTERN
#     --peer     run the interop tests against tgt instead of ix (to check the tests)
#     --rdma     run the RDMA tier even with --quick;  --no-rdma: never run it
#     --no-setup skip the set-up tier (tests/fresh.sh, the clean-room check of the README's
#                commands, and tests/package.sh, the Debian package); --quick skips it too
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
FILTER=
PEER=ix
RDMA=default
FRESH=0
SETUP=1
# --fresh: libiscsi's tools and QEMU's iscsi:// (libiscsi-bin, qemu-utils, qemu-block-extra),
# tgt beside ix (ix-bench.sh runs both), and durability.py (mounts tracefs itself)
FRESH_TESTS="libiscsi-tools qemu ix-bench durability"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--fresh) QUICK=1 FRESH=1 ;;
	--filter) FILTER=$2; shift ;;
	--peer) PEER=$2; shift ;;
	--rdma) RDMA=1 ;;
	--no-rdma) RDMA=0 ;;
	--no-setup) SETUP=0 ;;
	-h|--help) sed -n 2,20p "$0"; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

OUT=$ROOT/tests/out
mkdir -p "$OUT"
PASS=0 FAIL=0 SKIP=0
FAILED_NAMES=()
. tests/lib/sanitizer.sh
# The time each tier took, printed at the end (before the totals line, which stays the last).
declare -A TIER_SECS
tier_time() { # NAME START
	TIER_SECS[$1]=$((SECONDS - $2))
}
tier_start=$SECONDS

# RDMA tier: default on (about 3 minutes from a cold cache; docs/testing.md has the
# measurements), off with --quick unless --rdma, and against --peer tgt (its tests pick peers).
RDMA_WHY=
if [ "$RDMA" = default ]; then
	RDMA=1
	[ "$QUICK" = 1 ] && RDMA=0 RDMA_WHY="--quick; add --rdma to run it"
	[ "$PEER" = ix ] || RDMA=0 RDMA_WHY="--peer $PEER; the guest's tests choose their own peers"
elif [ "$RDMA" = 0 ]; then
	RDMA_WHY="--no-rdma"
fi

# Set-up tier: on (about 2 minutes for the clean room), off with --quick, --fresh (it is what
# runs inside the clean room) or --no-setup; it needs root and a git checkout (it tests HEAD).
SETUP_WHY=
[ "$QUICK" = 1 ] && SETUP=0 SETUP_WHY="--quick"
[ "$SETUP" = 0 ] && [ -z "$SETUP_WHY" ] && SETUP_WHY="--no-setup"
[ "$PEER" = ix ] || SETUP=0 SETUP_WHY="--peer $PEER"

DEPS_ARGS="--test --ceph $([ "$RDMA" = 1 ] && echo --rdma) $([ "$SETUP" = 1 ] && echo --fresh --package)"
if ! ./scripts/deps.sh $DEPS_ARGS >"$OUT/deps.log" 2>&1; then
	echo "run.sh: FAILED: ./scripts/deps.sh $DEPS_ARGS; last lines of $OUT/deps.log:"
	tail -20 "$OUT/deps.log" | sed 's/^/  | /'
	echo "0 passed, 1 failed"
	exit 1
fi
tier_time deps $tier_start

build() { # dir, meson options...: on failure says which command failed, with its log's tail
	local dir=$1 log; shift
	if [ ! -f "$dir/build.ninja" ]; then
		log="$OUT/setup-$(basename "$dir").log"
		if ! meson setup "$dir" "$@" >"$log" 2>&1; then
			echo "run.sh: FAILED: meson setup $dir $*; last lines of $log:"
			tail -25 "$log" | sed 's/^/  | /'
			return 1
		fi
	fi
	log="$OUT/build-$(basename "$dir").log"
	if ! ninja -C "$dir" >"$log" 2>&1; then
		echo "run.sh: FAILED: ninja -C $dir; last lines of $log:"
		tail -25 "$log" | sed 's/^/  | /'
		return 1
	fi
}

unit() { # dir label
	local dir=$1 label=$2
	local log="$OUT/unit-$label.log"
	meson test -C "$dir" --suite unit --suite fuzz --print-errorlogs >"$log" 2>&1
	# count every TAP subtest individually: "ok N" / "not ok N" lines in meson's log
	local tl="$dir/meson-logs/testlog.txt"
	local p f s
	p=$(grep -E '^ok [0-9]+' "$tl" | grep -cvE '# (SKIP|skip)')
	s=$(grep -E '^ok [0-9]+' "$tl" | grep -cE '# (SKIP|skip)')
	f=$(grep -cE '^not ok [0-9]+' "$tl")
	SKIP=$((SKIP + s))
	# non-TAP tests (fuzz corpus replay) count once each
	local np nf
	np=$(grep -cE '^ *[0-9]+/[0-9]+ ix:fuzz .* OK ' "$log")
	nf=$(grep -cE '^ *[0-9]+/[0-9]+ ix:(unit|fuzz) .* (FAIL|TIMEOUT|ERROR)' "$log")
	PASS=$((PASS + p + np))
	FAIL=$((FAIL + f + nf))
	echo "unit ($label): $((p + np)) passed, $((f + nf)) failed"
	if [ $((f + nf)) -gt 0 ]; then
		FAILED_NAMES+=("unit-$label")
		grep -E '^not ok|FAIL|ERROR' "$log" "$tl" | head -30
	fi
}

tier_start=$SECONDS
if ! build build; then
	echo "0 passed, 1 failed"
	exit 1
fi
unit build normal
IXB=build
if [ $QUICK = 0 ]; then
	if build build-asan -Db_sanitize=address,undefined -Db_lundef=false; then
		export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
		export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
		unit build-asan asan
		IXB=build-asan
	else
		FAIL=$((FAIL + 1))
		FAILED_NAMES+=("build-asan")
	fi
fi
tier_time unit $tier_start # the normal and ASan builds and their unit and corpus tests
if [ $QUICK = 0 ]; then
	# The tree must also build with clang (-Werror; clang warns where gcc does not, e.g.
	# -Wmissing-field-initializers on positional initialisers). One counted check; a clean
	# build costs ~20 s on 2 cores, an incremental one a few seconds.
	start=$SECONDS
	if CC=clang build build-clang; then
		PASS=$((PASS + 1))
		echo "build (clang): passed ($((SECONDS - start))s)"
	else
		FAIL=$((FAIL + 1))
		FAILED_NAMES+=("build-clang")
		echo "build (clang): failed"
		grep -E 'error|FAILED' "$OUT/build-build-clang.log" "$OUT/setup-build-clang.log" 2>/dev/null | head -20
	fi
	tier_time clang $start
fi

# Brief fuzzing (not with --quick): with clang's libFuzzer, each harness of tests/fuzz runs for
# IX_FUZZ_SECONDS (default 10; 0 = off), two at a time, starting from its committed corpus
# (new inputs go to a scratch directory, not into the tree). Each harness counts as one check;
# a crash fails it and its reproducer is kept in tests/out/fuzz/ (docs/fuzzing.md).
fuzz_brief() {
	local secs=${IX_FUZZ_SECONDS:-10} dir=build-clang names=() running=() n
	[ "$secs" -gt 0 ] 2>/dev/null || return 0
	if ! command -v clang >/dev/null; then
		SKIP=$((SKIP + 1))
		echo "fuzz (clang): skipped: clang not installed"
		return 0
	fi
	[ -f $dir/build.ninja ] || return 0 # the clang build failed: counted above
	if ! ninja -C $dir fuzzers >"$OUT/build-fuzzers.log" 2>&1; then
		tail -30 "$OUT/build-fuzzers.log"
		FAIL=$((FAIL + 1))
		FAILED_NAMES+=("build-fuzzers")
		return 0
	fi
	rm -rf "$OUT/fuzz"
	mkdir -p "$OUT/fuzz"
	for f in tests/fuzz/corpus/*/; do names+=("$(basename "$f")"); done
	local start=$SECONDS
	for n in "${names[@]}"; do
		mkdir -p "$OUT/fuzz/$n.new"
		(cd "$OUT/fuzz" && "$ROOT/$dir/tests/fuzz/fuzz_$n" -max_total_time="$secs" \
			-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$OUT/fuzz/$n-" \
			-print_final_stats=1 "$n.new" "$ROOT/tests/fuzz/corpus/$n" >"$n.log" 2>&1
		 echo $? >"$n.rc") &
		running+=($!)
		if [ ${#running[@]} -ge 2 ]; then
			wait "${running[0]}"
			running=("${running[@]:1}")
		fi
	done
	wait
	local p=0 f=0 execs
	for n in "${names[@]}"; do
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/fuzz/$n.log")
		if [ "$(cat "$OUT/fuzz/$n.rc")" = 0 ]; then
			p=$((p + 1))
		else
			f=$((f + 1))
			FAILED_NAMES+=("fuzz-$n")
			echo "  fuzz_$n failed after ${execs:-?} runs; reproducer: $(ls "$OUT/fuzz/$n-"* 2>/dev/null | head -1)"
			grep -m3 -E 'ERROR|SUMMARY|runtime error' "$OUT/fuzz/$n.log" | sed 's/^/  | /'
		fi
	done
	PASS=$((PASS + p)) FAIL=$((FAIL + f))
	echo "fuzz (clang, ${secs}s each): $p passed, $f failed ($((SECONDS - start))s)"
}
if [ $QUICK = 0 ]; then
	tier_start=$SECONDS
	fuzz_brief
	tier_time fuzz $tier_start
fi

# tally LABEL RES LOG RC: count the PASS/FAIL/SKIP lines of RES into p, f, s, and turn an exit
# status that named no check into one: 77 is a whole-test skip (its reason on a "SKIP:" line of
# LOG), any other non-zero status a failure (crash, timeout, set-up error).
tally() {
	local label=$1 res=$2 log=$3 rc=$4
	p=$(grep -c '^PASS ' "$res")
	f=$(grep -c '^FAIL ' "$res")
	s=$(grep -c '^SKIP ' "$res")
	if [ "$rc" = 77 ] && [ $((p + f + s)) = 0 ]; then
		s=1
		echo "SKIP $label $(grep -m1 '^SKIP: ' "$log" | cut -c7-)" >>"$res"
	elif [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "FAIL $label exit status $rc" >>"$res"
	fi
}

# report TITLE FAILNAME RES LOG RC START EXTRA: add p, f, s to the totals, print the summary
# line, EXTRA (indented), the skips, and on failure the failed checks and the log's tail.
report() {
	local title=$1 failname=$2 res=$3 log=$4 rc=$5 start=$6 extra=$7
	PASS=$((PASS + p)) FAIL=$((FAIL + f)) SKIP=$((SKIP + s))
	echo "$title: $p passed, $f failed, $s skipped (exit $rc, $((SECONDS - start))s)"
	[ -n "$extra" ] && printf '%s\n' "$extra" | sed 's/^/  /'
	grep '^SKIP ' "$res" | head -20 | sed 's/^/  /'
	if [ "$f" -gt 0 ]; then
		FAILED_NAMES+=("$failname")
		grep '^FAIL ' "$res" | head -40 | sed 's/^/  /'
		echo "  ---- last lines of $log"
		tail -25 "$log" | sed 's/^/  | /'
	fi
}

# Interop: every executable tests/interop/*.sh and *.py. Each appends one line per check to
# $IX_RESULTS ("PASS name", "FAIL name reason", "SKIP name reason") and exits 0 / 1 / 77.
# The tests that start a Ceph cluster of their own (they import tests/lib/ixceph.py) form the
# ceph tier, after the others: they mostly wait (for lock checks, timeouts, OSDs), use free
# ports and temporary directories of their own, and run IX_CEPH_JOBS (default 3) at a time.
# Other tests that mostly wait on a peer's timers and use only free ports and temporary
# directories of their own join them with a line "# ix-suite: parallel" (isns.py, iscsi-test-cu.sh).
export IX_BUILD=$ROOT/$IXB IX_PEER=$PEER IX_OUT=$OUT
interop_start() { # TEST NAME: runs it in the background; its exit status goes to interop-NAME.rc
	local t=$1 name=$2 run=bash
	[[ $t == *.py ]] && run=python3
	: >"$OUT/interop-$name.results"
	# daemon logs of an earlier run must not be judged again
	rm -f "$OUT/$name".*.log "$OUT/interop-$name.rc"
	(
		IX_RESULTS=$OUT/interop-$name.results timeout -k 10 1200 $run "$t" \
			>"$OUT/interop-$name.log" 2>&1
		echo $? >"$OUT/interop-$name.rc"
	) &
}
interop_report() { # NAME START: counts and prints a finished test
	local name=$1 start=$2 n rc
	local log="$OUT/interop-$name.log" res="$OUT/interop-$name.results"
	rc=$(cat "$OUT/interop-$name.rc" 2>/dev/null || echo 1)
	tally "$name" "$res" "$log" "$rc"
	if ! grep -q '\.sanitizer ' "$res" && ix_sanitizer_found "$OUT/$name".*.log; then
		echo "FAIL $name.sanitizer report in the daemon's log" >>"$res"
		f=$((f + 1))
	fi
	report "interop $name" "interop-$name" "$res" "$log" "$rc" "$start" \
		"$(sed -n '/per family/,/(per run/p' "$log")"
	n=$(grep -c '^SKIP .*pending: ' "$res")
	[ "$n" -gt 0 ] && echo "  ($n skips of work pending on another branch, listed in the test)"
}
interop_tests=() ceph_tests=()
for t in tests/interop/*.sh tests/interop/*.py; do
	[ -f "$t" ] && [ -x "$t" ] || continue
	name=$(basename "$t")
	name=${name%.*}
	if [ -n "$FILTER" ] && [[ $name != *$FILTER* ]]; then
		continue
	fi
	if [ $FRESH = 1 ] && [[ " $FRESH_TESTS " != *" $name "* ]]; then
		continue
	fi
	if grep -q '^import ixceph\|^# ix-suite: parallel' "$t"; then
		ceph_tests+=("$t")
	else
		interop_tests+=("$t")
	fi
done
# The longest start first, so that none of them is left to run alone at the end (measured in a
# CI run, docs/testing.md); the others follow in name order.
LONG_FIRST="rbd iscsi-test-cu chaos_short ha_own ha_rejoin isns rbd_full ha_pr"
ordered=()
for n in $LONG_FIRST; do
	for t in "${ceph_tests[@]}"; do
		[[ $(basename "$t") == "$n".* ]] && ordered+=("$t")
	done
done
for t in "${ceph_tests[@]}"; do
	n=$(basename "$t")
	[[ " $LONG_FIRST " == *" ${n%.*} "* ]] || ordered+=("$t")
done
ceph_tests=("${ordered[@]}")
tier_start=$SECONDS
for t in "${interop_tests[@]}"; do
	name=$(basename "$t")
	name=${name%.*}
	start=$SECONDS
	interop_start "$t" "$name"
	wait $!
	interop_report "$name" "$start"
done
[ ${#interop_tests[@]} -gt 0 ] && tier_time interop $tier_start
# the ceph tier: IX_CEPH_JOBS at a time, each reported as it ends
tier_start=$SECONDS
running=()
for t in "${ceph_tests[@]}" ""; do
	if [ -n "$t" ]; then
		name=$(basename "$t")
		name=${name%.*}
		interop_start "$t" "$name"
		running+=("$name:$SECONDS")
	fi
	# with a slot free go on starting; after the last, until every test has been reported
	while [ ${#running[@]} -gt 0 ] &&
		{ [ ${#running[@]} -ge "${IX_CEPH_JOBS:-3}" ] || [ -z "$t" ]; }; do
		wait -n
		left=()
		for r in "${running[@]}"; do
			if [ -f "$OUT/interop-${r%%:*}.rc" ]; then
				interop_report "${r%%:*}" "${r#*:}"
			else
				left+=("$r")
			fi
		done
		running=("${left[@]}")
	done
done
[ ${#ceph_tests[@]} -gt 0 ] && tier_time ceph $tier_start

# RDMA tier: one guest boot for every test of tests/rdma/tests/ (matching --filter), against
# the same ix build as the interop tests. It runs in the background beside the set-up tier
# (the guest mostly waits on QEMU's emulated CPUs, the clean room on apt and the compiler;
# neither uses the other's ports or files) and is reported after it.
rdma_pid= rtests=()
if [ "$RDMA" = 1 ]; then
	# the default list leaves out the throughput comparison iser-perf; --filter picks from all
	for t in $(tests/rdma/run.sh "$([ -n "$FILTER" ] && echo --list-all || echo --list)"); do
		if [ -z "$FILTER" ] || [[ $t == *$FILTER* ]]; then rtests+=("$t"); fi
	done
	if [ ${#rtests[@]} -gt 0 ]; then
		rdma_res="$OUT/rdma.results"
		: >"$rdma_res"
		rdma_t0=$SECONDS
		rm -f "$OUT/rdma.rc"
		(
			IX_RESULTS=$rdma_res IX_BUILD=$ROOT/$IXB timeout -k 10 2400 tests/rdma/run.sh \
				"${rtests[@]}" >"$OUT/rdma.log" 2>&1
			echo $? >"$OUT/rdma.rc"
		) &
		rdma_pid=$!
	fi
fi

# Set-up tier: the README's two commands in a minimal Debian root (tests/fresh.sh) and the
# Debian package built, checked, installed and purged (tests/package.sh). They use port 3260 on
# 127.0.0.1 and test what is committed (HEAD), so uncommitted changes are not in them.
if [ "$SETUP" = 1 ]; then
	tier_start=$SECONDS
	for t in tests/fresh.sh tests/package.sh; do
		[ -f "$t" ] || continue
		name=$(basename "$t" .sh)
		if [ -n "$FILTER" ] && [[ $name != *$FILTER* ]]; then
			continue
		fi
		res="$OUT/setup-$name.results"
		log="$OUT/setup-$name.log"
		: >"$res"
		start=$SECONDS
		if [ "$(id -u)" != 0 ]; then
			echo "SKIP $name needs root (chroot, mounts, package installs)" >"$res"
			rc=0
		elif ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
			echo "SKIP $name needs a git checkout (it tests git archive HEAD)" >"$res"
			rc=0
		else
			IX_RESULTS=$res timeout -k 10 1500 bash "$t" >"$log" 2>&1
			rc=$?
		fi
		tally "$name" "$res" "$log" $rc
		report "setup $name" "setup-$name" "$res" "$log" $rc $start ""
	done
	tier_time setup $tier_start
else
	echo "setup: not run ($SETUP_WHY)"
fi

if [ "$RDMA" = 1 ]; then
	if [ -n "$rdma_pid" ]; then
		wait "$rdma_pid"
		rc=$(cat "$OUT/rdma.rc" 2>/dev/null || echo 1)
		tally rdma "$rdma_res" "$OUT/rdma.log" "$rc"
		report "rdma ${rtests[*]}" rdma "$rdma_res" "$OUT/rdma.log" "$rc" "$rdma_t0" \
			"$(grep -E '^rdma(: image|: guest ran| [a-z-]+:)' "$OUT/rdma.log")"
		tier_time rdma "$rdma_t0"
	fi
else
	echo "rdma: not run ($RDMA_WHY)"
fi

[ ${#FAILED_NAMES[@]} -gt 0 ] && echo "failed: ${FAILED_NAMES[*]}"
times=()
for t in deps unit fuzz clang interop ceph setup rdma; do
	if [ -n "${TIER_SECS[$t]:-}" ]; then
		times+=("$t ${TIER_SECS[$t]} s")
	else
		times+=("$t -")
	fi
done
# the total is the wall-clock time: the RDMA tier runs beside the set-up tier
total=$SECONDS
echo "time per tier: $(printf '%s, ' "${times[@]}")total $((total / 60)) min $((total % 60)) s"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
