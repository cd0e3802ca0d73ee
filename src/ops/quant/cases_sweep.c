/* SPDX-License-Identifier: MIT */
/*
 * The quant cases' sweep and stream families (quant_cases.h).
 *
 * Sweep: every shape (model-like, odd, tails, one element, empty, and above
 * the threading threshold) x fill (normal, wide exponents, edge values, and
 * exact rounding midpoints on the scales that make them midpoints) x each op's
 * operand variants (dynamic, frozen and special scales; every axis; group
 * sizes down to 1; block-scale dtypes; in_features from 0 to the padded
 * width); a backward case takes a gradient with NaN, inf and -0 in it.
 *
 * Stream: outputs of at least 8 MiB in the full set (the quick set's 63 rows
 * reach only the sanitizer builds' 64 KiB threshold) are written with
 * streaming stores, which need the output's alignment: every op that streams,
 * on [rows, 1056] (rows of whole NVFP4 and MXFP4 blocks, block counts that
 * leave partial groups of eight, more than one segment of the dynamic NVFP4
 * path's kept block maxima), each implementation with its output 0, 4, 12
 * and 1 floats past a 64-byte boundary (32-byte aligned, 16 mod 32 at both halves of a line, and
 * 4-byte aligned, which falls back to ordinary stores).
 */
#include "ops/quant/quant_cases.h"
#include "ops/quant/reference.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- Values ------------------------------------------------------------------------- */

/* Values where the quantizers change their mind, and the usual suspects. */
static const float specials[] = {
    NAN,
    -NAN,
    INFINITY,
    -INFINITY,
    0.0f,
    -0.0f,
    0x1p-149f,
    -0x1p-149f,
    1e-39f,
    -3e-39f,
    FLT_MIN,
    -FLT_MIN,
    FLT_MAX,
    -FLT_MAX,
    1e9f,
    -1e9f,
    1e30f,
    -1e30f,
    448.0f,
    -448.0f,
    464.0f,
    -464.0f,
    0x1.d00002p+8f,
    480.0f,
    -480.0f,
    0x1.dffffep+8f,
    0.25f,
    0.75f,
    5.0f,
    -2.5f,
    6.0f,
    1e-30f,
    0x1.fffffep+2f,
    0x1p127f,
    0x1p-126f,
    0x1p-127f,
    0x1p63f,
    -0x1p63f,
    0x1.fffffep+62f,
    127.5f,
    -128.5f,
    127.49999f,
    -128.4f,
    -128.6f,
    3.4e38f,
    0x1p-10f,
    0x1.000002p-10f,
    0x1p-9f,
    0x1.8p-10f,
    0x1p-6f,
    0x1.fffffep-7f,
};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

static float uniform(rng *r) /* [0, 1) */
{
    return (float)(ly_check_rng_next(r) >> 40) * 0x1p-24f;
}

typedef enum fill_kind { FILL_NORMAL, FILL_WIDE, FILL_EDGE, FILL_TIES, FILL_KINDS } fill_kind;
static const char *const fill_names[FILL_KINDS] = {"normal", "wide", "edge", "ties"};

/* normal, wide (exponents -40..40) or edge (one in eight from specials). */
static void fill(float *x, int64_t n, fill_kind kind, rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        float u = uniform(r) + uniform(r) + uniform(r) - 1.5f;
        if (kind == FILL_NORMAL) {
            x[i] = 2.0f * u;
        } else if (kind == FILL_WIDE) {
            float m = 1.0f + uniform(r);
            int e = (int)ly_check_rng_below(r, 81) - 40;
            x[i] = ldexpf((ly_check_rng_next(r) & 1) ? -m : m, e);
        } else {
            x[i] = ly_check_rng_below(r, 8) == 0 ? specials[ly_check_rng_below(r, N_SPECIALS)]
                                                 : 3.0f * u;
        }
    }
}

/* Integers and integer + 1/2 in [-range, range], times a power-of-two scale:
 * with that scale frozen, round-half ties of x / scale. */
static void fill_int_ties(float *x, int64_t n, float scale, int range, rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        int k = (int)ly_check_rng_below(r, (uint64_t)(2 * range + 1)) - range;
        x[i] = ((float)k + ((ly_check_rng_next(r) & 1) ? 0.5f : 0.0f)) * scale;
    }
}

/* Every E4M3 value and every midpoint between neighbours, both signs, times s. */
static void fill_e4m3_ties(float *x, int64_t n, float s, rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        unsigned c = (unsigned)ly_check_rng_below(r, 0x7E);
        float a = ly_quant_e4m3_value(c), b = ly_quant_e4m3_value(c + 1);
        float v = (ly_check_rng_next(r) & 1) ? a : (a + b) * 0.5f;
        x[i] = ((ly_check_rng_next(r) & 1) ? -v : v) * s;
    }
}

/* Blocks whose amax is 6 * 2^k, the other elements E2M1 levels and midpoints
 * times 2^k: with eff = 2^k (MXFP4 always; NVFP4 when tensor_amax is 2688) every
 * scaled value is exactly a level or a tie. */
static void fill_fp4_ties(float *x, int64_t n, int64_t cols, int64_t block, rng *r)
{
    static const float grid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                                 2.0f, 2.5f,  3.0f, 3.5f,  4.0f, 5.0f,  6.0f};
    float scale = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = cols ? i % cols : 0;
        if (c % block == 0) {
            scale = ldexpf(1.0f, (int)ly_check_rng_below(r, 13) - 6);
            x[i] = ((ly_check_rng_next(r) & 1) ? -6.0f : 6.0f) * scale;
        } else {
            float v = grid[ly_check_rng_below(r, sizeof grid / sizeof grid[0])];
            x[i] = ((ly_check_rng_next(r) & 1) ? -v : v) * scale;
        }
    }
}

/* A backward's incoming gradient: normal, with NaN, inf and -0 in it. */
static float *add_grad(ly_check_case *c, int ndim, const int64_t *shape, rng *r, bool *oom)
{
    float *g = add_input(c, 0, LY_F32, ndim, shape, oom);
    if (!g) return NULL;
    int64_t n = ly_tensor_numel(&c->in[0]);
    fill(g, n, FILL_NORMAL, r);
    if (n > 3) {
        g[0] = NAN;
        g[n / 2] = INFINITY;
        g[n - 1] = -0.0f;
    }
    return g;
}

/* ---- Sweep: shapes ---------------------------------------------------------------- */

static const quant_shape nd_shapes[] = {
    {4, {64, 32, 3, 3}, false},
    {2, {7, 13}, false},
    {2, {3, 301}, false},
    {1, {1}, false},
    {1, {0}, false},
    {2, {0, 5}, false},
    {2, {5, 0}, false},
    {1, {17}, false},
    {3, {2, 3, 5}, false},
    {2, {1, 1000}, false},
    {2, {33, 17}, false},
    {2, {8, 48}, false},
    {2, {8, 20}, false},
    {2, {8, 40}, false},
    {4, {3, 5, 7, 9}, false},
    {2, {300, 250}, false}, /* above the threading threshold, with tails */
    {4, {256, 128, 1, 1}, true},
    {2, {512, 256}, true},
};
static const quant_shape shapes_2d[] = {
    {2, {7, 13}, false},   {2, {3, 301}, false},   {2, {1, 1}, false},    {2, {0, 5}, false},
    {2, {5, 0}, false},    {2, {33, 17}, false},   {2, {8, 300}, false},  {2, {4, 100}, false},
    {2, {16, 256}, false}, {2, {300, 250}, false}, {2, {512, 256}, true},
};
#define N_ND (sizeof nd_shapes / sizeof nd_shapes[0])
#define N_2D (sizeof shapes_2d / sizeof shapes_2d[0])

/* ---- Sweep: the cases of each kind -------------------------------------------------- */

static const float affine_ranges[][2] = {
    {-1.0f, 3.0f},     {-0.5f, 0.7f},     {0.0f, 0.0f},      {2.0f, 5.0f},
    {-8.0f, 7.9375f},  {-4.0f, 11.9375f}, {-INFINITY, 1.0f}, {NAN, 1.0f},
    {-1.0f, INFINITY}, {-3.0f, NAN},      {-1e30f, 1e30f},   {-1e-30f, 1e-30f},
};
#define N_RANGES (sizeof affine_ranges / sizeof affine_ranges[0])
static const int64_t grouped_variants[][2] = {{4, 128}, {2, 64}, {4, 8}, {2, 16},
                                              {4, 3},   {2, 1},  {4, 7}};
#define N_GROUPED (sizeof grouped_variants / sizeof grouped_variants[0])
/* NVFP4 weight tensor_amax values; entry 0 stands for the captured max|W|. */
static const float fp4_amaxes[] = {-1.0f,    2688.0f, 1.0f,   0.0f, NAN,
                                   INFINITY, 1e-30f,  100.0f, 1e30f};
#define N_FP4_AMAXES (sizeof fp4_amaxes / sizeof fp4_amaxes[0])
static const int64_t unpack_variants[][2] = {{4, 128}, {2, 64}, {4, 8},  {2, 16}, {4, 2},
                                             {2, 4},   {4, 6},  {2, 12}, {4, 10}};
#define N_UNPACK (sizeof unpack_variants / sizeof unpack_variants[0])
static const int64_t unpack_groups[] = {1, 2, 3, 9};
static const int64_t nvfp4_blocks[] = {1, 2, 3, 10, 64};
static const float nvfp4_amaxes[] = {2688.0f, 1.0f, 0.0f, NAN, INFINITY, 1e-30f, 100.0f};
static const ly_dtype nvfp4_scale_dtypes[] = {LY_F8E4M3, LY_U8, LY_F32};
static const char *const scale_names[3] = {"dynamic", "frozen", "frozen-special"};

/* One case: its shape and fill, and up to three more choices (the kind says). */
typedef struct sweep_spec {
    const quant_shape *shape;
    fill_kind fill;
    int a, b, c;
    int64_t rows; /* unpack */
} sweep_spec;

static int64_t rows_of(const quant_shape *s)
{
    return s->ndim > 0 ? s->dim[0] : 1;
}

/* Every case of `kind`, in order, until fn says stop. */
static void sweep(quant_kind kind, bool full, ly_case_visit_fn fn, void *user)
{
    sweep_spec sp = {0};
#define VISIT()                                                                                    \
    do {                                                                                           \
        if (!fn(&sp, user)) return;                                                                \
    } while (0)
    switch (kind) {
    case K_INT8_PER_CHANNEL:
        for (size_t s = 0; s < N_ND; s++) {
            if (nd_shapes[s].big && !full) continue;
            sp.shape = &nd_shapes[s];
            for (int f = 0; f < FILL_KINDS; f++)
                for (int axis = 0; axis < 3; axis++) /* 0, the last, 1 (or -1 below 3 dims) */
                    for (int frozen = 0; frozen < 3; frozen++) {
                        if (axis == 1 && sp.shape->ndim == 1) continue; /* the last is 0 */
                        if (f == FILL_TIES && frozen == 0) continue;    /* ties need a scale */
                        sp.fill = (fill_kind)f, sp.a = axis, sp.b = frozen;
                        VISIT();
                    }
        }
        break;
    case K_INT8_AFFINE:
        for (size_t s = 0; s < N_ND; s++) {
            if (nd_shapes[s].big && !full) continue;
            sp.shape = &nd_shapes[s];
            for (int range = 0; range < (int)N_RANGES; range++)
                for (int f = 0; f < FILL_KINDS; f++) {
                    sp.fill = (fill_kind)f, sp.a = range;
                    VISIT();
                }
        }
        sp.shape = NULL; /* a 0-d input */
        VISIT();
        break;
    case K_FP8:
        for (size_t s = 0; s < N_ND; s++) {
            if (nd_shapes[s].big && !full) continue;
            sp.shape = &nd_shapes[s];
            for (int per_row = 0; per_row < 2; per_row++)
                for (int f = 0; f < FILL_KINDS; f++)
                    for (int v = 0; v < 3; v++) {
                        sp.fill = (fill_kind)f, sp.a = per_row, sp.b = v;
                        VISIT();
                    }
        }
        break;
    case K_INT_GROUPED:
        for (size_t s = 0; s < N_2D; s++) {
            if (shapes_2d[s].big && !full) continue;
            sp.shape = &shapes_2d[s];
            for (int v = 0; v < (int)N_GROUPED; v++)
                for (int f = 0; f < FILL_KINDS; f++)
                    for (int frozen = 0; frozen < 3; frozen++) {
                        if (f == FILL_TIES && frozen == 0) continue;
                        sp.fill = (fill_kind)f, sp.a = v, sp.b = frozen;
                        VISIT();
                    }
        }
        break;
    case K_NVFP4_WEIGHT:
    case K_NVFP4_DYNAMIC:
    case K_MXFP4_WEIGHT:
    case K_MXFP4_DYNAMIC: {
        int n_amax = kind == K_NVFP4_WEIGHT ? (int)N_FP4_AMAXES : 1;
        for (size_t s = 0; s < N_ND; s++) {
            if (nd_shapes[s].big && !full) continue;
            sp.shape = &nd_shapes[s];
            for (int f = 0; f < FILL_KINDS; f++)
                for (int a = 0; a < n_amax; a++) {
                    if (f == FILL_TIES && a > 1) continue; /* ties need tensor scale 1 */
                    sp.fill = (fill_kind)f, sp.a = a;
                    VISIT();
                }
        }
        break;
    }
    case K_UNPACK_INT_GROUPED: {
        const int64_t rows[] = {1, 7, 64, full ? 512 : 100}, limit = full ? 1000000 : 100000;
        for (int v = 0; v < (int)N_UNPACK; v++)
            for (size_t ri = 0; ri < 4; ri++)
                for (int gi = 0; gi < 4; gi++) {
                    if (rows[ri] * unpack_groups[gi] * unpack_variants[v][1] > limit) continue;
                    for (int fi = 0; fi < 5; fi++) {
                        sp.rows = rows[ri], sp.a = v, sp.b = gi, sp.c = fi;
                        VISIT();
                    }
                }
        break;
    }
    case K_UNPACK_NVFP4: {
        const int64_t rows[] = {1, 5, 64, full ? 700 : 100};
        for (size_t ri = 0; ri < 4; ri++)
            for (int bi = 0; bi < 5; bi++)
                for (int di = 0; di < 3; di++)
                    for (int ai = 0; ai < 7; ai++)
                        for (int fi = 0; fi < 4; fi++) {
                            sp.rows = rows[ri], sp.a = bi, sp.b = di;
                            sp.c = ai * 4 + fi;
                            VISIT();
                        }
        break;
    }
    default:
        break;
    }
#undef VISIT
}

/* The axis a spec's choice names for a shape. */
static int64_t axis_of(const sweep_spec *sp)
{
    int nd = sp->shape->ndim;
    return sp->a == 0 ? 0 : sp->a == 1 ? nd - 1 : nd > 2 ? 1 : -1;
}

static int64_t unpack_in_features(int choice, int64_t padded)
{
    const int64_t features[] = {-1, padded - 1, padded / 2 + 1, 1, 0};
    return features[choice];
}

static int64_t nvfp4_in_features(int choice, int64_t blocks)
{
    const int64_t features[] = {-1, blocks * 16 - 5, 1, 0};
    return features[choice];
}

static void sweep_spec_name(quant_kind kind, const sweep_spec *sp, int offset, char *buf,
                            size_t size)
{
    char shape_buf[48] = "[]";
    if (sp->shape)
        ly_quant_shape_text(sp->shape->ndim, sp->shape->dim, shape_buf, sizeof shape_buf);
    snprintf(buf, size, "sweep %s %s", shape_buf, fill_names[sp->fill]);
    switch (kind) {
    case K_INT8_PER_CHANNEL:
        ly_quant_append(buf, size, " axis=%" PRId64 " scale=%s", axis_of(sp), scale_names[sp->b]);
        break;
    case K_INT8_AFFINE:
        if (!sp->shape)
            snprintf(buf, size, "sweep 0-d lo=-1 hi=1");
        else
            ly_quant_append(buf, size, " lo=%g hi=%g", (double)affine_ranges[sp->a][0],
                            (double)affine_ranges[sp->a][1]);
        break;
    case K_FP8:
        ly_quant_append(buf, size, " scale=%s variant=%d", sp->a ? "per-row" : "single", sp->b);
        break;
    case K_INT_GROUPED:
        ly_quant_append(buf, size, " bits=%" PRId64 " g=%" PRId64 " scale=%s",
                        grouped_variants[sp->a][0], grouped_variants[sp->a][1], scale_names[sp->b]);
        break;
    case K_NVFP4_WEIGHT:
        if (sp->a == 0)
            ly_quant_append(buf, size, " tensor_amax=data");
        else
            ly_quant_append(buf, size, " tensor_amax=%g", (double)fp4_amaxes[sp->a]);
        break;
    case K_UNPACK_INT_GROUPED: {
        int64_t g = unpack_variants[sp->a][1], ng = unpack_groups[sp->b];
        snprintf(buf, size,
                 "sweep rows=%" PRId64 " bits=%" PRId64 " g=%" PRId64 " groups=%" PRId64
                 " in_features=%" PRId64,
                 sp->rows, unpack_variants[sp->a][0], g, ng, unpack_in_features(sp->c, ng * g));
        break;
    }
    case K_UNPACK_NVFP4: {
        int64_t nb = nvfp4_blocks[sp->a];
        snprintf(buf, size,
                 "sweep rows=%" PRId64 " blocks=%" PRId64 " block_scale=%s amax=%g"
                 " in_features=%" PRId64,
                 sp->rows, nb, ly_dtype_name(nvfp4_scale_dtypes[sp->b]),
                 (double)nvfp4_amaxes[sp->c / 4], nvfp4_in_features(sp->c % 4, nb));
        break;
    }
    default:
        break;
    }
    if (offset) ly_quant_append(buf, size, " misaligned");
}

/* ---- Sweep: building a case ------------------------------------------------------- */

/* x (after the gradient of a backward) of the spec's shape and fill. */
static float *add_x(ly_check_case *c, const sweep_spec *sp, bool backward, rng *r, bool *oom)
{
    const quant_shape *s = sp->shape;
    if (backward && !add_grad(c, s->ndim, s->dim, r, oom)) return NULL;
    float *x = add_input(c, backward, LY_F32, s->ndim, s->dim, oom);
    if (x && sp->fill != FILL_TIES) fill(x, quant_shape_numel(s), sp->fill, r);
    return x;
}

static void build_int8_per_channel(ly_check_case *c, const sweep_spec *sp, bool backward, rng *r,
                                   bool *oom)
{
    float *x = add_x(c, sp, backward, r, oom);
    if (!x) return;
    int64_t n = quant_shape_numel(sp->shape), axis = axis_of(sp);
    bool ties = sp->fill == FILL_TIES;
    if (ties) fill_int_ties(x, n, 0x1p-4f, 140, r);
    ly_fake_quant_int8_per_channel_params p = {.axis = axis};
    ly_check_case_params(c, &p, sizeof p);
    if (sp->b == 0) return; /* dynamic */
    int64_t channels = sp->shape->dim[axis < 0 ? axis + sp->shape->ndim : axis];
    float *scale = add_input(c, backward + 1, LY_F32, 1, &channels, oom);
    for (int64_t ch = 0; scale && ch < channels; ch++)
        scale[ch] = sp->b == 2 && ch < (int64_t)N_SPECIALS ? specials[(ch * 7) % N_SPECIALS]
                    : ties                                 ? 0x1p-4f
                                                           : 0.01f + uniform(r);
}

static void build_int8_affine(ly_check_case *c, const sweep_spec *sp, bool backward, rng *r,
                              bool *oom)
{
    float lo = -1.0f, hi = 1.0f;
    if (!sp->shape) { /* 0-d */
        if (backward && !add_grad(c, 0, NULL, r, oom)) return;
        float *x = add_input(c, backward, LY_F32, 0, NULL, oom);
        if (!x) return;
        x[0] = 0.3f;
    } else {
        float *x = add_x(c, sp, backward, r, oom);
        if (!x) return;
        if (sp->fill == FILL_TIES) fill_int_ties(x, quant_shape_numel(sp->shape), 0x1p-4f, 140, r);
        lo = affine_ranges[sp->a][0];
        hi = affine_ranges[sp->a][1];
    }
    float *plo = add_input(c, backward + 1, LY_F32, 1, (int64_t[]){1}, oom);
    float *phi = add_input(c, backward + 2, LY_F32, 1, (int64_t[]){1}, oom);
    if (plo && phi) *plo = lo, *phi = hi;
}

static void build_fp8(ly_check_case *c, const sweep_spec *sp, bool backward, rng *r, bool *oom)
{
    float *x = add_x(c, sp, backward, r, oom);
    if (!x) return;
    bool ties = sp->fill == FILL_TIES;
    float base = ties ? (sp->b == 0 ? 1.0f : 0x1p-3f) : 0.0f;
    if (ties) fill_e4m3_ties(x, quant_shape_numel(sp->shape), base, r);
    int64_t sn = sp->a ? rows_of(sp->shape) : 1;
    float *scale = add_input(c, backward + 1, LY_F32, 1, &sn, oom);
    for (int64_t i = 0; scale && i < sn; i++)
        scale[i] = ties         ? base
                   : sp->b == 2 ? specials[(i * 5 + 3) % N_SPECIALS]
                                : (sp->b ? 1.0f : 0.01f) * (0.05f + uniform(r));
}

static void build_int_grouped(ly_check_case *c, const sweep_spec *sp, bool backward, rng *r,
                              bool *oom)
{
    float *x = add_x(c, sp, backward, r, oom);
    if (!x) return;
    bool ties = sp->fill == FILL_TIES;
    if (ties) fill_int_ties(x, quant_shape_numel(sp->shape), 0x1p-3f, 12, r);
    int64_t bits = grouped_variants[sp->a][0], g = grouped_variants[sp->a][1];
    ly_fake_quant_int_grouped_params p = {.bits = bits, .group_size = g};
    ly_check_case_params(c, &p, sizeof p);
    if (sp->b == 0) return; /* dynamic */
    int64_t sd[2] = {sp->shape->dim[0], (sp->shape->dim[1] + g - 1) / g};
    float *scale = add_input(c, backward + 1, LY_F32, 2, sd, oom);
    for (int64_t i = 0; scale && i < sd[0] * sd[1]; i++)
        scale[i] = sp->b == 2 && i % 5 == 0 ? specials[(i * 3) % N_SPECIALS]
                   : ties                   ? 0x1p-3f
                                            : 0.05f + uniform(r);
}

static void build_fp4(ly_check_case *c, quant_kind kind, const sweep_spec *sp, bool backward,
                      rng *r, bool *oom)
{
    float *x = add_x(c, sp, backward, r, oom);
    if (!x) return;
    int64_t n = quant_shape_numel(sp->shape), cols = sp->shape->dim[sp->shape->ndim - 1];
    bool mx = kind == K_MXFP4_WEIGHT || kind == K_MXFP4_DYNAMIC;
    if (sp->fill == FILL_TIES) {
        fill_fp4_ties(x, n, cols, mx ? LY_MXFP4_BLOCK : LY_NVFP4_BLOCK, r);
        /* the dynamic NVFP4 scale: tensor amax 2688 gives ts' = 1 */
        if (kind == K_NVFP4_DYNAMIC && n > 0) x[n - 1] = 2688.0f;
    }
    if (kind != K_NVFP4_WEIGHT) return;
    float *amax = add_input(c, backward + 1, LY_F32, 1, (int64_t[]){1}, oom);
    if (amax) amax[0] = sp->a == 0 ? ly_quant_amax(x, n) : fp4_amaxes[sp->a];
}

static void build_unpack_int_grouped(ly_check_case *c, const sweep_spec *sp, rng *r, bool *oom)
{
    int64_t bits = unpack_variants[sp->a][0], g = unpack_variants[sp->a][1];
    int64_t rows = sp->rows, ng = unpack_groups[sp->b], width = ng * g * bits / 8;
    uint8_t *payload = add_input(c, 0, LY_U8, 2, (int64_t[]){rows, width}, oom);
    float *scale = add_input(c, 1, LY_F32, 2, (int64_t[]){rows, ng}, oom);
    if (!payload || !scale) return;
    for (int64_t i = 0; i < rows * width; i++)
        payload[i] = (uint8_t)ly_check_rng_next(r);
    for (int64_t i = 0; i < rows * ng; i++)
        scale[i] = i % 7 == 3 ? specials[(i * 11) % N_SPECIALS] : uniform(r);
    ly_unpack_int_grouped_params p = {
        .bits = bits, .group_size = g, .in_features = unpack_in_features(sp->c, ng * g)};
    ly_check_case_params(c, &p, sizeof p);
}

static void build_unpack_nvfp4(ly_check_case *c, const sweep_spec *sp, rng *r, bool *oom)
{
    int64_t rows = sp->rows, nb = nvfp4_blocks[sp->a];
    ly_dtype dtype = nvfp4_scale_dtypes[sp->b];
    uint8_t *payload = add_input(c, 0, LY_U8, 2, (int64_t[]){rows, nb * 8}, oom);
    void *scales = add_input(c, 1, dtype, 2, (int64_t[]){rows, nb}, oom);
    float *amax = add_input(c, 2, LY_F32, 1, (int64_t[]){1}, oom);
    if (!payload || !scales || !amax) return;
    for (int64_t i = 0; i < rows * nb * 8; i++)
        payload[i] = (uint8_t)ly_check_rng_next(r);
    for (int64_t i = 0; i < rows * nb; i++) {
        if (dtype == LY_F32)
            ((float *)scales)[i] =
                i % 5 == 2 ? specials[(i * 13) % N_SPECIALS] : uniform(r) * 448.0f;
        else
            ((uint8_t *)scales)[i] = (uint8_t)ly_check_rng_next(r);
    }
    amax[0] = nvfp4_amaxes[sp->c / 4];
    ly_unpack_nvfp4_params p = {.in_features = nvfp4_in_features(sp->c % 4, nb)};
    ly_check_case_params(c, &p, sizeof p);
}

static int64_t sweep_count(quant_kind kind, bool backward, bool full)
{
    (void)backward;
    int64_t total = 0;
    sweep(kind, full, ly_case_count, &total);
    return total;
}

static bool sweep_name(quant_kind kind, bool backward, int64_t index, bool full, int offset,
                       char *buf, size_t size)
{
    (void)backward;
    sweep_spec found;
    ly_case_finder f = {.index = index, .spec = &found, .size = sizeof found};
    sweep(kind, full, ly_case_find, &f);
    if (f.found) sweep_spec_name(kind, &found, offset, buf, size);
    return f.found;
}

static ly_status sweep_build(ly_op op, quant_kind kind, bool backward, int64_t index, bool full,
                             ly_check_case *c)
{
    sweep_spec found;
    ly_case_finder f = {.index = index, .spec = &found, .size = sizeof found};
    sweep(kind, full, ly_case_find, &f);
    if (!f.found) return LY_E_NOT_FOUND;
    const sweep_spec *sp = &found;
    sweep_spec_name(kind, sp, c->offset, c->name, sizeof c->name);
    rng r = {.state = ly_check_seed(ly_op_name(op), c->name)};
    bool oom = false;
    switch (kind) {
    case K_INT8_PER_CHANNEL:
        build_int8_per_channel(c, sp, backward, &r, &oom);
        break;
    case K_INT8_AFFINE:
        build_int8_affine(c, sp, backward, &r, &oom);
        break;
    case K_FP8:
        build_fp8(c, sp, backward, &r, &oom);
        break;
    case K_INT_GROUPED:
        build_int_grouped(c, sp, backward, &r, &oom);
        break;
    case K_UNPACK_INT_GROUPED:
        build_unpack_int_grouped(c, sp, &r, &oom);
        break;
    case K_UNPACK_NVFP4:
        build_unpack_nvfp4(c, sp, &r, &oom);
        break;
    default:
        build_fp4(c, kind, sp, backward, &r, &oom);
        break;
    }
    if (oom)
        return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                            ly_op_name(op), c->name);
    return LY_OK;
}

const quant_family ly_quant_sweep_cases = {sweep_count, sweep_name, sweep_build};

/* ---- Stream ------------------------------------------------------------------------- */

enum { STREAM_COLS = 1056 }; /* 33 MXFP4 blocks, 66 NVFP4 blocks */

static int64_t stream_rows(bool full)
{
    return full ? 1987 : 63;
}

/* The operand variants of a kind that streams (0: it does not). */
static int stream_variants(quant_kind kind, bool backward)
{
    switch (kind) {
    case K_INT8_PER_CHANNEL:
        return backward ? 1 : 3; /* dynamic on axis 0; frozen per row; dynamic on axis 1 */
    case K_INT8_AFFINE:
    case K_FP8:
    case K_NVFP4_WEIGHT:
    case K_NVFP4_DYNAMIC:
    case K_MXFP4_WEIGHT:
    case K_UNPACK_INT_GROUPED:
    case K_UNPACK_NVFP4:
        return 1;
    default:
        return 0;
    }
}

/* Fills (normal, then edge: NaN blocks take the general path in the middle of
 * a streamed range; unpack reads none) x variants. */
static int64_t stream_count(quant_kind kind, bool backward, bool full)
{
    (void)full;
    int fills = quant_unpacks(kind) ? 1 : 2;
    return (int64_t)fills * stream_variants(kind, backward);
}

static bool stream_spec(quant_kind kind, bool backward, int64_t index, bool full, fill_kind *values,
                        int *variant)
{
    if (index < 0 || index >= stream_count(kind, backward, full)) return false;
    int variants = stream_variants(kind, backward);
    *variant = (int)(index % variants);
    *values = index / variants ? FILL_EDGE : FILL_NORMAL;
    return true;
}

static bool stream_name(quant_kind kind, bool backward, int64_t index, bool full, int offset,
                        char *buf, size_t size)
{
    (void)offset; /* the family places its outputs itself */
    fill_kind values;
    int variant;
    if (!stream_spec(kind, backward, index, full, &values, &variant)) return false;
    static const char *const int8_variants[3] = {"", " axis=0 scale=rows", " axis=1"};
    snprintf(buf, size, "streamed [%" PRId64 ",%d] %s%s", stream_rows(full), STREAM_COLS,
             fill_names[values], kind == K_INT8_PER_CHANNEL ? int8_variants[variant] : "");
    return true;
}

static ly_status stream_build(ly_op op, quant_kind kind, bool backward, int64_t index, bool full,
                              ly_check_case *c)
{
    fill_kind values;
    int variant;
    if (!stream_spec(kind, backward, index, full, &values, &variant)) return LY_E_NOT_FOUND;
    /* The outputs 64-byte aligned, then 4, 12 and 1 floats past that. */
    c->offset = 0;
    c->out_offsets = (1u << 4) | (1u << 12) | (1u << 1);
    stream_name(kind, backward, index, full, 0, c->name, sizeof c->name);
    rng r = {.state = ly_check_seed(ly_op_name(op), c->name)};
    int64_t rows = stream_rows(full), mat[2] = {rows, STREAM_COLS};
    bool oom = false;
    if (kind == K_UNPACK_INT_GROUPED) { /* int4 in groups of 128, the last one in part */
        int64_t ng = (STREAM_COLS + 127) / 128;
        uint8_t *payload = add_input(c, 0, LY_U8, 2, (int64_t[]){rows, ng * 64}, &oom);
        float *scale = add_input(c, 1, LY_F32, 2, (int64_t[]){rows, ng}, &oom);
        for (int64_t i = 0; payload && i < rows * ng * 64; i++)
            payload[i] = (uint8_t)ly_check_rng_next(&r);
        for (int64_t i = 0; scale && i < rows * ng; i++)
            scale[i] = uniform(&r);
        ly_unpack_int_grouped_params p = {.bits = 4, .group_size = 128, .in_features = STREAM_COLS};
        ly_check_case_params(c, &p, sizeof p);
    } else if (kind == K_UNPACK_NVFP4) { /* E4M3 block scales */
        uint8_t *payload = add_input(c, 0, LY_U8, 2, (int64_t[]){rows, STREAM_COLS / 2}, &oom);
        uint8_t *codes = add_input(c, 1, LY_F8E4M3, 2, (int64_t[]){rows, STREAM_COLS / 16}, &oom);
        float *amax = add_input(c, 2, LY_F32, 1, (int64_t[]){1}, &oom);
        for (int64_t i = 0; payload && i < rows * STREAM_COLS / 2; i++)
            payload[i] = (uint8_t)ly_check_rng_next(&r);
        for (int64_t i = 0; codes && i < rows * STREAM_COLS / 16; i++)
            codes[i] = (uint8_t)(0x30 + ly_check_rng_next(&r) % 0x20);
        if (amax) amax[0] = 4.0f;
    } else {
        if (backward && !add_grad(c, 2, mat, &r, &oom)) goto done;
        float *x = add_input(c, backward, LY_F32, 2, mat, &oom);
        if (!x) goto done;
        fill(x, rows * STREAM_COLS, values, &r);
        int next = backward + 1;
        if (kind == K_INT8_PER_CHANNEL) {
            ly_fake_quant_int8_per_channel_params p = {.axis = variant == 2};
            ly_check_case_params(c, &p, sizeof p);
        }
        if ((kind == K_INT8_PER_CHANNEL && variant == 1) || kind == K_FP8) {
            float *scale = add_input(c, next, LY_F32, 1, &rows, &oom);
            for (int64_t i = 0; scale && i < rows; i++)
                scale[i] = 0.01f + uniform(&r);
        } else if (kind == K_INT8_AFFINE) {
            float *lo = add_input(c, next, LY_F32, 1, (int64_t[]){1}, &oom);
            float *hi = add_input(c, next + 1, LY_F32, 1, (int64_t[]){1}, &oom);
            if (lo && hi) *lo = -3.0f, *hi = 3.0f;
        } else if (kind == K_NVFP4_WEIGHT) {
            float *amax = add_input(c, next, LY_F32, 1, (int64_t[]){1}, &oom);
            if (amax) amax[0] = 4.0f;
        }
    }
done:
    if (oom)
        return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                            ly_op_name(op), c->name);
    return LY_OK;
}

const quant_family ly_quant_stream_cases = {stream_count, stream_name, stream_build};
