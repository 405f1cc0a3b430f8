#!/usr/bin/env python3
"""Resource limits of ix-target (docs/configuration.md, global), each pushed past its value:

  max_sessions_per_initiator, targets[].max_sessions, max_sessions
                         the next login gets 0x0302 (out of resources); others still log in
  cmdsn_depth            the CmdSN window is that wide; a command past MaxCmdSN is ignored
  login_timeout_ms       half a Login PDU, or one Login PDU and silence: dropped in time
  discovery_idle_timeout_ms
                         an idle discovery session is closed, a busy one is not
  max_pending_logins     while that many connections are logging in, no more are accepted
                         (they wait in the listen backlog); one idle for login_grace_ms
                         makes room (half-open ones first), and a real login gets through
  max_connections        connections past the limit are closed at once, the others stay
  max_connection_memory  a command whose buffer would exceed the budget gets TASK SET FULL
  (fixed, 16 MiB)        a peer that sends pings with data and never reads the answers is
                         dropped before their copies pile up
Every refusal must leave a clear line in the target's log. ix only: 77 against other peers.
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

ixdaemon.skip_unless_ix('resource limits')

T1 = 'iqn.2026-11.io.ix.test:limits-1'
T2 = 'iqn.2026-11.io.ix.test:limits-2'
INIT = 'iqn.2026-11.io.ix.test:limits-%s'
R = ixdaemon.Results('limits')


def login(d, who, target=T1, session_type='Normal'):
    s = X.Session('127.0.0.1', d.port, initiator=INIT % who, target=target, timeout=5)
    try:
        s.login(session_type=session_type)
    except X.LoginFailed as e:
        s.close()
        return e.status
    return s


def refused(name, got, log_pat, d):
    R.check(name, got == 0x0302 and log_pat in d.log_text(),
            'status %s; log line %s' % ('0x%04x' % got if isinstance(got, int) else
                                        'none (logged in)', 'present' if log_pat in
                                        d.log_text() else 'missing: ' + log_pat))
    if not isinstance(got, int):
        got.close()


def closed_within(sock, secs, t0=None):
    """Seconds from t0 (default: now) until the peer closed sock, or None if it stayed open
    for secs."""
    t0 = time.monotonic() if t0 is None else t0
    sock.settimeout(secs)
    try:
        while True:
            if not sock.recv(4096):
                return time.monotonic() - t0
    except (ConnectionResetError, ConnectionAbortedError):
        return time.monotonic() - t0
    except socket.timeout:
        return None


def raw(d, data=b''):
    s = socket.create_connection(('127.0.0.1', d.port))
    if data:
        s.sendall(data)
    return s


def first_login_pdu(who):
    """A complete first Login Request (security stage, no transit) that waits for nothing."""
    keys = X.encode_keys([('InitiatorName', INIT % who), ('TargetName', T1),
                          ('SessionType', 'Normal'), ('AuthMethod', 'None')])
    b = X.login_bhs(X.random_isid(), 0, 1, 0, 1, 0, 0, 1, False, False)
    out = bytearray(b.bytes())
    out[5:8] = len(keys).to_bytes(3, 'big')
    return bytes(out) + keys + bytes(X.pad4(len(keys)))


def sessions_cases(d):
    a1, a2 = login(d, 'a'), login(d, 'a')
    R.check('per-initiator.under', not isinstance(a1, int) and not isinstance(a2, int),
            'two sessions of one initiator')
    refused('per-initiator', login(d, 'a'), 'global.max_sessions_per_initiator', d)
    b = login(d, 'b', T2)
    refused('per-target', login(d, 'c', T2), 'already has 1 sessions (max_sessions)', d)
    dd = login(d, 'd')
    refused('global', login(d, 'e'), 'sessions open (global.max_sessions)', d)
    for s in (a1, a2, b, dd):
        if not isinstance(s, int):
            s.logout()
            s.close()
    s = login(d, 'e')
    R.check('sessions.after', not isinstance(s, int), 'a login after the others logged out')
    if not isinstance(s, int):
        s.logout()
        s.close()


def window_case(d):
    s = login(d, 'w')
    win = (s.maxcmdsn - s.cmdsn + 1) & 0xffffffff
    s.test_unit_ready()
    s.test_unit_ready()
    itts = []
    for i in range(5):  # READs of the delayed range: they stay outstanding
        b = s.scsi_bhs(struct.pack('>BBIBHB', 0x28, 0, 0, 0, 8, 0), 4096, read=True)
        itts.append(struct.unpack_from('>I', b.b, 16)[0])
        s.conn.send_pdu(b)
        s.cmdsn = (s.cmdsn + 1) & 0xffffffff
    got = set()
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            p = s.recv(deadline - time.monotonic())
        except X.Timeout:
            break
        if p.opcode in (X.OP_DATA_IN, X.OP_SCSI_RSP) and \
                (p.opcode == X.OP_SCSI_RSP or p.flags & 1):
            got.add(p.itt)
    R.check('cmdsn-window', win == 4 and got == set(itts[:4]),
            'window %d; answered %d of 5 READs, the one past MaxCmdSN %s' %
            (win, len(got), 'ignored' if itts[4] not in got else 'ANSWERED'))
    s.close()


def login_timeout_cases(d):
    t0 = time.monotonic()
    s1 = raw(d, first_login_pdu('t')[:20])
    s2 = raw(d, first_login_pdu('u'))
    t1 = closed_within(s1, 4, t0)
    t2 = closed_within(s2, 4, t0)
    R.check('login-timeout.half-pdu', t1 is not None and 0.4 < t1 < 3,
            'closed after %s s (login_timeout_ms 700)' % ('%.2f' % t1 if t1 else 'never'))
    R.check('login-timeout.stalled', t2 is not None and 0.3 < t2 < 3,
            'closed after %s s' % ('%.2f' % t2 if t2 else 'never'))
    R.check('login-timeout.logged', 'login not completed within 700 ms' in d.log_text(),
            'the reason is in the log')
    s1.close()
    s2.close()


def discovery_idle_case(d):
    idle = login(d, 'di', session_type='Discovery')
    busy = login(d, 'db', session_type='Discovery')
    idle.text([('SendTargets', 'All')])
    t0 = time.monotonic()
    ok_busy = True
    while time.monotonic() - t0 < 1.6:
        try:
            busy.text([('SendTargets', 'All')])
        except (X.Closed, X.Timeout):
            ok_busy = False
            break
        time.sleep(0.2)
    gone = idle.conn.expect_silence_or_close(0.5)
    R.check('discovery-idle', gone == 'closed' and ok_busy,
            'idle session %s after 1.6 s, busy one %s' %
            (gone, 'still served' if ok_busy else 'closed too'))
    R.check('discovery-idle.logged', 'discovery session idle for 700 ms' in d.log_text(),
            'the reason is in the log')
    idle.close()
    busy.close()


def pending_case(d):
    t0 = time.monotonic()
    fresh = [raw(d) for _ in range(4)]
    time.sleep(0.05)
    extra = raw(d)  # waits in the listen backlog: the 4 slots are taken
    t = closed_within(fresh[0], 2, t0)
    log = d.log_text()
    # closed for its idleness (login_grace_ms 200), not by login_timeout_ms (700)
    R.check('pending-logins.evicts', t is not None and 'global.login_grace_ms 200' in log,
            'the oldest half-open connection was %s' %
            ('closed after %.2f s: %s' % (t, 'for its idleness (login_grace_ms)'
                                          if 'global.login_grace_ms 200' in log else
                                          'but not by the login limit')
             if t is not None else 'kept'))
    s = login(d, 'p')
    R.check('pending-logins.real-login', not isinstance(s, int),
            'a real login succeeded while %d half-open connections were held' % 4)
    R.check('pending-logins.logged', 'accepting more as they finish' in log and
            'global.max_pending_logins' in log, 'the log says why')
    if not isinstance(s, int):
        s.logout()
        s.close()
    for f in fresh + [extra]:
        f.close()


def connections_case(d):
    held = [raw(d) for _ in range(6)]
    time.sleep(0.2)
    extra = raw(d)
    t = closed_within(extra, 2)
    still = [closed_within(h, 0.05) is None for h in held]
    R.check('max-connections', t is not None and all(still),
            'connection 7 closed after %s s, the 6 held ones %s' %
            ('%.2f' % t if t is not None else 'never', 'open' if all(still) else 'closed'))
    R.check('max-connections.logged', 'global.max_connections' in d.log_text(),
            'the log says why')
    for h in held + [extra]:
        h.close()
    time.sleep(0.3)
    s = login(d, 'm')
    R.check('max-connections.after', not isinstance(s, int), 'a login once they are closed')
    if not isinstance(s, int):
        s.test_unit_ready()
        memory_case(d, s)


def memory_case(d, s):
    s.test_unit_ready()
    big = s.scsi_bhs(struct.pack('>BBQIBB', 0x8a, 0, 0, 131072, 0, 0), 64 << 20, write=True)
    s.conn.send_pdu(big)
    s.cmdsn = (s.cmdsn + 1) & 0xffffffff
    small = s.scsi_bhs(struct.pack('>BBIBHB', 0x2a, 0, 0, 0, 2048, 0), 1 << 20, write=True)
    itt = struct.unpack_from('>I', small.b, 16)[0]
    s.conn.send_pdu(small)
    s.cmdsn = (s.cmdsn + 1) & 0xffffffff
    st = None
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            p = s.recv(deadline - time.monotonic())
        except X.Timeout:
            break
        if p.opcode == X.OP_SCSI_RSP and p.itt == itt:
            st = p.u8(3)
            break
    R.check('connection-memory', st == 0x28,
            'a 1 MiB WRITE while a 64 MiB one holds its buffer (budget 64 MiB): status %s' %
            ('0x%02x' % st if st is not None else 'none'))
    s.close()


def unread_case(d):
    other = login(d, 'o')
    s = login(d, 'r')
    s.conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    rss0 = d.rss_kb()
    data = b'x' * 262144
    sent = 0
    how = 'still open'
    try:
        for _ in range(400):  # 100 MiB of pings whose echoes are never read
            s.conn.send_pdu(s.nop_bhs(immediate=True), data)
            sent += 1
    except (X.Closed, OSError) as e:
        how = 'closed (%s)' % type(e).__name__
    time.sleep(0.3)
    grow = d.rss_kb() - rss0
    st, _ = other.test_unit_ready()
    R.check('unread-responses', how != 'still open' and grow < 32768 and st in (0, 2) and
            'does not read its responses' in d.log_text(),
            'after %d pings of 256 KiB: %s, RSS grew %d KiB (bound 32768), another session: '
            'TUR 0x%02x' % (sent, how, grow, st))
    s.close()
    other.close()


CFG_A = {
    'global': {'threads': 1, 'nop_interval_ms': 0, 'max_sessions': 4,
               'max_sessions_per_initiator': 2, 'cmdsn_depth': 4, 'login_timeout_ms': 700,
               'discovery_idle_timeout_ms': 700, 'max_pending_logins': 4,
               'login_grace_ms': 200},
    'targets': [
        {'name': T1, 'luns': [{'lun': 0, 'backend': 'error', 'size': '16M', 'errors': [
            {'op': 'read', 'error': 'none', 'delay_ms': 500, 'lba': 0, 'blocks': 8}]}]},
        {'name': T2, 'max_sessions': 1,
         'luns': [{'lun': 0, 'backend': 'ram', 'size': '1M'}]},
    ],
}
CFG_B = {
    'global': {'threads': 1, 'nop_interval_ms': 0, 'max_connections': 6,
               'max_connection_memory': '64M'},
    'targets': [{'name': T1, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '128M'}]}],
}

for name, cfg, cases in (('limits-a', CFG_A, (sessions_cases, window_case, login_timeout_cases,
                                              discovery_idle_case, pending_case)),
                         ('limits-b', CFG_B, (connections_case, unread_case))):
    d = ixdaemon.Daemon(name, cfg, testing=True)
    try:
        d.start()
        for c in cases:
            try:
                c(d)
            except Exception:
                traceback.print_exc()
                R.report('FAIL', c.__name__, 'exception: ' +
                         traceback.format_exc().strip().splitlines()[-1][:200])
    except Exception:
        traceback.print_exc()
        R.report('FAIL', name, traceback.format_exc().strip().splitlines()[-1][:200])
    R.check(name + '.alive', d.alive(), 'pid %s' % d.pid)
    for p in d.stop():
        R.report('FAIL', name + '.shutdown', p)
sys.exit(1 if R.failed else 0)
