#!/bin/bash
# The clean-room check: the README's two set-up commands on a minimal Debian 12 root, as a new
# user would run them. Builds the root with mmdebstrap (--variant=minbase; only that base is
# cached, tests/lib/cleanroot.sh), copies in a clean `git archive` of HEAD (what is committed,
# nothing of this work tree's builds or installs), and inside it runs:
#   1. ./scripts/start-target.sh   must install (the build and run packages only, no test
#                                  peers), build, and bring up a target that the host's iscsi-ls
#                                  lists on 127.0.0.1:3260, and stop on SIGTERM;
#   2. ./tests/run.sh --fresh      the README's test command on its clean-room subset: the
#                                  build, the unit tests and the interop tests that need every
#                                  peer installed (docs/testing.md); must end with 0 failed.
# Anything missing from scripts/deps.sh fails one of them. Prints PASS/FAIL lines (appended to
# $IX_RESULTS when set) and exits 0 or 1. Needs root. Logs: tests/out/fresh/.
#
#   tests/fresh.sh [--keep]    --keep: leave the root in tests/out/fresh/root for a look
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. tests/lib/common.sh
. tests/lib/cleanroot.sh
OUT=$ROOT/tests/out/fresh
KEEP=0
[ "${1:-}" = --keep ] && KEEP=1
R=$OUT/root
START=$SECONDS

result() { # STATUS NAME DETAIL: one check line (tests/lib/common.sh's ixt_result)
	ixt_result "$1" "fresh.$2" "$3"
}

finish() {
	if [ $KEEP = 0 ]; then
		cleanroot_free "$R"
	else
		echo "fresh: root kept in $R (cleanroot_free it when done: . tests/lib/cleanroot.sh)"
	fi
	echo "fresh: $((SECONDS - START)) s"
	[ $IXT_FAILED = 0 ]
	exit $?
}

if [ "$(id -u)" != 0 ]; then
	result FAIL setup "needs root (chroot, mounts)"
	exit 1
fi
if ! command -v mmdebstrap >/dev/null || ! command -v iscsi-ls >/dev/null; then
	./scripts/deps.sh --fresh >/dev/null 2>&1 || true
fi
# The README's first command serves 127.0.0.1:3260 in the host's network namespace.
if (exec 3<>/dev/tcp/127.0.0.1/3260) 2>/dev/null; then
	result FAIL setup "something on this machine already listens on 127.0.0.1:3260"
	exit 1
fi
if [ -e "$R" ]; then
	cleanroot_free "$R" || { result FAIL setup "cannot remove the old root $R"; exit 1; }
fi
mkdir -p "$OUT"
rm -f "$OUT"/*.log
if ! cleanroot_new "$R" 2>"$OUT/cleanroot.log"; then
	result FAIL root "$(tail -n 3 "$OUT/cleanroot.log" | tr '\n' ' ')"
	finish
fi
trap 'cleanroot_free "$R"; exit 1' INT TERM
mkdir -p "$R/root/ix"
if ! git archive --format=tar HEAD | tar -x -C "$R/root/ix"; then
	result FAIL root "git archive HEAD failed"
	finish
fi
result PASS root "minimal Debian 12 root ($(cleanroot_run "$R" 'dpkg-query -W | wc -l') packages), HEAD $(git rev-parse --short HEAD) copied in ($((SECONDS - START)) s)"

# 1. ./scripts/start-target.sh: runs in the foreground until stopped.
t=$SECONDS
cleanroot_run "$R" 'cd ix && exec ./scripts/start-target.sh' >"$OUT/start-target.log" 2>&1 &
pid=$!
up=0
while kill -0 $pid 2>/dev/null && [ $((SECONDS - t)) -lt 900 ]; do
	if grep -q '^ix-target: ready' "$OUT/start-target.log"; then
		up=1
		break
	fi
	sleep 2
done
if [ $up = 1 ]; then
	result PASS start-target "target up $((SECONDS - t)) s after ./scripts/start-target.sh"
	iqn=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["targets"][0]["name"])' \
		etc/ix-target.json)
	# from the host (the root shares its network): the first command installs no initiator
	iscsi-ls -s iscsi://127.0.0.1:3260 >"$OUT/iscsi-ls.log" 2>&1
	if grep -q "Target:$iqn" "$OUT/iscsi-ls.log" && grep -q 'Lun:0 ' "$OUT/iscsi-ls.log"; then
		result PASS iscsi-ls "iscsi-ls (on the host) lists $iqn and its LUN 0"
	else
		result FAIL iscsi-ls "iscsi-ls did not list $iqn LUN 0: $(head -c 300 "$OUT/iscsi-ls.log")"
	fi
	# what building and running needs, not the tests' peers (scripts/deps.sh --test)
	peers=$(cleanroot_run "$R" 'dpkg-query -W -f="\${Package} \${Status}\n" tgt istgt prometheus iperf3 libiscsi-bin qemu-utils clang 2>/dev/null' |
		awk '/install ok installed/ {print $1}' | tr '\n' ' ')
	[ -z "$peers" ] &&
		result PASS start-target-deps "the first command installed none of the tests' peers" ||
		result FAIL start-target-deps "the first command installed test peers: $peers"
	grep -q '^Connect with' "$OUT/start-target.log" &&
		result PASS start-target-says-how "the script says how to connect" ||
		result FAIL start-target-says-how "no connection hint in its output"
	for p in $(cleanroot_pids "$R"); do
		[ "$(cat /proc/$p/comm 2>/dev/null)" = ix-target ] && kill -TERM "$p"
	done
	if timeout 20 tail --pid=$pid -f /dev/null; then
		wait $pid
		rc=$?
		[ $rc = 0 ] && result PASS target-stops "ix-target exited 0 on SIGTERM" ||
			result FAIL target-stops "exit status $rc after SIGTERM"
	else
		result FAIL target-stops "ix-target still running 20 s after SIGTERM"
	fi
else
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	result FAIL start-target "no ready target after $((SECONDS - t)) s; last lines: $(tail -n 8 "$OUT/start-target.log" | tr '\n' '|')"
fi

# 2. ./tests/run.sh --fresh
t=$SECONDS
cleanroot_run "$R" 'cd ix && ./tests/run.sh --fresh' >"$OUT/run.log" 2>&1
rc=$?
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/run.log" | tail -1)
np=$(echo "$last" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
nf=$(echo "$last" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p')
if [ $rc = 0 ] && [ -n "$np" ] && [ "$np" -gt 0 ] && [ "$nf" = 0 ]; then
	result PASS run-tests "./tests/run.sh --fresh: $last ($((SECONDS - t)) s)"
else
	result FAIL run-tests "./tests/run.sh --fresh exit $rc: ${last:-no summary line}; see $OUT/run.log"
	grep -E '^(FAIL|  FAIL|failed:)' "$OUT/run.log" | head -20 | sed 's/^/  | /'
	tail -n 15 "$OUT/run.log" | sed 's/^/  | /'
fi
# The interop logs of the run inside, for a look after a failure
cp -r "$R/root/ix/tests/out" "$OUT/inside-out" 2>/dev/null || true
finish
