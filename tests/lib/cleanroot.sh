# A clean, minimal Debian 12 root to try set-up steps in, as a new user's machine would be
# (source this file; needs root, mmdebstrap, and Debian's mirrors).
#
#   cleanroot_new DIR         DIR becomes a fresh minbase bookworm root: unpacked from a cached
#                             base tarball (only mmdebstrap's minbase, never what a test installs
#                             on top; rebuilt when older than IX_CLEANROOT_MAX_DAYS, default 7),
#                             with fresh proc, sysfs (tracefs not mounted, as on a new machine),
#                             the host's /dev and /dev/pts, a tmpfs /run, resolv.conf and apt
#                             sources for Debian 12 and its security updates
#   cleanroot_run DIR CMD     run the bash command string CMD as root inside DIR (cwd /root);
#                             environment: PATH, HOME, TERM, LANG=C.UTF-8, DEBIAN_FRONTEND
#   cleanroot_free DIR        kill what still runs inside DIR, unmount everything, remove DIR
#
# The cache lives in IX_CLEANROOT_CACHE (default /var/cache/ix-cleanroot).

IX_CLEANROOT_CACHE=${IX_CLEANROOT_CACHE:-/var/cache/ix-cleanroot}
IX_CLEANROOT_SUITE=bookworm

cleanroot_err() {
	echo "cleanroot: $*" >&2
}

# cleanroot_base: print the path of the base tarball, building it first if missing or stale.
cleanroot_base() {
	local tar=$IX_CLEANROOT_CACHE/$IX_CLEANROOT_SUITE-minbase.tar
	local days=${IX_CLEANROOT_MAX_DAYS:-7} log
	if [ -s "$tar" ] && [ -z "$(find "$tar" -mtime +"$days" 2>/dev/null)" ]; then
		echo "$tar"
		return 0
	fi
	if ! command -v mmdebstrap >/dev/null; then
		cleanroot_err "mmdebstrap is not installed (scripts/deps.sh --fresh installs it)"
		return 1
	fi
	mkdir -p "$IX_CLEANROOT_CACHE"
	log=$IX_CLEANROOT_CACHE/mmdebstrap.log
	if ! mmdebstrap --variant=minbase --mode=root --format=tar "$IX_CLEANROOT_SUITE" "$tar.new" \
		"deb http://deb.debian.org/debian $IX_CLEANROOT_SUITE main" \
		"deb http://deb.debian.org/debian $IX_CLEANROOT_SUITE-updates main" \
		"deb http://deb.debian.org/debian-security $IX_CLEANROOT_SUITE-security main" \
		>"$log" 2>&1; then
		cleanroot_err "FAILED: mmdebstrap --variant=minbase $IX_CLEANROOT_SUITE; last lines of $log:"
		tail -n 20 "$log" | sed 's/^/  | /' >&2
		rm -f "$tar.new"
		return 1
	fi
	mv "$tar.new" "$tar"
	echo "$tar"
}

cleanroot_new() {
	local dir=$1 tar
	tar=$(cleanroot_base) || return 1
	if [ -e "$dir" ]; then
		cleanroot_err "$dir exists already"
		return 1
	fi
	mkdir -p "$dir"
	tar -C "$dir" -xf "$tar" || { cleanroot_err "cannot unpack $tar"; return 1; }
	mount -t proc proc "$dir/proc" &&
		mount -t sysfs sysfs "$dir/sys" &&
		mount --bind /dev "$dir/dev" &&
		mount --bind /dev/pts "$dir/dev/pts" &&
		mount -t tmpfs -o mode=755 tmpfs "$dir/run" || {
		cleanroot_err "cannot mount proc, sys, dev or run in $dir"
		cleanroot_free "$dir"
		return 1
	}
	cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
	# the machine's own name resolves, as on a Debian installation (the installer writes these
	# lines; mmdebstrap's minbase has none): some packages' set-up needs it (open-isns-server's
	# key generation)
	printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
		"$(hostname)" >"$dir/etc/hosts"
	# mmdebstrap wrote the sources it was given to /etc/apt/sources.list; no apt lists are kept
	# in the tarball (it is minbase: apt-get update runs inside, as on a new machine)
	return 0
}

cleanroot_run() {
	local dir=$1
	shift
	env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		TERM=dumb LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		chroot "$dir" /bin/bash -c "cd /root && $*"
}

# The PIDs of the processes whose root directory is DIR.
cleanroot_pids() {
	local dir p root
	dir=$(readlink -f "$1")
	for p in /proc/[0-9]*; do
		root=$(readlink "$p/root" 2>/dev/null) || continue
		[ "$root" = "$dir" ] && echo "${p#/proc/}"
	done
}

cleanroot_free() {
	local dir=$1 pids i m
	[ -d "$dir" ] || return 0
	for i in 1 2 3 4 5 6 7 8 9 10; do
		pids=$(cleanroot_pids "$dir")
		[ -z "$pids" ] && break
		if [ "$i" -lt 5 ]; then
			kill -TERM $pids 2>/dev/null
		else
			kill -KILL $pids 2>/dev/null
		fi
		sleep 1
	done
	# unmount everything below DIR, deepest first
	for m in $(awk -v d="$(readlink -f "$dir")" '$2 == d || index($2, d "/") == 1 {print $2}' \
		/proc/self/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	if awk -v d="$(readlink -f "$dir")" 'index($2, d "/") == 1 {f=1} END {exit !f}' \
		/proc/self/mounts; then
		cleanroot_err "mounts left under $dir; not removing it"
		return 1
	fi
	rm -rf --one-file-system "$dir"
}
