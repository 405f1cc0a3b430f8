#!/usr/bin/env python3
"""Latency benchmark (issue 19): queue depth 1 and one-thread clients, side by side.

Targets, all running at once, each with one 1 GiB LUN written once end to end:
  new    ix-target of --build (default build-release): RAM LUN
  old    ix-target of --old-build (an older commit, e.g. the tree before the adaptive poll
         window; bench/latency.sh builds it): RAM LUN
  tgt    tgtd, rdwr on a file in /dev/shm (as bench/bench.py)
  istgt  istgt 0.4 (Debian package istgt), a file in /dev/shm (istgt has no RAM store)

Workloads (the same client binary for every target: the NEW build's ix-bench, with its
default poll window unless --client-poll-us N is given, and libiscsi's iscsi-perf):
  ixb-qd1-randread-4k .. ixb-qd1-randwrite-64k   ix-bench, one session, QD1 (IOPS, p50, p99)
  iscsi-perf-4k-qd32                             iscsi-perf -r -m 32 -b 8 (one libiscsi thread)
  ixb-2x16-randread-4k, ixb-2x16-randwrite-4k    ix-bench, 2 sessions x QD16 (regression rows)

Each repetition runs every workload against every target, the targets' order reversed in every
other repetition; a row is the median over --reps runs per target, with the spread (slowest
and fastest run). Ratios: new/old and new/best peer (the better of tgt and istgt) of the
medians, and the range of the per-repetition ratios new/old (the two runs of one repetition
are back to back, so this shows how much of a difference is noise).

Idle CPU: each target's CPU (sum over its threads of /proc/PID/task/TID/schedstat) over
--idle-secs with no initiator, then with one logged-in idle session (a raw session of
tests/lib/ixiscsi.py in a thread of this script, answering the target's NOP-Ins), as % of one
core, and the target's context switches per second (its wake-ups).

--rt runs every target and client under `chrt -f 10` (SCHED_FIFO), so other load on a shared
machine does not preempt them; the report says whether it was used and the load average seen.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (targets, run_one, prefill, med; also puts tests/lib on sys.path)
from bench import IQN, GiB, log, med, fmt  # noqa: E402
import ixtest  # noqa: E402
import ixiscsi  # noqa: E402

RT_PREFIX = ['chrt', '-f', '10']

# ----------------------------------------------------------------------------- istgt


class IstgtTarget(bench.Target):
    """istgt 0.4 in the foreground (-D) with one LUN on a file in the work dir (/dev/shm)."""
    kind = 'istgt'
    name = 'istgt'

    def __init__(self, work, wrapper=()):
        self.work = work
        self.wrapper = list(wrapper)
        self.luns = {'ram': 0}

    def config(self, img, port, ctl_port):
        node, tname = IQN.split(':', 1)
        return '\n'.join([
            '# written by bench/latency.py',
            '[Global]',
            '  NodeBase "%s"' % node,
            '  PidFile %s' % os.path.join(self.work, 'istgt.pid'),
            '  AuthFile %s' % os.path.join(self.work, 'istgt-auth.conf'),
            '  MediaDirectory %s' % self.work,
            '  LogFacility "local7"',
            '  Timeout 30',
            '  NopInInterval 20',
            '  DiscoveryAuthMethod None',
            '  MaxSessions 16',
            '  MaxConnections 4',
            '  MaxR2T 32',
            '  MaxOutstandingR2T 16',
            '  DefaultTime2Wait 2',
            '  DefaultTime2Retain 60',
            '  FirstBurstLength 262144',
            '  MaxBurstLength 1048576',
            '  MaxRecvDataSegmentLength 262144',
            '  InitialR2T Yes',
            '  ImmediateData Yes',
            '  DataPDUInOrder Yes',
            '  DataSequenceInOrder Yes',
            '  ErrorRecoveryLevel 0',
            '[UnitControl]',
            '  AuthMethod None',
            '  Portal UC1 127.0.0.1:%d' % ctl_port,
            '  Netmask 127.0.0.1',
            '[PortalGroup1]',
            '  Portal DA1 127.0.0.1:%d' % port,
            '[InitiatorGroup1]',
            '  InitiatorName "ALL"',
            '  Netmask 127.0.0.1/32',
            '[LogicalUnit1]',
            '  TargetName %s' % tname,
            '  Mapping PortalGroup1 InitiatorGroup1',
            '  AuthMethod None',
            '  UseDigest Auto',
            '  UnitType Disk',
            # istgt queues nothing without this (one command at a time); 2 x QD16 rows need 32
            '  QueueDepth 64',
            '  LUN0 Storage %s %dMB' % (img, bench.LUN_SIZE // bench.MiB),
            '',
        ])

    def start(self):
        if not shutil.which('istgt'):
            raise SystemExit('istgt not installed (scripts/deps.sh installs it)')
        img = os.path.join(self.work, 'istgt.img')
        with open(img, 'wb') as f:
            f.truncate(bench.LUN_SIZE)
        with open(os.path.join(self.work, 'istgt-auth.conf'), 'w') as f:
            f.write('# no CHAP\n')
        for attempt in range(5):
            self.port = ixtest.free_port()
            ctl_port = ixtest.free_port()
            path = os.path.join(self.work, 'istgt.conf')
            with open(path, 'w') as f:
                f.write(self.config(img, self.port, ctl_port))
            self.log = os.path.join(self.work, 'istgt.log')
            lf = open(self.log, 'w')
            self.proc = subprocess.Popen(self.wrapper + ['istgt', '-c', path, '-D'],
                                         stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
            lf.close()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.proc.poll() is None:
                if ixtest.wait_port('127.0.0.1', self.port, 0.3) == 0:
                    log('istgt pid %d on port %d' % (self.proc.pid, self.port))
                    return
            text = open(self.log, errors='replace').read()
            self.stop()
            if 'in use' not in text:
                raise SystemExit('istgt did not start:\n' + text[-2000:])
        raise SystemExit('istgt: no free port after 5 tries')

    def stop(self):
        if not self.alive():
            return
        self.proc.terminate()      # SIGTERM to istgt itself (chrt execs it: same PID)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class RtTgtTarget(bench.TgtTarget):
    """tgtd, every thread moved to SCHED_FIFO after start (threads made later inherit it)."""

    def __init__(self, work, rt):
        super().__init__(work)
        self.rt = rt

    def start(self):
        super().start()
        if self.rt:
            subprocess.run(['chrt', '-f', '-a', '-p', '10', str(self.proc.pid)], check=True,
                           stdout=subprocess.DEVNULL)


def task_policies(pid):
    """{policy name: thread count} of a process's threads."""
    names = {os.SCHED_OTHER: 'other', os.SCHED_FIFO: 'fifo', os.SCHED_RR: 'rr',
             getattr(os, 'SCHED_BATCH', 3): 'batch', getattr(os, 'SCHED_IDLE', 5): 'idle'}
    out = {}
    for d in glob.glob('/proc/%d/task/*' % pid):
        try:
            p = os.sched_getscheduler(int(os.path.basename(d)))
        except OSError:
            continue
        n = names.get(p, str(p))
        out[n] = out.get(n, 0) + 1
    return out


def sched_cpu_ns(pid):
    """CPU time of every live thread of pid in ns (schedstat: exact, not in clock ticks),
    and their context switches (voluntary + involuntary)."""
    ns = ctx = 0
    for d in glob.glob('/proc/%d/task/*' % pid):
        try:
            with open(d + '/schedstat') as f:
                ns += int(f.read().split()[0])
            with open(d + '/status') as f:
                for line in f:
                    if 'ctxt_switches:' in line:
                        ctx += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return ns, ctx


# ----------------------------------------------------------------------------- clients

def client_ixb(target, lun, wl, secs, opts):
    """The new build's ix-bench (same binary for every target), --poll-us when asked."""
    cmd = bench.ix_bench_cmd(opts.ix_bench, target, lun, wl, secs, opts)
    if opts.client_poll_us is not None:
        cmd += ['--poll-us', str(opts.client_poll_us)]
    cmd = opts.rt_prefix + cmd
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=secs + 60)
    wall = time.monotonic() - t0
    j = bench.parse_ix_bench(p.stdout.decode(errors='replace'))
    if p.returncode != 0 or j.get('result') != 'ok' or j.get('errors'):
        raise bench.ClientError('ix-bench exited %d (%s): %s' % (
            p.returncode, j.get('first_error'), p.stderr.decode(errors='replace')[-500:]))
    d = j[wl['rw']]
    return {'ops': d['ios'], 'bytes': d['bytes'], 'secs': j['seconds'], 'wall': wall,
            'lat_us': {k: d['lat_us'][k] for k in ('avg', 'p50', 'p99', 'p99.9')
                       if k in d['lat_us']},
            'client_own_cpu_pct': j.get('cpu', {}).get('percent')}


def client_iperf(target, lun, wl, secs, opts):
    """libiscsi's iscsi-perf, one process (one thread, one session)."""
    cmd = opts.rt_prefix + ['iscsi-perf', '-i', 'iqn.2026-11.io.ix:lat-client', '-m',
                            str(wl['qd']), '-b', str(wl['bs'] // 512), '-t', str(secs), '-r',
                            target.url(lun)]
    outs, wall = bench.run_procs([cmd], secs + 30)
    avg = [float(x) for x in re.findall(r'iops average (\d+)', outs[0])]
    if not avg:
        raise bench.ClientError('iscsi-perf printed no average: %s' % outs[0][-300:])
    return {'ops': avg[-1] * secs, 'bytes': avg[-1] * secs * wl['bs'], 'secs': secs,
            'wall': wall}


bench.CLIENTS['lat-ixb'] = client_ixb
bench.CLIENTS['lat-iscsi-perf'] = client_iperf


def ixb(name, rw, bs, qd, sessions):
    return {'name': name, 'client': 'lat-ixb', 'rw': rw, 'pattern': 'rand', 'bs': bs,
            'qd': qd * sessions, 'sessions': sessions, 'unit': 'IOPS'}


WORKLOADS = [
    ixb('ixb-qd1-randread-4k', 'read', 4096, 1, 1),
    ixb('ixb-qd1-randwrite-4k', 'write', 4096, 1, 1),
    ixb('ixb-qd1-randread-64k', 'read', 65536, 1, 1),
    ixb('ixb-qd1-randwrite-64k', 'write', 65536, 1, 1),
    {'name': 'iscsi-perf-4k-qd32', 'client': 'lat-iscsi-perf', 'rw': 'read', 'pattern': 'rand',
     'bs': 4096, 'qd': 32, 'unit': 'IOPS'},
    ixb('ixb-2x16-randread-4k', 'read', 4096, 16, 2),
    ixb('ixb-2x16-randwrite-4k', 'write', 4096, 16, 2),
]


def workload_cmd(wl, secs, opts):
    rt = ' '.join(opts.rt_prefix) + ' ' if opts.rt_prefix else ''
    if wl['client'] == 'lat-iscsi-perf':
        return rt + 'iscsi-perf -i IQN -m %d -b %d -t %d -r URL' % (wl['qd'], wl['bs'] // 512,
                                                                   secs)
    t = bench.Target()
    t.port, t.luns = 0, {'ram': 0}
    cmd = bench.ix_bench_cmd('ix-bench(new)', t, 'ram', wl, secs, opts)
    if opts.client_poll_us is not None:
        cmd += ['--poll-us', str(opts.client_poll_us)]
    return rt + ' '.join(cmd).replace('127.0.0.1:0', 'HOST:PORT').replace('-l 0', '-l LUN')


# ----------------------------------------------------------------------------- idle CPU

class IdleSession(threading.Thread):
    """One logged-in session that sends nothing but answers the target's NOP-Ins."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self.target = target
        self.stop_ev = threading.Event()
        self.nops = 0
        self.error = None
        self.s = ixiscsi.Session('127.0.0.1', target.port, target=IQN,
                                 initiator='iqn.2026-11.io.ix:lat-idle')
        self.s.login()

    def run(self):
        try:
            while not self.stop_ev.is_set():
                try:
                    p = self.s.recv(timeout=1)
                except ixiscsi.Timeout:
                    continue
                if p.opcode == ixiscsi.OP_NOP_IN and p.ttt != ixiscsi.ALL_ONES:
                    self.s.answer_target_nop(p)
                    self.nops += 1
        except Exception as e:   # a closed connection is a result to report, not a crash
            self.error = '%s: %s' % (type(e).__name__, e)

    def finish(self):
        self.stop_ev.set()
        self.join(5)
        try:
            if self.error is None:
                self.s.logout()
        except Exception:
            pass
        self.s.close()


def idle_cpu(target, secs):
    def sample():
        ns0, c0 = sched_cpu_ns(target.proc.pid)
        t0 = time.monotonic()
        time.sleep(secs)
        ns1, c1 = sched_cpu_ns(target.proc.pid)
        wall = time.monotonic() - t0
        return {'cpu_pct': 100 * (ns1 - ns0) / 1e9 / wall, 'ctx_per_s': (c1 - c0) / wall,
                'secs': wall}
    out = {'none': sample()}
    sess = IdleSession(target)
    sess.start()
    try:
        time.sleep(0.5)   # the login's own work is not idle time
        out['session'] = sample()
    finally:
        sess.finish()
    out['session']['nop_ins_answered'] = sess.nops
    out['session']['error'] = sess.error
    log('  idle %-6s no session %.3f %% (%.1f ctx/s), one idle session %.3f %% (%.1f ctx/s)%s'
        % (target.name, out['none']['cpu_pct'], out['none']['ctx_per_s'],
           out['session']['cpu_pct'], out['session']['ctx_per_s'],
           '' if sess.error is None else ' ERROR ' + sess.error))
    return out


# ----------------------------------------------------------------------------- report

def spread(runs):
    return (min(runs), max(runs)) if runs else (None, None)


def summarise(wl, res, names):
    row = {'workload': wl['name'], 'unit': wl['unit']}
    for n in names:
        runs = res[n]
        row[n] = {
            'value': med(r['value'] for r in runs),
            'min': min(r['value'] for r in runs) if runs else None,
            'max': max(r['value'] for r in runs) if runs else None,
            'p50_us': med((r.get('lat_us') or {}).get('p50') for r in runs),
            'p99_us': med((r.get('lat_us') or {}).get('p99') for r in runs),
            'cpu_s_per_gib': med(r['cpu_per_gib'] for r in runs),
            'target_cpu_pct': med(r['target_cpu_pct'] for r in runs),
            'client_cpu_pct': med(r['client_cpu_pct'] for r in runs),
            'runs': [round(r['value'], 1) for r in runs],
            'p50_runs': [(r.get('lat_us') or {}).get('p50') for r in runs],
            'p99_runs': [(r.get('lat_us') or {}).get('p99') for r in runs],
        }
    def ratio(a, b):
        va = row.get(a, {}).get('value')
        vb = row.get(b, {}).get('value')
        return va / vb if va and vb else None
    row['new/old'] = ratio('new', 'old')
    if 'new' in names and 'old' in names:
        pr = [a['value'] / b['value'] for a, b in zip(res['new'], res['old']) if b['value']]
        row['new/old_paired'] = [round(x, 3) for x in pr]
    peers = [n for n in ('tgt', 'istgt') if n in names and row[n]['value']]
    if peers and 'new' in names:
        best = max(peers, key=lambda n: row[n]['value'])
        row['best_peer'] = best
        row['new/best_peer'] = ratio('new', best)
    return row


def cell(r):
    if not r or r['value'] is None:
        return '-'
    return '%s (%s-%s)' % (fmt(r['value']), fmt(r['min']), fmt(r['max']))


def print_report(doc, names, f):
    o = doc['options']
    print('\nLatency benchmark (issue 19), %s, %d repetitions of %d s, --rt %s, '
          'load average (1 min) %.1f-%.1f (%.1f at the start)' % (
              doc['date'], o['reps'], o['secs'], 'ON (chrt -f 10: targets and clients '
              'SCHED_FIFO)' if o['rt'] else 'off', doc['loadavg_1min_seen'][0],
              doc['loadavg_1min_seen'][1], doc['loadavg_at_start'][0]), file=f)
    for n in names:
        t = doc['targets'][n]
        print('  %-6s %s  threads (policy: count) at start %s, at end %s' % (
            n, t['what'], t.get('policies'), t.get('policies_at_end')), file=f)
    for name, cmd in doc['commands'].items():
        print('  %-22s %s' % (name, cmd), file=f)
    rows = doc['rows']
    print('\nIOPS, median (slowest-fastest run):\n', file=f)
    hdr = ['workload'] + names + ['new/old', 'new/old per rep', 'new/best peer']
    print('| ' + ' | '.join(hdr) + ' |', file=f)
    print('|' + '---|' * len(hdr), file=f)
    for r in rows:
        pr = r.get('new/old_paired')
        cells = [r['workload']] + [cell(r.get(n)) for n in names] + [
            fmt(r.get('new/old'), 2),
            '%s-%s' % (fmt(min(pr), 2), fmt(max(pr), 2)) if pr else '-',
            '%s (%s)' % (fmt(r.get('new/best_peer'), 2), r.get('best_peer', '-'))]
        print('| ' + ' | '.join(cells) + ' |', file=f)
    print('\nix-bench latency p50 / p99 in us (medians), target CPU-s per GiB, target CPU % '
          '/ client CPU % of one core:\n', file=f)
    hdr = ['workload'] + ['%s p50/p99' % n for n in names] + ['%s s/GiB' % n for n in names] + \
        ['%s tgt%%/cli%%' % n for n in names]
    print('| ' + ' | '.join(hdr) + ' |', file=f)
    print('|' + '---|' * len(hdr), file=f)
    for r in rows:
        cells = [r['workload']]
        for n in names:
            x = r.get(n) or {}
            cells.append('%s / %s' % (fmt(x.get('p50_us'), 1), fmt(x.get('p99_us'), 1))
                         if x.get('p50_us') is not None else '-')
        for n in names:
            cells.append(fmt((r.get(n) or {}).get('cpu_s_per_gib'), 2))
        for n in names:
            x = r.get(n) or {}
            cells.append('%s / %s' % (fmt(x.get('target_cpu_pct')), fmt(x.get('client_cpu_pct'))))
        print('| ' + ' | '.join(cells) + ' |', file=f)
    if doc.get('idle'):
        print('\nIdle target CPU, %% of one core over %d s (context switches per second):\n'
              % o['idle_secs'], file=f)
        print('| target | no initiator | one idle session |', file=f)
        print('|---|---|---|', file=f)
        for n in names:
            x = doc['idle'].get(n)
            if not x:
                continue
            s = x['session']
            print('| %s | %.3f %% (%.1f/s) | %.3f %% (%.1f/s)%s |' % (
                n, x['none']['cpu_pct'], x['none']['ctx_per_s'], s['cpu_pct'], s['ctx_per_s'],
                '' if not s.get('error') else ' session lost: ' + s['error']), file=f)


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-release', help='the "new" ix build')
    ap.add_argument('--old-build', help='the "old" ix build (an older commit); without it no '
                    '"old" target')
    ap.add_argument('--old-label', default='', help='what the old build is (e.g. its commit)')
    ap.add_argument('--also-build', action='append', default=[], metavar='NAME=DIR',
                    help='one more ix-target build to run side by side (repeatable; e.g. an '
                    'experiment); shown after old, no ratios')
    ap.add_argument('--also-poll-us', type=int, action='append', default=[], metavar='N',
                    help='one more target: the new build with global.poll_us N (named newN; '
                    'repeatable; 0 = the new build without the poll window)')
    ap.add_argument('--targets', default='new,old,tgt,istgt',
                    help='subset of new,old,tgt,istgt (default all; old needs --old-build)')
    ap.add_argument('--workloads', default='all',
                    help='comma list of workload names or "all"; "none": idle CPU only')
    ap.add_argument('--reps', type=int, default=3, help='repetitions (default 3)')
    ap.add_argument('--time', type=int, default=5, help='seconds per run (default 5)')
    ap.add_argument('--idle-secs', type=int, default=10,
                    help='seconds of each idle CPU sample (default 10; 0 skips them)')
    ap.add_argument('--rt', action='store_true',
                    help='run targets and clients under chrt -f 10 (SCHED_FIFO)')
    ap.add_argument('--poll-us', type=int, default=50,
                    help='global.poll_us of the "new" target (default 50; the daemon\'s own '
                    'default is 0, off)')
    ap.add_argument('--client-poll-us', type=int, default=50,
                    help='pass --poll-us N to ix-bench (default 50; the library\'s own default '
                    'is 0, off)')
    ap.add_argument('--ix-bench', help='client binary (default: BUILD/tools/ix-bench, the new '
                    'build\'s, for every target)')
    ap.add_argument('--quick', action='store_true', help='1 repetition of 2 s, idle 2 s')
    ap.add_argument('--json', metavar='FILE', help='write all runs and medians as JSON')
    ap.add_argument('--workdir', help='where the LUN files go (default: a dir in /dev/shm)')
    opts = ap.parse_args()
    if opts.quick:
        opts.reps, opts.time, opts.idle_secs = 1, 2, 2
    opts.counts = {}
    opts.clients = 1
    opts.ixb_sessions = 1
    opts.rt_prefix = RT_PREFIX if opts.rt else []
    opts.ix_bench = opts.ix_bench or os.path.join(bench.ROOT, opts.build, 'tools', 'ix-bench')
    names = [n for n in opts.targets.split(',') if n]
    for n in names:
        if n not in ('new', 'old', 'tgt', 'istgt'):
            ap.error('unknown target %r' % n)
    extra = {}
    for x in opts.also_build:
        n, _, d = x.partition('=')
        if not n or not d or n in ('new', 'old', 'tgt', 'istgt') or n in extra:
            ap.error('--also-build wants NAME=DIR with a new NAME: %r' % x)
        extra[n] = d
    for us in opts.also_poll_us:
        if us < 0 or 'new%d' % us in extra:
            ap.error('--also-poll-us: bad or repeated value %d' % us)
        extra['new%d' % us] = us
    at = names.index('old') + 1 if 'old' in names else (1 if 'new' in names else 0)
    names[at:at] = list(extra)
    if 'old' in names and not opts.old_build:
        names.remove('old')
        log('no --old-build: no "old" target')
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
    for tool in ['iscsi-perf', 'qemu-img'] + (['chrt'] if opts.rt else []):
        if not shutil.which(tool):
            raise SystemExit('%s not installed (scripts/deps.sh installs it)' % tool)
    if not os.access(opts.ix_bench, os.X_OK):
        raise SystemExit('ix-bench not built at %s' % opts.ix_bench)

    work = opts.workdir or tempfile.mkdtemp(prefix='ix-lat.', dir='/dev/shm')
    os.makedirs(work, exist_ok=True)
    targets = {}
    what = {}
    if 'new' in names:
        targets['new'] = bench.IxTarget(opts.build, work, name='new', wrapper=opts.rt_prefix,
                                        extra_global={'poll_us': opts.poll_us})
        what['new'] = 'ix-target %s with global.poll_us %d (RAM LUN)' % (
            os.path.join(opts.build, 'tools/ix-target'), opts.poll_us)
    if 'old' in names:
        targets['old'] = bench.IxTarget(os.path.abspath(opts.old_build), work, name='old',
                                        wrapper=opts.rt_prefix)
        what['old'] = 'ix-target %s%s (RAM LUN)' % (
            os.path.join(opts.old_build, 'tools/ix-target'),
            ' at ' + opts.old_label if opts.old_label else '')
    for n, d in extra.items():
        if isinstance(d, int):
            targets[n] = bench.IxTarget(opts.build, work, name=n, wrapper=opts.rt_prefix,
                                        extra_global={'poll_us': d})
            what[n] = 'ix-target %s with global.poll_us %d (RAM LUN)' % (
                os.path.join(opts.build, 'tools/ix-target'), d)
            continue
        targets[n] = bench.IxTarget(os.path.abspath(d), work, name=n, wrapper=opts.rt_prefix)
        what[n] = 'ix-target %s (RAM LUN)' % os.path.join(d, 'tools/ix-target')
    if 'tgt' in names:
        targets['tgt'] = RtTgtTarget(work, opts.rt)
        what['tgt'] = 'tgtd (rdwr, file in /dev/shm)'
    if 'istgt' in names:
        targets['istgt'] = IstgtTarget(work, wrapper=opts.rt_prefix)
        what['istgt'] = 'istgt (file in /dev/shm, QueueDepth 64)'
    started = time.strftime('%Y-%m-%d %H:%M:%S %z')
    load_start = os.getloadavg()
    load_seen = [load_start[0]]
    results = {w['name']: {n: [] for n in names} for w in wls}
    idle = {}
    tinfo = {}
    try:
        for n in names:
            targets[n].start()
            tinfo[n] = {'what': what[n], 'pid': targets[n].proc.pid,
                        'policies': task_policies(targets[n].proc.pid)}
            log('%s threads: %s' % (n, tinfo[n]['policies']))
        if opts.idle_secs > 0:
            time.sleep(1)
            for n in names:
                idle[n] = idle_cpu(targets[n], opts.idle_secs)
        if wls:
            for n in names:
                log('prefill %s' % n)
                bench.prefill(targets[n], 'ram', opts)
        for rep in range(opts.reps):
            order = names if rep % 2 == 0 else names[::-1]
            log('repetition %d/%d, order %s (load average %.1f)' % (
                rep + 1, opts.reps, ','.join(order), os.getloadavg()[0]))
            for wl in wls:
                for n in order:
                    r = bench.run_one(targets[n], 'ram', wl, opts.time, opts)
                    r['qd'] = wl['qd']
                    results[wl['name']][n].append(r)
                    lat = r.get('lat_us') or {}
                    log('  %-22s %-6s %10.1f IOPS  p50 %6s p99 %6s us  target %.2f s/GiB '
                        '%3.0f%%  client %3.0f%%' % (
                            wl['name'], n, r['value'], fmt(lat.get('p50'), 1),
                            fmt(lat.get('p99'), 1), r['cpu_per_gib'] or 0,
                            r['target_cpu_pct'], r['client_cpu_pct']))
                    load_seen.append(os.getloadavg()[0])
        for n in names:   # a FIFO wrapper must have reached every thread, also the late ones
            tinfo[n]['policies_at_end'] = task_policies(targets[n].proc.pid)
    finally:
        for t in targets.values():
            t.stop()
        if not opts.workdir:
            shutil.rmtree(work, ignore_errors=True)

    rows = [summarise(w, results[w['name']], names) for w in wls]
    doc = {
        'date': started,
        'host': {'cpus': os.cpu_count(), 'kernel': os.uname().release},
        'loadavg_at_start': load_start,
        'loadavg_1min_seen': [min(load_seen), max(load_seen)],
        'loadavg_at_end': os.getloadavg(),
        'options': {'reps': opts.reps, 'secs': opts.time, 'rt': opts.rt,
                    'idle_secs': opts.idle_secs, 'client_poll_us': opts.client_poll_us,
                    'build': opts.build, 'old_build': opts.old_build,
                    'old_label': opts.old_label, 'ix_bench': opts.ix_bench},
        'targets': tinfo,
        'commands': {w['name']: workload_cmd(w, opts.time, opts) for w in wls},
        'rows': rows,
        'idle': idle,
        'all_runs': {w: {n: [{k: v for k, v in r.items()} for r in rs] for n, rs in d.items()}
                     for w, d in results.items()},
    }
    print_report(doc, names, sys.stdout)
    if opts.json:
        with open(opts.json, 'w') as f:
            json.dump(doc, f, indent=2)
            f.write('\n')


if __name__ == '__main__':
    main()
