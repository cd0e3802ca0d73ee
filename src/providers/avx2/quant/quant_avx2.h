/* SPDX-License-Identifier: MIT */
/*
 * Shared 8-lane primitives of the AVX2 quant providers. Include only from
 * *_avx2.c files (they are the ones compiled with -mavx2 -mfma).
 *
 * Every primitive reproduces one scalar primitive of src/ops/quant/numerics.h bit for
 * bit: the same IEEE operations in the same order (an IEEE add, multiply, divide
 * or round gives the same bits in a vector lane as in a scalar register), and
 * integer formulations where the scalar code branches. Where NaN must survive a
 * min/max the NaN operand is passed second: vminps/vmaxps return the second
 * operand when either is NaN.
 */
#ifndef LY_KERNELS_QUANT_AVX2_H
#define LY_KERNELS_QUANT_AVX2_H

#include "core/core.h"
#include "libreyolo/quant.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Tensors below this many elements run on the calling thread: starting threads
 * costs more than the work. */
#define LY_AVX2_PARALLEL_MIN (1 << 16)

/* Threads for a call working on `numel` elements. */
static inline int ly_avx2_threads(const ly_kernel_call *call, int64_t numel)
{
    if (numel < LY_AVX2_PARALLEL_MIN) return 1;
    return ly_threads_resolve(call->threads);
}

/* The kernels' inner loops are instantiated per format and store mode: the
 * compiler must see the constant arguments to drop the untaken branches. */
#define LY_AVX2_INLINE static inline __attribute__((always_inline))

/* ---- loads and stores of partial vectors ----------------------------------- */

/* Lanes [0, n) set, n in [0, 8]. */
static inline __m256i ly_avx2_lane_mask(int64_t n)
{
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lanes);
}

/* The first n floats at p (n in [0, 8]); the other lanes read as +0. */
static inline __m256 ly_avx2_load_n(const float *p, int64_t n)
{
    if (n >= 8) return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, ly_avx2_lane_mask(n));
}

static inline void ly_avx2_store_n(float *p, int64_t n, __m256 v)
{
    if (n >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, ly_avx2_lane_mask(n), v);
}

/* ---- streaming (non-temporal) stores ------------------------------------------
 *
 * An output larger than the last-level cache would only evict the input from it,
 * and an ordinary store first reads the line it writes (a third memory stream).
 * Kernels bound by memory write outputs of at least this size with non-temporal
 * stores; smaller outputs stay in the caches, where the next op finds them.
 * Kernels that compute longer per element than memory takes to move it (fp8,
 * int grouped, the FP4 forwards) keep ordinary stores: there they measured
 * faster (1 thread, 64 MiB, the project's EPYC VM). Sanitized builds stream from
 * a much smaller size, so that the tests' tensors exercise both paths. */
#ifdef LY_SANITIZED
#define LY_AVX2_STREAM_MIN_BYTES ((int64_t)64 << 10)
#else
#define LY_AVX2_STREAM_MIN_BYTES ((int64_t)8 << 20)
#endif

static inline bool ly_avx2_streaming(int64_t out_numel)
{
    return out_numel * (int64_t)sizeof(float) >= LY_AVX2_STREAM_MIN_BYTES;
}

/* How a kernel instantiation stores its outputs. Streaming needs 16-byte
 * aligned outputs (every allocator gives that; a view at an odd offset takes
 * the cached path) and a kernel that produces whole vectors in memory order.
 * With a destination that is 16 but not 32-byte aligned, each aligned vector is
 * put together from the upper half of one result and the lower half of the next. */
typedef enum ly_avx2_store {
    LY_AVX2_CACHED,    /* ordinary stores */
    LY_AVX2_NT,        /* non-temporal, destination 32-byte aligned */
    LY_AVX2_NT_SHIFTED /* non-temporal, destination 16 mod 32 */
} ly_avx2_store;

/* The store mode for outputs starting at p, n floats in all, of a kernel whose
 * ranges start at multiples of 8 floats from p and write whole vectors. */
static inline ly_avx2_store ly_avx2_store_mode(const float *p, int64_t n)
{
    if (!ly_avx2_streaming(n) || ((uintptr_t)p & 15) != 0) return LY_AVX2_CACHED;
    return ((uintptr_t)p & 31) == 0 ? LY_AVX2_NT : LY_AVX2_NT_SHIFTED;
}

/* One range's outputs, in memory order. */
typedef struct ly_avx2_writer {
    float *at;    /* streaming: the next aligned destination */
    __m256 carry; /* NT_SHIFTED: the last vector, whose upper half is not written yet */
    bool started;
} ly_avx2_writer;

LY_AVX2_INLINE void ly_avx2_writer_begin(ly_avx2_writer *w, ly_avx2_store mode, float *p)
{
    w->at = p;
    w->carry = _mm256_setzero_ps();
    w->started = mode != LY_AVX2_NT_SHIFTED;
}

/* The eight outputs at p (p: where they go, which streaming modes know already). */
LY_AVX2_INLINE void ly_avx2_put(ly_avx2_writer *w, ly_avx2_store mode, float *p, __m256 v)
{
    if (mode == LY_AVX2_CACHED) {
        _mm256_storeu_ps(p, v);
    } else if (mode == LY_AVX2_NT) {
        _mm256_stream_ps(w->at, v);
        w->at += 8;
    } else if (w->started) {
        _mm256_stream_ps(w->at, _mm256_permute2f128_ps(w->carry, v, 0x21));
        w->at += 8;
        w->carry = v;
    } else {
        _mm_stream_ps(w->at, _mm256_castps256_ps128(v));
        w->at += 4;
        w->carry = v;
        w->started = true;
    }
}

/* Writes what is pending; then the last n < 8 outputs at p, if any, with an
 * ordinary store; and orders the non-temporal stores before whatever the caller
 * does next (another thread reads the output after joining this one). */
LY_AVX2_INLINE void ly_avx2_writer_end(ly_avx2_writer *w, ly_avx2_store mode, float *p, int64_t n,
                                       __m256 v)
{
    if (mode == LY_AVX2_NT_SHIFTED && w->started)
        _mm_stream_ps(w->at, _mm256_extractf128_ps(w->carry, 1));
    if (n > 0) ly_avx2_store_n(p, n, v);
    if (mode != LY_AVX2_CACHED) _mm_sfence();
}

/* ---- NaN-propagating |x| maximum -------------------------------------------
 *
 * |x| as an int32 orders like the float for every non-negative value, and every
 * NaN (exponent all ones, mantissa non-zero) compares above +inf. A signed
 * integer max of |x| bits is therefore a NaN-propagating max that, unlike
 * vmaxps, does not depend on operand order: the result is the same whatever
 * the order of reduction, so any split across threads gives the same bits. */
static inline __m256i ly_avx2_abs_bits(__m256 v)
{
    return _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
}

static inline int32_t ly_avx2_hmax_epi32(__m256i v)
{
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(m);
}

/* Lane j of the result = the maximum over the lanes of v[j]. */
static inline __m256i ly_avx2_hmax8_epi32(const __m256i v[8])
{
    __m256i p01 =
        _mm256_max_epi32(_mm256_unpacklo_epi32(v[0], v[1]), _mm256_unpackhi_epi32(v[0], v[1]));
    __m256i p23 =
        _mm256_max_epi32(_mm256_unpacklo_epi32(v[2], v[3]), _mm256_unpackhi_epi32(v[2], v[3]));
    __m256i p45 =
        _mm256_max_epi32(_mm256_unpacklo_epi32(v[4], v[5]), _mm256_unpackhi_epi32(v[4], v[5]));
    __m256i p67 =
        _mm256_max_epi32(_mm256_unpacklo_epi32(v[6], v[7]), _mm256_unpackhi_epi32(v[6], v[7]));
    __m256i q0 = _mm256_max_epi32(_mm256_unpacklo_epi64(p01, p23), _mm256_unpackhi_epi64(p01, p23));
    __m256i q1 = _mm256_max_epi32(_mm256_unpacklo_epi64(p45, p67), _mm256_unpackhi_epi64(p45, p67));
    return _mm256_max_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                            _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* max|x| bits over n floats (n >= 0; 0 for n == 0). */
static inline int32_t ly_avx2_amax_bits(const float *x, int64_t n)
{
    __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_epi32(m0, ly_avx2_abs_bits(_mm256_loadu_ps(x + i)));
        m1 = _mm256_max_epi32(m1, ly_avx2_abs_bits(_mm256_loadu_ps(x + i + 8)));
        m2 = _mm256_max_epi32(m2, ly_avx2_abs_bits(_mm256_loadu_ps(x + i + 16)));
        m3 = _mm256_max_epi32(m3, ly_avx2_abs_bits(_mm256_loadu_ps(x + i + 24)));
    }
    for (; i < n; i += 8)
        m0 = _mm256_max_epi32(m0, ly_avx2_abs_bits(ly_avx2_load_n(x + i, n - i)));
    m0 = _mm256_max_epi32(_mm256_max_epi32(m0, m1), _mm256_max_epi32(m2, m3));
    return ly_avx2_hmax_epi32(m0);
}

static inline float ly_avx2_bits_to_float(int32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#define LY_AVX2_INF_BITS 0x7F800000

/* The reference's running amax (ly_nm_amax_step) ends on |last NaN| when there is
 * one; the integer max ends on the largest NaN. They differ only in the NaN
 * payload, which is then carried into every output, so after a reduction found
 * a NaN the last one is looked up: |x| bits of the last NaN among n floats. */
static inline int32_t ly_avx2_last_nan_bits(const float *x, int64_t n)
{
    for (int64_t i = n; i > 0;) {
        int64_t start = i >= 8 ? i - 8 : 0;
        __m256 v = ly_avx2_load_n(x + start, i - start);
        int found = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        if (found) {
            int lane = 31 - __builtin_clz((unsigned)found);
            int32_t bits;
            memcpy(&bits, x + start + lane, sizeof bits);
            return bits & 0x7FFFFFFF;
        }
        i = start;
    }
    return LY_AVX2_INF_BITS + 1; /* unreachable when called after a NaN was seen */
}

/* max|x| over n floats as the reference computes it (bits of the float). */
static inline int32_t ly_avx2_amax_exact_bits(const float *x, int64_t n)
{
    int32_t bits = ly_avx2_amax_bits(x, n);
    return bits > LY_AVX2_INF_BITS ? ly_avx2_last_nan_bits(x, n) : bits;
}

/* The same over a whole tensor, split over threads in fixed chunks: the integer
 * max does not depend on the split, so neither does the result. */
typedef struct ly_avx2_amax_job {
    const float *x;
    int64_t n, chunk;
    int32_t part[64];
} ly_avx2_amax_job;

static inline void ly_avx2_amax_range(void *ctx, int64_t begin, int64_t end)
{
    ly_avx2_amax_job *job = ctx;
    for (int64_t k = begin; k < end; k++) {
        int64_t start = k * job->chunk;
        int64_t len = job->n - start < job->chunk ? job->n - start : job->chunk;
        job->part[k] = ly_avx2_amax_bits(job->x + start, len);
    }
}

static inline int32_t ly_avx2_amax_exact_bits_parallel(const float *x, int64_t n, int threads)
{
    if (threads <= 1 || n < LY_AVX2_PARALLEL_MIN) return ly_avx2_amax_exact_bits(x, n);
    ly_avx2_amax_job job = {.x = x, .n = n};
    int64_t chunks = threads < 64 ? threads : 64;
    job.chunk = (n + chunks - 1) / chunks;
    chunks = (n + job.chunk - 1) / job.chunk;
    ly_parallel_for(chunks, 1, threads, ly_avx2_amax_range, &job);
    int32_t bits = 0;
    for (int64_t k = 0; k < chunks; k++)
        bits = job.part[k] > bits ? job.part[k] : bits;
    return bits > LY_AVX2_INF_BITS ? ly_avx2_last_nan_bits(x, n) : bits;
}

/* ---- E4M3 ----------------------------------------------------------------- */

/* fp32 -> E4M3FN code in the low byte of each lane (numerics.md 1.3: integer
 * only, RNE by add-half-plus-lsb on the fp32 word for normals, a
 * round-half-even shift of the significand for subnormals, non-saturating:
 * anything above 464 in magnitude, inf and NaN give 0x7F | sign). */
static inline __m256i ly_avx2_e4m3_encode(__m256 x)
{
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i sign = _mm256_srli_epi32(_mm256_andnot_si256(abs, bits), 24);
    const __m256i one = _mm256_set1_epi32(1);

    /* Normal E4M3 (|x| >= 2^-6): round at bit 20, rebias 127 -> 7. */
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(abs, 20), one);
    __m256i rounded = _mm256_add_epi32(abs, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), lsb));
    __m256i normal = _mm256_sub_epi32(_mm256_srli_epi32(rounded, 20), _mm256_set1_epi32(0x3C0));

    /* Subnormal E4M3: code = RNE(|x| * 2^9) = significand >> (141 - exponent);
     * shifts past 31 give 0, exactly what such tiny values round to. */
    __m256i exponent = _mm256_srli_epi32(abs, 23);
    __m256i significand = _mm256_or_si256(_mm256_and_si256(abs, _mm256_set1_epi32(0x7FFFFF)),
                                          _mm256_set1_epi32(0x800000));
    __m256i shift =
        _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(141), exponent), _mm256_set1_epi32(31));
    __m256i quotient = _mm256_srlv_epi32(significand, shift);
    __m256i remainder = _mm256_sub_epi32(significand, _mm256_sllv_epi32(quotient, shift));
    __m256i half = _mm256_srlv_epi32(_mm256_sllv_epi32(one, shift), one);
    __m256i round_up =
        _mm256_or_si256(_mm256_cmpgt_epi32(remainder, half),
                        _mm256_and_si256(_mm256_cmpeq_epi32(remainder, half),
                                         _mm256_cmpeq_epi32(_mm256_and_si256(quotient, one), one)));
    __m256i subnormal = _mm256_sub_epi32(quotient, round_up);

    __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3C800000), abs);
    __m256i code = _mm256_blendv_epi8(normal, subnormal, is_subnormal);
    __m256i overflow = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x43E80000)); /* > 464 */
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7F), overflow);
    return _mm256_or_si256(code, sign);
}

/* E4M3FN codes (low byte of each lane, upper bits zero) -> fp32, exact.
 * 0x7F / 0xFF decode to the NaN of ly_e4m3_to_fp32 (0x7FC00000 | sign). */
static inline __m256 ly_avx2_e4m3_decode(__m256i code)
{
    const __m256i magnitude = _mm256_and_si256(code, _mm256_set1_epi32(0x7F));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(0x80)), 24);
    /* Normal: exponent and mantissa move up by 20 bits, rebias 7 -> 127. */
    __m256i normal =
        _mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), _mm256_set1_epi32(120 << 23));
    /* Subnormal (exponent field 0): mantissa * 2^-9, exact in fp32. */
    __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_set1_ps(1.0f / 512.0f));
    __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), magnitude);
    __m256i value = _mm256_blendv_epi8(normal, _mm256_castps_si256(subnormal), is_subnormal);
    __m256i is_nan = _mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7F));
    value = _mm256_blendv_epi8(value, _mm256_set1_epi32(0x7FC00000), is_nan);
    return _mm256_castsi256_ps(_mm256_or_si256(value, sign));
}

/* fp32(e4m3(x)), the round trip, for |x| <= 448 or NaN (every caller clamps first), in
 * fewer operations: for normals, rounding the fp32 word at bit 20 IS the decoded
 * value (the code's bits shifted back); for subnormals the value is
 * RNE(|x| * 2^9) * 2^-9, both products exact (powers of two) and the rounding
 * explicit, so neither depends on MXCSR. NaN gives 0x7FC00000 | sign. */
static inline __m256 ly_avx2_e4m3_round_clamped(__m256 x)
{
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    __m256 abs = _mm256_andnot_ps(sign_mask, x);
    __m256i bits = _mm256_castps_si256(abs);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 20), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), lsb));
    __m256 normal =
        _mm256_castsi256_ps(_mm256_and_si256(rounded, _mm256_set1_epi32((int)0xFFF00000u)));
    __m256 subnormal = _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(abs, _mm256_set1_ps(512.0f)),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm256_set1_ps(1.0f / 512.0f));
    __m256 value = _mm256_blendv_ps(normal, subnormal,
                                    _mm256_cmp_ps(abs, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ));
    value = _mm256_blendv_ps(value, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
                             _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_or_ps(value, _mm256_and_ps(x, sign_mask));
}

/* ---- E2M1 ----------------------------------------------------------------- */

/* fake_quant_e2m1(y) = y + (q - y), q = level[bucketize(min(|y|, 6))] * sign(y),
 * bucketize counting the midpoints strictly below |y| (ties go down).
 * From 1 to 6 the levels 1, 1.5, 2, 3, 4, 6 are the fp32 values with one
 * mantissa bit, and the midpoints lie exactly halfway: adding half a step minus
 * one unit to the word and truncating rounds half down. Below 1 the levels are
 * 0, 0.5, 1 and two compares pick them. A NaN y gets q = 6 (never a NaN, so
 * q - y carries y's own NaN, as in the reference, whose q is 6 * sign(NaN) = 0).
 * The sign of a zero q never shows: y + (q - y) is +0 for y = +-0 and -y + y
 * otherwise.
 *
 * The magnitude is handled as an integer: |y| bits order like the floats, with
 * every NaN above +inf, so the integer min with 6 maps NaN to 6 like the float
 * min does, and the compares need no NaN care (a NaN takes the min path). Integer
 * operations run on every vector pipe, float compares and min on only some, and
 * the division of the callers already loads those. */
static inline __m256 ly_avx2_e2m1_ste(__m256 y)
{
    const __m256i sign_mask = _mm256_set1_epi32((int)0x80000000u);
    const __m256i bits = _mm256_castps_si256(y);
    const __m256i a = _mm256_andnot_si256(sign_mask, bits);
    const __m256i m = _mm256_min_epi32(a, _mm256_set1_epi32(0x40C00000)); /* 6.0f */
    const __m256i big = _mm256_and_si256(_mm256_add_epi32(m, _mm256_set1_epi32(0x1FFFFF)),
                                         _mm256_set1_epi32((int)0xFFC00000u));
    /* 0.5f = 0x3F000000 above 0.25, plus one exponent step (to 1.0f) above 0.75. */
    const __m256i small =
        _mm256_add_epi32(_mm256_and_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3E800000)),
                                          _mm256_set1_epi32(0x3F000000)),
                         _mm256_and_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3F400000)),
                                          _mm256_set1_epi32(0x00800000)));
    const __m256i at_least_one = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3F7FFFFF));
    __m256i q = _mm256_blendv_epi8(small, big, at_least_one);
    q = _mm256_or_si256(q, _mm256_and_si256(bits, sign_mask));
    return _mm256_add_ps(y, _mm256_sub_ps(_mm256_castsi256_ps(q), y));
}

/* The same where |y| <= 12 and y is not NaN: q - y is then exact (Sterbenz: q and
 * y have the same sign and q / 2 <= |y| <= 2q for every nonzero level q), so
 * y + (q - y) is q itself, or +0 where q is zero. The sign goes into the integer
 * forms directly: the rounding of `big` works on signed words (the magnitude
 * never carries into the sign bit), and `small` takes it only when nonzero. */
static inline __m256 ly_avx2_e2m1_tame(__m256 y)
{
    const __m256i bits = _mm256_castps_si256(y);
    const __m256i sign = _mm256_and_si256(bits, _mm256_set1_epi32((int)0x80000000u));
    const __m256i a = _mm256_xor_si256(bits, sign);
    const __m256i m = _mm256_or_si256(_mm256_min_epi32(a, _mm256_set1_epi32(0x40C00000)), sign);
    const __m256i big = _mm256_and_si256(_mm256_add_epi32(m, _mm256_set1_epi32(0x1FFFFF)),
                                         _mm256_set1_epi32((int)0xFFC00000u));
    const __m256i small =
        _mm256_add_epi32(_mm256_and_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3E800000)),
                                          _mm256_or_si256(sign, _mm256_set1_epi32(0x3F000000))),
                         _mm256_and_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3F400000)),
                                          _mm256_set1_epi32(0x00800000)));
    const __m256i at_least_one = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3F7FFFFF));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(small, big, at_least_one));
}

/* ---- NaN payloads of commutative operations ----------------------------------
 *
 * When both operands of an add or multiply are NaN, x86 returns the first
 * source operand's NaN, but a compiler may commute the operands, so which NaN
 * (sign and payload) comes out of the reference depends on its compiled code.
 * The kernels pin the choice that the gcc-compiled reference makes, operation
 * by operation, with this select: `result`, unless `first` is NaN, then first
 * (quieted, as the hardware would). */
static inline __m256 ly_avx2_nan_first(__m256 result, __m256 first)
{
    __m256 quiet = _mm256_or_ps(first, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)));
    return _mm256_blendv_ps(result, quiet, _mm256_cmp_ps(first, first, _CMP_UNORD_Q));
}

/* The STE's final add `x + (q - x)`, compiled by gcc as (q - x) + x. */
static inline __m256 ly_avx2_ste(__m256 x, __m256 q)
{
    __m256 d = _mm256_sub_ps(q, x);
    return ly_avx2_nan_first(_mm256_add_ps(d, x), d);
}

/* ---- rounding to integers ---------------------------------------------------- */

static inline __m256 ly_avx2_rint(__m256 x)
{
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* clamp((int64)r, -128, 127) for an integral-valued r, as x86 converts: NaN and
 * |r| >= 2^63 give INT64_MIN, which clamps to -128. Returned as a float. */
static inline __m256 ly_avx2_int8_code(__m256 r)
{
    __m256 code = _mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-128.0f), r));
    __m256 int64_min = _mm256_cmp_ps(r, _mm256_set1_ps(9223372036854775808.0f), _CMP_NLT_UQ);
    return _mm256_blendv_ps(code, _mm256_set1_ps(-128.0f), int64_min);
}

/* The backward mask: (int64)r lies in [-128, 127] (false for NaN). */
static inline __m256 ly_avx2_int8_in_range(__m256 r)
{
    return _mm256_and_ps(_mm256_cmp_ps(r, _mm256_set1_ps(-128.0f), _CMP_GE_OQ),
                         _mm256_cmp_ps(r, _mm256_set1_ps(127.0f), _CMP_LE_OQ));
}

#include "providers/avx2/quant/quant_providers.h"

#endif
