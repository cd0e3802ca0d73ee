/* SPDX-License-Identifier: MIT */
/*
 * softmax over the last axis ("avx2"), bit-identical to the reference
 * (src/ops/norm/reference.c): the reference keeps eight running lanes per row
 * (element k in lane k mod 8), which is exactly a ymm register walking the row,
 * and reduces them with the trees of exp_avx2.h; exp is its expf lane for lane.
 * D-FINE's and DEIM's decoders (attention weights, FDR bins) and ViT's manual
 * attention run through it. Softmax over another axis declines (the reference
 * serves it).
 */
#include "core/core.h"
#include "libreyolo/kernels.h"
#include "providers/avx2/exp_avx2.h"

typedef struct softmax_job {
    const float *x;
    float *y;
    int64_t n;
} softmax_job;

static void softmax_rows(void *ctx, int64_t begin, int64_t end)
{
    const softmax_job *job = ctx;
    const int64_t n = job->n, full = n & ~(int64_t)7, rem = n - full;
    const __m256 live = tail_mask(rem);
    const __m256i live_i = _mm256_castps_si256(live);
    for (int64_t r = begin; r < end; r++) {
        const float *x = job->x + r * n;
        float *y = job->y + r * n;
        __m256 mx = _mm256_set1_ps(-INFINITY);
        for (int64_t j = 0; j < full; j += 8)
            mx = _mm256_max_ps(_mm256_loadu_ps(x + j), mx);
        if (rem) {
            __m256 t = _mm256_maskload_ps(x + full, live_i);
            mx = _mm256_max_ps(_mm256_blendv_ps(_mm256_set1_ps(-INFINITY), t, live), mx);
        }
        __m256 m = _mm256_set1_ps(hmax8(mx));
        __m256 sum = _mm256_setzero_ps();
        for (int64_t j = 0; j < full; j += 8) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), m));
            _mm256_storeu_ps(y + j, e);
            sum = _mm256_add_ps(sum, e);
        }
        if (rem) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + full, live_i), m));
            _mm256_maskstore_ps(y + full, live_i, e);
            sum = _mm256_add_ps(sum, _mm256_and_ps(e, live));
        }
        __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
        for (int64_t j = 0; j < full; j += 8)
            _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), inv));
        if (rem)
            _mm256_maskstore_ps(y + full, live_i,
                                _mm256_mul_ps(_mm256_maskload_ps(y + full, live_i), inv));
    }
}

ly_status ly_avx2_softmax(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t axis = LY_PARAMS(call, ly_axis_params)->axis;
    if (axis < 0) axis += x->ndim; /* the last one: the predicate saw to it */
    softmax_job job = {.x = x->data, .y = call->out[0]->data, .n = x->shape[axis]};
    int64_t numel = ly_tensor_numel(x);
    if (job.n == 0 || numel == 0) return LY_OK;
    /* As the reference: rows are worth threads from a [197, 192] map up. */
    int threads = numel >= (1 << 15) ? ly_threads_resolve(call->threads) : 1;
    ly_parallel_for(numel / job.n, 1, threads, softmax_rows, &job);
    return LY_OK;
}
