#!/bin/bash
# Install what is missing, build, and start ix-target in the foreground on the default
# configuration (etc/ix-target.json: a 1 GiB RAM LUN on 127.0.0.1:3260). Ctrl-C stops it.
# Each step's output goes to setup.log; a failing step stops the script with the command
# and the log's last lines.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
LOG=$PWD/setup.log
: >"$LOG"
echo "start-target: installing missing Debian packages (scripts/deps.sh; log $LOG)"
step "$LOG" ./scripts/deps.sh
if [ ! -f build/build.ninja ]; then
	echo "start-target: configuring the build (meson setup build)"
	step "$LOG" meson setup build --buildtype=release
fi
echo "start-target: building (ninja -C build)"
step "$LOG" ninja -C build
CONFIG=${1:-etc/ix-target.json}
step "$LOG" ./build/tools/ix-target --check -c "$CONFIG"
IQN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["targets"][0]["name"])' "$CONFIG")
cat <<MSG
ix-target: serving $IQN on 127.0.0.1:3260 (config $CONFIG)
Connect with libiscsi's tools (package libiscsi-bin; ./tests/run.sh installs it), for example:
  iscsi-ls -s iscsi://127.0.0.1:3260
  iscsi-inq iscsi://127.0.0.1:3260/$IQN/0
  iscsi-readcapacity16 iscsi://127.0.0.1:3260/$IQN/0
or QEMU: qemu-img info iscsi://127.0.0.1:3260/$IQN/0
Stop with Ctrl-C.
MSG
exec ./build/tools/ix-target -c "$CONFIG"
