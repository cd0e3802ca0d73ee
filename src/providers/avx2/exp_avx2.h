/* SPDX-License-Identifier: MIT */
/*
 * The sdpa reference's softmax arithmetic on eight lanes, bit for bit: exp of
 * eight floats (its expf, ops/sdpa/sdpa_internal.h: ly_sdpa_expf_inline; 0
 * below its range; sixteen on AVX-512 CPUs) and the fixed trees that reduce
 * eight lanes to a row's max and sum. For AVX2+FMA translation units only.
 */
#ifndef LY_PROVIDERS_AVX2_EXP_AVX2_H
#define LY_PROVIDERS_AVX2_EXP_AVX2_H

#include "core/core.h"
#include "libreyolo/nn.h"
#include "ops/sdpa/sdpa_internal.h"

#include <immintrin.h>

static inline __m256 exp8(__m256 x)
{
    __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(LY_SDPA_EXP_MIN), _CMP_LT_OQ);
    __m256 t =
        _mm256_fmadd_ps(x, _mm256_set1_ps(LY_SDPA_EXP_LOG2E), _mm256_set1_ps(LY_SDPA_EXP_MAGIC));
    __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(LY_SDPA_EXP_MAGIC));
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(LY_SDPA_EXP_NLN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(LY_SDPA_EXP_NLN2_LO), r);
    __m256 p = _mm256_set1_ps(LY_SDPA_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LY_SDPA_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LY_SDPA_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LY_SDPA_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LY_SDPA_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32((int)LY_SDPA_EXP_MAGIC_BITS));
    e = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(small, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* Lanes 8-15 (extractf32x8 is AVX512DQ). */
LY_AVX512 static inline __m256 high8(__m512 v)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* exp8 on 16 lanes, for arguments x <= 0 (or NaN: every caller passes x - max,
 * -x^2 or -|x|). Lane for lane exp8's arithmetic, except that p * 2^n is one
 * scalef instead of building 2^n's bits and multiplying: for n in [-126, 0]
 * both are the one correctly rounded p * 2^n (checked on all 2^31 such
 * inputs); they part only at x = +inf. An AVX-512F function: call it only
 * where ly_cpu()->avx512f. */
LY_AVX512 static inline __m512 exp16(__m512 x)
{
    __mmask16 small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(LY_SDPA_EXP_MIN), _CMP_LT_OQ);
    __m512 t =
        _mm512_fmadd_ps(x, _mm512_set1_ps(LY_SDPA_EXP_LOG2E), _mm512_set1_ps(LY_SDPA_EXP_MAGIC));
    __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(LY_SDPA_EXP_MAGIC));
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(LY_SDPA_EXP_NLN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(LY_SDPA_EXP_NLN2_LO), r);
    __m512 p = _mm512_set1_ps(LY_SDPA_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LY_SDPA_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LY_SDPA_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LY_SDPA_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LY_SDPA_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps((__mmask16)~small, p, n);
}

/* A convolution's activation (ly_activation) on 16 lanes, as the reference's
 * formulas: exponentials of -|v| only. */
LY_AVX512 static inline __m512 ly_activate16(__m512 v, int64_t activation, float alpha)
{
    __m512 zero = _mm512_setzero_ps();
    __mmask16 negative = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
    switch (activation) {
    case LY_ACT_SILU:
    case LY_ACT_SIGMOID: {
        __m512 t = exp16(_mm512_sub_ps(zero, _mm512_abs_ps(v)));
        __m512 one = _mm512_set1_ps(1.0f), den = _mm512_add_ps(one, t);
        /* 1 / den in (1/2, 1]: a 14-bit reciprocal and a Newton step (within
         * an ulp or two) instead of a division, a third of a stem's time */
        __m512 r = _mm512_rcp14_ps(den);
        r = _mm512_fmadd_ps(_mm512_fnmadd_ps(den, r, one), r, r);
        __m512 sig = _mm512_mul_ps(_mm512_mask_blend_ps(negative, one, t), r);
        return activation == LY_ACT_SILU ? _mm512_mul_ps(v, sig) : sig;
    }
    case LY_ACT_RELU:
        return _mm512_mask_blend_ps(negative, v, zero); /* NaN stays NaN */
    case LY_ACT_LEAKY_RELU:
        return _mm512_mask_mul_ps(v, negative, v, _mm512_set1_ps(alpha));
    default:
        return v;
    }
}

/* ly_activate16 on 8 lanes (AVX2+FMA), the same formulas; for SiLU and
 * sigmoid 1 / den a 12-bit reciprocal and a Newton step (within a few ulps). */
static inline __m256 ly_activate8(__m256 v, int64_t activation, float alpha)
{
    __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    __m256 negative = _mm256_cmp_ps(v, zero, _CMP_LT_OQ);
    switch (activation) {
    case LY_ACT_SILU:
    case LY_ACT_SIGMOID: {
        __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
        __m256 t = exp8(_mm256_sub_ps(zero, magnitude)), den = _mm256_add_ps(one, t);
        __m256 r = _mm256_rcp_ps(den);
        r = _mm256_fmadd_ps(_mm256_fnmadd_ps(den, r, one), r, r);
        __m256 sig = _mm256_mul_ps(_mm256_blendv_ps(one, t, negative), r);
        return activation == LY_ACT_SILU ? _mm256_mul_ps(v, sig) : sig;
    }
    case LY_ACT_RELU:
        return _mm256_blendv_ps(v, zero, negative); /* NaN stays NaN */
    case LY_ACT_LEAKY_RELU:
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(alpha)), negative);
    default:
        return v;
    }
}

/* The reference's trees: lanes (i, i+4), then (i, i+2), then (0, 1); _mm_max_ps(a, b)
 * is a > b ? a : b, as ly_sdpa_max. */
static inline float hmax8(__m256 v)
{
    __m128 t = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 u = _mm_max_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_max_ss(u, _mm_shuffle_ps(u, u, 1)));
}

static inline float hsum8(__m256 v)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
}

static const int32_t tail_bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* Lanes [0, rem) all ones. */
static inline __m256 tail_mask(int64_t rem)
{
    return _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(tail_bits + 8 - rem)));
}

#endif
