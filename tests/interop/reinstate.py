#!/usr/bin/env python3
"""Session reinstatement and connection loss never let an old session's write land after the
new session's (RFC 7143 6.3.5; the ix-bench kill -9 finding).

The LUN is on the test-only error backend: writes touching one block of each case's pair are
held back in the backend (delay_ms), so the old session's write is certainly still in flight.
Session A (ISID X) writes pattern A to blocks N and N+1 (N+1 is slow) and then
  reinstate  a new login with ISID X arrives while A's connection is still up,
  drop       A's connection is reset (TCP RST), and a new login with ISID X follows at once;
session B writes pattern B to block N only (fast), gets it acknowledged; once A's delayed write
is surely over, block N must read B, and N+1 must read A (proof that A's write did reach the
backend, so the case is not vacuous). The target holds B's final Login Response until A's
tasks have finished, so B's login takes about the rest of A's delay.
  vanish     B's connection is reset while its login is held: nothing leaks (the daemon's
             descriptors return, ASan clean at shutdown), and a later login with X works;
  timeout    A's write outlasts global.login_timeout_ms: B's login is refused with 0x0301
             (service unavailable, the initiator may retry) after that time, and a retry once
             A has drained succeeds.
ix only (the error backend, /proc of the daemon): exits 77 against other peers.
"""

import os
import socket
import struct
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402

ixdaemon.skip_unless_ix('the error backend')

IQN = 'iqn.2026-11.io.ix.test:reinstate'
INI = 'iqn.2026-11.io.ix.test:reinstate-client'
BS = 512
LOGIN_TIMEOUT_MS = 3000
# (first block, delay of the write to first+1 in ms)
CASES = {'reinstate': (10, 1500), 'drop': (20, 1500), 'vanish': (30, 2500),
         'timeout': (40, 6000)}
CFG = {
    'global': {'threads': 2, 'nop_interval_ms': 0, 'login_timeout_ms': LOGIN_TIMEOUT_MS},
    'targets': [{'name': IQN, 'luns': [{
        'lun': 0, 'backend': 'error', 'size': '16M',
        'errors': [{'op': 'write', 'error': 'none', 'delay_ms': d, 'lba': n + 1, 'blocks': 1}
                   for n, d in CASES.values()]}]}],
}
R = ixdaemon.Results('reinstate')


def pattern(tag, nblk):
    return (tag * (nblk * BS // len(tag) + 1))[:nblk * BS]


def session(port, isid, timeout=15):
    return X.Session('127.0.0.1', port, initiator=INI, target=IQN, isid=isid, timeout=timeout)


def old_session_write(port, isid, lba, tag):
    """Session A: log in, send a 2-block WRITE (immediate data) without waiting for it."""
    a = session(port, isid)
    a.login()
    clear_ua(a)
    data = pattern(tag, 2)
    b = a.scsi_bhs(X.write10(lba, 2), len(data), write=True)
    a.cmdsn = (a.cmdsn + 1) & 0xffffffff
    a.conn.send_pdu(b, data)
    # the target handles a connection's PDUs in order, and this WRITE (all its data immediate,
    # in CmdSN order) is executed as it arrives: once the ping behind it is answered, the write
    # is in the backend (checked afterwards too: block lba+1 holds it)
    a.nop(timeout=10)
    return a, time.monotonic()


def clear_ua(s):
    """The first command of a session gets a UNIT ATTENTION (power on, nexus loss)."""
    for _ in range(3):
        st, _ = s.test_unit_ready()
        if st == 0:
            return st
    raise RuntimeError('TEST UNIT READY keeps failing: 0x%02x' % st)


def read_block(s, lba):
    st, data, sense, _ = s.scsi(X.read10(lba, 1), read_len=BS)
    return data if st == 0 else 'status 0x%02x %s' % (st, sense.hex())


def ordered_case(d, name, drop):
    lba, delay = CASES[name]
    isid = X.random_isid()
    a, t_a = old_session_write(d.port, isid, lba, b'A-' + name.encode())
    if drop:
        X.reset_close(a.conn.sock)
    b = session(d.port, isid)
    t0 = time.monotonic()
    b.login()
    login_ms = (time.monotonic() - t0) * 1000
    clear_ua(b)
    pat_b = pattern(b'B-' + name.encode(), 1)
    st, _, sense, _ = b.scsi(X.write10(lba, 1), write_data=pat_b)
    R.check(name + '-write', st == 0, 'new session WRITE to block %d: status 0x%02x %s' %
            (lba, st, sense.hex()))
    # past the old write's delay: a late landing of it would show now
    time.sleep(max(0.0, t_a + delay / 1000.0 + 0.7 - time.monotonic()))
    got = read_block(b, lba)
    R.check(name + '-order', got == pat_b,
            'block %d after the old write%s was due: %s (new login took %.0f ms; the old '
            'write had %.0f ms left)' % (
                lba, ' (connection reset)' if drop else ' (reinstated)',
                'the new session\'s data' if got == pat_b else
                ('the OLD session\'s data: its write landed after the new one' if
                 isinstance(got, bytes) and got == pattern(b'A-' + name.encode(), 2)[:BS]
                 else repr(got[:16])), login_ms, delay - (t0 - t_a) * 1000))
    got = read_block(b, lba + 1)
    R.check(name + '-old-write-ran', got == pattern(b'A-' + name.encode(), 2)[BS:],
            'block %d holds the old session\'s data (its write did reach the backend)' %
            (lba + 1))
    b.logout()
    b.close()
    a.close()


def settle(d, want, secs=10):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline and d.fds() != want:
        time.sleep(0.05)
    return d.fds()


def vanish_case(d, base_fds):
    lba, delay = CASES['vanish']
    t_a = time.monotonic()
    a, s, isid, held = start_held_login(d, lba, b'A-vanish')
    R.check('vanish-held', held, 'the target logged that the login is held')
    X.reset_close(s.conn.sock)
    a.close()
    time.sleep(max(0.0, t_a + delay / 1000.0 + 0.5 - time.monotonic()))
    fds = settle(d, base_fds)
    R.check('vanish-fds', fds == base_fds,
            'daemon fds %d before, %d after the held login vanished and the old session '
            'drained' % (base_fds, fds))
    c = session(d.port, isid)
    t0 = time.monotonic()
    c.login()
    ms = (time.monotonic() - t0) * 1000
    st = clear_ua(c)
    R.check('vanish-after', st == 0, 'a later login with the same ISID: %.0f ms, TEST UNIT '
            'READY 0x%02x' % (ms, st))
    c.logout()
    c.close()


def timeout_case(d):
    lba, delay = CASES['timeout']
    isid = X.random_isid()
    a, t_a = old_session_write(d.port, isid, lba, b'A-timeout')
    b = session(d.port, isid)
    t0 = time.monotonic()
    status = 0
    try:
        b.login()
    except X.LoginFailed as e:
        status = e.status
    ms = (time.monotonic() - t0) * 1000
    R.check('timeout-refused', status == 0x0301 and ms >= LOGIN_TIMEOUT_MS * 0.9,
            'login status 0x%04x after %.0f ms (want 0x0301 after about %d ms: the old '
            'write needs %d ms)' % (status, ms, LOGIN_TIMEOUT_MS, delay))
    b.close()
    a.close()
    time.sleep(max(0.0, t_a + delay / 1000.0 + 0.5 - time.monotonic()))
    c = session(d.port, isid)
    c.login()
    clear_ua(c)
    got = read_block(c, lba + 1)
    R.check('timeout-retry', got == pattern(b'A-timeout', 2)[BS:],
            'a retry after the old write finished logs in and reads its data')
    c.logout()
    c.close()


def start_held_login(d, lba, tag):
    """Old session with a slow write, and a new login with its ISID that the target holds."""
    isid = X.random_isid()
    a, _ = old_session_write(d.port, isid, lba, tag)
    s = session(d.port, isid)
    keys = X.encode_keys([('InitiatorName', INI), ('TargetName', IQN),
                          ('SessionType', 'Normal'), ('HeaderDigest', 'None'),
                          ('DataDigest', 'None')] + X.DEFAULT_OP_KEYS)
    n0 = d.log_text().count('held until session tsih')
    s.conn.send_pdu(X.login_bhs(isid, 0, 1, 0, s.cmdsn, 0, 1, 3, True, False), keys)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and d.log_text().count('held until session tsih') == n0:
        time.sleep(0.05)
    return a, s, isid, d.log_text().count('held until session tsih') > n0


d = ixdaemon.Daemon('reinstate', CFG, testing=True)
try:
    d.start()
    base_fds = d.fds()
    ordered_case(d, 'reinstate', drop=False)
    ordered_case(d, 'drop', drop=True)
    vanish_case(d, base_fds)
    timeout_case(d)
    # shutdown while a login is held and the old session's write is still in the backend:
    # the daemon drops the held login, waits for the write (bounded) and ends cleanly on the
    # SIGTERM below, ASan finding nothing
    a, s, _, held = start_held_login(d, CASES['vanish'][0], b'A-shutdown')
    R.check('shutdown-held', held, 'a login is held when the daemon is stopped')
except Exception:
    traceback.print_exc()
    R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1][:200])
ixdaemon.finish(R, d)
