/* SPDX-License-Identifier: MIT */
/*
 * The portable reference of ms_deform_attn, forward and backward: it defines the
 * numbers (docs/attention.md states the order in words). Single-threaded and
 * plain: every accelerated provider must reproduce these bits.
 */
#include "ops/msda/msda_internal.h"

#include <math.h>
#include <string.h>

/* Row (b, q, h) of the [B, Lq, H, ...] operands. */
static int64_t row_of(const ly_msda_geom *g, int64_t b, int64_t q, int64_t h)
{
    return (b * g->Lq + q) * g->H + h;
}

static void canon_all(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = ly_msda_canon(p[i]);
}

ly_status ly_ref_ms_deform_attn(const ly_kernel_call *call)
{
    ly_msda_geom g;
    ly_msda_geom_init(call, false, &g);
    float *out = call->out[0]->data;
    const int64_t C = g.C, K = g.K;
    for (int64_t b = 0; b < g.B; b++) {
        const float *vb = g.value + b * g.len_in * g.H * C;
        for (int64_t q = 0; q < g.Lq; q++)
            for (int64_t h = 0; h < g.H; h++) {
                int64_t row = row_of(&g, b, q, h);
                float *acc = out + row * C;
                const float *loc = g.loc + row * K * 2, *attn = g.attn + row * K;
                for (int64_t c = 0; c < C; c++)
                    acc[c] = 0.0f;
                int64_t k = 0;
                for (int64_t l = 0; l < g.L; l++)
                    for (int64_t p = 0; p < g.lvl_points[l]; p++, k++) {
                        float a = attn[k];
                        if (g.mode == LY_MSDA_DISCRETE) {
                            const float *v =
                                vb + ly_msda_discrete_offset(&g, l, h, loc[2 * k], loc[2 * k + 1]);
                            for (int64_t c = 0; c < C; c++)
                                acc[c] = fmaf(a, v[c], acc[c]);
                            continue;
                        }
                        ly_msda_sample s;
                        ly_msda_bilinear(&g, l, h, loc[2 * k], loc[2 * k + 1], &s);
                        for (int64_t c = 0; c < C; c++) {
                            float v[4];
                            for (int i = 0; i < 4; i++)
                                v[i] = s.off[i] >= 0 ? vb[s.off[i] + c] : 0.0f;
                            float val = fmaf(v[3], s.w[3],
                                             fmaf(v[2], s.w[2], fmaf(v[1], s.w[1], v[0] * s.w[0])));
                            acc[c] = fmaf(a, val, acc[c]);
                        }
                    }
                canon_all(acc, C);
            }
    }
    return LY_OK;
}

/* One (b, h) slice: every query in order, then levels, then points; the value
 * gradient accumulates in exactly that order. */
static void backward_slice(const ly_msda_geom *g, int64_t b, int64_t h, float *grad_value,
                           float *grad_loc, float *grad_attn)
{
    const int64_t C = g->C, K = g->K, HC = g->H * g->C;
    const float *vb = g->value + b * g->len_in * HC;
    float *gvb = grad_value + b * g->len_in * HC;
    for (int64_t pos = 0; pos < g->len_in; pos++)
        memset(gvb + pos * HC + h * C, 0, (size_t)C * sizeof(float));
    for (int64_t q = 0; q < g->Lq; q++) {
        int64_t row = row_of(g, b, q, h);
        const float *go = g->grad_out + row * C;
        const float *loc = g->loc + row * K * 2, *attn = g->attn + row * K;
        float *gl = grad_loc + row * K * 2, *ga = grad_attn + row * K;
        int64_t k = 0;
        for (int64_t l = 0; l < g->L; l++)
            for (int64_t p = 0; p < g->lvl_points[l]; p++, k++) {
                float a = attn[k];
                float pa[8] = {0}, px[8] = {0}, py[8] = {0};
                if (g->mode == LY_MSDA_DISCRETE) {
                    int64_t off = ly_msda_discrete_offset(g, l, h, loc[2 * k], loc[2 * k + 1]);
                    for (int64_t c = 0; c < C; c++) {
                        pa[c & 7] = fmaf(go[c], vb[off + c], pa[c & 7]);
                        gvb[off + c] = gvb[off + c] + go[c] * a;
                    }
                    ga[k] = ly_msda_canon(ly_msda_tree8(pa));
                    gl[2 * k] = 0.0f;
                    gl[2 * k + 1] = 0.0f;
                    continue;
                }
                ly_msda_sample s;
                ly_msda_bilinear(g, l, h, loc[2 * k], loc[2 * k + 1], &s);
                for (int64_t c = 0; c < C; c++) {
                    float v[4];
                    for (int i = 0; i < 4; i++)
                        v[i] = s.off[i] >= 0 ? vb[s.off[i] + c] : 0.0f;
                    float val =
                        fmaf(v[3], s.w[3], fmaf(v[2], s.w[2], fmaf(v[1], s.w[1], v[0] * s.w[0])));
                    float dx = fmaf(s.ly, v[3] - v[2], s.hy * (v[1] - v[0]));
                    float dy = fmaf(s.lx, v[3] - v[1], s.hx * (v[2] - v[0]));
                    pa[c & 7] = fmaf(go[c], val, pa[c & 7]);
                    px[c & 7] = fmaf(go[c], dx, px[c & 7]);
                    py[c & 7] = fmaf(go[c], dy, py[c & 7]);
                    float tg = go[c] * a;
                    for (int i = 0; i < 4; i++)
                        if (s.off[i] >= 0) gvb[s.off[i] + c] = fmaf(s.w[i], tg, gvb[s.off[i] + c]);
                }
                ga[k] = ly_msda_canon(ly_msda_tree8(pa));
                gl[2 * k] = ly_msda_canon(ly_msda_tree8(px) * a * g->size_w[l]);
                gl[2 * k + 1] = ly_msda_canon(ly_msda_tree8(py) * a * g->size_h[l]);
            }
    }
    for (int64_t pos = 0; pos < g->len_in; pos++)
        canon_all(gvb + pos * HC + h * C, C);
}

ly_status ly_ref_ms_deform_attn_backward(const ly_kernel_call *call)
{
    ly_msda_geom g;
    ly_msda_geom_init(call, true, &g);
    float *grad_value = call->out[0]->data, *grad_loc = call->out[1]->data,
          *grad_attn = call->out[2]->data;
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t h = 0; h < g.H; h++)
            backward_slice(&g, b, h, grad_value, grad_loc, grad_attn);
    return LY_OK;
}

ly_status ly_ref_grid_sample(const ly_kernel_call *call)
{
    const ly_grid_sample_params *p = LY_PARAMS(call, ly_grid_sample_params);
    const ly_tensor *x = call->in[0], *grid = call->in[1];
    const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    const int64_t points = grid->shape[1] * grid->shape[2];
    const float *in = x->data, *g = grid->data;
    float *out = call->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const float *plane = in + (n * C + c) * H * W;
            float *dst = out + (n * C + c) * points;
            for (int64_t i = 0; i < points; i++) {
                ly_grid_taps t;
                ly_grid_taps_of(g + (n * points + i) * 2, H, W, p->align_corners != 0, p->mode == 1,
                                &t);
                float acc = t.n == -1 ? plane[t.off[0]] : 0.0f;
                for (int k = 0; k < t.n; k++)
                    acc = acc + plane[t.off[k]] * t.w[k];
                dst[i] = acc;
            }
        }
    return LY_OK;
}
