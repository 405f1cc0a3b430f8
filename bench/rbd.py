#!/usr/bin/env python3
"""RBD at librbd's limit: ix's RBD LUN against librbd itself and against tgt's bs_rbd, in one run.

  bench/rbd.py [--build build-release] [--reps 3] [--scale 1.0] [--rows all|NAME,...]
               [--peers ix,tgt] [--clients iscsi-perf,qemu-img,ix-bench] [--image-mb 1024]
               [--ix-poll-us N] [--at-rate] [--json FILE]

A benchmark, not a test (not in any suite). It starts the project's single-node Ceph cluster
(tests/ceph/cluster.sh: one monitor, one OSD, bluestore on a sparse file in /dev/shm), creates
one image and writes it end to end once (`rbd bench`, 4 MiB sequential writes), then for each
row and repetition runs, against that same image:
  fio-rbd     fio's rbd engine (librbd in fio's process): the reference, ratio 1.00
  fio-rbd+cache  the same with librbd's default cache (write rows only; --no-cache-row
              drops it): rbd_cache true with the writearound policy completes a write before
              the OSD has it (4 KiB QD1 writes in ~25 us), which no gateway that honours FUA
              and SYNCHRONIZE CACHE may do; shown, never the reference
  rbd-bench   `rbd bench` (librbd in rbd's process)
  fio-rbd@ix  (--at-rate) fio again, held (--rate_iops) to the rate the first ix client of the
              row reached in that repetition: librbd's and the messenger's threads cost more
              per I/O at a lower rate (less batching), so a gateway's CPU per I/O compares
              with fio's at the same rate
  ix/CLIENT   ix-target's RBD LUN (librbd's async API) through iscsi-perf, qemu-img bench and
              ix-bench, each where it can do the row (iscsi-perf reads only; qemu-img bench
              sequential or strided only)
  tgt/CLIENT  tgtd with --bstype rbd (Debian package tgt-rbd), the same clients
Every librbd user but fio-rbd+cache runs with rbd_cache = false (a copy of the cluster's
ceph.conf with that line; ix sets it itself): a write completes once the OSD has committed it.
Rows: 4 KiB random read and write at QD1 and QD32, 1 MiB sequential read and write at QD8, and
the strided 4 KiB write at QD32 of docs/perf.md (4 KiB every 1 MiB + 4 KiB).

Every run but iscsi-perf's is bounded by a count of I/Os (the row's count times --scale);
iscsi-perf has only a time (-t), the time fio took for the same count (at least 2 s). Reported
per run: throughput; its ratio to fio-rbd's in the same repetition; and CPU per I/O in
microseconds of each process, from utime+stime in /proc/PID/stat (all threads, librbd's and
librados' included):
  proc us/IO   the process that holds librbd: fio or rbd for the direct rows (their CPU of a
               short run of the same row is subtracted, which removes connecting and opening
               the image), the gateway (ix-target, tgtd) for the others
  cli us/IO    the iSCSI client (iscsi-perf, qemu-img, ix-bench; login included)
  osd us/IO    ceph-osd during the run
Medians over --reps repetitions, with the spread (min..max) of the throughput ratio. The
clients, the gateways and the OSD share this machine's cores: on a shared machine the absolute
figures say little, the ratios and CPU per I/O a little more; state the load (printed).
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (targets, clients' parsers, cluster helpers)

ROOT = bench.ROOT
MiB = bench.MiB
IMAGE = 'bench'

# name, rw, pattern, bs, qd, count (I/Os per run at --scale 1), stride (bytes between starts)
ROWS = [
    {'name': 'randread-4k-qd32', 'rw': 'read', 'pattern': 'rand', 'bs': 4096, 'qd': 32,
     'count': 60000},
    {'name': 'randread-4k-qd1', 'rw': 'read', 'pattern': 'rand', 'bs': 4096, 'qd': 1,
     'count': 8000},
    {'name': 'randwrite-4k-qd32', 'rw': 'write', 'pattern': 'rand', 'bs': 4096, 'qd': 32,
     'count': 40000},
    {'name': 'randwrite-4k-qd1', 'rw': 'write', 'pattern': 'rand', 'bs': 4096, 'qd': 1,
     'count': 4000},
    {'name': 'seqread-1m-qd8', 'rw': 'read', 'pattern': 'seq', 'bs': MiB, 'qd': 8,
     'count': 4000},
    {'name': 'seqwrite-1m-qd8', 'rw': 'write', 'pattern': 'seq', 'bs': MiB, 'qd': 8,
     'count': 2000},
    {'name': 'stridewrite-4k-qd32', 'rw': 'write', 'pattern': 'stride', 'bs': 4096, 'qd': 32,
     'count': 40000, 'stride': 4096 * 257},
]


def log(msg):
    bench.log(msg)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pid_cpu(pid):
    try:
        return bench.proc_cpu_s(pid)
    except OSError:
        return None


def loadavg():
    with open('/proc/loadavg') as f:
        return ' '.join(f.read().split()[:3])


class Cluster:
    def __init__(self, image_mb):
        self.dir = tempfile.mkdtemp(prefix='ix-rbdbench.', dir='/dev/shm')
        self.conf = os.path.join(self.dir, 'ceph.conf')
        self.sh = os.path.join(ROOT, 'tests', 'ceph', 'cluster.sh')
        self.image_mb = image_mb
        # every librbd user (fio, rbd, tgtd; ix sets it itself) runs with the cache off, as ix
        # does: with librbd's default (rbd_cache true, policy writearound) a write completes
        # before the OSD has it, which a gateway that honours FUA cannot do
        self.conf_nocache = os.path.join(self.dir, 'ceph-nocache.conf')
        self.env = dict(os.environ, CEPH_CONF=self.conf_nocache)
        self.env_cache = dict(os.environ, CEPH_CONF=self.conf)

    def start(self):
        r = subprocess.run([self.sh, 'start', self.dir, '--store', 'bluestore'],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise SystemExit('Ceph cluster did not start (scripts/deps.sh --ceph installs it):\n'
                             + r.stderr[-2000:])
        with open(self.conf) as f:
            text = f.read()
        if '[client]' not in text:
            raise SystemExit('%s has no [client] section' % self.conf)
        with open(self.conf_nocache, 'w') as f:
            f.write(text.replace('[client]', '[client]\nrbd cache = false', 1))
        subprocess.run(['rbd', 'create', '--size', '%dM' % self.image_mb, 'rbd/' + IMAGE],
                       check=True, timeout=60, env=self.env)
        t0 = time.monotonic()
        subprocess.run(['rbd', 'bench', '--io-type', 'write', '--io-size', '4M',
                        '--io-threads', '8', '--io-pattern', 'seq', '--io-total',
                        '%dM' % self.image_mb, 'rbd/' + IMAGE], check=True, timeout=600,
                       env=self.env, stdout=subprocess.DEVNULL)
        log('ceph: cluster in %s, image rbd/%s of %d MiB written once in %.1f s' % (
            self.dir, IMAGE, self.image_mb, time.monotonic() - t0))

    def osd_pid(self):
        with open(os.path.join(self.dir, 'run', 'osd.0.pid')) as f:
            return int(f.read().strip())

    def stop(self):
        subprocess.run([self.sh, 'stop', self.dir], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


class IxRbd(bench.IxTarget):
    """ix-target with one LUN: the image (LUN 0), librbd's async API, no managed lock."""
    stop_timeout = 60

    def __init__(self, build, work, conf, poll_us):
        extra = {} if poll_us is None else {'poll_us': poll_us}
        super().__init__(build, work, ready_timeout=60, extra_global=extra)
        self.conf = conf
        self.luns = {'rbd': 0}

    def config(self):
        cfg = super().config()
        cfg['targets'][0]['luns'] = [{'lun': 0, 'backend': 'rbd', 'thin': True,
                                      'rbd': {'pool': 'rbd', 'image': IMAGE,
                                              'conf': self.conf}}]
        return cfg

    def ready(self, text):
        return 'ix-target: ready' in text and 'online' in text


# ----------------------------------------------------------------------------- the clients
#
# Each returns {'ops', 'bytes', 'secs'} and, for the direct librbd clients, 'proc_cpu': the
# CPU-seconds of its own process for those I/Os (the short run's subtracted).

def run(cmd, timeout, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                       env=env)
    text = p.stdout.decode(errors='replace')
    if p.returncode != 0:
        raise bench.ClientError('%s exited %d: %s' % (cmd[0], p.returncode, text[-600:]))
    return text


def fio_cmd(row, n, out, image_bytes, rate=None):
    rw = {('read', 'rand'): 'randread', ('write', 'rand'): 'randwrite',
          ('read', 'seq'): 'read', ('write', 'seq'): 'write'}.get((row['rw'], row['pattern']))
    if row['pattern'] == 'stride':
        rw = '%s:%d' % (row['rw'], row['stride'] - row['bs'])
    return ['fio', '--name=rbd', '--ioengine=rbd', '--clientname=admin', '--pool=rbd',
            '--rbdname=' + IMAGE, '--rw=' + rw, '--bs=%d' % row['bs'],
            '--iodepth=%d' % row['qd'], '--size=%d' % image_bytes,
            '--io_size=%d' % (n * row['bs']), '--norandommap', '--randrepeat=0',
            '--output-format=json', '--output=' + out] + \
        (['--rate_iops=%d' % rate] if rate else [])


def fio_once(row, n, cl, work, cache=False, rate=None):
    out = os.path.join(work, 'fio.json')
    c0 = children_cpu()
    run(fio_cmd(row, n, out, cl.image_mb * MiB, rate), 600,
        cl.env_cache if cache else cl.env)
    cpu = children_cpu() - c0
    with open(out) as f:
        j = json.load(f)['jobs'][0]
    d = j[row['rw']]
    return d['total_ios'], d['runtime'] / 1000.0, cpu


def client_fio(row, n, cl, work, osd, cache=False, rate=None):
    n0 = max(row['qd'] * 4, n // 10)
    ops0, _, cpu0 = fio_once(row, n0, cl, work, cache, rate)
    o0 = pid_cpu(osd)
    ops, secs, cpu = fio_once(row, n, cl, work, cache, rate)
    o1 = pid_cpu(osd)
    per = (cpu - cpu0) / (ops - ops0) if ops > ops0 else None
    return {'ops': ops, 'bytes': ops * row['bs'], 'secs': secs,
            'proc_cpu': per * ops if per is not None else None, 'osd_cpu': o1 - o0}


def rbd_bench_once(row, n, cl):
    if row['pattern'] == 'stride':
        return None
    text = run(['rbd', 'bench', '--io-type', row['rw'], '--io-size', str(row['bs']),
                '--io-threads', str(row['qd']), '--io-pattern', row['pattern'],
                '--io-total', str(n * row['bs']), 'rbd/' + IMAGE], 600, cl.env)
    for line in reversed(text.splitlines()):
        if line.startswith('elapsed:'):
            f = line.split()   # elapsed: S ops: N ops/sec: R bytes/sec: B
            return int(f[3]), float(f[5])
    raise bench.ClientError('rbd bench printed no summary: %s' % text[-300:])


def client_rbd_bench(row, n, cl, work, osd):
    if row['pattern'] == 'stride':
        return None
    n0 = max(row['qd'] * 4, n // 10)
    c0 = children_cpu()
    ops0, _ = rbd_bench_once(row, n0, cl)
    c1 = children_cpu()
    o0 = pid_cpu(osd)
    ops, rate = rbd_bench_once(row, n, cl)
    secs = ops / rate
    o1 = pid_cpu(osd)
    c2 = children_cpu()
    per = ((c2 - c1) - (c1 - c0)) / (ops - ops0) if ops > ops0 else None
    return {'ops': ops, 'bytes': ops * row['bs'], 'secs': secs,
            'proc_cpu': per * ops if per is not None else None, 'osd_cpu': o1 - o0}


def url(target):
    return target.url('rbd')


def client_iscsi_perf(row, n, target, secs):
    if row['rw'] != 'read' or row['pattern'] == 'stride':
        return None
    cmd = ['iscsi-perf', '-i', 'iqn.2026-11.io.ix:rbd-bench', '-m', str(row['qd']),
           '-b', str(row['bs'] // 512), '-t', str(secs)]
    if row['pattern'] == 'rand':
        cmd.append('-r')
    cmd.append(url(target))
    text = run(cmd, secs + 60)
    avg = re.findall(r'iops average (\d+)', text)
    if not avg:
        raise bench.ClientError('iscsi-perf printed no average: %s' % text[-300:])
    iops = float(avg[-1])
    return {'ops': iops * secs, 'bytes': iops * secs * row['bs'], 'secs': secs}


def client_qemu_img(row, n, target, secs):
    if row['pattern'] == 'rand':
        return None
    cmd = ['qemu-img', 'bench', '-f', 'raw', '-t', 'none', '-d', str(row['qd']),
           '-s', str(row['bs']), '-c', str(n)]
    if row['rw'] == 'write':
        cmd.append('-w')
    if row['pattern'] == 'stride':
        cmd += ['-S', str(row['stride'])]
    cmd.append(url(target))
    text = run(cmd, 600)
    m = re.search(r'Run completed in ([0-9.]+) seconds', text)
    if not m:
        raise bench.ClientError('qemu-img bench printed no time: %s' % text[-300:])
    return {'ops': n, 'bytes': n * row['bs'], 'secs': float(m.group(1))}


def client_ix_bench(row, n, target, secs, opts):
    if row['pattern'] == 'stride':
        return None
    rw = bench.IXB_RW[(row['rw'], row['pattern'])]
    cmd = [opts.ix_bench, '-p', '127.0.0.1:%d' % target.port, '-T', bench.IQN,
           '-l', str(target.luns['rbd']), '--rw', rw, '--bs', str(row['bs']),
           '--qd', str(row['qd']), '--size', str(n * row['bs']), '--time', '10m', '--json',
           '--quiet']
    j = bench.parse_ix_bench(run(cmd, 700))
    if j.get('result') != 'ok' or j.get('errors'):
        raise bench.ClientError('ix-bench: %s' % j.get('first_error'))
    d = j[row['rw']]
    return {'ops': d['ios'], 'bytes': d['bytes'], 'secs': j['seconds']}


# ----------------------------------------------------------------------------- the run

def iscsi_run(fn, row, n, target, osd, secs, opts):
    """One client run against a gateway: its result with the gateway's, the client's and the
    OSD's CPU over it."""
    g0, o0, k0 = target.cpu_s(), pid_cpu(osd), children_cpu()
    r = fn(row, n, target, secs, opts) if fn is client_ix_bench else fn(row, n, target, secs)
    if r is None:
        return None
    r['proc_cpu'] = target.cpu_s() - g0
    r['osd_cpu'] = pid_cpu(osd) - o0
    r['cli_cpu'] = children_cpu() - k0
    return r


ISCSI_CLIENTS = {'iscsi-perf': client_iscsi_perf, 'qemu-img': client_qemu_img,
                 'ix-bench': client_ix_bench}


def one_rep(rows, cl, targets, work, opts, rep):
    osd = cl.osd_pid()
    res = []
    for row in rows:
        n = max(row['qd'] * 8, int(row['count'] * opts.scale))
        out = {}
        try:
            out['fio-rbd'] = client_fio(row, n, cl, work, osd)
        except bench.ClientError as e:
            log('%s fio-rbd: %s' % (row['name'], e))
        secs = max(2, round(out['fio-rbd']['secs'])) if 'fio-rbd' in out else 5
        if row['rw'] == 'write' and opts.with_cache:
            try:
                out['fio-rbd+cache'] = client_fio(row, n, cl, work, osd, cache=True)
            except bench.ClientError as e:
                log('%s fio-rbd+cache: %s' % (row['name'], e))
        try:
            r = client_rbd_bench(row, n, cl, work, osd)
            if r:
                out['rbd-bench'] = r
        except bench.ClientError as e:
            log('%s rbd-bench: %s' % (row['name'], e))
        order = targets if rep % 2 == 0 else list(reversed(targets))
        for cname in opts.clients:
            for t in order:
                key = '%s/%s' % (t.name, cname)
                try:
                    r = iscsi_run(ISCSI_CLIENTS[cname], row, n, t, osd, secs, opts)
                except bench.ClientError as e:
                    log('%s %s: %s' % (row['name'], key, e))
                    continue
                if r:
                    out[key] = r
        ix = next((out['ix/' + c] for c in opts.clients if 'ix/' + c in out), None)
        if opts.at_rate and ix:
            # fio held to the rate the gateway reached: CPU per I/O falls as the rate rises
            # (librbd's and the messenger's threads batch more), so the two compare only at
            # one rate
            try:
                out['fio-rbd@ix'] = client_fio(row, n, cl, work, osd,
                                               rate=max(1, int(ix['ops'] / ix['secs'])))
            except bench.ClientError as e:
                log('%s fio-rbd@ix: %s' % (row['name'], e))
        for k, r in out.items():
            r['value'] = r['ops'] / r['secs'] if row['bs'] < MiB else \
                r['bytes'] / r['secs'] / MiB
            r['proc_us'] = 1e6 * r['proc_cpu'] / r['ops'] if r.get('proc_cpu') else None
            r['osd_us'] = 1e6 * r['osd_cpu'] / r['ops'] if r.get('osd_cpu') is not None \
                else None
            r['cli_us'] = 1e6 * r['cli_cpu'] / r['ops'] if r.get('cli_cpu') is not None \
                else None
        ref = out.get('fio-rbd', {}).get('value')
        for k, r in out.items():
            r['ratio'] = r['value'] / ref if ref else None
            r['cpu_ratio'] = (r['proc_us'] / out['fio-rbd']['proc_us']
                              if ref and r['proc_us'] and out['fio-rbd'].get('proc_us')
                              else None)
        log('rep %d %s (load %s): %s' % (rep + 1, row['name'], loadavg(), ', '.join(
            '%s %.0f' % (k, r['value']) for k, r in out.items())))
        res.append({'row': row['name'], 'n': n, 'load': loadavg(), 'runs': out})
    return res


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, d=0):
    return '-' if v is None else ('{:,.%df}' % d).format(v)


def report(reps, rows, f):
    print('| workload | peer/client | %s | / fio-rbd (spread) | proc us/IO | / fio-rbd | '
          'cli us/IO | osd us/IO |' % 'IOPS or MiB/s', file=f)
    print('|---|---|---|---|---|---|---|---|', file=f)
    for row in rows:
        per = [next(x for x in rep if x['row'] == row['name'])['runs'] for rep in reps]
        keys = []
        for p in per:
            keys += [k for k in p if k not in keys]
        for k in keys:
            rs = [p[k] for p in per if k in p]
            ratios = [r['ratio'] for r in rs if r['ratio'] is not None]
            unit = '' if row['bs'] < MiB else ' MiB/s'
            spread = ' (%.2f..%.2f)' % (min(ratios), max(ratios)) if len(ratios) > 1 else ''
            print('| %s | %s | %s%s | %s%s | %s | %s | %s | %s |' % (
                row['name'], k, fmt(med([r['value'] for r in rs])), unit,
                fmt(med(ratios), 2), spread, fmt(med([r['proc_us'] for r in rs]), 1),
                fmt(med([r['cpu_ratio'] for r in rs]), 2),
                fmt(med([r.get('cli_us') for r in rs]), 1),
                fmt(med([r['osd_us'] for r in rs]), 1)), file=f)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-release')
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--scale', type=float, default=1.0, help='multiplies every row\'s count')
    ap.add_argument('--rows', default='all', help='all, or names from: ' +
                    ','.join(r['name'] for r in ROWS))
    ap.add_argument('--peers', default='ix,tgt', help='gateways: ix, tgt (tgt-rbd)')
    ap.add_argument('--clients', default='iscsi-perf,qemu-img,ix-bench')
    ap.add_argument('--image-mb', type=int, default=1024)
    ap.add_argument('--ix-poll-us', type=int, default=None,
                    help='ix-target\'s poll_us (default: its own default)')
    ap.add_argument('--no-cache-row', dest='with_cache', action='store_false',
                    help='no fio-rbd+cache rows (fio with librbd\'s default cache, writes)')
    ap.add_argument('--at-rate', action='store_true',
                    help='also fio held to the rate the first ix client reached (fio-rbd@ix)')
    ap.add_argument('--json', help='write every run\'s figures there')
    opts = ap.parse_args()
    rows = ROWS if opts.rows == 'all' else [r for r in ROWS if r['name'] in
                                             opts.rows.split(',')]
    if not rows:
        ap.error('no such row')
    opts.clients = [c for c in opts.clients.split(',') if c]
    for c in opts.clients:
        if c not in ISCSI_CLIENTS:
            ap.error('unknown client %s' % c)
    peers = [p for p in opts.peers.split(',') if p]
    opts.ix_bench = os.path.join(ROOT, opts.build, 'tools', 'ix-bench')
    for tool in ['fio', 'rbd'] + opts.clients:
        if tool != 'ix-bench' and not shutil.which(tool):
            raise SystemExit('%s not installed (scripts/deps.sh)' % tool)
    if 'tgt' in peers and not os.path.exists('/usr/lib/tgt/backing-store/bs_rbd.so'):
        log('tgt-rbd not installed (Debian package tgt-rbd): no tgt rows')
        peers.remove('tgt')
    work = tempfile.mkdtemp(prefix='ix-rbdbench-work.', dir='/dev/shm')
    cl = Cluster(opts.image_mb)
    targets = []
    log('start, load %s' % loadavg())
    try:
        cl.start()
        if 'ix' in peers:
            targets.append(IxRbd(opts.build, work, cl.conf, opts.ix_poll_us))
        if 'tgt' in peers:
            t = bench.TgtTarget(work)
            t.rbd = (cl.conf_nocache, IMAGE)
            targets.append(t)
        for t in targets:
            t.start()
        reps = [one_rep(rows, cl, targets, work, opts, i) for i in range(opts.reps)]
    finally:
        for t in targets:
            t.stop()
        cl.stop()
        shutil.rmtree(work, ignore_errors=True)
    print('\nbench/rbd.py %s, %s UTC, load at the end %s, %d repetition(s), image %d MiB\n' % (
        ' '.join(sys.argv[1:]), time.strftime('%Y-%m-%d %H:%M', time.gmtime()), loadavg(),
        opts.reps, opts.image_mb))
    report(reps, rows, sys.stdout)
    print('\nproc: the process holding librbd (fio, rbd, ix-target, tgtd), all threads; '
          '"/ fio-rbd" of proc: its CPU per I/O over fio\'s.\nLoad average per row and rep: '
          + '; '.join('%s %s' % (x['row'], x['load']) for rep in reps for x in rep))
    if opts.json:
        with open(opts.json, 'w') as f:
            json.dump(reps, f, indent=1)


if __name__ == '__main__':
    main()
