/* SPDX-License-Identifier: MIT */
/*
 * conv2d on oneDNN (C API, 2.x): forward-inference convolution with the bias,
 * the activation (eltwise swish alpha = 1 / logistic / relu post-op) and the
 * residual fused.
 *
 * Layouts: our tensors are NCHW, but oneDNN's fast kernels (jit:avx2,
 * brgconv) want blocked (nChw8c/nChw16c) or channels-last activations; on plain
 * NCHW it falls back to im2col + GEMM, ~3x slower end to end on LibreYOLO9t. So
 * src and dst are left to oneDNN (format "any") and reordered from and to NCHW
 * on every call through per-thread scratch buffers (see choose_plan for the
 * exceptions). Measured on LibreYOLO9t at 640, all 185 convs, 1 thread on an
 * AVX-512 Zen 4 guest: plain NCHW 261 ms, oneDNN's choice with the reorders
 * 91 ms (without them, not possible with NCHW tensors, 85 ms), channels-last
 * 107 ms, choose_plan 88 ms (2 threads: 44-48 ms). The residual is added by
 * the output reorder (its "sum" post-op), or by the convolution's own sum
 * post-op when the output is already NCHW. Weights are reordered once per
 * cached operator.
 *
 * Inside a graph most convolutions skip those reorders: a graph prepares
 * each convolution once (the prepared form at the end of this file) and keeps
 * the values between them in oneDNN's blocked layouts (nChw16c on AVX-512,
 * else nChw8c; src/graph/plan.c, plan_layouts).
 *
 * Threads: call->threads is honoured through OpenMP (onednn_common.h) and is
 * part of the cache key, since oneDNN plans a primitive's work split for the
 * thread count it is created with.
 *
 * A second implementation, "onednn_winograd", runs the 3x3 stride-1
 * convolutions of large maps on oneDNN's Winograd F(4x4, 3x3) kernels
 * (AVX-512 only): 36 multiplications per 4x4 outputs instead of 144, at the
 * price of weights 4x larger (6x6 tiles) and sums in another order (parity:
 * the conv2d tolerance, 1e-4 of max|ref|; RT-DETRv2-r18's logits stay 9e-5
 * from LibreYOLO's). Its predicate says what it leaves to the direct one.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "providers/avx2/activate.h"
#include "providers/builtin.h"
#include "providers/onednn/onednn_common.h"
#include "providers/op_cache.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ly_conv_key.layout: which sides of the call are channel-blocked. */
#define SRC_BLOCKED8 1u  /* in[0] is nChw8c */
#define DST_BLOCKED8 2u  /* out[0] and in[3] (residual) are nChw8c */
#define SRC_BLOCKED16 4u /* ... nChw16c */
#define DST_BLOCKED16 8u

/* ly_conv_key.algorithm */
#define ALG_DIRECT 0u
#define ALG_WINOGRAD 1u

/* Two LibreYOLO9 models at two thread counts fit. */
#define CACHE_CAPACITY 512

typedef struct onednn_op {
    ly_onednn_spare spare; /* first: a prepared state's idle list */
    dnnl_stream_t stream;  /* one per operator: an operator runs on one thread at a time */
    dnnl_primitive_t conv, src_reorder, dst_reorder;
    dnnl_primitive_t activation; /* applied in place after conv (plain pointwise plan) */
    int64_t own_activation;      /* or this one (not NONE), in place by ly_simd_activate */
    dnnl_primitive_t affine;     /* the post-affine, in place after that (the same plan) */
    dnnl_memory_t weights, bias;
    dnnl_memory_t src_user, src_lib, dst_lib, dst_user; /* data handles set per call */
    dnnl_memory_t residual;   /* the residual read by a binary-add post-op, or NULL */
    dnnl_memory_t scratchpad; /* the convolution's, over the thread's scratch, or NULL */
    size_t scratchpad_bytes;
    int residual_arg;                    /* its execution argument */
    size_t src_lib_bytes, dst_lib_bytes; /* scratch sizes (0: no reorder on that side) */
    bool reference;                      /* oneDNN serves it with its reference kernel (slow) */
    bool winograd;                       /* weights in Winograd tiles: no exact way back */
    bool weights_packed;                 /* op->weights is a copy (not the caller's buffer) */
    dnnl_memory_desc_t weights_plain;    /* the caller's OIHW / GOIHW layout, for restoring */
} onednn_op;

static void destroy_op(void *p);
static ly_op_cache cache = LY_OP_CACHE_INIT(CACHE_CAPACITY, destroy_op);

static ly_status dnnl_failed(const char *what, dnnl_status_t st)
{
    return ly_onednn_failed(ly_op_name(LY_OP_CONV2D), what, st);
}

#define DNNL_TRY(expr)                                                                             \
    do {                                                                                           \
        dnnl_status_t dnnl_st_ = (expr);                                                           \
        if (dnnl_st_ != dnnl_success) {                                                            \
            *status = dnnl_failed(#expr, dnnl_st_);                                                \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static void destroy_op(void *p)
{
    onednn_op *op = p;
    if (!op) return;
    dnnl_primitive_t prims[] = {op->conv, op->src_reorder, op->dst_reorder, op->activation,
                                op->affine};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = {op->weights, op->bias,     op->src_user, op->src_lib,
                            op->dst_lib, op->dst_user, op->residual, op->scratchpad};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (op->stream) dnnl_stream_destroy(op->stream);
    free(op);
}

/* Convolution primitive descriptor with the activation and, if asked, the sum. */
static dnnl_status_t make_conv_pd(const dnnl_convolution_desc_t *desc, int64_t activation,
                                  float alpha, const float *affine, bool with_sum,
                                  const dnnl_memory_desc_t *add_md, dnnl_primitive_desc_t *pd)
{
    dnnl_engine_t engine = ly_onednn_engine();
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    /* The scratchpad is ours, from the running thread's scratch: oneDNN's
     * own is thread-local to the thread that made the primitive, and an
     * operator of a shared model runs on whichever thread takes it. */
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success) st = dnnl_post_ops_create(&post_ops);
    if (st == dnnl_success) st = ly_onednn_append_activation(post_ops, activation, alpha);
    if (st == dnnl_success && affine) /* the LearnableAffineBlock after the activation */
        st =
            dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_linear, affine[0], affine[1]);
    if (st == dnnl_success && with_sum) st = dnnl_post_ops_append_sum(post_ops, 1.0f);
    if (st == dnnl_success && add_md)
        st = dnnl_post_ops_append_binary(post_ops, dnnl_binary_add, add_md);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, post_ops);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, desc, attr, engine, NULL);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

static dnnl_status_t make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                  bool with_sum, dnnl_primitive_t *out)
{
    dnnl_engine_t engine = ly_onednn_engine();
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success && with_sum) {
        st = dnnl_post_ops_create(&post_ops);
        if (st == dnnl_success) st = dnnl_post_ops_append_sum(post_ops, 1.0f);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, post_ops);
    }
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr);
    if (st == dnnl_success) st = dnnl_primitive_create(out, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* How a convolution runs. Mostly on oneDNN's choice of activation layout
 * ("any", with reorders from and to NCHW), except where measurements on
 * LibreYOLO9t's shapes (libreyolo bench conv, 1 thread) found better:
 *  - a first layer (RGB) reads NCHW directly: oneDNN has kernels for that, and
 *    reordering a 3-channel image costs more than it saves (2.4 -> 1.9 ms);
 *  - a plain 1x1 convolution (stride 1, no padding, no groups, no residual) is
 *    one GEMM over NCHW as it is: no reorders at all. oneDNN's GEMM-based
 *    convolution applies swish/logistic post-ops element by element (7 GFLOP/s
 *    end to end), so the activation runs as a separate in-place eltwise
 *    primitive (JIT) instead (32->16 1x1 on 80x80: 0.157 -> 0.13 ms). A
 *    oneDNN 2.6 matmul with the bias, swish and sum as post-ops was tried and
 *    is slower on every 1x1 shape of LibreYOLO9t (gemm:jit +5-15%, brgemm,
 *    which repacks the activations per call, +5-20%; 88 vs 85 ms of convs);
 *  - on AVX-512 machines "any" picks 16-channel blocks or channels-last, but
 *    for channel counts that are not multiples of 16 (24, 48) and for thin
 *    strided convolutions the 8-channel blocked kernels are faster (24->24 3x3:
 *    0.24 -> 0.19 ms; 16->32 3x3 /2 on 320x320, where the channels-last reorder
 *    dominates: 4.3 -> 3.2 ms), so those ask for nChw8c, which is what "any"
 *    gives on AVX2 machines anyway. Grouped convolutions keep "any". */
typedef struct plan {
    dnnl_format_tag_t src, dst;
    bool separate_activation;
} plan;

static plan choose_plan(const ly_conv_key *k, int attempt)
{
    plan p = {dnnl_format_tag_any, dnnl_format_tag_any, false};
    if (k->layout && attempt < 2) {
        /* A side already blocked costs no reorder, so the whole convolution
         * runs on blocked kernels, each side in its own block where oneDNN
         * has a JIT kernel for that (attempt 0; an NCHW side takes the
         * other's), else on 8-channel blocks (attempt 1: an NCHW side, or
         * the other block size, is reordered), else as without layouts. */
        dnnl_format_tag_t src = k->layout & SRC_BLOCKED16  ? dnnl_nChw16c
                                : k->layout & SRC_BLOCKED8 ? dnnl_nChw8c
                                                           : dnnl_format_tag_undef;
        dnnl_format_tag_t dst = k->layout & DST_BLOCKED16  ? dnnl_nChw16c
                                : k->layout & DST_BLOCKED8 ? dnnl_nChw8c
                                                           : dnnl_format_tag_undef;
        if (src == dnnl_format_tag_undef) src = k->c < 8 ? dnnl_nchw : dst; /* RGB: as below */
        if (dst == dnnl_format_tag_undef) dst = src;
        if (attempt == 1 && src != dst && k->c >= 8) src = dst = dnnl_nChw8c;
        p.src = src;
        p.dst = dst;
        return p;
    }
    if (k->c < 8) {
        p.src = dnnl_nchw;
        return p;
    }
    bool pointwise = k->kh == 1 && k->kw == 1;
    if (pointwise && k->sh == 1 && k->sw == 1 && k->ph == 0 && k->pw == 0 && k->groups == 1 &&
        !k->has_residual) {
        p.src = p.dst = dnnl_nchw;
        p.separate_activation = k->activation != LY_ACT_NONE || k->post_affine;
        return p;
    }
    bool eight = k->c % 8 == 0 && k->o % 8 == 0 && k->groups == 1;
    bool thin_strided = (k->sh > 1 || k->sw > 1) && k->c <= 16;
    if (eight && (pointwise || thin_strided || k->c % 16 != 0 || k->o % 16 != 0))
        p.src = p.dst = dnnl_nChw8c;
    return p;
}

static dnnl_status_t make_eltwise(const dnnl_memory_desc_t *md, dnnl_alg_kind_t alg, float alpha,
                                  float beta, dnnl_primitive_t *out)
{
    dnnl_eltwise_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st =
        dnnl_eltwise_forward_desc_init(&desc, dnnl_forward_inference, alg, md, alpha, beta);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&pd, &desc, NULL, ly_onednn_engine(), NULL);
    if (st == dnnl_success) st = dnnl_primitive_create(out, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st;
}

static dnnl_status_t make_activation(const dnnl_memory_desc_t *md, int64_t activation, float slope,
                                     dnnl_primitive_t *out)
{
    dnnl_alg_kind_t alg = activation == LY_ACT_SILU      ? dnnl_eltwise_swish
                          : activation == LY_ACT_SIGMOID ? dnnl_eltwise_logistic
                                                         : dnnl_eltwise_relu;
    float alpha = activation == LY_ACT_SILU ? 1.0f : activation == LY_ACT_LEAKY_RELU ? slope : 0.0f;
    return make_eltwise(md, alg, alpha, 0.0f, out);
}

static bool own_activation_here(int64_t activation)
{
#ifdef LY_HAVE_AVX2_PROVIDERS
    return (ly_cpu()->avx512f || (ly_cpu()->avx2 && ly_cpu()->fma)) &&
           (activation == LY_ACT_SILU || activation == LY_ACT_SIGMOID);
#else
    (void)activation;
    return false;
#endif
}

/* `share`: an operator of the same call whose packed weights and bias this
 * one reads (NULL: its own, from the call), so a state's operators for
 * concurrent runs hold one copy and never read the caller's weights again. */
static onednn_op *create_op_with(const ly_conv_key *k, const ly_kernel_call *call, int attempt,
                                 const onednn_op *share, ly_status *status)
{
    dnnl_engine_t engine = ly_onednn_engine();
    onednn_op *op = calloc(1, sizeof *op);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t weights_reorder = NULL;
    dnnl_memory_t weights_user = NULL;
    if (!op) {
        *status = ly_set_error(LY_E_NO_MEMORY, "conv2d (onednn): out of memory");
        return NULL;
    }
    DNNL_TRY(dnnl_stream_create(&op->stream, engine, dnnl_stream_default_flags));

    dnnl_dims_t src_dims = {k->n, k->c, k->h, k->w}, dst_dims = {k->n, k->o, k->ho, k->wo};
    dnnl_dims_t bias_dims = {k->o};
    dnnl_dims_t strides = {k->sh, k->sw}, dilates = {k->dh - 1, k->dw - 1};
    dnnl_dims_t pad_l = {k->ph, k->pw};
    /* The right padding the last window needs; with it oneDNN's output size is
     * ours (and 0 when the floor drops trailing input, which oneDNN then ignores). */
    dnnl_dims_t pad_r = {(k->ho - 1) * k->sh + (k->kh - 1) * k->dh + 1 - k->h - k->ph,
                         (k->wo - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->w - k->pw};
    for (int i = 0; i < 2; i++)
        if (pad_r[i] < 0) pad_r[i] = 0;
    dnnl_memory_desc_t src_user, dst_user, src_any, dst_any, w_any, w_user, bias_md;
    dnnl_format_tag_t src_user_tag = k->layout & SRC_BLOCKED16  ? dnnl_nChw16c
                                     : k->layout & SRC_BLOCKED8 ? dnnl_nChw8c
                                                                : dnnl_nchw;
    dnnl_format_tag_t dst_user_tag = k->layout & DST_BLOCKED16  ? dnnl_nChw16c
                                     : k->layout & DST_BLOCKED8 ? dnnl_nChw8c
                                                                : dnnl_nchw;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_user, 4, src_dims, dnnl_f32, src_user_tag));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_user, 4, dst_dims, dnnl_f32, dst_user_tag));
    plan how = choose_plan(k, attempt);
    /* Winograd kernels take ReLU as a post-op and nothing else: the rest runs
     * after them in place, as on the GEMM-based 1x1 plan */
    if (k->algorithm == ALG_WINOGRAD &&
        ((k->activation != LY_ACT_NONE && k->activation != LY_ACT_RELU) || k->post_affine))
        how.separate_activation = true;
    float alpha;
    memcpy(&alpha, &k->alpha_bits, sizeof alpha);
    dnnl_format_tag_t src_tag = how.src, dst_tag = how.dst;
    /* SiLU and sigmoid by ly_simd_activate after the convolution where
     * nothing follows them: oneDNN 2.6's swish divides (post-op or eltwise
     * primitive alike). LibreYOLO9t: 0.96x the time at 1 thread, 0.93-0.97x
     * at 2 (AVX-512 Xeon, in-process interleaved minima); on AVX2 (Zen 3,
     * eight lanes) 0.95-0.98x at 1 thread, 0.96x at 2 (median of pairs). */
    if (own_activation_here(k->activation) && !k->has_residual && !k->post_affine)
        op->own_activation = k->activation;
    int64_t fused_activation =
        how.separate_activation || op->own_activation ? LY_ACT_NONE : k->activation;
    float affine[2];
    memcpy(&affine[0], &k->post_scale_bits, sizeof affine[0]);
    memcpy(&affine[1], &k->post_shift_bits, sizeof affine[1]);
    const float *fused_affine = k->post_affine && !how.separate_activation ? affine : NULL;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_any, 4, src_dims, dnnl_f32, src_tag));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_any, 4, dst_dims, dnnl_f32, dst_tag));
    if (k->groups == 1) {
        dnnl_dims_t wd = {k->o, k->c, k->kh, k->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 4, wd, dnnl_f32, dnnl_oihw));
    } else {
        dnnl_dims_t wd = {k->groups, k->o / k->groups, k->c / k->groups, k->kh, k->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 5, wd, dnnl_f32, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 5, wd, dnnl_f32, dnnl_goihw));
    }
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, dnnl_f32, dnnl_x));
    dnnl_convolution_desc_t desc;
    dnnl_alg_kind_t alg =
        k->algorithm == ALG_WINOGRAD ? dnnl_convolution_winograd : dnnl_convolution_direct;
    op->winograd = k->algorithm == ALG_WINOGRAD;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_inference, alg,
                                                        &src_any, &w_any, k->bias ? &bias_md : NULL,
                                                        &dst_any, strides, dilates, pad_l, pad_r));
    dnnl_status_t made =
        make_conv_pd(&desc, fused_activation, alpha, fused_affine, false, NULL, &pd);
    if (made == dnnl_unimplemented && !op->winograd &&
        (src_tag != dnnl_format_tag_any || dst_tag != dnnl_format_tag_any)) {
        /* The preferred layouts have no kernel here (another ISA): let oneDNN choose. */
        DNNL_TRY(
            dnnl_memory_desc_init_by_tag(&src_any, 4, src_dims, dnnl_f32, dnnl_format_tag_any));
        DNNL_TRY(
            dnnl_memory_desc_init_by_tag(&dst_any, 4, dst_dims, dnnl_f32, dnnl_format_tag_any));
        DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
            &desc, dnnl_forward_inference, dnnl_convolution_direct, &src_any, &w_any,
            k->bias ? &bias_md : NULL, &dst_any, strides, dilates, pad_l, pad_r));
        fused_activation = op->own_activation ? LY_ACT_NONE : k->activation;
        fused_affine = k->post_affine ? affine : NULL;
        how.separate_activation = false;
        made = make_conv_pd(&desc, fused_activation, alpha, fused_affine, false, NULL, &pd);
    }
    if (made == dnnl_unimplemented) {
        /* Not a failure: oneDNN has no kernel for this case; the next one serves it. */
        *status = ly_set_error(LY_E_DECLINED, "conv2d (onednn): no oneDNN implementation for "
                                              "this convolution");
        goto fail;
    }
    DNNL_TRY(made);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (k->has_residual && dnnl_memory_desc_equal(dst_md, &dst_user)) {
        /* NCHW output: the convolution adds the residual itself (sum post-op).
         * The destination is pinned to NCHW, or oneDNN could pick another
         * layout for the new descriptor and the sum would read scratch. */
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
            &desc, dnnl_forward_inference, alg, &src_any, &w_any, k->bias ? &bias_md : NULL,
            &dst_user, strides, dilates, pad_l, pad_r));
        /* On blocked data the JIT kernels take a swish then a sum only as a
         * binary add (with the sum oneDNN falls back to its reference
         * kernel, ~20x slower); the binary add also reads the residual
         * where it is, with no copy into the output first. */
        bool binary = (k->layout & (DST_BLOCKED8 | DST_BLOCKED16)) &&
                      (fused_activation != LY_ACT_NONE || fused_affine);
        DNNL_TRY(make_conv_pd(&desc, fused_activation, alpha, fused_affine, !binary,
                              binary ? &dst_user : NULL, &pd));
        if (binary) {
            DNNL_TRY(dnnl_memory_create(&op->residual, &dst_user, engine, DNNL_MEMORY_NONE));
            /* after the activation and the affine: the post-op's index */
            int index = (fused_activation != LY_ACT_NONE) + (fused_affine != NULL);
            op->residual_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1;
        }
        dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    }
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    DNNL_TRY(dnnl_primitive_create(&op->conv, pd));
    const dnnl_memory_desc_t *pad_md =
        dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    op->scratchpad_bytes = pad_md ? dnnl_memory_desc_get_size(pad_md) : 0;
    if (op->scratchpad_bytes)
        DNNL_TRY(dnnl_memory_create(&op->scratchpad, pad_md, engine, DNNL_MEMORY_NONE));
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    op->reference = strncmp(impl, "ref", 3) == 0;
    int64_t scratchpad = (int64_t)op->scratchpad_bytes;
    ly_log(LY_LOG_DEBUG,
           "conv2d (onednn): %lld->%lld %lldx%lld /%lld g%lld on %lldx%lld, %lld thread(s): %s, "
           "scratchpad %lld B%s%s",
           (long long)k->c, (long long)k->o, (long long)k->kh, (long long)k->kw, (long long)k->sh,
           (long long)k->groups, (long long)k->h, (long long)k->w, (long long)k->threads, impl,
           (long long)scratchpad,
           dnnl_memory_desc_equal(src_md, &src_user) ? "" : ", src reordered",
           dnnl_memory_desc_equal(dst_md, &dst_user) ? "" : ", dst reordered");

    /* Weights: reordered once into memory the operator owns, unless the
     * kernel reads them as they are (plain OIHW): then it reads the caller's,
     * which the key names by pointer and fingerprint, instead of a copy. */
    const dnnl_memory_desc_t *shared_md = NULL;
    if (share && share->weights_packed)
        DNNL_TRY(dnnl_memory_get_memory_desc(share->weights, &shared_md));
    if (shared_md && !dnnl_memory_desc_equal(w_md, shared_md)) {
        /* The caller's weights may have been given back: only the shared
         * packed copy may be read, and this operator wants another layout. */
        *status = ly_set_error(LY_E_PROVIDER, "conv2d (onednn): a spare operator wants weights "
                                              "packed in another layout than the first");
        goto fail;
    }
    if (shared_md) {
        void *packed = NULL;
        DNNL_TRY(dnnl_memory_get_data_handle(share->weights, &packed));
        DNNL_TRY(dnnl_memory_create(&op->weights, w_md, engine, packed));
    } else if (dnnl_memory_desc_equal(w_md, &w_user)) {
        ly_log(LY_LOG_DEBUG, "conv2d (onednn): plain weights shared, %zu B",
               dnnl_memory_desc_get_size(w_md));
        DNNL_TRY(dnnl_memory_create(&op->weights, w_md, engine, call->in[1]->data));
    } else {
        ly_log(LY_LOG_DEBUG, "conv2d (onednn): weights packed, %zu B",
               dnnl_memory_desc_get_size(w_md));
        DNNL_TRY(dnnl_memory_create(&op->weights, w_md, engine, DNNL_MEMORY_ALLOCATE));
        op->weights_packed = true;
        op->weights_plain = w_user;
        DNNL_TRY(dnnl_memory_create(&weights_user, &w_user, engine, call->in[1]->data));
        DNNL_TRY(make_reorder(&w_user, w_md, false, &weights_reorder));
        dnnl_exec_arg_t wargs[] = {{DNNL_ARG_FROM, weights_user}, {DNNL_ARG_TO, op->weights}};
        DNNL_TRY(dnnl_primitive_execute(weights_reorder, op->stream, 2, wargs));
        DNNL_TRY(dnnl_stream_wait(op->stream));
    }
    if (k->bias) {
        void *handle = NULL, *from = call->in[2]->data;
        if (share && share->bias) DNNL_TRY(dnnl_memory_get_data_handle(share->bias, &from));
        DNNL_TRY(dnnl_memory_create(&op->bias, &bias_md, engine, DNNL_MEMORY_ALLOCATE));
        DNNL_TRY(dnnl_memory_get_data_handle(op->bias, &handle));
        memcpy(handle, from, (size_t)k->o * sizeof(float));
    }

    if (how.separate_activation && k->activation != LY_ACT_NONE && !op->own_activation)
        DNNL_TRY(make_activation(&dst_user, k->activation, alpha, &op->activation));
    if (how.separate_activation && k->post_affine)
        DNNL_TRY(make_eltwise(&dst_user, dnnl_eltwise_linear, affine[0], affine[1], &op->affine));
    DNNL_TRY(dnnl_memory_create(&op->src_user, &src_user, engine, DNNL_MEMORY_NONE));
    DNNL_TRY(dnnl_memory_create(&op->dst_user, &dst_user, engine, DNNL_MEMORY_NONE));
    if (!dnnl_memory_desc_equal(src_md, &src_user)) {
        op->src_lib_bytes = dnnl_memory_desc_get_size(src_md);
        DNNL_TRY(dnnl_memory_create(&op->src_lib, src_md, engine, DNNL_MEMORY_NONE));
        DNNL_TRY(make_reorder(&src_user, src_md, false, &op->src_reorder));
    }
    if (!dnnl_memory_desc_equal(dst_md, &dst_user)) {
        op->dst_lib_bytes = dnnl_memory_desc_get_size(dst_md);
        DNNL_TRY(dnnl_memory_create(&op->dst_lib, dst_md, engine, DNNL_MEMORY_NONE));
        DNNL_TRY(make_reorder(dst_md, &dst_user, k->has_residual != 0, &op->dst_reorder));
    }
    dnnl_primitive_destroy(weights_reorder);
    dnnl_memory_destroy(weights_user);
    dnnl_primitive_desc_destroy(pd);
    return op;

fail:
    if (weights_reorder) dnnl_primitive_destroy(weights_reorder);
    if (weights_user) dnnl_memory_destroy(weights_user);
    if (pd) dnnl_primitive_desc_destroy(pd);
    destroy_op(op);
    return NULL;
}

/* The operator for `k`, and the attempt (choose_plan) that made it. */
static onednn_op *create_best(const ly_conv_key *k, const ly_kernel_call *call, ly_status *status,
                              int *attempt_out)
{
    /* Winograd: on the layouts asked for or not at all (the direct
     * implementation then serves the call without reorders). */
    if (k->algorithm == ALG_WINOGRAD) {
        *attempt_out = k->layout ? 0 : 2;
        return create_op_with(k, call, *attempt_out, NULL, status);
    }
    /* Blocked data: the layouts asked for may have only oneDNN's reference
     * kernel (~20x slower than a reorder more); then fewer constraints. */
    for (int attempt = 0; k->layout && attempt < 2; attempt++) {
        onednn_op *op = create_op_with(k, call, attempt, NULL, status);
        if (op && !op->reference) {
            *attempt_out = attempt;
            return op;
        }
        destroy_op(op);
    }
    *attempt_out = 2;
    return create_op_with(k, call, 2, NULL, status);
}

static void *create_op(const ly_conv_key *k, const ly_kernel_call *call, ly_status *status)
{
    int attempt;
    return create_best(k, call, status, &attempt);
}

#undef DNNL_TRY
#define DNNL_TRY(expr)                                                                             \
    do {                                                                                           \
        dnnl_status_t dnnl_st_ = (expr);                                                           \
        if (dnnl_st_ != dnnl_success) return dnnl_failed(#expr, dnnl_st_);                         \
    } while (0)

static ly_status run_op(onednn_op *op, const ly_kernel_call *call)
{
    const ly_tensor *residual = call->in[3];
    float *out = call->out[0]->data;
    dnnl_memory_t src = op->src_user, dst = op->dst_user;
    DNNL_TRY(dnnl_memory_set_data_handle(op->src_user, call->in[0]->data));
    DNNL_TRY(dnnl_memory_set_data_handle(op->dst_user, out));
    /* Both reorder buffers and the scratchpad share one per-thread scratch
     * block, so it grows to the largest set one convolution needs rather than
     * to the sum of the largest of each (LibreYOLO9t at 640: 9.4 MiB instead
     * of 12.5; RT-DETRv2-r18's Winograd scratchpads 22 MiB next to 6). */
    size_t src_span = (op->src_lib_bytes + 63) / 64 * 64;
    size_t dst_span = (op->dst_lib_bytes + 63) / 64 * 64;
    char *scratch = NULL;
    if (op->src_reorder || op->dst_reorder || op->scratchpad) {
        scratch = ly_nn_scratch(0, src_span + dst_span + op->scratchpad_bytes);
        if (!scratch) return ly_set_error(LY_E_NO_MEMORY, "conv2d (onednn): out of memory");
    }
    if (op->src_reorder) {
        DNNL_TRY(dnnl_memory_set_data_handle(op->src_lib, scratch));
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, op->src_user}, {DNNL_ARG_TO, op->src_lib}};
        DNNL_TRY(dnnl_primitive_execute(op->src_reorder, op->stream, 2, args));
        src = op->src_lib;
    }
    if (op->dst_reorder) {
        DNNL_TRY(dnnl_memory_set_data_handle(op->dst_lib, scratch + src_span));
        dst = op->dst_lib;
    }
    /* Both ways of adding the residual sum into what `out` already holds. */
    if (residual && !op->residual && residual->data != (void *)out)
        memcpy(out, residual->data, (size_t)ly_tensor_numel(residual) * sizeof(float));
    dnnl_exec_arg_t args[6] = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, op->weights}, {DNNL_ARG_DST, dst}};
    int nargs = 3;
    if (op->scratchpad) {
        DNNL_TRY(dnnl_memory_set_data_handle(op->scratchpad, scratch + src_span + dst_span));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, op->scratchpad};
    }
    if (op->bias) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, op->bias};
    if (op->residual) {
        DNNL_TRY(dnnl_memory_set_data_handle(op->residual, residual->data));
        args[nargs++] = (dnnl_exec_arg_t){op->residual_arg, op->residual};
    }
    DNNL_TRY(dnnl_primitive_execute(op->conv, op->stream, nargs, args));
    if (op->dst_reorder) {
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, op->dst_lib}, {DNNL_ARG_TO, op->dst_user}};
        DNNL_TRY(dnnl_primitive_execute(op->dst_reorder, op->stream, 2, rargs));
    }
#ifdef LY_HAVE_AVX2_PROVIDERS
    if (op->own_activation)
        ly_simd_activate(out, ly_tensor_numel(call->out[0]), op->own_activation,
                         ly_threads_resolve(call->threads));
#endif
    dnnl_primitive_t in_place[2] = {op->activation, op->affine};
    for (int i = 0; i < 2; i++) {
        if (!in_place[i]) continue;
        dnnl_exec_arg_t eargs[] = {{DNNL_ARG_SRC, op->dst_user}, {DNNL_ARG_DST, op->dst_user}};
        DNNL_TRY(dnnl_primitive_execute(in_place[i], op->stream, 2, eargs));
    }
    DNNL_TRY(dnnl_stream_wait(op->stream));
    return LY_OK;
}

static ly_status conv2d_with(const ly_kernel_call *call, uint32_t algorithm)
{
    if (!ly_onednn_engine()) return dnnl_failed("dnnl_engine_create", ly_onednn_engine_status());
    int threads = ly_threads_resolve(call->threads);
    int previous = ly_onednn_threads_begin(threads);
    ly_conv_key key;
    ly_conv_key_init(&key, call, threads);
    key.algorithm = algorithm;
    ly_op_entry *entry = NULL;
    void *op = NULL;
    ly_status st = ly_op_cache_acquire(&cache, &key, create_op, call, &entry, &op);
    if (st == LY_OK) {
        st = run_op(op, call);
        ly_op_cache_release(&cache, entry);
    }
    ly_onednn_threads_end(previous);
    return st;
}

static ly_status conv2d_onednn(const ly_kernel_call *call)
{
    return conv2d_with(call, ALG_DIRECT);
}

static ly_status conv2d_onednn_winograd(const ly_kernel_call *call)
{
    return conv2d_with(call, ALG_WINOGRAD);
}

/* Where Winograd pays: 3x3 stride-1 ungrouped convolutions (oneDNN's
 * F(4x4, 3x3) has no other), with a residual only where no activation comes
 * before it (the kernels add it as a sum post-op, or the output reorder does:
 * ResNet's shortcut as an exported program fuses it, ReLU after; direct, those
 * took RT-DETR-r18's program 1.10x its checkpoint's time), of at least 1 GFLOP (or of
 * at least 0.15 with 128 or more channels in and out on a map of at most
 * 32x32), with weights of at most 1 MiB. Smaller convolutions save less than the
 * scratch the kernels share costs (up to ~23 MiB, held by oneDNN for the
 * process): LibreYOLO9t's would save 10 ms of 70 for 25 MiB on a 10 MiB model.
 * Larger weights cost their 4x larger copy (and the caller's, which the graph
 * keeps: there is no exact way back) for less: RT-DETRv2-r18's 256-channel
 * 3x3s on 40x40 would save 17 ms of 330 for 28 MiB, its 512-channel ones on
 * 20x20 5 ms for 85 MiB. Activations other than ReLU and the post-affine
 * run after the convolution, in place. */
static ly_status winograd_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    ly_status st = ly_onednn_predicate(call, cpu, why_not);
    if (st != LY_OK) return st;
    if (cpu && !cpu->avx512f) {
        *why_not = "oneDNN's Winograd kernels need AVX-512";
        return LY_E_DECLINED;
    }
    if (!call) return LY_OK;
    const ly_conv2d_params *p = LY_PARAMS(call, ly_conv2d_params);
    const ly_tensor *w = call->in[1], *y = call->out[0];
    if (!w || w->ndim != 4 || w->shape[2] != 3 || w->shape[3] != 3 || p->stride[0] != 1 ||
        p->stride[1] != 1 || p->dilation[0] != 1 || p->dilation[1] != 1 || p->groups > 1) {
        *why_not = "not a 3x3 stride-1 ungrouped convolution";
        return LY_E_DECLINED;
    }
    if (call->in[3] && (p->activation != LY_ACT_NONE || p->post_affine)) {
        *why_not = "a residual after an activation (added by the direct kernels in their "
                   "epilogue)";
        return LY_E_DECLINED;
    }
    /* per image: a batch runs each image on the kernels it would get alone */
    double flops = y && y->ndim == 4 ? 2.0 * (double)ly_tensor_numel(w) * (double)y->shape[2] *
                                           (double)y->shape[3]
                                     : 0.0;
    /* From 0.4 GFLOP (1 until NanoDet-g's 128 -> 128 on 52x52, 0.8 GFLOP, and
     * LibreYOLO9t's three head convolutions on 80x80, 0.47-0.74, each about 2x
     * faster: NanoDet-g 5-8% less time at 1 and 2 threads for +6 MiB resident,
     * LibreYOLO9t 5-8% for +15 MiB of Winograd scratch, outputs within 5e-7 of
     * max|y| of the direct ones).
     * Below, only wide channels on a small map: its transformed tiles are
     * small (RF-DETR's projector, 128 -> 128 on 24x24: 0.17 GFLOP, ~40%
     * faster, +6 MiB resident for six of them; NanoDet-g's two 128 -> 128 on
     * 26x26 too, its memory unchanged) */
    bool small_wide = flops >= 1.5e8 && w->shape[0] >= 128 && w->shape[1] >= 128 && y &&
                      y->ndim == 4 && y->shape[2] * y->shape[3] <= 32 * 32;
    if (flops < 4e8 && !small_wide) {
        *why_not = "under 0.4 GFLOP and not 128+ channels on a map of at most 32x32 (saves less "
                   "than the Winograd scratch costs)";
        return LY_E_DECLINED;
    }
    if (ly_tensor_numel(w) * (int64_t)sizeof(float) > (1 << 20)) {
        *why_not = "weights over 1 MiB (Winograd's copy is 4x larger)";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

/* ---- the prepared form (graphs) -------------------------------------------------------- *
 *
 * A graph prepares each convolution node once per plan: the operator is made
 * then, with the weights packed, and the node's values may stay in oneDNN's
 * blocked layouts between convolutions (ly_kernel_layouts), so the reorders
 * around each go away (LibreYOLO9t at 640, 1 thread: 94 -> 87 ms, reorder
 * scratch 9.4 -> 3.9 MiB). The state keeps the packed weights and a copy of
 * the bias, so the graph gives the plain weights' pages back (restore writes
 * them back exactly). An operator runs one call at a time (its stream and
 * memory handles are per call): concurrent runs of one state each take a
 * spare operator, made on first need over the same packed weights. */

typedef struct conv_state {
    ly_conv_key key;
    int attempt;        /* choose_plan's attempt that made the first operator */
    onednn_op *primary; /* owns the packed weights */
    ly_onednn_spares spares;
    /* Winograd on a batch: an operator for one image, run image by image, since
     * oneDNN picks its Winograd tiles by batch size (F(2x2) for one image,
     * F(4x4) for four on LibreYOLO9t's head): each image as it runs alone */
    int64_t images;
} conv_state;

static uint32_t layout_bits(const ly_kernel_prepare_info *info)
{
    ly_layout src = info->in_layout[0], dst = info->out_layout[0];
    return (src == LY_LAYOUT_NCHW16C  ? SRC_BLOCKED16
            : src == LY_LAYOUT_NCHW8C ? SRC_BLOCKED8
                                      : 0u) |
           (dst == LY_LAYOUT_NCHW16C  ? DST_BLOCKED16
            : dst == LY_LAYOUT_NCHW8C ? DST_BLOCKED8
                                      : 0u);
}

/* 16-channel blocks where the AVX-512 kernels (brgconv) exist: on LibreYOLO9t's
 * 3x3 convolutions they are ~25% faster than the 8-channel AVX2 ones. */
static ly_status conv_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    const ly_conv2d_params *p = LY_PARAMS(call, ly_conv2d_params);
    const ly_tensor *x = call->in[0], *y = call->out[0];
    if (x->ndim != 4) return LY_OK;
    uint32_t blocked = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    if (ly_onednn_preferred_layout() == LY_LAYOUT_NCHW16C)
        blocked |= LY_LAYOUT_BIT(LY_LAYOUT_NCHW16C);
    /* A first layer (RGB) reads NCHW as it is and may still write blocked. */
    bool first = x->shape[1] < 8 && p->groups <= 1;
    if (!first) out->in[0] = blocked;
    out->out[0] = blocked;
    out->in[3] = blocked;
    out->tied = 1u << 3; /* the residual is added to the output element by element */
    out->preferred = ly_onednn_preferred_layout();
    (void)y;
    return LY_OK;
}

static void destroy_spare(ly_onednn_spare *op)
{
    destroy_op((onednn_op *)op);
}

static void conv_release(void *state)
{
    conv_state *s = state;
    if (!s) return;
    ly_onednn_spares_destroy(&s->spares, s->primary ? &s->primary->spare : NULL, destroy_spare);
    free(s);
}

static ly_status prepare_with(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              uint32_t algorithm, void **state)
{
    if (!ly_onednn_engine()) return dnnl_failed("dnnl_engine_create", ly_onednn_engine_status());
    if (!(info->constant_inputs & (1u << 1)) ||
        (call->in[2] && !(info->constant_inputs & (1u << 2))))
        return LY_E_DECLINED; /* weights that change between runs: the plain function */
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "conv2d (onednn): out of memory");
    ly_onednn_spares_init(&s->spares);
    /* The key's fingerprint is not used: the state is this call's alone. */
    ly_conv_key_init_with(&s->key, call, info->threads, 0);
    s->key.layout = layout_bits(info);
    s->key.algorithm = algorithm;
    s->images = algorithm == ALG_WINOGRAD ? s->key.n : 1;
    if (s->images > 1) s->key.n = 1;
    int previous = ly_onednn_threads_begin(info->threads);
    ly_status st = LY_OK;
    s->primary = create_best(&s->key, call, &st, &s->attempt);
    ly_onednn_threads_end(previous);
    if (!s->primary) {
        conv_release(s);
        if (st == LY_E_DECLINED) ly_clear_error();
        return st == LY_E_DECLINED ? LY_E_DECLINED : st;
    }
    ly_onednn_spares_give(&s->spares, &s->primary->spare);
    *state = s;
    return LY_OK;
}

static ly_status conv_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state)
{
    return prepare_with(call, info, ALG_DIRECT, state);
}

static ly_status winograd_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    return prepare_with(call, info, ALG_WINOGRAD, state);
}

static ly_status conv_run(void *state, const ly_kernel_call *call)
{
    conv_state *s = state;
    onednn_op *op = (onednn_op *)ly_onednn_spares_take(&s->spares);
    int previous = ly_onednn_threads_begin((int)s->key.threads);
    ly_status st = LY_OK;
    if (!op) op = create_op_with(&s->key, call, s->attempt, s->primary, &st);
    for (int64_t i = 0; op && st == LY_OK && i < s->images; i++) {
        if (s->images == 1) {
            st = run_op(op, call);
            break;
        }
        /* image i: every operand of the call narrowed to it */
        ly_tensor x = *call->in[0], y = *call->out[0], r;
        x.shape[0] = y.shape[0] = 1;
        x.data = (float *)x.data + i * ly_tensor_numel(&x);
        y.data = (float *)y.data + i * ly_tensor_numel(&y);
        ly_kernel_call one = *call;
        one.in[0] = &x;
        one.out[0] = &y;
        if (call->in[3]) {
            r = *call->in[3];
            r.shape[0] = 1;
            r.data = (float *)r.data + i * ly_tensor_numel(&r);
            one.in[3] = &r;
        }
        st = run_op(op, &one);
    }
    ly_onednn_threads_end(previous);
    if (op) ly_onednn_spares_give(&s->spares, &op->spare);
    return st;
}

/* Winograd's weights (G g G^T) do not give the caller's back exactly: the
 * graph keeps those. */
static uint32_t conv_held(void *state)
{
    const conv_state *s = state;
    return (s->primary->weights_packed && !s->primary->winograd ? 1u << 1 : 0u) |
           (s->primary->bias ? 1u << 2 : 0u);
}

/* The packed weights reordered back to OIHW (exact: a reorder moves values),
 * or the bias copied back. */
static ly_status conv_restore(void *state, int index, void *dst)
{
    const conv_state *s = state;
    const onednn_op *op = s->primary;
    if (index == 2 && op->bias) {
        void *from = NULL;
        DNNL_TRY(dnnl_memory_get_data_handle(op->bias, &from));
        memcpy(dst, from, (size_t)s->key.o * sizeof(float));
        return LY_OK;
    }
    if (index != 1 || !op->weights_packed || op->winograd)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "conv2d (onednn): input %d is not held", index);
    dnnl_status_t st = ly_onednn_unpack(op->weights, &op->weights_plain, dst);
    if (st != dnnl_success) return dnnl_failed("restoring packed weights", st);
    return LY_OK;
}

static const ly_kernel_stateful conv_stateful = {
    .layouts = conv_layouts,
    .prepare = conv_prepare,
    .run = conv_run,
    .release = conv_release,
    .restore_constant = conv_restore,
    .held_constants = conv_held,
};

static const ly_kernel_stateful winograd_stateful = {
    .layouts = conv_layouts,
    .prepare = winograd_prepare,
    .run = conv_run,
    .release = conv_release,
    .restore_constant = conv_restore,
    .held_constants = conv_held,
};

void ly_onednn_register_conv2d(void)
{
    ly_provider_add(LY_OP_CONV2D, "onednn", conv2d_onednn, ly_onednn_predicate, &conv_stateful);
    /* after: tried first, where its predicate takes the call */
    ly_provider_add(LY_OP_CONV2D, "onednn_winograd", conv2d_onednn_winograd, winograd_predicate,
                    &winograd_stateful);
}
