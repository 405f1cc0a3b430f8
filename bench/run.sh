#!/bin/bash
# Side-by-side benchmark: ix-target against tgtd with equivalent LUNs, the same clients run
# against each in alternation, repeated, medians and ratios. See docs/perf.md.
#
#   bench/run.sh                      everything, 5 repetitions of 5 s each (~15 min)
#   bench/run.sh --reps 9 --time 8    more repetitions, longer runs
#   bench/run.sh --quick              1 repetition of 2 s (a smoke test of the harness)
#   bench/run.sh --luns rbd --no-digests   the RBD rows: ix against tgt's bs_rbd on a
#                                     single-node Ceph cluster it starts (tests/ceph/)
#   bench/run.sh --json out.json      also write the results as JSON ("-": JSON on stdout)
#   bench/run.sh --help               all options (bench/bench.py)
#
# Installs nothing beyond scripts/deps.sh. Builds ix in build-release (an optimised build,
# never the sanitizer one) unless IX_BENCH_BUILD names another build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
# --luns ...rbd... needs the Ceph packages and tgt's bs_rbd as well
case " $* " in *rbd*) ./scripts/deps.sh --test --ceph >&2 ;; *) ./scripts/deps.sh --test >&2 ;; esac
BUILD=${IX_BENCH_BUILD:-build-release}
if [ ! -d "$BUILD" ]; then
	meson setup "$BUILD" --buildtype=release >&2
fi
ninja -C "$BUILD" tools/ix-target tools/ix-bench >&2
exec python3 bench/bench.py --build "$BUILD" "$@"
