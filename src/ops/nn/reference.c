/* SPDX-License-Identifier: MIT */
/*
 * References of the network-op slots: plain loops that define the numbers.
 *
 * conv2d: every output is acc = 0, then acc += x * w over input channel c, then
 * kernel row ky, then kernel column kx, in that order (terms that fall in the
 * zero padding are skipped, which adds nothing), then + bias, the activation,
 * + residual. Built with -ffp-contract=off, so no product is fused into an FMA.
 * The loops run over an output tile per (c, ky, kx) so that the innermost loop
 * walks contiguous memory (and vectorises across outputs) while each output
 * still sees its terms in the order above.
 */
#include "ops/nn/reference.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many output elements an op runs on the calling thread: starting
 * threads costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS (1 << 18)

/* Accumulator tile of the reference convolution: 16 KiB, well inside L1/L2. */
#define CONV_TILE_ELEMENTS 4096
#define CONV_TILE_MAX_COLS 512

static int threads_for(const ly_kernel_call *call, int64_t elements)
{
    if (elements < PARALLEL_MIN_ELEMENTS) return 1;
    return ly_threads_resolve(call->threads);
}

float ly_nn_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

float ly_nn_silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* torch's scalar GELU (approximate="none"). */
float ly_nn_gelu(float x)
{
    return x * 0.5f * (1.0f + erff(x * (float)M_SQRT1_2));
}

float ly_nn_activate(float x, int64_t activation, float alpha)
{
    switch (activation) {
    case LY_ACT_SILU:
        return ly_nn_silu(x);
    case LY_ACT_SIGMOID:
        return ly_nn_sigmoid(x);
    case LY_ACT_RELU:
        return x < 0.0f ? 0.0f : x; /* NaN stays NaN, as PyTorch */
    case LY_ACT_LEAKY_RELU:
        return x < 0.0f ? x * alpha : x;
    case LY_ACT_GELU:
        return ly_nn_gelu(x);
    default:
        return x;
    }
}

float ly_nn_conv_finish(float x, const ly_nn_conv_geometry *g)
{
    float v = ly_nn_activate(x, g->activation, g->alpha);
    if (!g->post_affine) return v;
    float scaled = v * g->post_scale; /* two roundings, as x * s then + b in the graph */
    return scaled + g->post_shift;
}

int64_t ly_nn_out_extent(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation)
{
    int64_t span = dilation * (kernel - 1) + 1;
    int64_t room = in + 2 * padding - span;
    if (room < 0 || stride < 1) return 0;
    return room / stride + 1;
}

/* Floor and ceiling division that are right for negative numerators. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return -floor_div(-a, b);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- conv2d ------------------------------------------------------------------------- */

void ly_nn_conv_geometry_of(const ly_kernel_call *call, ly_nn_conv_geometry *g)
{
    const ly_tensor *x = call->in[0], *w = call->in[1], *y = call->out[0];
    const ly_conv2d_params *p = call->params;
    *g = (ly_nn_conv_geometry){.n = x->shape[0],
                               .c = x->shape[1],
                               .h = x->shape[2],
                               .w = x->shape[3],
                               .o = w->shape[0],
                               .kh = w->shape[2],
                               .kw = w->shape[3],
                               .ho = y->shape[2],
                               .wo = y->shape[3],
                               .sh = p->stride[0],
                               .sw = p->stride[1],
                               .ph = p->padding[0],
                               .pw = p->padding[1],
                               .dh = p->dilation[0],
                               .dw = p->dilation[1],
                               .groups = p->groups,
                               .activation = p->activation,
                               .alpha = (float)p->alpha,
                               .post_affine = p->post_affine != 0,
                               .post_scale = (float)p->post_scale,
                               .post_shift = (float)p->post_shift};
}

typedef struct conv_job {
    ly_nn_conv_geometry g;
    const float *x, *weight, *bias, *residual;
    float *y;
} conv_job;

/* One output tile [oy0, oy1) x [ox0, ox1) of output channel `oc` of image `n`. */
static void conv_tile(const conv_job *job, int64_t n, int64_t oc, int64_t oy0, int64_t oy1,
                      int64_t ox0, int64_t ox1, float *acc)
{
    const ly_nn_conv_geometry *g = &job->g;
    int64_t cg = g->c / g->groups, og = g->o / g->groups, group = oc / og;
    int64_t cols = ox1 - ox0, rows = oy1 - oy0;
    for (int64_t i = 0; i < rows * cols; i++)
        acc[i] = 0.0f;

    for (int64_t ci = 0; ci < cg; ci++) {
        const float *plane = job->x + ((n * g->c) + group * cg + ci) * g->h * g->w;
        const float *wk = job->weight + ((oc * cg) + ci) * g->kh * g->kw;
        for (int64_t ky = 0; ky < g->kh; ky++) {
            for (int64_t kx = 0; kx < g->kw; kx++) {
                float wv = wk[ky * g->kw + kx];
                /* Output columns whose input column ox*sw - pw + kx*dw lies inside [0, w). */
                int64_t shift = kx * g->dw - g->pw;
                int64_t lo = clamp64(ceil_div(-shift, g->sw), ox0, ox1);
                int64_t hi = clamp64(floor_div(g->w - 1 - shift, g->sw) + 1, lo, ox1);
                for (int64_t oy = oy0; oy < oy1; oy++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    if (iy < 0 || iy >= g->h) continue;
                    const float *row = plane + iy * g->w;
                    float *a = acc + (oy - oy0) * cols;
                    if (g->sw == 1) {
                        for (int64_t ox = lo; ox < hi; ox++)
                            a[ox - ox0] += row[ox + shift] * wv;
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++)
                            a[ox - ox0] += row[ox * g->sw + shift] * wv;
                    }
                }
            }
        }
    }

    float bias = job->bias ? job->bias[oc] : 0.0f;
    int64_t plane_out = ((n * g->o) + oc) * g->ho * g->wo;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        float *out = job->y + plane_out + oy * g->wo;
        const float *res = job->residual ? job->residual + plane_out + oy * g->wo : NULL;
        const float *a = acc + (oy - oy0) * cols;
        for (int64_t ox = ox0; ox < ox1; ox++) {
            float v = ly_nn_conv_finish(a[ox - ox0] + bias, g);
            out[ox] = res ? v + res[ox] : v;
        }
    }
}

/* Work items are (image, output channel) planes. */
static void conv_range(void *ctx, int64_t begin, int64_t end)
{
    const conv_job *job = ctx;
    const ly_nn_conv_geometry *g = &job->g;
    float acc[CONV_TILE_ELEMENTS];
    int64_t tile_cols = g->wo < CONV_TILE_MAX_COLS ? g->wo : CONV_TILE_MAX_COLS;
    int64_t tile_rows = tile_cols > 0 ? CONV_TILE_ELEMENTS / tile_cols : 1;
    for (int64_t item = begin; item < end; item++) {
        int64_t n = item / g->o, oc = item % g->o;
        for (int64_t oy = 0; oy < g->ho; oy += tile_rows) {
            int64_t oy1 = oy + tile_rows < g->ho ? oy + tile_rows : g->ho;
            for (int64_t ox = 0; ox < g->wo; ox += tile_cols) {
                int64_t ox1 = ox + tile_cols < g->wo ? ox + tile_cols : g->wo;
                conv_tile(job, n, oc, oy, oy1, ox, ox1, acc);
            }
        }
    }
}

ly_status ly_ref_conv2d(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *w = call->in[1];
    conv_job job = {
        .x = x->data,
        .weight = w->data,
        .bias = call->in[2] ? call->in[2]->data : NULL,
        .residual = call->in[3] ? call->in[3]->data : NULL,
        .y = call->out[0]->data,
    };
    ly_nn_conv_geometry_of(call, &job.g);
    int64_t planes = job.g.n * job.g.o;
    if (planes == 0 || job.g.ho == 0 || job.g.wo == 0) return LY_OK;
    int64_t macs = ly_tensor_numel(call->out[0]) * (job.g.c / job.g.groups) * job.g.kh * job.g.kw;
    ly_parallel_for(planes, 1, threads_for(call, macs), conv_range, &job);
    return LY_OK;
}

/* conv2d_int8 as its contract reads: the input through the int8 affine
 * fake-quant reference, the codes times their channel's scale, then conv2d's
 * reference on the two f32 tensors. */
ly_status ly_ref_conv2d_int8(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *codes = call->in[1], *scale = call->in[4];
    ly_tensor xq = *x, w = *codes;
    w.dtype = LY_F32;
    int64_t nx = ly_tensor_numel(x), nw = ly_tensor_numel(codes);
    xq.data = malloc((size_t)(nx > 0 ? nx : 1) * sizeof(float));
    w.data = malloc((size_t)(nw > 0 ? nw : 1) * sizeof(float));
    ly_status st = LY_OK;
    if (!xq.data || !w.data) {
        st = ly_set_error(LY_E_NO_MEMORY, "conv2d_int8 (reference): out of memory");
        goto done;
    }
    ly_kernel_call quant = *call;
    quant.in[0] = x;
    quant.in[1] = call->in[5];
    quant.in[2] = call->in[6];
    quant.in[3] = NULL;
    quant.out[0] = &xq;
    quant.params = NULL;
    if ((st = ly_ref_fake_quant_int8_affine(&quant)) != LY_OK) goto done;
    const int8_t *c = codes->data;
    const float *s = scale->data;
    int64_t per_channel = codes->shape[0] > 0 ? nw / codes->shape[0] : 0;
    for (int64_t i = 0; i < nw; i++)
        ((float *)w.data)[i] = (float)c[i] * s[i / per_channel];
    ly_kernel_call conv = *call;
    conv.in[0] = &xq;
    conv.in[1] = &w;
    conv.in[4] = conv.in[5] = conv.in[6] = NULL;
    st = ly_ref_conv2d(&conv);
done:
    free(xq.data);
    free(w.data);
    return st;
}

/* Shared by the providers that leave bias, activation and residual to us. */
typedef struct epilogue_job {
    float *out;
    const float *bias, *residual;
    int64_t channels, plane, activation;
    float alpha;
} epilogue_job;

static void epilogue_range(void *ctx, int64_t begin, int64_t end)
{
    const epilogue_job *job = ctx;
    for (int64_t item = begin; item < end; item++) {
        float bias = job->bias ? job->bias[item % job->channels] : 0.0f;
        float *out = job->out + item * job->plane;
        const float *res = job->residual ? job->residual + item * job->plane : NULL;
        for (int64_t i = 0; i < job->plane; i++) {
            float v = ly_nn_activate(out[i] + bias, job->activation, job->alpha);
            out[i] = res ? v + res[i] : v;
        }
    }
}

void ly_nn_conv_epilogue(float *out, const float *bias, const float *residual, int64_t n,
                         int64_t channels, int64_t plane, int64_t activation, float alpha,
                         int threads)
{
    if (!bias && !residual && activation == LY_ACT_NONE) return;
    epilogue_job job = {out, bias, residual, channels, plane, activation, alpha};
    int64_t items = n * channels;
    if (items * plane < PARALLEL_MIN_ELEMENTS) threads = 1;
    ly_parallel_for(items, 1, threads, epilogue_range, &job);
}

/* ---- pooling ------------------------------------------------------------------------- */

typedef struct pool_job {
    const float *x;
    float *y;
    float *rows; /* max pool: per plane, each input row's maximum over the kernel width */
    int64_t h, w, ho, wo, kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
} pool_job;

/* Output columns [lo, hi) whose input column ox*stride + shift lies in [0, w). */
static void valid_columns(int64_t shift, int64_t stride, int64_t w, int64_t wo, int64_t *lo,
                          int64_t *hi)
{
    *lo = clamp64(ceil_div(-shift, stride), 0, wo);
    *hi = clamp64(floor_div(w - 1 - shift, stride) + 1, *lo, wo);
}

/* Items are (image, channel) planes. Max is exact whatever the order, so the
 * window is taken in two passes: each input row's maximum over the kernel
 * width (into `rows`, one row per input row), then the maximum of those over
 * the kernel height, each pass running over contiguous outputs. Padding is
 * -inf, so it never wins (it is skipped); NaN wins, as PyTorch propagates it. */
static float max_nan(float best, float v)
{
    return (v > best || v != v) ? v : best; /* v != v: NaN, in a form that vectorises */
}

/* Small windows (HGNetv2's 2x2 stem pool) straight from the input rows: no
 * row-maxima buffer to fill and read back. */
static void max_pool_small(const pool_job *j, int64_t begin, int64_t end)
{
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
                    int64_t shift = kx - j->pw, lo, hi;
                    valid_columns(shift, j->sw, j->w, j->wo, &lo, &hi);
                    if (j->sw == 1)
                        for (int64_t ox = lo; ox < hi; ox++)
                            out[ox] = max_nan(out[ox], row[ox + shift]);
                    else
                        for (int64_t ox = lo; ox < hi; ox++)
                            out[ox] = max_nan(out[ox], row[ox * j->sw + shift]);
                }
            }
        }
    }
}

enum { SMALL_POOL_WINDOW = 9 };

static void max_pool_range(void *ctx, int64_t begin, int64_t end)
{
    const pool_job *j = ctx;
    if (!j->rows) {
        max_pool_small(j, begin, end);
        return;
    }
    for (int64_t item = begin; item < end; item++) {
        const float *in = j->x + item * j->h * j->w;
        float *rows = j->rows + item * j->h * j->wo;
        for (int64_t iy = 0; iy < j->h; iy++) {
            const float *row = in + iy * j->w;
            float *hmax = rows + iy * j->wo;
            for (int64_t ox = 0; ox < j->wo; ox++)
                hmax[ox] = -INFINITY;
            for (int64_t kx = 0; kx < j->kw; kx++) {
                int64_t shift = kx - j->pw, lo, hi;
                valid_columns(shift, j->sw, j->w, j->wo, &lo, &hi);
                for (int64_t ox = lo; ox < hi; ox++)
                    hmax[ox] = max_nan(hmax[ox], row[ox * j->sw + shift]);
            }
        }
        for (int64_t oy = 0; oy < j->ho; oy++) {
            float *out = j->y + (item * j->ho + oy) * j->wo;
            for (int64_t ox = 0; ox < j->wo; ox++)
                out[ox] = -INFINITY;
            for (int64_t ky = 0; ky < j->kh; ky++) {
                int64_t iy = oy * j->sh - j->ph + ky;
                if (iy < 0 || iy >= j->h) continue;
                const float *hmax = rows + iy * j->wo;
                for (int64_t ox = 0; ox < j->wo; ox++)
                    out[ox] = max_nan(out[ox], hmax[ox]);
            }
        }
    }
}

/* Sum over the window in row order, then divide by the window size
 * (count_include_pad) or by the number of real elements, as PyTorch. Built
 * row-wise in place like max_pool_range. */
static void avg_pool_range(void *ctx, int64_t begin, int64_t end)
{
    const pool_job *j = ctx;
    for (int64_t item = begin; item < end; item++) {
        const float *in = j->x + item * j->h * j->w;
        for (int64_t oy = 0; oy < j->ho; oy++) {
            float *out = j->y + (item * j->ho + oy) * j->wo;
            for (int64_t ox = 0; ox < j->wo; ox++)
                out[ox] = 0.0f;
            int64_t rows = 0;
            for (int64_t ky = 0; ky < j->kh; ky++) {
                int64_t iy = oy * j->sh - j->ph + ky;
                if (iy < 0 || iy >= j->h) continue;
                rows++;
                const float *row = in + iy * j->w;
                for (int64_t kx = 0; kx < j->kw; kx++) {
                    int64_t shift = kx - j->pw, lo, hi;
                    valid_columns(shift, j->sw, j->w, j->wo, &lo, &hi);
                    if (j->sw == 1) {
                        for (int64_t ox = lo; ox < hi; ox++)
                            out[ox] += row[ox + shift];
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++)
                            out[ox] += row[ox * j->sw + shift];
                    }
                }
            }
            if (j->count_include_pad) {
                float count = (float)(j->kh * j->kw);
                for (int64_t ox = 0; ox < j->wo; ox++)
                    out[ox] /= count;
                continue;
            }
            for (int64_t ox = 0; ox < j->wo; ox++) {
                int64_t x0 = ox * j->sw - j->pw;
                int64_t cols = clamp64(x0 + j->kw, 0, j->w) - clamp64(x0, 0, j->w);
                out[ox] /= (float)(rows * cols);
            }
        }
    }
}

static ly_status run_pool(const ly_kernel_call *call, ly_range_fn fn, float *rows)
{
    const ly_tensor *x = call->in[0];
    ly_tensor *y = call->out[0];
    const ly_pool2d_params *p = call->params;
    pool_job job = {
        .x = x->data,
        .y = y->data,
        .rows = rows,
        .h = x->shape[2],
        .w = x->shape[3],
        .ho = y->shape[2],
        .wo = y->shape[3],
        .kh = p->kernel[0],
        .kw = p->kernel[1],
        .sh = p->stride[0],
        .sw = p->stride[1],
        .ph = p->padding[0],
        .pw = p->padding[1],
        .count_include_pad = p->count_include_pad != 0,
    };
    int64_t planes = x->shape[0] * x->shape[1];
    ly_parallel_for(planes, 1, threads_for(call, ly_tensor_numel(y) * job.kh * job.kw), fn, &job);
    return LY_OK;
}

ly_status ly_ref_max_pool2d(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *y = call->out[0];
    const ly_pool2d_params *p = call->params;
    if (p->kernel[0] * p->kernel[1] <= SMALL_POOL_WINDOW)
        return run_pool(call, max_pool_range, NULL);
    size_t rows = (size_t)(x->shape[0] * x->shape[1] * x->shape[2] * y->shape[3]);
    float *buffer = malloc((rows > 0 ? rows : 1) * sizeof *buffer);
    if (!buffer)
        return ly_set_error(LY_E_NO_MEMORY, "max_pool2d: out of memory for %zu row maxima", rows);
    ly_status st = run_pool(call, max_pool_range, buffer);
    free(buffer);
    return st;
}

ly_status ly_ref_avg_pool2d(const ly_kernel_call *call)
{
    return run_pool(call, avg_pool_range, NULL);
}

/* ---- upsample ------------------------------------------------------------------ */

ly_status ly_ref_upsample_nearest2d(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    const float *in = x->data;
    float *out = call->out[0]->data;
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t s = LY_PARAMS(call, ly_upsample_nearest2d_params)->scale, wo = w * s;
    for (int64_t p = 0; p < planes; p++) {
        for (int64_t iy = 0; iy < h; iy++) {
            const float *src = in + (p * h + iy) * w;
            float *dst = out + (p * h * s + iy * s) * wo;
            for (int64_t ix = 0; ix < w; ix++)
                for (int64_t r = 0; r < s; r++)
                    dst[ix * s + r] = src[ix];
            for (int64_t r = 1; r < s; r++)
                memcpy(dst + r * wo, dst, (size_t)wo * sizeof *dst);
        }
    }
    return LY_OK;
}

/* ---- elementwise ----------------------------------------------------------------------- */

typedef struct unary_job {
    const float *x;
    float *y;
    float (*fn)(float);
} unary_job;

static void unary_range(void *ctx, int64_t begin, int64_t end)
{
    const unary_job *job = ctx;
    for (int64_t i = begin; i < end; i++)
        job->y[i] = job->fn(job->x[i]);
}

static ly_status run_unary(const ly_kernel_call *call, float (*fn)(float))
{
    unary_job job = {call->in[0]->data, call->out[0]->data, fn};
    int64_t n = ly_tensor_numel(call->in[0]);
    ly_parallel_for(n, 4096, threads_for(call, n), unary_range, &job);
    return LY_OK;
}

ly_status ly_ref_silu(const ly_kernel_call *call)
{
    return run_unary(call, ly_nn_silu);
}

ly_status ly_ref_sigmoid(const ly_kernel_call *call)
{
    return run_unary(call, ly_nn_sigmoid);
}

/* ---- dfl ------------------------------------------------------------------------------- */

/* Per (image, side, anchor): m = max_b x_b; e_b = expf(x_b - m); s = sum_b e_b,
 * in bin order; out = sum_b b * (e_b / s), in bin order. Anchors are processed
 * in chunks with the bin loop outside, so memory is read row by row while each
 * anchor still sees its terms in bin order. */
#define DFL_CHUNK 256

ly_status ly_ref_dfl(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t n = x->shape[0], bins = x->shape[1] / 4, anchors = x->shape[2];
    const float *in = x->data;
    float *out = call->out[0]->data;
    float max[DFL_CHUNK], sum[DFL_CHUNK], acc[DFL_CHUNK];
    float *e = malloc((size_t)(bins * DFL_CHUNK) * sizeof *e);
    if (!e)
        return ly_set_error(LY_E_NO_MEMORY, "dfl: out of memory for %lld bins", (long long)bins);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t side = 0; side < 4; side++) {
            const float *rows = in + (i * 4 + side) * bins * anchors;
            float *dst = out + (i * 4 + side) * anchors;
            for (int64_t a0 = 0; a0 < anchors; a0 += DFL_CHUNK) {
                int64_t len = anchors - a0 < DFL_CHUNK ? anchors - a0 : DFL_CHUNK;
                for (int64_t a = 0; a < len; a++) {
                    max[a] = -INFINITY;
                    sum[a] = 0.0f;
                    acc[a] = 0.0f;
                }
                for (int64_t b = 0; b < bins; b++) {
                    const float *r = rows + b * anchors + a0;
                    for (int64_t a = 0; a < len; a++)
                        max[a] = max_nan(max[a], r[a]);
                }
                for (int64_t b = 0; b < bins; b++) {
                    const float *r = rows + b * anchors + a0;
                    float *eb = e + b * DFL_CHUNK;
                    for (int64_t a = 0; a < len; a++) {
                        eb[a] = expf(r[a] - max[a]);
                        sum[a] += eb[a];
                    }
                }
                for (int64_t b = 0; b < bins; b++) {
                    const float *eb = e + b * DFL_CHUNK;
                    for (int64_t a = 0; a < len; a++)
                        acc[a] += (float)b * (eb[a] / sum[a]);
                }
                memcpy(dst + a0, acc, (size_t)len * sizeof *acc);
            }
        }
    }
    free(e);
    return LY_OK;
}

/* ---- anchor_grid ------------------------------------------------------------------------ */

ly_status ly_ref_anchor_grid(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t h = x->shape[2], w = x->shape[3];
    float offset = (float)LY_PARAMS(call, ly_anchor_grid_params)->offset;
    float *a = call->out[0]->data;
    for (int64_t y = 0; y < h; y++)
        for (int64_t c = 0; c < w; c++) {
            a[y * w + c] = (float)c + offset;
            a[h * w + y * w + c] = (float)y + offset;
        }
    return LY_OK;
}

/* ---- resize_bilinear2d ------------------------------------------------------------------ */

/* PyTorch's source index and weights (area_pixel_compute_source_index and
 * compute_indices_weights_linear), in float as its CPU kernel computes them. */
void ly_nn_resize_axis_fill(ly_nn_resize_axis *a, int64_t in, int64_t out, bool align_corners,
                            bool half_pixel)
{
    float scale = align_corners ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                                : (float)in / (float)out;
    for (int64_t d = 0; d < out; d++) {
        float s;
        if (align_corners || !half_pixel) {
            s = scale * (float)d;
        } else {
            s = scale * ((float)d + 0.5f) - 0.5f;
            if (s < 0.0f) s = 0.0f;
        }
        int64_t i0 = (int64_t)s; /* s >= 0: truncation is floor */
        if (i0 > in - 1) i0 = in - 1;
        float l1 = s - (float)i0;
        l1 = l1 < 0.0f ? 0.0f : l1 > 1.0f ? 1.0f : l1;
        a->i0[d] = i0;
        a->i1[d] = i0 < in - 1 ? i0 + 1 : i0;
        a->w0[d] = 1.0f - l1;
        a->w1[d] = l1;
    }
}

typedef struct resize_job {
    const float *x;
    float *y;
    int64_t h, w, ho, wo;
    ly_nn_resize_axis ax_h, ax_w;
} resize_job;

static void resize_range(void *ctx, int64_t begin, int64_t end)
{
    const resize_job *j = ctx;
    for (int64_t plane = begin; plane < end; plane++) {
        const float *in = j->x + plane * j->h * j->w;
        float *out = j->y + plane * j->ho * j->wo;
        for (int64_t oy = 0; oy < j->ho; oy++) {
            const float *r0 = in + j->ax_h.i0[oy] * j->w, *r1 = in + j->ax_h.i1[oy] * j->w;
            float h0 = j->ax_h.w0[oy], h1 = j->ax_h.w1[oy];
            float *o = out + oy * j->wo;
            for (int64_t ox = 0; ox < j->wo; ox++) {
                int64_t x0 = j->ax_w.i0[ox], x1 = j->ax_w.i1[ox];
                float w0 = j->ax_w.w0[ox], w1 = j->ax_w.w1[ox];
                o[ox] = h0 * (w0 * r0[x0] + w1 * r0[x1]) + h1 * (w0 * r1[x0] + w1 * r1[x1]);
            }
        }
    }
}

ly_status ly_ref_resize_bilinear2d(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    ly_tensor *y = call->out[0];
    resize_job job = {.x = x->data,
                      .y = y->data,
                      .h = x->shape[2],
                      .w = x->shape[3],
                      .ho = y->shape[2],
                      .wo = y->shape[3]};
    size_t taps = (size_t)(job.ho + job.wo);
    int64_t *index = malloc(2 * taps * sizeof *index);
    float *weight = malloc(2 * taps * sizeof *weight);
    if (!index || !weight) {
        free(index);
        free(weight);
        return ly_set_error(LY_E_NO_MEMORY, "resize_bilinear2d: out of memory for %zu taps", taps);
    }
    job.ax_h = (ly_nn_resize_axis){index, index + job.ho, weight, weight + job.ho};
    job.ax_w = (ly_nn_resize_axis){index + 2 * job.ho, index + 2 * job.ho + job.wo,
                                   weight + 2 * job.ho, weight + 2 * job.ho + job.wo};
    const ly_resize_bilinear2d_params *p = call->params;
    bool align = p->align_corners != 0, half = p->half_pixel_centers != 0;
    ly_nn_resize_axis_fill(&job.ax_h, job.h, job.ho, align, half);
    ly_nn_resize_axis_fill(&job.ax_w, job.w, job.wo, align, half);
    int64_t planes = x->shape[0] * x->shape[1];
    ly_parallel_for(planes, 1, threads_for(call, ly_tensor_numel(y) * 4), resize_range, &job);
    free(index);
    free(weight);
    return LY_OK;
}
