/* SPDX-License-Identifier: MIT */
/*
 * Network-op slots. Each has a portable C reference (src/ops/nn/) that defines the
 * numbers and accelerated providers from optional libraries (oneDNN "onednn",
 * XNNPACK "xnnpack", OpenBLAS "openblas"), registered by name so
 * LIBREYOLO_KERNELS=onednn etc. selects one. Parity with the reference is within
 * a stated tolerance (summation order differs), not bit-exact.
 *
 * Operand contracts (f32, C-contiguous NCHW unless said):
 *
 *  conv2d              in: x [N, C, H, W], weight [O, C/groups, kh, kw], bias [O] or NULL,
 *                          residual [N, O, Ho, Wo] or NULL
 *                      params: stride, padding, dilation, groups, activation (+ alpha for
 *                      LY_ACT_LEAKY_RELU)
 *                      out: [N, O, Ho, Wo] = act(conv(x, weight) + bias) + residual,
 *                      or with post_affine (act(...) * post_scale + post_shift) + residual,
 *                      Ho = (H + 2*pad_h - dil_h*(kh-1) - 1) / stride_h + 1 (same for W)
 *  conv2d_int8         the convolution of a quantized Conv2d module (LibreYOLO's int8
 *                      recipe) on its codes:
 *                      in: x, weight codes [O, C/groups, kh, kw] (int8), bias, residual
 *                          as conv2d; weight scale [O] (f32); the input's calibrated
 *                          lo [1] and hi [1] (f32)
 *                      params: as conv2d
 *                      out: conv2d(fake_quant_int8_affine(x, lo, hi), codes * scale[o])
 *                      with bias, activation and residual as conv2d. The reference
 *                      computes exactly that in f32; an execute provider sums the
 *                      integer codes (exact in int32) and scales once per output
 *                      ("onednn_int8", on CPUs with VNNI: within 1e-4 of the
 *                      reference's f32 sums); "onednn" runs the definition on its
 *                      f32 convolution.
 *  max_pool2d          in: x   params: kernel, stride, padding (pads are -inf)
 *                      out: [N, C, Ho, Wo]
 *  avg_pool2d          in: x   params: kernel, stride, padding, count_include_pad
 *                      out: [N, C, Ho, Wo]
 *  upsample_nearest2d  in: x   params: scale   out: [N, C, H*scale, W*scale]
 *  concat              in: up to 8 tensors equal but on `axis`   params: axis
 *                      out: joined
 *  silu, sigmoid       in: x (any shape)                          out: [x shape]
 *  add                 in: a, b (any shape, the same)             out: a + b
 *  resize_bilinear2d   in: x [N, C, H, W]
 *                      params: size (Ho, Wo), align_corners, half_pixel_centers
 *                      out: [N, C, Ho, Wo], PyTorch's bilinear interpolation
 *                      (F.interpolate mode "bilinear"): source coordinate
 *                      s = scale * d with align_corners (scale (H-1)/(Ho-1)), else
 *                      max(scale * (d + 0.5) - 0.5, 0) with half_pixel_centers
 *                      (scale H/Ho; TF2 and PyTorch's default), else scale * d
 *                      (TF1's legacy resize); i0 = floor(s), i1 = min(i0 + 1, H - 1),
 *                      weights (1 - (s - i0), s - i0); out = h0 * (w0 * x00 + w1 * x01)
 *                      + h1 * (w0 * x10 + w1 * x11). Both flags set is refused (as TF).
 *  dfl                 in: x [N, 4*R, A] (side-major: channel = side*R + bin)
 *                      out: [N, 4, A] = sum_b b * softmax_b(x[side*R + b]) per side
 *  anchor_grid         in: x [N, C, H, W] (its shape only: the data is not read)
 *                      params: offset (0.5)
 *                      out: [1, 2, H*W], row 0 = x + offset, row 1 = y + offset for the
 *                      cells in row-major order (YOLO's anchor points in grid units)
 */
#ifndef LIBREYOLO_NN_H
#define LIBREYOLO_NN_H

#include "libreyolo/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif
