# shellcheck shell=bash
# The one sanitizer-log scan of the shell tests (tests/run.sh, tests/lib/common.sh and the tests
# that source it): what ASan, LSan and UBSan print when they find something. The Python tests
# use tests/lib/ixtest.py's sanitizer_report(), the same pattern.
IX_SANITIZER_RE='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Undefined|Leak)'

# ix_sanitizer_found FILE...: true when one of the files has a sanitizer report
ix_sanitizer_found() {
	grep -qE "$IX_SANITIZER_RE" "$@" 2>/dev/null
}

# ix_sanitizer_show FILE...: the reports' first lines, on stderr
ix_sanitizer_show() {
	grep -h -m 20 -A 12 -E "$IX_SANITIZER_RE" "$@" 2>/dev/null | head -60 >&2
}
