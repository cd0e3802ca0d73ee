/* SPDX-License-Identifier: MIT */
/*
 * Portable references of the network-op slots (include/libreyolo/nn.h). They
 * define the numbers; accelerated providers match them within a tolerance.
 * Each assumes the call passed its slot's validator (src/ops/nn/contract.c).
 */
#ifndef LY_NN_REFERENCE_H
#define LY_NN_REFERENCE_H

#include "ops/ops_internal.h"

/* Scalar forms shared with the providers, which apply bias, activation and
 * residual after a library's convolution. */
float ly_nn_silu(float x);    /* x / (1 + expf(-x)) */
float ly_nn_sigmoid(float x); /* 1 / (1 + expf(-x)) */
float ly_nn_gelu(float x);    /* x * 0.5 * (1 + erff(x * sqrt(1/2))), the gelu op's */
/* `alpha` is LY_ACT_LEAKY_RELU's negative slope (ignored by the others). */
float ly_nn_activate(float x, int64_t activation, float alpha);

/* out = act(out + bias[o]) + residual over [N, O, plane] (bias, residual may be
 * NULL), run on up to `threads` threads. Providers whose library computed the
 * raw convolution into `out` finish with this. */
void ly_nn_conv_epilogue(float *out, const float *bias, const float *residual, int64_t n,
                         int64_t channels, int64_t plane, int64_t activation, float alpha,
                         int threads);

/* resize_bilinear2d's taps along one axis: output index d is w0[d] * in[i0[d]]
 * + w1[d] * in[i1[d]] (the reference's order: h0 * (w0 * a + w1 * b) + h1 *
 * (w0 * c + w1 * d), each product and sum rounded to f32). */
typedef struct ly_nn_resize_axis {
    int64_t *i0, *i1;
    float *w0, *w1;
} ly_nn_resize_axis;
/* Fill `a` (arrays of `out` entries) for an axis of `in` inputs. */
void ly_nn_resize_axis_fill(ly_nn_resize_axis *a, int64_t in, int64_t out, bool align_corners,
                            bool half_pixel);

/* A conv2d call's geometry, read once from its (validated) tensors and params. */
typedef struct ly_nn_conv_geometry {
    int64_t n, c, h, w; /* input */
    int64_t o, kh, kw;  /* weight [o, c / groups, kh, kw] */
    int64_t ho, wo;     /* output */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t activation;
    float alpha; /* LY_ACT_LEAKY_RELU's slope, as float (what the math uses) */
    bool post_affine;
    float post_scale, post_shift; /* as float, what the math uses */
} ly_nn_conv_geometry;

void ly_nn_conv_geometry_of(const ly_kernel_call *call, ly_nn_conv_geometry *g);
/* The activation, then the post-affine when the geometry has one. */
float ly_nn_conv_finish(float x, const ly_nn_conv_geometry *g);

/* Output extent of a convolution or pooling window along one axis; < 1 when
 * the (dilated) window does not fit the padded input. */
int64_t ly_nn_out_extent(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation);

#endif
