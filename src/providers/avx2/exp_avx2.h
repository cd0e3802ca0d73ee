/* SPDX-License-Identifier: MIT */
/*
 * exp of eight floats, the sdpa reference's expf (ops/sdpa/sdpa_internal.h:
 * ly_sdpa_expf_inline) lane for lane, bit for bit; 0 below its range. For
 * AVX2+FMA translation units only.
 */
#ifndef LY_PROVIDERS_AVX2_EXP_AVX2_H
#define LY_PROVIDERS_AVX2_EXP_AVX2_H

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

#endif
