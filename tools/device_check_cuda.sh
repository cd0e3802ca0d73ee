#!/usr/bin/env bash
# Device check of the CUDA provider (plugins/cuda, libreyolo_kernels_cuda.so) on a
# machine with an NVIDIA GPU, as one script:
#   1. the GPU and driver;
#   2. a Release build of the command, the plugin and its two tests;
#   3. `libreyolo kernels --all`: the plugin registers and is eligible;
#   4. the CPU run of the kernels' arithmetic against the reference (test_cuda_kernels);
#   5. parity on the GPU, forward and backward, bit for bit against the reference,
#      and the timings (test_cuda_plugin with LY_CUDA_BENCH=1);
#   6. the parity harness (`libreyolo kernels check`) on the cuda implementation;
#   7. `libreyolo bench kernels --slot ms_deform_attn` with the plugin loaded.
#
# Usage: tools/device_check_cuda.sh [BUILD_DIR]    (default: build-devcheck)
#   REBUILD=0 reuses an existing build; CUDA_ARCHS=90 builds for one architecture
#   only (quicker; the default builds every architecture the release carries).
# Logs go to $OUT when set (the device runner collects it), else to BUILD_DIR.
# Exit status: 0 when every step passed, else the number of failed steps.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-devcheck}
logs=${OUT:-$build}
mkdir -p "$build" "$logs"
jobs=$(nproc 2>/dev/null || echo 4)
failed=0

step() { printf '\n=== %s\n' "$*"; }
fail() {
    echo "FAILED: $*"
    failed=$((failed + 1))
}

step "1. GPU"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader ||
        fail "nvidia-smi"
else
    echo "nvidia-smi not found"
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc" --version | tail -2 || fail "nvcc not found"

step "2. build ($build)"
if [ "${REBUILD:-1}" != 0 ] || [ ! -x "$build/tests/test_cuda_plugin" ]; then
    archs=()
    [ -n "${CUDA_ARCHS:-}" ] && archs=(-DLIBREYOLO_CUDA_ARCHS="$CUDA_ARCHS")
    if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLIBREYOLO_WITH_CUDA=ON \
        "${archs[@]}" >"$logs/configure.log" 2>&1; then
        tail -30 "$logs/configure.log"
        fail "configure"
        exit "$failed"
    fi
    if ! cmake --build "$build" -j"$jobs" --target libreyolo libreyolo_kernels_cuda \
        test_cuda_plugin test_cuda_kernels >"$logs/build.log" 2>&1; then
        grep -E 'error|Error' "$logs/build.log" | head -30
        fail "build"
        exit "$failed"
    fi
fi
plugin=$build/plugins/libreyolo_kernels_cuda.so
[ -f "$plugin" ] || {
    fail "no $plugin"
    exit "$failed"
}
ls -l "$plugin"
sha256sum "$plugin"
echo "pinned in src/kernels/hub/kernels.lock.json:"
grep -o '"sha256": "[0-9a-f]*"' "$root/src/kernels/hub/kernels.lock.json"

export LIBREYOLO_KERNELS_PATH=$build/plugins

step "3. libreyolo kernels --all (ms_deform_attn rows)"
"$build/libreyolo" kernels --all | grep -E '^ms_deform_attn|^ +\*? *(cuda|avx2|reference) ' |
    head -12
"$build/libreyolo" kernels --all | grep -qE ' cuda +eligible' || fail "cuda is not eligible"

step "4. the kernels' arithmetic on the CPU (test_cuda_kernels)"
"$build/tests/test_cuda_kernels" >"$logs/test_cuda_kernels.log" 2>&1 || {
    tail -20 "$logs/test_cuda_kernels.log"
    fail "test_cuda_kernels"
}
tail -1 "$logs/test_cuda_kernels.log"

step "5. GPU parity (bit-identical to the reference) and timings"
LY_CUDA_BENCH=1 "$build/tests/test_cuda_plugin" 2>&1 | tee "$logs/test_cuda_plugin.log" |
    grep -vE '^\[ (RUN|      OK) '
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "test_cuda_plugin"
grep -q 'SKIPPED.*test_parity' "$logs/test_cuda_plugin.log" && fail "parity skipped: no device?"

step "6. libreyolo kernels check --impl cuda"
for slot in ms_deform_attn ms_deform_attn_backward; do
    "$build/libreyolo" kernels check --slot "$slot" --impl cuda --full 2>&1 | tail -4 ||
        fail "kernels check $slot"
done

step "7. libreyolo bench kernels --slot ms_deform_attn (cpu providers and cuda)"
timeout 300 "$build/libreyolo" bench kernels --slot ms_deform_attn --no-peer 2>&1 | tail -30 ||
    echo "(bench kernels failed or timed out; the timings of step 5 stand)"

step "done: $failed failed step(s)"
exit "$failed"
