#!/usr/bin/env python3
"""Persistent reservations that persist through power loss (APTPL, SPC-4 5.12.5), across a
real restart of the daemon, and what the daemon does with a state file it cannot trust.

The daemon runs on a config with global.state_dir in a temp dir and one RAM LUN. Through the
raw client (tests/lib/ixiscsi.py), with fixed ISIDs so the I_T nexuses are the same ones after
the restart:
  1. initiator A registers with APTPL and reserves Write Exclusive, B registers with APTPL;
     the state file appears in state_dir before the commands complete;
  2. SIGTERM, start again: READ RESERVATION and READ KEYS show the same reservation, keys and
     PRgeneration, REPORT CAPABILITIES shows PTPL_A, and the reservation is enforced at once
     (B's WRITE gets RESERVATION CONFLICT, A's works, B can still read);
  3. A re-registers with APTPL 0: the file goes, and after another restart nothing is left;
  4. a damaged state file (one byte changed): the daemon refuses to start and its message
     names the file and the line and says what to do; an unreadable state_dir (a regular
     file): it refuses too, naming the setting.
iscsi-test-cu's Prout*/Prin* families check the SPC-4 behaviour within one run; this checks
the part they cannot: the restart. ix only; exits 77 against other peers.
"""

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, '..', 'lib')
sys.path.insert(0, LIB)
import ixha  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402

HOST = os.environ.get('IX_HOST', '127.0.0.1')
IQN = 'iqn.2024-01.org.ix.test:pr-aptpl'
INIT_A = 'iqn.2024-01.org.ix.test:pr-a'
INIT_B = 'iqn.2024-01.org.ix.test:pr-b'
ISID_A, ISID_B = bytes.fromhex('80000000a001'), bytes.fromhex('80000000b002')
KEY_A, KEY_B = 0x1111222233334444, 0x5555666677778888
report = ixtest.Reporter('pr_aptpl')


def write_config(path, port, state_dir):
    cfg = {'global': {'state_dir': state_dir},
           'portals': [{'name': 'default', 'address': HOST, 'port': port}],
           'targets': [{'name': IQN, 'luns': [{'lun': 0, 'backend': 'ram', 'size': '16M'}]}]}
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=2)


def session(port, initiator, isid):
    s = X.Session(HOST, port, initiator=initiator, target=IQN, lun=0, timeout=10, isid=isid)
    s.login()
    s.scsi_retry_ua(bytes(6))  # TEST UNIT READY: clears the power-on unit attention
    return s


def prout(s, sa, rtype, key, sakey, aptpl):
    cdb, params = ixha.prout_cdb(sa, rtype, key, sakey, aptpl)
    st, _, sense, _ = s.scsi(cdb, write_data=params)
    return st, sense


def prin(s, sa, alloc=1024):
    st, data, sense, _ = s.scsi(ixha.prin_cdb(sa, alloc), read_len=alloc)
    if st != 0:
        raise X.ProtocolError('PERSISTENT RESERVE IN status 0x%02x sense %s' % (st, sense.hex()))
    return data


def read_keys(s):
    return ixha.parse_keys(prin(s, 0))


def read_reservation(s):
    return ixha.parse_reservation(prin(s, 1))


def write1(s):
    st, _, _, _ = s.scsi(bytes([0x2a, 0, 0, 0, 0, 8, 0, 0, 1, 0]), write_data=bytes(512))
    return st


def read1(s):
    st, _, _, _ = s.scsi(bytes([0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0]), read_len=512)
    return st


def check(name, ok, detail):
    report('PASS' if ok else 'FAIL', name, detail)


def run():
    if os.environ.get('IX_PEER', 'ix') != 'ix':
        print('SKIP: APTPL state across a restart is checked on ix-target only (peer %s)' %
              os.environ.get('IX_PEER'), file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix='ixtest.pr_aptpl.')
    try:
        return steps(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def steps(tmp):
    state = os.path.join(tmp, 'state')
    os.mkdir(state)
    cfg = os.path.join(tmp, 'ix-target.json')
    port = ixtest.free_port()
    write_config(cfg, port, state)
    pr_file = os.path.join(state, IQN + '.lun0.pr')

    # 1. reserve with APTPL
    d = ixtest.Daemon(cfg, 'pr_aptpl.ix-target-1.log')
    a = session(port, INIT_A, ISID_A)
    b = session(port, INIT_B, ISID_B)
    results = [prout(a, 6, 0, 0, KEY_A, True), prout(a, 1, 1, KEY_A, 0, False),
               prout(b, 6, 0, 0, KEY_B, True)]
    check('register-reserve', all(st == 0 for st, _ in results),
          'statuses %s' % [hex(st) for st, _ in results])
    check('state-file-written', os.path.exists(pr_file), pr_file)
    gen_before = read_keys(a)[0]
    a.close()
    b.close()
    st = d.stop()
    check('daemon-1-stops', st == 0, 'exit status %s after SIGTERM' % st)

    # 2. restart: the same state, enforced at once
    d = ixtest.Daemon(cfg, 'pr_aptpl.ix-target-2.log')
    check('restore-logged', 'restored 2 persistent reservation registration' in d.output(),
          'daemon log says so' if 'restored 2' in d.output() else d.output()[-300:])
    b = session(port, INIT_B, ISID_B)
    gen, keys = read_keys(b)
    check('keys-restored', keys == sorted([KEY_A, KEY_B]) and gen == gen_before,
          'PRgeneration %d (before %d), keys %s' % (gen, gen_before, [hex(k) for k in keys]))
    gen, key, rtype = read_reservation(b)
    check('reservation-restored', key == KEY_A and rtype == 1,
          'holder key %s, type %s' % (hex(key) if key else key, rtype))
    caps = prin(b, 2, 8)
    check('ptpl-active', caps[2] & 0x01 and caps[3] & 0x01,
          'REPORT CAPABILITIES bytes 2-3: %02x %02x (PTPL_C, PTPL_A)' % (caps[2], caps[3]))
    st_b_write, st_b_read = write1(b), read1(b)
    check('enforced-for-b', st_b_write == 0x18 and st_b_read == 0,
          'B: WRITE status 0x%02x (want 0x18), READ 0x%02x (want 0)' % (st_b_write, st_b_read))
    a = session(port, INIT_A, ISID_A)
    st_a = write1(a)
    check('holder-writes', st_a == 0, 'A: WRITE status 0x%02x' % st_a)

    # 3. APTPL off: the file goes, and so does the state with the next restart
    st, sense = prout(a, 0, 0, KEY_A, KEY_A, False)
    check('aptpl-off', st == 0 and not os.path.exists(pr_file),
          'status 0x%02x, file %s' % (st, 'still there' if os.path.exists(pr_file) else 'gone'))
    a.close()
    b.close()
    st = d.stop()
    check('daemon-2-stops', st == 0, 'exit status %s after SIGTERM' % st)
    d = ixtest.Daemon(cfg, 'pr_aptpl.ix-target-3.log')
    a = session(port, INIT_A, ISID_A)
    gen, keys = read_keys(a)
    check('nothing-after-aptpl-off', keys == [] and read_reservation(a)[1] is None,
          'keys %s' % [hex(k) for k in keys])
    # leave a file behind for step 4
    prout(a, 6, 0, 0, KEY_A, True)
    a.close()
    st = d.stop()
    check('daemon-3-stops', st == 0, 'exit status %s after SIGTERM' % st)

    # 4. a damaged file, then a state_dir that is not a directory: refused, clearly
    with open(pr_file, 'rb') as f:
        body = bytearray(f.read())
    body[body.index(b'generation ') + 11] ^= 0x01  # a digit changes: the checksum no longer fits
    with open(pr_file, 'wb') as f:
        f.write(body)
    try:
        d = ixtest.Daemon(cfg, 'pr_aptpl.ix-target-damaged.log')
        d.stop()
        check('damaged-file-refused', False, 'the daemon started on a damaged state file')
    except ixtest.DaemonExited as e:
        ok = pr_file in e.output and 'checksum mismatch' in e.output and \
            'move the file away' in e.output
        check('damaged-file-refused', ok and e.status != 0,
              'exit %d: %s' % (e.status, e.output.strip().splitlines()[-1][:300]))
    os.unlink(pr_file)
    not_dir = os.path.join(tmp, 'not-a-dir')
    open(not_dir, 'w').close()
    write_config(cfg, port, not_dir)
    try:
        d = ixtest.Daemon(cfg, 'pr_aptpl.ix-target-baddir.log')
        d.stop()
        check('bad-state-dir-refused', False, 'the daemon started with state_dir on a file')
    except ixtest.DaemonExited as e:
        check('bad-state-dir-refused', 'state_dir %s' % not_dir in e.output and e.status != 0,
              'exit %d: %s' % (e.status, e.output.strip().splitlines()[-1][:300]))
    return 1 if report.failed else 0


report.main(run)
