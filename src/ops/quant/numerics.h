/* SPDX-License-Identifier: MIT */
/*
 * Scalar element primitives of the quantization numerics.
 *
 * These define the numbers: the portable reference (src/ops/quant/reference.c) is
 * built from them, and accelerated providers use them for their tail loops so a
 * tail element can never differ from the reference. Each one reproduces
 * LibreYOLO's PyTorch reference literally; docs/numerics.md says why for each.
 *
 * Everything here is fp32 and must be compiled with -ffp-contract=off: a fused
 * multiply-add anywhere would change the last bit.
 */
#ifndef LY_QUANT_NUMERICS_H
#define LY_QUANT_NUMERICS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ---- Bits --------------------------------------------------------------------- */

static inline uint32_t ly_nm_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float ly_nm_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- Which NaN comes out ----------------------------------------------------------- */

/* When both operands of an x86 add or multiply are NaN, the result is the first source
 * operand's NaN, quieted. Both operations commute, so a compiler may swap the
 * operands, and gcc and clang do so differently. These helpers fix the choice in the
 * source instead: the NaN of `a` if it is one, else the NaN of `b`. They are used
 * wherever two NaNs can meet, with the operand order gcc chose when this reference
 * was first compiled, so the accelerated providers keep matching it. */
static inline float ly_nm_quiet(float nan)
{
    return ly_nm_bits_f32(ly_nm_f32_bits(nan) | 0x00400000u);
}

static inline float ly_nm_add_nan_first(float a, float b)
{
    if (a != a) return ly_nm_quiet(a);
    if (b != b) return ly_nm_quiet(b);
    return a + b;
}

static inline float ly_nm_mul_nan_first(float a, float b)
{
    if (a != a) return ly_nm_quiet(a);
    if (b != b) return ly_nm_quiet(b);
    return a * b;
}

/* ---- NaN-aware clamps and reductions (torch semantics) -------------------------- */

/* torch.clamp(v, min=lo): a NaN stays NaN (a comparison with NaN is false). */
static inline float ly_nm_clamp_min(float v, float lo)
{
    return v < lo ? lo : v;
}

/* torch.clamp(v, max=hi): a NaN stays NaN. */
static inline float ly_nm_clamp_max(float v, float hi)
{
    return v > hi ? hi : v;
}

/* torch.clamp(v, lo, hi): a NaN stays NaN. */
static inline float ly_nm_clamp(float v, float lo, float hi)
{
    return ly_nm_clamp_max(ly_nm_clamp_min(v, lo), hi);
}

/* One step of torch.amax(|x|): once a NaN is seen the running maximum stays NaN
 * (torch.amax propagates NaN). Start from 0.0f. */
static inline float ly_nm_amax_step(float running, float v)
{
    float a = fabsf(v);
    return (a > running || a != a) ? a : running;
}

/* torch.maximum(a, b): NaN if either is NaN. */
static inline float ly_nm_max_nan(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

/* ---- float -> integer conversions as x86 performs them ------------------------------ */

/* static_cast<int64_t>(float) as compiled for x86-64 (cvttss2si, 64-bit): truncate
 * toward zero; NaN, +-inf and anything outside [-2^63, 2^63) give the "integer
 * indefinite" INT64_MIN. This is what torch's fake-quantize kernels see for NaN and
 * inf, so the result is part of the oracle. Written without undefined behaviour. */
static inline int64_t ly_nm_f32_to_i64(float v)
{
    if (!(v >= -0x1p63f && v < 0x1p63f)) return INT64_MIN;
    return (int64_t)v;
}

/* The same for a 32-bit destination (cvttss2si, 32-bit): outside [-2^31, 2^31)
 * or NaN gives INT32_MIN. */
static inline int32_t ly_nm_f32_to_i32(float v)
{
    if (!(v >= -0x1p31f && v < 0x1p31f)) return INT32_MIN;
    return (int32_t)v;
}

/* ---- FP8 E4M3FN ------------------------------------------------------------------ */

/* fp32 -> E4M3FN code with integer operations only (independent of the MXCSR
 * rounding mode, FTZ and DAZ): round to nearest even, subnormals m*2^-9,
 * non-saturating like PyTorch's c10 cast: anything that rounds to >= 480
 * (|x| > 464), +-inf and NaN give 0x7F|sign; an underflow keeps its sign
 * (-tiny -> 0x80). */
static inline uint8_t ly_nm_fp32_to_e4m3(float x)
{
    uint32_t bits = ly_nm_f32_bits(x);
    uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
    uint32_t mag = bits & 0x7FFFFFFFu;

    if (mag >= 0x43F00000u) /* 480.0f; also catches inf and every NaN */
        return (uint8_t)(0x7Fu | sign);

    if (mag >= 0x3C800000u) { /* >= 2^-6: normal E4M3 */
        /* Rebias the exponent (127 -> 7) and round the 23-bit mantissa to 3 bits,
         * ties to even: add 0x7FFFF plus the lowest kept bit, then shift. A carry
         * into the exponent is the correct rounding up. */
        uint32_t rebased = mag - (120u << 23);
        uint32_t lsb = (rebased >> 20) & 1u;
        return (uint8_t)(((rebased + 0x7FFFFu + lsb) >> 20) | sign);
    }

    /* Subnormal E4M3: the code is |x| / 2^-9 rounded half to even, in [0, 8]
     * (8 is the smallest normal, which is the right code). */
    uint32_t exp_field = mag >> 23;
    if (exp_field == 0) /* fp32 zero or subnormal: far below 2^-10 */
        return sign;
    uint32_t significand = (mag & 0x7FFFFFu) | 0x800000u; /* value = sig * 2^(E-150) */
    uint32_t shift = 141u - exp_field;                     /* |x|/2^-9 = sig >> shift */
    if (shift >= 32u)
        return sign;
    uint32_t kept = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u))) kept++;
    return (uint8_t)(kept | sign);
}

/* E4M3FN code -> fp32, exact. 0x7F and 0xFF are the only NaNs (sign kept). */
static inline float ly_nm_e4m3_to_fp32(uint8_t code)
{
    uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    uint32_t exp_field = (code >> 3) & 0xFu;
    uint32_t mantissa = code & 0x7u;
    if (exp_field == 0xFu && mantissa == 0x7u) return ly_nm_bits_f32(sign | 0x7FC00000u);
    if (exp_field == 0) {
        /* m * 2^-9 is exact in fp32 */
        float v = (float)mantissa * 0x1p-9f;
        return sign ? -v : v;
    }
    return ly_nm_bits_f32(sign | ((exp_field + 120u) << 23) | (mantissa << 20));
}

/* quantize_e4m3(v) of the reference: clamp to [1e-12, 448] (a NaN stays NaN), then
 * the round trip through float8_e4m3fn. Used for NVFP4 block scales. */
static inline float ly_nm_quantize_e4m3(float v)
{
    return ly_nm_e4m3_to_fp32(ly_nm_fp32_to_e4m3(ly_nm_clamp(v, 1e-12f, 448.0f)));
}

/* ---- E2M1 (FP4) ---------------------------------------------------------------- */

/* Level of E2M1 magnitude index 0..7. */
static inline float ly_nm_e2m1_level(int index)
{
    static const float levels[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return levels[index & 7];
}

/* torch.bucketize(m, midpoints, right=False): the number of midpoints t with
 * !(t >= m), i.e. strictly less than m for a number, so ties go DOWN
 * (0.75 -> 0.5, 5 -> 4). torch's binary search moves right past every midpoint for
 * a NaN, giving 7. `m` is min(|y|, 6). */
static inline int ly_nm_e2m1_index(float m)
{
    if (m != m) return 7;
    return (m > 0.25f) + (m > 0.75f) + (m > 1.25f) + (m > 1.75f) + (m > 2.5f) + (m > 3.5f) +
           (m > 5.0f);
}

/* torch.sign: 0 for +-0 and (on CPU) for NaN; never -0. */
static inline float ly_nm_sign(float y)
{
    return (float)((0.0f < y) - (y < 0.0f));
}

/* The reference's straight-through estimator forward, literally `x + (q - x)` in
 * fp32. It equals q only when q - x is exact; x = 1e9, q = 6 gives 0 and +-inf gives
 * NaN, exactly as PyTorch computes it. A NaN result is the NaN of (q - x). */
static inline float ly_nm_ste(float x, float q)
{
    return ly_nm_add_nan_first(q - x, x);
}

/* fake_quant_e2m1(y): q = level[bucketize(min(|y|, 6))] * sign(y), returned through
 * the STE. A NaN input ends up NaN; a small negative y gives +0.0. */
static inline float ly_nm_fake_quant_e2m1(float y)
{
    float m = ly_nm_clamp_max(fabsf(y), 6.0f);
    float q = ly_nm_e2m1_level(ly_nm_e2m1_index(m)) * ly_nm_sign(y);
    return ly_nm_ste(y, q);
}

/* The packed 4-bit code of an already scaled value: sign (strictly negative, so
 * -0.0 and NaN store 0) in bit 3, magnitude index in bits 0..2. */
static inline uint8_t ly_nm_e2m1_code(float y)
{
    uint8_t sign = (y < 0.0f) ? 8u : 0u;
    return (uint8_t)(sign | ly_nm_e2m1_index(ly_nm_clamp_max(fabsf(y), 6.0f)));
}

/* Value of a packed 4-bit code: level * (+-1); code 8 gives -0.0. */
static inline float ly_nm_e2m1_decode(uint8_t code)
{
    float v = ly_nm_e2m1_level(code & 7);
    return (code & 8u) ? -v : v;
}

/* ---- NVFP4 scales ------------------------------------------------------------------ */

/* ts' = max(tensor_amax / 2688, 1e-12), 2688 = 448 * 6. NaN propagates. */
static inline float ly_nm_nvfp4_tensor_scale(float tensor_amax)
{
    return ly_nm_clamp_min(tensor_amax / 2688.0f, 1e-12f);
}

/* bs = quantize_e4m3(block_amax / (6 * ts')), the product formed first. */
static inline float ly_nm_nvfp4_block_scale(float block_amax, float tensor_scale)
{
    return ly_nm_quantize_e4m3(block_amax / (6.0f * tensor_scale));
}

/* eff = max(bs * ts', 1e-12); a NaN eff is bs's NaN when both are NaN. */
static inline float ly_nm_nvfp4_eff(float block_scale, float tensor_scale)
{
    return ly_nm_clamp_min(ly_nm_mul_nan_first(block_scale, tensor_scale), 1e-12f);
}

/* ---- MXFP4 scale -------------------------------------------------------------------- */

/* torch.log2 on fp32, taken as the correctly rounded fp32 log2. Just below a power
 * of two it rounds UP to the integer: log2(8 * (1 - 2^-24)) gives 3.0. */
static inline float ly_nm_log2f(float a)
{
    return (float)log2((double)a);
}

/* The shared exponent e = clamp(floor(log2(max(amax, 1e-30))) - 2, -127, 127).
 * Returns false for a NaN amax (the reference's e is then NaN). +inf gives 127. */
static inline bool ly_nm_mxfp4_exponent(float block_amax, int *exponent)
{
    float l = ly_nm_log2f(ly_nm_clamp_min(block_amax, 1e-30f));
    float e = ly_nm_clamp(floorf(l) - 2.0f, -127.0f, 127.0f);
    if (e != e) return false;
    *exponent = (int)e;
    return true;
}

/* eff = 2^e exactly (2^-127 is an fp32 subnormal, still exact); NaN amax -> NaN. */
static inline float ly_nm_mxfp4_eff(float block_amax)
{
    int e;
    if (!ly_nm_mxfp4_exponent(block_amax, &e)) return NAN;
    return ldexpf(1.0f, e);
}

/* ---- INT8 (torch.fake_quantize_per_{channel,tensor}_affine) ------------------------ */

/* The unclamped int64 code `static_cast<int64_t>(zp + nearbyint(x * inv))`: the
 * zero-point add is an fp32 add, the conversion precedes the clamp, and NaN/inf
 * give INT64_MIN (so they clamp to -128). */
static inline int64_t ly_nm_int8_code(float x, float inv, float zero_point)
{
    return ly_nm_f32_to_i64(zero_point + nearbyintf(x * inv));
}

static inline int64_t ly_nm_clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* The gradient mask of torch's fake-quantize backward: the unclamped code lies in
 * [-128, 127]. */
static inline bool ly_nm_int8_in_range(int64_t code)
{
    return code >= -128 && code <= 127;
}

#endif
