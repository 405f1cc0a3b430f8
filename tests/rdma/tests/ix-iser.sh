#!/bin/sh
# timeout: 900
# ix's own target over iSER: one portal 10.99.0.1:3260 serving TCP and iSER, a 256 MiB RAM LUN;
# the Linux kernel initiator (open-iscsi + ib_iser) with the seed command
# `iscsiadm -m discovery -o new -o old -t st -I iser -p 10.99.0.1:3260 -l` (the discovery
# session itself runs over iSER); the SCSI host is iscsi_iser; 256 MiB fio write (1 MiB) with
# crc32c headers read back and verified while rxe0's packet counters rise; 256 MiB of 4 KiB random writes
# at QD16 read back and verified; mkfs.ext4, mount, copy files, checksums, unmount, logout,
# login again, checksums match; then the same LUN over TCP in the same boot; ix-target stops
# cleanly on SIGTERM with nothing wrong in its log.
. /mnt/ix/tests/rdma/guest/lib.sh
IQN=iqn.2026-11.io.ix.rdma:ix-iser
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"
ixr_ix_config "$IQN" 256M '"tcp", "iser"'
ixr_ix_start || ixr_exit
ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }

# the acceptance: 256 MiB written with crc32c verification, in 1 MiB and in 4 KiB blocks
IXR_FIO_SIZE=256m
ixr_kernel_io iser iscsi_iser || { tail -20 "$IXR_IX_LOG" >&2; ixr_exit; }
ixr_fio fio-4k-randwrite "$IXR_DISK" 256m 4k write randwrite
ixr_fio fio-4k-readback "$IXR_DISK" 256m 4k verify randwrite

sums() { (cd /mnt/disk && find . -type f ! -path './lost+found/*' | sort | xargs sha256sum); }
mkdir -p /mnt/disk
ixr_check mkfs /usr/sbin/mkfs.ext4 -q -F -E nodiscard "$IXR_DISK" || ixr_exit
ixr_check mount mount -t ext4 "$IXR_DISK" /mnt/disk || ixr_exit
ixr_check copy sh -c 'cp -a /usr/lib/modules /mnt/disk/ &&
	dd if=/dev/urandom of=/mnt/disk/random.bin bs=1M count=16 2>/dev/null &&
	mkdir /mnt/disk/small && i=0 && while [ $i -lt 100 ]; do
		head -c $((i * 997 + 13)) /dev/urandom >/mnt/disk/small/f$i || exit 1; i=$((i + 1))
	done && sync'
sums >/run/sums.before
nfiles=$(wc -l </run/sums.before)
ixr_check umount umount /mnt/disk
ixr_kernel_logout

# the same LUN, same boot, over TCP
ixr_check login-tcp timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st -I default \
	-p "$RDMA_IP:3260" -l ||
	{ ixr_fail tcp "no TCP login"; ixr_exit; }
if ! ixr_session_disk; then
	ixr_fail disk-tcp "logged in over TCP, but no SCSI disk appeared"
	ixr_exit
fi
got=$(cat "/sys/class/scsi_host/$IXR_SCSI_HOST/proc_name")
[ "$got" = iscsi_tcp ] && ixr_pass proc-name-tcp "$IXR_SCSI_HOST is $got" ||
	ixr_fail proc-name-tcp "$IXR_SCSI_HOST is '$got', expected iscsi_tcp"
ixr_check mount-tcp mount -t ext4 "$IXR_DISK" /mnt/disk || ixr_exit
sums >/run/sums.after
if [ "$nfiles" -gt 100 ] && cmp -s /run/sums.before /run/sums.after; then
	ixr_pass checksums "$nfiles files written over iSER read back identical over TCP"
else
	ixr_fail checksums "$nfiles files before; after: $(wc -l </run/sums.after)"
fi
ixr_check umount-tcp umount /mnt/disk
ixr_logout_all

ixr_ix_finish
ixr_exit
