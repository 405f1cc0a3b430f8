#!/usr/bin/env python3
"""Malformed and out-of-order iSCSI input, checked against RFC 7143.

Each case opens its own connection, sends something broken, and checks that the target answers
as RFC 7143 asks: a Reject PDU with the right reason (carrying the rejected header), a Login
Response with the right status, silence where the RFC says "silently ignore", or dropping the
connection where that is what the RFC allows. After every case a second session, logged in
before the case started, must still answer a NOP-Out ping and a READ CAPACITY: a broken
connection must never hurt anyone else. The target process must survive all of it.

Usage:
  malformed.py                    start the peer (IX_PEER=ix|tgt) through tests/lib/with-peer.sh
  malformed.py --list             list the cases
  malformed.py [-k SUBSTR] ...    only cases whose name contains SUBSTR
  PEER_PORT=... PEER_IQN=... PEER_LUN=... malformed.py   against an already running target

Output: one "PASS|FAIL name detail" line per case (also appended to $IX_RESULTS); exit 0 when
every case passed, 1 otherwise. The section numbers cited are RFC 7143's.
"""

import argparse
import os
import random
import socket
import struct
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, '..', 'lib')
sys.path.insert(0, LIB)
import ixiscsi as X  # noqa: E402

if 'PEER_PORT' not in os.environ and '--list' not in sys.argv and \
        '-h' not in sys.argv and '--help' not in sys.argv:
    os.execvp('bash', ['bash', os.path.join(LIB, 'with-peer.sh'), 'malformed', '600',
                       sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

HOST = os.environ.get('IX_HOST', '127.0.0.1')
PORT = int(os.environ.get('PEER_PORT', '0'))
IQN = os.environ.get('PEER_IQN', '')
LUN = int(os.environ.get('PEER_LUN', '0'))
INITIATOR = 'iqn.2024-01.org.ix.test:malformed'
WAIT = 3.0  # seconds to wait for an answer that should come promptly

CASES = []


def case(name, cite):
    def reg(fn):
        CASES.append((name, cite, fn))
        return fn
    return reg


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Outcomes

def observe(conn, check_reject=False, timeout=WAIT):
    """What did the target do? Returns (kind, pdu) with kind one of 'closed', 'silent',
    'reject', 'login', or the PDU name. With check_reject, a Reject must carry the header
    last sent on conn."""
    sent_bhs = conn.last_bhs if check_reject else None
    try:
        pdu = conn.recv_pdu(timeout)
    except X.Closed:
        return 'closed', None
    except X.Timeout:
        return 'silent', None
    except X.ProtocolError as e:
        raise Fail('target sent a PDU with a bad digest: %s' % e)
    if pdu.opcode == X.OP_REJECT:
        if sent_bhs is not None and pdu.data[:48] != bytes(sent_bhs)[:48]:
            raise Fail('Reject (reason 0x%02x) does not carry the rejected header '
                       '(RFC 7143 11.17: data segment = complete header of the rejected PDU)'
                       % pdu.bhs[2])
        return 'reject', pdu
    if pdu.opcode == X.OP_LOGIN_RSP:
        return 'login', pdu
    return pdu.name(), pdu


def outcome_str(kind, pdu):
    if pdu is None:
        return kind
    return pdu.describe()


def expect(kind, pdu, reject=(), login_class=None, login_status=(), closed=False,
           silent=False, other=None):
    """Checks an outcome against what is allowed. Returns a description on success."""
    d = outcome_str(kind, pdu)
    if kind == 'reject' and pdu.bhs[2] in reject:
        return d
    if kind == 'login':
        st = pdu.u16(36)
        if st in login_status or (login_class is not None and st >> 8 == login_class):
            return d
    if kind == 'closed' and closed:
        return 'connection closed'
    if kind == 'silent' and silent:
        return 'silently ignored'
    if other and other(kind, pdu):
        return d
    allowed = []
    if reject:
        allowed.append('Reject reason ' + '/'.join('0x%02x' % r for r in reject))
    if login_status:
        allowed.append('Login status ' + '/'.join('0x%04x' % s for s in login_status))
    if login_class is not None:
        allowed.append('Login status class 0x%02x' % login_class)
    if closed:
        allowed.append('connection drop')
    if silent:
        allowed.append('silence')
    raise Fail('got %s; RFC allows: %s' % (d, ', '.join(allowed) or 'see case'))


# ---------------------------------------------------------------------------------------------
# Building blocks

def decl_keys(initiator=INITIATOR, target=None):
    return [('InitiatorName', initiator), ('SessionType', 'Normal'),
            ('TargetName', IQN if target is None else target)]


def raw_login(data, csg=1, nsg=3, transit=True, cont=False, vmax=0, vmin=0, tsih=0,
              opcode_byte=None):
    """Fresh connection, one hand-made Login Request; returns (conn, kind, pdu)."""
    c = X.Conn(HOST, PORT, timeout=10)
    b = X.login_bhs(X.random_isid(), tsih, random.getrandbits(31), 0, 1, 0, csg, nsg,
                    transit, cont, vmax, vmin)
    if opcode_byte is not None:
        b.b[0] = opcode_byte
    c.send_pdu(b, data)
    kind, pdu = observe(c, True)
    return c, kind, pdu


def good_login_data(extra=()):
    return X.encode_keys(decl_keys() + [('HeaderDigest', 'None'), ('DataDigest', 'None')] +
                         list(X.DEFAULT_OP_KEYS) + list(extra))


def session(keys=None, digests=None):
    s = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN, lun=LUN, timeout=10)
    try:
        s.login(keys=keys, digests=digests)
    except X.LoginFailed as e:
        s.close()
        raise Fail('could not log in the test session: status 0x%04x' % e.status)
    return s


def digest_session():
    """A session with CRC32C header and data digests that demonstrably works."""
    s = session(digests=('CRC32C', 'CRC32C'))
    if not (s.conn.hdig and s.conn.ddig):
        s.close()
        raise Skip('target did not agree to HeaderDigest=DataDigest=CRC32C')
    try:
        s.nop(b'digest-check', timeout=WAIT)
    except (X.ProtocolError, X.Timeout, X.Closed) as e:
        s.close()
        raise Fail('a correct ping on a fresh CRC32C session fails (%s); RFC 7143 13.1: digests '
                   'start with the first PDU after the final Login Response' % e)
    return s


def still_usable(s):
    """After a case that left the connection up: it must still answer a ping."""
    try:
        s.nop(b'still-alive', timeout=WAIT)
        return 'connection still answers NOP'
    except X.Closed:
        return 'connection closed afterwards'
    except (X.Timeout, X.ProtocolError) as e:
        raise Fail('connection left half-working: %s' % e)


def write10_cdb(lba, blocks):
    return bytes([0x2a, 0]) + struct.pack('>I', lba) + bytes([0]) + struct.pack('>H', blocks) + \
        bytes([0])


REJ_FORMAT = (0x04, 0x09)          # protocol error, invalid PDU field
REJ_UNSUPPORTED = (0x04, 0x05)     # protocol error, command not supported

# ---------------------------------------------------------------------------------------------
# Login phase cases

@case('login-version-mismatch', '11.12.4 Version-max/min; 11.13.5 status 0x0205')
def _():
    c, kind, pdu = raw_login(good_login_data(), vmax=0x10, vmin=0x10)
    c.close()
    return expect(kind, pdu, login_status=(0x0205,))


@case('login-nsg-reserved', '11.12.3 stage codes (2 is reserved); 11.13.5 class 0x02')
def _():
    c, kind, pdu = raw_login(good_login_data(), csg=1, nsg=2)
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-csg-ffp', '11.12.3 CSG=3 is not a negotiation stage; class 0x02')
def _():
    c, kind, pdu = raw_login(good_login_data(), csg=3, nsg=3)
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-transit-and-continue', '11.12.2 "If the C bit is 1, the T bit MUST be 0"')
def _():
    c, kind, pdu = raw_login(good_login_data(), transit=True, cont=True)
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-missing-initiatorname', '6.3.1 first request carries InitiatorName; 0x0207')
def _():
    data = X.encode_keys([('SessionType', 'Normal'), ('TargetName', IQN)] +
                         list(X.DEFAULT_OP_KEYS))
    c, kind, pdu = raw_login(data)
    c.close()
    return expect(kind, pdu, login_status=(0x0207,))


@case('login-unknown-target', '11.13.5 0x0203 Not found')
def _():
    data = X.encode_keys(decl_keys(target=IQN + '-does-not-exist') + list(X.DEFAULT_OP_KEYS))
    c, kind, pdu = raw_login(data)
    c.close()
    return expect(kind, pdu, login_status=(0x0203,))


@case('login-unknown-tsih', '6.3.5 / 11.13.5 0x020a Session does not exist')
def _():
    c, kind, pdu = raw_login(good_login_data(), tsih=0x7abc)
    c.close()
    return expect(kind, pdu, login_status=(0x020a,))


@case('login-key-without-equals', '6.1 text is key=value pairs; malformed text -> class 0x02')
def _():
    c, kind, pdu = raw_login(good_login_data() + b'JustAKeyWithoutValue\0')
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-key-too-long', '6.1 key names are at most 63 bytes; class 0x02')
def _():
    c, kind, pdu = raw_login(good_login_data() + b'X-org.ix.' + b'k' * 80 + b'=1\0')
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-value-out-of-range', '6.2 / 13.13 MaxBurstLength 512..2^24-1: Reject or fail')
def _():
    data = X.encode_keys(decl_keys() + [(k, v) for k, v in X.DEFAULT_OP_KEYS
                                        if k != 'MaxBurstLength'] + [('MaxBurstLength', '1')])
    c, kind, pdu = raw_login(data)
    c.close()

    def answered_reject(kind, pdu):
        if kind != 'login' or pdu.u16(36) != 0:
            return False
        return dict(X.decode_keys(pdu.data)).get('MaxBurstLength') == 'Reject'
    try:
        return expect(kind, pdu, login_class=0x02, closed=True, other=answered_reject)
    except Fail:
        if kind == 'login':
            raise Fail('MaxBurstLength=1 answered %r (expected Reject or a failed login)' %
                       dict(X.decode_keys(pdu.data)).get('MaxBurstLength'))
        raise


@case('login-key-twice', '6.2 a key negotiated twice -> Login reject, initiator error')
def _():
    c, kind, pdu = raw_login(good_login_data([('MaxBurstLength', '131072')]))
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-text-not-nul-terminated', '6.1 every key=value pair ends with a NUL')
def _():
    c, kind, pdu = raw_login(good_login_data() + b'MaxOutstandingR2T=1')
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('scsi-command-before-login', '6.3 the first PDU must be a Login Request; class 0x02')
def _():
    c = X.Conn(HOST, PORT, timeout=10)
    b = X.Bhs(X.OP_SCSI_CMD, flags=0xc1).lun(LUN).itt(1).u32(20, 8).u32(24, 1)
    b.raw(32, bytes([0x25]) + bytes(9))
    c.send_pdu(b)
    kind, pdu = observe(c, True)
    c.close()
    return expect(kind, pdu, login_class=0x02, closed=True)


@case('login-truncated-then-close', '7.x a transport close mid-PDU fails the connection only')
def _():
    c = X.Conn(HOST, PORT, timeout=10)
    b = X.login_bhs(X.random_isid(), 0, 1, 0, 1, 0, 1, 3, True, False)
    pdu = c.build(b, good_login_data())
    c.send_raw(pdu[:20])
    c.close()
    time.sleep(0.2)
    return 'sent 20 of %d bytes and closed' % len(pdu)


# ---------------------------------------------------------------------------------------------
# Full feature phase cases

@case('nop-data-over-mrdsl', '13.12 MaxRecvDataSegmentLength bounds every data segment')
def _():
    s = session()
    n = s.target_mrdsl() + 4
    b = s.nop_bhs()
    s.conn.send_pdu(b, bytes(n))
    kind, pdu = observe(s.conn, True)
    s.close()
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True) + ' (%d-byte ping)' % n


@case('dsl-field-huge', '13.12 + 7.x format error: a 16 MiB DataSegmentLength is refused at once')
def _():
    s = session()
    b = s.scsi_bhs(write10_cdb(0, 1), 512, write=True)
    s.cmdsn += 1
    raw = bytearray(s.conn.build(b, bytes(512)))
    raw[5:8] = (0xffffff).to_bytes(3, 'big')
    s.conn.send_raw(bytes(raw))
    s.conn.last_bhs = bytes(raw[:48])
    kind, pdu = observe(s.conn, True)
    s.close()
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True)


@case('immediate-data-over-limits', '13.11/13.14 immediate data <= FirstBurstLength, MRDSL')
def _():
    s = session()
    lim = min(s.param_int('FirstBurstLength', 65536), s.target_mrdsl())
    blocks = (lim + 4096) // 512
    data = bytes([0x5a]) * (blocks * 512)
    b = s.scsi_bhs(write10_cdb(64, blocks), len(data), write=True)
    s.cmdsn += 1
    s.conn.send_pdu(b, data)
    kind, pdu = observe(s.conn, True)
    s.close()

    def check_cond(kind, pdu):
        return kind == 'SCSI-Response' and pdu.u8(3) == 0x02
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True, other=check_cond) + \
        ' (%d bytes immediate, limit %d)' % (len(data), lim)


@case('unknown-opcode', '11.2.1.2 / 11.17.1 Reject: command not supported / protocol error')
def _():
    s = session()
    b = X.Bhs(0x0c, immediate=True, flags=0x80).itt(s.next_itt()).u32(24, s.cmdsn)
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    r = expect(kind, pdu, reject=REJ_UNSUPPORTED, closed=True)
    if kind == 'reject':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('target-opcode-from-initiator', '11.2.1.2 0x21 is a target opcode; Reject')
def _():
    s = session()
    b = X.Bhs(X.OP_SCSI_RSP, immediate=False, flags=0x80).itt(s.next_itt())
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    r = expect(kind, pdu, reject=REJ_UNSUPPORTED, closed=True)
    if kind == 'reject':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('header-digest-wrong', '13.1 / 7.x header digest error: discard or drop, never execute')
def _():
    s = digest_session()
    b = s.nop_bhs()
    s.conn.send_pdu(b, b'bad-header-digest', bad_hdig=True)
    kind, pdu = observe(s.conn)
    s.close()
    return expect(kind, pdu, closed=True, silent=True)


@case('data-digest-wrong', '13.1 / 7.x data digest error: Reject 0x02 (or drop at ERL0)')
def _():
    s = digest_session()
    b = s.nop_bhs()
    s.conn.send_pdu(b, b'payload with a bad data digest', bad_ddig=True)
    kind, pdu = observe(s.conn, True)
    r = expect(kind, pdu, reject=(0x02,), closed=True)
    if kind == 'reject':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('ahs-length-inconsistent', '11.2.2 AHSLength larger than TotalAHSLength: format error')
def _():
    s = session()
    b = s.scsi_bhs(bytes([0x25]) + bytes(9), 8, read=True)
    s.cmdsn += 1
    b.ahs_len(1)
    ahs = struct.pack('>HB', 200, 1) + b'\0'      # claims 200 bytes, carries 1
    s.conn.send_pdu(b, ahs=ahs)
    kind, pdu = observe(s.conn, True)
    s.close()

    def check_cond(kind, pdu):
        return kind == 'SCSI-Response' and pdu.u8(3) == 0x02
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True, other=check_cond)


@case('ahs-past-end-then-eof', '11.2.2 TotalAHSLength points past the PDU; EOF mid-PDU')
def _():
    s = session()
    b = s.nop_bhs()
    b.ahs_len(255)                                # 1020 bytes of AHS announced
    s.conn.send_raw(b.bytes() + bytes(8))
    s.conn.sock.shutdown(socket.SHUT_WR)
    kind, pdu = observe(s.conn, True)
    s.close()
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True)


@case('data-out-unknown-itt', '11.7 Data-Out for no task: Reject (invalid PDU field) or ignore')
def _():
    s = session()
    b = X.Bhs(X.OP_DATA_OUT, flags=0x80).lun(LUN).itt(0x7e57_0001).u32(20, X.ALL_ONES)
    b.u32(28, s.expstatsn).u32(36, 0).u32(40, 0)
    s.conn.send_pdu(b, bytes(512))
    kind, pdu = observe(s.conn, True)
    r = expect(kind, pdu, reject=REJ_FORMAT, closed=True, silent=True)
    if kind != 'closed':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('data-out-unknown-ttt', '11.7 / 7.x bad TTT: Reject; the task itself is not ended by it')
def _():
    s = session(keys=[('InitialR2T', 'Yes'), ('ImmediateData', 'No')])
    b = s.scsi_bhs(write10_cdb(128, 1), 512, write=True)
    s.cmdsn += 1
    s.conn.send_pdu(b)
    kind, r2t = observe(s.conn)
    if kind != 'R2T':
        s.close()
        raise Fail('expected an R2T for a 512-byte WRITE, got %s' % outcome_str(kind, r2t))
    d = X.Bhs(X.OP_DATA_OUT, flags=0x80).raw(8, r2t.bhs[8:16]).itt(r2t.itt)
    d.u32(20, r2t.ttt ^ 0x5a5a5a5a).u32(28, s.expstatsn).u32(36, 0).u32(40, 0)
    s.conn.send_pdu(d, bytes(512))
    kind, pdu = observe(s.conn, True)
    def ended_task(kind, pdu):
        # Ending the task explicitly with a SCSI Response (e.g. CHECK CONDITION) is allowed.
        return kind == 'SCSI-Response' and pdu.itt == r2t.itt
    r = expect(kind, pdu, reject=REJ_FORMAT, closed=True, silent=True, other=ended_task)
    if kind in ('reject', 'silent'):
        # RFC 7143 7.x "Usage of Reject PDU in recovery": a Reject does not end the task; the
        # correct Data-Out must still complete it.
        s.send_r2t_data(r2t, bytes([0x77]) * 512)
        k2, rsp = observe(s.conn, timeout=5)
        if k2 == 'SCSI-Response':
            r += '; the real Data-Out completed the WRITE (status 0x%02x)' % rsp.u8(3)
        elif k2 == 'closed':
            r += '; connection closed afterwards'
        else:
            raise Fail('%s, then the correct Data-Out got %s' % (r, outcome_str(k2, rsp)))
    s.close()
    return r


@case('cmdsn-above-window', '4.2.2.1 (protocol.md 4.1) CmdSN > MaxCmdSN: silently ignored')
def _():
    s = session()
    b = s.nop_bhs(immediate=False, cmdsn=(s.maxcmdsn + 100) & 0xffffffff)
    s.conn.send_pdu(b, b'out-of-window')
    kind, pdu = observe(s.conn, timeout=2)
    r = expect(kind, pdu, silent=True)
    # The window did not move: the next in-window command works.
    r += '; ' + still_usable(s)
    s.close()
    return r


@case('cmdsn-below-window', '4.2.2.1 (protocol.md 4.1) CmdSN < ExpCmdSN: silently ignored')
def _():
    s = session()
    s.nop(b'advance')           # immediate: CmdSN stays; use a non-immediate one to move it
    b = s.nop_bhs(immediate=False)
    s.cmdsn += 1
    s.conn.send_pdu(b, b'in-window')
    kind, pdu = observe(s.conn)
    if kind != 'NOP-In':
        s.close()
        raise Fail('in-window non-immediate NOP-Out got %s' % outcome_str(kind, pdu))
    s.note(pdu)
    b = s.nop_bhs(immediate=False, cmdsn=(s.cmdsn - 5) & 0xffffffff)
    s.conn.send_pdu(b, b'stale')
    kind, pdu = observe(s.conn, timeout=2)
    r = expect(kind, pdu, silent=True) + '; ' + still_usable(s)
    s.close()
    return r


@case('truncated-pdu-then-close', '7.x transport failure mid-PDU: that connection only')
def _():
    s = session()
    b = s.scsi_bhs(write10_cdb(0, 8), 4096, write=True)
    pdu = s.conn.build(b, bytes(4096))
    s.conn.send_raw(pdu[:48 + 1000])
    s.close()
    time.sleep(0.2)
    return 'sent %d of %d bytes and closed' % (48 + 1000, len(pdu))


@case('write-huge-edtl', '11.3 EDTL 4 GiB-1 for a 1-block WRITE: R2T <= MaxBurstLength, U bit')
def _():
    s = session(keys=[('InitialR2T', 'Yes'), ('ImmediateData', 'No')])
    mbl = s.param_int('MaxBurstLength', 262144)
    b = s.scsi_bhs(write10_cdb(256, 1), 0xffffffff, write=True)
    s.cmdsn += 1
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    if kind == 'R2T':
        ddtl = pdu.u32(44)
        if ddtl == 0 or ddtl > mbl:
            s.close()
            raise Fail('R2T asks for %d bytes (MaxBurstLength %d)' % (ddtl, mbl))
        if ddtl > 512:
            # The CDB transfers one block; EDTL only bounds the buffer (11.4.5.1: the rest is
            # an underflow residual). Soliciting more lets any initiator pin up to 4 GiB.
            s.close()
            raise Fail('R2T solicits %d bytes but the CDB transfers 512' % ddtl)
        want = ddtl
        d = X.Bhs(X.OP_DATA_OUT, flags=0x80).raw(8, pdu.bhs[8:16]).itt(pdu.itt)
        d.u32(20, pdu.ttt).u32(28, s.expstatsn).u32(36, 0).u32(40, pdu.u32(40))
        s.conn.send_pdu(d, bytes([0x42]) * want)
        kind, pdu = observe(s.conn, timeout=5)
        if kind == 'R2T':
            s.close()
            raise Fail('target asks for more than the CDB transfer length (R2T at offset %d)' %
                       pdu.u32(40))
    s.close()
    if kind == 'SCSI-Response':
        st, flags, resid = pdu.u8(3), pdu.flags, pdu.u32(44)
        if st == 0 and not (flags & 0x02 and resid == 0xffffffff - 512):
            raise Fail('GOOD without underflow residual: flags 0x%02x residual %d' % (flags,
                                                                                     resid))
        return pdu.describe()
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True)


@case('login-pdu-in-ffp', '11.12 a Login Request on a logged-in connection: protocol error')
def _():
    s = session()
    b = X.login_bhs(s.isid, s.tsih, s.next_itt(), 0, s.cmdsn, s.expstatsn, 1, 3, True, False)
    s.conn.send_pdu(b, good_login_data())
    kind, pdu = observe(s.conn, True)
    s.close()
    return expect(kind, pdu, reject=REJ_UNSUPPORTED + (0x09,), login_class=0x02, closed=True)


@case('snack-at-erl0', '11.16 / 7.x SNACK needs ErrorRecoveryLevel > 0: Reject')
def _():
    s = session()
    if s.param_int('ErrorRecoveryLevel', 0) != 0:
        s.close()
        raise Skip('ErrorRecoveryLevel negotiated > 0')
    b = X.Bhs(X.OP_SNACK, flags=0x80 | 1).itt(X.ALL_ONES).u32(20, 0).u32(28, s.expstatsn)
    b.u32(40, 0).u32(44, 0)                      # status SNACK, BegRun 0, RunLength 0
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    r = expect(kind, pdu, reject=(0x03, 0x04, 0x05), closed=True)
    if kind == 'reject':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('text-continue-never-finished', '11.10 C=1 Text Request: target answers, waits, survives')
def _():
    s = session()
    b = X.Bhs(X.OP_TEXT_REQ, immediate=True, flags=0x40).itt(s.next_itt())
    b.u32(20, X.ALL_ONES).u32(24, s.cmdsn).u32(28, s.expstatsn)
    s.conn.send_pdu(b, b'SendTarg')               # a key split across PDUs, never finished
    kind, pdu = observe(s.conn, True)

    def empty_continue(kind, pdu):
        # 11.11: the answer to C=1 is an empty Text Response with F=0 and a TTT to echo.
        return kind == 'Text-Response' and not pdu.flags & 0xc0 and pdu.ttt != X.ALL_ONES \
            and pdu.dsl == 0
    r = expect(kind, pdu, reject=REJ_FORMAT, closed=True, other=empty_continue)
    if kind != 'closed':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('nop-reply-unknown-ttt', '11.18 NOP-Out echoing a TTT the target never sent')
def _():
    s = session()
    b = X.Bhs(X.OP_NOP_OUT, immediate=True, flags=0x80).itt(X.ALL_ONES)
    b.u32(20, 0x1234abcd).u32(24, s.cmdsn).u32(28, s.expstatsn)
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True, timeout=2)
    r = expect(kind, pdu, reject=REJ_FORMAT, closed=True, silent=True)
    if kind != 'closed':
        r += '; ' + still_usable(s)
    s.close()
    return r


@case('tmf-unknown-function', '11.5.1 / 11.6.1 unknown function: response 5 or 255')
def _():
    s = session()
    b = X.Bhs(X.OP_TMF_REQ, immediate=True, flags=0x80 | 0x7e).lun(LUN).itt(s.next_itt())
    b.u32(20, X.ALL_ONES).u32(24, s.cmdsn).u32(28, s.expstatsn)
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    s.close()

    def not_supported(kind, pdu):
        return kind == 'TMF-Response' and pdu.u8(2) in (5, 255)
    return expect(kind, pdu, reject=REJ_FORMAT, other=not_supported)


@case('scsi-command-in-discovery', '3.8 / 11.17.1 only Text, NOP, Logout in Discovery: Reject')
def _():
    s = X.Session(HOST, PORT, initiator=INITIATOR, timeout=10)
    try:
        s.login(session_type='Discovery')
    except X.LoginFailed as e:
        s.close()
        raise Fail('discovery login failed 0x%04x' % e.status)
    b = s.scsi_bhs(bytes([0x25]) + bytes(9), 8, read=True)
    s.cmdsn += 1
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    s.close()
    return expect(kind, pdu, reject=REJ_UNSUPPORTED, closed=True)


@case('logout-reserved-reason', '11.14.1 reason codes 0-2: a reserved one is a format error')
def _():
    s = session()
    b = X.Bhs(X.OP_LOGOUT_REQ, immediate=True, flags=0x80 | 0x55).itt(s.next_itt())
    b.u32(24, s.cmdsn).u32(28, s.expstatsn)
    s.conn.send_pdu(b)
    kind, pdu = observe(s.conn, True)
    s.close()
    return expect(kind, pdu, reject=REJ_FORMAT, closed=True)


# ---------------------------------------------------------------------------------------------

class Skip(Exception):
    pass


class Witness:
    """A session logged in before each case; it must keep working."""

    def __init__(self):
        self.s = None

    def ensure(self):
        if self.s is None:
            self.s = session()
            self.s.read_capacity10()           # clears the power-on UNIT ATTENTION

    def check(self, tag):
        try:
            self.s.nop(('witness-' + tag).encode(), timeout=5)
            self.s.read_capacity10()
            return None
        except Exception as e:  # noqa: BLE001 - any failure means the witness broke
            self.s.close()
            self.s = None
            return '%s: %s' % (type(e).__name__, e)


def report(st, name, detail):
    line = '%s malformed.%s%s' % (st, name, (' ' + detail) if detail else '')
    print(line, flush=True)
    path = os.environ.get('IX_RESULTS')
    if path:
        with open(path, 'a') as f:
            f.write(line + '\n')


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--list', action='store_true')
    p.add_argument('-k', dest='filter', default='')
    a = p.parse_args()
    if a.list:
        for name, cite, _ in CASES:
            print('%-32s %s' % (name, cite))
        return 0
    if not PORT or not IQN:
        print('SKIP: PEER_PORT / PEER_IQN not set', file=sys.stderr)
        return 77
    random.seed()
    w = Witness()
    try:
        w.ensure()
    except Exception as e:  # noqa: BLE001
        report('FAIL', 'witness-login', '%s: %s' % (type(e).__name__, e))
        return 1
    failed = 0
    ran = 0
    for name, cite, fn in CASES:
        if a.filter and a.filter not in name:
            continue
        ran += 1
        try:
            w.ensure()
        except Exception as e:  # noqa: BLE001
            report('FAIL', name, 'no witness session before the case: %s' % e)
            failed += 1
            continue
        t0 = time.monotonic()
        st, detail = 'PASS', ''
        try:
            detail = fn() or ''
        except Skip as e:
            st, detail = 'SKIP', str(e)
        except Fail as e:
            st, detail = 'FAIL', str(e)
        except (X.Closed, X.Timeout, X.ProtocolError, X.LoginFailed, OSError) as e:
            st, detail = 'FAIL', 'test client: %s: %s' % (type(e).__name__, e)
        except Exception:  # noqa: BLE001
            st, detail = 'FAIL', 'test bug: ' + traceback.format_exc().strip().splitlines()[-1]
        broken = w.check(name)
        if broken:
            st = 'FAIL'
            detail += ' | parallel session broken: ' + broken
        detail = '%s [RFC 7143 %s] (%.1fs)' % (detail, cite, time.monotonic() - t0)
        report(st, name, detail)
        if st == 'FAIL':
            failed += 1
    print('malformed: %d cases, %d failed' % (ran, failed), flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
