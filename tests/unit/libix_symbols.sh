#!/bin/bash
# libix.so is the initiator library: it exports only the public ix_* API, carries no target,
# SCSI-core, backend or test-only code, and needs neither jansson nor liburing (TAP).
#   libix_symbols.sh PATH/libix.so
set -uo pipefail
so=$1
n=0 failed=0
check() { # DESCRIPTION COMMAND...: ok when COMMAND succeeds
	local d=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $d"
	else
		echo "not ok $n - $d"
		failed=1
	fi
}
exports=$(nm -D --defined-only "$so" | awk '{print $3}')
others=$(echo "$exports" | grep -v '^ix_' | tr '\n' ' ')
check "exports only ix_* (others: ${others:-none})" test -z "$others"
check "exports the public API (ix_ctx_new, ix_session_new, ix_scsi_submit)" \
	bash -c "echo '$exports' | grep -qx ix_ctx_new && echo '$exports' | grep -qx ix_session_new && echo '$exports' | grep -qx ix_scsi_submit"
inner=$(nm "$so" | awk '$2 ~ /^[tTdDbB]$/ {print $3}' | grep -E '^(scsi_|bs_|ha_|tgt_|cfg_|lu_|pr_|fault_|ix_target_)' | head -5 | tr '\n' ' ')
check "no target, SCSI-core, backend, HA or fault-injection code (found: ${inner:-none})" test -z "$inner"
needed=$(readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
check "needs neither jansson nor liburing (NEEDED: $needed)" \
	bash -c "! echo '$needed' | grep -qE 'libjansson|liburing'"
echo "1..$n"
exit $failed
