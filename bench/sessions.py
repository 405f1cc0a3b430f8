#!/usr/bin/env python3
"""Many sessions against ix-target (issue 28, "scale in sessions"): what a hypervisor cluster or
a VDI farm does to a gateway, hundreds to thousands of sessions, mostly idle, logged in all at
once after a failover or a boot storm. A benchmark, not a test: it prints numbers.

    bench/sessions.py [--build build-release] [--sessions 1000] [--idle-secs 10]
                      [--busy-secs 5] [--no-chap] [--max-pending N] [--peer ix|tgt]
                      [--once-busy K [--idle-release-ms MS]] [--json FILE]

One ix-target (RAM LUN of 256 MiB, one portal on loopback, global.max_connections above the
count) and, per storm (without CHAP, then with one-way CHAP on the target):
  1. the busy load alone: ix-bench, 2 sessions x QD16 4 KiB random reads for --busy-secs:
     IOPS and p99;
  2. the storm: bench/sess_storm (the public API only, one thread) starts N logins at once,
     each initiator named differently; logins per second to full feature phase, the time to
     the last, p50/p99 per login, how many failed and why;
  3. the target's RSS before and after (VmRSS of /proc/PID/status): bytes per idle session;
  4. the target's CPU over --idle-secs with every session logged in and idle (utime+stime);
  5. the same busy load with the N idle sessions logged in: IOPS and p99 against step 1.
With --once-busy K every session, once logged in, writes K x 4 KiB at once and waits for them
(a host's boot: the target allocates task slots, descriptors and buffers for them), then is
idle: the RSS per session right after that burst ("busy") and after
global.idle_release_ms (--idle-release-ms, 2000 by default here; 9/8 of it and a second more)
("quiet"), when the target has given back what the burst made it pool.
The client runs on the same 2 cores as the target, so the storm's rate is bounded by both;
every initiator connects from 127.0.0.1. ix-target holds connections beyond
global.max_pending_logins in the listen backlog (--max-pending changes the limit). --peer tgt
runs the same against tgtd (bench/bench.py's TgtTarget: its LUN 1, a 1 GiB file on tmpfs or
the temporary directory; CHAP through tgtadm's account). The storm client and ix-bench come
from --build either way. Results: docs/perf.md, "Many sessions".
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLK_TCK = os.sysconf('SC_CLK_TCK')
IQN = 'iqn.2026-11.io.ix.bench:sessions'


def log(msg):
    print('[%s] %s' % (time.strftime('%H:%M:%S'), msg), file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def proc_cpu_s(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def start_target(build, tmp, port, n, chap, max_pending, idle_release_ms=None):
    cfg = {
        'global': {'max_connections': n + 256, 'max_sessions': max(1024, n + 16)},
        'portals': [{'name': 'p', 'address': '127.0.0.1', 'port': port}],
        'targets': [{'name': IQN, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '256M'}]}],
    }
    if max_pending:
        cfg['global']['max_pending_logins'] = max_pending
    if idle_release_ms:
        cfg['global']['idle_release_ms'] = idle_release_ms
    if chap:
        cfg['targets'][0]['chap'] = {'user': 'storm', 'secret': 'storm-secret-16'}
        cfg['targets'][0]['chap_required'] = True
    path = os.path.join(tmp, 'ix.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    logf = open(os.path.join(tmp, 'ix-target.log'), 'w')
    p = subprocess.Popen([os.path.join(build, 'tools', 'ix-target'), '-c', path],
                         stdout=logf, stderr=subprocess.STDOUT)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(('127.0.0.1', port)) == 0:
                return p
        time.sleep(0.1)
    p.kill()
    raise RuntimeError('ix-target did not listen (%s)' % path)


class Peer:
    """The target under test: pid, port, iqn, lun, stop()."""


def start_peer(args, tmp, port, chap):
    if args.peer == 'ix':
        p = Peer()
        p.proc = start_target(args.target_build or args.build, tmp, port, args.sessions, chap, args.max_pending,
                              args.idle_release_ms if args.once_busy else None)
        p.pid, p.port, p.iqn, p.lun = p.proc.pid, port, IQN, 0
        p.log = os.path.join(tmp, 'ix-target.log')

        def stop():
            p.proc.send_signal(signal.SIGTERM)
            try:
                p.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.proc.kill()
        p.stop = stop
        return p
    sys.path.insert(0, HERE)
    import bench as B  # noqa: E402  (tgtd set-up of the side-by-side benchmark)
    t = B.TgtTarget(tmp)
    t.start()
    if chap:
        t.adm('--op', 'new', '--mode', 'account', '--user', 'storm', '--password',
              'storm-secret-16')
        t.adm('--op', 'bind', '--mode', 'account', '--tid', '1', '--user', 'storm')
    p = Peer()
    p.proc, p.pid, p.port, p.iqn, p.lun = t.proc, t.proc.pid, t.port, B.IQN, t.luns['ram']
    p.log = t.log
    p.stop = t.stop
    return p


def busy(build, peer, secs, chap):
    cmd = [os.path.join(build, 'tools', 'ix-bench'), '-p', '127.0.0.1:%d' % peer.port,
           '-T', peer.iqn, '-l', str(peer.lun),
           '--sessions', '2', '-q', '16', '--rw', 'randread', '--bs', '4k', '-t', '%ds' % secs,
           '--json', '--quiet', '-I', 'iqn.2026-11.io.ix.bench:busy']
    if chap:
        cmd += ['--chap-user', 'storm', '--chap-secret', 'storm-secret-16']
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 120)
    try:
        j = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError('ix-bench: %s' % (r.stderr.strip()[-500:] or r.stdout[-500:]))
    return {'iops': j['read']['iops'], 'p99_us': j['read']['lat_us']['p99'],
            'p50_us': j['read']['lat_us']['p50'], 'errors': j['errors']}


def storm(args, chap):
    tmp = tempfile.mkdtemp(prefix='ix-sessions-')
    port = free_port()
    t = start_peer(args, tmp, port, chap)
    res = {'chap': chap, 'sessions': args.sessions, 'peer': args.peer}
    try:
        time.sleep(0.5)
        res['busy_alone'] = busy(args.build, t, args.busy_secs, chap)
        rss0 = rss_kib(t.pid)
        cmd = [os.path.join(args.build, 'bench', 'sess_storm'), '-p', '127.0.0.1:%d' % t.port,
               '-T', t.iqn, '-n', str(args.sessions),
               '--idle', str(args.idle_secs + args.busy_secs + 10 +
                             ((args.idle_release_ms or 2000) * 9 // 8000 + 2
                              if args.once_busy else 0))]
        if args.once_busy:
            cmd += ['--burst', str(args.once_busy)]
        if chap:
            cmd += ['--chap-user', 'storm', '--chap-secret', 'storm-secret-16']
        s = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        res['storm'] = json.loads(s.stdout.readline())
        log('storm (chap %s): %s' % (chap, res['storm']))
        ok = res['storm']['ok']
        if args.once_busy:
            res['busy_done'] = json.loads(s.stdout.readline())
            log('burst: %s' % res['busy_done'])
            time.sleep(0.2)
            rb = rss_kib(t.pid)
            time.sleep((args.idle_release_ms or 2000) * 9 / 8000 + 1)
            rq = rss_kib(t.pid)
            res['once_busy_kib'] = {
                'busy': rb, 'quiet': rq,
                'busy_per_session': round((rb - rss0) / ok, 1) if ok else None,
                'quiet_per_session': round((rq - rss0) / ok, 1) if ok else None}
            log('once busy: %s' % res['once_busy_kib'])
        time.sleep(1)
        rss1 = rss_kib(t.pid)
        res['rss_kib'] = {'before': rss0, 'after': rss1,
                          'per_session': round((rss1 - rss0) / ok, 1) if ok else None}
        c0, w0 = proc_cpu_s(t.pid), time.monotonic()
        time.sleep(args.idle_secs)
        c1, w1 = proc_cpu_s(t.pid), time.monotonic()
        res['idle_cpu_percent'] = round((c1 - c0) / (w1 - w0) * 100, 2)
        res['busy_with_idle'] = busy(args.build, t, args.busy_secs, chap)
        for line in s.stdout:
            ev = json.loads(line)
            res[ev['event']] = ev
        s.wait(timeout=120)
    finally:
        t.stop()
    with open(t.log) as f:
        res['target_warnings'] = [x.strip()[:200] for x in f if ' warn ' in x][:5]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default=os.path.join(ROOT, 'build-release'))
    ap.add_argument('--sessions', type=int, default=1000)
    ap.add_argument('--idle-secs', type=int, default=10)
    ap.add_argument('--busy-secs', type=int, default=5)
    ap.add_argument('--no-chap', action='store_true', help='only the storm without CHAP')
    ap.add_argument('--max-pending', type=int, default=0,
                    help='global.max_pending_logins (default: the target\'s own)')
    ap.add_argument('--peer', default='ix', choices=['ix', 'tgt'],
                    help='the target: ix-target of --build, or tgtd')
    ap.add_argument('--once-busy', type=int, default=0, metavar='K',
                    help='each session writes K x 4 KiB at once after its login, then idles')
    ap.add_argument('--idle-release-ms', type=int, default=2000,
                    help='global.idle_release_ms with --once-busy (ix only; 0: not set, for '
                    'a build without it: the bench still waits as for 2000)')
    ap.add_argument('--target-build', help='ix-target from this build (default --build; '
                    'the clients always come from --build)')
    ap.add_argument('--json', help='write the results here too')
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.build, 'bench', 'sess_storm')):
        log('building %s' % args.build)
        if not os.path.exists(os.path.join(args.build, 'build.ninja')):
            subprocess.run(['meson', 'setup', args.build, '--buildtype=release'], check=True,
                           cwd=ROOT, stdout=subprocess.DEVNULL)
        subprocess.run(['ninja', '-C', args.build], check=True, stdout=subprocess.DEVNULL)
    results = [storm(args, False)]
    if not args.no_chap:
        results.append(storm(args, True))
    print('%-4s %-5s %9s %7s %8s %8s %8s %9s %9s %11s %11s %9s %9s' % (
        'peer', 'chap', 'sessions', 'ok', 'logins/s', 'last s', 'p99 ms', 'KiB/sess', 'idle CPU',
        'busy IOPS', 'w/ idle', 'p99 us', 'w/ idle'))
    for r in results:
        st = r['storm']
        print('%-4s %-5s %9d %7d %8.0f %8.2f %8.1f %9s %8.2f%% %11.0f %11.0f %9.0f %9.0f' % (
            r['peer'], 'yes' if r['chap'] else 'no', r['sessions'], st['ok'], st['logins_per_s'],
            st['seconds'], st['p99_ms'], r['rss_kib']['per_session'], r['idle_cpu_percent'],
            r['busy_alone']['iops'], r['busy_with_idle']['iops'], r['busy_alone']['p99_us'],
            r['busy_with_idle']['p99_us']))
        if 'once_busy_kib' in r:
            ob = r['once_busy_kib']
            print('      once busy (%d x 4 KiB writes a session, %s): %s KiB/sess right after, '
                  '%s KiB/sess after idle_release_ms %d' % (
                      args.once_busy, r['busy_done'], ob['busy_per_session'],
                      ob['quiet_per_session'], args.idle_release_ms))
        if st['failed']:
            print('      %d logins failed: %s; target: %s' % (st['failed'], st['first_error'],
                                                           r['target_warnings'][:2]))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=2)


if __name__ == '__main__':
    main()
