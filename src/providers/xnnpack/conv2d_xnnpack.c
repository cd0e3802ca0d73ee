/* SPDX-License-Identifier: MIT */
/*
 * conv2d on XNNPACK (the 2022 API Debian ships: xnn_create/setup_convolution2d_nhwc_f32).
 *
 * XNNPACK's general convolution is NHWC (its NCHW operator only covers a few
 * special cases), so each call transposes x to NHWC, runs the cached operator
 * (weights packed once, bias and a ReLU clamp fused), and transposes back to
 * NCHW applying SiLU/sigmoid and the residual on the way. Transposes and the
 * convolution share one pthreadpool per thread count.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "ops/nn/reference.h"
#include "providers/builtin.h"
#include "providers/op_cache.h"

#include <math.h>
#include <pthreadpool.h>
#include <stdlib.h>
#include <string.h>
#include <xnnpack.h>

#define CACHE_CAPACITY 512
#define MAX_POOL_THREADS 64
#define TILE 32 /* transpose tile edge */

typedef struct xnnpack_op {
    xnn_operator_t op;
    bool relu_fused;
} xnnpack_op;

static struct {
    pthread_once_t once;
    enum xnn_status init_status;
    pthread_mutex_t pools_lock;
    pthreadpool_t pools[MAX_POOL_THREADS + 1]; /* by thread count; kept for the process */
} g = {.once = PTHREAD_ONCE_INIT, .pools_lock = PTHREAD_MUTEX_INITIALIZER};

static void destroy_op(void *p)
{
    xnnpack_op *op = p;
    if (!op) return;
    if (op->op) xnn_delete_operator(op->op);
    free(op);
}

static ly_op_cache cache = LY_OP_CACHE_INIT(CACHE_CAPACITY, destroy_op);

static void init_once(void)
{
    g.init_status = xnn_initialize(NULL);
}

static bool xnnpack_ready(void)
{
    pthread_once(&g.once, init_once);
    return g.init_status == xnn_status_success;
}

/* NULL runs on the calling thread, which is what XNNPACK wants for 1 thread. */
static pthreadpool_t pool_for(int threads)
{
    if (threads <= 1) return NULL;
    if (threads > MAX_POOL_THREADS) threads = MAX_POOL_THREADS;
    pthread_mutex_lock(&g.pools_lock);
    if (!g.pools[threads]) g.pools[threads] = pthreadpool_create((size_t)threads);
    pthreadpool_t pool = g.pools[threads];
    pthread_mutex_unlock(&g.pools_lock);
    return pool;
}

static void *create_op(const ly_conv_key *k, const ly_kernel_call *call, ly_status *status)
{
    xnnpack_op *op = calloc(1, sizeof *op);
    int64_t cg = k->c / k->groups, og = k->o / k->groups, taps = k->kh * k->kw;
    float *packed = malloc((size_t)(k->o * cg * taps) * sizeof(float));
    if (!op || !packed) {
        free(op);
        free(packed);
        *status = ly_set_error(LY_E_NO_MEMORY, "conv2d (xnnpack): out of memory");
        return NULL;
    }
    /* OIHW -> O,H,W,I: XNNPACK's [groups][og][kh][kw][cg]. */
    const float *w = call->in[1]->data;
    for (int64_t o = 0; o < k->o; o++)
        for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t t = 0; t < taps; t++)
                packed[(o * taps + t) * cg + ci] = w[(o * cg + ci) * taps + t];
    op->relu_fused = k->activation == LY_ACT_RELU;
    enum xnn_status st = xnn_create_convolution2d_nhwc_f32(
        (uint32_t)k->ph, (uint32_t)k->pw, (uint32_t)k->ph, (uint32_t)k->pw, (uint32_t)k->kh,
        (uint32_t)k->kw, (uint32_t)k->sh, (uint32_t)k->sw, (uint32_t)k->dh, (uint32_t)k->dw,
        (uint32_t)k->groups, (size_t)cg, (size_t)og, (size_t)k->c, (size_t)k->o, packed,
        k->bias ? call->in[2]->data : NULL, op->relu_fused ? 0.0f : -INFINITY, INFINITY, 0,
        &op->op);
    free(packed); /* XNNPACK keeps its own packed copy */
    if (st != xnn_status_success) {
        /* Parameters XNNPACK rejects are a case it cannot do, not a failure. */
        bool declined =
            st == xnn_status_invalid_parameter || st == xnn_status_unsupported_parameter;
        *status = ly_set_error(declined ? LY_E_DECLINED : LY_E_PROVIDER,
                               "conv2d (xnnpack): xnn_create_convolution2d_nhwc_f32 failed with "
                               "status %d",
                               (int)st);
        destroy_op(op);
        return NULL;
    }
    return op;
}

/* ---- layout changes, tiled for the cache and split over the pool -------------------- */

typedef struct transpose_job {
    const float *src;
    float *dst;
    const float *residual;
    int64_t n, channels, plane; /* per image: [channels][plane] <-> [plane][channels] */
    int64_t channel_tiles, plane_tiles;
    int64_t activation; /* applied on the way back to NCHW */
    float alpha;
} transpose_job;

static void to_nhwc_tile(void *ctx, size_t index)
{
    const transpose_job *j = ctx;
    int64_t per_image = j->channel_tiles * j->plane_tiles, i = (int64_t)index;
    int64_t n = i / per_image, ct = i % per_image / j->plane_tiles, pt = i % j->plane_tiles;
    int64_t c0 = ct * TILE, c1 = c0 + TILE < j->channels ? c0 + TILE : j->channels;
    int64_t p0 = pt * TILE, p1 = p0 + TILE < j->plane ? p0 + TILE : j->plane;
    const float *src = j->src + n * j->channels * j->plane;
    float *dst = j->dst + n * j->channels * j->plane;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t p = p0; p < p1; p++)
            dst[p * j->channels + c] = src[c * j->plane + p];
}

static void to_nchw_tile(void *ctx, size_t index)
{
    const transpose_job *j = ctx;
    int64_t per_image = j->channel_tiles * j->plane_tiles, i = (int64_t)index;
    int64_t n = i / per_image, ct = i % per_image / j->plane_tiles, pt = i % j->plane_tiles;
    int64_t c0 = ct * TILE, c1 = c0 + TILE < j->channels ? c0 + TILE : j->channels;
    int64_t p0 = pt * TILE, p1 = p0 + TILE < j->plane ? p0 + TILE : j->plane;
    const float *src = j->src + n * j->channels * j->plane;
    float *dst = j->dst + n * j->channels * j->plane;
    const float *res = j->residual ? j->residual + n * j->channels * j->plane : NULL;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t p = p0; p < p1; p++) {
            float v = ly_nn_activate(src[p * j->channels + c], j->activation, j->alpha);
            dst[c * j->plane + p] = res ? v + res[c * j->plane + p] : v;
        }
}

static void transpose(pthreadpool_t pool, transpose_job *job, void (*tile)(void *, size_t))
{
    job->channel_tiles = (job->channels + TILE - 1) / TILE;
    job->plane_tiles = (job->plane + TILE - 1) / TILE;
    size_t tiles = (size_t)(job->n * job->channel_tiles * job->plane_tiles);
    if (pool) {
        pthreadpool_parallelize_1d(pool, tile, job, tiles, 0);
    } else {
        for (size_t i = 0; i < tiles; i++)
            tile(job, i);
    }
}

static float alpha_of(const ly_conv_key *k)
{
    float alpha;
    memcpy(&alpha, &k->alpha_bits, sizeof alpha);
    return alpha;
}

static ly_status run_op(const xnnpack_op *op, const ly_conv_key *k, const ly_kernel_call *call,
                        pthreadpool_t pool)
{
    size_t in_bytes = (size_t)(k->n * k->c * k->h * k->w) * sizeof(float);
    size_t out_bytes = (size_t)(k->n * k->o * k->ho * k->wo) * sizeof(float);
    float *in_nhwc = ly_nn_scratch(0, in_bytes), *out_nhwc = ly_nn_scratch(1, out_bytes);
    if (!in_nhwc || !out_nhwc)
        return ly_set_error(LY_E_NO_MEMORY, "conv2d (xnnpack): out of memory");
    transpose_job in = {.src = call->in[0]->data,
                        .dst = in_nhwc,
                        .n = k->n,
                        .channels = k->c,
                        .plane = k->h * k->w};
    transpose(pool, &in, to_nhwc_tile);
    enum xnn_status st = xnn_setup_convolution2d_nhwc_f32(op->op, (size_t)k->n, (size_t)k->h,
                                                          (size_t)k->w, in_nhwc, out_nhwc, pool);
    if (st != xnn_status_success)
        return ly_set_error(LY_E_PROVIDER,
                            "conv2d (xnnpack): xnn_setup_convolution2d_nhwc_f32 failed with "
                            "status %d",
                            (int)st);
    st = xnn_run_operator(op->op, pool);
    if (st != xnn_status_success)
        return ly_set_error(LY_E_PROVIDER,
                            "conv2d (xnnpack): xnn_run_operator failed with status %d", (int)st);
    transpose_job out = {.src = out_nhwc,
                         .dst = call->out[0]->data,
                         .residual = call->in[3] ? call->in[3]->data : NULL,
                         .n = k->n,
                         .channels = k->o,
                         .plane = k->ho * k->wo,
                         .activation = op->relu_fused ? LY_ACT_NONE : k->activation,
                         .alpha = alpha_of(k)};
    transpose(pool, &out, to_nchw_tile);
    return LY_OK;
}

static ly_status conv2d_xnnpack(const ly_kernel_call *call)
{
    if (!xnnpack_ready())
        return ly_set_error(LY_E_PROVIDER, "conv2d (xnnpack): xnn_initialize failed with status %d",
                            (int)g.init_status);
    int threads = ly_threads_resolve(call->threads);
    pthreadpool_t pool = pool_for(threads);
    if (threads > 1 && !pool)
        return ly_set_error(LY_E_PROVIDER, "conv2d (xnnpack): pthreadpool_create(%d) failed",
                            threads);
    ly_conv_key key;
    /* The operator does not depend on the thread count: the pool is passed per call. */
    ly_conv_key_init(&key, call, 0);
    ly_op_entry *entry = NULL;
    void *op = NULL;
    ly_status st = ly_op_cache_acquire(&cache, &key, create_op, call, &entry, &op);
    if (st != LY_OK) return st;
    st = run_op(op, &key, call, pool);
    ly_op_cache_release(&cache, entry);
    return st;
}

static ly_status xnnpack_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                   const char **why_not)
{
    (void)cpu;
    if (!xnnpack_ready()) {
        *why_not = "XNNPACK failed to initialise (unsupported CPU?)";
        return LY_E_DECLINED;
    }
    if (!call) return LY_OK;
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = call->params;
    if (!x || !w || !call->out[0]) return LY_OK; /* not validated yet: the validator will answer */
    if (ly_tensor_numel(x) == 0 || ly_tensor_numel(call->out[0]) == 0) {
        *why_not = "empty tensor (nothing for XNNPACK to do)";
        return LY_E_DECLINED;
    }
    if (p && p->post_affine) {
        *why_not = "a post-activation affine (this provider fuses none)";
        return LY_E_DECLINED;
    }
    /* Its parameters are 32-bit. */
    const int64_t limit = INT32_MAX;
    if (w->shape[2] > limit || w->shape[3] > limit || p->stride[0] > limit ||
        p->stride[1] > limit || p->padding[0] > limit || p->padding[1] > limit ||
        p->dilation[0] > limit || p->dilation[1] > limit || p->groups > limit) {
        *why_not = "a parameter exceeds XNNPACK's 32-bit range";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

void ly_xnnpack_register(void)
{
    ly_provider_add(LY_OP_CONV2D, "xnnpack", conv2d_xnnpack, xnnpack_predicate, NULL);
}
