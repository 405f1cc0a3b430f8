#!/usr/bin/env python3
"""ix-target configuration reload (SIGHUP), seen from an initiator.

design.md: the daemon validates a new config whole before applying it, and applies a reload
as the difference between old and new, so sessions on unchanged targets are not disturbed.
  1. add a target, and a LUN 1 to the first target + SIGHUP: the target appears in
     SendTargets and serves its file LUN at the new size; the first target's session, logged
     in before, sees LUN 1 in REPORT LUNS after one unit attention REPORTED LUNS DATA HAS
     CHANGED (3F/0E, SPC-4) on LUN 0, and can write and read LUN 1;
  2. a broken file + SIGHUP: the daemon keeps running with the previous config;
  3. remove the added target and LUN 1 + SIGHUP:
     - the target disappears from SendTargets and refuses logins (0x0203);
     - each of its two sessions gets an Async Message "target requests Logout" (RFC 7143
       11.9.1, AsyncEvent 1) with Parameter3 = global.logout_timeout_ms in seconds; the one
       that logs out gets its Logout Response and the connection closes; the one that does not
       keeps being served, then gets AsyncEvent 3 (target drops all connections) after the
       timeout and is closed; once both are gone the daemon no longer holds the LUN's file;
     - a real initiator, QEMU's libiscsi (qemu-io holding a session open), logs out when asked;
     - on the first target, LUN 1 answers LOGICAL UNIT NOT SUPPORTED (5/25/00) and LUN 0 keeps
       its data and keeps working (after one 3F/0E unit attention).
ix only (tgt has no config file reload): exits 77 against other peers.
"""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

ixtest.with_peer('reload', 300)

if os.environ.get('PEER_KIND') != 'ix' or not os.environ.get('PEER_CONFIG'):
    print('SKIP: config reload is an ix-target feature (peer is %s)' %
          os.environ.get('PEER_KIND'), file=sys.stderr)
    sys.exit(77)

HOST = os.environ.get('IX_HOST', '127.0.0.1')
PORT = int(os.environ['PEER_PORT'])
IQN = os.environ['PEER_IQN']
PID = int(os.environ['PEER_PID'])
CFG = os.environ['PEER_CONFIG']
IQN2 = IQN + '-added'
INITIATOR = 'iqn.2024-01.org.ix.test:reload'
report = ixtest.Reporter('reload')


def write_config(cfg):
    tmp = CFG + '.tmp'
    with open(tmp, 'w') as f:
        if isinstance(cfg, str):
            f.write(cfg)
        else:
            json.dump(cfg, f, indent=2)
    os.replace(tmp, CFG)


def hup():
    os.kill(PID, signal.SIGHUP)


def alive():
    try:
        os.kill(PID, 0)
        return True
    except ProcessLookupError:
        return False


def listed():
    return X.send_targets(HOST, PORT, INITIATOR)


def wait_for(pred, secs=10):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def session_ok(s, tag):
    try:
        s.nop(tag.encode(), timeout=5)
        s.read_capacity10()
        return None
    except Exception as e:  # noqa: BLE001
        return '%s: %s' % (type(e).__name__, e)


def sense_of(sense):
    return X.sense3(sense) or (None, None, None)


def on_lun(s, lun, fn):
    old, s.lun = s.lun, lun
    try:
        return fn()
    finally:
        s.lun = old


def tur(s, lun):
    st, _, sense, _ = on_lun(s, lun, lambda: s.scsi(bytes(6)))
    return st, sense_of(sense)


def report_luns(s):
    cdb = bytes([0xa0, 0, 0, 0, 0, 0]) + struct.pack('>I', 4096) + bytes(2)
    st, data, sense, _ = s.scsi(cdb, read_len=4096)
    if st != 0:
        raise X.ProtocolError('REPORT LUNS status 0x%02x sense %s' % (st, sense.hex()))
    n = struct.unpack('>I', data[:4])[0] // 8
    return sorted(struct.unpack('>H', data[8 + 8 * i:10 + 8 * i])[0] & 0x3fff for i in range(n))


def write_read(s, lun, lba, data):
    """WRITE(10) then READ(10) of data at lba on lun (unit attentions retried); None or why."""
    blocks = len(data) // 512
    w = bytes([0x2a, 0]) + struct.pack('>IBHB', lba, 0, blocks, 0)
    st, _, sense, _ = on_lun(s, lun, lambda: s.scsi_retry_ua(w, write_data=data))
    if st != 0:
        return 'WRITE(10) on LUN %d: status 0x%02x sense %r' % (lun, st, sense_of(sense))
    return read_check(s, lun, lba, data)


def read_check(s, lun, lba, data):
    blocks = len(data) // 512
    r = bytes([0x28, 0]) + struct.pack('>IBHB', lba, 0, blocks, 0)
    st, got, sense, _ = on_lun(s, lun, lambda: s.scsi_retry_ua(r, read_len=len(data)))
    if st != 0:
        return 'READ(10) on LUN %d: status 0x%02x sense %r' % (lun, st, sense_of(sense))
    return None if got == data else 'LUN %d: data read back differs' % lun


def file_open_by_daemon(path):
    real = os.path.realpath(path)
    try:
        fds = os.listdir('/proc/%d/fd' % PID)
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink('/proc/%d/fd/%s' % (PID, fd)) == real:
                return True
        except OSError:
            pass
    return False


def wait_closed(s, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            pdu = s.recv(max(0.1, end - time.monotonic()))
        except X.Closed:
            return True
        except X.Timeout:
            break
        if pdu.opcode == X.OP_NOP_IN and pdu.itt == X.ALL_ONES:
            s.answer_target_nop(pdu)
    return False


def step_add(orig, lun_file):
    """1. add a target (a file LUN) and LUN 1 of the first target."""
    cfg = json.loads(json.dumps(orig))
    cfg['targets'].append({'name': IQN2, 'luns': [{'lun': 0, 'backend': 'file',
                                                   'path': lun_file, 'size': '32M'}]})
    cfg['targets'][0]['luns'].append({'lun': 1, 'backend': 'ram', 'size': '16M'})
    write_config(cfg)
    hup()
    if wait_for(lambda: IQN2 in listed()):
        try:
            s2 = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN2, timeout=10)
            s2.login()
            lba, bs = s2.read_capacity10()
            s2.close()
            if (lba + 1) * bs == 32 << 20:
                report('PASS', 'add-target', 'listed and serving 32 MiB')
            else:
                report('FAIL', 'add-target', 'added LUN has %d bytes' % ((lba + 1) * bs))
        except Exception as e:  # noqa: BLE001
            report('FAIL', 'add-target', 'login to the added target: %s: %s' % (
                type(e).__name__, e))
    else:
        report('FAIL', 'add-target', 'not in SendTargets 10 s after SIGHUP: %r' % listed())
    return cfg


def step_add_lun(first):
    # The reload is seen as the unit attention on LUN 0 (which this session has used).
    got = []
    if wait_for(lambda: got.append(tur(first, 0)) or got[-1] == (2, (6, 0x3f, 0x0e))):
        report('PASS', 'add-lun-unit-attention', 'LUN 0: 6/3F/0E REPORTED LUNS DATA HAS CHANGED')
    else:
        report('FAIL', 'add-lun-unit-attention', 'LUN 0 TEST UNIT READY still status 0x%02x '
               'sense %r 10 s after SIGHUP, expected CHECK CONDITION 6/3F/0E once' % got[-1])
    luns = report_luns(first)
    if luns != [0, 1]:
        report('FAIL', 'add-lun', 'REPORT LUNS %r after SIGHUP, expected [0, 1]' % luns)
        return False
    err = write_read(first, 1, 8, os.urandom(8 * 512))
    report('FAIL' if err else 'PASS', 'add-lun', err or 'REPORT LUNS [0, 1]; LUN 1 written '
           'and read back by a session that logged in before')
    return not err


def step_remove_sessions(rm_a, rm_b, t0, wait_s):
    """3. the two sessions of the removed target: one logs out when asked, one does not."""
    pdu = X.wait_async(rm_a, 10)
    if isinstance(pdu, str):
        report('FAIL', 'removed-target-logout-request', 'session A: ' + pdu)
    else:
        ev, _, _, p3 = X.async_fields(pdu)
        if ev != 1 or p3 != wait_s:
            report('FAIL', 'removed-target-logout-request', 'AsyncEvent %d Parameter3 %d, '
                   'expected 1 (target requests Logout) and %d' % (ev, p3, wait_s))
        else:
            try:
                resp = rm_a.logout(0)
                closed = wait_closed(rm_a, 5)
                if resp == 0 and closed:
                    report('PASS', 'removed-target-logout-request', 'AsyncEvent 1, Parameter3 '
                           '%d s; Logout answered 0 and the connection closed' % p3)
                else:
                    report('FAIL', 'removed-target-logout-request', 'Logout response %d, '
                           'connection closed: %s' % (resp, closed))
            except Exception as e:  # noqa: BLE001
                report('FAIL', 'removed-target-logout-request', 'logout: %s: %s' % (
                    type(e).__name__, e))
    rm_a.close()

    pdu = X.wait_async(rm_b, 10)
    if isinstance(pdu, str) or X.async_fields(pdu)[0] != 1:
        report('FAIL', 'removed-target-drop', 'session B: no logout request: %s' % (
            pdu if isinstance(pdu, str) else pdu.describe()))
        rm_b.close()
        return
    err = session_ok(rm_b, 'still-served')
    report('FAIL' if err else 'PASS', 'removed-target-served-until-drop',
           err or 'commands answered after the logout request')
    pdu = X.wait_async(rm_b, wait_s + 10)
    t = time.monotonic() - t0
    if isinstance(pdu, str):
        report('FAIL', 'removed-target-drop', 'session B: ' + pdu)
    else:
        ev, _, t2w, t2r = X.async_fields(pdu)
        closed = wait_closed(rm_b, 5)
        if ev == 3 and t2r == 0 and wait_s - 0.5 <= t <= wait_s + 5 and closed:
            report('PASS', 'removed-target-drop', 'AsyncEvent 3 (Time2Wait %d, Time2Retain 0) '
                   '%.1f s after SIGHUP, then closed' % (t2w, t))
        else:
            report('FAIL', 'removed-target-drop', 'AsyncEvent %d Time2Retain %d at %.1f s '
                   '(expected 3 and 0 at about %d s), closed: %s' % (ev, t2r, t, wait_s, closed))
    rm_b.close()


QEMU_INITIATOR = 'iqn.2008-11.org.linux-kvm'  # the name libiscsi uses inside QEMU


def daemon_log():
    try:
        return open(os.environ.get('PEER_LOG', ''), errors='replace').read()
    except OSError:
        return ''


def qemu_start():
    """qemu-io with a session on the added target, idle in a sleep; (process, why-not)."""
    if not shutil.which('qemu-io'):
        return None, 'qemu-io not installed (qemu-utils)'
    url = 'iscsi://%s:%d/%s/0' % (HOST, PORT, IQN2)
    p = subprocess.Popen(['qemu-io', '-f', 'raw', '-c', 'read 0 4k', '-c', 'sleep 60000', url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if wait_for(lambda: '%s -> %s' % (QEMU_INITIATOR, IQN2) in daemon_log() or
                p.poll() is not None):
        if p.poll() is None:
            return p, None
        return None, 'qemu-io exited: %s' % p.stdout.read().decode(errors='replace')[-300:]
    p.kill()
    p.wait()
    return None, 'no QEMU session on %s after 10 s' % IQN2


def step_qemu_logout(p, why):
    if not p:
        report('SKIP', 'removed-target-qemu-logs-out', why)
        return
    asked = '%s logged out as asked (target %s removed)' % (QEMU_INITIATOR, IQN2)
    refused = 'login from %s failed (status 0x0203)' % QEMU_INITIATOR
    ok = wait_for(lambda: asked in daemon_log(), 5)
    relogin = wait_for(lambda: refused in daemon_log(), 5)
    p.kill()
    p.wait()
    if ok and relogin:
        report('PASS', 'removed-target-qemu-logs-out', 'QEMU (libiscsi) sent Logout on the '
               'Async Message; its re-login was refused 0x0203')
    else:
        report('FAIL', 'removed-target-qemu-logs-out', 'within 5 s of SIGHUP the daemon log '
               'lacks %r' % (asked if not ok else refused))


def step_remove_lun(first, pattern):
    got = []
    if not wait_for(lambda: got.append(tur(first, 1)) or got[-1] == (2, (5, 0x25, 0))):
        report('FAIL', 'remove-lun', 'LUN 1 TEST UNIT READY still status 0x%02x sense %r '
               '10 s after SIGHUP' % got[-1])
    else:
        luns = report_luns(first)
        report('PASS' if luns == [0] else 'FAIL', 'remove-lun',
               'LUN 1: CHECK CONDITION 5/25/00 LOGICAL UNIT NOT SUPPORTED; REPORT LUNS %r' % luns)
    st, sk = tur(first, 0)
    ua = st == 2 and sk == (6, 0x3f, 0x0e)
    err = read_check(first, 0, 100, pattern) or write_read(first, 0, 200, os.urandom(4096))
    if err or not ua:
        report('FAIL', 'kept-lun-works', err or 'first command on LUN 0: status 0x%02x sense '
               '%r, expected the 6/3F/0E unit attention' % (st, sk))
    else:
        report('PASS', 'kept-lun-works', 'LUN 0: one 3F/0E unit attention, data intact, '
               'reads and writes work')


def main():
    orig = json.load(open(CFG))
    wait_s = 2
    orig.setdefault('global', {})['logout_timeout_ms'] = wait_s * 1000
    lun_file = os.path.join(os.path.dirname(CFG), 'added-target-lun0.img')
    write_config(orig)
    first = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN, timeout=10)
    first.login()
    first.read_capacity10()
    pattern = os.urandom(8 * 512)
    err = write_read(first, 0, 100, pattern)
    if err:
        report('FAIL', 'setup', err)
        return 1

    # 1. add a target and a LUN
    step_add(orig, lun_file)
    lun_added = step_add_lun(first)
    err = session_ok(first, 'after-add')
    report('FAIL' if err else 'PASS', 'unchanged-session-survives-add', err or '')
    added = IQN2 in listed()

    # 2. a broken file changes nothing
    before = sorted(listed())
    write_config('{"targets": [ this is not json')
    hup()
    time.sleep(1.0)
    if not alive():
        report('FAIL', 'broken-config-ignored', 'the daemon exited on a broken config')
        return 1
    names = sorted(listed())
    if names == before:
        report('PASS', 'broken-config-ignored', 'still serving %r' % names)
    else:
        report('FAIL', 'broken-config-ignored', 'targets were %r, now %r' % (before, names))
    err = session_ok(first, 'after-broken')
    report('FAIL' if err else 'PASS', 'unchanged-session-survives-broken-reload', err or '')

    # 3. remove the added target (with two sessions on it) and LUN 1
    rm = []
    if added:
        for _ in range(2):
            s = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN2, timeout=10)
            s.login()
            s.read_capacity10()
            rm.append(s)
        if not file_open_by_daemon(lun_file):
            report('FAIL', 'removed-target-lu-closed', 'precondition: the daemon does not hold '
                   '%s open while sessions use it' % lun_file)
    qemu, why = qemu_start() if added else (None, None)
    write_config(orig)
    t0 = time.monotonic()
    hup()
    if not added:
        report('SKIP', 'remove-target', 'nothing to remove: adding the target failed')
    else:
        step_remove_sessions(rm[0], rm[1], t0, wait_s)
        step_qemu_logout(qemu, why)
        if wait_for(lambda: IQN2 not in listed()):
            try:
                s3 = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN2, timeout=10)
                s3.login()
                report('FAIL', 'remove-target', 'login to the removed target succeeded')
            except X.LoginFailed as e:
                if e.status in (0x0203, 0x0204):
                    report('PASS', 'remove-target', 'login refused 0x%04x' % e.status)
                else:
                    report('FAIL', 'remove-target', 'login refused 0x%04x, expected '
                           '0x0203/0x0204' % e.status)
        else:
            report('FAIL', 'remove-target', 'still listed 10 s after SIGHUP')
        if wait_for(lambda: file_open_by_daemon(lun_file) is False, 5):
            report('PASS', 'removed-target-lu-closed', 'the LUN file is closed once its '
                   'sessions have ended')
        else:
            report('FAIL', 'removed-target-lu-closed', '%s still open 5 s after the last '
                   'session ended' % lun_file)
    if lun_added:
        step_remove_lun(first, pattern)
    else:
        report('SKIP', 'remove-lun', 'nothing to remove: adding LUN 1 failed')
    err = session_ok(first, 'after-remove')
    report('FAIL' if err else 'PASS', 'unchanged-session-survives-remove', err or '')
    first.close()
    return 1 if report.failed else 0


if __name__ == '__main__':
    report.main(main)
