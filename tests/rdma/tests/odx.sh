#!/bin/sh
# timeout: 600
# ODX (token-based copy: POPULATE TOKEN, RECEIVE ROD TOKEN INFORMATION, WRITE USING TOKEN)
# through the Linux kernel initiator (TCP) against ix-target (the host's build over 9p) with two
# 64 MiB RAM LUNs behind one target, driven through the LUNs' sg devices by sg3_utils: sg_raw
# sends the three commands with SBC-3 parameter lists built here. 16 MiB of random data written
# to LUN 0 is copied with one token to LUN 1 and within LUN 0 (two source ranges to three
# destination ranges); each copy read back compares equal with cmp, and ix-ctl's per-LUN counters
# show that the initiator neither read the source nor wrote the destination while copying
# (under 1 MiB of READ/WRITE data, against 16 MiB copied; reading the copy back moves the same
# counters by 16 MiB, so they are the right ones). A one-block WRITE into a token's
# source range between POPULATE TOKEN and WRITE USING TOKEN makes the latter fail with ILLEGAL
# REQUEST, INVALID TOKEN OPERATION, TOKEN CANCELLED (05/23/08) and write nothing; the same
# without the write succeeds; after sg_reset -d (LOGICAL UNIT RESET) of the source, a token made
# before it is refused with TOKEN REVOKED (05/23/06). ddpt's own ODX copy (ddpt --odx) is tried too: ddpt 0.97 writes
# its block device range descriptors one byte early (at byte 15 of the POPULATE TOKEN list and
# 535 of the WRITE USING TOKEN list; SBC-3 puts them at 16 and 536), so ix reads a range 256
# times too long and refuses it with LBA OUT OF RANGE: that outcome is reported as a SKIP naming
# the peer's bug, any other failure as a FAIL, a success is checked with cmp.
#
# With IXR_ODX_HOST=1 (tests/rdma/tests/odx-rbd.sh) the target is not started here: the host part
# (tests/rdma/host/odx_rbd.py) runs ix-target with two RBD images of one Ceph cluster as the
# LUNs, the guest reaches it as IXR_PORTAL1, and the host part answers "stats" requests with
# ix-ctl's output.
. /mnt/ix/tests/rdma/guest/lib.sh
IQN=iqn.2026-11.io.ix.rdma:odx
SOCK=/run/ix-odx.sock
CTL=/mnt/build/tools/ix-ctl
HOSTED=${IXR_ODX_HOST:-0}
[ -x /usr/bin/ddpt ] || ixr_skip_all "ddpt is not in the guest image (tests/rdma/build-image.sh)"
if [ "$HOSTED" = 1 ]; then
	[ -f "$IXR_OUT/$IX_TEST.net" ] || ixr_skip_all "no network to the host part (run through tests/rdma/run.sh)"
	. "$IXR_OUT/$IX_TEST.net"
	if ! ixr_host_ready 400; then
		ixr_fail host "$IXR_HOST_READY"
		ixr_exit
	fi
	read -r IQN DETAIL <"$IXR_OUT/$IX_TEST.host.ready"
	ixr_pass host "ix-target on the host: $IQN, $DETAIL"
	PORTAL=$IXR_PORTAL1
else
	[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"
	[ -x "$CTL" ] || ixr_skip_all "ix-ctl not built in the shared build dir ($CTL)"
	cat >/run/ix-target.json <<-JSON
		{
		  "global": { "log_level": "info", "mgmt_socket": "$SOCK" },
		  "portals": [ { "name": "rdma-net", "address": "$RDMA_IP", "port": 3260,
		                 "transports": ["tcp"] } ],
		  "targets": [
		    { "name": "$IQN", "luns": [ { "lun": 0, "backend": "ram", "size": "64M" },
		                               { "lun": 1, "backend": "ram", "size": "64M" } ] }
		  ]
		}
	JSON
	ixr_ix_start || ixr_exit
	PORTAL=$RDMA_IP:3260
fi
ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }
if [ "$HOSTED" = 1 ]; then
	# a node record for the portal as the guest reaches it (discovery would name the host's
	# 127.0.0.1)
	/usr/sbin/iscsiadm -m node -o new -T "$IQN" -p "$PORTAL" >&2 ||
		ixr_fail node "iscsiadm -m node -o new $PORTAL"
	ixr_check login timeout 90 /usr/sbin/iscsiadm -m node -T "$IQN" -p "$PORTAL" -l || ixr_exit
else
	ixr_check login timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st -I default \
		-p "$PORTAL" -l || ixr_exit
fi

# lun_dev LUN KIND: /dev/NAME of the session's LUN (KIND block or scsi_generic)
lun_dev() {
	for d in /sys/class/iscsi_session/session*/device/target*/*:*:*:"$1"/"$2"/*; do
		[ -e "$d" ] && { echo "/dev/$(basename "$d")"; return 0; }
	done
	return 1
}
if ! ixr_wait 30 sh -c "[ -c \"\$(for d in /sys/class/iscsi_session/session*/device/target*/*:*:*:1/scsi_generic/*; do echo /dev/\${d##*/}; done)\" ]"; then
	ixr_fail devices "LUN 1's sg device did not appear within 30 s"
	ixr_exit
fi
SG0=$(lun_dev 0 scsi_generic) SG1=$(lun_dev 1 scsi_generic)
if [ -c "$SG0" ] && [ -c "$SG1" ]; then
	ixr_pass devices "LUN 0 is $SG0, LUN 1 is $SG1"
else
	ixr_fail devices "sg devices: LUN 0 '$SG0', LUN 1 '$SG1'"
	ixr_exit
fi

# mib LUN COLUMN: the MiB counter (7 read, 8 written) of this initiator on LUN in ix-ctl stats
mib() {
	if [ "$HOSTED" = 1 ]; then
		ixr_host stats >/dev/null 2>&1 && printf '%s\n' "$IXR_HOST_RSP"
	else
		IX_CTL_SOCKET=$SOCK "$CTL" stats 2>/dev/null
	fi |
		awk -v t="$IQN" -v l="$1" -v i="$IXR_INITIATOR" -v c="$2" \
			'$1 == t && $2 == l && $3 == i { s += $c } END { printf "%.1f\n", s }'
}
# below A B LIMIT: true when B - A < LIMIT (decimals)
below() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { exit !(b - a < m) }'; }

# odx ARGS...: ddpt with its ODX commands' details (verbose=2) kept in $IX_TEST.ddpt.log, the
# last run's output in /run/ddpt.out
odx() {
	echo "+ ddpt $*" >>"$IXR_OUT/$IX_TEST.ddpt.log"
	ddpt verbose=2 "$@" >/run/ddpt.out 2>&1
	rc=$?
	cat /run/ddpt.out >>"$IXR_OUT/$IX_TEST.ddpt.log"
	echo "exit $rc" >>"$IXR_OUT/$IX_TEST.ddpt.log"
	return $rc
}

BLOCKS=32768 # 16 MiB of 512-byte blocks
head -c $((BLOCKS * 512)) /dev/urandom >/run/src.bin
ixr_check fill ddpt if=/run/src.bin of="$SG0" bs=512 count=$BLOCKS || ixr_exit

# ---- SBC-3 parameter lists and CDBs for sg_raw -----------------------------------------------------
# be N V: V as N big-endian bytes (raw); hx N V: the same as sg_raw's hex arguments
be() { i=$1; while [ "$i" -gt 0 ]; do i=$((i - 1)); printf "\\$(printf %03o $((($2 >> (8 * i)) & 255)))"; done; }
hx() { i=$1; while [ "$i" -gt 0 ]; do i=$((i - 1)); printf '%02x ' $((($2 >> (8 * i)) & 255)); done; }
# ranges LBA:N...: block device range descriptors
ranges() { for r; do be 8 "${r%:*}"; be 4 "${r#*:}"; be 4 0; done; }
# pt_list FILE LBA:N...: a POPULATE TOKEN parameter list (the copy manager's default ROD type
# and inactivity timeout)
pt_list() {
	f=$1; shift
	{ be 2 $((14 + 16 * $#)); be 12 0; be 2 $((16 * $#)); ranges "$@"; } >"$f"
}
# wut_list FILE TOKEN OFFSET LBA:N...: a WRITE USING TOKEN parameter list
wut_list() {
	f=$1 tok=$2 off=$3; shift 3
	{ be 2 $((534 + 16 * $#)); be 6 0; be 8 "$off"; cat "$tok"; be 6 0; be 2 $((16 * $#))
	  ranges "$@"; } >"$f"
}
# populate SG LIST_ID TOKEN LBA:N...: POPULATE TOKEN, then RECEIVE ROD TOKEN INFORMATION for its
# token (into the file TOKEN); 0 when both succeeded and the answer holds a 512-byte token
populate() {
	sg=$1 lid=$2 tok=$3; shift 3
	pt_list /run/pt.bin "$@"
	n=$(wc -c </run/pt.bin)
	sg_raw -t 60 -s "$n" -i /run/pt.bin "$sg" 83 10 00 00 00 00 $(hx 4 "$lid") $(hx 4 "$n") 00 00 \
		>/run/sg.out 2>&1 || return 1
	rm -f /run/rrti.bin
	sg_raw -t 60 -r 1024 -o /run/rrti.bin "$sg" 84 07 $(hx 4 "$lid") 00 00 00 00 00 00 04 00 00 00 \
		>/run/sg.out 2>&1 || return 1
	# COPY OPERATION STATUS 01h (done), no sense, ROD TOKEN DESCRIPTORS LENGTH 514
	[ "$(od -An -tx1 -j 5 -N 1 /run/rrti.bin | tr -d ' ')" = 01 ] &&
		[ "$(od -An -tx1 -j 32 -N 4 /run/rrti.bin | tr -d ' ')" = 00000202 ] || return 1
	dd if=/run/rrti.bin of="$tok" bs=1 skip=38 count=512 2>/dev/null
	[ "$(wc -c <"$tok")" = 512 ]
}
# write_using SG LIST_ID TOKEN OFFSET LBA:N...: WRITE USING TOKEN; sg_raw's output in /run/sg.out
write_using() {
	sg=$1 lid=$2 tok=$3 off=$4; shift 4
	wut_list /run/wut.bin "$tok" "$off" "$@"
	n=$(wc -c </run/wut.bin)
	sg_raw -t 120 -s "$n" -i /run/wut.bin "$sg" 83 11 00 00 00 00 $(hx 4 "$lid") $(hx 4 "$n") 00 00 \
		>/run/sg.out 2>&1
}
# lun_read SG LBA:N... : the blocks, concatenated, on stdout
lun_read() {
	sg=$1; shift
	for r; do ddpt if="$sg" skip="${r%:*}" count="${r#*:}" bs=512 of=- 2>/dev/null; done
}

# odx_copy NAME SG_DST READ_LUN WRITE_LUN DST_RANGES...: LUN 0's first 16 MiB (two source ranges
# of 8 MiB) copied with one token to the destination ranges, the initiator's READ and WRITE data
# on the LUNs counted around it, then read back and compared
LID=256
odx_copy() {
	name=$1 dst=$2 rl=$3 wl=$4; shift 4
	LID=$((LID + 2))
	r0=$(mib "$rl" 7) w0=$(mib "$wl" 8)
	if ! populate "$SG0" $LID /run/tok.bin 0:16384 16384:16384; then
		ixr_fail "$name" "POPULATE TOKEN / RECEIVE ROD TOKEN INFORMATION failed: $(tail -4 /run/sg.out | tr '\n' ' ')"
		return 1
	fi
	if ! write_using "$dst" $((LID + 1)) /run/tok.bin 0 "$@"; then
		ixr_fail "$name" "WRITE USING TOKEN failed: $(tail -4 /run/sg.out | tr '\n' ' ')"
		return 1
	fi
	r1=$(mib "$rl" 7) w1=$(mib "$wl" 8)
	ixr_pass "$name" "POPULATE TOKEN of 2 ranges, WRITE USING TOKEN to $# ranges ($*)"
	if below "$r0" "$r1" 1 && below "$w0" "$w1" 1; then
		ixr_pass "$name-offloaded" "READ data from LUN $rl: $r0 -> $r1 MiB, WRITE data to LUN $wl: $w0 -> $w1 MiB, for 16 MiB copied"
	else
		ixr_fail "$name-offloaded" "the initiator moved the data: READ from LUN $rl $r0 -> $r1 MiB, WRITE to LUN $wl $w0 -> $w1 MiB"
	fi
	rd0=$(mib "$wl" 7)
	if lun_read "$dst" "$@" >/run/back.bin && cmp /run/src.bin /run/back.bin >&2; then
		ixr_pass "$name-compare" "the 16 MiB copied compare equal to the source (cmp)"
	else
		ixr_fail "$name-compare" "the copy differs from the source (cmp)"
	fi
	# the counters are the right ones: reading the copy back through READs moves them by 16 MiB
	rd1=$(mib "$wl" 7)
	if below "$rd1" "$rd0" -15.9; then
		ixr_pass "$name-counters" "reading the copy back: READ data from LUN $wl $rd0 -> $rd1 MiB"
	else
		ixr_fail "$name-counters" "reading the copy back did not show in LUN $wl's READ data: $rd0 -> $rd1 MiB"
	fi
}

odx_copy copy-between "$SG1" 0 1 0:4096 10000:20000 50000:8672
odx_copy copy-within "$SG0" 0 0 65536:10000 90000:12768 110000:10000

# A token, a write into its source, the token refused; the same without the write is used.
head -c 512 /dev/zero >/run/zero.bin
if populate "$SG0" 300 /run/a.bin 0:1024 2048:1024; then
	ixr_pass populate "a token for LUN 0's blocks 0-1023 and 2048-3071"
else
	ixr_fail populate "$(tail -4 /run/sg.out | tr '\n' ' ')"
fi
ixr_check write-source ddpt if=/run/zero.bin of="$SG0" seek=2100 bs=512 count=1
lun_read "$SG1" 40000:2048 >/run/before.bin
write_using "$SG1" 301 /run/a.bin 0 40000:2048
rc=$?
lun_read "$SG1" 40000:2048 >/run/after.bin
if [ "$rc" != 0 ] && grep -qi 'token cancelled' /run/sg.out && cmp -s /run/before.bin /run/after.bin; then
	ixr_pass token-cancelled "WRITE USING TOKEN after a write into the source: $(grep -i -m1 'token cancelled' /run/sg.out | tr -s ' '); LUN 1 unchanged"
else
	ixr_fail token-cancelled "expected INVALID TOKEN OPERATION, TOKEN CANCELLED and LUN 1 unchanged; sg_raw exit $rc: $(tail -4 /run/sg.out | tr '\n' ' ')"
fi
if populate "$SG0" 302 /run/b.bin 4096:1024 8192:1024 && write_using "$SG1" 303 /run/b.bin 0 40000:1536 50000:512; then
	lun_read "$SG1" 40000:1536 50000:512 >/run/after.bin
	{ dd if=/run/src.bin bs=512 skip=4096 count=1024 && dd if=/run/src.bin bs=512 skip=8192 count=1024; } \
		>/run/want.bin 2>/dev/null
	if cmp -s /run/want.bin /run/after.bin; then
		ixr_pass token-used "the same without the write copies 1 MiB equal to the source"
	else
		ixr_fail token-used "the copy without a write wrote other data"
	fi
else
	ixr_fail token-used "the copy without a write failed: $(tail -4 /run/sg.out | tr '\n' ' ')"
fi

# A LOGICAL UNIT RESET of the source (the kernel's device reset) revokes its tokens.
if populate "$SG0" 304 /run/c.bin 0:1024; then
	if [ -x /usr/bin/sg_reset ]; then
		sg_reset -N -d "$SG0" >&2 2>&1
		sg_turs "$SG0" >/dev/null 2>&1 # the reset's unit attention, if the kernel left it
		write_using "$SG1" 305 /run/c.bin 0 40000:1024
		rc=$?
		if [ "$rc" != 0 ] && grep -qi 'token revoked' /run/sg.out; then
			ixr_pass token-revoked "WRITE USING TOKEN after sg_reset -d of the source: $(grep -i -m1 'token revoked' /run/sg.out | tr -s ' ')"
		else
			ixr_fail token-revoked "expected INVALID TOKEN OPERATION, TOKEN REVOKED; sg_raw exit $rc: $(tail -4 /run/sg.out | tr '\n' ' ')"
		fi
	else
		ixr_skip token-revoked "sg_reset is not in the guest image (tests/rdma/build-image.sh)"
	fi
else
	ixr_fail token-revoked "POPULATE TOKEN failed: $(tail -4 /run/sg.out | tr '\n' ' ')"
fi

# ddpt's own ODX full copy (its limits come from the VPD page ix answers)
if odx --odx if="$SG0" skip=0,$BLOCKS of="$SG1" seek=0,$BLOCKS bs=512; then
	if lun_read "$SG1" 0:$BLOCKS >/run/back.bin && cmp /run/src.bin /run/back.bin >&2; then
		ixr_pass ddpt-odx "ddpt --odx copied 16 MiB equal to the source"
	else
		ixr_fail ddpt-odx "ddpt --odx succeeded but the copy differs (cmp)"
	fi
elif grep -q 'Logical block address out of range' /run/ddpt.out; then
	ixr_skip ddpt-odx "ddpt $(ddpt -V 2>&1 | head -1 | tr -s ' ') puts its range descriptors at byte 15 of the POPULATE TOKEN list (SBC-3: 16), so ix reads a range 256 times longer and refuses it with LBA OUT OF RANGE ($IX_TEST.ddpt.log)"
else
	ixr_fail ddpt-odx "ddpt --odx exited $rc: $(grep -v '^ ' /run/ddpt.out | tail -4 | tr '\n' ' ')"
fi

ixr_kernel_logout
[ "$HOSTED" = 1 ] || ixr_ix_finish
ixr_exit
