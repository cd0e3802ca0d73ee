/* SPDX-License-Identifier: MIT */
/*
 * linear on oneDNN's matmul, prepared: x [..., K] seen as [M, K], times the
 * weight [N, K] transposed, plus the bias (one matmul, or one per band of
 * output columns where the weights pass L2: piece_width); the activation (an
 * eltwise post-op; GELU the gelu slot's kernel right after, see gelu_apart)
 * and the residual (a binary add post-op, read while the tile is in
 * registers) run in the GEMM's epilogue. The weight is reordered once, at
 * prepare, into the layout oneDNN's kernel reads fastest (format "any": packed
 * blocks for its brgemm/gemm kernels), and the state keeps that copy and the
 * bias, so a graph gives the plain weight's pages back (restore writes it back
 * exactly: a reorder only moves values).
 *
 * Concurrency: the primitive runs with a user scratchpad, so one state serves
 * several threads at once; each run brings its own memory objects, scratchpad
 * (per-thread scratch) and a per-thread stream.
 */
#include "core/core.h"
#include "kernels/registry_internal.h"
#include "providers/builtin.h"
#include "providers/onednn/onednn_common.h"
#include "providers/op_cache.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

/* A band of output columns [n0, n0 + n) with its own matmul: the GEMM split
 * along N where its weights would not stay in L2 (piece_width). */
typedef struct linear_piece {
    dnnl_primitive_t matmul;
    dnnl_memory_desc_t dst_md; /* the band's columns of the [M, N] output (row stride N) */
    dnnl_memory_desc_t weights_md, plain_weights_md, scratch_md;
    dnnl_memory_t weights; /* packed, owned */
    dnnl_memory_t bias;    /* [1, n], owned; NULL without a bias */
    int64_t n0, n;
} linear_piece;

#define MAX_PIECES 16

typedef struct linear_state {
    dnnl_memory_desc_t src_md;
    int residual_post_op; /* index of the binary add post-op; -1 without a residual */
    int64_t m, n, k;
    int threads;
    const ly_impl *gelu_after; /* the gelu slot's kernel run on the output, or NULL */
    size_t scratch_bytes;      /* the most any piece's matmul needs */
    int n_pieces;
    linear_piece piece[MAX_PIECES];
} linear_state;

/* Output columns a matmul takes. oneDNN 2.6's f32 matmul re-reads weights
 * that do not fit in L2 for every block of rows; where they pass ~1.2 MiB,
 * bands of at most 384 columns and 1.2 MiB each ran in 0.93-0.97x the time of
 * the whole GEMM (RF-DETR's [580, 384] x [384, 1536] in four bands,
 * [580, 1536] x [1536, 384] in two, its decoder's [300, 2048] x [2048, 256]
 * in two; one thread, interleaved, a Sapphire Rapids core); RF-DETR-n
 * 0.96-0.98x the time at 1 thread, 0.99 at 2. Not below 256 rows a thread:
 * there the bands' extra parallel regions cost more (that decoder GEMM at 2
 * threads: 1.07-1.11x). Bands are whole 16-column blocks, at least 96. Only
 * where oneDNN's matmul is its brgemm (AVX-512 CPUs): on AVX2 ones it is its
 * sgemm, which packs panels of its own (unmeasured there). */
static int64_t piece_width(int64_t m, int64_t k, int64_t n, int threads)
{
    const int64_t max_columns = 384, max_bytes = 1200 << 10, min_columns = 96;
    if (!ly_cpu()->avx512f || m / (threads > 0 ? threads : 1) < 256 ||
        k * n * (int64_t)sizeof(float) <= max_bytes)
        return n;
    for (int64_t pieces = 2; pieces <= MAX_PIECES; pieces++) {
        int64_t width = ((n + pieces - 1) / pieces + 15) / 16 * 16;
        if (width < min_columns) break;
        if (width <= max_columns && k * width * (int64_t)sizeof(float) <= max_bytes) return width;
    }
    return n;
}

/* GELU after the GEMM rather than as oneDNN's erf post-op: the gelu slot's
 * kernel (a polynomial erf) takes ~0.44 ns an element against ~0.6 for the
 * post-op where the output stays in cache (SwinIR's fc1 on a slab of
 * [1024, 120]: 0.177 -> 0.151 ms; SwinIR-s at 256 0.96-0.98x the time, ViT-Ti
 * 0.98-0.99x), and costs no more on larger ones (RF-DETR-n, Swin-T within
 * 1%). Whatever the size, so that a linear's bits do not depend on how many
 * rows a call gets (slabs, batches). Only where the slot has a kernel other
 * than its reference. */
static const ly_impl *gelu_apart(const ly_kernel_call *call, int threads)
{
    const ly_linear_params *p = LY_PARAMS(call, ly_linear_params);
    if (p->activation != LY_ACT_GELU || call->in[3]) return NULL;
    return ly_kernel_select_in_place(LY_OP_GELU, call->out[0], threads);
}

static ly_status failed(const char *what, dnnl_status_t st)
{
    return ly_onednn_failed(ly_op_name(LY_OP_LINEAR), what, st);
}

#define STEP(expr)                                                                                 \
    do {                                                                                           \
        dnnl_status_t step_ = (expr);                                                              \
        if (step_ != dnnl_success) {                                                               \
            status = failed(#expr, step_);                                                         \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

static void linear_release(void *state)
{
    linear_state *s = state;
    if (!s) return;
    for (int i = 0; i < s->n_pieces; i++) {
        linear_piece *pc = &s->piece[i];
        if (pc->matmul) dnnl_primitive_destroy(pc->matmul);
        if (pc->weights) dnnl_memory_destroy(pc->weights);
        if (pc->bias) dnnl_memory_destroy(pc->bias);
    }
    free(s);
}

/* A one-off reorder between two descriptions of the same values. */
static dnnl_status_t reorder(const dnnl_memory_desc_t *from_md, void *from,
                             const dnnl_memory_desc_t *to_md, void *to)
{
    dnnl_engine_t engine = ly_onednn_engine();
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t a = NULL, b = NULL;
    dnnl_stream_t stream = ly_onednn_thread_stream();
    dnnl_status_t st = stream ? dnnl_success : dnnl_runtime_error;
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&pd, from_md, engine, to_md, engine, NULL);
    if (st == dnnl_success) st = dnnl_primitive_create(&prim, pd);
    if (st == dnnl_success) st = dnnl_memory_create(&a, from_md, engine, from);
    if (st == dnnl_success) st = dnnl_memory_create(&b, to_md, engine, to);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
        st = dnnl_primitive_execute(prim, stream, 2, args);
    }
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    if (a) dnnl_memory_destroy(a);
    if (b) dnnl_memory_destroy(b);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st;
}

/* Piece pc of the GEMM: its matmul (src_md and the post-ops as the whole
 * call's, dst and residual the band's columns), its weights packed from
 * rows [n0, n0 + n) of the caller's [N, K] and its bias. */
static ly_status prepare_piece(linear_state *s, linear_piece *pc, const ly_kernel_call *call,
                               int64_t epilogue)
{
    dnnl_engine_t engine = ly_onednn_engine();
    const ly_tensor *w = call->in[1], *b = call->in[2];
    const ly_linear_params *p = LY_PARAMS(call, ly_linear_params);
    ly_status status = LY_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_dims_t w_dims = {s->k, pc->n}, bias_dims = {1, pc->n}, dst_dims = {s->m, pc->n};
    dnnl_dims_t dst_strides = {s->n, 1}, plain_strides = {1, s->k};
    dnnl_memory_desc_t w_any, bias_md;
    STEP(dnnl_memory_desc_init_by_strides(&pc->dst_md, 2, dst_dims, dnnl_f32, dst_strides));
    /* The caller's [N, K] row-major weight is [K, N] with strides (1, K). */
    STEP(dnnl_memory_desc_init_by_strides(&pc->plain_weights_md, 2, w_dims, dnnl_f32,
                                          plain_strides));
    STEP(dnnl_memory_desc_init_by_tag(&w_any, 2, w_dims, dnnl_f32, dnnl_format_tag_any));
    STEP(dnnl_memory_desc_init_by_tag(&bias_md, 2, bias_dims, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t desc;
    STEP(dnnl_matmul_desc_init(&desc, &s->src_md, &w_any, b ? &bias_md : NULL, &pc->dst_md));
    STEP(dnnl_primitive_attr_create(&attr));
    STEP(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (epilogue != LY_ACT_NONE || call->in[3]) {
        dnnl_post_ops_t post_ops = NULL;
        dnnl_status_t st = dnnl_post_ops_create(&post_ops);
        if (st == dnnl_success)
            st = ly_onednn_append_activation(post_ops, epilogue, (float)p->alpha);
        if (st == dnnl_success && call->in[3]) {
            s->residual_post_op = dnnl_post_ops_len(post_ops);
            st = dnnl_post_ops_append_binary(post_ops, dnnl_binary_add, &pc->dst_md);
        }
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, post_ops);
        if (post_ops) dnnl_post_ops_destroy(post_ops);
        if (st == dnnl_unimplemented) {
            status = LY_E_DECLINED;
            goto done;
        }
        STEP(st);
    }
    dnnl_status_t made = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    if (made == dnnl_unimplemented) {
        status = LY_E_DECLINED;
        goto done;
    }
    STEP(made);
    pc->weights_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    pc->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t scratch_bytes = dnnl_memory_desc_get_size(&pc->scratch_md);
    if (scratch_bytes > s->scratch_bytes) s->scratch_bytes = scratch_bytes;
    STEP(dnnl_primitive_create(&pc->matmul, pd));
    STEP(dnnl_memory_create(&pc->weights, &pc->weights_md, engine, DNNL_MEMORY_ALLOCATE));
    void *packed = NULL;
    STEP(dnnl_memory_get_data_handle(pc->weights, &packed));
    STEP(reorder(&pc->plain_weights_md, (float *)w->data + pc->n0 * s->k, &pc->weights_md, packed));
    if (b) {
        void *handle = NULL;
        STEP(dnnl_memory_create(&pc->bias, &bias_md, engine, DNNL_MEMORY_ALLOCATE));
        STEP(dnnl_memory_get_data_handle(pc->bias, &handle));
        memcpy(handle, (const float *)b->data + pc->n0, (size_t)pc->n * sizeof(float));
    }
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return status;
}

static ly_status linear_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                void **state)
{
    dnnl_engine_t engine = ly_onednn_engine();
    if (!engine) return failed("dnnl_engine_create", ly_onednn_engine_status());
    const ly_tensor *x = call->in[0], *w = call->in[1], *b = call->in[2];
    if (!(info->constant_inputs & (1u << 1)) || (b && !(info->constant_inputs & (1u << 2))))
        return LY_E_DECLINED; /* weights that change between calls: the reference */
    int64_t k = x->shape[x->ndim - 1], n = w->shape[0], m = k ? ly_tensor_numel(x) / k : 0;
    if (m < 1 || n < 1 || k < 1) return LY_E_DECLINED; /* nothing for a GEMM to do */
    linear_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "linear (onednn): out of memory");
    s->m = m, s->n = n, s->k = k;
    s->threads = info->threads;
    s->gelu_after = gelu_apart(call, info->threads);
    s->residual_post_op = -1;
    ly_status status = LY_OK;
    int previous = ly_onednn_threads_begin(info->threads);
    dnnl_dims_t src_dims = {m, k};
    STEP(dnnl_memory_desc_init_by_tag(&s->src_md, 2, src_dims, dnnl_f32, dnnl_ab));
    int64_t epilogue = s->gelu_after ? LY_ACT_NONE : LY_PARAMS(call, ly_linear_params)->activation;
    int64_t width = piece_width(m, k, n, info->threads);
    for (int64_t n0 = 0; n0 < n && status == LY_OK; n0 += width) {
        linear_piece *pc = &s->piece[s->n_pieces++];
        pc->n0 = n0;
        pc->n = n - n0 < width ? n - n0 : width;
        status = prepare_piece(s, pc, call, epilogue);
    }
done:
    ly_onednn_threads_end(previous);
    if (status != LY_OK) {
        linear_release(s);
        if (status == LY_E_DECLINED) ly_clear_error();
        return status;
    }
    *state = s;
    return LY_OK;
}

static ly_status linear_run(void *state, const ly_kernel_call *call)
{
    linear_state *s = state;
    dnnl_engine_t engine = ly_onednn_engine();
    dnnl_stream_t stream = ly_onednn_thread_stream();
    if (!stream) return failed("dnnl_stream_create", dnnl_runtime_error);
    void *scratch = s->scratch_bytes ? ly_nn_scratch(2, s->scratch_bytes) : NULL;
    if (s->scratch_bytes && !scratch)
        return ly_set_error(LY_E_NO_MEMORY, "linear (onednn): out of memory for the scratchpad");
    ly_status status = LY_OK;
    dnnl_memory_t src = NULL, dst = NULL, pad = NULL, residual = NULL;
    int previous = ly_onednn_threads_begin(s->threads);
    STEP(dnnl_memory_create(&src, &s->src_md, engine, call->in[0]->data));
    for (int i = 0; i < s->n_pieces; i++) {
        const linear_piece *pc = &s->piece[i];
        STEP(dnnl_memory_create(&dst, &pc->dst_md, engine, (float *)call->out[0]->data + pc->n0));
        STEP(dnnl_memory_create(&pad, &pc->scratch_md, engine, scratch));
        dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, src},
                                   {DNNL_ARG_WEIGHTS, pc->weights},
                                   {DNNL_ARG_DST, dst},
                                   {DNNL_ARG_SCRATCHPAD, pad}};
        int nargs = 4;
        if (pc->bias) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, pc->bias};
        if (s->residual_post_op >= 0) {
            STEP(dnnl_memory_create(&residual, &pc->dst_md, engine,
                                    (float *)call->in[3]->data + pc->n0));
            args[nargs++] = (dnnl_exec_arg_t){
                DNNL_ARG_ATTR_MULTIPLE_POST_OP(s->residual_post_op) | DNNL_ARG_SRC_1, residual};
        }
        STEP(dnnl_primitive_execute(pc->matmul, stream, nargs, args));
        STEP(dnnl_stream_wait(stream)); /* before its memory objects go */
        dnnl_memory_destroy(dst);
        dnnl_memory_destroy(pad);
        dst = pad = NULL;
        if (residual) dnnl_memory_destroy(residual);
        residual = NULL;
    }
done:
    ly_onednn_threads_end(previous);
    if (src) dnnl_memory_destroy(src);
    if (dst) dnnl_memory_destroy(dst);
    if (pad) dnnl_memory_destroy(pad);
    if (residual) dnnl_memory_destroy(residual);
    if (status == LY_OK && s->gelu_after) { /* in place (an element-wise slot) */
        ly_kernel_call g;
        ly_kernel_call_init(&g);
        g.in[0] = call->out[0];
        g.out[0] = call->out[0];
        g.threads = s->threads;
        status = ly_impl_run(s->gelu_after, &g);
        if (status != LY_OK) status = ly_kernel_dispatch_op(LY_OP_GELU, &g); /* its fallbacks */
    }
    return status;
}

static uint32_t linear_held(void *state)
{
    const linear_state *s = state;
    return 1u << 1 | (s->piece[0].bias ? 1u << 2 : 0u);
}

static ly_status linear_restore(void *state, int index, void *dst)
{
    linear_state *s = state;
    ly_status status = LY_OK;
    if (index != 1 && !(index == 2 && s->piece[0].bias))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "linear (onednn): input %d is not held", index);
    for (int i = 0; i < s->n_pieces; i++) {
        const linear_piece *pc = &s->piece[i];
        void *from = NULL;
        if (index == 2) {
            STEP(dnnl_memory_get_data_handle(pc->bias, &from));
            memcpy((float *)dst + pc->n0, from, (size_t)pc->n * sizeof(float));
            continue;
        }
        STEP(dnnl_memory_get_data_handle(pc->weights, &from));
        STEP(reorder(&pc->weights_md, from, &pc->plain_weights_md, (float *)dst + pc->n0 * s->k));
    }
done:
    return status;
}

#undef STEP

static const ly_kernel_stateful linear_stateful = {.prepare = linear_prepare,
                                                   .run = linear_run,
                                                   .release = linear_release,
                                                   .restore_constant = linear_restore,
                                                   .held_constants = linear_held};

void ly_onednn_register_linear(void)
{
    ly_provider_add(LY_OP_LINEAR, "onednn", NULL, ly_onednn_predicate, &linear_stateful);
}
