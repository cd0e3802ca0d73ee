/* SPDX-License-Identifier: MIT */
/*
 * layer_norm and rms_norm over the last axis ("avx2"): the reference's
 * arithmetic (src/ops/norm/reference.c) — row statistics in double, one
 * rounding to f32 of (x - mean) * rstd, then the f32 scale and shift — with
 * the sums in sixteen double lanes (four chains of four, a row's last partial
 * chunk of sixteen zero-padded into them) instead of one running double, so a
 * row's mean or variance may differ from the reference's in the last bits of
 * a double (well inside the slot's 1e-4). The AVX2 and AVX-512 rows give the
 * same bits. ViT's 25 norms of [197, 192] tokens, D-FINE's decoder, DEIMv2's
 * RMSNorm and SwinIR's [65536, 60] maps run here.
 *
 * Rows go four side by side: a row alone is a chain of dependent steps (two
 * reductions, a square root and a division between its passes) that left a
 * 60-channel row waiting ~3/4 of its time.
 */
#include "core/core.h"
#include "libreyolo/kernels.h"

#include <immintrin.h>
#include <math.h>

#define ROWS 4 /* rows side by side */

typedef struct norm_job {
    const float *x, *w, *b;
    float *y;
    int64_t c;
    double eps;
    bool rms;
} norm_job;

static inline double hsum4d(__m256d v)
{
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

/* 1 / sqrt(var + eps) of a row from its sum of (x - mean)^2 (rms rows: mean 0). */
static inline double rstd_of(const norm_job *j, double squares)
{
    return 1.0 / sqrt(squares / (double)j->c + j->eps);
}

/* y[k] for k in [from, c): one rounding of (x - mean) * rstd, then the affine. */
static inline void normalize_tail(const norm_job *j, const float *x, float *y, int64_t from,
                                  int64_t c, double mean, double rstd)
{
    for (int64_t k = from; k < c; k++) {
        float v = (float)(((double)x[k] - mean) * rstd);
        if (j->w) v = v * j->w[k];
        if (j->b) v = v + j->b[k];
        y[k] = v;
    }
}

/* ---- 256-bit rows ------------------------------------------------------------------ */

/* Chunk k of 16 floats as four double quads: the row's own, or its last
 * partial chunk zero-padded. */
static inline void load16(const float *x, int64_t k, int64_t c, __m256d q[4])
{
    if (k + 16 <= c) {
        for (int t = 0; t < 4; t++)
            q[t] = _mm256_cvtps_pd(_mm_loadu_ps(x + k + 4 * t));
        return;
    }
    float pad[16] = {0};
    for (int64_t i = k; i < c; i++)
        pad[i - k] = x[i];
    for (int t = 0; t < 4; t++)
        q[t] = _mm256_cvtps_pd(_mm_loadu_ps(pad + 4 * t));
}

/* Double lanes of chunk k that hold elements (all ones), for the squares. */
static inline __m256d live4(int64_t k, int t, int64_t c)
{
    int64_t at = k + 4 * t;
    return _mm256_castsi256_pd(_mm256_set_epi64x(at + 3 < c ? -1 : 0, at + 2 < c ? -1 : 0,
                                                 at + 1 < c ? -1 : 0, at < c ? -1 : 0));
}

/* A row's four chains of four reduced in the fixed pairs (a0 + a1) + (a2 + a3). */
static inline double reduce256(const __m256d a[4])
{
    return hsum4d(_mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3])));
}

static inline __attribute__((always_inline)) void rows256(const norm_job *j, int64_t r0, int rows)
{
    const int64_t c = j->c, full = c & ~(int64_t)3;
    __m256d a[ROWS][4];
    double mean[ROWS] = {0}, rstd[ROWS];
    if (!j->rms) {
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            for (int t = 0; t < 4; t++)
                a[r][t] = _mm256_setzero_pd();
        for (int64_t k = 0; k < c; k += 16) {
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++) {
                __m256d q[4];
                load16(j->x + (r0 + r) * c, k, c, q);
                for (int t = 0; t < 4; t++)
                    a[r][t] = _mm256_add_pd(a[r][t], q[t]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            mean[r] = reduce256(a[r]) / (double)c;
    }
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < 4; t++)
            a[r][t] = _mm256_setzero_pd();
    for (int64_t k = 0; k < c; k += 16) {
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            __m256d q[4], m = _mm256_set1_pd(mean[r]);
            load16(j->x + (r0 + r) * c, k, c, q);
            for (int t = 0; t < 4; t++) {
                __m256d d = _mm256_sub_pd(q[t], m);
                if (k + 16 > c) d = _mm256_and_pd(d, live4(k, t, c));
                a[r][t] = _mm256_add_pd(a[r][t], _mm256_mul_pd(d, d));
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        rstd[r] = rstd_of(j, reduce256(a[r]));
    for (int r = 0; r < rows; r++) {
        const float *x = j->x + (r0 + r) * c;
        float *y = j->y + (r0 + r) * c;
        const __m256d m = _mm256_set1_pd(mean[r]), rs = _mm256_set1_pd(rstd[r]);
        for (int64_t k = 0; k < full; k += 4) {
            __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), m);
            __m128 v = _mm256_cvtpd_ps(_mm256_mul_pd(d, rs));
            if (j->w) v = _mm_mul_ps(v, _mm_loadu_ps(j->w + k));
            if (j->b) v = _mm_add_ps(v, _mm_loadu_ps(j->b + k));
            _mm_storeu_ps(y + k, v);
        }
        normalize_tail(j, x, y, full, c, mean[r], rstd[r]);
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

/* ---- the same rows on AVX-512 CPUs, bit for bit ------------------------------------- *
 *
 * Eight doubles a register: the four chains of four become two of eight whose
 * halves are the same chains (lanes k..k+7 and k+8..k+15 of each 16), reduced
 * in the same pairs; the last partial chunk is a masked load (zeros), its
 * dead lanes kept out of the squares; the normalisation is element-wise.
 * About half the instructions of the 256-bit rows. */

LY_AVX512 static inline double reduce512(__m512d a01, __m512d a23)
{
    const __m256d a[4] = {_mm512_castpd512_pd256(a01), _mm512_extractf64x4_pd(a01, 1),
                          _mm512_castpd512_pd256(a23), _mm512_extractf64x4_pd(a23, 1)};
    return reduce256(a); /* the 256-bit rows' chains, in their pairs */
}

/* Elements [k, k + 16) of a row of c as two vectors of doubles (lanes k..k+7
 * and k+8..k+15; past c zeros), and which of them are the row's. */
LY_AVX512 static inline __mmask16 load16_512(const float *row, int64_t k, int64_t c, __m512d *lo,
                                             __m512d *hi)
{
    __mmask16 live = c - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (c - k)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(live, row + k);
    *lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    *hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    return live;
}

LY_AVX512 static inline __attribute__((always_inline)) void rows512(const norm_job *j, int64_t r0,
                                                                    const int rows)
{
    const int64_t c = j->c;
    __m512d a01[ROWS], a23[ROWS];
    double mean[ROWS] = {0}, rstd[ROWS];
    if (!j->rms) {
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            a01[r] = a23[r] = _mm512_setzero_pd();
        for (int64_t k = 0; k < c; k += 16)
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++) {
                __m512d lo, hi;
                load16_512(j->x + (r0 + r) * c, k, c, &lo, &hi);
                a01[r] = _mm512_add_pd(a01[r], lo);
                a23[r] = _mm512_add_pd(a23[r], hi);
            }
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
            mean[r] = reduce512(a01[r], a23[r]) / (double)c;
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        a01[r] = a23[r] = _mm512_setzero_pd();
    for (int64_t k = 0; k < c; k += 16)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            __m512d lo, hi, m = _mm512_set1_pd(mean[r]);
            __mmask16 live = load16_512(j->x + (r0 + r) * c, k, c, &lo, &hi);
            /* lanes past the row stay out of the squares */
            __m512d d01 = _mm512_maskz_sub_pd((__mmask8)live, lo, m);
            __m512d d23 = _mm512_maskz_sub_pd((__mmask8)(live >> 8), hi, m);
            a01[r] = _mm512_add_pd(a01[r], _mm512_mul_pd(d01, d01));
            a23[r] = _mm512_add_pd(a23[r], _mm512_mul_pd(d23, d23));
        }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
        rstd[r] = rstd_of(j, reduce512(a01[r], a23[r]));
    const float *w = j->w, *b = j->b;
    const int64_t full8 = c & ~(int64_t)7;
    const __mmask8 tail = (__mmask8)((1u << (c - full8)) - 1);
    for (int r = 0; r < rows; r++) {
        const float *x = j->x + (r0 + r) * c;
        float *y = j->y + (r0 + r) * c;
        const __m512d m = _mm512_set1_pd(mean[r]), rs = _mm512_set1_pd(rstd[r]);
        for (int64_t k = 0; k < full8; k += 8) {
            __m256 v = _mm512_cvtpd_ps(
                _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + k)), m), rs));
            if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + k));
            if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + k));
            _mm256_storeu_ps(y + k, v);
        }
        if (tail) {
            __m256 xv = _mm512_castps512_ps256(_mm512_maskz_loadu_ps(tail, x + full8));
            __m256 v = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(xv), m), rs));
            if (w)
                v = _mm256_mul_ps(v,
                                  _mm512_castps512_ps256(_mm512_maskz_loadu_ps(tail, w + full8)));
            if (b)
                v = _mm256_add_ps(v,
                                  _mm512_castps512_ps256(_mm512_maskz_loadu_ps(tail, b + full8)));
            _mm512_mask_storeu_ps(y + full8, tail, _mm512_castps256_ps512(v));
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
