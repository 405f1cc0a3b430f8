#!/bin/bash
# The ix initiator library (tests/integration/ini_accept) against ix-target AND tgt in the same
# run: SendTargets discovery, login and logout, 64 MiB of random data written at QD32 and read
# back equal, ABORT TASK and LUN RESET under load, an unreachable portal failing within
# seconds; then CHAP one-way and mutual for every CHAP_A both peers support, a wrong secret
# refused at once (-EACCES, no retry loop), and CRC32C header+data digests.
. "$(dirname "$0")/../lib/common.sh"

ixt_init initiator
ACCEPT=$IX_BUILD/tests/integration/ini_accept
[ -x "$ACCEPT" ] || ixt_skip "ini_accept not built at $ACCEPT"
PEER_SIZE=128

# run_checks LABEL ARGS... : run ini_accept, turn each PASS/FAIL/SKIP line into a result.
run_checks() {
	local label=$1 out="$IXT_TMP/accept.out" rc line
	shift
	ixt_run 300 "$ACCEPT" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" -l "$PEER_LUN" "$@" >"$out" 2>"$out.err"
	rc=$?
	cat "$out" "$out.err" >&2
	local seen=0
	while read -r st name rest; do
		case $st in
		PASS) ixt_check_pass "$label.$name"; seen=1 ;;
		FAIL) ixt_check_fail "$label.${name%:}" "$rest"; seen=1 ;;
		SKIP) ixt_result SKIP "$label.${name%:}" "$rest"; seen=1 ;;
		esac
	done <"$out"
	if [ $seen = 0 ] || { [ $rc != 0 ] && ! grep -q '^FAIL' "$out"; }; then
		ixt_check_fail "$label.run" "ini_accept exited $rc without results"
	fi
}

for peer in ix tgt; do
	if [ $peer = tgt ] && ! command -v tgtd >/dev/null; then
		ixt_result SKIP "tgt" "tgtd not installed"
		continue
	fi
	IX_PEER=$peer
	# 1. no authentication
	PEER_CHAP_USER= PEER_CHAP_SECRET= PEER_MCHAP_USER= PEER_MCHAP_SECRET=
	peer_start
	run_checks "$peer" discover login io tmf unreachable
	run_checks "$peer.digests" -d login
	peer_check
	peer_stop

	# 2. CHAP required (with mutual credentials configured on the target)
	PEER_CHAP_USER=ixuser PEER_CHAP_SECRET=ix-secret-0123456
	PEER_MCHAP_USER=ixtarget PEER_MCHAP_SECRET=ix-target-secret-987
	peer_start
	# tgt 1.0.85 implements CHAP_A=5 (MD5) only; ix all four
	if [ $peer = ix ]; then algs="5 6 7 8"; else algs="5"; fi
	for a in $algs; do
		run_checks "$peer.chap$a" -u "$PEER_CHAP_USER" -s "$PEER_CHAP_SECRET" -a "$a" login
		run_checks "$peer.mutual$a" -u "$PEER_CHAP_USER" -s "$PEER_CHAP_SECRET" \
			-U "$PEER_MCHAP_USER" -S "$PEER_MCHAP_SECRET" -a "$a" login
	done
	run_checks "$peer.chap" -u "$PEER_CHAP_USER" -s "$PEER_CHAP_SECRET" badchap
	peer_check
	peer_stop
done
