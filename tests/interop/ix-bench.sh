#!/bin/bash
# ix-bench (tools/ix-bench.c) against ix-target AND tgt: short verified runs must end with 0
# errors and 0 miscompares (random write, random read/write over two sessions on two threads,
# CRC32C digests), and --verify must be able to fail: after a verified fill, a read-only run
# with the same seed passes, then the same run fails (exit 1) once another seed's blocks are
# written into the range, and again, naming the exact LBA, once the raw client of
# tests/lib/ixiscsi.py has flipped one bit of one block.
. "$(dirname "$0")/../lib/common.sh"

ixt_init ix-bench
IXB=$IX_BUILD/tools/ix-bench
[ -x "$IXB" ] || ixt_skip "ix-bench not built at $IXB"
PEER_SIZE=64

# bench NAME ARGS...: one ix-bench --json run; JSON in $IXT_TMP/NAME.json, exit status in RC.
bench() {
	local name=$1
	LAST=$name
	shift
	ixt_run 120 "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" --json \
		--quiet "$@" >"$IXT_TMP/$name.json" 2>"$IXT_TMP/$name.err"
	RC=$?
	cat "$IXT_TMP/$name.err" "$IXT_TMP/$name.json" >&2
}

# expect CHECK WANT_RC PYTHON_CONDITION: judge the last run; the condition sees its JSON as d.
expect() {
	if [ "$RC" != "$2" ]; then
		ixt_check_fail "$1" "exit status $RC, want $2: $(head -c 300 "$IXT_TMP/$LAST.err")"
		return
	fi
	ixb_judge "$1" "$IXT_TMP/$LAST.json" "$3"
}

OK='d["result"] == "ok" and d["errors"] == 0 and d["miscompares"] == 0'
for peer in ix tgt; do
	if [ $peer = tgt ] && ! command -v tgtd >/dev/null; then
		ixt_result SKIP "tgt" "tgtd not installed"
		continue
	fi
	IX_PEER=$peer
	peer_start

	bench randwrite --rw randwrite --verify --time 3s --qd 16
	expect "$peer.randwrite" 0 "$OK and d['write']['ios'] > 1000 and d['verified_blocks'] > 1000"
	bench randrw --rw randrw --mix 70 --verify --time 4s --qd 16 --sessions 2 --threads 2
	expect "$peer.randrw" 0 "$OK and d['read']['ios'] > 1000 and d['write']['ios'] > 100"
	bench digests --rw randrw --verify --time 2s --qd 8 --digests
	expect "$peer.digests" 0 "$OK and d['digests'] and d['write']['ios'] > 100"

	# --verify can fail: fill 8 MiB with seed 1001, read it back in another I/O size...
	bench fill --rw write --verify --seed 1001 --bs 64k --range 8M --size 8M
	expect "$peer.fill" 0 "$OK and d['write']['ios'] == 128 and d['verified_blocks'] == 128"
	# (512-byte reads at QD 7: buffers whose total is no multiple of a page)
	bench reread --rw read --verify --seed 1001 --range 8M --size 8M --bs 512 --qd 7
	expect "$peer.reread" 0 "$OK and d['read']['ios'] == 16384"
	# ...then let a run with another seed write 4 blocks into it
	bench foreign --rw randwrite --verify --seed 2002 --range 8M --size 16k --qd 1
	expect "$peer.foreign-write" 0 "$OK and d['write']['ios'] == 4"
	bench detect-foreign --rw read --verify --seed 1001 --range 8M --size 8M
	expect "$peer.detect-foreign" 1 "d['result'] == 'error' and d['errors'] == 0 and \
1 <= d['miscompares'] <= 4 and 'not data of this run' in d['first_error'] and \
'of seed 2002' in d['first_error']"
	# ...and one flipped bit in one block, written by the raw client
	bench refill --rw write --verify --seed 1001 --bs 64k --range 8M --size 8M
	expect "$peer.refill" 0 "$OK"
	lba=12345
	if ixt_run 30 python3 "$IXT_LIB/ixb_corrupt.py" "$IX_HOST" "$PEER_PORT" "$PEER_IQN" \
		"$PEER_LUN" $lba >&2; then
		bench detect-bitflip --rw read --verify --seed 1001 --range 8M --size 8M
		expect "$peer.detect-bitflip" 1 "d['miscompares'] == 1 and d['errors'] == 0 and \
'LBA $lba ' in d['first_error'] and 'checksum' in d['first_error']"
	else
		ixt_check_fail "$peer.detect-bitflip" "the raw client could not rewrite LBA $lba"
	fi

	peer_check
	peer_stop
done
