#!/usr/bin/env python3
"""Host part of the RDMA tier's mpath test (tests/rdma/tests/mpath.sh): a single-node memstore
Ceph cluster (tests/ceph/cluster.sh), one RBD image with the managed exclusive lock, and two
ix-target gateways exporting it as one LU (same naa_id and serial, one target name):

  gateway a: 127.0.0.1:PORT1, tpgt 1, ALUA group 1 (the guest reaches it as IXR_PORTAL1)
  gateway b: 127.0.0.1:PORT2, tpgt 2, ALUA group 2 (IXR_PORTAL2)

a starts first and takes the lock (owner: group 1 active/optimized, group 2 standby), then b
(standby). tests/rdma/run.sh starts this before the guest boots and sends SIGTERM once the guest
has powered off. Environment: IX_SHARE (the 9p share), IX_TEST, IX_BUILD, IX_RDMA_PORTS
("PORT1 PORT2"), IX_RESULTS (check lines, counted with the guest's), IX_HOST_LIFETIME (seconds
after which it stops by itself, should run.sh be gone without a SIGTERM).

Files in the share:
  NAME.host.ready    written once both gateways run: "IQN NAA" on one line
  NAME.host.failed   written instead when the set-up failed: the reason
  NAME.host.skip     written instead when Ceph or ix-target is missing: the reason (the guest
                     part then skips as a whole)
  NAME.req.N         a request from the guest (N = 1, 2, ...; written to NAME.req.N.tmp and
                     renamed), one line: "kill a", "stop a", "cont a", "restart a", "state",
                     "rbd-resize SIZE" (Ceph's `rbd resize`), "api-resize b SIZE"
                     (iscsi_resize_lun through that gateway)
  NAME.rsp.N         the answer: "OK detail" or "FAIL reason", written the same way
  NAME.host.times    what was done when, in seconds since the host part started (monotonic)
The watcher polls every 50 ms, so the guest's marker and the host's action are at most that
far apart plus the 9p round trip. Logs: NAME.host.log, NAME.ix-target-a.log, NAME.ix-target-b.log
(every start of a gateway appends to its log).

Host-side checks (reported in IX_RESULTS as NAME.host-*): the cluster and both gateways start;
at the end every gateway still running exits 0 on SIGTERM, no gateway log has a sanitizer
report, and the cluster stops.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixtest  # noqa: E402

SHARE = os.environ.get('IX_SHARE', os.path.join(ROOT, 'tests', 'out', 'rdma', 'share'))
NAME = os.environ.get('IX_TEST', 'mpath')
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
CLUSTER_SH = os.path.join(ROOT, 'tests', 'ceph', 'cluster.sh')
IQN = 'iqn.2026-11.io.ix.rdma:mpath'
NAA = '0x6001405a6d706174'
IMAGE = 'mpath'
IMAGE_SIZE = '256M'
# seconds: the host part ends by itself after this (run.sh passes its bound on the guest + 60 s)
LIFETIME = int(os.environ.get('IX_HOST_LIFETIME', '2400'))
T0 = time.monotonic()
report = ixtest.Reporter(NAME)
STOP = False


def log(msg):
    print('[host %7.2f] %s' % (time.monotonic() - T0, msg), flush=True)


def put(path, text):
    """Write a share file atomically (the guest polls for it)."""
    with open(path + '.tmp', 'w') as f:
        f.write(text + '\n')
    os.rename(path + '.tmp', path)


def times(event):
    with open(os.path.join(SHARE, NAME + '.host.times'), 'a') as f:
        f.write('%.3f %s\n' % (time.monotonic() - T0, event))


def rpc(sock, method, params, timeout=30):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(sock)
    s.sendall(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': method,
                          'params': params}).encode() + b'\n')
    buf = b''
    while not buf.endswith(b'\n'):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return json.loads(buf)


class Gateway:
    """One ix-target on 127.0.0.1:port, tpgt and ALUA group `group`, the other gateway's group
    listed by its relative port. Default implicit_failover_ms (the documented default)."""

    def __init__(self, tmp, conf, name, group, port):
        self.name, self.group, self.port, self.conf = name, group, port, conf
        self.sock = os.path.join(tmp, name + '.sock')
        self.log_path = os.path.join(SHARE, '%s.ix-target-%s.log' % (NAME, name))
        other = 3 - group
        cfg = {'global': {'mgmt_socket': self.sock, 'log_level': 'info'},
               'portals': [{'name': 'p', 'address': '127.0.0.1', 'port': port, 'tpgt': group}],
               'targets': [{'name': IQN, 'luns': [
                   {'lun': 0, 'backend': 'rbd', 'thin': True, 'naa_id': NAA, 'serial': 'ixmpath',
                    'rbd': {'pool': 'rbd', 'image': IMAGE, 'conf': conf,
                            'exclusive_lock': True}}],
                   'alua': {'transition_time': 10, 'groups': [
                       {'id': group, 'state': 'standby', 'portals': ['p']},
                       {'id': other, 'state': 'standby', 'relative_ports': [other]}]}}]}
        self.cfg = os.path.join(tmp, name + '.json')
        with open(self.cfg, 'w') as f:
            json.dump(cfg, f)
        self.p = None
        self.stopped = False  # SIGSTOPped by us

    def start(self):
        logf = open(self.log_path, 'a')
        logf.write('==== start at %.2f s\n' % (time.monotonic() - T0))
        logf.flush()
        start = os.path.getsize(self.log_path)
        self.p = subprocess.Popen([os.path.join(BUILD, 'tools', 'ix-target'), '-c', self.cfg],
                                  stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            with open(self.log_path, errors='replace') as f:
                f.seek(start)
                if 'ix-target: ready' in f.read():
                    return self.lock_state()
            if self.p.poll() is not None:
                raise RuntimeError('gateway %s exited with %d before it was ready'
                                   % (self.name, self.p.returncode))
            time.sleep(0.1)
        raise RuntimeError('gateway %s not ready after 60 s' % self.name)

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def lock_state(self, secs=30):
        """The LU's lock state once it is not 'acquiring' (or the last seen after secs)."""
        end = time.monotonic() + secs
        st = None
        while self.alive() and not self.stopped:
            try:
                r = rpc(self.sock, 'iscsi_break_rbd_lock',
                        {'target': IQN, 'lun': 0, 'dry_run': True}, timeout=5)
                st = r.get('result', {}).get('state')
            except OSError as e:
                st = 'no answer (%s)' % e
            if st not in (None, 'acquiring') or time.monotonic() > end:
                break
            time.sleep(0.2)
        if not self.alive():
            return 'not running'
        if self.stopped:
            return 'stopped'
        return st

    def signal(self, sig):
        self.p.send_signal(sig)
        self.stopped = sig == signal.SIGSTOP

    def stop(self):
        """SIGCONT + SIGTERM; returns the exit status or None if SIGKILL was needed."""
        if not self.alive():
            return self.p.returncode if self.p else 0
        self.p.send_signal(signal.SIGCONT)
        self.stopped = False
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


def act(gws, line):
    """One request from the guest: returns 'OK detail' or 'FAIL reason'."""
    words = line.split()
    if not words:
        return 'FAIL empty request'
    verb, who = words[0], words[1] if len(words) > 1 else ''
    if verb == 'state':
        return 'OK ' + ' '.join('%s=%s' % (n, g.lock_state(5)) for n, g in sorted(gws.items()))
    if verb == 'rbd-resize':
        r = subprocess.run(['rbd', 'resize', '--size', who, 'rbd/' + IMAGE], timeout=60,
                           capture_output=True, text=True,
                           env=dict(os.environ, CEPH_CONF=gws['a'].conf))
        times('rbd resize --size %s: exit %d' % (who, r.returncode))
        return ('OK rbd resize --size %s' % who if r.returncode == 0 else
                'FAIL rbd resize: ' + r.stderr.strip()[-200:])
    g = gws.get(who)
    if g is None:
        return 'FAIL unknown gateway %r' % who
    if verb == 'api-resize' and len(words) == 3:
        ans = rpc(g.sock, 'iscsi_resize_lun', {'target': IQN, 'lun': 0, 'size': words[2]})
        times('iscsi_resize_lun %s through %s: %s' % (words[2], who, json.dumps(ans)[:120]))
        return ('OK iscsi_resize_lun %s through %s' % (words[2], who) if 'result' in ans else
                'FAIL iscsi_resize_lun: %s' % json.dumps(ans.get('error'))[:200])
    if verb == 'kill':
        if not g.alive():
            return 'FAIL gateway %s is not running' % who
        g.signal(signal.SIGKILL)
        g.p.wait(10)
        times('kill -9 %s' % who)
        return 'OK killed %s (pid %d)' % (who, g.p.pid)
    if verb == 'stop':
        if not g.alive():
            return 'FAIL gateway %s is not running' % who
        g.signal(signal.SIGSTOP)
        times('SIGSTOP %s' % who)
        return 'OK stopped %s (pid %d)' % (who, g.p.pid)
    if verb == 'cont':
        if not g.alive():
            return 'FAIL gateway %s is not running' % who
        g.signal(signal.SIGCONT)
        times('SIGCONT %s' % who)
        return 'OK resumed %s; its lock state: %s' % (who, g.lock_state(5))
    if verb == 'restart':
        rc = g.stop()
        times('%s stopped (exit %s)' % (who, rc))
        if rc not in (0, -9):  # -9: it had been killed
            report('FAIL', 'host-stop-' + who, 'gateway %s exited with %s on SIGTERM' % (who, rc))
        st = g.start()
        times('%s restarted: %s' % (who, st))
        return 'OK restarted %s (previous exit %s): lock state %s' % (who, rc, st)
    return 'FAIL unknown request %r' % line


def watch(gws, parent):
    n = 1
    while not STOP and time.monotonic() - T0 < LIFETIME:
        if os.getppid() != parent:
            log('run.sh is gone: stopping')
            return
        req = os.path.join(SHARE, '%s.req.%d' % (NAME, n))
        if not os.path.exists(req):
            time.sleep(0.05)
            continue
        with open(req) as f:
            line = f.read().strip()
        times('request %d: %s' % (n, line))
        try:
            rsp = act(gws, line)
        except Exception as e:  # noqa: BLE001
            rsp = 'FAIL %s: %s' % (type(e).__name__, e)
        log('request %d %r -> %s' % (n, line, rsp))
        put(os.path.join(SHARE, '%s.rsp.%d' % (NAME, n)), rsp)
        n += 1


def on_term(signum, frame):
    global STOP
    STOP = True


def main():
    signal.signal(signal.SIGTERM, on_term)
    parent = os.getppid()
    ports = [int(p) for p in os.environ.get('IX_RDMA_PORTS', '').split()]
    if len(ports) != 2:
        put(os.path.join(SHARE, NAME + '.host.failed'), 'IX_RDMA_PORTS must name two ports')
        return 1
    tmp = tempfile.mkdtemp(prefix='ixtest.mpath.', dir='/tmp')
    shm = '/dev/shm' if os.path.isdir('/dev/shm') else tmp
    ceph = tempfile.mkdtemp(prefix='ixtest.mpath-ceph.', dir=shm)
    conf = os.path.join(ceph, 'ceph.conf')
    gws = {}
    try:
        for c in ('ceph-mon', 'ceph-osd', 'rbd'):
            if not shutil.which(c):
                why = 'Ceph not installed (%s missing): scripts/deps.sh --ceph' % c
                report('SKIP', 'host-setup', why)
                put(os.path.join(SHARE, NAME + '.host.skip'), why)
                return 0
        if not os.access(os.path.join(BUILD, 'tools', 'ix-target'), os.X_OK):
            why = 'ix-target not built in %s' % BUILD
            report('SKIP', 'host-setup', why)
            put(os.path.join(SHARE, NAME + '.host.skip'), why)
            return 0
        r = subprocess.run([CLUSTER_SH, 'start', ceph, '--store', 'memstore'], timeout=300,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError('cluster.sh start: ' + r.stderr.strip()[-300:])
        r = subprocess.run(['rbd', 'create', '--size', IMAGE_SIZE, 'rbd/' + IMAGE], timeout=60,
                           capture_output=True, text=True, env=dict(os.environ, CEPH_CONF=conf))
        if r.returncode != 0:
            raise RuntimeError('rbd create: ' + r.stderr.strip()[-300:])
        report('PASS', 'host-cluster', 'memstore cluster and a %s image up in %.0f s'
               % (IMAGE_SIZE, time.monotonic() - T0))
        times('cluster up')
        gws['a'] = Gateway(tmp, conf, 'a', 1, ports[0])
        sa = gws['a'].start()
        gws['b'] = Gateway(tmp, conf, 'b', 2, ports[1])
        sb = gws['b'].start()
        ok = sa == 'owner' and sb == 'standby'
        report('PASS' if ok else 'FAIL', 'host-gateways',
               'a on 127.0.0.1:%d (lock %s), b on 127.0.0.1:%d (lock %s)'
               % (ports[0], sa, ports[1], sb))
        times('gateways up: a=%s b=%s' % (sa, sb))
        if not ok:
            raise RuntimeError('gateway a should own the lock and b be standby: a=%s b=%s'
                               % (sa, sb))
        put(os.path.join(SHARE, NAME + '.host.ready'), '%s %s' % (IQN, NAA))
        log('ready; watching %s/%s.req.N' % (SHARE, NAME))
        watch(gws, parent)
    except Exception as e:  # noqa: BLE001
        report('FAIL', 'host-setup', '%s: %s' % (type(e).__name__, str(e)[:400]))
        put(os.path.join(SHARE, NAME + '.host.failed'), str(e)[:400])
    finally:
        for n, g in sorted(gws.items()):
            was_alive = g.alive()
            rc = g.stop()
            if was_alive:
                report('PASS' if rc == 0 else 'FAIL', 'host-shutdown-' + n,
                       'gateway %s exited %s on SIGTERM at the end' % (n, rc))
            with open(g.log_path, errors='replace') as f:
                text = f.read()
            if 'ERROR: AddressSanitizer' in text or 'runtime error:' in text or \
                    'ERROR: LeakSanitizer' in text:
                report('FAIL', 'host-sanitizer-' + n, 'sanitizer report in ' + g.log_path)
        r = subprocess.run([CLUSTER_SH, 'stop', ceph], timeout=120, capture_output=True,
                           text=True)
        report('PASS' if r.returncode == 0 else 'FAIL', 'host-cluster-stop',
               'cluster.sh stop exited %d after %.0f s of the host part'
               % (r.returncode, time.monotonic() - T0))
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ceph, ignore_errors=True)
    return 1 if report.failed else 0


if __name__ == '__main__':
    sys.exit(main())
