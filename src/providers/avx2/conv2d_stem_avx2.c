/* SPDX-License-Identifier: MIT */
/*
 * conv2d for stems on AVX-512: 3x3, stride 2, padding 1, from an image of at
 * most four plain channels to 16k channels in 16-channel blocks (YOLO9's
 * 3 -> 16/32/64, HGNetv2's and ResNet-D's 3 -> 16/32/...). oneDNN runs these on
 * its direct kernel at ~30% of the FMA peak (LibreYOLO9t's 3 -> 16 on 640x640:
 * 1.7 ms a run at 1 thread), its 27 taps too few to hide the plain input's
 * stride-2 reads. Here an output pixel's 16 channels are one register,
 * summed over the 27 taps with the input broadcast from memory, twelve pixels
 * at a time. Bias first, then the taps in (row, channel, column) order, then
 * the activation: within conv2d's tolerance of the reference, not
 * bit-identical.
 */
#include "core/core.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/builtin.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define GROUP 12
#define MAX_IN 4

typedef struct stem_state {
    int64_t c, h, w, o, ho, wo;
    int64_t activation;
    float alpha;
    int threads;
    float *weights; /* [o / 16][tap = (ky, ci, kx)][16] */
    float *bias;    /* [o], zeros without one */
} stem_state;

typedef struct stem_run {
    const stem_state *s;
    const float *x;
    float *y;
} stem_run;

/* Output pixels [ox0, ox0 + GROUP) of row oy, block ob, whose taps all lie
 * inside the row (the caller checks the columns; rows are checked here). */
LY_AVX512 static void stem_group(const stem_run *run, int64_t ob, int64_t oy, int64_t ox0)
{
    const stem_state *s = run->s;
    __m512 acc[GROUP];
    __m512 b = _mm512_loadu_ps(s->bias + ob * 16);
#pragma GCC unroll 12
    for (int r = 0; r < GROUP; r++)
        acc[r] = b;
    const float *wt = s->weights + (size_t)(ob * 9 * s->c) * 16;
    for (int64_t ky = 0; ky < 3; ky++, wt += 3 * s->c * 16) {
        int64_t iy = 2 * oy - 1 + ky;
        if (iy < 0 || iy >= s->h) continue;
        for (int64_t ci = 0; ci < s->c; ci++) {
            const float *row = run->x + (size_t)((ci * s->h + iy) * s->w) + 2 * ox0 - 1;
            const float *tap = wt + ci * 3 * 16;
            for (int64_t kx = 0; kx < 3; kx++) {
                __m512 wv = _mm512_loadu_ps(tap + kx * 16);
#pragma GCC unroll 12
                for (int r = 0; r < GROUP; r++)
                    acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(row[2 * r + kx]), wv, acc[r]);
            }
        }
    }
    float *out = run->y + (size_t)(((ob * s->ho + oy) * s->wo + ox0) * 16);
    for (int r = 0; r < GROUP; r++)
        _mm512_storeu_ps(out + r * 16, ly_activate16(acc[r], s->activation, s->alpha));
}

/* One pixel, every tap checked (the borders and what a row's groups leave). */
LY_AVX512 static void stem_pixel(const stem_run *run, int64_t ob, int64_t oy, int64_t ox)
{
    const stem_state *s = run->s;
    __m512 acc = _mm512_loadu_ps(s->bias + ob * 16);
    const float *wt = s->weights + (size_t)(ob * 9 * s->c) * 16;
    for (int64_t ky = 0; ky < 3; ky++, wt += 3 * s->c * 16) {
        int64_t iy = 2 * oy - 1 + ky;
        if (iy < 0 || iy >= s->h) continue;
        for (int64_t ci = 0; ci < s->c; ci++)
            for (int64_t kx = 0; kx < 3; kx++) {
                int64_t ix = 2 * ox - 1 + kx;
                if (ix < 0 || ix >= s->w) continue;
                __m512 v = _mm512_set1_ps(run->x[(ci * s->h + iy) * s->w + ix]);
                acc = _mm512_fmadd_ps(v, _mm512_loadu_ps(wt + (ci * 3 + kx) * 16), acc);
            }
    }
    _mm512_storeu_ps(run->y + (size_t)(((ob * s->ho + oy) * s->wo + ox) * 16),
                     ly_activate16(acc, s->activation, s->alpha));
}

/* Work items are (block, output row) pairs. */
LY_AVX512 static void stem_rows(void *ctx, int64_t begin, int64_t end)
{
    const stem_run *run = ctx;
    const stem_state *s = run->s;
    /* pixels 1 .. inner - 1 read columns 2 ox - 1 .. 2 ox + 1, all inside */
    int64_t inner = s->w >= 2 ? (s->w - 2) / 2 + 1 : 0;
    if (inner > s->wo) inner = s->wo;
    for (int64_t item = begin; item < end; item++) {
        int64_t ob = item / s->ho, oy = item % s->ho, ox = 0;
        if (s->wo > 0) stem_pixel(run, ob, oy, ox++);
        for (; ox + GROUP <= inner; ox += GROUP)
            stem_group(run, ob, oy, ox);
        for (; ox < s->wo; ox++)
            stem_pixel(run, ob, oy, ox);
    }
}

static ly_status stem_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    memset(out, 0, sizeof *out);
    out->out[0] = LY_LAYOUT_BIT(LY_LAYOUT_NCHW16C); /* the input stays plain */
    out->preferred = LY_LAYOUT_NCHW16C;
    return LY_OK;
}

static void stem_release(void *state)
{
    stem_state *s = state;
    if (!s) return;
    free(s->weights);
    free(s->bias);
    free(s);
}

static ly_status stem_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state)
{
    if (info->in_layout[0] != LY_LAYOUT_PLAIN || info->out_layout[0] != LY_LAYOUT_NCHW16C ||
        !(info->constant_inputs & (1u << 1)) || (call->in[2] && !(info->constant_inputs & 4u)))
        return LY_E_DECLINED;
    const ly_tensor *x = call->in[0], *w = call->in[1], *y = call->out[0];
    const ly_conv2d_params *p = call->params;
    stem_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "conv2d (avx512_stem): out of memory");
    s->c = x->shape[1];
    s->h = x->shape[2];
    s->w = x->shape[3];
    s->o = w->shape[0];
    s->ho = y->shape[2];
    s->wo = y->shape[3];
    s->activation = p->activation;
    s->alpha = (float)p->alpha;
    s->threads = s->ho * s->wo * s->o < (1 << 15) ? 1 : info->threads;
    s->weights = malloc((size_t)(s->o * 9 * s->c) * sizeof *s->weights);
    s->bias = calloc((size_t)s->o, sizeof *s->bias);
    if (!s->weights || !s->bias) {
        stem_release(s);
        return ly_set_error(LY_E_NO_MEMORY, "conv2d (avx512_stem): out of memory");
    }
    const float *wt = w->data; /* [o][c][3][3] */
    for (int64_t o = 0; o < s->o; o++)
        for (int64_t ky = 0; ky < 3; ky++)
            for (int64_t ci = 0; ci < s->c; ci++)
                for (int64_t kx = 0; kx < 3; kx++)
                    s->weights[((o / 16 * 3 + ky) * s->c * 3 + ci * 3 + kx) * 16 + o % 16] =
                        wt[((o * s->c + ci) * 3 + ky) * 3 + kx];
    if (call->in[2]) memcpy(s->bias, call->in[2]->data, (size_t)s->o * sizeof *s->bias);
    *state = s;
    return LY_OK;
}

static ly_status stem_run_state(void *state, const ly_kernel_call *call)
{
    const stem_state *s = state;
    int64_t images = call->in[0]->shape[0];
    size_t in_image = (size_t)(s->c * s->h * s->w), out_image = (size_t)(s->o * s->ho * s->wo);
    for (int64_t n = 0; n < images; n++) {
        stem_run run = {s, (const float *)call->in[0]->data + n * in_image,
                        (float *)call->out[0]->data + n * out_image};
        ly_parallel_for(s->o / 16 * s->ho, 1, s->threads, stem_rows, &run);
    }
    return LY_OK;
}

/* Outside a graph (no layouts negotiated): the other implementations. */
ly_status ly_avx512_conv2d_stem(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_DECLINED;
}

const ly_kernel_stateful ly_avx512_conv2d_stem_stateful = {.layouts = stem_layouts,
                                                           .prepare = stem_prepare,
                                                           .run = stem_run_state,
                                                           .release = stem_release};
