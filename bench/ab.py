#!/usr/bin/env python3
"""A/B of two ix builds on the data path: ix-bench 4 KiB random read and random write at QD 32
against each build's ix-target serving one RAM LUN on loopback, rounds alternating which build
goes first. Prints every run's IOPS, then per workload the median ratio B/A over rounds and its
spread (min..max of the per-round ratios), and the load average before and after.

  bench/ab.py --a /tmp/ix-main-build --b build-release [--rounds 3] [--time 10s]

Both builds' own tools are used (each ix-bench talks to its own ix-target). python3 stdlib only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixtest  # noqa: E402

IQN = 'iqn.2026-11.io.ix:ab'
WORKLOADS = ['randread', 'randwrite']


def run_one(build, rw, secs, tmp):
    port = ixtest.free_port()
    cfg = os.path.join(tmp, 'ab.json')
    with open(cfg, 'w') as f:
        json.dump({'portals': [{'name': 'p', 'address': '127.0.0.1', 'port': port}],
                   'targets': [{'name': IQN, 'luns': [{'lun': 0, 'backend': 'ram',
                                                       'size': '1G'}]}]}, f)
    d = ixtest.Daemon(cfg, 'ab.target.log', build=build, out=tmp)
    try:
        p = subprocess.run([os.path.join(build, 'tools', 'ix-bench'), '-p', '127.0.0.1:%d' % port,
                            '-T', IQN, '--rw', rw, '--bs', '4k', '-q', '32', '--time', secs,
                            '--json', '--quiet', '--seed', '1'],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError('ix-bench: %s' % p.stderr[-300:])
        return json.loads(p.stdout)['iops']
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--a', required=True, help='build directory A (the baseline)')
    ap.add_argument('--b', required=True, help='build directory B')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--time', default='10s')
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='ix-ab-')
    load0 = os.getloadavg()
    res = {(b, w): [] for b in 'AB' for w in WORKLOADS}
    for r in range(a.rounds):
        order = ['A', 'B'] if r % 2 == 0 else ['B', 'A']
        for w in WORKLOADS:
            for b in order:
                iops = run_one(a.a if b == 'A' else a.b, w, a.time, tmp)
                res[(b, w)].append(iops)
                print('round %d %-9s %s %10.0f IOPS' % (r + 1, w, b, iops), flush=True)
    load1 = os.getloadavg()
    for w in WORKLOADS:
        ratios = [bv / av for av, bv in zip(res[('A', w)], res[('B', w)])]
        print('%-9s A median %8.0f  B median %8.0f  B/A median %.3f  spread %.3f..%.3f' %
              (w, statistics.median(res[('A', w)]), statistics.median(res[('B', w)]),
               statistics.median(ratios), min(ratios), max(ratios)))
    print('load average before %.2f %.2f %.2f, after %.2f %.2f %.2f' % (load0 + load1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
