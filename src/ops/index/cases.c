/* SPDX-License-Identifier: MIT */
/* Parity cases of the index ops: DETR query selection shapes, ties and NaN for
 * topk, both dtypes for cumsum, indices at both ends of the range. */
#include "ops/cases.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>

static ly_status indices(ly_check_case *c, int slot, int ndim, const int64_t *shape, int64_t bound,
                         uint64_t seed)
{
    int64_t *p = ly_check_case_input(c, slot, LY_I64, ndim, shape);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    ly_check_rng r = {.state = seed};
    int64_t n = ly_tensor_numel(&c->in[slot]);
    for (int64_t i = 0; i < n; i++)
        p[i] = i == 0 ? 0 : i == 1 ? bound - 1 : (int64_t)ly_check_rng_below(&r, (uint64_t)bound);
    return LY_OK;
}

static ly_status build_gather(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    uint64_t seed;
    ly_gather_params p = {.axis = 1};
    ly_status st;
    switch (index) {
    case 0:
        snprintf(c->name, sizeof c->name, "queries [1,2000,128] by [1,300,128] on axis 1");
        seed = ly_check_seed("gather", c->name);
        st = ly_check_case_random(c, 0, 3, (int64_t[]){1, 2000, 128}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 3, (int64_t[]){1, 300, 128}, 2000, seed);
        break;
    case 1:
        snprintf(c->name, sizeof c->name, "narrower index [4,3] of [5,6] on axis 0");
        p.axis = 0;
        seed = ly_check_seed("gather", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){5, 6}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 2, (int64_t[]){4, 3}, 5, seed);
        break;
    case 2:
        snprintf(c->name, sizeof c->name, "last axis -1 [2,9] by [2,4]");
        p.axis = -1;
        seed = ly_check_seed("gather", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){2, 9}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 2, (int64_t[]){2, 4}, 9, seed);
        break;
    default:
        return LY_E_NOT_FOUND;
    }
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

static ly_status build_index_select(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    uint64_t seed;
    ly_gather_params p = {.axis = 0};
    ly_status st;
    switch (index) {
    case 0:
        snprintf(c->name, sizeof c->name, "300 anchors of [2000,4]");
        seed = ly_check_seed("index_select", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){2000, 4}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 1, (int64_t[]){300}, 2000, seed);
        break;
    case 1:
        snprintf(c->name, sizeof c->name, "columns of [3,10] on axis 1, repeated");
        p.axis = 1;
        seed = ly_check_seed("index_select", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){3, 10}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 1, (int64_t[]){25}, 10, seed);
        break;
    case 2:
        snprintf(c->name, sizeof c->name, "no index [0] of [4,4]");
        seed = ly_check_seed("index_select", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){4, 4}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 1, (int64_t[]){0}, 4, seed);
        break;
    case 3:
        snprintf(c->name, sizeof c->name, "per image: 30 queries each of [3,200,8]");
        p.axis = 1;
        p.per_image = 30;
        seed = ly_check_seed("index_select", c->name);
        st = ly_check_case_random(c, 0, 3, (int64_t[]){3, 200, 8}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 1, (int64_t[]){90}, 200, seed);
        break;
    case 4:
        snprintf(c->name, sizeof c->name, "per image: 30 anchors each of one [1,200,4]");
        p.axis = 1;
        p.per_image = 30;
        seed = ly_check_seed("index_select", c->name);
        st = ly_check_case_random(c, 0, 3, (int64_t[]){1, 200, 4}, 2.0f, &seed);
        if (st == LY_OK) st = indices(c, 1, 1, (int64_t[]){60}, 200, seed);
        break;
    default:
        return LY_E_NOT_FOUND;
    }
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

static ly_status build_topk(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[3];
        ly_topk_params p;
        bool ties, nan;
    } cases[] = {
        {"query selection 300 of [1,2000]", 2, {1, 2000}, {300, -1, 1}, false, false},
        {"post-processing 300 of [1,24000]", 2, {1, 24000}, {300, -1, 1}, false, false},
        {"ties broken by index, [3,64] k 10", 2, {3, 64}, {10, 1, 1}, true, false},
        {"NaN ranks first, [2,33] k 4", 2, {2, 33}, {4, -1, 1}, false, true},
        {"smallest, NaN last, [2,33] k 5", 2, {2, 33}, {5, -1, 0}, true, true},
        {"axis 0 of [50,3] k 7", 2, {50, 3}, {7, 0, 1}, false, false},
        {"k 0 of [4,6]", 2, {4, 6}, {0, -1, 1}, false, false},
        /* a few of each row (the avx2 provider's) */
        {"a token's best class, [2000,80] k 1", 2, {2000, 80}, {1, -1, 1}, false, false},
        {"LQE's top 4, [1200,33] k 4", 2, {1200, 33}, {4, -1, 1}, false, false},
        {"ties broken by index, [5,40] k 2", 2, {5, 40}, {2, -1, 1}, true, false},
        {"NaN ranks first, [40,81] k 3", 2, {40, 81}, {3, -1, 1}, false, true},
    };
    if (index >= (int)(sizeof cases / sizeof cases[0])) return LY_E_NOT_FOUND;
    snprintf(c->name, sizeof c->name, "%s", cases[index].name);
    uint64_t seed = ly_check_seed("topk", c->name);
    ly_status st = ly_check_case_random(c, 0, cases[index].ndim, cases[index].shape, 5.0f, &seed);
    if (st != LY_OK) return st;
    float *x = c->in[0].data;
    int64_t n = ly_tensor_numel(&c->in[0]);
    for (int64_t i = 0; i < n; i++) {
        if (cases[index].ties) x[i] = roundf(x[i]); /* few distinct values */
        if (cases[index].nan && i % 11 == 3) x[i] = NAN;
    }
    ly_check_case_params(c, &cases[index].p, sizeof cases[index].p);
    return LY_OK;
}

static ly_status build_cumsum(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    uint64_t seed;
    ly_axis_params p = {.axis = -1};
    ly_status st = LY_OK;
    switch (index) {
    case 0:
        snprintf(c->name, sizeof c->name, "f32 [3,700] on the last axis");
        seed = ly_check_seed("cumsum", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){3, 700}, 1.0f, &seed);
        break;
    case 1:
        snprintf(c->name, sizeof c->name, "f32 [40,5] on axis 0");
        p.axis = 0;
        seed = ly_check_seed("cumsum", c->name);
        st = ly_check_case_random(c, 0, 2, (int64_t[]){40, 5}, 1.0f, &seed);
        break;
    case 2: {
        snprintf(c->name, sizeof c->name, "i64 [2,3,4] on axis 1");
        p.axis = 1;
        int64_t *v = ly_check_case_input(c, 0, LY_I64, 3, (int64_t[]){2, 3, 4});
        if (!v) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
        for (int i = 0; i < 24; i++)
            v[i] = (i * 7) % 5 - 2;
        break;
    }
    default:
        return LY_E_NOT_FOUND;
    }
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

const ly_case_set ly_cases_gather = {.build = build_gather};
const ly_case_set ly_cases_index_select = {.build = build_index_select};
/* A token's best class, as the DETR heads select queries: [numel / 80, 80], k 1. */
static ly_status bench_topk(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)op;
    (void)b;
    int64_t rows = (int64_t)(numel / 80);
    if (rows < 1) rows = 1;
    snprintf(c->name, sizeof c->name, "[%lld,80] k 1", (long long)rows);
    ly_topk_params p = {.k = 1, .axis = -1, .largest = 1};
    ly_check_case_params(c, &p, sizeof p);
    return ly_check_case_normalish(c, 0, 2, (int64_t[]){rows, 80}, 1);
}

const ly_case_set ly_cases_topk = {.build = build_topk, .bench = bench_topk};
const ly_case_set ly_cases_cumsum = {.build = build_cumsum};
