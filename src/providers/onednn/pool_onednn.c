/* SPDX-License-Identifier: MIT */
/*
 * max_pool2d and avg_pool2d on oneDNN's pooling primitive, NCHW as it is. Only
 * where oneDNN has a JIT kernel for it (on AVX-512 machines, for most of
 * LibreYOLO9t's pools: 2-4x the reference); elsewhere it would use its
 * "simple_nchw" loops, 10-30x slower than our reference, so the call is
 * declined and the reference serves it. Prepared primitives and that verdict
 * are cached per shape. For finite inputs the numbers are the reference's
 * (max is exact; the average sums 4 values in another order at most); a NaN
 * in a max window need not propagate as the reference makes it.
 *
 * On channel-blocked maps (a graph keeps a value blocked between nodes that
 * take it: YOLO9's ADown and SPP pools sit between convolutions) the pool is
 * prepared per node as oneDNN's JIT kernel for that layout, on AVX2 CPUs too,
 * so the convolutions around it keep their layout and lose their reorders.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "providers/builtin.h"
#include "providers/onednn/onednn_common.h"
#include "providers/op_cache.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_CAPACITY 64

typedef struct pool_op {
    bool has_jit; /* false: oneDNN has only slow loops for this shape; decline */
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t src, dst;
} pool_op;

static void destroy_op(void *p)
{
    pool_op *op = p;
    if (!op) return;
    if (op->src) dnnl_memory_destroy(op->src);
    if (op->dst) dnnl_memory_destroy(op->dst);
    if (op->prim) dnnl_primitive_destroy(op->prim);
    if (op->stream) dnnl_stream_destroy(op->stream);
    free(op);
}

static ly_op_cache cache = LY_OP_CACHE_INIT(CACHE_CAPACITY, destroy_op);

/* The key's activation field carries the pooling algorithm. */
static void *create_op(const ly_conv_key *k, const ly_kernel_call *call, ly_status *status)
{
    (void)call;
    const char *slot =
        ly_op_name(k->activation == dnnl_pooling_max ? LY_OP_MAX_POOL2D : LY_OP_AVG_POOL2D);
    dnnl_engine_t engine = ly_onednn_engine();
    pool_op *op = calloc(1, sizeof *op);
    dnnl_primitive_desc_t pd = NULL;
    const char *failed = NULL;
    dnnl_status_t st = dnnl_success;
    if (!op) {
        *status = ly_set_error(LY_E_NO_MEMORY, "%s (onednn): out of memory", slot);
        return NULL;
    }
    dnnl_dims_t src_dims = {k->n, k->c, k->h, k->w}, dst_dims = {k->n, k->c, k->ho, k->wo};
    dnnl_dims_t strides = {k->sh, k->sw}, kernel = {k->kh, k->kw}, dilation = {0, 0};
    dnnl_dims_t pad_l = {k->ph, k->pw};
    dnnl_dims_t pad_r = {(k->ho - 1) * k->sh + k->kh - k->h - k->ph,
                         (k->wo - 1) * k->sw + k->kw - k->w - k->pw};
    for (int i = 0; i < 2; i++)
        if (pad_r[i] < 0) pad_r[i] = 0;
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_pooling_v2_desc_t desc;
#define STEP(expr)                                                                                 \
    if ((st = (expr)) != dnnl_success) {                                                           \
        failed = #expr;                                                                            \
        goto done;                                                                                 \
    }
    STEP(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nchw));
    STEP(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nchw));
    STEP(dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference,
                                           (dnnl_alg_kind_t)k->activation, &src_md, &dst_md,
                                           strides, kernel, dilation, pad_l, pad_r));
    st = dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL);
    if (st == dnnl_unimplemented) {
        st = dnnl_success; /* no kernel at all: decline, like a slow one */
        goto done;
    }
    STEP(st);
    const char *impl = "";
    STEP(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    op->has_jit = strncmp(impl, "jit", 3) == 0;
    if (!op->has_jit) goto done;
    STEP(dnnl_primitive_create(&op->prim, pd));
    STEP(dnnl_stream_create(&op->stream, engine, dnnl_stream_default_flags));
    STEP(dnnl_memory_create(&op->src, &src_md, engine, DNNL_MEMORY_NONE));
    STEP(dnnl_memory_create(&op->dst, &dst_md, engine, DNNL_MEMORY_NONE));
#undef STEP
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (failed) {
        *status = ly_onednn_failed(slot, failed, st);
        destroy_op(op);
        return NULL;
    }
    return op;
}

static ly_status run_pool(const char *slot, dnnl_alg_kind_t alg, const ly_kernel_call *call)
{
    if (!ly_onednn_engine())
        return ly_onednn_failed(slot, "dnnl_engine_create", ly_onednn_engine_status());
    const ly_tensor *x = call->in[0], *y = call->out[0];
    const ly_pool2d_params *p = call->params;
    int threads = ly_threads_resolve(call->threads);
    ly_conv_key key;
    memset(&key, 0, sizeof key);
    key.n = x->shape[0];
    key.c = key.o = x->shape[1];
    key.h = x->shape[2];
    key.w = x->shape[3];
    key.ho = y->shape[2];
    key.wo = y->shape[3];
    key.kh = p->kernel[0];
    key.kw = p->kernel[1];
    key.sh = p->stride[0];
    key.sw = p->stride[1];
    key.ph = p->padding[0];
    key.pw = p->padding[1];
    key.activation = alg;
    key.threads = threads;
    int previous = ly_onednn_threads_begin(threads);
    ly_op_entry *entry = NULL;
    void *found = NULL;
    ly_status st = ly_op_cache_acquire(&cache, &key, create_op, call, &entry, &found);
    if (st == LY_OK) {
        pool_op *op = found;
        dnnl_status_t d = dnnl_success;
        const char *failed = NULL;
        if (!op->has_jit) {
            st = ly_set_error(LY_E_DECLINED, "%s (onednn): no JIT kernel for this shape", slot);
        } else if ((d = dnnl_memory_set_data_handle(op->src, x->data)) != dnnl_success ||
                   (d = dnnl_memory_set_data_handle(op->dst, y->data)) != dnnl_success) {
            failed = "dnnl_memory_set_data_handle";
        } else {
            dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, op->src}, {DNNL_ARG_DST, op->dst}};
            if ((d = dnnl_primitive_execute(op->prim, op->stream, 2, args)) != dnnl_success)
                failed = "dnnl_primitive_execute";
            else if ((d = dnnl_stream_wait(op->stream)) != dnnl_success)
                failed = "dnnl_stream_wait";
        }
        if (failed) st = ly_onednn_failed(slot, failed, d);
        ly_op_cache_release(&cache, entry);
    }
    ly_onednn_threads_end(previous);
    return st;
}

/* The NCHW function's own limits, checked when it runs (a call the graph
 * keeps blocked goes to the prepared kernel instead). */
static bool nchw_jit_here(void)
{
    return ly_cpu()->avx512f; /* oneDNN's NCHW pooling kernels are AVX-512 only */
}

/* Small max windows at column stride 1 (HGNetv2's 2x2 stem pool): oneDNN's
 * NCHW kernel is slower there than the reference (16x161x161, 1 thread: 0.89
 * vs 0.72 ms; 16x321x321: 3.9 vs 3.0 ms), let alone the AVX2 one. */
static bool small_stride1_max(const ly_kernel_call *call)
{
    const ly_pool2d_params *p = LY_PARAMS(call, ly_pool2d_params);
    return p->stride[1] == 1 && p->kernel[0] * p->kernel[1] <= 9;
}

static ly_status max_pool2d_onednn(const ly_kernel_call *call)
{
    if (!nchw_jit_here() || small_stride1_max(call)) return LY_E_DECLINED;
    return run_pool(ly_op_name(LY_OP_MAX_POOL2D), dnnl_pooling_max, call);
}

static ly_status avg_pool2d_onednn(const ly_kernel_call *call)
{
    if (!nchw_jit_here()) return LY_E_DECLINED;
    return run_pool(ly_op_name(LY_OP_AVG_POOL2D),
                    LY_PARAMS(call, ly_pool2d_params)->count_include_pad
                        ? dnnl_pooling_avg_include_padding
                        : dnnl_pooling_avg_exclude_padding,
                    call);
}

static ly_status pool_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    if (cpu && !cpu->avx512f && !(call && ly_onednn_unary_blockable(call->in[0]))) {
        *why_not = "oneDNN pools NCHW with JIT kernels only on AVX-512 CPUs (blocked maps of "
                   "whole 8-channel blocks on any)";
        return LY_E_DECLINED;
    }
    return ly_onednn_predicate(call, cpu, why_not);
}

static ly_status max_pool_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    if (call && call->params && small_stride1_max(call) &&
        !ly_onednn_unary_blockable(call->in[0])) {
        *why_not = "small stride-1 max windows on NCHW: slower here than the reference";
        return LY_E_DECLINED;
    }
    return pool_predicate(call, cpu, why_not);
}

/* ---- prepared, on blocked maps -------------------------------------------------------- */

static ly_status pool_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    if (ly_onednn_unary_blockable(call->in[0])) ly_onednn_unary_layouts(out);
    return LY_OK;
}

static ly_status blocked_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                 void **state, dnnl_alg_kind_t alg, const char *slot)
{
    ly_onednn_unary *u;
    ly_status status = ly_onednn_unary_begin(call, info, slot, &u);
    if (status != LY_OK) return status; /* plain maps: the function, per shape */
    const ly_pool2d_params *p = call->params;
    const int64_t *in = call->in[0]->shape, *out = call->out[0]->shape;
    dnnl_dims_t strides = {p->stride[0], p->stride[1]}, kernel = {p->kernel[0], p->kernel[1]};
    dnnl_dims_t dilation = {0, 0}, pad_l = {p->padding[0], p->padding[1]}, pad_r;
    for (int i = 0; i < 2; i++) {
        pad_r[i] = (out[2 + i] - 1) * strides[i] + kernel[i] - in[2 + i] - pad_l[i];
        if (pad_r[i] < 0) pad_r[i] = 0;
    }
    dnnl_pooling_v2_desc_t desc;
    dnnl_status_t st =
        dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, alg, &u->src_md,
                                          &u->dst_md, strides, kernel, dilation, pad_l, pad_r);
    if (st != dnnl_success)
        status = ly_onednn_failed(slot, "dnnl_pooling_v2_forward_desc_init", st);
    else
        status = ly_onednn_unary_create(u, &desc); /* declined: this node runs on plain data */
    if (status != LY_OK) {
        ly_onednn_unary_release(u);
        return status;
    }
    *state = u;
    return LY_OK;
}

static ly_status max_pool_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    return blocked_prepare(call, info, state, dnnl_pooling_max, ly_op_name(LY_OP_MAX_POOL2D));
}

static ly_status avg_pool_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    dnnl_alg_kind_t alg = LY_PARAMS(call, ly_pool2d_params)->count_include_pad
                              ? dnnl_pooling_avg_include_padding
                              : dnnl_pooling_avg_exclude_padding;
    return blocked_prepare(call, info, state, alg, ly_op_name(LY_OP_AVG_POOL2D));
}

static const ly_kernel_stateful max_pool_stateful = {.layouts = pool_layouts,
                                                     .prepare = max_pool_prepare,
                                                     .run = ly_onednn_unary_run,
                                                     .release = ly_onednn_unary_release};
static const ly_kernel_stateful avg_pool_stateful = {.layouts = pool_layouts,
                                                     .prepare = avg_pool_prepare,
                                                     .run = ly_onednn_unary_run,
                                                     .release = ly_onednn_unary_release};

void ly_onednn_register_pool(void)
{
    ly_provider_add(LY_OP_MAX_POOL2D, "onednn", max_pool2d_onednn, max_pool_predicate,
                    &max_pool_stateful);
    ly_provider_add(LY_OP_AVG_POOL2D, "onednn", avg_pool2d_onednn, pool_predicate,
                    &avg_pool_stateful);
}
