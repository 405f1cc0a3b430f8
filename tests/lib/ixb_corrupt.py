#!/usr/bin/env python3
"""Damage one logical block behind ix-bench's back, through a raw session of tests/lib/ixiscsi:
read LBA, flip one bit in the middle of the block, write it back. A later `ix-bench --verify`
must report exactly that LBA as corrupted (its checksum no longer matches).

  ixb_corrupt.py HOST PORT IQN LUN LBA
"""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ixiscsi as X  # noqa: E402


def main():
    host, port, iqn, lun, lba = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
        int(sys.argv[5])
    s = X.Session(host, port, initiator='iqn.2024-01.org.ix.test:ixb-corrupt', target=iqn,
                  lun=lun, timeout=10)
    s.login()
    _, bs = s.read_capacity10()
    read16 = struct.pack('>BBQIBB', 0x88, 0, lba, 1, 0, 0)
    st, data, sense, _ = s.scsi_retry_ua(read16, read_len=bs)
    if st != 0 or len(data) != bs:
        sys.exit('READ(16) of LBA %d: status 0x%02x, %d bytes' % (lba, st, len(data)))
    blk = bytearray(data)
    blk[bs // 2] ^= 0x01
    write16 = struct.pack('>BBQIBB', 0x8a, 0, lba, 1, 0, 0)
    st, _, sense, _ = s.scsi_retry_ua(write16, write_data=bytes(blk))
    if st != 0:
        sys.exit('WRITE(16) of LBA %d: status 0x%02x sense %s' % (lba, st, sense.hex()))
    s.logout()
    s.close()
    print('flipped one bit of LBA %d (%d-byte blocks)' % (lba, bs))


if __name__ == '__main__':
    main()
