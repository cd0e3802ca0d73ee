/* SPDX-License-Identifier: MIT */
/*
 * References of the elementwise ops: one IEEE operation per element (f32, no
 * contraction), in PyTorch's order where it has one. Broadcasting walks the
 * output row by row (broadcast.h); large outputs are split over threads by
 * rows, which changes no result.
 */
#include "ops/nn/reference.h"
#include "core/core.h"
#include "ops/elementwise/broadcast.h"
#include "ops/ops_internal.h"

#include <math.h>

/* Above this many elements a call is worth threads. */
#define PARALLEL_ELEMENTS (1 << 16)

typedef float (*binary_fn)(float a, float b);

/* The four arithmetic ops spelled out (arith_row), or ARITH_NONE for fn. */
typedef enum arith { ARITH_NONE, ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_DIV } arith;

typedef struct binary_job {
    ly_bcast b;
    const float *in[LY_BCAST_MAX_INPUTS];
    const uint8_t *cond; /* where */
    float *out;
    int64_t inner;
    binary_fn fn;
    arith arith;
} binary_job;

/* A row of contiguous or scalar operands as a plain loop the compiler can
 * vectorise: the same one IEEE operation per element as through `fn`. */

#define ARITH_LOOP(OP)                                                                             \
    do {                                                                                           \
        if (sa == 1 && sb == 1)                                                                    \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = a[i] OP b[i];                                                               \
        else if (sa == 1 && sb == 0)                                                               \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = a[i] OP b[0];                                                               \
        else if (sa == 0 && sb == 1)                                                               \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = a[0] OP b[i];                                                               \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++)                                                        \
                y[i] = a[i * sa] OP b[i * sb];                                                     \
    } while (0)

static bool arith_row(arith op, const float *a, int64_t sa, const float *b, int64_t sb, float *y,
                      int64_t n)
{
    switch (op) {
    case ARITH_ADD:
        ARITH_LOOP(+);
        return true;
    case ARITH_SUB:
        ARITH_LOOP(-);
        return true;
    case ARITH_MUL:
        ARITH_LOOP(*);
        return true;
    case ARITH_DIV:
        ARITH_LOOP(/);
        return true;
    default:
        return false;
    }
}

static void binary_rows(void *ctx, int64_t begin, int64_t end)
{
    const binary_job *j = ctx;
    ly_bcast_walk w;
    ly_bcast_walk_start(&j->b, begin, &w);
    for (int64_t r = begin; r < end; r++, ly_bcast_walk_next(&j->b, &w)) {
        const float *a = j->in[0] + w.offset[0], *b = j->in[1] + w.offset[1];
        float *y = j->out + r * j->inner;
        if (arith_row(j->arith, a, w.step[0], b, w.step[1], y, j->inner)) continue;
        for (int64_t i = 0; i < j->inner; i++)
            y[i] = j->fn(a[i * w.step[0]], b[i * w.step[1]]);
    }
}

static int threads_for(const ly_kernel_call *call, int64_t elements)
{
    return elements >= PARALLEL_ELEMENTS ? ly_threads_resolve(call->threads) : 1;
}

static ly_status run_binary(const ly_kernel_call *call, binary_fn fn, arith op)
{
    ly_tensor *y = call->out[0];
    binary_job j = {
        .in = {call->in[0]->data, call->in[1]->data}, .out = y->data, .fn = fn, .arith = op};
    ly_bcast_init(&j.b, 2, (const ly_tensor *const *)call->in, y);
    ly_bcast_coalesce(&j.b);
    int64_t rows = ly_bcast_rows(&j.b, &j.inner);
    if (ly_tensor_numel(y) == 0) return LY_OK;
    ly_parallel_for(rows, 1, threads_for(call, ly_tensor_numel(y)), binary_rows, &j);
    return LY_OK;
}

static float add_f(float a, float b)
{
    return a + b;
}

static float sub_f(float a, float b)
{
    return a - b;
}

static float mul_f(float a, float b)
{
    return a * b;
}

static float div_f(float a, float b)
{
    return a / b;
}

/* torch.maximum / torch.minimum: NaN wins (a's first), else std::max / std::min. */
static float maximum_f(float a, float b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return a < b ? b : a;
}

static float minimum_f(float a, float b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return b < a ? b : a;
}

ly_status ly_ref_add(const ly_kernel_call *call)
{
    return run_binary(call, add_f, ARITH_ADD);
}

ly_status ly_ref_sub(const ly_kernel_call *call)
{
    return run_binary(call, sub_f, ARITH_SUB);
}

ly_status ly_ref_mul(const ly_kernel_call *call)
{
    return run_binary(call, mul_f, ARITH_MUL);
}

ly_status ly_ref_div(const ly_kernel_call *call)
{
    return run_binary(call, div_f, ARITH_DIV);
}

ly_status ly_ref_maximum(const ly_kernel_call *call)
{
    return run_binary(call, maximum_f, ARITH_NONE);
}

ly_status ly_ref_minimum(const ly_kernel_call *call)
{
    return run_binary(call, minimum_f, ARITH_NONE);
}

static void where_rows(void *ctx, int64_t begin, int64_t end)
{
    const binary_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        int64_t off[LY_BCAST_MAX_INPUTS], step[LY_BCAST_MAX_INPUTS];
        ly_bcast_row(&j->b, r, off, step);
        const uint8_t *c = j->cond + off[0];
        const float *a = j->in[1] + off[1], *b = j->in[2] + off[2];
        float *y = j->out + r * j->inner;
        for (int64_t i = 0; i < j->inner; i++)
            y[i] = c[i * step[0]] ? a[i * step[1]] : b[i * step[2]];
    }
}

ly_status ly_ref_where(const ly_kernel_call *call)
{
    ly_tensor *y = call->out[0];
    binary_job j = {.cond = call->in[0]->data,
                    .in = {NULL, call->in[1]->data, call->in[2]->data},
                    .out = y->data};
    ly_bcast_init(&j.b, 3, (const ly_tensor *const *)call->in, y);
    int64_t rows = ly_bcast_rows(&j.b, &j.inner);
    if (ly_tensor_numel(y) == 0) return LY_OK;
    ly_parallel_for(rows, 1, threads_for(call, ly_tensor_numel(y)), where_rows, &j);
    return LY_OK;
}

/* ---- unary ------------------------------------------------------------------------ */

typedef struct unary_job {
    const float *x;
    float *y;
    float lo, hi; /* clamp */
    float (*fn)(const struct unary_job *j, float x);
} unary_job;

static float relu_f(const unary_job *j, float x);

static void unary_range(void *ctx, int64_t begin, int64_t end)
{
    const unary_job *j = ctx;
    if (j->fn == relu_f) {
        /* the same expression inline, so the compiler can vectorise it */
        for (int64_t i = begin; i < end; i++) {
            float x = j->x[i];
            j->y[i] = x > 0.0f || x != x ? x : 0.0f;
        }
        return;
    }
    for (int64_t i = begin; i < end; i++)
        j->y[i] = j->fn(j, j->x[i]);
}

static ly_status run_unary(const ly_kernel_call *call, unary_job j)
{
    int64_t n = ly_tensor_numel(call->in[0]);
    j.x = call->in[0]->data;
    j.y = call->out[0]->data;
    if (n > 0) ly_parallel_for(n, 4096, threads_for(call, n), unary_range, &j);
    return LY_OK;
}

/* torch.relu: NaN stays NaN (clamp_min), -0 becomes +0. */
static float relu_f(const unary_job *j, float x)
{
    (void)j;
    return x > 0.0f || isnan(x) ? x : 0.0f;
}

static float gelu_f(const unary_job *j, float x)
{
    (void)j;
    return ly_nn_gelu(x);
}

static float exp_f(const unary_job *j, float x)
{
    (void)j;
    return expf(x);
}

static float log_f(const unary_job *j, float x)
{
    (void)j;
    return logf(x);
}

static float sqrt_f(const unary_job *j, float x)
{
    (void)j;
    return sqrtf(x);
}

static float sin_f(const unary_job *j, float x)
{
    (void)j;
    return sinf(x);
}

static float cos_f(const unary_job *j, float x)
{
    (void)j;
    return cosf(x);
}

/* torch.clamp: NaN passes through, then min, then max. */
static float clamp_f(const unary_job *j, float x)
{
    if (isnan(x)) return x;
    if (x < j->lo) return j->lo;
    if (x > j->hi) return j->hi;
    return x;
}

ly_status ly_ref_relu(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = relu_f});
}

ly_status ly_ref_gelu(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = gelu_f});
}

ly_status ly_ref_exp(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = exp_f});
}

ly_status ly_ref_log(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = log_f});
}

ly_status ly_ref_sqrt(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = sqrt_f});
}

ly_status ly_ref_sin(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = sin_f});
}

ly_status ly_ref_cos(const ly_kernel_call *call)
{
    return run_unary(call, (unary_job){.fn = cos_f});
}

ly_status ly_ref_clamp(const ly_kernel_call *call)
{
    const ly_clamp_params *p = call->params;
    return run_unary(call, (unary_job){.fn = clamp_f, .lo = (float)p->min, .hi = (float)p->max});
}
