#!/usr/bin/env python3
"""Small helpers for the shell test library (python3 stdlib only).

  ixtest.py free-port                 print a free TCP port on 127.0.0.1 in 3261..4999
  ixtest.py free-ctl                  print an unused tgtd control port number
  ixtest.py wait-port HOST PORT SECS  exit 0 once HOST:PORT accepts a connection
  ixtest.py ix-config [options]       print an ix-target JSON config (docs/configuration.md):
                                      one LUN, --backend ram|file|block [--path P]
  ixtest.py cunit-classify LOG RC [--in-suite TEST]
                                      classify one iscsi-test-cu run: prints
                                      "PASS|FAIL|SKIP reason" (CUnit counts skips as passes)
"""

import argparse
import json
import os
import re
import random
import signal
import socket
import subprocess
import sys
import time
import traceback


class Reporter:
    """report(st, name, detail): one "PASS|FAIL|SKIP TEST.NAME detail" line per check, printed
    and appended to $IX_RESULTS (tests/run.sh counts those lines); .failed counts the FAILs."""

    def __init__(self, test):
        self.test = test
        self.failed = 0

    def __call__(self, st, name, detail=''):
        line = '%s %s.%s %s' % (st, self.test, name, detail)
        print(line, flush=True)
        if os.environ.get('IX_RESULTS'):
            with open(os.environ['IX_RESULTS'], 'a') as f:
                f.write(line + '\n')
        self.failed += st == 'FAIL'

    def main(self, fn):
        """Exit with fn()'s status; an exception escaping fn is one FAIL line, named setup."""
        try:
            sys.exit(fn())
        except Exception:  # noqa: BLE001
            self('FAIL', 'setup', traceback.format_exc().strip().splitlines()[-1])
            sys.exit(1)


class Daemon:
    """An ix-target process of the test's own (for tests that restart it): started on cfg_path
    with its output in OUT/log_name (tests/run.sh scans OUT/<test>.*.log for sanitizer
    reports, so name it after the test). Waits until it prints "ix-target: ready"."""

    def __init__(self, cfg_path, log_name, build=None, out=None):
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
        build = build or os.environ.get('IX_BUILD', os.path.join(root, 'build'))
        out = out or os.environ.get('IX_OUT', os.path.join(root, 'tests', 'out'))
        self.log_path = os.path.join(out, log_name)
        self.log = open(self.log_path, 'w')
        self.p = subprocess.Popen([os.path.join(build, 'tools', 'ix-target'), '-c', cfg_path],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if 'ix-target: ready' in self.output():
                return
            if self.p.poll() is not None:
                self.log.close()
                raise DaemonExited(self.p.returncode, self.output())
            time.sleep(0.05)
        self.p.kill()
        self.p.wait()
        self.log.close()
        raise RuntimeError('ix-target not ready after 30 s')

    def output(self):
        with open(self.log_path, errors='replace') as f:
            return f.read()

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(10)
        self.log.close()

    def stop(self):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                self.log.close()
                return None
        self.log.close()
        return self.p.returncode


class DaemonExited(RuntimeError):
    """ix-target exited before it was ready: status and everything it printed."""

    def __init__(self, status, output):
        super().__init__('ix-target exited with %d before it was ready' % status)
        self.status = status
        self.output = output


def free_port():
    ports = list(range(3261, 5000))
    random.shuffle(ports)
    for p in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(('127.0.0.1', p))
        except OSError:
            continue
        finally:
            s.close()
        # Also make sure nothing listens on the wildcard address for it.
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.settimeout(0.2)
        try:
            c.connect(('127.0.0.1', p))
            c.close()
            continue
        except OSError:
            pass
        return p
    raise SystemExit('no free port in 3261..4999')


def free_ctl():
    # tgtd -C N uses /var/run/tgtd/socket.N (+ .lock); pick an N nobody uses.
    for _ in range(200):
        n = random.randint(1000, 9999)  # tgtd rejects large values
        if not os.path.exists('/var/run/tgtd/socket.%d' % n) and \
                not os.path.exists('/var/run/tgtd/socket.%d.lock' % n):
            return n
    raise SystemExit('no free tgtd control port')


def wait_port(host, port, secs):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        try:
            s = socket.create_connection((host, port), timeout=0.5)
            s.close()
            return 0
        except OSError:
            time.sleep(0.1)
    return 1


def ix_config(a):
    """Config for one LUN (RAM, or a file or block device at --path), following
    docs/configuration.md."""
    lun = {'lun': 0, 'backend': a.backend}
    if a.backend == 'ram':
        lun['size'] = '%dM' % a.size
    elif not a.path:
        raise SystemExit('ix-config: --backend %s needs --path' % a.backend)
    else:
        lun['path'] = a.path
        if a.backend == 'file':
            lun['size'] = '%dM' % a.size
    target = {'name': a.iqn, 'luns': [lun]}
    if a.thin:
        target['luns'][0]['thin'] = True
    if a.acl:
        target['acls'] = [{'initiator': i} for i in a.acl]
    if a.chap:
        target['chap'] = {'user': a.chap[0], 'secret': a.chap[1]}
    if a.mutual:
        target['mutual_chap'] = {'user': a.mutual[0], 'secret': a.mutual[1]}
    cfg = {
        'global': {},
        'portals': [{'name': 'default', 'address': a.host, 'port': a.port}],
        'targets': [target],
    }
    json.dump(cfg, sys.stdout, indent=2)
    sys.stdout.write('\n')


def cunit_section(text, test):
    """The part of a multi-test run that belongs to TEST: from its "Test: NAME ..." line to the
    next test or the run summary. Returns None when the test did not run."""
    m = re.search(r'(?m)^  Test: %s \.\.\.' % re.escape(test), text)
    if not m:
        return None
    rest = text[m.start():]
    end = re.search(r'(?m)^  Test: |^Run Summary:', rest[len(m.group(0)):])
    return rest[:len(m.group(0)) + end.start()] if end else rest


def cunit_classify_in_suite(log, rc, test):
    """Classify TEST inside a run of its whole suite (for tests that depend on state an
    earlier test of the suite leaves behind)."""
    try:
        text = open(log, errors='replace').read()
    except OSError as e:
        return 'FAIL cannot read log: %s' % e
    if rc == 124 or rc == 137:
        return 'FAIL timed out'
    sec = cunit_section(text, test)
    if sec is None:
        return 'FAIL test %s did not run in its suite (exit %d)' % (test, rc)
    if re.search(r'FAILED', sec):
        asserts = [l.strip() for l in sec.splitlines()
                   if l.strip()[:1].isdigit() and ' - ' in l and '.c:' in l]
        return 'FAIL %s' % ('; '.join(asserts[:4]) or 'CUnit reported a failure')
    if not re.search(r'passed', sec):
        return 'FAIL no verdict for %s (exit %d)' % (test, rc)
    skips = [l.strip() for l in sec.splitlines() if '[SKIPPED]' in l]
    if skips:
        return 'SKIP ' + skips[0][:200]
    return 'PASS'


def cunit_classify(log, rc):
    """One iscsi-test-cu invocation running exactly one test, verbose (-V) output in LOG.

    CUnit reports a test that called CU_PASS("[SKIPPED] ...") as passed; libiscsi logs the
    skip reason on a line containing "[SKIPPED]". So: any failed assertion -> FAIL; else a
    skip line -> SKIP with its text; else a clean summary with one passed test -> PASS.
    """
    try:
        text = open(log, errors='replace').read()
    except OSError as e:
        return 'FAIL cannot read log: %s' % e
    if rc == 124 or rc == 137:
        return 'FAIL timed out'
    summ = None
    for line in text.splitlines():
        f = line.split()
        if len(f) == 6 and f[0] == 'tests' and all(x.isdigit() for x in f[1:]):
            summ = [int(x) for x in f[1:]]
    if summ is None:
        tail = ' | '.join(text.strip().splitlines()[-3:])
        return 'FAIL no CUnit summary (exit %d): %s' % (rc, tail[:300])
    total, ran, passed, failed, inactive = summ
    if failed:
        asserts = [l.strip() for l in text.splitlines()
                   if l.strip()[:1].isdigit() and ' - ' in l and '.c:' in l]
        return 'FAIL %s' % ('; '.join(asserts[:4]) or 'CUnit reported a failure')
    if ran == 0 or total == 0:
        return 'SKIP test was not run (inactive or not registered: total %d ran %d)' % (total,
                                                                                     ran)
    # Before the suite runs, iscsi-test-cu probes the device and logs "[SKIPPED] ..." for
    # optional commands it lacks (e.g. PERSISTENT RESERVE IN); only lines after CUnit's
    # banner belong to the test itself.
    # The test's own output also ends where CUnit prints its verdict ("passed" at the start
    # of a line): the next suite's set-up probe follows it.
    body = text.split('CUnit - A unit testing framework', 1)[-1]
    body = re.split(r'(?m)^passed', body, maxsplit=1)[0]
    skips = [l.strip() for l in body.splitlines() if '[SKIPPED]' in l]
    if skips:
        return 'SKIP ' + skips[0][:200]
    if passed != ran:
        return 'FAIL passed %d of %d' % (passed, ran)
    if rc != 0:
        return 'FAIL iscsi-test-cu exited with status %d' % rc
    return 'PASS'


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest='cmd', required=True)
    sub.add_parser('free-port')
    sub.add_parser('free-ctl')
    w = sub.add_parser('wait-port')
    w.add_argument('host')
    w.add_argument('port', type=int)
    w.add_argument('secs', type=float)
    c = sub.add_parser('ix-config')
    c.add_argument('--port', type=int, required=True)
    c.add_argument('--host', default='127.0.0.1')
    c.add_argument('--iqn', required=True)
    c.add_argument('--size', type=int, default=64, help='MiB')
    c.add_argument('--chap', nargs=2, metavar=('USER', 'SECRET'))
    c.add_argument('--mutual', nargs=2, metavar=('USER', 'SECRET'))
    c.add_argument('--acl', action='append', default=[])
    c.add_argument('--thin', action='store_true', help='advertise thin provisioning')
    c.add_argument('--backend', choices=('ram', 'file', 'block'), default='ram')
    c.add_argument('--path', help='file or block device of a file/block LUN')
    k = sub.add_parser('cunit-classify')
    k.add_argument('log')
    k.add_argument('rc', type=int)
    k.add_argument('--in-suite', metavar='TEST', help='classify TEST within a suite run')
    a = p.parse_args()
    if a.cmd == 'free-port':
        print(free_port())
    elif a.cmd == 'free-ctl':
        print(free_ctl())
    elif a.cmd == 'wait-port':
        return wait_port(a.host, a.port, a.secs)
    elif a.cmd == 'ix-config':
        ix_config(a)
    elif a.cmd == 'cunit-classify':
        if a.in_suite:
            print(cunit_classify_in_suite(a.log, a.rc, a.in_suite))
        else:
            print(cunit_classify(a.log, a.rc))
    return 0


if __name__ == '__main__':
    sys.exit(main())
