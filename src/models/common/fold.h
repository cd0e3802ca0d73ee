/* SPDX-License-Identifier: MIT */
/*
 * Convolutions with their BatchNorm folded in (internal; builder.h's toolkit).
 *
 * An eval-mode BatchNorm after a conv is an affine map per output channel:
 * BN(conv(x)) = conv(x) * s + (beta - mean * s), s = gamma / sqrt(var + eps).
 * Folded, the conv's weights become w * s and its bias beta - mean * s,
 * computed in double and rounded to f32 once, so the weights are the
 * correctly rounded folded values; what differs from the unfused forward is
 * the order of f32 rounding inside each layer (a few ulps per layer).
 * Re-parameterised blocks (RepConv, RepVGG: conv3x3 + BN and conv1x1 + BN
 * summed) add the folded 1x1 at the 3x3's centre before rounding.
 */
#ifndef LY_MODELS_COMMON_FOLD_H
#define LY_MODELS_COMMON_FOLD_H

#include "models/common/builder.h"

/* A value and its shape [1, c, h, w]. */
typedef struct ly_fmap {
    ly_graph_value v;
    int64_t c, h, w;
} ly_fmap;

/* The BatchNorm at prefix + bn_prefix (.weight, .bias, .running_mean,
 * .running_var; eps b->bn_eps) folded into the conv weight `w` [cout, per]:
 * out_w = w * s, out_b = beta - mean * s, in double; `scale` (may be NULL)
 * gets s. False when var + eps is not a positive number (a problem naming
 * the key) or the builder failed. */
bool ly_fold_bn(ly_builder *b, const char *bn_prefix, int64_t cout, int64_t per, const float *w,
                double *out_w, double *out_b, double *scale);
/* The conv weight at prefix + conv_weight [cout, cin, k, k] taken and folded
 * with the BatchNorm at bn_prefix: w (cout*cin*k*k doubles), bias (cout). */
bool ly_fold_conv_bn(ly_builder *b, const char *conv_weight, const char *bn_prefix, int64_t cout,
                     int64_t cin, int64_t k, double *w, double *bias);
/* acc_w [cout, cin, kd, kd] += w [cout, cin, k, k] at its centre (k <= kd,
 * both odd or equal), acc_b [cout] += bias: a re-parameterised block's
 * branches into one kernel. */
void ly_fold_add_centred(double *acc_w, double *acc_b, const double *w, const double *bias,
                         int64_t cout, int64_t cin, int64_t k, int64_t kd);

/* A square conv's window and activation, the rest at the defaults. */
ly_conv2d_params ly_conv_params(int64_t stride, int64_t pad, int64_t groups, int activation);
/* Constants holding folded weights [cout, cin, k, k] and bias [cout], rounded
 * to f32 once. */
bool ly_build_folded(ly_builder *b, const double *w, const double *bias, int64_t cout, int64_t cin,
                     int64_t k, ly_graph_value *wv, ly_graph_value *bv);
/* A conv2d node named prefix + name on constants (residual: LY_GRAPH_NONE
 * for none: the add is the conv's epilogue). */
ly_graph_value ly_build_conv(ly_builder *b, const char *name, ly_graph_value x, ly_graph_value w,
                             ly_graph_value bias, ly_graph_value residual,
                             const ly_conv2d_params *p);
/* Both, padding (k-1)/2: `activation` an ly_activation, then `post_affine`
 * (scale, shift; NULL for none) as conv2d's post-affine. */
ly_fmap ly_build_conv_folded(ly_builder *b, const char *name, ly_fmap x, const double *w,
                             const double *bias, int64_t cout, int64_t k, int64_t stride,
                             int64_t groups, int activation, const float *post_affine);
/* ConvNormLayer / ConvBNAct: Conv2d (no bias) name.conv.weight with the
 * BatchNorm name.<norm>.* folded in, (k-1)/2 padding, depthwise when asked,
 * `activation`, then `post_affine` (NULL: none). */
ly_fmap ly_build_conv_norm(ly_builder *b, const char *name, const char *norm, ly_fmap x,
                           int64_t cout, int64_t k, int64_t stride, bool depthwise, int activation,
                           const float *post_affine);
/* The same with the conv's weight at name.<conv>.weight. */
ly_fmap ly_build_conv_norm_at(ly_builder *b, const char *name, const char *conv, const char *norm,
                              ly_fmap x, int64_t cout, int64_t k, int64_t stride, bool depthwise,
                              int activation, const float *post_affine);

#endif
