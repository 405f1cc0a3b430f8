# Shared shell helpers for ix interop tests. Source it from a test:
#
#   . "$(dirname "$0")/../lib/common.sh"
#   ixt_init my-test            # temp dir, log, cleanup trap
#   peer_start                  # ix-target (default) or tgtd, per IX_PEER
#   ixt_run 30 iscsi-inq "$PEER_URL"
#
# Environment:
#   IX_PEER        ix | tgt                                (default ix)
#   IX_BUILD       build dir holding tools/ix-target       (default <repo>/build)
#   IX_OUT         where logs go                           (default <repo>/tests/out)
#   IX_RESULTS     if set, tests append per-check lines "PASS|FAIL|SKIP <name> [reason]"
#   IX_READY_TIMEOUT  seconds to wait for the daemon       (default 30)
#
# Every test exits 0 pass / 1 fail / 77 skip. Every external command goes through ixt_run
# (a timeout), every wait is bounded, and the EXIT trap stops whatever the test started.

IXT_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$IXT_LIB/sanitizer.sh"
IX_ROOT=${IX_ROOT:-$(cd "$IXT_LIB/../.." && pwd)}
IX_PEER=${IX_PEER:-ix}
IX_BUILD=${IX_BUILD:-$IX_ROOT/build}
IX_OUT=${IX_OUT:-$IX_ROOT/tests/out}
IX_READY_TIMEOUT=${IX_READY_TIMEOUT:-30}
IX_HOST=${IX_HOST:-127.0.0.1}
export IX_ROOT IX_PEER IX_BUILD IX_OUT IX_HOST

IXT_NAME=""
IXT_TMP=""
IXT_FAILED=0
IXT_CLEANUPS=()
PEER_PID=""
PEER_KIND=""
PEER_LOG=""
PEER_CONFIG=""
TGT_CTL=""

ixt_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
ixt_note() { printf '%s\n' "$*" >&2; }

# Record one sub-result (picked up by tests/run.sh when IX_RESULTS is set).
ixt_result() { # STATUS NAME [REASON...]
	local st=$1 name=$2
	shift 2
	printf '%s %s%s\n' "$st" "$name" "${*:+ $*}" >&2
	if [ -n "${IX_RESULTS:-}" ]; then
		printf '%s %s%s\n' "$st" "$name" "${*:+ $*}" >>"$IX_RESULTS"
	fi
	[ "$st" = FAIL ] && IXT_FAILED=1
	return 0
}
ixt_check_pass() { ixt_result PASS "$@"; }
ixt_check_fail() { ixt_result FAIL "$@"; }

ixt_skip() { # REASON: skip the whole test
	printf 'SKIP: %s\n' "$*" >&2
	exit 77
}
ixt_die() {
	printf 'FAIL: %s\n' "$*" >&2
	IXT_FAILED=1
	exit 1
}

ixt_need() { # CMD...: skip when a required tool is missing
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || ixt_skip "required command '$c' not installed (run scripts/deps.sh)"
	done
}

ixt_on_exit() { IXT_CLEANUPS+=("$*"); }
# The same, run after the peer has stopped (what the running target still holds: RBD images).
IXT_LATE_CLEANUPS=()
ixt_on_exit_late() { IXT_LATE_CLEANUPS+=("$*"); }

ixt_cleanup() {
	local rc=$1 i
	trap - EXIT INT TERM
	for ((i = ${#IXT_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${IXT_CLEANUPS[$i]}" || true
	done
	if [ -n "$PEER_PID" ]; then
		peer_stop || rc=1
	fi
	for ((i = ${#IXT_LATE_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${IXT_LATE_CLEANUPS[$i]}" || true
	done
	if [ -n "$IXT_TMP" ] && [ -d "$IXT_TMP" ]; then
		rm -rf "$IXT_TMP"
	fi
	[ "$IXT_FAILED" = 1 ] && [ "$rc" = 0 ] && rc=1
	return "$rc"
}

ixt_init() { # NAME (a test run with PEER_BACKEND file or block is NAME-file / NAME-block,
	# the name of its wrapper script, so that run.sh finds its logs)
	IXT_NAME=$1
	case "${PEER_BACKEND:-ram}" in ram) ;; *) IXT_NAME="$1-$PEER_BACKEND" ;; esac
	mkdir -p "$IX_OUT"
	IXT_TMP=$(mktemp -d "/tmp/ixtest.$IXT_NAME.XXXXXX")
	trap 'ixt_cleanup $?; exit $?' EXIT
	trap 'ixt_log "interrupted"; exit 1' INT TERM
	ixt_log "test $IXT_NAME: peer=$IX_PEER tmp=$IXT_TMP"
}

# ixt_run SECONDS CMD...: run a client command under timeout, output to stderr (the log).
ixt_run() {
	local t=$1
	shift
	ixt_log "+ $*"
	timeout -k 5 "$t" "$@"
	local rc=$?
	[ $rc = 124 ] && ixt_log "TIMEOUT after ${t}s: $*"
	return $rc
}

# ixb_judge CHECK JSON COND [DETAIL]: judge one ix-bench --json result (the file JSON, seen by
# the Python expressions as d): PASS when COND holds, FAIL when it does not or there is no
# result. DETAIL, a Python expression, is the message (default: the counts and the recovery).
ixb_judge() {
	local check=$1 json=$2 cond=$3 detail=${4:-} out
	if out=$(python3 - "$json" "$cond" "$detail" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print('no JSON result: %s' % e)
    sys.exit(1)
expr = sys.argv[3] or ('"reads %d, writes %d, errors %s, miscompares %s, recovery %s" % ('
                       'd["read"]["ios"], d["write"]["ios"], d.get("errors"), '
                       'd.get("miscompares"), d.get("recovery"))')
detail = eval(expr, {}, {'d': d})
if not eval(sys.argv[2], {}, {'d': d}):
    print('%s is false: %s; first error %s' % (sys.argv[2], detail, d.get('first_error')))
    sys.exit(1)
print(detail)
PY
	); then
		ixt_check_pass "$check" "$out"
	else
		ixt_check_fail "$check" "$out"
	fi
}

# ixb_judge_run CHECK RC NAME COND [DETAIL]: the same for the run whose exit status is RC and
# whose output is $IXT_TMP/NAME.json and NAME.err: a non-zero status fails the check first.
ixb_judge_run() {
	if [ "$2" != 0 ]; then
		ixt_check_fail "$1" "ix-bench exited $2: $(head -c 300 "$IXT_TMP/$3.err")"
		return
	fi
	ixb_judge "$1" "$IXT_TMP/$3.json" "$4" "${5:-}"
}

# A free TCP port on 127.0.0.1 in 3261..4999 (never 3260).
ixt_free_port() {
	python3 "$IXT_LIB/ixtest.py" free-port
}

# Wait (bounded) until HOST:PORT accepts TCP connections.
ixt_wait_port() { # PORT SECONDS
	python3 "$IXT_LIB/ixtest.py" wait-port "$IX_HOST" "$1" "$2"
}

# --------------------------------------------------------------------------------------------
# Peer (target under test). Configure before peer_start with these variables:
#   PEER_IQN            target name                  (default iqn.2024-01.org.ix.test:disk1)
#   PEER_SIZE           LUN size in MiB              (default 64)
#   PEER_CHAP_USER/PEER_CHAP_SECRET        one-way CHAP required for the target
#   PEER_MCHAP_USER/PEER_MCHAP_SECRET      target credentials for mutual CHAP
#   PEER_ACL            space separated initiator names allowed (empty = everyone)
#   PEER_DIGESTS        1 = let the target accept CRC32C header/data digests
#   PEER_THIN           1 = the LUN advertises thin provisioning (UNMAP, LBPME)
#   PEER_BACKEND        ram | file | block | rbd: what stores the LUN (default ram). file: a
#                       sparse file in the test's temp dir; block: a loop device over such a
#                       file (the test SKIPs, with the reason, where no loop device can be
#                       made); rbd: one new RBD image per LUN (PEER_SIZE MiB or the role's
#                       size=) in pool PEER_RBD_POOL (default rbd) of the cluster $CEPH_CONF
#                       names (the caller starts it: tests/ceph/cluster.sh), removed at exit.
#                       tgt gets the same file, device or images (bs_rbd) as its backing store.
#   PEER_RBD_TIMEOUT    ix, rbd: rbd.osd_op_timeout_s of the LUNs (default: ix's, 30 s)
#   PEER_LUNS           several LUNs instead of one: "ROLE:ATTR,ATTR ROLE:..." with ATTRs
#                       thin, readonly, removable, nomedium, phys=BYTES (the physical block;
#                       each LUN PEER_SIZE MiB of 512-byte blocks); peer_url
#                       ROLE gives the URL of each (the first is PEER_URL)
#   PEER_PORT2          1 = a second portal (another port, TPGT 2) to the same target
#   PEER_HEADER_DIGEST  CRC32C = the target requires header digests (ix: "crc32c")
#   PEER_NOP_INTERVAL_MS  ix: global.nop_interval_ms (0 = the target sends no NOP-In pings)
# After peer_start: PEER_PORT, PEER_LUN, PEER_PORTAL ("iscsi://127.0.0.1:PORT"),
# PEER_URL ("iscsi://127.0.0.1:PORT/IQN/LUN"), PEER_LOG, PEER_PID, PEER_KIND (ix|tgt),
# PEER_PORT2 (the second portal's port, when asked for) and, for ix, PEER_CONFIG (the JSON
# file the daemon reads; SIGHUP reloads it).

PEER_IQN=${PEER_IQN:-iqn.2024-01.org.ix.test:disk1}
PEER_SIZE=${PEER_SIZE:-64}
PEER_CHAP_USER=${PEER_CHAP_USER:-}
PEER_CHAP_SECRET=${PEER_CHAP_SECRET:-}
PEER_MCHAP_USER=${PEER_MCHAP_USER:-}
PEER_MCHAP_SECRET=${PEER_MCHAP_SECRET:-}
PEER_ACL=${PEER_ACL:-}
PEER_DIGESTS=${PEER_DIGESTS:-1}
PEER_THIN=${PEER_THIN:-0}
PEER_LUNS=${PEER_LUNS:-}
PEER_PORT2=${PEER_PORT2:-0}
PEER_HEADER_DIGEST=${PEER_HEADER_DIGEST:-}
PEER_NOP_INTERVAL_MS=${PEER_NOP_INTERVAL_MS:-}
declare -A PEER_LUN_OF # role -> LUN number

# URL of the LUN playing ROLE (from PEER_LUNS), through the second portal if asked.
peer_url() { # ROLE [second]
	local port=$PEER_PORT
	[ "${2:-}" = second ] && port=$PEER_PORT2
	printf 'iscsi://%s:%s/%s/%s\n' "$IX_HOST" "$port" "$PEER_IQN" "${PEER_LUN_OF[$1]:?no LUN for role $1}"
}

# Fill PEER_LUN_OF from PEER_LUNS, numbering from FIRST (ix: 0, tgt: 1).
peer_lun_roles() { # FIRST
	local n=$1 spec
	PEER_LUN_OF=()
	for spec in $PEER_LUNS; do
		PEER_LUN_OF[${spec%%:*}]=$n
		n=$((n + 1))
	done
}

PEER_BACKEND=${PEER_BACKEND:-ram}
PEER_BACKING=""
PEER_RBD_POOL=${PEER_RBD_POOL:-rbd}
PEER_RBD_PREFIX=""

# The LUN's backing store for PEER_BACKEND file/block: sets PEER_BACKING (file or device).
peer_backing() {
	local img="$IXT_TMP/lun.img" out
	case "$PEER_BACKEND" in
	ram) return 0 ;;
	file | block) ;;
	rbd) peer_rbd_images; return 0 ;;
	*) ixt_die "unknown PEER_BACKEND '$PEER_BACKEND' (ram, file, block or rbd)" ;;
	esac
	truncate -s "${PEER_SIZE}M" "$img" || ixt_die "cannot create $img"
	PEER_BACKING=$img
	[ "$PEER_BACKEND" = block ] || return 0
	command -v losetup >/dev/null || ixt_skip "block LUN: losetup is not installed (Debian package mount)"
	[ -e /dev/loop-control ] || ixt_skip "block LUN: no block device can be made here: /dev/loop-control does not exist"
	if ! out=$(losetup -f --show "$img" 2>&1); then
		ixt_skip "block LUN: no block device can be made here: losetup -f --show $img: $out"
	fi
	PEER_BACKING=$out
	ixt_on_exit "losetup -d '$out'"
	ixt_log "block LUN on $out (loop device over $img)"
}

# PEER_BACKEND=rbd: an image PREFIX-ROLE per LUN role (one role "data" without PEER_LUNS).
peer_rbd_images() {
	local spec role size attr
	[ -n "${CEPH_CONF:-}" ] || ixt_die "PEER_BACKEND=rbd needs CEPH_CONF (start a cluster with tests/ceph/cluster.sh)"
	PEER_RBD_PREFIX="ixt-$IXT_NAME-$$-$RANDOM"
	for spec in ${PEER_LUNS:-data:}; do
		role=${spec%%:*}
		size=$PEER_SIZE
		for attr in $(tr , ' ' <<<"${spec#*:}"); do
			case $attr in size=*) size=${attr#size=} ;; esac
		done
		ixt_run 60 rbd create --size "${size}M" "$PEER_RBD_POOL/$PEER_RBD_PREFIX-$role" ||
			ixt_die "rbd create $PEER_RBD_POOL/$PEER_RBD_PREFIX-$role failed"
		ixt_on_exit_late "timeout 60 rbd rm --no-progress '$PEER_RBD_POOL/$PEER_RBD_PREFIX-$role' >/dev/null 2>&1"
	done
}

peer_start() {
	peer_backing
	case "$IX_PEER" in
	ix) ix_start ;;
	tgt) tgt_start ;;
	*) ixt_die "unknown IX_PEER '$IX_PEER' (ix or tgt)" ;;
	esac
	PEER_PORTAL="iscsi://$IX_HOST:$PEER_PORT"
	PEER_URL="$PEER_PORTAL/$PEER_IQN/$PEER_LUN"
	export PEER_PORT PEER_PORT2 PEER_LUN PEER_PORTAL PEER_URL PEER_IQN PEER_PID PEER_KIND PEER_CONFIG PEER_LOG
}

peer_stop() {
	case "$PEER_KIND" in
	ix) ix_stop ;;
	tgt) tgt_stop ;;
	*) return 0 ;;
	esac
}

# Is the target process still running? (A crash is always a failure.)
peer_alive() {
	[ -n "$PEER_PID" ] && kill -0 "$PEER_PID" 2>/dev/null
}

# Fail the test when the peer died or its log carries a sanitizer report.
peer_check() {
	local ok=0
	if ! peer_alive; then
		ixt_check_fail "$IXT_NAME.peer-alive" "target process $PEER_PID is gone"
		ok=1
	fi
	peer_sanitizer_check || ok=1
	return $ok
}

peer_sanitizer_check() {
	[ -n "$PEER_LOG" ] && [ -f "$PEER_LOG" ] || return 0
	if ix_sanitizer_found "$PEER_LOG"; then
		ixt_check_fail "$IXT_NAME.sanitizer" "sanitizer report in $PEER_LOG:"
		ix_sanitizer_show "$PEER_LOG"
		return 1
	fi
	return 0
}

# ix-target -------------------------------------------------------------------------------------

IX_TARGET_BIN=${IX_TARGET_BIN:-}

ix_start() {
	local bin=${IX_TARGET_BIN:-$IX_BUILD/tools/ix-target}
	[ -x "$bin" ] || ixt_skip "ix-target not built at $bin (the daemon has not landed yet?)"
	PEER_PORT=$(ixt_free_port) || ixt_die "no free port"
	if [ "$PEER_PORT2" != 0 ]; then
		PEER_PORT2=$(ixt_free_port) || ixt_die "no free port"
		[ "$PEER_PORT2" != "$PEER_PORT" ] || PEER_PORT2=$(ixt_free_port) || ixt_die "no free port"
	fi
	PEER_LUN=0
	PEER_KIND=ix
	peer_lun_roles 0
	local cfg="$IXT_TMP/$IXT_NAME.ix-target.json" spec
	PEER_CONFIG=$cfg
	python3 "$IXT_LIB/ixtest.py" ix-config --port "$PEER_PORT" --host "$IX_HOST" \
		--iqn "$PEER_IQN" --size "$PEER_SIZE" \
		$(for spec in $PEER_LUNS; do printf -- '--lun %s ' "$spec"; done) \
		$([ "$PEER_PORT2" != 0 ] && echo --port2 "$PEER_PORT2") \
		${PEER_HEADER_DIGEST:+--header-digest "${PEER_HEADER_DIGEST,,}"} \
		${PEER_NOP_INTERVAL_MS:+--nop-interval-ms "$PEER_NOP_INTERVAL_MS"} \
		${PEER_CHAP_USER:+--chap "$PEER_CHAP_USER" "$PEER_CHAP_SECRET"} \
		${PEER_MCHAP_USER:+--mutual "$PEER_MCHAP_USER" "$PEER_MCHAP_SECRET"} \
		$(for a in $PEER_ACL; do printf -- '--acl %s ' "$a"; done) \
		$([ "$PEER_THIN" = 1 ] && echo --thin) \
		--backend "$PEER_BACKEND" ${PEER_BACKING:+--path "$PEER_BACKING"} \
		${PEER_RBD_PREFIX:+--rbd "$PEER_RBD_POOL" "$PEER_RBD_PREFIX" "$CEPH_CONF"} \
		${PEER_RBD_TIMEOUT:+--rbd-timeout "$PEER_RBD_TIMEOUT"} \
		>"$cfg" || ixt_die "cannot write ix config"
	PEER_LOG="$IX_OUT/$IXT_NAME.ix-target.log"
	: >"$PEER_LOG"
	ixt_log "starting $bin -c $cfg (port $PEER_PORT, log $PEER_LOG)"
	sed 's/^/    /' "$cfg" >&2
	"$bin" -c "$cfg" 2>>"$PEER_LOG" >>"$PEER_LOG" &
	PEER_PID=$!
	local deadline=$((SECONDS + IX_READY_TIMEOUT))
	while ! grep -q 'ix-target: ready' "$PEER_LOG" 2>/dev/null; do
		if ! kill -0 "$PEER_PID" 2>/dev/null; then
			wait "$PEER_PID" 2>/dev/null
			local rc=$?
			PEER_PID=""
			tail -30 "$PEER_LOG" >&2
			# Someone took the free port between our probe and the bind: try another one.
			if grep -qi 'address already in use' "$PEER_LOG" && [ "${IXT_PORT_RETRY:-0}" -lt 3 ]; then
				IXT_PORT_RETRY=$((${IXT_PORT_RETRY:-0} + 1))
				[ "$PEER_PORT2" != 0 ] && PEER_PORT2=1
				ixt_log "port $PEER_PORT was taken; retrying on another port"
				ix_start
				return
			fi
			ixt_die "ix-target exited (rc $rc) before it was ready"
		fi
		if [ $SECONDS -ge $deadline ]; then
			tail -30 "$PEER_LOG" >&2
			ixt_die "ix-target not ready after ${IX_READY_TIMEOUT}s"
		fi
		sleep 0.1
	done
	ixt_log "ix-target ready (pid $PEER_PID)"
}

# SIGTERM must stop the daemon within 15 s with exit status 0 and without sanitizer reports.
ix_stop() {
	local pid=$PEER_PID rc ok=0
	PEER_PID=""
	PEER_KIND=""
	[ -n "$pid" ] || return 0
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid" 2>/dev/null
		rc=$?
		ixt_check_fail "$IXT_NAME.shutdown" "ix-target (pid $pid) had already exited with status $rc"
		tail -30 "$PEER_LOG" >&2
		peer_sanitizer_check
		return 1
	fi
	kill -TERM "$pid" 2>/dev/null
	local deadline=$((SECONDS + 15))
	while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		ixt_check_fail "$IXT_NAME.shutdown" "ix-target ignored SIGTERM for 15 s; killing it"
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		ok=1
	else
		wait "$pid" 2>/dev/null
		rc=$?
		if [ "$rc" != 0 ]; then
			ixt_check_fail "$IXT_NAME.shutdown" "ix-target exited with status $rc after SIGTERM"
			tail -20 "$PEER_LOG" >&2
			ok=1
		fi
	fi
	peer_sanitizer_check || ok=1
	return $ok
}

# Crash the daemon (SIGKILL: no shutdown, no cleanup) and reap it. The config stays.
ix_kill9() {
	[ -n "$PEER_PID" ] || return 0
	kill -KILL "$PEER_PID" 2>/dev/null
	wait "$PEER_PID" 2>/dev/null
	PEER_PID=""
}

# Start the daemon again with the same config, port and LUN (PEER_BACKEND=file keeps the
# data); wait (at most SECONDS, default 10) until it is ready. 0, or 1 if it is not.
ix_restart() {
	local bin=${IX_TARGET_BIN:-$IX_BUILD/tools/ix-target} limit=${1:-10} n
	n=$(grep -c 'ix-target: ready' "$PEER_LOG")
	"$bin" -c "$PEER_CONFIG" 2>>"$PEER_LOG" >>"$PEER_LOG" &
	PEER_PID=$!
	PEER_KIND=ix
	local deadline=$((SECONDS + limit))
	while [ "$(grep -c 'ix-target: ready' "$PEER_LOG")" -le "$n" ]; do
		if ! kill -0 "$PEER_PID" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
			tail -20 "$PEER_LOG" >&2
			return 1
		fi
		sleep 0.05
	done
	ixt_log "ix-target restarted (pid $PEER_PID)"
}

# tgtd ----------------------------------------------------------------------------------------

tgtadm_() { timeout -k 2 10 tgtadm -C "$TGT_CTL" --lld iscsi "$@"; }

tgt_start() {
	command -v tgtd >/dev/null || ixt_skip "tgtd not installed"
	PEER_PORT=$(ixt_free_port) || ixt_die "no free port"
	PEER_LUN=1 # tgt puts a controller at LUN 0
	PEER_KIND=tgt
	peer_lun_roles 1
	TGT_CTL=$(python3 "$IXT_LIB/ixtest.py" free-ctl)
	PEER_LOG="$IX_OUT/$IXT_NAME.tgtd.log"
	: >"$PEER_LOG"
	ixt_log "starting tgtd on $IX_HOST:$PEER_PORT (control port $TGT_CTL, log $PEER_LOG)"
	tgtd -f -C "$TGT_CTL" --iscsi "portal=$IX_HOST:$PEER_PORT" >>"$PEER_LOG" 2>&1 &
	PEER_PID=$!
	local deadline=$((SECONDS + IX_READY_TIMEOUT))
	until tgtadm_ --op show --mode target >/dev/null 2>&1; do
		kill -0 "$PEER_PID" 2>/dev/null || { PEER_PID=""; tail "$PEER_LOG" >&2; ixt_die "tgtd exited"; }
		[ $SECONDS -lt $deadline ] || ixt_die "tgtd control socket not up"
		sleep 0.1
	done
	tgtadm_ --op new --mode target --tid 1 -T "$PEER_IQN" || ixt_die "tgtadm new target"
	# One LUN: PEER_BACKEND's file or device, or an image in /dev/shm (ram). PEER_LUNS: one
	# image in /dev/shm each; their attributes become tgt's --params.
	local specs=${PEER_LUNS:-data:$([ "$PEER_THIN" = 1 ] && echo thin)} spec n=1 img attr params
	for spec in $specs; do
		if [ -n "$PEER_RBD_PREFIX" ]; then
			img=
		elif [ -z "$PEER_LUNS" ] && [ -n "$PEER_BACKING" ]; then
			img=$PEER_BACKING
		else
			img="/dev/shm/ixtest-$IXT_NAME-$$-$n.img"
			truncate -s "${PEER_SIZE}M" "$img" || ixt_die "cannot create $img"
			ixt_on_exit "rm -f '$img'"
		fi
		if [ -n "$PEER_RBD_PREFIX" ]; then # tgt's bs_rbd (Debian package tgt-rbd)
			tgtadm_ --op new --mode logicalunit --tid 1 --lun $n --bstype rbd \
				-b "$PEER_RBD_POOL/$PEER_RBD_PREFIX-${spec%%:*}" --bsopts "conf=$CEPH_CONF" ||
				ixt_die "tgtadm new rbd lun (is tgt-rbd installed?)"
		else
			tgtadm_ --op new --mode logicalunit --tid 1 --lun $n -b "$img" || ixt_die "tgtadm new lun"
		fi
		params=
		for attr in $(tr , ' ' <<<"${spec#*:}"); do
			case $attr in
			thin) params+=,thin_provisioning=1 ;;
			readonly) params+=,readonly=1 ;;
			removable) params+=,removable=1 ;;
			nomedium) params+=,removable=1,online=0 ;;
			phys=*) # 512-byte logical blocks: the exponent of the physical block
				local e=0 p=${attr#phys=}
				while [ $((512 << e)) -lt "$p" ]; do e=$((e + 1)); done
				[ $e -gt 0 ] && params+=,lbppbe=$e ;;
			esac
		done
		if [ -n "$params" ]; then
			tgtadm_ --op update --mode logicalunit --tid 1 --lun $n --params "${params#,}" ||
				ixt_die "tgtadm lun params ${params#,}"
		fi
		n=$((n + 1))
	done
	if [ "$PEER_PORT2" != 0 ]; then
		PEER_PORT2=$(ixt_free_port) || ixt_die "no free port"
		tgtadm_ --op new --mode portal --param "portal=$IX_HOST:$PEER_PORT2" ||
			ixt_die "tgtadm second portal"
	fi
	if [ -n "$PEER_ACL" ]; then
		local a
		for a in $PEER_ACL; do
			tgtadm_ --op bind --mode target --tid 1 --initiator-name "$a" || ixt_die "tgtadm acl"
		done
	else
		tgtadm_ --op bind --mode target --tid 1 -I ALL || ixt_die "tgtadm bind"
	fi
	if [ -n "$PEER_CHAP_USER" ]; then
		tgtadm_ --op new --mode account --user "$PEER_CHAP_USER" --password "$PEER_CHAP_SECRET"
		tgtadm_ --op bind --mode account --tid 1 --user "$PEER_CHAP_USER" || ixt_die "tgtadm chap"
	fi
	if [ -n "$PEER_MCHAP_USER" ]; then
		tgtadm_ --op new --mode account --user "$PEER_MCHAP_USER" --password "$PEER_MCHAP_SECRET"
		tgtadm_ --op bind --mode account --tid 1 --user "$PEER_MCHAP_USER" --outgoing ||
			ixt_die "tgtadm mutual chap"
	fi
	if [ -n "$PEER_HEADER_DIGEST" ]; then
		tgtadm_ --op update --mode target --tid 1 -n HeaderDigest -v CRC32C
	elif [ "$PEER_DIGESTS" = 1 ]; then
		tgtadm_ --op update --mode target --tid 1 -n HeaderDigest -v CRC32C,None
	fi
	if [ "$PEER_DIGESTS" = 1 ]; then
		tgtadm_ --op update --mode target --tid 1 -n DataDigest -v CRC32C,None
	fi
	ixt_wait_port "$PEER_PORT" 10 || ixt_die "tgtd portal not listening"
	ixt_log "tgtd ready (pid $PEER_PID)"
}

# tgtd ignores SIGTERM: delete the targets, then the system; SIGKILL if that fails.
tgt_stop() {
	local pid=$PEER_PID
	PEER_PID=""
	PEER_KIND=""
	[ -n "$pid" ] || return 0
	tgtadm_ --op delete --mode target --tid 1 --force >/dev/null 2>&1
	tgtadm_ --op delete --mode system >/dev/null 2>&1
	local deadline=$((SECONDS + 10))
	while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		ixt_log "tgtd did not exit; SIGKILL"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	return 0
}
