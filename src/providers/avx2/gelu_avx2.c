/* SPDX-License-Identifier: MIT */
/*
 * GELU (approximate="none") eight at a time: x * 0.5 * (1 + erf(x / sqrt 2))
 * with Abramowitz & Stegun's 7.1.26 for erf (|error| <= 1.5e-7) on the exp of
 * exp_avx2.h. Within the gelu slot's tolerance of the reference (glibc's
 * erff), not bit-identical: the parity harness checks it. Non-finite inputs
 * and the tail take the reference's formula.
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
    int64_t i = begin;
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

ly_status ly_avx2_gelu(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->in[0]);
    gelu_job j = {call->in[0]->data, call->out[0]->data};
    int threads = n >= (1 << 16) ? ly_threads_resolve(call->threads) : 1;
    if (n > 0) ly_parallel_for(n, 4096, threads, gelu_range, &j);
    return LY_OK;
}
