#!/bin/bash
# Install the Debian packages ix needs, if missing. Idempotent: runs `apt-get update` only when
# something has to be installed. Needs root (or sudo) to install.
# Without options: what building and running the target needs (the README's first command,
# scripts/start-target.sh). With --test, also the tests' peers and tools (libiscsi, QEMU, tgt,
# Prometheus, clang for the clang build and the fuzzers, ...) and the benchmarks' (bench/:
# iperf3, valgrind, istgt), which tests/run.sh asks for; with --rdma, the packages of the RDMA
# tier (tests/rdma/), which tests/run.sh asks for when it runs that tier; with --fresh, those
# of the clean-room check (tests/fresh.sh); with --package, those of the Debian package check
# (tests/package.sh); with --ceph, the single-node Ceph cluster of the RBD tests and
# benchmarks (tests/ceph/cluster.sh) and tgt's RBD backing store (bench/). Options combine.
set -euo pipefail

PKGS=(
	# build and run: the compiler, meson, and the libraries ix-target links
	meson ninja-build pkg-config gcc python3
	libisal-dev libssl-dev liburing-dev libjansson-dev libfuse3-dev libibverbs-dev librdmacm-dev
	librbd-dev librados-dev # the rbd backend (src/backend/bs_rbd.c)
)
for opt in "$@"; do
	case $opt in
	--test)
		PKGS+=(
			# tests/run.sh: the clang build and the fuzzers (libFuzzer, sanitizers)
			clang libclang-rt-14-dev
			# libiscsi tools + iscsi-test-cu, QEMU iscsi:// block driver, tgt as reference peer
			libiscsi-bin qemu-utils qemu-block-extra tgt
			# tests/interop/metrics.py: a real Prometheus server scrapes the metrics
			# endpoint; promtool
			prometheus
			# ixadm attach (FUSE) and its loop/mkfs/mount acceptance test
			fuse3 e2fsprogs
			# tests/run.sh and the interop scripts use these
			coreutils procps iproute2 mount # mount: losetup, for block-device LUNs
			# bench/run.sh: the loopback TCP ceiling; bench/insn.py: instructions per I/O;
			# bench/latency.py: istgt as a second peer
			iperf3 valgrind istgt
			# tests/interop/isns.py: open-isns's iSNS server and isnsadm
			open-isns-server open-isns-utils
		)
		;;
	--fresh)
		# tests/fresh.sh, the clean-room check: builds a minimal Debian root, copies HEAD in,
		# and lists the target the root serves with the host's iscsi-ls
		PKGS+=(mmdebstrap git tar libiscsi-bin)
		;;
	--package)
		# tests/package.sh: build the Debian package (debian/control's Build-Depends are the
		# build packages above plus scdoc), lintian, a clean root to install it in, man -l,
		# and systemd-analyze verify
		PKGS+=(debhelper dpkg-dev fakeroot scdoc lintian mmdebstrap git tar man-db systemd
			util-linux)
		;;
	--rdma)
		PKGS+=(
			# the RDMA tier: QEMU boots the guest; tests/rdma/build-image.sh copies these
			# programs into its image
			qemu-system-x86 busybox-static kmod cpio file util-linux rdma-core
			ibverbs-providers ibverbs-utils rdmacm-utils open-iscsi fio e2fsprogs
			# tests/rdma/tests/mpath.sh: dm-multipath in the guest (multipath, multipathd,
			# kpartx and dmsetup are copied into the image, with udev's udevadm and rules, which
			# come with multipath-tools), sg_rtpg/sg_raw/sg_stpg to look at and drive ALUA per
			# path
			multipath-tools dmsetup sg3-utils
			# tests/rdma/tests/isns.sh: isnsd and isnsadm in the guest, for iscsiadm -t isns
			open-isns-server open-isns-utils
			# tests/rdma/tests/odx.sh: ddpt's ODX copies (POPULATE TOKEN / WRITE USING
			# TOKEN) through the kernel initiator
			ddpt
			# tests/rdma/tests/iwarp.sh: Debian's kernel has no Soft-iWARP, so build-image.sh
			# builds siw.ko from the kernel's own source against its headers (make, from the
			# build packages, drives it)
			linux-headers-amd64 linux-source-6.1 make
		)
		;;
	--ceph)
		PKGS+=(
			# tests/ceph/cluster.sh: monitor, OSD, ceph/rbd CLI; tgt's bs_rbd for bench/
			ceph-mon ceph-osd ceph-common tgt-rbd
			# cluster.sh --mgr: pool statistics, so quotas are enforced (rbd_full.py)
			ceph-mgr
			# tests/interop/cephiscsi_import.py: encrypts CHAP passwords with an RSA key as
			# ceph-iscsi does, for ix-ctl import --key
			openssl
			# tests/chaos/chaos.py (and tests/interop/chaos_short.py): nft drop rules in the
			# gateways' network namespaces cut a gateway's link to Ceph or to the client
			nftables
			# tests/interop/rbd_snap_pause.py: tests/ceph/librbd_writer.py, a librbd client
			# with no ix in between, the reference for a snapshot's pause
			python3-rbd
			# tests/chaos/osdwatch.py: the OSD map each blocklist entry entered and when the
			# OSD had it, for the chaos checker (python3-rbd pulls it in; named for itself)
			python3-rados
		)
		;;
	*)
		echo "deps: unknown option $opt (known: --test, --rdma, --fresh, --package, --ceph)" >&2
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
# Packages installed for the tests (tgt, open-iscsi, ...) must not start their services: a tgtd
# started by its package would hold port 3260 before ix-target could. A policy-rc.d that
# answers 101 ("action forbidden") is how Debian's maintainer scripts are told so, for the
# length of this install (invoke-rc.d and deb-systemd-invoke both honour it); one the admin
# already has is left alone.
POLICY=/usr/sbin/policy-rc.d
if [ ! -e $POLICY ]; then
	printf '#!/bin/sh\n# scripts/deps.sh of ix: no service starts while it installs\nexit 101\n' |
		$SUDO tee $POLICY >/dev/null
	$SUDO chmod 755 $POLICY
	trap '$SUDO rm -f $POLICY' EXIT
fi
fail() {
	echo "deps: FAILED: $*" >&2
	echo "deps: packages wanted: ${missing[*]}" >&2
	exit 1
}
# open-isns-server's postinst makes the server's key with `isnsd --init`, which names the server
# after this machine and fails when the host name does not resolve (a Debian installation maps
# it in /etc/hosts; say so rather than leave dpkg half done)
for p in "${missing[@]}"; do
	if [ "$p" = open-isns-server ] && ! getent hosts "$(hostname)" >/dev/null; then
		fail "the host name $(hostname) does not resolve, which open-isns-server's set-up needs: add \"127.0.1.1 $(hostname)\" to /etc/hosts, as the Debian installer does"
	fi
done
$SUDO apt-get update -q || fail "apt-get update"
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" ||
	fail "apt-get install -y --no-install-recommends ${missing[*]}"
# A service installed just now and enabled by its package would start at the next boot and
# hold a port (tgt and istgt: 3260; prometheus: 9090, isnsd: 3205, a test starts its own): disable the ones
# this script brought in (systemd machines only).
if [ -d /run/systemd/system ]; then
	for p in "${missing[@]}"; do
		case $p in
		tgt) $SUDO systemctl disable --now tgt.service >/dev/null 2>&1 || true ;;
		istgt) $SUDO systemctl disable --now istgt.service >/dev/null 2>&1 || true ;;
		prometheus) $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true ;;
		multipath-tools) $SUDO systemctl disable --now multipathd.service multipathd.socket >/dev/null 2>&1 || true ;;
		open-isns-server) $SUDO systemctl disable --now isnsd.service isnsd.socket >/dev/null 2>&1 || true ;;
		esac
	done
fi
echo "deps: installed ${#missing[@]} packages"
