#!/usr/bin/env python3
"""Seed corpora for the fuzz harnesses from real iSCSI traffic (docs/fuzzing.md).

  seeds.py record --listen PORT --target HOST:PORT --out DIR [--seconds N]
      A recording TCP proxy: initiators connect to 127.0.0.1:PORT, everything is forwarded to
      the target, and each connection's two byte streams are written to DIR/NNNN.i2t and
      DIR/NNNN.t2i. Runs until SIGTERM/SIGINT (or N seconds).
  seeds.py split DIR... --corpus tests/fuzz/corpus [--max N] [--only HARNESS]...
      Cut the recorded streams into PDUs (following the digests the login negotiated) and write
      per-harness seeds, named after a hash of their content:
        pdu/    single PDUs (BHS + AHS) of both directions
        text/   login and text data segments
        neg/    the operational keys of each login, for both roles (fuzz_neg.c format)
        login/  the initiator's login PDU sequence (fuzz_login.c format, several policies)
        login_init/  the target's login responses (fuzz_login_init.c format)
        chap/   CHAP exchanges turned into replacements (fuzz_chap.c format)
        scsi/   the SCSI commands of a session with their data-out (fuzz_scsi.c format)
      Existing seeds are kept; at most --max new seeds per harness (the smallest win).
python3 standard library only.
"""

import argparse
import hashlib
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

BHS = 48
SEP = b'\xff'


# ---------------------------------------------------------------- record

def pump(a, b, log):
    try:
        while True:
            r, _, _ = select.select([a], [], [], 1.0)
            if not r:
                continue
            d = a.recv(65536)
            if not d:
                break
            log.write(d)
            b.sendall(d)
    except OSError:
        pass
    finally:
        log.flush()
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def record(args):
    host, port = args.target.rsplit(':', 1)
    os.makedirs(args.out, exist_ok=True)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', args.listen))
    ls.listen(64)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    n = len([f for f in os.listdir(args.out) if f.endswith('.i2t')])
    deadline = time.monotonic() + args.seconds if args.seconds else None
    print('recording on 127.0.0.1:%d -> %s' % (args.listen, args.target), flush=True)
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        r, _, _ = select.select([ls], [], [], 0.2)
        if not r:
            continue
        c, _ = ls.accept()
        t = socket.create_connection((host, int(port)))
        base = os.path.join(args.out, '%04d' % n)
        n += 1
        fi = open(base + '.i2t', 'wb')
        fo = open(base + '.t2i', 'wb')
        threading.Thread(target=pump, args=(c, t, fi), daemon=True).start()
        threading.Thread(target=pump, args=(t, c, fo), daemon=True).start()
    return 0


# ---------------------------------------------------------------- split

class Pdu:
    def __init__(self, raw_hdr, data, wire):
        self.bhs = raw_hdr[:BHS]
        self.ahs = raw_hdr[BHS:]
        self.data = data
        self.wire = wire          # the bytes as sent, minus digests
        self.op = self.bhs[0] & 0x3f

    @property
    def itt(self):
        return struct.unpack('>I', self.bhs[16:20])[0]


def text_pairs(data):
    out = {}
    for item in data.split(b'\0'):
        if b'=' in item:
            k, v = item.split(b'=', 1)
            out[k.decode('latin-1')] = v.decode('latin-1')
    return out


def parse_stream(buf, digests):
    """Cut buf into PDUs. digests(idx) -> (hd, dd) in effect for the idx-th PDU."""
    pdus, off, i = [], 0, 0
    while len(buf) - off >= BHS:
        hd, dd = digests(i)
        ahs = buf[off + 4] * 4
        dlen = int.from_bytes(buf[off + 5:off + 8], 'big')
        hlen = BHS + ahs
        need = hlen + (4 if hd else 0) + ((dlen + 3) & ~3) + (4 if dd and dlen else 0)
        if len(buf) - off < need:
            break
        raw_hdr = buf[off:off + hlen]
        p = off + hlen + (4 if hd else 0)
        data = buf[p:p + dlen]
        wire = raw_hdr + data + b'\0' * (((dlen + 3) & ~3) - dlen)
        pdus.append(Pdu(raw_hdr, data, wire))
        off += need
        i += 1
    return pdus


def split_connection(i2t_bytes, t2i_bytes):
    """Both directions as PDU lists, digests taken from the final login response."""
    # First pass without digests: the login phase never has any.
    t2i0 = parse_stream(t2i_bytes, lambda i: (False, False))
    hd = dd = False
    n_login_rsp = 0
    for p in t2i0:
        if p.op != 0x23:
            break
        n_login_rsp += 1
        kv = text_pairs(p.data)
        hd = kv.get('HeaderDigest', 'CRC32C' if hd else 'None') == 'CRC32C'
        dd = kv.get('DataDigest', 'CRC32C' if dd else 'None') == 'CRC32C'
        if p.bhs[1] & 0x80 and (p.bhs[1] & 3) == 3 and p.bhs[36] == 0:
            break
    n_login_req = 0
    i2t0 = parse_stream(i2t_bytes, lambda i: (False, False))
    for p in i2t0:
        if p.op != 0x03:
            break
        n_login_req += 1
    i2t = parse_stream(i2t_bytes, lambda i: (hd, dd) if i >= n_login_req else (False, False))
    t2i = parse_stream(t2i_bytes, lambda i: (hd, dd) if i >= n_login_rsp else (False, False))
    return i2t, t2i


def neg_seeds(i2t, t2i):
    """fuzz_neg.c: target role fed the initiator's login texts, initiator role fed the
    target's answers. Segment control: stage from CSG, propose before receiving (target role
    proposes at the first operational request), finish on the last."""
    out = []
    for role, pdus in ((1, [p for p in i2t if p.op == 0x03]),
                       (0, [p for p in t2i if p.op == 0x23])):
        segs = []
        for k, p in enumerate(pdus):
            if not p.data:
                continue
            csg = (p.bhs[1] >> 2) & 3
            ctl = csg & 3
            if k == len(pdus) - 1:
                ctl |= 0x10
            segs.append(bytes([ctl]) + p.data)
        if segs:
            for b1 in (0x05, 0x0a):
                out.append(bytes([role | (0x02 if b'Discovery' in b''.join(segs) else 0),
                                  b1]) + SEP.join(segs))
    return out


def login_seeds(i2t):
    pdus = [p for p in i2t if p.op == 0x03]
    if not pdus:
        return []
    stream = b''.join(p.wire for p in pdus)
    has_chap = any(b'CHAP_' in p.data for p in pdus)
    policies = (0x01, 0x02, 0x04) if has_chap else (0x00, 0x18, 0x80)
    return [bytes([pol]) + stream for pol in policies]


FUZZ_ISID = bytes([0x80, 0x00, 0x1f, 0x2e, 0x3d, 0x4c])  # fuzz_login_init.c's


def login_init_seeds(t2i):
    """fuzz_login_init.c: the target's login responses, ISID rewritten to the harness's."""
    pdus = [p for p in t2i if p.op == 0x23]
    if not pdus:
        return []
    stream = b''.join(p.wire[:8] + FUZZ_ISID + p.wire[14:] for p in pdus)
    has_chap = any(b'CHAP_' in p.data for p in pdus)
    disc = any(b'SendTargets' in p.data for p in t2i) or b'TargetPortalGroupTag' not in stream
    modes = (0x01, 0x03) if has_chap else (0x00, 0x08, 0x58)
    return [bytes([m | (0x04 if disc else 0)]) + stream for m in modes]


def chap_seeds(i2t, t2i):
    """Captured CHAP exchanges, as replacement messages in both directions."""
    reqs = [p.data for p in i2t if p.op == 0x03 and p.data and not (p.bhs[1] >> 2) & 3]
    rsps = [p.data for p in t2i if p.op == 0x23 and p.data and not (p.bhs[1] >> 2) & 3]
    if not any(b'CHAP_' in d for d in reqs + rsps):
        return []
    msgs = []
    for a, b in zip(reqs, rsps + [b''] * len(reqs)):
        msgs += [a, b]
    strip = lambda d: b'\0'.join(x for x in d.split(b'\0')
                                 if x.split(b'=')[0] in (b'AuthMethod', b'CHAP_A', b'CHAP_I',
                                                         b'CHAP_C', b'CHAP_N', b'CHAP_R'))
    msgs = [strip(m) for m in msgs]
    out = []
    for cfg in (0x30, 0x20, 0x60):
        # every message replaced by the recorded one, and only the initiator's replaced
        out.append(bytes([cfg]) + SEP.join(b'\x01' + m for m in msgs))
        out.append(bytes([cfg]) + SEP.join((b'\x01' + m) if i % 2 == 0 else b'\x00'
                                           for i, m in enumerate(msgs)))
    out.append(bytes([0x30]) + SEP.join([b'\x00'] * 4))
    return out


def scsi_seeds(i2t, per_seed=8):
    """fuzz_scsi.c records from SCSI Command PDUs with their immediate data and Data-Out."""
    cmds, order = {}, []
    for p in i2t:
        if p.op == 0x01:
            flags = p.bhs[1]
            edtl = struct.unpack('>I', p.bhs[20:24])[0]
            cdb = p.bhs[32:48]
            lun = p.bhs[9]
            cmds[p.itt] = {'r': bool(flags & 0x40), 'w': bool(flags & 0x20),
                           'edtl': edtl, 'cdb': cdb, 'lun': lun, 'data': bytearray(p.data)}
            order.append(p.itt)
        elif p.op == 0x05 and p.itt in cmds:
            off = struct.unpack('>I', p.bhs[40:44])[0]
            d = cmds[p.itt]['data']
            if len(d) < off + len(p.data):
                d.extend(b'\0' * (off + len(p.data) - len(d)))
            d[off:off + len(p.data)] = p.data
    recs = []
    for itt in order:
        c = cmds[itt]
        if c['edtl'] > 0xffff:
            continue  # the harness carries a 16-bit EDTL; its LUs are tiny anyway
        flags = (min(c['lun'], 3)) | (0x08 if c['r'] else 0) | (0x10 if c['w'] else 0)
        rec = bytes([flags, 16]) + struct.pack('>H', c['edtl']) + bytes(c['cdb'])
        if c['w']:
            rec += bytes(c['data'][:c['edtl']]).ljust(c['edtl'], b'\0')
        recs.append(rec)
    return [b''.join(recs[i:i + per_seed]) for i in range(0, len(recs), per_seed)]


def scsi_opcodes(s):
    ops, o = [], 0
    while o + 4 <= len(s):
        flags, cl, edtl = s[o], s[o + 1], s[o + 2] << 8 | s[o + 3]
        o += 4
        if o < len(s):
            ops.append(s[o])
        o += cl + (edtl if flags & 0x10 else 0)
    return ops


def signature(harness, s):
    """What makes two seeds of a harness different in kind."""
    if harness == 'pdu':
        return s[:2]                         # opcode and flags
    if harness == 'scsi':
        return frozenset(scsi_opcodes(s))    # the commands it runs
    if harness in ('login', 'login_init'):
        return (s[0], s.count(b'CHAP_'), s.count(b'SessionType=Discovery'), s.count(b'\x23'))
    if harness == 'text':
        return tuple(sorted(text_pairs(s)))  # the set of keys
    return s[:2]


def split(args):
    found = {h: [] for h in ('pdu', 'text', 'neg', 'login', 'login_init', 'chap', 'scsi')}
    for d in args.dirs:
        for f in sorted(os.listdir(d)):
            if not f.endswith('.i2t'):
                continue
            base = os.path.join(d, f[:-4])
            i2t_b = open(base + '.i2t', 'rb').read()
            t2i_b = open(base + '.t2i', 'rb').read() if os.path.exists(base + '.t2i') else b''
            i2t, t2i = split_connection(i2t_b, t2i_b)
            for p in i2t + t2i:
                found['pdu'].append(p.bhs + p.ahs)
                if p.op in (0x03, 0x04, 0x23, 0x24) and p.data:
                    found['text'].append(p.data)
            found['neg'] += neg_seeds(i2t, t2i)
            found['login'] += login_seeds(i2t)
            found['login_init'] += login_init_seeds(t2i)
            found['chap'] += chap_seeds(i2t, t2i)
            found['scsi'] += scsi_seeds(i2t)
    total = 0
    for h, seeds in found.items():
        if args.only and h not in args.only:
            continue
        dest = os.path.join(args.corpus, h)
        os.makedirs(dest, exist_ok=True)
        have = set()
        for f in os.listdir(dest):
            have.add(hashlib.sha1(open(os.path.join(dest, f), 'rb').read()).hexdigest())
        uniq = {}
        for s in seeds:
            k = hashlib.sha1(s).hexdigest()
            if k not in have and len(s) <= args.max_size:
                uniq[k] = s
        # prefer variety: the smallest seed of each kind first, then the smallest others
        picked = sorted(uniq.items(), key=lambda kv: len(kv[1]))
        first = {}
        for k, s in picked:
            first.setdefault(signature(h, s), (k, s))
        picked = list(first.values()) + [kv for kv in picked if kv not in first.values()]
        picked = picked[:args.max]
        for k, s in picked:
            with open(os.path.join(dest, 'cap-' + k[:16]), 'wb') as fh:
                fh.write(s)
        total += len(picked)
        print('%-6s %4d candidates, %3d new seeds written' % (h, len(uniq), len(picked)))
    return 0 if total or not args.require_new else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('record')
    r.add_argument('--listen', type=int, required=True)
    r.add_argument('--target', required=True)
    r.add_argument('--out', required=True)
    r.add_argument('--seconds', type=float, default=0)
    s = sub.add_parser('split')
    s.add_argument('dirs', nargs='+')
    s.add_argument('--corpus', required=True)
    s.add_argument('--max', type=int, default=40)
    s.add_argument('--max-size', type=int, default=16384)
    s.add_argument('--require-new', action='store_true')
    s.add_argument('--only', action='append', metavar='HARNESS',
                   help='write seeds for this harness only (repeatable)')
    a = ap.parse_args()
    return record(a) if a.cmd == 'record' else split(a)


if __name__ == '__main__':
    sys.exit(main())
