#!/bin/bash
# A single-node Ceph cluster on loopback, for the RBD tests and benchmarks: one monitor, one
# OSD, no manager, no systemd, every file (configuration, keys, data, logs, sockets, PID
# files) under one folder, every daemon stopped by the PID in its PID file. Debian 12's Ceph
# 16.2 packages (scripts/deps.sh --ceph). Facts behind the shape: shared/docs/ceph.md.
#
#   cluster.sh start DIR [--store memstore|bluestore] [--pool NAME] [--mgr] [--addr IP]
#       Start a fresh cluster in DIR (created; must not hold a running one) and create the pool
#       NAME (default rbd, size 1, initialised for RBD). Prints `export CEPH_CONF=DIR/ceph.conf`
#       on stdout; every ceph/rbd command needs that variable. memstore (the default) keeps
#       the data in the OSD's memory (it grows with the data touched) and starts in ~10 s;
#       bluestore keeps it in a sparse 10 GiB file in DIR and survives an OSD restart.
#       --mgr starts a manager too (package ceph-mgr), without which the monitor gets no pool
#       statistics and enforces no pool quota (tests/interop/rbd_full.py).
#       --addr: the address the daemons use (default 127.0.0.1; tests/chaos/chaos.py runs the
#       cluster in a network namespace of its own, on its bridge's address).
#   cluster.sh stop DIR         stop every daemon of DIR (SIGTERM, SIGKILL after 10 s)
#   cluster.sh osd-stop DIR     stop the OSD only (SIGTERM; memstore saves its data then)
#   cluster.sh osd-kill DIR     SIGKILL the OSD (bluestore only: memstore loses its data)
#   cluster.sh osd-start DIR    start the OSD again and wait until it is up
#   cluster.sh status DIR       one line: pids of mon and osd, or "down"
#   CEPH_START_TIMEOUT   seconds to wait for each step (default 60)
#
# Exit 0 on success; 1 with a message on stderr otherwise (the cluster is stopped again when
# start fails half-way). Needs root only to bind nothing privileged: any user works.
set -euo pipefail

usage() { sed -n 2,24p "$0" >&2; exit 2; }
die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "[ceph $(date +%H:%M:%S)] $*" >&2; }

[ $# -ge 2 ] || usage
CMD=$1
DIR=$2
shift 2
STORE=memstore
POOL=rbd
MGR=
ADDR=127.0.0.1
while [ $# -gt 0 ]; do
	case $1 in
	--mgr) MGR=1 ;;
	--store) STORE=$2; shift ;;
	--pool) POOL=$2; shift ;;
	--addr) ADDR=$2; shift ;;
	*) usage ;;
	esac
	shift
done
case $STORE in memstore | bluestore) ;; *) die "--store memstore or bluestore" ;; esac
TIMEOUT=${CEPH_START_TIMEOUT:-60}
CONF=$DIR/ceph.conf
export CEPH_CONF=$CONF

free_port() { # tests/lib/ixtest.py free-port, the one free-port helper
	python3 "$(dirname "${BASH_SOURCE[0]}")/../lib/ixtest.py" free-port
}

# ceph CLI with a bound: a monitor that does not answer must not hang the caller.
ceph_() { timeout 30 ceph --connect-timeout 20 "$@"; }

pid_of() { # NAME (mon.a, osd.0): the live PID or nothing
	local f="$DIR/run/$1.pid" p
	[ -f "$f" ] || return 0
	p=$(cat "$f" 2>/dev/null) || return 0
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
	return 0
}

stop_one() { # NAME SIGNAL
	local p i
	p=$(pid_of "$1")
	[ -n "$p" ] || return 0
	kill -"$2" "$p" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$p" 2>/dev/null || { rm -f "$DIR/run/$1.pid"; return 0; }
		sleep 0.1
	done
	log "$1 (pid $p) still there after 10 s: SIGKILL"
	kill -KILL "$p" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$p" 2>/dev/null || { rm -f "$DIR/run/$1.pid"; return 0; }
		sleep 0.1
	done
	die "$1 (pid $p) survived SIGKILL"
}

wait_osd_up() {
	local deadline=$((SECONDS + TIMEOUT)) up
	while :; do
		up=$(ceph_ osd stat -f json 2>/dev/null |
			python3 -c 'import json,sys; print(json.load(sys.stdin).get("num_up_osds", 0))' 2>/dev/null || echo 0)
		[ "$up" = 1 ] && return 0
		[ -n "$(pid_of osd.0)" ] || die "ceph-osd exited; see $DIR/log/osd.0.log"
		[ $SECONDS -lt $deadline ] || die "the OSD is not up after ${TIMEOUT} s; see $DIR/log/osd.0.log"
		sleep 0.5
	done
}

start_osd() {
	[ -z "$(pid_of osd.0)" ] || return 0
	ceph-osd -i 0 || die "ceph-osd -i 0 failed; see $DIR/log/osd.0.log"
	wait_osd_up
}

# The manager (--mgr): pool statistics every second, so that a pool quota is enforced soon.
start_mgr() {
	local deadline=$((SECONDS + TIMEOUT))
	command -v ceph-mgr >/dev/null || die "--mgr needs ceph-mgr (scripts/deps.sh --ceph)"
	mkdir -p "$DIR/mgr.x"
	ceph_ auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' \
		-o "$DIR/mgr.x/keyring" >/dev/null || die "ceph auth get-or-create mgr.x failed"
	ceph-mgr -i x || die "ceph-mgr -i x failed; see $DIR/log/mgr.x.log"
	until ceph_ mgr stat -f json 2>/dev/null | grep -q '"available": *true'; do
		[ -n "$(pid_of mgr.x)" ] || die "ceph-mgr exited; see $DIR/log/mgr.x.log"
		[ $SECONDS -lt $deadline ] || die "the manager is not available after ${TIMEOUT} s"
		sleep 0.5
	done
}

do_start() {
	local p1 p2 fsid key uuid deadline
	command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v rbd >/dev/null ||
		die "Ceph is not installed (scripts/deps.sh --ceph installs ceph-mon ceph-osd ceph-common)"
	[ -z "$(pid_of mon.a)$(pid_of osd.0)" ] || die "$DIR already has a running cluster"
	rm -rf "$DIR"
	mkdir -p "$DIR"/{run,log,mon.a,osd.0}
	p1=$(free_port)
	p2=$(free_port)
	[ "$p1" != "$p2" ] || p2=$(free_port)
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon host = [v2:$ADDR:$p2,v1:$ADDR:$p1]
public addr = $ADDR
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keyring
run dir = $DIR/run
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
[client]
# clients (ix-target, rbd, tgtd) share the name client.admin: one socket and log per process,
# nothing on the client's stderr
admin socket = $DIR/run/\$name.\$pid.asok
log file = $DIR/log/\$name.\$pid.log
err to stderr = false
[mon]
admin socket = $DIR/run/\$name.asok
mon data = $DIR/\$name
[osd]
admin socket = $DIR/run/\$name.asok
osd data = $DIR/\$name
keyring = $DIR/\$name/keyring
osd objectstore = $STORE
memstore device bytes = 4294967296
bluestore block create = true
bluestore block size = 10737418240
osd memory target = 1073741824
[mgr]
admin socket = $DIR/run/\$name.asok
mgr data = $DIR/\$name
keyring = $DIR/\$name/keyring
mgr stats period = 1
EOF
	log "cluster in $DIR ($STORE), monitor on $ADDR:$p2 (v2) / $p1 (v1)"
	ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool "$DIR/keyring" --gen-key -n client.admin --cap mon 'allow *' \
		--cap osd 'allow *' --cap mgr 'allow *' >/dev/null
	monmaptool --create --fsid "$fsid" --addv a "[v2:$ADDR:$p2,v1:$ADDR:$p1]" \
		"$DIR/monmap" >/dev/null
	ceph-mon --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring" ||
		die "ceph-mon --mkfs failed"
	if ! ceph-mon -i a; then
		# the ports were free when picked; another test of the parallel tier may have bound
		# one since: start again with other ports (twice at most)
		if [ "${BIND_RETRIES:-0}" -lt 2 ] && [ -z "$(pid_of mon.a)" ] &&
			grep -q 'Address already in use' "$DIR/log/mon.a.log" 2>/dev/null; then
			BIND_RETRIES=$((${BIND_RETRIES:-0} + 1))
			log "a monitor port was taken since it was picked: again with other ports"
			do_start
			return
		fi
		die "ceph-mon -i a failed; see $DIR/log/mon.a.log"
	fi
	deadline=$((SECONDS + TIMEOUT))
	until ceph_ mon stat >/dev/null 2>&1; do
		[ -n "$(pid_of mon.a)" ] || die "ceph-mon exited; see $DIR/log/mon.a.log"
		[ $SECONDS -lt $deadline ] || die "the monitor does not answer after ${TIMEOUT} s"
		sleep 0.3
	done
	key=$(ceph-authtool --gen-print-key)
	uuid=$(cat /proc/sys/kernel/random/uuid)
	printf '{"cephx_secret": "%s"}\n' "$key" >"$DIR/osd-secret.json"
	id=$(ceph_ osd new "$uuid" -i "$DIR/osd-secret.json") || die "ceph osd new failed"
	[ "$id" = 0 ] || die "ceph osd new gave id $id, expected 0"
	ceph-osd -i 0 --mkfs --key "$key" --osd-uuid "$uuid" >"$DIR/log/osd-mkfs.log" 2>&1 ||
		die "ceph-osd --mkfs failed; see $DIR/log/osd-mkfs.log"
	# The OSD's own keyring: without it the OSD cannot authenticate (handle_auth_bad_method).
	printf '[osd.0]\n\tkey = %s\n' "$key" >"$DIR/osd.0/keyring"
	start_osd
	ceph_ osd pool create "$POOL" 8 8 >/dev/null 2>&1 || die "ceph osd pool create $POOL failed"
	ceph_ osd pool set "$POOL" size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
	timeout 60 rbd pool init "$POOL" || die "rbd pool init $POOL failed"
	[ -z "$MGR" ] || start_mgr
	log "cluster up in $SECONDS s: mon pid $(pid_of mon.a), osd pid $(pid_of osd.0), pool $POOL"
	echo "export CEPH_CONF=$CONF"
}

case $CMD in
start)
	trap 'rc=$?; if [ $rc != 0 ]; then stop_one mgr.x TERM; stop_one osd.0 TERM; stop_one mon.a TERM; fi' EXIT
	do_start
	trap - EXIT
	;;
stop)
	[ -d "$DIR" ] || exit 0
	stop_one mgr.x TERM
	stop_one osd.0 TERM
	stop_one mon.a TERM
	;;
osd-stop) stop_one osd.0 TERM ;;
osd-kill)
	[ "$(sed -n 's/^osd objectstore = //p' "$CONF")" = bluestore ] ||
		die "osd-kill needs bluestore (memstore would lose the data)"
	stop_one osd.0 KILL
	;;
osd-start) start_osd ;;
status)
	m=$(pid_of mon.a)
	o=$(pid_of osd.0)
	echo "mon ${m:-down} osd ${o:-down}"
	;;
*) usage ;;
esac
