#!/bin/sh
# timeout: 150
# Soft-RoCE works in the guest: rxe0 on dummy0 is active with RoCE v2 and the IPv4-mapped GID of
# 10.99.0.1, ibv_devices / ibv_devinfo see it, and two processes talk over it with rping (rdma_cm
# connection, RDMA Read/Write, data validated) and ibv_rc_pingpong (raw RC QP, buffers checked).
. /mnt/ix/tests/rdma/guest/lib.sh

ixr_check rdma-link sh -c '/usr/bin/rdma link show rxe0/1 | grep -q "state ACTIVE"'
ixr_check ibv-devices sh -c '/usr/bin/ibv_devices | grep -qw rxe0'
info=$(/usr/bin/ibv_devinfo -d rxe0 2>&1)
echo "$info" >&2
if echo "$info" | grep -q 'PORT_ACTIVE' && echo "$info" | grep -q 'link_layer:.*Ethernet'; then
	ixr_pass ibv-devinfo "rxe0 port 1 PORT_ACTIVE, Ethernet link layer"
else
	ixr_fail ibv-devinfo "rxe0 port 1 not PORT_ACTIVE on Ethernet"
fi
gid=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)
gtype=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1 2>/dev/null)
if [ "$gid" = 0000:0000:0000:0000:0000:ffff:0a63:0001 ] && [ "$gtype" = "RoCE v2" ]; then
	ixr_pass gid "index 1 is $gid ($gtype)"
else
	ixr_fail gid "index 1 is '$gid' ($gtype), expected ::ffff:10.99.0.1, RoCE v2"
fi

p0=$(ixr_rxe_pkts)
ixr_rping_server rping-server "$RDMA_IP" -C 50 -V -S 4096
ixr_check rping timeout 60 /usr/bin/rping -c -a "$RDMA_IP" -C 50 -V -S 4096
if ! ixr_daemon_exit rping-server 10; then
	ixr_fail rping-server "rping server still running 10 s after the client finished"
elif [ "$IXR_RC" = 0 ]; then
	ixr_pass rping-server "server exited 0 after 50 validated pings"
else
	ixr_fail rping-server "rping server exited $IXR_RC"
fi

ixr_daemon pingpong-server /usr/bin/ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -m 4096
# Its QP numbers are exchanged over TCP port 18515: wait for that listener, not a fixed time
if ! ixr_wait 30 ixr_tcp_listening 18515; then
	cat /proc/net/tcp /proc/net/tcp6 >&2
	ixr_fail pingpong-listen "ibv_rc_pingpong server not listening on TCP 18515 after 30 s"
fi
out=$(timeout 60 /usr/bin/ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -m 4096 "$RDMA_IP" 2>&1)
rc=$?
echo "$out" >&2
ixr_daemon_exit pingpong-server 10
src=${IXR_RC:-"still running"}
if [ $rc = 0 ] && [ "$src" = 0 ] && echo "$out" | grep -q 'bytes in .* seconds'; then
	ixr_pass rc-pingpong "$(echo "$out" | grep 'bytes in')"
else
	ixr_fail rc-pingpong "client exited $rc, server $src: $(echo "$out" | tail -1)"
fi
p1=$(ixr_rxe_pkts)
if [ $((p1 - p0)) -ge 400 ]; then
	ixr_pass rxe-counters "rxe0 packets $p0 -> $p1"
else
	ixr_fail rxe-counters "rxe0 packets $p0 -> $p1: the traffic did not go through rxe0"
fi
ixr_exit
