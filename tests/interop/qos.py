#!/usr/bin/env python3
"""QoS limits (docs/configuration.md, "QoS"; docs/management.md, iscsi_set_qos), measured with
libiscsi's iscsi-perf (reads, 4 KiB; 32 in flight, 128 for a limited session) against one ix-target with two workers:

  1. unlimited  LUN 1 alone: its rate B (twice: before and after step 2, the machine's noise);
  2. lun-limit  LUN 0 limited to N = 2000 read IOPS (burst 20 ms) and LUN 1 at the same time, two
                sessions: LUN 0 measures N within 5 %, LUN 1 keeps at least 80 % of the slower
                of its runs alone (the bound: the limited session and its client cost a few
                per cent of this 2-core machine's CPU, and other work on the machine moves a
                3 s run by ~10 %; a LUN held up by the limited one would drop to about N);
  3. shared     two initiators on LUN 0 at once (their sessions on different workers): together
                N within 5 % (the limit is the LUN's, not each worker's);
  4. runtime    LUN 0's limit changed to N/2 through `ix-ctl call iscsi_set_qos` while
                iscsi-perf runs: the rate (ix-ctl stats sampled every 0.2 s) is N within 5 %
                over the 2 s before the change, N/2 within 5 % from 1 s to 2.8 s after it
                (windows of 2 s: a sample's time is known to ~20 ms);
  5. initiator  an initiator whose ACL entry limits it to 1000 IOPS and one without a limit,
                at once on the unlimited LUN 1: the first 1000 within 5 %, the second above
                5000 (unlimited: iscsi-perf alone reaches far more here);
  6. write-bps  LUN 3 limited to 4 MiB a second of WRITE: qemu-img bench (QEMU's iscsi driver,
                64 KiB writes, 16 in flight, a count) measures it within 5 %;
                then iscsi_set_qos halves its limit: iscsi-perf 500 within 5 %; wrong calls
                of iscsi_set_qos are refused with their message and change nothing;
  7. abort      a raw session on LUN 2 (1 read IOPS): of three READs the second and third wait;
                a READ to LUN 1 meanwhile is answered at once; ABORT TASK of the third and
                LUN RESET of LUN 2 are answered at once (< 0.5 s), the aborted READs never;
                the session still works; then it closes while READs wait;
  8. counters   ix-ctl stats counts the delayed commands and their wait; the Prometheus
                endpoint has ix_lun_qos_delayed_commands_total and
                ix_lun_qos_wait_seconds_total.
iscsi-perf has no count bound (it loops over the LU until -t seconds): each run is 3 s (6 s
in step 4).
ix only.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

ixdaemon.skip_unless_ix('QoS limits')

HOST = '127.0.0.1'
TGT = 'iqn.2026-11.io.ix.test:qos'
INI = 'iqn.2026-11.io.ix.test:qos-'
N = 2000
WBPS, WBS = 4 << 20, 65536      # step 6: LUN 3's write_bps, qemu-img's request size
# A burst of 20 ms lets a limit make up for a scheduling hiccup of that length on this loaded
# 2-core machine (a worker or a client off the CPU while its queue ran dry loses that time
# otherwise); it adds at most 40 commands at the start, 0.7 % of a 3 s run at N.
BURST = 20
R = ixdaemon.Results('qos')
BUILD = os.environ.get('IX_BUILD', os.path.join(HERE, '..', '..', 'build'))
CTL = os.path.join(BUILD, 'tools', 'ix-ctl')
E = {}


def ctl(*args):
    p = subprocess.run([CTL, '-s', E['sock']] + list(args), capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout, p.stderr


def perf_start(who, lun, secs=3):
    """iscsi-perf: 32 reads in flight, 128 for a session with a limit (its commands queued
    ahead cover the client being off the CPU for up to 128 / rate seconds: a limit cannot
    give back time that its client let pass without asking)."""
    url = 'iscsi://%s:%d/%s/%d' % (HOST, E['port'], TGT, lun)
    qd = '32' if who in ('b', 'free') else '128'
    return subprocess.Popen(['iscsi-perf', '-i', INI + who, '-m', qd, '-b', '8', '-t',
                             str(secs), url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def perf_end(p):
    out, _ = p.communicate(timeout=60)
    avg = re.findall(r'iops average (\d+)', out)
    if p.returncode != 0 or not avg:
        raise RuntimeError('iscsi-perf exit %d: %s' % (p.returncode, out.replace('\r', '\n')
                                                       .strip()[-300:]))
    return int(avg[-1])


def perf(*runs):
    """Run iscsi-perf (who, lun) pairs at once; their average IOPS."""
    ps = [perf_start(who, lun) for who, lun in runs]
    return [perf_end(p) for p in ps]


def within(got, want, frac):
    return abs(got - want) <= want * frac


def lun_reads(lun):
    rc, out, err = ctl('--json', 'stats')
    if rc != 0:
        raise RuntimeError('ix-ctl stats: ' + err)
    return sum(x['commands']['read'] for x in json.loads(out)['luns']
               if x['target'] == TGT and x['lun'] == lun)


def set_qos(**kw):
    args = ['call', 'iscsi_set_qos', 'target=' + TGT]
    args += ['%s=%s' % (k, json.dumps(v) if isinstance(v, dict) else v) for k, v in kw.items()]
    return ctl(*args)


def step_limits():
    b1, = perf(('b', 1))
    a, b = perf(('a', 0), ('b', 1))
    b2, = perf(('b', 1))
    R.check('lun-limit', within(a, N, 0.05),
            'LUN 0 limited to %d read IOPS: iscsi-perf %d (with LUN 1 at %d)' % (N, a, b))
    R.check('unlimited', b >= 0.8 * min(b1, b2),
            'LUN 1 unlimited: %d IOPS beside the limited LUN, %d and %d alone (bound: 80 %% '
            'of %d)' % (b, b1, b2, min(b1, b2)))
    x, y = perf(('a', 0), ('a2', 0))
    R.check('shared', within(x + y, N, 0.05),
            'two initiators on LUN 0 (limit %d): %d + %d = %d IOPS' % (N, x, y, x + y))


def step_runtime():
    p = perf_start('a', 0, secs=6)
    samples = []
    t_change = None
    t0 = time.monotonic()
    while p.poll() is None:
        t1 = time.monotonic()
        n = lun_reads(0)
        samples.append(((t1 + time.monotonic()) / 2, n))
        if t_change is None and samples[-1][0] - t0 >= 2.8:
            rc, out, err = set_qos(lun=0, qos={'read_iops': N // 2, 'burst_ms': BURST})
            t_change = time.monotonic()
            if rc != 0:
                R.check('runtime', False, 'iscsi_set_qos: exit %d %s' % (rc, err.strip()))
                perf_end(p)
                return
        time.sleep(0.2)
    perf_end(p)

    def rate(t1, t2):
        pts = [s for s in samples if t1 <= s[0] <= t2]
        if len(pts) < 2:
            return None
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    before = rate(t_change - 2.0, t_change)
    after = rate(t_change + 1.0, t_change + 2.8)
    R.check('runtime', before is not None and after is not None and
            within(before, N, 0.05) and within(after, N / 2, 0.05),
            'LUN 0 at %s IOPS in the 2 s before the change to %d; %s IOPS from 1 s to '
            '2.8 s after it' %
            ('%.0f' % before if before else '?', N // 2, '%.0f' % after if after else '?'))


def step_initiator():
    lim, free = perf(('lim', 1), ('free', 1))
    R.check('initiator', within(lim, 1000, 0.05) and free > 5000,
            'initiator limited to 1000 IOPS by its ACL entry: %d; another, unlimited, on the '
            'same LUN at once: %d' % (lim, free))
    rc, out, err = set_qos(initiator=INI + 'lim', qos={'iops': 500, 'burst_ms': BURST})
    lim, = perf(('lim', 1)) if rc == 0 else (None,)
    R.check('initiator-runtime', rc == 0 and within(lim, 500, 0.05),
            'iscsi_set_qos initiator=...lim iops 500: exit %d %s; iscsi-perf %s IOPS' %
            (rc, err.strip(), lim))


def step_method_errors():
    """Wrong calls are refused with a message and change nothing."""
    bad = [({'lun': 0, 'qos': {'read_ops': 1}}, 'qos.read_ops: unknown key'),
           ({'lun': 0, 'qos': {'iops': -5}}, 'qos.iops'),
           ({'lun': 9, 'qos': {'iops': 5}}, 'no LUN 9'),
           ({'initiator': INI + 'nobody', 'qos': {'iops': 5}}, 'iscsi_create_acl first'),
           ({'lun': 0, 'initiator': INI + 'a', 'qos': {}}, 'not both'),
           ({'lun': 0}, 'params.qos: required')]
    out = []
    for kw, want in bad:
        if 'qos' in kw:
            rc, _, err = set_qos(**kw)
        else:   # (ix-ctl call checks required parameters itself: the daemon's answer)
            rc, _, err = ctl('rpc', 'iscsi_set_qos', json.dumps(dict(kw, target=TGT)))
        if rc == 0 or want not in err:
            out.append('%s: exit %d, %r' % (kw, rc, err.strip()[-160:]))
    rc, cfg, _ = ctl('--json', 'call', 'iscsi_get_config')
    kept = rc == 0 and json.loads(cfg)['targets'][0]['luns'][0].get('qos', {}) \
        .get('read_iops') == N // 2
    R.check('method-errors', not out and kept,
            '%d wrong calls refused with their message%s; LUN 0 still at %d' %
            (len(bad), ('; not: ' + ' | '.join(out)) if out else '', N // 2 if kept else -1))


def tmf(s, func, lun, rtt=0xffffffff, refcmdsn=0):
    b = X.Bhs(X.OP_TMF_REQ, immediate=True, flags=0x80 | func)
    b.lun(lun).itt(s.next_itt()).u32(20, rtt).u32(24, s.cmdsn).u32(28, s.expstatsn)
    b.u32(32, refcmdsn)
    itt = struct.unpack_from('>I', b.b, 16)[0]
    s.conn.send_pdu(b)
    return itt


def wait_for(s, itts, secs):
    """PDUs answering itts within secs: {itt: (pdu, seconds)}."""
    got, t0 = {}, time.monotonic()
    while time.monotonic() - t0 < secs and len(got) < len(itts):
        try:
            pdu = s.recv(timeout=max(0.05, secs - (time.monotonic() - t0)))
        except Exception:  # noqa: BLE001  (the timeout)
            break
        if pdu.itt in itts and pdu.opcode in (X.OP_SCSI_RSP, X.OP_TMF_RSP) or \
                (pdu.opcode == X.OP_DATA_IN and pdu.flags & 0x01 and pdu.itt in itts):
            got[pdu.itt] = (pdu, time.monotonic() - t0)
    return got


def step_abort():
    s = X.Session(HOST, E['port'], initiator=INI + 'raw', target=TGT, lun=2, timeout=10)
    s.login()
    try:
        s.scsi_retry_ua(X.read10(0, 1), read_len=512)  # the unit attention of a new nexus
        time.sleep(1.1)                                  # LUN 2's cell idle again
        itts, sns = [], []
        for i in range(3):
            b = s.scsi_bhs(X.read10(i, 1), 512, read=True)
            itts.append(struct.unpack_from('>I', b.b, 16)[0])
            sns.append(s.cmdsn)
            s.cmdsn = (s.cmdsn + 1) & 0xffffffff
            s.conn.send_pdu(b)
        first = wait_for(s, itts[:1], 0.5)
        s.lun = 1
        b = s.scsi_bhs(X.read10(0, 1), 512, read=True)
        other = struct.unpack_from('>I', b.b, 16)[0]
        s.cmdsn = (s.cmdsn + 1) & 0xffffffff
        s.conn.send_pdu(b)
        fast = wait_for(s, [other], 0.5)
        ab = tmf(s, 1, 2, rtt=itts[2], refcmdsn=sns[2])     # ABORT TASK
        ab_rsp = wait_for(s, [ab], 0.5)
        lr = tmf(s, 5, 2)                                    # LUN RESET
        lr_rsp = wait_for(s, [lr], 0.5)
        late = wait_for(s, itts[1:], 2.5)   # the second READ's time (1 s) has long passed
        R.check('unblocked', itts[0] in first and other in fast,
                'first READ to the 1-IOPS LUN answered: %s; READ to LUN 1 behind two waiting '
                'ones answered in %s' % (itts[0] in first, '%.3f s' % fast[other][1]
                                         if other in fast else 'not within 0.5 s'))
        ok = (ab in ab_rsp and ab_rsp[ab][0].u8(2) == 0 and lr in lr_rsp and
              lr_rsp[lr][0].u8(2) == 0 and not late)
        R.check('abort', ok, 'ABORT TASK of a waiting READ: %s; LUN RESET: %s; aborted READs '
                'answered afterwards: %d' % (
                    'response %d in %.3f s' % (ab_rsp[ab][0].u8(2), ab_rsp[ab][1])
                    if ab in ab_rsp else 'no answer within 0.5 s',
                    'response %d in %.3f s' % (lr_rsp[lr][0].u8(2), lr_rsp[lr][1])
                    if lr in lr_rsp else 'no answer within 0.5 s', len(late)))
        s.lun = 1
        st, _, _, _ = s.scsi_retry_ua(X.read10(0, 1), read_len=512)
        R.check('session-after-abort', st == 0, 'READ after the aborts: status %d' % st)
        # and the connection ends while READs wait (the daemon's sanitizers watch the frees)
        s.lun = 2
        for i in range(3):
            b = s.scsi_bhs(X.read10(i, 1), 512, read=True)
            s.cmdsn = (s.cmdsn + 1) & 0xffffffff
            s.conn.send_pdu(b)
        time.sleep(0.2)
    finally:
        s.close()


def qemu_bench(count):
    url = 'iscsi://%s:%d/%s-w/3' % (HOST, E['port'], TGT)
    t0 = time.monotonic()
    p = subprocess.run(['qemu-img', 'bench', '-f', 'raw', '-t', 'none', '-w', '-d', '16', '-s',
                        str(WBS), '-c', str(count), url], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        raise RuntimeError('qemu-img bench: %s' % p.stderr.strip()[-300:])
    return time.monotonic() - t0


def step_writes():
    """WRITEs under a byte rate, with a count-bounded client: the difference of a run of c
    writes and one of 2c is c writes' time (connecting, logging in and the burst cancel out)."""
    if not shutil.which('qemu-img'):
        R('FAIL', 'write-bps', 'qemu-img (qemu-utils) is missing: scripts/deps.sh')
        return
    c = 3 * WBPS // WBS // 2        # 1.5 s of the limit
    t1, t2 = qemu_bench(c), qemu_bench(2 * c)
    rate = c * WBS / (t2 - t1)
    R.check('write-bps', within(rate, WBPS, 0.05),
            'LUN 3 limited to %d bytes a second of WRITE: qemu-img bench %d and %d writes of '
            '%d bytes in %.2f s and %.2f s: %.0f bytes a second' % (WBPS, c, 2 * c, WBS, t1,
                                                                   t2, rate))


def step_counters(mport):
    rc, out, err = ctl('--json', 'stats')
    q = [x['qos'] for x in json.loads(out)['luns'] if x['target'] == TGT and x['lun'] == 0]
    delayed = sum(x['delayed'] for x in q)
    wait = sum(x['wait_us'] for x in q)
    body = urllib.request.urlopen('http://%s:%d/metrics' % (HOST, mport), timeout=10).read() \
        .decode()
    m = {}
    for name in ('ix_lun_qos_delayed_commands_total', 'ix_lun_qos_wait_seconds_total'):
        m[name] = sum(float(ln.rsplit(' ', 1)[1]) for ln in body.splitlines()
                      if ln.startswith(name + '{') and 'lun="0"' in ln)
    rc, text, _ = ctl('stats')
    line = [ln.strip() for ln in text.splitlines() if ln.strip().startswith('QoS: ')]
    R.check('counters', delayed > 0 and wait > 0 and line and
            m['ix_lun_qos_delayed_commands_total'] == delayed and
            abs(m['ix_lun_qos_wait_seconds_total'] - wait / 1e6) < 1 + wait / 1e6 * 0.01,
            'LUN 0: %d commands delayed, %.1f s waited (ix-ctl stats --json); ix-ctl stats: '
            '%s; metrics %s' % (delayed, wait / 1e6, line[:1], m))


def run():
    if not shutil.which('iscsi-perf'):
        R('FAIL', 'setup', 'iscsi-perf (libiscsi-bin) is missing: scripts/deps.sh')
        return 1
    tmp = tempfile.mkdtemp(prefix='ix-qos-')
    E['sock'] = os.path.join(tmp, 'ix.sock')
    mport = ixtest.free_port()
    acls = [{'initiator': INI + w} for w in ('a', 'a2', 'b', 'free', 'raw')]
    acls.append({'initiator': INI + 'lim', 'qos': {'iops': 1000, 'burst_ms': BURST}})
    cfg = {'global': {'threads': 2, 'mgmt_socket': E['sock'],
                      'metrics_listen': '%s:%d' % (HOST, mport)},
           'targets': [{'name': TGT, 'acls': acls, 'luns': [
               {'lun': 0, 'backend': 'ram', 'size': '64M',
                'qos': {'read_iops': N, 'burst_ms': BURST}},
               {'lun': 1, 'backend': 'ram', 'size': '64M'},
               {'lun': 2, 'backend': 'ram', 'size': '1M', 'qos': {'read_iops': 1}}]},
               {'name': TGT + '-w', 'luns': [   # no ACLs: qemu-img logs in as QEMU names it
                   {'lun': 3, 'backend': 'ram', 'size': '16M',
                    'qos': {'write_bps': WBPS, 'burst_ms': BURST}}]}]}
    d = ixdaemon.Daemon('qos', cfg)
    d.start()
    E['port'] = d.port
    try:
        step_limits()
        step_runtime()
        step_initiator()
        step_method_errors()
        step_abort()
        step_writes()
        step_counters(mport)
    finally:
        problems = d.stop()
        R.check('daemon-exit', not problems, '; '.join(problems) or 'clean stop')
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if R.failed else 0


if __name__ == '__main__':
    R.main(run)
