/* SPDX-License-Identifier: MIT */
/*
 * AVX2 unpack of the packed 4/2-bit formats (checkpoint layouts, spec section
 * 3): grouped int4/int2 and NVFP4. Codes are expanded eight lanes at a time with
 * variable shifts; values are the reference's single fp32 multiply.
 */
#include "ops/quant/numerics.h"
#include "providers/avx2/quant/quant_avx2.h"

/* ---- unpack_int_grouped ----------------------------------------------------------- */

typedef struct unpack_int_job {
    const uint8_t *payload;
    const float *scale;
    float *out;
    int64_t width, groups, cols, group;
    int bits;
    ly_avx2_store store;
} unpack_int_job;

/* Eight codes starting at column c (c a multiple of 8), each in its own lane:
 * 4 bytes at 4 bits, 2 at 2 bits, even column in the lowest bits. */
static inline __m256i int_codes(const unpack_int_job *job, const uint8_t *row, int64_t c)
{
    const int64_t at = c * job->bits / 8;
    uint32_t word = 0;
    if (at + 4 <= job->width) {
        memcpy(&word, row + at, 4); /* the unused high bytes of a 2-bit load are masked off */
    } else {
        for (int64_t k = at; k < job->width && k < at + job->bits; k++)
            word |= (uint32_t)row[k] << (8 * (k - at));
    }
    __m256i shifts = job->bits == 4 ? _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)
                                    : _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)word), shifts),
                            _mm256_set1_epi32((1 << job->bits) - 1));
}

/* 32 int4 codes from 16 bytes (even column in the low nibble), unpacked into
 * bytes in column order, then widened eight at a time: fewer operations per code
 * than a broadcast and variable shift per vector. */
LY_AVX2_INLINE void int4_codes32(ly_avx2_writer *w, ly_avx2_store store, const uint8_t *p,
                                 __m256i qmin, __m256 s, float *out)
{
    const __m128i nibble = _mm_set1_epi8(0x0F);
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i low = _mm_and_si128(bytes, nibble);
    __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
    __m128i first = _mm_unpacklo_epi8(low, high), second = _mm_unpackhi_epi8(low, high);
    __m128i parts[4] = {first, _mm_srli_si128(first, 8), second, _mm_srli_si128(second, 8)};
    for (int k = 0; k < 4; k++) {
        __m256i codes = _mm256_add_epi32(_mm256_cvtepu8_epi32(parts[k]), qmin);
        ly_avx2_put(w, store, out + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(codes), s));
    }
}

/* Rows [begin, end). Streamed calls have cols and group multiples of 8. */
LY_AVX2_INLINE void unpack_int(const unpack_int_job *job, ly_avx2_store store, int64_t begin,
                               int64_t end)
{
    const __m256i qmin = _mm256_set1_epi32(-(1 << (job->bits - 1)));
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + begin * job->cols);
    for (int64_t r = begin; r < end; r++) {
        const uint8_t *row = job->payload + r * job->width;
        const float *scale = job->scale + r * job->groups;
        float *out = job->out + r * job->cols;
        if (job->group % 8 == 0) {
            /* Vectors never straddle a group: one scale per group. */
            for (int64_t c0 = 0; c0 < job->cols; c0 += job->group) {
                const __m256 s =
                    _mm256_set1_ps(ly_nm_clamp_min(scale[c0 / job->group], LY_QUANT_EPS));
                int64_t stop = c0 + job->group < job->cols ? c0 + job->group : job->cols;
                int64_t c = c0;
                if (job->bits == 4)
                    for (; c + 32 <= stop && c / 2 + 16 <= job->width; c += 32)
                        int4_codes32(&w, store, row + c / 2, qmin, s, out + c);
                for (; c < stop; c += 8) {
                    __m256 value = _mm256_mul_ps(
                        _mm256_cvtepi32_ps(_mm256_add_epi32(int_codes(job, row, c), qmin)), s);
                    if (stop - c >= 8)
                        ly_avx2_put(&w, store, out + c, value);
                    else
                        ly_avx2_store_n(out + c, stop - c, value);
                }
            }
            continue;
        }
        for (int64_t c = 0; c < job->cols; c += 8) {
            int64_t n = job->cols - c;
            float lanes[8] = {0};
            for (int64_t k = 0; k < 8 && k < n; k++)
                lanes[k] = ly_nm_clamp_min(scale[(c + k) / job->group], LY_QUANT_EPS);
            __m256 value = _mm256_cvtepi32_ps(_mm256_add_epi32(int_codes(job, row, c), qmin));
            ly_avx2_store_n(out + c, n, _mm256_mul_ps(value, _mm256_loadu_ps(lanes)));
        }
    }
    ly_avx2_writer_end(&w, store, NULL, 0, _mm256_setzero_ps());
}

static void unpack_int_range(void *ctx, int64_t begin, int64_t end)
{
    const unpack_int_job *job = ctx;
    if (job->store == LY_AVX2_NT)
        unpack_int(job, LY_AVX2_NT, begin, end);
    else if (job->store == LY_AVX2_NT_SHIFTED)
        unpack_int(job, LY_AVX2_NT_SHIFTED, begin, end);
    else
        unpack_int(job, LY_AVX2_CACHED, begin, end);
}

ly_status ly_avx2_unpack_int_grouped(const ly_kernel_call *call)
{
    const ly_tensor *payload = call->in[0], *scale = call->in[1];
    unpack_int_job job = {.payload = (const uint8_t *)payload->data,
                          .scale = (const float *)scale->data,
                          .out = (float *)call->out[0]->data,
                          .width = payload->shape[1],
                          .groups = scale->shape[1],
                          .cols = call->out[0]->shape[1],
                          .group = LY_PARAMS(call, ly_unpack_int_grouped_params)->group_size,
                          .bits = (int)LY_PARAMS(call, ly_unpack_int_grouped_params)->bits};
    int64_t rows = payload->shape[0];
    if (rows == 0 || job.cols == 0) return LY_OK;
    job.store = job.cols % 8 == 0 && job.group % 8 == 0
                    ? ly_avx2_store_mode(job.out, rows * job.cols)
                    : LY_AVX2_CACHED;
    ly_parallel_for(rows, 1, ly_avx2_threads(call, rows * job.cols), unpack_int_range, &job);
    return LY_OK;
}

/* ---- unpack_nvfp4 ------------------------------------------------------------------- */

typedef struct unpack_nv_job {
    const uint8_t *payload;
    const void *block_scale;
    bool scale_f32;
    float *out;
    int64_t width, blocks, cols;
    float tensor_scale;
    ly_avx2_store store;
} unpack_nv_job;

/* Sixteen E2M1 values of one block (8 bytes, even element in the low nibble):
 * level[code & 7] with the sign of bit 3 (code 8 is -0.0, as the reference). */
static inline void nv_block_values(const uint8_t *p, __m256 *lo, __m256 *hi)
{
    const __m256 levels = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    __m128i bytes = _mm_loadl_epi64((const __m128i *)p);
    __m128i low = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
    __m128i nibbles = _mm_unpacklo_epi8(low, high);
    __m256i c0 = _mm256_cvtepu8_epi32(nibbles);
    __m256i c1 = _mm256_cvtepu8_epi32(_mm_srli_si128(nibbles, 8));
    __m256i s0 = _mm256_slli_epi32(_mm256_srli_epi32(c0, 3), 31);
    __m256i s1 = _mm256_slli_epi32(_mm256_srli_epi32(c1, 3), 31);
    *lo = _mm256_xor_ps(_mm256_permutevar8x32_ps(levels, c0), _mm256_castsi256_ps(s0));
    *hi = _mm256_xor_ps(_mm256_permutevar8x32_ps(levels, c1), _mm256_castsi256_ps(s1));
}

/* Rows [begin, end). Streamed calls have cols % 8 == 0. */
LY_AVX2_INLINE void unpack_nv(const unpack_nv_job *job, ly_avx2_store store, int64_t begin,
                              int64_t end)
{
    const __m256 ts = _mm256_set1_ps(job->tensor_scale), eps = _mm256_set1_ps(LY_QUANT_EPS);
    const int64_t used_blocks = (job->cols + LY_NVFP4_BLOCK - 1) / LY_NVFP4_BLOCK;
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + begin * job->cols);
    for (int64_t r = begin; r < end; r++) {
        const uint8_t *row = job->payload + r * job->width;
        float *out = job->out + r * job->cols;
        for (int64_t b0 = 0; b0 < used_blocks; b0 += 8) {
            int64_t count = used_blocks - b0 < 8 ? used_blocks - b0 : 8;
            int64_t at = r * job->blocks + b0;
            __m256 bs;
            if (job->scale_f32) {
                bs = ly_avx2_load_n((const float *)job->block_scale + at, count);
            } else {
                uint64_t codes = 0;
                memcpy(&codes, (const uint8_t *)job->block_scale + at, (size_t)count);
                bs = ly_avx2_e4m3_decode(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)codes)));
            }
            /* eff = max(bs * ts', 1e-12), NaN kept. */
            float eff[8];
            _mm256_storeu_ps(eff, _mm256_max_ps(eps, ly_avx2_nan_first(_mm256_mul_ps(bs, ts), bs)));
            for (int64_t j = 0; j < count; j++) {
                int64_t c = (b0 + j) * LY_NVFP4_BLOCK;
                int64_t n = job->cols - c;
                __m256 e = _mm256_set1_ps(eff[j]), lo, hi;
                nv_block_values(row + (b0 + j) * 8, &lo, &hi);
                if (n >= 8)
                    ly_avx2_put(&w, store, out + c, _mm256_mul_ps(lo, e));
                else
                    ly_avx2_store_n(out + c, n, _mm256_mul_ps(lo, e));
                if (n >= 16)
                    ly_avx2_put(&w, store, out + c + 8, _mm256_mul_ps(hi, e));
                else if (n > 8)
                    ly_avx2_store_n(out + c + 8, n - 8, _mm256_mul_ps(hi, e));
            }
        }
    }
    ly_avx2_writer_end(&w, store, NULL, 0, _mm256_setzero_ps());
}

static void unpack_nv_range(void *ctx, int64_t begin, int64_t end)
{
    const unpack_nv_job *job = ctx;
    if (job->store == LY_AVX2_NT)
        unpack_nv(job, LY_AVX2_NT, begin, end);
    else if (job->store == LY_AVX2_NT_SHIFTED)
        unpack_nv(job, LY_AVX2_NT_SHIFTED, begin, end);
    else
        unpack_nv(job, LY_AVX2_CACHED, begin, end);
}

ly_status ly_avx2_unpack_nvfp4(const ly_kernel_call *call)
{
    const ly_tensor *payload = call->in[0], *bs = call->in[1];
    unpack_nv_job job = {.payload = (const uint8_t *)payload->data,
                         .block_scale = bs->data,
                         .scale_f32 = bs->dtype == LY_F32,
                         .out = (float *)call->out[0]->data,
                         .width = payload->shape[1],
                         .blocks = bs->shape[1],
                         .cols = call->out[0]->shape[1],
                         .tensor_scale =
                             ly_nm_nvfp4_tensor_scale(((const float *)call->in[2]->data)[0])};
    int64_t rows = payload->shape[0];
    if (rows == 0 || job.cols == 0) return LY_OK;
    job.store = job.cols % 8 == 0 ? ly_avx2_store_mode(job.out, rows * job.cols) : LY_AVX2_CACHED;
    ly_parallel_for(rows, 1, ly_avx2_threads(call, rows * job.cols), unpack_nv_range, &job);
    return LY_OK;
}
