#!/usr/bin/env python3
"""Fencing between two gateways of one RBD image (rbd.exclusive_lock), on a memstore
single-node cluster this test starts itself (tests/ceph/cluster.sh, ~10 s), plus the RBD paths
that run off the workers (VERIFY BYTCHK, GET LBA STATUS through the helper thread).

  1. gateway A (ix-target with exclusive_lock) takes the image's managed lock: its management
     API says "owner", a FUA write through it is GOOD;
  2. VERIFY(16) BYTCHK=1 through A: GOOD with the data written, MISCOMPARE (0e/1d/00) naming
     the first differing byte with other data; GET LBA STATUS: the written object mapped, the
     rest of the 64 MiB image deallocated;
  3. gateway B on the same image: "standby" with A's client named as the holder; a write
     through B gets NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE
     (02/04/0B), and the image keeps A's data;
  4. iscsi_break_rbd_lock on B (the failover primitive): B becomes "owner" and names A's client
     as the one it broke; A's next write fails with 02/04/0B (librbd: ESHUTDOWN, A was
     blocklisted), A says "fenced" with its reason in the management API and the log; B writes,
     and `rbd export` holds B's data, never A's later write.

Skips (77) only when Ceph or ix-target is missing. Environment: IX_BUILD, IX_OUT, IX_RESULTS.
"""

import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixceph  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import fmt, rpc, sense3  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:fence'
INITIATOR = 'iqn.2024-01.org.ix.test:fence-client'
BS = 512
LOCK_CHECK_MS = 1000  # rbd.lock_check_ms (the default)
SLACK_S = 4  # a loaded 2-core machine
report = ixtest.Reporter('rbd_fence')


def lock_state(sock, want=None, secs=30):
    """The LUN's lock state (dry run), waited for until it is want (or no longer acquiring)."""
    end = time.monotonic() + secs
    while True:
        r = rpc(sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': 0, 'dry_run': True})
        res = r.get('result', {})
        st = res.get('state')
        # "open" (no managed lock) only while the image is not open yet (start_offline)
        if (st == want if want else st not in (None, 'acquiring', 'open')) or \
                time.monotonic() > end:
            return st, res.get('reason', r.get('error'))
        time.sleep(0.2)


def gateway(tmp, conf, name):
    port, sock = ixtest.free_port(), os.path.join(tmp, name + '.sock')
    path = ixceph.write_config(
        os.path.join(tmp, name + '.json'), IQN, port,
        [ixceph.rbd_lun(0, 'fence', conf, exclusive_lock=True, osd_op_timeout_s=5)],
        host=HOST, glob={'mgmt_socket': sock})
    d = ixtest.Daemon(path, 'rbd_fence.ix-target-%s.log' % name, ixceph.BUILD, ixceph.OUT)
    s = X.Session(HOST, port, initiator=INITIATOR, target=IQN, timeout=30)
    s.login()
    s.lun = 0
    return d, s, sock


def write16(s, lba, data):
    cdb = bytes([0x8a, 0x08]) + struct.pack('>QIBB', lba, len(data) // BS, 0, 0)
    st, _, sense, _ = s.scsi_retry_ua(cdb, write_data=data)
    return st, sense


def check(name, ok, detail):
    report('PASS' if ok else 'FAIL', name, detail)


def step_verify_lbas(s, data):
    vcdb = bytes([0x8f, 0x02]) + struct.pack('>QIBB', 0, len(data) // BS, 0, 0)
    st1, _, sn1, _ = s.scsi_retry_ua(vcdb, write_data=data)
    bad = bytearray(data)
    bad[700] ^= 0x5a
    st2, _, sn2, _ = s.scsi_retry_ua(vcdb, write_data=bytes(bad))
    info = struct.unpack('>I', sn2[3:7])[0] if len(sn2) >= 7 and sn2[0] & 0x7f == 0x70 else None
    check('verify-bytchk', st1 == 0 and st2 == 2 and sense3(sn2) == (0xe, 0x1d, 0) and
          info == 700, 'same data: %s; byte 700 changed: %s INFORMATION %s' % (
              fmt(st1, sn1), fmt(st2, sn2), info))
    st, d, sn, _ = s.scsi_retry_ua(bytes([0x9e, 0x12]) + struct.pack('>QIBB', 0, 4096, 0, 0),
                                   read_len=4096)
    descs = [struct.unpack('>QIB', d[8 + 16 * i:8 + 16 * i + 13])
             for i in range((len(d) - 8) // 16)] if st == 0 else []
    # 4 MiB objects: the first (written) mapped, then deallocated to the end of 64 MiB
    want = [(0, 8192, 0), (8192, 64 * 2048 - 8192, 1)]
    check('get-lba-status', st == 0 and descs == want,
          '%s descriptors %s' % (fmt(st, sn), descs[:4]))


def fence(cl, tmp):
    a = b = None
    try:
        a, sa, ma = gateway(tmp, cl.conf, 'a')
        st, why = lock_state(ma)
        da = os.urandom(4096)
        w = write16(sa, 0, da)
        check('owner', st == 'owner' and w[0] == 0,
              'A: state %s (%s), FUA write %s' % (st, why, fmt(*w)))
        step_verify_lbas(sa, da)
        b, sb, mb = gateway(tmp, cl.conf, 'b')
        st, why = lock_state(mb)
        w = write16(sb, 0, os.urandom(4096))
        check('standby-refused', st == 'standby' and w[0] == 2 and
              sense3(w[1]) == (2, 4, 0x0b) and 'held by' in (why or ''),
              'B: state %s (%s), write %s' % (st, why, fmt(*w)))
        holder = (why or '').split('held by ', 1)[-1].split(' (')[0]
        t0 = time.monotonic()
        r = rpc(mb, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': 0})
        res = r.get('result', {})
        check('break-lock', res.get('state') == 'owner' and holder and
              'broke %s' % holder in res.get('reason', ''),
              'B after %.1f s: %s' % (time.monotonic() - t0, res or r.get('error')))
        late = os.urandom(4096)
        t0 = time.monotonic()
        w = write16(sa, 0, late)
        took = time.monotonic() - t0
        # the refused write itself, or A's next lock check, finds it fenced
        st, why = lock_state(ma, 'fenced', LOCK_CHECK_MS / 1000 + SLACK_S)
        end = time.monotonic() + SLACK_S  # its log line may follow the state
        while not ('fenced' in a.output() and 'blocklisted' in a.output()) and \
                time.monotonic() < end:
            time.sleep(0.1)
        logged = 'fenced' in a.output() and 'blocklisted' in a.output()
        check('fenced', w[0] == 2 and sense3(w[1]) == (2, 4, 0x0b) and st == 'fenced' and
              logged, 'A write %s after %.1f s; state %s (%s); log line %s' % (
                  fmt(*w), took, st, why, 'yes' if logged else 'missing'))
        db = os.urandom(4096)
        w = write16(sb, 0, db)
        try:
            with open(cl.export('fence', os.path.join(tmp, 'export.raw')), 'rb') as f:
                img, err = f.read(4096), ''
        except RuntimeError as e:
            img, err = b'', str(e)[-200:]
        check('new-owner-writes', w[0] == 0 and img == db,
              'B write %s; rbd export holds %s' % (
                  fmt(*w), "B's data" if img == db else
                  "A's late write" if img == late else 'something else: ' + err))
        for s in (sa, sb):
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
    finally:
        for d in (a, b):
            if d and d.p.poll() is None:
                d.stop()
        for d, n in ((a, 'a'), (b, 'b')):
            ixceph.check_sanitizer(report, d, n)


def scenario(cl, tmp):
    cl.create_image('fence', '64M')
    fence(cl, tmp)


def main():
    return ixceph.run_with_cluster(report, 'rbdfence', scenario,
                                   detail='single-node cluster (%s) up in %.0f s')


if __name__ == '__main__':
    report.main(main)
