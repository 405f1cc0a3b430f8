#!/usr/bin/env python3
"""Ownership of RBD LUs shared by several ix gateways (docs/ha.md, "Ownership and failover").
Its own memstore single-node cluster (tests/ceph/cluster.sh); every gateway is an ix-target
with one portal (tpgt = its ALUA group id) and one target whose LUNs are RBD images with
exclusive_lock (LUN 0 "own0", and LUN 1 "own1" in the hand-over tests); each lists the others'
groups by relative port. rbd.handover_timeout_ms 3000, lock_check_ms the default 1000.

  idle: A owns, B standby; `iscsi_break_rbd_lock` on B breaks A's lock (blocklisting A) while
     A receives nothing; A's management API says "fenced" within lock_check_ms plus slack,
     A's first command then gets UNIT ATTENTION 2A/06 and A's REPORT TARGET PORT GROUPS says
     group 1 unavailable, group 2 active/optimized; A's cluster connection is fenced with it,
     so A rejoins by itself (rbd.rejoin_after_ms) with a new client and says standby.
  three: A, B and C (groups 1, 2, 3) on one image: all three report the holder's group
     active/optimized and the others standby (the holder's owner record, ix.own.<image>, names
     its groups), before and after C breaks A's lock (A, fenced, reports its group unavailable
     and cannot read the cluster any more: the others as they were; rbd.rejoin_after_ms 0
     here, so it stays fenced); the record says
     "groups 3"; after `rados put` of garbage over it, C writes it again within two lock
     checks, logging it, and every gateway keeps reporting C's group.
  handover: SET TARGET PORT GROUPS g2=AO through B while A holds both LUNs' locks: GOOD, both
     locks with B, A standby (not fenced: no new `ceph osd blocklist ls` entry, its write
     2/04/0B), every gateway reports group 2; A takes them back the same way.
  planned: the holder's own SET TARGET PORT GROUPS g1=standby g3=AO gives both locks to C;
     g3=standby alone leaves them free (every group standby, C's write 2/04/0B) until A asks.
  implicit (alua.implicit_failover_ms 2000): an initiator writing LUN 1 through A (the
     holder) and LUN 0 through B at once: A refuses every request (the target as a whole),
     B's writes 2/04/0A then 2/04/0B, the locks stay; writes through B only: GOOD within the
     window plus slack, nobody fenced; B (now the holder) SIGSTOPped, writes through A: GOOD
     after implicit_failover_ms + handover_timeout_ms, B blocklisted, its first write after
     SIGCONT 2/04/0B (or 0C, when its overdue lock check noticed first) and "fenced".
  split: B breaks one LUN's lock (fencing A): B and C report transitioning, B's write to the
     other LUN 2/04/0A, then the split heals by itself (B holds both): once from LUN 0 (B
     takes LUN 1's), once, after A restarted and took both back with SET TARGET PORT GROUPS,
     from LUN 1 (B asks for LUN 0's and breaks the silent A's).
Every write a gateway acknowledged (ledger, both LUNs) is read back through the new holder
after each move: 0 errors, 0 miscompares.

Skips (77) only when Ceph or ix-target is missing. Environment: IX_BUILD, IX_OUT, IX_RESULTS.
"""

import os
import signal
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixceph  # noqa: E402
import ixtest  # noqa: E402
from ixceph import rpc  # noqa: E402
import ixha  # noqa: E402
from ixha import AO, STANDBY, TRANS, UNAVAIL, Ledger, fmt, sense3, show  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:own'
INITIATOR = 'iqn.2024-01.org.ix.test:own-client'
CHECK_MS = 1000   # rbd.lock_check_ms (the default)
SLACK_S = 1.5     # a loaded machine
IMAGES = ['own0', 'own1']  # LUN 0 and 1 of the target: the hand-over tests move both
HANDOVER_MS = 3000  # rbd.handover_timeout_ms
IMPLICIT_MS = 2000  # alua.implicit_failover_ms, where a test turns it on
HEAL_S = 2  # HA_HEAL_MS (src/ha/ha_policy.h): split locks are healed this much later
REJOIN_S = 5  # rbd.rejoin_after_ms (the default): a fenced gateway rejoins this much later
IMAGE_MIB = 64  # each image's size: the ledger's blocks stay inside it
LU_BLOCKS = IMAGE_MIB * (1 << 20) // 512
LEDGER_LBA = 4096
PROBE_LBA = 2048  # writes expected to be refused go here, never over the ledger's blocks
report = ixtest.Reporter('ha_own')


check = report.check


class Gateway(ixha.Gateway):
    """One ix-target: its portal (tpgt = group), management socket and one session."""

    def __init__(self, tmp, conf, name, group, groups, port=None, implicit_ms=0, nluns=2,
                 rejoin_ms=None):
        self.tmp, self.conf = tmp, conf
        cfg = self.base(tmp, name, group, port, HOST)
        alua = [{'id': group, 'state': 'standby', 'portals': ['p']}]
        alua += [{'id': g, 'state': 'standby', 'relative_ports': [g]}
                 for g in groups if g != group]
        luns = [{'lun': i, 'backend': 'rbd', 'thin': True,
                 'naa_id': '0x6001405a0f0e%04x' % i, 'serial': 'ixown%d' % i,
                 'rbd': {'pool': 'rbd', 'image': img, 'conf': conf, 'exclusive_lock': True,
                         'osd_op_timeout_s': 5, 'handover_timeout_ms': HANDOVER_MS}}
                for i, img in enumerate(IMAGES[:nluns])]
        if rejoin_ms is not None:
            for lun in luns:
                lun['rbd']['rejoin_after_ms'] = rejoin_ms
        self.nluns = nluns
        cfg['targets'] = [{'name': IQN, 'luns': luns,
                           'alua': {'implicit_failover_ms': implicit_ms, 'groups': alua}}]
        self.launch('ha_own', tmp, cfg, IQN, INITIATOR)

    def lock(self, lun=0):
        r = rpc(self.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': lun, 'dry_run': True})
        return r.get('result', {}).get('state'), r.get('result', {}).get('reason')

    def wait_lock(self, want, secs=30, lun=None):
        """Until every LUN's lock state (or lun's) is want (None: settled): the last state."""
        end = time.monotonic() + secs
        while True:
            sts = [self.lock(k)[0] for k in (range(self.nluns) if lun is None else [lun])]
            if all(st == want if want else st not in (None, 'acquiring') for st in sts) or \
                    time.monotonic() > end:
                return sts[0] if len(set(sts)) == 1 else sts
            time.sleep(0.1)

    def break_lock(self, lun=0):
        return rpc(self.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': lun})

    def stop(self):
        self.shutdown(report)


def test_idle(tmp, conf, gws):
    """An idle owner learns it lost the lock within lock_check_ms."""
    a = gws['a'] = Gateway(tmp, conf, 'a', 1, [1, 2], nluns=1)
    st_a = a.wait_lock(None)
    b = gws['b'] = Gateway(tmp, conf, 'b', 2, [1, 2], nluns=1)
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
    # what the lock's thread found fences A's cluster connection, not only the lock state:
    # A rejoins by itself (rbd.rejoin_after_ms, default 5000) with a new client, standby,
    # although no request of A's ever met the blocklist
    t0 = time.monotonic()
    st = a.wait_lock('standby', REJOIN_S + SLACK_S + 10)
    took = time.monotonic() - t0
    rj = rejoin_status(a)
    ra = a.rtpg()
    check('idle-rejoins', st == 'standby' and rj.get('state') == 'connected' and
          rj.get('count') == 1 and ra == {1: STANDBY, 2: AO},
          'idle fenced A then: %s after %.1f s (%s); connection %s, %s rejoin(s); A reports %s'
          % (st, took, a.lock()[1], rj.get('state'), rj.get('count'), show(ra)))


def rejoin_status(gw, lun=0):
    r = rpc(gw.sock, 'iscsi_get_luns', {'target': IQN})
    return ([x for x in r.get('result') or [] if x.get('lun') == lun] or [{}])[0] \
        .get('status', {}).get('rejoin', {})


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


def test_three(tmp, conf, gws, cl):
    """Three gateways on one image: each reports the holder's group active/optimized, from the
    owner record, also after the lock moved; a damaged record is written again by its
    holder."""
    groups = [1, 2, 3]
    for n, g in (('a', 1), ('b', 2), ('c', 3)):  # fenced A stays so (no rejoin): unavailable
        gws[n] = Gateway(tmp, conf, n, g, groups, nluns=1, rejoin_ms=0)
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
    rec = cl.try_tool('rados', '-p', 'rbd', 'get', 'ix.own.' + IMAGES[0], '-', timeout=30)
    check('three-record', rec.returncode == 0 and 'groups 3\nports 3\n' in rec.stdout and
          rec.stdout.startswith('ix-own 1\n'),
          'rados get ix.own.%s: %r' % (IMAGES[0], rec.stdout[:200]))
    junk = os.path.join(tmp, 'junk')
    with open(junk, 'wb') as f:
        f.write(b'not a record\n')
    put = cl.try_tool('rados', '-p', 'rbd', 'put', 'ix.own.' + IMAGES[0], junk, timeout=30)
    t0 = time.monotonic()
    while time.monotonic() - t0 < CHECK_MS / 1000 * 2 + SLACK_S + 5:
        rec = cl.try_tool('rados', '-p', 'rbd', 'get', 'ix.own.' + IMAGES[0], '-', timeout=30)
        logged = [ln for ln in gws['c'].d.output().splitlines()
                  if 'ix.own.' + IMAGES[0] in ln and 'writing it again' in ln]
        if rec.stdout.startswith('ix-own 1\n') and logged:  # the log line may come after
            break
        time.sleep(0.2)
    took = time.monotonic() - t0
    took2, got = wait_rtpg(gws, want, CHECK_MS / 1000 * 2 + SLACK_S)
    check('three-record-damaged', put.returncode == 0 and rec.stdout.startswith('ix-own 1\n')
          and 'groups 3\n' in rec.stdout and logged and got == want,
          'after `rados put` of garbage, C wrote the record again in %.1f s (log: %s); the '
          'gateways still report %s' % (took, logged[-1:] or 'nothing', shows(got)))


def blocklist(cl):
    return {ln.split()[0] for ln in cl.blocklist().splitlines() if ln.strip()}


def start3(tmp, conf, gws, implicit_ms=0, names='abc'):
    for n, g in zip(names, (1, 2, 3)):
        gws[n] = Gateway(tmp, conf, n, g, [1, 2, 3], implicit_ms=implicit_ms)
        gws[n].wait_lock(None)


def locks(gws, lun=None):
    """{gateway: its lock state}, the same on every LUN of it, else {gateway: [per LUN]}."""
    out = {}
    for n, g in sorted(gws.items()):
        st = [g.lock(k)[0] for k in range(g.nluns)] if lun is None else [g.lock(lun)[0]]
        out[n] = st[0] if len(set(st)) == 1 else st
    return out


def want3(owner, fenced=()):
    """What every gateway reports when group owner holds the lock."""
    out = {}
    for n, g in (('a', 1), ('b', 2), ('c', 3)):
        out[n] = {k: AO if k == owner else STANDBY for k in (1, 2, 3)}
        if n in fenced:
            out[n][g] = UNAVAIL
    return out


def test_handover(tmp, conf, gws, cl):
    """SET TARGET PORT GROUPS through a standby asks the live holder, which hands the lock
    over: nobody is fenced, and the old holder can take it back the same way."""
    start3(tmp, conf, gws)
    a, b, c = gws['a'], gws['b'], gws['c']
    ledger, bl0 = Ledger(LU_BLOCKS, LEDGER_LBA), blocklist(cl)
    n, why = ledger.write_some(a, 64, (0, 1))
    check('handover-setup', n == 64 and locks(gws) == {'a': 'owner', 'b': 'standby',
                                                       'c': 'standby'},
          '%d of 64 writes through A acknowledged %s; locks %s' % (n, why or '', locks(gws)))
    st, sense, took = b.stpg((AO, 2))
    lk = locks(gws)
    took2, got = wait_rtpg(gws, want3(2), CHECK_MS / 1000 + SLACK_S)
    wa = a.write(PROBE_LBA, os.urandom(4096))
    bl = blocklist(cl) - bl0
    check('handover-stpg', st == 0 and lk == {'a': 'standby', 'b': 'owner', 'c': 'standby'} and
          got == want3(2) and not bl and wa[0] == 2 and sense3(wa[1]) == (2, 4, 0x0b),
          'SET TARGET PORT GROUPS g2=AO through B: %s in %.2f s; locks %s; after %.1f s %s; '
          'new blocklist entries: %s; a write through A: %s (want 2/04/0b)'
          % (fmt(st, sense), took, lk, took2, shows(got), sorted(bl) or 'none', fmt(*wa)))
    ledger.check(report, 'handover-verify', b)
    n, why = ledger.write_some(b, 32, (0, 1))
    st, sense, took = a.stpg((AO, 1))
    lk = locks(gws)
    took2, got = wait_rtpg(gws, want3(1), CHECK_MS / 1000 + SLACK_S)
    bl = blocklist(cl) - bl0
    check('handover-back', n == 32 and st == 0 and lk == {'a': 'owner', 'b': 'standby',
                                                          'c': 'standby'} and
          got == want3(1) and not bl,
          '%d of 32 writes through B acknowledged; SET TARGET PORT GROUPS g1=AO through A: %s '
          'in %.2f s; locks %s; after %.1f s %s; new blocklist entries: %s'
          % (n, fmt(st, sense), took, lk, took2, shows(got), sorted(bl) or 'none'))
    ledger.check(report, 'handover-back-verify', a)


def test_planned(tmp, conf, gws, cl):
    """SET TARGET PORT GROUPS on the holder asking its group standby hands the lock over: to
    the group asked active, or to nobody."""
    start3(tmp, conf, gws)
    a, c = gws['a'], gws['c']
    bl0 = blocklist(cl)
    st, sense, took = a.stpg((STANDBY, 1), (AO, 3))
    t0 = time.monotonic()
    # the hand-over is asked for at once; at worst it waits out handover_timeout_ms and C's
    # next two lock checks
    while locks(gws) != {'a': 'standby', 'b': 'standby', 'c': 'owner'} and \
            time.monotonic() - t0 < HANDOVER_MS / 1000 + 2 * CHECK_MS / 1000 + SLACK_S:
        time.sleep(0.1)
    lk = locks(gws)
    took2, got = wait_rtpg(gws, want3(3), CHECK_MS / 1000 + SLACK_S)
    check('planned-to-c', st == 0 and lk == {'a': 'standby', 'b': 'standby', 'c': 'owner'} and
          got == want3(3) and not blocklist(cl) - bl0,
          'SET TARGET PORT GROUPS g1=standby g3=AO through holder A: %s in %.2f s; locks %s '
          '(C took it %.1f s later); %s; new blocklist entries: %s'
          % (fmt(st, sense), took, lk, time.monotonic() - t0, shows(got),
             sorted(blocklist(cl) - bl0) or 'none'))
    st, sense, took = c.stpg((STANDBY, 3))
    time.sleep(CHECK_MS / 1000 * 2)
    lk = locks(gws)
    nobody = {n: {1: STANDBY, 2: STANDBY, 3: STANDBY} for n in 'abc'}
    took2, got = wait_rtpg(gws, nobody, CHECK_MS / 1000 + SLACK_S)
    wc = c.write(PROBE_LBA, os.urandom(4096))
    check('planned-to-nobody', st == 0 and lk == {'a': 'standby', 'b': 'standby',
                                                  'c': 'standby'} and got == nobody and
          wc[0] == 2 and sense3(wc[1]) == (2, 4, 0x0b),
          'SET TARGET PORT GROUPS g3=standby through holder C: %s; two checks later locks %s; '
          '%s; a write through C: %s' % (fmt(st, sense), lk, shows(got), fmt(*wc)))
    st, sense, took = a.stpg((AO, 1))
    took2, got = wait_rtpg(gws, want3(1), CHECK_MS / 1000 + SLACK_S)
    check('planned-free-taken', st == 0 and locks(gws)['a'] == 'owner' and got == want3(1) and
          not blocklist(cl) - bl0,
          'SET TARGET PORT GROUPS g1=AO through A with nobody holding the lock: %s in %.2f s; '
          '%s; new blocklist entries: %s' % (fmt(st, sense), took, shows(got),
                                             sorted(blocklist(cl) - bl0) or 'none'))


def writer(gw, ledger, secs, out, lun=0):
    """Write through gw to lun for secs: out gets {result: count} and the first GOOD after a
    refusal."""
    t0, seen = time.monotonic(), {}
    while time.monotonic() - t0 < secs:
        lba = ledger.new_lba()
        data = os.urandom(4096)
        st, sense = gw.write(lba, data, lun)
        k = 'GOOD' if st == 0 else fmt(st, sense)
        seen[k] = seen.get(k, 0) + 1
        if st == 0:
            ledger.good(lun, lba, data)
            if len(seen) > 1 and 'good_at' not in out:
                out['good_at'] = time.monotonic() - t0
        else:
            time.sleep(0.05)
    out['seen'] = seen


def test_implicit(tmp, conf, gws, cl):
    """Implicit failover asks the holder: refused while it still gets I/O (a multipath policy
    using every path), granted once the initiator left it, and the lock broken only when the
    holder does not answer (SIGSTOP)."""
    start3(tmp, conf, gws, implicit_ms=IMPLICIT_MS)
    a, b, c = gws['a'], gws['b'], gws['c']
    ledger, bl0 = Ledger(LU_BLOCKS, LEDGER_LBA), blocklist(cl)
    secs = IMPLICIT_MS / 1000 * 3 + 1
    oa, ob = {}, {}
    # the initiator writes LUN 1 through A and LUN 0 through B: A refuses for the target as a
    # whole (LUN 0's lock idle through A does not matter: the locks move together)
    ta = threading.Thread(target=writer, args=(a, ledger, secs, oa, 1))
    tb = threading.Thread(target=writer, args=(b, ledger, secs, ob, 0))
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    lk = locks(gws)
    refused = [ln for ln in a.d.output().splitlines() if 'refused: this gateway had I/O' in ln]
    check('implicit-busy-kept', lk['a'] == 'owner' and lk['b'] == 'standby' and
          set(oa['seen']) == {'GOOD'} and 'GOOD' not in ob['seen'] and
          ob['seen'].get('status 0x02 sense 2/04/0b') and refused and
          not blocklist(cl) - bl0,
          'writes to LUN 1 through A and LUN 0 through B at once for %.0f s '
          '(implicit_failover_ms %d): A %s, B %s; locks %s; A refused %d request(s); new '
          'blocklist entries: %s'
          % (secs, IMPLICIT_MS, oa['seen'], ob['seen'], lk, len(refused),
             sorted(blocklist(cl) - bl0) or 'none'))
    ledger.check(report, 'implicit-busy-verify', a)
    ob = {}
    writer(b, ledger, IMPLICIT_MS / 1000 * 2 + HANDOVER_MS / 1000, ob)
    lk = locks(gws)
    took2, got = wait_rtpg(gws, want3(2), CHECK_MS / 1000 + SLACK_S)
    check('implicit-moved', lk == {'a': 'standby', 'b': 'owner', 'c': 'standby'} and
          got == want3(2) and ob.get('good_at') is not None and
          ob['good_at'] < IMPLICIT_MS / 1000 + SLACK_S + 1 and not blocklist(cl) - bl0,
          'writes through B only: %s, GOOD after %s s; locks %s; %s; new blocklist entries: %s'
          % (ob['seen'], '%.1f' % ob['good_at'] if 'good_at' in ob else 'never', lk,
             shows(got), sorted(blocklist(cl) - bl0) or 'none'))
    ledger.check(report, 'implicit-moved-verify', b)
    b.d.p.send_signal(signal.SIGSTOP)
    oa = {}
    try:
        writer(a, ledger, IMPLICIT_MS / 1000 + HANDOVER_MS / 1000 + 4, oa)
        lk = {n: gws[n].lock()[0] for n in 'ac'}
        took2, got = wait_rtpg(gws, {n: want3(1)[n] for n in 'ac'},
                               CHECK_MS / 1000 + SLACK_S)
        bl = blocklist(cl) - bl0
        check('implicit-stopped-broken', lk == {'a': 'owner', 'c': 'standby'} and
              got == {n: want3(1)[n] for n in 'ac'} and oa.get('good_at') is not None and
              oa['good_at'] < (IMPLICIT_MS + HANDOVER_MS) / 1000 + SLACK_S + 1 and len(bl) == 1,
              'B stopped; writes through A: %s, GOOD after %s s (implicit_failover_ms %d + '
              'handover_timeout_ms %d); locks %s; %s; new blocklist entries: %s'
              % (oa['seen'], '%.1f' % oa['good_at'] if 'good_at' in oa else 'never',
                 IMPLICIT_MS, HANDOVER_MS, lk, shows(got), sorted(bl) or 'none'))
    finally:
        b.d.p.send_signal(signal.SIGCONT)
    wb = b.write(PROBE_LBA, os.urandom(4096))
    st_b = b.wait_lock('fenced', CHECK_MS / 1000 + SLACK_S)
    # 04/0B when the write itself finds the cluster refusing B, 04/0C (unavailable) when B's
    # lock check, overdue after SIGCONT, found it first
    check('implicit-stopped-fenced', wb[0] == 2 and
          sense3(wb[1]) in ((2, 4, 0x0b), (2, 4, 0x0c)) and st_b == 'fenced',
          "continued B's first write: %s; B says %s" % (fmt(*wb), st_b))
    ledger.check(report, 'implicit-final-verify', a)


def test_split(tmp, conf, gws, cl):
    """The locks of the target's two LUs on different gateways (an operator broke one with
    iscsi_break_rbd_lock, fencing A): every gateway reports transitioning, and the split heals
    by itself: B, holding LUN 0's lock, takes LUN 1's (its holder A, fenced, does not answer);
    then, A restarted takes both back with SET TARGET PORT GROUPS (B hands both over) and B
    breaks LUN 1's alone: holding only that one, B asks for LUN 0's and, A silent, breaks it."""
    start3(tmp, conf, gws)
    a, b, c = gws['a'], gws['b'], gws['c']
    ledger = Ledger(LU_BLOCKS, LEDGER_LBA)
    n, why = ledger.write_some(a, 32, (0, 1))
    for rnd, lun in (('lun0', 0), ('lun1', 1)):
        if rnd == 'lun1':
            a.stop()
            gws['a'] = a = Gateway(tmp, conf, 'a', 1, [1, 2, 3])
            a.wait_lock(None)
            st, sense, took = a.stpg((AO, 1))
            took2, got = wait_rtpg(gws, want3(1), CHECK_MS / 1000 + SLACK_S)
            n, why = ledger.write_some(a, 32, (0, 1))
            check('split-retake', st == 0 and locks(gws) == {'a': 'owner', 'b': 'standby',
                                                            'c': 'standby'} and
                  got == want3(1) and n == 32,
                  'A restarted, SET TARGET PORT GROUPS g1=AO through A: %s in %.2f s; locks %s; '
                  '%s; %d of 32 writes through A acknowledged %s'
                  % (fmt(st, sense), took, locks(gws), shows(got), n, why or ''))
        r = b.break_lock(lun)
        t0, seen, wb = time.monotonic(), {}, None
        # transitioning while split: from the lock check that sees the split until the heal
        # (HA_HEAL_MS later); polled until both gateways and B's write showed it
        while time.monotonic() - t0 < CHECK_MS / 1000 + HEAL_S + SLACK_S and \
                not ('b' in seen and 'c' in seen and wb is not None):
            for nm in 'bc':
                g = gws[nm].rtpg()
                if isinstance(g, dict) and TRANS in g.values():
                    seen[nm] = show(g)
            if wb is None:
                wb = b.write(PROBE_LBA, os.urandom(4096), 1 - lun)
            time.sleep(0.1)
        want = {n: want3(2)[n] for n in 'bc'}
        took2, got = wait_rtpg({n: gws[n] for n in 'bc'}, want,
                              HEAL_S + HANDOVER_MS / 1000 + 5)
        lk = locks({n: gws[n] for n in 'bc'})
        healed = [ln for ln in b.d.output().splitlines() if 'locks are split' in ln]
        check('split-%s' % rnd, 'b' in seen and 'c' in seen and wb and wb[0] == 2 and
              sense3(wb[1]) == (2, 4, 0x0a) and got == want and
              lk == {'b': 'owner', 'c': 'standby'} and healed,
              'B broke LUN %d\'s lock (%s): transitioning seen on %s; a write through B to LUN '
              '%d meanwhile: %s; healed %.1f s later: %s; locks %s; B logged: %s'
              % (lun, r.get('result', r.get('error', {})).get('state'), seen, 1 - lun,
                 fmt(*wb) if wb else '-', took2, shows(got), lk, healed[-1:]))
        ledger.check(report, 'split-%s-verify' % rnd, b)


def scenario(cl, tmp):
    for img in IMAGES:
        cl.create_image(img, '%dM' % IMAGE_MIB)
    gws, t0 = {}, time.monotonic()
    try:
        for t in (test_idle, test_three, test_handover, test_planned, test_implicit,
                  test_split):
            try:
                if t == test_idle:
                    t(tmp, cl.conf, gws)
                else:
                    t(tmp, cl.conf, gws, cl)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                report('FAIL', t.__name__, '%s: %s' % (type(e).__name__, str(e)[:300]))
            for g in list(gws):
                gws.pop(g).stop()
        report('PASS' if not report.failed else 'FAIL', 'summary',
               'total %.0f s' % (time.monotonic() - t0))
    finally:
        for g in gws.values():
            g.stop()


def main():
    return ixceph.run_with_cluster(report, 'ha_own', scenario, tools=('rados',),
                                   detail='%s cluster up in %.0f s')


if __name__ == '__main__':
    report.main(main)
