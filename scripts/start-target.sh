#!/bin/bash
# Install what is missing, build, and start ix-target in the foreground on the default
# configuration (etc/ix-target.json: a 1 GiB RAM LUN on 127.0.0.1:3260). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
if [ ! -d build ]; then
	meson setup build --buildtype=release >/dev/null
fi
ninja -C build >/dev/null
CONFIG=${1:-etc/ix-target.json}
IQN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["targets"][0]["name"])' "$CONFIG")
cat <<MSG
ix-target: serving $IQN on 127.0.0.1:3260 (config $CONFIG)
Connect with libiscsi's tools, for example:
  iscsi-ls -s iscsi://127.0.0.1:3260
  iscsi-inq iscsi://127.0.0.1:3260/$IQN/0
  iscsi-readcapacity16 iscsi://127.0.0.1:3260/$IQN/0
or QEMU: qemu-img info iscsi://127.0.0.1:3260/$IQN/0
Stop with Ctrl-C.
MSG
exec ./build/tools/ix-target -c "$CONFIG"
