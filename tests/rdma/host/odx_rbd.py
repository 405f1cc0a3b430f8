#!/usr/bin/env python3
"""Host part of the RDMA tier's odx-rbd test (tests/rdma/tests/odx-rbd.sh, which runs
tests/rdma/tests/odx.sh with IXR_ODX_HOST=1): a single-node memstore Ceph cluster
(tests/ceph/cluster.sh), two 64 MiB RBD images, and one ix-target on 127.0.0.1:PORT1 exporting
them as LUNs 0 and 1 of one target, so that token-based copies between them and within one go
through ix's copy manager on RBD.

Environment (tests/rdma/run.sh): IX_SHARE, IX_TEST, IX_BUILD, IX_RDMA_PORTS ("PORT1 PORT2"),
IX_RESULTS, IX_HOST_LIFETIME. Files in the share:
  NAME.host.ready    once ix-target runs: "IQN detail" on one line
  NAME.host.failed   instead, when the set-up failed: the reason
  NAME.host.skip     instead, when Ceph or ix-target is missing: the reason
  NAME.req.N / NAME.rsp.N  the guest's requests; "stats" is answered with "OK " and the text
                     of `ix-ctl stats` (the per-LUN READ/WRITE counters the guest checks)
Logs: NAME.host.log, NAME.ix-target.log. Host-side checks (NAME.host-*): the cluster and
ix-target start; at the end ix-target exits 0 on SIGTERM with no sanitizer report in its log,
and the cluster stops.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixtest  # noqa: E402

SHARE = os.environ.get('IX_SHARE', os.path.join(ROOT, 'tests', 'out', 'rdma', 'share'))
NAME = os.environ.get('IX_TEST', 'odx-rbd')
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
CLUSTER_SH = os.path.join(ROOT, 'tests', 'ceph', 'cluster.sh')
IQN = 'iqn.2026-11.io.ix.rdma:odx'
IMAGES = ('odx-a', 'odx-b')
LIFETIME = int(os.environ.get('IX_HOST_LIFETIME', '1800'))
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


def on_term(signum, frame):
    global STOP
    STOP = True


def serve(sock, parent):
    """Answer the guest's "stats" requests until SIGTERM (or run.sh is gone)."""
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
        if line == 'stats':
            r = subprocess.run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock, 'stats'],
                               capture_output=True, text=True, timeout=30)
            rsp = ('OK ' + r.stdout) if r.returncode == 0 else \
                'FAIL ix-ctl stats: ' + r.stderr.strip()[-200:]
        else:
            rsp = 'FAIL unknown request %r' % line
        log('request %d %r -> %s' % (n, line, rsp.splitlines()[0] if rsp else ''))
        put(os.path.join(SHARE, '%s.rsp.%d' % (NAME, n)), rsp.rstrip('\n'))
        n += 1


def main():
    signal.signal(signal.SIGTERM, on_term)
    parent = os.getppid()
    ports = [int(p) for p in os.environ.get('IX_RDMA_PORTS', '').split()]
    if not ports:
        put(os.path.join(SHARE, NAME + '.host.failed'), 'IX_RDMA_PORTS names no port')
        return 1
    tmp = tempfile.mkdtemp(prefix='ixtest.odx.', dir='/tmp')
    shm = '/dev/shm' if os.path.isdir('/dev/shm') else tmp
    ceph = tempfile.mkdtemp(prefix='ixtest.odx-ceph.', dir=shm)
    conf = os.path.join(ceph, 'ceph.conf')
    sock = os.path.join(tmp, 'ix.sock')
    log_path = os.path.join(SHARE, NAME + '.ix-target.log')
    proc = None
    try:
        for c in ('ceph-mon', 'ceph-osd', 'rbd'):
            if not shutil.which(c):
                why = 'Ceph not installed (%s missing): scripts/deps.sh --ceph' % c
                report('SKIP', 'host-setup', why)
                put(os.path.join(SHARE, NAME + '.host.skip'), why)
                return 0
        for b in ('ix-target', 'ix-ctl'):
            if not os.access(os.path.join(BUILD, 'tools', b), os.X_OK):
                why = '%s not built in %s' % (b, BUILD)
                report('SKIP', 'host-setup', why)
                put(os.path.join(SHARE, NAME + '.host.skip'), why)
                return 0
        r = subprocess.run([CLUSTER_SH, 'start', ceph, '--store', 'memstore'], timeout=300,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError('cluster.sh start: ' + r.stderr.strip()[-300:])
        for img in IMAGES:
            r = subprocess.run(['rbd', 'create', '--size', '64M', 'rbd/' + img], timeout=60,
                               capture_output=True, text=True,
                               env=dict(os.environ, CEPH_CONF=conf))
            if r.returncode != 0:
                raise RuntimeError('rbd create %s: %s' % (img, r.stderr.strip()[-300:]))
        report('PASS', 'host-cluster', 'memstore cluster and images %s up in %.0f s'
               % (' '.join(IMAGES), time.monotonic() - T0))
        cfg = {'global': {'mgmt_socket': sock, 'log_level': 'info'},
               'portals': [{'name': 'p', 'address': '127.0.0.1', 'port': ports[0]}],
               'targets': [{'name': IQN, 'luns': [
                   {'lun': i, 'backend': 'rbd', 'rbd': {'pool': 'rbd', 'image': img,
                                                        'conf': conf}}
                   for i, img in enumerate(IMAGES)]}]}
        cfg_path = os.path.join(tmp, 'ix.json')
        with open(cfg_path, 'w') as f:
            json.dump(cfg, f)
        with open(log_path, 'w') as logf:
            proc = subprocess.Popen([os.path.join(BUILD, 'tools', 'ix-target'), '-c', cfg_path],
                                    stdout=logf, stderr=subprocess.STDOUT)
        end = time.monotonic() + 60
        while True:
            with open(log_path, errors='replace') as f:
                if 'ix-target: ready' in f.read():
                    break
            if proc.poll() is not None:
                raise RuntimeError('ix-target exited with %d before it was ready'
                                   % proc.returncode)
            if time.monotonic() > end:
                raise RuntimeError('ix-target not ready after 60 s')
            time.sleep(0.1)
        report('PASS', 'host-target', 'ix-target on 127.0.0.1:%d, LUNs 0 and 1 on rbd/%s and '
               'rbd/%s' % (ports[0], IMAGES[0], IMAGES[1]))
        put(os.path.join(SHARE, NAME + '.host.ready'),
            '%s LUNs 0 and 1 on RBD images rbd/%s and rbd/%s of one cluster'
            % (IQN, IMAGES[0], IMAGES[1]))
        serve(sock, parent)
    except Exception as e:  # noqa: BLE001
        report('FAIL', 'host-setup', '%s: %s' % (type(e).__name__, str(e)[:400]))
        put(os.path.join(SHARE, NAME + '.host.failed'), str(e)[:400])
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
            report('PASS' if rc == 0 else 'FAIL', 'host-shutdown',
                   'ix-target exited %s on SIGTERM at the end' % rc)
        if os.path.exists(log_path):
            with open(log_path, errors='replace') as f:
                text = f.read()
            if 'ERROR: AddressSanitizer' in text or 'runtime error:' in text or \
                    'ERROR: LeakSanitizer' in text:
                report('FAIL', 'host-sanitizer', 'sanitizer report in ' + log_path)
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
