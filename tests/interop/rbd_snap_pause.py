#!/usr/bin/env python3
"""How long writes pause while a snapshot of an RBD LUN is taken, and whose the pause is
(docs/snapshots.md, "The pause"; issue 29: "a snapshot taken while a verifying writer runs
through two gateways: the snapshot's content is a state the writer acknowledged and I/O
paused for less than 1 s"), on a real single-node Ceph cluster, against librbd alone as the
reference.

Two gateways A and B serve the image "img" with rbd.exclusive_lock (A holds the lock). A
verifying writer (one iSCSI session on A, 4 KiB writes at queue depth 1, write number n into
block n mod NBLK, the number in every 16 bytes) runs while SNAPS snapshots are taken
GAP_WRITES writes apart (a few milliseconds after the monitor committed the previous one: the
worst case), alternately through A (taken there) and through B (forwarded to A). Beside
it, librbd alone: tests/ceph/librbd_writer.py (python3-rbd) writes 4 KiB at queue depth 1 into
the image "ref" holding its exclusive lock while `rbd snap create` makes SNAPS snapshots of
it (librbd forwards each to the lock's owner, the writer, which makes it). A pause is the
longest write that overlaps the snapshot call (at queue depth 1, the time between two
completions).

Both series run twice: with the monitor's paxos_propose_interval as the cluster has it (the
default, 1 s), then lowered to LOW_INTERVAL s with `ceph config set mon`. The values are read
from the running monitor (`ceph daemon mon.a config get`). Checks, per series:
  * content: every snapshot of img is a state the writer acknowledged: for some k, each block
    holds the last number below k written to it (no torn or missing block), with k at least
    the count acknowledged before the call and at most one more than when it returned; every
    write GOOD;
  * ix's own share: for the snapshots taken on A, held_ms - create_ms (the drain of the write
    in flight and the resume: everything but rbd_snap_create2) is at most the writer's
    slowest write outside the snapshots (the drain waits for one such write) plus OWN_SLACK_MS
    for the hops between threads; drain_ms likewise; and, as the writer saw it, its pause
    minus create_ms is at most twice that write (the one drained, and its own held write
    that runs after the resume) plus OWN_SLACK_MS;
  * the pause, ix (pause-*) and librbd alone (librbd-*; SKIP without python3-rbd): at most
    paxos_propose_interval + paxos_min_wait + MARGIN_S + ROUND_TRIPS times the ix writer's
    slowest write outside the snapshots, for every snapshot: the monitor's wait for its next
    commit (paxos_propose_interval after its last one, or paxos_min_wait when none was that
    recent), plus what the snapshot does besides: a few round trips (the OSD ops on the
    image's header and object map, the monitor's own commit, librbd's header-update notify
    to every watcher of the image, the RPC), each no slower than a write of this run on a
    loaded machine, and MARGIN_S for what a loaded machine adds besides;
  * under-1s: with the lowered interval (read back from the monitor) every pause, ix's and
    librbd's, is under 1 s: the acceptance's "less than 1 s" (with the default interval a
    snapshot right after another monitor update pauses librbd alone and ix about 1 s).
Then `ix-ctl snap create` through A shows the parts, through B held_ms alone (forwarded).
The gateways' logs have no sanitizer report.
"""

import json
import os
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixceph  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:rbd-snap-pause'
INI = 'iqn.2024-01.org.ix.test:rbd-snap-pause-client'
BLK = 4096
NBLK = 1024           # the verifying writer's blocks (4 MiB): it cycles through them
IMG_SIZE = '8M'
SNAPS = 8             # per series and writer, alternately through A and B for ix
GAP_WRITES = 20       # the verifying writer's writes between two snapshots
LOW_INTERVAL = 0.1    # s: the lowered paxos_propose_interval of the second series
MARGIN_S = 0.4        # the snapshot's work besides the monitor's wait (see the docstring)
ROUND_TRIPS = 4       # ... and its round trips, each counted as the slowest write seen
OWN_SLACK_MS = 30     # ix's hops between threads (main loop, helper thread, workers)
HANDOVER_MS = 2000
WRITER = os.path.join(HERE, '..', 'ceph', 'librbd_writer.py')

report = ixtest.Reporter('rbd_snap_pause')


def mon_value(cl, key):
    """The running monitor's value of key (its admin socket)."""
    return float(json.loads(cl.tool('ceph', 'daemon', 'mon.a', 'config', 'get', key))[key])


def block(n):
    return struct.pack('>IIQ', 0x69787061, n, 0x75736521) * (BLK // 16)


class Writer(threading.Thread):
    """The verifying writer: write n into block n % NBLK, in order, queue depth 1; every
    write's (start, end) is kept."""

    def __init__(self, port, first=0):
        super().__init__(daemon=True)
        self.s = X.Session(HOST, port, initiator=INI, target=IQN, timeout=30)
        self.s.login()
        self.s.lun = 0
        for _ in range(4):  # the power-on unit attention first
            st, _, _, _ = self.s.scsi(bytes(6))
            if st == 0:
                break
        self.acked = first  # the image holds the writes 0..first-1 already
        self.bad = []
        self.ivs = []
        self.stop = threading.Event()

    def run(self):
        n = self.acked
        while not self.stop.is_set():
            lba = (n % NBLK) * (BLK // 512)
            t0 = time.monotonic()
            st, _, sense, _ = self.s.scsi(
                bytes([0x2a, 0]) + struct.pack('>IBHB', lba, 0, BLK // 512, 0),
                write_data=block(n))
            self.ivs.append((t0, time.monotonic()))
            if st != 0:
                self.bad.append((n, st, X.sense3(sense) if st == 2 else None))
            n += 1
            self.acked = n


def state_of(data):
    """k when data (the image) is the state after the writes 0..k-1 (each block holds the last
    number below k written to it, zeros where none was); else what is wrong."""
    top = -1
    for b in range(NBLK):
        n = struct.unpack_from('>I', data, b * BLK + 4)[0]
        if data[b * BLK:(b + 1) * BLK] != bytes(BLK):
            top = max(top, n)
    k = top + 1
    for b in range(NBLK):
        last = b + ((k - 1 - b) // NBLK) * NBLK if k > b else None
        want = block(last) if last is not None else bytes(BLK)
        if data[b * BLK:(b + 1) * BLK] != want:
            return 'block %d: %r..., not %s' % (b, data[b * BLK:b * BLK + 16],
                                                 'number %d' % last if last is not None
                                                 else 'zeros')
    return k


def pause_of(ivs, a, b):
    """The longest write that overlaps [a, b] (s), 0 when none."""
    return max([e - s for s, e in ivs if e >= a and s <= b] or [0.0])


def outside(ivs, windows):
    """The writes that overlap none of the windows."""
    return [e - s for s, e in ivs if all(e < a or s > b for a, b in windows)]


def librbd_series(cl, py, image, tag):
    """librbd alone: the pauses of its writer during SNAPS `rbd snap create`; (pauses in ms,
    the writer's median and p99 latency in ms, error or None)."""
    p = subprocess.Popen([py, WRITER, cl.conf, 'rbd', image], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=cl.env)
    try:
        first = p.stdout.readline().strip()
        if first != 'ready':
            return [], 0, 0, 'librbd writer: %r %s' % (first, p.stderr.read()[-300:])
        time.sleep(0.3)
        windows = []
        for i in range(SNAPS):
            a = time.monotonic()
            cl.rbd('snap', 'create', '--skip-quiesce', 'rbd/%s@%s%d' % (image, tag, i))
            windows.append((a, time.monotonic()))
        time.sleep(0.2)
        out, errs = p.communicate('stop\n', timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [], 0, 0, 'librbd writer: %r %s' % (out[-200:], errs[-300:])
    ivs = res['long']
    return ([pause_of(ivs, a, b) * 1000 for a, b in windows], res['median_ms'], res['p99_ms'],
            None)


def ix_series(cl, socks, port, tag, tmp, first):
    """ix: SNAPS snapshots alternately through A and B under the verifying writer, whose
    first write is number first. Returns a dict of what was seen (see check_series)."""
    w = Writer(port, first)
    w.start()
    end = time.monotonic() + 60
    while w.acked < first + 200 and time.monotonic() < end:
        time.sleep(0.01)
    snaps = []
    for i in range(SNAPS):
        via = i % 2  # 0: A (the holder), 1: B (forwarded)
        name = '%s%d' % (tag, i)
        # GAP_WRITES writes between two snapshots: each pause is one snapshot's (a write held
        # by one and again by the next at once would count twice); the monitor committed the
        # last one a few milliseconds ago, its worst case
        mark = w.acked
        while w.acked < mark + GAP_WRITES and w.is_alive():
            time.sleep(0.001)
        before = w.acked
        a = time.monotonic()
        ans = ixceph.rpc(socks[via], 'iscsi_create_snapshot',
                         {'target': IQN, 'lun': 0, 'name': name}, timeout=120)
        b = time.monotonic()
        snaps.append({'name': name, 'via': 'AB'[via], 'window': (a, b), 'before': before,
                      'after': w.acked, 'ans': ans})
    time.sleep(0.2)
    w.stop.set()
    w.join(60)
    w.s.close()
    windows = [s['window'] for s in snaps]
    rest = sorted(outside(w.ivs, windows))
    for s in snaps:
        s['pause_ms'] = pause_of(w.ivs, *s['window']) * 1000
        path = os.path.join(tmp, 'snap.raw')
        cl.rbd('export', '--no-progress', 'rbd/img@' + s['name'], path)
        with open(path, 'rb') as f:
            s['state'] = state_of(f.read(NBLK * BLK))
        os.unlink(path)
    return {'snaps': snaps, 'bad': w.bad, 'writes': w.acked,
            'slowest_ms': rest[-1] * 1000 if rest else 0.0,
            'median_ms': rest[len(rest) // 2] * 1000 if rest else 0.0}


def check_series(label, interval, min_wait, ix, ref, ref_err):
    bound_ms = (interval + min_wait + MARGIN_S) * 1000 + ROUND_TRIPS * ix['slowest_ms']
    snaps = ix['snaps']
    res = [s['ans'].get('result', {}) for s in snaps]
    content = [s['state'] for s in snaps]
    ok_content = (not ix['bad'] and all('snapshot' in r for r in res) and
                  all(isinstance(k, int) and s['before'] <= k <= s['after'] + 1
                      for s, k in zip(snaps, content)))
    report.check('content-' + label, ok_content,
                 '%d snapshots (A, B alternately) under the verifying writer: states %s, '
                 'acknowledged before/after %s; failed writes %s; answers %s' % (
                     len(snaps), content, [(s['before'], s['after']) for s in snaps],
                     ix['bad'][:3], [json.dumps(s['ans'])[:90] for s in snaps
                                     if 'result' not in s['ans']][:2]))
    on_a = [r for r, s in zip(res, snaps) if s['via'] == 'A']
    own = [r.get('held_ms', 0) - r.get('create_ms', 0) for r in on_a]
    own_bound = ix['slowest_ms'] + OWN_SLACK_MS
    # as the writer saw it: its held write waited for the drain, the call and the resume,
    # then ran (one more write)
    seen = [s['pause_ms'] - r.get('create_ms', 0) for r, s in zip(res, snaps)
            if s['via'] == 'A']
    seen_bound = 2 * ix['slowest_ms'] + OWN_SLACK_MS
    report.check('own-share-' + label,
                 on_a and all('create_ms' in r and 'drain_ms' in r for r in on_a) and
                 all(x <= own_bound for x in own) and
                 all(r['drain_ms'] <= own_bound for r in on_a) and
                 all(x <= seen_bound for x in seen) and
                 all('create_ms' not in r for r, s in zip(res, snaps) if s['via'] == 'B'),
                 'through A: held_ms %s = drain_ms %s + create_ms %s + the rest; held - create '
                 '%s ms <= %.0f ms (the writer\'s slowest write outside the snapshots %.1f ms, '
                 'median %.1f ms, + %d ms); the writer\'s pause - create %s ms <= %.0f ms (twice '
                 'that write + %d ms); through B (forwarded): held_ms %s' % (
                     [r.get('held_ms') for r in on_a], [r.get('drain_ms') for r in on_a],
                     [r.get('create_ms') for r in on_a], own, own_bound, ix['slowest_ms'],
                     ix['median_ms'], OWN_SLACK_MS, ['%.0f' % x for x in seen], seen_bound,
                     OWN_SLACK_MS,
                     [r.get('held_ms') for r, s in zip(res, snaps) if s['via'] == 'B']))
    pauses = [s['pause_ms'] for s in snaps]
    side = ('librbd alone (rbd snap create): %s ms (its writer\'s median %.1f ms, p99 %.1f ms)'
            % (['%.0f' % x for x in ref[0]], ref[1], ref[2]) if ref_err is None
            else 'librbd alone: ' + ref_err)
    report.check('pause-' + label, len(pauses) == SNAPS and max(pauses) <= bound_ms,
                 'paxos_propose_interval %.2f s, paxos_min_wait %.2f s: bound %.0f ms (+ %.1f s '
                 '+ %d x %.1f ms); the writer\'s longest write during each snapshot, ix (A/B): '
                 '%s ms; %s' % (interval, min_wait, bound_ms, MARGIN_S, ROUND_TRIPS,
                                ix['slowest_ms'],
                         ['%s%.0f' % (s['via'], s['pause_ms']) for s in snaps], side))
    if ref_err and ref_err.startswith('python3-rbd'):
        report('SKIP', 'librbd-' + label, ref_err)
    else:
        report.check('librbd-' + label,
                     ref_err is None and len(ref[0]) == SNAPS and max(ref[0]) <= bound_ms,
                     'bound %.0f ms; %s; ix: %s ms' % (bound_ms, side,
                                                       ['%.0f' % x for x in pauses]))
    return bound_ms


def scenario(cl, tmp):
    py = ixceph.ceph_python(('rados', 'rbd'))
    cl.create_image('img', IMG_SIZE)
    cl.create_image('ref', IMG_SIZE)
    ds = []
    try:
        socks, ports, _ = ixceph.lock_pair(ds, tmp, IQN, 'img', cl.conf, 'rbd_snap_pause',
                                           host=HOST, handover_timeout_ms=HANDOVER_MS)
        written = 0
        for label, set_to in (('default', None), ('lowered', LOW_INTERVAL)):
            if set_to is not None:
                cl.tool('ceph', 'config', 'set', 'mon', 'paxos_propose_interval', str(set_to))
            interval = mon_value(cl, 'paxos_propose_interval')
            min_wait = mon_value(cl, 'paxos_min_wait')
            ix = ix_series(cl, socks, ports[0], label[0], tmp, written)
            written = ix['writes']
            ref = librbd_series(cl, py, 'ref', label[0]) if py else \
                ([], 0, 0, 'python3-rbd not importable (scripts/deps.sh --ceph)')
            bound = check_series(label, interval, min_wait, ix, ref[:3], ref[3])
            if set_to is not None:
                ixp = [s['pause_ms'] for s in ix['snaps']]
                report.check('under-1s', interval == set_to and
                             max(ixp) < 1000 and max(ref[0] or [0]) < 1000,
                             'paxos_propose_interval %.2f s (set %.2f): the longest pause, ix '
                             '%.0f ms, librbd alone %s (the bound %.0f ms)' % (
                                 interval, set_to, max(ixp),
                                 '%.0f ms' % max(ref[0]) if ref[0] else 'not measured',
                                 bound))
        # ix-ctl shows the parts where the answer has them (taken here) and held_ms alone
        # where it has not (forwarded)
        outs = [ixceph.run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock, 'snap',
                            'create', IQN, '0', 'ctl-' + name], 60)
                for sock, name in zip(socks, 'ab')]
        txt = [(r.stdout + r.stderr).strip() for r in outs]
        report.check('ix-ctl', all(r.returncode == 0 for r in outs) and
                     'drain' in txt[0] and 'rbd_snap_create2' in txt[0] and
                     'writes held' in txt[1] and 'drain' not in txt[1],
                     'ix-ctl snap create through A: %r; through B: %r' % (txt[0][:160],
                                                                          txt[1][:160]))
    finally:
        for d, name in zip(ds, 'ab'):
            d.stop()
            ixtest.check_sanitizer(report, d, 'ix-target-' + name)


def main():
    return ixceph.run_with_cluster(report, 'rbd_snap_pause', scenario)


if __name__ == '__main__':
    report.main(main)
