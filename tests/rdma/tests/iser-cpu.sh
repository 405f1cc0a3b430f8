#!/bin/sh
# timeout: 1200
# on-demand: a measurement (about 6-11 minutes), not in tests/rdma/run.sh --list
# What a target's process spends per byte over iSER and over TCP (issue 28 item 3: the seeds'
# headline was "512 KiB reads at 1390 MB/s and 28 % CPU against 590 MB/s at 85 % over TCP").
# In this TCG guest Soft-RoCE is slower than TCP for every target, so throughput cannot show
# it; the CPU-seconds a target's process spends per GiB moved can. In one boot, for each
# target and transport: the Linux kernel initiator (open-iscsi; iface iser or default) logs
# in, and fio moves IXR_CPU_BYTES (default 256m) with 512 KiB sequential writes, then as many
# reads, at QD16 (O_DIRECT, libaio; a count of bytes, not a time). Per run the reason holds:
# MiB/s, the target process's CPU-seconds per GiB (utime + stime of /proc/PID/stat before and
# after; ix-target, tgtd; user and system apart: Soft-RoCE is the kernel's software RNIC, so
# work a hardware RNIC does (copies, ICRC) can be charged to the process whose system call
# started it, while its user time is its own), and the whole guest's busy CPU-seconds per GiB (/proc/stat: every
# CPU's time but idle and iowait; it includes fio, the initiator, Soft-RoCE's copies and, for
# LIO, the target, whose work is in kernel threads: LIO gets only this figure). A check
# passes when its run moved every byte without an error and the counters were read; the
# summary lines at the end put the rows side by side. Last, ix-target again on Soft-iWARP
# (siw0), over iSER and over TCP on the same address (see "Soft-iWARP" below). Every row also
# gives the guest's softirq time and the siw_tx kernel threads' CPU per GiB: where the emulated
# NIC's work went. docs/perf.md, "iSER: CPU per GiB".
. /mnt/ix/tests/rdma/guest/lib.sh
BYTES=${IXR_CPU_BYTES:-256m}
case $BYTES in # the same in bytes (fio's --size takes BYTES itself)
*g) NBYTES=$((${BYTES%g} * 1073741824)) ;;
*m) NBYTES=$((${BYTES%m} * 1048576)) ;;
*) NBYTES=$BYTES ;;
esac
[ -x "$IXR_IX_BIN" ] || ixr_skip_all "ix-target not built in the shared build dir ($IXR_IX_BIN)"
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
SUMMARY=$IXR_RUN/iser-cpu.summary
: >"$SUMMARY"

proc_ticks() { # PID: "utime stime" in clock ticks (fields 14 and 15; comm has no spaces here)
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || { echo "-1 -1"; return; }
	awk '{ print $14, $15 }' "/proc/$1/stat"
}
busy_ticks() { # every CPU's time but idle and iowait (the "cpu" line of /proc/stat)
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}
# the guest's softirq ticks (/proc/stat): rxe's tasklets, siw's receive path (its sk_data_ready
# runs tcp_read_sock and places the payload) and the TCP stack's. The kernel has no
# CONFIG_IRQ_TIME_ACCOUNTING: a tick that lands in a softirq counts here AND as system time of
# the task it interrupted, so this overlaps the process's system time; it says how much of
# the work was softirq, not whose
softirq_ticks() { awk '$1 == "cpu" { print $8 }' /proc/stat; }
# utime + stime of the kernel threads whose name starts with PREFIX (siw_tx/N: siw's per-CPU
# transmit threads, which run a kernel QP's sends and any user QP's send that could not finish
# in its ibv_post_send system call)
kthread_ticks() {
	cat /proc/[0-9]*/stat 2>/dev/null |
		awk -v p="($1" 'index($0, p) { sub(/.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}

# run LABEL RW PID: fio RW of $BYTES in 512 KiB blocks at QD16 on $IXR_DISK; PID is the target
# process to account (empty for LIO)
run() {
	label=$1 rw=$2 pid=$3
	chk=$label.$rw-512k
	log=$IXR_OUT/$IX_TEST.$chk.log
	ixr_log "+ fio $rw bs=512k QD16 $BYTES on $IXR_DISK ($label)"
	t0=$(proc_ticks "$pid") b0=$(busy_ticks) q0=$(softirq_ticks) w0=$(kthread_ticks siw_tx)
	s0=$(cut -d' ' -f1 /proc/uptime)
	/usr/bin/fio --name="$chk" --filename="$IXR_DISK" --size="$BYTES" --bs=512k --iodepth=16 \
		--ioengine=libaio --direct=1 --thread --rw="$rw" >"$log" 2>&1
	rc=$?
	t1=$(proc_ticks "$pid") b1=$(busy_ticks) q1=$(softirq_ticks) w1=$(kthread_ticks siw_tx)
	s1=$(cut -d' ' -f1 /proc/uptime)
	if [ $rc != 0 ] || ! grep -q 'err= 0' "$log"; then
		ixr_fail "$chk" "fio exited $rc: $(grep -m1 -iE 'error' "$log")"
		tail -20 "$log" >&2
		return 1
	fi
	if [ -n "$pid" ] && { [ "${t0%% *}" -lt 0 ] || [ "${t1%% *}" -lt 0 ]; }; then
		ixr_fail "$chk" "the target process $pid is gone"
		return 1
	fi
	line=$(awk -v n="$NBYTES" -v u0="${t0%% *}" -v u1="${t1%% *}" -v k0="${t0#* }" \
		-v k1="${t1#* }" -v b0="$b0" -v b1="$b1" -v s0="$s0" -v s1="$s1" -v hz="$HZ" \
		-v own="${pid:+1}" -v q0="$q0" -v q1="$q1" -v w0="$w0" -v w1="$w1" 'BEGIN {
		gib = n / 1073741824; secs = s1 - s0
		printf "%.1f MiB/s in %.1f s", n / 1048576 / secs, secs
		if (own) printf ", target process %.2f CPU-s/GiB (user %.2f, system %.2f)",
			(u1 - u0 + k1 - k0) / hz / gib, (u1 - u0) / hz / gib, (k1 - k0) / hz / gib
		printf ", guest %.2f CPU-s/GiB", (b1 - b0) / hz / gib
		printf " (softirq %.2f, siw_tx threads %.2f)", (q1 - q0) / hz / gib, (w1 - w0) / hz / gib }')
	ixr_pass "$chk" "$line"
	echo "$chk: $line" >>"$SUMMARY"
}

kernel_runs() { # LABEL IFACE PID
	if ! ixr_check "$1.login" timeout 90 /usr/sbin/iscsiadm -m discovery -o new -o old -t st \
		-I "$2" -p "$RDMA_IP:3260" -l; then
		return 1
	fi
	if ! ixr_session_disk; then
		ixr_fail "$1.disk" "no SCSI disk appeared"
		ixr_logout_all
		return 1
	fi
	p0=$(ixr_rxe_pkts)
	run "$1" write "$3"
	run "$1" read "$3"
	p1=$(ixr_rxe_pkts)
	# iSER moved 2 x BYTES over rxe0 in 4 KiB RoCE payloads, so at least half that many packets
	# (BYTES / 4096: 65,536 at the default); TCP moved none of it there
	if [ "$2" = iser ]; then
		if [ $((p1 - p0)) -ge $((NBYTES / 4096)) ]; then
			ixr_pass "$1.over-rdma" "rxe0 packets $p0 -> $p1"
		else
			ixr_fail "$1.over-rdma" "rxe0 packets $p0 -> $p1: the I/O did not go over RDMA"
		fi
	elif [ $((p1 - p0)) -ge $((NBYTES / 4096)) ]; then
		ixr_fail "$1.over-tcp" "rxe0 packets $p0 -> $p1 during a TCP session"
	fi
	ixr_logout_all
}

ixr_iscsid_start || { ixr_fail iscsid "iscsid did not start"; ixr_exit; }

IQN=iqn.2026-11.io.ix.rdma:cpu
ixr_ix_config "$IQN" 640M '"tcp", "iser"'
if ixr_ix_start; then
	kernel_runs ix-tcp default "$(ixr_pid ix-target)"
	kernel_runs ix-iser iser "$(ixr_pid ix-target)"
	ixr_ix_finish
fi

# tgt: one daemon per transport (ixr_tgt_start binds one LLD); a 640 MiB file LUN in /dev/shm
for lld in iscsi iser; do
	iface=default
	[ $lld = iser ] && iface=iser
	if ixr_tgt_start $lld iqn.2026-11.io.ix.rdma:tgt-cpu 640; then
		kernel_runs tgt-$lld $iface "$(ixr_pid tgtd)"
	else
		ixr_fail tgt-$lld.target "tgtd ($lld) could not be set up"
	fi
	ixr_tgt_stop
done

# LIO: kernel threads; the guest's figure only
for iser in 0 1; do
	label=lio-tcp iface=default
	[ $iser = 1 ] && label=lio-iser iface=iser
	if ixr_lio_start iqn.2026-11.io.ix.rdma:lio-cpu 640 $iser; then
		kernel_runs $label $iface ""
	else
		ixr_fail $label.target "LIO could not be set up"
	fi
	ixr_lio_stop
done

# Soft-iWARP (siw0 on dummy1, $SIW_IP; up only now: with siw0 present a wildcard RDMA CM
# listen on a port TCP also serves fails, see ixr_siw_up). siw differs from rxe where the
# CPU goes: a user QP's ibv_post_send runs siw_qp_sq_process in the system call (siw_verbs.c
# siw_post_send, in_syscall), and what the socket cannot take then continues in the per-CPU
# siw_tx/N kernel threads (siw_qp_tx.c siw_run_sq); a kernel QP (ib_iser's) always sends from
# siw_tx; the receive side runs in softirq (siw_qp_rx.c, from sk_data_ready); siw negotiates
# no MPA CRC (siw_main.c mpa_crc_required false) and sends a payload by sendpage from the
# registered pages only for an unsignalled work request (siw_qp_prepare_tx). iSER and TCP
# cannot share an address and port on siw (its listener is a kernel TCP socket): two portals,
# iSER on 3260 and TCP on 3261, both on $SIW_IP. No packet counters on siw0: an iSER row is
# proven by ix-target logging a new connection on siw0 (iWARP), the SCSI host being
# iscsi_iser, a QP of ix-target's on siw0 in `rdma res show qp` and an established TCP
# connection on $SIW_IP:3260 (siw's stream); a TCP row by iscsi_tcp, its connection on 3261,
# no siw0 QP of ix-target's and no new siw0 connection in ix-target's log.
# siw_runs LABEL IFACE PORT PID
siw_runs() {
	label=$1 iface=$2 port=$3
	n0=$(grep -c 'connected on siw0 (iWARP)' "$IXR_IX_LOG")
	/usr/sbin/iscsiadm -m discovery -o new -o old -t st -I "$iface" -p "$SIW_IP:$port" >&2 2>&1
	if ! ixr_check "$label.login" timeout 90 /usr/sbin/iscsiadm -m node -T "$IQN" \
		-p "$SIW_IP:$port" -I "$iface" -l; then
		ixr_logout_all
		return 1
	fi
	if ! ixr_session_disk; then
		ixr_fail "$label.disk" "no SCSI disk appeared"
		ixr_logout_all
		return 1
	fi
	drv=$(cat "/sys/class/scsi_host/$IXR_SCSI_HOST/proc_name")
	conns=$(ixr_tcp_socks "$port" 01) # established TCP connections with local port PORT
	# ix-target's queue pairs on siw0 as the kernel's resource tracking lists them (siw reports
	# no QP state there: they show as RESET while connected; kept in the share)
	/usr/bin/rdma res show qp >"$IXR_OUT/$IX_TEST.$label.qps.txt" 2>&1
	qps=$(grep -c 'link siw0/1 .*comm ix-target' "$IXR_OUT/$IX_TEST.$label.qps.txt")
	run "$label" write "$4"
	run "$label" read "$4"
	n1=$(grep -c 'connected on siw0 (iWARP)' "$IXR_IX_LOG")
	what="SCSI host driver $drv, $conns TCP connection(s) on $SIW_IP:$port, $qps siw0 QP(s) of ix-target, ix-target's siw0 connections $n0 -> $n1"
	if [ "$iface" = iser ]; then
		if [ "$drv" = iscsi_iser ] && [ "$conns" -ge 1 ] && [ "$qps" -ge 1 ] && [ "$n1" -gt "$n0" ]; then
			ixr_pass "$label.over-siw" "$what"
		else
			ixr_fail "$label.over-siw" "$what: the I/O did not go over siw0"
		fi
	elif [ "$drv" = iscsi_tcp ] && [ "$conns" -ge 1 ] && [ "$qps" = 0 ] && [ "$n1" = "$n0" ]; then
		ixr_pass "$label.over-tcp" "$what"
	else
		ixr_fail "$label.over-tcp" "$what: not a plain TCP session"
	fi
	ixr_logout_all
	/usr/sbin/iscsiadm -m discoverydb -t st -p "$SIW_IP:$port" -o delete >&2 2>&1
}

if ! err=$(ixr_siw_up 2>&1); then
	ixr_fail siw-setup "siw0 on dummy1 ($SIW_IP): $err"
elif ! /usr/bin/rdma link show siw0/1 2>/dev/null | grep -q 'state ACTIVE'; then
	ixr_fail siw-link "siw0 is not active: $(/usr/bin/rdma link show 2>&1 | tr '\n' ' ')"
else
	RDMA_IP=$SIW_IP # ixr_ix_start's and ixr_logout_all's address from here on
	ixr_ix_siw_config "$IQN" 640M
	if ixr_ix_start; then
		siw_runs ix-siw-tcp default 3261 "$(ixr_pid ix-target)"
		siw_runs ix-siw-iser iser 3260 "$(ixr_pid ix-target)"
		ixr_ix_finish
	fi
	ixr_siw_down
fi

ixr_log "summary (bytes per run: $BYTES, CLK_TCK $HZ):"
while read -r l; do ixr_log "  $l"; done <"$SUMMARY"
ixr_exit
