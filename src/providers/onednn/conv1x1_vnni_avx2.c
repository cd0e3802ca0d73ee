/* SPDX-License-Identifier: MIT */
/*
 * conv2d_int8's 1x1 convolutions on AVX-512 VNNI without oneDNN: the integer
 * sums and the copy back in one pass. A band's pixels are a run of u8
 * channels-last codes (quantized for the band); each vpdpbusd adds four
 * channels' products into sixteen outputs of a pixel, which is one vector of
 * the graph's 16-channel blocks (two halves of its 8-channel ones). The sums
 * go through the epilogue in registers (scales and bias, activation,
 * post-affine, residual, an activation after) straight into the graph's
 * layout: no f32 channels-last rows written and read back, and no oneDNN call
 * per band (the int8 LibreYOLO9t's 1x1s on 40x40 and 20x20 maps spent more in
 * those than in their sums).
 *
 * Numbers: the sums are exact in int32 (as oneDNN's VNNI kernels'); the
 * zero point leaves through a per-output compensation, zp * sum of the
 * output's weights, exact too; then (sum + bias / scale) * scale in f32 as
 * oneDNN's int8 kernels take a bias, or sum * scale + bias where the quotient
 * is not finite. The epilogue is the copy back's (ly_activate16, the same
 * order of operations).
 */
#include "providers/onednn/conv1x1_vnni.h"

#include "core/core.h"
#include "providers/avx2/exp_avx2.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define LY_VNNI __attribute__((target("avx512f,avx512vnni")))

/* Pixels a step, by output blocks of 16 a step: accumulators in registers. */
enum { MAX_BLOCKS = 4 };

void ly_vnni_1x1_free(ly_vnni_1x1 *k)
{
    if (!k) return;
    free(k->weights);
    free(k->compensation);
    free(k->scales);
    free(k->bias);
    free(k);
}

ly_vnni_1x1 *ly_vnni_1x1_pack(const int8_t *codes, int64_t o, int64_t c, int32_t zero_point_u8,
                              const float *scales, const float *bias, bool bias_in_sum)
{
    ly_vnni_1x1 *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->o = o;
    k->c = c;
    k->quads = (c + 3) / 4;
    k->blocks = (o + 15) / 16;
    k->bias_in_sum = bias_in_sum;
    size_t lanes = (size_t)k->blocks * 16;
    k->weights = aligned_alloc(64, (size_t)k->blocks * (size_t)k->quads * 64);
    k->compensation = aligned_alloc(64, lanes * sizeof *k->compensation);
    k->scales = aligned_alloc(64, lanes * sizeof *k->scales);
    k->bias = aligned_alloc(64, lanes * sizeof *k->bias);
    if (!k->weights || !k->compensation || !k->scales || !k->bias) {
        ly_vnni_1x1_free(k);
        return NULL;
    }
    /* [block][quad][16 outputs][4 channels]: one vector per block and quad */
    memset(k->weights, 0, (size_t)k->blocks * (size_t)k->quads * 64);
    for (int64_t oc = 0; oc < o; oc++) {
        int32_t sum = 0;
        for (int64_t ic = 0; ic < c; ic++) {
            int8_t w = codes[oc * c + ic];
            sum += w;
            k->weights[((oc / 16) * k->quads + ic / 4) * 64 + (oc % 16) * 4 + ic % 4] = w;
        }
        k->compensation[oc] = zero_point_u8 * sum;
    }
    for (size_t i = 0; i < lanes; i++) {
        bool live = (int64_t)i < o;
        if (i >= (size_t)o) k->compensation[i] = 0;
        k->scales[i] = live ? scales[i] : 0.0f;
        k->bias[i] = live && bias ? bias[i] : 0.0f;
    }
    return k;
}

/* The epilogue of one vector of sixteen outputs of a pixel (ly_onednn_epilogue). */
LY_VNNI static inline __attribute__((always_inline)) __m512
finish(const ly_vnni_1x1 *k, __m512i sum, int64_t block, const ly_onednn_epilogue *e,
       int64_t activation, int64_t after, const __m512 *residual)
{
    __m512i exact = _mm512_sub_epi32(sum, _mm512_load_si512(k->compensation + block * 16));
    __m512 scale = _mm512_load_ps(k->scales + block * 16);
    __m512 bias = _mm512_load_ps(k->bias + block * 16);
    __m512 v = _mm512_cvtepi32_ps(exact);
    v = k->bias_in_sum ? _mm512_mul_ps(_mm512_add_ps(v, bias), scale)
                       : _mm512_add_ps(_mm512_mul_ps(v, scale), bias);
    v = ly_activate16(v, activation, e->alpha);
    if (e->post_affine)
        v = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(e->post_scale)),
                          _mm512_set1_ps(e->post_shift));
    if (residual) v = _mm512_add_ps(v, *residual);
    return ly_activate16(v, after, 0.0f);
}

/* Pixels [p, p + N) by output blocks [b0, b0 + NB): the sums, then each
 * vector through the epilogue into the layout (blocks of `block` = 16 or 8
 * channels, `plane` floats apart). */
LY_VNNI static inline __attribute__((always_inline)) void
tile(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p, int64_t b0, const int N, const int NB,
     float *out, const float *residual, int64_t plane, int block, const ly_onednn_epilogue *e,
     int64_t activation, int64_t after)
{
    __m512i acc[16][MAX_BLOCKS];
    /* fully unrolled: the accumulators stay in registers */
#pragma GCC unroll 16
    for (int i = 0; i < N; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NB; j++)
            acc[i][j] = _mm512_setzero_si512();
    const int8_t *w = k->weights + b0 * k->quads * 64;
    for (int64_t q = 0; q < k->quads; q++) {
        __m512i wv[MAX_BLOCKS];
#pragma GCC unroll 4
        for (int j = 0; j < NB; j++)
            wv[j] = _mm512_load_si512(w + (j * k->quads + q) * 64);
#pragma GCC unroll 16
        for (int i = 0; i < N; i++) {
            int32_t four;
            memcpy(&four, x + (p + i) * k->c + q * 4, sizeof four);
            __m512i bx = _mm512_set1_epi32(four);
#pragma GCC unroll 4
            for (int j = 0; j < NB; j++)
                acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], bx, wv[j]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < N; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NB; j++) {
            int64_t b = b0 + j, px = p + i;
            int64_t live = k->o - b * 16 < 16 ? k->o - b * 16 : 16; /* 8 or 16 */
            __m512 r = _mm512_setzero_ps();
            float *dst0, *dst1 = NULL;
            if (block == 16) {
                dst0 = out + b * plane + px * 16;
            } else {
                dst0 = out + (2 * b) * plane + px * 8;
                if (live == 16) dst1 = out + (2 * b + 1) * plane + px * 8;
            }
            if (residual) {
                const float *r0 = residual + (dst0 - out);
                if (block == 16)
                    r = _mm512_loadu_ps(r0);
                else
                    r = _mm512_castpd_ps(_mm512_insertf64x4(
                        _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(r0))),
                        _mm256_castps_pd(dst1 ? _mm256_loadu_ps(residual + (dst1 - out))
                                              : _mm256_setzero_ps()),
                        1));
            }
            __m512 v = finish(k, acc[i][j], b, e, activation, after, residual ? &r : NULL);
            if (block == 16) {
                _mm512_storeu_ps(dst0, v);
            } else {
                _mm256_storeu_ps(dst0, _mm512_castps512_ps256(v));
                if (dst1)
                    _mm256_storeu_ps(
                        dst1, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            }
        }
}

/* Pixels [p0, p1) by output blocks [b0, b0 + NB), N pixels a step, then the
 * rest one by one. */
LY_VNNI static inline __attribute__((always_inline)) void
blocks_of(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1, int64_t b0, const int N,
          const int NB, float *out, const float *residual, int64_t plane, int block,
          const ly_onednn_epilogue *e, int64_t activation, int64_t after)
{
    int64_t p = p0;
    for (; p + N <= p1; p += N)
        tile(k, x, p, b0, N, NB, out, residual, plane, block, e, activation, after);
    for (; p < p1; p++)
        tile(k, x, p, b0, 1, NB, out, residual, plane, block, e, activation, after);
}

/* Every block of outputs, up to MAX_BLOCKS at once: 24 accumulators at most. */
LY_VNNI static inline __attribute__((always_inline)) void
rows(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1, float *out,
     const float *residual, int64_t plane, int block, const ly_onednn_epilogue *e,
     int64_t activation, int64_t after)
{
    for (int64_t b0 = 0; b0 < k->blocks;) {
        int64_t left = k->blocks - b0;
        if (left >= 4) {
            blocks_of(k, x, p0, p1, b0, 6, 4, out, residual, plane, block, e, activation, after);
            b0 += 4;
        } else if (left == 3) {
            blocks_of(k, x, p0, p1, b0, 8, 3, out, residual, plane, block, e, activation, after);
            b0 += 3;
        } else if (left == 2) {
            blocks_of(k, x, p0, p1, b0, 12, 2, out, residual, plane, block, e, activation, after);
            b0 += 2;
        } else {
            blocks_of(k, x, p0, p1, b0, 16, 1, out, residual, plane, block, e, activation, after);
            b0 += 1;
        }
    }
}

bool ly_vnni_1x1_supported(int64_t o, int block, const ly_onednn_epilogue *e)
{
    const ly_cpu_features *cpu = ly_cpu();
    bool known = (e->activation == LY_ACT_NONE || e->activation == LY_ACT_SILU ||
                  e->activation == LY_ACT_SIGMOID || e->activation == LY_ACT_RELU ||
                  e->activation == LY_ACT_LEAKY_RELU) &&
                 (e->after == LY_ACT_NONE || e->after == LY_ACT_SILU || e->after == LY_ACT_SIGMOID);
    return cpu->avx512f && cpu->avx512_vnni && known &&
           ((block == 16 && o % 16 == 0) || (block == 8 && o % 8 == 0));
}

LY_VNNI static void run_silu(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1,
                             float *out, const float *residual, int64_t plane, int block,
                             const ly_onednn_epilogue *e)
{
    rows(k, x, p0, p1, out, residual, plane, block, e, LY_ACT_SILU, LY_ACT_NONE);
}

LY_VNNI static void run_after_silu(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1,
                                   float *out, const float *residual, int64_t plane, int block,
                                   const ly_onednn_epilogue *e)
{
    rows(k, x, p0, p1, out, residual, plane, block, e, LY_ACT_NONE, LY_ACT_SILU);
}

LY_VNNI static void run_any(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1,
                            float *out, const float *residual, int64_t plane, int block,
                            const ly_onednn_epilogue *e)
{
    rows(k, x, p0, p1, out, residual, plane, block, e, e->activation, e->after);
}

void ly_vnni_1x1_run(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1, float *out,
                     const float *residual, int64_t plane, int block, const ly_onednn_epilogue *e)
{
    if (e->activation == LY_ACT_SILU && e->after == LY_ACT_NONE)
        run_silu(k, x, p0, p1, out, residual, plane, block, e);
    else if (e->activation == LY_ACT_NONE && e->after == LY_ACT_SILU)
        run_after_silu(k, x, p0, p1, out, residual, plane, block, e);
    else
        run_any(k, x, p0, p1, out, residual, plane, block, e);
}
