#!/usr/bin/python3
"""A librbd writer with no ix in between (python3-rbd, Debian's interpreter): the reference
for how long a plain librbd client's writes pause while a snapshot of its image is taken
(tests/interop/rbd_snap_pause.py; docs/snapshots.md, "The pause").

    librbd_writer.py CONF POOL IMAGE

Opens the image, writes 4 KiB blocks at queue depth 1 in a loop over its first MiB (the first
write takes the image's exclusive lock, so a snapshot made with `rbd snap create` elsewhere is
forwarded by librbd to this process and made here), prints "ready" once the lock is held,
and writes until a line arrives on stdin. Then it prints one JSON line: the number of writes,
the median and 99th percentile write latency (ms), and every interval between two completions
(the write's start to its end, CLOCK_MONOTONIC seconds: the same clock as Python's
time.monotonic in the caller) longer than 4 times the median, and exits 0."""

import json
import sys
import threading
import time

import rados
import rbd

BLK = 4096
SPAN = 256  # blocks written in turn


def main():
    conf, pool, name = sys.argv[1:4]
    stop = threading.Event()
    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=30)
    try:
        io = cluster.open_ioctx(pool)
        img = rbd.Image(io, name)
        try:
            data = b'\x5a' * BLK
            img.write(data, 0)
            if not img.is_exclusive_lock_owner():
                print(json.dumps({'error': 'not the exclusive lock owner after a write'}),
                      flush=True)
                return 1
            print('ready', flush=True)
            threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()),
                             daemon=True).start()
            ivs = []
            k = 0
            while not stop.is_set():
                t0 = time.monotonic()
                img.write(data, (k % SPAN) * BLK)
                ivs.append((t0, time.monotonic()))
                k += 1
        finally:
            img.close()
            io.close()
    finally:
        cluster.shutdown()
    lat = sorted(b - a for a, b in ivs)
    med = lat[len(lat) // 2] if lat else 0.0
    print(json.dumps({'writes': len(ivs), 'median_ms': med * 1000,
                      'p99_ms': lat[len(lat) * 99 // 100] * 1000 if lat else 0.0,
                      'long': [[a, b] for a, b in ivs if b - a > 4 * med]}), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
