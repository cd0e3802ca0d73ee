// SPDX-License-Identifier: MIT
// libreyolo::ms_deform_attn.out for ExecuTorch's kernel registry: the custom
// operator our exporter writes with --msda custom (schema in
// docs/attention.md), computed by the library's ms_deform_attn slot through
// its public call ly_ms_deform_attn (libreyolo/msda.h): the C reference's
// numbers, by the AVX2 provider where the CPU has it. Link this object (or its
// archive with --whole-archive: nothing refers to it, the registration is a
// static initializer) and libreyolo into the app; README.md says how.
#include <executorch/extension/threadpool/threadpool.h>
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <optional>

#include "libreyolo/msda.h"

namespace
{
using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;

// A view of an ExecuTorch tensor (contiguous, as the exporter plans them).
bool view_of(const Tensor &t, ly_tensor *out)
{
    if (t.dim() > LY_MAX_DIMS) return false;
    if (t.scalar_type() == ScalarType::Float)
        out->dtype = LY_F32;
    else if (t.scalar_type() == ScalarType::Long)
        out->dtype = LY_I64;
    else
        return false;
    out->data = const_cast<void *>(t.const_data_ptr());
    out->ndim = static_cast<int>(t.dim());
    for (int i = 0; i < out->ndim; i++)
        out->shape[i] = t.size(i);
    return true;
}

Tensor &ms_deform_attn_out(KernelRuntimeContext &ctx, const Tensor &value,
                           const Tensor &spatial_shapes, const Tensor &sampling_locations,
                           const Tensor &attention_weights, const std::optional<Tensor> &num_points,
                           int64_t mode, Tensor &out)
{
    ly_tensor v{}, s{}, l{}, a{}, n{}, o{};
    bool ok = view_of(value, &v) && view_of(spatial_shapes, &s) &&
              view_of(sampling_locations, &l) && view_of(attention_weights, &a) &&
              view_of(out, &o) && (!num_points.has_value() || view_of(*num_points, &n));
    ET_KERNEL_CHECK_MSG(ctx, ok, InvalidArgument, out,
                        "libreyolo::ms_deform_attn.out: operands must be float or int64 tensors");
    // as many threads as ExecuTorch's own pool has (what the app set for the
    // XNNPACK delegate), on the library's workers
    auto *pool = executorch::extension::threadpool::get_threadpool();
    int threads = pool ? static_cast<int>(pool->get_thread_count()) : 1;
    ly_status st = ly_ms_deform_attn(&v, &s, &l, &a, num_points.has_value() ? &n : nullptr,
                                     static_cast<int>(mode), threads > 0 ? threads : 1, &o);
    ET_KERNEL_CHECK_MSG(ctx, st == LY_OK, InvalidArgument, out, "libreyolo::ms_deform_attn.out: %s",
                        ly_last_error());
    return out;
}

// Boxed as ExecuTorch's code generator boxes an out variant: the six
// arguments, the out tensor, then the return value (aliasing out).
void boxed(KernelRuntimeContext &ctx, Span<EValue *> stack)
{
    ET_KERNEL_CHECK_MSG(ctx, stack.size() == 8, InvalidProgram, /*void*/,
                        "libreyolo::ms_deform_attn.out expects 8 boxed args, got %zu",
                        stack.size());
    ms_deform_attn_out(ctx, stack[0]->toTensor(), stack[1]->toTensor(), stack[2]->toTensor(),
                       stack[3]->toTensor(), stack[4]->toOptional<Tensor>(), stack[5]->toInt(),
                       stack[6]->toTensor());
}

const executorch::runtime::Kernel kernels[] = {
    executorch::runtime::Kernel("libreyolo::ms_deform_attn.out", boxed),
};
const auto registered = executorch::runtime::register_kernels(
    Span<const executorch::runtime::Kernel>(kernels, sizeof kernels / sizeof *kernels));
} // namespace
