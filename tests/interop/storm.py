#!/usr/bin/env python3
"""Login storm (issue 28): one client starts N logins at once (default 1000, IX_STORM_SESSIONS),
each with its own initiator name and one-way CHAP, as a hypervisor cluster does after a failover.
The target runs with its default login limits (global.max_pending_logins 128): it must not drop
the logins beyond them but hold them back (the kernel's listen backlog keeps them until there
is room) and let every one of them log in. The client is bench/sess_storm (libix's public API,
one thread, every session on one context).

Checked:
  - every login succeeds, the last within N / max_pending_logins + 1 rounds of
    login_timeout_ms (each round of logins is bounded by that timeout; in practice the storm
    takes well under a second on this machine, docs/perf.md "Many sessions");
  - the target closed none of them as idle (no "login limit: ... closing" lines) and logged
    that it held logins back ("accepting more as they finish");
  - after the client's logout, the daemon's descriptors are back where they were.
ix only (the limits are ix-target's): exits 77 against other peers.
"""

import json
import os
import resource
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402

ixdaemon.skip_unless_ix('the login limits of ix-target')

N = int(os.environ.get('IX_STORM_SESSIONS', '1000'))
IQN = 'iqn.2026-11.io.ix.test:storm'
LOGIN_TIMEOUT_MS = 15000  # the default, written out: the client's bound derives from it
PENDING = 128  # the default global.max_pending_logins
R = ixdaemon.Results('storm')

build = os.environ.get('IX_BUILD', os.path.join(ixdaemon.ROOT, 'build'))
client = os.path.join(build, 'bench', 'sess_storm')
if not os.path.exists(client):
    print('SKIP: %s not built' % client, file=sys.stderr)
    sys.exit(77)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
need = 2 * N + 256  # the client's sockets and the daemon's
if hard != resource.RLIM_INFINITY and hard < need:
    print('SKIP: the open file limit (%d) is too low for %d sessions' % (hard, N),
          file=sys.stderr)
    sys.exit(77)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))

D = ixdaemon.Daemon('storm', {
    'global': {'login_timeout_ms': LOGIN_TIMEOUT_MS, 'max_connections': N + 256,
               'max_sessions': N + 16},
    'targets': [{'name': IQN, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '4M'}],
                 'chap': {'user': 'storm', 'secret': 'storm-secret-16'},
                 'chap_required': True}],
})

try:
    D.start()
    time.sleep(0.2)
    fds0 = D.fds()
    rounds = N // PENDING + 1
    bound_ms = rounds * LOGIN_TIMEOUT_MS
    t0 = time.monotonic()
    p = subprocess.Popen([client, '-p', '127.0.0.1:%d' % D.port, '-T', IQN, '-n', str(N),
                          '-I', 'iqn.2026-11.io.ix.test:storm-host', '--idle', '1',
                          '--login-timeout', str(bound_ms),
                          '--chap-user', 'storm', '--chap-secret', 'storm-secret-16'],
                         stdout=subprocess.PIPE, text=True)
    ev = json.loads(p.stdout.readline() or '{}')
    R.check('all-logged-in', ev.get('ok') == N,
            '%s of %d logins succeeded in %.2f s (%s logins/s, p99 %s ms; bound %d s); '
            'first error: %s' % (ev.get('ok'), N, ev.get('seconds', -1),
                                 ev.get('logins_per_s'), ev.get('p99_ms'), bound_ms // 1000,
                                 ev.get('first_error') or 'none'))
    rest = [json.loads(x) for x in p.stdout]
    rc = p.wait(timeout=bound_ms / 1000 + 60)
    idle = [e for e in rest if e.get('event') == 'idle_done']
    out = [e for e in rest if e.get('event') == 'logged_out']
    R.check('stayed', bool(idle) and idle[0].get('not_logged_in') == 0,
            'sessions lost while idle: %s' % (idle[0].get('not_logged_in') if idle else '?'))
    R.check('logged-out', rc == 0 and bool(out) and out[0].get('pending') == 0,
            'client exit %d; logout of all in %s s' % (rc, out[0].get('seconds') if out else '?'))
    log = D.log_text()
    closed = log.count('login limit: ') - log.count('accepting more as they finish')
    R.check('none-dropped', closed == 0,
            '%d logins closed by the login limit; the gate held logins back %d times '
            '(rate-limited lines)' % (closed, log.count('accepting more as they finish')))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and D.fds() > fds0 + 1:
        time.sleep(0.1)
    R.check('fds-after', D.fds() <= fds0 + 1,
            'daemon fds: %d before, %d after (%.1f s in all)' %
            (fds0, D.fds(), time.monotonic() - t0))
except Exception:
    traceback.print_exc()
    R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1][:200])
ixdaemon.finish(R, D)
