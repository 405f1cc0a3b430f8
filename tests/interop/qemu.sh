#!/bin/bash
# QEMU's iscsi:// block driver (libiscsi inside qemu-img / qemu-io) against the target:
#   - qemu-img convert a 64 MiB random image onto the LUN and back; checksums must match;
#   - qemu-io pattern writes/reads at several offsets and sizes (aligned and unaligned-size
#     requests, requests larger than MaxBurstLength), each read checking the pattern.
# With PEER_BACKEND=file|block (qemu-file.sh, qemu-block.sh) the LUN is a file or a loop
# device, and the image written must be found in that file or device afterwards.
. "$(dirname "$0")/../lib/common.sh"

ixt_need qemu-img qemu-io sha256sum
ixt_init qemu
PEER_SIZE=64
peer_start

# qemu needs the iSCSI block driver module (qemu-block-extra).
if ! qemu-img --help 2>/dev/null | grep -q 'Supported formats:.*iscsi'; then
	ixt_skip "qemu-img has no iscsi driver (install qemu-block-extra)"
fi

src="$IXT_TMP/src.raw"
back="$IXT_TMP/back.raw"
head -c $((PEER_SIZE * 1024 * 1024)) /dev/urandom >"$src"

if ixt_run 300 qemu-img convert -p -n -f raw -O raw "$src" "$PEER_URL" >&2; then
	if ixt_run 300 qemu-img convert -p -f raw -O raw "$PEER_URL" "$back" >&2; then
		a=$(sha256sum <"$src" | cut -d' ' -f1)
		b=$(sha256sum <"$back" | cut -d' ' -f1)
		sz=$(stat -c %s "$back")
		if [ "$a" = "$b" ]; then
			ixt_check_pass qemu-img-roundtrip "64 MiB sha256 $a"
			# file and block LUNs: the image must really be in the backing store
			if [ -n "$PEER_BACKING" ]; then
				c=$(sha256sum <"$PEER_BACKING" | cut -d' ' -f1)
				if [ "$c" = "$a" ]; then
					ixt_check_pass backing-store "$PEER_BACKING holds the image"
				else
					ixt_check_fail backing-store "$PEER_BACKING has sha256 $c, not $a"
				fi
			fi
		else
			ixt_check_fail qemu-img-roundtrip "checksum differs: wrote $a, read back $b ($sz bytes)"
		fi
	else
		ixt_check_fail qemu-img-roundtrip "qemu-img convert from the LUN failed"
	fi
else
	ixt_check_fail qemu-img-roundtrip "qemu-img convert onto the LUN failed"
fi

if ixt_run 60 qemu-img info "$PEER_URL" >"$IXT_TMP/info" 2>&1; then
	cat "$IXT_TMP/info" >&2
	if grep -q "virtual size: .*($((PEER_SIZE * 1024 * 1024)) bytes)" "$IXT_TMP/info"; then
		ixt_check_pass qemu-img-info
	else
		ixt_check_fail qemu-img-info "virtual size is not $((PEER_SIZE * 1024 * 1024)) bytes"
	fi
else
	ixt_check_fail qemu-img-info "qemu-img info failed"
fi

# qemu-io pattern checks: write pattern P at OFF LEN, read it back verifying P. A wrong
# pattern makes qemu-io print "Pattern verification failed" (it still exits 0), so check
# the output too.
qio() { # NAME OFF LEN PATTERN
	local name=$1 off=$2 len=$3 pat=$4 out="$IXT_TMP/qio.out"
	if ixt_run 120 qemu-io -f raw -c "write -P $pat $off $len" -c "read -P $pat $off $len" \
		"$PEER_URL" >"$out" 2>&1; then
		cat "$out" >&2
		if grep -qi 'fail\|error' "$out" || [ "$(grep -c '^read ' "$out")" != 1 ] ||
			[ "$(grep -c '^wrote ' "$out")" != 1 ]; then
			ixt_check_fail "$name" "qemu-io reported a mismatch or error"
		else
			ixt_check_pass "$name"
		fi
	else
		cat "$out" >&2
		ixt_check_fail "$name" "qemu-io failed"
	fi
}

qio qemu-io-1M-at-0 0 1M 0xab
qio qemu-io-4k-at-end $((PEER_SIZE * 1024 * 1024 - 4096)) 4k 0x5a
qio qemu-io-512-at-512 512 512 0x11
qio qemu-io-3M-at-7M 7M 3M 0xc3
qio qemu-io-8M-at-32M 32M 8M 0x3c

# Reading the first pattern again after the others proves writes did not spill over.
out="$IXT_TMP/qio2.out"
if ixt_run 60 qemu-io -f raw -c "read -P 0xab 1024 1047552" -c "read -P 0x11 512 512" \
	"$PEER_URL" >"$out" 2>&1 && ! grep -qi 'fail\|error' "$out" && [ "$(grep -c '^read ' "$out")" = 2 ]; then
	cat "$out" >&2
	ixt_check_pass qemu-io-no-overlap
else
	cat "$out" >&2
	ixt_check_fail qemu-io-no-overlap "earlier patterns were not intact"
fi

peer_check
[ "$IXT_FAILED" = 0 ]
