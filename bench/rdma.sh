#!/bin/bash
# The kernel initiator's fio against ix, tgt and LIO, each over iSER and TCP, in one boot of the
# RDMA tier's QEMU TCG guest (tests/rdma/): 4 KiB random read QD16, 512 KiB sequential read QD8,
# 4 KiB random write QD16, 4 KiB random read and write QD1 (ix with and without its adaptive
# poll window), IX_BENCH_TIME seconds each (default 8). Prints the table; the guest
# side is bench/rdma-guest.sh. An explicit command, not part of tests/run.sh. See docs/perf.md:
# TCG figures only compare implementations side by side in one boot, never predict hardware.
#
#   bench/rdma.sh                 release build in build-release (IX_BENCH_BUILD to change)
#   IX_BENCH_TIME=15 bench/rdma.sh
#   IX_BENCH_QD1=1 IX_BENCH_ROUNDS=3 bench/rdma.sh
#                                 only the QD1 jobs, every target and transport in 3 rounds of
#                                 alternating order; prints each round and the medians
#   IX_BENCH_POLL_US=2000 ...     the "ix" rows with another global.poll_us (default 50)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${IX_BENCH_BUILD:-build-release}
if [ ! -d "$BUILD" ]; then
	meson setup "$BUILD" --buildtype=release >&2 || exit 1
fi
ninja -C "$BUILD" >&2 || exit 1
# the guest reads IX_BENCH_TIME from the share's env file (run.sh writes only the sanitizer
# settings there): pass it through the environment run.sh copies
export IX_RDMA_GUEST_ENV="IX_BENCH_TIME=${IX_BENCH_TIME:-8} IX_BENCH_QD1=${IX_BENCH_QD1:-0} IX_BENCH_ROUNDS=${IX_BENCH_ROUNDS:-3} IX_BENCH_POLL_US=${IX_BENCH_POLL_US:-50}"
tests/rdma/run.sh --build "$BUILD" bench/rdma-guest.sh
rc=$?
T=tests/out/rdma/share/bench.table
if [ -f "$T" ]; then
	echo
	echo "kernel initiator (open-iscsi, ib_iser / iscsi_tcp) fio in one TCG guest, ${IX_BENCH_TIME:-8} s per job:"
	column -t "$T"
	if [ "${IX_BENCH_QD1:-0}" = 1 ]; then
		echo
		echo "medians over the rounds (IOPS):"
		awk 'NR > 1 && $4 != "-" { k = $2 " " $3; r[k] = r[k] " " $4; w[k] = w[k] " " $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
		function med(s,   a, m, i, j, t) { m = split(s, a, " "); for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
		END { print "target transport randread-4k-qd1 randwrite-4k-qd1 rounds"; for (i = 1; i <= n; i++) { k = order[i]; print k, med(r[k]), med(w[k]), split(r[k], x, " ") } }' "$T" | column -t
	fi
	W=tests/out/rdma/share/bench.workers
	if [ -f "$W" ]; then
		echo
		echo "how ix's workers waited (iscsi_get_stats workers, per ix run):"
		cat "$W"
	fi
fi
exit $rc
