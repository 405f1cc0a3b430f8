#!/usr/bin/env python3
"""Online resize of an RBD LUN served by two gateways (docs/configuration.md, RBD LUNs;
docs/management.md, iscsi_resize_lun; issue 29, item 2), on a real single-node Ceph cluster.

Two ix-target daemons (A and B) export the same 64 MiB image as LUN 0, each with a management
socket; a raw session (tests/lib/ixiscsi.py) is logged in through each and has used the LU.
  1. Ceph's own tool grows the image (`rbd resize --size 128M`): both gateways notice it (librbd's
     update watch), libiscsi's iscsi-readcapacity16 through each reads 128 MiB, and the
     existing session of each gets CAPACITY DATA HAS CHANGED (6/2A/09) on its next command;
  2. gateway A's API grows it (iscsi_resize_lun "192M"): `rbd info` says 192 MiB, both
     gateways read 192 MiB with iscsi-readcapacity16 and both sessions get 2A/09; a block
     written past the old end through B reads back the same through A;
  3. the same size written 201326592 is no change; a smaller size is refused (LUNs only grow
     online, naming "force") and the image keeps its 192 MiB; with "force" and "dry_run" too;
  4. "force": true shrinks it through B to 128 MiB: `rbd info` says so, both gateways read
     128 MiB and both sessions get 2A/09; a READ past the new end gets LOGICAL BLOCK ADDRESS
     OUT OF RANGE (5/21/00) through A;
  5. ix-ctl's RBD form: `ix-ctl lun create IQN 1 --rbd rbd/second --ceph-conf CONF --thin`
     through A serves the existing 48 MiB image (iscsi-readcapacity16), the same command again
     is no change, `ix-ctl lun resize IQN 1 96M` grows the image (`rbd info`), and an image
     that does not exist (`--rbd rbd/missing`) is created offline with the reason in
     `ix-ctl lun status` (the API does not create images: `rbd create` does);
  6. the gateways' logs have no sanitizer report.
"""

import json
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixceph  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, OUT, run  # noqa: E402

HOST = '127.0.0.1'
IQN = 'iqn.2024-01.org.ix.test:rbd-resize'
INI = 'iqn.2024-01.org.ix.test:rbd-resize-client'
MIB = 1 << 20
IMAGE = 'grow'
# librbd tells the watchers of an image right after its header changed; the bound is the
# OSD timeout the LUNs are configured with (a notification that needs longer is a failure)
OSD_TIMEOUT_S = 10

report = ixtest.Reporter('rbd_resize')


def readcap16(port, lun=0):
    """The capacity in bytes libiscsi's iscsi-readcapacity16 reads, or its error text."""
    return ixtest.readcap16(INI + '-rc', 'iscsi://%s:%d/%s/%d' % (HOST, port, IQN, lun))


def wait_capacity(ports, want):
    """Each gateway's capacity once all read want, or at the deadline."""
    end = time.monotonic() + OSD_TIMEOUT_S
    while True:
        caps = [readcap16(p) for p in ports]
        if all(c == want for c in caps) or time.monotonic() > end:
            return caps
        time.sleep(0.2)


def ua_of(s):
    """The sense of the session's next TEST UNIT READY: (key, asc, ascq), or 'GOOD'."""
    st, _, sense, _ = s.scsi(bytes(6))
    return X.sense3(sense) if st == 2 else ('GOOD' if st == 0 else 'status 0x%02x' % st)


def session(port):
    s = X.Session(HOST, port, initiator=INI, target=IQN, timeout=20)
    s.login()
    s.lun = 0
    for _ in range(4):  # the power-on unit attention first
        if ua_of(s) == 'GOOD':
            break
    return s


def image_size(cl):
    return json.loads(cl.rbd('info', '--format', 'json', 'rbd/' + IMAGE))['size']


def ctl(sock, *args):
    r = run([os.path.join(BUILD, 'tools', 'ix-ctl'), '-s', sock] + list(args), 60)
    return r.returncode, (r.stdout + r.stderr).strip()


def step_ctl_rbd(cl, sock, port):
    cl.create_image('second', '48M')
    create = ('lun', 'create', IQN, '1', '--rbd', 'rbd/second', '--ceph-conf', cl.conf,
              '--thin')
    rc, out = ctl(sock, *create)
    cap = readcap16(port, 1)
    rc2, out2 = ctl(sock, '--json', *create)
    again = json.loads(out2) if rc2 == 0 else out2
    rc3, out3 = ctl(sock, 'lun', 'resize', IQN, '1', '96M')
    size = json.loads(cl.rbd('info', '--format', 'json', 'rbd/second'))['size']
    cap2 = readcap16(port, 1)
    report.check('ix-ctl-rbd', rc == 0 and cap == 48 * MIB and
                 again == {'changed': False, 'changes': []} and rc3 == 0 and
                 size == 96 * MIB and cap2 == 96 * MIB,
                 'lun create --rbd rbd/second: exit %d (%s); iscsi-readcapacity16 LUN 1: %s; '
                 'again: %s; lun resize 96M: exit %d; rbd info: %s bytes, LUN 1 reads %s' % (
                     rc, out.replace('\n', ' | ')[:120], cap, again, rc3, size, cap2))
    rc, out = ctl(sock, 'lun', 'create', IQN, '2', '--rbd', 'rbd/missing', '--ceph-conf',
                  cl.conf)
    rc2, st = ctl(sock, 'lun', 'status', IQN)
    line = [x for x in st.splitlines() if x.startswith('lun2 ')]
    report.check('ix-ctl-rbd-missing', rc == 0 and line and 'offline' in line[0] and
                 'not found' in line[0],
                 'lun create --rbd rbd/missing: exit %d; lun status: %s' % (rc, line or st))


def scenario(cl, tmp):
    cl.create_image(IMAGE, '64M')
    daemons, socks, ports, sess = [], [], [], []
    try:
        for name in 'ab':
            sock = os.path.join(tmp, '%s.sock' % name)
            port = ixtest.free_port()
            cfg = ixceph.write_config(
                os.path.join(tmp, '%s.json' % name), IQN, port,
                [ixceph.rbd_lun(0, IMAGE, cl.conf, osd_op_timeout_s=OSD_TIMEOUT_S)],
                host=HOST, glob={'mgmt_socket': sock})
            daemons.append(ixtest.Daemon(cfg, 'rbd_resize.ix-target-%s.log' % name, BUILD,
                                         OUT))
            socks.append(sock)
            ports.append(port)
        sess = [session(p) for p in ports]
        before = [readcap16(p) for p in ports]
        report.check('start', before == [64 * MIB] * 2,
                     'iscsi-readcapacity16 through A and B: %s' % before)

        r = cl.try_tool('rbd', 'resize', '--size', '128M', 'rbd/' + IMAGE)
        caps = wait_capacity(ports, 128 * MIB)
        uas = [ua_of(s) for s in sess]
        report.check('rbd-resize-seen', r.returncode == 0 and caps == [128 * MIB] * 2 and
                     uas == [(6, 0x2a, 0x09)] * 2,
                     'rbd resize --size 128M: exit %d; iscsi-readcapacity16 A, B: %s; the '
                     'sessions\' next TUR: %s (want 6/2A/09 each)' % (r.returncode, caps, uas))

        ans = ixceph.rpc(socks[0], 'iscsi_resize_lun', {'target': IQN, 'lun': 0,
                                                         'size': '192M'})
        size = image_size(cl)
        caps = wait_capacity(ports, 192 * MIB)
        uas = [ua_of(s) for s in sess]
        report.check('api-grow', ans.get('result', {}).get('changed') is True and
                     size == 192 * MIB and caps == [192 * MIB] * 2 and
                     uas == [(6, 0x2a, 0x09)] * 2,
                     'iscsi_resize_lun 192M through A: %s; rbd info: %s bytes; '
                     'iscsi-readcapacity16 A, B: %s; next TUR: %s' % (
                         json.dumps(ans)[:160], size, caps, uas))

        lba = 192 * MIB // 512 - 8
        data = os.urandom(4096)
        s_a, s_b = sess
        st_w, _, sense_w, _ = s_b.scsi(bytes([0x8a, 0x08]) + struct.pack('>QIBB', lba, 8, 0, 0),
                                       write_data=data)
        st_r, got, sense_r, _ = s_a.scsi(bytes([0x88, 0]) + struct.pack('>QIBB', lba, 8, 0, 0),
                                         read_len=4096)
        report.check('past-old-end', st_w == 0 and st_r == 0 and got == data,
                     'WRITE(16) FUA at LBA %d through B: status %d %s; READ(16) through A: '
                     'status %d, %s' % (lba, st_w, X.sense3(sense_w) if st_w else '', st_r,
                                        'the same bytes' if got == data else 'other bytes'))

        same = ixceph.rpc(socks[0], 'iscsi_resize_lun', {'target': IQN, 'lun': 0,
                                                          'size': 192 * MIB})
        smaller = ixceph.rpc(socks[1], 'iscsi_resize_lun', {'target': IQN, 'lun': 0,
                                                             'size': '64M'})
        dry = ixceph.rpc(socks[1], 'iscsi_resize_lun', {'target': IQN, 'lun': 0, 'size': '64M',
                                                        'force': True, 'dry_run': True})
        size = image_size(cl)
        report.check('same-and-smaller',
                     same.get('result') == {'changed': False, 'changes': []} and
                     smaller.get('error', {}).get('code') == -32000 and
                     'only grow' in smaller['error'].get('message', '') and
                     '"force"' in smaller['error'].get('message', '') and
                     dry.get('result', {}).get('dry_run') is True and
                     size == 192 * MIB and readcap16(ports[1]) == 192 * MIB,
                     'resize to 201326592: %s; to 64M through B: %s; with force and dry_run: '
                     '%s; rbd info: %s bytes' % (json.dumps(same), json.dumps(smaller)[:240],
                                                 json.dumps(dry)[:100], size))

        ans = ixceph.rpc(socks[1], 'iscsi_resize_lun', {'target': IQN, 'lun': 0,
                                                         'size': '128M', 'force': True})
        size = image_size(cl)
        caps = wait_capacity(ports, 128 * MIB)
        uas = [ua_of(s) for s in sess]
        st, _, sense, _ = s_a.scsi(bytes([0x88, 0]) + struct.pack('>QIBB', lba, 8, 0, 0),
                                   read_len=4096)
        past = X.sense3(sense) if st == 2 else 'status %d' % st
        report.check('force-shrink', ans.get('result', {}).get('changed') is True and
                     size == 128 * MIB and caps == [128 * MIB] * 2 and
                     uas == [(6, 0x2a, 0x09)] * 2 and past == (5, 0x21, 0x00),
                     'iscsi_resize_lun 128M force through B: %s; rbd info: %s bytes; '
                     'iscsi-readcapacity16 A, B: %s; next TUR: %s; READ at LBA %d through A: '
                     '%s (want 5/21/00)' % (json.dumps(ans)[:120], size, caps, uas, lba, past))

        step_ctl_rbd(cl, socks[0], ports[0])
    finally:
        for s in sess:
            s.close()
        for d, name in zip(daemons, 'ab'):
            d.stop()
            ixtest.check_sanitizer(report, d, name)


def main():
    return ixceph.run_with_cluster(report, 'rbd_resize', scenario,
                                   tools=('iscsi-readcapacity16',))


if __name__ == '__main__':
    report.main(main)
