#!/bin/bash
# Host packages of the RDMA tier (tests/rdma/): QEMU to boot the guest, and the programs copied
# into its image (busybox-static, kmod, iproute2, rdma-core tools, open-iscsi, tgt, fio,
# e2fsprogs). Idempotent; installs only what is missing (apt-get update first, then).
set -euo pipefail
PKGS=(qemu-system-x86 busybox-static kmod cpio file iproute2 rdma-core ibverbs-providers
	ibverbs-utils rdmacm-utils open-iscsi tgt fio e2fsprogs util-linux)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "rdma deps: all ${#PKGS[@]} packages present"
	exit 0
fi
echo "rdma deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "rdma deps: need root or sudo for: ${missing[*]}" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
