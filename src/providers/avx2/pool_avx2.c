/* SPDX-License-Identifier: MIT */
/*
 * max_pool2d for small windows at column stride 1 ("avx2"): HGNetv2's 2x2
 * stem pool (D-FINE, DEIM, DEIMv2). Bit-identical to the reference
 * (src/ops/nn/reference.c, max_pool_small): the same window positions in
 * the same order, each output taking v where v > best or v is NaN, eight
 * outputs side by side. Other windows and strides decline (the reference,
 * or oneDNN where it is faster, serves them).
 */
#include "core/core.h"
#include "libreyolo/nn.h"

#include <immintrin.h>
#include <math.h>

typedef struct pool_job {
    const float *x;
    float *y;
    int64_t h, w, ho, wo, kh, kw, sh, ph, pw;
} pool_job;

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* (v > best || v != v) ? v : best, eight lanes. */
static inline __m256 max_nan8(__m256 best, __m256 v)
{
    __m256 take =
        _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_ps(best, v, take);
}

static void pool_planes(void *ctx, int64_t begin, int64_t end)
{
    const pool_job *j = ctx;
    for (int64_t item = begin; item < end; item++) {
        const float *in = j->x + item * j->h * j->w;
        for (int64_t oy = 0; oy < j->ho; oy++) {
            float *out = j->y + (item * j->ho + oy) * j->wo;
            for (int64_t ox = 0; ox < j->wo; ox++)
                out[ox] = -INFINITY;
            for (int64_t ky = 0; ky < j->kh; ky++) {
                int64_t iy = oy * j->sh - j->ph + ky;
                if (iy < 0 || iy >= j->h) continue;
                const float *row = in + iy * j->w;
                for (int64_t kx = 0; kx < j->kw; kx++) {
                    /* output columns whose input column ox + shift lies in [0, w) */
                    int64_t shift = kx - j->pw;
                    int64_t lo = clamp64(-shift, 0, j->wo);
                    int64_t hi = clamp64(j->w - shift, lo, j->wo);
                    int64_t ox = lo;
                    for (; ox + 8 <= hi; ox += 8)
                        _mm256_storeu_ps(out + ox, max_nan8(_mm256_loadu_ps(out + ox),
                                                            _mm256_loadu_ps(row + ox + shift)));
                    for (; ox < hi; ox++) {
                        float v = row[ox + shift];
                        if (v > out[ox] || v != v) out[ox] = v;
                    }
                }
            }
        }
    }
}

ly_status ly_avx2_max_pool2d(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *y = call->out[0];
    const ly_pool2d_params *p = call->params;
    pool_job j = {.x = x->data,
                  .y = y->data,
                  .h = x->shape[2],
                  .w = x->shape[3],
                  .ho = y->shape[2],
                  .wo = y->shape[3],
                  .kh = p->kernel[0],
                  .kw = p->kernel[1],
                  .sh = p->stride[0],
                  .ph = p->padding[0],
                  .pw = p->padding[1]};
    int64_t planes = x->shape[0] * x->shape[1], work = ly_tensor_numel(y) * j.kh * j.kw;
    if (planes == 0 || j.ho == 0 || j.wo == 0) return LY_OK;
    int threads = work >= (1 << 16) ? ly_threads_resolve(call->threads) : 1;
    ly_parallel_for(planes, 1, threads, pool_planes, &j);
    return LY_OK;
}
