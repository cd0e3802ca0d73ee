/* SPDX-License-Identifier: MIT */
/*
 * Parity cases of the ms_deform_attn slots (ops/cases.h): the outputs are
 * compared bit for bit (forward) or within the backward tolerance (the
 * providers here are bit-identical there too; the verdict says
 * "bit-identical" when no bit differs).
 *
 * Shapes come from the models that use the op (RT-DETR-R18, D-FINE-N,
 * RF-DETR-Nano, DEIMv2-atto's ragged [4, 2] points) plus the classic test shape
 * and odd ones (C = 1, 13, 33, 40: vector tails and more than one channel
 * block; more points than one prepared chunk (K 300); a level of 1x1; a level with no
 * points; empty outputs). Locations: inside, edge coordinates loc*W - 0.5 in
 * {-1, -0.5, 0, W-1, W-0.5, W} and one ulp either side, far outside, NaN, inf.
 * Values: normal, or with NaN, inf, huge and subnormal entries (in value,
 * attention weights and the incoming gradient). Each case is seeded from its
 * name, so a reported case can be rerun alone.
 */
#include "ops/cases.h"
#include "core/core.h"
#include "ops/msda/msda_internal.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Cases --------------------------------------------------------------------- */

typedef enum loc_kind { LOC_INSIDE, LOC_EDGE, LOC_OUTSIDE } loc_kind;
typedef enum val_kind { VAL_NORMAL, VAL_SPECIAL } val_kind;

typedef struct shape_def {
    const char *name;
    int64_t B, Lq, H, C, L;
    int64_t hw[5][2];
    int64_t P;         /* uniform points per level, or -1: ragged (points[]) */
    int64_t points[5]; /* ragged counts */
    bool big;          /* model-sized: fewer variants in the quick set */
} shape_def;

static const shape_def shapes[] = {
    {"classic", 2, 3, 2, 4, 2, {{4, 6}, {2, 3}}, 2, {0}, false},
    {"rtdetr_r18", 1, 300, 8, 32, 3, {{80, 80}, {40, 40}, {20, 20}}, 4, {0}, true},
    {"dfine_n", 1, 300, 8, 16, 2, {{40, 40}, {20, 20}}, 6, {0}, true},
    {"rfdetr_nano", 1, 300, 16, 16, 1, {{24, 24}}, 2, {0}, true},
    {"deimv2_atto_ragged", 1, 100, 8, 8, 2, {{20, 20}, {10, 10}}, -1, {4, 2}, false},
    {"odd_c13", 2, 5, 3, 13, 3, {{5, 7}, {3, 2}, {1, 1}}, 3, {0}, false},
    {"wide_c40", 1, 7, 2, 40, 1, {{4, 4}}, 5, {0}, false},
    {"c1", 1, 4, 1, 1, 1, {{3, 3}}, 1, {0}, false},
    {"c33_ragged_empty_level", 1, 3, 2, 33, 2, {{2, 5}, {6, 1}}, -1, {3, 0}, false},
    {"k80", 1, 2, 2, 8, 4, {{8, 8}, {4, 4}, {2, 2}, {1, 1}}, 20, {0}, false},
    {"k300_chunks", 1, 3, 2, 12, 2, {{5, 5}, {3, 3}}, 150, {0}, false},
    {"edge_pow2", 1, 8, 2, 12, 2, {{4, 8}, {2, 4}}, 4, {0}, false},
    {"edge_odd", 1, 8, 2, 9, 2, {{3, 5}, {7, 1}}, 4, {0}, false},
    {"no_queries", 1, 0, 2, 4, 1, {{4, 6}}, 2, {0}, false},
    {"no_points", 1, 3, 2, 4, 1, {{4, 6}}, 0, {0}, false},
    {"deimv2_ragged_lq9", 1, 9, 8, 8, 2, {{20, 20}, {10, 10}}, -1, {4, 2}, false},
    {"c40_6x5", 1, 4, 2, 40, 1, {{6, 5}}, 5, {0}, false},
    {"c33_b2_ragged_empty_level", 2, 2, 2, 33, 2, {{2, 5}, {6, 1}}, -1, {3, 0}, false},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct variant {
    int mode;
    loc_kind loc;
    val_kind val;
} variant;

static const variant variants[] = {
    {LY_MSDA_BILINEAR, LOC_INSIDE, VAL_NORMAL},   {LY_MSDA_BILINEAR, LOC_EDGE, VAL_NORMAL},
    {LY_MSDA_BILINEAR, LOC_OUTSIDE, VAL_NORMAL},  {LY_MSDA_BILINEAR, LOC_INSIDE, VAL_SPECIAL},
    {LY_MSDA_BILINEAR, LOC_OUTSIDE, VAL_SPECIAL}, {LY_MSDA_DISCRETE, LOC_INSIDE, VAL_NORMAL},
    {LY_MSDA_DISCRETE, LOC_EDGE, VAL_NORMAL},     {LY_MSDA_DISCRETE, LOC_OUTSIDE, VAL_SPECIAL},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static const char *const loc_names[] = {"inside", "edge", "outside"};
static const char *const val_names[] = {"normal", "special"};

static bool wanted(const shape_def *s, const variant *v, bool full)
{
    if (full) return true;
    if (!s->big) return true;
    /* Model shapes in the quick set: the common path, the edges, and D-FINE's
     * own discrete mode. */
    if (v->mode == LY_MSDA_BILINEAR) return v->val == VAL_NORMAL && v->loc != LOC_OUTSIDE;
    return strcmp(s->name, "dfine_n") == 0 && v->loc == LOC_INSIDE;
}

/* ---- Deterministic data ---------------------------------------------------------- */

typedef ly_check_rng rng;

static float rng_unit(rng *r) /* [0, 1) */
{
    return (float)(ly_check_rng_next(r) >> 40) * 0x1p-24f;
}

/* Roughly normal (a sum of four uniforms), cheap enough for megabytes. */
static float rng_normalish(rng *r)
{
    return (rng_unit(r) + rng_unit(r) + rng_unit(r) + rng_unit(r) - 2.0f) * 1.7f;
}

static float special_value(rng *r)
{
    static const float table[] = {NAN,     INFINITY, -INFINITY, 1e30f,   -3e38f,  0x1p-140f,
                                  -1e-45f, 0.0f,     -0.0f,     FLT_MIN, 65504.0f};
    return table[ly_check_rng_below(r, sizeof table / sizeof table[0])];
}

static void fill_values(float *p, int64_t n, val_kind k, rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        p[i] = rng_normalish(r);
        if (k == VAL_SPECIAL && ly_check_rng_below(r, 16) == 0) p[i] = special_value(r);
    }
}

/* One coordinate in [0, 1]-normalised units for an axis of `size`. */
static float pick_loc(loc_kind k, int64_t size, rng *r)
{
    if (k == LOC_EDGE) {
        static const float xs[6] = {-1.0f, -0.5f, 0.0f, 0.0f, 0.5f, 1.0f}; /* + size for 3..5 */
        int e = (int)ly_check_rng_below(r, 7);
        if (e == 6) return rng_unit(r);
        float x = xs[e] + (e >= 3 ? (float)size - 1.0f : 0.0f);
        float loc = (x + 0.5f) / (float)size;
        uint64_t nudge = ly_check_rng_below(r, 4);
        if (nudge == 1) loc = nextafterf(loc, -INFINITY);
        if (nudge == 2) loc = nextafterf(loc, INFINITY);
        return loc;
    }
    if (k == LOC_OUTSIDE) {
        static const float far[] = {1e10f, -1e10f, INFINITY, -INFINITY, NAN,   -0.0f, 0.0f,
                                    1.0f,  3e38f,  -3e38f,   1e-40f,    -2.0f, 9.5f};
        if (ly_check_rng_below(r, 4) == 0)
            return far[ly_check_rng_below(r, sizeof far / sizeof far[0])];
        return rng_unit(r) * 3.0f - 1.0f;
    }
    return rng_unit(r) * 1.1f - 0.05f;
}

/* ---- A materialised case ------------------------------------------------------ */

/* The shape and variant of case `index` of the set; false past the last. */
static bool find_spec(int64_t index, bool full, const shape_def **shape, const variant **var)
{
    for (size_t s = 0; s < N_SHAPES; s++)
        for (size_t v = 0; v < N_VARIANTS; v++)
            if (wanted(&shapes[s], &variants[v], full) && index-- == 0) {
                *shape = &shapes[s];
                *var = &variants[v];
                return true;
            }
    return false;
}

static int64_t count_cases(ly_op op, bool full)
{
    (void)op;
    int64_t total = 0;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (size_t v = 0; v < N_VARIANTS; v++)
            total += wanted(&shapes[s], &variants[v], full);
    return total;
}

/* Inputs in the slot's order. */
static ly_status build(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    const shape_def *s;
    const variant *v;
    if (!find_spec(index, full, &s, &v)) return LY_E_NOT_FOUND;
    bool backward = op == LY_OP_MS_DEFORM_ATTN_BACKWARD;
    snprintf(c->name, sizeof c->name, "%s %s loc=%s values=%s%s", s->name,
             v->mode == LY_MSDA_DISCRETE ? "discrete" : "bilinear", loc_names[v->loc],
             val_names[v->val], c->offset ? " misaligned" : "");
    rng r = {.state = ly_check_seed(ly_op_name(op), c->name)};
    ly_check_case_params(c, &(ly_ms_deform_attn_params){.mode = v->mode},
                         sizeof(ly_ms_deform_attn_params));
    int base = backward ? 1 : 0;

    int64_t len_in = 0, K = 0;
    for (int64_t l = 0; l < s->L; l++) {
        len_in += s->hw[l][0] * s->hw[l][1];
        K += s->P >= 0 ? s->P : s->points[l];
    }
    int64_t rows = s->B * s->Lq * s->H;
    float *value = ly_check_case_input(c, base, LY_F32, 4, (int64_t[]){s->B, len_in, s->H, s->C});
    int64_t *hw = value ? ly_check_case_input(c, base + 1, LY_I64, 2, (int64_t[]){s->L, 2}) : NULL;
    if (!hw) goto out_of_memory;
    fill_values(value, s->B * len_in * s->H * s->C, v->val, &r);
    for (int64_t l = 0; l < s->L; l++) {
        hw[2 * l] = s->hw[l][0];
        hw[2 * l + 1] = s->hw[l][1];
    }

    float *loc, *attn;
    if (s->P >= 0) {
        loc = ly_check_case_input(c, base + 2, LY_F32, 6,
                                  (int64_t[]){s->B, s->Lq, s->H, s->L, s->P, 2});
        attn = loc ? ly_check_case_input(c, base + 3, LY_F32, 5,
                                         (int64_t[]){s->B, s->Lq, s->H, s->L, s->P})
                   : NULL;
    } else {
        loc = ly_check_case_input(c, base + 2, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, K, 2});
        attn = loc ? ly_check_case_input(c, base + 3, LY_F32, 4, (int64_t[]){s->B, s->Lq, s->H, K})
                   : NULL;
        int64_t *np =
            attn ? ly_check_case_input(c, backward ? 5 : 4, LY_I64, 1, (int64_t[]){s->L}) : NULL;
        if (!np) goto out_of_memory;
        for (int64_t l = 0; l < s->L; l++)
            np[l] = s->points[l];
    }
    if (!attn) goto out_of_memory;
    for (int64_t row = 0; row < rows; row++) {
        int64_t k = 0;
        for (int64_t l = 0; l < s->L; l++)
            for (int64_t p = 0; p < (s->P >= 0 ? s->P : s->points[l]); p++, k++) {
                float *xy = loc + (row * K + k) * 2;
                xy[0] = pick_loc(v->loc, s->hw[l][1], &r);
                xy[1] = pick_loc(v->loc, s->hw[l][0], &r);
            }
        /* Softmax over all the points of the row, as the models normalise. */
        float *a = attn + row * K, sum = 0.0f;
        for (int64_t i = 0; i < K; i++) {
            a[i] = expf(rng_normalish(&r));
            sum += a[i];
        }
        for (int64_t i = 0; i < K; i++) {
            a[i] /= sum;
            if (v->val == VAL_SPECIAL && ly_check_rng_below(&r, 16) == 0) a[i] = special_value(&r);
        }
    }
    if (backward) {
        float *go = ly_check_case_input(c, 0, LY_F32, 3, (int64_t[]){s->B, s->Lq, s->H * s->C});
        if (!go) goto out_of_memory;
        fill_values(go, rows * s->C, v->val, &r);
    }
    return LY_OK;

out_of_memory:
    return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                        ly_op_name(op), c->name);
}

/* ---- Describing ------------------------------------------------------------------ */

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void append(char *buf, size_t size, const char *fmt, ...) LY_PRINTF(3, 4);
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* What an output element depends on, briefly: its coordinates and, for
 * per-sample outputs, the sample's location and weight. */
static void describe(ly_op op, const ly_check_case *c, int out_index, const ly_tensor *shape,
                     int64_t index, char *buf, size_t size)
{
    (void)shape;
    buf[0] = '\0';
    bool backward = op == LY_OP_MS_DEFORM_ATTN_BACKWARD;
    int base = backward ? 1 : 0;
    const ly_tensor *value = &c->in[base], *loc_t = &c->in[base + 2];
    const float *loc = loc_t->data, *attn = c->in[base + 3].data;
    if (!backward || out_index == 0) {
        int64_t C = value->shape[3], H = value->shape[2], Lq = loc_t->shape[1];
        int64_t ch = index % C, h = (index / C) % H, r = index / C / H;
        if (!backward)
            append(buf, size, "b=%" PRId64 " q=%" PRId64 " h=%" PRId64 " c=%" PRId64,
                   r / (Lq ? Lq : 1), r % (Lq ? Lq : 1), h, ch);
        else
            append(buf, size, "value[%" PRId64 "]=%.9g (0x%08" PRIx32 ") h=%" PRId64 " c=%" PRId64,
                   index, (double)((const float *)value->data)[index],
                   f32_bits(((const float *)value->data)[index]), h, ch);
        return;
    }
    int64_t k = out_index == 1 ? index / 2 : index;
    append(buf, size, "loc=(%.9g, %.9g) attn=%.9g", (double)loc[2 * k], (double)loc[2 * k + 1],
           (double)attn[k]);
}

const ly_case_set ly_cases_msda = {.build = build, .count = count_cases, .describe = describe};

/* ---- grid_sample ------------------------------------------------------------------ */

/* Shapes of the portable form of ms_deform_attn (heads as the batch, a level's
 * map, queries x points as the grid) and odd ones; grids inside [-1, 1], on
 * pixel edges and centres, outside, and with NaN and inf; both modes and both
 * corner conventions. */
typedef struct grid_case {
    const char *name;
    int64_t N, C, H, W, Ho, Wo;
    int mode, align_corners;
    bool specials;
} grid_case;

static const grid_case grid_cases[] = {
    {"dfine_n level 0", 8, 16, 40, 40, 300, 6, 0, 0, false},
    {"rtdetr level 2", 8, 32, 20, 20, 300, 4, 0, 0, false},
    {"odd 3x13 of 5x7", 3, 13, 5, 7, 9, 4, 0, 0, false},
    {"1x1 map", 2, 5, 1, 1, 6, 3, 0, 0, false},
    {"align_corners", 2, 7, 6, 9, 5, 5, 0, 1, false},
    {"nearest", 2, 7, 6, 9, 5, 5, 1, 0, false},
    {"nearest align_corners", 2, 7, 6, 9, 5, 5, 1, 1, false},
    {"NaN, inf and far points", 2, 6, 4, 5, 8, 8, 0, 0, true},
    {"nearest NaN, inf and far points", 2, 6, 4, 5, 8, 8, 1, 0, true},
    {"no points", 1, 4, 3, 3, 0, 2, 0, 0, false},
};

static float grid_coordinate(ly_check_rng *r, int64_t size, bool specials)
{
    uint64_t kind = ly_check_rng_below(r, specials ? 8 : 5);
    float s = (float)size;
    switch (kind) {
    case 0: /* a pixel edge or centre: ((k / 2) * 2 + 1) / size - 1 */
        return ((float)ly_check_rng_below(r, (uint64_t)(2 * size + 1)) + 0.5f) / s - 1.0f;
    case 1: /* just outside */
        return (ly_check_rng_below(r, 2) ? 1.0f : -1.0f) * (1.0f + (float)ly_check_rng_unit(r) / s);
    case 5:
        return NAN;
    case 6:
        return ly_check_rng_below(r, 2) ? INFINITY : -INFINITY;
    case 7:
        return ly_check_rng_below(r, 2) ? 1e30f : -3e9f;
    default:
        return (float)(ly_check_rng_unit(r) * 2.2 - 1.1);
    }
}

static ly_status build_grid_sample(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    if (index < 0 || index >= (int64_t)(sizeof grid_cases / sizeof grid_cases[0]))
        return LY_E_NOT_FOUND;
    const grid_case *g = &grid_cases[index];
    snprintf(c->name, sizeof c->name,
             "%s: [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] at [%" PRId64 ",%" PRId64 "]",
             g->name, g->N, g->C, g->H, g->W, g->Ho, g->Wo);
    uint64_t seed = ly_check_seed("grid_sample", c->name);
    ly_status st = ly_check_case_random(c, 0, 4, (int64_t[]){g->N, g->C, g->H, g->W}, 4.0f, &seed);
    float *grid = st == LY_OK
                      ? ly_check_case_input(c, 1, LY_F32, 4, (int64_t[]){g->N, g->Ho, g->Wo, 2})
                      : NULL;
    if (st == LY_OK && !grid) st = LY_E_NO_MEMORY;
    if (st != LY_OK) return st;
    ly_check_rng r = {.state = seed};
    for (int64_t i = 0; i < g->N * g->Ho * g->Wo; i++) {
        grid[2 * i] = grid_coordinate(&r, g->W, g->specials);
        grid[2 * i + 1] = grid_coordinate(&r, g->H, g->specials);
    }
    ly_grid_sample_params p = {
        .mode = g->mode, .padding_mode = 0, .align_corners = g->align_corners};
    ly_check_case_params(c, &p, sizeof p);
    return LY_OK;
}

/* Benchmark: D-FINE-n's portable form, one level's value [8 heads, 16, s, s]
 * of `numel` elements sampled at 300 queries x 6 points inside the map. */
static ly_status bench_grid_sample(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)op;
    (void)b;
    int64_t side = (int64_t)sqrt((double)(numel / 128));
    if (side < 1) side = 1;
    snprintf(c->name, sizeof c->name, "[8,16,%" PRId64 ",%" PRId64 "] at 300x6 points", side, side);
    ly_status st = ly_check_case_normalish(c, 0, 4, (int64_t[]){8, 16, side, side}, 1);
    float *grid =
        st == LY_OK ? ly_check_case_input(c, 1, LY_F32, 4, (int64_t[]){8, 300, 6, 2}) : NULL;
    if (st == LY_OK && !grid) st = LY_E_NO_MEMORY;
    if (st != LY_OK) return st;
    ly_check_rng r = {.state = ly_check_seed("grid_sample", c->name)};
    for (int64_t i = 0; i < 8 * 300 * 6 * 2; i++)
        grid[i] = (float)(ly_check_rng_unit(&r) * 1.8 - 0.9);
    return LY_OK;
}

const ly_case_set ly_cases_grid_sample = {.build = build_grid_sample, .bench = bench_grid_sample};
