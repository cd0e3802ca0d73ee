/* SPDX-License-Identifier: MIT */
/*
 * dfl on AVX-512, sixteen anchors a vector: the reference's steps (the max
 * over the bins, exp of each difference, their sum, then sum_b b * (e_b / s),
 * both in bin order) with exp_avx2.h's exp, one pass over an anchor block's
 * bins held in registers (YOLO9's 16 bins), split over threads by anchor
 * blocks. Within the slot's tolerance of the reference (expf), not
 * bit-identical. oneDNN's provider made an eltwise primitive a call and ran
 * the loops around it on SSE: LibreYOLO9t's 4 x 16 x 8400 box logits took
 * ~0.5-0.9 ms, hardly less on two threads.
 */
#include "core/core.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/builtin.h"

#define ANCHOR_BLOCK 256 /* anchors a work item takes */
#define MAX_BINS 32

typedef struct dfl_job {
    const float *in;
    float *out;
    int64_t bins, anchors, blocks; /* blocks: anchor blocks per (image, side) */
} dfl_job;

LY_AVX512 static void dfl_items(void *ctx, int64_t begin, int64_t end)
{
    const dfl_job *j = ctx;
    const int64_t bins = j->bins, anchors = j->anchors;
    for (int64_t item = begin; item < end; item++) {
        int64_t g = item / j->blocks, a0 = item % j->blocks * ANCHOR_BLOCK;
        int64_t a1 = a0 + ANCHOR_BLOCK < anchors ? a0 + ANCHOR_BLOCK : anchors;
        const float *rows = j->in + g * bins * anchors;
        float *dst = j->out + g * anchors;
        for (int64_t a = a0; a < a1; a += 16) {
            __mmask16 live = a1 - a >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (a1 - a)) - 1u);
            __m512 x[MAX_BINS], max = _mm512_set1_ps(-INFINITY);
            for (int64_t b = 0; b < bins; b++) {
                x[b] = _mm512_maskz_loadu_ps(live, rows + b * anchors + a);
                /* the reference's max: a NaN, once seen, stays */
                __mmask16 take = _mm512_cmp_ps_mask(x[b], max, _CMP_GT_OQ) |
                                 _mm512_cmp_ps_mask(x[b], x[b], _CMP_UNORD_Q);
                max = _mm512_mask_blend_ps(take, max, x[b]);
            }
            __m512 sum = _mm512_setzero_ps();
            for (int64_t b = 0; b < bins; b++) {
                x[b] = exp16(_mm512_sub_ps(x[b], max));
                sum = _mm512_add_ps(sum, x[b]);
            }
            __m512 acc = _mm512_setzero_ps();
            for (int64_t b = 0; b < bins; b++)
                acc = _mm512_add_ps(
                    acc, _mm512_mul_ps(_mm512_set1_ps((float)b), _mm512_div_ps(x[b], sum)));
            _mm512_mask_storeu_ps(dst + a, live, acc);
        }
    }
}

bool ly_avx512_dfl_fits(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    return x && x->ndim == 3 && x->shape[1] % 4 == 0 && x->shape[1] / 4 <= MAX_BINS;
}

ly_status ly_avx512_dfl(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t n = x->shape[0], bins = x->shape[1] / 4, anchors = x->shape[2];
    dfl_job j = {x->data, call->out[0]->data, bins, anchors,
                 (anchors + ANCHOR_BLOCK - 1) / ANCHOR_BLOCK};
    int64_t items = n * 4 * j.blocks;
    int threads = ly_tensor_numel(x) >= (1 << 16) ? ly_threads_resolve(call->threads) : 1;
    if (items > 0) ly_parallel_for(items, 1, threads, dfl_items, &j);
    return LY_OK;
}
