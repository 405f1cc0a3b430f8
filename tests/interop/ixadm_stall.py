#!/usr/bin/env python3
"""ixadm against a target that logs in and answers NOP-Outs (so the connection looks alive)
but never answers a SCSI command or a task management request: the case that only a command
timeout can bound. With node.session.cmd_timeout 2 and err_timeo.abort_timeout 2:

- `ixadm -m io --direct readcap` (a session of its own) must send ABORT TASK after 2 s, give
  up 2 s later, and exit 8 (timed out) well within 15 s;
- through a session daemon (`-m node -l`, then `-m io readcap`) the same, the daemon then
  resets the session (its log says so), and a logout still ends it promptly.

The fake target is tests/interop/ini_badtarget.py's, serving its first connection only, so
the daemon's new logins after the reset are refused. One "PASS|FAIL ixadm_stall.NAME" line
per check (also appended to $IX_RESULTS); exit 0, 1, or 77 when ixadm is not built.
"""

import glob
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ini_badtarget as B  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
IXADM = os.path.join(BUILD, 'tools', 'ixadm')
failed = 0


def result(ok, name, detail=''):
    global failed
    line = '%s ixadm_stall.%s%s' % ('PASS' if ok else 'FAIL', name, ' ' + detail if detail else '')
    print(line, flush=True)
    if os.environ.get('IX_RESULTS'):
        with open(os.environ['IX_RESULTS'], 'a') as f:
            f.write(line + '\n')
    failed += not ok


class Stall(B.FakeTarget):
    """Logs in, answers NOP-Out pings, records and ignores everything else."""

    def __init__(self):
        self.seen = []
        super().__init__('stall')

    def serve(self, c):
        if not self.login(c):
            return
        while True:
            try:
                p = c.recv_pdu(timeout=60)
            except (X.Timeout, X.Closed):
                return
            op = p.bhs[0] & 0x3f
            self.seen.append(op)
            if op == 0x00 and p.itt != X.ALL_ONES:
                b = X.Bhs(0x20, flags=0x80).itt(p.itt)
                b.u32(20, X.ALL_ONES)
                self.stamp(b, B.u32(p.bhs, 24) - 1)
                self.statsn += 1
                c.send_pdu(b)


def ixadm(db, *args, timeout=60):
    t0 = time.monotonic()
    try:
        r = subprocess.run([IXADM, '--db', db] + list(args), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, timeout, 'hung'
    out = r.stdout + r.stderr
    if ixtest.sanitizer_report(out):
        result(False, 'sanitizer', 'report from ixadm %s' % ' '.join(args))
    sys.stderr.write('$ ixadm %s -> %d (%.1f s)\n%s' % (' '.join(args), r.returncode,
                                                       time.monotonic() - t0, out))
    return r.returncode, time.monotonic() - t0, out


def make_node(db, port):
    tp = ['-T', B.IQN, '-p', '127.0.0.1:%d' % port]
    ixadm(db, '-m', 'node', *tp, '-o', 'new')
    rc, _, _ = ixadm(db, '-m', 'node', *tp, '-o', 'update',
                     '-n', 'node.session.cmd_timeout', '-v', '2',
                     '-n', 'node.session.err_timeo.abort_timeout', '-v', '2',
                     '-n', 'node.conn[0].timeo.login_timeout', '-v', '2',
                     '-n', 'node.session.initial_login_retry_max', '-v', '0')
    return tp, rc == 0


def direct(db):
    ft = Stall()
    try:
        tp, ok = make_node(db, ft.port)
        result(ok, 'direct.node')
        rc, secs, out = ixadm(db, '-m', 'io', *tp, '--direct', 'readcap')
        result(rc == 8 and secs < 15, 'direct.bounded',
               'exit %s after %.1f s (want 8, < 15 s)' % (rc, secs))
        result('aborted' in out, 'direct.reason', 'the error names the abort')
        result(0x02 in ft.seen, 'direct.abort-sent', 'ABORT TASK reached the target')
    finally:
        ft.close()


def daemon(db):
    ft = Stall()
    try:
        tp, ok = make_node(db, ft.port)
        rc, secs, _ = ixadm(db, '-m', 'node', *tp, '-l')
        result(rc == 0, 'daemon.login', 'exit %s' % rc)
        rc, secs, out = ixadm(db, '-m', 'io', *tp, 'readcap')
        result(rc == 8 and secs < 15, 'daemon.bounded',
               'exit %s after %.1f s (want 8, < 15 s)' % (rc, secs))
        result(0x02 in ft.seen, 'daemon.abort-sent', 'ABORT TASK reached the target')
        deadline = time.monotonic() + 10
        logs = ''
        while time.monotonic() < deadline and 'resetting the session' not in logs:
            time.sleep(0.2)
            logs = ''.join(open(f).read() for f in glob.glob(os.path.join(db, '.run', '*.log')))
        result('resetting the session' in logs, 'daemon.reset', 'the daemon reset the session')
        rc, secs, _ = ixadm(db, '-m', 'node', *tp, '-u')
        result(rc == 0 and secs < 15, 'daemon.logout', 'exit %s after %.1f s' % (rc, secs))
        rc, _, _ = ixadm(db, '-m', 'session')
        result(rc == 21, 'daemon.gone', 'exit %s (want 21: no sessions)' % rc)
        if ixtest.sanitizer_report(logs):
            result(False, 'daemon.sanitizer', 'sanitizer report in the daemon log')
    finally:
        ft.close()


def main():
    if not os.access(IXADM, os.X_OK):
        print('SKIP: ixadm not built at %s' % IXADM)
        return 77
    with tempfile.TemporaryDirectory(prefix='ixtest.ixadm_stall.') as tmp:
        direct(os.path.join(tmp, 'db1'))
        daemon(os.path.join(tmp, 'db2'))
        # whatever is left (a failed check): stop its daemons
        for db in ('db1', 'db2'):
            ixadm(os.path.join(tmp, db), '-m', 'session', '-u', timeout=30)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
