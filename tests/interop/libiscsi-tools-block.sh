#!/bin/bash
# libiscsi-tools.sh against a block-device LUN: a loop device over a sparse file. Where no loop device can
# be made (no /dev/loop-control, no permission, none free) the test SKIPs and says why.
PEER_BACKEND=block exec bash "$(dirname "$0")/libiscsi-tools.sh" "$@"
