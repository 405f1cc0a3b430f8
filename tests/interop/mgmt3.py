#!/usr/bin/env python3
"""Rough edges of the management API, against the real daemon (docs/management.md; issue 29,
item 5).

The daemon starts with one portal, no targets, a management socket and the metrics endpoint.
  1. a provisioning script run twice: ix-ctl target create --alias, lun create --ram 64M, acl
     create with CHAP, portal create; the second run is exit 0 with no change for each, though
     the target has since got LUNs and ACLs; a conflicting named setting (another alias,
     another LUN backend, another portal port) is refused (exit 1) naming params.<path>, and
     the CHAP secret does not appear in the message;
  2. sizes by value: iscsi_resize_lun {"size": 67108864} on the "64M" LUN is no change and the
     stored "64M" stays; iscsi_apply_config of the document with the size written 67108864 is
     no change; libiscsi's iscsi-readcapacity16 still reads 64 MiB;
  3. errors at the request's path: a LUN created with size "1X" names params.lun.size, a resize
     to "12Q" params.size, a wrong max_sessions params.max_sessions, apply_config
     params.config.targets[0]...; each also names the document's path;
  4. ids on the raw socket: null and 1.5 answered with that id, true is -32600 with id null;
  5. save into a missing directory: exit 1, the message names the file given and says the
     directory does not exist, no ".tmp";
  6. libiscsi's iscsi-inq logs in as the ACL's initiator written in three cases: the endpoint
     shows one ix_lun_commands_total series for the LUN, its initiator label in lower case.
ix only (the management API is ix-target's own).
"""

import json
import os
import socket
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import ixdaemon  # noqa: E402
import ixmgmt  # noqa: E402
import ixtest  # noqa: E402
from ixmgmt import HOST  # noqa: E402

ixdaemon.skip_unless_ix('the management API')

T = 'iqn.2026-11.io.ix.test:rerun'
INI = 'iqn.2026-11.io.ix.test:rerun-host'  # names in a file are lower-case (normalised)
SECRET = 'rerun-secret-0123'
MIB = 1 << 20
URL = 'iscsi://rerun%%' + SECRET + '@%s:%d/%s/0'  # libiscsi: CHAP user%secret
R, E, ctl, check = ixmgmt.harness('mgmt3')


def provision():
    """The provisioning script: (exit status, output) of each command."""
    cmds = [('portal', 'create', 'extra', HOST, str(E.port2)),
            ('target', 'create', T, '--alias', 'A'),
            ('lun', 'create', T, '0', '--ram', '64M'),
            ('acl', 'create', T, INI, '--chap-user', 'rerun', '--chap-secret', SECRET)]
    out = []
    for c in cmds:
        rc, o, e = ctl('--json', *c)
        try:
            j = json.loads(o)
        except ValueError:
            j = None
        out.append((rc, j, (o + e).strip()))
    return out


def step_rerun():
    first = provision()
    check('provision', all(rc == 0 and j and j.get('changed') for rc, j, _ in first),
          'first run: %s' % [(rc, t[:80]) for rc, _, t in first])
    again = provision()
    check('provision-again', all(rc == 0 and j == {'changed': False, 'changes': []}
                                 for rc, j, _ in again),
          'second run (the target has LUNs and ACLs now): %s' % [(rc, t[:80]) for rc, _, t in again])
    rc, out, err = ctl('target', 'create', T, '--alias', 'B')
    check('conflict-alias', rc == 1 and 'params.target.alias' in err,
          'target create --alias B: exit %d, %s' % (rc, err.strip()))
    rc, out, err = ctl('lun', 'create', T, '0', '--ram', '32M')
    check('conflict-size', rc == 1 and 'params.lun.size' in err,
          'lun create 0 --ram 32M: exit %d, %s' % (rc, err.strip()))
    rc2, out2, err2 = ctl('portal', 'create', 'extra', HOST, str(E.port2 + 1))
    rc3, out3, err3 = ctl('acl', 'create', T, INI, '--chap-user', 'rerun', '--chap-secret',
                          'another-secret-456')
    check('conflict-portal-acl', rc2 == 1 and 'params.portal.port' in err2 and rc3 == 1 and
          'params.acl.chap' in err3 and SECRET not in err3 and 'another-secret' not in err3,
          'portal port: exit %d, %s; acl chap: exit %d, %s' % (rc2, err2.strip(), rc3,
                                                             err3.strip()))


def readcap16():
    p = subprocess.run(['iscsi-readcapacity16', '-i', INI, URL % (HOST, E.port, T)],
                       capture_output=True, text=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).strip()


def lun0():
    return ctl.json('rpc', 'iscsi_get_luns', json.dumps({'target': T}))[0]


def step_sizes():
    r = ctl.json('rpc', 'iscsi_resize_lun', json.dumps({'target': T, 'lun': 0,
                                                        'size': 64 * MIB}))
    size = lun0().get('size')
    check('resize-same-value', r == {'changed': False, 'changes': []} and size == '64M',
          'resize to 67108864: %s; stored size %r' % (r, size))
    doc = ctl.json('rpc', 'iscsi_get_config')
    for t in doc['targets']:
        for lun in t.get('luns', []):
            lun['size'] = 64 * MIB
    r2 = ctl.json('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))
    rc, out = readcap16()
    check('apply-same-value', r2 == {'changed': False, 'changes': []} and rc == 0 and
          ('RETURNED LOGICAL BLOCK ADDRESS:%d' % (64 * MIB // 512 - 1)) in out and
          'LOGICAL BLOCK LENGTH IN BYTES:512' in out,
          'apply_config with 67108864: %s; iscsi-readcapacity16: exit %d, %s' % (
              r2, rc, out.replace('\n', ' | ')[:200]))


def step_paths():
    rc, out, err = ctl('lun', 'create', T, '1', '--ram', '1X')
    rc2, out2, err2 = ctl('lun', 'resize', T, '0', '12Q')
    rc3, out3, err3 = ctl('rpc', 'iscsi_set_target_options',
                          json.dumps({'target': T, 'max_sessions': 'x'}))
    check('error-paths', rc == 1 and err.strip().startswith('ix-ctl: params.lun.size:') and
          'targets[0].luns[1].size' in err and rc2 == 1 and
          err2.strip().startswith('ix-ctl: params.size:') and
          'targets[0].luns[0].size' in err2 and rc3 == 1 and
          err3.strip().startswith('ix-ctl: params.max_sessions:'),
          'lun create --ram 1X: %s | resize 12Q: %s | max_sessions "x": %s' % (
              err.strip(), err2.strip(), err3.strip()))
    doc = ctl.json('rpc', 'iscsi_get_config')
    doc['targets'][0]['alias'] = 7
    rc, out, err = ctl('rpc', 'iscsi_apply_config', json.dumps({'config': doc}))
    check('error-path-apply', rc == 1 and 'params.config.targets[0].alias' in err,
          'apply_config with alias 7: exit %d, %s' % (rc, err.strip()))


def raw(line):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(15)
    s.connect(E.sock)
    s.sendall(line.encode() + b'\n')
    buf = b''
    while b'\n' not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return json.loads(buf.split(b'\n')[0])


def step_ids():
    a = raw('{"jsonrpc": "2.0", "id": null, "method": "iscsi_get_portals"}')
    b = raw('{"jsonrpc": "2.0", "id": 1.5, "method": "iscsi_get_portals"}')
    c = raw('{"jsonrpc": "2.0", "id": true, "method": "iscsi_get_portals"}')
    check('ids', 'id' in a and a['id'] is None and 'result' in a and b.get('id') == 1.5 and
          'result' in b and c.get('id', 0) is None and c.get('error', {}).get('code') == -32600,
          'id null: %s | id 1.5: %s | id true: %s' % (json.dumps(a)[:90], json.dumps(b)[:90],
                                                      json.dumps(c)))


def step_save_missing():
    path = os.path.join(E.dir, 'no-such-dir', 'x.json')
    rc, out, err = ctl('save', path)
    check('save-missing-dir', rc == 1 and (path + ':') in err and 'does not exist' in err and
          '.tmp' not in err and os.path.dirname(path) in err,
          'save %s: exit %d, %s' % (path, rc, err.strip()))


def step_metrics_case():
    names = [INI, INI.upper().replace('IQN.', 'iqn.'), INI.replace('rerun-host', 'Rerun-Host')]
    outs = []
    for n in names:
        p = subprocess.run(['iscsi-inq', '-i', n, URL % (HOST, E.port, T)],
                           capture_output=True, text=True, timeout=30)
        outs.append((n, p.returncode, (p.stdout + p.stderr).strip()[:60]))
    body = urllib.request.urlopen('http://%s:%d/metrics' % (HOST, E.mport),
                                  timeout=10).read().decode()
    series = [ln for ln in body.splitlines() if ln.startswith('ix_lun_commands_total{') and
              ('target="%s"' % T) in ln and 'lun="0"' in ln and 'op="other"' in ln]
    stats = ctl.json('stats')
    per = [x for x in stats.get('luns', []) if x.get('target') == T and x.get('lun') == 0]
    check('metrics-initiator-case',
          all(rc == 0 for _, rc, _ in outs) and len(series) == 1 and
          ('initiator="%s"' % INI.lower()) in series[0] and len(per) == 1 and
          per[0].get('initiator') == INI.lower(),
          'iscsi-inq as %s; series: %s; iscsi_get_stats rows: %s' % (
              outs, series, [(x.get('initiator'), x.get('commands')) for x in per]))


def setup():
    E.sock = os.path.join(E.dir, 'ix-target.sock')
    E.port2 = ixtest.free_port()
    E.mport = ixtest.free_port()
    with open(E.cfg, 'w') as f:
        json.dump({'global': {'mgmt_socket': E.sock, 'threads': 2,
                              'metrics_listen': '%s:%d' % (HOST, E.mport)},
                   'portals': [{'name': 'base', 'address': HOST, 'port': E.port}]}, f)


def step_wait_port():
    ixtest.wait_port(HOST, E.port, 10)


def main():
    return ixmgmt.main(R, E, 'mgmt3', setup, (
        step_wait_port, step_rerun, step_sizes, step_paths, step_ids, step_save_missing,
        step_metrics_case))


if __name__ == '__main__':
    R.main(main)
