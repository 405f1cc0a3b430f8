#!/usr/bin/env python3
"""Login redirection to the owner on a gateway group (docs/ha.md, "Redirecting logins to the
owner"), on a real Ceph cluster: its own memstore single-node cluster (tests/ceph/cluster.sh),
one RBD image with exclusive_lock exported by two ix gateways A (ALUA group 1) and B (group 2).

Each gateway has two portals: "p" (tpgt = its group), where the test's own session logs in
(for REPORT/SET TARGET PORT GROUPS), and "r" (tpgt = group + 10, in the same local group),
the only one with targets[].redirect.owners (redirect.portals), naming the other gateway's
group and its "r" portal.
  1. A starts first and takes the lock; B is standby (both report group 1 active/optimized):
     libiscsi's iscsi-inq on B's "r" portal is redirected (B counts moved_temporarily) and
     served by A (A counts the login), INQUIRY answered; on A's "r" portal it is served by A;
  2. SET TARGET PORT GROUPS group 2 active/optimized through B hands the lock over to B; once
     both report it: iscsi-inq on A's "r" portal goes to B, on B's is served by B.
Skips (77) only when Ceph, ix-target or libiscsi's iscsi-inq is missing.
"""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixceph  # noqa: E402
import ixtest  # noqa: E402
from ixceph import rpc  # noqa: E402
import ixha  # noqa: E402
from ixha import AO, STANDBY, show  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2026-11.io.ix.test:ha-redirect'
INITIATOR = 'iqn.2026-11.io.ix.test:ha-redirect-client'
IMAGE = 'redir0'
HANDOVER_MS = 3000  # rbd.handover_timeout_ms
LOCK_CHECK_MS = 1000  # rbd.lock_check_ms (the default)
SLACK_S = 5  # a loaded 2-core machine
# every gateway reports the owner within a hand-over and two lock checks
RTPG_BOUND_S = HANDOVER_MS / 1000 + 2 * LOCK_CHECK_MS / 1000 + SLACK_S
report = ixtest.Reporter('ha_redirect')
check = report.check


class Gateway(ixha.Gateway):
    """One ix-target: portals p (tpgt = group) and r (group + 10), one RBD LUN with the lock,
    redirect.owners on r to the other gateway's r portal."""

    def __init__(self, tmp, conf, name, group, port, rport, other_group, other_rport):
        cfg = self.base(tmp, name, group, port, HOST)
        self.rport = rport
        cfg['portals'].append({'name': 'r', 'address': HOST, 'port': rport, 'tpgt': group + 10})
        cfg['targets'] = [{
            'name': IQN,
            'luns': [{'lun': 0, 'backend': 'rbd', 'thin': True, 'naa_id': '0x6001405a0f0e7701',
                      'serial': 'ixredir0',
                      'rbd': {'pool': 'rbd', 'image': IMAGE, 'conf': conf,
                              'exclusive_lock': True, 'osd_op_timeout_s': 5,
                              'handover_timeout_ms': HANDOVER_MS}}],
            'alua': {'groups': [
                {'id': group, 'state': 'standby', 'portals': ['p', 'r']},
                {'id': other_group, 'state': 'standby',
                 'relative_ports': [other_group, other_group + 10]}]},
            'redirect': {'portals': ['r'], 'owners': [
                {'group': other_group, 'address': '%s:%d,%d' % (HOST, other_rport,
                                                                other_group + 10)}]}}]
        self.launch('ha_redirect', tmp, cfg, IQN, INITIATOR)

    def lock(self):
        r = rpc(self.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': 0, 'dry_run': True})
        return r.get('result', {}).get('state')

    def wait_lock(self, secs=30):
        end = time.monotonic() + secs
        while True:
            st = self.lock()
            if st not in (None, 'acquiring') or time.monotonic() > end:
                return st
            time.sleep(0.1)

    def logins(self):
        r = rpc(self.sock, 'iscsi_get_stats', {}).get('result', {}).get('logins', {})
        return (r.get('accepted', {}).get('normal', 0),
                r.get('refused', {}).get('moved_temporarily', 0))

    def stop(self):
        self.shutdown(report)


def inq(port, ini):
    try:
        p = subprocess.run(['iscsi-inq', '-i', ini, 'iscsi://%s:%d/%s/0' % (HOST, port, IQN)],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return 'timeout', str(e)


def wait_rtpg(gws, want, secs):
    t0 = time.monotonic()
    while True:
        got = {g.name: g.rtpg() for g in gws}
        if all(v == want for v in got.values()) or time.monotonic() - t0 > secs:
            return got
        time.sleep(0.2)


def login_goes(name, at, to, ini):
    """iscsi-inq on at's r portal: redirected to `to` (at counts it, `to` serves it), or, with
    to None, served by at itself."""
    a0 = {g.name: g.logins() for g in (at, to) if g}
    rc, out = inq(at.rport, ini)
    a1 = {g.name: g.logins() for g in (at, to) if g}
    d = {n: (a1[n][0] - a0[n][0], a1[n][1] - a0[n][1]) for n in a0}
    if to is None:
        ok = d[at.name] == (1, 0)
    else:
        ok = d[at.name] == (0, 1) and d[to.name] == (1, 0)
    check(name, ok and rc == 0 and 'Product:' in out,
          'iscsi-inq on %s r: exit %s; (accepted, redirected) deltas %s; %s'
          % (at.name.upper(), rc, d, ' | '.join(out.strip().splitlines()[-3:])))


def scenario(cl, tmp):
    cl.create_image(IMAGE, '64M')
    pa, ra, pb, rb = (ixtest.free_port() for _ in range(4))
    gws = []
    try:
        a = Gateway(tmp, cl.conf, 'a', 1, pa, ra, 2, rb)
        gws.append(a)
        st_a = a.wait_lock()
        b = Gateway(tmp, cl.conf, 'b', 2, pb, rb, 1, ra)
        gws.append(b)
        st_b = b.wait_lock()
        got = wait_rtpg(gws, {1: AO, 2: STANDBY}, RTPG_BOUND_S)
        if not check('setup', st_a == 'owner' and st_b == 'standby' and
                     all(v == {1: AO, 2: STANDBY} for v in got.values()),
                     'A %s, B %s; %s' % (st_a, st_b, '; '.join(
                         '%s %s' % (n.upper(), show(v)) for n, v in sorted(got.items())))):
            return
        login_goes('a-owns-b-redirects', b, a, INITIATOR + '-1')
        login_goes('a-owns-a-serves', a, None, INITIATOR + '-2')
        st, sense, took = b.stpg((AO, 2))
        got = wait_rtpg(gws, {1: STANDBY, 2: AO}, RTPG_BOUND_S)
        if not check('handover', st == 0 and b.lock() == 'owner' and
                     all(v == {1: STANDBY, 2: AO} for v in got.values()),
                     'STPG g2=AO through B: %s in %.1f s; locks A %s B %s; %s'
                     % (ixha.fmt(st, sense), took, a.lock(), b.lock(), '; '.join(
                         '%s %s' % (n.upper(), show(v)) for n, v in sorted(got.items())))):
            return
        login_goes('b-owns-a-redirects', a, b, INITIATOR + '-3')
        login_goes('b-owns-b-serves', b, None, INITIATOR + '-4')
    finally:
        for g in gws:
            g.stop()


def main():
    if not shutil.which('iscsi-inq'):
        print('SKIP: iscsi-inq (libiscsi-bin) not installed: run scripts/deps.sh',
              file=sys.stderr)
        return 77
    return ixceph.run_with_cluster(report, 'ha_redirect', scenario,
                                   detail='%s cluster up in %.0f s')


if __name__ == '__main__':
    report.main(main)
