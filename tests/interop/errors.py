#!/usr/bin/env python3
"""Backend errors become CHECK CONDITION with the right sense (issue 5), seen by initiators.

ix-target runs (with --testing) a LUN on the test-only "error" backend (docs/configuration.md):
RAM storage whose I/O fails by LBA range, every Nth I/O, or completes late. Checked with the raw
client (tests/lib/ixiscsi.py), which sees the exact sense bytes:
  read EIO      -> MEDIUM ERROR, UNRECOVERED READ ERROR (03/11/00)
  write EIO     -> MEDIUM ERROR, WRITE ERROR (03/0C/00)
  write ENOSPC  -> DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (07/27/07)
  flush EIO     -> SYNCHRONIZE CACHE gets MEDIUM ERROR, WRITE ERROR
  every 3rd     -> exactly every third matching read fails
  slow I/O      -> the command takes the configured delay, while another session's commands
                   are answered at once (a slow backend does not stall the worker)
never a silent success, never a crash; I/O outside the ranges keeps working and reads back what
was written. Then QEMU (libiscsi) as a real initiator: its read of the EIO range and write to
the ENOSPC range fail, a write and read elsewhere succeed. And the configuration is refused
without --testing.
ix only (the error backend is an ix-target feature): exits 77 against other peers.
"""

import os
import shutil
import struct
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402

ixdaemon.skip_unless_ix('the error backend')

IQN = 'iqn.2026-11.io.ix.test:errors'
INITIATOR = 'iqn.2026-11.io.ix.test:errors-client'
BS = 512
CFG = {
    'global': {'threads': 2},
    'targets': [{
        'name': IQN,
        'luns': [
            {'lun': 0, 'backend': 'error', 'size': '16M', 'errors': [
                {'op': 'read', 'error': 'eio', 'lba': 100, 'blocks': 8},
                {'op': 'write', 'error': 'eio', 'lba': 200, 'blocks': 8},
                {'op': 'write', 'error': 'enospc', 'lba': 300, 'blocks': 8},
                {'op': 'any', 'error': 'none', 'delay_ms': 400, 'lba': 400, 'blocks': 8},
                {'op': 'read', 'error': 'eio', 'lba': 500, 'blocks': 8, 'every': 3},
            ]},
            {'lun': 1, 'backend': 'error', 'size': '1M', 'write_cache': True, 'errors': [
                {'op': 'flush', 'error': 'eio'},
            ]},
        ],
    }],
}
R = ixdaemon.Results('errors')


def sense_of(sense):
    """(key, asc, ascq) of fixed or descriptor sense."""
    if len(sense) >= 4 and sense[0] & 0x7f in (0x72, 0x73):
        return sense[1] & 0xf, sense[2], sense[3]
    if len(sense) >= 14:
        return sense[2] & 0xf, sense[12], sense[13]
    return None


def expect_sense(name, res, want):
    st, _, sense, _ = res
    got = sense_of(sense) if st == 2 else None
    R.check(name, st == 2 and got == want,
            'status 0x%02x sense %s (want CHECK CONDITION %02x/%02x/%02x)' %
            (st, '%02x/%02x/%02x' % got if got else sense.hex() or '-', *want))


def session(lun=0):
    s = X.Session('127.0.0.1', D.port, initiator=INITIATOR, target=IQN, lun=lun)
    s.login()
    s.test_unit_ready()  # consume the power-on unit attention
    s.test_unit_ready()
    return s


def raw_checks():
    s = session()
    pat = bytes((i * 7) & 0xff for i in range(8 * BS))
    expect_sense('read-eio', s.scsi(X.read10(100, 8), read_len=8 * BS), (0x3, 0x11, 0x00))
    expect_sense('read-eio-overlap', s.scsi(X.read10(96, 8), read_len=8 * BS), (0x3, 0x11, 0x00))
    expect_sense('write-eio', s.scsi(X.write10(200, 8), write_data=pat), (0x3, 0x0c, 0x00))
    expect_sense('write-enospc', s.scsi(X.write10(300, 8), write_data=pat), (0x7, 0x27, 0x07))
    st, _, sense, _ = s.scsi(X.write10(1000, 8), write_data=pat)
    st2, data, _, _ = s.scsi(X.read10(1000, 8), read_len=8 * BS)
    R.check('outside-ranges', st == 0 and st2 == 0 and data == pat,
            'write 0x%02x, read 0x%02x, data %s' % (st, st2, 'same' if data == pat else 'differs'))
    st, _, _, _ = s.scsi(X.read10(100 - 8, 8), read_len=8 * BS)
    R.check('next-to-range', st == 0, 'read of LBA 92-99 status 0x%02x' % st)

    fails = []
    for i in range(6):
        st, _, sense, _ = s.scsi(X.read10(500, 1), read_len=BS)
        if st == 2:
            fails.append((i + 1, sense_of(sense)))
    R.check('every-3rd', fails == [(3, (3, 0x11, 0)), (6, (3, 0x11, 0))],
            'failed reads (n, sense): %s' % fails)

    # slow I/O on one session; another session's command meanwhile
    other = session()
    t0 = time.monotonic()
    b = s.scsi_bhs(X.read10(400, 8), 8 * BS, read=True)
    s.cmdsn = (s.cmdsn + 1) & 0xffffffff
    s.conn.send_pdu(b)
    time.sleep(0.05)
    t1 = time.monotonic()
    st_o, _, _, _ = other.scsi(X.read10(0, 8), read_len=8 * BS)
    t_other = time.monotonic() - t1
    data = bytearray()
    while True:
        pdu = s.recv(5)
        if pdu.opcode == X.OP_DATA_IN:
            data += pdu.data
            if pdu.flags & 1:
                st = pdu.u8(3)
                break
        elif pdu.opcode == X.OP_SCSI_RSP:
            st = pdu.u8(3)
            break
    t_slow = time.monotonic() - t0
    R.check('slow-io', st == 0 and t_slow >= 0.39, 'status 0x%02x after %.3f s (delay 0.4 s)' %
            (st, t_slow))
    R.check('slow-io-others-unaffected', st_o == 0 and t_other < 0.3,
            'other session answered in %.3f s while the slow read was pending' % t_other)
    other.logout()
    other.close()

    st, _, _ = s.test_unit_ready() + (None,)
    R.check('session-survives', st == 0, 'TEST UNIT READY status 0x%02x after the errors' % st)
    s.logout()
    s.close()

    s1 = session(lun=1)
    expect_sense('sync-cache-eio', s1.scsi(bytes([0x35]) + bytes(9)), (0x3, 0x0c, 0x00))
    s1.logout()
    s1.close()


def qemu_checks():
    if not shutil.which('qemu-io'):
        R.report('SKIP', 'qemu', 'qemu-io not installed (run scripts/deps.sh)')
        return
    url = 'iscsi://127.0.0.1:%d/%s/0' % (D.port, IQN)

    def qio(cmd):
        p = subprocess.run(['timeout', '60', 'qemu-io', '-f', 'raw', '-c', cmd, url],
                           capture_output=True, text=True)
        out = (p.stdout + p.stderr).strip().replace('\n', ' | ')
        return p.returncode, out

    rc, out = qio('read %d 4096' % (100 * BS))
    R.check('qemu-read-eio', 'failed' in out and 'Input/output error' in out, out[:200])
    rc, out = qio('write -P 0x33 %d 4096' % (300 * BS))
    R.check('qemu-write-enospc', 'failed' in out, out[:200])
    rc, out = qio('write -P 0x44 %d 65536' % (4096 * BS))
    rc2, out2 = qio('read -P 0x44 %d 65536' % (4096 * BS))
    R.check('qemu-io-elsewhere', rc == 0 and 'failed' not in out and rc2 == 0 and
            'failed' not in out2 and 'Pattern verification failed' not in out2,
            (out + ' || ' + out2)[:300])


def refused_without_testing():
    d = ixdaemon.Daemon('errors-no-testing', CFG, testing=False)
    try:
        d.start(ready_timeout=10)
        ok, detail = False, 'started without --testing'
    except RuntimeError as e:
        ok = 'without --testing' in str(e)
        detail = str(e).splitlines()[-1][:200]
    d.stop()
    R.check('refused-without-testing', ok, detail)


D = ixdaemon.Daemon('errors', CFG, testing=True)
try:
    D.start()
    raw_checks()
    qemu_checks()
except Exception:
    traceback.print_exc()
    R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1])
R.check('daemon-alive', D.alive(), 'pid %s' % D.pid)
for p in D.stop():
    R.report('FAIL', 'shutdown', p)
refused_without_testing()
sys.exit(1 if R.failed else 0)
