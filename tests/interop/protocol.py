#!/usr/bin/env python3
"""Positive protocol checks that libiscsi 1.19's iscsi-test-cu lacks (its iSCSISendTargets and
iSCSINop families only exist in later libiscsi): discovery with SendTargets, NOP-Out ping
echo at several sizes, CmdSN accounting of immediate and non-immediate requests, several
commands in flight, text requests in a normal session, and logout.

Usage like malformed.py: without PEER_PORT in the environment it starts the peer through
tests/lib/with-peer.sh (IX_PEER=ix|tgt). One "PASS|FAIL|SKIP name detail" line per check
(also appended to $IX_RESULTS); exit 1 if any check failed. Section numbers are RFC 7143's.
"""

import os
import struct
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

ixtest.with_peer('protocol', 300)

HOST = os.environ.get('IX_HOST', '127.0.0.1')
PORT = int(os.environ['PEER_PORT'])
IQN = os.environ['PEER_IQN']
LUN = int(os.environ.get('PEER_LUN', '0'))
INITIATOR = 'iqn.2024-01.org.ix.test:protocol'

CHECKS = []
results = []


def check(name):
    def reg(fn):
        CHECKS.append((name, fn))
        return fn
    return reg


class Fail(Exception):
    pass


def session(**kw):
    s = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN, lun=LUN, timeout=10)
    s.login(**kw)
    return s


def discovery():
    s = X.Session(HOST, PORT, initiator=INITIATOR, timeout=10)
    s.login(session_type='Discovery')
    return s


def text_all(s, pairs):
    """Text Request, following C=1 continuations (11.10/11.11); returns the whole text."""
    rsp = s.text(pairs)
    data = b''
    for _ in range(64):
        if rsp.opcode != X.OP_TEXT_RSP:
            raise Fail('Text Request answered with ' + rsp.describe())
        data += rsp.data
        if rsp.flags & 0x80:
            if rsp.flags & 0x40:
                raise Fail('Text Response with F=1 and C=1 (11.11.1 forbids it)')
            if rsp.ttt != X.ALL_ONES:
                raise Fail('final Text Response TTT 0x%08x, must be 0xffffffff' % rsp.ttt)
            return data
        # 11.10: continue with an empty request echoing the TTT.
        rsp = s.text([], ttt=rsp.ttt, itt=rsp.itt)
    raise Fail('Text Response never finished')


@check('sendtargets-all')
def _():
    # 13.3 / App. C: SendTargets=All in a discovery session lists TargetName records, each
    # followed by its TargetAddress=host:port,tpgt.
    s = discovery()
    kv = X.decode_keys(text_all(s, [('SendTargets', 'All')]))
    s.logout()
    s.close()
    names = [v for k, v in kv if k == 'TargetName']
    if IQN not in names:
        raise Fail('TargetName=%s not listed: %r' % (IQN, kv))
    i = next(n for n, (k, v) in enumerate(kv) if k == 'TargetName' and v == IQN)
    addrs = []
    for k, v in kv[i + 1:]:
        if k != 'TargetAddress':
            break
        addrs.append(v)
    want = '%s:%d,' % (HOST if ':' not in HOST else '[%s]' % HOST, PORT)
    if not any(a.startswith(want) for a in addrs):
        raise Fail('no TargetAddress %s<tpgt> after the TargetName: %r' % (want, addrs))
    bad = [k for k, _ in kv if k not in ('TargetName', 'TargetAddress')]
    if bad:
        raise Fail('unexpected keys in SendTargets response: %r' % bad)
    return 'listed with %s' % ', '.join(addrs)


@check('sendtargets-one-name')
def _():
    s = discovery()
    kv = X.decode_keys(text_all(s, [('SendTargets', IQN)]))
    s.close()
    names = [v for k, v in kv if k == 'TargetName']
    if names != [IQN]:
        raise Fail('SendTargets=<iqn> answered TargetNames %r' % names)
    return 'ok'


@check('sendtargets-normal-session')
def _():
    # 13.3: in a normal session, SendTargets= (empty) or the session's target lists it.
    s = session()
    kv = X.decode_keys(text_all(s, [('SendTargets', '')]))
    s.close()
    names = [v for k, v in kv if k == 'TargetName']
    if names != [IQN]:
        raise Fail('SendTargets= in a normal session answered %r' % names)
    return 'ok'


@check('discovery-unknown-key')
def _():
    # 6.2: an unknown key is answered key=NotUnderstood.
    s = discovery()
    kv = dict(X.decode_keys(text_all(s, [('X-org.ix.test-unknown', 'Yes')])))
    s.close()
    if kv.get('X-org.ix.test-unknown') != 'NotUnderstood':
        raise Fail('answered %r' % kv)
    return 'NotUnderstood'


@check('nop-echo-sizes')
def _():
    # 11.18/11.19: the NOP-In echoes the ping data; sizes up to the target's MRDSL.
    s = session()
    m = s.target_mrdsl()
    sizes = [0, 1, 3, 4, 5, 511, 4096, m]
    for n in sizes:
        data = bytes((i * 7 + n) & 0xff for i in range(n))
        s.nop(data)
    s.close()
    return 'sizes %s' % sizes


@check('nop-non-immediate-advances-cmdsn')
def _():
    # 4.2.2.1 (protocol.md 4.1): a non-immediate NOP-Out consumes a CmdSN; an immediate one
    # does not. Watch ExpCmdSN in the NOP-In.
    s = session()
    b = s.nop_bhs(immediate=True)
    s.conn.send_pdu(b, b'imm')
    r1 = s.recv()
    if r1.expcmdsn != s.cmdsn:
        raise Fail('immediate NOP: ExpCmdSN %d, expected %d' % (r1.expcmdsn, s.cmdsn))
    b = s.nop_bhs(immediate=False)
    s.conn.send_pdu(b, b'non-imm')
    r2 = s.recv()
    if r2.opcode != X.OP_NOP_IN or r2.data != b'non-imm':
        raise Fail('non-immediate NOP answered ' + r2.describe())
    if r2.expcmdsn != (s.cmdsn + 1) & 0xffffffff:
        raise Fail('non-immediate NOP: ExpCmdSN %d, expected %d' % (r2.expcmdsn, s.cmdsn + 1))
    if r2.statsn != (r1.statsn + 1) & 0xffffffff:
        raise Fail('StatSN %d after %d (4.2.2.2: +1 per response)' % (r2.statsn, r1.statsn))
    s.close()
    return 'ExpCmdSN and StatSN advance as required'


@check('commands-in-flight')
def _():
    # Several READs outstanding at once (window permitting), answered by ITT in any order.
    s = session()
    s.read_capacity10()
    win = (s.maxcmdsn - s.cmdsn + 1) & 0xffffffff
    n = max(1, min(16, win))
    itts = {}
    for i in range(n):
        cdb = bytes([0x28, 0]) + struct.pack('>I', i * 8) + bytes([0]) + struct.pack('>H', 8) + \
            bytes([0])
        b = s.scsi_bhs(cdb, 4096, read=True)
        itts[struct.unpack_from('>I', b.b, 16)[0]] = 0
        s.cmdsn += 1
        s.conn.send_pdu(b)
    done = 0
    while done < n:
        p = s.recv()
        if p.itt not in itts:
            raise Fail('unexpected ' + p.describe())
        if p.opcode == X.OP_DATA_IN:
            itts[p.itt] += len(p.data)
            if p.flags & 0x01:
                if p.u8(3) != 0:
                    raise Fail('READ status 0x%02x' % p.u8(3))
                done += 1
        elif p.opcode == X.OP_SCSI_RSP:
            if p.u8(3) != 0:
                raise Fail('READ status 0x%02x' % p.u8(3))
            done += 1
        else:
            raise Fail('unexpected ' + p.describe())
    short = [hex(k) for k, v in itts.items() if v != 4096]
    if short:
        raise Fail('tasks with wrong data length: %s' % short)
    s.close()
    return '%d READs in flight (window %d)' % (n, win)


@check('write-read-r2t-path')
def _():
    # InitialR2T=Yes, ImmediateData=No: all data solicited by R2T (4.5), larger than one
    # MaxBurstLength when the target allows, then read back.
    s = session(keys=[('InitialR2T', 'Yes'), ('ImmediateData', 'No'),
                      ('MaxBurstLength', '65536'), ('FirstBurstLength', '65536')])
    s.read_capacity10()
    n = 256 * 1024
    data = os.urandom(n)
    cdb = bytes([0x2a, 0]) + struct.pack('>I', 4096) + bytes([0]) + struct.pack('>H', n // 512) + \
        bytes([0])
    st, _, sense, _ = s.scsi(cdb, write_data=data)
    if st != 0:
        raise Fail('WRITE status 0x%02x sense %s' % (st, sense.hex()))
    mbl = s.param_int('MaxBurstLength', 262144)
    if not s.r2ts_seen:
        raise Fail('no R2T although InitialR2T=Yes and ImmediateData=No')
    big = [r for r in s.r2ts_seen if r[1] > mbl or r[1] == 0]
    if big:
        raise Fail('R2T desired lengths beyond MaxBurstLength %d: %r' % (mbl, big))
    offs = [o for o, _ in s.r2ts_seen]
    if offs != sorted(offs) or sum(w for _, w in s.r2ts_seen) != n:
        raise Fail('R2Ts do not cover the buffer once in order: %r' % s.r2ts_seen)
    cdb = bytes([0x28, 0]) + cdb[2:]
    st, got, sense, _ = s.scsi(cdb, read_len=n)
    if st != 0 or got != data:
        raise Fail('READ back status 0x%02x, data %s' % (st, 'equal' if got == data else 'differs'))
    s.close()
    return '256 KiB through %d R2Ts of <= %d bytes' % (len(s.r2ts_seen), mbl)


@check('write-read-immediate-path')
def _():
    s = session(keys=[('InitialR2T', 'Yes'), ('ImmediateData', 'Yes')])
    s.read_capacity10()
    data = os.urandom(8192)
    cdb = bytes([0x2a, 0]) + struct.pack('>I', 8192) + bytes([0]) + struct.pack('>H', 16) + \
        bytes([0])
    st, _, sense, _ = s.scsi(cdb, write_data=data)
    if st != 0:
        raise Fail('WRITE status 0x%02x sense %s' % (st, sense.hex()))
    st, got, _, _ = s.scsi(bytes([0x28]) + cdb[1:], read_len=8192)
    if st != 0 or got != data:
        raise Fail('READ back differs')
    s.close()
    return '8 KiB immediate data'


@check('read-then-write-same-batch')
def _():
    # A READ and a WRITE of the same blocks, both ORDERED (SAM-5 8.7: executed in CmdSN order),
    # sent in one TCP segment so the target sees them in one receive: the READ must return the
    # data from before the WRITE. (ix answers READs on RAM LUNs straight from LU memory; this
    # is the case where it must take a copy first.)
    s = session(keys=[('ImmediateData', 'Yes')])
    s.read_capacity10()
    old, new = os.urandom(4096), os.urandom(4096)
    lba = 3 * 8192
    wcdb = bytes([0x2a, 0]) + struct.pack('>I', lba) + bytes([0]) + struct.pack('>H', 8) + \
        bytes([0])
    rcdb = bytes([0x28]) + wcdb[1:]
    st, _, sense, _ = s.scsi(wcdb, write_data=old)
    if st != 0:
        raise Fail('first WRITE status 0x%02x sense %s' % (st, sense.hex()))
    if s.param_int('FirstBurstLength', 0) < 4096 or s.target_mrdsl() < 4096:
        raise Fail('4 KiB of immediate data not negotiated (FirstBurstLength %d)' %
                   s.param_int('FirstBurstLength', 0))
    rb = s.scsi_bhs(rcdb, 4096, read=True, attr=2)
    ritt = struct.unpack_from('>I', rb.b, 16)[0]
    s.cmdsn += 1
    wb = s.scsi_bhs(wcdb, 4096, write=True, attr=2)
    witt = struct.unpack_from('>I', wb.b, 16)[0]
    s.cmdsn += 1
    s.conn.send_raw(s.conn.build(rb) + s.conn.build(wb, new))
    got, status = bytearray(4096), {}
    while len(status) < 2:
        p = s.recv()
        if p.opcode == X.OP_DATA_IN and p.itt == ritt:
            off = p.u32(40)
            got[off:off + len(p.data)] = p.data
            if p.flags & 0x01:
                status[ritt] = p.u8(3)
        elif p.opcode == X.OP_SCSI_RSP and p.itt in (ritt, witt):
            status[p.itt] = p.u8(3)
        else:
            raise Fail('unexpected ' + p.describe())
    if status[ritt] != 0 or status[witt] != 0:
        raise Fail('status READ 0x%02x WRITE 0x%02x' % (status[ritt], status[witt]))
    if bytes(got) != old:
        raise Fail('the READ returned data %s' % ('written after it' if bytes(got) == new
                                                   else 'that was never written'))
    st, after, _, _ = s.scsi(rcdb, read_len=4096)
    if st != 0 or after != new:
        raise Fail('READ after the WRITE does not return its data')
    s.close()
    return 'READ saw the old data, the next READ the new'


@check('logout-close-session')
def _():
    # 11.14/11.15: Logout (close session) -> Logout Response 0, then the target closes.
    s = session()
    code = s.logout(0)
    if code != 0:
        raise Fail('Logout Response %d' % code)
    try:
        p = s.conn.recv_pdu(5)
        raise Fail('after the Logout Response got ' + p.describe())
    except X.Closed:
        pass
    except X.Timeout:
        raise Fail('connection still open 5 s after the Logout Response')
    s.close()
    return 'response 0, connection closed'


@check('session-reinstatement')
def _():
    # 6.3.5: a new leading login with the same InitiatorName+ISID (TSIH 0) replaces the old
    # session; the new one works.
    a = session()
    b = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN, lun=LUN, timeout=10,
                  isid=a.isid)
    b.login()
    b.read_capacity10()
    b.nop(b'new')
    try:
        a.nop(b'old', timeout=3)
        old = 'old connection still answered'
    except (X.Closed, X.Timeout, X.ProtocolError):
        old = 'old session dropped'
    a.close()
    b.close()
    if old != 'old session dropped':
        raise Fail('reinstatement did not end the old session (%s)' % old)
    return old


@check('session-open-at-shutdown')
def session_open_at_shutdown():
    """A session stays logged in after this script ends: a forked child holds it until the
    target closes the connection (at most 60 s). with-peer.sh then stops the target with
    SIGTERM and requires exit status 0 and no sanitizer (leak) report, so a target that does
    not close live connections at shutdown fails this run."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            s = session()
            os.write(w, b'1')
            s.conn.sock.settimeout(60)
            while s.conn.sock.recv(4096):
                pass
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)
    os.close(w)
    ok = os.read(r, 1)
    os.close(r)
    if ok != b'1':
        raise Fail('the child could not log in')
    return 'a child process keeps the session logged in past the end of this script'


def main():
    failed = 0
    for name, fn in CHECKS:
        try:
            st, detail = 'PASS', fn() or ''
        except Fail as e:
            st, detail = 'FAIL', str(e)
        except (X.Closed, X.Timeout, X.ProtocolError, X.LoginFailed, OSError) as e:
            st, detail = 'FAIL', '%s: %s' % (type(e).__name__, e)
        except Exception:  # noqa: BLE001
            st, detail = 'FAIL', 'test bug: ' + traceback.format_exc().strip().splitlines()[-1]
        line = '%s protocol.%s %s' % (st, name, detail)
        print(line, flush=True)
        if os.environ.get('IX_RESULTS'):
            with open(os.environ['IX_RESULTS'], 'a') as f:
                f.write(line + '\n')
        failed += st == 'FAIL'
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
