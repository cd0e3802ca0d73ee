/* SPDX-License-Identifier: MIT */
/*
 * AVX2 fake_quant_fp8: s = clamp(scale, min=1e-12); y = clamp(x / s, +-448);
 * q = fp32(e4m3(y)) * s; out = x + (q - x). Same IEEE operations as the
 * reference per element; the E4M3 round trip in integer lanes.
 */
#include "providers/avx2/quant/quant_avx2.h"
#include "ops/quant/numerics.h"

typedef struct fp8_job {
    const float *x, *scale;
    float *out;
    int64_t inner;
    bool per_row;
} fp8_job;

/* fp32(e4m3(y)) for |y| <= 448 or NaN, `nan` holding y's NaN lanes: the rounding of
 * ly_avx2_e4m3_round_clamped. Rounding the word is right for every value but
 * those in (0, 2^-6), where E4M3 is subnormal; vectors without such a value,
 * nearly all of them, skip that rounding. */
static inline __m256 fp8_round(__m256 y, __m256 nan)
{
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    __m256 abs = _mm256_andnot_ps(sign_mask, y);
    __m256i bits = _mm256_castps_si256(abs);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 20), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), lsb));
    __m256 value =
        _mm256_castsi256_ps(_mm256_and_si256(rounded, _mm256_set1_epi32((int)0xFFF00000u)));
    /* bits in [1, 0x3C7FFFFF]: bits + 0x7FFFFFFF wraps them to the lowest ints. */
    __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)0xBC7FFFFFu),
                                      _mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFFFFFF)));
    if (_mm256_movemask_epi8(tiny)) {
        __m256 subnormal =
            _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(abs, _mm256_set1_ps(512.0f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                          _mm256_set1_ps(1.0f / 512.0f));
        value = _mm256_blendv_ps(value, subnormal, _mm256_castsi256_ps(tiny));
    }
    value = _mm256_blendv_ps(value, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), nan);
    return _mm256_or_ps(value, _mm256_and_ps(y, sign_mask));
}

static void fp8_range(void *ctx, int64_t begin, int64_t end)
{
    const fp8_job *job = ctx;
    const __m256 lo = _mm256_set1_ps(-LY_E4M3_MAX), hi = _mm256_set1_ps(LY_E4M3_MAX);
    for (int64_t i = begin; i < end;) {
        int64_t row = i / job->inner;
        int64_t stop = (row + 1) * job->inner < end ? (row + 1) * job->inner : end;
        const float s_scalar = ly_nm_clamp_min(job->scale[job->per_row ? row : 0], LY_QUANT_EPS);
        const __m256 s = _mm256_set1_ps(s_scalar);
        /* Only a NaN scale can meet a NaN e in the product. */
        const bool s_nan = s_scalar != s_scalar;
        for (int64_t j = i; j < stop; j += 8) {
            int64_t n = stop - j;
            __m256 x = ly_avx2_load_n(job->x + j, n);
            __m256 y = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_div_ps(x, s)));
            __m256 nan = _mm256_cmp_ps(y, y, _CMP_UNORD_Q);
            __m256 e = fp8_round(y, nan);
            __m256 q = _mm256_mul_ps(e, s);
            if (s_nan) q = ly_avx2_nan_first(q, e);
            /* The STE (q - x) + x, keeping (q - x)'s NaN: where y is NaN, so is q
             * and hence q - x, and x is replaced by 0; elsewhere x is no NaN. */
            __m256 out = _mm256_add_ps(_mm256_sub_ps(q, x), _mm256_andnot_ps(nan, x));
            ly_avx2_store_n(job->out + j, n, out);
        }
        i = stop;
    }
}

ly_status ly_avx2_fake_quant_fp8(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t n = ly_tensor_numel(x);
    if (n == 0) return LY_OK;
    fp8_job job = {.x = (const float *)x->data,
                   .scale = (const float *)call->in[1]->data,
                   .out = (float *)call->out[0]->data,
                   .inner = n / x->shape[0],
                   .per_row = ly_tensor_numel(call->in[1]) != 1};
    if (!job.per_row) job.inner = n;
    ly_parallel_for(n, 64, ly_avx2_threads(call, n), fp8_range, &job);
    return LY_OK;
}

ly_status ly_avx2_fake_quant_fp8_backward(const ly_kernel_call *call)
{
    return ly_avx2_copy_grad(call);
}

/* For the tests: the 8-lane E4M3 conversions over arrays (tails included), so
 * they can be compared with the scalar ones over a sweep of fp32 bit patterns. */
void ly_avx2_e4m3_encode_array(const float *x, int64_t n, uint8_t *codes);
void ly_avx2_e4m3_encode_array(const float *x, int64_t n, uint8_t *codes)
{
    for (int64_t i = 0; i < n; i += 8) {
        int32_t lanes[8];
        _mm256_storeu_si256((__m256i *)lanes, ly_avx2_e4m3_encode(ly_avx2_load_n(x + i, n - i)));
        for (int64_t k = 0; k < 8 && i + k < n; k++)
            codes[i + k] = (uint8_t)lanes[k];
    }
}

void ly_avx2_e4m3_decode_array(const uint8_t *codes, int64_t n, float *out);
void ly_avx2_e4m3_decode_array(const uint8_t *codes, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i += 8) {
        int32_t lanes[8] = {0};
        for (int64_t k = 0; k < 8 && i + k < n; k++)
            lanes[k] = codes[i + k];
        __m256 v = ly_avx2_e4m3_decode(_mm256_loadu_si256((const __m256i *)lanes));
        ly_avx2_store_n(out + i, n - i, v);
    }
}

void ly_avx2_e4m3_round_clamped_array(const float *x, int64_t n, float *out);
void ly_avx2_e4m3_round_clamped_array(const float *x, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i += 8)
        ly_avx2_store_n(out + i, n - i, ly_avx2_e4m3_round_clamped(ly_avx2_load_n(x + i, n - i)));
}
