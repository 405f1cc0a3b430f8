#!/usr/bin/env python3
"""Statistics and the Prometheus endpoint (global.metrics_listen), against the real daemon and
a real Prometheus server (docs/management.md, "Metrics").

  1. ix-target starts with the endpoint on a free loopback port; ix-bench moves a fixed number
     of bytes (a write run, then a read run, each --size bounded); ix-ctl stats --json counts
     exactly the bytes ix-bench reports, per (target, LUN, initiator);
  2. a Prometheus server (Debian package prometheus) started by the test on loopback, with a
     temporary configuration and storage directory and a 1 s scrape interval, scrapes the
     endpoint; queries through its HTTP API (/api/v1/query) show read and written bytes within
     1 % of what ix-bench moved, and the latency histogram's count equals the command count;
  3. promtool check metrics finds no problem in a scrape; a login to a missing target is counted
     as refused (not_found) under target ""; a running session shows in ix_target_sessions;
     a raw session's wrong header digest and wrong data digest count as two digest errors and
     one rejected PDU (the header case closes the connection); a session that ignores the
     target's NOP-In pings is dropped and counted as a connection timeout; a WRITE waiting for
     its data and aborted by ABORT TASK counts as an aborted task;
  4. bad HTTP input while a verified ix-bench runs on the target: garbage (400), a wrong method
     (405), a wrong path (404), an oversized head (431), a client that stalls (closed within
     the 5 s bound while another scrape is answered meanwhile), 40 connections at once; the
     bench ends with 0 errors, the daemon still answers and exits cleanly.
ix only (the endpoint is ix-target's own); the daemon and Prometheus are the test's own.
"""

import json
import struct
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixmgmt import BENCH, CTL, HOST  # noqa: E402

ixdaemon.skip_unless_ix('the metrics endpoint')

TGT = 'iqn.2026-11.io.ix.test:metrics'
INI = 'iqn.2026-11.io.ix.test:metrics-bench'
R = ixtest.Reporter('metrics')


def check(name, ok, detail):
    R('PASS' if ok else 'FAIL', name, detail)
    return ok


def http(port, data, timeout=10):
    """Send raw bytes, return everything answered until the server closes ('' if none)."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        s.sendall(data)
        out = b''
        while True:
            b = s.recv(65536)
            if not b:
                return out.decode(errors='replace')
            out += b
    except OSError as e:
        return out.decode(errors='replace') or 'error: %s' % e
    finally:
        s.close()


def scrape(port):
    with urllib.request.urlopen('http://%s:%d/metrics' % (HOST, port), timeout=10) as r:
        return r.status, r.headers.get('Content-Type', ''), r.read().decode()


def bench(port, rw, size, extra=()):
    cmd = [BENCH, '-p', '%s:%d' % (HOST, port), '-T', TGT, '-I', INI, '--rw', rw, '--bs', '4k',
           '-q', '16', '--size', size, '--time', '60s', '--json', '--quiet', '--seed', '7']
    p = subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError('ix-bench %s: exit %d: %s' % (rw, p.returncode, p.stderr[-300:]))
    return json.loads(p.stdout)


def lun_stats(sock):
    p = subprocess.run([CTL, '-s', sock, '--json', 'stats'], capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        raise RuntimeError('ix-ctl stats: %s' % p.stderr)
    res = json.loads(p.stdout)
    for lu in res.get('luns', []):
        if lu['target'] == TGT and lu['lun'] == 0 and lu['initiator'] == INI:
            return res, lu
    return res, None


class Prometheus:
    def __init__(self, tmp, metrics_port):
        self.port = ixtest.free_port()
        cfg = os.path.join(tmp, 'prometheus.yml')
        with open(cfg, 'w') as f:
            f.write('global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n'
                    'scrape_configs:\n  - job_name: ix\n    static_configs:\n'
                    '      - targets: ["%s:%d"]\n' % (HOST, metrics_port))
        self.log = open(os.path.join(os.environ.get('IX_OUT', tmp), 'metrics.prometheus.log'), 'w')
        self.p = subprocess.Popen(['prometheus', '--config.file=' + cfg,
                                   '--storage.tsdb.path=' + os.path.join(tmp, 'tsdb'),
                                   '--web.listen-address=%s:%d' % (HOST, self.port)],
                                  stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen('http://%s:%d/-/ready' % (HOST, self.port),
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.p.poll() is not None:
                raise RuntimeError('prometheus exited with %d' % self.p.returncode)
            time.sleep(0.3)
        raise RuntimeError('prometheus not ready after 60 s')

    def query(self, q):
        url = 'http://%s:%d/api/v1/query?%s' % (HOST, self.port, urllib.parse.urlencode({'query': q}))
        with urllib.request.urlopen(url, timeout=10) as r:
            res = json.loads(r.read().decode())
        if res.get('status') != 'success' or not res['data']['result']:
            return None
        return float(res['data']['result'][0]['value'][1])

    def wait_value(self, q, want, secs=30):
        """The query's value once it is within 1 % of want (or the last one seen)."""
        end, v = time.monotonic() + secs, None
        while time.monotonic() < end:
            v = self.query(q)
            if v is not None and abs(v - want) <= 0.01 * want:
                return v
            time.sleep(0.5)
        return v

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def step_counts(sock, port):
    w = bench(port, 'randwrite', '24m')
    r = bench(port, 'randread', '40m')
    wb, rb = w['write']['bytes'], r['read']['bytes']
    _, lu = lun_stats(sock)
    ok = lu is not None and lu['bytes']['written'] == wb and lu['bytes']['read'] == rb
    check('ctl-bytes', ok, 'ix-bench moved %d written, %d read; ix-ctl stats: %s' %
          (wb, rb, lu and lu['bytes']))
    ios = w['write']['ios'] + r['read']['ios']
    ok = lu is not None and lu['commands']['read'] + lu['commands']['write'] == ios \
        and lu['latency']['count'] == sum(lu['commands'].values())
    check('ctl-commands', ok, 'ix-bench %d I/Os; ix-ctl commands %s, latency count %s' %
          (ios, lu and lu['commands'], lu and lu['latency']['count']))
    return wb, rb, lu


def step_prometheus(tmp, mport, wb, rb, lu):
    if not shutil.which('prometheus'):
        R('FAIL', 'prometheus', 'prometheus is not installed (scripts/deps.sh installs it)')
        return
    prom = Prometheus(tmp, mport)
    try:
        sel = '{target="%s",lun="0",initiator="%s"}' % (TGT, INI)
        v = prom.wait_value('ix_lun_read_bytes_total' + sel, rb)
        check('prom-read-bytes', v is not None and abs(v - rb) <= 0.01 * rb,
              'Prometheus %s vs ix-bench %d' % (v, rb))
        v = prom.wait_value('ix_lun_written_bytes_total' + sel, wb)
        check('prom-written-bytes', v is not None and abs(v - wb) <= 0.01 * wb,
              'Prometheus %s vs ix-bench %d' % (v, wb))
        n = sum(lu['commands'].values())
        v = prom.wait_value('ix_lun_command_duration_seconds_count' + sel, n)
        inf = prom.query('ix_lun_command_duration_seconds_bucket{le="+Inf",target="%s"}' % TGT)
        check('prom-histogram', v == n and inf == n,
              'count %s, +Inf bucket %s, commands %d' % (v, inf, n))
        v = prom.query('up{job="ix"}')
        check('prom-up', v == 1, 'up{job="ix"} = %s' % v)
    finally:
        prom.stop()


def step_promtool(mport):
    if not shutil.which('promtool'):
        R('FAIL', 'promtool', 'promtool is not installed (package prometheus)')
        return
    status, ctype, body = scrape(mport)
    p = subprocess.run(['promtool', 'check', 'metrics'], input=body, capture_output=True,
                       text=True, timeout=60)
    check('promtool', status == 200 and p.returncode == 0 and not p.stdout.strip()
          and not p.stderr.strip() and 'version=0.0.4' in ctype,
          'HTTP %d, %s, %d bytes; promtool exit %d %s' %
          (status, ctype, len(body), p.returncode, (p.stdout + p.stderr).strip()[:300]))


def bad_http(mport):
    a = http(mport, b'\x16\x03\x01\x00garbage\r\n\r\n')
    check('http-garbage', a.startswith('HTTP/1.1 400'), repr(a[:40]))
    a = http(mport, b'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n')
    check('http-method', a.startswith('HTTP/1.1 405') and 'Allow: GET' in a, repr(a[:60]))
    a = http(mport, b'GET /other HTTP/1.1\r\nHost: x\r\n\r\n')
    check('http-path', a.startswith('HTTP/1.1 404'), repr(a[:40]))
    a = http(mport, b'GET /metrics HTTP/1.1\r\nX-Pad: ' + b'a' * 20000 + b'\r\n\r\n')
    check('http-oversized', a.startswith('HTTP/1.1 431') or a == '' or a.startswith('error'),
          repr(a[:50]))
    # a stalled client: closed within the bound, and others are served meanwhile
    s = socket.create_connection((HOST, mport), timeout=15)
    s.sendall(b'GET /metr')
    t0 = time.monotonic()
    status, _, _ = scrape(mport)
    try:
        closed = s.recv(100) == b''
    except OSError:
        closed = True
    took = time.monotonic() - t0
    s.close()
    check('http-stalled', closed and took < 8 and status == 200,
          'closed after %.1f s (bound 5 s), a scrape meanwhile: HTTP %d' % (took, status))
    many = []
    for _ in range(40):
        try:
            many.append(socket.create_connection((HOST, mport), timeout=5))
        except OSError:
            break
    for c in many:
        c.close()
    time.sleep(0.3)
    status, _, body = scrape(mport)
    check('http-many', status == 200 and 'ix_lun_read_bytes_total' in body,
          '%d connections opened and dropped, then HTTP %d' % (len(many), status))


def series(body, name, **labels):
    """The value of the series name{labels...} in an exposition, None if absent."""
    want = ['%s="%s"' % kv for kv in labels.items()]
    for line in body.splitlines():
        if line.startswith(name + '{') and all(w in line for w in want):
            return float(line.rsplit(' ', 1)[1])
    return None


def step_refused(sock, port, mport):
    p = subprocess.run([BENCH, '-p', '%s:%d' % (HOST, port), '-T', TGT + '-missing', '--time',
                        '1s', '--quiet', '--login-timeout', '3000'],
                       capture_output=True, text=True, timeout=60)
    res, _ = lun_stats(sock)
    none = [t for t in res.get('targets', []) if t['target'] == '']
    got = none[0]['logins_refused'].get('not_found') if none else None
    _, _, body = scrape(mport)
    v = series(body, 'ix_target_logins_refused_total', target='', reason='not_found')
    check('refused-not-found', p.returncode != 0 and got == 1 and v == 1,
          'ix-bench to a missing target: exit %d; iscsi_get_stats targets[""].logins_refused'
          '.not_found %s, metric %s' % (p.returncode, got, v))


def tgt_stats(sock):
    res, _ = lun_stats(sock)
    return next((t for t in res.get('targets', []) if t['target'] == TGT), {})


def step_poll(sock, port, mport):
    """libiscsi's iscsi-perf at queue depth 1 against the default poll window (global.poll_us
    unset): the worker answers waits by polling, most of them through the poller that reads the
    busy connection's socket itself (no epoll call first), and the metrics say so. A contended
    CPU may shut the window for a while (poll_backoffs): then try again, three times at most."""
    if not shutil.which('iscsi-perf'):
        check('poll-window', False, 'iscsi-perf (libiscsi-bin) is missing: scripts/deps.sh')
        return
    url = 'iscsi://%s:%d/%s/0' % (HOST, port, TGT)

    def workers():
        res, _ = lun_stats(sock)
        w = res.get('workers', [])
        return (sum(x['poll_hits'] for x in w), sum(x['poller_hits'] for x in w),
                sum(x['poll_backoffs'] for x in w))

    before = workers()
    for attempt in range(3):
        p = subprocess.run(['iscsi-perf', '-m', '1', '-t', '2', '-i', INI + '-perf', url],
                           capture_output=True, text=True, timeout=60)
        after = workers()
        if after[1] > before[1] or p.returncode != 0:
            break
    d = [a - b for a, b in zip(after, before)]
    check('poll-window', p.returncode == 0 and d[1] > 0 and d[0] >= d[1],
          'iscsi-perf QD1 exit %d, %d attempt(s): poll_hits +%d, poller_hits +%d, '
          'poll_backoffs +%d' % (p.returncode, attempt + 1, d[0], d[1], d[2]))
    _, _, body = scrape(mport)
    got = sum(float(ln.rsplit(' ', 1)[1]) for ln in body.splitlines()
              if ln.startswith('ix_worker_poller_hits_total{'))
    check('poll-metric', got >= after[1] > 0,
          'ix_worker_poller_hits_total %s, ix-ctl poller_hits %d' % (got, after[1]))


def digest_pdu(port, **bad):
    """A session with CRC32C digests sends one NOP-Out with a wrong digest; the answer."""
    s = X.Session(HOST, port, initiator=INI + '-raw', target=TGT, timeout=10)
    try:
        s.login(digests=('CRC32C', 'CRC32C'))
        s.conn.send_pdu(s.nop_bhs(), b'payload', **bad)
        try:
            return s.conn.recv_pdu(timeout=5).opcode
        except Exception as e:  # noqa: BLE001  (closed: the header digest case)
            return type(e).__name__
    finally:
        s.close()


def step_digests(sock, port, mport):
    before = tgt_stats(sock)
    a = digest_pdu(port, bad_hdig=True)
    b = digest_pdu(port, bad_ddig=True)
    time.sleep(0.5)
    after = tgt_stats(sock)
    dd = after.get('digest_errors', 0) - before.get('digest_errors', 0)
    dr = after.get('pdus_rejected', 0) - before.get('pdus_rejected', 0)
    _, _, body = scrape(mport)
    v = series(body, 'ix_target_digest_errors_total', target=TGT)
    check('digest-errors', dd == 2 and dr == 1 and v == after.get('digest_errors'),
          'a bad header digest (answer %s) and a bad data digest (answer 0x%s): digest_errors '
          '+%d, pdus_rejected +%d, metric %s' % (a, b if isinstance(b, str) else '%02x' % b,
                                                 dd, dr, v))


def step_nop_timeout(sock, port):
    before = tgt_stats(sock).get('connection_timeouts', 0)
    s = X.Session(HOST, port, initiator=INI + '-silent', target=TGT, timeout=10)
    t0 = time.monotonic()
    try:
        s.login()
        try:  # never answer the target's NOP-In pings: dropped after interval + timeout
            while time.monotonic() - t0 < 10:
                s.conn.recv_pdu(timeout=10)
            closed = False
        except Exception:  # noqa: BLE001
            closed = True
    finally:
        s.close()
    took = time.monotonic() - t0
    time.sleep(0.3)
    n = tgt_stats(sock).get('connection_timeouts', 0) - before
    check('connection-timeouts', closed and n == 1,
          'a session that ignores NOP-In (interval 1 s, timeout 1 s): closed %s after %.1f s, '
          'connection_timeouts +%d' % (closed, took, n))


def step_abort(sock, port):
    """A WRITE waiting for its data (R2T sent) is aborted with ABORT TASK."""
    before = tgt_stats(sock).get('tasks_aborted', 0)
    s = X.Session(HOST, port, initiator=INI + '-abort', target=TGT, timeout=10)
    try:
        s.login()
        wcmdsn = s.cmdsn
        b = s.scsi_bhs(X.write10(0, 16), 8192, write=True)
        witt = struct.unpack_from('>I', b.b, 16)[0]
        s.cmdsn = (s.cmdsn + 1) & 0xffffffff
        s.conn.send_pdu(b)
        r2t = s.recv(5)
        t = X.Bhs(X.OP_TMF_REQ, immediate=True, flags=0x80 | 1)  # ABORT TASK
        t.lun(s.lun).itt(s.next_itt()).u32(20, witt).u32(24, s.cmdsn).u32(28, s.expstatsn)
        t.u32(32, wcmdsn)
        s.conn.send_pdu(t)
        rsp = s.recv(5)
        while rsp.opcode != X.OP_TMF_RSP:
            rsp = s.recv(5)
        resp = rsp.u8(2)
    finally:
        s.close()
    time.sleep(0.3)
    n = tgt_stats(sock).get('tasks_aborted', 0) - before
    check('tasks-aborted', r2t.opcode == X.OP_R2T and resp == 0 and n == 1,
          'WRITE got %s, ABORT TASK answered %d, tasks_aborted +%d' % (r2t.describe(), resp, n))


def step_bad_input(port, mport):
    bg = subprocess.Popen([BENCH, '-p', '%s:%d' % (HOST, port), '-T', TGT, '-I', INI + '-bg',
                           '--rw', 'randrw', '--bs', '4k', '-q', '8', '--time', '12s',
                           '--verify', '--json', '--quiet'],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        _, _, body = scrape(mport)
        v = series(body, 'ix_target_sessions', target=TGT, transport='tcp')
        check('sessions-gauge', v == 1, 'ix_target_sessions{transport="tcp"} during a bench: %s'
              % v)
        bad_http(mport)
    finally:
        out, err = bg.communicate(timeout=90)
    try:
        res = json.loads(out)
        errs = res.get('errors', 0), res.get('miscompares', 0)
    except ValueError:
        res, errs = None, ('?', '?')
    check('bench-unaffected', bg.returncode == 0 and errs == (0, 0),
          'verified ix-bench during bad HTTP input: exit %d, errors/miscompares %s %s' %
          (bg.returncode, errs, err.strip()[-200:]))


def run():
    tmp = tempfile.mkdtemp(prefix='ix-metrics-')
    port, mport = ixtest.free_port(), ixtest.free_port()
    while mport == port:
        mport = ixtest.free_port()
    sock = os.path.join(tmp, 'ix.sock')
    cfg = {'global': {'metrics_listen': '%s:%d' % (HOST, mport), 'mgmt_socket': sock,
                      'nop_interval_ms': 1000, 'nop_timeout_ms': 1000},
           'portals': [{'name': 'p', 'address': HOST, 'port': port}],
           'targets': [{'name': TGT, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '64M'}]}]}
    with open(os.path.join(tmp, 'ix.json'), 'w') as f:
        json.dump(cfg, f)
    d = ixtest.Daemon(os.path.join(tmp, 'ix.json'), 'metrics.target.log')
    try:
        wb, rb, lu = step_counts(sock, port)
        step_promtool(mport)
        if lu:
            step_prometheus(tmp, mport, wb, rb, lu)
        step_refused(sock, port, mport)
        step_poll(sock, port, mport)
        step_digests(sock, port, mport)
        step_nop_timeout(sock, port)
        step_abort(sock, port)
        step_bad_input(port, mport)
        status, _, _ = scrape(mport)
        check('daemon-alive', d.p.poll() is None and status == 200, 'still serving')
    finally:
        rc = d.stop()
        check('daemon-exit', rc == 0, 'exit status %s' % rc)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if R.failed else 0


if __name__ == '__main__':
    R.main(run)
