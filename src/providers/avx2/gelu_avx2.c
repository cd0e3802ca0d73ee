/* SPDX-License-Identifier: MIT */
/*
 * GELU (approximate="none") eight at a time: x * 0.5 * (1 + erf(x / sqrt 2))
 * with Abramowitz & Stegun's 7.1.26 for erf (|error| <= 1.5e-7) on the exp of
 * exp_avx2.h. Within the gelu slot's tolerance of the reference (glibc's
 * erff), not bit-identical: the parity harness checks it. Non-finite inputs
 * and the tail take the reference's formula.
 *
 * On AVX-512 CPUs sixteen at a time with a rational erf instead (erf16):
 * 0.33 -> 0.22 ns an element on a Sapphire Rapids core, L1-resident (0.35 ->
 * 0.29 on RF-DETR-n's [580, 1536]; the model 0.99-0.995x the time at 1 thread,
 * 0.985x at 2).
 */
#include "core/core.h"
#include "ops/nn/reference.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/builtin.h"

#include <math.h>

static inline __m256 erf8(__m256 x)
{
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign_bit, x);
    __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                             _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), ax, _mm256_set1_ps(1.0f)));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(ax, ax)));
    __m256 y = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.0f));
    return _mm256_or_ps(y, _mm256_and_ps(sign_bit, x));
}

typedef struct gelu_job {
    const float *x;
    float *y;
} gelu_job;

static void gelu_range(void *ctx, int64_t begin, int64_t end)
{
    const gelu_job *j = ctx;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 rsqrt2 = _mm256_set1_ps((float)M_SQRT1_2), big = _mm256_set1_ps(1e30f);
    const __m256 magnitude = _mm256_set1_ps(-0.0f);
    int64_t i = begin;
    /* four vectors a step while every lane is finite: one vector's chain
     * alone leaves the ports idle (Zen 3: 0.86 -> 0.66 ms on [580, 1536]);
     * each element's arithmetic is the one-vector loop's */
    for (; i + 32 <= end; i += 32) {
        __m256 x[4];
        int finite = 0xff;
        for (int v = 0; v < 4; v++) {
            x[v] = _mm256_loadu_ps(j->x + i + 8 * v);
            finite &= _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(magnitude, x[v]), big, _CMP_LT_OQ));
        }
        if (finite != 0xff) break; /* the one-vector loop below takes them */
        for (int v = 0; v < 4; v++)
            _mm256_storeu_ps(j->y + i + 8 * v,
                             _mm256_mul_ps(_mm256_mul_ps(x[v], half),
                                           _mm256_add_ps(one, erf8(_mm256_mul_ps(x[v], rsqrt2)))));
    }
    for (; i + 8 <= end; i += 8) {
        __m256 x = _mm256_loadu_ps(j->x + i);
        __m256 finite = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), big, _CMP_LT_OQ);
        __m256 y = _mm256_mul_ps(_mm256_mul_ps(x, half),
                                 _mm256_add_ps(one, erf8(_mm256_mul_ps(x, rsqrt2))));
        if (_mm256_movemask_ps(finite) != 0xff) {
            /* from the loaded lanes: y may be x (element-wise slots run in place) */
            float xs[8], ys[8];
            _mm256_storeu_ps(xs, x);
            _mm256_storeu_ps(ys, y);
            for (int k = 0; k < 8; k++)
                if (!(fabsf(xs[k]) < 1e30f)) ys[k] = ly_nn_gelu(xs[k]);
            y = _mm256_loadu_ps(ys);
        }
        _mm256_storeu_ps(j->y + i, y);
    }
    for (; i < end; i++)
        j->y[i] = ly_nn_gelu(j->x[i]);
}

/* erf(z) on sixteen lanes as z P(z^2) / Q(z^2) on z clamped to [-4, 4]
 * (outside, erf is +-1 in f32): the rational fit of XLA's and Eigen's f32
 * erf, 13 multiply-adds and a reciprocal (14 bits and a Newton step) where
 * the polynomial erf above takes an exp and ~30 operations. |error| <=
 * 4.5e-7 on every f32 in [-6, 6] as evaluated here (the polynomial's 1.5e-7;
 * glibc's erff ~1e-7), a few ulps of a GELU output, well inside the slot's
 * 1e-4. NaN stays NaN (max returns the bound, x * 0.5 carries it); +-inf go
 * through the clamp as the reference's x * 0.5 * (1 + erf) does. */
LY_AVX512 static inline __m512 erf16(__m512 z)
{
    __m512 x = _mm512_min_ps(_mm512_max_ps(z, _mm512_set1_ps(-4.0f)), _mm512_set1_ps(4.0f));
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.72614225801306e-10f),
                               _mm512_set1_ps(2.77068142495902e-08f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-2.10102402082508e-06f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-5.69250639462346e-05f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-7.34990630326855e-04f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-2.95459980854025e-03f));
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-1.60960333262415e-02f));
    p = _mm512_mul_ps(x, p);
    __m512 q = _mm512_fmadd_ps(x2, _mm512_set1_ps(-1.45660718464996e-05f),
                               _mm512_set1_ps(-2.13374055278905e-04f));
    q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.68282697438203e-03f));
    q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-7.37332916720468e-03f));
    q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.42647390514189e-02f));
    __m512 r = _mm512_rcp14_ps(q);
    r = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(q, r, _mm512_set1_ps(1.0f)), r);
    return _mm512_mul_ps(p, r);
}

LY_AVX512 static inline __m512 gelu16(__m512 x)
{
    __m512 erf = erf16(_mm512_mul_ps(x, _mm512_set1_ps((float)M_SQRT1_2)));
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), erf));
}

LY_AVX512 static void gelu_range16(void *ctx, int64_t begin, int64_t end)
{
    const gelu_job *j = ctx;
    int64_t i = begin;
    /* two vectors a step: one vector's chain alone leaves the ports idle */
    for (; i + 32 <= end; i += 32) {
        __m512 y0 = gelu16(_mm512_loadu_ps(j->x + i)), y1 = gelu16(_mm512_loadu_ps(j->x + i + 16));
        _mm512_storeu_ps(j->y + i, y0);
        _mm512_storeu_ps(j->y + i + 16, y1);
    }
    for (; i < end; i += 16) {
        __mmask16 live = end - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (end - i)) - 1);
        _mm512_mask_storeu_ps(j->y + i, live, gelu16(_mm512_maskz_loadu_ps(live, j->x + i)));
    }
}

ly_status ly_avx2_gelu(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->in[0]);
    gelu_job j = {call->in[0]->data, call->out[0]->data};
    int threads = n >= (1 << 16) ? ly_threads_resolve(call->threads) : 1;
    if (n > 0) ly_parallel_for(n, 4096, threads, ly_cpu()->avx512f ? gelu_range16 : gelu_range, &j);
    return LY_OK;
}
