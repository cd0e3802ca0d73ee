#!/usr/bin/env bash
# The line `make test` ends each build with: test cases, not ctest entries —
# every cmocka case inside each test binary, each command-line script as one
# case — passed, failed and skipped, with why they were skipped. Reads the
# log ctest keeps of its last run (<build>/Testing/Temporary/LastTest.log).
set -euo pipefail
build=${1:?usage: test-summary.sh BUILD_DIR}
log=$build/Testing/Temporary/LastTest.log
[ -f "$log" ] || { echo "test-summary: no $log (ctest has not run)" >&2; exit 1; }
awk -v build="$(basename "$build")" '
function flush() {
    if (name == "") return
    if (cases) { passed += p; failed += f; skipped += s; if (!ok && f == 0) failed++ }
    else if (!ok) failed++
    else if (whole_skip) { skipped++; reason[why]++ }
    else passed++
    name = ""
}
/^[0-9]+\/[0-9]+ Testing: / { flush(); name = $3; cases = 0; p = f = s = 0; ok = 0; whole_skip = 0; next }
name == "" { next }
/^Test Passed\./ { ok = 1; next }
/^Test Failed/ { ok = 0; next }
/^\[  PASSED  \] [0-9]+ test/ { cases = 1; p = $4; next }
/^\[  FAILED  \] [0-9]+ test/ { cases = 1; f = $4; next }
/^\[  SKIPPED \] [0-9]+ test/ { cases = 1; s = $4; next }
/^ *skipped[: ]/ {
    line = $0; sub(/^ *skipped:? */, "", line)
    if (line ~ /shared|fixture|testdata/) line = "../shared/testdata absent"
    if (name ~ /^cli_/ && $0 ~ /^skipped:/) { whole_skip = 1; why = line }
    else if (name ~ /^test_/) reason[line]++
}
END {
    flush()
    n = 0; text = ""
    for (r in reason) { if (n < 4) text = text (n ? "; " : "") r; n++ }
    if (n > 4) text = text "; ..."
    printf "%s: %d passed, %d failed, %d skipped%s\n", build, passed, failed, skipped,
           skipped ? " (" text ")" : ""
}' "$log"
