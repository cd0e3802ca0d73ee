/* SPDX-License-Identifier: MIT */
/* Parity cases of the shape ops: several dtypes, every axis, negative and
 * clamped bounds, steps, empty extents. */
#include "ops/cases.h"

#include "core/core.h"

#include <stdio.h>
#include <string.h>

/* in[index] of `dtype`, filled with distinct values. */
static ly_status filled(ly_check_case *c, int index, ly_dtype dtype, int ndim, const int64_t *shape,
                        uint64_t *seed)
{
    if (dtype == LY_F32) return ly_check_case_random(c, index, ndim, shape, 10.0f, seed);
    void *p = ly_check_case_input(c, index, dtype, ndim, shape);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    int64_t n = ly_tensor_numel(&c->in[index]);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == LY_I64)
            ((int64_t *)p)[i] = (int64_t)(i * 2654435761u % 100000) - 50000;
        else if (dtype == LY_I32)
            ((int32_t *)p)[i] = (int32_t)(i * 2654435761u % 100000) - 50000;
        else
            ((uint8_t *)p)[i] = (uint8_t)(i * 37 + 11);
    }
    return LY_OK;
}

typedef struct reshape_case {
    const char *name;
    ly_dtype dtype;
    int ndim;
    int64_t in[4];
    ly_reshape_params p;
} reshape_case;

static const reshape_case reshapes[] = {
    {"[1,144,20,20] -> [1,144,400]", LY_F32, 4, {1, 144, 20, 20}, {3, {1, 144, 400}}},
    {"[2,6,5] -> [-1,3] i64", LY_I64, 3, {2, 6, 5}, {2, {-1, 3}}},
    {"[300,4] -> [1,300,1,4] u8", LY_U8, 2, {300, 4}, {4, {1, 300, 1, 4}}},
    {"[7] -> [7,1]", LY_F32, 1, {7}, {2, {7, 1}}},
    {"[3,80,4,5] -> [keep,80,-1]", LY_F32, 4, {3, 80, 4, 5}, {3, {LY_RESHAPE_KEEP, 80, -1}}},
};

static ly_status build_reshape(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    if (index >= (int)(sizeof reshapes / sizeof reshapes[0])) return LY_E_NOT_FOUND;
    const reshape_case *r = &reshapes[index];
    snprintf(c->name, sizeof c->name, "%s", r->name);
    uint64_t seed = ly_check_seed("reshape", r->name);
    ly_check_case_params(c, &r->p, sizeof r->p);
    return filled(c, 0, r->dtype, r->ndim, r->in, &seed);
}

typedef struct permute_case {
    const char *name;
    ly_dtype dtype;
    int ndim;
    int64_t in[5];
    ly_permute_params p;
} permute_case;

static const permute_case permutes[] = {
    {"NCHW -> NHWC [1,32,20,20]", LY_F32, 4, {1, 32, 20, 20}, {4, {0, 2, 3, 1}}},
    {"NHWC -> NCHW [1,13,13,124]", LY_F32, 4, {1, 13, 13, 124}, {4, {0, 3, 1, 2}}},
    {"heads [1,197,3,6,32] -> [3,1,6,197,32]", LY_F32, 5, {1, 197, 3, 6, 32}, {5, {2, 0, 3, 1, 4}}},
    {"swap [3,300,4] i64", LY_I64, 3, {3, 300, 4}, {3, {0, 2, 1}}},
    /* transposes (the avx2 provider's 8 x 8 tiles, their edges, slabs of 256 rows) */
    {"SwinIR embed [1,60,48,40] -> NHWC", LY_F32, 4, {1, 60, 48, 40}, {4, {0, 2, 3, 1}}},
    {"SwinIR unembed [1,1920,60] -> [1,60,1920]", LY_F32, 3, {1, 1920, 60}, {3, {0, 2, 1}}},
    {"slabs [3,5,7,9] -> [3,9,5,7]", LY_F32, 4, {3, 5, 7, 9}, {4, {0, 3, 1, 2}}},
    {"slab axis apart [2,4,6,10,17] -> [4,17,2,6,10]",
     LY_F32,
     5,
     {2, 4, 6, 10, 17},
     {5, {1, 4, 0, 2, 3}}},
    {"i32 [300,19] -> [19,300]", LY_I32, 2, {300, 19}, {2, {1, 0}}},
    {"identity [5,0,2] u8", LY_U8, 3, {5, 0, 2}, {3, {0, 1, 2}}},
    /* runs: the innermost axis stays (the avx2 provider's odometer, short runs and long) */
    {"patches [3,24,16,24,16] -> [24,24,3,16,16]",
     LY_F32,
     5,
     {3, 24, 16, 24, 16},
     {5, {1, 3, 0, 2, 4}}},
    {"unwindow [2,2,12,12,384] -> [2,12,2,12,384]",
     LY_F32,
     5,
     {2, 2, 12, 12, 384},
     {5, {0, 2, 1, 3, 4}}},
    {"runs of 13 [4,3,13] -> [3,4,13]", LY_F32, 3, {4, 3, 13}, {3, {1, 0, 2}}},
};

static ly_status build_permute(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    if (index >= (int)(sizeof permutes / sizeof permutes[0])) return LY_E_NOT_FOUND;
    const permute_case *r = &permutes[index];
    snprintf(c->name, sizeof c->name, "%s", r->name);
    uint64_t seed = ly_check_seed("permute", r->name);
    ly_check_case_params(c, &r->p, sizeof r->p);
    return filled(c, 0, r->dtype, r->ndim, r->in, &seed);
}

typedef struct slice_case {
    const char *name;
    ly_dtype dtype;
    int ndim;
    int64_t in[4];
    ly_slice_params p;
} slice_case;

static const slice_case slices[] = {
    {"channels 0:64 of [1,144,20,20]", LY_F32, 4, {1, 144, 20, 20}, {1, 0, 64, 1}},
    {"channels 64: of [1,144,20,20]", LY_F32, 4, {1, 144, 20, 20}, {1, 64, INT64_MAX, 1}},
    {"last axis -2: of [2,300,4]", LY_F32, 3, {2, 300, 4}, {-1, -2, INT64_MAX, 1}},
    {"step 2 on axis 0 of [9,5] i64", LY_I64, 2, {9, 5}, {0, 1, 8, 2}},
    {"clamped 3:100 of [2,7]", LY_F32, 2, {2, 7}, {1, 3, 100, 1}},
    {"empty 5:2 of [6,3] u8", LY_U8, 2, {6, 3}, {0, 5, 2, 1}},
};

static ly_status build_slice(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    if (index >= (int)(sizeof slices / sizeof slices[0])) return LY_E_NOT_FOUND;
    const slice_case *r = &slices[index];
    snprintf(c->name, sizeof c->name, "%s", r->name);
    uint64_t seed = ly_check_seed("slice", r->name);
    ly_check_case_params(c, &r->p, sizeof r->p);
    return filled(c, 0, r->dtype, r->ndim, r->in, &seed);
}

typedef struct concat_case {
    const char *name;
    ly_dtype dtype;
    int n, ndim;
    int64_t axis;
    int64_t in[3][4];
} concat_case;

static const concat_case concats[] = {
    {"channels 24+24 [1,*,10,10]", LY_F32, 2, 4, 1, {{1, 24, 10, 10}, {1, 24, 10, 10}}},
    {"anchors [1,84,*] x3", LY_F32, 3, 3, 2, {{1, 84, 6400}, {1, 84, 1600}, {1, 84, 400}}},
    {"rows [*,4] i64", LY_I64, 2, 2, 0, {{3, 4}, {5, 4}}},
    {"last axis -1 [2,3,*] u8", LY_U8, 2, 3, -1, {{2, 3, 1}, {2, 3, 2}}},
    {"with an empty part", LY_F32, 3, 2, 0, {{2, 5}, {0, 5}, {1, 5}}},
    {"a batch of 3 and a padding of 1 [*,8,5,*]", LY_F32, 2, 4, 3, {{3, 8, 5, 6}, {1, 8, 5, 1}}},
};

static ly_status build_concat(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    if (index >= (int)(sizeof concats / sizeof concats[0])) return LY_E_NOT_FOUND;
    const concat_case *r = &concats[index];
    snprintf(c->name, sizeof c->name, "%s", r->name);
    uint64_t seed = ly_check_seed("concat", r->name);
    ly_concat_params p = {.axis = r->axis};
    ly_check_case_params(c, &p, sizeof p);
    for (int i = 0; i < r->n; i++) {
        ly_status st = filled(c, i, r->dtype, r->ndim, r->in[i], &seed);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

const ly_case_set ly_cases_reshape = {.build = build_reshape};
/* A channels-first map to channels last, [1, 64, H, 256] -> [1, H, 256, 64]:
 * the transpose SwinIR's token embedding makes (its innermost axis moves). */
static ly_status bench_permute(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)op;
    (void)b;
    int64_t h = (int64_t)(numel / (64 * 256));
    if (h < 1) h = 1;
    snprintf(c->name, sizeof c->name, "[1,64,%lld,256] -> NHWC", (long long)h);
    ly_permute_params p = {4, {0, 2, 3, 1}};
    ly_check_case_params(c, &p, sizeof p);
    return ly_check_case_normalish(c, 0, 4, (int64_t[]){1, 64, h, 256}, 1);
}

const ly_case_set ly_cases_permute = {.build = build_permute, .bench = bench_permute};
const ly_case_set ly_cases_slice = {.build = build_slice};
const ly_case_set ly_cases_concat = {.build = build_concat};
