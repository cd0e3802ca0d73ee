/* SPDX-License-Identifier: MIT */
/*
 * resize_bilinear2d on channel-blocked maps ([N][C/B][H][W][B], B = 8 or 16):
 * the reference's taps (ly_nn_resize_axis_fill) and its arithmetic, h0 * (w0 *
 * a + w1 * b) + h1 * (w0 * c + w1 * d) with every product and sum rounded to
 * f32, on eight channels at a time: bit-identical to the reference. What it
 * buys is the layout: NanoDet's FPN resizes between its convolutions, and with
 * the reference (plain maps only) the planner kept those maps plain, so the
 * convolutions around the four resizes reordered their inputs or outputs on
 * every call. Plain maps (and calls outside a graph) go on to the reference.
 */
#include "core/core.h"
#include "core/layout.h"
#include "ops/nn/reference.h"
#include "providers/builtin.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

/* Below this many output elements a resize runs on the calling thread. */
#define RESIZE_PARALLEL_MIN (1 << 16)

typedef struct resize_state {
    int64_t n, blocks, h, w, ho, wo;
    int block, threads;
    ly_nn_resize_axis ax_h, ax_w;
    int64_t *index; /* the taps' storage: i0/i1 of both axes, then w0/w1 */
    float *weight;
} resize_state;

typedef struct resize_run {
    const resize_state *s;
    const float *x;
    float *y;
} resize_run;

/* Rows are (image, block, output row) triples. */
static void resize_rows(void *ctx, int64_t begin, int64_t end)
{
    const resize_run *r = ctx;
    const resize_state *s = r->s;
    const int64_t b = s->block, in_plane = s->h * s->w * b, out_plane = s->ho * s->wo * b;
    for (int64_t row = begin; row < end; row++) {
        int64_t plane = row / s->ho, oy = row % s->ho;
        const float *in = r->x + plane * in_plane;
        const float *r0 = in + s->ax_h.i0[oy] * s->w * b, *r1 = in + s->ax_h.i1[oy] * s->w * b;
        __m256 h0 = _mm256_set1_ps(s->ax_h.w0[oy]), h1 = _mm256_set1_ps(s->ax_h.w1[oy]);
        float *out = r->y + plane * out_plane + oy * s->wo * b;
        for (int64_t ox = 0; ox < s->wo; ox++) {
            int64_t x0 = s->ax_w.i0[ox] * b, x1 = s->ax_w.i1[ox] * b;
            __m256 w0 = _mm256_set1_ps(s->ax_w.w0[ox]), w1 = _mm256_set1_ps(s->ax_w.w1[ox]);
            for (int64_t k = 0; k < b; k += 8) {
                __m256 top = _mm256_add_ps(_mm256_mul_ps(w0, _mm256_loadu_ps(r0 + x0 + k)),
                                           _mm256_mul_ps(w1, _mm256_loadu_ps(r0 + x1 + k)));
                __m256 bottom = _mm256_add_ps(_mm256_mul_ps(w0, _mm256_loadu_ps(r1 + x0 + k)),
                                              _mm256_mul_ps(w1, _mm256_loadu_ps(r1 + x1 + k)));
                _mm256_storeu_ps(out + ox * b + k,
                                 _mm256_add_ps(_mm256_mul_ps(h0, top), _mm256_mul_ps(h1, bottom)));
            }
        }
    }
}

static ly_status resize_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    ly_layouts_channelwise(call, out);
    return LY_OK;
}

static void resize_release(void *state)
{
    resize_state *s = state;
    if (!s) return;
    free(s->index);
    free(s->weight);
    free(s);
}

static ly_status resize_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                void **state)
{
    ly_layout layout = info->in_layout[0];
    if (layout == LY_LAYOUT_PLAIN || info->out_layout[0] != layout) return LY_E_DECLINED;
    const ly_tensor *x = call->in[0], *y = call->out[0];
    resize_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "resize_bilinear2d (avx2): out of memory");
    s->block = layout == LY_LAYOUT_NCHW16C ? 16 : 8;
    s->n = x->shape[0];
    s->blocks = x->shape[1] / s->block;
    s->h = x->shape[2];
    s->w = x->shape[3];
    s->ho = y->shape[2];
    s->wo = y->shape[3];
    s->threads = ly_tensor_numel(y) < RESIZE_PARALLEL_MIN ? 1 : info->threads;
    size_t taps = (size_t)(s->ho + s->wo);
    s->index = malloc(2 * taps * sizeof *s->index);
    s->weight = malloc(2 * taps * sizeof *s->weight);
    if (!s->index || !s->weight) {
        resize_release(s);
        return ly_set_error(LY_E_NO_MEMORY, "resize_bilinear2d (avx2): out of memory");
    }
    s->ax_h = (ly_nn_resize_axis){s->index, s->index + s->ho, s->weight, s->weight + s->ho};
    s->ax_w = (ly_nn_resize_axis){s->index + 2 * s->ho, s->index + 2 * s->ho + s->wo,
                                  s->weight + 2 * s->ho, s->weight + 2 * s->ho + s->wo};
    const ly_resize_bilinear2d_params *p = call->params;
    bool align = p->align_corners != 0, half = p->half_pixel_centers != 0;
    ly_nn_resize_axis_fill(&s->ax_h, s->h, s->ho, align, half);
    ly_nn_resize_axis_fill(&s->ax_w, s->w, s->wo, align, half);
    *state = s;
    return LY_OK;
}

static ly_status resize_run_state(void *state, const ly_kernel_call *call)
{
    const resize_state *s = state;
    resize_run r = {s, call->in[0]->data, call->out[0]->data};
    ly_parallel_for(s->n * s->blocks * s->ho, 1, s->threads, resize_rows, &r);
    return LY_OK;
}

/* Plain maps (and calls outside a graph) go on to the reference. */
ly_status ly_avx2_resize_plain(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_DECLINED;
}

const ly_kernel_stateful ly_avx2_resize_stateful = {.layouts = resize_layouts,
                                                    .prepare = resize_prepare,
                                                    .run = resize_run_state,
                                                    .release = resize_release};
