#!/usr/bin/env python3
"""Login redirection (RFC 7143 11.13.5, docs/configuration.md "Login redirection") with real
initiators: libiscsi's tools and ixadm.

Two ix-target daemons on loopback: B serves the target (tpgt 2); A has the same target name
with targets[].redirect pointing at B on A's first portal only (A's second portal serves it
itself). Each daemon has its own management socket.
  1. discovery is unaffected: SendTargets at A (libiscsi's iscsi-ls, ixadm) lists the target at
     A's own portals;
  2. moved temporarily: iscsi-inq and iscsi-ls -s with an iscsi:// URL naming A log in, follow
     the 0x0101 and end up at B (B's login counter, B's log names the initiator; A counts
     moved_temporarily and accepted no normal session); ixadm logs in through A and its session
     is in B's session list (ix-ctl sessions), with Current Portal B and Persistent Portal A
     (ixadm -m session -P 1); dropped by B, the session recovers through A again (a temporary
     redirection is forgotten);
  3. a login on A's second portal (not in redirect.portals) is served by A;
  4. moved permanently, set through the management API (iscsi_apply_config: the config
     document and reload path): libiscsi and ixadm follow the 0x0102; ixadm's session dropped
     by B recovers straight at B (A sees no further login);
  5. redirect removed at run time: logins at A are served by A again;
  6. redirect.addresses: four logins at A go in turn to B and to A's second portal;
  7. redirect.owners, the HA policy: with A's ALUA group standby and B's active/optimized (set
     with ix-ctl alua set, as an RBD lock's owner sets them), A's logins go to B; with A's
     group active, or nobody's, A serves them;
  8. bad redirections: an address nothing listens on (iscsi-inq and ixadm fail cleanly within
     their login timeouts, A keeps serving), a malformed address refused by the management API
     with the key's path (the running configuration unchanged), and a loop A -> B -> A that
     ixadm gives up (its bound of redirections) and libiscsi ends.
ix only (the targets' own feature): exits 77 against other peers or without libiscsi-bin.
"""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixdaemon  # noqa: E402
import ixmgmt  # noqa: E402
import ixtest  # noqa: E402

ixdaemon.skip_unless_ix('login redirection')
for tool in ('iscsi-inq', 'iscsi-ls'):
    if not shutil.which(tool):
        print('SKIP: %s (libiscsi-bin) not installed: run scripts/deps.sh' % tool,
              file=sys.stderr)
        sys.exit(77)

HOST = '127.0.0.1'
BUILD = os.environ.get('IX_BUILD', os.path.join(ROOT, 'build'))
IXADM = os.path.join(BUILD, 'tools', 'ixadm')
IQN = 'iqn.2026-11.io.ix.test:redirect'
INI = 'iqn.2026-11.io.ix.test:redirect-ini'
R = ixtest.Reporter('redirect')


class Env:
    pass


E = Env()


def check(name, ok, detail=''):
    return R.check(name, ok, ' | '.join(x.strip() for x in str(detail).splitlines())[:600])


def lun0():
    return [{'lun': 0, 'backend': 'ram', 'size': '1M'}]


def run(cmd, timeout=60):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return 'timeout', str(e)


def inq(portal, ini):
    return run(['iscsi-inq', '-i', ini, 'iscsi://%s/%s/0' % (portal, IQN)])


def ixadm(*args, timeout=90):
    return run([IXADM, '--db', E.db, '--timeout', '60'] + list(args), timeout=timeout)


def stats(ctl):
    return ctl.json('stats')['logins']


def moved(ctl, kind):
    return stats(ctl)['refused'].get('moved_' + kind, 0)


def accepted(ctl):
    return stats(ctl)['accepted']['normal']


def sessions(ctl):
    return ctl.json('sessions')


def apply(redirect):
    """A's running configuration with targets[0].redirect set to redirect (None: removed),
    through iscsi_apply_config. The ix-ctl exit status and output."""
    doc = copy.deepcopy(E.ctl_a.json('rpc', 'iscsi_get_config'))
    t = doc['targets'][0]
    t.pop('redirect', None)
    if redirect is not None:
        t['redirect'] = redirect
    rc, out, err = E.ctl_a('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))
    return rc, out + err


def wait_for(pred, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def ixadm_session_at_b():
    return any(s.get('initiator') == E.ini_adm and s.get('target') == IQN
               for s in sessions(E.ctl_b))


def setup():
    E.tmp = tempfile.mkdtemp(prefix='ixtest.redirect.')
    E.db = os.path.join(E.tmp, 'nodes')
    sock_a, sock_b = os.path.join(E.tmp, 'a.sock'), os.path.join(E.tmp, 'b.sock')
    E.b = ixdaemon.Daemon('redirect-b', {
        'global': {'mgmt_socket': sock_b, 'threads': 1},
        'portals': [{'name': 'b', 'address': HOST, 'tpgt': 2}],
        'targets': [{'name': IQN, 'luns': lun0()}]}).start()
    E.b_addr = '%s:%d' % (HOST, E.b.port)
    E.a = ixdaemon.Daemon('redirect-a', {
        'global': {'mgmt_socket': sock_a, 'threads': 1},
        'portals': [{'name': 'a', 'address': HOST}, {'name': 'a2', 'address': HOST, 'tpgt': 3}],
        'targets': [{'name': IQN, 'luns': lun0(),
                     'redirect': {'address': E.b_addr + ',2', 'portals': ['a']}}]}).start()
    E.a_addr = '%s:%d' % (HOST, E.a.port)
    E.a2_addr = '%s:%d' % (HOST, E.a.ports['a2'])
    E.ctl_a = ixmgmt.Ctl(lambda: sock_a)
    E.ctl_b = ixmgmt.Ctl(lambda: sock_b)
    # ixadm's initiator name: from its node database's defaults
    E.ini_adm = None


def step_discovery():
    rc, out = run(['iscsi-ls', '-i', INI + '-disc', 'iscsi://%s' % E.a_addr])
    check('discovery-libiscsi', rc == 0 and
          'Target:%s Portal:%s,1' % (IQN, E.a_addr) in out and E.b_addr not in out,
          'exit %s: %s' % (rc, out))
    rc, out = ixadm('-m', 'discovery', '-t', 'st', '-p', E.a_addr)
    check('discovery-ixadm', rc == 0 and '%s,1 %s' % (E.a_addr, IQN) in out and
          E.b_addr not in out, 'exit %s: %s' % (rc, out))


def libiscsi_follows(kind, name):
    """iscsi-inq and iscsi-ls -s through A end at B; A counts the redirections. iscsi-ls logs
    in at every portal SendTargets returned: A's first (redirected to B) and its second
    (served by A itself)."""
    ini = '%s-%s' % (INI, name)
    m0, a0, b0 = moved(E.ctl_a, kind), accepted(E.ctl_a), accepted(E.ctl_b)
    rc, out = inq(E.a_addr, ini)
    check('%s-iscsi-inq' % name, rc == 0 and 'Product:ix-disk' in out, 'exit %s: %s' % (rc, out))
    rc, out = run(['iscsi-ls', '-s', '-i', ini + '-ls', 'iscsi://%s' % E.a_addr])
    check('%s-iscsi-ls' % name, rc == 0 and
          len(re.findall(r'Lun:0\s+Type:DIRECT_ACCESS', out)) == 2, 'exit %s: %s' % (rc, out))
    m1, a1, b1 = moved(E.ctl_a, kind), accepted(E.ctl_a), accepted(E.ctl_b)
    check('%s-libiscsi-at-b' % name, m1 - m0 == 2 and a1 - a0 == 1 and b1 - b0 == 2,
          'A moved_%s +%d (want 2), A accepted +%d (want 1: the second portal), '
          'B accepted +%d (want 2)' % (kind, m1 - m0, a1 - a0, b1 - b0))
    log = E.b.log_text()
    ok = all(('%s -> %s' % (i, IQN)) in log for i in (ini, ini + '-ls'))
    check('%s-b-log' % name, ok, 'B logged both sessions' if ok else 'B log lacks %s' % ini)


def libiscsi_permanent():
    """libiscsi (1.19, lib/login.c) follows only status 0x0101: a 0x0102 ends its login with
    "Target moved permanently(258)". Checked so that a libiscsi that learns it shows up."""
    m0, b0 = moved(E.ctl_a, 'permanently'), accepted(E.ctl_b)
    rc, out = inq(E.a_addr, INI + '-perm')
    followed = rc == 0 and accepted(E.ctl_b) - b0 == 1
    if followed:
        check('perm-iscsi-inq-follows', True, 'libiscsi now follows 0x0102: %s' % out)
        return
    check('perm-iscsi-inq-refused-cleanly', rc not in (0, 'timeout') and
          'moved permanently' in out.lower() and moved(E.ctl_a, 'permanently') - m0 == 1 and
          accepted(E.ctl_b) == b0, 'exit %s: %s' % (rc, out))


def ixadm_login_drop(kind, name, recovery_via_a):
    """ixadm logs in through A; its session is at B; dropped by B it recovers: through A
    (temporary: A counts one more redirection) or at B directly (permanent)."""
    rc, out = ixadm('-m', 'node', '-T', IQN, '-p', E.a_addr, '-o', 'new')
    rc, out = ixadm('-m', 'node', '-T', IQN, '-p', E.a_addr, '-l')
    if not check('%s-ixadm-login' % name, rc == 0 and 'successful' in out,
                 'exit %s: %s' % (rc, out)):
        return
    ss = [s for s in sessions(E.ctl_b) if s.get('target') == IQN and
          'ixadm' not in s.get('initiator', '') and s.get('initiator', '').find(INI) < 0]
    check('%s-ixadm-session-at-b' % name, len(ss) == 1 and
          ss[0].get('local', '').endswith(':%d' % E.b.port),
          json.dumps(sessions(E.ctl_b)))
    if ss:
        E.ini_adm = ss[0]['initiator']
    rc, out = ixadm('-m', 'session', '-P', '1')
    check('%s-ixadm-portals' % name, 'Current Portal: %s,2' % E.b_addr in out and
          'Persistent Portal: %s,' % E.a_addr in out, out)
    if ss:
        m0 = moved(E.ctl_a, kind)
        rc, out, err = E.ctl_b('session', 'logout', str(ss[0]['tsih']), '--drop')
        back = wait_for(lambda: any(s['initiator'] == E.ini_adm and s['tsih'] != ss[0]['tsih']
                                    for s in sessions(E.ctl_b)), 30)
        m1 = moved(E.ctl_a, kind)
        check('%s-ixadm-recovers' % name,
              back and (m1 - m0 == 1 if recovery_via_a else m1 == m0),
              'recovered %s; A moved_%s +%d (want %d)' %
              (back, kind, m1 - m0, 1 if recovery_via_a else 0))
    rc, out = ixadm('-m', 'node', '-T', IQN, '-p', E.a_addr, '-u')
    check('%s-ixadm-logout' % name, rc == 0 and
          wait_for(lambda: not ixadm_session_at_b(), 10), 'exit %s: %s' % (rc, out))


def step_temporary():
    libiscsi_follows('temporarily', 'temp')
    ixadm_login_drop('temporarily', 'temp', True)


def step_other_portal():
    m0, a0 = moved(E.ctl_a, 'temporarily'), accepted(E.ctl_a)
    rc, out = inq(E.a2_addr, INI + '-a2')
    check('portal-not-redirected', rc == 0 and accepted(E.ctl_a) - a0 == 1 and
          moved(E.ctl_a, 'temporarily') == m0, 'exit %s: %s' % (rc, out))


def step_permanent():
    rc, out = apply({'address': E.b_addr + ',2', 'permanent': True, 'portals': ['a']})
    if not check('permanent-apply', rc == 0, out):
        return
    libiscsi_permanent()
    ixadm_login_drop('permanently', 'perm', False)


def step_removed():
    rc, out = apply(None)
    check('removed-apply', rc == 0, out)
    a0, b0 = accepted(E.ctl_a), accepted(E.ctl_b)
    rc, out = inq(E.a_addr, INI + '-removed')
    check('removed-served-by-a', rc == 0 and accepted(E.ctl_a) - a0 == 1 and
          accepted(E.ctl_b) == b0, 'exit %s: %s' % (rc, out))


def step_addresses():
    """redirect.addresses, taken in turn: B, then A's second portal (not redirected)."""
    rc, out = apply({'addresses': [E.b_addr + ',2', E.a2_addr + ',3'], 'portals': ['a']})
    if not check('addresses-apply', rc == 0, out):
        return
    m0, a0, b0 = moved(E.ctl_a, 'temporarily'), accepted(E.ctl_a), accepted(E.ctl_b)
    rcs = [inq(E.a_addr, INI + '-rr%d' % k)[0] for k in range(4)]
    m1, a1, b1 = moved(E.ctl_a, 'temporarily'), accepted(E.ctl_a), accepted(E.ctl_b)
    check('addresses-in-turn', rcs == [0] * 4 and m1 - m0 == 4 and a1 - a0 == 2 and
          b1 - b0 == 2, 'exits %s; A moved +%d (want 4), A accepted +%d (want 2, on its second '
          'portal), B accepted +%d (want 2)' % (rcs, m1 - m0, a1 - a0, b1 - b0))


def step_owner():
    """redirect.owners (the HA policy) with ALUA states set by hand (ix-ctl alua set), as the
    RBD lock's owner sets them on a gateway group: A's group 1 standby and B's group 2
    active/optimized sends A's logins to B; A's group active again serves them at A."""
    rc, out = apply(None)
    doc = copy.deepcopy(E.ctl_a.json('rpc', 'iscsi_get_config'))
    doc['targets'][0]['alua'] = {'groups': [
        {'id': 1, 'state': 'active/optimized', 'portals': ['a', 'a2']},
        {'id': 2, 'state': 'standby', 'relative_ports': [2]}]}
    doc['targets'][0]['redirect'] = {'owners': [{'group': 2, 'address': E.b_addr + ',2'}]}
    rc, out, err = E.ctl_a('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))
    if not check('owner-apply', rc == 0, out + err):
        return
    a0, b0 = accepted(E.ctl_a), accepted(E.ctl_b)
    rc, out = inq(E.a_addr, INI + '-owner-here')
    check('owner-here-served', rc == 0 and accepted(E.ctl_a) - a0 == 1 and
          accepted(E.ctl_b) == b0, 'exit %s: %s' % (rc, out))
    E.ctl_a('alua', 'set', IQN, '1', 'standby')
    E.ctl_a('alua', 'set', IQN, '2', 'active/optimized')
    m0, a0, b0 = moved(E.ctl_a, 'temporarily'), accepted(E.ctl_a), accepted(E.ctl_b)
    rc, out = inq(E.a_addr, INI + '-owner-b')
    rc2, out2 = inq(E.a2_addr, INI + '-owner-b2')
    check('owner-elsewhere-redirected', rc == 0 and rc2 == 0 and
          moved(E.ctl_a, 'temporarily') - m0 == 2 and accepted(E.ctl_a) == a0 and
          accepted(E.ctl_b) - b0 == 2, 'exit %s, %s: %s %s' % (rc, rc2, out, out2))
    E.ctl_a('alua', 'set', IQN, '2', 'standby')
    m0, a0 = moved(E.ctl_a, 'temporarily'), accepted(E.ctl_a)
    rc, out = inq(E.a_addr, INI + '-owner-none')
    # logged in at A, where the standby group answers NOT READY (04/0B): iscsi-inq fails then
    check('owner-nobody-served', accepted(E.ctl_a) - a0 == 1 and
          moved(E.ctl_a, 'temporarily') == m0, 'exit %s: %s' % (rc, out))
    E.ctl_a('alua', 'set', IQN, '1', 'active/optimized')
    doc['targets'][0].pop('alua')
    doc['targets'][0].pop('redirect')
    E.ctl_a('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))


def step_bad():
    dead = '%s:%d' % (HOST, ixtest.free_port())
    rc, out = apply({'address': dead})
    check('dead-apply', rc == 0, out)
    t0 = time.monotonic()
    rc, out = inq(E.a_addr, INI + '-dead')
    check('dead-iscsi-inq-fails', rc not in (0, 'timeout'),
          'exit %s after %.1f s: %s' % (rc, time.monotonic() - t0, out))
    t0 = time.monotonic()
    rc, out = ixadm('-m', 'io', '-T', IQN, '-p', E.a_addr, '--direct', 'inquiry')
    check('dead-ixadm-fails', rc not in (0, 'timeout') and dead in out,
          'exit %s after %.1f s: %s' % (rc, time.monotonic() - t0, out))
    before = E.ctl_a.json('rpc', 'iscsi_get_config')
    rc, out = apply({'address': 'not a host:3260'})
    after = E.ctl_a.json('rpc', 'iscsi_get_config')
    check('malformed-refused', rc != 0 and 'targets[0].redirect.address' in out and
          before == after, 'exit %s: %s' % (rc, out))
    # a loop: A -> B, B -> A
    rc, out = apply({'address': E.b_addr})
    doc = E.ctl_b.json('rpc', 'iscsi_get_config')
    doc['targets'][0]['redirect'] = {'address': E.a_addr}
    rcb, outb, errb = E.ctl_b('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))
    if not check('loop-apply', rc == 0 and rcb == 0, out + outb + errb):
        return
    rc, out = ixadm('-m', 'io', '-T', IQN, '-p', E.a_addr, '--direct', 'inquiry')
    check('loop-ixadm-gives-up', rc not in (0, 'timeout') and 'redirect' in out,
          'exit %s: %s' % (rc, out))
    rc, out = inq(E.a_addr, INI + '-loop')
    check('loop-iscsi-inq-ends', rc not in (0, 'timeout'), 'exit %s: %s' % (rc, out))
    doc['targets'][0].pop('redirect')
    E.ctl_b('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))
    rc, out = apply(None)
    rc, out = inq(E.a_addr, INI + '-after')
    check('serving-after-bad', rc == 0 and E.a.alive() and E.b.alive(),
          'exit %s: %s' % (rc, out))


def main():
    setup()
    try:
        for step in (step_discovery, step_temporary, step_other_portal, step_permanent,
                     step_removed, step_addresses, step_owner, step_bad):
            try:
                step()
            except Exception as e:  # noqa: BLE001
                R('FAIL', step.__name__, repr(e))
    finally:
        ixadm('-m', 'node', '-u', timeout=30)
        for d in (E.a, E.b):
            for p in d.stop():
                R('FAIL', 'shutdown-%s' % d.name, p)
        shutil.rmtree(E.tmp, ignore_errors=True)
    return 1 if R.failed else 0


R.main(main)
