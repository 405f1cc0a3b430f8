#!/bin/bash
# The checker against deliberately broken builds (docs/ha.md, "HA under chaos"): for each break
# named (default: all three), build ix-target with meson -Dchaos_break=BREAK into
# build-break-BREAK (the option compiles the fault in; the default, none, compiles no such
# code), run the short chaos run on it (chaos_short.py's seed, duration, faults and first fault
# unless CHAOS_SEED / CHAOS_DURATION / CHAOS_FAULTS / CHAOS_FIRST say otherwise; CHAOS_FIRST=
# empty for none) and report which checker categories
# flagged it, and how far into the run (seconds of client operations, operations) each first did.
#
#   tests/chaos/breaks.sh [lost-lock] [early-ack] [pr-no-notify]     (root: network namespaces)
#
#   lost-lock     a lock is broken without blocklisting its holder, and a holder that lost its
#                 lock never steps down: a gateway that keeps writing after it lost the lock
#   early-ack     a write answered GOOD when it is handed to librbd, before librbd completes it
#   pr-no-notify  a persistent-reservation update that skips the notify to the other gateways
#
# Exit 0 when every break named was caught, 1 when one was not. Output: tests/out/break-BREAK/.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
SEED=${CHAOS_SEED:-26}
DURATION=${CHAOS_DURATION:-75}
FAULTS=${CHAOS_FAULTS:-kill,stop,part-ceph,part-client,slow,double}
FIRST=${CHAOS_FIRST-slow-kill}
breaks=("$@")
[ ${#breaks[@]} -gt 0 ] || breaks=(lost-lock early-ack pr-no-notify)
status=0
for b in "${breaks[@]}"; do
	case $b in lost-lock | early-ack | pr-no-notify) ;; *)
		echo "unknown break $b (lost-lock, early-ack, pr-no-notify)" >&2
		exit 2
		;;
	esac
	dir=$ROOT/build-break-$b
	if [ ! -d "$dir" ]; then
		meson setup "$dir" -Dchaos_break="$b" -Dtests=false -Dman=disabled >/dev/null || exit 2
	fi
	ninja -C "$dir" tools/ix-target >/dev/null || exit 2
	out=$ROOT/tests/out/break-$b
	mkdir -p "$out"
	echo "== $b: chaos.py --seed $SEED --duration $DURATION --faults $FAULTS --first '$FIRST'" \
		"(output in $out)"
	IX_BUILD=$dir IX_OUT=$out python3 tests/chaos/chaos.py --seed "$SEED" \
		--duration "$DURATION" --faults "$FAULTS" --first "$FIRST" >"$out/chaos.txt" 2>&1
	rc=$?
	grep -E '^chaos check|^violations' "$out/chaos.txt"
	python3 - "$out/chaos-$SEED/history.jsonl" "$out/chaos-$SEED/image.bin" "$b" <<'EOF' || status=1
import re, sys
sys.path.insert(0, 'tests/chaos')
import check
hist, image, name = sys.argv[1:]
events = check.load(hist)
res = check.check_files(hist, image)
ops = sorted((e for e in events if e.get('type') == 'op'), key=lambda e: e['n'])
first = min(e.get('t0', e.get('t')) for e in ops) if ops else 0
found = {}
for kind, text in res['violations']:
    ts = [float(x) for x in re.findall(r'\b1\d{9}\.\d+', text)]
    at = ts[0] if ts else None  # the first time a text names is the event flagged
    if kind not in found or (at is not None and (found[kind] is None or at < found[kind])):
        found[kind] = at
for kind, at in sorted(found.items(), key=lambda kv: kv[1] or 1e12):
    n = sum(1 for e in res['violations'] if e[0] == kind)
    if at is None:
        print('%s: %s caught it (%d), from the final image' % (name, kind, n))
    else:
        print('%s: %s caught it (%d), first %.1f s into the client\'s run, after %d operations'
              % (name, kind, n, at - first, sum(1 for e in ops if e.get('t0', e.get('t')) <= at)))
if not found:
    print('%s: NOT CAUGHT (%d operations)' % (name, len(ops)))
    sys.exit(1)
EOF
	[ $rc -le 1 ] || { echo "$b: the run failed (exit $rc): $out/chaos.txt"; status=1; }
done
exit $status
