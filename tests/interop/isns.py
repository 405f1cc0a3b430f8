#!/usr/bin/env python3
# ix-suite: parallel (it mostly waits out isnsd's periods; free ports, its own temporary directory)
"""iSNS registration (RFC 4171, docs/isns.md) against open-isns: isnsd as the server, isnsadm
to look at what it holds.

isnsd runs on a free loopback port with its own configuration, database and control socket in
a temporary directory (Security = 0: no DSA keys, so registrations are unauthenticated;
DefaultDiscoveryDomain = 1 so that isnsadm sees every node; RegistrationPeriod = 12 s, which
isnsd imposes on every entity). The daemon is the test's own ix-target with global.isns
pointing at it.
  1. registered: isnsadm lists ix's entity (protocol iSCSI), both targets (type Target, the
     alias), the portal and one portal group per target with the portal's TPGT;
  2. refreshed: an entity isnsadm registers itself expires after the period while ix's entity
     stays, past two periods (ix refreshes every half period);
  3. a target created through ix-ctl appears at the server, one deleted disappears (node and
     portal group), each within the client's I/O timeout (5 s); so do a portal created and
     deleted (with the portal groups of the targets it serves, tagged with its TPGT) and a
     changed alias, which state the whole entity again;
  4. isnsd killed and started again on an empty database: ix logs the loss once (no line per
     retry) and is registered again within the bound its back-off gives (tgt_isns.h: 1 s,
     doubling: the next attempt after a down time D comes at most min(D + 1, 30) s after the
     server is back, plus the 5 s I/O timeout);
  5. SIGTERM: ix deregisters its entity before it exits (exit status 0); the same with 500
     targets, more than one message holds (the first registration states those that fit, the
     others follow, as many in each message as fit);
  6. fake servers that answer garbage (junk bytes, another protocol version, an answer to
     another transaction, an error status, 64 KiB of random bytes, a closed connection, a
     header announcing a payload that never comes): ix keeps serving (iscsi-ls logs in and
     lists the LUN again and again meanwhile), retries with back-off (its registrations keep
     arriving, well-formed), logs a failure only when it changes, and stops at once on
     SIGTERM, a request pending or not;
  7. bad global.isns values are refused by ix-target --check with the key's path;
  8. ixadm -m discovery -t isns finds the targets and portals (its records say isns, it logs
     in through one), deregisters the initiator it registered for the query, fails cleanly
     without a server, finds all 500 targets of step 5 (node by node: isnsd cannot answer
     them in one message), and sees only what the server's discovery domains let it see: a
     target restricted to one portal is not found at the entity's other portal.
ix only (the target's own client): exits 77 against other peers, or without open-isns.
"""

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixtest  # noqa: E402

if os.environ.get('IX_PEER', 'ix') != 'ix':
    print('SKIP: iSNS registration is ix-target\'s own client (peer is %s)' %
          os.environ['IX_PEER'], file=sys.stderr)
    sys.exit(77)
ISNSD = shutil.which('isnsd', path='/usr/sbin:/sbin:/usr/bin')
ISNSADM = shutil.which('isnsadm', path='/usr/sbin:/sbin:/usr/bin')
ISCSI_LS = shutil.which('iscsi-ls')
IXADM = os.path.join(os.environ.get('IX_BUILD', os.path.join(ROOT, 'build')), 'tools', 'ixadm')
if not ISNSD or not ISNSADM or not ISCSI_LS:
    print('SKIP: needs isnsd, isnsadm (open-isns-server, open-isns-utils) and iscsi-ls '
          '(libiscsi-bin)', file=sys.stderr)
    sys.exit(77)

HOST = '127.0.0.1'
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
OUT = os.environ.get('IX_OUT', os.path.join(ROOT, 'tests', 'out'))
CTL = os.path.join(BUILD, 'tools', 'ix-ctl')
IXT = os.path.join(BUILD, 'tools', 'ix-target')
T1 = 'iqn.2026-11.io.ix.test:isns-one'
T2 = 'iqn.2026-11.io.ix.test:isns-two'
T3 = 'iqn.2026-11.io.ix.test:isns-three'
INI = 'iqn.2026-11.io.ix.test:isns-client'
ENTITY = 'ix-isns-test'
PERIOD = 12         # isnsd's RegistrationPeriod
IO_TIMEOUT = 5      # ISNS_IO_TIMEOUT_MS
RETRY_MAX = 30      # ISNS_RETRY_MAX_MS
TPGT = 5
R = ixtest.Reporter('isns')


class Env:
    pass


E = Env()


def check(name, ok, detail=''):
    R('PASS' if ok else 'FAIL', name, ' | '.join(x.strip() for x in str(detail).splitlines()))
    return ok


# ---- isnsd and isnsadm ----

def start_isnsd():
    shutil.rmtree(E.db, ignore_errors=True)
    os.mkdir(E.db)
    log = open(os.path.join(OUT, 'isns.isnsd.log'), 'a')
    E.isnsd = subprocess.Popen([ISNSD, '-f', '-4', '-c', E.isnsd_conf], stdout=log,
                               stderr=subprocess.STDOUT)
    log.close()
    if ixtest.wait_port(HOST, E.isns_port, 10) != 0:
        raise RuntimeError('isnsd does not listen on %d' % E.isns_port)


def stop_isnsd():
    if E.isnsd and E.isnsd.poll() is None:
        E.isnsd.terminate()
        try:
            E.isnsd.wait(10)
        except subprocess.TimeoutExpired:
            E.isnsd.kill()
            E.isnsd.wait()
    E.isnsd = None


def isnsadm(*args):
    p = subprocess.run([ISNSADM, '-c', E.adm_conf] + list(args), capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


ATTR = re.compile(r'^\s*[0-9a-f]{4}\s+\S+\s*:\s*(.*?) = (.*)$')


def listing(kind):
    """isnsadm --list KIND: one dict per object, attribute name -> value (quotes removed)."""
    rc, out = isnsadm('--list', kind)
    objs = []
    for line in out.splitlines():
        if re.match(r'^Object \d+:', line):
            objs.append({})
            continue
        m = ATTR.match(line)
        if m and objs:
            objs[-1][m.group(1)] = m.group(2).strip().strip('"')
    return objs


def nodes():
    return {o.get('iSCSI name'): o for o in listing('nodes')}


def entities():
    return {o.get('Entity identifier'): o for o in listing('entities')}


def pgs():
    return {(o.get('Portal group name'), o.get('Portal group address'),
             o.get('Portal group port')): o.get('Portal group tag')
            for o in listing('portal-groups')}


def wait_for(pred, secs, step=0.25):
    end = time.monotonic() + secs
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)


def ctl(*args):
    p = subprocess.run([CTL, '-s', E.sock] + list(args), capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout + p.stderr


def ix_config(isns_port, sock):
    return {
        'global': {'mgmt_socket': sock,
                   'isns': {'server': HOST, 'port': isns_port, 'entity': ENTITY,
                            'registration_period_s': 60}},
        'portals': [{'name': 'p', 'address': HOST, 'port': E.portal_port, 'tpgt': TPGT}],
        'targets': [{'name': T1, 'alias': 'isns one',
                     'luns': [{'lun': 0, 'backend': 'ram', 'size': '16M'}]},
                    {'name': T2, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '16M'}]}],
    }


def start_ix(isns_port, log_name, edit=None):
    cfg = os.path.join(E.tmp, log_name + '.json')
    c = ix_config(isns_port, E.sock)
    if edit:
        edit(c)
    with open(cfg, 'w') as f:
        json.dump(c, f, indent=2)
    return ixtest.Daemon(cfg, log_name)


def isns_lines(d, level):
    return [x for x in d.output().splitlines() if ' isns ' in x and (' %s ' % level) in x]


# ---- 1..5 against isnsd ----

def portal_str():
    return '%d/tcp' % E.portal_port


def step_registered(d):
    want = {T1, T2}
    got = wait_for(lambda: want <= set(nodes()), 10)
    n = nodes()
    check('registered.nodes', got and all(n[x].get('iSCSI node type') == 'Target' for x in want)
          and n[T1].get('iSCSI alias') == 'isns one', json.dumps(n))
    e = entities().get(ENTITY, {})
    check('registered.entity', e.get('Entity protocol', '').startswith('iSCSI'), json.dumps(e))
    check('registered.portal', (HOST, portal_str()) in portals(), portals())
    g = pgs()
    check('registered.portal_groups', all(g.get((x, HOST, portal_str())) == str(TPGT)
                                          for x in want), g)


def step_refreshed():
    rc, out = isnsadm('--register', 'entity=isns-test-control',
                      'target,iscsi-name=iqn.2026-11.io.ix.test:isns-control')
    if not check('refreshed.control_registered', rc == 0, out):
        return
    ts = entities().get(ENTITY, {}).get('Timestamp')
    time.sleep(2 * PERIOD + 2)
    ents = entities()
    check('refreshed.control_expired', 'isns-test-control' not in ents,
          'entities after %d s: %s' % (2 * PERIOD + 2, list(ents)))
    check('refreshed.ix_stays', ENTITY in ents and T1 in nodes(), list(ents))
    check('refreshed.timestamp', ents.get(ENTITY, {}).get('Timestamp') != ts,
          '%s then %s' % (ts, ents.get(ENTITY, {}).get('Timestamp')))


def step_changes():
    rc, out = ctl('target', 'create', T3, '--alias', 'isns three')
    t = time.monotonic()
    ok = rc == 0 and wait_for(lambda: T3 in nodes(), IO_TIMEOUT + 1)
    check('add.listed', ok, '%s; after %.1f s: %s' % (out, time.monotonic() - t, list(nodes())))
    check('add.portal_group', pgs().get((T3, HOST, portal_str())) == str(TPGT), pgs())
    rc, out = ctl('target', 'delete', T1)
    t = time.monotonic()
    ok = rc == 0 and wait_for(lambda: T1 not in nodes(), IO_TIMEOUT + 1)
    check('delete.unlisted', ok, '%s; after %.1f s: %s' % (out, time.monotonic() - t,
                                                           list(nodes())))
    check('delete.portal_group', not any(k[0] == T1 for k in pgs()) and
          T2 in nodes() and T3 in nodes(), '%s %s' % (pgs(), list(nodes())))


def portals():
    return [(o.get('Portal IP address'), o.get('Portal TCP/UDP port'))
            for o in listing('portals')]


def step_portal_and_alias():
    """Changes other than a target added or removed state the whole entity again."""
    p2 = '%d/tcp' % E.portal2_port
    rc, out = ctl('portal', 'create', 'p2', HOST, str(E.portal2_port), '--tpgt', '7')
    ok = rc == 0 and wait_for(lambda: (HOST, p2) in portals(), IO_TIMEOUT + 1)
    check('portal_add.listed', ok, '%s %s' % (out, portals()))
    g = pgs()
    check('portal_add.portal_groups', g.get((T2, HOST, p2)) == '7' and
          g.get((T3, HOST, p2)) == '7' and g.get((T2, HOST, portal_str())) == str(TPGT), g)
    rc, out = ctl('target', 'set', T2, 'alias=renamed two')
    ok = rc == 0 and wait_for(lambda: nodes().get(T2, {}).get('iSCSI alias') == 'renamed two',
                              IO_TIMEOUT + 1)
    check('alias.changed', ok, '%s %s' % (out, nodes().get(T2)))
    rc, out = ctl('portal', 'delete', 'p2')
    ok = rc == 0 and wait_for(lambda: (HOST, p2) not in portals(), IO_TIMEOUT + 1)
    g = pgs()
    check('portal_delete.unlisted', ok and not any(k[2] == p2 for k in g) and
          (HOST, portal_str()) in portals() and {T2, T3} <= set(nodes()),
          '%s %s %s' % (out, portals(), g))


def step_restart(d):
    warns = len(isns_lines(d, 'warn'))
    stop_isnsd()
    down = 7
    time.sleep(down)
    start_isnsd()
    back = time.monotonic()
    bound = min(down + 1, RETRY_MAX) + IO_TIMEOUT + 2  # + 2: isnsadm's own polling
    want = {T2, T3}
    ok = wait_for(lambda: want <= set(nodes()) and ENTITY in entities(), bound)
    check('restart.registered_again', ok, 'after %.1f s (bound %d s): %s' %
          (time.monotonic() - back, bound, list(nodes())))
    new = isns_lines(d, 'warn')[warns:]
    # the closed connection, then refused connects: two distinct failures, each logged once
    check('restart.no_log_flood', 1 <= len(new) <= 2, new)


# ---- ixadm's iSNS discovery ----

INI_A = 'iqn.2026-11.io.ix.test:ixadm-a'
INI_B = 'iqn.2026-11.io.ix.test:ixadm-b'


def ixadm(db, *args):
    p = subprocess.run([IXADM, '--db', db] + list(args), capture_output=True, text=True,
                       timeout=60)
    out = p.stdout + p.stderr
    if ixtest.sanitizer_report(out):
        check('ixadm.sanitizer', False, out[-2000:])
    return p.returncode, p.stdout, p.stderr


def ixadm_db(name, initiator):
    db = os.path.join(E.tmp, name)
    os.makedirs(db, exist_ok=True)
    with open(os.path.join(db, 'initiatorname.iscsi'), 'w') as f:
        f.write('InitiatorName=%s\n' % initiator)
    return db


def discovered(out):
    """ixadm's discovery lines ("ADDR:PORT,TPGT IQN") as a set of (portal, name)."""
    return {tuple(x.split()) for x in out.splitlines() if len(x.split()) == 2}


def step_ixadm():
    """ixadm -m discovery -t isns finds the targets and portals ix registered, stores node
    records whose discovery type is isns, and logs in through one of them."""
    db = ixadm_db('adm-a', INI_A)
    want = {('%s:%d,%d' % (HOST, E.portal_port, TPGT), T2),
            ('%s:%d,%d' % (HOST, E.portal_port, TPGT), T3)}
    rc, out, err = ixadm(db, '-m', 'discovery', '-t', 'isns', '-p',
                         '%s:%d' % (HOST, E.isns_port))
    check('ixadm.discovery', rc == 0 and discovered(out) == want,
          'rc %s out %r err %r' % (rc, out, err))
    rc, out, err = ixadm(db, '-m', 'node', '-T', T2, '-o', 'show')
    check('ixadm.record', rc == 0 and re.search(r'node.discovery_type = isns', out) and
          re.search(r'node.discovery_port = %d' % E.isns_port, out), out + err)
    rc, out, err = ixadm(db, '-m', 'node', '-T', T2, '-l')
    ok = rc == 0
    rc2, out2 = ctl('sessions', '-v')
    check('ixadm.login', ok and INI_A in out2, 'login %r %r; sessions %r' % (out, err, out2))
    rc, out, err = ixadm(db, '-m', 'node', '-T', T2, '-u')
    check('ixadm.logout', rc == 0, out + err)
    # the initiator was registered for the query only: it is gone again
    check('ixadm.deregistered', INI_A not in nodes(), list(nodes()))
    # the wrong port, a server that is not there: a clear error, exit status not 0
    rc, out, err = ixadm(db, '-m', 'discovery', '-t', 'isns', '-p',
                         '%s:%d' % (HOST, E.portal2_port))
    check('ixadm.no_server', rc != 0 and 'connecting to' in err, 'rc %s %r' % (rc, err))


def step_discovery_domains():
    """The server's discovery domains decide what an initiator sees (on a fresh isnsd and ix,
    after the shutdown step: open-isns keeps a domain's members out of the default domain
    after the domain is gone). dd1 holds T1 and initiator A; T2 is in no domain, so it is in
    the default one, with initiator B, which is in none either. A second portal q that only
    T1 names: T2 is not found there (ix registers a portal group without a tag for it; a
    server would otherwise give the pair the default tag 1)."""
    def edit(c):
        c['portals'].append({'name': 'q', 'address': HOST, 'port': E.portal2_port,
                             'tpgt': 9})
        c['targets'][0]['portals'] = ['p', 'q']
        c['targets'][1]['portals'] = ['p']
    stop_isnsd()
    start_isnsd()
    d = start_ix(E.isns_port, 'isns.dd.ix.log', edit)
    try:
        ok = wait_for(lambda: {T1, T2} <= set(nodes()), 10)
        check('dd.registered', ok, list(nodes()))
        rc, out = isnsadm('--dd-register', 'dd-name=ixdd1', 'member-name=' + T1,
                          'member-name=' + INI_A)
        check('dd.created', rc == 0, out)
        got = {}
        for ini, name in ((INI_A, 'adm-dd-a'), (INI_B, 'adm-dd-b')):
            rc, out, err = ixadm(ixadm_db(name, ini), '-m', 'discovery', '-t', 'isns', '-p',
                                 '%s:%d' % (HOST, E.isns_port), '-o', 'nonpersistent')
            got[ini] = (rc, discovered(out), err)
        p = '%s:%d,%d' % (HOST, E.portal_port, TPGT)
        q = '%s:%d,9' % (HOST, E.portal2_port)
        check('dd.member_sees_its_domain', got[INI_A][:2] == (0, {(p, T1), (q, T1)}),
              got[INI_A])
        check('dd.others_see_the_default', got[INI_B][:2] == (0, {(p, T2)}), got[INI_B])
    finally:
        check('dd.ix_stops', d.stop() == 0, 'ix-target exit status')


def step_shutdown(d):
    t = time.monotonic()
    rc = d.stop()
    check('shutdown.exit', rc == 0, 'exit %s after %.1f s' % (rc, time.monotonic() - t))
    ents, n = entities(), nodes()
    check('shutdown.deregistered', ENTITY not in ents and T2 not in n and T3 not in n,
          '%s %s' % (list(ents), list(n)))
    check('shutdown.logged', any('deregistered entity %s' % ENTITY in x
                                 for x in isns_lines(d, 'info')), isns_lines(d, 'info')[-3:])


def step_many():
    """More targets than one message holds (6 KiB: open-isns takes 8 KiB at most): the first
    registration states as many as fit, the rest follow in as few DevAttrReg as hold them."""
    n = 500
    cfg = ix_config(E.isns_port, E.sock)
    cfg['global']['isns']['entity'] = ENTITY + '-many'
    cfg['targets'] = [{'name': '%s-%04d' % (T1, i), 'alias': 'target number %d' % i}
                      for i in range(n)]
    path = os.path.join(E.tmp, 'many.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    d = ixtest.Daemon(path, 'isns.many.log')
    try:
        want = {t['name'] for t in cfg['targets']}
        ok = wait_for(lambda: want <= set(nodes()), 30, step=1)
        full = [x for x in isns_lines(d, 'info') if 'registered with' in x]
        done = [x for x in isns_lines(d, 'info') if 'all %d targets registered' % n in x]
        check('many.registered', ok and full and '(of %d' % n in full[0] and done,
              '%d of %d listed; %s' % (len(want & set(nodes())), n, (full + done)[:2]))
        # ixadm's discovery of them all: one answer from open-isns of ~60 KiB
        rc, out, err = ixadm(ixadm_db('adm-many', INI_B), '-m', 'discovery', '-t', 'isns',
                             '-p', '%s:%d' % (HOST, E.isns_port), '-o', 'nonpersistent')
        got = {t for _, t in discovered(out)}
        check('many.ixadm_discovery', rc == 0 and want <= got,
              'rc %s, %d of %d found; %s' % (rc, len(want & got), n, err[-300:]))
        rc = d.stop()
        check('many.deregistered', rc == 0 and not want & set(nodes()) and
              ENTITY + '-many' not in entities(), 'exit %s, %d left' %
              (rc, len(want & set(nodes()))))
    finally:
        if d.p.poll() is None:
            d.kill9()


# ---- 6: a server that answers garbage ----

class FakeServer(threading.Thread):
    """Accepts connections; the i-th reads ix's first request and then behaves as
    behaviours[i] says (the last one again for later connections). Records the header of
    each request and how many connections came."""

    def __init__(self, behaviours):
        super().__init__(daemon=True)
        self.behaviours = behaviours
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((HOST, 0))
        self.ls.listen(8)
        self.port = self.ls.getsockname()[1]
        self.conns = 0
        self.requests = []   # (function, flags, xid, payload length) of each request
        self.bad_requests = []
        self.stop = False
        self.held = []

    def read_pdu(self, c):
        c.settimeout(IO_TIMEOUT + 2)
        h = b''
        while len(h) < 12:
            d = c.recv(12 - len(h))
            if not d:
                return None
            h += d
        ver, func, ln, flags, xid, seq = struct.unpack('>HHHHHH', h)
        body = b''
        while len(body) < ln:
            d = c.recv(ln - len(body))
            if not d:
                return None
            body += d
        if ver != 1 or seq != 0 or flags & 0xc00 != 0xc00 or not flags & 0x8000:
            self.bad_requests.append(h.hex())
        self.requests.append((func, flags, xid, ln))
        return func, xid

    def serve(self, c, how):
        req = self.read_pdu(c)
        if req is None:
            return
        func, xid = req
        rsp = func | 0x8000
        if how == 'junk':
            c.sendall(b'HTTP/1.0 400 Bad Request\r\n\r\n' * 4)
        elif how == 'bad_version':
            c.sendall(struct.pack('>HHHHHH', 2, rsp, 4, 0x4c00, xid, 0) + b'\0' * 4)
        elif how == 'wrong_xid':
            c.sendall(struct.pack('>HHHHHH', 1, rsp, 4, 0x4c00, (xid + 1) & 0xffff, 0) +
                      b'\0' * 4)
        elif how == 'error_status':  # Source Unauthorized
            c.sendall(struct.pack('>HHHHHH', 1, rsp, 4, 0x4c00, xid, 0) + struct.pack('>I', 8))
        elif how == 'huge_random':
            c.sendall(struct.pack('>HHHHHH', 1, rsp, 65535, 0x4c00, xid, 0) +
                      os.urandom(65535))
        elif how == 'stall':  # a header announcing 60000 bytes, 8 of them sent
            c.sendall(struct.pack('>HHHHHH', 1, rsp, 60000, 0x4c00, xid, 0) + b'\0' * 8)
            self.held.append(c)  # never finished, never closed by us
            return
        time.sleep(0.2)  # 'close' closes without a word
        c.close()

    def run(self):
        self.ls.settimeout(0.5)
        while not self.stop:
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            how = self.behaviours[min(self.conns, len(self.behaviours) - 1)]
            self.conns += 1
            threading.Thread(target=self.serve, args=(c, how), daemon=True).start()


def iscsi_ls():
    p = subprocess.run([ISCSI_LS, '-i', INI, '-s', 'iscsi://%s:%d/' % (HOST, E.portal_port)],
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


def garbage_phase(n, behaviours):
    """One ix against one fake server until every behaviour has been met (the back-off
    restarts with each daemon: 1, 2, 4 s between the first connections)."""
    name = 'garbage%d' % n
    fake = FakeServer(behaviours)
    fake.start()
    d = start_ix(fake.port, 'isns.%s.log' % name)
    try:
        logins, failures = 0, []
        end = time.monotonic() + 25
        while time.monotonic() < end and fake.conns < len(behaviours):
            rc, out = iscsi_ls()
            if rc == 0 and T1 in out and re.search(r'Lun:\s*0', out):
                logins += 1
            else:
                failures.append('rc %d: %s' % (rc, out.strip()[-200:]))
            time.sleep(0.5)
        time.sleep(1)  # the last behaviour's answer arrives
        rc, out = iscsi_ls()
        logins += rc == 0 and T1 in out
        check('%s.serving' % name, logins > 1 and not failures and rc == 0,
              '%d logins, failures: %s %s' % (logins, failures[:3], out.strip()[-200:]))
        check('%s.alive' % name, d.p.poll() is None, 'exit %s' % d.p.poll())
        check('%s.every_behaviour' % name, fake.conns >= len(behaviours),
              '%d connections for %s' % (fake.conns, behaviours))
        regs = [r for r in fake.requests if r[0] == 1]
        # each new connection states the whole entity: DevAttrReg with Replace
        check('%s.requests_well_formed' % name, regs and not fake.bad_requests and
              all(r[1] & 0x1000 for r in regs), 'requests %s, bad %s' %
              (fake.requests[:6], fake.bad_requests))
        warns = isns_lines(d, 'warn')
        check('%s.log_once_per_change' % name, 1 <= len(warns) <= fake.conns,
              '%d warnings for %d connections: %s' % (len(warns), fake.conns, warns[:8]))
        t = time.monotonic()
        rc = d.stop()
        check('%s.stops' % name, rc == 0 and time.monotonic() - t < 10,
              'exit %s after %.1f s' % (rc, time.monotonic() - t))
    finally:
        fake.stop = True
        if d.p.poll() is None:
            d.kill9()


def step_garbage():
    garbage_phase(1, ['junk', 'bad_version', 'wrong_xid', 'error_status'])
    garbage_phase(2, ['huge_random', 'close', 'stall'])


# ---- 7: configuration errors ----

def step_config_errors():
    cases = [({'server': 'isns.example.com'}, 'global.isns.server'),
             ({'server': HOST, 'port': 0}, 'global.isns.port'),
             ({'server': HOST, 'registration_period_s': 1}, 'global.isns.registration_period_s'),
             ({'server': HOST, 'entiy': 'x'}, 'did you mean "entity"'),
             ({'port': 3205}, 'global.isns.server'),
             ({'server': HOST, 'enabled': 'yes'}, 'global.isns.enabled')]
    for i, (isns, want) in enumerate(cases):
        path = os.path.join(E.tmp, 'bad%d.json' % i)
        with open(path, 'w') as f:
            json.dump({'global': {'isns': isns}}, f)
        p = subprocess.run([IXT, '--check', '-c', path], capture_output=True, text=True,
                           timeout=30)
        check('config.%d' % i, p.returncode == 1 and want in p.stderr,
              'exit %d: %s' % (p.returncode, p.stderr.strip()))


def main():
    E.tmp = tempfile.mkdtemp(prefix='ix-isns-')
    E.isnsd = None
    E.db = os.path.join(E.tmp, 'db')
    E.sock = os.path.join(E.tmp, 'ix.sock')
    E.isns_port = ixtest.free_port()
    E.portal_port = ixtest.free_port()
    while E.portal_port == E.isns_port:
        E.portal_port = ixtest.free_port()
    E.portal2_port = ixtest.free_port()
    while E.portal2_port in (E.isns_port, E.portal_port):
        E.portal2_port = ixtest.free_port()
    os.makedirs(OUT, exist_ok=True)
    E.isnsd_conf = os.path.join(E.tmp, 'isnsd.conf')
    with open(E.isnsd_conf, 'w') as f:
        f.write('ServerAddress = %s:%d\nBindAddress = %s:%d\nSourceName = isns.test.server\n'
                'Database = %s\nControlSocket = %s/isnsctl\nPIDFile = %s/isnsd.pid\n'
                'Security = 0\nDefaultDiscoveryDomain = 1\nRegistrationPeriod = %d\n' %
                (HOST, E.isns_port, HOST, E.isns_port, E.db, E.tmp, E.tmp, PERIOD))
    E.adm_conf = os.path.join(E.tmp, 'isnsadm.conf')
    with open(E.adm_conf, 'w') as f:
        f.write('ServerAddress = %s:%d\nSourceName = iqn.2026-11.io.ix.test:isnsadm\n'
                'Security = 0\nControlSocket = %s/isnsctl\n' % (HOST, E.isns_port, E.tmp))
    d = None
    try:
        step_config_errors()
        start_isnsd()
        d = start_ix(E.isns_port, 'isns.ix.log')
        step_registered(d)
        step_refreshed()
        step_changes()
        step_portal_and_alias()
        step_restart(d)
        step_ixadm()
        step_shutdown(d)
        d = None
        step_discovery_domains()
        step_many()
        step_garbage()
    finally:
        if d and d.p.poll() is None:
            d.kill9()
        stop_isnsd()
        shutil.rmtree(E.tmp, ignore_errors=True)
    return 1 if R.failed else 0


R.main(main)
