/* SPDX-License-Identifier: MIT */
/*
 * conv2d_int8 on oneDNN's integer convolution ("onednn_int8"): the execute
 * provider of LibreYOLO's int8 recipe. The input is quantized with the
 * module's calibrated range into u8 codes (quantize_u8_avx2.c, the reference's
 * codes exactly), the weights stay int8 codes packed for oneDNN, and the
 * kernel sums code products in int32 — exact — then scales each output
 * channel once by s_x * s_w[o] and adds the bias. SiLU and sigmoid, with a
 * post-affine after them, run in the copy back into the graph's layout with
 * the residual (on AVX-512 CPUs: oneDNN 2.6's swish post-op cost its int8
 * kernels more than a thin convolution's sums); other activations, and those
 * elsewhere, run as oneDNN's post-ops.
 *
 * Only where the CPU has VNNI (vpdpbusd): oneDNN's int8 kernels without it
 * multiply with vpmaddubsw, whose int16 pair sums saturate (measured on an AVX2
 * EPYC: 8190 of 8192 outputs of a full-range u8 conv wrong), so the provider
 * declines unless oneDNN chose a VNNI kernel.
 *
 * Bands: a run splits each image's output rows into bands, one per thread (at
 * least MIN_BAND_ROWS rows each), and every band is done start to finish by
 * one thread inside a single parallel region: it quantizes the input rows the
 * band reads (a 3x3's halo rows once per neighbour), convolves them with a
 * primitive made for one thread, and writes its rows back with the residual.
 * Quantizer, convolution and reorder each in their own parallel region, with
 * oneDNN splitting the convolution, kept the int8 LibreYOLO9t's 2 threads in
 * libgomp's barrier spin 24% of the time; in bands it runs in 0.84-0.89x the
 * time (Zen-5-like EPYC, interleaved minima). A band's input holds its
 * padding rows as codes of 0 (the zero point, as oneDNN pads), so every band
 * of as many rows is the same convolution and oneDNN's primitive cache gives
 * them one kernel (padding in each band's geometry instead added 25 MiB of JIT
 * code to that model's resident memory).
 *
 * Layouts: oneDNN's int8 kernels read and write channels-last; the graph keeps
 * f32 maps channel-blocked. The quantizer reads the blocked (or plain) input
 * and writes u8 channels-last; the f32 output comes back into the graph's
 * layout with the residual added (quantize_u8_avx2.c) — except where that
 * layout already is channels-last (16 or 8 output channels in one block):
 * there the kernel writes in place and a sum post-op adds the residual. (A 1x1
 * convolution with more channels once ran as one convolution per block,
 * writing in place, against oneDNN's slow reorder; with the copy back above,
 * whole is 5% faster over LibreYOLO9t's int8 convolutions at 1 thread.)
 *
 * AMX where it pays (amx_pays): oneDNN 2.6 offers its AMX kernels first on a
 * Xeon with AMX-INT8; in the model they win on the 3x3s of 32 channels and
 * more on large maps. (Measured while every kernel ended in oneDNN's swish post-op,
 * AMX for all convolutions took 1.13x the time over the model and for the
 * 3x3s alone 1.01-1.04x; with the activation in the copy back it is faster.)
 *
 * Measured (1 thread, AVX-512 VNNI Xeon, oneDNN 2.6): 64->64 3x3 on 80x80
 * 0.86 ms against 2.85 ms for the f32 convolution, 128->64 1x1 0.52 vs 1.04.
 *
 * "amx_int8", registered after it and so asked first: the same bands,
 * quantizer, folds and copy back, the sums on AMX-INT8 tiles by our own
 * kernel (providers/amx/amx.h) instead of oneDNN's primitives, for every
 * convolution without groups or dilation whose epilogue is the copy back's.
 * Its quantizer pads each band's rows left and right with codes of the zero
 * point (the kernel reads windows straight from the rows). Outputs
 * bit-identical to oneDNN's; the int8 LibreYOLO9t's network in 0.84x the
 * time at 1 thread, 0.82x at 2 (a 2-core VM of an AMX Xeon, against this
 * provider alone, 10 interleaved process pairs).
 */
#include "core/core.h"
#include "kernels/registry_internal.h"
#include "libreyolo/nn.h"
#include "ops/quant/reference.h"
#include "providers/amx/amx.h"
#include "providers/avx2/activate.h"
#include "providers/builtin.h"
#include "providers/onednn/onednn_common.h"
#include "providers/op_cache.h"

#include <dnnl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The quantizer is AVX2 code: builds without the AVX2 providers register nothing. */
#ifdef LY_HAVE_AVX2_PROVIDERS

/* Tests only (ly_onednn_int8_allow_without_vnni): accept oneDNN's int8
 * kernels without VNNI too. They are exact while no pair of u8 x s8 products
 * leaves int16 — inputs whose codes stay <= 127 — which lets a machine without
 * VNNI check this provider's own work (quantizer, packing, bands, residual,
 * codes given back and restored) on such inputs. */
static atomic_int allow_without_vnni;

void ly_onednn_int8_allow_without_vnni(int allow)
{
    atomic_store(&allow_without_vnni, allow != 0);
}

/* At most this many bands, each of at least this many output rows. */
#define MAX_BANDS 64
#define MIN_BAND_ROWS 4

/* The convolution of one band of output rows (bands of as many rows share
 * oneDNN's kernel through its primitive cache). */
typedef struct int8_band {
    dnnl_primitive_t conv;
    dnnl_memory_t weights, bias; /* the first band's packed codes, read by every band */
} int8_band;

/* What one task (an image's band) hands oneDNN: set at each run, so one per
 * image and band, as the tasks of a run go side by side. */
typedef struct int8_task {
    dnnl_memory_t src, dst, scratchpad;
} int8_task;

typedef struct int8_op {
    ly_onednn_spare spare; /* first: a prepared state's idle list */
    dnnl_stream_t stream;  /* packing the weights */
    dnnl_memory_t zero_point;
    size_t scratchpad_bytes; /* the most any band's convolution needs */
    int n_bands, n_tasks;
    int8_band band[MAX_BANDS];
    int8_task task[]; /* n x n_bands, image-major */
} int8_op;

typedef struct int8_state {
    ly_conv_key key;
    ly_layout in_layout, out_layout;
    float inv, zero_point; /* the reference's quantizer: 1/s_x and zp (int8 codes) */
    int32_t zero_point_u8; /* zp + 128: what the u8 codes sit on */
    float *scales;         /* s_x * s_w[o], per output channel */
    float *bias;           /* [O] or NULL */
    /* bias[o] / scale[o]: added to the integer sum by the kernel itself, before
     * the scales, where every quotient is finite (NULL: the bias is a binary
     * post-op after them, 7-18% slower on oneDNN 2.6's int8 kernels). */
    float *bias_in_sum;
    /* The activation and post-affine, run in the copy back where
     * own_epilogue, else as oneDNN's post-ops. */
    ly_onednn_epilogue epilogue;
    bool own_epilogue;
    /* The output's layout is channels-last already (one block of 16 or 8
     * channels holds every channel) and nothing is left for the copy back:
     * the kernel writes in place, the residual added by a sum post-op. */
    bool direct;
    int n_bands;
    int64_t band_row[MAX_BANDS + 1]; /* band b: output rows [band_row[b], band_row[b + 1]) */
    /* Per-thread scratch of the largest band: its u8 channels-last input rows,
     * then (not direct) its f32 channels-last output rows. */
    size_t band_src_bytes, band_dst_bytes;
    int8_op *primary; /* owns the packed weights (NULL on AMX) */
    /* amx_int8: the sums on AMX tiles (providers/amx/amx.h) instead of
     * oneDNN's primitives. A band's codes then carry pad_left columns of the
     * zero point left of each row, are row_pixels pixels a row, and are
     * followed by the slack the kernel reads past them. (oneDNN: 0, w, 0.) */
    ly_amx_int8_conv *amx;
    int64_t pad_left, row_pixels;
    /* The node writing this one's residual, folded into it
     * (int8_fold_residual): its prepared state, run in this one's bands. */
    struct int8_state *branch;
    ly_onednn_spares spares;
} int8_state;

static const char *slot_name(void)
{
    return ly_op_name(LY_OP_CONV2D_INT8);
}

static int n_tasks(const int8_state *s)
{
    return (int)s->key.n * s->n_bands;
}

static void destroy_op(int8_op *op)
{
    if (!op) return;
    for (int b = 0; b < op->n_bands; b++) {
        int8_band *band = &op->band[b];
        if (band->conv) dnnl_primitive_destroy(band->conv);
        if (band->weights) dnnl_memory_destroy(band->weights);
        if (band->bias) dnnl_memory_destroy(band->bias);
    }
    for (int t = 0; t < op->n_tasks; t++) {
        dnnl_memory_t mems[] = {op->task[t].src, op->task[t].dst, op->task[t].scratchpad};
        for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
            if (mems[i]) dnnl_memory_destroy(mems[i]);
    }
    if (op->zero_point) dnnl_memory_destroy(op->zero_point);
    if (op->stream) dnnl_stream_destroy(op->stream);
    free(op);
}

static int block_of_layout(ly_layout layout)
{
    return layout == LY_LAYOUT_NCHW16C ? 16 : layout == LY_LAYOUT_NCHW8C ? 8 : 0;
}

#define DNNL_TRY(expr)                                                                             \
    do {                                                                                           \
        dnnl_status_t dnnl_st_ = (expr);                                                           \
        if (dnnl_st_ != dnnl_success) {                                                            \
            *status = ly_onednn_failed(slot_name(), #expr, dnnl_st_);                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static dnnl_status_t make_attr(const int8_state *s, const dnnl_memory_desc_t *bias_md,
                               dnnl_primitive_attr_t *out)
{
    const ly_conv_key *k = &s->key;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    int32_t runtime_zp = DNNL_RUNTIME_S32_VAL;
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_output_scales(attr, k->o, 1 << 1, s->scales);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &runtime_zp);
    /* Bands run side by side: each call's scratch is its thread's own. */
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success) st = dnnl_post_ops_create(&post_ops);
    /* The bias after the scales (the convolution's own bias would be added to
     * the integer sum before them). */
    if (st == dnnl_success && bias_md)
        st = dnnl_post_ops_append_binary(post_ops, dnnl_binary_add, bias_md);
    float alpha;
    memcpy(&alpha, &k->alpha_bits, sizeof alpha);
    if (st == dnnl_success && !s->own_epilogue)
        st = ly_onednn_append_activation(post_ops, k->activation, alpha);
    if (st == dnnl_success && k->post_affine && !s->own_epilogue) {
        float scale, shift;
        memcpy(&scale, &k->post_scale_bits, sizeof scale);
        memcpy(&shift, &k->post_shift_bits, sizeof shift);
        st = dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_linear, scale, shift);
    }
    if (st == dnnl_success && s->direct && k->has_residual)
        st = dnnl_post_ops_append_sum(post_ops, 1.0f);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, post_ops);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (st != dnnl_success && attr) {
        dnnl_primitive_attr_destroy(attr);
        attr = NULL;
    }
    *out = attr;
    return st;
}

/* Whether oneDNN's AMX kernels (offered first where the CPU has AMX-INT8)
 * may serve this convolution: alone, in ONEDNN_VERBOSE on the int8
 * LibreYOLO9t (1 thread, a 2-core VM of an AMX Xeon), its AMX 3x3s took
 * 0.4-0.8x the VNNI kernels' time (16->16 on 80x80 0.073 against 0.112 ms,
 * 32->32 0.131 against 0.328) and its 1x1s 0.6-0.9x from 128 input channels
 * up but 1.0-1.7x below. In the model, with the activation in the copy back
 * (per-node profile, separate processes, another AMX Xeon), AMX won only the
 * 3x3s of 32 channels and more on maps of 80x80 and up (0.06-0.1 ms each);
 * the 16-channel 3x3s, the small maps and the wide 1x1s ran faster on VNNI.
 * Those alone on AMX (separate processes, minima of 5-7 rounds): 0.97x the
 * time at 1 thread and 0.97x at 2 (medians 1.00x, 0.92x) of AMX for every
 * 3x3 and wide 1x1. */
static bool amx_pays(const ly_conv_key *k)
{
    return k->kh * k->kw > 1 && k->c / k->groups >= 32 && k->o >= 32 && k->h * k->w >= 80 * 80;
}

/* The rows band `band` writes and reads: output rows [r0, r0 + rows), input
 * rows [src_row0, src_row0 + src_rows), some of them above or below the map
 * (its padding, as codes of 0). */
typedef struct band_rows {
    int64_t r0, rows, src_row0, src_rows;
} band_rows;

static band_rows band_of(const int8_state *s, int band)
{
    const ly_conv_key *k = &s->key;
    band_rows b = {.r0 = s->band_row[band], .rows = s->band_row[band + 1] - s->band_row[band]};
    b.src_row0 = b.r0 * k->sh - k->ph;
    b.src_rows = (b.rows - 1) * k->sh + (k->kh - 1) * k->dh + 1;
    return b;
}

/* Band `b` of operator `op`: its convolution, weights (packed from the codes
 * of `call`, read from `share`'s or, past the first band, from the first
 * band's) and bias; and the memory its tasks hand oneDNN. Returns false with
 * *status set. */
static bool create_band(const int8_state *s, const ly_kernel_call *call, const int8_op *share,
                        int8_op *op, int b, size_t *scratchpad_bytes, ly_status *status)
{
    const ly_conv_key *k = &s->key;
    dnnl_engine_t engine = ly_onednn_engine();
    int8_band *band = &op->band[b];
    band_rows rows = band_of(s, b);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_t weights_reorder = NULL;
    dnnl_memory_t weights_user = NULL;
    dnnl_dims_t src_dims = {1, k->c, rows.src_rows, k->w}, dst_dims = {1, k->o, rows.rows, k->wo};
    dnnl_dims_t strides = {k->sh, k->sw}, dilates = {k->dh - 1, k->dw - 1};
    dnnl_dims_t pad_l = {0, k->pw},
                pad_r = {0, (k->wo - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->w - k->pw};
    if (pad_r[1] < 0) pad_r[1] = 0;
    dnnl_memory_desc_t src_md, dst_md, w_any, w_user, bias_md;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_u8, dnnl_nhwc));
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc));
    if (k->groups == 1) {
        dnnl_dims_t wd = {k->o, k->c, k->kh, k->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_s8, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 4, wd, dnnl_s8, dnnl_oihw));
    } else {
        dnnl_dims_t wd = {k->groups, k->o / k->groups, k->c / k->groups, k->kh, k->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 5, wd, dnnl_s8, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 5, wd, dnnl_s8, dnnl_goihw));
    }
    if (s->bias_in_sum)
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_md, 1, (dnnl_dims_t){k->o}, dnnl_f32, dnnl_x));
    else
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_md, 4, (dnnl_dims_t){1, k->o, 1, 1}, dnnl_f32,
                                              dnnl_nchw));
    dnnl_convolution_desc_t desc;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
        &desc, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &w_any,
        s->bias_in_sum ? &bias_md : NULL, &dst_md, strides, dilates, pad_l, pad_r));
    DNNL_TRY(make_attr(s, s->bias && !s->bias_in_sum ? &bias_md : NULL, &attr));
    dnnl_status_t made = ly_onednn_primitive_desc_create_skipping(&pd, &desc, attr, engine,
                                                                  amx_pays(k) ? NULL : "amx");
    const char *impl = "";
    if (made == dnnl_success) dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    /* VNNI's and AMX's integer products sum in int32 without saturating */
    bool exact = strstr(impl, "vnni") || strstr(impl, "amx") || atomic_load(&allow_without_vnni);
    if (made == dnnl_unimplemented || (made == dnnl_success && !exact)) {
        /* Not a failure: no exact integer kernel here; the next one serves it. */
        ly_log(LY_LOG_DEBUG, "%s (onednn_int8): %lld->%lld %lldx%lld declined (%s)", slot_name(),
               (long long)k->c, (long long)k->o, (long long)k->kh, (long long)k->kw,
               made == dnnl_success ? impl : "no implementation");
        *status = LY_E_DECLINED;
        goto fail;
    }
    DNNL_TRY(made);
    if (b == 0)
        ly_log(LY_LOG_DEBUG,
               "%s (onednn_int8): %lld->%lld %lldx%lld /%lld g%lld on %lldx%lld: %s (%d band%s)",
               slot_name(), (long long)k->c, (long long)k->o, (long long)k->kh, (long long)k->kw,
               (long long)k->sh, (long long)k->groups, (long long)k->h, (long long)k->w, impl,
               s->n_bands, s->n_bands == 1 ? "" : "s");
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (b > 0) {
        const dnnl_memory_desc_t *first_w_md = NULL;
        DNNL_TRY(dnnl_memory_get_memory_desc(op->band[0].weights, &first_w_md));
        if (!dnnl_memory_desc_equal(w_md, first_w_md)) {
            /* Not expected (the bands differ in rows only); the next one serves it. */
            ly_log(LY_LOG_DEBUG, "%s (onednn_int8): bands would pack the weights apart: declined",
                   slot_name());
            *status = LY_E_DECLINED;
            goto fail;
        }
    }
    DNNL_TRY(dnnl_primitive_create(&band->conv, pd));
    const int8_band *packed_by = b > 0 ? &op->band[0] : share ? &share->band[0] : NULL;
    if (packed_by) {
        void *packed = NULL;
        DNNL_TRY(dnnl_memory_get_data_handle(packed_by->weights, &packed));
        DNNL_TRY(dnnl_memory_create(&band->weights, w_md, engine, packed));
    } else {
        /* Packing also computes oneDNN's zero-point compensation into the
         * weights' extra space. */
        DNNL_TRY(dnnl_memory_create(&band->weights, w_md, engine, DNNL_MEMORY_ALLOCATE));
        DNNL_TRY(dnnl_memory_create(&weights_user, &w_user, engine, call->in[1]->data));
        dnnl_primitive_desc_t wpd = NULL;
        DNNL_TRY(dnnl_reorder_primitive_desc_create(&wpd, &w_user, engine, w_md, engine, NULL));
        dnnl_status_t made_reorder = dnnl_primitive_create(&weights_reorder, wpd);
        dnnl_primitive_desc_destroy(wpd);
        DNNL_TRY(made_reorder);
        dnnl_exec_arg_t wargs[] = {{DNNL_ARG_FROM, weights_user}, {DNNL_ARG_TO, band->weights}};
        DNNL_TRY(dnnl_primitive_execute(weights_reorder, op->stream, 2, wargs));
        DNNL_TRY(dnnl_stream_wait(op->stream));
    }
    if (s->bias)
        DNNL_TRY(dnnl_memory_create(&band->bias, &bias_md, engine,
                                    s->bias_in_sum ? s->bias_in_sum : s->bias));
    const dnnl_memory_desc_t *pad_md =
        dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t pad_bytes = pad_md ? dnnl_memory_desc_get_size(pad_md) : 0;
    if (pad_bytes > *scratchpad_bytes) *scratchpad_bytes = pad_bytes;
    for (int64_t image = 0; image < k->n; image++) {
        int8_task *task = &op->task[image * s->n_bands + b];
        DNNL_TRY(dnnl_memory_create(&task->src, &src_md, engine, DNNL_MEMORY_NONE));
        DNNL_TRY(dnnl_memory_create(&task->dst, &dst_md, engine, DNNL_MEMORY_NONE));
        if (pad_bytes)
            DNNL_TRY(dnnl_memory_create(&task->scratchpad, pad_md, engine, DNNL_MEMORY_NONE));
    }
    if (weights_reorder) dnnl_primitive_destroy(weights_reorder);
    if (weights_user) dnnl_memory_destroy(weights_user);
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_desc_destroy(pd);
    return true;

fail:
    if (weights_reorder) dnnl_primitive_destroy(weights_reorder);
    if (weights_user) dnnl_memory_destroy(weights_user);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return false;
}

/* An operator for the state's call; `share`: the operator whose packed weights
 * this one reads (NULL: pack the codes of `call`). */
static int8_op *create_op(const int8_state *s, const ly_kernel_call *call, const int8_op *share,
                          ly_status *status)
{
    dnnl_engine_t engine = ly_onednn_engine();
    int8_op *op = calloc(1, sizeof *op + (size_t)n_tasks(s) * sizeof op->task[0]);
    if (!op) {
        *status = ly_set_error(LY_E_NO_MEMORY, "%s (onednn_int8): out of memory", slot_name());
        return NULL;
    }
    op->n_bands = s->n_bands;
    op->n_tasks = n_tasks(s);
    DNNL_TRY(dnnl_stream_create(&op->stream, engine, dnnl_stream_default_flags));
    dnnl_memory_desc_t zp_md;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&zp_md, 1, (dnnl_dims_t){1}, dnnl_s32, dnnl_x));
    DNNL_TRY(dnnl_memory_create(&op->zero_point, &zp_md, engine, DNNL_MEMORY_ALLOCATE));
    void *zp = NULL;
    DNNL_TRY(dnnl_memory_get_data_handle(op->zero_point, &zp));
    memcpy(zp, &s->zero_point_u8, sizeof s->zero_point_u8);
    /* A band runs on one thread: its kernel is chosen and split for one. */
    int threads = ly_onednn_threads_begin(1);
    bool made = true;
    for (int b = 0; made && b < s->n_bands; b++)
        made = create_band(s, call, share, op, b, &op->scratchpad_bytes, status);
    ly_onednn_threads_end(threads);
    if (made) return op;

fail:
    destroy_op(op);
    return NULL;
}

#undef DNNL_TRY

typedef struct band_job {
    const int8_state *s;
    int8_op *op;
    int8_op *branch_op; /* the folded producer's (s->branch), or NULL */
    const ly_kernel_call *call;
    /* what a task could not do (its thread's last error is not the caller's) */
    dnnl_status_t failed;
    const char *what;
    pthread_mutex_t lock;
} band_job;

static void band_failed(band_job *job, dnnl_status_t st, const char *what)
{
    pthread_mutex_lock(&job->lock);
    if (job->failed == dnnl_success) {
        job->failed = st;
        job->what = what;
    }
    pthread_mutex_unlock(&job->lock);
}

/* The input rows band `rows` of `s` reads, quantized into `codes` (u8
 * channels-last, s->row_pixels a row from s->pad_left columns left of the
 * map); rows above or below the map, and columns left or right of it, are
 * codes of the zero point. */
static void quantize_band(const int8_state *s, const float *x, band_rows rows, uint8_t *codes)
{
    const ly_conv_key *k = &s->key;
    int64_t y0 = rows.src_row0, y1 = y0 + rows.src_rows;
    int64_t real0 = y0 < 0 ? 0 : y0, real1 = y1 > k->h ? k->h : y1;
    size_t row_bytes = (size_t)(s->row_pixels * k->c), left = (size_t)(s->pad_left * k->c);
    size_t right = row_bytes - left - (size_t)(k->w * k->c);
    memset(codes, s->zero_point_u8, (size_t)(real0 - y0) * row_bytes);
    for (int64_t y = real0; (left || right) && y < real1; y++) {
        uint8_t *row = codes + (size_t)(y - y0) * row_bytes;
        memset(row, s->zero_point_u8, left);
        memset(row + row_bytes - right, s->zero_point_u8, right);
    }
    ly_onednn_quantize_u8_nhwc_rows(x, k->c, k->h, k->w, block_of_layout(s->in_layout), s->inv,
                                    s->zero_point, real0, real1,
                                    codes + (size_t)(real0 - y0) * row_bytes + left, row_bytes);
    memset(codes + (size_t)(real1 - y0) * row_bytes, s->zero_point_u8,
           (size_t)(y1 - real1) * row_bytes);
}

/* Task `t` (band b) of operator `op` of state `s`: its convolution of `codes`
 * (row_pixels a row, on AMX) into the f32 channels-last rows `dst`. */
static dnnl_status_t convolve_band(const int8_state *s, const int8_op *op, int b, int t,
                                   const uint8_t *codes, int64_t row_pixels, float *dst, void *pad,
                                   dnnl_stream_t stream)
{
    if (s->amx) {
        ly_amx_int8_conv_run(s->amx, codes, row_pixels, s->band_row[b + 1] - s->band_row[b], dst,
                             s->direct && s->key.has_residual);
        return dnnl_success;
    }
    const int8_band *band = &op->band[b];
    const int8_task *task = &op->task[t];
    dnnl_status_t st = dnnl_memory_set_data_handle(task->src, (void *)codes);
    if (st == dnnl_success) st = dnnl_memory_set_data_handle(task->dst, dst);
    if (st == dnnl_success && task->scratchpad)
        st = dnnl_memory_set_data_handle(task->scratchpad, pad);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, task->src},
                               {DNNL_ARG_WEIGHTS, band->weights},
                               {DNNL_ARG_DST, task->dst},
                               {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, op->zero_point}};
    int nargs = 4;
    if (band->bias)
        args[nargs++] = (dnnl_exec_arg_t){
            s->bias_in_sum ? DNNL_ARG_BIAS : DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
            band->bias};
    if (task->scratchpad) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, task->scratchpad};
    if (st == dnnl_success) st = dnnl_primitive_execute(band->conv, stream, nargs, args);
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    return st;
}

/* Task `t`: image t / n_bands, band t % n_bands. With a folded producer
 * (s->branch), the band's codes are the producer's rows, halo included,
 * quantized once: the producer's convolution writes its sum into the output
 * first, and this one adds to it (the sum post-op of a channels-last output
 * written in place, else the copy back's residual) — the same operations on
 * the same values as the two nodes apart. */
static void run_task(band_job *job, int t)
{
    const int8_state *s = job->s, *branch = s->branch;
    const ly_conv_key *k = &s->key;
    int image = t / s->n_bands, b = t % s->n_bands;
    size_t in_image = (size_t)(k->c * k->h * k->w), out_image = (size_t)(k->o * k->ho * k->wo);
    const float *x = (const float *)job->call->in[0]->data + image * in_image;
    const float *residual =
        job->call->in[3] ? (const float *)job->call->in[3]->data + image * out_image : NULL;
    float *out = (float *)job->call->out[0]->data + image * out_image;
    band_rows rows = band_of(s, b), read = branch ? band_of(branch, b) : rows;
    size_t src_bytes = branch && branch->band_src_bytes > s->band_src_bytes ? branch->band_src_bytes
                                                                            : s->band_src_bytes;
    size_t src_span = (src_bytes + 63) / 64 * 64;
    size_t pad_bytes = job->op ? job->op->scratchpad_bytes : 0;
    if (branch && job->branch_op && job->branch_op->scratchpad_bytes > pad_bytes)
        pad_bytes = job->branch_op->scratchpad_bytes;
    uint8_t *scratch = ly_nn_scratch(1, src_span + s->band_dst_bytes);
    void *pad = pad_bytes ? ly_nn_scratch(2, pad_bytes) : NULL;
    dnnl_stream_t stream = s->amx ? NULL : ly_onednn_thread_stream();
    if (!scratch || (pad_bytes && !pad) || (!s->amx && !stream)) {
        band_failed(job, dnnl_out_of_memory, "a band's scratch or stream");
        return;
    }
    /* the codes' owner: this node's or its folded producer's quantizer */
    const int8_state *owner = branch ? branch : s;
    quantize_band(owner, x, read, scratch);
    int64_t columns = s->amx ? owner->pad_left - k->pw : 0;
    const uint8_t *codes =
        scratch +
        (size_t)((rows.src_row0 - read.src_row0) * owner->row_pixels + columns) * (size_t)k->c;
    /* Direct: one block of channels, so the band is one run of whole rows. */
    size_t band_at = (size_t)(rows.r0 * k->wo * k->o),
           band_floats = (size_t)(rows.rows * k->wo * k->o);
    float *nhwc = s->direct ? out + band_at : (float *)(scratch + src_span);
    int block = block_of_layout(s->out_layout);
    dnnl_status_t st = dnnl_success;
    if (branch) {
        st = convolve_band(branch, job->branch_op, b, t, scratch, owner->row_pixels, nhwc, pad,
                           stream);
        if (st == dnnl_success && !s->direct)
            ly_onednn_nhwc_rows_to_layout(nhwc, out, NULL, k->o, k->ho, k->wo, rows.r0, rows.rows,
                                          block, NULL);
        residual = out;
    } else if (s->direct && residual && residual != out) {
        memcpy(out + band_at, residual + band_at, band_floats * sizeof(float));
    }
    if (st == dnnl_success)
        st = convolve_band(s, job->op, b, t, codes, owner->row_pixels, nhwc, pad, stream);
    if (st != dnnl_success) {
        band_failed(job, st, "a band's convolution");
        return;
    }
    if (!s->direct)
        ly_onednn_nhwc_rows_to_layout(
            nhwc, out, residual, k->o, k->ho, k->wo, rows.r0, rows.rows, block,
            s->own_epilogue || s->epilogue.after != LY_ACT_NONE ? &s->epilogue : NULL);
    else if (s->epilogue.after != LY_ACT_NONE) /* the band's rows are one run here */
        ly_simd_activate(out + band_at, (int64_t)band_floats, s->epilogue.after, 1);
}

static void run_tasks(void *ctx, int64_t begin, int64_t end)
{
    for (int64_t t = begin; t < end; t++)
        run_task(ctx, (int)t);
}

/* An operator of `s` for this run: an idle one, or one made on the packed
 * weights of its first (the call's constants are not read). */
static int8_op *take_op(int8_state *s, ly_status *st)
{
    int8_op *op = (int8_op *)ly_onednn_spares_take(&s->spares);
    return op ? op : create_op(s, NULL, s->primary, st);
}

static ly_status run_op(int8_state *s, const ly_kernel_call *call)
{
    ly_status st = LY_OK;
    band_job job = {.s = s, .call = call, .lock = PTHREAD_MUTEX_INITIALIZER};
    if (!s->amx) job.op = take_op(s, &st);
    if (job.op && s->branch) job.branch_op = take_op(s->branch, &st);
    if (s->amx || (job.op && (!s->branch || job.branch_op))) {
        int tasks = n_tasks(s);
        int threads = (int)s->key.threads < tasks ? (int)s->key.threads : tasks;
        ly_parallel_for(tasks, 1, threads, run_tasks, &job);
        if (job.failed != dnnl_success) st = ly_onednn_failed(slot_name(), job.what, job.failed);
    }
    if (job.branch_op) ly_onednn_spares_give(&s->branch->spares, &job.branch_op->spare);
    if (job.op) ly_onednn_spares_give(&s->spares, &job.op->spare);
    pthread_mutex_destroy(&job.lock);
    return st;
}

static ly_status int8_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    const ly_tensor *x = call->in[0];
    if (x->ndim != 4) return LY_OK;
    uint32_t blocked = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C) | LY_LAYOUT_BIT(LY_LAYOUT_NCHW16C);
    out->in[0] = blocked;
    out->out[0] = blocked;
    out->in[3] = blocked;
    out->tied = 1u << 3;
    out->preferred = ly_onednn_preferred_layout();
    return LY_OK;
}

static void destroy_spare(ly_onednn_spare *op)
{
    destroy_op((int8_op *)op);
}

static void int8_release(void *state)
{
    int8_state *s = state;
    if (!s) return;
    ly_onednn_spares_destroy(&s->spares, s->primary ? &s->primary->spare : NULL, destroy_spare);
    ly_amx_int8_conv_free(s->amx);
    free(s->scales);
    free(s->bias);
    free(s->bias_in_sum);
    free(s);
}

/* Each image's output rows split evenly over `bands`, and the per-thread
 * scratch of the largest band. */
static void set_bands(int8_state *s, int bands)
{
    const ly_conv_key *k = &s->key;
    s->n_bands = bands;
    s->band_src_bytes = s->band_dst_bytes = 0;
    for (int b = 0; b <= bands; b++)
        s->band_row[b] = k->ho * b / bands;
    for (int b = 0; b < bands; b++) {
        band_rows rows = band_of(s, b);
        size_t src = (size_t)(rows.src_rows * s->row_pixels * k->c) +
                     (s->amx ? ly_amx_int8_conv_slack(s->amx) : 0);
        size_t dst = s->direct ? 0 : (size_t)(rows.rows * k->wo * k->o) * sizeof(float);
        if (src > s->band_src_bytes) s->band_src_bytes = src;
        if (dst > s->band_dst_bytes) s->band_dst_bytes = dst;
    }
}

/* onednn_int8's state (amx false) or amx_int8's. */
static ly_status prepare_on(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                            void **state, bool amx)
{
    const char *impl = amx ? "amx_int8" : "onednn_int8";
    if (!amx && !ly_onednn_engine())
        return ly_onednn_failed(slot_name(), "dnnl_engine_create", ly_onednn_engine_status());
    uint32_t need = (1u << 1) | (1u << 4) | (1u << 5) | (1u << 6) | (call->in[2] ? 1u << 2 : 0u);
    if ((info->constant_inputs & need) != need) return LY_E_DECLINED;
    int8_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "%s (%s): out of memory", slot_name(), impl);
    ly_onednn_spares_init(&s->spares);
    ly_conv_key_init_with(&s->key, call, info->threads, 0);
    s->in_layout = info->in_layout[0];
    s->out_layout = info->out_layout[0];
    /* The activations that cost oneDNN's int8 kernels most run in the copy
     * back: the int8 LibreYOLO9t took 0.82x the time with no swish post-op at
     * all, and takes 0.91-0.92x with its SiLU done here (1 thread, AVX-512
     * VNNI Xeon, in-process interleaved minima). Others stay post-ops. */
    const ly_conv_key *k = &s->key;
    s->epilogue =
        (ly_onednn_epilogue){.activation = k->activation, .post_affine = k->post_affine != 0};
    memcpy(&s->epilogue.alpha, &k->alpha_bits, sizeof s->epilogue.alpha);
    memcpy(&s->epilogue.post_scale, &k->post_scale_bits, sizeof s->epilogue.post_scale);
    memcpy(&s->epilogue.post_shift, &k->post_shift_bits, sizeof s->epilogue.post_shift);
    s->own_epilogue = ly_onednn_epilogue_supported(&s->epilogue, block_of_layout(s->out_layout));
    s->direct = block_of_layout(s->out_layout) == s->key.o && !s->own_epilogue;
    s->row_pixels = k->w;
    ly_status st = LY_OK;
    if (amx) {
        /* the tiles' rows are pixels of one map row, each window's taps of a
         * row contiguous: no groups, no dilation; nothing for oneDNN's post-ops */
        if (k->groups != 1 || k->dh != 1 || k->dw != 1 ||
            (!s->own_epilogue && (k->activation != LY_ACT_NONE || k->post_affine))) {
            st = LY_E_DECLINED;
            goto fail;
        }
        int64_t right = (k->wo - 1) * k->sw + k->kw - k->w - k->pw;
        s->pad_left = k->pw;
        s->row_pixels = k->pw + k->w + (right > 0 ? right : 0);
    }
    float x_scale;
    int32_t zp;
    ly_quant_int8_act_qparams(((const float *)call->in[5]->data)[0],
                              ((const float *)call->in[6]->data)[0], &x_scale, &zp);
    s->inv = 1.0f / x_scale;
    s->zero_point = (float)zp;
    s->zero_point_u8 = zp + 128;
    int64_t o = s->key.o;
    s->scales = malloc((size_t)o * sizeof *s->scales);
    if (call->in[2]) s->bias = malloc((size_t)o * sizeof *s->bias);
    if (!s->scales || (call->in[2] && !s->bias)) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s (%s): out of memory", slot_name(), impl);
        goto fail;
    }
    const float *w_scale = call->in[4]->data;
    for (int64_t i = 0; i < o; i++)
        s->scales[i] = (float)((double)x_scale * (double)w_scale[i]);
    if (s->bias) {
        memcpy(s->bias, call->in[2]->data, (size_t)o * sizeof *s->bias);
        s->bias_in_sum = malloc((size_t)o * sizeof *s->bias_in_sum);
        for (int64_t i = 0; s->bias_in_sum && i < o; i++) {
            double q = (double)s->bias[i] / (double)s->scales[i];
            if (!isnormal(s->scales[i]) || !isfinite(q) || fabs(q) > 1e30) {
                free(s->bias_in_sum);
                s->bias_in_sum = NULL;
                break;
            }
            s->bias_in_sum[i] = (float)q;
        }
    }
    if (amx) {
        ly_amx_int8_shape shape = {k->c, k->o, k->kh, k->kw, k->sh, k->sw, k->wo};
        s->amx = ly_amx_int8_conv_create(&shape, call->in[1]->data, s->zero_point_u8, s->scales,
                                         s->bias_in_sum, s->bias_in_sum ? NULL : s->bias);
        if (!s->amx) {
            st = ly_set_error(LY_E_NO_MEMORY, "%s (%s): out of memory", slot_name(), impl);
            goto fail;
        }
    }
    int64_t bands = k->ho / MIN_BAND_ROWS;
    if (bands > info->threads) bands = info->threads;
    if (bands > MAX_BANDS) bands = MAX_BANDS;
    set_bands(s, bands < 1 ? 1 : (int)bands);
    if (!amx) {
        s->primary = create_op(s, call, NULL, &st);
        if (!s->primary) goto fail;
        ly_onednn_spares_give(&s->spares, &s->primary->spare);
    } else {
        ly_log(LY_LOG_DEBUG, "%s (amx_int8): %lld->%lld %lldx%lld /%lld on %lldx%lld (%d band%s)",
               slot_name(), (long long)k->c, (long long)k->o, (long long)k->kh, (long long)k->kw,
               (long long)k->sh, (long long)k->h, (long long)k->w, s->n_bands,
               s->n_bands == 1 ? "" : "s");
    }
    *state = s;
    return LY_OK;
fail:
    int8_release(s);
    return st;
}

static ly_status int8_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state)
{
    return prepare_on(call, info, state, false);
}

static ly_status amx_int8_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    return prepare_on(call, info, state, true);
}

static ly_status int8_run(void *state, const ly_kernel_call *call)
{
    return run_op(state, call);
}

/* The codes live packed in the state and the bias copied: the graph may give
 * its own pages of both back (the int8 model's weights are then held once). */
static uint32_t int8_held(void *state)
{
    const int8_state *s = state;
    return (1u << 1) | (s->bias ? 1u << 2 : 0u);
}

/* The packed codes reordered back to OIHW (oneDNN drops the compensation it
 * appended: exact), or the bias copied back. */
static ly_status int8_restore(void *state, int index, void *dst)
{
    const int8_state *s = state;
    if (index == 2 && s->bias) {
        memcpy(dst, s->bias, (size_t)s->key.o * sizeof *s->bias);
        return LY_OK;
    }
    if (index != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s (onednn_int8): input %d is not held",
                            slot_name(), index);
    if (s->amx) {
        ly_amx_int8_conv_weights(s->amx, dst);
        return LY_OK;
    }
    const ly_conv_key *k = &s->key;
    dnnl_memory_desc_t plain;
    dnnl_status_t st;
    if (k->groups == 1) {
        dnnl_dims_t wd = {k->o, k->c, k->kh, k->kw};
        st = dnnl_memory_desc_init_by_tag(&plain, 4, wd, dnnl_s8, dnnl_oihw);
    } else {
        dnnl_dims_t wd = {k->groups, k->o / k->groups, k->c / k->groups, k->kh, k->kw};
        st = dnnl_memory_desc_init_by_tag(&plain, 5, wd, dnnl_s8, dnnl_goihw);
    }
    if (st == dnnl_success) st = ly_onednn_unpack(s->primary->band[0].weights, &plain, dst);
    if (st != dnnl_success) return ly_onednn_failed(slot_name(), "restoring the packed codes", st);
    return LY_OK;
}

static const ly_kernel_stateful int8_stateful = {
    .layouts = int8_layouts,
    .prepare = int8_prepare,
    .run = int8_run,
    .release = int8_release,
    .restore_constant = int8_restore,
    .held_constants = int8_held,
};

/* The same bands, quantizer and copy back, the sums on AMX tiles. */
static const ly_kernel_stateful amx_int8_stateful = {
    .layouts = int8_layouts,
    .prepare = amx_int8_prepare,
    .run = int8_run,
    .release = int8_release,
    .restore_constant = int8_restore,
    .held_constants = int8_held,
};

/* The graph folds a SiLU or sigmoid node after this convolution into it
 * (registry_internal.h): applied after the residual, in the copy back or, on
 * a channels-last output written in place, over the band's rows. Only where
 * nothing of the convolution's own epilogue is oneDNN's but its sum. The int8
 * LibreYOLO9t's RepConvN: its SiLU pass over 2M values goes. */
static bool int8_fold_activation(void *state, int64_t activation)
{
    int8_state *s = state;
    const ly_conv_key *k = &s->key;
    ly_onednn_epilogue with = s->epilogue;
    with.after = activation;
    bool own = s->own_epilogue || (k->activation == LY_ACT_NONE && !k->post_affine);
    if (!own || !ly_onednn_epilogue_supported(&with, block_of_layout(s->out_layout))) return false;
    s->epilogue.after = activation;
    return true;
}

/* The graph folds the node writing this one's residual into it
 * (registry_internal.h) where both quantize the same input with the same
 * range, this one is a 1x1 (stride 1, no padding) and the producer a
 * convolution of the same map size with no epilogue of its own, on the same
 * bands: the int8 LibreYOLO9t's RepConvN, a 3x3 and a 1x1 branch summed
 * before a SiLU. Each band then quantizes its rows once for both, and the
 * 3x3's sums go into this node's output without a pass of their own. (Its 42
 * 1x1s took 0.07-0.09 ms each, mostly their own quantizer and the copy of the
 * 3x3's map.) */
static bool int8_fold_residual(void *state, void *producer)
{
    int8_state *s = state, *branch = producer;
    const ly_conv_key *k = &s->key, *p = &branch->key;
    bool one_by_one = k->kh == 1 && k->kw == 1 && k->sh == 1 && k->sw == 1 && k->ph == 0 &&
                      k->pw == 0 && k->groups == 1;
    bool same_map = p->sh == 1 && p->sw == 1 && p->dh == 1 && p->dw == 1 &&
                    p->kh == 2 * p->ph + 1 && p->kw == 2 * p->pw + 1 && p->n == k->n &&
                    p->c == k->c && p->h == k->h && p->w == k->w && p->o == k->o &&
                    p->ho == k->ho && p->wo == k->wo && branch->in_layout == s->in_layout;
    bool same_codes = branch->inv == s->inv && branch->zero_point == s->zero_point;
    bool bare = !p->has_residual && p->activation == LY_ACT_NONE && !p->post_affine &&
                branch->epilogue.after == LY_ACT_NONE && k->activation == LY_ACT_NONE &&
                !k->post_affine && s->epilogue.after == LY_ACT_NONE;
    bool same_bands = branch->n_bands == s->n_bands &&
                      memcmp(branch->band_row, s->band_row,
                             (size_t)(s->n_bands + 1) * sizeof s->band_row[0]) == 0;
    bool same_sums = (s->amx != NULL) == (branch->amx != NULL);
    if (!(one_by_one && same_map && same_codes && bare && same_bands && same_sums) || s->branch ||
        branch->branch)
        return false;
    s->branch = branch;
    return true;
}

static ly_status int8_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    ly_status st = ly_onednn_predicate(call, cpu, why_not);
    if (st != LY_OK) return st;
    if (!cpu->avx2 || !(cpu->avx512_vnni || cpu->avx_vnni || atomic_load(&allow_without_vnni))) {
        *why_not = "needs VNNI (AVX512_VNNI or AVX-VNNI): without it oneDNN's int8 sums saturate";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

static ly_status amx_int8_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    if (!cpu || !cpu->amx_int8) {
        *why_not = "CPU or OS lacks AMX-INT8 tiles";
        return LY_E_DECLINED;
    }
    if (!ly_amx_tiles_granted()) {
        *why_not = "the OS did not grant the AMX tiles' state (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return LY_E_DECLINED;
    }
    if (call && ((call->in[0] && ly_tensor_numel(call->in[0]) <= 0) ||
                 (call->out[0] && ly_tensor_numel(call->out[0]) <= 0))) {
        *why_not = "empty tensor";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

void ly_onednn_register_conv2d_int8(void)
{
    ly_kernel_folds folds = {.activation = int8_fold_activation, .residual = int8_fold_residual};
    ly_provider_add(LY_OP_CONV2D_INT8, "onednn_int8", NULL, int8_predicate, &int8_stateful);
    ly_kernel_folds_register(&int8_stateful, &folds);
    /* newer: tried first where the tiles are */
    ly_provider_add(LY_OP_CONV2D_INT8, "amx_int8", NULL, amx_int8_predicate, &amx_int8_stateful);
    ly_kernel_folds_register(&amx_int8_stateful, &folds);
}
#else
void ly_onednn_register_conv2d_int8(void)
{
}
#endif
