#!/usr/bin/env python3
"""Unit tests of the chaos checker (tests/chaos/check.py) on hand-made histories and images:
it must flag a lost write, a delayed write landing over a newer one, a dual-writer window (by
the lock lines and by the blocklist), a write acknowledged by a gateway that never owned the
lock, a stale read and a torn block, READ FULL STATUS that differs after a fault, a
preempted registrant not told by a unit attention, and pass a clean history. TAP output (meson's unit
suite runs it: tests/unit/meson.build)."""

import datetime
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chaosblk  # noqa: E402
import check  # noqa: E402

NBLK = 8


class H:
    """A history being written: operations one after another, 1 s apart unless told."""

    def __init__(self):
        self.ev = [{'type': 'config', 't': 0, 'blocks': NBLK, 'block_size': chaosblk.BLOCK,
                    'gateways': {'g1': '10.77.0.11', 'g2': '10.77.0.12'}}]
        self.n, self.seq, self.t = 0, 0, 1000.0
        self.image = bytearray(NBLK * chaosblk.BLOCK)

    def lock(self, gw, t, state='owner'):
        self.ev.append({'type': 'lock', 'gw': gw, 't': t, 'state': state})

    def write(self, blk, outcome='ok', path='g1', apply=True, t=None):
        """A write of the next value to blk; apply: the image gets it (as Ceph would)."""
        self.n += 1
        self.seq += 1
        self.t = t if t is not None else self.t + 1
        self.ev.append({'type': 'op', 'op': 'write', 'n': self.n, 'blk': blk, 'writer': 1,
                        'seq': self.seq, 'outcome': outcome, 'path': path, 'm0': self.t,
                        't0': self.t, 't1': self.t + 0.01})
        if apply:
            self.put(blk, self.seq)
        return self.seq

    def put(self, blk, seq):
        self.image[blk * chaosblk.BLOCK:(blk + 1) * chaosblk.BLOCK] = \
            chaosblk.make(blk, 1, seq)

    def read(self, blk, got, path='g1'):
        self.n += 1
        self.t += 1
        self.ev.append({'type': 'op', 'op': 'read', 'n': self.n, 'blk': blk, 'outcome': 'ok',
                        'path': path, 'm0': self.t, 't0': self.t, 't1': self.t + 0.01,
                        'got': got})

    def run(self):
        return check.check(self.ev, bytes(self.image))


def kinds(res):
    return sorted({k for k, _ in res['violations']})


def clean():
    h = H()
    h.lock('g1', 999)
    a = h.write(0)
    h.write(1)
    h.read(0, [1, a])
    h.write(0)
    h.write(2, outcome='unknown')                  # applied, not acknowledged: allowed
    h.write(3, outcome='unknown', apply=False)     # not applied: zeros allowed
    h.lock('g2', h.t + 0.5)
    h.write(1, path='g2')
    h.read(3, None, path='g2')
    h.ev.append({'type': 'fault', 'kind': 'kill', 't0': h.t + 0.2, 't1': h.t + 3})
    h.write(4, path='g2', t=h.t + 5)
    res = h.run()
    r = res['stats']['recovery'].get('kill', {})
    return res['ok'] and abs(r.get('max', 0) - 4.81) < 0.01, \
        '%s; recovery %s' % (res['violations'] or 'no violations', r)


def lost_write():
    h = H()
    h.lock('g1', 999)
    h.write(0)
    h.write(0, apply=False)  # acknowledged, never reached the image
    res = h.run()
    return kinds(res) == ['lost'], res['violations']


def lost_zeros():
    h = H()
    h.lock('g1', 999)
    h.write(5, apply=False)
    res = h.run()
    return kinds(res) == ['lost'], res['violations']


def delayed_write():
    """A write whose outcome was unknown lands after a newer one was acknowledged."""
    h = H()
    h.lock('g1', 999)
    old = h.write(0, outcome='unknown', apply=False)
    h.write(0)
    h.put(0, old)
    res = h.run()
    return kinds(res) == ['lost'], res['violations']


def dual_writer():
    h = H()
    h.lock('g1', 999)
    h.write(0)
    h.lock('g2', h.t + 0.5)      # g2 took the lock
    h.write(1, path='g1')        # ...and g1 still acknowledged a write sent after that
    res = h.run()
    return kinds(res) == ['dual-writer'], res['violations']


def dual_writer_handed_back():
    """g1 took the lock back before the write: no violation."""
    h = H()
    h.lock('g1', 999)
    h.lock('g2', 1000.5)
    h.lock('g1', 1001.5)
    h.write(1, path='g1', t=1002)
    res = h.run()
    return res['ok'], res['violations'] or 'no violations'


def blocklisted_writer():
    h = H()
    h.lock('g1', 999)
    h.write(0)
    t = h.t + 0.5 + check.BLOCKLIST_EXPIRE_S
    until = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%S.%f+0000')
    h.ev.append({'type': 'blocklist', 'addr': '10.77.0.11:0/12345', 'until': until})
    h.write(1, path='g1')
    res = h.run()
    return kinds(res) == ['dual-writer'] and 'blocklisted' in res['violations'][0][1], \
        res['violations']


def blocklist_at(h, t, addr):
    until = datetime.datetime.fromtimestamp(t + check.BLOCKLIST_EXPIRE_S,
                                            datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%S.%f+0000')
    h.ev.append({'type': 'blocklist', 'addr': addr, 'until': until})


def blocklisted_client(which):
    """g1's I/O went through 10.77.0.11:0/111, then through 10.77.0.11:0/222 (its client
    lines: a restart); `which` of them is blocklisted after g1 took the lock, then g1
    acknowledges a write."""
    h = H()
    h.ev.append({'type': 'client', 'gw': 'g1', 't': 998, 'gid': 5, 'addr': '10.77.0.11:0/111'})
    h.ev.append({'type': 'client', 'gw': 'g1', 't': 998.5, 'gid': 6, 'addr': '10.77.0.11:0/222'})
    h.lock('g1', 999)
    h.write(0)
    blocklist_at(h, h.t + 0.5, which)
    h.write(1, path='g1')
    return h.run()


def blocklisted_client_current():
    """The current client is blocklisted: the later write is a violation."""
    res = blocklisted_client('10.77.0.11:0/222')
    return kinds(res) == ['dual-writer'], res['violations']


def blocklisted_client_earlier():
    """The earlier client (a killed instance, fenced later by a reservation change it could
    not acknowledge) is blocklisted: that fences nothing alive."""
    res = blocklisted_client('10.77.0.11:0/111')
    return res['ok'], res['violations'] or 'no violations'


def blocklisted_osd(sent_after_s, osd_has=True):
    """g1's client is blocklisted at the monitor at tb; the entry is in map 7, which the OSD
    had 2 s later (osdwatch.py's lines; with osd_has False it never reported it); g1
    acknowledges a write sent sent_after_s after tb."""
    h = H()
    addr = '10.77.0.11:0/222'
    h.ev.append({'type': 'client', 'gw': 'g1', 't': 998, 'gid': 6, 'addr': addr})
    h.lock('g1', 999)
    h.write(0)
    tb = h.t + 0.5
    blocklist_at(h, tb, addr)
    h.ev.append({'type': 'osd-map', 't': tb - 1, 'epoch': 6})
    h.ev.append({'type': 'map-entry', 't': tb + 0.3, 'epoch': 7, 'addr': addr})
    if osd_has:
        h.ev.append({'type': 'osd-map', 't': tb + 2, 'epoch': 7})
    h.write(1, path='g1', t=tb + sent_after_s)
    return h.run()


def blocklisted_before_osd_map():
    """Sent after the monitor's entry, before the OSD had its map: applied by the OSD as
    Ceph does, counted in a note, not a violation."""
    res = blocklisted_osd(1)
    return res['ok'] and any('before the OSD had the map' in n for n in res['notes']), \
        (res['violations'], res['notes'])


def blocklisted_after_osd_map():
    """Sent after the OSD had the map with the entry: a violation."""
    res = blocklisted_osd(3)
    return kinds(res) == ['dual-writer'] and 'the OSD had the map' in res['violations'][0][1], \
        res['violations']


def blocklisted_osd_unknown():
    """The OSD never reported the map (the watcher's lines end first): judged from the
    monitor's time, the stricter."""
    res = blocklisted_osd(1, osd_has=False)
    return kinds(res) == ['dual-writer'], res['violations']


def no_owner():
    h = H()
    h.lock('g1', 999)
    h.write(0, path='g2')
    res = h.run()
    return kinds(res) == ['no-owner'], res['violations']


def stale_read():
    h = H()
    h.lock('g1', 999)
    a = h.write(0)
    h.write(0)
    h.read(0, [1, a])
    res = h.run()
    return kinds(res) == ['stale-read'], res['violations']


def torn_block():
    h = H()
    h.lock('g1', 999)
    h.write(0)
    h.image[100] ^= 0xff
    res = h.run()
    return kinds(res) == ['corrupt'], res['violations']


def pr_history():
    h = H()
    h.ev[0]['intruder_blocks'] = 2
    h.image += bytes(2 * chaosblk.BLOCK)
    h.lock('g1', 999)
    h.ev.append({'type': 'pr', 'what': 'reserve', 'path': 'g1', 't0': 1000, 't1': 1000.1,
                 'result': 'ok'})
    return h


def intruder(h, t, result, seq, blk=NBLK):
    h.ev.append({'type': 'intruder', 'blk': blk, 'writer': 2, 'seq': seq, 'path': 'g1',
                 't0': t, 't1': t + 0.01, 'result': result})


def pr_clean():
    h = pr_history()
    intruder(h, 999.5, 'ok', 1)      # before the first reservation
    intruder(h, 1001, 'conflict', 2)
    h.ev.append({'type': 'pr', 'what': 'release', 'path': 'g1', 't0': 1002, 't1': 1002.1,
                 'result': 'ok'})
    intruder(h, 1002.5, 'ok', 3)     # released
    h.ev.append({'type': 'pr', 'what': 'reserve', 'path': 'g2', 't0': 1003, 't1': 1003.1,
                 'result': 'ok'})
    h.image[NBLK * chaosblk.BLOCK:(NBLK + 1) * chaosblk.BLOCK] = chaosblk.make(NBLK, 2, 3)
    h.ev.append({'type': 'pr-views', 't0': 1004, 't1': 1004.1,
                 'views': {'g1': [7, 5], 'g2': [7, 5], 'g3': 'status 0x02 sense 2/04/0a'}})
    res = h.run()
    return res['ok'], res['violations'] or 'no violations'


def pr_write_reserved():
    h = pr_history()
    intruder(h, 1001, 'ok', 1)
    res = h.run()
    return kinds(res) == ['pr-write'], res['violations']


def pr_refused_landed():
    h = pr_history()
    intruder(h, 1001, 'conflict', 1, blk=NBLK + 1)
    h.image[(NBLK + 1) * chaosblk.BLOCK:] = chaosblk.make(NBLK + 1, 2, 1)
    res = h.run()
    return kinds(res) == ['pr-write'], res['violations']


def pr_stale_cut():
    """Two gateways cut off from the cluster answer the old state, the one still connected
    the new one: a note, not a violation."""
    h = pr_history()
    h.ev[0]['timeouts'] = {'rejoin_after_ms': 1000, 'osd_op_timeout_s': 1}
    for g in ('g2', 'g3'):
        h.ev.append({'type': 'fault', 'kind': 'part-ceph', 'target': g, 't0': 1001,
                     't1': 1003})
    h.ev.append({'type': 'pr-views', 't0': 1004, 't1': 1004.1,
                 'views': {'g1': [None, None], 'g2': [7, 5], 'g3': [7, 5]}})
    res = h.run()
    return res['ok'] and res['notes'], res['violations'] or res['notes']


def pr_stale_blocklisted():
    """g2's client was blocklisted at 1002 (not during a fault of its own); it answers its last
    state until it opens the image through a new client (1010): a note; after that, a
    violation."""
    h = pr_history()
    h.ev[0]['timeouts'] = {'rejoin_after_ms': 1000, 'osd_op_timeout_s': 1}
    h.ev.append({'type': 'client', 'gw': 'g2', 't': 990, 'gid': 7, 'addr': '10.77.0.12:0/7'})
    blocklist_at(h, 1002, '10.77.0.12:0/7')
    h.ev.append({'type': 'pr-views', 't0': 1008, 't1': 1008.1,
                 'views': {'g1': [None, None], 'g2': [7, 5]}})
    h.ev.append({'type': 'client', 'gw': 'g2', 't': 1010, 'gid': 8, 'addr': '10.77.0.12:0/8'})
    ok1 = h.run()
    h.ev.append({'type': 'pr-views', 't0': 1011, 't1': 1011.1,
                 'views': {'g1': [None, None], 'g2': [7, 5]}})
    res = h.run()
    return ok1['ok'] and ok1['notes'] and kinds(res) == ['pr-disagree'], \
        (ok1['violations'] or ok1['notes'], res['violations'])


def pr_disagree():
    h = pr_history()
    h.ev.append({'type': 'pr-views', 't0': 1004, 't1': 1004.1,
                 'views': {'g1': [7, 5], 'g2': [None, None]}})
    res = h.run()
    return kinds(res) == ['pr-disagree'], res['violations']


def alua_rounds(split):
    h = H()
    h.ev[0]['timeouts'] = {'rejoin_after_ms': 1000, 'lock_check_ms': 1000, 'osd_op_timeout_s': 1}
    h.lock('g1', 999)
    h.ev.append({'type': 'fault', 'kind': 'stop', 'target': 'g2', 't0': 1000, 't1': 1001})
    for i in range(12):
        v = {'g1': {'1': 'AO', '2': 'standby'}, 'g2': {'1': 'AO', '2': 'standby'}}
        if split:
            v['g2'] = {'1': 'standby', '2': 'AO'}
        h.ev.append({'type': 'alua-views', 't0': 1001 + i, 't1': 1001.1 + i, 'views': v})
    return h.run()


def alua_two_claims():
    """Long after the fault, g1 and g2 each call their own group active/optimized."""
    h = H()
    h.ev[0]['timeouts'] = {'rejoin_after_ms': 1000, 'lock_check_ms': 1000, 'osd_op_timeout_s': 1}
    h.lock('g1', 999)
    h.ev.append({'type': 'fault', 'kind': 'stop', 'target': 'g1', 't0': 1000, 't1': 1001})
    for i in range(3):  # inside the fault's bound: a resumed holder's moment, not judged
        h.ev.append({'type': 'alua-views', 't0': 1001 + i, 't1': 1001.1 + i,
                     'views': {'g1': {'1': 'AO', '2': 'standby'},
                               'g2': {'1': 'standby', '2': 'AO'}}})
    ok_so_far = h.run()['ok']
    h.ev.append({'type': 'alua-views', 't0': 1030, 't1': 1030.1,
                 'views': {'g1': {'1': 'AO', '2': 'standby'}, 'g2': {'1': 'standby', '2': 'AO'}}})
    res = h.run()
    return ok_so_far and kinds(res) == ['alua'] and \
        sum('claim' in v for _, v in res['violations']) == 1, res['violations']


def alua_agree():
    res = alua_rounds(False)
    return res['ok'] and res['stats']['alua_judged'] == 1, res['violations'] or 'agree'


def alua_split():
    res = alua_rounds(True)
    return kinds(res) == ['alua'], res['violations']


def full_rounds(differ):
    h = H()
    h.ev[0]['timeouts'] = {'rejoin_after_ms': 1000, 'lock_check_ms': 1000, 'osd_op_timeout_s': 1}
    h.lock('g1', 999)
    h.ev.append({'type': 'fault', 'kind': 'kill', 'target': 'g2', 't0': 1000, 't1': 1001})
    regs = [['00000000000000aa', 1, 0, 5, 1, '05'], ['00000000000000aa', 0, 0, 0, 2, '06']]
    for i in range(12):
        full = {'g1': regs, 'g2': regs, 'g3': 'status 0x02 sense 2/04/0b'}
        if differ:  # g2 never learnt that the second registration went
            full = {'g1': regs[:1], 'g2': regs}
        h.ev.append({'type': 'pr-views', 't0': 1001 + i, 't1': 1001.1 + i,
                     'views': {'g1': [170, 5], 'g2': [170, 5]}, 'full': full})
    return h.run()


def full_status_agree():
    res = full_rounds(False)
    return res['ok'] and res['stats']['full_judged'] == 1, res['violations'] or 'agree'


def full_status_differ():
    res = full_rounds(True)
    return kinds(res) == ['pr-full-status'], res['violations']


def preempt_history(ua, cut=False, relogin=False):
    """Nexuses A (g1), B (g2) and C (g3) register; A preempts; B gets ua (or not) and
    registers again after its conflict; C is never heard of again (nothing to judge)."""
    h = H()
    h.lock('g1', 999)
    for t, nx in ((1000, 'A'), (1000.1, 'B'), (1000.2, 'C')):
        h.ev.append({'type': 'pr', 'what': 'register', 'nexus': nx + '/g%d' % (ord(nx) - 64),
                     't': t, 'result': 'status 0x00'})
    h.ev.append({'type': 'pr', 'what': 'preempt', 'nexus': 'A/g1', 'path': 'g1', 't0': 1001,
                 't1': 1001.2, 'result': 'ok'})
    h.ev.append({'type': 'ua', 'nexus': 'B/g2', 'path': 'g2', 't': 1001.5,
                 'sense': '6/2a/06'})  # an ALUA change does not tell it
    if ua:
        h.ev.append({'type': 'ua', 'nexus': 'B/g2', 'path': 'g2', 't': 1001.6, 'sense': ua})
    if cut:
        h.ev.append({'type': 'fault', 'kind': 'part-ceph', 'target': 'g2', 't0': 1000.5,
                     't1': 1003})
    if relogin:
        h.ev.append({'type': 'path', 'what': 'logged in', 'nexus': 'B/g2', 'path': 'g2',
                     't': 1001.8})
    # a registration sent before the PREEMPT (answering an earlier conflict) and one that
    # timed out say nothing
    h.ev.append({'type': 'pr', 'what': 'register', 'nexus': 'B/g2', 't0': 1000.9, 't': 1001.3,
                 'result': 'status 0x00'})
    h.ev.append({'type': 'pr', 'what': 'register', 'nexus': 'B/g2', 't0': 1001.7, 't': 1001.9,
                 'result': 'unknown'})
    h.ev.append({'type': 'pr', 'what': 'register', 'nexus': 'B/g2', 't0': 1002, 't': 1002.1,
                 'result': 'status 0x00'})
    return h.run()


def preempt_told():
    res = preempt_history('6/2a/04')
    return res['ok'] and res['stats']['ua_judged'] == 1, res['violations'] or 'told'


def preempt_not_told():
    res = preempt_history(None)
    return kinds(res) == ['pr-ua'] and 'B/g2' in res['violations'][0][1], res['violations']


def preempt_not_told_cut():
    res = preempt_history(None, cut=True)
    return res['ok'] and any('preempted nexuses' in n for n in res['notes']), \
        (res['violations'], res['notes'])


def preempt_relogin():
    res = preempt_history(None, relogin=True)
    return res['ok'] and res['stats']['ua_judged'] == 0, res['violations'] or 'not judged'


TESTS = [clean, lost_write, lost_zeros, delayed_write, dual_writer, dual_writer_handed_back,
         blocklisted_writer, blocklisted_client_current, blocklisted_client_earlier,
         blocklisted_before_osd_map, blocklisted_after_osd_map, blocklisted_osd_unknown,
         pr_stale_blocklisted, no_owner, stale_read, torn_block, pr_clean, pr_write_reserved,
         pr_refused_landed, pr_stale_cut, pr_disagree, alua_agree, alua_split,
         alua_two_claims, full_status_agree, full_status_differ, preempt_told, preempt_not_told,
         preempt_not_told_cut, preempt_relogin]


def main():
    print('1..%d' % len(TESTS))
    failed = 0
    for i, t in enumerate(TESTS, 1):
        try:
            ok, detail = t()
        except Exception:  # noqa: BLE001
            ok, detail = False, traceback.format_exc()
        print('%s %d - %s' % ('ok' if ok else 'not ok', i, t.__name__))
        if not ok:
            failed += 1
            print('# ' + str(detail).replace('\n', '\n# '))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
