#!/usr/bin/env bash
# Settings that cannot be understood warn once, naming the variable and what it
# accepts, instead of silently falling back.
set -euo pipefail
bin=$1
scratch=$2
mkdir -p "$scratch"
fail() { echo "env_warnings.sh: $*" >&2; exit 1; }
LIBREYOLO_KERNELS=avx3 "$bin" kernels >/dev/null 2>"$scratch/k.err"
grep -q "LIBREYOLO_KERNELS='avx3' names no implementation here; it accepts reference, off or one of: " \
    "$scratch/k.err" || fail "no LIBREYOLO_KERNELS warning: $(cat "$scratch/k.err")"
[ "$(grep -c "LIBREYOLO_KERNELS=" "$scratch/k.err")" -eq 1 ] || fail "the warning is not once"
LIBREYOLO_THREADS=two "$bin" kernels >/dev/null 2>"$scratch/t.err"
grep -qF "LIBREYOLO_THREADS='two' is not a thread count (a whole number from 1 to 1024)" \
    "$scratch/t.err" || fail "no LIBREYOLO_THREADS warning: $(cat "$scratch/t.err")"
LIBREYOLO_LOG=loud LIBREYOLO_KERNELS=avx3 "$bin" kernels >/dev/null 2>"$scratch/l.err"
grep -qF "LIBREYOLO_LOG='loud' is not a level (debug, info, warning, error, off)" "$scratch/l.err" ||
    fail "no LIBREYOLO_LOG warning: $(cat "$scratch/l.err")"
LIBREYOLO_KERNELS=reference LIBREYOLO_THREADS=2 LIBREYOLO_LOG=warning "$bin" kernels >/dev/null \
    2>"$scratch/ok.err"
[ ! -s "$scratch/ok.err" ] || fail "warned about valid settings: $(cat "$scratch/ok.err")"
echo "env_warnings: ok"
