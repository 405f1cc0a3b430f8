#!/bin/bash
# Latency benchmark of issue 19 (docs/perf.md, "Latency: queue depth 1 and one-thread
# clients"): the current tree ("new") against an older commit ("old"), tgt and istgt, with
# the same clients, QD1 and one-thread loads, idle CPU. Builds both, then runs
# bench/latency.py with both builds; every other option goes to latency.py.
#
#   bench/latency.sh [--old-ref REF] [latency.py options, e.g. --rt --reps 3 --time 5]
#
#   --old-ref REF  the "old" commit (default: the parent of the newest commit touching
#                  src/event/loop.c whose message mentions the adaptive poll window, i.e.
#                  the tree before global.poll_us). It is checked out as a detached git
#                  worktree in /tmp/ix-lat-old-SHA and built there with
#                  `meson setup --buildtype=release` (kept for the next run; the
#                  worktree is registered in this repository: `git worktree remove` it).
#
# The current tree is built in build-release (IX_BENCH_BUILD names another directory).
# Installs nothing beyond scripts/deps.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OLD_REF=
ARGS=()
while [ $# -gt 0 ]; do
	case $1 in
	--old-ref) OLD_REF=${2:?--old-ref needs a commit}; shift 2 ;;
	--old-ref=*) OLD_REF=${1#--old-ref=}; shift ;;
	-h | --help) sed -n 2,17p "$0"; python3 bench/latency.py --help; exit 0 ;;
	*) ARGS+=("$1"); shift ;;
	esac
done
./scripts/deps.sh --test >&2
if [ -z "$OLD_REF" ]; then
	POLL=$(git log -1 --format=%H -i --grep='adaptive poll' -- src/event/loop.c)
	[ -n "$POLL" ] || { echo "latency.sh: no poll-window commit found; pass --old-ref" >&2; exit 2; }
	OLD_REF=$POLL^
fi
OLD_SHA=$(git rev-parse --verify "$OLD_REF^{commit}")
OLD_DIR=/tmp/ix-lat-old-${OLD_SHA:0:12}
echo "latency.sh: old = $OLD_REF = $(git log -1 --format='%h %s' "$OLD_SHA")" >&2
if [ ! -d "$OLD_DIR/.git" ] && [ ! -f "$OLD_DIR/.git" ]; then
	git worktree add --detach "$OLD_DIR" "$OLD_SHA" >&2
fi
if [ ! -f "$OLD_DIR/build-release/build.ninja" ]; then
	(cd "$OLD_DIR" && meson setup build-release --buildtype=release >&2)
fi
ninja -C "$OLD_DIR/build-release" tools/ix-target tools/ix-bench >&2

BUILD=${IX_BENCH_BUILD:-build-release}
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" --buildtype=release >&2
fi
ninja -C "$BUILD" tools/ix-target tools/ix-bench >&2
exec python3 bench/latency.py --build "$BUILD" --old-build "$OLD_DIR/build-release" \
	--old-label "$(git log -1 --format=%h "$OLD_SHA")" "${ARGS[@]}"
