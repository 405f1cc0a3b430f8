#!/usr/bin/env python3
"""Random faults against three HA gateways of one RBD image, a verifying multipath client, and
a history for tests/chaos/check.py (docs/ha.md, "HA under chaos"; issue 26). Root only (network
namespaces).

  tests/chaos/chaos.py --seed S --duration SECONDS [--faults kill,stop,...] [--first KIND,...]
                       [--ops N]

Network: namespaces of its own, named ixc<pid>-*: "ceph" holds a bridge (10.77.0.1/24) on whose
address the single-node cluster runs (tests/ceph/cluster.sh --addr, memstore); g1, g2, g3 each
hold one ix-target, with a veth to the bridge (10.77.0.1N) and a veth to the client's
namespace "cli" (gateway 10.79.N.2, client 10.79.N.1), so that each gateway's link to Ceph and
to the client can be cut alone (nft drop rules in the gateway's namespace). Namespaces whose
pid is gone (an earlier run killed) are removed at start; this run's always at the end.

Gateways: one target, LUN 0 the image with the managed exclusive lock (rbd.exclusive_lock),
ALUA groups 1-3 (each gateway's own portal tpgt = its group), pr_store rados; the timeouts
below (TIMEOUTS) as ha_*.py configure them. The client (tests/chaos/client.py) runs in "cli".

Faults (drawn with the seed, one at a time with a pause between, or two at once):
  kill         kill -9 of a gateway, restarted 1-5 s later
  stop         SIGSTOP of a gateway, then SIGCONT: half of them past every timeout (the
               client's command and replacement timeouts, the hand-over timeout, 2-6 s more),
               the others 0.5-4 s (shorter than any: nothing should move)
  part-ceph    a gateway's link to Ceph dropped (nft) for osd_op_timeout_s + 1 (6) to 15 s
  part-client  a gateway's link to the client dropped (nft) for 3-15 s
  osd-restart  the OSD stopped (SIGTERM: memstore keeps its data) and started again
  mon-restart  the monitor stopped (SIGTERM) and started again
  slow         slow storage: the gateway's link to Ceph held to 512 kbit/s (tc tbf, up to
               4 s of queue) for 3-15 s; half of the time the gateway's host also crashes at
               a random moment in it (a crash while its writes wait for the cluster): kill -9,
               and its TCP connections to Ceph aborted (`ss -K`) and the link's queue dropped,
               so that what its kernel had not sent is lost as in a power failure (after a
               kill -9 alone the kernel would still send it); restarted once the link is fast
               again
  double       two of the above (not the same gateway) at once
--first KIND,... brings these faults first, in that order, each on the gateway holding the lock
(3-8 s apart, as the others; its times drawn with the seed), before the random draw; there
"slow-kill" is a slow fault whose gateway is always killed in it, its link held to 64 kbit/s
(a 4 KiB write ~0.5 s on the wire, so that the crash finds one on its way): the short run's
way of having one crash under slow storage, with writes in flight, whatever its seed draws.
The OSD runs bluestore (a sparse file in /dev/shm) when osd-restart is in the mix, memstore
otherwise (--store chooses): with memstore, after four OSD restarts ~10 s apart the PGs stayed
"queued for pg" and the cluster never answered again (Ceph 16.2, seen once; bluestore took
the same restarts). Slow storage is a rate limit (tbf) rather than a fixed delay: this
kernel has no sch_netem; a rate below the client's write rate builds a queue, which delays
every request behind it. Half of the gateway faults hit the gateway
that holds the lock (its log's last "owner" line), the rest a random one.

Traffic (--traffic io,pr, the default): the client's I/O, and beside it persistent
reservations (client.py's PrActor: nexuses of the client's own hold a Write Exclusive -
Registrants Only reservation and move it between gateways with RELEASE/RESERVE and PREEMPT,
READ RESERVATION through every gateway at once, an unregistered initiator's writes).

Output in OUT/chaos-<seed>/ (OUT: IX_OUT or tests/out): history.jsonl (the client's operations,
the faults with start and end, each gateway's start/exit and lock-state lines from its log, the
blocklist, and osdwatch.py's lines: the OSD map each blocklist entry entered and when the OSD
had each map), image.bin (`rbd export`), g1.log... (the gateways), and the checker's summary on
stdout. Exit 0 when the checker found nothing, 1 when it did, 2 when the run itself failed,
77 when it cannot run here (not root, no Ceph, ix-target not built).
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
sys.path.insert(0, HERE)
import check  # noqa: E402
import ixceph  # noqa: E402

IQN = 'iqn.2024-01.org.ix.test:chaos'
INITIATOR = 'iqn.2024-01.org.ix.test:chaos-client'
INTRUDER = 'iqn.2024-01.org.ix.test:chaos-intruder'  # never registered: PR must refuse it
INTRUDER_BLOCKS = 16  # its blocks: right after the client's
IMAGE = 'chaos'
IMAGE_MIB = 16
BLOCKS = 512  # the 4 KiB blocks the client uses: the first 2 MiB of the image
NGW = 3
BRIDGE_IP = '10.77.0.1'
TIMEOUTS = {'lock_check_ms': 1000, 'handover_timeout_ms': 3000, 'osd_op_timeout_s': 5,
            'rejoin_after_ms': 2000, 'implicit_failover_ms': 3000, 'pr_notify_timeout_s': 2}
FAULTS = ['kill', 'stop', 'part-ceph', 'part-client', 'osd-restart', 'mon-restart', 'slow',
          'double']
DEFAULT_FAULTS = FAULTS
FIRST = [k for k in FAULTS if k != 'double'] + ['slow-kill']  # what --first may name
PREFIX = 'ixc'
TRANSITION_S = 15  # alua.transition_time: the IMPLICIT TRANSITION TIME the client waits


def log(msg):
    print('[chaos %s] %s' % (time.strftime('%H:%M:%S'), msg), file=sys.stderr, flush=True)


def sh(*args, check=True, timeout=60):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError('%s: %s' % (' '.join(args), r.stderr.strip()[-300:]))
    return r


def client_timeouts():
    """The client's timeouts, from the gateways' configured ones (never from this machine's
    speed): a command may wait for a librbd call (osd_op_timeout_s) behind a take-over
    (handover_timeout_ms); an operation may wait for a replacement timeout, a take-over of a
    silent holder after an implicit window, and a rejoin."""
    t = TIMEOUTS
    cmd = t['osd_op_timeout_s'] + t['handover_timeout_ms'] / 1000 + 2
    repl = 5.0
    return {'cmd_s': cmd, 'login_s': 5.0, 'relogin_s': 2.0, 'replacement_s': repl,
            'rtpg_s': 5.0, 'transition_s': TRANSITION_S,
            'stpg_s': t['handover_timeout_ms'] / 1000 + t['osd_op_timeout_s'] + 2,
            'op_timeout_s': repl + TRANSITION_S + cmd * 2 + t['implicit_failover_ms'] / 1000 +
            t['handover_timeout_ms'] / 1000 + t['rejoin_after_ms'] / 1000 + 10}


# -- network namespaces

def ns_list():
    r = sh('ip', 'netns', 'list', check=False)
    return [ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()]


def ns_remove(ns):
    """Kill what still runs in ns (this harness's processes: the namespace is its own) and
    delete it."""
    r = sh('ip', 'netns', 'pids', ns, check=False)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGCONT)
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    sh('ip', 'netns', 'del', ns, check=False)


def sweep():
    """Namespaces of earlier runs of this harness whose process is gone."""
    for ns in ns_list():
        m = re.match(r'^%s(\d+)-' % PREFIX, ns)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue
        except ProcessLookupError:
            pass
        except OSError:
            continue
        log('removing stale namespace ' + ns)
        ns_remove(ns)


class Net:
    def __init__(self):
        self.p = '%s%d-' % (PREFIX, os.getpid())
        self.ceph, self.cli = self.p + 'ceph', self.p + 'cli'
        self.gw = [self.p + 'g%d' % i for i in range(1, NGW + 1)]
        self.made = []

    def ns(self, name):
        sh('ip', 'netns', 'add', name)
        self.made.append(name)
        sh('ip', '-n', name, 'link', 'set', 'lo', 'up')

    def setup(self):
        for n in [self.ceph, self.cli] + self.gw:
            self.ns(n)
        c = self.ceph
        sh('ip', '-n', c, 'link', 'add', 'br0', 'type', 'bridge')
        sh('ip', '-n', c, 'addr', 'add', BRIDGE_IP + '/24', 'dev', 'br0')
        sh('ip', '-n', c, 'link', 'set', 'br0', 'up')
        for i, g in enumerate(self.gw, 1):
            sh('ip', '-n', c, 'link', 'add', 'b%d' % i, 'type', 'veth', 'peer', 'name', 'e0',
               'netns', g)
            sh('ip', '-n', c, 'link', 'set', 'b%d' % i, 'master', 'br0', 'up')
            sh('ip', '-n', g, 'addr', 'add', '10.77.0.1%d/24' % i, 'dev', 'e0')
            sh('ip', '-n', g, 'link', 'set', 'e0', 'up')
            sh('ip', '-n', self.cli, 'link', 'add', 'c%d' % i, 'type', 'veth', 'peer', 'name',
               'i0', 'netns', g)
            sh('ip', '-n', self.cli, 'addr', 'add', '10.79.%d.1/24' % i, 'dev', 'c%d' % i)
            sh('ip', '-n', self.cli, 'link', 'set', 'c%d' % i, 'up')
            sh('ip', '-n', g, 'addr', 'add', '10.79.%d.2/24' % i, 'dev', 'i0')
            sh('ip', '-n', g, 'link', 'set', 'i0', 'up')
            # one chain per link and direction: a partition adds a drop rule, healing flushes
            rules = ('add table inet ixchaos\n' + ''.join(
                'add chain inet ixchaos %s_%s { type filter hook %s priority 0; }\n'
                % (link, d, hook) for link in ('ceph', 'cli')
                for d, hook in (('in', 'input'), ('out', 'output'))))
            subprocess.run(['ip', 'netns', 'exec', g, 'nft', '-f', '-'], input=rules,
                           text=True, check=True, capture_output=True)

    def cut(self, i, link):
        dev = 'e0' if link == 'ceph' else 'i0'
        g = self.gw[i - 1]
        sh('ip', 'netns', 'exec', g, 'nft', 'add rule inet ixchaos %s_in iifname "%s" drop'
           % (link, dev))
        sh('ip', 'netns', 'exec', g, 'nft', 'add rule inet ixchaos %s_out oifname "%s" drop'
           % (link, dev))

    def slow(self, i, on, rate='512kbit'):
        """The gateway's link to Ceph (its side, egress: the writes' data) rate-limited, or
        not any more."""
        g = self.gw[i - 1]
        if on:
            sh('ip', 'netns', 'exec', g, 'tc', 'qdisc', 'replace', 'dev', 'e0', 'root', 'tbf',
               'rate', rate, 'burst', '32kb', 'latency', '4s')
        else:
            sh('ip', 'netns', 'exec', g, 'tc', 'qdisc', 'del', 'dev', 'e0', 'root', check=False)

    def crash_link(self, i, rate):
        """What a crash of the gateway's host does to its connections to Ceph, after its
        process was killed: a kill -9 alone leaves the kernel to send what the process had
        written to its sockets (an orphaned TCP socket keeps sending, the link's queue
        drains), so writes that had left the process would still reach the OSD. Abort the
        sockets (`ss -K`: their queues discarded) and replace the link's queue (the queued
        packets dropped), keeping it at rate: nothing the host had not sent arrives."""
        g = self.gw[i - 1]
        sh('ip', 'netns', 'exec', g, 'ss', '-K', '-t', 'dst', BRIDGE_IP, check=False)
        sh('ip', 'netns', 'exec', g, 'tc', 'qdisc', 'del', 'dev', 'e0', 'root', check=False)
        self.slow(i, True, rate)

    def heal(self, i, link):
        g = self.gw[i - 1]
        for d in ('in', 'out'):
            sh('ip', 'netns', 'exec', g, 'nft', 'flush chain inet ixchaos %s_%s' % (link, d),
               check=False)

    def keep_cluster_logs(self):
        try:
            shutil.copytree(os.path.join(self.cl.path, 'log'), os.path.join(self.out, 'ceph-log'))
        except OSError as e:
            log('keeping the cluster logs: %s' % e)

    def teardown(self):
        for n in reversed(self.made):
            ns_remove(n)
        self.made = []


class NsCluster(ixceph.Cluster):
    """The single-node cluster, run and asked inside the ceph namespace."""

    def __init__(self, ns, store):
        super().__init__('chaos', store)
        self.ns = ns

    def sh(self, cmd, *args, timeout=300):
        r = ixceph.run(['ip', 'netns', 'exec', self.ns, ixceph.CLUSTER_SH, cmd, self.path] +
                       list(args), timeout)
        if r.returncode != 0:
            raise RuntimeError('cluster.sh %s: %s' % (cmd, r.stderr.strip()[-400:]))
        return r

    def tool(self, *args, timeout=120, data=None):
        return super().tool('ip', 'netns', 'exec', self.ns, *args, timeout=timeout, data=data)

    def mon_restart(self, applied, down_s):
        pidf = os.path.join(self.path, 'run', 'mon.a.pid')
        with open(pidf) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        applied()
        time.sleep(down_s)
        r = subprocess.run(['ip', 'netns', 'exec', self.ns, 'ceph-mon', '-i', 'a'],
                           env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError('ceph-mon -i a: ' + r.stderr[-300:])


# -- gateways

class Gw:
    def __init__(self, run, i):
        self.run, self.i, self.name = run, i, 'g%d' % i
        self.ns = run.net.gw[i - 1]
        self.sock = os.path.join(run.tmp, self.name + '.sock')
        self.log_path = os.path.join(run.out, self.name + '.log')
        self.cfg_path = os.path.join(run.tmp, self.name + '.json')
        self.p = None
        self.stopped = False
        t = TIMEOUTS
        groups = [{'id': i, 'state': 'standby', 'portals': ['p']}] + \
            [{'id': j, 'state': 'standby', 'relative_ports': [j]}
             for j in range(1, NGW + 1) if j != i]
        lun = ixceph.rbd_lun(0, IMAGE, run.cl.conf, exclusive_lock=True,
                             osd_op_timeout_s=t['osd_op_timeout_s'],
                             handover_timeout_ms=t['handover_timeout_ms'],
                             lock_check_ms=t['lock_check_ms'],
                             rejoin_after_ms=t['rejoin_after_ms'],
                             pr={'notify_timeout_s': t['pr_notify_timeout_s']})
        lun.update({'pr_store': 'rados', 'naa_id': '0x6001405a0c4a0500', 'serial': 'ixchaos0'})
        cfg = {'global': {'mgmt_socket': self.sock},
               'portals': [{'name': 'p', 'address': '10.79.%d.2' % i, 'port': 3260,
                            'tpgt': i}],
               'targets': [{'name': IQN, 'luns': [lun],
                            'alua': {'implicit_failover_ms': t['implicit_failover_ms'],
                                     'transition_time': TRANSITION_S, 'groups': groups}}]}
        with open(self.cfg_path, 'w') as f:
            json.dump(cfg, f, indent=1)

    def start(self):
        with open(self.log_path, 'a') as f:
            start = f.tell()
        logf = open(self.log_path, 'a')
        self.p = subprocess.Popen(['ip', 'netns', 'exec', self.ns,
                                   os.path.join(ixceph.BUILD, 'tools', 'ix-target'),
                                   '-c', self.cfg_path], stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        self.stopped = False
        end = time.monotonic() + 60
        while time.monotonic() < end:
            with open(self.log_path, errors='replace') as f:
                f.seek(start)
                if 'ix-target: ready' in f.read():
                    break
            if self.p.poll() is not None:
                raise RuntimeError('%s exited (%s) before it was ready' % (self.name,
                                                                           self.p.returncode))
            time.sleep(0.05)
        else:
            raise RuntimeError('%s not ready after 60 s' % self.name)
        self.run.event('gw-start', gw=self.name, pid=self.p.pid)

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.p.pid, sig)

    def kill9(self):
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        if self.p is not None:
            self.p.wait(30)
        self.run.event('gw-exit', gw=self.name, how='SIGKILL')

    def stop(self):
        """SIGTERM (SIGKILL after 15 s); the exit status."""
        if not self.alive():
            return self.p.returncode if self.p else None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.run.event('gw-exit', gw=self.name, how='SIGTERM', status=self.p.returncode)
        return self.p.returncode


LOCK_RE = re.compile(r'^(\d+\.\d+) +\S+ +rbd +(\S+): (open|acquiring|owner|standby|fenced|'
                     r'releasing): (.*)$')
# bs_rbd.c at every open of the image, a rejoin's included: the Ceph client the gateway's I/O
# goes through from then on, and its address (what `ceph osd blocklist ls` names)
CLIENT_RE = re.compile(r'^(\d+\.\d+) +\S+ +rbd +\S+: \d+ bytes, .* client\.(\d+) at \S*?'
                       r'(\d+\.\d+\.\d+\.\d+:\d+/\d+)')


def wait_or_kill(p, secs):
    """Wait secs for process p to end, then kill it."""
    try:
        p.wait(secs)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def lock_events(name, path):
    """The lock-state lines of a gateway's log (ha_own.c's rbd_own_set), and the Ceph client
    each open of the image went through (bs_rbd.c), as history events."""
    out = []
    try:
        with open(path, errors='replace') as f:
            for ln in f:
                m = LOCK_RE.match(ln.rstrip('\n'))
                if m:
                    out.append({'type': 'lock', 'gw': name, 't': float(m.group(1)),
                                'state': m.group(3), 'why': m.group(4)[:200]})
                    continue
                m = CLIENT_RE.match(ln.rstrip('\n'))
                if m:
                    out.append({'type': 'client', 'gw': name, 't': float(m.group(1)),
                                'gid': int(m.group(2)), 'addr': m.group(3)})
    except OSError:
        pass
    return out


# -- the run

class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        out = os.environ.get('IX_OUT', os.path.join(ixceph.ROOT, 'tests', 'out'))
        self.out = os.path.join(out, 'chaos-%d' % args.seed)
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(self.out)
        self.tmp = os.path.join(self.out, 'tmp')
        os.makedirs(self.tmp)
        self.hist_path = os.path.join(self.out, 'history.jsonl')
        self.events = []
        self.mu = threading.Lock()
        self.net = Net()
        self.cl = None
        self.gws = []
        self.client = None
        self.osdwatch = None
        self.busy = set()  # what a fault holds now: 'g1'.., 'ceph'

    def event(self, etype, **kw):
        kw.update(type=etype, t=round(time.time(), 4), m=round(time.monotonic(), 4))
        with self.mu:
            self.events.append(kw)

    # faults: each returns after it healed; event 'fault' with t0/t1
    def fault(self, kind, gi=None):
        """One fault, until it healed; its event: t0 when it took effect (the signal sent,
        the rule in place, the daemon gone), t1 when it was over. "slow-kill" is "slow" with
        the kill always (its event says kind "slow")."""
        at = {}
        always_kill = kind == 'slow-kill'
        if always_kill:
            kind = 'slow'

        def applied():
            at['t0'], at['m0'] = time.time(), time.monotonic()
        target = None
        detail = ''
        try:
            if kind in ('kill', 'stop', 'part-ceph', 'part-client', 'slow'):
                g = self.gws[gi - 1]
                target = g.name
                detail = 'owner' if self.owner() == g.name else 'not owner'
                if kind == 'slow':
                    secs = self.rng.uniform(3, 15)
                    crash = self.rng.uniform(0.5, secs) if always_kill or \
                        self.rng.random() < 0.5 else None
                    # slow-kill: slower, so that a 4 KiB write takes ~0.5 s to leave and the
                    # crash finds one on its way almost whenever it comes (at 512 kbit/s
                    # about half the time: each read of the client's waits behind the
                    # writes before it, so few are ever queued)
                    rate = '64kbit' if always_kill else '512kbit'
                    self.net.slow(gi, True, rate)
                    applied()
                    if crash is not None:
                        time.sleep(crash)
                        g.kill9()
                        self.net.crash_link(gi, rate)
                        detail += ', killed after %.1f s' % crash
                    time.sleep(secs - (crash or 0))
                    self.net.slow(gi, False)
                    if crash is not None:
                        g.start()
                    detail += ', %.1f s%s' % (secs, ' at 64 kbit/s' if always_kill else '')
                elif kind == 'kill':
                    g.kill9()
                    applied()
                    time.sleep(self.rng.uniform(1, 5))
                    g.start()
                elif kind == 'stop':
                    # half of them past every timeout (the client's command timeout, its
                    # replacement timeout, the hand-over), the rest shorter than any
                    ct = client_timeouts()
                    secs = ct['cmd_s'] + ct['replacement_s'] + \
                        TIMEOUTS['handover_timeout_ms'] / 1000 + self.rng.uniform(2, 6) \
                        if self.rng.random() < 0.5 else self.rng.uniform(0.5, 4)
                    g.signal(signal.SIGSTOP)
                    applied()
                    time.sleep(secs)
                    g.signal(signal.SIGCONT)
                    detail += ', %.1f s' % secs
                else:
                    link = 'ceph' if kind == 'part-ceph' else 'cli'
                    # a cut from Ceph shorter than the OSD op timeout is one TCP hides (the
                    # writes in flight land when it heals): longer, so that they fail
                    secs = self.rng.uniform(TIMEOUTS['osd_op_timeout_s'] + 1 if
                                            kind == 'part-ceph' else 3, 15)
                    self.net.cut(gi, link)
                    applied()
                    time.sleep(secs)
                    self.net.heal(gi, link)
                    detail += ', %.1f s' % secs
            elif kind == 'osd-restart':
                target = 'osd.0'
                self.cl.sh('osd-stop')
                applied()
                time.sleep(self.rng.uniform(0.5, 3))
                self.cl.sh('osd-start')
            elif kind == 'mon-restart':
                target = 'mon.a'
                self.cl.mon_restart(applied, self.rng.uniform(0.5, 3))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            detail += ' failed: %s' % e
        if 't0' not in at:
            applied()
        self.event('fault', kind=kind, target=target, t0=round(at['t0'], 4),
                   m0=round(at['m0'], 4), t1=round(time.time(), 4), detail=detail.strip())
        log('fault %s %s (%s) over after %.1f s' % (kind, target or '', detail,
                                                     time.monotonic() - at['m0']))

    def owner(self):
        """The gateway whose log last said "owner" (None: none yet)."""
        best = (0, None)
        for g in self.gws:
            # lock-state lines only (the log's client lines, which have no state, too)
            evs = [e for e in lock_events(g.name, g.log_path) if 'state' in e]
            if evs and evs[-1]['state'] == 'owner' and evs[-1]['t'] > best[0]:
                best = (evs[-1]['t'], g.name)
        return best[1]

    def draw(self, kinds):
        """(kind, gateway or None) that holds nothing already busy."""
        for _ in range(50):
            k = self.rng.choice(kinds)
            if k in ('osd-restart', 'mon-restart'):
                if 'ceph' not in self.busy:
                    return k, None
            else:
                free = [i for i in range(1, NGW + 1) if 'g%d' % i not in self.busy]
                own = self.owner()
                if own and own not in self.busy and self.rng.random() < 0.5:
                    return k, int(own[1:])
                if free:
                    return k, self.rng.choice(free)
        return None, None

    def one(self, kind, gi):
        key = 'ceph' if gi is None else 'g%d' % gi
        self.busy.add(key)
        try:
            self.fault(kind, gi)
        finally:
            self.busy.discard(key)

    def faults(self, end):
        kinds = self.args.faults
        singles = [k for k in kinds if k != 'double'] or ['kill']
        for k in self.args.first:
            # --first: on the holder (a random gateway while none holds the lock yet)
            time.sleep(self.rng.uniform(3, 8))
            if time.monotonic() >= end or self.client.poll() is not None:
                return
            gi = None
            if k not in ('osd-restart', 'mon-restart'):
                own = self.owner()
                gi = int(own[1:]) if own else self.rng.randrange(1, NGW + 1)
            self.one(k, gi)
        while time.monotonic() < end:
            time.sleep(self.rng.uniform(3, 8))
            if time.monotonic() >= end or self.client.poll() is not None:
                break
            k = self.rng.choice(kinds)
            if k == 'double':
                ths = []
                for _ in range(2):
                    kk, gi = self.draw(singles)
                    if kk:
                        key = 'ceph' if gi is None else 'g%d' % gi
                        self.busy.add(key)  # drawn: the second draw takes another target
                        ths.append(threading.Thread(target=self.one, args=(kk, gi)))
                log('double: %d faults at once' % len(ths))
                self.busy.clear()
                for t in ths:
                    t.start()
                for t in ths:
                    t.join()
            else:
                kk, gi = self.draw([k])
                if kk:
                    self.one(kk, gi)

    def setup(self):
        sweep()
        self.net.setup()
        self.cl = NsCluster(self.net.ceph, self.args.store)
        t0 = time.monotonic()
        self.cl.sh('start', '--store', self.args.store, '--addr', BRIDGE_IP)
        self.cl.create_image(IMAGE, '%dM' % IMAGE_MIB)
        log('cluster up in %.0f s' % (time.monotonic() - t0))
        self.start_osdwatch()
        self.gws = [Gw(self, i) for i in range(1, NGW + 1)]
        for g in self.gws:
            g.start()

    def start_osdwatch(self):
        """osdwatch.py in the cluster's namespace: when each blocklist entry entered the OSD
        map and when the OSD had each map (the checker judges a fenced gateway's writes by
        the OSD's enforcement); without Debian's python3-rados the checker falls back to the
        monitor's time of each entry, which is stricter."""
        self.osdwatch_out = os.path.join(self.tmp, 'osdwatch.jsonl')
        self.osdwatch_stop = os.path.join(self.tmp, 'osdwatch.stop')
        py = ixceph.ceph_python()
        if py is None:
            log('osdwatch: no python3-rados; blocklistings judged from the monitor\'s time')
            return
        self.osdwatch = subprocess.Popen(
            ['ip', 'netns', 'exec', self.net.ceph, py, os.path.join(HERE, 'osdwatch.py'),
             self.cl.conf, os.path.join(self.cl.path, 'run', 'osd.0.asok'), self.osdwatch_out,
             self.osdwatch_stop], env=self.cl.env)

    def stop_osdwatch(self):
        """Its lines, once it has seen the blocklist as it is at the end."""
        if self.osdwatch is None:
            return []
        time.sleep(1)
        with open(self.osdwatch_stop, 'w'):
            pass
        wait_or_kill(self.osdwatch, 30)
        self.osdwatch = None
        try:
            with open(self.osdwatch_out) as f:
                return [json.loads(ln) for ln in f if ln.strip()]
        except OSError:
            return []

    def start_client(self):
        ct = client_timeouts()
        cfg = dict(ct, seed=self.args.seed, ops=self.args.ops, blocks=BLOCKS, writer=1,
                   write_ratio=0.7, rate=self.args.rate, target=IQN,
                   pr_key=0x1c4a05 if 'pr' in self.args.traffic else 0, intruder=INTRUDER,
                   intruder_blocks=INTRUDER_BLOCKS, pr_pause_s=0.5, initiator=INITIATOR,
                   history=os.path.join(self.out, 'client.jsonl'),
                   stop_file=os.path.join(self.tmp, 'stop'),
                   paths=[{'name': 'g%d' % i, 'host': '10.79.%d.2' % i, 'port': 3260,
                           'group': i} for i in range(1, NGW + 1)])
        path = os.path.join(self.tmp, 'client.json')
        with open(path, 'w') as f:
            json.dump(cfg, f)
        self.client_cfg = cfg
        self.client = subprocess.Popen(['ip', 'netns', 'exec', self.net.cli, sys.executable,
                                        os.path.join(HERE, 'client.py'), path])

    def finish(self):
        """Stop the client, heal everything, stop the gateways, export the image and the
        blocklist, write the history."""
        with open(self.client_cfg['stop_file'], 'w'):
            pass
        wait_or_kill(self.client, client_timeouts()['op_timeout_s'] + 30)
        for i in range(1, NGW + 1):
            self.net.heal(i, 'ceph')
            self.net.heal(i, 'cli')
        for g in self.gws:
            g.signal(signal.SIGCONT)
        bl = self.cl.blocklist()
        watched = self.stop_osdwatch()
        for ln in bl.splitlines():
            parts = ln.split()
            if len(parts) >= 2 and ':' in parts[0]:
                self.event('blocklist', addr=parts[0], until=' '.join(parts[1:]))
        for g in self.gws:
            st = g.stop()
            if st not in (0, None) and st != -9:
                log('%s exited with %s' % (g.name, st))
        # the cluster may still be recovering from the last fault: a bounded wait for it
        for i in range(3):
            try:
                self.cl.rbd('export', '--no-progress', 'rbd/' + IMAGE,
                            os.path.join(self.out, 'image.bin'), timeout=60)
                break
            except Exception as e:  # noqa: BLE001
                log('rbd export: %s' % str(e)[-200:])
                if i == 2:
                    self.keep_cluster_logs()
                    raise
        evs = list(self.events) + watched
        for g in self.gws:
            evs += lock_events(g.name, g.log_path)
        try:
            with open(self.client_cfg['history']) as f:
                evs += [json.loads(ln) for ln in f if ln.strip()]
        except OSError:
            pass
        evs.sort(key=lambda e: e.get('t0', e.get('t', 0)))
        with open(self.hist_path, 'w') as f:
            f.write(json.dumps({'type': 'config', 't': 0, 'seed': self.args.seed,
                                'duration': self.args.duration, 'faults': self.args.faults,
                                'first': self.args.first,
                                'blocks': BLOCKS, 'block_size': 4096,
                                'intruder_blocks': INTRUDER_BLOCKS, 'timeouts': TIMEOUTS,
                                'client': client_timeouts(),
                                'gateways': {'g%d' % i: '10.77.0.1%d' % i
                                             for i in range(1, NGW + 1)}}) + '\n')
            for e in evs:
                f.write(json.dumps(e) + '\n')

    def keep_cluster_logs(self):
        try:
            shutil.copytree(os.path.join(self.cl.path, 'log'), os.path.join(self.out, 'ceph-log'))
        except OSError as e:
            log('keeping the cluster logs: %s' % e)

    def teardown(self):
        for p in (self.client, self.osdwatch):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        for g in self.gws:
            try:
                if g.alive():
                    g.kill9()
            except Exception:  # noqa: BLE001
                pass
        if self.cl is not None:
            try:
                self.cl.stop()
            except Exception as e:  # noqa: BLE001
                log('cluster stop: %s' % e)
        self.net.teardown()


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--duration', type=float, default=120, help='seconds of faults')
    ap.add_argument('--faults', default=','.join(DEFAULT_FAULTS))
    ap.add_argument('--first', default='', help='faults brought first, in this order, each '
                    'on the lock holder: %s' % ','.join(FIRST))
    ap.add_argument('--ops', type=int, default=1000000, help='at most this many operations')
    ap.add_argument('--traffic', default='io,pr', help='io, or io,pr: persistent '
                    'reservations too')
    ap.add_argument('--store', default=None, choices=('memstore', 'bluestore'),
                    help="the OSD's object store (default: bluestore, a sparse file in "
                    "/dev/shm, when osd-restart is in the mix, else memstore)")
    ap.add_argument('--rate', type=float, default=200, help='at most this many operations a '
                    'second')
    a = ap.parse_args(argv)
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    a.faults = [f for f in a.faults.split(',') if f]
    bad = [f for f in a.faults if f not in FAULTS]
    if bad:
        ap.error('unknown fault(s) %s: choose from %s' % (','.join(bad), ','.join(FAULTS)))
    a.first = [f for f in a.first.split(',') if f]
    bad = [f for f in a.first if f not in FIRST]
    if bad:
        ap.error('unknown --first fault(s) %s: choose from %s' % (','.join(bad), ','.join(FIRST)))
    if a.store is None:
        a.store = 'bluestore' if 'osd-restart' in a.faults + a.first else 'memstore'
    return a


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    if os.geteuid() != 0:
        print('SKIP: chaos.py needs root (network namespaces)', file=sys.stderr)
        return 77
    why = ixceph.skip_reason(tools=('nft', 'ip'))
    if why:
        print('SKIP: ' + why, file=sys.stderr)
        return 77
    r = Run(a)
    log('seed %d, %.0f s, faults %s%s; output in %s' % (
        a.seed, a.duration, ','.join(a.faults),
        ' (first %s)' % ','.join(a.first) if a.first else '', r.out))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    try:
        r.setup()
        r.start_client()
        time.sleep(2)  # the client finds the owner first
        t0 = time.monotonic()
        r.faults(t0 + a.duration)
        log('faults over after %.0f s; finishing' % (time.monotonic() - t0))
        r.finish()
    except BaseException:
        traceback.print_exc()
        if r.cl is not None:
            r.keep_cluster_logs()
        return 2
    finally:
        r.teardown()
    res = check.check_files(r.hist_path, os.path.join(r.out, 'image.bin'))
    print(check.summary(res))
    with open(os.path.join(r.out, 'summary.txt'), 'w') as f:
        f.write(check.summary(res) + '\n')
    return 0 if res['ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
