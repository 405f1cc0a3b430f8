#!/usr/bin/env python3
"""Side-by-side benchmark of ix-target against tgtd (python3 stdlib only; run via bench/run.sh).

Both targets run at once, each with two equivalent 1 GiB LUNs:
  ram   ix: the RAM backend            tgt: rdwr on a file in /dev/shm (tgt has no RAM store)
  file  ix: the file backend (io_uring) on a file in /dev/shm, write_cache on
        tgt: rdwr on another file in /dev/shm (tgt reports a write cache by default)
Every LUN is written once end to end before measuring, so reads touch real pages.

Each repetition runs every (workload, LUN) against ix and tgt back to back, alternating which
goes first, and measures iperf3's single-stream loopback throughput once as the ceiling. Per
workload we report the median over repetitions of: IOPS or MiB/s, the mean latency the client
implies (queue depth / IOPS, Little's law) or its percentiles when the client reports them, the
target process's CPU-seconds per GiB moved (utime+stime of /proc/PID/stat, all threads), the
client's CPU use, and the ratio ix/tgt of the medians. The machine is shared and noisy: the
ratios are the result, the absolute figures only context.

Clients are plain functions in CLIENTS (see "Clients" below): iscsi-perf (reads), qemu-img
bench (sequential or strided writes) and ix-bench (this project's initiator: random writes,
CRC32C data digests, percentiles, several sessions). A new one is one function and one entry
there, then named in a workload's "client" field. The ix-bench rows ("ixb-...") spread the
workload's queue depth (the total) over --ixb-sessions sessions, the same for ix and tgt (the
"ixb1-" rows always use one session); the "digests" rows run ix with ix-bench --digests
against ix without.
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixtest  # noqa: E402  (free ports, tgtd control ports)

GiB = 1 << 30
MiB = 1 << 20
LUN_SIZE = GiB
IQN = 'iqn.2026-11.io.ix:bench'
CLK_TCK = os.sysconf('SC_CLK_TCK')


def log(msg):
    print('[%s] %s' % (time.strftime('%H:%M:%S'), msg), file=sys.stderr, flush=True)


def proc_cpu_s(pid):
    """utime + stime of a whole process (every thread), in seconds."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# --------------------------------------------------------------------------------- targets

class Target:
    kind = ''
    proc = None
    port = 0
    luns = {}          # 'ram' / 'file' -> LUN number

    def url(self, lun):
        return 'iscsi://127.0.0.1:%d/%s/%d' % (self.port, IQN, self.luns[lun])

    def cpu_s(self):
        return proc_cpu_s(self.proc.pid)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


class IxTarget(Target):
    kind = 'ix'

    def __init__(self, build, work, name='ix', header_digest='prefer-none', threads=0,
                 wrapper=(), ready_timeout=30, extra_global=None):
        self.bin = os.path.join(ROOT, build, 'tools', 'ix-target')
        self.work = work
        self.name = name
        self.header_digest = header_digest
        self.threads = threads          # 0 = one worker per CPU (the default)
        self.wrapper = list(wrapper)    # e.g. valgrind (bench/insn.py)
        self.ready_timeout = ready_timeout
        self.extra_global = dict(extra_global or {})   # more "global" keys (bench/latency.py)
        self.luns = {'ram': 0, 'file': 1}
        self.rbd = None                 # (ceph.conf, image): LUN 2 is that RBD image

    stop_timeout = 15

    def config(self):
        """The configuration for self.port: a RAM LUN, a file LUN and, with self.rbd, the
        image as LUN 2."""
        img = os.path.join(self.work, self.name + '-file.img')
        cfg = {
            'global': {'log_level': 'info',   # one line per login: digests check
                       'threads': self.threads,
                       # iscsi-perf always offers HeaderDigest=None,CRC32C, so the
                       # target decides: 'crc32c' for the digest instance
                       'negotiation': {'header_digest': self.header_digest,
                                       'data_digest': 'prefer-none'},
                       **self.extra_global},
            'portals': [{'name': 'bench', 'address': '127.0.0.1', 'port': self.port}],
            'targets': [{'name': IQN, 'luns': [
                {'lun': 0, 'backend': 'ram', 'size': '%d' % LUN_SIZE},
                {'lun': 1, 'backend': 'file', 'path': img, 'size': '%d' % LUN_SIZE,
                 'write_cache': True},
            ]}],
        }
        if self.rbd:
            self.luns['rbd'] = 2
            cfg['targets'][0]['luns'].append(
                {'lun': 2, 'backend': 'rbd', 'thin': True,
                 'rbd': {'pool': 'rbd', 'image': self.rbd[1], 'conf': self.rbd[0]}})
        return cfg

    def ready(self, text):
        return 'ix-target: ready' in text

    def start(self):
        """Start on a free port (another one when it was taken meanwhile, five tries) and
        wait for the ready line, at most ready_timeout seconds."""
        if not os.access(self.bin, os.X_OK):
            raise SystemExit('ix-target not built at %s' % self.bin)
        for attempt in range(5):
            self.port = ixtest.free_port()
            path = os.path.join(self.work, self.name + '.json')
            with open(path, 'w') as f:
                json.dump(self.config(), f, indent=2)
            self.log = os.path.join(self.work, self.name + '.log')
            lf = open(self.log, 'w')
            self.proc = subprocess.Popen(self.wrapper + [self.bin, '-c', path], stdout=lf,
                                         stderr=lf)
            lf.close()
            deadline = time.monotonic() + self.ready_timeout
            while time.monotonic() < deadline:
                text = open(self.log, errors='replace').read()
                if self.ready(text):
                    log('%s: ix-target pid %d on port %d, HeaderDigest %s' % (
                        self.name, self.proc.pid, self.port, self.header_digest))
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
            text = open(self.log, errors='replace').read()
            self.stop()
            if 'ddress already in use' not in text:
                raise SystemExit('ix-target did not start:\n' + text[-2000:])
        raise SystemExit('ix-target: no free port after 5 tries')

    def stop(self):
        if self.alive():
            pid = self.proc.pid
            if self.wrapper[:1] == ['strace']:
                # signal the daemon, not strace (strace would detach without its summary)
                with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
                    pid = int(f.read().split()[0])
            os.kill(pid, signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout + 4 * bool(self.wrapper) * 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class TgtTarget(Target):
    kind = 'tgt'
    name = 'tgt'

    def __init__(self, work):
        self.work = work
        self.luns = {'ram': 1, 'file': 2}   # tgt keeps LUN 0 for its controller
        self.rbd = None                     # (ceph.conf, image): LUN 3 through bs_rbd

    def adm(self, *args):
        subprocess.run(['tgtadm', '-C', str(self.ctl), '--lld', 'iscsi'] + list(args),
                       check=True, timeout=10, stdout=subprocess.DEVNULL)

    def start(self):
        if not shutil.which('tgtd'):
            raise SystemExit('tgtd not installed (scripts/deps.sh installs it)')
        imgs = []
        for name in ('tgt-ram.img', 'tgt-file.img'):
            p = os.path.join(self.work, name)
            with open(p, 'wb') as f:
                f.truncate(LUN_SIZE)
            imgs.append(p)
        self.port = ixtest.free_port()
        self.ctl = ixtest.free_ctl()
        self.log = os.path.join(self.work, 'tgtd.log')
        lf = open(self.log, 'w')
        self.proc = subprocess.Popen(['tgtd', '-f', '-C', str(self.ctl), '--iscsi',
                                      'portal=127.0.0.1:%d' % self.port], stdout=lf, stderr=lf)
        lf.close()
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run(['tgtadm', '-C', str(self.ctl), '--lld', 'iscsi', '--op', 'show',
                                '--mode', 'target'], capture_output=True, timeout=10)
            if r.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit('tgtd did not start:\n' + open(self.log).read()[-2000:])
            time.sleep(0.1)
        self.adm('--op', 'new', '--mode', 'target', '--tid', '1', '-T', IQN)
        for lun, img in zip((1, 2), imgs):
            self.adm('--op', 'new', '--mode', 'logicalunit', '--tid', '1', '--lun', str(lun),
                     '-b', img)
        if self.rbd:  # Debian package tgt-rbd
            self.luns['rbd'] = 3
            self.adm('--op', 'new', '--mode', 'logicalunit', '--tid', '1', '--lun', '3',
                     '--bstype', 'rbd', '-b', 'rbd/' + self.rbd[1],
                     '--bsopts', 'conf=' + self.rbd[0])
        self.adm('--op', 'bind', '--mode', 'target', '--tid', '1', '-I', 'ALL')
        self.adm('--op', 'update', '--mode', 'target', '--tid', '1', '-n', 'HeaderDigest',
                 '-v', 'None,CRC32C')
        if ixtest.wait_port('127.0.0.1', self.port, 10):
            raise SystemExit('tgtd portal not listening')
        log('tgtd pid %d on port %d (control %d)' % (self.proc.pid, self.port, self.ctl))

    def stop(self):
        if not self.alive():
            return
        # tgtd ignores SIGTERM: delete the target and the system, SIGKILL as a last resort
        for args in (('--op', 'delete', '--mode', 'target', '--tid', '1', '--force'),
                     ('--op', 'delete', '--mode', 'system')):
            subprocess.run(['tgtadm', '-C', str(self.ctl), '--lld', 'iscsi'] + list(args),
                           capture_output=True, timeout=10)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------------- clients
#
# A client is a function (target, lun, workload, secs, opts) -> dict with at least
#   ops    I/Os completed            bytes  bytes moved        secs  wall time of the I/O
# and optionally
#   lat_us {'p50': .., 'p99': .., 'p999': ..}   latency percentiles measured by the client
# It is handed the whole Target so it can pick the URL form it needs. Register it in CLIENTS
# and name it in a workload's 'client'.
#
# ix-bench (tools/ix-bench, the project's own initiator) is the client that is not the limit:
# it does random writes (qemu-img bench only sequential or strided ones), can require CRC32C
# header AND data digests (libiscsi always offers DataDigest=None), reports latency
# percentiles, and spreads the queue depth over several sessions on their own threads.

class ClientError(Exception):
    pass


def run_procs(cmds, timeout):
    """Run commands in parallel; returns (outputs, wall seconds)."""
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for c in cmds]
    outs = []
    for p, c in zip(procs, cmds):
        try:
            out, _ = p.communicate(timeout=max(1, timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise ClientError('timed out: %s' % ' '.join(c))
        text = out.decode(errors='replace')
        if p.returncode != 0:
            raise ClientError('%s exited %d: %s' % (c[0], p.returncode, text[-500:]))
        outs.append(text)
    return outs, time.monotonic() - t0


def client_iscsi_perf(target, lun, wl, secs, opts):
    """libiscsi's iscsi-perf: reads only, prints a running IOPS average. With opts.clients > 1
    the queue depth is split over that many processes (separate sessions)."""
    n = opts.clients
    qd = max(1, wl['qd'] // n)
    cmds = []
    for i in range(n):
        c = ['iscsi-perf', '-i', 'iqn.2026-11.io.ix:bench-client-%d' % i, '-m', str(qd),
             '-b', str(wl['bs'] // 512), '-t', str(secs)]
        if wl['pattern'] == 'rand':
            c.append('-r')
        c.append(target.url(lun))
        cmds.append(c)
    outs, wall = run_procs(cmds, secs + 30)
    iops = 0.0
    for text in outs:
        avg = re.findall(r'iops average (\d+)', text)
        if not avg:
            raise ClientError('iscsi-perf printed no average: %s' % text[-300:])
        iops += float(avg[-1])
    return {'ops': iops * secs, 'bytes': iops * secs * wl['bs'], 'secs': secs, 'wall': wall}


def client_qemu_img(target, lun, wl, secs, opts):
    """qemu-img bench through QEMU's iscsi driver: a fixed count of requests, sequential or at
    a fixed stride (wrapping at the end of the LUN). The count is sized from the previous run
    of the same row so a run lasts about secs."""
    key = (target.name, lun, wl['name'])
    count = opts.counts.get(key, wl['first_count'])
    cmd = ['qemu-img', 'bench', '-f', 'raw', '-t', 'none', '-d', str(wl['qd']),
           '-s', str(wl['bs']), '-c', str(count)]
    if wl['rw'] == 'write':
        cmd.append('-w')
    if wl['pattern'] == 'stride':
        cmd += ['-S', str(wl['stride'])]
    cmd.append(target.url(lun))
    outs, wall = run_procs([cmd], secs * 10 + 60)
    m = re.search(r'Run completed in ([0-9.]+) seconds', outs[0])
    if not m:
        raise ClientError('qemu-img bench printed no time: %s' % outs[0][-300:])
    t = float(m.group(1))
    opts.counts[key] = max(wl['first_count'] // 4, int(count * secs / max(t, 0.05)))
    return {'ops': count, 'bytes': count * wl['bs'], 'secs': t, 'wall': wall}


def ixb_split(wl, opts):
    """(sessions, qd per session): the workload's queue depth is the TOTAL over the sessions,
    the same for both targets. A workload with 'sessions' fixes the count."""
    n = max(1, min(wl.get('sessions', opts.ixb_sessions), wl['qd']))
    if wl['qd'] % n:
        raise SystemExit('%s: QD %d does not split over %d sessions' % (wl['name'], wl['qd'], n))
    return n, wl['qd'] // n


IXB_RW = {('read', 'rand'): 'randread', ('write', 'rand'): 'randwrite',
          ('read', 'seq'): 'read', ('write', 'seq'): 'write'}


def ix_bench_cmd(binary, target, lun, wl, secs, opts):
    sessions, qd = ixb_split(wl, opts)
    cmd = [binary, '-p', '127.0.0.1:%d' % target.port, '-T', IQN, '-l', str(target.luns[lun]),
           '--rw', IXB_RW[(wl['rw'], wl['pattern'])], '--bs', str(wl['bs']), '--qd', str(qd),
           '--sessions', str(sessions), '--time', '%ds' % secs, '--json', '--quiet']
    if wl.get('digests'):
        cmd.append('--digests')
    return cmd


def parse_ix_bench(text):
    """The JSON summary line of ix-bench --json (the last line that parses as an object)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith('{'):
            try:
                return json.loads(line)
            except ValueError:
                break
    raise ClientError('ix-bench printed no JSON summary: %s' % text[-300:])


def client_ix_bench(target, lun, wl, secs, opts):
    """ix-bench, this project's initiator: --sessions sessions (one thread each, at most one per
    CPU) share the workload's queue depth; --digests when the workload asks for them."""
    cmd = ix_bench_cmd(opts.ix_bench, target, lun, wl, secs, opts)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=secs + 60)
    wall = time.monotonic() - t0
    j = parse_ix_bench(p.stdout.decode(errors='replace'))
    if p.returncode != 0 or j.get('result') != 'ok' or j.get('errors'):
        raise ClientError('ix-bench exited %d (%s): %s' % (
            p.returncode, j.get('first_error'), p.stderr.decode(errors='replace')[-500:]))
    d = j[wl['rw']]
    return {'ops': d['ios'], 'bytes': d['bytes'], 'secs': j['seconds'], 'wall': wall,
            'lat_us': {k: d['lat_us'][k] for k in ('p50', 'p99', 'p99.9') if k in d['lat_us']}}


CLIENTS = {
    'ix-bench': client_ix_bench,
    'iscsi-perf': client_iscsi_perf,
    'qemu-img': client_qemu_img,
}

# --------------------------------------------------------------------------------- workloads

WORKLOADS = [
    {'name': 'randread-4k-qd32', 'client': 'iscsi-perf', 'rw': 'read', 'pattern': 'rand',
     'bs': 4096, 'qd': 32, 'unit': 'IOPS',
     'cmd': 'iscsi-perf -r -m 32 -b 8 -t SECS URL'},
    {'name': 'randread-4k-qd1', 'client': 'iscsi-perf', 'rw': 'read', 'pattern': 'rand',
     'bs': 4096, 'qd': 1, 'unit': 'IOPS',
     'cmd': 'iscsi-perf -r -m 1 -b 8 -t SECS URL'},
    {'name': 'seqread-512k-qd8', 'client': 'iscsi-perf', 'rw': 'read', 'pattern': 'seq',
     'bs': 512 * 1024, 'qd': 8, 'unit': 'MiB/s',
     'cmd': 'iscsi-perf -m 8 -b 1024 -t SECS URL'},
    {'name': 'seqwrite-512k-qd8', 'client': 'qemu-img', 'rw': 'write', 'pattern': 'seq',
     'bs': 512 * 1024, 'qd': 8, 'unit': 'MiB/s', 'first_count': 2000,
     'cmd': 'qemu-img bench -f raw -t none -w -d 8 -s 524288 -c COUNT URL'},
    {'name': 'stridewrite-4k-qd32', 'client': 'qemu-img', 'rw': 'write', 'pattern': 'stride',
     'bs': 4096, 'qd': 32, 'stride': 4096 * 257, 'unit': 'IOPS', 'first_count': 50000,
     'cmd': 'qemu-img bench -f raw -t none -w -d 32 -s 4096 -S 1052672 -c COUNT URL'},
    # the same loads through ix-bench (queue depth = total over --ixb-sessions sessions)
    {'name': 'ixb-randread-4k-qd32', 'client': 'ix-bench', 'rw': 'read', 'pattern': 'rand',
     'bs': 4096, 'qd': 32, 'unit': 'IOPS'},
    {'name': 'ixb-randwrite-4k-qd32', 'client': 'ix-bench', 'rw': 'write', 'pattern': 'rand',
     'bs': 4096, 'qd': 32, 'unit': 'IOPS'},
    {'name': 'ixb-seqread-512k-qd8', 'client': 'ix-bench', 'rw': 'read', 'pattern': 'seq',
     'bs': 512 * 1024, 'qd': 8, 'unit': 'MiB/s'},
    {'name': 'ixb-seqwrite-512k-qd8', 'client': 'ix-bench', 'rw': 'write', 'pattern': 'seq',
     'bs': 512 * 1024, 'qd': 8, 'unit': 'MiB/s'},
    # one session (one TCP connection, as iscsi-perf -m 8 and qemu-img run the 512 KiB rows):
    # here the connection, not the two cores, is the limit
    {'name': 'ixb1-seqread-512k-qd8', 'client': 'ix-bench', 'rw': 'read', 'pattern': 'seq',
     'bs': 512 * 1024, 'qd': 8, 'unit': 'MiB/s', 'sessions': 1},
    {'name': 'ixb1-seqwrite-512k-qd8', 'client': 'ix-bench', 'rw': 'write', 'pattern': 'seq',
     'bs': 512 * 1024, 'qd': 8, 'unit': 'MiB/s', 'sessions': 1},
]


def workload_cmd(wl, secs, opts):
    """The client command of a workload, as printed in the report (URL / PORT placeholders)."""
    if wl['client'] == 'ix-bench':
        t = Target()
        t.port, t.luns = 0, {'ram': 0}
        cmd = ix_bench_cmd('ix-bench', t, 'ram', wl, secs, opts)
        return ' '.join(cmd).replace('127.0.0.1:0', 'HOST:PORT').replace('-l 0', '-l LUN')
    return wl['cmd'].replace('SECS', str(secs))


# ix against itself, CRC32C HeaderDigest and DataDigest on vs off: ix-bench --digests requires
# both (ix-target's default "prefer-none" accepts CRC32C when that is all the initiator
# offers), against the same ix-target instance and LUN. iscsi-perf and QEMU cannot do this:
# libiscsi 1.19 always offers DataDigest=None.
DIGEST_WORKLOADS = ['ixb-randread-4k-qd32', 'ixb-randwrite-4k-qd32', 'ixb-seqread-512k-qd8',
                    'ixb-seqwrite-512k-qd8', 'ixb1-seqread-512k-qd8', 'ixb1-seqwrite-512k-qd8']


def run_one(target, lun, wl, secs, opts):
    if not target.alive():
        raise SystemExit('%s died (log: %s)' % (target.name, target.log))
    log_at = os.path.getsize(target.log)
    c0 = target.cpu_s()
    k0 = children_cpu_s()
    r = CLIENTS[wl['client']](target, lun, wl, secs, opts)
    k1 = children_cpu_s()
    c1 = target.cpu_s()
    if target.kind == 'ix':
        # ix logs what each login negotiated: make sure the digest setting took effect
        with open(target.log, errors='replace') as f:
            f.seek(log_at)
            digests = re.findall(r'normal session .* digests (\w+/\w+)', f.read())
        if wl.get('digests'):
            want = 'CRC32C/CRC32C'
        else:
            want = ('CRC32C' if target.header_digest == 'crc32c' else 'None') + '/None'
        if not digests or any(d != want for d in digests):
            raise SystemExit('%s: expected digests (header/data) %s, ix negotiated %s' %
                             (wl['name'], want, digests or 'no session'))
    r['target_cpu'] = c1 - c0
    r['target_cpu_pct'] = 100 * r['target_cpu'] / r['wall']
    r['client_cpu_pct'] = 100 * (k1 - k0) / r['wall']
    r['client_cpu'] = k1 - k0
    r['value'] = r['ops'] / r['secs'] if wl['unit'] == 'IOPS' else r['bytes'] / r['secs'] / MiB
    r['cpu_per_gib'] = r['target_cpu'] / (r['bytes'] / GiB) if r['bytes'] else None
    r['client_cpu_per_gib'] = r['client_cpu'] / (r['bytes'] / GiB) if r['bytes'] else None
    return r


def iperf3(secs):
    """iperf3's single-stream loopback throughput in MiB/s (the ceiling for one connection)."""
    port = ixtest.free_port()
    srv = subprocess.Popen(['iperf3', '-s', '-p', str(port)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):   # no probe connection: iperf3 would take it for a test
            r = subprocess.run(['iperf3', '-c', '127.0.0.1', '-p', str(port), '-t', str(secs),
                                '-J'], capture_output=True, timeout=secs + 30)
            j = json.loads(r.stdout or b'{}')
            if r.returncode == 0 and 'sum_received' in j.get('end', {}):
                return j['end']['sum_received']['bits_per_second'] / 8 / MiB
            time.sleep(0.1)
        raise SystemExit('iperf3 failed: %s' % j.get('error', r.stderr[-300:]))
    finally:
        srv.terminate()
        srv.wait()


class Ceph:
    """A single-node cluster for the rbd rows (tests/ceph/cluster.sh): bluestore on a sparse
    file in /dev/shm (on this machine's disk every 4 KiB write waits ~100 ms for bluestore's
    sync, which would hide the targets behind the disk), two images of LUN_SIZE (~2.5 GiB of
    memory once prefilled)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='ix-bench-ceph.', dir='/dev/shm')
        self.conf = os.path.join(self.dir, 'ceph.conf')
        self.sh = os.path.join(ROOT, 'tests', 'ceph', 'cluster.sh')

    def start(self):
        r = subprocess.run([self.sh, 'start', self.dir, '--store', 'bluestore'],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise SystemExit('Ceph cluster did not start (scripts/deps.sh --ceph installs it):\n'
                             + r.stderr[-2000:])
        # tgt's bs_rbd sets no cache option: librbd's default (writearound) would complete its
        # writes before the OSD has them; it gets the cache off, as ix sets for itself
        with open(self.conf) as f:
            text = f.read()
        self.conf_nocache = os.path.join(self.dir, 'ceph-nocache.conf')
        with open(self.conf_nocache, 'w') as f:
            f.write(text.replace('[client]', '[client]\nrbd cache = false', 1))
        env = dict(os.environ, CEPH_CONF=self.conf)
        for img in ('bench-ix', 'bench-tgt'):
            subprocess.run(['rbd', 'create', '--size', '%dM' % (LUN_SIZE // MiB), 'rbd/' + img],
                           check=True, timeout=60, env=env)
        log('ceph: single-node cluster in %s, images bench-ix and bench-tgt of %d MiB' % (
            self.dir, LUN_SIZE // MiB))

    def stop(self):
        subprocess.run([self.sh, 'stop', self.dir], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def start_ceph():
    c = Ceph()
    try:
        c.start()
    except BaseException:
        c.stop()
        raise
    return c


def prefill(target, lun, opts):
    """Write the whole LUN once (512 KiB sequential) so later reads hit allocated pages."""
    wl = {'name': 'prefill', 'client': 'qemu-img', 'rw': 'write', 'pattern': 'seq',
          'bs': 512 * 1024, 'qd': 8, 'first_count': LUN_SIZE // (512 * 1024)}
    saved = opts.clients
    opts.clients = 1
    try:
        client_qemu_img(target, lun, wl, 1, opts)
    finally:
        opts.clients = saved
        opts.counts.pop((target.name, lun, 'prefill'), None)


# --------------------------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, digits=0):
    if v is None:
        return '-'
    return ('{:,.%df}' % digits).format(v)


def print_table(summary, ceiling, unit_of, opts, f):
    hdr = ('%-22s %-4s %-10s %10s %10s %6s %6s %6s %6s %6s %6s %6s %5s %5s %5s %5s %5s' %
           ('workload', 'lun', 'A/B', 'A', 'B', 'A/B', 'lat A', 'lat B', 'p99 A', 'p99 B',
            'cpuA', 'cpuB', 'c A/B', 'tgt%A', 'tgt%B', 'cli%A', 'cli%B'))
    print(hdr, file=f)
    print('-' * len(hdr), file=f)
    for row in summary:
        a, b = row['sides']
        ra, rb = row[a], row[b]
        unit = unit_of[row['workload']]
        print('%-22s %-4s %-10s %10s %10s %6s %6s %6s %6s %6s %6s %6s %5s %5s %5s %5s %5s' % (
            row['workload'], row['lun'], '%s/%s' % (a, b),
            fmt(ra['value']) + (' ' if unit == 'IOPS' else 'M'),
            fmt(rb['value']) + (' ' if unit == 'IOPS' else 'M'),
            fmt(row['ratio'], 2), fmt(ra['lat_mean_us'], 0), fmt(rb['lat_mean_us'], 0),
            fmt(ra['p99_us'], 0), fmt(rb['p99_us'], 0),
            fmt(ra['cpu_s_per_gib'], 2), fmt(rb['cpu_s_per_gib'], 2), fmt(row['cpu_ratio'], 2),
            fmt(ra['target_cpu_pct'], 0), fmt(rb['target_cpu_pct'], 0),
            fmt(ra['client_cpu_pct'], 0), fmt(rb['client_cpu_pct'], 0)), file=f)
    dig = [r for r in summary if r['variant'] == 'digests']
    if dig:
        print('\nix with CRC32C header+data digests against ix without (RAM LUN): throughput, '
              'and CPU-s per GiB\nof the target and of the client (median runs):', file=f)
        for row in dig:
            a, b = row['sides']
            ta, tb = row[a]['cpu_s_per_gib'], row[b]['cpu_s_per_gib']
            ca, cb = row[a]['client_cpu_s_per_gib'], row[b]['client_cpu_s_per_gib']
            print('  %-22s throughput %5s  loss %4s%%   target CPU/GiB %s -> %s   client '
                  'CPU/GiB %s -> %s' % (
                      row['workload'], fmt(row['ratio'], 2),
                      fmt(100 * (1 - row['ratio']) if row['ratio'] else None, 0),
                      fmt(tb, 2), fmt(ta, 2), fmt(cb, 2), fmt(ca, 2)), file=f)
    if ceiling:
        print('\niperf3 loopback, one stream (median of %d): %s MiB/s' %
              (len(ceiling), fmt(med(ceiling))), file=f)
        for row in summary:
            if 'seq' in row['workload'] and row['variant'] == 'vs-tgt':
                a = row['sides'][0]
                wl = next((w for w in WORKLOADS if w['name'] == row['workload']), {})
                conns = (ixb_split(wl, opts)[0] if wl.get('client') == 'ix-bench'
                         else opts.clients)
                print('  %s %s: ix at %.0f%% of iperf3 (%d connection(s))' % (
                    row['workload'], row['lun'], 100 * row[a]['value'] / med(ceiling), conns),
                    file=f)
    print('\nA, B: medians (IOPS, or MiB/s marked M); lat: mean latency in us implied by '
          'QD/IOPS;\np99: 99th percentile latency in us (ix-bench only); cpu: target '
          'CPU-seconds per GiB\nmoved; tgt%: target process CPU as % of one core; cli%: the '
          'client processes\' CPU\nas % of one core. ix+dig: ix with CRC32C header '
          'and data digests.', file=f)


# --------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-release', help='ix build directory')
    ap.add_argument('--reps', type=int, default=5, help='repetitions (default 5)')
    ap.add_argument('--time', type=int, default=5, help='seconds per run (default 5)')
    ap.add_argument('--luns', default='ram,file',
                    help='ram,file,rbd (default ram,file); rbd starts a single-node Ceph cluster '
                    '(tests/ceph/cluster.sh, bluestore, in /dev/shm) with one 1 GiB image for '
                    'ix and one for tgt (bs_rbd, Debian package tgt-rbd)')
    ap.add_argument('--workloads', default='all',
                    help='comma list of workload names or "all"; "none" skips them')
    ap.add_argument('--no-digests', action='store_true',
                    help='skip the rows of ix with CRC32C header+data digests against ix without')
    ap.add_argument('--clients', type=int, default=1,
                    help='client processes per run (iscsi-perf splits the queue depth)')
    ap.add_argument('--ixb-sessions', type=int, default=2,
                    help='ix-bench sessions per run (one thread each); the workload\'s queue '
                    'depth is the total over them (default 2)')
    ap.add_argument('--ix-bench', help='ix-bench binary (default BUILD/tools/ix-bench)')
    ap.add_argument('--quick', action='store_true', help='1 repetition of 2 s')
    ap.add_argument('--json', metavar='FILE', help='write results as JSON ("-" = stdout)')
    ap.add_argument('--workdir', help='where the LUN files go (default: a dir in /dev/shm)')
    opts = ap.parse_args()
    if opts.quick:
        opts.reps, opts.time = 1, 2
    opts.counts = {}
    opts.ix_bench = opts.ix_bench or os.path.join(ROOT, opts.build, 'tools', 'ix-bench')
    if opts.ixb_sessions < 1:
        ap.error('--ixb-sessions must be at least 1')
    luns = [x for x in opts.luns.split(',') if x]
    for x in luns:
        if x not in ('ram', 'file', 'rbd'):
            ap.error('unknown LUN kind %r' % x)
    by_name = {w['name']: w for w in WORKLOADS}
    if opts.workloads == 'all':
        wls = list(WORKLOADS)
    elif opts.workloads == 'none':
        wls = []
    else:
        wls = []
        for n in opts.workloads.split(','):
            if n not in by_name:
                ap.error('unknown workload %r (have: %s)' % (n, ', '.join(by_name)))
            wls.append(by_name[n])
    for tool in ('iscsi-perf', 'qemu-img', 'iperf3', 'tgtd', 'tgtadm'):
        if not shutil.which(tool):
            raise SystemExit('%s not installed (scripts/deps.sh installs it)' % tool)
    if any(w['client'] == 'ix-bench' for w in wls) and not os.access(opts.ix_bench, os.X_OK):
        raise SystemExit('ix-bench not built at %s' % opts.ix_bench)

    work = opts.workdir or tempfile.mkdtemp(prefix='ix-bench.', dir='/dev/shm')
    os.makedirs(work, exist_ok=True)
    ix = IxTarget(opts.build, work)
    tgt = TgtTarget(work)
    targets = [ix, tgt]
    started = time.strftime('%Y-%m-%d %H:%M:%S %z')
    load_seen = [os.getloadavg()[0]]
    ceph = None
    try:
        if 'rbd' in luns:
            ceph = start_ceph()
            ix.rbd = (ceph.conf, 'bench-ix')
            tgt.rbd = (ceph.conf_nocache, 'bench-tgt')
        for t in targets:
            t.start()
        for t in targets:
            for lun in luns:
                log('prefill %s %s' % (t.name, lun))
                prefill(t, lun, opts)

        # rows: (workload, lun, variant) -> {side: [runs]}; a side is (name, target, workload)
        results = {}
        rows = []
        plan = []   # (row, side A, side B, lun)
        for wl in wls:
            for lun in luns:
                row = (wl['name'], lun, 'vs-tgt')
                rows.append(row)
                results[row] = {'ix': [], 'tgt': []}
                plan.append((row, ('ix', ix, wl), ('tgt', tgt, wl), lun))
        if not opts.no_digests:
            for wl in wls:
                if wl['name'] not in DIGEST_WORKLOADS or 'ram' not in luns:
                    continue
                row = (wl['name'], 'ram', 'digests')
                rows.append(row)
                results[row] = {'ix+dig': [], 'ix': []}
                plan.append((row, ('ix+dig', ix, dict(wl, digests=True)), ('ix', ix, wl),
                             'ram'))
        ceiling = []
        for rep in range(opts.reps):
            log('repetition %d/%d: iperf3 (load average %.1f)' % (
                rep + 1, opts.reps, os.getloadavg()[0]))
            ceiling.append(iperf3(opts.time))
            log('  iperf3 %.0f MiB/s' % ceiling[-1])
            for row, sa, sb, lun in plan:
                pair = [sa, sb] if rep % 2 == 0 else [sb, sa]
                for name, target, wl in pair:
                    if wl['client'] == 'qemu-img' and \
                            (target.name, lun, wl['name']) not in opts.counts:
                        # unrecorded run that sizes the request count to opts.time
                        client_qemu_img(target, lun, wl, opts.time, opts)
                    r = run_one(target, lun, wl, opts.time, opts)
                    r['qd'] = wl['qd']
                    results[row][name].append(r)
                    log('  %-22s %-4s %-6s %12.1f %s  target %.2f CPU-s/GiB %3.0f%%  '
                        'client %3.0f%%' % (wl['name'], lun, name, r['value'], wl['unit'],
                                            r['cpu_per_gib'] or 0, r['target_cpu_pct'],
                                            r['client_cpu_pct']))
                load_seen.append(os.getloadavg()[0])
        summary = [summarise_row(row, results[row]) for row in rows]
    finally:
        for t in targets:
            t.stop()
        if ceph:
            ceph.stop()
        if not opts.workdir:
            shutil.rmtree(work, ignore_errors=True)

    unit_of = {w['name']: w['unit'] for w in WORKLOADS}
    doc = {
        'date': started,
        'host': {'cpus': os.cpu_count(), 'kernel': os.uname().release,
                 'loadavg_at_end': os.getloadavg()},
        'loadavg_1min_seen': [min(load_seen), max(load_seen)],
        'options': {'reps': opts.reps, 'secs': opts.time, 'luns': luns,
                    'clients': opts.clients, 'ixb_sessions': opts.ixb_sessions},
        'commands': {w['name']: workload_cmd(w, opts.time, opts) for w in wls},
        'iperf3_mib_s': ceiling,
        'rows': summary,
    }
    out = sys.stdout
    if opts.json == '-':
        out = sys.stderr
    print('\nix vs tgt, %s, %d repetitions of %d s, %d iscsi-perf process(es) and %d ix-bench '
          'session(s) per run,\nload average (1 min) %.1f-%.1f during the run' % (
              started, opts.reps, opts.time, opts.clients, opts.ixb_sessions, min(load_seen),
              max(load_seen)), file=out)
    for w in wls:
        print('  %-22s %s' % (w['name'], workload_cmd(w, opts.time, opts)), file=out)
    print_table(summary, ceiling, unit_of, opts, out)
    if opts.json:
        text = json.dumps(doc, indent=2) + '\n'
        if opts.json == '-':
            sys.stdout.write(text)
        else:
            with open(opts.json, 'w') as f:
                f.write(text)


def summarise_row(row, res):
    name, lun, variant = row
    sides = list(res)
    out = {'workload': name, 'lun': lun, 'variant': variant, 'sides': sides}
    for side in sides:
        runs = res[side]
        out[side] = {
            'value': med(r['value'] for r in runs),
            'cpu_s_per_gib': med(r['cpu_per_gib'] for r in runs),
            'client_cpu_s_per_gib': med(r['client_cpu_per_gib'] for r in runs),
            'client_cpu_pct': med(r['client_cpu_pct'] for r in runs),
            'target_cpu_pct': med(r['target_cpu_pct'] for r in runs),
            'p99_us': med((r.get('lat_us') or {}).get('p99') for r in runs),
            'lat_mean_us': med(1e6 * r['qd'] / (r['ops'] / r['secs']) for r in runs),
            'lat_us': runs[-1].get('lat_us') if runs else None,
            'runs': [round(r['value'], 1) for r in runs],
            'cpu_runs': [round(r['cpu_per_gib'], 3) if r['cpu_per_gib'] else None
                         for r in runs],
        }
    a, b = sides
    va, vb = out[a]['value'], out[b]['value']
    out['ratio'] = va / vb if va and vb else None
    ca, cb = out[a]['cpu_s_per_gib'], out[b]['cpu_s_per_gib']
    out['cpu_ratio'] = ca / cb if ca and cb else None
    return out


if __name__ == '__main__':
    main()
