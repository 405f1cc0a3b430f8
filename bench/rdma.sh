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
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${IX_BENCH_BUILD:-build-release}
if [ ! -d "$BUILD" ]; then
	meson setup "$BUILD" --buildtype=release >&2 || exit 1
fi
ninja -C "$BUILD" >&2 || exit 1
# the guest reads IX_BENCH_TIME from the share's env file (run.sh writes only the sanitizer
# settings there): pass it through the environment run.sh copies
export IX_RDMA_GUEST_ENV="IX_BENCH_TIME=${IX_BENCH_TIME:-8}"
tests/rdma/run.sh --build "$BUILD" bench/rdma-guest.sh
rc=$?
T=tests/out/rdma/share/bench.table
if [ -f "$T" ]; then
	echo
	echo "kernel initiator (open-iscsi, ib_iser / iscsi_tcp) fio in one TCG guest, ${IX_BENCH_TIME:-8} s per job:"
	column -t "$T"
fi
exit $rc
