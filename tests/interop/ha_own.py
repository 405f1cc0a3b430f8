#!/usr/bin/env python3
"""Ownership of RBD LUs shared by several ix gateways (docs/ha.md, "Ownership and failover"):
the managed exclusive lock is watched (rbd.lock_check_ms), so an idle gateway learns that it
lost it. Its own memstore single-node cluster (tests/ceph/cluster.sh); every gateway is an
ix-target with one portal (tpgt = its ALUA group id) and one target whose LUN 0 is the RBD
image "own0" with exclusive_lock; each lists the others' groups by relative port.

  three: A, B and C (groups 1, 2, 3) on one image: all three report the holder's group
     active/optimized and the others standby (the holder's owner record, ix.own.<image>, names
     its groups), before and after C breaks A's lock (A, fenced, reports its group unavailable
     and cannot read the cluster any more: the others as they were); the record says
     "groups 3"; after `rados put` of garbage over it, C writes it again within two lock
     checks, logging it, and every gateway keeps reporting C's group.
  idle: A owns, B standby; `iscsi_break_rbd_lock` on B breaks A's lock (blocklisting A) while
     A receives nothing; A's management API says "fenced" within lock_check_ms plus slack,
     A's first command then gets UNIT ATTENTION 2A/06 and A's REPORT TARGET PORT GROUPS says
     group 1 unavailable, group 2 active/optimized.

Skips (77) only when Ceph or ix-target is missing. Environment: IX_BUILD, IX_OUT, IX_RESULTS.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

HOST = '127.0.0.1'
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
OUT = os.environ.get('IX_OUT', os.path.join(ROOT, 'tests', 'out'))
CLUSTER_SH = os.path.join(ROOT, 'tests', 'ceph', 'cluster.sh')
IQN = 'iqn.2024-01.org.ix.test:own'
INITIATOR = 'iqn.2024-01.org.ix.test:own-client'
BS = 512
CHECK_MS = 1000   # rbd.lock_check_ms (the default)
SLACK_S = 1.5     # a loaded machine
IMAGES = ['own0']
AO, ANO, STANDBY, UNAVAIL, TRANS = 0, 1, 2, 3, 0xf
NAMES = {AO: 'AO', ANO: 'ANO', STANDBY: 'standby', UNAVAIL: 'unavailable', TRANS: 'trans'}
report = ixtest.Reporter('ha_own')


def run(cmd, timeout, **kw):
    return subprocess.run(cmd, timeout=timeout, capture_output=True, text=True, **kw)


def rpc(sock, method, params):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sock)
    s.sendall(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': method,
                          'params': params}).encode() + b'\n')
    buf = b''
    while not buf.endswith(b'\n'):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return json.loads(buf)


def sense3(sense):
    if len(sense) < 14:
        return None
    if sense[0] & 0x7f in (0x72, 0x73):
        return sense[1] & 0xf, sense[2], sense[3]
    return sense[2] & 0xf, sense[12], sense[13]


def fmt(st, sense):
    k = sense3(sense) if st == 2 else None
    return 'status 0x%02x%s' % (st, ' sense %x/%02x/%02x' % k if k else '')


def check(name, ok, detail):
    report('PASS' if ok else 'FAIL', name, detail)
    return ok


def show(groups):
    if not isinstance(groups, dict):
        return str(groups)
    return ' '.join('g%d=%s' % (g, NAMES.get(s, hex(s))) for g, s in sorted(groups.items()))


class Gateway:
    """One ix-target: its portal (tpgt = group), management socket and one session."""

    def __init__(self, tmp, conf, name, group, groups, port=None):
        self.name, self.group, self.tmp, self.conf = name, group, tmp, conf
        self.port = port or ixtest.free_port()
        self.sock = os.path.join(tmp, name + '.sock')
        alua = [{'id': group, 'state': 'standby', 'portals': ['p']}]
        alua += [{'id': g, 'state': 'standby', 'relative_ports': [g]}
                 for g in groups if g != group]
        luns = [{'lun': i, 'backend': 'rbd', 'thin': True,
                 'naa_id': '0x6001405a0f0e%04x' % i, 'serial': 'ixown%d' % i,
                 'rbd': {'pool': 'rbd', 'image': img, 'conf': conf, 'exclusive_lock': True,
                         'osd_op_timeout_s': 5}} for i, img in enumerate(IMAGES)]
        cfg = {'global': {'mgmt_socket': self.sock},
               'portals': [{'name': 'p', 'address': HOST, 'port': self.port, 'tpgt': group}],
               'targets': [{'name': IQN, 'luns': luns,
                            'alua': {'implicit_failover_ms': 0, 'groups': alua}}]}
        path = os.path.join(tmp, name + '.json')
        with open(path, 'w') as f:
            json.dump(cfg, f)
        self.d = ixtest.Daemon(path, 'ha_own.ix-target-%s.log' % name, BUILD, OUT)
        self.s = X.Session(HOST, self.port, initiator=INITIATOR, target=IQN, timeout=30)
        self.s.login()
        self.s.lun = 0

    def lock(self, lun=0):
        r = rpc(self.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': lun, 'dry_run': True})
        return r.get('result', {}).get('state'), r.get('result', {}).get('reason')

    def wait_lock(self, want, secs=30, lun=0):
        end = time.monotonic() + secs
        while True:
            st = self.lock(lun)[0]
            if (st == want if want else st not in (None, 'acquiring')) or \
                    time.monotonic() > end:
                return st
            time.sleep(0.1)

    def break_lock(self, lun=0):
        return rpc(self.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': lun})

    def raw(self, cdb, **kw):
        """One command, unit attentions included: (status, data, sense)."""
        st, data, sense, _ = self.s.scsi(bytes(cdb), **kw)
        return st, data, sense

    def cmd(self, cdb, **kw):
        st, data, sense, _ = self.s.scsi_retry_ua(bytes(cdb), **kw)
        return st, data, sense

    def write(self, lba, data):
        cdb = bytes([0x8a, 0x08]) + struct.pack('>QIBB', lba, len(data) // BS, 0, 0)
        st, _, sense = self.cmd(cdb, write_data=data)
        return st, sense

    def rtpg(self, raw=False):
        """{group: state} or the failure."""
        cdb = [0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0]
        st, d, sense = (self.raw if raw else self.cmd)(cdb, read_len=1024)
        if st != 0:
            return fmt(st, sense)
        n, off, out = struct.unpack('>I', d[:4])[0] + 4, 4, {}
        while off + 8 <= n:
            out[struct.unpack('>H', d[off + 2:off + 4])[0]] = d[off] & 0x0f
            off += 8 + 4 * d[off + 7]
        return out

    def close(self):
        try:
            self.s.close()
        except Exception:  # noqa: BLE001
            pass

    def stop(self):
        self.close()
        if self.d.p.poll() is None:
            self.d.p.send_signal(signal.SIGCONT)
            self.d.stop()
        text = self.d.output()
        if 'ERROR: AddressSanitizer' in text or 'runtime error:' in text:
            report('FAIL', 'sanitizer-' + self.name, 'sanitizer report in ' + self.d.log_path)


def test_idle(tmp, conf, gws):
    """An idle owner learns it lost the lock within lock_check_ms."""
    a = gws['a'] = Gateway(tmp, conf, 'a', 1, [1, 2])
    st_a = a.wait_lock(None)
    b = gws['b'] = Gateway(tmp, conf, 'b', 2, [1, 2])
    st_b = b.wait_lock(None)
    ra, rb = a.rtpg(), b.rtpg()
    if not check('idle-setup', st_a == 'owner' and st_b == 'standby' and
                 ra == {1: AO, 2: STANDBY} and rb == {1: AO, 2: STANDBY},
                 'A %s: %s; B %s: %s' % (st_a, show(ra), st_b, show(rb))):
        return
    for _ in range(5):  # no unit attention pending on A's nexus: what comes next is new
        if a.raw([0, 0, 0, 0, 0, 0])[0] == 0:
            break
    r = b.break_lock()
    t0 = time.monotonic()
    st = a.wait_lock('fenced', CHECK_MS / 1000 + SLACK_S + 5)
    took = time.monotonic() - t0
    check('idle-learns', st == 'fenced' and took <= CHECK_MS / 1000 + SLACK_S,
          'B broke the lock (%s); A, receiving no command, says %s after %.2f s (lock_check_ms '
          '%d, allowed %.1f s): %s' % (r.get('result', r.get('error')), st, took, CHECK_MS,
                                       CHECK_MS / 1000 + SLACK_S, a.lock()[1]))
    st, _, sense = a.raw([0, 0, 0, 0, 0, 0])
    ra = a.rtpg(raw=True)
    check('idle-ua-rtpg', st == 2 and sense3(sense) == (6, 0x2a, 0x06) and
          ra == {1: UNAVAIL, 2: AO},
          "A's first command (TEST UNIT READY): %s (want 6/2a/06); A's REPORT TARGET PORT "
          "GROUPS then: %s" % (fmt(st, sense), show(ra)))


def wait_rtpg(gws, want, secs):
    """Poll REPORT TARGET PORT GROUPS through every gateway of want ({name: {group: state}})
    until each says what it should: (seconds, {name: last answer})."""
    t0, got = time.monotonic(), {}
    while True:
        got = {n: gws[n].rtpg() for n in want}
        if got == want or time.monotonic() - t0 > secs:
            return time.monotonic() - t0, got
        time.sleep(0.1)


def shows(got):
    return '; '.join('%s %s' % (n.upper(), show(g)) for n, g in sorted(got.items()))


def test_three(tmp, conf, gws, env):
    """Three gateways on one image: each reports the holder's group active/optimized, from the
    owner record, also after the lock moved; a damaged record is written again by its
    holder."""
    groups = [1, 2, 3]
    for n, g in (('a', 1), ('b', 2), ('c', 3)):
        gws[n] = Gateway(tmp, conf, n, g, groups)
        gws[n].wait_lock(None)
    states = {n: gws[n].lock()[0] for n in 'abc'}
    took, got = wait_rtpg(gws, {n: {1: AO, 2: STANDBY, 3: STANDBY} for n in 'abc'},
                          CHECK_MS / 1000 * 2 + SLACK_S)
    check('three-owner-a', states == {'a': 'owner', 'b': 'standby', 'c': 'standby'} and
          all(g == {1: AO, 2: STANDBY, 3: STANDBY} for g in got.values()),
          'locks %s; after %.1f s: %s' % (states, took, shows(got)))
    r = gws['c'].break_lock()
    # A is fenced: the cluster refuses it, so it cannot read who holds the lock now (it
    # leaves the other groups as they were)
    want = {'a': {1: UNAVAIL, 2: STANDBY, 3: STANDBY}, 'b': {1: STANDBY, 2: STANDBY, 3: AO},
            'c': {1: STANDBY, 2: STANDBY, 3: AO}}
    took, got = wait_rtpg(gws, want, CHECK_MS / 1000 * 2 + SLACK_S + 5)
    check('three-owner-c', got == want and took <= CHECK_MS / 1000 * 2 + SLACK_S,
          'C broke the lock (%s); after %.1f s (allowed two lock checks and %.1f s): %s'
          % (r.get('result', r.get('error')), took, SLACK_S, shows(got)))
    rec = run(['rados', '-p', 'rbd', 'get', 'ix.own.' + IMAGES[0], '-'], 30, env=env)
    check('three-record', rec.returncode == 0 and 'groups 3\nports 3\n' in rec.stdout and
          rec.stdout.startswith('ix-own 1\n'),
          'rados get ix.own.%s: %r' % (IMAGES[0], rec.stdout[:200]))
    junk = os.path.join(tmp, 'junk')
    with open(junk, 'wb') as f:
        f.write(b'not a record\n')
    put = run(['rados', '-p', 'rbd', 'put', 'ix.own.' + IMAGES[0], junk], 30, env=env)
    t0 = time.monotonic()
    while time.monotonic() - t0 < CHECK_MS / 1000 * 2 + SLACK_S + 5:
        rec = run(['rados', '-p', 'rbd', 'get', 'ix.own.' + IMAGES[0], '-'], 30, env=env)
        if rec.stdout.startswith('ix-own 1\n'):
            break
        time.sleep(0.2)
    took = time.monotonic() - t0
    logged = [ln for ln in gws['c'].d.output().splitlines()
              if 'ix.own.' + IMAGES[0] in ln and 'writing it again' in ln]
    took2, got = wait_rtpg(gws, want, 5)
    check('three-record-damaged', put.returncode == 0 and rec.stdout.startswith('ix-own 1\n')
          and 'groups 3\n' in rec.stdout and logged and got == want,
          'after `rados put` of garbage, C wrote the record again in %.1f s (log: %s); the '
          'gateways still report %s' % (took, logged[-1:] or 'nothing', shows(got)))


def main():
    for c in ('ceph-mon', 'ceph-osd', 'rbd', 'ceph-authtool', 'monmaptool'):
        if not shutil.which(c):
            print('SKIP: Ceph not installed (%s missing): scripts/deps.sh --ceph' % c,
                  file=sys.stderr)
            return 77
    if not os.access(os.path.join(BUILD, 'tools', 'ix-target'), os.X_OK):
        print('SKIP: ix-target not built in %s' % BUILD, file=sys.stderr)
        return 77
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='ixtest.own.', dir='/tmp')
    shm = '/dev/shm' if os.path.isdir('/dev/shm') else tmp
    ceph = tempfile.mkdtemp(prefix='ixtest.own-ceph.', dir=shm)
    conf = os.path.join(ceph, 'ceph.conf')
    env = dict(os.environ, CEPH_CONF=conf)
    gws = {}
    try:
        t0 = time.monotonic()
        r = run([CLUSTER_SH, 'start', ceph, '--store', 'memstore'], 300)
        if r.returncode != 0:
            report('FAIL', 'cluster', r.stderr.strip()[-300:])
            return 1
        for img in IMAGES:
            r = run(['rbd', 'create', '--size', '64M', 'rbd/' + img], 60, env=env)
            if r.returncode != 0:
                report('FAIL', 'cluster', 'rbd create: ' + r.stderr.strip()[-300:])
                return 1
        report('PASS', 'cluster', 'memstore cluster and images up in %.0f s'
               % (time.monotonic() - t0))
        for t in (test_idle, test_three):
            try:
                if t == test_three:
                    t(tmp, conf, gws, env)
                else:
                    t(tmp, conf, gws)
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                report('FAIL', t.__name__, '%s: %s' % (type(e).__name__, str(e)[:300]))
            for g in list(gws):
                gws.pop(g).stop()
        report('PASS' if not report.failed else 'FAIL', 'summary',
               'total %.0f s' % (time.monotonic() - t0))
    finally:
        for g in gws.values():
            g.stop()
        run([CLUSTER_SH, 'stop', ceph], 120)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ceph, ignore_errors=True)
    return 1 if report.failed else 0


if __name__ == '__main__':
    report.main(main)
