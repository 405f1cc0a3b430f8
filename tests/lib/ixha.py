"""ALUA and persistent-reservation commands for the Python tests (python3 stdlib), and the
ledger of acknowledged writes the gateway tests read back after every move.

  sense3(sense), fmt(status, sense)                       for detail lines
  AO, ANO, STANDBY, UNAVAIL, TRANS, NAMES, show(groups)   asymmetric access states
  rtpg_cdb(ext), parse_rtpg(data), rtpg_states(data)      REPORT TARGET PORT GROUPS
  stpg_cdb(pairs)                                         SET TARGET PORT GROUPS
  prout_cdb(...), prin_cdb(sa), parse_keys(data), parse_reservation(data)
                                                          PERSISTENT RESERVE OUT / IN
  Initiator                                               a mixin: those commands, READ(16)
                                                          and WRITE(16) on self.s (a session)
  Gateway                                                 an Initiator with its own daemon:
                                                          launch() and shutdown()
  Ledger(lu_blocks)                                       (LUN, LBA) -> the data acknowledged
"""

import json
import os
import random
import signal
import struct
import threading
import time

import ixiscsi as X
import ixtest
from ixiscsi import sense3  # noqa: F401 (fmt's, and the tests import it from here)

AO, ANO, STANDBY, UNAVAIL, TRANS = 0, 1, 2, 3, 0xf
NAMES = {AO: 'AO', ANO: 'ANO', STANDBY: 'standby', UNAVAIL: 'unavailable', TRANS: 'trans'}
BS = 512


def fmt(st, sense):
    """'status 0xNN sense K/AA/QQ' for a detail line."""
    k = sense3(sense) if st == 2 else None
    return 'status 0x%02x%s' % (st, ' sense %x/%02x/%02x' % k if k else '')


def show(groups):
    """'g1=AO g2=standby' for {group: state}; anything else (a failure) as it is."""
    if not isinstance(groups, dict):
        return str(groups)
    return ' '.join('g%d=%s' % (g, NAMES.get(s, hex(s))) for g, s in sorted(groups.items()))


def rtpg_cdb(ext=False, alloc=1024):
    return bytes([0xa3, 0x2a if ext else 0x0a, 0, 0, 0, 0]) + struct.pack('>I', alloc) + \
        bytes(2)


def parse_rtpg(d):
    """{group: (state, pref, status, [ports])}, the extended header (format, transition time)
    or None, and whether the length field covers exactly the data."""
    n = struct.unpack('>I', d[:4])[0] + 4
    ext = (d[4] >> 4) & 7 == 1
    off, groups = (8 if ext else 4), {}
    while off + 8 <= n:
        cnt = d[off + 7]
        ports = [struct.unpack('>H', d[off + 10 + 4 * i:off + 12 + 4 * i])[0]
                 for i in range(cnt)]
        groups[struct.unpack('>H', d[off + 2:off + 4])[0]] = (
            d[off] & 0x0f, bool(d[off] & 0x80), d[off + 5], ports)
        off += 8 + 4 * cnt
    return groups, ((d[4] >> 4, d[5]) if ext else None), n == len(d)


def rtpg_states(d):
    """{group: state} of REPORT TARGET PORT GROUPS data."""
    return {g: v[0] for g, v in parse_rtpg(d)[0].items()}


def stpg_cdb(pairs):
    """SET TARGET PORT GROUPS with (state, group) descriptors: (cdb, parameter data)."""
    params = bytes(4) + b''.join(struct.pack('>BBH', st, 0, g) for st, g in pairs)
    return bytes([0xa4, 0x0a, 0, 0, 0, 0]) + struct.pack('>I', len(params)) + bytes(2), params


def prout_cdb(sa, rtype, key, sakey, aptpl=False):
    """PERSISTENT RESERVE OUT (basic parameter list): (cdb, parameter data)."""
    params = struct.pack('>QQ4xB3x', key, sakey, 0x01 if aptpl else 0)
    return bytes([0x5f, sa, rtype, 0, 0, 0, 0, 0, len(params), 0]), params


def prin_cdb(sa, alloc=1024):
    """PERSISTENT RESERVE IN: 0 READ KEYS, 1 READ RESERVATION, 3 READ FULL STATUS."""
    return bytes([0x5e, sa, 0, 0, 0, 0, 0, alloc >> 8, alloc & 0xff, 0])


def parse_keys(d):
    """READ KEYS data: (generation, sorted keys)."""
    gen, n = struct.unpack('>II', d[:8])
    return gen, sorted(struct.unpack('>%dQ' % (n // 8), d[8:8 + n]))


def parse_reservation(d):
    """READ RESERVATION data: (generation, key, type), key and type None without one."""
    gen, n = struct.unpack('>II', d[:8])
    if n < 16:
        return gen, None, None
    return gen, struct.unpack('>Q', d[8:16])[0], d[21] & 0x0f


class Initiator:
    """A mixin for a test's gateway or path object with a logged-in session self.s (ixiscsi)
    and a name; sense data is b'' when there is none."""

    def raw(self, cdb, **kw):
        """One command, unit attentions included: (status, data, sense)."""
        st, data, sense, _ = self.s.scsi(bytes(cdb), **kw)
        return st, data, sense or b''

    def cmd(self, cdb, **kw):
        """One command, retried past unit attentions: (status, data, sense)."""
        st, data, sense, _ = self.s.scsi_retry_ua(bytes(cdb), **kw)
        return st, data, sense or b''

    def on_lun(self, lun, fn, cdb, **kw):
        self.s.lun = lun
        try:
            return fn(cdb, **kw)
        finally:
            self.s.lun = 0

    def write(self, lba, data, lun=0):
        """WRITE(16): (status, sense)."""
        cdb = bytes([0x8a, 0x08]) + struct.pack('>QIBB', lba, len(data) // BS, 0, 0)
        st, _, sense = self.on_lun(lun, self.cmd, cdb, write_data=data)
        return st, sense

    def read(self, lba, n, lun=0):
        """READ(16) of n blocks: (status, data, sense)."""
        cdb = bytes([0x88, 0]) + struct.pack('>QIBB', lba, n, 0, 0)
        return self.on_lun(lun, self.cmd, cdb, read_len=n * BS)

    def rtpg(self, raw=False):
        """{group: state} or the failure ('status 0xNN sense K/AA/QQ')."""
        st, d, sense = (self.raw if raw else self.cmd)(rtpg_cdb(), read_len=1024)
        if st != 0:
            return fmt(st, sense)
        return rtpg_states(d)

    def stpg(self, *pairs):
        """SET TARGET PORT GROUPS with (state, group) descriptors: (status, sense, seconds)."""
        cdb, params = stpg_cdb(pairs)
        t0 = time.monotonic()
        st, _, sense = self.cmd(cdb, write_data=params)
        return st, sense, time.monotonic() - t0

    def prout(self, sa, rtype, key, sakey, aptpl=False):
        cdb, params = prout_cdb(sa, rtype, key, sakey, aptpl)
        st, _, sense = self.cmd(cdb, write_data=params)
        return st, sense

    def read_keys(self):
        """(generation, sorted keys) or the failure."""
        st, d, sense = self.cmd(prin_cdb(0), read_len=1024)
        return parse_keys(d) if st == 0 else fmt(st, sense)

    def close(self):
        try:
            self.s.close()
        except Exception:  # noqa: BLE001
            pass


class Gateway(Initiator):
    """A test's ix-target gateway (self.name, self.port): the daemon self.d on a configuration
    of the test's own, and one session self.s to it."""

    def base(self, tmp, name, group, port=None, host='127.0.0.1'):
        """Names the gateway, picks its port (a free one unless given) and management socket
        (self.sock in tmp): the configuration's global section and its one portal 'p', whose
        tpgt is the gateway's ALUA group; the caller adds the targets."""
        self.name, self.group = name, group
        self.port = port or ixtest.free_port()
        self.sock = os.path.join(tmp, name + '.sock')
        return {'global': {'mgmt_socket': self.sock},
                'portals': [{'name': 'p', 'address': host, 'port': self.port, 'tpgt': group}]}

    def rbd_pr_target(self, iqn, image, conf, naa, serial, rbd=None, alua=None):
        """The target of a two-gateway test on one image: LUN 0 on it with exclusive_lock and
        pr_store rados (more rbd keys in rbd), ALUA group self.group on this gateway's portal
        and the other one's (3 - group) by its relative port, both standby at start (more alua
        keys in alua)."""
        other = 3 - self.group
        return {'name': iqn, 'luns': [
            {'lun': 0, 'backend': 'rbd', 'thin': True, 'pr_store': 'rados', 'naa_id': naa,
             'serial': serial, 'rbd': {'pool': 'rbd', 'image': image, 'conf': conf,
                                       'exclusive_lock': True, **(rbd or {})}}],
            'alua': {**(alua or {}), 'groups': [
                {'id': self.group, 'state': 'standby', 'portals': ['p']},
                {'id': other, 'state': 'standby', 'relative_ports': [other]}]}}

    def launch(self, test, tmp, cfg, target, initiator, host='127.0.0.1', **session_kw):
        """cfg written to TMP/NAME.json, the daemon started on it (its log
        TEST.ix-target-NAME.log), a session to target logged in."""
        path = os.path.join(tmp, self.name + '.json')
        with open(path, 'w') as f:
            json.dump(cfg, f)
        self.d = ixtest.Daemon(path, '%s.ix-target-%s.log' % (test, self.name))
        self.s = X.Session(host, self.port, initiator=initiator, target=target, timeout=30,
                           **session_kw)
        self.s.login()
        self.s.lun = 0

    def shutdown(self, report):
        """The session closed, the daemon stopped (continued first if it was stopped), its log
        checked for sanitizer reports."""
        self.close()
        if self.d.p.poll() is None:
            self.d.p.send_signal(signal.SIGCONT)
            self.d.stop()
        ixtest.check_sanitizer(report, self.d, self.name)


class Ledger:
    """What gateways acknowledged: (LUN, LBA) -> the 4 KiB last written there with GOOD.
    New blocks are taken from first_lba on, 8 blocks apart, and wrap round at the LU's end
    (lu_blocks): a writer bounded by time writes as many blocks as the machine is fast, the LU
    stays the size it is (a block written again keeps the data last acknowledged there, so the
    read-back still checks every acknowledged write's latest data)."""

    def __init__(self, lu_blocks, first_lba=0):
        self.first, self.end = first_lba, lu_blocks
        self.blocks, self.next, self.acked = {}, first_lba, 0
        self.mu = threading.Lock()

    def new_lba(self):
        with self.mu:
            lba = self.next
            self.next += 8
            if self.next + 8 > self.end:
                self.next = self.first
        return lba

    def good(self, lun, lba, data):
        with self.mu:
            self.blocks[(lun, lba)] = data
            self.acked += 1

    def old_lba(self, lun=0):
        """A block already acknowledged on lun (None: none yet)."""
        with self.mu:
            old = [k[1] for k in self.blocks if k[0] == lun]
        return random.choice(old) if old else None

    def write_some(self, gw, n, luns=(0,), rewrite_every=3):
        """n 4 KiB writes through gw over the LUNs, every rewrite_every-th a rewrite of an
        acknowledged block; stops at the first refusal: (acknowledged, the failure or None)."""
        for i in range(n):
            lun = luns[i % len(luns)]
            old = self.old_lba(lun) if i % rewrite_every == rewrite_every - 1 else None
            lba = old if old is not None else self.new_lba()
            data = os.urandom(4096)
            st, sense = gw.write(lba, data, lun)
            if st != 0:
                return i, fmt(st, sense)
            self.good(lun, lba, data)
        return n, None

    def write_until_good(self, gw, secs, pause=0.25):
        """One new block written through gw until GOOD or secs: (seconds, {failure: count},
        'GOOD' or 'no GOOD in N s')."""
        t0, seen = time.monotonic(), {}
        lba, data = self.new_lba(), os.urandom(4096)
        while time.monotonic() - t0 < secs:
            st, sense = gw.write(lba, data)
            if st == 0:
                self.good(0, lba, data)
                return time.monotonic() - t0, seen, 'GOOD'
            seen[fmt(st, sense)] = seen.get(fmt(st, sense), 0) + 1
            time.sleep(pause)
        return time.monotonic() - t0, seen, 'no GOOD in %.0f s' % secs

    def verify(self, gw):
        """Read every acknowledged block back through gw: (blocks, errors, miscompares)."""
        errors = miscompares = 0
        for (lun, lba), data in sorted(self.blocks.items()):
            st, got, _ = gw.read(lba, 8, lun)
            if st != 0:
                errors += 1
            elif bytes(got) != data:
                miscompares += 1
        return len(self.blocks), errors, miscompares

    def check(self, report, name, gw):
        """verify() as one check of report (an ixtest.Reporter)."""
        n, errors, miscompares = self.verify(gw)
        return report.check(name, n > 0 and errors == 0 and miscompares == 0,
                            '%d acknowledged blocks on LUN %s (of %d acknowledged writes) read '
                            'through %s: %d errors, %d miscompares'
                            % (n, '+'.join(map(str, self.luns())), self.acked,
                               gw.name.upper(), errors, miscompares))

    def luns(self):
        return sorted({k[0] for k in self.blocks})
