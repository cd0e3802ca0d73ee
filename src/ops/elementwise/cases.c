/* SPDX-License-Identifier: MIT */
/*
 * Parity cases of the elementwise ops: equal shapes, every kind of broadcast
 * (trailing, leading, both sides, a scalar, 0-d, empty), and the values that
 * decide NaN and signed-zero handling.
 */
#include "ops/cases.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct shape_pair {
    const char *name;
    int na, nb;
    int64_t a[4], b[4];
} shape_pair;

static const shape_pair pairs[] = {
    {"same [2,3,37]", 3, 3, {2, 3, 37}, {2, 3, 37}},
    {"row [2,3,37] + [37]", 3, 1, {2, 3, 37}, {37}},
    {"column [4,5,1] + [4,1,6]", 3, 3, {4, 5, 1}, {4, 1, 6}},
    {"scalar [3,300,4] + [1]", 3, 1, {3, 300, 4}, {1}},
    {"lhs broadcast [1,8400] + [4,8400]", 2, 2, {1, 8400}, {4, 8400}},
    {"0-d + [5]", 0, 1, {0}, {5}},
    {"empty [0,5] + [5]", 2, 1, {0, 5}, {5}},
    {"large [1,197,192] + [192]", 3, 1, {1, 197, 192}, {192}},
};
#define N_PAIRS (int)(sizeof pairs / sizeof pairs[0])

/* Every 16th value one of the awkward ones. */
static void sprinkle(ly_tensor *t, uint64_t seed)
{
    static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e38f};
    float *p = t->data;
    int64_t n = ly_tensor_numel(t);
    ly_check_rng r = {.state = seed};
    for (int64_t i = 0; i < n; i++)
        if (ly_check_rng_below(&r, 16) == 0)
            p[i] = specials[ly_check_rng_below(&r, sizeof specials / sizeof specials[0])];
}

/* a into in[ia], b into in[ib], each sprinkled with the awkward values. */
static ly_status binary_operands(ly_op op, int64_t index, ly_check_case *c, int ia, int ib)
{
    if (index >= N_PAIRS) return LY_E_NOT_FOUND;
    const shape_pair *s = &pairs[index];
    snprintf(c->name, sizeof c->name, "%s", s->name);
    uint64_t seed = ly_check_seed(ly_op_name(op), s->name);
    ly_status st = ly_check_case_random(c, ia, s->na, s->a, 3.0f, &seed);
    if (st == LY_OK) st = ly_check_case_random(c, ib, s->nb, s->b, 3.0f, &seed);
    if (st != LY_OK) return st;
    sprinkle(&c->in[ia], seed);
    sprinkle(&c->in[ib], seed + 1);
    return LY_OK;
}

/* add, sub, mul, div, maximum, minimum */
static ly_status binary_case(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)full;
    return binary_operands(op, index, c, 0, 1);
}

const ly_case_set ly_cases_binary = {.build = binary_case};

static ly_status where_case(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)full;
    /* a, b as the binary ops draw them; the condition broadcasts along a's shape. */
    ly_status st = binary_operands(op, index, c, 1, 2);
    if (st != LY_OK) return st;
    const ly_tensor *a = &c->in[1];
    uint8_t *cond = ly_check_case_input(c, 0, LY_U8, a->ndim, a->shape);
    if (!cond) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    for (int64_t i = 0; i < ly_tensor_numel(a); i++)
        cond[i] = (uint8_t)((i * 7 + index) % 3 == 0 ? 0 : (i % 5) + 1);
    return LY_OK;
}

const ly_case_set ly_cases_where = {.build = where_case};

typedef struct unary_spec {
    const char *name;
    int ndim;
    int64_t shape[4];
    float scale, offset;
} unary_spec;

static const unary_spec unaries[] = {
    {"[64,40] in [-4, 4)", 2, {64, 40}, 4.0f, 0.0f},
    {"[3,7] in [-100, 100)", 2, {3, 7}, 100.0f, 0.0f},
    {"[1,197,768] in [-8, 8)", 3, {1, 197, 768}, 8.0f, 0.0f},
    {"[5] positive", 1, {5}, 1.0f, 1.5f},
    {"0-d", 0, {0}, 2.0f, 0.0f},
    {"empty [0]", 1, {0}, 1.0f, 0.0f},
};
#define N_UNARIES (int)(sizeof unaries / sizeof unaries[0])

/* relu, gelu, exp, log, sqrt, sin, cos */
static ly_status unary_case(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)full;
    if (index >= N_UNARIES) return LY_E_NOT_FOUND;
    const unary_spec *u = &unaries[index];
    snprintf(c->name, sizeof c->name, "%s", u->name);
    uint64_t seed = ly_check_seed(ly_op_name(op), u->name);
    ly_status st = ly_check_case_random(c, 0, u->ndim, u->shape, u->scale, &seed);
    if (st != LY_OK) return st;
    float *x = c->in[0].data;
    for (int64_t i = 0; i < ly_tensor_numel(&c->in[0]); i++)
        x[i] += u->offset;
    sprinkle(&c->in[0], seed);
    return LY_OK;
}

/* Benchmark calls: a flat map, roughly normal(0, 1) as activations are (a
 * transformer MLP's GELU input), made positive for log and sqrt. */
static ly_status unary_bench(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)b;
    snprintf(c->name, sizeof c->name, "[%zu]", numel);
    ly_status st = ly_check_case_normalish(c, 0, 1, (int64_t[]){(int64_t)numel}, 1);
    if (st != LY_OK || (op != LY_OP_LOG && op != LY_OP_SQRT)) return st;
    float *x = c->in[0].data;
    for (size_t i = 0; i < numel; i++)
        x[i] = fabsf(x[i]) + 0.5f;
    return LY_OK;
}

const ly_case_set ly_cases_unary = {.build = unary_case, .bench = unary_bench};

static ly_status clamp_case(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    if (index >= 2 * N_UNARIES) return LY_E_NOT_FOUND;
    ly_status st = unary_case(op, index % N_UNARIES, full, c);
    if (st != LY_OK) return st;
    /* D-FINE's clamps: +-10 on the query position, +-65504 before a norm. */
    ly_clamp_params p = index < N_UNARIES ? (ly_clamp_params){.min = -10.0, .max = 10.0}
                                          : (ly_clamp_params){.min = 0.0, .max = HUGE_VAL};
    ly_check_case_params(c, &p, sizeof p);
    size_t len = strlen(c->name);
    snprintf(c->name + len, sizeof c->name - len, index < N_UNARIES ? " to [-10, 10]" : " >= 0");
    return LY_OK;
}

const ly_case_set ly_cases_clamp = {.build = clamp_case};
