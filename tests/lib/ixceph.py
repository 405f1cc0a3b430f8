"""Ceph scaffolding shared by the RBD tests (python3 stdlib only): a single-node cluster of the
test's own through tests/ceph/cluster.sh, images and objects through the `rbd`, `rados` and
`ceph` tools, ix-target configurations with RBD LUNs, the management socket, and the few
helpers every such test had its own copy of.

    cl = Cluster('ha_pr', store='memstore')   # a folder in /dev/shm (tmpfs) when there is one
    cl.start()                                # cluster.sh start; seconds it took
    cl.rbd('create', '--size', '64M', 'rbd/img')   # or cl.create_image('img', '64M')
    cfg = write_config(path, IQN, port, [rbd_lun(0, 'img', cl.conf)], tpgt=1)
    d = ixtest.Daemon(cfg, 'ha_pr.ix-target-a.log')
    ...
    cl.stop()                                 # cluster.sh stop, and the folder goes

skip_reason() says why a test cannot run here (Ceph or the build missing: exit 77), and
run_with_cluster() wraps the usual main(): start, report the 'cluster' check, run the steps,
stop whatever happens.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ixtest  # noqa: E402
from ixha import fmt, sense3  # noqa: E402,F401 (the tests import them from here too)

ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
CLUSTER_SH = os.path.join(ROOT, 'tests', 'ceph', 'cluster.sh')
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
OUT = os.environ.get('IX_OUT', os.path.join(ROOT, 'tests', 'out'))
CEPH_TOOLS = ('ceph-mon', 'ceph-osd', 'rbd', 'ceph-authtool', 'monmaptool')


def run(cmd, timeout, **kw):
    """subprocess.run with text output captured (never raises on a non-zero exit)."""
    return subprocess.run(cmd, timeout=timeout, capture_output=True, text=True, **kw)


def ceph_python(modules=('rados',)):
    """An interpreter that imports Debian's Ceph bindings (python3-rados, python3-rbd) named
    in modules: this one, or the system one when this one is another; None without them."""
    code = 'import ' + ', '.join(modules)
    for py in (sys.executable, '/usr/bin/python3'):
        if py and os.access(py, os.X_OK) and subprocess.run(
                [py, '-c', code], capture_output=True).returncode == 0:
            return py
    return None


def skip_reason(tools=(), built=('ix-target',)):
    """Why the test cannot run here, or None: a Ceph package missing (scripts/deps.sh --ceph
    installs them), another tool missing, or an ix binary not built in IX_BUILD."""
    missing = [c for c in CEPH_TOOLS if not shutil.which(c)]
    if missing:
        return 'Ceph not installed (%s missing): scripts/deps.sh --ceph installs it' % \
            ', '.join(missing)
    missing = [c for c in tools if not shutil.which(c)]
    if missing:
        return '%s not installed (scripts/deps.sh)' % ', '.join(missing)
    for b in built:
        if not os.access(os.path.join(BUILD, 'tools', b), os.X_OK):
            return '%s not built in %s' % (b, BUILD)
    return None


class Cluster:
    """One single-node cluster (tests/ceph/cluster.sh) in a folder of its own: on tmpfs
    (/dev/shm) when there is one, so that bluestore's synced writes cost no disk I/O."""

    def __init__(self, name, store='memstore', mgr=False):
        shm = '/dev/shm' if os.path.isdir('/dev/shm') else None
        self.path = tempfile.mkdtemp(prefix='ixtest.%s-ceph.' % name, dir=shm)
        self.store = store
        self.mgr = mgr    # cluster.sh --mgr: a manager (pool statistics, quotas)
        self.conf = os.path.join(self.path, 'ceph.conf')
        self.env = dict(os.environ, CEPH_CONF=self.conf)

    def sh(self, cmd, *args, timeout=300):
        """cluster.sh CMD DIR ARGS (start, stop, osd-stop, osd-start, osd-kill, status)."""
        r = run([CLUSTER_SH, cmd, self.path] + list(args), timeout)
        if r.returncode != 0:
            raise RuntimeError('cluster.sh %s: %s' % (cmd, r.stderr.strip()[-400:]))
        return r

    def start(self, timeout=300):
        t0 = time.monotonic()
        self.sh('start', '--store', self.store, *(['--mgr'] if self.mgr else []),
                timeout=timeout)
        return time.monotonic() - t0

    def stop(self, timeout=120):
        """Stop every daemon of the cluster and remove its folder (the folder goes even when
        the stop failed; the error is raised after)."""
        try:
            if os.path.isdir(self.path):
                self.sh('stop', timeout=timeout)
        finally:
            shutil.rmtree(self.path, ignore_errors=True)

    def tool(self, *args, timeout=120, data=None):
        """Run a Ceph tool (rbd, rados, ceph) against this cluster; its stdout as text, or
        RuntimeError naming the command and the end of its stderr."""
        r = subprocess.run(list(args), timeout=timeout, capture_output=True, env=self.env,
                           input=data)
        if r.returncode != 0:
            raise RuntimeError('%s: %s' % (' '.join(args), r.stderr.decode(errors='replace')
                                           .strip()[-400:]))
        return r.stdout.decode(errors='replace')

    def try_tool(self, *args, timeout=120):
        """The same without raising: the CompletedProcess (text)."""
        return run(list(args), timeout, env=self.env)

    def rbd(self, *args, timeout=120):
        return self.tool('rbd', *args, timeout=timeout)

    def rados(self, *args, timeout=60, data=None):
        return self.tool('rados', *args, timeout=timeout, data=data)

    def create_image(self, image, size='64M', pool='rbd'):
        self.rbd('create', '--size', size, '%s/%s' % (pool, image))

    def export(self, image, dest, pool='rbd'):
        """`rbd export` of the image into dest (replaced); returns dest."""
        if os.path.exists(dest):
            os.unlink(dest)
        self.rbd('export', '--no-progress', '%s/%s' % (pool, image), dest)
        return dest

    def blocklist(self):
        """`ceph osd blocklist ls` as text."""
        return self.tool('ceph', 'osd', 'blocklist', 'ls')

    def dead_conf(self, tmp, name='dead.conf'):
        """A copy of ceph.conf whose monitor address has nobody listening."""
        path = os.path.join(tmp, name)
        port = ixtest.free_port()
        with open(self.conf) as f, open(path, 'w') as g:
            for line in f:
                if line.strip().startswith('mon host') or line.strip().startswith('mon_host'):
                    line = 'mon host = [v2:127.0.0.1:%d,v1:127.0.0.1:%d]\n' % (port, port)
                g.write(line)
        return path

    def librbd_counter(self, pid, name):
        """A librbd perf counter of an ix-target process, through its admin socket (the
        cluster's ceph.conf names one per client process); None when it cannot be read."""
        sock = os.path.join(self.path, 'run', 'client.admin.%d.asok' % pid)
        r = run(['ceph', '--admin-daemon', sock, 'perf', 'dump'], 30, env=self.env)
        if r.returncode != 0:
            return None
        d = json.loads(r.stdout)
        return sum(v.get(name, 0) for k, v in d.items() if k.startswith('librbd'))


def rbd_lun(n, image, conf, pool='rbd', **rbd_extra):
    """A thin RBD LUN of the configuration (docs/configuration.md, RBD LUNs); rbd_extra goes
    into its "rbd" section (exclusive_lock, osd_op_timeout_s, start_offline, ...)."""
    lun = {'lun': n, 'backend': 'rbd', 'thin': True,
           'rbd': {'pool': pool, 'image': image, 'conf': conf}}
    lun['rbd'].update(rbd_extra)
    return lun


def write_config(path, iqn, port, luns, host='127.0.0.1', tpgt=None, portal='default',
                 glob=None, alua=None):
    """Write an ix-target configuration with one portal and one target; returns path."""
    p = {'name': portal, 'address': host, 'port': port}
    if tpgt is not None:
        p['tpgt'] = tpgt
    target = {'name': iqn, 'luns': luns}
    if alua is not None:
        target['alua'] = alua
    cfg = {'global': dict(glob or {}), 'portals': [p], 'targets': [target]}
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=1)
    return path


def rpc(sock, method, params, timeout=60):
    """One JSON-RPC call on an ix-target management socket; the decoded answer."""
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


def lock_state(sock, iqn, lun=0):
    """The LUN's lock state as the gateway behind sock sees it (owner, standby, acquiring,
    fenced, ...): iscsi_break_rbd_lock with dry_run, which breaks nothing."""
    r = rpc(sock, 'iscsi_break_rbd_lock', {'target': iqn, 'lun': lun, 'dry_run': True})
    return r.get('result', {}).get('state')


def wait_lock(sock, iqn, want, secs=30, lun=0):
    """lock_state polled until it is want or secs have passed; the last state seen."""
    end = time.monotonic() + secs
    while True:
        st = lock_state(sock, iqn, lun)
        if st == want or time.monotonic() > end:
            return st
        time.sleep(0.1)


def lock_pair(ds, tmp, iqn, image, conf, test, prefix='', host='127.0.0.1', **rbd):
    """Gateways a and b of one image with the managed exclusive lock (LUN 0; more of its
    "rbd" section in rbd), each with a management socket, started in turn so that a takes the
    lock and b stands by; each daemon is appended to ds as soon as it runs (the caller stops
    them). Returns (sockets, ports, the lock states seen)."""
    socks, ports, sts = [], [], []
    for name in 'ab':
        sock = os.path.join(tmp, '%s%s.sock' % (prefix, name))
        ports.append(ixtest.free_port())
        cfg = write_config(os.path.join(tmp, '%s%s.json' % (prefix, name)), iqn, ports[-1],
                           [rbd_lun(0, image, conf, exclusive_lock=True, **rbd)], host=host,
                           glob={'mgmt_socket': sock})
        ds.append(ixtest.Daemon(cfg, '%s.ix-target-%s%s.log' % (test, prefix, name), BUILD,
                                OUT))
        socks.append(sock)
        sts.append(wait_lock(sock, iqn, 'owner' if name == 'a' else 'standby'))
    return socks, ports, sts


check_sanitizer = ixtest.check_sanitizer


def step(report, name, fn, *args):
    """Run one step; an exception is that step's FAIL (traceback on stderr), and the test goes
    on with the next step."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        report('FAIL', name, '%s: %s' % (type(e).__name__, str(e)[:300]))
        return None


def run_with_cluster(report, name, body, store='memstore', tools=(), built=('ix-target',),
                     detail='single-node cluster (%s) up in %.0f s', mgr=False):
    """The usual main(): skip (77) when skip_reason() says so; start a cluster, report it as
    the check 'cluster' (a start that fails is that check's FAIL), run body(cl, tmp) with a
    temp folder of the test's own, then stop the cluster and remove both folders whatever
    happened. Returns the exit status (1 when any check failed)."""
    why = skip_reason(tools, built)
    if why:
        print('SKIP: ' + why, flush=True, file=sys.stderr)
        return 77
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='ixtest.%s.' % name, dir='/tmp')
    cl = Cluster(name, store, mgr=mgr)
    try:
        try:
            took = cl.start()
        except Exception as e:  # noqa: BLE001
            report('FAIL', 'cluster', str(e)[-300:])
            return 1
        report('PASS', 'cluster', detail % (store, took))
        try:
            body(cl, tmp)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            report('FAIL', 'scenario', '%s: %s' % (type(e).__name__, str(e)[:300]))
    finally:
        try:
            cl.stop()
        except Exception as e:  # noqa: BLE001
            report('FAIL', 'cluster-stop', str(e)[-300:])
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if report.failed else 0
