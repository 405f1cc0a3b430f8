"""The management tests' shared pieces (python3 stdlib): ix-ctl on a daemon's socket, a
verified ix-bench run in the background, and checks whose detail spans lines.

  ctl = Ctl(lambda: sock)        ctl(*args) -> (exit status, stdout, stderr);
                                 ctl.json(*args) -> the answer of `ix-ctl --json ...`
  p = bench_start(cmd)           ix-bench (--json --quiet among cmd) in the background;
  ok, detail = bench_result(p)   exit 0, 0 errors, 0 miscompares and some I/O
  check_lines(report, name, ok, detail)
  main(R, E, 'mgmt', setup, steps)   a management test's main(): see there
  R, E, ctl, check = harness('mgmt')   the four of a management test: its Reporter, a
                                 namespace for its state (E.sock: the daemon's socket), ix-ctl
                                 on E.sock, and check_lines on R
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ixtest  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
CTL = os.path.join(BUILD, 'tools', 'ix-ctl')
BENCH = os.path.join(BUILD, 'tools', 'ix-bench')
HOST = '127.0.0.1'


class Ctl:
    """ix-ctl on the socket sock() names (asked at each call: tests restart their daemon)."""

    def __init__(self, sock):
        self.sock = sock

    def __call__(self, *args, timeout=60):
        p = subprocess.run([CTL, '-s', self.sock()] + list(args), capture_output=True,
                           text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def json(self, *args):
        rc, out, err = self('--json', *args)
        if rc != 0:
            raise RuntimeError('ix-ctl %s: exit %d: %s' % (' '.join(args), rc, err.strip()))
        return json.loads(out)


def check_lines(report, name, ok, detail):
    """report.check with a detail of several lines joined by ' | '."""
    return report.check(name, ok, ' | '.join(x.strip() for x in detail.splitlines()))


def bench_start(args):
    """ix-bench with args (which should include --verify --json --quiet), in the background."""
    return subprocess.Popen([BENCH] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def bench_result(p, timeout=120, with_result=False):
    """(ok, detail) of a bench_start() run: exit 0, 0 errors, 0 miscompares, some I/O."""
    out, err = p.communicate(timeout=timeout)
    try:
        j = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, 'exit %d, no JSON result: %s' % (p.returncode, err.strip()[-300:])
    ios = j['read']['ios'] + j['write']['ios'] if 'read' in j else -1
    ok = p.returncode == 0 and j['errors'] == 0 and j['miscompares'] == 0 and ios != 0
    return ok, 'exit %d, %s I/Os, errors %d, miscompares %d, verified %d blocks%s' % (
        p.returncode, ios, j['errors'], j['miscompares'], j['verified_blocks'],
        ', %s' % j['result'] if with_result else '')


def harness(test):
    """(Reporter, state namespace, Ctl on its .sock, check) of a management test."""
    report, env = ixtest.Reporter(test), types.SimpleNamespace()
    return (report, env, Ctl(lambda: env.sock),
            lambda name, ok, detail: check_lines(report, name, ok, detail))


def main(report, env, test, setup, steps):
    """A management test's main(): ix-ctl and ix-bench built, a temporary directory env.dir,
    env.cfg and env.port (a free one) for setup() to write the configuration with (it sets
    env.sock), the daemon env.d on it, each of steps in turn, then the daemon stopped and
    env.dir removed."""
    for tool in (CTL, BENCH):
        if not os.access(tool, os.X_OK):
            report('FAIL', 'setup', '%s not built' % tool)
            return 1
    env.dir = tempfile.mkdtemp(prefix='ix-%s-' % test)
    env.cfg = os.path.join(env.dir, 'ix-target.json')
    env.port = ixtest.free_port()
    setup()
    env.d = ixtest.Daemon(env.cfg, '%s.daemon.log' % test)
    try:
        for step in steps:
            step()
    finally:
        env.d.stop()
        shutil.rmtree(env.dir, ignore_errors=True)
    return 1 if report.failed else 0
