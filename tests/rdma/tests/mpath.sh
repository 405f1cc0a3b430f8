#!/bin/sh
# timeout: 600
# host: tests/rdma/host/mpath.py
# Issue 18's acceptance: the Linux kernel initiator with dm-multipath (multipath-tools'
# multipathd) and scsi_dh_alua writes through two ix gateways exporting one RBD image as one LU,
# and survives the loss of the owner. The gateways and a single-node Ceph cluster run on the
# HOST (tests/rdma/host/mpath.py); the guest reaches them through QEMU user networking
# (IXR_PORTAL1 = gateway a, ALUA group 1, lock owner; IXR_PORTAL2 = gateway b, group 2, standby).
#
#  1. open-iscsi logs in to both (replacement_timeout 5 s, NOP-Out every 5 s, 5 s timeout) with
#     systemd-udevd running (multipath-tools needs it), two
#     sd devices with the same LU identity (wwid), scsi_dh_alua attached, a active/optimized and
#     b standby (access_state), multipathd builds one map: a's path group active, b's standby
#     (ghost)
#  2. kill -9: fio writes 24 MiB of random 64 KiB blocks with crc32c headers through the map;
#     the guest writes a marker into the share, the host kills a; fio ends with 0 errors, b's
#     path is active/optimized (access_state, sg_rtpg), the host says b owns the lock, a verify
#     pass reads every block back: 0 miscompares. The host restarts a: its path comes back
#     standby.
#  3. failback: SET TARGET PORT GROUPS (sg_stpg) through a's path makes a the owner again (b,
#     asked, hands the lock over and stays standby); the host restarts b all the same (standby)
#  4. SIGSTOP: the same fio on another region while a is stopped; 0 errors; b active/optimized;
#     after SIGCONT (a stopped for 30 s, longer than the initiator's timeouts) a WRITE sent
#     straight to a's path (sg_raw, past scsi_dh_alua) is refused with NOT READY (04/0B, or
#     04/0C once a knows: the writes a still held from before the stop fail against the
#     blocklist the moment it resumes), the host says a is fenced, the verify pass finds every
#     acknowledged block intact; a restarted reports standby.
#  5. online resize (issue 29): the host grows the image with Ceph's own `rbd resize` (256 ->
#     320 MiB), then through gateway b's API (iscsi_resize_lun, 384 MiB): each time the kernel
#     logs CAPACITY DATA HAS CHANGED for both paths (each gateway posts 6/2A/09), each path
#     reads the new size after its rescan, `multipathd resize map` grows the map, and 1 MiB
#     written through the map past the old end reads back the same;
#  6. the map logs out cleanly; no I/O error on the dm device in the kernel log.
. /mnt/ix/tests/rdma/guest/lib.sh

[ -f "$IXR_OUT/$IX_TEST.net" ] || ixr_skip_all "no network to the host part (run through tests/rdma/run.sh)"
. "$IXR_OUT/$IX_TEST.net"
PA=$IXR_PORTAL1 PB=$IXR_PORTAL2
FIO_SIZE=24m
FIO_RATE=1m # spreads the 24 MiB over ~25 s, so the failover happens in the middle of it

if ! ixr_host_ready 400; then
	ixr_fail host "$IXR_HOST_READY"
	ixr_exit
fi
read -r IQN NAA <"$IXR_OUT/$IX_TEST.host.ready"
ixr_pass host "gateways ready on the host: $IQN, LU $NAA"
dmesg -n 1 # the kernel's messages go to the log below, not to the serial console
dmesg_mark() { echo "==== $1 at $(cut -d' ' -f1 /proc/uptime)" >/dev/kmsg; dmesg_save; }
# the kernel log so far, in the share (a test killed by its timeout leaves the last one)
dmesg_save() { dmesg >"$IXR_OUT/$IX_TEST.dmesg.log"; }

# udevd first: multipath-tools finds paths through libudev and takes only devices udevd has
# processed ("initialized"; without udevd, multipath -v3 lists no path at all), with their
# ID_SERIAL (the WWID) from sg3-utils-udev's rules
mkdir -p /run/udev
ixr_daemon udevd /usr/lib/systemd/systemd-udevd
ixr_wait 10 test -S /run/udev/control || ixr_fail udevd "systemd-udevd did not start"
IXR_REPLACEMENT_TIMEOUT=5 IXR_NOOP_INTERVAL=5 IXR_NOOP_TIMEOUT=5 IXR_LOGIN_TIMEOUT=15 \
	ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }
for p in "$PA" "$PB"; do
	/usr/sbin/iscsiadm -m node -o new -T "$IQN" -p "$p" >&2 || ixr_fail node "iscsiadm -m node -o new $p"
	ixr_check "login-$([ "$p" = "$PA" ] && echo a || echo b)" timeout 60 /usr/sbin/iscsiadm -m node -T "$IQN" -p "$p" -l || ixr_exit
done

# disk_of ADDR:PORT: the sd device of the session logged in through that portal
disk_of() {
	for s in /sys/class/iscsi_session/session*; do
		[ -e "$s" ] || continue
		n=${s##*session}
		c=/sys/class/iscsi_connection/connection$n:0
		[ "$(cat "$c/persistent_address" 2>/dev/null):$(cat "$c/persistent_port" 2>/dev/null)" = "$1" ] || continue
		for b in "$s"/device/target*/*:*:*:*/block/*; do
			[ -e "$b" ] && basename "$b" && return 0
		done
	done
	return 1
}
state_of() { cat "/sys/block/$1/device/access_state" 2>/dev/null; }
# wait_state DISK STATE SECONDS
wait_state() { ixr_wait "$3" sh -c "[ \"\$(cat /sys/block/$1/device/access_state)\" = '$2' ]"; }
rtpg() { /usr/bin/sg_rtpg -d "/dev/$1" 2>&1 | tr -s ' \n' ' '; }

DA= DB=
n=150
while [ $n -gt 0 ]; do
	DA=$(disk_of "$PA") && DB=$(disk_of "$PB") && [ -b "/dev/$DA" ] && [ -b "/dev/$DB" ] && break
	sleep 0.2
	n=$((n - 1))
done
if [ -z "$DA" ] || [ -z "$DB" ]; then
	ixr_fail paths "logged in, but not two disks: a '$DA', b '$DB'"
	ixr_exit
fi
ixr_pass paths "a ($PA) is $DA, b ($PB) is $DB"
timeout 60 /usr/bin/udevadm settle || ixr_log "udevadm settle: exit $?"

wa=$(cat "/sys/block/$DA/device/wwid") wb=$(cat "/sys/block/$DB/device/wwid")
if [ -n "$wa" ] && [ "$wa" = "$wb" ]; then
	ixr_pass same-lu "both paths report $wa (VPD 0x83)"
else
	ixr_fail same-lu "a reports '$wa', b '$wb'"
fi
ha=$(cat "/sys/block/$DA/device/dh_state") hb=$(cat "/sys/block/$DB/device/dh_state")
if [ "$ha" = alua ] && [ "$hb" = alua ]; then
	ixr_pass dh-alua "scsi_dh_alua attached to both"
else
	ixr_fail dh-alua "device handlers: a '$ha', b '$hb'"
fi
if wait_state "$DA" active/optimized 10 && wait_state "$DB" standby 10; then
	ixr_pass alua-states "a $(state_of "$DA"), b $(state_of "$DB"); sg_rtpg through b: $(rtpg "$DB")"
else
	ixr_fail alua-states "a '$(state_of "$DA")', b '$(state_of "$DB")'; sg_rtpg through a: $(rtpg "$DA")"
fi

# ---- multipath ------------------------------------------------------------------------------------
# multipath-tools 0.9.4 as a distribution runs it: multipathd (paths from udev, WWID =
# ID_SERIAL), this device section for ix, the rest built-in defaults. One path per path group
# (failover), ordered by prio alua, the tur checker, the alua hardware handler, failback when a
# better group comes back, queueing bounded at 24 checker intervals. Not group_by_prio: a
# failed path keeps its last priority, so after a failover multipathd regrouped the dead
# gateway's path with the new owner's (both 50); when it came back, dm-multipath activated
# every path of that group, scsi_dh_alua sent SET TARGET PORT GROUPS through the restarted
# gateway, which took the lock from the healthy owner (docs/ha.md).
mkdir -p /etc/multipath
cat >/etc/multipath.conf <<-EOF
	defaults {
		user_friendly_names no
		find_multipaths off
		verbosity 2
	}
	blacklist {
		devnode "^(loop|ram|dm-)"
	}
	devices {
		device {
			vendor "IX"
			product ".*"
			path_grouping_policy failover
			prio alua
			path_checker tur
			hardware_handler "1 alua"
			failback immediate
			no_path_retry 24
			path_selector "service-time 0"
		}
	}
EOF
ixr_daemon multipathd /sbin/multipathd -d -s
mp_map() { timeout 20 /sbin/dmsetup ls --target multipath 2>/dev/null | awk '$1 != "No" { print $1; exit }'; }
ixr_wait 30 sh -c '[ -n "$(/sbin/dmsetup ls --target multipath | grep -v "No devices")" ]'
MAP=$(mp_map)
if [ -z "$MAP" ]; then
	ixr_fail map "multipathd built no map: $(tail -5 "$IXR_OUT/$IX_TEST.multipathd.log" | tr '\n' ' ')"
	ixr_exit
fi
DEV=/dev/mapper/$MAP
ixr_wait 10 test -b "$DEV" || DEV=/dev/$(basename "$(readlink -f "/sys/block/dm-0")")
# pg_of DISK: "prio=N status=S" of the path group holding DISK, and the path's states
pg_of() {
	timeout 20 /sbin/multipath -ll "$MAP" 2>/dev/null | awk -v d="$1" '
		/policy=/ { pg = $0; sub(/.*prio=/, "prio=", pg) }
		$0 ~ " " d " " { sub(/.* [0-9]+:[0-9]+ +/, ""); print pg " path=" $0; exit }'
}
mp_show() { timeout 20 /sbin/multipath -ll "$MAP" 2>&1 | tr -s ' \n' ' '; }
timeout 20 /sbin/multipath -ll >&2 2>&1
ga=$(pg_of "$DA") gb=$(pg_of "$DB")
case "$ga|$gb" in
*status=active*"path=active ready"*"|"*status=enabled*"path=active ghost"*)
	ixr_pass map "$DEV: a's group $ga; b's group $gb" ;;
*) ixr_fail map "$DEV: a's group '$ga', b's group '$gb': $(mp_show)" ;;
esac
ixr_log "table: $(/sbin/dmsetup table "$MAP")"

# ---- fio through the map while the host kills or stops a ---------------------------------------------
# fio_run TAG OFFSET SEED: a rate-limited 24 MiB random write with crc32c headers through the map in
# the background (FIO_PID), log $IX_TEST.TAG-write.log
fio_args() { # OFFSET SEED
	echo "--filename=$DEV --offset=$1 --size=$FIO_SIZE --bs=64k --iodepth=8 --ioengine=libaio"
	echo "--direct=1 --thread --rw=randwrite --randseed=$2 --verify=crc32c --verify_fatal=1"
	echo "--verify_state_save=0"
}
fio_start() {
	ixr_log "+ fio write $FIO_SIZE at $2 (seed $3) through $DEV"
	/usr/bin/fio --name="$1" $(fio_args "$2" "$3") --do_verify=0 --rate="$FIO_RATE" \
		>"$IXR_OUT/$IX_TEST.$1-write.log" 2>&1 &
	FIO_PID=$!
}
# fio_wait TAG: wait for it; report TAG-write (0 errors, all bytes written)
fio_wait() {
	wait "$FIO_PID"
	rc=$?
	log=$IXR_OUT/$IX_TEST.$1-write.log
	if [ $rc = 0 ] && grep -q 'err= 0' "$log"; then
		ixr_pass "$1-write" "fio exit 0, err= 0: $(grep -m1 -E '^ +WRITE:' "$log" | sed 's/^ *//')"
	else
		ixr_fail "$1-write" "fio exit $rc: $(grep -m2 -iE 'err=|error' "$log" | tr '\n' ' ')"
	fi
}
# fio_verify TAG OFFSET SEED: read every block back through the map, checking its crc32c header
fio_verify() {
	log=$IXR_OUT/$IX_TEST.$1-verify.log
	/usr/bin/fio --name="$1" $(fio_args "$2" "$3") --verify_only >"$log" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q 'err= 0' "$log" && ! grep -qiE 'bad magic|crc32c: verify failed|verify: bad' "$log"; then
		ixr_pass "$1-verify" "every block read back through the map, 0 miscompares: $(grep -m1 -E '^ +READ:' "$log" | sed 's/^ *//')"
	else
		ixr_fail "$1-verify" "fio verify exit $rc: $(grep -m3 -iE 'verify|bad|err=' "$log" | tr '\n' ' ')"
	fi
}
# written_kb: KiB written to the map so far
written_kb() { awk '{ print int($7 / 2) }' "/sys/block/$(basename "$(readlink -f "$DEV")")/stat"; }
# wait until fio has written at least KB KiB (at most 60 s)
wait_written() { w0=$(written_kb); ixr_wait 60 sh -c "[ \$(awk '{ print int(\$7 / 2) }' /sys/block/$(basename "$(readlink -f "$DEV")")/stat) -ge $((w0 + $1)) ]"; }
now() { cut -d' ' -f1 /proc/uptime; }

# after a failover: b's path active/optimized in the kernel and in multipath, b owns the lock
check_on_b() { # TAG
	if wait_state "$DB" active/optimized 30; then
		ixr_pass "$1-b-active" "b's path $(state_of "$DB"), a's $(state_of "$DA"); multipath: b $(pg_of "$DB"); sg_rtpg through b: $(rtpg "$DB")"
	else
		ixr_fail "$1-b-active" "b's path '$(state_of "$DB")'; multipath: $(mp_show)"
	fi
	ixr_host state
	case $IXR_HOST_RSP in
	*b=owner*) ixr_pass "$1-b-owner" "host: $IXR_HOST_RSP" ;;
	*) ixr_fail "$1-b-owner" "host: $IXR_HOST_RSP" ;;
	esac
}
# a's path back after a restart of a: standby in the kernel and ghost in multipath
check_a_rejoined() { # TAG
	if wait_state "$DA" standby 60 && ixr_wait 30 sh -c "timeout 10 /sbin/multipath -ll $MAP | grep -q ' $DA .*active ghost'"; then
		ixr_pass "$1-a-rejoined" "a's path $(state_of "$DA") (multipath: $(pg_of "$DA")); sg_rtpg through a: $(rtpg "$DA")"
	else
		ixr_fail "$1-a-rejoined" "a's path '$(state_of "$DA")'; multipath: $(mp_show)"
		/usr/sbin/iscsiadm -m session -P 3 >&2 2>&1
	fi
	dmesg_save
}

# the logins, the scan and multipathd's checker have sent TEST UNIT READY to b for a while: the
# lock must not have moved (it did when ix counted them toward implicit failover)
ixr_host state
case $IXR_HOST_RSP in
*a=owner*b=standby*) ixr_pass owner-kept "after logins, scan and path checks, host: $IXR_HOST_RSP" ;;
*) ixr_fail owner-kept "host: $IXR_HOST_RSP" ;;
esac

# ---- 2. kill -9 -----------------------------------------------------------------------------------------
dmesg_mark kill9
fio_start kill9 0 1801
wait_written 2048 || ixr_log "fio wrote less than 2 MiB in 60 s"
t_kill=$(now)
if ixr_host "kill a"; then
	ixr_pass kill9-marker "the host killed a at guest time $t_kill: $IXR_HOST_RSP"
else
	ixr_fail kill9-marker "$IXR_HOST_RSP"
fi
w_kill=$(written_kb)
fio_wait kill9
t_end=$(now)
w_end=$(written_kb)
if [ $((w_end - w_kill)) -ge 1024 ]; then
	ixr_pass kill9-io-continued "$((w_end - w_kill)) KiB written through the map after the kill (${t_kill}-${t_end} s)"
else
	ixr_fail kill9-io-continued "only $((w_end - w_kill)) KiB written after the kill"
fi
check_on_b kill9
fio_verify kill9 0 1801
ixr_host "restart a" 180 || ixr_fail kill9-restart "$IXR_HOST_RSP"
check_a_rejoined kill9

# ---- 3. failback: a takes the lock back (b hands it over); b restarted ----------------------------------
dmesg_mark failback
if /usr/bin/sg_stpg --optimized "/dev/$DA" >&2 2>&1; then
	ixr_pass failback-stpg "SET TARGET PORT GROUPS (group of a: active/optimized) through a: GOOD"
else
	ixr_fail failback-stpg "sg_stpg --optimized /dev/$DA failed"
fi
ixr_host "restart b" 180 || ixr_fail failback-restart-b "$IXR_HOST_RSP"
if wait_state "$DA" active/optimized 60 && wait_state "$DB" standby 60 &&
	ixr_wait 60 sh -c "timeout 10 /sbin/multipath -ll $MAP | grep -q ' $DB .*active ghost'"; then
	ixr_pass failback "a $(state_of "$DA") ($(pg_of "$DA")), b $(state_of "$DB") ($(pg_of "$DB"))"
else
	ixr_fail failback "a '$(state_of "$DA")', b '$(state_of "$DB")': $(mp_show)"
fi
ixr_host state
case $IXR_HOST_RSP in
*a=owner*b=standby*) ixr_pass failback-owner "host: $IXR_HOST_RSP" ;;
*) ixr_fail failback-owner "host: $IXR_HOST_RSP" ;;
esac

# ---- 4. SIGSTOP ------------------------------------------------------------------------------------------
dmesg_mark sigstop
fio_start sigstop 64m 2602
wait_written 2048 || ixr_log "fio wrote less than 2 MiB in 60 s"
t_stop=$(now)
if ixr_host "stop a"; then
	ixr_pass sigstop-marker "the host stopped a at guest time $t_stop: $IXR_HOST_RSP"
else
	ixr_fail sigstop-marker "$IXR_HOST_RSP"
fi
w_stop=$(written_kb)
fio_wait sigstop
t_end=$(now)
w_end=$(written_kb)
if [ $((w_end - w_stop)) -ge 1024 ]; then
	ixr_pass sigstop-io-continued "$((w_end - w_stop)) KiB written through the map while a was stopped (${t_stop}-${t_end} s)"
else
	ixr_fail sigstop-io-continued "only $((w_end - w_stop)) KiB written after the stop"
fi
check_on_b sigstop
# keep a stopped for longer than every timeout of the initiator (NOP 5+5 s, replacement 5 s)
# and of the take-over; then resume it
while [ "$(awk -v a="$t_stop" -v b="$(now)" 'BEGIN { print (b - a >= 30) }')" != 1 ]; do sleep 1; done
dmesg_mark sigcont
ixr_host "cont a" || ixr_fail sigcont "$IXR_HOST_RSP"
t_cont=$(now)
# a's session comes back (iscsid keeps trying); then a WRITE straight to a's path, past
# scsi_dh_alua's check (SG_IO): the resumed a must refuse it
ixr_wait 60 sh -c "[ \"\$(cat /sys/block/$DA/device/state)\" = running ]" ||
	ixr_log "a's path not running again 60 s after SIGCONT"
head -c 65536 /dev/urandom >/run/late.bin
# WRITE(10) of 128 blocks at LBA 131072 (byte 64 MiB: the first block of the region fio just
# verified below)
out=$(/usr/bin/sg_raw -s 65536 -i /run/late.bin "/dev/$DA" 2a 00 00 02 00 00 00 00 80 00 2>&1)
echo "$out" >&2
case $out in
*"Not Ready"*|*"not ready"*|*"NOT READY"*)
	ixr_pass sigcont-a-refuses "a WRITE through a after SIGCONT (sg_raw on $DA at $(now) s, SIGCONT at $t_cont s): $(echo "$out" | grep -iE 'sense|standby|unavailable|ready' | tr -s ' \n' ' ')" ;;
*) ixr_fail sigcont-a-refuses "a WRITE through a after SIGCONT was not refused: $(echo "$out" | tr -s ' \n' ' ')" ;;
esac
ixr_host state
case $IXR_HOST_RSP in
*a=fenced*b=owner*) ixr_pass sigcont-a-fenced "host: $IXR_HOST_RSP" ;;
*) ixr_fail sigcont-a-fenced "host: $IXR_HOST_RSP" ;;
esac
fio_verify sigstop 64m 2602
fio_verify kill9 0 1801 # the first region too, after everything
ixr_host "restart a" 180 || ixr_fail sigstop-restart "$IXR_HOST_RSP"
check_a_rejoined sigstop

# ---- 5. online resize --------------------------------------------------------------------------------
hctl_of() { basename "$(readlink -f "/sys/block/$1/device")"; }
bytes_of() { echo $(($(cat "/sys/block/$1/size") * 512)); }
ua_count() { dmesg | grep -c "$(hctl_of "$1"): Capacity data has changed"; }
resize_step() { # TAG REQUEST BYTES
	ua_a=$(ua_count "$DA") ua_b=$(ua_count "$DB") old=$(blockdev --getsize64 "$DEV")
	dmesg_mark "resize $1"
	if ! ixr_host "$2"; then
		ixr_fail "$1" "host: $IXR_HOST_RSP"
		return
	fi
	# the multipathd checker's TUR on each path (every polling interval, 5 s) meets the UA
	if ixr_wait 30 sh -c "[ \$(dmesg | grep -c '$(hctl_of "$DA"): Capacity data has changed') -gt $ua_a ] && [ \$(dmesg | grep -c '$(hctl_of "$DB"): Capacity data has changed') -gt $ua_b ]"; then
		ixr_pass "$1-ua" "the kernel logged CAPACITY DATA HAS CHANGED on $DA ($(hctl_of "$DA")) and $DB ($(hctl_of "$DB"))"
	else
		ixr_fail "$1-ua" "CAPACITY DATA HAS CHANGED logged $(($(ua_count "$DA") - ua_a)) times on $DA, $(($(ua_count "$DB") - ua_b)) on $DB"
	fi
	for d in "$DA" "$DB"; do echo 1 >"/sys/block/$d/device/rescan"; done
	sa=$(bytes_of "$DA") sb=$(bytes_of "$DB")
	/sbin/multipathd resize map "$MAP" >&2 2>&1
	ixr_wait 10 sh -c "[ \$(blockdev --getsize64 $DEV) = $3 ]"
	sm=$(blockdev --getsize64 "$DEV")
	if [ "$sa" = "$3" ] && [ "$sb" = "$3" ] && [ "$sm" = "$3" ]; then
		ixr_pass "$1-size" "paths $DA $sa, $DB $sb bytes, the map $sm (was $old)"
	else
		ixr_fail "$1-size" "want $3: paths $DA $sa, $DB $sb bytes, the map $sm (was $old)"
	fi
	head -c 1048576 /dev/urandom >/run/resize.bin
	dd if=/run/resize.bin of="$DEV" bs=1M seek=$((old / 1048576)) count=1 oflag=direct 2>/dev/null &&
		dd if="$DEV" of=/run/resize.back bs=1M skip=$((old / 1048576)) count=1 iflag=direct 2>/dev/null
	if cmp -s /run/resize.bin /run/resize.back; then
		ixr_pass "$1-io" "1 MiB written through the map at $old (the old end) reads back the same"
	else
		ixr_fail "$1-io" "1 MiB at $old through the map did not read back the same"
	fi
}
resize_step resize-rbd "rbd-resize 320M" $((320 * 1048576))
resize_step resize-api "api-resize b 384M" $((384 * 1048576))

# ---- 6. the end ----------------------------------------------------------------------------------------
dmesg_mark end
dmesg >"$IXR_OUT/$IX_TEST.dmesg.log"
dm=$(basename "$(readlink -f "$DEV")")
nerr=$(grep -cE "(I/O error|Buffer I/O).*($dm|$MAP)" "$IXR_OUT/$IX_TEST.dmesg.log")
if [ "$nerr" = 0 ]; then
	ixr_pass dm-no-errors "no I/O error on $dm in the kernel log ($(grep -c 'Failing path' "$IXR_OUT/$IX_TEST.dmesg.log") 'Failing path' lines, $(grep -cE 'I/O error, dev sd' "$IXR_OUT/$IX_TEST.dmesg.log") path-level I/O errors)"
else
	ixr_fail dm-no-errors "$nerr I/O errors on $dm: $(grep -m3 -E "(I/O error|Buffer I/O).*($dm|$MAP)" "$IXR_OUT/$IX_TEST.dmesg.log" | tr '\n' ' ')"
fi
/sbin/multipathd shutdown >&2 2>&1
ixr_check map-flush /sbin/multipath -f "$MAP"
ixr_check logout timeout 60 /usr/sbin/iscsiadm -m node -u
ixr_exit
