/* SPDX-License-Identifier: MIT */
/*
 * Shared by the ms_deform_attn reference, the AVX2 provider and the parity
 * cases: the geometry of a validated call and the per-sample arithmetic.
 *
 * The sample arithmetic is inline so that each translation unit (baseline ISA
 * for the reference, -mavx2 -mfma for the provider) compiles the very same
 * IEEE operations: every step is one correctly rounded operation (fmaf where
 * the numbers want a fused multiply-add, never a contraction: the whole
 * project builds with -ffp-contract=off), so the bits cannot depend on the ISA.
 * docs/attention.md states the order in words.
 */
#ifndef LY_KERNELS_ATTENTION_MSDA_INTERNAL_H
#define LY_KERNELS_ATTENTION_MSDA_INTERNAL_H

#include "libreyolo/msda.h"
#include "ops/ops_internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* What a validated call describes. Pointers are the call's operands; `grad_out`
 * is NULL for the forward. */
typedef struct ly_msda_geom {
    int64_t B, len_in, H, C, Lq, L;
    int64_t K; /* sampling points per (b, q, h): sum over levels of points[l] */
    int mode;
    int64_t lvl_h[LY_MSDA_MAX_LEVELS], lvl_w[LY_MSDA_MAX_LEVELS];
    int64_t lvl_start[LY_MSDA_MAX_LEVELS];  /* first position of the level in value */
    int64_t lvl_points[LY_MSDA_MAX_LEVELS]; /* points of the level */
    float half_w[LY_MSDA_MAX_LEVELS], half_h[LY_MSDA_MAX_LEVELS];   /* 0.5f * size, exact */
    float max_col[LY_MSDA_MAX_LEVELS], max_row[LY_MSDA_MAX_LEVELS]; /* size - 1, exact */
    float size_w[LY_MSDA_MAX_LEVELS], size_h[LY_MSDA_MAX_LEVELS];   /* size, exact */
    const float *value, *loc, *attn, *grad_out;
} ly_msda_geom;

/* Fill `g` from a call the slot's contract accepted (never fails). */
void ly_msda_geom_init(const ly_kernel_call *call, bool backward, ly_msda_geom *g);

/* The AVX2 provider (src/providers/avx2/msda_avx2.c); the references are
 * ly_ref_ms_deform_attn{,_backward} (ops/ops_internal.h). */
ly_status ly_msda_avx2_forward(const ly_kernel_call *call);
ly_status ly_msda_avx2_backward(const ly_kernel_call *call);

/* The canonical NaN every NaN result is written as: payloads and signs of NaN
 * depend on operand order inside an FMA instruction, which a compiler chooses. */
#define LY_MSDA_NAN_BITS 0x7FC00000u

static inline float ly_msda_nan(void)
{
    uint32_t u = LY_MSDA_NAN_BITS;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float ly_msda_canon(float v)
{
    return v != v ? ly_msda_nan() : v;
}

/* One bilinear sample: the four corner weights, the fractional parts (the
 * backward needs them) and the element offsets (relative to the batch's value
 * block) of the corners' channel 0, -1 for a corner outside the level. */
typedef struct ly_msda_sample {
    float w[4]; /* (y0,x0), (y0,x0+1), (y0+1,x0), (y0+1,x0+1) */
    float lx, ly, hx, hy;
    int64_t off[4];
} ly_msda_sample;

/* grid_sample's unnormalisation, align_corners=False, with the grid formed as
 * every family forms it: g = 2*loc - 1 (one rounding: 2*loc is exact), then
 * (g + 1) rounded, then fma(g + 1, size/2, -0.5). Corners are tested in float,
 * before any conversion, so no coordinate (NaN, inf, 1e30) is ever converted
 * out of range. */
static inline void ly_msda_bilinear(const ly_msda_geom *g, int64_t l, int64_t h, float loc_x,
                                    float loc_y, ly_msda_sample *s)
{
    float gx = 2.0f * loc_x - 1.0f, gy = 2.0f * loc_y - 1.0f;
    float x = fmaf(gx + 1.0f, g->half_w[l], -0.5f);
    float y = fmaf(gy + 1.0f, g->half_h[l], -0.5f);
    float x0 = floorf(x), y0 = floorf(y);
    float lx = x - x0, ly = y - y0;
    float hx = 1.0f - lx, hy = 1.0f - ly;
    s->lx = lx;
    s->ly = ly;
    s->hx = hx;
    s->hy = hy;
    s->w[0] = hy * hx;
    s->w[1] = hy * lx;
    s->w[2] = ly * hx;
    s->w[3] = ly * lx;
    float max_col = g->max_col[l], max_row = g->max_row[l];
    bool c0 = x0 >= 0.0f && x0 <= max_col, c1 = x0 >= -1.0f && x0 <= max_col - 1.0f;
    bool r0 = y0 >= 0.0f && y0 <= max_row, r1 = y0 >= -1.0f && y0 <= max_row - 1.0f;
    int64_t col = (c0 || c1) ? (int64_t)x0 : 0, row = (r0 || r1) ? (int64_t)y0 : 0;
    int64_t W = g->lvl_w[l], HC = g->H * g->C;
    int64_t base = (g->lvl_start[l] + row * W + col) * HC + h * g->C;
    s->off[0] = r0 && c0 ? base : -1;
    s->off[1] = r0 && c1 ? base + HC : -1;
    s->off[2] = r1 && c0 ? base + W * HC : -1;
    s->off[3] = r1 && c1 ? base + (W + 1) * HC : -1;
}

/* Discrete sampling's index: int64(loc*scale + 0.5) (two roundings, then
 * truncation toward zero), clamped to [0, last]. The clamp happens in float
 * (last + 1 <= 2^24 is exact), so NaN (and anything below 1) gives 0 and
 * anything at or above last + 1 gives last, without an out-of-range
 * conversion. */
static inline int64_t ly_msda_nearest(float loc, float scale, int64_t last)
{
    float t = loc * scale + 0.5f;
    if (!(t >= 1.0f)) return 0;
    if (t >= (float)(last + 1)) return last;
    return (int64_t)t;
}

/* The last column discrete sampling reaches on level l. LibreYOLO clamps both
 * coordinates to [0, H_l - 1] (one clamp(0, h - 1) in the deformable DETRs'
 * discrete core), so on a level wider than high x stops at H_l - 1; on one
 * higher than wide it stops at W_l - 1 too, where LibreYOLO would index past
 * the row and fail. */
static inline int64_t ly_msda_discrete_last_col(const ly_msda_geom *g, int64_t l)
{
    return (g->lvl_h[l] < g->lvl_w[l] ? g->lvl_h[l] : g->lvl_w[l]) - 1;
}

static inline int64_t ly_msda_discrete_offset(const ly_msda_geom *g, int64_t l, int64_t h,
                                              float loc_x, float loc_y)
{
    int64_t ix = ly_msda_nearest(loc_x, g->size_w[l], ly_msda_discrete_last_col(g, l));
    int64_t iy = ly_msda_nearest(loc_y, g->size_h[l], g->lvl_h[l] - 1);
    return ((g->lvl_start[l] + iy * g->lvl_w[l] + ix) * g->H + h) * g->C;
}

/* The fixed tree that ends every channel reduction: lane partial sums p[t]
 * (t = c mod 8) combined as an AVX 256 -> 128 -> 64 -> 32 fold does. */
static inline float ly_msda_tree8(const float p[8])
{
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

/* ---- grid_sample: shared by its reference and the AVX2 provider ------------- */

/* ATen's grid_sampler_compute_source_index with zeros padding: the grid
 * coordinate in [-1, 1] as a position in pixels, one rounded operation a step. */
static inline float ly_grid_source_index(float coord, int64_t size, bool align_corners)
{
    if (align_corners) return ((coord + 1.0f) / 2.0f) * (float)(size - 1);
    return ((coord + 1.0f) * (float)size - 1.0f) / 2.0f;
}

/* Whether a position floors to a pixel index an int64 holds (NaN and inf do
 * not: their samples read nothing, as ATen's out-of-range corners). */
static inline bool ly_grid_index_ok(float v)
{
    return v >= -0x1p62f && v <= 0x1p62f;
}

static inline bool ly_grid_within(int64_t y, int64_t x, int64_t h, int64_t w)
{
    return y >= 0 && y < h && x >= 0 && x < w;
}

/* What one grid point reads of an [H, W] plane: bilinear, its corners in
 * bounds in the order nw, ne, sw, se with their weights, summed as
 * acc = acc + v * w from 0; nearest (n == -1), the value at off[0] as it is;
 * nothing (n == 0): 0. */
typedef struct ly_grid_taps {
    int n;
    int64_t off[4];
    float w[4];
} ly_grid_taps;

static inline void ly_grid_taps_of(const float *xy, int64_t H, int64_t W, bool align_corners,
                                   bool nearest, ly_grid_taps *t)
{
    float ix = ly_grid_source_index(xy[0], W, align_corners);
    float iy = ly_grid_source_index(xy[1], H, align_corners);
    t->n = 0;
    if (!ly_grid_index_ok(ix) || !ly_grid_index_ok(iy)) return;
    if (nearest) {
        int64_t col = (int64_t)nearbyintf(ix), row = (int64_t)nearbyintf(iy);
        if (ly_grid_within(row, col, H, W)) {
            t->n = -1;
            t->off[0] = row * W + col;
        }
        return;
    }
    int64_t x0 = (int64_t)floorf(ix), y0 = (int64_t)floorf(iy), x1 = x0 + 1, y1 = y0 + 1;
    const int64_t ys[4] = {y0, y0, y1, y1}, xs[4] = {x0, x1, x0, x1};
    const float w[4] = {((float)x1 - ix) * ((float)y1 - iy), (ix - (float)x0) * ((float)y1 - iy),
                        ((float)x1 - ix) * (iy - (float)y0), (ix - (float)x0) * (iy - (float)y0)};
    for (int k = 0; k < 4; k++)
        if (ly_grid_within(ys[k], xs[k], H, W)) {
            t->off[t->n] = ys[k] * W + xs[k];
            t->w[t->n++] = w[k];
        }
}

/* The AVX2 provider of grid_sample (src/providers/avx2/grid_sample_avx2.c). */
ly_status ly_grid_sample_avx2(const ly_kernel_call *call);

#endif
