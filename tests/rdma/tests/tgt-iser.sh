#!/bin/sh
# timeout: 300
# tgt's iSER target, a 128 MiB file LUN, and the Linux kernel iSER initiator (ib_iser through
# open-iscsi) with the seed command: discovery and login over RDMA, the disk's SCSI host is
# iscsi_iser, 64 MiB written and read back with crc32c checks, rxe0 carried it, logout.
. /mnt/ix/tests/rdma/guest/lib.sh
IQN=iqn.2026-11.io.ix.rdma:tgt

ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }
if ! ixr_tgt_start iser "$IQN" 128; then
	ixr_fail target "tgtd with an iSER target could not be set up"
	ixr_exit
fi
ixr_kernel_io iser iscsi_iser && ixr_kernel_logout
ixr_exit
