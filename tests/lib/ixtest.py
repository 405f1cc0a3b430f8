#!/usr/bin/env python3
"""Small helpers for the shell test library (python3 stdlib only).

  ixtest.py free-port                 print a free TCP port on 127.0.0.1 in 3261..4999
  ixtest.py free-ctl                  print an unused tgtd control port number
  ixtest.py wait-port HOST PORT SECS  exit 0 once HOST:PORT accepts a connection
  ixtest.py ix-config [options]       print an ix-target JSON config (docs/configuration.md):
                                      one LUN, --backend ram|file|block [--path P], or
                                      several RAM LUNs (--lun ROLE:ATTRS ...)
  ixtest.py cunit-run LOG RC TEST...  classify each TEST of one verbose iscsi-test-cu run:
                                      prints "TEST PASS|FAIL|SKIP [reason]" per line (CUnit
                                      counts skips as passes; these lines do not)
  ixtest.py cunit-runs MANIFEST       the same for every run a manifest lists, printing
                                      "FAMILY.TEST[SUFFIX] STATUS [reason]"
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


# What ASan, LSan and UBSan print when they find something (tests/lib/sanitizer.sh has the
# same pattern for the shell tests and tests/run.sh).
SANITIZER = re.compile(r'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|'
                       r'SUMMARY: (Address|Undefined|Leak)')


def sanitizer_report(text):
    """True when text (a daemon's log) has a sanitizer report."""
    return SANITIZER.search(text) is not None


def check_sanitizer(report, daemon, what):
    """A FAIL 'sanitizer-WHAT' ('sanitizer' for an empty WHAT) when the daemon's log has a
    sanitizer report."""
    if daemon and sanitizer_report(daemon.output()):
        report('FAIL', 'sanitizer-' + what if what else 'sanitizer',
               'sanitizer report in ' + daemon.log_path)


class Reporter:
    """report(st, name, detail): one "PASS|FAIL|SKIP TEST.NAME detail" line per check, printed
    and appended to $IX_RESULTS (tests/run.sh counts those lines); .failed counts the FAILs.
    check(name, ok, detail) reports PASS or FAIL and returns ok."""

    def __init__(self, test):
        self.test = test
        self.failed = 0

    def __call__(self, st, name, detail=''):
        line = ('%s %s.%s %s' % (st, self.test, name, detail)).rstrip()
        print(line, flush=True)
        if os.environ.get('IX_RESULTS'):
            with open(os.environ['IX_RESULTS'], 'a') as f:
                f.write(line + '\n')
        self.failed += st == 'FAIL'

    report = __call__

    def check(self, name, ok, detail=''):
        self('PASS' if ok else 'FAIL', name, detail)
        return ok

    def main(self, fn):
        """Exit with fn()'s status; an exception escaping fn is one FAIL line, named setup."""
        try:
            sys.exit(fn())
        except Exception:  # noqa: BLE001
            self('FAIL', 'setup', traceback.format_exc().strip().splitlines()[-1])
            sys.exit(1)


class Daemon:
    """The tests' one ix-target process: started on cfg_path (with --testing when asked) with
    its output in OUT/log_name (tests/run.sh scans OUT/<test>.*.log for sanitizer reports, so
    name it after the test; append=True keeps earlier runs' lines, which output() skips).
    Waits until it prints "ix-target: ready"; DaemonExited if it exits first.
    tests/lib/ixdaemon.py writes the configuration and picks the ports for it."""

    def __init__(self, cfg_path, log_name, build=None, out=None, testing=False, append=False,
                 ready_timeout=30):
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
        build = build or os.environ.get('IX_BUILD', os.path.join(root, 'build'))
        out = out or os.environ.get('IX_OUT', os.path.join(root, 'tests', 'out'))
        os.makedirs(out, exist_ok=True)
        self.log_path = os.path.join(out, log_name)
        self.log_start = os.path.getsize(self.log_path) \
            if append and os.path.exists(self.log_path) else 0
        self.log = open(self.log_path, 'a' if append else 'w')
        self.p = subprocess.Popen([os.path.join(build, 'tools', 'ix-target'), '-c', cfg_path] +
                                  (['--testing'] if testing else []),
                                  stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.p.pid
        end = time.monotonic() + ready_timeout
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
        raise RuntimeError('ix-target not ready after %d s' % ready_timeout)

    def output(self):
        """What this daemon printed (earlier runs' lines in the same file are skipped)."""
        try:
            with open(self.log_path, errors='replace') as f:
                f.seek(self.log_start)
                return f.read()
        except OSError:
            return ''

    def alive(self):
        return self.p.poll() is None

    def fds(self):
        return len(os.listdir('/proc/%d/fd' % self.pid))

    def rss_kb(self):
        with open('/proc/%d/status' % self.pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
        return 0

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(10)
        self.log.close()

    def stop(self, timeout=15):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
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


def with_peer(test, secs):
    """Run the calling script again under tests/lib/with-peer.sh (it starts the peer, IX_PEER
    ix or tgt, exports PEER_PORT, PEER_IQN, ... and stops it after at most secs), unless that
    is where it runs already."""
    if 'PEER_PORT' not in os.environ:
        lib = os.path.dirname(os.path.abspath(__file__))
        os.execvp('bash', ['bash', os.path.join(lib, 'with-peer.sh'), test, str(secs),
                           sys.executable, os.path.abspath(sys.argv[0])] + sys.argv[1:])


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


# LUN attributes for --lun ROLE:ATTR,ATTR... (the role is the caller's name for it)
LUN_ATTRS = {'thin': ('thin', True), 'readonly': ('readonly', True),
             'removable': ('removable', True), 'nomedium': ('no_medium', True)}


def readcap16(initiator, url, timeout=30):
    """The capacity in bytes libiscsi's iscsi-readcapacity16 reads at url (an iscsi:// URL) as
    initiator, or the text of its failure (a str: its exit status and output's tail)."""
    try:
        r = subprocess.run(['iscsi-readcapacity16', '-i', initiator, url], timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        return 'timed out after %d s' % timeout
    lba = blen = None
    for ln in r.stdout.splitlines():
        k, _, v = ln.partition(':')
        if k.strip() == 'RETURNED LOGICAL BLOCK ADDRESS':
            lba = int(v)
        elif k.strip() == 'LOGICAL BLOCK LENGTH IN BYTES':
            blen = int(v)
    if r.returncode != 0 or lba is None or not blen:
        return 'exit %d: %s' % (r.returncode, ' '.join((r.stdout + r.stderr).split())[-200:])
    return (lba + 1) * blen


def lun_attrs(lun, attrs, spec, size_key):
    """lun with the attributes of a --lun spec (ATTR,ATTR...) set; size= goes to size_key
    (None: ignored). Returns lun."""
    for attr in filter(None, attrs.split(',')):
        if attr.startswith('size='):
            if size_key:
                lun[size_key] = '%sM' % attr[5:]
        elif attr.startswith('phys='):
            lun['physical_block_size'] = int(attr[5:])
        elif attr.startswith('sanitize_rate='):
            lun['sanitize_rate'] = attr[len('sanitize_rate='):]
        elif attr in LUN_ATTRS:
            key, val = LUN_ATTRS[attr]
            lun[key] = val
        else:
            raise SystemExit('unknown LUN attribute %r in %r' % (attr, spec))
    return lun


def lun_entries(a):
    """The LUNs of --lun specs, numbered from 0 in order; one RAM LUN by default."""
    if a.rbd:  # one RBD image per LUN role: PREFIX-ROLE
        pool, prefix, conf = a.rbd
        specs = a.lun or ['data:' + ('thin' if a.thin else '')]
        luns = []
        for n, spec in enumerate(specs):
            role, _, attrs = spec.partition(':')
            lun = {'lun': n, 'backend': 'rbd',
                   'rbd': {'pool': pool, 'image': '%s-%s' % (prefix, role), 'conf': conf}}
            if a.rbd_timeout:
                lun['rbd']['osd_op_timeout_s'] = a.rbd_timeout
            # size=: the image's size (the caller created it so)
            luns.append(lun_attrs(lun, attrs, spec, None))
        return luns
    if not a.lun:  # one LUN: RAM, or a file or block device at --path
        lun = {'lun': 0, 'backend': a.backend}
        if a.backend == 'ram':
            lun['size'] = '%dM' % a.size
        elif not a.path:
            raise SystemExit('ix-config: --backend %s needs --path' % a.backend)
        else:
            lun['path'] = a.path
            if a.backend == 'file':
                lun['size'] = '%dM' % a.size
        if a.thin:
            lun['thin'] = True
        return [lun]
    luns = []
    for n, spec in enumerate(a.lun):
        attrs = spec.split(':', 1)[1] if ':' in spec else ''
        lun = {'lun': n, 'backend': 'ram', 'size': '%dM' % a.size}
        luns.append(lun_attrs(lun, attrs, spec, 'size'))
    return luns


def ix_config(a):
    """Config for the test target, following docs/configuration.md."""
    target = {
        'name': a.iqn,
        'luns': lun_entries(a),
    }
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
    if a.port2:  # a second portal group for the same target (multipath)
        cfg['portals'].append({'name': 'second', 'address': a.host, 'port': a.port2,
                               'tpgt': 2})
    if a.nop_interval_ms is not None:
        cfg['global']['nop_interval_ms'] = a.nop_interval_ms
    if a.header_digest or a.data_digest:
        neg = cfg['global'].setdefault('negotiation', {})
        if a.header_digest:
            neg['header_digest'] = a.header_digest
        if a.data_digest:
            neg['data_digest'] = a.data_digest
    json.dump(cfg, sys.stdout, indent=2)
    sys.stdout.write('\n')


def cunit_tests(text):
    """The tests of one verbose iscsi-test-cu run, in order: {name: section}. A section runs
    from the test's "  Test: NAME ..." line to the next test, suite or run summary."""
    text = text.split('CUnit - A unit testing framework', 1)[-1]
    heads = list(re.finditer(r'(?m)^  Test: (\S+) \.\.\.', text))
    out = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        tail = re.search(r'(?m)^Run Summary:|^Suite: ', text[m.end():end])
        if tail:
            end = m.end() + tail.start()
        out[m.group(1)] = text[m.end():end]
    return out


def cunit_verdict(section, rc):
    """PASS / FAIL / SKIP with a reason for one test's section. CUnit counts a test that
    called CU_PASS("[SKIPPED] ...") as passed; libiscsi logs "[SKIPPED] reason" first, so a
    skip line in the test's own output (before CUnit's verdict; what follows the verdict is
    the next test's set-up) makes it a skip."""
    v = re.search(r'(?m)(?:\.\.\.|^)(passed|FAILED)\b', section)
    if not v:
        last = ' | '.join(section.strip().splitlines()[-2:])
        return 'FAIL', 'no verdict, iscsi-test-cu exit %d%s' % (
            rc, ' (timed out)' if rc in (124, 137) else '') + (': ' + last[:200] if last else '')
    body = section[:v.start()]
    if v.group(1) == 'FAILED':
        after = section[v.end():].splitlines()
        # CUnit lists the failed assertions; the next test's set-up may follow on the line
        asserts = [re.split(r'\s{4,}', l.strip())[0] for l in after
                   if re.match(r'\s+\d+\. \S+\.c:\d+', l)]
        said = [l.strip() for l in body.splitlines() if '[FAILED]' in l]
        return 'FAIL', '; '.join((said[:1] + asserts[:3])) or 'CUnit reported a failure'
    skips = [l.strip() for l in body.splitlines() if '[SKIPPED]' in l]
    if skips:
        return 'SKIP', skips[0][:200]
    return 'PASS', ''


def cunit_run(log, rc, tests):
    """Classify TESTS (short names, in the order they were asked for) in one run's LOG."""
    try:
        text = open(log, errors='replace').read()
    except OSError as e:
        return [(t, 'FAIL', 'cannot read log: %s' % e) for t in tests]
    found = cunit_tests(text)
    res = []
    for t in tests:
        if t in found:
            res.append((t,) + cunit_verdict(found[t], rc))
        else:
            tail = ' | '.join(text.strip().splitlines()[-2:])
            res.append((t, 'FAIL', 'did not run (iscsi-test-cu exit %d%s): %s' % (
                rc, ', timed out' if rc in (124, 137) else '', tail[:200])))
    return res


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
    c.add_argument('--backend', choices=('ram', 'file', 'block', 'rbd'), default='ram')
    c.add_argument('--rbd', nargs=3, metavar=('POOL', 'PREFIX', 'CEPH_CONF'),
                   help='RBD LUNs: image PREFIX-ROLE for each --lun (PREFIX-data without)')
    c.add_argument('--rbd-timeout', type=int, help='rbd.osd_op_timeout_s of every RBD LUN')
    c.add_argument('--path', help='file or block device of a file/block LUN')
    c.add_argument('--lun', action='append', default=[], metavar='ROLE:ATTRS',
                   help='RAM LUNs instead, one per option, numbered from 0; ATTRS: thin, '
                   'readonly, removable, nomedium, size=MiB, phys=BYTES, sanitize_rate=SIZE (comma separated)')
    c.add_argument('--port2', type=int, help='a second portal (TPGT 2) on this port')
    c.add_argument('--header-digest', help='global.negotiation.header_digest')
    c.add_argument('--nop-interval-ms', type=int, help='global.nop_interval_ms (0: no pings)')
    c.add_argument('--data-digest', help='global.negotiation.data_digest')
    k = sub.add_parser('cunit-run')
    k.add_argument('log')
    k.add_argument('rc', type=int)
    k.add_argument('tests', nargs='+', help='short test names run in this invocation')
    m = sub.add_parser('cunit-runs')
    m.add_argument('manifest', help='lines "LOG RC ALIVE FAMILY SUFFIX TEST..." (SUFFIX - for '
                   'none, ALIVE 1 if the target still ran after the invocation)')
    a = p.parse_args()
    if a.cmd == 'free-port':
        print(free_port())
    elif a.cmd == 'free-ctl':
        print(free_ctl())
    elif a.cmd == 'wait-port':
        return wait_port(a.host, a.port, a.secs)
    elif a.cmd == 'ix-config':
        ix_config(a)
    elif a.cmd == 'cunit-run':
        for t, st, why in cunit_run(a.log, a.rc, a.tests):
            print('%s %s%s' % (t, st, ' ' + why if why else ''))
    elif a.cmd == 'cunit-runs':
        for line in open(a.manifest):
            log, rc, alive, fam, suffix, *tests = line.split()
            suffix = '' if suffix == '-' else suffix
            for t, st, why in cunit_run(log, int(rc), tests):
                if alive != '1':
                    st, why = 'FAIL', 'the target died during this run' + (
                        ' (%s)' % why if why else '')
                print('%s.%s%s %s%s' % (fam, t, suffix, st, ' ' + why if why else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
