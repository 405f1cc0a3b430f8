#!/bin/bash
# The Debian package check (docs/packaging.md). From a clean `git archive HEAD` copy (the work
# tree is not touched) it
#   1. builds the packages: DEB_BUILD_OPTIONS="nocheck parallel=2 noautodbgsym"
#      dpkg-buildpackage -b -us -uc (nocheck: the unit tests are not built; no -dbgsym packages)
#   2. runs lintian on them: no errors
#   3. installs them with `apt-get install ./*.deb` into a clean minimal Debian 12 root
#      (tests/lib/cleanroot.sh), dependencies coming from Debian
#   4. starts the packaged daemon from the ExecStart line of the installed ix-target.service,
#      on the packaged /etc/ix/ix-target.json, inside the root (no systemd runs there) with
#      what of the unit's sandbox can be applied without systemd: a network namespace of its
#      own (so port 3260 is free whatever runs on this machine), the root file system
#      read-only but the StateDirectory (ProtectSystem=strict), private /tmp (PrivateTmp),
#      empty /home and /root (ProtectHome), no_new_privs, the capability bounding set and
#      LimitMEMLOCK of the unit; and $NOTIFY_SOCKET, whose datagrams it checks: READY=1
#      (only once the portal accepts connections), RELOADING=1 + READY=1 on SIGHUP,
#      STOPPING=1 on SIGTERM; iscsi-ls (the host's) must list the target; the packaged ixadm
#      must discover it and ix-bench run a verified second on it; a program built with the
#      root's `pkg-config ix` must discover it through libix.so.0; a second instance on the
#      same port must exit non-zero with the reason and never say READY=1
#   5. renders every man page with man -l (no groff warnings)
#   6. puts an admin's files into /etc/ix and /var/lib/ix, runs `apt-get purge` (and
#      autoremove --purge) and checks that the package set and the file tree are what they
#      were before the install, except the admin's files, which must still be there
#   7. installs systemd and the packages again in that root and runs
#      `systemd-analyze verify` on the installed units
# Prints one PASS/FAIL/SKIP line per check (appended to $IX_RESULTS when set); exits 0 when
# nothing failed, else 1. Needs root. Logs and the build: tests/out/package/.
#
#   tests/package.sh [--keep]    --keep: leave the root in tests/out/package/root
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
. tests/lib/common.sh
. tests/lib/cleanroot.sh
OUT=$SRC/tests/out/package
R=$OUT/root
B=$OUT/build
KEEP=0
[ "${1:-}" = --keep ] && KEEP=1
START=$SECONDS
DPID=""
LPID=""
DEBS=(ix-target ix-initiator libix0 libix-dev)

result() { # STATUS NAME DETAIL: one check line (tests/lib/common.sh's ixt_result)
	ixt_result "$1" "package.$2" "$3"
}

cleanup() {
	[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null
	if [ -d "$R" ]; then
		if [ $KEEP = 0 ]; then
			cleanroot_free "$R"
		else
			echo "package: root kept in $R (cleanroot_free it when done: . tests/lib/cleanroot.sh)"
		fi
	fi
}

finish() {
	cleanup
	echo "package: $((SECONDS - START)) s"
	[ $IXT_FAILED = 0 ]
	exit $?
}
trap 'cleanup; exit 1' INT TERM

if [ "$(id -u)" != 0 ]; then
	result FAIL setup "needs root (chroot, mounts, namespaces)"
	exit 1
fi
mkdir -p "$OUT"
need=(dpkg-buildpackage dh lintian systemd-analyze mmdebstrap iscsi-ls man unshare nsenter
	setpriv prlimit python3 git ip gcc pkg-config dpkg-architecture)
missing() { for c in "${need[@]}"; do command -v "$c" >/dev/null || echo "$c"; done; }
if [ -n "$(missing)" ]; then
	./scripts/deps.sh --package >"$OUT.deps.log" 2>&1 || true
fi
if [ -n "$(missing)" ]; then
	result FAIL setup "missing after scripts/deps.sh --package: $(missing | tr '\n' ' ')"
	exit 1
fi
if [ -e "$R" ]; then
	cleanroot_free "$R" || { result FAIL setup "cannot remove the old root $R"; exit 1; }
fi
rm -rf "$B" "$OUT"/*.log
mkdir -p "$B/ix"

# ---------------------------------------------------------------- 1. build
t=$SECONDS
before_status=$(git status --porcelain)
if ! git archive --format=tar HEAD | tar -x -C "$B/ix"; then
	result FAIL build "git archive HEAD failed"
	finish
fi
(cd "$B/ix" && DEB_BUILD_OPTIONS="nocheck parallel=2 noautodbgsym" dpkg-buildpackage -b -us -uc) \
	>"$OUT/build.log" 2>&1
rc=$?
debs=()
for p in "${DEBS[@]}"; do
	f=$(ls "$B"/${p}_*.deb 2>/dev/null | head -1)
	[ -n "$f" ] && debs+=("$f")
done
if [ $rc = 0 ] && [ ${#debs[@]} = ${#DEBS[@]} ]; then
	result PASS build "dpkg-buildpackage -b of HEAD $(git rev-parse --short HEAD): $(cd "$B" && ls "${debs[@]##*/}" | tr '\n' ' ')($((SECONDS - t)) s)"
else
	result FAIL build "dpkg-buildpackage exit $rc, ${#debs[@]} of ${#DEBS[@]} packages; last lines: $(tail -n 8 "$OUT/build.log" | tr '\n' '|')"
	finish
fi
if [ "$(git status --porcelain)" = "$before_status" ]; then
	result PASS worktree-clean "the build did not change the work tree"
else
	result FAIL worktree-clean "git status changed during the build"
fi

# ---------------------------------------------------------------- 2. lintian
t=$SECONDS
changes=$(ls "$B"/*.changes | head -1)
lintian "$changes" >"$OUT/lintian.log" 2>&1
ne=$(grep -c '^E: ' "$OUT/lintian.log")
nw=$(grep -c '^W: ' "$OUT/lintian.log")
if [ "$ne" = 0 ] && ! grep -qi 'internal error\|^error' "$OUT/lintian.log"; then
	result PASS lintian "no errors, $nw warnings ($((SECONDS - t)) s)"
else
	result FAIL lintian "$ne errors: $(grep '^E: ' "$OUT/lintian.log" | head -5 | tr '\n' '|')"
fi
[ "$nw" != 0 ] && grep '^W: ' "$OUT/lintian.log" | sed 's/^/  | /'

# ---------------------------------------------------------------- 3. install into a clean root
t=$SECONDS
if ! cleanroot_new "$R" 2>"$OUT/cleanroot.log"; then
	result FAIL root "$(tail -n 3 "$OUT/cleanroot.log" | tr '\n' ' ')"
	finish
fi
# Every file and directory of the root's own file system (proc, sys, dev and run are mounts),
# without apt's and dpkg's bookkeeping, the logs, and the backups the shadow tools write when
# a dependency's postinst adds a group (/etc/group- ...).
tree() {
	(cd "$R" && find . -xdev \( -path ./var/lib/dpkg -o -path ./var/lib/apt -o -path ./var/cache \
		-o -path ./var/log -o -path ./root -o -path ./tmp \) -prune -o -print |
		grep -vxE '\./etc/(passwd|group|shadow|gshadow)-' | sort)
}
pkgset() { cleanroot_run "$R" "dpkg-query -W -f '\${Package} \${Status}\n' | grep ' installed\$' | cut -d' ' -f1 | sort"; }
if ! cleanroot_run "$R" 'apt-get update -q' >"$OUT/apt.log" 2>&1; then
	result FAIL install "apt-get update in the root failed: $(tail -n 3 "$OUT/apt.log" | tr '\n' '|')"
	finish
fi
pkgs_before=$(pkgset)
tree >"$OUT/tree.before"
mkdir -p "$R/root/debs"
cp "${debs[@]}" "$R/root/debs/"
if cleanroot_run "$R" "apt-get install -y -q $(printf './debs/%s ' "${debs[@]##*/}")" >>"$OUT/apt.log" 2>&1; then
	n=$(comm -13 <(echo "$pkgs_before") <(pkgset) | wc -l)
	result PASS install "apt-get install of the 4 .debs into a minimal Debian 12 root: $n packages installed ($((SECONDS - t)) s)"
else
	result FAIL install "apt-get install failed: $(tail -n 6 "$OUT/apt.log" | tr '\n' '|')"
	finish
fi

# ---------------------------------------------------------------- 4. the daemon from its unit
unit=$R/lib/systemd/system/ix-target.service
ukey() { sed -n "s/^$1=//p" "$unit" | tail -1; }
exec_start=$(ukey ExecStart)
caps=$(ukey CapabilityBoundingSet)
nnp=$(ukey NoNewPrivileges)
memlock=$(ukey LimitMEMLOCK)
state=$(ukey StateDirectory)
conf=$(echo "$exec_start" | sed -n 's/.* -c \([^ ]*\).*/\1/p')
iqn=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["targets"][0]["name"])' \
	"$R$conf" 2>/dev/null)
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["portals"][0].get("port", 3260))' \
	"$R$conf" 2>/dev/null)
if [ -z "$exec_start" ] || [ -z "$conf" ] || [ -z "$iqn" ] || [ "$state" != ix ]; then
	result FAIL unit-config "ExecStart '$exec_start', config '$conf', target '$iqn', StateDirectory '$state'"
	finish
fi
# setpriv arguments from the unit: the bounding set (CAP_X -> +x) and no_new_privs
bset="-all"
for c in $caps; do
	c=${c#CAP_}
	bset="$bset,+${c,,}"
done
sp=(setpriv --inh-caps=-all --bounding-set="$bset")
[ "$nnp" = yes ] && sp+=(--no-new-privs)
lim=()
memnote="memlock $memlock"
if [ "$memlock" = infinity ]; then
	if prlimit --memlock=unlimited true 2>/dev/null; then
		lim=(prlimit --memlock=unlimited)
	else
		# raising the hard limit needs CAP_SYS_RESOURCE, which this machine (a container)
		# may not grant even to root; systemd would set it before dropping privileges
		memnote="memlock not applied: this machine cannot raise RLIMIT_MEMLOCK"
	fi
fi

# A listener for the notify socket: one line per datagram, "<seconds> <message with | for \n>",
# and on READY=1 whether the portal accepted a connection at that moment (it runs in the
# daemon's network namespace, see below: it connects through /proc/PID/ns/net).
notify_listen() { # SOCKET LOG PIDFILE
	python3 - "$@" <<-'PY' &
	import ctypes, os, socket, sys, time
	path, log, pidfile = sys.argv[1:4]
	port = int(os.environ['IXPKG_PORT'])
	try:
	    os.unlink(path)
	except FileNotFoundError:
	    pass
	s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
	s.bind(path)
	t0 = time.monotonic()
	with open(log, 'w', buffering=1) as f:
	    while True:
	        msg = s.recv(4096).decode(errors='replace')
	        line = '%.3f %s' % (time.monotonic() - t0, msg.replace('\n', '|'))
	        if 'READY=1' in msg and os.path.exists(pidfile):
	            try:
	                pid = open(pidfile).read().strip()
	                fd = os.open('/proc/%s/ns/net' % pid, os.O_RDONLY)
	                if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) < 0:
	                    raise OSError(ctypes.get_errno(), 'setns')
	                c = socket.create_connection(('127.0.0.1', port), timeout=2)
	                c.close()
	                line += ' [portal accepting]'
	            except OSError as e:
	                line += ' [portal NOT accepting: %s]' % e
	        f.write(line + '\n')
	PY
	LPID=$!
}

# The sandbox: new network and mount namespaces; in the mount namespace the root is bound
# read-only but its StateDirectory, with tmpfs over /tmp, /var/tmp, /home and /root.
sandbox_script='
ip link set lo up || exit 1
mount --rbind "$R" "$R" && mount --bind "$R/var/lib/$STATE" "$R/var/lib/$STATE" &&
	mount -o remount,bind,ro "$R" || exit 1
for d in tmp var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$R/$d" || exit 1; done
for d in home root; do mount -t tmpfs -o ro,mode=755 tmpfs "$R/$d" || exit 1; done
echo $$ >"$PIDFILE"
exec chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NOTIFY_SOCKET="$NSOCK" "$@"
'
t=$SECONDS
nlog=$OUT/notify.log
pidfile=$OUT/daemon.pid
rm -f "$pidfile"
IXPKG_PORT=$port notify_listen "$R/run/ixpkg-notify.sock" "$nlog" "$pidfile"
for i in $(seq 1 100); do
	[ -S "$R/run/ixpkg-notify.sock" ] && break
	sleep 0.1
done
if [ ! -S "$R/run/ixpkg-notify.sock" ]; then
	result FAIL daemon-ready "the notify socket listener did not start within 10 s"
	finish
fi
R=$R STATE=$state PIDFILE=$pidfile NSOCK=/run/ixpkg-notify.sock \
	unshare --net --mount --propagation private bash -c "$sandbox_script" sandbox \
	"${lim[@]}" "${sp[@]}" -- $exec_start >"$OUT/daemon.log" 2>&1 &
DPID=$!
ready=0
for i in $(seq 1 100); do
	grep -q 'READY=1' "$nlog" 2>/dev/null && { ready=1; break; }
	kill -0 $DPID 2>/dev/null || break
	sleep 0.2
done
if [ $ready = 1 ] && grep -q 'READY=1.*\[portal accepting\]' "$nlog"; then
	result PASS daemon-ready "'$exec_start' under the unit's sandbox (read-only root, caps '$caps', no_new_privs, $memnote, own netns) sent READY=1 with the portal accepting ($((SECONDS - t)) s)"
else
	result FAIL daemon-ready "no READY=1 with the portal accepting: notify '$(tr '\n' '|' <"$nlog" 2>/dev/null)', log: $(tail -n 5 "$OUT/daemon.log" | tr '\n' '|')"
	finish
fi
nsenter --net=/proc/$DPID/ns/net iscsi-ls -s "iscsi://127.0.0.1:$port" >"$OUT/iscsi-ls.log" 2>&1
if grep -q "Target:$iqn" "$OUT/iscsi-ls.log" && grep -q 'Lun:0 ' "$OUT/iscsi-ls.log"; then
	result PASS iscsi-ls "iscsi-ls lists $iqn and its LUN 0 on 127.0.0.1:$port"
else
	result FAIL iscsi-ls "iscsi-ls did not list $iqn LUN 0: $(head -c 300 "$OUT/iscsi-ls.log")"
fi
# The initiator package against it, from inside the root (in the daemon's network namespace):
# ixadm discovery, and a short verified ix-bench run
inroot() { nsenter --net=/proc/$DPID/ns/net chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
inroot ixadm --db /tmp/ixpkg-db -m discovery -t st -p "127.0.0.1:$port" -o nonpersistent \
	>"$OUT/ixadm.log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "^127.0.0.1:$port,[0-9]* $iqn\$" "$OUT/ixadm.log"; then
	result PASS ixadm "the packaged ixadm discovers $iqn"
else
	result FAIL ixadm "ixadm -m discovery exit $rc: $(head -c 300 "$OUT/ixadm.log")"
fi
# The packaged ix-ctl over the packaged configuration's management socket (/run/ix)
inroot ix-ctl --json ls >"$OUT/ix-ctl.log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "$iqn" "$OUT/ix-ctl.log"; then
	result PASS ix-ctl "the packaged ix-ctl lists $iqn through /run/ix/ix-target.sock"
else
	result FAIL ix-ctl "ix-ctl --json ls exit $rc: $(head -c 300 "$OUT/ix-ctl.log")"
fi
inroot ix-bench -p "127.0.0.1:$port" -T "$iqn" --rw randrw --verify --time 1s --qd 8 --quiet \
	--json >"$OUT/ix-bench.json" 2>"$OUT/ix-bench.log"
rc=$?
ios=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%d IOPS, %d blocks verified, %d miscompares" % (j["iops"], j["verified_blocks"], j["miscompares"]))' \
	"$OUT/ix-bench.json" 2>/dev/null)
if [ $rc = 0 ]; then
	result PASS ix-bench "the packaged ix-bench: 1 s randrw --verify, exit 0${ios:+, $ios}"
else
	result FAIL ix-bench "ix-bench exit $rc: $(tail -n 3 "$OUT/ix-bench.log" | tr '\n' '|')"
fi
# libix-dev and libix0: a program built on the host with `pkg-config ix` from the root's
# libix-dev, run inside the root against its libix.so.0
lib=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
flags=$(PKG_CONFIG_SYSROOT_DIR=$R PKG_CONFIG_LIBDIR=$R/usr/lib/$lib/pkgconfig:$R/usr/share/pkgconfig \
	pkg-config --cflags --libs ix 2>"$OUT/libix.log")
if [ -n "$flags" ] && gcc -std=c11 -Wall -Werror tests/lib/pkg_discover.c $flags \
	-Wl,-rpath-link,"$R/usr/lib/$lib" -o "$R/tmp/pkg_discover" >>"$OUT/libix.log" 2>&1; then
	inroot /tmp/pkg_discover "127.0.0.1:$port" >"$OUT/libix.out" 2>>"$OUT/libix.log"
	rc=$?
	if [ $rc = 0 ] && grep -qx "$iqn" "$OUT/libix.out" &&
		inroot ldd /tmp/pkg_discover >"$OUT/libix.ldd" 2>&1 &&
		grep -qE "libix\.so\.0 => (/usr)?/lib/$lib/libix\.so\.0 " "$OUT/libix.ldd"; then
		result PASS libix "a program built with pkg-config ix ($flags) discovers $iqn through libix.so.0"
	else
		result FAIL libix "pkg_discover exit $rc, found '$(tr '\n' ' ' <"$OUT/libix.out")', ldd: $(grep libix "$OUT/libix.ldd" 2>/dev/null); $(tail -n 2 "$OUT/libix.log" | tr '\n' '|')"
	fi
else
	result FAIL libix "cannot build against the installed libix-dev (pkg-config ix: '$flags'): $(tail -n 3 "$OUT/libix.log" | tr '\n' '|')"
fi
# SIGHUP (ExecReload): RELOADING=1, then READY=1 again
kill -HUP $DPID
for i in $(seq 1 50); do
	[ "$(grep -c 'READY=1' "$nlog")" -ge 2 ] && break
	sleep 0.1
done
if grep -q 'RELOADING=1' "$nlog" && [ "$(grep -c 'READY=1' "$nlog")" -ge 2 ] &&
	grep -q 'configuration reloaded' "$OUT/daemon.log"; then
	result PASS daemon-reload "SIGHUP: RELOADING=1, configuration reloaded, READY=1"
else
	result FAIL daemon-reload "after SIGHUP: notify '$(tr '\n' '|' <"$nlog")'"
fi
# A second instance on the same port: exit status != 0, the reason on stderr, no READY=1
nsenter --net=/proc/$DPID/ns/net chroot "$R" env -i NOTIFY_SOCKET=/run/ixpkg-notify2.sock \
	$exec_start >"$OUT/second.log" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q 'Address already in use' "$OUT/second.log" &&
	! grep -q '^ix-target: ready' "$OUT/second.log"; then
	result PASS start-failure "a second instance exits $rc: $(grep -m1 'in use' "$OUT/second.log")"
else
	result FAIL start-failure "second instance: exit $rc, $(tail -n 3 "$OUT/second.log" | tr '\n' '|')"
fi
kill -TERM $DPID
if timeout 20 tail --pid=$DPID -f /dev/null; then
	wait $DPID
	rc=$?
	sleep 0.2
	if [ $rc = 0 ] && grep -q 'STOPPING=1' "$nlog"; then
		result PASS daemon-stop "SIGTERM: STOPPING=1, exit 0"
	else
		result FAIL daemon-stop "SIGTERM: exit $rc, notify '$(tr '\n' '|' <"$nlog")'"
	fi
else
	result FAIL daemon-stop "ix-target still running 20 s after SIGTERM"
fi
DPID=""
kill $LPID 2>/dev/null
wait $LPID 2>/dev/null
LPID=""
rm -f "$R/run/ixpkg-notify.sock"

# ---------------------------------------------------------------- 5. man pages
for page in man8/ix-target.8 man5/ix-target.json.5 man8/ixadm.8 man1/ix-bench.1 man8/ix-ctl.8; do
	f=$R/usr/share/man/$page.gz
	name=${page#*/}
	name=${name%.*}
	if [ ! -f "$f" ]; then
		result FAIL man-$name "$page.gz is not installed"
		continue
	fi
	text=$(MANWIDTH=80 man --warnings -l "$f" 2>"$OUT/man-$name.err")
	if [ -z "$(cat "$OUT/man-$name.err")" ] && grep -q '^NAME' <<<"$text" &&
		grep -q "^ *$name - " <<<"$text"; then
		result PASS man-$name "man -l renders $page ($(echo "$text" | wc -l) lines, no warnings)"
	else
		result FAIL man-$name "man -l $page: $(head -c 300 "$OUT/man-$name.err")"
	fi
done

# ---------------------------------------------------------------- 6. purge
t=$SECONDS
echo '{"note": "the admin wrote this"}' >"$R/etc/ix/admin.json"
dd if=/dev/zero of="$R/var/lib/ix/admin-lun.img" bs=1M count=1 status=none
mkdir -p "$R/var/lib/ix/nodes" && echo x >"$R/var/lib/ix/nodes/admin-record"
cleanroot_run "$R" "dpkg -L ${DEBS[*]}" 2>/dev/null | sort -u >"$OUT/package-files"
# autoremove: every package the install pulled in is marked automatic; by default apt keeps one
# that a package installed before recommends (libc-bin recommends manpages, which libc6-dev's
# recommendations brought in). The root's own packages are all marked manual, so these options
# cannot remove any of them; the package-set comparison below would show it.
if cleanroot_run "$R" "apt-get purge -y -q ${DEBS[*]} && apt-get autoremove --purge -y -q -o APT::AutoRemove::RecommendsImportant=false -o APT::AutoRemove::SuggestsImportant=false" \
	>"$OUT/purge.log" 2>&1; then
	pkgs_after=$(pkgset)
	if [ "$pkgs_after" = "$pkgs_before" ]; then
		result PASS purge-packages "apt-get purge + autoremove --purge: the package set is the one before the install ($((SECONDS - t)) s)"
	else
		result FAIL purge-packages "package set differs: $(diff <(echo "$pkgs_before") <(echo "$pkgs_after") | grep '^[<>]' | head -10 | tr '\n' ' ')"
	fi
	tree >"$OUT/tree.after"
	extra=$(comm -13 "$OUT/tree.before" "$OUT/tree.after")
	gone=$(comm -23 "$OUT/tree.before" "$OUT/tree.after")
	admin=$'./etc/ix\n./etc/ix/admin.json\n./var/lib/ix\n./var/lib/ix/admin-lun.img\n./var/lib/ix/nodes\n./var/lib/ix/nodes/admin-record'
	if [ "$extra" = "$admin" ] && [ -z "$gone" ]; then
		result PASS purge-files "every installed file is gone; the admin's files in /etc/ix and /var/lib/ix are kept"
	else
		result FAIL purge-files "left over or missing after purge: $(echo "$extra" | grep -vxF "$admin" | head -8 | tr '\n' ' ') missing: $(echo "$gone" | head -5 | tr '\n' ' ')"
	fi
	left=$(while read -r f; do [ -e "$R$f" ] && [ ! -d "$R$f" ] && echo "$f"; done <"$OUT/package-files")
	[ -n "$left" ] && result FAIL purge-package-files "still there: $(echo "$left" | head -5 | tr '\n' ' ')"
else
	result FAIL purge-packages "apt-get purge failed: $(tail -n 5 "$OUT/purge.log" | tr '\n' '|')"
fi

# ---------------------------------------------------------------- 7. systemd-analyze verify
# verify resolves the units' dependencies (sysinit.target, ...) and commands in the root:
# systemd there too now (after the purge check, so that the install above was on a clean root).
t=$SECONDS
if cleanroot_run "$R" "apt-get install -y -q --no-install-recommends systemd $(printf './debs/%s ' "${debs[@]##*/}")" \
	>"$OUT/apt-systemd.log" 2>&1; then
	units=(/lib/systemd/system/ix-target.service /lib/systemd/system/ix-initiator.service)
	if systemd-analyze verify --root="$R" --man=no "${units[@]}" >"$OUT/verify.log" 2>&1 &&
		[ ! -s "$OUT/verify.log" ]; then
		result PASS systemd-verify "systemd-analyze verify accepts ${units[*]##*/} ($((SECONDS - t)) s)"
	else
		result FAIL systemd-verify "$(head -n 5 "$OUT/verify.log" | tr '\n' '|')"
	fi
	sec=$(systemd-analyze security --offline=yes --root="$R" "${units[0]}" 2>/dev/null |
		sed -n 's/.*Overall exposure level for [^:]*: *//p')
	[ -n "$sec" ] && echo "  | systemd-analyze security ix-target.service: $sec"
else
	result FAIL systemd-verify "apt-get install systemd + the packages failed: $(tail -n 4 "$OUT/apt-systemd.log" | tr '\n' '|')"
fi
finish
