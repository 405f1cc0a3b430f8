#!/bin/bash
# qemu.sh against a file-backed LUN: a sparse file in the test's temp dir, read and written
# through io_uring.
PEER_BACKEND=file exec bash "$(dirname "$0")/qemu.sh" "$@"
