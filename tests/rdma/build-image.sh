#!/bin/bash
# Build, or reuse from the cache, the QEMU guest of the RDMA tier: Debian's kernel (vmlinuz) and
# an uncompressed initramfs holding busybox-static as the shell, the kernel modules for Soft-RoCE,
# the iSCSI/iSER initiator and LIO with isert, and the host's own binaries for the peers (rdma-core
# tools, open-iscsi, tgt, fio, e2fsprogs) with every library they load. Nothing is installed on
# the host: the kernel package is fetched with `apt-get download` and unpacked in a scratch dir.
#
#   tests/rdma/build-image.sh [--force]     prints the image directory on its last line
#
# The image directory holds vmlinuz, initramfs.cpio and manifest.txt. It is rebuilt only when an
# input changes: this script, tests/rdma/guest/init, the kernel package version, or any host file
# copied in (path, size and mtime of every binary, library and provider). Environment:
#   IX_RDMA_CACHE   cache folder (default ${XDG_CACHE_HOME:-~/.cache}/ix-rdma)
#   IX_RDMA_KERNEL  kernel package to use (default: what linux-image-amd64 depends on)
# Host packages it needs: scripts/deps.sh --rdma (tests/run.sh and tests/rdma/run.sh call it).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${IX_RDMA_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/ix-rdma}
FORCE=0
[ "${1:-}" = --force ] && FORCE=1

say() { printf 'build-image: %s\n' "$*" >&2; }
die() { printf 'build-image: ERROR: %s\n' "$*" >&2; exit 1; }

# Kernel modules, loaded in the guest with one `modprobe -a` (one call per module costs seconds
# under TCG). Their dependencies are added by modprobe --show-depends; crc32 is not a dependency
# of rdma_rxe but it asks the crypto API for it (without it: "rdma_rxe: failed to add").
MODULES=(virtio_pci virtio_net 9pnet_virtio 9p dummy veth crc32c_generic crc32c-intel
	crc32_generic crc32-pclmul
	ib_core ib_uverbs ib_umad iw_cm ib_cm rdma_cm rdma_ucm rdma_rxe siw
	scsi_mod sd_mod sg scsi_transport_iscsi libiscsi libiscsi_tcp iscsi_tcp ib_iser
	configfs target_core_mod target_core_file target_core_iblock iscsi_target_mod ib_isert
	loop ext4
	dm_mod dm_multipath dm_round_robin dm_service_time scsi_dh_alua)

# Host programs copied in (with their libraries). Each must exist: scripts/deps.sh --rdma installs
# the packages (iproute2, kmod, ibverbs-utils, rdmacm-utils, open-iscsi, tgt, fio, e2fsprogs,
# multipath-tools, dmsetup, sg3-utils, open-isns-server, open-isns-utils, ddpt).
PROGRAMS=(/usr/sbin/ip /usr/bin/rdma /usr/bin/kmod
	/usr/bin/ibv_devices /usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong /usr/bin/rping
	/usr/sbin/iscsiadm /usr/sbin/iscsid /usr/sbin/tgtd /usr/sbin/tgtadm
	/usr/bin/fio /usr/sbin/mke2fs /usr/sbin/e2fsck
	/sbin/multipath /sbin/multipathd /sbin/dmsetup /sbin/kpartx /usr/bin/udevadm /usr/lib/udev/scsi_id
	/usr/bin/sg_rtpg /usr/bin/sg_stpg /usr/bin/sg_raw /usr/bin/sg_inq /usr/bin/sg_vpd /usr/bin/sg_turs
	/usr/sbin/isnsd /usr/sbin/isnsadm /usr/bin/ddpt /usr/bin/sg_reset)
# Names under which kmod and e2fsprogs are called.
LINKS=(/usr/sbin/modprobe:/usr/bin/kmod /usr/sbin/mkfs.ext4:/usr/sbin/mke2fs
	/usr/sbin/fsck.ext4:/usr/sbin/e2fsck /usr/lib/systemd/systemd-udevd:/usr/bin/udevadm)
# multipath-tools needs udev: it finds paths through libudev with "is initialized" (a device
# udevd has processed), so the mpath test runs systemd-udevd with the block-device rules of
# udev, dmsetup (device-mapper cookies), multipath-tools and sg3-utils-udev (ID_SERIAL, WWIDs),
# and their helper programs. Only these rules: the rest (input, sound, network naming, ...)
# would only cost time at every `udevadm trigger`.
UDEV_FILES=(/usr/lib/udev/kpartx_id
	/usr/lib/udev/rules.d/50-udev-default.rules /usr/lib/udev/rules.d/55-dm.rules
	/usr/lib/udev/rules.d/55-scsi-sg3_id.rules /usr/lib/udev/rules.d/56-dm-mpath.rules
	/usr/lib/udev/rules.d/56-dm-parts.rules /usr/lib/udev/rules.d/58-scsi-sg3_symlink.rules
	/usr/lib/udev/rules.d/60-block.rules /usr/lib/udev/rules.d/60-multipath.rules
	/usr/lib/udev/rules.d/60-persistent-storage.rules
	/usr/lib/udev/rules.d/60-persistent-storage-dm.rules /usr/lib/udev/rules.d/95-dm-notify.rules)
# Loaded with dlopen, so ldd does not list them: the Soft-RoCE and Soft-iWARP verbs providers, and
# multipath-tools' path checkers and prioritizers (tur, alua, const, sysfs: the ones the
# mpath test's multipath.conf and the built-in defaults name).
PROVIDER=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
PROVIDER_SIW=/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so
PLUGINS=(/lib/multipath/libchecktur.so /lib/multipath/libcheckdirectio.so
	/lib/multipath/libprioalua.so /lib/multipath/libprioconst.so /lib/multipath/libpriosysfs.so)
# Libraries the ix binaries built on the host need (they run in the guest from the 9p share;
# libraries inside the build dir, like libix.so, come over the share through their RUNPATH),
# for the normal and the ASan+UBSan build. tests/rdma/run.sh checks them against `ldd` of the
# build's binaries and names any missing one.
IX_LIBS=(libisal.so.2 libcrypto.so.3 liburing.so.2 libjansson.so.4
	libasan.so.8 libubsan.so.1 libm.so.6 libgcc_s.so.1 libstdc++.so.6 libibverbs.so.1 librdmacm.so.1
	libfuse3.so.3 librbd.so.1 librados.so.2)

for p in "${PROGRAMS[@]}" "$PROVIDER" "$PROVIDER_SIW" "${PLUGINS[@]}" "${UDEV_FILES[@]}" /usr/bin/busybox; do
	[ -e "$p" ] || die "$p is missing: run scripts/deps.sh --rdma"
done
case $(file -L /usr/bin/busybox) in
*'statically linked'*) ;;
*) die "/usr/bin/busybox is not static (install busybox-static)" ;;
esac

# usrmerge: /lib, /bin, /sbin, /lib64 are links into /usr; files go to their /usr path.
usrpath() {
	case $1 in
	/lib/* | /lib64/* | /bin/* | /sbin/*) echo "/usr$1" ;;
	*) echo "$1" ;;
	esac
}

# Every host file that goes into the image: programs, their libraries, the provider and its
# libraries, ix's libraries.
host_files() {
	local f
	for f in "${PROGRAMS[@]}" "$PROVIDER" "$PROVIDER_SIW" "${PLUGINS[@]}"; do
		echo "$f"
		ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
	done
	for f in "${IX_LIBS[@]}"; do
		[ -e "/lib/x86_64-linux-gnu/$f" ] || die "library $f missing (scripts/deps.sh installs it)"
		echo "/lib/x86_64-linux-gnu/$f"
	done
	echo /usr/bin/busybox
	echo /etc/libibverbs.d/rxe.driver
	echo /etc/libibverbs.d/siw.driver
	printf '%s\n' "${UDEV_FILES[@]}"
}

# ---- which kernel -------------------------------------------------------------------------------
kernel_pkg() {
	if [ -n "${IX_RDMA_KERNEL:-}" ]; then
		echo "$IX_RDMA_KERNEL"
		return
	fi
	apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
KPKG=$(kernel_pkg)
if [ -z "$KPKG" ]; then
	say "apt has no package lists; running apt-get update"
	apt-get update -q >&2 || die "apt-get update failed"
	KPKG=$(kernel_pkg)
fi
[ -n "$KPKG" ] || die "cannot find the kernel package linux-image-amd64 depends on"
KVER_PKG=$(apt-cache show --no-all-versions "$KPKG" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
[ -n "$KVER_PKG" ] || die "apt knows no version of $KPKG"

FILES=$(host_files | sort -u)
KEY=$( {
	sha256sum "$HERE/build-image.sh" "$HERE/guest/init"
	echo "$KPKG $KVER_PKG"
	echo "${MODULES[*]}"
	# shellcheck disable=SC2086
	stat -L -c '%n %s %Y' $FILES
} | sha256sum | cut -c1-16)
IMG=$CACHE/img-$KEY
if [ $FORCE = 0 ] && [ -f "$IMG/ok" ]; then
	say "cached image $IMG"
	touch "$IMG" # most recently used: the clean-up below keeps it
	echo "$IMG"
	exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock -w 900 9 || die "another build holds $CACHE/lock for 15 minutes"
if [ $FORCE = 0 ] && [ -f "$IMG/ok" ]; then # built by someone else while we waited
	echo "$IMG"
	exit 0
fi
T0=$SECONDS

# ---- kernel package: download once, unpack into scratch ---------------------------------------
DEB=$(ls "$CACHE/${KPKG}_${KVER_PKG//:/%3a}_"*.deb 2>/dev/null | head -1 || true)
if [ -z "$DEB" ]; then
	say "downloading $KPKG $KVER_PKG"
	if ! (cd "$CACHE" && apt-get download "$KPKG=$KVER_PKG" >&2); then
		# stale package lists name a version the mirror no longer has: refresh, start over once
		[ -z "${IX_RDMA_RETRIED:-}" ] || die "apt-get download $KPKG=$KVER_PKG failed"
		say "download failed; refreshing apt lists and starting over"
		apt-get update -q >&2 || die "apt-get update failed"
		IX_RDMA_RETRIED=1 exec 9>&- "$0" "$@"
	fi
	DEB=$(ls "$CACHE/${KPKG}_"*.deb | head -1)
fi
WORK=$(mktemp -d "$CACHE/work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
say "unpacking $(basename "$DEB")"
dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$WORK" --wildcards './boot/vmlinuz-*' './lib/modules/*' ||
	die "cannot unpack $DEB"
KVER=$(ls "$WORK/lib/modules" | head -1)
[ -n "$KVER" ] && [ -f "$WORK/boot/vmlinuz-$KVER" ] || die "no kernel in $DEB"
depmod -b "$WORK" "$KVER" || die "depmod on the unpacked modules failed"

# ---- Soft-iWARP: Debian's kernels are built without it (CONFIG_RDMA_SIW is not set, 6.1 and
# 6.12 alike), so siw.ko is built here from Debian's own kernel source of the same version
# (linux-source-X.Y) against the guest kernel's headers (linux-headers-$KVER), as an external
# module, once per kernel version (kept in the cache). Nothing of it is in this repository.
if ! modprobe -d "$WORK" -S "$KVER" --show-depends siw >/dev/null 2>&1; then
	SIW=$CACHE/siw-$KVER-$KVER_PKG.ko
	if [ ! -f "$SIW" ]; then
		SERIES=$(echo "$KVER" | cut -d. -f1,2)
		need=()
		[ -d "/usr/src/linux-headers-$KVER" ] || need+=("linux-headers-$KVER")
		[ "$(dpkg-query -W -f '${Version}' "linux-source-$SERIES" 2>/dev/null)" = "$KVER_PKG" ] ||
			need+=("linux-source-$SERIES=$KVER_PKG")
		if [ ${#need[@]} -gt 0 ]; then
			say "installing ${need[*]} (the guest kernel's siw module is built from them)"
			apt-get install -y -q "${need[@]}" >&2 || die "apt-get install ${need[*]} failed"
		fi
		say "building siw.ko for $KVER from linux-source-$SERIES"
		mkdir -p "$WORK/siw"
		tar -xJf "/usr/src/linux-source-$SERIES.tar.xz" -C "$WORK/siw" --strip-components=5 \
			--wildcards "linux-source-$SERIES/drivers/infiniband/sw/siw/*" ||
			die "cannot unpack siw from /usr/src/linux-source-$SERIES.tar.xz"
		make -s -C "/usr/src/linux-headers-$KVER" M="$WORK/siw" CONFIG_RDMA_SIW=m modules >&2 ||
			die "building siw.ko failed"
		cp "$WORK/siw/siw.ko" "$SIW.tmp" && mv "$SIW.tmp" "$SIW"
	fi
	mkdir -p "$WORK/lib/modules/$KVER/extra"
	cp "$SIW" "$WORK/lib/modules/$KVER/extra/siw.ko"
	depmod -b "$WORK" "$KVER" || die "depmod with siw.ko failed"
fi

# ---- initramfs tree -----------------------------------------------------------------------------
R=$WORK/root
mkdir -p "$R"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} "$R"/{dev,proc,sys,tmp,run,mnt,etc,var,root}
ln -s usr/bin "$R/bin"
ln -s usr/sbin "$R/sbin"
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
ln -s ../run "$R/var/run"
ln -s ../run/lock "$R/var/lock"

# modules: the closure of MODULES, then depmod on that subset
MODDIR=lib/modules/$KVER
mkdir -p "$R/usr/$MODDIR"
nmod=0
for m in "${MODULES[@]}"; do
	out=$(modprobe -d "$WORK" -S "$KVER" --show-depends "$m" 2>&1) || die "module $m: $out"
	while read -r kind path _; do
		[ "$kind" = insmod ] || continue # "builtin X" needs nothing
		rel=${path#"$WORK"/}
		if [ ! -f "$R/usr/$rel" ]; then
			mkdir -p "$(dirname "$R/usr/$rel")"
			cp "$path" "$R/usr/$rel"
			nmod=$((nmod + 1))
		fi
	done <<<"$out"
done
cp "$WORK/$MODDIR"/modules.{builtin,builtin.modinfo,order} "$R/usr/$MODDIR/"
depmod -b "$R/usr" "$KVER" || die "depmod on the image failed"
mkdir -p "$R/etc/ix-rdma"
printf '%s\n' "${MODULES[@]}" >"$R/etc/ix-rdma/modules"

# host files, each at its /usr path (symlinks resolved)
nfile=0
for f in $FILES; do
	dst=$R$(usrpath "$f")
	mkdir -p "$(dirname "$dst")"
	cp -L "$f" "$dst"
	nfile=$((nfile + 1))
done
for l in "${LINKS[@]}"; do
	mkdir -p "$(dirname "$R${l%%:*}")"
	ln -sf "${l#*:}" "$R${l%%:*}"
done
# busybox applets for everything not copied from the host
for a in $(/usr/bin/busybox --list); do
	[ -e "$R/usr/bin/$a" ] || [ -e "$R/usr/sbin/$a" ] || ln -s busybox "$R/usr/bin/$a"
done

cp "$HERE/guest/init" "$R/init"
chmod 755 "$R/init"
printf 'include /etc/ld.so.conf.d/*.conf\n' >"$R/etc/ld.so.conf"
mkdir -p "$R/etc/ld.so.conf.d"
printf '/usr/local/lib\n/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/libibverbs\n' \
	>"$R/etc/ld.so.conf.d/x86_64-linux-gnu.conf"
ldconfig -r "$R" || die "ldconfig -r failed"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\n' >"$R/etc/group"
# a console before devtmpfs is mounted (needs root; /init copes without it)
mknod -m 600 "$R/dev/console" c 5 1 2>/dev/null || true

# ---- write out ------------------------------------------------------------------------------------
NEW=$CACHE/new.$$
rm -rf "$NEW"
mkdir -p "$NEW"
cp "$WORK/boot/vmlinuz-$KVER" "$NEW/vmlinuz"
(cd "$R" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$NEW/initramfs.cpio" ||
	die "cpio failed"
{
	echo "key $KEY"
	echo "kernel $KPKG $KVER_PKG ($KVER)"
	echo "modules $nmod files $nfile"
	echo "initramfs $(stat -c %s "$NEW/initramfs.cpio") bytes"
	echo "built $(date -u +%FT%TZ) in $((SECONDS - T0)) s"
} >"$NEW/manifest.txt"
# every library file name, also those in subdirectories (libceph-common.so.2 lives in ceph/)
(cd "$R/usr/lib/x86_64-linux-gnu" && find . \( -type f -o -type l \) -printf '%f\n' | LC_ALL=C sort -u) \
	>"$NEW/libs.txt"
touch "$NEW/ok"
rm -rf "$IMG"
mv "$NEW" "$IMG"
# keep the three most recently used images (other checkouts may be using theirs right now);
# the .deb of the current kernel stays for the next rebuild
ls -dt "$CACHE"/img-* | tail -n +4 | xargs -r rm -rf
ls "$CACHE"/*.deb 2>/dev/null | grep -v "/${KPKG}_${KVER_PKG//:/%3a}_" | xargs -r rm -f || true
say "built $IMG: $(tr '\n' ';' <"$IMG/manifest.txt")"
echo "$IMG"
