#!/usr/bin/env python3
"""The ix initiator against a target that breaks the rules. A small fake target (this script)
logs the initiator in, then answers its first READ with one kind of misbehaviour (Data-In
outside the buffer, DataSN gaps, GOOD without the data, oversized segments, unknown opcodes
and ITTs, an R2T for a read, a connection cut mid-transfer, Rejects) or breaks the login itself
(malformed text, wrong stage, oversized or bogus responses). Every later connection attempt is
refused, so recovery cannot succeed.

For each case tests/integration/ini_accept's "badio" check must end with a clean error (the
command or the login fails with a negative errno and a reason) within its bounded timeouts:
never a crash, a hang, a sanitizer report or a command reported GOOD on bad data.
One "PASS|FAIL ini_badtarget.CASE detail" line per case (also appended to $IX_RESULTS).
"""

import os
import socket
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
ACCEPT = os.path.join(BUILD, 'tests', 'integration', 'ini_accept')
IQN = 'iqn.2026-11.io.ix:fake-target'


def u32(b, off):
    return struct.unpack_from('>I', b, off)[0]


class FakeTarget:
    """Accepts connections; the first one is logged in and then runs `case`; later ones are
    closed at once (so the initiator's recovery gives up)."""

    def __init__(self, case):
        self.case = case
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(('127.0.0.1', 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.conns = 0
        self.note = ''
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def close(self):
        self.stop = True
        try:
            self.lsock.close()
        except OSError:
            pass

    def run(self):
        while not self.stop:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            self.conns += 1
            if self.conns > 1:
                s.close()
                continue
            c = object.__new__(X.Conn)
            c.sock, c.hdig, c.ddig, c.timeout, c.closed, c.last_bhs = s, False, False, 10.0, False, None
            try:
                self.serve(c)
            except (X.Closed, X.Timeout, OSError) as e:
                self.note = '%s: %s' % (type(e).__name__, e)
            finally:
                c.close()

    # ---- login -------------------------------------------------------------------------
    def login_rsp(self, req, csg, nsg, transit, text, status=0, tsih=0, dsl=None, cont=False):
        b = X.Bhs(0x23, flags=(0x80 if transit else 0) | (0x40 if cont else 0) |
                  (csg << 2) | nsg)
        b.raw(8, req.bhs[8:14])             # ISID
        b.u16(14, tsih)
        b.itt(req.itt)
        b.u32(24, self.statsn)
        self.statsn += 1
        b.u32(28, u32(req.bhs, 24))         # ExpCmdSN = CmdSN
        b.u32(32, u32(req.bhs, 24) + 31)
        b.u16(36, status)
        return b, X.encode_keys(text) if text else b''

    def login(self, c):
        self.statsn = 1
        req = c.recv_pdu()
        csg = (req.bhs[1] >> 2) & 3
        case = self.case
        if case == 'login_garbage':
            b, _ = self.login_rsp(req, csg, 1, True, None)
            c.send_pdu(b, b'AuthMethod\x00garbage-without-equals\x00')
            return False
        if case == 'login_stage':
            b, d = self.login_rsp(req, 1, 3, True, [('AuthMethod', 'None')], tsih=1)
            c.send_pdu(b, d)
            return False
        if case == 'login_huge':
            b, _ = self.login_rsp(req, csg, 1, True, None)
            c.send_raw(c.build(b, b'', dsl=70000) + b'x' * 1000)
            return False
        if case == 'login_opcode':
            b = X.Bhs(0x21, flags=0x80).itt(req.itt)
            c.send_pdu(b)
            return False
        if case == 'login_status_class':
            b, _ = self.login_rsp(req, csg, 0, False, None, status=0x0405)
            c.send_pdu(b)
            return False
        # a real, minimal login: stage 0 -> 1 -> full feature phase
        b, d = self.login_rsp(req, 0, 1, True, [('AuthMethod', 'None')])
        c.send_pdu(b, d)
        req = c.recv_pdu()
        b, d = self.login_rsp(req, 1, 3, True, [('MaxRecvDataSegmentLength', '65536')], tsih=1)
        c.send_pdu(b, d)
        return True

    # ---- full feature phase ------------------------------------------------------------
    def stamp(self, b, cmdsn):
        b.u32(24, self.statsn)
        b.u32(28, cmdsn + 1)
        b.u32(32, cmdsn + 32)
        return b

    def data_in(self, itt, cmdsn, datasn, offset, data, final=False, status=False, dsl=None):
        flags = (0x80 if final else 0) | (0x01 if status else 0)
        b = X.Bhs(0x25, flags=flags).itt(itt).u32(20, X.ALL_ONES)
        b.u32(36, datasn).u32(40, offset)
        self.stamp(b, cmdsn)
        if status:
            self.statsn += 1
        return b, data

    def serve(self, c):
        if not self.login(c):
            # give the initiator time to read and react before closing
            c.expect_silence_or_close(2)
            return
        while True:
            p = c.recv_pdu(timeout=15)
            op = p.bhs[0] & 0x3f
            if op == 0x00:                   # NOP-Out ping: answer it
                b = X.Bhs(0x20, flags=0x80).itt(p.itt)
                b.u32(20, X.ALL_ONES)
                self.stamp(b, u32(p.bhs, 24) - 1)
                self.statsn += 1
                c.send_pdu(b)
                continue
            if op == 0x01:
                break
        itt, edtl, cmdsn = p.itt, u32(p.bhs, 20), u32(p.bhs, 24)
        case = self.case
        if case == 'data_beyond':
            b, d = self.data_in(itt, cmdsn, 0, edtl - 512, bytes(4096), final=True, status=True)
            c.send_pdu(b, d)
        elif case == 'datasn_gap':
            b, d = self.data_in(itt, cmdsn, 1, 0, bytes(4096))
            c.send_pdu(b, d)
        elif case == 'good_without_data':
            b = X.Bhs(0x21, flags=0x80).itt(itt)
            self.stamp(b, cmdsn)
            c.send_pdu(b)
        elif case == 'segment_too_big':
            b, _ = self.data_in(itt, cmdsn, 0, 0, b'')
            c.send_raw(c.build(b, b'', dsl=1 << 20) + bytes(8192))
        elif case == 'unknown_opcode':
            b = X.Bhs(0x3c, flags=0x80).itt(itt)
            self.stamp(b, cmdsn)
            c.send_pdu(b)
        elif case == 'unknown_itt':
            b, d = self.data_in(itt ^ 0x5a5a00, cmdsn, 0, 0, bytes(512))
            c.send_pdu(b, d)
        elif case == 'r2t_for_read':
            b = X.Bhs(0x31, flags=0x80).itt(itt).u32(20, 7).u32(36, 0).u32(40, 0).u32(44, 4096)
            self.stamp(b, cmdsn)
            c.send_pdu(b)
        elif case == 'cut_mid_data':
            b, d = self.data_in(itt, cmdsn, 0, 0, bytes(edtl), final=True, status=True)
            c.send_raw(c.build(b, d)[:48 + edtl // 2])
            return
        elif case == 'reject_cmd':
            b = X.Bhs(0x3f, flags=0x80).u8(2, 0x09).itt(X.ALL_ONES)
            self.stamp(b, cmdsn - 1)
            self.statsn += 1
            c.send_pdu(b, p.bhs)
            c.expect_silence_or_close(5)
            return
        elif case == 'sense_overrun':
            # CHECK CONDITION whose SenseLength claims more than the segment holds
            b = X.Bhs(0x21, flags=0x80).u8(3, 0x02).itt(itt)
            self.stamp(b, cmdsn)
            self.statsn += 1
            c.send_pdu(b, struct.pack('>H', 4000) + bytes([0x70, 0, 5]) + bytes(15))
            c.expect_silence_or_close(5)
            return
        c.expect_silence_or_close(5)


# case -> (what the driver must report, explanation)
CASES = {
    'data_beyond': 'Data-In past the end of the buffer',
    'datasn_gap': 'first Data-In with DataSN 1',
    'good_without_data': 'GOOD for a READ with no Data-In and no underflow',
    'segment_too_big': 'DataSegmentLength 1 MiB over MaxRecvDataSegmentLength',
    'unknown_opcode': 'opcode 0x3c',
    'unknown_itt': 'Data-In for an ITT never issued',
    'r2t_for_read': 'R2T for a READ',
    'cut_mid_data': 'connection closed in the middle of a Data-In',
    'reject_cmd': 'Reject of the SCSI Command (reason 0x09)',
    'sense_overrun': 'SenseLength longer than the data segment',
    'login_garbage': 'login response text with a key without "="',
    'login_stage': 'login response for a stage we did not ask for',
    'login_huge': 'login response of 70000 bytes',
    'login_opcode': 'SCSI Response instead of a Login Response',
    'login_status_class': 'login status class 4 (undefined)',
}


def run_case(case):
    ft = FakeTarget(case)
    try:
        r = subprocess.run([ACCEPT, '-p', '127.0.0.1:%d' % ft.port, '-T', IQN, 'badio'],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 'FAIL', 'ini_accept hung (60 s)'
    finally:
        ft.close()
    out = r.stdout + r.stderr
    sys.stderr.write('--- %s\n%s\n' % (case, out))
    if ixtest.sanitizer_report(out):
        return 'FAIL', 'sanitizer report'
    if r.returncode < 0:
        return 'FAIL', 'ini_accept killed by signal %d' % -r.returncode
    line = [ln for ln in r.stdout.splitlines() if ln.split(' ', 1)[0] in ('PASS', 'FAIL')]
    if r.returncode == 0 and line and line[-1].startswith('PASS'):
        return 'PASS', line[-1].split(':', 1)[-1].strip()
    return 'FAIL', (line[-1] if line else 'no result line (exit %d)' % r.returncode)


def main():
    if not os.access(ACCEPT, os.X_OK):
        print('SKIP ini_badtarget ini_accept not built at %s' % ACCEPT)
        return 77
    failed = 0
    for case, what in CASES.items():
        st, detail = run_case(case)
        line = '%s ini_badtarget.%s %s: %s' % (st, case, what, detail)
        print(line, flush=True)
        if os.environ.get('IX_RESULTS'):
            with open(os.environ['IX_RESULTS'], 'a') as f:
                f.write(line + '\n')
        failed += st == 'FAIL'
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
