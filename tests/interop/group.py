#!/usr/bin/env python3
"""The gateway group (docs/ha.md "The gateway group"; issue 29, item 1) on a real single-node
Ceph cluster: three ix-target daemons (A, B, C) started from small local files (a "group"
section and a management socket, no targets) take two targets from one group document in
RADOS, written with Ceph's own `rados put`: one with an RBD LUN (active on every gateway), one
with an RBD LUN with exclusive_lock (its ALUA states follow the lock; libiscsi's tools cannot
log in through a standby path, so they use the first).
  start       every gateway serves the target: libiscsi's iscsi-inq reads the same LU (NAA)
              designator through each, and a relative target port designator;
  rtpg        REPORT TARGET PORT GROUPS through each gateway gives one table per target:
              groups 1, 2, 3 with ports [1], [2], [3] (derived from the membership, written
              nowhere), the same states on every gateway (all active/optimized; for the lock
              target only the lock holder's group);
  rados-json  `rados get` returns exactly the bytes that were put;
  edit        `ix-ctl lun create` through A adds a LUN to the group: iscsi-readcapacity16
              reads it through B and C within the bound (the notify, plus one poll interval
              of slack), and `rados get` shows the new generation with the LUN;
  acl         `ix-ctl acl create` with a CHAP secret through B: A and C refuse an initiator
              without CHAP, and no gateway's log holds the secret;
  stale       an admin's `rados put` (no notify) reaches the gateways at their poll; C, whose
              poll is long, still has the older generation: an edit of the same target
              through C is refused with the conflict error (-32007), nothing written;
  concurrent  A and B add a LUN to the same target at the same moment, three times: each
              answer is a success or the conflict error, at least one wins, and the document
              holds exactly the winners' LUNs (no lost update);
  catch-up    C stopped, a LUN added through A, C started again: C serves it at once;
  bad-gen     a generation that moves C's portal to an address C does not have: A and B apply
              it, C keeps serving the last good one (its old portal, without the new LUN) and
              `ix-ctl group status` through A says C failed that generation and why;
  restart-last-good  C restarted on that generation starts on the last good one it kept in
              its state_dir (mode 0600), and its status says why;
  damaged-json, damaged-check  `rados put` of text that is not JSON, then of a document that
              fails the checks (two members with one id): every gateway keeps serving its
              last good generation (iscsi-inq, iscsi-readcapacity16), A and B log it once
              each and say it in their status, `ix-ctl group status` says why;
  damaged-repaired  the last good document put back: no error left, health ok, and an edit
              through B is served by A and B;
  members     `ix-ctl group member add D --portal ...` then `group member remove D`: every
              gateway's REPORT TARGET PORT GROUPS lists group 4 then not;
  dry-run     `--dry-run` checks every member (a new member whose portal is no address is
              refused naming it) and writes nothing;
  sighup      SIGHUP re-reads the local file and the document;
  init        a gateway with an ordinary file writes a first document of its own
              (`ix-ctl group init gw-x --object ix.group2`): `rados get` shows it (generation 1,
              member gw-x with the gateway's portal, its target); a second init is refused;
              started again from a local file naming that group, it serves the same LUN;
  recipe      docs/ha.md's "from scratch in five commands": a document with two members by
              `rados put`, two gateways, a target and an RBD LUN with the lock created through
              one: both report the two derived groups, the holder's active/optimized;
  stop        SIGTERM stops every gateway cleanly (exit 0), and no sanitizer report is in
              any gateway's log.
Skips (77) only when Ceph, the libiscsi tools or ix-target are missing.
"""

import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixceph  # noqa: E402
import ixha  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, run, rpc  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:group'
INI = 'iqn.2024-01.org.ix.test:group-client'
CHAP_INI = 'iqn.2024-01.org.ix.test:group-chap'
SECRET = 'grp-Secret-7f3a9c21'
OBJ = 'ix.group'
NAA = '0x6001405a9b8c7d6e'
LOCK_IQN = 'iqn.2024-01.org.ix.test:group-lock'
NAA_LOCK = '0x6001405a9b8c7d6f'
POLL_MS = 500            # group.poll_ms of A and B
SLOW_POLL_MS = 60000     # C's: only the notify (or a restart) tells it
LOCK_CHECK_MS = 1000     # rbd.lock_check_ms, the default
MIB = 1 << 20

report = ixtest.Reporter('group')


def ctl(sock, *args):
    """ix-ctl's exit status and its output on one line (for the result lines)."""
    r = run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock] + list(args), 60)
    return r.returncode, ' '.join((r.stdout + r.stderr).split())


def readcap(port, lun, ini=INI):
    """Capacity in bytes through libiscsi's iscsi-readcapacity16, or None."""
    c = ixtest.readcap16(ini, 'iscsi://%s:%d/%s/%d' % (HOST, port, IQN, lun))
    return c if isinstance(c, int) else None


def inq83(port):
    """iscsi-inq's device identification page through a gateway: (the LU's NAA designator
    block, the relative target port designator block, exit status)."""
    r = run(['iscsi-inq', '-i', INI, '-e', '1', '-c', '131',
             'iscsi://%s:%d/%s/0' % (HOST, port, IQN)], 30, errors='replace')
    descs = r.stdout.split('DEVICE DESIGNATOR')[1:]
    lu = [d.strip() for d in descs if 'LOGICAL_UNIT' in d and 'NAA' in d]
    rel = [d.strip() for d in descs if 'RELATIVE_TARGET_PORT' in d]
    return (lu[0] if lu else None), (rel[0] if rel else None), r.returncode, r.stdout


def rtpg(port, iqn=IQN):
    """{group: (state, [ports])} through a raw session (unit attentions taken), or the error
    text."""
    try:
        s = X.Session(HOST, port, initiator=INI + '-rtpg', target=iqn)
        s.login()
        for _ in range(4):
            st, data, sense, _ = s.scsi(ixha.rtpg_cdb(), read_len=1024)
            if st != 2 or X.sense3(sense)[0] != 6:
                break
        s.close()
    except Exception as e:  # noqa: BLE001
        return 'error: %s' % e
    if st != 0:
        return ixha.fmt(st, sense)
    groups, _, _ = ixha.parse_rtpg(data)
    return {g: (v[0], v[3]) for g, v in groups.items()}


def doc_get(cl):
    return cl.rados('-p', 'rbd', 'get', OBJ, '-')


def wait(fn, secs, step=0.1):
    """fn() until it is truthy or secs passed: (value, seconds)."""
    t0 = time.monotonic()
    while True:
        v = fn()
        if v or time.monotonic() - t0 > secs:
            return v, time.monotonic() - t0
        time.sleep(step)


class Gw:
    def __init__(self, tmp, conf, name, poll_ms):
        self.name, self.tmp, self.conf, self.poll_ms = name, tmp, conf, poll_ms
        self.port = ixtest.free_port()
        self.sock = os.path.join(tmp, '%s.sock' % name)
        self.cfg = os.path.join(tmp, '%s.json' % name)
        self.d = None
        self.state = None   # global.state_dir: where it keeps the last good document

    def write_local(self):
        glob = {'mgmt_socket': self.sock}
        if self.state:
            os.makedirs(self.state, exist_ok=True)
            glob['state_dir'] = self.state
        with open(self.cfg, 'w') as f:
            json.dump({'group': {'pool': 'rbd', 'object': OBJ, 'member': self.name,
                                 'conf': self.conf, 'poll_ms': self.poll_ms},
                       'global': glob}, f, indent=1)

    def start(self, append=False):
        self.write_local()
        self.d = ixtest.Daemon(self.cfg, 'group.ix-target-%s.log' % self.name, BUILD,
                               append=append)


def document(gws, gen, extra_luns=(), acls=None, portals=None):
    members = [{'name': g.name, 'id': i + 1,
                'portals': [{'address': HOST, 'port': g.port}] if not portals or
                g.name not in portals else portals[g.name]}
               for i, g in enumerate(gws)]
    luns = [{'lun': 0, 'backend': 'rbd', 'thin': True, 'naa_id': NAA,
             'rbd': {'pool': 'rbd', 'image': 'grp0', 'conf': gws[0].conf,
                     'osd_op_timeout_s': 10}}]
    luns += [{'lun': n, 'backend': 'ram', 'size': '8M'} for n in extra_luns]
    t = {'name': IQN, 'luns': luns}
    if acls is not None:
        t['acls'] = acls
    # the LU whose lock decides ALUA (libiscsi's tools cannot log in through a standby
    # path, so the tools use the other target, active everywhere)
    lt = {'name': LOCK_IQN, 'luns': [{'lun': 0, 'backend': 'rbd', 'thin': True,
                                      'naa_id': NAA_LOCK,
                                      'rbd': {'pool': 'rbd', 'image': 'grp1',
                                              'conf': gws[0].conf, 'exclusive_lock': True,
                                              'osd_op_timeout_s': 10}}]}
    return {'kind': 'ix-group', 'version': 1, 'generation': gen,
            'global': {'nop_interval_ms': 5000}, 'members': members, 'targets': [t, lt]}


def put(cl, doc):
    text = json.dumps(doc, indent=1)
    cl.rados('-p', 'rbd', 'put', OBJ, '-', data=text.encode())
    return text


def luns_in(cl):
    d = json.loads(doc_get(cl))
    return d['generation'], sorted(lu['lun'] for lu in d['targets'][0]['luns'])


def scenario(cl, tmp):
    cl.create_image('grp0', '16M')
    cl.create_image('grp1', '16M')
    gws = [Gw(tmp, cl.conf, 'gw-a', POLL_MS), Gw(tmp, cl.conf, 'gw-b', POLL_MS),
           Gw(tmp, cl.conf, 'gw-c', SLOW_POLL_MS)]
    a, b, c = gws
    c.state = os.path.join(tmp, 'c-state')
    text = put(cl, document(gws, 1))
    bound = 2.0 + POLL_MS / 1000.0   # a notify's delivery (2 s bound) or one poll
    try:
        for g in gws:
            g.start()
        # start: one LU identity, each gateway its own relative port
        ids = {g.name: inq83(g.port) for g in gws}
        lus = {n: v[0] for n, v in ids.items()}
        rels = {n: v[1] is not None for n, v in ids.items()}
        report.check('start', len(set(lus.values())) == 1 and None not in lus.values() and
                     all(rels.values()) and all(v[2] == 0 for v in ids.values()),
                     'iscsi-inq VPD 0x83 through A, B, C: exit %s; one LU designator (NAA): %s; '
                     'a relative target port designator on each: %s (its value: rtpg)' %
                     ([v[2] for v in ids.values()],
                      'the same' if len(set(lus.values())) == 1 else 'NOT the same: %s' % lus,
                      rels))

        # rtpg: one table everywhere (the lock target's once the lock settled)
        want_ports = {1: [1], 2: [2], 3: [3]}

        def same_tables(iqn, one_ao):
            t = {g.name: rtpg(g.port, iqn) for g in gws}
            ok = all(isinstance(v, dict) and {k: p for k, (s, p) in v.items()} == want_ports
                     for v in t.values()) and len({json.dumps(v, sort_keys=True)
                                                   for v in t.values()}) == 1
            if ok and one_ao:
                ok = [s for s, _ in t['gw-a'].values()].count(ixha.AO) == 1
            elif ok:
                ok = all(s == ixha.AO for s, _ in t['gw-a'].values())
            return t if ok else None
        tabs, took = wait(lambda: same_tables(IQN, False), 5)  # static: a loaded machine
        ltabs, ltook = wait(lambda: same_tables(LOCK_IQN, True),
                            3 * LOCK_CHECK_MS / 1000.0 + 5)
        report.check('rtpg', tabs is not None and ltabs is not None,
                     'REPORT TARGET PORT GROUPS through A, B, C agree: %s after %.1f s: %s; '
                     '%s (exclusive_lock) after %.1f s: %s' %
                     (IQN, took, ixha.show({k: v[0] for k, v in tabs['gw-a'].items()})
                      if tabs else {g.name: rtpg(g.port) for g in gws},
                      LOCK_IQN, ltook,
                      ixha.show({k: v[0] for k, v in ltabs['gw-a'].items()})
                      if ltabs else {g.name: rtpg(g.port, LOCK_IQN) for g in gws}))

        got = doc_get(cl)
        report.check('rados-json', got == text,
                     '`rados get %s` is the %d bytes put' % (OBJ, len(text)))

        # edit through A reaches B and C
        rc, out = ctl(a.sock, 'lun', 'create', IQN, '1', '--ram', '8M')
        caps, took = wait(lambda: all(readcap(g.port, 1) == 8 * MIB for g in (b, c)), bound)
        gen, luns = luns_in(cl)
        report.check('edit', rc == 0 and caps and gen == 2 and luns == [0, 1],
                     'ix-ctl lun create through A: rc %d (%s); B and C read 8 MiB on LUN 1 '
                     'after %.2f s (bound %.1f s); rados get: generation %d, LUNs %s' %
                     (rc, out[:100], took, bound, gen, luns))

        # acl with CHAP through B: enforced on A and C, never logged
        rc, out = ctl(b.sock, 'acl', 'create', IQN, CHAP_INI, '--chap-user', 'grpuser',
                      '--chap-secret', SECRET)
        refused, took = wait(lambda: all(readcap(g.port, 0, CHAP_INI) is None
                                         for g in (a, c)), bound)
        logs = ''.join(g.d.output() for g in gws)
        report.check('acl', rc == 0 and refused and SECRET not in logs and
                     SECRET in doc_get(cl),
                     'ix-ctl acl create with CHAP through B: rc %d (%s); A and C refuse '
                     '%s without CHAP after %.2f s; secret in a log: %s' %
                     (rc, out[:100], CHAP_INI, took, SECRET in logs))
        rc, out = ctl(a.sock, 'acl', 'delete', IQN, CHAP_INI)

        # stale: an admin's rados put, no notify; C (long poll) edits on its old generation
        d = json.loads(doc_get(cl))
        d['generation'] += 1
        d['targets'][0]['luns'].append({'lun': 5, 'backend': 'ram', 'size': '8M'})
        put(cl, d)
        seen, took = wait(lambda: all(readcap(g.port, 5) == 8 * MIB for g in (a, b)),
                          POLL_MS / 1000.0 + bound)
        before = doc_get(cl)
        rc, out = ctl(c.sock, '--json', 'lun', 'create', IQN, '2', '--ram', '8M')
        report.check('stale', seen and rc == 1 and '-32007' in out and 'conflict' in out and
                     doc_get(cl) == before,
                     'rados put of generation %d: A and B serve LUN 5 after %.2f s (their '
                     'poll); an edit of the target through C (still on the older '
                     'generation): rc %d %s; object unchanged: %s' %
                     (d['generation'], took, rc, out[:200], doc_get(cl) == before))

        # concurrent edits of one target through A and B
        outcomes = []
        for k in range(3):
            res = {}
            la, lb = 10 + 2 * k, 11 + 2 * k

            def edit(g, lun):
                res[g.name] = rpc(g.sock, 'iscsi_create_lun',
                                  {'target': IQN, 'lun': {'lun': lun, 'backend': 'ram',
                                                          'size': '8M'}})
            ths = [threading.Thread(target=edit, args=(a, la)),
                   threading.Thread(target=edit, args=(b, lb))]
            for t in ths:
                t.start()
            for t in ths:
                t.join()
            won = [lun for g, lun in ((a, la), (b, lb)) if 'result' in res[g.name]]
            lost = [g.name for g in (a, b) if res[g.name].get('error', {}).get('code') ==
                    -32007]
            _, luns = luns_in(cl)
            outcomes.append((won, lost, [x for x in luns if x in (la, lb)], res))
            # both gateways apply the winner before the next round (polled, bounded by a notify
            # or a poll)
            wait(lambda: all(readcap(g.port, lun) == 8 * MIB for g in (a, b) for lun in won),
                 bound)
        ok = all(len(w) + len(lo) == 2 and w and sorted(w) == present
                 for w, lo, present, _ in outcomes)
        report.check('concurrent', ok,
                     '3 rounds of A and B adding a LUN to %s at once: winners %s, conflict '
                     'errors %s, LUNs in the document %s' %
                     (IQN, [o[0] for o in outcomes], [o[1] for o in outcomes],
                      [o[2] for o in outcomes]) +
                     ('' if ok else '; answers %s' % [json.dumps(o[3])[:300] for o in outcomes]))

        # catch-up: C down during an edit
        c.d.stop()
        rc, out = ctl(a.sock, 'lun', 'create', IQN, '6', '--ram', '8M')
        c.start(append=True)
        cap = readcap(c.port, 6)
        report.check('catch-up', rc == 0 and cap == 8 * MIB,
                     'C stopped, LUN 6 added through A (rc %d %s), C started: LUN 6 %s' %
                     (rc, out[:80], cap))

        # bad generation for C: its portal moved to an address it does not have
        d = json.loads(doc_get(cl))
        gen_good = d['generation']
        d['generation'] += 1
        d['members'][2]['portals'] = [{'address': '192.0.2.99', 'port': c.port}]
        d['targets'][0]['luns'].append({'lun': 7, 'backend': 'ram', 'size': '8M'})
        put(cl, d)
        # A and B find it at their poll; then an edit through A tells C (a notify)
        wait(lambda: all(readcap(g.port, 7) == 8 * MIB for g in (a, b)),
             POLL_MS / 1000.0 + bound)
        rc, out = ctl(a.sock, 'target', 'set', IQN, 'alias=grp')

        def c_failed():
            r = rpc(a.sock, 'group_get_status', {}).get('result', {})
            m = [x for x in r.get('members', []) if x.get('name') == 'gw-c']
            # the alias edit made another generation on top, with the same portal of C's
            return m and (m[0].get('failed_generation') or 0) >= d['generation'] and m[0] \
                or None
        st, took = wait(c_failed, bound, 0.2)
        ab7 = [readcap(g.port, 7) for g in (a, b)]
        c0, c7 = readcap(c.port, 0), readcap(c.port, 7)
        rc2, text_status = ctl(a.sock, 'group', 'status')
        report.check('bad-gen', st is not None and st.get('health') == 'error' and
                     st.get('generation') == gen_good and ab7 == [8 * MIB] * 2 and
                     c0 is not None and c7 is None and 'gw-c' in text_status and
                     'error' in text_status,
                     'generation %d moves C to 192.0.2.99: A, B LUN 7 %s; C still serves its '
                     'generation (%s) on its old portal (LUN 0 %s, LUN 7 %s); status of C '
                     'through A after %.1f s: %s; ix-ctl group status: %s' %
                     (d['generation'], ab7, st and st.get('generation'), c0, c7, took,
                      json.dumps(st)[:300], text_status[:400]))
        # C restarted on that generation: it starts on the last good one it kept
        c.d.stop()
        c.start(append=True)
        st2, took = wait(c_failed, bound, 0.2)
        c0, c7 = readcap(c.port, 0), readcap(c.port, 7)
        kept = os.path.join(c.state, 'ix-group.gw-c.json')
        mode = oct(os.stat(kept).st_mode & 0o777) if os.path.exists(kept) else None
        report.check('restart-last-good', st2 is not None and
                     'at start' in (st2.get('error') or '') and
                     st2.get('generation') == gen_good and c0 is not None and c7 is None and
                     mode == '0o600',
                     'C restarted while the group\'s generation moves it away: serves '
                     'generation %s (LUN 0 %s, LUN 7 %s) from %s (mode %s); its status: %s' %
                     (st2 and st2.get('generation'), c0, c7, kept, mode,
                      json.dumps(st2)[:240]))

        # repair C's portal
        d = json.loads(doc_get(cl))
        d['generation'] += 1
        d['members'][2]['portals'] = [{'address': HOST, 'port': c.port}]
        put(cl, d)
        wait(lambda: readcap(a.port, 0) and
             rpc(a.sock, 'group_get_status', {}).get('result', {}).get('generation') ==
             d['generation'], POLL_MS / 1000.0 + bound)
        time.sleep(POLL_MS / 1000.0)   # B's poll too
        ctl(a.sock, 'target', 'set', IQN, 'alias=grp2')

        step_damaged(cl, gws, bound)

        # members: add D, then remove it
        dport = ixtest.free_port()
        rc, out = ctl(a.sock, 'group', 'member', 'add', 'gw-d', '--portal',
                      '%s:%d' % (HOST, dport))
        has4, took = wait(lambda: all(isinstance(t, dict) and 4 in t
                                      for t in (rtpg(g.port) for g in gws)), bound, 0.2)
        rc2, out2 = ctl(b.sock, 'group', 'member', 'remove', 'gw-d')
        no4, took2 = wait(lambda: all(isinstance(t, dict) and 4 not in t and 3 in t
                                      for t in (rtpg(g.port) for g in gws)), bound, 0.2)
        report.check('members', rc == 0 and rc2 == 0 and has4 and no4,
                     'group member add gw-d through A (rc %d %s): group 4 on every gateway '
                     'after %.1f s; group member remove gw-d through B (rc %d %s): gone after '
                     '%.1f s' % (rc, out[:80], took, rc2, out2[:80], took2))
        # dry_run checks every member: a member whose derived configuration is invalid
        before = doc_get(cl)
        rc, out = ctl(a.sock, '--dry-run', 'group', 'member', 'add', 'gw-e', '--portal',
                      'no-such-address:3260')
        rc2, out2 = ctl(b.sock, '--dry-run', 'lun', 'create', IQN, '40', '--ram', '8M')
        report.check('dry-run', rc == 1 and 'member gw-e' in out and rc2 == 0 and
                     doc_get(cl) == before and readcap(a.port, 40) is None,
                     'dry run of adding gw-e with a portal that is no address: rc %d (%s); '
                     'dry run of a LUN: rc %d (%s); document unchanged: %s' %
                     (rc, out[:160], rc2, out2[:100], doc_get(cl) == before))

        # SIGHUP: the local file and the document again
        a.d.p.send_signal(signal.SIGHUP)
        hup, took = wait(lambda: 'configuration reloaded' in a.d.output(), bound)
        report.check('sighup', hup and readcap(a.port, 1) == 8 * MIB,
                     'SIGHUP to A: reloaded after %.1f s, LUN 1 %s' %
                     (took, readcap(a.port, 1)))

        step_init(cl, tmp)
        step_recipe(cl, tmp)
    finally:
        codes = {}
        for g in gws:
            if g.d:
                codes[g.name] = g.d.stop()
                ixtest.check_sanitizer(report, g.d, g.name)
        report.check('stop', all(c == 0 for c in codes.values()),
                     'SIGTERM: exit status %s (0: a clean stop, the watch and the status '
                     'objects closed)' % codes)


def step_damaged(cl, gws, bound):
    """A damaged object (not JSON; JSON that fails the document's checks) is refused: every
    gateway keeps serving its last good generation, A and B (which poll) log it once each and
    say it in their status, `ix-ctl group status` says why; the good document put back is the
    one served again, with no error left."""
    a, b = gws[0], gws[1]
    good = doc_get(cl)
    gen_good = json.loads(good)['generation']
    naa0 = inq83(a.port)[0]

    def errors():
        r = rpc(a.sock, 'group_get_status', {}).get('result', {})
        return {x.get('name'): x.get('error') for x in r.get('members', [])}

    def refused(text, what, name):
        cl.rados('-p', 'rbd', 'put', OBJ, '-', data=text.encode())
        seen, took = wait(lambda: all(what in (errors().get(g.name) or '') for g in (a, b)),
                          POLL_MS / 1000.0 + bound, 0.2)
        time.sleep(3 * POLL_MS / 1000.0)   # three more polls: still one log line each
        naa = [inq83(g.port)[0] for g in gws]
        caps = [readcap(g.port, 0) for g in gws]
        gens = [rpc(g.sock, 'group_get_status', {}).get('result', {}).get('generation')
                for g in gws]
        logs = [g.d.output().count(what) for g in (a, b)]
        rc, text_status = ctl(a.sock, 'group', 'status')
        report.check(name, seen and naa0 is not None and naa == [naa0] * 3 and
                     all(caps) and logs == [1, 1] and rc == 0 and
                     'the document cannot be used' in text_status and what in text_status,
                     'rados put of %r: A and B say "%s" after %.1f s; every gateway still '
                     'serves (iscsi-inq NAA the same: %s, LUN 0 %s); log lines in A, B: %s; '
                     'ix-ctl group status (rc %d): %s' %
                     (text[:40], what, took, naa == [naa0] * 3, caps, logs, rc,
                      text_status[:400]))
        return gens

    refused('this is not JSON {', 'the document is damaged: not valid JSON', 'damaged-json')
    d = json.loads(good)
    d['generation'] = gen_good + 1
    d['members'][1]['id'] = d['members'][0]['id']
    refused(json.dumps(d, indent=1), "members[1].id: 1 is members[0]'s", 'damaged-check')
    # the last good document put back: served, no error left anywhere
    cl.rados('-p', 'rbd', 'put', OBJ, '-', data=good.encode())
    clear, took = wait(lambda: all(errors().get(g.name) is None for g in (a, b)),
                       POLL_MS / 1000.0 + bound, 0.2)
    r = rpc(a.sock, 'group_get_status', {}).get('result', {})
    health = {x.get('name'): x.get('health') for x in r.get('members', [])}
    rc, out = ctl(b.sock, 'lun', 'create', IQN, '41', '--ram', '8M')
    cap41, took2 = wait(lambda: all(readcap(g.port, 41) == 8 * MIB for g in (a, b)),
                        POLL_MS / 1000.0 + bound, 0.2)
    ctl(a.sock, 'lun', 'delete', IQN, '41')
    report.check('damaged-repaired', clear and r.get('generation') == gen_good and
                 health.get('gw-a') == 'ok' and health.get('gw-b') == 'ok' and rc == 0 and
                 cap41,
                 'the last good document (generation %d) put back: A and B without an error '
                 'after %.1f s, health %s; an edit through B then (rc %d %s) served by A and '
                 'B after %.1f s' % (gen_good, took, health, rc, out[:80], took2))


def step_recipe(cl, tmp):
    """docs/ha.md's "From scratch in five commands", as written there (the addresses, ports and
    ceph.conf this machine's): an image, a first document with members only by `rados put`,
    two gateways from local files, a target and an RBD LUN with the lock through one gateway:
    both report the same two derived groups, one active/optimized (the lock's holder)."""
    iqn = 'iqn.2024-01.org.ix.test:group-recipe'
    cl.rbd('create', '--size', '16M', 'rbd/recipe')
    gws = [Gw(tmp, cl.conf, 'gw-r%d' % i, POLL_MS) for i in (1, 2)]
    doc = {'kind': 'ix-group', 'version': 1, 'generation': 1,
           'members': [{'name': g.name, 'id': i + 1,
                        'portals': [{'address': HOST, 'port': g.port}]}
                       for i, g in enumerate(gws)]}
    cl.rados('-p', 'rbd', 'put', 'ix.group3', '-', data=json.dumps(doc).encode())
    try:
        for g in gws:
            with open(g.cfg, 'w') as f:
                json.dump({'group': {'pool': 'rbd', 'object': 'ix.group3', 'member': g.name,
                                     'conf': cl.conf, 'poll_ms': POLL_MS},
                           'global': {'mgmt_socket': g.sock}}, f)
            g.d = ixtest.Daemon(g.cfg, 'group.ix-target-%s.log' % g.name, BUILD)
        rc, out = ctl(gws[0].sock, 'target', 'create', iqn)
        rc2, out2 = ctl(gws[0].sock, 'lun', 'create', iqn, '0', '--rbd', 'rbd/recipe',
                        '--ceph-conf', cl.conf, '--exclusive-lock')

        def agree():
            t = [rtpg(g.port, iqn) for g in gws]
            ok = all(isinstance(x, dict) and sorted(x) == [1, 2] for x in t) and \
                t[0] == t[1] and sorted(v[0] for v in t[0].values()) == sorted([ixha.AO, ixha.STANDBY])
            return t if ok else None
        t, took = wait(agree, 2.0 + 2 * LOCK_CHECK_MS / 1000.0 + 2, 0.2)
        report.check('recipe', rc == 0 and rc2 == 0 and t is not None,
                     'rados put of a document with two members, two gateways, then through '
                     'the first: target create (rc %d %s), lun create --rbd --exclusive-lock '
                     '(rc %d %s); REPORT TARGET PORT GROUPS through both after %.1f s: %s' %
                     (rc, out[:60], rc2, out2[:80], took,
                      [rtpg(g.port, iqn) for g in gws] if t is None else t[0]))
    finally:
        for g in gws:
            if g.d:
                g.d.stop()
                ixtest.check_sanitizer(report, g.d, g.name)


def step_init(cl, tmp):
    port, sock = ixtest.free_port(), os.path.join(tmp, 'x.sock')
    iqn = 'iqn.2024-01.org.ix.test:group-init'
    plain = os.path.join(tmp, 'x-plain.json')
    with open(plain, 'w') as f:
        json.dump({'global': {'mgmt_socket': sock},
                   'portals': [{'name': 'p', 'address': HOST, 'port': port}],
                   'targets': [{'name': iqn, 'luns': [{'lun': 0, 'backend': 'ram',
                                                       'size': '4M'}]}]}, f)
    d = ixtest.Daemon(plain, 'group.ix-target-x.log', BUILD)
    try:
        rc, out = ctl(sock, 'group', 'init', 'gw-x', '--object', 'ix.group2', '--ceph-conf',
                      cl.conf)
        rc2, out2 = ctl(sock, 'group', 'init', 'gw-x', '--object', 'ix.group2',
                        '--ceph-conf', cl.conf)
    finally:
        d.stop()
        ixtest.check_sanitizer(report, d, 'x-plain')
    doc = json.loads(cl.rados('-p', 'rbd', 'get', 'ix.group2', '-'))
    local = os.path.join(tmp, 'x.json')
    with open(local, 'w') as f:
        json.dump({'group': {'object': 'ix.group2', 'member': 'gw-x', 'conf': cl.conf},
                   'global': {'mgmt_socket': sock}}, f)
    d = ixtest.Daemon(local, 'group.ix-target-x.log', BUILD, append=True)
    try:
        r = run(['iscsi-readcapacity16', '-i', INI,
                 'iscsi://%s:%d/%s/0' % (HOST, port, iqn)], 30)
    finally:
        d.stop()
        ixtest.check_sanitizer(report, d, 'x-group')
    m = doc.get('members', [{}])[0]
    report.check('init', rc == 0 and doc.get('generation') == 1 and m.get('name') == 'gw-x' and
                 m.get('portals') == [{'address': HOST, 'port': port}] and
                 [t['name'] for t in doc.get('targets', [])] == [iqn] and
                 rc2 == 1 and 'exists already' in out2 and r.returncode == 0,
                 'ix-ctl group init through a plain gateway: rc %d (%s); rados get: generation '
                 '%s, members %s, targets %s; again: rc %d (%s); the gateway from a local file '
                 'naming the group: iscsi-readcapacity16 exit %d' %
                 (rc, out[:60], doc.get('generation'), doc.get('members'),
                  [t['name'] for t in doc.get('targets', [])], rc2, out2[:80], r.returncode))


def main():
    return ixceph.run_with_cluster(report, 'group', scenario,
                                   tools=('iscsi-inq', 'iscsi-readcapacity16'),
                                   built=('ix-target', 'ix-ctl'))


if __name__ == '__main__':
    report.main(main)
