#!/usr/bin/env bash
# Builds et_run_detr: ExecuTorch's own runtime with its XNNPACK backend and the
# portable kernels the DETR programs list (those of ../shared/tools/peers/
# executorch's et_run_ops, plus grid_sampler_2d, avg_pool2d, exp, sin and cos:
# register_detr_ops.cpp), from an ExecuTorch tree that kit has built:
#
#   ../shared/tools/peers/executorch/build.sh v1.4.1      # once: $ET_ROOT/v1.4.1/{executorch,build}
#   tools/executorch/build.sh [TAG]                        # -> $ET_ROOT/TAG/build/et_run_detr
#   RUNNER=et_run_detr TAG=v1.4.1 ../shared/tools/peers/executorch/run.sh MODEL.pte IN.npy OUT [REF]
#
# With libreyolo built (build/ or LY_BUILD=), it also builds our kernel library
# for the custom operator (libreyolo_executorch_kernels.a, plugins/executorch/)
# and et_run_detr_custom, the runner with it linked in.
#
# Nothing of ExecuTorch is copied here: its sources and libraries stay under
# $ET_ROOT (default /tmp/et). The runner (et_run.cpp) and the other
# registrations are the kit's.
set -euo pipefail
TAG=${1:-v1.4.1}
ET_ROOT=${ET_ROOT:-/tmp/et}
HERE=$(cd "$(dirname "$0")" && pwd)
KIT=${KIT:-$HERE/../../../shared/tools/peers/executorch}
SRC=$ET_ROOT/$TAG/executorch
B=$ET_ROOT/$TAG/build
[ -f "$B/executorch/libexecutorch.a" ] || {
  echo "build.sh: no ExecuTorch build at $B; run $KIT/build.sh $TAG first" >&2
  exit 2
}
[ -f "$KIT/et_run.cpp" ] || { echo "build.sh: the peer kit is not at $KIT (set KIT=)" >&2; exit 2; }
P=$SRC/kernels/portable/cpu
OUT=$B/et_run_detr.obj
mkdir -p "$OUT"
DEFS="-DC10_USING_CUSTOM_GENERATED_MACROS -DCPUINFO_SUPPORTED_PLATFORM=1 -DET_USE_THREADPOOL -DEXECUTORCH_THREADPOOL_USE_PERFORMANCE_CORES -DXNN_LOG_LEVEL=0"
INC="-I$SRC/.. -I$SRC/runtime/core/portable_type/c10 -I$B/executorch/include -I$SRC/backends/xnnpack/third-party/pthreadpool/include -I$SRC/backends/xnnpack/third-party/cpuinfo/include -I$SRC/backends/xnnpack/third-party/XNNPACK/include -I$B/schema/include -I$SRC/third-party/flatbuffers/include"
SOURCES=("$KIT/et_run.cpp" "$KIT/register_upsample.cpp" "$KIT/register_ops.cpp"
  "$HERE/register_detr_ops.cpp"
  "$P/op_upsample_nearest2d.cpp" "$P/util/upsample_util.cpp"
  "$P/op_native_layer_norm.cpp" "$P/util/normalization_ops_util.cpp"
  "$P/op_topk.cpp" "$P/op_index_select.cpp" "$P/util/index_util.cpp"
  "$P/op_view_copy.cpp" "$P/util/copy_ops_util.cpp"
  "$P/op_grid_sampler_2d.cpp" "$P/util/grid_sampler_2d_util.cpp"
  "$P/op_avg_pool2d.cpp" "$P/util/kernel_ops_util.cpp"
  "$P/op_exp.cpp" "$P/op_sin.cpp" "$P/op_cos.cpp"
  "$P/pattern/unary_ufunc_realhbbf16_to_floathbf16.cpp")
OBJS=()
pids=()
for s in "${SOURCES[@]}"; do
  o=$OUT/$(echo "$s" | sed 's|/|_|g').o
  OBJS+=("$o")
  if [ ! -f "$o" ] || [ "$s" -nt "$o" ]; then
    c++ -O3 -DNDEBUG -Wno-deprecated-declarations -fPIC -pthread -std=gnu++17 $DEFS $INC -c "$s" -o "$o" &
    pids+=($!)
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
L=$B/executorch
c++ -O3 -o "$B/et_run_detr" "${OBJS[@]}" \
  -Wl,--whole-archive "$L/libexecutorch.a" "$L/backends/xnnpack/libxnnpack_backend.a" -Wl,--no-whole-archive \
  "$L/extension/data_loader/libextension_data_loader.a" "$L/extension/threadpool/libextension_threadpool.a" \
  "$L/libexecutorch_core.a" -ldl "$L/backends/xnnpack/third-party/XNNPACK/libXNNPACK.a" \
  "$L/backends/xnnpack/third-party/XNNPACK/libxnnpack-microkernels-prod.a" \
  "$L/backends/xnnpack/third-party/cpuinfo/libcpuinfo.a" \
  "$L/backends/xnnpack/third-party/pthreadpool/libpthreadpool.a" -lm -pthread
echo "$B/et_run_detr"

# Our kernel library for the custom operator (plugins/executorch/): an archive
# an app links with --whole-archive beside libreyolo, and et_run_detr_custom,
# the same runner with it, for programs exported with --msda custom.
LY_BUILD=${LY_BUILD:-$HERE/../../build}
if [ -f "$LY_BUILD/libreyolo.so" ]; then
  k=$OUT/ms_deform_attn_kernel.o
  c++ -O3 -DNDEBUG -Wno-deprecated-declarations -fPIC -pthread -std=gnu++17 $DEFS $INC \
    -I"$HERE/../../include" -c "$HERE/../../plugins/executorch/ms_deform_attn_kernel.cpp" -o "$k"
  ar rcs "$B/libreyolo_executorch_kernels.a" "$k"
  c++ -O3 -o "$B/et_run_detr_custom" "${OBJS[@]}" \
    -Wl,--whole-archive "$L/libexecutorch.a" "$L/backends/xnnpack/libxnnpack_backend.a" \
    "$B/libreyolo_executorch_kernels.a" -Wl,--no-whole-archive \
    "$L/extension/data_loader/libextension_data_loader.a" "$L/extension/threadpool/libextension_threadpool.a" \
    "$L/libexecutorch_core.a" -ldl "$L/backends/xnnpack/third-party/XNNPACK/libXNNPACK.a" \
    "$L/backends/xnnpack/third-party/XNNPACK/libxnnpack-microkernels-prod.a" \
    "$L/backends/xnnpack/third-party/cpuinfo/libcpuinfo.a" \
    "$L/backends/xnnpack/third-party/pthreadpool/libpthreadpool.a" \
    -L"$LY_BUILD" -Wl,-rpath,"$(cd "$LY_BUILD" && pwd)" -lreyolo -lm -pthread
  echo "$B/libreyolo_executorch_kernels.a"
  echo "$B/et_run_detr_custom"
else
  echo "build.sh: no libreyolo.so in $LY_BUILD (make build first; LY_BUILD=): the kernel library is not built" >&2
fi
