#!/usr/bin/env python3
"""The JSON-RPC management socket and ix-ctl, against the real daemon (docs/management.md).

The daemon starts from a configuration with one portal, no targets, and a management socket.
  1. ix-ctl creates a portal, a target with a RAM LUN and a file LUN and an ACL with CHAP, and
     a second target with a RAM LUN; creating the same object again succeeds without change,
     a different one under the same name is refused (exit 1), a bad value is refused naming its
     JSON path, --dry-run changes nothing;
  2. initiators use them: iscsi-ls (libiscsi) lists the target's two LUNs through the new
     portal with the ACL's CHAP; QEMU (qemu-io, libiscsi) writes and reads the file LUN;
     ix-bench --verify runs on both LUNs; ix-ctl stats counts one good login, one with a
     wrong CHAP secret and one to a missing target exactly (by reason);
  3. while ix-bench --verify runs on the second target, the first target is deleted with a raw
     session logged in to it: the session gets the Async Message "target requests Logout"
     (AsyncEvent 1), logs out, and the target leaves SendTargets; the portal is deleted and
     stops listening; the bad-input cases below run too; the bench ends with 0 errors;
  4. bad input on the socket, each answered with a JSON-RPC error or a closed socket while the
     daemon keeps serving: malformed JSON, an unknown method, wrong types, an oversized request,
     a caller that is not allowed (SO_PEERCRED: a process running as nobody), a half-written
     request that stalls (closed after 5 s, while another client is served meanwhile), 1000
     pipelined requests in a burst, every tenth a session listing answered by the workers
     (1000 answers, in order), 64 connections at once, 16 held open (the 17th is refused);
  5. ix-ctl save, restart from the saved file: ix-ctl ls --json is identical before and after.
  6. a file LUN grows (ix-ctl lun resize) while ix-bench --verify runs on it: a session gets
     CAPACITY DATA HAS CHANGED (6/2A/09) and READ CAPACITY(16) the new size, the file is
     extended, the bench sees no error; shrinking is refused, a RAM LUN grows too.
Also, beside the busy bench: ix-ctl sessions shows a raw session (portal, peer, transport,
negotiated keys, CmdSN window); ix-ctl session logout sends it the Async Message (AsyncEvent 1)
and it logs out; --drop closes another at once; an unknown TSIH is refused.
ix only (it is the daemon's own API); the daemon is the test's own.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixdaemon  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixmgmt  # noqa: E402
import ixtest  # noqa: E402
from ixmgmt import HOST  # noqa: E402

ixdaemon.skip_unless_ix('the management API')

T1 = 'iqn.2026-11.io.ix.test:mgmt-one'
T2 = 'iqn.2026-11.io.ix.test:mgmt-two'
T3 = 'iqn.2026-11.io.ix.test:mgmt-grow'
INI = 'iqn.2026-11.io.ix.test:mgmt-client'
RAW = 'iqn.2026-11.io.ix.test:mgmt-raw'  # the raw sessions of step 3 (the bench is INI)
CHAP_USER, CHAP_SECRET = 'mgmt-user', 'mgmt-secret-0123'
PY = shutil.which('python3', path='/usr/bin:/bin') or sys.executable  # runnable as nobody
R, E, ctl, check = ixmgmt.harness('mgmt')  # ctl(*args) -> (exit status, stdout, stderr)
ctl_json = ctl.json


def raw(data, timeout=15, close_write=True):
    """Send bytes on a new connection; the answers (parsed lines) and whether the daemon
    closed the connection."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(E.sock)
    try:
        s.sendall(data)
    except OSError:
        pass
    if close_write:
        s.shutdown(socket.SHUT_WR)
    buf, closed = b'', False
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            buf += d
    except socket.timeout:
        pass
    except OSError:
        closed = True
    s.close()
    return [json.loads(x) for x in buf.split(b'\n') if x.strip()], closed


def req(method, params=None, rid=1):
    r = {'jsonrpc': '2.0', 'id': rid, 'method': method}
    if params is not None:
        r['params'] = params
    return json.dumps(r).encode()


def err_code(answers):
    if len(answers) != 1 or 'error' not in answers[0]:
        return None
    return answers[0]['error']['code']


def daemon_alive():
    return E.d.p.poll() is None


def write_config(path, port, sock, extra=None):
    cfg = {'global': {'mgmt_socket': sock, 'threads': 2, 'logout_timeout_ms': 3000},
           'portals': [{'name': 'base', 'address': HOST, 'port': port}]}
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=2)


def bench(target, lun, seconds, port, chap=False, extra=()):
    cmd = ['-p', '%s:%d' % (HOST, port), '-T', target, '-l', str(lun), '-I', INI,
           '--rw', 'randrw', '--bs', '4k', '-q', '8', '-t', '%ds' % seconds, '--verify',
           '--json', '--quiet'] + list(extra)
    if chap:
        cmd += ['--chap-user', CHAP_USER, '--chap-secret', CHAP_SECRET]
    return ixmgmt.bench_start(cmd)


def bench_result(p, timeout=120):
    return ixmgmt.bench_result(p, timeout, with_result=True)


# ---- 1. objects from nothing --------------------------------------------------------------

def step_create():
    E.file_lun = os.path.join(E.dir, 'lun1.img')
    steps = [
        ('portal', ['portal', 'create', 'new', HOST, str(E.port2), '--tpgt', '2']),
        ('target', ['target', 'create', T1, '--alias', 'mgmt test']),
        ('ram-lun', ['lun', 'create', T1, '0', '--ram', '64M']),
        ('file-lun', ['lun', 'create', T1, '1', '--file', E.file_lun, '--size', '64M', '--thin']),
        ('acl-chap', ['acl', 'create', T1, INI, '--chap-user', CHAP_USER,
                      '--chap-secret', CHAP_SECRET]),
        ('target2', ['target', 'create', T2]),
        ('target2-lun', ['lun', 'create', T2, '0', '--ram', '128M']),
    ]
    for name, args in steps:
        rc, out, err = ctl(*args)
        check('create-' + name, rc == 0, 'ix-ctl %s: exit %d %s' % (' '.join(args[:2]), rc,
                                                                     (out + err).strip()[:200]))
    cfg = ctl_json('ls')
    t1 = [t for t in cfg.get('targets', []) if t['name'] == T1]
    check('ls-shows-created',
          len(t1) == 1 and [l['lun'] for l in t1[0]['luns']] == [0, 1] and
          t1[0]['acls'][0]['initiator'] == INI and
          [p['name'] for p in cfg['portals']] == ['base', 'new'],
          'ls --json: portals %s, %s' % ([p['name'] for p in cfg['portals']],
                                         json.dumps(t1)[:300]))
    check('file-lun-created', os.path.getsize(E.file_lun) == 64 << 20,
          'file LUN is %d bytes' % os.path.getsize(E.file_lun))
    listening = False
    try:
        socket.create_connection((HOST, E.port2), timeout=3).close()
        listening = True
    except OSError as e:
        why = str(e)
    check('portal-listens', listening, 'new portal %s:%d %s' % (
        HOST, E.port2, 'accepts connections' if listening else 'refuses: ' + why))

    # idempotent create, conflicting create, bad value, dry run
    rc, out, err = ctl('lun', 'create', T1, '0', '--ram', '64M')
    check('create-same-again', rc == 0 and 'nothing to change' in out,
          'the same LUN again: exit %d, %s' % (rc, (out + err).strip()))
    rc, out, err = ctl('lun', 'create', T1, '0', '--ram', '32M')
    check('create-conflict', rc == 1 and 'already exists' in err,
          'LUN 0 with another size: exit %d, %s' % (rc, err.strip()))
    rc, out, err = ctl('lun', 'create', T1, '2', '--ram', '1000')
    check('create-invalid-names-path',
          rc == 1 and 'targets[0].luns[2].size' in err and 'multiple of block_size' in err,
          'a RAM LUN of 1000 bytes: exit %d, %s' % (rc, err.strip()))
    rc, out, err = ctl('--dry-run', 'lun', 'create', T1, '2', '--ram', '16M')
    after = ctl_json('rpc', 'iscsi_get_luns', json.dumps({'target': T1}))
    check('dry-run', rc == 0 and 'dry run' in out and len(after) == 2,
          'dry run: exit %d, %s; LUNs after: %d' % (rc, out.strip().replace('\n', ' '),
                                                    len(after)))
    rc, out, err = ctl('target', 'delete', 'iqn.2026-11.io.ix.test:nonesuch')
    check('delete-missing', rc == 1 and 'no target' in err,
          'deleting a target that does not exist: exit %d, %s' % (rc, err.strip()))


# ---- 2. initiators use them ------------------------------------------------------------------

def step_initiators():
    if shutil.which('iscsi-ls'):
        url = 'iscsi://%s%%%s@%s:%d' % (CHAP_USER, CHAP_SECRET, HOST, E.port2)
        p = subprocess.run(['timeout', '30', 'iscsi-ls', '-i', INI, '-s', url],
                           capture_output=True, text=True)
        out = p.stdout
        check('iscsi-ls', p.returncode == 0 and T1 in out and out.count('Lun:') >= 2,
              'iscsi-ls -s through the new portal with CHAP: exit %d, %s' % (
                  p.returncode, (out + p.stderr).strip().replace('\n', ' | ')[:400]))
    else:
        R('SKIP', 'iscsi-ls', 'iscsi-ls not installed (libiscsi-bin; scripts/deps.sh)')
    if shutil.which('qemu-io'):
        opts = ('driver=iscsi,transport=tcp,portal=%s:%d,target=%s,lun=1,user=%s,'
                'password=%s,initiator-name=%s' % (HOST, E.port2, T1, CHAP_USER, CHAP_SECRET,
                                                   INI))
        p = subprocess.run(['timeout', '60', 'qemu-io', '--image-opts', opts,
                            '-c', 'write -P 0x5a 1M 1M', '-c', 'read -P 0x5a 1M 1M'],
                           capture_output=True, text=True)
        out = p.stdout + p.stderr
        check('qemu-io', p.returncode == 0 and 'Pattern verification failed' not in out and
              out.count('bytes at offset') >= 2 and 'read 1048576/1048576' in out,
              'qemu-io write+read pattern on the file LUN: exit %d, %s' % (
                  p.returncode, out.strip().replace('\n', ' | ')[:300]))
    else:
        R('SKIP', 'qemu-io', 'qemu-io not installed (qemu-utils; scripts/deps.sh)')
    for lun in (0, 1):
        ok, why = bench_result(bench(T1, lun, 3, E.port2, chap=True))
        check('ix-bench-lun%d' % lun, ok, why)


def step_stats():
    """Login outcomes by reason: one good login, one with a wrong CHAP secret, one to a target
    that does not exist, counted exactly."""
    before = ctl_json('stats')
    good = X.Session(HOST, E.port2, initiator=INI, target=T1, timeout=10)
    good.login(chap=(CHAP_USER, CHAP_SECRET))
    during = ctl_json('stats')
    outcomes = []
    for target, chap in ((T1, (CHAP_USER, 'wrong-secret-000')),
                         ('iqn.2026-11.io.ix.test:nonesuch', None)):
        s = X.Session(HOST, E.port2, initiator=INI, target=target, timeout=10)
        try:
            s.login(chap=chap) if chap else s.login()
            outcomes.append('logged in')
        except Exception as e:  # noqa: BLE001
            outcomes.append(type(e).__name__)
        s.close()
    good.logout()
    good.close()
    after = ctl_json('stats')

    def d(key, *path):
        a, b = before, after
        for k in path:
            a, b = a[k], b[k]
        return b - a
    acc = d('x', 'logins', 'accepted', 'normal')
    auth = d('x', 'logins', 'refused', 'authentication_failed')
    nf = d('x', 'logins', 'refused', 'not_found')
    live = during['sessions']['normal']['tcp']
    check('stats-logins', acc == 1 and auth == 1 and nf == 1 and live >= 1 and
          'logged in' not in outcomes,
          'deltas: accepted %d, authentication_failed %d, not_found %d; tcp sessions while '
          'one was open: %d; bad logins: %s' % (acc, auth, nf, live, outcomes))
    rc, out, err = ctl('stats')
    check('stats-text', rc == 0 and 'authentication_failed' in out,
          'ix-ctl stats: exit %d: %s' % (rc, out.strip()))


# ---- 3. delete a target with a live session, another target busy ------------------------------

def sendtargets(port):
    return X.send_targets(HOST, port, INI)


def find_session(target, initiator=INI):
    for x in ctl_json('sessions'):
        if x['target'] == target and x['initiator'] == initiator:
            return x
    return None


def step_sessions():
    """Inspection and session control, on a raw session to the busy second target."""
    s = X.Session(HOST, E.port, initiator=RAW, target=T2, timeout=10)
    s.login()
    s.read_capacity10()
    x = find_session(T2, RAW)
    keys = (x or {}).get('keys', {})
    check('sessions-inspect', x is not None and x['portal'] == 'base' and
          x['transport'] == 'tcp' and x['type'] == 'normal' and
          x['peer'].startswith('127.0.0.1:') and keys.get('HeaderDigest') == 'None' and
          'MaxBurstLength' in keys and x['cmdsn']['window'] >= 1 and
          x['local'] == '%s:%d' % (HOST, E.port),
          'ix-ctl --json sessions: %s' % json.dumps(x)[:400])
    rc, out, err = ctl('sessions', '-v')
    check('sessions-text', rc == 0 and T2 in out and 'MaxBurstLength=' in out,
          'ix-ctl sessions -v: exit %d, %d lines' % (rc, len(out.splitlines())))
    if x is None:
        s.close()
        return
    rc, out, err = ctl('session', 'logout', str(x['tsih']))
    pdu = X.wait_async(s, 10)
    if isinstance(pdu, str):
        check('session-logout-request', False, 'exit %d; %s' % (rc, pdu))
    else:
        ev = pdu.u8(36)
        try:
            s.logout()
            why = 'logged out'
        except Exception as e:  # noqa: BLE001
            ev, why = -1, '%s: %s' % (type(e).__name__, e)
        check('session-logout-request', rc == 0 and ev == 1,
              'ix-ctl session logout: exit %d; AsyncEvent %d; %s' % (rc, ev, why))
    s.close()
    s = X.Session(HOST, E.port, initiator=RAW, target=T2, timeout=10)
    s.login()
    x = find_session(T2, RAW)
    rc, out, err = ctl('session', 'logout', str(x['tsih']) if x else '1', '--drop')
    try:
        s.recv(10)
        closed = False
    except X.Closed:
        closed = True
    except Exception:  # noqa: BLE001
        closed = False
    s.close()
    check('session-drop', rc == 0 and closed, 'ix-ctl session logout --drop: exit %d, '
          'connection %s' % (rc, 'closed' if closed else 'still open'))
    rc, out, err = ctl('session', 'logout', '65000')
    check('session-logout-missing', rc == 1 and 'no session' in err,
          'unknown TSIH: exit %d %s' % (rc, err.strip()))


def step_delete_live():
    s = X.Session(HOST, E.port2, initiator=INI, target=T1, timeout=10)
    s.login(chap=(CHAP_USER, CHAP_SECRET))
    s.read_capacity10()
    rc, out, err = ctl('target', 'delete', T1)
    check('delete-target', rc == 0, 'ix-ctl target delete with a live session: exit %d %s' %
          (rc, (out + err).strip()))
    pdu = X.wait_async(s, 10)
    if isinstance(pdu, str):
        check('async-logout-request', False, pdu)
        s.close()
    else:
        ev = pdu.u8(36)
        check('async-logout-request', ev == 1,
              'Async Message AsyncEvent %d (1 = target requests Logout)' % ev)
        try:
            s.logout()
            ended = True
            why = 'logged out'
        except Exception as e:  # noqa: BLE001
            ended, why = False, '%s: %s' % (type(e).__name__, e)
        s.close()
        check('session-ends', ended, why)
    names = sendtargets(E.port)
    check('deleted-target-gone', T1 not in names and T2 in names,
          'SendTargets after the delete: %s' % names)
    rc, out, err = ctl('portal', 'delete', 'new')
    gone = False
    try:
        socket.create_connection((HOST, E.port2), timeout=3).close()
    except OSError:
        gone = True
    check('portal-delete', rc == 0 and gone, 'ix-ctl portal delete: exit %d; port %d %s' % (
        rc, E.port2, 'refuses connections' if gone else 'still accepts'))


# ---- resize under load -----------------------------------------------------------------------

def sense_of(sense):
    return X.sense3(sense) or (None, None, None)


def capacity16(s):
    cdb = bytes([0x9e, 0x10]) + bytes(8) + (32).to_bytes(4, 'big') + bytes(2)
    st, data, sense, _ = s.scsi(cdb, read_len=32)
    if st != 0:
        return None, sense_of(sense)
    return (int.from_bytes(data[0:8], 'big') + 1) * int.from_bytes(data[8:12], 'big'), None


def step_resize():
    """A file LUN grows while ix-bench --verify runs on it: the initiators get CAPACITY DATA
    HAS CHANGED (6/2A/09) and READ CAPACITY reports the new size; the bench sees no error."""
    path = os.path.join(E.dir, 'grow.img')
    rc1 = ctl('target', 'create', T3)[0]
    rc2 = ctl('lun', 'create', T3, '0', '--file', path, '--size', '64M')[0]
    s = X.Session(HOST, E.port, initiator=RAW, target=T3, timeout=10)
    s.login()
    s.scsi_retry_ua(bytes(6))  # the power-on unit attention, once
    before, _ = capacity16(s)
    busy = bench(T3, 0, 8, E.port, extra=('--range', '64M'))
    time.sleep(2)
    rc, out, err = ctl('lun', 'resize', T3, '0', '128M')
    check('resize', rc1 == 0 and rc2 == 0 and rc == 0,
          'ix-ctl lun resize to 128M: exit %d %s' % (rc, (out + err).strip()))
    st, _, sense, _ = s.scsi(bytes(6))
    ua = sense_of(sense) if st == 2 else None
    after, why = capacity16(s)
    s.close()
    check('resize-unit-attention', ua == (6, 0x2a, 0x09),
          'TEST UNIT READY after the resize: status 0x%02x sense %s (want 6/2A/09)' % (
              st, ua))
    check('resize-capacity', before == 64 << 20 and after == 128 << 20,
          'READ CAPACITY(16): %s bytes before, %s after%s' % (before, after,
                                                            ' (%s)' % (why,) if why else ''))
    check('resize-file', os.path.getsize(path) == 128 << 20,
          'backing file is %d bytes' % os.path.getsize(path))
    ok, why = bench_result(busy)
    check('resize-under-bench', ok, 'ix-bench --verify on the LUN throughout: ' + why)
    rc, out, err = ctl('lun', 'resize', T3, '0', '32M')
    check('resize-shrink-refused', rc == 1 and 'only grow' in err,
          'shrink to 32M: exit %d %s' % (rc, err.strip()))
    rc, out, err = ctl('lun', 'resize', T2, '0', '256M')
    check('resize-ram', rc == 0, 'a RAM LUN grows too (tests/interop/mgmt2.py checks it '
          'under I/O): exit %d %s' % (rc, (out + err).strip()))
    luns = ctl_json('rpc', 'iscsi_get_luns', json.dumps({'target': T3}))
    check('resize-in-config', luns and luns[0].get('size') == '128M',
          'iscsi_get_luns: %s' % luns)

    # offline and back: NOT READY, OFFLINE (04/12) for medium commands, INQUIRY still answers;
    # back online: NOT READY TO READY CHANGE (6/28/00), then good
    s = X.Session(HOST, E.port, initiator=RAW, target=T3, timeout=10)
    s.login()
    s.scsi_retry_ua(bytes(6))
    rc1 = ctl('lun', 'offline', T3, '0')[0]
    off_cfg = ctl_json('rpc', 'iscsi_get_luns', json.dumps({'target': T3}))[0].get('offline')
    st1, _, sense1, _ = s.scsi(bytes(6))
    inq = bytes([0x12, 0, 0, 0, 96, 0])
    st2, data, _, _ = s.scsi(inq, read_len=96)
    read10 = bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0])
    st3, _, sense3, _ = s.scsi(read10, read_len=4096)
    rc2 = ctl('lun', 'online', T3, '0')[0]
    st4, _, sense4, _ = s.scsi(bytes(6))
    st5, _, _, _ = s.scsi(bytes(6))
    s.close()
    got = (st1, sense_of(sense1) if st1 == 2 else None, st2,
           st3, sense_of(sense3) if st3 == 2 else None,
           st4, sense_of(sense4) if st4 == 2 else None, st5)
    want = (2, (2, 0x04, 0x12), 0, 2, (2, 0x04, 0x12), 2, (6, 0x28, 0x00), 0)
    check('lun-offline-online', rc1 == 0 and rc2 == 0 and off_cfg is True and got == want,
          'ix-ctl lun offline/online: exit %d/%d, config offline=%s; TUR, INQUIRY, READ '
          'offline, TUR, TUR online: %s (want %s)' % (rc1, rc2, off_cfg, got, want))


# ---- 4. bad input ----------------------------------------------------------------------------

def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def step_bad_input():
    a, closed = raw(b'{"jsonrpc": "2.0", "id": 1, "method": "x", }')
    check('malformed-json', err_code(a) == -32700 and closed,
          'answers %s, closed %s' % (a, closed))
    a, closed = raw(b'hello')
    check('not-json', err_code(a) == -32700 and closed, 'answers %s, closed %s' % (a, closed))
    a, _ = raw(req('iscsi_frobnicate'))
    check('unknown-method', err_code(a) == -32601, 'answers %s' % a)
    cases = [
        ('wrong-type-param', req('iscsi_delete_lun', {'target': T2, 'lun': 'zero'}), -32602),
        ('params-not-object', req('iscsi_get_targets', [1, 2]), -32602),
        ('unknown-param', req('iscsi_get_targets', {'nmae': T2}), -32602),
        ('id-object', b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "rpc_get_methods"}', -32600),
        ('no-version', b'{"id": 1, "method": "rpc_get_methods"}', -32600),
        ('method-number', b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600),
        ('lun-bad-object', req('iscsi_create_lun', {'target': T2, 'lun': {'lun': 5,
                                                                            'backend': 'tape'}}),
         -32000),
        ('empty-batch', b'[]', -32600),
    ]
    for name, data, want in cases:
        a, _ = raw(data)
        check(name, err_code(a) == want, 'want %d: answers %s' % (want, a))
    a, _ = raw(b'[' + req('rpc_get_methods', rid=1) + b',' + req('nope', rid=2) + b']')
    check('batch', len(a) == 1 and isinstance(a[0], list) and len(a[0]) == 2 and
          'result' in a[0][0] and a[0][1]['error']['code'] == -32601, 'answers %s' % a)
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "rpc_get_methods", "params": {"x": "' + \
        b'a' * (2 << 20) + b'"}}'
    a, closed = raw(big)
    check('oversized', err_code(a) == -32006 and closed,
          'a 2 MiB request: answers %s, closed %s' % ([x.get('error') for x in a], closed))
    deep = b'[' * 100 + b']' * 100
    a, closed = raw(deep)
    check('too-deep', err_code(a) == -32006 and closed,
          'nesting 100 deep: answers %s, closed %s' % (a, closed))

    # a caller that is not allowed: the socket is 0600 (connect refused by the file system);
    # opened up to 0666 the daemon checks SO_PEERCRED itself
    probe = ('import socket,sys\ns=socket.socket(socket.AF_UNIX)\n'
             'try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print("connect:",e.errno);'
             'sys.exit(0)\ns.sendall(sys.argv[2].encode());s.shutdown(socket.SHUT_WR)\n'
             'b=b""\nwhile True:\n d=s.recv(4096)\n if not d: break\n b+=d\nprint(b.decode())')
    mode = os.stat(E.sock).st_mode & 0o777
    p = subprocess.run([PY, '-c', probe, E.sock, req('iscsi_get_config').decode()],
                       capture_output=True, text=True, preexec_fn=as_nobody, timeout=20)
    check('socket-mode', mode == 0o600 and 'connect: 13' in p.stdout,
          'socket mode %o; as nobody: %s' % (mode, p.stdout.strip()[:200]))
    os.chmod(E.sock, 0o666)
    p = subprocess.run([PY, '-c', probe, E.sock, req('iscsi_get_config').decode()],
                       capture_output=True, text=True, preexec_fn=as_nobody, timeout=20)
    os.chmod(E.sock, 0o600)
    try:
        ans = json.loads(p.stdout.strip().splitlines()[0])
    except (ValueError, IndexError):
        ans = {}
    check('peercred-refused', ans.get('error', {}).get('code') == -32005 and
          CHAP_SECRET not in p.stdout,
          'as nobody on a 0666 socket: %s' % (p.stdout + p.stderr).strip()[-300:])

    # a half-written request that stalls: closed after 5 s; others are served meanwhile
    s = socket.socket(socket.AF_UNIX)
    s.connect(E.sock)
    s.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "rpc_get_')
    t0 = time.monotonic()
    a, _ = raw(req('rpc_get_methods'))
    served = len(a) == 1 and 'result' in a[0]
    s.settimeout(20)
    buf = b''
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            buf += d
    except socket.timeout:
        pass
    waited = time.monotonic() - t0
    s.close()
    check('stalled-request', served and b'-32006' in buf and 4 <= waited <= 12,
          'other client served meanwhile: %s; stalled one got %s and was closed after %.1f s' %
          (served, buf.decode(errors='replace').strip()[:120], waited))

    # the same, one byte a second: the 5 s count from the first byte, not the last
    s = socket.socket(socket.AF_UNIX)
    s.connect(E.sock)
    s.settimeout(0.2)
    t0 = time.monotonic()
    buf, closed_at = b'', None
    for ch in b'{"jsonrpc": "2.0", "id": 1, "method": "rpc_get_methods"':
        try:
            s.sendall(bytes([ch]))
        except OSError:
            closed_at = time.monotonic() - t0
            break
        end = time.monotonic() + 1
        while time.monotonic() < end:
            try:
                d = s.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                d = b''
            if not d:
                closed_at = time.monotonic() - t0
                break
            buf += d
        if closed_at is not None or time.monotonic() - t0 > 12:
            break
    s.close()
    check('trickled-request', closed_at is not None and 4 <= closed_at <= 8 and b'-32006' in buf,
          'one byte a second: %s after %s s' % (buf.decode(errors='replace').strip()[:100],
                                                '%.1f' % closed_at if closed_at else 'never'))

    # 1000 requests in a burst on one connection
    # (every tenth asks the workers, whose answer comes later: the ones behind it wait)
    burst = b''.join(req('iscsi_get_sessions' if i % 10 == 0 else 'iscsi_get_targets',
                         {'target': T2} if i % 10 == 0 else {'name': T2}, rid=i)
                     for i in range(1000))
    a, closed = raw(burst, timeout=60)
    ids = [x.get('id') for x in a]
    check('burst-1000', ids == list(range(1000)) and all('result' in x for x in a),
          '%d answers, in order %s' % (len(a), ids == list(range(1000))))

    # 64 connections at once: each answered (or refused with an error) and closed
    results = []

    def one(i):
        try:
            results.append(raw(req('rpc_get_methods', rid=i), timeout=20))
        except OSError as e:
            results.append(([], 'connect: %s' % e))
    ths = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    answered = sum(1 for a, c in results if len(a) == 1 and 'result' in a[0])
    refused = sum(1 for a, c in results if len(a) == 1 and a[0].get('error', {}).get('code') ==
                  -32006)
    closed = sum(1 for a, c in results if len(a) == 0 and c is True)
    check('connections-64', answered + refused + closed == 64 and answered >= 16,
          '%d answered, %d refused (too many connections), %d closed without an answer, '
          '%d other (hung or garbled)' % (answered, refused, closed,
                                          64 - answered - refused - closed))
    # connections held open: past 16 the next is refused with an error; freed, served again
    held = []
    for _ in range(16):
        h = socket.socket(socket.AF_UNIX)
        h.connect(E.sock)
        held.append(h)
    time.sleep(0.3)
    a, closed = raw(req('rpc_get_methods'))
    for h in held:
        h.close()
    time.sleep(0.3)
    b, _ = raw(req('rpc_get_methods'))
    check('connection-limit', err_code(a) == -32006 and closed and len(b) == 1 and
          'result' in b[0], '17th connection: %s; after the 16 closed: %s' % (
              a, 'served' if len(b) == 1 and 'result' in b[0] else b))
    check('daemon-alive-after-bad-input', daemon_alive() and ctl('ls')[0] == 0,
          'daemon running, ix-ctl ls works')


# ---- 5. save, restart, same state ------------------------------------------------------------

def step_save_restart():
    # some state worth saving: a file LUN with options and an ACL with CHAP
    ctl('target', 'create', T1)
    ctl('lun', 'create', T1, '3', '--file', E.file_lun, '--write-cache')
    ctl('acl', 'create', T1, INI, '--chap-user', CHAP_USER, '--chap-secret', CHAP_SECRET)
    before = ctl('ls', '--json')
    rc, out, err = ctl('save')
    mode = os.stat(E.cfg).st_mode & 0o777
    check('save', rc == 0 and mode == 0o600 and not os.path.exists(E.cfg + '.tmp'),
          'ix-ctl save: exit %d %s; file mode %o' % (rc, (out + err).strip()[:200], mode))
    E.d.stop()
    E.d = ixtest.Daemon(E.cfg, 'mgmt.daemon2.log')
    after = ctl('ls', '--json')
    check('restart-identical', before[0] == 0 and before[1] == after[1] and T1 in after[1],
          'ls --json before (%d bytes) and after restart (%d bytes) %s' % (
              len(before[1]), len(after[1]),
              'identical' if before[1] == after[1] else 'differ'))
    ok, why = bench_result(bench(T1, 3, 2, E.port, chap=True))
    check('restarted-serves', ok, why)


def setup():
    os.chmod(E.dir, 0o711)  # nobody reaches the socket (step 4); the socket's mode decides
    E.sock = os.path.join(E.dir, 'run', 'ix-target.sock')
    E.port2 = ixtest.free_port()
    while E.port2 == E.port:
        E.port2 = ixtest.free_port()
    write_config(E.cfg, E.port, E.sock)


def step_busy_other():
    """Sessions, a target deleted and bad input while ix-bench --verify runs on another."""
    busy = bench(T2, 0, 30, E.port)
    for step in (step_sessions, step_delete_live, step_bad_input):
        step()
    ok, why = bench_result(busy)
    check('other-target-undisturbed', ok, 'ix-bench --verify on %s throughout: %s' % (
        T2, why))


def main():
    return ixmgmt.main(R, E, 'mgmt', setup, (
        step_create, step_initiators, step_stats, step_busy_other, step_resize,
        step_save_restart))


if __name__ == '__main__':
    R.main(main)
