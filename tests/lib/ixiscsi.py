"""A small raw-socket iSCSI initiator for tests (python3 stdlib only).

Written from RFC 7143 for the ix test suite: it builds PDUs byte by byte so tests can send
both correct and deliberately broken traffic. Layouts follow RFC 7143 section 11 (see
docs/protocol.md section 2 of the ix design notes). Nothing here is clever or fast on purpose.

Main pieces:
  crc32c(data)            CRC32C (Castagnoli), reflected, as used for iSCSI digests (RFC 7143
                          section 13.1); appended to the wire least-significant byte first.
  Bhs                     a mutable 48-byte Basic Header Segment with named setters.
  Conn                    one TCP connection: send_pdu()/recv_pdu() with optional digests.
  Session                 login (with optional CHAP MD5, mutual CHAP), NOP ping, SCSI
                          commands (read / write with immediate data and R2T), text, logout.
"""

import hashlib
import os
import random
import socket
import struct
import time

# ---------------------------------------------------------------------------------------------
# CRC32C (RFC 7143 section 13.1; polynomial 0x1EDC6F41, reflected form 0x82F63B78)

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    tbl = _CRC_TABLE
    for b in data:
        crc = tbl[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def digest_bytes(data):
    """Digest as transmitted: little-endian (least significant byte first)."""
    return struct.pack('<I', crc32c(data))


# Self-check against the vectors in RFC 7143 appendix / docs/protocol.md 2.6.
assert crc32c(bytes(32)) == 0x8A9136AA
assert crc32c(b'\xff' * 32) == 0x62A8AB43
assert crc32c(bytes(range(32))) == 0x46DD794E

# ---------------------------------------------------------------------------------------------
# Opcodes (RFC 7143 section 11.2.1.2)

OP_NOP_OUT = 0x00
OP_SCSI_CMD = 0x01
OP_TMF_REQ = 0x02
OP_LOGIN_REQ = 0x03
OP_TEXT_REQ = 0x04
OP_DATA_OUT = 0x05
OP_LOGOUT_REQ = 0x06
OP_SNACK = 0x10

OP_NOP_IN = 0x20
OP_SCSI_RSP = 0x21
OP_TMF_RSP = 0x22
OP_LOGIN_RSP = 0x23
OP_TEXT_RSP = 0x24
OP_DATA_IN = 0x25
OP_LOGOUT_RSP = 0x26
OP_R2T = 0x31
OP_ASYNC = 0x32
OP_REJECT = 0x3f

OPNAMES = {
    0x20: 'NOP-In', 0x21: 'SCSI-Response', 0x22: 'TMF-Response', 0x23: 'Login-Response',
    0x24: 'Text-Response', 0x25: 'Data-In', 0x26: 'Logout-Response', 0x31: 'R2T',
    0x32: 'Async', 0x3f: 'Reject',
}

REJECT_REASONS = {
    0x01: 'reserved', 0x02: 'data digest error', 0x03: 'SNACK reject', 0x04: 'protocol error',
    0x05: 'command not supported', 0x06: 'immediate command reject', 0x07: 'task in progress',
    0x08: 'invalid data ACK', 0x09: 'invalid PDU field', 0x0a: 'long op reject',
    0x0b: 'deprecated', 0x0c: 'waiting for logout',
}

ALL_ONES = 0xFFFFFFFF


class Bhs:
    """48-byte Basic Header Segment (RFC 7143 section 11.2)."""

    def __init__(self, opcode=0, immediate=False, flags=0):
        self.b = bytearray(48)
        self.b[0] = (opcode & 0x3f) | (0x40 if immediate else 0)
        self.b[1] = flags

    def u8(self, off, v):
        self.b[off] = v & 0xff
        return self

    def u16(self, off, v):
        struct.pack_into('>H', self.b, off, v & 0xffff)
        return self

    def u32(self, off, v):
        struct.pack_into('>I', self.b, off, v & 0xffffffff)
        return self

    def raw(self, off, data):
        self.b[off:off + len(data)] = data
        return self

    def ahs_len(self, words):
        self.b[4] = words & 0xff
        return self

    def dsl(self, n):
        self.b[5:8] = (n & 0xffffff).to_bytes(3, 'big')
        return self

    def lun(self, lun):
        self.b[8:16] = encode_lun(lun)
        return self

    def itt(self, v):
        return self.u32(16, v)

    def bytes(self):
        return bytes(self.b)


def encode_lun(lun):
    """SAM-2 single level LUN: peripheral (lun < 256) or flat space addressing."""
    if lun < 256:
        return bytes([0, lun]) + bytes(6)
    return bytes([0x40 | (lun >> 8), lun & 0xff]) + bytes(6)


class Pdu:
    """A received PDU."""

    def __init__(self, bhs, ahs=b'', data=b''):
        self.bhs = bytes(bhs)
        self.ahs = ahs
        self.data = data
        self.opcode = bhs[0] & 0x3f
        self.flags = bhs[1]

    def u8(self, off):
        return self.bhs[off]

    def u16(self, off):
        return struct.unpack_from('>H', self.bhs, off)[0]

    def u32(self, off):
        return struct.unpack_from('>I', self.bhs, off)[0]

    @property
    def dsl(self):
        return int.from_bytes(self.bhs[5:8], 'big')

    @property
    def itt(self):
        return self.u32(16)

    @property
    def ttt(self):
        return self.u32(20)

    @property
    def statsn(self):
        return self.u32(24)

    @property
    def expcmdsn(self):
        return self.u32(28)

    @property
    def maxcmdsn(self):
        return self.u32(32)

    def name(self):
        return OPNAMES.get(self.opcode, 'opcode 0x%02x' % self.opcode)

    def describe(self):
        s = '%s flags=0x%02x itt=0x%08x dsl=%d' % (self.name(), self.flags, self.itt, self.dsl)
        if self.opcode == OP_REJECT:
            r = self.bhs[2]
            s += ' reason=0x%02x (%s)' % (r, REJECT_REASONS.get(r, '?'))
        elif self.opcode == OP_LOGIN_RSP:
            s += ' status=0x%02x%02x T=%d C=%d CSG=%d NSG=%d' % (
                self.bhs[36], self.bhs[37], self.flags >> 7 & 1, self.flags >> 6 & 1,
                self.flags >> 2 & 3, self.flags & 3)
        elif self.opcode == OP_SCSI_RSP:
            s += ' response=0x%02x status=0x%02x resid=%d' % (self.bhs[2], self.bhs[3],
                                                               self.u32(44))
        return s


def sense_key(sense):
    """Sense key from fixed (0x70/0x71) or descriptor (0x72/0x73) sense data."""
    if len(sense) < 3:
        return None
    if sense[0] & 0x7f in (0x72, 0x73):
        return sense[1] & 0x0f
    return sense[2] & 0x0f


def sense3(sense):
    """(sense key, asc, ascq) of fixed or descriptor sense data, or None."""
    if not sense or len(sense) < 4:
        return None
    if sense[0] & 0x7f in (0x72, 0x73):
        return sense[1] & 0xf, sense[2], sense[3]
    if len(sense) < 14:
        return None
    return sense[2] & 0xf, sense[12], sense[13]


def wait_async(s, secs):
    """The next Async Message on session s (NOP-In pings answered), or the reason there was
    none."""
    end = time.monotonic() + secs
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return 'no Async Message within %d s' % secs
        try:
            pdu = s.recv(left)
        except Timeout:
            continue
        except Closed:
            return 'connection closed without an Async Message'
        if pdu.opcode == OP_NOP_IN and pdu.itt == ALL_ONES:
            s.answer_target_nop(pdu)
            continue
        if pdu.opcode == OP_ASYNC:
            return pdu
        return 'expected an Async Message, got ' + pdu.describe()


def async_fields(pdu):
    """(AsyncEvent, Parameter1, Parameter2, Parameter3) of an Async Message."""
    return (pdu.u8(36),) + struct.unpack_from('>HHH', pdu.bhs, 38)


def read10(lba, n):
    """READ(10) CDB for n blocks at lba."""
    return struct.pack('>BBIBHB', 0x28, 0, lba, 0, n, 0)


def write10(lba, n):
    """WRITE(10) CDB for n blocks at lba."""
    return struct.pack('>BBIBHB', 0x2a, 0, lba, 0, n, 0)


def reset_close(sock):
    """Close with an RST instead of a FIN (SO_LINGER 0): the peer vanishing abruptly."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    sock.close()


class Closed(Exception):
    """The peer closed (or reset) the connection."""


class Timeout(Exception):
    """Nothing arrived within the timeout."""


class ProtocolError(Exception):
    """The target answered something the test client did not expect."""


# ---------------------------------------------------------------------------------------------
# Text keys (RFC 7143 section 6.1)

def encode_keys(pairs):
    """pairs: list of (key, value) or raw bytes items; returns key=value\\0... bytes."""
    out = b''
    for p in pairs:
        if isinstance(p, (bytes, bytearray)):
            out += bytes(p)
        else:
            k, v = p
            out += ('%s=%s' % (k, v)).encode() + b'\0'
    return out


def decode_keys(data):
    """Returns an ordered list of (key, value) strings; items without '=' get value None."""
    out = []
    for item in data.split(b'\0'):
        if not item:
            continue
        s = item.decode('utf-8', 'replace')
        if '=' in s:
            k, v = s.split('=', 1)
            out.append((k, v))
        else:
            out.append((s, None))
    return out


def pad4(n):
    return (4 - n % 4) % 4


# ---------------------------------------------------------------------------------------------

class Conn:
    """One TCP connection carrying iSCSI PDUs."""

    def __init__(self, host, port, timeout=10.0):
        self.host, self.port = host, port
        fam = socket.AF_INET6 if ':' in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.hdig = False
        self.ddig = False
        self.timeout = timeout
        self.closed = False
        self.last_bhs = None

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def send_raw(self, data):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise Closed(str(e))

    def build(self, bhs, data=b'', ahs=b'', bad_hdig=False, bad_ddig=False, dsl=None):
        """Assemble a PDU. dsl overrides the DataSegmentLength field (for broken PDUs)."""
        b = bytearray(bhs.bytes() if isinstance(bhs, Bhs) else bhs)
        b[4] = (len(ahs) // 4) if b[4] == 0 and ahs else b[4]
        n = len(data) if dsl is None else dsl
        b[5:8] = (n & 0xffffff).to_bytes(3, 'big')
        hdr = bytes(b) + ahs
        self.last_bhs = bytes(b)   # the header as it goes on the wire (for Reject checks)
        out = hdr
        if self.hdig:
            d = bytearray(digest_bytes(hdr))
            if bad_hdig:
                d[0] ^= 0xff
            out += bytes(d)
        if data:
            padded = data + bytes(pad4(len(data)))
            out += padded
            if self.ddig:
                d = bytearray(digest_bytes(padded))
                if bad_ddig:
                    d[0] ^= 0xff
                out += bytes(d)
        return out

    def send_pdu(self, bhs, data=b'', ahs=b'', **kw):
        self.send_raw(self.build(bhs, data, ahs, **kw))

    def _recv_exact(self, n, deadline):
        buf = b''
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout('timed out with %d of %d bytes' % (len(buf), n))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(n - len(buf))
            except socket.timeout:
                raise Timeout('timed out with %d of %d bytes' % (len(buf), n))
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as e:
                raise Closed(str(e))
            if not chunk:
                raise Closed('EOF after %d of %d bytes' % (len(buf), n))
            buf += chunk
        return buf

    def recv_pdu(self, timeout=None):
        """Receive one PDU; raises Closed or Timeout. Verifies digests when enabled."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        bhs = self._recv_exact(48, deadline)
        ahs_len = bhs[4] * 4
        dsl = int.from_bytes(bhs[5:8], 'big')
        ahs = self._recv_exact(ahs_len, deadline) if ahs_len else b''
        if self.hdig:
            d = self._recv_exact(4, deadline)
            if d != digest_bytes(bhs + ahs):
                raise ProtocolError('bad header digest from target')
        data = b''
        if dsl:
            padded = self._recv_exact(dsl + pad4(dsl), deadline)
            if self.ddig:
                d = self._recv_exact(4, deadline)
                if d != digest_bytes(padded):
                    raise ProtocolError('bad data digest from target')
            data = padded[:dsl]
        return Pdu(bhs, ahs, data)

    def expect_silence_or_close(self, timeout):
        """Returns 'closed', 'silent', or the Pdu that arrived."""
        try:
            return self.recv_pdu(timeout)
        except Closed:
            return 'closed'
        except Timeout:
            return 'silent'


# ---------------------------------------------------------------------------------------------

def random_isid():
    # RFC 7143 11.12.5: type 10b = random; B and C random, D qualifier.
    r = random.getrandbits(24)
    return bytes([0x80, 0x00]) + r.to_bytes(3, 'big') + bytes([random.getrandbits(8)])


DEFAULT_OP_KEYS = [
    ('MaxRecvDataSegmentLength', '262144'),
    ('InitialR2T', 'Yes'),
    ('ImmediateData', 'Yes'),
    ('MaxBurstLength', '262144'),
    ('FirstBurstLength', '65536'),
    ('MaxOutstandingR2T', '1'),
    ('MaxConnections', '1'),
    ('DataPDUInOrder', 'Yes'),
    ('DataSequenceInOrder', 'Yes'),
    ('ErrorRecoveryLevel', '0'),
    ('DefaultTime2Wait', '0'),
    ('DefaultTime2Retain', '0'),
]


def login_bhs(isid, tsih, itt, cid, cmdsn, expstatsn, csg, nsg, transit, cont,
              vmax=0, vmin=0):
    flags = (0x80 if transit else 0) | (0x40 if cont else 0) | ((csg & 3) << 2) | (nsg & 3)
    b = Bhs(OP_LOGIN_REQ, immediate=True, flags=flags)
    b.u8(2, vmax).u8(3, vmin).raw(8, isid).u16(14, tsih).itt(itt).u16(20, cid)
    b.u32(24, cmdsn).u32(28, expstatsn)
    return b


class LoginFailed(Exception):
    def __init__(self, status, pdu=None, msg=''):
        self.status = status
        self.pdu = pdu
        super().__init__(msg or 'login failed with status 0x%04x' % status)


def chap_response(alg, ident, secret, challenge):
    h = {5: hashlib.md5, 6: hashlib.sha1, 7: hashlib.sha256, 8: hashlib.sha3_256}[alg]
    return h(bytes([ident]) + secret + challenge).digest()


def parse_binary(v):
    """CHAP binary value: 0x hex or 0b base64 (RFC 7143 section 6.1)."""
    import base64
    if v[:2] in ('0x', '0X'):
        return bytes.fromhex(v[2:] if len(v) % 2 == 0 else '0' + v[2:])
    if v[:2] in ('0b', '0B'):
        return base64.b64decode(v[2:])
    raise ValueError('not a binary value: %r' % v)


class Session:
    """A single-connection session driven step by step."""

    def __init__(self, host, port, initiator='iqn.2024-01.org.ix:test-client',
                 target=None, lun=0, timeout=10.0, isid=None):
        self.host, self.port = host, port
        self.initiator = initiator
        self.target = target
        self.lun = lun
        self.isid = isid or random_isid()
        self.tsih = 0
        self.cid = 0
        self.itt = random.getrandbits(16) << 8
        self.cmdsn = random.getrandbits(31)
        self.expstatsn = 0
        self.maxcmdsn = self.cmdsn
        self.params = {}
        self.target_keys = []
        self.r2ts_seen = []        # (buffer offset, desired length) of every R2T answered
        self.timeout = timeout
        self.conn = Conn(host, port, timeout)

    # -- helpers
    def next_itt(self):
        self.itt = (self.itt + 1) & 0xffffffff
        if self.itt == ALL_ONES:
            self.itt = 1
        return self.itt

    def close(self):
        self.conn.close()

    def note(self, pdu):
        """Track StatSN / CmdSN window from a response (RFC 7143 section 4.2.2)."""
        if pdu.opcode in (OP_NOP_IN, OP_SCSI_RSP, OP_TMF_RSP, OP_TEXT_RSP, OP_LOGOUT_RSP,
                          OP_REJECT, OP_ASYNC, OP_LOGIN_RSP) or \
                (pdu.opcode == OP_DATA_IN and pdu.flags & 0x01):
            if not (pdu.opcode == OP_NOP_IN and pdu.itt == ALL_ONES):
                self.expstatsn = (pdu.statsn + 1) & 0xffffffff
        self.maxcmdsn = pdu.maxcmdsn

    def recv(self, timeout=None):
        pdu = self.conn.recv_pdu(timeout)
        self.note(pdu)
        return pdu

    # -- login (RFC 7143 section 6.3)
    def login(self, keys=None, op_keys=None, chap=None, mutual=None, digests=None,
              session_type='Normal', chap_algs='5', raw_first=None):
        """Log in and reach full feature phase. chap=(user, secret) enables the security
        stage; mutual=(target_user, target_secret) adds the initiator's challenge.
        digests=(header, data) sets the offered HeaderDigest/DataDigest lists."""
        decl = [('InitiatorName', self.initiator), ('SessionType', session_type)]
        if self.target and session_type == 'Normal':
            decl.append(('TargetName', self.target))
        op = list(DEFAULT_OP_KEYS if op_keys is None else op_keys)
        if session_type == 'Discovery':
            op = [kv for kv in op if kv[0] in ('MaxRecvDataSegmentLength',)]
        hd, dd = digests or ('None', 'None')
        op = [('HeaderDigest', hd), ('DataDigest', dd)] + op
        if keys:
            # Caller keys replace defaults of the same name (never offer a key twice).
            names = {k for k, _ in keys if isinstance(k, str)}
            op = [kv for kv in op if kv[0] not in names] + list(keys)
        itt = self.next_itt()
        got = {}

        def exchange(csg, nsg, transit, pairs):
            b = login_bhs(self.isid, self.tsih, itt, self.cid, self.cmdsn, self.expstatsn,
                          csg, nsg, transit, False)
            self.conn.send_pdu(b, encode_keys(pairs))
            rsp = self.recv()
            if rsp.opcode != OP_LOGIN_RSP:
                raise ProtocolError('expected Login Response, got ' + rsp.describe())
            status = rsp.u16(36)
            if status != 0:
                raise LoginFailed(status, rsp)
            kv = decode_keys(rsp.data)
            self.target_keys += kv
            for k, v in kv:
                got[k] = v
            return rsp, kv

        if chap:
            user, secret = chap
            rsp, kv = exchange(0, 1, False, decl + [('AuthMethod', 'CHAP,None')])
            if got.get('AuthMethod') != 'CHAP':
                raise ProtocolError('target did not select CHAP: %r' % got.get('AuthMethod'))
            rsp, kv = exchange(0, 1, False, [('CHAP_A', chap_algs)])
            alg = int(got['CHAP_A'])
            ident = int(got['CHAP_I'])
            chal = parse_binary(got['CHAP_C'])
            r = chap_response(alg, ident, secret.encode(), chal)
            pairs = [('CHAP_N', user), ('CHAP_R', '0x' + r.hex())]
            my_id = my_chal = None
            if mutual:
                my_id = random.getrandbits(8)
                my_chal = os.urandom(16)
                pairs += [('CHAP_I', str(my_id)), ('CHAP_C', '0x' + my_chal.hex())]
            rsp, kv = exchange(0, 1, True, pairs)
            if mutual:
                tuser, tsecret = mutual
                if got.get('CHAP_N') != tuser:
                    raise ProtocolError('mutual CHAP: target CHAP_N %r' % got.get('CHAP_N'))
                want = chap_response(alg, my_id, tsecret.encode(), my_chal)
                if parse_binary(got.get('CHAP_R', '0x')) != want:
                    raise ProtocolError('mutual CHAP: wrong CHAP_R from target')
            # Continue into operational negotiation (CSG=1).
            while not (rsp.flags & 0x80):
                rsp, kv = exchange(0, 1, True, [])
            stage_pairs = op
        else:
            stage_pairs = decl + op
        rsp, kv = exchange(1, 3, True, stage_pairs)
        loops = 0
        while not (rsp.flags & 0x80 and (rsp.flags & 3) == 3):
            loops += 1
            if loops > 8:
                raise ProtocolError('login did not reach full feature phase')
            rsp, kv = exchange(1, 3, True, [])
        self.tsih = rsp.u16(14)
        self.params = got
        self.conn.hdig = got.get('HeaderDigest', 'None') == 'CRC32C'
        self.conn.ddig = got.get('DataDigest', 'None') == 'CRC32C'
        self.cmdsn = rsp.expcmdsn
        self.maxcmdsn = rsp.maxcmdsn
        return rsp

    def target_mrdsl(self):
        """MaxRecvDataSegmentLength the target declared (RFC 7143 section 13.12)."""
        return int(self.params.get('MaxRecvDataSegmentLength', '8192'))

    def param_int(self, key, default):
        v = self.params.get(key)
        try:
            return int(v)
        except (TypeError, ValueError):
            return default

    # -- full feature phase
    def nop_bhs(self, itt=None, ttt=ALL_ONES, immediate=True, cmdsn=None):
        b = Bhs(OP_NOP_OUT, immediate=immediate, flags=0x80)
        b.lun(0).itt(self.next_itt() if itt is None else itt).u32(20, ttt)
        b.u32(24, self.cmdsn if cmdsn is None else cmdsn).u32(28, self.expstatsn)
        return b

    def nop(self, data=b'', timeout=None):
        """NOP-Out ping (RFC 7143 section 11.18); the NOP-In must echo the data."""
        b = self.nop_bhs(immediate=True)
        itt = struct.unpack_from('>I', b.b, 16)[0]
        self.conn.send_pdu(b, data)
        while True:
            rsp = self.recv(timeout)
            if rsp.opcode == OP_NOP_IN and rsp.itt == ALL_ONES:
                self.answer_target_nop(rsp)
                continue
            if rsp.opcode == OP_ASYNC:
                continue
            break
        if rsp.opcode != OP_NOP_IN or rsp.itt != itt:
            raise ProtocolError('NOP ping answered with ' + rsp.describe())
        if rsp.data != data:
            raise ProtocolError('NOP-In did not echo the ping data')
        return rsp

    def answer_target_nop(self, pdu):
        b = Bhs(OP_NOP_OUT, immediate=True, flags=0x80)
        b.raw(8, pdu.bhs[8:16]).itt(ALL_ONES).u32(20, pdu.ttt)
        b.u32(24, self.cmdsn).u32(28, self.expstatsn)
        self.conn.send_pdu(b)

    def scsi_bhs(self, cdb, edtl, read=False, write=False, final=True, immediate=False,
                 itt=None, cmdsn=None, attr=1):
        flags = (0x80 if final else 0) | (0x40 if read else 0) | (0x20 if write else 0) | attr
        b = Bhs(OP_SCSI_CMD, immediate=immediate, flags=flags)
        b.lun(self.lun).itt(self.next_itt() if itt is None else itt).u32(20, edtl)
        b.u32(24, self.cmdsn if cmdsn is None else cmdsn).u32(28, self.expstatsn)
        b.raw(32, bytes(cdb[:16]).ljust(16, b'\0'))
        return b

    def scsi(self, cdb, read_len=0, write_data=None, timeout=None):
        """Run one SCSI command to completion. Returns (status, data, sense, response pdu)."""
        wlen = len(write_data) if write_data else 0
        imm = b''
        if wlen and self.params.get('ImmediateData', 'Yes') == 'Yes':
            imm = write_data[:min(self.param_int('FirstBurstLength', 65536),
                                  self.target_mrdsl(), wlen)]
        b = self.scsi_bhs(cdb, read_len or wlen, read=bool(read_len), write=bool(wlen))
        itt = struct.unpack_from('>I', b.b, 16)[0]
        self.cmdsn = (self.cmdsn + 1) & 0xffffffff
        self.conn.send_pdu(b, imm)
        data = bytearray()
        while True:
            pdu = self.recv(timeout)
            if pdu.opcode == OP_NOP_IN and pdu.itt == ALL_ONES:
                self.answer_target_nop(pdu)
                continue
            if pdu.opcode == OP_ASYNC:
                continue
            if pdu.itt != itt and pdu.opcode != OP_REJECT:
                raise ProtocolError('unexpected ' + pdu.describe())
            if pdu.opcode == OP_DATA_IN:
                off = pdu.u32(40)
                if len(data) < off + len(pdu.data):
                    data.extend(bytes(off + len(pdu.data) - len(data)))
                data[off:off + len(pdu.data)] = pdu.data
                if pdu.flags & 0x01:
                    return pdu.u8(3), bytes(data), b'', pdu
            elif pdu.opcode == OP_R2T:
                self.send_r2t_data(pdu, write_data)
            elif pdu.opcode == OP_SCSI_RSP:
                sense = b''
                if pdu.data and len(pdu.data) >= 2:
                    sl = struct.unpack('>H', pdu.data[:2])[0]
                    sense = pdu.data[2:2 + sl]
                return pdu.u8(3), bytes(data), sense, pdu
            else:
                raise ProtocolError('unexpected ' + pdu.describe())

    def send_r2t_data(self, r2t, write_data, ttt=None, itt=None):
        off = r2t.u32(40)
        want = r2t.u32(44)
        self.r2ts_seen.append((off, want))
        mrdsl = self.target_mrdsl()
        sent = 0
        datasn = 0
        while sent < want:
            n = min(mrdsl, want - sent)
            chunk = write_data[off + sent:off + sent + n]
            b = Bhs(OP_DATA_OUT, flags=0x80 if sent + n >= want else 0)
            b.raw(8, r2t.bhs[8:16]).itt(r2t.itt if itt is None else itt)
            b.u32(20, r2t.ttt if ttt is None else ttt).u32(28, self.expstatsn)
            b.u32(36, datasn).u32(40, off + sent)
            self.conn.send_pdu(b, chunk)
            sent += n
            datasn += 1

    def scsi_retry_ua(self, cdb, **kw):
        """Like scsi(), but retries (twice) after a UNIT ATTENTION (sense key 6)."""
        for _ in range(3):
            res = self.scsi(cdb, **kw)
            st, _, sense, _ = res
            if not (st == 2 and sense_key(sense) == 6):
                return res
        return res

    def read_capacity10(self):
        st, data, sense, _ = self.scsi_retry_ua(bytes([0x25]) + bytes(9), read_len=8)
        if st != 0:
            raise ProtocolError('READ CAPACITY(10) status 0x%02x sense %s' % (st, sense.hex()))
        lba, bs = struct.unpack('>II', data[:8])
        return lba, bs

    def test_unit_ready(self):
        st, _, sense, _ = self.scsi(bytes(6))
        return st, sense

    def text(self, pairs, final=True, cont=False, ttt=ALL_ONES, itt=None):
        """Text Request (RFC 7143 11.10); a continuation passes the ITT and TTT it answers."""
        flags = (0x80 if final else 0) | (0x40 if cont else 0)
        b = Bhs(OP_TEXT_REQ, immediate=True, flags=flags)
        b.itt(self.next_itt() if itt is None else itt).u32(20, ttt).u32(24, self.cmdsn).u32(28, self.expstatsn)
        self.conn.send_pdu(b, encode_keys(pairs))
        return self.recv()

    def logout(self, reason=0):
        b = Bhs(OP_LOGOUT_REQ, immediate=True, flags=0x80 | reason)
        b.itt(self.next_itt()).u32(24, self.cmdsn).u32(28, self.expstatsn)
        self.conn.send_pdu(b)
        rsp = self.recv()
        if rsp.opcode != OP_LOGOUT_RSP:
            raise ProtocolError('logout answered with ' + rsp.describe())
        return rsp.u8(2)


def send_targets(host, port, initiator, timeout=5):
    """The target names a discovery session's SendTargets=All lists."""
    s = Session(host, port, initiator=initiator, timeout=timeout)
    s.login(session_type='Discovery')
    rsp = s.text([('SendTargets', 'All')])
    data = rsp.data
    while not rsp.flags & 0x80:
        rsp = s.text([], ttt=rsp.ttt, itt=rsp.itt)
        data += rsp.data
    s.close()
    return [v for k, v in decode_keys(data) if k == 'TargetName']
