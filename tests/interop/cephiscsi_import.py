#!/usr/bin/env python3
"""Migration from ceph-iscsi (docs/migration.md; issue 29, item 4) on a real single-node Ceph
cluster: a ceph-iscsi gateway.conf (tests/data/ceph-iscsi/two-targets.json: two targets, three
disks, clients with CHAP and mutual CHAP, one masked, discovery CHAP) is written with Ceph's own
`rados put` where ceph-iscsi keeps it (rbd/gateway.conf); `ix-ctl import ceph-iscsi` turns it
into a group document in RADOS (rbd/ix.group); two ix-target gateways started from small local
files naming that group serve it.
  import      ix-ctl exits 0, prints what it did not carry over (the second target's TPG tags,
              the controls), and `rados get ix.group` is a generation-1 document;
  no-clobber  a second import is refused (the object exists) and leaves it as it was; --out
              writes the same document to a file;
  identity    through each gateway, libiscsi's iscsi-inq shows for every disk the VPD 0x80
              serial and the VPD 0x83 NAA designator LIO shows for that disk's wwn, computed
              here from the wwn by LIO's rule (drivers/target/target_core_spc.c,
              spc_gen_naa_6h_vendor_specific; tcmu-runner's scsi.c answers the same for
              user:rbd), and vendor/product "LIO-ORG"/"TCMU device";
  chap        each client logs in with its own CHAP credential; a wrong secret, no
              credential, or an initiator outside the ACL are refused;
  mutual      client1 and client2 each verify the target with their own mutual credential
              (per-ACL mutual CHAP); the other client's credential, or a wrong secret, makes
              libiscsi reject the target;
  masking     win1 sees only disk_2, as its LUN 0 (its size), and no LUN 1; client1 sees both;
  ports       VPD 0x83's relative target port through each gateway (a raw session with the
              client's CHAP): the first target keeps the TPG tags LIO had (ip_list order), the
              second, whose ip_list had the other order, uses the member ids (as noted);
  discovery   SendTargets needs the discovery CHAP credential; with it, client1 is shown only
              the target whose ACL lists it;
  encrypted   passwords ceph-iscsi encrypted with the gateways' RSA key (OAEP, SHA-256 as it
              writes them, SHA-1 as its older versions did; here encrypted by the openssl
              tool) are carried over with --key, and without it the client is left out, noted;
  no sanitizer report in either gateway's log.
Skips (77) only when Ceph, the libiscsi tools or ix-target/ix-ctl are missing.
"""

import base64
import json
import os
import string
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import ixceph  # noqa: E402
import ixiscsi as X  # noqa: E402
import ixtest  # noqa: E402
from ixceph import BUILD, run  # noqa: E402

HOST = '127.0.0.1'
DATA = os.path.join(HERE, '..', 'data', 'ceph-iscsi', 'two-targets.json')
T1 = 'iqn.2003-01.com.redhat.iscsi-gw:ceph-igw'
T2 = 'iqn.2003-01.com.redhat.iscsi-gw:ceph-igw2'
SIZES = {'disk_1': 8, 'disk_2': 12, 'disk_3': 16}   # MiB, all different: masking shows which
MIB = 1 << 20

report = ixtest.Reporter('cephiscsi_import')


def lio_naa(serial):
    """The 16-byte NAA designator LIO shows for a device whose vpd_unit_serial is serial:
    NAA 6, IEEE company id 00 14 05, then the serial's hex digits (others skipped), 25 of them,
    zero-filled."""
    nib = [6, 0, 0, 1, 4, 0, 5] + [int(c, 16) for c in serial if c in string.hexdigits][:25]
    nib += [0] * (32 - len(nib))
    return bytes(nib[i] * 16 + nib[i + 1] for i in range(0, 32, 2))


def url(port, iqn, lun, cred=None, mutual=None):
    u = 'iscsi://'
    if cred:
        u += '%s%%%s@' % cred
    u += '%s:%d/%s/%d' % (HOST, port, iqn, lun)
    if mutual:
        u += '?target_user=%s&target_password=%s' % mutual
    return u


def inq(ini, u, page=None):
    """iscsi-inq's output as bytes (the NAA designator is printed raw) and its exit status."""
    cmd = ['iscsi-inq', '-i', ini] + (['-e', '1', '-c', str(page)] if page else []) + [u]
    r = subprocess.run(cmd, capture_output=True, timeout=30)
    return r.stdout + r.stderr, r.returncode


def identity(ini, u):
    """(serial, NAA designator bytes, vendor, product) through iscsi-inq, None where missing."""
    out80, _ = inq(ini, u, 128)
    out83, _ = inq(ini, u, 131)
    std, _ = inq(ini, u)
    serial = naa = vendor = product = None
    k = out80.find(b'Unit Serial Number:[')
    if k >= 0:
        serial = out80[k + 20:out80.find(b']', k)].decode(errors='replace')
    for d in out83.split(b'DEVICE DESIGNATOR')[1:]:
        if b'(3) NAA' in d and b'LOGICAL_UNIT' in d:
            k = d.find(b'Designator:[')
            naa = d[k + 12:k + 28] if k >= 0 and d[k + 28:k + 29] == b']' else b'?' + d[k:k + 40]
    for ln in std.splitlines():
        if ln.startswith(b'Vendor:'):
            vendor = ln[7:].decode(errors='replace').strip()
        elif ln.startswith(b'Product:'):
            product = ln[8:].decode(errors='replace').strip()
    return serial, naa, vendor, product


def readcap(ini, u):
    return ixtest.readcap16(ini, u)


def rel_port(port, iqn, ini, cred):
    """The relative target port id in VPD 0x83 through a raw session, or an error text."""
    try:
        s = X.Session(HOST, port, initiator=ini, target=iqn, timeout=20)
        s.login(chap=cred)
        for _ in range(4):   # the power-on unit attention first
            st, data, _, _ = s.scsi(bytes([0x12, 1, 0x83, 1, 0, 0]), read_len=256)
            if st == 0:
                break
        s.close()
    except Exception as e:  # noqa: BLE001
        return 'error: %s' % e
    if st != 0:
        return 'status 0x%02x' % st
    off, end = 4, 4 + int.from_bytes(data[2:4], 'big')
    while off + 4 <= min(end, len(data)):
        dlen = data[off + 3]
        if data[off + 1] & 0x0f == 4 and data[off + 1] & 0x30 == 0x10:
            return int.from_bytes(data[off + 4 + 2:off + 4 + 4], 'big')
        off += 4 + dlen
    return 'no relative target port designator'


def ctl(*args):
    r = run([os.path.join(BUILD, 'tools', 'ix-ctl')] + list(args), 120)
    return r.returncode, r.stdout, r.stderr


class Gw:
    def __init__(self, tmp, conf, name):
        self.name = name
        self.port = ixtest.free_port()
        self.cfg = os.path.join(tmp, '%s.json' % name)
        # the document's portals are ceph-iscsi's (192.0.2.x:3260): this host's own here
        with open(self.cfg, 'w') as f:
            json.dump({'group': {'pool': 'rbd', 'object': 'ix.group', 'member': name,
                                 'conf': conf},
                       'portals': [{'name': 'local', 'address': HOST, 'port': self.port}]},
                      f, indent=1)
        self.d = ixtest.Daemon(self.cfg, 'cephiscsi_import.ix-target-%s.log' % name, BUILD)


def step_encrypted(tmp, gwconf):
    key, pub = os.path.join(tmp, 'iscsi-gateway.key'), os.path.join(tmp, 'iscsi-gateway-pub.key')
    run(['openssl', 'genrsa', '-out', key, '2048'], 60)
    run(['openssl', 'rsa', '-in', key, '-pubout', '-out', pub], 60)

    def enc(text, md):
        opts = ['-pkeyopt', 'rsa_padding_mode:oaep']
        if md:
            opts += ['-pkeyopt', 'rsa_oaep_md:' + md, '-pkeyopt', 'rsa_mgf1_md:' + md]
        r = subprocess.run(['openssl', 'pkeyutl', '-encrypt', '-pubin', '-inkey', pub] + opts,
                           input=text.encode(), capture_output=True, timeout=60)
        return base64.b64encode(r.stdout).decode()
    d = json.loads(json.dumps(gwconf))
    a = d['targets'][T1]['clients']['iqn.1994-05.com.redhat:client1']['auth']
    want = (a['password'], a['mutual_password'])
    a.update(password=enc(a['password'], 'sha256'), password_encryption_enabled=True,
             mutual_password=enc(a['mutual_password'], None),
             mutual_password_encryption_enabled=True)
    path = os.path.join(tmp, 'encrypted.conf')
    with open(path, 'w') as f:
        json.dump(d, f)
    rc, out, err = ctl('import', 'ceph-iscsi', '--file', path, '--key', key, '--out', '-')
    acl = [x for x in json.loads(out)['targets'][0]['acls']
           if x['initiator'] == 'iqn.1994-05.com.redhat:client1'] if rc == 0 else []
    got = (acl[0]['chap']['secret'], acl[0]['mutual_chap']['secret']) if acl else None
    rc2, out2, err2 = ctl('import', 'ceph-iscsi', '--file', path, '--out', '-')
    left = rc2 == 0 and 'client1' not in out2 and \
        'client iqn.1994-05.com.redhat:client1: CHAP password is encrypted' in err2
    report.check('encrypted', rc == 0 and got == want and left and
                 not any(w in err + err2 for w in want),
                 'ix-ctl import --key: exit %d, client1\'s CHAP and mutual CHAP decrypted '
                 '(OAEP SHA-256, SHA-1): %s; without --key: exit %d, client1 left out and noted: '
                 '%s' % (rc, got == want, rc2, left))


def scenario(cl, tmp):
    gwconf = json.load(open(DATA))
    clients = {c: a['auth'] for t in gwconf['targets'].values()
               for c, a in t['clients'].items()}

    def cred(ini):
        return (clients[ini]['username'], clients[ini]['password'])

    def mcred(ini):
        return (clients[ini]['mutual_username'], clients[ini]['mutual_password'])

    for image, mib in SIZES.items():
        cl.create_image(image, '%dM' % mib)
    with open(DATA, 'rb') as f:
        cl.rados('-p', 'rbd', 'put', 'gateway.conf', '-', data=f.read())

    # import: from rbd/gateway.conf to rbd/ix.group (the defaults)
    rc, out, err = ctl('import', 'ceph-iscsi', '--ceph-conf', cl.conf, '--rbd-conf', cl.conf)
    doc = json.loads(cl.rados('-p', 'rbd', 'get', 'ix.group', '-'))
    notes = [ln for ln in err.splitlines() if ln.startswith('not carried over: ')]
    report.check('import', rc == 0 and doc.get('generation') == 1 and
                 [m['name'] for m in doc.get('members', [])] == ['ceph-gw-1.lab', 'ceph-gw-2.lab']
                 and [t['name'] for t in doc.get('targets', [])] == [T1, T2] and
                 len(notes) == 4 and sum('TPG tag' in n for n in notes) == 2 and
                 'written to rbd/ix.group' in err,
                 'ix-ctl import ceph-iscsi: exit %d; rados get ix.group: generation %s, members '
                 '%s, targets %s; %d notes (%d about TPG tags)' %
                 (rc, doc.get('generation'), [m.get('name') for m in doc.get('members', [])],
                  [t.get('name') for t in doc.get('targets', [])], len(notes),
                  sum('TPG tag' in n for n in notes)))

    rc2, _, err2 = ctl('import', 'ceph-iscsi', '--ceph-conf', cl.conf, '--rbd-conf', cl.conf)
    after = json.loads(cl.rados('-p', 'rbd', 'get', 'ix.group', '-'))
    path = os.path.join(tmp, 'group.json')
    rc3, _, _ = ctl('import', 'ceph-iscsi', '--ceph-conf', cl.conf, '--rbd-conf', cl.conf,
                    '--out', path)
    ondisk = json.load(open(path)) if rc3 == 0 else None
    report.check('no-clobber', rc2 == 1 and 'exists already' in err2 and after == doc and
                 rc3 == 0 and ondisk == doc and oct(os.stat(path).st_mode & 0o777) == '0o600',
                 'a second import: exit %d (%s), object unchanged: %s; --out: exit %d, the same '
                 'document: %s' % (rc2, ''.join(ln for ln in err2.splitlines()
                                                 if 'exists already' in ln)[:90],
                                   after == doc, rc3,
                                   ondisk == doc))

    step_encrypted(tmp, gwconf)
    gws = []
    try:
        for name in ('ceph-gw-1.lab', 'ceph-gw-2.lab'):
            gws.append(Gw(tmp, cl.conf, name))
        # identity: each disk through each gateway, as the client that sees it
        views = [(T1, 0, 'iqn.1994-05.com.redhat:client1', 'rbd/disk_1'),
                 (T1, 1, 'iqn.1994-05.com.redhat:client1', 'rbd/disk_2'),
                 (T1, 0, 'iqn.1991-05.com.microsoft:win1', 'rbd/disk_2'),
                 (T2, 0, 'iqn.1994-05.com.redhat:client2', 'rbd/disk_3')]
        bad = []
        for g in gws:
            for iqn, lun, ini, disk in views:
                wwn = gwconf['disks'][disk]['wwn']
                got = identity(ini, url(g.port, iqn, lun, cred(ini)))
                want = (wwn, lio_naa(wwn), 'LIO-ORG', 'TCMU device')
                if got != want:
                    bad.append('%s %s LUN %d as %s: %s, want %s' % (g.name, iqn, lun, ini, got,
                                                                  want))
        report.check('identity', not bad,
                     'VPD 0x80 serial = wwn, VPD 0x83 NAA = LIO\'s for the wwn (e.g. %s for %s), '
                     'LIO-ORG/TCMU device: %d views through 2 gateways%s' %
                     (lio_naa(gwconf['disks']['rbd/disk_1']['wwn']).hex(),
                      gwconf['disks']['rbd/disk_1']['wwn'], len(views),
                      '' if not bad else '; WRONG: ' + '; '.join(bad)[:600]))

        p = gws[1].port
        c1, c2, w1 = ('iqn.1994-05.com.redhat:client1', 'iqn.1994-05.com.redhat:client2',
                      'iqn.1991-05.com.microsoft:win1')
        res = {
            'client1': inq(c1, url(p, T1, 0, cred(c1)))[1],
            'win1': inq(w1, url(p, T1, 0, cred(w1)))[1],
            'client2': inq(c2, url(p, T2, 0, cred(c2)))[1],
            'wrong-secret': inq(c1, url(p, T1, 0, (cred(c1)[0], 'not-the-secret1')))[1],
            'no-credential': inq(c1, url(p, T1, 0))[1],
            'win1-with-client1-cred': inq(w1, url(p, T1, 0, cred(c1)))[1],
            'outsider': inq('iqn.1994-05.com.redhat:outsider', url(p, T1, 0, cred(c1)))[1],
            'client2-on-target1': inq(c2, url(p, T1, 0, cred(c2)))[1],
        }
        want = {'client1': 0, 'win1': 0, 'client2': 0}
        report.check('chap', all((res[k] == 0) == (k in want) for k in res),
                     'iscsi-inq exit status through %s: %s (0 only for the clients with their '
                     'own credential)' % (gws[1].name, res))

        def mutual(ini, iqn, mc):
            out, rc = inq(ini, url(p, iqn, 0, cred(ini), mc))
            why = [ln for ln in out.decode(errors='replace').splitlines() if 'CHAP' in ln]
            return rc, (why[0].strip()[:70] if why else '')

        mres = {
            'client1-own': mutual(c1, T1, mcred(c1)),
            'client2-own': mutual(c2, T2, mcred(c2)),
            'client1-with-client2s': mutual(c1, T1, mcred(c2)),
            'client2-with-client1s': mutual(c2, T2, mcred(c1)),
            'client1-wrong-secret': mutual(c1, T1, (mcred(c1)[0], 'wrong-mutual-1')),
        }
        # refused by libiscsi for the target's CHAP answer, not for anything else
        report.check('mutual', mres['client1-own'][0] == 0 and mres['client2-own'][0] == 0 and
                     all(rc != 0 and 'CHAP' in why for k, (rc, why) in mres.items()
                         if not k.endswith('-own')),
                     'iscsi-inq with target_user/target_password (libiscsi checks the target): '
                     '%s' % mres)

        caps = {
            'win1 LUN 0': readcap(w1, url(gws[0].port, T1, 0, cred(w1))),
            'win1 LUN 1': readcap(w1, url(gws[0].port, T1, 1, cred(w1))),
            'client1 LUN 0': readcap(c1, url(gws[0].port, T1, 0, cred(c1))),
            'client1 LUN 1': readcap(c1, url(gws[0].port, T1, 1, cred(c1))),
        }
        report.check('masking', caps['win1 LUN 0'] == SIZES['disk_2'] * MIB and
                     not isinstance(caps['win1 LUN 1'], int) and
                     caps['client1 LUN 0'] == SIZES['disk_1'] * MIB and
                     caps['client1 LUN 1'] == SIZES['disk_2'] * MIB,
                     'iscsi-readcapacity16 through %s: %s (disk_1 %d MiB, disk_2 %d MiB)' %
                     (gws[0].name, caps, SIZES['disk_1'], SIZES['disk_2']))

        # LIO's tags: each target's ip_list order; ix: the member ids (the first target's)
        ports = {(g.name, iqn): rel_port(g.port, iqn, ini, cred(ini)) for g in gws
                 for iqn, ini in ((T1, c1), (T2, c2))}
        lio = {}
        for iqn in (T1, T2):
            t = gwconf['targets'][iqn]
            order = []
            for ip in t['ip_list']:
                order += [h for h, v in t['portals'].items()
                          if ip in v['portal_ip_addresses'] and h not in order]
            lio.update({(h, iqn): k + 1 for k, h in enumerate(order)})
        report.check('ports', all(ports[(g.name, T1)] == lio[(g.name, T1)] for g in gws) and
                     [ports[(g.name, T2)] for g in gws] == [1, 2] and
                     all(ports[(g.name, T2)] != lio[(g.name, T2)] for g in gws),
                     'relative target port ids (gateway, target): %s; LIO had %s' %
                     ({'%s %s' % (k[0], k[1][-4:]): v for k, v in ports.items()},
                      {'%s %s' % (k[0], k[1][-4:]): v for k, v in lio.items()}))

        da = gwconf['discovery_auth']
        r_ok = run(['iscsi-ls', '-i', c1, 'iscsi://%s%%%s@%s:%d' %
                    (da['username'], da['password'], HOST, p)], 30)
        r_no = run(['iscsi-ls', '-i', c1, 'iscsi://%s:%d' % (HOST, p)], 30)
        listed = [ln[7:].split()[0] for ln in r_ok.stdout.splitlines()
                  if ln.startswith('Target:')]
        report.check('discovery', r_ok.returncode == 0 and listed == [T1] and
                     r_no.returncode != 0,
                     'iscsi-ls as client1 with the discovery credential: exit %d, targets %s; '
                     'without: exit %d' % (r_ok.returncode, listed, r_no.returncode))
    finally:
        for g in gws:
            g.d.stop()
            ixtest.check_sanitizer(report, g.d, g.name)


def main():
    return ixceph.run_with_cluster(report, 'cephiscsi_import', scenario,
                                   tools=('iscsi-inq', 'iscsi-readcapacity16', 'iscsi-ls'),
                                   built=('ix-target', 'ix-ctl'))


if __name__ == '__main__':
    report.main(main)
