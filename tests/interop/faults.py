#!/usr/bin/env python3
"""The fault-injecting datamover (src/transport/fault), driven from a test configuration.

Each case starts ix-target --testing with one "testing.transport_faults" setting and checks,
with the raw client (tests/lib/ixiscsi.py) counting every byte, that the fault happens exactly
as configured and that the target keeps serving afterwards:
  reset      the connection is reset after exactly reset_after_bytes bytes
  drop       NOP-In answers are dropped (opcode filter), SCSI responses still arrive
  duplicate  every SCSI Response arrives twice, byte for byte
  corrupt    the NOP-In differs from the expected one in exactly the bit the target logged
  delay      responses wait the configured time and keep their order
  truncate   a Data-In is cut part-way and the connection reset; new logins still work
  qemu       QEMU (libiscsi) writes and verifies 4 MiB through a target delaying 20% of PDUs
ix only: exits 77 against other peers.
"""

import os
import re
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

ixdaemon.skip_unless_ix('transport fault injection')

IQN = 'iqn.2026-11.io.ix.test:faults'
INITIATOR = 'iqn.2026-11.io.ix.test:faults-client'
R = ixdaemon.Results('faults')


class CountingSock:
    """A socket that counts the bytes received through it."""

    def __init__(self, sock):
        self.s = sock
        self.received = 0

    def recv(self, n, *a):
        d = self.s.recv(n, *a)
        self.received += len(d)
        return d

    def __getattr__(self, name):
        return getattr(self.s, name)


def config(faults):
    return {'global': {'threads': 1, 'nop_interval_ms': 0},
            'targets': [{'name': IQN,
                         'luns': [{'lun': 0, 'backend': 'ram', 'size': '16M'}]}],
            'testing': {'transport_faults': dict(faults, seed=7)}}


def session(d, ua=True):
    """Logged in; with ua, the power-on unit attention consumed by a TEST UNIT READY."""
    s = X.Session('127.0.0.1', d.port, initiator=INITIATOR, target=IQN, timeout=5)
    s.conn.sock = CountingSock(s.conn.sock)
    s.login()
    if ua:
        s.test_unit_ready()
    return s


def run_case(name, faults, fn):
    d = ixdaemon.Daemon('faults-' + name, config(faults), testing=True)
    try:
        d.start()
        fn(d)
    except Exception:
        traceback.print_exc()
        R.report('FAIL', name, 'exception: ' +
                 traceback.format_exc().strip().splitlines()[-1][:200])
    alive = d.alive()
    problems = d.stop()
    if not alive or problems:
        R.report('FAIL', name + '.daemon', '; '.join(problems) or 'died')


def drain(s, timeout=3):
    """Receive until the connection closes; returns 'closed' or 'timeout'."""
    try:
        while True:
            s.conn.recv_pdu(timeout)
    except X.Closed:
        return 'closed'
    except X.Timeout:
        return 'timeout'


def case_reset(d):
    s = session(d)
    for _ in range(4):  # 32 KiB reads until the connection goes
        b = s.scsi_bhs(X.read10(0, 64), 64 * 512, read=True)
        s.cmdsn = (s.cmdsn + 1) & 0xffffffff
        try:
            s.conn.send_pdu(b)
        except X.Closed:
            break
    how = drain(s)
    got = s.conn.sock.received
    R.check('reset', how == 'closed' and got == 5000,
            'connection %s after %d bytes (reset_after_bytes 5000)' % (how, got))
    s2 = session(d)
    st, _ = s2.test_unit_ready()
    R.check('reset.recovers', st in (0, 2), 'new session after the reset: TUR status 0x%02x' % st)
    s2.close()


def case_drop(d):
    s = session(d)
    try:
        s.nop(timeout=1.5)
        R.report('FAIL', 'drop', 'the NOP-In arrived although every NOP-In is dropped')
    except X.Timeout:
        st, _ = s.test_unit_ready()
        R.check('drop', st in (0, 2), 'NOP-In dropped, TEST UNIT READY answered (0x%02x)' % st)
    s.close()
    R.check('drop.logged', 'dropping NOP-In' in d.log_text(),
            'the target logs each dropped PDU')


def case_duplicate(d):
    s = session(d, ua=False)
    b = s.scsi_bhs(bytes(6), 0)
    s.cmdsn = (s.cmdsn + 1) & 0xffffffff
    s.conn.send_pdu(b)
    p1 = s.conn.recv_pdu()
    p2 = s.conn.recv_pdu()
    R.check('duplicate', p1.opcode == X.OP_SCSI_RSP and p1.bhs == p2.bhs and p1.data == p2.data,
            'first %s, second %s' % (p1.describe(), p2.describe()))
    s.close()


def case_corrupt(d):
    s = session(d)
    b = s.nop_bhs(immediate=True)
    itt = struct.unpack_from('>I', b.b, 16)[0]
    s.conn.send_pdu(b)
    p = s.conn.recv_pdu()
    m = re.search(r'flipped bit (\d) of byte (\d+) of a NOP-In', d.log_text())
    if not m:
        R.report('FAIL', 'corrupt', 'no "flipped bit" line in the target log')
        return
    bit, at = int(m.group(1)), int(m.group(2))
    want = bytearray(48)
    want[0] = X.OP_NOP_IN
    want[1] = 0x80
    struct.pack_into('>II', want, 16, itt, 0xffffffff)
    known = list(range(0, 4)) + list(range(8, 24)) + list(range(36, 48))
    diffs = [(i, (p.bhs[i] ^ want[i])) for i in known if p.bhs[i] != want[i]]
    expect = [(at, 1 << bit)] if at in known else []
    R.check('corrupt', diffs == expect,
            'logged bit %d of byte %d; differences in the known bytes: %s' % (bit, at, diffs))
    s.close()


def case_delay(d):
    s = session(d)
    itts = []
    t0 = time.monotonic()
    for _ in range(3):
        b = s.scsi_bhs(bytes(6), 0)
        itts.append(struct.unpack_from('>I', b.b, 16)[0])
        s.cmdsn = (s.cmdsn + 1) & 0xffffffff
        s.conn.send_pdu(b)
    got = []
    for _ in range(3):
        got.append(s.conn.recv_pdu().itt)
    dt = time.monotonic() - t0
    R.check('delay', got == itts and dt >= 0.29,
            'responses after %.3f s (delay 300 ms), order %s' %
            (dt, 'kept' if got == itts else 'changed: %s vs %s' % (got, itts)))
    s.close()


def case_truncate(d):
    s = session(d)
    before = s.conn.sock.received
    b = s.scsi_bhs(X.read10(0, 16), 16 * 512, read=True)
    s.cmdsn = (s.cmdsn + 1) & 0xffffffff
    s.conn.send_pdu(b)
    how = drain(s)
    got = s.conn.sock.received - before
    m = re.search(r'truncating SCSI Data-In after (\d+) of its (\d+) bytes', d.log_text())
    R.check('truncate', how == 'closed' and m is not None and got == int(m.group(1)) and
            got < int(m.group(2)),
            'connection %s after %d bytes of the read; target log: %s' %
            (how, got, m.group(0) if m else 'no truncation line'))
    s2 = session(d)
    st, _ = s2.test_unit_ready()
    R.check('truncate.recovers', st in (0, 2), 'new session: TUR status 0x%02x' % st)
    s2.close()


def case_qemu(d):
    if not shutil.which('qemu-io'):
        R.report('SKIP', 'qemu', 'qemu-io not installed (run scripts/deps.sh)')
        return
    url = 'iscsi://127.0.0.1:%d/%s/0' % (d.port, IQN)
    cmds = []
    for i in range(8):
        cmds += ['-c', 'write -P 0x%02x %d 512k' % (0x41 + i, i * 524288)]
    for i in range(8):
        cmds += ['-c', 'read -P 0x%02x %d 512k' % (0x41 + i, i * 524288)]
    t0 = time.monotonic()
    p = subprocess.run(['timeout', '120', 'qemu-io', '-f', 'raw'] + cmds + [url],
                       capture_output=True, text=True)
    out = p.stdout + p.stderr
    delayed = re.findall(r'delaying', d.log_text())
    ok = p.returncode == 0 and 'failed' not in out and out.count('read 524288/524288') == 8
    R.check('qemu', ok and len(delayed) > 0,
            '%d writes + 8 verified reads in %.1f s with %d delayed PDUs%s' %
            (8, time.monotonic() - t0, len(delayed), '' if ok else ': ' + out[-300:]))


run_case('reset', {'reset_after_bytes': 5000}, case_reset)
run_case('drop', {'drop_ppm': 1000000, 'opcodes': [0x20]}, case_drop)
run_case('duplicate', {'duplicate_ppm': 1000000, 'opcodes': [0x21]}, case_duplicate)
run_case('corrupt', {'corrupt_ppm': 1000000, 'opcodes': [0x20]}, case_corrupt)
run_case('delay', {'delay_ppm': 1000000, 'delay_ms': 300, 'opcodes': [0x21]}, case_delay)
run_case('truncate', {'truncate_ppm': 1000000, 'opcodes': [0x25]}, case_truncate)
run_case('qemu', {'delay_ppm': 200000, 'delay_ms': 20}, case_qemu)
sys.exit(1 if R.failed else 0)
