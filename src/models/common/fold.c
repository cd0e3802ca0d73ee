/* SPDX-License-Identifier: MIT */
/* Convolutions with their BatchNorm folded in (fold.h). */
#include "models/common/fold.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define TORCH_BN_EPS 1e-5 /* nn.BatchNorm2d's default */

bool ly_fold_bn(ly_builder *b, const char *bn_prefix, int64_t cout, int64_t per, const float *w,
                double *out_w, double *out_b, double *scale)
{
    static const char *const parts[4] = {"weight", "bias", "running_mean", "running_var"};
    const float *bn[4];
    for (int i = 0; i < 4; i++) {
        char key[LY_KEY_MAX];
        snprintf(key, sizeof key, "%.150s.%s", bn_prefix, parts[i]);
        bn[i] = ly_build_take(b, key, 1, &cout);
    }
    if (b->st != LY_OK || !w || !bn[0] || !bn[1] || !bn[2] || !bn[3]) return false;
    double eps = b->bn_eps > 0 ? b->bn_eps : TORCH_BN_EPS;
    bool reported = false;
    for (int64_t o = 0; o < cout; o++) {
        double var = (double)bn[3][o] + eps;
        if ((!(var > 0.0) || !isfinite(var)) && !reported) {
            /* one per BatchNorm; the fold goes on so the audit finds the rest */
            ly_build_problem(b, LY_PROBLEM_OTHER,
                             "key '%s%.150s.running_var' [%lld] is %g: var + eps must be positive",
                             b->prefix, bn_prefix, (long long)o, (double)bn[3][o]);
            reported = true;
        }
        double s = (double)bn[0][o] / sqrt(var);
        if (scale) scale[o] = s;
        out_b[o] = (double)bn[1][o] - (double)bn[2][o] * s;
        for (int64_t i = 0; i < per; i++)
            out_w[o * per + i] = (double)w[o * per + i] * s;
    }
    return b->st == LY_OK;
}

bool ly_fold_conv_bn(ly_builder *b, const char *conv_weight, const char *bn_prefix, int64_t cout,
                     int64_t cin, int64_t k, double *w, double *bias)
{
    int64_t wshape[4] = {cout, cin, k, k};
    const float *cw = ly_build_take(b, conv_weight, 4, wshape);
    return ly_fold_bn(b, bn_prefix, cout, cin * k * k, cw, w, bias, NULL);
}

void ly_fold_add_centred(double *acc_w, double *acc_b, const double *w, const double *bias,
                         int64_t cout, int64_t cin, int64_t k, int64_t kd)
{
    int64_t off = (kd - k) / 2;
    for (int64_t o = 0; o < cout; o++) {
        acc_b[o] += bias[o];
        for (int64_t i = 0; i < cin; i++)
            for (int64_t y = 0; y < k; y++)
                for (int64_t x = 0; x < k; x++)
                    acc_w[((o * cin + i) * kd + y + off) * kd + x + off] +=
                        w[((o * cin + i) * k + y) * k + x];
    }
}

ly_conv2d_params ly_conv_params(int64_t stride, int64_t pad, int64_t groups, int activation)
{
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    p.stride[0] = p.stride[1] = stride;
    p.padding[0] = p.padding[1] = pad;
    p.groups = groups;
    p.activation = activation;
    return p;
}

bool ly_build_folded(ly_builder *b, const double *w, const double *bias, int64_t cout, int64_t cin,
                     int64_t k, ly_graph_value *wv, ly_graph_value *bv)
{
    if (b->st != LY_OK || !b->g) return false;
    int64_t wshape[4] = {cout, cin, k, k};
    void *wdata, *bdata;
    ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 4, wshape, wv, &wdata));
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 1, &cout, bv, &bdata));
    if (b->st != LY_OK) return false;
    for (int64_t i = 0; i < cout * cin * k * k; i++)
        ((float *)wdata)[i] = (float)w[i];
    for (int64_t o = 0; o < cout; o++)
        ((float *)bdata)[o] = (float)bias[o];
    return true;
}

ly_graph_value ly_build_conv(ly_builder *b, const char *name, ly_graph_value x, ly_graph_value w,
                             ly_graph_value bias, ly_graph_value residual,
                             const ly_conv2d_params *p)
{
    if (b->st != LY_OK || !b->g) return LY_GRAPH_NONE;
    char node_name[2 * LY_KEY_MAX];
    snprintf(node_name, sizeof node_name, "%s%.100s", b->prefix, name);
    ly_graph_value out = LY_GRAPH_NONE;
    ly_build_fail(b, ly_graph_conv2d(b->g, node_name, x, w, bias, residual, p, &out));
    return out;
}

ly_fmap ly_build_conv_folded(ly_builder *b, const char *name, ly_fmap x, const double *w,
                             const double *bias, int64_t cout, int64_t k, int64_t stride,
                             int64_t groups, int activation, const float *post_affine)
{
    ly_fmap y = {LY_GRAPH_NONE, cout, 0, 0};
    ly_graph_value wv, bv;
    if (!ly_build_folded(b, w, bias, cout, x.c / groups, k, &wv, &bv)) return y;
    ly_conv2d_params p = ly_conv_params(stride, (k - 1) / 2, groups, activation);
    if (post_affine) {
        p.post_affine = 1;
        p.post_scale = post_affine[0];
        p.post_shift = post_affine[1];
    }
    y.v = ly_build_conv(b, name, x.v, wv, bv, LY_GRAPH_NONE, &p);
    y.h = (x.h + 2 * p.padding[0] - k) / stride + 1;
    y.w = (x.w + 2 * p.padding[1] - k) / stride + 1;
    return y;
}

ly_fmap ly_build_conv_norm(ly_builder *b, const char *name, const char *norm, ly_fmap x,
                           int64_t cout, int64_t k, int64_t stride, bool depthwise, int activation,
                           const float *post_affine)
{
    return ly_build_conv_norm_at(b, name, "conv", norm, x, cout, k, stride, depthwise, activation,
                                 post_affine);
}

ly_fmap ly_build_conv_norm_at(ly_builder *b, const char *name, const char *conv_key,
                              const char *norm, ly_fmap x, int64_t cout, int64_t k, int64_t stride,
                              bool depthwise, int activation, const float *post_affine)
{
    ly_fmap y = {LY_GRAPH_NONE, cout, 0, 0};
    int64_t groups = depthwise ? x.c : 1, cin = x.c / groups;
    double *w = malloc((size_t)(cout * cin * k * k) * sizeof *w);
    double *bias = malloc((size_t)cout * sizeof *bias);
    char conv[LY_KEY_MAX], bn[LY_KEY_MAX];
    snprintf(conv, sizeof conv, "%.100s.%.20s.weight", name, conv_key);
    snprintf(bn, sizeof bn, "%.100s.%.20s", name, norm);
    if (!w || !bias)
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    else if (ly_fold_conv_bn(b, conv, bn, cout, cin, k, w, bias))
        y = ly_build_conv_folded(b, name, x, w, bias, cout, k, stride, groups, activation,
                                 post_affine);
    free(w);
    free(bias);
    return y;
}
