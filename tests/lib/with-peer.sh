#!/bin/bash
# with-peer.sh NAME SECONDS CMD...
# Start the peer selected by IX_PEER (ix-target or tgtd) on a free loopback port, export
# PEER_PORT / PEER_IQN / PEER_LUN / PEER_URL to CMD, run CMD under a timeout, then stop the
# peer. Exit status is CMD's (0 / 1 / 77), turned into 1 if the peer crashed, printed a
# sanitizer report or did not stop cleanly.
. "$(dirname "$0")/common.sh"
[ $# -ge 3 ] || { echo "usage: $0 NAME SECONDS CMD..." >&2; exit 2; }
name=$1 secs=$2
shift 2
ixt_init "$name"
peer_start
ixt_run "$secs" "$@"
rc=$?
peer_check || rc=1
[ $rc = 124 ] && rc=1
exit $rc
