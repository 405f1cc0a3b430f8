#!/usr/bin/env python3
"""Per-ACL LUN masking through the management API and ix-ctl, against the real daemon
(docs/management.md, docs/configuration.md "acls[].luns").

The daemon starts with no targets and a management socket. ix-ctl creates a target with three
RAM LUNs of different sizes (16, 32 and 48 MiB, so each LU is recognisable by its capacity) and
three ACLs: A sees target LUN 2 as LUN 0 and LUN 1 as itself (--luns 0=2,1), B has no masking,
C sees nothing (--luns none).
  1. iscsi-ls -s (libiscsi) per initiator name lists exactly those LUNs with those sizes;
  2. a raw session of A: REPORT LUNS lists 0 and 1, READ CAPACITY of LUN 0 is 48 MiB, LUN 2 is
     LOGICAL UNIT NOT SUPPORTED (5/25/00);
  3. a bad map (a target LUN that does not exist, a LUN twice) is refused naming its JSON path,
     --dry-run changes nothing; ix-ctl ls shows the map;
  4. live: A's session stays logged in while ix-ctl acl luns changes its map: the LUN it kept
     gets REPORTED LUNS DATA HAS CHANGED (3F/0E) and REPORT LUNS lists the new set; deleting B's
     ACL leaves B's live session with no LUN; `acl luns ... all` removes the masking;
  5. target and LUN options online (ix-ctl lun set / target set): write_cache on gives a live
     session MODE PARAMETERS CHANGED (6/2A/01) and WCE in the caching page; readonly on gives
     2A/01, WP in the mode header and WRITE PROTECTED (7/27/00) for writes, off writes again; a
     LUN started readonly cannot become writable online (refused); a wrong type is refused
     naming its JSON path; --dry-run lists the change and changes nothing; a target's alias
     reaches new logins, max_sessions=1 refuses a second session (0x0302), default lifts it;
  6. a RAM LUN grows (ix-ctl lun resize) while ix-bench --verify runs on it: a session gets
     CAPACITY DATA HAS CHANGED (6/2A/09) and READ CAPACITY(16) the new size, the bench sees no
     error; growing past its reservation (8 times the size at start) is refused;
  7. ix-ctl call and methods: rpc_get_methods {"detail": true} declares each method's parameters,
     ix-ctl call creates and deletes a target with key=value parameters, a wrong type, an
     unknown key and a missing required one are refused (exit 2) listing the parameters;
  8. ix-ctl save, a fresh daemon from the saved file: ls --json identical, A's view the same,
     the LUN options kept.
ix only (the management API is ix-target's own).
"""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixmgmt  # noqa: E402
import ixtest  # noqa: E402
from ixmgmt import HOST  # noqa: E402

ixdaemon.skip_unless_ix('the management API')

T, TG = 'iqn.2026-11.io.ix.test:mask', 'iqn.2026-11.io.ix.test:ram-grow'
INI_A, INI_B, INI_C = ('iqn.2026-11.io.ix.test:mask-' + c for c in 'abc')
MIB = 1 << 20
R, E, ctl, check = ixmgmt.harness('mgmt2')  # ctl(*args) -> (exit status, stdout, stderr)
ctl_json = ctl.json


def sense_of(sense):
    return X.sense3(sense)


def session(ini):
    s = X.Session(HOST, E.port, initiator=ini, target=T, timeout=10)
    s.login()
    return s


def report_luns(s):
    """The LUN numbers REPORT LUNS lists (through LUN 0's address; it answers without an LU)."""
    s.lun = 0
    cdb = bytes([0xa0, 0, 0, 0, 0, 0]) + (4096).to_bytes(4, 'big') + bytes(2)
    st, data, sense, _ = s.scsi_retry_ua(cdb, read_len=4096)
    if st != 0:
        return 'status 0x%02x %s' % (st, sense_of(sense))
    n = int.from_bytes(data[0:4], 'big') // 8
    return [X_decode(data[8 + 8 * i:16 + 8 * i]) for i in range(n)]


def X_decode(f):
    return ((f[0] & 0x3f) << 8 | f[1]) if f[0] & 0x40 else f[1]


def capacity(s, lun):
    s.lun = lun
    cdb = bytes([0x9e, 0x10]) + bytes(8) + (32).to_bytes(4, 'big') + bytes(2)
    st, data, sense, _ = s.scsi_retry_ua(cdb, read_len=32)
    if st != 0:
        return sense_of(sense)
    return (int.from_bytes(data[0:8], 'big') + 1) * int.from_bytes(data[8:12], 'big')


def iscsi_ls(ini):
    """{lun: size text} that iscsi-ls -s shows to initiator ini, or an error text."""
    p = subprocess.run(['timeout', '30', 'iscsi-ls', '-i', ini, '-s',
                        'iscsi://%s:%d' % (HOST, E.port)], capture_output=True, text=True)
    if p.returncode != 0:
        return 'exit %d: %s' % (p.returncode, (p.stdout + p.stderr).strip()[-200:])
    luns = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith('Lun:'):
            num = int(line.split()[0][4:])
            luns[num] = line.split('Size:')[1].rstrip(')') if 'Size:' in line else '?'
    return luns


def step_create():
    steps = [['target', 'create', T],
             ['lun', 'create', T, '0', '--ram', '16M'],
             ['lun', 'create', T, '1', '--ram', '32M'],
             ['lun', 'create', T, '2', '--ram', '48M'],
             ['acl', 'create', T, INI_A, '--luns', '0=2,1'],
             ['acl', 'create', T, INI_B],
             ['acl', 'create', T, INI_C, '--luns', 'none']]
    bad = [(a, r) for a, r in ((a, ctl(*a)) for a in steps) if r[0] != 0]
    check('create', not bad, 'ix-ctl target, 3 LUNs, 3 ACLs with --luns: %s' % (
        'all exit 0' if not bad else '; '.join('%s: %s' % (' '.join(a[:2]), r[2].strip())
                                               for a, r in bad)))
    acls = ctl_json('rpc', 'iscsi_get_acls', json.dumps({'target': T}))
    want = [{'lun': 0, 'target_lun': 2}, {'lun': 1, 'target_lun': 1}]
    check('acl-in-config', acls[0].get('luns') == want and acls[2].get('luns') == [] and
          'luns' not in acls[1], 'iscsi_get_acls: %s' % json.dumps(acls))


def step_iscsi_ls():
    if not shutil.which('iscsi-ls'):
        R('SKIP', 'iscsi-ls', 'iscsi-ls not installed (libiscsi-bin; scripts/deps.sh)')
        return
    got = {ini: iscsi_ls(ini) for ini in (INI_A, INI_B, INI_C)}
    want_n = {INI_A: 2, INI_B: 3, INI_C: 0}
    ok = all(isinstance(g, dict) and len(g) == want_n[i] for i, g in got.items())
    ok = ok and got[INI_A].get(0) != got[INI_A].get(1) and got[INI_A].get(0) == got[INI_B].get(2)
    ok = ok and got[INI_A].get(1) == got[INI_B].get(1)
    check('iscsi-ls-per-initiator', ok, 'iscsi-ls -s: A %s, B %s, C %s (want A: 0=B\'s 2, '
          '1=B\'s 1; B: 3 LUNs; C: none)' % (got[INI_A], got[INI_B], got[INI_C]))


def step_raw():
    s = session(INI_A)
    luns = report_luns(s)
    c0, c1, c2 = capacity(s, 0), capacity(s, 1), capacity(s, 2)
    s.close()
    check('report-luns-masked', luns == [0, 1], 'REPORT LUNS for A: %s (want [0, 1])' % luns)
    check('lun-mapped', c0 == 48 * MIB and c1 == 32 * MIB and c2 == (5, 0x25, 0),
          'READ CAPACITY(16) for A: LUN 0 %s (want 48 MiB: target LUN 2), LUN 1 %s, LUN 2 %s '
          '(want 5/25/00)' % (c0, c1, c2))
    s = session(INI_C)
    luns, c0 = report_luns(s), capacity(s, 0)
    s.close()
    check('report-luns-none', luns == [] and c0 == (5, 0x25, 0),
          'REPORT LUNS for C: %s, LUN 0: %s' % (luns, c0))


def step_bad():
    rc, out, err = ctl('acl', 'luns', T, INI_A, '0=7')
    check('bad-target-lun', rc == 1 and 'targets[0].acls[0].luns[0].target_lun' in err,
          'a target LUN that does not exist: exit %d, %s' % (rc, err.strip()))
    rc, out, err = ctl('acl', 'luns', T, INI_A, '0=1,0=2')
    check('bad-lun-twice', rc == 1 and 'targets[0].acls[0].luns[1].lun' in err,
          'LUN 0 twice: exit %d, %s' % (rc, err.strip()))
    rc, out, err = ctl('acl', 'luns', T, INI_A, '0=x')
    check('bad-syntax', rc == 2, 'LUN list "0=x": exit %d, %s' % (rc, err.strip()))
    rc, out, err = ctl('acl', 'luns', T, 'iqn.2026-11.io.ix.test:nonesuch', 'all')
    check('missing-acl', rc == 1 and 'no ACL' in err, 'unknown initiator: exit %d, %s' % (
        rc, err.strip()))
    rc, out, err = ctl('--dry-run', 'acl', 'luns', T, INI_A, '0')
    acls = ctl_json('rpc', 'iscsi_get_acls', json.dumps({'target': T}))
    check('dry-run', rc == 0 and 'dry run' in out and len(acls[0]['luns']) == 2,
          'dry run: exit %d, %s; luns after %s' % (rc, out.strip().replace('\n', ' '),
                                                   acls[0].get('luns')))
    rc, out, err = ctl('ls')
    check('ls-shows-map', rc == 0 and '[luns 0=2,1]' in out and '[luns none]' in out,
          'ix-ctl ls: %s' % [x.strip() for x in out.splitlines() if 'luns' in x and 'o-' in x])


def step_live():
    a, b = session(INI_A), session(INI_B)
    a.lun = 1
    a.scsi_retry_ua(bytes(6))  # attach LUN 1, take its power-on unit attention
    b.lun = 0
    b.scsi_retry_ua(bytes(6))
    rc, out, err = ctl('acl', 'luns', T, INI_A, '0=2,1,2=0')
    a.lun = 1
    st, _, sense, _ = a.scsi(bytes(6))
    ua = sense_of(sense) if st == 2 else None
    luns, c2 = report_luns(a), capacity(a, 2)
    check('live-remap', rc == 0 and ua == (6, 0x3f, 0x0e) and luns == [0, 1, 2] and
          c2 == 16 * MIB, 'acl luns 0=2,1,2=0 with A logged in: exit %d; TUR on LUN 1: %s '
          '(want 6/3F/0E); REPORT LUNS %s; LUN 2 %s bytes (want 16 MiB)' % (rc, ua, luns, c2))
    rc, out, err = ctl('acl', 'luns', T, INI_A, 'all')
    luns = report_luns(a)
    check('live-unmask', rc == 0 and luns == [0, 1, 2] and capacity(a, 0) == 16 * MIB,
          'acl luns all: exit %d; REPORT LUNS %s, LUN 0 is target LUN 0 again' % (rc, luns))
    a.close()
    rc, out, err = ctl('acl', 'delete', T, INI_B)
    luns, c0 = report_luns(b), capacity(b, 0)
    b.close()
    check('live-acl-deleted', rc == 0 and luns == [] and c0 == (5, 0x25, 0),
          'ACL of B deleted with B logged in: exit %d; REPORT LUNS %s, LUN 0 %s' % (rc, luns,
                                                                                 c0))
    ctl('acl', 'luns', T, INI_A, '0=2,1')


def ua_after(s, lun):
    s.lun = lun
    st, _, sense, _ = s.scsi(bytes(6))
    return sense_of(sense) if st == 2 else 'status 0x%02x' % st


def mode_bits(s, lun):
    """(WP of the mode header, WCE of the caching page) by MODE SENSE(6), or the error."""
    s.lun = lun
    st, data, sense, _ = s.scsi_retry_ua(bytes([0x1a, 0x08, 0x08, 0, 64, 0]), read_len=64)
    if st != 0 or len(data) < 7:
        return 'status 0x%02x %s' % (st, sense_of(sense))
    return bool(data[2] & 0x80), bool(data[4 + data[3] + 2] & 0x04)


def write1(s, lun):
    s.lun = lun
    st, _, sense, _ = s.scsi_retry_ua(bytes([0x2a, 0, 0, 0, 0, 8, 0, 0, 1, 0]),
                                      write_data=bytes(512))
    return 'good' if st == 0 else sense_of(sense)


def step_lun_options():
    s = session(INI_A)
    s.lun = 1
    s.scsi_retry_ua(bytes(6))
    before = mode_bits(s, 1)
    rc1 = ctl('lun', 'set', T, '1', 'write_cache=on')[0]
    ua1, bits1 = ua_after(s, 1), mode_bits(s, 1)
    check('lun-write-cache', before == (False, False) and rc1 == 0 and
          ua1 == (6, 0x2a, 0x01) and bits1 == (False, True),
          'lun set write_cache=on: exit %d; TUR %s (want 6/2A/01); WP, WCE %s -> %s' % (
              rc1, ua1, before, bits1))
    rc2 = ctl('lun', 'set', T, '1', 'readonly=on')[0]
    ua2, bits2, w2 = ua_after(s, 1), mode_bits(s, 1), write1(s, 1)
    rc3 = ctl('lun', 'set', T, '1', 'readonly=off')[0]
    ua3, w3 = ua_after(s, 1), write1(s, 1)
    check('lun-readonly', rc2 == 0 and ua2 == (6, 0x2a, 0x01) and bits2 == (True, True) and
          w2 == (7, 0x27, 0) and rc3 == 0 and ua3 == (6, 0x2a, 0x01) and w3 == 'good',
          'readonly=on: exit %d, TUR %s, WP/WCE %s, WRITE %s; readonly=off: exit %d, TUR %s, '
          'WRITE %s' % (rc2, ua2, bits2, w2, rc3, ua3, w3))
    s.close()
    rc4 = ctl('lun', 'create', T, '3', '--ram', '16M', '--readonly')[0]
    rc5, _, err5 = ctl('lun', 'set', T, '3', 'readonly=off')
    check('lun-readonly-at-start', rc4 == 0 and rc5 == 1 and 'started read-only' in err5,
          'a LUN created readonly made writable: exit %d, %s' % (rc5, err5.strip()))
    rc6, _, err6 = ctl('rpc', 'iscsi_set_lun_options',
                       json.dumps({'target': T, 'lun': 1, 'write_cache': 'yes'}))
    check('lun-options-bad-type', rc6 == 1 and 'targets[0].luns[1].write_cache' in err6,
          'write_cache "yes": exit %d, %s' % (rc6, err6.strip()))
    rc7, out7, _ = ctl('--dry-run', 'lun', 'set', T, '1', 'write_cache=off')
    luns = ctl_json('rpc', 'iscsi_get_luns', json.dumps({'target': T}))
    check('lun-options-dry-run', rc7 == 0 and 'change lun 1' in out7 and
          luns[1].get('write_cache') is True,
          'dry run: exit %d, %s; write_cache after: %s' % (rc7, out7.strip().replace('\n', ' '),
                                                          luns[1].get('write_cache')))


def step_target_options():
    rc1 = ctl('target', 'set', T, 'alias=masked disks', 'max_sessions=1')[0]
    a = session(INI_A)
    alias = a.params.get('TargetAlias')
    try:
        session(INI_C).close()
        second = 'accepted'
    except X.LoginFailed as e:
        second = '0x%04x' % e.status
    rc2 = ctl('target', 'set', T, 'max_sessions=default')[0]
    try:
        session(INI_C).close()
        third = 'accepted'
    except X.LoginFailed as e:
        third = '0x%04x' % e.status
    a.close()
    rc3, _, err3 = ctl('target', 'set', T, 'max_sessions=x')
    check('target-options', rc1 == 0 and alias == 'masked disks' and second == '0x0302' and
          rc2 == 0 and third == 'accepted' and rc3 == 2,
          'target set alias, max_sessions=1: exit %d; TargetAlias %r; a second session: %s '
          '(want 0x0302, out of resources); max_sessions=default: exit %d, then %s; a bad '
          'value: exit %d' % (
              rc1, alias, second, rc2, third, rc3))


def bench(target, seconds, rng):
    cmd = ['-p', '%s:%d' % (HOST, E.port), '-T', target, '-l', '0', '-I', INI_A,
           '--rw', 'randrw', '--bs', '4k', '-q', '8', '-t', '%ds' % seconds, '--verify',
           '--json', '--quiet', '--range', rng]
    return ixmgmt.bench_start(cmd)


bench_result = ixmgmt.bench_result


def step_ram_grow():
    rc1 = ctl('target', 'create', TG)[0]
    rc2 = ctl('lun', 'create', TG, '0', '--ram', '64M')[0]
    s = X.Session(HOST, E.port, initiator=INI_C, target=TG, timeout=10)
    s.login()
    before = capacity(s, 0)
    busy = bench(TG, 6, '64M')
    time.sleep(2)
    rc, out, err = ctl('lun', 'resize', TG, '0', '256M')
    st, _, sense, _ = s.scsi(bytes(6))
    ua = sense_of(sense) if st == 2 else None
    after = capacity(s, 0)
    s.close()
    check('ram-grow', rc1 == 0 and rc2 == 0 and rc == 0 and ua == (6, 0x2a, 0x09) and
          before == 64 * MIB and after == 256 * MIB,
          'ix-ctl lun resize of a RAM LUN 64M -> 256M: exit %d %s; TUR %s (want 6/2A/09); '
          'READ CAPACITY(16) %s -> %s bytes' % (rc, (out + err).strip(), ua, before, after))
    ok, why = bench_result(busy)
    check('ram-grow-under-bench', ok, 'ix-bench --verify on the LUN throughout: ' + why)
    rc, out, err = ctl('lun', 'resize', TG, '0', '1G')
    luns = ctl_json('rpc', 'iscsi_get_luns', json.dumps({'target': TG}))
    check('ram-grow-past-reservation', rc == 1 and 'grows online up to' in err and
          luns[0].get('size') == '256M',
          'resize to 1G (8 x 64M reserved): exit %d, %s; size stays %s' % (
              rc, err.strip(), luns[0].get('size')))
    rc = ctl('target', 'delete', TG)[0]


def step_call():
    rc, out, err = ctl('rpc', 'rpc_get_methods')
    names = json.loads(out) if rc == 0 else []
    rc2, out2, err2 = ctl('rpc', 'rpc_get_methods', '{"detail": true}')
    detail = json.loads(out2) if rc2 == 0 else []
    ct = [m for m in detail if m.get('name') == 'iscsi_create_target']
    ok = (rc == 0 and 'iscsi_create_target' in names and all(isinstance(n, str) for n in names)
          and [m.get('name') for m in detail] == names and ct and
          {'name': 'target', 'type': 'object', 'required': True} .items() <=
          (ct[0]['params'][0] if ct[0]['params'] else {}).items())
    check('methods-detail', ok, 'rpc_get_methods: %d names; {"detail": true}: %s' % (
        len(names), ct[0] if ct else err2.strip()))
    name = 'iqn.2026-11.io.ix.test:called'
    rc, out, err = ctl('call', 'iscsi_create_target', 'target={"name": "%s"}' % name)
    rc2, out2, err2 = ctl('rpc', 'iscsi_get_targets', '{"name": "%s"}' % name)
    check('call-create', rc == 0 and rc2 == 0 and name in out2,
          'ix-ctl call iscsi_create_target: exit %d %s; iscsi_get_targets: exit %d %s' % (
              rc, (out + err).strip()[:80], rc2, (out2 + err2).strip()[:80]))
    rc, out, err = ctl('call', 'iscsi_logout_session', 'tsih=abc')
    check('call-wrong-type', rc == 2 and 'integer' in err and 'tsih=integer' in err,
          'tsih=abc: exit %d, %s' % (rc, err.strip().replace('\n', ' | ')))
    rc, out, err = ctl('call', 'iscsi_get_targets', 'bogus=1')
    check('call-unknown-key', rc == 2 and "no parameter 'bogus'" in err and 'name=string' in err,
          'bogus=1: exit %d, %s' % (rc, err.strip().replace('\n', ' | ')))
    rc, out, err = ctl('call', 'iscsi_delete_target')
    check('call-missing', rc == 2 and 'needs name' in err,
          'no name: exit %d, %s' % (rc, err.strip().replace('\n', ' | ')))
    rc, out, err = ctl('methods')
    rc2, out2, err2 = ctl('call', 'iscsi_delete_target', 'name=' + name)
    rc3, out3, err3 = ctl('rpc', 'iscsi_get_targets', '{"name": "%s"}' % name)
    check('call-methods-delete', rc == 0 and 'iscsi_set_acl_luns' in out and 'luns=array' in out
          and rc2 == 0 and rc3 == 1,
          'ix-ctl methods: exit %d, %d lines; call iscsi_delete_target: exit %d; get: exit %d' % (
              rc, len(out.splitlines()), rc2, rc3))


def step_save_restart():
    saved = os.path.join(E.dir, 'saved.json')
    rc, out, err = ctl('save', saved)
    before = ctl_json('ls')
    E.d.stop()
    E.d = ixtest.Daemon(saved, 'mgmt2.daemon2.log')
    ixtest.wait_port(HOST, E.port, 10)
    after = ctl_json('ls')
    s = session(INI_A)
    luns, c0 = report_luns(s), capacity(s, 0)
    bits = mode_bits(s, 1)
    s.close()
    check('save-restart', rc == 0 and before == after and luns == [0, 1] and c0 == 48 * MIB
          and bits == (False, True),
          'save, fresh daemon: ls --json %s; A sees %s, LUN 0 %s bytes; LUN 1 WP, WCE %s' % (
              'identical' if before == after else 'differs', luns, c0, bits))


def setup():
    E.sock = os.path.join(E.dir, 'ix-target.sock')
    with open(E.cfg, 'w') as f:
        json.dump({'global': {'mgmt_socket': E.sock, 'threads': 2},
                   'portals': [{'name': 'base', 'address': HOST, 'port': E.port}]}, f)


def step_wait_port():
    ixtest.wait_port(HOST, E.port, 10)


def main():
    return ixmgmt.main(R, E, 'mgmt2', setup, (
        step_wait_port, step_create, step_iscsi_ls, step_raw, step_bad, step_live,
        step_lun_options, step_target_options, step_ram_grow, step_call, step_save_restart))


if __name__ == '__main__':
    R.main(main)
