#!/usr/bin/env python3
"""An RBD LUN whose pool hits its quota, and whose cluster fills (issue 27, item 2), on a
memstore single-node cluster with a manager this test starts itself (tests/ceph/cluster.sh
--mgr: the monitor enforces pool quotas from the manager's statistics).

librados holds a write to a full pool until there is space; ix opens its images with
FULL_TRY (docs/configuration.md, "When the store is full"), so the OSD answers such a write at
once with EDQUOT (quota) or ENOSPC (full cluster), which the initiator sees as DATA PROTECT,
SPACE ALLOCATION FAILED WRITE PROTECT (07/27/07). Through libiscsi (tests/lib/ixlibiscsi.py):
  1. `ceph osd pool set-quota rbd max_bytes 24M` ("thin_threshold": 50): writes past half of
     it, then the soft threshold's unit attention (6/38/07) within 30 s (the backend asks
     the cluster every 10 s) and the Prometheus gauges (the store's size is the quota); then
     1 MiB WRITE(16)s until the monitor flags
     the pool full_quota (Ceph's own reaction, polled for at most 60 s), then a write: 07/27/07
     within the documented bound (osd_op_timeout_s, 10 s here), never a hang;
  2. the LU still serves reads (what was written reads back);
  3. the quota raised (max_bytes 0): once the pool is no longer flagged, the same write
     succeeds;
  4. a full cluster (`ceph osd set-full-ratio` below what the OSD uses): a write gets 07/27/07
     within the bound; the ratio back to 0.97: the write succeeds.
  5. SIGTERM ends the daemon in time; no sanitizer report.
Skips (77) only when Ceph (ceph-mgr among it), libiscsi or ix-target is missing.
"""

import json
import os
import struct
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixceph  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, OUT  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2026-11.io.ix.test:rbdfull'
INITIATOR = 'iqn.2026-11.io.ix.test:rbdfull-client'
BS = 512
MiB = 1 << 20
IMAGE_MIB = 128
QUOTA_MIB = 24
OSD_TIMEOUT_S = 10      # rbd.osd_op_timeout_s: the documented bound of any write
FLAG_WAIT_S = 60        # how long Ceph may take to flag the pool (its stats period)
FULL = (7, 0x27, 0x07)
SOFT = (6, 0x38, 0x07)
THRESHOLD = 50
SOFT_WAIT_S = 30        # 2 x the backend's sampling period of a pool (10 s) and the stats lag
report = ixtest.Reporter('rbd_full')


def check(name, ok, detail):
    report('PASS' if ok else 'FAIL', name, detail)


def chunk(i):
    return bytes([(i * 53 + 7) & 0xff]) * 16 + struct.pack('>I', i) * ((MiB - 16) // 4)


def pool_flags(cl, pool='rbd'):
    d = json.loads(cl.tool('ceph', 'osd', 'dump', '--format', 'json'))
    for p in d.get('pools', []):
        if p.get('pool_name') == pool:
            return set(p.get('flags_names', '').split(','))
    return set()


SEEN = {'soft': 0}


def timed_write(li, i):
    """A write; the soft threshold's unit attention is counted and the write retried."""
    for _ in range(3):
        t0 = time.monotonic()
        st, sense, err = li.write(i * (MiB // BS), chunk(i))
        if sense != SOFT:
            break
        SEEN['soft'] += 1
    return st, sense, err, time.monotonic() - t0


def wait_soft(li):
    end = time.monotonic() + SOFT_WAIT_S
    while time.monotonic() < end:
        st, sense, err = li.tur()
        if sense == SOFT:
            SEEN['soft'] += 1
            return True
        time.sleep(0.5)
    return False


def metrics(mport):
    with urllib.request.urlopen('http://%s:%d/metrics' % (HOST, mport), timeout=10) as r:
        body = r.read().decode()
    vals = {}
    for line in body.splitlines():
        if line.startswith('ix_lun_') and ('{target="%s",lun="0"}' % IQN) in line:
            vals[line.split('{')[0]] = int(line.split()[-1])
    return vals


def until_flag(cl, li, flag, start):
    """Write chunks from start on until the pool carries flag (or the image ends, or
    FLAG_WAIT_S pass); returns (next chunk, the first write that failed or None)."""
    end = time.monotonic() + FLAG_WAIT_S
    i = start
    while time.monotonic() < end:
        if flag in pool_flags(cl):
            return i, None
        if i < IMAGE_MIB:
            st, sense, err, took = timed_write(li, i)
            if st != 0:
                return i, (st, sense, err, took)
            i += 1
        else:
            time.sleep(0.5)
    return i, None


def bounded_full(li, i, what):
    st, sense, err, took = timed_write(li, i)
    check('%s-answer' % what, st == 2 and sense == FULL,
          'write status %d sense %s %s' % (st, sense, err))
    check('%s-bounded' % what, took < OSD_TIMEOUT_S,
          'answered in %.2f s (bound osd_op_timeout_s %d s)' % (took, OSD_TIMEOUT_S))


def write_again(cl, li, i, flag, what):
    """After the space came back: wait for the flag to go, then the write succeeds (the
    client's OSD map may lag the monitor's by a moment: a few tries)."""
    end = time.monotonic() + FLAG_WAIT_S
    while flag in pool_flags(cl) and time.monotonic() < end:
        time.sleep(0.5)
    for _ in range(20):
        st, sense, err, took = timed_write(li, i)
        if st == 0:
            break
        time.sleep(0.5)
    check('%s-writes-again' % what, st == 0, 'write status %d sense %s %s' % (st, sense, err))


def scenario(cl, tmp):
    import ixlibiscsi
    cl.create_image('full', '%dM' % IMAGE_MIB)
    port, mport = ixtest.free_port(), ixtest.free_port()
    lun = ixceph.rbd_lun(0, 'full', cl.conf, osd_op_timeout_s=OSD_TIMEOUT_S)
    lun['thin_threshold'] = THRESHOLD
    path = ixceph.write_config(os.path.join(tmp, 'rbd_full.json'), IQN, port, [lun], host=HOST,
                               glob={'metrics_listen': '%s:%d' % (HOST, mport)})
    d = ixtest.Daemon(path, 'rbd_full.ix-target.log', BUILD, OUT)
    try:
        li = ixlibiscsi.Libiscsi(port, IQN, INITIATOR)
        cl.tool('ceph', 'osd', 'pool', 'set-quota', 'rbd', 'max_bytes', str(QUOTA_MIB * MiB))
        # past the soft threshold (half the quota), then the unit attention, once
        n = QUOTA_MIB * (THRESHOLD + 15) // 100
        for k in range(n):
            timed_write(li, k)
        ok = wait_soft(li)
        check('soft-threshold-ua', ok and SEEN['soft'] == 1,
              '6/38/07 %s within %d s of %d MiB written to a pool with a %d MiB quota '
              '(%d in all)' % ('seen' if ok else 'not seen', SOFT_WAIT_S, n, QUOTA_MIB,
                               SEEN['soft']))
        m = metrics(mport)
        check('metrics', m.get('ix_lun_space_total_bytes') == QUOTA_MIB * MiB and
              m.get('ix_lun_thin_threshold_reached') == 1 and
              'ix_lun_space_used_bytes' not in m, 'Prometheus %s' % m)
        i, failed = until_flag(cl, li, 'full_quota', n)
        flagged = 'full_quota' in pool_flags(cl)
        check('quota-flagged', flagged or failed is not None,
              'pool flags after %d MiB: %s; first failed write: %s' %
              (i, sorted(pool_flags(cl)), failed))
        if failed is not None:   # the flag came between our check and the write
            st, sense, err, took = failed
            check('quota-first-failure', sense == FULL and took < OSD_TIMEOUT_S,
                  'status %d sense %s in %.2f s' % (st, sense, took))
        check('soft-threshold-once', SEEN['soft'] == 1,
              '6/38/07 seen %d times up to the quota' % SEEN['soft'])
        bounded_full(li, i, 'quota')
        st, sense, err = li.read(0, 8 * BS)
        check('quota-reads', st == 0, 'READ(16) status %d %s' % (st, err))
        cl.tool('ceph', 'osd', 'pool', 'set-quota', 'rbd', 'max_bytes', '0')
        write_again(cl, li, i, 'full_quota', 'quota')

        # a full cluster: the OSD's full ratio below what it uses now
        cl.tool('ceph', 'osd', 'set-nearfull-ratio', '0.0001')
        cl.tool('ceph', 'osd', 'set-backfillfull-ratio', '0.0002')
        cl.tool('ceph', 'osd', 'set-full-ratio', '0.0003')
        end = time.monotonic() + FLAG_WAIT_S
        while 'full' not in pool_flags(cl) and time.monotonic() < end:
            time.sleep(0.5)
        check('cluster-flagged', 'full' in pool_flags(cl),
              'pool flags %s' % sorted(pool_flags(cl)))
        bounded_full(li, i + 1, 'cluster')
        st, sense, err = li.read(0, 8 * BS)
        check('cluster-reads', st == 0, 'READ(16) status %d %s' % (st, err))
        cl.tool('ceph', 'osd', 'set-full-ratio', '0.97')
        cl.tool('ceph', 'osd', 'set-backfillfull-ratio', '0.95')
        cl.tool('ceph', 'osd', 'set-nearfull-ratio', '0.9')
        write_again(cl, li, i + 1, 'full', 'cluster')
        li.close()
    finally:
        check('daemon-alive', d.alive(), 'pid %s' % d.pid)
        rc = d.stop(30)
        check('shutdown', rc == 0, 'exit status %s after SIGTERM' % rc)
        ixceph.check_sanitizer(report, d, 'ix-target')


def main():
    try:
        import ixlibiscsi  # noqa: F401
    except OSError as e:
        print('SKIP: libiscsi not installed (%s): scripts/deps.sh' % e, file=sys.stderr)
        return 77
    # the manager: without it the monitor has no pool statistics and enforces no quota
    return ixceph.run_with_cluster(report, 'rbdfull', scenario, tools=('ceph-mgr',), mgr=True)


sys.exit(main())
