/* SPDX-License-Identifier: MIT */
/*
 * The portable reference of every quantization slot: the oracle that accelerated
 * implementations must match bit for bit (forward and unpack) or within 1e-6
 * (backward). Single-threaded, literal PyTorch operation order.
 *
 * Each ly_ref_<slot> may assume the call passed the slot's validator
 * (src/ops/quant/contract.c). Operand contracts: include/libreyolo/quant.h.
 */
#ifndef LY_QUANT_REFERENCE_H
#define LY_QUANT_REFERENCE_H

#include "libreyolo/quant.h"
#include "ops/ops_internal.h"

/* The ly_ref_<op> functions are declared by ops/ops_internal.h (the manifest). */

/* ---- Shared pieces (also used by qparams.c and packing.c) ------------------------ */

/* A tensor seen as [outer, channels, inner] around `axis` (already made >= 0). */
typedef struct ly_axis_view {
    int64_t outer, channels, inner;
} ly_axis_view;
ly_axis_view ly_quant_axis_view(const ly_tensor *t, int64_t axis);

/* torch.amax(|x|) over n elements, NaN-propagating; 0 for n == 0. */
float ly_quant_amax(const float *x, int64_t n);

/* Per channel: amax|x| over every dim but the channel one, / divisor, clamped to
 * >= 1e-12 (divisor 127 for int8, 448 for fp8). */
void ly_quant_channel_scale(const float *x, ly_axis_view view, float divisor, float *scale);

/* Per group of `group_size` along the last dim of [rows, cols]: amax / qmax,
 * clamped to >= 1e-12. scale is [rows, ceil(cols / group_size)]. */
void ly_quant_group_scale(const float *w, int64_t rows, int64_t cols, int64_t group_size,
                          int64_t bits, float *scale);

/* int8_act_qparams: lo' = min(lo, 0), hi' = max(hi, 0), scale = max((hi'-lo')/255, 1e-12),
 * zp = int32(clamp(rint(-128 - lo'/scale), -128, 127)) (a NaN gives INT32_MIN, as
 * the x86 cast does). */
void ly_quant_int8_act_qparams(float lo, float hi, float *scale, int32_t *zero_point);

#endif
