/* SPDX-License-Identifier: MIT */
/*
 * The arithmetic of the CUDA ms_deform_attn provider, written in the common
 * subset of C17 and CUDA C++ so that it compiles two ways:
 *  - by nvcc, into the device code of libreyolo_kernels_cuda.so;
 *  - by the C compiler, into tests/test_cuda_kernels.c, which runs every
 *    "thread" on the CPU and compares the bits with the portable reference. That
 *    is how the kernels are checked on a machine without a GPU.
 * It mirrors src/ops/msda/msda_internal.h and reference.c
 * operation by operation. Under nvcc every product, sum and FMA is an explicit
 * round-to-nearest intrinsic, so nvcc can neither contract nor reorder it; in
 * C the same operations are plain IEEE ones (the project builds with
 * -ffp-contract=off) and fmaf.
 *
 * Each *_at function is one GPU thread, `idx` its global index.
 */
#ifndef LY_PLUGINS_CUDA_MSDA_CUDA_KERNELS_H
#define LY_PLUGINS_CUDA_MSDA_CUDA_KERNELS_H

#include "libreyolo/kernels.h"
#include "libreyolo/msda.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define MSDA_DEVICE __device__ __forceinline__
#define MSDA_RESTRICT __restrict__
#define MSDA_UNROLL _Pragma("unroll")
#else
#define MSDA_DEVICE static inline
#define MSDA_RESTRICT restrict
#define MSDA_UNROLL
#define __fmaf_rn(a, b, c) fmaf((a), (b), (c))
#define __fmul_rn(a, b) ((a) * (b))
#define __fadd_rn(a, b) ((a) + (b))
#define __fsub_rn(a, b) ((a) - (b))
#endif

/* ---- The call's geometry (as ly_msda_geom_init computes it) ------------------ */

typedef struct msda_geometry {
    long long B, len_in, heads, channels, queries, levels, points; /* points: sum over levels */
    long long level_h[LY_MSDA_MAX_LEVELS], level_w[LY_MSDA_MAX_LEVELS];
    long long level_start[LY_MSDA_MAX_LEVELS];
    long long level_points[LY_MSDA_MAX_LEVELS], level_offset[LY_MSDA_MAX_LEVELS];
    float size_w[LY_MSDA_MAX_LEVELS], size_h[LY_MSDA_MAX_LEVELS];   /* size, exact */
    float half_w[LY_MSDA_MAX_LEVELS], half_h[LY_MSDA_MAX_LEVELS];   /* 0.5f * size, exact */
    float max_col[LY_MSDA_MAX_LEVELS], max_row[LY_MSDA_MAX_LEVELS]; /* size - 1, exact */
    int mode;
} msda_geometry;

static inline bool msda_extents_positive(const ly_tensor *t, int ndim)
{
    if (!t || !t->data || t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] <= 0) return false;
    return true;
}

static inline bool msda_same_shape(const ly_tensor *a, const ly_tensor *b)
{
    if (!a || !b || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* NULL when the provider computes the call; else why not (host code; reads the
 * spatial shapes and point counts). The registry has validated the operands
 * against the slot's contract; this re-checks what the kernels rely on. */
static inline const char *msda_read_geometry(const ly_kernel_call *call, bool backward,
                                             msda_geometry *g)
{
    const int base = backward ? 1 : 0;
    const ly_tensor *value = call->in[base], *shapes = call->in[base + 1],
                    *loc = call->in[base + 2], *attn = call->in[base + 3],
                    *npts = call->in[backward ? 5 : 4];
    const char *outside = "operands outside the contract (the reference reports them)";
    if (!value || !shapes || !loc || !attn || !call->out[0]) return "an operand is missing";
    const ly_tensor *floats[7] = {value,
                                  loc,
                                  attn,
                                  call->out[0],
                                  backward ? call->in[0] : value,
                                  backward ? call->out[1] : value,
                                  backward ? call->out[2] : value};
    for (int i = 0; i < 7; i++)
        if (!floats[i] || floats[i]->dtype != LY_F32)
            return "cuda computes f32 value, locations and weights only";
    if (shapes->dtype != LY_I64 || (npts && npts->dtype != LY_I64))
        return "cuda takes i64 spatial_shapes and num_points only";
    const ly_ms_deform_attn_params *params = (const ly_ms_deform_attn_params *)call->params;
    if (!params || (params->mode != LY_MSDA_BILINEAR && params->mode != LY_MSDA_DISCRETE))
        return outside;
    if (!msda_extents_positive(value, 4)) return "empty tensors are left to the reference";
    if (shapes->ndim != 2 || shapes->shape[1] != 2 || shapes->shape[0] < 1 ||
        shapes->shape[0] > LY_MSDA_MAX_LEVELS)
        return outside;
    g->B = value->shape[0];
    g->len_in = value->shape[1];
    g->heads = value->shape[2];
    g->channels = value->shape[3];
    g->levels = shapes->shape[0];
    g->mode = (int)params->mode;
    const int64_t *hw = (const int64_t *)shapes->data;
    const int64_t *np = npts ? (const int64_t *)npts->data : NULL;
    if (!msda_extents_positive(loc, npts ? 5 : 6) || !msda_extents_positive(attn, npts ? 4 : 5))
        return "empty tensors are left to the reference";
    if (npts && (npts->ndim != 1 || npts->shape[0] != g->levels)) return outside;
    long long start = 0, points = 0;
    for (int l = 0; l < g->levels; l++) {
        const long long h = hw[2 * l], w = hw[2 * l + 1];
        if (h < 1 || w < 1 || h > (1 << 24) || w > (1 << 24)) return outside;
        g->level_h[l] = h;
        g->level_w[l] = w;
        g->level_start[l] = start;
        start += h * w;
        g->level_points[l] = np ? np[l] : loc->shape[4];
        if (g->level_points[l] < 0 || g->level_points[l] > (1 << 20)) return outside;
        g->level_offset[l] = points;
        points += g->level_points[l];
        g->size_w[l] = (float)w;
        g->size_h[l] = (float)h;
        g->half_w[l] = 0.5f * g->size_w[l];
        g->half_h[l] = 0.5f * g->size_h[l];
        g->max_col[l] = (float)(w - 1);
        g->max_row[l] = (float)(h - 1);
    }
    if (start != g->len_in) return outside;
    g->points = points;
    g->queries = loc->shape[1];
    const bool loc_ok = loc->shape[0] == g->B && loc->shape[2] == g->heads &&
                        (npts ? loc->shape[3] == points && loc->shape[4] == 2
                              : loc->shape[3] == g->levels && loc->shape[5] == 2);
    const bool attn_ok = attn->shape[0] == g->B && attn->shape[1] == g->queries &&
                         attn->shape[2] == g->heads &&
                         (npts ? attn->shape[3] == points
                               : attn->shape[3] == g->levels && attn->shape[4] == loc->shape[4]);
    if (!loc_ok || !attn_ok) return outside;
    const ly_tensor *rows = backward ? call->in[0] : call->out[0]; /* [B, Lq, H*C] */
    if (rows->ndim != 3 || rows->shape[0] != g->B || rows->shape[1] != g->queries ||
        rows->shape[2] != g->heads * g->channels)
        return outside;
    if (backward && (!msda_same_shape(call->out[0], value) || !msda_same_shape(call->out[1], loc) ||
                     !msda_same_shape(call->out[2], attn)))
        return outside;
    return NULL;
}

/* ---- The reference's arithmetic, operation by operation ------------------------ */

MSDA_DEVICE float msda_canon(float v)
{
    uint32_t bits = 0x7FC00000u;
    float nan;
    memcpy(&nan, &bits, sizeof nan);
    return v != v ? nan : v;
}

typedef struct msda_sample {
    float w[4]; /* (y0,x0), (y0,x0+1), (y0+1,x0), (y0+1,x0+1) */
    float lx, ly, hx, hy;
    long long off[4]; /* element offset of the corner's channel 0 in the batch's value block */
} msda_sample;

/* ly_msda_bilinear: corners are tested in float, before any conversion. */
MSDA_DEVICE void msda_bilinear(const msda_geometry *g, int l, long long h, float loc_x, float loc_y,
                               msda_sample *s)
{
    const float gx = __fsub_rn(__fmul_rn(2.0f, loc_x), 1.0f);
    const float gy = __fsub_rn(__fmul_rn(2.0f, loc_y), 1.0f);
    const float x = __fmaf_rn(__fadd_rn(gx, 1.0f), g->half_w[l], -0.5f);
    const float y = __fmaf_rn(__fadd_rn(gy, 1.0f), g->half_h[l], -0.5f);
    const float x0 = floorf(x), y0 = floorf(y);
    const float lx = __fsub_rn(x, x0), ly = __fsub_rn(y, y0);
    const float hx = __fsub_rn(1.0f, lx), hy = __fsub_rn(1.0f, ly);
    s->lx = lx;
    s->ly = ly;
    s->hx = hx;
    s->hy = hy;
    s->w[0] = __fmul_rn(hy, hx);
    s->w[1] = __fmul_rn(hy, lx);
    s->w[2] = __fmul_rn(ly, hx);
    s->w[3] = __fmul_rn(ly, lx);
    const float max_col = g->max_col[l], max_row = g->max_row[l];
    const bool c0 = x0 >= 0.0f && x0 <= max_col, c1 = x0 >= -1.0f && x0 <= max_col - 1.0f;
    const bool r0 = y0 >= 0.0f && y0 <= max_row, r1 = y0 >= -1.0f && y0 <= max_row - 1.0f;
    const long long col = (c0 || c1) ? (long long)x0 : 0, row = (r0 || r1) ? (long long)y0 : 0;
    const long long W = g->level_w[l], HC = g->heads * g->channels;
    const long long base = (g->level_start[l] + row * W + col) * HC + h * g->channels;
    s->off[0] = r0 && c0 ? base : -1;
    s->off[1] = r0 && c1 ? base + HC : -1;
    s->off[2] = r1 && c0 ? base + W * HC : -1;
    s->off[3] = r1 && c1 ? base + (W + 1) * HC : -1;
}

/* ly_msda_nearest: int64(loc*scale + 0.5), clamped to [0, last] in float. */
MSDA_DEVICE long long msda_nearest(float loc, float scale, long long last)
{
    const float t = __fadd_rn(__fmul_rn(loc, scale), 0.5f);
    if (!(t >= 1.0f)) return 0;
    if (t >= (float)(last + 1)) return last;
    return (long long)t;
}

/* ly_msda_discrete_offset: both coordinates clamped to [0, H_l - 1] as
 * LibreYOLO does, x also to [0, W_l - 1]. */
MSDA_DEVICE long long msda_discrete_offset(const msda_geometry *g, int l, long long h, float loc_x,
                                           float loc_y)
{
    const long long last_col =
        (g->level_h[l] < g->level_w[l] ? g->level_h[l] : g->level_w[l]) - 1;
    const long long ix = msda_nearest(loc_x, g->size_w[l], last_col);
    const long long iy = msda_nearest(loc_y, g->size_h[l], g->level_h[l] - 1);
    return ((g->level_start[l] + iy * g->level_w[l] + ix) * g->heads + h) * g->channels;
}

MSDA_DEVICE float msda_tree8(const float p[8])
{
    return __fadd_rn(__fadd_rn(__fadd_rn(p[0], p[4]), __fadd_rn(p[2], p[6])),
                     __fadd_rn(__fadd_rn(p[1], p[5]), __fadd_rn(p[3], p[7])));
}

MSDA_DEVICE float msda_interpolate(const float v[4], const msda_sample *s)
{
    return __fmaf_rn(v[3], s->w[3],
                     __fmaf_rn(v[2], s->w[2], __fmaf_rn(v[1], s->w[1], __fmul_rn(v[0], s->w[0]))));
}

MSDA_DEVICE void msda_corners(const float *vb, const msda_sample *s, long long c, float v[4])
{
    for (int i = 0; i < 4; i++)
        v[i] = s->off[i] >= 0 ? vb[s->off[i] + c] : 0.0f;
}

/* ---- The threads ---------------------------------------------------------------- */

/* Forward: output element idx = ((b*Lq + q)*H + h)*C + c, levels then points. */
MSDA_DEVICE void msda_forward_at(long long idx, const float *MSDA_RESTRICT value,
                                 const float *MSDA_RESTRICT loc, const float *MSDA_RESTRICT attn,
                                 float *MSDA_RESTRICT out, const msda_geometry *g)
{
    const long long c = idx % g->channels;
    const long long row = idx / g->channels; /* (b*Lq + q)*H + h */
    const long long h = row % g->heads;
    const long long b = row / (g->heads * g->queries);
    const float *vb = value + b * g->len_in * g->heads * g->channels;
    const float *lp = loc + row * g->points * 2;
    const float *ap = attn + row * g->points;
    float acc = 0.0f;
    long long k = 0;
    for (int l = 0; l < g->levels; l++)
        for (long long p = 0; p < g->level_points[l]; p++, k++) {
            const float a = ap[k];
            if (g->mode == LY_MSDA_DISCRETE) {
                const long long off = msda_discrete_offset(g, l, h, lp[2 * k], lp[2 * k + 1]);
                acc = __fmaf_rn(a, vb[off + c], acc);
                continue;
            }
            msda_sample s;
            msda_bilinear(g, l, h, lp[2 * k], lp[2 * k + 1], &s);
            float v[4];
            msda_corners(vb, &s, c, v);
            acc = __fmaf_rn(a, msda_interpolate(v, &s), acc);
        }
    out[idx] = msda_canon(acc);
}

/* The value gradient of one (b, h, c), idx = (b*H + h)*C + c: every query,
 * level and point in the reference's order. grad_value starts zeroed and is
 * canonicalised afterwards (msda_canon_at). */
MSDA_DEVICE void msda_grad_value_at(long long idx, const float *MSDA_RESTRICT grad_out,
                                    const float *MSDA_RESTRICT loc, const float *MSDA_RESTRICT attn,
                                    float *MSDA_RESTRICT grad_value, const msda_geometry *g)
{
    const long long c = idx % g->channels;
    const long long h = (idx / g->channels) % g->heads;
    const long long b = idx / (g->channels * g->heads);
    float *gvb = grad_value + b * g->len_in * g->heads * g->channels;
    for (long long q = 0; q < g->queries; q++) {
        const long long row = (b * g->queries + q) * g->heads + h;
        const float go = grad_out[row * g->channels + c];
        const float *lp = loc + row * g->points * 2;
        const float *ap = attn + row * g->points;
        long long k = 0;
        for (int l = 0; l < g->levels; l++)
            for (long long p = 0; p < g->level_points[l]; p++, k++) {
                const float a = ap[k];
                if (g->mode == LY_MSDA_DISCRETE) {
                    const long long off = msda_discrete_offset(g, l, h, lp[2 * k], lp[2 * k + 1]);
                    gvb[off + c] = __fadd_rn(gvb[off + c], __fmul_rn(go, a));
                    continue;
                }
                msda_sample s;
                msda_bilinear(g, l, h, lp[2 * k], lp[2 * k + 1], &s);
                const float tg = __fmul_rn(go, a);
                for (int i = 0; i < 4; i++)
                    if (s.off[i] >= 0) gvb[s.off[i] + c] = __fmaf_rn(s.w[i], tg, gvb[s.off[i] + c]);
            }
    }
}

/* The location and weight gradients of sample idx = ((b*Lq + q)*H + h)*K + k:
 * channels into 8 lane sums (c mod 8), folded by the reference's tree. */
MSDA_DEVICE void msda_grad_sample_at(long long idx, const float *MSDA_RESTRICT grad_out,
                                     const float *MSDA_RESTRICT value,
                                     const float *MSDA_RESTRICT loc,
                                     const float *MSDA_RESTRICT attn, float *MSDA_RESTRICT grad_loc,
                                     float *MSDA_RESTRICT grad_attn, const msda_geometry *g)
{
    const long long k = idx % g->points;
    const long long row = idx / g->points; /* (b*Lq + q)*H + h */
    const long long h = row % g->heads;
    const long long b = row / (g->heads * g->queries);
    /* The last level starting at or before k (a level without points starts
     * where the next one does, so it is passed over). */
    int l = 0;
    while (l + 1 < g->levels && k >= g->level_offset[l + 1])
        l++;
    const float *vb = value + b * g->len_in * g->heads * g->channels;
    const float *go = grad_out + row * g->channels;
    const float a = attn[idx];
    const float loc_x = loc[2 * idx], loc_y = loc[2 * idx + 1];
    float pa[8] = {0}, px[8] = {0}, py[8] = {0};
    /* Channels in groups of 8, lane t = c mod 8: the same order as a loop over
     * c, with lane indices the compiler knows (the sums stay in registers). */
    if (g->mode == LY_MSDA_DISCRETE) {
        const long long off = msda_discrete_offset(g, l, h, loc_x, loc_y);
        for (long long c8 = 0; c8 < g->channels; c8 += 8) {
            MSDA_UNROLL
            for (int t = 0; t < 8; t++) {
                const long long c = c8 + t;
                if (c < g->channels) pa[t] = __fmaf_rn(go[c], vb[off + c], pa[t]);
            }
        }
        grad_attn[idx] = msda_canon(msda_tree8(pa));
        grad_loc[2 * idx] = 0.0f;
        grad_loc[2 * idx + 1] = 0.0f;
        return;
    }
    msda_sample s;
    msda_bilinear(g, l, h, loc_x, loc_y, &s);
    for (long long c8 = 0; c8 < g->channels; c8 += 8) {
        MSDA_UNROLL
        for (int t = 0; t < 8; t++) {
            const long long c = c8 + t;
            if (c >= g->channels) continue;
            float v[4];
            msda_corners(vb, &s, c, v);
            const float val = msda_interpolate(v, &s);
            const float dx =
                __fmaf_rn(s.ly, __fsub_rn(v[3], v[2]), __fmul_rn(s.hy, __fsub_rn(v[1], v[0])));
            const float dy =
                __fmaf_rn(s.lx, __fsub_rn(v[3], v[1]), __fmul_rn(s.hx, __fsub_rn(v[2], v[0])));
            pa[t] = __fmaf_rn(go[c], val, pa[t]);
            px[t] = __fmaf_rn(go[c], dx, px[t]);
            py[t] = __fmaf_rn(go[c], dy, py[t]);
        }
    }
    grad_attn[idx] = msda_canon(msda_tree8(pa));
    grad_loc[2 * idx] = msda_canon(__fmul_rn(__fmul_rn(msda_tree8(px), a), g->size_w[l]));
    grad_loc[2 * idx + 1] = msda_canon(__fmul_rn(__fmul_rn(msda_tree8(py), a), g->size_h[l]));
}

MSDA_DEVICE void msda_canon_at(long long idx, float *p)
{
    p[idx] = msda_canon(p[idx]);
}

#endif
