#!/usr/bin/env python3
"""A fenced gateway rejoins the cluster without a restart (rbd.rejoin_after_ms, iscsi_rejoin_lun,
`ix-ctl lun rejoin`; docs/ha.md, "Fencing and rejoin"). Its own memstore single-node cluster
(tests/ceph/cluster.sh). Gateway A: portal tpgt 1 in ALUA group 1, rejoin_after_ms REJOIN_MS
(automatic), implicit failover off (so its standby path answers 2/04/0B, not 2/04/0A), and a
second target with an image without lock or PR on the same cluster connection; gateway B: tpgt
2 in group 2, rejoin_after_ms 0 (only when asked), implicit_failover_ms IMPLICIT_MS. One image
with exclusive_lock and "pr_store": "rados". Each gateway keeps one session for the whole test
(the same TCP connection: sessions survive fencing and rejoin). Every write a gateway
acknowledged goes into a ledger that is read back through the owner after each failover and
at the end.

  1. explicit: A owns; a reservation state (a registration through each gateway, Write
     Exclusive - Registrants Only through A); iscsi_break_rbd_lock through B (SET TARGET PORT
     GROUPS would ask A, which hands the lock over and is not fenced); A's next write 2/04/0B
     (or 2/04/0C when the PR store's watch or A's lock thread found the blocklisting first), A
     "fenced", REPORT TARGET PORT GROUPS through A: group 1 unavailable; A's other LU (same
     connection) fenced too, its write 4/08/00; A rejoins by itself within REJOIN_MS + a bound
     ("connected", count 1, lock "standby" once the new thread set the lock policy); on A's
     old session writes: 2A/06 first (from the lock's thread), then 2/04/0B (one more 2A/06 at
     most), and REPORT TARGET PORT GROUPS group 1 standby, 2 active/optimized; A's other LU
     with the lock comes back standby and a write does not take its free lock, the one
     without serves again (a write reads back); the rejoined A's ownership thread is on the
     new connection: SET TARGET PORT GROUPS through A (B hands over) and then through B (A
     answers and hands back), each well within handover_timeout_ms and with no new blocklist
     entry; failback (iscsi_break_rbd_lock through A): A owner, B fenced; the ledger reads
     back through A;
  2. manual: B stays fenced (rejoin_after_ms 0) for longer than REJOIN_MS; a PERSISTENT
     RESERVE OUT through fenced B is refused and a reservation change through A (A's key)
     is one B misses; `ix-ctl lun rejoin` on B: B rejoins, standby, and its READ KEYS
     (PRgeneration and keys) equal the object's; a second `ix-ctl lun rejoin` is refused
     (not fenced); `ix-ctl lun status` shows the connection and the count;
  3. SIGSTOP: A stopped, writes through B take the lock over implicitly (after
     implicit_failover_ms and handover_timeout_ms: A does not answer); SIGCONT: A's first
     write 2/04/0B (or 2/04/0C), A rejoins by itself, standby, then writes 2/04/0B; the ledger
     reads back through B; failback through A, B rejoined by `ix-ctl lun rejoin`; then writes
     through A (the holder) and rejoined B at once for 2.5 x IMPLICIT_MS: B's implicit
     requests are refused, every write through A acknowledged, no new blocklist entry;
  4. unreachable: A fenced again (iscsi_break_rbd_lock through B) and the monitor stopped
     (SIGSTOP): the rejoin fails, is retried, and the management API and `ix-ctl lun status`
     say why ("cluster unreachable"); meanwhile INQUIRY, REPORT LUNS and REPORT TARGET PORT
     GROUPS answer and READ gets 2/04/0C; monitor continued: A rejoins;
  5. cycles: CYCLES fence/rejoin cycles of each gateway (A by itself, B by hand); the open file
     descriptors and RSS of both daemons after the first cycle and after the last: no fd
     more, RSS growth below RSS_SLACK_KB (ASan's quarantine is kept at 8 MiB for this);
  6. SPC-2 (registrations cleared first, registered again after): RESERVE(6) through A
     (owner), A fenced by iscsi_break_rbd_lock through B and rejoined by itself: the object's
     holder is A's nexus under A's new client id (the old one has no address entry any more),
     B's RESERVE(6) conflicts, and after failback A's holder writes and its RELEASE(6) clears
     the object; a second session of B reserves, B is fenced and stays so, A's RESERVE(6)
     takes it, and B's rejoin leaves it to A; the second session reserves again, B is fenced,
     the session logs out while B cannot write the object, and B's rejoin releases it (A's
     RESERVE(6) is GOOD at once);
  7. at the end every acknowledged block reads back through the owner (0 errors, 0
     miscompares), and both gateways' READ KEYS equal the object's;
  8. a third gateway with "pr_store": "rados" whose cluster does not answer at start comes up
     with the LU offline (it used to crash), and once `ix-ctl lun online` opens the image its
     READ KEYS equal the object's.

Skips (77) only when Ceph or ix-target is missing. Environment: IX_BUILD, IX_OUT, IX_RESULTS.
"""

import json
import os
import re
import shutil
import signal
import struct
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixceph  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, OUT, rpc, run  # noqa: E402
import ixha  # noqa: E402
from ixha import (  # noqa: E402
    AO, BS, STANDBY, UNAVAIL, Ledger, fmt, parse_keys, sense3, show)

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:rejoin'
IQN_PLAIN = 'iqn.2024-01.org.ix.test:rejoin-plain'  # A only, no ALUA: LUN 0 with the lock, 1 without
INITIATOR = 'iqn.2024-01.org.ix.test:rejoin-client'
IMAGE, PLAIN, PLAIN2 = 'rj', 'rjplain', 'rjplain2'
IMPLICIT_MS = 3000
REJOIN_MS = 2000
HANDOVER_S = 5  # rbd.handover_timeout_ms's default: a holder that does not answer is broken
REJOIN_BOUND_S = 15  # a rejoin on a loaded 2-core machine: detach, connect, open, watch, read
CYCLES = 5
RSS_SLACK_KB = 8192
LOCK_CHECK_S = 1  # rbd.lock_check_ms's default
SLACK_S = 4  # a loaded 2-core machine, added to bounds derived from the configuration
# a hand-over answered at once shows within a lock check; a fenced gateway's refused write
# or its next lock check finds the blocklist (a Ceph round trip each: twice the slack)
STATE_S = LOCK_CHECK_S + SLACK_S
FENCED_S = 2 * (LOCK_CHECK_S + SLACK_S)
KEY_A, KEY_A2 = 0xaaaa0000aaaa0001, 0xaaaa0000aaaa0002
KEY_B, KEY_B2 = 0xbbbb0000bbbb0001, 0xbbbb0000bbbb0002
IMAGE_MIB = 64  # IMAGE's size: the ledger's blocks stay inside it
report = ixtest.Reporter('ha_rejoin')


def log(msg):
    print('[ha_rejoin %s] %s' % (time.strftime('%H:%M:%S'), msg), file=sys.stderr, flush=True)


check = report.check


class Gateway(ixha.Gateway):
    """One ix-target with one session kept for the whole test."""

    def __init__(self, tmp, conf, name, group, rejoin_ms, implicit_ms, plain=False):
        cfg = self.base(tmp, name, group, host=HOST)
        cfg['targets'] = [self.rbd_pr_target(
            IQN, IMAGE, conf, '0x6001405a0f0e0d0d', 'ixrejoin',
            rbd={'osd_op_timeout_s': 5, 'connect_timeout_s': 3, 'rejoin_after_ms': rejoin_ms},
            alua={'implicit_failover_ms': implicit_ms})]
        if plain:  # the same cluster connection (same conf, client, timeouts): fenced together
            cfg['targets'].append({'name': IQN_PLAIN, 'luns': [
                {'lun': n, 'backend': 'rbd',
                 'rbd': {'pool': 'rbd', 'image': img, 'conf': conf, 'osd_op_timeout_s': 5,
                         'connect_timeout_s': 3, 'rejoin_after_ms': rejoin_ms,
                         'exclusive_lock': n == 0}} for n, img in ((0, PLAIN), (1, PLAIN2))]})
        self.launch('ha_rejoin', tmp, cfg, IQN, INITIATOR,
                    isid=bytes.fromhex('80000000d00%d' % group))
        self.plain = None
        if plain:
            self.plain = X.Session(HOST, self.port, initiator=INITIATOR, target=IQN_PLAIN,
                                   timeout=30)
            self.plain.login()
            self.plain.lun = 0

    def status(self, target=IQN, lun=0):
        r = rpc(self.sock, 'iscsi_get_luns', {'target': target})
        return ([x for x in r.get('result') or [] if x.get('lun') == lun] or [{}])[0] \
            .get('status', {})

    def lock(self):
        return self.status().get('lock', {}).get('state')

    def rejoin(self):
        return self.status().get('rejoin', {})

    def wait(self, cond, secs, target=IQN, lun=0):
        """Poll the LUN's status until cond(status): (seconds, status, met)."""
        t0 = time.monotonic()
        while True:
            st = self.status(target, lun)
            if cond(st):
                return time.monotonic() - t0, st, True
            if time.monotonic() - t0 > secs:
                return time.monotonic() - t0, st, False
            time.sleep(0.1)

    def wait_lock(self, want, secs=30):
        return self.wait(lambda st: st.get('lock', {}).get('state') == want, secs)[1] \
            .get('lock', {}).get('state')

    def wait_rejoined(self, count, secs, target=IQN, lun=0):
        """Until the LUN's connection rejoined count times and its lock is settled (a rejoined
        image's ownership thread sets the lock policy first, "acquiring", then "standby")."""
        return self.wait(lambda st: st.get('rejoin', {}).get('state') == 'connected' and
                         st.get('rejoin', {}).get('count', 0) >= count and
                         st.get('lock', {}).get('state') != 'acquiring', secs, target, lun)

    def resources(self):
        """(open fds, RSS in KiB) of the daemon."""
        pid = self.d.p.pid
        fds = len(os.listdir('/proc/%d/fd' % pid))
        with open('/proc/%d/status' % pid) as f:
            rss = int(re.search(r'VmRSS:\s+(\d+)', f.read()).group(1))
        return fds, rss

    def ixctl(self, *args):
        return run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', self.sock] + list(args), 60)

    def close(self):
        for s in (self.s, self.plain):
            try:
                if s:
                    s.close()
            except Exception:  # noqa: BLE001
                pass



def rj(st):
    r = st.get('rejoin', {})
    return '%s (count %s%s): %s' % (r.get('state'), r.get('count'),
                                    ', attempts %s' % r['attempts'] if 'attempts' in r else '',
                                    r.get('reason', ''))


def obj_keys(cl):
    """(PRgeneration, sorted keys) of the reservation object (format: src/scsi/pr_obj.c)."""
    r = cl.try_tool('rados', '-p', 'rbd', 'get', 'ix.pr.' + IMAGE, '/dev/stdout', timeout=60)
    gen = re.search(r'^generation (\d+)$', r.stdout, re.M)
    keys = sorted(int(k, 16) for k in re.findall(r'^reg ([0-9a-f]{16}) ', r.stdout, re.M))
    return (int(gen.group(1)), keys) if gen else r.stderr.strip()[-200:]


def plain_write(gw, data, lun=0):
    """A write to LBA 64 of one of A's other LUs."""
    gw.plain.lun = lun
    st, _, sense, _ = gw.plain.scsi_retry_ua(bytes([0x8a, 0x08]) +
                                             struct.pack('>QIBB', 64, 8, 0, 0),
                                             write_data=data)
    return st, sense or b''


def plain_check(gw, lun):
    """Write LBA 64 of one of A's other LUs and read it back: (write status, same data)."""
    data = os.urandom(4096)
    w = plain_write(gw, data, lun)
    st, d, _, _ = gw.plain.scsi_retry_ua(bytes([0x88, 0]) + struct.pack('>QIBB', 64, 8, 0, 0),
                                         read_len=4096)
    return fmt(*w), st == 0 and bytes(d) == data


def fence_by(winner, loser, ledger):
    """iscsi_break_rbd_lock through winner (SET TARGET PORT GROUPS would ask the live holder,
    which hands the lock over and is not fenced): winner owner, then loser's next write is
    refused and loser says fenced. Returns ((0 when winner is the owner, what the break said),
    loser's write, loser's lock)."""
    r = rpc(winner.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': 0}).get('result') or {}
    st = (0 if r.get('state') == 'owner' else 1,
          'iscsi_break_rbd_lock through %s: %s (%s)' % (winner.name.upper(), r.get('state'),
                                                      r.get('reason')))
    w = loser.write(ledger.old_lba() or 0,
                    os.urandom(4096))
    return st, w, loser.wait_lock('fenced', FENCED_S)


def blocklist(cl):
    return {ln.split()[0] for ln in cl.blocklist().splitlines() if ln.strip()}


def stpg_timed(gw):
    t0 = time.monotonic()
    st = gw.stpg((AO, gw.group))[:2]
    return st, time.monotonic() - t0


def handover_rejoined(a, b, ledger, cl):
    """The rejoined gateway's ownership thread is on its new connection: it asks (notify) and
    answers (watch) there. SET TARGET PORT GROUPS through rejoined A: B hands the lock over;
    then through B: A answers B's request and hands it back, well within
    handover_timeout_ms (a watch left on the fenced connection would not answer, and B would
    break A's lock after it). Nobody is fenced either time."""
    bl0 = blocklist(cl)
    st1, t1 = stpg_timed(a)
    la, lb = a.wait_lock('owner', STATE_S), b.wait_lock('standby', STATE_S)
    n1, _ = ledger.write_some(a, 4, rewrite_every=2)
    check('rejoined-asks', st1[0] == 0 and t1 < HANDOVER_S and la == 'owner' and
          lb == 'standby' and n1 == 4 and not blocklist(cl) - bl0,
          'SET TARGET PORT GROUPS g1=AO through rejoined A: %s in %.2f s; A %s, B %s; %d of 4 '
          'writes through A acknowledged; new blocklist entries: %s'
          % (fmt(*st1), t1, la, lb, n1, sorted(blocklist(cl) - bl0) or 'none'))
    st2, t2 = stpg_timed(b)
    la, lb = a.wait_lock('standby', STATE_S), b.wait_lock('owner', STATE_S)
    n2, _ = ledger.write_some(b, 4, rewrite_every=2)
    check('rejoined-answers', st2[0] == 0 and t2 < HANDOVER_S and la == 'standby' and
          lb == 'owner' and n2 == 4 and not blocklist(cl) - bl0,
          'SET TARGET PORT GROUPS g2=AO through B, rejoined A holding the lock: %s in %.2f s '
          '(handover_timeout_ms %d); A %s, B %s; %d of 4 writes through B acknowledged; new '
          'blocklist entries: %s' % (fmt(*st2), t2, HANDOVER_S * 1000, la, lb, n2,
                                     sorted(blocklist(cl) - bl0) or 'none'))


def phase_explicit(gws, ledger, cl):
    a, b = gws['a'], gws['b']
    st_a, st_b = a.wait_lock('owner'), b.wait_lock('standby')
    ra, rb = a.rtpg(), b.rtpg()
    check('start', st_a == 'owner' and st_b == 'standby' and ra == {1: AO, 2: STANDBY} and
          rb == {1: AO, 2: STANDBY} and a.rejoin().get('state') == 'connected' and
          a.rejoin().get('count') == 0,
          'A %s %s, B %s %s; A connection %s' % (st_a, show(ra), st_b, show(rb),
                                                  rj(a.status())))
    # the reservation state the rejoins must read back
    pr = [a.prout(0, 0, 0, KEY_A), b.prout(0, 0, 0, KEY_B), a.prout(1, 5, KEY_A, 0)]
    n, why = ledger.write_some(a, 32, rewrite_every=2)
    check('setup', all(p[0] == 0 for p in pr) and n == 32,
          'REGISTER through A and B, RESERVE (WE-RO) through A: %s; %d of 32 writes through '
          'A acknowledged %s' % (', '.join(fmt(*p) for p in pr), n, why or ''))
    st, w, lk = fence_by(b, a, ledger)
    t_fenced = time.monotonic()
    stat, p0, p1 = a.status(), a.status(IQN_PLAIN, 0), a.status(IQN_PLAIN, 1)
    a.rtpg()  # the first command after the change sets the states and posts 2A/06 ...
    ra = a.rtpg()  # ... which this one takes (and retries): no unit attention left
    pw0, pw1 = plain_write(a, os.urandom(4096), 0), plain_write(a, os.urandom(4096), 1)
    check('fenced', st[0] == 0 and w[0] == 2 and sense3(w[1]) in ((2, 4, 0x0b), (2, 4, 0x0c))
          and lk == 'fenced' and stat.get('rejoin', {}).get('state') in ('fenced', 'rejoining')
          and ra == {1: UNAVAIL, 2: AO},
          '%s; A write %s (04/0B: the write found it, 04/0C: the PR watch or the lock check '
          'did first); A lock %s, connection %s; A reports %s'
          % (st[1], fmt(*w), lk, rj(stat), show(ra)))
    check('fenced-same-connection', p0.get('lock', {}).get('state') == 'fenced' and
          p1.get('rejoin', {}).get('state') in ('fenced', 'rejoining') and
          sense3(pw0[1]) == (2, 4, 0x0b) and pw1[0] == 2 and sense3(pw1[1]) == (4, 8, 0),
          "A's other LUs on the same connection, no ALUA: with the lock %s, write %s (want "
          '2/04/0B); without %s, write %s (want 4/08/00, as the blocklisted connection '
          'answers)' % (p0.get('lock', {}).get('state'), fmt(*pw0), rj(p1), fmt(*pw1)))
    took, stat, ok = a.wait_rejoined(1, REJOIN_MS / 1000 + REJOIN_BOUND_S)
    took = time.monotonic() - t_fenced
    check('auto-rejoin', ok and stat.get('lock', {}).get('state') == 'standby' and
          took >= REJOIN_MS / 1000 - 0.5,
          'A rejoined after %.1f s (rejoin_after_ms %d): connection %s, lock %s: %s'
          % (took, REJOIN_MS, rj(stat), stat.get('lock', {}).get('state'),
             stat.get('lock', {}).get('reason')))
    # the same session: the lock's thread gave the LU's nexuses ASYMMETRIC ACCESS STATE
    # CHANGED when its state changed, so the first command reports it; the states follow
    # (standby: 2/04/0B); the command that brings them in line may post 2A/06 once more (the
    # change counter is the process's: A's other LUs rejoined at the same time); then standby
    seen = []
    for _ in range(4):
        s, _, sn = a.raw([0x8a, 0x08] + list(struct.pack('>QIBB', 0, 8, 0, 0)),
                         write_data=os.urandom(4096))
        seen.append(fmt(s, sn))
    ra = a.rtpg()
    sb0, ua = 'status 0x02 sense 2/04/0b', 'status 0x02 sense 6/2a/06'
    check('standby-after-rejoin', seen[0] == ua and seen[-1] == sb0 and
          set(seen) == {ua, sb0} and seen.count(ua) <= 2 and ra == {1: STANDBY, 2: AO},
          "A's old session after the rejoin, four writes: %s; A reports %s" % (seen, show(ra)))
    # A's other LUs: the one with the lock comes back standby although its lock was free
    # (its fenced client's lock is broken by the new one): a write must not take it
    _, p0, ok0 = a.wait_rejoined(1, REJOIN_BOUND_S, IQN_PLAIN, 0)
    _, p1, ok1 = a.wait_rejoined(1, REJOIN_BOUND_S, IQN_PLAIN, 1)
    pw0 = plain_write(a, os.urandom(4096), 0)
    lk0 = a.status(IQN_PLAIN, 0).get('lock', {})
    brk = rpc(a.sock, 'iscsi_break_rbd_lock', {'target': IQN_PLAIN, 'lun': 0}).get('result', {})
    w0, same0 = plain_check(a, 0)
    w1, same1 = plain_check(a, 1)
    check('same-connection-rejoined', ok0 and ok1 and p1.get('rejoin', {}).get('count') == 1 and
          p0.get('lock', {}).get('state') == 'standby' and sense3(pw0[1]) == (2, 4, 0x0b) and
          lk0.get('state') == 'standby' and brk.get('state') == 'owner' and same0 and same1,
          "A's other LUs rejoined: with the lock %s (%s), a write %s (want 2/04/0B: a standby "
          'never takes a free lock by writing), lock still %s; iscsi_break_rbd_lock: %s, then '
          'write %s, read back %s; without the lock (%s): write %s, read back %s'
          % (p0.get('lock', {}).get('state'), p0.get('lock', {}).get('reason'), fmt(*pw0),
             lk0.get('state'), brk.get('state'), w0, 'the same' if same0 else 'not the same',
             rj(p1), w1, 'the same' if same1 else 'not the same'))
    handover_rejoined(a, b, ledger, cl)
    st, w, lk = fence_by(a, b, ledger)
    ra = a.rtpg()
    n, why = ledger.write_some(a, 16, rewrite_every=2)
    check('failback', st[0] == 0 and ra == {1: AO, 2: STANDBY} and lk == 'fenced' and
          n == 16, 'through rejoined A, %s, A reports %s; B write %s, B lock %s; %d of 16 '
          'writes through A acknowledged %s' % (st[1], show(ra), fmt(*w), lk, n, why or ''))
    ledger.check(report, 'failback-verify', a)


def phase_manual(gws, ledger, cl):
    a, b = gws['a'], gws['b']
    time.sleep(REJOIN_MS / 1000 + 1)
    stat = b.status()
    check('manual-stays-fenced', stat.get('rejoin', {}).get('state') == 'fenced' and
          stat.get('lock', {}).get('state') == 'fenced' and
          'next_attempt_s' not in stat.get('rejoin', {}),
          'B (rejoin_after_ms 0) %.0f s after it was fenced: connection %s'
          % (REJOIN_MS / 1000 + 1, rj(stat)))
    t0 = time.monotonic()
    pr = b.prout(6, 0, KEY_B, KEY_B2)  # REGISTER AND IGNORE through fenced B: refused
    a_pr = a.prout(6, 0, 0, KEY_A2)  # a change through A that B misses: A's new key
    took_pr = time.monotonic() - t0
    obj = obj_keys(cl)
    r = b.ixctl('lun', 'rejoin', IQN, '0')
    took, stat, ok = b.wait_rejoined(1, REJOIN_BOUND_S)
    keys_b = b.read_keys()
    check('manual-rejoin', r.returncode == 0 and 'rejoin started' in r.stdout and ok and
          stat.get('lock', {}).get('state') == 'standby',
          'ix-ctl lun rejoin on B: exit %d "%s"; B %s after %.1f s, lock %s'
          % (r.returncode, r.stdout.strip(), rj(stat), took,
             stat.get('lock', {}).get('state')))
    check('pr-reread', pr[0] == 2 and a_pr[0] == 0 and isinstance(obj, tuple) and
          keys_b == obj and obj[1] == sorted([KEY_A2, KEY_B]),
          'PR OUT through fenced B: %s; through A: %s (%.1f s for both); object: %s; READ KEYS '
          'through rejoined B: %s' % (fmt(*pr), fmt(*a_pr), took_pr, obj, keys_b))
    r = b.ixctl('lun', 'rejoin', IQN, '0')
    check('manual-rejoin-refused', r.returncode == 1 and 'not fenced' in r.stderr,
          'a second ix-ctl lun rejoin on connected B: exit %d "%s"'
          % (r.returncode, r.stderr.strip()))
    r = b.ixctl('lun', 'status', IQN)
    check('lun-status', r.returncode == 0 and 'connection connected' in r.stdout and
          '1 rejoins' in r.stdout, 'ix-ctl lun status on B: "%s"' % r.stdout.strip())


def phase_sigstop(gws, ledger, cl):
    a, b = gws['a'], gws['b']
    count = a.rejoin().get('count', 0)
    a.d.p.send_signal(signal.SIGSTOP)
    try:
        took, seen, res = ledger.write_until_good(b, IMPLICIT_MS / 1000 + 20)
        check('sigstop-takeover', res == 'GOOD' and b.rtpg() == {1: STANDBY, 2: AO},
              'A stopped, writes through B: %s after %.1f s, refused meanwhile %s'
              % (res, took, seen))
    finally:
        a.d.p.send_signal(signal.SIGCONT)
    wa = a.write(ledger.old_lba(), os.urandom(4096))
    t_fenced = time.monotonic()
    lk = a.wait_lock('fenced', STATE_S)
    took, stat, ok = a.wait_rejoined(count + 1, REJOIN_MS / 1000 + REJOIN_BOUND_S)
    took = time.monotonic() - t_fenced
    wa2 = a.write(0, os.urandom(4096))
    # 04/0B when the write itself finds the cluster refusing A, 04/0C (unavailable) when A's
    # lock thread (its watch or its overdue lock check) found it first, 04/0A when that check
    # first saw B holding the lock (A standby: a standby path's write gets 04/0A while an
    # implicit failover may follow, docs/ha.md) before it learnt that A is blocklisted. All
    # three refuse the write; what matters is that A, fenced, acknowledged nothing.
    check('sigcont-rejoin', wa[0] == 2 and
          sense3(wa[1]) in ((2, 4, 0x0a), (2, 4, 0x0b), (2, 4, 0x0c)) and
          lk == 'fenced' and
          ok and stat.get('lock', {}).get('state') == 'standby' and
          sense3(wa2[1]) == (2, 4, 0x0b),
          "resumed A's first write %s, lock %s; rejoined after %.1f s: %s, lock %s; then a "
          "write %s" % (fmt(*wa), lk, took, rj(stat), stat.get('lock', {}).get('state'),
                        fmt(*wa2)))
    ledger.check(report, 'sigstop-verify', b)
    # failback, and B (manual) back as standby
    cb = b.rejoin().get('count', 0)
    st, w, lk = fence_by(a, b, ledger)
    r = b.ixctl('lun', 'rejoin', IQN, '0')
    _, stat, ok = b.wait_rejoined(cb + 1, REJOIN_BOUND_S)
    n, why = ledger.write_some(a, 16, rewrite_every=2)
    check('sigstop-failback', st[0] == 0 and lk == 'fenced' and ok and n == 16,
          '%s, B %s, then rejoined by ix-ctl (exit %d): %s; %d of 16 writes through A %s'
          % (st[1], lk, r.returncode, rj(stat), n, why or ''))
    both_paths(a, b, ledger, cl)


def both_paths(a, b, ledger, cl):
    """An initiator that writes through every path (multibus) after a rejoin: rejoined B's
    implicit failover asks holder A, which refuses while it gets I/O; nobody is fenced and the
    lock does not bounce (it used to: B broke A's lock, A rejoined, ...)."""
    bl0, seen, good_a, tries, t0 = blocklist(cl), {}, 0, 0, time.monotonic()
    while time.monotonic() - t0 < IMPLICIT_MS / 1000 * 2.5:
        n, _ = ledger.write_some(a, 1, rewrite_every=2)
        good_a, tries = good_a + n, tries + 1
        st, sense = b.write(ledger.new_lba(), os.urandom(4096))
        seen[fmt(st, sense)] = seen.get(fmt(st, sense), 0) + 1
        time.sleep(0.1)
    la, lb = a.lock(), b.lock()
    check('both-paths-after-rejoin', la == 'owner' and lb == 'standby' and good_a == tries and
          'status 0x00' not in seen and not blocklist(cl) - bl0 and
          'status 0x02 sense 2/04/0b' in seen,
          'writes through A and rejoined B for %.1f s (B implicit_failover_ms %d): %d of %d '
          'through A acknowledged, through B %s; then A %s, B %s; new blocklist entries: %s'
          % (time.monotonic() - t0, IMPLICIT_MS, good_a, tries, seen, la, lb,
             sorted(blocklist(cl) - bl0) or 'none'))


def mon_pid(cl):
    with open(os.path.join(cl.path, 'run', 'mon.a.pid')) as f:
        return int(f.read().strip())


def phase_unreachable(gws, ledger, cl):
    a, b = gws['a'], gws['b']
    count = a.rejoin().get('count', 0)
    st, w, lk = fence_by(b, a, ledger)
    mon = mon_pid(cl)
    os.kill(mon, signal.SIGSTOP)
    try:
        took, stat, ok = a.wait(lambda s: 'cluster unreachable' in
                                s.get('rejoin', {}).get('reason', ''), REJOIN_MS / 1000 + 20)
        fenced_stat = a.status()
        check('unreachable-retries', st[0] == 0 and lk == 'fenced' and ok and
              fenced_stat.get('rejoin', {}).get('state') == 'rejoining' and
              fenced_stat.get('rejoin', {}).get('attempts', 0) >= 1 and
              fenced_stat.get('lock', {}).get('state') == 'fenced',
              'A fenced (%s), monitor stopped: after %.1f s connection %s, lock %s'
              % (fmt(*w), took, rj(fenced_stat), fenced_stat.get('lock', {}).get('state')))
        r = a.ixctl('lun', 'status', IQN)
        check('unreachable-status', 'connection rejoining: cluster unreachable' in r.stdout,
              'ix-ctl lun status on A: "%s"' % r.stdout.strip())
        inq = a.cmd([0x12, 0, 0, 0, 96, 0], read_len=96)
        rl = a.cmd([0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], read_len=256)
        ra = a.rtpg()
        rd = a.read(0, 8)
        check('rejoining-answers', inq[0] == 0 and rl[0] == 0 and ra == {1: UNAVAIL, 2: AO} and
              rd[0] == 2 and sense3(rd[2]) == (2, 4, 0x0c),
              'while A rejoins: INQUIRY %s, REPORT LUNS %s, REPORT TARGET PORT GROUPS %s, '
              'READ %s' % (fmt(inq[0], inq[2]), fmt(rl[0], rl[2]), show(ra),
                          fmt(rd[0], rd[2])))
    finally:
        os.kill(mon, signal.SIGCONT)
    took, stat, ok = a.wait_rejoined(count + 1, 60 + REJOIN_BOUND_S)
    check('unreachable-rejoin', ok and stat.get('lock', {}).get('state') == 'standby',
          'monitor continued: A %s after %.1f s, lock %s' % (rj(stat), took,
                                                            stat.get('lock', {}).get('state')))


def one_cycle(gws, ledger):
    """B takes over (A fenced, rejoins by itself), A takes back (B fenced, rejoined by hand)."""
    a, b = gws['a'], gws['b']
    ca, cb = a.rejoin().get('count', 0), b.rejoin().get('count', 0)
    st1, _, lka = fence_by(b, a, ledger)
    n1, _ = ledger.write_some(b, 4, rewrite_every=2)
    _, sa, oka = a.wait_rejoined(ca + 1, REJOIN_MS / 1000 + REJOIN_BOUND_S)
    st2, _, lkb = fence_by(a, b, ledger)
    n2, _ = ledger.write_some(a, 4, rewrite_every=2)
    r = b.ixctl('lun', 'rejoin', IQN, '0')
    _, sb, okb = b.wait_rejoined(cb + 1, REJOIN_BOUND_S)
    return (st1[0] == 0 and st2[0] == 0 and lka == 'fenced' and lkb == 'fenced' and
            n1 == 4 and n2 == 4 and oka and okb and r.returncode == 0,
            'A %s, B %s' % (rj(sa), rj(sb)))


def phase_cycles(gws, ledger):
    a, b = gws['a'], gws['b']
    cb = b.rejoin().get('count', 0)
    st, _, lk = fence_by(a, b, ledger)  # A owns again, B fenced: rejoined by hand
    r = b.ixctl('lun', 'rejoin', IQN, '0')
    _, stat, ok = b.wait_rejoined(cb + 1, REJOIN_BOUND_S)
    check('cycles-setup', st[0] == 0 and lk == 'fenced' and ok,
          'A takes the lock back: %s, B %s, rejoined by hand (exit %d): %s'
          % (st[1], lk, r.returncode, rj(stat)))
    ok, why = one_cycle(gws, ledger)
    time.sleep(1)
    first = a.resources(), b.resources()
    good = ok
    for i in range(CYCLES - 1):
        ok, why2 = one_cycle(gws, ledger)
        good &= ok
        why = why if ok else why2
    time.sleep(1)
    last = a.resources(), b.resources()
    check('cycles', good, '%d fence/rejoin cycles of each gateway: %s' % (CYCLES, why))
    steady = all(last[i][0] <= first[i][0] and last[i][1] - first[i][1] < RSS_SLACK_KB
                 for i in range(2))
    check('no-leak', steady,
          'after cycle 1 / cycle %d: A %d / %d fds, RSS %d / %d KiB; B %d / %d fds, RSS %d / '
          '%d KiB (rejoins: A %s, B %s)'
          % (CYCLES, first[0][0], last[0][0], first[0][1], last[0][1], first[1][0],
             last[1][0], first[1][1], last[1][1], a.rejoin().get('count'),
             b.rejoin().get('count')))


RESERVE6, RELEASE6 = [0x16, 0, 0, 0, 0, 0], [0x17, 0, 0, 0, 0, 0]


def obj_spc2(cl):
    """The reservation object's SPC-2 holder: (client id, initiator port), or None."""
    r = cl.try_tool('rados', '-p', 'rbd', 'get', 'ix.pr.' + IMAGE, '/dev/stdout', timeout=60)
    m = re.search(r'^spc2 ([0-9a-f]{16}) (\S+) \S+$', r.stdout, re.M)
    return (int(m.group(1), 16), m.group(2)) if m else None


def gw_ids(cl):
    """The client ids with an address entry in ix.pr.<image>.gw (gateways on the object)."""
    r = cl.try_tool('rados', '-p', 'rbd', 'listxattr', 'ix.pr.%s.gw' % IMAGE, timeout=60)
    return {int(k[3:]) for k in r.stdout.split() if k.startswith('gw.')}


def iport(gw_isid):
    return '%s,i,0x%s' % (INITIATOR, gw_isid)


def take_lock(winner, loser, ledger):
    """iscsi_break_rbd_lock through winner (a management call: no SCSI command, so an SPC-2
    reservation of another nexus does not stand in its way); loser finds itself fenced (a
    write of a ledger block's own data through it, or its watch). Returns (winner's lock
    state, loser's)."""
    r = rpc(winner.sock, 'iscsi_break_rbd_lock', {'target': IQN, 'lun': 0})
    if ledger.blocks:
        lba = ledger.old_lba()
        loser.write(lba, ledger.blocks[(0, lba)])
    return (r.get('result') or {}).get('state'), loser.wait_lock('fenced', FENCED_S)


def second_session(gw, isid):
    s = X.Session(HOST, gw.port, initiator=INITIATOR, target=IQN, timeout=30,
                  isid=bytes.fromhex(isid))
    s.login()
    s.lun = 0
    return s


def s_cmd(s, cdb):
    st, _, sense, _ = s.scsi_retry_ua(bytes(cdb))
    return st, sense or b''


def phase_spc2(gws, ledger, cl):
    """An SPC-2 reservation held through a gateway that is fenced and rejoins (docs/ha.md,
    "SPC-2 reservations"): kept by a holder that still has it (moved to the new client id,
    so it can be released and checked), released when its nexus went while the gateway was
    fenced, and left to the gateway that took it meanwhile. Registrations make RESERVE a
    no-op or a conflict (SPC-4 5.12.3): they are cleared first and registered again after."""
    a, b = gws['a'], gws['b']
    a_port, b2_isid = iport('80000000d001'), '80000000e002'
    keys0 = a.read_keys()
    clr = a.prout(3, 0, KEY_A2, 0)  # CLEAR with A's key (phase_manual's)
    keys1 = a.read_keys()
    check('spc2-setup', a.lock() == 'owner' and clr[0] == 0 and isinstance(keys1, tuple) and
          keys1[1] == [] and obj_spc2(cl) is None,
          'A %s; READ KEYS %s, CLEAR through A %s, READ KEYS %s'
          % (a.lock(), keys0, fmt(*clr), keys1))
    # 1. kept: A (owner) reserves through its session, is fenced, rejoins by itself
    ca, cb = a.rejoin().get('count', 0), b.rejoin().get('count', 0)
    r1 = a.cmd(RESERVE6)
    o1 = obj_spc2(cl)
    lk = take_lock(b, a, ledger)
    _, sa, oka = a.wait_rejoined(ca + 1, REJOIN_MS / 1000 + REJOIN_BOUND_S)
    o2, ids = obj_spc2(cl), gw_ids(cl)
    rb = b.cmd(RESERVE6)  # B's nexus while A's holds it: conflict (A answers the probe)
    lk2 = take_lock(a, b, ledger)  # failback: A owner again, B fenced (rejoined by hand below)
    lba, data = ledger.new_lba(), os.urandom(4096)
    w = a.write(lba, data)  # the holder's own write
    if w[0] == 0:
        ledger.good(0, lba, data)
    rel = a.cmd(RELEASE6)
    o3 = obj_spc2(cl)
    r = b.ixctl('lun', 'rejoin', IQN, '0')
    _, sb, okb = b.wait_rejoined(cb + 1, REJOIN_BOUND_S)
    check('spc2-rejoin-kept', r1[0] == 0 and o1 and o1[1] == a_port and
          lk == ('owner', 'fenced') and oka and
          o2 and o2[1] == a_port and o2[0] != o1[0] and o2[0] in ids and o1[0] not in ids and
          rb[0] == 0x18 and lk2 == ('owner', 'fenced') and w[0] == 0 and rel[0] == 0 and
          o3 is None and okb,
          'RESERVE(6) through A: %s, object %s; A fenced (%s) and rejoined (%s): object %s, '
          'gateways on the object %s; RESERVE(6) through B: %s; failback %s: the holder\'s '
          'write %s, RELEASE(6) %s, object %s; B %s'
          % (fmt(*r1[::2]), o1, lk[1], rj(sa), o2, sorted(ids), fmt(*rb[::2]), lk2, fmt(*w),
             fmt(*rel[::2]), o3, rj(sb)))
    # 2. taken: B's second session reserves, B is fenced and stays so; A's RESERVE probes
    # B's fenced client and takes it; B rejoins and leaves it to A
    ca, cb = a.rejoin().get('count', 0), b.rejoin().get('count', 0)
    lk = take_lock(b, a, ledger)
    _, sa, oka = a.wait_rejoined(ca + 1, REJOIN_MS / 1000 + REJOIN_BOUND_S)
    s2 = second_session(b, b2_isid)
    try:
        r1 = s_cmd(s2, RESERVE6)
        o1 = obj_spc2(cl)
        lk2 = take_lock(a, b, ledger)
        t0 = time.monotonic()
        ra = a.cmd(RESERVE6)
        took = time.monotonic() - t0
        o2 = obj_spc2(cl)
        r = b.ixctl('lun', 'rejoin', IQN, '0')
        _, sb, okb = b.wait_rejoined(cb + 1, REJOIN_BOUND_S)
        o3 = obj_spc2(cl)
        rel = a.cmd(RELEASE6)
        o4 = obj_spc2(cl)
        check('spc2-rejoin-taken', lk == ('owner', 'fenced') and oka and r1[0] == 0 and o1 and
              o1[1] == iport(b2_isid) and lk2 == ('owner', 'fenced') and ra[0] == 0 and
              o2 and o2[1] == a_port and okb and o3 == o2 and rel[0] == 0 and o4 is None,
              'B owner (%s), A %s; RESERVE(6) through B\'s second session: %s, object %s; A '
              'owner, B %s: RESERVE(6) through A %s after %.1f s, object %s; B %s: object %s; '
              'RELEASE(6) through A %s, object %s'
              % (lk[0], rj(sa), fmt(*r1), o1, lk2[1], fmt(*ra[::2]), took, o2, rj(sb), o3,
                 fmt(*rel[::2]), o4))
        # 3. lost: B's second session reserves again, B is fenced, the session logs out while
        # B cannot write the object; B's rejoin releases it, and A reserves at once
        ca, cb = a.rejoin().get('count', 0), b.rejoin().get('count', 0)
        lk = take_lock(b, a, ledger)
        _, sa, oka = a.wait_rejoined(ca + 1, REJOIN_MS / 1000 + REJOIN_BOUND_S)
        r1 = s_cmd(s2, RESERVE6)
        o1 = obj_spc2(cl)
        lk2 = take_lock(a, b, ledger)
        s2.logout()
        s2.close()
        s2 = None
        o2 = obj_spc2(cl)
        r = b.ixctl('lun', 'rejoin', IQN, '0')
        _, sb, okb = b.wait_rejoined(cb + 1, REJOIN_BOUND_S)
        o3 = obj_spc2(cl)
        t0 = time.monotonic()
        ra = a.cmd(RESERVE6)
        took = time.monotonic() - t0
        rel = a.cmd(RELEASE6)
        check('spc2-rejoin-lost', lk == ('owner', 'fenced') and oka and r1[0] == 0 and o1 and
              o1[1] == iport(b2_isid) and lk2 == ('owner', 'fenced') and o2 == o1 and okb and
              o3 is None and ra[0] == 0 and took < 2 and rel[0] == 0,
              'RESERVE(6) through B\'s second session: %s, object %s; B %s, the session logged '
              'out: object %s; B %s: object %s; RESERVE(6) through A %s in %.1f s, RELEASE(6) '
              '%s' % (fmt(*r1), o1, lk2[1], o2, rj(sb), o3, fmt(*ra[::2]), took,
                      fmt(*rel[::2])))
    finally:
        if s2:
            s2.close()
    ra, rb = a.prout(6, 0, 0, KEY_A2), b.prout(6, 0, 0, KEY_B)  # REGISTER AND IGNORE
    ka, kb = a.read_keys(), b.read_keys()
    check('spc2-registered-again', ra[0] == 0 and rb[0] == 0 and isinstance(ka, tuple) and
          ka == kb and ka[1] == sorted([KEY_A2, KEY_B]) and obj_spc2(cl) is None,
          'REGISTER AND IGNORE through A %s, through B %s; READ KEYS through A %s, through B %s'
          % (fmt(*ra), fmt(*rb), ka, kb))


def phase_final(gws, ledger, cl):
    a, b = gws['a'], gws['b']
    ledger.check(report, 'final-verify', a if a.lock() == 'owner' else b)
    obj, ka, kb = obj_keys(cl), a.read_keys(), b.read_keys()
    check('pr-final', isinstance(obj, tuple) and ka == obj and kb == obj,
          'object %s; READ KEYS through A %s, through B %s' % (obj, ka, kb))


def phase_offline_pr(gws, tmp, cl):
    """A third gateway with "pr_store": "rados" whose cluster does not answer at start comes up
    with the LU offline (it used to crash: the store had no connection to use), and its store
    reads the object once the image opens (`ix-ctl lun online`)."""
    conf, cconf = cl.conf, cl.dead_conf(tmp, 'c-ceph.conf')
    port, sock = ixtest.free_port(), os.path.join(tmp, 'c.sock')
    cfg = {'global': {'mgmt_socket': sock},
           'portals': [{'name': 'p', 'address': HOST, 'port': port, 'tpgt': 3}],
           'targets': [{'name': IQN, 'luns': [
               {'lun': 0, 'backend': 'rbd', 'readonly': True, 'pr_store': 'rados',
                'naa_id': '0x6001405a0f0e0d0d', 'serial': 'ixrejoin',
                'rbd': {'pool': 'rbd', 'image': IMAGE, 'conf': cconf,
                        'connect_timeout_s': 2}}]}]}
    path = os.path.join(tmp, 'c.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    d = ixtest.Daemon(path, 'ha_rejoin.ix-target-c.log', BUILD, OUT)
    s = None
    try:
        st = (rpc(sock, 'iscsi_get_luns', {'target': IQN}).get('result') or [{}])[0] \
            .get('status', {})
        check('pr-offline-start', st.get('state') == 'offline' and
              'cluster unreachable' in st.get('reason', ''),
              'gateway C (pr_store rados, cluster unreachable) started: %s: %s'
              % (st.get('state'), st.get('reason')))
        shutil.copy(conf, cconf)
        r = run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock, 'lun', 'online', IQN,
                 '0'], 60)
        end = time.monotonic() + REJOIN_BOUND_S
        while time.monotonic() < end and st.get('state') != 'online':
            time.sleep(0.2)
            st = (rpc(sock, 'iscsi_get_luns', {'target': IQN}).get('result') or [{}])[0] \
                .get('status', {})
        s = X.Session(HOST, port, initiator=INITIATOR, target=IQN, timeout=30)
        s.login()
        st_k, dk, sk, _ = s.scsi_retry_ua(bytes([0x5e, 0, 0, 0, 0, 0, 0, 4, 0, 0]),
                                          read_len=1024)
        keys = parse_keys(dk) if st_k == 0 else None
        obj = obj_keys(cl)
        check('pr-offline-online', r.returncode == 0 and st.get('state') == 'online' and
              keys == obj, 'ix-ctl lun online (exit %d): %s; READ KEYS through C %s, object %s'
              % (r.returncode, st.get('state'), keys if keys else fmt(st_k, sk or b''), obj))
    finally:
        if s:
            s.close()
        rc = d.stop()
        if ixtest.sanitizer_report(d.output()) or rc not in (0, None):
            report('FAIL', 'sanitizer-c', 'exit %s; see %s' % (rc, d.log_path))


def scenario(cl, tmp):
    conf = cl.conf
    cl.create_image(IMAGE, '%dM' % IMAGE_MIB)
    for img in (PLAIN, PLAIN2):
        cl.create_image(img, '16M')
    gws, ledger = {}, Ledger(IMAGE_MIB * (1 << 20) // BS)
    t0 = time.monotonic()
    try:
        gws['a'] = Gateway(tmp, conf, 'a', 1, REJOIN_MS, 0, plain=True)
        gws['a'].wait_lock('owner')
        gws['b'] = Gateway(tmp, conf, 'b', 2, 0, IMPLICIT_MS)
        phases = [(phase_explicit, (gws, ledger, cl)), (phase_manual, (gws, ledger, cl)),
                  (phase_sigstop, (gws, ledger, cl)), (phase_unreachable, (gws, ledger, cl)),
                  (phase_cycles, (gws, ledger)), (phase_spc2, (gws, ledger, cl)),
                  (phase_final, (gws, ledger, cl)),
                  (phase_offline_pr, (gws, tmp, cl))]
        for ph, args in phases:
            log(ph.__name__)
            try:
                ph(*args)
            except Exception as e:  # noqa: BLE001 (the later phases build on this one)
                traceback.print_exc()
                report('FAIL', ph.__name__, '%s: %s' % (type(e).__name__, str(e)[:300]))
                break
        report('PASS' if not report.failed else 'FAIL', 'summary',
               '%d writes acknowledged, %d distinct blocks checked, rejoins A %s B %s, total '
               '%.0f s' % (ledger.acked, len(ledger.blocks), gws['a'].rejoin().get('count'),
                           gws['b'].rejoin().get('count'), time.monotonic() - t0))
    finally:
        for g in gws.values():
            g.shutdown(report)


def main():
    # ASan's quarantine holds freed memory back from reuse (256 MiB by default): with it the
    # RSS of an ASan build grows with every free and the no-leak check would measure that
    os.environ['ASAN_OPTIONS'] = ':'.join(filter(None, [os.environ.get('ASAN_OPTIONS'),
                                                        'quarantine_size_mb=8']))
    return ixceph.run_with_cluster(report, 'ha_rejoin', scenario, tools=('rados',),
                                   built=('ix-target', 'ix-ctl'),
                                   detail='%s cluster up in %.0f s')


if __name__ == '__main__':
    report.main(main)
