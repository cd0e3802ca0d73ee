/* SPDX-License-Identifier: MIT */
/*
 * fake_quant_int8_affine's codes plus 128 on sixteen lanes, as u8 bytes: what
 * conv2d_int8's quantizer writes for the integer kernels
 * (quantize_u8_avx2.c). AVX-512F; only in builds with the AVX2 providers.
 */
#ifndef LY_PROVIDERS_ONEDNN_CODES_AVX512_H
#define LY_PROVIDERS_ONEDNN_CODES_AVX512_H

#include "core/core.h"

#include <immintrin.h>
#include <stdint.h>

/* ly_avx2_int8_code's clamp, NaN and huge-value rule on a zmm (vmaxps/vminps
 * return their second operand on NaN, as the ymm forms do). */
LY_AVX512 static inline __m128i ly_codes16_exact(__m512 x, float inv, float zero_point)
{
    __m512 r = _mm512_add_ps(_mm512_set1_ps(zero_point),
                             _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(inv)),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m512 code = _mm512_min_ps(_mm512_set1_ps(127.0f), _mm512_max_ps(_mm512_set1_ps(-128.0f), r));
    __mmask16 huge = _mm512_cmp_ps_mask(r, _mm512_set1_ps(9223372036854775808.0f), _CMP_NLT_UQ);
    code = _mm512_mask_blend_ps(huge, code, _mm512_set1_ps(-128.0f));
    return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_add_ps(code, _mm512_set1_ps(128.0f))));
}

/* The same codes in fewer steps where nothing is exotic: the conversion
 * rounds to nearest even itself (rint, then convert), the zero point is added
 * in int32 (exact: integers far from overflow) and the clamp is the
 * signed-saturating narrowing. The reference's fp32 sum differs only where
 * |x * inv| >= 2^24, which saturates the same way. A lane whose conversion
 * overflows int32 (or is NaN) reads INT32_MIN: that vector is redone by
 * ly_codes16_exact, with the reference's rules for NaN, inf and huge values. */
LY_AVX512 static inline __m128i ly_codes16(__m512 x, float inv, float zero_point)
{
    __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(inv)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (__builtin_expect(_mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(INT32_MIN)) != 0, 0))
        return ly_codes16_exact(x, inv, zero_point);
    __m512i code = _mm512_add_epi32(q, _mm512_set1_epi32((int32_t)zero_point));
    return _mm_xor_si128(_mm512_cvtsepi32_epi8(code), _mm_set1_epi8((char)0x80));
}

#endif
