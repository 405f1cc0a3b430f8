#!/usr/bin/env python3
"""The short chaos run (docs/ha.md, "HA under chaos"): tests/chaos/chaos.py with a fixed seed
for DURATION_S seconds of faults (kill -9 and restart, SIGSTOP, partitions gateway-Ceph and
client-gateway, slow storage, two at once; the first a slow link of the lock holder's to Ceph
with the holder killed in it, so that every run has a crash while writes wait for the
cluster, which is what catches a gateway that acknowledges before librbd completes) against
three gateways of one RBD image in
network namespaces of their own, its multipath client writing and reading 4 KiB blocks; then
tests/chaos/check.py over the history and `rbd export` of the image.

Checks: run (the harness set up, injected faults and finished), acked (the client had writes
acknowledged and faults happened: a run that did nothing cannot pass), lost / dual-writer /
stale-read / corrupt / no-owner / pr-write / pr-disagree / pr-full-status / pr-ua / alua
(none of each, check.py's
categories; the client's persistent-reservation traffic runs beside its I/O), sanitizer (no report in any
gateway's log). The summary (recovery per fault kind) is in the details and in
OUT/chaos-<seed>/summary.txt. The long run: docs/testing.md, "The long forms".

Skips (77) when not root (network namespaces), Ceph, nft or ix-target is missing.
Environment: IX_BUILD, IX_OUT, IX_RESULTS; CHAOS_SEED and CHAOS_DURATION override the seed and
the seconds of faults. tests/chaos/breaks.sh runs the same seed, duration and faults (keep
them in step).
"""

import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
sys.path.insert(0, os.path.join(HERE, '..', 'chaos'))
import ixceph  # noqa: E402
import ixtest  # noqa: E402
import check  # noqa: E402

SEED = int(os.environ.get('CHAOS_SEED', '26'))
DURATION_S = float(os.environ.get('CHAOS_DURATION', '75'))
# the gateway faults: they move the lock (OSD and monitor restarts are in the long run's mix;
# with them in 75 s this seed's run never moved it); slow storage in the mix and first, on the
# holder, with the kill (chaos.py --first slow-kill)
FAULTS = 'kill,stop,part-ceph,part-client,slow,double'
FIRST = 'slow-kill'
report = ixtest.Reporter('chaos_short')


def main():
    if os.geteuid() != 0:
        print('SKIP: chaos_short needs root (network namespaces)', file=sys.stderr)
        return 77
    why = ixceph.skip_reason(tools=('nft', 'ip'))
    if why:
        print('SKIP: ' + why, file=sys.stderr)
        return 77
    out = os.path.join(ixceph.OUT, 'chaos-%d' % SEED)
    r = subprocess.run([sys.executable, os.path.join(HERE, '..', 'chaos', 'chaos.py'),
                        '--seed', str(SEED), '--duration', str(DURATION_S), '--faults', FAULTS,
                        '--first', FIRST],
                       stdout=subprocess.PIPE, text=True, timeout=DURATION_S + 900)
    print(r.stdout, flush=True)
    hist, image = os.path.join(out, 'history.jsonl'), os.path.join(out, 'image.bin')
    if not report.check('run', r.returncode in (0, 1) and os.path.exists(image),
                        'chaos.py --seed %d --duration %.0f --faults %s --first %s: exit %d '
                        '(output in %s)' % (SEED, DURATION_S, FAULTS, FIRST, r.returncode, out)):
        return 1
    res = check.check_files(hist, image)
    s = res['stats']
    acked = s['outcomes'].get('write-ok', 0)
    report.check('acked', acked > 0 and sum(s['faults'].values()) > 0,
                 '%d writes acknowledged, %d operations; faults: %s; recovery: %s' % (
                     acked, s['ops'], s['faults'],
                     '; '.join('%s p50 %.1f max %.1f s' % (k, v['p50'], v['max'])
                               for k, v in sorted(s['recovery'].items()))))
    o = s['outcomes']
    what = {'lost': '%d blocks of the image' % s['blocks_checked'],
            'stale-read': '%d reads' % o.get('read-ok', 0),
            'corrupt': '%d blocks, %d reads' % (s['blocks_checked'], o.get('read-ok', 0)),
            'dual-writer': '%d acknowledged writes, %d owner lines, %d blocklist entries'
                           % (acked, s['lock_moves'], s['blocklisted']),
            'no-owner': '%d acknowledged writes' % acked,
            'pr-write': "%d of the unregistered initiator's writes refused, %d acknowledged "
                        "(while released)" % (o.get('intruder-conflict', 0),
                                              o.get('intruder-ok', 0)),
            'pr-disagree': '%d reservation moves' % (o.get('reserve-ok', 0) +
                                                      o.get('preempt-ok', 0)),
            'alua': '%d faults judged' % s['alua_judged'],
            'pr-full-status': '%d faults judged' % s['full_judged'],
            'pr-ua': '%d preempted nexuses judged' % s['ua_judged']}
    for kind in ('lost', 'dual-writer', 'stale-read', 'corrupt', 'no-owner', 'pr-write',
                 'pr-disagree', 'pr-full-status', 'pr-ua', 'alua'):
        vs = [t for k, t in res['violations'] if k == kind]
        report.check(kind, not vs, '%d found in %s%s' % (len(vs), what[kind],
                                                          (': ' + vs[0]) if vs else ''))
    for n in res['notes']:
        print('note: ' + n)
    bad = [p for p in glob.glob(os.path.join(out, 'g*.log'))
           if ixtest.sanitizer_report(open(p, errors='replace').read())]
    report.check('sanitizer', not bad, 'sanitizer report in %s' % ', '.join(bad) if bad else
                 'no sanitizer report in the gateways\' logs')
    return 1 if report.failed else 0


if __name__ == '__main__':
    report.main(main)
