// Registers ExecuTorch's own portable kernels that the DETR programs list
// beyond the peer kit's et_run_ops (../shared/tools/peers/executorch), each
// compiled from the tag's kernels/portable/cpu source (build.sh) and boxed as
// ExecuTorch's codegen boxes it: the arguments, the out tensor, then one
// stack slot for the return value (aliasing out):
//   aten::grid_sampler_2d.out  (the portable form of ms_deform_attn)  5 args
//   aten::avg_pool2d.out       (DEIMv2's backbone)                    7 args
//   aten::exp.out, sin.out, cos.out  (RF-DETR's sine embedding)       1 arg
// This is what an app that links ExecuTorch's portable kernel library gets;
// ExecuTorch's code generator needs a newer PyTorch than Debian's, so the
// check registers the kernels a program lists by hand.
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <optional>

namespace torch
{
namespace executor
{
namespace native
{
Tensor &grid_sampler_2d_out(KernelRuntimeContext &ctx, const Tensor &input, const Tensor &grid,
                            int64_t interpolation_mode, int64_t padding_mode, bool align_corners,
                            Tensor &out);
Tensor &avg_pool2d_out(KernelRuntimeContext &ctx, const Tensor &in,
                       executorch::aten::ArrayRef<int64_t> kernel_size,
                       executorch::aten::ArrayRef<int64_t> stride,
                       executorch::aten::ArrayRef<int64_t> padding, bool ceil_mode,
                       bool count_include_pad, std::optional<int64_t> divisor_override,
                       Tensor &out);
Tensor &exp_out(KernelRuntimeContext &ctx, const Tensor &in, Tensor &out);
Tensor &sin_out(KernelRuntimeContext &ctx, const Tensor &in, Tensor &out);
Tensor &cos_out(KernelRuntimeContext &ctx, const Tensor &in, Tensor &out);
} // namespace native
} // namespace executor
} // namespace torch

namespace
{
using executorch::aten::Tensor;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;
namespace native = torch::executor::native;

#define EXPECT_ARGS(name, n)                                                                       \
    ET_KERNEL_CHECK_MSG(ctx, stack.size() == (n), InvalidProgram, /*void*/,                        \
                        name " expects %d boxed args, got %zu", (int)(n), stack.size())

void grid_sampler_2d(KernelRuntimeContext &ctx, Span<EValue *> stack)
{
    EXPECT_ARGS("grid_sampler_2d.out", 7);
    native::grid_sampler_2d_out(ctx, stack[0]->toTensor(), stack[1]->toTensor(), stack[2]->toInt(),
                                stack[3]->toInt(), stack[4]->toBool(), stack[5]->toTensor());
}
void avg_pool2d(KernelRuntimeContext &ctx, Span<EValue *> stack)
{
    EXPECT_ARGS("avg_pool2d.out", 9);
    native::avg_pool2d_out(ctx, stack[0]->toTensor(), stack[1]->toIntList(), stack[2]->toIntList(),
                           stack[3]->toIntList(), stack[4]->toBool(), stack[5]->toBool(),
                           stack[6]->toOptional<int64_t>(), stack[7]->toTensor());
}
void exp_(KernelRuntimeContext &ctx, Span<EValue *> stack)
{
    EXPECT_ARGS("exp.out", 3);
    native::exp_out(ctx, stack[0]->toTensor(), stack[1]->toTensor());
}
void sin_(KernelRuntimeContext &ctx, Span<EValue *> stack)
{
    EXPECT_ARGS("sin.out", 3);
    native::sin_out(ctx, stack[0]->toTensor(), stack[1]->toTensor());
}
void cos_(KernelRuntimeContext &ctx, Span<EValue *> stack)
{
    EXPECT_ARGS("cos.out", 3);
    native::cos_out(ctx, stack[0]->toTensor(), stack[1]->toTensor());
}

const executorch::runtime::Kernel kernels[] = {
    executorch::runtime::Kernel("aten::grid_sampler_2d.out", grid_sampler_2d),
    executorch::runtime::Kernel("aten::avg_pool2d.out", avg_pool2d),
    executorch::runtime::Kernel("aten::exp.out", exp_),
    executorch::runtime::Kernel("aten::sin.out", sin_),
    executorch::runtime::Kernel("aten::cos.out", cos_),
};
const auto reg = executorch::runtime::register_kernels(
    Span<const executorch::runtime::Kernel>(kernels, sizeof kernels / sizeof *kernels));
} // namespace
