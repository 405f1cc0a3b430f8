#!/usr/bin/env python3
"""RBD LUNs that cannot be opened at start come up offline with a reason and open in the
background (rbd.start_offline, the default), on a memstore single-node cluster this test starts
itself (tests/ceph/cluster.sh, ~10 s).

  1. ix-target starts with three LUNs: 0 an RBD image that does not exist yet, 1 a RAM LUN,
     2 an RBD image behind a ceph.conf whose monitor address has nobody listening
     (connect_timeout_s 3): it is ready within seconds (no wait for the dead cluster);
  2. the management API (iscsi_get_luns "status") says LUN 0 "offline" with "image rbd/late
     not found", LUN 2 "offline" with "cluster unreachable: ...", LUN 1 "online"; ix-ctl ls
     and ix-ctl lun status show the reasons;
  3. TEST UNIT READY and READ CAPACITY on LUN 0 get NOT READY, MANUAL INTERVENTION REQUIRED
     (02/04/03), and so does PERSISTENT RESERVE IN (LUN 0 keeps its reservations in RADOS,
     "pr_store": "rados", whose object it cannot read yet: an empty answer would say "no
     reservation" while other gateways hold one); INQUIRY and REPORT LUNS still answer; the
     RAM LUN reads back what it wrote;
  4. `rbd create` of the image: LUN 0 comes online by itself within the back-off (1 s doubling
     to 60 s), the session that saw NOT READY gets UNIT ATTENTION (28/00 NOT READY TO READY
     CHANGE, 2A/09 CAPACITY DATA HAS CHANGED), then the new capacity and READ RESERVATION
     (no reservation: the object was created empty); ix-bench --verify random
     writes then reads with 0 errors;
  5. LUN 2's ceph.conf is pointed at the real monitor, then `ix-ctl lun online`: it opens at
     once (well before the next attempt the back-off had planned);
  6. rbd.start_offline false keeps the old behaviour: ix-target exits at start naming the
     missing image;
  7. SIGTERM ends the daemon in time; no sanitizer report in its log.

Skips (77) only when Ceph or ix-target is missing. Environment: IX_BUILD, IX_OUT, IX_RESULTS.
"""

import json
import os
import shutil
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixceph  # noqa: E402
import ixha  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, OUT, fmt, rpc, run, sense3  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:rbdoff'
INITIATOR = 'iqn.2024-01.org.ix.test:rbdoff-client'
BS = 512
report = ixtest.Reporter('rbd_offline')


def check(name, ok, detail):
    report('PASS' if ok else 'FAIL', name, detail)


def status(sock, lun):
    r = rpc(sock, 'iscsi_get_luns', {'target': IQN})
    for lu in r.get('result', []):
        if lu.get('lun') == lun:
            return lu.get('status', {})
    return {}


def wait_status(sock, lun, pred, secs):
    end = time.monotonic() + secs
    while True:
        st = status(sock, lun)
        if pred(st) or time.monotonic() > end:
            return st
        time.sleep(0.2)


TUR = bytes(6)
RC10 = bytes([0x25]) + bytes(9)
INQ = bytes([0x12, 0, 0, 0, 96, 0])
REPORT_LUNS = bytes([0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0])
PR_IN_READ_RESERVATION = ixha.prin_cdb(1, 24)


def ctl(sock, *args):
    r = run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock] + list(args), 30)
    return r.returncode, r.stdout, r.stderr


def write_cfg(tmp, name, sock, luns):
    port = ixtest.free_port()
    path = ixceph.write_config(os.path.join(tmp, name + '.json'), IQN, port, luns, host=HOST,
                               glob={'mgmt_socket': sock} if sock else None)
    return path, port


def rbd_lun(n, image, conf, **extra):
    return ixceph.rbd_lun(n, image, conf, **dict({'osd_op_timeout_s': 10}, **extra))


def step_offline_start(d, sock, port):
    st0 = wait_status(sock, 0, lambda s: s.get('attempts'), 10)
    st2 = wait_status(sock, 2, lambda s: 'unreachable' in s.get('reason', ''), 15)
    st1 = status(sock, 1)
    check('offline-reason-image', st0.get('state') == 'offline' and
          'image rbd/late not found' in st0.get('reason', ''), 'LUN 0: %s' % st0)
    check('offline-reason-cluster', st2.get('state') == 'offline' and
          'cluster unreachable' in st2.get('reason', ''), 'LUN 2: %s' % st2)
    check('ram-online', st1.get('state') == 'online', 'LUN 1: %s' % st1)
    rc, out, err = ctl(sock, 'ls')
    check('ix-ctl-ls', rc == 0 and '[offline: image rbd/late not found' in out and
          '[offline: cluster unreachable' in out,
          'exit %d: %s' % (rc, ' | '.join(ln.strip() for ln in out.splitlines() if 'lun' in ln)))

    rc, out, err = ctl(sock, 'lun', 'status', IQN)
    check('ix-ctl-lun-status', rc == 0 and 'lun0 rbd offline: image rbd/late not found' in out
          and 'lun1 ram online' in out and 'lun2 rbd offline: cluster unreachable' in out,
          'exit %d: %s' % (rc, out.strip().replace('\n', ' | ')))

    s = X.Session(HOST, port, initiator=INITIATOR, target=IQN, timeout=30)
    s.login()
    s.lun = 0
    tur = s.scsi_retry_ua(TUR)  # past the login's POWER ON OCCURRED
    rc10 = s.scsi(RC10, read_len=8)
    inq = s.scsi(INQ, read_len=96)
    rl = s.scsi(REPORT_LUNS, read_len=256)
    luns = sorted(struct.unpack('>H', rl[1][8 + 8 * i:10 + 8 * i])[0] & 0x3fff
                  for i in range(struct.unpack('>I', rl[1][:4])[0] // 8)) if rl[0] == 0 else []
    check('offline-not-ready', tur[0] == 2 and sense3(tur[2]) == (2, 4, 3) and
          rc10[0] == 2 and sense3(rc10[2]) == (2, 4, 3),
          'TUR %s; READ CAPACITY(10) %s' % (fmt(tur[0], tur[2]), fmt(rc10[0], rc10[2])))
    check('offline-inquiry', inq[0] == 0 and len(inq[1]) >= 36 and rl[0] == 0 and
          luns == [0, 1, 2], 'INQUIRY status 0x%02x; REPORT LUNS %s' % (inq[0], luns))
    # LUN 0 keeps its reservations in RADOS ("pr_store": "rados"), not read yet: no state to
    # report (an empty one would say "no reservation" while other gateways hold one)
    pri = s.scsi(PR_IN_READ_RESERVATION, read_len=24)
    check('offline-pr-in-not-ready', pri[0] == 2 and sense3(pri[2]) == (2, 4, 3),
          'PERSISTENT RESERVE IN (READ RESERVATION) %s' % fmt(pri[0], pri[2]))
    s.lun = 1
    data = os.urandom(8192)
    w = s.scsi_retry_ua(bytes([0x8a, 0]) + struct.pack('>QIBB', 8, 16, 0, 0), write_data=data)
    r = s.scsi_retry_ua(bytes([0x88, 0]) + struct.pack('>QIBB', 8, 16, 0, 0), read_len=8192)
    check('ram-serves', w[0] == 0 and r[0] == 0 and r[1] == data,
          'RAM LUN write %s, read %s, data %s' % (fmt(w[0], w[2]), fmt(r[0], r[2]),
                                                  'equal' if r[1] == data else 'differs'))
    return s


def step_image_created(cl, sock, port, s):
    r = cl.try_tool('rbd', 'create', '--size', '32M', 'rbd/late', timeout=60)
    if r.returncode != 0:
        report('FAIL', 'online-after-create', 'rbd create: ' + r.stderr.strip()[-200:])
        return
    t0 = time.monotonic()
    st = wait_status(sock, 0, lambda x: x.get('state') == 'online', 75)
    took = time.monotonic() - t0
    check('online-after-create', st.get('state') == 'online',
          'online %.1f s after rbd create, after %s attempts: %s' % (
              took, st.get('attempts'), st))
    s.lun = 0
    seen = []
    for _ in range(4):
        st_, _, sn, _ = s.scsi(TUR)
        if st_ != 2 or not sense3(sn) or sense3(sn)[0] != 6:
            break
        seen.append('%02x/%02x' % sense3(sn)[1:])
    rc10 = s.scsi(RC10, read_len=8)
    blocks = struct.unpack('>I', rc10[1][:4])[0] + 1 if rc10[0] == 0 else None
    check('unit-attention', seen[:2] == ['28/00', '2a/09'] and st_ == 0 and
          blocks == 32 * 2048,
          'UAs %s, then TUR %s; READ CAPACITY: %s blocks' % (seen, fmt(st_, sn), blocks))
    pri = s.scsi(PR_IN_READ_RESERVATION, read_len=24)
    check('online-pr-in', pri[0] == 0 and len(pri[1]) >= 8 and pri[1][4:8] == bytes(4),
          'PERSISTENT RESERVE IN (READ RESERVATION) %s, %d bytes, additional length %s'
          % (fmt(pri[0], pri[2]), len(pri[1]), pri[1][4:8].hex()))
    s.close()
    cmd = [os.path.join(BUILD, 'tools', 'ix-bench'), '-p', '%s:%d' % (HOST, port), '-T', IQN,
           '-l', '0', '--quiet', '--json', '--rw', 'randwrite', '--verify', '-q', '16', '-t',
           '3s', '--range', '16m']
    r = run(cmd, 120)
    try:
        res = json.loads(r.stdout)
    except ValueError:
        res = None
    check('ix-bench-verify', r.returncode == 0 and res and not res.get('errors') and
          not res.get('miscompares') and res.get('verified_blocks', 0) > 0,
          'exit %d: %s %s' % (r.returncode, res and {k: res.get(k) for k in (
              'iops', 'errors', 'miscompares', 'verified_blocks')}, r.stderr.strip()[-200:]))


def step_kick(sock, conf, dead):
    # wait until the back-off has grown (8 s: attempts of 3 s each, 1 + 2 + 4 s between), so
    # an attempt at once is told apart from the next planned one
    st = wait_status(sock, 2, lambda x: x.get('next_attempt_s', 0) >= 7, 60)
    before = st.get('next_attempt_s')
    shutil.copyfile(conf, dead)  # the cluster "appears" at the configured address
    t0 = time.monotonic()
    rc, out, err = ctl(sock, 'lun', 'online', IQN, '2')
    st = wait_status(sock, 2, lambda x: x.get('state') == 'online', 30)
    took = time.monotonic() - t0
    check('ix-ctl-online-retries', rc == 0 and st.get('state') == 'online' and
          before is not None and before >= 7 and took < min(3.5, before - 2),
          'next attempt was due in %s s; ix-ctl lun online (exit %d %s): online after %.1f s, '
          '%s attempts' % (before, rc, err.strip(), took, st.get('attempts')))


def step_strict(tmp, conf):
    path, _ = write_cfg(tmp, 'strict', None,
                        [rbd_lun(0, 'nope', conf, start_offline=False)])
    t0 = time.monotonic()
    try:
        d = ixtest.Daemon(path, 'rbd_offline.ix-target-strict.log', BUILD, OUT)
        d.stop()
        report('FAIL', 'start-offline-false', 'ix-target started')
        return
    except ixtest.DaemonExited as e:
        out, status_ = e.output, e.status
    took = time.monotonic() - t0
    check('start-offline-false', status_ != 0 and 'image rbd/nope not found' in out and
          took < 20, 'exit %d after %.1f s: %s' % (
              status_, took, [ln for ln in out.splitlines() if 'nope' in ln][-1:]))


def scenario(cl, tmp):
    conf = cl.conf
    dead = cl.dead_conf(tmp)
    r = cl.try_tool('rbd', 'create', '--size', '16M', 'rbd/other', timeout=60)
    if r.returncode != 0:
        report('FAIL', 'setup', 'rbd create: ' + r.stderr.strip()[-200:])
        return
    sock = os.path.join(tmp, 'ix.sock')
    path, port = write_cfg(tmp, 'main', sock, [
        dict(rbd_lun(0, 'late', conf), pr_store='rados'),
        {'lun': 1, 'backend': 'ram', 'size': '16M'},
        rbd_lun(2, 'other', dead, connect_timeout_s=3)])
    t0 = time.monotonic()
    d = ixtest.Daemon(path, 'rbd_offline.ix-target.log', BUILD, OUT)
    took = time.monotonic() - t0
    try:
        check('start-ready', took < 8, 'ready %.1f s after the start, with one image missing '
              'and one cluster unreachable' % took)
        s = step_offline_start(d, sock, port)
        step_image_created(cl, sock, port, s)
        step_kick(sock, conf, dead)
    finally:
        t0 = time.monotonic()
        rc = d.stop()
        took = time.monotonic() - t0
        check('stop', rc == 0 and took < 10, 'SIGTERM: exit %s after %.1f s' % (rc, took))
        ixceph.check_sanitizer(report, d, '')
    step_strict(tmp, conf)


def main():
    return ixceph.run_with_cluster(report, 'rbdoff', scenario,
                                   built=('ix-target', 'ix-ctl', 'ix-bench'))


if __name__ == '__main__':
    report.main(main)
