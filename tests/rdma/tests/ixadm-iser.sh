#!/bin/sh
# timeout: 180
# ixadm (tools/ixadm, docs/initiator.md) over iSER against ix's target in the guest.
# 1. A portal serving TCP and iSER: `ixadm -m discovery -t st -I iser -p 10.99.0.1:3260` prints
#    the target (the discovery session runs over iSER: the target logs it on an "/iser" peer);
#    with -l it logs in (exact iscsiadm-style lines) through a session daemon over iSER;
#    `-m session -P 1` says "Iface Transport: iser"; `-m io readcap` gives the LUN's size;
#    1 MiB of random data written with `-m io write` and read back with `-m io read` is
#    identical; rxe0 carried the I/O; logout.
# 2. A TCP-only portal (no RDMA listener): `-I iser` discovery fails with "cannot connect"
#    (exit 4), `-I auto` falls back to TCP for the discovery and the login (the target logs
#    TCP peers), readcap works, logout.
. /mnt/ix/tests/rdma/guest/lib.sh
AX=/mnt/build/tools/ixadm
IQN=iqn.2026-11.io.ix.rdma:ixadm
DB=/run/ixadm-db
P="$RDMA_IP:3260"
[ -x "$AX" ] || ixr_skip_all "ixadm not built in the shared build dir ($AX)"
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"
export IX_INITIATOR_NAME="$IXR_INITIATOR:ixadm"

OUTF=/run/ixadm.out
# ax CHECK EXPECTED_EXIT ARGS...: run ixadm, PASS if it exits EXPECTED_EXIT; output in $OUTF
ax() {
	chk=$1 want=$2
	shift 2
	ixr_log "+ ixadm $*"
	timeout 120 "$AX" --db "$DB" "$@" >$OUTF 2>&1
	rc=$?
	sed 's/^/    /' $OUTF >&2
	if [ $rc = "$want" ]; then
		ixr_pass "$chk" "exit $rc"
		return 0
	fi
	ixr_fail "$chk" "'ixadm $*' exited $rc, expected $want: $(head -3 $OUTF | tr '\n' ' ')"
	return 1
}
# has CHECK REGEX: a line of the last output matches
has() {
	if grep -qE "$2" $OUTF; then
		ixr_pass "$1" "$(grep -m1 -E "$2" $OUTF)"
	else
		ixr_fail "$1" "no line matching '$2' in: $(head -5 $OUTF | tr '\n' ' ')"
	fi
}
# logged CHECK REGEX: a line of ix-target's log matches
logged() {
	if grep -qE "$2" "$IXR_IX_LOG"; then
		ixr_pass "$1" "target log: $(grep -m1 -E "$2" "$IXR_IX_LOG" | sed 's/^[0-9.]* *[a-z]* *[a-z]* *//')"
	else
		ixr_fail "$1" "no line matching '$2' in ix-target's log"
	fi
}

# ---- 1. over iSER ------------------------------------------------------------------------------
rm -rf "$DB"
ixr_ix_config "$IQN" 64M '"tcp", "iser"'
ixr_ix_start || ixr_exit
ax iser.discovery 0 -m discovery -t st -I iser -p "$P" &&
	has iser.discovery.line "^$RDMA_IP:3260,1 $IQN\$"
logged iser.discovery.rdma "/iser: discovery session tsih"
ax iser.node 0 -m node && has iser.node.line "^$RDMA_IP:3260,1 $IQN\$"
ax iser.login 0 -m discovery -t st -I iser -p "$P" -l &&
	has iser.login.msg "^Login to \[iface: iser, target: $IQN, portal: $RDMA_IP,3260\] successful\.\$"
logged iser.login.rdma "/iser: normal session tsih [0-9]+: $IX_INITIATOR_NAME -> $IQN"
ax iser.session 0 -m session -P 1 && has iser.session.transport "Iface Transport: iser"
T="-T $IQN"
ax iser.readcap 0 -m io $T -p "$P" readcap && has iser.readcap.size "^LUN 0: 131072 blocks of 512 bytes"
head -c 1048576 /dev/urandom >/run/ax-data
p0=$(ixr_rxe_pkts)
ax iser.write 0 -m io $T -p "$P" write --lba 4096 --file /run/ax-data
ax iser.read 0 -m io $T -p "$P" read --lba 4096 --count 2048 --file /run/ax-back
p1=$(ixr_rxe_pkts)
if cmp -s /run/ax-data /run/ax-back; then
	ixr_pass iser.data "1 MiB written with -m io write read back identical with -m io read"
else
	ixr_fail iser.data "the data read back differs from what was written"
fi
# 2 MiB moved: at least 512 RoCE packets of 4 KiB
if [ $((p1 - p0)) -ge 512 ]; then
	ixr_pass iser.rxe-counters "rxe0 packets $p0 -> $p1"
else
	ixr_fail iser.rxe-counters "rxe0 packets $p0 -> $p1: the I/O did not go over RDMA"
fi
ax iser.logout 0 -m node $T -p "$P" -u &&
	has iser.logout.msg "^Logout of \[sid: [0-9]+, target: $IQN, portal: $RDMA_IP,3260\] successful\.\$"
ax iser.no-session 21 -m session
ixr_stop ix-target 15

# ---- 2. a TCP-only portal: -I iser fails, -I auto falls back to TCP ------------------------------
rm -rf "$DB"
ixr_ix_config "$IQN" 64M '"tcp"'
ixr_ix_start || ixr_exit
ax tcp-only.iser-refused 4 -m discovery -t st -I iser -p "$P"
ax auto.discovery 0 -m discovery -t st -I auto -p "$P" -l &&
	has auto.login.msg "^Login to \[iface: default, target: $IQN, portal: $RDMA_IP,3260\] successful\.\$"
logged auto.tcp "^.*$RDMA_IP:[0-9]+: normal session tsih [0-9]+: $IX_INITIATOR_NAME -> $IQN"
if grep -q '/iser' "$IXR_IX_LOG"; then
	ixr_fail auto.no-iser "the TCP-only target logged an iSER peer"
fi
ax auto.readcap 0 -m io $T -p "$P" readcap && has auto.readcap.size "^LUN 0: 131072 blocks of 512 bytes"
ax auto.logout 0 -m node $T -p "$P" -u
ixr_stop ix-target 15
ixr_exit
