#!/usr/bin/env python3
"""Instructions and system calls per I/O in ix-target.

  bench/insn.py [--build build-release] [--n 4000] [--workloads read4k-qd1,...,write512k]
                [--lun ram|file] [--client qemu-img|ix-bench] [--digests] [--poll-us 0]

For each workload, ix-target (one worker thread, RAM LUN or --lun file) serves N requests and then 2N from
qemu-img bench (a fixed request count: 4 KiB at a 1 MiB + 4 KiB stride, QD1 or QD32, or 512 KiB
sequential reads or writes at QD8); the difference of the two totals divided by N is the cost per I/O (login,
LUN set-up and shutdown cancel out). --client ix-bench runs the same sizes and queue depths
through ix-bench instead (random 4 KiB offsets, one session); only it can turn on --digests
(CRC32C header and data digests; libiscsi always offers DataDigest=None).
  instructions/IO  user-space instructions, ix-target under valgrind's callgrind. Counted, not
                   timed, so stable on a busy machine. At QD1 every request is its own wake-up
                   and the figure is exact; at QD32 a target slowed down 50x by valgrind sees
                   requests arrive in batches, so that figure is the batched best case.
  syscalls/IO      system calls of the native daemon (perf stat -e raw_syscalls:sys_enter -p);
                   this one depends on timing (batching) and so on the machine's load.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

WORKLOADS = {
    'read4k-qd1': {'bs': 4096, 'qd': 1, 'stride': 4096 * 257, 'write': False, 'scale': 2},
    'read4k': {'bs': 4096, 'qd': 32, 'stride': 4096 * 257, 'write': False, 'scale': 1},
    'write4k': {'bs': 4096, 'qd': 32, 'stride': 4096 * 257, 'write': True, 'scale': 1},
    'read512k': {'bs': 512 * 1024, 'qd': 8, 'stride': 0, 'write': False, 'scale': 8},
    'write512k': {'bs': 512 * 1024, 'qd': 8, 'stride': 0, 'write': True, 'scale': 8},
}


def client(target, wl, count, lun, opts):
    if opts.client == 'ix-bench':
        rw = ('rand' if wl['stride'] else '') + ('write' if wl['write'] else 'read')
        cmd = [os.path.join(bench.ROOT, opts.build, 'tools', 'ix-bench'),
               '-p', '127.0.0.1:%d' % target.port, '-T', bench.IQN, '-l', str(target.luns[lun]),
               '--rw', rw, '--bs', str(wl['bs']), '--qd', str(wl['qd']),
               '--size', str(count * wl['bs']), '--time', '30m', '--quiet']
        if opts.digests:
            cmd.append('--digests')
        subprocess.run(cmd, check=True, capture_output=True, timeout=1800)
        return
    cmd = ['qemu-img', 'bench', '-f', 'raw', '-t', 'none', '-d', str(wl['qd']),
           '-s', str(wl['bs']), '-c', str(count)]
    if wl['stride']:
        cmd += ['-S', str(wl['stride'])]
    if wl['write']:
        cmd.append('-w')
    cmd.append(target.url(lun))
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)


def measure(build, work, wl, count, tool, lun, opts):
    """Total instructions (callgrind) or system calls (perf stat on the running daemon) of an
    ix-target that logs in, serves count requests and shuts down."""
    out = os.path.join(work, 'out.%s.%d' % (tool, count))
    wrap = ['valgrind', '--tool=callgrind', '--callgrind-out-file=' + out] \
        if tool == 'callgrind' else []
    t = bench.IxTarget(build, work, 'ix-' + tool, 'prefer-none', threads=1, wrapper=wrap,
                       ready_timeout=120, extra_global={'poll_us': opts.poll_us})
    t.start()
    try:
        if tool == 'syscalls':
            perf = subprocess.Popen(['perf', 'stat', '-x,', '-o', out, '-e',
                                     'raw_syscalls:sys_enter', '-p', str(t.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
        client(t, wl, count, lun, opts)
        if tool == 'syscalls':
            perf.send_signal(signal.SIGINT)
            perf.wait(30)
    finally:
        t.stop()
    text = open(out).read()
    if tool == 'callgrind':
        m = re.search(r'^(?:summary|totals): (\d+)', text, re.M)
    else:
        m = re.search(r'^(\d+),,raw_syscalls:sys_enter', text, re.M)
    if not m:
        raise SystemExit('no count in %s output:\n%s' % (tool, text[-500:]))
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-release')
    ap.add_argument('--n', type=int, default=4000, help='requests in the short run (4 KiB)')
    ap.add_argument('--workloads', default='read4k-qd1,read4k,write4k,read512k,write512k')
    ap.add_argument('--lun', default='ram', choices=['ram', 'file'],
                    help='RAM backend, or the file backend on a file in /dev/shm')
    ap.add_argument('--client', default='qemu-img', choices=['qemu-img', 'ix-bench'],
                    help='the initiator (default qemu-img)')
    ap.add_argument('--digests', action='store_true',
                    help='CRC32C header and data digests (needs --client ix-bench)')
    ap.add_argument('--poll-us', type=int, default=0,
                    help='global.poll_us of the target (default 0: the poll window spins, and '
                    'callgrind would count the spinning, which depends on timing)')
    ap.add_argument('--no-syscalls', action='store_true',
                    help='skip the system call count (perf stat)')
    opts = ap.parse_args()
    if opts.digests and opts.client != 'ix-bench':
        ap.error('--digests needs --client ix-bench')
    tools = ['callgrind'] + ([] if opts.no_syscalls else ['syscalls'])
    for tool in ['valgrind'] + ([] if opts.no_syscalls else ['perf']):
        if not bench.shutil.which(tool):
            raise SystemExit('%s not installed (scripts/deps.sh installs it)' % tool)
    work = tempfile.mkdtemp(prefix='ix-insn.', dir='/dev/shm')
    rows = []
    try:
        for name in opts.workloads.split(','):
            wl = WORKLOADS[name]
            n = max(100, opts.n // wl['scale'])
            row = {'workload': name, 'n': n}
            for tool in tools:
                a = measure(opts.build, work, wl, n, tool, opts.lun, opts)
                b = measure(opts.build, work, wl, 2 * n, tool, opts.lun, opts)
                row[tool] = (b - a) / n
                bench.log('%s %s: %d -> %d, %.1f per I/O' % (name, tool, a, b, row[tool]))
            rows.append(row)
    finally:
        bench.shutil.rmtree(work, ignore_errors=True)
    print('%-10s %8s %16s %14s' % ('workload', 'N', 'instructions/IO', 'syscalls/IO'))
    for r in rows:
        print('%-10s %8d %16.0f %14s' % (r['workload'], r['n'], r['callgrind'],
                                         '%.2f' % r['syscalls'] if 'syscalls' in r else '-'))


if __name__ == '__main__':
    main()
