#!/bin/sh
# timeout: 600
# ix's own target (the host's build/tools/ix-target over 9p, one 256 MiB RAM LUN on
# 10.99.0.1:3260) and the Linux kernel initiator over TCP (open-iscsi, -I default): discovery +
# login with the seed command, the disk's SCSI host is iscsi_tcp, 64 MiB fio write with crc32c
# headers read back and verified; then mkfs.ext4, mount, copy files, checksum, unmount, fsck,
# log out, log in again with CRC32C header and data digests, mount, the checksums match; log out;
# ix-target stops cleanly on SIGTERM.
. /mnt/ix/tests/rdma/guest/lib.sh
IQN=iqn.2026-11.io.ix.rdma:ix
BIN=/mnt/build/tools/ix-target
[ -x "$BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($BIN)"

cat >/run/ix-target.json <<-JSON
	{
	  "global": { "log_level": "info", "mgmt_socket": "/run/ix-target.sock" },
	  "portals": [ { "name": "rdma-net", "address": "$RDMA_IP", "port": 3260 } ],
	  "targets": [
	    { "name": "$IQN", "luns": [ { "lun": 0, "backend": "ram", "size": "256M" } ] }
	  ]
	}
JSON
LOG=$IXR_OUT/$IX_TEST.ix-target.log
ixr_daemon ix-target "$BIN" -c /run/ix-target.json
if ! ixr_wait 30 grep -q 'ix-target: ready' "$LOG"; then
	ixr_fail target "ix-target not ready after 30 s: $(tail -3 "$LOG" | tr '\n' ' ')"
	ixr_exit
fi
ixr_pass target "ix-target ready on $RDMA_IP:3260"
ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }

ixr_kernel_io default iscsi_tcp || ixr_exit
# many small commands: 4 KiB random writes at QD16, read back and verified
ixr_fio fio-4k-randwrite "$IXR_DISK" 16m 4k write randwrite
ixr_fio fio-4k-readback "$IXR_DISK" 16m 4k verify randwrite

# A file system on the LUN, files copied in, their checksums; then the same after a new session.
sums() { (cd /mnt/disk && find . -type f ! -path './lost+found/*' | sort | xargs sha256sum); }
mkdir -p /mnt/disk
ixr_check mkfs /usr/sbin/mkfs.ext4 -q -F -E nodiscard "$IXR_DISK" || ixr_exit
ixr_check mount mount -t ext4 "$IXR_DISK" /mnt/disk || ixr_exit
# the image's modules and programs (kilobytes to 5 MiB), 24 MiB of random data, and 200 random
# files of odd sizes
ixr_check copy sh -c 'cp -a /usr/lib/modules /usr/bin /usr/sbin /mnt/disk/ &&
	dd if=/dev/urandom of=/mnt/disk/random.bin bs=1M count=24 2>/dev/null &&
	mkdir /mnt/disk/small && i=0 && while [ $i -lt 200 ]; do
		head -c $((i * 997 + 13)) /dev/urandom >/mnt/disk/small/f$i || exit 1; i=$((i + 1))
	done && sync'
sums >/run/sums.before
nfiles=$(wc -l </run/sums.before)
ixr_check umount umount /mnt/disk
ixr_check fsck /usr/sbin/fsck.ext4 -f -n "$IXR_DISK"
ixr_kernel_logout
if ixr_wait 15 sh -c "[ ! -b $IXR_DISK ]"; then
	ixr_pass disk-gone "$IXR_DISK removed after logout"
else
	ixr_fail disk-gone "$IXR_DISK still there 15 s after logout"
fi

# the second session asks for CRC32C header and data digests (only CRC32C, no None)
for k in HeaderDigest DataDigest; do
	/usr/sbin/iscsiadm -m node -T "$IQN" -p "$RDMA_IP:3260" -o update \
		-n "node.conn[0].iscsi.$k" -v CRC32C >&2
done
ixr_check relogin timeout 90 /usr/sbin/iscsiadm -m node -T "$IQN" -p "$RDMA_IP:3260" -I default -l ||
	ixr_exit
neg=$(/usr/sbin/iscsiadm -m session -P 2 2>&1 | grep -E '(Header|Data)Digest' | tr -s ' \t\n' ' ')
case $neg in
*"HeaderDigest: CRC32C DataDigest: CRC32C"*) ixr_pass digests "negotiated:$neg" ;;
*) ixr_fail digests "asked for CRC32C, negotiated:$neg" ;;
esac
if ! ixr_session_disk; then
	ixr_fail disk-again "logged in again, but no SCSI disk appeared"
	ixr_exit
fi
ixr_check mount-again mount -t ext4 "$IXR_DISK" /mnt/disk || ixr_exit
sums >/run/sums.after
if [ "$nfiles" -gt 250 ] && cmp -s /run/sums.before /run/sums.after; then
	ixr_pass checksums "$nfiles files identical after logout and login"
else
	ixr_fail checksums "$nfiles files before; after: $(wc -l </run/sums.after) files, $(diff /run/sums.before /run/sums.after | grep -c '^[-+][0-9a-f]') lines differ"
	diff /run/sums.before /run/sums.after | head -20 >&2
fi
ixr_check umount-again umount /mnt/disk
ixr_kernel_logout

if ixr_alive ix-target; then
	ixr_pass target-alive "ix-target still running after both sessions"
else
	ixr_fail target-alive "ix-target died during the test: $(tail -3 "$LOG" | tr '\n' ' ')"
fi
if ! ixr_stop ix-target 15; then
	ixr_fail shutdown "ix-target ignored SIGTERM for 15 s"
elif [ "$IXR_RC" = 0 ]; then
	ixr_pass shutdown "ix-target exited 0 on SIGTERM"
else
	ixr_fail shutdown "ix-target exited with status $IXR_RC after SIGTERM"
fi
if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: ' "$LOG"; then
	ixr_fail sanitizer "sanitizer report in ix-target's log: $(grep -m3 -E 'ERROR: |runtime error:' "$LOG" | tr '\n' ' ')"
elif grep -qiE 'assert|error' "$LOG"; then
	ixr_fail target-log "errors in ix-target's log: $(grep -m3 -iE 'assert|error' "$LOG" | tr '\n' ' ')"
else
	ixr_pass target-log "no error and no sanitizer report in ix-target's log"
fi
ixr_exit
