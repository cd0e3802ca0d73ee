/* SPDX-License-Identifier: MIT */
/*
 * References of the normalisations. Row statistics are summed in double and
 * rounded once, so the numbers do not depend on a summation order (libraries
 * that sum in float land within the tolerance):
 *   softmax     the sdpa reference's: m = max, e = its expf(x - m), s = sum e in
 *               eight lanes, y = e * (1 / s) (a NaN makes the row NaN);
 *   layer_norm  mean, variance (biased) in double, r = 1 / sqrt(var + eps),
 *               y = (float)((x - mean) * r) * weight + bias;
 *   rms_norm    r = 1 / sqrt(mean(x^2) + eps) in double, y = (float)(x * r) * scale.
 */
#include "core/core.h"
#include "ops/ops_internal.h"
#include "ops/sdpa/sdpa_internal.h"

#include <math.h>
#include <stdlib.h>

/* Rows are worth threads from a transformer's [197, 192] tokens up: a row
 * costs two passes in double, and a range starts on a waiting team. */
static int threads_for(const ly_kernel_call *call, int64_t elements)
{
    return elements >= (1 << 15) ? ly_threads_resolve(call->threads) : 1;
}

typedef struct softmax_job {
    const float *x;
    float *y;
    int64_t extent, inner;
} softmax_job;

/* The sdpa reference's softmax (ops/sdpa/reference.c), so attention written
 * as matmul -> softmax -> matmul gives the fused op's bits: the max, then
 * exp(x - max) with its expf, summed in eight lanes (k mod 8) reduced in a
 * fixed tree, and multiplied by the reciprocal of the sum. */
static void softmax_rows(void *ctx, int64_t begin, int64_t end)
{
    const softmax_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / j->inner, i = r % j->inner;
        const float *x = j->x + o * j->extent * j->inner + i;
        float *y = j->y + o * j->extent * j->inner + i;
        float lane[8];
        for (int t = 0; t < 8; t++)
            lane[t] = -INFINITY;
        for (int64_t k = 0; k < j->extent; k++)
            lane[k & 7] = ly_sdpa_max(x[k * j->inner], lane[k & 7]);
        float m = ly_sdpa_lanes_max(lane);
        for (int t = 0; t < 8; t++)
            lane[t] = 0.0f;
        for (int64_t k = 0; k < j->extent; k++) {
            float e = ly_sdpa_expf_inline(x[k * j->inner] - m);
            y[k * j->inner] = e;
            lane[k & 7] += e;
        }
        float inv = 1.0f / ly_sdpa_lanes_sum(lane);
        for (int64_t k = 0; k < j->extent; k++)
            y[k * j->inner] = y[k * j->inner] * inv;
    }
}

ly_status ly_ref_softmax(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t axis = LY_PARAMS(call, ly_axis_params)->axis;
    if (axis < 0) axis += x->ndim;
    softmax_job j = {.x = x->data, .y = call->out[0]->data, .extent = x->shape[axis], .inner = 1};
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; d++)
        outer *= x->shape[d];
    for (int64_t d = axis + 1; d < x->ndim; d++)
        j.inner *= x->shape[d];
    int64_t rows = outer * j.inner;
    if (rows > 0 && j.extent > 0)
        ly_parallel_for(rows, 1, threads_for(call, ly_tensor_numel(x)), softmax_rows, &j);
    return LY_OK;
}

typedef struct norm_job {
    const float *x, *w, *b;
    float *y;
    int64_t c;
    double eps;
    bool rms;
} norm_job;

static void norm_rows(void *ctx, int64_t begin, int64_t end)
{
    const norm_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *x = j->x + r * j->c;
        float *y = j->y + r * j->c;
        double mean = 0.0, var = 0.0;
        if (j->rms) {
            for (int64_t k = 0; k < j->c; k++)
                var += (double)x[k] * (double)x[k];
            var /= (double)j->c;
        } else {
            for (int64_t k = 0; k < j->c; k++)
                mean += x[k];
            mean /= (double)j->c;
            for (int64_t k = 0; k < j->c; k++)
                var += ((double)x[k] - mean) * ((double)x[k] - mean);
            var /= (double)j->c;
        }
        double rstd = 1.0 / sqrt(var + j->eps);
        for (int64_t k = 0; k < j->c; k++) {
            float v = (float)(((double)x[k] - mean) * rstd);
            if (j->w) v = v * j->w[k];
            if (j->b) v = v + j->b[k];
            y[k] = v;
        }
    }
}

static ly_status run_norm(const ly_kernel_call *call, bool rms)
{
    const ly_tensor *x = call->in[0];
    norm_job j = {.x = x->data,
                  .w = call->in[1] ? call->in[1]->data : NULL,
                  .b = !rms && call->in[2] ? call->in[2]->data : NULL,
                  .y = call->out[0]->data,
                  .c = x->shape[x->ndim - 1],
                  .eps = LY_PARAMS(call, ly_norm_params)->eps,
                  .rms = rms};
    if (j.c == 0) return LY_OK;
    int64_t rows = ly_tensor_numel(x) / j.c;
    if (rows > 0) ly_parallel_for(rows, 1, threads_for(call, ly_tensor_numel(x)), norm_rows, &j);
    return LY_OK;
}

ly_status ly_ref_layer_norm(const ly_kernel_call *call)
{
    return run_norm(call, false);
}

ly_status ly_ref_rms_norm(const ly_kernel_call *call)
{
    return run_norm(call, true);
}
