#!/bin/sh
# timeout: 420
# iSNS discovery by the Linux kernel initiator: open-isns's isnsd in the guest (Security 0,
# the default discovery domain), ix-target (the host's build over 9p) registering with it
# through global.isns, and open-iscsi's `iscsiadm -m discovery -t isns` (iscsiadm asks the
# server through iscsid and libisns). The discovery finds ix's target at its portal, the login
# through the record it made gives a disk that takes a verified fio write; a target created
# through ix-ctl is found by the next discovery, one deleted is not; ix's own ixadm finds the
# same through the same server; ix-target deregisters at SIGTERM (isnsadm lists nothing).
. /mnt/ix/tests/rdma/guest/lib.sh
IQN=iqn.2026-11.io.ix.rdma:isns
IQN2=iqn.2026-11.io.ix.rdma:isns-two
ISNS=127.0.0.1:3205
CTL=/mnt/build/tools/ix-ctl
IXADM=/mnt/build/tools/ixadm
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"
[ -x /usr/sbin/isnsd ] || ixr_skip_all "isnsd not in the image (scripts/deps.sh --rdma installs open-isns-server, tests/rdma/build-image.sh copies it)"

mkdir -p /run/isns/db
printf '%s\n' "ServerAddress = $ISNS" "BindAddress = $ISNS" "SourceName = isns.rdma.guest" \
	"Database = /run/isns/db" "ControlSocket = /run/isns/isnsctl" \
	"PIDFile = /run/isns/isnsd.pid" "Security = 0" "DefaultDiscoveryDomain = 1" \
	>/run/isns/isnsd.conf
printf '%s\n' "ServerAddress = $ISNS" "SourceName = iqn.2026-11.io.ix.rdma:isnsadm" \
	"Security = 0" >/run/isns/isnsadm.conf
nodes() { /usr/sbin/isnsadm -c /run/isns/isnsadm.conf --list nodes 2>&1; }
listed() { nodes | grep -q "\"$1\""; }
ixr_daemon isnsd /usr/sbin/isnsd -f -4 -c /run/isns/isnsd.conf
if ixr_wait 15 sh -c "/usr/sbin/isnsadm -c /run/isns/isnsadm.conf --list entities >/dev/null 2>&1"; then
	ixr_pass isnsd "isnsd answers on $ISNS"
else
	ixr_fail isnsd "isnsd does not answer on $ISNS: $(tail -3 "$IXR_OUT/$IX_TEST.isnsd.log" | tr '\n' ' ')"
	ixr_exit
fi

printf '%s\n' '{' \
	'  "global": { "log_level": "info", "mgmt_socket": "/run/ix.sock",' \
	'              "isns": { "server": "127.0.0.1", "entity": "ix-rdma-guest" } },' \
	"  \"portals\": [ { \"name\": \"rdma-net\", \"address\": \"$RDMA_IP\", \"port\": 3260, \"tpgt\": 1 } ]," \
	"  \"targets\": [ { \"name\": \"$IQN\", \"luns\": [ { \"lun\": 0, \"backend\": \"ram\", \"size\": \"64M\" } ] } ]" \
	'}' >/run/ix-target.json
ixr_ix_start || ixr_exit
n=80
while [ $n -gt 0 ] && ! listed "$IQN"; do sleep 0.25; n=$((n - 1)); done
if listed "$IQN"; then
	ixr_pass registered "isnsadm lists $IQN"
else
	ixr_fail registered "$IQN not at the server after 20 s: $(nodes | tr '\n' ' ')"
	ixr_exit
fi
ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }

# discovery through the server, then the login through the record it stored
out=$(timeout 60 /usr/sbin/iscsiadm -m discovery -t isns -p "$ISNS" 2>&1)
echo "$out" >&2
if echo "$out" | grep -q "^$RDMA_IP:3260,1 $IQN\$"; then
	ixr_pass discovery "iscsiadm -t isns: $out"
else
	ixr_fail discovery "expected '$RDMA_IP:3260,1 $IQN', got: $out"
	ixr_exit
fi
ixr_check login timeout 90 /usr/sbin/iscsiadm -m node -T "$IQN" -p "$RDMA_IP:3260" -l || ixr_exit
if ixr_session_disk; then
	ixr_pass disk "$IXR_DISK on $IXR_SCSI_HOST"
	ixr_fio fio-write "$IXR_DISK" 16m 1m write
	ixr_fio fio-readback "$IXR_DISK" 16m 1m verify
else
	ixr_fail disk "logged in, but no SCSI disk appeared within 30 s"
fi
ixr_kernel_logout

# a target created and deleted at run time: the server follows, so does the discovery (the
# client's I/O timeout is 5 s: docs/isns.md)
ixr_check create "$CTL" -s /run/ix.sock target create "$IQN2"
ixr_check lun-create "$CTL" -s /run/ix.sock lun create "$IQN2" 0 --ram 16M
n=40
while [ $n -gt 0 ] && ! listed "$IQN2"; do sleep 0.25; n=$((n - 1)); done
out=$(timeout 60 /usr/sbin/iscsiadm -m discovery -t isns -p "$ISNS" -o nonpersistent 2>&1)
if echo "$out" | grep -q " $IQN2\$" && echo "$out" | grep -q " $IQN\$"; then
	ixr_pass discovery-added "$(echo "$out" | tr '\n' ' ')"
else
	ixr_fail discovery-added "$IQN2 not found: $(echo "$out" | tr '\n' ' ')"
fi
ixr_check delete "$CTL" -s /run/ix.sock target delete "$IQN2"
n=40
while [ $n -gt 0 ] && listed "$IQN2"; do sleep 0.25; n=$((n - 1)); done
out=$(timeout 60 /usr/sbin/iscsiadm -m discovery -t isns -p "$ISNS" -o nonpersistent 2>&1)
if echo "$out" | grep -q " $IQN\$" && ! echo "$out" | grep -q " $IQN2\$"; then
	ixr_pass discovery-removed "$(echo "$out" | tr '\n' ' ')"
else
	ixr_fail discovery-removed "$IQN2 still found, or $IQN not: $(echo "$out" | tr '\n' ' ')"
fi

# ix's own initiator asks the same server
mkdir -p /run/ixadm
echo "InitiatorName=iqn.2026-11.io.ix.rdma:ixadm" >/run/ixadm/initiatorname.iscsi
out=$(timeout 60 "$IXADM" --db /run/ixadm -m discovery -t isns -p "$ISNS" -o nonpersistent 2>&1)
if echo "$out" | grep -q "^$RDMA_IP:3260,1 $IQN\$"; then
	ixr_pass ixadm-discovery "$out"
else
	ixr_fail ixadm-discovery "expected '$RDMA_IP:3260,1 $IQN', got: $out"
fi

ixr_ix_finish
if listed "$IQN"; then
	ixr_fail deregistered "$IQN still listed after ix-target stopped: $(nodes | tr '\n' ' ')"
else
	ixr_pass deregistered "ix-target's targets gone from the server after SIGTERM"
fi
ixr_stop isnsd 10
ixr_exit
