/* SPDX-License-Identifier: MIT */
/*
 * Multi-scale deformable attention (MSDeformAttn), the sampling core of the
 * deformable DETRs (Deformable-DETR, RT-DETR, D-FINE, DEIM/DEIMv2, RF-DETR, ...).
 *
 * Two registry slots. Their portable reference (src/ops/msda/)
 * defines the numbers bit for bit; docs/attention.md gives the exact operation
 * order, which every provider (AVX2 here, CUDA as a plugin) reproduces.
 *
 *  ms_deform_attn           in[0] value               f32 [B, Len_in, H, C]
 *                           in[1] spatial_shapes      i64 [L, 2], rows (h, w), each in [1, 2^24],
 *                                                     sum of h*w == Len_in, 1 <= L <= 16
 *                           in[2] sampling_locations  f32 [B, Lq, H, L, P, 2], (x, y) in [0, 1]
 *                                                     ragged: [B, Lq, H, sum(num_points), 2]
 *                           in[3] attention_weights   f32 [B, Lq, H, L, P]
 *                                                     ragged: [B, Lq, H, sum(num_points)]
 *                           in[4] num_points          i64 [L] or NULL (NULL: uniform P per level)
 *                           in[5]                     must be NULL
 *                           params.mode               LY_MSDA_BILINEAR (0) or LY_MSDA_DISCRETE (1)
 *                           out[0]                    f32 [B, Lq, H*C], head-major (h*C + c)
 *
 *  ms_deform_attn_backward  in[0] grad_output         f32 [B, Lq, H*C]
 *                           in[1..4]                  the forward's in[0..3]
 *                           in[5] num_points          i64 [L] or NULL
 *                           params.mode               as the forward
 *                           out[0] grad_value         f32 [B, Len_in, H, C]
 *                           out[1] grad_locations     f32, shape of sampling_locations
 *                           out[2] grad_attention_weights  f32, shape of attention_weights
 *
 * Bilinear mode is the grid_sample formulation every family's PyTorch code
 * runs (grid = 2*loc - 1, align_corners=False, zero padding). Discrete mode is
 * the deformable DETRs' nearest sampling (int64(loc*size + 0.5)) with their
 * clamp: both coordinates to [0, H_l - 1], as LibreYOLO clamps them (x also
 * to [0, W_l - 1], where LibreYOLO would index past the row); its location
 * gradient is 0. NaN results are written as the canonical quiet NaN
 * 0x7FC00000, so every provider gives the same bits.
 */
#ifndef LIBREYOLO_MSDA_H
#define LIBREYOLO_MSDA_H

#include "libreyolo/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LY_MSDA_BILINEAR 0
#define LY_MSDA_DISCRETE 1

/* Largest number of levels (every model known uses 1 to 5). */
#define LY_MSDA_MAX_LEVELS 16

/* Forward through the registry (validation, provider selection, fallback).
 * num_points may be NULL (uniform layout). threads: 0 = LIBREYOLO_THREADS or
 * all CPUs. */
LY_API ly_status ly_ms_deform_attn(const ly_tensor *value, const ly_tensor *spatial_shapes,
                                   const ly_tensor *sampling_locations,
                                   const ly_tensor *attention_weights, const ly_tensor *num_points,
                                   int mode, int threads, ly_tensor *out);

/* Backward through the registry: the three gradients of the forward's float
 * inputs. */
LY_API ly_status ly_ms_deform_attn_backward(const ly_tensor *grad_output, const ly_tensor *value,
                                            const ly_tensor *spatial_shapes,
                                            const ly_tensor *sampling_locations,
                                            const ly_tensor *attention_weights,
                                            const ly_tensor *num_points, int mode, int threads,
                                            ly_tensor *grad_value, ly_tensor *grad_locations,
                                            ly_tensor *grad_attention_weights);

#ifdef __cplusplus
}
#endif

#endif
