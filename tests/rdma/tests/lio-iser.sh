#!/bin/sh
# timeout: 300
# LIO (configfs, a 128 MiB ramdisk LUN) with ib_isert on its portal, and the Linux kernel iSER
# initiator with the seed command: discovery and login over RDMA, the disk's SCSI host is
# iscsi_iser, 64 MiB written and read back with crc32c checks, rxe0 carried it, logout.
. /mnt/ix/tests/rdma/guest/lib.sh
IQN=iqn.2026-11.io.ix.rdma:lio

ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }
if ! ixr_lio_start "$IQN" 128 1; then
	ixr_fail target "LIO with isert on $RDMA_IP:3260 could not be set up"
	ixr_exit
fi
ixr_kernel_io iser iscsi_iser && ixr_kernel_logout
ixr_exit
