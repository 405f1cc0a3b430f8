#!/bin/bash
# Install every Debian package the ix build and tests need, if missing. Idempotent: runs
# `apt-get update` only when something has to be installed. Needs root (or sudo) to install.
# With --rdma, also the packages of the RDMA tier (tests/rdma/deps.sh: QEMU and the guest's
# programs), which tests/run.sh asks for when it runs that tier.
set -euo pipefail
if [ "${1:-}" = --rdma ]; then
	"$(dirname "$0")/../tests/rdma/deps.sh"
fi

PKGS=(
	# build
	meson ninja-build pkg-config gcc clang libclang-rt-14-dev
	libisal-dev libssl-dev liburing-dev libjansson-dev libfuse3-dev
	# tests: libiscsi tools + iscsi-test-cu, QEMU iscsi:// block driver, tgt as reference peer
	libiscsi-bin qemu-utils qemu-block-extra tgt python3
	# ixadm attach (FUSE) and its loop/mkfs/mount acceptance test
	fuse3 e2fsprogs
	# tests/run.sh and the interop scripts use these
	coreutils procps iproute2 mount # mount: losetup, for block-device LUNs
)

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
