/* SPDX-License-Identifier: MIT */
/*
 * Quantization: fake-quant (simulated quantization) slots, their qparams helpers,
 * and the packed checkpoint formats.
 *
 * Every fake-quant op is a registry slot whose portable reference (src/ops/quant/)
 * defines the numbers bit for bit, reproducing LibreYOLO's PyTorch reference
 * literally (see docs/numerics.md for each choice). All arithmetic is fp32.
 *
 * Slot operand contracts (in[] / out[] of ly_kernel_call; all f32 unless said,
 * all C-contiguous; "grad" has the shape of the forward input):
 *
 *  fake_quant_int8_per_channel         in: weight (ndim >= 1), scale [shape[axis]] or NULL
 *                                      params: axis            out: [weight shape]
 *  fake_quant_int8_affine              in: x, lo [1], hi [1]   out: [x shape]
 *  fake_quant_fp8                      in: x (ndim >= 1), scale (numel 1, or numel shape[0]
 *                                      broadcast along dim 0)  out: [x shape]
 *  fake_quant_int_grouped              in: weight [out, in], scale [out, ceil(in/g)] or NULL
 *                                      params: bits (2|4), group_size      out: [out, in]
 *  fake_quant_nvfp4_weight             in: weight (ndim >= 1), tensor_amax [1]   out: [shape]
 *  fake_quant_nvfp4_dynamic            in: x (ndim >= 1)       out: [x shape]
 *  fake_quant_mxfp4_weight             in: weight (ndim >= 1)  out: [shape]
 *  fake_quant_mxfp4_dynamic            in: x (ndim >= 1)       out: [x shape]
 *
 *  <op>_backward (one per op above)    in: grad, then the forward's inputs in order
 *                                      out: grad with respect to the first forward input
 *      int8_per_channel / int8_affine: grad where the unclamped rounded code lies in
 *      [-128, 127], else 0. fp8 / int_grouped: identity. nvfp4 / mxfp4: (grad*eff)/eff
 *      per block, as autograd computes it through `y = block/eff; out = q(y)*eff`.
 *
 *  unpack_int_grouped                  in: payload u8 [out, P], scale [out, ng]
 *                                      params: bits, group_size, in_features
 *                                      out: [out, in_features]  (P*8/bits == ng*g)
 *  unpack_nvfp4                        in: payload u8 [out, nb*8], block_scale (f8e4m3 or
 *                                      f32) [out, nb], tensor_amax [1]
 *                                      params: in_features     out: [out, in_features]
 *
 * Blocks (nvfp4: 16, mxfp4: 32) and groups run along the last dimension, padded
 * with zeros.
 */
#ifndef LIBREYOLO_QUANT_H
#define LIBREYOLO_QUANT_H

#include "libreyolo/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Constants of the formats. */
#define LY_E2M1_MAX 6.0f
#define LY_E4M3_MAX 448.0f
#define LY_NVFP4_BLOCK 16
#define LY_MXFP4_BLOCK 32
#define LY_QUANT_EPS 1e-12f

/* ---- Scalar conversions (exact; see docs/numerics.md) ---------------------- */

/* fp32 -> E4M3FN code, round to nearest even, non-saturating as PyTorch's c10
 * cast: |x| >= 480 after rounding, +-inf and NaN give 0x7F|sign. */
LY_API uint8_t ly_fp32_to_e4m3(float x);
/* E4M3FN code -> fp32 (exact; 0x7F/0xFF give NaN). */
LY_API float ly_e4m3_to_fp32(uint8_t code);

/* ---- Qparams helpers -------------------------------------------------------- */

/* amax|w| over every dim but `axis`, / 127, clamped to >= 1e-12. scale: f32 [shape[axis]]. */
LY_API ly_status ly_int8_weight_qparams(const ly_tensor *weight, int64_t axis, ly_tensor *scale);
/* lo' = min(lo,0), hi' = max(hi,0); scale = max((hi'-lo')/255, 1e-12);
 * zero_point = clamp(rint(-128 - lo'/scale), -128, 127). */
LY_API ly_status ly_int8_act_qparams(float lo, float hi, float *scale, int32_t *zero_point);
/* Per channel (default): amax over non-axis-0 dims / 448, clamped >= 1e-12.
 * Tensorwise: max|W| / 448 clamped, repeated. scale: f32 [shape[0]]. */
LY_API ly_status ly_fp8_weight_qparams(const ly_tensor *weight, bool tensorwise, ly_tensor *scale);
/* max(|lo|, |hi|) / 448. */
LY_API ly_status ly_fp8_act_qparams(float lo, float hi, float *scale);
/* Per group amax / qmax, clamped >= 1e-12. weight [out, in]; scale f32 [out, ceil(in/g)]. */
LY_API ly_status ly_int_group_qparams(const ly_tensor *weight, int64_t bits, int64_t group_size,
                                      ly_tensor *scale);

/* ---- Packed formats: the checkpoint contract (no variants) ------------------ */

/* int8: codes i8 [weight shape], scale f32 [shape[0]] (clamped >= 1e-12 on use). */
LY_API ly_status ly_pack_int8(const ly_tensor *weight, const ly_tensor *scale, ly_tensor *codes);
LY_API ly_status ly_unpack_int8(const ly_tensor *codes, const ly_tensor *scale, ly_tensor *out);

/* fp8: codes f8e4m3 (or u8) [weight shape] = e4m3(clamp(W/s, +-448)), s per dim 0. */
LY_API ly_status ly_pack_fp8(const ly_tensor *weight, const ly_tensor *scale, ly_tensor *codes);
LY_API ly_status ly_unpack_fp8(const ly_tensor *codes, const ly_tensor *scale, ly_tensor *out);

/* int4/int2 grouped: payload u8 [out, ceil(in/g)*g*bits/8], even column in the low bits. */
LY_API ly_status ly_pack_int_grouped(const ly_tensor *weight, const ly_tensor *scale, int64_t bits,
                                     int64_t group_size, ly_tensor *payload);
/* Dispatches the unpack_int_grouped slot. */
LY_API ly_status ly_unpack_int_grouped(const ly_tensor *payload, const ly_tensor *scale,
                                       int64_t bits, int64_t group_size, int64_t in_features,
                                       ly_tensor *out);

/* nvfp4: payload u8 [out, ceil(in/16)*8], block_scale f8e4m3 [out, ceil(in/16)];
 * tensor_amax f32 [1] is the max|W| captured by the caller. */
LY_API ly_status ly_pack_nvfp4(const ly_tensor *weight, const ly_tensor *tensor_amax,
                               ly_tensor *payload, ly_tensor *block_scale);
/* Dispatches the unpack_nvfp4 slot. */
LY_API ly_status ly_unpack_nvfp4(const ly_tensor *payload, const ly_tensor *block_scale,
                                 const ly_tensor *tensor_amax, int64_t in_features, ly_tensor *out);

/* mxfp4: payload u8 [out, ceil(in/32)*16], block_exp i8 [out, ceil(in/32)] (unbiased e, eff = 2^e).
 */
LY_API ly_status ly_pack_mxfp4(const ly_tensor *weight, ly_tensor *payload, ly_tensor *block_exp);
LY_API ly_status ly_unpack_mxfp4(const ly_tensor *payload, const ly_tensor *block_exp,
                                 int64_t in_features, ly_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
