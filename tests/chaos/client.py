#!/usr/bin/env python3
"""The chaos run's client: a multipath initiator in Python (tests/lib/ixiscsi.py sessions),
one session per gateway, run by tests/chaos/chaos.py inside the client's network namespace.

  client.py CONFIG.json      (paths, target, timeouts, blocks, ops, seed, history, stop file)

Path choice as Linux's scsi_dh_alua and dm-multipath do it: REPORT TARGET PORT GROUPS through
the live paths, I/O to the path whose gateway reports its own group active/optimized; NOT READY
transitioning (2/04/0A), becoming ready and unit attentions are retried on the same path,
standby / unavailable (2/04/0B, 0C) make it ask again; a path whose command timed out or whose
connection broke is dead (its session closed; it is logged in again, at most every
`relogin_s`); once the active path has been dead for `replacement_s` (open-iscsi's replacement
timeout) or nobody is active/optimized, SET TARGET PORT GROUPS through another live path asks
its gateway to take over (explicit failover). Each operation is retried until it succeeds or
`op_timeout_s` passed.

One operation at a time: a write of one 4 KiB block (tests/chaos/chaosblk.py: a unique value
per write) or a read of one, of blocks 0 .. blocks-1 of LUN 0 (inside the LU), at most `ops`
operations, until the stop file appears. Every operation is one JSON line of the history:
its outcome (ok; error: every attempt was refused, with the last sense; unknown: an attempt
timed out or lost its connection and none succeeded), the attempt that decided it (path,
monotonic and wall start/end) and every attempt.

A verifying client: when a path dies (its command timed out or its connection broke), the
blocks of the last READBACK writes acknowledged through it are read back first, through
whichever path is then active ("verify": true in their history lines): a write its gateway
acknowledged but never made durable shows there as a stale read, rather than only when the
random workload happens to read that block before writing it again.
"""

import json
import os
import random
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
sys.path.insert(0, HERE)
import chaosblk  # noqa: E402
import ixha  # noqa: E402
import ixiscsi as X  # noqa: E402

BS = 512
READBACK = 16  # a dead path's last acknowledged writes read back
SECTORS = chaosblk.BLOCK // BS


def isid(rng):
    """A random-type ISID (RFC 7143 11.12.5) from the seed."""
    return bytes([0x80, 0x00]) + rng.getrandbits(24).to_bytes(3, 'big') + \
        bytes([rng.getrandbits(8)])


def parse_full_status(d):
    """READ FULL STATUS parameter data (SPC-4 6.16.5) as a sorted list of [key, R_HOLDER,
    ALL_TG_PT, scope/type (of the holder), relative target port, TransportID (hex)]: the
    generation left out (gateways agree on the registrations, not on when they counted)."""
    d = bytes(d)
    if len(d) < 8:
        return 'short: %d bytes' % len(d)
    end, at, out = min(len(d), 8 + struct.unpack('>I', d[4:8])[0]), 8, []
    while at + 24 <= end:
        key, flags, st = struct.unpack('>QxxxxBB', d[at:at + 14])
        rel, tlen = struct.unpack('>H', d[at + 18:at + 20])[0], \
            struct.unpack('>I', d[at + 20:at + 24])[0]
        tid = d[at + 24:at + 24 + tlen].rstrip(b'\0').hex()
        out.append(['%016x' % key, flags & 1, (flags >> 1) & 1, st if flags & 1 else 0, rel,
                    tid])
        at += 24 + tlen
    return sorted(out)


def now():
    return time.monotonic(), time.time()


def sense_str(sense):
    k = ixha.sense3(sense) if sense else None
    return '%x/%02x/%02x' % k if k else ''


class Path:
    """One gateway's path: its session (None while dead)."""

    def __init__(self, cl, name, host, port, group, initiator=None, isid=None, key=0):
        self.cl, self.name, self.host, self.port, self.group = cl, name, host, port, group
        self.initiator = initiator or cl.cfg['initiator']
        self.isid = isid  # fixed: a new login is the same I_T nexus (its registration stays)
        self.key = key  # registered with this key at each login (0: never)
        self.s = None
        self.dead_since = None  # monotonic time the path went dead (None: up or never tried)
        self.last_try = -1e9

    def up(self):
        """Logged in (again if it was dead and relogin_s passed); False when it is not."""
        if self.s is not None:
            return True
        t = time.monotonic()
        if t - self.last_try < self.cl.cfg['relogin_s']:
            return False
        self.last_try = t
        try:
            s = X.Session(self.host, self.port, initiator=self.initiator,
                          target=self.cl.cfg['target'], timeout=self.cl.cfg['login_s'],
                          isid=self.isid)
            s.login()
            s.lun = 0
        except Exception as e:  # noqa: BLE001
            self.cl.event('path', path=self.name, what='login failed: %s' % type(e).__name__)
            if self.dead_since is None:
                self.dead_since = t
            return False
        self.s, self.dead_since = s, None
        self.cl.event('path', path=self.name, what='logged in', ini=self.initiator[-8:],
                      nexus=self.nexus())
        if self.key:
            self.register()
        return self.s is not None

    def register(self):
        """REGISTER AND IGNORE EXISTING KEY with self.key on this nexus."""
        cdb, params = ixha.prout_cdb(6, 0, 0, self.key)
        m0, w0 = now()
        for _ in range(3):
            r = self.scsi(cdb, self.cl.cfg['cmd_s'], write_data=params)
            if r is None or not (r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                break
        self.cl.event('pr', what='register', path=self.name, ini=self.initiator[-8:],
                      nexus=self.nexus(), m0=round(m0, 4), t0=round(w0, 4),
                      t1=round(time.time(), 4),
                      result='unknown' if r is None else ixha.fmt(r[0], r[2]))

    def down(self, why):
        if self.s is not None:
            try:
                self.s.close()
            except Exception:  # noqa: BLE001
                pass
        self.s = None
        if self.dead_since is None:
            self.dead_since = time.monotonic()
        self.cl.event('path', path=self.name, what='dead: ' + why)
        self.cl.path_died(self)

    def scsi(self, cdb, timeout, **kw):
        """(status, data, sense) or None when the answer is unknown (the path is then dead)."""
        if not self.up():
            return None
        try:
            st, data, sense, _ = self.s.scsi(bytes(cdb), timeout=timeout, **kw)
        except Exception as e:  # noqa: BLE001
            self.down(type(e).__name__)
            return None
        if st == 2 and sense and ixha.sense3(sense)[0] == 6:  # every unit attention seen
            self.cl.event('ua', nexus=self.nexus(), path=self.name, sense=sense_str(sense))
        return st, data, sense or b''

    def nexus(self):
        """This path's I_T nexus, as the history names it: initiator/ISID/gateway."""
        return '%s/%s/%s' % (self.initiator[-8:], (self.isid or b'').hex(), self.name)


class Client:
    def __init__(self, cfg):
        self.cfg = cfg
        self.rng = random.Random(cfg['seed'])
        self.hist = open(cfg['history'], 'a', buffering=1)
        self.mu = threading.Lock()
        self.key = cfg.get('pr_key', 0)
        self.paths = [Path(self, p['name'], p['host'], p['port'], p['group'],
                           isid=isid(self.rng), key=self.key) for p in cfg['paths']]
        self.active = None
        self.seq = 0
        self.last_stpg = -1e9
        self.trans_since = {}  # path -> when its gateway first said its group transitions
        self.recent = {}  # I/O path name -> its last READBACK acknowledged writes' blocks
        self.verify = []  # blocks to read back next (a path died)

    def path_died(self, p):
        """The I/O path p died: its last acknowledged writes are read back next (any thread
        may call it: list operations are atomic)."""
        if p in self.paths:
            blks = self.recent.pop(p.name, [])
            self.verify.extend(blks)

    def event(self, etype, **kw):
        kw['type'] = etype
        if 't0' not in kw:
            m, w = now()
            kw.update(m=round(m, 4), t=round(w, 4))
        with self.mu:
            self.hist.write(json.dumps(kw) + '\n')

    # -- path choice
    def survey(self):
        """{path: {group: state}} of REPORT TARGET PORT GROUPS through every live path, the
        paths asked at once (a dead one costs its timeout once, not once per path)."""
        out = {}

        def ask(p):
            for _ in range(3):
                r = p.scsi(ixha.rtpg_cdb(), self.cfg['rtpg_s'], read_len=1024)
                if r is None:
                    return
                st, d, sense = r
                if st == 0:
                    out[p.name] = ixha.rtpg_states(d)
                    return
                if not (st == 2 and ixha.sense3(sense)[0] == 6):
                    return
        ths = [threading.Thread(target=ask, args=(p,)) for p in self.paths]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        return out

    def choose(self):
        """The path to send I/O to, or None for now (after a pause or a take-over attempt).
        As scsi_dh_alua: a gateway reporting its own group active/optimized is used; while a
        group is transitioning, wait (at most transition_s, the IMPLICIT TRANSITION TIME the
        gateways report); while the active/optimized group's path is dead, wait the
        replacement timeout; then (or when nobody is active/optimized) SET TARGET PORT
        GROUPS through a live standby path."""
        if self.active is not None and self.active.s is not None:
            return self.active
        views = self.survey()
        t = time.monotonic()
        for p in self.paths:
            own = views.get(p.name, {}).get(p.group)
            if own == ixha.TRANS:
                self.trans_since.setdefault(p.name, t)
            else:
                self.trans_since.pop(p.name, None)
            if own == ixha.AO:
                if self.active is not p:
                    self.event('path', path=p.name, what='active')
                self.active = p
                return p
        if any(t - t0 < self.cfg['transition_s'] for t0 in self.trans_since.values()):
            time.sleep(0.2)
            return None
        ao = {g for v in views.values() for g, st in v.items() if st == ixha.AO}
        holder = [p for p in self.paths if p.group in ao]
        if holder and all(p.dead_since is not None and t - p.dead_since <
                          self.cfg['replacement_s'] for p in holder):
            time.sleep(0.2)
            return None
        live = [p for p in self.paths if views.get(p.name, {}).get(p.group) == ixha.STANDBY]
        if not live or t - self.last_stpg < 1.0:
            time.sleep(0.2)
            return None
        p = self.rng.choice(live)
        self.last_stpg = t
        cdb, params = ixha.stpg_cdb([(ixha.AO, p.group)])
        m0, w0 = now()
        for _ in range(4):
            r = p.scsi(cdb, self.cfg['stpg_s'], write_data=params)
            if r is not None and r[0] == 0x18 and p.key:
                # SET TARGET PORT GROUPS is in the write class: a nexus a PREEMPT removed
                # gets RESERVATION CONFLICT; register it again and ask again
                p.register()
            elif not (r is not None and r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                break  # a unit attention: again, at once, as the kernel does
        m1, w1 = now()
        res = 'unknown' if r is None else ixha.fmt(r[0], r[2])
        self.event('stpg', path=p.name, m0=round(m0, 4), t0=round(w0, 4), t1=round(w1, 4),
                   result=res, views={k: ixha.show(v) for k, v in views.items()})
        if r is not None and r[0] == 0:
            self.active = p
            return p
        return None

    # -- operations
    def op(self, kind, blk, data=None):
        """Retry one operation until it succeeds or op_timeout_s: (outcome, deciding attempt,
        attempts, data read)."""
        lba = blk * SECTORS
        if kind == 'write':
            cdb = bytes([0x8a, 0]) + struct.pack('>QIBB', lba, SECTORS, 0, 0)
            kw = {'write_data': data}
        else:
            cdb = bytes([0x88, 0]) + struct.pack('>QIBB', lba, SECTORS, 0, 0)
            kw = {'read_len': chaosblk.BLOCK}
        end = time.monotonic() + self.cfg['op_timeout_s']
        attempts, unknown, last = [], None, None
        while time.monotonic() < end:
            p = self.choose()
            if p is None:
                continue
            m0, w0 = now()
            r = p.scsi(cdb, self.cfg['cmd_s'], **kw)
            m1, w1 = now()
            a = {'path': p.name, 'm0': round(m0, 4), 't0': round(w0, 4), 'm1': round(m1, 4),
                 't1': round(w1, 4)}
            if r is None:
                a['result'] = 'unknown'
                attempts.append(a)
                unknown = a
                self.active = None if self.active is p else self.active
                continue
            st, got, sense = r
            a['result'] = 'ok' if st == 0 else ixha.fmt(st, sense)
            attempts.append(a)
            if st == 0:
                return 'ok', a, attempts, got
            last = a
            k = ixha.sense3(sense) if st == 2 and sense else None
            if k and k[0] == 6:
                continue
            if st == 0x18 and p.key:  # preempted (PR traffic): register this nexus again
                p.register()
                continue
            if k and k[:2] == (2, 0x04) and k[2] in (0x0b, 0x0c):
                self.active = None
                continue
            time.sleep(0.2)  # transitioning, becoming ready, busy, anything else: again
        return ('unknown' if unknown else 'error'), (unknown or last), attempts, None

    def run(self):
        cfg = self.cfg
        n = 0
        self.event('client-start', cfg={k: v for k, v in cfg.items() if k != 'paths'})
        t_start = time.monotonic()
        while n < cfg['ops'] and not os.path.exists(cfg['stop_file']):
            # at most cfg['rate'] operations a second: the history of a long run stays a size
            # that can be read back, whatever the machine's speed
            ahead = t_start + n / cfg['rate'] - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            n += 1
            verify = bool(self.verify)
            if verify:  # a dead path's last acknowledged writes first
                blk, write = self.verify.pop(0), False
            else:
                blk = self.rng.randrange(cfg['blocks'])
                write = self.rng.random() < cfg['write_ratio']
            if write:
                self.seq += 1
                out, a, attempts, _ = self.op('write', blk,
                                              chaosblk.make(blk, cfg['writer'], self.seq))
                rec = {'op': 'write', 'n': n, 'blk': blk, 'writer': cfg['writer'],
                       'seq': self.seq}
                if out == 'ok' and a:
                    r = self.recent.setdefault(a['path'], [])
                    r.append(blk)
                    del r[:-READBACK]
            else:
                out, a, attempts, got = self.op('read', blk)
                rec = {'op': 'read', 'n': n, 'blk': blk}
                if verify:
                    rec['verify'] = True
                if out == 'ok':
                    v = chaosblk.parse(got, blk)
                    rec['got'] = v if v in (None, 'bad') else list(v)
            rec['outcome'] = out
            if len(attempts) > 1 or out != 'ok':
                rec['attempts'] = attempts
            if a:
                rec.update(path=a['path'], m0=a['m0'], t0=a['t0'], t1=a['t1'])
                if a['result'] not in ('ok', 'unknown'):
                    rec['result'] = a['result']
            self.event('op', **rec)
        self.event('client-end', ops=n)
        for p in self.paths:
            if p.s is not None:
                try:
                    p.s.close()
                except Exception:  # noqa: BLE001
                    pass


class PrActor:
    """Persistent-reservation traffic beside the client's I/O: nexuses of the client's own
    (other ISIDs, registered with its key) hold a Write Exclusive - Registrants Only
    reservation and move it between gateways (RELEASE through the holder's path and RESERVE
    through another; or PREEMPT through another, which also removes the client's other
    registrations: its I/O registers again on RESERVATION CONFLICT), READ RESERVATION goes
    through every gateway at once (they must agree), and an unregistered initiator writes its
    own blocks through a random gateway (the reservation must refuse it, except while it is
    released). Every step is a history event."""

    def __init__(self, cl):
        self.cl, cfg = cl, cl.cfg
        self.rng = random.Random(cfg['seed'] + 1)
        self.mine = [Path(cl, p['name'], p['host'], p['port'], p['group'],
                          isid=isid(self.rng), key=cl.key) for p in cfg['paths']]
        self.intruder = [Path(cl, p['name'], p['host'], p['port'], p['group'],
                              initiator=cfg['intruder'], isid=isid(self.rng))
                         for p in cfg['paths']]
        self.holder = None
        self.seq = 0

    def prout(self, p, sa, sakey=0, what='', retry=False):
        cdb, params = ixha.prout_cdb(sa, 5, self.cl.key, sakey)
        m0, w0 = now()
        r = None
        for _ in range(3):
            r = p.scsi(cdb, self.cl.cfg['cmd_s'], write_data=params)
            if r is None or not (r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                break
        if r is not None and r[0] == 0x18 and not retry:  # preempted meanwhile: register
            p.register()
            return self.prout(p, sa, sakey, what, True)
        res = 'unknown' if r is None else 'ok' if r[0] == 0 else ixha.fmt(r[0], r[2])
        self.cl.event('pr', what=what, path=p.name, nexus=p.nexus(), m0=round(m0, 4),
                      t0=round(w0, 4), t1=round(time.time(), 4), result=res)
        return res

    def views(self):
        """READ RESERVATION, then READ FULL STATUS, through every gateway at once."""
        out, full = {}, {}

        def ask(p):
            for _ in range(3):
                r = p.scsi(ixha.prin_cdb(1, 64), self.cl.cfg['rtpg_s'], read_len=64)
                if r is None:
                    return
                if r[0] == 0:
                    _, key, typ = ixha.parse_reservation(r[1])
                    out[p.name] = [key, typ]
                    break
                if not (r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                    out[p.name] = ixha.fmt(r[0], r[2])
                    return
            for _ in range(3):
                r = p.scsi(ixha.prin_cdb(3, 4096), self.cl.cfg['rtpg_s'], read_len=4096)
                if r is None:
                    return
                if r[0] == 0:
                    full[p.name] = parse_full_status(r[1])
                    return
                if not (r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                    full[p.name] = ixha.fmt(r[0], r[2])
                    return
        m0, w0 = now()
        ths = [threading.Thread(target=ask, args=(p,)) for p in self.mine]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        self.cl.event('pr-views', m0=round(m0, 4), t0=round(w0, 4), t1=round(time.time(), 4),
                      views=out, full=full)

    def alua_views(self):
        """REPORT TARGET PORT GROUPS through every gateway at once (the checker wants them to
        agree on the owner soon after each fault)."""
        out = {}

        def ask(p):
            for _ in range(3):
                r = p.scsi(ixha.rtpg_cdb(), self.cl.cfg['rtpg_s'], read_len=1024)
                if r is None:
                    return
                if r[0] == 0:
                    out[p.name] = {str(g): ixha.NAMES.get(st, hex(st))
                                   for g, st in ixha.rtpg_states(r[1]).items()}
                    return
                if not (r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                    return
        m0, w0 = now()
        ths = [threading.Thread(target=ask, args=(p,)) for p in self.mine]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        self.cl.event('alua-views', m0=round(m0, 4), t0=round(w0, 4),
                      t1=round(time.time(), 4), views=out)

    def intrude(self):
        # mostly through the path the client uses (the others refuse it as standby first)
        act = self.cl.active
        p = self.rng.choice(self.intruder)
        if act is not None and self.rng.random() < 0.8:
            p = self.intruder[self.cl.paths.index(act)]
        blk = self.cl.cfg['blocks'] + self.rng.randrange(self.cl.cfg['intruder_blocks'])
        self.seq += 1
        data = chaosblk.make(blk, 2, self.seq)
        cdb = bytes([0x8a, 0]) + struct.pack('>QIBB', blk * SECTORS, SECTORS, 0, 0)
        m0, w0 = now()
        r = None
        for _ in range(3):
            r = p.scsi(cdb, self.cl.cfg['cmd_s'], write_data=data)
            if r is None or not (r[0] == 2 and ixha.sense3(r[2])[0] == 6):
                break
        res = 'unknown' if r is None else 'ok' if r[0] == 0 else \
            'conflict' if r[0] == 0x18 else ixha.fmt(r[0], r[2])
        self.cl.event('intruder', blk=blk, writer=2, seq=self.seq, path=p.name,
                      m0=round(m0, 4), t0=round(w0, 4), t1=round(time.time(), 4), result=res)

    def churn(self):
        others = [p for p in self.mine if p is not self.holder]
        q = self.rng.choice(others)
        if self.holder is not None and self.rng.random() < 0.25:
            if self.prout(q, 4, self.cl.key, 'preempt') == 'ok':
                self.holder = q
            return
        if self.holder is not None:
            self.prout(self.holder, 2, 0, 'release')
        if self.prout(q, 1, 0, 'reserve') == 'ok':
            self.holder = q

    def run(self):
        n = 0
        while not os.path.exists(self.cl.cfg['stop_file']):
            n += 1
            self.alua_views()
            self.views()
            self.intrude()
            if n % 3 == 1:
                self.churn()
            time.sleep(self.cl.cfg['pr_pause_s'])


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    cl = Client(cfg)
    pr = None
    if cfg.get('pr_key'):
        pr = threading.Thread(target=PrActor(cl).run, daemon=True)
        pr.start()
    cl.run()
    if pr is not None:
        pr.join(cfg['op_timeout_s'])
    return 0


if __name__ == '__main__':
    sys.exit(main())
