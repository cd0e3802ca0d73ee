/* SPDX-License-Identifier: MIT */
/*
 * conv2d for thin maps in 8-channel blocks: 3x3, stride 1, padding 1, input
 * channels a multiple of 8 up to 64, both sides in NCHW8C.
 *
 * avx512_thin, 24 output channels (they do not fill 16-channel blocks, so the
 * graph keeps them in blocks of 8; oneDNN takes an AVX2-class kernel for
 * those blocks: LibreYOLO9t's 36 24->24 3x3 on 40x40 ran at ~90 GFLOP/s): a
 * pixel's 24 output channels are one 16-lane and one 8-lane register, summed
 * over the taps with the input broadcast from memory, twelve pixels at a time
 * (0.10 against 0.17 ms for that shape, hot).
 *
 * avx2_thin, 16 output channels on AVX2 CPUs: two 8-lane registers a pixel,
 * six pixels at a time (twelve accumulators of the sixteen registers).
 * oneDNN 2.6's jit:avx2 kernel ran LibreYOLO9t's 16->16 3x3 on 80x80 at 45
 * GFLOP/s, 31 with the bottleneck's residual as a sum post-op (Zen 3).
 *
 * Both: bias first, then the taps in (row, column, channel) order, then the
 * activation and the residual: within conv2d's tolerance of the reference,
 * not bit-identical.
 */
#include "core/core.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/builtin.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define GROUP 12
#define OUT 24 /* avx512_thin's output channels: lanes 0-15 and 16-23 */
#define GROUP8 6
#define OUT8 16 /* avx2_thin's: two 8-lane registers */

typedef struct thin_state {
    int64_t c, h, w;
    int64_t out, row; /* output channels; floats a weight row holds */
    int64_t activation;
    float alpha;
    int threads;
    float *weights; /* [tap = (ky, kx, ci)][row]: the output channels, then zeros */
    float bias[32];
    void (*rows)(void *ctx, int64_t begin, int64_t end);
} thin_state;

typedef struct thin_run {
    const thin_state *s;
    const float *x, *residual;
    float *y;
} thin_run;

/* Pixel (oy, ox)'s 24 channels, lanes 0-15 in lo and 16-23 in the low half of
 * hi: activation, residual, stored into the three 8-channel blocks. */
LY_AVX512 static inline void thin_store(const thin_run *run, int64_t oy, int64_t ox, __m512 lo,
                                        __m512 hi)
{
    const thin_state *s = run->s;
    lo = ly_activate16(lo, s->activation, s->alpha);
    hi = ly_activate16(hi, s->activation, s->alpha);
    size_t plane = (size_t)(s->h * s->w * 8), at = (size_t)((oy * s->w + ox) * 8);
    __m256 part[3] = {_mm512_castps512_ps256(lo),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lo), 1)),
                      _mm512_castps512_ps256(hi)};
    for (int b = 0; b < 3; b++) {
        __m256 v = part[b];
        if (run->residual) v = _mm256_add_ps(v, _mm256_loadu_ps(run->residual + b * plane + at));
        _mm256_storeu_ps(run->y + b * plane + at, v);
    }
}

/* GROUP pixels from ox0 of row oy, every column tap inside the row. */
LY_AVX512 static void thin_group(const thin_run *run, int64_t oy, int64_t ox0)
{
    const thin_state *s = run->s;
    __m512 lo[GROUP], hi[GROUP];
    __m512 b0 = _mm512_loadu_ps(s->bias), b1 = _mm512_loadu_ps(s->bias + 16);
#pragma GCC unroll 12
    for (int r = 0; r < GROUP; r++)
        lo[r] = b0, hi[r] = b1;
    size_t plane = (size_t)(s->h * s->w * 8);
    for (int64_t ky = 0; ky < 3; ky++) {
        int64_t iy = oy - 1 + ky;
        if (iy < 0 || iy >= s->h) continue;
        for (int64_t kx = 0; kx < 3; kx++) {
            const float *first = run->x + (size_t)((iy * s->w + ox0 - 1 + kx) * 8);
            const float *wt = s->weights + (size_t)((ky * 3 + kx) * s->c) * 32;
            for (int64_t cb = 0; cb < s->c / 8; cb++) {
                const float *src = first + cb * plane;
                for (int cl = 0; cl < 8; cl++, wt += 32) {
                    __m512 w0 = _mm512_loadu_ps(wt), w1 = _mm512_loadu_ps(wt + 16);
#pragma GCC unroll 12
                    for (int r = 0; r < GROUP; r++) {
                        __m512 v = _mm512_set1_ps(src[r * 8 + cl]);
                        lo[r] = _mm512_fmadd_ps(v, w0, lo[r]);
                        hi[r] = _mm512_fmadd_ps(v, w1, hi[r]);
                    }
                }
            }
        }
    }
    for (int r = 0; r < GROUP; r++)
        thin_store(run, oy, ox0 + r, lo[r], hi[r]);
}

/* One pixel, column taps checked (the borders and what a row's groups leave). */
LY_AVX512 static void thin_pixel(const thin_run *run, int64_t oy, int64_t ox)
{
    const thin_state *s = run->s;
    __m512 lo = _mm512_loadu_ps(s->bias), hi = _mm512_loadu_ps(s->bias + 16);
    size_t plane = (size_t)(s->h * s->w * 8);
    for (int64_t ky = 0; ky < 3; ky++) {
        int64_t iy = oy - 1 + ky;
        if (iy < 0 || iy >= s->h) continue;
        for (int64_t kx = 0; kx < 3; kx++) {
            int64_t ix = ox - 1 + kx;
            if (ix < 0 || ix >= s->w) continue;
            const float *first = run->x + (size_t)((iy * s->w + ix) * 8);
            const float *wt = s->weights + (size_t)((ky * 3 + kx) * s->c) * 32;
            for (int64_t cb = 0; cb < s->c / 8; cb++)
                for (int cl = 0; cl < 8; cl++, wt += 32) {
                    __m512 v = _mm512_set1_ps(first[cb * plane + cl]);
                    lo = _mm512_fmadd_ps(v, _mm512_loadu_ps(wt), lo);
                    hi = _mm512_fmadd_ps(v, _mm512_loadu_ps(wt + 16), hi);
                }
        }
    }
    thin_store(run, oy, ox, lo, hi);
}

LY_AVX512 static void thin_rows(void *ctx, int64_t begin, int64_t end)
{
    const thin_run *run = ctx;
    const thin_state *s = run->s;
    for (int64_t oy = begin; oy < end; oy++) {
        int64_t ox = 0;
        if (s->w > 0) thin_pixel(run, oy, ox++);
        for (; ox + GROUP <= s->w - 1; ox += GROUP)
            thin_group(run, oy, ox);
        for (; ox < s->w; ox++)
            thin_pixel(run, oy, ox);
    }
}

/* avx2_thin: pixel (oy, ox)'s 16 channels, the two 8-channel blocks. */
static inline void thin8_store(const thin_run *run, int64_t oy, int64_t ox, __m256 lo, __m256 hi)
{
    const thin_state *s = run->s;
    size_t plane = (size_t)(s->h * s->w * 8), at = (size_t)((oy * s->w + ox) * 8);
    __m256 part[2] = {ly_activate8(lo, s->activation, s->alpha),
                      ly_activate8(hi, s->activation, s->alpha)};
    for (int b = 0; b < 2; b++) {
        __m256 v = part[b];
        if (run->residual) v = _mm256_add_ps(v, _mm256_loadu_ps(run->residual + b * plane + at));
        _mm256_storeu_ps(run->y + b * plane + at, v);
    }
}

/* GROUP8 pixels from ox0 of row oy, every column tap inside the row. */
static void thin8_group(const thin_run *run, int64_t oy, int64_t ox0)
{
    const thin_state *s = run->s;
    __m256 lo[GROUP8], hi[GROUP8];
    __m256 b0 = _mm256_loadu_ps(s->bias), b1 = _mm256_loadu_ps(s->bias + 8);
#pragma GCC unroll 6
    for (int r = 0; r < GROUP8; r++)
        lo[r] = b0, hi[r] = b1;
    size_t plane = (size_t)(s->h * s->w * 8);
    for (int64_t ky = 0; ky < 3; ky++) {
        int64_t iy = oy - 1 + ky;
        if (iy < 0 || iy >= s->h) continue;
        for (int64_t kx = 0; kx < 3; kx++) {
            const float *first = run->x + (size_t)((iy * s->w + ox0 - 1 + kx) * 8);
            const float *wt = s->weights + (size_t)((ky * 3 + kx) * s->c) * OUT8;
            for (int64_t cb = 0; cb < s->c / 8; cb++) {
                const float *src = first + cb * plane;
                for (int cl = 0; cl < 8; cl++, wt += OUT8) {
                    __m256 w0 = _mm256_loadu_ps(wt), w1 = _mm256_loadu_ps(wt + 8);
#pragma GCC unroll 6
                    for (int r = 0; r < GROUP8; r++) {
                        __m256 v = _mm256_broadcast_ss(src + r * 8 + cl);
                        lo[r] = _mm256_fmadd_ps(v, w0, lo[r]);
                        hi[r] = _mm256_fmadd_ps(v, w1, hi[r]);
                    }
                }
            }
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < GROUP8; r++)
        thin8_store(run, oy, ox0 + r, lo[r], hi[r]);
}

/* One pixel, column taps checked (the borders and what a row's groups leave). */
static void thin8_pixel(const thin_run *run, int64_t oy, int64_t ox)
{
    const thin_state *s = run->s;
    __m256 lo = _mm256_loadu_ps(s->bias), hi = _mm256_loadu_ps(s->bias + 8);
    size_t plane = (size_t)(s->h * s->w * 8);
    for (int64_t ky = 0; ky < 3; ky++) {
        int64_t iy = oy - 1 + ky;
        if (iy < 0 || iy >= s->h) continue;
        for (int64_t kx = 0; kx < 3; kx++) {
            int64_t ix = ox - 1 + kx;
            if (ix < 0 || ix >= s->w) continue;
            const float *first = run->x + (size_t)((iy * s->w + ix) * 8);
            const float *wt = s->weights + (size_t)((ky * 3 + kx) * s->c) * OUT8;
            for (int64_t cb = 0; cb < s->c / 8; cb++)
                for (int cl = 0; cl < 8; cl++, wt += OUT8) {
                    __m256 v = _mm256_broadcast_ss(first + cb * plane + cl);
                    lo = _mm256_fmadd_ps(v, _mm256_loadu_ps(wt), lo);
                    hi = _mm256_fmadd_ps(v, _mm256_loadu_ps(wt + 8), hi);
                }
        }
    }
    thin8_store(run, oy, ox, lo, hi);
}

static void thin8_rows(void *ctx, int64_t begin, int64_t end)
{
    const thin_run *run = ctx;
    const thin_state *s = run->s;
    for (int64_t oy = begin; oy < end; oy++) {
        int64_t ox = 0;
        if (s->w > 0) thin8_pixel(run, oy, ox++);
        for (; ox + GROUP8 <= s->w - 1; ox += GROUP8)
            thin8_group(run, oy, ox);
        for (; ox < s->w; ox++)
            thin8_pixel(run, oy, ox);
    }
}

static ly_status thin_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    memset(out, 0, sizeof *out);
    out->in[0] = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    out->out[0] = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    out->in[3] = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    out->tied = 1u << 3;
    out->preferred = LY_LAYOUT_NCHW8C;
    return LY_OK;
}

static void thin_release(void *state)
{
    thin_state *s = state;
    if (!s) return;
    free(s->weights);
    free(s);
}

static ly_status prepare_thin(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state, int64_t out, int64_t row,
                              void (*rows)(void *, int64_t, int64_t), const char *name)
{
    if (info->in_layout[0] != LY_LAYOUT_NCHW8C || info->out_layout[0] != LY_LAYOUT_NCHW8C ||
        !(info->constant_inputs & (1u << 1)) || (call->in[2] && !(info->constant_inputs & 4u)))
        return LY_E_DECLINED;
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = call->params;
    thin_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "conv2d (%s): out of memory", name);
    s->c = x->shape[1];
    s->h = x->shape[2];
    s->w = x->shape[3];
    s->out = out;
    s->row = row;
    s->rows = rows;
    s->activation = p->activation;
    s->alpha = (float)p->alpha;
    s->threads = s->h * s->w * out < (1 << 15) ? 1 : info->threads;
    s->weights = calloc((size_t)(9 * s->c * row), sizeof *s->weights);
    if (!s->weights) {
        thin_release(s);
        return ly_set_error(LY_E_NO_MEMORY, "conv2d (%s): out of memory", name);
    }
    const float *wt = w->data; /* [out][c][3][3] */
    for (int64_t o = 0; o < out; o++)
        for (int64_t ci = 0; ci < s->c; ci++)
            for (int64_t tap = 0; tap < 9; tap++)
                s->weights[(tap * s->c + ci) * row + o] = wt[(o * s->c + ci) * 9 + tap];
    if (call->in[2]) memcpy(s->bias, call->in[2]->data, (size_t)out * sizeof *s->bias);
    *state = s;
    return LY_OK;
}

static ly_status thin_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state)
{
    return prepare_thin(call, info, state, OUT, 32, thin_rows, "avx512_thin");
}

static ly_status thin8_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                               void **state)
{
    return prepare_thin(call, info, state, OUT8, OUT8, thin8_rows, "avx2_thin");
}

static ly_status thin_run_state(void *state, const ly_kernel_call *call)
{
    const thin_state *s = state;
    int64_t images = call->in[0]->shape[0];
    size_t in_image = (size_t)(s->c * s->h * s->w), out_image = (size_t)(s->out * s->h * s->w);
    for (int64_t n = 0; n < images; n++) {
        thin_run run = {s, (const float *)call->in[0]->data + n * in_image,
                        call->in[3] ? (const float *)call->in[3]->data + n * out_image : NULL,
                        (float *)call->out[0]->data + n * out_image};
        ly_parallel_for(s->h, 1, s->threads, s->rows, &run);
    }
    return LY_OK;
}

/* The graph-only convolutions' (the thin kernels', avx2_winograd's) plain
 * form: outside a graph (plain maps) the other implementations serve. */
ly_status ly_conv2d_graph_only(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_DECLINED;
}

const ly_kernel_stateful ly_avx512_conv2d_thin_stateful = {.layouts = thin_layouts,
                                                           .prepare = thin_prepare,
                                                           .run = thin_run_state,
                                                           .release = thin_release};

const ly_kernel_stateful ly_avx2_conv2d_thin_stateful = {.layouts = thin_layouts,
                                                         .prepare = thin8_prepare,
                                                         .run = thin_run_state,
                                                         .release = thin_release};
