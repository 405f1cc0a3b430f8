#!/usr/bin/env python3
"""The chaos run's checker: reads a history (JSON lines, tests/chaos/chaos.py) and the image as
Ceph exported it (`rbd export`, never read through ix) and says what went wrong.

  tests/chaos/check.py HISTORY IMAGE_EXPORT      exit 0: nothing found, 1: violations

Checks:
  lost        every block holds its last acknowledged write, or a later write of the client
              whose outcome was not GOOD (unknown: a timeout or a lost connection; or refused)
              that may have been applied; a block with no acknowledged write holds zeros or
              such a write. Anything else (an older write: a delayed write landed after a newer
              one was acknowledged; a write nobody made) is lost data.
  corrupt     a block (in the image or a read) that is not one whole write (torn, garbage,
              another block's data)
  stale-read  a GOOD read returned something other than the last write acknowledged before it
              or a later not-acknowledged write
  dual-writer a write acknowledged through gateway X that was sent after another gateway Y had
              taken the lock (Y's log says "owner" later than X's last "owner" line, and before
              the write started), or after X's Ceph client was blocklisted with no "owner" line
              of X since: blocklisted from the time the OSD had the map that carries the entry
              (osdwatch.py's lines: an OSD refuses the client from that map on and applies
              what reached it before; writes sent between the monitor's entry and then are
              counted in a note), else from the monitor's time (`ceph osd blocklist ls`: the
              entry's expiry less Ceph's default 1 h)
  no-owner    a write acknowledged through a gateway that never logged "owner" before
  pr-write    the unregistered initiator's write acknowledged while the reservation was held
              (not between a RELEASE's start and the next GOOD RESERVE's end), or one that
              the reservation refused (or that it never made) found in its blocks
  alua        after a fault, no round of REPORT TARGET PORT GROUPS through every gateway at
              once in which all that answered (two or more) named the same one group
              active/optimized, within rejoin_after_ms + two lock checks + osd_op_timeout_s
              + 2 s of its end (not judged when the next fault came first without such a
              round, or for two faults at once); or, outside every fault and that bound,
              two gateways that each reported their own group active/optimized at once
  pr-full-status
              after a fault, no round of READ FULL STATUS through every gateway at once in
              which all that answered (two or more) returned the same registrations and
              reservation (the generation aside), within the ALUA bound below (judged as alua)
  pr-ua       a registrant a PREEMPT removed was not told: its I_T nexus (on whichever gateway
              it is) registered again (after RESERVATION CONFLICT) without first getting a
              unit attention REGISTRATIONS PREEMPTED (6/2A/05; 6/2A/04 RESERVATIONS RELEASED or
              a 6/29/xx reset, which SPC-4 ranks above it, also count); judged by a
              registration the gateway answered, sent after the PREEMPT ended; not judged when the
              nexus logged in again meanwhile, counted in a note when its gateway was cut off
              from the cluster or stopped meanwhile (docs/ha.md, "Bad days")
  pr-disagree READ RESERVATION through every gateway at once: two answered differently (when
              the gateways that a fault cut off from the cluster or stopped then, or that are
              rejoining after it, are the only ones that differ: counted in a note,
              docs/ha.md "Bad days")
Availability (not a violation): for each fault, the seconds from its start to the next
acknowledged write; p50/p99/max per kind.
"""

import datetime
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chaosblk  # noqa: E402

BLOCKLIST_EXPIRE_S = 3600  # mon_osd_blocklist_default_expire


def load(path):
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def blocklist_time(until):
    """The time an entry was added, from its expiry ('2026-11-28T10:02:03.123456+0000')."""
    m = re.match(r'(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d):?(\d\d)', until)
    if not m:
        return None
    t = datetime.datetime.fromisoformat('%s%s:%s' % m.groups())
    return t.timestamp() - BLOCKLIST_EXPIRE_S


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def check(events, image):
    """{'ok', 'violations': [(kind, text)], 'notes', 'stats'} for a history and image bytes."""
    cfg = next((e for e in events if e.get('type') == 'config'), {})
    gw_ip = {ip: g for g, ip in cfg.get('gateways', {}).items()}
    bsz = cfg.get('block_size', chaosblk.BLOCK)
    ops = [e for e in events if e.get('type') == 'op']
    ops.sort(key=lambda e: e['n'])
    viol, notes = [], []

    # per block, the client's operations in order (one at a time: history order is real order)
    by_blk = {}
    for i, e in enumerate(ops):
        by_blk.setdefault(e['blk'], []).append(e)

    def allowed(writes):
        """Values a block may hold after these writes: (set, last acknowledged seq or None)."""
        last_ok = None
        for w in writes:
            if w['outcome'] == 'ok':
                last_ok = w
        vals = set()
        if last_ok is None:
            vals.add(None)
        else:
            vals.add((last_ok['writer'], last_ok['seq']))
        after = False if last_ok is not None else True
        for w in writes:
            if w is last_ok:
                after = True
                continue
            if after and w['outcome'] != 'ok':
                vals.add((w['writer'], w['seq']))
        return vals, last_ok

    def show(v):
        return 'zeros' if v is None else ('seq %d (writer %d)' % (v[1], v[0])
                                          if isinstance(v, tuple) else str(v))

    for blk, seq in sorted(by_blk.items()):
        writes = []
        for e in seq:
            if e['op'] == 'write':
                writes.append(e)
            elif e['outcome'] == 'ok' and 'got' in e:
                got = e['got']
                got = tuple(got) if isinstance(got, list) else got
                if got == 'bad':
                    viol.append(('corrupt', 'block %d: the read through %s at %.3f returned '
                                 'data that is not one whole write' % (blk, e.get('path'),
                                                                       e['t0'])))
                    continue
                vals, last = allowed(writes)
                if got not in vals:
                    viol.append(('stale-read', 'block %d: the read through %s at %.3f returned '
                                 '%s; the last acknowledged write was %s' % (
                                     blk, e.get('path'), e['t0'], show(got),
                                     show((last['writer'], last['seq'])) if last else 'none')))
    blocks_checked = 0
    nblocks = cfg.get('blocks') or (len(image) // bsz)
    final_from_failed = 0
    for blk in range(min(nblocks, len(image) // bsz)):
        data = image[blk * bsz:(blk + 1) * bsz]
        v = chaosblk.parse(data, blk)
        writes = [e for e in by_blk.get(blk, []) if e['op'] == 'write']
        if v == 'bad':
            viol.append(('corrupt', 'block %d of the image is not one whole write' % blk))
            continue
        vals, last = allowed(writes)
        blocks_checked += 1
        if v not in vals:
            known = {(w['writer'], w['seq']): w for w in writes}
            what = 'an older write (%s)' % known[v]['outcome'] if v in known else \
                'a write the client never made' if v is not None else 'zeros'
            viol.append(('lost', 'block %d holds %s: %s; the last acknowledged write was %s '
                         '(through %s, acknowledged at %.3f)' % (
                             blk, show(v), what,
                             show((last['writer'], last['seq'])) if last else 'none',
                             last.get('path') if last else '-', last['t1'] if last else 0)))
        elif v is not None and last is not None and v != (last['writer'], last['seq']):
            final_from_failed += 1
        elif v is not None and last is None:
            final_from_failed += 1
    if final_from_failed:
        notes.append('%d block(s) hold a later write whose outcome was not GOOD (allowed)'
                     % final_from_failed)

    # dual writers: lock-state lines per gateway, blocklist entries
    owner = {}
    for e in events:
        if e.get('type') == 'lock' and e.get('state') == 'owner':
            owner.setdefault(e['gw'], []).append(e['t'])
    # each gateway's Ceph clients (an open of the image logs the client and its address; a
    # restart or a rejoin opens it through a new one): a blocklist entry fences the client it
    # names, i.e. the gateway whose I/O went through that address; an address no gateway
    # logged (a history without client lines) is taken as the gateway of its IP, at once
    clients = {}
    for e in events:
        if e.get('type') == 'client':
            clients.setdefault(e['gw'], []).append((e['t'], e['addr']))
    for v in clients.values():
        v.sort()
    addr_gw = {a: g for g, v in clients.items() for _, a in v}

    def client_at(g, t):
        """The address gateway g's I/O went through at t (None: not known)."""
        c = [a for tc, a in clients.get(g, []) if tc <= t]
        return c[-1] if c else None
    # when the OSD enforced each entry (osdwatch.py): the map that first carries it, and the
    # first time the OSD was seen to have that map; an OSD refuses a blocklisted client only
    # from then on, and applies what reached it before. An entry the watcher did not see (an
    # older history, no python3-rados) counts from the monitor's time, which is earlier.
    entry_epoch = {}
    osd_maps = []
    for e in events:
        if e.get('type') == 'map-entry':
            entry_epoch.setdefault(e['addr'], e['epoch'])
        elif e.get('type') == 'osd-map' and isinstance(e.get('epoch'), int):
            osd_maps.append((e['t'], e['epoch']))
    osd_maps.sort()

    def enforced(addr, t_mon):
        ep = entry_epoch.get(addr)
        if ep is None:
            return t_mon
        return next((max(t, t_mon) for t, oe in osd_maps if oe >= ep), t_mon)
    fenced_at = {}   # gateway -> [(monitor's time, address or None, OSD's time)]
    for e in events:
        if e.get('type') == 'blocklist':
            a = e['addr']
            g = addr_gw.get(a)
            exact = g is not None
            if not exact:
                g = gw_ip.get(a.split(':')[0])
            t = blocklist_time(e.get('until', ''))
            if g and t:
                fenced_at.setdefault(g, []).append((t, a if exact else None, enforced(a, t)))
    for ts in owner.values():
        ts.sort()
    for ts in fenced_at.values():
        ts.sort()
    before_osd = []  # writes sent between the monitor's entry and the OSD's map

    def latest(ts, before):
        c = [t for t in ts if t <= before]
        return c[-1] if c else None

    for e in ops:
        if e['op'] != 'write' or e['outcome'] != 'ok':
            continue
        x = e['path']
        tx = latest(owner.get(x, []), e['t1'])
        if tx is None:
            viol.append(('no-owner', 'block %d seq %d acknowledged through %s at %.3f, which '
                         'never logged "owner" before' % (e['blk'], e['seq'], x, e['t1'])))
            continue
        for y, ts in owner.items():
            ty = latest(ts, e['t0'])
            if y != x and ty is not None and ty > tx:
                viol.append(('dual-writer', 'block %d seq %d acknowledged through %s (sent at '
                             '%.3f) after %s took the lock at %.3f (%s last took it at %.3f)'
                             % (e['blk'], e['seq'], x, e['t0'], y, ty, x, tx)))
        # a blocklisting of the client x's I/O went through (or of an unknown one of x's
        # IP) after x last took the lock; one of an earlier client of x (a killed instance
        # blocklisted later by a reservation change it could not acknowledge) fences nothing
        cur = client_at(x, e['t0'])
        tbs = [(tb, te) for tb, a, te in fenced_at.get(x, []) if tb <= e['t0'] and tb > tx and
               (a is None or cur is None or a == cur)]
        enforced_by_t0 = [b for b in tbs if b[1] <= e['t0']]
        if enforced_by_t0:
            tb, te = enforced_by_t0[-1]
            viol.append(('dual-writer', 'block %d seq %d acknowledged through %s (sent at '
                         '%.3f) after its Ceph client was blocklisted (monitor %.3f, the OSD '
                         'had the map by %.3f), with no "owner" since'
                         % (e['blk'], e['seq'], x, e['t0'], tb, te)))
        elif tbs:
            before_osd.append((e, tbs[-1]))
    if before_osd:
        e, (tb, te) = before_osd[0]
        notes.append('%d write(s) acknowledged by a gateway whose client the monitor had '
                     'blocklisted before they were sent, but sent before the OSD had the map '
                     'that carries the entry (an OSD applies what reaches it before that map; '
                     'the first: block %d seq %d through %s sent at %.3f, monitor %.3f, OSD '
                     'by %.3f)' % (len(before_osd), e['blk'], e['seq'], e['path'], e['t0'],
                                   tb, te))

    # persistent reservations: the unregistered initiator's writes are refused while a
    # reservation is held (gaps: from a RELEASE's start to the next GOOD RESERVE's end, and
    # before the first), a refused write never reaches the image, every gateway reports the
    # same reservation
    prs = sorted((e for e in events if e.get('type') == 'pr' and e.get('what') in
                  ('release', 'reserve')), key=lambda e: e['t0'])
    gaps, start = [], float('-inf')
    for e in prs:
        if e['what'] == 'release' and start is None:
            start = e['t0']
        elif e['what'] == 'reserve' and e['result'] == 'ok' and start is not None:
            gaps.append((start, e['t1']))
            start = None
    if start is not None:
        gaps.append((start, float('inf')))
    intr = [e for e in events if e.get('type') == 'intruder']
    refused = {}
    for e in intr:
        refused[(e['blk'], e['seq'])] = e['result'] == 'conflict'
        if e['result'] == 'ok' and not any(e['t1'] > a and e['t0'] < b for a, b in gaps):
            viol.append(('pr-write', 'the unregistered initiator\'s write (block %d seq %d) '
                         'through %s at %.3f was acknowledged while the reservation was held'
                         % (e['blk'], e['seq'], e['path'], e['t0'])))
    nintr = cfg.get('intruder_blocks', 0)
    for blk in range(nblocks, min(nblocks + nintr, len(image) // bsz)):
        v = chaosblk.parse(image[blk * bsz:(blk + 1) * bsz], blk)
        if v is None:
            continue
        if v == 'bad' or v[0] != 2 or refused.get((blk, v[1]), True):
            viol.append(('pr-write', 'block %d (the unregistered initiator\'s) holds %s, a '
                         'write the reservation refused (or none it made)' % (blk, show(v))))
    # a gateway cut off from the cluster keeps the last state it knew (docs/ha.md, persistent
    # reservations, "Bad days": the others blocklist it, so no write can use it) until it
    # rejoins after the fault: a disagreement of its alone then is counted, not a violation
    t = cfg.get('timeouts', {})
    slack = t.get('rejoin_after_ms', 5000) / 1000 + t.get('osd_op_timeout_s', 30) + 2
    cut = [(f['target'], f['t0'], f['t1'] + slack) for f in events if f.get('type') == 'fault'
           and f.get('kind') in ('part-ceph', 'stop')]
    # ... and a gateway whose client was blocklisted answers from its last state until it
    # opens the image again through a new client (its rejoin, or a restart): it cannot read
    # the object meanwhile, and may learn of the blocklisting late (an OSD down then)
    stale = list(cut)
    for g, ts in fenced_at.items():
        for tb, a, _ in ts:
            if a is None or a != client_at(g, tb):
                continue
            nxt = [tc for tc, _ in clients.get(g, []) if tc > tb]
            stale.append((g, tb, nxt[0] if nxt else float('inf')))
    stale_cut = 0
    for e in events:
        if e.get('type') == 'pr-views':
            good = {k: tuple(v) for k, v in e['views'].items() if isinstance(v, list)}
            if len(set(good.values())) <= 1:
                continue
            uncut = {g: v for g, v in good.items()
                     if not any(c == g and a <= e['t0'] <= b for c, a, b in stale)}
            if len(uncut) < len(good) and len(set(uncut.values())) <= 1:
                stale_cut += 1
                continue
            viol.append(('pr-disagree', 'READ RESERVATION at %.3f: %s' % (
                e['t0'], ', '.join('%s %s' % kv for kv in sorted(e['views'].items())))))
    if stale_cut:
        notes.append('%d READ RESERVATION rounds where only gateways cut off from the cluster '
                     '(or stopped) answered their last known state (docs/ha.md, "Bad days")'
                     % stale_cut)

    # ALUA: after each fault every gateway that answers reports the same one group
    # active/optimized within the bound (a stopped or cut-off gateway is fenced when it comes
    # back, rejoins after rejoin_after_ms and learns the holder at its next lock checks),
    # unless the next fault comes first
    bound = t.get('rejoin_after_ms', 5000) / 1000 + 2 * t.get('lock_check_ms', 1000) / 1000 + \
        t.get('osd_op_timeout_s', 30) + 2
    rounds = sorted((e for e in events if e.get('type') == 'alua-views'),
                    key=lambda e: e['t0'])
    fl = sorted((e for e in events if e.get('type') == 'fault'), key=lambda e: e['t0'])
    def agree(r):
        ao = [frozenset(g for g, st in v.items() if st == 'AO') for v in r['views'].values()]
        return len(ao) >= 2 and len(set(ao)) == 1 and len(ao[0]) == 1
    def judge(rounds, agree, what, show):
        """After each fault (not two at once), a round that agrees within the bound, unless
        the next fault or the run's end comes first: (faults judged, violations)."""
        judged, bad = 0, []
        for f in fl:
            end = f['t1'] + bound
            if any(g['t0'] < f['t1'] and g['t1'] > f['t0'] for g in fl if g is not f):
                continue  # overlapping faults (two at once): not judged
            nxt = min([g['t0'] for g in fl if g['t0'] >= f['t1']] + [float('inf')])
            win = [r for r in rounds if f['t1'] <= r['t0'] <= min(end, nxt)]
            if any(agree(r) for r in win):
                judged += 1
                continue
            if nxt < end or not rounds or rounds[-1]['t0'] < end:
                continue  # the next fault (or the end of the run) came first: not judged
            judged += 1
            last = show(win[-1]) if win else 'no answers'
            bad.append('after %s of %s (over at %.3f) the gateways did not agree on %s within '
                       '%.0f s: last %s' % (f['kind'], f.get('target'), f['t1'], what, bound,
                                            last))
        return judged, bad

    alua_judged, bad = judge(rounds, agree, 'one active/optimized group', lambda r: r['views'])
    viol += [('alua', b) for b in bad]
    # two gateways that each call their own group (gN: group N) active/optimized in one round
    # claim the lock both; never outside a fault and its bound (a stopped holder answers from
    # its old state for a moment after SIGCONT, before it finds itself fenced)
    claims = 0
    for r in rounds:
        own = sorted(g for g, v in r['views'].items() if v.get(g[1:]) == 'AO')
        if len(own) < 2 or any(f['t0'] <= r['t0'] <= f['t1'] + bound for f in fl):
            continue
        claims += 1
        if claims <= 5:
            viol.append(('alua', 'at %.3f %s each reported its own group active/optimized '
                         '(two gateways claim the lock), outside any fault\'s window: %s'
                         % (r['t0'], ' and '.join(own), r['views'])))

    # READ FULL STATUS: the same registrations and reservation through every gateway that
    # answers, after each fault, within the same bound
    def full_agree(r):
        good = [json.dumps(v) for v in r.get('full', {}).values() if isinstance(v, list)]
        return len(good) >= 2 and len(set(good)) == 1
    prounds = sorted((e for e in events if e.get('type') == 'pr-views' and 'full' in e),
                     key=lambda e: e['t0'])
    full_judged, bad = judge(prounds, full_agree, 'READ FULL STATUS', lambda r: r['full'])
    viol += [('pr-full-status', b) for b in bad]

    # a preempted registrant is told (a unit attention) before it registers again
    ua_judged, ua_cut = check_preempt_ua(events, cut, viol)
    if ua_cut:
        notes.append('%d preempted nexuses on a gateway cut off from the cluster (or stopped) '
                     'registered again without the unit attention (docs/ha.md, "Bad days")'
                     % ua_cut)

    # availability
    acks = sorted(e['t1'] for e in ops if e['op'] == 'write' and e['outcome'] == 'ok')
    faults = [e for e in events if e.get('type') == 'fault']
    avail = {}
    for f in faults:
        nxt = [t for t in acks if t >= f['t0']]
        if nxt:
            avail.setdefault(f['kind'], []).append(nxt[0] - f['t0'])
    outcomes = {}
    for e in ops:
        k = '%s-%s' % (e['op'], e['outcome'])
        outcomes[k] = outcomes.get(k, 0) + 1
    kinds = {}
    for f in faults:
        kinds[f['kind']] = kinds.get(f['kind'], 0) + 1
    counts = {}
    for k, _ in viol:
        counts[k] = counts.get(k, 0) + 1
    for e in intr:
        k = 'intruder-%s' % e['result'].split(' sense')[0]
        outcomes[k] = outcomes.get(k, 0) + 1
    for e in events:
        if e.get('type') == 'pr' and e.get('what') != 'register':
            k = '%s-%s' % (e['what'], 'ok' if e['result'] == 'ok' else 'not')
            outcomes[k] = outcomes.get(k, 0) + 1
    stats = {'ops': len(ops), 'outcomes': outcomes, 'faults': kinds,
             'blocks_checked': blocks_checked, 'violations': counts,
             'blocklisted': sum(len(v) for v in fenced_at.values()),
             'alua_judged': alua_judged, 'full_judged': full_judged,
             'ua_judged': ua_judged,
             'lock_moves': sum(len(v) for v in owner.values()),
             'recovery': {k: {'n': len(v), 'p50': pct(v, 50), 'p99': pct(v, 99),
                              'max': max(v)} for k, v in avail.items()}}
    return {'ok': not viol, 'violations': viol, 'notes': notes, 'stats': stats}


UA_TOLD = ('6/2a/05', '6/2a/04', '6/29/')  # registrations preempted, reservations released;
# a reset ranks above them


def check_preempt_ua(events, cut, viol):
    """pr-ua: every nexus of the client's key that a GOOD PREEMPT removed (all but the
    preempting one that were registered then) gets a unit attention that tells it before its
    next registration. (judged, excused because its gateway was cut off); viol gets the rest."""
    evs = sorted((e for e in events if e.get('type') in ('pr', 'ua', 'path', 'gw-start')
                  and ('t0' in e or 't' in e)), key=lambda e: e.get('t0', e.get('t')))
    registered, pending, judged, excused = set(), {}, 0, 0

    def when(e):
        return e.get('t0', e.get('t'))
    for e in evs:
        ty, nx = e['type'], e.get('nexus')
        if ty == 'ua' and nx in pending and e['sense'].startswith(UA_TOLD):
            del pending[nx]
            judged += 1
        elif ty == 'path' and nx in pending and e.get('what') == 'logged in':
            del pending[nx]  # a new login: that nexus's unit attentions start again
        elif ty == 'pr' and e.get('what') == 'register' and nx:
            # judged by a registration the gateway answered that was sent after the PREEMPT
            # was over (one sent before it answers an earlier conflict)
            if nx in pending and e.get('result') != 'unknown' and \
                    e.get('t0', e.get('t')) >= pending[nx]['t1']:
                pre = pending.pop(nx)
                judged += 1
                gw = nx.rsplit('/', 1)[-1]
                if any(c == gw and a <= when(e) and b >= pre['t0'] for c, a, b in cut):
                    excused += 1
                else:
                    viol.append(('pr-ua', '%s was removed by the PREEMPT through %s at %.3f '
                                 'but registered again at %.3f without a unit attention '
                                 '(6/2A/05) before' % (nx, pre['path'], pre['t0'], when(e))))
            if e.get('result') == 'status 0x00':
                registered.add(nx)
        elif ty == 'pr' and e.get('what') == 'preempt' and e.get('result') == 'ok':
            for other in registered - {nx}:
                pending.setdefault(other, e)
            registered &= {nx}
    return judged, excused


def summary(res):
    s = res['stats']
    out = ['chaos check: %s' % ('PASS' if res['ok'] else 'FAIL (%d violations)'
                                % len(res['violations'])),
           'operations: %d (%s)' % (s['ops'], ', '.join('%s %d' % kv for kv in
                                                         sorted(s['outcomes'].items()))),
           'faults: %s' % (', '.join('%s %d' % kv for kv in sorted(s['faults'].items()))
                           or 'none'),
           'blocks checked in the image: %d; owner lines: %d; blocklist entries: %d; faults '
           'judged for ALUA agreement: %d, for READ FULL STATUS agreement: %d; preempted '
           'nexuses judged for their unit attention: %d'
           % (s['blocks_checked'], s['lock_moves'], s['blocklisted'], s['alua_judged'],
              s.get('full_judged', 0), s.get('ua_judged', 0)),
           'violations: %s' % (', '.join('%s %d' % kv for kv in sorted(s['violations'].items()))
                               or '0 lost, 0 dual-writer, 0 stale reads, 0 corrupt, 0 PR violations')]
    for k, r in sorted(s['recovery'].items()):
        out.append('recovery after %-12s n=%-3d p50 %.1f s  p99 %.1f s  max %.1f s'
                   % (k, r['n'], r['p50'], r['p99'], r['max']))
    out += ['note: ' + n for n in res['notes']]
    out += ['VIOLATION %s: %s' % v for v in res['violations'][:50]]
    if len(res['violations']) > 50:
        out.append('... %d more' % (len(res['violations']) - 50))
    return '\n'.join(out)


def check_files(history, image_path):
    with open(image_path, 'rb') as f:
        image = f.read()
    return check(load(history), image)


def main(argv):
    if len(argv) != 3:
        print('usage: check.py HISTORY IMAGE_EXPORT', file=sys.stderr)
        return 2
    res = check_files(argv[1], argv[2])
    print(summary(res))
    return 0 if res['ok'] else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
