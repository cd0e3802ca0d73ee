/* SPDX-License-Identifier: MIT */
/*
 * topk of a few largest along contiguous rows ("avx2"): a row's best class
 * (k = 1 of 80) and LQE's top 4 of 33 in the DETR heads. The reference keeps
 * the k best so far and compares every element through a function pointer
 * (~4 ns an element: D-FINE-n's [2000, 80] took 0.65 ms a run at 1 thread);
 * here eight elements at a time are compared with the k-th value kept, and
 * only those that beat it (or are NaN, which ranks first) go through the
 * reference's insertion, in the same order. The same total order (descending,
 * NaN first, ties by the lower index), so the same values and indices.
 */
#include "core/core.h"
#include "libreyolo/kernels.h"
#include "libreyolo/ops.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

typedef struct kept_value {
    float value;
    int64_t index;
} kept_value;

/* a ranks before b: torch.topk(largest=True)'s order */
static inline bool ranks_before(float a, int64_t ia, float b, int64_t ib)
{
    bool na = isnan(a), nb = isnan(b);
    if (na != nb) return na;
    if (!na && a != b) return a > b;
    return ia < ib;
}

typedef struct topk_job {
    const float *x;
    float *values;
    int64_t *indices;
    int64_t extent, k;
} topk_job;

static void offer(kept_value *kept, int64_t *n, int64_t k, float v, int64_t j)
{
    if (*n == k && !ranks_before(v, j, kept[k - 1].value, kept[k - 1].index)) return;
    int64_t at = *n < k ? (*n)++ : k - 1;
    for (; at > 0 && ranks_before(v, j, kept[at - 1].value, kept[at - 1].index); at--)
        kept[at] = kept[at - 1];
    kept[at] = (kept_value){v, j};
}

static void topk_rows(void *ctx, int64_t begin, int64_t end)
{
    const topk_job *t = ctx;
    kept_value kept[16];
    for (int64_t r = begin; r < end; r++) {
        const float *row = t->x + r * t->extent;
        int64_t n = 0, j = 0;
        for (; j < t->extent && n < t->k; j++)
            offer(kept, &n, t->k, row[j], j);
        for (; j + 8 <= t->extent; j += 8) {
            /* a NaN kept last means every kept one is NaN: nothing later ranks before it */
            float last = kept[t->k - 1].value;
            if (isnan(last)) break;
            __m256 v = _mm256_loadu_ps(row + j);
            __m256 beats = _mm256_or_ps(_mm256_cmp_ps(v, _mm256_set1_ps(last), _CMP_GT_OQ),
                                        _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            int lanes = _mm256_movemask_ps(beats);
            while (lanes) {
                int lane = __builtin_ctz((unsigned)lanes);
                lanes &= lanes - 1;
                offer(kept, &n, t->k, row[j + lane], j + lane);
            }
        }
        for (; j < t->extent; j++)
            offer(kept, &n, t->k, row[j], j);
        for (int64_t i = 0; i < t->k; i++) {
            t->values[r * t->k + i] = kept[i].value;
            t->indices[r * t->k + i] = kept[i].index;
        }
    }
}

bool ly_avx2_topk_takes(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    const ly_topk_params *p = call->params;
    if (!x || !p || x->dtype != LY_F32 || x->ndim < 1 || !p->largest) return false;
    int64_t axis = p->axis < 0 ? p->axis + x->ndim : p->axis;
    if (axis != x->ndim - 1) return false; /* contiguous rows only */
    int64_t extent = x->shape[axis];
    return p->k >= 1 && p->k <= 16 && p->k * 8 <= extent;
}

ly_status ly_avx2_topk(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    const ly_topk_params *p = call->params;
    int64_t extent = x->shape[x->ndim - 1], numel = ly_tensor_numel(x);
    topk_job t = {x->data, call->out[0]->data, call->out[1]->data, extent, p->k};
    if (numel == 0) return LY_OK;
    int threads = numel >= (1 << 15) ? ly_threads_resolve(call->threads) : 1;
    ly_parallel_for(numel / extent, 16, threads, topk_rows, &t);
    return LY_OK;
}
