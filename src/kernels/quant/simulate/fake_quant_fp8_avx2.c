/*
 * AVX2 fake_quant_fp8: s = clamp(scale, min=1e-12); y = clamp(x / s, +-448);
 * q = fp32(e4m3(y)) * s; out = x + (q - x). Same IEEE operations as the
 * reference per element; the E4M3 round trip in integer lanes.
 */
#include "kernels/quant/quant_avx2.h"
#include "quant/numerics.h"

typedef struct fp8_job {
    const float *x, *scale;
    float *out;
    int64_t inner;
    bool per_row;
    ly_avx2_store store;
} fp8_job;

/* Elements [begin, end). Streamed calls have rows of 8k elements (or one scale),
 * so only the range's last vector can be partial. */
LY_AVX2_INLINE void fp8(const fp8_job *job, ly_avx2_store store, int64_t begin, int64_t end)
{
    const __m256 lo = _mm256_set1_ps(-LY_E4M3_MAX), hi = _mm256_set1_ps(LY_E4M3_MAX);
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + begin);
    int64_t tail_at = end, tail_n = 0;
    __m256 tail = _mm256_setzero_ps();
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
            __m256 e = ly_avx2_e4m3_round_clamped(y);
            __m256 q = _mm256_mul_ps(e, s);
            if (s_nan) q = ly_avx2_nan_first(q, e);
            __m256 out = ly_avx2_ste(x, q);
            if (n >= 8) {
                ly_avx2_put(&w, store, job->out + j, out);
            } else if (store == LY_AVX2_CACHED) {
                ly_avx2_store_n(job->out + j, n, out);
            } else {
                tail_at = j;
                tail_n = n;
                tail = out;
            }
        }
        i = stop;
    }
    ly_avx2_writer_end(&w, store, job->out + tail_at, tail_n, tail);
}

static void fp8_range(void *ctx, int64_t begin, int64_t end)
{
    const fp8_job *job = ctx;
    if (job->store == LY_AVX2_NT)
        fp8(job, LY_AVX2_NT, begin, end);
    else if (job->store == LY_AVX2_NT_SHIFTED)
        fp8(job, LY_AVX2_NT_SHIFTED, begin, end);
    else
        fp8(job, LY_AVX2_CACHED, begin, end);
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
    job.store = job.inner % 8 == 0 || !job.per_row ? ly_avx2_store_mode(job.out, n)
                                                   : LY_AVX2_CACHED;
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
