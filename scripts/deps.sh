#!/bin/bash
# Install every Debian package the ix build and tests need, if missing. Idempotent: runs
# `apt-get update` only when something has to be installed. Needs root (or sudo) to install.
# With --rdma, also the packages of the RDMA tier (tests/rdma/), which tests/run.sh asks for
# when it runs that tier. With --ceph, also the single-node Ceph cluster of the RBD tests and
# benchmarks (tests/ceph/cluster.sh) and tgt's RBD backing store (bench/). Options combine.
set -euo pipefail

PKGS=(
	# build
	meson ninja-build pkg-config gcc clang libclang-rt-14-dev
	libisal-dev libssl-dev liburing-dev libjansson-dev libfuse3-dev libibverbs-dev librdmacm-dev
	librbd-dev librados-dev # the rbd backend (src/backend/bs_rbd.c)
	# tests: libiscsi tools + iscsi-test-cu, QEMU iscsi:// block driver, tgt as reference peer
	libiscsi-bin qemu-utils qemu-block-extra tgt python3
	# ixadm attach (FUSE) and its loop/mkfs/mount acceptance test
	fuse3 e2fsprogs
	# tests/run.sh and the interop scripts use these
	coreutils procps iproute2 mount # mount: losetup, for block-device LUNs
	# bench/run.sh: the loopback TCP ceiling; bench/insn.py: instructions per I/O
	iperf3 valgrind
)
for opt in "$@"; do
	case $opt in
	--rdma)
		PKGS+=(
			# the RDMA tier: QEMU boots the guest; tests/rdma/build-image.sh copies these
			# programs into its image
			qemu-system-x86 busybox-static kmod cpio file util-linux rdma-core
			ibverbs-providers ibverbs-utils rdmacm-utils open-iscsi fio e2fsprogs
		)
		;;
	--ceph)
		PKGS+=(
			# tests/ceph/cluster.sh: monitor, OSD, ceph/rbd CLI; tgt's bs_rbd for bench/
			ceph-mon ceph-osd ceph-common tgt-rbd
		)
		;;
	*)
		echo "deps: unknown option $opt (--rdma, --ceph)" >&2
		exit 2
		;;
	esac
done

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PKGS[@]} packages present"
	exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
