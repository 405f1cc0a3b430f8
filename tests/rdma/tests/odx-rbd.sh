#!/bin/sh
# timeout: 900
# host: tests/rdma/host/odx_rbd.py
# odx.sh's checks (token-based copy through the kernel initiator, sg3_utils' sg_raw and ddpt)
# against ix-target on the HOST exporting two RBD images of one memstore Ceph cluster as LUNs 0
# and 1 (tests/rdma/host/odx_rbd.py): copies between the images and within one go through ix's
# copy manager, the guest reaches the target through QEMU user networking (IXR_PORTAL1), and the
# per-LUN counters come from the host part's `ix-ctl stats`. Skipped as a whole without Ceph.
IXR_ODX_HOST=1
. /mnt/ix/tests/rdma/tests/odx.sh
