#!/bin/bash
# libiscsi's conformance suite (iscsi-test-cu) against the target, one test per process so
# each result is attributed exactly: CUnit counts skipped tests as passed, so every test's
# verbose output is classified into PASS / FAIL / SKIP-with-reason (tests/lib/ixtest.py
# cunit-classify) and reported per family.
#
#   iscsi-test-cu.sh [FAMILY...]     default: the families below
#   IX_CU_TIMEOUT=seconds per test   (default 120)
. "$(dirname "$0")/../lib/common.sh"

ixt_need iscsi-test-cu
ixt_init iscsi-test-cu

FAMILIES=(Inquiry ReadCapacity10 ReadCapacity16 Read6 Read10 Read12 Read16 Write10 Write12
	Write16 TestUnitReady ReportSupportedOpcodes
	iSCSIcmdsn iSCSIdatasn iSCSIResiduals iSCSITMF iSCSISendTargets iSCSINop iSCSICHAP)
[ $# -gt 0 ] && FAMILIES=("$@")
PER_TEST_TIMEOUT=${IX_CU_TIMEOUT:-120}

INIT1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
INIT2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2

PEER_SIZE=64
PEER_THIN=1 # so the provisioning checks (e.g. Inquiry.BlockLimits) run instead of skipping
peer_start

list="$IXT_TMP/list"
timeout 30 iscsi-test-cu -l >"$list" 2>&1 || ixt_die "iscsi-test-cu -l failed"
version=$(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null || echo unknown)
logdir="$IX_OUT/iscsi-test-cu"
rm -rf "$logdir"
mkdir -p "$logdir"

declare -A FAM_PASS FAM_FAIL FAM_SKIP
# Tests that only work after an earlier test of their suite in the same process. They run
# with their whole suite and only their own section of the output is classified.
#   LUNResetSimpleAsync asserts a "reconnect_succeeded" flag right after queueing the TMF,
#   before any callback can have run; only the preceding AbortTaskSimpleAsync sets it
#   (libiscsi 1.19 test-tool quirk). Run alone it fails against every target (tgt too).
declare -A SUITE_CONTEXT=(
	[iSCSITMF.LUNResetSimpleAsync]=iSCSI.iSCSITMF
)
dead=0
for fam in "${FAMILIES[@]}"; do
	FAM_PASS[$fam]=0 FAM_FAIL[$fam]=0 FAM_SKIP[$fam]=0
	if [[ $fam == iSCSI* ]]; then prefix=iSCSI; else prefix=SCSI; fi
	mapfile -t tests < <(grep -E "^$prefix\\.$fam\\.[^.]+\$" "$list")
	if [ ${#tests[@]} -eq 0 ]; then
		ixt_result SKIP "cu.$fam" "family not in this iscsi-test-cu (libiscsi $version)"
		FAM_SKIP[$fam]=1
		continue
	fi
	for t in "${tests[@]}"; do
		name="cu.${t#*.}"
		log="$logdir/${t#*.}.log"
		if [ $dead = 1 ]; then
			ixt_result FAIL "$name" "not run: the target died earlier"
			FAM_FAIL[$fam]=$((FAM_FAIL[$fam] + 1))
			continue
		fi
		ctx=${SUITE_CONTEXT[${t#*.}]:-}
		timeout -k 5 "$PER_TEST_TIMEOUT" iscsi-test-cu --dataloss -V -i "$INIT1" -I "$INIT2" \
			-t "${ctx:-$t}" "$PEER_URL" >"$log" 2>&1
		rc=$?
		verdict=$(python3 "$IXT_LIB/ixtest.py" cunit-classify "$log" "$rc" \
			${ctx:+--in-suite "${t##*.}"})
		st=${verdict%% *}
		reason=${verdict#"$st"}
		reason=${reason# }
		if ! peer_alive; then
			st=FAIL
			reason="target died during this test${reason:+ ($reason)}"
			dead=1
		fi
		ixt_result "$st" "$name" "$reason"
		case $st in
		PASS) FAM_PASS[$fam]=$((FAM_PASS[$fam] + 1)) ;;
		SKIP) FAM_SKIP[$fam]=$((FAM_SKIP[$fam] + 1)) ;;
		*)
			FAM_FAIL[$fam]=$((FAM_FAIL[$fam] + 1))
			ixt_note "---- tail of $log"
			tail -25 "$log" | sed 's/^/    /' >&2
			;;
		esac
	done
done

ixt_note ""
ixt_note "iscsi-test-cu per family (libiscsi $version, peer $IX_PEER):"
for fam in "${FAMILIES[@]}"; do
	printf '  %-24s %3d passed %3d failed %3d skipped\n' "$fam" "${FAM_PASS[$fam]}" \
		"${FAM_FAIL[$fam]}" "${FAM_SKIP[$fam]}" >&2
done

peer_check
[ "$IXT_FAILED" = 0 ]
