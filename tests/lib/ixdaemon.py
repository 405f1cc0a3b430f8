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
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ixtest  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
SANITIZER = re.compile(r'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|'
                       r'SUMMARY: (Address|Undefined|Leak)')


def skip_unless_ix(what):
    """Exit 77 (whole-test skip, with the reason on a SKIP: line) unless the peer is ix."""
    peer = os.environ.get('IX_PEER', 'ix')
    if peer != 'ix':
        print('SKIP: %s is an ix-target feature (peer is %s)' % (what, peer), file=sys.stderr)
        sys.exit(77)


class Daemon:
    def __init__(self, name, cfg, testing=False, host='127.0.0.1'):
        self.name = name
        self.cfg = cfg
        self.testing = testing
        self.host = host
        self.port = None
        self.proc = None
        self.pid = None
        out = os.environ.get('IX_OUT', os.path.join(ROOT, 'tests', 'out'))
        os.makedirs(out, exist_ok=True)
        self.log = os.path.join(out, '%s.ix-target.log' % name)
        build = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
        self.bin = os.path.join(build, 'tools', 'ix-target')
        self.tmp = tempfile.mkdtemp(prefix='ixtest.%s.' % name)
        self.cfg_path = os.path.join(self.tmp, 'ix-target.json')
        self.log_start = 0

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
            args = [self.bin, '-c', self.cfg_path] + (['--testing'] if self.testing else [])
            self.log_start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
            logf = open(self.log, 'a')
            self.proc = subprocess.Popen(args, stdout=logf, stderr=logf)
            logf.close()
            self.pid = self.proc.pid
            deadline = time.monotonic() + ready_timeout
            while time.monotonic() < deadline:
                if 'ix-target: ready' in self.log_text():
                    return self
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            if self.proc.poll() is None:
                raise RuntimeError('ix-target not ready after %ds' % ready_timeout)
            if 'Address already in use' not in self.log_text():
                raise RuntimeError('ix-target exited with status %d:\n%s' %
                                   (self.proc.returncode, self.log_text()[-2000:]))
        raise RuntimeError('no free port for ix-target')

    def log_text(self):
        """What this daemon logged (earlier runs' lines in the same file are skipped)."""
        try:
            with open(self.log, errors='replace') as f:
                f.seek(self.log_start)
                return f.read()
        except OSError:
            return ''

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def fds(self):
        return len(os.listdir('/proc/%d/fd' % self.pid))

    def rss_kb(self):
        with open('/proc/%d/status' % self.pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=15):
        """SIGTERM; the problems found (empty: clean stop, status 0, no sanitizer report)."""
        problems = []
        if self.proc is None:
            return problems
        if self.proc.poll() is not None:
            problems.append('ix-target had already exited with status %d' %
                            self.proc.returncode)
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
                if rc != 0:
                    problems.append('ix-target exited with status %d after SIGTERM' % rc)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problems.append('ix-target ignored SIGTERM for %ds' % timeout)
        if SANITIZER.search(self.log_text()):
            problems.append('sanitizer report in %s' % self.log)
        self.proc = None
        try:
            os.remove(self.cfg_path)
            os.rmdir(self.tmp)
        except OSError:
            pass
        return problems


class Results:
    """One "PASS|FAIL|SKIP prefix.name detail" line per check, also into $IX_RESULTS."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.failed = 0

    def report(self, status, name, detail=''):
        line = '%s %s.%s %s' % (status, self.prefix, name, detail)
        print(line.rstrip(), flush=True)
        if os.environ.get('IX_RESULTS'):
            with open(os.environ['IX_RESULTS'], 'a') as f:
                f.write(line.rstrip() + '\n')
        if status == 'FAIL':
            self.failed += 1

    def check(self, name, ok, detail=''):
        self.report('PASS' if ok else 'FAIL', name, detail)
        return ok
