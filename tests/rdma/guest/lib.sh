# Shared helpers for the tests that run inside the RDMA tier's guest (busybox sh; no bash).
# A test sources this file, reports each check with ixr_pass / ixr_fail / ixr_skip into
# $IX_RESULTS ("PASS|FAIL|SKIP $IX_TEST.check [reason]") and exits 0, 1, or 77 when the whole
# test is skipped (ixr_skip_all). Busybox's shell prefers its own applets, so host programs
# that share a name with one (ip, modprobe, mke2fs, ...) are called by full path.
#
# Peers set up here: the open-iscsi initiator (iscsid), tgt (tgtd over iSER and TCP) and LIO
# (configfs, ramdisk backstore, isert on the portal). ixr_cleanup_all undoes all of them; the
# test runner calls it after every test, so a test that is killed leaves nothing behind.

RDMA_IP=10.99.0.1
SIW_IP=10.98.0.1 # Soft-iWARP's siw0, which only iwarp.sh sets up (ixr_siw_up)
IXR_INITIATOR=iqn.2026-11.io.ix.rdma:guest
IXR_OUT=/mnt/out
IXR_RUN=/run/ix-rdma
mkdir -p "$IXR_RUN"
: "${IX_TEST:=adhoc}"
: "${IX_RESULTS:=/dev/null}"
IXR_FAILED=0

ixr_log() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*" >&2; }

ixr_result() { # STATUS CHECK [REASON...]
	st=$1 chk=$2
	shift 2
	echo "$st $IX_TEST.$chk${*:+ $*}" >>"$IX_RESULTS"
	echo "$st $IX_TEST.$chk${*:+ $*}" >&2
	[ "$st" = FAIL ] && IXR_FAILED=1
	return 0
}
ixr_pass() { ixr_result PASS "$@"; }
ixr_fail() { ixr_result FAIL "$@"; }
ixr_skip() { ixr_result SKIP "$@"; }
ixr_skip_all() { # REASON: the whole test cannot run here
	echo "SKIP $IX_TEST $*" >>"$IX_RESULTS"
	echo "SKIP: $*" >&2
	exit 77
}
ixr_exit() { exit "$IXR_FAILED"; } # the test's last line

# ixr_check CHECK CMD...: PASS if CMD exits 0, else FAIL with its exit status.
ixr_check() {
	chk=$1
	shift
	ixr_log "+ $*"
	"$@" >&2
	rc=$?
	if [ $rc = 0 ]; then ixr_pass "$chk"; else ixr_fail "$chk" "'$*' exited with $rc"; fi
	return $rc
}

# ixr_wait SECONDS CMD...: poll CMD every 0.2 s until it succeeds; 1 on timeout.
ixr_wait() {
	n=$(($1 * 5))
	shift
	while [ $n -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}

# ixr_daemon NAME CMD...: start CMD in its own session, output in the share as
# $IX_TEST.NAME.log; the pid is remembered so ixr_cleanup_all can stop it. The log is emptied
# before the daemon starts, so waiting for a line in it never sees an earlier daemon's output.
ixr_daemon() {
	name=$1
	shift
	ixr_log "starting $name: $*"
	: >"$IXR_OUT/$IX_TEST.$name.log"
	setsid "$@" >>"$IXR_OUT/$IX_TEST.$name.log" 2>&1 </dev/null &
	echo "$!" >"$IXR_RUN/$name.pid"
	echo "$!" >>"$IXR_RUN/pids"
}
# ixr_tcp_socks PORT STATE: how many TCP sockets, IPv4 and IPv6, have local port PORT in STATE,
# /proc/net/tcp's hex code (0A listening, 01 established); the guest has no ss
ixr_tcp_socks() {
	awk -v p=":$(printf '%04X' "$1")" -v s="$2" '$4 == s && substr($2, length($2) - 4) == p' \
		/proc/net/tcp /proc/net/tcp6 | wc -l
}
ixr_tcp_listening() { [ "$(ixr_tcp_socks "$1" 0A)" -ge 1 ]; } # PORT
# ixr_rping_server NAME IP ARGS...: start `rping -s -a IP ARGS` as daemon NAME and wait until its
# rdma_cm id listens (`rdma res show cm_id`). A client that connects before that is refused and
# exits 255, and on a just-booted TCG guest a fixed pause was not always long enough. Fails the
# check NAME-listen if it does not listen within 30 s.
ixr_rping_server() {
	_n=$1 _ip=$2
	shift 2
	ixr_daemon "$_n" /usr/bin/rping -s -a "$_ip" "$@"
	if ixr_wait 30 sh -c "/usr/bin/rdma res show cm_id | grep -q 'state LISTEN .* comm rping src-addr $_ip:'"; then
		/usr/bin/rdma res show cm_id | grep 'comm rping' >&2
	else
		/usr/bin/rdma res show cm_id >&2
		ixr_fail "$_n-listen" "rping server has no listening rdma_cm id on $_ip after 30 s"
	fi
}
ixr_pid() { cat "$IXR_RUN/$1.pid" 2>/dev/null; }
# Is PID running? A child of this shell that has exited stays a zombie until waited for, and
# kill -0 succeeds on a zombie: read its state instead.
ixr_running() {
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
ixr_alive() { p=$(ixr_pid "$1") && [ -n "$p" ] && ixr_running "$p"; }

# ixr_daemon_exit NAME SECONDS: wait for a daemon started by this shell to exit by itself and
# set IXR_RC to its exit status (call it directly, not in $(...): a subshell cannot wait for
# its parent's children). Returns 1 with IXR_RC empty if it still runs after SECONDS.
ixr_daemon_exit() {
	IXR_RC=
	p=$(ixr_pid "$1") || return 1
	n=$(($2 * 5))
	while ixr_running "$p"; do
		[ $n -gt 0 ] || return 1
		sleep 0.2
		n=$((n - 1))
	done
	wait "$p"
	IXR_RC=$?
}

# ixr_stop NAME [SECONDS]: SIGTERM, wait, SIGKILL. Returns 1 when SIGTERM was not enough; sets
# IXR_RC to the exit status when the daemon is a child of this shell (call it directly).
ixr_stop() {
	IXR_RC=
	p=$(ixr_pid "$1") || return 0
	rm -f "$IXR_RUN/$1.pid"
	if ixr_running "$p"; then
		kill -TERM "$p" 2>/dev/null
		n=$((${2:-10} * 5))
		while ixr_running "$p" && [ $n -gt 0 ]; do
			sleep 0.2
			n=$((n - 1))
		done
		if ixr_running "$p"; then
			kill -KILL "$p" 2>/dev/null
			return 1
		fi
	fi
	wait "$p" 2>/dev/null
	IXR_RC=$?
	return 0
}

# rxe0's packet counters, sent + received.
ixr_rxe_pkts() {
	d=/sys/class/infiniband/rxe0/ports/1/hw_counters
	echo $(($(cat $d/sent_pkts) + $(cat $d/rcvd_pkts)))
}

# ---- open-iscsi ---------------------------------------------------------------------------------
# NOP-Out timeout 30 s: with 16 MiB of writes queued on a TCG guest under a load average of 15,
# the NOP-In came later than 10 s and the initiator dropped the session every 20 s (seen once in
# ix-iser); a target that never answers still fails within 40 s. A multipath test sets
# IXR_NOOP_INTERVAL / IXR_NOOP_TIMEOUT / IXR_REPLACEMENT_TIMEOUT to what a multipath set-up uses.
ixr_iscsid_start() {
	mkdir -p /etc/iscsi /run/lock/iscsi
	echo "InitiatorName=$IXR_INITIATOR" >/etc/iscsi/initiatorname.iscsi
	cat >/etc/iscsi/iscsid.conf <<-EOF
		iscsid.startup = /bin/true
		node.startup = manual
		node.session.timeo.replacement_timeout = ${IXR_REPLACEMENT_TIMEOUT:-5}
		node.session.initial_login_retry_max = 2
		node.conn[0].timeo.login_timeout = ${IXR_LOGIN_TIMEOUT:-30}
		node.conn[0].timeo.logout_timeout = 15
		node.conn[0].timeo.noop_out_interval = ${IXR_NOOP_INTERVAL:-10}
		node.conn[0].timeo.noop_out_timeout = ${IXR_NOOP_TIMEOUT:-30}
		node.session.cmds_max = 128
		node.session.queue_depth = 32
		node.session.scan = auto
	EOF
	ixr_daemon iscsid /usr/sbin/iscsid -f
	sleep 0.5
	ixr_alive iscsid
}

# ixr_session_disk: wait (30 s) for the SCSI scan of the logged-in session(s) and set IXR_DISK
# (e.g. /dev/sda) and IXR_SCSI_HOST (hostN). Call it directly, not in $(...).
ixr_session_disk() {
	IXR_DISK= IXR_SCSI_HOST=
	n=150
	while [ $n -gt 0 ]; do
		for b in /sys/class/iscsi_session/session*/device/target*/*:*:*:*/block/*; do
			[ -e "$b" ] || continue
			s=${b#/sys/class/iscsi_session/}
			s=${s%%/*}
			IXR_SCSI_HOST=$(basename "$(dirname "$(readlink -f "/sys/class/iscsi_session/$s/device")")")
			IXR_DISK=/dev/$(basename "$b")
			[ -b "$IXR_DISK" ] && return 0
		done
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}

ixr_logout_all() {
	/usr/sbin/iscsiadm -m node -u >&2 2>&1
	/usr/sbin/iscsiadm -m node -o delete >&2 2>&1
	/usr/sbin/iscsiadm -m discoverydb -t st -p "$RDMA_IP:3260" -o delete >&2 2>&1
	return 0
}

# ---- a test's host part (tests/rdma/run.sh: "# host: PATH") -------------------------------------
# ixr_host_ready SECONDS: wait for the host part's $IX_TEST.host.ready (set IXR_HOST_READY to its
# line); 1 with IXR_HOST_READY set to the reason when it wrote $IX_TEST.host.failed or timed out;
# the whole test is skipped (exit 77) when it wrote $IX_TEST.host.skip (Ceph not installed).
ixr_host_ready() {
	n=$(($1 * 5))
	while [ $n -gt 0 ]; do
		if [ -f "$IXR_OUT/$IX_TEST.host.ready" ]; then
			IXR_HOST_READY=$(cat "$IXR_OUT/$IX_TEST.host.ready")
			return 0
		fi
		if [ -f "$IXR_OUT/$IX_TEST.host.failed" ]; then
			IXR_HOST_READY="the host part failed: $(cat "$IXR_OUT/$IX_TEST.host.failed")"
			return 1
		fi
		[ -f "$IXR_OUT/$IX_TEST.host.skip" ] && ixr_skip_all "$(cat "$IXR_OUT/$IX_TEST.host.skip")"
		sleep 0.2
		n=$((n - 1))
	done
	IXR_HOST_READY="the host part was not ready after $1 s"
	return 1
}

# ixr_host REQUEST [SECONDS]: ask the host part to do REQUEST ("kill a", "stop a", "cont a",
# "restart a", "state") through the share and wait (default 120 s) for its answer; IXR_HOST_RSP
# is the answer without its OK/FAIL word. Returns 0 for OK. Call it directly, not in $(...).
ixr_host() {
	# numbered per test: each test's host part counts its requests from 1 (mpath's and
	# odx-rbd's in one boot)
	seq=$(($(cat "$IXR_RUN/$IX_TEST.host.seq" 2>/dev/null || echo 0) + 1))
	echo "$seq" >"$IXR_RUN/$IX_TEST.host.seq"
	echo "$1" >"$IXR_OUT/$IX_TEST.req.$seq.tmp"
	mv "$IXR_OUT/$IX_TEST.req.$seq.tmp" "$IXR_OUT/$IX_TEST.req.$seq"
	ixr_log "host request $seq: $1"
	n=$((${2:-120} * 20))
	while [ $n -gt 0 ] && [ ! -f "$IXR_OUT/$IX_TEST.rsp.$seq" ]; do
		sleep 0.05
		n=$((n - 1))
	done
	if [ ! -f "$IXR_OUT/$IX_TEST.rsp.$seq" ]; then
		IXR_HOST_RSP="no answer from the host part within ${2:-120} s"
		ixr_log "host request $seq: $IXR_HOST_RSP"
		return 1
	fi
	r=$(cat "$IXR_OUT/$IX_TEST.rsp.$seq")
	IXR_HOST_RSP=${r#* }
	ixr_log "host answer $seq: $r"
	[ "${r%% *}" = OK ]
}

# ---- fio ------------------------------------------------------------------------------------------
# ixr_fio CHECK DEV SIZE BS write|verify [RW]: a write of SIZE (RW: write, the default, or
# randwrite) with crc32c headers in every block, or the read-back that checks them (fio
# --verify_only, same layout and random seed). Reports CHECK.
ixr_fio() {
	chk=$1 dev=$2 size=$3 bs=$4 mode=$5 rw=${6:-write}
	if [ "$mode" = write ]; then
		extra="--rw=$rw --do_verify=0"
	else
		extra="--rw=$rw --verify_only"
	fi
	log=$IXR_OUT/$IX_TEST.$chk.log
	ixr_log "+ fio $mode $size bs=$bs on $dev (log $log)"
	/usr/bin/fio --name="$chk" --filename="$dev" --size="$size" --bs="$bs" --iodepth=16 \
		--ioengine=libaio --direct=1 --thread --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 $extra >"$log" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q 'err= 0' "$log"; then
		ixr_pass "$chk" "$(grep -m1 -E '^ +(READ|WRITE):' "$log" | sed 's/^ *//')"
		return 0
	fi
	ixr_fail "$chk" "fio $mode exited $rc: $(grep -m1 -iE 'error|bad|verify' "$log")"
	tail -20 "$log" >&2
	return 1
}

# ---- tgt --------------------------------------------------------------------------------------------
tgtadm_() { timeout 20 /usr/sbin/tgtadm "$@"; }

# ixr_tgt_start LLD IQN SIZE_MB: tgtd with one LUN (1; tgt's controller is LUN 0) backed by a file
# in /dev/shm. For LLD iser the initiator-name ACL is bound too: tgt's iSER path refuses
# discovery and login with only the address ACL (a tgt bug).
ixr_tgt_start() {
	lld=$1 iqn=$2 mb=$3
	truncate -s "${mb}M" /dev/shm/tgt-lun1.img || return 1
	# tgtd registers its whole iSER buffer pool (1 GiB by default) on the first RDMA connect
	# request; under TCG that took longer than the initiator waits, the initiator dropped the
	# connection and tgtd's rdma_create_qp failed with EINVAL. 64 MiB is 128 of its 512 KiB
	# buffers.
	ixr_daemon tgtd /usr/sbin/tgtd -f --iser pool_sz_mb=64
	ixr_wait 20 tgtadm_ --mode target --op show || { ixr_log "tgtd control socket not up"; return 1; }
	tgtadm_ --lld "$lld" --mode target --op new --tid 1 -T "$iqn" &&
		tgtadm_ --lld "$lld" --mode logicalunit --op new --tid 1 --lun 1 -b /dev/shm/tgt-lun1.img &&
		tgtadm_ --lld "$lld" --mode target --op bind --tid 1 -I ALL &&
		tgtadm_ --lld "$lld" --mode target --op bind --tid 1 --initiator-name "$IXR_INITIATOR"
}

# tgtd ignores SIGTERM: delete the system through tgtadm, SIGKILL as the last resort.
ixr_tgt_stop() {
	ixr_alive tgtd || { rm -f /dev/shm/tgt-lun1.img; return 0; }
	for lld in iser iscsi; do
		tgtadm_ --lld $lld --mode target --op delete --tid 1 --force >/dev/null 2>&1
	done
	tgtadm_ --mode system --op delete >&2 2>&1
	p=$(ixr_pid tgtd)
	n=50
	while ixr_running "$p" && [ $n -gt 0 ]; do
		sleep 0.2
		n=$((n - 1))
	done
	ixr_running "$p" && kill -KILL "$p" 2>/dev/null
	rm -f "$IXR_RUN/tgtd.pid" /dev/shm/tgt-lun1.img
}

# ---- LIO ---------------------------------------------------------------------------------------------
IXR_LIO=/sys/kernel/config/target

# ixr_lio_start IQN SIZE_MB ISER(0|1): a ramdisk LUN 0 behind IQN on $RDMA_IP:3260, demo mode
# (any initiator, no CHAP), isert enabled on the portal when ISER=1.
ixr_lio_start() {
	iqn=$1 mb=$2 iser=$3
	tpg=$IXR_LIO/iscsi/$iqn/tpgt_1
	mkdir -p /run/lio
	[ -d "$IXR_LIO/core" ] || { ixr_log "no LIO in configfs"; return 1; }
	echo /run/lio >"$IXR_LIO/dbroot" 2>/dev/null
	mkdir -p "$IXR_LIO/core/rd_mcp_0/disk0" &&
		echo "rd_pages=$((mb * 256))" >"$IXR_LIO/core/rd_mcp_0/disk0/control" &&
		echo 1 >"$IXR_LIO/core/rd_mcp_0/disk0/enable" &&
		mkdir -p "$tpg/lun/lun_0" &&
		ln -s "$IXR_LIO/core/rd_mcp_0/disk0" "$tpg/lun/lun_0/disk0" &&
		mkdir "$tpg/np/$RDMA_IP:3260" || return 1
	if [ "$iser" = 1 ]; then
		echo 1 >"$tpg/np/$RDMA_IP:3260/iser" || return 1
	fi
	echo 1 >"$tpg/attrib/generate_node_acls" &&
		echo 1 >"$tpg/attrib/cache_dynamic_acls" &&
		echo 0 >"$tpg/attrib/authentication" &&
		echo 0 >"$tpg/attrib/demo_mode_write_protect" &&
		echo 1 >"$tpg/enable"
}

ixr_lio_stop() {
	for t in "$IXR_LIO"/iscsi/iqn.*; do
		[ -d "$t" ] || continue
		for g in "$t"/tpgt_*; do
			echo 0 >"$g/enable" 2>/dev/null
			for l in "$g"/lun/lun_*; do
				[ -d "$l" ] || continue
				find "$l" -maxdepth 1 -type l -exec rm -f {} \;
				rmdir "$l"
			done
			for np in "$g"/np/*; do [ -d "$np" ] && rmdir "$np"; done
			rmdir "$g"
		done
		rmdir "$t"
	done
	for d in "$IXR_LIO"/core/rd_mcp_*/*; do [ -d "$d" ] && rmdir "$d"; done
	for d in "$IXR_LIO"/core/rd_mcp_*; do [ -d "$d" ] && rmdir "$d"; done
	return 0
}

# ---- ix's own target (the host's build over 9p) ----------------------------------------------------
IXR_IX_BIN=/mnt/build/tools/ix-target

# ixr_ix_config IQN SIZE TRANSPORTS: /run/ix-target.json with one portal on $RDMA_IP:3260
# serving TRANSPORTS (a JSON list's inside: '"tcp"' or '"tcp", "iser"') and one RAM LUN 0 of
# SIZE behind IQN.
ixr_ix_config() {
	cat >/run/ix-target.json <<-JSON
		{
		  "global": { "log_level": "info" },
		  "portals": [ { "name": "rdma-net", "address": "$RDMA_IP", "port": 3260,
		                 "transports": [$3] } ],
		  "targets": [
		    { "name": "$1", "luns": [ { "lun": 0, "backend": "ram", "size": "$2" } ] }
		  ]
		}
	JSON
}

# ixr_ix_siw_config IQN SIZE: the same on Soft-iWARP's address, iSER on 3260 and TCP on 3261
# (siw's listener is a kernel TCP socket, so the two transports cannot share address and port)
ixr_ix_siw_config() {
	cat >/run/ix-target.json <<-JSON
		{
		  "global": { "log_level": "info" },
		  "portals": [ { "name": "iwarp", "address": "$SIW_IP", "port": 3260, "transports": ["iser"] },
		               { "name": "tcp", "address": "$SIW_IP", "port": 3261, "transports": ["tcp"] } ],
		  "targets": [ { "name": "$1", "luns": [ { "lun": 0, "backend": "ram", "size": "$2" } ] } ]
		}
	JSON
}

# ixr_ix_start: ix-target on /run/ix-target.json, log in $IX_TEST.ix-target.log (IXR_IX_LOG);
# PASS/FAIL "target". Returns 1 if it is not ready within 30 s.
ixr_ix_start() {
	IXR_IX_LOG=$IXR_OUT/$IX_TEST.ix-target.log
	ixr_daemon ix-target "$IXR_IX_BIN" -c /run/ix-target.json
	if ! ixr_wait 30 grep -q 'ix-target: ready' "$IXR_IX_LOG"; then
		ixr_fail target "ix-target not ready after 30 s: $(tail -3 "$IXR_IX_LOG" | tr '\n' ' ')"
		return 1
	fi
	ixr_pass target "ix-target ready on $RDMA_IP:3260"
}

# ixr_ix_finish [EXPECTED]: ix-target must still run, exit 0 on SIGTERM within 15 s, and leave no
# sanitizer report or error in its log; lines matching the regex EXPECTED (warnings a fault test
# provokes on purpose) are not counted as errors.
ixr_ix_finish() {
	if ixr_alive ix-target; then
		ixr_pass target-alive "ix-target still running after the sessions"
	else
		ixr_fail target-alive "ix-target died during the test: $(tail -3 "$IXR_IX_LOG" | tr '\n' ' ')"
	fi
	if ! ixr_stop ix-target 15; then
		ixr_fail shutdown "ix-target ignored SIGTERM for 15 s"
	elif [ "$IXR_RC" = 0 ]; then
		ixr_pass shutdown "ix-target exited 0 on SIGTERM"
	else
		ixr_fail shutdown "ix-target exited with status $IXR_RC after SIGTERM"
	fi
	if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: ' "$IXR_IX_LOG"; then
		ixr_fail sanitizer "sanitizer report in ix-target's log: $(grep -m3 -E 'ERROR: |runtime error:' "$IXR_IX_LOG" | tr '\n' ' ')"
	elif grep -vE "${1:-^\$}" "$IXR_IX_LOG" | grep -qiE 'assert|error'; then
		ixr_fail target-log "errors in ix-target's log: $(grep -vE "${1:-^\$}" "$IXR_IX_LOG" | grep -m3 -iE 'assert|error' | tr '\n' ' ')"
	else
		ixr_pass target-log "no error and no sanitizer report in ix-target's log"
	fi
}

# ---- after every test ------------------------------------------------------------------------------
ixr_cleanup_all() {
	# multipath maps first (a map that queues without paths would hang the logout's flush)
	if [ -x /sbin/dmsetup ] && [ -n "$(/sbin/dmsetup ls --target multipath 2>/dev/null | grep -v 'No devices')" ]; then
		for m in $(/sbin/dmsetup ls --target multipath | awk '{ print $1 }'); do
			/sbin/dmsetup message "$m" 0 fail_if_no_path
		done
		/sbin/multipathd shutdown >/dev/null 2>&1
		/sbin/multipath -F >&2 2>&1 || /sbin/dmsetup remove_all --force >&2 2>&1
	fi
	ixr_logout_all
	ixr_tgt_stop
	ixr_lio_stop
	if [ -f "$IXR_RUN/pids" ]; then
		for p in $(cat "$IXR_RUN/pids"); do kill -KILL "$p" 2>/dev/null; done
		rm -f "$IXR_RUN/pids" "$IXR_RUN"/*.pid
	fi
	grep -q ' /mnt/disk ' /proc/mounts && umount -f /mnt/disk
	ixr_siw_down
	return 0
}

# ---- the kernel initiator against whatever target the test started -----------------------------
# ixr_kernel_io IFACE PROC_NAME: the seed command (discovery with -o new -o old, then -l) through
# open-iscsi interface IFACE (iser or default), the SCSI host's driver name, a fio write of
# IXR_FIO_SIZE (default 64m) in 1 MiB blocks with crc32c headers read back and verified, rxe
# packet counters when IFACE is iser. Leaves IXR_DISK set while logged in.
ixr_kernel_io() {
	iface=$1 proc=$2
	ixr_check login timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st -I "$iface" \
		-p "$RDMA_IP:3260" -l || return 1
	if ! ixr_session_disk; then
		ixr_fail disk "logged in, but no SCSI disk appeared within 30 s"
		return 1
	fi
	ixr_pass disk "$IXR_DISK on $IXR_SCSI_HOST"
	got=$(cat "/sys/class/scsi_host/$IXR_SCSI_HOST/proc_name")
	if [ "$got" = "$proc" ]; then
		ixr_pass proc-name "$IXR_SCSI_HOST is $got"
	else
		ixr_fail proc-name "$IXR_SCSI_HOST is '$got', expected $proc"
	fi
	p0=$(ixr_rxe_pkts)
	ixr_fio fio-write "$IXR_DISK" "${IXR_FIO_SIZE:-64m}" 1m write
	ixr_fio fio-readback "$IXR_DISK" "${IXR_FIO_SIZE:-64m}" 1m verify
	p1=$(ixr_rxe_pkts)
	# at least 128 MiB moved; in 4 KiB RoCE payloads that is over 32768 packets on rxe0.
	# (on siw0, the iWARP tests: no packet counters; they check the device another way)
	if [ "$iface" = iser ] && [ "$RDMA_IP" != "$SIW_IP" ]; then
		if [ $((p1 - p0)) -ge 32768 ]; then
			ixr_pass rxe-counters "rxe0 packets $p0 -> $p1"
		else
			ixr_fail rxe-counters "rxe0 packets $p0 -> $p1: the I/O did not go over RDMA"
		fi
	fi
	return 0
}

# ixr_accept_run LABEL ARGS...: tests/integration/ini_accept ($ACCEPT) with ARGS; its PASS/FAIL
# lines become this test's LABEL.NAME results (ini-iser.sh, iwarp.sh).
ixr_accept_run() {
	label=$1
	shift
	ixr_log "+ ini_accept $*"
	timeout 300 "$ACCEPT" "$@" >/run/accept.out 2>/run/accept.err
	rc=$?
	cat /run/accept.out /run/accept.err >&2
	seen=0
	while read -r st name rest; do
		case $st in
		PASS) ixr_pass "$label.$name" "$rest"; seen=1 ;;
		FAIL) ixr_fail "$label.${name%:}" "$rest"; seen=1 ;;
		esac
	done </run/accept.out
	[ $seen = 1 ] || ixr_fail "$label.run" "ini_accept exited $rc without results: $(tail -3 /run/accept.err | tr '\n' ' ')"
}

# ixr_siw_up: Soft-iWARP for the iwarp test only: siw0 on dummy1, $SIW_IP/24. Not at boot: an
# iWARP device's listeners are the host's TCP sockets, so with siw0 present a wildcard RDMA CM
# listen on a port that TCP also serves (tgtd --iser on 3260) fails with EADDRINUSE.
# ixr_siw_down (also in ixr_cleanup_all) removes both.
ixr_siw_up() {
	/usr/sbin/ip link add dummy1 type dummy &&
		/usr/sbin/ip addr add "$SIW_IP/24" dev dummy1 &&
		/usr/sbin/ip link set dummy1 mtu 9000 up &&
		/usr/bin/rdma link add siw0 type siw netdev dummy1
}
ixr_siw_down() {
	/usr/bin/rdma link delete siw0 2>/dev/null
	/usr/sbin/ip link del dummy1 2>/dev/null
	return 0
}

ixr_kernel_logout() {
	ixr_check logout timeout 60 /usr/sbin/iscsiadm -m node -u
}
