#!/bin/bash
# Record real initiators talking to ix-target and turn the traffic into fuzz seeds
# (docs/fuzzing.md). Not part of the suite: run it by hand when the protocol surface grows,
# review the new files under tests/fuzz/corpus, and commit the ones worth keeping.
#
#   tests/fuzz/capture.sh [BUILD_DIR [seeds.py split options...]]   (default: build)
#   IX_CAPTURE_CLIENTS="libiscsi qemu ix"   which initiators to record (default: all three)
#
# Starts ix-target with a plain thin RAM target and a CHAP (mutual) target, puts the recording
# proxy of seeds.py in front of it, and runs libiscsi's iscsi-inq, iscsi-ls, iscsi-readcapacity16
# and some iscsi-test-cu families, QEMU (qemu-img, qemu-io) and the ix initiator
# (tests/integration/ini_accept: login, TMFs, digests, mutual CHAP) through the proxy. Header and
# data digests are offered so both framings appear. Then seeds.py split writes the seeds.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-build}
[ $# -gt 0 ] && shift
BIN=$ROOT/$BUILD/tools/ix-target
[ -x "$BIN" ] || { echo "capture.sh: build $BUILD first" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ix-capture.XXXXXX)
REC=$TMP/rec
PORT=$(python3 tests/lib/ixtest.py free-port)
PROXY=$(python3 tests/lib/ixtest.py free-port)
PLAIN=iqn.2026-11.io.ix:capture-plain
SECURE=iqn.2026-11.io.ix:capture-chap
CLIENTS=${IX_CAPTURE_CLIENTS:-libiscsi qemu ix}
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

cat >"$TMP/cfg.json" <<EOF
{
  "global": { "negotiation": { "header_digest": "prefer-crc32c", "data_digest": "prefer-none" } },
  "portals": [{ "address": "127.0.0.1", "port": $PORT }],
  "targets": [
    { "name": "$PLAIN", "luns": [{ "lun": 0, "backend": "ram", "size": "64M", "thin": true }] },
    { "name": "$SECURE", "luns": [{ "lun": 0, "backend": "ram", "size": "8M" }],
      "chap": { "user": "capuser", "secret": "capture-secret-1" },
      "mutual_chap": { "user": "captarget", "secret": "capture-target-secret-2" } }
  ]
}
EOF
"$BIN" -c "$TMP/cfg.json" 2>"$TMP/target.log" &
PIDS+=($!)
python3 tests/lib/ixtest.py wait-port 127.0.0.1 "$PORT" 20
python3 tests/fuzz/seeds.py record --listen "$PROXY" --target "127.0.0.1:$PORT" --out "$REC" &
PIDS+=($!)
python3 tests/lib/ixtest.py wait-port 127.0.0.1 "$PROXY" 20

P=127.0.0.1:$PROXY
run() { timeout -k 5 120 "$@" >/dev/null 2>&1 || echo "capture.sh: '$*' exited $?" >&2; }
has() { [[ " $CLIENTS " == *" $1 "* ]]; }
if has libiscsi; then
	run iscsi-inq "iscsi://$P/$PLAIN/0"
	run iscsi-inq -e 1 -c 0x83 "iscsi://$P/$PLAIN/0"
	run iscsi-inq -e 1 -c 0xb0 "iscsi://$P/$PLAIN/0"
	run iscsi-ls -s "iscsi://$P"
	run iscsi-readcapacity16 "iscsi://$P/$PLAIN/0"
	run iscsi-inq "iscsi://capuser%capture-secret-1@$P/$SECURE/0"
	run iscsi-inq "iscsi://capuser%capture-secret-1@$P/$SECURE/0?target_user=captarget&target_password=capture-target-secret-2"
	run iscsi-inq "iscsi://capuser%wrong-secret-000@$P/$SECURE/0"
	for t in SCSI.Inquiry SCSI.Read10 SCSI.Write10 SCSI.Write16 SCSI.ReadCapacity16 SCSI.ModeSense6 \
		SCSI.Unmap SCSI.WriteSame10 SCSI.WriteSame16 SCSI.CompareAndWrite SCSI.GetLBAStatus \
		SCSI.ReportSupportedOpcodes SCSI.Reserve6 SCSI.Verify10 SCSI.Prefetch10 \
		SCSI.StartStopUnit SCSI.TestUnitReady SCSI.PreventAllow SCSI.WriteVerify10 \
		SCSI.iSCSITMF SCSI.iSCSIResiduals SCSI.iSCSIcmdsn; do
		run iscsi-test-cu --dataloss -t "$t" "iscsi://$P/$PLAIN/0"
	done
fi
if has qemu; then
	run qemu-img info "iscsi://$P/$PLAIN/0"
	run qemu-io -f raw -c 'write -P 0x5a 0 64k' -c 'read -P 0x5a 0 64k' -c 'discard 64k 64k' \
		"iscsi://$P/$PLAIN/0"
fi
ACCEPT=$ROOT/$BUILD/tests/integration/ini_accept
if has ix && [ -x "$ACCEPT" ]; then
	run "$ACCEPT" -p "$P" -T "$PLAIN" -l 0 login tmf
	run "$ACCEPT" -p "$P" -T "$PLAIN" -l 0 -d login
	run "$ACCEPT" -p "$P" -T "$SECURE" -l 0 -u capuser -s capture-secret-1 \
		-U captarget -S capture-target-secret-2 -a 7 login
	run "$ACCEPT" -p "$P" -T "$SECURE" -l 0 -u capuser -s capture-secret-1 badchap
fi
sleep 1
python3 tests/fuzz/seeds.py split "$REC" --corpus tests/fuzz/corpus "$@"
