#!/bin/sh
# Runs inside the RDMA tier's guest (busybox sh), started by /init once the shares are mounted.
# Sets up the network and Soft-RoCE (rxe0 on dummy0, 10.99.0.1/24, MTU 9000), then runs each
# test named in /mnt/out/plan ("NAME TIMEOUT_SECONDS [PATH]" per line) from tests/rdma/tests/NAME.sh
# (or from PATH in the repository), one after the other, each under its own timeout. Per test it
# leaves in the share:
#   NAME.results  "PASS|FAIL|SKIP NAME.check [reason]" lines written by the test
#   NAME.log      the test's output
#   NAME.done     "EXIT_STATUS SECONDS" once the test has ended (missing: it never finished)
# then cleans up whatever the test left running and finally powers the guest off.
OUT=/mnt/out
. /mnt/ix/tests/rdma/guest/lib.sh
[ -f "$OUT/env" ] && . "$OUT/env"

say() { echo "ix-guest: $*"; }
up() { cut -d' ' -f1 /proc/uptime; }

hostname ixguest
/usr/sbin/ip link set lo up
/usr/sbin/ip addr add "$RDMA_IP/24" dev dummy0 &&
	/usr/sbin/ip link set dummy0 mtu 9000 up ||
	say "FATAL: cannot configure dummy0"
/usr/bin/rdma link add rxe0 type rxe netdev dummy0 || say "FATAL: rdma link add rxe0 failed"
# a NIC only when a test has a host part (tests/rdma/run.sh): QEMU user networking, the guest
# at 10.0.2.15; the host's gateways are reached through guestfwd addresses (NAME.net)
if [ -e /sys/class/net/eth0 ]; then
	/usr/sbin/ip addr add 10.0.2.15/24 dev eth0 && /usr/sbin/ip link set eth0 up ||
		say "FATAL: cannot configure eth0"
	say "eth0 up at $(up) s"
fi
say "network and rxe0 ready at $(up) s"

if [ ! -f "$OUT/plan" ]; then
	say "FATAL: no plan file in the share"
fi
while read -r name tmo path; do
	[ -n "$name" ] || continue
	t=/mnt/ix/${path:-tests/rdma/tests/$name.sh}
	: >"$OUT/$name.results"
	say "test $name start at $(up) s (timeout ${tmo}s)"
	start=$(up)
	if [ -f "$t" ]; then
		IX_RESULTS=$OUT/$name.results IX_TEST=$name \
			timeout -s KILL "$tmo" /bin/sh "$t" >"$OUT/$name.log" 2>&1 </dev/null
		rc=$?
	else
		echo "no such test: $t" >"$OUT/$name.log"
		rc=2
	fi
	secs=$(awk -v a="$start" -v b="$(up)" 'BEGIN { printf "%.1f", b - a }')
	[ "$rc" = 137 ] && echo "killed after the ${tmo}s timeout" >>"$OUT/$name.log"
	ixr_cleanup_all >>"$OUT/$name.log" 2>&1
	echo "$rc $secs" >"$OUT/$name.done"
	sync
	say "test $name end: exit $rc after ${secs}s"
done <"$OUT/plan"

say "all tests done at $(up) s; powering off"
sync
poweroff -f
