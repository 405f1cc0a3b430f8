#!/usr/bin/env python3
"""A thin file LUN whose file system fills (issue 27, item 2), through libiscsi.

The test mounts a tmpfs of 40 MiB of its own, puts an 8 MiB filler file and the LUN's backing
file (64 MiB, thin, "thin_threshold": 50) on it, and writes the LUN through libiscsi (its
synchronous API, loaded with ctypes: the real initiator library, which decodes the sense
itself) in 1 MiB WRITE(16)s:
  - once the file system is 60 % full, TEST UNIT READY until the unit attention THIN
    PROVISIONING SOFT THRESHOLD REACHED (6/38/07) comes, within 5 samples (the target
    samples every second, docs/configuration.md);
  - writes go on until the file system is full: libiscsi sees DATA PROTECT, SPACE
    ALLOCATION FAILED WRITE PROTECT (07/27/07), and the soft threshold's UA was seen exactly
    once on the way;
  - the LU still serves reads (libiscsi READ(16) GOOD, the raw client reads back what was
    written), and a write retried while full fails the same way;
  - freeing space, first by deleting the filler file and then by UNMAP of the LU's first
    half through libiscsi, makes the failed write succeed again;
  - the UNMAP took the store below the threshold, which re-arms it: filling past it again
    gives a second 6/38/07;
  - a reload (SIGHUP) raising thin_threshold above the use re-arms it without a unit
    attention; one lowering it again gives 6/38/07 at once;
  - the Logical Block Provisioning log page (LOG SENSE 0x0C) and VPD 0xB2 (raw client) show
    the counts the file system has, in 1 MiB threshold sets, and the threshold; the
    Prometheus endpoint the same bytes (ix_lun_space_*_bytes, ix_lun_thin_threshold_reached),
    and `ix-ctl stats` its row of the store's space.
Needs root (mount); skips (77) with the reason otherwise. The tmpfs is unmounted at the end.
"""

import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

ixdaemon.skip_unless_ix('the thin provisioning soft threshold')

IQN = 'iqn.2026-11.io.ix.test:thin'
INITIATOR = 'iqn.2026-11.io.ix.test:thin-client'
BS = 512
MiB = 1 << 20
FS_MIB = 40
FILLER_MIB = 8
LU_MIB = 64
THRESHOLD = 50
POLL_S = 1.0       # the target's sampling period (TGT_SPACE_POLL_MS)
UA_WAIT_S = 5 * POLL_S
R = ixdaemon.Results('thin_full')


def skip(why):
    print('SKIP: ' + why, file=sys.stderr)
    sys.exit(77)


if os.geteuid() != 0:
    skip('mounting the small tmpfs needs root')
try:
    import ixlibiscsi  # noqa: E402
except OSError as e:
    skip('libiscsi not installed (%s): scripts/deps.sh' % e)


def Libiscsi(port):
    return ixlibiscsi.Libiscsi(port, IQN, INITIATOR)


SOFT = (6, 0x38, 0x07)
FULL = (7, 0x27, 0x07)


def chunk(i):
    return bytes([(i * 37 + 1) & 0xff]) * 16 + struct.pack('>I', i) * ((MiB - 16) // 4)


def fs_used_pct(mnt):
    sv = os.statvfs(mnt)
    return 100.0 * (sv.f_blocks - sv.f_bavail) / sv.f_blocks


class Writer:
    def __init__(self, li, mnt):
        self.li, self.mnt = li, mnt
        self.next = 0          # next chunk to write
        self.soft = 0          # 6/38/07 seen
        self.other = []        # anything else unexpected

    def write_chunk(self, i):
        """Write chunk i; a unit attention is counted and the write retried. Returns
        (status, sense)."""
        for _ in range(4):
            st, sense, err = self.li.write(i * (MiB // BS), chunk(i))
            if st == 2 and sense == SOFT:
                self.soft += 1
                continue
            if st not in (0, 2) or (st == 2 and sense != FULL):
                self.other.append('write %d: status %d %s' % (i, st, err))
            return st, sense
        return st, sense

    def until(self, pct=None):
        """Write chunks in order until the file system is pct % full, or (pct None) until a
        write fails; returns the failing chunk or None."""
        while self.next < LU_MIB:
            if pct is not None and fs_used_pct(self.mnt) >= pct:
                return None
            st, sense = self.write_chunk(self.next)
            if st != 0:
                return self.next if sense == FULL else None
            self.next += 1
        return None

    def wait_soft(self):
        """TEST UNIT READY until the soft threshold's UA (True) or UA_WAIT_S passed."""
        end = time.monotonic() + UA_WAIT_S
        while time.monotonic() < end:
            st, sense, err = self.li.tur()
            if st == 2 and sense == SOFT:
                self.soft += 1
                return True
            if st != 0:
                self.other.append('TEST UNIT READY: status %d %s' % (st, err))
            time.sleep(0.1)
        return False


def raw_session(port):
    s = X.Session('127.0.0.1', port, initiator=INITIATOR + '-raw', target=IQN)
    s.login()
    for _ in range(4):   # the power-on UA, and the soft threshold's if it is reached
        if s.test_unit_ready()[0] == 0:
            break
    return s


def log_counts(s):
    """LOG SENSE page 0x0C: {parameter code: (count, scope)}."""
    st, data, sense, _ = s.scsi(bytes([0x4d, 0, 0x4c, 0, 0, 0, 0, 0x01, 0x00, 0]),
                                read_len=256)
    if st != 0 or len(data) < 4 or data[0] & 0x3f != 0x0c:
        return None
    out, off, end = {}, 4, 4 + struct.unpack_from('>H', data, 2)[0]
    while off + 12 <= min(end, len(data)):
        code, = struct.unpack_from('>H', data, off)
        out[code] = (struct.unpack_from('>I', data, off + 4)[0], data[off + 8] & 3)
        off += 4 + data[off + 3]
    return out


def checks_pages(port, mport, sock, mnt, lu_path):
    s = raw_session(port)
    st, data, _, _ = s.scsi(bytes([0x12, 1, 0xb2, 0, 255, 0]), read_len=255)
    R.check('vpd-b2', st == 0 and data[4] == 11 and data[7] == THRESHOLD and
            data[6] & 7 == 2, 'status %d page %s (want THRESHOLD EXPONENT 11, '
            'PROVISIONING TYPE 2, THRESHOLD PERCENTAGE %d)' % (st, data[:8].hex(), THRESHOLD))
    st, data, _, _ = s.scsi(bytes([0x4d, 0, 0, 0, 0, 0, 0, 0, 255, 0]), read_len=255)
    R.check('log-supported-pages', st == 0 and data[4:6] == b'\x00\x0c',
            'status %d page %s' % (st, data.hex()))
    time.sleep(2 * POLL_S)   # a sample after the last write
    got = log_counts(s)
    sv = os.statvfs(mnt)
    avail = sv.f_bavail * sv.f_frsize // MiB
    used = os.stat(lu_path).st_blocks * 512 // MiB
    ok = got is not None and 1 in got and 2 in got and abs(got[1][0] - avail) <= 1 and \
        abs(got[2][0] - used) <= 1 and got[1][1] == 2 and got[2][1] == 1
    R.check('log-page-0c', ok, 'parameters %s; the file system has %d MiB free, the file '
            'holds %d MiB' % (got, avail, used))
    s.logout()
    s.close()
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % mport, timeout=10) as r:
        body = r.read().decode()
    vals = {}
    for line in body.splitlines():
        for name in ('ix_lun_space_total_bytes', 'ix_lun_space_available_bytes',
                     'ix_lun_space_used_bytes', 'ix_lun_thin_threshold_reached'):
            if line.startswith('%s{target="%s",lun="0"} ' % (name, IQN)):
                vals[name] = int(line.split()[-1])
    sv = os.statvfs(mnt)
    want = {'ix_lun_space_total_bytes': sv.f_blocks * sv.f_frsize,
            'ix_lun_space_available_bytes': sv.f_bavail * sv.f_frsize,
            'ix_lun_space_used_bytes': os.stat(lu_path).st_blocks * 512,
            'ix_lun_thin_threshold_reached': int(fs_used_pct(mnt) >= THRESHOLD)}
    R.check('metrics', len(vals) == 4 and all(abs(vals[k] - want[k]) <= MiB for k in want),
            'Prometheus %s; the file system says %s' % (vals, want))
    p = subprocess.run([os.path.join(os.environ.get('IX_BUILD', os.path.join(HERE, '..', '..',
                                                                          'build')),
                                     'tools', 'ix-ctl'), '-s', sock, 'stats'],
                       capture_output=True, text=True, timeout=30)
    row = [ln.split() for ln in p.stdout.splitlines() if ln.startswith(IQN + ' ')]
    row = row[-1] if row else []
    R.check('ix-ctl-stats', p.returncode == 0 and len(row) == 7 and
            abs(float(row[2]) - FS_MIB) < 0.1 and row[5] == '%d%%' % THRESHOLD and
            row[6] == ('yes' if fs_used_pct(mnt) >= THRESHOLD else 'no'),
            'exit %d, space row %s' % (p.returncode, row))


def reload_threshold(d, li, w):
    """SIGHUP with thin_threshold changed: above the store's use it is re-armed (no unit
    attention), back below it the unit attention comes at once."""
    for pct, want in ((95, None), (THRESHOLD, SOFT)):
        d.cfg['targets'][0]['luns'][0]['thin_threshold'] = pct
        with open(d.cfg_path, 'w') as f:
            json.dump(d.cfg, f)
        line = 'LUN 0: thin_threshold %d%%' % pct
        os.kill(d.pid, signal.SIGHUP)
        end = time.monotonic() + 10
        while line not in d.log_text() and time.monotonic() < end:
            time.sleep(0.1)
        st, sense, err = li.tur()
        if sense == SOFT:
            w.soft += 1
        R.check('reload-%d' % pct, line in d.log_text() and sense == want,
                'log %s "%s"; then TEST UNIT READY status %d sense %s (want %s)' %
                ('has' if line in d.log_text() else 'lacks', line, st, sense, want))


def run(mnt):
    filler = os.path.join(mnt, 'filler')
    lu_path = os.path.join(mnt, 'lu.img')
    with open(filler, 'wb') as f:
        f.write(b'\xf1' * FILLER_MIB * MiB)
    mport = ixtest.free_port()
    sock = os.path.join(mnt, 'ix.sock')
    cfg = {'global': {'threads': 2, 'metrics_listen': '127.0.0.1:%d' % mport,
                      'mgmt_socket': sock},
           'targets': [{'name': IQN, 'luns': [
               {'lun': 0, 'backend': 'file', 'path': lu_path, 'size': '%dM' % LU_MIB,
                'thin': True, 'thin_threshold': THRESHOLD}]}]}
    d = ixdaemon.Daemon('thin_full', cfg)
    d.start()
    try:
        li = Libiscsi(d.port)
        w = Writer(li, mnt)
        w.until(pct=THRESHOLD + 10)
        R.check('below-no-ua', w.soft == 0, '%d soft threshold UAs below the threshold' % w.soft)
        ok = w.wait_soft()
        R.check('soft-threshold-ua', ok, '6/38/07 %s within %.0f s of the file system '
                'reaching %.0f %%' % ('seen' if ok else 'not seen', UA_WAIT_S,
                                      fs_used_pct(mnt)))
        failed = w.until()
        R.check('enospc-seen-by-libiscsi', failed is not None,
                'wrote %d MiB, file system %.0f %% full, 07/27/07 %s' %
                (w.next, fs_used_pct(mnt), 'seen' if failed is not None else 'not seen'))
        R.check('soft-threshold-once', w.soft == 1,
                '6/38/07 seen %d times while filling (want 1)' % w.soft)
        if failed is None:
            return d
        st, sense, err = li.read(0, 8 * BS)
        R.check('reads-when-full', st == 0, 'READ(16) status %d %s' % (st, err))
        s = raw_session(d.port)
        st, data, _, _ = s.scsi(X.read10(0, 128), read_len=128 * BS)
        R.check('data-when-full', st == 0 and data == chunk(0)[:128 * BS],
                'read of LBA 0-127 status %d, %s' % (st, 'same' if data == chunk(0)[:128 * BS]
                                                     else 'differs'))
        s.logout()
        s.close()
        st, sense = w.write_chunk(failed)
        R.check('stays-full', st == 2 and sense == FULL,
                'retried write: status %d sense %s' % (st, sense))

        os.unlink(filler)
        st, sense = w.write_chunk(failed)
        R.check('write-after-delete', st == 0,
                'write after deleting the %d MiB filler: status %d sense %s' %
                (FILLER_MIB, st, sense))
        w.next = failed + 1
        failed = w.until()
        R.check('full-again', failed is not None, '07/27/07 %s after %d MiB' %
                ('seen' if failed is not None else 'not seen', w.next))
        half = failed * 3 // 4
        st, sense, err = li.unmap(0, half * (MiB // BS))
        st2, sense2 = w.write_chunk(failed)
        R.check('write-after-unmap', st == 0 and st2 == 0,
                'UNMAP of %d MiB status %d %s; the write then status %d sense %s' %
                (half, st, err, st2, sense2))
        R.check('below-after-unmap', fs_used_pct(mnt) < THRESHOLD,
                'file system %.0f %% full after the UNMAP' % fs_used_pct(mnt))
        # re-armed by a sample below the threshold; the UNMAP's blocks filled again
        time.sleep(2 * POLL_S)
        soft = w.soft
        st, sense, err = li.tur()
        R.check('no-ua-going-down', st == 0, 'TEST UNIT READY status %d %s' % (st, err))
        for i in range(half):
            if fs_used_pct(mnt) >= THRESHOLD + 10:
                break
            w.write_chunk(i)
        ok = w.wait_soft()
        R.check('re-armed', ok and w.soft == soft + 1,
                'a second 6/38/07 %s after the store went below the threshold and past it '
                'again (%d in all)' % ('seen' if ok else 'not seen', w.soft))
        reload_threshold(d, li, w)
        R.check('no-other-errors', not w.other, '; '.join(w.other[:5]))
        li.close()
        checks_pages(d.port, mport, sock, mnt, lu_path)
    except Exception:
        traceback.print_exc()
        R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1])
    return d


def main():
    mnt = tempfile.mkdtemp(prefix='ix-thin-full.')
    p = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%dm' % FS_MIB, 'ix-thin', mnt],
                       capture_output=True, text=True)
    if p.returncode != 0:
        os.rmdir(mnt)
        skip('mount -t tmpfs failed: %s' % (p.stderr.strip() or p.returncode))
    d = None
    try:
        d = run(mnt)
    finally:
        if d:
            R.check('daemon-alive', d.alive(), 'pid %s' % d.pid)
            for prob in d.stop():
                R.report('FAIL', 'shutdown', prob)
        subprocess.run(['umount', mnt], check=False)
        os.rmdir(mnt)
    sys.exit(1 if R.failed else 0)


main()
