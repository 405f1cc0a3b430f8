#!/usr/bin/env python3
"""ix-target configuration reload (SIGHUP), seen from an initiator.

design.md: the daemon validates a new config whole before applying it, and applies a reload
as the difference between old and new, so sessions on unchanged targets are not disturbed.
  1. add a target + SIGHUP: it appears in SendTargets and serves its LUN at the new size,
     while a session on the first target, logged in before, keeps working;
  2. a broken file + SIGHUP: the daemon keeps running with the previous config;
  3. remove the added target + SIGHUP: it disappears from SendTargets and refuses logins
     (0x0203), and the first session still works.
ix only (tgt has no config file reload): exits 77 against other peers.
"""

import json
import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, '..', 'lib')
sys.path.insert(0, LIB)
import ixiscsi as X  # noqa: E402

if 'PEER_PORT' not in os.environ:
    os.execvp('bash', ['bash', os.path.join(LIB, 'with-peer.sh'), 'reload', '300',
                       sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

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
failed = 0


def report(st, name, detail=''):
    global failed
    line = '%s reload.%s %s' % (st, name, detail)
    print(line, flush=True)
    if os.environ.get('IX_RESULTS'):
        with open(os.environ['IX_RESULTS'], 'a') as f:
            f.write(line + '\n')
    failed += st == 'FAIL'


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
    s = X.Session(HOST, PORT, initiator=INITIATOR, timeout=5)
    s.login(session_type='Discovery')
    rsp = s.text([('SendTargets', 'All')])
    data = rsp.data
    while not rsp.flags & 0x80:
        rsp = s.text([], ttt=rsp.ttt, itt=rsp.itt)
        data += rsp.data
    s.close()
    return [v for k, v in X.decode_keys(data) if k == 'TargetName']


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


def main():
    orig = json.load(open(CFG))
    first = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN, timeout=10)
    first.login()
    first.read_capacity10()

    # 1. add a target
    cfg = json.loads(json.dumps(orig))
    cfg['targets'].append({'name': IQN2, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '32M'}]})
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

    # 3. remove the added target
    write_config(orig)
    hup()
    if not added:
        report('SKIP', 'remove-target', 'nothing to remove: adding the target failed')
    elif wait_for(lambda: IQN2 not in listed()):
        try:
            s3 = X.Session(HOST, PORT, initiator=INITIATOR, target=IQN2, timeout=10)
            s3.login()
            report('FAIL', 'remove-target', 'login to the removed target succeeded')
        except X.LoginFailed as e:
            if e.status in (0x0203, 0x0204):
                report('PASS', 'remove-target', 'login refused 0x%04x' % e.status)
            else:
                report('FAIL', 'remove-target', 'login refused 0x%04x, expected 0x0203/0x0204'
                       % e.status)
    else:
        report('FAIL', 'remove-target', 'still listed 10 s after SIGHUP')
    err = session_ok(first, 'after-remove')
    report('FAIL' if err else 'PASS', 'unchanged-session-survives-remove', err or '')
    first.close()
    return 1 if failed else 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001
        report('FAIL', 'setup', traceback.format_exc().strip().splitlines()[-1])
        sys.exit(1)
