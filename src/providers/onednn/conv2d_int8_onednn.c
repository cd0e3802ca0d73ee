/* SPDX-License-Identifier: MIT */
/*
 * conv2d_int8 on oneDNN's integer convolution ("onednn_int8"): the execute
 * provider of LibreYOLO's int8 recipe. The input is quantized with the
 * module's calibrated range into u8 codes (quantize_u8_avx2.c, the reference's
 * codes exactly), the weights stay int8 codes packed for oneDNN, and the
 * kernel sums code products in int32 — exact — then scales each output
 * channel once by s_x * s_w[o] and adds the bias; the activation and the
 * post-affine run as post-ops, the residual in the reorder back.
 *
 * Only where the CPU has VNNI (vpdpbusd): oneDNN's int8 kernels without it
 * multiply with vpmaddubsw, whose int16 pair sums saturate (measured on an AVX2
 * EPYC: 8190 of 8192 outputs of a full-range u8 conv wrong), so the provider
 * declines unless oneDNN chose a VNNI or AMX kernel.
 *
 * Layouts: oneDNN's int8 kernels read and write channels-last; the graph keeps
 * f32 maps channel-blocked. The quantizer reads the blocked (or plain) input
 * and writes u8 channels-last, and a reorder brings the f32 output back to the
 * graph's layout, adding the residual on the way — except where that layout
 * already is channels-last (16 or 8 output channels in one block): there the
 * kernel writes the output in place and a sum post-op adds the residual. A
 * 1x1 convolution with more channels runs as one convolution per block of
 * output channels, each writing its block in place, instead of one
 * convolution and a reorder: alone, 32->32 on 160x160 at 1 thread takes
 * 0.83 ms in parts against 1.12 ms; in LibreYOLO9t (82 such nodes) 1 thread is
 * unchanged and 2 threads go 38.1 -> 36.3 ms. A 3x3 one is slower in parts
 * (64->64 on 80x80: 1.61 against 1.32 ms) and stays whole.
 *
 * Measured (1 thread, AVX-512 VNNI Xeon, oneDNN 2.6): 64->64 3x3 on 80x80
 * 0.86 ms against 2.85 ms for the f32 convolution, 128->64 1x1 0.52 vs 1.04.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "ops/quant/reference.h"
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
 * VNNI check this provider's own work (quantizer, packing, parts, residual,
 * codes given back and restored) on such inputs. */
static atomic_int allow_without_vnni;

void ly_onednn_int8_allow_without_vnni(int allow);
void ly_onednn_int8_allow_without_vnni(int allow)
{
    atomic_store(&allow_without_vnni, allow != 0);
}

/* One convolution over a range of output channels (all of them unless the
 * state runs in parts) and a band of output rows (all of them unless the
 * state runs in bands). */
typedef struct int8_part {
    dnnl_primitive_t conv;
    dnnl_memory_t weights, bias;
    dnnl_memory_t dst; /* channels-last: the part's block of the output, or scratch to reorder */
    dnnl_memory_t src, scratchpad; /* bands only: the band's input rows, oneDNN's scratch */
} int8_part;

typedef struct int8_op {
    ly_onednn_spare spare; /* first: a prepared state's idle list */
    dnnl_stream_t stream;  /* an operator runs on one thread at a time */
    dnnl_primitive_t dst_reorder;
    dnnl_memory_t src, dst_user, zero_point;
    size_t scratchpad_bytes; /* bands: the most any part's convolution needs */
    int n_parts;             /* n_bands x the state's parts, band-major */
    int8_part part[];
} int8_op;

/* At most this many bands, each of at least this many output rows. */
#define MAX_BANDS 64
#define MIN_BAND_ROWS 4

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
    /* Per-thread scratch of a run: the dense u8 channels-last input, then (not
     * direct) the f32 channels-last output to reorder. Set at prepare. */
    size_t src_bytes, dst_bytes;
    /* The output's layout is channels-last already (one block of 16 or 8
     * channels holds every channel), or the convolution runs in parts of one
     * block each: the kernel writes in place, the residual added by a sum
     * post-op, with no reorder. */
    bool direct;
    int n_parts;    /* 1, or O / block for a 1x1 convolution in parts */
    int64_t part_o; /* output channels per part */
    /* 1: the whole map in each oneDNN call, with oneDNN's threads inside it
     * (quantizer, convolution of each part and reorder: a parallel region and
     * a barrier each). More (several threads, batch 1): one parallel region
     * per run, in which each thread takes a band of output rows and does all
     * of it alone: quantizes the input rows the band reads (the halo rows of
     * a 3x3 twice, once per neighbour), convolves every part with a
     * primitive made for one thread, adds the residual and reorders. At 2
     * threads the int8 LibreYOLO9t spent 24% of its time in libgomp's
     * barrier spin the other way. */
    int n_bands;
    int64_t band_row[MAX_BANDS + 1];       /* band b: output rows [band_row[b], band_row[b + 1]) */
    size_t band_src_bytes, band_dst_bytes; /* per-thread scratch of the largest band */
    int8_op *primary;                      /* owns the packed weights */
    ly_onednn_spares spares;
} int8_state;

static const char *slot_name(void)
{
    return ly_op_name(LY_OP_CONV2D_INT8);
}

static void destroy_op(int8_op *op)
{
    if (!op) return;
    for (int p = 0; p < op->n_parts; p++) {
        int8_part *part = &op->part[p];
        if (part->conv) dnnl_primitive_destroy(part->conv);
        dnnl_memory_t mems[] = {part->weights, part->bias, part->dst, part->src, part->scratchpad};
        for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
            if (mems[i]) dnnl_memory_destroy(mems[i]);
    }
    if (op->dst_reorder) dnnl_primitive_destroy(op->dst_reorder);
    dnnl_memory_t mems[] = {op->src, op->dst_user, op->zero_point};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (op->stream) dnnl_stream_destroy(op->stream);
    free(op);
}

static int64_t block_of_layout(ly_layout layout)
{
    return layout == LY_LAYOUT_NCHW16C ? 16 : layout == LY_LAYOUT_NCHW8C ? 8 : 0;
}

static dnnl_format_tag_t layout_tag(ly_layout layout)
{
    return layout == LY_LAYOUT_NCHW16C  ? dnnl_nChw16c
           : layout == LY_LAYOUT_NCHW8C ? dnnl_nChw8c
                                        : dnnl_nchw;
}

#define DNNL_TRY(expr)                                                                             \
    do {                                                                                           \
        dnnl_status_t dnnl_st_ = (expr);                                                           \
        if (dnnl_st_ != dnnl_success) {                                                            \
            *status = ly_onednn_failed(slot_name(), #expr, dnnl_st_);                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* The attributes of the part over output channels [o0, o0 + count). */
static dnnl_status_t make_attr(const int8_state *s, int64_t o0, int64_t count,
                               const dnnl_memory_desc_t *bias_md, dnnl_primitive_attr_t *out)
{
    const ly_conv_key *k = &s->key;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    int32_t runtime_zp = DNNL_RUNTIME_S32_VAL;
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_output_scales(attr, count, 1 << 1, s->scales + o0);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &runtime_zp);
    if (st == dnnl_success) st = dnnl_post_ops_create(&post_ops);
    /* The bias after the scales (the convolution's own bias would be added to
     * the integer sum before them). */
    if (st == dnnl_success && bias_md)
        st = dnnl_post_ops_append_binary(post_ops, dnnl_binary_add, bias_md);
    float alpha;
    memcpy(&alpha, &k->alpha_bits, sizeof alpha);
    if (st == dnnl_success) st = ly_onednn_append_activation(post_ops, k->activation, alpha);
    if (st == dnnl_success && k->post_affine) {
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

/* The rows band `band` writes and reads: output rows [r0, r0 + rows), input
 * rows [src_row0, src_row0 + src_rows), some of them above or below the map:
 * a band's input holds its padding rows as codes of 0 (the zero point, as
 * oneDNN pads), so every band of as many rows is the same convolution and
 * oneDNN's primitive cache gives them one kernel (with the padding in each
 * band's own geometry instead, the int8 LibreYOLO9t's resident memory at 2
 * threads grew by 25 MiB of JIT code). */
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

/* Entry `index` (band-major) of operator `op`: its convolution, weights
 * (packed from the codes of `call`, read from `share`'s or, past the first
 * band, from the first band's), bias and channels-last destination.
 * `src_md`: the u8 input of the whole map. Returns false with *status set. */
static bool create_part(int8_state *s, const ly_kernel_call *call, const int8_op *share,
                        int8_op *op, int index, const dnnl_memory_desc_t *src_md, ly_status *status)
{
    const ly_conv_key *k = &s->key;
    dnnl_engine_t engine = ly_onednn_engine();
    int8_part *part = &op->part[index];
    int band = index / s->n_parts, p = index % s->n_parts;
    bool banded = s->n_bands > 1;
    band_rows rows = banded ? band_of(s, band) : (band_rows){0, k->ho, 0, k->h};
    int64_t o0 = p * s->part_o, on = s->part_o;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_t weights_reorder = NULL;
    dnnl_memory_t weights_user = NULL;
    dnnl_dims_t dst_dims = {k->n, on, rows.rows, k->wo};
    dnnl_dims_t strides = {k->sh, k->sw}, dilates = {k->dh - 1, k->dw - 1};
    dnnl_dims_t pad_l = {banded ? 0 : k->ph, k->pw};
    dnnl_dims_t pad_r = {banded ? 0 : (k->ho - 1) * k->sh + (k->kh - 1) * k->dh + 1 - k->h - k->ph,
                         (k->wo - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->w - k->pw};
    for (int i = 0; i < 2; i++)
        if (pad_r[i] < 0) pad_r[i] = 0;
    dnnl_memory_desc_t dst_md, w_any, w_user, bias_md, band_src_md;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc));
    if (banded) {
        dnnl_dims_t src_dims = {k->n, k->c, rows.src_rows, k->w};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&band_src_md, 4, src_dims, dnnl_u8, dnnl_nhwc));
        src_md = &band_src_md;
    }
    size_t codes_offset = 0; /* where the part's codes start in OIHW / GOIHW */
    if (k->groups == 1) {
        dnnl_dims_t wd = {on, k->c, k->kh, k->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_s8, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 4, wd, dnnl_s8, dnnl_oihw));
        codes_offset = (size_t)(o0 * k->c * k->kh * k->kw);
    } else {
        dnnl_dims_t wd = {k->groups, k->o / k->groups, k->c / k->groups, k->kh, k->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 5, wd, dnnl_s8, dnnl_format_tag_any));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_user, 5, wd, dnnl_s8, dnnl_goihw));
    }
    dnnl_dims_t bias_dims = {1, on, 1, 1};
    if (s->bias_in_sum)
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_md, 1, (dnnl_dims_t){on}, dnnl_f32, dnnl_x));
    else
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_md, 4, bias_dims, dnnl_f32, dnnl_nchw));
    dnnl_convolution_desc_t desc;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
        &desc, dnnl_forward_inference, dnnl_convolution_direct, src_md, &w_any,
        s->bias_in_sum ? &bias_md : NULL, &dst_md, strides, dilates, pad_l, pad_r));
    DNNL_TRY(make_attr(s, o0, on, s->bias && !s->bias_in_sum ? &bias_md : NULL, &attr));
    /* Bands run side by side on the threads of one region: each call's scratch
     * is the calling thread's own. */
    if (banded) DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    dnnl_status_t made = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    const char *impl = "";
    if (made == dnnl_success) dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    bool exact = strstr(impl, "vnni") || strstr(impl, "amx") || atomic_load(&allow_without_vnni);
    if (made == dnnl_unimplemented || (made == dnnl_success && !exact)) {
        /* Not a failure: no exact integer kernel here; the next one serves it
         * (or, in bands, the whole map). */
        ly_log(LY_LOG_DEBUG, "%s (onednn_int8): %lld->%lld %lldx%lld%s declined (%s)", slot_name(),
               (long long)k->c, (long long)k->o, (long long)k->kh, (long long)k->kw,
               banded ? " in bands" : "", made == dnnl_success ? impl : "no implementation");
        *status = LY_E_DECLINED;
        goto fail;
    }
    DNNL_TRY(made);
    if (index == 0)
        ly_log(LY_LOG_DEBUG,
               "%s (onednn_int8): %lld->%lld %lldx%lld /%lld g%lld on %lldx%lld: %s (%d part%s, "
               "%d band%s)",
               slot_name(), (long long)k->c, (long long)k->o, (long long)k->kh, (long long)k->kw,
               (long long)k->sh, (long long)k->groups, (long long)k->h, (long long)k->w, impl,
               s->n_parts, s->n_parts == 1 ? "" : "s", s->n_bands, s->n_bands == 1 ? "" : "s");
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (band > 0) {
        /* Past the first band: the first band's packing, so the codes are held once. */
        const dnnl_memory_desc_t *first_w_md = NULL;
        DNNL_TRY(dnnl_memory_get_memory_desc(op->part[p].weights, &first_w_md));
        if (!dnnl_memory_desc_equal(w_md, first_w_md)) {
            ly_log(LY_LOG_DEBUG, "%s (onednn_int8): bands pack the weights apart: declined",
                   slot_name());
            *status = LY_E_DECLINED;
            goto fail;
        }
    }
    DNNL_TRY(dnnl_primitive_create(&part->conv, pd));
    const int8_part *packed_by = band > 0 ? &op->part[p] : share ? &share->part[index] : NULL;
    if (packed_by) {
        void *packed = NULL;
        DNNL_TRY(dnnl_memory_get_data_handle(packed_by->weights, &packed));
        DNNL_TRY(dnnl_memory_create(&part->weights, w_md, engine, packed));
    } else {
        /* Packing also computes oneDNN's zero-point compensation into the
         * weights' extra space. */
        DNNL_TRY(dnnl_memory_create(&part->weights, w_md, engine, DNNL_MEMORY_ALLOCATE));
        DNNL_TRY(dnnl_memory_create(&weights_user, &w_user, engine,
                                    (int8_t *)call->in[1]->data + codes_offset));
        dnnl_primitive_desc_t wpd = NULL;
        DNNL_TRY(dnnl_reorder_primitive_desc_create(&wpd, &w_user, engine, w_md, engine, NULL));
        dnnl_status_t made_reorder = dnnl_primitive_create(&weights_reorder, wpd);
        dnnl_primitive_desc_destroy(wpd);
        DNNL_TRY(made_reorder);
        dnnl_exec_arg_t wargs[] = {{DNNL_ARG_FROM, weights_user}, {DNNL_ARG_TO, part->weights}};
        DNNL_TRY(dnnl_primitive_execute(weights_reorder, op->stream, 2, wargs));
        DNNL_TRY(dnnl_stream_wait(op->stream));
    }
    if (s->bias)
        DNNL_TRY(dnnl_memory_create(&part->bias, &bias_md, engine,
                                    (s->bias_in_sum ? s->bias_in_sum : s->bias) + o0));
    DNNL_TRY(dnnl_memory_create(&part->dst, &dst_md, engine, DNNL_MEMORY_NONE));
    if (banded) {
        DNNL_TRY(dnnl_memory_create(&part->src, src_md, engine, DNNL_MEMORY_NONE));
        const dnnl_memory_desc_t *pad_md =
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        size_t pad_bytes = pad_md ? dnnl_memory_desc_get_size(pad_md) : 0;
        if (pad_bytes) {
            DNNL_TRY(dnnl_memory_create(&part->scratchpad, pad_md, engine, DNNL_MEMORY_NONE));
            if (pad_bytes > op->scratchpad_bytes) op->scratchpad_bytes = pad_bytes;
        }
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
static int8_op *create_op(int8_state *s, const ly_kernel_call *call, const int8_op *share,
                          ly_status *status)
{
    const ly_conv_key *k = &s->key;
    dnnl_engine_t engine = ly_onednn_engine();
    int entries = s->n_bands * s->n_parts;
    int8_op *op = calloc(1, sizeof *op + (size_t)entries * sizeof op->part[0]);
    dnnl_primitive_desc_t reorder_pd = NULL;
    dnnl_primitive_attr_t reorder_attr = NULL;
    dnnl_post_ops_t reorder_ops = NULL;
    if (!op) {
        *status = ly_set_error(LY_E_NO_MEMORY, "%s (onednn_int8): out of memory", slot_name());
        return NULL;
    }
    op->n_parts = entries;
    DNNL_TRY(dnnl_stream_create(&op->stream, engine, dnnl_stream_default_flags));
    dnnl_dims_t src_dims = {k->n, k->c, k->h, k->w}, dst_dims = {k->n, k->o, k->ho, k->wo};
    dnnl_memory_desc_t src_md, dst_md, dst_user;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_u8, dnnl_nhwc));
    /* A band runs on one thread: its kernels are chosen and split for one. */
    int threads = s->n_bands > 1 ? ly_onednn_threads_begin(1) : 0;
    bool made = true;
    for (int i = 0; made && i < entries; i++)
        made = create_part(s, call, share, op, i, &src_md, status);
    ly_onednn_threads_end(threads);
    if (!made) goto fail;
    dnnl_memory_desc_t zp_md;
    dnnl_dims_t one = {1};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&zp_md, 1, one, dnnl_s32, dnnl_x));
    DNNL_TRY(dnnl_memory_create(&op->zero_point, &zp_md, engine, DNNL_MEMORY_ALLOCATE));
    void *zp = NULL;
    DNNL_TRY(dnnl_memory_get_data_handle(op->zero_point, &zp));
    memcpy(zp, &s->zero_point_u8, sizeof s->zero_point_u8);
    DNNL_TRY(dnnl_memory_create(&op->src, &src_md, engine, DNNL_MEMORY_NONE));
    if (!s->direct && s->n_bands == 1) {
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc));
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_user, 4, dst_dims, dnnl_f32,
                                              layout_tag(s->out_layout)));
        DNNL_TRY(dnnl_memory_create(&op->dst_user, &dst_user, engine, DNNL_MEMORY_NONE));
        /* Back to the graph's layout; the residual, already in the output, summed. */
        DNNL_TRY(dnnl_primitive_attr_create(&reorder_attr));
        if (k->has_residual) {
            DNNL_TRY(dnnl_post_ops_create(&reorder_ops));
            DNNL_TRY(dnnl_post_ops_append_sum(reorder_ops, 1.0f));
            DNNL_TRY(dnnl_primitive_attr_set_post_ops(reorder_attr, reorder_ops));
        }
        DNNL_TRY(dnnl_reorder_primitive_desc_create(&reorder_pd, &dst_md, engine, &dst_user, engine,
                                                    reorder_attr));
        DNNL_TRY(dnnl_primitive_create(&op->dst_reorder, reorder_pd));
    }
    if (reorder_pd) dnnl_primitive_desc_destroy(reorder_pd);
    if (reorder_attr) dnnl_primitive_attr_destroy(reorder_attr);
    if (reorder_ops) dnnl_post_ops_destroy(reorder_ops);
    return op;

fail:
    if (reorder_pd) dnnl_primitive_desc_destroy(reorder_pd);
    if (reorder_attr) dnnl_primitive_attr_destroy(reorder_attr);
    if (reorder_ops) dnnl_post_ops_destroy(reorder_ops);
    destroy_op(op);
    return NULL;
}

#undef DNNL_TRY
#define DNNL_TRY(expr)                                                                             \
    do {                                                                                           \
        dnnl_status_t dnnl_st_ = (expr);                                                           \
        if (dnnl_st_ != dnnl_success) return ly_onednn_failed(slot_name(), #expr, dnnl_st_);       \
    } while (0)

static ly_status run_op(const int8_state *s, int8_op *op, const ly_kernel_call *call)
{
    const ly_conv_key *k = &s->key;
    const ly_tensor *x = call->in[0], *residual = call->in[3];
    float *out = call->out[0]->data;
    size_t src_span = (s->src_bytes + 63) / 64 * 64;
    uint8_t *scratch = ly_nn_scratch(1, src_span + s->dst_bytes);
    if (!scratch)
        return ly_set_error(LY_E_NO_MEMORY, "%s (onednn_int8): out of memory", slot_name());
    int block = s->in_layout == LY_LAYOUT_NCHW16C ? 16 : s->in_layout == LY_LAYOUT_NCHW8C ? 8 : 0;
    ly_onednn_quantize_u8_nhwc(x->data, k->n, k->c, k->h, k->w, block, s->inv, s->zero_point,
                               scratch, (int)k->threads);
    DNNL_TRY(dnnl_memory_set_data_handle(op->src, scratch));
    if (s->direct) { /* part p writes block p of the output */
        size_t block_floats = (size_t)(s->part_o * k->ho * k->wo);
        for (int p = 0; p < op->n_parts; p++)
            DNNL_TRY(dnnl_memory_set_data_handle(op->part[p].dst, out + (size_t)p * block_floats));
    } else {
        DNNL_TRY(dnnl_memory_set_data_handle(op->part[0].dst, scratch + src_span));
        DNNL_TRY(dnnl_memory_set_data_handle(op->dst_user, out));
    }
    /* Both ways of adding the residual sum into what `out` already holds. */
    if (residual && residual->data != (void *)out)
        memcpy(out, residual->data, (size_t)ly_tensor_numel(call->out[0]) * sizeof(float));
    for (int p = 0; p < op->n_parts; p++) {
        const int8_part *part = &op->part[p];
        dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, op->src},
                                   {DNNL_ARG_WEIGHTS, part->weights},
                                   {DNNL_ARG_DST, part->dst},
                                   {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, op->zero_point}};
        int nargs = 4;
        if (part->bias)
            args[nargs++] = (dnnl_exec_arg_t){
                s->bias_in_sum ? DNNL_ARG_BIAS : DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                part->bias};
        DNNL_TRY(dnnl_primitive_execute(part->conv, op->stream, nargs, args));
    }
    if (op->dst_reorder) {
        dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, op->part[0].dst}, {DNNL_ARG_TO, op->dst_user}};
        DNNL_TRY(dnnl_primitive_execute(op->dst_reorder, op->stream, 2, rargs));
    }
    DNNL_TRY(dnnl_stream_wait(op->stream));
    return LY_OK;
}

typedef struct band_job {
    const int8_state *s;
    int8_op *op;
    const ly_kernel_call *call;
    /* what a band's thread could not do (its thread's last error is not the caller's) */
    dnnl_status_t failed[MAX_BANDS];
    const char *what[MAX_BANDS];
} band_job;

static void run_band(band_job *job, int band)
{
    const int8_state *s = job->s;
    const ly_conv_key *k = &s->key;
    const ly_tensor *x = job->call->in[0], *residual = job->call->in[3];
    float *out = job->call->out[0]->data;
    band_rows rows = band_of(s, band);
    size_t src_span = (s->band_src_bytes + 63) / 64 * 64;
    uint8_t *scratch = ly_nn_scratch(1, src_span + s->band_dst_bytes);
    void *pad = job->op->scratchpad_bytes ? ly_nn_scratch(2, job->op->scratchpad_bytes) : NULL;
    dnnl_stream_t stream = ly_onednn_thread_stream();
    if (!scratch || (job->op->scratchpad_bytes && !pad) || !stream) {
        job->failed[band] = dnnl_out_of_memory;
        job->what[band] = "a band's scratch or stream";
        return;
    }
    int block = s->in_layout == LY_LAYOUT_NCHW16C ? 16 : s->in_layout == LY_LAYOUT_NCHW8C ? 8 : 0;
    int64_t y0 = rows.src_row0, y1 = y0 + rows.src_rows;
    int64_t real0 = y0 < 0 ? 0 : y0, real1 = y1 > k->h ? k->h : y1;
    size_t row_bytes = (size_t)(k->w * k->c);
    memset(scratch, s->zero_point_u8, (size_t)(real0 - y0) * row_bytes);
    ly_onednn_quantize_u8_nhwc_rows(x->data, k->c, k->h, k->w, block, s->inv, s->zero_point, real0,
                                    real1, scratch + (size_t)(real0 - y0) * row_bytes);
    memset(scratch + (size_t)(real1 - y0) * row_bytes, s->zero_point_u8,
           (size_t)(y1 - real1) * row_bytes);
    float *nhwc = (float *)(scratch + src_span);
    size_t part_floats = (size_t)(s->part_o * k->ho * k->wo);
    size_t band_at = (size_t)(rows.r0 * k->wo * s->part_o),
           band_floats = (size_t)(rows.rows * k->wo * s->part_o);
    if (s->direct && residual && residual->data != (void *)out)
        for (int p = 0; p < s->n_parts; p++)
            memcpy(out + p * part_floats + band_at,
                   (const float *)residual->data + p * part_floats + band_at,
                   band_floats * sizeof(float));
    dnnl_status_t st = dnnl_success;
    for (int p = 0; st == dnnl_success && p < s->n_parts; p++) {
        const int8_part *part = &job->op->part[band * s->n_parts + p];
        st = dnnl_memory_set_data_handle(part->src, scratch);
        if (st == dnnl_success)
            st = dnnl_memory_set_data_handle(part->dst,
                                             s->direct ? out + p * part_floats + band_at : nhwc);
        if (st == dnnl_success && part->scratchpad)
            st = dnnl_memory_set_data_handle(part->scratchpad, pad);
        dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, part->src},
                                   {DNNL_ARG_WEIGHTS, part->weights},
                                   {DNNL_ARG_DST, part->dst},
                                   {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, job->op->zero_point}};
        int nargs = 4;
        if (part->bias)
            args[nargs++] = (dnnl_exec_arg_t){
                s->bias_in_sum ? DNNL_ARG_BIAS : DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                part->bias};
        if (part->scratchpad)
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, part->scratchpad};
        if (st == dnnl_success) st = dnnl_primitive_execute(part->conv, stream, nargs, args);
    }
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    if (st != dnnl_success) {
        job->failed[band] = st;
        job->what[band] = "a band's convolution";
        return;
    }
    if (!s->direct)
        ly_onednn_nhwc_rows_to_layout(nhwc, out, residual ? residual->data : NULL, k->o, k->ho,
                                      k->wo, rows.r0, rows.rows,
                                      (int)block_of_layout(s->out_layout));
}

static void run_bands(void *ctx, int64_t begin, int64_t end)
{
    for (int64_t band = begin; band < end; band++)
        run_band(ctx, (int)band);
}

static ly_status run_op_in_bands(const int8_state *s, int8_op *op, const ly_kernel_call *call)
{
    band_job job = {.s = s, .op = op, .call = call};
    ly_parallel_for(s->n_bands, 1, s->n_bands, run_bands, &job);
    for (int b = 0; b < s->n_bands; b++)
        if (job.failed[b] != dnnl_success)
            return ly_onednn_failed(slot_name(), job.what[b], job.failed[b]);
    return LY_OK;
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
    free(s->scales);
    free(s->bias);
    free(s->bias_in_sum);
    free(s);
}

/* Output rows split evenly over `bands`, and the per-thread scratch of the largest band. */
static void set_bands(int8_state *s, int bands)
{
    const ly_conv_key *k = &s->key;
    s->n_bands = bands;
    s->band_src_bytes = s->band_dst_bytes = 0;
    for (int b = 0; b <= bands; b++)
        s->band_row[b] = k->ho * b / bands;
    for (int b = 0; bands > 1 && b < bands; b++) {
        band_rows rows = band_of(s, b);
        size_t src = (size_t)(rows.src_rows * k->w * k->c);
        size_t dst = s->direct ? 0 : (size_t)(rows.rows * k->wo * k->o) * sizeof(float);
        if (src > s->band_src_bytes) s->band_src_bytes = src;
        if (dst > s->band_dst_bytes) s->band_dst_bytes = dst;
    }
}

static ly_status int8_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state)
{
    if (!ly_onednn_engine())
        return ly_onednn_failed(slot_name(), "dnnl_engine_create", ly_onednn_engine_status());
    uint32_t need = (1u << 1) | (1u << 4) | (1u << 5) | (1u << 6) | (call->in[2] ? 1u << 2 : 0u);
    if ((info->constant_inputs & need) != need) return LY_E_DECLINED;
    int8_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "%s (onednn_int8): out of memory", slot_name());
    ly_onednn_spares_init(&s->spares);
    ly_conv_key_init_with(&s->key, call, info->threads, 0);
    s->in_layout = info->in_layout[0];
    s->out_layout = info->out_layout[0];
    int64_t out_block = s->out_layout == LY_LAYOUT_NCHW16C  ? 16
                        : s->out_layout == LY_LAYOUT_NCHW8C ? 8
                                                            : 0;
    bool in_parts = out_block && s->key.o > out_block && s->key.o % out_block == 0 &&
                    s->key.groups == 1 && s->key.kh == 1 && s->key.kw == 1;
    s->direct = (out_block && s->key.o == out_block) || in_parts;
    s->n_parts = in_parts ? (int)(s->key.o / out_block) : 1;
    s->part_o = in_parts ? out_block : s->key.o;
    /* Fixed here, not by each operator made: spares are made while other
     * threads run. */
    s->src_bytes = (size_t)(s->key.n * s->key.c * s->key.h * s->key.w);
    s->dst_bytes =
        s->direct ? 0 : (size_t)(s->key.n * s->key.o * s->key.ho * s->key.wo) * sizeof(float);
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
    ly_status st = LY_OK;
    if (!s->scales || (call->in[2] && !s->bias)) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s (onednn_int8): out of memory", slot_name());
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
    int previous = ly_onednn_threads_begin(info->threads);
    int64_t bands = s->key.n == 1 ? s->key.ho / MIN_BAND_ROWS : 1;
    if (bands > info->threads) bands = info->threads;
    if (bands > MAX_BANDS) bands = MAX_BANDS;
    set_bands(s, bands < 2 ? 1 : (int)bands);
    s->primary = create_op(s, call, NULL, &st);
    if (!s->primary && st == LY_E_DECLINED && s->n_bands > 1) {
        /* No exact kernel for a band: the whole map, as on one thread. */
        set_bands(s, 1);
        st = LY_OK;
        s->primary = create_op(s, call, NULL, &st);
    }
    ly_onednn_threads_end(previous);
    if (!s->primary) goto fail;
    ly_onednn_spares_give(&s->spares, &s->primary->spare);
    *state = s;
    return LY_OK;
fail:
    int8_release(s);
    return st;
}

static ly_status int8_run(void *state, const ly_kernel_call *call)
{
    int8_state *s = state;
    int8_op *op = (int8_op *)ly_onednn_spares_take(&s->spares);
    int previous = ly_onednn_threads_begin((int)s->key.threads);
    ly_status st = LY_OK;
    if (!op) op = create_op(s, call, s->primary, &st);
    if (op) st = s->n_bands > 1 ? run_op_in_bands(s, op, call) : run_op(s, op, call);
    ly_onednn_threads_end(previous);
    if (op) ly_onednn_spares_give(&s->spares, &op->spare);
    return st;
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
    const ly_conv_key *k = &s->key;
    dnnl_memory_desc_t plain;
    dnnl_status_t st;
    if (k->groups == 1) {
        dnnl_dims_t wd = {s->part_o, k->c, k->kh, k->kw};
        st = dnnl_memory_desc_init_by_tag(&plain, 4, wd, dnnl_s8, dnnl_oihw);
    } else {
        dnnl_dims_t wd = {k->groups, k->o / k->groups, k->c / k->groups, k->kh, k->kw};
        st = dnnl_memory_desc_init_by_tag(&plain, 5, wd, dnnl_s8, dnnl_goihw);
    }
    size_t part_codes = (size_t)(s->part_o * k->c * k->kh * k->kw);
    for (int p = 0; st == dnnl_success && p < s->n_parts; p++)
        st = ly_onednn_unpack(s->primary->part[p].weights, &plain,
                              (int8_t *)dst + (size_t)p * part_codes);
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

void ly_onednn_register_conv2d_int8(void)
{
    ly_provider_add(LY_OP_CONV2D_INT8, "onednn_int8", NULL, int8_predicate, &int8_stateful);
}
#else
void ly_onednn_register_conv2d_int8(void)
{
}
#endif
