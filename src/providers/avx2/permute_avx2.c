/* SPDX-License-Identifier: MIT */
/*
 * permute of 4-byte elements ("avx2"): where the innermost axis moves, a
 * blocked transpose; where it stays, runs copied whole (runs_range). The reference walks the output
 * in order and gathers its innermost axis element by element from far-apart addresses, which on
 * SwinIR's [60, 256 x 256] <-> [256 x 256, 60] maps (the token embedding and
 * its inverse around each residual group) ran at ~1/10 of copy bandwidth.
 *
 * After merging the axes that stay adjacent and in order (and dropping
 * extent-1 axes), such a permute is a set of 2-D slabs: along output axis m
 * (the input's innermost, stride 1 in the input) and along the output's
 * innermost axis (stride 1 in the output). Each slab is copied in 8 x 8 tiles
 * transposed in registers (transpose_slab). A copy: every output element is
 * the input element the reference picks.
 */
#include "core/core.h"
#include "libreyolo/kernels.h"
#include "libreyolo/ops.h"

#include "providers/avx2/transpose_avx2.h"

#include <string.h>

/* The permute as merged axes: y's extents and the input stride of each. */
typedef struct slabs {
    int nd;
    int64_t shape[LY_MAX_DIMS], stride[LY_MAX_DIMS];
    int m;                /* the axis whose input stride is 1 */
    int64_t out_stride_m; /* output stride of axis m */
    int64_t outer;        /* slabs: the product of the other axes but the last */
    const float *x;
    float *y;
} slabs;

/* Merges y's axes (x strides from perm) and drops extent-1 ones; false when
 * nothing is left. */
static bool merge_axes(const ly_kernel_call *call, slabs *s)
{
    const ly_tensor *x = call->in[0];
    const ly_permute_params *p = LY_PARAMS(call, ly_permute_params);
    int nd = (int)x->ndim;
    int64_t in_stride[LY_MAX_DIMS];
    if (nd == 0) return false;
    in_stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--)
        in_stride[d] = in_stride[d + 1] * x->shape[d + 1];
    s->nd = 0;
    for (int i = 0; i < nd; i++) {
        int64_t extent = x->shape[p->perm[i]], stride = in_stride[p->perm[i]];
        if (extent == 1) continue;
        if (s->nd > 0 && s->stride[s->nd - 1] == stride * extent) {
            s->shape[s->nd - 1] *= extent;
            s->stride[s->nd - 1] = stride;
            continue;
        }
        s->shape[s->nd] = extent;
        s->stride[s->nd] = stride;
        s->nd++;
    }
    s->x = x->data;
    s->y = call->out[0]->data;
    return s->nd > 0;
}

/* The merged axes of a permute whose innermost axis moves (a transpose). */
static bool slabs_of(const ly_kernel_call *call, slabs *s)
{
    if (!merge_axes(call, s)) return false;
    if (s->nd < 2 || s->stride[s->nd - 1] == 1) return false;
    s->m = -1;
    for (int i = 0; i < s->nd - 1; i++)
        if (s->stride[i] == 1) s->m = i;
    if (s->m < 0) return false;
    s->out_stride_m = 1;
    for (int i = s->m + 1; i < s->nd; i++)
        s->out_stride_m *= s->shape[i];
    s->outer = 1;
    for (int i = 0; i < s->nd - 1; i++)
        if (i != s->m) s->outer *= s->shape[i];
    return true;
}

/* y[a * ldy + b] = x[b * ldx + a] for a < na, b < nb, in 8 x 8 tiles over
 * blocks of 64 along b, so the rows of x a block reads stay in cache while
 * its tiles walk along a (SwinIR's [65536, 60] -> [60, 65536] read its input
 * four times without); the edges are copied as 32-bit words: no float
 * arithmetic touches an element. */
static void transpose_slab(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t na,
                           int64_t nb)
{
    const uint32_t *xw = (const uint32_t *)x;
    uint32_t *yw = (uint32_t *)y;
    int64_t na8 = na & ~(int64_t)7, nb8 = nb & ~(int64_t)7;
    for (int64_t b0 = 0; b0 < nb8; b0 += 64) {
        int64_t b1 = b0 + 64 < nb8 ? b0 + 64 : nb8;
        for (int64_t a = 0; a < na8; a += 8)
            for (int64_t b = b0; b < b1; b += 8)
                ly_avx2_transpose8x8(x + b * ldx + a, ldx, y + a * ldy + b, ldy);
        for (int64_t a = na8; a < na; a++)
            for (int64_t b = b0; b < b1; b++)
                yw[a * ldy + b] = xw[b * ldx + a];
    }
    for (int64_t a = 0; a < na; a++)
        for (int64_t b = nb8; b < nb; b++)
            yw[a * ldy + b] = xw[b * ldx + a];
}

#define CHUNK 256 /* slab rows along m per work item: whole cache lines */

/* Work items [begin, end): item k is rows [CHUNK * (k % chunks), ...) along m
 * of slab k / chunks, slabs in output order of the axes other than m and the
 * last. */
static void slabs_range(void *ctx, int64_t begin, int64_t end)
{
    const slabs *s = ctx;
    int last = s->nd - 1;
    int64_t na = s->shape[s->m], chunks = (na + CHUNK - 1) / CHUNK;
    for (int64_t item = begin; item < end; item++) {
        int64_t in = 0, out = 0, rest = item / chunks, out_stride = s->shape[last];
        for (int i = last - 1; i >= 0; i--) {
            if (i == s->m) {
                out_stride *= s->shape[i];
                continue;
            }
            int64_t index = rest % s->shape[i];
            rest /= s->shape[i];
            in += index * s->stride[i];
            out += index * out_stride;
            out_stride *= s->shape[i];
        }
        int64_t a0 = item % chunks * CHUNK, rows = na - a0 < CHUNK ? na - a0 : CHUNK;
        transpose_slab(s->x + in + a0, s->stride[last], s->y + out + a0 * s->out_stride_m,
                       s->out_stride_m, rows, s->shape[last]);
    }
}

/* ---- the innermost axis stays: runs of contiguous elements ---------------------- *
 *
 * After merging, y is rows of shape[nd - 1] contiguous elements, each a run
 * of x at a place the outer axes give. The reference gathers its rows
 * by the unmerged innermost axis and computes each row's place from scratch,
 * a memcpy call each: RF-DETR's patch embedding ([1,3,24,16,24,16] ->
 * [1,24,24,3,16,16], runs of 16) took 0.5 ms at 1 thread. Here an odometer
 * walks the outer axes and short runs go through registers. */

static bool runs_of(const ly_kernel_call *call, slabs *s)
{
    return merge_axes(call, s) && s->nd >= 2 && s->stride[s->nd - 1] == 1;
}

static inline void copy_run(const float *x, float *y, int64_t n)
{
    if (n >= 64) {
        memcpy(y, x, (size_t)n * sizeof(float));
        return;
    }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_loadu_ps(x + i));
    memcpy(y + i, x + i, (size_t)(n - i) * sizeof(float));
}

/* Rows [begin, end) of y. */
static void runs_range(void *ctx, int64_t begin, int64_t end)
{
    const slabs *s = ctx;
    int last = s->nd - 1;
    int64_t run = s->shape[last], index[LY_MAX_DIMS] = {0}, in = 0;
    int64_t rest = begin;
    for (int i = last - 1; i >= 0; i--) {
        index[i] = rest % s->shape[i];
        rest /= s->shape[i];
        in += index[i] * s->stride[i];
    }
    float *y = s->y + begin * run;
    for (int64_t row = begin; row < end; row++, y += run) {
        copy_run(s->x + in, y, run);
        for (int i = last - 1; i >= 0; i--) {
            in += s->stride[i];
            if (++index[i] < s->shape[i]) break;
            in -= s->shape[i] * s->stride[i];
            index[i] = 0;
        }
    }
}

/* Whether the provider takes a call: 4-byte elements, a transpose or runs. */
bool ly_avx2_permute_takes(const ly_kernel_call *call)
{
    slabs s;
    return ly_dtype_size(call->in[0]->dtype) == 4 && ly_tensor_numel(call->in[0]) > 0 &&
           (slabs_of(call, &s) || runs_of(call, &s));
}

ly_status ly_avx2_permute(const ly_kernel_call *call)
{
    slabs s;
    if (!ly_avx2_permute_takes(call)) return LY_E_DECLINED;
    int64_t bytes = ly_tensor_numel(call->in[0]) * 4;
    int threads = bytes >= (64 << 10) ? ly_threads_resolve(call->threads) : 1;
    if (slabs_of(call, &s)) {
        int64_t items = s.outer * ((s.shape[s.m] + CHUNK - 1) / CHUNK);
        ly_parallel_for(items, 1, threads, slabs_range, &s);
        return LY_OK;
    }
    if (!runs_of(call, &s)) return LY_E_DECLINED;
    int64_t rows = ly_tensor_numel(call->in[0]) / s.shape[s.nd - 1];
    ly_parallel_for(rows, 1, threads, runs_range, &s);
    return LY_OK;
}
