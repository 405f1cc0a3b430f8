#!/usr/bin/env python3
"""Durability of acknowledged writes on file LUNs: kill -9 right after the acknowledgements,
restart, read everything back; and, from the kernel's side, that each acknowledgement came
after the data path had asked the kernel to make the data durable.

The daemon runs on a config with two file LUNs in a temp dir under /tmp:
  LUN 0  write_cache true  (WCE=1: plain writes may be acknowledged before they are durable)
  LUN 1  write_cache false (every write durable before it is acknowledged)
Through the raw client (tests/lib/ixiscsi.py), one command at a time:
  A. WRITE(10)/WRITE(16) with FUA on LUN 0: many 4 KiB writes and a few of 1 MiB (R2T);
  B. plain WRITE(10) on LUN 0, then one SYNCHRONIZE CACHE(10);
  C. plain WRITE(10) on LUN 1;
then SIGKILL the daemon as soon as the last acknowledgement is in, start it again on the same
files and read back every acknowledged block.

What the kill can and cannot show: the kernel survives a kill -9, and so does its page cache,
so the read-back proves that every acknowledged write had reached the kernel (no data held in
the daemon, nothing acknowledged before it was written) and is found again after a restart. It
does not prove the data reached stable storage. For that part the test traces the kernel's
ext4 fsync path (tracepoints ext4:ext4_sync_file_enter/exit, filtered to the LUN files' inodes,
in a private tracefs instance with the monotonic clock) while the writes run, and checks:
  - each FUA write (A) and each write to LUN 1 (C) was acknowledged only after one more
    completed sync of its file (RWF_DSYNC and fdatasync both enter ext4_sync_file, which
    flushes the disk's write cache);
  - the SYNCHRONIZE CACHE acknowledgement came after a sync of LUN 0's file that began after
    the last plain write of B had been acknowledged;
  - the plain writes of B caused no sync at all (the trace tells synchronous writes from plain
    ones, so the checks above can fail).
Where tracefs, the ext4 events or an ext4 /tmp are missing, those checks SKIP with the reason.
Even then this proves what the kernel was asked for, not that the disk honours its flushes, and
no power is cut: see docs/testing.md. tests/unit/scsi/test_durability.c checks the same flags
on the io_uring submissions themselves.

ix only (it restarts the daemon on the same files); exits 77 against other peers.
"""

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
LIB = os.path.join(ROOT, 'tests', 'lib')
sys.path.insert(0, LIB)
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

HOST = os.environ.get('IX_HOST', '127.0.0.1')
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
OUT = os.environ.get('IX_OUT', os.path.join(ROOT, 'tests', 'out'))
IQN = 'iqn.2024-01.org.ix.test:durability'
INITIATOR = 'iqn.2024-01.org.ix.test:durability-client'
TRACEFS = '/sys/kernel/tracing'
EVENTS = ('ext4_sync_file_enter', 'ext4_sync_file_exit')
SIZES = {0: 64 << 20, 1: 16 << 20}
BS = 512
report = ixtest.Reporter('durability')


def write_config(path, port, files):
    luns = [{'lun': lun, 'backend': 'file', 'path': files[lun], 'size': SIZES[lun],
             'write_cache': lun == 0} for lun in (0, 1)]
    cfg = {'portals': [{'name': 'default', 'address': HOST, 'port': port}],
           'targets': [{'name': IQN, 'luns': luns}]}
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=2)


def mount_tracefs():
    """Mount tracefs on TRACEFS if it is not mounted yet (a fresh machine has it unmounted).
    True if this call mounted it (the caller unmounts it again), False if it was there, or the
    reason it cannot be had."""
    if os.path.isdir(os.path.join(TRACEFS, 'events')):
        return False
    if not os.path.isdir(TRACEFS):
        return '%s does not exist: kernel without tracefs' % TRACEFS
    if os.geteuid() != 0:
        return 'tracefs is not mounted on %s and only root can mount it' % TRACEFS
    r = subprocess.run(['mount', '-t', 'tracefs', 'nodev', TRACEFS], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return 'mount -t tracefs nodev %s failed: %s' % (TRACEFS, r.stderr.strip())
    return True


class Trace:
    """ext4 fsync tracepoints for a set of inodes, in a private tracefs instance."""

    def __init__(self, files):
        self.dir = None
        self.why = None
        self.mounted = False
        st = [os.stat(f) for f in files]
        self.keys = {(os.major(s.st_dev), os.minor(s.st_dev), s.st_ino) for s in st}
        fstype = subprocess.run(['stat', '-f', '-c', '%T', files[0]], capture_output=True,
                                text=True).stdout.strip()
        if fstype != 'ext2/ext3':  # how stat(1) names ext4 too
            self.why = 'the LUN files are on %s, not ext4: no ext4 sync tracepoints' % fstype
            return
        self.mounted = mount_tracefs()
        if isinstance(self.mounted, str):
            self.why = self.mounted
            self.mounted = False
            return
        if not os.path.isdir(os.path.join(TRACEFS, 'events', 'ext4', EVENTS[0])):
            self.why = '%s/events/ext4/%s not available (kernel without ext4 tracepoints?)' % (
                TRACEFS, EVENTS[0])
            return
        d = os.path.join(TRACEFS, 'instances', 'ix-durability-%d' % os.getpid())
        try:
            os.mkdir(d)
            self.dir = d
            self._w('trace_clock', 'mono')
            flt = ' || '.join('ino == %d' % s.st_ino for s in st)
            for e in EVENTS:
                self._w('events/ext4/%s/filter' % e, flt)
                self._w('events/ext4/%s/enable' % e, '1')
        except OSError as e:
            self.why = 'cannot set up a tracefs instance: %s' % e
            self.close()

    def _w(self, rel, v):
        with open(os.path.join(self.dir, rel), 'w') as f:
            f.write(v)

    def events(self):
        """[(timestamp, 'enter'|'exit', ino)] for our inodes, in order."""
        out = []
        with open(os.path.join(self.dir, 'trace')) as f:
            for line in f:
                m = re.search(r' ([0-9]+\.[0-9]+): ext4_sync_file_(enter|exit): dev (\d+),(\d+) '
                              r'ino (\d+)', line)
                if m and (int(m.group(3)), int(m.group(4)), int(m.group(5))) in self.keys:
                    out.append((float(m.group(1)), m.group(2), int(m.group(5))))
        return out

    def close(self):
        if not self.dir:
            self.unmount()
            return
        for e in EVENTS:
            try:
                self._w('events/ext4/%s/enable' % e, '0')
            except OSError:
                pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass
        self.dir = None
        self.unmount()

    def unmount(self):
        if self.mounted:
            subprocess.run(['umount', TRACEFS], capture_output=True)
            self.mounted = False


def cdb_write(lba, blocks, fua, sixteen=False):
    if sixteen:
        return bytes([0x8a, 0x08 if fua else 0]) + struct.pack('>QIBB', lba, blocks, 0, 0)
    return bytes([0x2a, 0x08 if fua else 0]) + struct.pack('>IBHB', lba, 0, blocks, 0)


def cdb_read(lba, blocks):
    return bytes([0x88, 0]) + struct.pack('>QIBB', lba, blocks, 0, 0)


def scsi_ok(s, lun, what, cdb, **kw):
    s.lun = lun
    st, data, sense, _ = s.scsi_retry_ua(cdb, **kw)
    if st != 0:
        raise X.ProtocolError('%s on LUN %d: status 0x%02x sense %s' % (what, lun, st,
                                                                         sense.hex()))
    return data


def run_writes(s):
    """The three phases; returns (writes, marks). writes: dicts with lun, lba, data, phase,
    acked (monotonic time of the acknowledgement)."""
    writes = []
    marks = {}
    rnd = random.Random()
    # 4 KiB slots at random places, and 1 MiB regions at the end of LUN 0: nothing overlaps.
    slots0 = rnd.sample(range((SIZES[0] - (8 << 20)) // 4096), 600)
    slots1 = rnd.sample(range(SIZES[1] // 4096), 100)

    def w(lun, lba, data, fua, phase, sixteen=False):
        scsi_ok(s, lun, 'WRITE', cdb_write(lba, len(data) // BS, fua, sixteen), write_data=data)
        writes.append({'lun': lun, 'lba': lba, 'data': data, 'phase': phase,
                       'acked': time.monotonic()})

    marks['A0'] = time.monotonic()
    for i in range(300):
        w(0, slots0[i] * 8, os.urandom(4096), True, 'A', sixteen=i % 3 == 0)
    for i in range(4):
        w(0, (SIZES[0] - (8 << 20)) // BS + i * 2048, os.urandom(1 << 20), True, 'A')
    for i in range(300, 600):
        w(0, slots0[i] * 8, os.urandom(4096), False, 'B')
    scsi_ok(s, 0, 'SYNCHRONIZE CACHE', bytes([0x35]) + bytes(9))
    marks['sync'] = time.monotonic()
    for i in range(100):
        w(1, slots1[i] * 8, os.urandom(4096), False, 'C')
    return writes, marks


def check_trace(ev, writes, marks, inos):
    """The kernel-side checks (see the module docstring)."""
    exits = {ino: [t for t, kind, i in ev if kind == 'exit' and i == ino] for ino in inos}
    enters0 = [t for t, kind, i in ev if kind == 'enter' and i == inos[0]]

    def syncs(ino, t0, t1):
        return sum(1 for t in exits[ino] if t0 <= t < t1)

    # A and C: the k-th synchronous write's ack follows at least k completed syncs since the
    # phase began
    for phase, ino in (('A', inos[0]), ('C', inos[1])):
        ws = [w for w in writes if w['phase'] == phase]
        start = marks['A0'] if phase == 'A' else marks['sync']
        late = [k for k, w in enumerate(ws, 1) if syncs(ino, start, w['acked']) < k]
        name = 'fua-synced-before-ack' if phase == 'A' else 'write-through-synced-before-ack'
        if late:
            k = late[0]
            report('FAIL', name, 'write %d of %d acknowledged after only %d syncs of its file' % (
                k, len(ws), syncs(ino, start, ws[k - 1]['acked'])))
        else:
            report('PASS', name, '%d writes, each acknowledged after its own completed sync '
                   '(%d syncs traced)' % (len(ws), syncs(ino, start, ws[-1]['acked'])))
    # B: no sync while the plain writes ran
    b = [w for w in writes if w['phase'] == 'B']
    a_end = [w for w in writes if w['phase'] == 'A'][-1]['acked']
    n = syncs(inos[0], a_end, b[-1]['acked'])
    report('PASS' if n == 0 else 'FAIL', 'trace-tells-plain-writes',
           '%d syncs during %d plain writes with the write cache on' % (n, len(b)))
    # SYNCHRONIZE CACHE: a sync that began after the last plain write's ack, done before the ack
    ok = [t for t in enters0 if b[-1]['acked'] <= t < marks['sync']]
    done = syncs(inos[0], b[-1]['acked'], marks['sync'])
    if ok and done:
        report('PASS', 'sync-cache-synced-before-ack', 'fdatasync of LUN 0 began %.1f ms after '
               'the last plain write was acknowledged and ended before the SYNCHRONIZE CACHE '
               'acknowledgement' % ((ok[0] - b[-1]['acked']) * 1000))
    else:
        report('FAIL', 'sync-cache-synced-before-ack', 'no completed sync of LUN 0 between the '
               'last plain write and the SYNCHRONIZE CACHE acknowledgement')


def verify(s, writes):
    for phase, name in (('A', 'fua-writes-survive-kill9'),
                        ('B', 'sync-cache-writes-survive-kill9'),
                        ('C', 'write-through-writes-survive-kill9')):
        ws = [w for w in writes if w['phase'] == phase]
        bad = []
        for w in ws:
            got = scsi_ok(s, w['lun'], 'READ(16)', cdb_read(w['lba'], len(w['data']) // BS),
                          read_len=len(w['data']))
            if got != w['data']:
                bad.append(w['lba'])
        nbytes = sum(len(w['data']) for w in ws)
        if bad:
            report('FAIL', name, '%d of %d acknowledged writes differ after restart (LBA %s)' % (
                len(bad), len(ws), ', '.join(str(x) for x in bad[:5])))
        else:
            report('PASS', name, 'all %d acknowledged writes (%d KiB) read back intact' % (
                len(ws), nbytes >> 10))


def main():
    if os.environ.get('IX_PEER', 'ix') != 'ix':
        print('SKIP: the kill -9 / restart test drives ix-target itself (peer is %s)' %
              os.environ.get('IX_PEER'), file=sys.stderr)
        return 77
    if not os.access(os.path.join(BUILD, 'tools', 'ix-target'), os.X_OK):
        print('SKIP: ix-target not built in %s' % BUILD, file=sys.stderr)
        return 77
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='ixtest.durability.', dir='/tmp')
    daemon = trace = None
    try:
        files = {lun: os.path.join(tmp, 'lun%d.img' % lun) for lun in (0, 1)}
        for lun, f in files.items():
            with open(f, 'wb') as fh:
                fh.truncate(SIZES[lun])
        cfg = os.path.join(tmp, 'ix-target.json')
        write_config(cfg, ixtest.free_port(), files)
        daemon = ixtest.Daemon(cfg, 'durability.ix-target.log', BUILD, OUT)
        s = X.Session(HOST, json.load(open(cfg))['portals'][0]['port'], initiator=INITIATOR,
                      target=IQN, timeout=20)
        s.login()
        for lun in (0, 1):  # the power-on unit attentions
            scsi_ok(s, lun, 'TEST UNIT READY', bytes(6))
        trace = Trace([files[0], files[1]])
        writes, marks = run_writes(s)
        daemon.kill9()
        s.close()
        report('PASS', 'kill9', 'SIGKILL right after the last of %d acknowledgements '
               '(%d KiB)' % (len(writes) + 1, sum(len(w['data']) for w in writes) >> 10))
        if trace.dir:
            ev = trace.events()
            trace.close()
            inos = [os.stat(files[lun]).st_ino for lun in (0, 1)]
            check_trace(ev, writes, marks, inos)
        else:
            for n in ('fua-synced-before-ack', 'sync-cache-synced-before-ack',
                      'write-through-synced-before-ack', 'trace-tells-plain-writes'):
                report('SKIP', n, trace.why)

        write_config(cfg, ixtest.free_port(), files)
        daemon = ixtest.Daemon(cfg, 'durability.ix-target-restarted.log', BUILD, OUT)
        s = X.Session(HOST, json.load(open(cfg))['portals'][0]['port'], initiator=INITIATOR,
                      target=IQN, timeout=20)
        s.login()
        verify(s, writes)
        s.logout()
        s.close()
        rc = daemon.stop()
        daemon = None
        report('PASS' if rc == 0 else 'FAIL', 'restarted-daemon-stops',
               'exit status %s after SIGTERM' % rc)
    finally:
        if trace:
            trace.close()
        if daemon:
            daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if report.failed else 0


if __name__ == '__main__':
    report.main(main)
