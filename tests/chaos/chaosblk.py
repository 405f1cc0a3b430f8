"""The chaos client's 4 KiB blocks: every write a unique value that says which block it was
written to, by whom and with which sequence number, with a checksum over the whole block, so
the checker can tell from the image alone which write a block holds (or that it is torn).

  layout: magic 'IXCHAOS1' (8), block (Q), writer (I), seq (Q), filler from the seq, crc32 (I)
"""

import random
import struct
import zlib

BLOCK = 4096
MAGIC = b'IXCHAOS1'
HDR = struct.Struct('>8sQIQ')


def make(blk, writer, seq):
    """The data of write seq (of writer) to 4 KiB block blk."""
    head = HDR.pack(MAGIC, blk, writer, seq)
    fill = random.Random((writer << 48) ^ seq).randbytes(BLOCK - HDR.size - 4)
    body = head + fill
    return body + struct.pack('>I', zlib.crc32(body))


def parse(data, blk=None):
    """(writer, seq) of a block's data; None for a block of zeros (never written); 'bad' for
    anything else (torn, another block's data, garbage)."""
    if len(data) != BLOCK:
        return 'bad'
    if not any(data):
        return None
    magic, b, writer, seq = HDR.unpack_from(data)
    if magic != MAGIC or struct.unpack('>I', data[-4:])[0] != zlib.crc32(data[:-4]):
        return 'bad'
    if blk is not None and b != blk:
        return 'bad'
    return writer, seq
