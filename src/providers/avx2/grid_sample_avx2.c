/* SPDX-License-Identifier: MIT */
/*
 * grid_sample on AVX2, bit-identical to the reference (ops/msda/reference.c):
 * the same taps per grid point (ly_grid_taps_of, one definition), computed
 * once per point instead of once per channel, and eight channels a step
 * gathered from their planes and summed as the reference sums them
 * (acc = acc + v * w, a product then a sum, each rounded: no FMA). Points
 * are split among threads. The portable form of ms_deform_attn spends its
 * time here (D-FINE-n: 16 channels, 300 x 6 points per head and level).
 */
#include "core/core.h"
#include "ops/msda/msda_internal.h"

#include <immintrin.h>
#include <stdint.h>

typedef struct grid_job {
    const float *in, *grid;
    float *out;
    int64_t n, C, H, W, points;
    bool corners, nearest;
} grid_job;

static void grid_range(void *ctx, int64_t begin, int64_t end)
{
    const grid_job *j = ctx;
    const int64_t plane = j->H * j->W;
    /* gather offsets are 32-bit (the predicate checks C * H * W fits) */
    const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32((int32_t)plane));
    const float *in = j->in + j->n * j->C * plane;
    float *out = j->out + j->n * j->C * j->points;
    for (int64_t i = begin; i < end; i++) {
        ly_grid_taps t;
        ly_grid_taps_of(j->grid + (j->n * j->points + i) * 2, j->H, j->W, j->corners, j->nearest,
                        &t);
        int64_t c = 0;
        if (t.n > 0) {
            for (; c + 8 <= j->C; c += 8) {
                const float *base = in + c * plane;
                __m256 acc = _mm256_setzero_ps();
                for (int k = 0; k < t.n; k++) {
                    __m256 v = _mm256_i32gather_ps(base + t.off[k], lanes, 4);
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(v, _mm256_set1_ps(t.w[k])));
                }
                float lane[8];
                _mm256_storeu_ps(lane, acc);
                for (int l = 0; l < 8; l++)
                    out[(c + l) * j->points + i] = lane[l];
            }
        }
        for (; c < j->C; c++) {
            const float *p = in + c * plane;
            float acc = t.n == -1 ? p[t.off[0]] : 0.0f;
            for (int k = 0; k < t.n; k++)
                acc = acc + p[t.off[k]] * t.w[k];
            out[c * j->points + i] = acc;
        }
    }
}

ly_status ly_grid_sample_avx2(const ly_kernel_call *call)
{
    const ly_grid_sample_params *p = LY_PARAMS(call, ly_grid_sample_params);
    const ly_tensor *x = call->in[0], *grid = call->in[1];
    grid_job j = {.in = x->data,
                  .grid = grid->data,
                  .out = call->out[0]->data,
                  .C = x->shape[1],
                  .H = x->shape[2],
                  .W = x->shape[3],
                  .points = grid->shape[1] * grid->shape[2],
                  .corners = p->align_corners != 0,
                  .nearest = p->mode == 1};
    for (int64_t n = 0; n < x->shape[0]; n++) {
        j.n = n;
        ly_parallel_for(j.points, 64, call->threads, grid_range, &j);
    }
    return LY_OK;
}
