/*
 * AVX2 NVFP4 and MXFP4 fake quant: blocks of 16 / 32 along the last dim, each
 * scaled by its own eff and rounded to E2M1 through the literal STE.
 *
 * Blocks are handled eight at a time: their |x| maxima are reduced into the
 * eight lanes of one vector, the eight effs are computed lane-wise with the
 * reference's scalar operations, and the blocks are then transformed with their
 * eff broadcast. A block never spans threads, so any split is bit-identical.
 */
#include "kernels/quant/quant_avx2.h"
#include "quant/numerics.h"

#include <pthread.h>

/* ---- the MXFP4 exponent ---------------------------------------------------------
 *
 * The reference takes floor((float)log2((double)a)), which rounds UP to the next
 * integer for the last few floats below a power of two. Within one binade
 * (biased exponent b) it is therefore b - 127 below a mantissa threshold and
 * b - 126 from it on. The thresholds are found once, by bisection on the
 * reference's own function, so the table agrees with it by construction; the
 * tests compare the two densely around every power of two. */
static int32_t mx_threshold[256];
static bool mx_table_ok;
static pthread_once_t mx_once = PTHREAD_ONCE_INIT;

static int ref_floor_log2(uint32_t bits)
{
    return (int)floorf(ly_nm_log2f(ly_nm_bits_f32(bits)));
}

static void mx_build_table(void)
{
    bool ok = true;
    for (uint32_t b = 1; b < 255; b++) {
        int e = (int)b - 127;
        uint32_t first = b << 23, last = first | 0x7FFFFFu;
        if (ref_floor_log2(first) != e) ok = false;
        int top = ref_floor_log2(last);
        if (top == e) {
            mx_threshold[b] = 0x800000; /* never rounds up in this binade */
            continue;
        }
        if (top != e + 1) ok = false;
        uint32_t below = 0, at = 0x7FFFFF; /* floor is e at `below`, e + 1 at `at` */
        while (at - below > 1) {
            uint32_t mid = below + (at - below) / 2;
            if (ref_floor_log2(first | mid) > e)
                at = mid;
            else
                below = mid;
        }
        mx_threshold[b] = (int32_t)at;
    }
    mx_threshold[0] = 0x800000;
    mx_threshold[255] = 0; /* inf: any exponent above 129 clamps to 127 */
    mx_table_ok = ok;
}

/* eff = 2^clamp(floor(log2(max(amax, 1e-30))) - 2, -127, 127); NaN for a NaN amax. */
static inline __m256 mx_eff(__m256i amax_bits)
{
    __m256 a = _mm256_max_ps(_mm256_set1_ps(1e-30f), _mm256_castsi256_ps(amax_bits));
    __m256i bits = _mm256_castps_si256(a);
    __m256i biased = _mm256_srli_epi32(bits, 23);
    __m256i threshold = _mm256_i32gather_epi32(mx_threshold, biased, 4);
    __m256i mantissa = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFF));
    /* e = floor - 2 = (biased - 127) + (mantissa >= threshold) - 2; cmpgt gives -1. */
    __m256i below = _mm256_cmpgt_epi32(threshold, mantissa);
    __m256i e = _mm256_add_epi32(_mm256_sub_epi32(biased, _mm256_set1_epi32(128)), below);
    e = _mm256_min_epi32(_mm256_max_epi32(e, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
    __m256i normal = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23);
    __m256i eff = _mm256_blendv_epi8(normal, _mm256_set1_epi32(0x00400000),
                                     _mm256_cmpeq_epi32(e, _mm256_set1_epi32(-127)));
    __m256i is_nan = _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(LY_AVX2_INF_BITS));
    eff = _mm256_blendv_epi8(eff, _mm256_castps_si256(_mm256_set1_ps(NAN)), is_nan);
    return _mm256_castsi256_ps(eff);
}

/* ---- the NVFP4 eff --------------------------------------------------------------- */

/* bs = e4m3(clamp(amax / (6 ts'), 1e-12, 448)); eff = max(bs * ts', 1e-12). */
static inline __m256 nv_eff(__m256i amax_bits, float tensor_scale, float six_ts)
{
    __m256 v = _mm256_div_ps(_mm256_castsi256_ps(amax_bits), _mm256_set1_ps(six_ts));
    v = _mm256_min_ps(_mm256_set1_ps(LY_E4M3_MAX), _mm256_max_ps(_mm256_set1_ps(1e-12f), v));
    __m256 bs = ly_avx2_e4m3_round_clamped(v);
    __m256 eff = ly_avx2_nan_first(_mm256_mul_ps(bs, _mm256_set1_ps(tensor_scale)), bs);
    return _mm256_max_ps(_mm256_set1_ps(LY_QUANT_EPS), eff);
}

/* ---- blockwise driver ------------------------------------------------------------- */

typedef struct fp4_job {
    const float *x;   /* the forward input: block maxima come from it */
    const float *src; /* what is transformed: x (forward) or the gradient */
    float *out;
    int64_t cols, blocks_per_row;
    int block;
    bool mx, backward;
    float tensor_scale, six_ts; /* NVFP4 */
} fp4_job;

/* eff_nan: only a NaN eff can meet a NaN q in the product. */
static inline __m256 fp4_transform(const fp4_job *job, __m256 v, __m256 eff, bool eff_nan)
{
    if (job->backward) return _mm256_div_ps(_mm256_mul_ps(v, eff), eff);
    __m256 q = ly_avx2_e2m1_ste(_mm256_div_ps(v, eff));
    __m256 out = _mm256_mul_ps(q, eff);
    return eff_nan ? ly_avx2_nan_first(out, q) : out;
}

/* Blocks [blk, blk + count) of one row, count <= 8. */
static inline void fp4_chunk(const fp4_job *job, int block, int64_t row, int64_t blk, int count)
{
    const int64_t start = row * job->cols + blk * block;
    const int64_t avail = job->cols - blk * block; /* elements left in the row */
    __m256i maxima[8];
    for (int j = 0; j < 8; j++) {
        __m256i m = _mm256_setzero_si256();
        if (j < count) {
            const float *p = job->x + start + (int64_t)j * block;
            int64_t len = avail - (int64_t)j * block;
            for (int k = 0; k < block; k += 8)
                m = _mm256_max_epi32(m, ly_avx2_abs_bits(ly_avx2_load_n(p + k, len - k)));
        }
        maxima[j] = m;
    }
    __m256i amax = ly_avx2_hmax8_epi32(maxima);
    float eff[8];
    _mm256_storeu_ps(eff, job->mx ? mx_eff(amax) : nv_eff(amax, job->tensor_scale, job->six_ts));
    for (int j = 0; j < count; j++) {
        const __m256 e = _mm256_set1_ps(eff[j]);
        const bool eff_nan = eff[j] != eff[j];
        const float *s = job->src + start + (int64_t)j * block;
        float *o = job->out + start + (int64_t)j * block;
        int64_t len = avail - (int64_t)j * block;
        for (int k = 0; k < block; k += 8)
            ly_avx2_store_n(o + k, len - k,
                            fp4_transform(job, ly_avx2_load_n(s + k, len - k), e, eff_nan));
    }
}

static void fp4_range(void *ctx, int64_t begin, int64_t end)
{
    const fp4_job *job = ctx;
    for (int64_t b = begin; b < end;) {
        int64_t row = b / job->blocks_per_row, blk = b % job->blocks_per_row;
        int64_t count = job->blocks_per_row - blk;
        if (count > end - b) count = end - b;
        if (count > 8) count = 8;
        /* Constant block sizes let the compiler unroll the inner loops. */
        if (job->block == LY_NVFP4_BLOCK)
            fp4_chunk(job, LY_NVFP4_BLOCK, row, blk, (int)count);
        else
            fp4_chunk(job, LY_MXFP4_BLOCK, row, blk, (int)count);
        b += count;
    }
}

/* x: the forward input; src/out: what is transformed and where it goes. */
static ly_status fp4_run(const ly_kernel_call *call, const ly_tensor *x, const float *src,
                         float *out, bool mx, bool backward, const float *tensor_amax)
{
    int64_t n = ly_tensor_numel(x);
    if (n == 0) return LY_OK;
    int threads = ly_avx2_threads(call, n);
    fp4_job job = {.x = (const float *)x->data,
                   .src = src,
                   .out = out,
                   .cols = x->shape[x->ndim - 1],
                   .block = mx ? LY_MXFP4_BLOCK : LY_NVFP4_BLOCK,
                   .mx = mx,
                   .backward = backward};
    if (mx) {
        pthread_once(&mx_once, mx_build_table);
        if (!mx_table_ok) return LY_E_DECLINED;
    } else {
        float amax =
            tensor_amax
                ? *tensor_amax
                : ly_avx2_bits_to_float(ly_avx2_amax_exact_bits_parallel(job.x, n, threads));
        job.tensor_scale = ly_nm_nvfp4_tensor_scale(amax);
        job.six_ts = 6.0f * job.tensor_scale;
    }
    /* Rows that hold whole blocks are one long row of blocks. */
    if (job.cols % job.block == 0) job.cols = n;
    job.blocks_per_row = (job.cols + job.block - 1) / job.block;
    int64_t blocks = n / job.cols * job.blocks_per_row;
    ly_parallel_for(blocks, 64, threads, fp4_range, &job);
    return LY_OK;
}

static const float *in_f32(const ly_kernel_call *call, int i)
{
    return (const float *)call->in[i]->data;
}

static float *out_f32(const ly_kernel_call *call)
{
    return (float *)call->out[0]->data;
}

ly_status ly_avx2_fake_quant_nvfp4_weight(const ly_kernel_call *call)
{
    return fp4_run(call, call->in[0], in_f32(call, 0), out_f32(call), false, false,
                   in_f32(call, 1));
}

ly_status ly_avx2_fake_quant_nvfp4_weight_backward(const ly_kernel_call *call)
{
    return fp4_run(call, call->in[1], in_f32(call, 0), out_f32(call), false, true, in_f32(call, 2));
}

ly_status ly_avx2_fake_quant_nvfp4_dynamic(const ly_kernel_call *call)
{
    return fp4_run(call, call->in[0], in_f32(call, 0), out_f32(call), false, false, NULL);
}

ly_status ly_avx2_fake_quant_nvfp4_dynamic_backward(const ly_kernel_call *call)
{
    return fp4_run(call, call->in[1], in_f32(call, 0), out_f32(call), false, true, NULL);
}

ly_status ly_avx2_fake_quant_mxfp4_weight(const ly_kernel_call *call)
{
    return fp4_run(call, call->in[0], in_f32(call, 0), out_f32(call), true, false, NULL);
}

ly_status ly_avx2_fake_quant_mxfp4_weight_backward(const ly_kernel_call *call)
{
    return fp4_run(call, call->in[1], in_f32(call, 0), out_f32(call), true, true, NULL);
}

ly_status ly_avx2_fake_quant_mxfp4_dynamic(const ly_kernel_call *call)
{
    return ly_avx2_fake_quant_mxfp4_weight(call);
}

ly_status ly_avx2_fake_quant_mxfp4_dynamic_backward(const ly_kernel_call *call)
{
    return ly_avx2_fake_quant_mxfp4_weight_backward(call);
}

/* For the tests: the table-based exponent of one amax, and whether the table is
 * usable. Exposed so the dense check around powers of two needs no vector code. */
int ly_avx2_mxfp4_eff_bits(float amax, uint32_t *eff_bits);
int ly_avx2_mxfp4_eff_bits(float amax, uint32_t *eff_bits)
{
    pthread_once(&mx_once, mx_build_table);
    __m256 eff = mx_eff(_mm256_castps_si256(_mm256_set1_ps(amax)));
    *eff_bits = (uint32_t)_mm256_extract_epi32(_mm256_castps_si256(eff), 0);
    return mx_table_ok;
}
