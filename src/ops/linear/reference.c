/* SPDX-License-Identifier: MIT */
/*
 * References of the matrix products: every output element is one sequential
 * f32 sum over k from +0, then + bias (linear: then its activation, as the
 * conv2d reference's, then + residual). linear rounds products and sums
 * separately; matmul chains fused multiply-adds, the sdpa reference's order
 * (ops/sdpa/reference.c: q.k and P.v), so attention written as matmul ->
 * softmax -> matmul gives the fused op's bits. Four outputs of a row are
 * computed side by side, each in that same order, so the loop runs at a
 * useful speed without changing a bit; rows are split over threads.
 */
#include "ops/nn/reference.h"
#include "core/core.h"
#include "ops/elementwise/broadcast.h"
#include "ops/ops_internal.h"

#include <math.h>

/* dot(x[0..k), w[j * ws + i * wk] for i < k) for j in 0..4. */
static void dot4(const float *x, const float *w, int64_t k, int64_t ws, int64_t wk, float acc[4])
{
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    const float *w0 = w, *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
    for (int64_t i = 0; i < k; i++) {
        float xi = x[i];
        a0 += xi * w0[i * wk];
        a1 += xi * w1[i * wk];
        a2 += xi * w2[i * wk];
        a3 += xi * w3[i * wk];
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

static void dot4_fma(const float *x, const float *w, int64_t k, int64_t ws, int64_t wk,
                     float acc[4])
{
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    const float *w0 = w, *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
    for (int64_t i = 0; i < k; i++) {
        float xi = x[i];
        a0 = fmaf(xi, w0[i * wk], a0);
        a1 = fmaf(xi, w1[i * wk], a1);
        a2 = fmaf(xi, w2[i * wk], a2);
        a3 = fmaf(xi, w3[i * wk], a3);
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

static float dot1_fma(const float *x, const float *w, int64_t k, int64_t wk)
{
    float acc = 0.0f;
    for (int64_t i = 0; i < k; i++)
        acc = fmaf(x[i], w[i * wk], acc);
    return acc;
}

static float dot1(const float *x, const float *w, int64_t k, int64_t wk)
{
    float acc = 0.0f;
    for (int64_t i = 0; i < k; i++)
        acc += x[i] * w[i * wk];
    return acc;
}

/* y[r][j] = sum_i x[r][i] * w(j, i) (+ bias[j]) for rows [begin, end), where
 * w(j, i) = w[j * ws + i * wk]. */
typedef struct gemm_job {
    const float *x, *w, *bias, *residual;
    float *y;
    int64_t k, n, ws, wk;
    bool fused; /* matmul's fused multiply-adds */
    int64_t activation;
    float alpha;
} gemm_job;

static float finish(const gemm_job *g, float acc, int64_t r, int64_t j)
{
    float v = g->bias ? acc + g->bias[j] : acc;
    v = ly_nn_activate(v, g->activation, g->alpha);
    return g->residual ? v + g->residual[r * g->n + j] : v;
}

static void gemm_rows(void *ctx, int64_t begin, int64_t end)
{
    const gemm_job *g = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *x = g->x + r * g->k;
        float *y = g->y + r * g->n;
        int64_t j = 0;
        for (; j + 4 <= g->n; j += 4) {
            float acc[4];
            (g->fused ? dot4_fma : dot4)(x, g->w + j * g->ws, g->k, g->ws, g->wk, acc);
            for (int t = 0; t < 4; t++)
                y[j + t] = finish(g, acc[t], r, j + t);
        }
        for (; j < g->n; j++)
            y[j] = finish(g, (g->fused ? dot1_fma : dot1)(x, g->w + j * g->ws, g->k, g->wk), r, j);
    }
}

static int threads_for(const ly_kernel_call *call, int64_t macs)
{
    return macs >= (1 << 18) ? ly_threads_resolve(call->threads) : 1;
}

ly_status ly_ref_linear(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_linear_params *p = LY_PARAMS(call, ly_linear_params);
    int64_t k = w->shape[1], n = w->shape[0];
    int64_t rows = k > 0 ? ly_tensor_numel(x) / k : ly_tensor_numel(call->out[0]) / (n ? n : 1);
    gemm_job g = {.x = x->data,
                  .w = w->data,
                  .bias = call->in[2] ? call->in[2]->data : NULL,
                  .residual = call->in[3] ? call->in[3]->data : NULL,
                  .y = call->out[0]->data,
                  .activation = p->activation,
                  .alpha = (float)p->alpha,
                  .k = k,
                  .n = n,
                  .ws = k,
                  .wk = 1};
    if (rows == 0 || n == 0) return LY_OK;
    ly_parallel_for(rows, 1, threads_for(call, rows * n * k), gemm_rows, &g);
    return LY_OK;
}

ly_status ly_ref_matmul(const ly_kernel_call *call)
{
    const ly_tensor *a = call->in[0], *b = call->in[1];
    ly_tensor *y = call->out[0];
    bool tb = LY_PARAMS(call, ly_matmul_params)->transpose_b != 0;
    int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
    int64_t n = y->shape[y->ndim - 1];
    ly_bcast bc;
    int64_t batches = ly_bcast_init_matrices(&bc, a, b, y);
    if (m == 0 || n == 0) return LY_OK;
    for (int64_t t = 0; t < batches; t++) {
        int64_t off[LY_BCAST_MAX_INPUTS];
        ly_bcast_offsets(&bc, t, off);
        gemm_job g = {.x = (const float *)a->data + off[0] * m * k,
                      .w = (const float *)b->data + off[1] * k * n,
                      .y = (float *)y->data + t * m * n,
                      .k = k,
                      .n = n,
                      .ws = tb ? k : 1,
                      .wk = tb ? 1 : n,
                      .fused = true};
        ly_parallel_for(m, 1, threads_for(call, m * n * k), gemm_rows, &g);
    }
    return LY_OK;
}
