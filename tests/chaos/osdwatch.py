#!/usr/bin/python3
"""When the cluster enforced each blocklisting: the chaos run's watcher of the OSD map.

  osdwatch.py CEPH_CONF OSD_ADMIN_SOCKET OUT [STOP_FILE]     (Debian's python3-rados)

A monitor records a blocklist entry at once (its expiry, less Ceph's default hour, is that
moment), but an OSD refuses the blocklisted client only from the OSD map that carries the entry
on, once it has that map; a write that reached the OSD before then is applied. The checker
(check.py) therefore judges a fenced gateway's writes against the time the OSD had the map.
This watcher, run in the cluster's namespace for the whole run, writes JSON lines to OUT:

  {"type": "map-entry", "t": ..., "epoch": E, "addr": A}  entry A first appears in map E (the
        monitor's maps are read one epoch at a time from the last one seen, so E is exact)
  {"type": "osd-map", "t": ..., "epoch": E}                  the OSD's newest map is E (its admin
        socket's "status", polled every POLL_S: t is at most POLL_S after the OSD stored it)

A poll that fails (the monitor or the OSD restarting: a fault of the run) is tried again at
the next interval; nothing is inferred from it.
"""

import json
import os
import socket
import struct
import sys
import time

POLL_S = 0.1
MON_TIMEOUT_S = 2


def recv_exact(s, n):
    """n bytes from socket s (OSError when it closes first)."""
    buf = b''
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise OSError('short answer')
        buf += c
    return buf


def asok(path, cmd):
    """One admin socket command (Ceph's protocol: the JSON command and a NUL, then a 4-byte
    big-endian length and the answer)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    try:
        s.connect(path)
        s.sendall(json.dumps(cmd).encode() + b'\0')
        n = struct.unpack('>I', recv_exact(s, 4))[0]
        return json.loads(recv_exact(s, n))
    finally:
        s.close()


def main(argv):
    import rados  # Debian's python3-rados
    conf, sock, out = argv[1], argv[2], argv[3]
    stop = argv[4] if len(argv) > 4 else None
    cl = rados.Rados(conffile=conf)
    cl.conf_set('rados_mon_op_timeout', str(MON_TIMEOUT_S))
    cl.connect(timeout=30)
    f = open(out, 'a', buffering=1)

    def emit(**kw):
        kw['t'] = round(time.time(), 4)
        f.write(json.dumps(kw) + '\n')

    def dump(epoch=None):
        cmd = {'prefix': 'osd dump', 'format': 'json'}
        if epoch is not None:
            cmd['epoch'] = epoch
        rc, buf, _ = cl.mon_command(json.dumps(cmd), b'', timeout=MON_TIMEOUT_S)
        return json.loads(buf) if rc == 0 else None

    def entries(d):
        return {b['addr'] if isinstance(b, dict) else b for b in
                (d.get('blocklist') or d.get('blacklist') or [])}
    seen_epoch, seen, osd_epoch = None, set(), None
    while not (stop and os.path.exists(stop)):
        t_next = time.monotonic() + POLL_S
        try:
            st = asok(sock, {'prefix': 'status'})
            if st.get('newest_map') != osd_epoch:
                osd_epoch = st.get('newest_map')
                emit(type='osd-map', epoch=osd_epoch)
        except (OSError, ValueError):
            pass
        try:
            d = dump()
            if d is not None and d.get('epoch') != seen_epoch:
                last = d['epoch']
                first = last if seen_epoch is None else seen_epoch + 1
                for e in range(first, last + 1):
                    de = d if e == last else dump(e)
                    if de is None:  # not answered: the next poll starts here again
                        break
                    new = entries(de) - seen
                    if seen_epoch is not None:
                        for a in sorted(new):
                            emit(type='map-entry', epoch=e, addr=a)
                    seen |= new
                    seen_epoch = e
        except (rados.Error, ValueError, KeyError):
            pass
        time.sleep(max(0, t_next - time.monotonic()))
    cl.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
