#!/bin/bash
# libiscsi command line tools against the target: discovery + LUN listing (iscsi-ls -s),
# standard INQUIRY and the VPD pages every block target needs (iscsi-inq), and READ
# CAPACITY(16) reporting the configured size (iscsi-readcapacity16).
# Usage: libiscsi-tools.sh            (IX_PEER=ix|tgt selects the target; default ix;
#        PEER_BACKEND=ram|file|block the LUN's storage, see libiscsi-tools-{file,block}.sh)
. "$(dirname "$0")/../lib/common.sh"

ixt_need iscsi-ls iscsi-inq iscsi-readcapacity16
ixt_init libiscsi-tools
PEER_SIZE=64
peer_start

out="$IXT_TMP/out"

# 1. iscsi-ls -s: the target must be listed with its portal, and the LUN as a disk.
if ixt_run 30 iscsi-ls -s "$PEER_PORTAL" >"$out" 2>&1; then
	cat "$out" >&2
	if grep -q "Target:$PEER_IQN Portal:$IX_HOST:$PEER_PORT," "$out" &&
		grep -qE "^Lun:$PEER_LUN +Type:DIRECT_ACCESS \(Size:6[34]M\)" "$out"; then
		ixt_check_pass iscsi-ls
	else
		ixt_check_fail iscsi-ls "target/portal/LUN line missing or wrong"
	fi
else
	cat "$out" >&2
	ixt_check_fail iscsi-ls "iscsi-ls failed"
fi

# 2. Standard INQUIRY: peripheral type 0 (direct access), a vendor and a product.
if ixt_run 30 iscsi-inq "$PEER_URL" >"$out" 2>&1; then
	cat "$out" >&2
	if grep -q 'Peripheral Device Type:DIRECT_ACCESS' "$out" &&
		grep -q 'Peripheral Qualifier:CONNECTED' "$out" &&
		grep -qE '^Vendor:.+' "$out" && grep -qE '^Product:.+' "$out"; then
		ixt_check_pass inquiry-standard
	else
		ixt_check_fail inquiry-standard "unexpected standard INQUIRY data"
	fi
else
	cat "$out" >&2
	ixt_check_fail inquiry-standard "iscsi-inq failed"
fi

# 3. VPD pages. 0x00 must list every page we ask for afterwards, in ascending order.
# iscsi-inq parses the page code as a decimal integer.
vpd() { ixt_run 30 iscsi-inq -e 1 -c "$1" "$PEER_URL" >"$out" 2>&1; local rc=$?; cat "$out" >&2; return $rc; }

if vpd 0; then
	# iscsi-inq prints one "Page:0xNN NAME" line per supported page.
	pages=$(sed -n 's/^Page:\(0x[0-9a-fA-F]*\).*/\1/p' "$out" | tr 'A-F' 'a-f')
	missing=""
	for p in 0x00 0x80 0x83 0xb0 0xb1 0xb2; do
		grep -qx "$p" <<<"$pages" || missing="$missing $p"
	done
	sorted=$(sort <<<"$pages" | tr '\n' ' ')
	asis=$(tr '\n' ' ' <<<"$pages")
	if [ -n "$missing" ]; then
		ixt_check_fail vpd-0x00 "supported VPD pages lack:$missing (got: $asis)"
	elif [ "$sorted" != "$asis" ]; then
		ixt_check_fail vpd-0x00 "supported VPD page list not ascending: $asis"
	else
		ixt_check_pass vpd-0x00
	fi
else
	ixt_check_fail vpd-0x00 "iscsi-inq -e 1 -c 0x00 failed"
fi

if vpd 128; then
	if grep -qE '^Unit Serial Number:\[ *[^] ]+' "$out"; then ixt_check_pass vpd-0x80
	else ixt_check_fail vpd-0x80 "no unit serial number"; fi
else
	ixt_check_fail vpd-0x80 "iscsi-inq failed"
fi

if vpd 131; then
	# SPC-4: at least one LU designator; a NAA designator is what Linux multipath wants.
	if grep -qE 'Association:(\(0\) )?LOGICAL_UNIT' "$out" && grep -qE 'Designator Type:(\([0-9]+\) )?(NAA|EUI-64|EUI_64)' "$out"; then
		ixt_check_pass vpd-0x83
	else
		ixt_check_fail vpd-0x83 "no NAA/EUI-64 logical-unit designator"
	fi
else
	ixt_check_fail vpd-0x83 "iscsi-inq failed"
fi

if vpd 176; then
	if grep -qiE '^maximum transfer length:[0-9]+' "$out"; then ixt_check_pass vpd-0xb0
	else ixt_check_fail vpd-0xb0 "block limits page not decoded"; fi
else
	ixt_check_fail vpd-0xb0 "iscsi-inq failed"
fi

if vpd 177; then
	if grep -qiE '^Medium Rotation Rate:[0-9]+' "$out"; then ixt_check_pass vpd-0xb1
	else ixt_check_fail vpd-0xb1 "block device characteristics page not decoded"; fi
else
	ixt_check_fail vpd-0xb1 "iscsi-inq failed"
fi

if vpd 178; then
	if grep -qiE '^provisioning type:[0-9]+' "$out"; then ixt_check_pass vpd-0xb2
	else ixt_check_fail vpd-0xb2 "logical block provisioning page not decoded"; fi
else
	ixt_check_fail vpd-0xb2 "iscsi-inq failed"
fi

# 4. READ CAPACITY(16): 64 MiB -> returned LBA + 1 blocks of block length bytes.
if ixt_run 30 iscsi-readcapacity16 "$PEER_URL" >"$out" 2>&1; then
	cat "$out" >&2
	bl=$(sed -n 's/^LOGICAL BLOCK LENGTH IN BYTES:\([0-9]*\).*/\1/p' "$out")
	lba=$(sed -n 's/^RETURNED LOGICAL BLOCK ADDRESS:\([0-9]*\).*/\1/p' "$out")
	if [ -n "$bl" ] && [ -n "$lba" ] && [ $(((lba + 1) * bl)) = $((PEER_SIZE * 1024 * 1024)) ]; then
		ixt_check_pass readcapacity16 "$((lba + 1)) x $bl bytes"
	else
		ixt_check_fail readcapacity16 "size $(((${lba:-0} + 1) * ${bl:-0})) != $((PEER_SIZE * 1024 * 1024))"
	fi
else
	cat "$out" >&2
	ixt_check_fail readcapacity16 "iscsi-readcapacity16 failed"
fi

peer_check
[ "$IXT_FAILED" = 0 ]
