/* SPDX-License-Identifier: MIT */
/* Shared between the sdpa reference, its providers and its parity cases: the
 * validated call unpacked into plain numbers, and the scalar pieces whose exact
 * operation order every implementation must reproduce (include/libreyolo/sdpa.h). */
#ifndef LY_KERNELS_ATTENTION_SDPA_INTERNAL_H
#define LY_KERNELS_ATTENTION_SDPA_INTERNAL_H

#include "libreyolo/sdpa.h"
#include "ops/ops_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* One additive mask, as strides into its data (0 along broadcast dims). */
typedef struct ly_sdpa_mask {
    const void *data; /* NULL: absent */
    bool is_bool;     /* u8: non-zero adds 1.0f, zero adds 0.0f */
    int64_t sb, sh, sq, sk;
} ly_sdpa_mask;

/* Where the rows of an operand are: row i of head (b, h) starts at
 * b * batch + h * head + i * row elements (either layout). */
typedef struct ly_sdpa_strides {
    int64_t batch, head, row;
} ly_sdpa_strides;

typedef struct ly_sdpa_problem {
    int64_t B, H, Nq, Nk, d, dv;
    float scale;
    const float *q, *k, *v; /* never NULL (a static dummy for empty tensors) */
    float *out;
    ly_sdpa_strides qs, ks, vs, os;
    ly_sdpa_mask mask[2];
    int threads; /* resolved */
} ly_sdpa_problem;

/* Unpack a call that passed the slot's validation. */
void ly_sdpa_problem_init(const ly_kernel_call *call, ly_sdpa_problem *p);

/* The AVX2 provider (src/providers/avx2/sdpa_avx2.c); the reference is
 * ly_ref_sdpa (ops/ops_internal.h). */
ly_status ly_sdpa_avx2_fused(const ly_kernel_call *call);

/* Offset of head bh = b * H + h of an operand with strides s (its row 0). */
static inline int64_t ly_sdpa_head_at(const ly_sdpa_problem *p, const ly_sdpa_strides *s,
                                      int64_t bh)
{
    return bh / p->H * s->batch + bh % p->H * s->head;
}

/* Offset of row (b, h, i) of a mask; element j of it is at + j * sk. */
static inline int64_t ly_sdpa_mask_row(const ly_sdpa_mask *m, int64_t b, int64_t h, int64_t i)
{
    return b * m->sb + h * m->sh + i * m->sq;
}

static inline float ly_sdpa_mask_value(const ly_sdpa_mask *m, int64_t at)
{
    if (m->is_bool) return ((const uint8_t *)m->data)[at] ? 1.0f : 0.0f;
    return ((const float *)m->data)[at];
}

/* ---- exp: the constants both the scalar and the SIMD code use ------------------- */

#define LY_SDPA_EXP_MIN (-87.0f)
#define LY_SDPA_EXP_LOG2E 1.44269502162933349609375f /* 0x3FB8AA3B */
#define LY_SDPA_EXP_MAGIC 12582912.0f                /* 1.5 * 2^23: fmaf rounds to integer */
#define LY_SDPA_EXP_MAGIC_BITS 0x4B400000u
#define LY_SDPA_EXP_NLN2_HI (-0.693145751953125f)              /* -0x3F317200: n*hi is exact */
#define LY_SDPA_EXP_NLN2_LO (-1.428606765330187045037746e-06f) /* ln2 - hi */
/* exp(r) ~ 1 + r + C2 r^2 + ... + C6 r^6 on [-ln2/2, ln2/2] (a relative-error fit,
 * 3e-9 before fp32 rounding). */
#define LY_SDPA_EXP_C2 0.4999999403953552f
#define LY_SDPA_EXP_C3 0.1666652113199234f
#define LY_SDPA_EXP_C4 0.04166838899254799f
#define LY_SDPA_EXP_C5 0.008368710055947304f
#define LY_SDPA_EXP_C6 0.001381461275741458f

#define LY_SDPA_CANONICAL_NAN_BITS 0x7FC00000u

static inline float ly_sdpa_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline uint32_t ly_sdpa_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Domain: x <= 0 or NaN (softmax feeds s - max). The exponent is built with
 * unsigned arithmetic so a NaN input (garbage n) is still defined behaviour; the
 * NaN polynomial makes the result NaN anyway. */
static inline float ly_sdpa_expf_inline(float x)
{
    if (x < LY_SDPA_EXP_MIN) return 0.0f;
    float t = fmaf(x, LY_SDPA_EXP_LOG2E, LY_SDPA_EXP_MAGIC);
    float n = t - LY_SDPA_EXP_MAGIC;
    float r = fmaf(n, LY_SDPA_EXP_NLN2_HI, x);
    r = fmaf(n, LY_SDPA_EXP_NLN2_LO, r);
    float p = LY_SDPA_EXP_C6;
    p = fmaf(p, r, LY_SDPA_EXP_C5);
    p = fmaf(p, r, LY_SDPA_EXP_C4);
    p = fmaf(p, r, LY_SDPA_EXP_C3);
    p = fmaf(p, r, LY_SDPA_EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t e = (ly_sdpa_f32_bits(t) - LY_SDPA_EXP_MAGIC_BITS + 127u) << 23;
    return p * ly_sdpa_bits_f32(e);
}

/* a > b ? a : b, exactly what _mm256_max_ps(a, b) computes (NaN never wins over b). */
static inline float ly_sdpa_max(float a, float b)
{
    return a > b ? a : b;
}

/* The fixed reduction trees of the 8 lanes (the order AVX2 reduces a ymm in). */
static inline float ly_sdpa_lanes_max(const float l[8])
{
    float t0 = ly_sdpa_max(l[0], l[4]), t1 = ly_sdpa_max(l[1], l[5]);
    float t2 = ly_sdpa_max(l[2], l[6]), t3 = ly_sdpa_max(l[3], l[7]);
    return ly_sdpa_max(ly_sdpa_max(t0, t2), ly_sdpa_max(t1, t3));
}

static inline float ly_sdpa_lanes_sum(const float l[8])
{
    float t0 = l[0] + l[4], t1 = l[1] + l[5], t2 = l[2] + l[6], t3 = l[3] + l[7];
    return (t0 + t2) + (t1 + t3);
}

static inline float ly_sdpa_canonical(float x)
{
    return isnan(x) ? ly_sdpa_bits_f32(LY_SDPA_CANONICAL_NAN_BITS) : x;
}

#endif
