#!/usr/bin/env python3
"""Failover between two gateways of one RBD image: ALUA states follow the managed exclusive lock
(rbd.exclusive_lock), explicit failover on SET TARGET PORT GROUPS, implicit failover on I/O to a
standby path, fencing of the old owner. Its own memstore single-node cluster
(tests/ceph/cluster.sh). Gateway A: portal tpgt 1 in ALUA group 1; gateway B: tpgt 2 in group 2;
each lists the other's group by relative port; alua.implicit_failover_ms = IMPLICIT_MS.

Every write a gateway acknowledged (GOOD) goes into a ledger (LBA -> data); after each failover
the new owner reads every ledger block back: 0 errors and 0 miscompares, counted in the details.
ix-bench --verify writes a 2 MiB range through A, and after the explicit failover a read-only
ix-bench --verify run with the same seed checks it through B.

  a. explicit: A owns (REPORT TARGET PORT GROUPS through both: group 1 active/optimized, group 2
     standby); TEST UNIT READY through B for longer than IMPLICIT_MS gets 2/04/0B every time and
     moves nothing (path checkers send it to standby paths); SET TARGET PORT GROUPS (group 2
     active/optimized) through B: GOOD (A hands the lock over), B reports group 2
     active/optimized and group 1 standby; A's next write fails 02/04/0A or 0B (a standby path,
     not fenced) and A then says standby, group 1 standby and group 2 active/optimized; B
     verifies the ledger and the ix-bench data;
  b. kill -9: a restarted A takes the lock back explicitly, a restarted B is standby; writes
     through A; kill -9 A; writes through B get NOT READY (04/0A transitioning or 04/0B) and
     then GOOD within IMPLICIT_MS plus the holder's answer timeout (5 s) and slack; B verifies
     the ledger;
  r. kill -9 and restart at once: A owns, B standby; kill -9 A and start it again at once on
     the same port; writes through the restarted A get GOOD within handover_timeout_ms +
     lock_check_ms and slack after it is up (it breaks its previous instance's lock, or asks
     and breaks a holder that does not answer), not after the dead client's watch times out
     (osd_client_watch_timeout, 30 s: what rbd_lock_acquire alone waited for); exactly one new
     `ceph osd blocklist ls` entry (the old client), B reports group 1 active/optimized, and
     the restarted A reads every acknowledged block back;
  c. SIGSTOP: the same with A stopped instead of killed; after SIGCONT A's first write fails
     (02/04/0B, fenced; 0C when its overdue lock check noticed first), A reports group 1
     unavailable and group 2 active/optimized, the image keeps the acknowledged data, and SET
     TARGET PORT GROUPS through fenced A fails with 4/67/0A (it cannot take the lock back).

Skips (77) only when Ceph or ix-target is missing. Environment: IX_BUILD, IX_OUT, IX_RESULTS.
"""

import json
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixceph  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, rpc, run  # noqa: E402
import ixha  # noqa: E402
from ixha import AO, BS, STANDBY, UNAVAIL, Ledger, fmt, sense3, show  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:failover'
INITIATOR = 'iqn.2024-01.org.ix.test:failover-client'
IMPLICIT_MS = 3000
HANDOVER_MS = 5000  # rbd.handover_timeout_ms and rbd.lock_check_ms: their defaults
LOCK_CHECK_MS = 1000
SLACK_S = 5  # a loaded 2-core machine, added to bounds derived from the timeouts above
WATCH_S = 30  # a dead client's watch times out after this (Ceph's osd_client_watch_timeout)
BENCH_RANGE = 2 << 20
LEDGER_LBA = (4 << 20) // BS  # the ledger's writes start above ix-bench's range
IMAGE_MIB = 64  # the image's size: the ledger's blocks stay inside it
report = ixtest.Reporter('ha_failover')


check = report.check


class Gateway(ixha.Gateway):
    """One ix-target: its port, management socket, ALUA group (= tpgt) and one session."""

    def __init__(self, tmp, conf, name, group, port=None):
        self.tmp, self.conf = tmp, conf
        cfg = self.base(tmp, name, group, port, HOST)
        other = 3 - group
        cfg['targets'] = [{'name': IQN, 'luns': [
            {'lun': 0, 'backend': 'rbd', 'thin': True, 'naa_id': '0x6001405a0f0e0d0c',
             'serial': 'ixfailover',
             'rbd': {'pool': 'rbd', 'image': 'fo', 'conf': conf,
                     'exclusive_lock': True, 'osd_op_timeout_s': 5}}],
            'alua': {'implicit_failover_ms': IMPLICIT_MS, 'groups': [
                {'id': group, 'state': 'standby', 'portals': ['p']},
                {'id': other, 'state': 'standby', 'relative_ports': [other]}]}}]
        self.launch('ha_failover', tmp, cfg, IQN, INITIATOR)

    def lock_state(self, want=None, secs=30):
        end = time.monotonic() + secs
        while True:
            r = rpc(self.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': 0,
                                                        'dry_run': True})
            st = r.get('result', {}).get('state')
            if (st == want if want else st not in (None, 'acquiring')) or \
                    time.monotonic() > end:
                return st
            time.sleep(0.2)



def bench(gw, rw, seed):
    cmd = [os.path.join(BUILD, 'tools', 'ix-bench'), '-p', '%s:%d' % (HOST, gw.port),
           '-T', IQN, '--rw', rw, '--verify', '--seed', str(seed), '--bs', '64k', '--qd', '8',
           '--range', str(BENCH_RANGE), '--size', str(BENCH_RANGE), '--json', '--quiet',
           '--time', '30s']
    r = run(cmd, 90)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    return r.returncode, j, r.stderr.strip()[-300:]


def bench_summary(j):
    if not j:
        return 'no JSON'
    return ('read %d bytes, wrote %d bytes, errors=%s miscompares=%s verified_blocks=%s '
            '(every read is checked; verified_blocks counts the final re-read pass)'
            % (j['read']['bytes'], j['write']['bytes'], j.get('errors'), j.get('miscompares'),
               j.get('verified_blocks')))


def wait_takeover(gw, ledger):
    """Write through a standby gw until GOOD: (seconds, senses seen, final result)."""
    return ledger.write_until_good(gw, (IMPLICIT_MS + HANDOVER_MS + LOCK_CHECK_MS) / 1000 +
                                   2 * SLACK_S)


def phase_explicit(tmp, conf, ledger, gws):
    a = gws['a'] = Gateway(tmp, conf, 'a', 1)
    st_a = a.lock_state()
    b = gws['b'] = Gateway(tmp, conf, 'b', 2)
    st_b = b.lock_state()
    ra, rb = a.rtpg(), b.rtpg()
    check('ownership-follows-lock', st_a == 'owner' and st_b == 'standby' and
          ra == {1: AO, 2: STANDBY} and rb == {1: AO, 2: STANDBY},
          'A %s: %s; B %s: %s' % (st_a, show(ra), st_b, show(rb)))
    # TEST UNIT READY through the standby path, as Linux's scan and multipathd's tur checker
    # send it, for longer than implicit_failover_ms: 2/04/0B every time (never 04/0A, which the
    # tur checker calls a dead path) and the lock stays where it is
    seen, t0 = {}, time.monotonic()
    while time.monotonic() - t0 < IMPLICIT_MS / 1000 + 2:
        k = fmt(*b.cmd(bytes(6))[::2])
        seen[k] = seen.get(k, 0) + 1
        time.sleep(0.25)
    st_a, st_b = a.lock_state(), b.lock_state()
    check('standby-tur-keeps-owner', list(seen) == ['status 0x02 sense 2/04/0b'] and
          st_a == 'owner' and st_b == 'standby',
          'TEST UNIT READY through standby B for %.1f s: %s; then A %s, B %s'
          % (IMPLICIT_MS / 1000 + 2, seen, st_a, st_b))
    rc, j, err = bench(a, 'write', 4242)
    check('bench-write-a', rc == 0 and j.get('write', {}).get('bytes') == BENCH_RANGE,
          'ix-bench --rw write --verify through A: exit %d %s %s'
          % (rc, bench_summary(j), err if rc else ''))
    n, why = ledger.write_some(a, 64, rewrite_every=2)
    check('writes-a', n == 64, '%d of 64 writes through A acknowledged %s' % (n, why or ''))
    sb = b.write(LEDGER_LBA, bytes(4096))
    check('standby-refuses', sb[0] == 2 and sense3(sb[1]) in ((2, 4, 0x0b), (2, 4, 0x0a)),
          'a write through standby B before the failover: %s' % fmt(*sb))
    t0 = time.monotonic()
    st = b.stpg((AO, 2))[:2]
    took = time.monotonic() - t0
    rb = b.rtpg()
    check('explicit-stpg', st[0] == 0 and rb == {1: STANDBY, 2: AO} and
          b.lock_state() == 'owner',
          'SET TARGET PORT GROUPS g2=AO through B: %s in %.2f s; B now reports %s'
          % (fmt(*st), took, show(rb)))
    late = os.urandom(4096)
    lba = ledger.old_lba()
    wa = a.write(lba, late)
    t0, ra = time.monotonic(), a.rtpg()
    while ra != {1: STANDBY, 2: AO} and time.monotonic() - t0 < LOCK_CHECK_MS / 1000 + SLACK_S:
        time.sleep(0.1)
        ra = a.rtpg()
    st_a = a.lock_state('standby', LOCK_CHECK_MS / 1000 + SLACK_S)
    # A handed the lock over and stays healthy: its write is refused as on any standby path
    # (04/0A: its implicit failover window starts; never a fencing error)
    check('old-owner-standby', wa[0] == 2 and sense3(wa[1]) in ((2, 4, 0x0b), (2, 4, 0x0a)) and
          ra == {1: STANDBY, 2: AO} and st_a == 'standby',
          "A's next write: %s; A then says %s and reports %s" % (fmt(*wa), st_a, show(ra)))
    ledger.check(report, 'explicit-verify', b)
    rc, j, err = bench(b, 'read', 4242)
    check('bench-verify-b', rc == 0 and j.get('read', {}).get('bytes') == BENCH_RANGE and
          j.get('errors') == 0 and j.get('miscompares') == 0,
          'ix-bench --rw read --verify (same seed) through B: exit %d %s %s'
          % (rc, bench_summary(j), err if rc else ''))


def restart(gws, tmp, conf, name):
    old = gws[name]
    old.shutdown(report)
    gws[name] = Gateway(tmp, conf, name, old.group, old.port)
    gws[name].lock_state()
    return gws[name]


def make_a_owner(tmp, conf, ledger, gws, tag):
    """A restarted, takes the lock back with SET TARGET PORT GROUPS; B restarted (standby)."""
    a = restart(gws, tmp, conf, 'a')
    st = a.stpg((AO, 1))[:2]
    b = restart(gws, tmp, conf, 'b')
    ra, rb = a.rtpg(), b.rtpg()
    n, why = ledger.write_some(a, 32, rewrite_every=2)
    return check(tag + '-setup', st[0] == 0 and ra == {1: AO, 2: STANDBY} and
                 rb == {1: AO, 2: STANDBY} and n == 32,
                 'restarted A took the lock back (%s), restarted B standby: A %s, B %s; %d of '
                 '32 writes through A acknowledged %s' % (fmt(*st), show(ra), show(rb), n,
                                                          why or ''))


def phase_kill(tmp, conf, ledger, gws):
    if not make_a_owner(tmp, conf, ledger, gws, 'kill9'):
        return
    a, b = gws['a'], gws['b']
    a.close()
    a.d.kill9()
    took, seen, res = wait_takeover(b, ledger)
    rb = b.rtpg()
    check('kill9-implicit', res == 'GOOD' and rb == {1: STANDBY, 2: AO} and
          took < (IMPLICIT_MS + HANDOVER_MS) / 1000 + SLACK_S and seen,
          'after kill -9 of A, writes through B: %s after %.1f s (implicit_failover_ms %d + '
          'handover_timeout_ms %d + %d s); refused meanwhile: %s; B reports %s'
          % (res, took, IMPLICIT_MS, HANDOVER_MS, SLACK_S, seen, show(rb)))
    ledger.check(report, 'kill9-verify', b)


def blocklist(cl):
    return {ln.split()[0] for ln in cl.blocklist().splitlines() if ln.strip()}


def phase_kill_restart(cl):
    def phase(tmp, conf, ledger, gws):
        if not make_a_owner(tmp, conf, ledger, gws, 'kill9-restart'):
            return
        a, b = gws['a'], gws['b']
        bl0 = blocklist(cl)
        a.close()
        a.d.kill9()
        t_kill = time.monotonic()
        a = gws['a'] = Gateway(tmp, conf, 'a', 1, a.port)
        up = time.monotonic() - t_kill
        # bounded by what the restarted gateway may wait for: one hand-over request
        # (handover_timeout_ms) and a lock check, not by the dead client's watch timeout
        bound = (HANDOVER_MS + LOCK_CHECK_MS) / 1000 + 3
        # given up only past the watch timeout: a miss says which path it took
        took, seen, res = ledger.write_until_good(a, WATCH_S + bound)
        st_a, rb = a.lock_state(), b.rtpg()
        new = blocklist(cl) - bl0
        with open(a.d.log_path, errors='replace') as f:
            how = [ln.split(' rbd/fo: ', 1)[-1].strip() for ln in f
                   if 'previous instance' in ln or 'blocklisted)' in ln][:1]
        check('kill9-restart-owner', res == 'GOOD' and took < bound and st_a == 'owner' and
              rb == {1: AO, 2: STANDBY} and len(new) == 1,
              'A killed and restarted at once (up and logged in %.1f s after the kill): its '
              'first acknowledged write %.1f s later (bound %.0f s = handover_timeout_ms %d + '
              'lock_check_ms %d + 3 s; the dead client\'s watch times out after %d s); '
              'refused meanwhile: %s; A %s, B reports %s; new blocklist entries: %s; A\'s log: %s'
              % (up, took, bound, HANDOVER_MS, LOCK_CHECK_MS, WATCH_S, seen, st_a, show(rb),
                 sorted(new), how[0] if how else '-'))
        ledger.check(report, 'kill9-restart-verify', a)
    phase.__name__ = 'phase_kill_restart'
    return phase


def phase_stop(tmp, conf, ledger, gws):
    if not make_a_owner(tmp, conf, ledger, gws, 'sigstop'):
        return
    a, b = gws['a'], gws['b']
    a.d.p.send_signal(signal.SIGSTOP)
    try:
        took, seen, res = wait_takeover(b, ledger)
        rb = b.rtpg()
        check('sigstop-implicit', res == 'GOOD' and rb == {1: STANDBY, 2: AO} and seen,
              'A stopped, writes through B: %s after %.1f s; refused meanwhile: %s; B reports '
              '%s' % (res, took, seen, show(rb)))
        ledger.check(report, 'sigstop-verify', b)
    finally:
        a.d.p.send_signal(signal.SIGCONT)
    lba = ledger.old_lba()
    late = os.urandom(4096)
    wa = a.write(lba, late)
    ra = a.rtpg()
    st, got, _ = b.read(lba, 8)
    # 04/0B when the write itself finds the cluster refusing A, 04/0C (unavailable) when A's
    # lock check, overdue after SIGCONT, found it first
    check('sigcont-fenced', wa[0] == 2 and sense3(wa[1]) in ((2, 4, 0x0b), (2, 4, 0x0c)) and
          ra == {1: UNAVAIL, 2: AO} and st == 0 and bytes(got) == ledger.blocks[(0, lba)],
          "resumed A's first write: %s; A reports %s; the block holds %s"
          % (fmt(*wa), show(ra), 'the acknowledged data' if st == 0 and
             bytes(got) == ledger.blocks[(0, lba)] else "A's late write" if bytes(got) == late
             else 'something else (%s)' % fmt(st, b'')))
    st = a.stpg((AO, 1))[:2]
    check('fenced-stpg-refused', st[0] == 2 and sense3(st[1]) == (4, 0x67, 0x0a) and
          b.rtpg() == {1: STANDBY, 2: AO},
          'SET TARGET PORT GROUPS g1=AO through fenced A: %s (want 4/67/0a); B still reports '
          'g2=AO' % fmt(*st))
    ledger.check(report, 'final-verify', b)


def scenario(cl, tmp):
    cl.create_image('fo', '%dM' % IMAGE_MIB)
    gws, ledger = {}, Ledger(IMAGE_MIB * (1 << 20) // BS, LEDGER_LBA)
    t0 = time.monotonic()
    try:
        for ph in (phase_explicit, phase_kill, phase_kill_restart(cl), phase_stop):
            try:
                ph(tmp, cl.conf, ledger, gws)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                report('FAIL', ph.__name__, '%s: %s' % (type(e).__name__, str(e)[:300]))
                break
        report('PASS' if not report.failed else 'FAIL', 'summary',
               '%d writes acknowledged, %d distinct blocks checked after every failover, '
               'total %.0f s' % (ledger.acked, len(ledger.blocks), time.monotonic() - t0))
    finally:
        for g in gws.values():
            g.shutdown(report)


def main():
    return ixceph.run_with_cluster(report, 'ha_failover', scenario,
                                   built=('ix-target', 'ix-bench'),
                                   detail='%s cluster up in %.0f s')


if __name__ == '__main__':
    report.main(main)
