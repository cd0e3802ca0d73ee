/* SPDX-License-Identifier: MIT */
/*
 * AVX2 NVFP4 and MXFP4 fake quant: blocks of 16 / 32 along the last dim, each
 * scaled by its own eff and rounded to E2M1 through the literal STE.
 *
 * Blocks are handled eight at a time: their |x| maxima are reduced into the
 * eight lanes of one vector, the eight effs are computed lane-wise with the
 * reference's scalar operations, and the blocks are then transformed with their
 * eff broadcast. A block never spans threads, so any split is bit-identical.
 * Where rows hold whole blocks, groups of eight whole blocks take a fast path
 * (fp4_blocks); anything else, and any group with a NaN eff, takes fp4_chunk.
 * The dynamic NVFP4 path keeps the block maxima of its amax pass (see
 * fp4_keep_maxima_range).
 */
#include "providers/avx2/quant/quant_avx2.h"
#include "ops/quant/numerics.h"

#include <pthread.h>
#include <stdlib.h>

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

/* bs = e4m3(clamp(amax / (6 ts'), 1e-12, 448)); eff = max(bs * ts', 1e-12); NaN for
 * a NaN amax or ts'. */
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
    ly_avx2_store store;
    float tensor_scale, six_ts; /* NVFP4 */
    int64_t blocks;             /* in all */
    int32_t *segment_amax;      /* dynamic NVFP4 with block maxima kept: per segment */
} fp4_job;

/* eff_nan: only a NaN eff can meet a NaN q in the product. */
static inline __m256 fp4_transform(const fp4_job *job, __m256 v, __m256 eff, bool eff_nan)
{
    if (job->backward) return _mm256_div_ps(_mm256_mul_ps(v, eff), eff);
    __m256 q = ly_avx2_e2m1_ste(_mm256_div_ps(v, eff));
    __m256 out = _mm256_mul_ps(q, eff);
    return eff_nan ? ly_avx2_nan_first(out, q) : out;
}

/* Any layout and any values: blocks [blk, blk + count) of one row, count <= 8,
 * outputs from o on (o holds the element at column blk * block). */
static void fp4_chunk(const fp4_job *job, int block, int64_t row, int64_t blk, int count, float *o)
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
        float *out = o + (int64_t)j * block;
        int64_t len = avail - (int64_t)j * block;
        for (int k = 0; k < block; k += 8)
            ly_avx2_store_n(out + k, len - k,
                            fp4_transform(job, ly_avx2_load_n(s + k, len - k), e, eff_nan));
    }
}

/* The common case: groups of eight whole blocks. A group's effs are computed one
 * group ahead of its transform: the chain from the block maxima to the effs is
 * long, and the transform of the previous group hides it.
 *
 * MXFP4 multiplies by 1 / eff instead of dividing by eff: eff is a power of two
 * whose reciprocal is exact, so both round the same real number. Groups with a
 * NaN eff (and, for MXFP4, eff = 2^127, whose reciprocal is subnormal) go
 * through fp4_chunk instead, so here the operand order of the products cannot
 * choose between two NaNs. */
typedef struct fp4_effs {
    _Alignas(32) float eff[8];
    _Alignas(32) float recip[8]; /* MXFP4 */
    bool usable;
    bool tame; /* every scaled value within +-12: the STE is the identity (ly_avx2_e2m1_tame) */
} fp4_effs;

/* Lane j: max|x| bits of block j of the eight whole blocks at x. */
LY_AVX2_INLINE __m256i fp4_maxima8(int block, const float *x)
{
    __m256i maxima[8];
    for (int j = 0; j < 8; j++) {
        const float *p = x + j * block;
        __m256i m = ly_avx2_abs_bits(_mm256_loadu_ps(p));
        for (int k = 8; k < block; k += 8)
            m = _mm256_max_epi32(m, ly_avx2_abs_bits(_mm256_loadu_ps(p + k)));
        maxima[j] = m;
    }
    return ly_avx2_hmax8_epi32(maxima);
}

LY_AVX2_INLINE void fp4_effs8(const fp4_job *job, bool mx, __m256i amax, fp4_effs *e)
{
    __m256 eff, top; /* top: the largest |scaled value| of each block, as the transform rounds it */
    if (mx) {
        eff = mx_eff(amax);
        __m256i bad = _mm256_cmpgt_epi32(_mm256_castps_si256(eff), _mm256_set1_epi32(0x7EFFFFFF));
        e->usable = _mm256_movemask_epi8(bad) == 0;
        __m256 recip = _mm256_div_ps(_mm256_set1_ps(1.0f), eff);
        _mm256_store_ps(e->recip, recip);
        top = _mm256_mul_ps(_mm256_castsi256_ps(amax), recip);
    } else {
        eff = nv_eff(amax, job->tensor_scale, job->six_ts);
        e->usable = _mm256_movemask_ps(_mm256_cmp_ps(eff, eff, _CMP_UNORD_Q)) == 0;
        top = _mm256_div_ps(_mm256_castsi256_ps(amax), eff);
    }
    /* Rounding is monotonic: no scaled value exceeds the scaled maximum. */
    e->tame = _mm256_movemask_ps(_mm256_cmp_ps(top, _mm256_set1_ps(12.0f), _CMP_LE_OQ)) == 0xFF;
    _mm256_store_ps(e->eff, eff);
}

LY_AVX2_INLINE void fp4_apply8_as(int block, bool mx, bool backward, bool tame, ly_avx2_store store,
                                  ly_avx2_writer *w, const fp4_effs *e, const float *src, float *o)
{
    for (int j = 0; j < 8; j++) {
        const __m256 eff = _mm256_broadcast_ss(&e->eff[j]);
        const __m256 r = mx ? _mm256_broadcast_ss(&e->recip[j]) : eff;
        for (int k = 0; k < block; k += 8) {
            __m256 v = _mm256_loadu_ps(src + j * block + k), y;
            if (backward) {
                __m256 scaled = _mm256_mul_ps(v, eff);
                y = mx ? _mm256_mul_ps(scaled, r) : _mm256_div_ps(scaled, eff);
            } else {
                __m256 scaled = mx ? _mm256_mul_ps(v, r) : _mm256_div_ps(v, eff);
                __m256 q = tame ? ly_avx2_e2m1_tame(scaled) : ly_avx2_e2m1_ste(scaled);
                y = _mm256_mul_ps(q, eff);
            }
            ly_avx2_put(w, store, o + j * block + k, y);
        }
    }
}

LY_AVX2_INLINE void fp4_apply8(int block, bool mx, bool backward, ly_avx2_store store,
                               ly_avx2_writer *w, const fp4_effs *e, const float *src, float *o)
{
    if (backward || !e->tame)
        fp4_apply8_as(block, mx, backward, false, store, w, e, src, o);
    else
        fp4_apply8_as(block, mx, backward, true, store, w, e, src, o);
}

/* fp4_chunk for a streamed range: through an L1 buffer, then the writer. */
LY_AVX2_INLINE void fp4_chunk_put(const fp4_job *job, int block, ly_avx2_store store,
                                  ly_avx2_writer *w, int64_t row, int64_t blk, int count)
{
    if (store == LY_AVX2_CACHED) {
        fp4_chunk(job, block, row, blk, count, job->out + row * job->cols + blk * block);
        return;
    }
    _Alignas(32) float buf[8 * LY_MXFP4_BLOCK];
    fp4_chunk(job, block, row, blk, count, buf);
    for (int i = 0; i < count * block; i += 8)
        ly_avx2_put(w, store, NULL, _mm256_load_ps(buf + i));
}

/* The maxima of the eight blocks from block index b on, at element start. */
LY_AVX2_INLINE __m256i fp4_group_amax(const fp4_job *job, int block, bool kept,
                                      const int32_t *kept_amax, int64_t b, int64_t start)
{
    if (kept) return _mm256_loadu_si256((const __m256i *)(kept_amax + b));
    return fp4_maxima8(block, job->x + start);
}

/* Blocks [begin, end) in order. Streamed ranges hold whole blocks only. With
 * `kept`, the maxima of whole groups come from kept_amax[block index] (see
 * fp4_keep_maxima_range), which is only accessed through vector loads and
 * stores: it lies in the float output. */
LY_AVX2_INLINE void fp4_blocks(const fp4_job *job, int block, bool mx, bool backward,
                               ly_avx2_store store, bool kept, const int32_t *kept_amax,
                               int64_t begin, int64_t end)
{
    int64_t row = begin / job->blocks_per_row, blk = begin % job->blocks_per_row;
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + row * job->cols + blk * block);
    const int64_t group = 8 * block;
    for (int64_t b = begin; b < end;) {
        int64_t count = job->blocks_per_row - blk;
        if (count > end - b) count = end - b;
        int64_t start = row * job->cols + blk * block;
        /* Whole groups of eight whole blocks in this row. */
        int64_t groups = job->cols - blk * block >= count * block ? count / 8 : 0;
        if (groups > 0) {
            fp4_effs effs[2];
            fp4_effs8(job, mx, fp4_group_amax(job, block, kept, kept_amax, b, start), &effs[0]);
            for (int64_t g = 0; g < groups; g++, start += group) {
                if (g + 1 < groups)
                    fp4_effs8(
                        job, mx,
                        fp4_group_amax(job, block, kept, kept_amax, b + 8 * (g + 1), start + group),
                        &effs[(g + 1) & 1]);
                const fp4_effs *e = &effs[g & 1];
                if (e->usable)
                    fp4_apply8(block, mx, backward, store, &w, e, job->src + start,
                               job->out + start);
                else
                    fp4_chunk_put(job, block, store, &w, row, blk + g * 8, 8);
            }
            count = groups * 8;
        } else {
            if (count > 8) count = 8;
            fp4_chunk_put(job, block, store, &w, row, blk, (int)count);
        }
        b += count;
        blk += count;
        if (blk == job->blocks_per_row) {
            row++;
            blk = 0;
        }
    }
    ly_avx2_writer_end(&w, store, NULL, 0, _mm256_setzero_ps());
}

#define FP4_BLOCKS(block, mx, backward, kept, kept_amax, begin, end)                               \
    do {                                                                                           \
        if (job->store == LY_AVX2_NT)                                                              \
            fp4_blocks(job, block, mx, backward, LY_AVX2_NT, kept, kept_amax, begin, end);         \
        else if (job->store == LY_AVX2_NT_SHIFTED)                                                 \
            fp4_blocks(job, block, mx, backward, LY_AVX2_NT_SHIFTED, kept, kept_amax, begin, end); \
        else                                                                                       \
            fp4_blocks(job, block, mx, backward, LY_AVX2_CACHED, kept, kept_amax, begin, end);     \
    } while (0)

/* Only the backward streams (see fp4_run). */
static void fp4_range(void *ctx, int64_t begin, int64_t end)
{
    const fp4_job *job = ctx;
    if (job->mx && job->backward)
        FP4_BLOCKS(LY_MXFP4_BLOCK, true, true, false, NULL, begin, end);
    else if (job->mx)
        fp4_blocks(job, LY_MXFP4_BLOCK, true, false, LY_AVX2_CACHED, false, NULL, begin, end);
    else if (job->backward)
        FP4_BLOCKS(LY_NVFP4_BLOCK, false, true, false, NULL, begin, end);
    else
        fp4_blocks(job, LY_NVFP4_BLOCK, false, false, LY_AVX2_CACHED, false, NULL, begin, end);
}

/* ---- dynamic NVFP4: keeping the block maxima ----------------------------------------
 *
 * The tensor amax needs a whole pass over the input before any block can be
 * quantized. That pass is bound by memory, so it also computes the max|x| of
 * every block, which the second pass then need not recompute, and keeps them in
 * the output buffer: the maxima of a segment of FP4_SEGMENT blocks occupy the
 * last floats of the segment's own output. Block j of a segment of L blocks
 * writes floats [16j, 16j + 16), the maxima lie at [15L, 16L), so block j only
 * overwrites maxima of blocks up to j, which were read before. Threads work on
 * whole segments. Used when the rows hold whole blocks and the output overlaps
 * neither input. */
#define FP4_SEGMENT 4096

static void fp4_segment(const fp4_job *job, int64_t k, int64_t *b0, int64_t *b1, int32_t **kept)
{
    *b0 = k * FP4_SEGMENT;
    *b1 = *b0 + FP4_SEGMENT < job->blocks ? *b0 + FP4_SEGMENT : job->blocks;
    /* Indexed by block: kept[b] for b in [b0, b1) is float 15 * (b1 - b0) + (b - b0)
     * of the segment's output, which starts at float 16 * b0: output float 15 * b1 + b. */
    *kept = (int32_t *)(void *)(job->out + 15 * *b1);
}

static void fp4_keep_maxima_range(void *ctx, int64_t begin, int64_t end)
{
    const fp4_job *job = ctx;
    for (int64_t k = begin; k < end; k++) {
        int64_t b0, b1;
        int32_t *kept;
        fp4_segment(job, k, &b0, &b1, &kept);
        __m256i top = _mm256_setzero_si256();
        int64_t b = b0;
        for (; b + 8 <= b1; b += 8) {
            __m256i amax = fp4_maxima8(LY_NVFP4_BLOCK, job->x + b * LY_NVFP4_BLOCK);
            _mm256_storeu_si256((__m256i *)(void *)(kept + b), amax);
            top = _mm256_max_epi32(top, amax);
        }
        /* A last partial group goes through fp4_chunk, which needs no kept maxima. */
        int32_t segment_top = ly_avx2_hmax_epi32(top);
        int32_t rest = ly_avx2_amax_bits(job->x + b * LY_NVFP4_BLOCK, (b1 - b) * LY_NVFP4_BLOCK);
        job->segment_amax[k] = rest > segment_top ? rest : segment_top;
    }
}

static void fp4_kept_range(void *ctx, int64_t begin, int64_t end)
{
    const fp4_job *job = ctx;
    for (int64_t k = begin; k < end; k++) {
        int64_t b0, b1;
        int32_t *kept;
        fp4_segment(job, k, &b0, &b1, &kept);
        if (job->backward)
            FP4_BLOCKS(LY_NVFP4_BLOCK, false, true, true, kept, b0, b1);
        else
            fp4_blocks(job, LY_NVFP4_BLOCK, false, false, LY_AVX2_CACHED, true, kept, b0, b1);
    }
}

static bool fp4_disjoint(const float *a, const float *b, int64_t n)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b, bytes = (uintptr_t)n * sizeof(float);
    return pa + bytes <= pb || pb + bytes <= pa;
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
                   .backward = backward,
                   .store = LY_AVX2_CACHED};
    /* Rows that hold whole blocks are one long row of blocks, whose outputs come
     * as whole vectors and can be streamed. Only the backward streams: the forward
     * computes longer per element than memory takes to move it, and there ordinary
     * stores measure faster (and leave the output in the caches). */
    bool whole_blocks = job.cols % job.block == 0;
    if (whole_blocks) {
        job.cols = n;
        if (backward) job.store = ly_avx2_store_mode(out, n);
    }
    job.blocks_per_row = (job.cols + job.block - 1) / job.block;
    job.blocks = n / job.cols * job.blocks_per_row;

    if (mx) {
        pthread_once(&mx_once, mx_build_table);
        if (!mx_table_ok) return LY_E_DECLINED;
        ly_parallel_for(job.blocks, 64, threads, fp4_range, &job);
        return LY_OK;
    }
    int64_t segments = (job.blocks + FP4_SEGMENT - 1) / FP4_SEGMENT;
    bool keep =
        !tensor_amax && whole_blocks && fp4_disjoint(out, job.x, n) && fp4_disjoint(out, src, n);
    if (keep) {
        job.segment_amax = malloc((size_t)segments * sizeof(int32_t));
        if (!job.segment_amax)
            return ly_set_error(LY_E_NO_MEMORY, "fake_quant_nvfp4: out of memory");
        ly_parallel_for(segments, 1, threads, fp4_keep_maxima_range, &job);
    }
    float amax;
    if (tensor_amax) {
        amax = *tensor_amax;
    } else if (keep) {
        int32_t bits = 0;
        for (int64_t k = 0; k < segments; k++)
            bits = job.segment_amax[k] > bits ? job.segment_amax[k] : bits;
        free(job.segment_amax);
        if (bits > LY_AVX2_INF_BITS) bits = ly_avx2_last_nan_bits(job.x, n);
        amax = ly_avx2_bits_to_float(bits);
    } else {
        amax = ly_avx2_bits_to_float(ly_avx2_amax_exact_bits_parallel(job.x, n, threads));
    }
    job.tensor_scale = ly_nm_nvfp4_tensor_scale(amax);
    job.six_ts = 6.0f * job.tensor_scale;
    if (keep)
        ly_parallel_for(segments, 1, threads, fp4_kept_range, &job);
    else
        ly_parallel_for(job.blocks, 64, threads, fp4_range, &job);
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
