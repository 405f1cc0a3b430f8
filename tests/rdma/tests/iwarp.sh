#!/bin/sh
# timeout: 900
# iSER over iWARP: Soft-iWARP (siw0 on dummy1, $SIW_IP; set up here, removed after by
# ixr_cleanup_all) instead of Soft-RoCE. iWARP
# differs where iSER cares: the connection is set up over TCP with MPA (the initiator sends
# first), an RDMA Read's sink must be registered for remote writes (the Read Response is
# placed like a tagged write), IRD/ORD are negotiated in MPA. Checked here:
#   0. the fabric: siw0 active with transport iWARP, rping over it (RDMA Read/Write validated);
#   1. ix's initiator (ini_accept -I iser) against ix's target on $SIW_IP: SendTargets over
#      iSER, login, 64 MiB of random data written at QD32 and read back equal (reads placed by
#      the target's RDMA Writes, writes fetched by its RDMA Reads), ABORT TASK and LUN RESET
#      under load; ix-target's log says the connections were on siw0, iWARP;
#   2. the Linux kernel iSER initiator (open-iscsi, ib_iser) against ix's target over siw0: the
#      discovery and login, fio write and verified read-back (ib_iser's refusal of an iWARP
#      device, if it refuses, is reported as a skip with its message);
#   3. ix's initiator against LIO with isert over siw0.
. /mnt/ix/tests/rdma/guest/lib.sh
RDMA_IP=$SIW_IP # every helper of lib.sh below (ix, LIO, the kernel initiator) on siw0
ACCEPT=/mnt/build/tests/integration/ini_accept
[ -x "$ACCEPT" ] || ixr_skip_all "ini_accept not built in the shared build dir ($ACCEPT)"
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"

# 0. the fabric
if ! err=$(ixr_siw_up 2>&1); then
	ixr_fail siw-setup "siw0 on dummy1 ($SIW_IP): $err"
	ixr_exit
fi
if ! /usr/bin/rdma link show siw0/1 2>/dev/null | grep -q 'state ACTIVE'; then
	ixr_fail siw-link "siw0 is not there or not active: $(/usr/bin/rdma link show 2>&1 | tr '\n' ' ')"
	ixr_exit
fi
ixr_pass siw-link "$(/usr/bin/rdma link show siw0/1)"
info=$(/usr/bin/ibv_devinfo -d siw0 2>&1)
echo "$info" >&2
if echo "$info" | grep -q 'transport:.*iWARP' && echo "$info" | grep -q 'PORT_ACTIVE'; then
	ixr_pass ibv-devinfo "siw0: transport iWARP, port 1 PORT_ACTIVE"
else
	ixr_fail ibv-devinfo "siw0 is not an active iWARP device: $(echo "$info" | grep -E 'transport|state' | tr '\n' ' ')"
fi
ixr_rping_server rping-server "$SIW_IP" -C 20 -V -S 4096
ixr_check rping timeout 60 /usr/bin/rping -c -a "$SIW_IP" -C 20 -V -S 4096
ixr_daemon_exit rping-server 10


# 1. ix's initiator against ix's target. siw's connections are kernel TCP connections, so iSER
# and TCP cannot listen on the same address and port (EADDRINUSE: the host's port space is
# shared): iSER on 3260, TCP on 3261, two portals (docs/configuration.md says so)
IQN=iqn.2026-11.io.ix.rdma:iwarp
ixr_ix_siw_config "$IQN" 128M
if ixr_ix_start; then
	ixr_accept_run ix -I iser -p "$SIW_IP:3260" -T "$IQN" -l 0 discover login io tmf
	n=$(grep -c 'connected on siw0 (iWARP)' "$IXR_IX_LOG")
	if [ "$n" -ge 2 ]; then
		ixr_pass ix.on-siw "ix-target: $n iSER connections on siw0 (iWARP): $(grep -m1 'connected on siw0' "$IXR_IX_LOG")"
	else
		ixr_fail ix.on-siw "ix-target logged $n connections on siw0: $(grep -m2 'connected on' "$IXR_IX_LOG" | tr '\n' ' ')"
	fi

	# 2. the kernel's iSER initiator against the same target
	ixr_iscsid_start || ixr_fail iscsid "iscsid did not start"
	d0=$(dmesg | wc -l)
	if /usr/sbin/iscsiadm -m discovery -o new -o old -t st -I iser -p "$SIW_IP:3260" >/run/disc.out 2>&1 &&
		cat /run/disc.out >&2 &&
		timeout 90 /usr/sbin/iscsiadm -m node -T "$IQN" -p "$SIW_IP:3260" -I iser -l >/run/login.out 2>&1; then
		if ixr_session_disk; then
			ixr_pass kernel.disk "$IXR_DISK on $IXR_SCSI_HOST ($(cat "/sys/class/scsi_host/$IXR_SCSI_HOST/proc_name"))"
			ixr_fio kernel.fio-write "$IXR_DISK" 32m 1m write
			ixr_fio kernel.fio-readback "$IXR_DISK" 32m 1m verify
		else
			ixr_fail kernel.disk "logged in over iSER, but no SCSI disk appeared within 30 s"
		fi
		ixr_kernel_logout
	else
		cat /run/disc.out /run/login.out >&2
		msg=$(dmesg | tail -n +"$((d0 + 1))" | grep -iE 'iser|iwarp|siw' | tail -3 | tr '\n' ' ')
		if echo "$msg" | grep -qiE 'not supported|unsupported|iwarp'; then
			ixr_skip kernel "ib_iser does not take the iWARP device: $msg"
		else
			ixr_fail kernel.login "$(tail -2 /run/login.out | tr '\n' ' ') dmesg: $msg"
		fi
	fi
	ixr_ix_finish
fi

# 3. ix's initiator against LIO with isert. LIO's iSER listener is a child of a TCP portal of
# the same address and port, which siw cannot share with the TCP listener (see 1.): when
# enabling isert there fails with EADDRINUSE that is LIO's limit on siw, reported as a skip
LIQN=iqn.2026-11.io.ix.rdma:iwarp-lio
if ixr_lio_start "$LIQN" 128 0; then
	np=$IXR_LIO/iscsi/$LIQN/tpgt_1/np/$SIW_IP:3260
	if err=$(sh -c "echo 1 >$np/iser" 2>&1); then
		ixr_accept_run lio -I iser -p "$SIW_IP:3260" -T "$LIQN" -l 0 discover login io
	elif echo "$err" | grep -q 'Address already in use'; then
		ixr_skip lio "LIO cannot listen for iSER on siw0: its isert portal shares $SIW_IP:3260 with its TCP portal, and siw's listener is a kernel TCP socket ($err); LIO has no iSER-only portal"
	else
		ixr_fail lio.iser "enabling isert on $SIW_IP:3260: $err"
	fi
	ixr_lio_stop
else
	ixr_fail lio.target "LIO on $SIW_IP could not be set up"
fi
ixr_exit
