/* SPDX-License-Identifier: MIT */
/*
 * GELU (approximate="none") eight at a time: x * 0.5 * (1 + erf(x / sqrt 2))
 * with Abramowitz & Stegun's 7.1.26 for erf (|error| <= 1.5e-7) on the exp of
 * exp_avx2.h. Within the gelu slot's tolerance of the reference (glibc's
 * erff), not bit-identical: the parity harness checks it. Non-finite inputs
 * and the tail take the reference's formula.
 *
 * On AVX-512 CPUs sixteen at a time, the same arithmetic (exp16 is exp8's)
 * but for 1 / (1 + p|z|), a 14-bit reciprocal and one Newton step instead of
 * a division (a few ulps apart, well inside the tolerance), two vectors a
 * step (0.50 -> 0.44 ns an element on a Sapphire Rapids core).
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

LY_AVX512 static inline __m512 gelu16(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 z = _mm512_mul_ps(x, _mm512_set1_ps((float)M_SQRT1_2));
    __m512 az = _mm512_abs_ps(z);
    __m512 den = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), az, one);
    /* 1 / den: 14 bits, then one Newton step (a division's throughput is
     * a tenth of this) */
    __m512 r = _mm512_rcp14_ps(den);
    __m512 t = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(den, r, one), r);
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(az, az)));
    __m512 erf_abs = _mm512_fnmadd_ps(p, e, one);
    /* erf's sign is z's: 1 + erf = 1 + sign * erf(|z|) */
    __m512 erf = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(erf_abs),
        _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), _mm512_add_ps(one, erf));
}

LY_AVX512 static void gelu_range16(void *ctx, int64_t begin, int64_t end)
{
    const gelu_job *j = ctx;
    const __m512 big = _mm512_set1_ps(1e30f);
    int64_t i = begin;
    /* two vectors a step: one vector's chain alone leaves the ports idle */
    for (; i + 32 <= end; i += 32) {
        __m512 x0 = _mm512_loadu_ps(j->x + i), x1 = _mm512_loadu_ps(j->x + i + 16);
        __m512 y0 = gelu16(x0), y1 = gelu16(x1);
        __mmask16 huge0 = _mm512_cmp_ps_mask(_mm512_abs_ps(x0), big, _CMP_NLT_UQ);
        __mmask16 huge1 = _mm512_cmp_ps_mask(_mm512_abs_ps(x1), big, _CMP_NLT_UQ);
        if (huge0 | huge1) break; /* the one-vector loop below takes them */
        _mm512_storeu_ps(j->y + i, y0);
        _mm512_storeu_ps(j->y + i + 16, y1);
    }
    for (; i + 16 <= end; i += 16) {
        __m512 x = _mm512_loadu_ps(j->x + i);
        __m512 y = gelu16(x);
        __mmask16 huge = _mm512_cmp_ps_mask(_mm512_abs_ps(x), big, _CMP_NLT_UQ);
        if (huge) {
            /* from the loaded lanes: y may be x (element-wise slots run in place) */
            float xs[16], ys[16];
            _mm512_storeu_ps(xs, x);
            _mm512_storeu_ps(ys, y);
            for (int k = 0; k < 16; k++)
                if (huge >> k & 1) ys[k] = ly_nn_gelu(xs[k]);
            y = _mm512_loadu_ps(ys);
        }
        _mm512_storeu_ps(j->y + i, y);
    }
    /* the rest as the 8-lane loop takes it (eight, then one at a time) */
    if (i < end) gelu_range(ctx, i, end);
}

ly_status ly_avx2_gelu(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->in[0]);
    gelu_job j = {call->in[0]->data, call->out[0]->data};
    int threads = n >= (1 << 16) ? ly_threads_resolve(call->threads) : 1;
    if (n > 0) ly_parallel_for(n, 4096, threads, ly_cpu()->avx512f ? gelu_range16 : gelu_range, &j);
    return LY_OK;
}
