/* SPDX-License-Identifier: MIT */
/*
 * The AVX2+FMA provider: every quant slot, ms_deform_attn (forward and
 * backward), the fused sdpa, matmul and softmax (last axis), max_pool2d, avg_pool2d
 * and resize_bilinear2d (channel-blocked maps), topk (a few largest of contiguous rows), all
 * bit-identical to their references; SiLU and sigmoid (registered with the AVX-512 kernels, after
 * oneDNN's) within their slots' tolerance; GELU within its slot's tolerance (erf by a polynomial,
 * not glibc's); layer_norm and rms_norm within theirs (the element work in float, a row's sixteen
 * lane sums in double: within a few float ulps of the reference). This file is compiled for the
 * baseline ISA (registration and predicates run on every CPU, before anyone knows it has AVX2); the
 * kernels live in *_avx2.c.
 */
#include "core/core.h"
#include "ops/msda/msda_internal.h"
#include "ops/sdpa/sdpa_internal.h"
#include "providers/avx2/pool.h"
#include "providers/avx2/quant/quant_providers.h"
#include "providers/builtin.h"

ly_status ly_avx2_gelu(const ly_kernel_call *call);
ly_status ly_avx2_matmul(const ly_kernel_call *call);
ly_status ly_avx2_softmax(const ly_kernel_call *call);
ly_status ly_avx2_layer_norm(const ly_kernel_call *call);
ly_status ly_avx2_permute(const ly_kernel_call *call);
bool ly_avx2_permute_takes(const ly_kernel_call *call);
ly_status ly_avx2_topk(const ly_kernel_call *call);
bool ly_avx2_topk_takes(const ly_kernel_call *call);
ly_status ly_avx2_rms_norm(const ly_kernel_call *call);
ly_status ly_avx2_max_pool2d(const ly_kernel_call *call);
ly_status ly_avx2_avg_pool2d(const ly_kernel_call *call);
extern const ly_kernel_stateful ly_avx2_max_pool2d_stateful;
extern const ly_kernel_stateful ly_avx2_avg_pool2d_stateful;
ly_status ly_avx2_resize_plain(const ly_kernel_call *call);
ly_status ly_conv2d_graph_only(const ly_kernel_call *call);
extern const ly_kernel_stateful ly_avx512_conv2d_thin_stateful;
extern const ly_kernel_stateful ly_avx2_conv2d_thin_stateful;
extern const ly_kernel_stateful ly_avx2_conv2d_winograd_stateful;
extern const ly_kernel_stateful ly_avx512_conv2d_winograd_stateful;
ly_status ly_avx512_conv2d_stem(const ly_kernel_call *call);
ly_status ly_avx512_silu(const ly_kernel_call *call);
ly_status ly_avx512_sigmoid(const ly_kernel_call *call);
ly_status ly_avx2_silu(const ly_kernel_call *call);
ly_status ly_avx2_sigmoid(const ly_kernel_call *call);
ly_status ly_avx512_dfl(const ly_kernel_call *call);
bool ly_avx512_dfl_fits(const ly_kernel_call *call);
extern const ly_kernel_stateful ly_avx512_conv2d_stem_stateful;
extern const ly_kernel_stateful ly_avx2_resize_stateful;

#ifdef LY_HAVE_AVX2_PROVIDERS

/* The quant kernels handle every input their contracts accept (any shape,
 * tails, empty tensors), so the predicate only asks for the instruction sets. */
static ly_status avx2_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    (void)call;
    if (cpu && cpu->avx2 && cpu->fma) return LY_OK;
    *why_not = "CPU or OS lacks AVX2/FMA";
    return LY_E_DECLINED;
}

/* Attention: also declined while a graph is captured for export. The capture
 * is asked only about an actual call: a machine-wide answer (call == NULL) is
 * cached by the registry. */
static ly_status attention_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                     const char **why_not)
{
    if (call && ly_kernels_capturing()) {
        *why_not = "a graph is being captured for export (portable math only)";
        return LY_E_DECLINED;
    }
    return avx2_predicate(call, cpu, why_not);
}

/* grid_sample: its gathers take 32-bit offsets across eight channels. */
static ly_status grid_sample_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                       const char **why_not)
{
    ly_status st = avx2_predicate(call, cpu, why_not);
    if (st != LY_OK || !call || !call->in[0]) return st;
    const ly_tensor *x = call->in[0];
    if (x->ndim == 4 && x->shape[1] * x->shape[2] * x->shape[3] <= INT32_MAX) return LY_OK;
    *why_not = "an input of 2^31 or more elements per image";
    return LY_E_DECLINED;
}

/* permute: 4-byte elements whose innermost axis moves (a transpose); the
 * reference copies whole rows where it stays. */
static ly_status permute_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                   const char **why_not)
{
    ly_status st = avx2_predicate(call, cpu, why_not);
    if (st != LY_OK || !call || !call->in[0]) return st;
    if (ly_avx2_permute_takes(call)) return LY_OK;
    *why_not = "not 4-byte elements";
    return LY_E_DECLINED;
}

static ly_status topk_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    ly_status st = avx2_predicate(call, cpu, why_not);
    if (st != LY_OK || !call || !call->in[0]) return st;
    if (ly_avx2_topk_takes(call)) return LY_OK;
    *why_not = "not the largest k <= 16 of f32 rows along the last axis, k <= extent / 8";
    return LY_E_DECLINED;
}

/* softmax along the last axis only (rows contiguous). */
static ly_status softmax_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                   const char **why_not)
{
    if (call && call->in[0] && call->params) {
        int64_t axis = LY_PARAMS(call, ly_axis_params)->axis, ndim = call->in[0]->ndim;
        if (axis != -1 && axis != ndim - 1) {
            *why_not = "softmax over an axis other than the last";
            return LY_E_DECLINED;
        }
    }
    return avx2_predicate(call, cpu, why_not);
}

/* Pools: any window on maps of whole 8-channel blocks (in a graph's blocked
 * layouts), or at column stride 1 on plain maps (max: windows of up to 9
 * elements, the reference's single-pass order, so even a NaN's payload is the
 * same); a plain call outside those declines at run time. */
static ly_status pool_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not, bool max)
{
    if (call && call->params && call->in[0]) {
        const ly_pool2d_params *p = LY_PARAMS(call, ly_pool2d_params);
        bool blocks = call->in[0]->ndim == 4 && call->in[0]->shape[1] % 8 == 0;
        bool plain = ly_avx2_pool_plain_takes(p, max);
        if (!blocks && !plain) {
            *why_not = max ? "not a map of whole 8-channel blocks, and a window over 9 elements "
                             "or a column stride other than 1"
                           : "not a map of whole 8-channel blocks, and a column stride other "
                             "than 1";
            return LY_E_DECLINED;
        }
    }
    return avx2_predicate(call, cpu, why_not);
}

static ly_status max_pool_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    return pool_predicate(call, cpu, why_not, true);
}

static ly_status avg_pool_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    return pool_predicate(call, cpu, why_not, false);
}

/* resize_bilinear2d on maps of whole 8-channel blocks (in a graph's blocked
 * layouts; plain maps go on to the reference). */
static ly_status resize_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                  const char **why_not)
{
    if (call && call->in[0] && (call->in[0]->ndim != 4 || call->in[0]->shape[1] % 8 != 0)) {
        *why_not = "not a map of whole 8-channel blocks";
        return LY_E_DECLINED;
    }
    return avx2_predicate(call, cpu, why_not);
}

void ly_avx2_register(void)
{
    static const struct {
        ly_op op;
        ly_kernel_fn fn;
    } quant[] = {
        {LY_OP_FAKE_QUANT_INT8_PER_CHANNEL, ly_avx2_fake_quant_int8_per_channel},
        {LY_OP_FAKE_QUANT_INT8_AFFINE, ly_avx2_fake_quant_int8_affine},
        {LY_OP_FAKE_QUANT_FP8, ly_avx2_fake_quant_fp8},
        {LY_OP_FAKE_QUANT_INT_GROUPED, ly_avx2_fake_quant_int_grouped},
        {LY_OP_FAKE_QUANT_NVFP4_WEIGHT, ly_avx2_fake_quant_nvfp4_weight},
        {LY_OP_FAKE_QUANT_NVFP4_DYNAMIC, ly_avx2_fake_quant_nvfp4_dynamic},
        {LY_OP_FAKE_QUANT_MXFP4_WEIGHT, ly_avx2_fake_quant_mxfp4_weight},
        {LY_OP_FAKE_QUANT_MXFP4_DYNAMIC, ly_avx2_fake_quant_mxfp4_dynamic},
        {LY_OP_UNPACK_INT_GROUPED, ly_avx2_unpack_int_grouped},
        {LY_OP_UNPACK_NVFP4, ly_avx2_unpack_nvfp4},
        {LY_OP_FAKE_QUANT_INT8_PER_CHANNEL_BACKWARD, ly_avx2_fake_quant_int8_per_channel_backward},
        {LY_OP_FAKE_QUANT_INT8_AFFINE_BACKWARD, ly_avx2_fake_quant_int8_affine_backward},
        {LY_OP_FAKE_QUANT_FP8_BACKWARD, ly_avx2_fake_quant_fp8_backward},
        {LY_OP_FAKE_QUANT_INT_GROUPED_BACKWARD, ly_avx2_fake_quant_int_grouped_backward},
        {LY_OP_FAKE_QUANT_NVFP4_WEIGHT_BACKWARD, ly_avx2_fake_quant_nvfp4_weight_backward},
        {LY_OP_FAKE_QUANT_NVFP4_DYNAMIC_BACKWARD, ly_avx2_fake_quant_nvfp4_dynamic_backward},
        {LY_OP_FAKE_QUANT_MXFP4_WEIGHT_BACKWARD, ly_avx2_fake_quant_mxfp4_weight_backward},
        {LY_OP_FAKE_QUANT_MXFP4_DYNAMIC_BACKWARD, ly_avx2_fake_quant_mxfp4_dynamic_backward},
    };
    for (size_t i = 0; i < sizeof quant / sizeof quant[0]; i++)
        ly_provider_add(quant[i].op, "avx2", quant[i].fn, avx2_predicate, NULL);
    ly_provider_add(LY_OP_MS_DEFORM_ATTN, "avx2", ly_msda_avx2_forward, attention_predicate, NULL);
    ly_provider_add(LY_OP_MS_DEFORM_ATTN_BACKWARD, "avx2", ly_msda_avx2_backward,
                    attention_predicate, NULL);
    ly_provider_add(LY_OP_SDPA, LY_SDPA_FUSED_AVX2, ly_sdpa_avx2_fused, attention_predicate, NULL);
    ly_provider_add(LY_OP_GELU, "avx2", ly_avx2_gelu, avx2_predicate, NULL);
    ly_provider_add(LY_OP_MATMUL, "avx2", ly_avx2_matmul, avx2_predicate, NULL);
    ly_provider_add(LY_OP_SOFTMAX, "avx2", ly_avx2_softmax, softmax_predicate, NULL);
    ly_provider_add(LY_OP_LAYER_NORM, "avx2", ly_avx2_layer_norm, avx2_predicate, NULL);
    ly_provider_add(LY_OP_RMS_NORM, "avx2", ly_avx2_rms_norm, avx2_predicate, NULL);
    ly_provider_add(LY_OP_PERMUTE, "avx2", ly_avx2_permute, permute_predicate, NULL);
    ly_provider_add(LY_OP_TOPK, "avx2", ly_avx2_topk, topk_predicate, NULL);
    ly_provider_add(LY_OP_MAX_POOL2D, "avx2", ly_avx2_max_pool2d, max_pool_predicate,
                    &ly_avx2_max_pool2d_stateful);
    ly_provider_add(LY_OP_AVG_POOL2D, "avx2", ly_avx2_avg_pool2d, avg_pool_predicate,
                    &ly_avx2_avg_pool2d_stateful);
    ly_provider_add(LY_OP_GRID_SAMPLE, "avx2", ly_grid_sample_avx2, grid_sample_predicate, NULL);
    ly_provider_add(LY_OP_RESIZE_BILINEAR2D, "avx2", ly_avx2_resize_plain, resize_predicate,
                    &ly_avx2_resize_stateful);
}

static ly_status avx512_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                  const char **why_not)
{
    if (cpu && !cpu->avx512f) {
        *why_not = "CPU or OS lacks AVX-512";
        return LY_E_DECLINED;
    }
    return avx2_predicate(call, cpu, why_not);
}

/* 3x3 stride-1 padding-1 convolutions to `out` channels from at most 64 (a
 * multiple of 8), on blocks of 8 (conv2d_thin_avx2.c). */
static bool thin_shape(const ly_kernel_call *call, int64_t out)
{
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = LY_PARAMS(call, ly_conv2d_params);
    return x && w && x->ndim == 4 && w->ndim == 4 && w->shape[0] == out && x->shape[1] % 8 == 0 &&
           x->shape[1] <= 64 && w->shape[2] == 3 && w->shape[3] == 3 && p->groups == 1 &&
           p->stride[0] == 1 && p->stride[1] == 1 && p->padding[0] == 1 && p->padding[1] == 1 &&
           p->dilation[0] == 1 && p->dilation[1] == 1 && !p->post_affine &&
           p->activation <= LY_ACT_LEAKY_RELU;
}

static ly_status thin_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    ly_status st = avx512_predicate(call, cpu, why_not);
    if (st != LY_OK || !call) return st;
    if (!thin_shape(call, 24)) {
        *why_not = "not a 3x3 stride-1 padding-1 convolution to 24 channels from at most 64 "
                   "(a multiple of 8), without groups or post-affine";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

static ly_status thin8_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                 const char **why_not)
{
    ly_status st = avx2_predicate(call, cpu, why_not);
    if (st != LY_OK || !call) return st;
    if (!thin_shape(call, 16)) {
        *why_not = "not a 3x3 stride-1 padding-1 convolution to 16 channels from at most 64 "
                   "(a multiple of 8), without groups or post-affine";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

/* What both Winograd kernels (conv2d_winograd_avx2.c) take: 3x3 stride-1
 * padding-1 convolutions between multiples of `block` channels (a register's
 * lanes), on any map size, with weights of at most 1 MiB as oneDNN's Winograd
 * (the transformed copy is 4x larger). */
static ly_status winograd_shape(const ly_kernel_call *call, int64_t block, const char **why_not)
{
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = LY_PARAMS(call, ly_conv2d_params);
    int64_t groups = p->groups > 0 ? p->groups : 0;
    bool shape = x && w && x->ndim == 4 && w->ndim == 4 && groups > 0 &&
                 x->shape[1] % (groups * block) == 0 && w->shape[0] % (groups * block) == 0 &&
                 w->shape[1] * groups == x->shape[1] && w->shape[2] == 3 && w->shape[3] == 3 &&
                 p->stride[0] == 1 && p->stride[1] == 1 && p->padding[0] == 1 &&
                 p->padding[1] == 1 && p->dilation[0] == 1 && p->dilation[1] == 1 &&
                 !p->post_affine && p->activation <= LY_ACT_LEAKY_RELU;
    if (!shape) {
        *why_not = block == 8 ? "not a 3x3 stride-1 padding-1 convolution between multiples of 8 "
                                "channels a group, without post-affine"
                              : "not a 3x3 stride-1 padding-1 convolution between multiples of 16 "
                                "channels a group, without post-affine";
        return LY_E_DECLINED;
    }
    if (ly_tensor_numel(w) * (int64_t)sizeof(float) > (1 << 20)) {
        *why_not = "weights over 1 MiB (the transformed copy is 4x larger)";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

/* avx2_winograd on AVX2 CPUs (faster than oneDNN's jit:avx2 from
 * LibreYOLO9t's 32 -> 32 on 20x20 up). AVX-512 CPUs take avx512_winograd. */
static ly_status winograd_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    ly_status st = avx2_predicate(call, cpu, why_not);
    if (st != LY_OK) return st;
    if (cpu && cpu->avx512f) {
        *why_not = "an AVX-512 CPU (avx512_winograd serves)";
        return LY_E_DECLINED;
    }
    return call ? winograd_shape(call, 8, why_not) : LY_OK;
}

/* avx512_winograd, sixteen channels a register (NCHW16C): oneDNN 2.6's own
 * Winograd takes few shapes (3 of LibreYOLO9t's 71 3x3s) and its direct
 * kernels ran the rest at 150-180 GFLOP/s on a 2-core Xeon (241 the FMA
 * peak); these at 220 (16 channels, 160x160) to 445 (64->80, 80x80) counted
 * as direct convolutions. RT-DETR-r18's weights over 1 MiB took 1.01-1.06x
 * the time here too. */
static ly_status winograd16_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                      const char **why_not)
{
    ly_status st = avx512_predicate(call, cpu, why_not);
    if (st != LY_OK || !call) return st;
    return winograd_shape(call, 16, why_not);
}

/* 3x3 stride 2 padding 1 convolutions from images of at most four channels
 * to 16k channels (conv2d_stem_avx2.c). */
static ly_status stem_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    ly_status st = avx512_predicate(call, cpu, why_not);
    if (st != LY_OK || !call) return st;
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = LY_PARAMS(call, ly_conv2d_params);
    bool stem = x && w && x->ndim == 4 && w->ndim == 4 && x->shape[1] <= 4 &&
                w->shape[0] % 16 == 0 && w->shape[0] <= 256 && w->shape[2] == 3 &&
                w->shape[3] == 3 && p->groups == 1 && p->stride[0] == 2 && p->stride[1] == 2 &&
                p->padding[0] == 1 && p->padding[1] == 1 && p->dilation[0] == 1 &&
                p->dilation[1] == 1 && !p->post_affine && !call->in[3] &&
                p->activation <= LY_ACT_LEAKY_RELU;
    if (!stem) {
        *why_not = "not a 3x3 stride-2 padding-1 convolution from at most 4 channels to a "
                   "multiple of 16, without groups, residual or post-affine";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

/* dfl: an anchor block's bins stay in registers (at most 32). */
static ly_status dfl_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                               const char **why_not)
{
    ly_status st = avx512_predicate(call, cpu, why_not);
    if (st != LY_OK || !call) return st;
    if (!ly_avx512_dfl_fits(call)) {
        *why_not = "more than 32 bins a side";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

/* Registered after the libraries' providers, so these predicates are asked
 * before theirs (newest first): kernels of our own for shapes and ops the
 * libraries serve poorly. */
void ly_avx512_register(void)
{
    ly_provider_add(LY_OP_CONV2D, "avx512_thin", ly_conv2d_graph_only, thin_predicate,
                    &ly_avx512_conv2d_thin_stateful);
    ly_provider_add(LY_OP_CONV2D, "avx512_stem", ly_avx512_conv2d_stem, stem_predicate,
                    &ly_avx512_conv2d_stem_stateful);
    /* LibreYOLO9t on Zen 3 (in-process pairs): 0.98-0.99x the time at 1
     * thread (0.92x by the ratio of minima), 0.99x at 2. */
    ly_provider_add(LY_OP_CONV2D, "avx2_thin", ly_conv2d_graph_only, thin8_predicate,
                    &ly_avx2_conv2d_thin_stateful);
    /* In-process pairs on Zen 3, 1 thread: LibreYOLO9t 0.71x the time (0.72x
     * at 2), NanoDet-g 0.67x, RT-DETR-r18 0.70-0.74x, RF-DETR-n 0.97-0.98x,
     * DEIM-n 0.94-0.97x, SwinIR-s 0.97x; asked before avx2_thin (16 outputs:
     * 0.96-0.98x). */
    ly_provider_add(LY_OP_CONV2D, "avx2_winograd", ly_conv2d_graph_only, winograd_predicate,
                    &ly_avx2_conv2d_winograd_stateful);
    /* The activations also on AVX2 CPUs: oneDNN 2.6's swish and logistic
     * divide. Registered here, after oneDNN's eltwise, to be asked first. */
    /* In-process pairs on a 2-core AVX-512 Xeon (AMX, 241 GFLOP/s a core):
     * LibreYOLO9t 0.737x the time at 1 thread, 0.77x at 2; NanoDet-g 0.82x /
     * 0.84x; RT-DETR-r18 0.92x; D-FINE-n, DEIM-n, DEIMv2-atto, RF-DETR-n
     * 0.99-1.01x. Asked before avx512_thin and oneDNN's Winograd. */
    ly_provider_add(LY_OP_CONV2D, "avx512_winograd", ly_conv2d_graph_only, winograd16_predicate,
                    &ly_avx512_conv2d_winograd_stateful);
    ly_provider_add(LY_OP_SILU, "avx2", ly_avx2_silu, avx2_predicate, NULL);
    ly_provider_add(LY_OP_SIGMOID, "avx2", ly_avx2_sigmoid, avx2_predicate, NULL);
    ly_provider_add(LY_OP_SILU, "avx512", ly_avx512_silu, avx512_predicate, NULL);
    ly_provider_add(LY_OP_SIGMOID, "avx512", ly_avx512_sigmoid, avx512_predicate, NULL);
    ly_provider_add(LY_OP_DFL, "avx512", ly_avx512_dfl, dfl_predicate, NULL);
}

#endif
