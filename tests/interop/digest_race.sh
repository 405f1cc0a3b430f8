#!/bin/bash
# Data digests over zero-copy Data-In, racing writes. On a RAM LUN ix-target sends READ data
# straight from the LU's memory; with DataDigest=CRC32C the CRC and the bytes on the wire must
# be the same bytes although other sessions (other worker threads) write into that memory at
# any time. The TCP transport sums and sends them while writes to them are held off (the RAM
# backend's pin), and sends from a copy when it cannot get that (see docs/architecture.md).
#
# Here: a writer (2 sessions, random 64 KiB writes, verified) and two readers with digests
# (one session each, so they meet the writer on both worker threads: sequential 512 KiB
# reads at QD 8; random 16 KiB reads at QD 16) work on the same 8 MiB
# for IX_RACE_TIME (default 10s). Any digest computed over bytes that changed before they
# left shows as a data digest error at the reader, which drops the connection: the readers
# must end with 0 errors and 0 connection losses, the writer with 0 errors and 0 miscompares.
# Then a read-only verify with digests checks that the range holds intact writer blocks.
# Against a target that sums LU memory without the pin this test fails within seconds.
# ix only (the zero-copy path is ix's); exits 77 against other peers.
. "$(dirname "$0")/../lib/common.sh"

ixt_init digest_race
IXB=$IX_BUILD/tools/ix-bench
[ -x "$IXB" ] || ixt_skip "ix-bench not built at $IXB"
[ "$IX_PEER" = ix ] || ixt_skip "tests ix-target's zero-copy Data-In (peer is $IX_PEER)"
[ "$PEER_BACKEND" = ram ] || ixt_skip "the zero-copy Data-In is the RAM backend's (backend is $PEER_BACKEND)"
RACE_TIME=${IX_RACE_TIME:-10s}
PEER_SIZE=64
peer_start
SEED=$((RANDOM * 32768 + RANDOM + 1))

# bench NAME LIMIT ARGS...: ix-bench on the first 8 MiB of the LUN, JSON in $IXT_TMP/NAME.json
bench() {
	local name=$1 limit=$2
	shift 2
	ixt_run "$limit" "$IXB" -p "$IX_HOST:$PEER_PORT" -T "$PEER_IQN" --lun "$PEER_LUN" \
		--range 8m --json --quiet "$@" >"$IXT_TMP/$name.json" 2>"$IXT_TMP/$name.err"
	echo $? >"$IXT_TMP/$name.rc"
}

# judge CHECK NAME PYTHON_CONDITION: the run's exit status, then its JSON (seen as d)
judge() {
	cat "$IXT_TMP/$2.err" >&2
	ixb_judge_run "$1" "$(cat "$IXT_TMP/$2.rc")" "$2" "$3" "$DETAIL"
}

DETAIL='"%d reads, %d writes, %.0f MiB/s, %d errors, %d miscompares, %d verified blocks, %d connection losses, digests %s" % (d["read"]["ios"], d["write"]["ios"], d["mib_s"], d["errors"], d["miscompares"], d["verified_blocks"], d["recovery"]["connection_losses"], d["digests"])'
CLEAN='d["result"] == "ok" and d["errors"] == 0 and d["miscompares"] == 0 and d["recovery"]["connection_losses"] == 0'

ixt_log "fill: 8 MiB of verifiable blocks (seed $SEED)"
bench fill 120 --rw write --bs 512k --qd 4 --size 8m --verify --seed "$SEED"
judge digest_race.fill fill "$CLEAN and d['write']['ios'] == 16"

ixt_log "race: writer and two digest readers on the same 8 MiB for $RACE_TIME"
bench writer 120 --rw randwrite --bs 64k --qd 8 --sessions 2 --verify --seed "$SEED" \
	--time "$RACE_TIME" &
w=$!
bench seqreader 120 --rw read --bs 512k --qd 8 --sessions 1 --digests --time "$RACE_TIME" &
r1=$!
bench randreader 120 --rw randread --bs 16k --qd 16 --sessions 1 --digests --time "$RACE_TIME" &
r2=$!
wait $w $r1 $r2
judge digest_race.writer writer "$CLEAN and d['write']['ios'] >= 100"
judge digest_race.seq-reader seqreader "$CLEAN and d['digests'] and d['read']['ios'] >= 100"
judge digest_race.rand-reader randreader "$CLEAN and d['digests'] and d['read']['ios'] >= 100"

ixt_log "after: a read-only verify with digests"
bench after 120 --rw read --bs 256k --qd 4 --size 8m --verify --seed "$SEED" --digests
judge digest_race.verify-after after "$CLEAN and d['verify'] and d['read']['ios'] == 32"

if grep -qi 'digest error' "$PEER_LOG" "$IXT_TMP"/*.err; then
	ixt_check_fail digest_race.no-digest-errors "$(grep -i -m 3 'digest error' "$PEER_LOG" "$IXT_TMP"/*.err)"
else
	ixt_check_pass digest_race.no-digest-errors "no digest error in the target log or ix-bench's output"
fi
peer_check
