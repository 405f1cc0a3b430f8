#!/bin/bash
# ix-suite: parallel (the test tool mostly sleeps: Sanitize.Reset alone waits two minutes; free ports)
# libiscsi's conformance suite, all of it: every test `iscsi-test-cu -l` lists (SCSI.* and
# iSCSI.*), with --dataloss and --allow-sanitize, against the real daemon. Each test is
# classified on its own output into PASS / FAIL / SKIP-with-reason (CUnit counts a skipped
# test as passed; we do not). The run fails on any failure and on any skip that is neither
# in cu-allowed-skips.txt (each entry says why no configuration can enable the test) nor in
# the PENDING list below.
#
# The suite runs twice: once as an initiator would normally log in, and once with the target
# requiring CRC32C header digests (libiscsi 1.19 implements HeaderDigest but not DataDigest,
# so data digests cannot be forced on it; malformed.py covers them). Both runs must agree.
#
#   iscsi-test-cu.sh [--peer ix|tgt|both] [--no-digest-run] [--exclude FAMILY[.TEST]]...
#                    [FAMILY | FAMILY.TEST ...]
#     --peer both     run against ix, then tgt, and print the two side by side (only ix's
#                     results count); default: IX_PEER (ix)
#     FAMILY...       only these families or tests (e.g. CompareAndWrite, iSCSITMF,
#                     WriteSame10.Unmap); default: all
#     --exclude X     leave out family or test X (repeatable; rbd.py leaves out Sanitize.Reset,
#                     two minutes of the test tool's sleeps the plain run already covers)
#   IX_CU_TIMEOUT     seconds per iscsi-test-cu invocation (default 300)
#   IX_CU_TAG         name of the ix run in results and logs (default ix; tests/interop/rbd.sh
#                     runs the suite with PEER_BACKEND=rbd as "rbd")
#
# One target serves every LUN the families need (see LUN_FOR); families run one iscsi-test-cu
# process each (per-test processes would spend most of the time logging in), each test is
# attributed from the family's verbose output, and a test that must not share a process
# runs alone (ISOLATE).
. "$(dirname "$0")/../lib/common.sh"

ixt_need iscsi-test-cu
ixt_init iscsi-test-cu

PEER_MODE=$IX_PEER
DIGEST_RUN=1
SELECT=()
EXCLUDE=()
while [ $# -gt 0 ]; do
	case $1 in
	--peer) PEER_MODE=$2; shift ;;
	--no-digest-run) DIGEST_RUN=0 ;;
	--exclude) EXCLUDE+=("$2"); shift ;;
	-h | --help) sed -n 3,27p "$0"; exit 0 ;;
	*) SELECT+=("$1") ;;
	esac
	shift
done
case $PEER_MODE in ix | tgt | both) ;; *) ixt_die "--peer ix, tgt or both" ;; esac
CU_TIMEOUT=${IX_CU_TIMEOUT:-300}
TAG=${IX_CU_TAG:-ix}
INIT1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
INIT2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2
ALLOWED_FILE=$(dirname "$0")/cu-allowed-skips.txt
version=$(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null || echo unknown)

# --- PENDING: families being built on another branch. Against ix their tests are reported as
# skipped ("pending: ...") without running; tgt runs them. Empty since conf-pr (persistent
# reservations, removable media, SANITIZE, READ DEFECT DATA, TARGET COLD RESET) was merged.
PENDING_REASON="pending: implemented on branch conf-pr (issue 7)"
PENDING=()
# --- end of PENDING ---------------------------------------------------------------------------

# The LUNs of the test target: ROLE:attributes (tests/lib/common.sh PEER_LUNS). 512-byte blocks,
# 64 MiB each. "data" has 4 KiB physical blocks (LBPPB 8): libiscsi's checks of unaligned
# UNMAP and of wrong data-out sizes (WriteSame*.UnmapUnaligned, *.InvalidDataOutSize) need
# LBPPB > 1. "lbppb1" has 512-byte physical blocks: GetLBAStatus.UnmapSingle asks for the
# status of LBA i+1 and wants a descriptor starting at i+LBPPB, which only a target with
# LBPPB 1 can give without breaking SBC-3 (the first descriptor starts at the LBA asked for).
declare -A LUN_SPEC=(
	[data]=thin,phys=4096
	[lbppb1]=thin,phys=512
	[thick]=phys=4096
	[ro]=readonly
	[removable]=removable
	[sanitize]=thin,phys=4096
	[sanitize_slow]=thin,phys=4096,size=8,sanitize_rate=1M
)
declare -A LUN_FOR=(
	[GetLBAStatus]=lbppb1
	[ReadOnly]=ro
	[NoMedia]=removable
	[PreventAllow]=removable
	[StartStopUnit]=removable
	[Sanitize]=sanitize
	[Sanitize.Reset]=sanitize_slow
)
# Tests that also run against the fully provisioned LUN, where they check the other half of
# what the VPD pages promise (named FAMILY.TEST@thick).
THICK_TOO=(Inquiry.MandatoryVPDSBC Inquiry.SupportedVPD ReadCapacity16 WriteSame10.UnmapVPD
	WriteSame16.UnmapVPD)
# Tests that run in an iscsi-test-cu process of their own.
#   CompareAndWrite.InvalidDataOutSize: libiscsi 1.19 leaves its PDU hook installed after the
#   test, corrupting every later 16-byte CDB of the process (a test-tool bug, not the target's).
ISOLATE=(CompareAndWrite.InvalidDataOutSize)
# Families that get the second portal's URL too (a second path to the same LU).
MULTIPATH=(MultipathIO)

in_list() { # WORD LIST...
	local w=$1 x
	shift
	for x in "$@"; do [ "$x" = "$w" ] && return 0; done
	return 1
}

# --- the tests --------------------------------------------------------------------------------
list="$IXT_TMP/list"
timeout 30 iscsi-test-cu -l >"$list" 2>&1 || ixt_die "iscsi-test-cu -l failed"
FAMILIES=() # in listing order
declare -A FAM_TESTS FAM_PREFIX
while read -r t; do
	IFS=. read -r pfx fam name <<<"$t"
	if [ -z "${FAM_TESTS[$fam]+x}" ]; then
		FAMILIES+=("$fam")
		FAM_PREFIX[$fam]=$pfx
		FAM_TESTS[$fam]=
	fi
	FAM_TESTS[$fam]+=" $name"
done < <(grep -E '^(SCSI|iSCSI)\.[^.]+\.[^.]+$' "$list")
[ ${#FAMILIES[@]} -gt 0 ] || ixt_die "iscsi-test-cu -l listed no tests"

selected() { # FAMILY TEST
	local s
	for s in "${EXCLUDE[@]}"; do
		[ "$s" = "$1" ] || [ "$s" = "$1.$2" ] && return 1
	done
	[ ${#SELECT[@]} = 0 ] && return 0
	for s in "${SELECT[@]}"; do
		[ "$s" = "$1" ] || [ "$s" = "$1.$2" ] && return 0
	done
	return 1
}
for s in "${SELECT[@]}" "${EXCLUDE[@]}"; do
	[ -n "${FAM_TESTS[${s%%.*}]+x}" ] || ixt_die "no family ${s%%.*} in iscsi-test-cu -l"
	[[ $s != *.* ]] || [[ " ${FAM_TESTS[${s%%.*}]} " == *" ${s#*.} "* ]] ||
		ixt_die "no test $s in iscsi-test-cu -l"
done

declare -A ALLOWED
if [ -f "$ALLOWED_FILE" ]; then
	while read -r name reason; do
		[[ -z $name || $name == \#* ]] && continue
		[ -n "$reason" ] || ixt_die "$ALLOWED_FILE: $name has no reason"
		ALLOWED[$name]=$reason
	done <"$ALLOWED_FILE"
fi

# The LUN roles this selection needs on KIND.
roles_needed() { # KIND
	local fam t need=" data"
	for fam in "${FAMILIES[@]}"; do
		[ "$1" = ix ] && in_list "$fam" "${PENDING[@]}" && continue
		for t in ${FAM_TESTS[$fam]}; do
			selected "$fam" "$t" || continue
			local r=${LUN_FOR[$fam.$t]:-${LUN_FOR[$fam]:-data}}
			[[ " $need " == *" $r "* ]] || need+=" $r"
			if in_list "$fam" "${THICK_TOO[@]}" || in_list "$fam.$t" "${THICK_TOO[@]}"; then
				[[ " $need " == *" thick "* ]] || need+=" thick"
			fi
		done
	done
	echo $need
}

# --- one run: start the peer, run every family, classify ------------------------------------
# run_suite KIND TAG: KIND ix|tgt; results go to $IXT_TMP/results.TAG ("name status reason"
# lines). PENDING applies to ix only: tgt runs everything.
run_suite() {
	local kind=$1 tag=$2 role fam t out rc name st why dead=0 lun_role
	local -a group
	local res="$IXT_TMP/results.$tag" logdir="$IX_OUT/iscsi-test-cu/$tag"
	local manifest="$IXT_TMP/manifest.$tag"
	: >"$res"
	: >"$manifest"
	rm -rf "$logdir"
	mkdir -p "$logdir"
	IX_PEER=$kind
	PEER_LUNS=
	for role in $(roles_needed "$kind"); do PEER_LUNS+=" $role:${LUN_SPEC[$role]}"; done
	PEER_SIZE=64
	PEER_PORT2=1
	PEER_ACL="$INIT1 $INIT2"
	PEER_HEADER_DIGEST=
	[[ $tag == *-hd ]] && PEER_HEADER_DIGEST=CRC32C
	# No NOP-In pings: the test tool sleeps without reading its socket (Sanitize.Reset waits
	# in sleep(60) for the sanitize to end); a ping unanswered for 30 s would drop the
	# session, and every reconnect brings a new power-on unit attention that restarts the
	# wait. tgt sends no pings either.
	PEER_NOP_INTERVAL_MS=0
	IXT_NAME=iscsi-test-cu.$tag
	peer_start
	[ -n "${IXT_PID_FILE:-}" ] && echo "$PEER_PID" >"$IXT_PID_FILE"
	ixt_log "run $tag against $kind: LUNs$PEER_LUNS, second portal $PEER_PORT2"

	# one invocation: run_group LUN_ROLE SUFFIX FAMILY TEST...
	run_group() {
		local lrole=$1 suffix=$2 f=$3 rc urls list_arg=
		shift 3
		local log="$logdir/$f${suffix}.$(($(ls "$logdir" | wc -l) + 1)).log" x
		# A whole family by its name; a subset as a comma list, which iscsi-test-cu
		# registers from the last entry to the first (each as a suite of its own).
		if [ "$*" = "$(echo ${FAM_TESTS[$f]})" ]; then
			list_arg=",${FAM_PREFIX[$f]}.$f"
		else
			for x in "$@"; do list_arg=",${FAM_PREFIX[$f]}.$f.$x$list_arg"; done
		fi
		urls=("$(peer_url "$lrole")")
		in_list "$f" "${MULTIPATH[@]}" && urls+=("$(peer_url "$lrole" second)")
		if [ $dead = 1 ]; then
			for x in "$@"; do echo "$f.$x$suffix FAIL not run: the target died earlier"; done >>"$res"
			return
		fi
		timeout -k 5 "$CU_TIMEOUT" iscsi-test-cu --dataloss --allow-sanitize -V \
			-i "$INIT1" -I "$INIT2" -t "${list_arg#,}" "${urls[@]}" >"$log" 2>&1
		rc=$?
		peer_alive || dead=1
		# classified once the run is over (one python start instead of one per family)
		echo "$log $rc $((1 - dead)) $f ${suffix:--} $*" >>"$manifest"
	}

	for fam in "${FAMILIES[@]}"; do
		group=()
		local -a alone=() thick=()
		for t in ${FAM_TESTS[$fam]}; do
			selected "$fam" "$t" || continue
			if [ "$kind" = ix ] &&
				{ in_list "$fam" "${PENDING[@]}" || in_list "$fam.$t" "${PENDING[@]}"; }; then
				echo "$fam.$t SKIP $PENDING_REASON" >>"$res"
				continue
			fi
			if in_list "$fam.$t" "${ISOLATE[@]}" || [ -n "${LUN_FOR[$fam.$t]:-}" ]; then
				alone+=("$t")
			else
				group+=("$t")
			fi
			if in_list "$fam" "${THICK_TOO[@]}" || in_list "$fam.$t" "${THICK_TOO[@]}"; then
				thick+=("$t")
			fi
		done
		lun_role=${LUN_FOR[$fam]:-data}
		[ ${#group[@]} -gt 0 ] && run_group "$lun_role" "" "$fam" "${group[@]}"
		for t in "${alone[@]}"; do
			run_group "${LUN_FOR[$fam.$t]:-$lun_role}" "" "$fam" "$t"
		done
		[ ${#thick[@]} -gt 0 ] && run_group thick @thick "$fam" "${thick[@]}"
	done
	python3 "$IXT_LIB/ixtest.py" cunit-runs "$manifest" >>"$res" ||
		echo "classify FAIL cannot classify the runs of $manifest" >>"$res"
	peer_check || echo "target.alive FAIL the target died or its log has a sanitizer report" >>"$res"
	peer_stop || echo "target.shutdown FAIL the target did not stop cleanly" >>"$res"
	PEER_PID=""
	[ -n "${IXT_PID_FILE:-}" ] && rm -f "$IXT_PID_FILE"
}

# --- judge one run against the allowed skips; record its results -----------------------------
declare -A P F S
judge() { # TAG RECORD(1|0)
	local tag=$1 record=$2 name st why key
	P[$tag]=0 F[$tag]=0 S[$tag]=0
	while read -r name st why; do
		key=${name%@*}
		if [ "$st" = SKIP ] && [ "$why" != "$PENDING_REASON" ] && [ "$record" = 1 ] &&
			[ -z "${ALLOWED[$name]:-}" ]; then
			st=FAIL
			why="skipped, and not in cu-allowed-skips.txt: $why"
		fi
		case $st in
		PASS) P[$tag]=$((P[$tag] + 1)) ;;
		SKIP) S[$tag]=$((S[$tag] + 1)) ;;
		*) F[$tag]=$((F[$tag] + 1)) ;;
		esac
		[ "$record" = 1 ] && ixt_result "$st" "cu.$tag.$name" "$why"
		: "$key"
	done <"$IXT_TMP/results.$tag"
}

# Per-family counts of a run, for the tables: family -> "pass fail skip".
family_counts() { # TAG
	awk '{ split($1, a, "."); f = a[1]; sub(/@thick$/, "", $1)
	       if ($2 == "PASS") p[f]++; else if ($2 == "SKIP") s[f]++; else x[f]++; seen[f] = 1 }
	     END { for (f in seen) printf "%s %d %d %d\n", f, p[f], x[f], s[f] }' \
		"$IXT_TMP/results.$1"
}

runs=()
if [ "$PEER_MODE" = both ] || [ "$PEER_MODE" = ix ]; then
	# The run with digests goes alongside the plain one, against a daemon of its own: the
	# suite spends most of its time in the test tool's sleeps (Sanitize.Reset alone waits
	# 60 s), not on the CPU.
	if [ $DIGEST_RUN = 1 ]; then
		(
			IXT_PID_FILE=$IXT_TMP/pid.ix-hd run_suite ix ix-hd
			echo "$PEER_LOG" >"$IXT_TMP/log.ix-hd"
		) &
		hd_job=$!
		ixt_on_exit "kill \$(cat '$IXT_TMP/pid.ix-hd' 2>/dev/null) 2>/dev/null"
	fi
	run_suite ix "$TAG"
	runs+=("$TAG")
	judge "$TAG" 1
	if [ $DIGEST_RUN = 1 ]; then
		wait "$hd_job"
		runs+=(ix-hd)
		judge ix-hd 1
		# Every session of that run must really have used header digests.
		hd_log=$(cat "$IXT_TMP/log.ix-hd" 2>/dev/null)
		n_crc=$(grep -c 'normal session .*digests CRC32C/' "$hd_log" 2>/dev/null)
		n_all=$(grep -c 'normal session ' "$hd_log" 2>/dev/null)
		if [ "${n_all:-0}" -gt 0 ] && [ "$n_crc" = "$n_all" ]; then
			ixt_result PASS cu.ix-hd.digests "all $n_all sessions used CRC32C header digests"
		else
			ixt_result FAIL cu.ix-hd.digests "${n_crc:-0} of ${n_all:-0} sessions used CRC32C header digests"
		fi
		# The same verdict for every test with and without digests.
		join <(sort "$IXT_TMP/results.$TAG" | awk '{print $1, $2}') \
			<(sort "$IXT_TMP/results.ix-hd" | awk '{print $1, $2}') |
			awk '$2 != $3 { print $1 " " $2 " without digests, " $3 " with" }' >"$IXT_TMP/diff"
		if [ -s "$IXT_TMP/diff" ]; then
			while read -r line; do ixt_result FAIL "cu.ix-hd-vs-ix.${line%% *}" "${line#* }"; done <"$IXT_TMP/diff"
		else
			ixt_result PASS cu.ix-hd-vs-ix "every test has the same verdict with header digests"
		fi
	fi
fi
if [ "$PEER_MODE" = tgt ] || [ "$PEER_MODE" = both ]; then
	run_suite tgt tgt
	runs+=(tgt)
	# Against tgt alone (run.sh --peer tgt) its results count; next to ix they are shown only.
	judge tgt "$([ "$PEER_MODE" = tgt ] && echo 1 || echo 0)"
fi

# --- report -----------------------------------------------------------------------------------
for tag in "${runs[@]}"; do family_counts "$tag" | sort >"$IXT_TMP/fam.$tag"; done
ixt_note ""
ixt_note "iscsi-test-cu per family (libiscsi $version; pass / fail / skip; ix-hd: header digests"
ixt_note "required; for ix a skip outside cu-allowed-skips.txt or PENDING counts as a failure):"
hdr=$(printf '  %-26s' family)
for tag in "${runs[@]}"; do hdr+=$(printf ' %16s' "$tag"); done
ixt_note "$hdr"
for fam in "${FAMILIES[@]}"; do
	line=$(printf '  %-26s' "$fam")
	any=0
	for tag in "${runs[@]}"; do
		c=$(awk -v f="$fam" '$1 == f {print $2 " / " $3 " / " $4}' "$IXT_TMP/fam.$tag")
		[ -n "$c" ] && any=1
		line+=$(printf ' %16s' "${c:--}")
	done
	[ $any = 1 ] && printf '%s\n' "$line" >&2
done
line=$(printf '  %-26s' total)
for tag in "${runs[@]}"; do line+=$(printf ' %16s' "${P[$tag]} / ${F[$tag]} / ${S[$tag]}"); done
ixt_note "$line"
ixt_note "  (per run: tests passed / failed / skipped; logs in $IX_OUT/iscsi-test-cu/)"
for tag in "${runs[@]}"; do
	grep -v ' PASS' "$IXT_TMP/results.$tag" | grep -v "$PENDING_REASON" | sed "s/^/  [$tag] /" >&2
done
[ "$IXT_FAILED" = 0 ]
