/* SPDX-License-Identifier: MIT */
/*
 * max_pool2d and avg_pool2d ("avx2"), bit-identical to the reference
 * (src/ops/nn/reference.c): every output goes through the reference's
 * sequence, only which outputs run side by side changes.
 *
 *  - Channel-blocked maps ([N][C/B][H][W][B], B = 8 or 16, in a graph's
 *    blocked layouts): the B channels of an output position side by side, any
 *    window, stride and padding. Max takes the window in the reference's
 *    order (one pass up to 9 elements; above, each row's maximum first), so
 *    even a NaN's payload is the same; avg sums the window's real elements in
 *    row order from +0 and divides by the reference's count. What it buys is
 *    the layout as much as the pool: on AVX2 CPUs oneDNN pools nothing, so
 *    NanoDet's stem pool and YOLO9's AConv pools ran on the reference, on
 *    plain maps that the convolutions around them reordered to and from.
 *  - Plain maps at column stride 1 (max: windows of up to 9 elements, HGNetv2's
 *    2x2 stem pool): eight output columns side by side. Other plain calls
 *    decline (the reference serves them).
 */
#include "core/core.h"
#include "core/layout.h"
#include "libreyolo/nn.h"
#include "providers/avx2/pool.h"
#include "providers/builtin.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many window elements a pool runs on the calling thread. */
#define POOL_PARALLEL_MIN (1 << 16)

typedef struct pool_job {
    const float *x;
    float *y;
    int64_t h, w, ho, wo, kh, kw, sh, ph, pw;
    bool count_include_pad;
} pool_job;

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Output columns [*lo, *hi) whose input column ox + shift lies in [0, w)
 * (plain maps, column stride 1). */
static void shifted_columns(const pool_job *j, int64_t shift, int64_t *lo, int64_t *hi)
{
    *lo = clamp64(-shift, 0, j->wo);
    *hi = clamp64(j->w - shift, *lo, j->wo);
}

/* (v > best || v != v) ? v : best, eight lanes. */
static inline __m256 max_nan8(__m256 best, __m256 v)
{
    __m256 take =
        _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_ps(best, v, take);
}

static void pool_planes(void *ctx, int64_t begin, int64_t end)
{
    const pool_job *j = ctx;
    for (int64_t item = begin; item < end; item++) {
        const float *in = j->x + item * j->h * j->w;
        for (int64_t oy = 0; oy < j->ho; oy++) {
            float *out = j->y + (item * j->ho + oy) * j->wo;
            for (int64_t ox = 0; ox < j->wo; ox++)
                out[ox] = -INFINITY;
            for (int64_t ky = 0; ky < j->kh; ky++) {
                int64_t iy = oy * j->sh - j->ph + ky;
                if (iy < 0 || iy >= j->h) continue;
                const float *row = in + iy * j->w;
                for (int64_t kx = 0; kx < j->kw; kx++) {
                    int64_t shift = kx - j->pw, lo, hi;
                    shifted_columns(j, shift, &lo, &hi);
                    int64_t ox = lo;
                    for (; ox + 8 <= hi; ox += 8)
                        _mm256_storeu_ps(out + ox, max_nan8(_mm256_loadu_ps(out + ox),
                                                            _mm256_loadu_ps(row + ox + shift)));
                    for (; ox < hi; ox++) {
                        float v = row[ox + shift];
                        if (v > out[ox] || v != v) out[ox] = v;
                    }
                }
            }
        }
    }
}

/* avg_pool_range's sums on plain maps at column stride 1: each output row
 * from +0, the window's real rows in order, within a row its columns in
 * order, eight outputs side by side; then the division. */
static void avg_planes(void *ctx, int64_t begin, int64_t end)
{
    const pool_job *j = ctx;
    for (int64_t item = begin; item < end; item++) {
        const float *in = j->x + item * j->h * j->w;
        for (int64_t oy = 0; oy < j->ho; oy++) {
            float *out = j->y + (item * j->ho + oy) * j->wo;
            memset(out, 0, (size_t)j->wo * sizeof *out);
            int64_t rows = 0;
            for (int64_t ky = 0; ky < j->kh; ky++) {
                int64_t iy = oy * j->sh - j->ph + ky;
                if (iy < 0 || iy >= j->h) continue;
                rows++;
                const float *row = in + iy * j->w;
                for (int64_t kx = 0; kx < j->kw; kx++) {
                    int64_t shift = kx - j->pw, lo, hi;
                    shifted_columns(j, shift, &lo, &hi);
                    int64_t ox = lo;
                    for (; ox + 8 <= hi; ox += 8)
                        _mm256_storeu_ps(out + ox,
                                         _mm256_add_ps(_mm256_loadu_ps(out + ox),
                                                       _mm256_loadu_ps(row + ox + shift)));
                    for (; ox < hi; ox++)
                        out[ox] += row[ox + shift];
                }
            }
            if (j->count_include_pad) {
                __m256 count = _mm256_set1_ps((float)(j->kh * j->kw));
                int64_t ox = 0;
                for (; ox + 8 <= j->wo; ox += 8)
                    _mm256_storeu_ps(out + ox, _mm256_div_ps(_mm256_loadu_ps(out + ox), count));
                for (; ox < j->wo; ox++)
                    out[ox] /= (float)(j->kh * j->kw);
                continue;
            }
            for (int64_t ox = 0; ox < j->wo; ox++) {
                int64_t x0 = ox - j->pw;
                int64_t cols = clamp64(x0 + j->kw, 0, j->w) - clamp64(x0, 0, j->w);
                out[ox] /= (float)(rows * cols);
            }
        }
    }
}

static ly_status run_plain(const ly_kernel_call *call, bool max)
{
    const ly_tensor *x = call->in[0], *y = call->out[0];
    const ly_pool2d_params *p = call->params;
    if (!ly_avx2_pool_plain_takes(p, max)) return LY_E_DECLINED; /* the reference's */
    pool_job j = {.x = x->data,
                  .y = y->data,
                  .h = x->shape[2],
                  .w = x->shape[3],
                  .ho = y->shape[2],
                  .wo = y->shape[3],
                  .kh = p->kernel[0],
                  .kw = p->kernel[1],
                  .sh = p->stride[0],
                  .ph = p->padding[0],
                  .pw = p->padding[1],
                  .count_include_pad = p->count_include_pad != 0};
    int64_t planes = x->shape[0] * x->shape[1], work = ly_tensor_numel(y) * j.kh * j.kw;
    if (planes == 0 || j.ho == 0 || j.wo == 0) return LY_OK;
    int threads = work >= POOL_PARALLEL_MIN ? ly_threads_resolve(call->threads) : 1;
    ly_parallel_for(planes, 1, threads, max ? pool_planes : avg_planes, &j);
    return LY_OK;
}

ly_status ly_avx2_max_pool2d(const ly_kernel_call *call)
{
    return run_plain(call, true);
}

ly_status ly_avx2_avg_pool2d(const ly_kernel_call *call)
{
    return run_plain(call, false);
}

/* ---- channel-blocked maps ------------------------------------------------------------ */

typedef struct blocked_state {
    bool max;
    bool two_pass; /* max over more than 9 elements: the reference's row maxima first */
    bool count_include_pad;
    int block; /* 8 or 16 */
    int threads;
    int64_t n, blocks, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
} blocked_state;

typedef struct blocked_run {
    const blocked_state *s;
    const float *x;
    float *y;
} blocked_run;

/* The window's real rows [*lo, *hi) for output o: i = o * stride - pad + k in [0, n). */
static void window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t n, int64_t *lo,
                   int64_t *hi)
{
    int64_t first = o * stride - pad;
    *lo = clamp64(-first, 0, k);
    *hi = clamp64(n - first, *lo, k);
}

/* One output position, eight channels (lanes) of it. */
static inline __m256 blocked_max8(const blocked_state *s, const float *in, int64_t iy0, int64_t ky0,
                                  int64_t ky1, int64_t ix0, int64_t kx0, int64_t kx1)
{
    const int64_t b = s->block, row = s->w * b;
    __m256 best = _mm256_set1_ps(-INFINITY);
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *at = in + (iy0 + ky) * row + ix0 * b;
        if (!s->two_pass) {
            for (int64_t kx = kx0; kx < kx1; kx++)
                best = max_nan8(best, _mm256_loadu_ps(at + kx * b));
            continue;
        }
        __m256 rowmax = _mm256_set1_ps(-INFINITY);
        for (int64_t kx = kx0; kx < kx1; kx++)
            rowmax = max_nan8(rowmax, _mm256_loadu_ps(at + kx * b));
        best = max_nan8(best, rowmax);
    }
    return best;
}

static inline __m256 blocked_avg8(const blocked_state *s, const float *in, int64_t iy0, int64_t ky0,
                                  int64_t ky1, int64_t ix0, int64_t kx0, int64_t kx1)
{
    const int64_t b = s->block, row = s->w * b;
    __m256 sum = _mm256_setzero_ps();
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *at = in + (iy0 + ky) * row + ix0 * b;
        for (int64_t kx = kx0; kx < kx1; kx++)
            sum = _mm256_add_ps(sum, _mm256_loadu_ps(at + kx * b));
    }
    /* the reference's count: the whole window, or its real rows times its
     * real columns */
    float count =
        s->count_include_pad ? (float)(s->kh * s->kw) : (float)((ky1 - ky0) * (kx1 - kx0));
    return _mm256_div_ps(sum, _mm256_set1_ps(count));
}

/* Rows are (image, block, output row) triples. */
static void blocked_rows(void *ctx, int64_t begin, int64_t end)
{
    const blocked_run *r = ctx;
    const blocked_state *s = r->s;
    const int64_t b = s->block;
    for (int64_t item = begin; item < end; item++) {
        int64_t plane = item / s->ho, oy = item % s->ho;
        const float *in = r->x + plane * s->h * s->w * b;
        float *out = r->y + (plane * s->ho + oy) * s->wo * b;
        int64_t ky0, ky1;
        window(oy, s->sh, s->ph, s->kh, s->h, &ky0, &ky1);
        int64_t iy0 = oy * s->sh - s->ph;
        for (int64_t ox = 0; ox < s->wo; ox++) {
            int64_t kx0, kx1;
            window(ox, s->sw, s->pw, s->kw, s->w, &kx0, &kx1);
            int64_t ix0 = ox * s->sw - s->pw;
            for (int64_t c = 0; c < b; c += 8) {
                __m256 v = s->max ? blocked_max8(s, in + c, iy0, ky0, ky1, ix0, kx0, kx1)
                                  : blocked_avg8(s, in + c, iy0, ky0, ky1, ix0, kx0, kx1);
                _mm256_storeu_ps(out + ox * b + c, v);
            }
        }
    }
}

static ly_status blocked_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    ly_layouts_channelwise(call, out);
    return LY_OK;
}

static ly_status blocked_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                 void **state, bool max)
{
    ly_layout layout = info->in_layout[0];
    if (layout == LY_LAYOUT_PLAIN || info->out_layout[0] != layout) return LY_E_DECLINED;
    const ly_tensor *x = call->in[0], *y = call->out[0];
    const ly_pool2d_params *p = call->params;
    blocked_state *s = calloc(1, sizeof *s);
    if (!s)
        return ly_set_error(LY_E_NO_MEMORY, "%s (avx2): out of memory",
                            max ? "max_pool2d" : "avg_pool2d");
    s->max = max;
    s->two_pass = max && p->kernel[0] * p->kernel[1] > 9;
    s->count_include_pad = p->count_include_pad != 0;
    s->block = layout == LY_LAYOUT_NCHW16C ? 16 : 8;
    s->n = x->shape[0];
    s->blocks = x->shape[1] / s->block;
    s->h = x->shape[2];
    s->w = x->shape[3];
    s->ho = y->shape[2];
    s->wo = y->shape[3];
    s->kh = p->kernel[0];
    s->kw = p->kernel[1];
    s->sh = p->stride[0];
    s->sw = p->stride[1];
    s->ph = p->padding[0];
    s->pw = p->padding[1];
    s->threads = ly_tensor_numel(y) * s->kh * s->kw < POOL_PARALLEL_MIN ? 1 : info->threads;
    *state = s;
    return LY_OK;
}

static ly_status max_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                             void **state)
{
    return blocked_prepare(call, info, state, true);
}

static ly_status avg_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                             void **state)
{
    return blocked_prepare(call, info, state, false);
}

static ly_status blocked_run_state(void *state, const ly_kernel_call *call)
{
    const blocked_state *s = state;
    blocked_run r = {s, call->in[0]->data, call->out[0]->data};
    ly_parallel_for(s->n * s->blocks * s->ho, 1, s->threads, blocked_rows, &r);
    return LY_OK;
}

const ly_kernel_stateful ly_avx2_max_pool2d_stateful = {
    .layouts = blocked_layouts, .prepare = max_prepare, .run = blocked_run_state, .release = free};

const ly_kernel_stateful ly_avx2_avg_pool2d_stateful = {
    .layouts = blocked_layouts, .prepare = avg_prepare, .run = blocked_run_state, .release = free};
