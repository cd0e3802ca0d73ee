/* SPDX-License-Identifier: MIT */
/*
 * The input side of conv2d_int8 on oneDNN's integer kernels: an f32 map, plain
 * or channel-blocked, quantized with fake_quant_int8_affine's codes into the
 * u8 channels-last map those kernels read (u8 = code + 128, so the zero point
 * moves by 128 too). The codes are the reference's bit for bit: the same fp32
 * multiply by the reciprocal, round to nearest even, fp32 add of the zero point
 * and x86's conversion of NaN, inf and huge values to the clamped minimum
 * (providers/avx2/quant/quant_avx2.h). And its output side: the f32
 * channels-last rows those kernels write, back into the graph's layout with
 * the residual added.
 */
#include "providers/avx2/exp_avx2.h"
#include "providers/avx2/quant/quant_avx2.h"
#include "providers/onednn/onednn_common.h"

typedef struct quantize_job {
    const float *x;
    uint8_t *out;
    int64_t c, h, w, block;
    float inv, zero_point;
    int64_t first_row; /* the row `out` starts at */
    size_t row_bytes;  /* from one row of `out` to the next */
    bool bw;           /* AVX512BW's packs for four blocks at once */
} quantize_job;

/* AVX512BW: every AVX-512 CPU since Skylake-SP; the F-only Xeon Phi lacks it. */
#define LY_AVX512BW __attribute__((target("avx512f,avx512bw")))

static bool has_avx512bw(void)
{
    return ly_cpu()->avx512f && __builtin_cpu_supports("avx512bw");
}

/* Eight codes plus 128, as int32 lanes. */
static inline __m256i codes_u8(const quantize_job *job, __m256 x)
{
    __m256 r = _mm256_add_ps(_mm256_set1_ps(job->zero_point),
                             ly_avx2_rint(_mm256_mul_ps(x, _mm256_set1_ps(job->inv))));
    return _mm256_cvtps_epi32(_mm256_add_ps(ly_avx2_int8_code(r), _mm256_set1_ps(128.0f)));
}

static inline __m128i narrow_u8(__m256i v)
{
    __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return _mm_packus_epi16(w16, w16);
}

/* Rows are (image, y) pairs. */
static void quantize_rows(void *ctx, int64_t begin, int64_t end)
{
    /* a copy the code stores cannot alias: its scalars stay in registers */
    const quantize_job local = *(const quantize_job *)ctx, *job = &local;
    const int64_t c = job->c, h = job->h, w = job->w, block = job->block;
    for (int64_t row = begin; row < end; row++) {
        int64_t image = row / h, y = row % h;
        uint8_t *out = job->out + (size_t)(row - job->first_row) * job->row_bytes;
        if (block == 0) {
            const float *x = job->x + image * c * h * w + y * w;
            for (int64_t ch = 0; ch < c; ch++) {
                const float *src = x + ch * h * w;
                int64_t i = 0;
                for (; i + 8 <= w; i += 8) {
                    uint8_t bytes[16];
                    _mm_storeu_si128((__m128i *)bytes,
                                     narrow_u8(codes_u8(job, _mm256_loadu_ps(src + i))));
                    for (int k = 0; k < 8; k++)
                        out[(i + k) * c + ch] = bytes[k];
                }
                if (i < w) {
                    uint8_t bytes[16];
                    __m256 v = ly_avx2_load_n(src + i, w - i);
                    _mm_storeu_si128((__m128i *)bytes, narrow_u8(codes_u8(job, v)));
                    for (int64_t k = 0; k < w - i; k++)
                        out[(i + k) * c + ch] = bytes[k];
                }
            }
            continue;
        }
        int64_t blocks = (c + block - 1) / block;
        const float *x = job->x + image * blocks * h * w * block;
        for (int64_t b = 0; b < blocks; b++) {
            int64_t lanes = c - b * block < block ? c - b * block : block;
            const float *src = x + (b * h + y) * w * block;
            uint8_t *dst = out + b * block;
            for (int64_t px = 0; px < w; px++, src += block, dst += c) {
                for (int64_t k = 0; k < lanes; k += 8) {
                    __m128i q = narrow_u8(codes_u8(job, _mm256_loadu_ps(src + k)));
                    if (lanes - k >= 8) {
                        _mm_storel_epi64((__m128i *)(dst + k), q);
                    } else {
                        uint8_t bytes[16];
                        _mm_storeu_si128((__m128i *)bytes, q);
                        memcpy(dst + k, bytes, (size_t)(lanes - k));
                    }
                }
            }
        }
    }
}

/* ---- the same on 16 lanes (AVX-512 CPUs: every VNNI one but AVX-VNNI's) ---------------- */

/* Sixteen codes plus 128, as bytes: ly_avx2_int8_code's clamp, NaN and
 * huge-value rule on a zmm (vmaxps/vminps return their second operand on NaN,
 * as the ymm forms do). */
LY_AVX512 static inline __m128i codes16_u8(const quantize_job *job, __m512 x)
{
    __m512 r = _mm512_add_ps(_mm512_set1_ps(job->zero_point),
                             _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(job->inv)),
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
 * codes16_u8, with the reference's rules for NaN, inf and huge values. */
LY_AVX512 static inline __m128i codes16_u8_fast(const quantize_job *job, __m512 x)
{
    __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(job->inv)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (__builtin_expect(_mm512_cmpeq_epi32_mask(q, _mm512_set1_epi32(INT32_MIN)) != 0, 0))
        return codes16_u8(job, x);
    __m512i code = _mm512_add_epi32(q, _mm512_set1_epi32((int32_t)job->zero_point));
    return _mm_xor_si128(_mm512_cvtsepi32_epi8(code), _mm_set1_epi8((char)0x80));
}

/* Four vectors (64 channels of a pixel) as 64 codes in channel order: the
 * signed-saturating packs (int32 -> int16 -> int8 saturates as vpmovsdb
 * does) interleave them per 128-bit lane, one dword permute puts each
 * vector's 16 codes back together. One store instead of four and half the
 * shuffle work: 0.125 -> 0.08 ns an element on 128 channels at 40x40. */
LY_AVX512BW static inline __m512i codes64_u8_fast(const quantize_job *job, const __m512 x[4])
{
    __m512 inv = _mm512_set1_ps(job->inv);
    __m512i q[4];
    for (int i = 0; i < 4; i++)
        q[i] = _mm512_cvt_roundps_epi32(_mm512_mul_ps(x[i], inv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i least = _mm512_min_epi32(_mm512_min_epi32(q[0], q[1]), _mm512_min_epi32(q[2], q[3]));
    if (__builtin_expect(_mm512_cmpeq_epi32_mask(least, _mm512_set1_epi32(INT32_MIN)) != 0, 0)) {
        __m512i r = _mm512_castsi128_si512(codes16_u8(job, x[0]));
        r = _mm512_inserti32x4(r, codes16_u8(job, x[1]), 1); /* the lane a constant */
        r = _mm512_inserti32x4(r, codes16_u8(job, x[2]), 2);
        return _mm512_inserti32x4(r, codes16_u8(job, x[3]), 3);
    }
    __m512i zp = _mm512_set1_epi32((int32_t)job->zero_point);
    __m512i lo = _mm512_packs_epi32(_mm512_add_epi32(q[0], zp), _mm512_add_epi32(q[1], zp));
    __m512i hi = _mm512_packs_epi32(_mm512_add_epi32(q[2], zp), _mm512_add_epi32(q[3], zp));
    __m512i r = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
        _mm512_packs_epi16(lo, hi));
    return _mm512_xor_si512(r, _mm512_set1_epi8((char)0x80));
}

/* A row of pixels of 16-channel blocks: its codes are w * blocks vectors of
 * 16 in a row, pixel-major; four of them a step, wherever they fall (four
 * pixels of a 16-channel map, two of a 32-channel one). */
LY_AVX512BW static void row_bw(const quantize_job *shared, const float *src, size_t block_stride,
                               int64_t blocks, uint8_t *out)
{
    const quantize_job local = *shared, *job = &local;
    int64_t n = job->w * blocks, k = 0, px = 0, b = 0;
    for (; k + 4 <= n; k += 4) {
        __m512 v[4];
        for (int i = 0; i < 4; i++) {
            v[i] = _mm512_loadu_ps(src + (size_t)b * block_stride + px * 16);
            if (++b == blocks) b = 0, px++;
        }
        _mm512_storeu_si512(out + k * 16, codes64_u8_fast(job, v));
    }
    for (; k < n; k++) {
        _mm_storeu_si128(
            (__m128i *)(out + k * 16),
            codes16_u8_fast(job, _mm512_loadu_ps(src + (size_t)b * block_stride + px * 16)));
        if (++b == blocks) b = 0, px++;
    }
}

LY_AVX512 static void quantize_rows16(void *ctx, int64_t begin, int64_t end)
{
    /* a copy the code stores cannot alias: its scalars stay in registers */
    const quantize_job local = *(const quantize_job *)ctx, *job = &local;
    const int64_t c = job->c, h = job->h, w = job->w, block = job->block;
    for (int64_t row = begin; row < end; row++) {
        int64_t image = row / h, y = row % h;
        uint8_t *out = job->out + (size_t)(row - job->first_row) * job->row_bytes;
        if (block == 0) {
            const float *x = job->x + image * c * h * w + y * w;
            for (int64_t ch = 0; ch < c; ch++) {
                const float *src = x + ch * h * w;
                for (int64_t i = 0; i < w; i += 16) {
                    int64_t n = w - i < 16 ? w - i : 16;
                    uint8_t bytes[16];
                    __m512 v = _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), src + i);
                    _mm_storeu_si128((__m128i *)bytes, codes16_u8(job, v));
                    for (int64_t k = 0; k < n; k++)
                        out[(i + k) * c + ch] = bytes[k];
                }
            }
            continue;
        }
        int64_t blocks = (c + block - 1) / block;
        const float *x = job->x + image * blocks * h * w * block;
        if (block == 16 && (blocks > 1 || job->bw)) {
            /* In the order of the codes, pixel by pixel: one store stream
             * rather than one per block (0.33 -> 0.21 ns an element on 64
             * channels at 160x160), four vectors a store with AVX512BW. */
            const float *src = x + y * w * 16;
            size_t block_stride = (size_t)(h * w * 16);
            if (job->bw) {
                row_bw(job, src, block_stride, blocks, out);
                continue;
            }
            for (int64_t px = 0; px < w; px++, src += 16)
                for (int64_t b = 0; b < blocks; b++)
                    _mm_storeu_si128((__m128i *)(out + px * c + b * 16),
                                     codes16_u8_fast(job, _mm512_loadu_ps(src + b * block_stride)));
            continue;
        }
        for (int64_t b = 0; b < blocks; b++) {
            int64_t lanes = c - b * block < block ? c - b * block : block;
            __mmask16 live = (__mmask16)((1u << lanes) - 1u);
            const float *src = x + (b * h + y) * w * block;
            uint8_t *dst = out + b * block;
            for (int64_t px = 0; px < w; px++, src += block, dst += c) {
                __m128i q = codes16_u8_fast(job, _mm512_maskz_loadu_ps(live, src));
                if (lanes == 16) {
                    _mm_storeu_si128((__m128i *)dst, q);
                } else if (lanes == 8) {
                    _mm_storel_epi64((__m128i *)dst, q);
                } else {
                    uint8_t bytes[16];
                    _mm_storeu_si128((__m128i *)bytes, q);
                    memcpy(dst, bytes, (size_t)lanes);
                }
            }
        }
    }
}

/* `lanes` 16 (AVX-512 CPUs only) or 8: a test hook, so both are checked on one machine. */
void ly_onednn_quantize_u8_nhwc_lanes(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int block, float inv, float zero_point, uint8_t *out,
                                      int threads, int lanes)
{
    quantize_job job = {
        x, out, c, h, w, block, inv, zero_point, 0, (size_t)(w * c), lanes == 16 && has_avx512bw()};
    int64_t rows = n * h;
    if (rows * w * c < LY_AVX2_PARALLEL_MIN) threads = 1;
    ly_parallel_for(rows, 1, threads, lanes == 16 ? quantize_rows16 : quantize_rows, &job);
}

void ly_onednn_quantize_u8_nhwc_rows(const float *x, int64_t c, int64_t h, int64_t w, int block,
                                     float inv, float zero_point, int64_t row0, int64_t row1,
                                     uint8_t *out, size_t row_bytes)
{
    quantize_job job = {x, out, c, h, w, block, inv, zero_point, row0, row_bytes, has_avx512bw()};
    (ly_cpu()->avx512f ? quantize_rows16 : quantize_rows)(&job, row0, row1);
}

/* ---- the output side: a band of f32 channels-last rows into the graph's layout ---------- */

/* Eight lanes: 8-channel blocks, and 16-channel ones on CPUs without AVX-512. */
static void rows_to_blocks8(const float *nhwc, float *out, const float *residual, int64_t o,
                            int64_t ho, int64_t wo, int64_t r0, int64_t rows, int block)
{
    size_t block_stride = (size_t)(ho * wo * block);
    for (int64_t y = r0; y < r0 + rows; y++)
        for (int64_t x = 0; x < wo; x++) {
            const float *v = nhwc + ((y - r0) * wo + x) * o;
            size_t first = (size_t)((y * wo + x) * block);
            for (int64_t b = 0; b < o / block; b++)
                for (int i = 0; i < block; i += 8) {
                    size_t at = first + (size_t)b * block_stride + (size_t)i;
                    __m256 value = _mm256_loadu_ps(v + b * block + i);
                    if (residual) value = _mm256_add_ps(value, _mm256_loadu_ps(residual + at));
                    _mm256_storeu_ps(out + at, value);
                }
        }
}

LY_AVX512 static void rows_to_blocks16(const float *nhwc, float *out, const float *residual,
                                       int64_t o, int64_t ho, int64_t wo, int64_t r0, int64_t rows)
{
    size_t block_stride = (size_t)(ho * wo * 16);
    for (int64_t y = r0; y < r0 + rows; y++)
        for (int64_t x = 0; x < wo; x++) {
            const float *v = nhwc + ((y - r0) * wo + x) * o;
            size_t first = (size_t)((y * wo + x) * 16);
            for (int64_t b = 0; b < o / 16; b++) {
                size_t at = first + (size_t)b * block_stride;
                __m512 value = _mm512_loadu_ps(v + b * 16);
                if (residual) value = _mm512_add_ps(value, _mm512_loadu_ps(residual + at));
                _mm512_storeu_ps(out + at, value);
            }
        }
}

/* The copy back with the convolution's epilogue, blocks of 8 or 16 channels:
 * oneDNN 2.6's int8 kernels spend more on a swish post-op than on the sums of
 * a thin convolution (its logistic divides); ly_activate16 here costs a
 * fraction of that. `activation` is a constant where it is inlined. */
LY_AVX512 static inline __attribute__((always_inline)) void
epilogue_rows(const float *nhwc, float *out, const float *residual, int64_t o, int64_t ho,
              int64_t wo, int64_t r0, int64_t rows, int block, int64_t activation, int64_t after,
              const ly_onednn_epilogue *e)
{
    size_t block_stride = (size_t)(ho * wo * block);
    int64_t blocks = (o + block - 1) / block;
    __m512 scale = _mm512_set1_ps(e->post_scale), shift = _mm512_set1_ps(e->post_shift);
    for (int64_t y = r0; y < r0 + rows; y++)
        for (int64_t x = 0; x < wo; x++) {
            const float *v = nhwc + ((y - r0) * wo + x) * o;
            size_t first = (size_t)((y * wo + x) * block);
            for (int64_t b = 0; b < blocks; b++) {
                int64_t lanes = o - b * block < block ? o - b * block : block;
                __mmask16 live = (__mmask16)((1u << lanes) - 1u);
                size_t at = first + (size_t)b * block_stride;
                __m512 value =
                    ly_activate16(_mm512_maskz_loadu_ps(live, v + b * block), activation, e->alpha);
                /* the reference's order and roundings: a product, then a sum */
                if (e->post_affine) value = _mm512_add_ps(_mm512_mul_ps(value, scale), shift);
                if (residual)
                    value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(live, residual + at));
                value = ly_activate16(value, after, 0.0f);
                _mm512_mask_storeu_ps(out + at, live, value);
            }
        }
}

/* epilogue_rows for the common case, SiLU alone on whole blocks of 16
 * channels, the residual (after it) a constant: no masks and no tests in the
 * loop, two vectors a step. The same operations on every element. */
LY_AVX512 static inline __attribute__((always_inline)) void
silu_rows16(const float *nhwc, float *out, const float *residual, int64_t o, int64_t ho, int64_t wo,
            int64_t r0, int64_t rows, const bool with_residual)
{
    size_t block_stride = (size_t)(ho * wo * 16);
    int64_t blocks = o / 16;
    for (int64_t y = r0; y < r0 + rows; y++)
        for (int64_t b = 0; b < blocks; b++) {
            const float *v = nhwc + (y - r0) * wo * o + b * 16;
            size_t at = (size_t)(y * wo * 16) + (size_t)b * block_stride;
            int64_t x = 0;
            for (; x + 2 <= wo; x += 2) {
                __m512 v0 = ly_activate16(_mm512_loadu_ps(v + x * o), LY_ACT_SILU, 0.0f);
                __m512 v1 = ly_activate16(_mm512_loadu_ps(v + (x + 1) * o), LY_ACT_SILU, 0.0f);
                if (with_residual) {
                    v0 = _mm512_add_ps(v0, _mm512_loadu_ps(residual + at + (size_t)x * 16));
                    v1 = _mm512_add_ps(v1, _mm512_loadu_ps(residual + at + (size_t)x * 16 + 16));
                }
                _mm512_storeu_ps(out + at + (size_t)x * 16, v0);
                _mm512_storeu_ps(out + at + (size_t)x * 16 + 16, v1);
            }
            for (; x < wo; x++) {
                __m512 v0 = ly_activate16(_mm512_loadu_ps(v + x * o), LY_ACT_SILU, 0.0f);
                if (with_residual)
                    v0 = _mm512_add_ps(v0, _mm512_loadu_ps(residual + at + (size_t)x * 16));
                _mm512_storeu_ps(out + at + (size_t)x * 16, v0);
            }
        }
}

/* epilogue_rows on blocks of 8 channels, two pixels a vector: a block's
 * neighbouring pixels are neighbours in the graph's layout, so the sixteen
 * lanes are all live (one pixel a vector left half of them idle: the int8
 * LibreYOLO9t's 24-channel maps spent more in their copy back than in their
 * convolutions). The same operations on every element. */
LY_AVX512 static inline __attribute__((always_inline)) void
epilogue_rows8(const float *nhwc, float *out, const float *residual, int64_t o, int64_t ho,
               int64_t wo, int64_t r0, int64_t rows, int64_t activation, int64_t after,
               const ly_onednn_epilogue *e)
{
    size_t block_stride = (size_t)(ho * wo * 8);
    __m512 scale = _mm512_set1_ps(e->post_scale), shift = _mm512_set1_ps(e->post_shift);
    for (int64_t y = r0; y < r0 + rows; y++)
        for (int64_t b = 0; b < o / 8; b++) {
            const float *v = nhwc + (y - r0) * wo * o + b * 8;
            size_t at = (size_t)(y * wo * 8) + (size_t)b * block_stride;
            for (int64_t x = 0; x < wo; x += 2) {
                __mmask16 live = x + 1 < wo ? (__mmask16)0xffff : (__mmask16)0x00ff;
                __m256 first = _mm256_loadu_ps(v + x * o);
                __m256 second = x + 1 < wo ? _mm256_loadu_ps(v + (x + 1) * o) : first;
                __m512 value = _mm512_castpd_ps(_mm512_insertf64x4(
                    _mm512_castpd256_pd512(_mm256_castps_pd(first)), _mm256_castps_pd(second), 1));
                value = ly_activate16(value, activation, e->alpha);
                if (e->post_affine) value = _mm512_add_ps(_mm512_mul_ps(value, scale), shift);
                size_t here = at + (size_t)x * 8;
                if (residual)
                    value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(live, residual + here));
                value = ly_activate16(value, after, 0.0f);
                _mm512_mask_storeu_ps(out + here, live, value);
            }
        }
}

LY_AVX512 static void rows_with_epilogue(const float *nhwc, float *out, const float *residual,
                                         int64_t o, int64_t ho, int64_t wo, int64_t r0,
                                         int64_t rows, int block, const ly_onednn_epilogue *e)
{
    if (block == 16 && o % 16 == 0 && e->activation == LY_ACT_SILU && !e->post_affine &&
        e->after == LY_ACT_NONE) {
        if (residual)
            silu_rows16(nhwc, out, residual, o, ho, wo, r0, rows, true);
        else
            silu_rows16(nhwc, out, NULL, o, ho, wo, r0, rows, false);
        return;
    }
    if (block == 8 && o % 8 == 0) {
        if (e->activation == LY_ACT_NONE && e->after == LY_ACT_SILU)
            epilogue_rows8(nhwc, out, residual, o, ho, wo, r0, rows, LY_ACT_NONE, LY_ACT_SILU, e);
        else if (e->after == LY_ACT_NONE && e->activation == LY_ACT_SILU)
            epilogue_rows8(nhwc, out, residual, o, ho, wo, r0, rows, LY_ACT_SILU, LY_ACT_NONE, e);
        else
            epilogue_rows8(nhwc, out, residual, o, ho, wo, r0, rows, e->activation, e->after, e);
        return;
    }
#define EPILOGUE_ROWS(activation, after)                                                           \
    epilogue_rows(nhwc, out, residual, o, ho, wo, r0, rows, block, activation, after, e)
    if (e->after == LY_ACT_NONE && e->activation == LY_ACT_SILU)
        EPILOGUE_ROWS(LY_ACT_SILU, LY_ACT_NONE);
    else if (e->after == LY_ACT_NONE)
        EPILOGUE_ROWS(LY_ACT_SIGMOID, LY_ACT_NONE);
    else if (e->activation == LY_ACT_NONE && e->after == LY_ACT_SILU)
        EPILOGUE_ROWS(LY_ACT_NONE, LY_ACT_SILU);
    else
        EPILOGUE_ROWS(e->activation, e->after);
#undef EPILOGUE_ROWS
}

static bool costly(int64_t activation)
{
    return activation == LY_ACT_SILU || activation == LY_ACT_SIGMOID;
}

bool ly_onednn_epilogue_supported(const ly_onednn_epilogue *epilogue, int block)
{
    int64_t a = epilogue->activation, after = epilogue->after;
    return (costly(a) || costly(after)) && (a == LY_ACT_NONE || costly(a)) &&
           (after == LY_ACT_NONE || costly(after)) && ly_cpu()->avx512f &&
           (block == 8 || block == 16);
}

void ly_onednn_nhwc_rows_to_layout(const float *nhwc, float *out, const float *residual, int64_t o,
                                   int64_t ho, int64_t wo, int64_t r0, int64_t rows, int block,
                                   const ly_onednn_epilogue *epilogue)
{
    if (epilogue) {
        rows_with_epilogue(nhwc, out, residual, o, ho, wo, r0, rows, block, epilogue);
    } else if (block == 16 && ly_cpu()->avx512f) {
        rows_to_blocks16(nhwc, out, residual, o, ho, wo, r0, rows);
    } else if (block) {
        rows_to_blocks8(nhwc, out, residual, o, ho, wo, r0, rows, block);
    } else {
        for (int64_t y = r0; y < r0 + rows; y++)
            for (int64_t x = 0; x < wo; x++) {
                const float *v = nhwc + ((y - r0) * wo + x) * o;
                for (int64_t ch = 0; ch < o; ch++) {
                    size_t at = (size_t)((ch * ho + y) * wo + x);
                    out[at] = residual ? v[ch] + residual[at] : v[ch];
                }
            }
    }
}
