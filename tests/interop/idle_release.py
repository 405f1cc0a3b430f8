#!/usr/bin/env python3
"""Once busy, then idle (issue 28): global.idle_release_ms gives a quiet session's pooled
memory back. A LUN of the error backend delays every I/O by DELAY_MS, so that a client's
commands are all in the target together. What the target holds is read from iscsi_get_stats
(`workers`: task_slots, pdu_descriptors, buffer_bytes, trims; summed over the workers), and its
RSS is reported.

1. libiscsi's iscsi-perf, N processes (one session each) at queue depth 32 (512-byte reads):
   once all are busy (their whole queue depth in the target: 32 task slots a session; a sum
   past two chunks a session could leave one session at its first chunk, with nothing to give
   back and so no trim of its own), they are stopped
   (SIGSTOP: the sessions stay logged in and send nothing; the target does not ping,
   nop_interval_ms 0); within 10 quiet periods every session is back to one chunk of task
   slots (8) and of descriptors (16) and no data buffer, one trim a session at least; then
   they continue (SIGCONT), the sessions grow again and run on, and iscsi-perf ends cleanly
   (SIGINT) with no error.
2. ix-bench --verify, N sessions x QD 32 of 4 KiB random writes (each block checkable),
   bounded by size: stopped once busy, given back as above, continued: it completes, re-reads
   every block it wrote through the same sessions, and finds no error and no miscompare.

That nothing goes before a whole quiet period after a session's last command, and that a slot
in use never goes, are checked by the unit test (test_tgt_conn, idle_release_ms), where the
times are known. ix only (idle_release_ms and the stats are ix-target's): exits 77 against
other peers.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
from ixmgmt import BENCH, Ctl, bench_result  # noqa: E402

ixdaemon.skip_unless_ix('global.idle_release_ms and iscsi_get_stats')
if not shutil.which('iscsi-perf'):
    print('SKIP: iscsi-perf (libiscsi-bin) is missing: scripts/deps.sh', file=sys.stderr)
    sys.exit(77)
if not os.path.exists(BENCH):
    print('SKIP: %s not built' % BENCH, file=sys.stderr)
    sys.exit(77)

N = int(os.environ.get('IX_IDLE_SESSIONS', '4'))
QUIET_MS = 1000
DELAY_MS = 20
IQN = 'iqn.2026-11.io.ix.test:idle-release'
R = ixdaemon.Results('idle_release')
tmp = tempfile.mkdtemp(prefix='ixtest.idle_release.')
sock = os.path.join(tmp, 'mgmt.sock')
ctl = Ctl(lambda: sock)
SIZE_MB = 64

D = ixdaemon.Daemon('idle_release', {
    'global': {'threads': 2, 'idle_release_ms': QUIET_MS, 'nop_interval_ms': 0,
               'mgmt_socket': sock},
    'targets': [{'name': IQN, 'luns': [
        {'lun': 0, 'backend': 'error', 'size': '%dM' % SIZE_MB, 'errors': [
            {'op': 'any', 'error': 'none', 'delay_ms': DELAY_MS, 'lba': 0,
             'blocks': SIZE_MB << 11}]}]}],
}, testing=True)


def held():
    """(task_slots, pdu_descriptors, buffer_bytes, trims) summed over the workers."""
    w = ctl.json('stats').get('workers', [])
    return tuple(sum(x.get(k, 0) for x in w)
                 for k in ('task_slots', 'pdu_descriptors', 'buffer_bytes', 'trims'))


def wait_held(pred, periods, procs=()):
    """Poll the stats until pred(held) or `periods` quiet periods have passed (or one of
    procs ended): (held, seconds waited)."""
    t0 = time.monotonic()
    while True:
        h = held()
        if pred(h) or time.monotonic() > t0 + periods * QUIET_MS / 1000 or \
                any(p.poll() is not None for p in procs):
            return h, time.monotonic() - t0
        time.sleep(QUIET_MS / 20000)


def idle_state(h):
    return h[0] == 8 * N and h[1] == 16 * N and h[2] == 0


def per(kb):
    return '%.1f KiB a session' % ((kb - rss0) / N)


def round_trip(name, procs, trims0):
    """Busy -> stopped -> given back -> continued: checks name-busy, name-given-back."""
    busy, _ = wait_held(lambda h: h[0] >= 32 * N, 20, procs)
    rss_busy = D.rss_kb()
    R.check(name + '-busy', busy[0] >= 32 * N,
            '%d sessions: %d task slots, %d descriptors, %d buffer bytes; RSS %d KiB (%s)' %
            (N, busy[0], busy[1], busy[2], rss_busy, per(rss_busy)))
    for p in procs:
        p.send_signal(signal.SIGSTOP)
    after, waited = wait_held(lambda h: idle_state(h) and h[3] >= trims0 + N, 10)
    rss_after = D.rss_kb()
    R.check(name + '-given-back', idle_state(after) and after[3] >= trims0 + N,
            '%.2f s after the clients stopped (quiet period %.1f s): %d task slots, %d '
            'descriptors, %d buffer bytes, %d trims (want %d, %d, 0, >= %d); RSS %d KiB (%s; '
            'busy %s)' % (waited, QUIET_MS / 1000, after[0], after[1], after[2],
                          after[3] - trims0, 8 * N, 16 * N, N, rss_after, per(rss_after),
                          per(rss_busy)))
    for p in procs:
        p.send_signal(signal.SIGCONT)
    return after[3]


procs = []
try:
    D.start()
    rss0 = D.rss_kb()
    url = 'iscsi://127.0.0.1:%d/%s/0' % (D.port, IQN)

    # 1. iscsi-perf
    procs = [subprocess.Popen(['iscsi-perf', '-m', '32', '-b', '1', '-i',
                               'iqn.2026-11.io.ix.test:idle-perf-%d' % i, url],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(N)]
    trims = round_trip('perf', procs, held()[3])
    again, _ = wait_held(lambda h: h[0] > 16 * N, 20, procs)
    outs = []
    for p in procs:
        time.sleep(0.1)
        p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            outs.append((p.wait(timeout=60), p.stdout.read()))
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append((p.wait(), p.stdout.read()))
    bad = [o for o in outs if o[0] not in (0, -signal.SIGINT) or
           'error' in o[1].lower() or 'fail' in o[1].lower()]
    R.check('perf-continued', again[0] > 16 * N and not bad,
            'after SIGCONT: %d task slots; iscsi-perf exits %s%s' %
            (again[0], [o[0] for o in outs],
             '; ' + bad[0][1].strip().replace('\n', ' | ')[-300:] if bad else ''))
    procs = []
    wait_held(idle_state, 10)

    # 2. ix-bench --verify
    trims = held()[3]
    bench = subprocess.Popen([BENCH, '-p', '127.0.0.1:%d' % D.port, '-T', IQN, '--verify',
                              '--rw', 'randwrite', '--sessions', str(N), '--qd', '32',
                              '--bs', '4k', '--size', '%dm' % (SIZE_MB // 2), '--time', '10m',
                              '--json', '--quiet'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = [bench]
    round_trip('bench', procs, trims)
    ok, detail = bench_result(bench, timeout=600)
    R.check('bench-verified', ok, detail)
    procs = []
except Exception:
    traceback.print_exc()
    R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1][:200])
for p in procs:
    p.send_signal(signal.SIGCONT)
    p.kill()
    p.wait()
shutil.rmtree(tmp, ignore_errors=True)
ixdaemon.finish(R, D)
