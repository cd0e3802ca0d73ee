#!/usr/bin/env bash
# Build libreyolo (Release) if needed, then run `libreyolo bench kernels` with the
# given arguments, e.g.  bench/run.sh --slot fake_quant_fp8 --threads 2 --json
# BUILD=<dir> picks the build directory (default: build/ at the repository root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-$root/build}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target libreyolo -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
exec "$build/libreyolo" bench kernels "$@"
