"""Run ix-target from a Python test with a configuration of the test's own (python3 stdlib).

  d = Daemon('errors', cfg_dict, testing=True)   # cfg: docs/configuration.md; the portal's
  d.start()                                      # port is filled in (a free one;
                                                 # other portals get theirs, d.ports[name])
  ... d.port, d.pid, d.fds(), d.rss_kb(), d.log_text() ...
  problems = d.stop()    # [] when it stopped on SIGTERM with status 0 and a clean log

For tests of ix-specific features (fault injection, the error backend, limits): against
another peer (IX_PEER=tgt) they skip, see skip_unless_ix(). The log goes to
$IX_OUT/NAME.ix-target.log, where tests/run.sh also looks for sanitizer reports.
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ixtest  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
Results = ixtest.Reporter  # R = Results('name'); R.report(st, name, detail), R.check(...)


def skip_unless_ix(what):
    """Exit 77 (whole-test skip, with the reason on a SKIP: line) unless the peer is ix."""
    peer = os.environ.get('IX_PEER', 'ix')
    if peer != 'ix':
        print('SKIP: %s is an ix-target feature (peer is %s)' % (what, peer), file=sys.stderr)
        sys.exit(77)


class Daemon:
    """cfg written to a temporary file with free ports, run by ixtest.Daemon (the process)."""

    def __init__(self, name, cfg, testing=False, host='127.0.0.1'):
        self.name = name
        self.cfg = cfg
        self.testing = testing
        self.host = host
        self.port = None
        self.proc = None
        self.pid = None
        self.log_name = '%s.ix-target.log' % name
        build = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
        self.bin = os.path.join(build, 'tools', 'ix-target')
        self.tmp = tempfile.mkdtemp(prefix='ixtest.%s.' % name)
        self.cfg_path = os.path.join(self.tmp, 'ix-target.json')

    def start(self, ready_timeout=30):
        if not os.path.exists(self.bin):
            print('SKIP: ix-target not built at %s' % self.bin, file=sys.stderr)
            sys.exit(77)
        for _ in range(4):
            self.port = ixtest.free_port()
            self.ports = {}
            for p in self.cfg.setdefault('portals', [{'address': self.host}]):
                # the first portal gets self.port; any others a free port each
                p['port'] = self.port if not self.ports else ixtest.free_port()
                self.ports[p.get('name', 'default')] = p['port']
            with open(self.cfg_path, 'w') as f:
                json.dump(self.cfg, f, indent=2)
            try:
                self.proc = ixtest.Daemon(self.cfg_path, self.log_name, testing=self.testing,
                                          append=True, ready_timeout=ready_timeout)
            except ixtest.DaemonExited as e:
                if 'Address already in use' not in e.output:
                    raise RuntimeError('ix-target exited with status %d:\n%s' %
                                       (e.status, e.output[-2000:]))
                continue
            self.pid = self.proc.pid
            return self
        raise RuntimeError('no free port for ix-target')

    def log_text(self):
        """What this daemon logged (earlier runs' lines in the same file are skipped)."""
        return self.proc.output() if self.proc else ''

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def fds(self):
        return self.proc.fds()

    def rss_kb(self):
        return self.proc.rss_kb()

    def stop(self, timeout=15):
        """SIGTERM; the problems found (empty: clean stop, status 0, no sanitizer report)."""
        problems = []
        if self.proc is None:
            return problems
        if not self.proc.alive():
            problems.append('ix-target had already exited with status %d' %
                            self.proc.p.returncode)
        rc = self.proc.stop(timeout)
        if rc is None:
            problems.append('ix-target ignored SIGTERM for %ds' % timeout)
        elif rc != 0 and not problems:
            problems.append('ix-target exited with status %d after SIGTERM' % rc)
        if ixtest.sanitizer_report(self.proc.output()):
            problems.append('sanitizer report in %s' % self.proc.log_path)
        self.proc = None
        try:
            os.remove(self.cfg_path)
            os.rmdir(self.tmp)
        except OSError:
            pass
        return problems


def finish(results, d):
    """The end of a test on a Daemon d: the check daemon-alive, a FAIL 'shutdown' for each
    problem its stop found, and the exit status (1 when a check failed)."""
    results.check('daemon-alive', d.alive(), 'pid %s' % d.pid)
    for p in d.stop():
        results.report('FAIL', 'shutdown', p)
    sys.exit(1 if results.failed else 0)
