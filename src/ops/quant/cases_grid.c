/* SPDX-License-Identifier: MIT */
/*
 * The quant cases' grid family (quant_cases.h): weight shapes of the target
 * models, odd sizes, tails and degenerate extents x value distributions x each
 * op's operand variants. A case is first a small spec (kind, shape,
 * distribution, variant), so the family is counted and named without building
 * anything; materialize() then turns a spec into tensors.
 */
#include "ops/quant/quant_cases.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Value tables ------------------------------------------------------------ */

#define MAX_TABLE 1024

typedef struct value_tables {
    float edge[MAX_TABLE]; /* everything nasty, NaN and inf included */
    int n_edge;
    float finite[MAX_TABLE]; /* the finite part of `edge` */
    int n_finite;
    float e2m1[64]; /* E2M1 levels, midpoints and their neighbours */
    int n_e2m1;
    float e4m3[512]; /* E4M3 midpoints and their neighbours */
    int n_e4m3;
    float ties[300]; /* integer rounding ties j + 0.5 */
    int n_ties;
    float bad_scales[32]; /* frozen scales nobody should pass, but someone will */
    int n_bad_scales;
} value_tables;

static void push(float *table, int *n, int cap, float v)
{
    if (*n < cap) table[(*n)++] = v;
}

static void push_neighbours(float *table, int *n, int cap, float v)
{
    push(table, n, cap, nextafterf(v, -INFINITY));
    push(table, n, cap, v);
    push(table, n, cap, nextafterf(v, INFINITY));
}

static void build_tables(value_tables *t)
{
    memset(t, 0, sizeof *t);
    static const float e2m1_levels[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    static const float e2m1_mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (size_t i = 0; i < sizeof e2m1_levels / sizeof e2m1_levels[0]; i++)
        push(t->e2m1, &t->n_e2m1, 64, e2m1_levels[i]);
    for (size_t i = 0; i < sizeof e2m1_mids / sizeof e2m1_mids[0]; i++)
        push_neighbours(t->e2m1, &t->n_e2m1, 64, e2m1_mids[i]);

    for (unsigned c = 0; c < 0x7E; c++)
        push_neighbours(t->e4m3, &t->n_e4m3, 512,
                        (ly_quant_e4m3_value(c) + ly_quant_e4m3_value(c + 1)) * 0.5f);
    push_neighbours(t->e4m3, &t->n_e4m3, 512, 448.0f);
    push_neighbours(t->e4m3, &t->n_e4m3, 512, 464.0f);
    push_neighbours(t->e4m3, &t->n_e4m3, 512, 480.0f);

    for (int j = -130; j <= 129; j++)
        push(t->ties, &t->n_ties, 300, (float)j + 0.5f);

    static const uint32_t special_bits[] = {
        0x7FC00000u, 0xFFC00000u, 0x7FC12345u, 0xFF812345u, 0x7F800001u, /* NaN payloads */
        0x7F800000u, 0xFF800000u,                                        /* +-inf */
    };
    for (size_t i = 0; i < sizeof special_bits / sizeof special_bits[0]; i++)
        push(t->edge, &t->n_edge, MAX_TABLE, ly_nm_bits_f32(special_bits[i]));

    float *f = t->finite;
    int *nf = &t->n_finite;
    static const uint32_t finite_bits[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u,
        0x007FFFFFu, 0x807FFFFFu, 0x00400000u, 0x00000007u, /* +-0 and subnormals */
    };
    for (size_t i = 0; i < sizeof finite_bits / sizeof finite_bits[0]; i++)
        push(f, nf, MAX_TABLE, ly_nm_bits_f32(finite_bits[i]));
    static const float finite_values[] = {
        FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 1e9f,     -1e9f,   3e20f,   -1e30f,    0x1p127f,
        1e38f,   1e-12f,   -1e-12f, 0x1p-9f,  0x1p-10f, 127.5f,  -128.5f, 128.5f,    -127.5f,
        126.5f,  7.5f,     -8.5f,   1.5f,     -2.5f,    2688.0f, 1e-30f,  0x1p-102f,
    };
    for (size_t i = 0; i < sizeof finite_values / sizeof finite_values[0]; i++)
        push(f, nf, MAX_TABLE, finite_values[i]);
    /* Just below powers of two: fp32 log2 rounds some of these up (MXFP4). */
    static const float powers[] = {1.0f, 2.0f, 4.0f, 8.0f, 0.125f, 128.0f, 0x1p-100f, 0x1p100f};
    for (size_t i = 0; i < sizeof powers / sizeof powers[0]; i++) {
        float below = nextafterf(powers[i], 0.0f);
        push(f, nf, MAX_TABLE, powers[i]);
        push(f, nf, MAX_TABLE, below);
        push(f, nf, MAX_TABLE, nextafterf(below, 0.0f));
    }
    static const float e2m1_scales[] = {1.0f, 0.125f, 32.0f};
    for (size_t s = 0; s < sizeof e2m1_scales / sizeof e2m1_scales[0]; s++)
        for (int i = 0; i < t->n_e2m1; i++)
            push(f, nf, MAX_TABLE, t->e2m1[i] * e2m1_scales[s]);
    for (int i = 0; i < t->n_e4m3; i++)
        push(f, nf, MAX_TABLE, t->e4m3[i]);
    for (int i = 0; i < *nf; i++)
        push(t->edge, &t->n_edge, MAX_TABLE, f[i]);

    static const uint32_t bad_bits[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x7FC00000u,
                                        0xFFC00000u, 0x7F800000u, 0xFF800000u};
    for (size_t i = 0; i < sizeof bad_bits / sizeof bad_bits[0]; i++)
        push(t->bad_scales, &t->n_bad_scales, 32, ly_nm_bits_f32(bad_bits[i]));
    static const float bad_values[] = {-1.0f, -0.5f,   1e-30f,  1e-13f, 1e-12f,  FLT_MIN,
                                       1e30f, FLT_MAX, 0.0625f, 3.0f,   0x1p-20f};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++)
        push(t->bad_scales, &t->n_bad_scales, 32, bad_values[i]);
}

/* ---- Distributions ------------------------------------------------------------ */

typedef enum dist {
    DIST_NORMAL,
    DIST_OUTLIERS,
    DIST_TINY,
    DIST_EDGE,
    DIST_MIDPOINTS,
    DIST_COUNT
} dist;

static const char *const dist_names[DIST_COUNT] = {"normal", "outliers", "tiny", "edge",
                                                   "midpoints"};

static float random_sign(rng *r, float v)
{
    return (ly_check_rng_next(r) & 1) ? -v : v;
}

static void fill_f32(float *p, int64_t n, dist d, rng *r, const value_tables *t)
{
    switch (d) {
    case DIST_NORMAL:
        for (int64_t i = 0; i < n; i++)
            p[i] = ly_check_rng_normal(r);
        break;
    case DIST_OUTLIERS:
        for (int64_t i = 0; i < n; i++) {
            p[i] = ly_check_rng_normal(r);
            if (ly_check_rng_below(r, 64) == 0) p[i] *= 1000.0f;
        }
        break;
    case DIST_TINY:
        /* Mostly subnormal, some smallest normals, a few exact zeros. */
        for (int64_t i = 0; i < n; i++) {
            p[i] = (float)((ly_check_rng_unit(r) * 2.0 - 1.0) * 2.5e-38);
            if (ly_check_rng_below(r, 97) == 0) p[i] = 0.0f;
        }
        break;
    case DIST_EDGE:
        for (int64_t i = 0; i < n; i++) {
            uint64_t pick = ly_check_rng_below(r, 8);
            if (pick == 0)
                p[i] = ly_check_rng_normal(r);
            else
                p[i] = random_sign(r, t->edge[ly_check_rng_below(r, (uint64_t)t->n_edge)]);
        }
        break;
    case DIST_MIDPOINTS:
        /* Blocks of 16 that put the scaled values exactly on rounding ties (and one
         * ulp either side) once the block or tensor scale is a power of two:
         * E2M1 blocks carry +-6*2^k so an MXFP4/NVFP4 scale lands on 2^k. */
        for (int64_t b = 0; b < n; b += 16) {
            int64_t end = b + 16 < n ? b + 16 : n;
            uint64_t type = ly_check_rng_below(r, 3);
            int k;
            for (int64_t i = b; i < end; i++) {
                float v;
                if (type == 0) {
                    k = (int)ly_check_rng_below(r, 17) - 8;
                    v = i == b ? 6.0f : t->e2m1[ly_check_rng_below(r, (uint64_t)t->n_e2m1)];
                } else if (type == 1) {
                    k = (int)ly_check_rng_below(r, 7) - 3;
                    v = t->e4m3[ly_check_rng_below(r, (uint64_t)t->n_e4m3)];
                } else {
                    k = (int)ly_check_rng_below(r, 5) - 2;
                    v = t->ties[ly_check_rng_below(r, (uint64_t)t->n_ties)];
                }
                p[i] = random_sign(r, ldexpf(v, k));
            }
        }
        break;
    default:
        break;
    }
}

/* max|x| as torch.amax computes it: a NaN anywhere gives NaN. */
static float amax_nan(const float *x, int64_t n)
{
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) return a;
        if (a > m) m = a;
    }
    return m;
}

/* ---- Shapes: YOLO9 / DETR conv and linear weights, odd sizes, tails, degenerate - */

static const quant_shape shapes[] = {
    {4, {16, 3, 3, 3}, false},
    {4, {32, 16, 3, 3}, false},
    {4, {64, 64, 1, 1}, false},
    {4, {128, 64, 3, 3}, false},
    {4, {256, 256, 3, 3}, true},
    {4, {96, 32, 1, 1}, false},
    {2, {256, 256}, false},
    {2, {512, 256}, false},
    {2, {1024, 256}, false},
    {2, {80, 256}, false},
    {2, {300, 4}, false},
    {2, {7, 13}, false},
    {2, {3, 301}, false},
    {2, {5, 17}, false},
    {2, {1, 33}, false},
    {4, {2, 1, 3, 5}, false},
    {3, {2, 3, 47}, false},
    {1, {37}, false},
    {1, {1}, false},
    {2, {1, 1}, false},
    {0, {0}, false},
    {1, {0}, false},
    {2, {0, 16}, false},
    {2, {16, 0}, false},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* The 2-D view a [out, in] slot sees: conv weights flatten to [out, in*kh*kw]. */
static void shape_2d(const quant_shape *s, int64_t *rows, int64_t *cols)
{
    if (s->ndim < 2) {
        *rows = 1;
        *cols = s->ndim == 1 ? s->dim[0] : 1;
        return;
    }
    *rows = s->dim[0];
    *cols = *rows ? quant_shape_numel(s) / *rows : 1;
    for (int i = 1; *rows == 0 && i < s->ndim; i++)
        *cols *= s->dim[i];
}

static const int64_t group_combos[8][2] = {{4, 128}, {2, 64}, {4, 64}, {2, 128},
                                           {4, 32},  {2, 32}, {4, 7},  {2, 7}};

enum { IN_FEATURES_MODES = 5 };

/* Variants of each kind; see materialize() for what each number means. */
static int variant_count(quant_kind k)
{
    switch (k) {
    case K_INT8_PER_CHANNEL:
        return 6; /* scale {dynamic, frozen, frozen-edge} x axis {0, last} */
    case K_INT8_AFFINE:
        return 3; /* lo/hi {from data, (-1,3), edge pair} */
    case K_FP8:
        return 5; /* scale [1] / [rows] / [rows,1,..] / edge [1] / edge [rows] */
    case K_INT_GROUPED:
        return 24; /* (bits, g) x scale {dynamic, frozen, frozen-edge} */
    case K_NVFP4_WEIGHT:
        return 3; /* tensor_amax {from data, 2688, edge} */
    case K_UNPACK_INT_GROUPED:
        return 8 * IN_FEATURES_MODES;
    case K_UNPACK_NVFP4:
        return 9 * IN_FEATURES_MODES; /* block scale x tensor_amax x in_features */
    default:
        return 1;
    }
}

typedef struct case_spec {
    quant_kind kind;
    bool backward;
    const quant_shape *shape;
    dist d;
    int variant;
    int64_t ordinal; /* within the slot: alternates aligned and misaligned memory */
} case_spec;

enum { QUICK_LARGE = 16384 };

/* Whether a spec is part of the requested size. */
static bool spec_wanted(const case_spec *s, bool full)
{
    if (s->kind == K_INT8_PER_CHANNEL && s->variant / 3 == 1 && s->shape->ndim <= 1)
        return false; /* axis "last" is axis 0 */
    if (full) return true;
    if (s->shape->big) return false;
    if (quant_unpacks(s->kind)) {
        /* Unpack reads no float distribution but its scales: three are enough. */
        if (s->d == DIST_OUTLIERS || s->d == DIST_MIDPOINTS) return false;
    }
    if (quant_shape_numel(s->shape) <= QUICK_LARGE) return true;
    return (s->d == DIST_NORMAL || s->d == DIST_EDGE) && s->variant % 3 == 0;
}

static void enumerate_specs(quant_kind kind, bool backward, bool full, ly_case_visit_fn fn,
                            void *user)
{
    int64_t ordinal = 0;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int d = 0; d < DIST_COUNT; d++)
            for (int v = 0; v < variant_count(kind); v++) {
                case_spec spec = {kind, backward, &shapes[s], (dist)d, v, ordinal};
                if (kind == K_UNPACK_NVFP4 && d != DIST_NORMAL && v % 3 != 2)
                    continue; /* the distribution only feeds f32 block scales */
                if (!spec_wanted(&spec, full)) continue;
                ordinal++;
                if (!fn(&spec, user)) return;
            }
}

/* ---- A materialised case ------------------------------------------------------ */

/* What the case passes as the op's params (see params_of). */
typedef struct case_params {
    int64_t axis, bits, group_size, in_features;
} case_params;

/* Frozen scales start from amax/qmax of what they cover ... */
static void slice_scales(float *scale, int64_t n, const float *x, int64_t numel, float divisor)
{
    int64_t per = n ? numel / n : 0;
    for (int64_t i = 0; i < n; i++)
        scale[i] = amax_nan(x + i * per, per) / divisor;
}

/* ... then some become powers of two, and (edge) anything at all. */
static void perturb_scales(float *scale, int64_t n, bool edge, rng *r, const value_tables *t)
{
    for (int64_t i = 0; i < n; i++) {
        float s = scale[i];
        if (!(s >= 1e-12f)) s = 1.0f;
        if (ly_check_rng_below(r, 4) == 0) s = ldexpf(1.0f, (int)ly_check_rng_below(r, 9) - 4);
        if (edge && ly_check_rng_below(r, 2) == 0)
            s = t->bad_scales[ly_check_rng_below(r, (uint64_t)t->n_bad_scales)];
        scale[i] = s;
    }
}

static const char *const scale_mode_names[3] = {"dynamic", "frozen", "frozen-edge"};
static const char *const in_features_names[IN_FEATURES_MODES] = {"default", "full", "exact", "one",
                                                                 "random"};

static int64_t pick_in_features(int mode, int64_t cols, int64_t padded, rng *r)
{
    switch (mode) {
    case 0:
        return -1;
    case 1:
        return padded;
    case 2:
        return cols;
    case 3:
        return 1;
    default:
        return padded > 0 ? 1 + (int64_t)ly_check_rng_below(r, (uint64_t)padded) : 0;
    }
}

/* The name of `s` for a case at `offset` (it seeds the case's values). */
static void spec_name(const case_spec *s, int offset, char *buf, size_t size)
{
    char shape_buf[48];
    ly_quant_shape_text(s->shape->ndim, s->shape->dim, shape_buf, sizeof shape_buf);
    snprintf(buf, size, "%s %s", dist_names[s->d], shape_buf);
    char variant[64] = "";
    switch (s->kind) {
    case K_INT8_PER_CHANNEL:
        snprintf(variant, sizeof variant, "axis=%s scale=%s", s->variant / 3 ? "last" : "0",
                 scale_mode_names[s->variant % 3]);
        break;
    case K_INT8_AFFINE: {
        static const char *const names[3] = {"lo/hi=data", "lo/hi=-1,3", "lo/hi=edge"};
        snprintf(variant, sizeof variant, "%s", names[s->variant]);
        break;
    }
    case K_FP8: {
        static const char *const names[5] = {"scale=[1]", "scale=[rows]", "scale=[rows,1..]",
                                             "scale=edge[1]", "scale=edge[rows]"};
        snprintf(variant, sizeof variant, "%s", names[s->variant]);
        break;
    }
    case K_INT_GROUPED:
        snprintf(variant, sizeof variant, "bits=%" PRId64 " g=%" PRId64 " scale=%s",
                 group_combos[s->variant / 3][0], group_combos[s->variant / 3][1],
                 scale_mode_names[s->variant % 3]);
        break;
    case K_NVFP4_WEIGHT: {
        static const char *const names[3] = {"amax=data", "amax=2688", "amax=edge"};
        snprintf(variant, sizeof variant, "%s", names[s->variant]);
        break;
    }
    case K_UNPACK_INT_GROUPED:
        snprintf(variant, sizeof variant, "bits=%" PRId64 " g=%" PRId64 " in_features=%s",
                 group_combos[s->variant % 8][0], group_combos[s->variant % 8][1],
                 in_features_names[s->variant / 8]);
        break;
    case K_UNPACK_NVFP4: {
        static const char *const bs[3] = {"all-codes", "random-codes", "f32"};
        static const char *const amax[3] = {"2688", "data", "edge"};
        snprintf(variant, sizeof variant, "block_scale=%s amax=%s in_features=%s",
                 bs[s->variant % 3], amax[(s->variant / 3) % 3], in_features_names[s->variant / 9]);
        break;
    }
    default:
        break;
    }
    if (variant[0]) ly_quant_append(buf, size, " %s", variant);
    if (offset) ly_quant_append(buf, size, " misaligned");
}

/* Build the tensors of spec `s` into `c` (its params into *cp). Inputs follow
 * include/libreyolo/quant.h. */
static void materialize(ly_check_case *c, const case_spec *s, case_params *cp, const char *slot,
                        const value_tables *t, bool *oom)
{
    spec_name(s, c->offset, c->name, sizeof c->name);
    rng r = {.state = ly_check_seed(slot, c->name)};
    cp->axis = 0;
    cp->bits = 4;
    cp->group_size = 128;
    cp->in_features = -1;

    int64_t rows, cols;
    shape_2d(s->shape, &rows, &cols);
    int ndim = s->shape->ndim;
    const int64_t *dim = s->shape->dim;
    int64_t numel = quant_shape_numel(s->shape);

    if (quant_unpacks(s->kind)) {
        bool nv = s->kind == K_UNPACK_NVFP4;
        int64_t bits = nv ? 4 : group_combos[s->variant % 8][0];
        int64_t g = nv ? 16 : group_combos[s->variant % 8][1];
        int64_t ng = (cols + g - 1) / g;
        /* A width the packing cannot express rounds up; the validator decides. */
        int64_t payload_cols = (ng * g * bits + 7) / 8;
        int64_t pshape[2] = {rows, payload_cols};
        uint8_t *payload = add_input(c, 0, LY_U8, 2, pshape, oom);
        if (!payload) return;
        for (int64_t i = 0; i < rows * payload_cols; i++)
            payload[i] = (uint8_t)ly_check_rng_next(&r);
        int64_t sshape[2] = {rows, ng};
        int in_mode = nv ? s->variant / 9 : s->variant / 8;
        cp->in_features = pick_in_features(in_mode, cols, ng * g, &r);
        if (!nv) {
            cp->bits = bits;
            cp->group_size = g;
            float *scale = add_input(c, 1, LY_F32, 2, sshape, oom);
            if (!scale) return;
            fill_f32(scale, rows * ng, s->d, &r, t);
            if (s->d == DIST_NORMAL || s->d == DIST_OUTLIERS)
                for (int64_t i = 0; i < rows * ng; i++)
                    scale[i] = fabsf(scale[i]) * 0.05f;
            return;
        }
        int bs_mode = s->variant % 3, amax_mode = (s->variant / 3) % 3;
        if (bs_mode < 2) {
            uint8_t *codes = add_input(c, 1, LY_F8E4M3, 2, sshape, oom);
            if (!codes) return;
            for (int64_t i = 0; i < rows * ng; i++)
                codes[i] = bs_mode == 0 ? (uint8_t)(i * 167 % 256) : (uint8_t)ly_check_rng_next(&r);
        } else {
            float *bscale = add_input(c, 1, LY_F32, 2, sshape, oom);
            if (!bscale) return;
            fill_f32(bscale, rows * ng, s->d, &r, t);
            if (s->d == DIST_NORMAL)
                for (int64_t i = 0; i < rows * ng; i++)
                    bscale[i] = fabsf(bscale[i]) * 50.0f;
        }
        float *amax = add_input(c, 2, LY_F32, 1, (int64_t[]){1}, oom);
        if (!amax) return;
        amax[0] = amax_mode == 0 ? 2688.0f
                  : amax_mode == 1
                      ? fabsf(ly_check_rng_normal(&r)) * 100.0f
                      : t->bad_scales[ly_check_rng_below(&r, (uint64_t)t->n_bad_scales)];
        return;
    }

    /* Fake-quant forward and backward: [grad,] x, then the op's own operands. */
    int base = s->backward ? 1 : 0;
    bool two_d = s->kind == K_INT_GROUPED;
    int64_t xshape2[2] = {rows, cols};
    int xndim = two_d ? 2 : ndim;
    const int64_t *xshape = two_d ? xshape2 : dim;
    if (s->backward) {
        float *grad = add_input(c, 0, LY_F32, xndim, xshape, oom);
        if (!grad) return;
        fill_f32(grad, numel, s->d == DIST_MIDPOINTS ? DIST_NORMAL : s->d, &r, t);
    }
    float *x = add_input(c, base, LY_F32, xndim, xshape, oom);
    if (!x) return;
    fill_f32(x, numel, s->d, &r, t);
    int64_t dim0 = ndim > 0 ? dim[0] : 1;

    switch (s->kind) {
    case K_INT8_PER_CHANNEL: {
        int axis = s->variant / 3 ? (ndim > 0 ? ndim - 1 : 0) : 0;
        int mode = s->variant % 3;
        cp->axis = axis;
        if (mode == 0) {
            break;
        }
        int64_t channels = ndim > 0 ? dim[axis] : 1;
        float *scale = add_input(c, base + 1, LY_F32, 1, &channels, oom);
        if (!scale) return;
        if (axis == 0) {
            slice_scales(scale, channels, x, numel, 127.0f);
        } else {
            for (int64_t ch = 0; ch < channels; ch++)
                scale[ch] = 0.0f;
            for (int64_t i = 0; i < numel; i++) {
                float a = fabsf(x[i]);
                int64_t ch = i % channels;
                if (isnan(a) || a > scale[ch]) scale[ch] = isnan(scale[ch]) ? scale[ch] : a;
            }
            for (int64_t ch = 0; ch < channels; ch++)
                scale[ch] /= 127.0f;
        }
        perturb_scales(scale, channels, mode == 2, &r, t);
        break;
    }
    case K_INT8_AFFINE: {
        float *lo = add_input(c, base + 1, LY_F32, 1, (int64_t[]){1}, oom);
        float *hi = lo ? add_input(c, base + 2, LY_F32, 1, (int64_t[]){1}, oom) : NULL;
        if (!hi) return;
        if (s->variant == 0) {
            float mn = 0.0f, mx = 0.0f;
            for (int64_t i = 0; i < numel; i++)
                if (isfinite(x[i])) {
                    mn = x[i] < mn ? x[i] : mn;
                    mx = x[i] > mx ? x[i] : mx;
                }
            *lo = mn;
            *hi = mx;
        } else if (s->variant == 1) {
            *lo = -1.0f;
            *hi = 3.0f;
        } else {
            static const float pairs[][2] = {
                {0.0f, 0.0f},    {-0.5f, -0.1f},  {2.0f, 5.0f},          {-1e-20f, 1e-20f},
                {NAN, 1.0f},     {-1.0f, NAN},    {-INFINITY, INFINITY}, {3.0f, -1.0f},
                {-1e30f, 1e30f}, {-1e-45f, 0.0f}, {-FLT_MAX, FLT_MAX},   {-127.5f, 127.5f},
                {-0.0f, 1e-38f}, {-255.0f, 0.0f},
            };
            uint64_t k = ly_check_rng_below(&r, sizeof pairs / sizeof pairs[0]);
            *lo = pairs[k][0];
            *hi = pairs[k][1];
        }
        break;
    }
    case K_FP8: {
        int v = s->variant;
        bool per_row = v == 1 || v == 2 || v == 4;
        int64_t sshape[LY_MAX_DIMS] = {per_row ? dim0 : 1};
        int sndim = 1;
        if (v == 2) {
            sndim = ndim > 0 ? ndim : 1;
            for (int i = 1; i < sndim; i++)
                sshape[i] = 1;
        }
        int64_t n = per_row ? dim0 : 1;
        float *scale = add_input(c, base + 1, LY_F32, sndim, sshape, oom);
        if (!scale) return;
        slice_scales(scale, n, x, numel, 448.0f);
        perturb_scales(scale, n, v >= 3, &r, t);
        break;
    }
    case K_INT_GROUPED: {
        int64_t bits = group_combos[s->variant / 3][0], g = group_combos[s->variant / 3][1];
        int mode = s->variant % 3;
        cp->bits = bits;
        cp->group_size = g;
        if (mode == 0) {
            break;
        }
        int64_t ng = (cols + g - 1) / g;
        float *scale = add_input(c, base + 1, LY_F32, 2, (int64_t[]){rows, ng}, oom);
        if (!scale) return;
        float qmax = (float)((1 << (bits - 1)) - 1);
        for (int64_t row = 0; row < rows; row++)
            for (int64_t j = 0; j < ng; j++) {
                int64_t c0 = j * g, c1 = c0 + g < cols ? c0 + g : cols;
                slice_scales(scale + row * ng + j, 1, x + row * cols + c0, c1 - c0, qmax);
            }
        perturb_scales(scale, rows * ng, mode == 2, &r, t);
        break;
    }
    case K_NVFP4_WEIGHT: {
        float *amax = add_input(c, base + 1, LY_F32, 1, (int64_t[]){1}, oom);
        if (!amax) return;
        amax[0] = s->variant == 0 ? amax_nan(x, numel)
                  : s->variant == 1
                      ? 2688.0f
                      : t->bad_scales[ly_check_rng_below(&r, (uint64_t)t->n_bad_scales)];
        break;
    }
    default:
        break;
    }
}

/* ---- The family ---------------------------------------------------------------- */

static value_tables tables;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    build_tables(&tables);
}

/* The op's own parameters struct for a case. */
static void set_params(ly_check_case *c, quant_kind kind, const case_params *cp)
{
    switch (kind) {
    case K_INT8_PER_CHANNEL: {
        ly_fake_quant_int8_per_channel_params p = {.axis = cp->axis};
        ly_check_case_params(c, &p, sizeof p);
        break;
    }
    case K_INT_GROUPED: {
        ly_fake_quant_int_grouped_params p = {.bits = cp->bits, .group_size = cp->group_size};
        ly_check_case_params(c, &p, sizeof p);
        break;
    }
    case K_UNPACK_INT_GROUPED: {
        ly_unpack_int_grouped_params p = {
            .bits = cp->bits, .group_size = cp->group_size, .in_features = cp->in_features};
        ly_check_case_params(c, &p, sizeof p);
        break;
    }
    case K_UNPACK_NVFP4: {
        ly_unpack_nvfp4_params p = {.in_features = cp->in_features};
        ly_check_case_params(c, &p, sizeof p);
        break;
    }
    default:
        break;
    }
}

static int64_t grid_count(quant_kind kind, bool backward, bool full)
{
    int64_t total = 0;
    enumerate_specs(kind, backward, full, ly_case_count, &total);
    return total;
}

static bool grid_name(quant_kind kind, bool backward, int64_t index, bool full, int offset,
                      char *buf, size_t size)
{
    case_spec found;
    ly_case_finder f = {.index = index, .spec = &found, .size = sizeof found};
    enumerate_specs(kind, backward, full, ly_case_find, &f);
    if (f.found) spec_name(&found, offset, buf, size);
    return f.found;
}

static ly_status grid_build(ly_op op, quant_kind kind, bool backward, int64_t index, bool full,
                            ly_check_case *c)
{
    case_spec found;
    ly_case_finder f = {.index = index, .spec = &found, .size = sizeof found};
    enumerate_specs(kind, backward, full, ly_case_find, &f);
    if (!f.found) return LY_E_NOT_FOUND;
    pthread_once(&tables_once, init_tables);
    case_params cp;
    bool oom = false;
    materialize(c, &found, &cp, ly_op_name(op), &tables, &oom);
    if (oom)
        return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                            ly_op_name(op), c->name);
    set_params(c, kind, &cp);
    return LY_OK;
}

const quant_family ly_quant_grid_cases = {grid_count, grid_name, grid_build};
