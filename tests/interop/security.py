#!/usr/bin/env python3
"""Security checks issue 5 lists that chap.sh and tests/lib/chap_checks.py do not already make
(those cover a wrong CHAP secret or user, a reflected mutual challenge, an initiator outside a
target's ACL with CHAP, and mutual CHAP with a wrong target secret, all with RFC statuses).

ix-target serves discovery with CHAP required and four targets: open to all, ACL for initiator
A only, ACL for B only, and one reachable only through a second portal.
  discovery without authentication     -> 0x0201 Authentication failure (RFC 7143 12.1.3)
  discovery with a wrong secret        -> 0x0201
  unknown initiator on an ACL target   -> 0x0202 Authorization failure (no CHAP involved)
  unknown target name                  -> 0x0203 Not found
  SendTargets=All as A / B / C         -> exactly the targets each may log in to, through the
                                          portal asked (the second portal's target only there)
  SendTargets=<a target A may not see> -> nothing
  libiscsi's iscsi-ls with the discovery credentials as A -> the same list as the raw client
ix only (discovery CHAP and per-portal targets are configured through ix's file): exits 77
against other peers.
"""

import os
import re
import shutil
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402

ixdaemon.skip_unless_ix('discovery authentication and per-portal targets')

PFX = 'iqn.2026-11.io.ix.test:sec-'
OPEN, ONLY_A, ONLY_B, PORTAL2 = PFX + 'open', PFX + 'only-a', PFX + 'only-b', PFX + 'portal2'
A, B, C = PFX + 'initiator-a', PFX + 'initiator-b', PFX + 'initiator-c'
DUSER, DSECRET = 'discovery-user', 'discovery-secret-42'
RAM = [{'lun': 0, 'backend': 'ram', 'size': '1M'}]
R = ixdaemon.Results('security')


def status_of(fn):
    try:
        s = fn()
    except X.LoginFailed as e:
        return e.status
    s.close()
    return 0


def discovery(port, who, chap=(DUSER, DSECRET)):
    s = X.Session('127.0.0.1', port, initiator=who, timeout=5)
    s.login(session_type='Discovery', chap=chap)
    return s


def normal(port, who, target):
    s = X.Session('127.0.0.1', port, initiator=who, target=target, timeout=5)
    s.login()
    return s


def send_targets(s, what='All'):
    data = b''
    rsp = s.text([('SendTargets', what)])
    data += rsp.data
    while rsp.flags & 0x40:  # C: more follows
        rsp = s.text([], ttt=rsp.ttt, itt=rsp.itt)
        data += rsp.data
    return sorted(v for k, v in X.decode_keys(data) if k == 'TargetName')


def run(d, port2):
    p1 = d.port
    R.check('discovery-no-auth', status_of(lambda: discovery(p1, A, chap=None)) == 0x0201,
            'AuthMethod=None to a discovery that requires CHAP')
    st = status_of(lambda: discovery(p1, A, chap=(DUSER, 'not-the-secret-1')))
    R.check('discovery-wrong-secret', st == 0x0201, 'status 0x%04x' % st)
    st = status_of(lambda: normal(p1, C, ONLY_A))
    R.check('unknown-initiator', st == 0x0202, 'C to a target whose ACL lists A: 0x%04x' % st)
    st = status_of(lambda: normal(p1, A, PFX + 'no-such-target'))
    R.check('unknown-target', st == 0x0203, 'status 0x%04x' % st)
    st = status_of(lambda: normal(p1, A, ONLY_A))
    R.check('allowed-initiator', st == 0, 'A to its own target: 0x%04x' % st)

    want = {A: [ONLY_A, OPEN], B: [ONLY_B, OPEN], C: [OPEN]}
    for who, targets in want.items():
        s = discovery(p1, who)
        got = send_targets(s)
        R.check('sendtargets.' + who[len(PFX):], got == targets,
                'portal 1 lists %s' % got)
        if who == A:
            hidden = send_targets(s, ONLY_B)
            R.check('sendtargets.named-hidden', hidden == [],
                    'SendTargets=%s as A: %s' % (ONLY_B, hidden))
        s.logout()
        s.close()
    s = discovery(port2, C)
    got = send_targets(s)
    R.check('sendtargets.portal2', got == [OPEN, PORTAL2], 'portal 2 lists %s' % got)
    s.close()
    st = status_of(lambda: normal(p1, A, PORTAL2))
    R.check('portal2-only', st == 0x0203, 'its target through portal 1: 0x%04x' % st)

    if not shutil.which('iscsi-ls'):
        R.report('SKIP', 'iscsi-ls', 'iscsi-ls not installed (run scripts/deps.sh)')
        return
    p = subprocess.run(['timeout', '30', 'iscsi-ls', '-i', A,
                        'iscsi://%s%%%s@127.0.0.1:%d' % (DUSER, DSECRET, p1)],
                       capture_output=True, text=True)
    listed = sorted(set(re.findall(r'Target:(\S+)', p.stdout)))
    R.check('iscsi-ls', listed == want[A], 'libiscsi as A lists %s%s' %
            (listed, '' if p.returncode == 0 else ' (exit %d: %s)' %
             (p.returncode, (p.stdout + p.stderr).strip()[-200:])))
    p = subprocess.run(['timeout', '30', 'iscsi-ls', '-i', A, 'iscsi://127.0.0.1:%d' % p1],
                       capture_output=True, text=True)
    R.check('iscsi-ls-no-auth', p.returncode != 0 and 'Target:' not in p.stdout,
            'without credentials: exit %d, %s' % (p.returncode,
                                                  (p.stdout + p.stderr).strip()[-160:]))


d = ixdaemon.Daemon('security', {
    'global': {'threads': 1,
               'discovery': {'chap': {'user': DUSER, 'secret': DSECRET}}},
    'portals': [{'name': 'one', 'address': '127.0.0.1'},
                {'name': 'two', 'address': '127.0.0.1'}],
    'targets': [
        {'name': OPEN, 'luns': RAM},
        {'name': ONLY_A, 'portals': ['one'], 'acls': [{'initiator': A}], 'luns': RAM},
        {'name': ONLY_B, 'portals': ['one'], 'acls': [{'initiator': B}], 'luns': RAM},
        {'name': PORTAL2, 'portals': ['two'], 'luns': RAM},
    ],
})
try:
    d.start()
    run(d, d.ports['two'])
except Exception:
    traceback.print_exc()
    R.report('FAIL', 'exception', traceback.format_exc().strip().splitlines()[-1][:200])
ixdaemon.finish(R, d)
