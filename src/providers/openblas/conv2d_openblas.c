/* SPDX-License-Identifier: MIT */
/*
 * conv2d as im2col + cblas_sgemm (OpenBLAS). Per image and group,
 * out[og, pixels] = W[og, cg*kh*kw] x col[cg*kh*kw, pixels]; a 1x1, stride-1,
 * unpadded convolution multiplies x directly. im2col runs over bands of output
 * rows so its buffer stays around a few MiB whatever the image size. Bias,
 * activation and residual are applied afterwards.
 *
 * OpenBLAS's thread count is process-wide (openblas_set_num_threads); it is set
 * to the call's count when it differs, so concurrent callers asking for
 * different counts share one setting.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "ops/nn/reference.h"
#include "providers/builtin.h"
#include "providers/op_cache.h"

#include <cblas.h>
#include <string.h>

/* im2col band: at most this many floats (4 MiB). */
#define BAND_FLOATS (1 << 20)

/* col[(ci*kh + ky)*kw + kx][pixel] for output rows [oy0, oy1) of one group. */
static void im2col(const ly_nn_conv_geometry *g, const float *x, int64_t cg, int64_t oy0,
                   int64_t oy1, float *col)
{
    int64_t pixels = (oy1 - oy0) * g->wo;
    for (int64_t ci = 0; ci < cg; ci++) {
        const float *plane = x + ci * g->h * g->w;
        for (int64_t ky = 0; ky < g->kh; ky++) {
            for (int64_t kx = 0; kx < g->kw; kx++) {
                float *dst = col + ((ci * g->kh + ky) * g->kw + kx) * pixels;
                for (int64_t oy = oy0; oy < oy1; oy++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    float *row = dst + (oy - oy0) * g->wo;
                    if (iy < 0 || iy >= g->h) {
                        memset(row, 0, (size_t)g->wo * sizeof *row);
                        continue;
                    }
                    const float *src = plane + iy * g->w;
                    for (int64_t ox = 0; ox < g->wo; ox++) {
                        int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                        row[ox] = (ix >= 0 && ix < g->w) ? src[ix] : 0.0f;
                    }
                }
            }
        }
    }
}

static ly_status conv2d_openblas(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *w = call->in[1];
    ly_nn_conv_geometry g;
    ly_nn_conv_geometry_of(call, &g);
    int64_t n = g.n, cg = g.c / g.groups, og = g.o / g.groups;
    int64_t depth = cg * g.kh * g.kw, pixels = g.ho * g.wo;
    bool direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    int threads = ly_threads_resolve(call->threads);
    if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);

    int64_t band_rows = g.ho;
    float *col = NULL;
    if (!direct) {
        band_rows = BAND_FLOATS / (depth * g.wo);
        if (band_rows < 1) band_rows = 1;
        if (band_rows > g.ho) band_rows = g.ho;
        col = ly_nn_scratch(0, (size_t)(depth * band_rows * g.wo) * sizeof(float));
        if (!col) return ly_set_error(LY_E_NO_MEMORY, "conv2d (openblas): out of memory");
    }
    /* The GEMMs overwrite the output, which may be the residual itself. */
    const float *residual = call->in[3] ? call->in[3]->data : NULL;
    if (residual && residual == call->out[0]->data) {
        size_t bytes = (size_t)ly_tensor_numel(call->in[3]) * sizeof(float);
        float *copy = ly_nn_scratch(1, bytes);
        if (!copy) return ly_set_error(LY_E_NO_MEMORY, "conv2d (openblas): out of memory");
        memcpy(copy, residual, bytes);
        residual = copy;
    }
    const float *weight = w->data;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t grp = 0; grp < g.groups; grp++) {
            const float *xg = (const float *)x->data + (i * g.c + grp * cg) * g.h * g.w;
            const float *wg = weight + grp * og * depth;
            float *yg = (float *)call->out[0]->data + (i * g.o + grp * og) * pixels;
            if (direct) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)og, (int)pixels,
                            (int)depth, 1.0f, wg, (int)depth, xg, (int)pixels, 0.0f, yg,
                            (int)pixels);
                continue;
            }
            for (int64_t oy = 0; oy < g.ho; oy += band_rows) {
                int64_t oy1 = oy + band_rows < g.ho ? oy + band_rows : g.ho;
                int64_t cols = (oy1 - oy) * g.wo;
                im2col(&g, xg, cg, oy, oy1, col);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)og, (int)cols,
                            (int)depth, 1.0f, wg, (int)depth, col, (int)cols, 0.0f, yg + oy * g.wo,
                            (int)pixels);
            }
        }
    }
    ly_nn_conv_epilogue(call->out[0]->data, call->in[2] ? call->in[2]->data : NULL, residual, n,
                        g.o, pixels, g.activation, g.alpha, threads);
    return LY_OK;
}

static ly_status openblas_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    (void)cpu;
    if (!call) return LY_OK;
    const ly_tensor *x = call->in[0], *w = call->in[1], *y = call->out[0];
    if (!x || !w || !y) return LY_OK; /* not validated yet: the validator will answer */
    if (ly_tensor_numel(x) == 0 || ly_tensor_numel(y) == 0) {
        *why_not = "empty tensor (nothing for OpenBLAS to do)";
        return LY_E_DECLINED;
    }
    const ly_conv2d_params *p = call->params;
    if (p && p->post_affine) {
        *why_not = "a post-activation affine (its epilogue applies none)";
        return LY_E_DECLINED;
    }
    /* cblas takes int dimensions. */
    int64_t depth = w->shape[1] * w->shape[2] * w->shape[3];
    int64_t pixels = y->shape[2] * y->shape[3];
    if (depth > INT32_MAX || pixels > INT32_MAX || w->shape[0] > INT32_MAX) {
        *why_not = "a matrix dimension exceeds cblas's int";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

void ly_openblas_register(void)
{
    ly_provider_add(LY_OP_CONV2D, "openblas", conv2d_openblas, openblas_predicate, NULL);
}
