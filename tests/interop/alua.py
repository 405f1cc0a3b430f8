#!/usr/bin/env python3
"""ALUA against the real daemon: one target on two portals in two target port groups.

Portal A (TPGT 1) is group 1, active/optimized; portal B (TPGT 2) is group 2, standby; group 3
(standby, relative port 3) stands for a second gateway. Through the raw client
(tests/lib/ixiscsi.py), one session per path:
  - INQUIRY says TPGS 11b on both paths; VPD 0x83 names the path's relative target port and
    target port group and the same LU (NAA) on both; libiscsi's iscsi-inq shows the same;
  - REPORT TARGET PORT GROUPS, both formats, the same on both paths (the standby one too);
  - on the standby path READ and TEST UNIT READY get NOT READY 04/0B, READ CAPACITY works;
  - SET TARGET PORT GROUPS through B (group 2 active/optimized, group 1 standby): B reads at
    once with no unit attention, A gets 2A/06 and then 04/0B; RTPG shows status "explicit";
  - a bad SET TARGET PORT GROUPS (transitioning asked for) gets 05/26/00 and changes nothing;
  - the management API: iscsi_get_alua (and ix-ctl alua) show the running states,
    iscsi_set_alua_state moves group 1 back to active/optimized (both paths get 2A/06) and
    group 2 to unavailable (04/0C);
  - SIGHUP with the same file keeps the running states; with group 2's state changed in the
    file it applies (2A/06, then the new state);
then, with group 2 active/non-optimized, libiscsi's iscsi-inq decodes VPD 0x83 on each path,
and its iscsi-test-cu MultipathIO family runs with one URL per path. ix only; exits 77 against other peers.
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
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixha  # noqa: E402
import ixiscsi as X  # noqa: E402
from ixha import parse_rtpg, sense3  # noqa: E402
import ixtest  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:alua'
INIT = 'iqn.2024-01.org.ix.test:alua-client'
NAA_ID = '0x6001405a1a2b3c4d'
R = ixtest.Reporter('alua')
NOT_READY, UNIT_ATTENTION, ILLEGAL = 2, 6, 5


def check(name, ok, detail):
    R('PASS' if ok else 'FAIL', name, detail)
    return ok


def config(path, pa, pb, sock, g2_state='standby'):
    cfg = {'global': {'mgmt_socket': sock, 'nop_interval_ms': 0},
           'portals': [{'name': 'a', 'address': HOST, 'port': pa, 'tpgt': 1},
                       {'name': 'b', 'address': HOST, 'port': pb, 'tpgt': 2}],
           'targets': [{'name': IQN,
                        'luns': [{'lun': 0, 'backend': 'ram', 'size': '64M',
                                  'naa_id': NAA_ID}],
                        'alua': {'transition_time': 5, 'groups': [
                            {'id': 1, 'state': 'active/optimized', 'preferred': True,
                             'portals': ['a']},
                            {'id': 2, 'state': g2_state, 'portals': ['b']},
                            {'id': 3, 'state': 'standby', 'relative_ports': [3]}]}}]}
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=2)


def rpc(sock, method, params):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    s.sendall(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': method,
                          'params': params}).encode() + b'\n')
    buf = b''
    while b'\n' not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return json.loads(buf.split(b'\n')[0])


class Path:
    def __init__(self, port, isid):
        self.s = X.Session(HOST, port, initiator=INIT, target=IQN, lun=0, timeout=10,
                           isid=isid)
        self.s.login()
        self.s.scsi_retry_ua(bytes(6))  # the power-on unit attention

    def cmd(self, cdb, read_len=0, write_data=None):
        st, data, sense, _ = self.s.scsi(bytes(cdb), read_len=read_len, write_data=write_data)
        return st, data, sense3(sense) if st == 2 else None

    def read(self):
        return self.cmd([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0], read_len=512)

    def tur(self):
        return self.cmd([0] * 6)

    def rtpg(self, ext=False):
        st, data, sn = self.cmd(ixha.rtpg_cdb(ext), read_len=1024)
        if st != 0:
            raise X.ProtocolError('REPORT TARGET PORT GROUPS: status %d sense %s' % (st, sn))
        return data

    def stpg(self, descs):
        cdb, params = ixha.stpg_cdb(descs)
        return self.cmd(cdb, write_data=params)

    def close(self):
        self.s.close()


def vpd83(p):
    st, d, _ = p.cmd([0x12, 1, 0x83, 1, 0, 0], read_len=256)
    out, off = {}, 4
    while st == 0 and off + 4 <= len(d):
        assoc_type, ln = d[off + 1] & 0x3f, d[off + 3]
        out.setdefault(assoc_type, d[off + 4:off + 4 + ln])
        off += 4 + ln
    return out


def fmt(r):
    st, _, sn = r
    return 'status %d%s' % (st, ' sense %x/%02x/%02x' % sn if sn else '')


def steps_paths(pa, pb, sock, cfg_path, d):
    a, b = Path(pa, bytes.fromhex('80000000aa01')), Path(pb, bytes.fromhex('80000000bb02'))
    for name, p in (('a', a), ('b', b)):
        st, inq, _ = p.cmd([0x12, 0, 0, 0, 96, 0], read_len=96)
        check('inquiry-tpgs-' + name, st == 0 and (inq[5] >> 4) & 3 == 3,
              'path %s: INQUIRY byte 5 = 0x%02x (TPGS bits 5:4 want 11b)' % (name, inq[5]))
    va, vb = vpd83(a), vpd83(b)
    rel = [struct.unpack('>H', v.get(0x14, bytes(4))[2:4])[0] for v in (va, vb)]
    tpg = [struct.unpack('>H', v.get(0x15, bytes(4))[2:4])[0] for v in (va, vb)]
    check('vpd83-ports', rel == [1, 2] and tpg == [1, 2],
          'relative target port A/B %s (want [1, 2]), target port group %s (want [1, 2])'
          % (rel, tpg))
    check('vpd83-same-lu', va.get(0x03) and va.get(0x03) == vb.get(0x03)
          and va[0x03][:8].hex() == NAA_ID[2:],
          'NAA A %s, B %s (naa_id %s)' % (va.get(0x03, b'').hex(), vb.get(0x03, b'').hex(),
                                         NAA_ID))

    want = {1: (0, True, 0, [1]), 2: (2, False, 0, [2]), 3: (2, False, 0, [3])}
    ga, ha, whole_a = parse_rtpg(a.rtpg())
    gb, hb, whole_b = parse_rtpg(b.rtpg(ext=True))
    check('rtpg-length-only', ga == want and ha is None and whole_a,
          'path A: %s' % ga)
    check('rtpg-extended', gb == want and hb == (1, 5) and whole_b,
          'path B (standby): %s, header (format, implicit transition time) %s' % (gb, hb))

    r_rd, r_tur = b.read(), b.tur()
    r_cap = b.cmd([0x25] + [0] * 9, read_len=8)
    check('standby-refuses', r_rd[2] == (NOT_READY, 0x04, 0x0b) and
          r_tur[2] == (NOT_READY, 0x04, 0x0b) and r_cap[0] == 0,
          'B: READ %s, TEST UNIT READY %s (want 2/04/0b), READ CAPACITY %s (want 0)'
          % (fmt(r_rd), fmt(r_tur), fmt(r_cap)))
    check('active-reads', a.read()[0] == 0, 'A: READ %s' % fmt(a.read()))

    r_bad = b.stpg([(0x0f, 2)])
    check('stpg-refuses-transitioning', r_bad[2] == (ILLEGAL, 0x26, 0x00),
          'STPG asking for transitioning: %s (want 5/26/00)' % fmt(r_bad))
    r = b.stpg([(0, 2), (2, 1)])
    rb, ra1 = b.read(), a.read()
    ra2 = a.read()
    check('stpg-moves', r[0] == 0 and rb[0] == 0 and ra1[2] == (UNIT_ATTENTION, 0x2a, 0x06)
          and ra2[2] == (NOT_READY, 0x04, 0x0b),
          'STPG through B %s; then B READ %s (want 0, no UA), A READ %s (want 6/2a/06), '
          'A READ %s (want 2/04/0b)' % (fmt(r), fmt(rb), fmt(ra1), fmt(ra2)))
    g, _, _ = parse_rtpg(a.rtpg())
    check('rtpg-after-stpg', g.get(1, (None,) * 3)[:3] == (2, True, 1) and
          g.get(2, (None,) * 3)[:3] == (0, False, 1),
          'groups %s (want 1 standby and 2 active/optimized, status 1 = explicit)' % g)

    got = rpc(sock, 'iscsi_get_alua', {'target': IQN})
    states = {x['id']: (x['state'], x['status'])
              for x in got.get('result', {}).get('groups', [])}
    check('mgmt-get', states == {1: ('standby', 'explicit'), 2: ('active/optimized', 'explicit'),
                                 3: ('standby', 'none')}, json.dumps(got)[:300])
    ctl = os.path.join(os.environ.get('IX_BUILD', os.path.join(HERE, '..', '..', 'build')),
                       'tools', 'ix-ctl')
    p = subprocess.run([ctl, '-s', sock, 'alua', IQN], capture_output=True, text=True,
                       timeout=30)
    check('ix-ctl-alua', p.returncode == 0 and
          'group 2 active/optimized (last change: explicit), relative ports 2' in p.stdout and
          'group 3 standby (last change: none), relative ports 3' in p.stdout,
          'exit %d: %s' % (p.returncode, ' | '.join(p.stdout.strip().splitlines())))
    got = rpc(sock, 'iscsi_set_alua_state', {'target': IQN, 'group': 1,
                                             'state': 'active/optimized'})
    ra, rb = a.read(), b.read()
    check('mgmt-set-ua-everyone', got.get('result') is True and
          ra[2] == (UNIT_ATTENTION, 0x2a, 0x06) and rb[2] == (UNIT_ATTENTION, 0x2a, 0x06)
          and a.read()[0] == 0,
          'set: %s; A READ %s, B READ %s (both want 6/2a/06)' % (json.dumps(got), fmt(ra),
                                                                  fmt(rb)))
    got = rpc(sock, 'iscsi_set_alua_state', {'target': IQN, 'group': 9, 'state': 'standby'})
    check('mgmt-set-unknown-group', 'error' in got, json.dumps(got)[:200])
    rpc(sock, 'iscsi_set_alua_state', {'target': IQN, 'group': 2, 'state': 'unavailable'})
    b.read()
    rb = b.read()
    check('unavailable-refuses', rb[2] == (NOT_READY, 0x04, 0x0c), 'B READ %s' % fmt(rb))

    # SIGHUP with the same file: running states stay (the file still says group 2 standby)
    a.tur()
    d.p.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    rb = b.read()
    check('reload-keeps-states', rb[2] == (NOT_READY, 0x04, 0x0c),
          'B READ after SIGHUP %s (want 2/04/0c, no unit attention)' % fmt(rb))
    config(cfg_path, pa, pb, sock, g2_state='active/non-optimized')
    d.p.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    rb1, rb2 = b.read(), b.read()
    check('reload-applies-changed-state', rb1[2] == (UNIT_ATTENTION, 0x2a, 0x06) and
          rb2[0] == 0, 'B READ %s (want 6/2a/06), then %s (want 0)' % (fmt(rb1), fmt(rb2)))
    a.close()
    b.close()


def inq_tool(pa, pb):
    """libiscsi's own decoding of VPD 0x83 on each path: the port designators are there and
    the LU designators (NAA, T10 vendor id) are the same on both. Both paths are active by now:
    libiscsi's connect sends TEST UNIT READY and gives up on anything but GOOD or a unit
    attention, so its tools cannot log in through a standby path (04/0B is what SPC-4 asks
    for there; LIO answers the same)."""
    if not shutil.which('iscsi-inq'):
        R('SKIP', 'iscsi-inq-vpd83', 'libiscsi-bin not installed (iscsi-inq)')
        return
    seen = []
    for port in (pa, pb):
        p = subprocess.run(['iscsi-inq', '-i', INIT, '-e', '1', '-c', '131',
                            'iscsi://%s:%d/%s/0' % (HOST, port, IQN)],
                           capture_output=True, text=True, errors='replace', timeout=30)
        descs = p.stdout.split('DEVICE DESIGNATOR')[1:]
        types = [l.split(')')[1].strip() for d in descs for l in d.splitlines()
                 if l.startswith('Designator Type:')]
        lu = [d for d in descs if 'LOGICAL_UNIT' in d]
        seen.append((p.returncode, types, lu))
    ok = all(rc == 0 and 'TARGET_PORT_GROUP' in t and 'RELATIVE_TARGET_PORT' in t and
             any('NAA' in x for x in lu) for rc, t, lu in seen)
    check('iscsi-inq-vpd83', ok and seen[0][2] == seen[1][2],
          'path A: exit %d, designators %s; path B: exit %d, designators %s; LU designators '
          '%s on both' % (seen[0][0], seen[0][1], seen[1][0], seen[1][1],
                          'the same' if seen[0][2] == seen[1][2] else 'NOT the same'))


def multipath(pa, pb, tmp):
    if not shutil.which('iscsi-test-cu'):
        R('SKIP', 'MultipathIO', 'libiscsi-bin not installed (iscsi-test-cu)')
        return
    tests = ['Simple', 'Reset', 'CompareAndWrite', 'CompareAndWriteAsync']
    log = os.path.join(tmp, 'cu.log')
    with open(log, 'w') as f:
        rc = subprocess.run(['timeout', '-k', '5', '300', 'iscsi-test-cu', '--dataloss', '-V',
                             '-i', 'iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test',
                             '-I', 'iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2',
                             '-t', 'SCSI.MultipathIO',
                             'iscsi://%s:%d/%s/0' % (HOST, pa, IQN),
                             'iscsi://%s:%d/%s/0' % (HOST, pb, IQN)],
                            stdout=f, stderr=subprocess.STDOUT).returncode
    out = os.environ.get('IX_OUT')
    if out:
        shutil.copy(log, os.path.join(out, 'alua.iscsi-test-cu.log'))
    for t, st, why in ixtest.cunit_run(log, rc, tests):
        R(st, 'MultipathIO.' + t, why or 'active/optimized + active/non-optimized paths')


def run():
    if os.environ.get('IX_PEER', 'ix') != 'ix':
        print('SKIP: ALUA configuration is ix-target\'s (peer %s)' % os.environ.get('IX_PEER'),
              file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix='ixtest.alua.')
    d = None
    try:
        pa, pb = ixtest.free_port(), ixtest.free_port()
        while pb == pa:
            pb = ixtest.free_port()
        sock = os.path.join(tmp, 'ctl.sock')
        cfg = os.path.join(tmp, 'ix-target.json')
        config(cfg, pa, pb, sock)
        d = ixtest.Daemon(cfg, 'alua.ix-target.log')
        steps_paths(pa, pb, sock, cfg, d)
        inq_tool(pa, pb)
        multipath(pa, pb, tmp)
        st = d.stop()
        d = None
        check('daemon-stops', st == 0, 'exit status %s after SIGTERM' % st)
    finally:
        if d:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if R.failed else 0


if __name__ == '__main__':
    R.main(run)
