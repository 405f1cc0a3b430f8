# Shared by the set-up scripts (source it): run a step with its output in a log, and stop with
# a message that names the failing command and shows the log's last lines, never silently.

# step LOG CMD...: run CMD with stdout and stderr appended to LOG; on failure print the command,
# its exit status and the last 25 lines of LOG to stderr and exit 1.
step() {
	local log=$1 rc
	shift
	mkdir -p "$(dirname "$log")"
	echo "+ $*" >>"$log"
	"$@" >>"$log" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		{
			echo "${0##*/}: FAILED (exit $rc): $*"
			echo "${0##*/}: last lines of $log:"
			tail -n 25 "$log" | sed 's/^/  | /'
		} >&2
		exit 1
	fi
}
