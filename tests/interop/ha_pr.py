#!/usr/bin/env python3
"""Persistent reservations shared by two gateways through RADOS ("pr_store": "rados"), on a
real single-node Ceph cluster (tests/ceph/cluster.sh, memstore, in /dev/shm; one cluster for
every step).

Two ix-target daemons, A and B, export the same RBD image as the same LU (same target name,
naa_id and serial) on two ports with TPGT 1 and 2, so their target ports differ; each lists
the other's port in its ALUA groups (both active/optimized), and both set the LUN's
rbd.pr.notify_timeout_s to NOTIFY_S (2 s, not the default 5 s).
  1. iscsi-test-cu given one URL per gateway, on a used image (LBAs 0-511 written with a
     pattern through A first; then LBA 256 zeroed, see used_image()): MultipathIO, the
     persistent reservation families
     (PrinReadKeys, PrinServiceactionRange, PrinReportCapabilities, ProutRegister,
     ProutReserve, ProutClear, ProutPreempt) and Reserve6 (SPC-2 reservations, through the
     shared store), each test one result line; 0 failures;
  2. conflict: initiator 1 registers and reserves Write Exclusive through A, initiator 2
     registers through B; B's WRITE gets RESERVATION CONFLICT, its READ works, READ
     RESERVATION through B names 1's key, A's WRITE works;
  3. preempt: 2 preempts 1's key through B; 1's next command through A gets the unit attention
     REGISTRATIONS PREEMPTED (2A/05), B's WRITE now works, A's gets RESERVATION CONFLICT;
  3b. concurrent changes: one initiator through each gateway, each 25 REGISTER AND IGNORE
     EXISTING KEY at once (every one bumps PRgeneration); afterwards READ KEYS through either
     gateway shows PRgeneration up by exactly 50 and both last keys (a lost update in the
     versioned read-modify-write would show fewer);
  3c. target ports: READ FULL STATUS through either gateway reports 1's registration on
     relative target port 1 and 2's on port 2, each with its TransportID; REGISTER AND MOVE
     through A to a port nobody configured (7) gets ILLEGAL REQUEST 26/00; to 2's nexus on
     port 2 (the other gateway's) works: READ RESERVATION through B names the new key, 2
     writes through B and 1's WRITE through A conflicts;
  3d. PREEMPT AND ABORT: 1 holds Write Exclusive through A and has two tasks queued there, a
     WRITE waiting for its data (the R2T answered by nothing) and a READ behind a CmdSN hole;
     2 preempts 1's key with PREEMPT AND ABORT through B (the notify), then the same again
     with 1's tasks on A and 2's session on A too (this gateway's own abort): GOOD, and both
     queued tasks end with TASK ABORTED (0x40) at once; the WRITE's data sent afterwards
     does not reach the image (read back through B); the hole filled, 1's next command gets
     2A/05 and the session goes on. (Tasks already in librbd cannot be held there on purpose
     with RBD: that a PREEMPT AND ABORT waits for those is the unit tests' part.)
  3e. SPC-2 RESERVE(6)/RELEASE(6), one reservation for both gateways: 1 reserves through A,
     2's RESERVE through B conflicts (before the shared store it was GOOD: two holders), so
     do its READ and WRITE, 1's WRITE through A works; RELEASE by 2 changes nothing, by 1
     frees the LU for 2 through B at once; 1's RESERVE through A then conflicts (B answers
     for its holder); 2's session on B ends: the reservation goes, 1 reserves through A;
     2's LUN RESET through B releases 1's reservation; 10 times, 1 reserves through A and
     logs out, and 2's RESERVE through B sent right after the Logout Response is GOOD (the
     release is stored before the response); a third gateway C on the image: 2
     reserves through it, C is killed (kill -9), 1's RESERVE through A gets GOOD after the
     notify timeout, C's address blocklisted (its nexus is gone with it);
  4. damaged object (`rados put` of garbage): PERSISTENT RESERVE OUT through A gets HARDWARE
     ERROR / INTERNAL TARGET FAILURE and A's log names the object; the gateways keep serving
     the last known state; a third gateway started on it refuses to start, naming the object;
     after `rados rm` a REGISTER works again (empty state);
  5. fencing: B stopped (SIGSTOP); a REGISTER through A completes only after the configured
     notify timeout (2 s: well under the 5 s default) with B blocklisted, and A's log
     names the configured timeout (`ceph osd blocklist ls` has B's address); B continued (SIGCONT):
     its WRITE fails (sense key HARDWARE ERROR) and its log says it was blocklisted.

Skips (77) when the Ceph packages, iscsi-test-cu or the build are missing.
Environment: IX_BUILD, IX_OUT, IX_RESULTS as for every test.
"""

import os
import re
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
import ixceph  # noqa: E402
import ixha  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, OUT, run  # noqa: E402
from ixceph import sense3 as key_asc  # noqa: E402

HOST = os.environ.get('IX_HOST', '127.0.0.1')
IQN = 'iqn.2024-01.org.ix.test:ha-pr'
INI1 = 'iqn.2024-01.org.ix.test:ha-pr-1'
INI2 = 'iqn.2024-01.org.ix.test:ha-pr-2'
ISID1 = bytes.fromhex('80000000c001')
ISID2 = bytes.fromhex('80000000c002')
KEY1 = 0x1111000011110000
KEY2 = 0x2222000022220000
IMAGE = 'hapr'
OBJ = 'ix.pr.' + IMAGE
CU_FAMILIES = ['MultipathIO', 'PrinReadKeys', 'PrinServiceactionRange',
               'PrinReportCapabilities', 'ProutRegister', 'ProutReserve', 'ProutClear',
               'ProutPreempt', 'Reserve6']
NOTIFY_S = 2  # the LUN's rbd.pr.notify_timeout_s (the default is 5)
DEAD_BOUND_S = NOTIFY_S + 8  # a dead holder's reservation goes: the notify timeout, the
# blocklist, the lock's break on a loaded machine
LOGOUT_ROUNDS = 10  # spc2-logout: Logouts of a holder, each followed at once by a RESERVE
# through the other gateway
LOG_WAIT_S = 10  # a log line the gateway writes once it has answered, on a loaded machine

report = ixtest.Reporter('ha_pr')


def log(msg):
    print('[ha_pr %s] %s' % (time.strftime('%H:%M:%S'), msg), file=sys.stderr, flush=True)


def write_config(path, port, tpgt, conf):
    lun = ixceph.rbd_lun(0, IMAGE, conf, pr={'notify_timeout_s': NOTIFY_S})
    lun.update({'pr_store': 'rados', 'naa_id': '0x6001405a0b1c2d3e', 'serial': 'ixhapr0'})
    # each gateway's port is its group, the other gateway's listed by relative port (what
    # REGISTER AND MOVE to the other gateway's port needs); no RBD lock: both stay active
    other = 3 - tpgt if tpgt in (1, 2) else 1
    alua = {'groups': [
        {'id': tpgt, 'state': 'active/optimized', 'portals': ['default']},
        {'id': 10 + other, 'state': 'active/optimized', 'relative_ports': [other]}]}
    ixceph.write_config(path, IQN, port, [lun], host=HOST, tpgt=tpgt, alua=alua)


def session(port, ini, isid):
    s = X.Session(HOST, port, initiator=ini, target=IQN, lun=0, timeout=20, isid=isid)
    s.login()
    s.scsi_retry_ua(bytes(6))
    return s


def prout(s, sa, rtype, key, sakey):
    cdb, params = ixha.prout_cdb(sa, rtype, key, sakey)
    st, _, sense, _ = s.scsi(cdb, write_data=params)
    return st, sense or b''


def read_reservation(s):
    st, d, sense, _ = s.scsi(ixha.prin_cdb(1, 64), read_len=64)
    if st != 0:
        raise X.ProtocolError('READ RESERVATION status 0x%02x' % st)
    return struct.unpack('>II', d[:8]) + ((struct.unpack('>Q', d[8:16])[0], d[21] & 0xf)
                                          if len(d) >= 24 else (0, 0))


def write1(s):
    st, _, sense, _ = s.scsi(bytes([0x2a, 0, 0, 0, 0, 8, 0, 0, 1, 0]), write_data=b'\x5a' * 512)
    return st, sense or b''


def read1(s):
    st, _, sense, _ = s.scsi(bytes([0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0]), read_len=512)
    return st, sense or b''


def check(name, ok, detail):
    report('PASS' if ok else 'FAIL', name, detail)
    return ok


# ---- steps -------------------------------------------------------------------------------

def used_image(port):
    """Make LBAs 0-511 hold what a used image holds (a pattern), then zero LBA 256 only.

    libiscsi 1.19's MultipathIO.CompareAndWrite (test_multipathio_compareandwrite.c, Debian 12's
    libiscsi-bin 1.19.0) zeroes LBAs 0-255 with one WRITE SAME(10) of 256 blocks and then runs
    COMPARE AND WRITE on LBAs 0-256 (its loop is `for (i = 0; i <= n; i++)` with n = 256),
    expecting zeros at LBA 256 too, which it never wrote: on any image whose LBA 256 is not zero
    (its own earlier run leaves 0x02 there) the first COMPARE AND WRITE at 256 gets MISCOMPARE,
    as it must. Newer libiscsi loops to n = 255. The block the test depends on is zeroed here;
    everything else stays used. Returns what LBAs 255-257 hold afterwards."""
    s = session(port, INI1, ISID1)
    try:
        st, _, sense, _ = s.scsi(bytes([0x2a, 0, 0, 0, 0, 0, 0, 2, 0, 0]),
                                 write_data=b'\xa5' * (512 * 512))
        if st != 0:
            raise X.ProtocolError('WRITE(10) of LBAs 0-511: status 0x%02x' % st)
        st, _, sense, _ = s.scsi(bytes([0x2a, 0, 0, 0, 1, 0, 0, 0, 1, 0]), write_data=bytes(512))
        if st != 0:
            raise X.ProtocolError('WRITE(10) of LBA 256: status 0x%02x' % st)
        st, data, _, _ = s.scsi(bytes([0x28, 0, 0, 0, 0, 0xff, 0, 0, 3, 0]), read_len=1536)
        return [set(data[i * 512:(i + 1) * 512]) for i in range(3)] if st == 0 else None
    finally:
        s.close()


def step_cu(ports, tmp):
    urls = ['iscsi://%s:%d/%s/0' % (HOST, p, IQN) for p in ports]
    got = used_image(ports[0])
    check('cu-used-image', got == [{0xa5}, {0}, {0xa5}],
          'LBAs 0-511 written with 0xa5 through A, then LBA 256 zeroed (libiscsi 1.19\'s '
          'MultipathIO.CompareAndWrite compares it without writing it first): LBAs 255-257 '
          'hold %s' % (got and [sorted(b) for b in got]))
    for fam in CU_FAMILIES:
        logf = os.path.join(OUT, 'ha_pr.cu.%s.log' % fam)
        lst = run(['iscsi-test-cu', '-l'], 30).stdout
        tests = [ln.strip().split('.')[-1] for ln in lst.splitlines()
                 if re.match(r'^\s*ALL\.%s\.\S+$' % fam, ln.strip())]
        with open(logf, 'w') as f:
            try:
                rc = subprocess.run(['iscsi-test-cu', '-d', '-t', 'ALL.' + fam] + urls,
                                    stdout=f, stderr=subprocess.STDOUT, timeout=300).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        for t, st, why in ixtest.cunit_run(logf, rc, tests):
            report(st, 'cu.%s.%s' % (fam, t), why or 'two gateways')


def step_conflict(pa, pb):
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    try:
        r = [prout(s1, 0, 0, 0, KEY1)[0], prout(s2, 0, 0, 0, KEY2)[0],
             prout(s1, 1, 1, KEY1, 0)[0]]
        if not check('conflict-setup', r == [0, 0, 0], 'REGISTER A, REGISTER B, RESERVE WE A: '
                     'statuses %s' % r):
            return
        gen, alen, key, rtype = read_reservation(s2)
        check('conflict-read-reservation-b', key == KEY1 and rtype == 1,
              'through B: key 0x%x type %d (want 0x%x, 1)' % (key, rtype, KEY1))
        st, _ = write1(s2)
        check('conflict-write-b', st == 0x18, 'WRITE from initiator 2 through B: status 0x%02x '
              '(want 0x18 RESERVATION CONFLICT)' % st)
        st, _ = read1(s2)
        check('conflict-read-b', st == 0, 'READ from initiator 2 through B: status 0x%02x' % st)
        st, _ = write1(s1)
        check('conflict-write-a', st == 0, 'WRITE from the holder through A: status 0x%02x' % st)
    finally:
        s1.close()
        s2.close()


def step_preempt(pa, pb):
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    try:
        st, sense = prout(s2, 4, 1, KEY2, KEY1)  # PREEMPT, Write Exclusive, 1's key
        if not check('preempt', st == 0, 'PREEMPT through B: status 0x%02x %s' % (st, sense.hex())):
            return
        st, _, sense, _ = s1.scsi(bytes(6))
        ka = key_asc(sense or b'')
        check('preempt-ua-a', st == 2 and ka == (6, 0x2a, 0x05),
              'TEST UNIT READY of the preempted nexus through A: status 0x%02x sense %s '
              '(want UNIT ATTENTION 2A/05)' % (st, ka))
        st, _ = write1(s2)
        check('preempt-write-b', st == 0, 'WRITE of the new holder through B: 0x%02x' % st)
        st, _ = write1(s1)
        check('preempt-write-a', st == 0x18, 'WRITE of the preempted initiator through A: '
              '0x%02x (want 0x18)' % st)
        prout(s2, 3, 0, KEY2, 0)  # CLEAR: a clean slate for what follows
    finally:
        s1.close()
        s2.close()


def read_keys(s):
    st, d, sense, _ = s.scsi(ixha.prin_cdb(0), read_len=1024)
    if st != 0:
        raise X.ProtocolError('READ KEYS status 0x%02x' % st)
    return ixha.parse_keys(d)


def step_race(pa, pb, da, db):
    import threading
    n = 25
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    errs = []
    try:
        gen0, _ = read_keys(s1)

        def worker(s, base):
            for i in range(1, n + 1):
                st, sense = prout(s, 6, 0, 0, base + i)  # REGISTER AND IGNORE EXISTING KEY
                if st != 0:
                    errs.append('0x%02x %s' % (st, sense.hex()))
        t0 = time.monotonic()
        ts = [threading.Thread(target=worker, args=(s, b)) for s, b in ((s1, KEY1), (s2, KEY2))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        dt = time.monotonic() - t0
        retries = sum(d.output().count('another gateway wrote first') for d in (da, db))
        ga, ka = read_keys(s1)
        gb, kb = read_keys(s2)
        check('race', not errs and ga == gb == gen0 + 2 * n and ka == kb ==
              sorted([KEY1 + n, KEY2 + n]),
              '%d REGISTER AND IGNORE through each gateway at once in %.1f s (%d versioned '
              'writes lost and retried): %d errors%s; '
              'PRgeneration %d -> A %d, B %d (want +%d); keys A %s B %s' % (
                  n, dt, retries, len(errs), (' (%s)' % errs[0]) if errs else '', gen0, ga, gb, 2 * n,
                  [hex(k) for k in ka], [hex(k) for k in kb]))
        prout(s1, 0, 0, KEY1 + n, 0)
        prout(s2, 0, 0, KEY2 + n, 0)
    finally:
        s1.close()
        s2.close()


def tid_name(d):
    """The name of an iSCSI TransportID (format 01b): '<InitiatorName>,i,0x<ISID>'."""
    n = struct.unpack('>H', d[2:4])[0]
    return d[4:4 + n].split(b'\0', 1)[0].decode()


def read_full_status(s):
    """[(key, holder, type, relative target port, initiator port)] of READ FULL STATUS."""
    st, d, sense, _ = s.scsi(bytes([0x5e, 3, 0, 0, 0, 0, 0, 0x10, 0, 0]), read_len=4096)
    if st != 0:
        raise X.ProtocolError('READ FULL STATUS status 0x%02x' % st)
    n = struct.unpack('>I', d[4:8])[0]
    out, off = [], 8
    while off + 24 <= 8 + n:
        key = struct.unpack('>Q', d[off:off + 8])[0]
        tl = struct.unpack('>I', d[off + 20:off + 24])[0]
        out.append((key, bool(d[off + 12] & 1), d[off + 13] & 0xf,
                    struct.unpack('>H', d[off + 18:off + 20])[0],
                    tid_name(d[off + 24:off + 24 + tl])))
        off += 24 + tl
    return out


def iport(ini, isid):
    return '%s,i,0x%s' % (ini, isid.hex())


def register_move(s, key, sakey, rtpi, ini, isid):
    name = iport(ini, isid).encode() + b'\0'
    name += bytes(-len(name) % 4)
    tid = bytes([0x45, 0]) + struct.pack('>H', len(name)) + name
    params = struct.pack('>QQxBHI', key, sakey, 0, rtpi, len(tid)) + tid
    st, _, sense, _ = s.scsi(bytes([0x5f, 7, 0, 0, 0, 0, 0, 0, len(params), 0]),
                             write_data=params)
    return st, sense or b''


def step_ports(pa, pb):
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    p1, p2 = iport(INI1, ISID1), iport(INI2, ISID2)
    try:
        r = [prout(s1, 0, 0, 0, KEY1)[0], prout(s2, 0, 0, 0, KEY2)[0]]
        if not check('ports-setup', r == [0, 0], 'REGISTER through A and B: %s' % r):
            return
        want = sorted([(KEY1, False, 0, 1, p1), (KEY2, False, 0, 2, p2)])
        for s, gw in ((s1, 'a'), (s2, 'b')):
            got = sorted(read_full_status(s))
            check('ports-full-status-' + gw, got == want,
                  'READ FULL STATUS through %s: %s (want 1 on relative port 1, 2 on port 2)' %
                  (gw.upper(), [(hex(k), h, t, p, n.split(':')[-1]) for k, h, t, p, n in got]))
        prout(s1, 1, 1, KEY1, 0)  # 1 reserves Write Exclusive through A
        st, sense = register_move(s1, KEY1, KEY2 + 1, 7, INI2, ISID2)
        check('ports-move-unknown', st == 2 and key_asc(sense) == (5, 0x26, 0),
              'REGISTER AND MOVE to relative target port 7: status 0x%02x sense %s (want '
              'ILLEGAL REQUEST 26/00)' % (st, key_asc(sense)))
        st, sense = register_move(s1, KEY1, KEY2 + 1, 2, INI2, ISID2)
        check('ports-move', st == 0, 'REGISTER AND MOVE through A to 2 on port 2 (gateway B): '
              'status 0x%02x %s' % (st, sense.hex()))
        gen, alen, key, rtype = read_reservation(s2)
        full = sorted(read_full_status(s2))
        w2, w1 = write1(s2)[0], write1(s1)[0]
        check('ports-move-effect', key == KEY2 + 1 and rtype == 1 and
              (KEY2 + 1, True, 1, 2, p2) in full and w2 == 0 and w1 == 0x18,
              'through B: reservation key 0x%x type %d, holder on port 2: %s; WRITE of 2 '
              'through B 0x%02x, of 1 through A 0x%02x (want 0, 0x18)' % (
                  key, rtype, (KEY2 + 1, True, 1, 2, p2) in full, w2, w1))
        prout(s2, 3, 0, KEY2 + 1, 0)  # CLEAR
    finally:
        s1.close()
        s2.close()


def send_cmd(s, cdb, read_len=0, write_len=0, cmdsn=None):
    """Send a SCSI Command without data and without waiting; its ITT."""
    b = s.scsi_bhs(cdb, read_len or write_len, read=bool(read_len), write=bool(write_len),
                   cmdsn=cmdsn)
    s.conn.send_pdu(b, b'')
    return struct.unpack_from('>I', b.b, 16)[0]


def next_pdu(s, timeout):
    """The next PDU that is not a NOP-In ping or an Async Message (answered/skipped)."""
    while True:
        pdu = s.recv(timeout)
        if pdu.opcode == X.OP_NOP_IN and pdu.itt == X.ALL_ONES:
            s.answer_target_nop(pdu)
            continue
        if pdu.opcode != X.OP_ASYNC:
            return pdu


def queue_tasks(s, lba):
    """A WRITE waiting for its data (the R2T it gets is left unanswered) and a READ behind a
    CmdSN hole: (write ITT, R2T, read ITT, the hole's CmdSN)."""
    n = s.cmdsn
    witt = send_cmd(s, bytes([0x2a, 0]) + struct.pack('>IBHB', lba, 0, 8, 0), write_len=4096,
                    cmdsn=n)
    r2t = next_pdu(s, 10)
    if r2t.opcode != X.OP_R2T or r2t.itt != witt:
        raise X.ProtocolError('expected the R2T of the WRITE, got ' + r2t.describe())
    ritt = send_cmd(s, bytes([0x28, 0]) + struct.pack('>IBHB', lba, 0, 8, 0), read_len=4096,
                    cmdsn=n + 2)
    s.cmdsn = n + 3
    return witt, r2t, ritt, n + 1


def responses(s, itts, secs):
    """{itt: status} of the SCSI Responses for these ITTs that arrive within secs."""
    got, end = {}, time.monotonic() + secs
    while len(got) < len(itts) and time.monotonic() < end:
        try:
            pdu = next_pdu(s, max(0.1, end - time.monotonic()))
        except X.Timeout:
            break
        if pdu.opcode == X.OP_SCSI_RSP and pdu.itt in itts:
            got[pdu.itt] = pdu.u8(3)
        elif pdu.opcode == X.OP_DATA_IN and pdu.itt in itts and pdu.flags & 0x01:
            got[pdu.itt] = pdu.u8(3)
    return got


def step_abort(pa, pb):
    lba = 64
    old = os.urandom(4096)
    for where in ('remote', 'local'):
        s1 = session(pa, INI1, ISID1)
        s2 = session(pb if where == 'remote' else pa, INI2, ISID2)
        try:
            st, _, _, _ = s1.scsi(bytes([0x2a, 0]) + struct.pack('>IBHB', lba, 0, 8, 0),
                                  write_data=old)
            r = [st, prout(s1, 0, 0, 0, KEY1)[0], prout(s2, 0, 0, 0, KEY2)[0],
                 prout(s1, 1, 1, KEY1, 0)[0]]
            if not check('abort-%s-setup' % where, r == [0, 0, 0, 0],
                         'WRITE, REGISTER, REGISTER, RESERVE: %s' % r):
                continue
            witt, r2t, ritt, hole = queue_tasks(s1, lba)
            t0 = time.monotonic()
            st, sense = prout(s2, 5, 1, KEY2, KEY1)  # PREEMPT AND ABORT, Write Exclusive
            took = time.monotonic() - t0
            check('abort-%s-preempt' % where, st == 0,
                  'PREEMPT AND ABORT through %s: status 0x%02x %s in %.2f s' % (
                      'B' if where == 'remote' else 'A', st, sense.hex(), took))
            got = responses(s1, (witt, ritt), 3)
            check('abort-%s-tasks' % where, got == {witt: 0x40, ritt: 0x40},
                  'the preempted initiator\'s queued tasks on A: WRITE waiting for data %s, '
                  'READ behind a CmdSN hole %s (want TASK ABORTED 0x40 both)' % (
                      '0x%02x' % got[witt] if witt in got else 'no answer',
                      '0x%02x' % got[ritt] if ritt in got else 'no answer'))
            s1.send_r2t_data(r2t, os.urandom(4096))  # the WRITE's data, late
            # the hole: TEST UNIT READY with the CmdSN the READ skipped
            b = s1.scsi_bhs(bytes(6), 0, cmdsn=hole)
            s1.conn.send_pdu(b, b'')
            tur = responses(s1, (struct.unpack_from('>I', b.b, 16)[0],), 5)
            st, data, sense, _ = s1.scsi(bytes([0x28, 0]) + struct.pack('>IBHB', lba, 0, 8, 0),
                                         read_len=4096)
            stb, datab, _, _ = s2.scsi(bytes([0x28, 0]) + struct.pack('>IBHB', lba, 0, 8, 0),
                                       read_len=4096)
            check('abort-%s-after' % where, list(tur.values()) == [2] and st == 0 and
                  data == old and stb == 0 and datab == old,
                  'TEST UNIT READY filling the hole: %s (want 2: the 2A/05 unit attention); '
                  'then READ through A 0x%02x, through %s 0x%02x; the block %s' % (
                      list(tur.values()), st, 'B' if where == 'remote' else 'A', stb,
                      'kept its data: the aborted WRITE\'s late data did not land'
                      if data == old and datab == old else 'CHANGED'))
            prout(s2, 3, 0, KEY2, 0)  # CLEAR
        finally:
            s1.close()
            s2.close()


RESERVE6 = bytes([0x16, 0, 0, 0, 0, 0])
RELEASE6 = bytes([0x17, 0, 0, 0, 0, 0])


def cmd_status(s, cdb, **kw):
    return s.scsi_retry_ua(cdb, **kw)[0]


def lun_reset(s):
    """LOGICAL UNIT RESET (TMF function 5); its response code (0: function complete)."""
    b = X.Bhs(X.OP_TMF_REQ, immediate=True, flags=0x80 | 5)
    b.lun(s.lun).itt(s.next_itt()).u32(20, X.ALL_ONES).u32(24, s.cmdsn).u32(28, s.expstatsn)
    s.conn.send_pdu(b)
    while True:
        pdu = next_pdu(s, 30)
        if pdu.opcode == X.OP_TMF_RSP:
            return pdu.u8(2)


def log_lines(d, pred, secs=LOG_WAIT_S):
    """The lines of d's log that pred accepts, polled for until one shows or secs pass (the
    gateway logs after it answers: how soon depends on the machine, not on a timeout)."""
    end = time.monotonic() + secs
    while True:
        lines = [ln for ln in d.output().splitlines() if pred(ln)]
        if lines or time.monotonic() > end:
            return lines
        time.sleep(0.1)


def reserve_within(s, secs):
    """RESERVE(6) again until GOOD or secs pass: (status, seconds)."""
    t0 = time.monotonic()
    while True:
        st = cmd_status(s, RESERVE6)
        if st == 0 or time.monotonic() - t0 > secs:
            return st, time.monotonic() - t0
        time.sleep(0.2)


def step_spc2(cl, da, pa, pb, tmp):
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    dc = None
    try:
        r1, r2 = cmd_status(s1, RESERVE6), cmd_status(s2, RESERVE6)
        check('spc2-conflict', r1 == 0 and r2 == 0x18,
              'RESERVE(6) of 1 through A 0x%02x, then of 2 through B 0x%02x (want 0, 0x18: one '
              'reservation for the LU, not one per gateway)' % (r1, r2))
        w2, rd2, w1 = write1(s2)[0], read1(s2)[0], write1(s1)[0]
        check('spc2-io', w2 == 0x18 and rd2 == 0x18 and w1 == 0,
              'held by 1 through A: WRITE of 2 through B 0x%02x, READ 0x%02x (want 0x18 both); '
              'WRITE of 1 through A 0x%02x' % (w2, rd2, w1))
        rel2, w2a = cmd_status(s2, RELEASE6), write1(s2)[0]
        rel1, w2b = cmd_status(s1, RELEASE6), write1(s2)[0]
        res2 = cmd_status(s2, RESERVE6)
        t0 = time.monotonic()
        res1 = cmd_status(s1, RESERVE6)
        took = time.monotonic() - t0
        w1 = write1(s1)[0]
        check('spc2-release', rel2 == 0 and w2a == 0x18 and rel1 == 0 and w2b == 0 and
              res2 == 0 and res1 == 0x18 and w1 == 0x18 and took < NOTIFY_S - 0.5,
              'RELEASE by 2 (not the holder) 0x%02x, 2 still refused 0x%02x; RELEASE by 1 '
              '0x%02x, WRITE of 2 through B 0x%02x; RESERVE of 2 through B 0x%02x; RESERVE of '
              '1 through A 0x%02x in %.2f s (B answers for its holder, well within the notify '
              'timeout of %d s), WRITE of 1 0x%02x'
              % (rel2, w2a, rel1, w2b, res2, res1, took, NOTIFY_S, w1))
        s2.close()  # I_T nexus loss of the holder, on B
        st, took = reserve_within(s1, 10)
        check('spc2-nexus-loss', st == 0,
              '2\'s session through B ends while it holds the reservation: RESERVE of 1 '
              'through A 0x%02x after %.1f s' % (st, took))
        s2 = session(pb, INI2, ISID2)
        r2 = cmd_status(s2, RESERVE6)
        tmf = lun_reset(s2)
        r2b = cmd_status(s2, RESERVE6)
        w1 = cmd_status(s1, bytes([0x2a, 0, 0, 0, 0, 8, 0, 0, 1, 0]), write_data=b'\x5a' * 512)
        check('spc2-lun-reset', r2 == 0x18 and tmf == 0 and r2b == 0 and w1 == 0x18,
              'RESERVE of 2 through B while 1 holds 0x%02x; LUN RESET through B: response %d; '
              'RESERVE of 2 through B then 0x%02x; WRITE of 1 through A 0x%02x' % (
                  r2, tmf, r2b, w1))
        cmd_status(s2, RELEASE6)
        # a Logout ends the holder's nexus: released in the shared object before the Logout
        # Response, so a RESERVE through the other gateway right after it is GOOD (libiscsi's
        # Reserve6.Logout reserves through B just after 1 logs out of A)
        got = []
        for _ in range(LOGOUT_ROUNDS):
            r1 = cmd_status(s1, RESERVE6)
            lo = s1.logout()
            s1.close()
            got.append((r1, lo, cmd_status(s2, RESERVE6), cmd_status(s2, RELEASE6)))
            s1 = session(pa, INI1, ISID1)
        bad = [g for g in got if g != (0, 0, 0, 0)]
        check('spc2-logout', not bad,
              '%d rounds of: RESERVE of 1 through A, Logout (response 0), RESERVE and RELEASE '
              'of 2 through B at once (want 0 each): %s' % (
                  len(got), 'all 0' if not bad else '%d rounds failed, e.g. %s' % (
                      len(bad), ['0x%02x' % v for v in bad[0]])))
        # a holder behind a gateway that dies
        pc = ixtest.free_port()
        cfg = os.path.join(tmp, 'c2.json')
        write_config(cfg, pc, 3, cl.conf)
        dc = ixtest.Daemon(cfg, 'ha_pr.ix-target-c2.log', BUILD, OUT)
        s3 = session(pc, INI2, ISID2)
        r3 = cmd_status(s3, RESERVE6)
        dc.kill9()
        s3.close()
        st, took = reserve_within(s1, DEAD_BOUND_S + 10)
        text = da.output()
        released = [ln for ln in text.splitlines()
                    if 'which did not answer and is now fenced: released' in ln]
        fenced = re.findall(r'client\.\d+ at (\S+) did not acknowledge', text)
        addr = fenced[-1] if fenced else None
        bl = cl.blocklist()
        check('spc2-dead-holder', r3 == 0 and st == 0 and
              NOTIFY_S - 0.5 <= took < DEAD_BOUND_S and released and addr and addr in bl,
              'RESERVE of 2 through C 0x%02x; C killed; RESERVE of 1 through A 0x%02x after '
              '%.1f s (notify timeout %d s); C\'s address %s %s; A\'s log: %s' % (
                  r3, st, took, NOTIFY_S, addr, 'blocklisted' if addr and addr in bl else
                  'NOT blocklisted', released[-1].split(': ', 1)[-1][-120:] if released
                  else 'no line'))
        cmd_status(s1, RELEASE6)
        if addr:
            run(['ceph', 'osd', 'blocklist', 'rm', addr], 30, env=cl.env)
    finally:
        s1.close()
        s2.close()
        if dc and dc.p.poll() is None:
            dc.stop()


def step_damaged(cl, da, pa, pb, tmp):
    cl.rados('-p', 'rbd', 'put', OBJ, '-', data=b'this is not a reservation\n')
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    try:
        st, sense = prout(s1, 0, 0, 0, KEY1)
        ka = key_asc(sense)
        check('damaged-out', st == 2 and ka == (4, 0x44, 0),
              'REGISTER through A on a garbage object: status 0x%02x sense %s (want HARDWARE '
              'ERROR 44/00)' % (st, ka))
        line = log_lines(da, lambda ln: OBJ in ln and 'rados rm' in ln)
        check('damaged-log', bool(line), 'A\'s log names the object and what to do: %s'
              % (line[-1][-160:] if line else 'no such line'))
        st, _ = write1(s2)
        check('damaged-serves', st == 0, 'WRITE through B meanwhile: 0x%02x' % st)
        cfg = os.path.join(tmp, 'c.json')
        write_config(cfg, ixtest.free_port(), 3, cl.conf)
        try:
            dc = ixtest.Daemon(cfg, 'ha_pr.ix-target-c.log', BUILD, OUT)
            dc.stop()
            check('damaged-start', False, 'a third gateway started on the damaged object')
        except ixtest.DaemonExited as e:
            check('damaged-start', OBJ in e.output and 'rados rm' in e.output,
                  'a third gateway refuses to start: %s' % (
                      [ln for ln in e.output.splitlines() if OBJ in ln][:1] or e.output[-200:]))
        cl.rados('-p', 'rbd', 'rm', OBJ)
        st, sense = prout(s1, 0, 0, 0, KEY1)
        check('damaged-repaired', st == 0, 'REGISTER after `rados rm`: status 0x%02x' % st)
        prout(s1, 0, 0, KEY1, 0)
    finally:
        s1.close()
        s2.close()


def step_fence(cl, da, db, pa, pb):
    s1 = session(pa, INI1, ISID1)
    s2 = session(pb, INI2, ISID2)
    addr = None
    seen = len(da.output())  # A's log so far (an earlier step fenced another gateway)
    try:
        os.kill(db.p.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            st, sense = prout(s1, 0, 0, 0, KEY1)
        finally:
            dt = time.monotonic() - t0
            bl = cl.blocklist()
            os.kill(db.p.pid, signal.SIGCONT)
        m = re.search(r'client\.\d+ at (\S+) did not acknowledge a reservation change '
                      r'within (\d+) ms', da.output()[seen:])
        addr = m.group(1) if m else None
        check('fence-register', st == 0 and NOTIFY_S - 0.5 <= dt < NOTIFY_S + 1.5 and m and
              m.group(2) == str(NOTIFY_S * 1000),
              'REGISTER through A while B is stopped: status 0x%02x in %.1f s (the configured '
              'notify timeout: %d s; A\'s log: %s ms)' % (st, dt, NOTIFY_S,
                                                       m.group(2) if m else 'no line'))
        check('fence-blocklisted', addr is not None and addr in bl,
              'B\'s address %s in `ceph osd blocklist ls`' % addr)
        st, sense = write1(s2)
        ka = key_asc(sense)
        check('fence-b-write', st == 2 and ka is not None and ka[0] == 4,
              'WRITE through B once it runs again: status 0x%02x sense %s (want HARDWARE ERROR)'
              % (st, ka))
        check('fence-b-log', log_lines(db, lambda ln: 'blocklisted' in ln or
                                       'transport endpoint shutdown' in ln),
              'B\'s log says it was fenced')
    finally:
        s1.close()
        try:
            s2.close()
        except Exception:  # noqa: BLE001
            pass
        if addr:
            run(['ceph', 'osd', 'blocklist', 'rm', addr], 30, env=cl.env)


def step(name, fn, *args):
    ixceph.step(report, name, fn, *args)


def scenario(cl, tmp):
    da = db = None
    try:
        cl.create_image(IMAGE, '64M')
        pa, pb = ixtest.free_port(), ixtest.free_port()
        write_config(os.path.join(tmp, 'a.json'), pa, 1, cl.conf)
        write_config(os.path.join(tmp, 'b.json'), pb, 2, cl.conf)
        da = ixtest.Daemon(os.path.join(tmp, 'a.json'), 'ha_pr.ix-target-a.log', BUILD, OUT)
        db = ixtest.Daemon(os.path.join(tmp, 'b.json'), 'ha_pr.ix-target-b.log', BUILD, OUT)
        step('cu', step_cu, (pa, pb), tmp)
        step('conflict', step_conflict, pa, pb)
        step('preempt', step_preempt, pa, pb)
        step('race', step_race, pa, pb, da, db)
        step('ports', step_ports, pa, pb)
        step('abort', step_abort, pa, pb)
        step('spc2', step_spc2, cl, da, pa, pb, tmp)
        step('damaged', step_damaged, cl, da, pa, pb, tmp)
        step('fence', step_fence, cl, da, db, pa, pb)
        for d, n in ((da, 'a'), (db, 'b')):
            if d.p.poll() is None:
                d.stop()
            ixceph.check_sanitizer(report, d, n)
        da = db = None
    finally:
        for d in (da, db):
            if d:
                try:
                    os.kill(d.p.pid, signal.SIGCONT)
                except OSError:
                    pass
                d.stop()


def main():
    return ixceph.run_with_cluster(report, 'ha_pr', scenario,
                                   tools=('rados', 'iscsi-test-cu'))


if __name__ == '__main__':
    report.main(main)
