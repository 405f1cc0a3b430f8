"""libiscsi's synchronous API from Python (ctypes, stdlib only): the real initiator library,
which decodes the sense data itself, for the tests that must show what libiscsi sees.

    li = Libiscsi(port, target_iqn, initiator_iqn)   # logs in to LUN lun (TEST UNIT READYs
    st, sense, err = li.write(lba, data)              # of the connect take the power-on UA)
    st, sense, err = li.read(lba, nbytes) / li.tur() / li.unmap(lba, blocks)
    li.close()

Each call returns (SCSI status, (key, asc, ascq) of a CHECK CONDITION or None, libiscsi's
error text); status -1 when libiscsi returned no task (the connection failed). Importing this
raises OSError when libiscsi.so is not installed.
"""

import ctypes
import ctypes.util
import re

LIB = ctypes.CDLL(ctypes.util.find_library('iscsi') or 'libiscsi.so.7')


class UnmapList(ctypes.Structure):
    _fields_ = [('lba', ctypes.c_uint64), ('num', ctypes.c_uint32)]


P = ctypes.c_void_p
LIB.iscsi_create_context.restype = P
LIB.iscsi_create_context.argtypes = [ctypes.c_char_p]
LIB.iscsi_set_targetname.argtypes = [P, ctypes.c_char_p]
LIB.iscsi_set_session_type.argtypes = [P, ctypes.c_int]
LIB.iscsi_set_header_digest.argtypes = [P, ctypes.c_int]
LIB.iscsi_full_connect_sync.argtypes = [P, ctypes.c_char_p, ctypes.c_int]
LIB.iscsi_get_error.restype = ctypes.c_char_p
LIB.iscsi_get_error.argtypes = [P]
LIB.iscsi_write16_sync.restype = P
LIB.iscsi_write16_sync.argtypes = [P, ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p,
                                   ctypes.c_uint32, ctypes.c_int] + [ctypes.c_int] * 5
LIB.iscsi_read16_sync.restype = P
LIB.iscsi_read16_sync.argtypes = [P, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                                  ctypes.c_int] + [ctypes.c_int] * 5
LIB.iscsi_testunitready_sync.restype = P
LIB.iscsi_testunitready_sync.argtypes = [P, ctypes.c_int]
LIB.iscsi_unmap_sync.restype = P
LIB.iscsi_unmap_sync.argtypes = [P, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.POINTER(UnmapList), ctypes.c_int]
LIB.scsi_free_scsi_task.argtypes = [P]
LIB.iscsi_logout_sync.argtypes = [P]
LIB.iscsi_destroy_context.argtypes = [P]
# libiscsi's text for a CHECK CONDITION: "SENSE KEY:<name>(<key>) ASCQ:<name>(0x<asc><ascq>)"
SENSE_RE = re.compile(r'SENSE KEY:[^(]*\((\d+)\) ASCQ:.*\(0x([0-9a-fA-F]{4})\)')


class Libiscsi:
    """One libiscsi session to one LUN."""

    def __init__(self, port, target, initiator, lun=0, block_size=512, host='127.0.0.1'):
        self.lun, self.bs = lun, block_size
        self.ctx = LIB.iscsi_create_context(initiator.encode())
        LIB.iscsi_set_targetname(self.ctx, target.encode())
        LIB.iscsi_set_session_type(self.ctx, 2)     # ISCSI_SESSION_NORMAL
        LIB.iscsi_set_header_digest(self.ctx, 0)    # ISCSI_HEADER_DIGEST_NONE
        if LIB.iscsi_full_connect_sync(self.ctx, b'%s:%d' % (host.encode(), port), lun) != 0:
            err = self.error()
            LIB.iscsi_destroy_context(self.ctx)
            raise RuntimeError('libiscsi connect: ' + err)

    def error(self):
        return (LIB.iscsi_get_error(self.ctx) or b'').decode(errors='replace')

    def _done(self, task):
        if not task:
            return -1, None, self.error()
        status = ctypes.c_int.from_address(task).value   # struct scsi_task's first member
        LIB.scsi_free_scsi_task(task)
        if status != 2:
            return status, None, ''
        err = self.error()
        m = SENSE_RE.search(err)
        sense = (int(m.group(1)), int(m.group(2)[:2], 16), int(m.group(2)[2:], 16)) \
            if m else None
        return status, sense, err

    def write(self, lba, data):
        return self._done(LIB.iscsi_write16_sync(self.ctx, self.lun, lba, data, len(data),
                                                 self.bs, 0, 0, 0, 0, 0))

    def read(self, lba, nbytes):
        return self._done(LIB.iscsi_read16_sync(self.ctx, self.lun, lba, nbytes, self.bs,
                                                0, 0, 0, 0, 0))

    def tur(self):
        return self._done(LIB.iscsi_testunitready_sync(self.ctx, self.lun))

    def unmap(self, lba, blocks):
        lst = (UnmapList * 1)(UnmapList(lba, blocks))
        return self._done(LIB.iscsi_unmap_sync(self.ctx, self.lun, 0, 0, lst, 1))

    def close(self):
        LIB.iscsi_logout_sync(self.ctx)
        LIB.iscsi_destroy_context(self.ctx)
