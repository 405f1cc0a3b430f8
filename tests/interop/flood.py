#!/usr/bin/env python3
"""Connection floods (issue 5): one process opens ATTEMPTS connections (default 2000,
IX_FLOOD_ATTEMPTS) from 127.0.0.2 as fast as it can and keeps them open, each a half-open login of a random
kind: nothing sent, part of a Login PDU's header, a whole header whose data never comes, or a
whole first Login PDU and then silence. Meanwhile a legitimate initiator (libiscsi's iscsi-inq)
logs in, runs INQUIRY and logs out again and again. The target runs with its default limits, except
max_pending_logins, set to 64 so that 2000 attempts are 30 times over it, and login_grace_ms, 100
(a portal exposed to floods shortens it; the default, 1000, suits login storms of slow clients).
While 64 connections are logging in, the target accepts no more (they wait in the kernel's listen
backlog) and closes those idle for login_grace_ms: the flood drains 64 connections per grace
period, and the legitimate login waits its turn in the backlog.
The flood runs twice (IX_FLOOD_ROUNDS). Checked:
  - the daemon's descriptors stay within what it had before + max_pending_logins + the 32
    accepted connections that may be on their way to a worker (+16), and its RSS within
    256 KiB for each of those (doubled under ASan, plus its 16 MiB quarantine);
  - the legitimate initiator logs in while each flood's connections are still open, within
    (ATTEMPTS / max_pending_logins + 2) grace periods (and a quarter each: how often the target
    looks for idle ones) of the flood's end, plus iscsi-inq's own 20 s; every attempt succeeds,
    and after the floods;
  - once a flood's sockets are closed, descriptors return to the level before it, and the
    later floods leave RSS within 8 MiB of where the first left it (reuse, not leak);
  - the log says, rate-limited, why connections were dropped.
ix only (it measures the daemon it starts): exits 77 against other peers.
"""

import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402

ixdaemon.skip_unless_ix('fd and RSS measurement of the daemon')

ATTEMPTS = int(os.environ.get('IX_FLOOD_ATTEMPTS', '2000'))
PENDING = 64
GRACE_MS = 100
ROUNDS = int(os.environ.get('IX_FLOOD_ROUNDS', '2'))
IQN = 'iqn.2026-11.io.ix.test:flood'
FLOOD_SRC = '127.0.0.2'  # the flood's source address; the legitimate initiator uses 127.0.0.1
R = ixdaemon.Results('flood')
rng = random.Random(11)


def login_pdu():
    keys = X.encode_keys([('InitiatorName', IQN + '-flood'), ('TargetName', IQN),
                          ('SessionType', 'Normal'), ('AuthMethod', 'None')])
    b = bytearray(X.login_bhs(X.random_isid(), 0, 1, 0, 1, 0, 0, 1, False, False).bytes())
    b[5:8] = len(keys).to_bytes(3, 'big')
    return bytes(b), keys + bytes(X.pad4(len(keys)))


class Legit(threading.Thread):
    """The legitimate initiator: libiscsi's iscsi-inq (login, INQUIRY, logout) in a loop, in
    processes of its own so that the flood's pace in this one never delays it."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.ok = 0
        self.errors = []

    def once(self):
        p = subprocess.run(['timeout', '20', 'iscsi-inq', '-i', IQN + '-legit',
                            'iscsi://127.0.0.1:%d/%s/0' % (self.port, IQN)],
                           capture_output=True, text=True)
        if p.returncode != 0 or 'DIRECT_ACCESS' not in p.stdout:
            raise RuntimeError('iscsi-inq exit %d: %s' %
                               (p.returncode, (p.stdout + p.stderr).strip()[-200:]))

    def run(self):
        while not self.stop.is_set():
            try:
                self.once()
                self.ok += 1
            except Exception as e:
                self.errors.append('%s: %s' % (type(e).__name__, e))
            time.sleep(0.02)


def flood(port, n):
    socks, peak_fds, peak_rss = [], 0, 0
    for i in range(n):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((FLOOD_SRC, 0))
            s.setblocking(False)
            s.connect_ex(('127.0.0.1', port))
            socks.append(s)
        except OSError as e:
            R.report('FAIL', 'flood-client', 'socket %d: %s' % (i, e))
            break
        kind = rng.randrange(4)
        if kind:
            hdr, data = login_pdu()
            payload = [hdr[:rng.randrange(1, 48)], hdr, hdr + data][kind - 1]
            try:
                s.send(payload)
            except OSError:
                pass  # not connected yet, or already dropped by the target: both fine
        if i % 100 == 99:
            peak_fds = max(peak_fds, D.fds())
            peak_rss = max(peak_rss, D.rss_kb())
    return socks, peak_fds, peak_rss


if not shutil.which('iscsi-inq'):
    print('SKIP: iscsi-inq (libiscsi-bin) not installed: run scripts/deps.sh', file=sys.stderr)
    sys.exit(77)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < ATTEMPTS + 256:
    print('SKIP: the open file limit (%d) is too low for %d connections' % (hard, ATTEMPTS),
          file=sys.stderr)
    sys.exit(77)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, ATTEMPTS + 256), hard))
os.environ['ASAN_OPTIONS'] = os.environ.get('ASAN_OPTIONS', '') + ':quarantine_size_mb=16'
D = ixdaemon.Daemon('flood', {
    'global': {'nop_interval_ms': 0, 'max_pending_logins': PENDING, 'login_grace_ms': GRACE_MS},
    'targets': [{'name': IQN, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '16M'}]}],
})
def uses_asan(pid):
    with open('/proc/%d/maps' % pid) as f:
        return 'libasan' in f.read()


def one_flood(round_no, legit):
    """One flood; returns (peak fds, peak RSS, fds after, RSS after)."""
    ok0 = legit.ok
    t0 = time.monotonic()
    socks, peak_fds, peak_rss = flood(D.port, ATTEMPTS)
    dt = time.monotonic() - t0
    time.sleep(0.5)
    peak_fds, peak_rss = max(peak_fds, D.fds()), max(peak_rss, D.rss_kb())
    # the flood's connections ahead of the legitimate one in the backlog make room PENDING at a
    # time, once idle for GRACE_MS; the target looks every quarter of it
    bound = (ATTEMPTS / PENDING + 2) * GRACE_MS * 1.25 / 1000 + 20
    t1 = time.monotonic()
    while legit.ok == ok0 and time.monotonic() - t1 < bound:
        time.sleep(0.1)
        peak_fds, peak_rss = max(peak_fds, D.fds()), max(peak_rss, D.rss_kb())
    R.check('flood%d' % round_no, len(socks) == ATTEMPTS and legit.ok > ok0,
            '%d connections opened in %.1f s; %d legitimate logins while they were open, the '
            'first within %.1f s of the flood\'s end (bound %.1f s)' %
            (len(socks), dt, legit.ok - ok0, time.monotonic() - t1 + 0.5, bound))
    for s in socks:
        s.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and D.fds() > FDS0 + 1:
        time.sleep(0.1)
    time.sleep(0.5)
    return peak_fds, peak_rss, D.fds(), D.rss_kb()


try:
    D.start()
    legit = Legit(D.port)
    legit.once()  # warm-up, and proof that logins work at all
    time.sleep(0.2)
    FDS0, rss0 = D.fds(), D.rss_kb()
    asan = uses_asan(D.pid)
    # what the flood may make the daemon hold: the pending logins plus the accepted
    # connections on their way to a worker (16 per worker, 2 workers), ~200 KiB each
    # (doubled for ASan's redzones), plus ASan's quarantine (16 MiB here) or the C library's
    # allocator slack (8 MiB)
    in_transit = 32
    fd_bound = FDS0 + PENDING + in_transit + 16
    rss_bound = (PENDING + in_transit) * 256 * (2 if asan else 1) + (16384 if asan else 8192)
    legit.start()
    rounds = [one_flood(i + 1, legit) for i in range(ROUNDS)]
    legit.stop.set()
    legit.join(30)
    peak_f = max(r[0] for r in rounds)
    peak_r = max(r[1] for r in rounds)
    after_f = [r[2] for r in rounds]
    after_r = [r[3] for r in rounds]
    R.check('fds-during', peak_f <= fd_bound,
            'daemon fds: %d before, at most %d during the floods (bound %d)' %
            (FDS0, peak_f, fd_bound))
    R.check('rss-during', peak_r - rss0 <= rss_bound,
            'daemon RSS: %d KiB before, at most %d during (growth %d KiB, bound %d%s)' %
            (rss0, peak_r, peak_r - rss0, rss_bound, ', ASan' if asan else ''))
    R.check('legit', not legit.errors, '%d legitimate logins in all, failures: %s' %
            (legit.ok, legit.errors[:3] or 'none'))
    R.check('fds-after', max(after_f) <= FDS0 + 1,
            'daemon fds: %d before, after each flood: %s' % (FDS0, after_f))
    R.check('rss-after', after_r[-1] - after_r[0] <= 8192,
            'daemon RSS: %d KiB before, after each flood: %s KiB (the floods after the first '
            'may add at most 8192 KiB in all: memory is reused, not leaked)' % (rss0, after_r))
    legit.once()
    R.check('legit-after', True, 'a login after the floods')
    R.check('logged', 'global.max_pending_logins' in D.log_text(),
            '%d rate-limited "login limit" lines in the log' %
            D.log_text().count('login limit:'))
except Exception:
    traceback.print_exc()
    R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1][:200])
ixdaemon.finish(R, D)
