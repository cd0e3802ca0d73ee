/* SPDX-License-Identifier: MIT */
/*
 * layer_norm and rms_norm over the last axis ("avx2"), within the slots'
 * tolerance of the reference (src/ops/norm/reference.c, statistics in
 * double): here the element work is in float and only the sixteen lane sums
 * of a row go to double.
 *
 *  - mean: sixteen float lanes sum x - x0 (x0 the row's first element, so a
 *    row far from zero sums small numbers: no cancellation), reduced in
 *    double in a fixed tree, mean = x0 + sum / c;
 *  - d = (x - hi) - lo, mean = hi + lo split into two floats (x - hi is exact
 *    where x is near the mean, so d keeps the double mean's precision);
 *  - variance: sixteen float lanes of d * d (fused), reduced the same way;
 *    rstd = 1 / sqrt(var + eps) in double, rounded once to float;
 *  - y = (d * rstd) * weight + bias in float (rms: (x * rstd) * scale).
 * An output is within a few float ulps of the reference's, on any row (the
 * double statistics read every element within one ulp). The reference's
 * double element work converted every element three times: SwinIR's
 * 60-channel rows took ~106 cycles, 4x this.
 *
 * Rows go four side by side (two reductions, a square root and a division
 * per row are a chain). Loads and stores are masked only at a row's end:
 * vmaskmovps is microcoded on AMD (ViT-Ti's [197, 192] rows ~2x faster on
 * Zen 3 without them). The AVX2 and AVX-512 rows are the same arithmetic
 * lane for lane (a chunk of sixteen is two 8-lane registers there), so both
 * give the same bits. ViT's [197, 192] tokens, D-FINE's decoder, DEIMv2's
 * RMSNorm and SwinIR's [65536, 60] maps run here.
 */
#include "core/core.h"
#include "libreyolo/kernels.h"

#include <immintrin.h>
#include <math.h>

#define ROWS 4   /* rows side by side */
#define CHUNK 16 /* the lanes a row's sums run in */

typedef struct norm_job {
    const float *x, *w, *b;
    float *y;
    int64_t c;
    double eps;
    bool rms;
} norm_job;

/* Lanes (0 1 2 3) summed as (0 + 2) + (1 + 3). */
static inline double hsum4d(__m256d v)
{
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

/* A row's statistics from its lane sums. */
typedef struct row_stats {
    float x0, hi, lo, rstd;
} row_stats;

static inline void set_mean(row_stats *s, double lane_sum, int64_t c)
{
    double mean = (double)s->x0 + lane_sum / (double)c;
    s->hi = (float)mean;
    s->lo = (float)(mean - (double)s->hi);
}

/* (the instruction itself: sqrt() would test for errno's sake first) */
static inline void set_rstd(row_stats *s, double squares, const norm_job *j)
{
    __m128d v = _mm_set_sd(squares / (double)j->c + j->eps);
    s->rstd = (float)(1.0 / _mm_cvtsd_f64(_mm_sqrt_sd(v, v)));
}

/* ---- 256-bit rows ------------------------------------------------------------------ */

/* Sixteen float lanes (lo: 0-7, hi: 8-15) in double: lane i + lane i + 8,
 * then i + i + 4, then hsum4d, as the 512-bit tree. */
static inline double reduce256(__m256 lo, __m256 hi)
{
    __m256d a_lo = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(lo)),
                                 _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
    __m256d a_hi = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)),
                                 _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
    return hsum4d(_mm256_add_pd(a_lo, a_hi));
}

/* Which of the eight lanes from element `at` are the row's (all ones). */
static inline __m256i live8(int64_t at, int64_t c)
{
    int64_t n = c - at < 0 ? 0 : c - at > 8 ? 8 : c - at;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The first pass's step at element k of row r: x - x0 into the two lane sums
 * (lanes past the row's end add 0). `tail`: k + 16 may pass the row's end,
 * and only then are the loads masked (vmaskmovps is microcoded on AMD). */
static inline __attribute__((always_inline)) void
mean_step(const float *x, __m256 x0, int64_t k, int64_t c, bool tail, __m256 *lo, __m256 *hi)
{
    if (!tail) {
        *lo = _mm256_add_ps(*lo, _mm256_sub_ps(_mm256_loadu_ps(x), x0));
        *hi = _mm256_add_ps(*hi, _mm256_sub_ps(_mm256_loadu_ps(x + 8), x0));
        return;
    }
    __m256i m0 = live8(k, c), m1 = live8(k + 8, c);
    __m256 v0 = _mm256_sub_ps(_mm256_maskload_ps(x, m0), x0);
    __m256 v1 = _mm256_sub_ps(_mm256_maskload_ps(x + 8, m1), x0);
    *lo = _mm256_add_ps(*lo, _mm256_and_ps(v0, _mm256_castsi256_ps(m0)));
    *hi = _mm256_add_ps(*hi, _mm256_and_ps(v1, _mm256_castsi256_ps(m1)));
}

/* The second pass's step: d = (x - hi) - lo, d * d into the lane sums. */
static inline __attribute__((always_inline)) void square_step(const float *x, __m256 h, __m256 l,
                                                              int64_t k, int64_t c, bool tail,
                                                              __m256 *lo, __m256 *hi)
{
    __m256 d0, d1;
    if (!tail) {
        d0 = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x), h), l);
        d1 = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + 8), h), l);
    } else {
        __m256i m0 = live8(k, c), m1 = live8(k + 8, c);
        d0 = _mm256_sub_ps(_mm256_sub_ps(_mm256_maskload_ps(x, m0), h), l);
        d1 = _mm256_sub_ps(_mm256_sub_ps(_mm256_maskload_ps(x + 8, m1), h), l);
        d0 = _mm256_and_ps(d0, _mm256_castsi256_ps(m0));
        d1 = _mm256_and_ps(d1, _mm256_castsi256_ps(m1));
    }
    *lo = _mm256_fmadd_ps(d0, d0, *lo);
    *hi = _mm256_fmadd_ps(d1, d1, *hi);
}

static inline __attribute__((always_inline)) void rows256(const norm_job *j, int64_t r0, int rows)
{
    const int64_t c = j->c, whole = c & ~(int64_t)(CHUNK - 1);
    row_stats s[ROWS] = {{0}};
    __m256 lo[ROWS], hi[ROWS];
    if (!j->rms) {
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            s[r].x0 = j->x[(r0 + r) * c];
            lo[r] = hi[r] = _mm256_setzero_ps();
        }
        for (int64_t k = 0; k < whole; k += CHUNK)
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++)
                mean_step(j->x + (r0 + r) * c + k, _mm256_set1_ps(s[r].x0), k, c, false, &lo[r],
                          &hi[r]);
        if (whole < c)
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++)
                mean_step(j->x + (r0 + r) * c + whole, _mm256_set1_ps(s[r].x0), whole, c, true,
                          &lo[r], &hi[r]);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            set_mean(&s[r], reduce256(lo[r], hi[r]), c);
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        lo[r] = hi[r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < whole; k += CHUNK)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            square_step(j->x + (r0 + r) * c + k, _mm256_set1_ps(s[r].hi), _mm256_set1_ps(s[r].lo),
                        k, c, false, &lo[r], &hi[r]);
    if (whole < c)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            square_step(j->x + (r0 + r) * c + whole, _mm256_set1_ps(s[r].hi),
                        _mm256_set1_ps(s[r].lo), whole, c, true, &lo[r], &hi[r]);
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        set_rstd(&s[r], reduce256(lo[r], hi[r]), j);
    const int64_t whole8 = c & ~(int64_t)7;
    for (int r = 0; r < rows; r++) {
        const float *x = j->x + (r0 + r) * c;
        float *y = j->y + (r0 + r) * c;
        const __m256 h = _mm256_set1_ps(s[r].hi), l = _mm256_set1_ps(s[r].lo),
                     rs = _mm256_set1_ps(s[r].rstd);
        for (int64_t k = 0; k < whole8; k += 8) {
            __m256 v =
                _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + k), h), l), rs);
            if (j->w) v = _mm256_mul_ps(v, _mm256_loadu_ps(j->w + k));
            if (j->b) v = _mm256_add_ps(v, _mm256_loadu_ps(j->b + k));
            _mm256_storeu_ps(y + k, v);
        }
        if (whole8 < c) {
            __m256i m = live8(whole8, c);
            __m256 v = _mm256_mul_ps(
                _mm256_sub_ps(_mm256_sub_ps(_mm256_maskload_ps(x + whole8, m), h), l), rs);
            if (j->w) v = _mm256_mul_ps(v, _mm256_maskload_ps(j->w + whole8, m));
            if (j->b) v = _mm256_add_ps(v, _mm256_maskload_ps(j->b + whole8, m));
            _mm256_maskstore_ps(y + whole8, m, v);
        }
    }
}

static void norm_rows(void *ctx, int64_t begin, int64_t end)
{
    const norm_job *j = ctx;
    int64_t r = begin;
    for (; r + ROWS <= end; r += ROWS)
        rows256(j, r, ROWS);
    for (; r < end; r++)
        rows256(j, r, 1);
}

/* ---- the same rows on AVX-512 CPUs, bit for bit ------------------------------------- */

LY_AVX512 static inline double reduce512(__m512 v)
{
    __m512d a = _mm512_add_pd(
        _mm512_cvtps_pd(_mm512_castps512_ps256(v)),
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    return hsum4d(_mm256_add_pd(_mm512_castpd512_pd256(a), _mm512_extractf64x4_pd(a, 1)));
}

LY_AVX512 static inline __mmask16 live16(int64_t at, int64_t c)
{
    return c - at >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (c - at)) - 1);
}

LY_AVX512 static inline __attribute__((always_inline)) void rows512(const norm_job *j, int64_t r0,
                                                                    const int rows)
{
    const int64_t c = j->c;
    row_stats s[ROWS] = {{0}};
    __m512 a[ROWS];
    if (!j->rms) {
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            s[r].x0 = j->x[(r0 + r) * c];
            a[r] = _mm512_setzero_ps();
        }
        for (int64_t k = 0; k < c; k += CHUNK) {
            __mmask16 m = live16(k, c);
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++) {
                __m512 v = _mm512_maskz_loadu_ps(m, j->x + (r0 + r) * c + k);
                a[r] = _mm512_add_ps(a[r], _mm512_maskz_sub_ps(m, v, _mm512_set1_ps(s[r].x0)));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            set_mean(&s[r], reduce512(a[r]), c);
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        a[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < c; k += CHUNK) {
        __mmask16 m = live16(k, c);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            __m512 v = _mm512_maskz_loadu_ps(m, j->x + (r0 + r) * c + k);
            __m512 d = _mm512_maskz_sub_ps(m, _mm512_sub_ps(v, _mm512_set1_ps(s[r].hi)),
                                           _mm512_set1_ps(s[r].lo));
            a[r] = _mm512_fmadd_ps(d, d, a[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        set_rstd(&s[r], reduce512(a[r]), j);
    const float *w = j->w, *b = j->b;
    for (int r = 0; r < rows; r++) {
        const float *x = j->x + (r0 + r) * c;
        float *y = j->y + (r0 + r) * c;
        const __m512 h = _mm512_set1_ps(s[r].hi), l = _mm512_set1_ps(s[r].lo),
                     rs = _mm512_set1_ps(s[r].rstd);
        for (int64_t k = 0; k < c; k += CHUNK) {
            __mmask16 m = live16(k, c);
            __m512 v = _mm512_mul_ps(
                _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), h), l), rs);
            if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + k));
            if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + k));
            _mm512_mask_storeu_ps(y + k, m, v);
        }
    }
}

LY_AVX512 static void norm_rows_512(void *ctx, int64_t begin, int64_t end)
{
    const norm_job *j = ctx;
    int64_t r = begin;
    for (; r + ROWS <= end; r += ROWS)
        rows512(j, r, ROWS);
    for (; r < end; r++)
        rows512(j, r, 1);
}

static ly_status run_norm(const ly_kernel_call *call, bool rms)
{
    const ly_tensor *x = call->in[0];
    norm_job j = {.x = x->data,
                  .w = call->in[1] ? call->in[1]->data : NULL,
                  .b = !rms && call->in[2] ? call->in[2]->data : NULL,
                  .y = call->out[0]->data,
                  .c = x->shape[x->ndim - 1],
                  .eps = LY_PARAMS(call, ly_norm_params)->eps,
                  .rms = rms};
    int64_t numel = ly_tensor_numel(x);
    if (j.c == 0 || numel == 0) return LY_OK;
    int threads = numel >= (1 << 15) ? ly_threads_resolve(call->threads) : 1;
    ly_parallel_for(numel / j.c, 1, threads, ly_cpu()->avx512f ? norm_rows_512 : norm_rows, &j);
    return LY_OK;
}

ly_status ly_avx2_layer_norm(const ly_kernel_call *call)
{
    return run_norm(call, false);
}

ly_status ly_avx2_rms_norm(const ly_kernel_call *call)
{
    return run_norm(call, true);
}
