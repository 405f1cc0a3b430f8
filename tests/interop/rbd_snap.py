#!/usr/bin/env python3
"""Snapshots and clones of an RBD LUN through the management API (docs/snapshots.md;
docs/management.md, iscsi_*_snapshot; issue 29, item 3), on a real single-node Ceph cluster.
Ceph's own tools (`rbd export`, `rbd snap ls`) and QEMU's iscsi:// driver (libiscsi) judge.

One ix-target serves a 32 MiB image as LUN 0 (RBD) and a RAM LUN 1.
  1. crash-consistent snapshot under load: two writer sessions each write WRITES numbered 4 KiB
     blocks in order into their own region (queue depth 1, each write's number in every 16
     bytes of it); once both have passed WRITES/4 acknowledged writes, iscsi_create_snapshot
     "s1" runs. Every write is acknowledged GOOD, none fails; `rbd export rbd/img@s1` holds, for
     each writer, exactly blocks 0..k-1 of it and zeros after (no torn or missing block), with k
     at least what was acknowledged before the call and at most one more than what was
     acknowledged when it returned; the API reports how long writes were held;
  2. iscsi_get_snapshots and `ix-ctl snap ls` list s1, and `rbd snap ls` agrees;
  3. iscsi_clone_snapshot s1 into rbd/clone as LUN 2: `qemu-img convert iscsi://.../2` reads
     back exactly `rbd export rbd/img@s1`, and so does `rbd export rbd/clone`;
  4. rollback: after an overwrite, iscsi_rollback_snapshot is refused while a session uses the
     LU (naming "force"); with "force" it runs while another session polls TEST UNIT READY
     (every answer GOOD, NOT READY 04/07 or the unit attention 6/28/00, and 04/07 at least
     once: the rollback takes tens of milliseconds, a poll a fraction of one); the sessions' next
     command gets 6/28/00; `rbd export rbd/img` equals the snapshot again;
  5. delete: refused while the clone exists (naming the clone), done once the clone's LUN and
     image are gone; `rbd snap ls` is empty;
  6. errors: a bad name (-32602), an unknown snapshot (-32002), a RAM LUN (-32000), a name
     that exists (-32001);
  7. timeout: the OSD stopped (SIGSTOP) with a write in flight, iscsi_create_snapshot with
     timeout_ms 1000 answers -32006 after about 1 s naming the bound; once the OSD goes on
     the stuck write and new ones are GOOD and no snapshot was made;
  8. two more gateways of another image with rbd.exclusive_lock, A holding the lock and two
     writers on A as in 1: iscsi_create_snapshot sent to the standby B is forwarded to A,
     which holds, drains and snapshots: `rbd export rbd/grp@g1` holds a prefix of each
     writer's blocks as in 1, no write fails, `rbd snap ls` shows it; the same name again
     through B gets A's -32001; A stopped (SIGSTOP), a snapshot through B with timeout_ms 300
     answers -32006 "did not answer" after timeout_ms + rbd.handover_timeout_ms (rounded up
     to whole seconds, librados' unit for a notify's timeout);
  9. the gateways' logs have no sanitizer report.
"""

import hashlib
import json
import os
import signal
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixceph  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, OUT, run  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:rbd-snap'
INI = 'iqn.2024-01.org.ix.test:rbd-snap-client'
MIB = 1 << 20
IMAGE = 'img'
SIZE = 32 * MIB
WRITES = 400          # per writer
REGION = 4 * MIB      # each writer's region
BLK = 4096
OSD_TIMEOUT_S = 10
HANDOVER_MS = 2000    # rbd.handover_timeout_ms of the group's gateways (bounds a forward)

report = ixtest.Reporter('rbd_snap')


def session(port, lun=0, tag='', target=IQN):
    s = X.Session(HOST, port, initiator=INI + tag, target=target, timeout=30)
    s.login()
    s.lun = lun
    for _ in range(4):  # the power-on unit attention first
        if tur(s) == 'GOOD':
            break
    return s


def tur(s):
    st, _, sense, _ = s.scsi(bytes(6))
    return X.sense3(sense) if st == 2 else ('GOOD' if st == 0 else 'status 0x%02x' % st)


def block(w, k):
    return struct.pack('>IIQ', w, k, 0x69785f736e6170) * (BLK // 16)


def write(s, lba, data):
    st, _, sense, _ = s.scsi(bytes([0x2a, 0]) + struct.pack('>IBHB', lba, 0, len(data) // 512, 0),
                             write_data=data)
    return st, X.sense3(sense) if st == 2 else None


def read(s, lba, n):
    st, data, sense, _ = s.scsi(bytes([0x28, 0]) + struct.pack('>IBHB', lba, 0, n // 512, 0),
                                read_len=n)
    return st, data


class Writer(threading.Thread):
    def __init__(self, port, w, target=IQN):
        super().__init__(daemon=True)
        self.s = session(port, tag='-w%d' % w, target=target)
        self.w = w
        self.acked = 0
        self.bad = []
        self.max_lat = 0.0

    def run(self):
        base = self.w * REGION // 512
        for k in range(WRITES):
            t0 = time.monotonic()
            st, sense = write(self.s, base + k * (BLK // 512), block(self.w, k))
            self.max_lat = max(self.max_lat, time.monotonic() - t0)
            if st != 0:
                self.bad.append((k, st, sense))
            self.acked = k + 1


def prefix_of(data, w):
    """k when the writer's region holds exactly its blocks 0..k-1 and zeros after; else the
    description of what is wrong."""
    reg = data[w * REGION:w * REGION + WRITES * BLK]
    zero = bytes(BLK)
    k = 0
    while k < WRITES and reg[k * BLK:(k + 1) * BLK] == block(w, k):
        k += 1
    for j in range(k, WRITES):
        if reg[j * BLK:(j + 1) * BLK] != zero:
            return 'block %d after the prefix of %d is not zero (%r...)' % (
                j, k, reg[j * BLK:j * BLK + 16])
    return k


def sha(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def ctl(sock, *args):
    r = run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock] + list(args), 60)
    return r.returncode, (r.stdout + r.stderr).strip()


def rpc(sock, method, **params):
    return ixceph.rpc(sock, method, dict({'target': IQN, 'lun': 0}, **params), timeout=120)


def err(ans):
    e = ans.get('error') or {}
    return e.get('code'), e.get('message', '')


def snap_names(cl):
    return [s['name'] for s in json.loads(cl.rbd('snap', 'ls', '--format', 'json',
                                                 'rbd/' + IMAGE))]


def step_snapshot(cl, sock, port, tmp):
    ws = [Writer(port, w) for w in range(2)]
    for w in ws:
        w.start()
    end = time.monotonic() + 120
    while min(w.acked for w in ws) < WRITES // 4 and time.monotonic() < end:
        time.sleep(0.005)
    before = [w.acked for w in ws]
    t0 = time.monotonic()
    ans = rpc(sock, 'iscsi_create_snapshot', name='s1')
    took = time.monotonic() - t0
    after = [w.acked for w in ws]
    for w in ws:
        w.join(300)
    snap = cl.export(IMAGE + '@s1', os.path.join(tmp, 's1.raw'))
    with open(snap, 'rb') as f:
        data = f.read()
    ks = [prefix_of(data, w) for w in range(2)]
    ok = all(isinstance(k, int) and before[i] <= k <= after[i] + 1 for i, k in enumerate(ks))
    for w in ws:
        w.s.close()
    report.check('snapshot-under-load',
                 ans.get('result', {}).get('snapshot') == 's1' and ok and
                 all(not w.bad and w.acked == WRITES for w in ws),
                 'iscsi_create_snapshot s1: %s in %.0f ms; acknowledged before: %s, when it '
                 'returned: %s; rbd export img@s1 holds the prefixes %s; writers: %s acked, '
                 'failures %s, slowest write %.0f ms' % (
                     json.dumps(ans)[:160], took * 1000, before, after, ks,
                     [w.acked for w in ws], [w.bad[:2] for w in ws],
                     max(w.max_lat for w in ws) * 1000))
    return snap


def step_list(cl, sock):
    ans = rpc(sock, 'iscsi_get_snapshots')
    names = [s.get('name') for s in ans.get('result', [])]
    rc, out = ctl(sock, 'snap', 'ls', IQN, '0')
    ceph = snap_names(cl)
    report.check('list', names == ['s1'] and ceph == ['s1'] and rc == 0 and
                 out.startswith('s1 '),
                 'iscsi_get_snapshots: %s; ix-ctl snap ls: exit %d %r; rbd snap ls: %s' % (
                     json.dumps(ans)[:200], rc, out[:100], ceph))


def step_clone(cl, sock, port, tmp, snap):
    ans = rpc(sock, 'iscsi_clone_snapshot', name='s1', image='clone', new_lun=2)
    out = os.path.join(tmp, 'clone-iscsi.raw')
    r = run(['qemu-img', 'convert', '-O', 'raw',
             'iscsi://%s:%d/%s/2' % (HOST, port, IQN), out], 120)
    via_iscsi = sha(out) if r.returncode == 0 else 'qemu-img: %s' % r.stderr.strip()[-200:]
    via_ceph = sha(cl.export('clone', os.path.join(tmp, 'clone-ceph.raw')))
    want = sha(snap)
    report.check('clone', ans.get('result', {}).get('lun') == 2 and via_iscsi == want and
                 via_ceph == want,
                 'iscsi_clone_snapshot s1 -> rbd/clone LUN 2: %s; sha256 of qemu-img convert '
                 'iscsi://.../2: %s, of rbd export rbd/clone: %s, of img@s1: %s' % (
                     json.dumps(ans)[:200], via_iscsi[:16], via_ceph[:16], want[:16]))


def step_rollback(cl, sock, port, tmp, snap):
    s = session(port, tag='-rb')
    p = session(port, tag='-poll')
    st, _ = write(s, 0, b'\xab' * BLK)
    refused = rpc(sock, 'iscsi_rollback_snapshot', name='s1')
    seen = []
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            seen.append(tur(p))

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    time.sleep(0.05)
    ans = rpc(sock, 'iscsi_rollback_snapshot', name='s1', force=True)
    time.sleep(0.05)
    stop.set()
    th.join(30)
    after_s = tur(s)
    after_p = tur(p)
    rst, got = read(s, 0, BLK)
    with open(snap, 'rb') as f:
        want0 = f.read(BLK)
    now = sha(cl.export(IMAGE, os.path.join(tmp, 'rolled.raw')))
    kinds = sorted(set(str(x) for x in seen))
    allowed = {'GOOD', str((2, 4, 7)), str((6, 0x28, 0))}
    ua_p = (6, 0x28, 0) in seen or after_p == (6, 0x28, 0)
    s.close()
    p.close()
    c, m = err(refused)
    report.check('rollback', st == 0 and c == -32003 and 'force' in m and
                 ans.get('result', {}).get('snapshot') == 's1' and after_s == (6, 0x28, 0) and
                 ua_p and set(kinds) <= allowed and (2, 4, 7) in seen and rst == 0 and
                 got == want0 and
                 now == sha(snap),
                 'overwrite: status %d; without force: %s %r; with force: %s; polling TUR saw '
                 '%s (%d answers, %d NOT READY 04/07); next TUR: %s and %s; block 0 %s the '
                 'snapshot\'s; rbd export img %s img@s1' % (
                     st, c, m[:120], json.dumps(ans)[:120], kinds, len(seen),
                     seen.count((2, 4, 7)), after_s, after_p,
                     'is' if got == want0 else 'is not', 'equals' if now == sha(snap)
                     else 'differs from'))


def step_delete(cl, sock):
    busy = rpc(sock, 'iscsi_delete_snapshot', name='s1')
    gone = ixceph.rpc(sock, 'iscsi_delete_lun', {'target': IQN, 'lun': 2})
    r = cl.try_tool('rbd', 'rm', '--no-progress', 'rbd/clone')
    ans = rpc(sock, 'iscsi_delete_snapshot', name='s1')
    ceph = snap_names(cl)
    c, m = err(busy)
    report.check('delete', c == -32003 and 'clone' in m and 'result' in gone and
                 r.returncode == 0 and ans.get('result', {}).get('deleted') is True and
                 ceph == [],
                 'delete with the clone: %s %r; LUN 2 deleted: %s; rbd rm clone: exit %d; '
                 'delete: %s; rbd snap ls: %s' % (c, m[:160], 'result' in gone, r.returncode,
                                                  json.dumps(ans)[:100], ceph))


def step_errors(cl, sock):
    bad = err(rpc(sock, 'iscsi_create_snapshot', name='a@b'))
    unknown = err(rpc(sock, 'iscsi_delete_snapshot', name='nosuch'))
    ram = err(ixceph.rpc(sock, 'iscsi_create_snapshot', {'target': IQN, 'lun': 1, 'name': 's'}))
    first = rpc(sock, 'iscsi_create_snapshot', name='s3')
    dup = err(rpc(sock, 'iscsi_create_snapshot', name='s3'))
    rpc(sock, 'iscsi_delete_snapshot', name='s3')
    report.check('errors', bad[0] == -32602 and unknown[0] == -32002 and
                 'no snapshot named' in unknown[1] and ram[0] == -32000 and
                 'only RBD' in ram[1] and 'result' in first and dup[0] == -32001 and
                 'exists already' in dup[1],
                 'bad name: %s; unknown: %s; RAM LUN: %s; s3 twice: %s' % (bad, unknown, ram, dup))


def step_timeout(cl, sock, port):
    s = session(port, tag='-t')
    with open(os.path.join(cl.path, 'run', 'osd.0.pid')) as f:
        osd = int(f.read().strip())
    res = {}

    def stuck():
        res['w'] = write(s, 8, b'\x5a' * BLK)

    os.kill(osd, signal.SIGSTOP)
    try:
        th = threading.Thread(target=stuck, daemon=True)
        th.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        ans = rpc(sock, 'iscsi_create_snapshot', name='s4', timeout_ms=1000)
        took = time.monotonic() - t0
    finally:
        os.kill(osd, signal.SIGCONT)
    th.join(OSD_TIMEOUT_S + 20)
    after = write(s, 16, b'\x5b' * BLK)
    s.close()
    # the snapshot the cluster made after the deadline is deleted by the daemon once it
    # learns of it (after the OSD went on): wait for that, bounded by the OSD timeout
    end = time.monotonic() + OSD_TIMEOUT_S + 10
    ceph = snap_names(cl)
    while 's4' in ceph and time.monotonic() < end:
        time.sleep(0.2)
        ceph = snap_names(cl)
    c, m = err(ans)
    report.check('timeout', c == -32006 and '1000 ms' in m and 0.9 <= took < 5 and
                 res.get('w', (None,))[0] == 0 and after[0] == 0 and 's4' not in ceph,
                 'OSD stopped, a write in flight: iscsi_create_snapshot timeout_ms 1000: %s %r '
                 'after %.2f s; the stuck write once the OSD went on: %s; a new write: %s; rbd '
                 'snap ls: %s' % (c, m[:160], took, res.get('w'), after, ceph))


def step_group(cl, tmp):
    """Two gateways of one image with the managed exclusive lock, A holding it, writers on
    A: a snapshot sent to the standby B is taken by A (held and drained there) and holds a
    prefix of each writer's blocks; the holder's errors reach B's caller; a holder that does
    not answer (stopped) gives B's caller -32006 within its bound, never a hang."""
    iqn = IQN + '-grp'
    cl.create_image('grp', '16M')
    ds = []
    try:
        socks, ports, sts = ixceph.lock_pair(ds, tmp, iqn, 'grp', cl.conf, 'rbd_snap',
                                             prefix='g', host=HOST,
                                             osd_op_timeout_s=OSD_TIMEOUT_S,
                                             handover_timeout_ms=HANDOVER_MS)
        ws = [Writer(ports[0], w, iqn) for w in range(2)]
        for w in ws:
            w.start()
        end = time.monotonic() + 120
        while min(w.acked for w in ws) < WRITES // 4 and time.monotonic() < end:
            time.sleep(0.005)
        before = [w.acked for w in ws]
        standby = ixceph.rpc(socks[1], 'iscsi_create_snapshot',
                             {'target': iqn, 'lun': 0, 'name': 'g1'}, timeout=120)
        after = [w.acked for w in ws]
        for w in ws:
            w.join(120)
            w.s.close()
        dup = ixceph.rpc(socks[1], 'iscsi_create_snapshot',
                         {'target': iqn, 'lun': 0, 'name': 'g1'}, timeout=120)
        owner = ixceph.rpc(socks[0], 'iscsi_create_snapshot',
                           {'target': iqn, 'lun': 0, 'name': 'g2'})
        ceph = [x['name'] for x in json.loads(cl.rbd('snap', 'ls', '--format', 'json',
                                                      'rbd/grp'))]
        path = os.path.join(tmp, 'grp-g1.raw')
        cl.rbd('export', 'rbd/grp@g1', path)
        with open(path, 'rb') as f:
            data = f.read()
        ks = [prefix_of(data, w) for w in range(2)]
        bad = [b for w in ws for b in w.bad]
        held = standby.get('result', {}).get('held_ms')
        prefix = all(isinstance(k, int) and before[w] <= k <= after[w] + 1
                     for w, k in enumerate(ks))
        c, m = err(dup)
        report.check('group-forward', sts == ['owner', 'standby'] and
                     standby.get('result', {}).get('snapshot') == 'g1' and
                     isinstance(held, int) and prefix and not bad and c == -32001 and
                     owner.get('result', {}).get('snapshot') == 'g2' and ceph == ['g1', 'g2'],
                     'lock states A, B: %s; through B (standby) under load: %s; acked before '
                     '%s, after %s, in g1 %s; failed writes %s; g1 again through B: %s %r; '
                     'g2 through A: %s; rbd snap ls: %s' % (
                         sts, json.dumps(standby)[:160], before, after, ks, bad[:3], c,
                         m[:120], json.dumps(owner)[:100], ceph))
        # the holder stopped: B's caller gets -32006 within timeout_ms + the hand-over bound
        os.kill(ds[0].pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            stuck = ixceph.rpc(socks[1], 'iscsi_create_snapshot',
                               {'target': iqn, 'lun': 0, 'name': 'g3', 'timeout_ms': 300},
                               timeout=60)
            took = time.monotonic() - t0
        finally:
            os.kill(ds[0].pid, signal.SIGCONT)
        # A runs the request once it goes on (too late for B): let it end before A stops
        # (a daemon stopped during a snapshot does not wait for it: snapshots.md, Not yet)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            with open(ds[0].log_path, errors='replace') as f:
                if 'snapshot g3 for client' in f.read():
                    break
            time.sleep(0.1)
        c, m = err(stuck)
        bound = -(-(300 + HANDOVER_MS) // 1000)  # whole seconds (librados' notify timeout)
        report.check('group-holder-silent', c == -32006 and 'did not answer' in m and
                     bound * 0.9 <= took < bound + 3,
                     'the holder stopped: through B with timeout_ms 300: %s %r after %.2f s '
                     '(bound %.1f s)' % (c, m[:160], took, bound))
        group_rollback(iqn, socks, ports)
        group_rollback_holder_stopped(iqn, socks, ports, ds)
    finally:
        for d, name in zip(ds, 'ab'):
            d.stop()
            ixtest.check_sanitizer(report, d, 'ix-target-g' + name)


def poll_until_ua(s, seen, stop, secs=15):
    """TEST UNIT READY on s into seen until stop is set and the MEDIUM MAY HAVE CHANGED
    unit attention came (or secs passed after stop)."""
    end = None
    while True:
        seen.append(tur(s))
        if stop.is_set():
            end = end or time.monotonic() + secs
            if (6, 0x28, 0) in seen or time.monotonic() > end:
                return


def group_rollback(iqn, socks, ports):
    """A rollback through the holder A of an image that B also serves: with a session on B
    only and no force it is refused, naming B, and B's LU comes back with nothing changed
    (no unit attention); forced, both A's and B's LUs answer NOT READY 04/07 during it and
    MEDIUM MAY HAVE CHANGED after."""
    st_a = ixceph.wait_lock(socks[0], iqn, 'owner')
    pb = session(ports[1], tag='-pollb', target=iqn)
    t0 = time.monotonic()
    refused = ixceph.rpc(socks[0], 'iscsi_rollback_snapshot',
                         {'target': iqn, 'lun': 0, 'name': 'g1'}, timeout=120)
    took = time.monotonic() - t0
    seen_r = []
    end = time.monotonic() + 15
    while time.monotonic() < end:  # the online notice is on its way: B's LU comes back
        seen_r.append(tur(pb))
        if seen_r[-1] != (2, 4, 7):
            break
    c, m = err(refused)
    b_name = '%s:%d' % (HOST, ports[1])
    report.check('group-rollback-refused',
                 st_a == 'owner' and c == -32003 and b_name in m and 'force' in m and
                 seen_r[-1] == 'GOOD',
                 'A %s; a session on B only, rollback through A without force: %s %r after '
                 '%.2f s; then B\'s TUR: %s' % (st_a, c, m[:200], took, seen_r[-3:]))
    pa = session(ports[0], tag='-polla', target=iqn)
    seen = {'a': [], 'b': []}
    stop = threading.Event()
    ths = [threading.Thread(target=poll_until_ua, args=(x, seen[k], stop), daemon=True)
           for k, x in (('a', pa), ('b', pb))]
    for th in ths:
        th.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    ans = ixceph.rpc(socks[0], 'iscsi_rollback_snapshot',
                     {'target': iqn, 'lun': 0, 'name': 'g1', 'force': True}, timeout=120)
    took = time.monotonic() - t0
    stop.set()
    for th in ths:
        th.join(30)
    pa.close()
    pb.close()
    allowed = {'GOOD', (2, 4, 7), (6, 0x28, 0)}
    ok = all((2, 4, 7) in v and (6, 0x28, 0) in v and
             v.index((2, 4, 7)) < len(v) - 1 - v[::-1].index((6, 0x28, 0)) and
             set(v) <= allowed for v in seen.values())
    report.check('group-rollback-forced',
                 ans.get('result', {}).get('snapshot') == 'g1' and ok,
                 'forced through A: %s after %.2f s; polling TUR on A saw %s (%d NOT READY '
                 '04/07), on B %s (%d NOT READY 04/07)' % (
                     json.dumps(ans)[:120], took, sorted(set(map(str, seen['a']))),
                     seen['a'].count((2, 4, 7)), sorted(set(map(str, seen['b']))),
                     seen['b'].count((2, 4, 7))))
    # sent to the standby B: forwarded to A, which tells B (offline, then online)
    pb = session(ports[1], tag='-pollb2', target=iqn)
    seen_b, stop = [], threading.Event()
    th = threading.Thread(target=poll_until_ua, args=(pb, seen_b, stop), daemon=True)
    th.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    fwd = ixceph.rpc(socks[1], 'iscsi_rollback_snapshot',
                     {'target': iqn, 'lun': 0, 'name': 'g1', 'force': True}, timeout=120)
    took = time.monotonic() - t0
    stop.set()
    th.join(30)
    pb.close()
    ok = ((2, 4, 7) in seen_b and (6, 0x28, 0) in seen_b and
          seen_b.index((2, 4, 7)) < len(seen_b) - 1 - seen_b[::-1].index((6, 0x28, 0)) and
          set(seen_b) <= allowed)
    report.check('group-rollback-forwarded',
                 fwd.get('result', {}).get('snapshot') == 'g1' and ok,
                 'forced through the standby B: %s after %.2f s; polling TUR on B saw %s '
                 '(%d NOT READY 04/07)' % (json.dumps(fwd)[:120], took,
                                           sorted(set(map(str, seen_b))),
                                           seen_b.count((2, 4, 7))))


def group_rollback_holder_stopped(iqn, socks, ports, ds):
    """The holder A stopped (SIGSTOP) in the middle of a forced rollback, after it told B to go
    offline: B does not stay offline, it comes back by itself with MEDIUM MAY HAVE CHANGED once
    its own bound (timeout_ms + rbd.handover_timeout_ms) has passed, while A is still stopped.
    The window between A's two notices is short (the rollback of a small image), so A is
    stopped as soon as B answers NOT READY 04/07; a try in which A had already said "online"
    (B's unit attention came before A was stopped) is repeated, three tries at most."""
    timeout_ms = 500
    window = (timeout_ms + HANDOVER_MS) / 1000.0
    detail = 'no try'
    for attempt in range(3):
        pb = session(ports[1], tag='-pollb3%d' % attempt, target=iqn)
        seen, times, stopped = [], [], {}
        done = threading.Event()
        res = {}

        def call():
            res['ans'] = ixceph.rpc(socks[0], 'iscsi_rollback_snapshot',
                                    {'target': iqn, 'lun': 0, 'name': 'g1', 'force': True,
                                     'timeout_ms': timeout_ms}, timeout=120)
            done.set()

        th = threading.Thread(target=call, daemon=True)
        th.start()
        end = time.monotonic() + 30
        try:
            while time.monotonic() < end:
                r = tur(pb)
                seen.append(r)
                times.append(time.monotonic())
                if r == (2, 4, 7) and 'at' not in stopped:
                    os.kill(ds[0].pid, signal.SIGSTOP)
                    stopped['at'] = time.monotonic()
                if r == (6, 0x28, 0) or (done.is_set() and 'at' not in stopped):
                    break
        finally:
            if 'at' in stopped:
                os.kill(ds[0].pid, signal.SIGCONT)
        th.join(60)
        pb.close()
        with open(ds[1].log_path, errors='replace') as f:
            by_itself = 'back online by itself' in f.read()
        ua = (6, 0x28, 0) in seen
        first_off = times[seen.index((2, 4, 7))] if (2, 4, 7) in seen else None
        ua_at = times[seen.index((6, 0x28, 0))] if ua else None
        detail = ('try %d: B saw %s; A stopped %s after B\'s first 04/07; B\'s unit attention '
                  '%s after it (its window %.1f s); "back online by itself" in B\'s log: %s; '
                  'A\'s answer once resumed: %s' % (
                      attempt + 1, sorted(set(map(str, seen))),
                      '%.3f s' % (stopped['at'] - first_off) if 'at' in stopped else 'never',
                      '%.2f s' % (ua_at - first_off) if ua and first_off else 'never', window,
                      by_itself, json.dumps(res.get('ans'))[:100]))
        if 'at' in stopped and ua and ua_at - first_off < window * 0.9:
            continue  # A had finished before it was stopped: its own "online" came
        break
    ok = ('at' in stopped and ua and by_itself and
          window * 0.9 <= ua_at - first_off < window + 5 and ua_at > stopped['at'])
    report.check('group-rollback-holder-stopped', ok, detail)


def scenario(cl, tmp):
    cl.create_image(IMAGE, '32M')
    sock = os.path.join(tmp, 'a.sock')
    port = ixtest.free_port()
    cfg = ixceph.write_config(
        os.path.join(tmp, 'a.json'), IQN, port,
        [ixceph.rbd_lun(0, IMAGE, cl.conf, osd_op_timeout_s=OSD_TIMEOUT_S),
         {'lun': 1, 'backend': 'ram', 'size': '1M'}],
        host=HOST, glob={'mgmt_socket': sock})
    d = ixtest.Daemon(cfg, 'rbd_snap.ix-target.log', BUILD, OUT)
    try:
        snap = ixceph.step(report, 'snapshot-under-load', step_snapshot, cl, sock, port, tmp)
        ixceph.step(report, 'list', step_list, cl, sock)
        if snap:
            ixceph.step(report, 'clone', step_clone, cl, sock, port, tmp, snap)
            ixceph.step(report, 'rollback', step_rollback, cl, sock, port, tmp, snap)
        ixceph.step(report, 'delete', step_delete, cl, sock)
        ixceph.step(report, 'errors', step_errors, cl, sock)
        ixceph.step(report, 'timeout', step_timeout, cl, sock, port)
    finally:
        d.stop()
        ixtest.check_sanitizer(report, d, 'ix-target')
    ixceph.step(report, 'group-forward', step_group, cl, tmp)


def main():
    return ixceph.run_with_cluster(report, 'rbd_snap', scenario, tools=('qemu-img',))


if __name__ == '__main__':
    report.main(main)
