/* SPDX-License-Identifier: MIT */
/*
 * layer_norm and rms_norm over the last axis ("avx2"): the reference's
 * arithmetic (src/ops/norm/reference.c) — row statistics in double, one
 * rounding to f32 of (x - mean) * rstd, then the f32 scale and shift — with
 * the sums in sixteen double lanes (four chains of four) instead of one running double, so a row's
 * mean or variance may differ from the reference's in the last bits of a
 * double (well inside the slot's 1e-4). ViT's 25 norms of [197, 192] tokens,
 * D-FINE's decoder and DEIMv2's RMSNorm run here.
 */
#include "core/core.h"
#include "libreyolo/kernels.h"

#include <immintrin.h>
#include <math.h>

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

/* Sum of x[k] (or of (x[k] - m)^2 with squares) over the row's multiple of 16 in
 * four independent double chains: one chain's add latency left the loop
 * latency-bound (~2.4 cycles an element on a [580, 384] norm). */
static inline double sum16(const float *x, int64_t n16, double m, bool squares)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    const __m256d mv = _mm256_set1_pd(m);
    for (int64_t k = 0; k < n16; k += 16) {
        __m256d v0 = _mm256_cvtps_pd(_mm_loadu_ps(x + k));
        __m256d v1 = _mm256_cvtps_pd(_mm_loadu_ps(x + k + 4));
        __m256d v2 = _mm256_cvtps_pd(_mm_loadu_ps(x + k + 8));
        __m256d v3 = _mm256_cvtps_pd(_mm_loadu_ps(x + k + 12));
        if (squares) {
            v0 = _mm256_sub_pd(v0, mv);
            v1 = _mm256_sub_pd(v1, mv);
            v2 = _mm256_sub_pd(v2, mv);
            v3 = _mm256_sub_pd(v3, mv);
            v0 = _mm256_mul_pd(v0, v0);
            v1 = _mm256_mul_pd(v1, v1);
            v2 = _mm256_mul_pd(v2, v2);
            v3 = _mm256_mul_pd(v3, v3);
        }
        a0 = _mm256_add_pd(a0, v0);
        a1 = _mm256_add_pd(a1, v1);
        a2 = _mm256_add_pd(a2, v2);
        a3 = _mm256_add_pd(a3, v3);
    }
    return hsum4d(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
}

/* acc + the row's elements [from, c) the SIMD sums leave, one at a time: x,
 * or (x - m)^2. */
static inline double add_tail(double acc, const float *x, int64_t from, int64_t c, double m,
                              bool squares)
{
    for (int64_t k = from; k < c; k++)
        acc += squares ? ((double)x[k] - m) * ((double)x[k] - m) : x[k];
    return acc;
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

static void norm_rows(void *ctx, int64_t begin, int64_t end)
{
    const norm_job *j = ctx;
    const int64_t c = j->c, full = c & ~(int64_t)3, n16 = c & ~(int64_t)15;
    for (int64_t r = begin; r < end; r++) {
        const float *x = j->x + r * c;
        float *y = j->y + r * c;
        double mean = 0.0, var;
        if (!j->rms) {
            mean = add_tail(sum16(x, n16, 0.0, false), x, n16, c, 0.0, false) / (double)c;
        }
        const __m256d m = _mm256_set1_pd(mean);
        var = add_tail(sum16(x, n16, mean, true), x, n16, c, mean, true) / (double)c;
        double rstd = 1.0 / sqrt(var + j->eps);
        const __m256d rs = _mm256_set1_pd(rstd);
        int64_t k = 0;
        for (; k < full; k += 4) {
            __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), m);
            __m128 v = _mm256_cvtpd_ps(_mm256_mul_pd(d, rs));
            if (j->w) v = _mm_mul_ps(v, _mm_loadu_ps(j->w + k));
            if (j->b) v = _mm_add_ps(v, _mm_loadu_ps(j->b + k));
            _mm_storeu_ps(y + k, v);
        }
        normalize_tail(j, x, y, k, c, mean, rstd);
    }
}

/* ---- the same rows on AVX-512 CPUs, bit for bit ------------------------------------- *
 *
 * Eight doubles a register: the four chains of four become two of eight whose
 * halves are the same chains (lanes k..k+7 and k+8..k+15 of each 16), reduced
 * in the same pairs; the normalisation is element-wise. Half the instructions
 * of the 256-bit rows. */

LY_AVX512 static inline __m256d low4d(__m512d v)
{
    return _mm512_castpd512_pd256(v);
}

LY_AVX512 static inline __m256d high4d(__m512d v)
{
    return _mm512_extractf64x4_pd(v, 1);
}

LY_AVX512 static inline double sum16_512(const float *x, int64_t n16, double m, bool squares)
{
    __m512d a01 = _mm512_setzero_pd(), a23 = a01;
    const __m512d mv = _mm512_set1_pd(m);
    for (int64_t k = 0; k < n16; k += 16) {
        __m512d v01 = _mm512_cvtps_pd(_mm256_loadu_ps(x + k));
        __m512d v23 = _mm512_cvtps_pd(_mm256_loadu_ps(x + k + 8));
        if (squares) {
            v01 = _mm512_sub_pd(v01, mv);
            v23 = _mm512_sub_pd(v23, mv);
            v01 = _mm512_mul_pd(v01, v01);
            v23 = _mm512_mul_pd(v23, v23);
        }
        a01 = _mm512_add_pd(a01, v01);
        a23 = _mm512_add_pd(a23, v23);
    }
    return hsum4d(_mm256_add_pd(_mm256_add_pd(low4d(a01), high4d(a01)),
                                _mm256_add_pd(low4d(a23), high4d(a23))));
}

LY_AVX512 static void norm_rows_512(void *ctx, int64_t begin, int64_t end)
{
    const norm_job *j = ctx;
    const int64_t c = j->c, full8 = c & ~(int64_t)7, full = c & ~(int64_t)3, n16 = c & ~(int64_t)15;
    for (int64_t r = begin; r < end; r++) {
        const float *x = j->x + r * c;
        float *y = j->y + r * c;
        double mean = 0.0, var;
        if (!j->rms) {
            mean = add_tail(sum16_512(x, n16, 0.0, false), x, n16, c, 0.0, false) / (double)c;
        }
        var = add_tail(sum16_512(x, n16, mean, true), x, n16, c, mean, true) / (double)c;
        double rstd = 1.0 / sqrt(var + j->eps);
        const __m512d m8 = _mm512_set1_pd(mean), rs8 = _mm512_set1_pd(rstd);
        int64_t k = 0;
        for (; k < full8; k += 8) {
            __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + k)), m8);
            __m256 v = _mm512_cvtpd_ps(_mm512_mul_pd(d, rs8));
            if (j->w) v = _mm256_mul_ps(v, _mm256_loadu_ps(j->w + k));
            if (j->b) v = _mm256_add_ps(v, _mm256_loadu_ps(j->b + k));
            _mm256_storeu_ps(y + k, v);
        }
        const __m256d m = _mm256_set1_pd(mean), rs = _mm256_set1_pd(rstd);
        for (; k < full; k += 4) {
            __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), m);
            __m128 v = _mm256_cvtpd_ps(_mm256_mul_pd(d, rs));
            if (j->w) v = _mm_mul_ps(v, _mm_loadu_ps(j->w + k));
            if (j->b) v = _mm_add_ps(v, _mm_loadu_ps(j->b + k));
            _mm_storeu_ps(y + k, v);
        }
        normalize_tail(j, x, y, k, c, mean, rstd);
    }
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
