#!/bin/bash
# CHAP and ACLs: a target requiring CHAP (with mutual CHAP credentials configured) and an
# initiator-name ACL.
#   libiscsi (iscsi-inq): right secret logs in; no secret / wrong secret are refused with
#   "Authentication failure" (0x0201); an initiator outside the ACL with good credentials is
#   refused with "Authorization failure" (0x0202); mutual CHAP with the right target secret
#   logs in and with a wrong one libiscsi rejects the target's CHAP_R.
#   Raw client (tests/lib/chap_checks.py): CHAP_A selection (libiscsi 1.19 only offers
#   CHAP_A=5), exact status codes, reflected mutual challenge.
#   Afterwards the daemon must still be running and accept a good login.
. "$(dirname "$0")/../lib/common.sh"

ixt_need iscsi-inq
ixt_init chap

INIT_OK=iqn.2024-01.org.ix.test:chap-initiator
INIT_PY=iqn.2024-01.org.ix.test:chap-raw-client
INIT_OUT=iqn.2024-01.org.ix.test:not-in-acl
PEER_CHAP_USER=ixuser
PEER_CHAP_SECRET=ix-secret-0123456
PEER_MCHAP_USER=ixtarget
PEER_MCHAP_SECRET=ix-target-secret-987
PEER_ACL="$INIT_OK $INIT_PY"
peer_start

base="$IX_HOST:$PEER_PORT/$PEER_IQN/$PEER_LUN"
good="iscsi://$PEER_CHAP_USER%$PEER_CHAP_SECRET@$base"
out="$IXT_TMP/out"

# inq NAME EXPECT(ok|fail) PATTERN INITIATOR URL
inq() {
	local name=$1 expect=$2 pat=$3 init=$4 url=$5 rc
	ixt_run 30 iscsi-inq -i "$init" "$url" >"$out" 2>&1
	rc=$?
	cat "$out" >&2
	if [ "$expect" = ok ]; then
		if [ $rc = 0 ] && grep -q 'Peripheral Device Type:DIRECT_ACCESS' "$out"; then
			ixt_check_pass "chap.$name"
		else
			ixt_check_fail "chap.$name" "login/INQUIRY failed (rc $rc)"
		fi
	else
		if [ $rc = 124 ]; then
			ixt_check_fail "chap.$name" "timed out instead of being refused"
		elif [ $rc != 0 ] && grep -q "$pat" "$out"; then
			ixt_check_pass "chap.$name" "refused: $(grep -m1 "$pat" "$out")"
		else
			ixt_check_fail "chap.$name" "expected refusal matching '$pat' (rc $rc)"
		fi
	fi
}

inq right-secret ok '' "$INIT_OK" "$good"
inq no-credentials fail 'Authentication failure' "$INIT_OK" "iscsi://$base"
inq wrong-secret fail 'Authentication failure' "$INIT_OK" \
	"iscsi://$PEER_CHAP_USER%not-the-secret-1@$base"
inq wrong-user fail 'Authentication failure' "$INIT_OK" \
	"iscsi://nobody%$PEER_CHAP_SECRET@$base"
inq not-in-acl fail 'Authorization failure' "$INIT_OUT" "$good"
inq mutual-right ok '' "$INIT_OK" "$good?target_user=$PEER_MCHAP_USER&target_password=$PEER_MCHAP_SECRET"
inq mutual-wrong-target-secret fail 'Invalid CHAP_R response from the target' "$INIT_OK" \
	"$good?target_user=$PEER_MCHAP_USER&target_password=wrong-target-secret"

# The raw client checks (exact status codes, algorithm negotiation, reflection).
ixt_run 120 python3 "$IXT_LIB/chap_checks.py" --host "$IX_HOST" --port "$PEER_PORT" \
	--iqn "$PEER_IQN" --initiator "$INIT_PY" --outsider "$INIT_OUT" \
	--user "$PEER_CHAP_USER" --secret "$PEER_CHAP_SECRET" \
	--muser "$PEER_MCHAP_USER" --msecret "$PEER_MCHAP_SECRET" >&2 || IXT_FAILED=1

# Still alive and still serving a good login after all the refusals.
if peer_alive; then
	inq good-login-at-end ok '' "$INIT_OK" "$good"
else
	ixt_check_fail chap.good-login-at-end "the target is not running any more"
fi

peer_check
[ "$IXT_FAILED" = 0 ]
